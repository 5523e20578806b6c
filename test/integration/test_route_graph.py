"""Waypoint missions and Nav2's behaviours on the real node graph (issue 16, parts 2 and 3): the supervisor sends
NavigateThroughPoses, FollowWaypoints, the costmap clears and BackUp to sim_robot over loopback DDS, watches each
waypoint on the aggregator's poses, and the verifier node judges every waypoint on those journaled poses."""
from __future__ import annotations

from typing import Any

from robot_harness.core.scenario import Scenario

from ._graph import of_type, run

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "a": {"x": 2.0, "y": 0.0, "yaw": 0.0},
          "b": {"x": 2.0, "y": 2.0, "yaw": 0.0}, "c": {"x": 0.0, "y": 2.0, "yaw": 0.0},
          "far": {"x": 4.0, "y": 0.0, "yaw": 0.0}}
ROUTE_TIMES = {"navigation": {"timeout_s": 20.0, "timeout_per_m_s": 2.0}}


def scenario(goal: str, turns: list[dict[str, Any]], *, faults: list[dict] | None = None,
             speed: float = 1.0) -> Scenario:
    # 1 m/s: the supervisor looks every 0.1 s, well inside a waypoint's 1 m wide tolerance even on a loaded host
    return Scenario.model_validate({
        "goal": goal, "world": {"places": PLACES, "start": "dock"},
        "robot": {"speed": speed, "pose_rate_hz": 20, "faults": faults or []},
        "planner": {"turns": turns}, "limits": {"mission_timeout_s": 90.0}, "harness": ROUTE_TIMES})


def route(tool: str, *places: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": {"places": list(places)}}]}


def go(place: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "navigate_to", "arguments": {"place": place}}]}


def test_a_route_through_three_waypoints_is_verified_waypoint_by_waypoint(tmp_path):
    report, events = run(tmp_path, scenario("Go to c via a and b.", [route("navigate_through", "a", "b", "c"),
                                                                    {"done": "At c."}]))
    assert report["status"] == "SUCCEEDED", report["summary"]
    steps = {s["obligation_id"]: s for s in report["verdict"]["steps"]}
    assert "a (waypoint #1" in steps["o1"]["reason"] and "b (waypoint #2" in steps["o2"]["reason"], steps
    assert report["verdict"]["verifier"] == "/verifier"
    reached = [e.payload["waypoint_reached"]["place"] for e in of_type(events, "ROBOT_ACTION_PROGRESS")
               if e.payload.get("waypoint_reached")]
    assert reached == ["a", "b", "c"]
    (sent,) = [e for e in report["sim_truth"]["goal_log"] if e["event"] == "received"]
    assert (sent["target"]["x"], sent["target"]["y"]) == (0.0, 2.0), "one goal for the whole route, ending at c"


def test_a_mission_whose_middle_waypoint_the_robot_skips_ends_not_succeeded_naming_it(tmp_path):
    report, events = run(tmp_path, scenario("Go to c via a and b.", [route("navigate_through", "a", "b", "c"),
                                                                    {"done": "At c."}],
                                            faults=[{"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1}]))
    assert report["status"] != "SUCCEEDED"
    assert "o2 violated (b (waypoint #2" in report["summary"], report["summary"]
    (outcome,) = of_type(events, "ROBOT_ACTION_OUTCOME")
    assert outcome.payload["state"] == "FAILED" and "waypoint b (#2) was never observed" in outcome.payload["reason"]
    ended = [e for e in report["sim_truth"]["goal_log"] if e["event"] == "succeeded"]
    assert ended, "the sim's navigator said SUCCEEDED for the route: the lie the harness did not believe"


def test_follow_waypoints_reporting_a_missed_waypoint_is_not_success(tmp_path):
    sc = scenario("Stop at a, b and c.", [route("follow_waypoints", "a", "b", "c"), {"done": "Done."}],
                  faults=[{"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1, "reported": True}])
    sc = sc.model_copy(update={"robot": sc.robot.model_copy(update={"stop_on_failure": False})})
    report, _ = run(tmp_path, sc)
    assert report["status"] != "SUCCEEDED"
    assert "b (waypoint #2" in report["summary"] and "reported failed" in report["summary"], report["summary"]


def test_a_stuck_robot_is_freed_by_a_budgeted_back_up_and_the_mission_then_succeeds(tmp_path):
    stuck = {"kind": "stuck", "on_goal": 1, "after_s": 0.2, "patience_s": 1.0}
    report, events = run(tmp_path, scenario("Go to far.", [go("far"), go("far"), go("far"), {"done": "At far."}],
                                            faults=[stuck], speed=2.0))
    assert report["status"] == "SUCCEEDED", report["summary"]
    by_recovery = [e.payload["name"] for e in of_type(events, "TOOL_CALL_RECORDED")
                   if e.payload.get("proposed_by") == "recovery"]
    assert by_recovery == ["clear_costmaps", "back_up"], by_recovery
    rungs = [e.payload["decision"]["rung"] for e in of_type(events, "RECOVERY_DECIDED")]
    assert rungs == ["nav2_behavior", "nav2_behavior"], rungs
    backed = [e.payload for e in of_type(events, "ROBOT_ACTION_OUTCOME") if e.payload["action"]["skill"] == "back_up"]
    assert backed and backed[0]["state"] == "SUCCEEDED" and "backed up" in backed[0]["reason"], backed
