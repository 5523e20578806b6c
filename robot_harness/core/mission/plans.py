"""Plans (issue 18): a planner's whole plan, checked by the plan gate before anything moves, then run by the
harness one step per turn through the same dispatch path as any call.

``PlanDesk.propose`` answers a ``propose_plan`` call: the gate's verdict on the plan, from the robot's
place on the decision snapshot, with the obligations already evidenced needing no step. A refused plan
costs no motion; the model gets one result with the diagnostics. An accepted plan becomes the mission's
active plan; ``next_call`` gives its next step as the turn's call (no model call). When a step fails,
``failed`` lets the plan resume once at that step if the rest passes the gate again on the next fresh
snapshot (zero-token suffix repair); otherwise, and the second time, the plan stops: the planner hears
which steps ran, why the plan stopped and what the gate found, and plans the rest.
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
    resumed: set[int] = field(default_factory=set)
    """Steps (0-based) the harness already resumed the plan at once, after they failed."""
    recheck: str = ""
    """Why the rest must pass the gate again before the next step (a step failed): "" when it need not."""

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
        except Exception as exc:  # noqa: BLE001 - a model's malformed plan is its error, named (UsageError, ValidationError)
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

    def next_call(self, ids: IdGenerator, decision: WorldSnapshot) -> tuple[ToolCall, dict[str, Any]] | RuntimeEvent | None:
        """The active plan's next step as a call, with its response meta; None when there is none.

        After a failed step the plan resumes only if the rest of it (from the failed step, or after it when
        a fallback already did it) passes the gate again on ``decision``, the turn's fresh snapshot, with
        what is evidenced now: zero-token suffix repair. Otherwise the plan stops and the event the planner
        then reads (``plan_interrupted``, with the gate's diagnostics) is returned instead."""
        plan = self.active
        if plan is None or not plan.pending:
            self.active = None
            return None
        resumed = bool(plan.recheck)
        if resumed:
            task = self.ledger.task_state()
            done = self.evidenced(task, decision)
            check = (check_plan(Plan(steps=plan.steps[plan.next:]), task.contract, skills=self.skills,
                                places=self.state.places, robot=decision.pose, evidenced=sorted(done))
                     if task.contract is not None else None)
            if check is None or not check.ok:
                return self.interrupt(plan.recheck, diagnostics=[d.model_dump(mode="json") for d in
                                                                 (check.diagnostics if check is not None else ())])
            plan.recheck = ""
        step = plan.steps[plan.next]
        call = ToolCall(id=ids.new("call"), name=step.skill, arguments=dict(step.arguments))
        meta = {"source": PLAN_SOURCE, "plan_call_id": plan.call_id, "step": plan.next + 1, "of": len(plan.steps),
                **({"resumed": True} if resumed else {})}
        plan.next += 1
        plan.ran.append(call.id)
        return call, meta

    def failed(self, reason: str, *, resumable: bool, redo: bool = True) -> RuntimeEvent | None:
        """A step of the active plan failed. ``resumable`` (recovery chose a rung that goes on, nothing
        may still be moving, the site repairs suffixes): the plan resumes once per step, from that step
        (``redo``) or after it (a fallback did it), if the rest passes the gate again at the next turn
        (``next_call``); otherwise, or the second time, it stops and the planner is asked for the rest."""
        plan = self.active
        if plan is None:
            return None
        failed = plan.next - 1
        if not resumable or failed in plan.resumed:
            return self.interrupt(reason)
        plan.resumed.add(failed)
        plan.next = failed if redo else plan.next
        plan.recheck = reason
        return None

    def interrupt(self, reason: str, *, diagnostics: list[dict[str, Any]] | None = None) -> RuntimeEvent | None:
        """Drop the active plan after a failed step; the event the planner then reads."""
        plan, self.active = self.active, None
        if plan is None:
            return None
        return RuntimeEvent(type="plan_interrupted", tool_call_id=plan.call_id, state="error", detail={
            "steps_run": plan.next, "of": len(plan.steps), "reason": reason,
            "remaining": [s.model_dump(mode="json") for s in plan.steps[plan.next:]],
            **({"diagnostics": diagnostics} if diagnostics else {}),
            "note": "the verified prefix stands (see progress); plan only what is left"})
