"""launch/harness.launch.py and the in-process bring-up start the same nodes
with the same parameter files, and the launch file's command lines are the
ones launch_ros would build.

``launch``/``launch_ros`` are not installable here, so the launch file runs
against the strict stand-ins in test/launch_standin (reproducing launch 3.7.x
and launch_ros 0.28.x, Kilted): arguments are declared and checked, conditions
are evaluated strictly, Node builds its real command line.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from robot_harness.bringup import NODE_SPECS, load_node_params

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test" / "launch_standin"))
try:
    import launch_graph as lg  # noqa: E402  (test/launch_standin, never on the production path)
finally:
    sys.path.remove(str(REPO / "test" / "launch_standin"))

LAUNCH_FILE = REPO / "launch" / "harness.launch.py"
EXTRA_NODES = {"lifecycle_manager"}  # the new launch file's manager; not an in-process NODE_SPEC


def evaluate(**arguments: str):
    with lg.use_standins():
        description = lg.load_description(LAUNCH_FILE)
        declared = {a.name: a for a in description.get_launch_arguments()}
        context, nodes = lg.evaluate(description, arguments)
    return declared, context, nodes


def declared_arguments() -> set[str]:
    with lg.use_standins():
        return {a.name for a in lg.load_description(LAUNCH_FILE).get_launch_arguments()}


def need(*names: str) -> None:
    missing = set(names) - declared_arguments()
    if missing:
        pytest.skip(f"launch/harness.launch.py does not declare {sorted(missing)} yet (issue 15's new launch file)")


@pytest.fixture(params=[{"use_sim": "true"}, {"use_sim": "false"}], ids=["sim", "nosim"])
def launched(request):
    return request.param, evaluate(**request.param)[2]


def test_launch_and_bringup_start_the_same_nodes_with_the_same_files():
    _, _, nodes = evaluate(use_sim="true")
    launched = {}
    for n in nodes:
        assert n.package == "robot_harness"
        files = [Path(p).name for p in n.param_files if p not in n.generated_param_files]
        # The sim executable hosts two nodes (sim_robot, bt_navigator); a launch
        # name= would rename both (-r __node:= is global), so it keeps the executable's names.
        launched[n.executable] = (n.expanded_node_name or n.executable, files)
    assert set(launched) - {s.executable for s in NODE_SPECS} <= EXTRA_NODES
    for extra in EXTRA_NODES:
        launched.pop(extra, None)
    in_process = {s.executable: (s.name, [s.param_file]) for s in NODE_SPECS}
    assert launched == in_process


def test_only_the_sim_is_conditional():
    with_sim = {n.executable for n in evaluate(use_sim="true")[2]}
    without = {n.executable for n in evaluate(use_sim="false")[2]}
    assert with_sim - without == {s.executable for s in NODE_SPECS if s.sim_only}
    assert without >= {s.executable for s in NODE_SPECS if not s.sim_only}


def expected_cmd(n, namespace: str | None) -> list[str]:
    """launch_ros 0.28 node.py: exe, arguments, [--ros-args ros_arguments], --ros-args,
    -r __node:=, -r __ns:=, --params-file per entry, -r remaps."""
    cmd = [str(REPO / ".ws" / "install" / "robot_harness" / "lib" / "robot_harness" / n.executable)]
    cmd += list(n.arguments or [])
    if n.ros_arguments is not None:
        cmd += ["--ros-args", *n.ros_arguments]
    cmd += ["--ros-args"]
    if n.node_name is not None:
        cmd += ["-r", f"__node:={n.expanded_node_name}"]
    if namespace is not None:
        cmd += ["-r", f"__ns:={namespace}"]
    for f in n.param_files:
        cmd += ["--params-file", f]
    return cmd


def test_command_lines_are_what_launch_ros_builds(launched):
    args, nodes = launched
    for n in nodes:
        assert all(isinstance(a, str) for a in n.cmd), n.cmd
        # no namespace argument given: launch_ros adds __ns only if a namespace was pushed/given
        ns = n.expanded_node_namespace
        assert ns in (None, "/"), (n.executable, ns)
        assert n.cmd == expected_cmd(n, ns), n.executable
        assert Path(n.cmd[0]).is_file()
        # a name= is a global remap; only single-node executables may carry one
        if n.executable == "sim_robot":
            assert n.node_name is None, "sim_robot hosts sim_robot and bt_navigator: a name= renames both"


def test_parameter_dicts_are_written_like_launch_ros(launched):
    _, nodes = launched
    for n in nodes:
        for f in n.generated_param_files:
            data = yaml.safe_load(Path(f).read_text())
            (key, section), = data.items()
            assert key in ("/**", f"{(n.expanded_node_namespace or '').rstrip('/')}/{n.expanded_node_name}")
            assert set(section) == {"ros__parameters"}
            assert all("." in k or not isinstance(v, dict) for k, v in section["ros__parameters"].items())


def test_namespace_argument_puts_every_node_under_it():
    need("namespace")
    _, _, nodes = evaluate(use_sim="true", namespace="robot1")
    for n in nodes:
        assert n.expanded_node_namespace == "/robot1", n.executable
        assert n.cmd == expected_cmd(n, "/robot1")


def test_a_non_boolean_condition_value_is_an_error_like_launch():
    import importlib

    with lg.use_standins():
        launch = importlib.import_module("launch")
        description = lg.load_description(LAUNCH_FILE)
        with pytest.raises(launch.InvalidConditionExpressionError, match="yes"):
            lg.evaluate(description, {"use_sim": "yes"})
        # case-insensitive true/false/1/0 are accepted
        for ok in ("TRUE", "False", "1", "0"):
            lg.evaluate(lg.load_description(LAUNCH_FILE), {"use_sim": ok})


def test_an_invalid_choice_is_an_error_like_launch():
    need("planner")
    with lg.use_standins():
        with pytest.raises(RuntimeError, match="is not valid. Valid options are"):
            lg.evaluate(lg.load_description(LAUNCH_FILE), {"planner": "no-such-planner"})


def test_standin_argument_checks():
    with lg.use_standins():
        from launch import LaunchDescription, SubstitutionFailure
        from launch.actions import DeclareLaunchArgument, GroupAction, OpaqueFunction
        from launch.substitutions import LaunchConfiguration
        from launch_ros.actions import PushRosNamespace

        with pytest.raises(RuntimeError, match="not in provided choices"):
            DeclareLaunchArgument("p", default_value="x", choices=["a", "b"])
        required = LaunchDescription([DeclareLaunchArgument("must")])
        with pytest.raises(RuntimeError, match="Required launch argument 'must'"):
            lg.evaluate(required, {})
        lg.evaluate(required, {"must": "v"})
        seen = []
        undeclared = LaunchDescription([OpaqueFunction(function=lambda c: seen.append(
            LaunchConfiguration("nope").perform(c)))])
        with pytest.raises(SubstitutionFailure, match="'nope' does not exist"):
            lg.evaluate(undeclared, {})
        scoped = LaunchDescription([
            GroupAction([PushRosNamespace("a"), PushRosNamespace("b"),
                         OpaqueFunction(function=lambda c: seen.append(c.launch_configurations["ros_namespace"]))]),
            OpaqueFunction(function=lambda c: seen.append(c.launch_configurations.get("ros_namespace"))),
        ])
        lg.evaluate(scoped, {})
        assert seen == ["/a/b", None]
    assert lg.parse_launch_arguments(["use_sim:=true", "namespace:="]) == {"use_sim": "true", "namespace": ""}
    with pytest.raises(ValueError, match="expected format"):
        lg.parse_launch_arguments(["use_sim=true"])


def test_node_namespace_combines_with_pushed_namespace():
    with lg.use_standins():
        from launch import LaunchDescription
        from launch.actions import GroupAction
        from launch_ros.actions import Node, PushRosNamespace

        def cmd(node, push=None):
            entities = [PushRosNamespace(push), node] if push is not None else [node]
            return lg.evaluate(LaunchDescription([GroupAction(entities)]), {})[1][0]

        n = cmd(Node(package="robot_harness", executable="planner", name="planner", namespace="ns"), "robot1")
        assert n.expanded_node_namespace == "/robot1/ns"
        n = cmd(Node(package="robot_harness", executable="planner", namespace="/abs"), "robot1")
        assert n.expanded_node_namespace == "/abs"
        n = cmd(Node(package="robot_harness", executable="planner", name="planner",
                     parameters=[{"a": {"b": 1}, "c": "x"}], remappings=[("x", "y")],
                     arguments=["--flag"], ros_arguments=["--log-level", "debug"]))
        assert n.cmd[1:] == ["--flag", "--ros-args", "--log-level", "debug", "--ros-args",
                             "-r", "__node:=planner", "--params-file", n.param_files[0], "-r", "x:=y"]
        assert yaml.safe_load(Path(n.param_files[0]).read_text()) == {"/**": {"ros__parameters": {"a.b": 1, "c": "x"}}}


@pytest.mark.parametrize("spec", NODE_SPECS, ids=lambda s: s.name)
def test_every_parameter_file_has_a_section_for_its_node(spec):
    params = load_node_params(REPO / "config" / spec.param_file, spec.name)
    assert params, f"{spec.param_file} has no ros__parameters for {spec.name}"


def test_every_node_has_an_installed_executable():
    cmake = (REPO / "CMakeLists.txt").read_text()
    for spec in NODE_SPECS:
        assert (REPO / "bin" / spec.executable).is_file()
        assert f"bin/{spec.executable}" in cmake
