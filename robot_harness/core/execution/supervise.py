"""Supervision of one accepted action, tick-style (py_trees_ros's initialise / update / terminate).

``initialise`` starts tracking an accepted action; each ``update`` reads one
bounded poll of the backend's reports and says whether the action reached a
terminal report, is still going, or was cut short (a Stop, its timeout, the
mission's deadline); ``terminate`` cancels an action that did not end on
its own, judges the outcome on a fresh post-terminal snapshot and commits
the verdict, the leases' end and the receipt in one write. ``abandon`` is
the fail-closed path when supervision itself failed.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from ..clock import Clock
from ..config import HarnessConfig
from ..durable import ReleaseReason
from ..errors import HarnessError
from ..lifecycle import ManagedAction
from ..nav2_errors import Nav2Error, Nav2ErrorKind, describe_nav2_error
from ..nav_goals import BEHAVIOR_KINDS, ROUTE_KINDS, WaypointReport
from ..outcome import (BackendTerminal, OutcomeVerdict, check_behavior_outcome, check_navigation_outcome,
                       check_route_waypoints)
from ..ports import BackendEvent, NavigationPort
from ..records import ActionStatus, Availability, EventType, RuntimeEvent, WorldSnapshot
from ..skills import SkillRegistry
from ..authority.receipts import Receipts
from ..mission.ledger import MissionLedger, StoppedBeforeDispatch
from ..mission.observations import NoWorldSnapshot, Observations
from ..mission.state import MissionState, StopFlag
from .leases import Leases

__all__ = ["ActionSupervisor", "Tick"]

_TERMINAL_STATUS = {
    "succeeded": BackendTerminal.SUCCEEDED,
    "aborted": BackendTerminal.ABORTED,
    "canceled": BackendTerminal.CANCELED,
}

_PROGRESS_KEYS = ("navigation_time_s", "estimated_time_remaining_s", "number_of_recoveries",
                  "number_of_poses_remaining", "current_waypoint", "distance_traveled", "angular_distance_traveled",
                  "time_left_s")
"""Nav2 feedback counters journaled with each progress event (``records.NavProgress``; a route's and a
behaviour's own)."""


def _waypoint_reports(detail: dict) -> tuple[WaypointReport, ...]:
    """A route's per-waypoint reports from a terminal event (malformed entries are dropped: Nav2's word
    about waypoints is only ever a reason against, never evidence for)."""
    out = []
    for item in detail.get("waypoints") or ():
        try:
            out.append(WaypointReport.model_validate(item))
        except (TypeError, ValueError):
            continue
    return tuple(out)


RESULT_WAIT_S = 1.0
"""How long the supervisor waits, after a goal's status said it ended, for its result (error code, waypoints)."""


def _waypoint_cause(error: Nav2Error | None, reports: tuple[WaypointReport, ...]) -> Nav2Error | None:
    """Why a route's waypoint failed, when the route's own error only says that one did (FollowWaypoints'
    603 STOP_ON_MISSED_WAYPOINT): the first missed waypoint's own error (a stuck controller's 105), named."""
    if error is None or error.kind is not Nav2ErrorKind.WAYPOINT:
        return None
    missed = next((r for r in reports if r.missed and r.error_code), None)
    return describe_nav2_error(missed.error_code, missed.error_msg[:500]) if missed is not None else None


def _take_result(t: "_Tracking", action: ManagedAction, ev: BackendEvent) -> None:
    """What a goal's result adds to its terminal report: Nav2's named error, a route's waypoint reports."""
    t.result_seen = True
    t.backend_error = _backend_error(ev.detail)
    action.waypoint_reports = _waypoint_reports(ev.detail)


def _is_route(action: ManagedAction) -> bool:
    return action.goal is not None and action.goal.kind in ROUTE_KINDS


def _backend_error(detail: dict) -> Nav2Error | None:
    """The named error of a terminal report's ``error_code`` / ``error_msg`` (None when it has no error)."""
    try:
        code = int(detail.get("error_code", 0) or 0)
    except (TypeError, ValueError):
        return None
    if code == 0:
        return None
    return describe_nav2_error(code, str(detail.get("error_msg", ""))[:500])


class Tick(str, enum.Enum):
    """What one ``update`` found."""

    RUNNING = "running"
    """No terminal report yet; call ``update`` again."""
    TERMINAL = "terminal"
    """The backend reported the goal's end; ``terminate`` judges it."""
    CUT_SHORT = "cut_short"
    """A Stop, the action's timeout or the mission's deadline ended supervision first; ``terminate`` cancels."""


@dataclass
class _Tracking:
    action: ManagedAction
    deadline: float
    why_none: str
    earlier: list[ManagedAction]
    """The mission's other actions (their goals' late reports are ignored), read only when one arrives."""
    _earlier_goals: set[str] | None = None
    terminal: BackendTerminal = BackendTerminal.NONE
    last_progress_journal: float = -math.inf
    backend_error: Nav2Error | None = None
    """The terminal report's error code and message, named (None: the report carried none)."""
    uncorrelated_seen: set[tuple[str, str]] = field(default_factory=set)
    last_sample: float = -math.inf
    """When a route's waypoints were last looked for (monotonic)."""
    result_seen: bool = False
    """The terminal report was the goal's result (its error code and waypoint reports), not only its status."""

    def earlier_goals(self) -> set[str]:
        if self._earlier_goals is None:
            self._earlier_goals = {a.backend_goal_id for a in self.earlier
                                   if a is not self.action and a.backend_goal_id}
        return self._earlier_goals


@dataclass(eq=False, kw_only=True)
class ActionSupervisor:
    config: HarnessConfig
    state: MissionState
    ledger: MissionLedger
    observations: Observations
    leases: Leases
    receipts: Receipts
    navigation: NavigationPort
    skills: SkillRegistry
    clock: Clock
    stop: StopFlag
    _t: _Tracking | None = field(default=None, init=False, repr=False)
    """The action being supervised, between initialise and terminate."""

    def supervise(self, action: ManagedAction) -> RuntimeEvent:
        """Track one accepted action to a terminal report (or its bound), then verify it."""
        self.initialise(action)
        while self.update() is Tick.RUNNING:
            pass
        return self.terminate()

    def _nav(self, action: ManagedAction):  # type: ignore[no-untyped-def]
        return self.skills.get(action.skill).managed.navigation  # type: ignore[union-attr]

    def initialise(self, action: ManagedAction) -> None:
        self.ledger.stage("running", action)
        started = self.clock.monotonic()
        self._t = _Tracking(
            action=action, deadline=min(started + action.timeout_s, self.state.deadline),
            earlier=self.state.actions,
            why_none=f"no terminal report within {action.timeout_s:.1f} s")

    def update(self) -> Tick:
        """One bounded poll of the backend: progress and state changes journaled, a terminal report taken."""
        t = self._t
        assert t is not None, "update() before initialise()"
        if t.terminal is not BackendTerminal.NONE:
            return Tick.TERMINAL
        action, now = t.action, self.clock.monotonic()
        if self.stop:
            t.why_none = f"stopped: {self.stop.reason}"
            return Tick.CUT_SHORT
        if now >= t.deadline:
            if t.deadline == self.state.deadline:
                t.why_none = "mission timeout while the action was running"
            return Tick.CUT_SHORT
        nav = self._nav(action)
        if _is_route(action) and now - t.last_sample >= nav.route_sample_period_s:
            t.last_sample = now
            self._watch_waypoints(action)
        for ev in self.navigation.poll(min(0.1, t.deadline - now)):
            if not self.config.eval_ablations.evidence_binding and ev.status in _TERMINAL_STATUS:
                ev = ev.model_copy(update={"goal_id": action.backend_goal_id})  # ablation: any report is "ours"
            if ev.goal_id != action.backend_goal_id and ev.goal_id in t.earlier_goals():
                continue  # a late report about an action that is already judged
            if ev.goal_id != action.backend_goal_id:
                key = (ev.goal_id, ev.status or ev.type)
                if key not in t.uncorrelated_seen:
                    t.uncorrelated_seen.add(key)
                    self.ledger.append(EventType.BACKEND_EVENT_UNCORRELATED, robot_action_id=action.action_id, payload={
                        "goal_id": ev.goal_id, "type": ev.type, "status": ev.status,
                        "note": "not the goal this action started; ignored",
                    })
                continue
            if action.state is ActionStatus.ACCEPTED and (ev.type == "feedback" or ev.status == "executing"):
                self.ledger.append_many([self.ledger.transition(action, ActionStatus.RUNNING,
                                                                  "backend reports execution", now=self.clock.now())])
            if ev.type == "feedback":
                action.last_progress_at = self.clock.monotonic()
                if action.last_progress_at - t.last_progress_journal >= nav.progress_journal_period_s:
                    t.last_progress_journal = action.last_progress_at
                    self.ledger.append(EventType.ROBOT_ACTION_PROGRESS, tool_call_id=action.tool_call_id,
                                        robot_action_id=action.action_id, payload={
                                            "distance_remaining": ev.distance_remaining,
                                            "current_pose": ev.current_pose.model_dump() if ev.current_pose else None,
                                            **{k: ev.detail[k] for k in _PROGRESS_KEYS if ev.detail.get(k) is not None},
                                        })
                    self.ledger.stage("running", action)
            if ev.status in _TERMINAL_STATUS and (t.terminal is BackendTerminal.NONE or ev.type == "result"):
                # the first terminal report decides; the goal's result, when it is in the same batch (its
                # status often comes first), adds Nav2's error and a route's waypoint reports
                if t.terminal is BackendTerminal.NONE:
                    t.terminal = _TERMINAL_STATUS[ev.status]
                    action.backend_status = ev.status
                    action.terminal_reported_at = ev.stamp or self.clock.now()
                if ev.type == "result" and not t.result_seen:
                    _take_result(t, action, ev)
        return Tick.TERMINAL if t.terminal is not BackendTerminal.NONE else Tick.RUNNING

    def terminate(self) -> RuntimeEvent:
        """End supervision: cancel what did not end on its own, judge the outcome, commit it with its receipt."""
        t = self._t
        assert t is not None, "terminate() before initialise()"
        self._t = None
        action, nav = t.action, self._nav(t.action)
        terminal, why_none, stop_confirmed = t.terminal, t.why_none, False
        if terminal is BackendTerminal.NONE and action.backend_goal_id:
            acknowledged = self.navigation.cancel(action.backend_goal_id, timeout_s=nav.cancel_timeout_s)
            action.backend_status = "cancel_acknowledged" if acknowledged else "cancel_unacknowledged"
            # An acknowledged cancel is not a stopped robot: wait (bounded) for the
            # goal's terminal report. Either way the requested action did not
            # complete on its own, so the verdict stays UNKNOWN; the reason says
            # whether the stop was confirmed.
            # A refused cancel usually means the goal ended on its own meanwhile;
            # its terminal report is then the evidence to judge.
            confirmed = self._await_terminal(action, nav.cancel_timeout_s)
            if confirmed in (BackendTerminal.SUCCEEDED, BackendTerminal.ABORTED):
                terminal = confirmed
            elif confirmed is BackendTerminal.CANCELED:
                stop_confirmed = True
                why_none += "; cancel requested, backend confirmed canceled"
            else:
                why_none += "; cancel requested, stop NOT confirmed by the backend" + ("" if acknowledged else " (refused)")
        if terminal is not BackendTerminal.NONE and not t.result_seen:
            self._await_result(action, t)
        self.ledger.stage("verifying", action)
        # The post-terminal snapshot before the move to VERIFYING: when it cannot be captured the
        # action is abandoned from the state the journal holds, not from an uncommitted one.
        post, post_draft = self.observations.capture_after(action.terminal_reported_at, nav.outcome.settle_s)
        verifying = self.ledger.transition(action, ActionStatus.VERIFYING,
                                            f"backend {terminal.value}" if terminal is not BackendTerminal.NONE
                                            else why_none, now=self.clock.now())
        assert action.target is not None and action.dispatch_snapshot is not None
        goal = action.goal
        if goal is not None and goal.kind in BEHAVIOR_KINDS:
            verdict = check_behavior_outcome(goal=goal, backend=terminal, post=post, dispatch=action.dispatch_snapshot,
                                             tol=nav.outcome, not_before=action.terminal_reported_at)
        else:
            verdict = check_navigation_outcome(
                target=action.target, backend=terminal, post=post, dispatch=action.dispatch_snapshot, tol=nav.outcome,
                not_before=action.terminal_reported_at,
            )
        if goal is not None and goal.kind in ROUTE_KINDS:
            self._mark_waypoints(action, post)  # the post-terminal snapshot is journaled below, with the verdict
            verdict = check_route_waypoints(verdict, goal=goal, seen=action.waypoints_seen,
                                            reports=action.waypoint_reports, names=action.waypoint_names)
        if not self.config.eval_ablations.evidence_binding and terminal is BackendTerminal.SUCCEEDED:
            verdict = OutcomeVerdict(state=ActionStatus.SUCCEEDED, reason="backend succeeded (ablation: not bound "
                                     "to a fresh observation)", evidence={"backend_terminal": "succeeded"})
        reason = verdict.reason if terminal is not BackendTerminal.NONE else f"{why_none}; {verdict.reason}"
        error = t.backend_error
        if error is not None:  # what Nav2 said went wrong, named, for the planner and the recovery policy
            reason = f"{reason}; {error.describe()}"
        action.outcome_snapshot_id = post.snapshot_id
        final = self.ledger.transition(action, verdict.state, reason, now=self.clock.now())
        # The lease ends only on a confirmed end (a terminal report, or a confirmed
        # cancel); otherwise the robot may still be moving and the resource stays blocked.
        confirmed_end = terminal is not BackendTerminal.NONE or stop_confirmed
        lease_end = self.leases.end_drafts(
            self.skills.get(action.skill), action.action_id,
            ReleaseReason.CONFIRMED_TERMINAL if confirmed_end else None,
            f"backend {action.backend_status}" if confirmed_end else f"{why_none}: the robot may still be moving",
            pose=post.pose if post.pose_meta.availability is Availability.AVAILABLE else None)
        # VERIFYING, the post-terminal snapshot, the verdict, its evidence and the lease: one commit.
        committed = self.ledger.append_many([verifying, post_draft, final, *lease_end, self.ledger.draft(
            EventType.ROBOT_ACTION_OUTCOME, tool_call_id=action.tool_call_id, robot_action_id=action.action_id,
            snapshot_id=post.snapshot_id, payload={
                "state": verdict.state.value, "reason": reason, "evidence": verdict.evidence,
                "action": action.view().model_dump(mode="json"),
            }), *self.receipts.for_action(action, post, reason)])
        self.state.evidence.append(next(e.seq for e in committed if e.type is EventType.ROBOT_ACTION_OUTCOME))
        self.state.active = None
        self.ledger.stage("verifying", action)
        cause = _waypoint_cause(error, action.waypoint_reports)
        return RuntimeEvent(type="robot_action_outcome", tool_call_id=action.tool_call_id, action_id=action.action_id,
                            state=verdict.state.value, detail={
                                "reason": reason, "skill": action.skill,
                                "target": action.target.model_dump() if action.target else None,
                                **({"nav2_error": error.model_dump(mode="json")} if error is not None else {}),
                                **({"nav2_cause": cause.model_dump(mode="json")} if cause is not None else {})})

    def _await_result(self, action: ManagedAction, t: _Tracking) -> None:
        """The goal's status said it ended; its result (Nav2's error code, a route's waypoint reports) comes
        on another channel, a moment later. Wait for it, bounded by ``RESULT_WAIT_S``: without it the
        verdict still stands, it only says less about why."""
        deadline = self.clock.monotonic() + RESULT_WAIT_S
        while (now := self.clock.monotonic()) < deadline:
            for ev in self.navigation.poll(min(0.05, deadline - now)):
                if ev.goal_id == action.backend_goal_id and ev.type == "result":
                    _take_result(t, action, ev)
                    return

    def _watch_waypoints(self, action: ManagedAction) -> None:
        """Look (a snapshot, not journaled unless it shows something) whether the route's next waypoint is
        reached; the first fresh pose within tolerance of it is journaled as that waypoint's evidence,
        with a progress event naming it. A failed capture is not an end: the waypoint just stays unseen."""
        goal = action.goal
        assert goal is not None
        if len(action.waypoints_seen) >= len(goal.poses):
            return
        try:
            snap = self.observations.peek("waypoint_watch")
        except NoWorldSnapshot:
            return
        reached = self._mark_waypoints(action, snap)
        if not reached:
            return
        drafts = [self.observations.keep(snap, "waypoint_reached")]
        for k in reached:
            name = action.waypoint_names[k] if k < len(action.waypoint_names) else ""
            drafts.append(self.ledger.draft(EventType.ROBOT_ACTION_PROGRESS, tool_call_id=action.tool_call_id,
                                            robot_action_id=action.action_id, snapshot_id=snap.snapshot_id, payload={
                                                "current_pose": snap.pose.model_dump() if snap.pose else None,
                                                "waypoint_reached": {"index": k, "place": name,
                                                                     "snapshot_id": snap.snapshot_id,
                                                                     "t": action.waypoints_seen[k][1]}}))
        self.ledger.append_many(drafts)

    def _mark_waypoints(self, action: ManagedAction, snap: WorldSnapshot) -> list[int]:
        """Waypoints (in route order, from the next unseen one) that ``snap``'s fresh pose is within the
        verifier's tolerance of; recorded on the action. A pose after a localization jump shows nothing."""
        goal, meta, seen = action.goal, snap.pose_meta, action.waypoints_seen
        dispatch = action.dispatch_snapshot
        if goal is None or snap.pose is None or meta.availability is not Availability.AVAILABLE \
                or meta.source_stamp is None or (dispatch is not None and snap.pose_jumps != dispatch.pose_jumps):
            return []
        tol = self.config.verification.xy_tolerance_m
        reached: list[int] = []
        k = len(seen)
        while k < len(goal.poses) and snap.pose.distance_to(goal.poses[k]) <= tol:
            seen[k] = (snap.snapshot_id, meta.source_stamp)
            reached.append(k)
            k += 1
        return reached

    def _await_terminal(self, action: ManagedAction, timeout_s: float) -> BackendTerminal:
        deadline = self.clock.monotonic() + timeout_s
        while (now := self.clock.monotonic()) < deadline:
            for ev in self.navigation.poll(min(0.1, deadline - now)):
                if ev.goal_id == action.backend_goal_id and ev.status in _TERMINAL_STATUS:
                    action.backend_status = ev.status
                    action.terminal_reported_at = ev.stamp or self.clock.now()
                    return _TERMINAL_STATUS[ev.status]
        return BackendTerminal.NONE

    def abandon(self) -> str:
        """Supervision failed mid-action: ask the backend to stop rather than move unsupervised.

        The action ends UNKNOWN (its outcome was never verified), with its
        receipt (status UNKNOWN; the backend's last word in its result); its
        leases are released only when the backend confirmed the goal ended (a
        terminal report before or after the cancel), else blocked. Best
        effort: the journal itself may be what failed. Returns the abandoned
        action's id (empty when none was in flight).
        """
        self._t = None
        action = self.state.active
        self.state.active = None
        if action is None:
            return ""
        if action.terminal:
            return action.action_id
        nav = self._nav(action)
        ended = BackendTerminal.NONE
        if action.backend_goal_id:
            try:
                self.navigation.cancel(action.backend_goal_id, timeout_s=nav.cancel_timeout_s)
                ended = self._await_terminal(action, nav.cancel_timeout_s)
            except Exception:  # noqa: BLE001 - best effort: the backend may be what failed; the stop stays unconfirmed
                pass
        confirmed = ended is not BackendTerminal.NONE or action.backend_status in _TERMINAL_STATUS
        detail = (f"supervision was cut short; backend confirmed the goal {action.backend_status}" if confirmed
                  else "supervision was cut short; the backend did not confirm the goal ended")
        try:
            self.ledger.append_many([
                self.ledger.transition(action, ActionStatus.UNKNOWN, detail, now=self.clock.now()),
                *self.leases.end_drafts(self.skills.get(action.skill), action.action_id,
                                         ReleaseReason.CONFIRMED_TERMINAL if confirmed else None, detail),
                *self.receipts.for_action(action, None, detail)])
        except (HarnessError, StoppedBeforeDispatch):
            pass
        return action.action_id
