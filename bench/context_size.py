#!/usr/bin/env python3
"""Planner context size per turn while the robot's sensor rates grow 10x.

Runs every scenario in ``scenarios/*.yaml`` (or the ``--scenario`` files) on
the real graph (sim_robot, aggregator, planner, verifier, supervisor in one
process) twice: at the scenario's sensor rates and at 10x. For every model
turn the journal records the bytes of the context the planner received
(``MODEL_TURN_STARTED.context_bytes``). The model sees a bounded projection
of the world, never the streams, so the size must not follow the rates and
must stay under the mission's ``context_byte_cap``: the cap the mission
really ran with, read from its ``MISSION_STARTED`` record (the scenario's
overrides merged over the defaults), not the default.

    python bench/context_size.py            # after `make setup` and `source scripts/env.sh`
    python bench/context_size.py --scenario scenarios/demo.yaml --json out.json
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

REPO = Path(__file__).resolve().parents[1]


def run(path: Path, rate_factor: float, workdir: Path) -> dict[str, Any]:
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventType
    from robot_harness.core.scenario import load_scenario
    from robot_harness.runner import run_scenario

    scenario = load_scenario(path)
    robot = scenario.robot.model_copy(update={"pose_rate_hz": scenario.robot.pose_rate_hz * rate_factor,
                                              "odom_rate_hz": scenario.robot.odom_rate_hz * rate_factor})
    scenario = scenario.model_copy(update={"robot": robot})
    journal_path = workdir / path.stem / f"x{rate_factor:g}" / "journal.sqlite3"
    t0 = time.perf_counter()
    report = run_scenario(scenario, journal_path=journal_path)
    wall = time.perf_counter() - t0
    journal = SqliteJournal(journal_path, clock=SystemClock(), ids=IdGenerator(None))
    try:
        turns = journal.events(mission_id=report["mission_id"], types=[EventType.MODEL_TURN_STARTED])
        started = journal.events(mission_id=report["mission_id"], types=[EventType.MISSION_STARTED])
    finally:
        journal.close()
    if not started:
        raise RuntimeError(f"{path.name}: the journal has no MISSION_STARTED record for {report['mission_id']}")
    sizes = [int(e.payload["context_bytes"]) for e in turns]
    cap = int(started[0].payload["config"]["context_byte_cap"])  # what this mission ran with
    return {"scenario": path.stem, "rate_factor": rate_factor, "pose_rate_hz": robot.pose_rate_hz,
            "odom_rate_hz": robot.odom_rate_hz, "status": report["status"], "turns": len(sizes),
            "context_bytes": sizes, "median": statistics.median(sizes) if sizes else 0, "max": max(sizes, default=0),
            "cap": cap, "wall_s": round(wall, 1), "bag_messages": (report.get("bag") or {}).get("messages", 0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--scenario", type=Path, action="append",
                        help="a scenario file (repeatable; default: every scenarios/*.yaml)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    require_loopback()
    paths = args.scenario or sorted((REPO / "scenarios").glob("*.yaml"))
    if not paths:
        parser.error("no scenario files")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="robot_harness-ctx-") as tmp:
        for path in paths:
            for factor in (1.0, 10.0):
                rows.append(run(path, factor, Path(tmp)))
                r = rows[-1]
                print(f"  {r['scenario']} x{factor:g}: {r['turns']} turns, max {r['max']} B (cap {r['cap']}), "
                      f"{r['status']}, {r['wall_s']} s", flush=True)
    w = max(len("scenario"), *(len(r["scenario"]) for r in rows))
    print(f"{'scenario':{w}s} {'pose/odom Hz':>12s} {'turns':>5s} {'median B':>9s} {'max B':>7s} "
          f"{'cap B':>6s} {'bag msgs':>9s}  status")
    for r in rows:
        rates = f"{r['pose_rate_hz']:g}/{r['odom_rate_hz']:g}"
        print(f"{r['scenario']:{w}s} {rates:>12s} {r['turns']:5d} {r['median']:9.0f} {r['max']:7d} {r['cap']:6d} "
              f"{r['bag_messages']:9d}  {r['status']}")
    pairs = [(a, b) for a, b in zip(rows[::2], rows[1::2]) if a["median"] and b["median"]]
    ratios = {a["scenario"]: b["median"] / a["median"] for a, b in pairs}
    if ratios:
        print(f"ratio of median context bytes 10x / 1x: min {min(ratios.values()):.2f}, "
              f"max {max(ratios.values()):.2f} over {len(ratios)} scenarios")
    over = [f"{r['scenario']} x{r['rate_factor']:g} ({r['max']} > {r['cap']})" for r in rows if r["max"] > r["cap"]]
    print(f"context under its mission's cap in every run: {'yes' if not over else 'NO: ' + ', '.join(over)}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "ratio_median": ratios, "over_cap": over}, indent=2))
    return 0 if not over else 1


if __name__ == "__main__":
    sys.exit(main())
