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
from robot_harness.core.engine import MissionRunner
from robot_harness.core.errors import HarnessTimeout, RefusalError, UsageError
from robot_harness.core.external import CallTicket, ExternalPlanner, SessionClosed, SessionContractCompiler
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
        self.runner = MissionRunner(
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
    assert ticket.action_id and ticket.outcome is None or ticket.outcome is not None
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
