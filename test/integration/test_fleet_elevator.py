"""Issue 19: two robots, one PostgreSQL journal, one elevator.

Two `robot-harness up --namespace robotN --journal postgresql://...` graphs (each with its own simulated
robot and planner script) run concurrent missions through the place `elevator`, which needs the site
resource `elevator_1` while a robot is inside it. The fleet's journal (a throw-away PostgreSQL server)
holds both robots' events, each under its robot id; the elevator is never leased to both at once: the
second robot waits for it (journaled), and gets it only after the first robot left the elevator (its
lease handed from the navigation that went in to the one that came out, by fencing token).

The overlap is made, not hoped for: robot2's mission starts once robot1's lease is journaled, and robot1 stays in
the elevator (asking its owner a question) until robot2's wait is journaled; only then is the question answered."""
from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from .test_cli import CLI, REPO, cli
from .test_two_graphs import _params_file

if TYPE_CHECKING:
    from robot_harness.core.journal import Journal
    from robot_harness.core.records import JournalEvent

pytestmark = pytest.mark.integration

PLACES = {"dock": {"x": 0.0, "y": 0.0}, "elevator": {"x": 1.4, "y": 0.0}, "lab": {"x": 2.6, "y": 0.6}}
SITE = {"resources": {"elevator_1": {"places": ["elevator"], "radius_m": 0.6}}, "lease_wait_s": 90.0, "poll_s": 0.2}
GOAL = "Go to the elevator, then go to the lab."
TOKEN = "owner-of-robot1"


def _script(tmp_path: Path, name: str, *, hold: bool = False) -> Path:
    """``hold``: inside the elevator, ask the owner before going on (the test answers once the other robot waits)."""
    path = tmp_path / f"{name}.yaml"
    ask = [{"tool_calls": [{"name": "ask_operator", "arguments": {"question": "May I leave the elevator?"}}]}]
    path.write_text(yaml.safe_dump({"turns": [
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "elevator"}}]},
        *(ask if hold else []),
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "lab"}}]},
        {"done": "Through the elevator and at the lab."},
    ]}))
    return path


def _up(tmp_path: Path, name: str, url: str, *, hold: bool = False) -> subprocess.Popen:
    config = tmp_path / f"{name}-harness.yaml"
    config.write_text(yaml.safe_dump({"places": PLACES, "navigation": {"timeout_s": 30.0}, "site": SITE,
                                      "limits": {"mission_timeout_s": 240.0},
                                      "interactions": {"ask_operator": hold, "timeout_s": 180.0}}))
    log = open(tmp_path / f"{name}-up.log", "w")
    try:
        return subprocess.Popen([*CLI, "up", "--namespace", name, "--journal", url,
                                 "--params-file", str(_params_file(tmp_path)),
                                 "--planner-script", str(_script(tmp_path, name, hold=hold)),
                                 "--harness-config", str(config)],
                                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
    finally:
        log.close()


def _log(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}-up.log").read_text()


def _wait_up(tmp_path: Path, name: str, proc: subprocess.Popen, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while "graph up" not in _log(tmp_path, name):
        assert proc.poll() is None, f"{name} exited {proc.returncode}:\n{_log(tmp_path, name)[-3000:]}"
        assert time.monotonic() < deadline, _log(tmp_path, name)[-3000:]
        time.sleep(0.2)


def _mission(namespace: str, *, owner_token: str = "") -> subprocess.Popen:
    token = ["--owner-token", owner_token] if owner_token else []
    return subprocess.Popen([*CLI, "mission", GOAL, "--namespace", namespace, "--json", "--timeout", "240", *token],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _journaled(journal: Journal, what: str, found: Callable[[JournalEvent], bool],
               running: dict[str, subprocess.Popen], timeout_s: float = 120.0) -> JournalEvent:
    """The first event of the fleet's journal ``found`` accepts, polled for (bounded) while ``running`` all run."""
    deadline = time.monotonic() + timeout_s
    while True:
        hit = next((e for e in journal.events() if found(e)), None)
        if hit is not None:
            return hit
        for name, proc in running.items():
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"waiting for {what}: {name} exited {proc.returncode}:\n{out[-1500:]}\n{err[-1500:]}")
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:g} s"
        time.sleep(0.2)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(2)  # SIGINT: `up` shuts its graph down
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_two_robots_share_the_elevator_through_one_postgresql_journal(tmp_path, pg_url, capsys):
    from robot_harness.cli import main as cli_main
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import open_journal
    from robot_harness.core.records import EventType as E

    # the throw-away server trusts loopback, so a password is accepted and ignored: it must never be echoed
    url = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-pw@")
    assert url != pg_url
    graphs = {"robot1": _up(tmp_path, "robot1", url, hold=True), "robot2": _up(tmp_path, "robot2", url)}
    sent: list[subprocess.Popen] = []
    try:
        for name, proc in graphs.items():
            _wait_up(tmp_path, name, proc)
        watch = open_journal(pg_url, clock=SystemClock(), ids=IdGenerator(None))
        try:
            # robot1 takes the elevator first; robot2 is sent only then, and finds it taken
            first = _mission("robot1", owner_token=TOKEN)
            sent.append(first)
            _journaled(watch, "robot1's lease of elevator_1",
                       lambda e: e.type is E.LEASE_ACQUIRED and e.robot_id == "robot1"
                       and e.payload.get("resource") == "elevator_1", {**graphs, "robot1 mission": first})
            second = _mission("robot2")
            sent.append(second)
            missions_running = {**graphs, "robot1 mission": first, "robot2 mission": second}
            _journaled(watch, "robot2's wait for elevator_1",
                       lambda e: e.type is E.LEASE_WAITED and e.robot_id == "robot2"
                       and e.payload.get("outcome") == "waiting", missions_running)
            # robot1, inside the elevator, asked its owner; answered only now, it leaves and lets robot2 in
            ask = _journaled(watch, "robot1's question",
                             lambda e: e.type is E.INTERACTION_REQUESTED and e.robot_id == "robot1", missions_running)
        finally:
            watch.close()
        code = cli_main(["answer", ask.payload["interaction_id"], "answer", "--text", "yes", "--token", TOKEN,
                         "--journal", url])
        answered = capsys.readouterr()
        assert code == 0 and "recorded: " in answered.out, answered
        out1, err1 = first.communicate(timeout=300)
        out2, err2 = second.communicate(timeout=300)
        assert first.returncode == 0 and second.returncode == 0, (err1[-2000:], err2[-2000:])
        r1, r2 = json.loads(out1), json.loads(out2)
        assert r1["status"] == "SUCCEEDED", r1["summary"]
        assert r2["status"] == "SUCCEEDED", r2["summary"]
        assert r1["journal"] in (pg_url, url.replace("s3cret-pw", "***"))  # without the password, or masked
        for text in (out1, err1, out2, err2, answered.out, answered.err, _log(tmp_path, "robot1"),
                     _log(tmp_path, "robot2")):
            assert "s3cret-pw" not in text

        fleet = open_journal(pg_url, clock=SystemClock(), ids=IdGenerator(None))
        try:
            events = fleet.events()
            missions = {m["mission_id"]: m for m in fleet.missions()}
            leases_left = fleet.all_leases()
        finally:
            fleet.close()
        assert missions[r1["mission_id"]]["robot_id"] == "robot1"
        assert missions[r2["mission_id"]]["robot_id"] == "robot2"
        assert {e.robot_id for e in events if e.mission_id == r1["mission_id"]} == {"robot1"}
        assert {e.robot_id for e in events if e.mission_id == r2["mission_id"]} == {"robot2"}

        # the elevator, replayed in commit order: never two holders; each robot held it from the
        # navigation that went in to the one that came out (handed over by its fencing token)
        holder: tuple[str, str, int] | None = None
        spans: list[tuple[str, int, int]] = []
        handovers = 0
        for e in events:
            if e.type not in (E.LEASE_ACQUIRED, E.LEASE_RELEASED) or e.payload.get("resource") != "elevator_1":
                continue
            if e.type is E.LEASE_ACQUIRED:
                assert holder is None or holder[0] == e.robot_id, f"double holder at seq {e.seq}: {holder} and {e}"
                if holder is None:
                    holder = (e.robot_id, e.payload["owner"], e.seq)
                else:
                    holder = (e.robot_id, e.payload["owner"], holder[2])
            else:
                assert holder is not None and holder[1] == e.payload["owner"] and e.robot_id == holder[0]
                assert e.payload["fence"] > 0
                if e.payload["why"] == "handed_over":
                    handovers += 1
                    holder = (holder[0], "", holder[2])  # the next acquisition (same commit) takes it on
                else:
                    spans.append((holder[0], holder[2], e.seq))
                    holder = None
        assert holder is None and not leases_left.get("elevator_1"), leases_left
        assert sorted(robot for robot, _, _ in spans) == ["robot1", "robot2"] and handovers == 2, spans
        (a_robot, a_from, a_to), (b_robot, b_from, b_to) = sorted(spans, key=lambda s: s[1])
        assert a_to < b_from, spans  # one after the other

        # the robot that came second waited, and its wait is journaled with the holder named
        waited = [e for e in events if e.type is E.LEASE_WAITED]
        outcomes = [e.payload["outcome"] for e in waited]  # begun, said again every 2 s while it lasts, ended
        assert outcomes[0] == "waiting" and outcomes[-1] == "free" and set(outcomes[1:-1]) <= {"waiting"}, outcomes
        assert waited[0].robot_id == b_robot and waited[0].payload["holder_robot"] == a_robot
        assert waited[0].payload["fence"] == a_from

        # the operator's view by robot, from the same database
        shown = cli("journal", "show", "--journal", url, "--robot", "robot2", "--json", timeout=60)
        assert shown.returncode == 0, shown.stderr[-2000:]
        assert "s3cret-pw" not in shown.stdout + shown.stderr
        rows = json.loads(shown.stdout)
        assert rows and {row.get("robot_id") for row in rows} == {"robot2"}
        assert r2["mission_id"] in {row["mission_id"] for row in rows}
        assert r1["mission_id"] not in {row["mission_id"] for row in rows}
    finally:
        for proc in sent:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        for proc in graphs.values():
            _stop(proc)


def test_a_harness_without_a_namespace_is_refused_on_a_fleets_database(tmp_path, pg_url):
    """Robots sharing one database are told apart by their namespaces: an unnamed one would reconcile every
    other unnamed robot's missions as its own. It refuses to start, saying why (never exit 70)."""
    config = tmp_path / "harness.yaml"
    config.write_text(yaml.safe_dump({"places": PLACES, "site": SITE}))
    done = subprocess.run([*CLI, "up", "--journal", pg_url, "--params-file", str(_params_file(tmp_path)),
                           "--planner-script", str(_script(tmp_path, "unnamed")), "--harness-config", str(config)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode not in (0, 70), out[-3000:]
    assert "namespace" in out and "Traceback" not in out, out[-3000:]


def test_run_writes_a_fleets_database_under_its_namespace_and_the_journal_commands_read_it(tmp_path, pg_url):
    """`run --journal URL --namespace robot1`, then verify (the bags found from the end record), report,
    export and the decision replay, each for robot1, from the database."""
    env_runs = {"ROBOT_HARNESS_RUNS": str(tmp_path / "runs")}
    import os

    env = {**os.environ, **env_runs}
    done = subprocess.run([*CLI, "run", "--scenario", str(REPO / "scenarios" / "demo.yaml"), "--journal", pg_url,
                           "--namespace", "robot1", "--json"], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["status"] == "SUCCEEDED", report["summary"]
    for args in (["journal", "verify", "--robot", "robot1"], ["report", "--robot", "robot1", "--out",
                                                              str(tmp_path / "r.html")],
                 ["journal", "export", "--robot", "robot1", "--format", "jsonl"],
                 ["replay", "--robot", "robot1", "--mission", "last", "--decisions"]):
        out = cli(*args, "--journal", pg_url, timeout=120)
        assert out.returncode == 0, (args, out.stdout[-1500:], out.stderr[-1500:])
    rows = [json.loads(line) for line in cli("journal", "export", "--robot", "robot1", "--format", "jsonl",
                                             "--journal", pg_url, timeout=60).stdout.splitlines() if line.strip()]
    assert rows and {r.get("robot_id") for r in rows} == {"robot1"}
