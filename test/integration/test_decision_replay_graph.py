"""Decision replay of missions the real graph ran (supervisor over loopback DDS against sim_robot):
the journal database keeps each mission's tape; the replay decides the same way with no robot and
no model."""
from __future__ import annotations

import pytest

from ._graph import DONE, GO_SPOT, run, scenario

pytest.importorskip("rclpy")


def test_a_mission_on_the_real_graph_replays_by_decision(tmp_path):
    from robot_harness.decision_replay import replay_journal_mission

    report, events = run(tmp_path, scenario([GO_SPOT, DONE]))
    assert report["status"] == "SUCCEEDED", report["summary"]
    result = replay_journal_mission(tmp_path / "journal.sqlite3", report["mission_id"])
    assert result.events == len(events) and result.readings > 50
    assert result.speed_ratio > 10.0, result.as_dict()


@pytest.mark.parametrize("faults", [
    [{"kind": "reject", "on_goal": 1}],
    [{"kind": "early_success", "on_goal": 1, "after_s": 0.2}],
    [{"kind": "stall", "on_goal": 1, "after_s": 0.2}],
], ids=["rejected", "early_success", "stall"])
def test_failures_on_the_real_graph_replay_by_decision(tmp_path, faults):
    from robot_harness.decision_replay import replay_journal_mission

    report, events = run(tmp_path, scenario([GO_SPOT, DONE], faults=faults))
    assert report["status"] in ("FAILED", "UNKNOWN"), report["summary"]
    result = replay_journal_mission(tmp_path / "journal.sqlite3", report["mission_id"])
    assert result.events == len(events)


def test_the_cli_says_same_decisions_and_exits_1_naming_a_changed_event(tmp_path):
    import json
    import sqlite3
    import subprocess
    import sys

    report, _ = run(tmp_path, scenario([GO_SPOT, DONE]))
    journal = tmp_path / "journal.sqlite3"
    cli = [sys.executable, "-m", "robot_harness", "replay", "--decisions", "--journal", str(journal),
           "--mission", report["mission_id"]]
    same = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert same.returncode == 0 and "same decisions" in same.stdout and "x real time" in same.stdout, same
    what = subprocess.run([*cli, "--set", "navigation.timeout_s=9", "--json"], capture_output=True, text=True,
                          timeout=120)
    doc = json.loads(what.stdout)
    assert what.returncode == 0 and doc["field"] == "payload.intent.timeout_s" and doc["final_status"] == "SUCCEEDED"
    # the record says the harness gave the action another timeout than the code would
    db = sqlite3.connect(journal)
    seq, payload = db.execute("SELECT seq, payload FROM events WHERE type = 'ROBOT_ACTION_STARTED'").fetchone()
    body = json.loads(payload)
    body["intent"]["timeout_s"] += 1.0
    db.execute("UPDATE events SET payload = ? WHERE seq = ?", (json.dumps(body), seq))
    db.commit()
    db.close()
    changed = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert changed.returncode == 1, changed
    assert "NONDETERMINISM" in changed.stdout and f"#{seq} ROBOT_ACTION_STARTED" in changed.stdout
    assert "payload.intent.timeout_s" in changed.stdout
