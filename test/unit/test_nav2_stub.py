"""The nav2_msgs stand-in is Nav2 Kilted's NavigateToPose, field for field and constant for constant.

The expected definition below is written out by hand from the upstream file
(never read from it at test time), so a drift of the stub, or of an installed
nav2_msgs, from what a Kilted robot runs fails here:

    repository  ros-navigation/navigation2
    branch      kilted (commit 71a1d84f49dc48e226c96619188ee12054824ff3)
    package     nav2_msgs 1.4.2
    path        nav2_msgs/action/NavigateToPose.action

Order matters: the RIHS01 type hash (REP 2011) is computed over the fields in
order, and a mismatched hash is what a Kilted client sees as an incompatible
action. Constants do not enter the hash (Jazzy's and Kilted's hashes are the
same although their result codes differ, measured below), so they are checked
by name, type and value on their own.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
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

# (type, name) in declaration order, per section.
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

# What the neighbouring branches differ in (same repository and path), for
# whoever is tempted to "update" the stub from the wrong one:
OTHER_BRANCHES = {
    # jazzy, commit f4108e5b1c2bce804a1aa0c7be6673a8eb4a1501, nav2_msgs 1.3.13:
    # same goal, result and feedback fields; of the result codes only NONE=0.
    "jazzy": {
        "version": "1.3.13",
        "result_constants": [("uint16", "NONE", 0)],
        "extra_feedback": [],
    },
    # main, commit a3a97043ee93d92fe8d70ec56d183933169beb1c, nav2_msgs 1.5.0:
    # GOAL_REJECTED=1 and SEND_GOAL_FAILURE=2 after NONE, and two feedback
    # fields after distance_remaining (which change the feedback's type hash).
    "main": {
        "version": "1.5.0",
        "extra_result_constants": [("uint16", "GOAL_REJECTED", 1), ("uint16", "SEND_GOAL_FAILURE", 2)],
        "extra_feedback": [("float32", "position_tracking_error"), ("float32", "heading_tracking_error")],
    },
}

# RIHS01 hashes measured on 2026-12-02 by building the unmodified upstream
# kilted file (in a throw-away package, with this machine's Kilted
# geometry_msgs/builtin_interfaces wheels, which enter the hash as referenced
# types). Jazzy's file gives the same five; main's gives
# NavigateToPose 8249f006..., _Feedback f37016a8..., _FeedbackMessage 2c1b4ec1...
KILTED_TYPE_HASHES = {
    "nav2_msgs/action/NavigateToPose": "RIHS01_a56dba8a3234a1215e610180dc703ae25bbf406dded8b54887891c9732857eab",
    "nav2_msgs/action/NavigateToPose_Goal": "RIHS01_22a9dffbd6733011220460bd52edbc7843c8fc86282d40bc7ad3ca176a9dec10",
    "nav2_msgs/action/NavigateToPose_Result": "RIHS01_ddbff7fc6d1e51d774d5defdb8398a57cb23fa8709355002d676408bb4860b85",
    "nav2_msgs/action/NavigateToPose_Feedback": "RIHS01_9ebc544c7d41bd8c6060b191bf9f5e4ddca6c2f61ee9e04fcb62ed5d67218a33",
    "nav2_msgs/action/NavigateToPose_FeedbackMessage": "RIHS01_9d1f6fa2eb975ce733b419ac2e97b134d8ff92b6478b6559feed9a50bdfd82b3",
}


@dataclass(frozen=True)
class Section:
    """One part of a .action file: fields (type, name) and constants (type, name, value), in order."""

    fields: list[tuple[str, str]]
    constants: list[tuple[str, str, int | float | str]]


_CONSTANT = re.compile(r"^(?P<type>\S+)\s+(?P<name>[A-Z][A-Z0-9_]*)\s*=\s*(?P<value>.+)$")
_FIELD = re.compile(r"^(?P<type>\S+)\s+(?P<name>[a-z][a-z0-9_]*)(?:\s+(?P<default>.+))?$")


def _value(type_: str, text: str) -> int | float | str:
    if type_.startswith(("int", "uint", "byte", "char")):
        return int(text, 0)
    if type_.startswith("float"):
        return float(text)
    return text


def parse_action(text: str) -> tuple[Section, Section, Section]:
    """Parse a rosidl .action text (goal, result, feedback), the subset of rosidl's syntax nav2_msgs uses.

    Raises ValueError on a line this parser does not understand rather than skipping it.
    """
    sections: list[Section] = [Section([], [])]
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line == "---":
            sections.append(Section([], []))
            continue
        if m := _CONSTANT.match(line):
            sections[-1].constants.append((m["type"], m["name"], _value(m["type"], m["value"].strip())))
        elif m := _FIELD.match(line):
            if m["default"] is not None:
                raise ValueError(f"line {number}: default values are not expected here: {raw!r}")
            sections[-1].fields.append((m["type"], m["name"]))
        else:
            raise ValueError(f"line {number}: not a field or constant: {raw!r}")
    if len(sections) != 3:
        raise ValueError(f"an action has 3 sections (goal, result, feedback); found {len(sections)}")
    return sections[0], sections[1], sections[2]


def test_parser_reads_what_it_is_given() -> None:
    """The parser itself: order kept, constants apart from fields, junk refused (so the checks below can fail)."""
    goal, result, feedback = parse_action("int16 b\nint8 a\n---\nuint16 X=3\nstring s\n---\n")
    assert goal.fields == [("int16", "b"), ("int8", "a")]
    assert result.constants == [("uint16", "X", 3)] and result.fields == [("string", "s")]
    assert feedback == Section([], [])
    with pytest.raises(ValueError, match="3 sections"):
        parse_action("int8 a\n---\nint8 b\n")
    with pytest.raises(ValueError, match="not a field"):
        parse_action("int8\n---\n---\n")


def test_stub_is_kilteds_definition() -> None:
    goal, result, feedback = parse_action(STUB_ACTION.read_text(encoding="utf-8"))
    assert goal.fields == KILTED_GOAL
    assert result.fields == KILTED_RESULT
    assert feedback.fields == KILTED_FEEDBACK
    assert goal.constants == [] and feedback.constants == []
    assert result.constants == KILTED_RESULT_CONSTANTS


def test_stub_has_nothing_from_other_branches() -> None:
    """Nav2 main's additions, once in this stub, are absent (named, so a failure says which came back)."""
    text = STUB_ACTION.read_text(encoding="utf-8")
    _, result, feedback = parse_action(text)
    main = OTHER_BRANCHES["main"]
    names = {name for _, name, _ in result.constants} | {name for _, name in feedback.fields}
    for _, name, *_ in main["extra_result_constants"] + main["extra_feedback"]:
        assert name not in names, f"{name} is Nav2 main (1.5.x), not Kilted"
    assert "kilted" in text and SOURCE["version"] in text, "the stub should say where it comes from"


def test_stub_package_says_what_it_is() -> None:
    """Only the one action, and a description setup's real-vs-stub check recognises."""
    assert sorted(p.name for p in (STUB / "action").iterdir()) == ["NavigateToPose.action"]
    assert "Test-only stand-in for Nav2's nav2_msgs" in (STUB / "package.xml").read_text(encoding="utf-8")
    assert (REPO / "stubs" / "COLCON_IGNORE").is_file()


# ---- the built or installed nav2_msgs ----------------------------------------------------------

_PY_TYPES = {"float32": "float", "float64": "double"}


def _python_type(rosidl_type: str) -> str:
    """get_fields_and_field_types() spells float32 'float' and float64 'double'; the rest as written."""
    return _PY_TYPES.get(rosidl_type, rosidl_type)


def _expected_python_fields(fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, _python_type(type_)) for type_, name in fields]


def _import_nav2_action():
    pytest.importorskip("rclpy")
    try:
        from nav2_msgs.action import NavigateToPose
    except ImportError as exc:
        pytest.skip(f"nav2_msgs is not importable here ({exc}); run scripts/setup.sh and source scripts/env.sh")
    return NavigateToPose


def _is_workspace_stub(module_file: str) -> bool:
    return Path(module_file).resolve().is_relative_to(WS_INSTALL.resolve()) or "/.ws/install/" in module_file


def _check_python_type(NavigateToPose) -> None:
    for cls, fields in ((NavigateToPose.Goal, KILTED_GOAL), (NavigateToPose.Result, KILTED_RESULT),
                        (NavigateToPose.Feedback, KILTED_FEEDBACK)):
        assert list(cls.get_fields_and_field_types().items()) == _expected_python_fields(fields), cls.__name__
    constants = {name: getattr(NavigateToPose.Result, name) for _, name, _ in KILTED_RESULT_CONSTANTS}
    assert constants == {name: value for _, name, value in KILTED_RESULT_CONSTANTS}
    # No other upper-case constant on the result (main's GOAL_REJECTED, SEND_GOAL_FAILURE).
    extra = {n for n in dir(NavigateToPose.Result) if n.isupper() and n != "SLOT_TYPES"} - set(constants)
    assert not extra, f"constants Kilted's NavigateToPose.Result lacks: {sorted(extra)}"


def _type_hashes(share: Path) -> dict[str, str]:
    path = share / "nav2_msgs" / "action" / "NavigateToPose.json"
    if not path.is_file():
        pytest.skip(f"no type description at {path} (rosidl older than Iron writes none)")
    data = json.loads(path.read_text(encoding="utf-8"))
    return {h["type_name"]: h["hash_string"] for h in data["type_hashes"]}


def test_real_nav2_msgs_matches_kilted() -> None:
    """Where the real nav2_msgs is installed, it is Kilted's: fields, constants and type hashes."""
    NavigateToPose = _import_nav2_action()
    import nav2_msgs

    if _is_workspace_stub(nav2_msgs.__file__):
        pytest.skip(f"nav2_msgs comes from the workspace stub ({nav2_msgs.__file__}), not a real Nav2 install;"
                    " test_built_stub_matches_kilted covers it")
    _check_python_type(NavigateToPose)
    prefix = Path(nav2_msgs.__file__).parents[4]  # <prefix>/lib/pythonX.Y/site-packages/nav2_msgs/__init__.py
    hashes = _type_hashes(prefix / "share")
    assert {k: hashes.get(k) for k in KILTED_TYPE_HASHES} == KILTED_TYPE_HASHES


def test_built_stub_matches_kilted() -> None:
    """The stub the workspace carries was built from this definition (setup.sh ran after the last change)."""
    install = WS_INSTALL / "nav2_msgs"
    if not install.is_dir():
        pytest.skip(f"no stub built at {install} (a real nav2_msgs is in use, or setup.sh has not run)")
    hashes = _type_hashes(install / "share")
    assert {k: hashes.get(k) for k in KILTED_TYPE_HASHES} == KILTED_TYPE_HASHES, (
        "the built stub's type hashes are not Kilted's: re-run `flock /tmp/rh_setup.lock bash scripts/setup.sh`")
    NavigateToPose = _import_nav2_action()
    import nav2_msgs

    if not _is_workspace_stub(nav2_msgs.__file__):
        pytest.skip(f"nav2_msgs imports from {nav2_msgs.__file__}, not the workspace stub")
    _check_python_type(NavigateToPose)
    assert os.path.samefile(Path(nav2_msgs.__file__).parents[3], install / "lib")
