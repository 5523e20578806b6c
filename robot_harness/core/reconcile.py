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
  non-terminal actions are looked up and marked UNKNOWN (never re-sent, never
  cancelled, never resumed), their leases settled as above, and the mission is
  finished UNKNOWN with what the backend said.

Every write is a revision-checked transition of the mission it concerns.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from .clock import Clock
from .durable import DispatchRecord, Lease, LeaseState, ReleaseReason
from .errors import HarnessError, StaleRevision
from .journal import Journal
from .ports import NavigationPort, SnapshotPort
from .records import ActionStatus, Availability, ControllerState, EventDraft, EventType, MissionStatus

__all__ = ["ACTIVE_STATUSES", "TERMINAL_STATUSES", "Finding", "Reconciler", "Settlement", "clear_resource"]

ACTIVE_STATUSES = frozenset({"accepted", "executing", "canceling"})
TERMINAL_STATUSES = frozenset({"succeeded", "aborted", "canceled"})

_STATIONARY_SPEED = 0.02
"""m/s and rad/s: below this the base counts as stopped."""


class Finding(str, enum.Enum):
    BACKEND_TERMINAL = "backend_terminal"
    """The backend reports the goal ended (its outcome is still unverified)."""
    BACKEND_ACTIVE = "backend_active"
    """The backend is still executing the goal."""
    NOT_TRACKED_STOPPED = "not_tracked_stopped"
    """The backend does not know the goal, and the robot is idle and stationary."""
    NOT_TRACKED = "not_tracked"
    """The backend does not know the goal and the robot's stillness is not established."""
    BACKEND_UNREACHABLE = "backend_unreachable"
    """The backend could not be asked."""


class Settlement(BaseModel):
    model_config = ConfigDict(frozen=True)
    action_id: str
    mission_id: str
    finding: Finding
    backend_status: str = ""
    released: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    detail: str = ""


class Reconciler:
    """Looks actions up on the backend and records what it found (core; no ROS)."""

    def __init__(self, *, journal: Journal, navigation: NavigationPort, snapshots: SnapshotPort, clock: Clock,
                 lookup_timeout_s: float = 2.0, on_events: Callable[[list[Any]], None] | None = None) -> None:
        self.journal = journal
        self.navigation = navigation
        self.snapshots = snapshots
        self.clock = clock
        self.lookup_timeout_s = lookup_timeout_s
        self._on_events = on_events

    # -- asking ---------------------------------------------------------------

    def inspect(self, record: DispatchRecord | None) -> tuple[Finding, str, str]:
        """(finding, backend status, detail) for one dispatch record; writes nothing."""
        status: str | None = None
        if record is not None and record.goal_id:
            try:
                status = self.navigation.lookup(record.goal_id, timeout_s=self.lookup_timeout_s)
            except HarnessError as exc:
                return Finding.BACKEND_UNREACHABLE, "", exc.message
        if status in TERMINAL_STATUSES:
            return Finding.BACKEND_TERMINAL, status or "", f"backend reports the goal {status}"
        if status is not None:
            return Finding.BACKEND_ACTIVE, status, f"backend is still running the goal ({status})"
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
        finding, status, detail = self.inspect(record)
        return self._record(lease.mission_id, lease.owner, record, finding, status, detail, [lease])

    # -- restart --------------------------------------------------------------

    def reconcile_open_missions(self, *, skip: frozenset[str] = frozenset()) -> list[Settlement]:
        """Settle every mission left open by a dead supervisor (all but ``skip``) and finish it UNKNOWN."""
        out: list[Settlement] = []
        for mission_id in self.journal.open_missions():
            if mission_id in skip:
                continue
            settled = self._reconcile_mission(mission_id)
            out.extend(settled)
        return out

    def _reconcile_mission(self, mission_id: str) -> list[Settlement]:
        leases = [lease for lease in self.journal.leases().values() if lease.mission_id == mission_id]
        settled: list[Settlement] = []
        for record in self.journal.dispatches(mission_id):
            mine = [lease for lease in leases if lease.owner == record.action_id]
            if record.state.terminal and not mine:
                continue
            finding, status, detail = self.inspect(record)
            s = self._record(mission_id, record.action_id, record, finding, status, detail, mine)
            if s is not None:
                settled.append(s)
        parts = [f"{s.action_id}: {s.detail}" + (f" (resource {', '.join(s.blocked)} blocked until reconciled)"
                                                 if s.blocked else "") for s in settled]
        closing = self._close_open_calls(mission_id)
        if closing:
            parts.append(f"{len(closing)} call(s) left unanswered were cancelled")
        summary = ("interrupted: the harness restarted while this mission was running; nothing was resumed or "
                   "re-sent" + (f"; {'; '.join(parts)}" if parts else ""))
        self._append(mission_id, [*closing, EventDraft(type=EventType.MISSION_FINISHED, mission_id=mission_id, payload={
            "status": MissionStatus.UNKNOWN.value, "summary": summary, "evidence_seqs": [], "evidence_ids": [],
            "reconciled": [s.model_dump(mode="json") for s in settled]})])
        return settled

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
                result = ToolResult(tool_call_id=e.tool_call_id, name=str(e.payload.get("name", "")),
                                    status=ToolResultStatus.CANCELLED, content={"reason": why})
                drafts.append(EventDraft(type=EventType.TOOL_RESULT_RECORDED, mission_id=mission_id,
                                         model_turn_id=e.model_turn_id, tool_call_id=e.tool_call_id,
                                         payload=result.model_dump(mode="json")))
        return drafts

    # -- writing --------------------------------------------------------------

    def _record(self, mission_id: str, action_id: str, record: DispatchRecord | None, finding: Finding, status: str,
                detail: str, leases: list[Lease]) -> Settlement | None:
        drafts = [EventDraft(type=EventType.ROBOT_ACTION_RECONCILED, mission_id=mission_id, robot_action_id=action_id,
                             payload={"finding": finding.value, "backend_status": status, "detail": detail,
                                      "goal_id": record.goal_id if record else ""})]
        if record is not None and not record.state.terminal:
            drafts.append(EventDraft(
                type=EventType.ROBOT_ACTION_STATE_CHANGED, mission_id=mission_id, robot_action_id=action_id,
                tool_call_id=record.tool_call_id, payload={
                    "from": record.state.value, "to": ActionStatus.UNKNOWN.value, "revision": record.revision + 1,
                    "reason": f"supervision was cut short; {detail}", "backend_goal_id": record.goal_id}))
        release = finding in (Finding.BACKEND_TERMINAL, Finding.NOT_TRACKED_STOPPED)
        why = ReleaseReason.CONFIRMED_TERMINAL if finding is Finding.BACKEND_TERMINAL else ReleaseReason.CONFIRMED_STOPPED
        released, blocked = [], []
        for lease in leases:
            if release:
                drafts.append(EventDraft(type=EventType.LEASE_RELEASED, mission_id=mission_id, payload={
                    "resource": lease.resource, "owner": lease.owner, "why": why.value, "detail": detail}))
                released.append(lease.resource)
            else:
                blocked.append(lease.resource)
                if lease.state is not LeaseState.BLOCKED:
                    drafts.append(EventDraft(type=EventType.LEASE_BLOCKED, mission_id=mission_id, payload={
                        "resource": lease.resource, "owner": lease.owner, "reason": detail}))
        try:
            self._append(mission_id, drafts)
        except StaleRevision:
            return None  # someone else settled it first; their record stands
        return Settlement(action_id=action_id, mission_id=mission_id, finding=finding, backend_status=status,
                          released=tuple(released), blocked=tuple(blocked), detail=detail)

    def _append(self, mission_id: str, drafts: list[EventDraft]) -> None:
        events = self.journal.append(drafts, expected_revision=self.journal.revision(mission_id))
        if self._on_events is not None:
            self._on_events(events)


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
                           robot_action_id=lease.owner, payload={
                               "finding": "operator_cleared", "backend_status": "", "goal_id": "",
                               "detail": f"{operator}: {reason}"}),
                EventDraft(type=EventType.LEASE_RELEASED, mission_id=lease.mission_id, payload={
                    "resource": resource, "owner": lease.owner, "why": ReleaseReason.OPERATOR_CLEARED.value,
                    "detail": reason, "operator": operator})]

    journal.transition(first.mission_id, build)
    return cleared[0]
