"""Memory of verified attempts (issue 18, RegenHarness §4.8): what worked before, and for whom.

Two kinds of record, both derived from a finished mission's journal events and nothing else:

* an **episode** (:class:`EpisodeRecord`): the goal, the contract's signature and JSON, the physical and
  capability calls that ran, how the mission ended and whether that end was *verified*;
* a **provider outcome** (:class:`ProviderOutcome`): one physical action or capability call, the
  provider it ran on, in which context, and its verified outcome.

What is guaranteed:

* **Nothing unverified is remembered as a success.** An episode is ``verified`` only when the mission
  ended SUCCEEDED and the verdict it ended on accepted done (``verified_done``) and was committed by the
  gate; a provider outcome is ``succeeded`` only when the call's receipt says SUCCEEDED and it is
  evidence the verifier would accept: for a physical action, the receipt written with its verified
  terminal outcome, which must agree; for a speech or a message, acknowledged by the device for exactly
  what was sent; for an image, its artifact's uri and sha256 (the verifier's own predicates,
  :func:`_evidence_accepted`). An accepted action with no verified outcome, and a speech or message
  nobody acknowledged, are ``unknown``, and ``unknown`` never counts as an attempt. An event that does
  not read is skipped and named in the provenance; skipping can only lower what is claimed.
* **A failure is the provider's only when the provider failed.** A goal the backend rejected before any
  motion is a ``failed`` attempt of that provider; the harness's own refusals (a duplicate request, a
  lease held, no provider) are nobody's attempt, and their receipts never replace another call's.
* **Derivation is pure and deterministic.** :func:`derive` takes one mission's events and the time to
  stamp; the same mission gives the same records, ids included (``ep-``/``po-`` + sha256 of the mission
  id and its MISSION_STARTED event id, the mission's identity in its journal).
* **Memory is append-only.** :class:`MemoryStore` (the tables ``memory_episodes`` and
  ``memory_provider_outcomes`` of the journal database, migration ``0005_memory``) never updates or
  deletes a row. Recording a mission again adds nothing when its derivation is unchanged, and a row
  that ``supersedes`` the previous one when it changed (a receipt journaled after the mission ended).
  :meth:`MemoryStore.forget` forgets a record's whole *chain* (the record, the ones it corrected and the
  corrections of it): per member, a *forgetting*, a copy of it with ``valid`` false, its own id
  (``fg-``), ``supersedes`` the forgotten id, and who and why in ``recorded_by`` and ``reason``. A
  forgotten record is never re-derived.
* **Retrieval reads only current, verified memory.** :func:`current` keeps the records that are valid,
  that no other record supersedes and whose chain has no forgotten record; :func:`retrieve` ranks
  current verified episodes by :func:`similarity` to a contract; :func:`provider_stats` counts current
  provider outcomes.
* **A row this code cannot read fails the read** (:class:`UnreadableMemory`, a ``JournalReadError``:
  exit 5 in the CLI), naming the table, the memory id and the field. It is not skipped: a forgetting or a
  correction skipped would bring back what it removed. :meth:`MemoryStore.record_mission` reads only
  its own mission's rows, so another mission's bad row does not stop it.
"""
from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .completion import (CAPTURE_SKILL, MESSAGE_SKILL, SPEAK_SKILL, Commit, CompletionContract, GoalVerdict, Receipt,
                         ReceiptStatus, Verdict)
from .errors import StaleRevision, UsageError
from .journal import Journal, JournalReadError
from .payloads import (
    CommitRecorded,
    ContractFrozen,
    LeaseAcquired,
    MissionFinished,
    MissionStarted,
    PayloadReadError,
    PayloadShapeError,
    ReceiptRecorded,
    RobotActionOutcome,
    RobotActionStarted,
    RobotActionStateChanged,
    ToolCallRecorded,
    ToolResultRecorded,
    VerdictRecorded,
    payload_of,
)
from .records import ActionStatus, EventType, JournalEvent, MissionStatus
from .execution.results import BACKEND_REJECTED, HARNESS_REFUSALS
from .routing import SKILL_CAPABILITY
from .skills import BEHAVIOR_SKILLS
# The verifier's own evidence predicates (what it accepts of a speech, a message, an image), so memory
# and the verifier cannot disagree on what a capability call proved.
from .verifier import _ack_problem, _arguments, _artifact_of, _io_result, _result_views

__all__ = ["FORMAT_VERSION", "EPISODES", "OUTCOMES", "BUILTIN_PROVIDER", "Verification", "AttemptOutcome",
           "UnknownMemory", "UnreadableMemory", "Signature", "PlanStep", "EpisodeRecord", "ProviderOutcome", "derive",
           "current", "states", "similarity", "retrieve", "provider_stats", "provider_summary", "few_shot", "fit",
           "MemoryStore"]

FORMAT_VERSION = 1
"""The memory records' format (``format_version`` of every row)."""
EPISODES = "memory_episodes"
OUTCOMES = "memory_provider_outcomes"
BUILTIN_PROVIDER = "builtin"
"""The provider of a capability call whose intent names none (the capability's one built-in provider)."""

KIND_WEIGHT = 0.6
"""The weight of the obligation kinds' (multiset) Jaccard in :func:`similarity`; the rest is the targets'."""


class Verification(str, enum.Enum):
    """How an episode ended, as far as evidence goes."""

    VERIFIED = "verified"
    """SUCCEEDED on a committed verifier verdict that accepted done: the only kind retrieval returns."""
    FAILED = "failed"
    """The mission ended FAILED or BLOCKED."""
    UNKNOWN = "unknown"
    """Anything else: cancelled, unknown, or SUCCEEDED without a committed accepting verdict."""


class AttemptOutcome(str, enum.Enum):
    """One provider's outcome of one call."""

    SUCCEEDED = "succeeded"
    """The receipt says SUCCEEDED and is evidence the verifier accepts (a verified physical outcome, an
    acknowledged speech or message, an image with its sha256)."""
    FAILED = "failed"
    """The receipt or the verified outcome says FAILED, or the backend rejected the goal before any motion."""
    UNKNOWN = "unknown"
    """No verified outcome (accepted only, cut short, contradictory, unacknowledged): not counted as an attempt."""


class UnknownMemory(UsageError, KeyError):
    """``forget`` was given a memory id that is not in the memory tables."""

    code = "unknown_memory"

    def __init__(self, memory_id: str) -> None:
        super().__init__(f"no memory record {memory_id!r}", memory_id=memory_id)
        self.memory_id = memory_id

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class UnreadableMemory(JournalReadError):
    """A memory row this code cannot read (a field a newer harness wrote, a hand edit): the read fails.

    Exit 5 in the CLI (a journal that cannot be trusted). ``table``, ``memory_id`` ("" when the row could
    not be told apart), ``field`` and ``seq`` say which row and what. Built as every ``HarnessError``
    (message and details), so a decision tape can record and raise it again; :meth:`of` words it."""

    code = "unreadable_memory"

    def __init__(self, message: str, *, table: str, memory_id: str = "", field: str = "",
                 seq: int | None = None) -> None:
        super().__init__(message, table=table, memory_id=memory_id, field=field, seq=seq)
        self.table, self.memory_id, self.field, self.seq = table, memory_id, field, seq

    @classmethod
    def of(cls, table: str, memory_id: str, field: str, why: str, *, seq: int | None = None,
           hint: str = "robot-harness memory export lists the rows as stored") -> UnreadableMemory:
        where = f"row {memory_id!r}" if memory_id else "a row"
        return cls(f"{table} {where}{f' (seq {seq})' if seq is not None else ''} does not read: {field}: {why}; "
                   f"memory cannot be used until it is fixed ({hint})",
                   table=table, memory_id=memory_id, field=field, seq=seq)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- records


class Signature(_Frozen):
    """What a contract asks for, without its wording: the canonical key episodes are compared on."""

    kinds: tuple[str, ...] = ()
    """The obligations' kinds, sorted, repeats kept (a multiset)."""
    places: tuple[str, ...] = ()
    """Every place named in the obligations (``place``, ``start``, ``waypoints``), sorted, once each."""
    recipients: tuple[str, ...] = ()
    """Every message recipient (``to``), sorted, once each."""

    @classmethod
    def of(cls, source: Signature | CompletionContract | Mapping[str, Any] | None) -> Signature:
        """The signature of a contract (the model or its JSON), or ``source`` itself when it is one
        (a ``Signature`` or its JSON); ``None`` or ``{}``: the empty signature."""
        if source is None or isinstance(source, Signature):
            return source or cls()
        if isinstance(source, CompletionContract):
            obligations: Iterable[Any] = [o.model_dump(mode="json") for o in source.obligations]
        elif isinstance(source, Mapping):
            if "obligations" not in source:
                return cls.model_validate(dict(source))
            obligations = source.get("obligations") or ()
        else:
            raise UsageError(f"a signature comes from a contract or a signature, not a {type(source).__name__}")
        kinds: list[str] = []
        places: set[str] = set()
        recipients: set[str] = set()
        for o in obligations:
            kinds.append(str(o.get("kind", "")))
            params = o.get("params") or {}
            for key in ("place", "start"):
                if isinstance(params.get(key), str):
                    places.add(params[key])
            places.update(w for w in params.get("waypoints") or () if isinstance(w, str))
            if isinstance(params.get("to"), str):
                recipients.add(params["to"])
        return cls(kinds=tuple(sorted(kinds)), places=tuple(sorted(places)), recipients=tuple(sorted(recipients)))


class PlanStep(_Frozen):
    """One physical or capability call that ran, as the journal recorded it."""

    skill: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    """The tool result's status (``accepted``, ``ok``, ``error``...); "" when none was recorded."""
    receipt: str = ""
    """The receipt's status (SUCCEEDED, FAILED, UNKNOWN); "" when none was written."""
    verified: bool = False
    """The call's provider outcome is ``succeeded`` (:class:`AttemptOutcome`)."""
    tool_call_id: str = ""
    action_id: str = ""
    proposed_by: str = "planner"
    """Who asked for the call: ``planner``, or ``recovery`` for a recovery behaviour."""


class _Memory(_Frozen):
    format_version: int = FORMAT_VERSION
    memory_id: str
    """Unique in its table; deterministic from the mission (``ep-``/``po-``), a correction's from what it
    corrects, a forgetting's (``fg-``) from what it forgets."""
    mission_id: str
    evidence_ids: tuple[str, ...] = ()
    provenance: dict[str, Any] = Field(default_factory=dict)
    """Where the record comes from: the journal event ids it was read from (and, for an episode, the
    configuration version the mission ran under); ``unreadable``: events skipped because they did not read."""
    recorded_at: float
    """The clock value the recorder passed in."""
    recorded_by: str = ""
    """Who appended the row: the recorder's name, or who forgot the record."""
    reason: str = ""
    """Why a correction or a forgetting was appended ("" for a first derivation)."""
    supersedes: str = ""
    """The memory id this record replaces (a correction) or forgets (``valid`` false); "" for none."""
    valid: bool = True
    """False only for a forgetting."""


class EpisodeRecord(_Memory):
    """One mission attempt: what was asked, what ran, how it ended and whether that end was verified."""

    kind: Literal["memory_episode"] = "memory_episode"
    goal: str = ""
    signature: Signature = Signature()
    contract: dict[str, Any] = Field(default_factory=dict)
    """The frozen contract the mission ended on (the accepting verdict's, else the last), JSON; {} if none."""
    plan: tuple[PlanStep, ...] = ()
    """The physical and capability calls that ran, in order (calls refused before running left out)."""
    outcome: str = ""
    """The mission's final status (MISSION_FINISHED)."""
    verification: Verification = Verification.UNKNOWN
    ended_at: float | None = None
    """When the mission finished (its MISSION_FINISHED stamp): "most recent" in retrieval."""


class ProviderOutcome(_Memory):
    """One call's outcome on the provider it ran on (what routing's success statistics count)."""

    kind: Literal["provider_outcome"] = "provider_outcome"
    provider: str
    """The intent's ``provider``; else, for a physical action, its ``backend``; else ``builtin``."""
    capability: str
    """The intent's ``capability``; else ``navigation`` for a physical action, the skill's class for a capability."""
    context: dict[str, str] = Field(default_factory=dict)
    """``skill``, and ``place`` when the call named one."""
    outcome: AttemptOutcome = AttemptOutcome.UNKNOWN
    action_id: str = ""
    """The robot action's id ("" for a capability call)."""
    tool_call_id: str = ""
    observed_at: float | None = None
    """When the outcome was observed (the receipt's end), if it was."""


Record = Union[EpisodeRecord, ProviderOutcome]
R = TypeVar("R", EpisodeRecord, ProviderOutcome)


# --------------------------------------------------------------------------- derivation


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


class _Mission:
    """One pass over one mission's events: the typed payloads memory reads, by the ids that join them."""

    def __init__(self, events: Sequence[JournalEvent]) -> None:
        self.started: tuple[JournalEvent, MissionStarted] | None = None
        self.finished: tuple[JournalEvent, MissionFinished] | None = None
        self.contracts: list[tuple[JournalEvent, CompletionContract]] = []
        self.verdicts: dict[str, tuple[JournalEvent, Verdict]] = {}
        self.commits: dict[str, tuple[JournalEvent, Commit]] = {}
        self.calls: dict[str, tuple[JournalEvent, ToolCallRecorded]] = {}
        self.results: dict[str, ToolResultRecorded] = {}
        self.receipts: dict[str, tuple[JournalEvent, Receipt]] = {}
        """By tool call id (a receipt's ``invocation_id``)."""
        self.actions: dict[str, tuple[JournalEvent, RobotActionStarted]] = {}
        self.action_of_call: dict[str, str] = {}
        """The robot action a tool call started (its last, were there several)."""
        self.action_outcomes: dict[str, tuple[JournalEvent, RobotActionOutcome]] = {}
        self.rejected: dict[str, JournalEvent] = {}
        """Robot actions the backend rejected before any motion (REQUESTED -> FAILED), by action id."""
        self.leases: dict[str, tuple[JournalEvent, dict[str, Any]]] = {}
        """A capability call's lease intent, by tool call id."""
        self.unreadable: list[str] = []
        for ev in events:
            try:
                self._feed(ev)
            except (PayloadReadError, PayloadShapeError):
                self.unreadable.append(ev.event_id)

    def _feed(self, ev: JournalEvent) -> None:
        t = ev.type
        if t is EventType.MISSION_STARTED and self.started is None:
            self.started = (ev, payload_of(ev, MissionStarted))
        elif t is EventType.MISSION_FINISHED:
            self.finished = (ev, payload_of(ev, MissionFinished))
        elif t is EventType.CONTRACT_FROZEN:
            contract = payload_of(ev, ContractFrozen).contract
            if contract is not None:
                self.contracts.append((ev, contract))
        elif t is EventType.VERDICT_RECORDED:
            v = payload_of(ev, VerdictRecorded).verdict
            self.verdicts[v.verdict_id] = (ev, v)
        elif t is EventType.COMMIT_RECORDED:
            c = payload_of(ev, CommitRecorded).commit
            self.commits[c.verdict_id] = (ev, c)
        elif t is EventType.TOOL_CALL_RECORDED:
            self.calls[ev.tool_call_id] = (ev, payload_of(ev, ToolCallRecorded))
        elif t is EventType.TOOL_RESULT_RECORDED:
            self.results[ev.tool_call_id] = payload_of(ev, ToolResultRecorded)
        elif t is EventType.RECEIPT_RECORDED:
            r = payload_of(ev, ReceiptRecorded).receipt
            if _refusal_code(r) not in HARNESS_REFUSALS:  # nobody's attempt, and it names another's action
                self.receipts[r.invocation_id] = (ev, r)
        elif t is EventType.ROBOT_ACTION_STARTED:
            self.actions[ev.robot_action_id] = (ev, payload_of(ev, RobotActionStarted))
            self.action_of_call[ev.tool_call_id] = ev.robot_action_id
        elif t is EventType.ROBOT_ACTION_OUTCOME:
            self.action_outcomes[ev.robot_action_id] = (ev, payload_of(ev, RobotActionOutcome))
        elif t is EventType.ROBOT_ACTION_STATE_CHANGED:
            change = payload_of(ev, RobotActionStateChanged)
            if change.to is ActionStatus.FAILED and change.from_ is ActionStatus.REQUESTED \
                    and change.reason.startswith(BACKEND_REJECTED):
                self.rejected[ev.robot_action_id] = ev
        elif t is EventType.LEASE_ACQUIRED:
            intent = payload_of(ev, LeaseAcquired).intent
            if isinstance(intent, dict) and intent.get("tool_call_id"):
                self.leases[str(intent["tool_call_id"])] = (ev, intent)

    def accepting_verdict(self, mission_id: str, verdict_id: str) -> tuple[JournalEvent, Verdict] | None:
        """The verdict the mission ended on, when it accepted done and the gate committed it."""
        found = self.verdicts.get(verdict_id) if verdict_id else None
        if found is None or verdict_id not in self.commits:
            return None
        _, v = found
        if v.goal_verdict is not GoalVerdict.VERIFIED_DONE or v.mission_id != mission_id:
            return None
        return found

    def receipt_of(self, tool_call_id: str, action_id: str = "") -> tuple[JournalEvent, Receipt] | None:
        found = self.receipts.get(tool_call_id)
        if found is None or (action_id and found[1].action_id not in ("", action_id)):
            return None
        return found

    def backend_rejected(self, receipt: Receipt, action_id: str) -> bool:
        """The backend rejected the action's goal before any motion, and the call's receipt says so: the
        lifecycle went REQUESTED -> FAILED ("rejected by the backend"), the receipt is REJECTED and names
        this action, and no verified outcome exists (there was nothing to verify)."""
        return (action_id in self.rejected and action_id not in self.action_outcomes
                and receipt.status is ReceiptStatus.REJECTED and receipt.action_id == action_id)

    def verified(self, receipt: Receipt | None, action_id: str) -> AttemptOutcome:
        """A call's outcome. A physical action: its receipt, which must agree with its verified outcome, or
        FAILED when the backend rejected it. A capability call: SUCCEEDED only when the verifier would take
        its SUCCEEDED receipt as evidence (:func:`_evidence_accepted`), FAILED when its receipt says FAILED."""
        if receipt is None:
            return AttemptOutcome.UNKNOWN
        if receipt.physical or action_id:
            state = self.action_outcomes[action_id][1].state if action_id in self.action_outcomes else None
            if receipt.status is ReceiptStatus.SUCCEEDED and state is ActionStatus.SUCCEEDED:
                return AttemptOutcome.SUCCEEDED
            if receipt.status is ReceiptStatus.FAILED or state is ActionStatus.FAILED \
                    or self.backend_rejected(receipt, action_id):
                return AttemptOutcome.FAILED
            return AttemptOutcome.UNKNOWN
        if receipt.status is ReceiptStatus.SUCCEEDED:
            return AttemptOutcome.SUCCEEDED if _evidence_accepted(receipt) else AttemptOutcome.UNKNOWN
        return AttemptOutcome.FAILED if receipt.status is ReceiptStatus.FAILED else AttemptOutcome.UNKNOWN




def _refusal_code(receipt: Receipt) -> str:
    return next((str(v["code"]) for v in _result_views(receipt) if isinstance(v.get("code"), str)), "")


def _evidence_accepted(receipt: Receipt) -> bool:
    """Whether the verifier would take this SUCCEEDED capability receipt as evidence of what the call did,
    by its own predicates (core/verifier.py), with no contract text or recipient to hold it against:

    * a speech or a message: the device's acknowledgement of exactly what was sent (``_ack_problem`` on
      the I/O result, as ``Verifier._speech_problems`` / ``_message_problems`` read it); none, malformed
      or of another payload is not evidence;
    * an image: its artifact's uri and sha256 (``_artifact_of``). The verifier also re-hashes the file;
      derivation reads the journal alone, so this is the receipt's claim, which the mission's verdict
      checked when it cited it.

    A skill the verifier has no such predicate for proves nothing here."""
    if receipt.skill == CAPTURE_SKILL:
        return _artifact_of(receipt) is not None
    if receipt.skill not in (SPEAK_SKILL, MESSAGE_SKILL):
        return False
    io = _io_result(receipt)
    if io is None:
        return False
    if receipt.skill == MESSAGE_SKILL:
        return _ack_problem(receipt.receipt_id, io, sent_sha_key="sha256", message=True) is None
    said = _arguments(receipt).get("text")
    sent = hashlib.sha256(said.encode()).hexdigest() if isinstance(said, str) else None
    return _ack_problem(receipt.receipt_id, io, sent_sha_key="text_sha256", expected_sha=sent, message=False) is None


def _place(arguments: Mapping[str, Any]) -> dict[str, str]:
    place = arguments.get("place")
    return {"place": place} if isinstance(place, str) and place else {}


_NOT_RUN = frozenset({"rejected", "precondition_changed", "skipped", "cancelled", "denied"})


def derive(events: Sequence[JournalEvent], *, now: float) -> tuple[list[EpisodeRecord], list[ProviderOutcome]]:
    """The episode and provider outcomes of one finished mission, from its journal events (seq order).

    A mission with no MISSION_STARTED or no MISSION_FINISHED (still running, or refused) gives nothing.
    ``now`` is every record's ``recorded_at``. Events of more than one mission are a ``UsageError``.
    """
    events = list(events)
    if not events:
        return [], []
    missions = {e.mission_id for e in events}
    if len(missions) != 1 or "" in missions:
        raise UsageError("derive takes the events of one mission", missions=sorted(missions))
    m = _Mission(events)
    if m.started is None or m.finished is None:
        return [], []
    identity = (events[0].mission_id, m.started[0].event_id)
    base: dict[str, Any] = {"mission_started": m.started[0].event_id, "mission_finished": m.finished[0].event_id}
    if m.unreadable:
        base["unreadable"] = list(m.unreadable)
    return [_episode(m, identity, base, now=now)], _provider_outcomes(m, identity, base, now=now)


def _episode(m: _Mission, identity: tuple[str, str], base: dict[str, Any], *, now: float) -> EpisodeRecord:
    assert m.started is not None and m.finished is not None
    mission_id = identity[0]
    started, (finished_ev, finished) = m.started[1], m.finished
    accepting = m.accepting_verdict(mission_id, finished.verdict_id)
    if finished.status == MissionStatus.SUCCEEDED.value and accepting is not None:
        verification = Verification.VERIFIED
    elif finished.status in (MissionStatus.FAILED.value, MissionStatus.BLOCKED.value):
        verification = Verification.FAILED
    else:
        verification = Verification.UNKNOWN
    # the verdict the mission ended on (else its last), and the contract that verdict judged (else the last)
    verdict = accepting or m.verdicts.get(finished.verdict_id) or (list(m.verdicts.values())[-1] if m.verdicts
                                                                   else None)
    judged = (verdict[1].contract_id, verdict[1].contract_revision) if verdict else None
    contract = next((c for c in reversed(m.contracts) if (c[1].contract_id, c[1].revision) == judged),
                    m.contracts[-1] if m.contracts else None)
    commit = m.commits.get(verdict[1].verdict_id) if verdict else None
    provenance = {**base, "contract_frozen": contract[0].event_id if contract else "",
                  "verdict": verdict[0].event_id if verdict else "", "commit": commit[0].event_id if commit else ""}
    for key in ("config_version", "config_hash"):
        if key in started.model_fields_set:
            provenance[key] = getattr(started, key)
    if accepting is not None:
        evidence = [*accepting[1].evidence_ids, m.commits[accepting[1].verdict_id][1].commit_id]
    else:
        evidence = list(finished.evidence_ids)
    return EpisodeRecord(
        memory_id="ep-" + _digest(*identity), mission_id=mission_id, goal=started.goal,
        signature=Signature.of(contract[1] if contract else None),
        contract=contract[1].model_dump(mode="json") if contract else {}, plan=_plan(m),
        outcome=finished.status, verification=verification, evidence_ids=tuple(dict.fromkeys(evidence)),
        provenance=provenance, ended_at=finished_ev.stamp, recorded_at=now)


def _plan(m: _Mission) -> tuple[PlanStep, ...]:
    """The physical and capability calls that ran, in the order they were asked for."""
    plan: list[PlanStep] = []
    for call_id, (_, call) in m.calls.items():
        receipt = m.receipt_of(call_id)
        action_id = m.action_of_call.get(call_id, "")
        physical = bool(action_id) or (receipt is not None and receipt[1].physical)
        if not physical and call.name not in SKILL_CAPABILITY:
            continue
        result = m.results.get(call_id)
        status = result.status.value if result is not None and result.status is not None else ""
        if (receipt is not None and receipt[1].status is ReceiptStatus.REJECTED) or (
                receipt is None and not action_id and status in _NOT_RUN):
            continue  # refused before it ran
        plan.append(PlanStep(
            skill=call.name, arguments=dict(call.arguments), result=status,
            receipt=receipt[1].status.value if receipt is not None else "",
            verified=m.verified(receipt[1] if receipt else None, action_id) is AttemptOutcome.SUCCEEDED,
            tool_call_id=call_id, action_id=action_id, proposed_by=call.proposed_by))
    return tuple(plan)


def _provider_outcomes(m: _Mission, identity: tuple[str, str], base: dict[str, Any], *,
                       now: float) -> list[ProviderOutcome]:
    out: list[ProviderOutcome] = []

    def add(key: str, *, provider: str, capability: str, context: dict[str, str], action_id: str,
            tool_call_id: str, receipt: tuple[JournalEvent, Receipt] | None, provenance: dict[str, Any]) -> None:
        r = receipt[1] if receipt else None
        out.append(ProviderOutcome(
            memory_id="po-" + _digest(*identity, key), mission_id=identity[0], provider=provider,
            capability=capability, context=context, outcome=m.verified(r, action_id), action_id=action_id,
            tool_call_id=tool_call_id, evidence_ids=tuple(r.evidence_ids()) if r else (),
            provenance={**base, **provenance, "receipt": receipt[0].event_id if receipt else ""},
            observed_at=r.ended_at if r else None, recorded_at=now))

    for action_id, (ev, started) in m.actions.items():
        intent = started.intent
        skill = started.action.skill or (m.calls[ev.tool_call_id][1].name if ev.tool_call_id in m.calls else "")
        arguments = intent.arguments if intent is not None else {}
        ended = m.action_outcomes.get(action_id)
        rejected = {"action_rejected": m.rejected[action_id].event_id} if action_id in m.rejected else {}
        add(f"action:{action_id}", provider=str((intent.provider or intent.backend if intent else "")
                                                or BUILTIN_PROVIDER),
            capability=str((intent.capability if intent else "") or "navigation"), context={"skill": skill, **_place(arguments)},
            action_id=action_id, tool_call_id=ev.tool_call_id, receipt=m.receipt_of(ev.tool_call_id, action_id),
            provenance={"action_started": ev.event_id, "action_outcome": ended[0].event_id if ended else "",
                        **rejected})

    for call_id, (ev, call) in m.calls.items():
        lease = m.leases.get(call_id)
        intent = lease[1] if lease else {}
        if call.name not in SKILL_CAPABILITY and not intent.get("capability"):
            continue
        receipt = m.receipt_of(call_id)
        if receipt is None and lease is None:
            continue  # never reached a provider (refused, or the mission ended first)
        if receipt is not None and (receipt[1].physical or receipt[1].status is ReceiptStatus.REJECTED):
            continue
        add(f"call:{call_id}", provider=str(intent.get("provider") or BUILTIN_PROVIDER),
            capability=str(intent.get("capability") or SKILL_CAPABILITY.get(call.name, "")),
            context={"skill": call.name, **_place(call.arguments)}, action_id="", tool_call_id=call_id,
            receipt=receipt, provenance={"tool_call": ev.event_id, "lease": lease[0].event_id if lease else ""})
    return out


# --------------------------------------------------------------------------- reading memory


def _roots(records: Sequence[Record]) -> dict[str, str]:
    """Each record's chain, by memory id: the id of the first record of its chain (the one no valid record
    before it was corrected into). A correction supersedes one record, so chains are trees under it; a
    forgetting is a chain of its own."""
    up = {r.memory_id: r.supersedes for r in records if r.valid and r.supersedes}
    root: dict[str, str] = {}
    for r in records:
        path, x = [], r.memory_id
        while x in up and x not in root and x not in path:  # ``not in path``: a hand-edited cycle ends here
            path.append(x)
            x = up[x]
        top = root.get(x, x)
        root.update(dict.fromkeys(path, top))
        root.setdefault(r.memory_id, top)
    return root


def _forgotten(records: Sequence[Record]) -> set[str]:
    """The ids of the records forgotten: every record of a chain that has a forgotten record (so a journal
    written when ``forget`` forgot one record of a chain reads as if it had forgotten the chain)."""
    gone = {r.supersedes for r in records if r.supersedes and not r.valid}
    if not gone:
        return gone
    root = _roots(records)
    dead = {root.get(g, g) for g in gone}
    return {mid for mid, top in root.items() if top in dead} | gone


def current(records: Iterable[R]) -> list[R]:
    """The records in force: valid, superseded by no record among ``records`` (a correction or a
    forgetting), and of a chain none of whose records is forgotten, in their order."""
    records = list(records)
    superseded = {r.supersedes for r in records if r.supersedes}
    forgotten = _forgotten(records)
    return [r for r in records if r.valid and r.memory_id not in superseded and r.memory_id not in forgotten]


def states(records: Iterable[Record]) -> dict[str, str]:
    """Each record's state, by memory id: ``current``, ``superseded`` (by a correction), ``forgotten``
    (it or another record of its chain is forgotten) or ``forgetting`` (a forgetting itself)."""
    records = list(records)
    forgotten = _forgotten(records)
    replaced = {r.supersedes for r in records if r.supersedes and r.valid}
    return {r.memory_id: "forgetting" if not r.valid else "forgotten" if r.memory_id in forgotten
            else "superseded" if r.memory_id in replaced else "current" for r in records}


def _multiset_jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    ca: dict[str, int] = {}
    cb: dict[str, int] = {}
    for x in a:
        ca[x] = ca.get(x, 0) + 1
    for x in b:
        cb[x] = cb.get(x, 0) + 1
    keys = ca.keys() | cb.keys()
    top = sum(max(ca.get(k, 0), cb.get(k, 0)) for k in keys)
    return sum(min(ca.get(k, 0), cb.get(k, 0)) for k in keys) / top if top else 0.0


def _targets(s: Signature) -> set[str]:
    return {*s.places, *(f"to:{r}" for r in s.recipients)}


def similarity(a: Signature | CompletionContract | Mapping[str, Any],
               b: Signature | CompletionContract | Mapping[str, Any]) -> float:
    """How alike two contracts' demands are, in [0, 1], deterministic and symmetric:
    ``KIND_WEIGHT`` x the obligation kinds' multiset Jaccard + the rest x the Jaccard of their places and
    recipients (two signatures naming none match on that part). 0 when no obligation kind is shared."""
    sa, sb = Signature.of(a), Signature.of(b)
    kinds = _multiset_jaccard(sa.kinds, sb.kinds)
    if kinds == 0.0:
        return 0.0
    ta, tb = _targets(sa), _targets(sb)
    targets = len(ta & tb) / len(ta | tb) if ta | tb else 1.0
    return round(KIND_WEIGHT * kinds + (1.0 - KIND_WEIGHT) * targets, 9)


def retrieve(episodes: Iterable[EpisodeRecord],
             contract_or_signature: Signature | CompletionContract | Mapping[str, Any], k: int) -> list[EpisodeRecord]:
    """Up to ``k`` current, verified episodes like the contract: the most similar first, then the most
    recently ended, then by memory id. Similarity 0 is never returned."""
    if k < 0:
        raise UsageError("k must be >= 0", k=k)
    want = Signature.of(contract_or_signature)
    ranked = [(similarity(e.signature, want), e) for e in current(episodes) if e.verification is Verification.VERIFIED]
    ranked = [(s, e) for s, e in ranked if s > 0.0]
    ranked.sort(key=lambda se: (-se[0], -(se[1].ended_at or 0.0), se[1].memory_id))
    return [e for _, e in ranked[:k]]


def provider_stats(outcomes: Iterable[ProviderOutcome], capability: str,
                   context: Mapping[str, str] | None = None) -> dict[str, tuple[int, int]]:
    """provider -> (verified successes, attempts with a known outcome) over the current outcomes of
    ``capability``; ``context`` keeps only outcomes whose context has each given key and value (e.g.
    ``{"place": "kitchen"}``). A provider whose outcomes are all unknown is listed with (0, 0)."""
    counts: dict[str, list[int]] = {}
    for o in current(outcomes):
        if o.capability != capability or any(o.context.get(k) != v for k, v in (context or {}).items()):
            continue
        c = counts.setdefault(o.provider, [0, 0])
        if o.outcome is AttemptOutcome.SUCCEEDED:
            c[0] += 1
        if o.outcome is not AttemptOutcome.UNKNOWN:
            c[1] += 1
    return {p: (c[0], c[1]) for p, c in sorted(counts.items())}


def provider_summary(outcomes: Iterable[ProviderOutcome]) -> list[dict[str, Any]]:
    """One row per capability and provider over the current outcomes: succeeded, failed, unknown, attempts."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for o in current(outcomes):
        row = rows.setdefault((o.capability, o.provider), {"capability": o.capability, "provider": o.provider,
                                                           "succeeded": 0, "failed": 0, "unknown": 0})
        row[o.outcome.value] += 1
    return [{**r, "attempts": r["succeeded"] + r["failed"]} for _, r in sorted(rows.items())]


def few_shot(episodes: Iterable[EpisodeRecord]) -> list[dict[str, Any]]:
    """The planner's examples: per verified episode, its goal and the steps that verified (skill and
    arguments, in order: the planner's own, and a call recovery re-ran on another provider, but not the
    Nav2 behaviours recovery ran), and its memory id (which memory the planner was shown). Episodes that
    are not verified are left out."""
    return [{"goal": e.goal,
             "plan": [{"skill": s.skill, "arguments": s.arguments} for s in e.plan
                      if s.verified and not (s.proposed_by == "recovery" and s.skill in BEHAVIOR_SKILLS)],
             "outcome": Verification.VERIFIED.value, "memory_id": e.memory_id}
            for e in episodes if e.verification is Verification.VERIFIED]


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode())


def fit(examples: Sequence[dict[str, Any]], max_bytes: int) -> list[dict[str, Any]]:
    """The longest prefix of ``examples`` whose compact JSON is at most ``max_bytes`` bytes (the list is
    ranked, so the least similar go first)."""
    out = list(examples)
    while out and _size(out) > max_bytes:
        out.pop()
    return out


# --------------------------------------------------------------------------- the store


_MODELS: dict[str, type[EpisodeRecord] | type[ProviderOutcome]] = {EPISODES: EpisodeRecord, OUTCOMES: ProviderOutcome}
_MUTABLE = {"memory_id", "recorded_at", "recorded_by", "reason", "supersedes", "valid"}
_ATTEMPTS = 5


def _content(r: Record) -> str:
    return json.dumps(r.model_dump(mode="json", exclude=_MUTABLE), sort_keys=True)


def _row(r: Record) -> dict[str, Any]:
    return {**r.model_dump(mode="json", exclude={"kind"}), "valid": int(r.valid)}


@dataclass(eq=False)
class MemoryStore:
    """Episodes and provider outcomes in the journal database (``Journal.add_memory_row``); the only
    writer of the memory tables. Append-only: see the module's docstring."""

    journal: Journal

    # -- writing --------------------------------------------------------------

    def record_mission(self, mission_id: str, *, now: float, by: str = "derive") -> tuple[int, int]:
        """Derive the mission's memory from its journal events and append what is new: (episodes, outcomes)
        rows added. Idempotent: an unchanged derivation adds nothing, an unfinished mission nothing yet.
        An unknown mission is a ``UsageError``."""
        events = self.journal.events(mission_id=mission_id)
        if not events:
            raise UsageError(f"no mission {mission_id!r} in the journal", mission_id=mission_id)
        episodes, outcomes = derive(events, now=now)
        # a mission's records, their corrections and their forgettings all carry its id: its rows are all
        # this needs (an indexed read, whatever the size of memory)
        return (len(self._append(EPISODES, episodes, by, mission_id=mission_id)),
                len(self._append(OUTCOMES, outcomes, by, mission_id=mission_id)))

    def record_all(self, *, now: float, by: str = "derive") -> dict[str, tuple[int, int]]:
        """``record_mission`` for every finished mission in the journal (a backfill), in journal order:
        mission id -> (episodes, outcomes) rows added."""
        finished = [m["mission_id"] for m in self.journal.missions() if m.get("status")]
        episodes: list[EpisodeRecord] = []
        outcomes: list[ProviderOutcome] = []
        for mid in finished:
            e, o = derive(self.journal.events(mission_id=mid), now=now)
            episodes += e
            outcomes += o
        added_e = [r.mission_id for r in self._append(EPISODES, episodes, by)]
        added_o = [r.mission_id for r in self._append(OUTCOMES, outcomes, by)]
        return {mid: (added_e.count(mid), added_o.count(mid)) for mid in finished}

    def forget(self, memory_id: str, *, by: str, reason: str, now: float) -> EpisodeRecord | ProviderOutcome:
        """Forget ``memory_id`` and its whole chain (the records it corrected and the corrections of it):
        append a forgetting (who and why) of each that has none, and return ``memory_id``'s. Nothing is
        deleted or changed; forgetting again appends only what a chain grown since lacks, and returns the
        same forgetting. ``UnknownMemory`` for an id not in memory."""
        if not by.strip() or not reason.strip():
            raise UsageError("a forgetting names who forgets and why (by, reason)")
        for table in (EPISODES, OUTCOMES):
            for _ in range(_ATTEMPTS):
                last, records = self._read(table)
                target = next((r for r in records if r.memory_id == memory_id), None)
                if target is None:
                    break
                if not target.valid:
                    raise UsageError(f"{memory_id} is a forgetting, not a memory", memory_id=memory_id)
                done = {r.supersedes: r for r in records if r.supersedes and not r.valid}
                root = _roots(records)
                chain = [target, *(r for r in records if r.valid and r is not target
                                   and root[r.memory_id] == root[memory_id])]
                tombs = [r.model_copy(update={
                    "memory_id": "fg-" + _digest(r.memory_id), "supersedes": r.memory_id, "valid": False,
                    "recorded_at": now, "recorded_by": by,
                    "reason": reason if r is target else f"{reason} (forgotten with {memory_id}, of its chain)"})
                    for r in chain if r.memory_id not in done]
                try:
                    for tomb in tombs:
                        last = self.journal.add_memory_row(table, _row(tomb), expected_last_key=last)
                except StaleRevision:
                    continue  # another writer appended: read again (what this one appended counts as done)
                return done.get(memory_id) or tombs[0]
            else:
                raise StaleRevision(f"{table} kept moving while {memory_id} was being forgotten", table=table)
        raise UnknownMemory(memory_id)

    def _append(self, table: str, derived: Sequence[R], by: str, *, mission_id: str | None = None) -> list[R]:
        """Append what ``derived`` adds to ``table`` (see ``_Chains.successor``); the rows appended.
        ``mission_id``: every record of ``derived`` is that mission's, so only its rows are read."""
        added: list[R] = []
        for _ in range(_ATTEMPTS):
            last, records = self._read(table, mission_id=mission_id)
            chains = _Chains(records)
            try:
                for rec in derived:
                    new = chains.successor(rec, by)
                    if new is None:
                        continue
                    last = self.journal.add_memory_row(table, _row(new), expected_last_key=last)
                    chains.add(new)
                    added.append(new)
                return added
            except StaleRevision:
                continue  # another writer appended: read again; what this one added is there now
        raise StaleRevision(f"{table} kept moving while a mission was being recorded", table=table)

    # -- reading --------------------------------------------------------------

    def _read(self, table: str, *, mission_id: str | None = None) -> tuple[int, list[Any]]:
        """The table's last ``seq`` and its records (``mission_id``: only that mission's). The last seq is
        read first: a row appended in between is then among the records, and the next append is refused
        as stale either way. ``UnreadableMemory`` when a row does not read."""
        if mission_id is None:
            rows = self._rows(table)
            last = rows[-1]["seq"] if rows else -1
        else:
            last = self.journal.memory_last_seq(table)
            rows = self._rows(table, mission_id=mission_id)
        return last, [_validate(table, r) for r in rows]

    def _rows(self, table: str, **only: str) -> list[dict[str, Any]]:
        try:
            return self.journal.memory_rows(table, **only)
        except json.JSONDecodeError as exc:  # a JSON column edited by hand: the journal cannot say which row
            raise UnreadableMemory.of(table, "", "a JSON column", f"not JSON ({exc})",
                                   hint=f"sqlite-utils rows JOURNAL {table} shows the text stored") from exc

    def episodes(self, include_forgotten: bool = False) -> list[EpisodeRecord]:
        """The current episodes in append order; ``include_forgotten``: every row (superseded ones, forgotten
        ones and the forgettings themselves)."""
        records = self._read(EPISODES)[1]
        return records if include_forgotten else current(records)

    def outcomes(self, include_forgotten: bool = False) -> list[ProviderOutcome]:
        """The current provider outcomes in append order; ``include_forgotten`` as for ``episodes``."""
        records = self._read(OUTCOMES)[1]
        return records if include_forgotten else current(records)

    def examples(self, contract: Signature | CompletionContract | Mapping[str, Any], k: int) -> list[dict[str, Any]]:
        """The planner's examples, JSON-ready: :func:`few_shot` of the up to ``k`` verified episodes most like
        ``contract`` (:func:`retrieve`), most similar first; :func:`fit` trims them to a byte budget."""
        return few_shot(retrieve(self.episodes(), contract, k))

    def provider_stats(self, capability: str, context: Mapping[str, str] | None = None) -> dict[str, tuple[int, int]]:
        """provider -> (verified successes, attempts with a known outcome) (:func:`provider_stats`)."""
        return provider_stats(self.outcomes(), capability, context)

    def export(self) -> list[dict[str, Any]]:
        """Every row of both tables as stored (forgotten and superseded ones too), ``table`` added."""
        return [{"table": table, **row} for table in (EPISODES, OUTCOMES) for row in self._rows(table)]


def _validate(table: str, row: dict[str, Any]) -> Record:
    """One row as its record; ``UnreadableMemory`` naming the row and the first field that does not read
    (a value a newer harness wrote, a hand edit), or a format newer than this code's."""
    seq = row.pop("seq", None)
    try:
        record = _MODELS[table].model_validate(row)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "row"
        raise UnreadableMemory.of(table, str(row.get("memory_id") or ""), field, first["msg"], seq=seq) from exc
    if record.format_version > FORMAT_VERSION:
        raise UnreadableMemory.of(table, record.memory_id, "format_version",
                               f"format {record.format_version} is newer than this harness reads ({FORMAT_VERSION})",
                               seq=seq)
    return record


class _Chains:
    """A memory table's records by id, with who supersedes whom (corrections) and what is forgotten."""

    def __init__(self, records: Iterable[Record]) -> None:
        self.by_id: dict[str, Record] = {}
        self.corrected_by: dict[str, Record] = {}
        self.forgotten: set[str] = set()
        for r in records:
            self.add(r)

    def add(self, r: Record) -> None:
        self.by_id[r.memory_id] = r
        if r.supersedes and r.valid:
            self.corrected_by[r.supersedes] = r
        elif r.supersedes:
            self.forgotten.add(r.supersedes)

    def successor(self, rec: R, by: str) -> R | None:
        """What to append for a fresh derivation ``rec``: ``rec`` itself when its mission's record is new;
        nothing when the record in force says the same, or the record was forgotten; else a correction that
        supersedes the record in force."""
        head = self.by_id.get(rec.memory_id)
        if head is None:
            return rec.model_copy(update={"recorded_by": by})
        while True:
            if head.memory_id in self.forgotten:
                return None
            nxt = self.corrected_by.get(head.memory_id)
            if nxt is None:
                break
            head = nxt
        if _content(head) == _content(rec):
            return None
        prefix = rec.memory_id.split("-", 1)[0]
        return rec.model_copy(update={
            "memory_id": f"{prefix}-{_digest(rec.memory_id, head.memory_id, _content(rec))}",
            "supersedes": head.memory_id, "recorded_by": by,
            "reason": "derived again from the journal: the record in force no longer matches"})
