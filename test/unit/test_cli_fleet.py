"""The command line over a fleet's journal: two robots in one SQLite file, or in one PostgreSQL database.

Every command that reads or writes a journal takes ``--journal FILE|URL`` (default
``$ROBOT_HARNESS_JOURNAL``); ``--robot NAME`` narrows ``journal show|export|verify``, ``report`` and
``replay`` to one robot's missions; ``resources`` lists every robot's leases and clears one in its robot's
name. Commands run for real (``cli.main`` in this process) against journals written with the core; the
PostgreSQL half uses the session's throw-away server (``test/pg.py``) and skips without PostgreSQL.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from robot_harness.cli import ExitCode, main
from robot_harness.core.clock import IdGenerator, SystemClock
from robot_harness.core.journal import SqliteJournal, open_journal
from robot_harness.core.records import EventDraft, EventType

E = EventType


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse: usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _write_fleet(open_as: Any) -> None:
    """robot1 runs m-r1 (its base blocked), robot2 runs m-r2 (its base held, the site's elevator held);
    ``open_as(robot_id)`` opens the shared journal as that robot's harness."""
    r1, r2 = open_as("robot1"), open_as("robot2")
    try:
        r1.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-r1", payload={"goal": "Inspect the lab."})])
        r2.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-r2", payload={"goal": "Take the elevator."})])
        r1.append([EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-r1", payload={
                       "resource": "base", "owner": "act-1", "expires_at": 1.0}),
                   EventDraft(type=E.LEASE_BLOCKED, mission_id="m-r1", payload={
                       "resource": "base", "owner": "act-1", "reason": "no terminal report"})])
        r2.append([EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-r2", payload={
                       "resource": "base", "owner": "act-2", "expires_at": 9e12}),
                   EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-r2", payload={
                       "resource": "elevator_1", "owner": "act-2", "expires_at": 1.0, "scope": "site"})])
        r1.append([EventDraft(type=E.MISSION_FINISHED, mission_id="m-r1", payload={
                       "status": "UNKNOWN", "summary": "the base never reported"})])
        r2.append([EventDraft(type=E.MISSION_FINISHED, mission_id="m-r2", payload={
                       "status": "SUCCEEDED", "summary": "upstairs"})])
    finally:
        r1.close()
        r2.close()


@pytest.fixture
def fleet(tmp_path: Path) -> str:
    """Two robots' harnesses writing one SQLite file."""
    path = tmp_path / "journal.sqlite3"

    def open_as(robot: str) -> SqliteJournal:
        j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot)
        j.setup()
        return j

    _write_fleet(open_as)
    return str(path)


@pytest.fixture
def fleet_db(pg_url: str) -> str:
    """The same two robots writing one PostgreSQL database."""
    pytest.importorskip("psycopg")
    _write_fleet(lambda robot: open_journal(pg_url, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot))
    return pg_url


# --------------------------------------------------------------------------- the same checks on either backend


def _show_filters_by_robot(capsys: Any, journal: str) -> None:
    code, out, err = run(capsys, "journal", "show", "--journal", journal, "--mission", "list", "--json")
    assert code == 0, err
    assert {(m["mission_id"], m["robot_id"]) for m in json.loads(out)} == {("m-r1", "robot1"), ("m-r2", "robot2")}
    code, out, err = run(capsys, "journal", "show", "--journal", journal, "--mission", "list")
    assert code == 0, err
    assert [line.split()[:3] for line in out.splitlines()] == [["m-r1", "robot1", "UNKNOWN"],
                                                              ["m-r2", "robot2", "SUCCEEDED"]]
    code, out, err = run(capsys, "journal", "show", "--journal", journal, "--robot", "/robot1", "--mission", "list",
                         "--json")
    assert code == 0, err
    assert [(m["mission_id"], m["robot_id"]) for m in json.loads(out)] == [("m-r1", "robot1")]
    # `last` is the robot's last mission; its events are the mission's, each carrying its robot
    code, out, err = run(capsys, "journal", "show", "--journal", journal, "--robot", "robot1", "--json")
    assert code == 0, err
    events = json.loads(out)
    assert {e["mission_id"] for e in events} == {"m-r1"} and {e["robot_id"] for e in events} == {"robot1"}
    assert [e["type"] for e in events] == ["MISSION_STARTED", "LEASE_ACQUIRED", "LEASE_BLOCKED", "MISSION_FINISHED"]
    # another robot's mission is not this robot's
    code, out, err = run(capsys, "journal", "show", "--journal", journal, "--robot", "robot2", "--mission", "m-r1")
    assert code == ExitCode.USAGE and out == ""
    assert "no mission 'm-r1' of robot robot2" in err and "--robot robot2 --mission list" in err


def _export_carries_the_robot(capsys: Any, journal: str) -> None:
    code, out, err = run(capsys, "journal", "export", "--journal", journal, "--robot", "robot2")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["robot_id"] for r in rows} == {"robot2"} and {r["mission_id"] for r in rows} == {"m-r2"}
    code, out, err = run(capsys, "journal", "export", "--journal", journal, "--json")
    assert code == 0, err
    assert {e["robot_id"] for e in json.loads(out)} == {"robot1", "robot2"}
    code, out, err = run(capsys, "journal", "export", "--journal", journal, "--format", "csv")
    assert code == 0, err
    assert out.splitlines()[0].split(",")[-1] == "robot_id"


def test_csv_export_rows_carry_each_events_robot(capsys, fleet):
    code, out, err = run(capsys, "journal", "export", "--journal", fleet, "--format", "csv")
    assert code == 0, err
    table = list(csv.DictReader(io.StringIO(out)))
    assert {(r["mission_id"], r["robot_id"]) for r in table} == {("m-r1", "robot1"), ("m-r2", "robot2")}


def test_journal_show_filters_by_robot(capsys, fleet):
    _show_filters_by_robot(capsys, fleet)


def test_journal_show_filters_by_robot_in_a_database(capsys, fleet_db):
    _show_filters_by_robot(capsys, fleet_db)


def test_export_carries_each_events_robot(capsys, fleet):
    _export_carries_the_robot(capsys, fleet)


def test_export_carries_each_events_robot_from_a_database(capsys, fleet_db):
    _export_carries_the_robot(capsys, fleet_db)


@pytest.mark.parametrize("argv", [
    ["journal", "show"], ["journal", "export"], ["journal", "verify"], ["report"], ["replay"], ["resources"]])
def test_a_robot_name_that_is_not_a_namespace_is_a_usage_error(capsys, fleet, argv):
    code, out, err = run(capsys, *argv, "--journal", fleet, "--robot", "2fast//furious", "--json")
    assert code == ExitCode.USAGE == 2, err
    doc = json.loads(out)
    assert doc["error"] == "usage_error" and "not a ROS namespace" in doc["message"] and "Traceback" not in err


def test_the_journal_comes_from_robot_harness_journal_when_not_given(capsys, fleet, monkeypatch, tmp_path):
    monkeypatch.setenv("ROBOT_HARNESS_JOURNAL", fleet)
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "elsewhere"))  # the default file would be empty
    code, out, err = run(capsys, "journal", "show", "--mission", "list", "--json")
    assert code == 0, err
    assert {m["mission_id"] for m in json.loads(out)} == {"m-r1", "m-r2"}
    code, out, _ = run(capsys, "resources", "--json")
    assert code == 0 and set(json.loads(out)) == {"robot1/base", "robot2/base", "elevator_1"}
    # --journal still wins; a variable naming nothing says where it was looked for
    code, _, err = run(capsys, "journal", "show", "--journal", str(tmp_path / "none.sqlite3"))
    assert code == 2 and f"no journal at {tmp_path / 'none.sqlite3'}" in err
    monkeypatch.setenv("ROBOT_HARNESS_JOURNAL", str(tmp_path / "gone.sqlite3"))
    code, _, err = run(capsys, "journal", "export")
    assert code == 2 and f"no journal at {tmp_path / 'gone.sqlite3'} (from $ROBOT_HARNESS_JOURNAL)" in err


def test_the_database_url_comes_from_robot_harness_journal(capsys, fleet_db, monkeypatch):
    monkeypatch.setenv("ROBOT_HARNESS_JOURNAL", fleet_db)
    code, out, err = run(capsys, "journal", "show", "--robot", "robot2", "--mission", "list", "--json")
    assert code == 0, err
    assert [m["mission_id"] for m in json.loads(out)] == ["m-r2"]


def test_report_verify_and_replay_pick_the_robots_mission(capsys, fleet, tmp_path):
    page = tmp_path / "r2.html"
    code, out, err = run(capsys, "report", "--journal", fleet, "--robot", "robot1", "--out", str(page), "--json")
    assert code == 0, err
    assert json.loads(out)["mission_id"] == "m-r1" and "Inspect the lab." in page.read_text()
    code, out, err = run(capsys, "journal", "verify", "--journal", fleet, "--robot", "robot2", "--json")
    assert code == 0, err
    code, out, err = run(capsys, "replay", "--journal", fleet, "--robot", "robot1", "--mission", "last", "--json")
    assert code == 0, err
    assert json.loads(out)["mission_id"] == "m-r1"
    code, _, err = run(capsys, "replay", "--journal", fleet, "--robot", "robot1", "--mission", "m-r2")
    assert code == 2 and "no mission 'm-r2' of robot robot1" in err


# --------------------------------------------------------------------------- leases of a fleet


def _leases_and_clear(capsys: Any, journal: str) -> None:
    code, out, err = run(capsys, "resources", "--journal", journal, "--json")
    assert code == 0, err
    leases = json.loads(out)
    assert set(leases) == {"robot1/base", "robot2/base", "elevator_1"}
    assert {k: (v["robot_id"], v["state"], v["scope"]) for k, v in leases.items()} == {
        "robot1/base": ("robot1", "blocked", ""), "robot2/base": ("robot2", "held", ""),
        "elevator_1": ("robot2", "held", "site")}
    assert all(v["fence"] > 0 for v in leases.values()), "each lease shows its fencing token"
    assert "--robot robot1" in leases["robot1/base"]["clear_command"]
    code, out, _ = run(capsys, "resources", "--journal", journal)
    assert "robot1/base: blocked by act-1 (robot robot1, mission m-r1, fencing token" in out
    # one robot's view: its own resources and the site's
    code, out, _ = run(capsys, "resources", "--journal", journal, "--robot", "robot1", "--json")
    assert code == 0 and set(json.loads(out)) == {"robot1/base", "elevator_1"}
    # two robots hold a `base`: which one is the operator's to say
    code, _, err = run(capsys, "resources", "--journal", journal, "--clear", "base", "--reason", "checked",
                       "--operator", "alice")
    assert code == 2 and "robot1, robot2" in err and "--robot" in err
    code, out, err = run(capsys, "resources", "--journal", journal, "--clear", "base", "--robot", "robot1",
                         "--reason", "checked: parked", "--operator", "alice", "--json")
    assert code == 0, err
    assert json.loads(out)["robot_id"] == "robot1"
    # a site resource is cleared by its name (the holder's view), with its fencing token presented
    code, out, err = run(capsys, "resources", "--journal", journal, "--clear", "elevator_1", "--reason",
                         "elevator checked empty", "--operator", "bob", "--json")
    assert code == 0, err
    code, out, _ = run(capsys, "resources", "--journal", journal, "--json")
    assert set(json.loads(out)) == {"robot2/base"}
    code, out, _ = run(capsys, "journal", "export", "--journal", journal, "--json")
    released = [e for e in json.loads(out) if e["type"] == "LEASE_RELEASED"]
    assert [(e["robot_id"], e["payload"]["resource"], e["payload"]["operator"], e["payload"]["detail"])
            for e in released] == [("robot1", "base", "alice", "checked: parked"),
                                   ("robot2", "elevator_1", "bob", "elevator checked empty")]
    assert released[1]["payload"]["scope"] == "site" and released[1]["payload"]["fence"] > 0


def test_resources_lists_every_robots_leases_and_clears_one_in_its_robots_name(capsys, fleet):
    _leases_and_clear(capsys, fleet)


def test_resources_over_a_database(capsys, fleet_db):
    _leases_and_clear(capsys, fleet_db)


# --------------------------------------------------------------------------- database URLs: errors and secrets


def test_an_unreachable_database_exits_5_and_never_prints_its_password(capsys):
    pytest.importorskip("psycopg")
    url = "postgresql://harness:s3cret-pw@127.0.0.1:1/fleet?connect_timeout=2"
    for argv in (["journal", "show"], ["resources"], ["memory", "show"], ["config", "history"]):
        code, out, err = run(capsys, *argv, "--journal", url, "--json")
        assert code == ExitCode.EVIDENCE == 5, (argv, err)
        assert "s3cret-pw" not in out + err and "harness:***@127.0.0.1" in err, err
        assert "Traceback" not in err and json.loads(out)["exit_code"] == 5


@pytest.mark.parametrize("url, code", [
    ("postgresql://harness:pw0rd@127.0.0.1:notaport/fleet", ExitCode.EVIDENCE),  # libpq refuses to connect
    ("postgresql://harness:pw0rd@/fleet?sslmode=bogus", ExitCode.EVIDENCE),
    ("postgresql://harness:pw0rd@db/fleet?nosuchoption=1", ExitCode.USAGE),  # not a PostgreSQL URL at all
    ("postgresql:/harness:pw0rd@db/fleet", ExitCode.USAGE),  # a typo: never taken for a file name
])
def test_a_malformed_database_url_is_never_a_crash_nor_shows_its_password(capsys, monkeypatch, url, code):
    pytest.importorskip("psycopg")
    got, out, err = run(capsys, "journal", "show", "--journal", url, "--json")
    assert got == code, err
    assert "pw0rd" not in out + err and "Traceback" not in err
    monkeypatch.setenv("ROBOT_HARNESS_JOURNAL", url)  # the same from the environment, with a JSON error
    got, out, err = run(capsys, "journal", "show", "--json")
    assert got == code and json.loads(out)["exit_code"] == code, err
    assert "pw0rd" not in out + err and "harness:***@" in err


def test_a_journal_url_with_an_unescaped_slash_in_its_password_is_a_usage_error_before_anything_starts():
    """`up`/`run` would split it for the supervisor's parameter (part of the password there): refused at
    the argument, by the journal's one rule, the password never shown."""
    from robot_harness.cli import journal_target
    from robot_harness.core.errors import UsageError

    with pytest.raises(UsageError, match="percent-encode") as err:
        journal_target("postgresql://harness:Zm9v/YmFy@db.example:5432/fleet")
    assert "Zm9v" not in err.value.message and "YmFy" not in err.value.message
