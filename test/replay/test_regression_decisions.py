"""The regression set replays by decision (issue 17): each case's mission re-run on its decision
tape (``<case>/tape.jsonl``, written by scripts/record_regression.py with its journal and bag)
must write the recorded journal event for event. A code change that makes the harness decide
otherwise on a recorded mission fails here with the first event that differs; re-record the set
deliberately after a change meant to do that."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from robot_harness.core.errors import NondeterminismError
from robot_harness.core.scenario import load_scenario
from robot_harness.core.tape import tape_from_jsonl
from robot_harness.eval.decisions import replay_recorded
from robot_harness.eval.run import SUITE_DIR
from robot_harness.evidence.replay import journal_from_jsonl

REG = Path(__file__).resolve().parent / "regression"
CASES = sorted(REG.glob("*.jsonl"))


def _case(path: Path):
    tape = tape_from_jsonl((path.with_suffix("") / "tape.jsonl").read_text())
    journal = journal_from_jsonl(path)
    events = journal.events()
    journal.close()
    return load_scenario(SUITE_DIR / f"{tape.meta['scenario']}.yaml"), events, tape


def test_every_case_has_its_tape():
    assert len(CASES) >= 8
    for path in CASES:
        assert (path.with_suffix("") / "tape.jsonl").is_file(), f"{path.stem}: re-record with scripts/record_regression.py"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_the_recorded_mission_decides_the_same_way_again(path: Path):
    scenario, events, tape = _case(path)
    started = time.perf_counter()
    result = replay_recorded(scenario, events, tape)
    assert result.events == len(events) and time.perf_counter() - started < 5.0


def test_a_changed_decision_in_the_set_is_named(monkeypatch):
    from robot_harness.core.nav_goals import NavGoal

    scenario, events, tape = _case(REG / "inspection-none.jsonl")
    length_from = NavGoal.length_from
    monkeypatch.setattr(NavGoal, "length_from", lambda self, start: length_from(self, start) * 2.0)
    with pytest.raises(NondeterminismError) as err:
        replay_recorded(scenario, events, tape)
    assert "ROBOT_ACTION_STARTED" in err.value.details["recorded"], err.value.message
    assert err.value.details["field"] == "payload.intent.timeout_s"
