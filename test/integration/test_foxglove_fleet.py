"""The live Foxglove bridge over what the supervisor's read-only file reader could not follow before: a
fleet's PostgreSQL journal (through the ``Journal`` API) and a SQLite file from before robot ids (which a
read-only reader cannot migrate). The bridge itself, with the foxglove SDK; what it serves over the
WebSocket protocol is test_foxglove_bridge.py's."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("foxglove")

from robot_harness.core.clock import IdGenerator, SystemClock  # noqa: E402
from robot_harness.core.journal import SqliteJournal, open_journal  # noqa: E402
from robot_harness.core.records import EventDraft, EventType  # noqa: E402
from robot_harness.operator import foxglove_bridge as fb  # noqa: E402

E = EventType


def _mission(j: Any, mission_id: str) -> None:
    j.append([EventDraft(type=E.MISSION_STARTED, mission_id=mission_id, payload={
                  "goal": "go to the spot", "config": {"places": {"spot": {"x": 2.0, "y": 1.0}}}}),
              EventDraft(type=E.DONE_PROPOSED, mission_id=mission_id, payload={"text": "there"})])


def _caught_up(bridge: fb.FoxgloveBridge, seq: int) -> None:
    deadline = time.monotonic() + 10
    while bridge.last_seq < seq and time.monotonic() < deadline:
        time.sleep(0.02)
    assert bridge.last_seq == seq and bridge.errors == 0 and bridge.published > 0, \
        (bridge.last_seq, bridge.errors, bridge.published)


def test_the_bridge_follows_a_fleet_database(pg_url, monkeypatch):
    pytest.importorskip("psycopg")
    # The bridge's thread starts reading inside serve(): its first read says where it began.
    reads: list[int] = []
    read = fb.JournalFollower.read

    def spy(self: fb.JournalFollower, *, after_seq: int, **kw: Any) -> Any:
        reads.append(after_seq)
        return read(self, after_seq=after_seq, **kw)

    monkeypatch.setattr(fb.JournalFollower, "read", spy)
    j = open_journal(pg_url, clock=SystemClock(), ids=IdGenerator(None), robot_id="robot1")
    try:
        _mission(j, "m-1")
        with fb.serve(pg_url, port=0, poll_s=0.05) as bridge:
            _caught_up(bridge, 2)
            assert reads[0] == 0, "from just before the latest MISSION_STARTED"
            published = bridge.published
            _mission(j, "m-2")
            _caught_up(bridge, 4)
            assert bridge.published > published
    finally:
        j.close()


def test_the_bridge_follows_a_journal_file_from_before_robot_ids(tmp_path: Path):
    path = tmp_path / "old.sqlite3"
    j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None))
    j.setup()
    _mission(j, "m-old")
    j.close()
    db = sqlite3.connect(path)
    db.executescript("DROP INDEX events_robot_id; ALTER TABLE events DROP COLUMN robot_id;"
                     " DELETE FROM migrations WHERE name = '0006_robot_id';")
    db.close()
    with fb.serve(path, port=0, poll_s=0.05) as bridge:
        _caught_up(bridge, 2)
