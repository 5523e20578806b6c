"""The journal contract, run against every backend, plus real SQLite storage faults.

Faults are produced by SQLite itself (a page limit, a second connection's
lock, a constraint), never by patching our code.
"""
from __future__ import annotations

import enum
import sqlite3
import threading
from pathlib import Path

import pytest
import sqlite_utils

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.errors import JournalWriteError, StaleRevision, UsageError
from robot_harness.core.journal import (
    MIGRATIONS,
    Journal,
    MemoryJournal,
    SqliteJournal,
    UnknownSnapshot,
    default_redactor,
    open_journal,
)
from robot_harness.core.journal_pg import PostgresJournal
from robot_harness.core.records import (
    Availability,
    EventDraft,
    EventType,
    FieldMeta,
    JournalEvent,
    Pose2D,
    WorldSnapshot,
)

E = EventType
MIGRATION_NAMES = [name for name, _ in MIGRATIONS]


def draft(type_: EventType = E.MODEL_TURN_STARTED, mission: str = "m-1", **kw) -> EventDraft:
    return EventDraft(type=type_, mission_id=mission, **kw)


def snapshot(snapshot_id: str = "ws-1", mission: str = "m-1", **kw) -> WorldSnapshot:
    return WorldSnapshot(
        snapshot_id=snapshot_id,
        mission_id=mission,
        reason="pre_dispatch",
        captured_at=1_700_000_000.5,
        pose=Pose2D(x=1.0, y=2.0, yaw=0.5),
        pose_meta=FieldMeta(availability=Availability.AVAILABLE, age_s=0.05, max_age_s=0.5, source="/amcl_pose"),
        **kw,
    )


def snapshot_draft(snap: WorldSnapshot) -> EventDraft:
    return draft(E.WORLD_SNAPSHOT_CAPTURED, mission=snap.mission_id, payload={"snapshot": snap.model_dump(mode="json")})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def journal(request, tmp_path: Path, clock: ManualClock):
    if request.param == "memory":
        j: Journal = MemoryJournal(clock=clock, ids=IdGenerator(seed=7))
    elif request.param == "postgres":
        j = PostgresJournal(request.getfixturevalue("pg_url"), clock=clock, ids=IdGenerator(seed=7))
    else:
        j = SqliteJournal(tmp_path / "journal.db", clock=clock, ids=IdGenerator(seed=7))
    j.setup()
    yield j
    j.close()


# ------------------------------------------------------------------ contract


def test_append_assigns_seq_ids_from_generator_and_stamps_from_clock(journal: Journal, clock: ManualClock):
    first = journal.append([draft(), draft()])
    clock.advance(2.5)
    second = journal.append([draft(E.TOOL_CALL_RECORDED)])

    expected_ids = IdGenerator(seed=7)
    assert [e.seq for e in first + second] == [1, 2, 3]
    assert [e.event_id for e in first + second] == [expected_ids.new("ev") for _ in range(3)]
    assert [e.stamp for e in first + second] == [1_700_000_000.0, 1_700_000_000.0, 1_700_000_002.5]
    assert journal.last_seq() == 3


def test_reads_return_exactly_what_append_returned(journal: Journal):
    written = journal.append(
        [draft(E.TOOL_CALL_RECORDED, tool_call_id="tc-1", model_turn_id="turn-1", payload={"name": "nav", "arguments": {"x": 1.5}})]
    )
    assert journal.events() == written
    read = journal.events()[0]
    read.payload["arguments"]["x"] = 99.0  # a reader's copy is its own
    assert journal.events()[0].payload["arguments"]["x"] == 1.5


def test_events_are_ordered_and_filtered(journal: Journal):
    journal.append([draft(E.MISSION_STARTED, "a"), draft(E.MISSION_STARTED, "b")])
    journal.append([draft(E.TOOL_CALL_RECORDED, "a"), draft(E.TOOL_CALL_RECORDED, "b"), draft(E.MISSION_FINISHED, "a")])

    assert [e.seq for e in journal.events()] == [1, 2, 3, 4, 5]
    assert [e.seq for e in journal.events(mission_id="a")] == [1, 3, 5]
    assert [e.seq for e in journal.events(after_seq=3)] == [4, 5]
    assert [e.seq for e in journal.events(types=[E.MISSION_STARTED, E.MISSION_FINISHED])] == [1, 2, 5]
    assert [e.seq for e in journal.events(mission_id="b", types=[E.TOOL_CALL_RECORDED])] == [4]
    assert [e.seq for e in journal.events(after_seq=1, limit=2)] == [2, 3]
    assert journal.events(types=[]) == []
    assert journal.events(limit=0) == []
    with pytest.raises(UsageError):
        journal.events(limit=-1)


def test_payload_is_normalized_to_json(journal: Journal):
    class Color(str, enum.Enum):
        RED = "red"

    (ev,) = journal.append([draft(payload={"color": Color.RED, "pair": (1, 2), "nan": float("nan"), "pose": Pose2D(x=1, y=2)})])
    assert ev.payload == {"color": "red", "pair": [1, 2], "nan": None, "pose": {"x": 1.0, "y": 2.0, "yaw": 0.0}}
    assert journal.events()[0].payload == ev.payload


def test_multi_event_append_is_atomic_when_a_payload_cannot_be_stored(journal: Journal):
    journal.append([draft()])
    with pytest.raises(JournalWriteError):
        journal.append([draft(payload={"ok": 1}), draft(payload={"bad": object()})])
    assert journal.last_seq() == 1
    assert len(journal.events()) == 1
    assert journal.append([draft()])[0].seq == 2


def test_multi_event_append_is_atomic_on_a_storage_constraint(journal: Journal):
    journal.append([snapshot_draft(snapshot("ws-dup"))])
    # The first event of this batch is fine; the snapshot row violates the key.
    with pytest.raises(JournalWriteError):
        journal.append([draft(E.TOOL_CALL_RECORDED), snapshot_draft(snapshot("ws-dup"))])
    assert [e.type for e in journal.events()] == [E.WORLD_SNAPSHOT_CAPTURED]
    assert journal.append([draft()])[0].seq == 2


def test_stale_revision_raises_with_attributes_and_writes_nothing(journal: Journal):
    journal.append([draft(), draft()])
    calls: list[list[int]] = []
    journal.subscribe(lambda evs: calls.append([e.seq for e in evs]))

    with pytest.raises(StaleRevision) as info:
        journal.append([draft(E.TOOL_CALL_RECORDED)], expected_last_seq=1)
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert info.value.to_dict()["error"] == "stale_revision"
    assert journal.last_seq() == 2
    assert calls == []

    (ev,) = journal.append([draft(E.TOOL_CALL_RECORDED)], expected_last_seq=2)
    assert ev.seq == 3
    assert calls == [[3]]


def test_stale_revision_does_not_consume_event_ids(journal: Journal):
    journal.append([draft()])
    with pytest.raises(StaleRevision):
        journal.append([draft()], expected_last_seq=0)
    (ev,) = journal.append([draft()])
    ids = IdGenerator(seed=7)
    assert ev.event_id == [ids.new("ev") for _ in range(2)][1]


def test_nested_secrets_are_redacted_before_storage(journal: Journal):
    payload = {
        "request": {
            "headers": {"Authorization": "Bearer sk-live", "Accept": "json"},
            "OPENAI_API_KEY": "sk-1",
            "usage": {"prompt_tokens": 12, "max_tokens": 256},
        },
        "steps": [{"password": "hunter2"}, {"clientSecret": {"deep": "x"}}, {"x-api-key": "k"}],
        "credentials": ["a", "b"],
        "apiKey": "k2",
        "access_token": "t",
        "goal": "dock",
    }
    (ev,) = journal.append([draft(payload=payload)])
    stored = journal.events()[0].payload
    assert stored == ev.payload
    assert stored["request"]["headers"] == {"Authorization": "***", "Accept": "json"}
    assert stored["request"]["OPENAI_API_KEY"] == "***"
    assert stored["request"]["usage"] == {"prompt_tokens": 12, "max_tokens": 256}
    assert stored["steps"] == [{"password": "***"}, {"clientSecret": "***"}, {"x-api-key": "***"}]
    assert (stored["credentials"], stored["apiKey"], stored["access_token"]) == ("***", "***", "***")
    assert stored["goal"] == "dock"
    assert payload["request"]["headers"]["Authorization"] == "Bearer sk-live"  # caller's dict untouched


def test_default_redactor_returns_a_deep_copy():
    original = {"a": [{"b": {"c": 1}}], "Token": "t"}
    out = default_redactor(original)
    out["a"][0]["b"]["c"] = 2
    assert original == {"a": [{"b": {"c": 1}}], "Token": "t"}
    assert out["Token"] == "***"


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_custom_redactor_is_applied_and_a_failing_one_writes_nothing(backend: str, tmp_path: Path, clock, request):
    def hide_goal(p: dict) -> dict:
        if p.get("explode"):
            raise RuntimeError("redactor bug")
        return {**p, "goal": "[hidden]"}

    path = (None if backend == "memory" else tmp_path / "j.db" if backend == "sqlite"
            else request.getfixturevalue("pg_url"))
    j = open_journal(path, clock=clock, ids=IdGenerator(seed=1), redact=hide_goal)
    (ev,) = j.append([draft(payload={"goal": "the vault", "token": "kept by this redactor"})])
    assert ev.payload == {"goal": "[hidden]", "token": "kept by this redactor"}
    with pytest.raises(JournalWriteError):
        j.append([draft(), draft(payload={"explode": True})])
    assert j.last_seq() == 1
    j.close()


def test_snapshots_are_retrievable_by_id(journal: Journal):
    snap = snapshot("ws-42", battery=0.8, battery_meta=FieldMeta(availability=Availability.STALE, age_s=9.0, max_age_s=2.0))
    (ev,) = journal.append([snapshot_draft(snap)])
    assert ev.snapshot_id == "ws-42"
    got = journal.get_snapshot("ws-42")
    assert got == snap
    assert got.battery_meta.availability is Availability.STALE

    with pytest.raises(UnknownSnapshot) as info:
        journal.get_snapshot("ws-nope")
    assert isinstance(info.value, UsageError) and isinstance(info.value, KeyError)
    assert info.value.snapshot_id == "ws-nope"


def test_malformed_snapshot_event_is_refused_and_writes_nothing(journal: Journal):
    with pytest.raises(UsageError):
        journal.append([draft(), draft(E.WORLD_SNAPSHOT_CAPTURED, payload={"pose": [1, 2]})])
    with pytest.raises(UsageError):
        journal.append([draft(E.WORLD_SNAPSHOT_CAPTURED, snapshot_id="ws-other", payload={"snapshot": snapshot("ws-1").model_dump(mode="json")})])
    assert journal.last_seq() == 0


def test_missions_summarize_start_and_finish(journal: Journal, clock: ManualClock):
    journal.append([draft(E.MISSION_STARTED, "m-a", payload={"goal": "go to dock"})])
    clock.advance(1)
    journal.append([draft(E.MISSION_STARTED, "m-b", payload={"goal": "inspect"}), draft(mission="")])
    clock.advance(1)
    journal.append([draft(E.TOOL_CALL_RECORDED, "m-a"), draft(E.MISSION_FINISHED, "m-a", payload={"status": "SUCCEEDED", "summary": "docked"})])
    clock.advance(1)
    journal.append([draft(E.TOOL_CALL_RECORDED, "m-b")])

    a, b = journal.missions()
    assert a == {
        "mission_id": "m-a",
        "robot_id": "",
        "first_seq": 1,
        "last_seq": 5,
        "event_count": 3,
        "started_at": 1_700_000_000.0,
        "goal": "go to dock",
        "finished_at": 1_700_000_002.0,
        "status": "SUCCEEDED",
        "summary": "docked",
    }
    assert (b["mission_id"], b["first_seq"], b["last_seq"], b["event_count"]) == ("m-b", 2, 6, 2)
    assert (b["goal"], b["status"], b["finished_at"]) == ("inspect", None, None)


def test_listeners_are_called_after_commit_with_the_committed_events(journal: Journal):
    seen: list[tuple[list[int], int]] = []
    journal.subscribe(lambda evs: seen.append(([e.seq for e in evs], journal.last_seq())))
    journal.append([draft(), draft()])
    assert seen == [([1, 2], 2)]  # the listener could already read its own events


def test_listeners_are_not_called_on_failure(journal: Journal):
    seen: list[list[JournalEvent]] = []
    journal.subscribe(seen.append)
    with pytest.raises(JournalWriteError):
        journal.append([draft(payload={"bad": object()})])
    with pytest.raises(StaleRevision):
        journal.append([draft()], expected_last_seq=5)
    assert seen == []


def test_a_raising_listener_breaks_neither_append_nor_other_listeners(journal: Journal, caplog):
    def broken(_evs):
        raise RuntimeError("listener bug")

    seen: list[int] = []
    journal.subscribe(broken)
    journal.subscribe(lambda evs: seen.extend(e.seq for e in evs))
    assert [e.seq for e in journal.append([draft()])] == [1]
    assert [e.seq for e in journal.append([draft()])] == [2]
    assert seen == [1, 2]
    assert "listener bug" in caplog.text


def test_unsubscribe_stops_delivery(journal: Journal):
    seen: list[int] = []
    unsubscribe = journal.subscribe(lambda evs: seen.extend(e.seq for e in evs))
    journal.append([draft()])
    unsubscribe()
    unsubscribe()  # idempotent
    journal.append([draft()])
    assert seen == [1]


def test_a_listener_may_append_and_batches_arrive_in_commit_order(journal: Journal):
    seen: list[list[int]] = []

    def echo(evs):
        seen.append([e.seq for e in evs])
        if evs[0].type is E.TOOL_CALL_RECORDED:
            journal.append([draft(E.TOOL_RESULT_RECORDED)])

    journal.subscribe(echo)
    journal.subscribe(lambda evs: seen.append([-e.seq for e in evs]))
    journal.append([draft(E.TOOL_CALL_RECORDED)])
    assert seen == [[1], [-1], [2], [-2]]


def test_concurrent_appends_get_unique_consecutive_seqs(journal: Journal):
    seen: list[int] = []
    journal.subscribe(lambda evs: seen.extend(e.seq for e in evs))

    def worker(n: int) -> None:
        for _ in range(8):
            journal.append([draft(mission=f"m-{n}"), draft(mission=f"m-{n}")])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert [e.seq for e in journal.events()] == list(range(1, 65))
    assert seen == list(range(1, 65))
    by_seq = {e.seq: e.mission_id for e in journal.events()}
    assert all(by_seq[s] == by_seq[s + 1] for s in range(1, 65, 2))  # batches stayed contiguous


def test_setup_twice_is_safe_and_migrations_are_recorded_once(journal: Journal):
    journal.append([draft()])
    journal.setup()
    journal.setup()
    assert journal.applied_migrations() == MIGRATION_NAMES
    assert journal.last_seq() == 1


def test_a_bare_draft_or_a_non_draft_is_a_usage_error(journal: Journal):
    with pytest.raises(UsageError):
        journal.append(draft())  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        journal.append([{"type": "MISSION_STARTED"}])  # type: ignore[list-item]
    assert journal.last_seq() == 0


def test_closed_journal_refuses_use(journal: Journal):
    journal.close()
    journal.close()
    with pytest.raises(UsageError):
        journal.append([draft()])
    with pytest.raises(UsageError):
        journal.events()


def test_open_journal_picks_the_backend(tmp_path: Path, clock: ManualClock):
    mem = open_journal(":memory:", clock=clock, ids=IdGenerator(seed=1), busy_timeout_ms=10, max_pages=5)
    none = open_journal(None, clock=clock, ids=IdGenerator(seed=1))
    disk = open_journal(tmp_path / "j.db", clock=clock, ids=IdGenerator(seed=1))
    assert isinstance(mem, MemoryJournal) and isinstance(none, MemoryJournal)
    assert isinstance(disk, SqliteJournal)
    assert disk.applied_migrations() == MIGRATION_NAMES
    for j in (mem, none, disk):
        j.close()


# ------------------------------------------------------------------ SQLite only


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]


def test_sqlite_durability_settings(tmp_path: Path, clock: ManualClock):
    j = open_journal(tmp_path / "j.db", clock=clock, ids=IdGenerator(seed=1), busy_timeout_ms=1234)
    p = j.pragmas()
    assert p["journal_mode"] == "wal"
    assert p["synchronous"] == 2  # FULL
    assert p["foreign_keys"] == 1
    assert p["busy_timeout"] == 1234
    with sqlite3.connect(tmp_path / "j.db") as other:  # WAL is a property of the file
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    j.close()


def test_disk_full_raises_and_writes_nothing_then_recovers(tmp_path: Path, clock: ManualClock):
    path = tmp_path / "small.db"
    j = open_journal(path, clock=clock, ids=IdGenerator(seed=1), max_pages=64)
    j.append([draft(payload={"n": 1})])
    before = _rows(path)

    with pytest.raises(JournalWriteError) as info:
        j.append([draft(payload={"n": 2}), draft(payload={"blob": "x" * 1_000_000})])
    assert "full" in info.value.details["sqlite_error"]
    assert _rows(path) == before == 1
    assert j.last_seq() == 1

    (ev,) = j.append([draft(payload={"n": 3})])
    assert ev.seq == 2 and _rows(path) == 2
    j.close()


def test_locked_database_raises_then_appends_work_once_released(tmp_path: Path, clock: ManualClock):
    path = tmp_path / "locked.db"
    j = open_journal(path, clock=clock, ids=IdGenerator(seed=1), busy_timeout_ms=50)
    j.append([draft()])
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(JournalWriteError) as info:
            j.append([draft(), draft()])
        assert "locked" in info.value.details["sqlite_error"]
        assert [e.seq for e in j.events()] == [1]  # WAL: readers are not blocked
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert [e.seq for e in j.append([draft(), draft()])] == [2, 3]
    assert _rows(path) == 3
    j.close()


def test_reopened_file_continues_seq_and_keeps_migrations(tmp_path: Path, clock: ManualClock):
    path = tmp_path / "j.db"
    j = open_journal(path, clock=clock, ids=IdGenerator(seed=1))
    j.append([draft(), draft(), snapshot_draft(snapshot("ws-9"))])
    j.close()

    j2 = open_journal(path, clock=clock, ids=IdGenerator(seed=2))
    assert j2.last_seq() == 3
    assert j2.append([draft()])[0].seq == 4
    assert j2.get_snapshot("ws-9").snapshot_id == "ws-9"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM migrations ORDER BY rowid").fetchall() == [(n,) for n in MIGRATION_NAMES]
    j2.close()


def test_reusing_an_id_seed_on_the_same_file_is_refused_not_overwritten(tmp_path: Path, clock: ManualClock):
    path = tmp_path / "j.db"
    with open_journal(path, clock=clock, ids=IdGenerator(seed=1)) as j:
        j.append([draft(payload={"run": 1})])
    with open_journal(path, clock=clock, ids=IdGenerator(seed=1)) as j:
        with pytest.raises(JournalWriteError) as info:
            j.append([draft(payload={"run": 2})])
        assert "UNIQUE" in info.value.details["sqlite_error"]
        assert [e.payload for e in j.events()] == [{"run": 1}]


def test_a_journal_from_a_newer_harness_is_refused(tmp_path: Path, clock: ManualClock):
    path = tmp_path / "j.db"
    open_journal(path, clock=clock, ids=IdGenerator(seed=1)).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", ("9999_future", 0.0))
    j = SqliteJournal(path, clock=clock, ids=IdGenerator(seed=1))
    with pytest.raises(UsageError) as info:
        j.setup()
    assert info.value.details["unknown"] == ["9999_future"]
    j.close()


def test_tables_are_plain_for_sqlite_utils(tmp_path: Path, clock: ManualClock):
    path = tmp_path / "j.db"
    j = open_journal(path, clock=clock, ids=IdGenerator(seed=1))
    j.append([draft(E.MISSION_STARTED, payload={"goal": "dock"}), snapshot_draft(snapshot("ws-1"))])

    db = sqlite_utils.Database(path)
    rows = list(db["events"].rows)
    assert [r["seq"] for r in rows] == [1, 2]
    assert rows[0]["type"] == "MISSION_STARTED" and rows[0]["mission_id"] == "m-1"
    assert rows[0]["payload"] == '{"goal":"dock"}'
    assert set(db["events"].columns_dict) == {
        "seq", "event_id", "format_version", "type", "stamp", "mission_id",
        "model_turn_id", "tool_call_id", "robot_action_id", "snapshot_id", "payload", "robot_id",
    }
    assert {tuple(ix.columns) for ix in db["events"].indexes} >= {("mission_id",), ("type",), ("event_id",),
                                                                  ("robot_id", "seq")}
    (snap_row,) = db["snapshots"].rows
    assert (snap_row["snapshot_id"], snap_row["seq"], snap_row["reason"]) == ("ws-1", 2, "pre_dispatch")
    assert WorldSnapshot.model_validate_json(snap_row["json"]) == snapshot("ws-1")
    db.close()
    j.close()


def test_opening_an_up_to_date_file_does_not_wait_for_the_writer(tmp_path: Path, clock: ManualClock):
    path = tmp_path / "j.db"
    writer = open_journal(path, clock=clock, ids=IdGenerator(seed=1))
    writer.append([draft(E.MISSION_STARTED, payload={"goal": "dock"})])
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # a writer mid-transaction
    try:
        reader = open_journal(path, clock=clock, ids=IdGenerator(seed=2), busy_timeout_ms=10)
        assert reader.missions()[0]["goal"] == "dock"
        reader.close()
    finally:
        other.execute("ROLLBACK")
        other.close()
    writer.close()
