"""Message <-> record translation: round trips, absent values, geometry."""
from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("rclpy")

from action_msgs.msg import GoalInfo, GoalStatus, GoalStatusArray  # noqa: E402
from builtin_interfaces.msg import Time  # noqa: E402
from geometry_msgs.msg import Pose, Quaternion, Transform  # noqa: E402
from unique_identifier_msgs.msg import UUID  # noqa: E402

from robot_harness.core.records import (  # noqa: E402
    ActionStatus,
    ActionView,
    ArtifactRef,
    Availability,
    ControllerState,
    EventType,
    FieldMeta,
    JournalEvent,
    Pose2D,
    PoseCovariance,
    Velocity,
    WorldSnapshot,
    normalize_angle,
)
from robot_harness.core.snapshot import SnapshotBuilder  # noqa: E402
from robot_harness.msg import ActionState as ActionStateMsg  # noqa: E402
from robot_harness.msg import FieldMeta as FieldMetaMsg  # noqa: E402
from robot_harness.msg import WorldSnapshot as WorldSnapshotMsg  # noqa: E402
from robot_harness.nodes import conversions as cv  # noqa: E402

T0 = 1_700_000_000.0


# -- time ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "t", [0.0, 1.5, T0, T0 + 0.123456789, 1_712_345_678.999999999, T0 + 0.9999999996]
)
def test_stamp_round_trip(t):
    stamp = cv.float_to_stamp(t)
    assert 0 <= stamp.nanosec < 1_000_000_000
    assert cv.stamp_to_float(stamp) == t


def test_stamp_from_parts_and_carry():
    assert cv.stamp_to_float(Time(sec=10, nanosec=500_000_000)) == 10.5
    stamp = cv.float_to_stamp(2.9999999999)
    assert (stamp.sec, stamp.nanosec) == (3, 0)


def test_non_finite_stamp_rejected():
    with pytest.raises(ValueError):
        cv.float_to_stamp(float("nan"))


# -- geometry ------------------------------------------------------------------------


@pytest.mark.parametrize("yaw", [0.0, 0.3, -1.2, math.pi / 2, 3.0, -3.0, math.pi])
def test_yaw_quaternion_round_trip(yaw):
    q = cv.quaternion_from_yaw(yaw)
    assert q.x == 0.0 and q.y == 0.0
    assert q.x**2 + q.y**2 + q.z**2 + q.w**2 == pytest.approx(1.0)
    assert normalize_angle(cv.yaw_from_quaternion(q) - yaw) == pytest.approx(0.0, abs=1e-12)


def test_yaw_of_known_quaternion():
    s = math.sqrt(0.5)
    assert cv.yaw_from_quaternion(Quaternion(x=0.0, y=0.0, z=s, w=s)) == pytest.approx(math.pi / 2)
    assert cv.yaw_from_quaternion(Quaternion()) == 0.0  # identity (w defaults to 1)


def test_yaw_wraps_into_range():
    yaw = cv.yaw_from_quaternion(cv.quaternion_from_yaw(3.5))
    assert yaw == pytest.approx(3.5 - 2 * math.pi)


def test_pose_round_trip():
    pose = Pose2D(x=1.25, y=-3.5, yaw=0.75)
    msg = cv.pose2d_to_pose_msg(pose)
    assert isinstance(msg, Pose)
    assert (msg.position.x, msg.position.y, msg.position.z) == (1.25, -3.5, 0.0)
    back = cv.pose_msg_to_pose2d(msg)
    assert (back.x, back.y) == (1.25, -3.5)
    assert back.yaw == pytest.approx(0.75, abs=1e-12)


def test_transform_to_pose2d():
    tf = Transform()
    tf.translation.x, tf.translation.y = 2.0, 3.0
    tf.rotation = cv.quaternion_from_yaw(-0.5)
    pose = cv.transform_to_pose2d(tf)
    assert (pose.x, pose.y) == (2.0, 3.0) and pose.yaw == pytest.approx(-0.5)


def test_velocity_round_trip():
    v = Velocity(vx=0.5, vy=-0.1, wz=0.25)
    assert cv.twist_to_velocity(cv.velocity_to_twist(v)) == v


# -- parts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "meta",
    [
        FieldMeta(),
        FieldMeta(availability=Availability.MISSING, max_age_s=0.5, source="/amcl_pose"),
        FieldMeta(
            availability=Availability.AVAILABLE,
            source_stamp=T0 + 0.25,
            age_s=0.125,
            max_age_s=0.5,
            source="/amcl_pose",
        ),
        FieldMeta(availability=Availability.STALE, source_stamp=T0, age_s=7.5, max_age_s=2.0, source="s"),
    ],
)
def test_field_meta_round_trip(meta):
    msg = cv.field_meta_to_msg(meta)
    assert cv.msg_to_field_meta(msg) == meta


def test_missing_field_meta_on_the_wire():
    msg = cv.field_meta_to_msg(FieldMeta(max_age_s=0.5))
    assert msg.availability == FieldMetaMsg.MISSING
    assert msg.age_s == -1.0
    assert (msg.source_stamp.sec, msg.source_stamp.nanosec) == (0, 0)


def test_unknown_availability_rejected():
    with pytest.raises(ValueError):
        cv.msg_to_field_meta(FieldMetaMsg(availability=7))


def _view(**kw) -> ActionView:
    base = dict(
        action_id="act-1",
        tool_call_id="call-1",
        skill="navigate_to",
        state=ActionStatus.RUNNING,
        revision=3,
        backend_goal_id="ab" * 16,
        backend_status="EXECUTING",
        reason="moving",
        decision_snapshot_id="snap-1",
        outcome_snapshot_id="",
        requested_at=T0,
        updated_at=T0 + 1.5,
    )
    base.update(kw)
    return ActionView(**base)


def test_action_view_round_trip():
    view = _view()
    msg = cv.action_view_to_msg(view, "mission-1", backend="nav2/navigate_to_pose")
    assert msg.mission_id == "mission-1" and msg.backend == "nav2/navigate_to_pose"
    assert msg.state == ActionStateMsg.RUNNING
    assert cv.msg_to_action_view(msg) == view


def test_action_view_target_is_not_carried():
    view = _view(target=Pose2D(x=1.0, y=2.0))
    assert cv.msg_to_action_view(cv.action_view_to_msg(view)) == view.model_copy(update={"target": None})


def test_empty_action_slot():
    msg = cv.action_view_to_msg(None, "mission-1")
    assert msg.action_id == "" and msg.mission_id == "mission-1"
    assert cv.msg_to_action_view(msg) is None


def test_artifact_round_trip():
    ref = ArtifactRef(uri="file:///tmp/a.png", sha256="f" * 64, media_type="image/png", size_bytes=1234)
    assert cv.msg_to_artifact(cv.artifact_to_msg(ref)) == ref


# -- snapshots -----------------------------------------------------------------------


def _full_snapshot() -> WorldSnapshot:
    b = SnapshotBuilder()
    b.update_pose(Pose2D(x=0.0, y=0.0), T0 - 1.0, "/amcl_pose")
    b.update_pose(Pose2D(x=5.0, y=1.0, yaw=2.5), T0 - 0.25, "/amcl_pose",  # a jump
                  PoseCovariance(var_x=0.0625, var_y=0.125, var_yaw=0.25))
    b.update_velocity(Velocity(vx=0.25, wz=-0.5), T0 - 0.125, "/odom")
    b.update_battery(0.75, T0 - 1.0, "/battery_state")
    b.update_nav_status(["ab" * 16], T0 - 0.5, "navigate_to_pose/_action/status")
    b.update_nav_feedback("ab" * 16, None, 2.5, T0 - 0.25, "navigate_to_pose/_action/feedback")
    snap = b.capture(
        snapshot_id="snap-0123456789ab",
        now=T0,
        reason="before_model_turn",
        mission_id="mission-1",
        active_action=_view(),
        recent_outcome=_view(action_id="act-0", state=ActionStatus.SUCCEEDED, outcome_snapshot_id="snap-9"),
        artifacts=[ArtifactRef(uri="file:///tmp/a.png", sha256="e" * 64, size_bytes=10)],
    )
    return snap.model_copy(update={"nav_goal": Pose2D(x=7.0, y=-1.0, yaw=1.0)})


def test_snapshot_round_trip_full():
    snap = _full_snapshot()
    assert snap.pose_jumps == 1 and snap.pose_meta.fresh and snap.distance_remaining == 2.5
    assert snap.pose_covariance is not None and snap.pose_covariance.std_yaw == 0.5
    msg = cv.snapshot_to_msg(snap)
    assert isinstance(msg, WorldSnapshotMsg)
    assert msg.controller_state == WorldSnapshotMsg.CONTROLLER_ACTIVE
    assert msg.yaw == 2.5
    assert msg.active_action.mission_id == "mission-1"
    back = cv.msg_to_snapshot(msg)
    assert back.nav_goal is not None
    assert back.nav_goal.yaw == pytest.approx(1.0, abs=1e-12)
    # Everything else the message carries comes back exactly.
    assert back.model_copy(update={"nav_goal": snap.nav_goal}) == snap


def test_snapshot_round_trip_empty_has_none_values():
    snap = SnapshotBuilder().capture(snapshot_id="snap-1", now=T0, reason="on_request")
    msg = cv.snapshot_to_msg(snap)
    assert msg.pose_meta.availability == FieldMetaMsg.MISSING
    assert math.isnan(msg.battery_percentage) and math.isnan(msg.distance_remaining)
    back = cv.msg_to_snapshot(msg)
    assert back == snap
    assert back.pose is None and back.velocity is None and back.battery is None and back.pose_covariance is None
    assert back.nav_goal is None and back.last_pose_jump_at is None
    assert back.controller_state is ControllerState.UNKNOWN


def test_stale_pose_keeps_value_through_message():
    b = SnapshotBuilder()
    b.update_pose(Pose2D(x=1.0, y=2.0, yaw=-0.5), T0, "/amcl_pose")
    snap = b.capture(snapshot_id="s", now=T0 + 3.0, reason="on_request")
    back = cv.msg_to_snapshot(cv.snapshot_to_msg(snap))
    assert back.pose_meta.availability is Availability.STALE
    assert back.pose == Pose2D(x=1.0, y=2.0, yaw=-0.5)


def test_snapshot_survives_serialization():
    """Over the wire, float32 fields keep float32 precision; the values chosen are exact."""
    from rclpy.serialization import deserialize_message, serialize_message

    snap = _full_snapshot()
    wire = deserialize_message(serialize_message(cv.snapshot_to_msg(snap)), WorldSnapshotMsg)
    back = cv.msg_to_snapshot(wire)
    assert back.model_copy(update={"nav_goal": snap.nav_goal}) == snap


# -- journal and goals ---------------------------------------------------------------


def test_journal_event_to_msg_and_back():
    event = JournalEvent(
        seq=42,
        event_id="evt-1",
        type=EventType.TOOL_CALL_RECORDED,
        stamp=T0 + 0.5,
        mission_id="mission-1",
        tool_call_id="call-1",
        payload={"name": "navigate_to", "arguments": {"x": 1.5}, "status": ActionStatus.ACCEPTED},
    )
    msg = cv.journal_event_to_msg(event)
    assert msg.kind == "TOOL_CALL_RECORDED" and msg.seq == 42
    assert json.loads(msg.payload_json) == {
        "name": "navigate_to",
        "arguments": {"x": 1.5},
        "status": "ACCEPTED",
    }
    back = cv.msg_to_journal_event(msg)
    assert back == event.model_copy(update={"payload": json.loads(msg.payload_json)})


def test_goal_id_hex_round_trip():
    raw = bytes(range(16))
    assert cv.goal_id_to_hex(raw) == "000102030405060708090a0b0c0d0e0f"
    uuid = cv.hex_to_goal_id("000102030405060708090a0b0c0d0e0f")
    assert isinstance(uuid, UUID)
    assert cv.goal_id_to_hex(uuid) == raw.hex()
    assert cv.goal_id_to_hex(UUID(uuid=list(raw))) == raw.hex()
    with pytest.raises(ValueError):
        cv.goal_id_to_hex(b"short")


def test_active_goal_ids_filters_by_status():
    def status(byte: int, code: int) -> GoalStatus:
        return GoalStatus(goal_info=GoalInfo(goal_id=UUID(uuid=[byte] * 16)), status=code)

    msg = GoalStatusArray(
        status_list=[
            status(1, GoalStatus.STATUS_ACCEPTED),
            status(2, GoalStatus.STATUS_EXECUTING),
            status(3, GoalStatus.STATUS_SUCCEEDED),
            status(4, GoalStatus.STATUS_CANCELING),
            status(5, GoalStatus.STATUS_ABORTED),
        ]
    )
    assert cv.active_goal_ids(msg) == ["01" * 16, "02" * 16]
    assert cv.active_goal_ids(GoalStatusArray()) == []


@pytest.mark.parametrize("frame_id", ["", "m", "map", "mapp", "map_frame_x", "a" * 13])
def test_raw_pose_parser_matches_rclpy_serialization(frame_id):
    import math as _m

    from geometry_msgs.msg import PoseWithCovarianceStamped
    from rclpy.serialization import serialize_message

    from robot_harness.nodes.conversions import parse_pose_and_covariance, quaternion_from_yaw

    msg = PoseWithCovarianceStamped()
    msg.header.frame_id = frame_id
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_123, 456_000_000
    msg.pose.pose.position.x, msg.pose.pose.position.y, msg.pose.pose.position.z = 12.25, -4.5, 0.3
    msg.pose.pose.orientation = quaternion_from_yaw(1.2)
    msg.pose.covariance = [float(i) for i in range(36)]
    stamp, pose, cov = parse_pose_and_covariance(serialize_message(msg))
    assert (cov.var_x, cov.var_y, cov.var_yaw) == (0.0, 7.0, 35.0)  # row-major 6x6: x, y, yaw on the diagonal
    assert stamp == pytest.approx(1_700_000_123.456)
    assert (pose.x, pose.y) == (12.25, -4.5)
    assert pose.yaw == pytest.approx(1.2) and _m.isfinite(pose.yaw)


@pytest.mark.parametrize("frame_id, child", [("odom", "base_link"), ("", ""), ("od", "b"), ("odom_x", "base_footprint")])
def test_raw_odometry_parser_matches_rclpy_serialization(frame_id, child):
    from nav_msgs.msg import Odometry
    from rclpy.serialization import serialize_message

    from robot_harness.nodes.conversions import parse_odometry_twist

    msg = Odometry()
    msg.header.frame_id, msg.child_frame_id = frame_id, child
    msg.header.stamp.sec, msg.header.stamp.nanosec = 42, 500_000_000
    msg.pose.pose.position.x = 99.0
    msg.pose.covariance = [1.0] * 36
    msg.twist.twist.linear.x, msg.twist.twist.linear.y, msg.twist.twist.angular.z = 0.7, -0.1, 0.25
    msg.twist.covariance = [2.0] * 36
    stamp, v = parse_odometry_twist(serialize_message(msg))
    assert stamp == pytest.approx(42.5)
    assert (v.vx, v.vy, v.wz) == (0.7, -0.1, 0.25)


def test_mission_goal_to_mission_spec_and_back_keeps_every_field_and_the_order():
    from diagnostic_msgs.msg import KeyValue

    from robot_harness.action import Mission
    from robot_harness.core.mission_spec import MissionSpec
    from robot_harness.nodes.conversions import mission_spec_to_goal, msg_to_mission_spec

    goal = Mission.Goal(goal="Patrol.", contract="", template_name="patrol", mission_id="m-1",
                        template_params=[KeyValue(key="waypoints", value="lab,kitchen"),
                                         KeyValue(key="waypoints", value="lobby")])
    spec = msg_to_mission_spec(goal)
    assert spec == MissionSpec(goal="Patrol.", template="patrol",
                               template_params=(("waypoints", "lab,kitchen"), ("waypoints", "lobby")))
    back = mission_spec_to_goal(spec, Mission.Goal(mission_id="m-2"))
    assert back.mission_id == "m-2" and back.template_name == "patrol"  # only the spec's fields are set
    assert [(kv.key, kv.value) for kv in back.template_params] == list(spec.template_params)
    assert msg_to_mission_spec(Mission.Goal(goal="Go.")).source == "goal"
