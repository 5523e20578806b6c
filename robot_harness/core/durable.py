"""Durable execution state, derived from the journal's events.

Everything a second writer could get wrong is checked here, inside the
journal's write transaction, against state folded from committed events:

* **Mission revisions.** Each state-changing event of a mission (a decision,
  a dispatch intent, a result, a verdict, a commit...) bumps that mission's
  revision. A writer that read revision *r* appends with
  ``expected_revision=r``; if anyone else moved the mission meanwhile it gets
  ``StaleRevision`` and nothing is written. Observations (snapshots, model
  I/O, progress) do not bump it: they never invalidate a decision's basis.
* **Idempotent dispatch.** A dispatch intent carries a key (task, node,
  attempt, state version). A second intent with the same key is refused with
  ``DuplicateDispatch`` carrying the existing execution record.
* **Action revisions.** A lifecycle change names the state it moves from and
  the revision it creates; a stale one, or one the state machine forbids, is
  refused (``lifecycle.check_change``, the one transition check).
* **Resource leases.** An exclusive lease per resource (base, arm, camera,
  speaker) with owner and expiry. Acquiring a resource someone else holds is
  refused with ``LeaseConflict``; a lease whose owner's outcome is unknown is
  *blocked* and stays so until reconciled or cleared by an operator.
* **Fleets.** Many robots may write one database (each event carries its
  ``robot_id``). A robot's own resources are leased per robot (the index key
  is ``robot_id/resource``); a ``site`` resource (an elevator, a door) is one
  lease for the whole fleet. Every lease's **fencing token** is the seq of the
  event that acquired it, so tokens only grow; a release, a block or a
  hand-over that presents a token other than the lease's current one is
  refused (``StaleFence``): a robot resumed after a pause cannot act on a
  lease it lost.

``DurableIndex`` is pure (no I/O); the journal feeds it committed events and
asks it to ``validate`` each batch before committing. A SQLite journal used by
several processes catches its index up from the file inside the write lock, so
the check always sees every committed event.
"""
from __future__ import annotations

import enum
import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from .errors import RefusalError, StaleRevision, UsageError
from .lifecycle import check_change
from .payloads import (
    DispatchPart,
    LeaseAcquired,
    LeaseBlocked,
    LeaseReleased,
    RobotActionReconciled,
    RobotActionStarted,
    RobotActionStateChanged,
    payload_of,
)
from .records import ActionStatus, EventDraft, EventType, JournalEvent

__all__ = [
    "DispatchKey",
    "DispatchRecord",
    "DuplicateDispatch",
    "DurableIndex",
    "Lease",
    "LeaseConflict",
    "LeaseState",
    "ReleaseReason",
    "SITE",
    "StaleFence",
    "lease_key",
    "TRANSITION_TYPES",
    "goal_uuid_for",
]

TRANSITION_TYPES: frozenset[EventType] = frozenset({
    EventType.MISSION_STARTED,
    EventType.CONTRACT_FROZEN,
    EventType.TOOL_RESULT_RECORDED,
    EventType.ROBOT_ACTION_STARTED,
    EventType.ROBOT_ACTION_STATE_CHANGED,
    EventType.ROBOT_ACTION_OUTCOME,
    EventType.ROBOT_ACTION_RECONCILED,
    EventType.RECEIPT_RECORDED,
    EventType.DONE_PROPOSED,
    EventType.VERDICT_RECORDED,
    EventType.COMMIT_RECORDED,
    EventType.GATE_REJECTED,
    EventType.RECOVERY_DECIDED,
    EventType.FACT_RECORDED,
    EventType.LEASE_ACQUIRED,
    EventType.LEASE_RELEASED,
    EventType.LEASE_BLOCKED,
    EventType.STOP_REQUESTED,
    EventType.INTERACTION_REQUESTED,
    EventType.INTERACTION_RESOLVED,
    EventType.MISSION_FINISHED,
})
"""Event types that change a mission's state (and so its revision)."""

INDEXED_TYPES: frozenset[EventType] = frozenset({
    EventType.ROBOT_ACTION_STARTED,
    EventType.ROBOT_ACTION_STATE_CHANGED,
    EventType.ROBOT_ACTION_RECONCILED,
    EventType.LEASE_ACQUIRED,
    EventType.LEASE_RELEASED,
    EventType.LEASE_BLOCKED,
    EventType.MISSION_STARTED,
    EventType.MISSION_FINISHED,
})
"""Event types whose payload the index reads (the rest only count toward revisions)."""

_GOAL_NAMESPACE = uuid.UUID("6f1d3c52-2b8e-4d0e-9a57-0c1f4b7e9a10")


class DuplicateDispatch(RefusalError):
    """This exact invocation was already dispatched; ``existing`` is its execution record."""

    code = "duplicate_dispatch"

    def __init__(self, message: str, existing: "DispatchRecord") -> None:
        super().__init__(message, existing=existing.model_dump(mode="json"))
        self.existing = existing


class LeaseConflict(RefusalError):
    """The resource is leased by someone else (or blocked by a mutation of unknown outcome)."""

    code = "lease_conflict"

    def __init__(self, message: str, lease: "Lease") -> None:
        super().__init__(message, lease=lease.model_dump(mode="json"))
        self.lease = lease

    @classmethod
    def of(cls, lease: "Lease", detail: str = "") -> "LeaseConflict":
        state = "blocked by an action of unknown outcome" if lease.state is LeaseState.BLOCKED else "held"
        return cls(f"resource {lease.resource!r} is {state} ({lease.owner}, mission {lease.mission_id})"
                   + (f": {detail}" if detail else ""), lease)


class StaleFence(RefusalError):
    """A write presented a fencing token that is not the lease's current one: the writer lost the lease."""

    code = "stale_fencing_token"


SITE = "site"
"""The lease scope of a resource the whole fleet shares."""


def lease_key(resource: str, robot_id: str, scope: str) -> str:
    """Where the index keeps a lease: a site resource under its name, a robot's own resource under
    ``robot_id/resource`` (its bare name for a robot without an id)."""
    return resource if scope == SITE or not robot_id else f"{robot_id}/{resource}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DispatchKey(_Frozen):
    """What makes one physical invocation the same request: task, node, attempt and state version."""

    mission_id: str
    node: str
    """The invocation's identity within the task: skill and canonical arguments."""
    attempt: int = 1
    """Raised only by an explicitly authorized new attempt (a recovery retry)."""
    state_version: int = 0
    """The task state version the decision was made on."""

    @classmethod
    def for_call(cls, *, mission_id: str, skill: str, arguments: dict[str, Any], attempt: int,
                 state_version: int) -> "DispatchKey":
        canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
        node = f"{skill}:{hashlib.sha256(canonical.encode()).hexdigest()[:16]}"
        return cls(mission_id=mission_id, node=node, attempt=attempt, state_version=state_version)

    @property
    def text(self) -> str:
        return f"{self.mission_id}/{self.node}/a{self.attempt}/v{self.state_version}"


def goal_uuid_for(key: str) -> str:
    """The backend goal id for a dispatch key (32 hex chars, stable across restarts).

    Sending a goal under an id derived from its key means a restarted harness
    can look the goal up on the backend even when the acceptance never
    reached the journal, and a re-send of the same request can never become a
    second goal (an action server refuses a goal id it already tracks).
    """
    return uuid.uuid5(_GOAL_NAMESPACE, key).hex


class DispatchRecord(_Frozen):
    """The execution record of one dispatch intent, as the journal knows it."""

    key: str
    mission_id: str
    action_id: str
    tool_call_id: str
    skill: str = ""
    goal_id: str = ""
    resources: tuple[str, ...] = ()
    seq: int
    state: ActionStatus = ActionStatus.REQUESTED
    revision: int = 0
    reconciled: str = ""
    """The last reconciliation finding, when one was recorded."""


class LeaseState(str, enum.Enum):
    HELD = "held"
    """Owned by a live, supervised invocation."""
    BLOCKED = "blocked"
    """The owner's outcome is unknown: nobody may use the resource until reconciled or cleared."""


class ReleaseReason(str, enum.Enum):
    CONFIRMED_TERMINAL = "confirmed_terminal"
    """The backend reported the invocation terminal (or it never started: rejected, refused)."""
    CONFIRMED_STOPPED = "confirmed_stopped"
    """Reconciliation found the backend idle and the robot stationary."""
    OPERATOR_CLEARED = "operator_cleared"
    """An operator took responsibility for the resource's state."""
    HANDED_OVER = "handed_over"
    """A site lease passed from one ended action of a robot to its next (the robot is still inside the place)."""


class Lease(_Frozen):
    resource: str
    owner: str
    """The invocation (action id) holding it."""
    mission_id: str
    state: LeaseState = LeaseState.HELD
    expires_at: float = 0.0
    """Wall time after which a HELD lease's owner is presumed dead. Set once, at acquisition, past the
    action's own deadline (its timeout, when the engine gives up on it anyway); a live owner releases
    or settles its lease before then, so leases are not renewed."""
    skill: str = ""
    since_seq: int = 0
    reason: str = ""
    robot_id: str = ""
    """The robot whose harness holds it ("" for a robot without an id)."""
    scope: str = ""
    """``site`` for a resource the fleet shares, "" for the robot's own."""
    fence: int = 0
    """The fencing token: the seq of the event that acquired it (0 until committed). (Not named ``token``:
    the journal's redactor hides every field so named.)"""

    @property
    def key(self) -> str:
        return lease_key(self.resource, self.robot_id, self.scope)

    def expired(self, now: float) -> bool:
        return self.state is LeaseState.HELD and self.expires_at > 0 and now > self.expires_at


class DurableIndex:
    """Revisions, dispatch records and leases folded from journal events (not thread-safe: the journal locks)."""

    def __init__(self) -> None:
        self.seq = 0
        self.revisions: dict[str, int] = {}
        self.dispatches: dict[str, DispatchRecord] = {}
        self._by_action: dict[str, str] = {}
        self.leases: dict[str, Lease] = {}
        self.open_missions: dict[str, int] = {}
        """Missions started and not finished, with their MISSION_STARTED seq."""
        self.mission_robot: dict[str, str] = {}
        """Each started mission's robot (the robot id of its MISSION_STARTED)."""

    # -- reads --------------------------------------------------------------

    def revision(self, mission_id: str) -> int:
        return self.revisions.get(mission_id, 0)

    def dispatch_for_action(self, action_id: str) -> DispatchRecord | None:
        key = self._by_action.get(action_id)
        return self.dispatches.get(key) if key else None

    # -- validation (before commit) -----------------------------------------

    def leases_of(self, robot_id: str) -> dict[str, Lease]:
        """The leases a robot sees under its resources' names: its own resources' and the site's."""
        return {lease.resource: lease for lease in self.leases.values()
                if lease.scope == SITE or lease.robot_id == robot_id}

    def validate(self, drafts: Sequence[EventDraft], *, expected_revision: int | None = None,
                 robot_id: str = "") -> None:
        """Raise if committing ``drafts`` (written by ``robot_id``'s harness) now would break an invariant;
        changes nothing."""
        if expected_revision is not None:
            missions = {d.mission_id for d in drafts}
            if len(missions) != 1 or "" in missions:
                raise UsageError("expected_revision needs every event of the batch to name the same mission",
                                 missions=sorted(missions))
            (mission_id,) = missions
            actual = self.revision(mission_id)
            if actual != expected_revision:
                err = StaleRevision(
                    f"mission {mission_id} is at revision {actual}, the writer expected {expected_revision};"
                    " re-read and retry", mission_id=mission_id, expected=expected_revision, actual=actual)
                err.expected, err.actual = expected_revision, actual  # type: ignore[attr-defined]
                raise err
        keys: set[str] = set()
        leases: dict[str, Lease | None] = {}
        actions: dict[str, tuple[ActionStatus, int]] = {}
        for d in drafts:
            if d.type not in INDEXED_TYPES:
                continue
            p = payload_of(d)
            if isinstance(p, RobotActionStarted):
                key = p.dispatch.key if p.dispatch is not None else ""
                if key:
                    existing = self.dispatches.get(key)
                    if existing is not None:
                        raise DuplicateDispatch(f"dispatch {key} already exists as {existing.action_id}"
                                                f" ({existing.state.value})", existing)
                    if key in keys:
                        raise UsageError(f"dispatch key {key} appears twice in one batch")
                    keys.add(key)
                actions[d.robot_action_id] = (ActionStatus.REQUESTED, 0)
            elif isinstance(p, RobotActionStateChanged):
                current = actions.get(d.robot_action_id)
                if current is None:
                    rec = self.dispatch_for_action(d.robot_action_id)
                    current = (rec.state, rec.revision) if rec is not None else None
                if current is None:
                    continue  # an action journaled before dispatch keys existed
                state, revision = current
                # The one transition check (lifecycle.check_change), against what the journal holds.
                check_change(d.robot_action_id, state=state, revision=revision,
                             from_state=p.from_.value if p.from_ is not None else "", to_state=p.to.value,
                             new_revision=p.revision)
                actions[d.robot_action_id] = (p.to, revision + 1)
            elif isinstance(p, LeaseAcquired):
                key, owner = lease_key(p.resource, robot_id, p.scope), p.owner
                held = leases[key] if key in leases else self.leases.get(key)
                if held is not None and (held.owner != owner or held.robot_id != robot_id):
                    raise LeaseConflict.of(held)
                leases[key] = self._lease(d, p, 0, robot_id)
            elif isinstance(p, (LeaseReleased, LeaseBlocked)):
                key, owner = lease_key(p.resource, robot_id, p.scope), p.owner
                held = leases[key] if key in leases else self.leases.get(key)
                if p.fence and (held is None or held.fence != p.fence):
                    raise StaleFence(
                        f"{d.type.value}: fencing token {p.fence} for {p.resource!r} is stale; the lease is now "
                        + (f"fence {held.fence} of {held.robot_id or 'this robot'} ({held.owner})" if held is not None
                           else "free"), resource=p.resource, fence=p.fence,
                        current=held.fence if held is not None else 0,
                        holder_robot=held.robot_id if held is not None else "")
                if held is None or held.owner != owner:
                    raise StaleRevision(f"{d.type.value}: resource {p.resource!r} is not leased to {owner}",
                                        resource=p.resource, owner=owner,
                                        holder=held.owner if held is not None else "")
                if held.scope == SITE and not p.fence and held.fence:
                    raise StaleFence(f"{d.type.value}: a site lease ({p.resource!r}) is ended only by a writer that"
                                     " presents its fencing token", resource=p.resource, fence=0,
                                     current=held.fence, holder_robot=held.robot_id)
                leases[key] = None if d.type is EventType.LEASE_RELEASED else held

    # -- folding (after commit) ----------------------------------------------

    def apply(self, events: Iterable[JournalEvent]) -> None:
        for ev in events:
            if ev.seq <= self.seq:
                continue
            self.seq = ev.seq
            if ev.type in TRANSITION_TYPES and ev.mission_id:
                self.revisions[ev.mission_id] = self.revisions.get(ev.mission_id, 0) + 1
            if ev.type in INDEXED_TYPES:
                self._fold(ev)

    def _fold(self, ev: JournalEvent) -> None:
        if ev.type is EventType.MISSION_STARTED:
            self.open_missions[ev.mission_id] = ev.seq
            self.mission_robot.setdefault(ev.mission_id, ev.robot_id)
            return
        if ev.type is EventType.MISSION_FINISHED:
            self.open_missions.pop(ev.mission_id, None)
            return
        p = payload_of(ev)
        if isinstance(p, RobotActionStarted):
            dispatch = p.dispatch or DispatchPart()
            key = dispatch.key or f"legacy:{ev.robot_action_id}"
            self.dispatches[key] = DispatchRecord(
                key=key, mission_id=ev.mission_id, action_id=ev.robot_action_id, tool_call_id=ev.tool_call_id,
                skill=p.action.skill, goal_id=dispatch.goal_id, resources=dispatch.resources, seq=ev.seq)
            self._by_action[ev.robot_action_id] = key
        elif isinstance(p, RobotActionStateChanged):
            rec = self.dispatch_for_action(ev.robot_action_id)
            if rec is not None:
                update: dict[str, Any] = {"state": p.to, "revision": p.revision}
                if p.backend_goal_id:
                    update["goal_id"] = p.backend_goal_id
                self.dispatches[rec.key] = rec.model_copy(update=update)
        elif isinstance(p, RobotActionReconciled):
            rec = self.dispatch_for_action(ev.robot_action_id)
            if rec is not None:
                self.dispatches[rec.key] = rec.model_copy(update={"reconciled": p.finding})
        elif isinstance(p, LeaseAcquired):
            lease = self._lease(ev, p, ev.seq, ev.robot_id)
            self.leases[lease.key] = lease
        elif isinstance(p, LeaseBlocked):
            key = lease_key(p.resource, ev.robot_id, p.scope)
            held = self.leases.get(key)
            if held is not None:
                self.leases[key] = held.model_copy(update={
                    "state": LeaseState.BLOCKED, "reason": p.reason, "since_seq": ev.seq})
        elif isinstance(p, LeaseReleased):
            self.leases.pop(lease_key(p.resource, ev.robot_id, p.scope), None)

    @staticmethod
    def _lease(d: EventDraft | JournalEvent, p: LeaseAcquired, seq: int, robot_id: str) -> Lease:
        return Lease(resource=p.resource, owner=p.owner, mission_id=d.mission_id, expires_at=p.expires_at,
                     skill=p.skill, since_seq=seq, robot_id=robot_id, scope=p.scope, fence=seq)
