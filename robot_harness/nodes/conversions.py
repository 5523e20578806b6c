"""Every translation between ROS messages and core records, as pure functions.

Nodes call these and nothing else to cross the boundary, so the mapping rules
live in one place:

* stamps are ``builtin_interfaces/Time`` on the wire and epoch seconds
  (float) in the core; conversion is exact to the nanosecond;
* an absent core value (``None``) travels as a MISSING ``FieldMeta`` beside a
  zero placeholder, or as NaN for a float with no meta of its own
  (``distance_remaining``), or as an empty id/frame; it comes back as ``None``;
* ``float32`` message fields (distance remaining, battery) carry only float32
  precision over the wire.

What a message cannot carry is lost on the way out, by design:
``ActionView.target`` (not in ``ActionState``) and an ``ActionView``'s
``backend`` (in ``ActionState`` only, passed separately).
"""
from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from action_msgs.msg import GoalStatus, GoalStatusArray
from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import KeyValue
from geometry_msgs.msg import Point, Pose, PoseStamped, Quaternion, Transform, Twist
from unique_identifier_msgs.msg import UUID

from robot_harness.core.mission_spec import MissionSpec
from robot_harness.core.nav_goals import NavGoal, NavGoalKind, WaypointReport, WaypointState
from robot_harness.core.ports import BackendEvent
from robot_harness.core.records import (
    ActionStatus,
    ActionView,
    ArtifactRef,
    Availability,
    ControllerState,
    EventType,
    FieldMeta,
    JournalEvent,
    NavProgress,
    Pose2D,
    PoseCovariance,
    Velocity,
    WorldSnapshot,
)
from robot_harness.msg import ActionState as ActionStateMsg
from robot_harness.msg import ArtifactRef as ArtifactRefMsg
from robot_harness.msg import FieldMeta as FieldMetaMsg
from robot_harness.msg import JournalEvent as JournalEventMsg
from robot_harness.msg import WorldSnapshot as WorldSnapshotMsg

__all__ = [
    "stamp_to_float",
    "float_to_stamp",
    "yaw_from_quaternion",
    "quaternion_from_yaw",
    "pose_msg_to_pose2d",
    "pose2d_to_pose_msg",
    "transform_to_pose2d",
    "twist_to_velocity",
    "velocity_to_twist",
    "field_meta_to_msg",
    "msg_to_field_meta",
    "action_view_to_msg",
    "msg_to_action_view",
    "artifact_to_msg",
    "msg_to_artifact",
    "snapshot_to_msg",
    "msg_to_snapshot",
    "journal_event_to_msg",
    "msg_to_journal_event",
    "msg_to_mission_spec",
    "mission_spec_to_goal",
    "goal_id_to_hex",
    "hex_to_goal_id",
    "active_goal_ids",
    "float_to_duration",
    "pose2d_to_stamped",
    "nav_goal_to_msg",
    "nav_feedback_progress",
    "nav_feedback_to_event",
    "nav_result_to_event",
    "waypoint_statuses_to_reports",
]

_NS = 1_000_000_000

_AVAILABILITY_TO_MSG = {
    Availability.AVAILABLE: FieldMetaMsg.AVAILABLE,
    Availability.STALE: FieldMetaMsg.STALE,
    Availability.MISSING: FieldMetaMsg.MISSING,
}
_MSG_TO_AVAILABILITY = {v: k for k, v in _AVAILABILITY_TO_MSG.items()}

_ACTIVE_GOAL_STATUSES = frozenset((GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING))


# -- time and geometry ----------------------------------------------------------


def stamp_to_float(stamp: Time) -> float:
    """``builtin_interfaces/Time`` to epoch seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def float_to_stamp(t: float) -> Time:
    """Epoch seconds to ``builtin_interfaces/Time``, rounded to the nearest nanosecond."""
    if not math.isfinite(t):
        raise ValueError(f"cannot stamp a non-finite time: {t!r}")
    sec = math.floor(t)
    nanosec = round((t - sec) * _NS)
    if nanosec >= _NS:
        sec += 1
        nanosec -= _NS
    return Time(sec=int(sec), nanosec=int(nanosec))


def yaw_from_quaternion(q: Quaternion) -> float:
    """Heading about +z of a quaternion, in (-pi, pi]."""
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def quaternion_from_yaw(yaw: float) -> Quaternion:
    """The pure rotation about +z by ``yaw``."""
    half = 0.5 * yaw
    return Quaternion(x=0.0, y=0.0, z=math.sin(half), w=math.cos(half))


def pose_msg_to_pose2d(pose: Pose) -> Pose2D:
    """``geometry_msgs/Pose`` projected onto the ground plane."""
    p = pose.position
    return Pose2D(x=p.x, y=p.y, yaw=yaw_from_quaternion(pose.orientation))


def pose2d_to_pose_msg(pose: Pose2D) -> Pose:
    msg = Pose()
    msg.position.x = float(pose.x)
    msg.position.y = float(pose.y)
    msg.orientation = quaternion_from_yaw(pose.yaw)
    return msg


def transform_to_pose2d(transform: Transform) -> Pose2D:
    """A ``geometry_msgs/Transform`` (e.g. map -> base_link) as the child frame's pose."""
    t = transform.translation
    return Pose2D(x=t.x, y=t.y, yaw=yaw_from_quaternion(transform.rotation))


def twist_to_velocity(twist: Twist) -> Velocity:
    return Velocity(vx=twist.linear.x, vy=twist.linear.y, wz=twist.angular.z)


def velocity_to_twist(v: Velocity) -> Twist:
    msg = Twist()
    msg.linear.x = float(v.vx)
    msg.linear.y = float(v.vy)
    msg.angular.z = float(v.wz)
    return msg


# -- snapshot parts -----------------------------------------------------------------


def field_meta_to_msg(meta: FieldMeta) -> FieldMetaMsg:
    """``age_s`` None travels as -1 and ``source_stamp`` None as a zero stamp."""
    return FieldMetaMsg(
        availability=_AVAILABILITY_TO_MSG[meta.availability],
        source_stamp=Time() if meta.source_stamp is None else float_to_stamp(meta.source_stamp),
        age_s=-1.0 if meta.age_s is None else float(meta.age_s),
        max_age_s=float(meta.max_age_s),
        source=meta.source,
    )


def msg_to_field_meta(msg: FieldMetaMsg) -> FieldMeta:
    """A MISSING meta has neither stamp nor age; the others keep what the message says."""
    try:
        availability = _MSG_TO_AVAILABILITY[msg.availability]
    except KeyError:
        raise ValueError(f"unknown FieldMeta availability {msg.availability}") from None
    missing = availability is Availability.MISSING
    return FieldMeta(
        availability=availability,
        source_stamp=None if missing else stamp_to_float(msg.source_stamp),
        age_s=None if missing else msg.age_s,
        max_age_s=msg.max_age_s,
        source=msg.source,
    )


def action_view_to_msg(
    view: ActionView | None, mission_id: str = "", *, backend: str = ""
) -> ActionStateMsg:
    """An empty slot (``None``) is an ``ActionState`` with an empty ``action_id``."""
    if view is None:
        return ActionStateMsg(mission_id=mission_id)
    return ActionStateMsg(
        action_id=view.action_id,
        mission_id=mission_id,
        tool_call_id=view.tool_call_id,
        skill=view.skill,
        state=view.state.value,
        revision=view.revision,
        backend=backend,
        backend_goal_id=view.backend_goal_id,
        backend_status=view.backend_status,
        reason=view.reason,
        decision_snapshot_id=view.decision_snapshot_id,
        outcome_snapshot_id=view.outcome_snapshot_id,
        requested_at=float_to_stamp(view.requested_at),
        updated_at=float_to_stamp(view.updated_at),
    )


def msg_to_action_view(msg: ActionStateMsg) -> ActionView | None:
    """``None`` for an empty slot; ``target`` is not carried and comes back ``None``."""
    if not msg.action_id:
        return None
    return ActionView(
        action_id=msg.action_id,
        tool_call_id=msg.tool_call_id,
        skill=msg.skill,
        state=ActionStatus(msg.state),
        revision=msg.revision,
        backend_goal_id=msg.backend_goal_id,
        backend_status=msg.backend_status,
        reason=msg.reason,
        decision_snapshot_id=msg.decision_snapshot_id,
        outcome_snapshot_id=msg.outcome_snapshot_id,
        requested_at=stamp_to_float(msg.requested_at),
        updated_at=stamp_to_float(msg.updated_at),
    )


def artifact_to_msg(ref: ArtifactRef) -> ArtifactRefMsg:
    return ArtifactRefMsg(
        uri=ref.uri, sha256=ref.sha256, media_type=ref.media_type, size_bytes=ref.size_bytes
    )


def msg_to_artifact(msg: ArtifactRefMsg) -> ArtifactRef:
    return ArtifactRef(
        uri=msg.uri, sha256=msg.sha256, media_type=msg.media_type, size_bytes=msg.size_bytes
    )


# -- snapshots ----------------------------------------------------------------------


def snapshot_to_msg(snapshot: WorldSnapshot) -> WorldSnapshotMsg:
    """A ``WorldSnapshot`` record as a message; ``msg_to_snapshot`` inverts it.

    Absent values: pose and velocity become zero placeholders beside their
    (MISSING) meta; battery and distance remaining become NaN; the navigation
    goal becomes a PoseStamped with an empty frame; ``last_pose_jump_at``
    becomes a zero stamp.
    """
    msg = WorldSnapshotMsg(
        format_version=snapshot.format_version,
        snapshot_id=snapshot.snapshot_id,
        mission_id=snapshot.mission_id,
        reason=snapshot.reason,
        captured_at=float_to_stamp(snapshot.captured_at),
        frame_id=snapshot.frame_id,
        pose_meta=field_meta_to_msg(snapshot.pose_meta),
        pose_jumps=snapshot.pose_jumps,
        velocity_meta=field_meta_to_msg(snapshot.velocity_meta),
        navigation_meta=field_meta_to_msg(snapshot.navigation_meta),
        controller_state=snapshot.controller_state.value,
        nav_goal_id=snapshot.nav_goal_id,
        distance_remaining=math.nan
        if snapshot.distance_remaining is None
        else float(snapshot.distance_remaining),
        navigation_time=_nan_if_none(snapshot.nav_progress.navigation_time_s if snapshot.nav_progress else None),
        estimated_time_remaining=_nan_if_none(
            snapshot.nav_progress.estimated_time_remaining_s if snapshot.nav_progress else None),
        number_of_recoveries=(snapshot.nav_progress.number_of_recoveries
                              if snapshot.nav_progress and snapshot.nav_progress.number_of_recoveries is not None
                              else -1),
        battery_meta=field_meta_to_msg(snapshot.battery_meta),
        battery_percentage=math.nan if snapshot.battery is None else float(snapshot.battery),
        active_action=action_view_to_msg(snapshot.active_action, snapshot.mission_id),
        recent_outcome=action_view_to_msg(snapshot.recent_outcome, snapshot.mission_id),
        artifacts=[artifact_to_msg(a) for a in snapshot.artifacts],
    )
    if snapshot.pose is not None:
        msg.pose = pose2d_to_pose_msg(snapshot.pose)
        msg.yaw = float(snapshot.pose.yaw)
    if snapshot.last_pose_jump_at is not None:
        msg.last_pose_jump = float_to_stamp(snapshot.last_pose_jump_at)
    if snapshot.pose_covariance is not None:
        c = snapshot.pose_covariance
        msg.pose_covariance = [float(c.var_x), float(c.var_y), float(c.var_yaw)]
    if snapshot.velocity is not None:
        msg.velocity = velocity_to_twist(snapshot.velocity)
    if snapshot.nav_goal is not None:
        msg.nav_goal = PoseStamped()
        msg.nav_goal.header.frame_id = snapshot.frame_id or "map"
        msg.nav_goal.pose = pose2d_to_pose_msg(snapshot.nav_goal)
    return msg


def _nan_if_none(v: float | None) -> float:
    return math.nan if v is None else float(v)


def _none_if_nan(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _msg_nav_progress(msg: WorldSnapshotMsg) -> NavProgress | None:
    nav_time, eta = _none_if_nan(msg.navigation_time), _none_if_nan(msg.estimated_time_remaining)
    recoveries = int(msg.number_of_recoveries) if msg.number_of_recoveries >= 0 else None
    if nav_time is None and eta is None and recoveries is None:
        return None
    return NavProgress(navigation_time_s=nav_time, estimated_time_remaining_s=eta, number_of_recoveries=recoveries)


def nav_feedback_progress(feedback: Any) -> NavProgress:
    """The progress counters of a NavigateToPose / NavigateThroughPoses feedback message."""
    return NavProgress(navigation_time_s=_duration_s(feedback.navigation_time),
                       estimated_time_remaining_s=_duration_s(feedback.estimated_time_remaining),
                       number_of_recoveries=int(feedback.number_of_recoveries))


def _duration_s(d: Any) -> float:
    return float(d.sec) + float(d.nanosec) * 1e-9


def float_to_duration(s: float) -> Duration:
    """Seconds (finite, >= 0) to ``builtin_interfaces/Duration``, rounded to the nearest nanosecond."""
    if not (math.isfinite(s) and s >= 0.0):
        raise ValueError(f"a duration is finite and >= 0, got {s!r}")
    t = float_to_stamp(s)
    return Duration(sec=t.sec, nanosec=t.nanosec)


def msg_to_snapshot(msg: WorldSnapshotMsg) -> WorldSnapshot:
    """Inverse of ``snapshot_to_msg``: a MISSING meta means the value is ``None``.

    The pose's yaw comes from the exact ``yaw`` field; the navigation goal's
    yaw from its quaternion (exact to float rounding).
    """
    pose_meta = msg_to_field_meta(msg.pose_meta)
    velocity_meta = msg_to_field_meta(msg.velocity_meta)
    battery_meta = msg_to_field_meta(msg.battery_meta)
    pose = None
    if pose_meta.availability is not Availability.MISSING:
        pose = Pose2D(x=msg.pose.position.x, y=msg.pose.position.y, yaw=msg.yaw)
    velocity = None
    if velocity_meta.availability is not Availability.MISSING:
        velocity = twist_to_velocity(msg.velocity)
    battery = None
    if battery_meta.availability is not Availability.MISSING and math.isfinite(
        msg.battery_percentage
    ):
        battery = msg.battery_percentage
    nav_goal = None
    if msg.nav_goal.header.frame_id:
        nav_goal = pose_msg_to_pose2d(msg.nav_goal.pose)
    jump = msg.last_pose_jump
    return WorldSnapshot(
        format_version=msg.format_version,
        snapshot_id=msg.snapshot_id,
        mission_id=msg.mission_id,
        reason=msg.reason,
        captured_at=stamp_to_float(msg.captured_at),
        frame_id=msg.frame_id,
        pose=pose,
        pose_meta=pose_meta,
        pose_jumps=msg.pose_jumps,
        last_pose_jump_at=None if jump.sec == 0 and jump.nanosec == 0 else stamp_to_float(jump),
        pose_covariance=(PoseCovariance(var_x=msg.pose_covariance[0], var_y=msg.pose_covariance[1],
                                        var_yaw=msg.pose_covariance[2]) if len(msg.pose_covariance) == 3 else None),
        velocity=velocity,
        velocity_meta=velocity_meta,
        controller_state=ControllerState(msg.controller_state),
        nav_goal_id=msg.nav_goal_id,
        nav_goal=nav_goal,
        distance_remaining=msg.distance_remaining if math.isfinite(msg.distance_remaining) else None,
        nav_progress=_msg_nav_progress(msg),
        navigation_meta=msg_to_field_meta(msg.navigation_meta),
        battery=battery,
        battery_meta=battery_meta,
        active_action=msg_to_action_view(msg.active_action),
        recent_outcome=msg_to_action_view(msg.recent_outcome),
        artifacts=tuple(msg_to_artifact(a) for a in msg.artifacts),
    )


# -- journal --------------------------------------------------------------------------


def journal_event_to_msg(event: JournalEvent) -> JournalEventMsg:
    """The live view of a committed event; the payload as compact JSON."""
    return JournalEventMsg(
        format_version=event.format_version,
        seq=event.seq,
        event_id=event.event_id,
        kind=event.type.value,
        stamp=float_to_stamp(event.stamp),
        mission_id=event.mission_id,
        model_turn_id=event.model_turn_id,
        tool_call_id=event.tool_call_id,
        robot_action_id=event.robot_action_id,
        snapshot_id=event.snapshot_id,
        payload_json=_payload_json(event),
    )


def _payload_json(event: JournalEvent) -> str:
    """A committed payload is plain JSON already (the journal stored it as such), so it is dumped as
    it is; anything else (an event built by hand) goes through pydantic's JSON mode first. Both give
    the same text for a plain-JSON payload."""
    try:
        return json.dumps(event.payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        payload = event.model_dump(mode="json", include={"payload"})["payload"]
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def msg_to_journal_event(msg: JournalEventMsg) -> JournalEvent:
    return JournalEvent(
        format_version=msg.format_version,
        seq=msg.seq,
        event_id=msg.event_id,
        type=EventType(msg.kind),
        stamp=stamp_to_float(msg.stamp),
        mission_id=msg.mission_id,
        model_turn_id=msg.model_turn_id,
        tool_call_id=msg.tool_call_id,
        robot_action_id=msg.robot_action_id,
        snapshot_id=msg.snapshot_id,
        payload=json.loads(msg.payload_json) if msg.payload_json else {},
    )


# -- Nav2 goals, feedback and results ---------------------------------------------------


def pose2d_to_stamped(pose: Pose2D, frame_id: str, stamp: float) -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = frame_id
    msg.header.stamp = float_to_stamp(stamp)
    msg.pose = pose2d_to_pose_msg(pose)
    return msg


def nav_goal_to_msg(goal: NavGoal, msg: Any, *, frame_id: str, stamp: float) -> Any:
    """Fill ``msg``, a fresh ``Goal`` of the action ``goal.kind`` names, from ``goal``; returns it.

    Every pose is stamped ``frame_id`` / ``stamp``. NavigateThroughPoses takes Kilted's ``nav_msgs/Goals``
    (a header and ``goals``) or Jazzy's ``PoseStamped[]``, whichever ``msg`` has. FollowWaypoints starts
    at the first pose and runs once (``goal_index`` 0, ``number_of_loops`` 0). BackUp gets the distance
    as a positive ``target.x`` with y = z = 0 (as ``BasicNavigator.backup`` sends it; the behaviour
    makes it a backward motion itself and refuses a non-zero y or z). A ``time_allowance`` of 0 is sent
    as 0 (Nav2's behaviours then apply no time limit). CLEAR_COSTMAPS is no action: ValueError.
    """
    kind = goal.kind

    def stamped(p: Pose2D) -> PoseStamped:
        return pose2d_to_stamped(p, frame_id, stamp)

    if kind is NavGoalKind.NAVIGATE_TO_POSE:
        msg.pose = stamped(goal.poses[0])
    elif kind is NavGoalKind.NAVIGATE_THROUGH_POSES:
        poses = [stamped(p) for p in goal.poses]
        if hasattr(msg.poses, "goals"):  # Kilted: nav_msgs/Goals
            msg.poses.header.frame_id = frame_id
            msg.poses.header.stamp = float_to_stamp(stamp)
            msg.poses.goals = poses
        else:  # Jazzy and earlier: PoseStamped[]
            msg.poses = poses
    elif kind is NavGoalKind.FOLLOW_WAYPOINTS:
        msg.poses = [stamped(p) for p in goal.poses]
        msg.number_of_loops = 0
        msg.goal_index = 0
    elif kind is NavGoalKind.SPIN:
        msg.target_yaw = float(goal.spin_dist_rad)
        msg.time_allowance = float_to_duration(goal.time_allowance_s)
    elif kind is NavGoalKind.BACK_UP:
        msg.target = Point(x=abs(float(goal.backup_dist_m)), y=0.0, z=0.0)
        msg.speed = abs(float(goal.backup_speed_mps))
        msg.time_allowance = float_to_duration(goal.time_allowance_s)
    elif kind is NavGoalKind.WAIT:
        msg.time = float_to_duration(goal.wait_s)
    else:
        raise ValueError(f"{kind.value} is not an action goal")
    return msg


_FEEDBACK_COUNTS = ("number_of_poses_remaining", "current_waypoint")
_FEEDBACK_DISTANCES = ("distance_traveled", "angular_distance_traveled")


def nav_feedback_to_event(goal_id: str, feedback: Any, *, stamp: float) -> BackendEvent:
    """A feedback message of any Nav2 action the harness sends, as a ``feedback`` event.

    Read from the fields the message has: ``current_pose`` and ``distance_remaining`` (the two
    navigators); in ``detail`` the navigators' ``navigation_time_s`` / ``estimated_time_remaining_s`` /
    ``number_of_recoveries``, NavigateThroughPoses' ``number_of_poses_remaining``, FollowWaypoints'
    ``current_waypoint``, BackUp's ``distance_traveled`` (m), Spin's ``angular_distance_traveled``
    (rad) and Wait's ``time_left_s``.
    """
    detail: dict[str, Any] = {}
    if hasattr(feedback, "navigation_time"):
        detail.update(nav_feedback_progress(feedback).model_dump())
    for key in _FEEDBACK_COUNTS:
        if hasattr(feedback, key):
            detail[key] = int(getattr(feedback, key))
    for key in _FEEDBACK_DISTANCES:
        if hasattr(feedback, key):
            detail[key] = float(getattr(feedback, key))
    if hasattr(feedback, "time_left"):
        detail["time_left_s"] = _duration_s(feedback.time_left)
    return BackendEvent(
        goal_id=goal_id, type="feedback", stamp=stamp, detail=detail,
        distance_remaining=float(feedback.distance_remaining) if hasattr(feedback, "distance_remaining") else None,
        current_pose=pose_msg_to_pose2d(feedback.current_pose.pose) if hasattr(feedback, "current_pose") else None,
    )


def nav_result_to_event(goal_id: str, result: Any, *, status: str, stamp: float) -> BackendEvent:
    """A Nav2 action's result (``status``: the goal's terminal status, named) as a ``result`` event.

    ``detail`` has ``error_code`` and ``error_msg`` (0 and "" for a result without them), and for a route
    ``waypoints``: ``WaypointReport`` dicts from NavigateThroughPoses' ``waypoint_statuses`` (Kilted: every
    waypoint) or FollowWaypoints' ``missed_waypoints`` (only the missed ones). A result without either
    field (Jazzy's NavigateThroughPoses, every other action) has no ``waypoints`` key.
    """
    detail: dict[str, Any] = {"error_code": int(getattr(result, "error_code", 0)),
                              "error_msg": str(getattr(result, "error_msg", ""))}
    for field in ("waypoint_statuses", "missed_waypoints"):
        if hasattr(result, field):
            detail["waypoints"] = [r.model_dump(mode="json")
                                   for r in waypoint_statuses_to_reports(getattr(result, field))]
            break
    return BackendEvent(goal_id=goal_id, type="result", status=status, stamp=stamp, detail=detail)


_WAYPOINT_STATES = tuple(WaypointState)


def waypoint_statuses_to_reports(statuses: Iterable[Any]) -> list[WaypointReport]:
    """Nav2's per-waypoint reports as ``WaypointReport``s, in the order given.

    Kilted's ``nav2_msgs/WaypointStatus``: its ``waypoint_status`` is matched to ``WaypointState`` by the
    name of the message's own constant (PENDING, COMPLETED, SKIPPED, FAILED); a value that is none of them
    is dropped (Nav2's word about a waypoint is only ever a reason against it, and an unreadable one is
    not even that). Jazzy's ``MissedWaypoint`` (``index``, ``error_code``) and a bare index are FAILED.
    """
    out: list[WaypointReport] = []
    for st in statuses:
        if hasattr(st, "waypoint_status"):
            names = {getattr(type(st), s.name): s for s in _WAYPOINT_STATES if hasattr(type(st), s.name)}
            state = names.get(int(st.waypoint_status))
            if state is None:
                continue
            out.append(WaypointReport(index=int(st.waypoint_index), state=state, error_code=int(st.error_code),
                                      error_msg=str(st.error_msg)))
        elif hasattr(st, "index"):
            out.append(WaypointReport(index=int(st.index), state=WaypointState.FAILED,
                                      error_code=int(getattr(st, "error_code", 0))))
        else:
            out.append(WaypointReport(index=int(st), state=WaypointState.FAILED))
    return out


# -- action goals -----------------------------------------------------------------------


def msg_to_mission_spec(goal: Any) -> MissionSpec:
    """What a ``Mission.Goal`` says the mission is: its goal words, contract text, template and
    parameters (KeyValue pairs, in order; a repeated key is kept, for the spec to refuse)."""
    return MissionSpec(goal=goal.goal, contract=goal.contract, template=goal.template_name,
                       template_params=tuple((kv.key, kv.value) for kv in goal.template_params))


def mission_spec_to_goal(spec: MissionSpec, goal: Any) -> Any:
    """Fill a ``Mission.Goal``'s goal, contract, template and template_params from ``spec``; returns it."""
    goal.goal, goal.contract, goal.template_name = spec.goal, spec.contract, spec.template
    goal.template_params = [KeyValue(key=k, value=v) for k, v in spec.template_params]
    return goal


def goal_id_to_hex(goal_id: UUID | bytes | bytearray | Sequence[int]) -> str:
    """A goal UUID as 32 lowercase hex digits (the harness's backend correlation id)."""
    raw = goal_id.uuid if isinstance(goal_id, UUID) else goal_id
    data = bytes(bytearray(raw))
    if len(data) != 16:
        raise ValueError(f"a goal id has 16 bytes, got {len(data)}")
    return data.hex()


def hex_to_goal_id(hex_id: str) -> UUID:
    """Inverse of ``goal_id_to_hex`` (dashes tolerated)."""
    data = bytes.fromhex(hex_id.replace("-", ""))
    if len(data) != 16:
        raise ValueError(f"a goal id has 16 bytes, got {len(data)}")
    return UUID(uuid=list(data))


def active_goal_ids(msg: GoalStatusArray | Iterable[GoalStatus]) -> list[str]:
    """Hex ids of the goals an action server lists as ACCEPTED or EXECUTING."""
    statuses = msg.status_list if isinstance(msg, GoalStatusArray) else msg
    return [
        goal_id_to_hex(s.goal_info.goal_id) for s in statuses if s.status in _ACTIVE_GOAL_STATUSES
    ]


# --------------------------------------------------------------------------- raw CDR fast paths
#
# The aggregator's two high-rate topics (pose at up to 200 Hz, odometry at
# 50 Hz) are subscribed raw and decoded here: it needs six numbers out of each
# message, and skipping rclpy's full deserialization (36-double covariances
# into Python objects) is most of its per-message cost. A test checks these
# against rclpy's own serializer for every alignment of the frame ids.

_CDR_ORDER = {0: ">", 1: "<"}  # encapsulation kind CDR_BE / CDR_LE (PL variants share the low bit)


def _cdr_start(data: bytes) -> tuple[str, float, int]:
    """Byte order, header stamp (s) and body offset just past header.frame_id."""
    order = _CDR_ORDER[data[1] & 1]
    sec, nsec, length = struct.unpack_from(order + "iII", data, 4)
    return order, sec + nsec * 1e-9, 12 + length  # body-relative offset


def _align(offset: int, n: int) -> int:
    return (offset + n - 1) // n * n


def parse_pose_and_covariance(data: bytes) -> tuple[float, Pose2D, PoseCovariance]:
    """(header stamp, pose, its x / y / yaw variances) from a serialized geometry_msgs/PoseWithCovarianceStamped
    (the covariance is row-major 6x6 over x, y, z, roll, pitch, yaw: [0], [7], [35])."""
    order, stamp, off = _cdr_start(data)
    off = _align(off, 8)
    x, y, _z, qx, qy, qz, qw, *cov = struct.unpack_from(order + "43d", data, 4 + off)
    pose = Pose2D(x=x, y=y, yaw=math.atan2(2.0 * (qw * qz + qx * qy), 1.0 - 2.0 * (qy * qy + qz * qz)))
    return stamp, pose, PoseCovariance(var_x=cov[0], var_y=cov[7], var_yaw=cov[35])


def parse_odometry_twist(data: bytes) -> tuple[float, Velocity]:
    """(header stamp, body twist) from a serialized nav_msgs/Odometry."""
    order, stamp, off = _cdr_start(data)
    off = _align(off, 4)
    (child_len,) = struct.unpack_from(order + "I", data, 4 + off)
    off = _align(off + 4 + child_len, 8) + (7 + 36) * 8  # skip pose + covariance
    vx, vy, _vz, _wx, _wy, wz = struct.unpack_from(order + "6d", data, 4 + off)
    return stamp, Velocity(vx=vx, vy=vy, wz=wz)
