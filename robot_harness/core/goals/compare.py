"""Comparing contracts by what they accept: exact, under-bound, over-constrained.

A contract is **under-bound** against a reference when it accepts some trace
the reference rejects: a reference obligation with no counterpart, a binding
(place, text, recipient, final, route) the counterpart lacks or binds to
another value, an eligible skill the reference does not allow, or an order
the reference requires and the contract does not. It is **over-constrained**
when the reverse holds (it rejects a trace the reference accepts). The check
is structural: an injective mapping of the reference's obligations onto the
contract's, same kind, each reference binding present with an equal value,
eligible skills a subset, and every (transitive) dependency of the reference
kept between the mapped obligations.

Used by ``bench/contracts.py`` (compiled vs gold) and by the LLM compiler's
post-validation (a model's contract vs the rule compiler's).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..completion import CompletionContract, ObligationKind, eligible_skills

__all__ = ["ContractShape", "ObligationShape", "shape_of", "gold_shape", "entails", "compare_contracts", "Comparison",
           "normalise_text"]

_BINDINGS = ("place", "final", "text", "to", "start", "waypoints", "min_departure_m", "attachments", "count",
             "question")
"""The parameters a goal binds and a verifier (or the judge, for ``question``) checks; ``max_age_s`` too."""


def normalise_text(value: Any) -> str:
    """Whitespace and case, as the verifier compares payloads (surrounding punctuation ignored here too)."""
    return " ".join(str(value).split()).casefold().strip(" .!?,;:")


def _norm(key: str, value: Any) -> Any:
    if key == "text":
        return normalise_text(value)
    if key in ("to", "place", "start"):
        return re.sub(r"[\s_]+", "_", str(value).strip().casefold())
    if key == "waypoints":
        return tuple(re.sub(r"[\s_]+", "_", str(w).strip().casefold()) for w in value)
    if key in ("min_departure_m", "count"):
        return float(value)
    if key == "attachments":
        return len(value)  # how many images travel with it (their ids differ between contracts)
    if key == "question":
        return " ".join(re.findall(r"[a-z0-9]+", str(value).lower()))
    return value


@dataclass(frozen=True)
class ObligationShape:
    kind: ObligationKind
    bindings: tuple[tuple[str, Any], ...]
    eligible: frozenset[str]
    question: str = ""

    def binding(self, key: str) -> Any:
        return dict(self.bindings).get(key)


@dataclass(frozen=True)
class ContractShape:
    obligations: tuple[ObligationShape, ...]
    after: frozenset[tuple[int, int]]
    """(i, j): obligation i must come after obligation j (the transitive closure)."""


def _closure(direct: Sequence[Sequence[int]]) -> frozenset[tuple[int, int]]:
    out: set[tuple[int, int]] = set()
    for i in range(len(direct)):
        stack = list(direct[i])
        seen: set[int] = set()
        while stack:
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            out.add((i, j))
            stack.extend(direct[j])
    return frozenset(out)


def _shape(kind: ObligationKind, params: Mapping[str, Any], eligible: Sequence[str],
           max_age_s: float | None = None) -> ObligationShape:
    b = {k: _norm(k, v) for k, v in params.items() if k in _BINDINGS}
    if kind is ObligationKind.ROUTE_CLOSED:
        b.setdefault("final", True)  # a route is judged back at its start now unless it says otherwise
    if max_age_s is not None:
        b["max_age_s"] = float(max_age_s)
    return ObligationShape(kind, tuple(sorted(b.items())), frozenset(eligible), _norm("question",
                                                                                   params.get("question", "")))


def shape_of(contract: CompletionContract) -> ContractShape:
    ids = [o.id for o in contract.obligations]
    obs = tuple(_shape(o.kind, o.params, eligible_skills(o), o.max_age_s) for o in contract.obligations)
    direct = [[ids.index(d) for d in o.depends_on] for o in contract.obligations]
    return ContractShape(obs, _closure(direct))


def gold_shape(entries: Sequence[Mapping[str, Any]]) -> ContractShape:
    """A gold contract (test/contracts_gold format: ``{<kind>: {params}, eligible?, after?}`` per obligation)."""
    from ..completion import Obligation

    obs = []
    direct: list[list[int]] = []
    for i, e in enumerate(entries):
        kinds = [k for k in e if k not in ("eligible", "after")]
        if len(kinds) != 1:
            raise ValueError(f"gold obligation {i + 1} must name exactly one kind, got {kinds}")
        kind = ObligationKind(kinds[0])
        params = dict(e[kinds[0]] or {})
        probe = Obligation(id="g", kind=kind, description="-", eligible=tuple(e.get("eligible", ())))
        # the gold's final place is proven by a fresh pose (2 s, the shipped lexicon's bound) unless it says
        max_age = e.get("max_age_s", 2.0 if kind is ObligationKind.AT_PLACE and params.get("final") else None)
        obs.append(_shape(kind, params, eligible_skills(probe), max_age))
        after = e.get("after")
        direct.append([i - 1] if after is None and i > 0 else [int(a) - 1 for a in (after or [])])
    return ContractShape(tuple(obs), _closure(direct))


def _problems_against(ref: ContractShape, got: ContractShape) -> list[str]:
    """Why ``got`` accepts something ``ref`` rejects (empty: ``got`` entails ``ref``)."""
    n, m = len(ref.obligations), len(got.obligations)

    def fits(r: ObligationShape, g: ObligationShape) -> str:
        if r.kind is not g.kind:
            return f"kind {g.kind.value} is not {r.kind.value}"
        for key, value in r.bindings:
            have = g.binding(key)
            if key == "final" and value is False:
                continue
            if key in ("min_departure_m", "count"):
                if have is None or have < value:
                    return f"{key} {have} < {value}"
                continue
            if key == "max_age_s":
                if have is None or have > value:
                    return f"evidence may be {have if have is not None else 'any'} s old, not at most {value} s"
                continue
            if have != value:
                return f"{key} {have!r} is not {value!r}"
        if not g.eligible <= r.eligible:
            return f"eligible {sorted(g.eligible)} allows more than {sorted(r.eligible)}"
        return ""

    best: list[str] = []
    best_len = -1

    def search(i: int, used: list[int]) -> list[str] | None:
        nonlocal best, best_len
        if i == n:
            missing = [f"order: o{a + 1} after o{b + 1}" for a, b in sorted(ref.after)
                       if (used[a], used[b]) not in got.after]
            if not missing:
                return []
            if best_len < n:
                best, best_len = missing, n
            return None
        why = []
        for j in range(m):
            if j in used:
                continue
            w = fits(ref.obligations[i], got.obligations[j])
            if w:
                why.append(w)
                continue
            r = search(i + 1, [*used, j])
            if r is not None:
                return r
        if i > best_len:
            desc = f"{ref.obligations[i].kind.value} {dict(ref.obligations[i].bindings)}"
            best, best_len = [f"no counterpart for reference o{i + 1} ({desc})" + (f": {why[0]}" if why else "")], i
        return None

    found = search(0, [])
    return [] if found is not None else best


def entails(got: ContractShape, ref: ContractShape) -> list[str]:
    """Empty when ``got`` accepts no trace that ``ref`` rejects; else why it does (under-bound)."""
    return _problems_against(ref, got)


@dataclass
class Comparison:
    exact: bool
    under_bound: list[str] = field(default_factory=list)
    over_constrained: list[str] = field(default_factory=list)


def compare_contracts(got: ContractShape, gold: ContractShape) -> Comparison:
    """Exact (same obligations, bindings, eligibility, order and questions), under-bound, over-constrained."""
    under = entails(got, gold)
    over = entails(gold, got)
    exact = not under and not over and len(got.obligations) == len(gold.obligations) and (
        sorted(o.question for o in got.obligations) == sorted(o.question for o in gold.obligations))
    return Comparison(exact=exact, under_bound=under, over_constrained=over)
