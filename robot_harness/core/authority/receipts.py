"""The only maker of receipts and OBSERVED facts.

A receipt is the immutable record of one invocation's end: a capability's
result, a refusal, or a physical action's verified outcome. What a
successful receipt reports becomes OBSERVED facts (never trusted task
state: only the commit gate commits). Each receipt's state version is the
task state's, read from the ledger, plus one.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from ..clock import Clock, IdGenerator
from ..completion import EvidenceRef, Fact, FactStatus, Receipt, ReceiptStatus
from ..gate import record_draft
from ..lifecycle import ManagedAction
from ..nav_goals import ROUTE_KINDS, NavGoalKind
from ..outcome import waypoint_rows
from ..records import ActionStatus, Availability, EventDraft, EventType, ToolCall, ToolResult, ToolResultStatus, WorldSnapshot
from ..skills import PROPOSE_DONE
from ..mission.ledger import MissionLedger
from ..mission.observations import Observations
from ..mission.state import MissionState

__all__ = ["Receipts"]

_RECEIPT_STATUS = {
    ToolResultStatus.OK: ReceiptStatus.SUCCEEDED,
    ToolResultStatus.ERROR: ReceiptStatus.FAILED,
    ToolResultStatus.REJECTED: ReceiptStatus.REJECTED,
    ToolResultStatus.PRECONDITION_CHANGED: ReceiptStatus.REJECTED,
    ToolResultStatus.SKIPPED: ReceiptStatus.REJECTED,
    ToolResultStatus.CANCELLED: ReceiptStatus.REJECTED,
    ToolResultStatus.DENIED: ReceiptStatus.REJECTED,
}


@dataclass(eq=False, kw_only=True)
class Receipts:
    state: MissionState
    ledger: MissionLedger
    observations: Observations
    ids: IdGenerator
    clock: Clock
    physical_skills: frozenset[str]

    def for_result(self, turn_id: str, decision: WorldSnapshot, call: ToolCall, result: ToolResult) -> list[EventDraft]:
        """The receipt of a call that ended with its tool result (capabilities, refusals, failed dispatches)."""
        status = _RECEIPT_STATUS.get(result.status, ReceiptStatus.FAILED)
        if result.error and result.error.get("code") == "backend_timeout":
            status = ReceiptStatus.UNKNOWN
        evidence = self.observations.snapshot_evidence(decision.snapshot_id)
        artifact = result.content.get("artifact") if isinstance(result.content, dict) else None
        if isinstance(artifact, dict) and artifact.get("uri") and artifact.get("sha256"):
            evidence.append(EvidenceRef.for_artifact(artifact["uri"], artifact["sha256"]))
        return self._drafts(
            turn_id=turn_id, call=call, physical=call.name in self.physical_skills,
            result=result.model_dump(mode="json", exclude={"kind", "format_version"}), status=status,
            started_at=self.state.call_started.pop(call.id, self.clock.now()), decision_snapshot_id=decision.snapshot_id,
            action_id=result.action_id or "", pose_snapshot=decision, evidence=evidence,
        )

    def for_action(self, action: ManagedAction, post: WorldSnapshot | None, reason: str) -> list[EventDraft]:
        """The receipt of an accepted physical action, written with its terminal state: the verified
        outcome, or (``post`` None: supervision cut short, nothing observed after it) UNKNOWN."""
        status = {ActionStatus.SUCCEEDED: ReceiptStatus.SUCCEEDED, ActionStatus.FAILED: ReceiptStatus.FAILED}.get(
            action.state, ReceiptStatus.UNKNOWN)
        call = next((c for c in reversed(self.state.calls) if c["id"] == action.tool_call_id), None)  # the latest, mostly
        arguments = call["arguments"] if call is not None else {}
        evidence = self.observations.snapshot_evidence(post.snapshot_id) if post is not None else []
        result: dict[str, Any] = {"state": action.state.value, "reason": reason,
                                  "backend_goal_id": action.backend_goal_id, "backend_status": action.backend_status,
                                  "target": action.target.model_dump() if action.target else None}
        goal = action.goal
        if goal is not None and goal.kind is not NavGoalKind.NAVIGATE_TO_POSE:
            result["goal"] = goal.model_dump(mode="json")
        if goal is not None and goal.kind in ROUTE_KINDS:
            result["waypoints"] = waypoint_rows(goal, seen=action.waypoints_seen, reports=action.waypoint_reports,
                                                names=action.waypoint_names)
            for sid in dict.fromkeys(sid for sid, _t in action.waypoints_seen.values()):
                if post is None or sid != post.snapshot_id:
                    evidence += self.observations.snapshot_evidence(sid)
        return self._drafts(
            turn_id=action.model_turn_id, call=ToolCall(id=action.tool_call_id, name=action.skill, arguments=arguments),
            physical=True, status=status,
            started_at=self.state.call_started.pop(action.tool_call_id, self.clock.now()),
            result=result,
            decision_snapshot_id=action.decision_snapshot_id, outcome_snapshot_id=post.snapshot_id if post else "",
            action_id=action.action_id, pose_snapshot=post, evidence=evidence,
        )

    def _drafts(self, *, turn_id: str, call: ToolCall, physical: bool, result: dict[str, Any], status: ReceiptStatus,
                started_at: float, decision_snapshot_id: str, action_id: str, pose_snapshot: WorldSnapshot | None,
                evidence: list[EvidenceRef], outcome_snapshot_id: str = "") -> list[EventDraft]:
        task = self.ledger.task_state()
        assert task.contract is not None, "a receipt needs the frozen contract"
        seen = pose_snapshot if pose_snapshot is not None and pose_snapshot.pose is not None \
            and pose_snapshot.pose_meta.availability is Availability.AVAILABLE else None
        receipt = Receipt(
            receipt_id=self.ids.new("rcpt"), mission_id=self.state.mission_id, contract_revision=task.contract.revision,
            state_version=task.state_version + 1, plan_node_id=turn_id, invocation_id=call.id, skill=call.name,
            physical=physical, request={"arguments": call.arguments}, result=result, status=status,
            started_at=started_at, ended_at=self.clock.now(), decision_snapshot_id=decision_snapshot_id,
            outcome_snapshot_id=outcome_snapshot_id, action_id=action_id,
            pose_at_end=seen.pose if seen is not None else None,
            pose_stamp=seen.pose_meta.source_stamp if seen is not None else None,
            evidence=tuple(evidence),
        )
        type_, payload = record_draft(receipt)
        drafts = [self.ledger.draft(EventType(type_), model_turn_id=turn_id, tool_call_id=call.id,
                                     robot_action_id=action_id, payload=payload)]
        for fact in self._observed_facts(receipt):
            type_, payload = record_draft(fact)
            drafts.append(self.ledger.draft(EventType(type_), model_turn_id=turn_id, tool_call_id=call.id,
                                             payload=payload))
        return drafts

    def _observed_facts(self, receipt: Receipt) -> list[Fact]:
        """What a successful receipt reports, as OBSERVED facts (never trusted task state; only the gate commits)."""
        if receipt.status is not ReceiptStatus.SUCCEEDED:
            return []
        found: list[tuple[str, dict[str, Any]]] = []
        if receipt.pose_at_end is not None:
            found.append(("robot.pose", {**receipt.pose_at_end.model_dump(), "stamp": receipt.pose_stamp}))
        if receipt.skill != PROPOSE_DONE and not receipt.physical:
            content = receipt.result.get("content") if isinstance(receipt.result, dict) else None
            if isinstance(content, dict) and content:
                found.append((f"result.{receipt.skill}", content))
        facts = []
        heads = self.state.fact_heads
        for key, value in found:
            fact = Fact(fact_id=self.ids.new("fact"), mission_id=self.state.mission_id, key=key, value=value,
                        status=FactStatus.OBSERVED, provenance=tuple(receipt.evidence_ids()),
                        observed_at=receipt.ended_at, state_version=receipt.state_version,
                        supersedes=heads.get(key, ""))
            heads[key] = fact.fact_id
            facts.append(fact)
        return facts

