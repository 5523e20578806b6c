"""SimPorts.send_goal with every NavGoal kind: what the events say, next to what really happened.

Real ``SimPorts`` over a real ``SimWorld`` on the virtual clock; nothing of the project is mocked.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from robot_harness.core.nav_goals import NavGoal, NavGoalKind, WaypointReport, WaypointState
from robot_harness.core.ports import BackendEvent
from robot_harness.core.records import Pose2D
from robot_harness.eval.simports import SimPorts
from robot_harness.sim import SimConfig

L_ROUTE = (Pose2D(x=2.0, y=0.0, yaw=-1.5), Pose2D(x=2.0, y=2.0, yaw=0.5), Pose2D(x=0.0, y=2.0, yaw=3.0))
CORNER = L_ROUTE[1]
WALL_MAP = {"resolution": 0.1, "origin": {"x": -2.0, "y": -3.0}, "width_m": 10.0, "height_m": 6.0,
            "obstacles": [{"x_min": 3.0, "y_min": -3.0, "x_max": 3.4, "y_max": 3.0}], "inflation_m": 0.3}


def make_ports(tmp_path: Path, *faults: dict[str, Any], **kw: Any) -> SimPorts:
    kw.setdefault("speed", 1.0)
    return SimPorts(config=SimConfig.from_data({"faults": list(faults), **kw}), artifacts_dir=tmp_path)


def send(ports: SimPorts, goal: NavGoal, goal_id: str) -> None:
    target = goal.target or ports.world.localized_pose
    ack = ports.send_goal(target=target, frame_id="map", timeout_s=2.0, goal_id=goal_id, goal=goal)
    assert ack.accepted, ack.reason


def run_to_result(ports: SimPorts, goal_id: str, budget_s: float = 60.0) -> tuple[BackendEvent, list[BackendEvent]]:
    """Poll until ``goal_id``'s result; (the result, the goal's feedback events in order)."""
    feedback: list[BackendEvent] = []
    start = ports.clock.now()
    while ports.clock.now() - start < budget_s:
        for e in ports.poll(0.1):
            if e.goal_id != goal_id:
                continue
            if e.type == "result":
                return e, feedback
            feedback.append(e)
    pytest.fail(f"no result for {goal_id} within {budget_s} s")


def route(kind: NavGoalKind, poses: tuple[Pose2D, ...] = L_ROUTE) -> NavGoal:
    return NavGoal(kind=kind, poses=poses)


def closest(ports: SimPorts, p: Pose2D) -> float:
    return min(q.distance_to(p) for _, q in ports.trajectory)


def test_through_poses_reports_every_waypoint_and_counts_poses_down(tmp_path: Path) -> None:
    ports = make_ports(tmp_path)
    send(ports, route(NavGoalKind.NAVIGATE_THROUGH_POSES), "a" * 32)
    ports.advance(0.02)  # the status topic's next message
    assert ports.builder.active_goal_ids == ("a" * 32,)
    result, feedback = run_to_result(ports, "a" * 32)
    assert result.status == "succeeded"
    assert result.detail == {"error_code": 0, "error_msg": "", "waypoints": [
        WaypointReport(index=i, state=WaypointState.COMPLETED).model_dump(mode="json") for i in range(3)]}
    remaining = [e.detail["number_of_poses_remaining"] for e in feedback]
    assert remaining[0] == 3 and remaining[-1] == 1 and remaining == sorted(remaining, reverse=True)
    assert {3, 2, 1} <= set(remaining)
    assert all(e.distance_remaining is not None and e.current_pose is not None for e in feedback)
    assert ports.trajectory[-1][1].distance_to(L_ROUTE[-1]) < 0.03
    assert ports.infeasible_dispatches == 0 and ports.sent_goals == ["a" * 32]


def test_follow_waypoints_feedback_names_the_current_waypoint(tmp_path: Path) -> None:
    ports = make_ports(tmp_path)
    send(ports, route(NavGoalKind.FOLLOW_WAYPOINTS), "b" * 32)
    result, feedback = run_to_result(ports, "b" * 32)
    assert result.status == "succeeded" and result.detail == {"error_code": 0, "error_msg": "", "waypoints": []}
    current = [e.detail["current_waypoint"] for e in feedback]
    assert current == sorted(current) and set(current) == {0, 1, 2}
    assert all("number_of_poses_remaining" not in e.detail for e in feedback)


def test_a_silent_skip_is_reported_completed_while_the_robot_never_went_there(tmp_path: Path) -> None:
    ports = make_ports(tmp_path, {"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1})
    send(ports, route(NavGoalKind.NAVIGATE_THROUGH_POSES), "c" * 32)
    result, _ = run_to_result(ports, "c" * 32)
    assert result.status == "succeeded"
    assert [w["state"] for w in result.detail["waypoints"]] == ["completed"] * 3
    assert closest(ports, CORNER) > 0.5 and ports.world.goal(1).waypoints[1].reached_t is None


@pytest.mark.parametrize("stop_on_failure, status", [(True, "aborted"), (False, "succeeded")])
def test_a_reported_skip_in_follow_waypoints_lists_the_missed_waypoint(tmp_path: Path, stop_on_failure: bool,
                                                                        status: str) -> None:
    ports = make_ports(tmp_path, {"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1, "reported": True},
                       stop_on_failure=stop_on_failure)
    send(ports, route(NavGoalKind.FOLLOW_WAYPOINTS), "d" * 32)
    result, _ = run_to_result(ports, "d" * 32)
    assert result.status == status
    (missed,) = [WaypointReport.model_validate(w) for w in result.detail["waypoints"]]
    assert (missed.index, missed.state, missed.error_code, missed.missed) == (1, WaypointState.FAILED, 9000, True)
    assert result.detail["error_code"] == (603 if stop_on_failure else 0)
    assert closest(ports, CORNER) > 0.5


def test_a_reported_skip_in_through_poses_says_skipped(tmp_path: Path) -> None:
    ports = make_ports(tmp_path, {"kind": "skip_waypoint", "on_goal": 1, "waypoint": 0, "reported": True})
    send(ports, route(NavGoalKind.NAVIGATE_THROUGH_POSES), "e" * 32)
    result, feedback = run_to_result(ports, "e" * 32)
    assert result.status == "succeeded"
    assert [w["state"] for w in result.detail["waypoints"]] == ["skipped", "completed", "completed"]
    assert feedback[0].detail["number_of_poses_remaining"] == 2
    assert closest(ports, L_ROUTE[0]) > 0.5


def test_a_route_leg_into_an_obstacle_is_infeasible_and_aborts_with_the_planners_number(tmp_path: Path) -> None:
    ports = make_ports(tmp_path, map=WALL_MAP)
    poses = (Pose2D(x=1.0, y=0.0), Pose2D(x=3.2, y=0.0), Pose2D(x=1.0, y=1.0))
    send(ports, route(NavGoalKind.NAVIGATE_THROUGH_POSES, poses), "f" * 32)
    assert ports.infeasible_dispatches == 1
    result, _ = run_to_result(ports, "f" * 32)
    assert (result.status, result.detail["error_code"]) == ("aborted", 306)
    assert "occupied" in result.detail["error_msg"]
    assert [w["state"] for w in result.detail["waypoints"]] == ["failed"] * 3
    send(ports, route(NavGoalKind.FOLLOW_WAYPOINTS, poses), "0" * 32)
    assert ports.infeasible_dispatches == 2
    result, _ = run_to_result(ports, "0" * 32)
    assert (result.status, result.detail["error_code"]) == ("aborted", 603)
    assert [(w["index"], w["error_code"]) for w in result.detail["waypoints"]] == [(1, 206)]


def test_a_follow_waypoints_goal_while_bt_navigator_is_inactive_is_infeasible(tmp_path: Path) -> None:
    ports = make_ports(tmp_path, {"kind": "navigator_inactive", "at_s": 0.0})
    send(ports, route(NavGoalKind.FOLLOW_WAYPOINTS), "1" * 32)
    assert ports.infeasible_dispatches == 1
    result, _ = run_to_result(ports, "1" * 32)
    assert (result.status, result.detail["error_code"]) == ("aborted", 603)
    assert result.detail["waypoints"][0]["error_code"] == 600
    ack = ports.send_goal(target=L_ROUTE[-1], frame_id="map", timeout_s=2.0, goal_id="2" * 32,
                          goal=route(NavGoalKind.NAVIGATE_THROUGH_POSES))
    assert not ack.accepted and ports.infeasible_dispatches == 2
    send(ports, NavGoal(kind=NavGoalKind.WAIT, wait_s=0.5), "3" * 32)  # behavior_server's: fine, not counted
    result, _ = run_to_result(ports, "3" * 32)
    assert result.status == "succeeded" and ports.infeasible_dispatches == 2


def test_behaviour_feedback_carries_progress_and_no_distance(tmp_path: Path) -> None:
    ports = make_ports(tmp_path)
    cases = [
        (NavGoal(kind=NavGoalKind.SPIN, spin_dist_rad=-1.5), "angular_distance_traveled", -1.5),
        (NavGoal(kind=NavGoalKind.BACK_UP, backup_dist_m=0.3, backup_speed_mps=0.15), "distance_traveled", 0.3),
        (NavGoal(kind=NavGoalKind.WAIT, wait_s=1.0), "time_left_s", 0.0),
    ]
    for n, (goal, key, last) in enumerate(cases):
        goal_id = f"{n + 4}" * 32
        send(ports, goal, goal_id)
        ports.advance(0.02)
        assert ports.builder.active_goal_ids == (goal_id,)  # the robot is busy
        result, feedback = run_to_result(ports, goal_id)
        assert result.status == "succeeded" and result.detail == {"error_code": 0, "error_msg": ""}
        assert feedback and all(e.distance_remaining is None and e.current_pose is not None for e in feedback)
        values = [e.detail[key] for e in feedback]
        assert values == sorted(values, reverse=key != "distance_traveled")  # a spin's angle is signed: -1.5
        assert abs(values[-1] - last) < abs(values[0] - last)
    assert ports.world.true_pose.x == pytest.approx(-0.3 * math.cos(-1.5), abs=1e-6)
    assert ports.infeasible_dispatches == 0 and ports.blind_dispatches == 0


def test_behaviour_errors_reach_the_result(tmp_path: Path) -> None:
    ports = make_ports(tmp_path)
    send(ports, NavGoal(kind=NavGoalKind.SPIN, spin_dist_rad=3.0, time_allowance_s=1.0), "7" * 32)
    result, _ = run_to_result(ports, "7" * 32)
    assert (result.status, result.detail["error_code"]) == ("aborted", 701)
    assert result.detail["error_msg"].startswith("spin failed:Exceeded time allowance")


def test_clear_costmaps_answers_at_once(tmp_path: Path) -> None:
    ports = make_ports(tmp_path)
    before = ports.clock.now()
    send(ports, NavGoal(kind=NavGoalKind.CLEAR_COSTMAPS, costmaps=("local",)), "8" * 32)
    events = ports.poll(0.0)
    assert [(e.goal_id, e.type, e.status, e.detail) for e in events] == [
        ("8" * 32, "result", "succeeded", {"error_code": 0, "error_msg": ""})]
    assert ports.clock.now() == before and ports.world.costmap_clears == 1
    assert ports.lookup("8" * 32, timeout_s=0) == "succeeded" and ports.world.goals_received == 0
    assert not ports.cancel("8" * 32, timeout_s=1.0)


def test_a_stuck_robot_is_freed_by_a_backup_goal(tmp_path: Path) -> None:
    ports = make_ports(tmp_path, {"kind": "stuck", "at_s": 0.0})
    send(ports, NavGoal(poses=(Pose2D(x=2.0, y=0.0),)), "9" * 32)
    result, _ = run_to_result(ports, "9" * 32)
    assert result.status == "aborted"
    assert (result.detail["error_code"], result.detail["error_msg"]) == (105, "Failed to make progress")
    send(ports, NavGoal(kind=NavGoalKind.BACK_UP, backup_dist_m=0.3, backup_speed_mps=0.15), "a1" * 16)
    assert run_to_result(ports, "a1" * 16)[0].status == "succeeded"
    send(ports, NavGoal(poses=(Pose2D(x=2.0, y=0.0),)), "b1" * 16)
    result, _ = run_to_result(ports, "b1" * 16)
    assert result.status == "succeeded" and ports.trajectory[-1][1].distance_to(Pose2D(x=2.0, y=0.0)) < 0.03


def test_a_claimed_completion_keeps_its_message_next_to_the_error_fields(tmp_path: Path) -> None:
    ports = make_ports(tmp_path, {"kind": "claims_completion", "at_s": 0.0}, map=WALL_MAP)
    send(ports, NavGoal(poses=(Pose2D(x=3.2, y=0.0),)), "c1" * 16)
    result, _ = run_to_result(ports, "c1" * 16)
    assert result.status == "aborted" and result.detail["error_code"] == 206
    assert result.detail["message"] == "Arrived at the goal. Task complete."
