"""Gold contracts: hand-written goals with the contract each must compile to, and how to score a compiler.

The set lives in test/contracts_gold/ (one YAML file per category, format in
docs/goal_compiler.md, the map in ``_map.yaml``). ``score`` compiles every
goal with a compiler and compares the result with its gold: exact, under-bound
(accepts a trace the gold rejects: must be 0), over-constrained, wrong refusal
(refused a goal the gold compiles, or with another reason), missed refusal.
``bench/contracts.py`` prints the table; test/unit/test_goal_compiler.py holds
the deterministic compiler to it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import Pose2D
from .compare import compare_contracts, gold_shape, shape_of

__all__ = ["GoldCase", "GoldMap", "load_gold", "load_map", "Outcome", "Score", "score", "gold_obligations"]


@dataclass(frozen=True)
class GoldCase:
    category: str
    goal: str
    contract: tuple[Mapping[str, Any], ...] = ()
    refuse: str = ""


@dataclass(frozen=True)
class GoldMap:
    places: dict[str, Pose2D]
    aliases: dict[str, tuple[str, ...]]


def load_map(path: str | Path) -> GoldMap:
    import yaml

    raw = yaml.safe_load(Path(path).read_text())
    places = {k: Pose2D(x=float(v["x"]), y=float(v["y"]), yaw=float(v.get("yaw", 0.0))) for k, v in raw["places"].items()}
    aliases = {k: tuple(v.get("aliases", ())) for k, v in raw["places"].items() if v.get("aliases")}
    return GoldMap(places, aliases)


def load_gold(directory: str | Path) -> list[GoldCase]:
    """Every case of every ``*.yaml`` in ``directory`` but ``_map.yaml``, in file order."""
    import yaml

    out: list[GoldCase] = []
    for f in sorted(Path(directory).glob("[!_]*.yaml")):
        raw = yaml.safe_load(f.read_text())
        for g in raw["goals"]:
            out.append(GoldCase(raw.get("category", f.stem), g["goal"], tuple(g.get("contract") or ()),
                                g.get("refuse", "")))
    return out


@dataclass
class Outcome:
    case: GoldCase
    result: str
    """exact | under_bound | over_constrained | wrong_refusal (refused a goal the gold compiles) |
    missed_refusal (compiled a goal the gold refuses) | right_refusal | other_refusal (both refuse, for
    different reasons)"""
    detail: str = ""
    ms: float = 0.0


@dataclass
class Score:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, result: str) -> int:
        return sum(o.result == result for o in self.outcomes)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def exact_rate(self) -> float:
        ok = self.count("exact") + self.count("right_refusal")
        return ok / self.total if self.total else 0.0

    def percentile_ms(self, p: float) -> float:
        xs = sorted(o.ms for o in self.outcomes)
        if not xs:
            return 0.0
        k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
        return xs[k]


def score(compile_fn: Callable[[str], Any], cases: Sequence[GoldCase], *, clock: Callable[[], float]) -> Score:
    """Compile each case's goal with ``compile_fn`` (a contract, or ``ContractError``) and judge it;
    ``clock`` (seconds, e.g. ``time.perf_counter``) times each compile."""
    from ..contracts import ContractError

    out = Score()
    for case in cases:
        t0 = clock()
        try:
            contract = compile_fn(case.goal)
            err: ContractError | None = None
        except ContractError as exc:
            contract, err = None, exc
        ms = (clock() - t0) * 1000.0
        if err is not None:
            reason = str(err.details.get("reason", ""))
            if case.refuse and reason == case.refuse:
                out.outcomes.append(Outcome(case, "right_refusal", reason, ms))
            elif case.refuse:
                out.outcomes.append(Outcome(case, "other_refusal", f"{reason}, gold says {case.refuse}: "
                                                                   f"{err.message}", ms))
            else:
                out.outcomes.append(Outcome(case, "wrong_refusal", f"{reason}: {err.message}", ms))
            continue
        if case.refuse:
            out.outcomes.append(Outcome(case, "missed_refusal", f"expected {case.refuse}", ms))
            continue
        cmp = compare_contracts(shape_of(contract), gold_shape(case.contract))
        if cmp.under_bound:
            out.outcomes.append(Outcome(case, "under_bound", "; ".join(cmp.under_bound), ms))
        elif cmp.exact:
            out.outcomes.append(Outcome(case, "exact", "", ms))
        else:
            out.outcomes.append(Outcome(case, "over_constrained", "; ".join(cmp.over_constrained) or "differs", ms))
    return out


def gold_obligations(case: GoldCase) -> list[dict[str, Any]]:
    """A gold contract as obligation records (ids ``o1``..., evidence from the kind, ``depends_on`` from
    ``after``): what a faithful model would answer, and the start of a weak one's answer."""
    from .compiler import _evidence
    from ..completion import ObligationKind

    out: list[dict[str, Any]] = []
    for i, e in enumerate(case.contract):
        kind = next(k for k in e if k not in ("eligible", "after"))
        after = e.get("after")
        direct = [i] if after is None and i > 0 else [int(a) for a in (after or [])]
        eligible = tuple(e.get("eligible", ()))
        params = dict(e[kind] or {})
        o = {"id": f"o{i + 1}", "kind": kind, "description": f"{kind} {params}", "params": params,
             "evidence": [x.value for x in _evidence(ObligationKind(kind), eligible)],
             "depends_on": [f"o{d}" for d in direct], "source": case.goal}
        if kind == "at_place" and params.get("final"):
            o["max_age_s"] = 2.0
        if eligible:
            o["eligible"] = list(eligible)
        out.append(o)
    return out
