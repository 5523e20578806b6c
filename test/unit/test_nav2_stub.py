"""The nav2_msgs stand-in is Nav2 Kilted's interfaces, field for field and constant for constant.

The expected definitions below are written out by hand from the upstream files
(never read from them at test time), so a drift of the stub, or of an installed
nav2_msgs, from what a Kilted robot runs fails here:

    repository  ros-navigation/navigation2
    branch      kilted (commit 71a1d84f49dc48e226c96619188ee12054824ff3, the branch head on 2026-12-02)
    package     nav2_msgs 1.4.2
    paths       nav2_msgs/action/{NavigateToPose,NavigateThroughPoses,ComputePathToPose,
                                  FollowWaypoints,Spin,BackUp,Wait}.action
                nav2_msgs/srv/{ClearEntireCostmap,GetCosts}.srv
                nav2_msgs/msg/WaypointStatus.msg

Order matters: the RIHS01 type hash (REP 2011) is computed over the fields in
order, and a mismatched hash is what a Kilted client sees as an incompatible
action or service. Constants and default values do not enter the hash
(rosidl_generator_type_description drops default_value before hashing, and
Jazzy's and Kilted's NavigateToPose hashes are the same although their result
codes differ, measured below), so they are checked by name, type and value on
their own: in the stub's files, and in a built or installed package through
the type description it ships (which keeps default_value) and the Python class.
"""
from __future__ import annotations

import importlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STUB = REPO / "stubs" / "nav2_msgs"
STUB_ACTION = STUB / "action" / "NavigateToPose.action"
WS_INSTALL = REPO / ".ws" / "install"

SOURCE = {
    "repository": "ros-navigation/navigation2",
    "branch": "kilted",
    "commit": "71a1d84f49dc48e226c96619188ee12054824ff3",
    "package": "nav2_msgs",
    "version": "1.4.2",
    "path": "nav2_msgs/action/NavigateToPose.action",
}

Value = int | float | str | bool


@dataclass(frozen=True)
class Section:
    """One part of an interface file: fields (type, name), constants (type, name, value), in order.

    ``defaults`` maps a field's name to the default value its declaration gives (fields without one are absent).
    """

    fields: list[tuple[str, str]]
    constants: list[tuple[str, str, Value]]
    defaults: dict[str, Value] = field(default_factory=dict)


# ---- Kilted's definitions, by hand ---------------------------------------------------------------

# NavigateToPose: (type, name) in declaration order, per section.
KILTED_GOAL = [
    ("geometry_msgs/PoseStamped", "pose"),
    ("string", "behavior_tree"),
]
KILTED_RESULT = [
    ("uint16", "error_code"),
    ("string", "error_msg"),
]
KILTED_FEEDBACK = [
    ("geometry_msgs/PoseStamped", "current_pose"),
    ("builtin_interfaces/Duration", "navigation_time"),
    ("builtin_interfaces/Duration", "estimated_time_remaining"),
    ("int16", "number_of_recoveries"),
    ("float32", "distance_remaining"),
]
# (type, name, value) in declaration order; the goal and feedback have none.
KILTED_RESULT_CONSTANTS = [
    ("uint16", "NONE", 0),
    ("uint16", "UNKNOWN", 9000),
    ("uint16", "FAILED_TO_LOAD_BEHAVIOR_TREE", 9001),
    ("uint16", "TF_ERROR", 9002),
    ("uint16", "TIMEOUT", 9003),
]

# Every interface of the stub, as Kilted declares it: "kind/Name" -> sections (an action's goal,
# result and feedback; a service's request and response; a message's one).
KILTED: dict[str, tuple[Section, ...]] = {
    "action/NavigateToPose": (
        Section(KILTED_GOAL, []),
        Section(KILTED_RESULT, KILTED_RESULT_CONSTANTS),
        Section(KILTED_FEEDBACK, []),
    ),
    "action/NavigateThroughPoses": (
        Section([
            ("nav_msgs/Goals", "poses"),
            ("string", "behavior_tree"),
        ], []),
        Section([
            ("uint16", "error_code"),
            ("string", "error_msg"),
            ("WaypointStatus[]", "waypoint_statuses"),
        ], [
            ("uint16", "NONE", 0),
            ("uint16", "UNKNOWN", 9100),
            ("uint16", "FAILED_TO_LOAD_BEHAVIOR_TREE", 9101),
            ("uint16", "TF_ERROR", 9102),
            ("uint16", "TIMEOUT", 9103),
        ]),
        Section([
            ("geometry_msgs/PoseStamped", "current_pose"),
            ("builtin_interfaces/Duration", "navigation_time"),
            ("builtin_interfaces/Duration", "estimated_time_remaining"),
            ("int16", "number_of_recoveries"),
            ("float32", "distance_remaining"),
            ("int16", "number_of_poses_remaining"),
            ("WaypointStatus[]", "waypoint_statuses"),
        ], []),
    ),
    "action/ComputePathToPose": (
        Section([
            ("geometry_msgs/PoseStamped", "goal"),
            ("geometry_msgs/PoseStamped", "start"),
            ("string", "planner_id"),
            ("bool", "use_start"),
        ], []),
        Section([
            ("nav_msgs/Path", "path"),
            ("builtin_interfaces/Duration", "planning_time"),
            ("uint16", "error_code"),
            ("string", "error_msg"),
        ], [
            ("uint16", "NONE", 0),
            ("uint16", "UNKNOWN", 200),
            ("uint16", "INVALID_PLANNER", 201),
            ("uint16", "TF_ERROR", 202),
            ("uint16", "START_OUTSIDE_MAP", 203),
            ("uint16", "GOAL_OUTSIDE_MAP", 204),
            ("uint16", "START_OCCUPIED", 205),
            ("uint16", "GOAL_OCCUPIED", 206),
            ("uint16", "TIMEOUT", 207),
            ("uint16", "NO_VALID_PATH", 208),
        ]),
        Section([], []),
    ),
    "action/FollowWaypoints": (
        Section([
            ("uint32", "number_of_loops"),
            ("uint32", "goal_index"),
            ("geometry_msgs/PoseStamped[]", "poses"),
        ], [], {"goal_index": 0}),
        Section([
            ("WaypointStatus[]", "missed_waypoints"),
            ("uint16", "error_code"),
            ("string", "error_msg"),
        ], [
            ("uint16", "NONE", 0),
            ("uint16", "UNKNOWN", 600),
            ("uint16", "TASK_EXECUTOR_FAILED", 601),
            ("uint16", "NO_VALID_WAYPOINTS", 602),
            ("uint16", "STOP_ON_MISSED_WAYPOINT", 603),
        ]),
        Section([
            ("uint32", "current_waypoint"),
        ], []),
    ),
    "action/Spin": (
        Section([
            ("float32", "target_yaw"),
            ("builtin_interfaces/Duration", "time_allowance"),
            ("bool", "disable_collision_checks"),
        ], [], {"disable_collision_checks": False}),
        Section([
            ("builtin_interfaces/Duration", "total_elapsed_time"),
            ("uint16", "error_code"),
            ("string", "error_msg"),
        ], [
            ("uint16", "NONE", 0),
            ("uint16", "UNKNOWN", 700),
            ("uint16", "TIMEOUT", 701),
            ("uint16", "TF_ERROR", 702),
            ("uint16", "COLLISION_AHEAD", 703),
        ]),
        Section([
            ("float32", "angular_distance_traveled"),
        ], []),
    ),
    "action/BackUp": (
        Section([
            ("geometry_msgs/Point", "target"),
            ("float32", "speed"),
            ("builtin_interfaces/Duration", "time_allowance"),
            ("bool", "disable_collision_checks"),
        ], [], {"disable_collision_checks": False}),
        Section([
            ("builtin_interfaces/Duration", "total_elapsed_time"),
            ("uint16", "error_code"),
            ("string", "error_msg"),
        ], [
            ("uint16", "NONE", 0),
            ("uint16", "UNKNOWN", 710),
            ("uint16", "TIMEOUT", 711),
            ("uint16", "TF_ERROR", 712),
            ("uint16", "INVALID_INPUT", 713),
            ("uint16", "COLLISION_AHEAD", 714),
        ]),
        Section([
            ("float32", "distance_traveled"),
        ], []),
    ),
    "action/Wait": (
        Section([
            ("builtin_interfaces/Duration", "time"),
        ], []),
        # Kilted declares Wait's result codes after its fields; only their own order is kept.
        Section([
            ("builtin_interfaces/Duration", "total_elapsed_time"),
            ("uint16", "error_code"),
            ("string", "error_msg"),
        ], [
            ("uint16", "NONE", 0),
            ("uint16", "UNKNOWN", 740),
            ("uint16", "TIMEOUT", 741),
        ]),
        Section([
            ("builtin_interfaces/Duration", "time_left"),
        ], []),
    ),
    "srv/ClearEntireCostmap": (
        Section([("std_msgs/Empty", "request")], []),
        Section([("std_msgs/Empty", "response")], []),
    ),
    "srv/GetCosts": (
        Section([
            ("bool", "use_footprint"),
            ("geometry_msgs/PoseStamped[]", "poses"),
        ], []),
        Section([
            ("float32[]", "costs"),
            ("bool", "success"),
        ], []),
    ),
    "msg/WaypointStatus": (
        Section([
            ("uint8", "waypoint_status"),
            ("uint32", "waypoint_index"),
            ("geometry_msgs/PoseStamped", "waypoint_pose"),
            ("uint16", "error_code"),
            ("string", "error_msg"),
        ], [
            ("uint8", "PENDING", 0),
            ("uint8", "COMPLETED", 1),
            ("uint8", "SKIPPED", 2),
            ("uint8", "FAILED", 3),
        ]),
    ),
}
INTERFACES = sorted(KILTED)
_SECTION_NAMES = {"action": ("Goal", "Result", "Feedback"), "srv": ("Request", "Response"), "msg": ("",)}
_EXTENSION = {"action": ".action", "srv": ".srv", "msg": ".msg"}

# What the neighbouring branches differ in (same repository and paths), for
# whoever is tempted to "update" the stub from the wrong one:
OTHER_BRANCHES = {
    # jazzy, commit f4108e5b1c2bce804a1aa0c7be6673a8eb4a1501, nav2_msgs 1.3.13:
    # NavigateToPose has the same fields; of its result codes only NONE=0.
    # Fewer result codes elsewhere too (NavigateThroughPoses only NONE, Wait
    # none, FollowWaypoints no NO_VALID_WAYPOINTS / STOP_ON_MISSED_WAYPOINT); no
    # disable_collision_checks in Spin and BackUp; and no GetCosts, no
    # WaypointStatus. ComputePathToPose and ClearEntireCostmap are Kilted's.
    "jazzy": {
        "version": "1.3.13",
        "result_constants": [("uint16", "NONE", 0)],
        "extra_feedback": [],
        # (interface, section index, (type, name)) that Jazzy declares and Kilted does not.
        "fields": [
            ("action/NavigateThroughPoses", 0, ("geometry_msgs/PoseStamped[]", "poses")),
            ("action/FollowWaypoints", 1, ("MissedWaypoint[]", "missed_waypoints")),
        ],
    },
    # main, commit a3a97043ee93d92fe8d70ec56d183933169beb1c, nav2_msgs 1.5.0:
    # GOAL_REJECTED=1 and SEND_GOAL_FAILURE=2 after NONE, and two feedback
    # fields after distance_remaining (which change the feedback's type hash).
    "main": {
        "version": "1.5.0",
        "extra_result_constants": [("uint16", "GOAL_REJECTED", 1), ("uint16", "SEND_GOAL_FAILURE", 2)],
        "extra_feedback": [("float32", "position_tracking_error"), ("float32", "heading_tracking_error")],
        # The names main adds to each interface (FollowWaypoints, GetCosts and WaypointStatus are unchanged).
        "names": {
            "action/NavigateToPose": ["GOAL_REJECTED", "SEND_GOAL_FAILURE",
                                      "position_tracking_error", "heading_tracking_error"],
            "action/NavigateThroughPoses": ["GOAL_REJECTED", "SEND_GOAL_FAILURE",
                                            "position_tracking_error", "heading_tracking_error"],
            "action/ComputePathToPose": ["viapoints", "GOAL_REJECTED", "SEND_GOAL_FAILURE"],
            "action/Spin": ["GOAL_REJECTED", "SEND_GOAL_FAILURE"],
            "action/BackUp": ["GOAL_REJECTED", "SEND_GOAL_FAILURE"],
            "action/Wait": ["GOAL_REJECTED", "SEND_GOAL_FAILURE"],
            # main's ClearEntireCostmap is string[] plugins / bool success.
            "srv/ClearEntireCostmap": ["plugins", "success"],
        },
    },
}

# RIHS01 hashes measured on 2026-12-02 by building the unmodified upstream
# kilted files (commit 71a1d84f49dc, all ten in one throw-away package outside
# the repository, NavigateToPose's five reproduced; with this machine's Kilted
# geometry_msgs/builtin_interfaces/nav_msgs/std_msgs wheels, which enter the
# hash as referenced types). For NavigateToPose, Jazzy's file gives the same
# five; main's gives NavigateToPose 8249f006..., _Feedback f37016a8...,
# _FeedbackMessage 2c1b4ec1...
KILTED_TYPE_HASHES = {
    "nav2_msgs/action/NavigateToPose": "RIHS01_a56dba8a3234a1215e610180dc703ae25bbf406dded8b54887891c9732857eab",
    "nav2_msgs/action/NavigateToPose_Goal": "RIHS01_22a9dffbd6733011220460bd52edbc7843c8fc86282d40bc7ad3ca176a9dec10",
    "nav2_msgs/action/NavigateToPose_Result": "RIHS01_ddbff7fc6d1e51d774d5defdb8398a57cb23fa8709355002d676408bb4860b85",
    "nav2_msgs/action/NavigateToPose_Feedback": "RIHS01_9ebc544c7d41bd8c6060b191bf9f5e4ddca6c2f61ee9e04fcb62ed5d67218a33",
    "nav2_msgs/action/NavigateToPose_FeedbackMessage": "RIHS01_9d1f6fa2eb975ce733b419ac2e97b134d8ff92b6478b6559feed9a50bdfd82b3",
    "nav2_msgs/action/NavigateThroughPoses":
        "RIHS01_79fd41c3d79022e194035040f5adee498dfe56e797ede67e5ca31591d9f52eef",
    "nav2_msgs/action/NavigateThroughPoses_Goal":
        "RIHS01_e87a54ff1b11928570b7fc730f819a4a2f02df9fd48f163cc598e772fd8903f9",
    "nav2_msgs/action/NavigateThroughPoses_Result":
        "RIHS01_c1cba96c1a8dff972fb892764582e004f88e1bf68e12ccddd3b9ebc820c308e3",
    "nav2_msgs/action/NavigateThroughPoses_Feedback":
        "RIHS01_7c1f1b8b799612a6aef5778a9f1a08569237e15bfbd40cea03f691f396f81e17",
    "nav2_msgs/action/NavigateThroughPoses_FeedbackMessage":
        "RIHS01_adebeaaa85467df1ffc48a5e398991b9ec041450573a3a11be0345f6fb13242c",
    "nav2_msgs/action/ComputePathToPose":
        "RIHS01_b11d50c914791956069419b8f4ad441e3c66fcfbd9461f8e87110b77dc6febe9",
    "nav2_msgs/action/ComputePathToPose_Goal":
        "RIHS01_9b2a136db06950716ad4a46b9d01bb628703cad155650c0b8233fb6a2f2783fa",
    "nav2_msgs/action/ComputePathToPose_Result":
        "RIHS01_7178b0d4da2f4d4243f3b95db1051384e4fdd2226a14518f04547b13cdfa0253",
    "nav2_msgs/action/ComputePathToPose_Feedback":
        "RIHS01_65f211af92621424a97b9f54224f75c04e748d9b998115a39f6f03a684e01f1b",
    "nav2_msgs/action/ComputePathToPose_FeedbackMessage":
        "RIHS01_a086c8f040554ab5883b433bded128a1d1a732d21ca57596b7fdbe7ad2d0b64a",
    "nav2_msgs/action/FollowWaypoints":
        "RIHS01_667c9e9d426ede27da21dd3cdd3a34e4fc5cc6405b35bc9d5c0b084479920f54",
    "nav2_msgs/action/FollowWaypoints_Goal":
        "RIHS01_ff501ac35193ef65c68aa766e1296b45ae003df94c85a9675679a09738317bd4",
    "nav2_msgs/action/FollowWaypoints_Result":
        "RIHS01_58f76203b5766c271beec3de33b1218ac1c3d46ada01ae755b4987cfb5754fe4",
    "nav2_msgs/action/FollowWaypoints_Feedback":
        "RIHS01_4e41856e123034fefdbad24b78bccfb1be3d2c6adfa01fdd5c4027ab67337836",
    "nav2_msgs/action/FollowWaypoints_FeedbackMessage":
        "RIHS01_467071c0ede294cafe6be7251e6e85716a6e19b8ed46db18952ac0c05597abcf",
    "nav2_msgs/action/Spin":
        "RIHS01_8463b23d8454c92f735dbc77a62138d4e8570570939e39eab993dd63d8442925",
    "nav2_msgs/action/Spin_Goal":
        "RIHS01_f6e33f6a4d5d9c4e34cfa68f31818cd096d4251c162738ea5c01a9a8854779fc",
    "nav2_msgs/action/Spin_Result":
        "RIHS01_7e028af50815284a59ab43101abfd16f349963c4f0a832c33f497bfcab114a6b",
    "nav2_msgs/action/Spin_Feedback":
        "RIHS01_3973d0eb96c7340ba3a815ca1a623225178a882b603e0c59451ef5a5f55fee02",
    "nav2_msgs/action/Spin_FeedbackMessage":
        "RIHS01_65172773a4a518f36640b41d18d588319e665e7ba04a29237e7f92ba275e8388",
    "nav2_msgs/action/BackUp":
        "RIHS01_cc8889ed926f2e6956d1a3d0459e8e610289ed689efdcf8bcff3e4a349cea741",
    "nav2_msgs/action/BackUp_Goal":
        "RIHS01_07be8f5f294103a66436fbd9072f6595359431e03221039da9a8e56c2d88d8d8",
    "nav2_msgs/action/BackUp_Result":
        "RIHS01_5e66d3db3244f382ecb7be337d2f28135ad7a0e66429948520a2315d97fb3acd",
    "nav2_msgs/action/BackUp_Feedback":
        "RIHS01_859f0344e74b313985d5c7338fc9462fcce637f25ea97500355b39201dc5c8a1",
    "nav2_msgs/action/BackUp_FeedbackMessage":
        "RIHS01_f279f363e5f9f485dfca4704643e12354bb5bb092dc27b0ae3dca718cff715f7",
    "nav2_msgs/action/Wait":
        "RIHS01_0c5d418b19d8d009bb5bce6dca27687d9d43659016a70dc08307e38a032af2c3",
    "nav2_msgs/action/Wait_Goal":
        "RIHS01_f97998c3733188e43ba93a54a60da2b22dfe4de349548428002305925246edd9",
    "nav2_msgs/action/Wait_Result":
        "RIHS01_69a41e8b1d51db3993da45303f69fedf117fcd807d36543212f792743a534386",
    "nav2_msgs/action/Wait_Feedback":
        "RIHS01_2a934be90be8dae603a970758be0d6247555e14bffac46b28aa220154f19f228",
    "nav2_msgs/action/Wait_FeedbackMessage":
        "RIHS01_cb143310afa60cc18ef814ac127a730d4ee190828ce9b9a943fa8f0cb1a09f7c",
    "nav2_msgs/srv/ClearEntireCostmap":
        "RIHS01_553f54f9cadab44553fdf5627433fcb6701f71c1fc2eb55a7b4a004fdeeab952",
    "nav2_msgs/srv/ClearEntireCostmap_Request":
        "RIHS01_365687a69e15ff9f199447a047ab6fdd264272e6b4d12de0b71bd4a6e4137e99",
    "nav2_msgs/srv/ClearEntireCostmap_Response":
        "RIHS01_a0aeab7debb4b503bf8d5edcadb896864aa3dda700452d8c9cfa6c4755956665",
    "nav2_msgs/srv/GetCosts":
        "RIHS01_b71b396977d0c31ff23dc4fc277980502126e80138eca8ed803a2111afd9c108",
    "nav2_msgs/srv/GetCosts_Request":
        "RIHS01_ebc7fb72d8164a080b23734eeac6af70ec7a68b22edc4a395a7f9f1e801b1235",
    "nav2_msgs/srv/GetCosts_Response":
        "RIHS01_b4d443c480924b7a3f71ab0f20721d5306d936416c1554e191e204e14488295a",
    "nav2_msgs/msg/WaypointStatus":
        "RIHS01_4ac489f0a5a77648dcecf79b070c1ce5b126cd8fe4ed6ff0d316f87089b8f028",
}


def _hashed_type_names(interface: str) -> list[str]:
    """The types of an interface whose hashes are pinned: the interface and its parts a client sees."""
    kind, name = interface.split("/")
    parts = {"action": ["", "_Goal", "_Result", "_Feedback", "_FeedbackMessage"],
             "srv": ["", "_Request", "_Response"], "msg": [""]}[kind]
    return [f"nav2_msgs/{kind}/{name}{part}" for part in parts]


# ---- parsing the stub's files ---------------------------------------------------------------------

_CONSTANT = re.compile(r"^(?P<type>\S+)\s+(?P<name>[A-Z][A-Z0-9_]*)\s*=\s*(?P<value>.+)$")
_FIELD = re.compile(r"^(?P<type>\S+)\s+(?P<name>[a-z][a-z0-9_]*)(?:\s+(?P<default>.+))?$")
_BOOLS = {"true": True, "false": False}


def _value(type_: str, text: str) -> Value:
    if type_ == "bool":
        if text.lower() not in _BOOLS:
            raise ValueError(f"not a bool: {text!r}")
        return _BOOLS[text.lower()]
    if type_.startswith(("int", "uint", "byte", "char")):
        return int(text, 0)
    if type_.startswith("float"):
        return float(text)
    return text


def parse_interface(text: str, sections: int) -> tuple[Section, ...]:
    """Parse a rosidl .msg/.srv/.action text into its sections, the subset of rosidl's syntax nav2_msgs uses.

    Raises ValueError on a line this parser does not understand, on a default value it cannot read (an array's,
    say), and on the wrong number of sections, rather than skipping anything.
    """
    parsed: list[Section] = [Section([], [])]
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line == "---":
            parsed.append(Section([], []))
            continue
        if m := _CONSTANT.match(line):
            parsed[-1].constants.append((m["type"], m["name"], _value(m["type"], m["value"].strip())))
        elif m := _FIELD.match(line):
            if m["default"] is not None:
                if m["type"].endswith("]"):
                    raise ValueError(f"line {number}: array defaults are not expected here: {raw!r}")
                parsed[-1].defaults[m["name"]] = _value(m["type"], m["default"].strip())
            parsed[-1].fields.append((m["type"], m["name"]))
        else:
            raise ValueError(f"line {number}: not a field or constant: {raw!r}")
    if len(parsed) != sections:
        raise ValueError(f"expected {sections} sections; found {len(parsed)}")
    return tuple(parsed)


def parse_action(text: str) -> tuple[Section, Section, Section]:
    """An action's goal, result and feedback (see parse_interface)."""
    goal, result, feedback = parse_interface(text, 3)
    return goal, result, feedback


def _stub_file(interface: str) -> Path:
    kind, name = interface.split("/")
    return STUB / kind / f"{name}{_EXTENSION[kind]}"


def _parse_stub(interface: str) -> tuple[Section, ...]:
    return parse_interface(_stub_file(interface).read_text(encoding="utf-8"), len(KILTED[interface]))


def test_parser_reads_what_it_is_given() -> None:
    """The parser itself: order kept, constants and defaults apart from fields, junk refused (so checks can fail)."""
    goal, result, feedback = parse_action("int16 b\nint8 a\n---\nuint16 X=3\nstring s\n---\n")
    assert goal.fields == [("int16", "b"), ("int8", "a")]
    assert result.constants == [("uint16", "X", 3)] and result.fields == [("string", "s")]
    assert feedback == Section([], [])
    request, response = parse_interface("bool on False # why\nuint32 n 7\nfloat32[] c\n---\nint8 Y=-1\n", 2)
    assert request.fields == [("bool", "on"), ("uint32", "n"), ("float32[]", "c")]
    assert request.defaults == {"on": False, "n": 7}
    assert response == Section([], [("int8", "Y", -1)])
    (message,) = parse_interface("uint8 A=1 # a\nuint8 a\n", 1)
    assert message == Section([("uint8", "a")], [("uint8", "A", 1)])
    with pytest.raises(ValueError, match="3 sections"):
        parse_action("int8 a\n---\nint8 b\n")
    with pytest.raises(ValueError, match="2 sections"):
        parse_interface("int8 a\n", 2)
    with pytest.raises(ValueError, match="not a field"):
        parse_action("int8\n---\n---\n")
    with pytest.raises(ValueError, match="not a bool"):
        parse_interface("bool b 0\n", 1)
    with pytest.raises(ValueError, match="array defaults"):
        parse_interface("int8[] a [1, 2]\n", 1)


def test_stub_is_kilteds_definition() -> None:
    goal, result, feedback = parse_action(STUB_ACTION.read_text(encoding="utf-8"))
    assert goal.fields == KILTED_GOAL
    assert result.fields == KILTED_RESULT
    assert feedback.fields == KILTED_FEEDBACK
    assert goal.constants == [] and feedback.constants == []
    assert result.constants == KILTED_RESULT_CONSTANTS
    assert goal.defaults == result.defaults == feedback.defaults == {}


@pytest.mark.parametrize("interface", INTERFACES)
def test_stub_interface_is_kilteds(interface: str) -> None:
    """Each stub file, section by section: fields in order, constants in order, default values."""
    kind = interface.split("/")[0]
    for section, got, want in zip(_SECTION_NAMES[kind], _parse_stub(interface), KILTED[interface], strict=True):
        where = f"{interface} {section}".strip()
        assert got.fields == want.fields, where
        assert got.constants == want.constants, where
        assert got.defaults == want.defaults, where
    text = _stub_file(interface).read_text(encoding="utf-8")
    assert "kilted" in text and SOURCE["version"] in text, f"{interface}: the stub should say where it comes from"


def test_stub_has_nothing_from_other_branches() -> None:
    """Nav2 main's additions, once in this stub, are absent (named, so a failure says which came back)."""
    text = STUB_ACTION.read_text(encoding="utf-8")
    _, result, feedback = parse_action(text)
    main = OTHER_BRANCHES["main"]
    names = {name for _, name, _ in result.constants} | {name for _, name in feedback.fields}
    for _, name, *_ in main["extra_result_constants"] + main["extra_feedback"]:
        assert name not in names, f"{name} is Nav2 main (1.5.x), not Kilted"
    assert "kilted" in text and SOURCE["version"] in text, "the stub should say where it comes from"


@pytest.mark.parametrize("interface", INTERFACES)
def test_stub_interface_has_nothing_from_other_branches(interface: str) -> None:
    """main's added names and Jazzy's other field types, each named, so a failure says which came back."""
    sections = _parse_stub(interface)
    names = {name for s in sections for _, name in s.fields} | {name for s in sections for _, name, _ in s.constants}
    for name in OTHER_BRANCHES["main"]["names"].get(interface, []):
        assert name not in names, f"{interface}: {name} is Nav2 main (1.5.x), not Kilted"
    for where, index, declared in OTHER_BRANCHES["jazzy"]["fields"]:
        if where == interface:
            assert declared not in sections[index].fields, f"{interface}: {declared} is Nav2 Jazzy, not Kilted"


def _nav2_msgs_messages_used() -> set[str]:
    """The nav2_msgs messages Kilted's definitions refer to (unqualified types), e.g. WaypointStatus."""
    used = set()
    for sections in KILTED.values():
        for section in sections:
            for type_, _ in section.fields:
                base = type_.split("[", 1)[0]
                if "/" not in base and base[:1].isupper():
                    used.add(base)
    return used


def _packages_used() -> set[str]:
    """The interface packages other than nav2_msgs that Kilted's definitions refer to."""
    return {type_.split("/", 1)[0] for sections in KILTED.values() for section in sections
            for type_, _ in section.fields if "/" in type_}


def test_expected_definitions_are_self_consistent() -> None:
    """The table above names every message it uses, and uses what this test expects it to (the control)."""
    assert _nav2_msgs_messages_used() == {"WaypointStatus"}
    assert {f"msg/{m}" for m in _nav2_msgs_messages_used()} <= set(KILTED)
    assert _packages_used() == {"builtin_interfaces", "geometry_msgs", "nav_msgs", "std_msgs"}
    for interface in KILTED:
        assert len(KILTED[interface]) == len(_SECTION_NAMES[interface.split("/")[0]]), interface


def test_stub_package_says_what_it_is() -> None:
    """Exactly the listed interfaces, built by CMake, with the dependencies they use, and the stub's marker."""
    files = {f"{p.parent.name}/{p.stem}" for kind in _EXTENSION for p in (STUB / kind).glob("*") if p.is_file()}
    assert files == set(KILTED), "stub files and the expected definitions differ"
    for interface in KILTED:
        assert _stub_file(interface).is_file(), interface
    # Only the nav2_msgs messages the actions and services use ("nothing more").
    assert {i for i in KILTED if i.startswith("msg/")} == {f"msg/{m}" for m in _nav2_msgs_messages_used()}

    cmake = (STUB / "CMakeLists.txt").read_text(encoding="utf-8")
    call = re.search(r"rosidl_generate_interfaces\(\$\{PROJECT_NAME\}(?P<body>.*?)\)", cmake, re.S)
    assert call, "CMakeLists.txt has no rosidl_generate_interfaces(${PROJECT_NAME} ...)"
    files_part, _, deps_part = call["body"].partition("DEPENDENCIES")
    listed = re.findall(r'"([^"]+)"', files_part)
    assert sorted(listed) == sorted(str(_stub_file(i).relative_to(STUB)) for i in KILTED), (
        "rosidl_generate_interfaces should list exactly the stub's files")
    assert set(deps_part.split()) == _packages_used(), "DEPENDENCIES should be exactly the packages used"
    found = set(re.findall(r"find_package\((\w+) REQUIRED\)", cmake))
    assert _packages_used() <= found, f"find_package missing for {sorted(_packages_used() - found)}"

    package_xml = (STUB / "package.xml").read_text(encoding="utf-8")
    assert set(re.findall(r"<depend>([^<]+)</depend>", package_xml)) == _packages_used(), (
        "package.xml's <depend>s should be exactly the packages used")
    assert "Test-only stand-in for Nav2's nav2_msgs" in package_xml
    assert (REPO / "stubs" / "COLCON_IGNORE").is_file()


# ---- the built or installed nav2_msgs ----------------------------------------------------------

_PY_TYPES = {"float32": "float", "float64": "double", "bool": "boolean"}


def _python_type(rosidl_type: str) -> str:
    """How get_fields_and_field_types() spells a rosidl type.

    float32 is 'float', float64 'double', bool 'boolean'; T[] is 'sequence<T>'; a message of this package named
    without one is 'nav2_msgs/T'; the rest as written.
    """
    if rosidl_type.endswith("[]"):
        return f"sequence<{_python_type(rosidl_type[:-2])}>"
    if "/" not in rosidl_type and rosidl_type[:1].isupper():
        return f"nav2_msgs/{rosidl_type}"
    return _PY_TYPES.get(rosidl_type, rosidl_type)


def _expected_python_fields(fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, _python_type(type_)) for type_, name in fields]


def test_python_type_spelling() -> None:
    """The control for the Python checks below: the spelling rules as rosidl_generator_py applies them."""
    assert _expected_python_fields([("float32[]", "c"), ("bool", "b"), ("WaypointStatus[]", "w"),
                                    ("geometry_msgs/PoseStamped", "p"), ("uint16", "e")]) == [
        ("c", "sequence<float>"), ("b", "boolean"), ("w", "sequence<nav2_msgs/WaypointStatus>"),
        ("p", "geometry_msgs/PoseStamped"), ("e", "uint16")]


def _import_nav2_msgs():
    """The nav2_msgs Python package, or a skip when there is none to import (no ROS, or setup not run)."""
    pytest.importorskip("rclpy")
    try:
        import nav2_msgs
    except ImportError as exc:
        pytest.skip(f"nav2_msgs is not importable here ({exc}); run scripts/setup.sh and source scripts/env.sh")
    return nav2_msgs


def _import_nav2_action():
    _import_nav2_msgs()
    try:
        from nav2_msgs.action import NavigateToPose
    except ImportError as exc:
        pytest.skip(f"nav2_msgs is not importable here ({exc}); run scripts/setup.sh and source scripts/env.sh")
    return NavigateToPose


def _import_interface(interface: str):
    """The Python type of an interface. Once nav2_msgs imports, a missing one fails (a stale or non-Kilted build)."""
    kind, name = interface.split("/")
    module = importlib.import_module(f"nav2_msgs.{kind}")
    assert hasattr(module, name), f"nav2_msgs.{kind} has no {name} (built before it was added? re-run setup.sh)"
    return getattr(module, name)


def _is_workspace_stub(module_file: str) -> bool:
    return Path(module_file).resolve().is_relative_to(WS_INSTALL.resolve()) or "/.ws/install/" in module_file


def _check_constants(cls, constants: list[tuple[str, str, Value]], where: str) -> None:
    got = {name: getattr(cls, name, None) for _, name, _ in constants}
    assert got == {name: value for _, name, value in constants}, where
    # No other upper-case constant (main's GOAL_REJECTED, SEND_GOAL_FAILURE).
    # rosidl's Python types also carry a FIELD__DEFAULT for each field with a default value (BackUp's
    # disable_collision_checks): a field's default, not a constant.
    extra = {n for n in dir(cls) if n.isupper() and n != "SLOT_TYPES" and not n.endswith("__DEFAULT")} - set(got)
    assert not extra, f"constants Kilted's {where} lacks: {sorted(extra)}"


def _check_python_type(NavigateToPose) -> None:
    for cls, fields in ((NavigateToPose.Goal, KILTED_GOAL), (NavigateToPose.Result, KILTED_RESULT),
                        (NavigateToPose.Feedback, KILTED_FEEDBACK)):
        assert list(cls.get_fields_and_field_types().items()) == _expected_python_fields(fields), cls.__name__
    _check_constants(NavigateToPose.Result, KILTED_RESULT_CONSTANTS, "NavigateToPose.Result")
    _check_constants(NavigateToPose.Goal, [], "NavigateToPose.Goal")
    _check_constants(NavigateToPose.Feedback, [], "NavigateToPose.Feedback")


def _check_python_interface(interface: str) -> None:
    """Fields (names, types, order), constants and default values of one imported interface."""
    cls = _import_interface(interface)
    kind = interface.split("/")[0]
    parts = [cls] if kind == "msg" else [getattr(cls, section) for section in _SECTION_NAMES[kind]]
    for part, section, want in zip(parts, _SECTION_NAMES[kind], KILTED[interface], strict=True):
        where = f"{interface} {section}".strip()
        assert list(part.get_fields_and_field_types().items()) == _expected_python_fields(want.fields), where
        _check_constants(part, want.constants, where)
        instance = part()
        for name, value in want.defaults.items():
            assert getattr(instance, name) == value, (where, name)


def _share(prefix: Path) -> Path:
    return prefix / "share" / "nav2_msgs"


def _description(share: Path, interface: str) -> dict:
    """The type description rosidl installs next to an interface (share/nav2_msgs/<kind>/<Name>.json).

    Skips only when the package has none at all (rosidl older than Iron writes none); one missing beside others
    fails, as a stale build would.
    """
    path = share / f"{interface}.json"
    if not path.is_file():
        if not (share / "action" / "NavigateToPose.json").is_file():
            pytest.skip(f"no type description at {path} (rosidl older than Iron writes none)")
        pytest.fail(f"no type description at {path}: built before {interface} was added? re-run setup.sh")
    return json.loads(path.read_text(encoding="utf-8"))


def _type_hashes(share: Path) -> dict[str, str]:
    """Every type hash the package's descriptions of the listed interfaces carry, by type name."""
    hashes: dict[str, str] = {}
    for interface in INTERFACES:
        hashes.update({h["type_name"]: h["hash_string"] for h in _description(share, interface)["type_hashes"]})
    return hashes


def _described_defaults(share: Path, interface: str) -> list[dict[str, str]]:
    """Per section, the non-empty default_value of each field as the installed type description records it."""
    data = _description(share, interface)["type_description_msg"]
    described = {d["type_name"]: d for d in [data["type_description"], *data["referenced_type_descriptions"]]}
    kind, name = interface.split("/")
    suffixes = [""] if kind == "msg" else [f"_{s}" for s in _SECTION_NAMES[kind]]
    out = []
    for suffix in suffixes:
        fields = described[f"nav2_msgs/{kind}/{name}{suffix}"]["fields"]
        out.append({f["name"]: f["default_value"] for f in fields if f["default_value"] != ""})
    return out


def _check_installed(share: Path) -> None:
    """Type hashes (field order and types) and default values from the installed type descriptions."""
    hashes = _type_hashes(share)
    assert {k: hashes.get(k) for k in KILTED_TYPE_HASHES} == KILTED_TYPE_HASHES
    for interface in INTERFACES:
        want = [{name: str(value) for name, value in s.defaults.items()} for s in KILTED[interface]]
        assert _described_defaults(share, interface) == want, interface


def test_type_hash_table_covers_every_interface() -> None:
    """Each interface's pinned types are in KILTED_TYPE_HASHES, and nothing else is (the table is not stale)."""
    wanted = {name for interface in INTERFACES for name in _hashed_type_names(interface)}
    assert set(KILTED_TYPE_HASHES) == wanted
    assert all(re.fullmatch(r"RIHS01_[0-9a-f]{64}", h) for h in KILTED_TYPE_HASHES.values())


def test_real_nav2_msgs_matches_kilted() -> None:
    """Where the real nav2_msgs is installed, it is Kilted's: fields, constants, defaults and type hashes."""
    NavigateToPose = _import_nav2_action()
    import nav2_msgs

    if _is_workspace_stub(nav2_msgs.__file__):
        pytest.skip(f"nav2_msgs comes from the workspace stub ({nav2_msgs.__file__}), not a real Nav2 install;"
                    " test_built_stub_matches_kilted covers it")
    _check_python_type(NavigateToPose)
    for interface in INTERFACES:
        _check_python_interface(interface)
    prefix = Path(nav2_msgs.__file__).parents[4]  # <prefix>/lib/pythonX.Y/site-packages/nav2_msgs/__init__.py
    _check_installed(_share(prefix))


def test_built_stub_matches_kilted() -> None:
    """The stub the workspace carries was built from these definitions (setup.sh ran after the last change)."""
    install = WS_INSTALL / "nav2_msgs"
    if not install.is_dir():
        pytest.skip(f"no stub built at {install} (a real nav2_msgs is in use, or setup.sh has not run)")
    hashes = _type_hashes(_share(install))
    assert {k: hashes.get(k) for k in KILTED_TYPE_HASHES} == KILTED_TYPE_HASHES, (
        "the built stub's type hashes are not Kilted's: re-run `flock /tmp/rh_setup.lock bash scripts/setup.sh`")
    _check_installed(_share(install))
    NavigateToPose = _import_nav2_action()
    import nav2_msgs

    if not _is_workspace_stub(nav2_msgs.__file__):
        pytest.skip(f"nav2_msgs imports from {nav2_msgs.__file__}, not the workspace stub")
    _check_python_type(NavigateToPose)
    for interface in INTERFACES:
        _check_python_interface(interface)
    assert os.path.samefile(Path(nav2_msgs.__file__).parents[3], install / "lib")
