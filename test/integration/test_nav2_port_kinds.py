"""Nav2NavigationPort against stand-ins of Nav2 Kilted's servers over loopback DDS: every NavGoalKind.

The stand-ins (NavigateToPose, NavigateThroughPoses, FollowWaypoints, Spin, BackUp, Wait and the two
costmaps' ClearEntireCostmap) are strict: a goal whose fields are not what Nav2 expects (BackUp's
target.y / z not 0, a through-poses header without a frame, a FollowWaypoints that does not start at
the first pose) is rejected and recorded, so a wrong translation fails the test that sent it. The port
runs on a BackgroundSpinner node, as in the supervisor; the stand-ins on a MultiThreadedExecutor.
"""
from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace
from typing import Any

import pytest
import rclpy
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped
from nav2_msgs.action import BackUp, FollowWaypoints, NavigateThroughPoses, NavigateToPose, Spin, Wait
from nav2_msgs.msg import WaypointStatus
from nav2_msgs.srv import ClearEntireCostmap
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from robot_harness.core.clock import SystemClock
from robot_harness.core.errors import BackendUnavailable, HarnessTimeout
from robot_harness.core.nav_goals import NavGoal, NavGoalKind, WaypointReport, WaypointState
from robot_harness.core.ports import BackendEvent
from robot_harness.core.records import Pose2D
from robot_harness.nodes import conversions as cv
from robot_harness.nodes import ros_ports
from robot_harness.nodes.executors import BackgroundSpinner, MultiThreadedExecutor
from robot_harness.nodes.ros_ports import Nav2NavigationPort

from ._spin import spin_in_thread
from .test_sim_robot import wait_until

TYPES = {"navigate_to_pose": NavigateToPose, "navigate_through_poses": NavigateThroughPoses,
         "follow_waypoints": FollowWaypoints, "spin": Spin, "backup": BackUp, "wait": Wait}
COSTMAP_SERVICES = {"global": "global_costmap/clear_entirely_global_costmap",
                    "local": "local_costmap/clear_entirely_local_costmap"}
HERE = Pose2D(x=0.0, y=0.0)
ROUTE = (Pose2D(x=1.0, y=0.0), Pose2D(x=2.0, y=1.0, yaw=0.5), Pose2D(x=3.0, y=1.0))


def _s(d: Duration) -> float:
    return d.sec + d.nanosec * 1e-9


def _frames(poses: Any) -> list[str]:
    return [f"pose {i} in frame {p.header.frame_id!r}" for i, p in enumerate(poses) if p.header.frame_id != "map"]


class StandIns:
    """Nav2's servers, strict about what they receive; what they answer is set per test."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.problems: list[str] = []
        """Every field of a received goal that Nav2 would not take (the goal was rejected)."""
        self.goals: dict[str, list[Any]] = defaultdict(list)
        self.reject: set[str] = set()
        self.accept_delay_s = 0.0
        self.spin_until_canceled = False
        self.results: dict[str, tuple[str, dict[str, Any]]] = {}
        """action -> ("succeed" | "abort", Result fields)."""
        self.cleared: list[str] = []
        self.clear_delay_s = {"global": 0.0, "local": 0.0}
        self._lock = threading.Lock()
        group = ReentrantCallbackGroup()
        self.servers = [ActionServer(node, t, name, execute_callback=partial(self._execute, name),
                                     goal_callback=partial(self._on_goal, name),
                                     cancel_callback=lambda _h: CancelResponse.ACCEPT, callback_group=group)
                        for name, t in TYPES.items()]
        self.services = [node.create_service(ClearEntireCostmap, srv, partial(self._clear, costmap),
                                             callback_group=group) for costmap, srv in COSTMAP_SERVICES.items()]

    @staticmethod
    def check(name: str, goal: Any) -> list[str]:
        """What Nav2 Kilted would refuse or misread in ``goal``."""
        if name == "navigate_to_pose":
            return _frames([goal.pose])
        if name == "navigate_through_poses":
            got = goal.poses  # Kilted: nav_msgs/Goals
            return ([] if got.header.frame_id == "map" else [f"Goals header frame {got.header.frame_id!r}"]) + \
                ([] if got.goals else ["no goals"]) + _frames(got.goals) + \
                ([] if goal.behavior_tree == "" else ["a behavior tree"])
        if name == "follow_waypoints":
            return ([] if goal.number_of_loops == 0 else [f"number_of_loops {goal.number_of_loops}"]) + \
                ([] if goal.goal_index == 0 else [f"goal_index {goal.goal_index}"]) + \
                ([] if goal.poses else ["no poses"]) + _frames(goal.poses)
        if name == "spin":
            return ([] if 0.0 < abs(goal.target_yaw) <= 2 * math.pi else [f"target_yaw {goal.target_yaw}"]) + \
                ([] if not goal.disable_collision_checks else ["collision checks disabled"])
        if name == "backup":
            t = goal.target  # back_up.cpp: a non-zero y or z is INVALID_INPUT; x and speed are made negative
            return ([] if t.x > 0.0 else [f"target.x {t.x} (BasicNavigator sends the distance positive)"]) + \
                ([] if t.y == 0.0 and t.z == 0.0 else [f"target.y/z {t.y}/{t.z}"]) + \
                ([] if goal.speed > 0.0 else [f"speed {goal.speed}"]) + \
                ([] if not goal.disable_collision_checks else ["collision checks disabled"])
        if name == "wait":
            return [] if _s(goal.time) > 0.0 else ["no time to wait"]
        return [f"unknown action {name}"]

    def _on_goal(self, name: str, goal: Any) -> GoalResponse:
        with self._lock:
            self.goals[name].append(goal)
            problems = self.check(name, goal)
            self.problems += [f"{name}: {p}" for p in problems]
        if problems or name in self.reject:
            return GoalResponse.REJECT
        time.sleep(self.accept_delay_s)
        return GoalResponse.ACCEPT

    def _feedback(self, name: str, i: int) -> Any:
        fb = TYPES[name].Feedback()
        if name in ("navigate_to_pose", "navigate_through_poses"):
            fb.current_pose = PoseStamped()
            fb.current_pose.header.frame_id = "map"
            fb.current_pose.pose = cv.pose2d_to_pose_msg(Pose2D(x=0.5 * i, y=0.25))
            fb.navigation_time, fb.estimated_time_remaining = Duration(sec=i), Duration(sec=5, nanosec=500_000_000)
            fb.number_of_recoveries, fb.distance_remaining = 1, 2.5
            if name == "navigate_through_poses":
                fb.number_of_poses_remaining = 3 - i
        elif name == "follow_waypoints":
            fb.current_waypoint = i
        elif name == "spin":
            fb.angular_distance_traveled = 0.25 * (i + 1)
        elif name == "backup":
            fb.distance_traveled = 0.1 * (i + 1)
        elif name == "wait":
            fb.time_left = Duration(sec=0, nanosec=int(max(0.0, 0.9 - 0.1 * i) * 1e9))
        return fb

    def _execute(self, name: str, handle: Any) -> Any:
        result_type = TYPES[name].Result
        end = time.monotonic() + (_s(handle.request.time) if name == "wait" else 0.3)
        if name == "spin" and self.spin_until_canceled:
            end = time.monotonic() + 10.0
        i = 0
        while time.monotonic() < end or i < 3:
            if handle.is_cancel_requested:
                handle.canceled()
                return result_type()
            handle.publish_feedback(self._feedback(name, i))
            i += 1
            time.sleep(0.1)
        outcome, fields = self.results.get(name, ("succeed", {}))
        (handle.succeed if outcome == "succeed" else handle.abort)()
        return result_type(**fields)

    def _clear(self, costmap: str, request: Any, response: Any) -> Any:
        time.sleep(self.clear_delay_s[costmap])
        with self._lock:
            self.cleared.append(costmap)
        return response


@dataclass
class Graph:
    ctx: Any
    nav2: StandIns
    client: Node
    """The port's node, on a BackgroundSpinner (as the supervisor's dispatch node)."""
    other: Node
    """Another node with ports of its own (a restarted supervisor, say), on the stand-ins' executor."""
    ports: list[Nav2NavigationPort] = field(default_factory=list)

    def port(self, node: Node | None = None, **names: str) -> Nav2NavigationPort:
        p = Nav2NavigationPort(node or self.client, clock=SystemClock(), **names)
        self.ports.append(p)
        return p


@pytest.fixture
def graph() -> Iterator[Graph]:
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    server = Node("nav2_stand_in", context=ctx)
    other = Node("other_supervisor_dispatch", context=ctx)
    executor = MultiThreadedExecutor(num_threads=4, context=ctx)
    executor.add_node(server)
    executor.add_node(other)
    nav2 = StandIns(server)
    spinner = BackgroundSpinner(context=ctx, name="port_dispatch").start()

    thread = spin_in_thread(executor, ctx)
    g = Graph(ctx=ctx, nav2=nav2, client=spinner.node, other=other)
    try:
        yield g
    finally:
        spinner.stop()
        for p in g.ports:
            p.destroy()
        spinner.destroy()
        rclpy.try_shutdown(context=ctx)
        thread.join(timeout=5.0)
        executor.shutdown(timeout_sec=2.0)
        server.destroy_node()
        other.destroy_node()
        ctx.destroy()


def until_terminal(port: Nav2NavigationPort, goal_id: str, timeout_s: float = 10.0) -> list[BackendEvent]:
    """This goal's events (feedback, status, result) up to and including its result."""
    got: list[BackendEvent] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for ev in port.poll(0.1):
            if ev.goal_id == goal_id:
                got.append(ev)
                if ev.type == "result":
                    return got
    raise AssertionError(f"no result for {goal_id} within {timeout_s} s; got {[(e.type, e.status) for e in got]}")


def gid(n: int) -> str:
    return f"{n:032x}"


def send(port: Nav2NavigationPort, goal: NavGoal | None, goal_id: str, *, timeout_s: float = 5.0) -> Any:
    target = goal.target if goal is not None and goal.target is not None else HERE
    return port.send_goal(target=target, frame_id="map", timeout_s=timeout_s, goal_id=goal_id, goal=goal)


def test_navigate_to_pose_goes_as_it_always_has(graph: Graph) -> None:
    port = graph.port()
    ack = send(port, None, gid(1))
    assert ack.accepted and ack.goal_id == gid(1)
    events = until_terminal(port, gid(1))
    fb = [e for e in events if e.type == "feedback"]
    assert fb and set(fb[-1].detail) == {"navigation_time_s", "estimated_time_remaining_s", "number_of_recoveries"}
    assert fb[-1].detail["estimated_time_remaining_s"] == pytest.approx(5.5)
    assert fb[-1].distance_remaining == pytest.approx(2.5) and fb[-1].current_pose.y == pytest.approx(0.25)
    assert events[-1].status == "succeeded" and events[-1].detail == {"error_code": 0, "error_msg": ""}
    (sent,) = graph.nav2.goals["navigate_to_pose"]
    assert sent.pose.pose.position.x == 0.0 and graph.nav2.problems == []


def test_navigate_through_poses_sends_kilted_goals_and_reports_every_waypoint(graph: Graph) -> None:
    W = WaypointStatus
    graph.nav2.results["navigate_through_poses"] = ("succeed", {"waypoint_statuses": [
        W(waypoint_status=W.COMPLETED, waypoint_index=0), W(waypoint_status=W.SKIPPED, waypoint_index=1,
                                                            error_code=9100, error_msg="unreachable"),
        W(waypoint_status=W.COMPLETED, waypoint_index=2)]})
    port = graph.port()
    goal = NavGoal(kind=NavGoalKind.NAVIGATE_THROUGH_POSES, poses=ROUTE)
    assert send(port, goal, gid(2)).accepted
    events = until_terminal(port, gid(2))
    (sent,) = graph.nav2.goals["navigate_through_poses"]
    assert [(p.pose.position.x, p.pose.position.y) for p in sent.poses.goals] == [(1.0, 0.0), (2.0, 1.0), (3.0, 1.0)]
    assert cv.yaw_from_quaternion(sent.poses.goals[1].pose.orientation) == pytest.approx(0.5)
    fb = [e for e in events if e.type == "feedback"]
    assert fb and {"navigation_time_s", "number_of_recoveries", "number_of_poses_remaining"} <= set(fb[-1].detail)
    assert fb[-1].distance_remaining == pytest.approx(2.5) and fb[-1].current_pose is not None
    assert any(e.type == "status" and e.status == "executing" for e in events), "another action's status reaches poll"
    result = events[-1]
    assert result.status == "succeeded" and result.detail["error_code"] == 0
    reports = [WaypointReport.model_validate(w) for w in result.detail["waypoints"]]
    assert [(r.index, r.state) for r in reports] == [
        (0, WaypointState.COMPLETED), (1, WaypointState.SKIPPED), (2, WaypointState.COMPLETED)]
    assert reports[1].error_code == 9100 and reports[1].error_msg == "unreachable" and reports[1].missed
    assert graph.nav2.problems == []


def test_follow_waypoints_reports_the_missed_ones_and_its_error(graph: Graph) -> None:
    W = WaypointStatus
    graph.nav2.results["follow_waypoints"] = ("abort", {
        "error_code": FollowWaypoints.Result.STOP_ON_MISSED_WAYPOINT, "error_msg": "missed 1",
        "missed_waypoints": [W(waypoint_status=W.FAILED, waypoint_index=1, error_code=601, error_msg="task failed")]})
    port = graph.port()
    assert send(port, NavGoal(kind=NavGoalKind.FOLLOW_WAYPOINTS, poses=ROUTE), gid(3)).accepted
    events = until_terminal(port, gid(3))
    (sent,) = graph.nav2.goals["follow_waypoints"]
    assert len(sent.poses) == 3 and sent.poses[2].pose.position.x == 3.0
    fb = [e for e in events if e.type == "feedback"]
    assert fb and set(fb[-1].detail) == {"current_waypoint"} and fb[-1].current_pose is None
    assert fb[-1].distance_remaining is None
    result = events[-1]
    assert result.status == "aborted"
    assert (result.detail["error_code"], result.detail["error_msg"]) == (603, "missed 1")
    assert result.detail["waypoints"] == [WaypointReport(index=1, state=WaypointState.FAILED, error_code=601,
                                                         error_msg="task failed").model_dump(mode="json")]
    assert graph.nav2.problems == []


def test_the_behaviours_get_their_fields_and_report_their_progress(graph: Graph) -> None:
    port = graph.port()
    goals = {
        "spin": (NavGoal(kind=NavGoalKind.SPIN, spin_dist_rad=-1.5, time_allowance_s=4.25), "angular_distance_traveled"),
        "backup": (NavGoal(kind=NavGoalKind.BACK_UP, backup_dist_m=0.3, backup_speed_mps=0.1), "distance_traveled"),
        "wait": (NavGoal(kind=NavGoalKind.WAIT, wait_s=0.5), "time_left_s"),
    }
    for n, (name, (goal, key)) in enumerate(goals.items(), start=10):
        ack = send(port, goal, gid(n))
        assert ack.accepted, (name, ack.reason, graph.nav2.problems)
        events = until_terminal(port, gid(n))
        fb = [e for e in events if e.type == "feedback"]
        assert fb and set(fb[-1].detail) == {key}, name
        assert fb[-1].current_pose is None and fb[-1].distance_remaining is None
        assert {"error_code", "error_msg"} == set(events[-1].detail), name
    spin, backup, wait = (graph.nav2.goals[k][0] for k in ("spin", "backup", "wait"))
    assert spin.target_yaw == pytest.approx(-1.5) and _s(spin.time_allowance) == pytest.approx(4.25)
    assert (backup.target.x, backup.target.y, backup.target.z) == (pytest.approx(0.3), 0.0, 0.0)
    assert backup.speed == pytest.approx(0.1) and _s(backup.time_allowance) == 0.0
    assert _s(wait.time) == pytest.approx(0.5)
    assert graph.nav2.problems == []


def test_a_behaviour_result_carries_its_error_code(graph: Graph) -> None:
    graph.nav2.results["backup"] = ("abort", {"error_code": BackUp.Result.COLLISION_AHEAD, "error_msg": "wall"})
    port = graph.port()
    assert send(port, NavGoal(kind=NavGoalKind.BACK_UP, backup_dist_m=0.2, backup_speed_mps=0.05), gid(20)).accepted
    result = until_terminal(port, gid(20))[-1]
    assert result.status == "aborted" and result.detail == {"error_code": 714, "error_msg": "wall"}


def test_a_rejected_goal_is_a_rejected_ack(graph: Graph) -> None:
    graph.nav2.reject.add("spin")
    port = graph.port()
    ack = send(port, NavGoal(kind=NavGoalKind.SPIN, spin_dist_rad=1.0), gid(21))
    assert not ack.accepted and ack.goal_id == gid(21) and ack.reason == "goal rejected by spin"
    assert not [e for e in port.poll(0.3) if e.goal_id == gid(21)], "a rejected goal has no events"


def test_an_absent_server_an_empty_name_and_a_missing_type_are_refused_without_a_hang(
        graph: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ros_ports.NAV2_ACTION_TYPES, NavGoalKind.FOLLOW_WAYPOINTS, None)
    port = graph.port(spin_action="/nobody/spin", wait_action="")
    began = time.monotonic()
    ack = send(port, NavGoal(kind=NavGoalKind.SPIN, spin_dist_rad=1.0), gid(22), timeout_s=1.0)
    assert time.monotonic() - began < 3.0
    assert not ack.accepted and "/nobody/spin" in ack.reason and "serves no spin" in ack.reason
    began = time.monotonic()
    ack = send(port, NavGoal(kind=NavGoalKind.WAIT, wait_s=1.0), gid(23))
    assert not ack.accepted and "serves no wait" in ack.reason and "configured empty" in ack.reason
    ack = send(port, NavGoal(kind=NavGoalKind.FOLLOW_WAYPOINTS, poses=ROUTE), gid(24))
    assert not ack.accepted and "no FollowWaypoints" in ack.reason
    assert time.monotonic() - began < 0.5, "nothing to wait for"
    assert graph.nav2.goals["wait"] == [] and graph.nav2.goals["follow_waypoints"] == []
    # An absent navigator is still an error of its own, as it always was.
    with pytest.raises(BackendUnavailable):
        send(graph.port(action_name="/nobody/navigate_to_pose"), None, gid(25), timeout_s=0.5)


def test_cancel_of_a_running_spin(graph: Graph) -> None:
    graph.nav2.spin_until_canceled = True
    port = graph.port()
    assert send(port, NavGoal(kind=NavGoalKind.SPIN, spin_dist_rad=6.0), gid(30)).accepted
    deadline = time.monotonic() + 5.0
    while not any(e.type == "feedback" and e.goal_id == gid(30) for e in port.poll(0.1)):
        assert time.monotonic() < deadline, "no spin feedback"
    assert port.cancel(gid(30), timeout_s=2.0)
    result = until_terminal(port, gid(30))[-1]
    assert result.status == "canceled" and result.detail == {"error_code": 0, "error_msg": ""}
    assert port.lookup(gid(30), timeout_s=2.0) == "canceled"
    assert not port.cancel(gid(30), timeout_s=0.5), "no live handle once it ended"


def test_a_goal_whose_acceptance_was_lost_is_looked_up_and_adopted_on_its_own_action(graph: Graph) -> None:
    """The Wait server accepts after the port stopped waiting: the sender's late acceptance still
    tracks it, and another port that never sent it (a restarted supervisor) finds it on the Wait
    server's status, adopts it on its own Wait client and gets its result."""
    graph.nav2.accept_delay_s = 1.0
    sender = graph.port()
    with pytest.raises(HarnessTimeout):
        send(sender, NavGoal(kind=NavGoalKind.WAIT, wait_s=2.5), gid(40), timeout_s=0.3)
    other = graph.port(graph.other)
    assert other.lookup(gid(40), timeout_s=5.0) in ("accepted", "executing")
    assert other.lookup(gid(41), timeout_s=0.2) is None
    other.adopt(gid(40))
    assert NavGoalKind.WAIT in other._clients and NavGoalKind.SPIN not in other._clients
    result = until_terminal(other, gid(40))[-1]
    assert result.status == "succeeded" and result.detail == {"error_code": 0, "error_msg": ""}
    assert until_terminal(sender, gid(40))[-1].status == "succeeded", "the late acceptance was tracked"
    assert other.lookup(gid(40), timeout_s=2.0) == "succeeded"


def test_clear_costmaps_succeeds_and_fails_with_why(graph: Graph) -> None:
    port = graph.port()
    ack = send(port, NavGoal(kind=NavGoalKind.CLEAR_COSTMAPS), gid(50))
    assert ack.accepted and ack.goal_id == gid(50)
    (result,) = port.poll(0.0)
    assert (result.goal_id, result.type, result.status) == (gid(50), "result", "succeeded")
    assert result.detail == {"error_code": 0, "error_msg": "", "costmaps": ["global", "local"]}
    assert sorted(graph.nav2.cleared) == ["global", "local"]
    graph.nav2.cleared.clear()
    assert send(port, NavGoal(kind=NavGoalKind.CLEAR_COSTMAPS, costmaps=("local",)), gid(51)).accepted
    assert port.poll(0.0)[0].status == "succeeded" and graph.nav2.cleared == ["local"]
    # A costmap that does not answer in time: accepted, then aborted, saying which.
    graph.nav2.clear_delay_s["local"] = 2.0
    began = time.monotonic()
    assert send(port, NavGoal(kind=NavGoalKind.CLEAR_COSTMAPS), gid(52), timeout_s=0.5).accepted
    assert time.monotonic() - began < 2.0
    (result,) = port.poll(0.0)
    assert result.status == "aborted" and "/local_costmap/clear_entirely_local_costmap did not answer" in \
        result.detail["error_msg"]
    wait_until(lambda: graph.nav2.cleared.count("local") == 2, 5.0, "the slow clearing to end (before teardown)")


def test_clear_costmaps_refused_for_a_service_absent_or_configured_empty(graph: Graph) -> None:
    port = graph.port(clear_local_costmap_service="/nobody/clear_entirely_local_costmap")
    began = time.monotonic()
    ack = send(port, NavGoal(kind=NavGoalKind.CLEAR_COSTMAPS), gid(60), timeout_s=1.0)
    assert time.monotonic() - began < 3.0
    assert not ack.accepted and "/nobody/clear_entirely_local_costmap" in ack.reason
    assert port.poll(0.2) == [] and graph.nav2.cleared == [], "nothing called, nothing queued"
    port = graph.port(clear_global_costmap_service="")
    ack = send(port, NavGoal(kind=NavGoalKind.CLEAR_COSTMAPS, costmaps=("global",)), gid(61))
    assert not ack.accepted and "serves no global costmap" in ack.reason
    assert send(port, NavGoal(kind=NavGoalKind.CLEAR_COSTMAPS, costmaps=("local",)), gid(62)).accepted


# -- the translations, without a graph -----------------------------------------------------------------


def test_through_poses_goes_to_jazzys_pose_array_too() -> None:
    jazzy_goal = SimpleNamespace(poses=[], behavior_tree="")
    msg = cv.nav_goal_to_msg(NavGoal(kind=NavGoalKind.NAVIGATE_THROUGH_POSES, poses=ROUTE), jazzy_goal,
                             frame_id="map", stamp=12.5)
    assert [p.pose.position.x for p in msg.poses] == [1.0, 2.0, 3.0]
    assert {p.header.frame_id for p in msg.poses} == {"map"} and msg.poses[0].header.stamp.sec == 12
    kilted = cv.nav_goal_to_msg(NavGoal(kind=NavGoalKind.NAVIGATE_THROUGH_POSES, poses=ROUTE),
                                NavigateThroughPoses.Goal(), frame_id="odom", stamp=1.0)
    assert kilted.poses.header.frame_id == "odom" and len(kilted.poses.goals) == 3
    with pytest.raises(ValueError):
        cv.nav_goal_to_msg(NavGoal(kind=NavGoalKind.CLEAR_COSTMAPS), NavigateToPose.Goal(), frame_id="map", stamp=0.0)


def test_waypoint_reports_by_name_jazzys_missed_waypoints_and_an_unknown_state() -> None:
    W = WaypointStatus
    reports = cv.waypoint_statuses_to_reports([
        W(waypoint_status=W.PENDING, waypoint_index=0), W(waypoint_status=W.FAILED, waypoint_index=1, error_code=9),
        W(waypoint_status=200, waypoint_index=2), SimpleNamespace(index=4, error_code=601, goal=None), 5])
    assert [(r.index, r.state, r.error_code) for r in reports] == [
        (0, WaypointState.PENDING, 0), (1, WaypointState.FAILED, 9), (4, WaypointState.FAILED, 601),
        (5, WaypointState.FAILED, 0)]
    # A result without waypoint fields has no "waypoints" key (Jazzy's NavigateThroughPoses, a behaviour).
    ev = cv.nav_result_to_event(gid(1), Spin.Result(error_code=701, error_msg="late"), status="aborted", stamp=3.0)
    assert ev.detail == {"error_code": 701, "error_msg": "late"} and ev.stamp == 3.0
