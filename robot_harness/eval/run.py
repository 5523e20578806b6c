"""The benchmark: every scenario of the suite under every mode and ablation; table, JSON, plots.

Rates (per mode, over the suite's runs):

* ``success_rate``: the harness said SUCCEEDED and the task was really done.
* ``false_completion_rate``: of the runs whose task was *not* really done,
  the share the harness declared SUCCEEDED (how often it lies).
* ``false_rejection_rate``: of the runs whose task *was* really done, the
  share the harness did not declare SUCCEEDED (how often it under-claims).
* ``duplicate_dispatches``: goals that repeated a motion (see adjudicate.py).
* ``overhead_ms_p50`` / ``_p95``: the harness's own compute per tool call
  (wall time minus the time spent simulating the world, which runs on virtual
  time), median and 95th percentile over runs. The journal is in memory here;
  SQLite's fsync per commit comes on top on a robot (see bench/overhead.py).
* ``llm_calls_per_mission``: planner turns per mission (scripted here; a model
  would be called that often); ``tokens_per_mission`` (0 for scripted turns).
* ``dispatches_per_mission``: goals sent to the robot; ``sim_s_per_mission``:
  simulated mission time (what a loop costs on a robot).
* ``stale_dispatches``: motions sent on a world that had changed unseen: accepted
  while the pose stream was silent or frozen, or preempting a goal another client
  had the robot executing (from the simulator's truth).
* ``infeasible_dispatches``: goals sent that could not be reached: the navigator
  inactive, or no path from the robot's true pose (a goal in an obstacle, off the
  map, behind a closed door), from the simulator's truth.
* ``missed_waypoints_accepted``: places a task had the robot pass (a route's
  waypoints, a patrol's stops) that it never truly passed, in missions declared
  SUCCEEDED, from the simulator's true trajectory.
"""
from __future__ import annotations

import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..core.scenario import Scenario, load_scenario
from .modes import ABLATIONS, MODES, RunResult, run_one

__all__ = ["SUITE_DIR", "ALL_MODES", "load_suite", "run_suite", "summarize", "measures", "COSTS", "write_outputs",
           "QUICK_FAULTS"]

SUITE_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "eval"
ALL_MODES = (*MODES, *ABLATIONS)
QUICK_TASKS = ("navigation", "inspection")
QUICK_FAULTS = None  # every fault, on the quick tasks


def load_suite(directory: Path = SUITE_DIR, *, quick: bool = False) -> list[Scenario]:
    scenarios = [load_scenario(p) for p in sorted(directory.glob("*.yaml"))]
    if not scenarios:
        raise FileNotFoundError(f"no scenarios in {directory}")
    if quick:
        scenarios = [s for s in scenarios if s.category in QUICK_TASKS]
    return scenarios


def run_suite(scenarios: Sequence[Scenario], modes: Sequence[str] = ALL_MODES, *, workdir: Path,
              progress: Callable[[int, int, RunResult], None] | None = None) -> list[RunResult]:
    results: list[RunResult] = []
    total = len(scenarios) * len(modes)
    for sc in scenarios:
        for mode in modes:
            r = run_one(sc, mode, workdir=workdir / mode / sc.name)
            results.append(r)
            if progress is not None:
                progress(len(results), total, r)
    return results


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def summarize(results: Sequence[RunResult]) -> dict[str, dict[str, Any]]:
    by_mode: dict[str, list[RunResult]] = defaultdict(list)
    for r in results:
        by_mode[r.mode].append(r)
    return {mode: measures(rs) for mode, rs in by_mode.items()}


COSTS = ("llm_calls_per_mission", "dispatches_per_mission", "recoveries_per_mission", "sim_s_per_mission")
"""The per-mission costs among ``measures``' keys (what a configuration evaluation compares like for like)."""


def measures(rs: Sequence[RunResult]) -> dict[str, Any]:
    """The rates, counts and costs of one set of runs (one mode's, in ``summarize``); at least one run."""
    done = [r for r in rs if r.truth.done]
    undone = [r for r in rs if not r.truth.done]
    per_step = [r.wall_ms / max(1, r.steps) for r in rs]
    return {
        "missions": len(rs),
        "success_rate": round(sum(r.claimed and r.truth.done for r in rs) / len(rs), 4),
        "false_completion_rate": round(sum(r.claimed for r in undone) / len(undone), 4) if undone else 0.0,
        "false_rejection_rate": round(sum(not r.claimed for r in done) / len(done), 4) if done else 0.0,
        "false_completions": sum(r.claimed for r in undone),
        "false_rejections": sum(not r.claimed for r in done),
        "duplicate_dispatches": sum(r.duplicates for r in rs),
        "stale_dispatches": sum(r.stale_dispatches for r in rs),
        "infeasible_dispatches": sum(r.infeasible_dispatches for r in rs),
        "missed_waypoints_accepted": sum(r.missed_waypoints_accepted for r in rs),
        "dispatches_per_mission": round(statistics.fmean(r.dispatches for r in rs), 2),
        "recoveries_per_mission": round(statistics.fmean(r.recoveries for r in rs), 2),
        "overhead_ms_p50": round(_pct(per_step, 0.5), 3),
        "overhead_ms_p95": round(_pct(per_step, 0.95), 3),
        "mission_ms_p50": round(_pct([r.wall_ms for r in rs], 0.5), 2),
        "llm_calls_per_mission": round(statistics.fmean(r.planner_calls for r in rs), 2),
        "tokens_per_mission": round(statistics.fmean(r.tokens for r in rs), 1),
        "wall_ms_per_mission": round(statistics.fmean(r.wall_ms for r in rs), 2),
        "recovery": dict(Counter(r.recovery for r in rs if r.recovery)),
        "status": dict(Counter(r.status for r in rs)),
        "sim_s_per_mission": round(statistics.fmean(r.sim_s for r in rs), 2),
    }


_COLUMNS = ("success_rate", "false_completion_rate", "false_rejection_rate", "duplicate_dispatches",
            "stale_dispatches", "infeasible_dispatches", "missed_waypoints_accepted", "overhead_ms_p50", "overhead_ms_p95", "llm_calls_per_mission",
            "dispatches_per_mission", "sim_s_per_mission")


def table(summary: dict[str, dict[str, Any]]) -> str:
    head = "| mode | " + " | ".join(_COLUMNS) + " |"
    rows = [head, "|" + "---|" * (len(_COLUMNS) + 1)]
    for mode in ALL_MODES:
        if mode in summary:
            rows.append(f"| {mode} | " + " | ".join(str(summary[mode][c]) for c in _COLUMNS) + " |")
    return "\n".join(rows) + "\n"


def write_outputs(results: Sequence[RunResult], out: Path, *, wall_s: float, quick: bool) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(results)
    scenarios = sorted({r.scenario for r in results})
    report = {"generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "quick": quick,
              "scenarios": len(scenarios), "runs": len(results), "wall_s": round(wall_s, 1), "modes": summary,
              "definitions": __doc__.split("\n\n", 1)[1].strip()}
    (out / "results.json").write_text(json.dumps(report, indent=2))
    (out / "runs.json").write_text(json.dumps([r.as_dict() for r in results], indent=1))
    (out / "table.md").write_text(f"{len(scenarios)} scenarios x {len(summary)} modes, {wall_s:.0f} s\n\n"
                                  + table(summary))
    _plots(results, summary, out)
    return report


def _plots(results: Sequence[RunResult], summary: dict[str, dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for m in ALL_MODES if m in summary]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.27
    for k, (col, label) in enumerate((("success_rate", "success"), ("false_completion_rate", "false completion"),
                                      ("false_rejection_rate", "false rejection"))):
        ax.bar([i + (k - 1) * width for i in range(len(modes))], [summary[m][col] for m in modes], width, label=label)
    ax.set_xticks(range(len(modes)), modes, rotation=20, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("rate")
    ax.set_title("robot_harness benchmark: outcomes per mode (adjudicated against the simulator's truth)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "modes.png", dpi=110)
    plt.close(fig)

    faults = sorted({r.fault for r in results})
    fig, ax = plt.subplots(figsize=(10, 5))
    for mode in ("direct", "monitored", "gated"):
        if mode not in summary:
            continue
        rates = []
        for f in faults:
            undone = [r for r in results if r.mode == mode and r.fault == f and not r.truth.done]
            rates.append(sum(r.claimed for r in undone) / len(undone) if undone else 0.0)
        ax.plot(faults, rates, marker="o", label=mode)
    ax.set_ylabel("false completion rate")
    ax.set_title("false completions by fault")
    ax.tick_params(axis="x", rotation=35)
    for lbl in ax.get_xticklabels():
        lbl.set_ha("right")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "false_completion_by_fault.png", dpi=110)
    plt.close(fig)
