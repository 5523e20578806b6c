"""Reconciliation: settle what the journal cannot know on its own by asking the backend.

Two moments need it:

* **A blocked or orphaned lease.** An action ended UNKNOWN (lost acknowledgment,
  no terminal report, a dead supervisor) and still holds its resource. Before
  anyone else may use the resource, the backend is asked about the action's
  goal id: a terminal status releases the lease (``confirmed_terminal``); a
  running goal keeps it; a goal the backend does not track releases it only if
  a fresh snapshot shows the navigator idle and the robot stationary
  (``confirmed_stopped``). Otherwise the resource stays blocked until an
  operator clears it.
* **Restart.** Every mission left open in the journal was interrupted: its
  in-flight actions are looked up (never re-sent, never cancelled, never
  resumed), their leases settled as above, and the mission is finished
  UNKNOWN (its goal was never verified) with what the backend said.

What the backend says about an in-flight (non-terminal) action decides the
state its record ends in, fail-closed (an action already terminal keeps its
record; only its resource is settled):

* ``succeeded``, ``aborted``, ``canceled``: VERIFYING, then the engine's own
  outcome check (``check_navigation_outcome``) on a fresh snapshot whose pose
  was observed after the lookup. Only a pose within tolerance (and no
  localization jump since dispatch) makes it SUCCEEDED; with no usable
  snapshot a ``succeeded`` is UNKNOWN and the others FAILED. The resource is
  released: the backend confirmed the goal is over.
* ``rejected`` (for backends that track refused goals): FAILED, released.
* ``accepted``, ``executing``, ``canceling`` (still running after the
  restart): UNKNOWN, and the resource stays blocked; it is not cancelled.
* not tracked: UNKNOWN; the resource is released only if the navigator is
  idle and the robot stationary.
* backend unreachable, or no lookup by goal id: UNKNOWN, resource blocked.

Every write is a revision-checked transition of the mission it concerns.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from .clock import Clock
from .config import OutcomeTolerance
from .durable import SITE, TRANSITION_TYPES, DispatchRecord, Lease, LeaseState, ReleaseReason, StaleFence
from .errors import HarnessError, IllegalTransition, StaleRevision
from .journal import Journal, UnknownSnapshot
from .lifecycle import ALLOWED_TRANSITIONS
from .outcome import BackendTerminal, OutcomeVerdict, check_navigation_outcome
from .payloads import (
    ActionPart,
    LeaseBlocked,
    LeaseReleased,
    MissionFinished,
    PayloadReadError,
    RobotActionOutcome,
    RobotActionReconciled,
    RobotActionStarted,
    RobotActionStateChanged,
    ToolCallRecorded,
    ToolResultRecorded,
    WorldSnapshotCaptured,
    payload_dict,
    payload_of,
)
from .ports import NavigationPort, SnapshotPort
from .site import Site
from .records import (
    ActionStatus,
    ActionView,
    Availability,
    ControllerState,
    EventDraft,
    EventType,
    JournalEvent,
    MissionStatus,
    Pose2D,
    WorldSnapshot,
)

__all__ = ["ACTIVE_STATUSES", "TERMINAL_STATUSES", "Finding", "ReconcileError", "Reconciler", "Settlement", "clear_resource"]

ACTIVE_STATUSES = frozenset({"accepted", "executing", "canceling"})
TERMINAL_STATUSES = frozenset({"succeeded", "aborted", "canceled"})
REJECTED_STATUS = "rejected"
"""A goal the backend refused: it never ran (not in ``TERMINAL_STATUSES``: it was never accepted)."""

_STATIONARY_SPEED = 0.02
"""m/s and rad/s: below this the base counts as stopped."""
_CAPTURE_BUDGET = 20
"""At most this many snapshots while waiting for a pose observed after the lookup."""
_CAPTURE_PERIOD_S = 0.05


class Finding(str, enum.Enum):
    BACKEND_TERMINAL = "backend_terminal"
    """The backend reports the goal ended (its outcome is still unverified)."""
    BACKEND_REJECTED = "backend_rejected"
    """The backend refused the goal: it never ran."""
    BACKEND_ACTIVE = "backend_active"
    """The backend is still executing the goal."""
    NOT_TRACKED_STOPPED = "not_tracked_stopped"
    """The backend does not know the goal, and the robot is idle and stationary."""
    NOT_TRACKED = "not_tracked"
    """The backend does not know the goal and the robot's stillness is not established."""
    BACKEND_UNREACHABLE = "backend_unreachable"
    """The backend could not be asked."""
    LOOKUP_UNSUPPORTED = "lookup_unsupported"
    """The backend cannot look a goal up by its id."""


class Settlement(BaseModel):
    model_config = ConfigDict(frozen=True)
    action_id: str
    mission_id: str
    finding: Finding
    backend_status: str = ""
    released: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    detail: str = ""
    action_state: ActionStatus | None = None
    """The state the action was moved to; None when it was already terminal (its record stands)."""
    reason: str = ""
    """Why the action ended in ``action_state``."""


class ReconcileError(HarnessError):
    """Some interrupted missions could not be settled; the others were (``settled``, ``failures``)."""

    code = "reconcile_failed"


class Reconciler:
    """Looks actions up on the backend and records what it found (core; no ROS)."""

    def __init__(self, *, journal: Journal, navigation: NavigationPort, snapshots: SnapshotPort, clock: Clock,
                 lookup_timeout_s: float = 2.0, on_events: Callable[[list[Any]], None] | None = None,
                 outcome: OutcomeTolerance | None = None, sleep: Callable[[float], None] | None = None,
                 site: Site | None = None) -> None:
        """``outcome`` is the tolerance the engine judges navigation with (``config.navigation.outcome``);
        ``sleep`` paces the bounded wait for a pose observed after a lookup (without it the snapshots
        are asked again at once, up to a small budget)."""
        self.journal = journal
        self.navigation = navigation
        self.snapshots = snapshots
        self.clock = clock
        self.lookup_timeout_s = lookup_timeout_s
        self.outcome = outcome or OutcomeTolerance()
        self._sleep = sleep
        self._on_events = on_events
        self.site = site
        """The fleet's shared resources: a place's lease is kept while the robot is inside the place."""

    # -- asking ---------------------------------------------------------------

    def inspect(self, record: DispatchRecord | None) -> tuple[Finding, str, str]:
        """(finding, backend status, detail) for one dispatch record; writes nothing."""
        status: str | None = None
        if record is not None and record.goal_id:
            try:
                status = self.navigation.lookup(record.goal_id, timeout_s=self.lookup_timeout_s)
            except HarnessError as exc:
                return Finding.BACKEND_UNREACHABLE, "", exc.message
            except NotImplementedError:
                return Finding.LOOKUP_UNSUPPORTED, "", f"{self.navigation.name} cannot look goals up by id"
        if status == REJECTED_STATUS:
            return Finding.BACKEND_REJECTED, status, "backend reports the goal rejected; it never ran"
        if status in TERMINAL_STATUSES:
            return Finding.BACKEND_TERMINAL, status or "", f"backend reports the goal {status}"
        if status in ACTIVE_STATUSES:
            return Finding.BACKEND_ACTIVE, status, f"backend is still running the goal ({status})"
        if status is not None:  # e.g. GoalStatus UNKNOWN: tracked, but says nothing about its end
            return Finding.BACKEND_ACTIVE, status, f"backend tracks the goal as {status!r}; it may still be running"
        stopped, why = self._stationary()
        if stopped:
            return Finding.NOT_TRACKED_STOPPED, "", f"backend does not track the goal; {why}"
        return Finding.NOT_TRACKED, "", f"backend does not track the goal, and {why}"

    def _stationary(self) -> tuple[bool, str]:
        try:
            snap = self.snapshots.capture(reason="reconcile", mission_id="")
        except HarnessError as exc:
            return False, f"no snapshot to confirm the robot is still ({exc.message})"
        if snap.navigation_meta.availability is not Availability.AVAILABLE:
            return False, "the navigator's state is not observed"
        if snap.controller_state is not ControllerState.IDLE:
            return False, f"the navigator is {snap.controller_state.value}"
        if snap.velocity_meta.availability is not Availability.AVAILABLE or snap.velocity is None:
            return False, "the robot's velocity is not observed"
        v = snap.velocity
        if max(abs(v.vx), abs(v.vy), abs(v.wz)) > _STATIONARY_SPEED:
            return False, f"the robot is moving ({v.vx:.2f} m/s, {v.wz:.2f} rad/s)"
        return True, "the navigator is idle and the robot stationary"

    # -- leases ---------------------------------------------------------------

    def settle_lease(self, lease: Lease) -> Settlement | None:
        """Try to end a lease whose owner is not a live supervised invocation.

        Returns the settlement when the lease was released (or re-confirmed
        blocked), None when the owner is live (a held, unexpired lease) or
        someone else moved it meanwhile.
        """
        if lease.state is LeaseState.HELD and not lease.expired(self.clock.now()):
            return None
        record = self.journal.dispatch_for_action(lease.owner)
        asked_at = self.clock.now()
        finding, status, detail = self.inspect(record)
        return self._record(lease.mission_id, lease.owner, record, finding, status, detail, [lease], asked_at)

    # -- restart --------------------------------------------------------------

    def reconcile_open_missions(self, *, skip: frozenset[str] = frozenset()) -> list[Settlement]:
        """Settle every mission left open by a dead supervisor (all but ``skip``) and finish it UNKNOWN."""
        out: list[Settlement] = []
        failures: list[str] = []
        for mission_id in self.journal.open_missions():
            if mission_id in skip:
                continue
            try:
                settled = self._reconcile_mission(mission_id)
            except HarnessError as exc:
                # One mission that cannot be settled must not leave the others open: it stays open
                # (its resources blocked), is reported, and the next start tries it again.
                failures.append(f"{mission_id}: {exc.message}")
                continue
            out.extend(settled)
        if failures:
            raise ReconcileError(f"{len(failures)} interrupted mission(s) could not be reconciled: "
                                 + "; ".join(failures), settled=[s.model_dump(mode="json") for s in out],
                                 failures=failures)
        return out

    def _reconcile_mission(self, mission_id: str, *, attempts: int = 3) -> list[Settlement]:
        """Settle one open mission and finish it UNKNOWN, every write checked against the revision this
        reconciler last read. Another writer in between gets noticed (``stale_revision``): when it
        finished the mission (a second reconciler: a repeated request reconciling while activation
        does), its record stands and nothing more is written; when the mission is still open (an
        operator's answer, a lease cleared), the state is read again and the step retried."""
        revision = [self.journal.revision(mission_id)]
        if mission_id not in self.journal.open_missions():
            return []
        settled: list[Settlement] = []
        for action_id in [r.action_id for r in self.journal.dispatches(mission_id)]:
            for _ in range(attempts):
                record = self.journal.dispatch_for_action(action_id)
                mine = [lease for lease in self.journal.leases().values()
                        if lease.mission_id == mission_id and lease.owner == action_id]
                if record is None or (record.state.terminal and not mine):
                    break
                asked_at = self.clock.now()
                finding, status, detail = self.inspect(record)
                s = self._record(mission_id, action_id, record, finding, status, detail, mine, asked_at,
                                 revision=revision)
                if s is not None:
                    settled.append(s)
                    break
                if mission_id not in self.journal.open_missions():
                    return settled  # another writer finished it meanwhile: one end, theirs
                revision[0] = self.journal.revision(mission_id)
        parts = [f"{s.action_id}: " + (f"{s.action_state.value} ({s.reason})" if s.action_state is not None
                                        else s.detail)
                 + (f" (resource {', '.join(s.blocked)} blocked until reconciled)" if s.blocked else "")
                 for s in settled]
        for _ in range(attempts):
            closing = self._close_open_calls(mission_id)
            dismissed = sum(d.type is EventType.INTERACTION_RESOLVED for d in closing)
            notes = list(parts)
            if len(closing) > dismissed:
                notes.append(f"{len(closing) - dismissed} call(s) left unanswered were cancelled")
            if dismissed:
                notes.append(f"{dismissed} pending interaction(s) were dismissed (their record stands; a different "
                             "answer later is refused)")
            summary = ("interrupted: the harness restarted while this mission was running; its goal was never "
                       "verified; nothing was resumed or re-sent" + (f"; {'; '.join(notes)}" if notes else ""))
            try:
                self._append(mission_id, [*closing, EventDraft(type=EventType.MISSION_FINISHED, mission_id=mission_id,
                                                               payload=payload_dict(MissionFinished(
                    status=MissionStatus.UNKNOWN.value, summary=summary, evidence_seqs=[], evidence_ids=[],
                    reconciled=[s.model_dump(mode="json") for s in settled])))],
                    revision=revision)
                return settled
            except StaleRevision:
                if mission_id not in self.journal.open_missions():
                    return settled  # finished by another writer between our read and our write: one end, theirs
                revision[0] = self.journal.revision(mission_id)  # moved, still open (an answer): read again
        raise ReconcileError(f"mission {mission_id} kept changing while it was reconciled ({attempts} attempts); "
                             "it stays open and the next start tries again", mission_id=mission_id)

    def _close_open_calls(self, mission_id: str) -> list[EventDraft]:
        """Every tool call gets exactly one result, and every interaction one resolution, even when cut short."""
        from .interactions import Resolution, interactions, resolution_draft
        from .records import ToolResult, ToolResultStatus

        events = self.journal.events(mission_id=mission_id, types=[
            EventType.TOOL_CALL_RECORDED, EventType.TOOL_RESULT_RECORDED, EventType.INTERACTION_REQUESTED,
            EventType.INTERACTION_RESOLVED])
        answered = {e.tool_call_id for e in events if e.type is EventType.TOOL_RESULT_RECORDED}
        why = "interrupted: the harness restarted before this call finished; it was not run (or not re-run)"
        drafts = [resolution_draft(i, Resolution.DISMISS, operator="harness", now=self.clock.now())
                  for i in interactions(events).values() if i.pending]
        for e in events:
            if e.type is EventType.TOOL_CALL_RECORDED and e.tool_call_id not in answered:
                result = ToolResult(tool_call_id=e.tool_call_id, name=_call_name(e),
                                    status=ToolResultStatus.CANCELLED, content={"reason": why})
                drafts.append(EventDraft(type=EventType.TOOL_RESULT_RECORDED, mission_id=mission_id,
                                         model_turn_id=e.model_turn_id, tool_call_id=e.tool_call_id,
                                         payload=payload_dict(ToolResultRecorded.of(result))))
        return drafts

    # -- judging --------------------------------------------------------------

    def _judge(self, mission_id: str, record: DispatchRecord, finding: Finding, status: str, detail: str,
               asked_at: float) -> tuple[list[EventDraft], ActionStatus, str]:
        """The drafts that move an in-flight action to what the backend's answer supports, its end state, and why.

        A terminal answer goes through the engine's own outcome check on a
        fresh snapshot observed after the lookup: the controller's word alone
        never makes an action SUCCEEDED.
        """
        if finding is Finding.BACKEND_REJECTED:
            why = f"reconciled after a restart: {detail}"
            return [self._move(mission_id, record, record.state, record.revision, ActionStatus.FAILED, why)], \
                ActionStatus.FAILED, why
        if finding is not Finding.BACKEND_TERMINAL:
            why = f"supervision was cut short; {detail}"
            return [self._move(mission_id, record, record.state, record.revision, ActionStatus.UNKNOWN, why)], \
                ActionStatus.UNKNOWN, why
        terminal = BackendTerminal(status)
        drafts: list[EventDraft] = []
        state, revision = record.state, record.revision
        if state is ActionStatus.REQUESTED:
            # The acceptance never reached the journal (the supervisor died first), but the
            # backend knows the goal by its key-derived id: it was accepted.
            drafts.append(self._move(mission_id, record, state, revision, ActionStatus.ACCEPTED,
                                     f"backend knows the goal ({status}); its acceptance was not journaled"))
            state, revision = ActionStatus.ACCEPTED, revision + 1
        if state is not ActionStatus.VERIFYING:
            drafts.append(self._move(mission_id, record, state, revision, ActionStatus.VERIFYING,
                                     f"backend {status} (looked up after a restart)"))
            state, revision = ActionStatus.VERIFYING, revision + 1
        started = self._started(mission_id, record.action_id)
        verdict, post = self._check(mission_id, started, terminal, asked_at)
        reason = f"reconciled after a restart: {verdict.reason}"
        if post is not None:
            drafts.append(EventDraft(type=EventType.WORLD_SNAPSHOT_CAPTURED, mission_id=mission_id,
                                     snapshot_id=post.snapshot_id, payload=payload_dict(WorldSnapshotCaptured(
                                         reason=post.reason, snapshot=post))))
        drafts.append(self._move(mission_id, record, state, revision, verdict.state, reason))
        view = self._view(started, record, status, verdict.state, revision + 1, reason, post)
        drafts.append(EventDraft(
            type=EventType.ROBOT_ACTION_OUTCOME, mission_id=mission_id, tool_call_id=record.tool_call_id,
            robot_action_id=record.action_id, snapshot_id=post.snapshot_id if post is not None else "",
            payload=payload_dict(RobotActionOutcome(
                state=verdict.state, reason=reason, evidence={**verdict.evidence, "reconciled": True},
                action=ActionPart.model_validate(view.model_dump(mode="json"))))))
        return drafts, verdict.state, reason

    def _check(self, mission_id: str, started: JournalEvent | None, terminal: BackendTerminal,
               asked_at: float) -> tuple[OutcomeVerdict, WorldSnapshot | None]:
        evidence: dict[str, Any] = {"backend_terminal": terminal.value}
        failed = ActionStatus.UNKNOWN if terminal is BackendTerminal.SUCCEEDED else ActionStatus.FAILED
        target: Pose2D | None = None
        dispatch: WorldSnapshot | None = None
        if started is not None:
            try:
                target = payload_of(started, RobotActionStarted).target
            except PayloadReadError:
                target = None
            try:
                dispatch = self.journal.get_snapshot(started.snapshot_id) if started.snapshot_id else None
            except UnknownSnapshot:
                dispatch = None
        if target is None or dispatch is None:
            return OutcomeVerdict(state=failed, evidence=evidence, reason=(
                f"backend {terminal.value}, but the journal lacks the action's target or pre-dispatch snapshot "
                "to check it against")), None
        try:
            post = self._capture_after(mission_id, asked_at)
        except HarnessError as exc:
            return OutcomeVerdict(state=failed, evidence=evidence, reason=(
                f"backend {terminal.value}; no snapshot to check the pose against ({exc.message})")), None
        verdict = check_navigation_outcome(target=target, backend=terminal, post=post, dispatch=dispatch,
                                           tol=self.outcome, not_before=asked_at)
        return verdict, post

    def _capture_after(self, mission_id: str, not_before: float) -> WorldSnapshot:
        """A snapshot whose pose was observed after ``not_before`` if one arrives (bounded); else the last one."""
        deadline = self.clock.monotonic() + self.outcome.settle_s
        snap = self.snapshots.capture(reason="reconcile_outcome", mission_id=mission_id)
        for _ in range(_CAPTURE_BUDGET):
            stamp = snap.pose_meta.source_stamp
            if (stamp is not None and stamp >= not_before) or self.clock.monotonic() >= deadline:
                break
            if self._sleep is not None:
                self._sleep(_CAPTURE_PERIOD_S)
            snap = self.snapshots.capture(reason="reconcile_outcome", mission_id=mission_id)
        return snap.model_copy(update={"mission_id": snap.mission_id or mission_id})

    def _started(self, mission_id: str, action_id: str) -> JournalEvent | None:
        return next((e for e in self.journal.events(mission_id=mission_id, types=[EventType.ROBOT_ACTION_STARTED])
                     if e.robot_action_id == action_id), None)

    @staticmethod
    def _view(started: JournalEvent | None, record: DispatchRecord, backend_status: str, state: ActionStatus, revision: int,
              reason: str, post: WorldSnapshot | None) -> ActionView:
        base = {"action_id": record.action_id, "tool_call_id": record.tool_call_id, "skill": record.skill,
                "state": ActionStatus.REQUESTED.value}
        try:
            view = payload_of(started, RobotActionStarted).action.view(**base) if started is not None \
                else ActionView.model_validate(base)
        except (PayloadReadError, ValueError):
            view = ActionView.model_validate(base)
        return view.model_copy(update={
            "state": state, "revision": revision, "backend_goal_id": record.goal_id, "backend_status": backend_status,
            "reason": reason, "outcome_snapshot_id": post.snapshot_id if post is not None else ""})

    @staticmethod
    def _move(mission_id: str, record: DispatchRecord, state: ActionStatus, revision: int, to: ActionStatus,
              reason: str) -> EventDraft:
        if to not in ALLOWED_TRANSITIONS[state]:
            raise IllegalTransition(f"{record.action_id}: {state.value} -> {to.value} is not allowed",
                                    action_id=record.action_id, from_state=state.value, to_state=to.value)
        return EventDraft(type=EventType.ROBOT_ACTION_STATE_CHANGED, mission_id=mission_id,
                          robot_action_id=record.action_id, tool_call_id=record.tool_call_id,
                          payload=payload_dict(RobotActionStateChanged(
                              from_=state, to=to, revision=revision + 1, reason=reason,
                              backend_goal_id=record.goal_id)))

    # -- writing --------------------------------------------------------------

    def _record(self, mission_id: str, action_id: str, record: DispatchRecord | None, finding: Finding, status: str,
                detail: str, leases: list[Lease], asked_at: float, *,
                revision: list[int] | None = None) -> Settlement | None:
        judged: list[EventDraft] = []
        state: ActionStatus | None = None
        reason = ""
        if record is not None and not record.state.terminal:
            judged, state, reason = self._judge(mission_id, record, finding, status, detail, asked_at)
        drafts = [EventDraft(type=EventType.ROBOT_ACTION_RECONCILED, mission_id=mission_id, robot_action_id=action_id,
                             payload=payload_dict(RobotActionReconciled(
                                 finding=finding.value, backend_status=status, detail=detail,
                                 goal_id=record.goal_id if record else "",
                                 action_state=state.value if state is not None else ""))), *judged]
        release = finding in (Finding.BACKEND_TERMINAL, Finding.BACKEND_REJECTED, Finding.NOT_TRACKED_STOPPED)
        why = (ReleaseReason.CONFIRMED_STOPPED if finding is Finding.NOT_TRACKED_STOPPED
               else ReleaseReason.CONFIRMED_TERMINAL)
        released, blocked = [], []
        inside: tuple[str, ...] | None = None
        for lease in leases:
            fence = {"scope": lease.scope, "fence": lease.fence} if lease.scope == SITE else {}
            if release and lease.scope == SITE and (self.site is None or self.site.place_bound(lease.resource)):
                if inside is None:
                    inside = self._inside(mission_id)
                if lease.resource in inside:  # the robot is still in the place: held on (its next action hands it on)
                    continue
            if release:
                drafts.append(EventDraft(type=EventType.LEASE_RELEASED, mission_id=mission_id, payload=payload_dict(
                    LeaseReleased(resource=lease.resource, owner=lease.owner, why=why.value, detail=detail, **fence))))
                released.append(lease.resource)
            else:
                blocked.append(lease.resource)
                if lease.state is not LeaseState.BLOCKED:
                    drafts.append(EventDraft(type=EventType.LEASE_BLOCKED, mission_id=mission_id, payload=payload_dict(
                        LeaseBlocked(resource=lease.resource, owner=lease.owner, reason=detail, **fence))))
        try:
            self._append(mission_id, drafts, revision=revision)
        except (StaleRevision, StaleFence):
            return None  # someone else settled (or an operator cleared) it first; their record stands
        return Settlement(action_id=action_id, mission_id=mission_id, finding=finding, backend_status=status,
                          released=tuple(released), blocked=tuple(blocked), detail=detail, action_state=state,
                          reason=reason)

    def _inside(self, mission_id: str) -> tuple[str, ...]:
        """The site resources whose place the robot is inside now; every place-bound one when its pose
        cannot be read (it may be inside: the lease is kept, never released on a guess), and every site
        resource leased when this reconciler was not told the site's places."""
        if self.site is None:
            return tuple(lease.resource for lease in self.journal.leases().values() if lease.scope == SITE)
        try:
            snap = self.snapshots.capture(reason="reconcile_site", mission_id=mission_id)
        except HarnessError:
            snap = None
        if snap is None or snap.pose is None or snap.pose_meta.availability is not Availability.AVAILABLE:
            return tuple(r for r in self.site.resources if self.site.place_bound(r))
        return self.site.inside(snap.pose)

    def _append(self, mission_id: str, drafts: list[EventDraft], *, revision: list[int] | None = None) -> None:
        """Append, revision-checked: against ``revision[0]`` (the revision this reconciler last knew,
        advanced by its own writes) when given, else the revision now (a lease settled on its own)."""
        expected = revision[0] if revision is not None else self.journal.revision(mission_id)
        events = self.journal.append(drafts, expected_revision=expected)
        if revision is not None:
            revision[0] = expected + sum(e.type in TRANSITION_TYPES for e in events)
        if self._on_events is not None:
            self._on_events(events)


def _call_name(event: JournalEvent) -> str:
    """The tool a recorded call named ("" when its record cannot be read: it is cancelled all the same)."""
    try:
        return payload_of(event, ToolCallRecorded).name
    except PayloadReadError:
        return ""


def clear_resource(journal: Journal, *, resource: str, reason: str, operator: str, clock: Clock) -> Lease:
    """An operator releases a resource blocked by an action of unknown outcome (after checking the robot).

    A lease held by a live, supervised invocation (held and unexpired) cannot
    be cleared: Stop that mission instead. Returns the lease that was cleared.
    """
    from .errors import UsageError

    if not reason.strip() or not operator.strip():
        raise UsageError("clearing a resource needs the operator's name and a reason (they are journaled)")
    first = journal.leases().get(resource)
    if first is None:
        raise UsageError(f"resource {resource!r} is not leased", resource=resource)
    cleared: list[Lease] = []

    def build() -> list[EventDraft]:
        lease = journal.leases().get(resource)
        if lease is None or lease.mission_id != first.mission_id:
            raise UsageError(f"resource {resource!r} changed hands meanwhile; look again", resource=resource)
        if lease.state is LeaseState.HELD and not lease.expired(clock.now()):
            raise UsageError(f"resource {resource!r} is held by a live action ({lease.owner}, mission "
                             f"{lease.mission_id}); stop that mission instead", resource=resource)
        cleared[:] = [lease]
        return [EventDraft(type=EventType.ROBOT_ACTION_RECONCILED, mission_id=lease.mission_id,
                           robot_action_id=lease.owner, payload=payload_dict(RobotActionReconciled(
                               finding="operator_cleared", backend_status="", goal_id="",
                               detail=f"{operator}: {reason}"))),
                EventDraft(type=EventType.LEASE_RELEASED, mission_id=lease.mission_id, payload=payload_dict(
                    LeaseReleased(resource=resource, owner=lease.owner, why=ReleaseReason.OPERATOR_CLEARED.value,
                                  detail=reason, operator=operator,
                                  **({"scope": lease.scope, "fence": lease.fence} if lease.scope == SITE else {}))))]

    journal.transition(first.mission_id, build)
    return cleared[0]
