"""The benchmarks' fixed "model" (bench/repair.py, bench/plan_gate.py, bench/memory.py): a policy that reads
the planner context the harness sends and answers the way a competent, literal model would, so the harness's
settings can be compared on the same decisions. Stdlib only."""
from __future__ import annotations

from typing import Any

__all__ = ["policy", "plan_policy", "plan_steps"]

_AT_M = 0.5
"""The policy counts the robot as at a place within this distance (of the pose in its context)."""


def _route_next(desc: str, places: list[str], pose: dict[str, Any] | None,
                where: dict[str, dict[str, float]]) -> str:
    """A closed route's next stop. Its description names the start first ("leave dock via a, b and come
    back to dock"), so the round is each waypoint in turn, then the start: from the stop the robot is at,
    the next one; from anywhere else, the first waypoint."""
    named = [p for _, p in sorted((desc.find(p), p) for p in places if p in desc)]
    order = named[1:] + named[:1] if len(named) > 1 else named
    if not order:
        return "dock"
    if pose is not None and where:
        for i, place in enumerate(order):
            q = where.get(place)
            if q is not None and ((pose["x"] - q["x"]) ** 2 + (pose["y"] - q["y"]) ** 2) ** 0.5 <= _AT_M:
                return order[(i + 1) % len(order)]
    return order[0]


def _quoted(desc: str) -> str | None:
    """The words a description quotes ('hello'), which a spoken or message obligation binds."""
    for q in ("'", '"'):
        a = desc.find(q)
        b = desc.find(q, a + 1) if a >= 0 else -1
        if a >= 0 and b > a + 1:
            return desc[a + 1:b]
    return None


def _recipient(desc: str) -> str:
    """Who a message obligation names ("A message was delivered to ops.", "operator was told, ...")."""
    import re

    found = re.search(r"delivered to ([\w-]+)", desc) or re.match(r"([\w-]+) was told", desc)
    return found.group(1) if found else "operator"


def _step(o: dict[str, Any], places: list[str], pose: dict[str, Any] | None,
          where: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """The calls for one open obligation (a closed route's: only its next stop; see _route_next)."""
    kind, desc = o["kind"], o["description"]
    place = next((p for p in sorted(places, key=len, reverse=True) if p in desc), None)
    if kind == "at_place" and place:
        return [{"name": "navigate_to", "arguments": {"place": place}}]
    if kind == "route_closed":
        return [{"name": "navigate_to", "arguments": {"place": _route_next(desc, places, pose, where)}}]
    if kind == "image_captured":
        return [{"name": "capture_image", "arguments": {"label": place or "image"}}]
    if kind == "message_delivered":
        return [{"name": "send_message", "arguments": {"to": _recipient(desc), "text": _quoted(desc) or "Report: done."}}]
    if kind == "spoken":
        return [{"name": "speak", "arguments": {"text": _quoted(desc) or "Done."}}]
    return []


def policy(context: dict[str, Any], places: list[str],
           where: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """The "model": the next tool call for the first open obligation, else propose_done.

    ``where``: the places' coordinates (the map the model is given); only a closed route needs them."""
    frontier = (context.get("progress") or {}).get("frontier") or []
    pose = (context.get("world") or {}).get("pose")
    for o in frontier:
        calls = _step(o, places, pose, where or {})
        if calls:
            return calls[0]
    return {"name": "propose_done", "arguments": {"summary": "All obligations met."}}


def _plan_refused(context: dict[str, Any]) -> bool:
    return any((r.get("content") or {}).get("code") == "plan_refused" for r in context.get("last_tool_results") or [])


def plan_steps(context: dict[str, Any], places: list[str],
               where: dict[str, dict[str, float]] | None = None) -> list[dict[str, Any]]:
    """The plan's steps for what is still open (``serves``: the obligation id), without the final done."""
    frontier = (context.get("progress") or {}).get("frontier") or []
    steps: list[dict[str, Any]] = []
    for o in frontier:
        if o["kind"] == "route_closed":
            # "leave <start> via <a>, <b> and come back to <start>": each waypoint, then the start again
            named = [p for _, p in sorted((o["description"].find(p), p) for p in places if p in o["description"])]
            order = named[1:] + named[:1] if len(named) > 1 else named
            steps += [{"skill": "navigate_to", "arguments": {"place": p}, "serves": o["id"]} for p in order]
            continue
        steps += [{"skill": c["name"], "arguments": c["arguments"], "serves": o["id"]}
                  for c in _step(o, places, None, where or {})]
    return steps


def plan_policy(context: dict[str, Any], places: list[str],
                where: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """The "model" with plans (issue 18): the whole plan for what is still open, in the frontier's order,
    ending with propose_done; a closed route is planned stop by stop (its places in the order its
    description names them). After the gate refused its plan it steps as ``policy`` does."""
    if _plan_refused(context):
        return policy(context, places, where)
    steps = plan_steps(context, places, where)
    if not steps:
        return {"name": "propose_done", "arguments": {"summary": "All obligations met."}}
    steps.append({"skill": "propose_done", "arguments": {"summary": "All obligations met."}})
    return {"name": "propose_plan", "arguments": {"steps": steps}}


