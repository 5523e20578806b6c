#!/usr/bin/env python3
"""Planner context size per turn while the robot's sensor rates grow 10x.

Runs the demo mission on the real graph (sim_robot, aggregator, planner,
verifier, supervisor in one process) twice: at the scenario's sensor rates
(20 Hz pose, 50 Hz odometry) and at 10x (200 Hz, 500 Hz). For every model
turn the journal records the bytes of the context the planner received
(``MODEL_TURN_STARTED.context_bytes``). The model sees a bounded projection
of the world, never the streams, so the size must not follow the rates and
must stay under ``context_byte_cap``.

    python bench/context_size.py            # after `make setup` and `source scripts/env.sh`
    python bench/context_size.py --json out.json
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

REPO = Path(__file__).resolve().parents[1]


def run(rate_factor: float, workdir: Path) -> dict[str, Any]:
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.config import HarnessConfig
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventType
    from robot_harness.core.scenario import load_scenario
    from robot_harness.runner import run_scenario

    scenario = load_scenario(REPO / "scenarios" / "demo.yaml")
    robot = scenario.robot.model_copy(update={"pose_rate_hz": scenario.robot.pose_rate_hz * rate_factor,
                                              "odom_rate_hz": scenario.robot.odom_rate_hz * rate_factor})
    scenario = scenario.model_copy(update={"robot": robot})
    journal_path = workdir / f"x{rate_factor:g}" / "journal.sqlite3"
    t0 = time.perf_counter()
    report = run_scenario(scenario, journal_path=journal_path)
    wall = time.perf_counter() - t0
    journal = SqliteJournal(journal_path, clock=SystemClock(), ids=IdGenerator(None))
    try:
        turns = journal.events(mission_id=report["mission_id"], types=[EventType.MODEL_TURN_STARTED])
    finally:
        journal.close()
    sizes = [int(e.payload["context_bytes"]) for e in turns]
    cap = HarnessConfig().context_byte_cap
    return {"rate_factor": rate_factor, "pose_rate_hz": robot.pose_rate_hz, "odom_rate_hz": robot.odom_rate_hz,
            "status": report["status"], "turns": len(sizes), "context_bytes": sizes,
            "median": statistics.median(sizes), "max": max(sizes), "cap": cap, "wall_s": round(wall, 1),
            "bag_messages": (report.get("bag") or {}).get("messages", 0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="robot_harness-ctx-") as tmp:
        base = run(1.0, Path(tmp))
        fast = run(10.0, Path(tmp))
    print(f"{'sensor rates':28s} {'turns':>5s} {'median B':>9s} {'max B':>7s} {'cap B':>6s} {'bag msgs':>9s}  status")
    for r in (base, fast):
        label = f"pose {r['pose_rate_hz']:g} Hz, odom {r['odom_rate_hz']:g} Hz"
        print(f"{label:28s} {r['turns']:5d} {r['median']:9.0f} {r['max']:7d} {r['cap']:6d} {r['bag_messages']:9d}  {r['status']}")
    ratio = fast["median"] / base["median"]
    print(f"ratio median context bytes 10x / 1x: {ratio:.2f}  (bag messages: {fast['bag_messages'] / max(1, base['bag_messages']):.1f}x)")
    ok = fast["max"] <= fast["cap"] and base["max"] <= base["cap"]
    print(f"context under its cap at both rates: {'yes' if ok else 'NO'}")
    if args.json:
        args.json.write_text(json.dumps({"base": base, "x10": fast, "ratio_median": ratio, "under_cap": ok}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
