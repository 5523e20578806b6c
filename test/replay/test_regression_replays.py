"""The verdict-regression set (scripts/record_regression.py): every recorded verification and
commit decision must replay the same, from each case's mission bag and journal, as
``robot-harness replay BAG`` replays them -- and every bag message the verdicts cite must still
be in the bag with the bytes the journal names.

Layout per case: ``<case>.jsonl`` (the journal export), ``<case>/img-*.png`` (cited images) and
``<case>/<mission_id>/`` (the rosbag2 MCAP bag directory).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mcap.reader import make_reader

from robot_harness.core.records import EventType
from robot_harness.evidence.bag import read_bag_messages, read_bag_metadata
from robot_harness.evidence.replay import journal_from_jsonl, replay_mission, replay_recording

REG = Path(__file__).resolve().parent / "regression"
RECORDED = sorted(REG.glob("*.jsonl"))
MAX_BAG_BYTES = 400_000
"""As scripts/record_regression.py refuses to write more: the set is committed to git."""


def bag_of(journal_file: Path) -> Path:
    """The case's bag directory: ``<case>/<mission_id>/`` holding ``<mission_id>.mcap``."""
    bags = [d for d in journal_file.with_suffix("").glob("*") if d.is_dir() and (d / f"{d.name}.mcap").is_file()]
    assert len(bags) == 1, f"{journal_file.stem}: expected one mission bag folder, found {bags}"
    return bags[0]


def test_the_regression_set_is_there_with_a_small_bag_per_mission():
    assert len(RECORDED) >= 8
    for path in RECORDED:
        bag = bag_of(path)
        assert (bag / "metadata.yaml").is_file(), "a rosbag2 bag directory (ros2 bag info reads it)"
        size = sum(f.stat().st_size for f in bag.iterdir())
        assert size <= MAX_BAG_BYTES, f"{path.stem}: bag is {size} bytes"
        (mission,) = [m["mission_id"] for m in journal_from_jsonl(path).missions()]
        assert read_bag_metadata(bag)["custom_data"]["mission_id"] == mission == bag.name
        topics = {m.topic for m in read_bag_messages(bag)}
        assert {"/robot_harness/journal", "/robot_harness/snapshots", "/robot_harness/verdicts",
                "/amcl_pose", "/navigate_to_pose/_action/status"} <= topics, path.stem


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_recorded_verdicts_replay_the_same_from_bag_and_journal(path: Path):
    report = replay_recording(bag_of(path), journal=path, artifacts_dir=path.with_suffix(""))
    assert report.verdicts, "every recorded mission proposed done at least once"
    assert report.skipped == 0
    assert report.identical, [v.diffs for v in report.verdicts]
    assert all(not problem for v in report.verdicts for problem in v.bag_evidence.values())


def test_the_cross_check_reads_the_bag_for_every_verdict_that_cites_it():
    cited = 0
    for path in RECORDED:
        report = replay_recording(bag_of(path), journal=path, artifacts_dir=path.with_suffix(""))
        cited += report.bag_evidence_checked
        for v in report.verdicts:
            assert set(v.bag_evidence) >= {i for i in _recorded_evidence(path, v.recorded_id) if i.startswith("bag:")}
    assert cited >= len(RECORDED), "most verdicts stand on snapshots the bag holds"


def _recorded_evidence(path: Path, verdict_id: str) -> list[str]:
    journal = journal_from_jsonl(path)
    (ev,) = [e for e in journal.events() if e.type is EventType.VERDICT_RECORDED
             and e.payload["verdict"]["verdict_id"] == verdict_id]
    return ev.payload["verdict"]["evidence_ids"]


def test_a_tighter_verifier_changes_a_recorded_success():
    path = REG / "patrol-none.jsonl"
    report = replay_recording(bag_of(path), journal=path, overrides={"verification": {"xy_tolerance_m": 0.001}},
                              artifacts_dir="/nonexistent")
    assert not report.identical and "commit: yes -> no" in report.verdicts[-1].diffs


def test_a_missing_image_is_a_difference_not_a_silent_pass(tmp_path: Path):
    path = REG / "inspection-none.jsonl"
    report = replay_recording(bag_of(path), journal=path, artifacts_dir=tmp_path)  # an empty folder
    assert not report.identical and "commit: yes -> no" in report.verdicts[-1].diffs


def _copy_case(name: str, tmp_path: Path) -> tuple[Path, Path]:
    src = REG / f"{name}.jsonl"
    shutil.copytree(src.with_suffix(""), tmp_path / name)
    shutil.copy2(src, tmp_path / src.name)
    return tmp_path / src.name, bag_of(tmp_path / src.name)


def test_a_changed_message_in_the_bag_is_a_difference_and_fails_closed(tmp_path: Path):
    journal_file, bag = _copy_case("inspection-none", tmp_path)
    (verdict,) = replay_recording(bag, journal=journal_file, artifacts_dir=journal_file.with_suffix("")).verdicts
    cited = sorted(verdict.bag_evidence)[0]
    topic, log_time = cited.removeprefix(f"bag:{bag.name}.mcap").rsplit("@", 1)
    mcap = bag / f"{bag.name}.mcap"
    with open(mcap, "rb") as f:
        data = next(bytes(m.data) for _s, c, m in make_reader(f).iter_messages(topics=[topic])
                    if m.log_time == int(log_time))
    raw = mcap.read_bytes()
    at = raw.index(data) + len(data) // 2
    mcap.write_bytes(raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1:])  # one byte of the cited message

    report = replay_recording(bag, journal=journal_file, artifacts_dir=journal_file.with_suffix(""))
    (v,) = report.verdicts
    assert not report.identical and v.recorded == "verified_done" and v.replayed == "continue"
    assert any(d.startswith(f"evidence {cited}: evidence_mismatch") for d in v.diffs), v.diffs
    assert "goal: verified_done -> continue" in v.diffs and "commit: yes -> no" in v.diffs
    assert any(d.endswith("satisfied -> violated") for d in v.diffs), "changed bytes contradict the step"


def test_a_missing_bag_fails_closed_as_ambiguous(tmp_path: Path):
    journal_file, bag = _copy_case("inspection-none", tmp_path)
    shutil.rmtree(bag)
    bag.mkdir()  # the folder is there, the bag is gone
    report = replay_recording(bag, journal=journal_file, artifacts_dir=journal_file.with_suffix(""))
    (v,) = report.verdicts
    assert any(": evidence_not_found" in d for d in v.diffs) and "commit: yes -> no" in v.diffs
    assert any(d.endswith("satisfied -> ambiguous") for d in v.diffs)


def test_a_replay_without_any_bag_cannot_confirm_what_the_verdict_cited():
    path = REG / "inspection-none.jsonl"
    journal = journal_from_jsonl(path)
    (mission,) = [m["mission_id"] for m in journal.missions()]
    report = replay_mission(journal, mission, artifacts_dir=path.with_suffix(""))  # no bag_dir, none beside
    assert report.bag_dir == "" and not report.identical
    assert "commit: yes -> no" in report.verdicts[-1].diffs
