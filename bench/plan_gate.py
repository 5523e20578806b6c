#!/usr/bin/env python3
"""What the plan gate saves: defective plans refused before any motion vs the same plans run.

For every scenario of the eval suite (scenarios/eval: 218 missions over nine families, each with its robot
fault or none), the fixed "model" (bench/_policy.py) proposes the whole plan for the mission's contract at
once (``propose_plan``, ending with ``propose_done``). Besides the correct plan, each applicable defect of
the kind a model makes is injected into it:

* ``acts_before_arriving``: the first capture, speech or message moved before the navigation it followed;
* ``skips_a_step``: the last step before done left out;
* ``wrong_place``: the first navigation sent to another known place;
* ``wrong_order``: the first two navigations swapped.

Each plan runs twice on the in-process simulated robot (virtual time, eval/modes): with the gate, and with
the benchmark-only ablation ``eval_ablations.plan_gate: false`` (the plan runs whatever the gate finds).
After its plan the "model" says nothing more, so what is measured is that one plan: the metres the robot
drove and the goals sent for it, and how the mission ended. A defective plan the gate refused that then
failed when run is a motion saved; one it refused that succeeded when run would be a false refusal; a
correct plan it refused, too.

    python bench/plan_gate.py [--json out.json] [--family inspection ...] [--limit N]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from _loopback import require_loopback  # bench/_loopback.py (the script's own folder)
from _policy import plan_steps  # bench/_policy.py
from _suite import eval_paths  # bench/_suite.py

REPO = Path(__file__).resolve().parents[1]
_MOVES = ("navigate_to", "navigate_through", "follow_waypoints")


def _acts_before_arriving(steps: list[dict[str, Any]], places: list[str]) -> list[dict[str, Any]] | None:
    for i, s in enumerate(steps):
        if s["skill"] not in _MOVES:
            j = max((k for k in range(i) if steps[k]["skill"] in _MOVES), default=None)
            if j is None:
                return None
            return steps[:j] + [s] + steps[j:i] + steps[i + 1:]
    return None


def _skips_a_step(steps: list[dict[str, Any]], places: list[str]) -> list[dict[str, Any]] | None:
    return steps[:-1] if len(steps) > 1 else None


def _wrong_place(steps: list[dict[str, Any]], places: list[str]) -> list[dict[str, Any]] | None:
    for i, s in enumerate(steps):
        if s["skill"] == "navigate_to":
            used = {t["arguments"].get("place") for t in steps if t["skill"] == "navigate_to"}
            other = next((p for p in sorted(places) if p not in used), None)
            if other is None:
                return None
            return steps[:i] + [{**s, "arguments": {"place": other}}] + steps[i + 1:]
    return None


def _wrong_order(steps: list[dict[str, Any]], places: list[str]) -> list[dict[str, Any]] | None:
    moves = [i for i, s in enumerate(steps) if s["skill"] == "navigate_to"]
    if len(moves) < 2 or steps[moves[0]]["arguments"] == steps[moves[1]]["arguments"]:
        return None
    out = list(steps)
    out[moves[0]], out[moves[1]] = out[moves[1]], out[moves[0]]
    return out


DEFECTS: dict[str, Callable[[list[dict[str, Any]], list[str]], list[dict[str, Any]] | None]] = {
    "none": lambda steps, places: steps,
    "acts_before_arriving": _acts_before_arriving,
    "skips_a_step": _skips_a_step,
    "wrong_place": _wrong_place,
    "wrong_order": _wrong_order,
}


class OnePlan:
    """A planner that proposes one plan (the policy's, with ``defect``), then says nothing."""

    name = "one-plan"

    def __init__(self, places: list[str], defect: str) -> None:
        self.places, self.defect = places, defect
        self.calls = 0
        self.applicable = True
        self.refused = False
        self.plan: list[dict[str, Any]] = []
        self.ports: Any = None

    def next_turn(self, request: Any) -> Any:
        from robot_harness.core.records import ModelResponse, ToolCall

        self.calls += 1
        if self.calls > 1:
            self.refused = self.refused or any(
                (r.get("content") or {}).get("code") == "plan_refused"
                for r in request.context.get("last_tool_results") or [])
            return ModelResponse()
        steps = plan_steps(request.context, self.places)
        mutated = DEFECTS[self.defect](steps, self.places) if steps else None
        if mutated is None or (self.defect != "none" and mutated == steps):
            self.applicable = False
            return ModelResponse()
        self.plan = mutated + [{"skill": "propose_done", "arguments": {"summary": "All obligations met."}}]
        return ModelResponse(tool_calls=(ToolCall(id=f"plan-{self.defect}", name="propose_plan",
                                                  arguments={"steps": self.plan}),))


def _metres(trajectory: list[tuple[float, Any]]) -> float:
    return sum(math.hypot(b.x - a.x, b.y - a.y) for (_, a), (_, b) in zip(trajectory, trajectory[1:]))


def run(scenario: Any, defect: str, gated: bool, workdir: Path) -> dict[str, Any] | None:
    from robot_harness.eval.modes import run_one

    places = sorted(scenario.world.places)
    planner = OnePlan(places, defect)
    overrides = {} if gated else {"eval_ablations": {"plan_gate": False}}

    def attach(_scenario: Any, ports: Any) -> OnePlan:
        planner.ports = ports
        return planner

    result = run_one(scenario, "gated", workdir=workdir, overrides=overrides, planner=attach)
    if not planner.applicable:
        return None
    ports = planner.ports
    return {"scenario": scenario.name, "family": scenario.name.split("-")[0], "defect": defect, "gated": gated,
            "status": result.status, "metres": round(_metres(ports.trajectory), 2), "goals": len(ports.sent_goals),
            "refused": planner.refused}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--family", action="append", help="only these families (repeatable)")
    parser.add_argument("--limit", type=int, default=0, help="at most N scenarios per family (0: all)")
    args = parser.parse_args(argv)
    require_loopback()  # no ROS here, but every bench runs on the loopback profile (test_crash_truth)
    sys.path.insert(0, str(REPO))
    from robot_harness.core.scenario import load_scenario

    paths = eval_paths(REPO, args.family, args.limit)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="robot_harness-plan-gate-") as tmp:
        for k, path in enumerate(paths):
            scenario = load_scenario(path)
            for defect in DEFECTS:
                pair = [run(scenario, defect, gated, Path(tmp) / f"{k}-{defect}-{gated}") for gated in (True, False)]
                if pair[0] is not None and pair[1] is not None:
                    rows.append({**pair[0], "ungated_status": pair[1]["status"], "ungated_metres": pair[1]["metres"],
                                 "ungated_goals": pair[1]["goals"]})
    wall = time.perf_counter() - started
    correct = [r for r in rows if r["defect"] == "none"]
    defective = [r for r in rows if r["defect"] != "none"]
    refused = [r for r in defective if r["refused"]]
    saved = [r for r in refused if r["ungated_status"] != "SUCCEEDED"]
    false_refusals = [r for r in refused if r["ungated_status"] == "SUCCEEDED"]
    passed = [r for r in defective if not r["refused"]]
    print(f"{len(paths)} scenarios, {len(rows)} plans ({len(correct)} correct, {len(defective)} defective) "
          f"in {wall:.1f} s")
    print(f"{'defect':22s} {'plans':>5s} {'refused':>7s} {'gated m':>8s} {'ungated m':>9s} {'ungated goals':>13s} "
          f"{'ungated ok':>10s}")
    for defect in DEFECTS:
        mine = [r for r in rows if r["defect"] == defect]
        if not mine:
            continue
        print(f"{defect:22s} {len(mine):5d} {sum(r['refused'] for r in mine):7d} "
              f"{sum(r['metres'] for r in mine):8.1f} {sum(r['ungated_metres'] for r in mine):9.1f} "
              f"{sum(r['ungated_goals'] for r in mine):13d} "
              f"{sum(r['ungated_status'] == 'SUCCEEDED' for r in mine):10d}")
    wasted = [r["ungated_metres"] for r in saved]
    print(f"defective plans refused before any motion: {len(refused)} of {len(defective)} "
          f"(gated: {sum(r['metres'] for r in refused):.1f} m driven, {sum(r['goals'] for r in refused)} goals sent)")
    print(f"  the same plans run without the gate: {len(saved)} failed after {sum(wasted):.1f} m "
          f"({statistics.median(wasted) if wasted else 0:.1f} m median per plan) and "
          f"{sum(r['ungated_goals'] for r in saved)} goals; {len(false_refusals)} would have succeeded (false refusals)")
    print(f"  defective plans the gate let through: {len(passed)}; of those "
          f"{sum(r['ungated_status'] != 'SUCCEEDED' for r in passed)} failed when run")
    print(f"correct plans refused by the gate: {sum(r['refused'] for r in correct)} of {len(correct)}; "
          f"succeeded gated: {sum(r['status'] == 'SUCCEEDED' for r in correct)}, "
          f"ungated: {sum(r['ungated_status'] == 'SUCCEEDED' for r in correct)}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "wall_s": wall}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
