"""What only a PostgreSQL journal does: many robots writing one database, a server that goes away and
comes back, bounded lock waits, a redacted URL. The journal contract itself runs against PostgreSQL in
test_journal.py and the suites beside it. Each test gets a database of its own (test/pg.py)."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.durable import LeaseConflict
from robot_harness.core.errors import JournalWriteError, UsageError
from robot_harness.core.journal import MIGRATIONS, JournalReadError, SqliteJournal, open_journal, redact_url
from robot_harness.core.journal_pg import PG_MIGRATIONS, WRITE_LOCK_KEY, PostgresJournal
from robot_harness.core.records import EventDraft, EventType

E = EventType
REPO = Path(__file__).resolve().parents[2]
NAMES = [name for name, _ in MIGRATIONS]
SECRET = "Sekr3t-pw"


def draft(type_: EventType = E.MODEL_TURN_STARTED, mission: str = "m-1", **kw) -> EventDraft:
    return EventDraft(type=type_, mission_id=mission, **kw)


def acquire(resource: str, owner: str, mission: str, **payload) -> EventDraft:
    return draft(E.LEASE_ACQUIRED, mission, payload={"resource": resource, "owner": owner, **payload})


def journal(url: str, seed: int = 1, **kw) -> PostgresJournal:
    j = PostgresJournal(url, clock=ManualClock(), ids=IdGenerator(seed=seed), **kw)
    j.setup()
    return j


def with_password(url: str) -> str:
    """``url`` with a password (the test server trusts 127.0.0.1, so any password connects)."""
    return url.replace("postgres@", f"postgres:{SECRET}@", 1)


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def end_journal_session(url: str) -> int:
    """End the journal's session (the only one in this test's database) from another session, as an
    administrator's ``pg_terminate_backend``, ``idle_session_timeout`` or a failover would; return its pid
    once the server has let it go."""
    with psycopg.connect(url, autocommit=True) as admin:
        (pid,) = [r[0] for r in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'robot_harness journal'")]
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        deadline = time.monotonic() + 10
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} still running"
            time.sleep(0.01)
    return pid


def assert_no_secret(err: BaseException) -> None:
    text = "".join(traceback.format_exception(err)) + repr(getattr(err, "details", ""))
    assert SECRET not in text


# ------------------------------------------------------------------ fleets


def test_two_robots_appending_at_once_get_unique_consecutive_seqs_and_see_each_other(pg_url):
    robots = {name: journal(pg_url, seed=n, robot_id=name) for n, name in enumerate(("robot1", "robot2"), 1)}
    seen: dict[str, list[int]] = {name: [] for name in robots}
    for name, j in robots.items():
        j.subscribe(lambda evs, name=name: seen[name].extend(e.seq for e in evs))
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker(j: PostgresJournal, n: int) -> None:
        try:
            start.wait(timeout=10)
            for _ in range(10):
                j.append([draft(mission=f"{j.robot_id}-{n}"), draft(mission=f"{j.robot_id}-{n}")])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(j, n)) for j in robots.values() for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    try:
        assert errors == []
        for j in robots.values():
            events = j.events()
            assert [e.seq for e in events] == list(range(1, 81))
            assert all(events[i].mission_id == events[i + 1].mission_id for i in range(0, 80, 2))  # whole batches
            assert {e.robot_id for e in j.events(robot_id="robot1")} == {"robot1"}
            assert len(j.events(robot_id="robot2")) == 40
        assert sorted(seen["robot1"] + seen["robot2"]) == list(range(1, 81))  # each sees its own commits
        assert all(e.robot_id == "robot1" for e in robots["robot2"].events() if e.seq in seen["robot1"])
        assert {m["robot_id"] for m in robots["robot1"].missions(robot_id="robot2")} == {"robot2"}
    finally:
        for j in robots.values():
            j.close()


def test_a_site_lease_is_one_for_the_fleet_and_a_robots_own_resource_is_its_own(pg_url):
    r1, r2 = journal(pg_url, seed=1, robot_id="robot1"), journal(pg_url, seed=2, robot_id="robot2")
    try:
        (site,) = r1.append([acquire("elevator_1", "act-1", "m-1", scope="site")])
        with pytest.raises(LeaseConflict) as info:
            r2.append([acquire("elevator_1", "act-9", "m-9", scope="site"), draft(E.TOOL_RESULT_RECORDED, "m-9")])
        assert info.value.lease.robot_id == "robot1" and info.value.lease.fence == site.seq
        assert r2.revision("m-9") == 0  # nothing of the refused batch was written
        r1.append([acquire("base", "act-1", "m-1")])
        r2.append([acquire("base", "act-9", "m-9")])  # robot2's base is not robot1's
        assert set(r2.all_leases()) == {"elevator_1", "robot1/base", "robot2/base"}
        assert {k: v.robot_id for k, v in r2.leases().items()} == {"elevator_1": "robot1", "base": "robot2"}
        r1.append([draft(E.LEASE_RELEASED, "m-1", payload={"resource": "elevator_1", "owner": "act-1", "scope": "site",
                                                            "fence": site.seq, "why": "confirmed_terminal"})])
        (mine,) = r2.append([acquire("elevator_1", "act-9", "m-9", scope="site")])
        assert r1.leases()["elevator_1"].robot_id == "robot2" and r1.leases()["elevator_1"].fence == mine.seq
    finally:
        r1.close(), r2.close()


# ------------------------------------------------------------------ faults


def test_a_session_the_server_ended_while_idle_costs_the_next_append_and_read_nothing(pg_url):
    j = journal(pg_url)
    try:
        j.append([draft(), draft()])
        first = end_journal_session(pg_url)
        assert [e.seq for e in j.append([draft()])] == [3]  # its BEGIN met the dropped session
        second = end_journal_session(pg_url)
        assert second != first
        assert [e.seq for e in j.events()] == [1, 2, 3]
        end_journal_session(pg_url)
        assert j.last_seq() == 3 and j.health()["reconnect_pending"] is False
    finally:
        j.close()


def test_a_server_restarted_while_the_journal_was_idle_costs_the_next_call_nothing(pg_server, pg_url):
    j = journal(pg_url)
    try:
        j.append([draft()])
        pg_server.stop()
        pg_server.start()
        assert [e.seq for e in j.append([draft()])] == [2]
        assert [e.seq for e in j.events()] == [1, 2]
    finally:
        j.close()


def test_a_session_ended_again_at_once_is_retried_only_once(pg_url, monkeypatch):
    j = journal(pg_url)
    made: list[int] = []
    replace = j._replace_connection

    def replace_then_end(*, write: bool) -> None:  # each new session is ended before its BEGIN
        replace(write=write)
        made.append(end_journal_session(pg_url))

    try:
        j.append([draft()])
        end_journal_session(pg_url)
        monkeypatch.setattr(j, "_replace_connection", replace_then_end)
        with pytest.raises(JournalWriteError) as info:
            j.append([draft()])
        assert len(made) == 1  # the one retry
        assert info.value.details["sqlstate"] in ("57P01", None) and "commit_outcome" not in info.value.details
        with pytest.raises(JournalReadError):
            j.events()
        assert len(made) == 3  # the pending reconnect, then its one retry
        monkeypatch.undo()
        assert [e.seq for e in j.append([draft()])] == [2]
    finally:
        j.close()


def test_a_session_ended_inside_a_transaction_is_not_retried(pg_url, monkeypatch):
    j = journal(pg_url)
    catch_up = j._catch_up

    def catch_up_then_end(tx) -> None:  # the write transaction has read; its INSERT meets the ended session
        catch_up(tx)
        end_journal_session(pg_url)

    try:
        j.append([draft()])
        monkeypatch.setattr(j, "_catch_up", catch_up_then_end)
        with pytest.raises(JournalWriteError) as info:
            j.append([draft(payload={"lost": True})])
        assert info.value.details["sqlstate"] in ("57P01", None) and j.health()["reconnect_pending"] is True
        monkeypatch.undo()
        assert [(e.seq, e.payload) for e in j.events()] == [(1, {})]
    finally:
        j.close()


def test_a_restarted_server_fails_the_calls_meanwhile_then_the_same_journal_works_again(pg_server, pg_url,
                                                                                        monkeypatch):
    j = journal(pg_url)
    connects: list[str] = []
    connect = psycopg.connect

    def counting_connect(*args, **kwargs):
        connects.append("connect")
        return connect(*args, **kwargs)

    try:
        j.append([draft(), draft()])
        monkeypatch.setattr(psycopg, "connect", counting_connect)
        pg_server.stop()
        try:
            with pytest.raises(JournalWriteError) as info:
                j.append([draft()])
            assert info.value.details["url"] == pg_url and "next call connects anew" in info.value.message
            assert j.health()["reconnect_pending"] is True
            assert len(connects) == 1  # the dropped session's one reconnect, refused: no more tries
            with pytest.raises(JournalReadError):  # still down: the reconnect fails, typed
                j.events()
            with pytest.raises(JournalWriteError):
                j.append([draft()])
            assert len(connects) == 3
        finally:
            pg_server.start()
        assert [e.seq for e in j.append([draft()])] == [3]
        assert [e.seq for e in j.events()] == [1, 2, 3]
        assert j.health() == {"closed": False, "corrupt": None, "reconnect_pending": False}
    finally:
        j.close()


def test_a_database_that_went_backwards_is_refused(pg_server, pg_url):
    j = journal(pg_url)
    try:
        j.append([draft(), draft(), draft()])
        name = database_of(pg_url)
        pg_server.drop_database(name)  # ends the journal's session too
        pg_server.create_database(name)
        for _ in range(2):  # the dropped session's reconnect finds it; so does every call after
            with pytest.raises(JournalWriteError, match="now ends at seq 0 but this journal already saw seq 3") as info:
                j.append([draft()])
            assert info.value.details["seen_seq"] == 3
        with pytest.raises(JournalReadError, match="now ends at seq 0"):
            j.events()
    finally:
        j.close()


def test_a_lock_held_past_busy_timeout_is_a_write_error_and_reads_go_on(pg_url):
    j = journal(pg_url, busy_timeout_ms=100)
    assert (j.settings()["lock_timeout"], j.settings()["statement_timeout"]) == ("100ms", "5100ms")
    j.append([draft()])
    with psycopg.connect(pg_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK_KEY,))  # another writer, mid-transaction
        with pytest.raises(JournalWriteError) as info:
            j.append([draft(), draft()])
        assert info.value.details["sqlstate"] == "55P03" and "busy_timeout_ms" in info.value.message
        assert [e.seq for e in j.events()] == [1]  # readers never wait for the writer
        assert j.health()["reconnect_pending"] is False
        other.execute("SELECT pg_advisory_unlock(%s)", (WRITE_LOCK_KEY,))
    assert [e.seq for e in j.append([draft(), draft()])] == [2, 3]
    j.close()


def test_duplicate_ids_are_write_errors_that_write_nothing(pg_url):
    snap = {"snapshot": {"snapshot_id": "ws-1", "mission_id": "m-1", "reason": "pre_dispatch", "captured_at": 1.0}}
    a, b = journal(pg_url, seed=1), journal(pg_url, seed=1)  # the same id seed twice
    c = journal(pg_url, seed=3)
    try:
        a.append([draft(payload={"run": 1}), draft(E.WORLD_SNAPSHOT_CAPTURED, payload=snap)])
        with pytest.raises(JournalWriteError) as info:
            b.append([draft(payload={"run": 2})])
        assert info.value.details["sqlstate"] == "23505" and "events_event_id_key" in info.value.details["pg_error"]
        with pytest.raises(JournalWriteError) as info:
            c.append([draft(payload={"run": 3}), draft(E.WORLD_SNAPSHOT_CAPTURED, payload=snap)])
        assert info.value.details["sqlstate"] == "23505" and "snapshots_pkey" in info.value.details["pg_error"]
        assert [e.payload.get("run") for e in c.events()] == [1, None]
        assert [e.seq for e in c.append([draft(payload={"run": 4})])] == [3]  # the journal carries on
    finally:
        a.close(), b.close(), c.close()


def test_the_password_never_reaches_an_error_or_a_name(pg_url):
    url = with_password(pg_url)
    j = journal(url, busy_timeout_ms=50)
    assert SECRET not in j.url + j.path + repr(j) and j.url == pg_url.replace("postgres@", "postgres:***@")
    j.append([draft()])
    with psycopg.connect(pg_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (WRITE_LOCK_KEY,))
        with pytest.raises(JournalWriteError) as info:
            j.append([draft()])
        assert_no_secret(info.value)
    j.close()

    port = urlsplit(pg_url).port
    closed = url.replace(f":{port}/", ":1/")  # nothing listens on port 1
    with pytest.raises(JournalReadError) as read:
        journal(closed)
    assert_no_secret(read.value)
    assert "postgres:***@127.0.0.1:1/" in read.value.message
    with pytest.raises(UsageError) as bad:
        PostgresJournal(url + "?nonsense_option=1", clock=ManualClock(), ids=IdGenerator(1)).setup()
    assert_no_secret(bad.value)
    query = f"{pg_url}?password={SECRET}&sslmode=disable"
    assert redact_url(query) == f"{pg_url}?password=***&sslmode=disable"


def test_without_psycopg_the_core_imports_and_a_postgres_journal_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    with pytest.raises(UsageError, match=r"pip install 'psycopg\[binary\]'") as missing:
        PostgresJournal(f"postgresql://robot:{SECRET}@db.example:5432/fleet", clock=ManualClock(),
                        ids=IdGenerator(1))
    assert_no_secret(missing.value)
    assert missing.value.details["url"] == "postgresql://robot:***@db.example:5432/fleet"
    code = "import sys; sys.modules['psycopg'] = None\nimport robot_harness.core.journal_pg\nprint('ok')"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok"), proc.stderr


# ------------------------------------------------------------------ schema


def test_a_database_from_a_newer_harness_is_refused(pg_url):
    journal(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES ('9999_future', 0)")
    j = PostgresJournal(pg_url, clock=ManualClock(), ids=IdGenerator(1))
    with pytest.raises(UsageError) as info:
        j.setup()
    assert info.value.details["unknown"] == ["9999_future"]
    j.close()


def test_harnesses_setting_up_a_fresh_database_at_once_migrate_it_once(pg_url):
    start = threading.Barrier(4)
    errors: list[BaseException] = []
    journals = [PostgresJournal(pg_url, clock=ManualClock(), ids=IdGenerator(n)) for n in range(4)]

    def set_up(j: PostgresJournal) -> None:
        try:
            start.wait(timeout=10)
            j.setup()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=set_up, args=(j,)) for j in journals]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    try:
        assert errors == []
        assert all(j.applied_migrations() == NAMES for j in journals)
        with psycopg.connect(pg_url) as conn:
            assert sorted(r[0] for r in conn.execute("SELECT name FROM migrations")) == NAMES
    finally:
        for j in journals:
            j.close()


def test_the_tables_and_columns_are_sqlites(pg_url, tmp_path: Path):
    assert list(PG_MIGRATIONS) == NAMES
    SqliteJournal(tmp_path / "j.db", clock=ManualClock(), ids=IdGenerator(1)).setup()
    with sqlite3.connect(tmp_path / "j.db") as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                             " AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        want = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    journal(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns"
                            " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position").fetchall()
    got: dict[str, list[str]] = {}
    for table, column in rows:
        got.setdefault(table, []).append(column)
    assert got == want


def test_payloads_are_stored_as_the_exact_text_appended(pg_url):
    j = journal(pg_url)
    (ev,) = j.append([draft(payload={"z": 1, "a": "é ☃ \u0000", "f": 0.1, "big": 2**62, "n": None})])
    with psycopg.connect(pg_url) as conn:
        text, stamp = conn.execute("SELECT payload, stamp FROM events").fetchone()
    assert text == '{"z":1,"a":"é ☃ \\u0000","f":0.1,"big":4611686018427387904,"n":null}'
    assert stamp == ev.stamp and j.events() == [ev]
    j.close()


def test_open_journal_gives_a_postgres_journal_for_a_url(pg_url):
    j = open_journal(pg_url, clock=ManualClock(), ids=IdGenerator(1), busy_timeout_ms=300, max_pages=5,
                     robot_id="/robot1/")
    assert isinstance(j, PostgresJournal) and j.robot_id == "robot1"
    assert j.applied_migrations() == NAMES and j.settings()["lock_timeout"] == "300ms"
    j.close()
    j.close()
    with pytest.raises(UsageError, match="journal is closed"):
        j.last_seq()
