"""The bounded contexts built from versioned state: the planner's (C1) and a skill's (C2).

The model never sees raw streams: the world arrives as a bounded snapshot
projection; runtime events and the last turn's tool results are compact and
trimmed (oldest first) to fit the byte cap.

A skill's view (C2) is one subgoal: the obligation the invocation serves, its
grounded target (resolved by the harness, not the model's words), bounded
observations and the receipts of earlier attempts of that skill. It is
selected by ``views.build_view`` under ``Role.SKILL``, whose policy admits no
item of planner provenance.
"""
from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .completion import NAVIGATE_SKILL, CompletionContract, Obligation, ObligationKind, Receipt, admissible_skills, \
    eligible_skills
from .records import FieldMeta, Pose2D, RuntimeEvent, ToolResult, WorldSnapshot
from .snapshot import project_for_model
from .views import ContextItem, ContextView, Provenance, Role, ViewBudget, build_view

__all__ = ["compile_planner_context", "context_size", "SKILL_OBLIGATION_KINDS", "SKILL_VIEW_BUDGET", "subgoal_for",
           "compile_skill_view"]

SKILL_OBLIGATION_KINDS: Mapping[str, tuple[ObligationKind, ...]] = {
    skill: tuple(k for k in ObligationKind if skill in admissible_skills(k))
    for skill in dict.fromkeys(s for k in ObligationKind for s in admissible_skills(k))
}
"""Which obligation kinds a skill's receipts can ever be evidence for, derived from
``completion.DEFAULT_SKILLS`` (a listing for display; whether a skill serves one obligation is
``completion.eligible_skills``)."""
SKILL_VIEW_BUDGET = ViewBudget(max_items=16, max_bytes=2000)
"""C2 is journaled with every tool call: small by design."""


def context_size(ctx: dict[str, Any]) -> int:
    return len(json.dumps(ctx, separators=(",", ":"), sort_keys=True))


def compile_planner_context(
    *,
    goal: str,
    turn_index: int,
    snapshot: WorldSnapshot,
    places: Sequence[str],
    runtime_events: Sequence[RuntimeEvent],
    last_results: Sequence[ToolResult],
    byte_cap: int,
    snapshot_byte_cap: int,
    progress: dict[str, Any] | None = None,
    examples: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """C1. ``progress`` is the planner's view of the task state (core/views.py):
    the contract frontier, committed obligations and recent failures. ``examples``: plans that were
    verified for similar goals (core/memory.py, most similar first); the first thing trimmed to fit."""
    ctx: dict[str, Any] = {
        "goal": goal,
        "turn_index": turn_index,
        "snapshot_id": snapshot.snapshot_id,
        "world": project_for_model(snapshot, byte_cap=snapshot_byte_cap),
        **({"progress": progress} if progress else {}),
        "places": list(places),
        "runtime_events": [e.model_dump(exclude={"kind"}) for e in runtime_events],
        "last_tool_results": [r.to_model_message() for r in last_results],
        "rules": (
            "Tool results report only what a call established. Physical outcomes arrive later as "
            "runtime_events. You propose 'done'; the harness verifies it."
        ),
        **({"verified_examples": [dict(e) for e in examples]} if examples else {}),
    }
    # Remembered examples go first (least similar first), then oldest-first until it fits; the goal, the
    # world and the frontier stay.
    while context_size(ctx) > byte_cap and ctx.get("verified_examples"):
        ctx["verified_examples"].pop()
        ctx["truncated"] = True
    if "verified_examples" in ctx and not ctx["verified_examples"]:
        ctx.pop("verified_examples")
    failures = (ctx.get("progress") or {}).get("recent_failures")
    while context_size(ctx) > byte_cap and failures:
        failures.pop(0)
        ctx["truncated"] = True
    while context_size(ctx) > byte_cap and (ctx["last_tool_results"] or ctx["runtime_events"] or ctx["places"]):
        for key in ("last_tool_results", "runtime_events", "places"):
            if ctx[key]:
                ctx[key] = ctx[key][1:]
                ctx["truncated"] = True
                break
    if context_size(ctx) > byte_cap:
        ctx.pop("rules")
        ctx["truncated"] = True
    return ctx


def subgoal_for(contract: CompletionContract | None, skill: str, *, done: Collection[str] = (),
                place: str | None = None, target: Pose2D | None = None,
                places: Mapping[str, Pose2D] | None = None, near_m: float = 0.5) -> Obligation | None:
    """The obligation one invocation of ``skill`` works toward, or None (the contract asks nothing of it).

    A skill serves an obligation iff it is one of its eligible skills
    (``completion.eligible_skills``: a speech serves a report that may be
    spoken, never a message-only one). Obligations not yet done (committed, or
    already evidenced) come first, in contract order; a navigation matches an
    ``at_place`` obligation of its place (named, or a known place within
    ``near_m`` of its target), else a closed route.
    """
    if contract is None:
        return None
    mine = [o for o in contract.obligations if skill in eligible_skills(o)]
    if skill == NAVIGATE_SKILL:
        def mine_place(o: Obligation) -> bool:
            name = o.params.get("place")
            if place is not None:
                return name == place
            pose = (places or {}).get(name) if isinstance(name, str) else None
            return target is not None and pose is not None and pose.distance_to(target) <= near_m

        mine = [o for o in mine if o.kind is ObligationKind.ROUTE_CLOSED or mine_place(o)]
        mine.sort(key=lambda o: o.kind is ObligationKind.ROUTE_CLOSED)  # a named place first (stable)
    open_ = [o for o in mine if o.id not in done]
    return (open_ or mine or [None])[0]


def _observation(key: str, value: dict[str, Any], meta: FieldMeta, snapshot_id: str) -> ContextItem:
    return ContextItem(item_id=f"{key}:{snapshot_id}", key=key, kind="observation", provenance=Provenance.OBSERVATION,
                       source="snapshot", value={**value, "availability": meta.availability.value,
                                                 "age_s": None if meta.age_s is None else round(meta.age_s, 2)},
                       observed_at=meta.source_stamp, max_age_s=meta.max_age_s or None, priority=70)


SKILL_VIEW_RECEIPTS = 8
"""How many of the skill's latest receipts C2 considers."""


def compile_skill_view(
    *,
    contract: CompletionContract | None,
    skill: str,
    now: float,
    done: Collection[str] = (),
    place: str | None = None,
    target: Pose2D | None = None,
    places: Mapping[str, Pose2D] | None = None,
    near_m: float = 0.5,
    snapshot: WorldSnapshot | None = None,
    receipts: Sequence[Receipt] = (),
    budget: ViewBudget = SKILL_VIEW_BUDGET,
) -> ContextView:
    """C2 for one invocation of ``skill``: its subgoal's obligation, its grounded target, bounded
    observations and compact receipts of earlier attempts of the same skill.

    Only harness-derived values go in: the target is the harness's resolution
    (a known place and its pose), receipts are reduced to their status, and no
    free text the model wrote (its prose, its proposals, tool arguments such
    as a sentence to say) is an item of this view.
    """
    ob = subgoal_for(contract, skill, done=done, place=place, target=target, places=places, near_m=near_m)
    scope = ob.id if ob is not None else ""
    items: list[ContextItem] = []
    if contract is not None:
        for o in contract.obligations:
            items.append(ContextItem(
                item_id=f"obligation:{o.id}", key=f"obligation:{o.id}", kind="obligation",
                provenance=Provenance.CONTRACT, scope=o.id, priority=90,
                value={"id": o.id, "obligation_kind": o.kind.value, "description": o.description,
                       "params": dict(o.params), "evidence": [e.value for e in o.evidence],
                       "depends_on": list(o.depends_on), "max_age_s": o.max_age_s, "done": o.id in done}))
    if place is not None or target is not None:
        items.append(ContextItem(item_id="target", key="target", kind="target", provenance=Provenance.HARNESS,
                                 scope=scope, priority=85, source="harness",
                                 value={"skill": skill, **({"place": place} if place is not None else {}),
                                        **({"pose": target.model_dump()} if target is not None else {})}))
    if snapshot is not None:
        sid = snapshot.snapshot_id
        if snapshot.pose is not None:
            items.append(_observation("robot.pose", {k: round(v, 3) for k, v in snapshot.pose.model_dump().items()},
                                      snapshot.pose_meta, sid))
        items.append(_observation("robot.controller", {"state": snapshot.controller_state.value},
                                  snapshot.navigation_meta, sid))
        if snapshot.battery is not None:
            items.append(_observation("robot.battery", {"level": round(snapshot.battery, 3)}, snapshot.battery_meta,
                                      sid))
    # The latest attempts of this skill only: the view is bounded anyway, and building (and
    # sizing) an item for every receipt of a long mission would grow each call's cost with it.
    own = [r for r in receipts if r.skill == skill][-SKILL_VIEW_RECEIPTS:]
    for r in own:
        items.append(ContextItem(item_id=r.receipt_id, key=f"receipt:{r.invocation_id}", kind="receipt",
                                 provenance=Provenance.RECEIPT, scope=scope, source=r.skill, observed_at=r.ended_at,
                                 priority=60, value={"receipt_id": r.receipt_id, "skill": r.skill,
                                                     "status": r.status.value, "action_id": r.action_id,
                                                     "state_version": r.state_version}))
    return build_view(items, role=Role.SKILL, now=now, budget=budget, scope=scope)
