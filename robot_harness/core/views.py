"""Role-isolated context views: four bounded views of the same versioned state.

Every piece of state a model or checker might be shown is a ``ContextItem``
with a provenance (who produced it), a key (what it is about), a scope (which
subgoal/obligation), an observation time and lifetime, and an optional
``supersedes`` link. ``build_view`` selects items for one role:

* **C1 planner** — the original goal, the contract frontier (obligations not
  yet committed), committed progress, relevant spatial state, high-level
  failure history, and its own earlier proposals.
* **C2 skill** — one subgoal: its obligation, grounded targets (the harness's
  resolution of the target, never the model's words), bounded observations
  and receipts in that scope. Nothing of planner provenance.
* **C3 verifier** — postconditions (the contract), before/after evidence
  (receipts, observations), timestamps, committed facts. Nothing whose
  provenance is the planner: not its text, not its done proposals, not its
  plans. This is a property of the policy table below, tested directly.
* **C4 recovery** — the structured failure, attempts, remaining budgets,
  authorized alternatives, and the evidence around the failure.

Selection, in order: role policy (provenance and kind), scope, freshness
(expired items are dropped), supersession (only the newest link of a chain
survives), conflicts (two current observations of the same key from
different sources that disagree are withheld until one is re-observed),
then item and byte budgets (lowest priority, then oldest, dropped first).
What was dropped and why is reported with the view, so a truncated context
is never silent.
"""
from __future__ import annotations

import enum
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Role", "Provenance", "ContextItem", "ViewBudget", "ContextView", "ROLE_POLICY", "build_view", "item_size"]


class Role(str, enum.Enum):
    PLANNER = "planner"
    """C1: decides the next step."""
    SKILL = "skill"
    """C2: executes one subgoal."""
    VERIFIER = "verifier"
    """C3: judges completion; never sees the planner's conclusions."""
    RECOVERY = "recovery"
    """C4: chooses a response to a structured failure among authorized options."""


class Provenance(str, enum.Enum):
    USER = "user"
    """The user's original words (the goal)."""
    CONTRACT = "contract"
    """The frozen completion contract."""
    COMMITTED = "committed"
    """Task state accepted by the commit gate."""
    RECEIPT = "receipt"
    """What an executor recorded about an invocation."""
    OBSERVATION = "observation"
    """A sensor-derived observation (snapshot fields)."""
    HARNESS = "harness"
    """The harness's own bookkeeping: failures, budgets, runtime events."""
    PLANNER = "planner"
    """Anything the model produced: text, proposals, plans, claims."""


class ContextItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    item_id: str
    key: str
    """What the item is about, e.g. ``robot.pose``, ``obligation:o1``, ``failure:act-1``."""
    kind: str
    """goal | obligation | fact | receipt | observation | target | runtime_event | failure | budget | alternative |
    model_text | proposal"""
    provenance: Provenance
    value: dict[str, Any] = Field(default_factory=dict)
    scope: str = ""
    """The subgoal / obligation id it belongs to; empty: mission-wide."""
    source: str = ""
    """Which sensor, skill or component produced it (conflicts are between sources)."""
    observed_at: float | None = None
    max_age_s: float | None = None
    supersedes: str = ""
    priority: int = 50
    """Higher survives budgets longer."""


class ViewBudget(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    max_items: int = Field(default=64, ge=1)
    max_bytes: int = Field(default=6000, ge=64)


class ContextView(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: Literal["context_view"] = "context_view"
    role: Role
    scope: str = ""
    items: tuple[ContextItem, ...]
    dropped: dict[str, int] = Field(default_factory=dict)
    """reason -> count: role, scope, expired, superseded, conflict, budget."""
    withheld_conflicts: tuple[str, ...] = ()
    bytes: int = 0

    def of_kind(self, kind: str) -> list[ContextItem]:
        return [i for i in self.items if i.kind == kind]

    def as_list(self) -> list[dict[str, Any]]:
        return [_render(i) for i in self.items]

    def as_json(self) -> str:
        return json.dumps(self.as_list(), sort_keys=True, separators=(",", ":"), default=str)


# Which provenances and kinds each role may see. Only PLANNER has a PLANNER entry:
# no item the model produced can reach the verifier's, a skill's or recovery's view.
ROLE_POLICY: Mapping[Role, Mapping[Provenance, frozenset[str] | None]] = {
    Role.PLANNER: {
        Provenance.USER: None,
        Provenance.CONTRACT: frozenset({"obligation"}),
        Provenance.COMMITTED: None,
        Provenance.RECEIPT: frozenset({"receipt"}),
        Provenance.OBSERVATION: None,
        Provenance.HARNESS: frozenset({"runtime_event", "failure", "budget"}),
        Provenance.PLANNER: frozenset({"proposal"}),
    },
    Role.SKILL: {
        Provenance.CONTRACT: frozenset({"obligation"}),
        Provenance.RECEIPT: frozenset({"receipt"}),
        Provenance.OBSERVATION: None,
        Provenance.COMMITTED: None,
        Provenance.HARNESS: frozenset({"target"}),
    },
    Role.VERIFIER: {
        Provenance.USER: frozenset({"goal"}),
        Provenance.CONTRACT: frozenset({"obligation"}),
        Provenance.COMMITTED: None,
        Provenance.RECEIPT: frozenset({"receipt"}),
        Provenance.OBSERVATION: None,
    },
    Role.RECOVERY: {
        Provenance.CONTRACT: frozenset({"obligation"}),
        Provenance.COMMITTED: None,
        Provenance.RECEIPT: frozenset({"receipt"}),
        Provenance.OBSERVATION: None,
        Provenance.HARNESS: frozenset({"failure", "budget", "alternative", "runtime_event"}),
    },
}


def _render(item: ContextItem) -> dict[str, Any]:
    out: dict[str, Any] = {"key": item.key, "kind": item.kind, **item.value}
    if item.observed_at is not None:
        out["observed_at"] = round(item.observed_at, 3)
    return out


def item_size(item: ContextItem) -> int:
    """The bytes ``item`` takes in a view (its rendered JSON, plus a separator)."""
    return len(json.dumps(_render(item), sort_keys=True, separators=(",", ":"), default=str)) + 1


def build_view(
    items: Iterable[ContextItem],
    *,
    role: Role,
    now: float,
    budget: ViewBudget = ViewBudget(),
    scope: str = "",
    sizes: Mapping[str, int] | None = None,
) -> ContextView:
    """Select, from one pool of versioned items, what ``role`` may see now, within budget.

    ``sizes``: item id -> ``item_size``, known beforehand for items whose content never changes
    under their id (a receipt); the rest are sized here."""
    dropped: Counter[str] = Counter()
    policy = ROLE_POLICY[role]
    pool = list(items)

    def allowed(i: ContextItem) -> bool:
        if i.provenance not in policy:
            return False
        kinds = policy[i.provenance]
        return kinds is None or i.kind in kinds

    kept = []
    for i in pool:
        if not allowed(i):
            dropped["role"] += 1
        elif role is Role.SKILL and i.scope not in ("", scope):
            dropped["scope"] += 1
        elif scope and role is not Role.SKILL and i.scope not in ("", scope) and i.kind in ("receipt", "failure"):
            dropped["scope"] += 1
        elif i.max_age_s is not None and i.observed_at is not None and now - i.observed_at > i.max_age_s:
            dropped["expired"] += 1
        else:
            kept.append(i)

    superseded = {i.supersedes for i in pool if i.supersedes}
    current = []
    for i in kept:
        if i.item_id in superseded:
            dropped["superseded"] += 1
        else:
            current.append(i)

    # Conflicts: current observations of one key from different sources that disagree.
    by_key: dict[str, list[ContextItem]] = {}
    for i in current:
        if i.provenance is Provenance.OBSERVATION:
            by_key.setdefault(i.key, []).append(i)
    withheld: list[str] = []
    for key, group in by_key.items():
        sources = {i.source for i in group}
        values = {json.dumps(i.value, sort_keys=True, default=str) for i in group}
        if len(sources) > 1 and len(values) > 1:
            withheld.append(key)
    if withheld:
        before = len(current)
        current = [i for i in current if not (i.provenance is Provenance.OBSERVATION and i.key in withheld)]
        dropped["conflict"] += before - len(current)

    # Budgets: keep the highest priority, then the newest.
    ranked = sorted(current, key=lambda i: (-i.priority, -(i.observed_at or 0.0)))
    chosen: list[ContextItem] = []
    total = 2
    for i in ranked:
        size = sizes[i.item_id] if sizes is not None and i.item_id in sizes else item_size(i)
        if len(chosen) >= budget.max_items or total + size > budget.max_bytes:
            dropped["budget"] += 1
            continue
        chosen.append(i)
        total += size
    order = {i.item_id: n for n, i in enumerate(pool)}
    chosen.sort(key=lambda i: order[i.item_id])
    return ContextView(role=role, scope=scope, items=tuple(chosen), dropped=dict(dropped),
                       withheld_conflicts=tuple(sorted(withheld)), bytes=total)
