"""Model calls outside the planner (contract compiler, coverage reviewer,
recovery advisor): their failures end the mission on the record, and every
call they make is journaled and counted. Plus the runner's last line of
defence: nothing escapes ``run`` leaving a mission open."""
from __future__ import annotations

import json
import socket

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig
from robot_harness.core.contracts import LLMContractCompiler, LLMCoverageReviewer
from robot_harness.compose import mission_runner
from robot_harness.core.journal import MemoryJournal
from robot_harness.core.records import ActionStatus, EventType, MissionStatus
from robot_harness.core.recovery import RecoveryBudgets, RecoveryPolicy
from robot_harness.core.skills import default_skills
from robot_harness.llm.advisor import LLMRecoveryAdvisor
from robot_harness.llm.client import (
    ChatCompleteFn,
    ChatResult,
    LLMBadResponse,
    LLMCall,
    LLMRateLimited,
    LLMRequestRejected,
    LLMUnavailable,
)

from .fakes import FakeRobot, ScriptPlanner
from .test_engine import GO_OFFICE, PLACES
from .test_engine_authority import BagRecorder

E = EventType
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
OFFICE = [{"id": "o1", "kind": "at_place", "description": "The robot is at the office.",
           "params": {"place": "office", "final": True}, "evidence": ["navigation_receipt", "pose_observation"],
           "source": "go to the office"}]


def record(**kw) -> LLMCall:
    return LLMCall(model="fake-model", base_url="127.0.0.1:9", request={"messages": [{"role": "user", "content": "…"}]},
                   **kw)


class Endpoint:
    """Stands in for a ``ChatClient`` (the model endpoint): each reply in order, with its call record;
    an exception in the script is raised as the client would, and so is an unreachable endpoint's
    error once the script is spent."""

    def __init__(self, script) -> None:
        self.script = list(script)
        self.asked: list[list[dict]] = []

    def complete(self, messages, *, tools=None, tool_choice="auto"):
        self.asked.append(messages)
        step = self.script.pop(0) if self.script else failed(LLMUnavailable)  # past the script: a dead endpoint
        if isinstance(step, Exception):
            raise step
        call = record(response={"choices": [{"message": {"role": "assistant", "content": step}}]}, usage=USAGE,
                      latency_ms=25.0, attempts=1, finish_reason="stop")
        return ChatResult(message={"role": "assistant", "content": step, "tool_calls": []}, finish_reason="stop",
                          call=call)


def failed(cls, status=None):
    call = record(attempts=3, latency_ms=40.0, error={"code": cls.code, "message": "endpoint said no", "status": status},
                  retries=({"attempt": 1, "reason": "x", "status": status, "delay_s": 0.0},
                           {"attempt": 2, "reason": "x", "status": status, "delay_s": 0.0}))
    return cls(f"fake-model at 127.0.0.1:9: {cls.code}", call=call, model="fake-model", endpoint="127.0.0.1:9",
               status=status, attempts=3)


def make(turns, *, config=None, recorder=None, **kw):
    clock = ManualClock()
    ids = IdGenerator(seed=5)
    robot = FakeRobot(clock=clock)
    config = config or HarnessConfig(places=PLACES)
    journal = MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    planner = ScriptPlanner(turns)
    runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids, skills=default_skills(config.navigation),
                           snapshots=robot, planner=planner, navigation=robot, robot_io=robot,
                           recorder=recorder if recorder is not None else BagRecorder(), **kw)
    return runner, robot, journal, planner


def payloads(journal, type_):
    return [e.payload for e in journal.events(types=[type_])]


def assert_closed_as(journal, runner, status):
    """The mission is finished in the journal, the bag is closed, nothing is left open."""
    (finished,) = payloads(journal, E.MISSION_FINISHED)
    assert finished["status"] == status.value
    assert journal.open_missions() == []
    assert runner.recorder.started == [runner.mission_id] and runner.recorder.stopped == [status.value]
    return finished


# ----------------------------------------------------------------- compiler and reviewer failures


@pytest.mark.parametrize("error", [failed(LLMUnavailable), failed(LLMRateLimited, 429),
                                   failed(LLMRequestRejected, 401), failed(LLMBadResponse, 200)],
                         ids=lambda e: e.code)
def test_a_compiler_whose_model_fails_blocks_the_mission_with_the_error_and_the_call_on_record(error):
    endpoint = Endpoint([error])
    runner, robot, journal, planner = make([GO_OFFICE], contract_compiler=LLMContractCompiler(ChatCompleteFn(endpoint)))
    out = runner.run("go to the office")

    assert out.status is MissionStatus.BLOCKED
    assert out.summary.startswith("no completion contract for this goal, nothing was planned: ")
    assert error.code in out.summary and out.contract is None
    assert [e.type for e in journal.events()] == [E.MISSION_STARTED, E.CONTRACT_FROZEN, E.MISSION_FINISHED]
    (frozen,) = payloads(journal, E.CONTRACT_FROZEN)
    assert "contract" not in frozen
    assert frozen["error"]["code"] == error.code and frozen["error"]["type"] == type(error).__name__
    assert frozen["error"]["details"]["endpoint"] == "127.0.0.1:9"
    assert frozen["llm_calls"] == [error.call.model_dump(mode="json")]
    finished = assert_closed_as(journal, runner, MissionStatus.BLOCKED)
    assert finished["model_usage"]["llm_calls"] == 1 and finished["model_usage"]["llm_calls_by_role"] == {"contract": 1}
    assert out.model_usage == finished["model_usage"]
    assert planner.requests == [] and robot.goals == [] and len(endpoint.asked) == 1


def test_a_compiler_that_raises_anything_else_is_recorded_the_same_way():
    class Broken:
        name = "broken"

        def compile(self, goal, *, mission_id, contract_id, places):
            raise KeyError("obligations")

    runner, robot, journal, planner = make([GO_OFFICE], contract_compiler=Broken())
    out = runner.run("go to the office")
    assert out.status is MissionStatus.BLOCKED and "KeyError" in out.summary
    (frozen,) = payloads(journal, E.CONTRACT_FROZEN)
    assert frozen["error"]["code"] == "unexpected_error" and frozen["llm_calls"] == []
    assert_closed_as(journal, runner, MissionStatus.BLOCKED)
    assert planner.requests == []


def test_a_failed_call_the_compiler_did_not_keep_is_taken_from_the_error():
    error = failed(LLMUnavailable)

    class Direct:
        name = "direct"

        def compile(self, goal, *, mission_id, contract_id, places):
            raise error

    runner, _, journal, _ = make([GO_OFFICE], contract_compiler=Direct())
    runner.run("go to the office")
    (frozen,) = payloads(journal, E.CONTRACT_FROZEN)
    assert frozen["llm_calls"] == [error.call.model_dump(mode="json")]


def test_a_coverage_reviewer_whose_model_fails_blocks_the_mission_too():
    compiler = LLMContractCompiler(ChatCompleteFn(Endpoint([json.dumps({"obligations": OFFICE})])))
    reviewer = LLMCoverageReviewer(ChatCompleteFn(Endpoint([failed(LLMUnavailable)])))
    runner, _, journal, planner = make([GO_OFFICE], contract_compiler=compiler, coverage_reviewer=reviewer)
    out = runner.run("go to the office")
    assert out.status is MissionStatus.BLOCKED and "llm_unavailable" in out.summary
    (frozen,) = payloads(journal, E.CONTRACT_FROZEN)
    # both calls are on record: the compiler's answer and the reviewer's failure
    assert [c["error"]["code"] if c["error"] else "ok" for c in frozen["llm_calls"]] == ["ok", "llm_unavailable"]
    finished = assert_closed_as(journal, runner, MissionStatus.BLOCKED)
    assert finished["model_usage"]["total_tokens"] == USAGE["total_tokens"]
    assert planner.requests == []


def test_the_llm_compiler_pointed_at_a_dead_endpoint_blocks_the_mission(monkeypatch):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = HarnessConfig(places=PLACES, contract={"compiler": "llm", "llm": {
        "base_url": f"http://127.0.0.1:{port}/v1", "model": "fake-model", "max_retries": 1, "backoff_initial_s": 0.0,
        "timeout_s": 2.0}})
    runner, robot, journal, planner = make([GO_OFFICE], config=config)
    out = runner.run("go to the office")
    assert out.status is MissionStatus.BLOCKED and "llm_unavailable" in out.summary, out.summary
    (frozen,) = payloads(journal, E.CONTRACT_FROZEN)
    (call,) = frozen["llm_calls"]
    assert call["error"]["code"] == "llm_unavailable" and call["attempts"] == 2 and len(call["retries"]) == 1
    assert call["base_url"] == f"127.0.0.1:{port}" and "go to the office" in json.dumps(call["request"])
    assert_closed_as(journal, runner, MissionStatus.BLOCKED)
    assert planner.requests == [] and robot.goals == []


# ----------------------------------------------------------------- every model call is journaled and counted


def test_the_compilers_and_reviewers_model_calls_are_journaled_with_the_contract_and_counted():
    compiler_model = Endpoint([json.dumps({"obligations": OFFICE})])
    reviewer_model = Endpoint([json.dumps({"ok": True, "uncovered": [], "notes": ""})])
    runner, _, journal, _ = make([GO_OFFICE, {"done": "there"}],
                                 contract_compiler=LLMContractCompiler(ChatCompleteFn(compiler_model)),
                                 coverage_reviewer=LLMCoverageReviewer(ChatCompleteFn(reviewer_model)))
    out = runner.run("go to the office")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    (frozen,) = payloads(journal, E.CONTRACT_FROZEN)
    assert frozen["contract"]["compiler"] == "llm" and frozen["contract"]["coverage"]["reviewer"] == "llm-coverage"
    calls = frozen["llm_calls"]
    assert len(calls) == 2 and all(c["kind"] == "llm_call" and c["usage"] == USAGE for c in calls)
    assert "The robot is at the office." in json.dumps(calls[0]["response"])
    usage = payloads(journal, E.MISSION_FINISHED)[0]["model_usage"]
    assert usage["llm_calls"] == 2 and usage["llm_calls_by_role"] == {"contract": 2}
    assert usage["total_tokens"] == 2 * USAGE["total_tokens"] and usage["llm_latency_ms"] == 50.0
    assert out.model_usage == usage


def test_the_recovery_advisors_model_calls_are_journaled_with_its_decision_and_counted():
    advisor_model = Endpoint(["adjust_view"])
    policy = RecoveryPolicy(RecoveryBudgets(), advisor=LLMRecoveryAdvisor(advisor_model))
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "there"}], recovery=policy)
    robot.mode = "abort"
    runner.run("go to the office")
    (decided, *_) = payloads(journal, E.RECOVERY_DECIDED)
    assert decided["decision"]["advice"] == "advisor chose adjust_view"
    (call,) = decided["llm_calls"]
    assert call["usage"] == USAGE and "adjust_view" in json.dumps(call["response"])
    assert json.loads(advisor_model.asked[0][1]["content"])["failure"]["failure_kind"] == "action_failed"
    # a failed advisor call is on record too, with the decision the policy took without it
    later = payloads(journal, E.RECOVERY_DECIDED)[1:]
    assert later and all(len(d["llm_calls"]) == 1 for d in later)
    assert later[0]["llm_calls"][0]["error"]["code"] == "llm_unavailable"
    assert later[0]["decision"]["advice"].startswith("advisor failed: LLMUnavailable")
    usage = payloads(journal, E.MISSION_FINISHED)[0]["model_usage"]
    assert usage["llm_calls_by_role"] == {"recovery": len(advisor_model.asked)} == {"recovery": 1 + len(later)}
    assert usage["llm_calls"] == len(advisor_model.asked)


# ----------------------------------------------------------------- nothing escapes run() leaving a mission open


@pytest.mark.parametrize("broken", ["once", "for good"])
def test_an_unexpected_error_mid_motion_stops_the_robot_and_finishes_the_mission_unknown(broken):
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "there"}])
    real_poll, polls = robot.poll, {"n": 0}

    def poll(timeout_s):
        polls["n"] += 1
        if polls["n"] == 2 or (broken == "for good" and polls["n"] > 2):
            raise RuntimeError("navigation adapter bug")
        return real_poll(timeout_s)

    robot.poll = poll
    out = runner.run("go to the office")
    assert out.status is MissionStatus.UNKNOWN
    assert "harness internal error" in out.summary and "navigation adapter bug" in out.summary
    assert "was asked to stop" in out.summary
    (goal,) = robot.goals
    assert robot.cancels == [goal["goal_id"]]
    (action,) = out.actions
    assert action.state is ActionStatus.UNKNOWN
    # the cut-short action has its receipt, with its actual terminal state
    (receipt,) = [p["receipt"] for p in payloads(journal, E.RECEIPT_RECORDED) if p["receipt"]["physical"]]
    assert receipt["status"] == "UNKNOWN" and receipt["action_id"] == action.action_id
    assert receipt["result"]["state"] == "UNKNOWN" and receipt["outcome_snapshot_id"] == ""
    assert receipt["pose_at_end"] is None
    if broken == "once":  # the cancel was confirmed: the base is free
        assert receipt["result"]["backend_status"] == "canceled"
        assert [r["why"] for r in payloads(journal, E.LEASE_RELEASED)] == ["confirmed_terminal"]
    else:  # nobody confirmed the stop: the base stays blocked
        assert "did not confirm" in receipt["result"]["reason"]
        assert payloads(journal, E.LEASE_RELEASED) == []
        assert [b["resource"] for b in payloads(journal, E.LEASE_BLOCKED)] == ["base"]
    finished = assert_closed_as(journal, runner, MissionStatus.UNKNOWN)
    assert finished["internal_error"]["type"] == "RuntimeError"


def test_an_unexpected_error_from_the_planner_finishes_the_mission_unknown():
    class Exploding:
        def next_turn(self, request):
            raise ValueError("planner adapter bug")

    runner, robot, journal, _ = make([])
    runner.planner = Exploding()
    out = runner.run("go to the office")
    assert out.status is MissionStatus.UNKNOWN and "ValueError: planner adapter bug" in out.summary
    finished = assert_closed_as(journal, runner, MissionStatus.UNKNOWN)
    assert finished["internal_error"] == {"code": "unexpected_error", "message": "ValueError: planner adapter bug",
                                          "type": "ValueError"}
    assert robot.goals == []


def test_a_killed_process_is_not_an_error_to_handle():
    """A crash (SystemExit, KeyboardInterrupt) leaves the mission open for restart reconciliation."""
    runner, robot, journal, _ = make([GO_OFFICE])

    def die(timeout_s):
        raise SystemExit("killed")

    robot.on_send = lambda r: setattr(r, "poll", die)
    with pytest.raises(SystemExit):
        runner.run("go to the office")
    assert journal.open_missions() == [runner.mission_id]
