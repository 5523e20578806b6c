"""Plans (issue 18): a planner's whole plan, checked by the plan gate before anything moves, then run by the
harness one step per turn through the same dispatch path as any call.

``PlanDesk.propose`` answers a ``propose_plan`` call: the gate's verdict on the plan, from the robot's
place on the decision snapshot, with the obligations already evidenced needing no step. A refused plan
costs no motion; the model gets one result with the diagnostics. An accepted plan becomes the mission's
active plan; ``next_call`` gives its next step as the turn's call (no model call), and ``interrupt``
drops it when a step fails: the planner hears which steps ran and why the plan stopped, and plans the rest.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..clock import IdGenerator
from ..execution import results
from ..gate import TaskState
from ..plan_gate import Plan, PlanStep, check_plan
from ..records import RuntimeEvent, ToolCall, ToolResult, ToolResultStatus, WorldSnapshot
from ..planner_script import PLAN_SOURCE
from ..skills import PROPOSE_PLAN, SkillRegistry
from .ledger import MissionLedger
from .state import MissionState

__all__ = ["PlanDesk", "ActivePlan", "PLAN_SOURCE"]



@dataclass
class ActivePlan:
    call_id: str
    steps: tuple[PlanStep, ...]
    next: int = 0
    """Index of the next step to run."""
    ran: list[str] = field(default_factory=list)
    """The tool call ids of the steps run so far."""

    @property
    def pending(self) -> bool:
        return self.next < len(self.steps)


@dataclass(eq=False, kw_only=True)
class PlanDesk:
    state: MissionState
    ledger: MissionLedger
    skills: SkillRegistry
    evidenced: Callable[[TaskState, WorldSnapshot], set[str]]
    enforce: bool = True
    """False only for the benchmark's ablation (``eval_ablations.plan_gate``): a refused plan runs anyway."""
    active: ActivePlan | None = None

    def propose(self, call: ToolCall, decision: WorldSnapshot) -> ToolResult:
        try:
            self.skills.get(PROPOSE_PLAN).validate(call.arguments)
            plan = Plan.model_validate({"steps": call.arguments.get("steps")})
        except (ValidationError, Exception) as exc:  # noqa: BLE001 - a model's malformed plan is its error, named
            message = getattr(exc, "message", None) or str(exc).splitlines()[0]
            return results.error(call, "invalid_arguments", f"propose_plan: {message}",
                                 getattr(exc, "details", None) or {})
        task = self.ledger.task_state()
        if task.contract is None:
            return results.rejected(call, "there is no contract to plan against", code="plan_refused")
        done = self.evidenced(task, decision)
        check = check_plan(plan, task.contract, skills=self.skills, places=self.state.places, robot=decision.pose,
                           evidenced=sorted(done))
        if not check.ok and self.enforce:
            self.active = None
            return results.rejected(call, "the plan gate refused the plan; nothing was sent to the robot",
                                    code="plan_refused",
                                    diagnostics=[d.model_dump(mode="json") for d in check.diagnostics],
                                    evidenced=sorted(done))
        self.active = ActivePlan(call_id=call.id, steps=plan.steps)
        return results.result(call, ToolResultStatus.OK, {
            "plan": "accepted", "steps": len(plan.steps), "serves": dict(check.serves),
            **({"ungated": [d.model_dump(mode="json") for d in check.diagnostics]} if not check.ok else {}),
            "unchecked": list(check.unchecked), "evidenced": sorted(done),
            "note": "the harness runs the steps one per turn through the same checks; each outcome arrives as a "
                    "runtime event; if a step fails the plan stops and you are asked for the rest"})

    def next_call(self, ids: IdGenerator) -> tuple[ToolCall, dict[str, Any]] | None:
        """The active plan's next step as a call, with its response meta; None when there is none."""
        plan = self.active
        if plan is None or not plan.pending:
            self.active = None
            return None
        step = plan.steps[plan.next]
        call = ToolCall(id=ids.new("call"), name=step.skill, arguments=dict(step.arguments))
        meta = {"source": PLAN_SOURCE, "plan_call_id": plan.call_id, "step": plan.next + 1, "of": len(plan.steps)}
        plan.next += 1
        plan.ran.append(call.id)
        return call, meta

    def interrupt(self, reason: str) -> RuntimeEvent | None:
        """Drop the active plan after a failed step; the event the planner then reads."""
        plan, self.active = self.active, None
        if plan is None:
            return None
        return RuntimeEvent(type="plan_interrupted", tool_call_id=plan.call_id, state="error", detail={
            "steps_run": plan.next, "of": len(plan.steps), "reason": reason,
            "remaining": [s.model_dump(mode="json") for s in plan.steps[plan.next:]],
            "note": "the verified prefix stands (see progress); plan only what is left"})
