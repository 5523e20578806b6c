"""Resource leases and dispatch keys: the only writer of a mission's lease records.

A physical action or a resource-holding capability call takes an exclusive
lease on each of its skill's resources before it runs (durable, with the
keyed dispatch intent), and ends it on a confirmed end (released) or an
unknown one (blocked until reconciled). The dispatch key (task, plan node,
attempt, state version) makes the same request twice the same request.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from pydantic import BaseModel

from ..durable import DispatchKey, LeaseConflict, ReleaseReason
from ..lifecycle import ManagedAction
from ..payloads import LeaseAcquired, ReceiptRecorded, RobotActionStarted, ToolResultRecorded, payload_of
from ..reconcile import Reconciler
from ..records import ActionStatus, EventDraft, EventType, ToolResultStatus
from ..skills import Skill
from ..mission.ledger import MissionLedger
from ..mission.state import MissionState

__all__ = ["Leases", "LEASE_MARGIN_S"]

LEASE_MARGIN_S = 10.0
"""A lease outlives its action's supervision bound by this much before it counts as orphaned."""


@dataclass(eq=False, kw_only=True)
class Leases:
    state: MissionState
    ledger: MissionLedger
    reconciler: Reconciler

    def acquire_drafts(self, skill: Skill, owner: str, expires_at: float, *,
                       intent: dict[str, Any] | None = None) -> list[EventDraft]:
        """``intent``: a capability call's keyed dispatch intent, carried by each of its leases."""
        return [self.ledger.draft(EventType.LEASE_ACQUIRED, robot_action_id=owner if skill.physical else "",
                                   tool_call_id="" if skill.physical or intent is None else owner, payload={
            "resource": r, "owner": owner, "expires_at": round(expires_at, 3), "skill": skill.name,
            **({"intent": intent} if intent is not None else {})})
            for r in skill.resources]

    def end_drafts(self, skill: Skill, owner: str, why: ReleaseReason | None, detail: str) -> list[EventDraft]:
        """Release (``why`` given: confirmed terminal or stopped) or block (None: outcome unknown) a call's leases."""
        if why is None:
            return [self.ledger.draft(EventType.LEASE_BLOCKED, payload={"resource": r, "owner": owner, "reason": detail})
                    for r in skill.resources]
        return [self.ledger.draft(EventType.LEASE_RELEASED, payload={"resource": r, "owner": owner, "why": why.value,
                                                                       "detail": detail}) for r in skill.resources]

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
