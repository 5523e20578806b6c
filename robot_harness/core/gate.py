"""The commit gate: the only route from a verifier's verdict to committed task state.

Task state is derived from the journal (the source of truth), never kept on
the side. It is folded from these event types; each payload is its
``core/payloads.py`` model, carrying one record (read and written through the
payloads' one adapter):

* ``CONTRACT_FROZEN``   ``ContractFrozen(contract=CompletionContract)`` — a new revision; state-changing.
  (``error`` without a contract records a failed compilation and changes nothing.)
* ``RECEIPT_RECORDED``  ``ReceiptRecorded(receipt=Receipt)`` — state-changing.
* ``VERDICT_RECORDED``  ``VerdictRecorded(verdict=Verdict)`` — not state-changing.
* ``COMMIT_RECORDED``   ``CommitRecorded(commit=Commit)`` — state-changing (``state_version_after = before + 1``).
* ``FACT_RECORDED``     ``FactRecorded(fact=Fact)`` — not state-changing (facts ride on a commit or an observation).
* ``MISSION_STARTED``   ``MissionStarted(goal=...)`` — gives the original goal.

``state_version`` is the number of state-changing records so far. A verdict
is bound to the state version it judged; the gate accepts it only while that
is still the current version, so a verdict from an earlier attempt is
rejected, never reinterpreted. Accepting a verdict and updating task facts is
one atomic transition: ``commit_drafts`` gives the records the engine appends
in one journal transaction.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from .clock import Clock, IdGenerator
from .completion import (
    Commit,
    CompletionContract,
    Fact,
    FactStatus,
    GoalVerdict,
    Receipt,
    StepVerdict,
    Verdict,
)
from .errors import RefusalError, UsageError
from .journal import JournalReadError
from .payloads import (
    CommitRecorded,
    ContractFrozen,
    EventPayload,
    FactRecorded,
    MissionStarted,
    PayloadReadError,
    ReceiptRecorded,
    VerdictRecorded,
    payload_dict,
    payload_of,
)
from .records import EventType, JournalEvent

__all__ = [
    "CONTRACT_FROZEN",
    "RECEIPT_RECORDED",
    "VERDICT_RECORDED",
    "COMMIT_RECORDED",
    "FACT_RECORDED",
    "MISSION_STARTED",
    "STATE_CHANGING",
    "OBLIGATION_FACT_PREFIX",
    "TaskState",
    "TaskStateFold",
    "GateRejection",
    "CommitGate",
    "observe_fact",
    "record_draft",
    "commit_drafts",
    "original_goal_check",
]

# The journal's own names (records.EventType), not a second spelling of them.
CONTRACT_FROZEN = EventType.CONTRACT_FROZEN.value
RECEIPT_RECORDED = EventType.RECEIPT_RECORDED.value
VERDICT_RECORDED = EventType.VERDICT_RECORDED.value
COMMIT_RECORDED = EventType.COMMIT_RECORDED.value
FACT_RECORDED = EventType.FACT_RECORDED.value
MISSION_STARTED = EventType.MISSION_STARTED.value
STATE_CHANGING = frozenset({CONTRACT_FROZEN, RECEIPT_RECORDED, COMMIT_RECORDED})
_FOLDED = frozenset({MISSION_STARTED, CONTRACT_FROZEN, RECEIPT_RECORDED, VERDICT_RECORDED, COMMIT_RECORDED,
                     FACT_RECORDED})
"""The event types the task state is folded from (others are skipped unread)."""
OBLIGATION_FACT_PREFIX = "obligation:"
"""Fact keys under this prefix are written only by the gate (status COMMITTED)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GateRejection(RefusalError):
    """The commit gate refused a verdict; ``field`` names what did not match."""

    code = "gate_rejected"

    def __init__(self, message: str, *, field: str, expected: Any = None, actual: Any = None, **details: Any) -> None:
        super().__init__(message, field=field, expected=expected, actual=actual, **details)
        self.field = field
        self.expected = expected
        self.actual = actual


class TaskState(_Frozen):
    """A mission's task state as the journal says it is (rebuilt, never mutated)."""

    mission_id: str
    goal: str = ""
    """The original goal (``MISSION_STARTED``); empty if the journal did not say."""
    contract: CompletionContract | None = None
    """The current contract revision."""
    state_version: int = 0
    receipts: tuple[Receipt, ...] = ()
    """Every receipt of the mission, of every contract revision."""
    facts: tuple[Fact, ...] = ()
    """Observed and committed facts, in journal order (superseded ones included)."""
    committed: tuple[str, ...] = ()
    """Obligation ids committed under the *current* contract revision."""
    done: bool = False
    """Every obligation of the current contract revision is committed."""

    @classmethod
    def from_records(cls, records: Iterable[tuple[str, Mapping[str, Any]]], *, mission_id: str = "") -> TaskState:
        """Fold ``(type, payload)`` pairs, in journal order, into the task state.

        Records of other types are skipped. Raises ``JournalReadError`` when
        the records cannot describe one consistent mission (a revision out of
        sequence, a commit that does not follow its verdict or the current
        state version, records of two missions).
        """
        fold = TaskStateFold(mission_id)
        fold.feed_records(records)
        return fold.state

    @classmethod
    def from_events(cls, events: Iterable[Any], *, mission_id: str | None = None) -> TaskState:
        """``from_records`` over ``JournalEvent``-like objects (``.type``, ``.payload``, ``.mission_id``) or pairs.

        With ``mission_id``, events stamped with another mission are skipped
        (a journal holds many missions).
        """

        fold = TaskStateFold(mission_id or "")
        fold.feed(events, mission_id=mission_id)
        return fold.state

    def head_fact(self, key: str, status: FactStatus) -> Fact | None:
        """The newest fact for ``key`` with ``status`` (the one a new fact would supersede)."""
        for f in reversed(self.facts):
            if f.key == key and f.status is status:
                return f
        return None


class _Builder:
    def __init__(self, mission_id: str) -> None:
        self.mission_id = mission_id
        self.goal = ""
        self.contract: CompletionContract | None = None
        self.state_version = 0
        self.receipts: list[Receipt] = []
        self.receipt_ids: set[str] = set()
        self.facts: list[Fact] = []
        self.fact_ids: set[str] = set()
        self.verdict_ids: set[str] = set()
        self.committed: list[str] = []

    def _own(self, mission_id: str, what: str) -> None:
        if not mission_id:
            return
        if not self.mission_id:
            self.mission_id = mission_id
        elif mission_id != self.mission_id:
            raise JournalReadError(
                f"{what} belongs to mission {mission_id!r}, not {self.mission_id!r}",
                mission_id=self.mission_id, other=mission_id,
            )

    def apply(self, payload: EventPayload, *, owner: str = "") -> None:
        """Fold one typed record; ``owner`` is the mission id of the event that carried it, when known."""
        if isinstance(payload, MissionStarted):
            self._own(owner, "MISSION_STARTED")
            if not self.goal:
                self.goal = payload.goal
        elif isinstance(payload, ContractFrozen):
            if payload.contract is None:
                if payload.error is not None:
                    return  # a failed compilation: no contract, no state change
                raise JournalReadError("CONTRACT_FROZEN has neither a contract nor an error")
            c = payload.contract
            self._own(c.mission_id, f"contract {c.contract_id}")
            expected = self.contract.revision + 1 if self.contract else 1
            if c.revision != expected:
                raise JournalReadError(f"contract {c.contract_id} is revision {c.revision}, expected {expected}",
                                       expected=expected, actual=c.revision)
            if self.contract and c.supersedes != self.contract.contract_id:
                raise JournalReadError(f"contract {c.contract_id} supersedes {c.supersedes!r}, "
                                       f"not the current {self.contract.contract_id!r}")
            self.contract = c
            self.committed = []
            self.state_version += 1
        elif isinstance(payload, ReceiptRecorded):
            r = payload.receipt
            self._own(r.mission_id, f"receipt {r.receipt_id}")
            if r.receipt_id in self.receipt_ids:
                raise JournalReadError(f"receipt {r.receipt_id} recorded twice", receipt_id=r.receipt_id)
            self.receipts.append(r)
            self.receipt_ids.add(r.receipt_id)
            self.state_version += 1
        elif isinstance(payload, VerdictRecorded):
            v = payload.verdict
            self._own(v.mission_id, f"verdict {v.verdict_id}")
            self.verdict_ids.add(v.verdict_id)
        elif isinstance(payload, CommitRecorded):
            cm = payload.commit
            self._own(cm.mission_id, f"commit {cm.commit_id}")
            c = self.contract
            if c is None or (cm.contract_id, cm.contract_revision) != (c.contract_id, c.revision):
                raise JournalReadError(f"commit {cm.commit_id} is for contract {cm.contract_id} rev {cm.contract_revision}, "
                                       "not the current one")
            if cm.verdict_id not in self.verdict_ids:
                raise JournalReadError(f"commit {cm.commit_id} cites verdict {cm.verdict_id}, which was not recorded before it")
            if cm.state_version_before != self.state_version or cm.state_version_after != self.state_version + 1:
                raise JournalReadError(
                    f"commit {cm.commit_id} moves state {cm.state_version_before}->{cm.state_version_after}, "
                    f"but the state is at {self.state_version}",
                    expected=self.state_version, actual=cm.state_version_before,
                )
            self.committed.extend(o for o in cm.obligations if o not in self.committed)
            self.state_version = cm.state_version_after
        elif isinstance(payload, FactRecorded):
            f = payload.fact
            self._own(f.mission_id, f"fact {f.fact_id}")
            if f.supersedes and f.supersedes not in self.fact_ids:
                raise JournalReadError(f"fact {f.fact_id} supersedes unknown fact {f.supersedes}")
            self.facts.append(f)
            self.fact_ids.add(f.fact_id)

    def build(self) -> TaskState:
        c = self.contract
        done = c is not None and bool(c.obligations) and all(o.id in self.committed for o in c.obligations)
        return TaskState(
            mission_id=self.mission_id, goal=self.goal, contract=c, state_version=self.state_version,
            receipts=tuple(self.receipts), facts=tuple(self.facts), committed=tuple(self.committed), done=done,
        )


class TaskStateFold:
    """``TaskState.from_events``, incrementally: feed records in journal order, read ``state`` any time.

    The engine derives the task state from the journal before every turn and
    every verification; refolding the whole mission each time grows with its
    length. A fold keeps its place, so each event is applied exactly once, in
    the same order and with the same checks as ``from_records``.
    """

    def __init__(self, mission_id: str = "") -> None:
        self._builder = _Builder(mission_id)
        self._applied = 0
        self._state: TaskState | None = None

    def feed_records(self, records: Iterable[tuple[str, Mapping[str, Any] | EventPayload]]) -> None:
        """Apply ``(type, payload)`` pairs (a payload dict or model); raises ``JournalReadError`` as
        ``from_records`` does."""
        for type_, payload in records:
            self._apply((type_, payload), getattr(type_, "value", type_), owner="")

    def feed(self, events: Iterable[Any], *, mission_id: str | None = None) -> None:
        """Apply ``JournalEvent``-like objects (or pairs); with ``mission_id``, other missions' events are skipped."""
        for ev in events:
            if isinstance(ev, tuple):
                self._apply(ev, getattr(ev[0], "value", ev[0]), owner="")
                continue
            owner = getattr(ev, "mission_id", "")
            if mission_id and owner and owner != mission_id:
                continue
            self._apply(ev, getattr(ev.type, "value", ev.type), owner=owner)

    def _apply(self, record: Any, type_: str, *, owner: str) -> None:
        n = self._applied
        if type_ in _FOLDED:
            try:
                typed = payload_of(record if isinstance(record, JournalEvent) else (
                    EventType(type_), record[1] if isinstance(record, tuple) else record.payload))
            except PayloadReadError as exc:
                raise JournalReadError(f"record #{n} ({type_}) does not validate: {exc.message}", index=n,
                                       type=type_) from None
            if not owner and isinstance(typed, MissionStarted):
                owner = str((typed.model_extra or {}).get("mission_id", ""))  # a pair may name its mission
            self._builder.apply(typed, owner=owner)
        self._applied += 1
        self._state = None

    @property
    def state(self) -> TaskState:
        if self._state is None:
            self._state = self._builder.build()
        return self._state


class CommitGate:
    """Accepts a ``verified_done`` verdict bound to exactly the current state, and nothing else."""

    def __init__(self, ids: IdGenerator, clock: Clock) -> None:
        self._ids = ids
        self._clock = clock

    def decide(self, verdict: Verdict, *, state: TaskState, plan_node_id: str, invocation_id: str) -> Commit:
        """A ``Commit`` with one COMMITTED fact per obligation, or ``GateRejection``.

        The verdict must be ``verified_done`` and its mission, contract id and
        revision, state version, plan node and invocation must all equal the
        current ones; the rejection names the first field that differs (all
        differing fields are in ``details["mismatches"]``).
        """
        contract = state.contract
        if contract is None:
            raise GateRejection("no contract has been frozen for this mission", field="contract")
        bound = (
            ("mission_id", state.mission_id, verdict.mission_id),
            ("contract_id", contract.contract_id, verdict.contract_id),
            ("contract_revision", contract.revision, verdict.contract_revision),
            ("state_version", state.state_version, verdict.state_version),
            ("plan_node_id", plan_node_id, verdict.plan_node_id),
            ("invocation_id", invocation_id, verdict.invocation_id),
        )
        mismatches = [name for name, want, got in bound if want != got]
        if mismatches:
            name, want, got = next(b for b in bound if b[0] == mismatches[0])
            raise GateRejection(
                f"verdict {verdict.verdict_id} is bound to {name}={got!r}, the current one is {want!r}",
                field=name, expected=want, actual=got, mismatches=mismatches, verdict_id=verdict.verdict_id,
            )
        if verdict.goal_verdict is not GoalVerdict.VERIFIED_DONE:
            raise GateRejection(
                f"verdict {verdict.verdict_id} is {verdict.goal_verdict.value}, not verified_done",
                field="goal_verdict", expected=GoalVerdict.VERIFIED_DONE.value, actual=verdict.goal_verdict.value,
                missing=list(verdict.missing), verdict_id=verdict.verdict_id,
            )
        if state.done:
            raise GateRejection("every obligation of this contract revision is already committed",
                                field="done", expected=False, actual=True, verdict_id=verdict.verdict_id)
        want_ids = [o.id for o in contract.obligations]
        steps = {s.obligation_id: s for s in verdict.steps}
        unsatisfied = [o for o in want_ids if o not in steps or steps[o].verdict is not StepVerdict.SATISFIED]
        if not want_ids or unsatisfied or set(steps) != set(want_ids) or verdict.missing:
            raise GateRejection(
                f"verdict {verdict.verdict_id} does not satisfy exactly the contract's obligations",
                field="steps", expected=want_ids, actual=sorted(steps), unsatisfied=unsatisfied,
                verdict_id=verdict.verdict_id,
            )
        current = {r.receipt_id for r in state.receipts if r.contract_revision == contract.revision}
        if not current.intersection(verdict.evidence_ids):
            raise GateRejection(
                f"verdict {verdict.verdict_id} cites no receipt of contract revision {contract.revision}",
                field="evidence_ids", verdict_id=verdict.verdict_id,
            )

        now = self._clock.now()
        after = state.state_version + 1
        facts = []
        for o in contract.obligations:
            step = steps[o.id]
            key = f"{OBLIGATION_FACT_PREFIX}{o.id}"
            prev = state.head_fact(key, FactStatus.COMMITTED)
            facts.append(Fact(
                fact_id=self._ids.new("fact"),
                mission_id=state.mission_id,
                key=key,
                value={
                    "obligation_id": o.id,
                    "kind": o.kind.value,
                    "description": o.description,
                    "verdict": step.verdict.value,
                    "layer": step.layer,
                    "reason": step.reason,
                    "verdict_id": verdict.verdict_id,
                    "contract_id": contract.contract_id,
                    "contract_revision": contract.revision,
                },
                status=FactStatus.COMMITTED,
                provenance=step.evidence_ids,
                observed_at=now,
                state_version=after,
                supersedes=prev.fact_id if prev else "",
            ))
        return Commit(
            commit_id=self._ids.new("commit"),
            mission_id=state.mission_id,
            verdict_id=verdict.verdict_id,
            contract_id=contract.contract_id,
            contract_revision=contract.revision,
            state_version_before=state.state_version,
            state_version_after=after,
            obligations=tuple(want_ids),
            facts=tuple(facts),
        )


def observe_fact(
    state: TaskState,
    *,
    key: str,
    value: Mapping[str, Any],
    provenance: Sequence[str],
    ids: IdGenerator,
    clock: Clock,
) -> Fact:
    """An OBSERVED fact (reported, not trusted task state), superseding the newest observed one for ``key``.

    Observed and committed facts keep separate chains; ``obligation:*`` keys
    belong to the gate, so observing one is a usage error.
    """
    if key.startswith(OBLIGATION_FACT_PREFIX):
        raise UsageError(f"fact key {key!r} is reserved for committed obligations", key=key)
    if not provenance:
        raise UsageError(f"an observed fact ({key}) needs provenance", key=key)
    prev = state.head_fact(key, FactStatus.OBSERVED)
    return Fact(
        fact_id=ids.new("fact"),
        mission_id=state.mission_id,
        key=key,
        value=dict(value),
        status=FactStatus.OBSERVED,
        provenance=tuple(provenance),
        observed_at=clock.now(),
        state_version=state.state_version,
        supersedes=prev.fact_id if prev else "",
    )


_DRAFT_TYPES: tuple[tuple[type[BaseModel], str, str], ...] = (
    (CompletionContract, CONTRACT_FROZEN, "contract"),
    (Receipt, RECEIPT_RECORDED, "receipt"),
    (Verdict, VERDICT_RECORDED, "verdict"),
    (Commit, COMMIT_RECORDED, "commit"),
    (Fact, FACT_RECORDED, "fact"),
)


def record_draft(record: BaseModel) -> tuple[str, dict[str, Any]]:
    """The ``(type, payload)`` pair that journals one completion record: the payload is
    ``payloads.payload_dict`` of the type's model (``ReceiptRecorded(receipt=...)``, ...)."""
    for cls, type_, key in _DRAFT_TYPES:
        if isinstance(record, cls):
            return type_, payload_dict(_PAYLOAD_OF[type_](**{key: record}))
    raise UsageError(f"no journal event type for {type(record).__name__}", record_type=type(record).__name__)


_PAYLOAD_OF: dict[str, type[EventPayload]] = {
    CONTRACT_FROZEN: ContractFrozen, RECEIPT_RECORDED: ReceiptRecorded, VERDICT_RECORDED: VerdictRecorded,
    COMMIT_RECORDED: CommitRecorded, FACT_RECORDED: FactRecorded,
}


def commit_drafts(commit: Commit, verdict: Verdict) -> list[tuple[str, dict[str, Any]]]:
    """What the engine appends in ONE journal transaction: the verdict, the commit, then its facts."""
    if commit.verdict_id != verdict.verdict_id or commit.mission_id != verdict.mission_id:
        raise UsageError(f"commit {commit.commit_id} is for verdict {commit.verdict_id}, not {verdict.verdict_id}",
                         commit_id=commit.commit_id, verdict_id=verdict.verdict_id)
    return [record_draft(verdict), record_draft(commit), *(record_draft(f) for f in commit.facts)]


def original_goal_check(contract: CompletionContract, state_after_commit: TaskState, *,
                        goal: str | None = None) -> tuple[bool, str]:
    """Before reporting success: is ``contract`` the current revision, is its goal the
    mission's original goal, and is every one of its obligations committed?

    The original goal is ``goal`` when given (the engine's admission record),
    else the state's (from ``MISSION_STARTED``); if both are known they must agree.
    """
    s = state_after_commit
    if s.contract is None:
        return False, "no contract in the task state"
    if (contract.contract_id, contract.revision) != (s.contract.contract_id, s.contract.revision):
        return False, (f"contract {contract.contract_id} rev {contract.revision} is not the current "
                       f"{s.contract.contract_id} rev {s.contract.revision}")
    if contract.mission_id != s.mission_id:
        return False, f"contract belongs to mission {contract.mission_id}, not {s.mission_id}"
    original = (goal if goal is not None else s.goal).strip()
    if not original:
        return False, "the mission's original goal is not known"
    if goal is not None and s.goal and s.goal.strip() != original:
        return False, f"the journal's original goal {s.goal!r} differs from {goal!r}"
    if contract.goal.strip() != original:
        return False, f"contract goal {contract.goal!r} is not the original goal {original!r}"
    if not contract.obligations:
        return False, "the contract has no obligations"
    uncommitted = [o.id for o in contract.obligations if o.id not in s.committed]
    if uncommitted:
        return False, f"obligations not committed: {', '.join(uncommitted)}"
    return True, (f"all {len(contract.obligations)} obligations of {contract.contract_id} rev {contract.revision} "
                  "are committed and its goal is the original goal")
