"""The MCP server's progress for harness_await_action: every stage, once, and the verified outcome last,
even when the mission's thread finishes the action while a report is on the wire (CI at stop 24)."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("mcp")

from robot_harness.operator.mcp_server import _Reporter, _Server  # noqa: E402
from robot_harness.operator.session import CallTicket, SessionHost  # noqa: E402


class _Session:
    """The client's end of report_progress; ``during`` runs while one notification is being sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.during: dict[int, Any] = {}

    async def report_progress(self, progress: float, total: float | None, message: str) -> None:
        self.sent.append(message)
        hook = self.during.pop(len(self.sent), None)
        if hook is not None:
            hook()
        await asyncio.sleep(0)


class _Ctx:
    def __init__(self) -> None:
        self.session = _Session()


def _server() -> _Server:
    host = SessionHost(start=lambda planner, caller: "m", stop=lambda m, r: None, new_id=lambda: "id",
                       idle_close_s=60.0)
    return _Server(host, [], decision_timeout_s=1.0)


def _ticket() -> CallTicket:
    t = CallTicket("call-1", "navigate_to", {"place": "spot"}, caller="mcp:test")
    t.action_id = "act-1"
    t.states.append({"state": "ACCEPTED", "reason": "accepted by the backend", "seq": 1, "stamp": 0.0})
    return t


def test_an_outcome_that_lands_during_a_report_is_still_reported_last():
    server, ctx, ticket = _server(), _Ctx(), _ticket()

    def finish() -> None:  # the mission's thread, while "queued" is being sent
        ticket.states.append({"state": "RUNNING", "reason": "", "seq": 2, "stamp": 0.1})
        ticket.stages.append("preconditions held")
        ticket.outcome = {"state": "SUCCEEDED", "reason": "at spot"}

    ctx.session.during[1] = finish
    asyncio.run(asyncio.wait_for(server._follow(ticket, lambda t: t.finished, 5.0, _Reporter(ctx).ticket), 5.0))
    sent = ctx.session.sent
    assert sent[-1] == "act-1: verified outcome SUCCEEDED: at spot", sent
    assert sorted(sent) == sorted(set(sent)), f"a stage sent twice: {sent}"
    assert {"queued", "preconditions held", "act-1: ACCEPTED (accepted by the backend)", "act-1: RUNNING"} <= set(sent)


def test_nothing_is_sent_twice_when_the_ticket_grows_between_counting_and_sending():
    ctx, ticket = _Ctx(), _ticket()
    report = _Reporter(ctx)

    def grow() -> None:
        ticket.stages.append("recorded")
        ticket.states.append({"state": "RUNNING", "reason": "", "seq": 2, "stamp": 0.1})

    ctx.session.during[1] = grow
    asyncio.run(report.ticket(ticket))
    asyncio.run(report.ticket(ticket))
    asyncio.run(report.ticket(ticket))
    assert ctx.session.sent == ["queued", "act-1: ACCEPTED (accepted by the backend)", "recorded", "act-1: RUNNING"]
