#!/usr/bin/env python3
"""Model calls per mission with and without remembered verified examples, on repeated mission families.

The eval suite's nine families (scenarios/eval) are each one goal repeated over 22-25 missions with a
different robot fault each (or none). Each family runs in order on one journal, on the in-process
simulated robot (virtual time, eval/modes), twice:

* ``memory``: each mission is remembered as it ends (core/memory.py: only a committed, verified success
  becomes an example) and the next mission's planner context carries up to ``memory.examples`` (3)
  verified plans of the most similar goals;
* ``no-memory``: the same, with ``memory.examples: 0`` (nothing retrieved).

The "model" (bench/_policy.py) steps through the open obligations one call at a time, except that when
its context holds a verified example it proposes that example's plan whole (``propose_plan``, ending
with ``propose_done``), which the plan gate checks against this mission's contract before anything moves;
when a step fails it proposes the rest of that plan from the failed step (the verified prefix stands), and
after a refused plan it steps. So what is measured is what a verified example
saves a model that uses it, and that the gate stands between a remembered plan and the robot.

    python bench/memory.py [--json out.json] [--family inspection ...]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _loopback import require_loopback  # bench/_loopback.py (the script's own folder)
from _policy import policy  # bench/_policy.py

REPO = Path(__file__).resolve().parents[1]


class Recaller:
    """Steps (bench/_policy.policy), or proposes a remembered verified plan whole when it has one."""

    name = "recaller"

    def __init__(self, where: dict[str, dict[str, float]]) -> None:
        self.where = where
        self.calls = 0
        self.planned = 0
        self.refused = 0
        self.plan: list[dict[str, Any]] = []

    def next_turn(self, request: Any) -> Any:
        from robot_harness.core.records import ModelResponse, ToolCall

        self.calls += 1
        ctx = request.context
        results = ctx.get("last_tool_results") or []
        if any((r.get("content") or {}).get("code") == "plan_refused" for r in results):
            self.refused += 1
        examples = ctx.get("verified_examples") or []
        stopped = next((e for e in ctx.get("runtime_events") or [] if e.get("type") == "plan_interrupted"), None)
        fresh = not ctx.get("runtime_events") and not results and not self.planned
        if examples and fresh and examples[0].get("plan"):
            self.planned += 1
            self.plan = [{"skill": s["skill"], "arguments": s["arguments"]} for s in examples[0]["plan"]]
            self.plan.append({"skill": "propose_done", "arguments": {"summary": "As in a verified attempt."}})
            call = {"name": "propose_plan", "arguments": {"steps": self.plan}}
        elif stopped is not None and self.plan and not self.refused:
            # the rest of the remembered plan, from the step that failed (its prefix is verified)
            self.plan = self.plan[max(0, int(stopped["detail"]["steps_run"]) - 1):]
            call = {"name": "propose_plan", "arguments": {"steps": self.plan}}
        else:
            call = policy(ctx, sorted(self.where), self.where)
        return ModelResponse(tool_calls=(ToolCall(id=f"call-{self.calls}", name=call["name"],
                                                  arguments=call["arguments"]),))


def run_family(paths: list[Path], setting: str, workdir: Path) -> list[dict[str, Any]]:
    from robot_harness.core.scenario import load_scenario
    from robot_harness.eval.modes import run_one

    journal = workdir / "journal.sqlite3"
    rows = []
    for k, path in enumerate(paths):
        scenario = load_scenario(path)
        where = {n: p.model_dump() for n, p in scenario.world.places.items()}
        planner = Recaller(where)
        overrides = {"memory": {"examples": 0}} if setting == "no-memory" else {}
        result = run_one(scenario, "gated", workdir=workdir / f"{k}", journal_path=journal, overrides=overrides,
                         planner=lambda _s, _p: planner)
        rows.append({"scenario": scenario.name, "setting": setting, "status": result.status, "calls": planner.calls,
                     "planned_from_memory": planner.planned, "plans_refused": planner.refused,
                     "sim_s": round(result.sim_s, 2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--family", action="append", help="only these families (repeatable)")
    args = parser.parse_args(argv)
    require_loopback()  # no DDS participant here, but every bench runs on the loopback profile
    sys.path.insert(0, str(REPO))
    paths = sorted((REPO / "scenarios" / "eval").glob("*.yaml"))
    families: dict[str, list[Path]] = {}
    for p in paths:
        families.setdefault(p.stem.split("-")[0], []).append(p)
    if args.family:
        families = {f: v for f, v in families.items() if f in args.family}
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="robot_harness-memory-") as tmp:
        for family, mine in families.items():
            for setting in ("no-memory", "memory"):
                rows += [{**r, "family": family} for r in run_family(mine, setting, Path(tmp) / family / setting)]
    wall = time.perf_counter() - started
    print(f"{len(families)} families, {sum(len(v) for v in families.values())} missions each way, in {wall:.1f} s")
    print(f"{'family':11s} {'no-memory calls':>15s} {'memory calls':>12s} {'ratio':>6s} {'success (no-mem/mem)':>21s} "
          f"{'plans from memory':>17s} {'refused':>7s}")
    summary: dict[str, Any] = {}
    for family in families:
        by = {s: [r for r in rows if r["family"] == family and r["setting"] == s] for s in ("no-memory", "memory")}
        c0, c1 = (statistics.mean(r["calls"] for r in by[s]) for s in ("no-memory", "memory"))
        s0, s1 = (sum(r["status"] == "SUCCEEDED" for r in by[s]) / len(by[s]) for s in ("no-memory", "memory"))
        planned = sum(r["planned_from_memory"] for r in by["memory"])
        refused = sum(r["plans_refused"] for r in by["memory"])
        summary[family] = {"calls_no_memory": round(c0, 2), "calls_memory": round(c1, 2), "success_no_memory": s0,
                           "success_memory": s1, "planned_from_memory": planned, "refused": refused}
        print(f"{family:11s} {c0:15.2f} {c1:12.2f} {c0 / max(c1, 1e-9):5.2f}x {s0:10.3f}/{s1:.3f} {planned:17d} "
              f"{refused:7d}")
    all_ = {s: [r for r in rows if r["setting"] == s] for s in ("no-memory", "memory")}
    c0, c1 = (statistics.mean(r["calls"] for r in all_[s]) for s in ("no-memory", "memory"))
    s0, s1 = (sum(r["status"] == "SUCCEEDED" for r in all_[s]) / len(all_[s]) for s in ("no-memory", "memory"))
    print(f"{'all':11s} {c0:15.2f} {c1:12.2f} {c0 / max(c1, 1e-9):5.2f}x {s0:10.3f}/{s1:.3f}")
    won = {(r["family"], r["scenario"]) for r in all_["no-memory"] if r["status"] == "SUCCEEDED"} & {
        (r["family"], r["scenario"]) for r in all_["memory"] if r["status"] == "SUCCEEDED"}
    w0, w1 = (statistics.mean(r["calls"] for r in all_[s] if (r["family"], r["scenario"]) in won) if won else 0.0
              for s in ("no-memory", "memory"))
    print(f"on the {len(won)} missions that succeeded both ways: {w0:.2f} vs {w1:.2f} calls per mission "
          f"({w0 / max(w1, 1e-9):.2f}x)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary, "wall_s": wall}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
