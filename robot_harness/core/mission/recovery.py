"""A turn's setback and what recovery decides about it.

``worst_failure`` picks the one failure of a turn that recovery answers;
``Recovery.recover`` asks the recovery policy (in-process, or the recovery
node through a port with the same ``decide``), journals the failure with
the rung chosen, charges its budget, and returns what the planner hears
next, or the mission's end on a terminal rung (safe stop, human handoff).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..clock import IdGenerator
from ..config import HarnessConfig
from ..records import ActionStatus, EventType, MissionStatus, RuntimeEvent, ToolResult, ToolResultStatus
from ..recovery import Failure, FailureKind, RecoveryBudgets, Rung
from ..skills import BEHAVIOR_SKILLS
from .ledger import MissionLedger
from .progress import ProgressViews
from .state import MissionEnd, MissionState
from .usage import ModelUsage

__all__ = ["Recovery", "RecoveryStep", "worst_failure"]

_MODEL_ERRORS = frozenset({"unknown_tool", "invalid_arguments", "malformed_arguments", "duplicate_tool_call_id"})
_RUNG_ADVICE = {
    Rung.RE_PERCEIVE: "decide again on the fresh snapshot in this turn",
    Rung.ADJUST_VIEW: "look at the failure's evidence (runtime_events, last_tool_results and the widened "
                      "progress.recent_failures) before acting",
    Rung.LOCAL_REPLAN: "re-plan only what is left (progress.frontier); verified steps stay done",
    Rung.SWITCH: "use one of the authorized alternative skills listed in alternatives (or: another provider)",
    Rung.NAV2_BEHAVIOR: "retry what failed",
}


@dataclass(frozen=True)
class RecoveryStep:
    """The rung's advice for the planner, or (a terminal rung) the mission's end."""

    event: RuntimeEvent | None = None
    end: MissionEnd | None = None


def worst_failure(results: Sequence[ToolResult], outcome: RuntimeEvent | None, *, physical: frozenset[str],
                  ids: IdGenerator) -> Failure | None:
    """The one failure of this turn that recovery answers (the most severe, if several)."""
    found: list[tuple[int, Failure]] = []

    def add(rank: int, kind: FailureKind, reason: str, **kw: Any) -> None:
        found.append((rank, Failure(failure_id=ids.new("fail"), failure_kind=kind, reason=reason, **kw)))

    if outcome is not None and outcome.state in (ActionStatus.UNKNOWN.value, ActionStatus.FAILED.value):
        kind = FailureKind.ACTION_UNKNOWN if outcome.state == ActionStatus.UNKNOWN.value else FailureKind.ACTION_FAILED
        nav2 = outcome.detail.get("nav2_cause") or outcome.detail.get("nav2_error")  # a route's waypoint: its cause
        add(0 if kind is FailureKind.ACTION_UNKNOWN else 1, kind, str(outcome.detail.get("reason", "")),
            skill=str(outcome.detail.get("skill", "")), tool_call_id=outcome.tool_call_id, action_id=outcome.action_id,
            nav2_kind=str(nav2.get("kind", "")) if isinstance(nav2, dict) else "")
    for r in results:
        if r.status is ToolResultStatus.PRECONDITION_CHANGED:
            add(3, FailureKind.PRECONDITION_CHANGED, "preconditions changed before dispatch", skill=r.name,
                tool_call_id=r.tool_call_id)
        elif r.status is ToolResultStatus.REJECTED and r.content.get("code") == "lease_conflict":
            add(1, FailureKind.RESOURCE_BLOCKED, str(r.content.get("reason", "")), skill=r.name,
                tool_call_id=r.tool_call_id)
        elif r.status is ToolResultStatus.REJECTED and r.name in physical and r.action_id:
            add(2, FailureKind.DISPATCH_REJECTED, str(r.content.get("reason", "")), skill=r.name,
                tool_call_id=r.tool_call_id, action_id=r.action_id)
        elif r.status is ToolResultStatus.REJECTED and r.name in physical:
            add(4, FailureKind.INVALID_MODEL_OUTPUT, str(r.content.get("reason", "")), skill=r.name,
                tool_call_id=r.tool_call_id)
        elif r.status is ToolResultStatus.ERROR:
            code = (r.error or {}).get("code", "")
            kind = FailureKind.INVALID_MODEL_OUTPUT if code in _MODEL_ERRORS else FailureKind.TOOL_ERROR
            add(4, kind, f"{code}: {(r.error or {}).get('message', '')}", skill=r.name, tool_call_id=r.tool_call_id)
    return min(found, key=lambda x: x[0])[1] if found else None


@dataclass(eq=False, kw_only=True)
class Recovery:
    config: HarnessConfig
    state: MissionState
    ledger: MissionLedger
    views: ProgressViews
    usage: ModelUsage
    policy: Any
    abandon: Callable[[], str]
    run_behavior: Callable[[str, str, dict[str, Any]], tuple[ToolResult, RuntimeEvent | None]] | None = None
    """Runs one Nav2 behaviour (skill name, arguments) as a managed action for the ``nav2_behavior`` rung:
    its tool result, and its verified outcome when the backend accepted it (``mission/behaviors``)."""

    def recover(self, turn_id: str, failure: Failure) -> RecoveryStep:
        """Journal the failure and the rung recovery chose; end the mission on a terminal rung."""
        s = self.state
        if failure.nav2_kind and self.run_behavior is not None and failure.skill not in BEHAVIOR_SKILLS:
            # what the site lists for this kind of Nav2 failure (a failed behaviour is not answered by another)
            failure = failure.model_copy(update={"behaviors": tuple(
                self.config.recovery.nav2_behaviors.get(failure.nav2_kind, ()))})
        contract = self.ledger.task_state().contract
        budgets = RecoveryBudgets(**contract.recovery_budgets) if contract and contract.recovery_budgets else None
        context: dict[str, Any] = {}
        if getattr(self.policy, "advisor", True) is not None:
            # C4 for an advisor (in-process, or the recovery node's); the rule ladder alone does not read it.
            context = {"failure": failure.model_dump(mode="json"), "spent": {r.value: n for r, n in s.spent.items()},
                       "view": self.views.recovery_view().as_list()}
        decision = self.policy.decide(failure, spent=s.spent, context=context, budgets=budgets)
        calls = self.usage.take("recovery", self.policy)
        s.spent[decision.rung] = s.spent.get(decision.rung, 0) + 1
        node = s.node_of_call.get(failure.tool_call_id)
        if node is not None and decision.rung not in (Rung.SAFE_STOP, Rung.HUMAN_HANDOFF):
            s.attempts[node] = s.attempts.get(node, 1) + 1  # recovery authorizes a new attempt: a new key
        self.ledger.append(EventType.RECOVERY_DECIDED, model_turn_id=turn_id, tool_call_id=failure.tool_call_id,
                            robot_action_id=failure.action_id, payload={
                                "failure": failure.model_dump(mode="json"), "decision": decision.model_dump(mode="json"),
                                "llm_calls": calls})
        if decision.rung is Rung.SAFE_STOP:
            stopped = self.abandon()
            return RecoveryStep(end=MissionEnd(
                MissionStatus.UNKNOWN, f"safe stop after {failure.failure_kind.value} ({failure.reason}); "
                f"{decision.reason}" + (f"; {stopped} asked to stop" if stopped else "")))
        if decision.rung is Rung.HUMAN_HANDOFF:
            return RecoveryStep(end=MissionEnd(
                MissionStatus.WAITING_USER, f"handed to an operator after {failure.failure_kind.value} "
                f"({failure.reason}); {decision.reason}"))
        if decision.rung is Rung.LOCAL_REPLAN and self.config.recovery.repair == "whole":
            # the baseline: re-plan (and redo) the whole mission
            s.progress_since = self.ledger.task_state().state_version
        detail: dict[str, Any] = {"failure": failure.failure_kind.value, "reason": failure.reason,
                                  "do": _RUNG_ADVICE[decision.rung], "budgets_left": decision.budgets_left}
        if decision.rung is Rung.ADJUST_VIEW:
            s.wide_view_turns = 1  # the next planner turn sees more failure history and evidence
        if decision.rung is Rung.SWITCH and failure.providers:
            detail.update(self._fallback(turn_id, failure))
        elif decision.rung is Rung.SWITCH:
            # Only the alternatives authorized for the failed skill (config recovery.alternatives).
            detail["alternatives"] = list(self.config.recovery.alternatives.get(failure.skill or "", []))
        if decision.rung is Rung.NAV2_BEHAVIOR:
            detail.update(self._behave(turn_id, failure))
        return RecoveryStep(event=RuntimeEvent(type="recovery", tool_call_id=failure.tool_call_id,
                                               action_id=failure.action_id, state=decision.rung.value, detail=detail))

    def _fallback(self, turn_id: str, failure: Failure) -> dict[str, Any]:
        """Provider fallback (issue 18): the same call, the same obligation, another provider (routing
        excludes the one that failed this node), through the same gate, dispatch and verification."""
        call = next((c for c in self.state.calls if c["id"] == failure.tool_call_id), None)
        if not self.config.routing.fallback or self.run_behavior is None or call is None:
            return {"providers": list(failure.providers),
                    "do": f"{failure.provider or 'the provider'} failed; retry the same call: routing sends it to "
                          f"another provider ({', '.join(failure.providers)})"}
        result, outcome = self.run_behavior(turn_id, str(call["name"]), dict(call["arguments"]))
        provider = self.state.provider_of.get(result.action_id or "", "")
        state = outcome.state if outcome is not None else result.status.value
        content = result.content if isinstance(result.content, dict) else {}
        why = (outcome.detail.get("reason", "") if outcome is not None else
               content.get("reason") or (result.error or {}).get("message", ""))
        return {"failed_provider": failure.provider, "fallback_provider": provider, "fallback_call_id": result.tool_call_id,
                "fallback_outcome": state,
                "do": (f"the harness re-ran {call['name']} on {provider or 'another provider'} after {failure.provider} "
                       f"failed ({state}{': ' + why if why else ''}); "
                       + ("its evidence counts for the obligation, go on with what is left" if state == "SUCCEEDED"
                          else "re-plan what is left"))}

    def _behave(self, turn_id: str, failure: Failure) -> dict[str, Any]:
        """Run the next behaviour of the failure's list (one per ``nav2_behavior`` rung taken this mission,
        the last one again once the list is spent) and say what it did, for the planner."""
        assert self.run_behavior is not None and failure.behaviors
        taken = self.state.spent.get(Rung.NAV2_BEHAVIOR, 1) - 1  # this decision is already charged
        name = failure.behaviors[min(taken, len(failure.behaviors) - 1)]
        args = dict(self.config.recovery.behavior_args.get(name, {}))
        result, outcome = self.run_behavior(turn_id, name, args)
        if outcome is not None:
            did = f"{outcome.state}: {outcome.detail.get('reason', '')}"
        else:
            content = result.content if isinstance(result.content, dict) else {}
            did = f"{result.status.value}: {content.get('reason') or (result.error or {}).get('message', '')}"
        return {"behavior": name, "arguments": args, "behavior_call_id": result.tool_call_id,
                "behavior_outcome": outcome.state if outcome is not None else result.status.value,
                "do": f"the harness ran Nav2's {name} ({did}); retry what failed (a new attempt is authorized), "
                      "or re-plan if the behaviour did not help"}
