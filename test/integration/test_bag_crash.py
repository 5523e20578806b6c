"""A recording killed with SIGKILL: its bag is read, audited, left alone while the writer lives,
and finalised by the recorder that comes up after it (issue 13, point 4).

The writer is a real child process writing through ``McapEvidenceStore`` (what
the supervisor's recorder does); it prints each ref once the store has
returned it, i.e. once the message is flushed, and is killed mid-write.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robot_harness.core.completion import EvidenceRef
from robot_harness.core.records import EventType, JournalEvent
from robot_harness.evidence import McapEvidenceStore, read_bag_messages
from robot_harness.evidence.audit import audit_mission

WRITER = r"""
import sys
from mcap_ros2._dynamic import serialize_dynamic
from robot_harness.evidence import McapEvidenceStore, MessageDefinitions

STRING = "std_msgs/msg/String"
encode = serialize_dynamic(STRING, MessageDefinitions().full_text(STRING))[STRING]
store = McapEvidenceStore(sys.argv[1])
store.open_bag("m-k.mcap", metadata={"mission_id": "m-k", "goal": "killed mid-mission"})
store.add_channel("/robot_harness/journal", STRING)
store.add_channel("/odom", STRING)
i = 0
while True:
    i += 1
    topic = "/odom" if i % 3 else "/robot_harness/journal"
    ref = store.write(topic, encode({"data": "x" * (i % 700) + str(i)}), log_time_ns=1_700_000_000_000_000_000 + i)
    print(ref.model_dump_json(), flush=True)
"""


def journal_citing(refs: list[EvidenceRef]) -> list[JournalEvent]:
    return [JournalEvent(seq=i + 1, event_id=f"ev-{i}", type=EventType.WORLD_SNAPSHOT_CAPTURED, stamp=1.0,
                         mission_id="m-k", snapshot_id=f"snap-{i}", payload={"bag_ref": ref.model_dump(mode="json")})
            for i, ref in enumerate(refs)]


def kill_mid_write(root: Path, *, at_least: int = 300) -> list[EvidenceRef]:
    """Start the writer, check its bag is left alone while it lives, SIGKILL it; the refs it was given."""
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    refs: list[EvidenceRef] = []
    try:
        deadline = time.monotonic() + 60
        while len(refs) < at_least:
            line = child.stdout.readline()
            assert line, f"the writer died: {child.stderr.read()}"
            refs.append(EvidenceRef.model_validate_json(line))
            assert time.monotonic() < deadline, "the writer is too slow"
        # While it writes, another store (a supervisor restarted beside it) must not touch it.
        [skipped] = McapEvidenceStore(root).finalise_interrupted()
        assert skipped.action == "skipped_recording"
        assert McapEvidenceStore(root).bag_state("m-k.mcap").recording
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        rest = child.stdout.read()
        child.stdout.close()
        child.stderr.close()
    refs += [EvidenceRef.model_validate_json(line) for line in rest.splitlines() if line.strip().endswith("}")]
    assert child.returncode == -signal.SIGKILL
    return refs


def test_a_killed_recording_is_recovered_audited_and_finalised(tmp_path):
    root = tmp_path / "bags"
    refs = kill_mid_write(root)

    store = McapEvidenceStore(root)
    state = store.bag_state("m-k.mcap")
    assert (state.finalised, state.recording, state.interrupted) == (False, False, True)
    assert state.recovered_records >= len(refs)  # everything the writer was told is written is there

    report = audit_mission(journal_citing(refs), bag_dir=root)
    assert report.ok, report.failures
    [bag] = report.bags
    assert not bag.finalised and bag.cited == len(refs) and bag.missing == 0 and "unfinalised" in bag.note

    before = [(m.topic, m.log_time_ns, m.data) for m in read_bag_messages(root / "m-k")]
    [done] = McapEvidenceStore(root).finalise_interrupted()
    assert done.action == "finalised" and done.recovered_records == len(before) == state.recovered_records
    assert [(m.topic, m.log_time_ns, m.data) for m in read_bag_messages(root / "m-k")] == before
    after = audit_mission(journal_citing(refs), bag_dir=root)
    assert after.ok and after.bags[0].finalised and after.bags[0].interrupted
    assert McapEvidenceStore(root).finalise_interrupted() == []


def test_the_recorder_that_comes_up_next_finalises_the_killed_bag(tmp_path):
    rclpy = pytest.importorskip("rclpy")
    from rclpy.node import Node

    from robot_harness.nodes.recorder import MissionRecorder

    root = tmp_path / "bags"
    refs = kill_mid_write(root, at_least=50)
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = Node("restarted_supervisor_recorder", context=context)
        recorder = MissionRecorder(node, McapEvidenceStore(root))
        recorder.subscribe()  # what the supervisor's configure calls
        try:
            state = McapEvidenceStore(root).bag_state("m-k.mcap")
            assert state.finalised and state.interrupted and state.recovered_records >= len(refs)
            assert (root / "m-k" / "metadata.yaml").read_text().startswith("rosbag2_bagfile_information:")
            assert recorder.finalise_interrupted() == []  # idempotent
        finally:
            recorder.close()
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
