"""The verdict-regression set (scripts/record_regression.py): every recorded
verification and commit decision must replay the same."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.evidence.replay import journal_from_jsonl, replay_mission

RECORDED = sorted((Path(__file__).resolve().parent / "regression").glob("*.jsonl"))


def test_the_regression_set_is_there():
    assert len(RECORDED) >= 8


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_recorded_verdicts_replay_the_same(path: Path):
    journal = journal_from_jsonl(path)
    (mission,) = [m["mission_id"] for m in journal.missions()]
    report = replay_mission(journal, mission, artifacts_dir=path.with_suffix(""))
    assert report.verdicts, "every recorded mission proposed done at least once"
    assert report.skipped == 0
    assert report.identical, [v.diffs for v in report.verdicts]


def test_a_tighter_verifier_changes_a_recorded_success():
    journal = journal_from_jsonl(next(p for p in RECORDED if p.stem == "patrol-none"))
    (mission,) = [m["mission_id"] for m in journal.missions()]
    report = replay_mission(journal, mission, overrides={"verification": {"xy_tolerance_m": 0.001}},
                            artifacts_dir="/nonexistent")
    assert not report.identical and "commit: yes -> no" in report.verdicts[-1].diffs


def test_a_missing_image_is_a_difference_not_a_silent_pass(tmp_path: Path):
    journal = journal_from_jsonl(next(p for p in RECORDED if p.stem == "inspection-none"))
    (mission,) = [m["mission_id"] for m in journal.missions()]
    report = replay_mission(journal, mission, artifacts_dir=tmp_path)  # an empty folder
    assert not report.identical and "commit: yes -> no" in report.verdicts[-1].diffs
