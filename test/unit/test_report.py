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


def _mission_bag(case: str) -> Path:
    (bag,) = [d for d in (REG / case).glob("mission-*") if d.is_dir()]
    return bag


def _trajectory(page: str) -> tuple[str, str]:
    png = re.search(r'alt="trajectory" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page).group(1)
    caption = re.search(r"<h2>Trajectory</h2>.*?<small>(.*?)</small>", page, re.S).group(1)
    return png, caption


def test_the_trajectory_is_the_path_the_bag_recorded_when_the_bag_is_there():
    from robot_harness.evidence.bag import read_bag_messages

    journal = journal_from_jsonl(REG / "patrol-none.jsonl")
    (mission,) = [m["mission_id"] for m in journal.missions()]
    bag = _mission_bag("patrol-none")
    recorded = sum(1 for _ in read_bag_messages(bag, topics=["/amcl_pose"]))
    with_bag, caption = _trajectory(render_report(journal, mission, bag=bag))
    assert f"{recorded} poses recorded on <code>/amcl_pose</code> in the mission bag" in caption
    assert recorded > 20 and "shown" not in caption, "a short mission is plotted whole"
    without, fallback = _trajectory(render_report(journal, mission))  # the bag's recorded path no longer exists
    assert "from the journal's snapshots" in fallback and with_bag != without


def test_a_long_recorded_path_is_downsampled(monkeypatch):
    import robot_harness.evidence.report as report

    monkeypatch.setattr(report, "_PATH_MAX_POINTS", 10)
    journal = journal_from_jsonl(REG / "patrol-none.jsonl")
    (mission,) = [m["mission_id"] for m in journal.missions()]
    _, caption = _trajectory(render_report(journal, mission, bag=_mission_bag("patrol-none")))
    assert re.search(r"\d+ poses recorded on <code>/amcl_pose</code> .*, 10 shown", caption), caption


def test_an_unreadable_bag_is_said_and_the_journal_poses_are_plotted(tmp_path: Path):
    journal = journal_from_jsonl(REG / "patrol-none.jsonl")
    (mission,) = [m["mission_id"] for m in journal.missions()]
    _, caption = _trajectory(render_report(journal, mission, bag=tmp_path / "gone"))
    assert "could not be read (evidence_not_found" in caption and "from the journal's snapshots" in caption
    _, caption = _trajectory(render_report(journal, mission, bag=_mission_bag("patrol-none"), pose_topic="/nope"))
    assert "has no /nope messages" in caption
    _, caption = _trajectory(render_report(journal, mission, bag=_mission_bag("patrol-none"),
                                           pose_topic="/robot_harness/verdicts"))
    assert "could not be read (bag_format: /robot_harness/verdicts carries std_msgs/msg/String" in caption


def test_the_plotted_pose_topic_is_the_one_the_snapshots_took_their_pose_from():
    """A graph under a namespace records /robot1/amcl_pose: the report plots that topic, not /amcl_pose; a TF
    pose source is no topic; without snapshots the default stands."""
    from robot_harness.core.payloads import WorldSnapshotCaptured, payload_of
    from robot_harness.core.records import EventType
    from robot_harness.evidence.report import _POSE_TOPIC, _pose_source

    journal = journal_from_jsonl(REG / "inspection-none.jsonl")
    (mission,) = [m["mission_id"] for m in journal.missions()]
    events = journal.events(mission_id=mission)
    assert _pose_source(events) == _POSE_TOPIC == "/amcl_pose"  # the recorded graph, at the root
    snap = next(payload_of(e, WorldSnapshotCaptured).snapshot for e in events
                if e.type is EventType.WORLD_SNAPSHOT_CAPTURED)

    def event(source: str) -> tuple:
        moved = snap.model_copy(update={"pose_meta": snap.pose_meta.model_copy(update={"source": source})})
        return (EventType.WORLD_SNAPSHOT_CAPTURED, {"snapshot": moved.model_dump(mode="json"), "reason": "test"})

    class Event:  # a journal event's two fields, as _pose_source reads them
        def __init__(self, pair: tuple) -> None:
            self.type, self.payload = pair

    namespaced = [Event(event("/robot1/amcl_pose")), Event(event("/robot1/amcl_pose")), Event(event("tf:map->base_link"))]
    assert _pose_source(namespaced) == "/robot1/amcl_pose"
    assert _pose_source([Event(event("tf:map->base_link"))]) == "/amcl_pose"
    assert _pose_source([]) == "/amcl_pose"
