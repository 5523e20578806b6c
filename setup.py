"""Python packaging metadata for robot_harness.

The ROS build is ament_cmake (CMakeLists.txt): it generates the interfaces and
installs this Python package beside them. This file lets the pure-Python part
(the ROS-free core and the CLI) be installed with pip; the version is read from
package.xml, the single place it is kept.
"""
import re
from pathlib import Path

from setuptools import setup

_HERE = Path(__file__).resolve().parent
_VERSION = re.search(r"<version>([^<]+)</version>", (_HERE / "package.xml").read_text()).group(1)

setup(
    version=_VERSION,
    install_requires=["pydantic>=2", "PyYAML", "mcap", "sqlite-utils"],
    package_data={"robot_harness": ["py.typed", "operator/dashboard.html"]},
    entry_points={
        "console_scripts": [
            "robot-harness = robot_harness.cli:main",
            "sim_robot = robot_harness.nodes.sim_robot:main",
            "snapshot_aggregator = robot_harness.nodes.snapshot_aggregator:main",
            "supervisor = robot_harness.nodes.supervisor:main",
            "planner = robot_harness.nodes.planner:main",
            "verifier = robot_harness.nodes.verifier:main",
            "recovery = robot_harness.nodes.recovery:main",
            "lifecycle_manager = robot_harness.nodes.lifecycle_manager:main",
        ]
    },
)
