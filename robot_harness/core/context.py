"""The planner's context (C1): a size-bounded view built from versioned state.

The model never sees raw streams: the world arrives as a bounded snapshot
projection; runtime events and the last turn's tool results are compact and
trimmed (oldest first) to fit the byte cap.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .records import RuntimeEvent, ToolResult, WorldSnapshot
from .snapshot import project_for_model

__all__ = ["compile_planner_context", "context_size"]


def context_size(ctx: dict[str, Any]) -> int:
    return len(json.dumps(ctx, separators=(",", ":"), sort_keys=True))


def compile_planner_context(
    *,
    goal: str,
    turn_index: int,
    snapshot: WorldSnapshot,
    places: Sequence[str],
    runtime_events: Sequence[RuntimeEvent],
    last_results: Sequence[ToolResult],
    byte_cap: int,
    snapshot_byte_cap: int,
    progress: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """C1. ``progress`` is the planner's view of the task state (core/views.py):
    the contract frontier, committed obligations and recent failures."""
    ctx: dict[str, Any] = {
        "goal": goal,
        "turn_index": turn_index,
        "snapshot_id": snapshot.snapshot_id,
        "world": project_for_model(snapshot, byte_cap=snapshot_byte_cap),
        **({"progress": progress} if progress else {}),
        "places": list(places),
        "runtime_events": [e.model_dump(exclude={"kind"}) for e in runtime_events],
        "last_tool_results": [r.to_model_message() for r in last_results],
        "rules": (
            "Tool results report only what a call established. Physical outcomes arrive later as "
            "runtime_events. You propose 'done'; the harness verifies it."
        ),
    }
    # Trim oldest-first until it fits; the goal, the world and the frontier stay.
    failures = (ctx.get("progress") or {}).get("recent_failures")
    while context_size(ctx) > byte_cap and failures:
        failures.pop(0)
        ctx["truncated"] = True
    while context_size(ctx) > byte_cap and (ctx["last_tool_results"] or ctx["runtime_events"] or ctx["places"]):
        for key in ("last_tool_results", "runtime_events", "places"):
            if ctx[key]:
                ctx[key] = ctx[key][1:]
                ctx["truncated"] = True
                break
    if context_size(ctx) > byte_cap:
        ctx.pop("rules")
        ctx["truncated"] = True
    return ctx
