"""The decision set replays by decision (issue 17): each case's mission re-run on its decision
tape alone (``test/replay/decisions/<case>.tape.jsonl.gz``, written with its journal by
scripts/record_decision_set.py) must write the recorded journal event for event. A code change
that makes the harness decide otherwise on a recorded mission fails here with the first event
that differs; re-record the set deliberately after a change meant to do that."""
from __future__ import annotations

import gzip
import time
from pathlib import Path

import pytest

from robot_harness.core.errors import NondeterminismError
from robot_harness.core.scenario import load_scenario
from robot_harness.core.tape import tape_from_jsonl
from robot_harness.eval.decisions import replay_recorded
from robot_harness.eval.run import SUITE_DIR
from robot_harness.evidence.replay import journal_from_jsonl

SET = Path(__file__).resolve().parent / "decisions"
CASES = sorted(p.name.removesuffix(".tape.jsonl.gz") for p in SET.glob("*.tape.jsonl.gz"))


def _case(name: str, tmp_path: Path):
    tape = tape_from_jsonl(gzip.decompress((SET / f"{name}.tape.jsonl.gz").read_bytes()).decode())
    plain = tmp_path / f"{name}.jsonl"
    plain.write_bytes(gzip.decompress((SET / f"{name}.jsonl.gz").read_bytes()))
    journal = journal_from_jsonl(plain)
    events = journal.events()
    journal.close()
    return load_scenario(SUITE_DIR / f"{tape.meta['scenario']}.yaml"), events, tape


def test_the_set_is_there_and_covers_every_ending(tmp_path):
    assert len(CASES) >= 8
    statuses = set()
    for name in CASES:
        assert (SET / f"{name}.jsonl.gz").is_file(), name
        _, events, _ = _case(name, tmp_path)
        statuses.add(events[-1].payload.get("status") if events else None)
    assert {"SUCCEEDED", "FAILED", "UNKNOWN"} <= statuses, statuses


@pytest.mark.parametrize("name", CASES)
def test_the_recorded_mission_decides_the_same_way_again(name: str, tmp_path: Path):
    scenario, events, tape = _case(name, tmp_path)
    started = time.perf_counter()
    result = replay_recorded(scenario, events, tape)
    assert result.events == len(events) and time.perf_counter() - started < 5.0


def test_a_changed_decision_in_the_set_is_named(monkeypatch, tmp_path):
    from robot_harness.core.nav_goals import NavGoal

    scenario, events, tape = _case("inspection-none", tmp_path)
    length_from = NavGoal.length_from
    monkeypatch.setattr(NavGoal, "length_from", lambda self, start: length_from(self, start) * 2.0)
    with pytest.raises(NondeterminismError) as err:
        replay_recorded(scenario, events, tape)
    assert "ROBOT_ACTION_STARTED" in err.value.details["recorded"], err.value.message
    assert err.value.details["field"] == "payload.intent.timeout_s"
