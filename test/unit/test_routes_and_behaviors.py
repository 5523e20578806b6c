"""Waypoint missions and Nav2's behaviours, through the whole core on the in-process simulated robot (issue 16,
parts 2 and 3): each waypoint of a route is an obligation judged on the harness's own journaled poses, never
on Nav2's word; a stuck robot is freed by a budgeted behaviour the recovery policy runs through the same gate."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from robot_harness.compose import mission_runner
from robot_harness.core.clock import IdGenerator
from robot_harness.core.config import OutcomeTolerance, load_harness_config
from robot_harness.core.journal import MemoryJournal
from robot_harness.core.nav_goals import NavGoal, NavGoalKind, WaypointReport, WaypointState
from robot_harness.core.outcome import BackendTerminal, OutcomeVerdict, check_behavior_outcome, check_route_waypoints
from robot_harness.core.records import (ActionStatus, Availability, EventType, FieldMeta, MissionStatus, Pose2D,
                                        WorldSnapshot)
from robot_harness.core.scenario import Scenario
from robot_harness.core.skills import default_skills
from robot_harness.eval.modes import sim_config
from robot_harness.eval.simports import SimPorts

PLACES = {"dock": {"x": 0.0, "y": 0.0}, "a": {"x": 3.0, "y": 0.0}, "b": {"x": 3.0, "y": 3.0},
          "c": {"x": 0.0, "y": 3.0}, "far": {"x": 6.0, "y": 0.0}}


def route_call(tool: str, *places: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": {"places": list(places)}}]}


def go(place: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "navigate_to", "arguments": {"place": place}}]}


def run(tmp_path: Path, goal: str, turns: list[dict[str, Any]], *, faults: list[dict[str, Any]] = (),
        robot: dict[str, Any] | None = None, harness: dict[str, Any] | None = None):
    sc = Scenario.model_validate({
        "name": "t", "goal": goal, "world": {"places": PLACES, "start": "dock"},
        "robot": {"speed": 2.0, "faults": list(faults), **(robot or {})}, "planner": {"turns": turns},
        "limits": {"mission_timeout_s": 120, "max_turns": 12},
        "harness": {"navigation": {"timeout_s": 6.0, "timeout_per_m_s": 1.0}, **(harness or {})}})
    ports = SimPorts(config=sim_config(sc), artifacts_dir=tmp_path / "artifacts")
    config = load_harness_config(overrides=sc.harness_config())
    ids = IdGenerator(7)
    journal = MemoryJournal(clock=ports.clock, ids=ids)
    journal.setup()
    from robot_harness.core.planner_script import ScriptedPlanner

    runner = mission_runner(config=config, journal=journal, clock=ports.clock, ids=ids,
                            skills=default_skills(config.navigation), snapshots=ports,
                            planner=ScriptedPlanner(sc.planner.turns), navigation=ports, robot_io=ports,
                            sleep=ports.sleep, feasibility=ports)
    return runner.run(goal), journal, ports


def payloads(journal: MemoryJournal, kind: EventType) -> list[dict[str, Any]]:
    return [e.payload for e in journal.events(types=[kind])]


def steps(out) -> dict[str, dict[str, Any]]:
    return {s["obligation_id"]: s for s in out.verdict["steps"]}


# --------------------------------------------------------------------------- routes, end to end


@pytest.mark.parametrize("tool", ["navigate_through", "follow_waypoints"])
def test_a_route_is_verified_waypoint_by_waypoint_on_the_harness_s_own_poses(tmp_path, tool):
    out, journal, ports = run(tmp_path, "Go to c via a and b.", [route_call(tool, "a", "b", "c"), {"done": "at c"}])
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    s = steps(out)
    for ob, place in (("o1", "a"), ("o2", "b")):
        assert s[ob]["verdict"] == "satisfied" and f"{place} (waypoint #" in s[ob]["reason"], s[ob]
    seen = [p for p in payloads(journal, EventType.ROBOT_ACTION_PROGRESS) if p.get("waypoint_reached")]
    assert [p["waypoint_reached"]["place"] for p in seen] == ["a", "b", "c"]
    kept = [p for p in payloads(journal, EventType.WORLD_SNAPSHOT_CAPTURED) if p["reason"] == "waypoint_reached"]
    assert {p["snapshot"]["snapshot_id"] for p in kept} == {p["waypoint_reached"]["snapshot_id"] for p in seen}
    (receipt,) = [p["receipt"] for p in payloads(journal, EventType.RECEIPT_RECORDED) if p["receipt"]["skill"] == tool]
    assert [w["place"] for w in receipt["result"]["waypoints"]] == ["a", "b", "c"]
    assert all(w["observed"] for w in receipt["result"]["waypoints"])


@pytest.mark.parametrize("tool", ["navigate_through", "follow_waypoints"])
def test_a_silently_skipped_middle_waypoint_fails_its_obligation_and_is_named_though_nav2_says_succeeded(
        tmp_path, tool):
    out, journal, ports = run(tmp_path, "Go to c via a and b.", [route_call(tool, "a", "b", "c"), {"done": "at c"}],
                              faults=[{"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1}])
    assert ports.world.goal(1).status.value == "SUCCEEDED", "the sim's navigator claims the route done"
    assert out.status is not MissionStatus.SUCCEEDED
    s = steps(out)
    assert s["o1"]["verdict"] == "satisfied"
    assert s["o2"]["verdict"] == "violated" and "b (waypoint #2" in s["o2"]["reason"] \
        and "never observed" in s["o2"]["reason"], s["o2"]
    assert s["o3"]["verdict"] != "satisfied"
    assert "o2 violated (b (waypoint #2" in out.summary
    (outcome,) = payloads(journal, EventType.ROBOT_ACTION_OUTCOME)
    assert outcome["state"] == "FAILED" and "waypoint b (#2) was never observed" in outcome["reason"]


def test_a_waypoint_nav2_reports_missed_fails_even_when_the_robot_happens_to_pass_near_it(tmp_path):
    # b lies on the way from a to c: the robot passes within tolerance of it, but Nav2 says it skipped it
    places_on_line = {"a": {"x": 2.0, "y": 0.0}, "b": {"x": 2.0, "y": 1.5}, "c": {"x": 2.0, "y": 3.0}}
    PLACES.update(places_on_line)
    try:
        out, journal, _ = run(tmp_path, "Go to c via a and b.",
                              [route_call("navigate_through", "a", "b", "c"), {"done": "at c"}],
                              faults=[{"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1, "reported": True}])
    finally:
        PLACES.update({"a": {"x": 3.0, "y": 0.0}, "b": {"x": 3.0, "y": 3.0}, "c": {"x": 0.0, "y": 3.0}})
    s = steps(out)
    assert out.status is not MissionStatus.SUCCEEDED
    assert s["o2"]["verdict"] == "violated" and "reported skipped by the backend" in s["o2"]["reason"], s["o2"]


def test_follow_waypoints_reporting_a_missed_waypoint_and_going_on_is_not_success(tmp_path):
    out, journal, _ = run(tmp_path, "Stop at a, b and c.", [route_call("follow_waypoints", "a", "b", "c"),
                                                           {"done": "done"}],
                          faults=[{"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1, "reported": True}],
                          robot={"stop_on_failure": False})
    assert out.status is not MissionStatus.SUCCEEDED
    assert steps(out)["o2"]["verdict"] == "violated" and "reported failed" in steps(out)["o2"]["reason"]


def test_the_route_can_be_repaired_by_visiting_the_missed_waypoint_in_order(tmp_path):
    """After a skipped b the planner drives to b and then c: o2 and o3 are satisfied by navigate_to receipts
    after o1 (the route's pass of a), and the mission succeeds."""
    out, _, _ = run(tmp_path, "Go to c via a and b.",
                    [route_call("navigate_through", "a", "b", "c"), go("b"), go("c"), {"done": "at c"}],
                    faults=[{"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1}])
    assert out.status is MissionStatus.SUCCEEDED, out.summary


def test_a_route_leg_into_an_obstacle_is_refused_before_anything_is_sent_naming_the_leg(tmp_path):
    site = {"resolution": 0.1, "origin": {"x": -2.0, "y": -2.0}, "width_m": 12.0, "height_m": 8.0, "inflation_m": 0.2,
            "obstacles": [{"x_min": 2.6, "y_min": 2.6, "x_max": 3.4, "y_max": 3.4}]}
    out, journal, ports = run(tmp_path, "Go to c via a and b.", [route_call("navigate_through", "a", "b", "c")],
                              robot={"map": site})
    assert ports.sent_goals == [] and out.status is not MissionStatus.SUCCEEDED
    (checked,) = payloads(journal, EventType.ACTION_PRECONDITION_CHECKED)
    failed = {c["name"]: c["detail"] for c in checked["checks"] if not c["ok"]}
    assert "goal_cell_free" in failed and failed["goal_cell_free"].startswith("waypoint #2: "), failed


def test_an_unknown_place_in_a_route_is_the_callers_mistake_and_nothing_moves(tmp_path):
    out, journal, ports = run(tmp_path, "Go to c via a and b.", [route_call("navigate_through", "a", "nowhere", "c")])
    assert ports.sent_goals == []
    (result,) = payloads(journal, EventType.TOOL_RESULT_RECORDED)
    assert result["status"] == "error" and "nowhere" in result["error"]["message"]


# --------------------------------------------------------------------------- behaviours as recovery


STUCK = {"kind": "stuck", "on_goal": 1, "after_s": 0.3, "patience_s": 2.0}


def test_a_stuck_robot_is_freed_by_a_budgeted_back_up_and_the_mission_then_succeeds(tmp_path):
    out, journal, ports = run(tmp_path, "Go to far.", [go("far"), go("far"), go("far"), {"done": "at far"}],
                              faults=[STUCK])
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    recovery_calls = [p for p in payloads(journal, EventType.TOOL_CALL_RECORDED) if p.get("proposed_by") == "recovery"]
    assert [c["name"] for c in recovery_calls] == ["clear_costmaps", "back_up"], "Nav2's ladder: clear, then back up"
    decided = payloads(journal, EventType.RECOVERY_DECIDED)
    assert [d["decision"]["rung"] for d in decided] == ["nav2_behavior", "nav2_behavior"]
    assert decided[-1]["decision"]["budgets_left"]["nav2_behavior"] == 1, "each behaviour is charged"
    outcomes = {p["action"]["skill"]: p for p in payloads(journal, EventType.ROBOT_ACTION_OUTCOME)}
    assert outcomes["back_up"]["state"] == "SUCCEEDED" and "backed up" in outcomes["back_up"]["reason"]
    receipts = [p["receipt"] for p in payloads(journal, EventType.RECEIPT_RECORDED) if p["receipt"]["skill"] == "back_up"]
    assert len(receipts) == 1 and receipts[0]["status"] == "SUCCEEDED"
    delivered = [p for p in payloads(journal, EventType.RUNTIME_EVENT_DELIVERED) if p.get("type") == "recovery"]
    assert any("back_up" in str(p) and "retry" in str(p) for p in delivered)


def test_without_behaviour_budget_the_stuck_robot_is_not_freed(tmp_path):
    out, journal, _ = run(tmp_path, "Go to far.", [go("far"), go("far"), go("far"), {"done": "at far"}],
                          faults=[STUCK], harness={"recovery": {"nav2_behavior": 0}})
    assert out.status is not MissionStatus.SUCCEEDED
    assert not [p for p in payloads(journal, EventType.TOOL_CALL_RECORDED) if p.get("proposed_by") == "recovery"]


def test_the_planner_is_never_offered_a_behaviour_and_is_refused_one(tmp_path):
    assert not {"back_up", "spin", "wait", "clear_costmaps"} & {t["function"]["name"]
                                                              for t in default_skills().tool_specs()}
    out, journal, ports = run(tmp_path, "Go to far.",
                              [{"tool_calls": [{"name": "back_up", "arguments": {"distance": 0.3}}]}])
    (result,) = payloads(journal, EventType.TOOL_RESULT_RECORDED)
    assert result["status"] == "error" and result["error"]["code"] == "unknown_tool"
    assert ports.sent_goals == []


# --------------------------------------------------------------------------- the pure checks


def snap(pose: Pose2D, *, sid: str = "s", stamp: float = 100.0, jumps: int = 0) -> WorldSnapshot:
    meta = FieldMeta(availability=Availability.AVAILABLE, source_stamp=stamp, age_s=0.05, max_age_s=0.5,
                     source="/amcl_pose")
    return WorldSnapshot(snapshot_id=sid, captured_at=stamp, pose=pose, pose_meta=meta, pose_jumps=jumps)


TOL = OutcomeTolerance()


@pytest.mark.parametrize("end, state, words", [
    (Pose2D(x=-0.3, y=0.0), ActionStatus.SUCCEEDED, "backed up 0.30 m"),
    (Pose2D(x=0.02, y=0.0), ActionStatus.FAILED, "disagrees: backed up -0.02 m"),
    (Pose2D(x=0.3, y=0.0), ActionStatus.FAILED, "disagrees"),  # drove forward
])
def test_a_back_up_is_judged_on_the_fresh_pose_against_the_pose_at_dispatch(end, state, words):
    goal = NavGoal(kind=NavGoalKind.BACK_UP, backup_dist_m=0.3, backup_speed_mps=0.1)
    v = check_behavior_outcome(goal=goal, backend=BackendTerminal.SUCCEEDED, post=snap(end, sid="post"),
                               dispatch=snap(Pose2D(x=0.0, y=0.0), sid="pre"), tol=TOL)
    assert v.state is state and words in v.reason, v.reason


def test_a_spin_must_have_turned_by_the_angle_asked_and_a_jump_makes_it_unknown():
    goal = NavGoal(kind=NavGoalKind.SPIN, spin_dist_rad=math.pi / 2)
    start = snap(Pose2D(x=1.0, y=1.0, yaw=0.0), sid="pre")
    turned = check_behavior_outcome(goal=goal, backend=BackendTerminal.SUCCEEDED,
                                    post=snap(Pose2D(x=1.0, y=1.0, yaw=math.pi / 2), sid="post"), dispatch=start, tol=TOL)
    assert turned.state is ActionStatus.SUCCEEDED
    idle = check_behavior_outcome(goal=goal, backend=BackendTerminal.SUCCEEDED,
                                  post=snap(Pose2D(x=1.0, y=1.0, yaw=0.0), sid="post"), dispatch=start, tol=TOL)
    assert idle.state is ActionStatus.FAILED
    jumped = check_behavior_outcome(goal=goal, backend=BackendTerminal.SUCCEEDED,
                                    post=snap(Pose2D(x=1.0, y=1.0, yaw=math.pi / 2), sid="post", jumps=1),
                                    dispatch=start, tol=TOL)
    assert jumped.state is ActionStatus.UNKNOWN
    assert check_behavior_outcome(goal=goal, backend=BackendTerminal.NONE, post=start, dispatch=start,
                                  tol=TOL).state is ActionStatus.UNKNOWN


def test_a_route_with_a_verified_end_and_a_missed_waypoint_is_failed_naming_it():
    goal = NavGoal(kind=NavGoalKind.NAVIGATE_THROUGH_POSES,
                   poses=(Pose2D(x=1.0, y=0.0), Pose2D(x=2.0, y=0.0), Pose2D(x=3.0, y=0.0)))
    ok = OutcomeVerdict(state=ActionStatus.SUCCEEDED, reason="backend succeeded and fresh pose is 0.01 m")
    seen = {0: ("s1", 10.0), 2: ("s3", 12.0)}
    told = (WaypointReport(index=1, state=WaypointState.COMPLETED),)  # Nav2's word: no evidence
    v = check_route_waypoints(ok, goal=goal, seen=seen, reports=told, names=("a", "b", "c"))
    assert v.state is ActionStatus.FAILED and "waypoint b (#2) was never observed" in v.reason
    assert v.evidence["waypoints_missed"] == 1
    all_seen = check_route_waypoints(ok, goal=goal, seen={0: ("s1", 1.0), 1: ("s2", 2.0)}, reports=(),
                                     names=("a", "b", "c"))
    assert all_seen.state is ActionStatus.SUCCEEDED, "the last waypoint is the end, judged by the outcome check"
    reported = check_route_waypoints(ok, goal=goal, seen={0: ("s1", 1.0), 1: ("s2", 2.0)},
                                     reports=(WaypointReport(index=0, state=WaypointState.SKIPPED),),
                                     names=("a", "b", "c"))
    assert reported.state is ActionStatus.FAILED and "waypoint a (#1) reported skipped" in reported.reason
