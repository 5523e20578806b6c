"""Ground truth: did the task really get done? Judged on the simulator's true state only.

The adjudicator reads the world's true trajectory, its goal history and what
the robot's devices really did (captures, speech, messages), never the
harness's journal or verdicts, so it can disagree with the harness.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..core.records import Pose2D
from ..core.scenario import Scenario, TruthSpec
from ..sim.world import GoalEvent, GoalEventType

__all__ = ["Truth", "adjudicate", "duplicate_dispatches", "foreign_preemptions"]


@dataclass
class Truth:
    done: bool
    unmet: list[str] = field(default_factory=list)
    missed_visits: int = 0
    """Places of ``visits`` the robot never truly passed in order (each looked for after the last one it did
    pass): a route's skipped waypoint counts one, and the places after it still count when reached."""


def _near(p: Pose2D, q: Any, tol: float) -> bool:
    return math.hypot(p.x - q.x, p.y - q.y) <= tol


def adjudicate(scenario: Scenario, ports: Any) -> Truth:
    """``ports`` is the SimPorts the mission ran against (its true trajectory and device logs)."""
    spec: TruthSpec = scenario.truth or TruthSpec()
    places = scenario.world.places
    tol = spec.tolerance_m
    unmet: list[str] = []
    i = 0
    for _, pose in ports.trajectory:
        if i < len(spec.visits) and _near(pose, places[spec.visits[i]], tol):
            i += 1
    unmet += [f"never truly at {p}" for p in spec.visits[i:i + 1]]
    missed = _missed_in_order(ports.trajectory, [places[p] for p in spec.visits], tol)
    if spec.final_at is not None and not _near(ports.trajectory[-1][1], places[spec.final_at], tol):
        unmet.append(f"not truly at {spec.final_at} at the end")
    for place in spec.captures_at:
        if not any(_near(c.true_pose, places[place], tol) for c in ports.captures):
            unmet.append(f"no capture taken at {place}")
    for to in spec.messages_to:
        if not any(m["to"] == to for m in ports.messages):
            unmet.append(f"no message delivered to {to}")
    if spec.spoken and not ports.spoken:
        unmet.append("nothing was said")
    if spec.impossible:
        unmet.append(f"cannot be done by this robot: {spec.impossible}")
    return Truth(done=not unmet, unmet=unmet, missed_visits=missed)


def _missed_in_order(trajectory: list[tuple[float, Pose2D]], stops: list[Any], tol: float) -> int:
    """How many of ``stops`` the true trajectory does not pass in order (a missed one is skipped over)."""
    missed, at = 0, 0
    for stop in stops:
        k = next((j for j in range(at, len(trajectory)) if _near(trajectory[j][1], stop, tol)), None)
        if k is None:
            missed += 1
        else:
            at = k
    return missed


def duplicate_dispatches(events: tuple[GoalEvent, ...]) -> int:
    """Goals that repeated a motion: accepted while a goal to the same target was still running, or after
    the robot had really reached it. A retry after an abort, a reject, a cancel or a false success is not."""
    running: dict[tuple[float, float], int] = {}
    reached: set[tuple[float, float]] = set()
    preempted: tuple[float, float] | None = None
    dup = 0
    for ev in events:
        key = (round(ev.target.x, 3), round(ev.target.y, 3))
        if ev.event is GoalEventType.ACCEPTED:
            if running.get(key, 0) > 0 or key in reached or key == preempted:
                dup += 1
            running[key] = running.get(key, 0) + 1
            preempted = None
        elif ev.event in (GoalEventType.SUCCEEDED, GoalEventType.ABORTED, GoalEventType.CANCELED):
            running[key] = max(0, running.get(key, 0) - 1)
            if ev.event is GoalEventType.ABORTED and ev.reason.startswith("preempted"):
                preempted = key  # the world ends the running goal just before it accepts its successor
            if ev.event is GoalEventType.SUCCEEDED and _near(ev.true_pose, ev.target, 0.25):
                reached.add(key)  # a success the robot really achieved (not a backend's early claim)
    return dup


def foreign_preemptions(events: tuple[GoalEvent, ...], foreign: set[int]) -> int:
    """Goals of another client (``foreign``: world goal indices) that a new goal preempted: a motion sent
    while the robot was busy on someone else's command, decided on a world that had changed."""
    return sum(1 for ev in events if ev.event is GoalEventType.ABORTED and ev.goal_index in foreign
               and ev.reason.startswith("preempted"))
