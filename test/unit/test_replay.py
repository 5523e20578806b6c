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


def test_replaying_a_recording_needs_the_bag_and_its_journal(tmp_path: Path):
    from robot_harness.evidence.replay import replay_recording

    with pytest.raises(UsageError, match="no bag at"):
        replay_recording(tmp_path / "bags" / "mission-x")
    bag = tmp_path / "bags" / "mission-x"
    bag.mkdir(parents=True)
    with pytest.raises(UsageError, match=f"no journal at {tmp_path / 'journal.sqlite3'}"):
        replay_recording(bag)  # looked for two folders up, where the supervisor writes it


def test_a_verdict_citing_bag_evidence_the_journal_has_no_ref_for_fails_closed(tmp_path: Path):
    """A bag id in a verdict is only as good as the ref (with its sha256) some record holds for it."""
    from robot_harness.core.records import EventDraft, EventType

    j, mission = recorded(tmp_path, "patrol-none")
    events = j.events(mission_id=mission)
    (verdict_ev,) = [e for e in events if e.type is EventType.VERDICT_RECORDED]
    payload = dict(verdict_ev.payload)
    forged = "bag:elsewhere.mcap/amcl_pose@1"
    verdict = dict(payload["verdict"])
    verdict["verdict_id"] = "verdict-forged"
    verdict["steps"] = [{**verdict["steps"][0], "evidence_ids": [*verdict["steps"][0]["evidence_ids"], forged]},
                        *verdict["steps"][1:]]
    verdict["evidence_ids"] = [*verdict["evidence_ids"], forged]
    j.append([EventDraft(type=EventType.VERDICT_RECORDED, mission_id=mission, model_turn_id=verdict_ev.model_turn_id,
                         tool_call_id=verdict_ev.tool_call_id, snapshot_id=verdict_ev.snapshot_id,
                         payload={**payload, "verdict": verdict})])
    report = replay_mission(j, mission, bag_dir=tmp_path)
    first, forged_v = report.verdicts
    assert first.diffs == [] and first.bag_evidence == {}
    assert forged_v.bag_evidence[forged].startswith("evidence_not_found")
    assert f"evidence {forged}: evidence_not_found: cited, but no record in the journal carries its ref (and sha256)" \
        in forged_v.diffs
    assert forged_v.replayed == "continue" and any(d.endswith("satisfied -> ambiguous") for d in forged_v.diffs)
    j.close()
