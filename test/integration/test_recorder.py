"""The mission recorder over loopback DDS, checked with an independent MCAP/ROS 2 decoder.

A fake robot publishes what amcl, the odometry and Nav2's action server
would; the recorder writes them raw next to the harness's own records; the
bag is then decoded by mcap-ros2-support (not by our code) from the schemas
in the file, and every field must survive the trip.
"""
from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest

rclpy = pytest.importorskip("rclpy")
mcap_ros2 = pytest.importorskip("mcap_ros2")

import yaml  # noqa: E402
from action_msgs.msg import GoalInfo, GoalStatus, GoalStatusArray  # noqa: E402
from geometry_msgs.msg import PoseWithCovarianceStamped  # noqa: E402
from mcap.reader import make_reader  # noqa: E402
from mcap_ros2._dynamic import generate_dynamic  # noqa: E402
from mcap_ros2.decoder import DecoderFactory  # noqa: E402
from nav2_msgs.action import NavigateToPose  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.qos import (  # noqa: E402
    DurabilityPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_action_status_default,
)
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from unique_identifier_msgs.msg import UUID  # noqa: E402

from robot_harness.evidence import (  # noqa: E402
    EvidenceMismatch,
    EvidenceStoreMisuse,
    McapEvidenceStore,
    read_bag_messages,
)
from robot_harness.msg import ArtifactRef, JournalEvent, WorldSnapshot  # noqa: E402
from robot_harness.nodes.recorder import (  # noqa: E402
    JOURNAL_TOPIC,
    JOURNAL_TYPE,
    SNAPSHOT_TOPIC,
    SNAPSHOT_TYPE,
    VERDICT_TOPIC,
    VERDICT_TYPE,
    MissionRecorder,
    import_message_type,
)

TIMEOUT = 10.0
N = 5
GOAL = bytes(range(16))
FEEDBACK = "/navigate_to_pose/_action/feedback"
STATUS = "/navigate_to_pose/_action/status"


def wait_for(predicate: Callable[[], Any], timeout: float = TIMEOUT, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")


class Ros:
    def __init__(self) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.nodes: list[Node] = []
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def add(self, node: Node) -> Any:
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def run(self, fn: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
        """Run ``fn`` on the executor thread and return its result."""
        task = self.executor.create_task(fn)
        self.executor.wake()
        wait_for(task.done, timeout, f"executor task {fn}")
        return task.result()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        self.thread.join(timeout=5.0)
        for node in self.nodes:
            node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture
def ros():
    r = Ros()
    try:
        yield r
    finally:
        r.close()


class FakeRobot(Node):
    """Publishers with the QoS amcl, the odometry and Nav2's action server offer."""

    def __init__(self, *, context: Any) -> None:
        super().__init__("fake_robot", context=context)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.pose_pub = self.create_publisher(PoseWithCovarianceStamped, "/amcl_pose", latched)
        self.odom_pub = self.create_publisher(Odometry, "/odom", 10)
        self.status_pub = self.create_publisher(GoalStatusArray, STATUS, qos_profile_action_status_default)
        self.feedback_pub = self.create_publisher(NavigateToPose.Impl.FeedbackMessage, FEEDBACK, 10)

    def publishers(self) -> list[Any]:
        return [self.pose_pub, self.odom_pub, self.status_pub, self.feedback_pub]


def pose(i: int) -> PoseWithCovarianceStamped:
    msg = PoseWithCovarianceStamped()
    msg.header.stamp.sec = 100 + i
    msg.header.stamp.nanosec = 250_000_000
    msg.header.frame_id = "map"
    msg.pose.pose.position.x = 1.5 + i
    msg.pose.pose.position.y = -0.5
    msg.pose.pose.orientation.z = 0.25
    msg.pose.pose.orientation.w = 0.75
    msg.pose.covariance[0] = 0.01 * (i + 1)
    msg.pose.covariance[35] = 0.07
    return msg


def odom(i: int) -> Odometry:
    msg = Odometry()
    msg.header.stamp.sec = 200 + i
    msg.header.frame_id = "odom"
    msg.child_frame_id = "base_link"
    msg.twist.twist.linear.x = 0.25 * i
    msg.twist.twist.angular.z = -0.125
    return msg


def status(i: int) -> GoalStatusArray:
    goal = GoalStatus(goal_info=GoalInfo(goal_id=UUID(uuid=list(GOAL))))
    goal.goal_info.stamp.sec = 300 + i
    goal.status = GoalStatus.STATUS_EXECUTING if i < N - 1 else GoalStatus.STATUS_SUCCEEDED
    return GoalStatusArray(status_list=[goal])


def feedback(i: int) -> Any:
    msg = NavigateToPose.Impl.FeedbackMessage()
    msg.goal_id = UUID(uuid=list(GOAL))
    msg.feedback.current_pose.header.frame_id = "map"
    msg.feedback.current_pose.pose.position.x = 0.5 * i
    msg.feedback.distance_remaining = 10.0 - i
    msg.feedback.number_of_recoveries = i
    msg.feedback.navigation_time.sec = i
    return msg


def snapshot() -> WorldSnapshot:
    msg = WorldSnapshot()
    msg.format_version = 1
    msg.snapshot_id = "snap-42"
    msg.mission_id = "mission-7"
    msg.reason = "post_terminal"
    msg.frame_id = "map"
    msg.pose.position.x = 3.25
    msg.yaw = 1.0
    msg.pose_meta.availability = 0
    msg.pose_meta.source = "/amcl_pose"
    msg.controller_state = WorldSnapshot.CONTROLLER_IDLE
    msg.battery_percentage = 0.5
    msg.active_action.action_id = "act-1"
    msg.active_action.state = "SUCCEEDED"
    msg.artifacts = [
        ArtifactRef(uri="file:///tmp/frame.png", sha256="a" * 64, media_type="image/png", size_bytes=1234)
    ]
    return msg


def test_recorder_writes_a_bag_an_independent_decoder_reads(ros, tmp_path):
    robot = ros.add(FakeRobot(context=ros.context))
    host = ros.add(Node("harness_host", context=ros.context))
    store = McapEvidenceStore(tmp_path)
    recorder = MissionRecorder(host, store)
    ros.run(lambda: recorder.start("mission-7", metadata={"goal": "go to the kitchen"}))
    assert recorder.recording and recorder.bag_name == "mission-7.mcap"
    wait_for(lambda: all(p.get_subscription_count() > 0 for p in robot.publishers()), what="recorder matched")
    # Both ends must have matched: /odom is recorded best-effort and /amcl_pose and the
    # status are depth-1 latched, so a message the reader has not matched yet is lost.
    raw_topics = ("/amcl_pose", "/odom", STATUS, FEEDBACK)
    wait_for(lambda: all(recorder.matched_publishers().get(t, 0) > 0 for t in raw_topics),
             what="recorder matched the robot's publishers")

    sent: dict[str, list[Any]] = defaultdict(list)
    for i in range(N):
        for topic, pub, make in (
            ("/amcl_pose", robot.pose_pub, pose),
            ("/odom", robot.odom_pub, odom),
            (STATUS, robot.status_pub, status),
            (FEEDBACK, robot.feedback_pub, feedback),
        ):
            msg = make(i)
            pub.publish(msg)
            sent[topic].append(msg)
        time.sleep(0.01)
    try:
        wait_for(lambda: all(recorder.counts().get(t, 0) >= N for t in sent), what="all raw messages recorded")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; recorded {recorder.counts()}") from None

    snap = snapshot()
    snap_ref = recorder.record(SNAPSHOT_TOPIC, SNAPSHOT_TYPE, snap)
    journal = JournalEvent(format_version=1, seq=9, event_id="ev-9", kind="WORLD_SNAPSHOT_CAPTURED",
                           mission_id="mission-7", snapshot_id="snap-42", payload_json='{"k": 1}')
    journal_ref = recorder.record(JOURNAL_TOPIC, JOURNAL_TYPE, journal)
    verdict_json = json.dumps({"kind": "verdict", "goal_verdict": "verified_done"}, sort_keys=True)
    verdict_ref = recorder.record(VERDICT_TOPIC, VERDICT_TYPE, String(data=verdict_json))
    with pytest.raises(EvidenceStoreMisuse):
        recorder.record(VERDICT_TOPIC, VERDICT_TYPE, journal)  # not a std_msgs/String
    # CDR padding bytes are not zeroed by the serializer: compare messages, not bytes.
    assert deserialize_message(store.read(snap_ref), WorldSnapshot) == snap  # readable while recording

    summary = ros.run(recorder.stop)
    assert not recorder.recording and recorder.skipped == 0
    assert summary.count("/amcl_pose") == summary.count("/odom") == summary.count(STATUS) == N
    assert summary.count(FEEDBACK) == N and summary.count("/battery_state") == 0
    assert summary.count(SNAPSHOT_TOPIC) == summary.count(JOURNAL_TOPIC) == summary.count(VERDICT_TOPIC) == 1
    assert not summary.truncated and summary.metadata["mission_id"] == "mission-7"

    # The refs the harness keeps read back, checksum verified, after the bag is closed.
    assert deserialize_message(store.read(snap_ref), WorldSnapshot) == snap
    assert deserialize_message(store.read(journal_ref), JournalEvent) == journal
    fresh = McapEvidenceStore(tmp_path).read(verdict_ref)
    assert deserialize_message(fresh, String) == String(data=verdict_json)
    with pytest.raises(EvidenceMismatch):
        store.read(snap_ref.model_copy(update={"sha256": "f" * 64}))

    bag_dir = tmp_path / "mission-7"
    path = bag_dir / "mission-7.mcap"
    decoded: dict[str, list[Any]] = defaultdict(list)
    log_times: dict[str, list[int]] = defaultdict(list)
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        header = reader.get_header()
        assert header.profile == "ros2" and "robot_harness" in header.library
        s = reader.get_summary()
        assert {sc.encoding for sc in s.schemas.values()} == {"ros2msg"}
        assert {c.message_encoding for c in s.channels.values()} == {"cdr"}
        channels = {c.topic: c for c in s.channels.values()}
        assert "reliable" in channels["/amcl_pose"].metadata["offered_qos_profiles"]
        assert "transient_local" in channels["/amcl_pose"].metadata["offered_qos_profiles"]
        records = [m for m in reader.iter_metadata() if m.name == "rosbag2"]
        for _schema, channel, message, msg in reader.iter_decoded_messages(
            topics=[t for t in channels if t != FEEDBACK]
        ):
            log_times[channel.topic].append(message.log_time)
            decoded[channel.topic].append(msg)
        # mcap-ros2-support rejects the rosidl type name "*_FeedbackMessage"; decode the very
        # same schema text under a name it accepts.
        feedback_schema = s.schemas[channels[FEEDBACK].schema_id]
        name = "nav2_msgs/NavigateToPoseFeedbackMessage"
        decode = generate_dynamic(name, feedback_schema.data.decode())[name]
        for _schema, channel, message in reader.iter_messages(topics=[FEEDBACK]):
            log_times[FEEDBACK].append(message.log_time)
            decoded[FEEDBACK].append(decode(message.data))
    assert len(records) == 1 and "serialized_metadata" in records[0].metadata
    assert yaml.safe_load(records[0].metadata["serialized_metadata"])["message_count"] == summary.message_count

    for topic, times in log_times.items():
        assert times == sorted(times) and times[0] > 0, topic

    for i, got in enumerate(decoded["/amcl_pose"]):
        want = sent["/amcl_pose"][i]
        assert (got.header.stamp.sec, got.header.stamp.nanosec, got.header.frame_id) == (100 + i, 250_000_000, "map")
        assert got.pose.pose.position.x == want.pose.pose.position.x and got.pose.pose.position.y == -0.5
        assert (got.pose.pose.orientation.z, got.pose.pose.orientation.w) == (0.25, 0.75)
        assert list(got.pose.covariance) == list(want.pose.covariance)
    for i, got in enumerate(decoded["/odom"]):
        assert (got.header.stamp.sec, got.child_frame_id) == (200 + i, "base_link")
        assert got.twist.twist.linear.x == 0.25 * i and got.twist.twist.angular.z == -0.125
    for i, got in enumerate(decoded[STATUS]):
        (goal,) = got.status_list
        assert bytes(goal.goal_info.goal_id.uuid) == GOAL and goal.goal_info.stamp.sec == 300 + i
        assert goal.status == status(i).status_list[0].status
    for i, got in enumerate(decoded[FEEDBACK]):
        assert bytes(got.goal_id.uuid) == GOAL and got.feedback.number_of_recoveries == i
        assert got.feedback.current_pose.pose.position.x == 0.5 * i
        assert got.feedback.distance_remaining == pytest.approx(10.0 - i)
        assert got.feedback.navigation_time.sec == i
    (got,) = decoded[SNAPSHOT_TOPIC]
    assert (got.snapshot_id, got.mission_id, got.reason, got.frame_id) == ("snap-42", "mission-7", "post_terminal", "map")
    assert got.pose.position.x == 3.25 and got.yaw == 1.0 and got.battery_percentage == 0.5
    assert got.controller_state == "idle" and got.pose_meta.source == "/amcl_pose"
    assert (got.active_action.action_id, got.active_action.state) == ("act-1", "SUCCEEDED")
    (artifact,) = got.artifacts
    assert (artifact.uri, artifact.sha256, artifact.size_bytes) == ("file:///tmp/frame.png", "a" * 64, 1234)
    (got,) = decoded[JOURNAL_TOPIC]
    assert (got.seq, got.event_id, got.kind, got.payload_json) == (9, "ev-9", "WORLD_SNAPSHOT_CAPTURED", '{"k": 1}')
    (got,) = decoded[VERDICT_TOPIC]
    assert json.loads(got.data) == {"kind": "verdict", "goal_verdict": "verified_done"}
    assert sum(len(v) for v in decoded.values()) == summary.message_count

    meta = yaml.safe_load((bag_dir / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    counts = {t["topic_metadata"]["name"]: t["message_count"] for t in meta["topics_with_message_count"]}
    assert counts == {t.topic: t.message_count for t in summary.topics}
    assert counts["/amcl_pose"] == N and counts[SNAPSHOT_TOPIC] == 1
    types = {t["topic_metadata"]["name"]: t["topic_metadata"]["type"] for t in meta["topics_with_message_count"]}
    assert types[FEEDBACK] == "nav2_msgs/action/NavigateToPose_FeedbackMessage"
    assert meta["custom_data"] == {"mission_id": "mission-7", "goal": "go to the kitchen"}
    assert meta["message_count"] == summary.message_count
    assert Counter(m.topic for m in read_bag_messages(bag_dir)) == Counter(
        {t: n for t, n in counts.items() if n}
    )


def test_recorder_refuses_misuse_and_stops_cleanly(ros, tmp_path):
    host = ros.add(Node("harness_host", context=ros.context))
    store = McapEvidenceStore(tmp_path)
    recorder = MissionRecorder(host, store)
    with pytest.raises(EvidenceStoreMisuse):
        recorder.record(VERDICT_TOPIC, VERDICT_TYPE, String(data="{}"))  # not recording
    ros.run(lambda: recorder.start("m-1"))
    with pytest.raises(EvidenceStoreMisuse):
        recorder.start("m-2")  # refused before it touches the graph
    subs_while_recording = len(list(host.subscriptions))
    summary = ros.run(recorder.stop)
    assert summary.message_count == 0 and summary.bag == "m-1.mcap"
    assert len(list(host.subscriptions)) == subs_while_recording - 5
    assert ros.run(recorder.stop) == summary  # idempotent
    ros.run(lambda: recorder.start("m-2"))  # the next mission
    ref = recorder.record(VERDICT_TOPIC, VERDICT_TYPE, serialize_message(String(data="{}")))
    assert ref.bag == "m-2.mcap" and ref.sequence == 1
    assert ros.run(recorder.stop).count(VERDICT_TOPIC) == 1


def test_import_message_type_resolves_msg_action_and_service_parts():
    assert import_message_type("geometry_msgs/msg/PoseWithCovarianceStamped") is PoseWithCovarianceStamped
    assert import_message_type("std_msgs/String") is String
    assert import_message_type("nav2_msgs/action/NavigateToPose_FeedbackMessage") is NavigateToPose.Impl.FeedbackMessage
    assert import_message_type("nav2_msgs/action/NavigateToPose_Goal") is NavigateToPose.Goal
    from rcl_interfaces.srv import GetParameters

    assert import_message_type("rcl_interfaces/srv/GetParameters_Response") is GetParameters.Response
    for bad in ("no_pkg/msg/X", "std_msgs/msg/Nope", "nav2_msgs/action/NavigateToPose_Bogus"):
        with pytest.raises(EvidenceStoreMisuse):
            import_message_type(bad)


# --------------------------------------------------------------------------- Foxglove topics


def _decode_all(path: Any) -> tuple[dict[str, list[Any]], dict[str, Any], dict[str, list[int]]]:
    """Every message of a bag decoded by mcap-ros2-support (feedback under a name it accepts)."""
    decoded: dict[str, list[Any]] = defaultdict(list)
    log_times: dict[str, list[int]] = defaultdict(list)
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        s = reader.get_summary()
        channels = {c.topic: c for c in s.channels.values()}
        types = {t: s.schemas[c.schema_id].name for t, c in channels.items()}
        plain = [t for t, name in types.items() if "_FeedbackMessage" not in name]
        for _schema, channel, message, msg in reader.iter_decoded_messages(topics=plain):
            decoded[channel.topic].append(msg)
            log_times[channel.topic].append(message.log_time)
    return decoded, types, log_times


def _stamp(msg_stamp: Any) -> float:
    return msg_stamp.sec + msg_stamp.nanosec * 1e-9


def test_a_mission_bag_carries_the_foxglove_topics(tmp_path):
    """A real mission on the graph: the derived topics decode and agree with the journal."""
    from robot_harness.core.records import WorldSnapshot as SnapshotRecord
    from robot_harness.evidence import foxglove as fx
    from robot_harness.nodes.recorder import DERIVED_TYPES

    from ._graph import DONE, GO_SPOT, of_type, run, scenario

    report, events = run(tmp_path, scenario([GO_SPOT, DONE]))
    assert report["status"] == "SUCCEEDED", report["summary"]
    decoded, types, log_times = _decode_all(report["bag"]["path"])
    for topic, type_name in DERIVED_TYPES.items():
        assert types[topic] == type_name and decoded[topic], topic
        assert log_times[topic] == sorted(log_times[topic]), topic

    # The log: one line per event of the mission, the verdict's at INFO from the verifier.
    lines = decoded[fx.LOG_TOPIC]
    (verdict_event,) = of_type(events, "VERDICT_RECORDED")
    (verdict,) = [m for m in lines if m.function == "VERDICT_RECORDED"]
    assert verdict.level == 20 and verdict.name == "robot_harness.verifier" and verdict.line == verdict_event.seq
    assert "VERIFIED_DONE" in verdict.msg and verdict.file == "journal"
    assert _stamp(verdict.stamp) == pytest.approx(verdict_event.stamp, abs=1e-6)
    assert any(m.function == "COMMIT_RECORDED" and m.name == "robot_harness.gate" for m in lines)
    logged = {m.line for m in lines}
    expected = {e.seq for e in events if e.type.value not in ("WORLD_SNAPSHOT_CAPTURED", "ROBOT_ACTION_PROGRESS",
                                                               "MISSION_FINISHED")}
    # MISSION_FINISHED is journaled after the bag closes (it cites the bag): the engine hands the
    # recorder the ending, which becomes the bag's last log line (line 0: no journal seq yet).
    assert logged == expected | {0}
    assert lines[-1].line == 0 and lines[-1].function == "MISSION_FINISHED" and "SUCCEEDED" in lines[-1].msg

    # The path ends at the final fresh snapshot's pose; the pose topic agrees.
    fresh = [SnapshotRecord.model_validate(e.payload["snapshot"]) for e in of_type(events, "WORLD_SNAPSHOT_CAPTURED")]
    fresh = [s for s in fresh if s.pose is not None and s.pose_meta.availability.value == "AVAILABLE"]
    final = fresh[-1]
    path = decoded[fx.PATH_TOPIC][-1]
    end = path.poses[-1]
    assert path.header.frame_id == end.header.frame_id == final.frame_id == "map"
    assert (end.pose.position.x, end.pose.position.y) == pytest.approx((final.pose.x, final.pose.y), abs=1e-9)
    assert 2.0 * math.atan2(end.pose.orientation.z, end.pose.orientation.w) == pytest.approx(final.pose.yaw, abs=1e-9)
    assert _stamp(end.header.stamp) == pytest.approx(final.pose_meta.source_stamp, abs=1e-6)
    assert abs(end.pose.position.x - 2.0) < 0.1 and abs(end.pose.position.y - 1.0) < 0.1
    assert abs(path.poses[0].pose.position.x) < 0.1, "the path starts at the dock"
    last_pose = decoded[fx.POSE_TOPIC][-1]
    assert (last_pose.pose.position.x, last_pose.pose.position.y, last_pose.pose.orientation.z) == \
        (end.pose.position.x, end.pose.position.y, end.pose.orientation.z)
    assert (last_pose.header.stamp.sec, last_pose.header.stamp.nanosec) == (end.header.stamp.sec, end.header.stamp.nanosec)

    (places,) = decoded[fx.PLACES_TOPIC]
    assert places.header.frame_id == "map"
    assert [(p.position.x, p.position.y) for p in places.poses] == [(0.0, 0.0), (2.0, 1.0)]
    states = [m.state for m in decoded[fx.ACTION_STATE_TOPIC]]
    assert states == ["REQUESTED", "ACCEPTED", "RUNNING", "VERIFYING", "SUCCEEDED"]
    assert decoded[fx.ACTION_STATE_TOPIC][-1].skill == "navigate_to"


def test_refusals_are_warnings_and_the_end_is_recorded_when_told(ros, tmp_path):
    """The recorder port on its own: levels in the bag, other missions' events left out, the last line."""
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import MemoryJournal
    from robot_harness.core.records import EventDraft, EventType
    from robot_harness.evidence import foxglove as fx
    from robot_harness.nodes.recorder import HarnessEvidenceRecorder

    host = ros.add(Node("harness_host", context=ros.context))
    journal = MemoryJournal(clock=SystemClock(), ids=IdGenerator(None))
    journal.setup()
    port = HarnessEvidenceRecorder(MissionRecorder(host, McapEvidenceStore(tmp_path)), journal)
    ros.run(lambda: port.start("m-1"))
    places = {"frame_id": "map", "places": {"dock": {"x": 0.0, "y": 0.0}}}
    journal.append([EventDraft(type=EventType.MISSION_STARTED, mission_id="m-1", payload={"goal": "g", "config": places})])
    journal.append([EventDraft(type=EventType.GATE_REJECTED, mission_id="m-1",
                               payload={"verdict_id": "v-1", "message": "stale state version"})])
    journal.append([EventDraft(type=EventType.STOP_REQUESTED, mission_id="m-2", payload={"reason": "not this one"})])
    journal.append([EventDraft(type=EventType.STOP_REQUESTED, mission_id="m-1",
                               payload={"reason": "person in the aisle", "source": "cli"})])
    summary = ros.run(lambda: port.stop(status="CANCELLED", summary="mission cancelled: person in the aisle"))
    assert summary["record_failures"] == 0
    decoded, _types, _ = _decode_all(summary["path"])
    lines = [(m.function, m.level, m.name) for m in decoded[fx.LOG_TOPIC]]
    assert lines == [
        ("MISSION_STARTED", 20, "robot_harness.supervisor"),
        ("MISSION_STARTED", 20, "robot_harness.supervisor"),  # the places
        ("GATE_REJECTED", 30, "robot_harness.gate"),
        ("STOP_REQUESTED", 30, "robot_harness.operator"),
        ("MISSION_FINISHED", 30, "robot_harness.supervisor"),
    ]
    assert decoded[fx.LOG_TOPIC][-1].msg == "MISSION_FINISHED: CANCELLED: mission cancelled: person in the aisle"
    assert len(decoded[JOURNAL_TOPIC]) == 4, "the journal topic keeps every event"
    assert len(decoded[fx.PLACES_TOPIC]) == 1
