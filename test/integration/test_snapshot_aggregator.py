"""The snapshot aggregator against a scripted robot over loopback DDS.

Each test runs in its own rclpy context with one executor spinning in a
background thread; lifecycle transitions run as executor tasks so they never
race the callbacks they reconfigure.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

rclpy = pytest.importorskip("rclpy")

from action_msgs.msg import GoalInfo, GoalStatus, GoalStatusArray  # noqa: E402
from geometry_msgs.msg import PoseWithCovarianceStamped  # noqa: E402
from nav2_msgs.action import NavigateToPose  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import (  # noqa: E402
    DurabilityPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_action_status_default,
)
from sensor_msgs.msg import BatteryState  # noqa: E402
from unique_identifier_msgs.msg import UUID  # noqa: E402

from robot_harness.core.records import Availability, ControllerState, Pose2D  # noqa: E402
from robot_harness.msg import WorldSnapshot as WorldSnapshotMsg  # noqa: E402
from robot_harness.nodes.conversions import (  # noqa: E402
    msg_to_snapshot,
    pose2d_to_pose_msg,
)
from robot_harness.nodes.snapshot_aggregator import SnapshotAggregator  # noqa: E402
from robot_harness.srv import CaptureSnapshot  # noqa: E402

GOAL = bytes(range(16))
GOAL_HEX = GOAL.hex()
TIMEOUT = 10.0


def wait_for(predicate: Callable[[], Any], timeout: float = TIMEOUT, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")


class FakeRobot(Node):
    """Publishes what amcl, the odometry, the battery and Nav2's action server would."""

    def __init__(self, *, context: Any, nav_status: bool = True) -> None:
        super().__init__("fake_robot", context=context)
        self.pose = Pose2D(x=1.5, y=-0.5, yaw=0.3)
        self.publish_pose = True
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.pose_pub = self.create_publisher(PoseWithCovarianceStamped, "/amcl_pose", latched)
        self.odom_pub = self.create_publisher(Odometry, "/odom", 10)
        self.battery_pub = self.create_publisher(BatteryState, "/battery_state", 10)
        self.status_pub = self.create_publisher(
            GoalStatusArray, "navigate_to_pose/_action/status", qos_profile_action_status_default
        )
        self.feedback_pub = self.create_publisher(
            NavigateToPose.Impl.FeedbackMessage, "navigate_to_pose/_action/feedback", 10
        )
        if nav_status:
            status = GoalStatus(goal_info=GoalInfo(goal_id=UUID(uuid=list(GOAL))))
            status.status = GoalStatus.STATUS_EXECUTING
            # Published once, before the aggregator exists: transient-local delivery.
            self.status_pub.publish(GoalStatusArray(status_list=[status]))
        self.timer = self.create_timer(0.05, self._tick)

    def _tick(self) -> None:
        stamp = self.get_clock().now().to_msg()
        if self.publish_pose:
            msg = PoseWithCovarianceStamped()
            msg.header.stamp = stamp
            msg.header.frame_id = "map"
            msg.pose.pose = pose2d_to_pose_msg(self.pose)
            self.pose_pub.publish(msg)
        odom = Odometry()
        odom.header.stamp = stamp
        odom.twist.twist.linear.x = 0.25
        self.odom_pub.publish(odom)
        battery = BatteryState()
        battery.header.stamp = stamp
        battery.percentage = 0.8
        self.battery_pub.publish(battery)
        fb = NavigateToPose.Impl.FeedbackMessage()
        fb.goal_id = UUID(uuid=list(GOAL))
        fb.feedback.current_pose.header.stamp = stamp
        fb.feedback.distance_remaining = 2.5
        self.feedback_pub.publish(fb)


class Ros:
    def __init__(self) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.nodes: list[Node] = []
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def add(self, node: Node) -> Any:
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def run(self, fn: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
        """Run ``fn`` on the executor thread and return its result."""
        task = self.executor.create_task(fn)
        self.executor.wake()
        wait_for(task.done, timeout, f"executor task {fn}")
        return task.result()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        self.thread.join(timeout=5.0)
        for node in self.nodes:
            node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture
def ros():
    r = Ros()
    try:
        yield r
    finally:
        r.close()


def make_aggregator(ros: Ros, **params: Any) -> SnapshotAggregator:
    overrides = [Parameter(k, value=v) for k, v in params.items()]
    return ros.add(SnapshotAggregator(context=ros.context, parameter_overrides=overrides))


def capture(client: Any, reason: str = "on_request", mission_id: str = "") -> CaptureSnapshot.Response:
    future = client.call_async(CaptureSnapshot.Request(reason=reason, mission_id=mission_id))
    wait_for(future.done, 5.0, "capture response")
    return future.result()


def test_capture_tracks_freshness_and_lifecycle(ros):
    robot = ros.add(FakeRobot(context=ros.context))
    agg = make_aggregator(ros, snapshot_rate_hz=5.0)
    received: list[WorldSnapshotMsg] = []
    robot.create_subscription(
        WorldSnapshotMsg, "/snapshot_aggregator/snapshot", received.append, 10
    )
    client = robot.create_client(CaptureSnapshot, "/snapshot_aggregator/capture")

    assert not client.wait_for_service(timeout_sec=0.5)  # unconfigured: no service yet
    assert ros.run(agg.trigger_configure) == TransitionCallbackReturn.SUCCESS
    assert client.wait_for_service(timeout_sec=TIMEOUT)

    refused = capture(client)
    assert refused.ok is False and "not active" in refused.error

    assert ros.run(agg.trigger_activate) == TransitionCallbackReturn.SUCCESS

    def fresh_capture():
        resp = capture(client, reason="before_model_turn", mission_id="mission-7")
        snap = msg_to_snapshot(resp.snapshot)
        ready = (
            snap.pose_meta.fresh
            and snap.velocity_meta.fresh
            and snap.battery_meta.fresh
            and snap.controller_state is ControllerState.ACTIVE
            and snap.distance_remaining is not None
        )
        return (resp, snap) if ready else None

    resp, snap = wait_for(fresh_capture, what="a capture with every field available")
    assert resp.ok is True and resp.error == ""
    assert snap.snapshot_id.startswith("snap-") and len(snap.snapshot_id) > len("snap-")
    assert snap.reason == "before_model_turn" and snap.mission_id == "mission-7"
    assert snap.pose.x == pytest.approx(1.5) and snap.pose.y == pytest.approx(-0.5)
    assert snap.pose.yaw == pytest.approx(0.3, abs=1e-9)
    assert 0.0 <= snap.pose_meta.age_s <= 0.5
    assert snap.pose_meta.source == "/amcl_pose"
    assert snap.velocity.vx == pytest.approx(0.25)
    assert snap.battery == pytest.approx(0.8, abs=1e-6)
    assert snap.nav_goal_id == GOAL_HEX
    assert snap.distance_remaining == pytest.approx(2.5)
    assert snap.navigation_meta.source.endswith("navigate_to_pose/_action/status")
    assert snap.pose_jumps == 0

    wait_for(lambda: any(m.reason == "periodic" for m in received), what="a periodic snapshot")

    # Pose stops; everything else keeps flowing. Only the pose goes stale.
    robot.publish_pose = False
    stopped = time.monotonic()

    def stale_capture():
        s = msg_to_snapshot(capture(client).snapshot)
        return s if s.pose_meta.availability is Availability.STALE else None

    stale = wait_for(stale_capture, 5.0, "the pose to go stale")
    assert time.monotonic() - stopped >= 0.3
    assert stale.pose_meta.age_s > 0.5
    assert stale.pose is not None and stale.pose.x == pytest.approx(1.5)
    assert stale.velocity_meta.fresh and stale.battery_meta.fresh

    # A pose far beyond what the robot could drive in the gap is a jump.
    robot.pose = Pose2D(x=40.0, y=-0.5, yaw=0.3)
    robot.publish_pose = True
    # (An earlier salient snapshot may exist: the first status, if it arrived
    # after activation, is a controller_active event.)
    salient = wait_for(
        lambda: [m for m in received if m.reason == "salient_event" and m.pose_jumps > 0],
        5.0,
        "a salient snapshot for the jump",
    )
    jumped = msg_to_snapshot(salient[0])
    assert jumped.pose_jumps == 1 and jumped.last_pose_jump_at is not None
    assert jumped.pose.x == pytest.approx(40.0)

    assert ros.run(agg.trigger_deactivate) == TransitionCallbackReturn.SUCCESS
    refused = capture(client)
    assert refused.ok is False and "not active" in refused.error

    assert ros.run(agg.trigger_cleanup) == TransitionCallbackReturn.SUCCESS
    wait_for(lambda: robot.count_subscribers("/amcl_pose") == 0, 5.0, "subscriptions to go")
    wait_for(lambda: not client.service_is_ready(), 5.0, "the capture service to go")


def test_idle_navigator_is_seen_and_its_loss_makes_controller_unknown(ros):
    robot = ros.add(FakeRobot(context=ros.context, nav_status=False))
    agg = make_aggregator(ros, navigation_max_age_s=1.0)
    client = robot.create_client(CaptureSnapshot, "/snapshot_aggregator/capture")
    assert ros.run(agg.trigger_configure) == TransitionCallbackReturn.SUCCESS
    assert ros.run(agg.trigger_activate) == TransitionCallbackReturn.SUCCESS
    assert client.wait_for_service(timeout_sec=TIMEOUT)

    def controller():
        return msg_to_snapshot(capture(client).snapshot).controller_state

    # A status publisher with no goal ever sent: an idle navigator.
    wait_for(lambda: controller() is ControllerState.IDLE, what="controller idle")
    snap = msg_to_snapshot(capture(client).snapshot)
    assert snap.nav_goal_id == "" and snap.distance_remaining is None

    # The navigator disappears: its status can no longer be vouched for.
    ros.run(lambda: robot.destroy_publisher(robot.status_pub))
    wait_for(lambda: controller() is ControllerState.UNKNOWN, what="controller unknown")
    snap = msg_to_snapshot(capture(client).snapshot)
    assert snap.navigation_meta.availability is Availability.STALE


def test_invalid_parameters_fail_configure(ros):
    agg = make_aggregator(ros, pose_max_age_s=-1.0)
    assert ros.run(agg.trigger_configure) == TransitionCallbackReturn.FAILURE
    assert agg.count_subscribers("/amcl_pose") == 0
    assert math.isclose(agg.get_parameter("pose_max_age_s").value, -1.0)


def test_capture_answers_while_odometry_floods_a_multithreaded_executor():
    """In the one-process bring-up the aggregator shares a multi-threaded executor with the robot.
    Odometry flooding in faster than the aggregator drains it must not starve the capture service
    (in the node's default group it did: every wait found a message ready first)."""
    from robot_harness.nodes.executors import MultiThreadedExecutor

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    agg = SnapshotAggregator(context=ctx)
    flood = Node("odom_flood", context=ctx)
    asker = Node("capture_asker", context=ctx)
    pub = flood.create_publisher(Odometry, "/odom", 100)
    executor = MultiThreadedExecutor(num_threads=4, context=ctx)
    for n in (agg, flood, asker):
        executor.add_node(n)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    stop = threading.Event()

    def flood_odom() -> None:
        msg = Odometry()
        while not stop.is_set():
            for _ in range(200):
                pub.publish(msg)
            time.sleep(0.001)

    flooder = threading.Thread(target=flood_odom, daemon=True)
    try:
        assert agg.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert agg.trigger_activate() == TransitionCallbackReturn.SUCCESS
        cli = asker.create_client(CaptureSnapshot, "/snapshot_aggregator/capture")
        assert cli.wait_for_service(timeout_sec=5.0)
        flooder.start()
        time.sleep(1.0)  # the odometry backlog is there before we ask
        answered = 0
        for _ in range(3):
            fut = cli.call_async(CaptureSnapshot.Request(reason="starvation_probe"))
            deadline = time.monotonic() + 3.0
            while not fut.done() and time.monotonic() < deadline:
                time.sleep(0.01)
            answered += bool(fut.done() and fut.result().ok)
        assert answered == 3, f"{answered}/3 captures answered within 3 s while odometry floods"
    finally:
        stop.set()
        if flooder.is_alive():
            flooder.join(timeout=2.0)
        # The executor first (its spin returns), then the nodes, then the context: shutting the
        # context down under a spinning executor raises in its thread.
        executor.shutdown(timeout_sec=5.0)
        thread.join(timeout=5.0)
        for n in (agg, flood, asker):
            n.destroy_node()
        rclpy.try_shutdown(context=ctx)


def test_the_supervisors_snapshot_port_answers_through_a_renewed_client():
    """RosSnapshotPort.renew(): the supervisor's last resort when a client's requests keep going
    unanswered at start-up; the new client must work on the same (spinning) node at once."""
    from robot_harness.nodes.executors import BackgroundSpinner
    from robot_harness.nodes.ros_ports import RosSnapshotPort

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    agg = SnapshotAggregator(context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(agg)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    spinner = BackgroundSpinner(context=ctx, name="port_probe").start()
    port = RosSnapshotPort(spinner.node, "/snapshot_aggregator/capture", timeout_s=3.0)
    try:
        assert agg.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert agg.trigger_activate() == TransitionCallbackReturn.SUCCESS
        first = port.capture(reason="before", mission_id="")
        port.renew()
        second = port.capture(reason="after", mission_id="")
        assert first.snapshot_id != second.snapshot_id and second.reason == "after"
    finally:
        spinner.stop()
        port.destroy(spinner.node)
        spinner.destroy()
        executor.shutdown(timeout_sec=5.0)  # before the context, as above
        thread.join(timeout=5.0)
        agg.destroy_node()
        rclpy.try_shutdown(context=ctx)
