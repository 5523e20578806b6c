"""One model turn's tool calls, each to exactly one result.

``TurnExecutor.run`` takes the calls of one model response in order:
validates each, asks for approval where the site's policy says so, runs a
capability or dispatches a physical action (at most one per turn), and
journals every result with its receipt. It returns a ``TurnResult``: the
results, the accepted action to supervise, and the done proposal to verify.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..clock import Clock
from ..config import HarnessConfig
from ..errors import UnknownToolError, UsageError
from ..execution import results
from ..execution.dispatch import Dispatcher
from ..lifecycle import ManagedAction
from ..payloads import ToolResultRecorded
from ..records import EventType, ToolCall, ToolResult, ToolResultStatus, WorldSnapshot
from ..skills import ASK_OPERATOR, PROPOSE_DONE, PROPOSE_PLAN, RECOVERY_ONLY, SkillRegistry
from ..authority.receipts import Receipts
from .ledger import MissionLedger
from .operator import OperatorDesk
from .plans import PlanDesk
from .progress import MALFORMED_ARGUMENTS
from .state import MissionState, StopFlag

__all__ = ["TurnExecutor", "TurnResult"]


@dataclass(frozen=True)
class TurnResult:
    results: tuple[ToolResult, ...]
    """One result per tool call, in the model's order."""
    action: ManagedAction | None = None
    """The physical action the backend accepted this turn (supervised next), if any."""
    done_call: ToolCall | None = None
    """The accepted ``propose_done`` call, if any (verified after supervision)."""


@dataclass(eq=False, kw_only=True)
class TurnExecutor:
    config: HarnessConfig
    state: MissionState
    ledger: MissionLedger
    skills: SkillRegistry
    dispatcher: Dispatcher
    operator: OperatorDesk
    receipts: Receipts
    clock: Clock
    stop: StopFlag
    plans: PlanDesk | None = None

    def run(self, turn_id: str, decision: WorldSnapshot, calls: Sequence[ToolCall], *,
            proposed_by: str = "planner") -> TurnResult:
        """``proposed_by``: ``planner`` (a model turn), or ``recovery`` (the recovery policy's own call of a
        ``RECOVERY_ONLY`` skill, such as a Nav2 behaviour); only the recovery policy may call those."""
        out: list[ToolResult] = []
        dispatched: ManagedAction | None = None
        done_call: ToolCall | None = None
        stop_reason: str | None = None
        seen: set[str] = set()
        limit = self.config.limits.max_tool_calls_per_turn
        for index, call in enumerate(calls):
            action: ManagedAction | None = None
            if call.id in seen:
                result = results.error(call, "duplicate_tool_call_id",
                                       f"tool call id {call.id!r} was already used in this turn")
            elif index >= limit:
                result = results.rejected(call, f"more than {limit} tool calls in one turn")
            elif self.stop:
                result = results.cancelled(call, f"stopped: {self.stop.reason}; not run")
            elif stop_reason is not None:
                result = results.result(call, ToolResultStatus.SKIPPED, {"reason": stop_reason})
            elif call.name == PROPOSE_DONE:
                result = self._accept_done_call(call, first=done_call is None)
                if result.status is ToolResultStatus.OK:
                    done_call = call
            elif call.name == PROPOSE_PLAN and self.plans is not None:
                # A plan is checked whole before anything moves; an accepted one runs from the next turn.
                result = (self.plans.propose(call, decision) if len(calls) == 1 else
                          results.rejected(call, "a plan is proposed alone, in a turn of its own", code="plan_refused"))
            else:
                self.state.call_started[call.id] = self.clock.now()
                result, action = self._run_one(turn_id, decision, call, physical_done=dispatched is not None,
                                               proposed_by=proposed_by)
                if result.status is ToolResultStatus.PRECONDITION_CHANGED:
                    stop_reason = "an earlier call in this turn hit precondition_changed; decide again on the fresh snapshot"
            seen.add(call.id)
            out.append(result)
            if action is not None:
                dispatched = action
            drafts = [self.ledger.draft(EventType.TOOL_RESULT_RECORDED, model_turn_id=turn_id, tool_call_id=call.id,
                                         robot_action_id=result.action_id or "", payload=ToolResultRecorded.of(result))]
            if action is None and call.name not in (PROPOSE_DONE, PROPOSE_PLAN):
                # Everything but an accepted physical action ends here: its receipt
                # is written with its result, in the same commit. An accepted
                # action's receipt is written with its verified outcome.
                drafts += self.receipts.for_result(turn_id, decision, call, result)
            self.ledger.append_many(drafts)
            self.state.calls.append({
                "id": call.id, "name": call.name, "arguments": call.arguments,
                "result": result.model_dump(mode="json", exclude={"kind", "format_version"}),
                "action_id": result.action_id,
            })
        return TurnResult(results=tuple(out), action=dispatched, done_call=done_call)

    def _accept_done_call(self, call: ToolCall, *, first: bool) -> ToolResult:
        try:
            self.skills.get(PROPOSE_DONE).validate(call.arguments)
        except UsageError as exc:
            return results.error(call, exc.code, exc.message, exc.details)
        if not first:
            return results.rejected(call, "one done proposal per turn")
        return results.result(call, ToolResultStatus.OK, {
            "note": "verification requested: the independent verifier decides, against the goal's completion "
                    "contract, receipts and fresh observations; its verdict arrives in the next turn",
        })

    def _run_one(self, turn_id: str, decision: WorldSnapshot, call: ToolCall, *,
                 physical_done: bool, proposed_by: str) -> tuple[ToolResult, ManagedAction | None]:
        if MALFORMED_ARGUMENTS in call.arguments:
            return results.error(call, "malformed_arguments",
                                 f"{call.name}: the arguments are not a JSON object; nothing was run",
                                 {"raw": str(call.arguments[MALFORMED_ARGUMENTS])[:500]}), None
        try:
            skill = self.skills.get(call.name)
            if RECOVERY_ONLY in skill.tags and proposed_by != "recovery":
                raise UnknownToolError(f"unknown tool {call.name!r} (the recovery policy's own: not offered to "
                                       "the planner)", tool=call.name,
                                       available=sorted(n for n in self.skills.names()
                                                        if RECOVERY_ONLY not in self.skills.get(n).tags))
            args = skill.validate(call.arguments)
        except UsageError as exc:
            return results.error(call, exc.code, exc.message, exc.details), None
        if skill.name == ASK_OPERATOR:
            return self.operator.ask(turn_id, call, args), None
        if skill.physical and physical_done:
            return results.rejected(
                call, "at most one new managed physical action per decision step; propose it again next turn",
                code="one_physical_action_per_step"), None
        if self.operator.policy(skill) is not None:
            refused = self.operator.approve(turn_id, call, skill, args)
            if refused is not None:
                return refused, None
        if skill.physical:
            return self.dispatcher.navigate(turn_id, decision, call, skill, args)
        return self.dispatcher.run_capability(decision, call, skill, args), None
