#!/usr/bin/env python3
"""One robot's harness (or one journal writer) per process, for bench/fleet.py.

Each subcommand opens its own journal object on the shared target (a SQLite file or a
``postgresql://`` URL) under its ``--robot`` id, as a robot's supervisor process does, and talks
to the parent in lines on stdout (flushed at once, so a SIGKILL loses none that were printed):

* ``append``: replays ``--batches`` (the append calls of one real mission, recorded by
  ``harvest``) ``--missions`` times, every id fresh per copy, each call timed; ``lease``: acquires
  and releases one site resource ``--cycles`` times, retrying on ``LeaseConflict``. Both print
  ``ready``, wait for ``go`` on stdin (so every writer starts together) and write their timings
  to ``--out`` (JSON) before printing ``done``.
* ``robot``: the real ``MissionRunner`` in-process on the simulated robot, paced to the wall clock
  (``WallSimPorts``), writing the shared journal. It first reconciles the robot's open missions
  (``runner.reconciler.reconcile_open_missions()``, as the supervisor does at activation), prints
  ``reconciled N``, then runs missions until it is killed: to the elevator, then to the lab, and
  back (to the elevator, then the dock), the direction chosen by where the robot is. Every
  ``(seq, event_id)`` an ``append`` returned goes to ``<robot>.committed`` in ``--dir`` (fsynced
  before ``append`` returns); the robot's true pose to ``<robot>.pose`` (the robot outlives its
  harness: a restart finds it where it stopped); ``started``/``finished`` lines as missions begin
  and end. ``--reconcile-only``: reconcile and exit.

``harvest`` (imported by bench/fleet.py, not a subcommand): one mission's append calls.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": math.pi / 2}, "elevator": {"x": 1.5, "y": 0.0, "yaw": math.pi / 2},
          "lab": {"x": 3.0, "y": 0.0, "yaw": math.pi / 2}}
"""On one line, the elevator between the dock and the lab: every mission passes through it. Every place
faces across the line, so a leg is a quarter turn, 1.5 m and a quarter turn whichever way it goes."""
RESOURCE = "elevator_1"
SITE = {"resources": {RESOURCE: {"places": ["elevator"], "radius_m": 1.0}}, "lease_wait_s": 30.0, "poll_s": 0.2}
SPEED = 1.5
"""m/s: a leg of 1.5 m takes about a second, a mission (two legs, the checks, the verdict) a few."""
YAW_RATE = 4.0
"""rad/s: the quarter turn at each end of a leg takes 0.4 s."""
HARNESS: dict[str, Any] = {
    "frame_id": "map", "places": PLACES, "site": SITE,
    "navigation": {"timeout_s": 30.0},
    "limits": {"mission_timeout_s": 120.0},
}
STARTS = {"robot1": "dock", "robot2": "lab"}
"""Where each robot stands at its first start: they meet at the elevator from both sides."""
_ID = re.compile(r"\b([a-z]+)-([0-9a-f]{12})\b")
_UUID = re.compile(r"\b[0-9a-f]{32}\b")


def _say(*words: Any) -> None:
    print(*words, flush=True)


def _turns(there: str) -> list[Any]:
    from robot_harness.core.planner_script import ScriptTurn

    return [ScriptTurn.model_validate(t) for t in (
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "elevator"}}]},
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": there}}]},
        {"done": f"Through the elevator and at the {there}."})]


class _Script:
    """The planner: each mission's scripted turns (a ``ScriptedPlanner`` per mission)."""

    name = "scripted"

    def __init__(self) -> None:
        self.calls = 0
        self.current: Any = None

    def mission(self, there: str) -> None:
        from robot_harness.core.planner_script import ScriptedPlanner

        self.current = ScriptedPlanner(_turns(there))

    def next_turn(self, request: Any) -> Any:
        self.calls += 1
        return self.current.next_turn(request)


def _goal(there: str) -> str:
    return f"Go to the elevator, then go to the {there}."


# --------------------------------------------------------------------------- the simulated robot on the wall clock


def wall_sim_ports(start: dict[str, float], artifacts: Path, pose_file: Path | None) -> Any:
    """``SimPorts`` whose virtual clock follows the wall clock: every robot's harness in the fleet, and every
    restart of one, stamps and times on one timeline (lease expiries, waits for another robot's lease).

    The in-process sim has no time scale: its clock starts at a fixed epoch and moves only when the harness
    waits, as fast as the CPU allows. Here a wait really waits, and the world first catches up with the time
    the harness spent computing (a robot moves on while its harness thinks). Its clock starts at the wall
    time: ``SimPorts`` has no parameter for that, so the module's ``_EPOCH`` is set before it is built."""
    from robot_harness.eval import simports
    from robot_harness.core.clock import IdGenerator
    from robot_harness.sim.world import SimConfig

    class WallSimPorts(simports.SimPorts):
        def advance(self, dt: float) -> None:
            target = max(self.clock.now() + max(dt, 0.0), time.time())
            super().advance(target - self.clock.now())
            ahead = self.clock.now() - time.time()
            if ahead > 0:
                time.sleep(ahead)
            if pose_file is not None and self.clock.now() - self._saved >= 0.1:
                p = self.world.true_pose
                tmp = pose_file.with_suffix(".tmp")
                tmp.write_text(json.dumps({"x": p.x, "y": p.y, "yaw": p.yaw}))
                os.replace(tmp, pose_file)
                self._saved = self.clock.now()

    simports._EPOCH = time.time()
    config = SimConfig.from_data({"start": start, "speed": SPEED, "yaw_rate": YAW_RATE, "pose_rate_hz": 20.0,
                                  "odom_rate_hz": 50.0, "battery_start": 0.9, "camera_rate_hz": 2.0})
    ports = WallSimPorts(config=config, artifacts_dir=artifacts)
    ports._saved = -math.inf  # type: ignore[attr-defined]
    ports.ids = IdGenerator(None)  # snapshot and goal ids unique across restarts, in one database
    return ports


def _runner(config: Any, journal: Any, ports: Any, planner: Any, clock: Any) -> Any:
    from robot_harness.compose import mission_runner
    from robot_harness.core.clock import IdGenerator
    from robot_harness.core.memory import MemoryStore
    from robot_harness.core.skills import default_skills

    return mission_runner(config=config, journal=journal, clock=clock, ids=IdGenerator(None),
                          memory=MemoryStore(journal),
                          skills=default_skills(config.navigation, ask_operator=config.interactions.ask_operator),
                          snapshots=ports, planner=planner, navigation=ports, robot_io=ports, sleep=ports.sleep,
                          feasibility=ports)


def _record_commits(journal: Any, path: Path) -> None:
    """Every ``(seq, event_id)`` an append returned, fsynced to ``path`` before the append returns."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    inner = journal.append

    def append(drafts: Any, **kw: Any) -> Any:
        events = inner(drafts, **kw)
        if events:
            os.write(fd, "".join(f"{e.seq} {e.event_id}\n" for e in events).encode())
            os.fsync(fd)
        return events

    journal.append = append


def robot(args: argparse.Namespace) -> int:
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.config import load_harness_config
    from robot_harness.core.journal import open_journal
    from robot_harness.core.records import EventType

    workdir = Path(args.dir)
    pose_file = workdir / f"{args.robot}.pose"
    start = json.loads(pose_file.read_text()) if pose_file.exists() else dict(PLACES[STARTS[args.robot]])
    ports = wall_sim_ports(start, workdir / f"{args.robot}-artifacts", pose_file)
    # The journal stamps on the wall clock, as the supervisor's does (the sim's follows it).
    journal = open_journal(args.url, clock=SystemClock(), ids=IdGenerator(None), robot_id=args.robot)
    _record_commits(journal, workdir / f"{args.robot}.committed")

    def tell(events: list[Any]) -> None:
        for e in events:
            if e.type is EventType.MISSION_STARTED:
                _say("started", e.mission_id, f"{time.time():.3f}")
            elif e.type is EventType.MISSION_FINISHED:
                _say("finished", e.mission_id, e.payload.get("status", ""), f"{time.time():.3f}")

    journal.subscribe(tell)
    config = load_harness_config(overrides=HARNESS)
    planner = _Script()
    runner = _runner(config, journal, ports, planner, ports.clock)
    t0 = time.perf_counter()
    settled = runner.reconciler.reconcile_open_missions()
    _say("reconciled", len(settled), f"{time.perf_counter() - t0:.3f}")
    if args.reconcile_only:
        journal.close()
        return 0
    ex = PLACES["elevator"]["x"]
    while True:
        there = "lab" if ports.world.true_pose.x < ex else "dock"
        planner.mission(there)
        runner.run(_goal(there))


# --------------------------------------------------------------------------- one mission's append calls


def harvest(workdir: Path) -> list[dict[str, Any]]:
    """The append calls of one real mission (to the elevator, then the lab; no site resource, so copies
    of it never contend for one), as the runner made them: per call, its events (as stored) and the
    ``expected_revision`` it was checked against. On virtual time, in a ``MemoryJournal``."""
    from robot_harness.core.clock import IdGenerator
    from robot_harness.core.config import load_harness_config
    from robot_harness.core.journal import MemoryJournal
    from robot_harness.eval.simports import SimPorts
    from robot_harness.sim.world import SimConfig

    ports = SimPorts(config=SimConfig.from_data({"start": PLACES["dock"], "speed": SPEED, "yaw_rate": YAW_RATE}),
                     artifacts_dir=workdir / "harvest-artifacts")
    journal = MemoryJournal(clock=ports.clock, ids=IdGenerator(7))
    journal.setup()
    calls: list[dict[str, Any]] = []
    inner = journal.append

    def append(drafts: Any, *, expected_last_seq: int | None = None, expected_revision: int | None = None) -> Any:
        events = inner(drafts, expected_last_seq=expected_last_seq, expected_revision=expected_revision)
        calls.append({"expected_revision": expected_revision,
                      "events": [e.model_dump(mode="json", include={"type", "mission_id", "model_turn_id",
                                                                     "tool_call_id", "robot_action_id",
                                                                     "snapshot_id", "payload"}) for e in events]})
        return events

    journal.append = append  # type: ignore[method-assign]
    config = load_harness_config(overrides={k: v for k, v in HARNESS.items() if k != "site"})
    planner = _Script()
    planner.mission("lab")
    out = _runner(config, journal, ports, planner, ports.clock).run(_goal("lab"))
    if out.status.value != "SUCCEEDED":
        raise RuntimeError(f"the template mission ended {out.status.value}: {out.summary}")
    return calls


def _fresh(batches: list[dict[str, Any]], rng: random.Random) -> list[tuple[list[Any], int | None]]:
    """A copy of a recorded mission with every id (``prefix-<12 hex>``, 32-hex goal ids) new."""
    from robot_harness.core.records import EventDraft

    ids: dict[str, str] = {}

    def new_id(m: re.Match[str]) -> str:
        return ids.setdefault(m.group(0), f"{m.group(1)}-{rng.getrandbits(48):012x}")

    def new_uuid(m: re.Match[str]) -> str:
        return ids.setdefault(m.group(0), uuid.UUID(int=rng.getrandbits(128)).hex)

    out = []
    for call in batches:
        text = _UUID.sub(new_uuid, _ID.sub(new_id, json.dumps(call["events"])))
        out.append(([EventDraft.model_validate(e) for e in json.loads(text)], call["expected_revision"]))
    return out


def _open(target: str, robot_id: str) -> Any:
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import open_journal

    return open_journal(target, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot_id)


def _wait_go() -> None:
    _say("ready")
    line = sys.stdin.readline()
    if line.strip() != "go":
        raise SystemExit(f"expected 'go' on stdin, got {line!r}")


def append(args: argparse.Namespace) -> int:
    batches = json.loads(Path(args.batches).read_text())
    rng = random.Random(args.seed)
    copies = [_fresh(batches, rng) for _ in range(args.missions)]  # made before the clock starts
    journal = _open(args.target, args.robot)
    _wait_go()
    latencies: list[float] = []
    sizes: list[int] = []
    cpu = time.process_time()
    started = time.time()
    for copy in copies:
        for drafts, revision in copy:
            t0 = time.perf_counter()
            journal.append(drafts, expected_revision=revision)
            latencies.append(time.perf_counter() - t0)
            sizes.append(len(drafts))
    ended = time.time()
    cpu = time.process_time() - cpu
    journal.close()
    Path(args.out).write_text(json.dumps({"robot": args.robot, "started": started, "ended": ended, "cpu_s": cpu,
                                          "latencies_s": latencies, "sizes": sizes}))
    _say("done")
    return 0


def lease(args: argparse.Namespace) -> int:
    from robot_harness.core.durable import SITE as SITE_SCOPE, LeaseConflict
    from robot_harness.core.records import EventDraft, EventType

    journal = _open(args.target, args.robot)
    mission = f"mission-{random.getrandbits(48):012x}"
    journal.append([EventDraft(type=EventType.MISSION_STARTED, mission_id=mission,
                               payload={"goal": "lease bench"})])
    _wait_go()
    acquire_s: list[float] = []
    """Each acquiring append that won."""
    refused_s: list[float] = []
    """Each acquiring append refused (``LeaseConflict``: checked, nothing written)."""
    release_s: list[float] = []
    until_held_s: list[float] = []
    """From the first attempt to the lease held, retries and pauses included."""
    conflicts = 0
    started = time.time()
    for k in range(args.cycles):
        owner = f"act-{random.getrandbits(48):012x}"
        first = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            try:
                (ev,) = journal.append([EventDraft(type=EventType.LEASE_ACQUIRED, mission_id=mission, payload={
                    "resource": RESOURCE, "owner": owner, "scope": SITE_SCOPE, "skill": "navigate_to",
                    "expires_at": round(time.time() + 60.0, 3)})])
                acquire_s.append(time.perf_counter() - t0)
                break
            except LeaseConflict:
                refused_s.append(time.perf_counter() - t0)
                conflicts += 1
                time.sleep(args.retry_s)
        until_held_s.append(time.perf_counter() - first)
        time.sleep(args.hold_s)
        t0 = time.perf_counter()
        journal.append([EventDraft(type=EventType.LEASE_RELEASED, mission_id=mission, payload={
            "resource": RESOURCE, "owner": owner, "scope": SITE_SCOPE, "fence": ev.seq,
            "why": "confirmed_terminal", "detail": "lease bench"})])
        release_s.append(time.perf_counter() - t0)
        time.sleep(args.retry_s)  # give the others a chance, as a robot leaving the elevator does
    ended = time.time()
    journal.append([EventDraft(type=EventType.MISSION_FINISHED, mission_id=mission,
                               payload={"status": "SUCCEEDED", "summary": "lease bench"})])
    journal.close()
    Path(args.out).write_text(json.dumps({"robot": args.robot, "started": started, "ended": ended,
                                          "acquire_s": acquire_s, "refused_s": refused_s, "release_s": release_s,
                                          "until_held_s": until_held_s, "conflicts": conflicts}))
    _say("done")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("append")
    a.add_argument("--target", required=True)
    a.add_argument("--robot", required=True)
    a.add_argument("--batches", required=True)
    a.add_argument("--missions", type=int, required=True)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--out", required=True)
    b = sub.add_parser("lease")
    b.add_argument("--target", required=True)
    b.add_argument("--robot", required=True)
    b.add_argument("--cycles", type=int, required=True)
    b.add_argument("--hold-s", type=float, default=0.01)
    b.add_argument("--retry-s", type=float, default=0.01)
    b.add_argument("--out", required=True)
    r = sub.add_parser("robot")
    r.add_argument("--url", required=True)
    r.add_argument("--robot", required=True, choices=sorted(STARTS))
    r.add_argument("--dir", required=True)
    r.add_argument("--reconcile-only", action="store_true")
    args = parser.parse_args(argv)
    return {"append": append, "lease": lease, "robot": robot}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
