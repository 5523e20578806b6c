"""The benchmark's parts: the in-process simulated robot, the independent
adjudicator, and the three harness modes on the same inputs."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.errors import HarnessTimeout
from robot_harness.core.records import Pose2D
from robot_harness.core.scenario import Scenario
from robot_harness.eval.adjudicate import adjudicate, duplicate_dispatches
from robot_harness.eval.modes import ABLATIONS, MODES, run_one, sim_config
from robot_harness.eval.simports import SimPorts

PLACES = {"dock": {"x": 0.0, "y": 0.0}, "spot": {"x": 1.5, "y": 0.5}}


def scenario(turns, *, faults=(), truth=None, goal="Go to spot, then return to dock.") -> Scenario:
    return Scenario.model_validate({
        "name": "t", "goal": goal, "world": {"places": PLACES, "start": "dock"},
        "robot": {"speed": 2.0, "faults": list(faults)}, "planner": {"turns": turns},
        "limits": {"mission_timeout_s": 60}, "harness": {"navigation": {"timeout_s": 5.0, "timeout_per_m_s": 1.0}},
        "truth": truth or {"visits": ["spot", "dock"], "final_at": "dock"},
    })


GO = lambda place: {"tool_calls": [{"name": "navigate_to", "arguments": {"place": place}}]}  # noqa: E731
DONE = {"done": "Back at the dock."}


def test_the_simulated_robot_moves_on_virtual_time_and_reports_by_goal_id(tmp_path: Path):
    ports = SimPorts(config=sim_config(scenario([])), artifacts_dir=tmp_path)
    ack = ports.send_goal(target=Pose2D(x=1.5, y=0.5), frame_id="map", timeout_s=2.0, goal_id="g" * 32)
    assert ack.accepted and ack.goal_id == "g" * 32
    ended = []
    while not ended:
        ended = [e for e in ports.poll(0.1) if e.type == "result"]
    assert ended[0].status == "succeeded" and ports.lookup("g" * 32, timeout_s=0) == "succeeded"
    snap = ports.capture(reason="test", mission_id="")
    assert snap.pose is not None and abs(snap.pose.x - 1.5) < 0.05 and snap.pose_meta.availability.value == "AVAILABLE"
    assert ports.clock.monotonic() > 0.5, "time passed only in the simulation"


def test_a_late_acknowledgment_times_out_while_the_robot_moves(tmp_path: Path):
    sc = scenario([], faults=[{"kind": "ack_delay", "on_goal": 1, "delay_s": 5.0}])
    ports = SimPorts(config=sim_config(sc), artifacts_dir=tmp_path)
    with pytest.raises(HarnessTimeout):
        ports.send_goal(target=Pose2D(x=1.5, y=0.5), frame_id="map", timeout_s=1.0, goal_id="a" * 32)
    assert ports.lookup("a" * 32, timeout_s=0) == "executing"
    assert ports.world.true_pose.x > 0.5, "accepted and moving, though nobody was told"


def test_the_adjudicator_reads_the_true_trajectory_not_the_reports(tmp_path: Path):
    sc = scenario([GO("spot"), GO("dock"), DONE], faults=[{"kind": "early_success", "on_goal": 1, "after_s": 0.2}])
    result = run_one(sc, "direct", workdir=tmp_path)
    assert result.status == "SUCCEEDED", "the direct agent believes the early success"
    assert not result.truth.done and result.truth.unmet == ["never truly at spot"]


@pytest.mark.parametrize("mode, status, truth", [
    ("direct", "SUCCEEDED", False), ("monitored", "UNKNOWN", False), ("gated", "FAILED", False)])
def test_a_rejected_goal_and_a_confident_done_per_mode(tmp_path: Path, mode, status, truth):
    sc = scenario([GO("spot"), DONE], faults=[{"kind": "reject", "on_goal": 1}],
                  truth={"visits": ["spot"]}, goal="Go to spot.")
    result = run_one(sc, mode, workdir=tmp_path)
    assert (result.status, result.truth.done) == (status, truth), result.summary


def test_a_clean_round_trip_succeeds_in_every_mode_and_ablation(tmp_path: Path):
    sc = scenario([GO("spot"), GO("dock"), DONE])
    for mode in (*MODES, *ABLATIONS):
        result = run_one(sc, mode, workdir=tmp_path / mode)
        assert result.status == "SUCCEEDED" and result.truth.done, (mode, result.summary)
        assert result.duplicates == 0


def test_a_lost_acknowledgment_makes_the_direct_agent_move_twice_and_the_harness_once(tmp_path: Path):
    sc = scenario([GO("spot"), GO("dock"), DONE], faults=[{"kind": "ack_delay", "on_goal": 1, "delay_s": 8.0}])
    direct = run_one(sc, "direct", workdir=tmp_path / "d")
    gated = run_one(sc, "gated", workdir=tmp_path / "g")
    assert direct.duplicates == 1, "no answer, so it asked again: a second goal to the same place"
    assert gated.duplicates == 0 and gated.status == "SUCCEEDED", gated.summary


def test_duplicates_are_repeats_of_running_or_reached_goals_only():
    from robot_harness.sim.world import SimConfig, SimWorld

    w = SimWorld(SimConfig(speed=2.0, faults=()))
    w.submit_goal(1.0, 0.0, 0.0)
    w.step(0.1)
    w.submit_goal(1.0, 0.0, 0.0)  # preempts a running goal to the same target: a duplicate
    w.step(3.0)
    w.submit_goal(1.0, 0.0, 0.0)  # the target was really reached: a duplicate
    w.step(1.0)
    w.submit_goal(0.0, 0.0, 0.0)  # somewhere else: not one
    w.step(3.0)
    assert duplicate_dispatches(w.events) == 2


def test_truth_needs_every_device_effect(tmp_path: Path):
    sc = scenario([GO("spot"), {"tool_calls": [{"name": "capture_image", "arguments": {"label": "x"}}]},
                   {"tool_calls": [{"name": "send_message", "arguments": {"to": "ops", "text": "done"}}]}, DONE],
                  truth={"visits": ["spot"], "captures_at": ["spot"], "messages_to": ["ops"], "spoken": True},
                  goal="Go to spot, take a picture and message ops.")
    result = run_one(sc, "direct", workdir=tmp_path)
    assert result.truth.unmet == ["nothing was said"]
    ports = SimPorts(config=sim_config(sc), artifacts_dir=tmp_path)
    assert adjudicate(sc, ports).unmet[0] == "never truly at spot"


def test_the_committed_suite_is_what_the_generator_writes_and_covers_every_task_and_fault():
    import subprocess
    import sys

    from robot_harness.eval.run import load_suite

    repo = Path(__file__).resolve().parents[2]
    check = subprocess.run([sys.executable, str(repo / "scripts" / "make_eval_suite.py"), "--check"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    suite = load_suite()
    assert len(suite) >= 60
    assert {s.category for s in suite} == {"navigation", "inspection", "message", "speech", "return", "patrol",
                                           "multistep"}
    assert {"stale_pose", "early_success", "controller_rejection", "stall", "lost_feedback", "localization_jump",
            "repeated_request", "interrupted", "planner_omits_step", "confident_done",
            "observation_claims_completion", "alternate_plan", "verifier_uncertainty"} <= {s.fault for s in suite}
    assert all(s.truth is not None for s in suite)


def test_the_quick_benchmark_gates_every_false_completion_and_duplicate(tmp_path: Path):
    from robot_harness.eval.run import load_suite, run_suite, summarize

    results = run_suite(load_suite(quick=True), ("direct", "gated"), workdir=tmp_path)
    summary = summarize(results)
    assert summary["gated"]["false_completions"] == 0 and summary["gated"]["duplicate_dispatches"] == 0
    assert summary["direct"]["false_completions"] > 0 and summary["direct"]["duplicate_dispatches"] > 0, \
        "the baseline must show the failures the gate prevents, or the suite tests nothing"


@pytest.mark.parametrize("ablation, scenario_name", [
    ("gated-no-evidence-binding", "inspection-localization_jump"),
    ("gated-no-role-isolation", "navigation-verifier_uncertainty"),
])
def test_each_safeguard_taken_out_lets_a_false_completion_through(tmp_path: Path, ablation, scenario_name):
    from robot_harness.eval.run import SUITE_DIR

    from robot_harness.core.scenario import load_scenario

    sc = load_scenario(SUITE_DIR / f"{scenario_name}.yaml")
    gated = run_one(sc, "gated", workdir=tmp_path / "g")
    ablated = run_one(sc, ablation, workdir=tmp_path / "a")
    assert not gated.truth.done and not ablated.truth.done
    assert gated.status != "SUCCEEDED", gated.summary
    assert ablated.status == "SUCCEEDED", f"{ablation} should be fooled here: {ablated.summary}"
