"""Resource leases and dispatch keys: the only writer of a mission's lease records.

A physical action or a resource-holding capability call takes an exclusive
lease on each of its skill's resources before it runs (durable, with the
keyed dispatch intent), and ends it on a confirmed end (released) or an
unknown one (blocked until reconciled). The dispatch key (task, plan node,
attempt, state version) makes the same request twice the same request.

Site resources (``core/site.py``, issue 19) are leased the same way, across
every robot writing the journal database: a call that needs one another robot
holds waits for it (bounded by ``site.lease_wait_s``, each wait journaled as
``LEASE_WAITED``) and is refused with the holder named when it stays taken; a
place's resource stays leased while the robot is inside the place and is
handed from action to action of the same robot by presenting its fencing
token, so a robot that lost it (a pause past its expiry, an operator's clear)
cannot act on it again. Another robot's lease is never settled here: only its
own harness (which can ask its robot) or an operator ends it.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from typing import Any

from pydantic import BaseModel

from ..clock import Clock
from ..durable import SITE, DispatchKey, Lease, LeaseConflict, LeaseState, ReleaseReason
from ..lifecycle import ManagedAction
from ..payloads import LeaseAcquired, LeaseWaited, ReceiptRecorded, RobotActionStarted, ToolResultRecorded, payload_of
from ..reconcile import Reconciler
from ..records import ActionStatus, EventDraft, EventType, Pose2D, ToolResultStatus
from ..site import Site
from ..skills import Skill
from ..mission.ledger import MissionLedger
from ..mission.state import MissionState

__all__ = ["Leases", "LEASE_MARGIN_S"]

LEASE_MARGIN_S = 10.0
"""A lease outlives its action's supervision bound by this much before it counts as orphaned."""

WAIT_REFRESH_S = 2.0
"""A robot waiting for a site resource says so again this often (LEASE_WAITED ``waiting``); a wait not
renewed for three times this long is a dead robot's (its harness was killed while it waited) and holds
nobody back."""


@dataclass(eq=False, kw_only=True)
class Leases:
    state: MissionState
    ledger: MissionLedger
    reconciler: Reconciler
    site: Site = field(default_factory=Site)
    clock: Clock | None = None
    sleep: Callable[[float], None] | None = None
    """Paces a wait for a site resource another robot holds (None: no waiting, refused at once)."""
    _waiting: float | None = None
    """When the wait going on began (monotonic), for ``free_site`` to end its record however it ends."""
    _handover: dict[str, Lease] = field(default_factory=dict)
    """Site leases this robot holds under an ended owner (it is still inside their place), found by
    ``free_site`` for the next ``acquire_drafts`` to hand on."""

    def acquire_drafts(self, skill: Skill, owner: str, expires_at: float, *,
                       intent: dict[str, Any] | None = None, site: Iterable[str] = ()) -> list[EventDraft]:
        """``intent``: a capability call's keyed dispatch intent, carried by each of its leases. ``site``: the
        site resources the call needs (``free_site`` looked at them first); one this robot still holds
        under an ended owner is handed on: released by its token and acquired anew, in the same commit."""
        ids = {"robot_action_id": owner if skill.physical else "",
               "tool_call_id": "" if skill.physical or intent is None else owner}
        common = {"owner": owner, "expires_at": round(expires_at, 3), "skill": skill.name,
                  **({"intent": intent} if intent is not None else {})}
        drafts = [self.ledger.draft(EventType.LEASE_ACQUIRED, **ids, payload={"resource": r, **common})
                  for r in skill.resources]
        for r in site:
            old = self._handover.pop(r, None)
            if old is not None:
                drafts.append(self.ledger.draft(EventType.LEASE_RELEASED, payload={
                    "resource": r, "owner": old.owner, "why": ReleaseReason.HANDED_OVER.value, "scope": SITE,
                    "fence": old.fence, "detail": f"handed on to {owner} (the robot is still inside)"}))
            drafts.append(self.ledger.draft(EventType.LEASE_ACQUIRED, **ids,
                                            payload={"resource": r, **common, "scope": SITE}))
        return drafts

    def end_drafts(self, skill: Skill, owner: str, why: ReleaseReason | None, detail: str, *,
                   pose: Pose2D | None = None) -> list[EventDraft]:
        """Release (``why`` given: confirmed terminal or stopped) or block (None: outcome unknown) a call's leases.

        Its site leases end the same way, each presenting its fencing token, except a place's resource the
        robot may still be inside (at ``pose``: a fresh, localized pose observed after the action's end;
        None, unknown, counts as inside, never a guess from an older sample): that one stays held until an
        action of this robot is seen to leave the place."""
        if why is None:
            drafts = [self.ledger.draft(EventType.LEASE_BLOCKED, payload={"resource": r, "owner": owner,
                                                                           "reason": detail})
                      for r in skill.resources]
        else:
            drafts = [self.ledger.draft(EventType.LEASE_RELEASED, payload={"resource": r, "owner": owner,
                                                                            "why": why.value, "detail": detail})
                      for r in skill.resources]
        mine = [lease for lease in self._site_leases() if lease.owner == owner]
        if not mine:
            return drafts
        inside = set(self.site.inside(pose)) if pose is not None else None
        for lease in mine:
            if why is None:
                drafts.append(self.ledger.draft(EventType.LEASE_BLOCKED, payload={
                    "resource": lease.resource, "owner": owner, "reason": detail, "scope": SITE, "fence": lease.fence}))
            elif self.site.place_bound(lease.resource) and (inside is None or lease.resource in inside):
                continue  # still inside its place: held on, handed to this robot's next action
            else:
                drafts.append(self.ledger.draft(EventType.LEASE_RELEASED, payload={
                    "resource": lease.resource, "owner": owner, "why": why.value, "detail": detail, "scope": SITE,
                    "fence": lease.fence}))
        return drafts

    def _site_leases(self) -> list[Lease]:
        if not self.site.resources:
            return []
        journal = self.ledger.journal
        return [lease for lease in journal.leases().values()
                if lease.scope == SITE and lease.robot_id == journal.robot_id]

    def site_needs(self, skill: Skill, start: Pose2D | None = None, poses: Iterable[Pose2D] = ()) -> tuple[str, ...]:
        """The site resources a call needs (its skill's; for a motion also the places it starts in, passes and
        ends in)."""
        if not self.site.resources:
            return ()
        if skill.physical:
            return self.site.for_motion(skill.name, start, poses)
        return self.site.for_skill(skill.name)

    def free_site(self, needs: Iterable[str], *, deadline: float = float("inf")) -> LeaseConflict | None:
        """Make sure each needed site resource is free or this robot's to hand on; wait (journaled, bounded
        by ``site.lease_wait_s`` and ``deadline``, a monotonic time) while another robot holds one, or while
        another robot that began waiting for it earlier still waits (first come, first served: a robot that
        lets the elevator go and wants it again queues behind the robot that waited for it). The conflict
        that remains, if any: the holder named (robot, mission, owner, fence)."""
        self._handover = {}
        for resource in needs:
            try:
                conflict = self._wait_for(resource, deadline)
            except BaseException:
                if self._waiting is not None:  # a wait cut short by an error or a Stop's exception: said so
                    with contextlib.suppress(Exception):
                        self._waited(resource, "stopped", None, self._waiting)
                raise
            finally:
                self._waiting = None
            if conflict is not None:
                return conflict
        return None

    def _wait_for(self, resource: str, deadline: float) -> LeaseConflict | None:
        """``free_site`` for one resource."""
        journal = self.ledger.journal
        started: float | None = None
        mine = 0  # the seq of this robot's own "waiting" record, once it waits
        renewed = 0.0
        while True:
            lease = journal.leases().get(resource)
            if lease is not None and lease.robot_id == journal.robot_id:
                lease, conflict = self._own(lease)
                if conflict is not None:
                    return conflict
                if lease is not None:  # this robot's, held under an ended owner: handed on
                    self._handover[resource] = lease
                    if started is not None:
                        self._waited(resource, "free", None, started)
                    return None
            blocker = lease if lease is not None else self._ahead(resource, mine)
            if blocker is None:
                if started is not None:
                    self._waited(resource, "free", None, started)
                return None
            now = self.clock.monotonic() if self.clock is not None else 0.0
            if started is None:
                started = renewed = self._waiting = now
                mine = self._waited(resource, "waiting", blocker, started)[1]
            elif now - renewed >= WAIT_REFRESH_S:  # still waiting: said again, so nobody takes this for a dead robot's
                renewed = now
                self._waited(resource, "waiting", blocker, started)
            limit = min(started + self.site.config.lease_wait_s, deadline)
            stop = self.ledger.stop_reason()
            if stop is not None or now >= limit or self.sleep is None or self.clock is None:
                waited = self._waited(resource, "stopped" if stop is not None else "refused", blocker, started)[0]
                what = (f"held by robot {blocker.robot_id or '(unnamed)'} under fencing token {blocker.fence}"
                        if blocker.fence else f"robot {blocker.robot_id} asked for it first and still waits")
                return LeaseConflict.of(blocker, f"{what}; waited {waited:.1f} s"
                                                 + (f", stopped: {stop}" if stop is not None else ""))
            self.sleep(min(self.site.config.poll_s, max(limit - now, 0.0)))

    def _ahead(self, resource: str, mine: int) -> Lease | None:
        """The earliest wait for ``resource`` by another robot that is still on (begun before this robot's own
        at seq ``mine``, when it waits; never ended; within its own limit), as a stand-in lease naming that
        robot (fence 0: nobody holds it yet), or None."""
        journal = self.ledger.journal
        open_waits: dict[str, tuple[Any, LeaseWaited, float]] = {}
        """robot -> (the first record of its wait going on, its payload, when it last said it still waits)"""
        for ev in journal.events(types=[EventType.LEASE_WAITED]):
            p = payload_of(ev, LeaseWaited)
            if p.resource != resource or ev.robot_id == journal.robot_id:
                continue
            if p.outcome == "waiting":
                first = open_waits.get(ev.robot_id)
                open_waits[ev.robot_id] = (first[0], first[1], ev.stamp) if first is not None else (ev, p, ev.stamp)
            else:
                open_waits.pop(ev.robot_id, None)
        now = self.clock.now() if self.clock is not None else float("inf")
        live = [ev for ev, p, last in open_waits.values()
                if ev.stamp + p.limit_s >= now and last + 3 * WAIT_REFRESH_S >= now and (not mine or ev.seq < mine)]
        if not live:
            return None
        first = min(live, key=lambda ev: ev.seq)
        return Lease(resource=resource, owner="(waiting)", mission_id=first.mission_id, robot_id=first.robot_id,
                     scope=SITE)

    def _own(self, lease: Lease) -> tuple[Lease | None, LeaseConflict | None]:
        """This robot's own site lease: (the lease to hand on, or None once it was settled; a conflict)."""
        active = self.state.active
        if lease.state is LeaseState.HELD and active is not None and not active.terminal \
                and active.action_id == lease.owner:
            return lease, LeaseConflict.of(lease, "this robot's running action holds it")
        if lease.state is LeaseState.BLOCKED:
            settled = self.reconciler.settle_lease(lease)
            now = self.ledger.journal.leases().get(lease.resource)
            if now is not None and now.state is LeaseState.BLOCKED:
                return now, LeaseConflict.of(now, settled.detail if settled else "")
            return (now if now is not None and now.robot_id == lease.robot_id else None), None
        return lease, None

    def _waited(self, resource: str, outcome: str, lease: Lease | None, started: float) -> tuple[float, int]:
        """Journal a wait's start or end; (seconds waited, the record's seq)."""
        now = self.clock.monotonic() if self.clock is not None else started
        (ev,) = self.ledger.append_many([self.ledger.draft(EventType.LEASE_WAITED, payload=LeaseWaited(
            resource=resource, outcome=outcome,  # type: ignore[arg-type]
            holder_robot=lease.robot_id if lease is not None else "",
            holder_mission=lease.mission_id if lease is not None else "",
            holder_owner=lease.owner if lease is not None else "", fence=lease.fence if lease is not None else 0,
            waited_s=round(now - started, 3), limit_s=self.site.config.lease_wait_s))])
        return now - started, ev.seq

    def free(self, skill: Skill) -> LeaseConflict | None:
        """Settle leases on the skill's resources left by ended owners; the conflict that remains, if any."""
        journal = self.ledger.journal
        leases = journal.leases()
        for resource in skill.resources:
            lease = leases.get(resource)
            if lease is None:
                continue
            settled = self.reconciler.settle_lease(lease)
            if settled is None or resource not in settled.released:
                held = journal.leases().get(resource)
                if held is not None:
                    return LeaseConflict.of(held, settled.detail if settled else "")
        return None

    # -- dispatch keys --------------------------------------------------------------

    def key(self, skill: Skill, args: BaseModel) -> DispatchKey:
        """This call's dispatch key: its plan node, the attempt recovery authorized, this turn's state version."""
        s = self.state
        node = DispatchKey.for_call(mission_id=s.mission_id, skill=skill.name,
                                    arguments=args.model_dump(mode="json", exclude_none=True), attempt=1,
                                    state_version=0).node
        return DispatchKey(mission_id=s.mission_id, node=node, attempt=s.attempts.get(node, 1),
                           state_version=s.turn_state_version)

    def just_done(self, key: DispatchKey) -> Any:
        """The execution record of this node if it is the last physical action, verified SUCCEEDED, and no
        new attempt was authorized since: asking for it again (e.g. after a lost acknowledgment that was
        then found) is the same request, not a new motion. Going back to a place after going elsewhere
        is a new request."""
        last: ManagedAction | None = self.state.actions[-1] if self.state.actions else None
        if last is None or last.state is not ActionStatus.SUCCEEDED:
            return None
        record = self.ledger.journal.dispatch_for_action(last.action_id)
        if record is None or not record.key.startswith(f"{key.mission_id}/{key.node}/a{key.attempt}/"):
            return None
        return record

    def capability_record(self, key: DispatchKey) -> dict[str, Any] | None:
        """The execution record of a keyed capability call that this request repeats, or None.

        A repeat is the same key (task, node, attempt, state version), or, as for
        a navigation (``just_done``), the same node and attempt when that call is
        the mission's last keyed invocation, it succeeded, and no verdict has been
        given since (after one, e.g. an image judged stale, calling again is the
        planner's answer to it, not a repeat). Read from the journal, the source
        of truth.
        """
        intents: list[tuple[str, str, int]] = []
        """(key, tool call id, seq) of every keyed invocation of the mission, navigation or capability, in order."""
        results: dict[str, ToolResultRecorded] = {}
        receipts: dict[str, str] = {}
        last_verdict_seq = 0
        for ev in self.ledger.events(EventType.ROBOT_ACTION_STARTED, EventType.LEASE_ACQUIRED,
                                      EventType.TOOL_RESULT_RECORDED, EventType.RECEIPT_RECORDED,
                                      EventType.VERDICT_RECORDED):
            if ev.type is EventType.ROBOT_ACTION_STARTED:
                dispatch = payload_of(ev, RobotActionStarted).dispatch
                if dispatch is not None and dispatch.key:
                    intents.append((dispatch.key, ev.tool_call_id, ev.seq))
            elif ev.type is EventType.LEASE_ACQUIRED:
                intent = payload_of(ev, LeaseAcquired).intent
                k = str(intent.get("key", "")) if intent is not None else ""
                if k and not (intents and intents[-1][0] == k):  # one intent, one lease per resource
                    intents.append((k, str(intent.get("tool_call_id", "")), ev.seq))  # type: ignore[union-attr]
            elif ev.type is EventType.TOOL_RESULT_RECORDED:
                results[ev.tool_call_id] = payload_of(ev, ToolResultRecorded)
            elif ev.type is EventType.RECEIPT_RECORDED:
                receipts[ev.tool_call_id] = payload_of(ev, ReceiptRecorded).receipt.receipt_id
            elif ev.type is EventType.VERDICT_RECORDED:
                last_verdict_seq = ev.seq
        match, why = next((i for i in intents if i[0] == key.text), None), "same_key"
        if match is None and intents:
            last = intents[-1]
            done = results.get(last[1])
            if last[0].startswith(f"{key.mission_id}/{key.node}/a{key.attempt}/") \
                    and done is not None and done.status is ToolResultStatus.OK and last_verdict_seq < last[2]:
                match, why = last, "just_done"
        if match is None:
            return None
        result = results.get(match[1])
        return {"key": match[0], "match": why, "tool_call_id": match[1],
                "status": result.status.value if result is not None and result.status is not None else "",
                "content": result.content if result is not None else {},
                "error": result.error if result is not None else None,
                "receipt_id": receipts.get(match[1], "")}
