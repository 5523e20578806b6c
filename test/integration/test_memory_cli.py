"""``robot-harness memory`` through the real entry point (``python -m robot_harness``), on a journal of
real missions (the in-process eval runner on the simulated robot): record (a backfill, idempotent), show,
forget (append-only), export, an old journal, and the exit codes of a user's mistakes (never 70)."""
from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from robot_harness.core.scenario import load_scenario
from robot_harness.eval.modes import run_one

REPO = Path(__file__).resolve().parents[2]
EVAL = REPO / "scenarios" / "eval"
NOT_RECORDED = {"memory": {"record": False}}
"""The runner remembers each mission as it ends; these missions are left for ``memory record``."""


def memory(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robot_harness", "memory", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def doc(p: subprocess.CompletedProcess) -> dict:
    assert p.stdout.strip(), p.stderr
    return json.loads(p.stdout)


def count(journal: Path, table: str) -> int:
    con = sqlite3.connect(journal)
    try:
        return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608 - a test's own names
    finally:
        con.close()


@pytest.fixture(scope="module")
def missions_journal(tmp_path_factory) -> Path:
    """One succeeded mission (inspection) and one failed (no path to office_storage), in one journal file."""
    root = tmp_path_factory.mktemp("memory-cli")
    path = root / "journal.sqlite3"
    statuses = [run_one(load_scenario(EVAL / f"{name}.yaml"), "gated", workdir=root / name, journal_path=path,
                    overrides=NOT_RECORDED).status
                for name in ("inspection-none", "inspection-no_path")]
    assert statuses == ["SUCCEEDED", "FAILED"]
    return path


@pytest.fixture
def journal(missions_journal, tmp_path) -> Path:
    path = tmp_path / "journal.sqlite3"
    shutil.copy(missions_journal, path)
    return path


def test_record_show_forget_and_export(journal):
    j = str(journal)
    r = memory("record", "--journal", j, "--json")
    assert r.returncode == 0, r.stderr
    assert (doc(r)["episodes"], len(doc(r)["missions"])) == (2, 2) and doc(r)["outcomes"] >= 3
    again = memory("record", "--journal", j, "--json")
    assert again.returncode == 0 and (doc(again)["episodes"], doc(again)["outcomes"]) == (0, 0), again.stdout

    s = memory("show", "--journal", j, "--json")
    assert s.returncode == 0, s.stderr
    shown = doc(s)
    by_verification = {e["verification"]: e for e in shown["episodes"]}
    assert set(by_verification) == {"verified", "failed"}
    verified = by_verification["verified"]
    assert verified["outcome"] == "SUCCEEDED" and [p["skill"] for p in verified["plan"]] == [
        "navigate_to", "capture_image", "navigate_to"]
    nav = next(p for p in shown["providers"] if p["capability"] == "navigation")
    assert nav["provider"] == "sim/navigate_to_pose" and nav["succeeded"] == nav["attempts"] >= 3
    text = memory("show", "--journal", j)
    assert text.returncode == 0 and verified["memory_id"] in text.stdout and "sim/navigate_to_pose" in text.stdout
    only = doc(memory("show", "--journal", j, "--kind", "providers", "--json"))
    assert set(only) == {"providers", "outcomes"}

    # forget: a row is appended, nothing is changed or deleted, and the record is no longer shown
    before = memory("export", "--journal", j)
    assert before.returncode == 0, before.stderr
    rows_before = [json.loads(line) for line in before.stdout.splitlines()]
    n = count(journal, "memory_episodes")
    f = memory("forget", verified["memory_id"], "--journal", j, "--reason", "the map changed", "--by", "alice",
               "--json")
    assert f.returncode == 0, f.stderr
    assert doc(f)["forgot"] == verified["memory_id"] and doc(f)["by"] == "alice"
    assert count(journal, "memory_episodes") == n + 1
    after = [json.loads(line) for line in memory("export", "--journal", j).stdout.splitlines()]
    assert [r for r in after if r["memory_id"] != doc(f)["memory_id"]] == rows_before
    tomb = next(r for r in after if r["memory_id"] == doc(f)["memory_id"])
    assert (tomb["table"], tomb["supersedes"], tomb["valid"], tomb["reason"]) == (
        "memory_episodes", verified["memory_id"], 0, "the map changed")
    current = doc(memory("show", "--journal", j, "--json", "--kind", "episodes"))["episodes"]
    assert verified["memory_id"] not in {e["memory_id"] for e in current}
    everything = doc(memory("show", "--journal", j, "--json", "--all", "--kind", "episodes"))["episodes"]
    assert {e["memory_id"]: e["state"] for e in everything}[verified["memory_id"]] == "forgotten"
    assert {e["memory_id"]: e["state"] for e in everything}[doc(f)["memory_id"]] == "forgetting"
    # forgetting twice and recording again add nothing
    assert memory("forget", verified["memory_id"], "--journal", j, "--reason", "again").returncode == 0
    assert doc(memory("record", "--journal", j, "--json"))["episodes"] == 0
    assert count(journal, "memory_episodes") == n + 1


def test_export_to_a_file_and_as_one_json_array(journal, tmp_path):
    j = str(journal)
    assert memory("record", "--journal", j, "--mission", "last").returncode == 0
    out = tmp_path / "out" / "memory.jsonl"
    e = memory("export", "--journal", j, "--out", str(out))
    assert e.returncode == 0 and e.stdout == "", e.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == doc(memory("export", "--journal", j, "--json"))
    assert [r["table"] for r in rows].count("memory_episodes") == 1  # only the last mission was recorded
    assert {r["mission_id"] for r in rows} == {rows[0]["mission_id"]}


def test_an_old_journal_gets_the_memory_tables_when_a_memory_command_opens_it(journal):
    con = sqlite3.connect(journal)
    con.executescript("DROP TABLE memory_episodes; DROP TABLE memory_provider_outcomes;"
                      "DELETE FROM migrations WHERE name = '0005_memory';")
    con.commit()
    con.close()
    s = memory("show", "--journal", str(journal), "--json")
    assert s.returncode == 0 and doc(s)["episodes"] == [], s.stderr
    assert doc(memory("record", "--journal", str(journal), "--json"))["episodes"] == 2
    con = sqlite3.connect(journal)
    try:
        assert con.execute("SELECT 1 FROM migrations WHERE name = '0005_memory'").fetchone()
    finally:
        con.close()


@pytest.mark.parametrize("args, error", [
    (["forget", "ep-0000000000000000", "--reason", "x"], "unknown_memory"),
    (["record", "--mission", "mission-nope"], "usage_error"),
    (["forget", "ep-0000000000000000"], None),  # --reason is required
    (["record", "--mission", "last", "--all"], None),  # one or the other
    (["show", "--kind", "everything"], None),
], ids=["unknown-memory-id", "unknown-mission", "no-reason", "mission-and-all", "bad-kind"])
def test_a_users_mistake_exits_2_with_one_line_and_no_traceback(journal, args, error):
    p = memory(*args, "--journal", str(journal), *(["--json"] if error else []))
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr and "error: " in p.stderr.strip().splitlines()[-1], p.stderr
    if error is not None:
        assert doc(p)["error"] == error and doc(p)["exit_code"] == 2


@pytest.mark.parametrize("edit, table, field", [
    ("UPDATE memory_provider_outcomes SET outcome = 'partially' WHERE seq = 1", "memory_provider_outcomes", "outcome"),
    ("UPDATE memory_episodes SET format_version = 2 WHERE seq = 1", "memory_episodes", "format_version"),
    ("UPDATE memory_episodes SET plan = '[{' WHERE seq = 1", "memory_episodes", "a JSON column"),
], ids=["newer-value", "newer-format", "hand-edited-json"])
def test_a_memory_row_this_harness_cannot_read_exits_5_with_one_line(journal, edit, table, field):
    """A row a newer harness wrote, or a hand edit with sqlite-utils: the journal cannot be trusted (exit 5,
    one line naming the table, the row and the field), never an internal error (70)."""
    j = str(journal)
    assert memory("record", "--journal", j).returncode == 0
    con = sqlite3.connect(journal)
    try:
        con.execute(edit)  # noqa: S608 - the test's own statement
        con.commit()
    finally:
        con.close()
    p = memory("show", "--journal", j)
    assert p.returncode == 5, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert "Traceback" not in p.stderr and len(lines) == 1, p.stderr
    assert "unreadable_memory" in lines[0] and table in lines[0] and field in lines[0]
    if field != "a JSON column":
        assert "(seq 1)" in lines[0]
    pj = memory("show", "--journal", j, "--json")
    assert pj.returncode == 5 and (doc(pj)["error"], doc(pj)["exit_code"], doc(pj)["table"], doc(pj)["field"]) == (
        "unreadable_memory", 5, table, field)
    e = memory("export", "--journal", j)  # the rows as stored (a value that does not validate), to see what is wrong
    if field == "a JSON column":  # not even JSON: export cannot give it either
        assert e.returncode == 5 and "Traceback" not in e.stderr and "sqlite-utils" in e.stderr, e.stderr
    else:
        assert e.returncode == 0 and len(e.stdout.splitlines()) == count(journal, "memory_episodes") + count(
            journal, "memory_provider_outcomes")


def test_no_journal_is_a_usage_error(tmp_path):
    p = memory("show", "--journal", str(tmp_path / "none.sqlite3"))
    assert p.returncode == 2 and "no journal at" in p.stderr and "Traceback" not in p.stderr
