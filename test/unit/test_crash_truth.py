"""The crash test's task adjudication (scripts/crash_test.py): a SUCCEEDED mission counts only if the
simulator's truth log shows the robot truly at spot, then truly back at dock, and at dock at the end."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def crash():
    spec = importlib.util.spec_from_file_location("crash_test", REPO / "scripts" / "crash_test.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPOT = {"x": 1.5, "y": 0.5, "yaw": 0.0}
DOCK = {"x": 0.0, "y": 0.0, "yaw": 0.0}
HALFWAY = {"x": 0.7, "y": 0.2, "yaw": 0.0}


def _log(tmp_path: Path, *goals: tuple[str, int, dict, list[tuple[str, dict]]], pid: int = 11) -> Path:
    """goals: (goal id, world index, target, [(event, true pose)...]); written as sim_robot writes its log."""
    lines = [{"kind": "sim_started", "pid": pid, "stamp": 0.0}]
    for gid, index, target, events in goals:
        lines.append({"kind": "sim_goal_bound", "goal_index": index, "goal_id": gid, "stamp": 0.0, "pid": pid})
        for event, pose in events:
            lines.append({"kind": "sim_goal_event", "event": event, "goal_index": index, "target": target,
                          "true_pose": pose, "localized_pose": pose, "t": 0.0, "reason": ""})
    path = tmp_path / "truth.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_spot_then_dock_is_the_task_done(crash, tmp_path: Path):
    log = _log(tmp_path, ("a", 1, SPOT, [("accepted", DOCK), ("succeeded", SPOT)]),
               ("b", 2, DOCK, [("accepted", SPOT), ("succeeded", DOCK)]))
    bound, events = crash.read_truth(log)
    assert crash.task_unmet(["a", "b"], bound, events) == []


def test_an_early_success_short_of_spot_is_not_the_task_even_if_the_dock_goal_succeeds(crash, tmp_path: Path):
    log = _log(tmp_path, ("a", 1, SPOT, [("accepted", DOCK), ("succeeded", HALFWAY)]),
               ("b", 2, DOCK, [("accepted", HALFWAY), ("succeeded", DOCK)]))
    bound, events = crash.read_truth(log)
    assert crash.task_unmet(["a", "b"], bound, events) == ["never truly at spot"]


def test_the_wrong_order_and_the_wrong_end_are_both_reported(crash, tmp_path: Path):
    log = _log(tmp_path, ("b", 1, DOCK, [("accepted", DOCK), ("succeeded", DOCK)]),
               ("a", 2, SPOT, [("accepted", DOCK), ("succeeded", SPOT)]))
    bound, events = crash.read_truth(log)
    unmet = crash.task_unmet(["b", "a"], bound, events)
    assert unmet[0] == "never truly back at dock after spot" and unmet[1].startswith("not truly at dock at the end")


def test_a_mission_with_no_goal_in_the_log_did_nothing(crash, tmp_path: Path):
    bound, events = crash.read_truth(_log(tmp_path))
    assert crash.task_unmet(["never-sent"], bound, events)[0] == "never truly at spot"


def test_the_guard_refuses_anything_but_the_shipped_loopback_profile(crash, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("FASTDDS_DEFAULT_PROFILES_FILE", raising=False)
    assert "not set" in crash.loopback_problem()
    other = tmp_path / "other.xml"
    other.write_text("<dds/>")
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", str(other))
    assert "not the shipped loopback profile" in crash.loopback_problem()
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", str(REPO / "config" / "fastdds_loopback.xml"))
    assert crash.loopback_problem() == ""


def test_every_bench_script_runs_the_loopback_guard_first():
    env = {k: v for k, v in os.environ.items() if k != "FASTDDS_DEFAULT_PROFILES_FILE"}
    for script in sorted((REPO / "bench").glob("*.py")):
        if script.name.startswith("_"):
            continue
        proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "FASTDDS_DEFAULT_PROFILES_FILE is not set" in proc.stderr, script.name
