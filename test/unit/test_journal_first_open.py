"""Several processes opening one brand-new SQLite journal at the same moment (two robots' harnesses
started together on one file, a benchmark's workers): every one opens it, none is refused.

Two windows made that fail, each reproduced here for real with a second SQLite connection, then end
to end with processes started together:

* switching a new file to WAL needs the file to itself, and SQLite answers ``SQLITE_BUSY`` at once,
  without its busy handler, while another connection holds its write lock on it;
* a file with no schema yet next to a WAL holding frames is what a damaged WAL looks like, and also
  what another process's first setup looks like until it commits: it is looked at again within the
  busy timeout before it is refused (a really damaged one still is:
  ``test_storage_faults.test_an_unreadable_wal_next_to_a_file_without_schema_is_not_set_up_as_a_fresh_journal``).
"""
from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.journal import SqliteJournal, open_journal
from robot_harness.core.records import EventDraft, EventType

HOLD_S = 0.3  # how long the other connection keeps the new file to itself


def journal(path: Path, seed: int, busy_timeout_ms: int = 2000) -> SqliteJournal:
    return open_journal(path, clock=ManualClock(), ids=IdGenerator(seed=seed), busy_timeout_ms=busy_timeout_ms)


def note(seed: int) -> list[EventDraft]:
    return [EventDraft(type=EventType.MODEL_TURN_STARTED, mission_id=f"m-{seed}", payload={"writer": seed})]


def open_while_held(path: Path, other: sqlite3.Connection) -> float:
    """Open the journal while ``other`` holds the new file, which commits ``HOLD_S`` later from another
    thread; write an event through it and read it back. Returns how long the open took."""
    timer = threading.Timer(HOLD_S, other.execute, ("COMMIT",))
    timer.start()
    t0 = time.monotonic()
    try:
        j = journal(path, seed=1)
        waited = time.monotonic() - t0
        j.append(note(1))
        assert [e.payload["writer"] for e in j.events()] == [1]
        j.close()
    finally:
        timer.join()
        other.close()
    return waited


def test_a_new_file_another_connection_holds_is_switched_to_wal_once_it_lets_go(tmp_path: Path):
    path = tmp_path / "journal.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # what an opener holds on the new file while it switches its mode
    waited = open_while_held(path, other)
    assert waited >= HOLD_S * 0.5, "the open must have waited for the other connection, not raced it"


def test_a_new_file_whose_first_setup_is_not_committed_yet_is_waited_for_not_refused_as_damaged(tmp_path: Path):
    path = tmp_path / "journal.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("PRAGMA journal_mode = WAL")
    other.execute("PRAGMA cache_size = 2")  # spill the uncommitted first transaction into the WAL
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE setup_by_another_process (x)")
    other.executemany("INSERT INTO setup_by_another_process VALUES (?)", [("x" * 3000,)] * 50)
    assert (tmp_path / "journal.db-wal").stat().st_size > 32 * 1024
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as probe:
        assert probe.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0, "no schema seen yet"
    open_while_held(path, other)


def _open_at(path: str, seed: int, start_at: float, results: multiprocessing.Queue) -> None:
    while time.time() < start_at:
        pass  # spin, so the processes' opens really meet
    try:
        j = journal(Path(path), seed)
        j.append(note(seed))
        j.close()
        results.put((path, seed, "ok"))
    except Exception as exc:  # reported to the test, which names it
        results.put((path, seed, f"{type(exc).__name__}: {exc}"))


def test_processes_started_together_on_one_new_file_all_open_it_and_all_their_events_are_kept(tmp_path: Path):
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    writers, files = 6, 4
    start = time.time() + 3.0  # after every spawned interpreter has imported the journal
    procs = []
    for k in range(files):
        path = str(tmp_path / f"journal-{k}.db")
        for w in range(writers):
            procs.append(ctx.Process(target=_open_at, args=(path, 100 * k + w + 1, start + 0.25 * k, results)))
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    failed = [r for r in got if r[2] != "ok"]
    assert not failed, failed
    for k in range(files):
        j = journal(tmp_path / f"journal-{k}.db", seed=999)
        assert sorted(e.payload["writer"] for e in j.events()) == [100 * k + w + 1 for w in range(writers)]
        j.close()
