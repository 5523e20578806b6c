"""The dashboard over a fleet's journal: every robot's missions (each with its robot), a robot filter, the
robots it knows and the fleet's leases with holder and fencing token, from a SQLite file or a PostgreSQL
database (whose password no answer ever shows); a robot's dashboard acts for that robot only: Stop, Send and
answers for another robot's missions are refused, and its page disables them and says why. No ROS: a
recording operator port (the page's end-to-end browser tests are test_dashboard.py's).
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

from .test_dashboard import browser  # noqa: F401 - the headless Chromium fixture

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


# ----------------------------------------------------------------------------- writes: one robot's only


def _post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _ask(journal: Any, mission_id: str, interaction_id: str) -> None:
    journal.append([EventDraft(type=E.INTERACTION_REQUESTED, mission_id=mission_id, payload={
        "interaction_id": interaction_id, "kind": "question", "prompt": "Which door?", "choices": []})])


def _check_writes_reach_one_robot(api: str, port: Any) -> None:
    """robot1's dashboard (``operator_robot="robot1"``) over the fleet of ``_write_fleet`` plus a question each."""
    status, body = _get(api + "missions")
    assert status == 200 and body["controls"] == "robot1"
    assert body["robot"] == "robot1" and [m["mission_id"] for m in body["missions"]] == ["m-r1"], \
        "with several robots in the journal, the view defaults to the dashboard's own"
    assert _get(api + "health")[1]["controls"] == "robot1"
    assert len(_get(api + "missions?robot=*")[1]["missions"]) == 2

    # robot2's mission on screen: Stop, an answer and a send are refused, saying whose it is; nothing reaches robot1
    status, body = _post(api + "stop", {"mission_id": "m-r2", "reason": "operator stop (dashboard)"})
    assert (status, body["error"]) == (409, "other_robot"), body
    assert "m-r2 belongs to robot robot2" in body["message"] and "robot robot1 only" in body["message"], body
    assert (body["mission_id"], body["robot_id"], body["controls"]) == ("m-r2", "robot2", "robot1")
    status, body = _post(api + "interactions/ask-r2", {"resolution": "answer", "answer": "north"})
    assert (status, body["error"]) == (409, "other_robot") and "m-r2" in body["message"], body
    status, body = _post(api + "interactions/ask-r2", {"resolution": "answer", "answer": "north", "mission_id": "m-r1"})
    assert status == 409, "the interaction's own mission decides, not the one the request names"
    status, body = _post(api + "missions", {"goal": "Go.", "robot": "robot2"})
    assert (status, body["error"]) == (409, "other_robot") and "it is for robot robot2" in body["message"], body
    status, body = _post(api + "missions", {"goal": "Go.", "mission_id": "m-r2"})
    assert (status, body["error"]) == (409, "other_robot"), "a mission id of another robot's is never reused"
    assert port.calls == []

    # robot1's own: Stop reaches its supervisor (which stops whatever robot1 runs), answers and sends too
    status, body = _post(api + "stop", {"mission_id": "m-r1", "reason": "operator stop (dashboard, ana)"})
    assert status == 200 and body["ok"], body
    assert _post(api + "stop", {})[0] == 200, "Stop naming no mission is the dashboard's own robot's"
    assert _post(api + "interactions/ask-r1", {"resolution": "answer", "answer": "north", "mission_id": "m-r1"})[0] \
        == 200
    assert _post(api + "missions", {"goal": "Go.", "robot": "/robot1", "mission_id": "m-r1b"})[0] == 202
    assert _post(api + "stop", {"mission_id": "m-not-journaled-yet"})[0] == 200, "a mission just sent is not refused"
    assert [(name, kw.get("mission_id"), kw.get("interaction_id")) for name, kw in port.calls] == [
        ("stop", "", None), ("stop", "", None), ("resolve_interaction", None, "ask-r1"), ("send_mission", "m-r1b", None),
        ("stop", "", None)]


def test_a_robots_dashboard_refuses_writes_for_another_robots_missions(tmp_path):
    from robot_harness.operator.dashboard import serve

    from .test_dashboard import RecordingPort

    path = tmp_path / "journal.sqlite3"
    _sqlite_fleet(path)
    for robot, mission in (("robot1", "m-r1"), ("robot2", "m-r2")):
        j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot)
        _ask(j, mission, f"ask-{mission[2:]}")
        j.close()
    port = RecordingPort()
    with serve(journal_path=path, operator=port, operator_robot="/robot1") as dash:
        _check_writes_reach_one_robot(dash.url + "api/", port)
    # a robot the journal does not hold yet: every robot's missions are listed, and still only its own are stopped
    with serve(journal_path=path, operator=RecordingPort(), operator_robot="robot3") as dash:
        status, body = _get(dash.url + "api/missions")
        assert status == 200 and body["robot"] is None and body["controls"] == "robot3" and len(body["missions"]) == 2
        assert _post(dash.url + "api/stop", {"mission_id": "m-r1"})[0] == 409
    # read-only (no operator port): as ever, nothing is tied to a robot and writes answer 503
    with serve(journal_path=path, operator_robot="robot1") as dash:
        status, body = _get(dash.url + "api/missions")
        assert body["controls"] is None and body["robot"] is None and len(body["missions"]) == 2
        assert _post(dash.url + "api/stop", {"mission_id": "m-r2"})[1]["error"] == "read_only"


def test_a_robots_dashboard_over_a_database_stops_only_its_own_robot(pg_url):
    """The review's case: `up --namespace robot1 --dashboard --journal postgresql://...` with robot2's mission
    on screen; robot1's supervisor is idle and would answer ok "no mission running" while robot2 drives on."""
    pytest.importorskip("psycopg")
    from robot_harness.operator.dashboard import serve

    from .test_dashboard import RecordingPort

    _write_fleet(lambda robot: open_journal(pg_url, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot))
    for robot, mission in (("robot1", "m-r1"), ("robot2", "m-r2")):
        j = open_journal(pg_url, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot)
        try:
            _ask(j, mission, f"ask-{mission[2:]}")
        finally:
            j.close()
    port = RecordingPort()
    with serve(journal_path=pg_url, operator=port, operator_robot="robot1", poll_interval_s=0.05) as dash:
        _check_writes_reach_one_robot(dash.url + "api/", port)


def test_the_robot_of_a_stop_service_ties_the_dashboard_command_to_it():
    from robot_harness.operator.dashboard import robot_of_stop_service

    assert robot_of_stop_service("/robot1/supervisor/stop") == "robot1"
    assert robot_of_stop_service("/site/robot2/supervisor/stop") == "site/robot2"
    assert robot_of_stop_service("/supervisor/stop") == ""
    assert robot_of_stop_service("/my_stop") is None and robot_of_stop_service("/9x/supervisor/stop") is None


def test_the_page_disables_stop_and_send_for_another_robots_mission_and_says_why(tmp_path, browser):
    from robot_harness.operator.dashboard import serve

    from .test_dashboard import RecordingPort, _page

    path = tmp_path / "journal.sqlite3"
    _sqlite_fleet(path)
    for robot, mission in (("robot1", "m-r1"), ("robot2", "m-r2")):
        j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot)
        _ask(j, mission, f"ask-{mission[2:]}")
        j.close()
    port = RecordingPort()
    with serve(journal_path=path, operator=port, operator_robot="robot1") as dash:
        page, errors = _page(browser)
        page.goto(dash.url)
        page.locator("[data-testid='mission-status']").wait_for()
        assert page.get_by_test_id("robot-picker").input_value() == "robot1", "the view starts at its own robot"
        assert page.get_by_test_id("mission-picker").input_value() == "m-r1"
        assert page.get_by_test_id("stop-button").is_enabled() and page.get_by_test_id("send-button").is_enabled()
        assert page.get_by_test_id("answer-ask-r1").is_visible()

        page.get_by_test_id("robot-picker").select_option("*")
        page.locator("#mission-picker option[value='m-r2']").wait_for(state="attached")
        page.get_by_test_id("mission-picker").select_option("m-r2")
        page.get_by_test_id("answer-why-ask-r2").wait_for()
        assert page.get_by_test_id("stop-button").is_disabled() and page.get_by_test_id("send-button").is_disabled()
        why = page.get_by_test_id("stop-why").inner_text()
        assert "m-r2 is robot robot2's mission" in why and "robot robot1 only" in why, why
        assert "robot robot2" in page.get_by_test_id("send-why").inner_text()
        assert page.get_by_test_id("answer-ask-r2").count() == 0

        page.get_by_test_id("mission-picker").select_option("m-r1")
        page.get_by_test_id("answer-ask-r1").wait_for()
        assert page.get_by_test_id("stop-button").is_enabled() and not page.get_by_test_id("stop-why").is_visible()
        assert not page.get_by_test_id("send-why").is_visible()
        with page.expect_request(lambda r: r.url.endswith("/api/stop")) as sent:
            page.get_by_test_id("stop-button").click()
        assert sent.value.post_data_json["mission_id"] == "m-r1", "STOP names the mission on screen"
        page.get_by_test_id("notice").filter(has_text="STOP: stop sent").wait_for()
        assert errors == [], errors
        page.close()
    assert [name for name, _ in port.calls] == ["stop"]
