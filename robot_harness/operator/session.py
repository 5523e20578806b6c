"""An external caller in the planner's seat: an operator's MCP client drives a session mission.

An MCP client is one more untrusted proposer. It gets no path of its own to
the robot: :class:`ExternalPlanner` is a ``PlannerPort`` whose turns are the
client's tool calls, so each call runs through the same mission loop as a
model's (recorded turn and snapshot, argument validation, fresh-state
preconditions, leases, approvals, receipts, verification of the physical
outcome, bounded recovery). A session mission's contract is one semantic
obligation that nothing satisfies (:class:`SessionContractCompiler`), and
``propose_done`` is refused before it is queued: an external call can never
declare a mission complete.

What the caller learns comes from the journal, not from the runner's return
values: :meth:`ExternalPlanner.observe` is fed every committed event and
fills each :class:`CallTicket` (the standard tool result, then the action's
lifecycle and verified outcome). Threads: the runner calls ``wait_for_call``
and ``next_turn``; any other thread calls ``submit``, ``close`` and the
ticket waits.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ..core.completion import CompletionContract, CoverageReport, EvidenceKind, Obligation, ObligationKind
from ..core.errors import HarnessTimeout, RefusalError, UsageError
from ..core.payloads import (
    ActionPreconditionChecked,
    InteractionRequested,
    InteractionResolved,
    MissionFinished,
    RobotActionOutcome,
    RobotActionStateChanged,
    ToolResultRecorded,
    payload_of,
)
from ..core.ports import PlannerRequest
from ..core.records import EventType, JournalEvent, ModelResponse, ToolCall, ToolResult, ToolResultStatus
from ..core.skills import PROPOSE_DONE, PROPOSE_PLAN

__all__ = [
    "CallTicket",
    "ExternalPlanner",
    "SessionClosed",
    "SessionContractCompiler",
    "SessionHost",
    "SESSION_SOURCE",
    "validate_call",
]

SESSION_SOURCE = "mcp"

_CALLER_CHARS = 64
"""A client's self-declared name goes into the session's goal and owner: bounded."""
_FINISHED_KEPT = 1000
"""Tickets of ended sessions kept for harness_action_status and resources (the journal keeps all)."""
_QUEUE_LIMIT = 16
"""Calls waiting for the runner; a client flooding the session is refused, not buffered without bound."""


def validate_call(name: Any, arguments: Any) -> None:
    """What is refused before anything is queued (or a session opened): raises ``UsageError``.
    Everything else (unknown tools, bad argument values) is the runner's, recorded."""
    if not isinstance(name, str) or not name:
        raise UsageError("a tool call needs a tool name")
    if name == PROPOSE_DONE:
        raise UsageError(
            f"{PROPOSE_DONE}: an operator session cannot declare completion; the independent verifier "
            "rules on missions sent with a goal", tool=name)
    if name == PROPOSE_PLAN:
        raise UsageError(
            f"{PROPOSE_PLAN}: an operator session acts call by call; a plan (whose steps would run in place of "
            "the session's calls, and may end in a done proposal) is a planner's, for missions sent with a goal",
            tool=name)
    if arguments is not None and not isinstance(arguments, Mapping):
        raise UsageError(f"{name}: the arguments must be a JSON object", tool=name)


class SessionClosed(RefusalError):
    """The session mission has ended (or never started); the call was not queued."""

    code = "session_closed"


class SessionContractCompiler:
    """The contract of an operator session: one obligation no evidence can satisfy.

    The verifier rules an unsatisfiable semantic obligation ambiguous, so even
    a done proposal that reached it could not commit success. It is also the
    session's coverage reviewer: a session has no goal text to cover.
    """

    name = "operator_session"

    def review(self, goal: str, obligations: Any) -> CoverageReport:
        return CoverageReport(reviewer=self.name, ok=True, notes="an operator session has no goal to cover")

    def compile(self, goal: str, *, mission_id: str, contract_id: str, places: Mapping[str, Any]) -> CompletionContract:
        return CompletionContract(
            contract_id=contract_id, mission_id=mission_id, goal=goal, compiler=self.name,
            obligations=(Obligation(
                id="o1", kind=ObligationKind.SEMANTIC, source=goal,
                description="an operator-directed session: completion is never declared through it",
                params={"session": SESSION_SOURCE,
                        "question": "Did an operator-directed session complete a task? (never judged: no goal)"},
                evidence=(EvidenceKind.SEMANTIC_JUDGEMENT,),
            ),),
        )


class CallTicket:
    """One external tool call, followed through the journal: its result, then its action's lifecycle."""

    def __init__(self, call_id: str, name: str, arguments: dict[str, Any], *, caller: str) -> None:
        self.call_id = call_id
        self.name = name
        self.arguments = arguments
        self.caller = caller
        self.mission_id = ""
        self.result: ToolResult | None = None
        self.stages: list[str] = ["queued"]
        """What happened before the result: queued, recorded, preconditions checked, waiting for an operator..."""
        self.action_id = ""
        self.states: list[dict[str, Any]] = []
        """The action's lifecycle as journaled: {"state", "reason", "seq", "stamp"}."""
        self.outcome: dict[str, Any] | None = None
        """The verified outcome (ROBOT_ACTION_OUTCOME payload), once known."""
        self.ended = ""
        """Why the ticket will not progress further (the session ended first), or empty."""
        self._changed = threading.Condition()

    @property
    def decided(self) -> bool:
        return self.result is not None or bool(self.ended)

    @property
    def finished(self) -> bool:
        """Nothing more will happen: a verified outcome, an answer other than ``accepted``, or the session ended."""
        if self.ended or self.outcome is not None:
            return True
        return self.result is not None and self.result.status is not ToolResultStatus.ACCEPTED

    def wait(self, predicate: Callable[[CallTicket], bool], timeout_s: float, *, what: str,
             on_change: Callable[[CallTicket], None] | None = None) -> None:
        """Block until ``predicate(self)``; call ``on_change`` after every journal update seen."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HarnessTimeout(f"{self.name} ({self.call_id}): no {what} within {timeout_s:.0f} s",
                                         tool_call_id=self.call_id, timeout_s=timeout_s)
                self._changed.wait(left)
                if on_change is not None:
                    on_change(self)

    def view(self) -> dict[str, Any]:
        """JSON-ready: what the caller can be told now."""
        return {
            "tool_call_id": self.call_id, "name": self.name, "arguments": self.arguments,
            "mission_id": self.mission_id, "stages": list(self.stages),
            "result": self.result.model_dump(mode="json", exclude={"kind", "format_version"}) if self.result else None,
            "action_id": self.action_id, "states": list(self.states), "outcome": self.outcome,
            "ended": self.ended,
        }

    def _update(self, fn: Callable[[], None]) -> None:
        with self._changed:
            fn()
            self._changed.notify_all()


class ExternalPlanner:
    """A ``PlannerPort`` fed by another thread: one queued call per turn."""

    def __init__(self, *, new_id: Callable[[], str], source: str = SESSION_SOURCE,
                 on_change: Callable[[CallTicket], None] | None = None) -> None:
        self._new_id = new_id
        self.source = source
        self._on_change = on_change
        self._lock = threading.Condition()
        self._queue: deque[CallTicket] = deque()
        self._tickets: dict[str, CallTicket] = {}
        self._by_action: dict[str, CallTicket] = {}
        self._closed = ""
        self.mission_id = ""

    # -- the caller's side ----------------------------------------------------

    def submit(self, name: str, arguments: Mapping[str, Any] | None, *, caller: str = "") -> CallTicket:
        """Queue one tool call for the session mission; refused (not queued) when it cannot run."""
        validate_call(name, arguments)
        ticket = CallTicket(self._new_id(), name, dict(arguments or {}), caller=caller[:_CALLER_CHARS])
        with self._lock:
            if self._closed:
                raise SessionClosed(f"the session has ended ({self._closed}); nothing was queued", tool=name)
            if len(self._queue) >= _QUEUE_LIMIT:
                raise RefusalError(f"{len(self._queue)} calls are already waiting; nothing was queued", tool=name,
                              queued=len(self._queue))
            ticket.mission_id = self.mission_id
            self._queue.append(ticket)
            self._tickets[ticket.call_id] = ticket
            self._lock.notify_all()
        return ticket

    def close(self, reason: str) -> None:
        """No more calls: queued ones end unrun, and the runner's wait returns."""
        with self._lock:
            if self._closed:
                return
            self._closed = reason or "closed"
            dropped = list(self._queue)
            self._queue.clear()
            self._lock.notify_all()
        for ticket in dropped:
            ticket._update(lambda t=ticket: setattr(t, "ended", f"not run: {self._closed}"))
            self._changed(ticket)

    def withdraw(self, call_id: str, reason: str) -> bool:
        """Take back a call the runner has not taken yet (its client gave up); True if it was withdrawn."""
        with self._lock:
            ticket = next((t for t in self._queue if t.call_id == call_id), None)
            if ticket is None:
                return False
            self._queue.remove(ticket)
        ticket._update(lambda: setattr(ticket, "ended", f"withdrawn before it ran: {reason}"))
        self._changed(ticket)
        return True

    def abandon(self, reason: str) -> None:
        """The session mission is over however it ended: no ticket waits for anything more."""
        self.close(reason)
        for ticket in self.tickets():
            if not ticket.finished:
                ticket._update(lambda t=ticket: setattr(t, "ended", reason))
                self._changed(ticket)

    @property
    def closed(self) -> str:
        return self._closed

    def ticket(self, call_id: str) -> CallTicket | None:
        return self._tickets.get(call_id)

    def action(self, action_id: str) -> CallTicket | None:
        return self._by_action.get(action_id)

    def tickets(self) -> list[CallTicket]:
        return list(self._tickets.values())

    # -- the runner's side ----------------------------------------------------

    def wait_for_call(self, stop: Callable[[], bool], *, poll_s: float = 0.1) -> None:
        """Block until a call is queued, the session closes, or ``stop()`` (checked every ``poll_s``)."""
        with self._lock:
            while not self._queue and not self._closed and not stop():
                self._lock.wait(poll_s)

    def next_turn(self, request: PlannerRequest) -> ModelResponse:
        with self._lock:
            self.mission_id = request.mission_id
            ticket = self._queue.popleft() if self._queue else None
        if ticket is None:
            return ModelResponse(meta={"source": self.source, "closed": self._closed})
        ticket._update(lambda: setattr(ticket, "mission_id", request.mission_id))
        return ModelResponse(
            tool_calls=(ToolCall(id=ticket.call_id, name=ticket.name, arguments=ticket.arguments),),
            meta={"source": self.source, "caller": ticket.caller},
        )

    def observe(self, event: JournalEvent) -> None:
        """Feed one committed journal event (any mission); tickets it concerns are updated."""
        if event.type is EventType.MISSION_FINISHED and event.mission_id == self.mission_id:
            end = payload_of(event, MissionFinished)
            self.abandon(f"session mission {event.mission_id} finished {end.status}: {end.summary}")
            return
        ticket = self._tickets.get(event.tool_call_id or "") or self._by_action.get(event.robot_action_id or "")
        if ticket is None:
            return
        if event.type is EventType.TOOL_CALL_RECORDED:
            ticket._update(lambda: ticket.stages.append("recorded"))
        elif event.type is EventType.ACTION_PRECONDITION_CHECKED:
            ok = payload_of(event, ActionPreconditionChecked).ok
            ticket._update(lambda: ticket.stages.append("preconditions held" if ok else "preconditions failed"))
        elif event.type is EventType.INTERACTION_REQUESTED:
            asked = payload_of(event, InteractionRequested)
            iid = asked.interaction_id
            who = "an operator" if asked.policy == "operator" else "the session's owner (the operator token)"
            why = f"; nobody can answer yet: it {asked.waiting_on}" if asked.waiting_on else ""
            ticket._update(lambda: ticket.stages.append(f"waiting for an operator ({iid}): asked of {who}{why}"))
        elif event.type is EventType.INTERACTION_RESOLVED:
            answered = payload_of(event, InteractionResolved)
            how = f" (as {answered.answered_as})" if answered.answered_as else ""
            ticket._update(lambda: ticket.stages.append(f"operator answered: {answered.resolution}{how}"))
        elif event.type is EventType.TOOL_RESULT_RECORDED:
            result = payload_of(event, ToolResultRecorded).result()

            def decide() -> None:
                ticket.result = result
                ticket.stages.append(f"result: {result.status.value}")
                if result.action_id:
                    ticket.action_id = result.action_id
            if result.action_id:
                self._by_action[result.action_id] = ticket
            ticket._update(decide)
        elif event.type is EventType.ROBOT_ACTION_STARTED:
            if event.robot_action_id:
                self._by_action[event.robot_action_id] = ticket
                ticket._update(lambda: setattr(ticket, "action_id", event.robot_action_id or ""))
        elif event.type is EventType.ROBOT_ACTION_STATE_CHANGED:
            moved = payload_of(event, RobotActionStateChanged)
            state = {"state": moved.to.value, "reason": moved.reason, "seq": event.seq, "stamp": event.stamp}
            ticket._update(lambda: ticket.states.append(state))
        elif event.type is EventType.ROBOT_ACTION_OUTCOME:
            ended = payload_of(event, RobotActionOutcome)
            outcome = {"state": ended.state.value, "reason": ended.reason, "evidence": ended.evidence,
                       "seq": event.seq}
            ticket._update(lambda: setattr(ticket, "outcome", outcome))
        else:
            return
        self._changed(ticket)

    def _changed(self, ticket: CallTicket) -> None:
        if self._on_change is not None:
            self._on_change(ticket)


class SessionHost:
    """What an operator surface talks to: opens a session mission on the first call, ends it when idle.

    ``start(planner, caller)`` runs a session mission for ``planner`` (in its
    own thread) and returns its mission id, or raises ``RefusalError`` when the
    robot is busy with another mission; ``stop(mission_id, reason)`` ends one
    the way an operator Stop does (journaled). One session at a time: every
    client shares it, as they share the robot.
    """

    def __init__(self, *, start: Callable[[ExternalPlanner, str], str], stop: Callable[[str, str], None],
                 new_id: Callable[[], str], idle_close_s: float,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._start = start
        self._stop = stop
        self._new_id = new_id
        self.idle_close_s = idle_close_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._planner: ExternalPlanner | None = None
        self._last_activity = monotonic()
        self._listeners: list[Callable[[CallTicket], None]] = []
        self._finished: dict[str, CallTicket] = {}

    def add_listener(self, fn: Callable[[CallTicket], None]) -> None:
        """Called (from the mission's thread) whenever a ticket learns something."""
        self._listeners.append(fn)

    def call(self, name: str, arguments: Mapping[str, Any] | None, *, caller: str) -> CallTicket:
        """Queue one call in the session, opening one if none is live; refused calls raise."""
        validate_call(name, arguments)  # a refused call never opens a session
        caller = caller[:_CALLER_CHARS]
        with self._lock:
            planner = self._planner
            if planner is None or planner.closed:
                if planner is not None:
                    self._finished.update({t.call_id: t for t in planner.tickets()})
                    for old in list(self._finished)[:-_FINISHED_KEPT]:
                        del self._finished[old]
                planner = ExternalPlanner(new_id=self._new_id, on_change=self._changed)
                planner.mission_id = self._start(planner, caller)
                self._planner = planner
            self._last_activity = self._monotonic()
            return planner.submit(name, arguments, caller=caller)

    def observe(self, event: JournalEvent) -> None:
        planner = self._planner
        if planner is not None:
            planner.observe(event)

    def withdraw(self, call_id: str, reason: str) -> bool:
        """Take back a queued call whose client gave up (timed out, cancelled, went away)."""
        planner = self._planner
        return planner is not None and planner.withdraw(call_id, reason)

    def find(self, ident: str) -> CallTicket | None:
        """A ticket by tool call id or action id, in the live session or an earlier one."""
        planner = self._planner
        if planner is not None:
            found = planner.ticket(ident) or planner.action(ident)
            if found is not None:
                return found
        return self._finished.get(ident) or next(
            (t for t in self._finished.values() if t.action_id and t.action_id == ident), None)

    @property
    def mission_id(self) -> str:
        """The live session's mission id, or empty."""
        planner = self._planner
        return planner.mission_id if planner is not None and not planner.closed else ""

    def status(self) -> dict[str, Any]:
        planner = self._planner
        live = planner is not None and not planner.closed
        return {
            "session_mission_id": self.mission_id,
            "live": live,
            "closed_reason": planner.closed if planner is not None else "",
            "calls": [t.view() for t in planner.tickets()] if planner is not None else [],
            "idle_close_s": self.idle_close_s,
        }

    def end(self, reason: str, *, only_if_idle: bool = False) -> str:
        """End the live session (journaled like a Stop); returns its mission id or empty.

        With ``only_if_idle`` nothing ends unless the session has been idle for
        ``idle_close_s`` with no call in flight, decided under the lock a new
        call takes, so an arriving call is never cancelled by an idle close.
        """
        with self._lock:
            planner = self._planner
            if planner is None or planner.closed:
                return ""
            if only_if_idle:
                if any(not t.finished for t in planner.tickets()):
                    self._last_activity = self._monotonic()
                    return ""
                if self._monotonic() - self._last_activity < self.idle_close_s:
                    return ""
            mission_id = planner.mission_id
            # Under the lock, so no call slips in after the decision; the Stop first, so the runner,
            # woken by the close, ends the mission CANCELLED rather than as a planner gone silent.
            self._stop(mission_id, reason)
            planner.close(reason)
        return mission_id

    def tick(self) -> str:
        """Close a session idle for ``idle_close_s`` with no call in flight; returns its mission id or empty."""
        return self.end(f"MCP session idle for {self.idle_close_s:.0f} s", only_if_idle=True)

    def _changed(self, ticket: CallTicket) -> None:
        self._last_activity = self._monotonic()
        for fn in list(self._listeners):
            fn(ticket)
