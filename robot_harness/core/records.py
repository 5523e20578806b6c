"""Records that cross a boundary: snapshots, actions, tool calls and results,
journal events. Each is a pydantic model with a ``kind`` literal and a format
version, serialized through ``to_json``/``from_json`` in this module.
"""
from __future__ import annotations

import enum
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, model_serializer

__all__ = [
    "FORMAT_VERSION",
    "Availability",
    "ControllerState",
    "FieldMeta",
    "Pose2D",
    "PoseCovariance",
    "NavProgress",
    "Velocity",
    "ArtifactRef",
    "ActionStatus",
    "ActionView",
    "WorldSnapshot",
    "ToolCall",
    "ModelResponse",
    "ToolResultStatus",
    "ToolResult",
    "RuntimeEvent",
    "EventType",
    "EventDraft",
    "JournalEvent",
    "MissionStatus",
    "Record",
    "to_json",
    "from_json",
    "normalize_angle",
]

FORMAT_VERSION = 1


def normalize_angle(a: float) -> float:
    """Wrap an angle to (-pi, pi]."""
    a = math.fmod(a + math.pi, 2.0 * math.pi)
    if a <= 0.0:
        a += 2.0 * math.pi
    return a - math.pi


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Availability(str, enum.Enum):
    """Whether a snapshot field can be trusted."""

    AVAILABLE = "AVAILABLE"
    """Observed and younger than its freshness bound."""
    STALE = "STALE"
    """Observed, but older than its freshness bound; value kept only for diagnosis."""
    MISSING = "MISSING"
    """Never observed; there is no value."""


class ControllerState(str, enum.Enum):
    """The navigation controller as seen on the backend's status topic."""

    IDLE = "idle"
    """No goal is accepted or executing."""
    ACTIVE = "active"
    """A goal is accepted or executing."""
    UNKNOWN = "unknown"
    """No status has been observed (or it is stale)."""


class FieldMeta(_Frozen):
    availability: Availability = Availability.MISSING
    source_stamp: float | None = None
    """Header stamp of the observation (epoch seconds)."""
    age_s: float | None = None
    max_age_s: float = 0.0
    source: str = ""

    @property
    def fresh(self) -> bool:
        return self.availability is Availability.AVAILABLE

    def why_not_fresh(self, what: str) -> str:
        """Why ``what`` cannot be trusted, naming its source and the last message's age; "" when fresh."""
        where = f" on {self.source}" if self.source else ""
        if self.availability is Availability.AVAILABLE:
            return ""
        if self.availability is Availability.MISSING or self.age_s is None:
            return f"no {what} received{where}"
        bound = f" (max age {self.max_age_s:g} s)" if self.max_age_s else ""
        return f"no fresh {what}{where}: the last message is {self.age_s:.1f} s old{bound}"


class Pose2D(_Frozen):
    x: float
    y: float
    yaw: float = 0.0

    def distance_to(self, other: "Pose2D") -> float:
        return math.hypot(self.x - other.x, self.y - other.y)

    def yaw_error(self, other: "Pose2D") -> float:
        return abs(normalize_angle(self.yaw - other.yaw))


class PoseCovariance(_Frozen):
    """The localizer's variances of a 2D pose (``PoseWithCovariance.covariance`` [0], [7], [35])."""

    var_x: float
    """m^2"""
    var_y: float
    """m^2"""
    var_yaw: float
    """rad^2"""

    @property
    def std_xy(self) -> float:
        """The larger of the x and y standard deviations, m (NaN or negative variances: infinite)."""
        worst = max(self.var_x, self.var_y)
        return math.sqrt(worst) if worst >= 0.0 and math.isfinite(worst) else math.inf

    @property
    def std_yaw(self) -> float:
        v = self.var_yaw
        return math.sqrt(v) if v >= 0.0 and math.isfinite(v) else math.inf


class NavProgress(_Frozen):
    """What Nav2's feedback says about its own progress on the active goal, beside ``distance_remaining``."""

    navigation_time_s: float | None = None
    estimated_time_remaining_s: float | None = None
    number_of_recoveries: int | None = None
    """Recoveries the navigator's behavior tree has run on this goal (clearing, spinning, backing up)."""


class Velocity(_Frozen):
    vx: float = 0.0
    vy: float = 0.0
    wz: float = 0.0


class ArtifactRef(_Frozen):
    kind: Literal["artifact_ref"] = "artifact_ref"
    uri: str
    sha256: str
    media_type: str = "application/octet-stream"
    size_bytes: int = 0


class ActionStatus(str, enum.Enum):
    """Lifecycle of a managed physical action (transitions live in ``lifecycle``)."""

    REQUESTED = "REQUESTED"
    """Recorded and about to be sent; the backend has not answered."""
    ACCEPTED = "ACCEPTED"
    """The backend accepted the goal; nothing has moved yet as far as we know."""
    RUNNING = "RUNNING"
    """Correlated progress from the backend has been observed."""
    VERIFYING = "VERIFYING"
    """The backend reported terminal (or went silent); the outcome check runs."""
    SUCCEEDED = "SUCCEEDED"
    """The outcome check passed on fresh evidence."""
    FAILED = "FAILED"
    """Rejected, aborted, cancelled, or contradicted by fresh evidence."""
    UNKNOWN = "UNKNOWN"
    """Evidence missing, stale or conflicting: never counted as success."""

    @property
    def terminal(self) -> bool:
        return self in (ActionStatus.SUCCEEDED, ActionStatus.FAILED, ActionStatus.UNKNOWN)


class ActionView(_Frozen):
    """A managed action as other records see it (snapshot fields, tool results)."""

    action_id: str
    tool_call_id: str
    skill: str
    state: ActionStatus
    revision: int = 0
    backend_goal_id: str = ""
    backend_status: str = ""
    reason: str = ""
    target: Pose2D | None = None
    decision_snapshot_id: str = ""
    outcome_snapshot_id: str = ""
    requested_at: float = 0.0
    updated_at: float = 0.0


class WorldSnapshot(_Frozen):
    """What the harness believed about the world at one instant.

    Every observed field carries a ``FieldMeta``; a MISSING or STALE field is
    explicit, never a silent zero.
    """

    kind: Literal["world_snapshot"] = "world_snapshot"
    format_version: int = FORMAT_VERSION
    snapshot_id: str
    mission_id: str = ""
    reason: str = "on_request"
    captured_at: float
    frame_id: str = "map"
    pose: Pose2D | None = None
    pose_meta: FieldMeta = FieldMeta()
    pose_jumps: int = 0
    last_pose_jump_at: float | None = None
    pose_covariance: PoseCovariance | None = None
    """The localizer's own uncertainty of ``pose``; None when its source gives none (a TF lookup)."""
    velocity: Velocity | None = None
    velocity_meta: FieldMeta = FieldMeta()
    controller_state: ControllerState = ControllerState.UNKNOWN
    nav_goal_id: str = ""
    nav_goal: Pose2D | None = None
    distance_remaining: float | None = None
    nav_progress: NavProgress | None = None
    """From the same fresh feedback as ``distance_remaining`` (None without it)."""
    navigation_meta: FieldMeta = FieldMeta()
    battery: float | None = None
    """State of charge, 0..1 (sensor_msgs/BatteryState.percentage)."""
    battery_meta: FieldMeta = FieldMeta()
    active_action: ActionView | None = None
    recent_outcome: ActionView | None = None
    artifacts: tuple[ArtifactRef, ...] = ()


class ToolCall(_Frozen):
    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ModelResponse(_Frozen):
    """What the model said in one turn: tool calls, or a done proposal, or nothing.

    A done proposal is only a proposal; the harness decides the mission status.
    """

    kind: Literal["model_response"] = "model_response"
    format_version: int = FORMAT_VERSION
    tool_calls: tuple[ToolCall, ...] = ()
    done: str | None = None
    text: str = ""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Model I/O for the journal (e.g. ``llm_call``: redacted request/response, tokens, latency).
    Never read by the harness's decisions."""

    @property
    def silent(self) -> bool:
        return not self.tool_calls and self.done is None

    @property
    def text_only(self) -> bool:
        """The model answered in prose without acting (a silent turn that still said something)."""
        return self.silent and bool(self.text.strip())


class ToolResultStatus(str, enum.Enum):
    """What a tool call established, immediately. Never the physical outcome."""

    OK = "ok"
    """An ordinary tool completed synchronously."""
    ACCEPTED = "accepted"
    """A managed physical action was accepted by its backend; the outcome comes later."""
    REJECTED = "rejected"
    """The backend, or a harness rule, refused the call; nothing moved."""
    PRECONDITION_CHANGED = "precondition_changed"
    """The world changed since the decision snapshot; nothing moved."""
    ERROR = "error"
    """The call was invalid or its implementation raised."""
    SKIPPED = "skipped"
    """Not run because an earlier call in the same turn stopped the turn."""
    CANCELLED = "cancelled"
    """Not run (or stopped): an operator Stop, or a dismissed interaction."""
    DENIED = "denied"
    """Not run: an operator denied the approval this call needed."""


class ToolResult(_Frozen):
    kind: Literal["tool_result"] = "tool_result"
    format_version: int = FORMAT_VERSION
    tool_call_id: str
    name: str
    status: ToolResultStatus
    content: dict[str, Any] = Field(default_factory=dict)
    error: dict[str, Any] | None = None
    action_id: str | None = None

    def to_model_message(self) -> dict[str, Any]:
        """The OpenAI-style tool message the model receives."""
        body: dict[str, Any] = {"status": self.status.value, **self.content}
        if self.error:
            body["error"] = self.error
        if self.action_id:
            body["action_id"] = self.action_id
        return {"role": "tool", "tool_call_id": self.tool_call_id, "content": body}


class RuntimeEvent(_Frozen):
    """A correlated runtime fact delivered to the next model turn (e.g. an action outcome)."""

    kind: Literal["runtime_event"] = "runtime_event"
    type: str
    tool_call_id: str = ""
    action_id: str = ""
    state: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)


class MissionStatus(str, enum.Enum):
    """Final status of a mission (Mission.action result constants)."""

    SUCCEEDED = "SUCCEEDED"
    """Done, and every physical step is verified on fresh evidence."""
    FAILED = "FAILED"
    """Evidence says the goal was not achieved."""
    UNKNOWN = "UNKNOWN"
    """The harness cannot establish the outcome (fail closed)."""
    BLOCKED = "BLOCKED"
    """The harness refused to continue (journal failure, backend unavailable)."""
    WAITING_USER = "WAITING_USER"
    """Waiting on an operator decision."""
    CANCELLED = "CANCELLED"
    """Cancelled by the user or an operator Stop."""


class EventType(str, enum.Enum):
    """Journal event types. Ordered by seq within the journal."""

    MISSION_STARTED = "MISSION_STARTED"
    """A mission was admitted with its goal."""
    MODEL_TURN_STARTED = "MODEL_TURN_STARTED"
    """A model turn began, bound to the snapshot its context was built from."""
    WORLD_SNAPSHOT_CAPTURED = "WORLD_SNAPSHOT_CAPTURED"
    """A snapshot was captured and persisted (payload: the snapshot)."""
    MODEL_RESPONSE_RECORDED = "MODEL_RESPONSE_RECORDED"
    """The model's response, verbatim (redacted)."""
    TOOL_CALL_RECORDED = "TOOL_CALL_RECORDED"
    """One tool call, with redacted arguments."""
    ACTION_PRECONDITION_CHECKED = "ACTION_PRECONDITION_CHECKED"
    """Pre-dispatch precondition report for a managed action."""
    TOOL_RESULT_RECORDED = "TOOL_RESULT_RECORDED"
    """The one standard result for a tool call."""
    ROBOT_ACTION_STARTED = "ROBOT_ACTION_STARTED"
    """A managed action was created (REQUESTED), before the backend was asked."""
    ROBOT_ACTION_STATE_CHANGED = "ROBOT_ACTION_STATE_CHANGED"
    """A lifecycle transition (revision-checked)."""
    ROBOT_ACTION_PROGRESS = "ROBOT_ACTION_PROGRESS"
    """Correlated backend feedback (rate-limited)."""
    ROBOT_ACTION_OUTCOME = "ROBOT_ACTION_OUTCOME"
    """The verified outcome with its evidence."""
    BACKEND_EVENT_UNCORRELATED = "BACKEND_EVENT_UNCORRELATED"
    """A backend event for a goal this mission did not start; ignored."""
    RUNTIME_EVENT_DELIVERED = "RUNTIME_EVENT_DELIVERED"
    """A runtime event was placed into a model turn's context."""
    CONTRACT_FROZEN = "CONTRACT_FROZEN"
    """The completion contract for the mission (a new revision is a new event), before any planning."""
    RECEIPT_RECORDED = "RECEIPT_RECORDED"
    """An immutable execution receipt for one invocation (dispatch or capability result)."""
    DONE_PROPOSED = "DONE_PROPOSED"
    """The planner proposed that the mission is done: a request for verification, never a verdict."""
    VERDICT_RECORDED = "VERDICT_RECORDED"
    """The independent verifier's verdict on a done proposal, with the evidence it used."""
    COMMIT_RECORDED = "COMMIT_RECORDED"
    """The commit gate accepted a verdict (the only route to a terminal success)."""
    GATE_REJECTED = "GATE_REJECTED"
    """The commit gate refused a verdict (wrong binding: task, node, invocation or state version)."""
    RECOVERY_DECIDED = "RECOVERY_DECIDED"
    """A structured failure and the recovery rung chosen for it (charged to its budget)."""
    FACT_RECORDED = "FACT_RECORDED"
    """A versioned task fact (observed or committed; supersedes, never overwrites)."""
    ROBOT_ACTION_RECONCILED = "ROBOT_ACTION_RECONCILED"
    """What the backend said about an action whose supervision was cut short (restart, lost ack)."""
    LEASE_ACQUIRED = "LEASE_ACQUIRED"
    """An exclusive resource lease was taken (or renewed) by an invocation, before it ran."""
    LEASE_RELEASED = "LEASE_RELEASED"
    """A lease ended on confirmed terminal or stopped state, or an operator cleared it."""
    LEASE_BLOCKED = "LEASE_BLOCKED"
    """The lease's owner ended with an unknown outcome: the resource is blocked until reconciled."""
    LEASE_WAITED = "LEASE_WAITED"
    """A robot waited for a site resource another robot held: when the wait began, and how it ended."""
    STOP_REQUESTED = "STOP_REQUESTED"
    """An operator Stop (service or Mission cancel) reached the harness."""
    INTERACTION_REQUESTED = "INTERACTION_REQUESTED"
    """The mission waits on an operator: an approval of an exact call, or a question."""
    INTERACTION_RESOLVED = "INTERACTION_RESOLVED"
    """An operator's answer to an interaction (the first resolution wins)."""
    MISSION_FINISHED = "MISSION_FINISHED"
    """Final status, summary and evidence."""
    MISSION_REFUSED = "MISSION_REFUSED"
    """A mission request was refused before anything ran (busy, not active, invalid goal, backend not
    active, no fresh pose): ``code``, ``reason``, ``source``. Not a state change: the id stays free, and
    the same request sent again later may be admitted."""
    RESPONSE_DROPPED = "RESPONSE_DROPPED"
    """A response from another harness node (planner, verifier, recovery, snapshot capture) whose
    mission or request id is not the request's: dropped, never acted on (another graph on the domain,
    or a late answer to an earlier call). ``service``, expected and received ids."""


class EventDraft(_Frozen):
    """An event before the journal gives it a seq, id and stamp."""

    type: EventType
    mission_id: str = ""
    model_turn_id: str = ""
    tool_call_id: str = ""
    robot_action_id: str = ""
    snapshot_id: str = ""
    payload: dict[str, Any] | BaseModel = Field(default_factory=dict)
    """The type's payload model (``core/payloads.py``; the journal stores ``payload_dict`` of it), or,
    for writers not yet converted, a plain dict that must validate as that model. Either is checked
    when the journal prepares the draft; read it back with ``payloads.payload_of``."""


class JournalEvent(_Frozen):
    kind: Literal["journal_event"] = "journal_event"
    format_version: int = FORMAT_VERSION
    seq: int
    event_id: str
    type: EventType
    stamp: float
    mission_id: str = ""
    model_turn_id: str = ""
    tool_call_id: str = ""
    robot_action_id: str = ""
    snapshot_id: str = ""
    payload: dict[str, Any] = Field(default_factory=dict)
    """The payload as stored (JSON); read it typed with ``payloads.payload_of(event, Model)``, never by key."""
    robot_id: str = ""
    """The robot whose harness wrote it (its ROS namespace without slashes, e.g. ``robot1``); "" for a
    harness not under a namespace. Stamped by the journal, never by a draft; serialized only when set,
    so a single robot's records read (and digest) as before fleets existed."""
    _typed_payload: Any = PrivateAttr(default=None)
    """``payloads.payload_of``'s cache: (type, payload object, model) of the last parse."""

    def __eq__(self, other: object) -> bool:
        """Equal records are equal whatever their caches hold (pydantic would compare the cache too)."""
        if not isinstance(other, JournalEvent):
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((self.seq, self.event_id, self.type))

    @model_serializer(mode="wrap")
    def _drop_empty_robot(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("robot_id"):
            data.pop("robot_id", None)
        return data


Record = Annotated[
    WorldSnapshot | ToolCall | ModelResponse | ToolResult | RuntimeEvent | JournalEvent | ArtifactRef,
    Field(discriminator="kind"),
]
_RECORD_ADAPTER: TypeAdapter[Any] = TypeAdapter(Record)


def to_json(record: BaseModel) -> str:
    """Serialize any record (one adapter for every boundary)."""
    return record.model_dump_json()


def from_json(data: str | bytes) -> Any:
    """Parse a record of any kind, dispatching on its ``kind`` field."""
    return _RECORD_ADAPTER.validate_json(data)
