"""The robot-harness command line, run as a user would (subprocesses)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "robot_harness"]

sys.path.insert(0, str(REPO / "test"))
from fake_openai import FakeOpenAI  # noqa: E402


def cli(*args: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def interrupt(proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Ctrl-C a long-running command (killed if it does not stop in time: the test then fails on its code)."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def small_scenario(tmp_path: Path, **extra) -> Path:
    data = {
        "goal": "Go to the spot and come back.",
        "world": {"places": {"dock": {"x": 0, "y": 0}, "spot": {"x": 1.5, "y": 0.5, "yaw": 0.3}}, "start": "dock"},
        "robot": {"speed": 3.0},
        "planner": {"turns": [
            {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]},
            {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]},
            {"done": "Back at the dock."},
        ]},
        "limits": {"mission_timeout_s": 60},
        **extra,
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_run_writes_a_report_and_the_journal_reads_back(tmp_path):
    journal = tmp_path / "j.sqlite3"
    report_path = tmp_path / "report.json"
    proc = cli("run", "--scenario", str(small_scenario(tmp_path)), "--journal", str(journal), "--report", str(report_path), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(report_path.read_text())
    assert json.loads(proc.stdout)["mission_id"] == report["mission_id"]
    assert report["status"] == "SUCCEEDED", report["summary"]
    for key in ("mission_id", "status", "summary", "tool_calls", "event_counts", "journal"):
        assert key in report
    for call in report["tool_calls"]:
        assert {"id", "name", "arguments", "result"} <= set(call)
        assert call["action_state"] == "SUCCEEDED"
    assert report["event_counts"]["ROBOT_ACTION_OUTCOME"] == 2

    show = cli("journal", "show", "--journal", str(journal))
    assert show.returncode == 0 and "MISSION_FINISHED" in show.stdout and "ROBOT_ACTION_OUTCOME" in show.stdout
    # the contract, receipts, verdict and commit read as sentences, not JSON
    shown = " ".join(show.stdout.split())
    contract, verdict, commit = report["contract"], report["verdict"], report["commit"]
    assert f"contract {contract['contract_id']} rev 1 (grammar)" in shown
    assert "o1 at_place:" in shown and "o2 at_place:" in shown
    assert f"{verdict['verdict_id']} VERIFIED_DONE" in shown and "o1 satisfied [predicate]" in shown
    assert f"{commit['commit_id']} accepts {verdict['verdict_id']}" in shown
    assert "navigate_to SUCCEEDED" in shown and "evidence" in shown
    listing = cli("journal", "show", "--journal", str(journal), "--mission", "list")
    assert report["mission_id"] in listing.stdout
    csv = cli("journal", "export", "--journal", str(journal), "--format", "csv")
    assert csv.returncode == 0 and csv.stdout.splitlines()[0].startswith("seq,")
    jsonl = cli("journal", "export", "--journal", str(journal))
    assert len(jsonl.stdout.splitlines()) == sum(report["event_counts"].values())

    import sqlite_utils

    db = sqlite_utils.Database(journal)
    assert db["events"].count == len(jsonl.stdout.splitlines())
    # --json: one document on stdout, nothing else
    events = json.loads(cli("journal", "show", "--journal", str(journal), "--json").stdout)
    assert [e["seq"] for e in events] == [json.loads(line)["seq"] for line in jsonl.stdout.splitlines()]
    exported = json.loads(cli("journal", "export", "--journal", str(journal), "--mission", "last", "--json").stdout)
    assert exported == events
    verify = cli("journal", "verify", "--journal", str(journal), "--json")
    assert verify.returncode == 0, verify.stderr
    audit = json.loads(verify.stdout)
    assert audit["ok"] and audit["mission_id"] == report["mission_id"] and audit["checks"]
    # the evidence the mission cites is gone: exit 5, said in one line
    for bag in (journal.parent / "bags").rglob("*.mcap"):
        bag.unlink()
    broken = cli("journal", "verify", "--journal", str(journal), "--json")
    assert broken.returncode == 5 and not json.loads(broken.stdout)["ok"]
    assert "Traceback" not in broken.stderr


def assert_ends_with_the_verdict_and_the_evidence(stdout: str, report: dict) -> None:
    """The text output's last block: status, contract, the verifier's verdict, the evidence (issue 3)."""
    lines = stdout.rstrip("\n").splitlines()
    last = lines[len(lines) - lines[::-1].index(""):]  # after the last blank line
    assert last[0] == f"status:  {report['status']}", last
    assert last[-1] == "evidence ids: " + ", ".join(report["evidence_ids"]), last
    verdict = report["verdict"]
    assert any(line.startswith(f"verdict {verdict['verdict_id']} by /verifier: {verdict['goal_verdict']}")
               for line in last), last
    assert any(line.startswith(f"contract {report['contract']['contract_id']} ") for line in last), last
    assert {verdict["verdict_id"], report["commit"]["commit_id"]} <= set(report["evidence_ids"])
    # the tool calls come before it, not after
    assert "tool calls:" in lines and lines.index("tool calls:") < len(lines) - len(last)
    assert not any(line.startswith("  navigate_to(") for line in last), last


def test_the_timeline_output_shows_status_and_evidence(tmp_path):
    report_path = tmp_path / "report.json"
    proc = cli("run", "--scenario", str(small_scenario(tmp_path)), "--journal", str(tmp_path / "j.sqlite3"),
               "--report", str(report_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "status:  SUCCEEDED" in proc.stdout
    assert "evidence ids:" in proc.stdout and "verdict-" in proc.stdout
    assert "verified_done" in proc.stdout and "committed by the gate: commit-" in proc.stdout
    assert_ends_with_the_verdict_and_the_evidence(proc.stdout, json.loads(report_path.read_text()))


@pytest.mark.parametrize("content, needle", [
    ("goal: x\nrobot: {faults: [{kind: meteor, at_s: 1}]}\n", "unknown fault kind"),
    ("goal: x\nworld: {places: {}, start: nowhere}\n", "start place"),
    ("- just\n- a list\n", "must be a YAML mapping"),
    ("goal: [unclosed\n", "not valid YAML"),
    ("goal: ''\n", "goal"),
])
def test_invalid_scenarios_fail_with_a_clear_message(tmp_path, content, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    proc = cli("run", "--scenario", str(path))
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_scenario_file_is_a_usage_error(tmp_path):
    proc = cli("run", "--scenario", str(tmp_path / "nope.yaml"))
    assert proc.returncode == 2 and "cannot read scenario" in proc.stderr


def test_help_and_version_as_a_shell_sees_them():
    """Every command's help in-process: test/unit/test_cli_help.py; here the installed entry point."""
    top = cli("--help")
    assert top.returncode == 0 and "examples:" in top.stdout and "exit codes:" in top.stdout
    for cmd in (["journal", "show"], ["mission"]):
        out = cli(*cmd, "--help")
        assert out.returncode == 0 and "examples:" in out.stdout, cmd
    version = cli("--version")
    xml = (REPO / "package.xml").read_text().split("<version>")[1].split("</version>")[0]
    assert version.returncode == 0 and version.stdout == f"robot-harness {xml}\n"
    usage = cli("run")  # --scenario is required
    assert usage.returncode == 2 and usage.stdout == "" and "error: the following arguments are required" in usage.stderr


def test_a_failed_mission_exits_0_and_1_only_with_require_success(tmp_path):
    """A mission that reached a final status ran: exit 0, whatever the status (issue 2); CI opts into 1."""
    scenario = str(REPO / "scenarios" / "failed_navigation.yaml")
    proc = cli("run", "--scenario", scenario, "--journal", str(tmp_path / "j.sqlite3"), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["status"] == "FAILED"
    strict = cli("run", "--scenario", scenario, "--journal", str(tmp_path / "j.sqlite3"), "--require-success")
    assert strict.returncode == 1, strict.stderr[-2000:]
    assert "status:  FAILED" in strict.stdout and "Traceback" not in strict.stderr


def _model(*turns: dict) -> list[dict]:
    """FakeOpenAI behaviours: each turn one tool call (name, arguments), or a silent answer for None."""
    return [{"content": ""} if t is None else {"tool_calls": [t]} for t in turns]


def test_run_with_a_live_model_records_it_and_replays_without_it(tmp_path):
    """`run --planner llm --record` against an OpenAI-compatible server (the real `openai` client in the
    planner node), then `--replay` of the recording with no server: the same calls, the same status."""
    scenario = str(REPO / "scenarios" / "failed_navigation.yaml")  # the controller rejects the goal
    recording = tmp_path / "failed.replay.jsonl"
    claim = "Arrived at the elevator (said the live model)."
    script = _model({"name": "navigate_to", "arguments": {"place": "elevator"}},
                    {"name": "propose_done", "arguments": {"summary": claim}},
                    None)  # then silent: the harness ends the mission
    with FakeOpenAI(script) as fake:
        live = cli("run", "--scenario", scenario, "--planner", "llm", "--model", "fake-model",
                   "--record", str(recording), "--journal", str(tmp_path / "live" / "j.sqlite3"), "--json",
                   env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test-cli"})
        requests = list(fake.requests)
    assert live.returncode == 0, live.stderr[-3000:]
    report = json.loads(live.stdout)
    assert report["status"] == "FAILED", report["summary"]
    assert len(requests) == len(script) and all(r["model"] == "fake-model" for r in requests)
    calls = [(c["name"], c["arguments"]) for c in report["tool_calls"]]
    assert calls == [("navigate_to", {"place": "elevator"}), ("propose_done", {"summary": claim})]
    assert recording.is_file() and claim in recording.read_text()

    # no model server at all: the recording answers, turn by turn
    replayed = cli("run", "--scenario", scenario, "--replay", str(recording), "--require-success",
                   "--journal", str(tmp_path / "replay" / "j.sqlite3"), "--json",
                   env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": ""})
    assert replayed.returncode == 1, replayed.stderr[-3000:]  # FAILED, and --require-success
    again = json.loads(replayed.stdout)
    assert again["status"] == report["status"], again["summary"]
    assert [(c["name"], c["arguments"]) for c in again["tool_calls"]] == calls


def test_demo_with_a_live_model_ends_with_the_verdict_and_the_evidence(tmp_path):
    script = _model({"name": "navigate_to", "arguments": {"place": "office_storage"}},
                    {"name": "capture_image", "arguments": {"label": "office_storage"}},
                    {"name": "navigate_to", "arguments": {"place": "dock"}},
                    {"name": "send_message", "arguments": {"to": "operator", "text": "Inspected; back at dock."}},
                    {"name": "propose_done", "arguments": {"summary": "Image taken, back at dock, reported."}})
    report_path = tmp_path / "report.json"
    with FakeOpenAI(script) as fake:
        proc = cli("demo", "--planner", "llm", "--model", "fake-model", "--require-success",
                   "--journal", str(tmp_path / "j.sqlite3"), "--report", str(report_path), timeout=180,
                   env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test-cli"})
        served = len(fake.requests)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["status"] == "SUCCEEDED" and served == len(script), report["summary"]
    assert report["model_usage"]["llm_calls"] == len(script)
    assert_ends_with_the_verdict_and_the_evidence(proc.stdout, report)


def test_up_then_mission_over_dds(tmp_path):
    """`robot-harness up` in one process, `robot-harness mission` in another."""
    script = small_scenario(tmp_path)
    places = tmp_path / "harness.yaml"
    places.write_text(yaml.safe_dump({"places": {"dock": {"x": 0, "y": 0}, "spot": {"x": 1.5, "y": 0.5, "yaw": 0.3}},
                                      "navigation": {"timeout_s": 10.0}}))
    journal = tmp_path / "up.sqlite3"
    up = subprocess.Popen([*CLI, "up", "--journal", str(journal), "--planner-script", str(script), "--harness-config", str(places)],
                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # wait for `up` to say the graph is up (it admits missions only then)
        deadline = time.monotonic() + 60
        seen = ""
        while "graph up" not in seen and time.monotonic() < deadline and up.poll() is None:
            seen += up.stdout.readline()
        assert "graph up" in seen, seen[-3000:]
        mission = cli("mission", "Go to the spot and come back.", "--json", "--timeout", "90", timeout=120)
        assert mission.returncode == 0, mission.stderr[-2000:]
        out = json.loads(mission.stdout)
        if out["status"] != "SUCCEEDED":
            show = cli("journal", "show", "--journal", str(journal))
            pytest.fail(f"{out}\n{show.stdout[-6000:]}")
        assert out["journal"] == str(journal)
        assert out["evidence_seqs"]
    finally:
        interrupt(up)
    assert up.returncode == 0


def test_mission_without_a_graph_fails_clearly():
    proc = cli("mission", "Go somewhere.", "--timeout", "3", timeout=60)
    # nobody serves /robot_harness/mission on this test's private domain
    assert proc.returncode == 4 and "no mission server" in proc.stderr
    assert proc.stderr.startswith("robot-harness: error: ") and "Traceback" not in proc.stderr


def test_stop_without_a_supervisor_exits_4_with_a_json_error():
    proc = cli("stop", "--timeout", "1", "--json", timeout=60)
    assert proc.returncode == 4, proc.stderr
    assert json.loads(proc.stdout) == {"error": "backend_unavailable", "exit_code": 4, "message": proc.stderr.strip()
                                       .removeprefix("robot-harness: error: backend_unavailable: ")}
    assert "Traceback" not in proc.stderr


def test_ctrl_c_exits_130():
    proc = subprocess.Popen([*CLI, "mission", "Go somewhere.", "--timeout", "60", "--progress"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    waiting = threading.Event()

    def read_stderr() -> None:
        for line in proc.stderr:
            lines.append(line)
            if "waiting for the mission server" in line:  # one nobody runs: it waits until Ctrl-C
                waiting.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert waiting.wait(timeout=60), "".join(lines)[-2000:]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    out, err = proc.stdout.read(), "".join(lines)
    proc.stdout.close()
    assert proc.returncode == 130, err
    assert out == "" and err.strip().endswith("robot-harness: error: interrupted") and "Traceback" not in err


def _journal_waiting_on_an_approval(path: Path) -> None:
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.interactions import token_sha256
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventDraft, EventType

    j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(1))
    j.setup()
    j.append([EventDraft(type=EventType.MISSION_STARTED, mission_id="m-1"),
              EventDraft(type=EventType.INTERACTION_REQUESTED, mission_id="m-1", payload={
                  "interaction_id": "ask-1", "kind": "approval", "prompt": "approve navigate_to({\"place\": \"dock\"})?",
                  "call": {"tool_call_id": "c1", "name": "navigate_to", "arguments": {"place": "dock"}},
                  "owner": "alice", "owner_sha256": token_sha256("s3cret"), "requested_at": 1.0, "expires_at": 9e9}),
              EventDraft(type=EventType.LEASE_ACQUIRED, mission_id="m-1", payload={
                  "resource": "base", "owner": "act-1", "expires_at": 1.0}),
              EventDraft(type=EventType.LEASE_BLOCKED, mission_id="m-1", payload={
                  "resource": "base", "owner": "act-1", "reason": "no terminal report"})])
    j.close()


def test_operator_commands_list_answer_and_clear_on_the_journal(tmp_path):
    path = tmp_path / "journal.sqlite3"
    _journal_waiting_on_an_approval(path)
    listed = cli("interactions", "--journal", str(path), "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["interaction_id"] == "ask-1" and row["resolution"] is None and "owner_sha256" not in row
    wrong = cli("answer", "ask-1", "approve", "--token", "guess", "--journal", str(path))
    assert wrong.returncode == 3 and "not_authorized" in wrong.stderr
    ok = cli("answer", "ask-1", "deny", "--token", "s3cret", "--operator", "alice", "--journal", str(path))
    assert ok.returncode == 0 and "recorded: ask-1 deny" in ok.stdout, ok.stderr
    again = cli("answer", "ask-1", "deny", "--token", "s3cret", "--journal", str(path))
    assert again.returncode == 0 and "already recorded" in again.stdout
    conflict = cli("answer", "ask-1", "approve", "--token", "s3cret", "--journal", str(path))
    assert conflict.returncode == 3 and "command_conflict" in conflict.stderr
    assert json.loads(cli("interactions", "--journal", str(path), "--json").stdout) == []
    leases = cli("resources", "--journal", str(path))
    assert "base: blocked by act-1" in leases.stdout
    # the listing prints the exact command that clears it: run as printed (the reason filled in), it does
    (command,) = [line.strip() for line in leases.stdout.splitlines() if line.strip().startswith("robot-harness ")]
    assert json.loads(cli("resources", "--journal", str(path), "--json").stdout)["base"]["clear_command"] == command
    no_reason = cli("resources", "--journal", str(path), "--clear", "base", "--operator", "alice")
    assert no_reason.returncode == 2 and "reason" in no_reason.stderr
    import shlex

    argv = shlex.split(command.replace("<what you checked>", "checked: parked").replace('"$USER"', "alice"))
    assert argv[:4] == ["robot-harness", "resources", "--clear", "base"] and argv[-2:] == ["--journal", str(path)]
    cleared = cli(*argv[1:])
    assert cleared.returncode == 0, cleared.stderr
    assert json.loads(cli("resources", "--journal", str(path), "--json").stdout) == {}


def test_eval_quick_writes_the_table_json_and_plots(tmp_path):
    out = tmp_path / "eval"
    proc = cli("eval", "--quick", "--out", str(out), "--modes", "direct,gated", timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "results.json").read_text())
    for mode in ("direct", "gated"):
        for key in ("success_rate", "false_completion_rate", "false_rejection_rate", "duplicate_dispatches",
                    "overhead_ms_p50", "overhead_ms_p95", "llm_calls_per_mission"):
            assert key in report["modes"][mode], (mode, key)
    assert report["modes"]["gated"]["false_completion_rate"] == 0.0
    assert "| gated |" in (out / "table.md").read_text()
    for png in ("modes.png", "false_completion_by_fault.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = cli("eval", "--modes", "nonsense", "--out", str(out))
    assert bad.returncode == 2 and "unknown mode" in bad.stderr
    # --json prints results.json and nothing else; a forced --progress writes one line per run on stderr
    both = cli("eval", "--quick", "--out", str(tmp_path / "eval2"), "--modes", "gated", "--json", "--progress",
               timeout=300)
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout)["modes"]["gated"]["false_completion_rate"] == 0.0
    lines = [line for line in both.stderr.splitlines() if line.startswith("[")]
    runs = json.loads(both.stdout)["runs"]
    assert len(lines) == runs and lines[-1].startswith(f"[{runs}/{runs}]")


def test_replay_a_mission_bag_and_see_a_changed_tolerance(tmp_path):
    journal = tmp_path / "journal.sqlite3"
    # localization noise: the robot ends a couple of centimetres off, as a real one does
    noisy = {"speed": 3.0, "faults": [{"kind": "pose_noise", "at_s": 0.0, "std_xy": 0.02, "std_yaw": 0.01}]}
    run = cli("run", "--scenario", str(small_scenario(tmp_path, robot=noisy)), "--journal", str(journal), "--json")
    assert run.returncode == 0, run.stderr
    bag = Path(json.loads(run.stdout)["bag"]["path"])
    same = cli("replay", str(bag))
    assert same.returncode == 0 and "every verdict replays the same" in same.stdout, same.stdout + same.stderr
    # a verifier tolerance tightened past what the recorded evidence meets
    tight = cli("replay", str(bag), "--set", "verification.xy_tolerance_m=0.001", "--json")
    assert tight.returncode == 1, tight.stderr
    report = json.loads(tight.stdout)
    assert not report["identical"] and report["verdicts"][-1]["diffs"]
    # several bags: one after the other, one document, exit 1 if any differs
    again = cli("run", "--scenario", str(small_scenario(tmp_path, robot=noisy)), "--journal", str(journal), "--json")
    assert again.returncode == 0, again.stderr
    bags = [str(bag), json.loads(again.stdout)["bag"]["path"]]
    both = cli("replay", *bags, "--json")
    assert both.returncode == 0, both.stderr
    doc = json.loads(both.stdout)
    assert doc["identical"] and [r["mission_id"] for r in doc["replays"]] == [Path(b).parent.name for b in bags]
    assert cli("replay", *bags, "--set", "verification.xy_tolerance_m=0.001").returncode == 1


def test_report_writes_a_self_contained_html(tmp_path):
    journal = tmp_path / "journal.sqlite3"
    run = cli("run", "--scenario", str(small_scenario(tmp_path)), "--journal", str(journal), "--json")
    assert run.returncode == 0, run.stderr
    out = tmp_path / "mission.html"
    proc = cli("report", "--journal", str(journal), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "Go to the spot and come back." in page and 'alt="trajectory"' in page and "navigate_to(" in page
    missing = cli("report", "--journal", str(journal), "--mission", "mission-nope", "--out", str(out))
    assert missing.returncode == 2 and "no mission" in missing.stderr
    # the mission as an argument: `robot-harness report MISSION`
    mission = json.loads(run.stdout)["mission_id"]
    named = cli("report", mission, "--journal", str(journal), "--out", str(tmp_path / "named.html"), "--json")
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["mission_id"] == mission and mission in (tmp_path / "named.html").read_text()
    as_json = json.loads(cli("report", "--journal", str(journal), "--out", str(out), "--json").stdout)
    assert as_json["report"] == str(out) and as_json["bytes"] == len(out.read_bytes())


def test_ctrl_c_on_an_idle_up_exits_0_every_time(tmp_path):
    """Issue 13: Ctrl-C on an idle `up` exited 70 (the supervisor was torn down twice: rclpy's context
    cleanup destroyed it again and the action server's second destroy raised). Five in a row must exit 0."""
    codes = []
    for k in range(5):
        up = subprocess.Popen([*CLI, "up", "--journal", str(tmp_path / f"up{k}.sqlite3")], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        seen = ""
        while "graph up" not in seen and time.monotonic() < deadline and up.poll() is None:
            seen += up.stdout.readline()
        assert "graph up" in seen, seen[-3000:]
        interrupt(up)
        rest = up.stdout.read()
        assert "Traceback" not in rest and "internal error" not in rest, rest[-3000:]
        codes.append(up.returncode)
    assert codes == [0] * 5
