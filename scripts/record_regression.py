#!/usr/bin/env python3
"""Record the verdict-regression set: a few benchmark missions, run gated on the simulated
world, kept as journal exports (JSON lines) under test/replay/regression/.

test/replay/test_regression_replays.py replays each one's verification and commit gate and
fails on any verdict that differs: a change to the verifier, the gate or the contracts that
alters a recorded decision shows up there. Re-record deliberately after such a change:
``python scripts/record_regression.py``.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "test" / "replay" / "regression"
SCENARIOS = ("inspection-none", "patrol-none", "multistep-none", "navigation-early_success",
             "inspection-localization_jump", "message-confident_done", "speech-stale_pose",
             "navigation-verifier_uncertainty")


def main() -> int:
    sys.path.insert(0, str(REPO))
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.scenario import load_scenario
    from robot_harness.core.timeline import export_events
    from robot_harness.eval.modes import run_one
    from robot_harness.eval.run import SUITE_DIR

    OUT.mkdir(parents=True, exist_ok=True)
    for name in SCENARIOS:
        with tempfile.TemporaryDirectory() as work:
            result = run_one(load_scenario(SUITE_DIR / f"{name}.yaml"), "gated", workdir=Path(work), journal="sqlite")
            j = SqliteJournal(Path(work) / "journal.sqlite3", clock=SystemClock(), ids=IdGenerator(None))
            j.setup()
            (OUT / f"{name}.jsonl").write_text(export_events(j.events(), "jsonl"))
            j.close()
            arts = sorted((Path(work) / "artifacts").glob("*"))
            if arts:  # the images the verdicts cite, re-hashed by the replay
                (OUT / name).mkdir(exist_ok=True)
                for a in arts:
                    shutil.copy2(a, OUT / name / a.name)
        print(f"{name}: {result.status} -> {(OUT / f'{name}.jsonl').relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
