"""sim_robot over real (loopback) DDS, seen from a client the way Nav2 users see it.

Each test gets its own rclpy Context, executor and SimRobot, so tests do not
share participants. Speeds are high and distances short: each test is a few
seconds, and every wait is bounded.
"""
from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import rclpy
from action_msgs.msg import GoalStatus as RosGoalStatus
from action_msgs.msg import GoalStatusArray
from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped
from lifecycle_msgs.srv import GetState
from nav2_msgs.action import ComputePathToPose, NavigateToPose
from nav2_msgs.srv import GetCosts
from nav_msgs.msg import Odometry
from rclpy.action.client import ClientGoalHandle
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_action_status_default
from rclpy.task import Future
from std_msgs.msg import String
from unique_identifier_msgs.msg import UUID

from robot_harness.core.clock import IdGenerator, SystemClock
from robot_harness.core.errors import ScenarioError
from robot_harness.core.records import Pose2D
from robot_harness.nodes._util import ActionClient  # rclpy's, safe to create under a spinning executor
from robot_harness.nodes.executors import MultiThreadedExecutor
from robot_harness.nodes.ros_ports import RosRobotIO
from robot_harness.nodes.sim_robot import (
    EXTERNAL_GOAL_TAG,
    GET_COSTS_SERVICE,
    MIN_EXECUTOR_THREADS,
    OUTBOX_ID,
    SPEAKER_ID,
    DieMode,
    SimRobot,
)
from robot_harness.sim import SimConfig
from robot_harness.sim.world import (
    COST_FREE,
    COST_INSCRIBED,
    COST_LETHAL,
    DEFAULT_POSE_VARIANCE,
    EXTERNAL_GOAL_NOTE,
    PLAN_FAILURE_ABORT_S,
)

from ._spin import spin_in_thread

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")
FAST = 3.0
"""m/s: short goals finish well under a second."""


def wait_until(pred: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.01)


def wait_future(fut: Future, timeout_s: float, what: str) -> Any:
    wait_until(fut.done, timeout_s, what)
    return fut.result()


def wait_quiet(count: Callable[[], Any], quiet_s: float, timeout_s: float, what: str,
               live: Callable[[], int] | None = None) -> Any:
    """Wait until ``count()`` has held still for ``quiet_s``, so what was in flight has landed; return it.

    ``live`` (a count of some stream that must keep arriving meanwhile) tells a quiet topic from a
    starved executor: the window only counts once that stream grew during it. A topic that keeps
    publishing never settles, and that fails here.
    """
    deadline = time.monotonic() + timeout_s
    last, since = count(), time.monotonic()
    live_at = live() if live is not None else 0
    while True:
        time.sleep(0.01)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
            live_at = live() if live is not None else 0
        elif time.monotonic() - since >= quiet_s and (live is None or live() > live_at):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still arriving (or nothing else live) after {timeout_s}s; last {last}")


def nav_goal(x: float, y: float, yaw: float = 0.0) -> NavigateToPose.Goal:
    msg = NavigateToPose.Goal()
    msg.pose.header.frame_id = "map"
    msg.pose.pose.position.x = x
    msg.pose.pose.position.y = y
    msg.pose.pose.orientation.z = math.sin(yaw / 2.0)
    msg.pose.pose.orientation.w = math.cos(yaw / 2.0)
    return msg


def new_goal_id() -> UUID:
    return UUID(uuid=list(uuid.uuid4().bytes))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@dataclass
class Rig:
    ctx: rclpy.Context
    robot: SimRobot
    client: Node
    executor: MultiThreadedExecutor
    nav: ActionClient
    thread: threading.Thread
    feedback: list[NavigateToPose.Feedback] = field(default_factory=list)
    clients: dict[str, ActionClient] = field(default_factory=dict)

    def action_client(self, action: Any, name: str) -> ActionClient:
        """One client per action on the client node, kept until the teardown destroys the node: destroying
        one while the executor spins can crash it (ros2/rclpy#1385)."""
        if name not in self.clients:
            self.clients[name] = ActionClient(self.client, action, name)
        return self.clients[name]

    def goal(self, x: float, y: float, yaw: float = 0.0) -> ClientGoalHandle:
        """Send a goal and return its handle once the server answered."""
        assert self.nav.wait_for_server(timeout_sec=5.0), "navigate_to_pose server not found"
        fut = self.nav.send_goal_async(nav_goal(x, y, yaw), feedback_callback=lambda m: self.feedback.append(m.feedback))
        return wait_future(fut, 5.0, "goal response")

    def collect(self, msg_type: type[T], topic: str, qos: QoSProfile | int = 10) -> list[T]:
        """Subscribe and return the (growing) list of received messages."""
        got: list[T] = []
        self.client.create_subscription(msg_type, topic, got.append, qos)
        return got


@pytest.fixture
def make_rig() -> Iterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def build(config: SimConfig, **robot_kw: Any) -> Rig:
        ctx = rclpy.Context()
        rclpy.init(context=ctx)
        robot = SimRobot(config=config, context=ctx, **robot_kw)
        client = Node("sim_robot_test_client", context=ctx)
        executor = MultiThreadedExecutor(num_threads=MIN_EXECUTOR_THREADS + 2, context=ctx)
        robot.add_to_executor(executor)
        executor.add_node(client)
        nav = ActionClient(client, NavigateToPose, "navigate_to_pose")

        thread = spin_in_thread(executor, ctx)  # until the teardown shuts the context down
        rig = Rig(ctx, robot, client, executor, nav, thread)
        rigs.append(rig)
        return rig

    yield build
    # Order matters with rclpy: end goal callbacks, stop spinning via the
    # context, and only then shut the executor and destroy entities (doing it
    # the other way round races rclpy's own teardown).
    for rig in rigs:
        assert rig.robot.stop(), "the tick thread or an execute callback did not stop in time"
        rclpy.try_shutdown(context=rig.ctx)
        rig.thread.join(timeout=5.0)
        assert not rig.thread.is_alive(), "executor thread did not stop"
        rig.executor.shutdown(timeout_sec=2.0)
        rig.robot.destroy()
        rig.nav.destroy()
        rig.client.destroy_node()
        rig.ctx.destroy()
    rigs.clear()
    # rclpy objects sit in reference cycles; without a collection each test's
    # DDS participant (about ten threads) lives on and loads later tests.
    gc.collect()


def fast(**kw: Any) -> SimConfig:
    return SimConfig.from_data({"speed": FAST, "yaw_rate": 3.0, **kw})


# --------------------------------------------------------------------------- tests


def test_clean_goal_succeeds_with_feedback_and_truth_at_goal(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast())
    truth = rig.collect(PoseStamped, "/sim_robot/ground_truth")
    handle = rig.goal(1.5, 0.5, 0.5)
    assert handle.accepted
    res = wait_future(handle.get_result_async(), 5.0, "result")
    assert res.status == RosGoalStatus.STATUS_SUCCEEDED
    assert res.result.error_code == NavigateToPose.Result.NONE
    assert len(rig.feedback) >= 3
    first, last = rig.feedback[0], rig.feedback[-1]
    assert first.distance_remaining > last.distance_remaining
    assert first.current_pose.header.frame_id == "map"
    seen = len(truth)
    wait_until(lambda: len(truth) > seen + 1, 2.0, "ground truth after the result")
    p = truth[-1].pose.position
    assert math.hypot(p.x - 1.5, p.y - 0.5) <= 0.05
    log_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    log = rig.collect(String, "/sim_robot/goal_log", log_qos)
    wait_until(lambda: len(log) >= 3, 3.0, "late-joining goal log (transient_local)")
    events = [json.loads(m.data) for m in log]
    assert [e["event"] for e in events] == ["received", "accepted", "succeeded"]
    assert events[-1]["goal_index"] == 1 and events[-1]["target"]["x"] == 1.5
    assert events[-1]["stamp"] > 1e9


def test_reject_fault_gives_rejected_goal(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(faults=[{"kind": "reject", "on_goal": 1}]))
    handle = rig.goal(1.0, 0.0)
    assert not handle.accepted
    assert rig.goal(0.3, 0.0).accepted, "only the first goal is rejected"
    assert [e.event.value for e in rig.robot.goal_log][:2] == ["received", "rejected"]


def test_early_success_succeeds_far_from_goal(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(faults=[{"kind": "early_success", "on_goal": 1, "after_s": 0.2}]))
    handle = rig.goal(5.0, 0.0)
    res = wait_future(handle.get_result_async(), 5.0, "result")
    assert res.status == RosGoalStatus.STATUS_SUCCEEDED
    truth = rig.robot.world.true_pose
    assert math.hypot(truth.x - 5.0, truth.y) > 3.0


def test_no_feedback_goal_still_succeeds(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(faults=[{"kind": "no_feedback", "on_goal": 1}]))
    handle = rig.goal(1.2, 0.0)
    res = wait_future(handle.get_result_async(), 5.0, "result")
    assert res.status == RosGoalStatus.STATUS_SUCCEEDED
    assert rig.feedback == []


def test_cancel_stops_the_goal(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(faults=[{"kind": "stall", "on_goal": 1, "after_s": 0.1}]))
    handle = rig.goal(5.0, 0.0)
    wait_until(lambda: len(rig.feedback) >= 3, 3.0, "feedback while stalled")
    assert rig.feedback[-1].distance_remaining == pytest.approx(rig.feedback[-2].distance_remaining)
    wait_future(handle.cancel_goal_async(), 3.0, "cancel response")
    res = wait_future(handle.get_result_async(), 3.0, "result")
    assert res.status == RosGoalStatus.STATUS_CANCELED


def test_new_goal_preempts_old_one(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast())
    first = rig.goal(8.0, 0.0)
    wait_until(lambda: len(rig.feedback) >= 1, 3.0, "feedback on the first goal")
    second = rig.goal(0.0, 0.5)
    r1 = wait_future(first.get_result_async(), 3.0, "first result")
    assert r1.status == RosGoalStatus.STATUS_ABORTED
    assert r1.result.error_code != NavigateToPose.Result.NONE and "preempted" in r1.result.error_msg
    r2 = wait_future(second.get_result_async(), 8.0, "second result")
    assert r2.status == RosGoalStatus.STATUS_SUCCEEDED


def test_pose_dropout_silences_amcl_pose_while_the_robot_walks_on(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(speed=1.0, faults=[{"kind": "pose_dropout", "on_goal": 1, "after_s": 0.3}]))
    poses = rig.collect(PoseWithCovarianceStamped, "/amcl_pose")
    odom = rig.collect(Odometry, "/odom")
    wait_until(lambda: len(poses) >= 3, 5.0, "/amcl_pose before the goal")
    handle = rig.goal(2.0, 0.0)
    result = handle.get_result_async()
    wait_until(lambda: rig.robot.world.pose_silent, 3.0, "the pose dropout")
    n_poses = wait_quiet(lambda: len(poses), 0.3, 5.0, "/amcl_pose settling after the dropout",
                         live=lambda: len(odom))
    n_odom, n_feedback = len(odom), len(rig.feedback)
    assert wait_future(result, 6.0, "result").status == RosGoalStatus.STATUS_SUCCEEDED, "the goal carries on"
    time.sleep(0.3)
    assert len(poses) == n_poses, "no pose is published once the dropout holds"
    assert len(odom) > n_odom + 10 and len(rig.feedback) > n_feedback, "odometry and feedback carry on"
    last = poses[-1].pose.pose.position
    assert last.x < 1.0 and math.hypot(rig.robot.world.true_pose.x - 2.0, rig.robot.world.true_pose.y) <= 0.05, \
        "the last pose is from before the dropout; the robot is truly at the goal"


def test_external_goal_moves_the_robot_and_aborts_the_clients_goal_and_shows_in_the_status(
    make_rig: Callable[..., Rig],
) -> None:
    # Late enough that discovery and the first goal beat it on a loaded machine; 8 m at 1 m/s still runs then.
    at_s = 5.0
    rig = make_rig(fast(speed=1.0, faults=[{"kind": "external_goal", "at_s": at_s, "dx": 0.0, "dy": -1.5}]))
    statuses = rig.collect(GoalStatusArray, "navigate_to_pose/_action/status", qos_profile_action_status_default)
    mine = rig.goal(8.0, 0.0)
    accepted_t = rig.robot.world.t
    assert mine.accepted and accepted_t < at_s, \
        f"the client's goal runs before the other client's comes (accepted at sim t={accepted_t:.2f})"
    res = wait_future(mine.get_result_async(), at_s + 5.0, "the client's result")
    assert res.status == RosGoalStatus.STATUS_ABORTED and "preempted by goal 2" in res.result.error_msg
    assert rig.robot.world.foreign_goals == {2}
    at_fire = rig.robot.world.goal(2).target
    assert at_fire.y == pytest.approx(-1.5, abs=1e-9) and at_fire.x > 0.5
    mine_id = bytes(mine.goal_id.uuid)

    def other(status: int) -> bool:
        return any(bytes(g.goal_info.goal_id.uuid) != mine_id and g.status == status
                   for m in statuses for g in m.status_list)

    wait_until(lambda: other(RosGoalStatus.STATUS_EXECUTING), 3.0, "the other client's goal in the status")
    wait_until(lambda: other(RosGoalStatus.STATUS_SUCCEEDED), 6.0, "the other client's goal to finish")
    assert rig.robot.world.true_pose.distance_to(at_fire) <= 0.05, "the robot drove off to the other goal"
    received = [e for e in rig.robot.goal_log if e.event.value == "received"]
    assert [(e.goal_index, e.reason) for e in received] == [(1, ""), (2, EXTERNAL_GOAL_NOTE)]
    assert rig.robot.world.goals_received == 2, "binding the ROS goal submitted nothing new"
    forged = wait_future(rig.nav.send_goal_async(_tagged_goal(f"{EXTERNAL_GOAL_TAG}2")), 3.0, "forged answer")
    assert not forged.accepted, "an external goal binds once, and only one the world sent"


def _tagged_goal(tag: str) -> NavigateToPose.Goal:
    goal = nav_goal(0.0, 0.0)
    goal.behavior_tree = tag
    return goal


def test_bt_navigator_reports_active(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast())
    cli = rig.client.create_client(GetState, "/bt_navigator/get_state")
    assert cli.wait_for_service(timeout_sec=5.0)
    res = wait_future(cli.call_async(GetState.Request()), 3.0, "get_state")
    assert res.current_state.id == 3 and res.current_state.label == "active"


def test_a_namespace_moves_every_node_and_every_name_under_it(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(), namespace="/robot1")
    assert sorted(n.get_fully_qualified_name() for n in rig.robot.nodes) == [
        "/robot1/amcl", "/robot1/behavior_server", "/robot1/bt_navigator", "/robot1/global_costmap/global_costmap",
        "/robot1/local_costmap/local_costmap", "/robot1/planner_server", "/robot1/sim_robot",
        "/robot1/waypoint_follower"]
    moved = {"amcl_pose", "odom", "battery_state", "camera/image_raw", "sim_robot/ground_truth", "sim_robot/goal_log",
             "speech/say", "speech/say/ack", "robot_harness/messages", "robot_harness/messages/ack", "initialpose",
             "navigate_to_pose/_action/status"}

    def topics() -> set[str]:
        return {name for name, _types in rig.client.get_topic_names_and_types()}

    wait_until(lambda: {f"/robot1/{t}" for t in moved} <= topics(), 5.0, "every sim topic under /robot1")
    # (The rig's own client is at the root: its navigate_to_pose endpoints are there.)
    assert not {f"/{t}" for t in moved if not t.startswith("navigate_to_pose")} & topics(), sorted(topics())
    poses = rig.collect(PoseWithCovarianceStamped, "/robot1/amcl_pose", QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    wait_until(lambda: len(poses) >= 1, 5.0, "/robot1/amcl_pose")
    cli = rig.client.create_client(GetState, "/robot1/amcl/get_state")
    assert cli.wait_for_service(timeout_sec=5.0)
    assert wait_future(cli.call_async(GetState.Request()), 3.0, "get_state").current_state.label == "active"
    services = {"/robot1/compute_path_to_pose/_action/send_goal", f"/robot1/global_costmap/{GET_COSTS_SERVICE}",
                "/robot1/planner_server/get_state", "/robot1/global_costmap/global_costmap/get_state"}
    wait_until(lambda: services <= {n for n, _ in rig.client.get_service_names_and_types()}, 5.0,
               "the planner's action and the costmap's GetCosts under /robot1")


def test_amcl_relocalizes_on_initialpose_in_map_only_and_holds_one_until_active(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast())
    pub = rig.client.create_publisher(PoseWithCovarianceStamped, "/initialpose", 10)
    wait_until(lambda: pub.get_subscription_count() >= 1, 5.0, "amcl subscribing /initialpose")

    def initial(x: float, y: float, yaw: float, frame: str = "map") -> None:
        msg = PoseWithCovarianceStamped()
        msg.header.frame_id = frame
        msg.pose.pose = nav_goal(x, y, yaw).pose.pose
        pub.publish(msg)

    def estimate() -> tuple[float, float, float]:
        with rig.robot._lock:
            p = rig.robot.world.localized_pose
        return p.x, p.y, p.yaw

    # AMCL strips the leading slash. Resent until heard, as BasicNavigator does: a volatile sample can
    # still beat the subscriber's side of discovery.
    deadline = time.monotonic() + 5.0
    while estimate() != pytest.approx((1.0, -1.0, 0.5)):
        assert time.monotonic() < deadline, f"the relocalized estimate never came: {estimate()}"
        initial(1.0, -1.0, 0.5, frame="/map")
        time.sleep(0.3)
    initial(2.0, 1.0, 0.0, frame="odom")  # ignored with a warning, as AMCL ignores a non-global frame
    time.sleep(0.5)
    assert estimate() == pytest.approx((1.0, -1.0, 0.5))
    assert rig.robot.world.true_pose.x == 0.0 and rig.robot.world.true_pose.y == 0.0, "only the estimate moves"
    assert rig.robot.goal_log == [], "a relocalization is no goal event"
    # Received while inactive: kept, applied on activation (AMCL's init_pose_received_on_inactive).
    rig.robot.amcl.trigger_deactivate()
    initial(-3.0, 0.0, 0.0, frame="")
    wait_until(lambda: rig.robot.amcl._pending is not None, 3.0, "amcl to hold the initial pose")
    assert estimate() == pytest.approx((1.0, -1.0, 0.5))
    rig.robot.amcl.trigger_activate()
    assert estimate() == pytest.approx((-3.0, 0.0, 0.0))


def test_goals_are_rejected_unless_active(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(), autostart=False)
    rig.robot.navigator.trigger_configure()
    handle = rig.goal(1.0, 0.0)
    assert not handle.accepted
    assert rig.robot.world.goals_received == 0
    rig.robot.navigator.trigger_activate()
    assert rig.goal(0.2, 0.0).accepted


def test_amcl_pose_arrives_at_pose_rate(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(pose_rate_hz=20.0))
    poses = rig.collect(PoseWithCovarianceStamped, "/amcl_pose")
    wait_until(lambda: len(poses) >= 1, 5.0, "first /amcl_pose")
    time.sleep(0.5)  # past discovery and start-up work
    start = len(poses)
    time.sleep(2.0)
    window = poses[start:]
    n = len(window)
    # CI VMs can lose much of their CPU to the host for seconds at a time, so
    # the rate is judged by the median stamp spacing (robust to a stall), and the
    # count only has to show a live publisher. Poses leave on the 50 Hz sim tick,
    # so single gaps at 20 Hz alternate 40/60 ms; spans of four slots (200 ms,
    # exactly ten ticks) cancel that quantization.
    assert 10 <= n <= 56, f"{n} poses in 2 s at 20 Hz"
    stamps_w = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in window]
    span = 4
    spacings = sorted((b - a) / span for a, b in zip(stamps_w, stamps_w[span:]))
    median_gap = spacings[len(spacings) // 2]
    assert 0.8 / 20.0 <= median_gap <= 1.25 / 20.0, f"median stamp spacing {median_gap * 1000:.1f} ms at 20 Hz"
    assert poses[-1].header.frame_id == "map"
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in poses[-5:]]
    assert stamps == sorted(stamps) and stamps[-1] > stamps[0]


def test_die_silent_goes_quiet_and_never_answers(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(speed=0.5, faults=[{"kind": "die", "on_goal": 1, "after_s": 0.3}]), die_mode=DieMode.SILENT)
    poses = rig.collect(PoseWithCovarianceStamped, "/amcl_pose")
    handle = rig.goal(5.0, 0.0)
    assert handle.accepted
    result = handle.get_result_async()
    wait_until(lambda: rig.robot.silenced, 3.0, "the die fault")
    count, n_feedback = wait_quiet(lambda: (len(poses), len(rig.feedback)), 0.5, 5.0, "messages sent before the death")
    time.sleep(1.0)
    assert len(poses) == count, "a dead robot publishes nothing"
    assert len(rig.feedback) == n_feedback, "a dead robot sends no feedback"
    assert not result.done(), "a dead robot returns no result"
    assert not rig.goal(1.0, 0.0).accepted
    cancel = wait_future(handle.cancel_goal_async(), 3.0, "cancel response")
    assert not cancel.goals_canceling
    assert not result.done()


def test_lifecycle_cleanup_and_reconfigure_keep_serving(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast())
    nav = rig.robot.navigator
    running = rig.goal(8.0, 0.0)
    nav.trigger_deactivate()
    r = wait_future(running.get_result_async(), 3.0, "result of the goal running at deactivate")
    assert r.status == RosGoalStatus.STATUS_ABORTED and "deactivated" in r.result.error_msg
    nav.trigger_cleanup()
    assert not rig.goal(0.1, 0.0).accepted
    nav.trigger_configure()
    nav.trigger_activate()
    handle = rig.goal(0.3, 0.0)
    assert handle.accepted
    assert wait_future(handle.get_result_async(), 3.0, "result").status == RosGoalStatus.STATUS_SUCCEEDED


def test_parameters_override_the_config() -> None:
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        robot = SimRobot(
            config=SimConfig(speed=1.0),
            context=ctx,
            parameter_overrides=[
                Parameter("speed", value=2),
                Parameter("faults_json", value='[{"kind": "stall", "on_goal": 2}]'),
            ],
        )
        assert robot.config.speed == 2.0 and robot.config.faults[0].kind == "stall"
        assert robot.node.get_parameter("pose_rate_hz").value == 20.0
        robot.destroy()
        with pytest.raises(ScenarioError, match="bogus"):
            SimRobot(context=ctx, parameter_overrides=[Parameter("faults_json", value='[{"kind": "bogus"}]')])
    finally:
        rclpy.try_shutdown(context=ctx)
        ctx.destroy()


def test_a_launch_name_renames_none_of_the_sims_nodes_and_the_namespace_moves_them_all() -> None:
    # What launch_ros gives a process for Node(name='robot_sim', namespace='robot2'): global remaps.
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=["sim_robot", "--ros-args", "-r", "__node:=robot_sim", "-r", "__ns:=/robot2"])
    try:
        robot = SimRobot(config=fast(), context=ctx, autostart=False)
        try:
            assert sorted(n.get_fully_qualified_name() for n in robot.nodes) == [
                "/robot2/amcl", "/robot2/behavior_server", "/robot2/bt_navigator",
                "/robot2/global_costmap/global_costmap", "/robot2/local_costmap/local_costmap",
                "/robot2/planner_server", "/robot2/sim_robot", "/robot2/waypoint_follower"]
            assert robot._truth_pub.topic_name == "/robot2/sim_robot/ground_truth"
        finally:
            robot.destroy()
    finally:
        rclpy.try_shutdown(context=ctx)
        ctx.destroy()


def test_executable_exits_with_code_3_when_die_fires(tmp_path: Path) -> None:
    """The standalone executable (die_mode exit) dies for real, configured through --ros-args.

    ``os._exit`` skips every cleanup, like SIGKILL: truth-log lines must already be on disk.
    """
    faults = json.dumps([{"kind": "die", "at_s": 0.3}])
    truth = tmp_path / "truth.jsonl"
    code = "import sys; from robot_harness.nodes.sim_robot import main; sys.exit(main(sys.argv))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [
            sys.executable, "-c", code, "--ros-args",
            "-p", "speed:=3", "-p", f"faults_json:='{faults}'", "-p", f"truth_log_path:={truth}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "die fault fired" in proc.stderr + proc.stdout
    (started,) = read_jsonl(truth)
    assert started["kind"] == "sim_started" and started["pid"] not in (0, os.getpid())


def test_a_stream_faster_than_the_base_tick_is_not_capped_by_it(make_rig: Callable[..., Rig]) -> None:
    # The tick was a fixed 50 Hz, so a 200 Hz pose stream published at 50 Hz.
    rig = make_rig(fast(pose_rate_hz=200.0))
    assert rig.robot.tick_rate_hz == 200.0
    poses = rig.collect(PoseWithCovarianceStamped, "/amcl_pose", 200)
    wait_until(lambda: len(poses) >= 1, 5.0, "first /amcl_pose")
    time.sleep(0.5)
    start = len(poses)
    time.sleep(1.0)
    window = poses[start:]
    n = len(window)
    # As the 20 Hz test: a CPU-starved tick loop drops ticks, so the rate is judged by the median stamp
    # spacing (a cap at the old 50 Hz tick would give 20 ms), and the count only shows a live publisher.
    assert n >= 20, f"{n} poses in 1 s at 200 Hz"
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in window]
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
    median_gap = gaps[len(gaps) // 2]
    assert 0.8 / 200.0 <= median_gap <= 1.25 / 200.0, \
        f"median stamp spacing {median_gap * 1000:.1f} ms at 200 Hz: the stream is capped below its rate"


def test_ack_delay_holds_the_acceptance_while_the_robot_walks(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(speed=1.0, faults=[{"kind": "ack_delay", "on_goal": 1, "delay_s": 2.0}]))
    poses = rig.collect(PoseWithCovarianceStamped, "/amcl_pose")
    assert rig.nav.wait_for_server(timeout_sec=5.0)
    wait_until(lambda: len(poses) >= 1, 5.0, "first /amcl_pose")
    goal_id = new_goal_id()
    sent = time.monotonic()
    accept = rig.nav.send_goal_async(nav_goal(3.0, 0.0), goal_uuid=goal_id)
    wait_until(lambda: rig.robot.world.goals_received == 1, 2.0, "the world to receive the goal")
    n_poses = len(poses)
    time.sleep(1.0)
    assert not accept.done(), "the acceptance is held back"
    assert rig.robot.world.true_pose.x > 0.3, "the robot walks before the client hears it was accepted"
    assert [e.event.value for e in rig.robot.goal_log] == ["received", "accepted"]
    assert len(poses) >= n_poses + 5, "localization keeps publishing while the goal callback waits"
    handle = wait_future(accept, 3.0, "the delayed acceptance")
    assert handle.accepted and time.monotonic() - sent >= 1.9
    duplicate = wait_future(rig.nav.send_goal_async(nav_goal(0.0, 0.0), goal_uuid=goal_id), 3.0, "duplicate answer")
    assert not duplicate.accepted, "rclpy's ActionServer refuses a goal id it already tracks"
    assert rig.robot.world.goals_received == 1, "the duplicate never reached the world"
    res = wait_future(handle.get_result_async(), 5.0, "result")
    assert res.status == RosGoalStatus.STATUS_SUCCEEDED
    assert math.hypot(rig.robot.world.true_pose.x - 3.0, rig.robot.world.true_pose.y) <= 0.05


def test_goals_and_cancels_are_served_while_an_acceptance_is_held(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(faults=[{"kind": "ack_delay", "on_goal": 1, "delay_s": 2.5}]))
    assert rig.nav.wait_for_server(timeout_sec=5.0)
    held = rig.nav.send_goal_async(nav_goal(8.0, 0.0))
    wait_until(lambda: rig.robot.world.goals_received == 1, 2.0, "the world to receive the held goal")
    second = rig.goal(5.0, 0.0)
    assert second.accepted and not held.done()
    wait_future(second.cancel_goal_async(), 2.0, "cancel response")
    r2 = wait_future(second.get_result_async(), 2.0, "second result")
    assert r2.status == RosGoalStatus.STATUS_CANCELED and not held.done()
    first = wait_future(held, 3.0, "the held acceptance")
    assert first.accepted
    r1 = wait_future(first.get_result_async(), 3.0, "first result")
    assert r1.status == RosGoalStatus.STATUS_ABORTED and "preempted by goal 2" in r1.result.error_msg


def test_truth_log_records_goal_events_and_binds_the_ros_goal_id(make_rig: Callable[..., Rig], tmp_path: Path) -> None:
    path = tmp_path / "truth" / "sim.jsonl"
    path.parent.mkdir()
    path.write_text('{"kind": "from an earlier sim"}\n')
    rig = make_rig(fast(), parameter_overrides=[Parameter("truth_log_path", value=str(path))])
    assert rig.nav.wait_for_server(timeout_sec=5.0)
    goal_id = new_goal_id()
    handle = wait_future(rig.nav.send_goal_async(nav_goal(1.0, 0.0), goal_uuid=goal_id), 5.0, "goal response")
    assert wait_future(handle.get_result_async(), 5.0, "result").status == RosGoalStatus.STATUS_SUCCEEDED
    wait_until(lambda: '"succeeded"' in path.read_text(), 2.0, "the succeeded line")
    lines = read_jsonl(path)
    assert lines[0] == {"kind": "from an earlier sim"}, "the file is appended to, not truncated"
    assert lines[1]["kind"] == "sim_started" and lines[1]["pid"] == os.getpid() and lines[1]["stamp"] > 1e9
    events = [line for line in lines if line["kind"] == "sim_goal_event"]
    assert [e["event"] for e in events] == ["received", "accepted", "succeeded"]
    assert events == [e.model_dump(mode="json") for e in rig.robot.goal_log]
    bound = [line for line in lines if line["kind"] == "sim_goal_bound"]
    assert len(bound) == 1
    assert bound[0]["goal_index"] == 1 and bound[0]["pid"] == os.getpid() and bound[0]["stamp"] > 1e9
    assert bound[0]["goal_id"] == bytes(goal_id.uuid).hex() and len(bound[0]["goal_id"]) == 32
    assert lines.index(events[1]) < lines.index(bound[0]) < lines.index(events[2])


def test_truth_log_write_failures_do_not_stop_the_sim(
    make_rig: Callable[..., Rig], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    rig = make_rig(fast(), truth_log_path=str(tmp_path))  # a directory: every open fails
    handle = rig.goal(0.5, 0.0)
    assert handle.accepted
    assert wait_future(handle.get_result_async(), 5.0, "result").status == RosGoalStatus.STATUS_SUCCEEDED
    assert list(tmp_path.iterdir()) == []
    assert "write failed, line dropped" in capfd.readouterr().err


# --------------------------------------------------------------------------- delivery acknowledgements


def make_io(rig: Rig, tmp_path: Path, **kw: Any) -> RosRobotIO:
    """The harness's robot IO on the test's client node, talking to the sim's speaker and outbox."""
    return RosRobotIO(rig.client, clock=SystemClock(), ids=IdGenerator(None), artifacts_dir=tmp_path,
                      camera_topic="/camera/image_raw", speech_topic="/speech/say",
                      message_topic="/robot_harness/messages", **kw)


def test_speech_and_messages_are_acknowledged_for_the_exact_payload(make_rig: Callable[..., Rig], tmp_path: Path) -> None:
    rig = make_rig(fast())
    io = make_io(rig, tmp_path)
    try:
        said = io.speak(text="hello from the test")
        sent = io.send_message(to="operator", text="at the dock", artifacts=[])
    finally:
        io.destroy()
    digest = hashlib.sha256(b"hello from the test").hexdigest()
    assert "ack_error" not in said and said["text_sha256"] == digest
    assert said["ack"]["by"] == SPEAKER_ID and said["ack"]["sha256"] == digest
    assert said["spoken_at"] - 1.0 <= said["ack"]["at"] <= time.time()
    ack = sent["ack"]
    assert "ack_error" not in sent
    assert (ack["by"], ack["message_id"], ack["to"]) == (OUTBOX_ID, sent["message_id"], "operator")
    assert ack["sha256"] == sent["sha256"] == hashlib.sha256(Path(sent["outbox"]).read_bytes()).hexdigest()
    assert sent["delivered_at"] == ack["at"]
    assert "note" not in said["ack"] and "note" not in ack
    assert [(d["channel"], d["sha256"], d["acked"]) for d in rig.robot.deliveries] == [
        ("speech", digest, True), ("message", sent["sha256"], True)]


def test_no_ack_fault_leaves_deliveries_unconfirmed_and_a_wrong_ack_confirms_nothing(
    make_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    rig = make_rig(fast(faults=[{"kind": "no_ack", "at_s": 0.0}]))
    # A bystander answers every utterance with an ack for some other text.
    wrong = rig.client.create_publisher(String, "/speech/say/ack", 10)
    other = hashlib.sha256(b"something else").hexdigest()
    rig.client.create_subscription(String, "/speech/say", lambda _m: wrong.publish(String(data=json.dumps(
        {"by": "bystander", "at": time.time(), "sha256": other}))), 10)
    acks_seen = rig.collect(String, "/speech/say/ack")
    io = make_io(rig, tmp_path, ack_timeout_s=1.0)
    try:
        started = time.monotonic()
        said = io.speak(text="anyone there?")
        sent = io.send_message(to="operator", text="at the dock", artifacts=[])
        elapsed = time.monotonic() - started
    finally:
        io.destroy()
    assert [json.loads(m.data)["sha256"] for m in acks_seen] == [other], "the bystander's ack did arrive"
    assert "ack" not in said and "no acknowledgement on /speech/say/ack within 1.0 s" in said["ack_error"]
    assert "ack" not in sent and "delivered_at" not in sent and "/robot_harness/messages/ack" in sent["ack_error"]
    assert 1.9 <= elapsed < 4.0, f"each wait is bounded by ack_timeout_s: {elapsed:.2f} s"
    assert [(d["channel"], d["acked"]) for d in rig.robot.deliveries] == [("speech", False), ("message", False)], \
        "the payloads reached the robot; only the acknowledgements were withheld"


def test_without_a_receiver_the_wait_is_bounded_and_says_so(make_rig: Callable[..., Rig], tmp_path: Path) -> None:
    rig = make_rig(fast())
    io = RosRobotIO(rig.client, clock=SystemClock(), ids=IdGenerator(None), artifacts_dir=tmp_path,
                    camera_topic="/camera/image_raw", speech_topic="/nobody/listens",
                    message_topic="/nobody/reads", ack_timeout_s=0.5)
    try:
        said = io.speak(text="hello?")
    finally:
        io.destroy()
    assert "ack" not in said and "nobody subscribes to /nobody/listens" in said["ack_error"]
    assert rig.robot.deliveries == []


def test_claims_completion_puts_a_false_claim_in_acks_and_results_but_not_in_the_truth(
    make_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    claim = "Arrived at the elevator. Task complete."
    rig = make_rig(fast(faults=[{"kind": "claims_completion", "at_s": 0.0, "text": claim},
                                {"kind": "stall", "on_goal": 1, "after_s": 0.1}]))
    io = make_io(rig, tmp_path)
    try:
        sent = io.send_message(to="operator", text="status?", artifacts=[])
    finally:
        io.destroy()
    assert sent["ack"]["note"] == claim and sent["ack"]["sha256"] == sent["sha256"]
    handle = rig.goal(4.0, 2.0)
    wait_until(lambda: len(rig.feedback) >= 3, 3.0, "feedback while stalled")
    wait_future(handle.cancel_goal_async(), 3.0, "cancel response")
    res = wait_future(handle.get_result_async(), 3.0, "result")
    assert res.status == RosGoalStatus.STATUS_CANCELED and res.result.error_msg == claim
    truth = rig.robot.world.true_pose
    assert math.hypot(truth.x - 4.0, truth.y - 2.0) > 3.0, "the robot never got there"
    assert [e.event.value for e in rig.robot.goal_log] == ["received", "accepted", "canceled"]
    assert all(claim not in e.reason for e in rig.robot.goal_log), "the truth log keeps the truth"


# --------------------------------------------------------------------------- the planner, the costmap, readiness faults

WALL = {"x_min": -0.5, "y_min": -4.0, "x_max": 0.5, "y_max": 4.5}
"""A wall across a 10 m map with a gap at the bottom: every crossing detours."""


def mapped(**kw: Any) -> SimConfig:
    return fast(start={"x": -3.0, "y": 0.0, "yaw": 0.0},
                map={"resolution": 0.1, "origin": {"x": -5.0, "y": -5.0}, "width_m": 10.0, "height_m": 10.0,
                     "obstacles": [WALL], "inflation_m": 0.3}, **kw)


def stamped(x: float, y: float, frame: str = "map") -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = frame
    msg.pose.position.x, msg.pose.position.y = x, y
    msg.pose.orientation.w = 1.0
    return msg


def compute_path(rig: Rig, x: float, y: float, *, start: tuple[float, float] | None = None, planner_id: str = "",
                 frame: str = "map") -> tuple[int, ComputePathToPose.Result]:
    """One ComputePathToPose request on ``compute_path_to_pose``: (status, result); status 0 when rejected."""
    client = rig.action_client(ComputePathToPose, "compute_path_to_pose")
    assert client.wait_for_server(timeout_sec=5.0), "compute_path_to_pose server not found"
    goal = ComputePathToPose.Goal(goal=stamped(x, y, frame), planner_id=planner_id, use_start=start is not None)
    if start is not None:
        goal.start = stamped(*start)
    handle = wait_future(client.send_goal_async(goal), 5.0, "planner goal response")
    if not handle.accepted:
        return 0, ComputePathToPose.Result()
    res = wait_future(handle.get_result_async(), 5.0, "planner result")
    return res.status, res.result


def path_length(path: Any) -> float:
    pts = [(p.pose.position.x, p.pose.position.y) for p in path.poses]
    return sum(math.dist(a, b) for a, b in zip(pts, pts[1:]))


def get_state(rig: Rig, node: str) -> str:
    cli = rig.client.create_client(GetState, f"/{node}/get_state")
    try:
        assert cli.wait_for_service(timeout_sec=5.0), f"/{node}/get_state not served"
        return wait_future(cli.call_async(GetState.Request()), 3.0, "get_state").current_state.label
    finally:
        rig.client.destroy_client(cli)


def test_compute_path_to_pose_goes_around_an_obstacle(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(mapped())
    assert get_state(rig, "planner_server") == "active"
    status, result = compute_path(rig, 3.0, 0.0)
    assert status == RosGoalStatus.STATUS_SUCCEEDED and result.error_code == ComputePathToPose.Result.NONE
    path = result.path
    assert path.header.frame_id == "map" and len(path.poses) > 60, "a pose every cell, as a grid planner gives"
    first, last = path.poses[0].pose.position, path.poses[-1].pose.position
    assert (first.x, first.y) == pytest.approx((-3.0, 0.0)) and (last.x, last.y) == pytest.approx((3.0, 0.0))
    assert path_length(path) > 6.0 + 3.0, "around the wall, not through it"
    world = rig.robot.world
    assert all(world.cost_at(p.pose.position.x, p.pose.position.y) < COST_INSCRIBED for p in path.poses)
    assert path_length(path) == pytest.approx(world.plan_path(Pose2D(x=-3.0, y=0.0), Pose2D(x=3.0, y=0.0)).length_m)
    assert result.planning_time.sec == 0 and world.goals_received == 0, "a dry run sends nothing"
    status, result = compute_path(rig, 3.0, 0.0, start=(-3.0, -4.8))
    assert status == RosGoalStatus.STATUS_SUCCEEDED, "use_start: planned from the given start"
    assert result.path.poses[0].pose.position.y == pytest.approx(-4.8)
    status, result = compute_path(rig, 3.0, 0.0, planner_id="GridBased")
    assert status == RosGoalStatus.STATUS_SUCCEEDED
    status, result = compute_path(rig, 3.0, 0.0, planner_id="Bogus")
    assert status == RosGoalStatus.STATUS_ABORTED and result.error_code == ComputePathToPose.Result.INVALID_PLANNER
    status, result = compute_path(rig, 3.0, 0.0, frame="odom")
    assert status == RosGoalStatus.STATUS_ABORTED and result.error_code == ComputePathToPose.Result.TF_ERROR


def test_a_goal_in_an_obstacle_has_no_path_and_a_sent_one_fails_without_moving(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(mapped())
    status, result = compute_path(rig, 0.0, 0.0)
    assert status == RosGoalStatus.STATUS_ABORTED
    assert result.error_code == ComputePathToPose.Result.GOAL_OCCUPIED and len(result.path.poses) == 0
    assert "occupied" in result.error_msg
    status, result = compute_path(rig, 7.0, 0.0)
    assert result.error_code == ComputePathToPose.Result.GOAL_OUTSIDE_MAP
    handle = rig.goal(0.0, 0.0)
    assert handle.accepted, "bt_navigator accepts it; its planner fails"
    res = wait_future(handle.get_result_async(), PLAN_FAILURE_ABORT_S + 4.0, "result")
    assert res.status == RosGoalStatus.STATUS_ABORTED
    assert res.result.error_code == ComputePathToPose.Result.GOAL_OCCUPIED and "GOAL_OCCUPIED" in res.result.error_msg
    truth = rig.robot.world.true_pose
    assert (truth.x, truth.y) == (-3.0, 0.0) and rig.robot.world.odometer_m == 0.0, "it never drove into the wall"


def test_navigating_around_the_obstacle_follows_the_path(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(mapped())
    handle = rig.goal(3.0, 0.0)
    res = wait_future(handle.get_result_async(), 15.0, "result")
    assert res.status == RosGoalStatus.STATUS_SUCCEEDED
    world = rig.robot.world
    assert world.true_pose.distance_to(world.goal(1).target) <= 0.05
    assert world.odometer_m > 9.0, "the long way round"
    assert rig.feedback and rig.feedback[0].distance_remaining > 9.0, "feedback counts the path left, not the line"


def test_get_costs_answers_free_inscribed_lethal_and_off_the_map(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(mapped())
    assert get_state(rig, "global_costmap/global_costmap") == "active"
    cli = rig.client.create_client(GetCosts, f"/global_costmap/{GET_COSTS_SERVICE}")
    assert cli.wait_for_service(timeout_sec=5.0)

    def ask(*poses: PoseStamped) -> GetCosts.Response:
        return wait_future(cli.call_async(GetCosts.Request(use_footprint=False, poses=list(poses))), 3.0, "GetCosts")

    res = ask(stamped(-3.0, 0.0), stamped(0.7, 0.0), stamped(0.0, 0.0))
    assert res.success and list(res.costs) == [COST_FREE, COST_INSCRIBED, COST_LETHAL]
    off = ask(stamped(-3.0, 0.0), stamped(6.0, 0.0))
    assert not off.success and list(off.costs) == [COST_FREE, COST_LETHAL], "Kilted: off the map is lethal, no success"
    other = ask(stamped(-3.0, 0.0, frame="odom"))
    assert not other.success and list(other.costs) == [255.0]


def test_without_a_map_the_planner_draws_the_line_and_every_cell_is_free(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast())
    status, result = compute_path(rig, 2.0, 1.0)
    assert status == RosGoalStatus.STATUS_SUCCEEDED and path_length(result.path) == pytest.approx(math.hypot(2, 1))
    cli = rig.client.create_client(GetCosts, f"/global_costmap/{GET_COSTS_SERVICE}")
    assert cli.wait_for_service(timeout_sec=5.0)
    res = wait_future(cli.call_async(GetCosts.Request(poses=[stamped(50.0, -3.0)])), 3.0, "GetCosts")
    assert res.success and list(res.costs) == [COST_FREE]


def test_no_path_fault_fails_the_plan_and_the_goal(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(faults=[{"kind": "no_path", "at_s": 0.0}]))
    status, result = compute_path(rig, 1.0, 0.0)
    assert status == RosGoalStatus.STATUS_ABORTED and result.error_code == ComputePathToPose.Result.NO_VALID_PATH
    handle = rig.goal(1.0, 0.0)
    res = wait_future(handle.get_result_async(), PLAN_FAILURE_ABORT_S + 4.0, "result")
    assert res.status == RosGoalStatus.STATUS_ABORTED and res.result.error_code == ComputePathToPose.Result.NO_VALID_PATH


def test_high_covariance_shows_in_amcl_pose(make_rig: Callable[..., Rig]) -> None:
    at_s = 4.0  # late enough that the first pose, after discovery, comes before it on a loaded machine
    rig = make_rig(fast(faults=[{"kind": "high_covariance", "at_s": at_s, "std_xy": 0.8, "std_yaw": 0.4}]))
    poses = rig.collect(PoseWithCovarianceStamped, "/amcl_pose")
    wait_until(lambda: len(poses) >= 1, 5.0, "/amcl_pose")
    cov = poses[0].pose.covariance
    assert (cov[0], cov[7], cov[35]) == pytest.approx(DEFAULT_POSE_VARIANCE), \
        f"the first pose, before the fault (sim t now {rig.robot.world.t:.2f})"
    wait_until(lambda: rig.robot.world.t > at_s, at_s + 5.0, "the fault's time")
    wait_until(lambda: poses[-1].pose.covariance[0] > 0.5, 5.0, "the raised covariance")
    cov = poses[-1].pose.covariance
    assert (cov[0], cov[7], cov[35]) == pytest.approx(
        (DEFAULT_POSE_VARIANCE[0] + 0.64, DEFAULT_POSE_VARIANCE[1] + 0.64, DEFAULT_POSE_VARIANCE[2] + 0.16))
    assert sum(abs(c) for i, c in enumerate(cov) if i not in (0, 7, 35)) == 0.0


def test_navigator_inactive_from_the_start_rejects_goals_and_comes_back_after_for_s(
    make_rig: Callable[..., Rig],
) -> None:
    for_s = 6.0  # long enough that the service and action discovery below end within it on a loaded machine
    rig = make_rig(fast(faults=[{"kind": "navigator_inactive", "at_s": 0.0, "for_s": for_s}]))
    assert get_state(rig, "bt_navigator") == "inactive"
    assert get_state(rig, "planner_server") == "active" and get_state(rig, "amcl") == "active"
    assert not rig.goal(1.0, 0.0).accepted, \
        f"an inactive Nav2 action server rejects goals (sim t {rig.robot.world.t:.2f}, for_s {for_s})"
    assert rig.robot.world.goals_received == 0
    assert [e.reason for e in rig.robot.goal_log] == ["bt_navigator is not active"]
    wait_until(lambda: rig.robot.world.t > for_s, for_s + 5.0, "the end of for_s")
    wait_until(lambda: rig.robot.navigator.active, 3.0, "bt_navigator active again after for_s")
    assert get_state(rig, "bt_navigator") == "active"
    handle = rig.goal(0.5, 0.0)
    assert handle.accepted
    assert wait_future(handle.get_result_async(), 5.0, "result").status == RosGoalStatus.STATUS_SUCCEEDED


def test_navigator_inactive_later_aborts_the_running_goal(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast(speed=1.0, faults=[{"kind": "navigator_inactive", "on_goal": 1, "after_s": 0.3}]))
    handle = rig.goal(5.0, 0.0)
    res = wait_future(handle.get_result_async(), 5.0, "result")
    assert res.status == RosGoalStatus.STATUS_ABORTED and "deactivated" in res.result.error_msg
    wait_until(lambda: not rig.robot.navigator.active, 2.0, "bt_navigator deactivated")
    assert get_state(rig, "bt_navigator") == "inactive"
    assert not rig.goal(1.0, 0.0).accepted


def test_an_inactive_planner_server_rejects_plans(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(fast())
    rig.robot.planner.trigger_deactivate()
    assert compute_path(rig, 1.0, 0.0)[0] == 0, "rejected, as nav2_util's SimpleActionServer while inactive"
    rig.robot.planner.trigger_activate()
    assert compute_path(rig, 1.0, 0.0)[0] == RosGoalStatus.STATUS_SUCCEEDED


def test_the_map_reaches_the_node_as_a_parameter() -> None:
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        m = {"width_m": 4.0, "height_m": 4.0, "obstacles": [{"x_min": 2.0, "y_min": 0.0, "x_max": 3.0, "y_max": 1.0}]}
        robot = SimRobot(context=ctx, autostart=False,
                         parameter_overrides=[Parameter("map_json", value=json.dumps(m)),
                                              Parameter("start.x", value=0.5), Parameter("start.y", value=0.5)])
        try:
            assert robot.world.has_map and robot.world.cost_at(2.5, 0.5) == COST_LETHAL
        finally:
            robot.destroy()
        with pytest.raises(ScenarioError, match="map_json"):
            SimRobot(context=ctx, parameter_overrides=[Parameter("map_json", value="{not json")])
        with pytest.raises(ScenarioError, match="width_m"):
            SimRobot(context=ctx, parameter_overrides=[Parameter("map_json", value='{"height_m": 3}')])
    finally:
        rclpy.try_shutdown(context=ctx)
        ctx.destroy()
