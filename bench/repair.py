#!/usr/bin/env python3
"""LLM calls and tokens per mission: suffix repair vs whole-plan replanning.

Runs scenarios on the real graph (sim_robot, aggregator, planner node with the
``llm`` backend and the real ``openai`` client, verifier, recovery,
supervisor) against a local OpenAI-compatible server whose "model" is a fixed
policy: it reads the context it is sent and calls the tool for the first
obligation on ``progress.frontier`` (navigate_to / capture_image /
send_message), or ``propose_done`` when the frontier is empty. The same
policy, the same robot faults, the same scenarios, two harness settings:

* ``suffix`` (default): after a failure the planner keeps the verified prefix
  (obligations already evidenced by receipts are off its frontier) and
  re-plans only what is left;
* ``whole``: after a failure the planner's frontier is reset to the whole
  contract and it re-plans the mission from the start.

Every scenario in ``scenarios/*.yaml`` that can show a repair runs (``SKIP``
says which cannot, and why; the scripted turns of a scenario are ignored, the
policy plays the model). A failure is injected so both settings must repair:
the controller rejects navigation goal 1 once, and goal 2 too (a second case)
when the mission needs two navigations or more. A scenario whose own robot
faults already make a navigation fail runs with those instead. Tokens are the
server's estimate (prompt and completion characters / 4), the same for both
settings; the comparison is the ratio.

    python bench/repair.py [--json out.json] [--scenario scenarios/demo.yaml ...]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _loopback import require_loopback  # bench/_loopback.py (the script's own folder)

REPO = Path(__file__).resolve().parents[1]
_FOR_GOOD = {
    "frozen_pose": "its pose freezes for good: nothing after that can be verified in either setting",
    "die": "its robot dies for good: nothing can be repaired in either setting",
}
"""Robot faults after which no setting can finish the mission: such a scenario is skipped."""
_MOTION_FAULTS = ("reject", "early_success", "stall")
"""A scenario with one of these robot faults already has a failing navigation: it runs with its own."""
_SEMANTIC = ("its goal has a semantic obligation (e.g. identify a drink bottle) and no semantic judge is configured "
             "here: no setting can finish it, so it measures the waiting, not the repair")


_AT_M = 0.5
"""The policy counts the robot as at a place within this distance (of the pose in its context)."""


def _route_next(desc: str, places: list[str], pose: dict[str, Any] | None,
                where: dict[str, dict[str, float]]) -> str:
    """A closed route's next stop: the first place the description names, in its order, that the robot is
    not at (so: leave the start, each waypoint in turn, then the start again)."""
    named = sorted((desc.find(p), p) for p in places if p in desc)
    order = [p for _, p in named]
    if pose is not None and where:
        for place in order:
            q = where.get(place)
            if q is not None and ((pose["x"] - q["x"]) ** 2 + (pose["y"] - q["y"]) ** 2) ** 0.5 > _AT_M:
                return place
    return order[-1] if order else "dock"


def policy(context: dict[str, Any], places: list[str],
           where: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """The "model": the next tool call for the first open obligation, else propose_done.

    ``where``: the places' coordinates (the map the model is given); only a closed route needs them."""
    frontier = (context.get("progress") or {}).get("frontier") or []
    for o in frontier:
        kind, desc = o["kind"], o["description"]
        place = next((p for p in sorted(places, key=len, reverse=True) if p in desc), None)
        if kind == "at_place" and place:
            return {"name": "navigate_to", "arguments": {"place": place}}
        if kind == "route_closed":
            pose = (context.get("world") or {}).get("pose")
            return {"name": "navigate_to", "arguments": {"place": _route_next(desc, places, pose, where or {})}}
        if kind == "image_captured":
            return {"name": "capture_image", "arguments": {"label": place or "image"}}
        if kind == "message_delivered":
            return {"name": "send_message", "arguments": {"to": "operator", "text": "Report: done."}}
        if kind == "spoken":
            return {"name": "speak", "arguments": {"text": "Done."}}
    return {"name": "propose_done", "arguments": {"summary": "All obligations met."}}


class PolicyServer:
    def __init__(self, where: dict[str, dict[str, float]] | None = None) -> None:
        self.where = where or {}
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = body["messages"][-1]["content"]
                context = json.loads(user)
                call = policy(context, context.get("places") or [], server.where)
                args = json.dumps(call["arguments"])
                prompt = sum(len(m["content"]) for m in body["messages"]) + len(json.dumps(body.get("tools", [])))
                usage = {"prompt_tokens": prompt // 4, "completion_tokens": (len(args) + 40) // 4}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                server.calls += 1
                server.prompt_tokens += usage["prompt_tokens"]
                server.completion_tokens += usage["completion_tokens"]
                reply = {"id": f"cmpl-{server.calls}", "object": "chat.completion", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                             "role": "assistant", "content": None, "tool_calls": [{
                                 "id": f"call_{server.calls}", "type": "function",
                                 "function": {"name": call["name"], "arguments": args}}]}}],
                         "usage": usage}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "PolicyServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _contract_kinds(scenario: Any) -> list[tuple[str, dict[str, Any]]]:
    """(kind, params) of each obligation the mission's contract will hold (compiled as at admission)."""
    from robot_harness.compose import default_contract_compiler
    from robot_harness.core.config import load_harness_config
    from robot_harness.core.contracts import RuleCoverageReviewer, compile_contract
    from robot_harness.core.records import Pose2D

    config = load_harness_config(overrides=scenario.harness_config())
    places = {k: Pose2D(**v) for k, v in config.places.items()}
    contract = compile_contract(scenario.goal, compiler=default_contract_compiler(config),
                                reviewer=RuleCoverageReviewer(), mission_id="bench", contract_id="bench", places=places)
    return [(getattr(o.kind, "value", o.kind), dict(o.params)) for o in contract.obligations]


def navigations(obligations: list[tuple[str, dict[str, Any]]]) -> int:
    """Navigation goals a contract asks for (at places, and a route's waypoints plus its return)."""
    return sum(1 if kind == "at_place" else len(params.get("waypoints") or []) + 1
               for kind, params in obligations if kind in ("at_place", "route_closed"))


def cases(paths: list[Path]) -> tuple[list[tuple[Path, int | None]], dict[str, str]]:
    """(scenario file, goal the controller rejects once, or None: the scenario's own fault), and the
    scenarios that cannot show a repair, with the reason."""
    from robot_harness.core.scenario import load_scenario

    out: list[tuple[Path, int | None]] = []
    skipped: dict[str, str] = {}
    for path in paths:
        scenario = load_scenario(path)
        kinds = {f.kind for f in scenario.robot.faults}
        obligations = _contract_kinds(scenario)
        for_good = sorted(kinds & set(_FOR_GOOD))
        if for_good:
            skipped[path.stem] = _FOR_GOOD[for_good[0]]
        elif any(kind == "semantic" for kind, _ in obligations):
            skipped[path.stem] = _SEMANTIC
        elif kinds & set(_MOTION_FAULTS):
            out.append((path, None))
        elif navigations(obligations) == 0:
            skipped[path.stem] = "its goal asks for no navigation: there is nothing to reject and repair"
        else:
            out += [(path, goal) for goal in range(1, min(navigations(obligations), 2) + 1)]
    return out, skipped


def run_one(path: Path, reject_goal: int | None, repair: str, workdir: Path) -> dict[str, Any]:
    import os

    from robot_harness.core.scenario import FaultSpec, load_scenario
    from robot_harness.runner import run_scenario

    scenario = load_scenario(path)
    faults = list(scenario.robot.faults)
    if reject_goal is not None:
        faults.append(FaultSpec(kind="reject", on_goal=reject_goal))
    robot = scenario.robot.model_copy(update={"faults": faults})
    harness = {**scenario.harness, "recovery": {"repair": repair}}
    scenario = scenario.model_copy(update={"robot": robot, "harness": harness})
    label = f"goal {reject_goal}" if reject_goal is not None else "own"
    where = {k: v.model_dump() for k, v in scenario.world.places.items()}
    with PolicyServer(where) as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        report = run_scenario(scenario, journal_path=workdir / f"{path.stem}-{label}-{repair}" / "journal.sqlite3",
                              extra_overrides={"planner": {"backend": "llm", "model": "policy", "timeout_s": 10.0}})
    usage = report.get("model_usage") or {}
    return {"scenario": path.stem, "rejected_goal": reject_goal, "failure": label, "repair": repair,
            "status": report["status"], "llm_calls": usage.get("llm_calls", 0),
            "total_tokens": usage.get("total_tokens", 0), "server_calls": server.calls,
            "navigations": sum(1 for c in report["tool_calls"] if c["name"] == "navigate_to")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--scenario", type=Path, action="append",
                        help="a scenario file (repeatable; default: every scenarios/*.yaml)")
    args = parser.parse_args(argv)
    require_loopback()
    sys.path.insert(0, str(REPO))
    todo, skipped = cases(args.scenario or sorted((REPO / "scenarios").glob("*.yaml")))
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    if not todo:
        parser.error("no scenario to run")
    rows = []
    with tempfile.TemporaryDirectory(prefix="robot_harness-repair-") as tmp:
        for path, goal in todo:
            for repair in ("suffix", "whole"):
                rows.append(run_one(path, goal, repair, Path(tmp)))
                r = rows[-1]
                print(f"  {r['scenario']} ({r['failure']}, {repair}): {r['status']}, {r['llm_calls']} calls", flush=True)
    w = max(len("scenario"), *(len(r["scenario"]) for r in rows))
    print(f"{'scenario':{w}s} {'failure':>8s} {'repair':7s} {'status':12s} {'LLM calls':>9s} {'tokens':>8s} "
          f"{'navigations':>11s}")
    for r in rows:
        print(f"{r['scenario']:{w}s} {r['failure']:>8s} {r['repair']:7s} {r['status']:12s} "
              f"{r['llm_calls']:9d} {r['total_tokens']:8d} {r['navigations']:11d}")
    totals = {m: (sum(r["llm_calls"] for r in rows if r["repair"] == m), sum(r["total_tokens"] for r in rows if r["repair"] == m))
              for m in ("suffix", "whole")}
    print(f"all cases: suffix {totals['suffix'][0]} calls / {totals['suffix'][1]} tokens; whole {totals['whole'][0]} calls / "
          f"{totals['whole'][1]} tokens; ratio whole/suffix {totals['whole'][0] / max(1, totals['suffix'][0]):.2f} calls, "
          f"{totals['whole'][1] / max(1, totals['suffix'][1]):.2f} tokens")
    by = {m: [r for r in rows if r["repair"] == m] for m in ("suffix", "whole")}
    med = {m: (statistics.median(r["llm_calls"] for r in v), statistics.median(r["total_tokens"] for r in v))
           for m, v in by.items()}
    print(f"median per mission: suffix {med['suffix'][0]:.0f} calls / {med['suffix'][1]:.0f} tokens; "
          f"whole {med['whole'][0]:.0f} calls / {med['whole'][1]:.0f} tokens")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "median": med, "totals": totals, "skipped": skipped}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
