"""Completion authority records: evidence references, execution receipts,
completion contracts, verdicts and commits.

These are the only things that can make a mission SUCCEEDED. The planner
produces none of them: the engine writes receipts from what the backends and
robot I/O returned, a contract compiler writes the contract from the user's
goal before the planner runs, the verifier writes verdicts from receipts and
fresh observations, and the commit gate writes commits. Every record here is
frozen and journaled; a change is a new record (a new revision, or a
superseding fact), never an edit.
"""
from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from .records import FORMAT_VERSION, Pose2D

__all__ = [
    "EvidenceRef",
    "bag_evidence_id",
    "artifact_evidence_id",
    "journal_evidence_id",
    "ReceiptStatus",
    "Receipt",
    "ObligationKind",
    "EvidenceKind",
    "NAVIGATE_SKILL",
    "NAVIGATE_THROUGH_SKILL",
    "FOLLOW_WAYPOINTS_SKILL",
    "ROUTE_SKILLS",
    "CAPTURE_SKILL",
    "MESSAGE_SKILL",
    "SPEAK_SKILL",
    "DEFAULT_SKILLS",
    "admissible_skills",
    "eligible_skills",
    "DEFAULT_EVIDENCE",
    "Obligation",
    "CoverageReport",
    "CompletionContract",
    "StepVerdict",
    "GoalVerdict",
    "ObligationVerdict",
    "Verdict",
    "FactStatus",
    "Fact",
    "Commit",
    "canonical_digest",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def canonical_digest(value: Any) -> str:
    """sha256 of the canonical JSON of a record (sorted keys, no whitespace)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- evidence


def bag_evidence_id(bag: str, topic: str, log_time_ns: int) -> str:
    """``bag:<bag file name><topic>@<log time ns>``, e.g. ``bag:m-1.mcap/amcl_pose@1700000000000000000``."""
    return f"bag:{bag}{topic}@{log_time_ns}"


def artifact_evidence_id(sha256: str) -> str:
    return f"artifact:sha256:{sha256}"


def journal_evidence_id(event_id: str) -> str:
    return f"journal:{event_id}"


class EvidenceRef(_Frozen):
    """One cited piece of evidence: a bag message, an artifact, or a journal record.

    ``bag``: the mission bag's file name, the topic and the message's log time
    (and its channel sequence); ``sha256`` is of the serialized (CDR) bytes.
    ``artifact``: a file by URI and sha256 (checked again whenever it is used).
    ``journal``: a journal event by id (and seq), e.g. a snapshot or receipt.
    """

    kind: Literal["bag", "artifact", "journal"]
    id: str
    bag: str = ""
    topic: str = ""
    log_time_ns: int = 0
    sequence: int = 0
    uri: str = ""
    sha256: str = ""
    event_id: str = ""
    seq: int = 0

    @model_validator(mode="after")
    def _complete(self) -> "EvidenceRef":
        if self.kind == "bag" and not (self.bag and self.topic and self.log_time_ns > 0):
            raise ValueError("a bag evidence ref needs bag, topic and log_time_ns")
        if self.kind == "artifact" and not (self.uri and len(self.sha256) == 64):
            raise ValueError("an artifact evidence ref needs uri and a sha256 hex digest")
        if self.kind == "journal" and not self.event_id:
            raise ValueError("a journal evidence ref needs event_id")
        return self

    @classmethod
    def for_bag(cls, bag: str, topic: str, log_time_ns: int, *, sequence: int = 0, sha256: str = "") -> "EvidenceRef":
        return cls(kind="bag", id=bag_evidence_id(bag, topic, log_time_ns), bag=bag, topic=topic,
                   log_time_ns=log_time_ns, sequence=sequence, sha256=sha256)

    @classmethod
    def for_artifact(cls, uri: str, sha256: str) -> "EvidenceRef":
        return cls(kind="artifact", id=artifact_evidence_id(sha256), uri=uri, sha256=sha256)

    @classmethod
    def for_journal(cls, event_id: str, seq: int = 0) -> "EvidenceRef":
        return cls(kind="journal", id=journal_evidence_id(event_id), event_id=event_id, seq=seq)


# --------------------------------------------------------------------------- receipts


class ReceiptStatus(str, enum.Enum):
    """The terminal state of one invocation, as the executor (not the planner) saw it."""

    SUCCEEDED = "SUCCEEDED"
    """Capability returned a result / physical action verified SUCCEEDED."""
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    REJECTED = "REJECTED"
    """Refused before execution (arguments, preconditions, backend reject, policy)."""


class Receipt(_Frozen):
    """An immutable record of one executed invocation (dispatch or capability result).

    Causal link: the model turn and the snapshot the decision was made on.
    Bound to the task (mission), the contract revision and the task state
    version at the time it was written, so a verifier can tell current
    evidence from evidence of an earlier attempt.
    """

    kind: Literal["receipt"] = "receipt"
    format_version: int = FORMAT_VERSION
    receipt_id: str
    mission_id: str
    contract_revision: int
    state_version: int
    """The task state version this receipt was written at (it increments it)."""
    plan_node_id: str
    """The model turn that proposed the invocation."""
    invocation_id: str
    """The tool call id."""
    skill: str
    physical: bool = False
    request: dict[str, Any] = Field(default_factory=dict)
    result: dict[str, Any] = Field(default_factory=dict)
    status: ReceiptStatus
    started_at: float
    ended_at: float
    decision_snapshot_id: str = ""
    """The snapshot the model saw when it asked."""
    outcome_snapshot_id: str = ""
    """For physical actions: the post-terminal snapshot the outcome was judged on."""
    action_id: str = ""
    pose_at_end: Pose2D | None = None
    """The robot's localized pose at the end of the invocation (from a snapshot), if known."""
    pose_stamp: float | None = None
    """Source stamp of ``pose_at_end`` (when it was observed)."""
    evidence: tuple[EvidenceRef, ...] = ()

    def evidence_ids(self) -> list[str]:
        return [self.receipt_id, *(e.id for e in self.evidence)]


# --------------------------------------------------------------------------- contracts


class ObligationKind(str, enum.Enum):
    """What an obligation demands. Each kind has a deterministic predicate in the verifier."""

    AT_PLACE = "at_place"
    """The robot reached a named place (params: place; final: the robot must still be there now)."""
    IMAGE_CAPTURED = "image_captured"
    """An image was captured, at a place if params.place is set, and its artifact still matches its sha256."""
    MESSAGE_DELIVERED = "message_delivered"
    """A message was delivered (params: to, optional) and acknowledged by the transport."""
    SPOKEN = "spoken"
    """A sentence was spoken (speech acknowledged)."""
    ROUTE_CLOSED = "route_closed"
    """A closed route: depart beyond params.min_departure_m from the start, visit params.waypoints in order, return."""
    SEMANTIC = "semantic"
    """Needs a semantic (LLM/VLM) judgement, e.g. "identify a drink bottle"; without one it is ambiguous."""


class EvidenceKind(str, enum.Enum):
    NAVIGATION_RECEIPT = "navigation_receipt"
    POSE_OBSERVATION = "pose_observation"
    IMAGE_ARTIFACT = "image_artifact"
    DELIVERY_RECEIPT = "delivery_receipt"
    SPEECH_RECEIPT = "speech_receipt"
    TRAJECTORY = "trajectory"
    SEMANTIC_JUDGEMENT = "semantic_judgement"


NAVIGATE_SKILL = "navigate_to"
NAVIGATE_THROUGH_SKILL = "navigate_through"
FOLLOW_WAYPOINTS_SKILL = "follow_waypoints"
ROUTE_SKILLS = (NAVIGATE_THROUGH_SKILL, FOLLOW_WAYPOINTS_SKILL)
"""Skills whose one receipt covers several places: each waypoint is judged on the poses observed during it."""
CAPTURE_SKILL = "capture_image"
MESSAGE_SKILL = "send_message"
SPEAK_SKILL = "speak"

DEFAULT_SKILLS: Mapping[ObligationKind, tuple[str, ...]] = MappingProxyType({
    ObligationKind.AT_PLACE: (NAVIGATE_SKILL, *ROUTE_SKILLS),
    ObligationKind.ROUTE_CLOSED: (NAVIGATE_SKILL, *ROUTE_SKILLS),
    ObligationKind.IMAGE_CAPTURED: (CAPTURE_SKILL,),
    ObligationKind.SPOKEN: (SPEAK_SKILL,),
    ObligationKind.MESSAGE_DELIVERED: (MESSAGE_SKILL,),
    ObligationKind.SEMANTIC: (),
})
"""The one map from an obligation kind to the skills whose receipts satisfy it when the obligation
names none (``Obligation.eligible`` empty). ``SEMANTIC`` has none: it is a judgement on the
mission's observations, not the receipt of one skill."""

DEFAULT_EVIDENCE: Mapping[ObligationKind, tuple[EvidenceKind, ...]] = MappingProxyType({
    ObligationKind.AT_PLACE: (EvidenceKind.NAVIGATION_RECEIPT, EvidenceKind.POSE_OBSERVATION),
    ObligationKind.IMAGE_CAPTURED: (EvidenceKind.IMAGE_ARTIFACT,),
    ObligationKind.MESSAGE_DELIVERED: (EvidenceKind.DELIVERY_RECEIPT,),
    ObligationKind.SPOKEN: (EvidenceKind.SPEECH_RECEIPT,),
    ObligationKind.ROUTE_CLOSED: (EvidenceKind.NAVIGATION_RECEIPT, EvidenceKind.POSE_OBSERVATION,
                                  EvidenceKind.TRAJECTORY),
    ObligationKind.SEMANTIC: (EvidenceKind.SEMANTIC_JUDGEMENT, EvidenceKind.IMAGE_ARTIFACT),
})
"""The evidence kinds a compiled obligation of each kind accepts (an eligible extra skill adds its own)."""

_ALSO_ELIGIBLE: Mapping[ObligationKind, tuple[str, ...]] = MappingProxyType({
    ObligationKind.MESSAGE_DELIVERED: (SPEAK_SKILL,),
})
"""Skills an obligation may add to its kind's defaults: a report to the user may be spoken."""

_SKILL_EVIDENCE: Mapping[str, EvidenceKind] = MappingProxyType({
    NAVIGATE_SKILL: EvidenceKind.NAVIGATION_RECEIPT,
    NAVIGATE_THROUGH_SKILL: EvidenceKind.NAVIGATION_RECEIPT,
    FOLLOW_WAYPOINTS_SKILL: EvidenceKind.NAVIGATION_RECEIPT,
    CAPTURE_SKILL: EvidenceKind.IMAGE_ARTIFACT,
    MESSAGE_SKILL: EvidenceKind.DELIVERY_RECEIPT,
    SPEAK_SKILL: EvidenceKind.SPEECH_RECEIPT,
})
"""The kind of evidence a skill's receipt is."""


def admissible_skills(kind: ObligationKind) -> tuple[str, ...]:
    """Every skill that can ever satisfy ``kind``: its defaults, then what an obligation may add."""
    return (*DEFAULT_SKILLS[kind], *_ALSO_ELIGIBLE.get(kind, ()))


class Obligation(_Frozen):
    """One atomic thing the goal requires, with what may prove it."""

    id: str
    """Stable within the contract, e.g. ``o1``."""
    kind: ObligationKind
    description: str
    params: dict[str, Any] = Field(default_factory=dict)
    eligible: tuple[str, ...] = ()
    """The skills whose receipts may satisfy this obligation; empty means the kind's own skill
    (``DEFAULT_SKILLS``). Only skills in ``admissible_skills(kind)`` are accepted (a report may add
    ``speak``); anything else is a validation error naming it. The verifier accepts a receipt of an
    eligible skill and of no other."""
    evidence: tuple[EvidenceKind, ...] = Field(default=(), validate_default=True)
    """Acceptable kinds of evidence (any one path that the predicate accepts). When ``eligible`` adds
    a skill beyond the kind's defaults, that skill's evidence kind is added (empty: the eligible
    skills' evidence kinds), so a report that may be spoken accepts ``speech_receipt``."""
    max_age_s: float | None = None
    """Observations used for this obligation must be at most this old when verified."""
    depends_on: tuple[str, ...] = ()
    """Obligations whose evidence must exist, and come earlier, before this one can be satisfied."""
    source: str = ""
    """The part of the goal this obligation was compiled from (for coverage review and display)."""

    @field_validator("eligible")
    @classmethod
    def _admissible(cls, eligible: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        kind = info.data.get("kind")
        if kind is None:  # the kind itself failed validation; that error is reported
            return eligible
        allowed = admissible_skills(kind)
        for skill in eligible:
            if skill not in allowed:
                raise ValueError(f"a {kind.value} obligation cannot be satisfied by skill {skill!r} "
                                 f"(eligible: {', '.join(allowed) or 'none'})")
        if len(set(eligible)) != len(eligible):
            raise ValueError(f"duplicate eligible skills: {list(eligible)}")
        return eligible

    @field_validator("evidence")
    @classmethod
    def _evidence_of_added_skills(cls, evidence: tuple[EvidenceKind, ...],
                                  info: ValidationInfo) -> tuple[EvidenceKind, ...]:
        kind, eligible = info.data.get("kind"), info.data.get("eligible")
        if kind is None or not eligible or all(s in DEFAULT_SKILLS[kind] for s in eligible):
            return evidence
        if not evidence:  # unspecified: what the eligible skills' receipts are
            return tuple(dict.fromkeys(_SKILL_EVIDENCE[s] for s in eligible if s in _SKILL_EVIDENCE))
        added = [_SKILL_EVIDENCE[s] for s in eligible if s not in DEFAULT_SKILLS[kind] and s in _SKILL_EVIDENCE]
        return (*evidence, *(e for e in dict.fromkeys(added) if e not in evidence))


def eligible_skills(ob: Obligation) -> tuple[str, ...]:
    """The skills whose receipts may satisfy ``ob``: ``ob.eligible``, else its kind's defaults.

    Only admissible skills are returned, even for a record that bypassed validation
    (``model_copy``): a skill the kind cannot be satisfied by never counts, and a record that
    names only such skills gets none (never the defaults).
    """
    allowed = admissible_skills(ob.kind)
    return tuple(s for s in (ob.eligible or DEFAULT_SKILLS[ob.kind]) if s in allowed)


class CoverageReport(_Frozen):
    """A clean-context review of a contract against the goal."""

    reviewer: str
    ok: bool
    uncovered: tuple[str, ...] = ()
    """Parts of the goal that no obligation covers."""
    notes: str = ""


class CompletionContract(_Frozen):
    """What "done" means for one mission: frozen at admission, revisioned, before the planner sees anything."""

    kind: Literal["completion_contract"] = "completion_contract"
    format_version: int = FORMAT_VERSION
    contract_id: str
    mission_id: str
    revision: int = Field(default=1, ge=1)
    goal: str
    compiler: str
    obligations: tuple[Obligation, ...]
    coverage: CoverageReport | None = None
    supersedes: str = ""
    """The contract id of the previous revision (empty for revision 1)."""
    recovery_budgets: dict[str, int] = Field(default_factory=dict)
    """How often each recovery rung may be used in this mission (core/recovery.py); set at admission."""

    @model_validator(mode="after")
    def _well_formed(self) -> "CompletionContract":
        ids = [o.id for o in self.obligations]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate obligation ids: {ids}")
        known = set(ids)
        for o in self.obligations:
            missing = [d for d in o.depends_on if d not in known]
            if missing:
                raise ValueError(f"obligation {o.id} depends on unknown {missing}")
        # dependency cycles
        graph = {o.id: o.depends_on for o in self.obligations}
        state: dict[str, int] = {}

        def visit(n: str) -> None:
            if state.get(n) == 1:
                raise ValueError(f"dependency cycle through obligation {n}")
            if state.get(n) == 2:
                return
            state[n] = 1
            for d in graph[n]:
                visit(d)
            state[n] = 2

        for n in graph:
            visit(n)
        return self

    @property
    def digest(self) -> str:
        return canonical_digest(self)

    def obligation(self, obligation_id: str) -> Obligation:
        for o in self.obligations:
            if o.id == obligation_id:
                return o
        raise KeyError(obligation_id)


# --------------------------------------------------------------------------- verdicts


class StepVerdict(str, enum.Enum):
    SATISFIED = "satisfied"
    VIOLATED = "violated"
    AMBIGUOUS = "ambiguous"
    STALE = "stale"
    UNSAFE = "unsafe"


class GoalVerdict(str, enum.Enum):
    VERIFIED_DONE = "verified_done"
    CONTINUE = "continue"
    BLOCKED = "blocked"
    WAITING_USER = "waiting_user"


class ObligationVerdict(_Frozen):
    obligation_id: str
    verdict: StepVerdict
    layer: Literal["floor", "predicate", "semantic"]
    """The layer that decided (checks run cheapest first and stop at the first failure)."""
    reason: str
    evidence_ids: tuple[str, ...] = ()


class Verdict(_Frozen):
    """The verifier's judgement of one done proposal, bound to exactly what it judged."""

    kind: Literal["verdict"] = "verdict"
    format_version: int = FORMAT_VERSION
    verdict_id: str
    mission_id: str
    contract_id: str
    contract_revision: int
    state_version: int
    plan_node_id: str
    invocation_id: str
    goal_verdict: GoalVerdict
    steps: tuple[ObligationVerdict, ...]
    missing: tuple[str, ...] = ()
    """Obligation ids not satisfied (with ``continue``)."""
    evidence_ids: tuple[str, ...] = ()
    """Every evidence id any step used."""
    fresh_snapshot_id: str = ""
    created_at: float = 0.0
    verifier: str = ""

    def step(self, obligation_id: str) -> ObligationVerdict:
        for s in self.steps:
            if s.obligation_id == obligation_id:
                return s
        raise KeyError(obligation_id)


# --------------------------------------------------------------------------- facts and commits


class FactStatus(str, enum.Enum):
    OBSERVED = "observed"
    """Reported by a receipt or an observation; not trusted task state."""
    COMMITTED = "committed"
    """Accepted by the commit gate on a satisfied verdict."""


class Fact(_Frozen):
    """Versioned task memory: appended, never overwritten (``supersedes`` names the fact it replaces)."""

    fact_id: str
    mission_id: str
    key: str
    """e.g. ``obligation:o1`` or ``robot.pose``."""
    value: dict[str, Any]
    status: FactStatus
    provenance: tuple[str, ...]
    """Evidence ids (receipts, snapshots, verdicts) the fact rests on."""
    observed_at: float
    state_version: int
    supersedes: str = ""


class Commit(_Frozen):
    """The commit gate accepted a verdict: the only route to a terminal success."""

    kind: Literal["commit"] = "commit"
    commit_id: str
    mission_id: str
    verdict_id: str
    contract_id: str
    contract_revision: int
    state_version_before: int
    state_version_after: int
    obligations: tuple[str, ...]
    facts: tuple[Fact, ...] = ()
