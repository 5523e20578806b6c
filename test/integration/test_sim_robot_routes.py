"""sim_robot's other Nav2 surfaces over real (loopback) DDS: routes, behaviours, costmap clears.

NavigateThroughPoses on bt_navigator, FollowWaypoints on waypoint_follower, Spin, BackUp and Wait
on behavior_server, and the two costmaps' ClearEntireCostmap, each reached through real rclpy
clients by Nav2 Kilted's names, as nav2_simple_commander reaches them. The rigs are
test_sim_robot's (one rclpy Context, executor and SimRobot per test; fast robots, short routes,
every wait bounded); the world behind them is the ground truth a lying navigator is caught with.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from action_msgs.msg import GoalStatus as RosGoalStatus
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point, PoseStamped
from lifecycle_msgs.srv import GetState
from nav2_msgs.action import BackUp, FollowWaypoints, NavigateThroughPoses, NavigateToPose, Spin, Wait
from nav2_msgs.msg import WaypointStatus
from nav2_msgs.srv import ClearEntireCostmap
from rclpy.action.client import ClientGoalHandle
from rclpy.parameter import Parameter

from robot_harness.core.nav_goals import NavGoalKind
from robot_harness.nodes._util import ActionClient  # rclpy's, safe to create under a spinning executor
from robot_harness.sim import SimConfig
from robot_harness.sim.world import (
    BACKUP_INVALID_INPUT,
    FOLLOW_PATH_FAILED_TO_MAKE_PROGRESS,
    FOLLOW_WAYPOINTS_STOP_ON_MISSED_WAYPOINT,
    NAVIGATE_TO_POSE_UNKNOWN,
    SKIPPED_WAYPOINT_MSG,
    STUCK_ERROR_MSG,
)

from .test_sim_robot import Rig, fast, make_rig, nav_goal, read_jsonl, wait_future, wait_until  # noqa: F401 - fixture

Pose = tuple[float, float, float]

# --------------------------------------------------------------------------- clients


def stamped(x: float, y: float, yaw: float = 0.0) -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = "map"
    msg.pose.position.x, msg.pose.position.y = x, y
    msg.pose.orientation.z, msg.pose.orientation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    return msg


def through(*poses: Pose) -> NavigateThroughPoses.Goal:
    goal = NavigateThroughPoses.Goal()
    goal.poses.header.frame_id = "map"
    goal.poses.goals = [stamped(*p) for p in poses]
    return goal


def follow(*poses: Pose, goal_index: int = 0, loops: int = 0) -> FollowWaypoints.Goal:
    return FollowWaypoints.Goal(poses=[stamped(*p) for p in poses], goal_index=goal_index, number_of_loops=loops)


def seconds(d: Duration) -> float:
    return d.sec + d.nanosec * 1e-9


def backup(x: float, speed: float, *, y: float = 0.0) -> BackUp.Goal:
    return BackUp.Goal(target=Point(x=x, y=y), speed=speed, time_allowance=Duration(sec=10))


@dataclass
class Sent:
    """A goal the server answered: its handle and the feedback that has come since."""

    handle: ClientGoalHandle
    feedback: list[Any] = field(default_factory=list)

    def result(self, timeout_s: float = 8.0) -> tuple[int, Any]:
        res = wait_future(self.handle.get_result_async(), timeout_s, "result")
        return res.status, res.result


class Nav2:
    """Clients of the sim's Nav2 surfaces on the rig's client node (at the root: names are absolute)."""

    def __init__(self, rig: Rig, namespace: str = "") -> None:
        self.rig = rig
        self.ns = namespace.rstrip("/")
        self._clients: dict[str, ActionClient] = {}

    def send(self, action: Any, name: str, goal: Any) -> Sent:
        client = self._clients.get(name)
        if client is None:
            client = self._clients[name] = ActionClient(self.rig.client, action, f"{self.ns}/{name}")
        assert client.wait_for_server(timeout_sec=5.0), f"{self.ns}/{name} server not found"
        feedback: list[Any] = []
        fut = client.send_goal_async(goal, feedback_callback=lambda m: feedback.append(m.feedback))
        return Sent(wait_future(fut, 5.0, f"{name} goal response"), feedback)

    def run(self, action: Any, name: str, goal: Any, timeout_s: float = 8.0) -> tuple[int, Any, list[Any]]:
        sent = self.send(action, name, goal)
        assert sent.handle.accepted, f"{name} goal rejected"
        status, result = sent.result(timeout_s)
        return status, result, sent.feedback

    def call(self, srv: Any, name: str, request: Any) -> Any:
        cli = self.rig.client.create_client(srv, f"{self.ns}/{name}")
        try:
            assert cli.wait_for_service(timeout_sec=5.0), f"{self.ns}/{name} not served"
            return wait_future(cli.call_async(request), 3.0, name)
        finally:
            self.rig.client.destroy_client(cli)

    def state(self, node: str) -> str:
        return self.call(GetState, f"{node}/get_state", GetState.Request()).current_state.label

    def close(self) -> None:
        for client in self._clients.values():
            client.destroy()
        self._clients.clear()


@pytest.fixture
def nav2(make_rig: Callable[..., Rig]) -> Iterator[Callable[..., Nav2]]:  # noqa: F811 - the imported fixture
    made: list[Nav2] = []

    def build(config: SimConfig, **robot_kw: Any) -> Nav2:
        n = Nav2(make_rig(config, **robot_kw), robot_kw.get("namespace", ""))
        made.append(n)
        return n

    yield build
    for n in made:  # before the rig's teardown (this fixture depends on make_rig)
        n.close()


def truth_xy(n: Nav2) -> tuple[float, float]:
    p = n.rig.robot.world.true_pose
    return p.x, p.y


def states(statuses: Sequence[WaypointStatus]) -> list[tuple[int, int]]:
    return [(s.waypoint_index, s.waypoint_status) for s in statuses]


def skip(waypoint: int, *, reported: bool) -> dict[str, Any]:
    return {"kind": "skip_waypoint", "on_goal": 1, "waypoint": waypoint, "reported": reported}


# --------------------------------------------------------------------------- routes


def test_through_poses_passes_every_waypoint_and_ends_at_the_last(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast())
    route = ((1.0, 0.0, 0.0), (1.0, 1.0, 0.0), (2.0, 1.0, 0.5))
    status, result, feedback = n.run(NavigateThroughPoses, "navigate_through_poses", through(*route))
    assert status == RosGoalStatus.STATUS_SUCCEEDED and result.error_code == NavigateThroughPoses.Result.NONE
    assert states(result.waypoint_statuses) == [(i, WaypointStatus.COMPLETED) for i in range(3)]
    last = result.waypoint_statuses[2].waypoint_pose
    assert last.header.frame_id == "map" and (last.pose.position.x, last.pose.position.y) == (2.0, 1.0)
    assert math.dist(truth_xy(n), (2.0, 1.0)) <= 0.05
    assert n.rig.robot.world.true_pose.yaw == pytest.approx(0.5, abs=0.02)
    # Feedback as bt_navigator's: the poses left shrink as each is passed, the statuses with them.
    assert feedback and feedback[0].current_pose.header.frame_id == "map"
    left = [fb.number_of_poses_remaining for fb in feedback]
    assert left[0] == 3 and left == sorted(left, reverse=True) and min(left) == 1, left
    assert feedback[0].distance_remaining > feedback[-1].distance_remaining
    assert any(states(fb.waypoint_statuses)[0] == (0, WaypointStatus.COMPLETED) for fb in feedback)
    assert states(feedback[0].waypoint_statuses) == [(i, WaypointStatus.PENDING) for i in range(3)]
    view = n.rig.robot.goal_view(1)
    assert view.kind is NavGoalKind.NAVIGATE_THROUGH_POSES and all(wp.reached_t is not None for wp in view.waypoints)
    assert [e.event.value for e in n.rig.robot.goal_log] == ["received", "accepted", "succeeded"]


def test_a_silent_skip_reports_every_waypoint_completed_but_the_truth_says_otherwise(
    nav2: Callable[..., Nav2], tmp_path: Path,
) -> None:
    path = tmp_path / "truth.jsonl"
    n = nav2(fast(faults=[skip(1, reported=False)]), parameter_overrides=[Parameter("truth_log_path", value=str(path))])
    route = ((1.0, 0.0, 0.0), (1.0, 1.5, 0.0), (2.0, 0.0, 0.0))
    status, result, feedback = n.run(NavigateThroughPoses, "navigate_through_poses", through(*route))
    assert status == RosGoalStatus.STATUS_SUCCEEDED and result.error_code == 0
    assert states(result.waypoint_statuses) == [(i, WaypointStatus.COMPLETED) for i in range(3)], "the lie"
    assert math.dist(truth_xy(n), (2.0, 0.0)) <= 0.05
    view = n.rig.robot.goal_view(1)
    assert [wp.reached_t is not None for wp in view.waypoints] == [True, False, True], "the truth"
    assert all(fb.number_of_poses_remaining <= 2 for fb in feedback), "the navigator dropped it from the start"
    wait_until(lambda: "sim_route_waypoints" in path.read_text(), 2.0, "the route's truth line")
    (line,) = [r for r in read_jsonl(path) if r["kind"] == "sim_route_waypoints"]
    assert line["goal_index"] == 1 and line["goal_kind"] == "navigate_through_poses"
    assert [w["reached_t"] is None for w in line["waypoints"]] == [False, True, False]
    assert [w["state"] for w in line["waypoints"]] == ["completed"] * 3


def test_a_reported_skip_on_through_poses_is_skipped_and_still_succeeds(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast(faults=[skip(0, reported=True)]))
    status, result, _ = n.run(NavigateThroughPoses, "navigate_through_poses",
                              through((0.5, 1.0, 0.0), (1.0, 0.0, 0.0)))
    assert status == RosGoalStatus.STATUS_SUCCEEDED
    assert states(result.waypoint_statuses) == [(0, WaypointStatus.SKIPPED), (1, WaypointStatus.COMPLETED)]


def test_follow_waypoints_with_a_reported_skip_goes_on_without_stop_on_failure(nav2: Callable[..., Nav2]) -> None:
    # stop_on_failure arrives as the node's parameter, as the launch file / runner pass it.
    n = nav2(fast(faults=[skip(1, reported=True)]), parameter_overrides=[Parameter("stop_on_failure", value=False)])
    assert n.rig.robot.config.stop_on_failure is False
    route = ((0.5, 0.0, 0.0), (0.5, 1.0, 0.0), (1.0, 0.0, 0.0))
    status, result, feedback = n.run(FollowWaypoints, "follow_waypoints", follow(*route))
    assert status == RosGoalStatus.STATUS_SUCCEEDED and result.error_code == FollowWaypoints.Result.NONE
    (missed,) = result.missed_waypoints
    assert (missed.waypoint_index, missed.waypoint_status) == (1, WaypointStatus.FAILED)
    assert missed.error_code == NAVIGATE_TO_POSE_UNKNOWN and missed.error_msg == SKIPPED_WAYPOINT_MSG
    assert (missed.waypoint_pose.pose.position.x, missed.waypoint_pose.pose.position.y) == (0.5, 1.0)
    seen = [fb.current_waypoint for fb in feedback]
    assert seen[0] == 0 and seen[-1] == 2 and seen == sorted(seen), seen
    assert math.dist(truth_xy(n), (1.0, 0.0)) <= 0.05
    assert n.rig.robot.goal_view(1).waypoints[1].reached_t is None


def test_follow_waypoints_with_a_reported_skip_stops_on_failure_by_default(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast(faults=[skip(1, reported=True)]))
    assert n.rig.robot.config.stop_on_failure is True, "Nav2's default"
    route = ((0.5, 0.0, 0.0), (0.5, 1.0, 0.0), (1.0, 0.0, 0.0))
    status, result, _ = n.run(FollowWaypoints, "follow_waypoints", follow(*route))
    assert status == RosGoalStatus.STATUS_ABORTED
    assert result.error_code == FOLLOW_WAYPOINTS_STOP_ON_MISSED_WAYPOINT == 603
    assert "Failed to process waypoint 1" in result.error_msg
    assert [(m.waypoint_index, m.error_code) for m in result.missed_waypoints] == [(1, NAVIGATE_TO_POSE_UNKNOWN)]
    assert math.dist(truth_xy(n), (0.5, 0.0)) <= 0.05, "it stopped after the first waypoint"


def test_follow_waypoints_starts_at_goal_index_and_loops(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast())
    status, _result, feedback = n.run(FollowWaypoints, "follow_waypoints",
                                      follow((0.5, 0.0, 0.0), (1.0, 0.0, 0.0), goal_index=1, loops=1))
    assert status == RosGoalStatus.STATUS_SUCCEEDED

    def order() -> list[int]:
        seen = [fb.current_waypoint for fb in feedback]
        return [k for i, k in enumerate(seen) if i == 0 or seen[i - 1] != k]

    # Feedback is a topic and the result a service: the last leg's feedback may land after the result.
    wait_until(lambda: order()[-1:] == [1], 2.0, "feedback of the last leg")
    assert order() == [1, 0, 1], [fb.current_waypoint for fb in feedback]
    assert math.dist(truth_xy(n), (1.0, 0.0)) <= 0.05


def test_a_route_is_cancelled_and_an_empty_one_refused(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast())
    sent = n.send(NavigateThroughPoses, "navigate_through_poses", through((5.0, 0.0, 0.0), (9.0, 0.0, 0.0)))
    wait_until(lambda: len(sent.feedback) >= 2, 3.0, "route feedback")
    wait_future(sent.handle.cancel_goal_async(), 3.0, "cancel response")
    status, result = sent.result(3.0)
    assert status == RosGoalStatus.STATUS_CANCELED
    assert states(result.waypoint_statuses) == [(0, WaypointStatus.FAILED), (1, WaypointStatus.FAILED)]
    assert not n.send(NavigateThroughPoses, "navigate_through_poses", through()).handle.accepted
    assert not n.send(FollowWaypoints, "follow_waypoints", follow()).handle.accepted
    assert n.rig.robot.world.goals_received == 1, "a refused route never reaches the world"
    assert [e.event.value for e in n.rig.robot.goal_log[-2:]] == ["rejected", "rejected"]


# --------------------------------------------------------------------------- behaviours


def test_spin_backup_and_wait_report_their_progress_and_elapsed_time(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast())
    status, result, feedback = n.run(Spin, "spin", Spin.Goal(target_yaw=1.2, time_allowance=Duration(sec=10)))
    assert status == RosGoalStatus.STATUS_SUCCEEDED and result.error_code == Spin.Result.NONE
    assert n.rig.robot.world.true_pose.yaw == pytest.approx(1.2, abs=1e-3)
    assert feedback and 0.0 <= feedback[0].angular_distance_traveled < feedback[-1].angular_distance_traveled <= 1.2
    assert 0.3 <= seconds(result.total_elapsed_time) <= 1.5, "1.2 rad at 3 rad/s"

    status, result, feedback = n.run(BackUp, "backup", backup(0.4, 1.0))
    assert status == RosGoalStatus.STATUS_SUCCEEDED and result.error_code == BackUp.Result.NONE
    x, y = truth_xy(n)
    assert math.dist((x, y), (-0.4 * math.cos(1.2), -0.4 * math.sin(1.2))) <= 0.02, "straight back along the heading"
    assert feedback and feedback[-1].distance_traveled <= 0.4 + 1e-6
    assert 0.3 <= seconds(result.total_elapsed_time) <= 1.5

    status, result, feedback = n.run(Wait, "wait", Wait.Goal(time=Duration(sec=0, nanosec=600_000_000)))
    assert status == RosGoalStatus.STATUS_SUCCEEDED and result.error_code == Wait.Result.NONE
    assert 0.55 <= seconds(result.total_elapsed_time) <= 1.0
    left = [seconds(fb.time_left) for fb in feedback]
    assert left and left[0] <= 0.6 + 1e-6 and left == sorted(left, reverse=True)
    assert math.dist(truth_xy(n), (x, y)) < 1e-9, "a wait stands still"
    assert [v.kind for v in map(n.rig.robot.goal_view, (1, 2, 3))] == [NavGoalKind.SPIN, NavGoalKind.BACK_UP,
                                                                     NavGoalKind.WAIT]


def test_a_backup_off_the_x_axis_is_invalid_input(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast())
    status, result, _ = n.run(BackUp, "backup", backup(0.3, 0.5, y=0.2))
    assert status == RosGoalStatus.STATUS_ABORTED
    assert result.error_code == BackUp.Result.INVALID_INPUT == BACKUP_INVALID_INPUT
    assert "Y and Z not supported" in result.error_msg
    assert truth_xy(n) == (0.0, 0.0) and seconds(result.total_elapsed_time) == 0.0


def test_a_behaviour_is_preempted_by_a_navigation_goal(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast())
    waiting = n.send(Wait, "wait", Wait.Goal(time=Duration(sec=30)))
    assert waiting.handle.accepted
    going = n.send(NavigateToPose, "navigate_to_pose", nav_goal(0.5, 0.0))
    status, result = waiting.result(3.0)
    assert status == RosGoalStatus.STATUS_ABORTED and result.error_code == Wait.Result.UNKNOWN
    assert "preempted by goal 2" in result.error_msg
    assert going.result(5.0)[0] == RosGoalStatus.STATUS_SUCCEEDED


def test_a_stuck_robot_fails_to_make_progress_until_a_backup_frees_it(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast(faults=[{"kind": "stuck", "at_s": 0.0, "patience_s": 1.0}]))
    status, result, _ = n.run(NavigateToPose, "navigate_to_pose", nav_goal(1.0, 0.0))
    assert status == RosGoalStatus.STATUS_ABORTED
    assert result.error_code == FOLLOW_PATH_FAILED_TO_MAKE_PROGRESS
    assert "progress" in result.error_msg.lower() and STUCK_ERROR_MSG == "Failed to make progress"
    assert truth_xy(n) == (0.0, 0.0) and n.rig.robot.world.stuck
    status, result, _ = n.run(BackUp, "backup", backup(0.3, 1.0))
    assert status == RosGoalStatus.STATUS_SUCCEEDED, "a wedged robot can still back up"
    assert not n.rig.robot.world.stuck
    status, result, _ = n.run(NavigateToPose, "navigate_to_pose", nav_goal(1.0, 0.0))
    assert status == RosGoalStatus.STATUS_SUCCEEDED
    assert math.dist(truth_xy(n), (1.0, 0.0)) <= 0.05


# --------------------------------------------------------------------------- costmaps and lifecycle


def test_both_costmaps_clear_entirely_and_a_clear_frees_a_robot_stuck_until_one(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast(faults=[{"kind": "stuck", "at_s": 0.0, "patience_s": 1.0, "freed_by": "clear_costmaps"}]))
    world = n.rig.robot.world
    assert world.stuck and world.costmap_clears == 0
    n.call(ClearEntireCostmap, "local_costmap/clear_entirely_local_costmap", ClearEntireCostmap.Request())
    assert world.costmap_clears == 1 and not world.stuck
    n.call(ClearEntireCostmap, "global_costmap/clear_entirely_global_costmap", ClearEntireCostmap.Request())
    assert world.costmap_clears == 2
    assert world.goals_received == 0 and n.rig.robot.goal_log == [], "a clear is a service, not a goal"


def test_every_lifecycle_node_of_the_sim_comes_up_active(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast())
    for node in ("behavior_server", "waypoint_follower", "local_costmap/local_costmap",
                 "global_costmap/global_costmap", "bt_navigator", "amcl", "planner_server"):
        assert n.state(node) == "active", node


def test_goals_to_inactive_servers_are_refused_and_logged(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast(), autostart=False)
    robot = n.rig.robot
    for host in (robot.navigator, robot.waypoint_follower, robot.behavior_server):
        host.trigger_configure()
    assert n.state("behavior_server") == "inactive"
    assert not n.send(Spin, "spin", Spin.Goal(target_yaw=1.0)).handle.accepted
    assert not n.send(FollowWaypoints, "follow_waypoints", follow((1.0, 0.0, 0.0))).handle.accepted
    assert not n.send(NavigateThroughPoses, "navigate_through_poses", through((1.0, 0.0, 0.0))).handle.accepted
    assert robot.world.goals_received == 0
    assert [(e.event.value, e.goal_index) for e in robot.goal_log] == [("rejected", 0)] * 3
    assert "behavior_server is not active" in robot.goal_log[0].reason
    robot.behavior_server.trigger_activate()
    status, _result, _ = n.run(Wait, "wait", Wait.Goal(time=Duration(nanosec=100_000_000)))
    assert status == RosGoalStatus.STATUS_SUCCEEDED


def test_under_a_namespace_every_new_surface_moves_with_the_robot(nav2: Callable[..., Nav2]) -> None:
    n = nav2(fast(), namespace="/robot1")
    names = sorted(node.get_fully_qualified_name() for node in n.rig.robot.nodes)
    assert {"/robot1/behavior_server", "/robot1/waypoint_follower", "/robot1/local_costmap/local_costmap"} <= set(names)
    for node in ("behavior_server", "waypoint_follower", "local_costmap/local_costmap"):
        assert n.state(node) == "active", node
    status, result, _ = n.run(NavigateThroughPoses, "navigate_through_poses", through((0.5, 0.0, 0.0), (1.0, 0.0, 0.0)))
    assert status == RosGoalStatus.STATUS_SUCCEEDED and len(result.waypoint_statuses) == 2
    assert n.run(FollowWaypoints, "follow_waypoints", follow((0.5, 0.0, 0.0)))[0] == RosGoalStatus.STATUS_SUCCEEDED
    assert n.run(Spin, "spin", Spin.Goal(target_yaw=0.5))[0] == RosGoalStatus.STATUS_SUCCEEDED
    n.call(ClearEntireCostmap, "local_costmap/clear_entirely_local_costmap", ClearEntireCostmap.Request())
    n.call(ClearEntireCostmap, "global_costmap/clear_entirely_global_costmap", ClearEntireCostmap.Request())
    assert n.rig.robot.world.costmap_clears == 2
    services = {name for name, _ in n.rig.client.get_service_names_and_types()}
    root = {"/spin/_action/send_goal", "/follow_waypoints/_action/send_goal",
            "/local_costmap/clear_entirely_local_costmap", "/behavior_server/get_state"}
    assert not root & services, "nothing of the robot's at the root"
