"""Typed journal payloads: one pydantic model per ``records.EventType`` member.

A ``JournalEvent`` has a typed envelope (seq, ids, stamp) and a payload stored
as JSON. This module is the one place that knows each payload's shape: every
reader asks ``payload_of(event, Model)`` for the model of the event's type
instead of re-learning the writer's dict keys, and a writer builds the model
and hands it to ``EventDraft(payload=model)``; the journal stores
``payload_dict(model)``.

What is guaranteed:

* **One adapter.** The models form a union tagged by event type, validated
  and serialized through one ``TypeAdapter`` (``PAYLOAD_ADAPTER``).
* **Old journals stay readable.** A field added after journals were written
  has a default, so a payload that lacks it reads with the default; keys a
  model does not know (older or other writers) are kept on the model
  (``model_extra``) and written back unchanged, never a reason to fail.
* **A wrong shape is refused on write.** ``Journal._prepare`` validates every
  draft's payload against its type's model (``validate_draft_payload``); a
  wrong type or a missing required field is ``PayloadShapeError``, a caller
  mistake (``UsageError``), and nothing is stored.
* **A stored payload that no longer validates** (a hand-edited file, a record
  from another program) is ``PayloadReadError`` when read through
  ``payload_of``; tolerant readers (the timeline, the mission view) catch it.
* **Version.** A payload written from a model carries ``payload_version``
  (``PAYLOAD_FORMAT_VERSION``); one written as a plain dict (journals from
  before typed payloads, writers not yet converted) reads as version 0. No
  reader branches on it yet: it is there so a later change that reinterprets
  a field can tell the shapes apart.

Completion records (``Receipt``, ``Verdict``, ``Commit``, ``Fact``,
``CompletionContract``), snapshots, tool results and recovery records are
carried inside payloads as their own models, validated here on both paths.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from .completion import Commit, CompletionContract, EvidenceRef, Fact, Receipt, Verdict
from .errors import RefusalError, UsageError
from .preconditions import Check
from .recovery import Failure, RecoveryDecision
from .records import (
    ActionStatus,
    ActionView,
    EventType,
    ModelResponse,
    Pose2D,
    RuntimeEvent,
    ToolResult,
    ToolResultStatus,
    WorldSnapshot,
)

__all__ = [
    "PAYLOAD_FORMAT_VERSION",
    "PAYLOAD_ADAPTER",
    "PAYLOAD_MODELS",
    "EventPayload",
    "PayloadShapeError",
    "PayloadReadError",
    "payload_of",
    "parse_payload",
    "payload_dict",
    "validate_draft_payload",
    "prime",
    # parts
    "PosePart",
    "ActionPart",
    "DispatchIntent",
    "DispatchPart",
    "DispatchPolicy",
    "FreshSnapshotPart",
    "BagPart",
    # one model per event type
    "MissionStarted",
    "ModelTurnStarted",
    "WorldSnapshotCaptured",
    "ModelResponseRecorded",
    "ToolCallRecorded",
    "ActionPreconditionChecked",
    "ToolResultRecorded",
    "RobotActionStarted",
    "RobotActionStateChanged",
    "RobotActionProgress",
    "RobotActionOutcome",
    "BackendEventUncorrelated",
    "RuntimeEventDelivered",
    "ContractFrozen",
    "ReceiptRecorded",
    "DoneProposed",
    "VerdictRecorded",
    "CommitRecorded",
    "GateRejected",
    "RecoveryDecided",
    "FactRecorded",
    "RobotActionReconciled",
    "LeaseAcquired",
    "LeaseReleased",
    "LeaseBlocked",
    "LeaseWaited",
    "StopRequested",
    "InteractionRequested",
    "InteractionResolved",
    "MissionFinished",
    "MissionRefused",
    "ResponseDropped",
]

PAYLOAD_FORMAT_VERSION = 1
"""The payload schema version written by ``payload_dict``; 0 (absent) means written as a plain dict."""

_TAG = "event_type"
"""The discriminator key: added to a stored payload on the way in, never stored."""


class PayloadShapeError(UsageError):
    """A writer's payload does not have its event type's shape (or names another type's model)."""

    code = "invalid_payload"


class PayloadReadError(RefusalError):
    """A stored payload does not validate as its event type's model: that record cannot be read typed."""

    code = "payload_unreadable"


class EventPayload(BaseModel):
    """Base of every payload model: frozen, unknown keys kept (``model_extra``), a version."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    EVENT_TYPE: ClassVar[EventType]

    payload_version: int = 0
    """``PAYLOAD_FORMAT_VERSION`` when written from a model; 0 for a payload written as a plain dict."""


class _Part(BaseModel):
    """A lenient nested shape: every field has a default, unknown keys are kept."""

    model_config = ConfigDict(frozen=True, extra="allow")


def _wrap_bare(data: Any, *, key: str, fields: tuple[str, ...]) -> Any:
    """An older record that is the nested record itself: move ``fields`` under ``key`` (unless ``key`` is there)."""
    if not isinstance(data, Mapping) or key in data or not any(f in data for f in fields):
        return data
    return {**{k: v for k, v in data.items() if k not in fields}, key: {f: data[f] for f in fields if f in data}}


def _lift_nested(data: Any, *, unless: str, fields: tuple[str, ...], sources: tuple[str, ...]) -> Any:
    """An older record that nests today's top-level ``fields`` in one of ``sources``: copy them up
    (unless ``unless`` is already at the top level)."""
    if not isinstance(data, Mapping) or unless in data:
        return data
    nested = next((data[k] for k in sources if isinstance(data.get(k), Mapping)), None)
    if nested is None:
        return data
    return {**data, **{f: nested[f] for f in fields if f in nested}}


# ============================================================================ nested parts


class PosePart(_Part):
    """A pose as a backend reported it; a coordinate the backend sent as NaN reads as None."""

    x: float | None = None
    """Metres in the map frame; None when the backend sent none (or NaN)."""
    y: float | None = None
    """Metres in the map frame; None when the backend sent none (or NaN)."""
    yaw: float | None = None
    """Radians; None when the backend sent none."""

    def pose(self) -> Pose2D | None:
        """The pose, or None when x or y is missing."""
        if self.x is None or self.y is None:
            return None
        return Pose2D(x=self.x, y=self.y, yaw=self.yaw or 0.0)


class ActionPart(_Part):
    """A managed action as journaled with its start or outcome (``ActionView``'s fields, each optional:
    records written by older code or tests may carry only some)."""

    action_id: str = ""
    """The action's id (the event's ``robot_action_id``); "" when not written."""
    tool_call_id: str = ""
    """The tool call that asked for the action."""
    skill: str = ""
    """The physical skill (``navigate_to``, ...)."""
    state: ActionStatus | None = None
    """Its lifecycle state when written; None when not written."""
    revision: int = 0
    """Its revision when written (0 at creation)."""
    backend_goal_id: str = ""
    """The backend's goal id, once known."""
    backend_status: str = ""
    """The backend's last status word, once known."""
    reason: str = ""
    """Why it is in its state, in words."""
    target: Pose2D | None = None
    """The goal pose, when the skill has one."""
    decision_snapshot_id: str = ""
    """The snapshot the planner decided on."""
    outcome_snapshot_id: str = ""
    """The snapshot the outcome was judged on (outcomes only)."""
    requested_at: float = 0.0
    """Epoch seconds the action was created."""
    updated_at: float = 0.0
    """Epoch seconds of its last change."""

    def view(self, **base: Any) -> ActionView:
        """An ``ActionView`` of what was written over ``base`` (the fields the caller knows otherwise);
        raises ``ValueError`` when the two still do not make a valid view."""
        written = self.model_dump(mode="json", exclude_unset=True)
        return ActionView.model_validate({**base, **{k: v for k, v in written.items() if k in ActionView.model_fields}})


class DispatchIntent(_Part):
    """What a physical dispatch asked the backend for, recorded before the backend was asked."""

    backend: str = ""
    """The navigation backend's name (``nav2``, ``sim``, ...)."""
    target: Pose2D | None = None
    """The resolved goal pose (None only in records that did not resolve one)."""
    frame_id: str = ""
    """The frame of ``target``."""
    timeout_s: float | None = None
    """How long the harness waits for a terminal report before it cancels."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The tool call's arguments as the planner gave them."""
    provider: str = ""
    """The provider routing chose (issue 18, core/routing.py); "" when the robot has one navigation stack."""
    capability: str = ""
    routing: dict[str, Any] | None = None
    """The routing decision: every candidate with its score terms, who was chosen and why."""


class DispatchPart(_Part):
    """The dispatch key a physical action was sent under (absent in journals before dispatch keys)."""

    key: str = ""
    """``durable.DispatchKey.text``; "" only in records written before dispatch keys."""
    goal_id: str = ""
    """The backend goal id derived from the key (``durable.goal_uuid_for``)."""
    resources: tuple[str, ...] = ()
    """The resources the action leases (``base``, ...)."""
    node: str = ""
    """The plan node (model turn) of the key."""
    attempt: int = 0
    """The attempt the recovery policy authorized (1 first)."""
    state_version: int = 0
    """The task state version the dispatch was decided at."""


class DispatchPolicy(_Part):
    """Under which policy decision an action was dispatched."""

    preconditions: str = ""
    """``passed``: the pre-dispatch check of the same commit held."""
    approval: str = ""
    """The interaction id of the operator's approval, or ""."""
    authorized_attempt: int = 0
    """The attempt number the dispatch ran under."""


class FreshSnapshotPart(_Part):
    """The snapshot the verifier captured for itself, by id (and its bag message, when recorded)."""

    snapshot_id: str = ""
    """The fresh snapshot's id (its own WORLD_SNAPSHOT_CAPTURED precedes the verdict)."""
    bag_ref: EvidenceRef | None = None
    """Its message in the mission bag, when one was recorded."""


class BagPart(_Part):
    """The mission bag as the recorder described it at the mission's end."""

    path: str = ""
    """The bag directory; "" when no bag was recorded."""


# ============================================================================ one model per event type


class MissionStarted(EventPayload):
    """``MISSION_STARTED``: the admitted goal, the configuration it runs under and who owns it."""

    EVENT_TYPE: ClassVar[EventType] = EventType.MISSION_STARTED
    event_type: Literal[EventType.MISSION_STARTED] = Field(EventType.MISSION_STARTED, exclude=True, repr=False)
    goal: str = ""
    """The user's goal text, verbatim (after redaction)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """``HarnessConfig.model_dump(mode="json")`` as the mission ran with it (a replay re-loads it)."""
    config_version: int = 0
    """The configuration version the mission is pinned to (core/config_versions.py; 0: none, e.g. a run
    outside a supervisor or before versions)."""
    config_hash: str = ""
    """That version's content hash."""
    tools: list[str] = Field(default_factory=list)
    """The skill names offered to the planner."""
    owner: str = ""
    """Who sent the mission (a name, never a credential)."""
    owner_sha256: str = ""
    """Only in records written before keyed digests: the owner token's plain sha256."""
    owner_hmac: str = ""
    """The owner credential's keyed digest ("" in records from before keyed digests)."""
    sender_hmac: str = ""
    """The sender credential's keyed digest ("" in records from before keyed digests)."""


class ModelTurnStarted(EventPayload):
    """``MODEL_TURN_STARTED``: a turn's index and the context the planner was given."""

    EVENT_TYPE: ClassVar[EventType] = EventType.MODEL_TURN_STARTED
    event_type: Literal[EventType.MODEL_TURN_STARTED] = Field(EventType.MODEL_TURN_STARTED, exclude=True, repr=False)
    turn_index: int | None = None
    """0-based turn index within the mission; None only in records that did not write one."""
    context_bytes: int | None = None
    """Size of the compiled context in bytes (``context.context_size``)."""
    context: dict[str, Any] = Field(default_factory=dict)
    """The compiled planner context (``core/context.py``), as sent."""


class WorldSnapshotCaptured(EventPayload):
    """``WORLD_SNAPSHOT_CAPTURED``: the snapshot itself, persisted (the journal also indexes it by id)."""

    EVENT_TYPE: ClassVar[EventType] = EventType.WORLD_SNAPSHOT_CAPTURED
    event_type: Literal[EventType.WORLD_SNAPSHOT_CAPTURED] = Field(
        EventType.WORLD_SNAPSHOT_CAPTURED, exclude=True, repr=False)
    snapshot: WorldSnapshot | None = None
    """Present and valid in every event a journal stored (it refuses one without); None only in records
    built by hand elsewhere (tests, other tools), which still cite their ``bag_ref``."""
    reason: str = ""
    """Why it was captured (``before_model_turn``, ``pre_dispatch``, ``verification``, ...)."""
    bag_ref: EvidenceRef | None = None
    """The snapshot's message in the mission bag, when one was recorded."""


class ModelResponseRecorded(EventPayload):
    """``MODEL_RESPONSE_RECORDED``: the planner's response, verbatim (redacted), or its error."""

    EVENT_TYPE: ClassVar[EventType] = EventType.MODEL_RESPONSE_RECORDED
    event_type: Literal[EventType.MODEL_RESPONSE_RECORDED] = Field(
        EventType.MODEL_RESPONSE_RECORDED, exclude=True, repr=False)
    response: ModelResponse | None = None
    """The response, verbatim (redacted); None only when the planner gave none."""
    error: dict[str, Any] | str | None = None
    """Why the planner gave no usable answer (a structured error), or None."""

    @model_validator(mode="before")
    @classmethod
    def _bare_response(cls, data: Any) -> Any:
        """An older record whose payload is the response itself."""
        if isinstance(data, Mapping) and not any(k in data for k in ("tool_calls", "done", "text")):
            return data
        return _wrap_bare(data, key="response", fields=("tool_calls", "done", "text", "meta"))


class ToolCallRecorded(EventPayload):
    """``TOOL_CALL_RECORDED``: one tool call with its (redacted) arguments and the skill's view."""

    EVENT_TYPE: ClassVar[EventType] = EventType.TOOL_CALL_RECORDED
    event_type: Literal[EventType.TOOL_CALL_RECORDED] = Field(EventType.TOOL_CALL_RECORDED, exclude=True, repr=False)
    name: str = ""
    """The tool the planner called (it may be unknown to the harness)."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The arguments as the planner gave them (redacted); may be invalid for the tool."""
    index: int | None = None
    """Position of the call within its response."""
    skill_view: dict[str, Any] | None = None
    """The C2 view the call was judged in (``{role, scope, items, ...}``); absent for non-skill calls."""
    proposed_by: str = "planner"
    """Who made the call: ``planner``, or ``recovery`` (the recovery policy's ``nav2_behavior`` rung)."""

    @model_validator(mode="before")
    @classmethod
    def _nested_call(cls, data: Any) -> Any:
        """An older record that nests the call (``tool_call`` or ``call``)."""
        return _lift_nested(data, unless="name", fields=("name", "arguments"), sources=("tool_call", "call"))


class ActionPreconditionChecked(EventPayload):
    """``ACTION_PRECONDITION_CHECKED``: ``preconditions.PreconditionReport``, at the top level."""

    EVENT_TYPE: ClassVar[EventType] = EventType.ACTION_PRECONDITION_CHECKED
    event_type: Literal[EventType.ACTION_PRECONDITION_CHECKED] = Field(
        EventType.ACTION_PRECONDITION_CHECKED, exclude=True, repr=False)
    ok: bool
    """Every check passed; only then was the action dispatched."""
    checks: tuple[Check, ...] = ()
    """Every check, in the order run, each with its own verdict and detail."""
    decision_snapshot_id: str = ""
    """The snapshot the planner decided on."""
    fresh_snapshot_id: str = ""
    """The pre-dispatch snapshot the checks ran on."""
    kind: str = "precondition_report"
    """``PreconditionReport.kind``."""


class ToolResultRecorded(EventPayload):
    """``TOOL_RESULT_RECORDED``: the one ``ToolResult`` of a call, at the top level."""

    EVENT_TYPE: ClassVar[EventType] = EventType.TOOL_RESULT_RECORDED
    event_type: Literal[EventType.TOOL_RESULT_RECORDED] = Field(
        EventType.TOOL_RESULT_RECORDED, exclude=True, repr=False)
    status: ToolResultStatus | None = None
    """What the call established immediately, never the physical outcome (None only in hand-written
    records that give none; every harness writer writes it)."""
    tool_call_id: str = ""
    """The call this result answers (each call gets exactly one)."""
    name: str = ""
    """The tool's name."""
    content: dict[str, Any] = Field(default_factory=dict)
    """What the tool returned (an artifact ref, a dispatch summary, ...)."""
    error: dict[str, Any] | None = None
    """A structured error (``code``, ``message``, ...) when the call failed."""
    action_id: str | None = None
    """The managed action the call created, if any."""
    kind: str = "tool_result"
    """``ToolResult.kind``."""
    format_version: int = 1
    """``ToolResult.format_version`` (the record's own version, not the payload's)."""

    @model_validator(mode="before")
    @classmethod
    def _nested_result(cls, data: Any) -> Any:
        """An older record that nests the result (``result``)."""
        return _lift_nested(data, unless="status", fields=tuple(ToolResult.model_fields), sources=("result",))

    @classmethod
    def of(cls, result: ToolResult) -> ToolResultRecorded:
        """The payload of ``result``, every field of it written."""
        return cls.model_validate(result.model_dump(mode="json"))

    def result(self) -> ToolResult:
        """The ``ToolResult`` this payload holds."""
        if self.status is None:
            raise PayloadReadError(f"tool result {self.tool_call_id} has no status", tool_call_id=self.tool_call_id)
        return ToolResult(tool_call_id=self.tool_call_id, name=self.name, status=self.status, content=self.content,
                          error=self.error, action_id=self.action_id)


class RobotActionStarted(EventPayload):
    """``ROBOT_ACTION_STARTED``: the dispatch intent, committed before the backend is asked."""

    EVENT_TYPE: ClassVar[EventType] = EventType.ROBOT_ACTION_STARTED
    event_type: Literal[EventType.ROBOT_ACTION_STARTED] = Field(
        EventType.ROBOT_ACTION_STARTED, exclude=True, repr=False)
    intent: DispatchIntent | None = None
    """None only in journals written before dispatch intents."""
    dispatch: DispatchPart | None = None
    """None only in journals written before dispatch keys."""
    policy: DispatchPolicy | None = None
    """None only in journals written before policies were recorded."""
    action: ActionPart = Field(default_factory=ActionPart)
    """The action as created (REQUESTED)."""

    @model_validator(mode="before")
    @classmethod
    def _bare_action(cls, data: Any) -> Any:
        """An older record whose payload is the action itself."""
        if isinstance(data, Mapping) and "skill" not in data:
            return data
        return _wrap_bare(data, key="action", fields=tuple(ActionView.model_fields))

    @property
    def target(self) -> Pose2D | None:
        """The goal pose: the intent's, else the action's."""
        if self.intent is not None and self.intent.target is not None:
            return self.intent.target
        return self.action.target


class RobotActionStateChanged(EventPayload):
    """``ROBOT_ACTION_STATE_CHANGED``: one revision-checked lifecycle transition (``ManagedAction.transition``)."""

    EVENT_TYPE: ClassVar[EventType] = EventType.ROBOT_ACTION_STATE_CHANGED
    event_type: Literal[EventType.ROBOT_ACTION_STATE_CHANGED] = Field(
        EventType.ROBOT_ACTION_STATE_CHANGED, exclude=True, repr=False)
    to: ActionStatus
    """The state moved to; always present."""
    from_: ActionStatus | None = Field(default=None, alias="from")
    """The state moved from (stored as ``from``); None only in records that did not write it."""
    reason: str = ""
    """Why, in words."""
    revision: int = 0
    """The action's revision after this transition (the first transition makes it 1)."""
    backend_goal_id: str = ""
    """The backend's goal id at the time ("" before acceptance)."""


class RobotActionProgress(EventPayload):
    """``ROBOT_ACTION_PROGRESS``: correlated backend feedback (rate-limited)."""

    EVENT_TYPE: ClassVar[EventType] = EventType.ROBOT_ACTION_PROGRESS
    event_type: Literal[EventType.ROBOT_ACTION_PROGRESS] = Field(
        EventType.ROBOT_ACTION_PROGRESS, exclude=True, repr=False)
    distance_remaining: float | None = None
    """Metres, as the backend reported; None when it reported none."""
    current_pose: PosePart | None = None
    """The backend's pose estimate in its feedback, if any."""
    navigation_time_s: float | None = None
    """Nav2's feedback: time on this goal so far (absent in records before issue 16)."""
    estimated_time_remaining_s: float | None = None
    number_of_recoveries: int | None = None
    """Recoveries Nav2's behavior tree has run on this goal."""
    number_of_poses_remaining: int | None = None
    """NavigateThroughPoses's feedback: poses not yet passed (absent before issue 16's routes)."""
    current_waypoint: int | None = None
    """FollowWaypoints's feedback: the index of the waypoint it is driving to."""
    distance_traveled: float | None = None
    """BackUp's feedback, metres."""
    angular_distance_traveled: float | None = None
    """Spin's feedback, radians."""
    time_left_s: float | None = None
    """Wait's feedback, seconds."""
    waypoint_reached: dict[str, Any] | None = None
    """A route's waypoint seen reached by the harness itself: ``{index, place, snapshot_id, t}`` (the journaled
    snapshot whose fresh pose was within the verifier's tolerance of it); not the backend's word."""


class RobotActionOutcome(EventPayload):
    """``ROBOT_ACTION_OUTCOME``: the verified outcome of an action, with its evidence."""

    EVENT_TYPE: ClassVar[EventType] = EventType.ROBOT_ACTION_OUTCOME
    event_type: Literal[EventType.ROBOT_ACTION_OUTCOME] = Field(
        EventType.ROBOT_ACTION_OUTCOME, exclude=True, repr=False)
    state: ActionStatus
    """SUCCEEDED, FAILED or UNKNOWN: the outcome check's verdict, never the backend's word alone."""
    reason: str = ""
    """Why, in words (the outcome check's reason)."""
    evidence: dict[str, Any] = Field(default_factory=dict)
    """The outcome check's evidence (``reconciled: true`` when judged after a restart)."""
    action: ActionPart = Field(default_factory=ActionPart)
    """The action as it ended."""


class BackendEventUncorrelated(EventPayload):
    """``BACKEND_EVENT_UNCORRELATED``: a backend event for a goal this mission did not start."""

    EVENT_TYPE: ClassVar[EventType] = EventType.BACKEND_EVENT_UNCORRELATED
    event_type: Literal[EventType.BACKEND_EVENT_UNCORRELATED] = Field(
        EventType.BACKEND_EVENT_UNCORRELATED, exclude=True, repr=False)
    goal_id: str = ""
    """The backend goal the event was about (not this action's)."""
    type: str = ""
    """The backend event's kind (``feedback``, ``status``)."""
    status: str = ""
    """The backend status word, if any."""
    note: str = ""
    """Why it was ignored."""


class RuntimeEventDelivered(EventPayload):
    """``RUNTIME_EVENT_DELIVERED``: ``records.RuntimeEvent``, at the top level."""

    EVENT_TYPE: ClassVar[EventType] = EventType.RUNTIME_EVENT_DELIVERED
    event_type: Literal[EventType.RUNTIME_EVENT_DELIVERED] = Field(
        EventType.RUNTIME_EVENT_DELIVERED, exclude=True, repr=False)
    type: str = "runtime_event"
    """The runtime event's type (``robot_action_outcome``, ``done_rejected``, ...)."""
    tool_call_id: str = ""
    """The call it concerns, if any."""
    action_id: str = ""
    """The action it concerns, if any."""
    state: str = ""
    """Its state word (an ``ActionStatus`` value, ``gate_rejected``, ...)."""
    detail: dict[str, Any] = Field(default_factory=dict)
    """What the planner is told about it (``reason``, ...)."""
    kind: str = "runtime_event"
    """``RuntimeEvent.kind``."""

    @classmethod
    def of(cls, event: RuntimeEvent) -> RuntimeEventDelivered:
        """The payload of ``event``, every field of it written."""
        return cls.model_validate(event.model_dump(mode="json"))


class ContractFrozen(EventPayload):
    """``CONTRACT_FROZEN``: a new contract revision, or (``error``, no ``contract``) a failed compilation."""

    EVENT_TYPE: ClassVar[EventType] = EventType.CONTRACT_FROZEN
    event_type: Literal[EventType.CONTRACT_FROZEN] = Field(EventType.CONTRACT_FROZEN, exclude=True, repr=False)
    contract: CompletionContract | None = None
    """None exactly when the compilation failed (then ``error`` says why)."""
    error: dict[str, Any] | None = None
    """Why the compilation failed (``code``, ``message``, ``details``); None when it did not."""
    state_version: int | None = None
    """The task state version after this revision; None in a failed compilation."""
    llm_calls: list[dict[str, Any]] = Field(default_factory=list)
    """Model calls made by the contract compiler and the coverage review."""


class ReceiptRecorded(EventPayload):
    """``RECEIPT_RECORDED``: one immutable execution receipt."""

    EVENT_TYPE: ClassVar[EventType] = EventType.RECEIPT_RECORDED
    event_type: Literal[EventType.RECEIPT_RECORDED] = Field(EventType.RECEIPT_RECORDED, exclude=True, repr=False)
    receipt: Receipt
    """Always present and valid (the gate folds it into the task state)."""


class DoneProposed(EventPayload):
    """``DONE_PROPOSED``: the planner's words; a request for verification, never a verdict."""

    EVENT_TYPE: ClassVar[EventType] = EventType.DONE_PROPOSED
    event_type: Literal[EventType.DONE_PROPOSED] = Field(EventType.DONE_PROPOSED, exclude=True, repr=False)
    text: str = ""
    """The planner's words, verbatim: never evidence."""


class VerdictRecorded(EventPayload):
    """``VERDICT_RECORDED``: the verifier's verdict, the request it judged and its own fresh snapshot."""

    EVENT_TYPE: ClassVar[EventType] = EventType.VERDICT_RECORDED
    event_type: Literal[EventType.VERDICT_RECORDED] = Field(EventType.VERDICT_RECORDED, exclude=True, repr=False)
    verdict: Verdict
    """Always present and valid."""
    request: dict[str, Any] | None = None
    """``verifier.VerifyRequest.model_dump(mode="json")``; None in a verdict written by the gate's
    ``commit_drafts`` alone (then nothing can be replayed)."""
    fresh_snapshot: FreshSnapshotPart | None = None
    """The verifier's own snapshot; None in verdicts written without one."""


class CommitRecorded(EventPayload):
    """``COMMIT_RECORDED``: the commit gate accepted a verdict."""

    EVENT_TYPE: ClassVar[EventType] = EventType.COMMIT_RECORDED
    event_type: Literal[EventType.COMMIT_RECORDED] = Field(EventType.COMMIT_RECORDED, exclude=True, repr=False)
    commit: Commit
    """Always present and valid; it follows its verdict in the same transaction."""


class GateRejected(EventPayload):
    """``GATE_REJECTED``: the gate refused a verdict; the rejection's details ride as extra keys."""

    EVENT_TYPE: ClassVar[EventType] = EventType.GATE_REJECTED
    event_type: Literal[EventType.GATE_REJECTED] = Field(EventType.GATE_REJECTED, exclude=True, repr=False)
    verdict_id: str = ""
    """The refused verdict."""
    code: str = ""
    """``GateRejection.code``."""
    message: str = ""
    """Why, in words (the first field that did not match)."""


class RecoveryDecided(EventPayload):
    """``RECOVERY_DECIDED``: a structured failure and the rung chosen for it."""

    EVENT_TYPE: ClassVar[EventType] = EventType.RECOVERY_DECIDED
    event_type: Literal[EventType.RECOVERY_DECIDED] = Field(EventType.RECOVERY_DECIDED, exclude=True, repr=False)
    failure: Failure
    """The structured failure; always present."""
    decision: RecoveryDecision
    """The rung chosen and the budget left; always present."""
    llm_calls: list[dict[str, Any]] = Field(default_factory=list)
    """Model calls the recovery advisor made (redacted)."""


class FactRecorded(EventPayload):
    """``FACT_RECORDED``: a versioned task fact."""

    EVENT_TYPE: ClassVar[EventType] = EventType.FACT_RECORDED
    event_type: Literal[EventType.FACT_RECORDED] = Field(EventType.FACT_RECORDED, exclude=True, repr=False)
    fact: Fact
    """Always present and valid."""


class RobotActionReconciled(EventPayload):
    """``ROBOT_ACTION_RECONCILED``: what the backend said about an action whose supervision was cut short."""

    EVENT_TYPE: ClassVar[EventType] = EventType.ROBOT_ACTION_RECONCILED
    event_type: Literal[EventType.ROBOT_ACTION_RECONCILED] = Field(
        EventType.ROBOT_ACTION_RECONCILED, exclude=True, repr=False)
    finding: str = ""
    """A ``reconcile.Finding`` value, ``acknowledgment_lost`` or ``operator_cleared``."""
    backend_status: str = ""
    """What the backend said about the goal ("" when not asked)."""
    detail: str = ""
    """What was found, in words (for ``operator_cleared``: who and why)."""
    goal_id: str = ""
    """The backend goal looked up ("" when none)."""
    action_state: str = ""
    """The state the reconciliation moved the action to, or ""."""


class LeaseAcquired(EventPayload):
    """``LEASE_ACQUIRED``: an exclusive resource lease taken (or renewed) before its owner ran."""

    EVENT_TYPE: ClassVar[EventType] = EventType.LEASE_ACQUIRED
    event_type: Literal[EventType.LEASE_ACQUIRED] = Field(EventType.LEASE_ACQUIRED, exclude=True, repr=False)
    resource: str
    """The resource leased (``base``, ``camera``, ...); always present."""
    owner: str
    """The action id (physical skills) or tool call id (capabilities) holding it."""
    expires_at: float = 0.0
    """Epoch seconds after which an unrenewed lease may be settled."""
    skill: str = ""
    """The skill its owner runs."""
    intent: dict[str, Any] | None = None
    """A keyed capability's dispatch intent (``key``, ``tool_call_id``, ...); absent for physical actions."""
    scope: str = ""
    """``site``: a resource the whole fleet shares (``durable.SITE``: an elevator, a door), leased across
    robots; "" a resource of the writing robot's own body (its base, camera...). The lease's fencing token
    is this event's seq."""


class LeaseReleased(EventPayload):
    """``LEASE_RELEASED``: a lease ended on a confirmed end, or an operator cleared it."""

    EVENT_TYPE: ClassVar[EventType] = EventType.LEASE_RELEASED
    event_type: Literal[EventType.LEASE_RELEASED] = Field(EventType.LEASE_RELEASED, exclude=True, repr=False)
    resource: str
    """Always present."""
    owner: str
    """The owner that held it; always present."""
    why: str = ""
    """A ``durable.ReleaseReason`` value."""
    detail: str = ""
    """What ended it, in words."""
    operator: str = ""
    """Who cleared it (``operator_cleared`` only)."""
    scope: str = ""
    """As ``LeaseAcquired.scope``."""
    fence: int = 0
    """The fencing token the writer holds the lease under (a site lease's acquisition seq); a write that
    presents any other token than the lease's current one is refused (``durable.StaleFence``). Not named
    ``token``: the journal's redactor hides every field so named."""


class LeaseBlocked(EventPayload):
    """``LEASE_BLOCKED``: the owner ended with an unknown outcome; the resource is blocked."""

    EVENT_TYPE: ClassVar[EventType] = EventType.LEASE_BLOCKED
    event_type: Literal[EventType.LEASE_BLOCKED] = Field(EventType.LEASE_BLOCKED, exclude=True, repr=False)
    resource: str
    """Always present."""
    owner: str
    """The owner whose outcome is unknown; always present."""
    reason: str = ""
    """Why the outcome is unknown, in words."""
    scope: str = ""
    """As ``LeaseAcquired.scope``."""
    fence: int = 0
    """As ``LeaseReleased.fence``."""


class LeaseWaited(EventPayload):
    """``LEASE_WAITED``: a call needs a site resource another robot holds; the wait (bounded by
    ``site.lease_wait_s``) began (``outcome: waiting``) or ended (``free``, ``refused``, ``stopped``)."""

    EVENT_TYPE: ClassVar[EventType] = EventType.LEASE_WAITED
    event_type: Literal[EventType.LEASE_WAITED] = Field(EventType.LEASE_WAITED, exclude=True, repr=False)
    resource: str
    """Always present."""
    outcome: Literal["waiting", "free", "refused", "stopped"]
    holder_robot: str = ""
    holder_mission: str = ""
    holder_owner: str = ""
    fence: int = 0
    """The holder's fencing token when last seen."""
    waited_s: float = 0.0
    limit_s: float = 0.0
    """How long the robot would wait."""


class StopRequested(EventPayload):
    """``STOP_REQUESTED``: an operator Stop reached the harness."""

    EVENT_TYPE: ClassVar[EventType] = EventType.STOP_REQUESTED
    event_type: Literal[EventType.STOP_REQUESTED] = Field(EventType.STOP_REQUESTED, exclude=True, repr=False)
    reason: str = ""
    """The operator's reason, in words (may be "")."""
    source: str = ""
    """Which surface sent it (``stop_service``, ``mission_cancel``, ...)."""


class InteractionRequested(EventPayload):
    """``INTERACTION_REQUESTED``: an approval or question, with who may answer (salted digests only)."""

    EVENT_TYPE: ClassVar[EventType] = EventType.INTERACTION_REQUESTED
    event_type: Literal[EventType.INTERACTION_REQUESTED] = Field(
        EventType.INTERACTION_REQUESTED, exclude=True, repr=False)
    interaction_id: str
    """Unique within the journal; always present."""
    kind: str = ""
    """An ``interactions.InteractionKind`` value."""
    prompt: str = ""
    """What the operator is asked, in words."""
    call: dict[str, Any] | None = None
    """For an approval: ``{tool_call_id, name, arguments, arguments_sha256}``."""
    choices: tuple[str, ...] = ()
    """For a question, the answers offered (any answer when empty)."""
    owner: str = ""
    """The mission's owner (a name)."""
    policy: str = ""
    """An ``interactions.ApprovalPolicy`` value; "" (older records) means the owner rule."""
    key_id: str = ""
    """The id of the token key the digests were made with."""
    owner_hmac: str = ""
    """Keyed digest of the owner credential."""
    sender_hmac: str = ""
    """Keyed digest of the sender's credential (it never approves under ``operator``)."""
    approvers: tuple[dict[str, Any], ...] = ()
    """``{name, hmac}`` of each configured approver."""
    owner_sha256: str = ""
    """Only in records from before keyed digests: the owner token's plain sha256."""
    waiting_on: str = ""
    """Why nobody can answer (names the missing setting), or ""."""
    requested_at: float = 0.0
    """Epoch seconds it was asked."""
    expires_at: float = 0.0
    """Epoch seconds after which the harness dismisses it."""


class InteractionResolved(EventPayload):
    """``INTERACTION_RESOLVED``: an answer to an interaction (the first resolution wins)."""

    EVENT_TYPE: ClassVar[EventType] = EventType.INTERACTION_RESOLVED
    event_type: Literal[EventType.INTERACTION_RESOLVED] = Field(
        EventType.INTERACTION_RESOLVED, exclude=True, repr=False)
    interaction_id: str
    """The interaction answered; always present."""
    resolution: str = ""
    """An ``interactions.Resolution`` value."""
    answer: str = ""
    """A free-text answer, or ""."""
    choice: str = ""
    """The choice picked, or ""."""
    operator: str = ""
    """Who answered (a name; ``harness`` when the harness dismissed it)."""
    answered_as: str = ""
    """The credential kind (``owner``, ``operator``, ``approver:<name>``, ``harness``; "" in older records)."""
    resolved_at: float | str = ""
    """Epoch seconds; "" in records that did not write it."""


class MissionFinished(EventPayload):
    """``MISSION_FINISHED``: the mission's one end, with its status, summary and evidence."""

    EVENT_TYPE: ClassVar[EventType] = EventType.MISSION_FINISHED
    event_type: Literal[EventType.MISSION_FINISHED] = Field(EventType.MISSION_FINISHED, exclude=True, repr=False)
    status: str = ""
    """A ``records.MissionStatus`` value."""
    summary: str = ""
    """Why it ended so, in words."""
    evidence_seqs: list[int] = Field(default_factory=list)
    """Seqs of the events the status rests on."""
    evidence_ids: list[str] = Field(default_factory=list)
    """Evidence ids (``bag:``, ``artifact:``, ``journal:``) the status rests on."""
    bag: BagPart | None = None
    """The bag's summary; None or empty when no bag was recorded."""
    verdict_id: str = ""
    """The last verdict's id, or ""."""
    model_usage: dict[str, Any] = Field(default_factory=dict)
    """Tokens and calls by role (planner, compiler, recovery, ...)."""
    internal_error: Any = None
    """Only when the mission ended on an internal error: what was raised."""
    reconciled: list[dict[str, Any]] = Field(default_factory=list)
    """Only in an end written by the reconciler: the settlements it made."""


class MissionRefused(EventPayload):
    """``MISSION_REFUSED``: a request refused before anything ran (written by the supervisor alone)."""

    EVENT_TYPE: ClassVar[EventType] = EventType.MISSION_REFUSED
    event_type: Literal[EventType.MISSION_REFUSED] = Field(EventType.MISSION_REFUSED, exclude=True, repr=False)
    code: str = ""
    """Why, as a code (``busy``, ``not_active``, ``invalid_goal``, ...)."""
    reason: str = ""
    """Why, in words."""
    source: str = ""
    """Which surface sent the request (``mission_action``, ``mcp``, ...)."""
    goal: str = ""
    """The goal as sent (cut to the admission limit)."""
    owner: str = ""
    """Who sent it (a name)."""


class ResponseDropped(EventPayload):
    """``RESPONSE_DROPPED``: an answer that was not for this request, dropped (written by the supervisor alone)."""

    EVENT_TYPE: ClassVar[EventType] = EventType.RESPONSE_DROPPED
    event_type: Literal[EventType.RESPONSE_DROPPED] = Field(EventType.RESPONSE_DROPPED, exclude=True, repr=False)
    service: str = ""
    """The service that answered (its resolved name)."""
    call: str = ""
    """What was asked (``planner turn``, ``verification``, ``recovery``, ``snapshot capture``)."""
    expected_mission_id: str = ""
    expected_request_id: str = ""
    received_mission_id: str = ""
    received_request_id: str = ""
    note: str = ""
    """What was done instead (asked again, or treated as no answer)."""


# ============================================================================ the adapter

PAYLOAD_MODELS: Mapping[EventType, type[EventPayload]] = {
    m.EVENT_TYPE: m for m in (
        MissionStarted, ModelTurnStarted, WorldSnapshotCaptured, ModelResponseRecorded, ToolCallRecorded,
        ActionPreconditionChecked, ToolResultRecorded, RobotActionStarted, RobotActionStateChanged,
        RobotActionProgress, RobotActionOutcome, BackendEventUncorrelated, RuntimeEventDelivered, ContractFrozen,
        ReceiptRecorded, DoneProposed, VerdictRecorded, CommitRecorded, GateRejected, RecoveryDecided, FactRecorded,
        RobotActionReconciled, LeaseAcquired, LeaseReleased, LeaseBlocked, LeaseWaited, StopRequested, InteractionRequested,
        InteractionResolved, MissionFinished, MissionRefused, ResponseDropped,
    )
}
"""The payload model of each event type (every ``EventType`` member has one; a test checks it)."""

AnyPayload = Annotated[Union[tuple(PAYLOAD_MODELS.values())], Field(discriminator=_TAG)]  # type: ignore[valid-type]
PAYLOAD_ADAPTER: TypeAdapter[EventPayload] = TypeAdapter(AnyPayload)
"""The one adapter every payload is validated and serialized through."""

P = TypeVar("P", bound=EventPayload)


def _validate(type_: EventType, data: Mapping[str, Any]) -> EventPayload:
    return PAYLOAD_ADAPTER.validate_python({**data, _TAG: type_})


def parse_payload(type_: EventType | str, data: Mapping[str, Any]) -> EventPayload:
    """The model of ``data`` as a payload of ``type_``; raises ``PayloadReadError`` when it does not validate."""
    try:
        et = EventType(type_)
    except ValueError:
        raise PayloadReadError(f"no payload model for event type {type_!r}", type=str(type_)) from None
    if not isinstance(data, Mapping):
        raise PayloadReadError(f"{et.value} payload is a {type(data).__name__}, not an object", type=et.value)
    try:
        return _validate(et, data)
    except ValidationError as exc:
        raise PayloadReadError(f"{et.value} payload does not validate: {_brief(exc)}", type=et.value) from None


@overload
def payload_of(event: Any, model: type[P]) -> P: ...
@overload
def payload_of(event: Any, model: None = None) -> EventPayload: ...
def payload_of(event: Any, model: type[P] | None = None) -> EventPayload:
    """The typed payload of ``event`` (a ``JournalEvent``, an ``EventDraft``, or a ``(type, payload)`` pair).

    With ``model``, the event must be of that model's type (else ``PayloadShapeError``: a reader asked
    for the wrong model). A draft that carries a model returns it as is. Parsed once per event object:
    the result is cached on the (frozen) event, keyed by its type and payload object, so asking again is a
    dictionary lookup. Raises ``PayloadReadError`` when the stored payload does not validate.
    """
    if isinstance(event, tuple):
        type_, data = event
        typed = data if isinstance(data, EventPayload) else parse_payload(type_, data)
    else:
        type_, data = event.type, event.payload
        if isinstance(data, EventPayload):
            typed = data
        else:
            cache = getattr(event, "__pydantic_private__", None)
            hit = cache.get("_typed_payload") if cache is not None else None
            if hit is not None and hit[0] is type_ and hit[1] is data:
                typed = hit[2]
            else:
                typed = parse_payload(type_, data)
                if cache is not None and "_typed_payload" in cache:
                    cache["_typed_payload"] = (type_, data, typed)
    if model is not None and not isinstance(typed, model):
        name = str(getattr(type_, "value", type_))
        raise PayloadShapeError(f"a {name} payload is a {type(typed).__name__}, not a {model.__name__}",
                                expected=model.__name__, type=name)
    return typed


def payload_dict(model: EventPayload) -> dict[str, Any]:
    """What the journal stores for ``model``: its JSON form, through the one adapter.

    Only the fields the writer set (and any extra keys) are written, each nested record in full, and
    ``payload_version``; a reader gets every other field's default.
    """
    data = PAYLOAD_ADAPTER.dump_python(model, mode="json", by_alias=True)
    fields = type(model).model_fields
    written = {fields[k].alias or k for k in model.model_fields_set if k in fields} | set(model.model_extra or {})
    out = {k: v for k, v in data.items() if k in written}
    out["payload_version"] = PAYLOAD_FORMAT_VERSION
    return out


def validate_draft_payload(type_: EventType, payload: Any) -> EventPayload:
    """Check a draft's payload before it is stored; the model readers will read from it.

    A model must be the one for ``type_``; a dict (the stored JSON form) must validate as it. Raises
    ``PayloadShapeError`` naming the event type and the first problems; nothing is stored then.
    """
    if isinstance(payload, EventPayload):
        if payload.EVENT_TYPE is not type_:
            raise PayloadShapeError(f"a {type_.value} event carries a {type(payload).__name__} payload "
                                    f"(that is {payload.EVENT_TYPE.value}'s model)", type=type_.value,
                                    model=type(payload).__name__)
        return payload
    if not isinstance(payload, Mapping):
        raise PayloadShapeError(f"a {type_.value} payload must be a dict or its payload model, "
                                f"not {type(payload).__name__}", type=type_.value)
    try:
        return _validate(type_, payload)
    except ValidationError as exc:
        raise PayloadShapeError(f"{type_.value} payload has the wrong shape: {_brief(exc)}",
                                type=type_.value, errors=_errors(exc)) from None


def prime(event: Any, typed: EventPayload) -> None:
    """Give ``payload_of``'s cache on ``event`` the model its payload was just validated as (the journal,
    on append), so reading a fresh event costs nothing."""
    cache = getattr(event, "__pydantic_private__", None)
    if cache is not None and "_typed_payload" in cache and typed.EVENT_TYPE is event.type:
        cache["_typed_payload"] = (event.type, event.payload, typed)


def _errors(exc: ValidationError) -> list[dict[str, str]]:
    return [{"at": ".".join(str(p) for p in e["loc"][1:]) or "(payload)", "problem": e["msg"]}
            for e in exc.errors(include_url=False)[:5]]


def _brief(exc: ValidationError) -> str:
    return "; ".join(f"{e['at']}: {e['problem']}" for e in _errors(exc))
