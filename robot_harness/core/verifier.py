"""The independent verifier: judges a done proposal against the completion contract.

It sees only what ``VerifyRequest`` carries (the user's goal, the frozen
contract, executed receipts, named places and the journaled pose history)
plus one fresh snapshot. There is no field for planner text, messages or
reasoning, so nothing the planner *said* can count as evidence.

Receipts still hold the planner's tool arguments (the text of a message, a
speech, an image label). Those words never leave the predicates: the semantic
judge gets receipts reduced to their structure (``judge_view``: structural
arguments such as the place or the recipient, identifier-like result values,
ids, hashes and times; no free text and nothing that echoes the planner's
words), and verdict reasons quote no planner-authored text. Delivery is
checked on hashes; the words a contract binds (``params.text``) are compared
with the words sent inside the predicate, and neither is quoted.

Each obligation is judged in layers, cheapest first, stopping at the first
failure:

1. **floor** — only receipts of this mission, of the current contract
   revision, written at or before the request's state version and terminal
   ``SUCCEEDED`` count as positive evidence; an obligation whose
   dependencies are not satisfied is ``ambiguous`` (unless its own evidence
   is already ``violated``); with ``Obligation.max_age_s``, evidence older
   than that at verification time (``clock.now()``) is ``stale``.
2. **predicate** — one deterministic check per ``ObligationKind``, over the
   receipts of the obligation's eligible skills (``completion.eligible_skills``)
   and of no other skill.
3. **semantic** — only for ``SEMANTIC`` obligations, or obligations that
   list ``SEMANTIC_JUDGEMENT`` evidence, after their predicate passed.

Guarantees: an exception anywhere in judging one obligation (a malformed
receipt, a raising semantic checker, an artifact that fails its checksum)
makes that obligation anything but ``satisfied``; ``verified_done`` needs
every obligation satisfied and at least one receipt cited.

Choices worth knowing:

* "No evidence" is ``ambiguous``; evidence that contradicts the obligation
  (ended elsewhere, wrong recipient, checksum mismatch, wrong order, fresh
  pose elsewhere, an acknowledgement of another payload) is ``violated``; a
  fresh pose that is missing, stale or observed before the evidence it should
  confirm is ``stale``, and so is evidence older than ``max_age_s``.
* Freshness: for a final AT_PLACE and a ROUTE_CLOSED's return (with
  ``require_fresh_pose``) ``max_age_s`` bounds the fresh pose, which proves
  the state *now*; the navigations behind it are history and may be older.
  For every other obligation it bounds the evidence itself: a receipt's
  ``pose_stamp`` (pose-based kinds) or ``ended_at``, a pose sample's stamp.
  ``max_age_s=None``: the evidence does not expire.
* Eligible skills: an obligation is satisfied only by receipts of
  ``eligible_skills(ob)`` (its ``eligible``, else its kind's default skill).
  A ``MESSAGE_DELIVERED`` that lists ``speak`` (a report to the user) is
  satisfied by an acknowledged message *or* an acknowledged speech, each by
  its own predicate; with ``eligible`` empty a speech never satisfies it.
* Delivery (``MESSAGE_DELIVERED``, ``SPOKEN``) needs the receiver's ``ack``
  in the robot I/O result: its sha256 must equal the sender's, its message id
  the sent message's, and for a speech the sha256 of the text the receipt's
  arguments say was spoken. No ack is ``ambiguous``; an ack of something else
  is ``violated``.
* Bound words and recipients: ``params.text`` is compared with the sent
  arguments' ``text`` ignoring whitespace and case (the ack still proves what
  was actually sent); ``params.to`` with the recipient ignoring case,
  whitespace and ``_`` versus space (``security_team`` is ``Security Team``).
  Other words or another recipient is ``violated``; a receipt that does not
  record them is ``ambiguous``. A speech has no recipient to check.
* A ``SPOKEN`` with ``params.place`` needs the receipt's ``pose_at_end`` (the
  pose observed when it was spoken) within the xy tolerance of the place:
  elsewhere is ``violated``, no pose ``ambiguous``.
* Places are names in ``request.places``; ``start`` (the robot's pose at
  admission) is one like any other, and an unknown name is ``ambiguous``.
* A localization jump (``fresh.last_pose_jump_at``) at or after the start of
  the evidence window makes a pose-based obligation ``ambiguous``, not
  ``unsafe``: the jump says the pose cannot be trusted, not that the robot is
  in danger, and a later re-observation can settle it.
* ``unsafe`` comes from the semantic layer, or from the floor when the latest
  current attempt at an obligation was refused because its resource is
  blocked by an action of unknown outcome (nothing may move it until it is
  reconciled). Any ``unsafe`` step makes the goal ``blocked``.
* ``waiting_user``: every unsatisfied obligation passed its predicate and
  waits only for a semantic judgement no configured checker can give (or
  depends only on such an obligation). A human has to judge; the planner
  cannot do more.
* Ordering: a dependent's receipt must *start* at or after its dependencies'
  satisfying receipts *ended* (the earliest satisfying receipt of each
  dependency anchors it), so a message sent (or a report spoken) while the
  robot was still driving does not count as "after arriving".
* Pose-vs-place checks use the xy tolerance and, for AT_PLACE and
  IMAGE_CAPTURED, the yaw tolerance (``yaw_tolerance_rad=None`` disables it);
  route checks (departure, waypoints, return) and SPOKEN's place use xy only.
  A route's ``waypoints`` may be empty (a lap: depart beyond
  ``min_departure_m``, come back).
"""
from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from .clock import Clock, IdGenerator
from .completion import (
    CAPTURE_SKILL,
    MESSAGE_SKILL,
    NAVIGATE_SKILL,
    ROUTE_SKILLS,
    SPEAK_SKILL,
    CompletionContract,
    EvidenceKind,
    GoalVerdict,
    Obligation,
    ObligationKind,
    ObligationVerdict,
    Receipt,
    ReceiptStatus,
    StepVerdict,
    Verdict,
    artifact_evidence_id,
    eligible_skills,
)
from .errors import UsageError
from .records import FORMAT_VERSION, ArtifactRef, Availability, Pose2D, WorldSnapshot

__all__ = [
    "NAVIGATE_SKILL",
    "CAPTURE_SKILL",
    "MESSAGE_SKILL",
    "SPEAK_SKILL",
    "PoseSample",
    "VerifyRequest",
    "VerifierConfig",
    "SemanticChecker",
    "ArtifactCheck",
    "Verifier",
    "judge_view",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PoseSample(_Frozen):
    """One journaled pose observation (from a snapshot or a receipt)."""

    t: float
    """Source stamp of the observation (epoch seconds)."""
    pose: Pose2D
    source_id: str
    """The snapshot id or evidence id the pose came from (cited in verdicts)."""


class VerifyRequest(_Frozen):
    """Everything the verifier may look at besides the fresh snapshot.

    Deliberately has no field for planner text, messages or reasoning;
    ``extra="forbid"`` makes smuggling one in a validation error.
    """

    kind: Literal["verify_request"] = "verify_request"
    format_version: int = FORMAT_VERSION
    mission_id: str
    goal: str
    """The user's original goal (handed to the semantic checker)."""
    contract: CompletionContract
    receipts: tuple[Receipt, ...] = ()
    state_version: int
    plan_node_id: str
    """The model turn that proposed done."""
    invocation_id: str
    """The done proposal's call id."""
    places: dict[str, Pose2D] = Field(default_factory=dict)
    trajectory: tuple[PoseSample, ...] = ()
    """Pose history from journaled snapshots and receipts, any order."""


class VerifierConfig(_Frozen):
    xy_tolerance_m: float = Field(default=0.5, gt=0.0)
    yaw_tolerance_rad: float | None = Field(default=0.5, gt=0.0)
    """None: heading is not checked against places."""
    final_pose_max_age_s: float = Field(default=2.0, gt=0.0)
    """Default bound on the fresh pose's age (``Obligation.max_age_s`` overrides it)."""
    require_fresh_pose: bool = True
    """False: final AT_PLACE and ROUTE_CLOSED's return are judged on recorded poses
    only (offline replays without a live robot). Never False on a robot."""


class SemanticChecker(Protocol):
    """A model-backed judge for what no predicate can decide (e.g. "a drink bottle is visible")."""

    def judge(
        self,
        obligation: Obligation,
        *,
        goal: str,
        receipts: tuple[Receipt, ...],
        artifacts: tuple[ArtifactRef, ...],
    ) -> tuple[StepVerdict, str]: ...


ArtifactCheck = Callable[[str, str], None]
"""``(uri, sha256)``: returns if the artifact exists and matches, raises otherwise. The one file checker
is ``evidence.bag.verify_artifact`` (file I/O lives in ``evidence``); the composition root passes it in."""


# --------------------------------------------------------------------------- internals


def _observation_only(ob: Obligation) -> bool:
    """An obligation whose contract accepts pose observations and no execution receipt."""
    return ob.kind is ObligationKind.AT_PLACE and EvidenceKind.POSE_OBSERVATION in ob.evidence \
        and EvidenceKind.NAVIGATION_RECEIPT not in ob.evidence


class _Unresolved(Exception):
    """A place or parameter the predicate cannot interpret (the obligation is ambiguous)."""


@dataclass
class _Outcome:
    verdict: StepVerdict
    layer: Literal["floor", "predicate", "semantic"]
    reason: str
    evidence: list[str] = field(default_factory=list)
    done_at: float | None = None
    """When the satisfying evidence ended (anchors dependents' ordering)."""
    receipts: tuple[Receipt, ...] = ()
    """The receipts that satisfied the predicate (handed to the semantic layer)."""
    awaits_judgement: bool = False
    """Not satisfied only because a semantic judgement is needed that no configured checker can give."""


@dataclass
class _Place:
    pose: Pose2D
    label: str
    has_yaw: bool


class _Sev(enum.IntEnum):
    AMBIGUOUS = 1
    STALE = 2
    VIOLATED = 3


def _evidence_start(r: Receipt) -> float:
    """When a receipt's evidence for its place begins: a navigation's start; a route's end (its last place
    is reached at its end, after its earlier waypoints, whose own passes are ordered by their poses)."""
    if r.skill in ROUTE_SKILLS:
        return r.pose_stamp if r.pose_stamp is not None else r.ended_at
    return r.started_at


def _dedupe(ids: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in ids if i))


def _receipt_ids(r: Receipt) -> list[str]:
    ids = r.evidence_ids()
    if r.outcome_snapshot_id:
        ids.append(r.outcome_snapshot_id)
    return ids


def _as_pose(spec: Any) -> tuple[Pose2D, bool] | None:
    if isinstance(spec, Pose2D):
        return spec, True
    if isinstance(spec, Mapping) and isinstance(spec.get("x"), (int, float)) and isinstance(spec.get("y"), (int, float)):
        yaw = spec.get("yaw")
        has_yaw = isinstance(yaw, (int, float))
        return Pose2D(x=float(spec["x"]), y=float(spec["y"]), yaw=float(yaw) if has_yaw else 0.0), has_yaw
    return None


def _arguments(r: Receipt) -> Mapping[str, Any]:
    args = r.request.get("arguments", {})
    return args if isinstance(args, Mapping) else {}


def _result_views(r: Receipt) -> list[Mapping[str, Any]]:
    """The receipt's result, and the tool result's ``content`` inside it when the engine nested it there."""
    content = r.result.get("content")
    return [r.result, content] if isinstance(content, Mapping) else [r.result]


def _nav_target(r: Receipt, places: Mapping[str, Pose2D]) -> Pose2D | None:
    """Where a navigate_to receipt was sent: the executor's resolved target, else the arguments."""
    for resolved in (r.request.get("target"), r.result.get("target")):
        pose = _as_pose(resolved)
        if pose is not None:
            return pose[0]
    args = _arguments(r)
    name = args.get("place")
    if isinstance(name, str):
        return places.get(name)
    xy = _as_pose(args)
    return xy[0] if xy is not None else None


def _artifact_of(r: Receipt) -> tuple[str, str] | None:
    for view in _result_views(r):
        art = view.get("artifact")
        if isinstance(art, Mapping) and isinstance(art.get("uri"), str) and isinstance(art.get("sha256"), str) \
                and art["uri"] and art["sha256"]:
            return art["uri"], art["sha256"]
    for e in r.evidence:
        if e.kind == "artifact":
            return e.uri, e.sha256
    return None


_STRUCTURAL_ARGS = frozenset({"place", "to", "x", "y", "yaw", "frame_id"})
"""Tool arguments a judge may see (where, to whom); every other argument is the planner's free text."""
_FREE_TEXT_KEYS = frozenset({"text", "message", "label", "summary", "speech", "spoken", "note", "notes",
                             "description", "caption", "title", "body", "comment", "reason", "answer", "question",
                             "claim", "explanation", "details", "detail", "content_text"})
"""Result keys that hold prose, whoever wrote it: never shown to a judge."""
_IDENT = re.compile(r"[\w.:/@+\-]{1,256}")
"""An identifier-like string (ids, codes, states, place names, URIs, hashes): no whitespace, no prose."""
_MIN_ECHO = 4
_DROP = object()


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _planner_words(r: Receipt) -> tuple[str, ...]:
    """The free text the planner wrote into this call's arguments (normalized), to find echoes of it."""
    out: list[str] = []
    for key, value in _arguments(r).items():
        for text in _strings(value):
            if key in _STRUCTURAL_ARGS and _IDENT.fullmatch(text):
                continue
            norm = " ".join(text.split()).casefold()
            if len(norm) >= _MIN_ECHO:
                out.append(norm)
    return tuple(out)


def _echoes(text: str, words: tuple[str, ...]) -> bool:
    norm = " ".join(text.split()).casefold()
    return any(w in norm for w in words)


def _scrub(value: Any, words: tuple[str, ...]) -> Any:
    """``value`` without prose and without anything echoing ``words`` (``_DROP`` if nothing is left of it)."""
    if isinstance(value, str):
        return value if _IDENT.fullmatch(value) and not _echoes(value, words) else _DROP
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str) or k.casefold() in _FREE_TEXT_KEYS or _echoes(k, words):
                continue
            kept = _scrub(v, words)
            if kept is not _DROP:
                out[k] = kept
        return out
    if isinstance(value, (list, tuple)):
        return [kept for v in value if (kept := _scrub(v, words)) is not _DROP]
    return _DROP


def judge_view(r: Receipt) -> Receipt:
    """``r`` as a semantic judge may see it: its structure, never the planner's words.

    Arguments keep only the structural keys (place, recipient, coordinates)
    with identifier-like values; the resolved target and the result keep
    numbers, booleans and identifier-like strings that do not echo the
    planner's arguments, and drop every prose key (text, label, summary,
    reason...). Ids, times, status, poses and evidence refs are kept.
    """
    words = _planner_words(r)
    args = {k: v for k, v in _arguments(r).items()
            if k in _STRUCTURAL_ARGS and (isinstance(v, (int, float)) and not isinstance(v, bool)
                                          or isinstance(v, str) and _IDENT.fullmatch(v))}
    request: dict[str, Any] = {"arguments": args}
    target = _scrub(r.request.get("target"), words)
    if isinstance(target, Mapping) and target:
        request["target"] = target
    result = _scrub(r.result, words)
    return r.model_copy(update={"request": request, "result": result if isinstance(result, dict) else {}})


def _show(value: Any) -> str:
    """A receipt value fit for a verdict reason: identifier-like values quoted, anything else withheld."""
    if isinstance(value, str) and _IDENT.fullmatch(value) and len(value) <= 64:
        return repr(value)
    return "<free text withheld>"


def _acknowledged(r: Receipt) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The I/O result of a receipt whose problems were checked (so it has one) and its receiver's ack."""
    io = _io_result(r)
    assert io is not None
    return io, io["ack"]


def _io_result(r: Receipt) -> Mapping[str, Any] | None:
    """What the robot I/O returned for a speak/send_message call (the tools nest it under ``receipt``)."""
    views = _result_views(r)
    for view in views:
        inner = view.get("receipt")
        if isinstance(inner, Mapping):
            return inner
    for view in views:
        if any(k in view for k in ("ack", "ack_error", "message_id", "text_sha256", "sha256")):
            return view
    return None


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _ack_problem(rid: str, io: Mapping[str, Any], *, sent_sha_key: str, expected_sha: str | None = None,
                 message: bool, words: tuple[str, ...] = ()) -> tuple[_Sev, str] | None:
    """Why the acknowledgement in ``io`` does not prove this delivery, or None if it does.

    No ack, a malformed ack, or no sender hash to hold it against is ambiguous;
    an ack confirming another payload or another message is violated.
    """
    ack = io.get("ack")
    if ack is None:
        err = io.get("ack_error")
        why = f" ({err[:160]})" if isinstance(err, str) and err and not _echoes(err, words) else ""
        return _Sev.AMBIGUOUS, f"{rid} has no delivery acknowledgement{why}"
    if not isinstance(ack, Mapping):
        return _Sev.AMBIGUOUS, f"{rid}: malformed delivery acknowledgement (not an object)"
    missing = [k for k, ok in (
        ("by", isinstance(ack.get("by"), str) and bool(ack.get("by"))),
        ("at", isinstance(ack.get("at"), (int, float)) and not isinstance(ack.get("at"), bool)),
        ("sha256", isinstance(ack.get("sha256"), str) and bool(_SHA256.fullmatch(ack.get("sha256", "")))),
        ("message_id", not message or isinstance(ack.get("message_id"), str) and bool(ack.get("message_id"))),
    ) if not ok]
    if missing:
        return _Sev.AMBIGUOUS, f"{rid}: malformed delivery acknowledgement (missing/invalid {', '.join(missing)})"
    sent = io.get(sent_sha_key)
    if not (isinstance(sent, str) and _SHA256.fullmatch(sent)):
        return _Sev.AMBIGUOUS, f"{rid}: the sender recorded no {sent_sha_key} to hold the acknowledgement against"
    if ack["sha256"] != sent:
        return _Sev.VIOLATED, (f"{rid}: the acknowledgement confirms payload sha256 {ack['sha256'][:12]}…, "
                               f"not the one sent ({sent[:12]}…)")
    if expected_sha is not None and ack["sha256"] != expected_sha:
        return _Sev.VIOLATED, f"{rid}: the acknowledged sentence is not the one sent (sha256 differs from the spoken text's)"
    if message:
        mid = io.get("message_id")
        if not (isinstance(mid, str) and mid):
            return _Sev.AMBIGUOUS, f"{rid}: the sender recorded no message_id to hold the acknowledgement against"
        if ack["message_id"] != mid:
            return _Sev.VIOLATED, f"{rid}: the acknowledgement is for message {_show(ack['message_id'])}, not {_show(mid)}"
    return None


def _blocked_resource(r: Receipt) -> str:
    """Why ``r`` was refused as unsafe to attempt (a resource blocked by an action of unknown outcome), or ""."""
    if r.status is not ReceiptStatus.REJECTED:
        return ""
    for view in _result_views(r):
        code = view.get("code")
        lease = view.get("lease")
        if code == "lease_conflict" and isinstance(lease, Mapping) and lease.get("state") == "blocked":
            return (f"resource {_show(lease.get('resource'))} is blocked by an action of unknown outcome "
                    f"({_show(lease.get('owner'))}) until it is reconciled")
        if code == "physical_blocked":
            return "physical work is blocked"
    return ""


def _norm_name(s: Any) -> str:
    """A recipient for comparison: case, whitespace and ``_`` versus space do not count."""
    return " ".join(str(s).replace("_", " ").split()).casefold()


def _norm_text(s: str) -> str:
    """Words for comparison: case and whitespace do not count."""
    return " ".join(s.split()).casefold()


def _bound_text(ob: Obligation) -> str | None:
    """The words ``ob`` binds (``params.text``), or None when it binds none."""
    text = ob.params.get("text")
    if text is None or isinstance(text, str) and not text.strip():
        return None
    if not isinstance(text, str):
        raise _Unresolved(f"cannot interpret params.text of type {type(text).__name__}")
    return text


# --------------------------------------------------------------------------- verifier


class Verifier:
    """Judges ``VerifyRequest`` + a fresh snapshot into a ``Verdict``; never reads planner text."""

    def __init__(
        self,
        config: VerifierConfig,
        *,
        semantic: SemanticChecker | None,
        artifact_check: ArtifactCheck,
        ids: IdGenerator,
        clock: Clock,
        name: str = "verifier",
    ) -> None:
        self.config = config
        self.name = name
        self._semantic = semantic
        self._artifact_check = artifact_check
        self._ids = ids
        self._clock = clock

    # ------------------------------------------------------------------ entry point

    def verify(self, request: VerifyRequest, fresh: WorldSnapshot) -> Verdict:
        contract = request.contract
        if contract.mission_id != request.mission_id:
            raise UsageError(
                f"contract {contract.contract_id} belongs to mission {contract.mission_id!r}, "
                f"not {request.mission_id!r}",
                contract_mission_id=contract.mission_id, mission_id=request.mission_id,
            )
        if fresh.mission_id and fresh.mission_id != request.mission_id:
            raise UsageError(
                f"fresh snapshot {fresh.snapshot_id} belongs to mission {fresh.mission_id!r}",
                snapshot_mission_id=fresh.mission_id, mission_id=request.mission_id,
            )
        seen: set[str] = set()
        for r in request.receipts:
            if r.receipt_id in seen:
                raise UsageError(f"duplicate receipt id {r.receipt_id!r} in the request", receipt_id=r.receipt_id)
            seen.add(r.receipt_id)

        admitted, excluded = self._floor(request)
        outcomes: dict[str, _Outcome] = {}
        for ob in self._topological(contract):
            try:
                outcomes[ob.id] = self._judge_obligation(ob, request, fresh, admitted, excluded, outcomes)
            except Exception as exc:  # noqa: BLE001 - fail closed: a malformed record is never evidence
                outcomes[ob.id] = _Outcome(
                    StepVerdict.AMBIGUOUS, "predicate", f"could not evaluate: {type(exc).__name__}: {str(exc)[:240]}"
                )

        steps = tuple(
            ObligationVerdict(
                obligation_id=ob.id,
                verdict=outcomes[ob.id].verdict,
                layer=outcomes[ob.id].layer,
                reason=outcomes[ob.id].reason,
                evidence_ids=_dedupe(outcomes[ob.id].evidence),
            )
            for ob in contract.obligations
        )
        evidence_ids = _dedupe([i for s in steps for i in s.evidence_ids])
        missing = tuple(s.obligation_id for s in steps if s.verdict is not StepVerdict.SATISFIED)
        cited_receipts = seen.intersection(evidence_ids)
        executed = bool(cited_receipts) or all(_observation_only(ob) for ob in contract.obligations)
        if any(s.verdict is StepVerdict.UNSAFE for s in steps):
            goal = GoalVerdict.BLOCKED
        elif steps and not missing and executed:
            # Execution evidence is required, unless the contract itself says observations suffice
            # (a recording of a robot the harness did not drive).
            goal = GoalVerdict.VERIFIED_DONE
        elif missing and executed and all(outcomes[o].awaits_judgement for o in missing):
            # Everything the robot can prove is proven; what is left needs a judgement nobody here can give.
            goal = GoalVerdict.WAITING_USER
        else:
            goal = GoalVerdict.CONTINUE
        return Verdict(
            verdict_id=self._ids.new("verdict"),
            mission_id=request.mission_id,
            contract_id=contract.contract_id,
            contract_revision=contract.revision,
            state_version=request.state_version,
            plan_node_id=request.plan_node_id,
            invocation_id=request.invocation_id,
            goal_verdict=goal,
            steps=steps,
            missing=missing,
            evidence_ids=evidence_ids,
            fresh_snapshot_id=fresh.snapshot_id,
            created_at=self._clock.now(),
            verifier=self.name,
        )

    # ------------------------------------------------------------------ layer 1: floor

    @staticmethod
    def _floor(request: VerifyRequest) -> tuple[list[Receipt], dict[str, list[str]]]:
        """Receipts that may serve as positive evidence, and why the others may not (by skill)."""
        rev = request.contract.revision
        admitted: list[Receipt] = []
        excluded: dict[str, list[str]] = {}
        for r in sorted(request.receipts, key=lambda r: (r.ended_at, r.started_at)):
            why = ""
            if r.mission_id != request.mission_id:
                why = f"{r.receipt_id} belongs to mission {r.mission_id!r}"
            elif r.contract_revision != rev:
                why = f"{r.receipt_id} is from contract revision {r.contract_revision}, not {rev}"
            elif r.state_version > request.state_version:
                why = f"{r.receipt_id} was written at state version {r.state_version} > {request.state_version}"
            elif r.status is not ReceiptStatus.SUCCEEDED:
                why = f"{r.receipt_id} {r.status.value}"
            if why:
                excluded.setdefault(r.skill, []).append(why)
            else:
                admitted.append(r)
        return admitted, excluded

    @staticmethod
    def _topological(contract: CompletionContract) -> list[Obligation]:
        done: set[str] = set()
        order: list[Obligation] = []
        pending = list(contract.obligations)
        while pending:  # the contract validator already rejected cycles
            ready = [o for o in pending if all(d in done for d in o.depends_on)]
            for o in ready:
                order.append(o)
                done.add(o.id)
            pending = [o for o in pending if o.id not in done]
        return order

    def _judge_obligation(
        self,
        ob: Obligation,
        request: VerifyRequest,
        fresh: WorldSnapshot,
        admitted: list[Receipt],
        excluded: dict[str, list[str]],
        prior: dict[str, _Outcome],
    ) -> _Outcome:
        # A dependency that waits only for a judgement counts as done for ordering (its evidence is
        # there), but not as satisfied: this obligation then waits for that judgement too.
        waiting = [d for d in ob.depends_on if prior[d].awaits_judgement]
        unmet = [d for d in ob.depends_on if prior[d].verdict is not StepVerdict.SATISFIED and d not in waiting]
        not_before: float | None = None
        anchors: list[str] = []
        if not unmet and ob.depends_on:
            not_before = max(prior[d].done_at or 0.0 for d in ob.depends_on)
            anchors = [d for d in ob.depends_on if prior[d].done_at == not_before]

        own = self._predicate(ob, request, fresh, admitted, excluded, not_before, anchors, prior)
        if unmet:
            if own.verdict in (StepVerdict.VIOLATED, StepVerdict.UNSAFE):
                return own
            states = ", ".join(prior[d].verdict.value for d in unmet)
            return _Outcome(StepVerdict.AMBIGUOUS, "floor",
                            f"dependency {', '.join(unmet)} not satisfied ({states})", own.evidence)
        if own.verdict is not StepVerdict.SATISFIED:
            return own
        if ob.kind is ObligationKind.SEMANTIC or EvidenceKind.SEMANTIC_JUDGEMENT in ob.evidence:
            own = self._semantic_layer(ob, request, own)
        if waiting and (own.verdict is StepVerdict.SATISFIED or own.awaits_judgement):
            return _Outcome(StepVerdict.AMBIGUOUS, "floor",
                            f"own evidence holds; dependency {', '.join(waiting)} awaits a semantic judgement",
                            own.evidence, own.done_at, own.receipts, awaits_judgement=True)
        return own

    # ------------------------------------------------------------------ layer 2: predicates

    def _predicate(
        self,
        ob: Obligation,
        request: VerifyRequest,
        fresh: WorldSnapshot,
        admitted: list[Receipt],
        excluded: dict[str, list[str]],
        not_before: float | None,
        anchors: list[str],
        prior: Mapping[str, _Outcome] | None = None,
    ) -> _Outcome:
        if _observation_only(ob):
            return self._observed_at_place(ob, request, not_before)
        if ob.kind is ObligationKind.SEMANTIC:
            return self._semantic_floor(ob, request, admitted, excluded)
        if ob.kind is ObligationKind.AT_PLACE and any(s in ROUTE_SKILLS for s in eligible_skills(ob)):
            return self._at_place_or_passed(ob, request, fresh, admitted, excluded, not_before, anchors, prior)
        return self._receipts_predicate(ob, request, fresh, admitted, excluded, not_before, anchors, prior)

    def _receipts_predicate(self, ob: Obligation, request: VerifyRequest, fresh: WorldSnapshot,
                            admitted: list[Receipt], excluded: dict[str, list[str]], not_before: float | None,
                            anchors: list[str], prior: Mapping[str, _Outcome] | None) -> _Outcome:
        """The kind's predicate over the admitted receipts of the obligation's eligible skills."""
        skills = eligible_skills(ob)
        if not skills:  # only a record that bypassed validation: nothing may satisfy it
            return _Outcome(StepVerdict.AMBIGUOUS, "floor",
                            f"no skill is eligible to satisfy a {ob.kind.value} obligation (eligible: {list(ob.eligible)})")
        candidates = [r for r in admitted if r.skill in skills]
        if not candidates:
            attempts = self._attempts(ob, request, skills)
            if attempts:
                latest = max(attempts, key=lambda r: (r.ended_at, r.started_at))
                why = _blocked_resource(latest)
                if why:
                    # The robot was not allowed to try: acting could have collided with an action whose
                    # outcome nobody knows. Not something the planner can fix by trying again now.
                    return _Outcome(StepVerdict.UNSAFE, "floor", f"no success; {latest.receipt_id} was refused: {why}",
                                    [latest.receipt_id])
            failed = self._failed_attempts(attempts)
            if failed:
                # No success, and the attempts that were made ended in a known
                # failure: that is evidence against, not missing evidence.
                return _Outcome(StepVerdict.VIOLATED, "floor",
                                "no success; attempts failed: " + "; ".join(
                                    f"{r.receipt_id} {r.status.value} ({_failure_reason(r)})" for r in failed),
                                [r.receipt_id for r in failed])
            return _Outcome(StepVerdict.AMBIGUOUS, "floor", self._no_evidence("/".join(skills), request, excluded, skills))

        current, stale = self._by_age(ob, candidates)
        out = self._in_order(ob, request, fresh, admitted, current, not_before, anchors, prior) if current else None
        if out is not None and (out.verdict is StepVerdict.SATISFIED or not stale):
            return out
        old = self._in_order(ob, request, fresh, admitted, stale, not_before, anchors, prior)
        if old.verdict is StepVerdict.SATISFIED:
            return self._stale(ob, list(old.receipts) or stale, old.reason, old.evidence)
        return out if out is not None else old

    def _at_place_or_passed(self, ob: Obligation, request: VerifyRequest, fresh: WorldSnapshot,
                            admitted: list[Receipt], excluded: dict[str, list[str]], not_before: float | None,
                            anchors: list[str], prior: Mapping[str, _Outcome] | None) -> _Outcome:
        """AT_PLACE: a navigation that ended there (``_receipts_predicate``), else a route that passed it
        (``_route_passes``): whichever is satisfied; when neither is, the route's finding when there is
        one (a waypoint the route was to pass says more than "no navigation ended there")."""
        out = self._receipts_predicate(ob, request, fresh, admitted, excluded, not_before, anchors, prior)
        if out.verdict is StepVerdict.SATISFIED:
            return out
        passed = self._route_passes(ob, request, fresh, not_before)
        return passed if passed is not None else out

    def _semantic_floor(self, ob: Obligation, request: VerifyRequest, admitted: list[Receipt],
                        excluded: dict[str, list[str]]) -> _Outcome:
        """SEMANTIC: the current receipts a judge may look at.

        Messages and speech are words, not observations, so they are not
        evidence for a judgement. The obligation counts as done (for its
        dependents' ordering) from the earliest image it may be judged on,
        else from the earliest receipt: not from the latest, which may well be
        a dependent's own receipt (which would put every dependent "out of
        order"). Which receipts suffice is the judge's call.
        """
        pool = [r for r in admitted if r.skill not in (MESSAGE_SKILL, SPEAK_SKILL)]
        if not pool:
            return _Outcome(StepVerdict.AMBIGUOUS, "floor",
                            self._no_evidence("observation or action", request, excluded, None))
        current, stale = self._by_age(ob, pool)
        if not current:
            return self._stale(ob, stale, f"{len(stale)} current receipt(s)", [i for r in stale for i in _receipt_ids(r)])
        images = [r for r in current if _artifact_of(r) is not None] if EvidenceKind.IMAGE_ARTIFACT in ob.evidence else []
        return _Outcome(StepVerdict.SATISFIED, "floor", f"{len(current)} current receipt(s) to judge on",
                        [i for r in current for i in _receipt_ids(r)], min(r.ended_at for r in images or current),
                        tuple(current))

    def _in_order(self, ob: Obligation, request: VerifyRequest, fresh: WorldSnapshot, admitted: list[Receipt],
                  candidates: list[Receipt], not_before: float | None, anchors: list[str],
                  prior: Mapping[str, _Outcome] | None = None) -> _Outcome:
        """The kind's predicate over ``candidates`` that started after the dependencies were satisfied."""
        ordered: list[Receipt] = []
        early: list[str] = []
        target: Pose2D | None = None
        if ob.kind is ObligationKind.AT_PLACE:  # only navigations toward this place are attempts at it
            try:
                target = self._resolve(ob.params.get("place", ob.params.get("pose")), request.places).pose
            except _Unresolved:
                target = None
        for r in candidates:
            if not_before is not None and _evidence_start(r) < not_before:
                aimed = _nav_target(r, request.places) if target is not None else None
                if target is None or (aimed is not None and aimed.distance_to(target) <= self.config.xy_tolerance_m):
                    early.append(f"{r.receipt_id} started at {_evidence_start(r):.3f}, before dependency "
                                 f"{'/'.join(anchors)} was satisfied at {not_before:.3f}")
            else:
                ordered.append(r)

        def run(receipts: list[Receipt]) -> _Outcome:
            try:
                if ob.kind is ObligationKind.AT_PLACE:
                    return self._at_place(ob, request, fresh, receipts)
                if ob.kind is ObligationKind.IMAGE_CAPTURED:
                    return self._image_captured(ob, request, receipts)
                if ob.kind is ObligationKind.MESSAGE_DELIVERED:
                    return self._message_delivered(ob, request, receipts, prior or {})
                if ob.kind is ObligationKind.SPOKEN:
                    return self._spoken(ob, request, receipts)
                return self._route_closed(ob, request, fresh, admitted, receipts)
            except _Unresolved as exc:
                return _Outcome(StepVerdict.AMBIGUOUS, "predicate", str(exc))

        out = run(ordered)
        if out.verdict is StepVerdict.SATISFIED or not early:
            return out
        kept = {r.receipt_id for r in ordered}
        too_early = run([r for r in candidates if r.receipt_id not in kept])
        if too_early.verdict is StepVerdict.SATISFIED:
            # the evidence exists, but not in the order the goal asked for
            return _Outcome(StepVerdict.VIOLATED, "predicate",
                            f"{too_early.reason}, but out of order: {'; '.join(early)}", too_early.evidence)
        if not ordered:
            # every attempt came before its dependency: out of order, and (say why) not right either
            return _Outcome(StepVerdict.VIOLATED, "predicate",
                            f"out of order: {'; '.join(early)}; and {too_early.reason}", too_early.evidence
                            or [r.receipt_id for r in candidates if r.receipt_id not in kept])
        return out

    # ------------------------------------------------------------------ freshness

    def _judged_on_fresh_pose(self, ob: Obligation) -> bool:
        """Whether ``max_age_s`` bounds the pose that shows the state now rather than each receipt.

        A route is history by nature (its first legs are old when it closes):
        its return is bounded, by the fresh pose or, offline, by the last
        recorded one. A final AT_PLACE is bounded by the fresh pose.
        """
        return ob.kind is ObligationKind.ROUTE_CLOSED or (
            self.config.require_fresh_pose and ob.kind is ObligationKind.AT_PLACE and bool(ob.params.get("final")))

    @staticmethod
    def _evidence_time(ob: Obligation, r: Receipt) -> float:
        """When a receipt's evidence was observed: the pose stamp for pose-based kinds, else its end."""
        if ob.kind in (ObligationKind.AT_PLACE, ObligationKind.IMAGE_CAPTURED, ObligationKind.ROUTE_CLOSED) \
                and r.pose_stamp is not None:
            return r.pose_stamp
        return r.ended_at

    def _by_age(self, ob: Obligation, receipts: list[Receipt]) -> tuple[list[Receipt], list[Receipt]]:
        """``receipts`` split into those within ``ob.max_age_s`` of now and those older."""
        if ob.max_age_s is None or self._judged_on_fresh_pose(ob):
            return list(receipts), []
        now = self._clock.now()
        current = [r for r in receipts if now - self._evidence_time(ob, r) <= ob.max_age_s]
        kept = {r.receipt_id for r in current}
        return current, [r for r in receipts if r.receipt_id not in kept]

    def _stale(self, ob: Obligation, receipts: list[Receipt], what: str, evidence: list[str]) -> _Outcome:
        now = self._clock.now()
        ages = ", ".join(f"{r.receipt_id} {now - self._evidence_time(ob, r):.1f} s" for r in receipts)
        return _Outcome(StepVerdict.STALE, "floor",
                        f"{what}; but the evidence is older than max_age_s={ob.max_age_s} s at verification ({ages})",
                        list(evidence))

    def _attempts(self, ob: Obligation, request: VerifyRequest, skills: tuple[str, ...]) -> list[Receipt]:
        """Current attempts at this obligation, whatever their outcome.

        For AT_PLACE only navigations toward the obligation's place count (a
        navigation elsewhere is neither for nor against it).
        """
        rev = request.contract.revision
        mine = [r for r in request.receipts
                if r.mission_id == request.mission_id and r.contract_revision == rev and r.skill in skills
                and r.state_version <= request.state_version]
        if ob.kind is ObligationKind.AT_PLACE:
            try:
                place = self._resolve(ob.params.get("place", ob.params.get("pose")), request.places)
            except _Unresolved:
                return []
            mine = [r for r in mine if (t := _nav_target(r, request.places)) is not None
                    and t.distance_to(place.pose) <= self.config.xy_tolerance_m]
        return mine

    @staticmethod
    def _failed_attempts(mine: list[Receipt]) -> list[Receipt]:
        """The attempts that ended FAILED/REJECTED, when none ended UNKNOWN."""
        if not mine or any(r.status is ReceiptStatus.UNKNOWN for r in mine):
            return []
        # A call refused before anything was tried (preconditions changed, or
        # skipped after another refusal) is not an attempt that failed.
        not_tried = ("precondition_changed", "skipped")
        return [r for r in mine if r.status in (ReceiptStatus.FAILED, ReceiptStatus.REJECTED)
                and (r.result or {}).get("status") not in not_tried]

    @staticmethod
    def _no_evidence(what: str, request: VerifyRequest, excluded: dict[str, list[str]],
                     skills: tuple[str, ...] | None) -> str:
        why = [w for s, ws in excluded.items() if skills is None or s in skills for w in ws]
        msg = f"no SUCCEEDED {what} receipt of mission {request.mission_id} under contract revision {request.contract.revision}"
        return f"{msg} (not evidence: {'; '.join(why)})" if why else msg

    def _resolve(self, spec: Any, places: Mapping[str, Pose2D]) -> _Place:
        if isinstance(spec, str):
            if spec not in places:
                raise _Unresolved(f"unknown place {spec!r} (known: {sorted(places)})")
            return _Place(places[spec], spec, True)
        pose = _as_pose(spec)
        if pose is None:
            raise _Unresolved(f"cannot interpret place {spec!r}")
        return _Place(pose[0], f"({pose[0].x:.2f}, {pose[0].y:.2f})", pose[1])

    def _pose_error(self, pose: Pose2D, place: _Place, *, yaw: bool = True) -> str:
        """Empty if ``pose`` is within tolerance of ``place``, else why not."""
        d = pose.distance_to(place.pose)
        if d > self.config.xy_tolerance_m:
            return f"{d:.2f} m from {place.label} (tolerance {self.config.xy_tolerance_m} m)"
        tol = self.config.yaw_tolerance_rad
        if yaw and tol is not None and place.has_yaw:
            e = pose.yaw_error(place.pose)
            if e > tol:
                return f"heading {e:.2f} rad off {place.label} (tolerance {tol} rad)"
        return ""

    def _fresh_pose(self, ob: Obligation, fresh: WorldSnapshot, window_start: float, evidence_end: float) -> tuple[Pose2D | None, _Outcome | None]:
        """The trusted current pose, or the outcome that explains why there is none."""
        ev = [fresh.snapshot_id]
        meta = fresh.pose_meta
        if fresh.pose is None or meta.availability is not Availability.AVAILABLE:
            return None, _Outcome(StepVerdict.STALE, "predicate",
                                  f"fresh pose in {fresh.snapshot_id} is {meta.availability.value}", ev)
        ages = [a for a in (
            fresh.captured_at - meta.source_stamp if meta.source_stamp is not None else None,
            meta.age_s,
        ) if a is not None]
        max_age = ob.max_age_s if ob.max_age_s is not None else self.config.final_pose_max_age_s
        if not ages:
            return None, _Outcome(StepVerdict.STALE, "predicate", f"fresh pose in {fresh.snapshot_id} has no stamp or age", ev)
        if max(ages) > max_age:
            return None, _Outcome(StepVerdict.STALE, "predicate",
                                  f"fresh pose in {fresh.snapshot_id} is {max(ages):.2f} s old (max {max_age} s)", ev)
        if fresh.captured_at < evidence_end:
            return None, _Outcome(StepVerdict.STALE, "predicate",
                                  f"snapshot {fresh.snapshot_id} was captured before the evidence it should confirm ended", ev)
        if fresh.last_pose_jump_at is not None and fresh.last_pose_jump_at >= window_start:
            return None, _Outcome(StepVerdict.AMBIGUOUS, "predicate",
                                  f"localization jumped at {fresh.last_pose_jump_at:.3f} (after {window_start:.3f}); "
                                  "the pose cannot be trusted", ev)
        return fresh.pose, None

    @staticmethod
    def _worst(violations: list[tuple[_Sev, str, list[str]]], fallback: str) -> _Outcome:
        if not violations:
            return _Outcome(StepVerdict.AMBIGUOUS, "predicate", fallback)
        sev = max(v[0] for v in violations)
        verdict = {_Sev.AMBIGUOUS: StepVerdict.AMBIGUOUS, _Sev.STALE: StepVerdict.STALE,
                   _Sev.VIOLATED: StepVerdict.VIOLATED}[sev]
        return _Outcome(verdict, "predicate", "; ".join(v[1] for v in violations),
                        [i for v in violations for i in v[2]])

    def _observed_at_place(self, ob: Obligation, request: VerifyRequest, not_before: float | None) -> _Outcome:
        """AT_PLACE when the contract accepts pose observations alone (e.g. a recording from a robot the
        harness did not drive): a recorded pose within tolerance of the place, after any dependency."""
        place = self._resolve(ob.params.get("place", ob.params.get("pose")), request.places)
        samples = sorted((p for p in request.trajectory if not_before is None or p.t >= not_before), key=lambda p: p.t)
        if not samples:
            return _Outcome(StepVerdict.AMBIGUOUS, "predicate", f"no pose observation to judge {place.label} on")
        now = self._clock.now()
        too_old: PoseSample | None = None
        for p in samples:
            if not self._pose_error(p.pose, place):
                if ob.max_age_s is not None and now - p.t > ob.max_age_s:
                    too_old = too_old or p
                    continue
                return _Outcome(StepVerdict.SATISFIED, "predicate",
                                f"observed within tolerance of {place.label} at t={p.t:.3f} ({p.source_id})",
                                [p.source_id], p.t)
        if too_old is not None:
            return _Outcome(StepVerdict.STALE, "floor",
                            f"observed within tolerance of {place.label} only {now - too_old.t:.1f} s before "
                            f"verification ({too_old.source_id}; max_age_s={ob.max_age_s} s)", [too_old.source_id])
        closest = min(samples, key=lambda p: p.pose.distance_to(place.pose))
        return _Outcome(StepVerdict.VIOLATED, "predicate",
                        f"{len(samples)} pose observations, none within tolerance of {place.label}; closest "
                        f"{self._pose_error(closest.pose, place)} ({closest.source_id})", [closest.source_id])

    def _at_place(self, ob: Obligation, request: VerifyRequest, fresh: WorldSnapshot, navs: list[Receipt]) -> _Outcome:
        place = self._resolve(ob.params.get("place", ob.params.get("pose")), request.places)
        problems: list[tuple[_Sev, str, list[str]]] = []
        hit: Receipt | None = None
        for r in navs:
            target = _nav_target(r, request.places)
            if target is None or target.distance_to(place.pose) > self.config.xy_tolerance_m:
                continue  # a navigation elsewhere is neither for nor against
            problem = self._end_pose_problem(r, place, missing="recorded no pose at its end", verb="ended")
            if problem is not None:
                problems.append(problem)
                continue
            hit = r
            break
        if hit is None:
            return self._worst(problems, f"no SUCCEEDED {NAVIGATE_SKILL} receipt to {place.label}")
        evidence = _receipt_ids(hit)
        reason = f"{hit.receipt_id} navigated to {place.label} and ended within tolerance"
        return self._still_there(ob, fresh, place, _Outcome(StepVerdict.SATISFIED, "predicate", reason, evidence,
                                                            hit.ended_at, (hit,)), window=(hit.started_at, hit.ended_at))

    def _still_there(self, ob: Obligation, fresh: WorldSnapshot, place: _Place, passed: _Outcome, *,
                     window: tuple[float, float]) -> _Outcome:
        """A final place ("be at C when verified"): the evidence that the robot got there (``passed``) is
        history; with ``require_fresh_pose`` the fresh pose must still show it there (``window``: the
        evidence's start and end, which the fresh pose must follow). Otherwise ``passed`` as it is."""
        if not ob.params.get("final") or not self.config.require_fresh_pose:
            return passed
        pose, failure = self._fresh_pose(ob, fresh, *window)
        if failure is not None:
            failure.evidence = passed.evidence + failure.evidence
            return failure
        assert pose is not None
        err = self._pose_error(pose, place)
        evidence = [*passed.evidence, fresh.snapshot_id]
        if err:
            return _Outcome(StepVerdict.VIOLATED, "predicate", f"fresh pose in {fresh.snapshot_id} is {err}", evidence)
        return _Outcome(StepVerdict.SATISFIED, "predicate", f"{passed.reason}; fresh pose in {fresh.snapshot_id} "
                        "still there", evidence, passed.done_at, passed.receipts)

    def _route_passes(self, ob: Obligation, request: VerifyRequest, fresh: WorldSnapshot,
                      not_before: float | None) -> _Outcome | None:
        """AT_PLACE on a route that was to pass the place: None when no current route receipt lists it.

        The evidence is a journaled pose (``request.trajectory``) within the xy tolerance of the place,
        observed during the route's receipt window and after the obligation's dependencies were
        satisfied. A route of any verified end counts (its end is another waypoint's business), not one
        refused before it was sent. Nav2's report that it skipped or failed the waypoint is violated
        whatever the poses say; so is a finished route with no such pose (it went on without passing);
        an UNKNOWN route without one is ambiguous (it may have passed unobserved)."""
        place = self._resolve(ob.params.get("place", ob.params.get("pose")), request.places)
        rev, tol = request.contract.revision, self.config.xy_tolerance_m
        found: list[tuple[Receipt, int, Mapping[str, Any]]] = []
        for r in sorted(request.receipts, key=lambda r: (r.started_at, r.ended_at)):
            if r.skill not in ROUTE_SKILLS or r.mission_id != request.mission_id or r.contract_revision != rev \
                    or r.state_version > request.state_version or r.status is ReceiptStatus.REJECTED:
                continue
            for k, row in enumerate(r.result.get("waypoints") or ()):
                pose = _as_pose(row.get("pose")) if isinstance(row, Mapping) else None
                if pose is not None and pose[0].distance_to(place.pose) <= tol:
                    found.append((r, k, row))
        if not found:
            return None
        problems: list[tuple[_Sev, str, list[str]]] = []
        now = self._clock.now()
        too_old: tuple[Receipt, PoseSample] | None = None
        near = sorted((p for p in request.trajectory if p.pose.distance_to(place.pose) <= tol), key=lambda p: p.t)
        for r, k, row in found:
            label = f"{place.label} (waypoint #{k + 1} of {r.receipt_id})"
            reported = row.get("reported") if isinstance(row.get("reported"), Mapping) else None
            if reported is not None and reported.get("state") in ("skipped", "failed"):
                said = f": {reported['error_msg']}" if reported.get("error_msg") else ""
                problems.append((_Sev.VIOLATED, f"{label} was reported {reported['state']} by the backend "
                                 f"(error {reported.get('error_code', 0)}{said})", [r.receipt_id]))
                continue
            lo = r.started_at if not_before is None else max(r.started_at, not_before)
            hi = max(r.ended_at, r.pose_stamp or r.ended_at)  # its own end pose, stamped by the robot's clock
            hit = next((p for p in near if lo <= p.t <= hi), None)
            if hit is None:
                after = f", after its dependency at {not_before:.3f}" if not_before is not None else ""
                sev = _Sev.AMBIGUOUS if r.status is ReceiptStatus.UNKNOWN else _Sev.VIOLATED
                problems.append((sev, f"{label} was never observed: no journaled pose within {tol} m of it between "
                                 f"{r.started_at:.3f} and {r.ended_at:.3f}{after}", [r.receipt_id]))
                continue
            jump = fresh.last_pose_jump_at
            if jump is not None and lo <= jump <= hit.t:
                problems.append((_Sev.AMBIGUOUS, f"{label}: localization jumped at {jump:.3f}, before the pose "
                                 f"that shows it passed ({hit.source_id})", [r.receipt_id, hit.source_id]))
                continue
            if ob.max_age_s is not None and now - hit.t > ob.max_age_s:
                too_old = too_old or (r, hit)
                continue
            passed = _Outcome(StepVerdict.SATISFIED, "predicate", f"{label} passed: observed within tolerance at "
                              f"t={hit.t:.3f} ({hit.source_id})", [r.receipt_id, hit.source_id], hit.t, (r,))
            return self._still_there(ob, fresh, place, passed, window=(hit.t, hit.t))
        if too_old is not None and not problems:
            r, hit = too_old
            return _Outcome(StepVerdict.STALE, "floor", f"{place.label} passed on {r.receipt_id} only "
                            f"{now - hit.t:.1f} s before verification ({hit.source_id}; max_age_s={ob.max_age_s} s)",
                            [r.receipt_id, hit.source_id])
        return self._worst(problems, f"no route passed {place.label}")

    def _end_pose_problem(self, r: Receipt, place: _Place, *, missing: str,
                          verb: str) -> tuple[_Sev, str, list[str]] | None:
        """Why ``r``'s pose at its end does not put it at ``place`` (ambiguous: no pose; violated: elsewhere)."""
        if r.pose_at_end is None:
            return _Sev.AMBIGUOUS, f"{r.receipt_id} {missing}", [r.receipt_id]
        err = self._pose_error(r.pose_at_end, place)
        if err:
            return _Sev.VIOLATED, f"{r.receipt_id} {verb} {err}", _receipt_ids(r)
        return None

    def _image_captured(self, ob: Obligation, request: VerifyRequest, caps: list[Receipt]) -> _Outcome:
        spec = ob.params.get("place")
        place = self._resolve(spec, request.places) if spec is not None else None
        problems: list[tuple[_Sev, str, list[str]]] = []
        count = int(ob.params.get("count", 1))
        # params.count: that many images, of distinct artifacts (sha256), each by its own receipt
        good: list[tuple[Receipt, tuple[str, str]]] = []
        for r in caps:
            art = _artifact_of(r)
            if art is not None and any(a[1] == art[1] for _, a in good):
                continue  # the same image twice is one image
            if art is None:
                problems.append((_Sev.AMBIGUOUS, f"{r.receipt_id} carries no artifact uri+sha256", [r.receipt_id]))
                continue
            if place is not None:  # cheaper than re-hashing the file
                problem = self._end_pose_problem(r, place, missing="recorded no pose", verb="was captured")
                if problem is not None:
                    problems.append(problem)
                    continue
            try:
                self._artifact_check(*art)
            except Exception as exc:  # noqa: BLE001 - any failure to re-check is a mismatch
                why = f"{r.receipt_id}: artifact checksum mismatch/missing for {art[0]}: {type(exc).__name__}: {exc}"
                problems.append((_Sev.VIOLATED, why, _receipt_ids(r)))
                continue
            good.append((r, art))
            if len(good) < count:
                continue
            where = f" at {place.label}" if place is not None else ""
            if count == 1:
                return _Outcome(StepVerdict.SATISFIED, "predicate",
                                f"{r.receipt_id} captured {art[0]}{where}; sha256 matches",
                                [*_receipt_ids(r), artifact_evidence_id(art[1])], r.ended_at, (r,))
            ids = [i for g, a in good for i in (*_receipt_ids(g), artifact_evidence_id(a[1]))]
            return _Outcome(StepVerdict.SATISFIED, "predicate",
                            f"{count} distinct images captured{where} ({', '.join(g.receipt_id for g, _ in good)}); "
                            "sha256 matches", ids, r.ended_at, tuple(g for g, _ in good))
        if good:
            problems.append((_Sev.AMBIGUOUS, f"{len(good)} of the {count} distinct images the contract names",
                             [g.receipt_id for g, _ in good]))
        return self._worst(problems, f"no SUCCEEDED {CAPTURE_SKILL} receipt")

    def _message_delivered(self, ob: Obligation, request: VerifyRequest, receipts: list[Receipt],
                           prior: Mapping[str, _Outcome]) -> _Outcome:
        """A message to ``params.to`` (saying ``params.text``), acknowledged; or, when the obligation
        makes ``speak`` eligible (a report to the user), an acknowledged speech saying ``params.text``.

        ``receipts`` are already of eligible skills only. A speech has no recipient to check: whoever
        is there hears it, and only a report to the user makes speech eligible.
        """
        want_to = ob.params.get("to")
        want_text = _bound_text(ob)
        problems: list[tuple[_Sev, str, list[str]]] = []
        needed: dict[str, set[str]] = {}  # params.attachments: the images of these obligations travel with it
        for oid in ob.params.get("attachments") or ():
            judged = prior.get(oid)
            shas = {e.split(":", 2)[2] for e in (judged.evidence if judged is not None else ())
                    if e.startswith("artifact:sha256:")}
            if judged is None or judged.verdict is not StepVerdict.SATISFIED or not shas:
                return _Outcome(StepVerdict.AMBIGUOUS, "predicate", f"the image of {oid} it must carry is not proven")
            needed[oid] = shas
        for r in receipts:
            speech = r.skill == SPEAK_SKILL
            found = self._speech_problems(r, want_text, None) if speech else self._message_problems(r, want_to, want_text)
            if not found and needed:
                sent = {a.get("sha256") for a in (_arguments(r).get("artifacts") or ()) if isinstance(a, Mapping)}
                missing = [oid for oid, shas in needed.items() if not shas & sent]
                if speech or missing:
                    found = [(_Sev.VIOLATED, f"{r.receipt_id} does not carry the image of {', '.join(missing) or 'it'}",
                              _receipt_ids(r))]
            if found:
                problems.extend(found)
                continue
            io, ack = _acknowledged(r)
            said = " the text the contract names" if want_text is not None else ""
            if speech:
                why = (f"{r.receipt_id} spoke the report{said}; acknowledged by {_show(ack['by'])} "
                       f"(sha256 {ack['sha256'][:12]}…)")
            else:
                why = (f"{r.receipt_id} delivered{said} to {_show(io.get('to', _arguments(r).get('to')))}; acknowledged by "
                       f"{_show(ack['by'])} (message {_show(ack['message_id'])}, sha256 {ack['sha256'][:12]}…)")
            return _Outcome(StepVerdict.SATISFIED, "predicate", why, _receipt_ids(r), r.ended_at, (r,))
        return self._worst(problems, f"no SUCCEEDED {'/'.join(eligible_skills(ob))} receipt")

    def _spoken(self, ob: Obligation, request: VerifyRequest, speaks: list[Receipt]) -> _Outcome:
        """An acknowledged speech saying ``params.text``, spoken at ``params.place`` (xy only)."""
        want_text = _bound_text(ob)
        spec = ob.params.get("place")
        place = self._resolve(spec, request.places) if spec is not None else None
        problems: list[tuple[_Sev, str, list[str]]] = []
        for r in speaks:
            found = self._speech_problems(r, want_text, place)
            if found:
                problems.extend(found)
                continue
            io, ack = _acknowledged(r)
            which = "the sentence the contract names" if want_text is not None else "a sentence"
            where = f" at {place.label}" if place is not None else ""
            return _Outcome(StepVerdict.SATISFIED, "predicate",
                            f"{r.receipt_id} spoke {which}{where}; acknowledged by {_show(ack['by'])} "
                            f"(sha256 {ack['sha256'][:12]}…)", _receipt_ids(r), r.ended_at, (r,))
        return self._worst(problems, f"no SUCCEEDED {SPEAK_SKILL} receipt")

    def _speech_problems(self, r: Receipt, want_text: str | None,
                         place: _Place | None) -> list[tuple[_Sev, str, list[str]]]:
        """Why a speak receipt does not prove this speech (empty if it does).

        The words are compared normalised (whitespace, case) with what was sent; the ack must be of
        exactly what was sent (sha256 of the spoken text, and the sender's ``text_sha256``).
        """
        rid, out = r.receipt_id, []
        said = _arguments(r).get("text")
        said = said if isinstance(said, str) else None
        if want_text is not None:
            if said is None:
                out.append((_Sev.AMBIGUOUS, f"{rid} does not record the sentence it spoke", [rid]))
            elif _norm_text(said) != _norm_text(want_text):
                out.append((_Sev.VIOLATED, f"{rid} spoke a sentence that is not the one the contract names",
                            _receipt_ids(r)))
        if place is not None:
            if r.pose_at_end is None:
                out.append((_Sev.AMBIGUOUS, f"{rid} recorded no pose when it spoke", [rid]))
            elif err := self._pose_error(r.pose_at_end, place, yaw=False):
                out.append((_Sev.VIOLATED, f"{rid} was spoken {err}", _receipt_ids(r)))
        io = _io_result(r)
        if io is None:
            out.append((_Sev.AMBIGUOUS, f"{rid} carries no speech result", [rid]))
            return out
        sent = hashlib.sha256(said.encode()).hexdigest() if said is not None else None
        bad = _ack_problem(rid, io, sent_sha_key="text_sha256", expected_sha=sent, message=False, words=_planner_words(r))
        if bad is not None:
            out.append((bad[0], bad[1], _receipt_ids(r) if bad[0] is _Sev.VIOLATED else [rid]))
        return out

    @staticmethod
    def _message_problems(r: Receipt, want_to: Any, want_text: str | None) -> list[tuple[_Sev, str, list[str]]]:
        """Why a send_message receipt does not prove this delivery (empty if it does).

        Recipients are compared ignoring case, whitespace and ``_`` versus space; the text
        normalised (whitespace, case) against the sent arguments' ``text``; the ack must be of
        the payload and message the sender recorded.
        """
        rid, out = r.receipt_id, []
        args = _arguments(r)
        if want_text is not None:
            sent = args.get("text")
            if not isinstance(sent, str):
                out.append((_Sev.AMBIGUOUS, f"{rid} does not record the text it sent", [rid]))
            elif _norm_text(sent) != _norm_text(want_text):
                out.append((_Sev.VIOLATED, f"{rid} sent a text that is not the one the contract names", _receipt_ids(r)))
        io = _io_result(r)
        to = (io or {}).get("to", args.get("to"))
        if want_to is not None:
            if to is None:
                out.append((_Sev.AMBIGUOUS, f"{rid} does not say its recipient", [rid]))
            elif _norm_name(to) != _norm_name(want_to):
                out.append((_Sev.VIOLATED, f"{rid} went to {_show(to)}, not {want_to!r}", _receipt_ids(r)))
        if io is None:
            out.append((_Sev.AMBIGUOUS, f"{rid} carries no delivery result", [rid]))
            return out
        bad = _ack_problem(rid, io, sent_sha_key="sha256", message=True, words=_planner_words(r))
        if bad is not None:
            out.append((bad[0], bad[1], _receipt_ids(r) if bad[0] is _Sev.VIOLATED else [rid]))
        return out

    def _route_closed(self, ob: Obligation, request: VerifyRequest, fresh: WorldSnapshot,
                      admitted: list[Receipt], navs: list[Receipt]) -> _Outcome:
        """Depart, visit the waypoints in order, be back at the start now.

        The route counts from the first current navigation (so poses from an
        earlier attempt cannot close it). ``params.start`` names the start; if
        absent, it is where the robot was when that navigation began.
        """
        if not navs:
            return _Outcome(StepVerdict.AMBIGUOUS, "predicate", f"no SUCCEEDED {NAVIGATE_SKILL} receipt in order")
        t0 = min(r.started_at for r in navs)
        first_nav = min(navs, key=lambda r: r.started_at)
        samples = sorted(
            [*request.trajectory,
             *(PoseSample(t=r.pose_stamp if r.pose_stamp is not None else r.ended_at, pose=r.pose_at_end, source_id=r.receipt_id)
               for r in admitted if r.pose_at_end is not None)],
            key=lambda s: s.t,
        )
        before = [s for s in samples if s.t <= t0]
        window = [s for s in samples if s.t >= t0]
        evidence = [first_nav.receipt_id]
        spec = ob.params.get("start")
        if spec is not None:
            start = self._resolve(spec, request.places)
        else:
            origin = before[-1] if before else (window[0] if window else None)
            if origin is None:
                return _Outcome(StepVerdict.AMBIGUOUS, "predicate", "no pose known for the start of the route", evidence)
            start = _Place(origin.pose, f"start ({origin.pose.x:.2f}, {origin.pose.y:.2f})", False)
            evidence.append(origin.source_id)
        waypoints = [self._resolve(w, request.places) for w in ob.params.get("waypoints") or ()]
        min_dep = float(ob.params.get("min_departure_m", 2.0 * self.config.xy_tolerance_m))

        departed: PoseSample | None = None
        idx = 0
        visited_at = t0
        for s in window:
            if departed is None and s.pose.distance_to(start.pose) > min_dep:
                departed = s
                evidence.append(s.source_id)
                visited_at = max(visited_at, s.t)
            if idx < len(waypoints) and not self._pose_error(s.pose, waypoints[idx], yaw=False):
                evidence.append(s.source_id)
                idx += 1
                visited_at = max(visited_at, s.t)
        if departed is None:
            far = max((s.pose.distance_to(start.pose) for s in window), default=0.0)
            return _Outcome(StepVerdict.VIOLATED, "predicate",
                            f"never departed more than {min_dep} m from {start.label} (farthest {far:.2f} m)", evidence)
        if idx < len(waypoints):
            return _Outcome(StepVerdict.VIOLATED, "predicate",
                            f"waypoint {waypoints[idx].label} (#{idx + 1}) not visited in order", evidence)

        if ob.params.get("final") is False:
            # the goal moves the robot on after the route: its return is history, judged on the recorded poses
            back = next((x for x in window if x.t >= visited_at and not self._pose_error(x.pose, start, yaw=False)),
                        None)
            if back is None:
                return _Outcome(StepVerdict.VIOLATED, "predicate",
                                f"never came back to {start.label} after the route, before moving on", evidence)
            return _Outcome(StepVerdict.SATISFIED, "predicate",
                            f"departed {departed.pose.distance_to(start.pose):.2f} m, visited {len(waypoints)} "
                            f"waypoint(s) in order, back at {start.label} at t={back.t:.3f} ({back.source_id})",
                            [*evidence, back.source_id], back.t, tuple(navs))
        last_end = max(r.ended_at for r in navs)
        if self.config.require_fresh_pose:
            pose, failure = self._fresh_pose(ob, fresh, t0, last_end)
            if failure is not None:
                failure.evidence = evidence + failure.evidence
                return failure
            assert pose is not None
            here, here_id, here_t = pose, fresh.snapshot_id, fresh.captured_at
        else:
            here, here_id, here_t = window[-1].pose, window[-1].source_id, window[-1].t
            age = self._clock.now() - here_t
            if ob.max_age_s is not None and age > ob.max_age_s:
                return _Outcome(StepVerdict.STALE, "floor", f"the last recorded pose ({here_id}) is {age:.1f} s old "
                                f"at verification (max_age_s={ob.max_age_s} s)", [*evidence, here_id])
        evidence.append(here_id)
        err = self._pose_error(here, start, yaw=False)
        if err:
            return _Outcome(StepVerdict.VIOLATED, "predicate", f"not back: current pose ({here_id}) is {err}", evidence)
        return _Outcome(StepVerdict.SATISFIED, "predicate",
                        f"departed {departed.pose.distance_to(start.pose):.2f} m, visited {len(waypoints)} waypoint(s) in order, "
                        f"back at {start.label} ({here_id})", evidence, here_t, tuple(navs))

    # ------------------------------------------------------------------ layer 3: semantic

    def _semantic_layer(self, ob: Obligation, request: VerifyRequest, passed: _Outcome) -> _Outcome:
        receipts = passed.receipts
        artifacts: list[ArtifactRef] = []
        evidence = list(passed.evidence)
        for r in receipts:
            art = _artifact_of(r)
            if art is None:
                continue
            try:
                self._artifact_check(*art)
            except Exception:  # noqa: BLE001, S112 - an artifact that no longer matches is not shown to the judge
                continue
            artifacts.append(ArtifactRef(uri=art[0], sha256=art[1]))
            evidence.append(artifact_evidence_id(art[1]))
        if self._semantic is None:
            # Everything a predicate can check holds; only a judgement is missing, and none is configured.
            return _Outcome(StepVerdict.AMBIGUOUS, "semantic", "no semantic checker configured", evidence,
                            passed.done_at, passed.receipts, awaits_judgement=True)
        shown = tuple(judge_view(r) for r in receipts)  # the judge never sees the planner's words
        verdict, reason = self._judge(ob, goal=request.goal, receipts=shown, artifacts=tuple(artifacts))
        return _Outcome(verdict, "semantic", reason, evidence, passed.done_at if verdict is StepVerdict.SATISFIED else None)

    def _judge(self, ob: Obligation, *, goal: str, receipts: tuple[Receipt, ...],
               artifacts: tuple[ArtifactRef, ...]) -> tuple[StepVerdict, str]:
        """The semantic checker, fenced: a raise or a malformed answer is ambiguous, never satisfied."""
        if self._semantic is None:
            return StepVerdict.AMBIGUOUS, "no semantic checker configured"
        try:
            out = self._semantic.judge(ob, goal=goal, receipts=receipts, artifacts=artifacts)
        except Exception as exc:  # noqa: BLE001 - the judge is untrusted code
            return StepVerdict.AMBIGUOUS, f"semantic checker failed: {type(exc).__name__}: {exc}"
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], StepVerdict)):
            return StepVerdict.AMBIGUOUS, f"semantic checker returned {str(out)[:200]!r}, not (StepVerdict, reason)"
        return out[0], f"semantic: {out[1]}"


def _failure_reason(r: Receipt) -> str:
    """The executor's reason for a failure, unless it repeats the planner's words (then its code or status)."""
    res = r.result or {}
    content = res.get("content")
    err = res.get("error")
    found = ""
    if isinstance(res.get("reason"), str):
        found = res["reason"]
    elif isinstance(content, dict) and isinstance(content.get("reason"), str):
        found = content["reason"]
    elif isinstance(err, dict) and err.get("message"):
        found = str(err["message"])
    if found and not _echoes(found, _planner_words(r)):
        return found[:240]
    for code in ((err or {}).get("code") if isinstance(err, dict) else None,
                 content.get("code") if isinstance(content, dict) else None):
        if isinstance(code, str) and _IDENT.fullmatch(code):
            return code
    return r.status.value.lower()
