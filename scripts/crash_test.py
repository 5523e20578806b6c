#!/usr/bin/env python3
"""Crash test: SIGKILL the supervisor, sim_robot or the verifier at random points
across many missions, restart it, and check what the durability promises say.

The graph runs as ``ros2 launch`` would run it: one process per node, the
installed executables, the shipped parameter files, loopback DDS. Each mission
is a round trip ("Go to spot, then return to dock.") with scripted model turns.
When the supervisor is killed, the client's answer is lost with it, so the
client does what a real one does: it sends the same mission id again to the
restarted supervisor.

Ground truth never comes from the harness: the simulator writes every goal it
receives, binds, and ends (with the robot's true pose) to its own JSON-lines
log, and this script records every journal event the supervisor published.

Reported (each must be 0):
  duplicate_physical_dispatches  a goal id the robot executed twice, or a motion
                                 no journaled dispatch intent accounts for
  committed_events_lost          a published (hence committed) event missing from
                                 the journal, or a gap in its sequence
  false_completions              a SUCCEEDED mission whose motions the robot did
                                 not really complete at their targets, or whose
                                 task the robot did not really do: truly at spot,
                                 then truly back at dock, and truly at dock when
                                 its last goal ended (the simulator's truth log)
  unreconciled                   a mission with no end record, or an action left
                                 non-terminal, after the run

Usage (after ``source scripts/env.sh``):
  python scripts/crash_test.py [--missions 100] [--seed 1] [--out DIR] [--schedule random|cycle]
Exit status: 0 when all four are 0, 1 otherwise, 2 on a set-up error.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config"
PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 1.5, "y": 0.5, "yaw": 0.0}}
GOAL = "Go to spot, then return to dock."
VICTIMS = ("supervisor", "sim_robot", "verifier")
NODES = ("sim_robot", "snapshot_aggregator", "planner", "verifier", "recovery", "supervisor")
TRUE_POSE_TOLERANCE_M = 0.35
GOAL_RESPONSE_TIMEOUT_S = 8.0


def loopback_problem() -> str:
    """Why DDS is not confined to the shipped loopback profile ('' when it is); as bench/_loopback.py."""
    value = os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE", "")
    shipped = CONFIG / "fastdds_loopback.xml"
    if not value:
        return "FASTDDS_DEFAULT_PROFILES_FILE is not set"
    path = Path(value)
    if not path.is_file():
        return f"FASTDDS_DEFAULT_PROFILES_FILE={value} is not a file"
    if path.resolve() != shipped.resolve() and path.read_bytes() != shipped.read_bytes():
        return f"FASTDDS_DEFAULT_PROFILES_FILE={value} is not the shipped loopback profile {shipped}"
    return ""


def install_lib() -> Path:
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        candidate = Path(prefix) / "lib" / "robot_harness"
        if (candidate / "supervisor").exists():
            return candidate
    raise SystemExit("robot_harness is not built/installed: run `make setup` and `source scripts/env.sh`")


class Graph:
    """The node processes, started, killed and restarted by name."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.lib = install_lib()
        self.procs: dict[str, subprocess.Popen] = {}
        self.restarts: collections.Counter[str] = collections.Counter()
        script = work / "turns.yaml"
        script.write_text(json.dumps({"turns": [
            {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]},
            {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]},
            {"done": "Back at the dock."},
        ]}))
        harness = work / "harness.json"
        harness.write_text(json.dumps({
            "places": PLACES,
            "navigation": {"timeout_s": 4.0, "timeout_per_m_s": 1.0, "accept_timeout_s": 2.0,
                           "lookup_timeout_s": 1.5, "cancel_timeout_s": 1.5},
            "limits": {"mission_timeout_s": 60.0},
        }))
        self.truth = work / "truth.jsonl"
        self.journal = work / "journal.sqlite3"
        self.params: dict[str, tuple[str, ...]] = {
            "sim_robot": ("autostart:=true", "speed:=3.0", f"truth_log_path:={self.truth}"),
            "snapshot_aggregator": ("autostart:=true",),
            "planner": ("autostart:=true", f"script_file:={script}"),
            "verifier": ("autostart:=true",),
            "recovery": ("autostart:=true",),
            "supervisor": ("autostart:=true", f"journal_path:={self.journal}", f"harness_config_file:={harness}",
                           "verifier_timeout_s:=4.0"),
        }

    def start(self, name: str) -> None:
        args = [str(self.lib / name), "--ros-args", "--params-file", str(CONFIG / f"{name}.yaml")]
        for p in self.params[name]:
            args += ["-p", p]
        log = open(self.work / f"{name}.log", "a")
        log.write(f"\n=== start {time.strftime('%H:%M:%S')} ===\n")
        log.flush()
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()

    def restart(self, name: str) -> None:
        self.kill(name)
        self.start(name)
        self.restarts[name] += 1

    def revive_dead(self) -> list[str]:
        """Restart any node that exited on its own (it should not; reported)."""
        dead = [n for n, p in self.procs.items() if p.poll() is not None]
        for n in dead:
            self.start(n)
        return dead

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class Client:
    """The operator's side: a Mission action client, a snapshot probe, and an event recorder."""

    def __init__(self, mission_prefix: str) -> None:
        import rclpy
        from rclpy.action import ActionClient
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, QoSReliabilityPolicy

        from robot_harness.action import Mission
        from robot_harness.msg import JournalEvent
        from robot_harness.nodes.executors import MultiThreadedExecutor
        from robot_harness.srv import CaptureSnapshot

        self.Mission = Mission
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.node = Node("crash_test_client", context=self.ctx)
        self.action = ActionClient(self.node, Mission, "/robot_harness/mission")
        self.capture = self.node.create_client(CaptureSnapshot, "/snapshot_aggregator/capture")
        self.CaptureSnapshot = CaptureSnapshot
        self.published: dict[int, str] = {}
        """seq -> event id of every event of this run's missions the supervisor published."""
        self.mission_prefix = mission_prefix
        self.foreign = 0
        """Events of missions not this run's: another graph on this domain (never assume you are alone)."""
        self._lock = threading.Lock()
        self.node.create_subscription(JournalEvent, "/supervisor/events", self._on_event,
                                      QoSProfile(depth=1000, reliability=QoSReliabilityPolicy.RELIABLE))
        self.executor = MultiThreadedExecutor(num_threads=2, context=self.ctx)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def _on_event(self, msg: Any) -> None:
        with self._lock:
            if not msg.mission_id.startswith(self.mission_prefix):
                self.foreign += 1
                return
            self.published[int(msg.seq)] = msg.event_id

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """The aggregator sees a fresh pose, an idle navigator and a battery reading, and the mission server is up."""
        from robot_harness.msg import FieldMeta

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.action.server_is_ready() and self.capture.service_is_ready():
                fut = self.capture.call_async(self.CaptureSnapshot.Request(reason="on_request"))
                if _wait(fut, 3.0) and fut.result().ok:
                    s = fut.result().snapshot
                    if s.controller_state == "idle" and all(
                            m.availability == FieldMeta.AVAILABLE for m in (s.pose_meta, s.navigation_meta, s.battery_meta)):
                        return
            time.sleep(0.2)
        raise TimeoutError("the graph did not become ready")

    def send(self, mission_id: str) -> Any:
        """The goal handle future."""
        return self.action.send_goal_async(self.Mission.Goal(goal=GOAL, mission_id=mission_id))

    def destroy(self) -> None:
        import rclpy

        self.executor.shutdown(timeout_sec=2.0)
        self._thread.join(timeout=5.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)


def _wait(future: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not future.done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return future.done()


def run_mission(graph: Graph, client: Client, mission_id: str, victim: str, kill_at: float) -> dict[str, Any]:
    row: dict[str, Any] = {"mission_id": mission_id, "victim": victim, "kill_at_s": round(kill_at, 3),
                           "killed": False, "repeated": False}
    t0 = time.monotonic()
    goal_future = client.send(mission_id)
    result_future = None

    def result_done() -> bool:
        nonlocal result_future
        if result_future is None and goal_future.done():
            handle = goal_future.result()
            if not handle.accepted:
                return True
            result_future = handle.get_result_async()
        return result_future is not None and result_future.done()

    if victim != "none":
        while time.monotonic() - t0 < kill_at and not result_done():
            time.sleep(0.01)
        if not result_done():
            graph.restart(victim)
            row["killed"] = True
            row["killed_after_s"] = round(time.monotonic() - t0, 3)
    if row["killed"] and victim == "supervisor":
        # The answer died with the supervisor: send the same mission id again.
        client.wait_ready()
        row["repeated"] = True
        goal_future, result_future = client.send(mission_id), None
    deadline = time.monotonic() + 120.0
    sent_at = time.monotonic()
    row["resends"] = 0
    while not result_done():
        if time.monotonic() > deadline:
            row.update(status="NO_ANSWER", summary="no result within 120 s")
            return row
        if not goal_future.done() and time.monotonic() - sent_at > GOAL_RESPONSE_TIMEOUT_S:
            # No acceptance (a request sent before discovery settled is lost): the
            # client retries with the same mission id, as a real one would.
            goal_future, result_future, sent_at = client.send(mission_id), None, time.monotonic()
            row["resends"] += 1
        time.sleep(0.02)
    if result_future is None:
        row.update(status="REFUSED", summary="the mission goal was refused")
    else:
        res = result_future.result().result
        row.update(status=res.status, summary=res.summary[:300])
    row["wall_s"] = round(time.monotonic() - t0, 3)
    return row


# ----------------------------------------------------------------- analysis


def read_truth(path: Path) -> tuple[dict[str, list[tuple[int, int]]], dict[tuple[int, int], list[dict[str, Any]]]]:
    """(goal id -> [(sim pid, goal index)], (pid, index) -> goal events), from the simulator's own log.

    Each event gets ``_line``, its place in the log: the log is appended in the order things happened,
    across sim restarts too, so it orders events of different processes."""
    bound: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    events: dict[tuple[int, int], list[dict[str, Any]]] = collections.defaultdict(list)
    pid = 0
    if not path.exists():
        return bound, events
    for n, line in enumerate(path.read_text().splitlines()):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line torn by SIGKILL
        kind = rec.get("kind")
        if kind == "sim_started":
            pid = int(rec["pid"])
        elif kind == "sim_goal_bound":
            bound[rec["goal_id"]].append((int(rec["pid"]), int(rec["goal_index"])))
        elif kind == "sim_goal_event":
            rec["_line"] = n
            events[(pid, int(rec["goal_index"]))].append(rec)
    return bound, events


def _truly_near(pose: dict[str, Any], place: str) -> bool:
    q = PLACES[place]
    return math.hypot(pose["x"] - q["x"], pose["y"] - q["y"]) <= TRUE_POSE_TOLERANCE_M


def task_unmet(goal_ids: list[str], bound: dict[str, list[tuple[int, int]]],
               truth_events: dict[tuple[int, int], list[dict[str, Any]]]) -> list[str]:
    """What of GOAL the robot did not really do, judged on the truth log's events for a mission's goals
    (every goal it dispatched, whatever the harness concluded about each): its true pose reached spot,
    then dock, and was at dock when the last of them ended. Empty: the task was really done.

    A sim_robot restart puts the robot back at its start (the dock); the log says so, and the order of
    its lines still tells whether spot came first."""
    evs = sorted((e for gid in goal_ids for key in bound.get(gid, []) for e in truth_events.get(key, [])),
                 key=lambda e: e["_line"])
    at_spot = next((k for k, e in enumerate(evs) if _truly_near(e["true_pose"], "spot")), None)
    unmet = []
    if at_spot is None:
        unmet.append("never truly at spot")
    elif not any(_truly_near(e["true_pose"], "dock") for e in evs[at_spot + 1:]):
        unmet.append("never truly back at dock after spot")
    if not evs or not _truly_near(evs[-1]["true_pose"], "dock"):
        last = evs[-1]["true_pose"] if evs else None
        unmet.append(f"not truly at dock at the end (last true pose {last})")
    return unmet


def analyse(graph: Graph, client: Client, rows: list[dict[str, Any]]) -> dict[str, Any]:
    import sqlite3

    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventType

    journal = SqliteJournal(graph.journal, clock=SystemClock(), ids=IdGenerator(None))
    journal.setup()
    try:
        events = journal.events()
        open_missions = journal.open_missions()
        leases = journal.leases()
        intents: dict[str, dict[str, Any]] = {}
        for ev in events:
            if ev.type is EventType.ROBOT_ACTION_STARTED:
                d = ev.payload.get("dispatch") or {}
                intents[d.get("goal_id", "")] = {"mission_id": ev.mission_id, "action_id": ev.robot_action_id,
                                                 "target": ev.payload["intent"]["target"]}
        missions = {}
        started = collections.Counter(ev.mission_id for ev in events if ev.type is EventType.MISSION_STARTED)
        for ev in events:
            if ev.type is EventType.MISSION_FINISHED:
                missions[ev.mission_id] = ev.payload.get("status")
        action_state: dict[str, str] = {}
        for ev in events:
            if ev.type is EventType.ROBOT_ACTION_STARTED:
                action_state[ev.robot_action_id] = "REQUESTED"
            elif ev.type is EventType.ROBOT_ACTION_STATE_CHANGED:
                action_state[ev.robot_action_id] = ev.payload["to"]
        seqs = [ev.seq for ev in events]
        by_seq = {ev.seq: ev.event_id for ev in events}
    finally:
        journal.close()
    db = sqlite3.connect(graph.journal)
    integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    db.close()

    bound, truth_events = read_truth(graph.truth)
    duplicate = sum(len(v) - 1 for v in bound.values() if len(v) > 1)
    unjournaled = [gid for gid in bound if gid not in intents]

    def reached(goal_id: str) -> bool:
        for key in bound.get(goal_id, []):
            for e in truth_events.get(key, []):
                if e.get("event") == "succeeded":
                    p, t = e["true_pose"], e["target"]
                    if math.hypot(p["x"] - t["x"], p["y"] - t["y"]) <= TRUE_POSE_TOLERANCE_M:
                        return True
        return False

    false_completions: list[dict[str, Any]] = []
    for mission_id, status in missions.items():
        if status != "SUCCEEDED":
            continue
        dispatched = [gid for gid, i in intents.items() if i["mission_id"] == mission_id]
        goals = [gid for gid in dispatched if action_state.get(intents[gid]["action_id"]) == "SUCCEEDED"]
        unmet = [f"action goal {g} not truly reached" for g in goals if not reached(g)]
        if not goals:
            unmet.append("no SUCCEEDED action")
        unmet += task_unmet(dispatched, bound, truth_events)
        if unmet:
            false_completions.append({"mission_id": mission_id, "unmet": unmet})
    with client._lock:  # noqa: SLF001
        published = dict(client.published)
    lost = [s for s, eid in published.items() if by_seq.get(s) != eid]
    gaps = len(seqs) != (seqs[-1] if seqs else 0)
    non_terminal = [a for a, st in action_state.items() if st not in ("SUCCEEDED", "FAILED", "UNKNOWN")]
    unreconciled = sorted(set(open_missions) | {r["mission_id"] for r in rows if r.get("status") == "NO_ANSWER"})
    return {
        "missions": len(rows),
        "kills": dict(collections.Counter(r["victim"] for r in rows if r["killed"])),
        "repeated_requests": sum(r["repeated"] for r in rows),
        "client_resends": sum(r.get("resends", 0) for r in rows),
        "status": dict(collections.Counter(r.get("status") for r in rows)),
        "duplicate_physical_dispatches": duplicate + len(unjournaled),
        "unjournaled_motions": unjournaled,
        "committed_events_lost": len(lost) + int(gaps),
        "events_published_seen": len(published),
        "foreign_events_ignored": client.foreign,
        "journal_events": len(seqs),
        "journal_integrity": integrity,
        "false_completions": len(false_completions),
        "false_completion_missions": false_completions,
        "succeeded_missions_adjudicated": sum(1 for st in missions.values() if st == "SUCCEEDED"),
        "unreconciled": len(unreconciled) + len(non_terminal),
        "unreconciled_missions": unreconciled,
        "non_terminal_actions": non_terminal,
        "missions_started_twice": [m for m, n in started.items() if n > 1],
        "robot_motions": sum(len(v) for v in bound.values()),
        "leases_in_force_at_end": {r: lease.model_dump(mode="json") for r, lease in leases.items()},
        "restarts": dict(graph.restarts),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--missions", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="report and logs folder (default: a temp folder)")
    ap.add_argument("--schedule", choices=("random", "cycle"), default="random",
                    help="random: a victim (or none) per mission with random kill times; "
                         "cycle: supervisor, sim_robot, verifier, none in turn")
    ap.add_argument("--max-kill-s", type=float, default=4.0, help="kill within this many seconds of sending")
    args = ap.parse_args(argv)
    problem = loopback_problem()
    if problem:
        print(f"{problem}: run under `source scripts/env.sh` (loopback-only DDS profile)", file=sys.stderr)
        return 2
    work = args.out or Path(tempfile.mkdtemp(prefix="robot_harness-crash-"))
    if (work / "journal.sqlite3").exists() or (work / "truth.jsonl").exists():
        # Its missions would meet the old run's records as repeated requests and nothing would run.
        print(f"{work} holds an earlier run (journal.sqlite3 / truth.jsonl): give an empty or new --out",
              file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    graph = Graph(work)
    for name in NODES:
        graph.start(name)
    # A token of this run's own in every mission id: the events of a graph another run left on this
    # domain are told apart, not taken for this journal's (never assume you are alone).
    prefix = f"crash-{args.seed}-{secrets.token_hex(3)}-"
    client = Client(prefix)
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        for i in range(args.missions):
            client.wait_ready()
            revived = graph.revive_dead()
            if args.schedule == "cycle":
                victim = (*VICTIMS, "none")[i % 4]
            else:
                victim = rng.choices(("none", *VICTIMS), weights=(25, 35, 20, 20))[0]
            kill_at = rng.uniform(0.0, args.max_kill_s)
            row = run_mission(graph, client, f"{prefix}{i:03d}", victim, kill_at)
            if revived:
                row["revived_unexpectedly"] = revived
            rows.append(row)
            print(f"[{i + 1}/{args.missions}] {row['mission_id']} victim={victim} "
                  f"killed={row['killed']} -> {row.get('status')}", flush=True)
        client.wait_ready()
        time.sleep(1.0)  # the last events reach the recorder
    finally:
        report_wall = time.monotonic() - started
        graph.stop()
    report = analyse(graph, client, rows)
    client.destroy()
    report["wall_s"] = round(report_wall, 1)
    report["work_dir"] = str(work)
    (work / "missions.json").write_text(json.dumps(rows, indent=1))
    (work / "report.json").write_text(json.dumps(report, indent=1))
    keys = ("duplicate_physical_dispatches", "committed_events_lost", "false_completions", "unreconciled")
    print(json.dumps({k: report[k] for k in ("missions", "kills", "repeated_requests", "status", "robot_motions",
                                             "journal_events", "journal_integrity", "wall_s", *keys)}, indent=1))
    print(f"report: {work / 'report.json'}")
    ok = all(report[k] == 0 for k in keys) and report["journal_integrity"] == "ok" \
        and not report["missions_started_twice"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
