"""The evidence store contract (both backends), rosbag2 message definitions, and real rosbag2 bags."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from mcap.reader import make_reader
from mcap_ros2._dynamic import generate_dynamic, serialize_dynamic

from robot_harness.core.completion import EvidenceRef
from robot_harness.core.errors import RefusalError, UsageError
from robot_harness.evidence import (
    BagFormatError,
    EvidenceMismatch,
    EvidenceNotFound,
    EvidenceStore,
    EvidenceStoreMisuse,
    McapEvidenceStore,
    MemoryEvidenceStore,
    MessageDefinitionNotFound,
    MessageDefinitions,
    normalize_type_name,
    qos_profiles_yaml,
    read_bag_messages,
    read_bag_metadata,
    verify_artifact,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures" / "bags"
SEP = "=" * 80
STRING = "std_msgs/msg/String"
T0 = 1_700_000_000_000_000_000

StoreFactory = Callable[..., EvidenceStore]


@pytest.fixture(params=["memory", "mcap"])
def make_store(request, tmp_path) -> StoreFactory:
    def factory(**options):
        if request.param == "memory":
            return MemoryEvidenceStore(**options)
        return McapEvidenceStore(tmp_path / "bags", **options)

    return factory


def string_cdr(text: str) -> bytes:
    encode = serialize_dynamic(STRING, MessageDefinitions().full_text(STRING))[STRING]
    return encode({"data": text})


def opened(store: EvidenceStore, name: str = "m-1.mcap") -> EvidenceStore:
    store.open_bag(name, metadata={"mission_id": name[:-5]})
    store.add_channel("/chatter", STRING)
    return store


# --------------------------------------------------------------------------- contract suite


def test_round_trip_while_open_and_after_close(make_store):
    store = opened(make_store())
    payloads = [string_cdr(f"hello {i}") for i in range(3)]
    times = [T0, T0 + 10, T0 + 10]  # equal log times are allowed (rosbag2 allows them)
    refs = [store.write("/chatter", p, log_time_ns=t) for p, t in zip(payloads, times)]

    assert [r.sequence for r in refs] == [1, 2, 3]
    assert refs[0] == EvidenceRef.for_bag(
        "m-1.mcap", "/chatter", T0, sequence=1, sha256=hashlib.sha256(payloads[0]).hexdigest()
    )
    assert store.read(refs[2]) == payloads[2]  # readable while the mission runs

    summary = store.close()
    assert [store.read(r) for r in refs] == payloads
    assert summary.bag == "m-1.mcap" and summary.message_count == 3
    assert summary.count("/chatter") == 3 and summary.topics[0].type_name == STRING
    assert (summary.start_time_ns, summary.end_time_ns, summary.duration_ns) == (T0, T0 + 10, 10)
    assert summary.payload_bytes == sum(map(len, payloads))
    assert not summary.truncated and summary.dropped == 0
    assert summary.metadata == {"mission_id": "m-1"}


def test_equal_log_times_resolve_by_sequence_or_digest(make_store):
    store = opened(make_store())
    a = store.write("/chatter", b"\x00\x01\x00\x00a", log_time_ns=T0)
    b = store.write("/chatter", b"\x00\x01\x00\x00b", log_time_ns=T0)
    store.close()
    assert store.read(b) == b"\x00\x01\x00\x00b"
    # Without a sequence the digest picks the message among those at that time.
    assert store.read(a.model_copy(update={"sequence": 0})) == b"\x00\x01\x00\x00a"
    with pytest.raises(EvidenceMismatch):
        store.read(a.model_copy(update={"sequence": b.sequence}))


def test_a_wrong_or_missing_sha256_is_refused(make_store):
    store = opened(make_store())
    ref = store.write("/chatter", string_cdr("x"), log_time_ns=T0)
    store.close()
    with pytest.raises(EvidenceMismatch) as info:
        store.read(ref.model_copy(update={"sha256": "0" * 64}))
    assert info.value.details["expected"] == "0" * 64
    assert isinstance(info.value, RefusalError)
    with pytest.raises(EvidenceMismatch):
        store.read(ref.model_copy(update={"sha256": ""}))


def test_unknown_refs_are_not_found(make_store):
    store = opened(make_store())
    ref = store.write("/chatter", string_cdr("x"), log_time_ns=T0)
    store.close()
    for update in ({"log_time_ns": T0 + 1}, {"topic": "/other"}, {"sequence": 7}, {"bag": "nope.mcap"}):
        with pytest.raises(EvidenceNotFound):
            store.read(ref.model_copy(update=update))
    with pytest.raises(EvidenceStoreMisuse):
        store.read(EvidenceRef.for_journal("e-1"))


def test_log_time_must_not_go_backwards_per_topic(make_store):
    store = opened(make_store())
    store.add_channel("/other", STRING)
    store.write("/chatter", b"a", log_time_ns=T0 + 100)
    store.write("/other", b"b", log_time_ns=T0)  # another topic may be earlier
    with pytest.raises(EvidenceStoreMisuse) as info:
        store.write("/chatter", b"c", log_time_ns=T0 + 99)
    assert info.value.details["last_log_time_ns"] == T0 + 100
    for bad in (0, -5):
        with pytest.raises(EvidenceStoreMisuse):
            store.write("/other", b"d", log_time_ns=bad)
    assert store.close().message_count == 2


def test_max_bytes_truncates_drops_and_counts(make_store):
    store = opened(make_store(max_bytes=25))
    kept = [store.write("/chatter", bytes(10), log_time_ns=T0 + i) for i in range(2)]
    over = store.write("/chatter", bytes(10), log_time_ns=T0 + 2)
    assert store.truncated
    tiny = store.write("/chatter", bytes(1), log_time_ns=T0 + 3)  # fits, but the bag is truncated
    summary = store.close()

    assert [r.sequence for r in kept] == [1, 2] and over.sequence == tiny.sequence == 0
    assert summary.truncated and summary.truncated_reason == "max_bytes"
    assert summary.dropped == 2 and summary.topics[0].dropped == 2
    assert summary.message_count == 2 and summary.payload_bytes == 20
    assert store.read(kept[1]) == bytes(10)
    with pytest.raises(EvidenceNotFound):
        store.read(over)


def test_max_duration_truncates_drops_and_counts(make_store):
    store = opened(make_store(max_duration_s=1.0))
    ok = [store.write("/chatter", b"x", log_time_ns=T0 + dt) for dt in (0, 500_000_000, 1_000_000_000)]
    late = store.write("/chatter", b"x", log_time_ns=T0 + 1_000_000_001)
    summary = store.close()
    assert [r.sequence for r in ok] == [1, 2, 3] and late.sequence == 0
    assert summary.truncated_reason == "max_duration" and summary.dropped == 1
    assert summary.duration_ns == 1_000_000_000


def test_close_is_idempotent_and_bags_are_never_reopened(make_store):
    store = opened(make_store())
    store.write("/chatter", b"x", log_time_ns=T0)
    first = store.close()
    assert store.close() == first and not store.is_open and store.bag_name == "m-1.mcap"
    with pytest.raises(EvidenceStoreMisuse):
        store.write("/chatter", b"y", log_time_ns=T0 + 1)
    with pytest.raises(EvidenceStoreMisuse):
        store.open_bag("m-1.mcap", metadata={})
    opened(store, "m-2.mcap")  # the next mission's bag
    ref = store.write("/chatter", b"z", log_time_ns=T0 + 5)
    with pytest.raises(EvidenceStoreMisuse):
        store.open_bag("m-3.mcap", metadata={})  # one bag at a time
    assert store.close().bag == "m-2.mcap"
    assert store.read(ref) == b"z"


def test_misuse_is_a_usage_error(make_store):
    store = make_store()
    with pytest.raises(EvidenceStoreMisuse):
        store.close()
    with pytest.raises(EvidenceStoreMisuse):
        store.write("/chatter", b"x", log_time_ns=T0)
    for name in ("m-1", "../m-1.mcap", "a/b.mcap", ""):
        with pytest.raises(EvidenceStoreMisuse):
            store.open_bag(name, metadata={})
    opened(store)
    with pytest.raises(EvidenceStoreMisuse):
        store.write("/unknown", b"x", log_time_ns=T0)
    with pytest.raises(EvidenceStoreMisuse):
        store.add_channel("/chatter", "std_msgs/msg/Bool")
    store.add_channel("/chatter", "std_msgs/String")  # same type spelled the short way: no-op
    with pytest.raises(EvidenceStoreMisuse):
        store.add_channel("relative", STRING)
    with pytest.raises(MessageDefinitionNotFound) as info:
        store.add_channel("/x", "no_such_pkg/msg/Nope")
    assert isinstance(info.value, UsageError) and info.value.details["type_name"] == "no_such_pkg/msg/Nope"
    with pytest.raises(EvidenceStoreMisuse):
        MemoryEvidenceStore(max_bytes=0)


# --------------------------------------------------------------------------- the MCAP backend


def test_mcap_bag_is_a_rosbag2_bag_directory(tmp_path):
    store = McapEvidenceStore(tmp_path, ros_distro="kilted")
    store.open_bag("m-7.mcap", metadata={"mission_id": "m-7", "goal": "patrol"})
    qos = qos_profiles_yaml([{"depth": 1, "durability": "transient_local"}])
    store.add_channel("/chatter", STRING, qos_yaml=qos)
    store.add_channel("/idle", "std_msgs/msg/Bool")
    texts = ["one", "two"]
    refs = [store.write("/chatter", string_cdr(t), log_time_ns=T0 + i) for i, t in enumerate(texts)]
    summary = store.close()

    bag_dir = tmp_path / "m-7"
    assert sorted(p.name for p in bag_dir.iterdir()) == ["m-7.mcap", "metadata.yaml"]
    assert summary.path == str((bag_dir / "m-7.mcap").resolve())

    with open(bag_dir / "m-7.mcap", "rb") as f:
        reader = make_reader(f)
        header = reader.get_header()
        assert header.profile == "ros2" and header.library.startswith("robot_harness ")
        s = reader.get_summary()
        schemas = {sc.name: sc for sc in s.schemas.values()}
        assert schemas[STRING].encoding == "ros2msg"
        assert schemas[STRING].data.decode() == MessageDefinitions().full_text(STRING)
        channels = {c.topic: c for c in s.channels.values()}
        assert channels["/chatter"].message_encoding == "cdr"
        assert channels["/chatter"].metadata["offered_qos_profiles"] == qos
        assert channels["/chatter"].metadata["topic_type_hash"].startswith("RIHS01_")
        decoded = []
        for schema, channel, message in reader.iter_messages():
            decode = generate_dynamic(schema.name, schema.data.decode())[schema.name]
            decoded.append((channel.topic, message.sequence, decode(message.data).data))
        assert decoded == [("/chatter", 1, "one"), ("/chatter", 2, "two")]
        records = [m for m in reader.iter_metadata() if m.name == "rosbag2"]
        assert len(records) == 1 and records[0].metadata["ROS_DISTRO"] == "kilted"
        in_bag = yaml.safe_load(records[0].metadata["serialized_metadata"])

    on_disk = yaml.safe_load((bag_dir / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert on_disk == in_bag == read_bag_metadata(bag_dir)
    assert on_disk["version"] == 9 and on_disk["storage_identifier"] == "mcap"
    assert on_disk["relative_file_paths"] == ["m-7.mcap"] and on_disk["ros_distro"] == "kilted"
    assert on_disk["message_count"] == 2 and on_disk["custom_data"] == {"mission_id": "m-7", "goal": "patrol"}
    assert on_disk["starting_time"]["nanoseconds_since_epoch"] == T0 and on_disk["duration"]["nanoseconds"] == 1
    topics = {t["topic_metadata"]["name"]: t for t in on_disk["topics_with_message_count"]}
    assert {n: t["message_count"] for n, t in topics.items()} == {"/chatter": 2, "/idle": 0}
    chatter = topics["/chatter"]["topic_metadata"]
    assert chatter["type"] == STRING and chatter["serialization_format"] == "cdr"
    assert chatter["offered_qos_profiles"][0]["durability"] == "transient_local"
    assert topics["/idle"]["topic_metadata"]["offered_qos_profiles"] == []
    assert on_disk["files"] == [{"path": "m-7.mcap", "starting_time": {"nanoseconds_since_epoch": T0},
                                 "duration": {"nanoseconds": 1}, "message_count": 2}]

    assert [m[:3] for m in read_bag_messages(bag_dir)] == [("/chatter", STRING, T0), ("/chatter", STRING, T0 + 1)]
    # A fresh store over the same root finds the bag by scanning the file.
    assert McapEvidenceStore(tmp_path).read(refs[1]) == string_cdr("two")


def test_mcap_tampered_bytes_are_detected(tmp_path):
    store = opened(McapEvidenceStore(tmp_path))
    payload = string_cdr("the robot reached the kitchen")
    ref = store.write("/chatter", payload, log_time_ns=T0)
    store.close()
    path = tmp_path / "m-1" / "m-1.mcap"
    blob = path.read_bytes()
    assert blob.count(b"kitchen") == 1
    path.write_bytes(blob.replace(b"kitchen", b"hallway"))
    for reader in (store, McapEvidenceStore(tmp_path)):  # indexed and scanning paths
        with pytest.raises(EvidenceMismatch):
            reader.read(ref)


def test_mcap_refuses_to_overwrite_an_existing_bag(tmp_path):
    opened(McapEvidenceStore(tmp_path)).close()
    with pytest.raises(EvidenceStoreMisuse):
        McapEvidenceStore(tmp_path).open_bag("m-1.mcap", metadata={})


# --------------------------------------------------------------------------- message definitions


def _msg_file(pkg: str, name: str) -> str:
    for prefix in MessageDefinitions().search_roots:
        path = prefix / "share" / pkg / "msg" / f"{name}.msg"
        if path.is_file():
            return path.read_text()
    raise AssertionError(f"{pkg}/{name}.msg not installed")


def test_definition_layout_matches_rosbag2_for_an_installed_type():
    got = MessageDefinitions().full_text("geometry_msgs/msg/PointStamped")
    expected = (
        _msg_file("geometry_msgs", "PointStamped")
        + f"\n{SEP}\nMSG: geometry_msgs/Point\n" + _msg_file("geometry_msgs", "Point")
        + f"\n{SEP}\nMSG: std_msgs/Header\n" + _msg_file("std_msgs", "Header")
        + f"\n{SEP}\nMSG: builtin_interfaces/Time\n" + _msg_file("builtin_interfaces", "Time")
    )
    assert got == expected
    assert MessageDefinitions().full_text("geometry_msgs/PointStamped") == got


def test_odometry_dependencies_depth_first_sorted_and_unique():
    deps = MessageDefinitions().dependencies("nav_msgs/msg/Odometry")
    assert deps == [
        "geometry_msgs/PoseWithCovariance",
        "geometry_msgs/Pose",
        "geometry_msgs/Point",
        "geometry_msgs/Quaternion",
        "geometry_msgs/TwistWithCovariance",
        "geometry_msgs/Twist",
        "geometry_msgs/Vector3",
        "std_msgs/Header",
        "builtin_interfaces/Time",
    ]
    assert len(set(deps)) == len(deps)


@pytest.fixture
def toy_prefix(tmp_path) -> Path:
    def put(rel: str, text: str) -> None:
        path = tmp_path / "share" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    put("toy_msgs/msg/Reading.msg",
        "# A reading.\n"
        "uint8 OK=0  # constant\n"
        "string NAME=\"a#b\"\n"
        "Header header\n"
        "Sample[<=4] samples\n"
        "toy_msgs/Sample[2] pair\n"
        "string<=8 label \"none\"\n"
        "wstring wide\n"
        "float64[] values [1.0, 2.0]\n"
        "int32 count 3\n")
    put("toy_msgs/msg/Sample.msg", "builtin_interfaces/Time stamp\nfloat32 value\n")
    put("std_msgs/msg/Header.msg", "builtin_interfaces/Time stamp\nstring frame_id\n")
    put("builtin_interfaces/msg/Time.msg", "int32 sec\nuint32 nanosec\n")
    put("own_msgs/msg/Header.msg", "uint32 seq\n")
    put("own_msgs/msg/Tagged.msg", "Header header\n")
    put("toy_msgs/msg/Broken.msg", "Sample ok\nmissing_msgs/Gone gone\n")
    put("toy_msgs/action/Move.action", "float32 x\n---\nbool done\n---\nSample progress\n")
    put("toy_msgs/srv/Ask.srv", "string q\n---\nstring a\n")
    return tmp_path


def test_definitions_handle_builtins_arrays_constants_and_relative_names(toy_prefix):
    defs = MessageDefinitions(search_roots=[toy_prefix])
    reading = (toy_prefix / "share/toy_msgs/msg/Reading.msg").read_text()
    assert defs.full_text("toy_msgs/msg/Reading") == (
        reading
        + f"\n{SEP}\nMSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n"
        + f"\n{SEP}\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
        + f"\n{SEP}\nMSG: toy_msgs/Sample\nbuiltin_interfaces/Time stamp\nfloat32 value\n"
    )
    # A package's own Header wins over the std_msgs shorthand.
    assert defs.dependencies("own_msgs/msg/Tagged") == ["own_msgs/Header"]
    assert defs.type_hash("toy_msgs/msg/Reading") == ""


def test_definitions_derive_action_and_service_parts(toy_prefix, tmp_path):
    defs = MessageDefinitions(search_roots=[toy_prefix])
    assert defs.full_text("toy_msgs/action/Move_Goal") == "float32 x\n"
    assert defs.full_text("toy_msgs/action/Move_Result") == "bool done\n"
    assert defs.full_text("toy_msgs/srv/Ask_Response") == "string a\n"
    assert defs.full_text("toy_msgs/action/Move_Feedback") == (
        "Sample progress\n"
        + f"\n{SEP}\nMSG: toy_msgs/Sample\nbuiltin_interfaces/Time stamp\nfloat32 value\n"
        + f"\n{SEP}\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
    )
    with pytest.raises(MessageDefinitionNotFound) as info:
        defs.full_text("toy_msgs/action/Move_FeedbackMessage")  # needs unique_identifier_msgs/UUID
    assert info.value.details["type_name"] == "unique_identifier_msgs/UUID"

    other = tmp_path / "other_prefix"
    (other / "share/unique_identifier_msgs/msg").mkdir(parents=True)
    (other / "share/unique_identifier_msgs/msg/UUID.msg").write_text("uint8[16] uuid\n")
    defs = MessageDefinitions(search_roots=[toy_prefix, other])
    assert defs.dependencies("toy_msgs/action/Move_FeedbackMessage") == [
        "toy_msgs/Move_Feedback", "toy_msgs/Sample", "builtin_interfaces/Time", "unique_identifier_msgs/UUID",
    ]


def test_installed_action_feedback_message_definition():
    defs = MessageDefinitions()
    text = defs.full_text("nav2_msgs/action/NavigateToPose_FeedbackMessage")
    assert text.startswith("unique_identifier_msgs/UUID goal_id\nnav2_msgs/NavigateToPose_Feedback feedback\n")
    assert defs.dependencies("nav2_msgs/action/NavigateToPose_FeedbackMessage")[0] == "nav2_msgs/NavigateToPose_Feedback"
    assert defs.type_hash("nav2_msgs/action/NavigateToPose_FeedbackMessage").startswith("RIHS01_")


def test_missing_definitions_are_typed_errors(toy_prefix):
    defs = MessageDefinitions(search_roots=[toy_prefix])
    with pytest.raises(MessageDefinitionNotFound) as info:
        defs.full_text("toy_msgs/msg/Broken")
    assert info.value.details["type_name"] == "missing_msgs/Gone"
    assert info.value.details["root"] == "toy_msgs/msg/Broken"
    for bad in ("toy_msgs/msg/Nope", "not a type", "toy_msgs/msg/sub/Reading"):
        with pytest.raises(MessageDefinitionNotFound):
            defs.full_text(bad)
    assert normalize_type_name("test_msgs/BasicTypes") == "test_msgs/msg/BasicTypes"


def test_qos_yaml_is_rosbag2s_named_form():
    text = qos_profiles_yaml([{"depth": 1, "durability": "transient_local"}])
    assert text == (
        "- history: keep_last\n  depth: 1\n  reliability: reliable\n  durability: transient_local\n"
        "  deadline:\n    sec: 9223372036\n    nsec: 854775807\n"
        "  lifespan:\n    sec: 9223372036\n    nsec: 854775807\n  liveliness: automatic\n"
        "  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807\n"
        "  avoid_ros_namespace_conventions: false"
    )
    assert qos_profiles_yaml([]) == ""
    with pytest.raises(EvidenceStoreMisuse):
        qos_profiles_yaml([{"reliablity": "reliable"}])


# --------------------------------------------------------------------------- real rosbag2 bags

needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"rosbag2 fixtures not found at {FIXTURES} (the shared dir beside the clone)"
)


def _statistics(path: Path) -> dict[str, int]:
    with open(path, "rb") as f:
        s = make_reader(f).get_summary()
        return {s.channels[cid].topic: n for cid, n in s.statistics.channel_message_counts.items() if n}


@needs_fixtures
@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in FIXTURES.glob("*.mcap") if "wrong_rmw" not in p.name) if FIXTURES.is_dir() else [],
)
def test_reads_real_rosbag2_bags(name):
    path = FIXTURES / name
    messages = list(read_bag_messages(path))
    counts = Counter(m.topic for m in messages)
    assert dict(counts) == _statistics(path)
    for m in messages:
        assert m.type_name.count("/") == 2, m.type_name  # normalized pkg/<ns>/Type
        assert m.log_time_ns > 0 and m.data[:2] in (b"\x00\x01", b"\x00\x00")  # CDR encapsulation
    # Decode with the bag's own schemas (service events excepted: see the fixtures README).
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    decoders = {}
    for c in summary.channels.values():
        if c.topic.endswith("/_service_event"):
            continue
        schema = summary.schemas[c.schema_id]
        decoders[c.topic] = generate_dynamic(schema.name, schema.data.decode())[schema.name]
    decoded = [decoders[m.topic](m.data) for m in messages if m.topic in decoders]
    assert len(decoded) == sum(n for t, n in counts.items() if t in decoders)


@needs_fixtures
def test_known_contents_of_real_bags():
    evo = Counter(m.topic for m in read_bag_messages(FIXTURES / "evo_nav2_turtlebot.mcap"))
    assert evo["/amcl_pose"] == 135 and evo["/odom"] == 2639
    seek = list(read_bag_messages(FIXTURES / "rosbag2_test_bag_for_seek.mcap"))
    assert len(seek) == 5 and {m.type_name for m in seek} == {"test_msgs/msg/BasicTypes"}
    talker = [m for m in read_bag_messages(FIXTURES / "rosbag2_talker.mcap", topics=["/topic"])]
    decode = generate_dynamic(STRING, MessageDefinitions().full_text(STRING))[STRING]
    texts = [decode(m.data).data for m in talker]
    assert texts == [f"Hello, world! {i}" for i in range(10)]
    # Two rosbag2 metadata records: the last one holds.
    meta = read_bag_metadata(FIXTURES / "rosbag2_only_topics.mcap")
    assert meta["message_count"] == 7 and meta["version"] == 8
    with pytest.raises(BagFormatError):
        read_bag_metadata(FIXTURES / "evo_nav2_turtlebot.mcap")


@needs_fixtures
def test_wrong_message_encoding_is_refused():
    with pytest.raises(BagFormatError) as info:
        next(read_bag_messages(FIXTURES / "rosbag2_wrong_rmw_test.mcap"))
    assert info.value.details["message_encoding"] == "wrong_format"
    assert "wrong_format" in str(info.value)


@needs_fixtures
def test_wrong_message_encoding_is_refused_whatever_topic_is_asked_for():
    """Checked on every channel before filtering: a bag this reader cannot read never looks empty."""
    with pytest.raises(BagFormatError, match=r"unsupported message encoding 'wrong_format' on topic /\w+") as info:
        list(read_bag_messages(FIXTURES / "rosbag2_wrong_rmw_test.mcap", topics=["/amcl_pose"]))
    assert info.value.details["topic"] in ("/test_topic", "/array_topic")


def _raw_mcap(path: Path, channels: list[tuple[str, str, str]], *, summary: bool = True) -> Path:
    """An MCAP file with one message per (topic, message encoding, schema encoding)."""
    from mcap.writer import CompressionType, IndexType, Writer

    options = {} if summary else {"index_types": IndexType.NONE, "repeat_channels": False, "repeat_schemas": False,
                                  "use_statistics": False, "use_summary_offsets": False}
    with open(path, "wb") as stream:
        writer = Writer(stream, compression=CompressionType.NONE, use_chunking=False, **options)
        writer.start(profile="ros2", library="test")
        for i, (topic, encoding, schema_encoding) in enumerate(channels, 1):
            schema = writer.register_schema(name=STRING, encoding=schema_encoding, data=b"string data")
            channel = writer.register_channel(topic=topic, message_encoding=encoding, schema_id=schema)
            writer.add_message(channel_id=channel, log_time=T0 + i, publish_time=T0 + i, data=string_cdr("x"))
        writer.finish()
    return path


def test_a_channel_of_another_encoding_refuses_the_bag_with_or_without_a_summary(tmp_path):
    channels = [("/ok", "cdr", "ros2msg"), ("/other", "json", "ros2msg")]
    for summary in (True, False):
        path = _raw_mcap(tmp_path / f"mixed-{summary}.mcap", channels, summary=summary)
        with pytest.raises(BagFormatError, match="unsupported message encoding 'json' on topic /other"):
            list(read_bag_messages(path, topics=["/ok"]))
    with pytest.raises(BagFormatError, match="unsupported schema encoding 'jsonschema' on topic /ok") as info:
        list(read_bag_messages(_raw_mcap(tmp_path / "schema.mcap", [("/ok", "cdr", "jsonschema")]), topics=["/x"]))
    assert info.value.details["schema_encoding"] == "jsonschema"
    fine = _raw_mcap(tmp_path / "fine.mcap", [("/ok", "cdr", "ros2msg"), ("/idl", "cdr", "ros2idl")], summary=False)
    assert [m.topic for m in read_bag_messages(fine, topics=["/ok"])] == ["/ok"], "no summary: filtered after checking"


@needs_fixtures
def test_messages_decode_with_the_bags_own_schemas():
    from robot_harness.evidence.bag import read_bag_decoded

    decoded = list(read_bag_decoded(FIXTURES / "evo_nav2_turtlebot.mcap", topics=["/amcl_pose"]))
    assert len(decoded) == 135 and {m.topic for m, _ in decoded} == {"/amcl_pose"}
    stamps = [msg.header.stamp.sec for _, msg in decoded]
    assert 920 <= min(stamps) and max(stamps) <= 1030, "header stamps in sim time, as recorded"
    assert all(msg.header.frame_id == "map" for _, msg in decoded)
    # a schema the decoder cannot parse (service events: see the fixtures README) names its topic
    with pytest.raises(BagFormatError, match="cannot decode /add_two_ints/_service_event"):
        list(read_bag_decoded(FIXTURES / "rosbag2_topics_and_services.mcap", topics=["/add_two_ints/_service_event"]))


def test_missing_bag_is_not_found(tmp_path):
    with pytest.raises(EvidenceNotFound):
        list(read_bag_messages(tmp_path / "nothing.mcap"))


# --------------------------------------------------------------------------- artifacts and purity


def test_verify_artifact(tmp_path):
    path = tmp_path / "frame 1.png"
    path.write_bytes(b"\x89PNG pixels")
    digest = hashlib.sha256(b"\x89PNG pixels").hexdigest()
    uri = path.as_uri()
    verify_artifact(uri, digest)
    verify_artifact(uri, digest.upper())
    with pytest.raises(EvidenceMismatch):
        verify_artifact(uri, "0" * 64)
    with pytest.raises(EvidenceNotFound):
        verify_artifact((tmp_path / "gone.png").as_uri(), digest)
    with pytest.raises(EvidenceStoreMisuse):
        verify_artifact("https://example.com/x.png", digest)


def test_evidence_package_imports_no_ros():
    code = (
        "import sys, robot_harness.evidence\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('rclpy', 'rosidl_parser', 'nav2_msgs',"
        " 'geometry_msgs', 'std_msgs') or n.startswith(('robot_harness.msg', 'robot_harness.nodes')))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
