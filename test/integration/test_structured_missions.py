"""Structured missions on the real node graph: a template, an explicit contract, an invalid
parameter (BLOCKED, nothing dispatched), the CLI flags as a subprocess, and the MCP tool."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("rclpy")

from robot_harness.bringup import BringUp  # noqa: E402
from robot_harness.client import MissionClient  # noqa: E402
from robot_harness.core.clock import IdGenerator, SystemClock  # noqa: E402
from robot_harness.core.journal import SqliteJournal  # noqa: E402
from robot_harness.core.records import EventType  # noqa: E402

from .test_mission_service import set_message_fields  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "robot_harness"]
PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 2.0, "y": 1.0, "yaw": 0.0}}
TURNS = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]}, {"done": "at the spot"}]
AT_SPOT = {"id": "o1", "kind": "at_place", "description": "The robot is at the spot.",
           "params": {"place": "spot", "final": True}, "evidence": ["navigation_receipt", "pose_observation"],
           "max_age_s": 2.0}


def _overrides(tmp_path: Path, harness: dict | None = None) -> dict[str, dict[str, Any]]:
    return {
        "sim_robot": {"speed": 3.0},
        "planner": {"turns_json": json.dumps(TURNS)},
        "supervisor": {"journal_path": str(tmp_path / "j.sqlite3"), "harness_config_json": json.dumps(
            {"places": PLACES, "navigation": {"timeout_s": 20.0}, **(harness or {})})},
    }


def _events(path: Path, mission_id: str) -> list[Any]:
    j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None))
    try:
        return j.events(mission_id=mission_id)
    finally:
        j.close()


def _of(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.type is EventType(kind)]


def test_the_documented_send_goal_examples_are_valid_goals():
    """Every `ros2 action send_goal` example in Mission.action sets real fields and means what it says."""
    from robot_harness.action import Mission
    from robot_harness.nodes.conversions import mission_spec_to_goal, msg_to_mission_spec

    text = (REPO / "action" / "Mission.action").read_text()
    examples = re.findall(r'^#\s+"(\{.*\})"$', text, re.M)
    assert len(examples) == 3, examples
    specs = [msg_to_mission_spec(set_message_fields(Mission.Goal(), yaml.safe_load(e))) for e in examples]
    assert [s.source for s in specs] == ["goal", "contract", "template"]
    assert specs[1].contract and specs[2].template == "inspect_and_return"
    assert specs[2].template_params == (("place", "office_storage"),)
    # the spec crosses the boundary and back unchanged
    for spec in specs:
        assert msg_to_mission_spec(mission_spec_to_goal(spec, Mission.Goal())) == spec


def test_template_and_contract_missions_succeed_and_an_invalid_one_is_blocked_before_anything_moves(tmp_path):
    with BringUp(overrides=_overrides(tmp_path)) as g:
        client = MissionClient(g.context)
        g.add_node(client.node, client.destroy)

        accepted, result = client.send("", template="go_to", template_params={"place": "spot"})
        assert accepted and result.status == "SUCCEEDED", result.summary
        template_id = result.mission_id

        contract = yaml.safe_dump({"obligations": [AT_SPOT]}, sort_keys=False)
        accepted, result = client.send("Park at the spot, please.", contract=contract)
        assert accepted and result.status == "SUCCEEDED", result.summary
        contract_id = result.mission_id

        received = len([e for e in g.sim.goal_log if e.event == "received"])
        accepted, result = client.send("", template="go_to", template_params={"place": "spot2", "speed": "fast"})
        assert accepted and result.status == "BLOCKED"
        assert "template_params.place: unknown place 'spot2' (did you mean spot?)" in result.summary, result.summary
        assert "template_params.speed: unknown parameter (go_to takes place)" in result.summary
        blocked_id = result.mission_id
        assert len([e for e in g.sim.goal_log if e.event == "received"]) == received, "nothing reached the robot"

        # nothing at all (no goal, no contract, no template) is refused at the door, as an empty goal always was
        accepted, refused = client.send("", timeout_s=20.0)
        assert accepted and refused.status == "BLOCKED" and refused.refusal == "invalid_goal", refused.summary

    journal = tmp_path / "j.sqlite3"
    events = _events(journal, template_id)
    assert _of(events, "MISSION_STARTED")[0].payload["goal"] == "template go_to(place=spot)"
    frozen = _of(events, "CONTRACT_FROZEN")[0].payload["contract"]
    assert frozen["compiler"] == "structured:template/go_to"
    assert frozen["coverage"]["ok"] and frozen["coverage"]["notes"] == "structured contract: reviewed field by field"
    assert [o["params"] for o in frozen["obligations"]] == [{"place": "spot", "final": True}]
    assert _of(events, "COMMIT_RECORDED"), "the verifier and the gate decided, as for any mission"

    events = _events(journal, contract_id)
    assert _of(events, "MISSION_STARTED")[0].payload["goal"] == "Park at the spot, please."
    frozen = _of(events, "CONTRACT_FROZEN")[0].payload["contract"]
    assert frozen["compiler"] == "structured:contract" and frozen["obligations"][0]["id"] == "o1"

    events = _events(journal, blocked_id)
    refusal = _of(events, "CONTRACT_FROZEN")[0].payload
    assert "contract" not in refusal and "template_params.place" in json.dumps(refusal["error"])
    for kind in ("MODEL_TURN_STARTED", "TOOL_CALL_RECORDED", "ROBOT_ACTION_STARTED"):
        assert not _of(events, kind), f"{kind} in a refused mission"
    (finished,) = _of(events, "MISSION_FINISHED")
    assert finished.payload["status"] == "BLOCKED" and "spot2" in finished.payload["summary"]


def test_inspect_and_return_comes_back_to_where_the_mission_started(tmp_path):
    turns = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]},
             {"tool_calls": [{"name": "capture_image", "arguments": {"label": "spot"}}]},
             {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]},
             {"done": "Inspected the spot and came back."}]
    overrides = _overrides(tmp_path)
    overrides["planner"] = {"turns_json": json.dumps(turns)}
    with BringUp(overrides=overrides) as g:
        client = MissionClient(g.context)
        g.add_node(client.node, client.destroy)
        accepted, result = client.send("", template="inspect_and_return", template_params=[("place", "spot")])
    assert accepted and result.status == "SUCCEEDED", result.summary
    events = _events(tmp_path / "j.sqlite3", result.mission_id)
    assert _of(events, "MISSION_STARTED")[0].payload["goal"] == "template inspect_and_return(place=spot, return_to=start)"
    frozen = _of(events, "CONTRACT_FROZEN")[0].payload["contract"]
    assert [(o["kind"], o["params"].get("place")) for o in frozen["obligations"]] == [
        ("at_place", "spot"), ("image_captured", "spot"), ("at_place", "start")]
    assert "admission" in {e.payload.get("reason") for e in _of(events, "WORLD_SNAPSHOT_CAPTURED")}


# --------------------------------------------------------------------------- the CLI


def cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ))


def test_cli_file_and_flag_mistakes_are_usage_errors_without_a_graph(tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("- {id: o1, kind: [")
    shape = tmp_path / "shape.json"
    shape.write_text(json.dumps({"contract": [AT_SPOT]}))
    for argv, needle in [
        (["--contract", str(tmp_path / "nope.yaml")], f"contract file {tmp_path / 'nope.yaml'}: no such file"),
        (["--contract", str(bad_yaml)], "contract: not YAML or JSON (line 1"),
        (["--contract", str(shape)], "contract.contract: unknown key"),
        (["--contract", str(shape), "--template", "go_to"], "not allowed with argument"),
        (["Go.", "--param", "place=spot"], "--param needs --template NAME"),
        (["--template", "go_to", "--param", "spot"], "--param expects KEY=VALUE, got 'spot'"),
        ([], "give a goal, --contract FILE or --template NAME"),
    ]:
        proc = cli("mission", *argv, "--timeout", "3", timeout=60)
        assert proc.returncode == 2, (argv, proc.returncode, proc.stderr)
        assert needle in proc.stderr and "Traceback" not in proc.stderr, (argv, proc.stderr)
    as_json = cli("mission", "--contract", str(shape), "--json", timeout=60)
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and doc["error"] == "invalid_mission_spec" and doc["exit_code"] == 2
    assert doc["problems"] == ["contract.contract: unknown key (a contract mapping holds only 'obligations')",
                               "contract: a mapping needs an 'obligations' key"]


def test_cli_template_and_contract_missions_over_dds(tmp_path):
    from .test_cli import interrupt

    script = tmp_path / "turns.yaml"
    script.write_text(yaml.safe_dump({"turns": TURNS}))
    harness = tmp_path / "harness.yaml"
    harness.write_text(yaml.safe_dump({"places": PLACES, "navigation": {"timeout_s": 10.0}}))
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps([AT_SPOT]))
    journal = tmp_path / "up.sqlite3"
    up = subprocess.Popen([*CLI, "up", "--journal", str(journal), "--planner-script", str(script),
                           "--harness-config", str(harness)],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        seen = ""
        while "graph up" not in seen and time.monotonic() < deadline and up.poll() is None:
            seen += up.stdout.readline()
        assert "graph up" in seen, seen[-3000:]
        by_template = cli("mission", "--template", "go_to", "--param", "place=spot", "--json", "--timeout", "90")
        assert by_template.returncode == 0, by_template.stderr[-2000:]
        out = json.loads(by_template.stdout)
        assert out["status"] == "SUCCEEDED", out
        by_contract = cli("mission", "Park at the spot.", "--contract", str(contract), "--json",
                          "--require-success", "--timeout", "90")
        assert by_contract.returncode == 0, by_contract.stderr[-2000:]
        assert json.loads(by_contract.stdout)["status"] == "SUCCEEDED"
        blocked = cli("mission", "--template", "patrol", "--param", "waypoints=spot,moon", "--timeout", "90")
        assert blocked.returncode == 0, blocked.stderr[-2000:]
        assert "status:  BLOCKED" in blocked.stdout
        assert "template_params.waypoints[1]: unknown place 'moon'" in blocked.stdout
        strict = cli("mission", "--template", "go_to", "--param", "place=moon", "--require-success",
                     "--timeout", "90")
        assert strict.returncode == 1 and "status:  BLOCKED" in strict.stdout, strict.stderr[-2000:]
    finally:
        interrupt(up)
    assert up.returncode == 0
    goals = {e.payload["goal"] for e in _events(journal, out["mission_id"]) if e.type is EventType.MISSION_STARTED}
    assert goals == {"template go_to(place=spot)"}


# --------------------------------------------------------------------------- MCP


def _mcp_run(url: str, body) -> Any:
    import httpx2 as httpx
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def session() -> Any:
        async with httpx.AsyncClient(timeout=httpx.Timeout(120.0)) as http:
            async with streamable_http_client(url, http_client=http) as (read, write, *_):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    return await body(s)

    return asyncio.run(asyncio.wait_for(session(), 150.0))


def test_mcp_submits_a_whole_mission_through_the_supervisor(tmp_path, monkeypatch):
    pytest.importorskip("mcp")
    pytest.importorskip("httpx2")
    monkeypatch.delenv("ROBOT_HARNESS_MCP_TOKEN", raising=False)
    overrides = _overrides(tmp_path, {"mcp": {"enabled": True, "port": 0, "idle_close_s": 60.0}})
    progress: list[str] = []
    with BringUp(overrides=overrides) as g:
        url = g.supervisor.mcp_url

        async def body(s: Any) -> dict[str, Any]:
            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append(message or "")

            tools = {t.name: t for t in (await s.list_tools()).tools}
            out = {"tools": tools}
            out["check"] = await s.call_tool("harness_submit_mission", {
                "template": "go_to", "params": {"place": "spot"}, "validate_only": True})
            out["check_goal"] = await s.call_tool("harness_submit_mission", {"goal": "Go to the spot.",
                                                                             "validate_only": True})
            out["check_bad"] = await s.call_tool("harness_submit_mission", {
                "contract": [{**AT_SPOT, "params": {"place": "spto", "final": True}}], "validate_only": True})
            out["template"] = await s.call_tool("harness_submit_mission", {
                "template": "go_to", "params": {"place": "spot"}, "goal": "Park at the spot."},
                progress_callback=on_progress)
            out["contract"] = await s.call_tool("harness_submit_mission", {"contract": [AT_SPOT]})
            out["invalid"] = await s.call_tool("harness_submit_mission", {"template": "go_to",
                                                                          "params": {"place": "spot2"}})
            out["both"] = await s.call_tool("harness_submit_mission", {"template": "go_to", "contract": [AT_SPOT],
                                                                       "params": {"place": "spot"}})
            out["wrong"] = await s.call_tool("harness_submit_mission", {"template": 3})
            # an MCP session holds the robot: a submitted mission is refused until it ends
            out["pose"] = await s.call_tool("get_pose", {})
            out["held"] = await s.call_tool("harness_submit_mission", {"template": "go_to",
                                                                       "params": {"place": "spot"}})
            out["stop"] = await s.call_tool("harness_stop", {})
            return out

        r = _mcp_run(url, body)
        received = [e for e in g.sim.goal_log if e.event == "received"]

    tool = r["tools"]["harness_submit_mission"]
    assert tool.annotations.destructive_hint and "verifier" in tool.description
    check = r["check"].structured_content
    assert not r["check"].is_error and check["status"] == "valid" and check["source"] == "template"
    assert check["goal"] == "template go_to(place=spot)"
    assert check["contract"]["obligations"][0]["params"] == {"place": "spot", "final": True}
    words = r["check_goal"].structured_content
    assert words["source"] == "goal" and words["contract"]["obligations"][0]["params"]["place"] == "spot", words
    assert words["contract"]["coverage"]["ok"]
    bad = r["check_bad"].structured_content["error"]
    assert r["check_bad"].is_error and bad["problems"] == [
        "obligations[0].params.place: unknown place 'spto' (did you mean spot?)"]

    parked = r["template"].structured_content
    assert not r["template"].is_error and parked["status"] == "SUCCEEDED", parked
    assert parked["mission_id"].startswith("mission-") and parked["contract_id"] and parked["verdict_id"]
    assert f"admitted as {parked['mission_id']}" in progress and any(m.endswith(": planning") for m in progress), progress
    assert r["contract"].structured_content["status"] == "SUCCEEDED", r["contract"].structured_content
    invalid = r["invalid"].structured_content
    assert r["invalid"].is_error and invalid["status"] == "BLOCKED"
    assert "template_params.place: unknown place 'spot2' (did you mean spot?)" in invalid["summary"]
    both = r["both"].structured_content
    assert both["status"] == "BLOCKED" and "give a contract or a template, not both" in both["summary"]
    assert r["wrong"].is_error and r["wrong"].structured_content["error"]["code"] == "invalid_arguments"
    assert not r["pose"].is_error
    held = r["held"].structured_content["error"]
    assert r["held"].is_error and "MCP operator session" in held["message"] and "holds the robot" in held["message"]
    assert r["stop"].structured_content["stopped_mission_id"]

    # one goal for each mission that ran; the refusals moved nothing
    assert len(received) == 2, received
    events = _events(tmp_path / "j.sqlite3", parked["mission_id"])
    started = _of(events, "MISSION_STARTED")[0].payload
    assert started["goal"] == "Park at the spot." and started["owner"].startswith("mcp")
    assert _of(events, "CONTRACT_FROZEN")[0].payload["contract"]["compiler"] == "structured:template/go_to"
    assert _of(events, "COMMIT_RECORDED")
