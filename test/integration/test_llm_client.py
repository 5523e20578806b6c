"""The LLM backend end to end: the real ``openai`` client against a local fake endpoint.

No ROS and no network beyond 127.0.0.1. Timeouts and backoffs are small (or
``sleep`` is injected) so every test runs in well under a second.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from robot_harness.core.contracts import CONTRACT_SYSTEM_PROMPT, LLMContractCompiler, LLMCoverageReviewer
from robot_harness.core.errors import NondeterminismError, RefusalError, UsageError
from robot_harness.core.ports import PlannerRequest
from robot_harness.core.records import ModelResponse, Pose2D
from robot_harness.core.skills import PROPOSE_DONE, default_skills
from robot_harness.llm import (
    MALFORMED_ARGUMENTS_KEY,
    PLANNER_SYSTEM_PROMPT,
    TRUNCATED_REPLY_MARKER,
    ChatClient,
    LLMBadResponse,
    LLMCall,
    LLMConfig,
    LLMConfigError,
    LLMRateLimited,
    LLMRequestRejected,
    LLMUnavailable,
    OpenAIPlanner,
    RecordingPlanner,
    ReplayFileError,
    ReplayPlanner,
    chat_complete_fn,
    request_digest,
)
from test.fake_openai import DEFAULT_USAGE, FakeOpenAI

SECRET = "sk-test-DO-NOT-LEAK-0123456789"
TOOLS = tuple(default_skills().tool_specs())


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ROBOT_HARNESS_MODEL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
                 "OPENAI_CUSTOM_HEADERS", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)


class Sleeps(list):
    """An injected ``sleep`` that records instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client_for(fake: FakeOpenAI, *, sleep=None, clock=None, **overrides) -> ChatClient:
    cfg = {"base_url": fake.base_url, "model": "test-model", "timeout_s": 2.0, "max_retries": 2,
           "backoff_initial_s": 0.01, "backoff_max_s": 0.05, **overrides}
    kwargs = {}
    if sleep is not None:
        kwargs["sleep"] = sleep
    if clock is not None:
        kwargs["clock_monotonic"] = clock
    return ChatClient(LLMConfig(**cfg), **kwargs)


def context(turn_index: int = 0, *, goal: str = "Go to the dock", snapshot_id: str = "snap-1", age: float = 0.1,
            x: float = 1.0, pose_status: str = "AVAILABLE") -> dict:
    """A context shaped like ``compile_planner_context`` output."""
    return {
        "goal": goal, "turn_index": turn_index, "snapshot_id": snapshot_id,
        "world": {"snapshot_id": snapshot_id, "pose": {"x": x, "y": 2.0, "yaw": 0.0},
                  "availability": {"pose": {"status": pose_status, "age_s": age}}, "controller": "idle",
                  "truncated": False},
        "places": ["dock", "office"], "runtime_events": [], "last_tool_results": [],
        "rules": "You propose 'done'; the harness verifies it.",
    }


def request(turn_index: int = 0, **ctx) -> PlannerRequest:
    return PlannerRequest(mission_id="m-1", model_turn_id=f"turn-{turn_index}", turn_index=turn_index,
                          context=context(turn_index, **ctx), tools=TOOLS)


# --------------------------------------------------------------------------- parsing replies


def test_tool_calls_are_parsed_into_a_model_response():
    script = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}, "id": "call_a"},
                              {"name": "get_pose", "arguments": {}, "id": "call_b"}], "content": None}]
    with FakeOpenAI(script) as fake:
        planner = OpenAIPlanner(client_for(fake))
        response, call = planner.turn(request())
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_a", "navigate_to", {"place": "dock"}), ("call_b", "get_pose", {})]
    assert response.done is None and response.text == ""
    assert planner.last_call is call and call.finish_reason == "tool_calls" and call.error is None


def test_malformed_or_non_object_arguments_become_the_marker_and_unknown_tools_pass_through():
    long_raw = "{" + "x" * 5000
    script = [{"tool_calls": [{"name": "navigate_to", "arguments": '{"place": "dock"'},
                              {"name": "navigate_to", "arguments": "[1, 2]"},
                              {"name": "navigate_to", "arguments": long_raw},
                              {"name": "teleport", "arguments": {"to": "mars"}},
                              {"name": "get_pose", "arguments": ""}]}]
    with FakeOpenAI(script) as fake:
        response = OpenAIPlanner(client_for(fake)).next_turn(request())
    first, second, third, unknown, blank = response.tool_calls
    assert blank.arguments == {}  # "" is how some servers send a call without arguments
    assert first.arguments == {MALFORMED_ARGUMENTS_KEY: '{"place": "dock"'}
    assert second.arguments == {MALFORMED_ARGUMENTS_KEY: "[1, 2]"}
    assert third.arguments == {MALFORMED_ARGUMENTS_KEY: long_raw[:2000]}
    assert (unknown.name, unknown.arguments) == ("teleport", {"to": "mars"})


def test_missing_tool_call_ids_are_derived_from_the_turn():
    script = [{"tool_calls": [{"name": "get_pose", "id": None}, {"name": "navigate_to", "id": None,
                                                                  "arguments": {"place": "dock"}}]}]
    with FakeOpenAI(script) as fake:
        response = OpenAIPlanner(client_for(fake)).next_turn(request(3))
    assert [c.id for c in response.tool_calls] == ["turn-3-0", "turn-3-1"]


def test_text_only_reply_is_text_without_calls_or_done():
    with FakeOpenAI([{"content": "I have reached the dock."}]) as fake:
        response = OpenAIPlanner(client_for(fake)).next_turn(request())
    assert response == ModelResponse(text="I have reached the dock.") and response.silent


def test_over_long_output_is_text_only_and_flagged_never_acted_on():
    script = [{"finish_reason": "length", "content": "x" * 5000,
               "tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]}]
    with FakeOpenAI(script) as fake:
        response, call = OpenAIPlanner(client_for(fake, max_output_chars=1000)).turn(request())
    assert response.tool_calls == () and response.done is None
    assert response.text == TRUNCATED_REPLY_MARKER + "x" * 1000
    assert call.finish_reason == "length" and call.truncated
    assert call.response["choices"][0]["message"]["content"] == "x" * 1000


@pytest.mark.parametrize("behaviour, problem", [({"empty_choices": True}, "no choices"),
                                                ({"body": "not json"}, "not JSON")])
def test_unusable_bodies_raise_bad_response_with_the_call(behaviour, problem):
    with FakeOpenAI([behaviour]) as fake, pytest.raises(LLMBadResponse, match=problem) as info:
        OpenAIPlanner(client_for(fake)).next_turn(request())
    assert isinstance(info.value, RefusalError) and info.value.code == "llm_bad_response"
    assert info.value.call.attempts == 1 and info.value.call.error["code"] == "llm_bad_response"
    assert len(fake.requests) == 1


# --------------------------------------------------------------------------- retries


def test_429_then_success_honours_retry_after():
    sleeps = Sleeps()
    with FakeOpenAI([{"status": 429, "retry_after": 0.05}, {"content": "ok"}]) as fake:
        result = client_for(fake, sleep=sleeps, backoff_max_s=1.0).complete([{"role": "user", "content": "hi"}])
    assert result.message["content"] == "ok"
    assert sleeps == [0.05] and result.call.attempts == 2
    assert result.call.retries[0]["status"] == 429 and len(fake.requests) == 2


def test_retry_after_is_capped_by_backoff_max():
    sleeps = Sleeps()
    with FakeOpenAI([{"status": 429, "retry_after": 30}, {"content": "ok"}]) as fake:
        client_for(fake, sleep=sleeps, backoff_max_s=0.2).complete([{"role": "user", "content": "hi"}])
    assert sleeps == [0.2]


def test_5xx_retried_with_exponential_backoff_then_unavailable():
    sleeps = Sleeps()
    with FakeOpenAI([{"status": 500}] * 3) as fake, pytest.raises(LLMUnavailable) as info:
        client_for(fake, sleep=sleeps, backoff_initial_s=0.01, backoff_max_s=1.0).complete(
            [{"role": "user", "content": "hi"}])
    err = info.value
    assert type(err) is LLMUnavailable and isinstance(err, RefusalError) and err.code == "llm_unavailable"
    assert err.call.attempts == 3 and len(fake.requests) == 3 and sleeps == [0.01, 0.02]
    assert err.call.error["status"] == 500 and err.call.response["status"] == 500


def test_429_after_every_retry_is_rate_limited():
    with FakeOpenAI([{"status": 429}] * 2) as fake, pytest.raises(LLMRateLimited) as info:
        client_for(fake, sleep=Sleeps(), max_retries=1).complete([{"role": "user", "content": "hi"}])
    assert isinstance(info.value, LLMUnavailable) and info.value.call.attempts == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_rejected_without_retry(status):
    sleeps = Sleeps()
    with FakeOpenAI([{"status": status}, {"content": "never served"}]) as fake, \
            pytest.raises(LLMRequestRejected) as info:
        client_for(fake, sleep=sleeps).complete([{"role": "user", "content": "hi"}])
    assert isinstance(info.value, UsageError) and info.value.details["status"] == status
    assert len(fake.requests) == 1 and sleeps == [] and info.value.call.attempts == 1


def test_timeout_is_unavailable():
    with FakeOpenAI([{"delay_s": 0.5, "content": "too late"}]) as fake, pytest.raises(LLMUnavailable) as info:
        client_for(fake, timeout_s=0.2, max_retries=0).complete([{"role": "user", "content": "hi"}])
    assert "timeout" in info.value.message and info.value.call.attempts == 1
    assert info.value.call.response is None and info.value.call.error["code"] == "llm_unavailable"


def test_timeout_is_retried():
    with FakeOpenAI([{"delay_s": 3.0, "content": "too late"}, {"content": "ok"}]) as fake:
        result = client_for(fake, timeout_s=1.0, max_retries=1, sleep=Sleeps()).complete(
            [{"role": "user", "content": "hi"}])
    assert result.message["content"] == "ok" and result.call.retries[0]["reason"] == "timeout"


def test_connection_refused_is_unavailable():
    with FakeOpenAI([]) as fake:
        base_url = fake.base_url
    with pytest.raises(LLMUnavailable, match="connection"):
        ChatClient(LLMConfig(base_url=base_url, model="m", max_retries=0, timeout_s=0.5)).complete(
            [{"role": "user", "content": "hi"}])


def test_usage_and_latency_are_recorded():
    ticks = iter([0.0, 0.25, 1.0, 1.5])
    with FakeOpenAI([{"status": 503}, {"content": "ok"}]) as fake:
        result = client_for(fake, sleep=Sleeps(), clock=lambda: next(ticks)).complete(
            [{"role": "user", "content": "hi"}])
        port = fake.base_url.split(":")[2].split("/")[0]
    call = result.call
    assert call.usage == DEFAULT_USAGE and call.latency_ms == 750.0 and call.attempts == 2
    assert call.kind == "llm_call" and call.base_url == f"127.0.0.1:{port}"
    assert LLMCall.model_validate_json(call.model_dump_json()) == call


# --------------------------------------------------------------------------- secrets and configuration


def test_the_key_is_sent_as_bearer_but_never_recorded(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    script = [{"tool_calls": [{"name": "send_message", "arguments": {"text": "hi", "api_key": "inner-secret"}}]},
              {"status": 400, "message": f"invalid key {SECRET}"}]
    with FakeOpenAI(script) as fake:
        client = client_for(fake)
        messages = [{"role": "user", "content": json.dumps({"goal": "x", "access_token": "tok-123"})}]
        result = client.complete(messages, tools=list(TOOLS))
        with pytest.raises(LLMRequestRejected) as info:
            client.complete([{"role": "user", "content": "hi"}])
    assert fake.auth_headers == [f"Bearer {SECRET}"] * 2
    err = info.value
    dumps = [repr(client), repr(client.config), result.call.model_dump_json(), repr(result.call),
             err.call.model_dump_json(), str(err), repr(err), json.dumps(err.to_dict())]
    assert not [d for d in dumps if SECRET in d]
    recorded = result.call.model_dump_json()
    assert "inner-secret" not in recorded and "tok-123" not in recorded and "***" in recorded
    # the caller still gets the model's real arguments (the journal redacts them on its own)
    assert "inner-secret" in result.message["tool_calls"][0]["function"]["arguments"]


def test_api_key_file_wins_over_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    key_file = tmp_path / "key"
    key_file.write_text("  sk-from-file\n")
    with FakeOpenAI([{"content": "ok"}]) as fake:
        client_for(fake, api_key_file=str(key_file)).complete([{"role": "user", "content": "hi"}])
    assert fake.auth_headers == ["Bearer sk-from-file"]


def test_unreadable_key_file_is_a_config_error(tmp_path):
    with pytest.raises(LLMConfigError, match="cannot read"):
        ChatClient(LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_file=str(tmp_path / "nope")))


def test_custom_key_env_and_missing_key(monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", SECRET)
    with FakeOpenAI([{"content": "ok"}]) as fake:
        client_for(fake, api_key_env="MY_LLM_KEY").complete([{"role": "user", "content": "hi"}])
    assert fake.auth_headers == [f"Bearer {SECRET}"]
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY") as info:
        ChatClient(LLMConfig(base_url="https://llm.example.com/v1", model="m"))
    assert isinstance(info.value, UsageError) and info.value.code == "llm_config_invalid"


def test_a_loopback_server_needs_no_key():
    with FakeOpenAI([{"content": "ok"}]) as fake:
        client_for(fake).complete([{"role": "user", "content": "hi"}])
    assert fake.auth_headers == ["Bearer not-needed"]


def test_model_and_base_url_come_from_the_environment(monkeypatch):
    with pytest.raises(LLMConfigError, match="ROBOT_HARNESS_MODEL"):
        LLMConfig()
    monkeypatch.setenv("ROBOT_HARNESS_MODEL", "env-model")
    assert LLMConfig().base_url == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    cfg = LLMConfig()
    assert (cfg.model, cfg.base_url, cfg.endpoint) == ("env-model", "http://localhost:8000/v1", "localhost:8000")
    assert LLMConfig(base_url="https://user:pw@host.example/v1?k=1", model="m").endpoint == "host.example:443"


# --------------------------------------------------------------------------- what is sent


def test_planner_sends_system_prompt_and_one_user_message_with_tools_verbatim():
    with FakeOpenAI([{"tool_calls": [{"name": "get_pose"}]}, {"content": "thinking"}]) as fake:
        planner = OpenAIPlanner(client_for(fake))
        planner.next_turn(request(0))
        planner.next_turn(request(1, goal="Go to the office"))
    for sent, turn in zip(fake.requests, (0, 1)):
        assert [m["role"] for m in sent["messages"]] == ["system", "user"]
        assert sent["messages"][0]["content"] == PLANNER_SYSTEM_PROMPT
        assert json.loads(sent["messages"][1]["content"]) == request(turn).context | (
            {"goal": "Go to the office"} if turn else {})
        assert sent["tools"] == list(TOOLS) and sent["tool_choice"] == "auto"
    assert "get_pose" not in json.dumps(fake.requests[1]["messages"])  # no history of turn 0
    assert PROPOSE_DONE in [t["function"]["name"] for t in fake.requests[0]["tools"]]


def test_sampling_options_are_forwarded():
    with FakeOpenAI([{"content": "a"}, {"content": "b"}]) as fake:
        client_for(fake, seed=7, temperature=0.3, max_tokens=99).complete([{"role": "user", "content": "hi"}])
        client_for(fake, seed=None).complete([{"role": "user", "content": "hi"}])
    first, second = fake.requests
    assert (first["seed"], first["temperature"], first["max_tokens"], first["model"]) == (7, 0.3, 99, "test-model")
    assert "seed" not in second and "tools" not in second and "tool_choice" not in second
    assert fake.paths == ["/v1/chat/completions"] * 2


def test_fake_server_answers_500_when_the_script_runs_out():
    with FakeOpenAI([]) as fake, pytest.raises(LLMUnavailable, match="script exhausted"):
        client_for(fake, max_retries=0).complete([{"role": "user", "content": "hi"}])


# --------------------------------------------------------------------------- record and replay


def test_record_then_replay_round_trip_and_divergence(tmp_path):
    path = tmp_path / "turns.jsonl"
    script = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]},
              {"tool_calls": [{"name": PROPOSE_DONE, "arguments": {"summary": "at the dock"}}]},
              {"status": 400}]
    with FakeOpenAI(script) as fake:
        recorder = RecordingPlanner(OpenAIPlanner(client_for(fake)), path)
        live = [recorder.turn(request(0)), recorder.turn(request(1, x=5.0))]
        with pytest.raises(LLMRequestRejected):
            recorder.next_turn(request(2, x=5.0))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["kind"], r["turn_index"]) for r in lines] == [("recorded_turn", 0), ("recorded_turn", 1),
                                                            ("recorded_turn", 2)]
    assert lines[0]["request_digest"] == request_digest(request(0))

    # Same decision inputs, different snapshot ids and ages: the same responses, no server.
    replay = ReplayPlanner(path)
    for (response, call), turn, x in zip(live, (0, 1), (1.0, 5.0)):
        assert replay.turn(request(turn, x=x, snapshot_id="snap-other", age=9.9)) == (response, call)
    with pytest.raises(LLMRequestRejected) as info:
        replay.next_turn(request(2, x=5.0))
    assert info.value.call.error["status"] == 400
    with pytest.raises(NondeterminismError, match="turn 3"):
        replay.next_turn(request(3))

    # Sensor noise is not divergence (a replayed robot never stops at exactly the
    # same centimetre); a different decision input is: here the pose went stale.
    noisy = ReplayPlanner(path)
    noisy.next_turn(request(0, x=1.03))
    noisy.next_turn(request(1, x=6.0))
    diverged = ReplayPlanner(path)
    diverged.next_turn(request(0))
    with pytest.raises(NondeterminismError) as info:
        diverged.next_turn(request(1, x=5.0, pose_status="STALE"))
    message = info.value.message
    assert message.startswith("replay diverged at turn 1:")
    lines = message.splitlines()
    assert any(line.startswith("-") and '"pose": "AVAILABLE"' in line for line in lines)
    assert any(line.startswith("+") and '"pose": "STALE"' in line for line in lines)
    assert info.value.details["turn_index"] == 1 and info.value.details["position"] == 1


def test_recording_refuses_to_overwrite_and_replay_rejects_foreign_files(tmp_path):
    path = tmp_path / "turns.jsonl"
    path.write_text('{"kind": "journal_event"}\n')
    with pytest.raises(ReplayFileError):
        RecordingPlanner(object(), path)  # refused before the inner planner is used
    with pytest.raises(ReplayFileError, match="line 1"):
        ReplayPlanner(path)


# --------------------------------------------------------------------------- contract compiler


def test_contract_compiler_gets_a_clean_context_through_chat_complete_fn():
    goal = "Go to office and return to dock"
    places = {"office": Pose2D(x=1.0, y=0.0), "dock": Pose2D(x=0.0, y=0.0)}
    obligations = [
        {"id": "o1", "kind": "at_place", "description": "at office", "params": {"place": "office", "final": False},
         "evidence": ["navigation_receipt"], "source": "Go to office"},
        {"id": "o2", "kind": "at_place", "description": "at dock", "params": {"place": "dock", "final": True},
         "evidence": ["navigation_receipt"], "depends_on": ["o1"], "source": "return to dock"},
    ]
    script = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "office"}}]},
              {"content": json.dumps({"obligations": obligations})},
              {"content": json.dumps({"ok": True, "uncovered": [], "notes": "all covered"})}]
    with FakeOpenAI(script) as fake:
        client = client_for(fake)
        OpenAIPlanner(client).next_turn(request(0))  # a planner turn first, on the same client
        complete = chat_complete_fn(client)
        contract = LLMContractCompiler(complete=complete).compile(goal, mission_id="m", contract_id="c",
                                                                  places=places)
        report = LLMCoverageReviewer(complete=complete).review(goal, contract.obligations)
    assert [o.params["place"] for o in contract.obligations] == ["office", "dock"] and report.ok
    compiler_request = fake.requests[1]
    assert [m["role"] for m in compiler_request["messages"]] == ["system", "user"]
    assert compiler_request["messages"][0]["content"] == CONTRACT_SYSTEM_PROMPT
    assert json.loads(compiler_request["messages"][1]["content"])["goal"] == goal
    sent = json.dumps(compiler_request)
    assert "tools" not in compiler_request and "navigate_to" not in sent and PLANNER_SYSTEM_PROMPT[:40] not in sent
    assert len(complete.calls) == 2 and complete.calls[0].usage == DEFAULT_USAGE


def test_chat_complete_fn_propagates_client_errors():
    with FakeOpenAI([{"status": 401}]) as fake, pytest.raises(LLMRequestRejected):
        LLMContractCompiler(complete=chat_complete_fn(client_for(fake))).compile(
            "Go to dock", mission_id="m", contract_id="c", places={"dock": Pose2D(x=0.0, y=0.0)})


def test_llm_package_is_ros_free():
    code = "import sys, robot_harness.llm; print(sorted(n for n in sys.modules if n.split('.')[0] == 'rclpy'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2], check=True)
    assert out.stdout.strip() == "[]"


def test_a_mission_configured_with_the_llm_contract_compiler_freezes_the_models_contract(monkeypatch):
    """contract.compiler: llm wires LLMContractCompiler to this client inside the real engine."""
    from robot_harness.core.clock import IdGenerator, ManualClock
    from robot_harness.core.config import HarnessConfig
    from robot_harness.compose import mission_runner
    from robot_harness.core.journal import MemoryJournal
    from robot_harness.core.records import EventType, MissionStatus
    from robot_harness.core.skills import default_skills
    from test.unit.fakes import FakeRobot, ScriptPlanner

    obligations = [{"id": "o1", "kind": "at_place", "description": "The robot is at the office.",
                    "params": {"place": "office", "final": True}, "evidence": ["navigation_receipt", "pose_observation"],
                    "source": "Go to the office"}]
    with FakeOpenAI([{"content": json.dumps({"obligations": obligations})}]) as fake:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        clock, ids = ManualClock(), IdGenerator(seed=3)
        robot = FakeRobot(clock=clock)
        config = HarnessConfig(places={"dock": {"x": 0.0, "y": 0.0}, "office": {"x": 3.0, "y": 1.0, "yaw": 1.57}},
                               contract={"compiler": "llm", "llm": {"base_url": fake.base_url, "model": "fake-model"}})
        journal = MemoryJournal(clock=clock, ids=ids)
        journal.setup()
        runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids,
                               skills=default_skills(config.navigation), snapshots=robot, navigation=robot,
                               robot_io=robot, planner=ScriptPlanner([
                                   {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "office"}}]},
                                   {"done": "there"}]))
        out = runner.run("Go to the office.")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    (frozen,) = [e for e in journal.events() if e.type is EventType.CONTRACT_FROZEN]
    assert frozen.payload["contract"]["compiler"] == "llm"
    assert frozen.payload["contract"]["coverage"]["reviewer"] == "rule"  # an independent second pass
    (sent,) = fake.requests
    assert "tools" not in sent and "Go to the office." in json.dumps(sent)


def test_a_model_advises_recovery_only_among_authorized_rungs_and_sees_the_recovery_view_not_the_planner():
    """recovery.advisor: llm inside the real engine; the contract carries the budgets."""
    from robot_harness.core.clock import IdGenerator, ManualClock
    from robot_harness.core.config import HarnessConfig
    from robot_harness.compose import mission_runner
    from robot_harness.core.journal import MemoryJournal
    from robot_harness.core.records import EventType, MissionStatus
    from robot_harness.core.skills import default_skills
    from test.unit.fakes import FakeRobot, ScriptPlanner

    planner_words = "I AM SURE THE ROBOT ARRIVED"
    go = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "office"}}], "text": planner_words}
    script = [{"content": "teleport_home"},   # not an option: ignored, the policy's rung stands
              {"content": "human_handoff"}]   # an authorized option: taken
    with FakeOpenAI(script) as fake:
        clock, ids = ManualClock(), IdGenerator(seed=5)
        robot = FakeRobot(clock=clock, mode="reject")
        config = HarnessConfig(places={"dock": {"x": 0.0, "y": 0.0}, "office": {"x": 3.0, "y": 1.0, "yaw": 1.57}},
                               recovery={"advisor": "llm", "local_replan": 5,
                                         "llm": {"base_url": fake.base_url, "model": "advisor-model"}})
        journal = MemoryJournal(clock=clock, ids=ids)
        journal.setup()
        runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids,
                               skills=default_skills(config.navigation), snapshots=robot, navigation=robot,
                               robot_io=robot, planner=ScriptPlanner([go, go, go]))
        out = runner.run("Go to the office.")
    assert out.status is MissionStatus.WAITING_USER, out.summary
    decisions = [e.payload["decision"] for e in journal.events(types=[EventType.RECOVERY_DECIDED])]
    assert decisions[0]["rung"] == "local_replan" and "not an authorized option" in decisions[0]["advice"]
    assert decisions[1]["rung"] == "human_handoff" and decisions[1]["advice"] == "advisor chose human_handoff"
    (frozen,) = journal.events(types=[EventType.CONTRACT_FROZEN])
    assert frozen.payload["contract"]["recovery_budgets"]["local_replan"] == 5
    sent = json.dumps(fake.requests[0])
    assert "dispatch_rejected" in sent and "local_replan" in sent and "tools" not in fake.requests[0]
    assert planner_words not in sent


def test_the_planner_node_passes_every_client_setting_from_its_parameters(monkeypatch):
    """Backoff and the output cap are node parameters (config/planner.yaml), not hard-coded defaults."""
    import yaml

    from robot_harness.nodes.planner import make_backend

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "planner.yaml").read_text())
    p = dict(params["planner"]["ros__parameters"])
    p.update(backend="llm", model="m", base_url="http://127.0.0.1:9/v1", timeout_s=3.0, max_retries=4,
             backoff_initial_s=0.25, backoff_max_s=2.0, max_tokens=77, temperature=0.3, seed=-1, max_output_chars=500)
    backend, _ = make_backend(p)
    config = backend.client.config
    assert (config.timeout_s, config.max_retries, config.backoff_initial_s, config.backoff_max_s) == (3.0, 4, 0.25, 2.0)
    assert (config.max_tokens, config.temperature, config.seed, config.max_output_chars) == (77, 0.3, None, 500)
