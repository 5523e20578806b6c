"""The human timeline and the flat exports of journal events."""
from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.errors import UsageError
from robot_harness.core.journal import MemoryJournal, open_journal
from robot_harness.core.records import (
    Availability,
    ControllerState,
    EventDraft,
    EventType,
    FieldMeta,
    JournalEvent,
    Pose2D,
    WorldSnapshot,
    from_json,
)
from robot_harness.core.timeline import EXPORT_COLUMNS, export_events, render_timeline

E = EventType


def d(type_: EventType, mission: str = "m-1", **kw) -> EventDraft:
    return EventDraft(type=type_, mission_id=mission, **kw)


def _snapshot() -> WorldSnapshot:
    return WorldSnapshot(
        snapshot_id="ws-1",
        mission_id="m-1",
        reason="pre_dispatch",
        captured_at=1_700_000_000.0,
        pose=Pose2D(x=1.0, y=-2.5, yaw=1.5707963),
        pose_meta=FieldMeta(availability=Availability.AVAILABLE, age_s=0.12, max_age_s=0.5),
        controller_state=ControllerState.ACTIVE,
        distance_remaining=3.25,
        battery=0.42,
        battery_meta=FieldMeta(availability=Availability.STALE, age_s=7.0, max_age_s=2.0),
    )


@pytest.fixture
def mission() -> list[JournalEvent]:
    clock = ManualClock()
    j = MemoryJournal(clock=clock, ids=IdGenerator(seed=3))
    j.setup()
    j.append([d(E.MISSION_STARTED, payload={"goal": "go to the dock"})])
    clock.advance(0.25)
    j.append([d(E.WORLD_SNAPSHOT_CAPTURED, payload={"snapshot": _snapshot().model_dump(mode="json")})])
    j.append([d(E.TOOL_CALL_RECORDED, tool_call_id="tc-1", model_turn_id="turn-1", payload={"name": "navigate_to", "arguments": {"x": 1.0, "y": 2.0}})])
    j.append(
        [
            d(
                E.ACTION_PRECONDITION_CHECKED,
                tool_call_id="tc-1",
                snapshot_id="ws-1",
                payload={
                    "ok": False,
                    "checks": [
                        {"name": "pose_fresh", "ok": True, "detail": ""},
                        {"name": "battery_fresh", "ok": False, "detail": "age 7.0s > 2.0s"},
                    ],
                },
            )
        ]
    )
    clock.advance(1.25)
    j.append([d(E.TOOL_RESULT_RECORDED, tool_call_id="tc-1", payload={"name": "navigate_to", "status": "precondition_changed"})])
    j.append([d(E.ROBOT_ACTION_STATE_CHANGED, robot_action_id="ra-7", payload={"from": "ACCEPTED", "to": "RUNNING", "reason": "feedback seen"})])
    j.append([d(E.ROBOT_ACTION_OUTCOME, robot_action_id="ra-7", payload={"state": "SUCCEEDED", "reason": "within 0.05 m"})])
    clock.advance(10.0)
    j.append([d(E.MISSION_FINISHED, payload={"status": "SUCCEEDED", "summary": "at the dock\nbattery low"})])
    return j.events()


def _line_for(text: str, seq: int) -> str:
    return next(line for line in text.splitlines() if line.split()[1:2] == [str(seq)])


def test_timeline_shows_relative_time_type_and_per_type_summary(mission):
    text = render_timeline(mission, width=120)
    header = text.splitlines()[0]
    assert "mission m-1" in header and "8 events" in header and "seq 1..8" in header
    assert "2023-11-14T22:13:20.000Z" in header

    assert _line_for(text, 1).split()[:3] == ["+0.000s", "1", "MISSION_STARTED"]
    assert 'goal: "go to the dock"' in _line_for(text, 1)
    assert "navigate_to(x=1.0, y=2.0)" in _line_for(text, 3)
    assert "REFUSED 1/2 passed; failed: battery_fresh (age 7.0s > 2.0s)" in _line_for(text, 4)
    assert _line_for(text, 5).split()[0] == "+1.500s"
    assert "navigate_to -> precondition_changed" in _line_for(text, 5)
    assert "ACCEPTED -> RUNNING (feedback seen)" in _line_for(text, 6)
    assert "SUCCEEDED: within 0.05 m" in _line_for(text, 7)
    assert _line_for(text, 8).split()[0] == "+11.500s"
    assert "SUCCEEDED: at the dock battery low" in _line_for(text, 8)


def test_snapshot_summary_shows_pose_navigation_and_freshness(mission):
    text = render_timeline(mission, width=200)
    line = _line_for(text, 2)
    assert "pre_dispatch" in line
    assert "pose (1.00, -2.50, 90deg) age 0.12s" in line
    assert "nav active 3.25m left" in line
    assert "battery STALE 42% age 7.00s > 2.00s" in line


def test_ids_that_matter_are_listed_under_the_event(mission):
    lines = render_timeline(mission, width=120).splitlines()
    i = lines.index(_line_for("\n".join(lines), 4))
    assert lines[i + 1].split() == ["call=tc-1", "snap=ws-1"]
    j = lines.index(_line_for("\n".join(lines), 3))
    assert lines[j + 1].split() == ["turn=turn-1", "call=tc-1"]
    assert "mission=" not in "\n".join(lines)  # one mission: it is in the header


def test_events_of_several_missions_name_their_mission():
    clock = ManualClock()
    j = MemoryJournal(clock=clock, ids=IdGenerator(seed=1))
    j.append([d(E.MISSION_STARTED, "m-a", payload={"goal": "a"}), d(E.MISSION_STARTED, "m-b", payload={"goal": "b"})])
    text = render_timeline(j.events())
    assert text.splitlines()[0].startswith("missions m-a, m-b")
    assert "mission=m-b" in text


@pytest.mark.parametrize("width", [50, 60, 100])
def test_no_line_exceeds_the_width(mission, width):
    clock = ManualClock()
    j = MemoryJournal(clock=clock, ids=IdGenerator(seed=1))
    j.append([d(E.MODEL_TURN_STARTED, payload={"unexpected": "g" * 300})])  # no turn_index: raw JSON, cut
    text = render_timeline(mission + j.events(), width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert text.splitlines()[-1].endswith("...")


def test_long_known_summaries_wrap_instead_of_losing_the_end(mission):
    text = render_timeline(mission, width=100)
    assert "battery STALE 42% age 7.00s > 2.00s" in " ".join(text.split())


def test_unknown_payload_shapes_fall_back_to_compact_json():
    clock = ManualClock()
    j = MemoryJournal(clock=clock, ids=IdGenerator(seed=1))
    j.append(
        [
            d(E.TOOL_CALL_RECORDED, payload={"weird": [1, 2]}),
            d(E.ROBOT_ACTION_STATE_CHANGED, payload={"to": "RUNNING"}),
            d(E.MODEL_TURN_STARTED, payload={"distance_remaining": 1.5}),
        ]
    )
    # The journal refuses a malformed snapshot, but the renderer must survive
    # events from anywhere (older journals, hand-written fixtures).
    odd = JournalEvent(seq=3, event_id="ev-x", type=E.WORLD_SNAPSHOT_CAPTURED, stamp=1_700_000_000.0, payload={"snapshot": {"pose": "not a snapshot"}})
    first, second, progress = j.events()
    text = render_timeline([first, second, odd, progress.model_copy(update={"seq": 4})])
    assert '{"weird":[1,2]}' in _line_for(text, 1)
    assert '{"to":"RUNNING"}' in _line_for(text, 2)
    assert '{"snapshot":{"pose":"not a snapshot"}}' in _line_for(text, 3)
    assert '{"distance_remaining":1.5}' in _line_for(text, 4)


def test_a_snapshot_with_missing_fields_says_missing_and_wraps_between_parts():
    j = MemoryJournal(clock=ManualClock(), ids=IdGenerator(seed=1))
    j.append([d(E.WORLD_SNAPSHOT_CAPTURED, payload={"snapshot": {"snapshot_id": "ws-x", "captured_at": 1.0}})])
    lines = render_timeline(j.events(), width=100).splitlines()
    assert lines[1].endswith("on_request | pose MISSING | nav unknown")
    assert lines[2].strip() == "battery MISSING"
    assert lines[3].strip() == "snap=ws-x"


def test_a_reconciliation_names_the_backends_answer_and_the_state_it_gave_the_action():
    j = MemoryJournal(clock=ManualClock(), ids=IdGenerator(seed=1))
    j.append([d(E.ROBOT_ACTION_RECONCILED, robot_action_id="ra-1", payload={
        "finding": "backend_terminal", "backend_status": "aborted", "action_state": "FAILED",
        "detail": "backend reports the goal aborted"}),
        d(E.ROBOT_ACTION_RECONCILED, robot_action_id="ra-2", payload={
            "finding": "operator_cleared", "backend_status": "", "detail": "alice: parked"})])
    text = render_timeline(j.events(), width=140)
    line = _line_for(text, 1)
    assert "backend_terminal (backend: aborted) -> action FAILED | backend reports the goal aborted" in line
    assert "operator_cleared | alice: parked" in _line_for(text, 2), "no state: the record was already final"


def test_empty_timeline():
    assert render_timeline([]) == "(no events)\n"


def test_jsonl_export_round_trips_through_the_records_adapter(mission):
    out = export_events(mission, "jsonl")
    lines = out.splitlines()
    assert len(lines) == len(mission) and out.endswith("\n")
    assert [from_json(line) for line in lines] == mission


def test_csv_export_has_the_events_table_columns_and_exact_values(mission, tmp_path: Path):
    j = open_journal(tmp_path / "j.db", clock=ManualClock(), ids=IdGenerator(seed=1))
    with sqlite3.connect(tmp_path / "j.db") as conn:
        table_columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(events)"))
    j.close()
    assert EXPORT_COLUMNS == table_columns

    rows = list(csv.DictReader(io.StringIO(export_events(mission, "csv"))))
    assert len(rows) == len(mission)
    for row, ev in zip(rows, mission):
        assert int(row["seq"]) == ev.seq and row["type"] == ev.type.value
        assert float(row["stamp"]) == ev.stamp
        assert json.loads(row["payload"]) == ev.payload
        assert row["tool_call_id"] == ev.tool_call_id


def test_unknown_export_format_is_a_usage_error(mission):
    with pytest.raises(UsageError):
        export_events(mission, "xml")  # type: ignore[arg-type]


def test_a_width_below_the_minimum_is_raised_to_it(mission):
    text = render_timeline(mission, width=10)
    assert 40 < max(len(line) for line in text.splitlines()) <= 50


def test_progress_runs_collapse_and_known_types_read_as_text():
    clock = ManualClock()
    j = MemoryJournal(clock=clock, ids=IdGenerator(seed=1))
    j.append([d(E.MODEL_TURN_STARTED, payload={"turn_index": 2, "context_bytes": 900})])
    for k in range(6):
        clock.advance(0.5)
        j.append([d(E.ROBOT_ACTION_PROGRESS, payload={"distance_remaining": 3.0 - k * 0.5})])
    text = render_timeline(j.events())
    assert "turn 2 | context 900 bytes" in text
    assert "distance remaining 3.00 m" in text and "distance remaining 0.50 m" in text
    assert "... 4 more progress updates over 2.5s" in text
    assert "distance remaining 2.00 m" not in text
    full = render_timeline(j.events(), collapse_progress=False)
    assert "distance remaining 2.00 m" in full
