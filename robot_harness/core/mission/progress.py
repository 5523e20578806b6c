"""What each role sees of the mission: one pool of versioned, provenance-tagged items, and the
planner's progress (C1), a skill's view (C2), the verifier's (C3) and recovery's (C4) cut from it.

The planner's and recovery's views are bounded: their pool holds the newest
receipts and failures only (as many as the widest of their budgets can
show) and the current head of each fact, so building them does not grow
with the mission's length. The verifier's pool holds every receipt.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from collections.abc import Callable, Sequence
from typing import Any

from ..clock import Clock
from ..completion import FactStatus, Receipt, ReceiptStatus
from ..context import SKILL_VIEW_RECEIPTS, compile_skill_view
from ..errors import UsageError
from ..gate import TaskState
from ..records import Pose2D, ToolCall, WorldSnapshot
from ..skills import ASK_OPERATOR, PROPOSE_DONE, NavigateToArgs, SkillRegistry, resolve_target
from ..views import ContextItem, ContextView, Provenance, Role, ViewBudget, build_view, item_size
from .ledger import MissionLedger
from .state import MissionState

__all__ = ["ProgressViews", "MALFORMED_ARGUMENTS", "VERIFIER_BUDGET", "RECOVERY_BUDGET"]

MALFORMED_ARGUMENTS = "__malformed_arguments__"
"""The key a planner adapter puts the raw text under when a model's tool arguments are not a JSON object."""
VERIFIER_BUDGET = ViewBudget(max_items=4096, max_bytes=8 * 1024 * 1024)
"""The verifier sees every receipt; its bound only stops a runaway mission."""
PLANNER_PROGRESS_BUDGET = ViewBudget(max_items=32, max_bytes=1500)
PLANNER_WIDE_BUDGET = ViewBudget(max_items=64, max_bytes=4000)
"""C1 for the turn after an ``adjust_view`` recovery: more of the failure history and evidence."""
RECOVERY_BUDGET = ViewBudget(max_items=24, max_bytes=4000)
_BOUNDED_RECENT = max(PLANNER_WIDE_BUDGET.max_items, PLANNER_PROGRESS_BUDGET.max_items, RECOVERY_BUDGET.max_items)
"""How many of the newest receipts (and failures) a bounded pool holds: no bounded view can show more."""

Evidenced = Callable[[TaskState, WorldSnapshot], set[str]]


@dataclass(eq=False, kw_only=True)
class ProgressViews:
    state: MissionState
    ledger: MissionLedger
    skills: SkillRegistry
    clock: Clock
    evidenced: Evidenced
    _items: dict[str, ContextItem] = field(default_factory=dict, init=False, repr=False)
    """Receipt and failure items by item id: a receipt never changes, so its items are built once."""
    _sizes: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    """``views.item_size`` of each cached item."""

    def _cached(self, item_id: str, build: Callable[[], ContextItem]) -> ContextItem:
        item = self._items.get(item_id)
        if item is None:
            item = self._items[item_id] = build()
            self._sizes[item_id] = item_size(item)
        return item

    def pool(self, task: TaskState, snapshot: WorldSnapshot | None, *, bounded: bool) -> list[ContextItem]:
        """Mission state as versioned, provenance-tagged items (see core/views.py)."""
        s, now = self.state, self.clock.now()
        items = [ContextItem(item_id="goal", key="goal", kind="goal", provenance=Provenance.USER,
                             value={"goal": s.goal}, priority=100)]
        committed = set(task.committed)
        if task.contract is not None:
            for o in task.contract.obligations:
                items.append(ContextItem(
                    item_id=f"obligation:{o.id}", key=f"obligation:{o.id}", kind="obligation",
                    provenance=Provenance.CONTRACT, scope=o.id, priority=90,
                    value={"id": o.id, "kind": o.kind.value, "description": o.description,
                           "committed": o.id in committed, "depends_on": list(o.depends_on)}))
        facts = task.facts
        if bounded:  # a superseded fact is never shown: only each key's head
            superseded = {f.supersedes for f in facts if f.supersedes}
            facts = tuple(f for f in facts if f.fact_id not in superseded)
        for f in facts:
            prov = Provenance.COMMITTED if f.status is FactStatus.COMMITTED else Provenance.OBSERVATION
            items.append(ContextItem(item_id=f.fact_id, key=f.key, kind="fact", provenance=prov, value=dict(f.value),
                                     source=f.provenance[0] if f.provenance else "", observed_at=f.observed_at,
                                     supersedes=f.supersedes, priority=70 if prov is Provenance.COMMITTED else 40))
        receipts = task.receipts[-_BOUNDED_RECENT:] if bounded else task.receipts
        failed = [r for r in task.receipts if r.status is not ReceiptStatus.SUCCEEDED]
        if bounded:  # the newest failures, also those older than the newest receipts (first, as they came)
            failed = failed[-_BOUNDED_RECENT:]
            recent = {r.receipt_id for r in receipts}
            items.extend(self._failure_item(r) for r in failed if r.receipt_id not in recent)
        failed_ids = {r.receipt_id for r in failed}
        for r in receipts:
            items.append(self._cached(r.receipt_id, lambda r=r: ContextItem(
                item_id=r.receipt_id, key=f"receipt:{r.invocation_id}", kind="receipt", provenance=Provenance.RECEIPT,
                value={"receipt": r.model_dump(mode="json")}, source=r.skill, observed_at=r.ended_at, priority=60)))
            if r.receipt_id in failed_ids:
                items.append(self._failure_item(r))
        if snapshot is not None and snapshot.pose is not None:
            items.append(ContextItem(item_id=f"pose:{snapshot.snapshot_id}", key="robot.pose", kind="observation",
                                     provenance=Provenance.OBSERVATION, source="snapshot", value=snapshot.pose.model_dump(),
                                     observed_at=snapshot.pose_meta.source_stamp, max_age_s=snapshot.pose_meta.max_age_s))
        for text in s.proposals:
            items.append(ContextItem(item_id=f"proposal:{len(items)}", key="proposal", kind="proposal",
                                     provenance=Provenance.PLANNER, value={"text": text}, observed_at=now, priority=10))
        return items

    def planner_progress(self, snapshot: WorldSnapshot) -> dict[str, Any]:
        """C1's share of the task state: what is left (the frontier), what is committed, what failed.

        ``evidenced``: obligations whose evidence is already on record (the
        verified prefix, judged by the same predicates the verifier uses, on
        this turn's snapshot). It only shapes planning; only the commit gate
        commits. With ``recovery.repair: whole`` a replan after a failure
        starts again from the whole contract (the baseline bench/repair.py
        measures suffix repair against).
        """
        s = self.state
        task = self.ledger.task_state()
        wide = s.wide_view_turns > 0
        if wide:
            s.wide_view_turns -= 1
        view = build_view(self.pool(task, snapshot, bounded=True), role=Role.PLANNER, now=self.clock.now(),
                          budget=PLANNER_WIDE_BUDGET if wide else PLANNER_PROGRESS_BUDGET, sizes=self._sizes)
        obligations = [i.value for i in view.of_kind("obligation")]
        evidenced = self.evidenced(task, snapshot)
        s.turn_done = evidenced | set(task.committed)
        return {
            "frontier": [{k: o[k] for k in ("id", "kind", "description", "depends_on")} for o in obligations
                         if not o["committed"] and o["id"] not in evidenced],
            "evidenced": sorted(evidenced),
            "committed": [o["id"] for o in obligations if o["committed"]],
            "recent_failures": [i.value for i in view.of_kind("failure")][-(8 if wide else 3):],
            **({"view": "widened after adjust_view"} if wide else {}),
        }

    def verifier_view(self, task: TaskState) -> ContextView:
        """C3: every receipt; no item of planner provenance (so a done proposal's text cannot reach it)."""
        return build_view(self.pool(task, None, bounded=False), role=Role.VERIFIER, now=self.clock.now(),
                          budget=VERIFIER_BUDGET, sizes=self._sizes)

    def recovery_view(self) -> ContextView:
        """C4, for a recovery advisor."""
        return build_view(self.pool(self.ledger.task_state(), None, bounded=True), role=Role.RECOVERY,
                          now=self.clock.now(), budget=RECOVERY_BUDGET, sizes=self._sizes)

    def skill_view(self, call: ToolCall, snapshot: WorldSnapshot) -> dict[str, Any]:
        """C2, the skill's view of this call's subgoal, journaled with the call (``{"skill_view": ...}``);
        empty for what is not a skill invocation (unknown tools, invalid arguments, done proposals,
        operator questions). Built from harness state only: see ``context.compile_skill_view``."""
        if call.name in (PROPOSE_DONE, ASK_OPERATOR) or MALFORMED_ARGUMENTS in call.arguments:
            return {}
        try:
            skill = self.skills.get(call.name)
            args = skill.validate(call.arguments)
        except UsageError:
            return {}
        s = self.state
        place: str | None = None
        target: Pose2D | None = None
        if isinstance(args, NavigateToArgs):
            try:
                target = resolve_target(args, s.places)
            except UsageError:
                target = None
            place = args.place if target is not None else None
        task = self.ledger.task_state()
        nav = skill.managed.navigation if skill.managed is not None else None
        view = compile_skill_view(
            contract=task.contract, skill=skill.name, now=self.clock.now(),
            done=s.turn_done | set(task.committed), place=place, target=target, places=s.places,
            near_m=nav.outcome.xy_m if nav is not None else 0.5, snapshot=snapshot,
            receipts=_latest_of(task.receipts, skill.name, SKILL_VIEW_RECEIPTS))
        return {"skill_view": {"role": view.role.value, "scope": view.scope, "items": view.as_list(),
                               "dropped": dict(view.dropped), "withheld_conflicts": list(view.withheld_conflicts),
                               "bytes": view.bytes}}

    def _failure_item(self, r: Receipt) -> ContextItem:
        return self._cached(f"failure:{r.receipt_id}", lambda: ContextItem(
            item_id=f"failure:{r.receipt_id}", key=f"failure:{r.invocation_id}", kind="failure",
            provenance=Provenance.HARNESS, observed_at=r.ended_at,
            value={"skill": r.skill, "status": r.status.value, "arguments": r.request.get("arguments", {})},
            priority=55))


def _latest_of(receipts: Sequence[Receipt], skill: str, n: int) -> list[Receipt]:
    """The newest ``n`` receipts of ``skill``, oldest first, found from the end (C2 shows no more)."""
    out: list[Receipt] = []
    for r in reversed(receipts):
        if r.skill == skill:
            out.append(r)
            if len(out) == n:
                break
    return out[::-1]
