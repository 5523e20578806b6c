"""The live mission dashboard: the real graph seen and driven through a browser, and its API's refusals.

The end-to-end test runs the in-process graph (simulated robot, scripted
planner, verifier) with ``navigate_to`` needing the owner's approval, serves
the dashboard with the ROS operator port, and drives headless Chromium: the
mission is sent from the page, its pending approval appears, Approve is
clicked, and the page shows the mission SUCCEEDED with its obligation
satisfied and committed. The other tests need no ROS: a journal written here
and a recording fake operator port.

Screenshots go to each test's tmp dir; with ``RH_DASHBOARD_SCREENSHOTS=1`` the
browser tests also write ``docs/dashboard.png``,
``docs/dashboard-approval.png`` and ``docs/dashboard-operator.png``.
"""
from __future__ import annotations

import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.errors import BackendUnavailable, UsageError
from robot_harness.core.interactions import (
    CommandConflict,
    InteractionNotFound,
    NotAuthorized,
    TokenHasher,
    load_token_key,
    token_key_path,
    token_sha256,
)
from robot_harness.core.journal import SqliteJournal
from robot_harness.core.records import EventDraft, EventType

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS_TO_DOCS = os.environ.get("RH_DASHBOARD_SCREENSHOTS") == "1"
PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 1.5, "y": 0.5, "yaw": 0.0}}
TURNS = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]}, {"done": "at the spot"}]
APPROVAL = {"skill_tags": {"navigate_to": ["requires_approval"]}, "timeout_s": 60.0}
TOKEN = "owner-s3cret"


# ----------------------------------------------------------------------------- helpers


@pytest.fixture
def browser():
    """Headless system Chromium through playwright (never a downloaded browser)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -r requirements/test.txt); the dashboard's browser "
                    "tests need it")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium); the dashboard's browser tests "
                    "need it")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield b
        finally:
            b.close()


def _page(browser: Any) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    return page, errors


def _shot(page: Any, tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    page.screenshot(path=str(out), full_page=True)
    if SCREENSHOTS_TO_DOCS:
        shutil.copyfile(out, REPO / "docs" / name)


def _journal_types(path: Path) -> list[tuple[str, dict]]:
    import sqlite3

    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [(t, json.loads(p)) for t, p in db.execute("select type, payload from events order by seq")]
    finally:
        db.close()


def _request(url: str, *, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    hdrs = {"Content-Type": "application/json"} if data is not None else {}
    hdrs.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


class RecordingPort:
    """An OperatorPort that records every call and answers as scripted."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.raise_on: dict[str, Exception] = {}

    def _record(self, name: str, kw: dict[str, Any]) -> None:
        self.calls.append((name, kw))
        if name in self.raise_on:
            raise self.raise_on[name]

    def send_mission(self, **kw: Any) -> dict[str, Any]:
        self._record("send_mission", kw)
        return {"mission_id": kw["mission_id"], "accepted": True}

    def resolve_interaction(self, **kw: Any) -> dict[str, Any]:
        self._record("resolve_interaction", kw)
        return {"recorded": True, "interaction": {"interaction_id": kw["interaction_id"],
                                                  "resolution": {"resolution": kw["resolution"]}}}

    def stop(self, **kw: Any) -> dict[str, Any]:
        self._record("stop", kw)
        return {"ok": True, "detail": "stop sent"}


def _waiting_journal(path: Path) -> SqliteJournal:
    """A running mission that waits on an approval and a question, with a stale pose in its last snapshot."""
    clock = ManualClock(start=time.time())
    j = SqliteJournal(path, clock=clock, ids=IdGenerator(seed=11))
    j.setup()
    now = clock.now()
    snap = {"snapshot_id": "snap-1", "mission_id": "m-wait", "reason": "before_model_turn", "captured_at": now,
            "pose": {"x": 1.0, "y": 0.5, "yaw": 0.0},
            "pose_meta": {"availability": "STALE", "source_stamp": now - 3.0, "age_s": 3.0, "max_age_s": 0.5,
                          "source": "/amcl_pose"},
            "battery": 0.7, "battery_meta": {"availability": "AVAILABLE", "source_stamp": now - 0.2, "age_s": 0.2,
                                             "max_age_s": 3600.0, "source": "/battery_state"}}
    owner = token_sha256(TOKEN)
    j.append([
        EventDraft(type=EventType.MISSION_STARTED, mission_id="m-wait", payload={
            "goal": "Go to the spot and ask which door.", "owner": "alice", "owner_sha256": owner,
            "config": {"places": PLACES}}),
        EventDraft(type=EventType.WORLD_SNAPSHOT_CAPTURED, mission_id="m-wait", snapshot_id="snap-1",
                   payload={"reason": "before_model_turn", "snapshot": snap}),
        EventDraft(type=EventType.INTERACTION_REQUESTED, mission_id="m-wait", tool_call_id="c1", payload={
            "interaction_id": "ask-nav", "kind": "approval", "prompt": "approve navigate_to spot?",
            "call": {"tool_call_id": "c1", "name": "navigate_to", "arguments": {"place": "spot"},
                     "arguments_sha256": "ab" * 32},
            "owner": "alice", "owner_sha256": owner, "requested_at": now, "expires_at": now + 600}),
        EventDraft(type=EventType.INTERACTION_REQUESTED, mission_id="m-wait", tool_call_id="c2", payload={
            "interaction_id": "ask-door", "kind": "question", "prompt": "Which door?", "call": None, "choices": [],
            "owner": "alice", "owner_sha256": owner, "requested_at": now, "expires_at": now + 600}),
    ])
    return j


# ----------------------------------------------------------------------------- end to end


def test_an_approval_clicked_on_the_page_lets_the_mission_succeed(tmp_path, browser):
    from rclpy.node import Node

    from robot_harness.bringup import BringUp
    from robot_harness.operator.dashboard import RosOperatorPort, serve

    journal = tmp_path / "journal.sqlite3"
    overrides = {
        "sim_robot": {"speed": 3.0},
        "planner": {"turns_json": json.dumps(TURNS)},
        "supervisor": {"journal_path": str(journal), "harness_config_json": json.dumps({
            "places": PLACES, "interactions": APPROVAL})},
    }
    with BringUp(overrides=overrides) as g:
        node = Node("dashboard_operator", context=g.context)
        port = RosOperatorPort(node, journal_path=journal)
        g.add_node(node, lambda: (port.destroy(), node.destroy_node()))
        with serve(journal_path=journal, operator=port, token=TOKEN) as dash:
            page, errors = _page(browser)
            page.goto(dash.url)
            page.get_by_test_id("token-input").fill(TOKEN)
            page.get_by_test_id("operator-input").fill("alice")
            page.get_by_test_id("goal-input").fill("Go to the spot.")
            page.get_by_test_id("owner-input").fill("alice")
            page.get_by_test_id("send-button").click()
            page.get_by_test_id("notice").filter(has_text="accepted").wait_for(timeout=30_000)

            approve = page.locator("[data-testid^='approve-ask-']")
            approve.wait_for(state="visible", timeout=30_000)
            card = page.locator("[data-testid^='interaction-ask-'][data-state='pending']")
            assert "navigate_to" in card.inner_text() and '"spot"' in card.inner_text()
            assert page.get_by_test_id("mission-status").inner_text() == "WAITING_USER"
            assert page.get_by_test_id("mission-activity").inner_text().startswith("waiting for the operator")
            assert g.sim.goal_log == [], "nothing moves before the approval"
            _shot(page, tmp_path, "dashboard-approval.png")

            approve.click()
            page.locator("[data-testid='mission-status'][data-state='SUCCEEDED']").wait_for(timeout=45_000)
            obligations = page.locator("[data-testid^='obligation-']")
            assert obligations.count() >= 1
            for i in range(obligations.count()):
                row = obligations.nth(i)
                assert row.get_attribute("data-state") == "satisfied", row.inner_text()
                assert row.get_attribute("data-committed") == "true" and "COMMITTED" in row.inner_text()
            assert page.locator("[data-testid^='action-act-'][data-state='SUCCEEDED']").count() == 1
            assert page.locator("[data-testid^='interaction-ask-'][data-state='approve']").count() == 1
            assert "by alice" in page.get_by_test_id("panel-interactions").inner_text()
            assert page.locator("[data-testid^='commit-']").count() == 1
            assert page.locator("#snapshot tr[data-field]").count() == 4
            assert page.get_by_test_id("robot").count() == 1 and page.get_by_test_id("place-spot").count() == 1
            page.wait_for_timeout(300)  # the last feed update settles before the picture
            _shot(page, tmp_path, "dashboard.png")
            assert errors == []
            page.close()
        assert {e.goal_index for e in g.sim.goal_log} == {1}, "one goal reached the robot"
    events = _journal_types(journal)
    (resolved,) = [p for t, p in events if t == "INTERACTION_RESOLVED"]
    assert resolved["resolution"] == "approve" and resolved["operator"] == "alice"
    (finished,) = [p for t, p in events if t == "MISSION_FINISHED"]
    assert finished["status"] == "SUCCEEDED"
    (started,) = [p for t, p in events if t == "MISSION_STARTED"]
    assert started["owner"] == "alice" and "owner_sha256" not in started, "no unkeyed digest"
    key = TokenHasher(load_token_key(token_key_path(journal), create=False))
    assert started["owner_hmac"] == key.digest(TOKEN) == started["sender_hmac"]
    (asked,) = [p for t, p in events if t == "INTERACTION_REQUESTED"]
    assert asked["policy"] == "owner" and resolved["answered_as"] == "owner"


# ----------------------------------------------------------------------------- the page's other controls


def test_deny_answer_and_stop_on_the_page_reach_the_operator_port(tmp_path, browser):
    from robot_harness.operator.dashboard import serve

    path = tmp_path / "journal.sqlite3"
    j = _waiting_journal(path)
    port = RecordingPort()
    with serve(journal_path=path, operator=port) as dash:
        page, errors = _page(browser)
        page.goto(dash.url + "#mission=m-wait")
        page.get_by_test_id("token-input").fill(TOKEN)
        page.get_by_test_id("operator-input").fill("bob")
        page.get_by_test_id("deny-ask-nav").wait_for()
        # the stale pose is marked with a text label, not only a colour; the fresh battery is not
        pose = page.get_by_test_id("field-pose")
        assert pose.get_attribute("class") == "stale" and "STALE" in pose.inner_text()
        assert page.get_by_test_id("stale-pose").inner_text() == "STALE"
        assert page.get_by_test_id("stale-battery").count() == 0
        assert page.get_by_test_id("stale-velocity").inner_text() == "MISSING"

        # an answer being typed survives a live update of the mission
        page.get_by_test_id("answer-input-ask-door").fill("the north door")
        j.append([EventDraft(type=EventType.STOP_REQUESTED, mission_id="m-wait",
                             payload={"reason": "drill", "source": "test"})])
        page.locator("[data-testid^='stop-event-']").wait_for()
        assert "drill" in page.get_by_test_id("panel-leases").inner_text()
        assert page.get_by_test_id("answer-input-ask-door").input_value() == "the north door"
        _shot(page, tmp_path, "dashboard-operator.png")

        # one click at a time: each POST runs on its own server thread, so the port sees them in click order
        # only if each is answered (its own notice shown) before the next is made
        page.get_by_test_id("deny-ask-nav").click()
        page.get_by_test_id("notice").filter(has_text="recorded: ask-nav deny").wait_for()
        page.get_by_test_id("answer-ask-door").click()
        page.get_by_test_id("notice").filter(has_text="recorded: ask-door answer").wait_for()
        port.raise_on["stop"] = BackendUnavailable("no supervisor answers /supervisor/stop")
        page.get_by_test_id("stop-button").click()
        page.get_by_test_id("notice").filter(has_text="STOP failed").wait_for()
        assert "503" in page.get_by_test_id("notice").inner_text()
        assert errors == [] or all("503" in e for e in errors), errors
        page.close()
    j.close()
    names = [(n, kw.get("resolution")) for n, kw in port.calls]
    assert names == [("resolve_interaction", "deny"), ("resolve_interaction", "answer"), ("stop", None)]
    deny, answer, stop = (kw for _, kw in port.calls)
    assert deny == {"interaction_id": "ask-nav", "resolution": "deny", "token": TOKEN, "answer": "", "choice": "",
                    "operator": "bob"}
    assert answer["interaction_id"] == "ask-door" and answer["answer"] == "the north door"
    assert stop["mission_id"] == "" and "bob" in stop["reason"], "Stop stops whatever runs, never refused by a view"


# ----------------------------------------------------------------------------- the API


def test_bad_input_gets_a_clear_4xx_and_reaches_nothing(tmp_path):
    from robot_harness.operator.dashboard import serve

    path = tmp_path / "journal.sqlite3"
    j = _waiting_journal(path)
    port = RecordingPort()
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with serve(journal_path=path, operator=port, token=TOKEN) as dash:
        api = dash.url + "api/"
        status, body = _request(api + "missions/m-nobody")
        assert (status, body["error"]) == (404, "not_found") and "m-nobody" in body["message"]
        assert _request(api + "no-such-route")[0] == 404
        assert _request(api + "missions/m-wait")[1]["mission"]["goal"].startswith("Go to the spot")

        refusals = [
            (_request(api + "missions", method="POST", raw=b"{not json", headers=bearer), 400, "invalid_json"),
            (_request(api + "missions", method="POST", body=[1, 2], headers=bearer), 400, "invalid_body"),
            (_request(api + "missions", method="POST", body={}, headers=bearer), 400, "invalid_request"),
            (_request(api + "missions", method="POST", body={"goal": "x", "speed": 9}, headers=bearer), 400,
             "invalid_request"),
            (_request(api + "missions", method="POST", body={"goal": "x", "mission_id": "../etc"}, headers=bearer),
             400, "invalid_request"),
            (_request(api + "interactions/ask-nav", method="POST", body={"resolution": "maybe"}, headers=bearer), 400,
             "invalid_request"),
            (_request(api + "missions", method="POST", body={"goal": "x"}), 401, "unauthenticated"),
            (_request(api + "missions", method="POST", body={"goal": "x"}, headers={"Authorization": "Bearer guess"}),
             401, "unauthenticated"),
            (_request(api + "missions", method="POST", raw=b'{"goal": "' + b"x" * 70_000 + b'"}', headers=bearer),
             413, "too_large"),
            (_request(api + "missions", method="POST", raw=b"goal=x",
                      headers={**bearer, "Content-Type": "application/x-www-form-urlencoded"}), 415,
             "unsupported_media_type"),
            (_request(api + "stop", method="POST", body={}, headers={**bearer, "Origin": "http://evil.example"}), 403,
             "cross_origin"),
            (_request(api + "missions", headers={"Host": "evil.example"}), 403, "forbidden_host"),
        ]
        for (status, body), want_status, want_code in refusals:
            assert (status, body["error"]) == (want_status, want_code), body
            assert body["message"]
        missing_goal = refusals[2][0][1]
        assert "goal" in missing_goal["message"] and missing_goal["problems"][0]["field"] == "goal"
        assert port.calls == [], "a refused request reaches nothing"

        # the port's refusals keep their meaning
        for exc, want in [(InteractionNotFound("no interaction ask-x"), 404), (NotAuthorized("wrong token"), 403),
                          (CommandConflict("already resolved: approve"), 409)]:
            port.raise_on["resolve_interaction"] = exc
            status, body = _request(api + "interactions/ask-x", method="POST", body={"resolution": "deny"},
                                    headers=bearer)
            assert (status, body["error"], body["message"]) == (want, exc.code, exc.message)
        # a valid request after all that is served, with the bearer as the owner token
        status, body = _request(api + "missions", method="POST", body={"goal": "Go to the spot.", "owner": "alice",
                                                                       "overrides": {"limits.max_turns": 5}},
                                headers=bearer)
        assert status == 202 and body["accepted"] and body["mission_id"].startswith("mission-")
        sent = port.calls[-1][1]
        assert sent["owner_token"] == TOKEN and sent["overrides"] == {"limits.max_turns": "5"}
    j.close()


def test_the_live_feed_reports_new_journal_events_as_they_commit(tmp_path):
    from robot_harness.operator.dashboard import serve

    path = tmp_path / "journal.sqlite3"
    with serve(journal_path=path, poll_interval_s=0.05) as dash:
        assert _request(dash.url + "api/missions")[1]["missions"] == [], "no journal yet reads as empty"
        lines: list[str] = []
        got = threading.Event()

        def listen() -> None:
            with urllib.request.urlopen(dash.url + "api/feed?after_seq=0", timeout=10) as resp:
                assert resp.headers["Content-Type"].startswith("text/event-stream")
                for raw in resp:
                    lines.append(raw.decode().rstrip("\n"))
                    if lines[-1].startswith("data:") and "m-wait" in lines[-1]:
                        got.set()
                        return

        t = threading.Thread(target=listen, daemon=True)
        t.start()
        time.sleep(0.3)
        j = _waiting_journal(path)  # the supervisor's journal appears, and its events commit
        assert got.wait(10), lines
        data = json.loads(lines[-1][len("data:"):])
        assert data == {"last_seq": j.last_seq(), "missions": ["m-wait"]}
        assert any(line.startswith(f"id: {j.last_seq()}") for line in lines), "the seq is the event id (resumable)"
        (row,) = _request(dash.url + "api/missions")[1]["missions"]
        assert (row["mission_id"], row["status"], row["pending_interactions"]) == ("m-wait", "WAITING_USER", 2)
        j.close()
    t.join(5)
    assert not t.is_alive(), "stopping the dashboard ends its live feeds"


def test_a_non_loopback_host_is_refused_without_a_token(tmp_path):
    from robot_harness.operator.dashboard import main, serve

    with pytest.raises(UsageError, match="needs an operator token"):
        serve(journal_path=tmp_path / "j.sqlite3", host="0.0.0.0")
    env = "RH_TEST_NO_SUCH_TOKEN"
    os.environ.pop(env, None)
    assert main(["--read-only", "--host", "0.0.0.0", "--port", "0", "--token-env", env,
                 "--journal", str(tmp_path / "j.sqlite3")]) == 2
    # with a token it serves on every interface, and a write without it is refused
    with serve(journal_path=tmp_path / "j.sqlite3", host="0.0.0.0", token=TOKEN) as dash:
        port = dash.url.rsplit(":", 1)[1].strip("/")
        status, body = _request(f"http://127.0.0.1:{port}/api/stop", method="POST", body={})
        assert (status, body["error"]) == (401, "unauthenticated")
        status, body = _request(f"http://127.0.0.1:{port}/api/stop", method="POST", body={},
                                headers={"Authorization": f"Bearer {TOKEN}"})
        assert (status, body["error"]) == (503, "read_only")


def test_the_page_is_one_self_contained_file_under_a_strict_policy(tmp_path):
    import re

    from robot_harness.core.mission_view import VIEW_FORMAT_VERSION
    from robot_harness.operator.dashboard import PAGE, serve

    page = PAGE.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "no resource from elsewhere (offline robots)"
    assert "@import" not in page and "url(" not in page
    assert f"const VIEW_FORMAT = {VIEW_FORMAT_VERSION};" in page, "the page reads the view format the core writes"
    with serve(journal_path=tmp_path / "j.sqlite3") as dash:
        with urllib.request.urlopen(dash.url, timeout=10) as resp:
            csp = resp.headers["Content-Security-Policy"]
            assert resp.read().decode() == page
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert csp.count("'sha256-") == 2, "exactly the page's own script and style may run"


def test_a_lost_acceptance_is_sent_again_and_a_late_one_still_counts():
    """The ROS port's send loop, on scripted futures: what the supervisor's answers mean."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from robot_harness.core.errors import HarnessTimeout, RefusalError
    from robot_harness.operator.dashboard import _send_until_answered

    def script(*answers):
        """Each send answers (accepted?, after s), or never (None); sends past the script are refused at once."""
        sends = []

        def send():
            fut = Future()
            answer = answers[len(sends)] if len(sends) < len(answers) else (False, 0.0)
            sends.append(fut)
            if answer is not None:
                accepted, after = answer
                threading.Timer(after, fut.set_result, [SimpleNamespace(accepted=accepted, n=len(sends))]).start()
            return fut
        return send, sends

    # the first acceptance comes late; the repeat meanwhile is refused (the first is running): accepted
    send, sends = script((True, 1.0))
    handle = _send_until_answered(send, mission_id="m-1", answer_timeout_s=0.2, max_sends=50)
    assert handle.accepted and handle.n == 1 and len(sends) >= 2
    # every send answered, none accepted: refused at once, with the mission id to send again
    send, sends = script((False, 0.0))
    with pytest.raises(RefusalError, match="refused the mission") as refused:
        _send_until_answered(send, mission_id="m-2", answer_timeout_s=5.0, max_sends=3)
    assert refused.value.details["mission_id"] == "m-2" and len(sends) == 1
    # nobody answers: bounded, and the caller learns the id to retry with
    send, sends = script(None, None)
    t = time.monotonic()
    with pytest.raises(HarnessTimeout, match="never answered 2 sends of mission m-3"):
        _send_until_answered(send, mission_id="m-3", answer_timeout_s=0.1, max_sends=2)
    assert len(sends) == 2 and time.monotonic() - t < 2.0


def test_a_mission_the_supervisor_refuses_is_answered_409_with_its_reason(tmp_path):
    """Issue 13: a refusal is the goal's result (no feedback before it); the dashboard waits for the
    first of the two and tells the operator why, not "accepted". A mission it admits is still 202."""
    from rclpy.node import Node

    from robot_harness.bringup import BringUp
    from robot_harness.operator.dashboard import RosOperatorPort, serve

    journal = tmp_path / "journal.sqlite3"
    overrides = {
        "sim_robot": {"speed": 3.0},
        "planner": {"turns_json": json.dumps([{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]},
                                              {"done": "At the spot."}])},
        "supervisor": {"journal_path": str(journal), "harness_config_json": json.dumps({"places": PLACES})},
    }
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with BringUp(overrides=overrides) as g:
        node = Node("dashboard_operator", context=g.context)
        port = RosOperatorPort(node, journal_path=journal)
        g.add_node(node, lambda: (port.destroy(), node.destroy_node()))
        with serve(journal_path=journal, operator=port, token=TOKEN) as dash:
            api = dash.url + "api/"
            status, body = _request(api + "missions", method="POST", headers=bearer, body={
                "goal": "Go to the spot.", "overrides": {"limits.no_such_limit": 3}})
            assert status == 409 and body["error"] == "mission_refused", body
            assert "invalid_goal" in body["message"] and "no_such_limit" in body["message"], body
            status, body = _request(api + "missions", method="POST", headers=bearer, body={"goal": "Go to the spot."})
            assert status == 202 and body["accepted"], body
    kinds = [e.type.value for e in SqliteJournal(journal, clock=ManualClock(0.0), ids=IdGenerator(1)).events()
             if e.type.value in ("MISSION_REFUSED", "MISSION_STARTED")]
    assert kinds == ["MISSION_REFUSED", "MISSION_STARTED"], kinds
