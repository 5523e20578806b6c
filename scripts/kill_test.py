#!/usr/bin/env python3
"""Kill test: SIGKILL `robot-harness up` itself while `robot-harness mission` clients follow
missions, restart it on the same journal, and check what the clients were told.

The crash test (scripts/crash_test.py) kills one node process at a time; here the
whole `robot-harness up` process dies (one process, every harness node in it), in
two variants:

  sim_inside   `robot-harness up`: the simulated robot runs inside it and dies too
               (the restarted one starts at the dock; the goal in flight is gone)
  sim_outside  `robot-harness up --no-sim` beside a `sim_robot` process of its own,
               which keeps driving while the harness is dead

Each mission is the crash test's round trip, sent by a real `robot-harness mission
--json` process. At a uniformly random moment after the mission is admitted (its
MISSION_STARTED published), if the client is
still following, `up` is SIGKILLed and restarted at once. The client is not told:
it must notice that the server it followed is gone, ask the restarted supervisor
for the mission by id, and print the reconciled status.

Reported (each must be 0), from the simulator's truth log and the journal
(the crash test's analysis, reused):
  duplicate_physical_dispatches, committed_events_lost, false_completions,
  unreconciled (a mission left open, an action left non-terminal, a client without an answer)
and from the journal: missions_finished_twice (more than one MISSION_FINISHED for a mission),
and from the clients and `robot-harness journal verify`:
  verify_failures   a mission whose `journal verify --mission ID` did not exit 0
  clients_untold    a client whose exit code was not 0 or whose printed status differs
                    from the journal's MISSION_FINISHED status of its mission
Timing: seconds from the restart (the new `up` process started) to the killed
client's answer, and from the restarted graph's "graph up" line to that answer.

Usage (after ``source scripts/env.sh``; set ROS_DOMAIN_ID, or one is drawn at random):
  python scripts/kill_test.py [--missions 10] [--variants sim_inside,sim_outside] [--seed 1] [--out DIR]
Exit status: 0 when every count is 0, 1 otherwise, 2 on a set-up error.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import crash_test as ct  # noqa: E402  (the crash test's graph, client, truth log and analysis)

VARIANTS = ("sim_inside", "sim_outside")
UP_READY_LINE = "robot_harness graph up"
CLIENT_TIMEOUT_S = 120.0


class UpGraph(ct.Graph):
    """The crash test's graph, with the harness as one `robot-harness up` process ("up").

    The crash test's files (planner turns, harness config, truth log, journal) and node
    parameters are kept: the parameter files `up` reads are the shipped ones with the
    crash test's parameters written in (``--params-dir``).
    """

    def __init__(self, work: Path, *, sim_inside: bool) -> None:
        import yaml

        super().__init__(work)
        self.sim_inside = sim_inside
        self.params_dir = work / "params"
        self.params_dir.mkdir(exist_ok=True)
        for src in ct.CONFIG.glob("*.yaml"):
            shutil.copy(src, self.params_dir / src.name)
        for node, pairs in self.params.items():
            path = self.params_dir / f"{node}.yaml"
            doc = yaml.safe_load(path.read_text())
            values = doc[node]["ros__parameters"]
            for pair in pairs:
                key, _, value = pair.partition(":=")
                values[key] = yaml.safe_load(value)
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
        self.up_started_at = 0.0

    def start(self, name: str) -> None:
        if name != "up":
            super().start(name)
            return
        args = ["robot-harness", "up", "--journal", str(self.journal), "--harness-config", str(self.work / "harness.json"),
                "--planner-script", str(self.work / "turns.yaml"), "--params-dir", str(self.params_dir)]
        if not self.sim_inside:
            args.append("--no-sim")
        log = open(self.work / "up.log", "a")
        log.write(f"\n=== start {time.strftime('%H:%M:%S')} ===\n")
        log.flush()
        self.up_log_offset = log.tell()
        self.procs["up"] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.up_started_at = time.monotonic()
        log.close()

    def up_ready(self) -> bool:
        """Has the `up` started last said "graph up"?"""
        with open(self.work / "up.log", "rb") as f:
            f.seek(self.up_log_offset)
            return UP_READY_LINE.encode() in f.read()


class Client(ct.Client):
    """The crash test's client (readiness probe, event recorder), which also notes when each mission was admitted."""

    def __init__(self, mission_prefix: str) -> None:
        self.admitted_at: dict[str, float] = {}
        super().__init__(mission_prefix)

    def _on_event(self, msg: Any) -> None:
        super()._on_event(msg)
        if msg.kind == "MISSION_STARTED" and msg.mission_id.startswith(self.mission_prefix):
            self.admitted_at.setdefault(msg.mission_id, time.monotonic())


def run_mission(graph: UpGraph, client: Client, mission_id: str, kill_at: float) -> dict[str, Any]:
    """One mission through a `robot-harness mission` process; `up` SIGKILLed ``kill_at`` s after the mission
    was admitted (its MISSION_STARTED published), if the client still follows it then."""
    row: dict[str, Any] = {"mission_id": mission_id, "victim": "up", "kill_at_s": round(kill_at, 3),
                           "killed": False, "repeated": False, "resends": 0}
    out, err = graph.work / f"{mission_id}.json", graph.work / f"{mission_id}.stderr"
    t0 = time.monotonic()
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = subprocess.Popen(["robot-harness", "mission", ct.GOAL, "--mission-id", mission_id, "--json",
                                 "--timeout", str(CLIENT_TIMEOUT_S)], stdout=fo, stderr=fe)
    while proc.poll() is None and time.monotonic() - t0 < 60.0:
        admitted = client.admitted_at.get(mission_id)
        if admitted is not None and time.monotonic() - admitted >= kill_at:
            break
        time.sleep(0.01)
    restarted_at = ready_at = None
    if proc.poll() is None:
        graph.restart("up")  # SIGKILL, then start it again at once on the same journal
        restarted_at = graph.up_started_at
        row.update(killed=True, repeated=True, killed_after_s=round(restarted_at - t0, 3),
                   killed_after_admission_s=round(restarted_at - client.admitted_at.get(mission_id, t0), 3))
    while proc.poll() is None:
        if ready_at is None and restarted_at is not None and graph.up_ready():
            ready_at = time.monotonic()
        up_exit = graph.procs["up"].poll()
        if up_exit is not None and "up_exited" not in row:
            row["up_exited"] = up_exit  # the restarted `up` died: its client can only time out (see up.log)
        if time.monotonic() - t0 > CLIENT_TIMEOUT_S + 30:
            proc.kill()
            proc.wait()
            break
        time.sleep(0.02)
    answered_at = time.monotonic()
    if ready_at is None and restarted_at is not None and graph.up_ready():
        ready_at = answered_at  # said "graph up" in the last poll interval
    row["client_exit"] = proc.returncode
    try:
        printed = json.loads(out.read_text() or "{}")
    except ValueError:
        printed = {}
    row["printed_status"] = printed.get("status", "")
    row["status"] = printed.get("status") or ("NO_ANSWER" if proc.returncode else "")
    row["summary"] = str(printed.get("summary") or printed.get("message") or "")[:300]
    if proc.returncode != 0:
        row["stderr_tail"] = err.read_text()[-600:]
    row["wall_s"] = round(answered_at - t0, 3)
    if restarted_at is not None:
        row["restart_to_answer_s"] = round(answered_at - restarted_at, 3)
        if ready_at is not None:
            row["ready_to_answer_s"] = round(answered_at - ready_at, 3)
    return row


def verify_missions(journal: Path, mission_ids: list[str]) -> dict[str, dict[str, Any]]:
    """`robot-harness journal verify --mission ID --json` per mission: exit code and what it said."""
    out: dict[str, dict[str, Any]] = {}
    for mid in mission_ids:
        proc = subprocess.run(["robot-harness", "journal", "verify", "--journal", str(journal), "--mission", mid,
                               "--json"], capture_output=True, text=True, timeout=120)
        try:
            doc = json.loads(proc.stdout or "{}")
        except ValueError:
            doc = {}
        failures = [f"{c.get('id')}: {c.get('problem')}" for c in doc.get("checks", []) if not c.get("ok", True)]
        out[mid] = {"exit": proc.returncode, "failures": failures[:5],
                    "message": (doc.get("message") or proc.stderr.strip()[-300:]) if proc.returncode else ""}
    return out


def journal_status(journal: Path) -> tuple[dict[str, str], list[str], list[str]]:
    """(mission id -> MISSION_FINISHED status, admitted mission ids, missions finished more than once)."""
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventType

    j = SqliteJournal(journal, clock=SystemClock(), ids=IdGenerator(None))
    j.setup()
    try:
        events = j.events(types=[EventType.MISSION_STARTED, EventType.MISSION_FINISHED])
    finally:
        j.close()
    finished = {e.mission_id: str(e.payload.get("status")) for e in events if e.type is EventType.MISSION_FINISHED}
    admitted = list(dict.fromkeys(e.mission_id for e in events if e.type is EventType.MISSION_STARTED))
    ends = ct.collections.Counter(e.mission_id for e in events if e.type is EventType.MISSION_FINISHED)
    return finished, admitted, sorted(m for m, n in ends.items() if n > 1)


def _quantiles(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"n": 0, "median": None, "p95": None, "max": None}
    s = sorted(xs)
    p95 = s[min(len(s) - 1, max(0, round(0.95 * len(s) + 0.5) - 1))]  # nearest rank
    return {"n": len(s), "median": round(statistics.median(s), 2), "p95": round(p95, 2), "max": round(s[-1], 2)}


def run_variant(variant: str, work: Path, *, missions: int, rng: random.Random, min_kill_s: float,
                max_kill_s: float, seed: int) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    graph = UpGraph(work, sim_inside=variant == "sim_inside")
    if variant == "sim_outside":
        graph.start("sim_robot")
    graph.start("up")
    prefix = f"kill-{variant}-{seed}-{ct.secrets.token_hex(3)}-"  # this run's own (see crash_test)
    client = Client(prefix)
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        for i in range(missions):
            client.wait_ready(timeout_s=90.0)
            revived = graph.revive_dead()
            row = run_mission(graph, client, f"{prefix}{i:03d}", rng.uniform(min_kill_s, max_kill_s))
            row["variant"] = variant
            if revived:
                row["revived_unexpectedly"] = revived
            rows.append(row)
            print(f"[{variant} {i + 1}/{missions}] {row['mission_id']} killed={row['killed']} -> "
                  f"{row['status']} (exit {row['client_exit']}"
                  + (f", {row['restart_to_answer_s']:.1f} s after the restart" if row["killed"] else "") + ")",
                  flush=True)
        client.wait_ready(timeout_s=90.0)
        time.sleep(1.0)  # the last events reach the recorder
    finally:
        wall = time.monotonic() - started
        graph.stop()
    report = ct.analyse(graph, client, rows)
    client.destroy()
    finished, admitted, finished_twice = journal_status(graph.journal)
    verified = verify_missions(graph.journal, admitted)
    untold = [r["mission_id"] for r in rows if r["killed"] and (
        r["client_exit"] != 0 or r["printed_status"] != finished.get(r["mission_id"]))]
    wrong = [r["mission_id"] for r in rows if not r["killed"] and r["mission_id"] in finished and (
        r["client_exit"] != 0 or r["printed_status"] != finished[r["mission_id"]])]
    killed = [r for r in rows if r["killed"]]
    report.update({
        "variant": variant,
        "wall_s": round(wall, 1),
        "up_kills": len(killed),
        "admitted_missions": len(admitted),
        "missions_finished_twice": len(finished_twice),
        "missions_finished_twice_ids": finished_twice,
        "verify_failures": sum(1 for v in verified.values() if v["exit"] != 0),
        "verify_failed_missions": {m: v for m, v in verified.items() if v["exit"] != 0},
        "clients_untold": len(untold) + len(wrong),
        "clients_untold_missions": untold + wrong,
        "killed_client_status": dict(ct.collections.Counter(r["printed_status"] or "none" for r in killed)),
        "restart_to_answer_s": _quantiles([r["restart_to_answer_s"] for r in killed if r["client_exit"] == 0]),
        "ready_to_answer_s": _quantiles([r["ready_to_answer_s"] for r in killed
                                         if r["client_exit"] == 0 and "ready_to_answer_s" in r]),
        "work_dir": str(work),
    })
    (work / "missions.json").write_text(json.dumps(rows, indent=1))
    (work / "report.json").write_text(json.dumps(report, indent=1))
    return report


COUNTS = ("duplicate_physical_dispatches", "committed_events_lost", "false_completions", "unreconciled",
          "missions_finished_twice", "verify_failures", "clients_untold")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--missions", type=int, default=10, help="missions per variant (default 10)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: sim_inside, sim_outside")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="report and logs folder (default: a temp folder)")
    ap.add_argument("--min-kill-s", type=float, default=0.0, help="kill no sooner than this after the admission")
    ap.add_argument("--max-kill-s", type=float, default=3.0,
                    help="kill within this many seconds of the mission's admission")
    args = ap.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - set(VARIANTS):
        print(f"--variants: choose from {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    problem = ct.loopback_problem()
    if problem:
        print(f"{problem}: run under `source scripts/env.sh` (loopback-only DDS profile)", file=sys.stderr)
        return 2
    if shutil.which("robot-harness") is None:
        print("robot-harness is not on PATH: run under `source scripts/env.sh`", file=sys.stderr)
        return 2
    ct.install_lib()
    if not os.environ.get("ROS_DOMAIN_ID"):
        # Two graphs on one domain talk to each other: never share the default one, nor one another
        # run of the harness's holds now (robot_harness.domains; held to this process's exit).
        from robot_harness.domains import claim

        held = claim()
        os.environ["ROS_DOMAIN_ID"] = str(held.domain)
        print(f"ROS_DOMAIN_ID={held.domain} (claimed for this run)", flush=True)
    work = args.out or Path(tempfile.mkdtemp(prefix="robot_harness-kill-"))
    if any((work / v / "journal.sqlite3").exists() for v in variants):
        print(f"{work} holds an earlier run: give an empty or new --out", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    reports = {v: run_variant(v, work / v, missions=args.missions, rng=rng, min_kill_s=args.min_kill_s,
                              max_kill_s=args.max_kill_s, seed=args.seed) for v in variants}
    (work / "report.json").write_text(json.dumps(reports, indent=1))
    shown = ("missions", "up_kills", "admitted_missions", "status", "killed_client_status", "robot_motions",
             "journal_events", "journal_integrity", "restart_to_answer_s", "ready_to_answer_s", "wall_s", *COUNTS)
    print(json.dumps({v: {k: r[k] for k in shown} for v, r in reports.items()}, indent=1))
    print(f"report: {work / 'report.json'}")
    ok = all(r[k] == 0 for r in reports.values() for k in COUNTS) and all(
        r["journal_integrity"] == "ok" and not r["missions_started_twice"] for r in reports.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
