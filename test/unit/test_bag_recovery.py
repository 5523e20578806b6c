"""Bags a crash left unfinished: read by a linear scan, audited, finalised by a restarted store.

An unfinished bag is built the way a crash leaves one: the bytes a store had
written (and flushed) at some moment, cut at a chosen point, in a bag
directory no live writer holds. The SIGKILL of a real writer is in
test/integration/test_bag_crash.py.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from mcap.reader import make_reader
from mcap_ros2._dynamic import serialize_dynamic

from robot_harness.core.completion import EvidenceRef
from robot_harness.core.records import EventType, JournalEvent
from robot_harness.evidence import (
    BagFormatError,
    EvidenceError,
    EvidenceNotFound,
    McapEvidenceStore,
    MemoryEvidenceStore,
    MessageDefinitions,
    bag_state,
    read_bag_messages,
    read_bag_metadata,
)
from robot_harness.evidence.audit import audit_mission

STRING = "std_msgs/msg/String"
T0 = 1_700_000_000_000_000_000
N = 6


def string_cdr(text: str) -> bytes:
    return serialize_dynamic(STRING, MessageDefinitions().full_text(STRING))[STRING]({"data": text})


class Written:
    """A bag written by a store, with the refs it returned and each message record's end offset."""

    def __init__(self, root: Path, *, close: bool) -> None:
        self.store = McapEvidenceStore(root, ros_distro="kilted")
        self.store.open_bag("m-1.mcap", metadata={"mission_id": "m-1", "goal": "patrol"})
        self.store.add_channel("/chatter", STRING)
        self.store.add_channel("/other", STRING)
        self.path = root / "m-1" / "m-1.mcap"
        self.refs: list[EvidenceRef] = []
        self.ends: list[int] = []
        for i in range(N):
            topic = "/chatter" if i % 2 == 0 else "/other"
            self.refs.append(self.store.write(topic, string_cdr(f"message {i}"), log_time_ns=T0 + i))
            self.ends.append(self.path.stat().st_size)
        self.data_end = self.path.stat().st_size
        if close:
            self.store.close()
        self.blob = self.path.read_bytes()


@pytest.fixture
def written(tmp_path) -> Written:
    return Written(tmp_path / "live", close=True)


def crashed(written: Written, root: Path, cut: int, *, tail: bytes = b"") -> McapEvidenceStore:
    """A bag directory holding ``written``'s first ``cut`` bytes (plus ``tail``), as a crash leaves it."""
    (root / "m-1").mkdir(parents=True)
    (root / "m-1" / "m-1.mcap").write_bytes(written.blob[:cut] + tail)
    return McapEvidenceStore(root, ros_distro="kilted")


def records(path: Path) -> list[tuple[str, int, bytes]]:
    return [(m.topic, m.log_time_ns, m.data) for m in read_bag_messages(path)]


def journal_citing(refs: list[EvidenceRef]) -> list[JournalEvent]:
    return [JournalEvent(seq=i + 1, event_id=f"ev-{i}", type=EventType.WORLD_SNAPSHOT_CAPTURED, stamp=1.0,
                         mission_id="m-1", snapshot_id=f"snap-{i}",
                         payload={"bag_ref": ref.model_dump(mode="json")})
            for i, ref in enumerate(refs)]


# --------------------------------------------------------------------------- reading


def test_a_bag_without_summary_or_footer_reads_every_record(written, tmp_path):
    store = crashed(written, tmp_path / "after", written.data_end)  # what was on disk while the bag was open
    state = store.bag_state("m-1.mcap")
    assert (state.finalised, state.recording, state.interrupted) == (False, False, True)
    assert state.recovered_records == N and state.truncated_bytes == 0 and state.lost_record == ""
    assert "unfinalised" in state.note and f"{N} complete messages" in state.note
    assert [store.read(ref) for ref in written.refs] == [string_cdr(f"message {i}") for i in range(N)]
    assert records(store.bag_dir("m-1.mcap")) == records(written.path)


@pytest.mark.parametrize("into", [1, 5, 9, 20, 31, -1], ids=lambda n: f"cut{n}")
def test_a_record_cut_short_loses_only_that_record(written, tmp_path, into):
    """Cut inside the last message record: in its prefix, its header, its data, one byte short."""
    start = written.ends[-2]
    cut = written.ends[-1] + into if into < 0 else start + into
    store = crashed(written, tmp_path / "after", cut)
    state = store.bag_state("m-1.mcap")
    assert not state.finalised and state.recovered_records == N - 1
    assert state.truncated_bytes == cut - start
    assert state.lost_record.startswith("a message on /other (sequence 3") == (into >= 31 or into < 0)
    for ref in written.refs[:-1]:
        assert store.read(ref)
    with pytest.raises(EvidenceNotFound) as err:
        store.read(written.refs[-1])
    assert "m-1.mcap" in err.value.message and "unfinalised" in err.value.message
    assert f"{cut - start} bytes after the last complete record were lost" in err.value.message
    assert len(records(store.bag_dir("m-1.mcap"))) == N - 1


def test_a_torn_tail_of_zeros_is_not_a_record(written, tmp_path):
    """A file system can leave zeros where the last write was (the size grew, the data did not land)."""
    store = crashed(written, tmp_path / "after", written.data_end, tail=bytes(100))
    state = store.bag_state("m-1.mcap")
    assert state.recovered_records == N and state.truncated_bytes == 100 and not state.finalised
    assert store.read(written.refs[-1]) == string_cdr(f"message {N - 1}")


def test_a_finished_bag_cut_in_its_summary_keeps_every_message(written, tmp_path):
    store = crashed(written, tmp_path / "after", len(written.blob) - 40)
    state = store.bag_state("m-1.mcap")
    assert not state.finalised and state.recovered_records == N
    assert all(store.read(ref) for ref in written.refs)
    assert read_bag_metadata(store.bag_dir("m-1.mcap"))["message_count"] == N  # metadata.yaml is not there...
    assert not (store.bag_dir("m-1.mcap") / "metadata.yaml").exists()  # ...the record in the file was read


def test_a_file_that_is_not_mcap_is_a_format_error(tmp_path):
    path = tmp_path / "m-9" / "m-9.mcap"
    path.parent.mkdir()
    path.write_bytes(b"not an mcap file at all")
    with pytest.raises(BagFormatError):
        bag_state(path)


def test_evidence_errors_never_have_an_empty_message():
    err = EvidenceError("", bag="m-1.mcap")
    assert err.message.strip() and "m-1.mcap" in err.message
    assert EvidenceNotFound("  ").message.startswith("evidence_not_found")


# --------------------------------------------------------------------------- the audit


def test_the_audit_of_an_unfinalised_bag_is_ok_and_says_so(written, tmp_path):
    crashed(written, tmp_path / "after", written.data_end)
    report = audit_mission(journal_citing(written.refs), bag_dir=tmp_path / "after")
    assert report.ok and len(report.checks) == N
    [bag] = report.bags
    assert (bag.bag, bag.finalised, bag.interrupted, bag.recovered_records) == ("m-1.mcap", False, True, N)
    assert (bag.cited, bag.missing, bag.truncated_bytes) == (N, 0, 0)
    assert report.unfinalised == [bag] and report.notes == [bag.note] and "unfinalised" in bag.note
    dumped = report.model_dump(mode="json")
    assert dumped["bags"][0]["finalised"] is False  # what `journal verify --json` prints


def test_the_audit_names_what_a_crash_lost_and_where(written, tmp_path):
    crashed(written, tmp_path / "after", written.ends[-1] - 3)
    report = audit_mission(journal_citing(written.refs), bag_dir=tmp_path / "after")
    assert not report.ok
    [failure] = report.failures
    assert failure.id == written.refs[-1].id and failure.code == "evidence_not_found"
    assert "m-1.mcap" in failure.problem and "unfinalised" in failure.problem and "lost" in failure.problem
    [bag] = report.bags
    assert (bag.recovered_records, bag.cited, bag.missing) == (N - 1, N, 1)
    assert bag.lost_record.startswith("a message on /other")


def test_the_audit_of_a_closed_bag_has_no_notes(written):
    report = audit_mission(journal_citing(written.refs), bag_dir=written.path.parent.parent)
    assert report.ok and report.notes == [] and report.bags[0].finalised and not report.bags[0].interrupted


def test_the_audit_of_a_missing_bag_names_the_file(written, tmp_path):
    report = audit_mission(journal_citing(written.refs[:1]), bag_dir=tmp_path / "nowhere")
    [failure] = report.failures
    assert "no bag file" in failure.problem and "m-1.mcap" in failure.problem
    assert report.bags[0].exists is False and report.notes == [report.bags[0].note]


def test_the_audit_never_rewrites_a_bag(written, tmp_path):
    store = crashed(written, tmp_path / "after", written.data_end)
    before = store.bag_dir("m-1.mcap").joinpath("m-1.mcap").read_bytes()
    audit_mission(journal_citing(written.refs), bag_dir=tmp_path / "after")
    assert store.bag_dir("m-1.mcap").joinpath("m-1.mcap").read_bytes() == before


# --------------------------------------------------------------------------- finalisation


def test_finalising_rewrites_an_interrupted_bag_into_a_finished_one(written, tmp_path):
    cut = written.ends[-1] - 3
    store = crashed(written, tmp_path / "after", cut)
    path = store.bag_dir("m-1.mcap") / "m-1.mcap"
    before = records(path)
    [done] = store.finalise_interrupted()
    assert (done.action, done.recovered_records, done.truncated_bytes) == ("finalised", N - 1, cut - written.ends[-2])
    assert done.lost_record.startswith("a message on /other") and "finalised" in done.note

    assert records(path) == before  # the same messages, bytes and times
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None and summary.statistics.message_count == N - 1
    assert sorted(c.topic for c in summary.channels.values()) == ["/chatter", "/other"]
    fresh = McapEvidenceStore(tmp_path / "after")
    assert [fresh.read(ref) for ref in written.refs[:-1]] == [string_cdr(f"message {i}") for i in range(N - 1)]
    state = fresh.bag_state("m-1.mcap")
    assert (state.finalised, state.interrupted, state.truncated_bytes) == (True, True, cut - written.ends[-2])

    on_disk = yaml.safe_load((path.parent / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert on_disk == read_bag_metadata(path)  # metadata.yaml and the file's rosbag2 record agree
    assert on_disk["message_count"] == N - 1 and on_disk["storage_identifier"] == "mcap"
    assert on_disk["custom_data"] == {"mission_id": "m-1", "goal": "patrol", "robot_harness.interrupted": "true",
                                      "robot_harness.truncated_bytes": str(cut - written.ends[-2])}
    counts = {t["topic_metadata"]["name"]: t["message_count"] for t in on_disk["topics_with_message_count"]}
    assert counts == {"/chatter": 3, "/other": 2}
    assert sorted(p.name for p in path.parent.iterdir()) == ["m-1.mcap", "metadata.yaml"]

    report = audit_mission(journal_citing(written.refs[:-1]), bag_dir=tmp_path / "after")
    assert report.ok and report.bags[0].finalised and "after an interrupted recording" in report.bags[0].note


def test_finalising_again_is_a_no_op(written, tmp_path):
    store = crashed(written, tmp_path / "after", written.data_end)
    assert [r.action for r in store.finalise_interrupted()] == ["finalised"]
    path = store.bag_dir("m-1.mcap") / "m-1.mcap"
    stat = path.stat()
    assert store.finalise_interrupted() == []
    assert McapEvidenceStore(tmp_path / "after").finalise_interrupted() == []
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)


def test_a_closed_bag_is_never_touched(written):
    stat = written.path.stat()
    assert McapEvidenceStore(written.path.parent.parent).finalise_interrupted() == []
    assert written.path.stat().st_mtime_ns == stat.st_mtime_ns


def test_a_bag_being_written_is_left_alone(tmp_path):
    live = Written(tmp_path, close=False)  # open: its writer holds the lock
    other = McapEvidenceStore(tmp_path)
    [skipped] = other.finalise_interrupted()
    assert skipped.action == "skipped_recording" and "live process" in skipped.note
    assert live.path.read_bytes() == live.blob
    state = other.bag_state("m-1.mcap")
    assert state.recording and not state.interrupted and state.recovered_records == N
    assert live.store.finalise_interrupted() == []  # its own open bag is not even looked at
    live.store.write("/chatter", string_cdr("still recording"), log_time_ns=T0 + 100)
    live.store.close()
    assert other.finalise_interrupted() == []
    assert McapEvidenceStore(tmp_path).bag_state("m-1.mcap").recovered_records == N + 1


def test_a_finished_bag_without_metadata_yaml_gets_one(written):
    (written.path.parent / "metadata.yaml").unlink()
    [done] = McapEvidenceStore(written.path.parent.parent).finalise_interrupted()
    assert done.action == "metadata_written"
    assert read_bag_metadata(written.path.parent)["message_count"] == N


def test_a_finalisation_that_fails_or_is_killed_loses_nothing(written, tmp_path, monkeypatch):
    """A failed rename leaves the original intact and no temp file; a killed finalisation's temp file
    (half a copy) is replaced by the next one."""
    store = crashed(written, tmp_path / "after", written.data_end)
    path = store.bag_dir("m-1.mcap") / "m-1.mcap"
    original = path.read_bytes()
    real_replace = os.replace

    def no_rename(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_rename)
    [failed] = store.finalise_interrupted()
    assert failed.action == "skipped_unreadable" and "No space left" in failed.note
    assert path.read_bytes() == original
    assert sorted(p.name for p in path.parent.iterdir()) == ["m-1.mcap"]
    monkeypatch.setattr(os, "replace", real_replace)

    (path.parent / ".m-1.mcap.finalising").write_bytes(written.blob[:100])  # what a kill mid-copy leaves
    [done] = store.finalise_interrupted()
    assert done.action == "finalised" and done.recovered_records == N
    assert sorted(p.name for p in path.parent.iterdir()) == ["m-1.mcap", "metadata.yaml"]
    assert records(path) == records(written.path)


def test_a_bag_cut_inside_its_header_becomes_an_empty_finished_bag(written, tmp_path):
    store = crashed(written, tmp_path / "after", 12)
    assert store.bag_state("m-1.mcap").recovered_records == 0
    [done] = store.finalise_interrupted()
    assert done.action == "finalised" and done.recovered_records == 0 and done.truncated_bytes == 4
    assert read_bag_metadata(store.bag_dir("m-1.mcap"))["custom_data"] == {
        "mission_id": "m-1", "robot_harness.interrupted": "true", "robot_harness.truncated_bytes": "4"}
    assert list(read_bag_messages(store.bag_dir("m-1.mcap"))) == []


def test_a_file_that_is_not_mcap_is_never_finalised(tmp_path):
    path = tmp_path / "m-9" / "m-9.mcap"
    path.parent.mkdir()
    path.write_bytes(b"not an mcap file at all")
    [skipped] = McapEvidenceStore(tmp_path).finalise_interrupted()
    assert skipped.action == "skipped_unreadable" and "not an MCAP file" in skipped.note
    assert path.read_bytes() == b"not an mcap file at all"
    assert sorted(p.name for p in path.parent.iterdir()) == ["m-9.mcap"]


def test_the_memory_store_has_nothing_to_finalise():
    assert MemoryEvidenceStore().finalise_interrupted() == []


def test_an_open_bag_names_no_temporary_files(tmp_path):
    live = Written(tmp_path, close=False)
    assert sorted(p.name for p in live.path.parent.iterdir()) == ["m-1.mcap"]
    live.store.close()


def test_finalising_a_larger_bag_keeps_every_record(tmp_path):
    store = McapEvidenceStore(tmp_path / "live")
    store.open_bag("m-2.mcap", metadata={"mission_id": "m-2"})
    store.add_channel("/chatter", STRING)
    payload = string_cdr("x" * 1000)
    for i in range(2000):
        store.write("/chatter", payload, log_time_ns=T0 + i)
    blob = (tmp_path / "live" / "m-2" / "m-2.mcap").read_bytes()
    store.close()
    (tmp_path / "after" / "m-2").mkdir(parents=True)
    (tmp_path / "after" / "m-2" / "m-2.mcap").write_bytes(blob[:-500])
    [done] = McapEvidenceStore(tmp_path / "after").finalise_interrupted()
    assert done.recovered_records == 2000 - 1 and done.seconds < 5
    assert len(list(read_bag_messages(tmp_path / "after" / "m-2"))) == 1999


def test_a_creation_that_died_before_naming_its_bag_is_cleaned_up(tmp_path):
    stale = tmp_path / "m-3" / ".m-3.mcap.4242.creating"
    stale.parent.mkdir()
    stale.write_bytes(b"\x89MCAP0\r\n")
    assert McapEvidenceStore(tmp_path).finalise_interrupted() == []
    assert not stale.exists()


def test_an_unfinished_bag_decodes_with_its_own_schemas(written, tmp_path):
    from robot_harness.evidence.bag import read_bag_decoded

    store = crashed(written, tmp_path / "after", written.ends[-1] - 1)
    decoded = [msg.data for _m, msg in read_bag_decoded(store.bag_dir("m-1.mcap"), topics=["/chatter", "/other"])]
    assert decoded == [f"message {i}" for i in range(N - 1)]


FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "bags"


@pytest.mark.skipif(not (FIXTURES / "rosbag2_talker.mcap").is_file(), reason="rosbag2 fixtures not found")
def test_a_chunked_rosbag2_bag_is_read_by_the_scan_and_a_cut_chunk_is_lost_whole(tmp_path):
    import hashlib

    blob = (FIXTURES / "rosbag2_talker.mcap").read_bytes()
    (tmp_path / "whole" / "m-t").mkdir(parents=True)
    (tmp_path / "whole" / "m-t" / "m-t.mcap").write_bytes(blob)
    messages = list(read_bag_messages(tmp_path / "whole" / "m-t" / "m-t.mcap"))
    refs = [EvidenceRef.for_bag("m-t.mcap", m.topic, m.log_time_ns, sha256=hashlib.sha256(m.data).hexdigest())
            for m in messages]
    whole = McapEvidenceStore(tmp_path / "whole")
    assert [whole.read(ref) for ref in refs] == [m.data for m in messages]  # messages inside a chunk
    assert whole.bag_state("m-t.mcap").finalised and len(messages) == 20

    (tmp_path / "cut" / "m-t").mkdir(parents=True)
    with open(tmp_path / "whole" / "m-t" / "m-t.mcap", "rb") as f:
        [chunk] = make_reader(f).get_summary().chunk_indexes
    cut = chunk.chunk_start_offset + chunk.chunk_length // 2  # inside its one chunk
    (tmp_path / "cut" / "m-t" / "m-t.mcap").write_bytes(blob[:cut])
    state = McapEvidenceStore(tmp_path / "cut").bag_state("m-t.mcap")
    assert not state.finalised and state.recovered_records == 0 and state.lost_record.startswith("a chunk record")
    with pytest.raises(EvidenceNotFound, match="unfinalised"):
        McapEvidenceStore(tmp_path / "cut").read(refs[0])
