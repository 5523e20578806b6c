"""The kill test (scripts/kill_test.py), small: `robot-harness up` SIGKILLed once with the simulated robot
inside it and once beside it, while a `robot-harness mission` client follows; every count must be zero and
each killed client must print the journaled status within seconds of the restart."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _installed() -> bool:
    return any((Path(p) / "lib" / "robot_harness" / "supervisor").exists()
               for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p)


@pytest.mark.skipif(not _installed(), reason="robot_harness is not built/installed (run make setup)")
def test_sigkill_of_up_leaves_every_client_told_and_nothing_open(tmp_path):
    out = tmp_path / "kill"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "kill_test.py"), "--missions", "1",
                           "--max-kill-s", "0.5", "--seed", "3", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    reports = json.loads((out / "report.json").read_text())
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert set(reports) == {"sim_inside", "sim_outside"}
    for variant, report in reports.items():
        assert report["up_kills"] == 1, (variant, report)
        for key in ("duplicate_physical_dispatches", "committed_events_lost", "false_completions", "unreconciled",
                    "missions_finished_twice", "verify_failures", "clients_untold"):
            assert report[key] == 0, (variant, key, report)
        assert report["admitted_missions"] == 1 and report["journal_integrity"] == "ok"
        rows = json.loads((out / variant / "missions.json").read_text())
        assert rows[0]["client_exit"] == 0 and rows[0]["printed_status"] in {"UNKNOWN", "FAILED", "SUCCEEDED"}
        assert rows[0]["restart_to_answer_s"] < 30.0, rows[0]
