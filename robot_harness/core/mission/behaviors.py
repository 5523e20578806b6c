"""The recovery policy's own calls: one Nav2 behaviour as a managed action, through the same gate.

The ``nav2_behavior`` rung (``core/recovery.py``) runs a behaviour (clear the
costmaps, back up, spin, wait) the way a planner's call runs: journaled as a
tool call (``proposed_by: recovery``) with the snapshot it was decided on,
validated, approved where the site's policy says so, checked on a fresh
snapshot, keyed and leased, sent, supervised to a verified outcome, with
exactly one tool result and one receipt. Only this module calls the
``RECOVERY_ONLY`` skills; the planner is never offered them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..clock import IdGenerator
from ..execution.supervise import ActionSupervisor
from ..payloads import ToolCallRecorded
from ..records import EventType, RuntimeEvent, ToolCall, ToolResult
from .ledger import MissionLedger
from .observations import Observations
from .state import MissionState
from .turn import TurnExecutor

__all__ = ["BehaviorRunner"]


@dataclass(eq=False, kw_only=True)
class BehaviorRunner:
    state: MissionState
    ledger: MissionLedger
    observations: Observations
    turns: TurnExecutor
    supervisor: ActionSupervisor
    ids: IdGenerator

    def run(self, turn_id: str, name: str, arguments: dict[str, Any]) -> tuple[ToolResult, RuntimeEvent | None]:
        """Run ``name`` with ``arguments`` under the turn whose failure it answers: its tool result, and its
        verified outcome when the backend accepted it (None otherwise: the result says why)."""
        call = ToolCall(id=self.ids.new("recovery-call"), name=name, arguments=arguments)
        snap, draft = self.observations.capture("before_recovery_behavior")
        self.ledger.append_many([draft, self.ledger.draft(
            EventType.TOOL_CALL_RECORDED, model_turn_id=turn_id, tool_call_id=call.id, snapshot_id=snap.snapshot_id,
            payload=ToolCallRecorded(name=name, arguments=arguments, index=0, proposed_by="recovery"))])
        turn = self.turns.run(turn_id, snap, [call], proposed_by="recovery")
        (result,) = turn.results
        outcome = self.supervisor.supervise(turn.action) if turn.action is not None else None
        return result, outcome
