"""launch/harness.launch.py and the in-process bring-up start the same nodes
with the same parameter files.

``launch``/``launch_ros`` are not installable here, so the launch file runs
against test-only stand-ins that keep the real constructors' keyword
interface and record what they were given.
"""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from robot_harness.bringup import NODE_SPECS, load_node_params

REPO = Path(__file__).resolve().parents[2]


class _Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _Node(_Recorder):
    def __init__(self, *, package, executable, name=None, namespace=None, parameters=None, remappings=None,
                 arguments=None, output=None, condition=None, **kwargs):
        super().__init__(package=package, executable=executable, name=name, parameters=parameters or [],
                         condition=condition, output=output)


@pytest.fixture
def launch_description(monkeypatch):
    mods = {
        "launch": types.ModuleType("launch"),
        "launch.actions": types.ModuleType("launch.actions"),
        "launch.conditions": types.ModuleType("launch.conditions"),
        "launch.substitutions": types.ModuleType("launch.substitutions"),
        "launch_ros": types.ModuleType("launch_ros"),
        "launch_ros.actions": types.ModuleType("launch_ros.actions"),
        "ament_index_python": types.ModuleType("ament_index_python"),
        "ament_index_python.packages": types.ModuleType("ament_index_python.packages"),
    }
    mods["launch"].LaunchDescription = lambda entities: list(entities)
    mods["launch.actions"].DeclareLaunchArgument = _Recorder
    mods["launch.conditions"].IfCondition = _Recorder
    mods["launch.substitutions"].LaunchConfiguration = lambda name: f"$({name})"
    mods["launch_ros.actions"].Node = _Node
    mods["ament_index_python.packages"].get_package_share_directory = lambda pkg: str(REPO) if pkg == "robot_harness" else None
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location("harness_launch", REPO / "launch" / "harness.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


def test_launch_and_bringup_start_the_same_nodes_with_the_same_files(launch_description):
    nodes = [e for e in launch_description if isinstance(e, _Node)]
    launched = {}
    for n in nodes:
        files = [Path(p).name for p in n.kwargs["parameters"] if isinstance(p, str)]
        # The sim executable hosts two nodes (sim_robot, bt_navigator); a launch
        # name= would rename both, so it keeps the executable's node names.
        launched[n.kwargs["executable"]] = (n.kwargs["name"] or n.kwargs["executable"], files)
        assert n.kwargs["package"] == "robot_harness"
    in_process = {s.executable: (s.name, [s.param_file]) for s in NODE_SPECS}
    assert launched == in_process


def test_only_the_sim_is_conditional(launch_description):
    nodes = {e.kwargs["executable"]: e for e in launch_description if isinstance(e, _Node)}
    conditional = {ex for ex, n in nodes.items() if n.kwargs["condition"] is not None}
    assert conditional == {s.executable for s in NODE_SPECS if s.sim_only}


@pytest.mark.parametrize("spec", NODE_SPECS, ids=lambda s: s.name)
def test_every_parameter_file_has_a_section_for_its_node(spec):
    params = load_node_params(REPO / "config" / spec.param_file, spec.name)
    assert params, f"{spec.param_file} has no ros__parameters for {spec.name}"


def test_every_node_has_an_installed_executable():
    cmake = (REPO / "CMakeLists.txt").read_text()
    for spec in NODE_SPECS:
        assert (REPO / "bin" / spec.executable).is_file()
        assert f"bin/{spec.executable}" in cmake
