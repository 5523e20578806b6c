"""Approval policies on every surface: under ``operator`` the mission's sender cannot approve its own
calls (over ROS through ``~/resolve_interaction``, through ``robot-harness answer``, for an MCP
session, and through the dashboard), the operator token or an approver can, and the journal records
which credential answered; under ``owner`` the owner still approves (the dashboard's browser flow is
``test_dashboard.test_an_approval_clicked_on_the_page_lets_the_mission_succeed``)."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from robot_harness.core.clock import IdGenerator, SystemClock
from robot_harness.core.interactions import (
    ApprovalPolicy,
    CredentialSet,
    TokenHasher,
    load_token_key,
    request_fields,
    token_key_path,
    token_sha256,
)
from robot_harness.core.journal import SqliteJournal
from robot_harness.core.records import EventDraft, EventType

from .test_cli import cli

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 1.5, "y": 0.5, "yaw": 0.0}}
TURNS = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]}, {"done": "at the spot"}]
OPERATOR_ONLY = {"skill_tags": {"navigate_to": ["requires_operator"]}, "timeout_s": 60.0}
OPERATOR = "operator-t0ken"
EVIL = "evil"


def _events(path: Path, type_: str) -> list[dict[str, Any]]:
    import sqlite3

    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [json.loads(p) for (p,) in db.execute("select payload from events where type=? order by seq", (type_,))]
    finally:
        db.close()


def _asked(path: Path, credentials: CredentialSet, sender: str, *, interaction_id: str = "ask-1") -> None:
    j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(1))
    j.setup()
    try:
        j.append([EventDraft(type=EventType.MISSION_STARTED, mission_id="m-1"),
                  EventDraft(type=EventType.INTERACTION_REQUESTED, mission_id="m-1", payload={
                      "interaction_id": interaction_id, "kind": "approval", "prompt": "approve navigate_to(spot)?",
                      "call": {"tool_call_id": "c1", "name": "navigate_to", "arguments": {"place": "spot"}},
                      "owner": "a-script", "requested_at": 1.0, "expires_at": 9e9,
                      **request_fields(ApprovalPolicy.OPERATOR, credentials.for_mission(sender))})])
    finally:
        j.close()


# ----------------------------------------------------------------------------- the CLI, on the journal


def test_answer_refuses_the_sender_and_records_the_operator_on_a_keyed_journal(tmp_path):
    path = tmp_path / "journal.sqlite3"
    hasher = TokenHasher(load_token_key(token_key_path(path), create=True))
    _asked(path, CredentialSet(hasher, operator_token=OPERATOR), EVIL)
    listed = cli("interactions", "--journal", str(path))
    assert listed.returncode == 0 and "[policy operator: operator]" in listed.stdout, listed.stdout
    self_approval = cli("answer", "ask-1", "approve", "--token", EVIL, "--journal", str(path))
    assert self_approval.returncode == 3, self_approval.stderr
    assert "not_authorized" in self_approval.stderr and "sent with" in self_approval.stderr
    assert "Traceback" not in self_approval.stderr
    ok = cli("answer", "ask-1", "approve", "--token", OPERATOR, "--operator", "olga", "--journal", str(path))
    assert ok.returncode == 0 and "(as operator)" in ok.stdout, ok.stderr
    (resolved,) = _events(path, "INTERACTION_RESOLVED")
    assert resolved["answered_as"] == "operator" and resolved["operator"] == "olga"
    row = json.loads(cli("interactions", "--all", "--journal", str(path), "--json").stdout)[0]
    assert row["resolution"]["answered_as"] == "operator" and row["policy"] == "operator"
    text = path.read_bytes().decode("latin-1")
    for secret in (EVIL, OPERATOR, token_sha256(EVIL), token_sha256(OPERATOR)):
        assert secret not in text, "no token and no unkeyed digest in the journal"


def test_with_no_operator_configured_the_listing_names_the_variable_and_nobody_can_answer(tmp_path):
    path = tmp_path / "journal.sqlite3"
    hasher = TokenHasher(load_token_key(token_key_path(path), create=True))
    _asked(path, CredentialSet(hasher, operator_token=""), EVIL)
    listed = cli("interactions", "--journal", str(path))
    assert "nobody can answer yet" in listed.stdout and "$ROBOT_HARNESS_OPERATOR_TOKEN" in listed.stdout
    refused = cli("answer", "ask-1", "approve", "--token", "anything", "--journal", str(path))
    assert refused.returncode == 3 and "ROBOT_HARNESS_OPERATOR_TOKEN" in refused.stderr


def test_a_token_key_readable_by_others_is_refused_by_answer(tmp_path):
    path = tmp_path / "journal.sqlite3"
    hasher = TokenHasher(load_token_key(token_key_path(path), create=True))
    _asked(path, CredentialSet(hasher, operator_token=OPERATOR), EVIL)
    token_key_path(path).chmod(0o644)
    refused = cli("answer", "ask-1", "approve", "--token", OPERATOR, "--journal", str(path))
    assert refused.returncode == 3 and "chmod 600" in refused.stderr and "Traceback" not in refused.stderr
    assert _events(path, "INTERACTION_RESOLVED") == []


# ----------------------------------------------------------------------------- over ROS


def _pending(probe: Any, g: Any, timeout_s: float = 20.0) -> list[dict[str, Any]]:
    from robot_harness.srv import ListInteractions

    from .test_interactions_graph import _call

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        resp = _call(probe, g, ListInteractions, "/supervisor/interactions", ListInteractions.Request(pending_only=True))
        found = json.loads(resp.interactions_json)
        if found:
            return found
        time.sleep(0.1)
    return []


def _resolve(probe: Any, g: Any, interaction_id: str, token: str, name: str) -> Any:
    from robot_harness.srv import ResolveInteraction

    from .test_interactions_graph import _call

    return _call(probe, g, ResolveInteraction, "/supervisor/resolve_interaction", ResolveInteraction.Request(
        interaction_id=interaction_id, resolution="approve", token=token, operator_name=name))


def test_over_ros_and_the_cli_the_sender_is_refused_and_the_operator_approves(tmp_path, monkeypatch):
    from rclpy.node import Node

    from robot_harness.bringup import BringUp
    from robot_harness.cli import main as cli_main
    from robot_harness.client import MissionClient

    monkeypatch.setenv("ROBOT_HARNESS_OPERATOR_TOKEN", OPERATOR)
    journal = tmp_path / "j.sqlite3"
    with BringUp(overrides={
        "sim_robot": {"speed": 3.0},
        "planner": {"turns_json": json.dumps(TURNS)},
        "supervisor": {"journal_path": str(journal), "harness_config_json": json.dumps({
            "places": PLACES, "interactions": OPERATOR_ONLY})},
    }) as g:
        client = MissionClient(g.context)
        g.add_node(client.node, client.destroy)
        probe = Node("test_policy_operator", context=g.context)
        g.add_node(probe)
        box: dict[str, Any] = {}
        # the attack of issue 13: a program sends with its own owner token and approves with it
        t = threading.Thread(target=lambda: box.update(zip(("accepted", "result"), client.send(
            "Go to the spot.", owner="a-script", owner_token=EVIL))))
        t.start()
        (ask,) = _pending(probe, g)
        assert ask["policy"] == "operator" and ask["approvers"] == ["operator"] and ask["waiting_on"] == ""
        refused = _resolve(probe, g, ask["interaction_id"], EVIL, "mallory")
        assert not refused.ok and refused.code == "not_authorized" and "sent with" in refused.error
        assert cli_main(["answer", ask["interaction_id"], "approve", "--token", EVIL, "--journal", str(journal)]) == 3
        assert g.sim.goal_log == [], "nothing moves before an operator approves"
        ok = _resolve(probe, g, ask["interaction_id"], OPERATOR, "olga")
        assert ok.ok and ok.recorded, ok.error
        t.join(timeout=60)
        assert box["accepted"] and box["result"].status == "SUCCEEDED", box["result"].summary
        # clearing a resource takes the operator token, compared through the same keyed digests
        from robot_harness.srv import ClearResource

        from .test_interactions_graph import _call

        def clear(token: str) -> Any:
            return _call(probe, g, ClearResource, "/supervisor/clear_resource", ClearResource.Request(
                resource="base", reason="checked", token=token, operator_name="olga"))
        assert "not_authorized" in clear(EVIL).error
        authorised = clear(OPERATOR)
        assert "not_authorized" not in authorised.error and "no operator token" not in authorised.error
    (asked,) = _events(journal, "INTERACTION_REQUESTED")
    assert asked["policy"] == "operator" and asked["owner_hmac"] and asked["sender_hmac"] == asked["owner_hmac"]
    (resolved,) = _events(journal, "INTERACTION_RESOLVED")
    assert resolved["answered_as"] == "operator" and resolved["operator"] == "olga"
    assert token_key_path(journal).stat().st_mode & 0o777 == 0o600
    text = journal.read_bytes().decode("latin-1")
    assert EVIL not in text and OPERATOR not in text and token_sha256(EVIL) not in text


# ----------------------------------------------------------------------------- an MCP session


def test_an_mcp_session_cannot_approve_its_own_call_even_holding_the_operator_token(tmp_path, monkeypatch):
    """The MCP client's bearer token is the operator token (one secret reused): under ``operator`` that
    token cannot approve the session's calls; a configured approver can."""
    pytest.importorskip("mcp")
    from rclpy.node import Node

    from .test_mcp import _graph, _run

    monkeypatch.setenv("ROBOT_HARNESS_OPERATOR_TOKEN", OPERATOR)
    monkeypatch.setenv("ROBOT_HARNESS_APPROVER_ALICE", "alice-t0ken")
    with _graph(tmp_path, monkeypatch, token=OPERATOR, interactions={
            **OPERATOR_ONLY, "approvers": {"alice": "ROBOT_HARNESS_APPROVER_ALICE"}}) as g:
        url = g.supervisor.mcp_url
        probe = Node("test_policy_mcp", context=g.context)
        g.add_node(probe)
        box: dict[str, Any] = {}
        progress: list[str] = []

        async def go(s: Any) -> Any:
            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append(message or "")
            return await s.call_tool("navigate_to", {"place": "spot"}, progress_callback=on_progress)
        t = threading.Thread(target=lambda: box.update(result=_run(url, go, token=OPERATOR)))
        t.start()
        (ask,) = _pending(probe, g)
        assert ask["policy"] == "operator" and set(ask["approvers"]) == {"operator", "approver:alice"}
        refused = _resolve(probe, g, ask["interaction_id"], OPERATOR, "the-agent")
        assert not refused.ok and refused.code == "not_authorized" and "sent with" in refused.error
        assert g.sim.goal_log == [] and "result" not in box
        ok = _resolve(probe, g, ask["interaction_id"], "alice-t0ken", "alice")
        assert ok.ok, ok.error
        t.join(60)
        assert box["result"].structured_content["status"] == "accepted", box["result"].structured_content
        assert any("asked of an operator" in m for m in progress), progress
    (resolved,) = _events(tmp_path / "j.sqlite3", "INTERACTION_RESOLVED")
    assert resolved["answered_as"] == "approver:alice" and resolved["operator"] == "alice"


# ----------------------------------------------------------------------------- the dashboard


def test_the_dashboard_refuses_the_senders_approval_and_takes_the_operators(tmp_path, monkeypatch):
    """Over the dashboard's HTTP API with the ROS operator port: the mission is sent from the dashboard
    with the sender's owner token; its approval with that token is 403, the operator's is recorded."""
    from rclpy.node import Node

    from robot_harness.bringup import BringUp
    from robot_harness.operator.dashboard import RosOperatorPort, serve

    from .test_dashboard import _request

    monkeypatch.setenv("ROBOT_HARNESS_OPERATOR_TOKEN", OPERATOR)
    journal = tmp_path / "journal.sqlite3"
    with BringUp(overrides={
        "sim_robot": {"speed": 3.0},
        "planner": {"turns_json": json.dumps(TURNS)},
        "supervisor": {"journal_path": str(journal), "harness_config_json": json.dumps({
            "places": PLACES, "interactions": OPERATOR_ONLY})},
    }) as g:
        node = Node("dashboard_policy_operator", context=g.context)
        port = RosOperatorPort(node, journal_path=journal)
        g.add_node(node, lambda: (port.destroy(), node.destroy_node()))
        bearer = {"Authorization": f"Bearer {OPERATOR}"}
        with serve(journal_path=journal, operator=port, token=OPERATOR) as dash:
            api = dash.url + "api/"
            status, sent = _request(api + "missions", method="POST", headers=bearer, body={
                "goal": "Go to the spot.", "owner": "a-script", "owner_token": EVIL})
            assert status == 202, sent
            mission_id = sent["mission_id"]
            view: dict[str, Any] = {}
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not view.get("pending_interactions"):
                status, view = _request(api + f"missions/{mission_id}")
                time.sleep(0.2)
            (iid,) = view["pending_interactions"]
            (row,) = [i for i in view["interactions"] if i["interaction_id"] == iid]
            assert row["policy"] == "operator" and row["approvers"] == ["operator"]
            status, body = _request(api + f"interactions/{iid}", method="POST", headers=bearer,
                                    body={"resolution": "approve", "token": EVIL, "operator": "mallory"})
            assert (status, body["error"]) == (403, "not_authorized") and "sent with" in body["message"]
            assert g.sim.goal_log == []
            status, body = _request(api + f"interactions/{iid}", method="POST", headers=bearer,
                                    body={"resolution": "approve", "token": OPERATOR, "operator": "olga"})
            assert status == 200 and body["interaction"]["resolution"]["answered_as"] == "operator", body
            deadline = time.monotonic() + 45
            while time.monotonic() < deadline and view["mission"]["status"] != "SUCCEEDED":
                status, view = _request(api + f"missions/{mission_id}")
                time.sleep(0.3)
            assert view["mission"]["status"] == "SUCCEEDED", view["mission"]
    (resolved,) = _events(journal, "INTERACTION_RESOLVED")
    assert resolved["answered_as"] == "operator" and resolved["operator"] == "olga"
