"""The MCP server on the real graph, driven by the official SDK's own client over streamable HTTP.

An MCP client's calls are turns of an operator session mission on the
supervisor: the same journal, fresh-state preconditions, leases, approvals and
verifier as the planner's. The immediate answer says accepted or why not; the
verified outcome arrives as progress notifications and a resource; nothing an
MCP client says can complete a mission.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

pytest.importorskip("rclpy")
mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx2")

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from robot_harness.bringup import BringUp  # noqa: E402
from robot_harness.client import MissionClient  # noqa: E402
from robot_harness.core.config import load_harness_config  # noqa: E402
from robot_harness.core.skills import PROPOSE_DONE, PROPOSE_PLAN, default_skills  # noqa: E402

from .test_interactions_graph import _call, _events  # noqa: E402

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 1.5, "y": 0.5, "yaw": 0.0}}
TOKEN = "mcp-t0ken-for-tests"


def _graph(tmp_path, monkeypatch, *, token: str = "", interactions: dict | None = None) -> BringUp:
    if token:
        monkeypatch.setenv("ROBOT_HARNESS_MCP_TOKEN", token)
    else:
        monkeypatch.delenv("ROBOT_HARNESS_MCP_TOKEN", raising=False)
    harness: dict[str, Any] = {"places": PLACES, "mcp": {"enabled": True, "port": 0, "idle_close_s": 60.0}}
    if interactions:
        harness["interactions"] = interactions
    return BringUp(overrides={
        "sim_robot": {"speed": 3.0},
        "supervisor": {"journal_path": str(tmp_path / "j.sqlite3"), "harness_config_json": json.dumps(harness)},
    })


async def _session(url: str, body, *, token: str = "") -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(60.0)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write, message_handler=_collect_updates) as session:
                await session.initialize()
                return await body(session)


UPDATES: list[str] = []


async def _collect_updates(message: Any) -> None:
    if isinstance(message, mcp.types.ResourceUpdatedNotification):
        UPDATES.append(str(message.params.uri))


def _run(url: str, body, **kw: Any) -> Any:
    return asyncio.run(asyncio.wait_for(_session(url, body, **kw), 90.0))


# The handshake-era resources/subscribe is what most clients still speak; it is exercised on purpose.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_skills_are_tools_with_the_planners_schemas_and_a_motion_is_verified_not_assumed(tmp_path, monkeypatch):
    with _graph(tmp_path, monkeypatch) as g:
        url = g.supervisor.mcp_url
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        progress: list[str] = []


        async def body(s: ClientSession) -> dict[str, Any]:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            await s.subscribe_resource("robot-harness://session")  # a handshake-era (2025) client
            accepted = await s.call_tool("navigate_to", {"place": "spot"})
            action_id = accepted.structured_content["action_id"]

            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append(message or "")
            waited = await s.call_tool("harness_await_action", {"action_id": action_id, "timeout_s": 60},
                                       progress_callback=on_progress)
            # The SDK runs each progress callback as a task of its own (mcp 2.x jsonrpc_dispatcher
            # spawns it), so the response can be seen before the last callback has run: wait for it.
            deadline = time.monotonic() + 5
            while not any("verified outcome" in m for m in progress) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            resource = await s.read_resource(accepted.structured_content["outcome_uri"])
            done = await s.call_tool(PROPOSE_DONE, {"summary": "I am at the spot, trust me"})
            bad = await s.call_tool("navigate_to", {"place": "the moon"})
            unknown = await s.call_tool("teleport", {"place": "spot"})
            session = await s.call_tool("harness_session", {})
            stop = await s.call_tool("harness_stop", {"reason": "test over"})
            return {"tools": tools, "accepted": accepted, "waited": waited, "resource": resource, "done": done,
                    "bad": bad, "unknown": unknown, "session": session, "stop": stop}

        UPDATES.clear()
        r = _run(url, body)
        updates = list(UPDATES)

        # A 2026-07-28 client (the SDK's Client) listens on a subscriptions/listen stream instead.
        async def modern() -> list[str]:
            heard: list[str] = []
            async with mcp.Client(url) as client:
                async with client.listen(resource_subscriptions=["robot-harness://session"]) as sub:
                    async def collect() -> None:
                        async for event in sub:
                            heard.append(str(event.uri))
                    task = asyncio.create_task(collect())
                    pose = await client.call_tool("get_pose", {})
                    assert pose.structured_content["status"] == "ok"
                    deadline = time.monotonic() + 5
                    while not heard and time.monotonic() < deadline:
                        await asyncio.sleep(0.05)
                    task.cancel()
            return heard
        heard = asyncio.run(asyncio.wait_for(modern(), 30))
        assert heard and set(heard) == {"robot-harness://session"}
        journal = tmp_path / "j.sqlite3"

    # The planner's tools, byte for byte (minus propose_done and propose_plan), with honest annotations.
    config = load_harness_config(overrides={"places": PLACES})
    planner_tools = {t["function"]["name"]: t["function"] for t in default_skills(config.navigation).tool_specs()}
    tools = r["tools"]
    assert PROPOSE_DONE not in tools and PROPOSE_PLAN not in tools, "a session acts call by call: no plan, no done"
    assert not {"clear_costmaps", "back_up", "spin", "wait"} & set(tools), "the recovery policy's own, never a client's"
    for name, fn in planner_tools.items():
        if name in (PROPOSE_DONE, PROPOSE_PLAN):
            continue
        assert tools[name].description == fn["description"] and tools[name].input_schema == fn["parameters"], name
    assert tools["navigate_to"].annotations.destructive_hint and not tools["navigate_to"].annotations.read_only_hint
    assert tools["get_pose"].annotations.read_only_hint and not tools["get_pose"].annotations.destructive_hint
    for name in ("send_message", "speak", "capture_image"):  # side effects: never offered as read-only
        assert not tools[name].annotations.read_only_hint and tools[name].annotations.open_world_hint, name
    assert tools["harness_await_action"].annotations.read_only_hint

    # Immediate answer: accepted, not success; the outcome comes from the verifier.
    acc = r["accepted"].structured_content
    assert not r["accepted"].is_error and acc["status"] == "accepted" and acc["action_id"]
    assert "not completion" in acc["note"]
    out = r["waited"].structured_content
    assert out["outcome"]["state"] == "SUCCEEDED" and out["final"], out
    assert [s["state"] for s in out["states"]][-2:] == ["VERIFYING", "SUCCEEDED"]
    assert any("RUNNING" in m for m in progress) and any("verified outcome SUCCEEDED" in m for m in progress), progress
    assert json.loads(r["resource"].contents[0].text)["state"] == "SUCCEEDED"
    assert updates and set(updates) == {"robot-harness://session"}, updates  # listeners hear of every change

    # Refusals are clear and journaled; nothing an MCP client says completes a mission.
    assert r["done"].is_error and "never declare" in r["done"].structured_content["error"]["message"]
    assert r["bad"].is_error and "moon" in json.dumps(r["bad"].structured_content)
    assert r["unknown"].is_error and r["unknown"].structured_content["error"]["code"] == "unknown_tool"
    mission_id = r["session"].structured_content["session_mission_id"]
    assert [c["name"] for c in r["session"].structured_content["calls"]] == ["navigate_to", "navigate_to", "teleport"]
    assert r["stop"].structured_content["stopped_mission_id"] == mission_id

    calls = [(m, p["name"]) for m, p in _events(journal, "TOOL_CALL_RECORDED")]
    # After harness_stop, the next call (the modern client's) opened a new session mission.
    assert calls[:3] == [(mission_id, "navigate_to"), (mission_id, "navigate_to"), (mission_id, "teleport")]
    assert calls[3][1] == "get_pose" and calls[3][0] not in ("", mission_id) and len(calls) == 4
    assert [p["status"] for _, p in _events(journal, "TOOL_RESULT_RECORDED")] == ["accepted", "error", "error", "ok"]
    assert [p["ok"] for _, p in _events(journal, "ACTION_PRECONDITION_CHECKED")] == [True]
    finished = dict(_events(journal, "MISSION_FINISHED"))
    assert finished[mission_id]["status"] == "CANCELLED" and "stop from an MCP client" in finished[mission_id]["summary"]
    assert not _events(journal, "COMMIT_RECORDED"), "no completion is ever committed for an MCP session"


def test_a_token_is_required_when_configured_and_a_running_session_holds_the_robot(tmp_path, monkeypatch):
    with _graph(tmp_path, monkeypatch, token=TOKEN) as g:
        url = g.supervisor.mcp_url
        denied = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        assert denied.status_code == 401
        wrong = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
                           headers={"Authorization": "Bearer guess"})
        assert wrong.status_code == 401

        async def pose(s: ClientSession) -> Any:
            return await s.call_tool("get_pose", {})
        got = _run(url, pose, token=TOKEN)
        assert not got.is_error and got.structured_content["status"] == "ok"

        # The session mission holds the robot: a planner mission is refused until it ends.
        client = MissionClient(g.context)
        g.add_node(client.node, client.destroy)
        accepted, refused = client.send("Go to the spot.", timeout_s=10.0)
        assert accepted and refused.status == "BLOCKED" and refused.refusal == "busy"
        assert "MCP operator session" in refused.summary and "harness_stop" in refused.summary, refused.summary

        async def stop(s: ClientSession) -> Any:
            return await s.call_tool("harness_stop", {})
        assert _run(url, stop, token=TOKEN).structured_content["stopped_mission_id"]


def test_an_approval_gates_an_mcp_motion_like_a_planners(tmp_path, monkeypatch):
    from rclpy.node import Node

    from robot_harness.srv import ListInteractions, ResolveInteraction


    approval = {"skill_tags": {"navigate_to": ["requires_approval"]}, "timeout_s": 60.0}
    # The operator's token answers approvals; the MCP client's token does not, and it has no tool to.
    monkeypatch.setenv("ROBOT_HARNESS_OPERATOR_TOKEN", "operator-only")
    with _graph(tmp_path, monkeypatch, token=TOKEN, interactions=approval) as g:
        url = g.supervisor.mcp_url
        probe = Node("test_mcp_operator", context=g.context)
        g.add_node(probe)
        box: dict[str, Any] = {}
        progress: list[str] = []

        async def go(s: ClientSession) -> Any:
            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append(message or "")
            return await s.call_tool("navigate_to", {"place": "spot"}, progress_callback=on_progress)
        t = threading.Thread(target=lambda: box.update(result=_run(url, go, token=TOKEN)))
        t.start()
        pending: list[dict] = []
        deadline = time.monotonic() + 20
        while not pending and time.monotonic() < deadline:
            resp = _call(probe, g, ListInteractions, "/supervisor/interactions", ListInteractions.Request(pending_only=True))
            pending = json.loads(resp.interactions_json)
            time.sleep(0.1)
        (ask,) = pending
        assert g.sim.goal_log == [], "nothing moves before the approval"
        assert "result" not in box, "the call waits for the operator"
        assert not _call(probe, g, ResolveInteraction, "/supervisor/resolve_interaction", ResolveInteraction.Request(
            interaction_id=ask["interaction_id"], resolution="approve", token=TOKEN, operator_name="mcp")).ok
        ok = _call(probe, g, ResolveInteraction, "/supervisor/resolve_interaction", ResolveInteraction.Request(
            interaction_id=ask["interaction_id"], resolution="approve", token="operator-only", operator_name="alice"))
        assert ok.ok, ok.error
        t.join(60)
        result = box["result"]
        assert result.structured_content["status"] == "accepted", result.structured_content
        assert any("waiting for an operator" in m for m in progress), progress
        assert not any(name in {t.name for t in _run(url, _list, token=TOKEN)}
                       for name in ("answer", "resolve_interaction"))


async def _list(s: ClientSession) -> Any:
    return (await s.list_tools()).tools


def test_a_stale_pose_refuses_an_mcp_motion_with_precondition_changed_and_nothing_moves(tmp_path, monkeypatch):
    monkeypatch.delenv("ROBOT_HARNESS_MCP_TOKEN", raising=False)
    harness = {"places": PLACES, "mcp": {"enabled": True, "port": 0}}
    with BringUp(overrides={
        # From 2 s on, localization repeats its last pose and stamp: the pose goes stale.
        "sim_robot": {"speed": 3.0, "faults_json": json.dumps([{"kind": "frozen_pose", "at_s": 2.0}])},
        "supervisor": {"journal_path": str(tmp_path / "j.sqlite3"), "harness_config_json": json.dumps(harness)},
    }) as g:
        time.sleep(3.0)  # past the fault, and past the pose's freshness limit

        async def go(s: ClientSession) -> Any:
            return await s.call_tool("navigate_to", {"place": "spot"})
        result = _run(g.supervisor.mcp_url, go)
        assert result.is_error and result.structured_content["status"] == "precondition_changed", result.structured_content
        assert g.sim.goal_log == [], "nothing moved"
    checks = _events(tmp_path / "j.sqlite3", "ACTION_PRECONDITION_CHECKED")
    assert [p["ok"] for _, p in checks] == [False]
    assert not _events(tmp_path / "j.sqlite3", "ROBOT_ACTION_STARTED")


def _non_loopback_ipv4() -> str | None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # UDP connect sends nothing; it picks the outgoing address
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def test_off_loopback_the_server_needs_a_token_and_refuses_requests_without_it():
    from robot_harness.core.errors import RefusalError, UsageError
    from robot_harness.operator.session import SessionHost
    from robot_harness.operator.mcp_server import serve

    def no_robot(planner, caller):
        raise RefusalError("no robot in this test")
    host = SessionHost(start=no_robot, stop=lambda m, r: None, new_id=lambda: "c", idle_close_s=60.0)
    skills = list(default_skills(load_harness_config().navigation))
    with pytest.raises(UsageError, match="needs a bearer token"):
        serve(host, skills, bind="0.0.0.0", port=0)  # refused before any socket is opened
    addr = _non_loopback_ipv4()
    if addr is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    handle = serve(host, skills, bind=addr, port=0, token=TOKEN)
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        headers = {"Accept": "application/json, text/event-stream"}
        assert handle.url.startswith(f"http://{addr}:")
        assert httpx.post(handle.url, json=init, headers=headers).status_code == 401
        assert httpx.post(handle.url, json=init, headers={**headers, "Authorization": "Bearer nope"}).status_code == 401
        ok = httpx.post(handle.url, json=init, headers={**headers, "Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200, ok.text

        async def refused(s: ClientSession) -> Any:
            return await s.call_tool("get_pose", {})
        answer = _run(handle.url, refused, token=TOKEN)
        assert answer.is_error and "no robot in this test" in answer.structured_content["error"]["message"]
    finally:
        handle.stop()


def test_every_loopback_bind_refuses_a_foreign_host_or_origin():
    """DNS rebinding: a page served by evil.example resolving to 127.0.0.x must not reach a token-less server."""
    from robot_harness.core.errors import RefusalError
    from robot_harness.operator.session import SessionHost
    from robot_harness.operator.mcp_server import serve

    def no_robot(planner, caller):
        raise RefusalError("no robot in this test")
    host = SessionHost(start=no_robot, stop=lambda m, r: None, new_id=lambda: "c", idle_close_s=60.0)
    skills = list(default_skills(load_harness_config().navigation))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for bind in ("127.0.0.1", "127.0.0.2"):
        handle = serve(host, skills, bind=bind, port=0)
        try:
            port = handle.port
            foreign_host = httpx.post(handle.url, json=init, headers={**accept, "Host": f"evil.example:{port}"})
            assert foreign_host.status_code in (403, 421), (bind, foreign_host.status_code)
            foreign_origin = httpx.post(handle.url, json=init, headers={**accept, "Origin": "http://evil.example"})
            assert foreign_origin.status_code in (403, 421), (bind, foreign_origin.status_code)
            assert httpx.post(handle.url, json=init, headers=accept).status_code == 200, bind
        finally:
            handle.stop()
