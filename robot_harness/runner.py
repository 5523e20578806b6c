"""Run one scenario end to end in this process: sim + node graph + one mission.

The report is built from the journal (the source of truth), not from what the
supervisor said.
"""
from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from .core.clock import IdGenerator, SystemClock
from .core.journal import SqliteJournal
from .core.records import EventType, JournalEvent
from .core.scenario import Scenario

__all__ = ["scenario_overrides", "run_scenario", "build_report"]


def scenario_overrides(scenario: Scenario, *, journal_path: Path, artifacts_dir: Path) -> dict[str, dict[str, Any]]:
    """Node parameter overrides that make the graph run this scenario."""
    start = scenario.world.start_pose()
    robot = scenario.robot
    harness = scenario.harness_config()
    return {
        "sim_robot": {
            "start.x": start.x, "start.y": start.y, "start.yaw": start.yaw,
            "speed": robot.speed, "yaw_rate": robot.yaw_rate,
            "pose_rate_hz": robot.pose_rate_hz, "odom_rate_hz": robot.odom_rate_hz,
            "camera_rate_hz": 2.0 if robot.camera else 0.0,
            "battery_start": robot.battery_start,
            "faults_json": json.dumps([f.model_dump(exclude_none=True) for f in robot.faults]),
        },
        "planner": {"turns_json": json.dumps([t.model_dump() for t in scenario.planner.turns])},
        "supervisor": {
            "journal_path": str(journal_path),
            "artifacts_dir": str(artifacts_dir),
            "harness_config_json": json.dumps(harness),
        },
    }


def build_report(events: list[JournalEvent], *, mission_id: str, journal_path: str, mission_result: Any = None) -> dict[str, Any]:
    mine = [e for e in events if e.mission_id == mission_id]
    calls: dict[str, dict[str, Any]] = {}
    for e in mine:
        if e.type is EventType.TOOL_CALL_RECORDED:
            calls[e.tool_call_id] = {"id": e.tool_call_id, "name": e.payload["name"], "arguments": e.payload["arguments"],
                                     "result": None}
        elif e.type is EventType.TOOL_RESULT_RECORDED and e.tool_call_id in calls:
            r = dict(e.payload)
            r.pop("kind", None)
            r.pop("format_version", None)
            calls[e.tool_call_id]["result"] = r
            if e.robot_action_id:
                calls[e.tool_call_id]["action_id"] = e.robot_action_id
        elif e.type is EventType.ROBOT_ACTION_STATE_CHANGED and e.tool_call_id in calls:
            calls[e.tool_call_id]["action_state"] = e.payload["to"]
            calls[e.tool_call_id]["action_reason"] = e.payload.get("reason", "")
    last = {e.type: e.payload for e in mine}  # the latest payload of each event type
    receipts = [e.payload["receipt"] for e in mine if e.type is EventType.RECEIPT_RECORDED]
    finished = last.get(EventType.MISSION_FINISHED)
    fin = finished or {}
    status = finished["status"] if finished else (getattr(mission_result, "status", "") or "UNKNOWN")
    summary = finished["summary"] if finished else (getattr(mission_result, "summary", "") or "no MISSION_FINISHED record")
    refused = last.get(EventType.MISSION_REFUSED) if EventType.MISSION_STARTED not in last else None
    if refused:
        status, summary = "BLOCKED", f"refused ({refused.get('code', '?')}): {refused.get('reason', '')}"
    return {
        "mission_id": mission_id,
        "goal": next((e.payload.get("goal") for e in mine if e.type is EventType.MISSION_STARTED), None),
        "status": status,
        "summary": summary,
        "tool_calls": list(calls.values()),
        "event_counts": dict(Counter(e.type.value for e in mine)),
        "evidence_seqs": list(fin.get("evidence_seqs", [])),
        "evidence_ids": list(fin.get("evidence_ids", [])),
        "contract": last.get(EventType.CONTRACT_FROZEN, {}).get("contract"),
        "verdict": last.get(EventType.VERDICT_RECORDED, {}).get("verdict"),
        "commit": last.get(EventType.COMMIT_RECORDED, {}).get("commit"),
        "receipts": [{k: r.get(k) for k in ("receipt_id", "skill", "invocation_id", "status", "state_version")}
                     for r in receipts],
        "bag": fin.get("bag", {}),
        "model_usage": fin.get("model_usage", {}),
        "journal": journal_path,
        "refusal": refused.get("code", "refused") if refused else "",
    }


def run_scenario(
    scenario: Scenario,
    *,
    journal_path: Path | None = None,
    report_path: Path | None = None,
    artifacts_dir: Path | None = None,
    on_feedback: Callable[[Any], None] | None = None,
    extra_overrides: dict[str, dict[str, Any]] | None = None,
    graph_hook: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Start sim + graph, run the scenario's mission, stop everything, return the report."""
    from .bringup import BringUp
    from .client import MissionClient

    workdir = Path(tempfile.mkdtemp(prefix="robot_harness-run-"))
    journal_path = Path(journal_path) if journal_path else workdir / "journal.sqlite3"
    journal_path.parent.mkdir(parents=True, exist_ok=True)
    artifacts_dir = Path(artifacts_dir) if artifacts_dir else journal_path.parent / "artifacts"
    overrides = scenario_overrides(scenario, journal_path=journal_path, artifacts_dir=artifacts_dir)
    for node, values in (extra_overrides or {}).items():
        overrides.setdefault(node, {}).update(values)
    mission_id = IdGenerator(None).new("mission")
    # A world that is not observable does not stop the run: the supervisor refuses the mission with the
    # reason (journaled), and the report says it.
    with BringUp(overrides=overrides).start(require_ready=False) as graph:
        client = MissionClient(graph.context)
        graph.add_node(client.node, client.destroy)
        if graph_hook is not None:
            graph_hook(graph)
        accepted, result = client.send(scenario.goal, mission_id=mission_id, on_feedback=on_feedback,
                                       timeout_s=scenario.limits.mission_timeout_s + 60.0, server_timeout_s=30.0)
        # Ground truth from the simulator, which the harness never reads: for
        # tests and (later) independent adjudication.
        truth = {
            "goal_log": [e.model_dump(mode="json") for e in graph.sim.goal_log],
            "final_true_pose": graph.sim.world.true_pose.model_dump(),
        } if graph.sim is not None else None
    journal = SqliteJournal(journal_path, clock=SystemClock(), ids=IdGenerator(None))
    try:
        events = journal.events(mission_id=mission_id)
    finally:
        journal.close()
    # The journal decides: a lost goal response can make the client believe the
    # mission was refused while the supervisor ran it (seen in CI).
    if not accepted and not events:
        report = {"mission_id": mission_id, "status": "BLOCKED", "summary": "the supervisor refused the mission",
                  "tool_calls": [], "event_counts": {}, "evidence_seqs": [], "journal": str(journal_path),
                  "refusal": "rejected"}
    else:
        report = build_report(events, mission_id=mission_id, journal_path=str(journal_path), mission_result=result)
    report["sim_truth"] = truth
    if report_path:
        Path(report_path).parent.mkdir(parents=True, exist_ok=True)
        Path(report_path).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


