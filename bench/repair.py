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

Faults make the second navigation fail once (the controller rejects it), so
both settings must repair. Tokens are the server's estimate (prompt and
completion characters / 4), the same for both settings; the comparison is
the ratio.

    python bench/repair.py [--json out.json]
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

REPO = Path(__file__).resolve().parents[1]
CASES = (("demo", 1), ("demo", 2), ("incident_successful_trace", 1), ("alternate_plan_coordinates", 1))
"""(scenario, which navigation goal the controller rejects once). The demo's goal 2 is the return to
the dock, after the image was captured: there is a verified prefix to keep. A rejection of the first
goal leaves nothing to keep, so both settings should cost the same."""


def policy(context: dict[str, Any], places: list[str]) -> dict[str, Any]:
    """The "model": the next tool call for the first open obligation, else propose_done."""
    frontier = (context.get("progress") or {}).get("frontier") or []
    for o in frontier:
        kind, desc = o["kind"], o["description"]
        place = next((p for p in sorted(places, key=len, reverse=True) if p in desc), None)
        if kind == "at_place" and place:
            return {"name": "navigate_to", "arguments": {"place": place}}
        if kind == "route_closed":
            # visit what the description names, then the start (the last place named)
            named = [p for p in places if p in desc]
            return {"name": "navigate_to", "arguments": {"place": named[0] if named else "dock"}}
        if kind == "image_captured":
            return {"name": "capture_image", "arguments": {"label": place or "image"}}
        if kind == "message_delivered":
            return {"name": "send_message", "arguments": {"to": "operator", "text": "Report: done."}}
        if kind == "spoken":
            return {"name": "speak", "arguments": {"text": "Done."}}
    return {"name": "propose_done", "arguments": {"summary": "All obligations met."}}


class PolicyServer:
    def __init__(self) -> None:
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
                call = policy(context, context.get("places") or [])
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


def run_one(name: str, reject_goal: int, repair: str, workdir: Path) -> dict[str, Any]:
    import os

    from robot_harness.core.scenario import FaultSpec, load_scenario
    from robot_harness.runner import run_scenario

    scenario = load_scenario(REPO / "scenarios" / f"{name}.yaml")
    fault = FaultSpec(kind="reject", on_goal=reject_goal)
    robot = scenario.robot.model_copy(update={"faults": [*scenario.robot.faults, fault]})
    harness = {**scenario.harness, "recovery": {"repair": repair}}
    scenario = scenario.model_copy(update={"robot": robot, "harness": harness})
    with PolicyServer() as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        report = run_scenario(scenario, journal_path=workdir / f"{name}-{reject_goal}-{repair}" / "journal.sqlite3", extra_overrides={
            "planner": {"backend": "llm", "model": "policy", "timeout_s": 10.0}})
    usage = report.get("model_usage") or {}
    return {"scenario": name, "rejected_goal": reject_goal, "repair": repair, "status": report["status"], "llm_calls": usage.get("llm_calls", 0),
            "total_tokens": usage.get("total_tokens", 0), "server_calls": server.calls,
            "navigations": sum(1 for c in report["tool_calls"] if c["name"] == "navigate_to")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="robot_harness-repair-") as tmp:
        for name, goal in CASES:
            for repair in ("suffix", "whole"):
                rows.append(run_one(name, goal, repair, Path(tmp)))
    print(f"{'scenario':28s} {'rejected':>8s} {'repair':7s} {'status':10s} {'LLM calls':>9s} {'tokens':>8s} {'navigations':>11s}")
    for r in rows:
        print(f"{r['scenario']:28s} {'goal ' + str(r['rejected_goal']):>8s} {r['repair']:7s} {r['status']:10s} "
              f"{r['llm_calls']:9d} {r['total_tokens']:8d} {r['navigations']:11d}")
    totals = {m: (sum(r["llm_calls"] for r in rows if r["repair"] == m), sum(r["total_tokens"] for r in rows if r["repair"] == m))
              for m in ("suffix", "whole")}
    print(f"all cases: suffix {totals['suffix'][0]} calls / {totals['suffix'][1]} tokens; whole {totals['whole'][0]} calls / "
          f"{totals['whole'][1]} tokens; ratio whole/suffix {totals['whole'][0] / totals['suffix'][0]:.2f} calls, "
          f"{totals['whole'][1] / totals['suffix'][1]:.2f} tokens")
    by = {m: [r for r in rows if r["repair"] == m] for m in ("suffix", "whole")}
    med = {m: (statistics.median(r["llm_calls"] for r in v), statistics.median(r["total_tokens"] for r in v))
           for m, v in by.items()}
    print(f"median per mission: suffix {med['suffix'][0]:.0f} calls / {med['suffix'][1]:.0f} tokens; "
          f"whole {med['whole'][0]:.0f} calls / {med['whole'][1]:.0f} tokens; "
          f"ratio whole/suffix calls {med['whole'][0] / med['suffix'][0]:.2f}, tokens {med['whole'][1] / med['suffix'][1]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "median": med}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
