#!/usr/bin/env python3
"""Routing with provider fallback vs a fixed provider, when one navigation stack is degraded.

The eval suite's scenarios (scenarios/eval: nine families, each mission with its own robot fault or none)
whose own fault is not one of a navigation stack's (a rejected, aborted, stalled or lying goal: those
would be routed around too, and the comparison would no longer be about the degraded stack) run on the in-process simulated robot (virtual time, eval/modes) with a second navigation stack on
the same body (``backup``, at 0.8x the robot's speed), and the robot's own Nav2 degraded in one of these ways:

* ``down``: it rejects every goal;
* ``flaky``: it reports its 1st, 3rd and 5th goals succeeded early, short of the target (the harness's
  outcome check finds the pose contradicts success: FAILED);
* ``healthy``: nothing is wrong (what routing costs when it is not needed).

Two harness settings, the same "model" (bench/_policy.py's stepwise policy, which retries what is still
open, so a fixed provider gets its retries too):

* ``fixed``: one navigation card, the robot's own Nav2: the harness as it was before providers;
* ``routed``: cards for both (the own Nav2's claims to be faster and better; the backup's is slower), the
  routing score over them with this mission's outcomes, and the ``switch_provider_or_skill`` rung's
  fallback re-running a failed call on the other provider (budget 1 per mission, as by default).

Printed per degradation: success rate, mission time in robot seconds (median and p95, over the missions
that succeeded in both settings, like for like), model calls per mission and goals sent.

    python bench/routing.py [--json out.json] [--family navigation ...] [--limit N]
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
from _suite import eval_paths  # bench/_suite.py

REPO = Path(__file__).resolve().parents[1]
DEGRADED: dict[str, list[dict[str, Any]]] = {
    "down": [{"kind": "reject", "at_s": 0.0}],
    "flaky": [{"kind": "early_success", "on_goal": n} for n in (1, 3, 5)],
    "healthy": [],
}
CARDS = {"nav_main": {"capability": "navigation", "namespace": "", "p_success": 0.95, "latency_s": 1.0, "cost": 1.0},
         "nav_backup": {"capability": "navigation", "namespace": "backup", "p_success": 0.9, "latency_s": 1.25,
                        "cost": 1.0}}


class Stepper:
    """The bench's "model": the next call for the first open obligation (bench/_policy.policy)."""

    name = "policy"

    def __init__(self, where: dict[str, dict[str, float]]) -> None:
        self.where = where
        self.calls = 0

    def next_turn(self, request: Any) -> Any:
        from robot_harness.core.records import ModelResponse, ToolCall

        self.calls += 1
        call = policy(request.context, sorted(self.where), self.where)
        return ModelResponse(tool_calls=(ToolCall(id=f"call-{self.calls}", name=call["name"],
                                                  arguments=call["arguments"]),))


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def run(scenario: Any, degradation: str, setting: str, workdir: Path) -> dict[str, Any]:
    from robot_harness.core.scenario import FaultSpec
    from robot_harness.eval.modes import run_one

    robot = scenario.robot.model_copy(update={
        "faults": [*scenario.robot.faults, *(FaultSpec(**f) for f in DEGRADED[degradation])],
        "providers": {"backup": {"speed": round(scenario.robot.speed * 0.8, 3)}}})
    scenario = scenario.model_copy(update={"robot": robot})
    where = {k: v.model_dump() for k, v in scenario.world.places.items()}
    planner = Stepper(where)
    overrides = {"providers": CARDS} if setting == "routed" else {}
    result = run_one(scenario, "gated", workdir=workdir, overrides=overrides, planner=lambda _s, _p: planner)
    return {"scenario": scenario.name, "degradation": degradation, "setting": setting, "status": result.status,
            "sim_s": round(result.sim_s, 2), "calls": planner.calls, "goals": result.dispatches}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--family", action="append", help="only these families (repeatable)")
    parser.add_argument("--limit", type=int, default=0, help="at most N scenarios per family (0: all)")
    args = parser.parse_args(argv)
    require_loopback()  # no DDS participant here, but every bench runs on the loopback profile
    sys.path.insert(0, str(REPO))
    from robot_harness.core.scenario import load_scenario

    from robot_harness.sim.world import PROVIDER_FAULT_KINDS

    paths = eval_paths(REPO, args.family, args.limit)
    stack_faults = [p for p in paths if any(f.kind in PROVIDER_FAULT_KINDS for f in load_scenario(p).robot.faults)]
    print(f"left out: {len(stack_faults)} scenarios whose own fault is a navigation stack's "
          f"({', '.join(sorted({p.stem.split('-', 1)[1] for p in stack_faults}))})")
    paths = [p for p in paths if p not in stack_faults]
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="robot_harness-routing-") as tmp:
        for k, path in enumerate(paths):
            scenario = load_scenario(path)
            for degradation in DEGRADED:
                for setting in ("fixed", "routed"):
                    rows.append(run(scenario, degradation, setting, Path(tmp) / f"{k}-{degradation}-{setting}"))
    wall = time.perf_counter() - started
    print(f"{len(paths)} scenarios x {len(DEGRADED)} degradations x 2 settings = {len(rows)} missions in {wall:.1f} s")
    print(f"{'degraded':9s} {'setting':7s} {'success':>8s} {'time med':>9s} {'time p95':>9s} {'calls/mission':>13s} "
          f"{'goals/mission':>13s}")
    summary: dict[str, dict[str, Any]] = {}
    for degradation in DEGRADED:
        mine = {s: {r["scenario"]: r for r in rows if r["degradation"] == degradation and r["setting"] == s}
                for s in ("fixed", "routed")}
        both = [n for n in mine["fixed"] if mine["fixed"][n]["status"] == "SUCCEEDED"
                and mine["routed"][n]["status"] == "SUCCEEDED"]
        for setting, by in mine.items():
            ok = sum(r["status"] == "SUCCEEDED" for r in by.values()) / max(1, len(by))
            times = [by[n]["sim_s"] for n in both]
            calls = statistics.mean(r["calls"] for r in by.values())
            goals = statistics.mean(r["goals"] for r in by.values())
            summary.setdefault(degradation, {})[setting] = {
                "success": round(ok, 4), "time_median_s": round(statistics.median(times), 2) if times else None,
                "time_p95_s": round(_pct(times, 0.95), 2) if times else None, "calls": round(calls, 2),
                "goals": round(goals, 2), "like_for_like": len(both)}
            med, p95 = summary[degradation][setting]["time_median_s"], summary[degradation][setting]["time_p95_s"]
            print(f"{degradation:9s} {setting:7s} {ok:8.3f} {med if med is not None else '-':>9} "
                  f"{p95 if p95 is not None else '-':>9} {calls:13.2f} {goals:13.2f}")
        f, r = summary[degradation]["fixed"], summary[degradation]["routed"]
        ratio = (f"{r['time_median_s'] / f['time_median_s']:.2f}x" if both and f["time_median_s"] else "-")
        print(f"          routed vs fixed: success {r['success'] - f['success']:+.3f}; median time {ratio} on the "
              f"{len(both)} missions both finished")
        # against the healthy robot, fixed provider: what the degradation still costs once routed around
        healthy = {r2["scenario"]: r2 for r2 in rows if r2["degradation"] == "healthy" and r2["setting"] == "fixed"}
        pairs = [(mine["routed"][n]["sim_s"], healthy[n]["sim_s"]) for n in mine["routed"]
                 if mine["routed"][n]["status"] == "SUCCEEDED" and healthy.get(n, {}).get("status") == "SUCCEEDED"]
        if pairs and degradation != "healthy":
            t1, t0 = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
            summary[degradation]["routed_vs_healthy"] = {"missions": len(pairs), "routed_s": t1, "healthy_s": t0}
            print(f"          routed, against the healthy robot on a fixed provider: median {t1:.2f} s vs "
                  f"{t0:.2f} s ({t1 / t0:.2f}x) on {len(pairs)} missions")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary, "wall_s": wall}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
