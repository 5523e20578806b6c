"""The dashboard over a fleet's journal: every robot's missions (each with its robot), a robot filter, the
robots it knows and the fleet's leases with holder and fencing token, from a SQLite file or a PostgreSQL
database (whose password no answer ever shows). The HTTP API only, no ROS: the page's own browser tests
are test_dashboard.py's.
"""
from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from robot_harness.core.clock import IdGenerator, SystemClock
from robot_harness.core.journal import SqliteJournal, open_journal
from robot_harness.core.records import EventDraft, EventType

E = EventType
SECRET = "hunter2-secret"


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _write_fleet(open_as: Any) -> None:
    """robot1: m-r1, finished, its base blocked; robot2: m-r2, running, its base and the site's elevator held."""
    r1, r2 = open_as("robot1"), open_as("robot2")
    try:
        r1.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-r1", payload={"goal": "Inspect the lab."})])
        r2.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-r2", payload={"goal": "Take the elevator."})])
        r1.append([EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-r1", payload={
                       "resource": "base", "owner": "act-1", "expires_at": 1.0}),
                   EventDraft(type=E.LEASE_BLOCKED, mission_id="m-r1", payload={
                       "resource": "base", "owner": "act-1", "reason": "no terminal report"}),
                   EventDraft(type=E.MISSION_FINISHED, mission_id="m-r1", payload={
                       "status": "UNKNOWN", "summary": "the base never reported"})])
        r2.append([EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-r2", payload={
                       "resource": "base", "owner": "act-2", "expires_at": 9e12}),
                   EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-r2", payload={
                       "resource": "elevator_1", "owner": "act-2", "expires_at": 9e12, "scope": "site"})])
    finally:
        r1.close()
        r2.close()


def _sqlite_fleet(path: Path) -> None:
    def open_as(robot: str) -> SqliteJournal:
        j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot)
        j.setup()
        return j

    _write_fleet(open_as)


def _check_fleet_api(api: str) -> None:
    status, body = _get(api + "missions")
    assert status == 200, body
    assert body["robot"] is None
    assert [(m["mission_id"], m["robot_id"], m["status"]) for m in body["missions"]] == [
        ("m-r2", "robot2", "RUNNING"), ("m-r1", "robot1", "UNKNOWN")]
    assert body["robots"] == [{"robot_id": "robot1", "missions": 1, "running": 0, "leases": 1},
                              {"robot_id": "robot2", "missions": 1, "running": 1, "leases": 2}]
    status, body = _get(api + "missions?robot=/robot1")
    assert status == 200 and [m["mission_id"] for m in body["missions"]] == ["m-r1"] and body["robot"] == "robot1"
    assert len(body["robots"]) == 2, "the robots are every robot's, whichever is shown"
    status, body = _get(api + "missions?robot=nobody")
    assert status == 200 and body["missions"] == []
    status, body = _get(api + "missions?robot=9%20lives")
    assert status == 400 and body["error"] == "usage_error" and "namespace" in body["message"]
    # the fleet's leases: keyed per robot unless site-wide, each with its holder and fencing token
    status, body = _get(api + "leases")
    assert status == 200
    leases = {lease["key"]: lease for lease in body["leases"]}
    assert {k: (v["robot_id"], v["state"], v["scope"], v["owner"]) for k, v in leases.items()} == {
        "elevator_1": ("robot2", "held", "site", "act-2"), "robot1/base": ("robot1", "blocked", "", "act-1"),
        "robot2/base": ("robot2", "held", "", "act-2")}
    assert all(v["fence"] > 0 for v in leases.values())
    status, body = _get(api + "leases?robot=robot1")  # what robot1 sees: its own and the site's
    assert status == 200 and {lease["key"] for lease in body["leases"]} == {"robot1/base", "elevator_1"}
    status, body = _get(api + "missions/m-r2")
    assert status == 200 and body["mission"]["goal"] == "Take the elevator."


def test_every_robots_missions_and_leases_from_one_file(tmp_path):
    from robot_harness.operator.dashboard import serve

    path = tmp_path / "journal.sqlite3"
    _sqlite_fleet(path)
    with serve(journal_path=path) as dash:
        _check_fleet_api(dash.url + "api/")


def test_a_default_robot_is_listed_until_a_request_names_another(tmp_path):
    from robot_harness.operator.dashboard import serve

    path = tmp_path / "journal.sqlite3"
    _sqlite_fleet(path)
    with serve(journal_path=path, robot="robot2") as dash:
        api = dash.url + "api/"
        status, body = _get(api + "missions")
        assert status == 200 and body["robot"] == "robot2" and [m["mission_id"] for m in body["missions"]] == ["m-r2"]
        status, body = _get(api + "missions?robot=*")
        assert status == 200 and body["robot"] is None and len(body["missions"]) == 2
        assert _get(api + "health")[1]["robot"] == "robot2"


def test_a_file_from_before_robot_ids_reads_as_one_robot(tmp_path):
    """A journal the dashboard has not seen migrated (no robot_id column) still lists its missions."""
    from robot_harness.operator.dashboard import serve

    path = tmp_path / "journal.sqlite3"
    j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(1))
    j.setup()
    j.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-old", payload={"goal": "Old times."}),
              EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-old", payload={
                  "resource": "base", "owner": "act-1", "expires_at": 9e12})])
    j.close()
    db = sqlite3.connect(path)
    db.executescript("DROP INDEX events_robot_id; ALTER TABLE events DROP COLUMN robot_id;")
    db.close()
    with serve(journal_path=path) as dash:
        status, body = _get(dash.url + "api/missions")
        assert status == 200 and [(m["mission_id"], m["robot_id"]) for m in body["missions"]] == [("m-old", "")]
        status, body = _get(dash.url + "api/leases")
        assert status == 200 and [(lease["key"], lease["robot_id"]) for lease in body["leases"]] == [("base", "")]


def test_every_robots_missions_and_leases_from_a_database(pg_url):
    pytest.importorskip("psycopg")
    from robot_harness.operator.dashboard import serve

    _write_fleet(lambda robot: open_journal(pg_url, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot))
    with_password = pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")  # trust: accepted
    assert SECRET in with_password
    with serve(journal_path=with_password, poll_interval_s=0.05) as dash:
        api = dash.url + "api/"
        _check_fleet_api(api)
        status, health = _get(api + "health")
        assert status == 200 and health["journal_exists"] is True
        assert health["journal"].startswith("postgresql://postgres:***@") and SECRET not in json.dumps(health)
        with urllib.request.urlopen(dash.url, timeout=10) as resp:
            assert SECRET not in resp.read().decode()
        # the live feed follows the database as robots write to it
        with urllib.request.urlopen(api + "feed", timeout=10) as feed:
            first = [next(feed).decode() for _ in range(4)]
            assert any(line.startswith("event: journal") for line in first), first
            r1 = open_journal(pg_url, clock=SystemClock(), ids=IdGenerator(None), robot_id="robot1")
            try:
                r1.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-r1b", payload={"goal": "Again."})])
            finally:
                r1.close()
            for raw in feed:
                line = raw.decode()
                if line.startswith("data:") and "m-r1b" in line:
                    break
        status, body = _get(api + "missions?robot=robot1")
        assert [m["mission_id"] for m in body["missions"]] == ["m-r1b", "m-r1"]


def test_an_unreachable_database_is_said_before_serving_without_its_password():
    pytest.importorskip("psycopg")
    from robot_harness.core.journal import JournalReadError
    from robot_harness.operator.dashboard import serve

    with pytest.raises(JournalReadError) as caught:
        serve(journal_path=f"postgresql://harness:{SECRET}@127.0.0.1:1/fleet?connect_timeout=2")
    assert SECRET not in str(caught.value) and SECRET not in json.dumps(caught.value.to_dict())
