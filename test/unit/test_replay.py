"""Replaying a recorded mission's verification and commit gate (no robot, no model)."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, SystemClock
from robot_harness.core.errors import UsageError
from robot_harness.core.journal import SqliteJournal
from robot_harness.core.scenario import load_scenario
from robot_harness.eval.modes import run_one
from robot_harness.eval.run import SUITE_DIR
from robot_harness.evidence.replay import replay_mission


def recorded(tmp_path: Path, name: str) -> tuple[SqliteJournal, str]:
    run_one(load_scenario(SUITE_DIR / f"{name}.yaml"), "gated", workdir=tmp_path, journal="sqlite")
    j = SqliteJournal(tmp_path / "journal.sqlite3", clock=SystemClock(), ids=IdGenerator(None))
    j.setup()
    return j, j.missions()[-1]["mission_id"]


def test_a_recorded_mission_replays_to_the_same_verdicts_and_commit(tmp_path: Path):
    j, mission = recorded(tmp_path, "patrol-none")
    report = replay_mission(j, mission)
    (v,) = report.verdicts
    assert report.identical and v.recorded == v.replayed == "verified_done"
    assert v.recorded_committed and v.replayed_committed
    j.close()


def test_a_changed_tolerance_is_reported_as_a_verdict_diff(tmp_path: Path):
    j, mission = recorded(tmp_path, "inspection-none")
    report = replay_mission(j, mission, overrides={"verification": {"xy_tolerance_m": 0.001}})
    (v,) = report.verdicts
    assert not report.identical
    assert "goal: verified_done -> continue" in v.diffs and "commit: yes -> no" in v.diffs
    assert any(d.startswith("o1: satisfied -> ") for d in v.diffs)
    j.close()


def test_an_unverified_mission_replays_unverified(tmp_path: Path):
    j, mission = recorded(tmp_path, "navigation-controller_rejection")
    report = replay_mission(j, mission)
    assert report.identical and all(not v.replayed_committed for v in report.verdicts)
    with pytest.raises(UsageError):
        replay_mission(j, "mission-nope")
    j.close()
