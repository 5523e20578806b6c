"""The mission recorder: one mission's evidence from the live graph into an EvidenceStore.

Backend topics are recorded raw: the subscription hands over the CDR bytes
exactly as they arrived, stamped with the receive time on the node clock (the
log time), so a bag ref cites what the robot actually said, not a
re-serialization. The harness writes its own records (journal events,
snapshots, verdicts) through :meth:`MissionRecorder.record` into the same bag.
Camera frames are not recorded raw; images are cited as artifacts.

So that a bag opens in Foxglove with something to look at,
:class:`HarnessEvidenceRecorder` also writes topics derived from the journal
(:mod:`robot_harness.evidence.foxglove` folds the events; the ROS messages are
built here): ``/robot_harness/log`` (``rcl_interfaces/msg/Log``, one line per
verdict, commit, refusal, action step, stop, interaction...),
``/robot_harness/pose`` (``geometry_msgs/msg/PoseStamped``),
``/robot_harness/path`` (``nav_msgs/msg/Path``), ``/robot_harness/places``
(``geometry_msgs/msg/PoseArray``) and ``/robot_harness/action_state``
(``robot_harness/msg/ActionState``). Header stamps are the record's own time
(the event's stamp, or the pose's observation stamp); log times are the node
clock's, like the journal topic's. See ``docs/foxglove.md``.

Raw callbacks arrive on an executor thread while the harness writes from
another, so every store call goes through one lock. A callback never raises:
a bag bound drops and counts (the store's contract), a message arriving
before the clock runs (sim time not yet received) is skipped and counted, and
a failed write is logged and counted.
"""
from __future__ import annotations

import functools
import importlib
import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rclpy.node import Node
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
)
from rclpy.serialization import serialize_message

from robot_harness.core.completion import EvidenceRef
from robot_harness.evidence import foxglove as fx
from robot_harness.evidence.bag import (
    BagFinalisation,
    BagSummary,
    EvidenceStore,
    EvidenceStoreMisuse,
    normalize_type_name,
    qos_profiles_yaml,
)
from robot_harness.nodes.listener import ConvertedEvent, JournalFanout, Tap

__all__ = [
    "RecordedTopic",
    "DEFAULT_TOPICS",
    "topics_in_namespace",
    "JOURNAL_TOPIC",
    "JOURNAL_TYPE",
    "SNAPSHOT_TOPIC",
    "SNAPSHOT_TYPE",
    "VERDICT_TOPIC",
    "VERDICT_TYPE",
    "DERIVED_TYPES",
    "MissionRecorder",
    "HarnessEvidenceRecorder",
    "derived_messages",
    "PathEncoder",
    "import_message_type",
    "qos_to_dict",
]

JOURNAL_TOPIC = "/robot_harness/journal"
JOURNAL_TYPE = "robot_harness/msg/JournalEvent"
SNAPSHOT_TOPIC = "/robot_harness/snapshots"
SNAPSHOT_TYPE = "robot_harness/msg/WorldSnapshot"
VERDICT_TOPIC = "/robot_harness/verdicts"
VERDICT_TYPE = "std_msgs/msg/String"
"""Verdicts are recorded as their canonical JSON in a std_msgs/String."""

DERIVED_TYPES: dict[str, str] = {
    fx.LOG_TOPIC: "rcl_interfaces/msg/Log",
    fx.POSE_TOPIC: "geometry_msgs/msg/PoseStamped",
    fx.PATH_TOPIC: "nav_msgs/msg/Path",
    fx.PLACES_TOPIC: "geometry_msgs/msg/PoseArray",
    fx.ACTION_STATE_TOPIC: "robot_harness/msg/ActionState",
}
"""The Foxglove-facing topics every mission bag gets, derived from the journal (``evidence/foxglove.py``)."""

_DEPTH = 100
"""Recording queues are deeper than the aggregator's: a burst must not be dropped locally."""

_RELIABLE = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=_DEPTH,
    reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE,
)
_SENSOR = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=_DEPTH,
    reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE,
)
_ACTION_STATUS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=_DEPTH,
    reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
"""Transient local like ``qos_profile_action_status_default`` (the latched current status arrives on
join), but a deep reader queue: with depth 1 a burst of status changes taken late by a loaded executor
overwrote each other before they were recorded."""


@dataclass(frozen=True)
class RecordedTopic:
    """One backend topic recorded raw, with the QoS the snapshot aggregator uses for it."""

    topic: str
    type_name: str
    qos: QoSProfile


DEFAULT_TOPICS: tuple[RecordedTopic, ...] = (  # at the root namespace; ``topics_in_namespace`` moves them
    # Nav2 latches /amcl_pose (reliable, transient local); reliable+volatile matches it
    # and any reliable publisher.
    RecordedTopic("/amcl_pose", "geometry_msgs/msg/PoseWithCovarianceStamped", _RELIABLE),
    RecordedTopic("/odom", "nav_msgs/msg/Odometry", _SENSOR),
    RecordedTopic(
        "/navigate_to_pose/_action/feedback", "nav2_msgs/action/NavigateToPose_FeedbackMessage", _RELIABLE
    ),
    RecordedTopic("/navigate_to_pose/_action/status", "action_msgs/msg/GoalStatusArray", _ACTION_STATUS),
    RecordedTopic("/battery_state", "sensor_msgs/msg/BatteryState", _SENSOR),
)



def topics_in_namespace(node: Node, topics: Sequence[RecordedTopic] = DEFAULT_TOPICS) -> tuple[RecordedTopic, ...]:
    """``topics`` under ``node``'s namespace, as the robot publishes them there (``/amcl_pose`` ->
    ``/robot1/amcl_pose`` for a node in ``/robot1``); unchanged at the root."""
    return tuple(RecordedTopic(node.resolve_topic_name(t.topic.lstrip("/")), t.type_name, t.qos) for t in topics)


_ACTION_PARTS = {
    "Goal": ("Goal",),
    "Result": ("Result",),
    "Feedback": ("Feedback",),
    "FeedbackMessage": ("Impl", "FeedbackMessage"),
}


@functools.lru_cache(maxsize=None)
def import_message_type(type_name: str) -> type:
    """The generated Python class of ``pkg/msg/Type``, ``pkg/srv/X_Request|_Response`` or
    ``pkg/action/X_Goal|_Result|_Feedback|_FeedbackMessage`` (``pkg/Type`` means ``msg``)."""
    pkg, ns, name = normalize_type_name(type_name).split("/")
    try:
        module = importlib.import_module(f"{pkg}.{ns}")
        if ns == "msg":
            return getattr(module, name)
        base, _, part = name.rpartition("_")
        if ns == "srv" and part in ("Request", "Response"):
            return getattr(getattr(module, base), part)
        if ns == "action" and "_" in name:
            for suffix, path in _ACTION_PARTS.items():
                if name.endswith(f"_{suffix}"):
                    obj: Any = getattr(module, name[: -len(suffix) - 1])
                    for attr in path:
                        obj = getattr(obj, attr)
                    return obj
    except (ImportError, AttributeError) as exc:
        raise EvidenceStoreMisuse(f"cannot import message type {type_name}: {exc}", type_name=type_name) from exc
    raise EvidenceStoreMisuse(f"cannot import message type {type_name}", type_name=type_name)


def _duration(value: Any) -> dict[str, int]:
    ns = int(getattr(value, "nanoseconds", 0))
    if ns <= 0:
        ns = 9223372036854775807  # rmw reports "unset" as 0 or infinite; rosbag2 writes infinite
    return {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}


def qos_to_dict(qos: QoSProfile) -> dict[str, Any]:
    """An rclpy QoS profile in rosbag2's named form (for :func:`qos_profiles_yaml`)."""
    return {
        "history": qos.history.name.lower(),
        "depth": int(qos.depth),
        "reliability": qos.reliability.name.lower(),
        "durability": qos.durability.name.lower(),
        "deadline": _duration(qos.deadline),
        "lifespan": _duration(qos.lifespan),
        "liveliness": qos.liveliness.name.lower(),
        "liveliness_lease_duration": _duration(qos.liveliness_lease_duration),
        "avoid_ros_namespace_conventions": bool(qos.avoid_ros_namespace_conventions),
    }


class MissionRecorder:
    """Records one mission at a time from ``node``'s graph into ``store``.

    Creates no ROS entities until :meth:`start`; :meth:`stop` destroys them
    and closes the bag. The node must be spun by an executor for raw
    callbacks to arrive; :meth:`record` may be called from any thread.
    """

    def __init__(
        self,
        node: Node,
        store: EvidenceStore,
        *,
        topics: Sequence[RecordedTopic] | None = None,
        callback_group: Any = None,
    ) -> None:
        """``topics``: what to record raw; by default ``DEFAULT_TOPICS`` in the node's namespace."""
        topics = topics_in_namespace(node) if topics is None else topics
        seen = [t.topic for t in topics]
        if len(set(seen)) != len(seen):
            raise EvidenceStoreMisuse(f"a topic is listed twice: {seen}", topics=seen)
        self._node = node
        self._store = store
        self._topics = tuple(topics)
        self._callback_group = callback_group
        self._lock = threading.Lock()
        self._subscriptions: list[Any] = []
        self._persistent = False
        self._recording = False
        self._mission_id = ""
        self._last_log_time: dict[str, int] = {}
        self._counts: dict[str, int] = {}
        self._skipped = 0
        self._errors = 0

    @property
    def recording(self) -> bool:
        with self._lock:
            return self._recording

    @property
    def mission_id(self) -> str:
        return self._mission_id

    @property
    def bag_name(self) -> str:
        return self._store.bag_name

    def now(self) -> float:
        """The node clock, epoch seconds (the clock log times come from)."""
        return self._node.get_clock().now().nanoseconds * 1e-9

    def counts(self) -> dict[str, int]:
        """Messages accepted per topic so far in this mission (raw and :meth:`record`)."""
        with self._lock:
            return dict(self._counts)

    def matched_publishers(self) -> dict[str, int]:
        """Publishers each raw subscription has matched (reader side; 0 before discovery completes).

        A publisher seeing the recorder does not mean the recorder sees the
        publisher: a best-effort or depth-1 message sent in between is lost.
        """
        with self._lock:
            return {spec.topic: sub.get_publisher_count() for spec, sub in zip(self._topics, self._subscriptions)}

    @property
    def skipped(self) -> int:
        """Raw messages not written: no clock yet, or the store refused (logged)."""
        with self._lock:
            return self._skipped + self._errors

    def subscribe(self) -> None:
        """Create the raw subscriptions now and keep them across missions (until :meth:`close`).

        A long-lived recorder (the supervisor's) subscribes once at configure
        time: the subscriptions are matched before a mission starts, so its
        first messages are not lost to discovery, and no DDS entities are
        created on a mission's critical path. Messages outside a mission are
        dropped in the callback.
        """
        with self._lock:
            if self._subscriptions:
                return
            self._persistent = True
            try:
                self._create_subscriptions()
            except BaseException:
                self._destroy_subscriptions()
                raise
        self.finalise_interrupted()

    def finalise_interrupted(self) -> list[BagFinalisation]:
        """Finish the bags a recorder that died (a killed supervisor) left unfinished in the store.

        Called by :meth:`subscribe`, i.e. when a long-lived recorder comes up
        (the supervisor's configure), before any mission of its own opens a
        bag. Bags another live process is writing are left alone (the store
        tells them by the writer's lock). Each bag finalised or left alone is
        logged; a failure is logged and never stops the recorder.
        """
        try:
            results = self._store.finalise_interrupted()
        except Exception as exc:  # noqa: BLE001 - finishing old bags must not stop a recorder coming up
            self._node.get_logger().error(f"finalising interrupted evidence bags failed: {type(exc).__name__}: {exc}")
            return []
        logger = self._node.get_logger()
        for r in results:
            if r.action.startswith("skipped"):
                logger.warning(f"evidence bag {r.path}: {r.note}")
            else:
                logger.info(f"evidence bag {r.path}: {r.note} ({r.seconds:.2f} s)")
        return results

    def close(self) -> None:
        """Stop any mission and destroy the subscriptions; safe on a recorder that never recorded."""
        if self._store.is_open or self._store.bag_name:
            self.stop()
        self._destroy_subscriptions()
        self._persistent = False

    def _create_subscriptions(self) -> None:
        for spec in self._topics:
            msg_type = import_message_type(spec.type_name)
            self._subscriptions.append(
                self._node.create_subscription(
                    msg_type, spec.topic, self._make_callback(spec.topic), spec.qos,
                    callback_group=self._callback_group, raw=True,
                )
            )

    def start(self, mission_id: str, *, metadata: Mapping[str, str] | None = None) -> None:
        """Open ``<mission_id>.mcap`` and record every topic (subscribing now unless :meth:`subscribe` did)."""
        with self._lock:
            if self._recording:
                raise EvidenceStoreMisuse(
                    f"already recording mission {self._mission_id}", mission_id=self._mission_id
                )
            meta = {"mission_id": mission_id, **(metadata or {})}
            self._store.open_bag(f"{mission_id}.mcap", metadata=meta)
            try:
                for spec in self._topics:
                    offered = [
                        qos_to_dict(info.qos_profile)
                        for info in self._node.get_publishers_info_by_topic(spec.topic)
                    ]
                    self._store.add_channel(spec.topic, spec.type_name, qos_yaml=qos_profiles_yaml(offered))
                if not self._subscriptions:
                    self._create_subscriptions()
            except BaseException:
                if not self._persistent:
                    self._destroy_subscriptions()
                self._store.close()
                raise
            self._mission_id = mission_id
            self._last_log_time.clear()
            self._counts.clear()
            self._skipped = self._errors = 0
            self._recording = True

    def record(
        self, topic: str, type_name: str, msg_or_bytes: Any, *, log_time_ns: int | None = None
    ) -> EvidenceRef:
        """Write one harness record (a message object or its CDR bytes) into the mission bag.

        The channel is registered on first use. ``log_time_ns`` defaults to the
        node clock, never earlier than the topic's last record. Raises
        :class:`EvidenceStoreMisuse` when not recording or the message is not a
        ``type_name``.
        """
        if isinstance(msg_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(msg_or_bytes)
        else:
            expected = import_message_type(type_name)
            if not isinstance(msg_or_bytes, expected):
                raise EvidenceStoreMisuse(
                    f"{topic}: expected a {type_name}, got {type(msg_or_bytes).__name__}",
                    topic=topic, type_name=type_name,
                )
            data = serialize_message(msg_or_bytes)
        with self._lock:
            if not self._recording:
                raise EvidenceStoreMisuse("the recorder is not recording; call start first", topic=topic)
            self._store.add_channel(topic, type_name)
            if log_time_ns is None:
                log_time_ns = self._log_time(topic)
            ref = self._store.write(topic, data, log_time_ns=log_time_ns)
            self._last_log_time[topic] = max(self._last_log_time.get(topic, 0), log_time_ns)
            if ref.sequence:
                self._counts[topic] = self._counts.get(topic, 0) + 1
            return ref

    def stop(self) -> BagSummary:
        """Unsubscribe and close the bag; idempotent (returns the last summary again)."""
        with self._lock:
            was_recording = self._recording
            self._recording = False
        if not self._persistent:
            self._destroy_subscriptions()
        with self._lock:
            summary = self._store.close()
        if was_recording and (self._skipped or self._errors):
            self._node.get_logger().warning(
                f"mission {self._mission_id}: {self._skipped} raw messages skipped before the clock ran, "
                f"{self._errors} refused by the evidence store"
            )
        if was_recording and summary.truncated:
            self._node.get_logger().warning(
                f"mission {self._mission_id}: evidence bag truncated ({summary.truncated_reason}); "
                f"{summary.dropped} messages dropped"
            )
        return summary

    # -- internals -----------------------------------------------------------------------

    def _log_time(self, topic: str) -> int:
        return max(self._node.get_clock().now().nanoseconds, self._last_log_time.get(topic, 0))

    def _make_callback(self, topic: str) -> Any:
        def on_message(data: bytes) -> None:
            with self._lock:
                if not self._recording:
                    return
                log_time = self._log_time(topic)
                if log_time <= 0:
                    self._skipped += 1
                    return
                try:
                    ref = self._store.write(topic, data, log_time_ns=log_time)
                except Exception as exc:  # noqa: BLE001 - a raw callback must never stop the executor
                    self._errors += 1
                    self._node.get_logger().error(f"evidence write on {topic} failed: {exc!r}")
                    return
                self._last_log_time[topic] = log_time
                if ref.sequence:
                    self._counts[topic] = self._counts.get(topic, 0) + 1

        return on_message

    def _destroy_subscriptions(self) -> None:
        for sub in self._subscriptions:
            self._node.destroy_subscription(sub)
        self._subscriptions.clear()


def derived_messages(item: Any) -> list[tuple[str, str, Any]]:
    """The ROS messages (topic, type, message) a bag gets for one derived value
    (:mod:`robot_harness.evidence.foxglove`); none for values the bag already
    holds in another form (snapshots, verdicts, progress)."""
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import PoseArray, PoseStamped
    from nav_msgs.msg import Path
    from rcl_interfaces.msg import Log
    from std_msgs.msg import Header

    from . import conversions as cv

    def time(stamp: float) -> Time:
        sec, nanosec = fx.split_stamp(stamp)
        return Time(sec=sec, nanosec=nanosec)

    def header(stamp: float, frame_id: str) -> Header:
        return Header(stamp=time(stamp), frame_id=frame_id)

    def stamped(p: fx.StampedPose) -> PoseStamped:
        return PoseStamped(header=header(p.stamp, p.frame_id), pose=cv.pose2d_to_pose_msg(p.pose))

    if isinstance(item, fx.LogLine):
        return [(fx.LOG_TOPIC, DERIVED_TYPES[fx.LOG_TOPIC], Log(
            stamp=time(item.stamp), level=int(item.level), name=item.name, msg=item.msg,
            file="journal", function=item.event_type, line=min(max(item.seq, 0), 0xFFFFFFFF)))]
    if isinstance(item, fx.StampedPose):
        return [(fx.POSE_TOPIC, DERIVED_TYPES[fx.POSE_TOPIC], stamped(item))]
    if isinstance(item, fx.PathUpdate):
        return [(fx.PATH_TOPIC, DERIVED_TYPES[fx.PATH_TOPIC],
                 Path(header=header(item.stamp, item.frame_id), poses=[stamped(p) for p in item.poses]))]
    if isinstance(item, fx.PlacesUpdate):
        return [(fx.PLACES_TOPIC, DERIVED_TYPES[fx.PLACES_TOPIC], PoseArray(
            header=header(item.stamp, item.frame_id), poses=[cv.pose2d_to_pose_msg(p) for _, p in item.places]))]
    if isinstance(item, fx.ActionStateUpdate):
        return [(fx.ACTION_STATE_TOPIC, DERIVED_TYPES[fx.ACTION_STATE_TOPIC],
                 cv.action_view_to_msg(item.action, item.mission_id, backend=item.backend))]
    return []


class PathEncoder:
    """``nav_msgs/msg/Path`` updates as CDR, each pose encoded once and kept while it stays on the path.

    A path update repeats the whole trajectory so far (up to
    ``DerivedTopics``' ``max_path_poses``): built as message objects and
    serialized, a 512-pose path took about 36 ms of GIL-held work per snapshot
    on the 2-vCPU VM, growing with the mission. Here a pose's bytes are made
    once (from the same :func:`derived_messages` conversion) and an update is
    a join. The result deserializes to exactly the message
    :func:`derived_messages` builds (``test/unit/test_listener.py``); only
    alignment padding, which serialize_message leaves uninitialised, is zero.
    """

    _HEADER = b"\x00\x01\x00\x00"
    """CDR, little endian (what rmw_fastrtps writes); alignment counts from after these four bytes."""

    def __init__(self) -> None:
        self._pieces: dict[int, tuple[Any, dict[int, bytes]]] = {}

    def encode(self, update: fx.PathUpdate) -> bytes:
        out = bytearray(self._HEADER)
        _put_stamp_frame(out, update.stamp, update.frame_id)
        _align(out, 4)
        out += struct.pack("<I", len(update.poses))
        kept: dict[int, tuple[Any, dict[int, bytes]]] = {}
        for pose in update.poses:
            entry = self._pieces.get(id(pose))
            if entry is None or entry[0] is not pose:
                entry = (pose, {})
            kept[id(pose)] = entry
            _align(out, 4)
            phase = (len(out) - 4) % 8
            piece = entry[1].get(phase)
            if piece is None:
                piece = entry[1][phase] = _pose_stamped_piece(pose, phase)
            out += piece
        self._pieces = kept
        return bytes(out)


def _align(out: bytearray, n: int) -> None:
    out += b"\x00" * ((-(len(out) - 4)) % n)


def _put_stamp_frame(out: bytearray, stamp: float, frame_id: str) -> None:
    """``std_msgs/Header``: the stamp as derived_messages makes it, then the frame id as a CDR string."""
    sec, nanosec = fx.split_stamp(stamp)
    _align(out, 4)
    out += struct.pack("<iI", sec, nanosec)
    text = frame_id.encode() + b"\x00"
    out += struct.pack("<I", len(text)) + text


def _pose_stamped_piece(pose: fx.StampedPose, phase: int) -> bytes:
    """One ``geometry_msgs/PoseStamped`` encoded as if it started ``phase`` bytes past an 8-byte boundary."""
    from . import conversions as cv

    msg = cv.pose2d_to_pose_msg(pose.pose)
    out = bytearray(PathEncoder._HEADER + b"\x00" * phase)
    _put_stamp_frame(out, pose.stamp, pose.frame_id)
    _align(out, 8)
    p, q = msg.position, msg.orientation
    out += struct.pack("<7d", p.x, p.y, p.z, q.x, q.y, q.z, q.w)
    return bytes(out[4 + phase:])


class HarnessEvidenceRecorder:
    """The core's ``EvidenceRecorder`` port over a :class:`MissionRecorder`.

    While a mission records, every committed journal event goes into the bag
    on ``/robot_harness/journal`` (so the bag alone replays the mission), and
    the engine's own records go to their topics: snapshots as
    ``robot_harness/msg/WorldSnapshot``, verdicts (and any other record) as
    JSON in ``std_msgs/msg/String``. The mission's own events are also folded
    into the Foxglove-facing topics of :data:`DERIVED_TYPES` (``derive=False``
    turns that off). Recording never stops a mission: a failure is logged and
    counted, and the record simply has no bag ref.
    """

    def __init__(self, recorder: MissionRecorder, journal: Any, *, logger: Any = None, derive: bool = True,
                 events: JournalFanout | None = None) -> None:
        self._recorder = recorder
        self._journal = journal
        self._logger = logger
        self._events = events
        """The supervisor's fan-out (each event converted once, for ``~/events`` and the bag alike);
        without one the recorder runs a fan-out of its own on ``journal`` while a mission records."""
        self._own: JournalFanout | None = None
        self._unsubscribe: Any = None
        self._tap: Tap | None = None
        self._derive = derive
        self._derived: Any = None
        self._paths = PathEncoder()
        self._derive_lock = threading.Lock()
        self.failures = 0

    def start(self, mission_id: str) -> None:
        self._derived = fx.DerivedTopics() if self._derive else None
        self._paths = PathEncoder()
        self._recorder.start(mission_id)
        # Written from the fan-out's thread (commit order kept), off the mission thread;
        # stop() drains what was committed before it, then the bag closes.
        fanout = self._events
        if fanout is None:
            fanout = self._own = JournalFanout(name="bag-journal", logger=self._logger)
            self._unsubscribe = self._journal.subscribe(fanout)
        self._tap = fanout.attach(self._on_events, name="evidence bag")

    def _on_events(self, events: Sequence[ConvertedEvent]) -> None:
        for item in events:
            if not self._recorder.recording:
                return
            event = item.event
            try:
                # The same CDR bytes ~/events published: converted and serialized once.
                self._recorder.record(JOURNAL_TOPIC, JOURNAL_TYPE, item.cdr)
            except Exception as exc:  # noqa: BLE001 - see the class docstring
                self._failed(f"journal event {event.seq}: {exc}")
            if self._derived is not None and event.mission_id == self._recorder.mission_id:
                self._record_derived(event)

    def _record_derived(self, event: Any) -> None:
        try:
            with self._derive_lock:
                items = self._derived.feed(event)
            messages: list[tuple[str, str, Any]] = []
            for item in items:
                if isinstance(item, fx.PathUpdate):  # the whole trajectory again: from bytes kept per pose
                    messages.append((fx.PATH_TOPIC, DERIVED_TYPES[fx.PATH_TOPIC], self._paths.encode(item)))
                else:
                    messages.extend(derived_messages(item))
        except Exception as exc:  # noqa: BLE001
            self._failed(f"derived topics of journal event {event.seq}: {exc}")
            return
        for topic, type_name, msg in messages:
            try:
                self._recorder.record(topic, type_name, msg)
            except Exception as exc:  # noqa: BLE001
                self._failed(f"{topic} from journal event {event.seq}: {exc}")

    def record_record(self, topic: str, record: Any) -> EvidenceRef | None:
        from std_msgs.msg import String

        from ..core.records import WorldSnapshot
        from . import conversions as cv

        if not self._recorder.recording:
            return None
        try:
            if isinstance(record, WorldSnapshot):
                ref = self._recorder.record(SNAPSHOT_TOPIC, SNAPSHOT_TYPE, cv.snapshot_to_msg(record))
            else:
                ref = self._recorder.record(topic, VERDICT_TYPE, String(data=record.model_dump_json()))
        except Exception as exc:  # noqa: BLE001
            self._failed(f"{topic}: {exc}")
            return None
        return ref if ref.sequence else None  # sequence 0: dropped by a bound

    def stop(self, *, status: str = "", summary: str = "") -> dict[str, Any]:
        """Close the bag. With ``status`` (a MissionStatus value) a last log line records how the
        mission ended: the journal's MISSION_FINISHED is written after the bag closes (it cites
        the bag), so without it the bag's log ends at the last event before that."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._tap is not None:
            if not self._tap.detach(5.0):
                self._failed("journal events still queued for the bag after 5 s; the bag closes without them")
            self._tap = None
        if self._own is not None:
            self._own.close(1.0)
            self._own = None
        if status and self._derived is not None and self._recorder.recording:
            line = fx.finish_line(mission_id=self._recorder.mission_id, status=status, summary=summary,
                               stamp=self._recorder.now())
            for topic, type_name, msg in derived_messages(line):
                try:
                    self._recorder.record(topic, type_name, msg)
                except Exception as exc:  # noqa: BLE001
                    self._failed(f"{topic}: {exc}")
        summary_ = self._recorder.stop()
        return {"bag": summary_.bag, "path": summary_.path, "messages": summary_.message_count,
                "dropped": summary_.dropped, "truncated": summary_.truncated, "record_failures": self.failures}

    def _failed(self, what: str) -> None:
        self.failures += 1
        if self._logger is not None:
            self._logger.warning(f"evidence not recorded: {what}")
