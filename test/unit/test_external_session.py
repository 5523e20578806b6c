"""An operator session (the MCP path) through the real mission loop, in-process on the simulated robot.

The external caller sits in the planner's seat: its calls are journaled, checked
and verified like a model's, it learns outcomes from the journal, and it can
never declare the mission complete.
"""
from __future__ import annotations

import threading
from typing import Any

import pytest

from robot_harness.core.clock import IdGenerator
from robot_harness.core.config import load_harness_config
from robot_harness.compose import mission_runner
from robot_harness.core.errors import HarnessTimeout, RefusalError, UsageError
from robot_harness.operator.session import (
    CallTicket,
    ExternalPlanner,
    SessionClosed,
    SessionContractCompiler,
    SessionHost,
)
from robot_harness.core.journal import MemoryJournal
from robot_harness.core.records import EventType, MissionStatus, ToolResultStatus
from robot_harness.core.scenario import Scenario
from robot_harness.core.skills import default_skills
from robot_harness.eval.simports import SimPorts
from robot_harness.eval.modes import sim_config

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 2.0, "y": 1.0, "yaw": 0.5}}
WAIT_S = 20.0


class Session:
    """A session mission running in a thread, as the supervisor runs one."""

    def __init__(self, tmp_path: Any, faults: list[dict[str, Any]] | None = None) -> None:
        sc = Scenario.model_validate({
            "goal": "unused", "world": {"places": PLACES, "start": "dock"},
            "robot": {"speed": 3.0, "faults": faults or []}, "planner": {"turns": []},
        })
        self.ports = SimPorts(config=sim_config(sc), artifacts_dir=tmp_path / "artifacts")
        config = load_harness_config(overrides=sc.harness_config())
        ids = IdGenerator(3)
        self.journal = MemoryJournal(clock=self.ports.clock, ids=ids)
        self.journal.setup()
        self.changes: list[str] = []
        self.planner = ExternalPlanner(new_id=lambda: ids.new("mcp"), on_change=lambda t: self.changes.append(t.call_id))
        self.runner = mission_runner(
            config=config, journal=self.journal, clock=self.ports.clock, ids=ids,
            skills=default_skills(config.navigation), snapshots=self.ports, planner=self.planner,
            navigation=self.ports, robot_io=self.ports, sleep=self.ports.sleep,
            on_update=lambda stage, action, event: event is not None and self.planner.observe(event),
            contract_compiler=SessionContractCompiler(), coverage_reviewer=SessionContractCompiler(),
        )
        self.planner.mission_id = "session-1"
        self.outcome: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.outcome = self.runner.run("MCP operator session (test client)", mission_id="session-1")

    def call(self, name: str, arguments: dict[str, Any]) -> CallTicket:
        ticket = self.planner.submit(name, arguments, caller="test")
        ticket.wait(lambda t: t.decided, WAIT_S, what="result")
        return ticket

    def end(self, reason: str = "client closed the session") -> Any:
        self.runner.request_stop(reason)
        self.planner.close(reason)
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()
        return self.outcome


def test_a_call_is_accepted_then_its_verified_outcome_arrives_and_the_session_never_succeeds(tmp_path) -> None:
    s = Session(tmp_path)
    ticket = s.call("navigate_to", {"place": "spot"})
    assert ticket.result is not None and ticket.result.status is ToolResultStatus.ACCEPTED
    assert ticket.action_id.startswith("act-")
    ticket.wait(lambda t: t.outcome is not None, WAIT_S, what="outcome")
    assert ticket.outcome["state"] == "SUCCEEDED", ticket.view()
    states = [st["state"] for st in ticket.states]
    assert states[-2:] == ["VERIFYING", "SUCCEEDED"] and "RUNNING" in states
    assert {"recorded", "preconditions held", "result: accepted"} <= set(ticket.stages)
    assert s.changes.count(ticket.call_id) >= len(ticket.states) + 2

    pose = s.call("get_pose", {})
    assert pose.result.status is ToolResultStatus.OK and pose.finished
    with pytest.raises(UsageError, match="cannot declare completion"):
        s.planner.submit("propose_done", {"summary": "I reached the spot"})
    with pytest.raises(UsageError, match="acts call by call"):  # a plan's steps would replace the client's calls
        s.planner.submit("propose_plan", {"steps": [{"skill": "navigate_to", "arguments": {"place": "spot"}},
                                                    {"skill": "propose_done", "arguments": {"summary": "x"}}]})

    out = s.end()
    assert out.status is MissionStatus.CANCELLED and "client closed the session" in out.summary
    events = s.journal.events(mission_id="session-1")
    started = next(e for e in events if e.type is EventType.MISSION_STARTED)
    assert started.payload["goal"].startswith("MCP operator session")
    contract = next(e for e in events if e.type is EventType.CONTRACT_FROZEN).payload["contract"]
    assert contract["compiler"] == "operator_session" and [o["kind"] for o in contract["obligations"]] == ["semantic"]
    calls = [e.payload["name"] for e in events if e.type is EventType.TOOL_CALL_RECORDED]
    assert calls == ["navigate_to", "get_pose"]
    responses = [e.payload["response"]["meta"] for e in events if e.type is EventType.MODEL_RESPONSE_RECORDED]
    assert all(m.get("source") == "mcp" for m in responses)
    assert not any(e.type is EventType.COMMIT_RECORDED for e in events)
    with pytest.raises(SessionClosed):
        s.planner.submit("get_pose", {})


def test_a_refused_call_moves_nothing_and_says_why(tmp_path) -> None:
    s = Session(tmp_path)
    bad = s.call("navigate_to", {"place": "the moon"})
    assert bad.result.status in (ToolResultStatus.ERROR, ToolResultStatus.REJECTED)
    assert "moon" in str(bad.result.model_dump()) and not bad.action_id and bad.finished
    unknown = s.call("teleport", {})
    assert unknown.result.status is ToolResultStatus.ERROR and unknown.result.error["code"] == "unknown_tool"
    assert not [ev for ev in s.ports.world.events if ev.event.value == "received"]  # no goal reached the robot
    s.end()


def test_a_backend_rejection_is_the_immediate_answer(tmp_path) -> None:
    s = Session(tmp_path, faults=[{"kind": "reject", "on_goal": 1}])
    ticket = s.call("navigate_to", {"place": "spot"})
    assert ticket.result.status is ToolResultStatus.REJECTED, ticket.view()
    assert "preconditions held" in ticket.stages and ticket.finished
    assert s.end().status is MissionStatus.CANCELLED


def test_queue_bounds_and_bad_arguments_are_refused_before_queueing() -> None:
    planner = ExternalPlanner(new_id=iter(f"c{i}" for i in range(100)).__next__)
    with pytest.raises(UsageError):
        planner.submit("navigate_to", ["not", "an", "object"])  # type: ignore[arg-type]
    for _ in range(16):
        planner.submit("get_pose", {})
    with pytest.raises(RefusalError, match="already waiting"):
        planner.submit("get_pose", {})
    planner.close("test over")
    assert all(t.ended.startswith("not run") for t in planner.tickets())
    with pytest.raises(HarnessTimeout):
        CallTicket("x", "get_pose", {}, caller="").wait(lambda t: t.decided, 0.05, what="result")


def test_a_stop_before_the_session_mission_starts_cancels_it_and_nothing_runs(tmp_path) -> None:
    sc = Scenario.model_validate({"goal": "unused", "world": {"places": PLACES, "start": "dock"},
                                  "robot": {"speed": 3.0}, "planner": {"turns": []}})
    ports = SimPorts(config=sim_config(sc), artifacts_dir=tmp_path / "artifacts")
    config = load_harness_config(overrides=sc.harness_config())
    ids = IdGenerator(4)
    journal = MemoryJournal(clock=ports.clock, ids=ids)
    journal.setup()
    planner = ExternalPlanner(new_id=lambda: ids.new("mcp"))
    planner.mission_id = "session-2"
    runner = mission_runner(config=config, journal=journal, clock=ports.clock, ids=ids,
                           skills=default_skills(config.navigation), snapshots=ports, planner=planner,
                           navigation=ports, robot_io=ports, sleep=ports.sleep,
                           on_update=lambda st, a, e: e is not None and planner.observe(e),
                           contract_compiler=SessionContractCompiler(), coverage_reviewer=SessionContractCompiler())
    ticket = planner.submit("navigate_to", {"place": "spot"})
    runner.request_stop("operator stop while the session was starting")
    out = runner.run("MCP operator session (test)", mission_id="session-2")
    assert out.status is MissionStatus.CANCELLED and "while the session was starting" in out.summary
    assert not ports.world.events and ticket.finished and ticket.result is None
    # The Stop was for that mission only: the runner's next mission is not cancelled by it.
    assert runner.stop_requested is None


def test_an_idle_session_closes_but_never_under_a_call_in_flight() -> None:
    now = [0.0]
    stopped: list[tuple[str, str]] = []
    started: list[ExternalPlanner] = []

    def start(planner: ExternalPlanner, caller: str) -> str:
        started.append(planner)
        return f"session-{len(started)}"
    host = SessionHost(start=start, stop=lambda m, r: stopped.append((m, r)), new_id=iter(f"c{i}" for i in range(99)).__next__,
                       idle_close_s=10.0, monotonic=lambda: now[0])
    with pytest.raises(UsageError):
        host.call("propose_done", {"summary": "done"}, caller="x")
    with pytest.raises(UsageError):
        host.call("propose_plan", {"steps": []}, caller="x")
    assert started == [], "a refused call opens no session"
    ticket = host.call("get_pose", {}, caller="c" * 500)
    assert len(ticket.caller) == 64
    now[0] = 100.0
    assert host.tick() == "" and stopped == [], "a call in flight keeps the session open"
    started[0].withdraw(ticket.call_id, "test")
    assert ticket.finished and "withdrawn" in ticket.ended
    assert host.tick() == "", "activity just now"
    now[0] = 115.0
    assert host.tick() == "session-1" and stopped == [("session-1", "MCP session idle for 10 s")]
    assert started[0].closed
    host.call("get_pose", {}, caller="c")
    assert len(started) == 2 and host.mission_id == "session-2", "the next call opens a new session"
