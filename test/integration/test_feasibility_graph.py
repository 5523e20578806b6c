"""The readiness and feasibility gate on the real node graph (issue 16, part 1): the supervisor asks sim_robot's
planner_server, global costmap and lifecycle services over loopback DDS right before each navigation."""
from __future__ import annotations

from ._graph import DONE, GO_SPOT, PLACES, faults_once, of_type, run, scenario

SPOT = PLACES["spot"]
MAP = {"resolution": 0.1, "origin": {"x": -3.0, "y": -3.0}, "width_m": 8.0, "height_m": 7.0, "inflation_m": 0.2}


def checks_of(events):
    (checked,) = of_type(events, "ACTION_PRECONDITION_CHECKED")
    return {c["name"]: c for c in checked.payload["checks"]}


def received(report):
    return [e for e in report["sim_truth"]["goal_log"] if e["event"] == "received"]


def test_a_goal_inside_an_obstacle_is_refused_before_anything_is_sent(tmp_path):
    box = {"x_min": SPOT["x"] - 0.4, "y_min": SPOT["y"] - 0.4, "x_max": SPOT["x"] + 0.4, "y_max": SPOT["y"] + 0.4}
    report, events = run(tmp_path, scenario([GO_SPOT, DONE], robot={"map": {**MAP, "obstacles": [box]}}))
    call = report["tool_calls"][0]
    assert call["result"]["status"] == "precondition_changed", call
    failed = {c["name"]: c["detail"] for c in call["result"]["content"]["failed"]}
    assert set(failed) == {"path_feasible", "goal_cell_free"}, failed
    assert "cost 254" in failed["goal_cell_free"] and "206" in failed["path_feasible"], failed  # GOAL_OCCUPIED
    assert received(report) == [] and of_type(events, "ROBOT_ACTION_STARTED") == []
    assert report["status"] != "SUCCEEDED"


def test_a_detour_passes_with_its_length_and_the_timeout_follows_it(tmp_path):
    wall = {"x_min": 0.9, "y_min": -0.5, "x_max": 1.1, "y_max": 2.0}  # between the dock and the spot
    # The detour needs ~4.9 s to its terminal report: FAST (3 s + 0.5 s/m, 4.84 s here) left it no slack.
    nav = {"timeout_s": 10.0, "timeout_per_m_s": 0.5}
    report, events = run(tmp_path, scenario([GO_SPOT, DONE], robot={"map": {**MAP, "obstacles": [wall]}},
                                            harness={"navigation": nav}, timeout_s=45.0))
    assert report["status"] == "SUCCEEDED", report["summary"]
    checks = checks_of(events)
    assert all(c["ok"] and c["applicable"] for n, c in checks.items()
               if n in ("lifecycle_active", "localization_covariance", "path_feasible", "goal_cell_free")), checks
    length = float(checks["path_feasible"]["detail"].split("a path of ")[1].split(" m")[0])
    straight = (SPOT["x"] ** 2 + SPOT["y"] ** 2) ** 0.5
    assert length > straight + 0.3, (length, straight)
    (started,) = of_type(events, "ROBOT_ACTION_STARTED")
    assert started.payload["intent"]["timeout_s"] >= nav["timeout_s"] + nav["timeout_per_m_s"] * length - 0.01


def test_an_inactive_navigator_and_a_lost_localizer_are_refused_at_dispatch(tmp_path):
    # both go wrong while the model "thinks" (3 s), right after the first turn started: admission saw a ready robot
    turns = [{**GO_SPOT, "delay_s": 3.0}, DONE]
    hook, broke = faults_once("MODEL_TURN_STARTED", {"kind": "navigator_inactive"},
                              {"kind": "high_covariance", "std_xy": 1.2})
    report, events = run(tmp_path, scenario(turns), graph_hook=hook)
    assert broke, "premise: both went wrong once the first turn had started"
    failed = {c["name"]: c["detail"] for c in report["tool_calls"][0]["result"]["content"]["failed"]}
    assert "bt_navigator inactive" in failed["lifecycle_active"], failed
    assert "std xy 1.2" in failed["localization_covariance"], failed
    assert received(report) == []


def test_a_robot_without_a_planner_server_or_costmap_has_those_checks_on_the_record_as_not_applicable(tmp_path):
    report, events = run(tmp_path, scenario([GO_SPOT, DONE]), extra_overrides={
        "supervisor": {"planner_action": "/nobody/compute_path_to_pose", "goal_cost_service": "/nobody/get_cost"}})
    assert report["status"] == "SUCCEEDED", report["summary"]
    checks = checks_of(events)
    assert checks["path_feasible"]["applicable"] is False and checks["path_feasible"]["ok"] is True
    assert "no /nobody/compute_path_to_pose action server" in checks["path_feasible"]["detail"]
    assert checks["goal_cell_free"]["applicable"] is False
    assert checks["lifecycle_active"]["applicable"] is True
