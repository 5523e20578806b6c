"""A whole mission through the real planner node and the `openai` client.

The model is a local OpenAI-compatible server on 127.0.0.1 (test/fake_openai.py)
that answers with scripted completions, including the ways real models go
wrong. Everything else is the deployed graph: sim_robot, snapshot
aggregator, planner node (backend llm), verifier node, supervisor, over
loopback DDS. Then the recorded turns replay the mission with no model at all.
"""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from robot_harness.core.scenario import load_scenario
from robot_harness.runner import run_scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_openai import FakeOpenAI  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-never-in-the-journal-0123456789"


def call(name: str, **arguments: object) -> dict:
    return {"name": name, "arguments": arguments}


# What a sloppy model does on the demo mission: an unknown tool, malformed
# arguments, a rate limit, prose instead of action, an early done claim - and
# eventually the real work.
SCRIPT = [
    {"tool_calls": [call("teleport", place="office_storage")]},
    {"tool_calls": [{"name": "navigate_to", "arguments": "{place: office_storage"}]},
    {"status": 429, "retry_after": 0.05},
    {"content": "I am on my way to office_storage and will report shortly."},
    {"tool_calls": [call("navigate_to", place="office_storage")]},
    {"tool_calls": [call("propose_done", summary="Inspection complete.")]},  # too early: rejected
    {"tool_calls": [call("capture_image", label="office_storage")]},
    {"tool_calls": [call("navigate_to", place="dock")]},
    {"tool_calls": [call("send_message", to="operator", text="Inspected office_storage; back at dock.")]},
    {"tool_calls": [call("propose_done", summary="Image captured at office_storage, back at dock, operator notified.")]},
]


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch):
    def use(fake: FakeOpenAI) -> None:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return use


def test_a_full_mission_through_the_llm_planner_node_is_verified_and_replays_without_the_model(tmp_path, llm_env):
    scenario = load_scenario(REPO / "scenarios" / "demo.yaml")
    replay = tmp_path / "demo.replay.jsonl"
    with FakeOpenAI(SCRIPT) as fake:
        llm_env(fake)
        report = run_scenario(scenario, journal_path=tmp_path / "llm" / "journal.sqlite3", extra_overrides={
            "planner": {"backend": "llm", "model": "fake-model", "record_file": str(replay),
                        "timeout_s": 5.0, "max_retries": 2},
        })
        requests = list(fake.requests)
        auth = list(fake.auth_headers)
    assert report["status"] == "SUCCEEDED", report["summary"]
    assert report["verdict"]["goal_verdict"] == "verified_done" and report["commit"]
    assert report["verdict"]["verifier"] == "/verifier"  # judged in the verifier node
    # the real openai client path: tools offered as functions, the key as a bearer token
    assert len(requests) == len(SCRIPT)
    first = requests[0]
    assert first["model"] == "fake-model" and first["seed"] == 0 and first["temperature"] == 0.0
    assert {t["function"]["name"] for t in first["tools"]} >= {"navigate_to", "propose_done", "capture_image"}
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert all(h == f"Bearer {KEY}" for h in auth)

    calls = {c["name"]: c for c in report["tool_calls"]}
    results = [(c["name"], (c["result"] or {}).get("status"), ((c["result"] or {}).get("error") or {}).get("code"))
               for c in report["tool_calls"]]
    assert ("teleport", "error", "unknown_tool") in results
    assert ("navigate_to", "error", "malformed_arguments") in results
    assert calls["navigate_to"]["action_state"] == "SUCCEEDED"
    # only the two well-formed navigations reached the robot
    received = [e for e in report["sim_truth"]["goal_log"] if e["event"] == "received"]
    assert len(received) == 2

    journal = tmp_path / "llm" / "journal.sqlite3"
    db = sqlite3.connect(journal)
    rows = [json.loads(p) for (p,) in db.execute(
        "select payload from events where type='MODEL_RESPONSE_RECORDED' and mission_id=? order by seq",
        (report["mission_id"],))]
    llm_calls = [r["response"]["meta"]["llm_call"] for r in rows if r["response"]["meta"].get("llm_call")]
    assert len(llm_calls) == len(SCRIPT) - 1  # the 429 was retried inside one call
    assert any(c["attempts"] == 2 for c in llm_calls)
    assert all(c["usage"]["total_tokens"] > 0 and c["latency_ms"] > 0 for c in llm_calls)
    assert report["model_usage"]["llm_calls"] == len(llm_calls)
    assert report["model_usage"]["total_tokens"] == sum(c["usage"]["total_tokens"] for c in llm_calls)
    rejected = [r for (r,) in db.execute("select payload from events where type='VERDICT_RECORDED' and mission_id=?",
                                         (report["mission_id"],))]
    assert len(rejected) == 2  # the early proposal was judged and turned down, the last one accepted
    whole = "\n".join(p for (p,) in db.execute("select payload from events"))
    assert KEY not in whole
    assert KEY not in replay.read_text()
    db.close()

    # Replay: the same scenario, the recorded turns, no model server at all.
    again = run_scenario(scenario, journal_path=tmp_path / "replay" / "journal.sqlite3", extra_overrides={
        "planner": {"backend": "replay", "replay_file": str(replay)},
    })
    assert again["status"] == "SUCCEEDED", again["summary"]
    assert [c["name"] for c in again["tool_calls"]] == [c["name"] for c in report["tool_calls"]]


def test_a_replay_that_is_asked_something_else_stops_with_a_clear_error(tmp_path, llm_env):
    replay = tmp_path / "r.jsonl"
    script = [{"tool_calls": [call("navigate_to", place="dock")]},
              {"tool_calls": [call("propose_done", summary="at dock")]}]
    scenario = load_scenario(REPO / "scenarios" / "demo.yaml")
    with FakeOpenAI(script) as fake:
        llm_env(fake)
        run_scenario(scenario, journal_path=tmp_path / "a" / "j.sqlite3", extra_overrides={
            "planner": {"backend": "llm", "model": "fake-model", "record_file": str(replay), "timeout_s": 5.0}})
    # a different goal: the first turn already differs from the recording
    other = scenario.model_copy(update={"goal": "Go to office_storage and report."})
    report = run_scenario(other, journal_path=tmp_path / "b" / "j.sqlite3", extra_overrides={
        "planner": {"backend": "replay", "replay_file": str(replay)}})
    assert report["status"] != "SUCCEEDED"
    assert "nondeterminism" in report["summary"] and "turn 0" in report["summary"], report["summary"]
    assert report["sim_truth"]["goal_log"] == []  # a diverged replay never moves the robot
