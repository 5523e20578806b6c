"""Helpers for integration tests: scenarios in code, run on the real graph."""
from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robot_harness.core.clock import IdGenerator, SystemClock
from robot_harness.core.journal import SqliteJournal
from robot_harness.core.records import EventType, JournalEvent
from robot_harness.core.scenario import Scenario
from robot_harness.runner import run_scenario
from robot_harness.sim.world import parse_faults

EXECUTABLES = ("sim_robot", "snapshot_aggregator", "planner", "verifier", "recovery", "supervisor", "lifecycle_manager")


def install_lib() -> Path:
    """``lib/robot_harness`` of the install space on ``AMENT_PREFIX_PATH``, holding every executable. A run
    without it is a set-up failure (an error when the test module loads), never a skip that passes."""
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        candidate = Path(prefix) / "lib" / "robot_harness"
        if all((candidate / exe).exists() for exe in EXECUTABLES):
            return candidate
    raise RuntimeError(f"robot_harness's executables ({', '.join(EXECUTABLES)}) are not installed on "
                       "AMENT_PREFIX_PATH: run `make setup` and `source scripts/env.sh`")


PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 2.0, "y": 1.0, "yaw": 0.5}}
FAST = {"navigation": {"timeout_s": 3.0, "timeout_per_m_s": 0.5}}

GO_SPOT = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]}
DONE = {"done": "I am at the spot."}


def scenario(turns: list[dict[str, Any]], *, faults: list[dict] | None = None, robot: dict | None = None,
             harness: dict | None = None, timeout_s: float = 30.0, goal: str = "Go to the spot.") -> Scenario:
    return Scenario.model_validate({
        "goal": goal,
        "world": {"places": PLACES, "start": "dock"},
        "robot": {"speed": 3.0, "pose_rate_hz": 20, **(robot or {}), "faults": faults or []},
        "planner": {"turns": turns},
        "limits": {"mission_timeout_s": timeout_s},
        "harness": {**FAST, **(harness or {})},
    })


def run(tmp_path: Path, sc: Scenario, **kw: Any) -> tuple[dict[str, Any], list[JournalEvent]]:
    journal_path = tmp_path / "journal.sqlite3"
    report = run_scenario(sc, journal_path=journal_path, **kw)
    j = SqliteJournal(journal_path, clock=SystemClock(), ids=IdGenerator(None))
    try:
        events = j.events(mission_id=report["mission_id"])
    finally:
        j.close()
    return report, events


def of_type(events: list[JournalEvent], t: str) -> list[JournalEvent]:
    return [e for e in events if e.type is EventType(t)]


def outcomes(events: list[JournalEvent]) -> list[str]:
    return [e.payload["state"] for e in of_type(events, "ROBOT_ACTION_OUTCOME")]


def assert_one_result_per_call(events: list[JournalEvent]) -> None:
    calls = [e.tool_call_id for e in of_type(events, "TOOL_CALL_RECORDED")]
    results = [e.tool_call_id for e in of_type(events, "TOOL_RESULT_RECORDED")]
    assert sorted(calls) == sorted(results) and len(set(results)) == len(results)


def faults_once(event_type: str, *faults: dict[str, Any]) -> tuple[Callable[[Any], None], list[float]]:
    """A ``graph_hook`` that gives the running sim ``faults`` from the sim instant the mission's first
    ``event_type`` commits (their ``at_s``), and the list that instant goes into.

    An event orders them, not a time: a fixed ``at_s`` can pass before admission when bring-up is slow.
    Journal listeners run in the appending thread, so the mission goes on only once the faults are in.
    The sim takes no fault at run time through a public call, so the world's config is swapped under
    the sim's lock; the faults hold from its next tick."""
    fired: list[float] = []

    def hook(graph: Any) -> None:
        sim = graph.sim

        def listener(batch: list) -> None:
            if fired or not any(e.type is EventType(event_type) for e in batch):
                return
            with sim._lock:
                world = sim.world
                added = parse_faults([{**f, "at_s": world.t} for f in faults])
                world.config = world.config.model_copy(update={"faults": (*world.config.faults, *added)})
                fired.append(world.t)

        graph.supervisor.journal.subscribe(listener)

    return hook, fired


def lock_journal_when(journal: Any, path: Path, event_type: str) -> sqlite3.Connection:
    """Take an exclusive lock on the journal file right after ``event_type`` commits (a real storage fault)."""
    locker = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)

    def listener(events: list[JournalEvent]) -> None:
        if any(e.type is EventType(event_type) for e in events) and not locker.in_transaction:
            locker.execute("BEGIN EXCLUSIVE")

    journal.subscribe(listener)
    return locker
