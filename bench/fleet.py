#!/usr/bin/env python3
"""A fleet on one journal database (issue 19): what PostgreSQL costs against SQLite, what contention does to
site leases, and whether killing robots' harnesses at random ever breaks the fleet's invariants.

Every run starts a throw-away PostgreSQL server of its own (``robot_harness.pgserver``, fsync ON, the default
``synchronous_commit=on``) and a temp dir, and removes both. Every writer is a process of its own
(``bench/_fleet_worker.py``) with its own journal object under its robot id, as a robot's supervisor is.

1. **Journal append + commit**, PostgreSQL against SQLite (the baseline: WAL, ``synchronous=FULL``, a commit
   fsynced), 1 robot and 4 robots writing one database (one file) at once. Each writer replays the append
   calls of one real mission (recorded in-process by the real ``MissionRunner``: its mix of 1- to 7-event
   appends, a snapshot in every few, ~1.1 KB per event), every id fresh per copy, so each append goes through
   the durable index's checks (revisions, dispatch keys, the robot's own leases) as the runner's do. Events/s
   is all writers' events over the wall time from the first start to the last end; latency is per append call.
2. **Site lease acquire / release** under contention: 4 robots taking one site resource (``elevator_1``) in
   turn, retrying on ``LeaseConflict`` (after ``RETRY_S``), holding it ``HOLD_S``, releasing it with its
   fencing token; against 1 robot alone (the baseline); both backends. Per append call (a refused acquire is
   one too), and the time from the first attempt to the lease held.
3. **Kill loop**: two robots sharing the elevator. Each is a worker process running real missions with the
   real ``MissionRunner`` in-process against the simulated robot (no ROS), paced to the wall clock, writing the
   shared PostgreSQL journal as robot1 / robot2: places dock, elevator, lab on one line, the site resource
   ``elevator_1`` on the elevator; each mission goes to the elevator, then to the lab (or, back, to the dock),
   then proposes done (a scripted planner). The parent picks a robot at random, lets it start 1 or 2 more
   missions, SIGKILLs it at a moment uniform over a mission's duration (the median of the missions finished so
   far) and restarts it; a restart reconciles that robot's open missions first
   (``runner.reconciler.reconcile_open_missions()``, as the supervisor does at activation). Once ``--missions``
   have started both are killed, restarted to reconcile, and the database is checked:

   * double holders of ``elevator_1``: LEASE_ACQUIRED / LEASE_RELEASED replayed in seq order, an acquisition
     while someone holds it (0);
   * dispatches on a stale fencing token: a ROBOT_ACTION_STARTED whose ``dispatch.resources`` names
     ``elevator_1`` while the lease, after its commit (the events of one append: consecutive seqs, one robot,
     one stamp), is not its robot's with this action as owner (0);
   * lost committed events: every ``(seq, event_id)`` an ``append`` returned in a worker (fsynced to a side
     file before ``append`` returned) that the database does not hold (0);
   * missions left open after the final restart of both robots (0).

What the in-process path is not: a ``robot-harness up`` graph (no ROS supervisor node, no lifecycle, no DDS,
no ``sim_robot`` process). Killing a worker kills its simulated robot with it: its goal ends, and the restarted
robot stands where it stopped (its true pose is kept in a side file), its navigator idle. A robot whose Nav2
outlives the harness (a goal still running at restart) is the ROS integration test's case, not this one.

    python bench/fleet.py                    # ~3-4 min: 50 missions in the kill loop
    python bench/fleet.py --quick            # ~40 s smoke run
    python bench/fleet.py --missions 100 --out /tmp/fleet.json

Exit 1 when any of the kill loop's four counts is not 0; 2 when the bench itself could not run (a worker that
crashed, PostgreSQL missing).
"""
from __future__ import annotations

import sys
from pathlib import Path

from _fleet_worker import RESOURCE, SITE, STARTS, harvest  # bench/_fleet_worker.py: the worker processes
from _loopback import require_loopback  # bench/_loopback.py (the script's own folder)

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import argparse
import contextlib
import ctypes
import json
import os
import queue
import random
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

WORKER = Path(__file__).resolve().parent / "_fleet_worker.py"
SITE_WAIT_S = float(SITE["lease_wait_s"])
ROBOTS = tuple(STARTS)
FLEET = 4
HOLD_S = 0.01
"""How long a lease bench writer holds the resource before releasing it."""
RETRY_S = 0.01
"""Its pause after a refused acquisition (and after each release, so the others get a turn)."""
READY_TIMEOUT_S = 90.0
"""Bound on a worker coming up (imports and the journal opened, on a loaded 2-core machine)."""
RUN_TIMEOUT_S = 600.0
MISSION_GUESS_S = 5.0
"""The kill window until a mission has finished to measure one by."""
MISSION_WAIT_S = 240.0
"""Bound on waiting for a robot's next mission (two mission timeouts)."""
FULL = {"append_missions": 20, "lease_cycles": 200, "missions": 50}
QUICK = {"append_missions": 2, "lease_cycles": 20, "missions": 8}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _ms(values: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(values) * 1e3, 3) if values else float("nan"),
            "p95_ms": round(_pct(values, 0.95) * 1e3, 3), "n": len(values)}


def _steal() -> tuple[float, float]:
    """(steal, total) jiffies from /proc/stat: the host's share taken from this VM."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    return (fields[7] if len(fields) > 7 else 0.0), sum(fields)


def _steal_since(start: tuple[float, float]) -> float:
    """VM steal since ``start``, in % of one core."""
    now = _steal()
    total = now[1] - start[1]
    return round(100.0 * (now[0] - start[0]) / total * (os.cpu_count() or 1), 1) if total > 0 else 0.0


# --------------------------------------------------------------------------- worker processes


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the bench dies (PR_SET_PDEATHSIG), whatever killed it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


@dataclass
class Worker:
    """One worker process: its stdout lines arrive on ``lines`` (with their arrival time), stderr goes to a log."""

    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[str] | None = None
    lines: queue.Queue[tuple[float, str]] = field(default_factory=queue.Queue)
    killed: bool = False

    def start(self) -> "Worker":
        with self.log.open("a") as err:
            self.proc = subprocess.Popen([sys.executable, str(WORKER), *self.argv], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
                                         cwd=_ROOT, preexec_fn=_die_with_parent)
        self.killed = False
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.put((time.time(), line.strip()))
        self.lines.put((time.time(), "<eof>"))

    def expect(self, word: str, timeout_s: float) -> str:
        """The next line starting with ``word`` (other lines are dropped); WorkerFailed on eof or timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                _, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise WorkerFailed(self, f"no {word!r} within {timeout_s:.0f} s") from None
            if line == "<eof>":
                raise WorkerFailed(self, f"exited before {word!r}")
            if line.split(" ", 1)[0] == word:
                return line

    def send(self, text: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.killed = True
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def wait(self, timeout_s: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise WorkerFailed(self, f"still running after {timeout_s:.0f} s") from None

    def tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class WorkerFailed(RuntimeError):
    def __init__(self, worker: Worker, what: str) -> None:
        code = worker.proc.poll() if worker.proc is not None else None
        super().__init__(f"worker {worker.name}: {what} (exit {code}); its stderr ends:\n  "
                         + worker.tail().replace("\n", "\n  "))


def _together(workers: list[Worker], timeout_s: float = RUN_TIMEOUT_S) -> list[dict[str, Any]]:
    """Start ``workers``, wait until each is ready, let them go at once, collect what each wrote."""
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.expect("ready", READY_TIMEOUT_S)
        for w in workers:
            w.send("go")
        for w in workers:
            w.expect("done", timeout_s)
            w.wait(30)
        return [json.loads(Path(w.argv[w.argv.index("--out") + 1]).read_text()) for w in workers]
    finally:
        for w in workers:
            w.kill()


# --------------------------------------------------------------------------- 1 and 2: appends and leases


def _target(kind: str, name: str, server: Any, tmp: Path) -> str:
    """A fresh database or file, its schema set up here, before any worker opens it, so the workers'
    timings hold appends only, never a first setup."""
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import open_journal

    target = server.create_database(name) if kind == "postgresql" else str(tmp / f"{name}.sqlite3")
    open_journal(target, clock=SystemClock(), ids=IdGenerator(None)).close()
    return target


def _durability(kind: str, target: str) -> str:
    """What the backend's commit promises, read from the backend itself."""
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import open_journal

    if kind == "postgresql":
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            got = {k: conn.execute(f"SHOW {k}").fetchone()[0] for k in ("fsync", "synchronous_commit",
                                                                          "wal_sync_method")}
        return ", ".join(f"{k}={v}" for k, v in got.items())
    j = open_journal(target, clock=SystemClock(), ids=IdGenerator(None))
    try:
        p = j.pragmas()  # type: ignore[attr-defined]
    finally:
        j.close()
    return f"journal_mode={p.get('journal_mode')}, synchronous={p.get('synchronous')} (2 = FULL)"


def appends(server: Any, tmp: Path, batches: Path, missions: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for robots in (1, FLEET):
        for kind in ("sqlite", "postgresql"):  # interleaved, so load drift lands on both
            name = f"append_{kind[:2]}_{robots}"
            target = _target(kind, name, server, tmp)
            if robots == 1:
                out.setdefault("durability", {})[kind] = _durability(kind, target)
            steal = _steal()
            workers = [Worker(f"{name}-robot{k}", ["append", "--target", target, "--robot", f"robot{k}",
                                                    "--batches", str(batches), "--missions", str(missions),
                                                    "--seed", str(k), "--out", str(tmp / f"{name}-{k}.json")],
                              tmp / f"{name}-{k}.log") for k in range(1, robots + 1)]
            res = _together(workers)
            events = sum(sum(r["sizes"]) for r in res)
            wall = max(r["ended"] for r in res) - min(r["started"] for r in res)
            lat = [x for r in res for x in r["latencies_s"]]
            out[f"{kind}_{robots}"] = {"robots": robots, "events": events, "appends": len(lat),
                                       "wall_s": round(wall, 3), "events_per_s": round(events / wall, 1),
                                       "append": _ms(lat), "steal_pct": _steal_since(steal),
                                       "writer_cpu_ms_per_append": round(1e3 * sum(r["cpu_s"] for r in res) / len(lat), 3)}
            print(f"    {kind:10s} {robots} robot(s): {events} events in {len(lat)} appends, {wall:.2f} s", flush=True)
    return out


def leases(server: Any, tmp: Path, cycles: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for robots in (1, FLEET):
        for kind in ("sqlite", "postgresql"):
            name = f"lease_{kind[:2]}_{robots}"
            target = _target(kind, name, server, tmp)
            steal = _steal()
            workers = [Worker(f"{name}-robot{k}", ["lease", "--target", target, "--robot", f"robot{k}",
                                                    "--cycles", str(cycles), "--hold-s", str(HOLD_S),
                                                    "--retry-s", str(RETRY_S), "--out", str(tmp / f"{name}-{k}.json")],
                              tmp / f"{name}-{k}.log") for k in range(1, robots + 1)]
            res = _together(workers)
            doubles = _lease_replay(_read_events(target), RESOURCE)
            acquired = sum(len(r["until_held_s"]) for r in res)
            out[f"{kind}_{robots}"] = {
                "robots": robots, "acquisitions": acquired,
                "acquire": _ms([x for r in res for x in r["acquire_s"]]),
                "refused": _ms([x for r in res for x in r["refused_s"]]),
                "release": _ms([x for r in res for x in r["release_s"]]),
                "until_held": _ms([x for r in res for x in r["until_held_s"]]),
                "conflicts_per_acquisition": round(sum(r["conflicts"] for r in res) / max(1, acquired), 2),
                "double_holders": doubles["double_holders"], "steal_pct": _steal_since(steal)}
            print(f"    {kind:10s} {robots} robot(s): {acquired} acquisitions, "
                  f"{sum(r['conflicts'] for r in res)} refused, double holders {doubles['double_holders']}", flush=True)
    return out


def _read_events(target: str) -> list[Any]:
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import open_journal

    j = open_journal(target, clock=SystemClock(), ids=IdGenerator(None))
    try:
        return j.events()
    finally:
        j.close()


# --------------------------------------------------------------------------- 3: the kill loop


def _lease_replay(events: list[Any], resource: str) -> dict[str, Any]:
    """Replay ``resource``'s site lease in seq order, one commit at a time (consecutive seqs of one robot with
    one stamp): double holders, releases by a non-holder, and dispatches on a stale fencing token."""
    from robot_harness.core.records import EventType as E

    kinds = (E.LEASE_ACQUIRED, E.LEASE_RELEASED, E.LEASE_BLOCKED, E.ROBOT_ACTION_STARTED)
    evs = sorted((e for e in events if e.type in kinds), key=lambda e: e.seq)
    commits: list[list[Any]] = []
    for e in evs:
        last = commits[-1][-1] if commits else None
        if last is not None and e.seq == last.seq + 1 and e.robot_id == last.robot_id and e.stamp == last.stamp:
            commits[-1].append(e)
        else:
            commits.append([e])
    holder: tuple[str, str, int] | None = None
    out: dict[str, Any] = {"double_holders": 0, "foreign_releases": 0, "stale_dispatches": 0, "dispatches": 0,
                           "acquisitions": 0, "handovers": 0, "blocked": 0, "where": [], "timeline": []}
    for commit in commits:
        for e in commit:
            p = e.payload
            if e.type is E.ROBOT_ACTION_STARTED or p.get("resource") != resource or p.get("scope") != "site":
                continue
            if e.type is E.LEASE_ACQUIRED:
                out["acquisitions"] += 1
                if holder is not None:
                    out["double_holders"] += 1
                    out["where"].append(f"seq {e.seq}: {e.robot_id}/{p['owner']} acquired while {holder} held it")
                holder = (e.robot_id, p["owner"], e.seq)
            elif e.type is E.LEASE_RELEASED:
                out["handovers"] += p.get("why") == "handed_over"
                if holder is None or holder[:2] != (e.robot_id, p["owner"]) or p.get("fence") != holder[2]:
                    out["foreign_releases"] += 1
                    out["where"].append(f"seq {e.seq}: {e.robot_id}/{p['owner']} released (fence {p.get('fence')})"
                                        f" while {holder} held it")
                holder = None
            else:
                out["blocked"] += 1
        out["timeline"].append((commit[-1].stamp, holder))
        for e in commit:
            if e.type is E.ROBOT_ACTION_STARTED and resource in (e.payload.get("dispatch") or {}).get("resources", []):
                out["dispatches"] += 1
                if holder is None or holder[:2] != (e.robot_id, e.robot_action_id):
                    out["stale_dispatches"] += 1
                    out["where"].append(f"seq {e.seq}: {e.robot_id}/{e.robot_action_id} dispatched while {holder} "
                                        "held the lease")
    return out


def _holder_at(timeline: list[tuple[float, Any]], t: float) -> Any:
    holder = None
    for stamp, h in timeline:
        if stamp > t:
            break
        holder = h
    return holder


def _last_before(events: list[Any], robot: str, t: float) -> str:
    """The type of the last event ``robot`` committed before wall time ``t`` (where a kill caught it)."""
    last = ""
    for e in events:
        if e.robot_id == robot and e.stamp <= t:
            last = e.type.value
    return last


def _lost(events: list[Any], tmp: Path) -> dict[str, int]:
    """Committed events (as the workers' side files recorded them) the database does not hold."""
    held = {e.seq: e.event_id for e in events}
    recorded = lost = torn = 0
    for robot in ROBOTS:
        path = tmp / f"{robot}.committed"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 2 or not parts[0].isdigit() or not re.fullmatch(r"ev-[0-9a-f]{12}", parts[1]):
                torn += 1  # a line cut by the kill: never fsynced, so never recorded
                continue
            recorded += 1
            lost += held.get(int(parts[0])) != parts[1]
    return {"recorded": recorded, "lost": lost, "torn_lines": torn}


@dataclass
class Robot:
    """One robot of the kill loop: its current worker process and what all of its workers reported."""

    name: str
    url: str
    tmp: Path
    worker: Worker | None = None
    starts: list[tuple[str, float]] = field(default_factory=list)
    """(mission id, wall time) of every MISSION_STARTED its workers reported."""
    durations: list[float] = field(default_factory=list)
    """Missions that finished SUCCEEDED, started to finished, s."""
    restarts: int = 0
    reconcile_s: list[float] = field(default_factory=list)
    """``reconcile_open_missions()`` at each start, s."""
    up_s: list[float] = field(default_factory=list)
    """Process started -> reconciled (imports, the journal opened, the reconciliation), s."""
    started_at: float = 0.0
    crashes: list[str] = field(default_factory=list)

    def start(self, *, reconcile_only: bool = False) -> None:
        argv = ["robot", "--url", self.url, "--robot", self.name, "--dir", str(self.tmp)]
        self.started_at = time.time()
        self.worker = Worker(self.name, argv + (["--reconcile-only"] if reconcile_only else []),
                             self.tmp / f"{self.name}.log").start()

    def pump(self, *, until_eof: float = 0.0) -> None:
        """Take in what the worker said so far (``until_eof``: wait up to so long for all of it, once it ended)."""
        assert self.worker is not None
        deadline = time.monotonic() + until_eof
        while True:
            try:
                t, line = self.worker.lines.get(timeout=max(0.0, deadline - time.monotonic())) if until_eof \
                    else self.worker.lines.get_nowait()
            except queue.Empty:
                return
            words = line.split()
            if not words:
                continue
            if words[0] == "started":
                self.starts.append((words[1], float(words[2])))
            elif words[0] == "finished":
                began = dict(self.starts).get(words[1])
                if words[2] == "SUCCEEDED" and began is not None:
                    self.durations.append(float(words[3]) - began)
            elif words[0] == "reconciled":
                self.reconcile_s.append(float(words[2]))
                self.up_s.append(t - self.started_at)
            elif words[0] == "<eof>":
                if not self.worker.killed and self.worker.wait(30) != 0:
                    self.crashes.append(self.worker.tail())
                return

    def kill(self) -> None:
        """SIGKILL the worker and take in every line it printed before it died."""
        assert self.worker is not None
        self.worker.kill()
        self.pump(until_eof=30.0)


def kill_loop(server: Any, tmp: Path, missions: int, rng: random.Random) -> dict[str, Any]:
    url = server.create_database("fleet_kill")
    robots = {name: Robot(name, url, tmp) for name in ROBOTS}
    kills: list[dict[str, Any]] = []
    started_at = time.monotonic()
    steal = _steal()

    def total() -> int:
        for r in robots.values():
            r.pump()
        return sum(len(r.starts) for r in robots.values())

    def mission_s() -> float:
        done = [d for r in robots.values() for d in r.durations]
        return statistics.median(done) if done else MISSION_GUESS_S

    def check_alive() -> None:
        for r in robots.values():
            r.pump()
            if r.crashes:
                raise WorkerFailed(r.worker, "crashed")  # type: ignore[arg-type]

    try:
        for r in robots.values():
            r.start()
        while total() < missions:
            victim = robots[rng.choice(ROBOTS)]
            wanted = len(victim.starts) + rng.choice((1, 2))
            deadline = time.monotonic() + MISSION_WAIT_S
            while len(victim.starts) < wanted and total() < missions:
                check_alive()
                if time.monotonic() > deadline:
                    raise WorkerFailed(victim.worker, f"no mission started in {MISSION_WAIT_S:.0f} s")  # type: ignore[arg-type]
                time.sleep(0.02)
            if len(victim.starts) < wanted:
                break
            window = mission_s()
            delay = rng.uniform(0.0, window)
            time.sleep(max(0.0, victim.starts[-1][1] + delay - time.time()))
            check_alive()
            victim.kill()
            kills.append({"robot": victim.name, "mission_id": victim.starts[-1][0], "after_s": round(delay, 3),
                          "window_s": round(window, 3), "at": time.time()})
            print(f"    kill {len(kills):3d}: {victim.name} {delay:5.2f} s into {victim.starts[-1][0]} "
                  f"(window {window:.2f} s; {total()} missions started)", flush=True)
            victim.start()
            victim.restarts += 1
        loop_s = time.monotonic() - started_at
        final_at = time.time()
        for r in robots.values():  # the final kill of both, wherever they are
            r.kill()
        for r in robots.values():
            r.start(reconcile_only=True)
        for r in robots.values():
            assert r.worker is not None
            line = r.worker.expect("reconciled", READY_TIMEOUT_S)
            r.reconcile_s.append(float(line.split()[2]))
            r.up_s.append(time.time() - r.started_at)
            code = r.worker.wait(60)
            if code != 0:
                raise WorkerFailed(r.worker, f"the final reconciliation exited {code}")
    finally:
        for r in robots.values():
            if r.worker is not None:
                r.worker.kill()
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import open_journal
    from robot_harness.core.records import EventType as E

    j = open_journal(url, clock=SystemClock(), ids=IdGenerator(None))
    try:
        events = j.events()
        open_after = j.open_missions(all_robots=True)
        leases_now = {k: f"{v.robot_id}/{v.owner} ({v.state.value})" for k, v in j.all_leases().items()}
    finally:
        j.close()
    replay = _lease_replay(events, RESOURCE)
    lost = _lost(events, tmp)
    tracebacks = {log.stem: log.read_text(errors="replace").count("Traceback") for log in tmp.glob("robot*.log")}
    status = Counter(e.payload.get("status", "") for e in events if e.type is E.MISSION_FINISHED)
    waited = Counter(e.payload.get("outcome", "") for e in events if e.type is E.LEASE_WAITED)
    holding = sum(1 for k in kills if (h := _holder_at(replay["timeline"], k["at"])) and h[0] == k["robot"])
    ends = [e for e in events if e.type is E.MISSION_FINISHED]
    interrupted = sum(1 for e in ends if e.payload.get("status") == "UNKNOWN"
                      and str(e.payload.get("summary", "")).startswith("interrupted"))
    refusals: dict[str, list[str]] = {}
    conflicts = 0
    for e in events:
        if e.type is E.TOOL_RESULT_RECORDED and (e.payload.get("status") or "ok") not in ("ok", "accepted"):
            why = {**(e.payload.get("content") or {}), **(e.payload.get("error") or {})}
            holder = (why.get("lease") or {}).get("robot_id", "") if isinstance(why.get("lease"), dict) else ""
            conflicts += why.get("code") == "lease_conflict"
            refusals.setdefault(e.mission_id, []).append(
                f"{e.payload.get('status')} {why.get('code', '')} "
                f"{str(why.get('reason') or why.get('message') or '')[:160]}".strip()
                + (f" (holder {holder})" if holder else ""))
    other_ends = [f"{e.robot_id} {e.mission_id} {e.payload.get('status')}: {str(e.payload.get('summary', ''))[:200]}"
                  + (f" [{'; '.join(refusals[e.mission_id])}]" if e.mission_id in refusals else "")
                  for e in ends if e.payload.get("status") != "SUCCEEDED"
                  and not str(e.payload.get("summary", "")).startswith("interrupted")]
    # A refused wait whose holder's fencing token changed while it waited: the resource was free for a moment
    # and the holder took it again before the waiting robot's next look (no queue), not one long hold.
    begun = {(e.robot_id, e.mission_id): e.payload.get("fence") for e in events
             if e.type is E.LEASE_WAITED and e.payload.get("outcome") == "waiting"}
    overtaken = sum(1 for e in events if e.type is E.LEASE_WAITED and e.payload.get("outcome") == "refused"
                    and begun.get((e.robot_id, e.mission_id)) != e.payload.get("fence"))
    phase = Counter(_last_before(events, k["robot"], k["at"]) for k in kills)
    final_holding = [r for r in ROBOTS if (h := _holder_at(replay["timeline"], final_at)) and h[0] == r]
    return {
        "missions_started": sum(1 for e in events if e.type is E.MISSION_STARTED),
        "missions_finished": dict(status), "kills": len(kills) + len(ROBOTS),
        "kills_in_loop": len(kills), "kills_final": len(ROBOTS),
        "kills_while_holding_elevator": holding + len(final_holding),
        "kill_delay_s": _ms([k["after_s"] for k in kills]) if kills else None,
        "mission_s": {"median": round(mission_s(), 3), "n": sum(len(r.durations) for r in robots.values())},
        "restarts": {r.name: r.restarts for r in robots.values()},
        "worker_tracebacks": {k: v for k, v in tracebacks.items() if v},
        "reconcile_s": _ms([x for r in robots.values() for x in r.reconcile_s]),
        "up_s": _ms([x for r in robots.values() for x in r.up_s]),
        "lease_waited": dict(waited), "refused_overtaken": overtaken,
        "lease_conflicts_at_commit": conflicts - waited.get("refused", 0) - waited.get("stopped", 0), "leases_at_end": leases_now,
        "unknown_interrupted": interrupted, "other_ends": other_ends, "kills_by_last_event": dict(phase.most_common()),
        "elevator": {k: replay[k] for k in ("acquisitions", "handovers", "blocked", "dispatches")},
        "double_holders": replay["double_holders"], "foreign_releases": replay["foreign_releases"],
        "stale_dispatches": replay["stale_dispatches"], "violations": replay["where"][:20],
        "committed": lost, "lost_events": lost["lost"], "open_missions": len(open_after),
        "open_mission_ids": open_after[:20], "events": len(events), "loop_s": round(loop_s, 1),
        "steal_pct": _steal_since(steal), "kills_detail": kills}


# --------------------------------------------------------------------------- report


def _row(label: str, pg: float, base: float, unit: str = "", *, fmt: str = "{:.2f}") -> None:
    ratio = pg / base if base else float("nan")
    print(f"  {label:44s} {fmt.format(pg):>12s} {fmt.format(base):>12s} {ratio:7.2f}x {unit}")


def report(res: dict[str, Any]) -> None:
    a, l, k = res.get("appends"), res.get("leases"), res.get("kill_loop")
    if a:
        print("\n1. journal append + commit, fsync ON in both")
        print(f"   PostgreSQL: {a['durability']['postgresql']}")
        print(f"   SQLite:     {a['durability']['sqlite']}")
        print(f"   each writer replays one real mission's appends ({a['batch_mix']}) x {a['missions']}")
        print(f"  {'':44s} {'PostgreSQL':>12s} {'SQLite':>12s}  ratio (baseline: SQLite)")
        for n in (1, FLEET):
            pg, sq = a[f"postgresql_{n}"], a[f"sqlite_{n}"]
            tag = f"{n} robot{'s' if n > 1 else ''}"
            _row(f"{tag}: events/s (all writers)", pg["events_per_s"], sq["events_per_s"], fmt="{:.0f}")
            _row(f"{tag}: append median, ms", pg["append"]["median_ms"], sq["append"]["median_ms"])
            _row(f"{tag}: append p95, ms", pg["append"]["p95_ms"], sq["append"]["p95_ms"])
            _row(f"{tag}: writer CPU per append, ms", pg["writer_cpu_ms_per_append"], sq["writer_cpu_ms_per_append"])
            print(f"  {'':44s} {'steal ' + str(pg['steal_pct']) + '%':>12s} {'steal ' + str(sq['steal_pct']) + '%':>12s}")
        for kind in ("postgresql", "sqlite"):
            one, many = a[f"{kind}_1"], a[f"{kind}_{FLEET}"]
            print(f"  {kind}: {FLEET} robots / 1 robot: events/s {many['events_per_s'] / one['events_per_s']:.2f}x, "
                  f"append p95 {many['append']['p95_ms'] / one['append']['p95_ms']:.2f}x")
    if l:
        print(f"\n2. site lease ({RESOURCE}) under contention: {FLEET} robots in turn (retry after {RETRY_S * 1e3:.0f} ms,"
              f" hold {HOLD_S * 1e3:.0f} ms) vs 1 robot alone (the baseline)")
        print(f"  {'':44s} {str(FLEET) + ' robots':>12s} {'1 robot':>12s}  ratio")
        for kind in ("postgresql", "sqlite"):
            many, one = l[f"{kind}_{FLEET}"], l[f"{kind}_1"]
            for what, label in (("acquire", "acquire"), ("release", "release"),
                                ("until_held", "first attempt -> held")):
                _row(f"{kind}: {label} median, ms", many[what]["median_ms"], one[what]["median_ms"])
                _row(f"{kind}: {label} p95, ms", many[what]["p95_ms"], one[what]["p95_ms"])
            r = many["refused"]
            print(f"  {kind + ': refused acquire (LeaseConflict), ms':44s} {'med ' + format(r['median_ms'], '.2f'):>12s} "
                  f"{'p95 ' + format(r['p95_ms'], '.2f'):>12s}  (n {r['n']}; none alone)")
            print(f"  {kind}: {many['acquisitions']} acquisitions, {many['conflicts_per_acquisition']} refused per "
                  f"acquisition, double holders {many['double_holders']} (alone: {one['double_holders']}); "
                  f"steal {many['steal_pct']}% / {one['steal_pct']}%")
        pg, sq = l[f"postgresql_{FLEET}"], l[f"sqlite_{FLEET}"]
        print(f"  {FLEET} robots, PostgreSQL / SQLite: acquire p95 {pg['acquire']['p95_ms'] / sq['acquire']['p95_ms']:.2f}x,"
              f" release p95 {pg['release']['p95_ms'] / sq['release']['p95_ms']:.2f}x")
    if k:
        print(f"\n3. kill loop: {', '.join(ROBOTS)} sharing {RESOURCE} on one PostgreSQL journal, in-process "
              "MissionRunner on the simulated robot (not a `robot-harness up` graph: no ROS, the sim dies with its "
              "harness)")
        fin = k["missions_finished"]
        print(f"  missions started {k['missions_started']}: SUCCEEDED {fin.get('SUCCEEDED', 0)}, UNKNOWN "
              f"{fin.get('UNKNOWN', 0)} ({k['unknown_interrupted']} interrupted by a kill, ended by the "
              f"reconciliation), FAILED {fin.get('FAILED', 0)}"
              + "".join(f", {s} {n}" for s, n in fin.items() if s not in ("SUCCEEDED", "UNKNOWN", "FAILED")))
        print(f"  kills {k['kills']} ({k['kills_in_loop']} in the loop, uniform over a mission of median "
              f"{k['mission_s']['median']:.2f} s; {k['kills_final']} final), {k['kills_while_holding_elevator']} "
              f"while the killed robot held {RESOURCE}; restarts in the loop "
              f"{', '.join(f'{r} {n}' for r, n in k['restarts'].items())}, then both once more")
        print(f"  each start: reconcile_open_missions() median {k['reconcile_s']['median_ms']:.0f} ms, p95 "
              f"{k['reconcile_s']['p95_ms']:.0f} ms; process start -> reconciled median "
              f"{k['up_s']['median_ms'] / 1e3:.2f} s, p95 {k['up_s']['p95_ms'] / 1e3:.2f} s")
        if k["worker_tracebacks"]:
            print(f"  WARNING: Traceback in the workers' stderr: {k['worker_tracebacks']}")
        for line in k["other_ends"][:10]:
            print(f"    not by a kill: {line}")
        print("  where the kills caught the robot (its last committed event): "
              + ", ".join(f"{t or '(nothing yet)'} {n}" for t, n in k["kills_by_last_event"].items()))
        w = k["lease_waited"]
        ended = w.get("free", 0) + w.get("refused", 0) + w.get("stopped", 0)
        print(f"  LEASE_WAITED: {w.get('waiting', 0)} waits: {w.get('free', 0)} got it, {w.get('refused', 0)} refused "
              f"after {SITE_WAIT_S:.0f} s ({k['refused_overtaken']} of them while the holder released and took it "
              f"again between two looks), {w.get('stopped', 0)} stopped, {w.get('waiting', 0) - ended} cut by a kill")
        print(f"  calls refused lease_conflict without waiting: {k['lease_conflicts_at_commit']} (the resource looked free, "
              "another robot's commit took it before this one's dispatch intent committed; the journal refused it)")
        print(f"  {RESOURCE}: {k['elevator']['acquisitions']} acquisitions, {k['elevator']['handovers']} hand-overs "
              f"(fencing token presented), {k['elevator']['dispatches']} dispatches that needed it")
        print(f"  leases in force at the end: {k['leases_at_end'] or 'none'}")
        rate = k["events"] / k["loop_s"] / len(ROBOTS) if k["loop_s"] else float("nan")
        print(f"  {k['events']} events; loop {k['loop_s']:.0f} s ({rate:.1f} events/s per robot); steal {k['steal_pct']}%")
        if a:
            pg = a[f"postgresql_{FLEET}"]["events_per_s"]
            print(f"  PostgreSQL's {FLEET}-writer rate in 1. ({pg:.0f} events/s) is {pg / rate:.0f} robots writing at "
                  "this loop's pace (on this 2-core machine, server included)")
        print("  check                                                        count  must be")
        for label, key in (("double holders of " + RESOURCE, "double_holders"),
                           ("dispatches on a stale fencing token", "stale_dispatches"),
                           (f"lost committed events (of {k['committed']['recorded']} recorded)", "lost_events"),
                           ("missions open after the final restart of both", "open_missions")):
            print(f"  {label:60s} {k[key]:5d}  0")
        if k["foreign_releases"]:
            print(f"  releases by a robot or owner not holding it: {k['foreign_releases']}")
        for v in k["violations"]:
            print(f"    {v}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run of every part")
    parser.add_argument("--missions", type=int, default=None,
                        help=f"kill loop: run until this many missions started (default {FULL['missions']}, "
                             f"--quick {QUICK['missions']})")
    parser.add_argument("--parts", default="1,2,3", help="which parts to run (default 1,2,3)")
    parser.add_argument("--seed", type=int, default=None, help="the kill loop's random choices (default: random)")
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    require_loopback()  # no DDS participant here, but every bench runs on the loopback profile
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    counts = dict(QUICK if args.quick else FULL)
    if args.missions is not None:
        if args.missions < 1:
            parser.error("--missions must be at least 1")
        counts["missions"] = args.missions
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"1", "2", "3"}:
        parser.error("--parts: a comma-separated subset of 1,2,3")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    from robot_harness.pgserver import PgNotInstalled, PgServer

    def _terminate(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    load = os.getloadavg()
    print(f"fleet bench: parts {','.join(sorted(parts))}, counts {counts}, seed {seed}, {os.cpu_count()} CPUs, "
          f"load avg {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    began = time.monotonic()
    res: dict[str, Any] = {"counts": counts, "seed": seed, "load_avg_at_start": load}
    tmp = Path(tempfile.mkdtemp(prefix="rh-bench-fleet-"))
    server = PgServer(fsync=True)  # its own /tmp directory, removed by close()
    try:
        try:
            server.start()
        except PgNotInstalled as exc:
            print(f"fleet bench: {exc.message}", file=sys.stderr)
            return 2
        if "1" in parts:
            print("[1/3] journal append + commit ...", flush=True)
            calls = harvest(tmp)
            batches = tmp / "batches.json"
            batches.write_text(json.dumps(calls))
            mix = Counter(len(c["events"]) for c in calls)
            t = time.monotonic()
            res["appends"] = appends(server, tmp, batches, counts["append_missions"])
            res["appends"].update({"missions": counts["append_missions"], "template_appends": len(calls),
                                   "template_events": sum(mix[n] * n for n in mix), "wall_s": round(time.monotonic() - t, 1),
                                   "batch_mix": f"{len(calls)} appends: " + ", ".join(
                                       f"{mix[n]}x {n}-event" for n in sorted(mix))})
        if "2" in parts:
            print("[2/3] site lease acquire / release ...", flush=True)
            t = time.monotonic()
            res["leases"] = leases(server, tmp, counts["lease_cycles"])
            res["leases"]["wall_s"] = round(time.monotonic() - t, 1)
        if "3" in parts:
            print(f"[3/3] kill loop until {counts['missions']} missions started ...", flush=True)
            res["kill_loop"] = kill_loop(server, tmp, counts["missions"], random.Random(seed))
    except WorkerFailed as exc:
        print(f"fleet bench: {exc}", file=sys.stderr)
        return 2
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    res["wall_s"] = round(time.monotonic() - began, 1)
    report(res)
    load = os.getloadavg()
    print(f"\ntotal {res['wall_s']:.0f} s; load avg at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        slim = json.loads(json.dumps(res, default=str))
        args.out.write_text(json.dumps(slim, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.out}")
    k = res.get("kill_loop")
    if k and any(k[key] for key in ("double_holders", "stale_dispatches", "lost_events", "open_missions")):
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
