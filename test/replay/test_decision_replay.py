"""Decision replay (issue 17, first part): a recorded mission re-run on its tape alone decides the
same way, event for event; a changed decision is a nondeterminism error naming the event and the
field. The missions are the benchmark's scenarios on the in-process simulated robot."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.decisions import first_divergence
from robot_harness.core.errors import NondeterminismError
from robot_harness.core.scenario import load_scenario
from robot_harness.core.tape import Tape, TapeEntry
from robot_harness.eval.decisions import Recording, record, replay
from robot_harness.eval.run import load_suite

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scenarios" / "demo.yaml"


def test_every_benchmark_scenario_replays_to_the_same_decisions():
    scenarios = load_suite()
    assert len(scenarios) >= 200
    statuses = set()
    for scenario in scenarios:
        recording = record(scenario)
        statuses.add(recording.status)
        result = replay(scenario, recording)
        assert result.events == len(recording.events) and result.readings == len(recording.tape), scenario.name
    assert {"SUCCEEDED", "FAILED", "UNKNOWN"} <= statuses, "the set covers every ending"


def test_the_demo_mission_replays_fast_with_nothing_but_its_tape():
    scenario = load_scenario(DEMO)
    recording = record(scenario)
    assert recording.status == "SUCCEEDED" and len(recording.events) > 50
    result = replay(scenario, recording)
    assert result.as_dict()["same_decisions"] and result.recorded_s > 10.0
    assert result.speed_ratio >= 80.0, result.as_dict()


def test_a_changed_decision_is_named_by_its_event_and_field(monkeypatch):
    scenario = load_scenario(DEMO)
    recording = record(scenario)
    from robot_harness.core.nav_goals import NavGoal

    length_from = NavGoal.length_from
    monkeypatch.setattr(NavGoal, "length_from", lambda self, start: length_from(self, start) + 1.0)
    with pytest.raises(NondeterminismError) as err:
        replay(scenario, recording)
    details = err.value.details
    assert "ROBOT_ACTION_STARTED" in details["recorded"] and details["field"] == "payload.intent.timeout_s", details
    assert "in the replay" in err.value.message and "in the recording" in err.value.message


def test_another_configuration_that_changes_a_decision_is_reported_at_that_decision():
    scenario = load_scenario(DEMO)
    recording = record(scenario)
    with pytest.raises(NondeterminismError) as err:
        replay(scenario, recording, overrides={"navigation": {"timeout_s": 5.0}})
    assert err.value.details["field"].startswith("payload"), err.value.details


def test_a_recording_that_went_on_or_a_changed_reading_is_not_the_same_mission():
    scenario = load_scenario(DEMO)
    recording = record(scenario)
    cut = Tape()
    cut.entries = recording.tape.entries[:200]
    cut.ports = recording.tape.ports
    with pytest.raises(NondeterminismError, match="after the recording's last reading"):
        replay(scenario, Recording(scenario.name, recording.status, recording.events, cut))
    longer = Tape()
    extra = TapeEntry(index=len(recording.tape), source="clock", call="now", answer=0.0)
    longer.entries = [*recording.tape.entries, extra]
    longer.ports = recording.tape.ports
    with pytest.raises(NondeterminismError, match="1 recorded reading\\(s\\) unread"):
        replay(scenario, Recording(scenario.name, recording.status, recording.events, longer))


def test_first_divergence_names_the_path_and_a_missing_event():
    scenario = load_scenario(DEMO)
    events = list(record(scenario).events)
    changed = events[3].model_copy(update={"payload": {**events[3].payload, "extra": 1}})
    found = first_divergence(events, [*events[:3], changed, *events[4:]])
    assert found is not None and found.index == 3 and found.field == "payload.extra"
    short = first_divergence(events, events[:-1])
    assert short is not None and short.replayed is None and "the replay nothing" in short.message()
    assert first_divergence(events, list(events)) is None


def test_a_mission_in_a_journal_earlier_missions_wrote_replays_from_that_journal():
    from robot_harness.core.clock import IdGenerator, ManualClock
    from robot_harness.core.journal import MemoryJournal

    journal = MemoryJournal(clock=ManualClock(), ids=IdGenerator(3))
    journal.setup()
    ids = IdGenerator(5)  # one runner's ids across missions, as the supervisor's
    first = record(load_scenario(REPO / "scenarios" / "failed_navigation.yaml"), journal=journal, ids=ids)
    second = record(load_scenario(DEMO), journal=journal, ids=ids)
    assert second.before and second.before[-1].seq == first.events[-1].seq
    assert second.events[0].seq == first.events[-1].seq + 1
    result = replay(load_scenario(DEMO), second)
    assert result.events == len(second.events)
    # without the journal before it, the same tape is another mission: the first event already differs
    alone = Recording(second.scenario, second.status, second.events, second.tape)
    with pytest.raises(NondeterminismError, match="event 0"):
        replay(load_scenario(DEMO), alone)
