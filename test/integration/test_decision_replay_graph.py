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
