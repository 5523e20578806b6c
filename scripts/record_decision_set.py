#!/usr/bin/env python3
"""Record the decision-replay set: a few benchmark missions run gated on the simulated world
(``robot_harness.eval.decisions.record``), each kept as its journal export and its decision tape,
under test/replay/decisions/:

    <case>.jsonl.gz         the journal (robot-harness journal export --format jsonl), gzipped
    <case>.tape.jsonl.gz    the decision tape (robot_harness/core/tape.py: a header line, then the readings), gzipped

test/replay/test_decision_set.py re-runs each mission on its tape alone and fails on the first
event that differs: a code change that makes the harness decide otherwise on a recorded mission
shows up there, with the event and the field. Re-record deliberately after a change meant to do
that: ``python scripts/record_decision_set.py`` (``--out DIR`` writes elsewhere, to look first).
"""
from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "test" / "replay" / "decisions"
SCENARIOS = ("inspection-none", "patrol-none", "multistep-none", "navigation-early_success",
             "inspection-localization_jump", "message-confident_done", "speech-stale_pose",
             "navigation-verifier_uncertainty")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write the set (default {OUT})")
    parser.add_argument("cases", nargs="*", default=list(SCENARIOS), help="benchmark scenarios (default: the set)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from robot_harness.core.scenario import load_scenario
    from robot_harness.core.tape import tape_to_jsonl
    from robot_harness.core.timeline import export_events
    from robot_harness.eval.decisions import record
    from robot_harness.eval.run import SUITE_DIR

    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.cases:
        # a fixed scratch folder: the artifact paths the journal and the tape name come out the same
        work = Path(tempfile.gettempdir()) / "robot_harness-decision-set" / name
        shutil.rmtree(work, ignore_errors=True)
        recording = record(load_scenario(SUITE_DIR / f"{name}.yaml"), workdir=work)
        shutil.rmtree(work, ignore_errors=True)
        recording.tape.meta["scenario"] = name
        # mtime 0: a re-recording with no behaviour change is byte for byte the same
        (args.out / f"{name}.jsonl.gz").write_bytes(gzip.compress(export_events(list(recording.events), "jsonl").encode(),
                                                                  mtime=0))
        (args.out / f"{name}.tape.jsonl.gz").write_bytes(gzip.compress(tape_to_jsonl(recording.tape).encode(), mtime=0))
        print(f"{name}: {recording.status}, {len(recording.events)} events, {len(recording.tape)} readings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
