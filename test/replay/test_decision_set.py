"""The decision set replays by decision (issue 17): each case's mission re-run on its decision
tape alone (``test/replay/decisions/<case>.tape.jsonl.gz``, written with its journal by
scripts/record_decision_set.py) must write the recorded journal event for event. A code change
that makes the harness decide otherwise on a recorded mission fails here with the first event
that differs; re-record the set deliberately after a change meant to do that."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from robot_harness.core.errors import NondeterminismError
from robot_harness.eval.decisions import case_names, load_case, replay_recorded

SET = Path(__file__).resolve().parent / "decisions"
CASES = case_names(SET)


def _case(name: str, tmp_path: Path):
    return load_case(SET, name)


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
