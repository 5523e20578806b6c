"""Package-level guarantees: a ROS-free core, one version, documented schema and CLI."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_core_imports_no_ros():
    code = (
        "import sys, pkgutil, importlib, robot_harness.core as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module('robot_harness.core.' + m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('rclpy', 'rosidl_parser', 'nav2_msgs', 'geometry_msgs')"
        " or n.startswith(('robot_harness.msg', 'robot_harness.srv', 'robot_harness.action', 'robot_harness.nodes')))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_version_lives_in_package_xml_and_matches_everywhere():
    xml = re.search(r"<version>([^<]+)</version>", (REPO / "package.xml").read_text()).group(1)
    import robot_harness

    assert robot_harness.__version__ == xml
    setup = subprocess.run([sys.executable, "setup.py", "--version"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert setup.stdout.strip().splitlines()[-1] == xml
    assert f"## [{xml}]" in (REPO / "CHANGELOG.md").read_text() or "## [Unreleased]" in (REPO / "CHANGELOG.md").read_text()


def test_scenario_schema_doc_is_current():
    from robot_harness.core.scenario import scenario_json_schema

    assert (REPO / "docs" / "scenario.schema.json").read_text() == scenario_json_schema(), (
        "regenerate: python -c 'from robot_harness.core.scenario import scenario_json_schema as s; "
        "open(\"docs/scenario.schema.json\",\"w\").write(s())'"
    )


@pytest.mark.parametrize("path", sorted((REPO / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_validate(path):
    from robot_harness.core.scenario import load_scenario

    load_scenario(path)


def test_every_cli_command_is_documented_in_the_readme():
    from robot_harness.cli import build_parser

    readme = (REPO / "README.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # noqa: SLF001
    for name in sub.choices:
        assert f"robot-harness {name}" in readme, f"README does not document `robot-harness {name}`"


def test_nav2_stand_in_matches_the_interface_the_harness_uses():
    """The stand-in keeps Nav2's exact NavigateToPose fields (built only when real nav2_msgs is absent)."""
    text = (REPO / "stubs" / "nav2_msgs" / "action" / "NavigateToPose.action").read_text()
    goal, result, feedback = (part.strip() for part in text.split("---"))
    assert "geometry_msgs/PoseStamped pose" in goal and "string behavior_tree" in goal
    assert "uint16 error_code" in result and "string error_msg" in result
    for field in ("geometry_msgs/PoseStamped current_pose", "builtin_interfaces/Duration navigation_time",
                  "builtin_interfaces/Duration estimated_time_remaining", "int16 number_of_recoveries",
                  "float32 distance_remaining"):
        assert field in feedback
    assert (REPO / "stubs" / "COLCON_IGNORE").exists(), "a robot workspace build must never pick up the stand-in"
