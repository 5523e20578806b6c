"""Issue 13: every ordinary failure path of the CLI ends with its own exit code and a message that names
the cause, never 70 ("this is a bug") and never a traceback. Each case runs the CLI as a subprocess,
as a user would: a world that is not observable, a navigator that is not there, a journal that cannot
be written or trusted, a model that is not configured or does not answer, an output that cannot be
written, and Ctrl-C / SIGTERM on `up` in the middle of a mission."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ._graph import install_lib
from .test_cli import CLI, REPO, cli, interrupt, small_scenario

pytestmark = pytest.mark.integration

PLACES = {"dock": {"x": 0, "y": 0}, "spot": {"x": 1.5, "y": 0.5, "yaw": 0.3}}


def assert_clean_failure(proc: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    """Exit ``code``; stderr's error line names every needle; no traceback, no internal error."""
    err = proc.stderr
    assert proc.returncode == code, f"exit {proc.returncode}, wanted {code}\n{err[-3000:]}"
    assert "Traceback" not in err and "internal error" not in err and "never retrieved" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("robot-harness: error: ")]
    assert errors, err[-3000:]
    for needle in needles:
        assert needle in errors[-1], f"{needle!r} not in {errors[-1]!r}"


def refusals(journal: Path) -> list[dict]:
    with contextlib.closing(sqlite3.connect(journal)) as db:
        rows = db.execute("SELECT mission_id, payload FROM events WHERE type = 'MISSION_REFUSED' ORDER BY seq").fetchall()
    return [{"mission_id": m, **json.loads(p)} for m, p in rows]


# --------------------------------------------------------------------------- the world


@pytest.mark.parametrize("fault, needle", [
    ({"kind": "frozen_pose", "at_s": 0.0}, "s old"),          # one pose, then the same pose and stamp forever
    ({"kind": "pose_dropout", "at_s": 0.0}, "no localized pose received"),  # never a pose at all
])
def test_run_without_a_fresh_pose_is_refused_with_the_topic_and_the_age(tmp_path, fault, needle):
    scenario = small_scenario(tmp_path, robot={"speed": 3.0, "faults": [fault]})
    journal, report = tmp_path / "j" / "journal.sqlite3", tmp_path / "report.json"
    proc = cli("run", "--scenario", str(scenario), "--journal", str(journal), "--report", str(report), timeout=120)
    assert_clean_failure(proc, 3, "no_fresh_pose", "/amcl_pose", needle)
    doc = json.loads(report.read_text())
    assert doc["status"] == "BLOCKED" and doc["refusal"] == "no_fresh_pose" and needle in doc["summary"]
    [refused] = refusals(journal)
    assert refused["mission_id"] == doc["mission_id"] and refused["code"] == "no_fresh_pose"
    assert doc["tool_calls"] == [] and "MISSION_STARTED" not in doc["event_counts"]  # nothing ran


def test_run_on_a_flat_battery_is_refused_before_anything_moves(tmp_path):
    """The battery is below navigation.preconditions.battery_min: no navigation could start, so the mission
    is refused at admission with the level and the minimum (not admitted to fail every call)."""
    scenario = small_scenario(tmp_path, robot={"speed": 3.0, "battery_start": 0.05})
    journal, report = tmp_path / "j" / "journal.sqlite3", tmp_path / "report.json"
    proc = cli("run", "--scenario", str(scenario), "--journal", str(journal), "--report", str(report), timeout=120)
    assert_clean_failure(proc, 3, "battery_low", "0.05", "battery_min")
    doc = json.loads(report.read_text())
    assert doc["status"] == "BLOCKED" and doc["refusal"] == "battery_low"
    assert [r["code"] for r in refusals(journal)] == ["battery_low"]
    assert doc["tool_calls"] == [] and "MISSION_STARTED" not in doc["event_counts"]


def _wait_for(proc: subprocess.Popen, text: str, timeout_s: float = 60.0) -> str:
    deadline, seen = time.monotonic() + timeout_s, ""
    while text not in seen and time.monotonic() < deadline and proc.poll() is None:
        seen += proc.stdout.readline()
    assert text in seen, seen[-3000:]
    return seen


def _sim(tmp_path: Path, faults: list[dict], tag: str) -> subprocess.Popen:
    log = open(tmp_path / f"sim-{tag}.log", "w")
    args = [str(install_lib() / "sim_robot"), "--ros-args", "--params-file", str(REPO / "config" / "sim_robot.yaml"),
            "-p", "speed:=3.0", "-p", f"faults_json:='{json.dumps(faults)}'"]  # a YAML string: rcl parses -p values as YAML
    try:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _mission_until(goal: str, code: int, needle: str = "", timeout_s: float = 40.0) -> subprocess.CompletedProcess:
    """Send missions until one exits ``code`` with ``needle`` on stderr (a robot just started takes a
    few seconds to be discovered: until then the refusal is the previous one)."""
    deadline = time.monotonic() + timeout_s
    while True:
        proc = cli("mission", goal, "--json", "--timeout", "60", timeout=120)
        if (proc.returncode == code and needle in proc.stderr) or time.monotonic() > deadline:
            return proc
        time.sleep(1.0)


def test_up_comes_up_without_a_robot_refuses_missions_with_the_reason_and_recovers(tmp_path):
    """`up --no-sim` with no navigator, then a robot whose pose never comes, then a working robot: the
    graph stays up throughout, each mission is refused with the cause (journaled), then admitted."""
    script = small_scenario(tmp_path)
    config = tmp_path / "harness.yaml"
    config.write_text(yaml.safe_dump({"places": PLACES, "navigation": {"timeout_s": 10.0}}))
    journal = tmp_path / "up.sqlite3"
    up = subprocess.Popen([*CLI, "up", "--no-sim", "--journal", str(journal), "--planner-script", str(script),
                           "--harness-config", str(config)], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    sim = None
    try:
        _wait_for(up, "graph up")
        goal = "Go to the spot and come back."
        absent = cli("mission", goal, "--timeout", "60", timeout=120)
        assert_clean_failure(absent, 3, "backend_not_active", "bt_navigator")

        sim = _sim(tmp_path, [{"kind": "pose_dropout", "at_s": 0.0}], "no-pose")
        no_pose = _mission_until(goal, 3, "no_fresh_pose")
        assert_clean_failure(no_pose, 3, "no_fresh_pose", "/amcl_pose")
        _stop(sim)

        sim = _sim(tmp_path, [], "ok")
        admitted = _mission_until(goal, 0)
        assert admitted.returncode == 0, admitted.stderr[-3000:]
        if json.loads(admitted.stdout)["status"] != "SUCCEEDED":  # why: each call's result, and the robot's log
            with contextlib.closing(sqlite3.connect(journal)) as db:
                results = db.execute("SELECT payload FROM events WHERE type = 'TOOL_RESULT_RECORDED' ORDER BY seq")
                results = "\n".join(r for (r,) in results.fetchall())
            pytest.fail(f"{admitted.stdout}\n--- tool results:\n{results[-4000:]}\n--- sim:\n"
                        f"{(tmp_path / 'sim-ok.log').read_text()[-3000:]}")
    finally:
        if sim is not None:
            _stop(sim)
        interrupt(up)
    rest = up.stdout.read()
    assert up.returncode == 0 and "Traceback" not in rest, rest[-3000:]
    codes = [r["code"] for r in refusals(journal)]
    assert codes[0] == "backend_not_active" and "no_fresh_pose" in codes, codes
    listing = cli("journal", "show", "--journal", str(journal), "--mission", "list")
    assert "REFUSED" in listing.stdout and "SUCCEEDED" in listing.stdout, listing.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopping_up_in_the_middle_of_a_mission_exits_0_and_ends_the_mission_on_the_record(tmp_path, sig):
    slow = {"places": {"dock": {"x": 0, "y": 0}, "far": {"x": 8.0, "y": 0.0}}, "navigation": {"timeout_s": 60.0}}
    config = tmp_path / "harness.yaml"
    config.write_text(yaml.safe_dump(slow))
    script = small_scenario(tmp_path, planner={"turns": [
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "far"}}]}, {"done": "At far."}]})
    journal = tmp_path / "up.sqlite3"
    up = subprocess.Popen([*CLI, "up", "--journal", str(journal), "--planner-script", str(script),
                           "--harness-config", str(config)], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    client = None
    try:
        _wait_for(up, "graph up")
        client = subprocess.Popen([*CLI, "mission", "Go to far.", "--timeout", "60"], cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and not _has_event(journal, "ROBOT_ACTION_STARTED"):
            time.sleep(0.2)
        assert _has_event(journal, "ROBOT_ACTION_STARTED"), "the mission never dispatched"
        up.send_signal(sig)
        up.wait(timeout=40)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if client is not None and client.poll() is None:
            client.kill()
            client.wait()
    rest = up.stdout.read()
    assert up.returncode == 0, rest[-3000:]
    assert "Traceback" not in rest and "internal error" not in rest, rest[-3000:]
    listing = json.loads(cli("journal", "show", "--journal", str(journal), "--mission", "list", "--json").stdout)
    assert [m["status"] for m in listing] == ["CANCELLED"], listing  # stopped on the record, not left open


def _has_event(journal: Path, kind: str) -> bool:
    if not journal.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(journal, timeout=1.0)) as db:
            return db.execute("SELECT 1 FROM events WHERE type = ? LIMIT 1", (kind,)).fetchone() is not None
    except sqlite3.OperationalError:
        return False


# --------------------------------------------------------------------------- the journal


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder nothing can be written in: a read-only tmpfs as root (root ignores file modes), else mode 0555."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("running as root without mount: cannot make a read-only folder")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


@pytest.fixture
def full_dir(tmp_path):
    """A folder on a 64 KiB file system that is already full."""
    folder = tmp_path / "full"
    folder.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root and mount for a small file system")
    try:
        with contextlib.suppress(OSError):
            (folder / "fill").write_bytes(b"\0" * 65536)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def test_a_journal_in_a_read_only_folder_exits_5_naming_the_path(tmp_path, read_only_dir):
    journal = read_only_dir / "journal.sqlite3"
    ran = cli("run", "--scenario", str(small_scenario(tmp_path)), "--journal", str(journal), timeout=60)
    assert_clean_failure(ran, 5, str(read_only_dir), "not writable")
    up = cli("up", "--journal", str(read_only_dir / "sub" / "journal.sqlite3"), timeout=60)
    assert_clean_failure(up, 5, "journal_write_failed", str(read_only_dir / "sub"))


def test_a_corrupt_journal_exits_5_saying_what_to_do(tmp_path):
    journal = tmp_path / "journal.sqlite3"
    journal.write_bytes(os.urandom(8192))
    for args in (["run", "--scenario", str(small_scenario(tmp_path))], ["up"]):
        proc = cli(*args, "--journal", str(journal), timeout=60)
        assert_clean_failure(proc, 5, str(journal), "corrupt", "move it aside")
    assert journal.stat().st_size == 8192  # nothing was set up over it


def test_a_locked_journal_exits_5_and_nothing_moves(tmp_path):
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal

    journal = tmp_path / "journal.sqlite3"
    j = SqliteJournal(journal, clock=SystemClock(), ids=IdGenerator(None))
    j.setup()
    j.close()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"db = sqlite3.connect({str(journal)!r}, isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(60)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        proc = cli("run", "--scenario", str(small_scenario(tmp_path)), "--journal", str(journal), timeout=90)
    finally:
        holder.kill()
        holder.wait()
    assert_clean_failure(proc, 5, "locked", str(journal))
    assert "ROBOT_ACTION_STARTED" not in proc.stdout


def test_a_full_disk_under_the_journal_exits_5(tmp_path, full_dir):
    proc = cli("run", "--scenario", str(small_scenario(tmp_path)), "--journal", str(full_dir / "journal.sqlite3"),
               timeout=60)
    assert_clean_failure(proc, 5, "full")


# --------------------------------------------------------------------------- the model


def test_llm_planner_without_a_model_names_the_setting(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ROBOT_HARNESS_MODEL"}
    proc = subprocess.run([*CLI, "demo", "--planner", "llm", "--journal", str(tmp_path / "j.sqlite3")], cwd=REPO,
                          capture_output=True, text=True, timeout=90, env=env)
    assert_clean_failure(proc, 2, "no model configured", "--model", "ROBOT_HARNESS_MODEL")


def test_an_unreachable_model_endpoint_exits_4_naming_it(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = cli("run", "--scenario", str(small_scenario(tmp_path)), "--planner", "llm", "--model", "m",
               "--journal", str(tmp_path / "j.sqlite3"), timeout=120,
               env={"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "x"})
    assert_clean_failure(proc, 4, "model endpoint did not answer", f"127.0.0.1:{port}")


# --------------------------------------------------------------------------- outputs


def test_outputs_that_cannot_be_written_are_usage_errors_before_anything_runs(tmp_path, read_only_dir):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    scenario = small_scenario(tmp_path)
    journal = tmp_path / "j" / "journal.sqlite3"
    for report in (a_file / "report.json", read_only_dir / "report.json", tmp_path):
        proc = cli("run", "--scenario", str(scenario), "--journal", str(journal), "--report", str(report), timeout=60)
        assert_clean_failure(proc, 2, "--report", str(report))
        assert not journal.exists()  # refused before the graph started: no mission ran
    j = tmp_path / "ok" / "journal.sqlite3"
    assert cli("run", "--scenario", str(scenario), "--journal", str(j), timeout=120).returncode == 0
    for out in (a_file / "x.jsonl", read_only_dir / "x.jsonl"):
        proc = cli("journal", "export", "--journal", str(j), "--out", str(out))
        assert_clean_failure(proc, 2, "--out", str(out))
        proc = cli("report", "--journal", str(j), "--out", str(out.with_suffix(".html")))
        assert_clean_failure(proc, 2, "--out")


def test_journal_verify_reads_an_interrupted_bag_and_marks_it_unfinalised(tmp_path):
    """A bag whose writer died has no footer: verify reads what is there (exit 0, "unfinalised"), and
    evidence a deeper cut lost is named, with the bag (exit 5, never an empty message)."""
    journal, report = tmp_path / "j" / "journal.sqlite3", tmp_path / "report.json"
    assert cli("run", "--scenario", str(small_scenario(tmp_path)), "--journal", str(journal), "--report",
               str(report), timeout=120).returncode == 0
    bag = Path(json.loads(report.read_text())["bag"]["path"])
    whole = bag.read_bytes()
    bag.write_bytes(whole[:-10])  # the footer's end and the closing magic: what a SIGKILL at close leaves
    proc = cli("journal", "verify", "--journal", str(journal), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["ok"] and any("unfinalised" in note for note in doc["notes"]), doc.get("notes")
    assert "unfinalised" in cli("journal", "verify", "--journal", str(journal)).stdout
    bag.write_bytes(whole[: len(whole) // 3])  # a crash early in the mission: later evidence never reached the disk
    proc = cli("journal", "verify", "--journal", str(journal))
    assert proc.returncode == 5 and "Traceback" not in proc.stderr
    assert "FAIL" in proc.stdout and bag.name in proc.stdout, proc.stdout[-3000:]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_stopping_run_in_the_middle_of_a_mission_exits_with_its_code_and_ends_the_mission(tmp_path, sig, code):
    scenario = small_scenario(tmp_path, goal="Go to far.",
                              world={"places": {"dock": {"x": 0, "y": 0}, "far": {"x": 8.0, "y": 0}},
                                               "start": "dock"},
                              robot={"speed": 0.5}, harness={"navigation": {"timeout_s": 60.0}},
                              planner={"turns": [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "far"}}]},
                                                 {"done": "At far."}]})
    journal = tmp_path / "j" / "journal.sqlite3"
    run = subprocess.Popen([*CLI, "run", "--scenario", str(scenario), "--journal", str(journal)], cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _has_event(journal, "ROBOT_ACTION_STARTED") and run.poll() is None:
            time.sleep(0.2)
        assert _has_event(journal, "ROBOT_ACTION_STARTED"), "the mission never dispatched"
        run.send_signal(sig)
        out, err = run.communicate(timeout=40)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert_clean_failure(subprocess.CompletedProcess(run.args, run.returncode, out, err), code,
                         "terminated" if sig == signal.SIGTERM else "interrupted")
    listing = json.loads(cli("journal", "show", "--journal", str(journal), "--mission", "list", "--json").stdout)
    assert [m["status"] for m in listing] == ["CANCELLED"], listing


@pytest.mark.parametrize("node, key, value, needle", [
    ("snapshot_aggregator", "snapshot_rate_hz", -1.0, "snapshot_rate_hz"),
    ("snapshot_aggregator", "pose_max_age_s", -0.5, "pose_max_age_s"),
    ("verifier", "verification_json", "{not json", "verification_json"),
])
def test_a_bad_node_parameter_exits_2_naming_the_node_and_the_parameter(tmp_path, node, key, value, needle):
    import shutil

    params = tmp_path / "config"
    shutil.copytree(REPO / "config", params)
    path = params / f"{node}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc[node]["ros__parameters"][key] = value
    path.write_text(yaml.safe_dump(doc))
    proc = cli("up", "--params-dir", str(params), "--journal", str(tmp_path / "j.sqlite3"), timeout=60)
    assert_clean_failure(proc, 2, node, needle)


@pytest.mark.parametrize("text, needles", [
    ("supervisor:\n  ros__parameters:\n    planner_timeout_s: 240\n", ("supervisor", "planner_timeout_s")),  # int for float
    ('"sup(ervisor":\n  ros__parameters:\n    x: 1\n', ("not a node name",)),
    ("supervisor: [1, 2]\n", ("supervisor",)),
])
def test_a_bad_params_file_is_a_usage_error_naming_what(tmp_path, text, needles):
    """`up --params-file` with a value rclpy refuses, a key rcl would not parse, a section that is not one:
    exit 2 with the cause, never an internal error."""
    params = tmp_path / "params.yaml"
    params.write_text(text)
    proc = cli("up", "--no-sim", "--params-file", str(params), "--journal", str(tmp_path / "j.sqlite3"), timeout=120)
    assert_clean_failure(proc, 2, *needles)
