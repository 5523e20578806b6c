#!/usr/bin/env python3
"""What an MCP call costs on top of the same call made in-process.

One operator session mission runs on the simulated robot in-process
(``SimPorts``, no DDS); the same read-only skill (``get_pose``: a recorded
turn, a snapshot, a receipt) is called N times two ways, interleaved:

* **direct**: ``SessionHost.call`` and a wait for the journaled result, the
  path the MCP server's handler takes after decoding a request;
* **mcp**: the official SDK client over streamable HTTP on 127.0.0.1
  (``mcp.Client.call_tool``), through the server's handler to the same host.

Prints the median and p95 of each (ms per call) and their ratio; the
difference is the protocol's own cost (HTTP, JSON-RPC, the SSE stream, the
hop from the mission's thread to the server's event loop).

    python bench/mcp_overhead.py [--calls 40] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _loopback import require_loopback  # bench/_loopback.py (the script's own folder)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from robot_harness.core.clock import IdGenerator  # noqa: E402
from robot_harness.core.config import load_harness_config  # noqa: E402
from robot_harness.compose import mission_runner  # noqa: E402
from robot_harness.operator.session import ExternalPlanner, SessionContractCompiler, SessionHost  # noqa: E402
from robot_harness.core.journal import MemoryJournal  # noqa: E402
from robot_harness.core.scenario import Scenario  # noqa: E402
from robot_harness.core.skills import default_skills  # noqa: E402
from robot_harness.eval.modes import sim_config  # noqa: E402
from robot_harness.eval.simports import SimPorts  # noqa: E402
from robot_harness.operator.mcp_server import serve  # noqa: E402

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 2.0, "y": 1.0, "yaw": 0.5}}


def _host(workdir: Path) -> tuple[SessionHost, list[Any], Any]:
    sc = Scenario.model_validate({"goal": "bench", "world": {"places": PLACES, "start": "dock"},
                                  "robot": {"speed": 3.0}, "planner": {"turns": []},
                                  "limits": {"mission_timeout_s": 1e6}})
    ports = SimPorts(config=sim_config(sc), artifacts_dir=workdir / "artifacts")
    config = load_harness_config(overrides={**sc.harness_config(), "limits": {"max_turns": 100000,
                                                                              "mission_timeout_s": 1e6}})
    ids = IdGenerator(5)
    journal = MemoryJournal(clock=ports.clock, ids=ids)
    journal.setup()
    skills = default_skills(config.navigation)
    runners: list[Any] = []

    def start(planner: ExternalPlanner, caller: str) -> str:
        runner = mission_runner(config=config, journal=journal, clock=ports.clock, ids=ids, skills=skills,
                               snapshots=ports, planner=planner, navigation=ports, robot_io=ports, sleep=ports.sleep,
                               on_update=lambda s, a, e: e is not None and host.observe(e),
                               contract_compiler=SessionContractCompiler(), coverage_reviewer=SessionContractCompiler())
        runners.append(runner)
        threading.Thread(target=runner.run, args=("bench session",), kwargs={"mission_id": "bench-1"},
                         daemon=True).start()
        return "bench-1"

    host = SessionHost(start=start, stop=lambda m, r: runners[-1].request_stop(r), new_id=lambda: ids.new("mcp"),
                       idle_close_s=1e6)
    return host, list(skills), runners


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    require_loopback()
    with tempfile.TemporaryDirectory() as tmp:
        host, skills, _ = _host(Path(tmp))
        handle = serve(host, skills, port=0, decision_timeout_s=30.0)
        direct: list[float] = []
        over_mcp: list[float] = []

        async def run() -> None:
            import mcp

            async with mcp.Client(handle.url) as client:
                await client.call_tool("get_pose", {})  # warm-up: opens the session mission
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    ticket = await asyncio.to_thread(host.call, "get_pose", {}, caller="bench")
                    await asyncio.to_thread(ticket.wait, lambda t: t.decided, 30.0, what="result")
                    direct.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    result = await client.call_tool("get_pose", {})
                    over_mcp.append((time.perf_counter() - t0) * 1000)
                    assert result.structured_content["status"] == "ok", result.structured_content
        try:
            asyncio.run(run())
        finally:
            host.end("bench over")
            handle.stop()
    out = {name: {"median_ms": round(statistics.median(v), 2), "p95_ms": round(_pct(v, 0.95), 2), "n": len(v)}
           for name, v in (("direct", direct), ("mcp", over_mcp))}
    out["ratio_median"] = round(out["mcp"]["median_ms"] / out["direct"]["median_ms"], 2)
    print(f"get_pose per call, {args.calls} calls each, interleaved:")
    for name in ("direct", "mcp"):
        print(f"  {name:7s} median {out[name]['median_ms']:8.2f} ms   p95 {out[name]['p95_ms']:8.2f} ms")
    print(f"  mcp / direct (median): {out['ratio_median']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
