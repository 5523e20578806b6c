"""The command line's contract without a ROS graph: help, docs, --json, exit codes.

Commands run for real (``cli.main`` in this process, or a subprocess where
the exit status itself is the point) against small journals written with the
core; nothing of ours is mocked.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from robot_harness.cli import ExitCode, build_parser, exit_code_for, main, mission_exit_code

REPO = Path(__file__).resolve().parents[2]
DOCS = (REPO / "docs" / "cli.md").read_text()


def _commands() -> list[tuple[list[str], argparse.ArgumentParser]]:
    """Every command and subcommand, as (words after robot-harness, its parser)."""
    out: list[tuple[list[str], argparse.ArgumentParser]] = []

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
        if words:
            out.append((words, parser))
        for action in subs:
            for name, child in action.choices.items():
                walk(child, [*words, name])

    walk(build_parser(), [])
    return out


COMMANDS = _commands()
LEAVES = [(w, p) for w, p in COMMANDS if p.get_default("handler") is not None]
IDS = [" ".join(w) for w, _ in COMMANDS]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("words, parser", COMMANDS, ids=IDS)
def test_every_command_has_help_with_examples(capsys, words, parser):
    code, out, _ = run(capsys, *words, "--help")
    assert code == 0
    assert parser.description and parser.description.strip()
    assert "examples:\n  robot-harness " in out or "examples:\n  ROBOT_HARNESS" in out, out
    examples = out.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert 1 <= len(examples) <= 3, examples
    for line in examples:  # runnable as written: robot-harness, possibly after VAR=value settings
        assert re.match(r"^  ([A-Z_]+=\S+ )*robot-harness ", line), line
        assert f"robot-harness {words[0]}" in line, (words, line)
    if parser.get_default("handler") is not None:
        assert "exit codes:\n" in out and "    0  done" in out and "  130  interrupted" in out


def test_the_top_level_help_lists_commands_and_the_exit_code_table(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    top = [w for w, _ in COMMANDS if len(w) == 1]
    sub = next(a for a in build_parser()._actions if a.dest == "command")  # noqa: SLF001
    helps = {c.dest: c.help for c in sub._choices_actions}  # noqa: SLF001
    for (name,) in top:
        assert name in helps and helps[name] and "\n" not in helps[name]
        assert helps[name].split()[0] in " ".join(out.split()), name
    for c in ExitCode:
        assert f"{c.value:>3}  {c.meaning}" in out


def test_version_is_the_one_in_package_xml(capsys):
    xml = re.search(r"<version>([^<]+)</version>", (REPO / "package.xml").read_text()).group(1)
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"robot-harness {xml}"


@pytest.mark.parametrize("words, parser", COMMANDS, ids=IDS)
def test_every_command_is_documented_in_docs_cli_md(words, parser):
    heading = re.compile(rf"^#+ `robot-harness {re.escape(' '.join(words))}`$", re.M)
    assert heading.search(DOCS), f"docs/cli.md has no section for `robot-harness {' '.join(words)}`"


def test_the_docs_exit_code_table_is_exitcode():
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", DOCS, re.M))
    assert sorted(int(k) for k in rows) == sorted(int(c) for c in ExitCode)


@pytest.mark.parametrize("words, parser", LEAVES, ids=[" ".join(w) for w, _ in LEAVES])
def test_every_command_that_prints_a_result_takes_json(words, parser):
    flags = {s for a in parser._actions for s in a.option_strings}  # noqa: SLF001
    if words in (["up"], ["dashboard"], ["foxglove"]):
        assert "--json" not in flags, f"{words[0]} serves until stopped and prints no result"
    else:
        assert "--json" in flags, words


def test_a_usage_error_exits_2_with_one_line(capsys):
    code, out, err = run(capsys, "journal", "show", "--no-such-option")
    assert code == ExitCode.USAGE == 2 and out == ""
    assert err.splitlines()[-1] == "robot-harness: error: unrecognized arguments: --no-such-option"
    code, out, err = run(capsys, "journal", "export", "--format", "xml")
    assert code == 2 and out == "" and "error: argument --format: invalid choice: 'xml'" in err


# --------------------------------------------------------------------------- on a small journal


@pytest.fixture
def journal(tmp_path) -> Path:
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventDraft, EventType

    path = tmp_path / "journal.sqlite3"
    j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(1))
    j.setup()
    j.append([EventDraft(type=EventType.MISSION_STARTED, mission_id="m-1", payload={"goal": "Go to the spot."}),
              EventDraft(type=EventType.LEASE_ACQUIRED, mission_id="m-1", payload={
                  "resource": "base", "owner": "act-1", "expires_at": 1.0}),
              EventDraft(type=EventType.MISSION_FINISHED, mission_id="m-1", payload={
                  "status": "FAILED", "summary": "did not get there"})])
    j.close()
    return path


@pytest.mark.parametrize("argv, shape", [
    (["journal", "show"], list),
    (["journal", "show", "--mission", "list"], list),
    (["journal", "export"], list),
    (["journal", "export", "--mission", "last"], list),
    (["interactions", "--all"], list),
    (["resources"], dict),
])
def test_json_results_are_one_document_on_stdout(capsys, journal, argv, shape):
    code, out, _ = run(capsys, *argv, "--journal", str(journal), "--json")
    assert code == 0
    doc = json.loads(out)
    assert isinstance(doc, shape)
    if argv[0] == "journal" and "list" not in argv:  # the events, in the journal's record format
        assert [e["type"] for e in doc] == ["MISSION_STARTED", "LEASE_ACQUIRED", "MISSION_FINISHED"]
        assert all(e["kind"] == "journal_event" and e["mission_id"] == "m-1" for e in doc)


def test_export_jsonl_and_csv_stay_their_formats(capsys, journal):
    code, out, _ = run(capsys, "journal", "export", "--journal", str(journal))
    assert code == 0 and [json.loads(line)["seq"] for line in out.splitlines()] == [1, 2, 3]
    code, out, _ = run(capsys, "journal", "export", "--journal", str(journal), "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("seq,") and len(out.splitlines()) == 4


def test_an_unknown_mission_id_is_a_usage_error_with_a_hint(capsys, journal):
    code, out, err = run(capsys, "journal", "show", "--journal", str(journal), "--mission", "m-nope")
    assert code == 2 and out == ""
    assert err.startswith("robot-harness: error: no mission 'm-nope'") and "--mission list" in err
    assert len(err.splitlines()) == 1
    code, out, err = run(capsys, "report", "--journal", str(journal), "--mission", "m-nope", "--json")
    assert code == 2 and json.loads(out) == {"error": "usage_error", "message": err.strip().removeprefix(
        "robot-harness: error: "), "mission_id": "m-nope", "exit_code": 2}


def test_a_missing_journal_is_a_usage_error(capsys, tmp_path):
    code, out, err = run(capsys, "interactions", "--journal", str(tmp_path / "none.sqlite3"))
    assert code == 2 and out == "" and f"no journal at {tmp_path / 'none.sqlite3'}" in err


def test_an_unreadable_journal_exits_5_without_a_traceback(capsys, tmp_path):
    bad = tmp_path / "journal.sqlite3"
    bad.write_bytes(b"this is not a database" * 100)
    code, out, err = run(capsys, "journal", "show", "--journal", str(bad), "--json")
    assert code == ExitCode.EVIDENCE == 5
    assert json.loads(out)["exit_code"] == 5
    assert "Traceback" not in err and err.startswith("robot-harness: error: ")


def test_a_refusal_exits_3(capsys, tmp_path):
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.interactions import token_sha256
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventDraft, EventType

    path = tmp_path / "journal.sqlite3"
    j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(1))
    j.setup()
    j.append([EventDraft(type=EventType.MISSION_STARTED, mission_id="m-1"),
              EventDraft(type=EventType.INTERACTION_REQUESTED, mission_id="m-1", payload={
                  "interaction_id": "ask-1", "kind": "approval", "prompt": "approve?",
                  "call": {"tool_call_id": "c1", "name": "navigate_to", "arguments": {"place": "dock"}},
                  "owner": "alice", "owner_sha256": token_sha256("s3cret"), "requested_at": 1.0, "expires_at": 9e9})])
    j.close()
    code, out, err = run(capsys, "answer", "ask-1", "approve", "--token", "guess", "--journal", str(path), "--json")
    assert code == ExitCode.REFUSED == 3 and json.loads(out)["error"] == "not_authorized"
    code, out, _ = run(capsys, "answer", "ask-1", "approve", "--token", "s3cret", "--journal", str(path), "--json")
    assert code == 0 and json.loads(out)["recorded"] is True


def test_errors_map_to_exit_codes_by_their_code():
    from robot_harness.core.errors import (BackendUnavailable, HarnessTimeout, NondeterminismError, RefusalError,
                                           ScenarioError)
    from robot_harness.core.journal import JournalReadError
    from robot_harness.core.gate import GateRejection

    assert exit_code_for(ScenarioError("x")) == ExitCode.USAGE
    assert exit_code_for(BackendUnavailable("x")) == exit_code_for(HarnessTimeout("x")) == ExitCode.UNAVAILABLE
    assert exit_code_for(JournalReadError("x")) == exit_code_for(NondeterminismError("x")) == ExitCode.EVIDENCE
    assert exit_code_for(RefusalError("x")) == ExitCode.REFUSED
    assert exit_code_for(GateRejection("stale", field="state_version")) == ExitCode.REFUSED


def test_the_cli_process_exit_status(tmp_path):
    """The status a shell sees, and --json keeping stdout to one document."""
    env = {**os.environ, "ROS_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "robot_harness", "journal", "show", "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stderr
    assert json.loads(proc.stdout)["error"] == "usage_error"
    assert proc.stderr.strip() == f"robot-harness: error: no journal at {tmp_path}/robot_harness/journal.sqlite3 " \
                                  "(pass --journal PATH, or run a mission first)"


def test_reading_a_journal_needs_no_ros(journal):
    """The journal commands work on a machine without ROS: they never load rclpy."""
    code = ("import sys\n"
            "from robot_harness.cli import main\n"
            f"rc = main(['journal', 'export', '--journal', {str(journal)!r}, '--json'])\n"
            "sys.exit(rc or ('rclpy' in sys.modules and 9))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 3


# --------------------------------------------------------------------------- mission exit codes


FINAL = ("SUCCEEDED", "FAILED", "UNKNOWN", "BLOCKED", "WAITING_USER", "CANCELLED")


@pytest.mark.parametrize("status", FINAL)
def test_a_mission_that_reached_a_final_status_exits_0_unless_success_is_required(status):
    assert mission_exit_code(status) == ExitCode.OK
    expected = ExitCode.OK if status == "SUCCEEDED" else ExitCode.NOT_SUCCEEDED
    assert mission_exit_code(status, require_success=True) == expected


def test_a_status_that_is_not_final_is_a_harness_bug():
    with pytest.raises(RuntimeError, match="without a final status"):
        mission_exit_code("RUNNING")


@pytest.mark.parametrize("command", [["run", "--scenario", "x.yaml"], ["demo"], ["mission", "a goal"]])
def test_run_demo_and_mission_take_require_success(command):
    parser = build_parser()
    assert parser.parse_args(command).require_success is False
    assert parser.parse_args([*command, "--require-success"]).require_success is True


@pytest.mark.parametrize("flags, needle", [
    (["--planner", "llm", "--replay", "r.jsonl"], "--replay serves a recording"),
    (["--planner", "replay"], "needs --replay FILE"),
    (["--replay", "r.jsonl", "--record", "out.jsonl"], "--record need --planner llm"),
    (["--record", "out.jsonl"], "--record need --planner llm"),
    (["--replay", "no-such.replay.jsonl"], "no replay file at no-such.replay.jsonl"),
])
def test_planner_flags_that_contradict_each_other_are_usage_errors(capsys, tmp_path, flags, needle):
    # checked before the scenario is read: a missing scenario file would say so instead
    code, out, err = run(capsys, "run", "--scenario", str(tmp_path / "never-read.yaml"), *flags)
    assert code == 2 and out == "" and needle in err, err


# --------------------------------------------------------------------------- report, replay


def test_report_takes_the_mission_as_an_argument(capsys, journal, tmp_path):
    out_file = tmp_path / "m-1.html"
    code, out, err = run(capsys, "report", "m-1", "--journal", str(journal), "--out", str(out_file), "--json")
    assert code == 0, err
    assert json.loads(out)["mission_id"] == "m-1" and "Go to the spot." in out_file.read_text()
    code, out, err = run(capsys, "report", "m-nope", "--journal", str(journal), "--json")
    assert code == 2 and json.loads(out)["mission_id"] == "m-nope" and "no mission 'm-nope'" in err
    code, _, err = run(capsys, "report", "m-1", "--mission", "m-2", "--journal", str(journal))
    assert code == 2 and "two missions given" in err
    code, _, err = run(capsys, "report", "m-1", "--mission", "m-1", "--journal", str(journal),
                       "--out", str(out_file))
    assert code == 0, err


def test_replaying_a_recording_without_a_journal_asks_for_one_or_a_scenario(capsys, tmp_path):
    fixture = REPO.parent / "shared" / "fixtures" / "bags" / "evo_nav2_turtlebot.mcap"
    bag = tmp_path / "recordings" / "nav2_run.mcap"
    bag.parent.mkdir()
    bag.write_bytes(fixture.read_bytes() if fixture.is_file() else b"a recording from another robot")
    code, out, err = run(capsys, "replay", str(bag), "--json")
    assert code == 2 and "Traceback" not in err
    assert "no harness journal beside it" in err and "--journal PATH" in err and "--scenario FILE" in err, err
    assert json.loads(out)["bag"] == str(bag)
    # a journal named on the command line is the one looked for
    code, _, err = run(capsys, "replay", str(bag), "--journal", str(tmp_path / "none.sqlite3"))
    assert code == 2 and f"no journal at {tmp_path / 'none.sqlite3'}" in err
