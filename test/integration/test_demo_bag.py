"""The demo's mission bag has every topic the shipped Foxglove layout shows (docs/foxglove.md)."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from mcap.reader import make_reader  # noqa: E402

from robot_harness.core.scenario import load_scenario  # noqa: E402
from robot_harness.evidence import foxglove as fx  # noqa: E402
from robot_harness.runner import run_scenario  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LIVE_ONLY = {fx.PLACE_LABELS_TOPIC, fx.PROGRESS_TOPIC}
"""Served by the live bridge only (documented in docs/foxglove.md); a bag has no labels or progress channel."""


def test_the_demo_bag_carries_every_topic_the_layout_needs(tmp_path):
    layout = (REPO / "config" / "foxglove_layout.json").read_text()
    wanted = set(re.findall(r'"(/[A-Za-z0-9_/]+)', layout)) - LIVE_ONLY
    assert {fx.LOG_TOPIC, fx.POSE_TOPIC, fx.PATH_TOPIC, "/amcl_pose"} <= wanted
    report = run_scenario(load_scenario(REPO / "scenarios" / "demo.yaml"), journal_path=tmp_path / "j.sqlite3")
    assert report["status"] == "SUCCEEDED", report["summary"]
    bag = Path(report["bag"]["path"])
    with bag.open("rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        topics = {ch.id: ch.topic for ch in summary.channels.values()}
        counts = Counter(topics[cid] for cid, n in summary.statistics.channel_message_counts.items() for _ in range(n))
    missing = sorted(t for t in wanted if counts.get(t, 0) == 0)
    assert not missing, f"the layout shows {missing}, absent from the demo bag {bag} (has {dict(counts)})"
    docs = (REPO / "docs" / "foxglove.md").read_text()
    assert all(t in docs for t in wanted), "every layout topic is explained in docs/foxglove.md"
