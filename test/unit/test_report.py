"""The mission report a person reads: content from the journal, images embedded and re-hashed."""
from __future__ import annotations

import re
from pathlib import Path

from robot_harness.evidence.replay import journal_from_jsonl
from robot_harness.evidence.report import render_report

REG = Path(__file__).resolve().parents[1] / "replay" / "regression"


def test_the_report_shows_goal_contract_verdicts_trajectory_actions_model_and_images():
    journal = journal_from_jsonl(REG / "inspection-none.jsonl")
    (mission,) = [m["mission_id"] for m in journal.missions()]
    page = render_report(journal, mission, artifacts_dir=REG / "inspection-none")
    assert "Go to office_storage, capture an image there and return to dock." in page
    assert '<span class="SUCCEEDED">SUCCEEDED</span>' in page
    assert page.count('<span class="satisfied">satisfied</span>') == 3, "every obligation with its verdict"
    assert "committed by the gate" in page
    assert re.search(r'alt="trajectory" src="data:image/png;base64,[A-Za-z0-9+/=]{500,}"', page)
    assert "office_storage" in page and "REQUESTED" in page and "VERIFYING" in page
    assert "navigate_to(" in page and "capture_image(" in page and "done:" in page
    assert 'class="evidence"' in page and "sha256 matches" in page
    assert "src=\"http" not in page and "<script" not in page, "self-contained, nothing fetched, nothing run"


def test_a_missing_image_is_marked_not_hidden(tmp_path: Path):
    journal = journal_from_jsonl(REG / "inspection-none.jsonl")
    (mission,) = [m["mission_id"] for m in journal.missions()]
    page = render_report(journal, mission, artifacts_dir=tmp_path)
    assert 'class="bad">missing:' in page


def test_an_unverified_mission_says_so():
    journal = journal_from_jsonl(REG / "message-confident_done.jsonl")
    (mission,) = [m["mission_id"] for m in journal.missions()]
    page = render_report(journal, mission)
    assert '<span class="UNKNOWN">UNKNOWN</span>' in page and "committed by the gate" not in page
    assert '<span class="continue">continue</span>' in page
