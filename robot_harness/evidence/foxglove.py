"""Foxglove-ready views of a mission: journal events folded into topics a person can look at.

The journal says what happened in the harness's own words; Foxglove shows
topics. This module turns one into the other, with no ROS and no Foxglove SDK:

* :func:`log_line` — one readable line per journal event, with a level a
  Log panel can filter (``WARN``/``ERROR`` for refusals and failures) and the
  harness role that wrote it as the logger name (``robot_harness.verifier``,
  ``robot_harness.gate``, ...). Snapshots and progress have their own topics
  and no line.
* :class:`DerivedTopics` — the stateful fold over one mission's events: the
  lines, the robot's pose from each snapshot, the path so far, the named
  places, action states, and (for the live bridge) snapshots, progress and
  verdicts as plain values.
* :func:`to_live_json` and :data:`LIVE_CHANNELS` — the same values as JSON
  messages with JSON schemas for the live WebSocket bridge
  (:mod:`robot_harness.operator.foxglove_bridge`); the pose, path, places and
  log use Foxglove's well-known schema names, so the 3D and Log panels draw
  them without a ROS message definition.
* :func:`foxglove_layout` — the layout shipped as ``config/foxglove_layout.json``.

The mission recorder (:mod:`robot_harness.nodes.recorder`) writes the derived
topics into every mission bag as ROS messages; the bridge publishes them live.
Both fold the same events the same way, so a bag and a live session look
alike in the same layout.

Time: every derived value carries the time of the record it came from (the
event's stamp, or a pose's observation stamp), never the time it was derived.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.records import (
    ActionStatus,
    ActionView,
    Availability,
    EventType,
    FieldMeta,
    JournalEvent,
    Pose2D,
    WorldSnapshot,
)
from ..core.payloads import (
    ActionPreconditionChecked,
    ContractFrozen,
    InteractionResolved,
    MissionFinished,
    MissionStarted,
    RecoveryDecided,
    RobotActionOutcome,
    RobotActionProgress,
    RobotActionStarted,
    RobotActionStateChanged,
    ToolResultRecorded,
    VerdictRecorded,
    WorldSnapshotCaptured,
    payload_of,
)
from ..core.timeline import summary_line

__all__ = [
    "LOG_TOPIC",
    "POSE_TOPIC",
    "PATH_TOPIC",
    "PLACES_TOPIC",
    "PLACE_LABELS_TOPIC",
    "ACTION_STATE_TOPIC",
    "SNAPSHOTS_TOPIC",
    "PROGRESS_TOPIC",
    "VERDICTS_TOPIC",
    "LIVE_CHANNELS",
    "LogLevel",
    "LogLine",
    "StampedPose",
    "PathUpdate",
    "PlacesUpdate",
    "ActionStateUpdate",
    "SnapshotUpdate",
    "ProgressUpdate",
    "VerdictUpdate",
    "Derived",
    "DerivedTopics",
    "log_line",
    "finish_line",
    "places_from_config",
    "snapshot_pose",
    "split_stamp",
    "quaternion_from_yaw",
    "to_live_json",
    "foxglove_layout",
    "layout_json",
    "layout_panels",
]

LOG_TOPIC = "/robot_harness/log"
POSE_TOPIC = "/robot_harness/pose"
PATH_TOPIC = "/robot_harness/path"
PLACES_TOPIC = "/robot_harness/places"
PLACE_LABELS_TOPIC = "/robot_harness/place_labels"
"""Live only: place names as 3D text (a bag has no marker type to carry them)."""
ACTION_STATE_TOPIC = "/robot_harness/action_state"
SNAPSHOTS_TOPIC = "/robot_harness/snapshots"
"""The recorder's snapshot topic; the bridge publishes snapshots under the same name."""
PROGRESS_TOPIC = "/robot_harness/progress"
"""Live only: correlated backend feedback (a bag has Nav2's own feedback topic)."""
VERDICTS_TOPIC = "/robot_harness/verdicts"

_MAX_LOG_CHARS = 2000
_LOGGER = "robot_harness"


class LogLevel(int, enum.Enum):
    """Severity of a log line, with ``rcl_interfaces/msg/Log``'s values."""

    DEBUG = 10
    """Bookkeeping (turns, receipts, facts, leases); hidden by the shipped layout."""
    INFO = 20
    """The mission moving as it should."""
    WARN = 30
    """A refusal or an open question: a gate rejection, a stop, an unknown outcome, a continue verdict."""
    ERROR = 40
    """A failure: an action or mission FAILED or BLOCKED, a contract that could not be compiled."""

    @property
    def foxglove(self) -> int:
        """The same level as ``foxglove.LogLevel`` (DEBUG=1 ... ERROR=4)."""
        return self.value // 10


# ----------------------------------------------------------------- derived values


@dataclasses.dataclass(frozen=True)
class LogLine:
    """One journal event as a line of a Log panel."""

    stamp: float
    level: LogLevel
    name: str
    """The harness role that wrote the event, e.g. ``robot_harness.verifier``."""
    msg: str
    seq: int
    event_type: str
    mission_id: str = ""


@dataclasses.dataclass(frozen=True)
class StampedPose:
    """The robot's pose as a snapshot saw it, stamped with the observation time."""

    stamp: float
    frame_id: str
    pose: Pose2D
    snapshot_id: str = ""


@dataclasses.dataclass(frozen=True)
class PathUpdate:
    """The trajectory so far: the fresh snapshot poses the verifier's pose history is built from."""

    stamp: float
    frame_id: str
    poses: tuple[StampedPose, ...]


@dataclasses.dataclass(frozen=True)
class PlacesUpdate:
    """The mission's named places (``config.places``), in the mission's frame."""

    stamp: float
    frame_id: str
    places: tuple[tuple[str, Pose2D], ...]


@dataclasses.dataclass(frozen=True)
class ActionStateUpdate:
    """A managed action after a lifecycle step (the shape of ``robot_harness/msg/ActionState``)."""

    stamp: float
    mission_id: str
    action: ActionView
    backend: str = ""


@dataclasses.dataclass(frozen=True)
class SnapshotUpdate:
    """A journaled snapshot (the bag already has it on ``/robot_harness/snapshots``)."""

    stamp: float
    snapshot: WorldSnapshot


@dataclasses.dataclass(frozen=True)
class ProgressUpdate:
    """Correlated backend feedback for the active action (the bag has Nav2's raw feedback)."""

    stamp: float
    mission_id: str
    action_id: str
    distance_remaining: float | None
    current_pose: Pose2D | None


@dataclasses.dataclass(frozen=True)
class VerdictUpdate:
    """The verifier's verdict (the bag already has it on ``/robot_harness/verdicts``)."""

    stamp: float
    mission_id: str
    verdict: Mapping[str, Any]


Derived = LogLine | StampedPose | PathUpdate | PlacesUpdate | ActionStateUpdate | SnapshotUpdate | ProgressUpdate | VerdictUpdate


# ----------------------------------------------------------------- log lines

E = EventType
L = LogLevel

_ROLE: dict[EventType, str] = {
    E.MISSION_STARTED: "supervisor",
    E.MISSION_FINISHED: "supervisor",
    E.MODEL_TURN_STARTED: "supervisor",
    E.TOOL_RESULT_RECORDED: "supervisor",
    E.RECEIPT_RECORDED: "supervisor",
    E.FACT_RECORDED: "supervisor",
    E.RUNTIME_EVENT_DELIVERED: "supervisor",
    E.INTERACTION_REQUESTED: "supervisor",
    E.MODEL_RESPONSE_RECORDED: "planner",
    E.TOOL_CALL_RECORDED: "planner",
    E.DONE_PROPOSED: "planner",
    E.CONTRACT_FROZEN: "contracts",
    E.ACTION_PRECONDITION_CHECKED: "dispatcher",
    E.ROBOT_ACTION_STARTED: "dispatcher",
    E.ROBOT_ACTION_STATE_CHANGED: "dispatcher",
    E.ROBOT_ACTION_OUTCOME: "dispatcher",
    E.ROBOT_ACTION_RECONCILED: "dispatcher",
    E.BACKEND_EVENT_UNCORRELATED: "dispatcher",
    E.LEASE_ACQUIRED: "dispatcher",
    E.LEASE_RELEASED: "dispatcher",
    E.LEASE_BLOCKED: "dispatcher",
    E.LEASE_WAITED: "dispatcher",
    E.VERDICT_RECORDED: "verifier",
    E.COMMIT_RECORDED: "gate",
    E.GATE_REJECTED: "gate",
    E.RECOVERY_DECIDED: "recovery",
    E.STOP_REQUESTED: "operator",
    E.MISSION_REFUSED: "supervisor",
    E.RESPONSE_DROPPED: "supervisor",
    E.INTERACTION_RESOLVED: "operator",
}
_NO_LINE = frozenset({E.WORLD_SNAPSHOT_CAPTURED, E.ROBOT_ACTION_PROGRESS})
"""Events shown on their own topics (pose, path, snapshots, progress) rather than as lines."""

_FIXED_LEVEL: dict[EventType, LogLevel] = {
    E.MISSION_STARTED: L.INFO,
    E.TOOL_CALL_RECORDED: L.INFO,
    E.DONE_PROPOSED: L.INFO,
    E.ROBOT_ACTION_STARTED: L.INFO,
    E.COMMIT_RECORDED: L.INFO,
    E.GATE_REJECTED: L.WARN,
    E.STOP_REQUESTED: L.WARN,
    E.MISSION_REFUSED: L.WARN,
    E.RESPONSE_DROPPED: L.WARN,
    E.INTERACTION_REQUESTED: L.WARN,
    E.RECOVERY_DECIDED: L.WARN,
    E.ROBOT_ACTION_RECONCILED: L.WARN,
    E.BACKEND_EVENT_UNCORRELATED: L.WARN,
    E.LEASE_BLOCKED: L.WARN,
    E.LEASE_WAITED: L.WARN,
}
_ACTION_LEVEL = {ActionStatus.FAILED.value: L.ERROR, ActionStatus.UNKNOWN.value: L.WARN}
_MISSION_LEVEL = {"SUCCEEDED": L.INFO, "FAILED": L.ERROR, "BLOCKED": L.ERROR}
_VERDICT_LEVEL = {"verified_done": L.INFO, "blocked": L.ERROR}
_REFUSED_RESULTS = frozenset({"rejected", "precondition_changed", "error", "denied"})
_GOOD_RESOLUTIONS = frozenset({"approve", "answer"})
_LEVEL_BY_PAYLOAD = frozenset({E.MISSION_FINISHED, E.ROBOT_ACTION_STATE_CHANGED, E.ROBOT_ACTION_OUTCOME,
                               E.VERDICT_RECORDED, E.TOOL_RESULT_RECORDED, E.ACTION_PRECONDITION_CHECKED,
                               E.INTERACTION_RESOLVED, E.CONTRACT_FROZEN})
"""The event types whose line's level depends on what the payload says."""
_DERIVING = frozenset({E.MISSION_STARTED, E.WORLD_SNAPSHOT_CAPTURED, E.ROBOT_ACTION_STARTED,
                       E.ROBOT_ACTION_STATE_CHANGED, E.ROBOT_ACTION_OUTCOME, E.ROBOT_ACTION_PROGRESS,
                       E.VERDICT_RECORDED})
"""The event types that feed a derived topic (the rest give only a log line)."""


def _level(event: JournalEvent) -> LogLevel:
    t = event.type
    if t in _FIXED_LEVEL:
        return _FIXED_LEVEL[t]
    if t not in _LEVEL_BY_PAYLOAD:
        return L.DEBUG
    p = payload_of(event)
    if isinstance(p, MissionFinished):
        return _MISSION_LEVEL.get(p.status, L.WARN)
    if isinstance(p, RobotActionStateChanged):
        return _ACTION_LEVEL.get(p.to.value, L.INFO)
    if isinstance(p, RobotActionOutcome):
        return _ACTION_LEVEL.get(p.state.value, L.INFO)
    if isinstance(p, VerdictRecorded):
        return _VERDICT_LEVEL.get(p.verdict.goal_verdict.value, L.WARN)
    if isinstance(p, ToolResultRecorded):
        return L.WARN if p.status is not None and p.status.value in _REFUSED_RESULTS else L.INFO
    if isinstance(p, ActionPreconditionChecked):
        return L.DEBUG if p.ok else L.WARN
    if isinstance(p, InteractionResolved):
        return L.INFO if p.resolution in _GOOD_RESOLUTIONS else L.WARN
    if isinstance(p, ContractFrozen):
        if p.error:
            return L.ERROR
        coverage = p.contract.coverage if p.contract is not None else None
        return L.WARN if coverage is not None and not coverage.ok else L.INFO
    return L.DEBUG


def _recovery(event: JournalEvent) -> str:
    p = payload_of(event, RecoveryDecided)
    f, d = p.failure, p.decision
    return f"{f.failure_kind.value}: {f.reason} -> {d.rung.value}" + (f": {d.reason}" if d.reason else "")


_OWN_SUMMARIES = {E.RECOVERY_DECIDED: _recovery}


def _text(event: JournalEvent) -> str:
    own = _OWN_SUMMARIES.get(event.type)
    if own is not None:
        try:
            return " ".join(own(event).split())
        except Exception:  # noqa: BLE001 - an unexpected payload falls back to the timeline's rendering
            pass
    return summary_line(event)[0]


def log_line(event: JournalEvent) -> LogLine | None:
    """The Log-panel line for ``event``, or None for snapshots and progress (they have topics).

    Never raises on a payload of an unexpected shape: the line then carries
    the payload as compact JSON (as ``robot-harness journal show`` does).
    """
    if event.type in _NO_LINE:
        return None
    try:
        level = _level(event)
    except Exception:  # noqa: BLE001 - a malformed payload still gets its line
        level = L.WARN
    text = f"[{event.seq}] {event.type.value}: {_text(event)}".rstrip(": ")
    if len(text) > _MAX_LOG_CHARS:
        text = text[: _MAX_LOG_CHARS - 3] + "..."
    return LogLine(stamp=event.stamp, level=level, name=f"{_LOGGER}.{_ROLE.get(event.type, 'supervisor')}",
                   msg=text, seq=event.seq, event_type=event.type.value, mission_id=event.mission_id)


def finish_line(*, mission_id: str, status: str, summary: str, stamp: float) -> LogLine:
    """The line for a mission's end as its bag closes, before MISSION_FINISHED is journaled
    (that event cites the bag, so it cannot be in it); seq 0 marks it as not from the journal."""
    text = f"MISSION_FINISHED: {status}" + (f": {' '.join(summary.split())}" if summary else "")
    return LogLine(stamp=stamp, level=_MISSION_LEVEL.get(status, L.WARN), name=f"{_LOGGER}.supervisor",
                   msg=text[:_MAX_LOG_CHARS], seq=0, event_type=E.MISSION_FINISHED.value, mission_id=mission_id)


# ----------------------------------------------------------------- poses and places


def snapshot_pose(snapshot: WorldSnapshot) -> StampedPose | None:
    """The snapshot's pose when it is AVAILABLE (fresh), stamped with its observation time.

    A STALE or MISSING pose gives None: a 3D view must not draw a stale pose
    as the robot's current one (the snapshot topic keeps it, marked stale).
    """
    meta = snapshot.pose_meta
    if snapshot.pose is None or meta.availability is not Availability.AVAILABLE:
        return None
    stamp = meta.source_stamp if meta.source_stamp is not None else snapshot.captured_at
    return StampedPose(stamp=stamp, frame_id=snapshot.frame_id, pose=snapshot.pose, snapshot_id=snapshot.snapshot_id)


def places_from_config(config: Mapping[str, Any], *, stamp: float) -> PlacesUpdate | None:
    """The named places of a ``MISSION_STARTED`` config (``places``, ``frame_id``), or None if it names none.

    A place without numeric ``x`` and ``y`` is skipped; ``yaw`` defaults to 0.
    """
    raw = config.get("places") or {}
    if not isinstance(raw, Mapping):
        return None
    places: list[tuple[str, Pose2D]] = []
    for name, value in raw.items():
        if not isinstance(value, Mapping):
            continue
        try:
            pose = Pose2D(x=float(value["x"]), y=float(value["y"]), yaw=float(value.get("yaw", 0.0)))
        except (KeyError, TypeError, ValueError):
            continue
        places.append((str(name), pose))
    if not places:
        return None
    return PlacesUpdate(stamp=stamp, frame_id=str(config.get("frame_id") or "map"), places=tuple(places))


class _Path:
    """The trajectory so far, bounded.

    A pose closer than ``min_step_m`` and ``min_turn_rad`` to the last one
    replaces it (a robot standing still does not grow the path, and the last
    pose is always the latest). Past ``max_poses`` every other pose is
    dropped, first and last kept, so a long mission keeps its whole shape at
    a coarser resolution.
    """

    def __init__(self, *, max_poses: int, min_step_m: float, min_turn_rad: float) -> None:
        self.poses: list[StampedPose] = []
        self._max = max(2, int(max_poses))
        self._step = float(min_step_m)
        self._turn = float(min_turn_rad)

    def add(self, pose: StampedPose) -> bool:
        """Add a fresh pose; False when it is not newer than the last one (nothing changed)."""
        if self.poses:
            last = self.poses[-1]
            if pose.stamp <= last.stamp:
                return False
            if last.frame_id != pose.frame_id:
                self.poses.clear()  # a path in two frames cannot be drawn as one line
            elif last.pose.distance_to(pose.pose) < self._step and last.pose.yaw_error(pose.pose) < self._turn:
                self.poses[-1] = pose
                return True
        self.poses.append(pose)
        if len(self.poses) > self._max:
            self.poses = self.poses[:-1:2] + [self.poses[-1]]
        return True


class DerivedTopics:
    """Folds one mission's journal events into Foxglove-friendly values, in seq order.

    :meth:`feed` returns what each event adds. The first event names the
    mission; events of other missions add nothing until another
    ``MISSION_STARTED``, which starts over. Not thread-safe: one writer feeds it.
    """

    def __init__(self, *, max_path_poses: int = 512, min_step_m: float = 0.01, min_turn_rad: float = 0.01) -> None:
        self._path_options = {"max_poses": max_path_poses, "min_step_m": min_step_m, "min_turn_rad": min_turn_rad}
        self._reset("")

    def _reset(self, mission_id: str) -> None:
        self.mission_id = mission_id
        self._path = _Path(**self._path_options)
        self._pose: StampedPose | None = None
        self._places: PlacesUpdate | None = None
        self._actions: dict[str, ActionStateUpdate] = {}
        self._backend: dict[str, str] = {}

    def feed(self, event: JournalEvent) -> list[Derived]:
        """What ``event`` adds to the derived topics (often nothing but a log line)."""
        if event.type is E.MISSION_STARTED and event.mission_id != self.mission_id:
            self._reset(event.mission_id)
        elif not self.mission_id:
            self.mission_id = event.mission_id
        elif event.mission_id and event.mission_id != self.mission_id:
            return []
        out: list[Derived] = []
        line = log_line(event)
        if line is not None:
            out.append(line)
        try:
            out.extend(self._derive(event))
        except Exception:  # noqa: BLE001 - a payload of an unexpected shape derives nothing beyond its line
            pass
        return out

    def _derive(self, event: JournalEvent) -> list[Derived]:
        t = event.type
        if t not in _DERIVING:
            return []
        p = payload_of(event)
        if isinstance(p, MissionStarted):
            places = places_from_config(p.config, stamp=event.stamp)
            if places is None:
                return []
            self._places = places
            listed = ", ".join(f"{n} ({q.x:.2f}, {q.y:.2f})" for n, q in places.places)
            return [places, LogLine(stamp=event.stamp, level=L.INFO, name=f"{_LOGGER}.supervisor",
                                    msg=f"[{event.seq}] places in {places.frame_id}: {listed}"[:_MAX_LOG_CHARS],
                                    seq=event.seq, event_type=t.value, mission_id=event.mission_id)]
        if isinstance(p, WorldSnapshotCaptured):
            snapshot = p.snapshot
            out: list[Derived] = [SnapshotUpdate(stamp=event.stamp, snapshot=snapshot)]
            pose = snapshot_pose(snapshot)
            if pose is not None and self._path.add(pose):
                self._pose = pose
                out += [pose, self._path_update()]
            return out
        if isinstance(p, RobotActionStarted):
            view = ActionView.model_validate(p.action.model_dump(mode="json", exclude_unset=True))
            self._backend[view.action_id] = p.intent.backend if p.intent is not None else ""
            return [self._action(event, view)]
        if isinstance(p, RobotActionStateChanged):
            known = self._actions.get(event.robot_action_id)
            base = known.action if known is not None else ActionView(
                action_id=event.robot_action_id, tool_call_id=event.tool_call_id, skill="", state=p.to)
            update: dict[str, Any] = {"state": p.to, "updated_at": event.stamp}
            if "revision" in p.model_fields_set:
                update["revision"] = p.revision
            if p.reason:
                update["reason"] = p.reason
            if p.backend_goal_id:
                update["backend_goal_id"] = p.backend_goal_id
            return [self._action(event, base.model_copy(update=update))]
        if isinstance(p, RobotActionOutcome):
            # The final transition (same commit, earlier seq) already showed this state; a new state is
            # only possible when that transition was not seen.
            view = ActionView.model_validate(p.action.model_dump(mode="json", exclude_unset=True))
            known = self._actions.get(view.action_id)
            latest = self._action(event, view)
            return [latest] if known is None or known.action.state is not view.state else []
        if isinstance(p, RobotActionProgress):
            cp = p.current_pose
            return [ProgressUpdate(stamp=event.stamp, mission_id=event.mission_id, action_id=event.robot_action_id,
                                   distance_remaining=p.distance_remaining,
                                   current_pose=cp.pose() if cp is not None else None)]
        if isinstance(p, VerdictRecorded):
            return [VerdictUpdate(stamp=event.stamp, mission_id=event.mission_id,
                                  verdict=p.verdict.model_dump(mode="json"))]
        return []

    def _action(self, event: JournalEvent, view: ActionView) -> ActionStateUpdate:
        update = ActionStateUpdate(stamp=event.stamp, mission_id=event.mission_id, action=view,
                                   backend=self._backend.get(view.action_id, ""))
        self._actions[view.action_id] = update
        return update

    def _path_update(self) -> PathUpdate:
        poses = tuple(self._path.poses)
        return PathUpdate(stamp=poses[-1].stamp, frame_id=poses[-1].frame_id, poses=poses)

    def feed_all(self, events: Iterable[JournalEvent]) -> list[Derived]:
        return [d for ev in events for d in self.feed(ev)]


# ----------------------------------------------------------------- time and geometry


def split_stamp(t: float) -> tuple[int, int]:
    """Epoch seconds as (sec, nanosec), rounded to the nearest nanosecond; non-finite or negative is (0, 0)."""
    if not math.isfinite(t) or t <= 0:
        return 0, 0
    sec = math.floor(t)
    nanosec = round((t - sec) * 1e9)
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return int(sec), int(nanosec)


def quaternion_from_yaw(yaw: float) -> tuple[float, float, float, float]:
    """(x, y, z, w) of the rotation about +z by ``yaw``."""
    return 0.0, 0.0, math.sin(0.5 * yaw), math.cos(0.5 * yaw)


# ----------------------------------------------------------------- live JSON (Foxglove schemas)


def _time(t: float) -> dict[str, int]:
    sec, nsec = split_stamp(t)
    return {"sec": sec, "nsec": nsec}


def _pose_json(p: Pose2D) -> dict[str, Any]:
    x, y, z, w = quaternion_from_yaw(p.yaw)
    return {"position": {"x": p.x, "y": p.y, "z": 0.0}, "orientation": {"x": x, "y": y, "z": z, "w": w}}


def _meta_json(m: FieldMeta) -> dict[str, Any]:
    return {"availability": m.availability.value,
            "source_stamp": _time(m.source_stamp) if m.source_stamp is not None else None,
            "age_s": m.age_s, "max_age_s": m.max_age_s, "source": m.source}


def _action_json(view: ActionView | None, *, mission_id: str, backend: str = "") -> dict[str, Any] | None:
    if view is None:
        return None
    return {"action_id": view.action_id, "mission_id": mission_id, "tool_call_id": view.tool_call_id,
            "skill": view.skill, "state": view.state.value, "revision": view.revision, "backend": backend,
            "backend_goal_id": view.backend_goal_id, "backend_status": view.backend_status, "reason": view.reason,
            "target": view.target.model_dump() if view.target else None,
            "decision_snapshot_id": view.decision_snapshot_id, "outcome_snapshot_id": view.outcome_snapshot_id,
            "requested_at": _time(view.requested_at), "updated_at": _time(view.updated_at)}


def _snapshot_json(s: WorldSnapshot) -> dict[str, Any]:
    """A snapshot with ``robot_harness/msg/WorldSnapshot``'s field names, so one message path
    (``.distance_remaining``, ``.pose_meta.age_s``, ``.active_action.state``) reads a bag and a live session."""
    v = s.velocity
    return {
        "snapshot_id": s.snapshot_id, "mission_id": s.mission_id, "reason": s.reason,
        "captured_at": _time(s.captured_at), "frame_id": s.frame_id,
        "pose_meta": _meta_json(s.pose_meta), "pose": _pose_json(s.pose) if s.pose else None,
        "yaw": s.pose.yaw if s.pose else None, "pose_jumps": s.pose_jumps,
        "velocity_meta": _meta_json(s.velocity_meta),
        "velocity": {"linear": {"x": v.vx, "y": v.vy, "z": 0.0}, "angular": {"x": 0.0, "y": 0.0, "z": v.wz}} if v else None,
        "navigation_meta": _meta_json(s.navigation_meta), "controller_state": s.controller_state.value,
        "nav_goal_id": s.nav_goal_id, "nav_goal": _pose_json(s.nav_goal) if s.nav_goal else None,
        "distance_remaining": s.distance_remaining,
        "battery_meta": _meta_json(s.battery_meta), "battery_percentage": s.battery,
        "active_action": _action_json(s.active_action, mission_id=s.mission_id),
        "recent_outcome": _action_json(s.recent_outcome, mission_id=s.mission_id),
        "artifacts": [a.model_dump(mode="json") for a in s.artifacts],
    }


def _label_entity(name: str, pose: Pose2D, *, frame_id: str, stamp: float) -> dict[str, Any]:
    empty: dict[str, list[Any]] = {k: [] for k in ("arrows", "cubes", "spheres", "cylinders", "lines", "triangles", "models")}
    text_pose = _pose_json(pose.model_copy(update={"yaw": 0.0}))
    text_pose["position"]["z"] = 0.3
    return {"timestamp": _time(stamp), "frame_id": frame_id, "id": f"place/{name}", "lifetime": {"sec": 0, "nsec": 0},
            "frame_locked": False, "metadata": [], **empty,
            "texts": [{"pose": text_pose, "billboard": True, "font_size": 14.0, "scale_invariant": True,
                       "color": {"r": 1.0, "g": 1.0, "b": 1.0, "a": 1.0}, "text": name}]}


def to_live_json(item: Derived) -> list[tuple[str, dict[str, Any], float]]:
    """``(topic, JSON message, log time in epoch seconds)`` for the live bridge; one value may give two messages
    (places also give their labels)."""
    if isinstance(item, LogLine):
        return [(LOG_TOPIC, {"timestamp": _time(item.stamp), "level": item.level.foxglove, "message": item.msg,
                             "name": item.name, "file": "journal", "line": item.seq}, item.stamp)]
    if isinstance(item, StampedPose):
        return [(POSE_TOPIC, {"timestamp": _time(item.stamp), "frame_id": item.frame_id,
                              "pose": _pose_json(item.pose)}, item.stamp)]
    if isinstance(item, PathUpdate):
        return [(PATH_TOPIC, {"timestamp": _time(item.stamp), "frame_id": item.frame_id,
                              "poses": [_pose_json(p.pose) for p in item.poses]}, item.stamp)]
    if isinstance(item, PlacesUpdate):
        return [(PLACES_TOPIC, {"timestamp": _time(item.stamp), "frame_id": item.frame_id,
                                "poses": [_pose_json(p) for _, p in item.places]}, item.stamp),
                (PLACE_LABELS_TOPIC, {"deletions": [], "entities": [
                    _label_entity(n, p, frame_id=item.frame_id, stamp=item.stamp) for n, p in item.places]}, item.stamp)]
    if isinstance(item, ActionStateUpdate):
        return [(ACTION_STATE_TOPIC, _action_json(item.action, mission_id=item.mission_id, backend=item.backend) or {},
                 item.stamp)]
    if isinstance(item, SnapshotUpdate):
        return [(SNAPSHOTS_TOPIC, _snapshot_json(item.snapshot), item.stamp)]
    if isinstance(item, ProgressUpdate):
        return [(PROGRESS_TOPIC, {"mission_id": item.mission_id, "action_id": item.action_id,
                                  "distance_remaining": item.distance_remaining,
                                  "current_pose": _pose_json(item.current_pose) if item.current_pose else None},
                 item.stamp)]
    if isinstance(item, VerdictUpdate):
        return [(VERDICTS_TOPIC, {"mission_id": item.mission_id, **item.verdict}, item.stamp)]
    raise TypeError(f"not a derived value: {type(item).__name__}")


# JSON schemas. The pose, path, places, labels and log use Foxglove's well-known schema names
# (the app recognizes a schema by name); the others are the harness's own.

_TIME = {"type": "object", "properties": {"sec": {"type": "integer", "minimum": 0},
                                          "nsec": {"type": "integer", "minimum": 0, "maximum": 999_999_999}}}
_VEC3 = {"type": "object", "properties": {k: {"type": "number"} for k in "xyz"}}
_QUAT = {"type": "object", "properties": {k: {"type": "number"} for k in "xyzw"}}
_POSE = {"type": "object", "title": "foxglove.Pose", "properties": {"position": _VEC3, "orientation": _QUAT}}
_NULL_POSE = {**_POSE, "type": ["object", "null"]}
_STR = {"type": "string"}
_META = {"type": "object", "properties": {
    "availability": {"type": "string", "enum": [a.value for a in Availability]},
    "source_stamp": {**_TIME, "type": ["object", "null"]},
    "age_s": {"type": ["number", "null"]}, "max_age_s": {"type": "number"}, "source": _STR}}
_ACTION_PROPS = {
    "action_id": _STR, "mission_id": _STR, "tool_call_id": _STR, "skill": _STR,
    "state": {"type": "string", "enum": [s.value for s in ActionStatus]}, "revision": {"type": "integer"},
    "backend": _STR, "backend_goal_id": _STR, "backend_status": _STR, "reason": _STR,
    "target": {"type": ["object", "null"]}, "decision_snapshot_id": _STR, "outcome_snapshot_id": _STR,
    "requested_at": _TIME, "updated_at": _TIME}


def _schema(title: str, description: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    return {"title": title, "description": description, "type": "object", "properties": dict(properties)}


LIVE_CHANNELS: dict[str, dict[str, Any]] = {
    LOG_TOPIC: _schema("foxglove.Log", "One journal event as a log line", {
        "timestamp": _TIME, "level": {"type": "integer", "enum": [0, 1, 2, 3, 4, 5]},
        "message": _STR, "name": _STR, "file": _STR, "line": {"type": "integer", "minimum": 0}}),
    POSE_TOPIC: _schema("foxglove.PoseInFrame", "The robot's pose from the latest fresh snapshot",
                        {"timestamp": _TIME, "frame_id": _STR, "pose": _POSE}),
    PATH_TOPIC: _schema("foxglove.PosesInFrame", "The trajectory so far (fresh snapshot poses)",
                        {"timestamp": _TIME, "frame_id": _STR, "poses": {"type": "array", "items": _POSE}}),
    PLACES_TOPIC: _schema("foxglove.PosesInFrame", "The mission's named places",
                          {"timestamp": _TIME, "frame_id": _STR, "poses": {"type": "array", "items": _POSE}}),
    PLACE_LABELS_TOPIC: _schema("foxglove.SceneUpdate", "Place names as 3D text",
                                {"deletions": {"type": "array"}, "entities": {"type": "array"}}),
    ACTION_STATE_TOPIC: _schema("robot_harness.ActionState", "A managed action after a lifecycle step",
                                _ACTION_PROPS),
    SNAPSHOTS_TOPIC: _schema("robot_harness.WorldSnapshot",
                             "A journaled world snapshot; every field's availability and age beside it", {
        "snapshot_id": _STR, "mission_id": _STR, "reason": _STR, "captured_at": _TIME, "frame_id": _STR,
        "pose_meta": _META, "pose": _NULL_POSE, "yaw": {"type": ["number", "null"]}, "pose_jumps": {"type": "integer"},
        "velocity_meta": _META, "velocity": {"type": ["object", "null"]},
        "navigation_meta": _META, "controller_state": _STR, "nav_goal_id": _STR, "nav_goal": _NULL_POSE,
        "distance_remaining": {"type": ["number", "null"]},
        "battery_meta": _META, "battery_percentage": {"type": ["number", "null"]},
        "active_action": {"type": ["object", "null"], "properties": _ACTION_PROPS},
        "recent_outcome": {"type": ["object", "null"], "properties": _ACTION_PROPS},
        "artifacts": {"type": "array", "items": {"type": "object"}}}),
    PROGRESS_TOPIC: _schema("robot_harness.ActionProgress", "Correlated backend feedback for the active action", {
        "mission_id": _STR, "action_id": _STR, "distance_remaining": {"type": ["number", "null"]},
        "current_pose": _NULL_POSE}),
    VERDICTS_TOPIC: _schema("robot_harness.Verdict", "The independent verifier's verdict on a done proposal", {
        "mission_id": _STR, "verdict_id": _STR, "goal_verdict": _STR, "steps": {"type": "array"},
        "missing": {"type": "array"}, "evidence_ids": {"type": "array"}}),
}
"""Every live channel: topic -> JSON schema (its ``title`` is the schema name Foxglove sees)."""


# ----------------------------------------------------------------- the layout

_NAV2_DISTANCE = "/navigate_to_pose/_action/feedback.feedback.distance_remaining"


def _series(value: str, label: str) -> dict[str, Any]:
    return {"value": value, "label": label, "enabled": True, "timestampMethod": "receiveTime"}


def foxglove_layout() -> dict[str, Any]:
    """The layout shipped as ``config/foxglove_layout.json`` (Foxglove's exported-layout format:
    ``configById`` + a split tree; import it with Layouts > Import from file).

    It reads a mission bag and the live bridge alike: where they differ (Nav2's
    raw feedback is only in a bag, ``/robot_harness/progress`` only live) both
    series are listed, and the one that is absent stays empty.
    """
    three_d = {
        "followTf": "map",
        "followMode": "follow-none",
        "scene": {"transforms": {"showLabel": False}},
        "transforms": {},
        "cameraState": {"perspective": False, "distance": 18.0, "phi": 0.0, "thetaOffset": 0.0,
                        "targetOffset": [0.0, 0.0, 0.0], "target": [0.0, 0.0, 0.0],
                        "targetOrientation": [0.0, 0.0, 0.0, 1.0], "fovy": 45.0, "near": 0.01, "far": 5000.0},
        "layers": {"grid": {"layerId": "foxglove.Grid", "visible": True, "frameId": "map", "size": 20.0,
                            "divisions": 20.0, "lineWidth": 1.0, "color": "#248eff40",
                            "position": [0.0, 0.0, 0.0], "rotation": [0.0, 0.0, 0.0]}},
        "topics": {
            POSE_TOPIC: {"visible": True, "type": "arrow", "color": "#19e648ff", "arrowScale": [1.0, 0.15, 0.15]},
            PATH_TOPIC: {"visible": True, "type": "line", "lineWidth": 0.05, "gradient": ["#2f7fffff", "#19e648ff"]},
            PLACES_TOPIC: {"visible": True, "type": "arrow", "arrowScale": [0.6, 0.1, 0.1],
                           "gradient": ["#ffb000ff", "#ffb000ff"]},
            PLACE_LABELS_TOPIC: {"visible": True},
            "/amcl_pose": {"visible": False, "type": "arrow", "showCovariance": True},
        },
    }
    config_by_id = {
        "3D!robot_harness": three_d,
        "RosOut!robot_harness": {"topicToRender": LOG_TOPIC, "minLogLevel": 2, "searchTerms": [],
                                 "nameFilter": {}, "fontSize": 12},
        "Plot!distance_remaining": {
            "paths": [_series(_NAV2_DISTANCE, "Nav2 feedback (bag)"),
                      _series(f"{PROGRESS_TOPIC}.distance_remaining", "progress (live)"),
                      _series(f"{SNAPSHOTS_TOPIC}.distance_remaining", "snapshots")],
            "showLegend": True, "legendDisplay": "floating", "showXAxisLabels": True, "showYAxisLabels": True,
            "isSynced": True, "xAxisVal": "timestamp", "yAxisLabel": "distance remaining (m)",
            "minYValue": 0.0, "sidebarDimension": 240,
        },
        "StateTransitions!action_state": {
            "paths": [_series(f"{ACTION_STATE_TOPIC}.state", "action state"),
                      _series(f"{SNAPSHOTS_TOPIC}.controller_state", "controller"),
                      _series(f"{SNAPSHOTS_TOPIC}.pose_meta.availability", "pose availability")],
            "isSynced": True, "showPoints": True,
        },
        "RawMessages!snapshots": {"topicPath": SNAPSHOTS_TOPIC, "diffEnabled": False, "diffMethod": "custom",
                                  "diffTopicPath": "", "showFullMessageForDiff": False, "expansion": "none"},
        "RawMessages!verdicts": {"topicPath": VERDICTS_TOPIC, "diffEnabled": False, "diffMethod": "custom",
                                 "diffTopicPath": "", "showFullMessageForDiff": False, "expansion": "all"},
    }
    layout = {
        "direction": "row",
        "first": {"direction": "column", "first": "3D!robot_harness", "second": "RosOut!robot_harness",
                  "splitPercentage": 62},
        "second": {
            "direction": "column",
            "first": {"direction": "column", "first": "Plot!distance_remaining",
                      "second": "StateTransitions!action_state", "splitPercentage": 55},
            "second": {"direction": "row", "first": "RawMessages!snapshots", "second": "RawMessages!verdicts",
                       "splitPercentage": 50},
            "splitPercentage": 50,
        },
        "splitPercentage": 58,
    }
    return {"configById": config_by_id, "globalVariables": {}, "userNodes": {}, "playbackConfig": {"speed": 1.0},
            "layout": layout}


def layout_panels(node: Any) -> list[str]:
    """The panel ids in a layout's split tree, depth first."""
    if isinstance(node, str):
        return [node]
    return [*layout_panels(node["first"]), *layout_panels(node["second"])]


def layout_json() -> str:
    """The layout as the text of ``config/foxglove_layout.json``."""
    return json.dumps(foxglove_layout(), indent=2) + "\n"
