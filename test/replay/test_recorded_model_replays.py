"""Recorded model turns keep replaying: each ``test/replay/<scenario>.<source>.jsonl``
is served by the replay planner backend (no model, no network) on the real
graph, and the mission must end as its scenario expects.

``demo.fake-openai.jsonl`` was recorded through the real ``openai`` client
from the scripted local server in ``test/fake_openai.py`` (a sloppy model:
unknown tool, malformed arguments, a 429, prose, an early done). Recordings
of real models go here too: ``robot-harness demo --planner llm --model M
--record test/replay/demo.<model>.jsonl`` (see the README).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.scenario import load_scenario
from robot_harness.runner import run_scenario

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RECORDINGS = sorted(HERE.glob("*.jsonl"))


def test_there_is_at_least_one_recording() -> None:
    assert RECORDINGS, "no recorded model turns under test/replay"


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_a_recorded_mission_replays_to_its_expected_end(recording: Path, tmp_path: Path) -> None:
    scenario = load_scenario(REPO / "scenarios" / f"{recording.name.split('.')[0]}.yaml")
    report = run_scenario(scenario, journal_path=tmp_path / "journal.sqlite3",
                          extra_overrides={"planner": {"backend": "replay", "replay_file": str(recording)}})
    assert report["status"] == scenario.expect["status"], report["summary"]
    if report["status"] == "SUCCEEDED":
        assert report["commit"] and report["verdict"]["goal_verdict"] == "verified_done"
    # a replay costs no model calls, yet reports the recorded tokens
    assert report["model_usage"]["llm_calls"] > 0 and report["model_usage"]["total_tokens"] > 0
