"""The /diagnostics checks are pure: levels, messages and values from plain inputs (issue 15)."""
from __future__ import annotations

from robot_harness.nodes.diagnostics import (FieldAge, Level, journal_check, lifecycle_check, mission_check,
                                             navigator_check, planner_check, snapshot_freshness_check)


def test_lifecycle_levels():
    assert lifecycle_check("active").level is Level.OK
    assert lifecycle_check("inactive").level is Level.WARN
    failed = lifecycle_check("unconfigured", "verifier: verification_json: bad")
    assert failed.level is Level.ERROR and "verification_json: bad" in failed.message


def test_journal_check():
    assert journal_check(path="/j", is_open=False).level is Level.ERROR
    assert journal_check(path="/j", is_open=True, corrupt="SQLITE_CORRUPT").level is Level.ERROR
    assert journal_check(path="/j", is_open=True, dir_writable=False).level is Level.ERROR
    assert journal_check(path="/j", is_open=True, reconnect_pending=True).level is Level.WARN
    assert journal_check(path="/j", is_open=True, dir_writable=True, file_writable=True).level is Level.OK


def test_snapshot_freshness_per_field():
    ok = snapshot_freshness_check({"pose": FieldAge(0.1, 0.5), "battery": FieldAge(1.0, 5.0)})
    assert ok.level is Level.OK and ok.values["pose.state"] == "fresh"
    warn = snapshot_freshness_check({"pose": FieldAge(0.1, 0.5), "battery": FieldAge(9.0, 5.0)})
    assert warn.level is Level.WARN and "battery stale" in warn.message
    err = snapshot_freshness_check({"pose": FieldAge(None, 0.5), "battery": FieldAge(1.0, 5.0)})
    assert err.level is Level.ERROR and err.values["pose.state"] == "missing"


def test_navigator_planner_mission():
    assert navigator_check(action="navigate_to_pose", server_available=False).level is Level.ERROR
    assert navigator_check(action="n", server_available=True, backend_node="bt_navigator",
                           backend_state="inactive").level is Level.ERROR
    assert navigator_check(action="n", server_available=True, backend_node="bt_navigator",
                           backend_state="active").level is Level.OK
    llm = planner_check(backend="llm", configured=True, base_url="http://127.0.0.1:9/v1?key=s")
    assert llm.level is Level.OK and llm.values["base_url"] == "http://127.0.0.1:9/v1"
    assert planner_check(backend="llm", configured=True, last_error="timeout").level is Level.WARN
    assert planner_check(backend="scripted", configured=False).level is Level.ERROR
    assert mission_check(last_id="m1", last_status="UNKNOWN").level is Level.ERROR
    assert mission_check(last_id="m1", last_status="FAILED").level is Level.WARN
    assert mission_check(last_id="m1", last_status="SUCCEEDED").level is Level.OK


def test_journal_facts_of_a_real_journal(tmp_path):
    """A real SqliteJournal through its public health(): open and writable is OK; closed is not."""
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.nodes.diagnostics import journal_facts

    journal = SqliteJournal(tmp_path / "j.sqlite3", clock=SystemClock(), ids=IdGenerator(None))
    facts = journal_facts(journal)
    assert facts["path"] == str(tmp_path / "j.sqlite3") and facts["corrupt"] is None and not facts["closed"]
    assert journal_check(**facts).level is Level.OK
    journal.close()
    closed = journal_facts(journal)
    assert closed["closed"] and journal_check(**closed).level is not Level.OK
