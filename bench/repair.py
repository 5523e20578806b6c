#!/usr/bin/env python3
"""LLM calls and tokens per mission: suffix repair vs whole-plan replanning.

Runs scenarios on the real graph (sim_robot, aggregator, planner node with the
``llm`` backend and the real ``openai`` client, verifier, recovery,
supervisor) against a local OpenAI-compatible server whose "model" is a fixed
policy: it reads the context it is sent and calls the tool for the first
obligation on ``progress.frontier`` (navigate_to / capture_image /
send_message / speak), or ``propose_done`` when the frontier is empty; or, with
plans (issue 18), proposes the whole plan for the frontier at once
(``propose_plan``, ending with ``propose_done``), which the zero-token plan gate
checks before anything moves and the harness then runs one step per turn
without asking the model. The same robot faults, the same scenarios, four
settings:

* ``suffix``: stepwise; after a failure the planner keeps the verified prefix
  (obligations already evidenced by receipts are off its frontier) and
  re-plans only what is left;
* ``whole`` (the baseline): stepwise; after a failure the planner's frontier is
  reset to the whole contract and it re-plans the mission from the start;
* ``plan``: whole plans through the plan gate; after a failed step the plan
  stops, the verified prefix stands and the planner proposes the suffix only;
* ``plan-whole``: whole plans, and after a failure the whole plan again.

Every scenario in ``scenarios/*.yaml`` that can show a repair runs (``SKIP``
says which cannot, and why; the scripted turns of a scenario are ignored, the
policy plays the model). A failure is injected so both settings must repair:
the controller rejects navigation goal 1 once, and goal 2 too (a second case)
when the mission needs two navigations or more. A scenario whose own robot
faults already make a navigation fail runs with those instead. Tokens are the
server's estimate (prompt and completion characters / 4), the same for every
setting; the comparison is the ratio against ``whole``, measured in the same run.

    python bench/repair.py [--json out.json] [--settings plan whole] [--scenario scenarios/demo.yaml ...]
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
from _policy import plan_policy, policy  # bench/_policy.py: the fixed "model"

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


class PolicyServer:
    def __init__(self, where: dict[str, dict[str, float]] | None = None, *, plans: bool = False) -> None:
        self.where = where or {}
        self.decide = plan_policy if plans else policy
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
                call = server.decide(context, context.get("places") or [], server.where)
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


SETTINGS: dict[str, tuple[bool, str]] = {"suffix": (False, "suffix"), "whole": (False, "whole"),
                                         "plan": (True, "suffix"), "plan-whole": (True, "whole")}
"""setting -> (the policy proposes whole plans, the harness's repair). ``whole`` is the baseline: the
planner steps, and after a failure re-plans the whole mission."""


def run_one(path: Path, reject_goal: int | None, setting: str, workdir: Path) -> dict[str, Any]:
    import os

    from robot_harness.core.scenario import FaultSpec, load_scenario
    from robot_harness.runner import run_scenario

    scenario = load_scenario(path)
    faults = list(scenario.robot.faults)
    if reject_goal is not None:
        faults.append(FaultSpec(kind="reject", on_goal=reject_goal))
    robot = scenario.robot.model_copy(update={"faults": faults})
    plans, repair = SETTINGS[setting]
    harness = {**scenario.harness, "recovery": {"repair": repair}}
    scenario = scenario.model_copy(update={"robot": robot, "harness": harness})
    label = f"goal {reject_goal}" if reject_goal is not None else "own"
    where = {k: v.model_dump() for k, v in scenario.world.places.items()}
    with PolicyServer(where, plans=plans) as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        report = run_scenario(scenario, journal_path=workdir / f"{path.stem}-{label}-{setting}" / "journal.sqlite3",
                              extra_overrides={"planner": {"backend": "llm", "model": "policy", "timeout_s": 10.0}})
    usage = report.get("model_usage") or {}
    return {"scenario": path.stem, "rejected_goal": reject_goal, "failure": label, "repair": setting,
            "status": report["status"], "llm_calls": usage.get("llm_calls", 0),
            "total_tokens": usage.get("total_tokens", 0), "server_calls": server.calls,
            "navigations": sum(1 for c in report["tool_calls"] if c["name"] == "navigate_to")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS),
                        help="which settings to run (default: all; the baseline is whole)")
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
            for repair in args.settings:
                rows.append(run_one(path, goal, repair, Path(tmp)))
                r = rows[-1]
                print(f"  {r['scenario']} ({r['failure']}, {repair}): {r['status']}, {r['llm_calls']} calls", flush=True)
    w = max(len("scenario"), *(len(r["scenario"]) for r in rows))
    print(f"{'scenario':{w}s} {'failure':>8s} {'setting':10s} {'status':12s} {'LLM calls':>9s} {'tokens':>8s} "
          f"{'navigations':>11s}")
    for r in rows:
        print(f"{r['scenario']:{w}s} {r['failure']:>8s} {r['repair']:10s} {r['status']:12s} "
              f"{r['llm_calls']:9d} {r['total_tokens']:8d} {r['navigations']:11d}")
    settings = [m for m in SETTINGS if any(r["repair"] == m for r in rows)]
    totals = {m: (sum(r["llm_calls"] for r in rows if r["repair"] == m),
                  sum(r["total_tokens"] for r in rows if r["repair"] == m),
                  sum(1 for r in rows if r["repair"] == m and r["status"] == "SUCCEEDED")) for m in settings}
    n = len(todo)
    for m in settings:
        calls, tokens, won = totals[m]
        print(f"{m:10s}: {calls} calls / {tokens} tokens over {n} cases, {won} SUCCEEDED")
    base = totals.get("whole")
    if base:
        for m in settings:
            if m != "whole":
                print(f"ratio whole/{m}: {base[0] / max(1, totals[m][0]):.2f}x calls, "
                      f"{base[1] / max(1, totals[m][1]):.2f}x tokens")
    if "plan" in totals and "plan-whole" in totals:
        pw, p = totals["plan-whole"], totals["plan"]
        print(f"ratio plan-whole/plan: {pw[0] / max(1, p[0]):.2f}x calls, {pw[1] / max(1, p[1]):.2f}x tokens")
    med = {m: (statistics.median(r["llm_calls"] for r in rows if r["repair"] == m),
               statistics.median(r["total_tokens"] for r in rows if r["repair"] == m)) for m in settings}
    print("median per mission: " + "; ".join(f"{m} {c:.0f} calls / {t:.0f} tokens" for m, (c, t) in med.items()))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "median": med, "totals": totals, "skipped": skipped}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
