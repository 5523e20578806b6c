"""The revision loop end to end (issue 17), through the CLI a site would use, on one journal file:

a mission family fails under version 1 for a configuration reason (people call office_storage "the
storage room"; the goal compiler refuses the phrase); ``config propose`` turns those failures into a
candidate; ``config evaluate`` compares it with version 1 (benchmark and held-out scenarios, the
regression set by decision) and passes; ``config release`` is refused without an operator's credential
and with the proposer's own, and goes through with the operator's; the family's missions then succeed
under version 2 (pinned in their MISSION_STARTED); ``config rollback`` returns to version 1 and the
family is refused again; a candidate that touches a protected key is refused, named. The other
generator's candidate (a longer timeout for a slow robot) is evaluated too: the gate refuses it on
its cost (every stalled navigation waits longer) unless the site's tolerance allows that cost.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

RSI = Path(__file__).resolve().parents[2] / "scenarios" / "rsi"
CLI = [sys.executable, "-m", "robot_harness", "config"]
OPERATOR = "op-" + "3" * 20


def config(*args: str, token: str | None = None, timeout: float = 300.0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ROBOT_HARNESS_OPERATOR_TOKEN"}
    env["ROBOT_HARNESS_OPERATOR_TOKEN"] = OPERATOR  # the site's operator credential, as a supervisor has it
    cmd = [*CLI, *args] + (["--token", token] if token is not None else [])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def doc(p: subprocess.CompletedProcess) -> dict:
    assert p.stdout.strip(), p.stderr
    return json.loads(p.stdout)


def statuses(p: subprocess.CompletedProcess) -> dict[str, str]:
    assert p.returncode == 0, p.stderr
    return {m["scenario"]: m["status"] for m in doc(p)["missions"]}


def pinned(journal: Path) -> dict[str, int]:
    con = sqlite3.connect(journal)
    try:
        rows = con.execute("SELECT mission_id, payload FROM events WHERE type = 'MISSION_STARTED'").fetchall()
    finally:
        con.close()
    return {mid: json.loads(p).get("config_version", 0) for mid, p in rows}


def test_a_configuration_revision_is_proposed_evaluated_approved_released_and_rolled_back(tmp_path):
    journal = tmp_path / "journal.sqlite3"
    j = str(journal)
    vocab = sorted(str(p) for p in (RSI / "train").glob("vocab-*.yaml"))
    slow = sorted(str(p) for p in (RSI / "train").glob("slow-*.yaml"))

    # version 1: the family is refused before anything moves; the slow robot times out short of its goals
    first = statuses(config("run", *vocab, *slow, "--journal", j, "--json"))
    assert {s for n, s in first.items() if n.startswith("vocab-")} == {"BLOCKED"}, first
    assert {s for n, s in first.items() if n.startswith("slow-")} <= {"UNKNOWN", "FAILED"}, first
    assert set(pinned(journal).values()) == {1}
    failed_vocab = [m["mission_id"] for m in doc(config("run", *vocab, "--journal", j, "--json"))["missions"]]

    # candidates from the failures; a proposer's credential is recorded
    p = config("propose", "--journal", j, "--json", "--proposer", "rsi-bot", "--token", "bot-" + "7" * 20)
    assert p.returncode == 0, p.stderr
    cands = {c["manifest"]["generator"]: c for c in doc(p)["candidates"]}
    assert set(cands) == {"alias_for_refused_place", "timeout_just_short"}, cands
    alias, longer = cands["alias_for_refused_place"], cands["timeout_just_short"]
    assert alias["overrides"] == {"places": {"office_storage": {"aliases": ["storage room"]}}}
    assert set(alias["manifest"]["motivating_missions"]) >= set(failed_vocab)
    assert alias["manifest"]["rollback_version"] == 1 and alias["manifest"]["target_measure"] == "success_rate"
    again = config("propose", "--journal", j, "--json")
    assert again.returncode == 0 and all(c["existing"] for c in doc(again)["candidates"]), again.stdout
    assert {c["version"] for c in doc(again)["candidates"]} == {alias["version"], longer["version"]}

    # not evaluated yet: refused, and nothing released
    r = config("release", str(alias["version"]), "--journal", j, "--json", token=OPERATOR)
    assert r.returncode == 3 and "no evaluation" in r.stdout, r.stdout

    e = config("evaluate", str(alias["version"]), "--journal", j, "--json")
    assert e.returncode == 0, e.stdout[-2000:] + e.stderr
    ev = doc(e)
    assert ev["passed"] and ev["baseline"] == 1
    rows = {m["measure"]: m for m in ev["measures"]}
    assert rows["success_rate"]["target"] and rows["success_rate"]["candidate"] > rows["success_rate"]["baseline"]
    assert rows["false_completions"]["candidate"] == rows["false_completions"]["baseline"] == 0
    assert {c["scenario"] for c in ev["changed_missions"]} == {"vocab-go-over", "vocab-inspect"}
    assert all(c["candidate"] == "SUCCEEDED" and c["truth_done"] for c in ev["changed_missions"])
    assert len(ev["regression_set"]) >= 8 and all(w["same_decisions"] for w in ev["regression_set"])

    # release: no credential, the proposer's own credential: refused; the operator's: released
    r = config("release", str(alias["version"]), "--journal", j, "--json", token="")
    assert r.returncode == 3 and "needs an operator" in doc(r)["message"], r.stdout
    r = config("release", str(alias["version"]), "--journal", j, "--json", token="bot-" + "7" * 20)
    assert r.returncode == 3 and "proposed with" in doc(r)["message"], r.stdout
    r = config("release", str(alias["version"]), "--journal", j, "--json", token="not-the-operator-token")
    assert r.returncode == 3, r.stdout
    r = config("release", str(alias["version"]), "--journal", j, "--json", "--operator", "alice", token=OPERATOR)
    assert r.returncode == 0, r.stdout + r.stderr
    assert doc(r)["approved_as"] == "operator" and doc(r)["previous"] == 1

    # the family now succeeds, pinned to the released version
    after = statuses(config("run", *vocab, "--journal", j, "--json"))
    assert set(after.values()) == {"SUCCEEDED"}, after
    assert sorted(pinned(journal).values()).count(alias["version"]) == len(vocab)

    # the timeout candidate: evaluated against the version released now (its parent was version 1)
    e = config("evaluate", str(longer["version"]), "--journal", j, "--json", "--no-regression")
    ev = doc(e)
    assert e.returncode == 1 and not ev["passed"] and ev["baseline"] == alias["version"]
    assert any("sim_s_per_mission rose beyond the tolerance" in r for r in ev["reasons"]), ev["reasons"]
    assert {"slow-corridor-b", "slow-elevator", "slow-inspection"} <= {
        c["scenario"] for c in ev["changed_missions"] if c["candidate"] == "SUCCEEDED"}
    r = config("release", str(longer["version"]), "--journal", j, "--json", token=OPERATOR)
    assert r.returncode == 3 and "did not pass" in doc(r)["message"]

    # rollback: version 1 again, and the family is refused again
    r = config("rollback", "--journal", j, "--json", "--reason", "test", token="")
    assert r.returncode == 3
    r = config("rollback", "--journal", j, "--json", "--reason", "test", token=OPERATOR)
    assert r.returncode == 0 and doc(r)["version"] == 1, r.stdout + r.stderr
    again = statuses(config("run", *vocab, "--journal", j, "--json"))
    assert set(again.values()) == {"BLOCKED"}, again

    # a candidate touching a protected key is refused, named, and not kept
    before = len(doc(config("history", "--journal", j, "--json"))["versions"])
    for key in ("navigation.preconditions.battery_min=0.0", "interactions.approval_policy.requires_approval=owner",
                "verification.xy_tolerance_m=5.0"):
        r = config("propose", "--journal", j, "--json", "--set", key)
        assert r.returncode == 3 and doc(r)["error"] == "protected_key", r.stdout
        assert key.split("=")[0] in doc(r)["message"]
    h = doc(config("history", "--journal", j, "--json"))
    assert len(h["versions"]) == before and h["active"] == 1
    assert [r["action"] for r in h["releases"]] == ["initial", "release", "rollback"]
    assert h["releases"][1]["operator"] == "alice" and h["releases"][1]["evaluation_id"]
    by_version = {v["version"]: v for v in h["versions"]}
    assert by_version[alias["version"]]["missions"] == len(vocab)
    assert [e["passed"] for e in h["evaluations"]] == [True, False]
