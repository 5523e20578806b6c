#!/usr/bin/env python3
"""Decision replay (issue 17): how much faster than the robot a recorded mission re-decides, and what the
regression set costs ``make test``.

No ROS, no model: each mission is run on the in-process simulated robot (virtual time), taped
(``eval/decisions.record``), then replayed by decision from the tape alone (``eval/decisions.replay``:
every journal event compared). Three figures, each beside its baseline from the same run:

* **a long mission** (``--long-s``, default ~260 s of robot time: a slow inspection round through five
  places): its recorded duration (the robot's time) against its replay's wall time, the ratio; and the
  in-process recording's own wall time (simulating the world as well as deciding) as the baseline the
  replay is compared with;
* **the benchmark's scenarios** (``scenarios/eval``, 218): replay ms per mission, median and p95, and
  robot seconds per replay second, median and p5 (the slowest ratios), against recording ms;
* **the regression set** (``test/replay/decisions``): its decision replay's total wall time, what
  ``make test`` pays for it, against loading its files.

It starts no DDS participant, but it runs the same loopback guard as every bench (``bench/_loopback.py``).
Exit 1 when a mission does not replay the same, or the long mission's ratio is under 80x.

    python bench/decisions.py [--json out.json] [--quick]
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
sys.path.insert(0, str(REPO))

from _loopback import require_loopback  # noqa: E402 - bench/_loopback.py (the script's own folder)

LONG = {
    "name": "bench-long-inspection-round",
    "description": "a slow quadruped's inspection round through five places, with a picture at each",
    "category": "inspection", "fault": "none",
    "goal": ("Go to lab, capture an image there, go to lobby, capture an image there, go to elevator, capture an "
             "image there, go to office_storage, capture an image there and return to dock."),
    "world": {"frame": "map", "start": "dock", "places": {
        "dock": {"x": 0.0, "y": 0.0}, "lab": {"x": -2.5, "y": 2.5}, "lobby": {"x": 2.0, "y": 3.5},
        "elevator": {"x": 4.0, "y": 2.0}, "office_storage": {"x": 3.0, "y": -1.5}}},
    "robot": {"speed": 0.07},
    "planner": {"turns": [t for p in ("lab", "lobby", "elevator", "office_storage") for t in (
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": p}}]},
        {"tool_calls": [{"name": "capture_image", "arguments": {"label": p}}]})]
        + [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]},
           {"done": "Round done: four pictures, back at the dock."}]},
    "limits": {"mission_timeout_s": 900, "max_turns": 20},
    "harness": {"navigation": {"timeout_s": 30.0, "timeout_per_m_s": 20.0}},
    "truth": {"visits": ["lab", "lobby", "elevator", "office_storage", "dock"],
              "captures_at": ["lab", "lobby", "elevator", "office_storage"], "final_at": "dock"},
}


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def _one(scenario: Any) -> dict[str, Any]:
    from robot_harness.eval.decisions import record, replay

    t0 = time.perf_counter()
    rec = record(scenario, workdir=Path(tempfile.mkdtemp(prefix="bench-decisions-")))
    record_s = time.perf_counter() - t0
    robot_s = rec.events[-1].stamp - rec.events[0].stamp if rec.events else 0.0
    t0 = time.perf_counter()
    result = replay(scenario, rec)
    replay_s = time.perf_counter() - t0
    return {"scenario": scenario.name, "status": rec.status, "events": result.events, "readings": result.readings,
            "robot_s": robot_s, "record_s": record_s, "replay_s": replay_s,
            "ratio": robot_s / replay_s if replay_s > 0 else 0.0}


def main(argv: list[str] | None = None) -> int:
    from robot_harness.core.errors import NondeterminismError
    from robot_harness.core.scenario import Scenario, load_scenario

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--quick", action="store_true", help="every 4th benchmark scenario")
    args = ap.parse_args(argv)
    require_loopback()  # no DDS participant here, but the code it loads is the harness's, as every bench
    out: dict[str, Any] = {}
    failures = []

    try:
        long = _one(Scenario.model_validate(LONG))
    except NondeterminismError as exc:
        print(f"the long mission does not replay the same: {exc.message}", file=sys.stderr)
        return 1
    out["long"] = long
    print(f"long mission ({long['status']}, {long['events']} events, {long['readings']} readings): "
          f"{long['robot_s']:.0f} s of robot time replays in {long['replay_s'] * 1000:.0f} ms = "
          f"{long['ratio']:.0f}x real time (recording it in-process took {long['record_s'] * 1000:.0f} ms: "
          f"the replay is {long['record_s'] / long['replay_s']:.1f}x faster than that)")
    if long["ratio"] < 80.0:
        failures.append(f"the long mission replays at {long['ratio']:.0f}x, under 80x")

    suite = sorted((REPO / "scenarios" / "eval").glob("*.yaml"))
    if args.quick:
        suite = suite[::4]
    rows = []
    for path in suite:
        try:
            rows.append(_one(load_scenario(path)))
        except NondeterminismError as exc:
            failures.append(f"{path.stem}: {exc.message}")
    rep = [r["replay_s"] * 1000 for r in rows]
    recs = [r["record_s"] * 1000 for r in rows]
    ratios = [r["ratio"] for r in rows if r["robot_s"] > 0]
    out["suite"] = {"missions": len(rows), "replay_ms_median": statistics.median(rep), "replay_ms_p95": _pct(rep, 0.95),
                    "record_ms_median": statistics.median(recs), "record_ms_p95": _pct(recs, 0.95),
                    "ratio_median": statistics.median(ratios), "ratio_p5": _pct(ratios, 0.05),
                    "robot_s_total": sum(r["robot_s"] for r in rows), "replay_s_total": sum(r["replay_s"] for r in rows)}
    s = out["suite"]
    print(f"benchmark scenarios ({s['missions']}, all the same decisions: {not failures}): replay "
          f"{s['replay_ms_median']:.1f} / {s['replay_ms_p95']:.1f} ms median / p95 per mission (recording "
          f"{s['record_ms_median']:.1f} / {s['record_ms_p95']:.1f}); robot time per replay time "
          f"{s['ratio_median']:.0f}x median, {s['ratio_p5']:.0f}x p5; {s['robot_s_total']:.0f} s of robot time "
          f"in {s['replay_s_total']:.1f} s")

    from robot_harness.eval.decisions import case_names, load_case, replay_recorded

    regression = REPO / "test" / "replay" / "decisions"
    cases = case_names(regression)
    load_s = replay_s = 0.0
    for name in cases:
        t0 = time.perf_counter()
        scenario, events, tape = load_case(regression, name)
        t1 = time.perf_counter()
        load_s += t1 - t0
        try:
            replay_recorded(scenario, events, tape)
        except NondeterminismError as exc:
            failures.append(f"regression {name}: {exc.message}")
        replay_s += time.perf_counter() - t1
    out["regression"] = {"cases": len(cases), "replay_s": replay_s, "load_s": load_s}
    print(f"regression set ({len(cases)} cases): decision replay {replay_s * 1000:.0f} ms in all (loading its files: "
          f"{load_s * 1000:.0f} ms)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
