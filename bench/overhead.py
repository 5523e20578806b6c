#!/usr/bin/env python3
"""Harness overhead per managed navigation action and per model turn, in the deployed topology.

One process per node, as ``launch/harness.launch.py`` runs them:

* ``sim_robot`` (the robot plus its Nav2-compatible ``navigate_to_pose``) and
  ``snapshot_aggregator`` are the installed executables
  (``lib/robot_harness/<exe>`` under ``AMENT_PREFIX_PATH``), started as
  separate processes with their shipped parameter files
  (``config/<node>.yaml``) plus ``-p autostart:=true`` and a fast robot, and
  talking to this process over loopback DDS. On a robot the navigator is Nav2
  (C++); here it is the simulated one, the same for the harness and for the
  baseline.
* This process hosts only what the supervisor process would: the core
  ``MissionRunner`` with the production storage setting (``SqliteJournal``:
  WAL, ``synchronous=FULL``), ``RosSnapshotPort``, ``Nav2NavigationPort`` and
  ``RosFeasibilityPort`` on one rclpy node in its own context, spun on a background thread by
  ``rclpy.experimental.EventsExecutor`` (default, ``--executor events``) or a
  ``MultiThreadedExecutor`` with 4 threads (``--executor multithreaded``;
  ``--executor all`` runs one after the other, each against fresh robot
  processes). The runner runs on the main thread and blocks on rclpy futures
  that the executor thread completes. This is how the supervisor node runs it:
  the mission loop blocks one worker of the node's MultiThreadedExecutor,
  and its clients (capture, planner, navigation) live on a helper node spun
  by an EventsExecutor on its own thread (``BackgroundSpinner`` in
  ``robot_harness/nodes/executors.py``). ``multithreaded`` measures the
  alternative of spinning those clients on the MultiThreadedExecutor (the
  harness's, without rclpy's resubmit busy loop); ``rclpy-multithreaded`` on
  rclpy's own.

  Why events is the default: measured on the 2-core VM, in interleaved runs,
  it gave the lower (a) in every pair (calm machine: p95 8-9 ms against
  14-19 ms), its thread used less than half the CPU, and it never stalled,
  while with rclpy's own MultiThreadedExecutor 9 of 13 runs had accept round
  trips of 1-4 s (up to 16 of 200 goals) and 3 of 14 a cancel unanswered for
  3 s, and the bench process used 71 % of a core against 25-30 % (rclpy#1452).
* The planner is an in-process stub (in production another process); its
  time is excluded from every figure.

Only instrumentation is added: thin subclasses that read
``time.perf_counter()`` around the port calls and journal appends.

Measured:

(a) per action: tool call received (the planner returns) -> goal sent (the
    navigation port's ``send_goal`` is entered). This is the pre-dispatch
    snapshot, the gate (below), the durable journal writes and the rest.
(b) per model turn: wall time from one planner call to the next, minus the
    time inside the planner and inside the navigation port (``send_goal``,
    ``poll``, ``cancel``): snapshots, context compilation, journal writes.

Both are also split into the main thread's CPU time (the harness's own work),
the wall time spent in journal appends, in snapshot captures and in the gate,
and the rest (waiting for the GIL and for the scheduler).

The gate, per navigation, inside (a): the dispatcher's readiness and
feasibility probe (``RosFeasibilityPort.probe``, as the supervisor wires it:
``get_state`` of each node of ``navigation.preconditions.lifecycle_active``,
bt_navigator and amcl by default; a ``ComputePathToPose`` dry run on
``compute_path_to_pose``; ``GetCosts`` of the goal cell on
``global_costmap/get_cost_global_costmap``; all served by the ``sim_robot``
process), each question timed on its own, plus ``check_preconditions``. It is
printed with (a) of the same mission and as a ratio to it, and per variant
with how many questions the robot answered (a server not yet discovered
would make a check not applicable at no cost; the bench waits, bounded,
until each answers before measuring). ``check_preconditions`` is a function,
not a port: the bench swaps ``dispatch``'s reference to it for a timing
wrapper during the missions.

(b) is also read along the mission: the median of the 10 turns up to action
10 against the median of the last 10 turns (action 200 by default), and their
ratio. The engine's per-turn cost must not grow with mission length.

Every figure is printed with the VM steal (``/proc/stat``) measured over the
phase that produced it: each variant's mission, each baseline half, the
capture and conversion references, each commit-cost loop.

Three variants of the harness mission, one after the other on the same node:

* ``bare``: the core ``MissionRunner`` and its journal, nothing else, with
  the gate as deployed (the default ``navigation.preconditions``).
* ``ungated``: the same with the readiness and feasibility checks switched
  off (``lifecycle_active: []``, ``path_feasible`` and ``goal_cell_free``
  false, the covariance bounds None; the port is still wired and asks
  nothing): (a) with and without the gate, measured in one invocation.
* ``listeners``: ``bare`` plus the journal listener the supervisor process runs: one
  ``JournalFanout`` (``nodes/listener.py``) on a thread of its own, fed by
  the appending mission thread, that converts each committed event once
  (``journal_event_to_msg``, serialized once) and hands it to the
  ``~/events`` publisher (``EventPublisher``, reliable, as the supervisor
  attaches it) and to the MCAP evidence recorder (``HarnessEvidenceRecorder``
  over a ``MissionRecorder`` on its own ``BackgroundSpinner`` node, as the
  supervisor builds it with ``record_evidence``: every event and the derived
  Foxglove topics into the bag, snapshots and verdicts recorded by the
  engine, the raw pose/odometry/navigation topics on the spinner's thread).
  ``--variants`` picks them.

Baseline, same run, same process, same executor: a plain ``ActionClient`` on
the same sim process, ``send_goal`` -> accepted round trip, as many goals as
actions; each goal is cancelled right after the accept and has ended before
the next is sent, so the sim is idle. It runs in two halves, before and after
the harness, so drift in load lands on both sides. For reference, a plain
call of the aggregator's ``~/capture`` (one snapshot without the harness).
Results are noisy on a shared 2-core machine; compare the ratios, not the
absolute numbers, and read the CPU line: it says how much of the machine
other processes and, on a VM, the host's steal took during the mission.

Run from the repository root after ``source scripts/env.sh`` (and a built
workspace: ``make setup``)::

    python bench/overhead.py --actions 200 --json /tmp/overhead.json
    python bench/overhead.py --executor all       # every executor, one after the other
    python bench/overhead.py --variants bare      # without the supervisor's journal listeners
    python bench/overhead.py --variants bare,ungated   # (a) with and without the gate only
"""
from __future__ import annotations

import sys
from pathlib import Path

from _loopback import require_loopback  # bench/_loopback.py (the script's own folder)

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import argparse
import bisect
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

TARGET_A_P95_MS = 15.0
TARGET_TURN_RATIO = 1.5
"""Issue 14: (b) p95 with the supervisor's listeners at most this many times the bare runner's."""
TARGET_TURN_JOURNAL_RATIO = 2.0
"""Issue 14: the journal appends inside (b), p95, with listeners at most this many times bare."""
PLACES = {"p0": {"x": 0.0, "y": 0.0, "yaw": math.pi}, "p1": {"x": 0.3, "y": 0.0, "yaw": 0.0}}
"""Two places 0.3 m apart, each facing away from the other: a hop is turn, drive, stop.

With both facing the same way, every other hop would end in a half-turn on
the spot; at 20 Hz pose the post-terminal snapshot can then still hold a
pose from mid-turn (up to ``max_pose_age_s`` old), and the outcome check
calls a finished hop FAILED."""
SIM_SPEED = 5.0
SIM_YAW_RATE = 100.0
"""The initial half-turn of each hop; at the default 1.5 rad/s it alone takes 2 s."""
WARMUP_ACTIONS = 5
RESULT_TIMEOUT_S = 10.0
ACCEPT_TIMEOUT_S = 5.0
CANCEL_TIMEOUT_S = 3.0
"""As the harness's ``cancel_timeout_s``."""
SLOW_ACCEPT_S = 1.0
"""An accept round trip this long is a stall, not noise: counted separately."""
START_TIMEOUT_S = 30.0
"""Bound on the robot processes coming up (pose, battery and navigation AVAILABLE in a capture)."""
STOP_TIMEOUT_S = 5.0
"""SIGINT first, SIGKILL after this long."""
EXECUTOR_THREADS = 4
EXECUTORS = ("single_threaded", "events", "multithreaded", "rclpy-multithreaded")
MULTITHREADED = ("multithreaded", "rclpy-multithreaded")
DEFAULT_EXECUTOR = "single_threaded"
VARIANTS = ("bare", "ungated", "listeners")
"""Default run order. ``bare``: the core runner alone; ``ungated``: the same with the readiness and feasibility
checks switched off (``UNGATED``); ``listeners``: plus the supervisor's ``~/events`` publisher and evidence
recorder. ``bare`` and ``listeners`` run the gate as deployed (the default ``navigation.preconditions``)."""
UNGATED: dict[str, Any] = {"lifecycle_active": [], "path_feasible": False, "goal_cell_free": False,
                           "max_pose_std_xy_m": None, "max_pose_std_yaw_rad": None}
"""``navigation.preconditions`` of the ``ungated`` variant: nothing asked of the robot, no covariance bound
(the fresh-state checks on the snapshot stay on). The feasibility port is still wired, as in deployment."""
PLANNER_ACTION = "compute_path_to_pose"
COST_SERVICE = "global_costmap/get_cost_global_costmap"
"""The supervisor's defaults (``config/supervisor.yaml``), served by ``sim_robot``'s planner_server and global_costmap."""
CONFIG = _ROOT / "config"
CAPTURE_SERVICE = "/snapshot_aggregator/capture"
NAV_ACTION = "navigate_to_pose"
NODE_ARGS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    # executable: (parameter file, -p overrides, extra --ros-args)
    "sim_robot": ("sim_robot.yaml", ("autostart:=true", f"speed:={SIM_SPEED}", f"yaw_rate:={SIM_YAW_RATE}"), ()),
    # Two INFO lines per goal (controller active/idle) would only fill the log.
    "snapshot_aggregator": ("snapshot_aggregator.yaml", ("autostart:=true",),
                            ("--log-level", "snapshot_aggregator:=warn")),
}


# --------------------------------------------------------------------------- recording


def _now() -> tuple[float, float]:
    """(wall, this thread's CPU): the CPU reading separates the harness's own work from waiting."""
    return time.perf_counter(), time.thread_time()


@dataclass
class Recorder:
    """Timestamps written by the instrumented ports; read after the run.

    Spans are ``(wall0, wall1, cpu0, cpu1)``: ``perf_counter`` and the calling
    thread's ``thread_time`` (the runner runs on the main thread, so its CPU
    time is the harness's own work, excluding time blocked on the GIL, the
    executor or the disk).
    """

    planner_calls: list[tuple[float, float, float, float]] = field(default_factory=list)
    """Entry and return per model turn."""
    send_goals: list[tuple[float, float, float, float]] = field(default_factory=list)
    """Entry and exit per ``send_goal``."""
    accepted: list[bool] = field(default_factory=list)
    nav_spans: list[tuple[float, float, float, float]] = field(default_factory=list)
    """Every span spent inside the navigation port: send_goal, poll, cancel."""
    snapshot_spans: list[tuple[float, float, float, float]] = field(default_factory=list)
    journal_spans: list[tuple[float, float, float, float]] = field(default_factory=list)
    probe_spans: list[tuple[float, float, float, float]] = field(default_factory=list)
    """Per ``RosFeasibilityPort.probe``: the gate's questions to the robot, all of them."""
    lifecycle_spans: list[tuple[float, float, float, float]] = field(default_factory=list)
    """Per lifecycle ``get_state`` (one per node of ``lifecycle_active``), inside a probe."""
    path_spans: list[tuple[float, float, float, float]] = field(default_factory=list)
    """Per ``ComputePathToPose`` dry run, inside a probe."""
    cost_spans: list[tuple[float, float, float, float]] = field(default_factory=list)
    """Per ``GetCosts`` of the goal cell, inside a probe."""
    check_spans: list[tuple[float, float, float, float]] = field(default_factory=list)
    """Per ``check_preconditions`` call of the dispatcher."""
    answers: list[Any] = field(default_factory=list)
    """What each probe returned (``Feasibility``): was the robot really asked, and what did it say."""
    check_ok: list[bool] = field(default_factory=list)

    def reset(self) -> None:
        for name in ("planner_calls", "send_goals", "accepted", "nav_spans", "snapshot_spans", "journal_spans",
                     "probe_spans", "lifecycle_spans", "path_spans", "cost_spans", "check_spans", "answers",
                     "check_ok"):
            getattr(self, name).clear()


def _instrumented_classes(rec: Recorder) -> tuple[type, type, type]:
    """Subclasses of the real port and journal classes that only add timing."""
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.nodes.ros_ports import Nav2NavigationPort, RosSnapshotPort

    class TimedNavPort(Nav2NavigationPort):
        def send_goal(self, *, target: Any, frame_id: str, timeout_s: float, **options: Any) -> Any:
            t0 = _now()
            ok = False
            try:
                ack = super().send_goal(target=target, frame_id=frame_id, timeout_s=timeout_s, **options)
                ok = bool(ack.accepted)
                return ack
            finally:
                t1 = _now()
                span = (t0[0], t1[0], t0[1], t1[1])
                rec.send_goals.append(span)
                rec.accepted.append(ok)
                rec.nav_spans.append(span)

        def poll(self, timeout_s: float) -> Any:
            t0 = _now()
            try:
                return super().poll(timeout_s)
            finally:
                t1 = _now()
                rec.nav_spans.append((t0[0], t1[0], t0[1], t1[1]))

        def cancel(self, goal_id: str, *, timeout_s: float, **options: Any) -> bool:
            t0 = _now()
            try:
                return super().cancel(goal_id, timeout_s=timeout_s, **options)
            finally:
                t1 = _now()
                rec.nav_spans.append((t0[0], t1[0], t0[1], t1[1]))

    class TimedSnapshotPort(RosSnapshotPort):
        def capture(self, *, reason: str, mission_id: str, **options: Any) -> Any:
            t0 = _now()
            try:
                return super().capture(reason=reason, mission_id=mission_id, **options)
            finally:
                t1 = _now()
                rec.snapshot_spans.append((t0[0], t1[0], t0[1], t1[1]))

    class TimedJournal(SqliteJournal):
        def append(self, drafts: Any, **options: Any) -> Any:
            t0 = _now()
            try:
                return super().append(drafts, **options)
            finally:
                t1 = _now()
                rec.journal_spans.append((t0[0], t1[0], t0[1], t1[1]))

    return TimedNavPort, TimedSnapshotPort, TimedJournal


def _timed_feasibility_class(rec: Recorder) -> type:
    """``RosFeasibilityPort`` timing the probe and each of its questions (its private per-question methods are
    wrapped, not changed: the port asks in series, so the parts add up to the probe less its own glue)."""
    from robot_harness.nodes.ros_ports import RosFeasibilityPort

    def timed(spans: list[tuple[float, float, float, float]], call: Any) -> Any:
        t0 = _now()
        try:
            return call()
        finally:
            t1 = _now()
            spans.append((t0[0], t1[0], t0[1], t1[1]))

    # Arguments pass through untouched: the timing must not depend on the port's signatures.
    class TimedFeasibilityPort(RosFeasibilityPort):
        def probe(self, **kwargs: Any) -> Any:
            answer = timed(rec.probe_spans, lambda: super(TimedFeasibilityPort, self).probe(**kwargs))
            rec.answers.append(answer)
            return answer

        def _lifecycle(self, *args: Any, **kwargs: Any) -> Any:
            return timed(rec.lifecycle_spans, lambda: super(TimedFeasibilityPort, self)._lifecycle(*args, **kwargs))

        def _path(self, *args: Any, **kwargs: Any) -> Any:
            return timed(rec.path_spans, lambda: super(TimedFeasibilityPort, self)._path(*args, **kwargs))

        def _cost(self, *args: Any, **kwargs: Any) -> Any:
            return timed(rec.cost_spans, lambda: super(TimedFeasibilityPort, self)._cost(*args, **kwargs))

    return TimedFeasibilityPort


@contextlib.contextmanager
def timed_check(rec: Recorder) -> Any:
    """Time the dispatcher's ``check_preconditions`` calls while the block runs.

    It is a function the dispatch module imports by name, not a port, so there
    is no class to subclass: the bench swaps the module's reference for a timing
    wrapper and puts the original back afterwards (production code unchanged).
    """
    from robot_harness.core.execution import dispatch

    real = getattr(dispatch, "check_preconditions", None)
    if real is None:
        raise RuntimeError("robot_harness.core.execution.dispatch no longer calls check_preconditions by that name: "
                           "the bench cannot time the gate's check")

    def check(*args: Any, **kwargs: Any) -> Any:
        t0 = _now()
        try:
            report = real(*args, **kwargs)
            rec.check_ok.append(bool(report.ok))
            return report
        finally:
            t1 = _now()
            rec.check_spans.append((t0[0], t1[0], t0[1], t1[1]))

    dispatch.check_preconditions = check
    try:
        yield
    finally:
        dispatch.check_preconditions = real


class AlternatingPlanner:
    """A PlannerPort: ``navigate_to`` the two places in turn until ``actions`` goals were sent, then done.

    It counts goals the navigation port actually sent, so a turn the harness
    refuses (e.g. precondition_changed) is simply proposed again.
    """

    def __init__(self, rec: Recorder, *, actions: int, first: str) -> None:
        self._rec = rec
        self._actions = actions
        self._order = (first, _other(first))
        self._turn = 0

    def next_turn(self, request: Any) -> Any:
        from robot_harness.core.records import ModelResponse, ToolCall

        t0 = _now()
        sent = len(self._rec.send_goals)
        self._turn += 1
        if sent >= self._actions:
            response = ModelResponse(done=f"went back and forth {sent} times")
        else:
            place = self._order[sent % 2]
            response = ModelResponse(tool_calls=(ToolCall(id=f"call-{self._turn}", name="navigate_to",
                                                          arguments={"place": place}),))
        t1 = _now()
        self._rec.planner_calls.append((t0[0], t1[0], t0[1], t1[1]))
        return response


def _other(place: str) -> str:
    return "p0" if place == "p1" else "p1"



def _away(baseline: Any) -> str:
    """The place the robot is not at, so the first hop of a series is a real one."""
    pose = baseline.capture().pose
    return "p1" if pose is None or pose.x < PLACES["p1"]["x"] / 2 else "p0"


# --------------------------------------------------------------------------- statistics


def _pct(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); NaN when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _summary(values_s: Sequence[float]) -> dict[str, float]:
    ms = [v * 1000.0 for v in values_s]
    return {
        "n": len(ms),
        "median_ms": _pct(ms, 50),
        "p95_ms": _pct(ms, 95),
        "mean_ms": statistics.fmean(ms) if ms else float("nan"),
        "max_ms": max(ms) if ms else float("nan"),
    }


def _within(spans: Sequence[tuple[float, float, float, float]], lo: float, hi: float) -> list[tuple[float, float, float, float]]:
    return [s for s in spans if s[0] >= lo and s[1] <= hi]


def _wall(spans: Sequence[tuple[float, float, float, float]]) -> float:
    return sum(s[1] - s[0] for s in spans)


def _cpu(spans: Sequence[tuple[float, float, float, float]]) -> float:
    return sum(s[3] - s[2] for s in spans)


def analyse(rec: Recorder) -> dict[str, list[float]]:
    """Per-action (a) and per-turn (b) overheads, wall and main-thread CPU, with their parts."""
    calls = rec.planner_calls
    out: dict[str, list[float]] = {k: [] for k in (
        "a", "a_cpu", "a_journal", "a_journal_cpu", "a_snapshot", "a_snapshot_cpu", "a_other", "a_commits",
        "a_captures", "accept_rt",
        "a_gate", "a_gate_cpu", "a_probe", "a_lifecycle", "a_path", "a_cost", "a_check", "a_ungated", "a_probes",
        "b", "b_cpu", "b_journal", "b_snapshot", "b_gate", "b_other", "b_commits", "b_action", "b_action_journal",
    )}
    for (entry, exit_, cpu_entry, _cpu_exit), accepted in zip(rec.send_goals, rec.accepted):
        before = [c for c in calls if c[1] <= entry]
        if not before:
            continue
        _e, returned, _ce, cpu_returned = before[-1]
        journals = _within(rec.journal_spans, returned, entry)
        journal = _wall(journals)
        snaps = _within(rec.snapshot_spans, returned, entry)
        # The gate: the feasibility probe (its questions in series) and the check, each timed where it runs.
        probes = _within(rec.probe_spans, returned, entry)
        checks = _within(rec.check_spans, returned, entry)
        gate = _wall(probes) + _wall(checks)
        out["a"].append(entry - returned)
        out["a_cpu"].append(cpu_entry - cpu_returned)
        out["a_journal"].append(journal)
        out["a_journal_cpu"].append(_cpu(journals))
        out["a_snapshot"].append(_wall(snaps))
        out["a_snapshot_cpu"].append(_cpu(snaps))
        out["a_gate"].append(gate)
        out["a_gate_cpu"].append(_cpu(probes) + _cpu(checks))
        out["a_probe"].append(_wall(probes))
        out["a_lifecycle"].append(_wall(_within(rec.lifecycle_spans, returned, entry)))
        out["a_path"].append(_wall(_within(rec.path_spans, returned, entry)))
        out["a_cost"].append(_wall(_within(rec.cost_spans, returned, entry)))
        out["a_check"].append(_wall(checks))
        out["a_ungated"].append(entry - returned - gate)
        out["a_probes"].append(len(probes))
        out["a_other"].append(entry - returned - journal - _wall(snaps) - gate)
        out["a_commits"].append(len(_within(rec.journal_spans, returned, entry)))
        out["a_captures"].append(len(snaps))
        if accepted:
            out["accept_rt"].append(exit_ - entry)
    for (e0, r0, ce0, cr0), (e1, _r1, ce1, _cr1) in zip(calls, calls[1:]):
        nav = _within(rec.nav_spans, r0, e1)
        out["b"].append((e1 - e0) - (r0 - e0) - _wall(nav))
        out["b_cpu"].append((ce1 - ce0) - (cr0 - ce0) - _cpu(nav))
        journal = _wall(_within(rec.journal_spans, r0, e1))
        snaps = _wall(_within(rec.snapshot_spans, r0, e1))
        gate = _wall(_within(rec.probe_spans, r0, e1)) + _wall(_within(rec.check_spans, r0, e1))
        out["b_journal"].append(journal)
        out["b_snapshot"].append(snaps)
        out["b_gate"].append(gate)
        out["b_other"].append(out["b"][-1] - journal - snaps - gate)
        out["b_commits"].append(len(_within(rec.journal_spans, r0, e1)))
    # (b) of the turn that sent each action, in action order: does a turn cost more late in a mission?
    returns = [c[1] for c in calls]
    for entry, *_rest in rec.send_goals:
        turn = bisect.bisect_right(returns, entry) - 1
        if 0 <= turn < len(out["b"]):
            out["b_action"].append(out["b"][turn])
            out["b_action_journal"].append(out["b_journal"][turn])
    return out


GROWTH_EARLY_ACTION = 10
GROWTH_WINDOW = 10
"""Per-turn time "at action k" is the median of (b) over the ``GROWTH_WINDOW`` actions ending at k:
one turn alone is too noisy to compare."""


def growth(m: dict[str, list[float]]) -> dict[str, Any]:
    """Per-turn harness time (b) at action 10 and at the mission's last action, and their ratio.

    The engine's per-turn cost must not grow with mission length (a context or
    an index that grows with the journal would show here, as a ratio well
    above 1). With fewer than 20 actions the two windows overlap.
    """
    per_action, journal = m["b_action"], m["b_action_journal"]
    n = len(per_action)
    if n == 0:
        return {}
    early_end = min(GROWTH_EARLY_ACTION, n)
    early = slice(max(0, early_end - GROWTH_WINDOW), early_end)
    late = slice(max(0, n - GROWTH_WINDOW), n)
    e_ms = 1000.0 * statistics.median(per_action[early])
    l_ms = 1000.0 * statistics.median(per_action[late])
    return {
        "early_action": early_end, "late_action": n, "window": GROWTH_WINDOW,
        "early_ms": e_ms, "late_ms": l_ms, "ratio": l_ms / e_ms if e_ms > 0 else float("nan"),
        "early_journal_ms": 1000.0 * statistics.median(journal[early]),
        "late_journal_ms": 1000.0 * statistics.median(journal[late]),
    }


# --------------------------------------------------------------------------- baselines


class DirectBaseline:
    """Plain clients on the bench node: what a goal and a snapshot cost without the harness.

    Same process, same node, same executor, same sim and aggregator
    processes as the harness's ports, and waits the same way the ports do (a
    done-callback and an Event while the executor spins on its own thread),
    so only the harness differs. The clients live as long as the bench node
    and are destroyed only after the executor stopped: destroying an action
    client under a spinning executor can kill the executor thread
    (``RCLError: action client pointer is invalid``).
    """

    def __init__(self, node: Any) -> None:
        from nav2_msgs.action import NavigateToPose
        from rclpy.action import ActionClient
        from rclpy.callback_groups import ReentrantCallbackGroup

        from robot_harness.srv import CaptureSnapshot

        group = ReentrantCallbackGroup()
        self._node = node
        self.cancel_timeouts = 0
        """Cancels of baseline goals with no answer within ``CANCEL_TIMEOUT_S`` (the goal still ends)."""
        self._nav = ActionClient(node, NavigateToPose, NAV_ACTION, callback_group=group)
        self._capture = node.create_client(CaptureSnapshot, CAPTURE_SERVICE, callback_group=group)

    def accept_round_trips(self, count: int, *, first: str) -> list[float]:
        """``send_goal_async`` -> accepted; each goal is cancelled and has ended before the next is sent."""
        from geometry_msgs.msg import PoseStamped
        from nav2_msgs.action import NavigateToPose

        from robot_harness.core.errors import HarnessTimeout
        from robot_harness.core.records import Pose2D
        from robot_harness.nodes import conversions as cv
        from robot_harness.nodes._util import wait_future

        if not self._nav.wait_for_server(timeout_sec=5.0):
            raise RuntimeError("navigate_to_pose is not available for the direct baseline")
        order = (first, _other(first))
        out: list[float] = []
        for i in range(count):
            goal = NavigateToPose.Goal()
            goal.pose = PoseStamped()
            goal.pose.header.frame_id = "map"
            goal.pose.header.stamp = cv.float_to_stamp(time.time())
            goal.pose.pose = cv.pose2d_to_pose_msg(Pose2D(**PLACES[order[i % 2]]))
            t0 = time.perf_counter()
            handle = wait_future(self._nav.send_goal_async(goal), ACCEPT_TIMEOUT_S, "direct send_goal")
            t1 = time.perf_counter()
            if not handle.accepted:
                raise RuntimeError(f"direct baseline goal {i} was rejected")
            out.append(t1 - t0)
            # Cancel at once and wait for the end: the sim is idle before the
            # next goal, and the baseline does not spend the time budget driving.
            try:
                wait_future(handle.cancel_goal_async(), CANCEL_TIMEOUT_S, "direct cancel")
            except HarnessTimeout:
                # Counted and reported; the goal (a 0.3 m hop) still ends on its own.
                self.cancel_timeouts += 1
            wait_future(handle.get_result_async(), RESULT_TIMEOUT_S, "direct result")
        return out

    def capture(self, *, timeout_s: float = 2.0) -> Any:
        """One snapshot as the core model (``WorldSnapshot``); raises on timeout or refusal."""
        from robot_harness.nodes import conversions as cv
        from robot_harness.nodes._util import wait_future
        from robot_harness.srv import CaptureSnapshot

        if not self._capture.wait_for_service(timeout_sec=timeout_s):
            raise TimeoutError(f"{CAPTURE_SERVICE} is not available within {timeout_s:.0f} s")
        resp = wait_future(self._capture.call_async(CaptureSnapshot.Request(mission_id="bench", reason="bench")),
                           timeout_s, "bench capture")
        if not resp.ok:
            raise RuntimeError(f"capture refused: {resp.error}")
        return cv.msg_to_snapshot(resp.snapshot)

    def wait_for_action_server(self, timeout_s: float) -> bool:
        return bool(self._nav.wait_for_server(timeout_sec=timeout_s))

    def capture_round_trips(self, count: int) -> list[float]:
        """Plain calls of the aggregator's ``~/capture``: one snapshot's cost before the harness touches it."""
        from robot_harness.nodes._util import wait_future
        from robot_harness.srv import CaptureSnapshot

        if not self._capture.wait_for_service(timeout_sec=5.0):
            raise RuntimeError("/snapshot_aggregator/capture is not available for the baseline")
        out: list[float] = []
        for _ in range(count):
            req = CaptureSnapshot.Request(mission_id="bench", reason="bench")
            t0 = time.perf_counter()
            resp = wait_future(self._capture.call_async(req), 2.0, "direct capture")
            out.append(time.perf_counter() - t0)
            if not resp.ok:
                raise RuntimeError(f"capture refused: {resp.error}")
            self._last_capture = resp
        return out

    def conversion_costs(self, count: int) -> list[float]:
        """``msg_to_snapshot`` on the last captured message: the Python side of every port capture."""
        from robot_harness.nodes import conversions as cv

        msg = getattr(self, "_last_capture", None)
        if msg is None:
            return []
        out: list[float] = []
        for _ in range(count):
            t0 = time.perf_counter()
            cv.msg_to_snapshot(msg.snapshot)
            out.append(time.perf_counter() - t0)
        return out

    def destroy(self) -> None:
        """Only once the executor stopped spinning."""
        self._nav.destroy()
        self._node.destroy_client(self._capture)


def journal_commit_costs(directory: Path, count: int, *, name: str = "commit-cost") -> dict[str, Any]:
    """Single-event appends to a fresh SqliteJournal (one fsync'd commit each), and raw fsync for scale.

    Run once per executor while the bench node spins and the robot processes
    run (idle between goals), and once after everything stopped: the
    difference is what sharing this interpreter (one GIL) with the executor
    thread(s), and the machine with the robot processes, does to each commit.
    """
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventDraft, EventType

    path = directory / f"{name}.sqlite3"
    journal = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None))
    costs: list[float] = []
    appends, fsyncs = Steal(), Steal()
    try:
        journal.setup()
        pragmas = journal.pragmas()
        with appends:
            for i in range(count):
                draft = EventDraft(type=EventType.ROBOT_ACTION_PROGRESS, mission_id="bench", robot_action_id=f"act-{i}",
                                   payload={"distance_remaining": 0.1 * i,
                                            "current_pose": {"x": 0.0, "y": 0.0, "yaw": 0.0}})
                t0 = time.perf_counter()
                journal.append([draft])
                costs.append(time.perf_counter() - t0)
    finally:
        journal.close()
    raw: list[float] = []
    fd = os.open(directory / f"{name}.fsync-probe", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        block = os.urandom(4096)
        with fsyncs:
            for _ in range(count):
                t0 = time.perf_counter()
                os.write(fd, block)
                os.fsync(fd)
                raw.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
    return {"journal_append": costs, "raw_fsync": raw, "pragmas": pragmas,
            "steal_pct": {"journal_append": appends.steal_pct, "raw_fsync": fsyncs.steal_pct}}


def _fs_type(path: Path) -> str:
    """Filesystem type holding ``path`` (fsync on tmpfs costs nothing, so say which it is)."""
    best, kind = "", "?"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    except OSError:
        pass
    return kind


# --------------------------------------------------------------------------- robot processes


def _install_lib() -> Path | None:
    """``lib/robot_harness`` of the first ``AMENT_PREFIX_PATH`` entry that has the executables."""
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if not prefix:
            continue
        candidate = Path(prefix) / "lib" / "robot_harness"
        if all((candidate / exe).exists() for exe in NODE_ARGS):
            return candidate
    return None


def machine_cpu() -> dict[str, float]:
    """Whole-machine CPU seconds from ``/proc/stat``: busy (all CPUs), steal (VM host took it), total; {} if unreadable."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return {"busy": (user + nice + system + irq + softirq) / tick, "steal": steal / tick,
            "total": (user + nice + system + idle + iowait + irq + softirq + steal) / tick}


class Steal:
    """Whole-machine CPU over one measured phase: ``steal_pct`` (the VM host took it) and ``busy_pct``,
    each in % of one core over the phase's wall time (NaN where ``/proc/stat`` is unreadable).

    Every figure the bench prints is measured inside one of these, and the
    steal during it is printed beside it: a p95 measured while the host stole
    a core says nothing about the harness.
    """

    def __init__(self) -> None:
        self.wall_s = 0.0
        self.steal_s = float("nan")
        self.busy_s = float("nan")

    def __enter__(self) -> "Steal":
        self._t0, self._m0 = time.perf_counter(), machine_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._t0
        m1 = machine_cpu()
        if self._m0 and m1:
            self.steal_s = m1["steal"] - self._m0["steal"]
            self.busy_s = m1["busy"] - self._m0["busy"]

    @property
    def steal_pct(self) -> float:
        return 100.0 * self.steal_s / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def busy_pct(self) -> float:
        return 100.0 * self.busy_s / self.wall_s if self.wall_s > 0 else float("nan")

    def as_dict(self) -> dict[str, float]:
        return {"wall_s": self.wall_s, "steal_pct": self.steal_pct, "busy_pct": self.busy_pct}


def steal_of(*phases: "Steal") -> float:
    """VM steal over several phases together, % of one core over their summed wall time."""
    wall = sum(p.wall_s for p in phases)
    return 100.0 * sum(p.steal_s for p in phases) / wall if wall > 0 else float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all threads), from ``/proc``; NaN if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGINT), 0, 0, 0)  # PR_SET_PDEATHSIG\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)
"""Exec'd in front of each robot process on Linux: the kernel SIGINTs it if the bench dies.

Cleanup normally happens in ``RobotProcesses.stop`` (also on Ctrl-C and
SIGTERM); this covers a bench killed with SIGKILL. The death signal survives
``execv``, so the process that runs is the installed executable itself, same
pid, same arguments (no ``preexec_fn``: the bench has threads by the time a
second pair of robot processes starts)."""


class RobotProcesses:
    """``sim_robot`` and ``snapshot_aggregator`` as separate processes, as the launch file starts them.

    Each gets its own session (a Ctrl-C in the terminal reaches only the
    bench, which then stops them in order) and a log file in the work dir.
    """

    def __init__(self, lib: Path, workdir: Path) -> None:
        self._lib = lib
        self._workdir = workdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: dict[str, IO[bytes]] = {}
        self.commands: dict[str, list[str]] = {}
        self.exit_codes: dict[str, int | None] = {}

    def start(self) -> None:
        self._workdir.mkdir(parents=True, exist_ok=True)
        wrapper = [sys.executable, "-c", _DIE_WITH_PARENT] if sys.platform.startswith("linux") else []
        for exe, (param_file, params, extra) in NODE_ARGS.items():
            args = [str(self._lib / exe), "--ros-args", "--params-file", str(CONFIG / param_file)]
            for p in params:
                args += ["-p", p]
            args += list(extra)
            self.commands[exe] = args
            log = open(self.log_path(exe), "wb")  # noqa: SIM115 - closed in stop()
            self._logs[exe] = log
            self.procs[exe] = subprocess.Popen(wrapper + args, stdin=subprocess.DEVNULL, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True)

    def log_path(self, exe: str) -> Path:
        return self._workdir / f"{exe}.log"

    def log_tail(self, exe: str, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path(exe).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def dead(self) -> dict[str, int]:
        return {exe: rc for exe, p in self.procs.items() if (rc := p.poll()) is not None}

    def check(self) -> None:
        """Raise, with the log's last lines, if a robot process has exited."""
        dead = self.dead()
        if dead:
            exe, rc = next(iter(dead.items()))
            raise RuntimeError(f"{exe} exited with code {rc}; its log ends:\n  "
                               + self.log_tail(exe).replace("\n", "\n  "))

    def cpu(self) -> dict[str, float]:
        return {exe: cpu_seconds(p.pid) for exe, p in self.procs.items()}

    def stop(self) -> None:
        """SIGINT all (the nodes' own clean shutdown), then SIGKILL whatever did not exit in time."""
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGINT)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for exe, p in self.procs.items():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"{exe} did not exit {STOP_TIMEOUT_S:.0f} s after SIGINT; killing it", file=sys.stderr)
                p.kill()
                p.wait(timeout=STOP_TIMEOUT_S)
            self.exit_codes[exe] = p.returncode
        for log in self._logs.values():
            log.close()

    def tracebacks(self) -> list[str]:
        return [exe for exe in self.procs if "Traceback" in self.log_tail(exe, lines=10_000)]


# --------------------------------------------------------------------------- the bench node


class BenchNode:
    """One rclpy node in its own context, spun on a background thread: what the supervisor process hosts.

    ``events``: ``rclpy.experimental.EventsExecutor`` driven by ``spin_once``
    in a loop; its ``spin()`` in this rclpy (9.1.2, Kilted wheels) dispatched
    nothing and busy-looped at 100 % of a core (not even a timer fired), while
    ``spin_once`` works. It is single-threaded: fine here, since the runner
    blocks on futures from the main thread, never from an executor callback.
    ``multithreaded``: the harness's ``MultiThreadedExecutor(num_threads=4)``
    (``robot_harness.nodes.executors``: rclpy's, minus the resubmit busy
    loop of ros2/rclpy#1452), what the supervisor and the bring-up use.
    ``rclpy-multithreaded``: rclpy's own, for comparison.
    """

    def __init__(self, kind: str) -> None:
        import rclpy
        from robot_harness.nodes.executors import MultiThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self.kind = kind
        self.context = rclpy.Context()
        # No rclpy signal handlers: Ctrl-C / SIGTERM become KeyboardInterrupt in
        # the main thread, and the finally blocks take everything down in order.
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("overhead_bench", context=self.context)
        if kind == "events":
            from rclpy.experimental import EventsExecutor

            self.executor: Any = EventsExecutor(context=self.context)
        elif kind == "single_threaded":
            from rclpy.executors import SingleThreadedExecutor

            self.executor = SingleThreadedExecutor(context=self.context)
        elif kind == "rclpy-multithreaded":
            from rclpy.executors import MultiThreadedExecutor as RclpyMultiThreadedExecutor

            self.executor = RclpyMultiThreadedExecutor(num_threads=EXECUTOR_THREADS, context=self.context)
        else:
            self.executor = MultiThreadedExecutor(num_threads=EXECUTOR_THREADS, context=self.context)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    @property
    def label(self) -> str:
        if self.kind == "multithreaded":
            return f"robot_harness MultiThreadedExecutor({EXECUTOR_THREADS} threads)"
        if self.kind == "rclpy-multithreaded":
            return f"rclpy MultiThreadedExecutor({EXECUTOR_THREADS} threads)"
        if self.kind == "single_threaded":
            return "rclpy SingleThreadedExecutor (spin_once loop, 1 thread)"
        return "EventsExecutor (spin_once loop, 1 thread)"

    def start(self) -> None:
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=f"bench-{self.kind}-executor", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            if self.kind not in MULTITHREADED:  # events, single_threaded: as BackgroundSpinner drives them
                while not self._stop.is_set() and self.context.ok():
                    self.executor.spin_once(timeout_sec=0.1)
            else:
                self.executor.spin()
        except BaseException as exc:  # noqa: BLE001 - reported by check(); the runner would only see timeouts
            self.error = exc

    def check(self) -> None:
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            raise RuntimeError(f"the bench executor thread died: {self.error!r}")

    def stop_spinning(self) -> None:
        """The executor stops before any entity is destroyed: destroying under a spinning executor races its wait set."""
        self._stop.set()
        if self.kind in MULTITHREADED:
            self.executor.shutdown(timeout_sec=2.0)
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            if self._thread.is_alive():
                print("warning: the bench executor thread did not stop within 5 s", file=sys.stderr)

    def close(self) -> None:
        import rclpy

        with contextlib.suppress(Exception):  # already out after shutdown
            self.executor.remove_node(self.node)
        if self.kind not in MULTITHREADED:
            self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def wait_ready(baseline: DirectBaseline, bench: BenchNode, robot: RobotProcesses, timeout_s: float) -> dict[str, Any]:
    """Bounded: until a capture holds pose, battery and navigation AVAILABLE and the action server is up."""
    from robot_harness.core.records import Availability

    t0 = time.monotonic()
    deadline = t0 + timeout_s
    last: str = "no answer yet"
    while time.monotonic() < deadline:
        robot.check()
        bench.check()
        try:
            snap = baseline.capture(timeout_s=min(2.0, max(0.1, deadline - time.monotonic())))
        except Exception as exc:  # noqa: BLE001 - not up yet (timeout, refusal while inactive)
            last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.2)
            continue
        fields = {"pose": snap.pose_meta, "battery": snap.battery_meta, "navigation": snap.navigation_meta}
        missing = [f"{k} {m.availability.value}" for k, m in fields.items() if m.availability is not Availability.AVAILABLE]
        if not missing:
            if not baseline.wait_for_action_server(max(0.1, deadline - time.monotonic())):
                break
            return {"ready_s": time.monotonic() - t0}
        last = "capture answered, but " + ", ".join(missing)
        time.sleep(0.2)
    raise TimeoutError(f"robot processes not ready within {timeout_s:.0f} s ({last})")


def wait_answering(port: Any, config: Any, bench: BenchNode, robot: RobotProcesses, timeout_s: float) -> dict[str, Any]:
    """Bounded: until the robot answers every question of the gate (lifecycle, path, cost).

    A server not yet discovered is ABSENT, and its check passes as not
    applicable without a round trip: measuring then would time a gate that
    asks nothing.
    """
    from robot_harness.core.preconditions import ProbeStatus
    from robot_harness.core.records import Pose2D

    pre = config.navigation.preconditions
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    missing: list[str] = ["not asked yet"]
    while time.monotonic() < deadline:
        robot.check()
        bench.check()
        answer = port.probe(pre=pre, start=Pose2D(**PLACES["p0"]), goal=Pose2D(**PLACES["p1"]),
                            frame_id=config.frame_id)
        parts = [(f"lifecycle {p.node}", p) for p in answer.lifecycle]
        parts += [("path", answer.path), ("goal cost", answer.goal_cost)]
        missing = [f"{name} {'not asked' if p is None else f'{p.status.value} ({p.error})'}"
                   for name, p in parts if p is None or p.status is not ProbeStatus.ANSWERED]
        if not missing:
            return {"gate_ready_s": time.monotonic() - t0}
        time.sleep(0.2)
    raise TimeoutError(f"the robot did not answer the gate's questions within {timeout_s:.0f} s: {', '.join(missing)}")


def gate_answers(rec: Recorder) -> dict[str, Any]:
    """What the robot answered to a measured mission's probes, and how the checks came out: that the gate
    really asked (an ABSENT server would be a not-applicable check at no cost)."""
    from robot_harness.core.preconditions import ProbeStatus

    answered = ProbeStatus.ANSWERED
    lifecycle = [p for a in rec.answers for p in a.lifecycle]
    paths = [a.path for a in rec.answers if a.path is not None]
    costs = [a.goal_cost for a in rec.answers if a.goal_cost is not None]
    odd = [f"{name}: {p.status.value} {p.error}".strip() for name, probes in
           (("lifecycle", lifecycle), ("path", paths), ("goal cost", costs)) for p in probes if p.status is not answered]
    return {
        "probes": len(rec.answers),
        "lifecycle_asked": len(lifecycle),
        "lifecycle_active": sum(1 for p in lifecycle if p.status is answered and p.state == "active"),
        "path_asked": len(paths), "path_found": sum(1 for p in paths if p.status is answered and p.ok),
        "cost_asked": len(costs), "cost_answered": sum(1 for p in costs if p.status is answered and p.cost is not None),
        "not_answered": {line: odd.count(line) for line in sorted(set(odd))},
        "checks": len(rec.check_ok), "checks_refused": sum(1 for ok in rec.check_ok if not ok),
    }


# --------------------------------------------------------------------------- the supervisor's listeners


class SupervisorListeners:
    """The journal listener of the supervisor process, built as ``SupervisorNode.on_configure`` builds it.

    One ``JournalFanout`` (``robot_harness/nodes/listener.py``) subscribed to
    the journal, on a thread of its own (commit order kept): the appending
    (runner's) thread only enqueues; the fan-out converts each committed event
    to its ROS message and CDR bytes once and hands them to

    * ``~/events``: a reliable (depth 200) ``JournalEvent`` publisher on the
      bench node (``EventPublisher``, as the supervisor attaches it); a
      subscriber on the recorder's node stands in for an operator's client,
      so the publisher really sends;
    * the evidence recorder: a ``MissionRecorder`` on its own
      ``BackgroundSpinner`` node subscribed to the raw robot topics, and the
      ``HarnessEvidenceRecorder`` the engine is handed (``recorder=``): it
      attaches to the fan-out when a mission starts and writes every event,
      the derived Foxglove topics, snapshots and verdicts into an MCAP bag.

    What they cost lands in (a) and (b) only as CPU (and the GIL) taken from
    the same two cores.
    """

    def __init__(self, bench: "BenchNode", journal: Any, bag_dir: Path) -> None:
        from rclpy.qos import QoSProfile, QoSReliabilityPolicy

        from robot_harness.evidence.bag import McapEvidenceStore
        from robot_harness.msg import JournalEvent as JournalEventMsg
        from robot_harness.nodes.executors import DEFAULT_SPINNER_EXECUTOR, SPINNER_EXECUTORS, BackgroundSpinner
        from robot_harness.nodes.listener import EventPublisher, JournalFanout
        from robot_harness.nodes.recorder import HarnessEvidenceRecorder, MissionRecorder

        reliable = QoSProfile(depth=200, reliability=QoSReliabilityPolicy.RELIABLE)
        self._bench = bench
        self.received = 0
        self._pub = bench.node.create_publisher(JournalEventMsg, "~/events", reliable)
        self._events = JournalFanout(name="bench-events")
        self._unsubscribe = journal.subscribe(self._events)
        self._publisher = EventPublisher(self._pub)
        self._events.attach(self._publisher, name="~/events")
        self._spinner = BackgroundSpinner(context=bench.context, name="overhead_bench_recorder",
                                          executor=bench.kind if bench.kind in SPINNER_EXECUTORS else DEFAULT_SPINNER_EXECUTOR).start()
        self._sub = self._spinner.node.create_subscription(
            JournalEventMsg, f"/{bench.node.get_name()}/events", self._on_event, reliable)
        self._mission_recorder = MissionRecorder(self._spinner.node, McapEvidenceStore(bag_dir))
        self._mission_recorder.subscribe()
        self.recorder = HarnessEvidenceRecorder(self._mission_recorder, journal, events=self._events)

    @property
    def published(self) -> int:
        return self._publisher.published

    def wait_for_client(self, timeout_s: float) -> bool:
        """Until the publisher sees the stand-in client (it publishes nothing for nobody)."""
        deadline = time.monotonic() + timeout_s
        while self._pub.get_subscription_count() == 0:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _on_event(self, _msg: Any) -> None:
        self.received += 1

    def close(self) -> None:
        self._unsubscribe()
        self._events.close(5.0)
        self._spinner.stop()
        self._mission_recorder.close()
        self._spinner.node.destroy_subscription(self._sub)
        self._spinner.destroy()
        self._bench.node.destroy_publisher(self._pub)


# --------------------------------------------------------------------------- the run


def run_executor(kind: str, robot: RobotProcesses, workdir: Path, actions: int, *, mission_timeout_s: float,
                 commits: int, step: str, variants: Sequence[str] = VARIANTS) -> dict[str, Any]:
    """Baseline halves around the harness missions (one per variant), all on one bench node spun by ``kind``."""
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.config import ContractConfig, HarnessConfig, LimitsConfig
    from robot_harness.compose import mission_runner
    from robot_harness.core.records import ActionStatus, EventType
    from robot_harness.core.skills import default_skills

    rec = Recorder()
    TimedNavPort, TimedSnapshotPort, TimedJournal = _instrumented_classes(rec)
    TimedFeasibilityPort = _timed_feasibility_class(rec)
    clock, ids = SystemClock(), IdGenerator(None)
    # The mission's completion contract (frozen before planning, as always):
    # both places reached. Given verbatim, like a scenario's contract.
    contract = ContractConfig(compiler="scenario", obligations=[
        {"id": f"o{i + 1}", "kind": "at_place", "description": f"The robot reached {name}.",
         "params": {"place": name}, "evidence": ["navigation_receipt", "pose_observation"],
         "source": f"Visit {name}"}
        for i, name in enumerate(sorted(PLACES))])
    config = HarnessConfig(
        places=PLACES,
        limits=LimitsConfig(mission_timeout_s=mission_timeout_s, max_turns=2 * actions + 20),
        contract=contract,
    )
    ungated = HarnessConfig(
        places=PLACES,
        limits=LimitsConfig(mission_timeout_s=mission_timeout_s, max_turns=2 * actions + 20),
        contract=contract, navigation={"preconditions": UNGATED},
    )
    res: dict[str, Any] = {"executor": kind}
    bench = BenchNode(kind)
    res["executor_label"] = bench.label
    journal = TimedJournal(workdir / f"bench-journal-{kind}.sqlite3", clock=clock, ids=ids)
    snapshots: Any = None
    nav: Any = None
    feasibility: Any = None
    baseline: DirectBaseline | None = None
    try:
        journal.setup()
        # Every entity exists before the first baseline goal, so both baseline
        # halves and the harness run on the same node with the same load (the
        # port's status subscription sees the baseline's goals too).
        snapshots = TimedSnapshotPort(bench.node, CAPTURE_SERVICE)
        nav = TimedNavPort(bench.node, NAV_ACTION, clock=clock)
        feasibility = TimedFeasibilityPort(bench.node, planner_action=PLANNER_ACTION, cost_service=COST_SERVICE)
        baseline = DirectBaseline(bench.node)
        bench.start()
        res.update(wait_ready(baseline, bench, robot, START_TIMEOUT_S))
        res.update(wait_answering(feasibility, config, bench, robot, START_TIMEOUT_S))
        first = actions // 2
        print(f"[{step}] {bench.label}: ready after {res['ready_s']:.1f} s; direct baseline, first half "
              f"({first} goals, +{WARMUP_ACTIONS} warm-up) ...", flush=True)
        baseline.accept_round_trips(WARMUP_ACTIONS, first=_away(baseline))  # warm-up, not counted
        steal = {name: Steal() for name in ("direct_1", "direct_2", "capture_1", "capture_2", "conversion")}
        with steal["direct_1"]:
            direct_1 = baseline.accept_round_trips(first, first=_away(baseline))
        with steal["capture_1"]:
            capture_1 = baseline.capture_round_trips(first)
        bench.check()

        def mission(n: int, cfg: HarnessConfig, recorder: Any = None) -> Any:
            runner = mission_runner(
                config=cfg, journal=journal, clock=clock, ids=ids,
                skills=default_skills(cfg.navigation), snapshots=snapshots,
                planner=AlternatingPlanner(rec, actions=n, first=_away(baseline)), navigation=nav,
                feasibility=feasibility, recorder=recorder,
            )
            return runner.run(f"Visit p0 and p1 {n} times.")

        def measured_mission(variant: str, cfg: HarnessConfig, recorder: Any = None) -> tuple[dict[str, Any], Any]:
            # Warm-up: first SQLite pages, the port's clients, and the latched status
            # of the baseline's goals (reported to the port as uncorrelated events) -
            # none of it counted.
            print(f"[{step}] harness mission ({variant}), {actions} actions (+{WARMUP_ACTIONS} warm-up) ...",
                  flush=True)
            out: dict[str, Any] = {"variant": variant}
            warm = mission(WARMUP_ACTIONS, cfg, recorder)
            out["warmup_uncorrelated_events"] = len(journal.events(
                mission_id=warm.mission_id, types=[EventType.BACKEND_EVENT_UNCORRELATED]))
            rec.reset()
            status_goals_0 = len(getattr(nav, "_last_status", {}))  # diagnostic read of the port's private map
            cpu0, proc0, main0, mach0 = robot.cpu(), time.process_time(), time.thread_time(), machine_cpu()
            t0 = time.perf_counter()
            outcome = mission(actions, cfg, recorder)
            out["mission_wall_s"] = wall = time.perf_counter() - t0
            cpu1, proc1, main1, mach1 = robot.cpu(), time.process_time(), time.thread_time(), machine_cpu()
            cpu = out["cpu_pct_of_one_core"] = {
                "bench process": 100.0 * (proc1 - proc0) / wall,
                "bench main thread (runner)": 100.0 * (main1 - main0) / wall,
                **{exe: 100.0 * (cpu1[exe] - cpu0[exe]) / wall for exe in cpu0},
            }
            if mach0 and mach1:
                # Anything else on the machine (other processes, and on a VM the
                # host's steal) competes for the same cores: say how much there was.
                ours = cpu["bench process"] + sum(cpu[exe] for exe in cpu0)
                cpu["whole machine busy"] = 100.0 * (mach1["busy"] - mach0["busy"]) / wall
                cpu["other processes"] = max(0.0, cpu["whole machine busy"] - ours)
                cpu["VM steal"] = 100.0 * (mach1["steal"] - mach0["steal"]) / wall
            out["status_array_goals"] = [status_goals_0, len(getattr(nav, "_last_status", {}))]
            robot.check()
            bench.check()
            out["measured"] = analyse(rec)
            out["gate_answers"] = gate_answers(rec)
            out["uncorrelated_events"] = len(journal.events(
                mission_id=outcome.mission_id, types=[EventType.BACKEND_EVENT_UNCORRELATED]))
            out["journal_events"] = len(journal.events(mission_id=outcome.mission_id))
            out.update(
                mission_status=outcome.status.value, mission_summary=outcome.summary[:300],
                actions_sent=len(rec.send_goals),
                actions_succeeded=sum(1 for a in outcome.actions if a.state is ActionStatus.SUCCEEDED),
                not_succeeded=[f"{a.state.value}: {a.reason}" for a in outcome.actions
                               if a.state is not ActionStatus.SUCCEEDED],
                turns=len(rec.planner_calls),
                bag=dict(outcome.bag),
            )
            return out, outcome

        runs: dict[str, dict[str, Any]] = {}
        with timed_check(rec):
            for variant in variants:
                if variant != "listeners":
                    runs[variant], _ = measured_mission(variant, ungated if variant == "ungated" else config)
                    continue
                load = SupervisorListeners(bench, journal, workdir / f"bags-{kind}")
                try:
                    if not load.wait_for_client(5.0):
                        print("warning: the stand-in ~/events client was not matched within 5 s", file=sys.stderr)
                    runs[variant], _ = measured_mission(variant, config, load.recorder)
                    time.sleep(0.5)  # the last events reach the stand-in client
                    runs[variant]["events_published"] = load.published
                    runs[variant]["events_received"] = load.received
                    runs[variant]["recorder_failures"] = load.recorder.failures
                finally:
                    load.close()
        res["variants"] = runs
        res.update({k: v for k, v in runs[variants[0]].items() if k != "variant"})
        print(f"[{step}] direct baseline, second half ({actions - first} goals) ...", flush=True)
        with steal["capture_2"]:
            capture_2 = baseline.capture_round_trips(actions - first)
        with steal["direct_2"]:
            direct_2 = baseline.accept_round_trips(actions - first, first=_away(baseline))
        with steal["conversion"]:
            res["conversion"] = baseline.conversion_costs(actions)
        robot.check()
        res["commit_under_graph"] = journal_commit_costs(workdir, commits, name=f"commit-running-{kind}")
        res.update(
            direct=direct_1 + direct_2, direct_first=direct_1, direct_second=direct_2,
            direct_cancel_timeouts=baseline.cancel_timeouts,
            capture=capture_1 + capture_2,
            steal_pct={"direct": steal_of(steal["direct_1"], steal["direct_2"]),
                       "direct_first": steal["direct_1"].steal_pct, "direct_second": steal["direct_2"].steal_pct,
                       "capture": steal_of(steal["capture_1"], steal["capture_2"]),
                       "conversion": steal["conversion"].steal_pct},
        )
    finally:
        bench.stop_spinning()
        for destroy in (lambda: nav.destroy() if nav is not None else None,
                        lambda: feasibility.destroy() if feasibility is not None else None,
                        lambda: baseline.destroy() if baseline is not None else None,
                        lambda: snapshots.destroy(bench.node) if snapshots is not None else None):
            try:
                destroy()
            except Exception as exc:  # noqa: BLE001 - cleanup goes on
                print(f"warning: cleanup: {exc!r}", file=sys.stderr)
        journal.close()
        bench.close()
    return res


def _fmt(v: float) -> str:
    return f"{v:8.2f}"


GATE_ROW = "    in the gate (probe + check)"
"""The pre-dispatch gate's own wall time per navigation, inside (a)."""


def _gate_rows(m: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """The gate inside (a): the feasibility probe (its questions, asked in series) and ``check_preconditions``."""
    return {
        GATE_ROW: _summary(m["a_gate"]),
        "      main-thread CPU in the gate": _summary(m["a_gate_cpu"]),
        "      feasibility probe": _summary(m["a_probe"]),
        "        lifecycle get_state (all nodes)": _summary(m["a_lifecycle"]),
        "        ComputePathToPose dry run": _summary(m["a_path"]),
        "        GetCosts of the goal cell": _summary(m["a_cost"]),
        "      check_preconditions": _summary(m["a_check"]),
    }


def _variant_rows(m: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {"(a) tool call -> goal sent": _summary(m["a"]), "    main-thread CPU": _summary(m["a_cpu"]),
            "    in journal appends": _summary(m["a_journal"]),
            **_gate_rows(m),
            "    (a) less the gate": _summary(m["a_ungated"]),
            "(b) per turn, excl. planner + nav port": _summary(m["b"]),
            "    main-thread CPU ": _summary(m["b_cpu"]), "    in journal appends ": _summary(m["b_journal"])}


def report_gate(runs: dict[str, Any], tables: dict[str, dict[str, dict[str, float]]],
                steal: dict[str, float]) -> dict[str, Any]:
    """The pre-dispatch gate per navigation, per variant, against (a) of the same mission; and (a) with the
    gate against (a) without it (``ungated``), when both ran."""
    print()
    print("the pre-dispatch gate per navigation (RosFeasibilityPort.probe: lifecycle get_state per node, "
          "ComputePathToPose dry run, GetCosts of the goal cell; then check_preconditions):")
    out: dict[str, Any] = {"variants": {}}
    parts = (("probe", "      feasibility probe"), ("lifecycle", "        lifecycle get_state (all nodes)"),
             ("path", "        ComputePathToPose dry run"), ("cost", "        GetCosts of the goal cell"),
             ("check", "      check_preconditions"))
    for v, r in runs.items():
        t, m, ans = tables[v], r["measured"], r["gate_answers"]
        a, g = t["(a) tool call -> goal sent"], t[GATE_ROW]
        ratio = {q: g[q] / a[q] if a[q] > 0 else float("nan") for q in ("median_ms", "p95_ms")}
        shares = [gi / ai for gi, ai in zip(m["a_gate"], m["a"]) if ai > 0]
        share = statistics.median(shares) if shares else float("nan")
        out["variants"][v] = {"a": a, "gate": g, **{k: t[row] for k, row in parts},
                              "ratio_to_a": ratio, "median_share_of_a": share, "answers": ans,
                              "steal_pct": steal[v]}
        print(f"{v}: gate median {g['median_ms']:.2f} ms, p95 {g['p95_ms']:.2f} ms; (a) median "
              f"{a['median_ms']:.2f} ms, p95 {a['p95_ms']:.2f} ms; gate / (a): median {ratio['median_ms']:.2f}x, "
              f"p95 {ratio['p95_ms']:.2f}x (median share per action {share:.2f}); VM steal {steal[v]:.1f} %")
        print("    median / p95 ms: " + ", ".join(f"{k} {t[row]['median_ms']:.2f} / {t[row]['p95_ms']:.2f}"
                                                   for k, row in parts))
        extra = "".join(f"; {line} ({n}x)" for line, n in ans["not_answered"].items())
        print(f"    asked {ans['probes']} probes: lifecycle {ans['lifecycle_active']}/{ans['lifecycle_asked']} active, "
              f"path {ans['path_found']}/{ans['path_asked']} found, goal cost {ans['cost_answered']}/"
              f"{ans['cost_asked']} answered; checks {ans['checks']}, refused {ans['checks_refused']}{extra}")
    if "ungated" in runs:
        for gated in (v for v in runs if v != "ungated"):
            with_, without = tables[gated]["(a) tool call -> goal sent"], tables["ungated"]["(a) tool call -> goal sent"]
            r = {q: with_[q] / without[q] if without[q] > 0 else float("nan") for q in ("median_ms", "p95_ms")}
            out[f"a_{gated}_vs_ungated"] = {"with_gate": with_, "without_gate": without, "ratio": r,
                                             "steal_pct": {gated: steal[gated], "ungated": steal["ungated"]}}
            print(f"(a) with the gate ({gated}) / without (ungated): median {with_['median_ms']:.2f} / "
                  f"{without['median_ms']:.2f} ms = {r['median_ms']:.2f}x, p95 {with_['p95_ms']:.2f} / "
                  f"{without['p95_ms']:.2f} ms = {r['p95_ms']:.2f}x (VM steal {steal[gated]:.1f} / "
                  f"{steal['ungated']:.1f} %)")
    return out


def report_variants(res: dict[str, Any]) -> dict[str, Any]:
    """(a) and (b) side by side for the bare runner and with the supervisor's journal listeners."""
    runs = res["variants"]
    tables = {v: _variant_rows(r["measured"]) for v, r in runs.items()}
    names = list(runs)
    print()
    print("the variants side by side (listeners: + the supervisor's ~/events publisher and MCAP evidence recorder; "
          "ungated: readiness and feasibility checks off), same node, same robot:")
    head = "".join(f" {v + ' med':>16s} {v + ' p95':>16s}" for v in names)
    print(f"{'metric (ms)':44s}{head}")
    for row in next(iter(tables.values())):
        cells = "".join(f" {_fmt(tables[v][row]['median_ms']):>16s} {_fmt(tables[v][row]['p95_ms']):>16s}"
                        for v in names)
        print(f"{row:44s}{cells}")
    steal = {v: r["cpu_pct_of_one_core"].get("VM steal", float("nan")) for v, r in runs.items()}
    print(f"{'VM steal during the mission, % of one core':44s}"
          + "".join(f" {steal[v]:16.1f} {'':>16s}" for v in names))
    grown = {v: growth(r["measured"]) for v, r in runs.items()}
    for v, g in grown.items():
        if g:
            print(f"{v}: (b) per turn, median of {g['window']} turns: at action {g['early_action']} "
                  f"{g['early_ms']:.2f} ms, at action {g['late_action']} {g['late_ms']:.2f} ms, ratio "
                  f"{g['ratio']:.2f}x (journal appends {g['early_journal_ms']:.2f} -> {g['late_journal_ms']:.2f} ms; "
                  f"VM steal {steal[v]:.1f} %)")
    for v, r in runs.items():
        cpu = r["cpu_pct_of_one_core"]
        extra = ""
        if v == "listeners":
            extra = (f"; events published {r.get('events_published', 0)} (received by the stand-in client "
                     f"{r.get('events_received', 0)}), bag {r['bag'].get('messages', 0)} messages, "
                     f"recorder failures {r.get('recorder_failures', 0)}")
        print(f"{v}: mission {r['mission_status']} in {r['mission_wall_s']:.1f} s, {r['actions_sent']} actions; "
              f"CPU % of one core: bench process {cpu['bench process']:.0f}, runner thread "
              f"{cpu['bench main thread (runner)']:.0f}, other processes {cpu.get('other processes', float('nan')):.0f}, "
              f"VM steal {cpu.get('VM steal', float('nan')):.0f}{extra}")
    gate = report_gate(runs, tables, steal)
    targets: dict[str, Any] = {}
    for v in names:
        p95 = tables[v]["(a) tool call -> goal sent"]["p95_ms"]
        targets[v] = {"a_p95_ms": p95, "met": p95 < TARGET_A_P95_MS, "steal_pct": steal[v]}
        print(f"target ({res['executor']}, {v}): p95 of the per-action overhead (a) < {TARGET_A_P95_MS:.0f} ms -> "
              f"{p95:.2f} ms: {'MET' if targets[v]['met'] else 'NOT MET'} (VM steal {steal[v]:.1f} %)")
    listener_targets: dict[str, Any] = {}
    if "bare" in tables and "listeners" in tables:
        for key, row, bound in (("turn_p95", "(b) per turn, excl. planner + nav port", TARGET_TURN_RATIO),
                                ("turn_journal_p95", "    in journal appends ", TARGET_TURN_JOURNAL_RATIO)):
            bare, loaded = tables["bare"][row]["p95_ms"], tables["listeners"][row]["p95_ms"]
            ratio = loaded / bare if bare > 0 else float("nan")
            listener_targets[key] = {"bare_p95_ms": bare, "listeners_p95_ms": loaded, "ratio": ratio, "bound": bound,
                                     "met": ratio <= bound, "steal_pct": {"bare": steal["bare"],
                                                                          "listeners": steal["listeners"]}}
            print(f"target ({res['executor']}): {row.strip()} p95, listeners / bare <= {bound:.1f}x -> "
                  f"{loaded:.2f} / {bare:.2f} ms = {ratio:.2f}x: {'MET' if ratio <= bound else 'NOT MET'} "
                  f"(VM steal {steal['bare']:.1f} / {steal['listeners']:.1f} %)")
    return {"tables": {v: {k.strip(): t[k] for k in t} for v, t in tables.items()}, "targets": targets,
            "listener_targets": listener_targets, "growth": grown, "steal_pct": steal, "gate": gate,
            "runs": {v: {k: x for k, x in r.items() if k != "measured"} for v, r in runs.items()}}


def report(res: dict[str, Any], stopped: dict[str, Any], *, workdir: Path) -> dict[str, Any]:
    """The table for one executor (its first variant in full, then the variants side by side); returns its JSON part."""
    m = res["measured"]
    a_parts: dict[str, dict[str, float]] = {
        "    main-thread CPU": _summary(m["a_cpu"]),
        "    in journal appends": _summary(m["a_journal"]),
        "      main-thread CPU in journal appends": _summary(m["a_journal_cpu"]),
        "    in snapshot capture": _summary(m["a_snapshot"]),
        "      main-thread CPU in snapshot capture": _summary(m["a_snapshot_cpu"]),
        **_gate_rows(m),
        "    rest (harness code, GIL, scheduling)": _summary(m["a_other"]),
    }
    b_parts: dict[str, dict[str, float]] = {
        "    main-thread CPU ": _summary(m["b_cpu"]),
        "    in journal appends ": _summary(m["b_journal"]),
        "    in snapshot captures ": _summary(m["b_snapshot"]),
        "    in the gate (probe + check) ": _summary(m["b_gate"]),
        "    rest (harness code, GIL, scheduling) ": _summary(m["b_other"]),
    }
    rows: dict[str, dict[str, float]] = {
        "(a) tool call -> goal sent": _summary(m["a"]),
        **a_parts,
        "(b) per turn, excl. planner + nav port": _summary(m["b"]),
        **b_parts,
        "harness send_goal -> accepted": _summary(m["accept_rt"]),
        "direct send_goal -> accepted (baseline)": _summary(res["direct"]),
        "direct capture service call (reference)": _summary(res["capture"]),
        "msg_to_snapshot conversion (reference)": _summary(res["conversion"]),
    }
    direct = rows["direct send_goal -> accepted (baseline)"]
    a = rows["(a) tool call -> goal sent"]
    print()
    print(f"=== {res['executor_label']}, {next(iter(res['variants']))} ===")
    print(f"actions sent {res['actions_sent']}, succeeded {res['actions_succeeded']}, model turns {res['turns']}, "
          f"mission {res['mission_status']} in {res['mission_wall_s']:.1f} s, {res['journal_events']} journal events; "
          f"per action in (a): {statistics.median(m['a_commits']):.0f} commits, "
          f"{statistics.median(m['a_captures']):.0f} capture; per turn in (b): {statistics.median(m['b_commits']):.0f} commits")
    cpu = res["cpu_pct_of_one_core"]
    print("CPU during the mission, % of one core: " + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items()))
    phase_steal = res["steal_pct"]
    mission_steal = cpu.get("VM steal", float("nan"))
    row_steal = {name: mission_steal for name in rows}
    row_steal["direct send_goal -> accepted (baseline)"] = phase_steal["direct"]
    row_steal["direct capture service call (reference)"] = phase_steal["capture"]
    row_steal["msg_to_snapshot conversion (reference)"] = phase_steal["conversion"]
    print()
    print(f"{'metric (ms)':44s} {'n':>5s} {'median':>8s} {'p95':>8s} {'max':>8s} {'steal %':>8s}")
    for name, s in rows.items():
        print(f"{name:44s} {s['n']:5d} {_fmt(s['median_ms'])} {_fmt(s['p95_ms'])} {_fmt(s['max_ms'])} "
              f"{row_steal[name]:8.1f}")
    print()
    ratios: dict[str, dict[str, float]] = {}
    for label, key in (("(a) / direct accept", "(a) tool call -> goal sent"),
                       ("(b) / direct accept", "(b) per turn, excl. planner + nav port"),
                       ("harness accept / direct accept", "harness send_goal -> accepted")):
        r = {q: rows[key][q] / direct[q] for q in ("median_ms", "p95_ms")}
        ratios[label] = r
        print(f"ratio {label:32s} median {r['median_ms']:6.2f}x   p95 {r['p95_ms']:6.2f}x")
    r = {q: rows[GATE_ROW][q] / a[q] if a[q] > 0 else float("nan") for q in ("median_ms", "p95_ms")}
    ratios["gate / (a)"] = r
    print(f"ratio {'gate / (a)':32s} median {r['median_ms']:6.2f}x   p95 {r['p95_ms']:6.2f}x")
    half = len(m["a"]) // 2
    drift = {"a_first_half": _summary(m["a"][:half])["median_ms"], "a_second_half": _summary(m["a"][half:])["median_ms"],
             "direct_before": _summary(res["direct_first"])["median_ms"],
             "direct_after": _summary(res["direct_second"])["median_ms"]}
    print(f"medians, first/second half: (a) {drift['a_first_half']:.2f} / {drift['a_second_half']:.2f} ms; "
          f"direct accept before/after the harness {drift['direct_before']:.2f} / {drift['direct_after']:.2f} ms "
          f"(VM steal {phase_steal['direct_first']:.1f} / {phase_steal['direct_second']:.1f} %)")
    jg = _summary(res["commit_under_graph"]["journal_append"])
    fg = _summary(res["commit_under_graph"]["raw_fsync"])
    j = _summary(stopped["journal_append"])
    f = _summary(stopped["raw_fsync"])
    fs = _fs_type(workdir)
    print()
    print(f"journal commit cost: {jg['n']} single-event appends to a fresh file on {fs} "
          f"(journal_mode={stopped['pragmas'].get('journal_mode')}, synchronous={stopped['pragmas'].get('synchronous')} = FULL)")
    cs, cg = stopped["steal_pct"], res["commit_under_graph"]["steal_pct"]
    print(f"  {'':46s} {'median':>8s} {'p95':>8s} {'steal %':>8s}")
    print(f"  {'SqliteJournal.append, everything stopped':46s} {_fmt(j['median_ms'])} {_fmt(j['p95_ms'])} "
          f"{cs['journal_append']:8.1f}")
    print(f"  {'SqliteJournal.append, executor + robot running':46s} {_fmt(jg['median_ms'])} {_fmt(jg['p95_ms'])} "
          f"{cg['journal_append']:8.1f}")
    print(f"  {'raw 4 KiB write+fsync, everything stopped':46s} {_fmt(f['median_ms'])} {_fmt(f['p95_ms'])} "
          f"{cs['raw_fsync']:8.1f}")
    print(f"  {'raw 4 KiB write+fsync, executor + robot running':46s} {_fmt(fg['median_ms'])} {_fmt(fg['p95_ms'])} "
          f"{cg['raw_fsync']:8.1f}")
    for line in sorted(set(res["not_succeeded"])):
        print(f"not succeeded ({res['not_succeeded'].count(line)}x): {line[:160]}")
    slow_h = sum(1 for v in m["accept_rt"] if v >= SLOW_ACCEPT_S)
    slow_d = sum(1 for v in res["direct"] if v >= SLOW_ACCEPT_S)
    res["slow_accepts"] = {"harness": slow_h, "direct": slow_d}
    if slow_h or slow_d or res["direct_cancel_timeouts"]:
        print(f"stalls: accept round trips >= {SLOW_ACCEPT_S:.0f} s: harness {slow_h}, direct {slow_d}; direct cancels "
              f"unanswered within {CANCEL_TIMEOUT_S:.0f} s: {res['direct_cancel_timeouts']}")
    print(f"uncorrelated backend events journaled: warm-up {res['warmup_uncorrelated_events']}, "
          f"measured mission {res['uncorrelated_events']}; goals listed in navigate_to_pose's status array: "
          f"{res['status_array_goals'][0]} at the mission's start, {res['status_array_goals'][1]} at its end")
    by_variant = report_variants(res)
    # The deployed supervisor carries the listeners: the target is judged with them when they ran.
    judged = "listeners" if "listeners" in by_variant["targets"] else next(iter(by_variant["targets"]))
    target = by_variant["targets"][judged]
    return {
        "executor": res["executor"], "executor_label": res["executor_label"],
        "target": {"a_p95_ms_below": TARGET_A_P95_MS, "a_p95_ms": target["a_p95_ms"], "met": target["met"],
                   "variant": judged, "applies_to": "(a), the per-action overhead: tool call -> goal sent"},
        "by_variant": by_variant,
        "rows": {k.strip(): v for k, v in rows.items() if not k.startswith("    ")},
        "parts": {"a": {k.strip(): v for k, v in a_parts.items()}, "b": {k.strip(): v for k, v in b_parts.items()}},
        "ratios": ratios, "drift": drift,
        "journal_commit": {"append_stopped": j, "raw_fsync_stopped": f, "append_running": jg,
                           "raw_fsync_running": fg, "pragmas": stopped["pragmas"], "fs": fs,
                           "steal_pct": {"stopped": cs, "running": cg}},
        "row_steal_pct": {k.strip(): v for k, v in row_steal.items()},
        **{k: v for k, v in res.items()
           if k not in ("measured", "direct", "direct_first", "direct_second", "capture", "conversion",
                        "commit_under_graph", "executor", "executor_label", "variants")},
    }


def compare(outs: dict[str, dict[str, Any]], primary: str) -> None:
    print()
    print(f"{'executor':44s} {'(a) med':>8s} {'(a) p95':>8s} {'steal %':>8s} {'dir med':>8s} {'dir p95':>8s} "
          f"{'steal %':>8s} {'(a)/dir p95':>12s}")
    for out in outs.values():
        a, d = out["rows"]["(a) tool call -> goal sent"], out["rows"]["direct send_goal -> accepted (baseline)"]
        st = out["row_steal_pct"]
        print(f"{out['executor_label']:44s} {_fmt(a['median_ms'])} {_fmt(a['p95_ms'])} "
              f"{st['(a) tool call -> goal sent']:8.1f} {_fmt(d['median_ms'])} {_fmt(d['p95_ms'])} "
              f"{st['direct send_goal -> accepted (baseline)']:8.1f} "
              f"{out['ratios']['(a) / direct accept']['p95_ms']:11.2f}x")
    print(f"default executor: {DEFAULT_EXECUTOR}; the target line and the top-level JSON refer to: {primary}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--actions", type=int, default=200, help="managed navigation actions to measure (default 200)")
    parser.add_argument("--executor", choices=(*EXECUTORS, "all"), default=DEFAULT_EXECUTOR,
                        help=f"what spins the bench node (default {DEFAULT_EXECUTOR}); 'all' runs each in turn "
                             "other against the same robot processes")
    parser.add_argument("--json", type=Path, default=None, help="also write the results to this JSON file")
    parser.add_argument("--commits", type=int, default=200, help="single-event journal appends for the commit cost (default 200)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the temporary journals and node logs go (default: the system temp dir); removed afterwards")
    parser.add_argument("--mission-timeout", type=float, default=150.0, help="bound on each mission, s (default 150)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is not met")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, in run order (default {','.join(VARIANTS)})")
    args = parser.parse_args(argv)
    require_loopback()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress before stderr noise
    if args.actions < 2:
        parser.error("--actions must be at least 2")
    if args.commits < 1:
        parser.error("--commits must be at least 1")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or any(v not in VARIANTS for v in variants) or len(set(variants)) != len(variants):
        parser.error(f"--variants: a comma-separated subset of {', '.join(VARIANTS)}, got {args.variants!r}")
    lib = _install_lib()
    if lib is None:
        parser.error("no lib/robot_harness/{sim_robot,snapshot_aggregator} under AMENT_PREFIX_PATH: "
                     "run `make setup` and `source scripts/env.sh`")
    kinds = list(EXECUTORS) if args.executor == "all" else [args.executor]
    if args.executor == "all":
        kinds.sort(key=lambda k: k != DEFAULT_EXECUTOR)
    primary = kinds[0]

    def _terminate(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _terminate)  # cleanup runs for SIGTERM as for Ctrl-C
    # Also when started in the background by a non-interactive shell, which
    # starts it with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    load = os.getloadavg()
    print(f"overhead bench: {args.actions} actions (+{WARMUP_ACTIONS} warm-up), executor {args.executor}, "
          f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}, RMW {os.environ.get('RMW_IMPLEMENTATION', '?')}, "
          f"load avg {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="rh-bench-overhead-", dir=args.workdir) as tmp:
        workdir = Path(tmp)
        n_steps = len(kinds) + 1
        robot_info: dict[str, dict[str, Any]] = {}
        for i, kind in enumerate(kinds):
            # Fresh robot processes per executor: each starts from the same
            # state (no goal history, full battery, start pose).
            robot = RobotProcesses(lib, workdir / kind)
            step = f"{i + 1}/{n_steps}"
            print(f"[{step}] {kind}: starting {', '.join(NODE_ARGS)} from {lib} ...", flush=True)
            try:
                robot.start()
                results[kind] = run_executor(kind, robot, workdir, args.actions, mission_timeout_s=args.mission_timeout,
                                             commits=args.commits, step=step, variants=variants)
            except BaseException:
                for exe in robot.procs:
                    tail = robot.log_tail(exe, lines=15)
                    if tail:
                        print(f"{exe} log (last lines):\n  " + tail.replace("\n", "\n  "), file=sys.stderr)
                raise
            finally:
                robot.stop()
            robot_info[kind] = {"commands": robot.commands, "exit_codes": robot.exit_codes,
                                "tracebacks": robot.tracebacks()}
        print(f"[{n_steps}/{n_steps}] journal commit cost, everything stopped ...", flush=True)
        stopped = journal_commit_costs(workdir, args.commits, name="commit-stopped")
        outs = {kind: report(res, stopped, workdir=workdir) for kind, res in results.items()}
    for kind, res in results.items():
        for variant, run in res["variants"].items():
            if run["actions_sent"] < args.actions or run["mission_status"] != "SUCCEEDED":
                print(f"WARNING ({kind}, {variant}): mission {run['mission_status']}: {run['mission_summary']}",
                      file=sys.stderr)
    for kind, info in robot_info.items():
        if info["tracebacks"]:
            print(f"WARNING ({kind}): Traceback in the log of {', '.join(info['tracebacks'])}", file=sys.stderr)
    if len(outs) > 1:
        compare(outs, primary)
    load_end = os.getloadavg()
    print(f"load avg at the end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f} (the bench itself adds about 1)")
    out = {**outs[primary], "primary_executor": primary, "default_executor": DEFAULT_EXECUTOR,
           "by_executor": outs, "robot_processes": robot_info, "load_avg_at_start": load,
           "load_avg_at_end": load_end, "cpus": os.cpu_count()}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2, sort_keys=True, default=str) + "\n")
        print(f"wrote {args.json}")
    if any(run["actions_sent"] < args.actions for res in results.values() for run in res["variants"].values()):
        return 2
    return 1 if args.strict and not out["target"]["met"] else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the finally blocks have stopped the robot processes
        print("interrupted", file=sys.stderr)
        sys.exit(130)
