"""The closed loop, ROS-free: observe -> model turn -> tool calls -> fresh-state
check -> dispatch -> correlated tracking -> fresh snapshot -> verified outcome
-> next turn.

``MissionRunner.run`` is synchronous; it talks to the world only through the
ports in ``ports`` and to storage only through the ``Journal``. It creates no
threads and reads time only from the injected clock. Every loop has a budget:
turns, silent turns, tool calls per turn, mission time, action time.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from .clock import Clock, IdGenerator
from .config import HarnessConfig
from .context import compile_planner_context, context_size
from .errors import HarnessError, HarnessTimeout, JournalWriteError, UsageError
from .journal import Journal
from .lifecycle import ManagedAction
from .outcome import BackendTerminal, check_navigation_outcome
from .ports import NavigationPort, PlannerPort, PlannerRequest, RobotIO, SnapshotPort
from .preconditions import check_preconditions
from .records import (
    ActionStatus,
    ActionView,
    EventDraft,
    EventType,
    JournalEvent,
    MissionStatus,
    ModelResponse,
    Pose2D,
    RuntimeEvent,
    ToolCall,
    ToolResult,
    ToolResultStatus,
    WorldSnapshot,
)
from .skills import NavigateToArgs, Skill, SkillRegistry, ToolEnv, resolve_target

__all__ = ["MissionOutcome", "MissionRunner", "MAX_GOAL_CHARS"]

MAX_GOAL_CHARS = 2000
_TERMINAL_STATUS = {
    "succeeded": BackendTerminal.SUCCEEDED,
    "aborted": BackendTerminal.ABORTED,
    "canceled": BackendTerminal.CANCELED,
}


class MissionOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: str = "mission_outcome"
    mission_id: str
    status: MissionStatus
    summary: str
    evidence_seqs: tuple[int, ...] = ()
    evidence_ids: tuple[str, ...] = ()
    tool_calls: tuple[dict[str, Any], ...] = ()
    actions: tuple[ActionView, ...] = ()


class _Stop(Exception):
    """Internal: the mission ends now with this status."""

    def __init__(self, status: MissionStatus, summary: str) -> None:
        super().__init__(summary)
        self.status = status
        self.summary = summary


class MissionRunner:
    """Runs one mission at a time through the closed loop."""

    def __init__(
        self,
        *,
        config: HarnessConfig,
        journal: Journal,
        clock: Clock,
        ids: IdGenerator,
        skills: SkillRegistry,
        snapshots: SnapshotPort,
        planner: PlannerPort,
        navigation: NavigationPort,
        robot_io: RobotIO | None = None,
        on_update: Callable[[str, ActionView | None, JournalEvent | None], None] | None = None,
    ) -> None:
        self.config = config
        self.journal = journal
        self.clock = clock
        self.ids = ids
        self.skills = skills
        self.snapshots = snapshots
        self.planner = planner
        self.navigation = navigation
        self.robot_io = robot_io
        self._on_update = on_update
        self._places = {k: Pose2D(**v) for k, v in config.places.items()}
        self._tool_specs = tuple(skills.tool_specs())
        self._stop_requested: str | None = None
        self._physical_blocked: str | None = None
        self._active: ManagedAction | None = None
        # per-mission state
        self._mission_id = ""
        self._actions: list[ManagedAction] = []
        self._calls: list[dict[str, Any]] = []
        self._evidence: list[int] = []
        self._deadline = math.inf

    # -- public ---------------------------------------------------------------

    @property
    def mission_id(self) -> str:
        """The mission this runner is running (or last ran); empty before the first."""
        return self._mission_id

    @property
    def physical_blocked(self) -> str | None:
        """Why new physical work is refused (a journal write failed), or None."""
        return self._physical_blocked

    def request_stop(self, reason: str = "stop requested") -> None:
        """Ask the running mission to stop at its next check (thread-safe flag)."""
        self._stop_requested = reason

    def run(self, goal: str, *, mission_id: str = "") -> MissionOutcome:
        if not isinstance(goal, str) or not goal.strip():
            raise UsageError("a mission needs a non-empty natural-language goal")
        if len(goal) > MAX_GOAL_CHARS:
            raise UsageError(f"goal is {len(goal)} characters; the limit is {MAX_GOAL_CHARS}")
        self._mission_id = mission_id or self.ids.new("mission")
        self._actions, self._calls, self._evidence = [], [], []
        self._stop_requested = None
        self._deadline = self.clock.monotonic() + self.config.limits.mission_timeout_s
        try:
            self._append(EventType.MISSION_STARTED, payload={
                "goal": goal,
                "config": self.config.model_dump(mode="json"),
                "tools": [s.name for s in self.skills],
            })
            # A successful write clears an earlier storage failure.
            self._physical_blocked = None
        except JournalWriteError as exc:
            self._physical_blocked = str(exc)
            return self._outcome(MissionStatus.BLOCKED, f"journal unavailable, mission not started: {exc}")
        try:
            status, summary = self._loop(goal)
        except _Stop as stop:
            status, summary = stop.status, stop.summary
            if self._active is not None and not self._active.terminal:
                # e.g. the snapshot source died mid-action: do not leave the robot driving unsupervised
                summary += f"; in-flight action {self._abandon_active()} was asked to stop"
        except JournalWriteError as exc:
            self._physical_blocked = str(exc)
            self._abandon_active()
            return self._outcome(MissionStatus.BLOCKED, f"journal write failed; no new physical work: {exc}")
        try:
            ev = self._append(EventType.MISSION_FINISHED, payload={
                "status": status.value, "summary": summary, "evidence_seqs": list(self._evidence),
            })
            self._evidence.append(ev.seq)
        except JournalWriteError as exc:
            self._physical_blocked = str(exc)
            return self._outcome(MissionStatus.BLOCKED, f"{summary} (final record not persisted: {exc})")
        return self._outcome(status, summary)

    # -- the loop -------------------------------------------------------------

    def _loop(self, goal: str) -> tuple[MissionStatus, str]:
        limits = self.config.limits
        pending: list[RuntimeEvent] = []
        last_results: list[ToolResult] = []
        silent = 0
        for turn_index in range(limits.max_turns):
            self._check_budget()
            self._update("planning")
            snap, snap_draft = self._capture("before_model_turn", defer=True)
            turn_id = self.ids.new("turn")
            ctx = compile_planner_context(
                goal=goal,
                turn_index=turn_index,
                snapshot=snap,
                places=sorted(self._places),
                runtime_events=pending,
                last_results=last_results,
                byte_cap=self.config.context_byte_cap,
                snapshot_byte_cap=self.config.snapshot_byte_cap,
            )
            # The snapshot, the turn and what it delivers to the model: one commit.
            self._append_many([
                snap_draft,
                self._draft(EventType.MODEL_TURN_STARTED, model_turn_id=turn_id, snapshot_id=snap.snapshot_id, payload={
                    "turn_index": turn_index, "context_bytes": context_size(ctx), "context": ctx,
                }),
                *(self._draft(EventType.RUNTIME_EVENT_DELIVERED, model_turn_id=turn_id, tool_call_id=ev.tool_call_id,
                              robot_action_id=ev.action_id, payload=ev.model_dump(mode="json")) for ev in pending),
            ])
            pending = []
            response, planner_error = self._ask_planner(turn_id, turn_index, ctx)
            # The response and every tool call in it are recorded in one commit, before any call runs.
            self._append_many([
                self._draft(EventType.MODEL_RESPONSE_RECORDED, model_turn_id=turn_id, snapshot_id=snap.snapshot_id, payload={
                    "response": response.model_dump(mode="json"), "error": planner_error,
                }),
                *(self._draft(EventType.TOOL_CALL_RECORDED, model_turn_id=turn_id, tool_call_id=call.id,
                              snapshot_id=snap.snapshot_id,
                              payload={"name": call.name, "arguments": call.arguments, "index": index})
                  for index, call in enumerate(response.tool_calls)),
            ])
            if response.silent:
                silent += 1
                if silent >= limits.max_silent_turns:
                    why = f"planner error: {planner_error}" if planner_error else "the planner stopped proposing actions"
                    return MissionStatus.UNKNOWN, f"{why}; no done proposal, so the goal is not established"
                continue
            silent = 0
            last_results, action = self._run_tool_calls(turn_id, snap, response.tool_calls)
            if action is not None:
                pending.append(self._supervise(action))
            if response.done is not None:
                return self._judge_done(response.done)
        return MissionStatus.UNKNOWN, f"turn budget of {limits.max_turns} exhausted without a verified done"

    def _ask_planner(self, turn_id: str, turn_index: int, ctx: dict[str, Any]) -> tuple[ModelResponse, str | None]:
        request = PlannerRequest(
            mission_id=self._mission_id, model_turn_id=turn_id, turn_index=turn_index,
            context=ctx, tools=self._tool_specs,
        )
        try:
            return self.planner.next_turn(request), None
        except HarnessError as exc:
            return ModelResponse(), f"{exc.code}: {exc.message}"

    # -- tool calls -----------------------------------------------------------

    def _run_tool_calls(
        self, turn_id: str, decision: WorldSnapshot, calls: Sequence[ToolCall]
    ) -> tuple[list[ToolResult], ManagedAction | None]:
        results: list[ToolResult] = []
        dispatched: ManagedAction | None = None
        stop_reason: str | None = None
        seen: set[str] = set()
        limit = self.config.limits.max_tool_calls_per_turn
        for index, call in enumerate(calls):
            action: ManagedAction | None = None
            if call.id in seen:
                result = self._error(call, "duplicate_tool_call_id", f"tool call id {call.id!r} was already used in this turn")
            elif index >= limit:
                result = ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED,
                                    content={"reason": f"more than {limit} tool calls in one turn"})
            elif stop_reason is not None:
                result = ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.SKIPPED,
                                    content={"reason": stop_reason})
            else:
                result, action = self._run_one(turn_id, decision, call, physical_done=dispatched is not None)
                if result.status is ToolResultStatus.PRECONDITION_CHANGED:
                    stop_reason = "an earlier call in this turn hit precondition_changed; decide again on the fresh snapshot"
            seen.add(call.id)
            results.append(result)
            if action is not None:
                dispatched = action
            self._append(EventType.TOOL_RESULT_RECORDED, model_turn_id=turn_id, tool_call_id=call.id,
                         robot_action_id=result.action_id or "", payload=result.model_dump(mode="json"))
            self._calls.append({
                "id": call.id, "name": call.name, "arguments": call.arguments,
                "result": result.model_dump(mode="json", exclude={"kind", "format_version"}),
                "action_id": result.action_id,
            })
        return results, dispatched

    def _run_one(
        self, turn_id: str, decision: WorldSnapshot, call: ToolCall, *, physical_done: bool
    ) -> tuple[ToolResult, ManagedAction | None]:
        try:
            skill = self.skills.get(call.name)
            args = skill.validate(call.arguments)
        except UsageError as exc:
            return self._error(call, exc.code, exc.message, exc.details), None
        if skill.physical:
            if physical_done:
                return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED, content={
                    "reason": "at most one new managed physical action per decision step; propose it again next turn",
                }), None
            return self._dispatch(turn_id, decision, call, skill, args)
        env = ToolEnv(places=self._places, robot_io=self.robot_io, snapshot=decision)
        assert skill.handler is not None
        try:
            content = skill.handler(env, args)
        except HarnessError as exc:
            return self._error(call, exc.code, exc.message, exc.details), None
        except Exception as exc:  # a tool's own bug or I/O failure: one recorded error result
            return self._error(call, "tool_exception", f"{type(exc).__name__}: {exc}"), None
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.OK, content=content), None

    @staticmethod
    def _error(call: ToolCall, code: str, message: str, details: dict[str, Any] | None = None) -> ToolResult:
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.ERROR,
                          error={"code": code, "message": message, **(details or {})})

    # -- managed physical actions ---------------------------------------------

    def _dispatch(
        self, turn_id: str, decision: WorldSnapshot, call: ToolCall, skill: Skill, args: Any
    ) -> tuple[ToolResult, ManagedAction | None]:
        assert skill.managed is not None and isinstance(args, NavigateToArgs)
        nav = skill.managed.navigation
        if self._physical_blocked:
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED,
                              content={"reason": f"physical work blocked: {self._physical_blocked}"}), None
        try:
            target_decision = resolve_target(args, self._places)
        except UsageError as exc:
            return self._error(call, exc.code, exc.message, exc.details), None
        self._update("checking")
        fresh, snap_draft = self._capture("pre_dispatch", defer=True)
        target_now = resolve_target(args, self._places)
        report = check_preconditions(
            nav.preconditions, decision=decision, fresh=fresh,
            target_at_decision=target_decision, target_now=target_now,
            active_actions=[a.view() for a in self._actions],
        )
        check_draft = self._draft(EventType.ACTION_PRECONDITION_CHECKED, model_turn_id=turn_id, tool_call_id=call.id,
                                  snapshot_id=fresh.snapshot_id, payload=report.model_dump(mode="json"))
        if not report.ok:
            self._append_many([snap_draft, check_draft])
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.PRECONDITION_CHANGED, content={
                "failed": [c.model_dump() for c in report.failed],
                "fresh_snapshot_id": fresh.snapshot_id,
                "note": "nothing was sent to the robot; a new turn starts on the fresh snapshot",
            }), None
        now = self.clock.now()
        action = ManagedAction(
            action_id=self.ids.new("act"), mission_id=self._mission_id, tool_call_id=call.id, model_turn_id=turn_id,
            skill=skill.name, target=target_now, decision_snapshot_id=decision.snapshot_id,
            backend=self.navigation.name, now=now,
        )
        action.dispatch_snapshot = fresh
        distance = fresh.pose.distance_to(target_now) if fresh.pose else 0.0
        timeout_s = nav.timeout_s + nav.timeout_per_m_s * distance
        # The fresh snapshot, the passing check and the dispatch intent are
        # durable (one commit) before anything is sent to the robot.
        committed = self._append_many([snap_draft, check_draft, self._draft(
            EventType.ROBOT_ACTION_STARTED, model_turn_id=turn_id, tool_call_id=call.id,
            robot_action_id=action.action_id, snapshot_id=fresh.snapshot_id, payload={
                "intent": {"backend": self.navigation.name, "target": target_now.model_dump(),
                           "frame_id": self.config.frame_id, "timeout_s": round(timeout_s, 2),
                           "arguments": call.arguments},
                "action": action.view().model_dump(mode="json"),
            })])
        self._evidence.append(committed[1].seq)
        action.timeout_s = timeout_s
        self._actions.append(action)
        self._active = action
        self._update("dispatching", action)
        try:
            ack = self.navigation.send_goal(target=target_now, frame_id=self.config.frame_id, timeout_s=nav.accept_timeout_s)
        except HarnessTimeout as exc:
            self._transition(action, ActionStatus.UNKNOWN, f"no accept/reject from the backend: {exc.message}")
            self._active = None
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.ERROR, action_id=action.action_id,
                              error={"code": "backend_timeout", "message": exc.message}), None
        except HarnessError as exc:
            self._transition(action, ActionStatus.FAILED, f"not sent: {exc.message}")
            self._active = None
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED, action_id=action.action_id,
                              content={"reason": exc.message}), None
        if not ack.accepted:
            action.backend_goal_id = ack.goal_id
            self._transition(action, ActionStatus.FAILED, f"rejected by the backend: {ack.reason or 'no reason given'}")
            self._active = None
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED, action_id=action.action_id,
                              content={"reason": ack.reason or "rejected by the navigation backend"}), None
        action.backend_goal_id = ack.goal_id
        action.accepted_at = self.clock.monotonic()
        self._transition(action, ActionStatus.ACCEPTED, "accepted by the backend")
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.ACCEPTED, action_id=action.action_id, content={
            "backend_goal_id": ack.goal_id,
            "target": target_now.model_dump(),
            "note": "accepted is not completion; the verified outcome arrives as a runtime event",
        }), action

    def _supervise(self, action: ManagedAction) -> RuntimeEvent:
        """Track one accepted action to a terminal report (or timeout), then verify it."""
        self._update("running", action)
        nav_cfg = self.skills.get(action.skill).managed.navigation  # type: ignore[union-attr]
        timeout_s = action.timeout_s
        started = self.clock.monotonic()
        deadline = min(started + timeout_s, self._deadline)
        terminal = BackendTerminal.NONE
        last_progress_journal = -math.inf
        uncorrelated_seen: set[tuple[str, str]] = set()
        earlier_goals = {a.backend_goal_id for a in self._actions if a is not action and a.backend_goal_id}
        why_none = f"no terminal report within {timeout_s:.1f} s"
        while terminal is BackendTerminal.NONE:
            now = self.clock.monotonic()
            if self._stop_requested:
                why_none = f"stopped: {self._stop_requested}"
                break
            if now >= deadline:
                if deadline == self._deadline:
                    why_none = "mission timeout while the action was running"
                break
            for ev in self.navigation.poll(min(0.1, deadline - now)):
                if ev.goal_id != action.backend_goal_id and ev.goal_id in earlier_goals:
                    continue  # a late report about an action that is already judged
                if ev.goal_id != action.backend_goal_id:
                    key = (ev.goal_id, ev.status or ev.type)
                    if key not in uncorrelated_seen:
                        uncorrelated_seen.add(key)
                        self._append(EventType.BACKEND_EVENT_UNCORRELATED, robot_action_id=action.action_id, payload={
                            "goal_id": ev.goal_id, "type": ev.type, "status": ev.status,
                            "note": "not the goal this action started; ignored",
                        })
                    continue
                if action.state is ActionStatus.ACCEPTED and (ev.type == "feedback" or ev.status == "executing"):
                    self._transition(action, ActionStatus.RUNNING, "backend reports execution")
                if ev.type == "feedback":
                    action.last_progress_at = self.clock.monotonic()
                    if action.last_progress_at - last_progress_journal >= nav_cfg.progress_journal_period_s:
                        last_progress_journal = action.last_progress_at
                        self._append(EventType.ROBOT_ACTION_PROGRESS, tool_call_id=action.tool_call_id,
                                     robot_action_id=action.action_id, payload={
                                         "distance_remaining": ev.distance_remaining,
                                         "current_pose": ev.current_pose.model_dump() if ev.current_pose else None,
                                     })
                        self._update("running", action)
                if ev.status in _TERMINAL_STATUS:
                    terminal = _TERMINAL_STATUS[ev.status]
                    action.backend_status = ev.status
                    action.terminal_reported_at = ev.stamp or self.clock.now()
                    break
        if terminal is BackendTerminal.NONE and action.backend_goal_id:
            acknowledged = self.navigation.cancel(action.backend_goal_id, timeout_s=nav_cfg.cancel_timeout_s)
            action.backend_status = "cancel_acknowledged" if acknowledged else "cancel_unacknowledged"
            # An acknowledged cancel is not a stopped robot: wait (bounded) for the
            # goal's terminal report. Either way the requested action did not
            # complete on its own, so the verdict stays UNKNOWN; the reason says
            # whether the stop was confirmed.
            # A refused cancel usually means the goal ended on its own meanwhile;
            # its terminal report is then the evidence to judge.
            confirmed = self._await_terminal(action, nav_cfg.cancel_timeout_s)
            if confirmed in (BackendTerminal.SUCCEEDED, BackendTerminal.ABORTED):
                terminal = confirmed
            elif confirmed is BackendTerminal.CANCELED:
                why_none += "; cancel requested, backend confirmed canceled"
            else:
                why_none += "; cancel requested, stop NOT confirmed by the backend" + ("" if acknowledged else " (refused)")
        verifying = self._transition(action, ActionStatus.VERIFYING,
                                     f"backend {terminal.value}" if terminal is not BackendTerminal.NONE else why_none,
                                     defer=True)
        self._update("verifying", action)
        post, post_draft = self._capture_after(action.terminal_reported_at, nav_cfg.outcome.settle_s)
        assert action.target is not None and action.dispatch_snapshot is not None
        verdict = check_navigation_outcome(
            target=action.target, backend=terminal, post=post, dispatch=action.dispatch_snapshot, tol=nav_cfg.outcome,
            not_before=action.terminal_reported_at,
        )
        reason = verdict.reason if terminal is not BackendTerminal.NONE else f"{why_none}; {verdict.reason}"
        action.outcome_snapshot_id = post.snapshot_id
        final = self._transition(action, verdict.state, reason, defer=True)
        # VERIFYING, the post-terminal snapshot, the verdict and its evidence: one commit.
        committed = self._append_many([verifying, post_draft, final, self._draft(
            EventType.ROBOT_ACTION_OUTCOME, tool_call_id=action.tool_call_id, robot_action_id=action.action_id,
            snapshot_id=post.snapshot_id, payload={
                "state": verdict.state.value, "reason": reason, "evidence": verdict.evidence,
                "action": action.view().model_dump(mode="json"),
            })])
        self._evidence.append(committed[-1].seq)
        self._active = None
        self._update("verifying", action)
        return RuntimeEvent(type="robot_action_outcome", tool_call_id=action.tool_call_id, action_id=action.action_id,
                            state=verdict.state.value, detail={"reason": reason, "skill": action.skill,
                                                               "target": action.target.model_dump() if action.target else None})

    def _await_terminal(self, action: ManagedAction, timeout_s: float) -> BackendTerminal:
        deadline = self.clock.monotonic() + timeout_s
        while (now := self.clock.monotonic()) < deadline:
            for ev in self.navigation.poll(min(0.1, deadline - now)):
                if ev.goal_id == action.backend_goal_id and ev.status in _TERMINAL_STATUS:
                    action.backend_status = ev.status
                    action.terminal_reported_at = ev.stamp or self.clock.now()
                    return _TERMINAL_STATUS[ev.status]
        return BackendTerminal.NONE

    def _capture_after(self, not_before: float | None, settle_s: float) -> tuple[WorldSnapshot, EventDraft]:
        """The post-terminal snapshot, waiting (bounded) for a pose observed after the terminal report."""
        deadline = self.clock.monotonic() + settle_s
        snap, draft = self._capture("post_terminal", defer=True)
        while not_before is not None and self.clock.monotonic() < deadline:
            stamp = snap.pose_meta.source_stamp
            if stamp is not None and stamp >= not_before:
                break
            self.navigation.poll(0.05)  # a bounded wait; late events about a judged goal are irrelevant
            snap, draft = self._capture("post_terminal", defer=True)
        return snap, draft

    def _abandon_active(self) -> str:
        """Supervision failed mid-action: ask the backend to stop rather than move unsupervised.

        Returns the abandoned action's id (empty when none was in flight).
        """
        action = self._active
        if action is not None and action.backend_goal_id and not action.terminal:
            try:
                self.navigation.cancel(action.backend_goal_id, timeout_s=3.0)
            except HarnessError:
                pass
        self._active = None
        return action.action_id if action is not None else ""

    # -- done proposals -------------------------------------------------------

    def _judge_done(self, text: str) -> tuple[MissionStatus, str]:
        """A done proposal is checked against the recorded evidence, never taken at its word."""
        if not self._actions:
            return MissionStatus.UNKNOWN, (
                f"planner proposed done ({text!r}) but no physical action was verified in this mission"
            )
        unresolved: list[ManagedAction] = []
        for i, a in enumerate(self._actions):
            if a.state is ActionStatus.SUCCEEDED:
                continue
            later_ok = any(b.state is ActionStatus.SUCCEEDED and b.target == a.target for b in self._actions[i + 1:])
            if not later_ok:
                unresolved.append(a)
        failed_tools = self._unresolved_tool_errors()
        parts = [f"{a.skill} -> {_fmt_target(a.target)}: {a.state.value} ({a.reason})" for a in self._actions]
        if any(a.state is ActionStatus.UNKNOWN for a in unresolved):
            return MissionStatus.UNKNOWN, "planner proposed done but evidence is incomplete: " + "; ".join(parts)
        if unresolved:
            return MissionStatus.FAILED, "planner proposed done but evidence contradicts it: " + "; ".join(parts)
        if failed_tools:
            return MissionStatus.FAILED, "planner proposed done but these tools failed and were not retried: " + ", ".join(failed_tools)
        return MissionStatus.SUCCEEDED, "verified: " + "; ".join(parts)

    def _unresolved_tool_errors(self) -> list[str]:
        last: dict[str, str] = {}
        for c in self._calls:
            if c["action_id"] is None:
                last[c["name"]] = c["result"]["status"]
        return sorted(n for n, s in last.items() if s == ToolResultStatus.ERROR.value and n in ("capture_image", "speak", "send_message"))

    # -- helpers ----------------------------------------------------------------

    def _check_budget(self) -> None:
        if self._stop_requested:
            raise _Stop(MissionStatus.CANCELLED, f"mission cancelled: {self._stop_requested}")
        if self.clock.monotonic() >= self._deadline:
            raise _Stop(MissionStatus.UNKNOWN, f"mission timeout ({self.config.limits.mission_timeout_s} s) before a verified done")

    def _capture(self, reason: str, *, defer: bool = False) -> Any:
        """Capture and persist a snapshot; with ``defer`` return (snapshot, draft) for a later batched commit."""
        try:
            snap = self.snapshots.capture(reason=reason, mission_id=self._mission_id)
        except HarnessError as exc:
            raise _Stop(MissionStatus.BLOCKED, f"no world snapshot ({reason}): {exc.message}") from None
        active = self._active.view() if self._active is not None else None
        recent = next((a.view() for a in reversed(self._actions) if a.terminal), None)
        snap = snap.model_copy(update={"active_action": active, "recent_outcome": recent, "mission_id": self._mission_id})
        draft = self._draft(EventType.WORLD_SNAPSHOT_CAPTURED, snapshot_id=snap.snapshot_id,
                            payload={"reason": reason, "snapshot": snap.model_dump(mode="json")})
        if defer:
            return snap, draft
        self._append_many([draft])
        return snap

    def _transition(self, action: ManagedAction, to: ActionStatus, reason: str, *, defer: bool = False) -> EventDraft | None:
        """Move the action (revision-checked) and journal it, now or in the caller's batch."""
        change = action.transition(to, now=self.clock.now(), reason=reason, expected_revision=action.revision)
        draft = self._draft(EventType.ROBOT_ACTION_STATE_CHANGED, tool_call_id=action.tool_call_id,
                            robot_action_id=action.action_id, payload=change)
        if defer:
            return draft
        self._append_many([draft])
        return None

    def _draft(self, type_: EventType, **fields: Any) -> EventDraft:
        return EventDraft(type=type_, mission_id=self._mission_id, **fields)

    def _append(self, type_: EventType, **fields: Any) -> JournalEvent:
        return self._append_many([self._draft(type_, **fields)])[0]

    def _append_many(self, drafts: Sequence[EventDraft]) -> list[JournalEvent]:
        """One atomic, durable commit (one fsync) for several events."""
        events = self.journal.append(list(drafts))
        if self._on_update is not None:
            for event in events:
                self._on_update("", None, event)
        return events

    def _update(self, stage: str, action: ManagedAction | None = None) -> None:
        if self._on_update is not None:
            self._on_update(stage, action.view() if action else None, None)

    def _outcome(self, status: MissionStatus, summary: str) -> MissionOutcome:
        evidence_ids: list[str] = []
        for a in self._actions:
            evidence_ids += [a.action_id, a.outcome_snapshot_id]
        return MissionOutcome(
            mission_id=self._mission_id, status=status, summary=summary,
            evidence_seqs=tuple(self._evidence), evidence_ids=tuple(x for x in evidence_ids if x),
            tool_calls=tuple(self._calls), actions=tuple(a.view() for a in self._actions),
        )


def _fmt_target(p: Pose2D | None) -> str:
    return "?" if p is None else f"({p.x:.2f}, {p.y:.2f}, {p.yaw:.2f})"
