"""The sim as nav2_simple_commander's ``BasicNavigator`` sees it, checked against the real executable.

nav2_simple_commander is not installable here, so ``_Commander`` below redoes, entity for
entity and check for check, what ``BasicNavigator`` does in Kilted's source, and drives the
installed ``sim_robot`` process with it: ``setInitialPose`` then ``waitUntilNav2Active()``
(``amcl`` active, an ``amcl_pose`` received, ``bt_navigator`` active), ``goToPose`` with
feedback until SUCCEEDED, and a second goal ended by ``cancelTask``; then ``goThroughPoses``,
``followWaypoints``, ``spin``, ``backup`` and ``clearAllCostmaps``, and a spin that fails
(its error read back as ``getTaskError`` reads it). Once at the root and once with the
process under ``-r __ns:=/robot3`` and the commander in ``/robot3`` too.

Upstream source read (every "upstream" comment below names its file):
navigation2 branch ``kilted`` at commit 71a1d84f49dc48e226c96619188ee12054824ff3,
``nav2_simple_commander/nav2_simple_commander/robot_navigator.py`` (RN) and
``nav2_amcl/src/amcl_node.cpp`` (AMCL).

Where the test leaves upstream, it says so: every wait is bounded (upstream's loops are
not), the commander spins its own executor (upstream's ``rclpy.spin_*(self, ...)`` does the
same with the global one), and the initial pose is sent once the publisher has matched
(a volatile message sent before discovery is lost, and against a localizer that already
publishes a pose, as this sim and an AMCL with ``set_initial_pose: true`` do,
``_waitForInitialPose`` is satisfied by that pose and does not send it again).
"""
from __future__ import annotations

import enum
import math
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rclpy
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point, PoseStamped, PoseWithCovarianceStamped
from lifecycle_msgs.srv import GetState
from nav2_msgs.action import BackUp, FollowWaypoints, NavigateThroughPoses, NavigateToPose, Spin
from nav2_msgs.srv import ClearEntireCostmap
from nav_msgs.msg import Goals
from rclpy.action import ActionClient
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from rclpy.task import Future

from ._graph import install_lib

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config"

UPSTREAM = "navigation2 kilted 71a1d84f49dc48e226c96619188ee12054824ff3"


LIB = install_lib()

GET_STATE_POLL_S = 2.0
"""RN ``_waitForNodeToActivate``: ``time.sleep(2)`` after every ``get_state`` call, the last one included."""
SERVICE_WAIT_S = 1.0
"""RN: ``wait_for_service(timeout_sec=1.0)`` / ``wait_for_server(timeout_sec=1.0)``, repeated."""
INITIAL_POSE_SPIN_S = 1.0
"""RN ``_waitForInitialPose``: ``spin_once(self, timeout_sec=1.0)`` between two initial poses."""
TASK_SPIN_S = 0.10
"""RN ``isTaskComplete``: ``spin_until_future_complete(self, result_future, timeout_sec=0.10)``."""
BUDGET_S = 15.0
"""Our bound on each of upstream's unbounded waits (the sim process starts in a few seconds)."""


class TaskResult(enum.Enum):
    """RN ``TaskResult`` (``getResult`` maps the action status onto it)."""

    UNKNOWN = 0
    SUCCEEDED = 1
    CANCELED = 2
    FAILED = 3


class _Commander(Node):
    """BasicNavigator's entities and checks that ``waitUntilNav2Active``/``goToPose``/``cancelTask`` use."""

    def __init__(self, context: rclpy.Context, namespace: str) -> None:
        # RN BasicNavigator.__init__(node_name='basic_navigator', namespace='').
        super().__init__("basic_navigator", namespace=namespace, context=context)
        self.executor_ = SingleThreadedExecutor(context=context)
        self.executor_.add_node(self)
        self.incompatible: list[str] = []
        # RN: initial_pose is a PoseStamped whose header.frame_id is 'map'.
        self.initial_pose = PoseStamped()
        self.initial_pose.header.frame_id = "map"
        self.goal_handle: Any = None
        self.result_future: Future | None = None
        self.feedback: Any = None
        self.feedbacks = 0
        self.status: int | None = None
        # RN: last_action_error_code / last_action_error_msg ("Error code and messages from servers").
        self.last_action_error_code = 0
        self.last_action_error_msg = ""
        self.initial_pose_received = False
        self.poses: list[PoseWithCovarianceStamped] = []
        # RN amcl_pose_qos: TRANSIENT_LOCAL, RELIABLE, KEEP_LAST, depth 1.
        amcl_pose_qos = QoSProfile(
            durability=QoSDurabilityPolicy.TRANSIENT_LOCAL,
            reliability=QoSReliabilityPolicy.RELIABLE,
            history=QoSHistoryPolicy.KEEP_LAST,
            depth=1,
        )
        # RN: ActionClient(self, NavigateToPose, 'navigate_to_pose'), and the other clients used here:
        # 'navigate_through_poses', 'follow_waypoints', 'spin', 'backup' (the rest are not served by the sim).
        self.nav_to_pose_client = ActionClient(self, NavigateToPose, "navigate_to_pose")
        self.nav_through_poses_client = ActionClient(self, NavigateThroughPoses, "navigate_through_poses")
        self.follow_waypoints_client = ActionClient(self, FollowWaypoints, "follow_waypoints")
        self.spin_client = ActionClient(self, Spin, "spin")
        self.backup_client = ActionClient(self, BackUp, "backup")
        # RN: create_client(ClearEntireCostmap, 'global_costmap/clear_entirely_global_costmap') and the local one.
        self.clear_costmap_global_srv = self.create_client(
            ClearEntireCostmap, "global_costmap/clear_entirely_global_costmap")
        self.clear_costmap_local_srv = self.create_client(
            ClearEntireCostmap, "local_costmap/clear_entirely_local_costmap")
        # RN: subscription 'amcl_pose' (amcl_pose_qos) -> _amclPoseCallback.
        self.localization_pose_sub = self.create_subscription(
            PoseWithCovarianceStamped, "amcl_pose", self._amcl_pose_callback, amcl_pose_qos,
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=self._on_incompatible("amcl_pose")))
        # RN: publisher 'initialpose', QoS depth 10 (rclpy's default: reliable, volatile).
        self.initial_pose_pub = self.create_publisher(
            PoseWithCovarianceStamped, "initialpose", 10,
            event_callbacks=PublisherEventCallbacks(incompatible_qos=self._on_incompatible("initialpose")))
        # Not BasicNavigator's: the sim's ground truth, to tell a relocalization from a move.
        self.truth: list[PoseStamped] = []
        self.create_subscription(
            PoseStamped, "sim_robot/ground_truth", self.truth.append, 10,
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=self._on_incompatible("ground_truth")))

    def _on_incompatible(self, what: str):
        def record(info: Any) -> None:
            self.incompatible.append(f"{what}: last policy kind {info.last_policy_kind}, count {info.total_count}")
        return record

    def close(self) -> None:
        for client in (self.nav_to_pose_client, self.nav_through_poses_client, self.follow_waypoints_client,
                       self.spin_client, self.backup_client):
            client.destroy()
        self.executor_.remove_node(self)
        self.executor_.shutdown(timeout_sec=2.0)
        self.destroy_node()

    # -- spinning (RN calls rclpy.spin_until_future_complete(self, ...) / rclpy.spin_once(self, ...))

    def spin_until(self, future: Future, timeout_s: float, what: str) -> Any:
        self.executor_.spin_until_future_complete(future, timeout_sec=timeout_s)
        assert future.done(), f"{what}: no answer within {timeout_s} s"
        return future.result()

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor_.spin_once(timeout_sec=min(0.05, max(0.0, end - time.monotonic())))

    def spin_until_true(self, pred: Any, timeout_s: float, what: Any) -> None:
        """Spin until ``pred()``; fail with ``what()`` (the value last seen) once ``timeout_s`` has passed.

        The sim is another process: its latest message can still be on the way when a task's result
        lands, so a check of "the latest message" waits for it instead of for a fixed time.
        """
        deadline = time.monotonic() + timeout_s
        while not pred():
            assert time.monotonic() < deadline, f"not within {timeout_s} s: {what()}"
            self.spin_for(0.05)

    def wait_truth_near(self, target: tuple[float, float, float], tol_xy: float, what: str) -> None:
        """Spin until the latest ground truth is within ``tol_xy`` (and 0.05 rad) of ``target``, 3 s at most."""
        self.spin_until_true(lambda: bool(self.truth) and near(planar(self.truth[-1].pose), target, tol_xy), 3.0,
                             lambda: f"{what}: ground truth {[planar(m.pose) for m in self.truth[-1:]]}, not {target}")

    # -- RN setInitialPose / _setInitialPose / _amclPoseCallback

    def set_initial_pose(self, initial_pose: PoseStamped) -> None:
        self.initial_pose_received = False
        self.initial_pose = initial_pose
        self._set_initial_pose()

    def _set_initial_pose(self) -> None:
        # RN _setInitialPose: pose, frame_id and stamp copied from initial_pose; covariance left zero.
        msg = PoseWithCovarianceStamped()
        msg.pose.pose = self.initial_pose.pose
        msg.header.frame_id = self.initial_pose.header.frame_id
        msg.header.stamp = self.initial_pose.header.stamp
        self.initial_pose_pub.publish(msg)

    def _amcl_pose_callback(self, msg: PoseWithCovarianceStamped) -> None:
        # RN: any amcl_pose message counts as "initial pose received".
        self.initial_pose_received = True
        self.poses.append(msg)

    def _feedback_callback(self, msg: Any) -> None:
        self.feedback = msg.feedback
        self.feedbacks += 1

    # -- RN waitUntilNav2Active and its helpers

    def wait_until_nav2_active(self, navigator: str = "bt_navigator", localizer: str = "amcl") -> None:
        # RN waitUntilNav2Active: _waitForNodeToActivate(localizer) (not for 'robot_localization'),
        # _waitForInitialPose() when localizer == 'amcl', then _waitForNodeToActivate(navigator).
        self.wait_for_node_to_activate(localizer)
        if localizer == "amcl":
            self.wait_for_initial_pose()
        self.wait_for_node_to_activate(navigator)

    def wait_for_node_to_activate(self, node_name: str) -> None:
        # RN _waitForNodeToActivate: client of f'{node_name}/get_state' (relative: the caller's
        # namespace), wait_for_service(1.0) until there, then GetState every 2 s until 'active'.
        state_client = self.create_client(GetState, f"{node_name}/get_state")
        try:
            deadline = time.monotonic() + BUDGET_S
            while not state_client.wait_for_service(timeout_sec=SERVICE_WAIT_S):
                assert time.monotonic() < deadline, f"{self.get_namespace()}: {node_name}/get_state never appeared"
            state = "unknown"
            while state != "active":
                assert time.monotonic() < deadline, f"{node_name} still '{state}' after {BUDGET_S} s"
                result = self.spin_until(state_client.call_async(GetState.Request()), 5.0, f"{node_name}/get_state")
                if result is not None:
                    state = result.current_state.label
                time.sleep(GET_STATE_POLL_S)
        finally:
            self.destroy_client(state_client)

    def wait_for_initial_pose(self) -> None:
        # RN _waitForInitialPose: while not initial_pose_received: _setInitialPose(); spin_once(1.0).
        deadline = time.monotonic() + BUDGET_S
        while not self.initial_pose_received:
            assert time.monotonic() < deadline, f"no amcl_pose within {BUDGET_S} s"
            self._set_initial_pose()
            self.executor_.spin_once(timeout_sec=INITIAL_POSE_SPIN_S)

    # -- RN goToPose / isTaskComplete / getResult / cancelTask

    def go_to_pose(self, pose: PoseStamped, behavior_tree: str = "") -> bool:
        goal_msg = NavigateToPose.Goal()
        goal_msg.pose = pose
        goal_msg.behavior_tree = behavior_tree
        return self._send(self.nav_to_pose_client, goal_msg, "navigate_to_pose")

    def go_through_poses(self, poses: Goals, behavior_tree: str = "") -> bool:
        # RN goThroughPoses(poses: Goals): goal_msg.poses = poses (a nav_msgs/Goals, Kilted's type).
        goal_msg = NavigateThroughPoses.Goal()
        goal_msg.poses = poses
        goal_msg.behavior_tree = behavior_tree
        return self._send(self.nav_through_poses_client, goal_msg, "navigate_through_poses")

    def follow_waypoints(self, poses: list[PoseStamped]) -> bool:
        # RN followWaypoints: goal_msg.poses = poses (goal_index and number_of_loops left at 0).
        goal_msg = FollowWaypoints.Goal()
        goal_msg.poses = poses
        return self._send(self.follow_waypoints_client, goal_msg, "follow_waypoints")

    def spin(self, spin_dist: float = 1.57, time_allowance: int = 10, disable_collision_checks: bool = False) -> bool:
        # RN spin: target_yaw = spin_dist, time_allowance = Duration(sec=time_allowance).
        goal_msg = Spin.Goal()
        goal_msg.target_yaw = spin_dist
        goal_msg.time_allowance = Duration(sec=time_allowance)
        goal_msg.disable_collision_checks = disable_collision_checks
        return self._send(self.spin_client, goal_msg, "spin")

    def backup(self, backup_dist: float = 0.15, backup_speed: float = 0.025, time_allowance: int = 10,
               disable_collision_checks: bool = False) -> bool:
        # RN backup: target = Point(x=float(backup_dist)), speed = backup_speed.
        goal_msg = BackUp.Goal()
        goal_msg.target = Point(x=float(backup_dist))
        goal_msg.speed = backup_speed
        goal_msg.time_allowance = Duration(sec=time_allowance)
        goal_msg.disable_collision_checks = disable_collision_checks
        return self._send(self.backup_client, goal_msg, "backup")

    def _send(self, client: ActionClient, goal_msg: Any, name: str) -> bool:
        # RN (every task): clearTaskError(); while not client.wait_for_server(timeout_sec=1.0); send_goal_async
        # with _feedbackCallback, spun to completion; rejected -> setTaskError(UNKNOWN, ...) and None.
        self.last_action_error_code, self.last_action_error_msg = 0, ""
        deadline = time.monotonic() + BUDGET_S
        while not client.wait_for_server(timeout_sec=SERVICE_WAIT_S):
            assert time.monotonic() < deadline, f"{name} server never appeared"
        send_goal_future = client.send_goal_async(goal_msg, self._feedback_callback)
        self.goal_handle = self.spin_until(send_goal_future, 5.0, f"{name} goal response")
        if not self.goal_handle or not self.goal_handle.accepted:
            return False
        self.result_future = self.goal_handle.get_result_async()
        return True

    def clear_all_costmaps(self) -> None:
        # RN clearAllCostmaps: clearLocalCostmap() then clearGlobalCostmap(), each waiting for its service
        # (wait_for_service(1.0) in a loop) and spinning the empty request's future to completion.
        for srv, what in ((self.clear_costmap_local_srv, "local"), (self.clear_costmap_global_srv, "global")):
            deadline = time.monotonic() + BUDGET_S
            while not srv.wait_for_service(timeout_sec=SERVICE_WAIT_S):
                assert time.monotonic() < deadline, f"clear {what} costmap service never appeared"
            self.spin_until(srv.call_async(ClearEntireCostmap.Request()), 5.0, f"clear {what} costmap")

    def is_task_complete(self) -> bool:
        if not self.result_future:
            return True  # RN: task was cancelled or completed
        self.executor_.spin_until_future_complete(self.result_future, timeout_sec=TASK_SPIN_S)
        result_response = self.result_future.result()
        if result_response:
            self.status = result_response.status
            if self.status != GoalStatus.STATUS_SUCCEEDED and result_response.result is not None:
                # RN: setTaskError(result.error_code, result.error_msg) for any task that did not succeed.
                self.last_action_error_code = result_response.result.error_code
                self.last_action_error_msg = result_response.result.error_msg
            return True
        return False

    def get_result(self) -> TaskResult:
        return {
            GoalStatus.STATUS_SUCCEEDED: TaskResult.SUCCEEDED,
            GoalStatus.STATUS_ABORTED: TaskResult.FAILED,
            GoalStatus.STATUS_CANCELED: TaskResult.CANCELED,
        }.get(self.status, TaskResult.UNKNOWN)

    def get_task_error(self) -> tuple[int, str]:
        return self.last_action_error_code, self.last_action_error_msg

    def cancel_task(self) -> None:
        # RN cancelTask: goal_handle.cancel_goal_async(), spun to completion; the result comes later.
        if self.result_future:
            assert self.goal_handle is not None
            self.spin_until(self.goal_handle.cancel_goal_async(), 5.0, "cancel response")

    def run_task(self, timeout_s: float) -> TaskResult:
        """RN's usage loop ``while not nav.isTaskComplete(): nav.getFeedback()``, bounded; then getResult()."""
        deadline = time.monotonic() + timeout_s
        while not self.is_task_complete():
            assert time.monotonic() < deadline, f"task not complete after {timeout_s} s (status {self.status})"
        return self.get_result()


def pose_stamped(x: float, y: float, yaw: float) -> PoseStamped:
    p = PoseStamped()
    p.header.frame_id = "map"
    p.pose.position.x, p.pose.position.y = x, y
    p.pose.orientation.z, p.pose.orientation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    return p


def planar(msg: Any) -> tuple[float, float, float]:
    q = msg.orientation
    return msg.position.x, msg.position.y, math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def near(a: tuple[float, float, float], b: tuple[float, float, float], tol_xy: float, tol_yaw: float = 0.05) -> bool:
    dyaw = math.atan2(math.sin(a[2] - b[2]), math.cos(a[2] - b[2]))
    return math.hypot(a[0] - b[0], a[1] - b[1]) <= tol_xy and abs(dyaw) <= tol_yaw


def stamp_ns(header: Any) -> int:
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


def start_sim(namespace: str) -> subprocess.Popen:
    """As test_executables starts it: the installed executable with the shipped parameter file.

    Under a namespace the file's ``sim_robot:`` section does not match ``/robot3/sim_robot``
    (rcl matches fully qualified names; Nav2's launch files rewrite theirs for a namespace),
    so only ``-p`` applies there: the file's values are the defaults, and nothing here needs more.
    """
    args = [str(LIB / "sim_robot"), "--ros-args", "--params-file", str(CONFIG / "sim_robot.yaml"), "-p", "speed:=3.0"]
    if namespace:
        args += ["-r", f"__ns:={namespace}"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop_sim(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=5)
    return out or ""


@pytest.fixture
def context() -> Iterator[rclpy.Context]:
    ctx = rclpy.Context()
    rclpy.init(context=ctx)  # the test's own ROS_DOMAIN_ID (conftest own_domain), inherited by the sim
    yield ctx
    rclpy.try_shutdown(context=ctx)


@pytest.mark.parametrize("namespace", ["", "/robot3"])
def test_basic_navigator_brings_up_relocalizes_navigates_and_cancels(context: rclpy.Context, namespace: str) -> None:
    proc = start_sim(namespace)
    nav = _Commander(context, namespace)
    out = ""
    try:
        # A careful client's one addition (module docstring): send the initial pose once it can arrive.
        # Not a check of its own (upstream has none): without a subscriber the checks below fail.
        deadline = time.monotonic() + 10.0
        while nav.initial_pose_pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            assert proc.poll() is None, "the sim process ended"
            nav.spin_for(0.1)

        # Upstream's examples: nav.setInitialPose(initial_pose); nav.waitUntilNav2Active().
        # Not the sim's start (0, 0, 0): the estimate must jump there while the robot stays put.
        initial = (1.0, -0.5, 0.5)
        nav.set_initial_pose(pose_stamped(*initial))
        nav.wait_until_nav2_active()
        assert nav.initial_pose_received
        assert nav.incompatible == [], nav.incompatible  # checked again at the end

        # AMCL (initialPoseReceived -> handleInitialPose) takes the pose in the 'map' frame; the next
        # amcl_pose is the relocalized estimate. Resent each second as _waitForInitialPose would (a
        # reliable writer's first sample can still beat the reader's side of discovery).
        deadline, resend = time.monotonic() + 5.0, time.monotonic() + INITIAL_POSE_SPIN_S
        while not (nav.poses and near(planar(nav.poses[-1].pose.pose), initial, 1e-3, 1e-3)):
            assert time.monotonic() < deadline, f"amcl_pose never showed the initial pose: {nav.poses[-1:]}"
            if time.monotonic() > resend:
                nav._set_initial_pose()
                resend = time.monotonic() + INITIAL_POSE_SPIN_S
            nav.spin_for(0.05)
        assert nav.poses[-1].header.frame_id == "map"
        # Ground truth from no earlier than the relocalized estimate (one sim clock stamps both).
        relocalized_ns = stamp_ns(nav.poses[-1].header)
        nav.spin_until_true(lambda: bool(nav.truth) and stamp_ns(nav.truth[-1].header) >= relocalized_ns, 3.0,
                            lambda: f"no ground truth since the relocalization: {nav.truth[-1:]}")
        assert near(planar(nav.truth[-1].pose), (0.0, 0.0, 0.0), 1e-6, 1e-6), \
            "a relocalization moves the estimate only, never the robot"

        # goToPose on the new estimate: 1 m ahead of it in the map frame, with feedback, SUCCEEDED.
        goal = (2.0, -0.5, 0.0)
        assert nav.go_to_pose(pose_stamped(*goal)), "NavigateToPose goal was rejected"
        assert nav.run_task(timeout_s=15.0) is TaskResult.SUCCEEDED
        assert nav.feedbacks >= 1 and nav.feedback is not None and nav.feedback.current_pose.header.frame_id == "map"
        nav.spin_until_true(lambda: near(planar(nav.poses[-1].pose.pose), goal, 0.03), 3.0,
                            lambda: f"amcl_pose not at the goal {goal}: {planar(nav.poses[-1].pose.pose)}")
        # The robot walked the same 1 m, in its own frame: the correction rotates by initial yaw - 0.
        truth_end = (math.cos(initial[2]), -math.sin(initial[2]), -initial[2])
        nav.wait_truth_near(truth_end, 0.03, "the robot at the goal")

        # A second goal, far away, ended by cancelTask once it is running: CANCELED.
        assert nav.go_to_pose(pose_stamped(20.0, -0.5, 0.0))
        deadline = time.monotonic() + 5.0
        start_feedbacks = nav.feedbacks
        while nav.feedbacks < start_feedbacks + 2:
            assert time.monotonic() < deadline, "no feedback for the second goal"
            nav.spin_for(0.05)
        nav.cancel_task()
        assert nav.run_task(timeout_s=5.0) is TaskResult.CANCELED
        assert nav.feedback.distance_remaining > 10.0, "the goal was cancelled, not reached"

        nav.spin_for(0.5)  # QoS events are delivered by the executor, like messages
        assert nav.incompatible == [], nav.incompatible
        assert proc.poll() is None, "the sim process ended during the test"
    finally:
        nav.close()
        out = stop_sim(proc)
    assert "Traceback" not in out, out[-3000:]


@pytest.mark.parametrize("namespace", ["", "/robot3"])
def test_basic_navigator_routes_behaviours_and_costmap_clears(context: rclpy.Context, namespace: str) -> None:
    """goThroughPoses, followWaypoints, spin, backup, clearAllCostmaps, each as RN sends it, on the executable."""
    proc = start_sim(namespace)
    nav = _Commander(context, namespace)
    out = ""
    try:
        deadline = time.monotonic() + 10.0
        while nav.initial_pose_pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            assert proc.poll() is None, "the sim process ended"
            nav.spin_for(0.1)
        nav.set_initial_pose(pose_stamped(0.0, 0.0, 0.0))
        nav.wait_until_nav2_active()

        # goThroughPoses with a nav_msgs/Goals: every waypoint COMPLETED, the robot at the last.
        goals = Goals()
        goals.header.frame_id = "map"
        goals.goals = [pose_stamped(1.0, 0.0, 0.0), pose_stamped(1.0, 1.0, math.pi / 2)]
        assert nav.go_through_poses(goals), "NavigateThroughPoses goal was rejected"
        assert nav.run_task(timeout_s=15.0) is TaskResult.SUCCEEDED
        result = nav.result_future.result().result
        assert [s.waypoint_status for s in result.waypoint_statuses] == [1, 1], "WaypointStatus.COMPLETED"
        assert isinstance(nav.feedback, NavigateThroughPoses.Feedback) and nav.feedback.number_of_poses_remaining >= 1
        nav.wait_truth_near((1.0, 1.0, math.pi / 2), 0.03, "the robot at the last pose")

        # followWaypoints back through (1, 0) to (0, 0): no missed waypoint.
        assert nav.follow_waypoints([pose_stamped(1.0, 0.0, 0.0), pose_stamped(0.0, 0.0, 0.0)])
        assert nav.run_task(timeout_s=15.0) is TaskResult.SUCCEEDED
        assert list(nav.result_future.result().result.missed_waypoints) == []
        assert isinstance(nav.feedback, FollowWaypoints.Feedback) and nav.feedback.current_waypoint == 1

        # spin (RN's default 1.57 rad) and a back-up (faster than RN's 0.025 m/s default, for the test's time).
        assert nav.spin() and nav.run_task(timeout_s=10.0) is TaskResult.SUCCEEDED
        assert nav.backup(backup_dist=0.3, backup_speed=0.5) and nav.run_task(timeout_s=10.0) is TaskResult.SUCCEEDED
        assert isinstance(nav.feedback, BackUp.Feedback) and nav.get_task_error() == (0, "")
        nav.wait_truth_near((0.0, -0.3, 1.57), 0.03, "the robot spun and backed up")

        # A spin that runs out of its time allowance: FAILED, and the server's error as getTaskError() has it.
        assert nav.spin(spin_dist=20.0, time_allowance=1)
        assert nav.run_task(timeout_s=10.0) is TaskResult.FAILED
        code, msg = nav.get_task_error()
        assert code == Spin.Result.TIMEOUT and msg.startswith("spin failed:"), (code, msg)

        nav.clear_all_costmaps()
        nav.spin_for(0.5)
        assert nav.incompatible == [], nav.incompatible
        assert proc.poll() is None, "the sim process ended during the test"
    finally:
        nav.close()
        out = stop_sim(proc)
    assert "Traceback" not in out, out[-3000:]
    assert "clear entirely the local_costmap" in out and "clear entirely the global_costmap" in out, out[-3000:]
