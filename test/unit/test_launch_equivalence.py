"""launch/harness.launch.py and the in-process bring-up start the same nodes with the same
parameters, and the launch file's command lines are the ones launch_ros would build.

``launch``/``launch_ros`` are not installable here, so the launch file runs against the strict
stand-ins in test/launch_standin (reproducing launch 3.7.x and launch_ros 0.28.x, Kilted):
arguments are declared and checked, conditions are evaluated strictly, Node builds its real
command line and writes parameter dicts as launch_ros does. What a node then receives from its
``--params-file`` list is read with robot_harness.params.node_params (rclpy's matching rules,
checked against rclpy itself in test_params). The lifecycle_manager executable need not be
installed for these tests (the stand-in's ALLOW_MISSING gives its would-be path).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from robot_harness.bringup import NODE_SPECS, load_node_params
from robot_harness.params import node_params

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test" / "launch_standin"))
try:
    import launch_graph as lg  # noqa: E402  (test/launch_standin, never on the production path)
finally:
    sys.path.remove(str(REPO / "test" / "launch_standin"))

LAUNCH_FILE = REPO / "launch" / "harness.launch.py"
LIB = REPO / ".ws" / "install" / "robot_harness" / "lib" / "robot_harness"
MANAGED = ["snapshot_aggregator", "planner", "verifier", "recovery", "supervisor"]
DEMO = REPO / ".ws" / "install" / "robot_harness" / "share" / "robot_harness" / "scenarios" / "demo.yaml"
LAUNCH_SET = {"autostart", "use_sim_time"}
"""Keys the launch file sets on every managed node over the params file."""


class _Loader(yaml.SafeLoader):
    """launch_ros writes parameter dicts with yaml.dump, lists as ``!!python/tuple`` (rcl reads a list)."""


_Loader.add_constructor("tag:yaml.org,2002:python/tuple", lambda loader, node: loader.construct_sequence(node))


def evaluate(**arguments: str):
    with lg.use_standins():
        import launch_ros.actions

        launch_ros.actions.ALLOW_MISSING.add("lifecycle_manager")
        description = lg.load_description(LAUNCH_FILE)
        declared = {a.name: a for a in description.get_launch_arguments()}
        context, nodes = lg.evaluate(description, arguments)
    return declared, context, {n.expanded_node_name or n.executable: n for n in nodes}


def received(n, name: str | None = None) -> dict:
    """The parameters rclpy would give node ``name`` (default: the launch name) from its --params-file list."""
    data: dict = {}
    for f in n.param_files:
        for key, section in (yaml.load(Path(f).read_text(), Loader=_Loader) or {}).items():
            data.setdefault(key, {})
            _merge(data[key], section)
    return node_params(data, name or n.expanded_node_name, n.expanded_node_namespace)


def _merge(into: dict, more: dict) -> None:
    for k, v in more.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


@pytest.fixture(params=[{"use_sim": "true"}, {"use_sim": "false"}, {"use_sim": "true", "namespace": "robot1"},
                        {"use_sim": "true", "namespace": "/fleet/robot_2", "log_level": "DEBUG",
                         "use_respawn": "true"}],
                ids=["sim", "nosim", "robot1", "fleet-debug-respawn"])
def launched(request):
    return request.param, evaluate(**request.param)[2]


def test_launch_and_bringup_start_the_same_nodes_with_the_same_parameters():
    _, _, nodes = evaluate(use_sim="true")
    assert set(nodes) == {s.name for s in NODE_SPECS} | {"lifecycle_manager"}
    for spec in NODE_SPECS:
        n = nodes[spec.name]
        assert n.package == "robot_harness" and n.executable == spec.executable
        expected = load_node_params(REPO / "config" / spec.param_file, spec.name)
        got = received(n, spec.name)
        if spec.name == "planner":  # the launch file's default planner: the demo scenario's turns
            assert {k: got.pop(k) for k in ("backend", "script_file", "turns_json")} == {
                "backend": "scripted", "script_file": str(DEMO), "turns_json": ""}
        if spec.name == "supervisor":
            assert got.pop("harness_config_file") == str(DEMO.parent.parent / "config" / "harness.yaml")
        assert got.pop("use_sim_time") is False
        if spec.name != "sim_robot":
            assert got.pop("autostart") is False, "managed nodes wait for the lifecycle manager"
        launch_keys = {"planner": ("backend", "script_file", "turns_json"), "supervisor": ("harness_config_file",)}
        for k in launch_keys.get(spec.name, ()) + (("autostart",) if spec.name != "sim_robot" else ()):
            expected.pop(k, None)
        assert got == expected, spec.name


def test_only_the_sim_is_conditional():
    with_sim = {n.executable for n in evaluate(use_sim="true")[2].values()}
    without = {n.executable for n in evaluate(use_sim="false")[2].values()}
    assert with_sim - without == {s.executable for s in NODE_SPECS if s.sim_only}
    assert without >= {s.executable for s in NODE_SPECS if not s.sim_only}


def expected_cmd(n, namespace: str, log_level: str) -> list[str]:
    """launch_ros 0.28 node.py: exe, arguments, [--ros-args ros_arguments], --ros-args,
    -r __node:=, -r __ns:=, --params-file per entry, -r remaps."""
    cmd = [str(LIB / n.executable), "--ros-args", "--log-level", log_level, "--ros-args"]
    if n.node_name is not None:
        cmd += ["-r", f"__node:={n.expanded_node_name}"]
    cmd += ["-r", f"__ns:={namespace}"]
    for f in n.param_files:
        cmd += ["--params-file", f]
    # nav2_bringup's TF remaps, on every node: tf2_ros listens on /tf, a namespaced robot publishes <ns>/tf
    cmd += ["-r", "/tf:=tf", "-r", "/tf_static:=tf_static"]
    return cmd


def test_command_lines_are_what_launch_ros_builds(launched):
    args, nodes = launched
    ns = "/" + args.get("namespace", "").strip("/") if args.get("namespace") else "/"
    level = args.get("log_level", "info").lower()
    respawn = args.get("use_respawn") == "true"
    for n in nodes.values():
        assert all(isinstance(a, str) for a in n.cmd), n.cmd
        assert n.expanded_node_namespace == ns, n.executable
        assert n.cmd == expected_cmd(n, ns, level), n.executable
        assert (n.respawn_value, n.respawn_delay_value) == (respawn, 2.0)
        assert not n.warnings, n.warnings
        # every node reads the one rewritten params file, then its launch values (a dict file)
        assert len(n.param_files) == 2 and n.generated_param_files == n.param_files[1:]
        assert n.param_files[0] == nodes["supervisor"].param_files[0]
        if n.executable == "sim_robot":
            assert n.node_name is None, "sim_robot hosts sim_robot and bt_navigator: a name= renames both"
        else:
            assert Path(n.cmd[0]).is_file() or n.executable == "lifecycle_manager"


def test_parameter_dicts_are_written_like_launch_ros(launched):
    _, nodes = launched
    for n in nodes.values():
        for f in n.generated_param_files:
            data = yaml.load(Path(f).read_text(), Loader=_Loader)
            (key, section), = data.items()
            # node.py _create_params_file_from_dict: the full node name when name and namespace are known
            assert key == (f"{n.expanded_node_namespace.rstrip('/')}/{n.expanded_node_name}"
                           if n.node_name is not None else "/**")
            assert set(section) == {"ros__parameters"}
            assert all(not isinstance(v, dict) for v in section["ros__parameters"].values())


def test_namespace_puts_every_node_and_its_section_under_it(launched):
    args, nodes = launched
    ns = "/" + args["namespace"].strip("/") if args.get("namespace") else ""
    for name in MANAGED:
        got = received(nodes[name])
        assert got, f"{name} under {ns or '/'} received no parameters: its section did not follow the namespace"
    if args["use_sim"] == "true":
        assert received(nodes["sim_robot"], "sim_robot")["speed"] == 0.5
    assert received(nodes["snapshot_aggregator"])["snapshot_rate_hz"] == 1.0


def test_the_lifecycle_manager_gets_the_managed_nodes_in_order():
    for autostart in ("true", "false"):
        _, _, nodes = evaluate(use_sim="true", autostart=autostart, namespace="robot1")
        got = received(nodes["lifecycle_manager"])
        assert got == {"node_names": MANAGED, "autostart": autostart == "true", "bond_timeout": 4.0,
                       "use_sim_time": False}
        for name in MANAGED:
            assert received(nodes[name])["autostart"] is False


def test_one_params_file_for_all_nodes(tmp_path):
    # nav2_bringup: params_file is "the ROS2 parameters file to use for all launched nodes"
    doc = {name: {"ros__parameters": {"marker": name}} for name in MANAGED}
    doc["/**"] = {"ros__parameters": {"everyone": 1}}
    doc["sim_robot"] = {"ros__parameters": {"speed": 1.5, "pose_topic": "<robot_namespace>/amcl_pose"}}
    doc["supervisor"]["ros__parameters"]["autostart"] = True  # the launch file's autostart: false wins
    doc["lifecycle_manager"] = {"ros__parameters": {"bond_timeout": 0.0}}
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    for ns in ("", "robot3"):
        _, _, nodes = evaluate(use_sim="true", params_file=str(path), **({"namespace": ns} if ns else {}))
        for name in MANAGED:
            got = received(nodes[name])
            assert got["marker"] == name and got["everyone"] == 1 and got["autostart"] is False
        sim = received(nodes["sim_robot"], "sim_robot")
        assert sim["speed"] == 1.5 and sim["pose_topic"] == (f"/{ns}" if ns else "") + "/amcl_pose"
        assert received(nodes["lifecycle_manager"])["bond_timeout"] == 0.0  # the file's value is kept
    with pytest.raises(FileNotFoundError, match="params_file"):
        evaluate(params_file=str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize("arguments,error,match", [
    ({"planner": "no-such-planner"}, ValueError, "expected one of"),
    ({"namespace": "robot-1"}, ValueError, "namespace must not contain characters other than"),
    ({"namespace": "/robot1/"}, ValueError, "must not end with a '/'"),
    ({"namespace": "2robot"}, ValueError, "token that starts with a number"),
    ({"log_level": "loud"}, ValueError, "log_level"),
    ({"use_sim": "yes"}, ValueError, "use_sim"),
    ({"use_respawn": "maybe"}, ValueError, "use_respawn"),
    ({"planner": "replay"}, ValueError, "needs replay_file"),
    ({"planner": "replay", "replay_file": "/no/such.jsonl"}, FileNotFoundError, "replay_file"),
    ({"planner_script": "/no/such.yaml"}, FileNotFoundError, "planner_script"),
    ({"harness_config": "/no/such.yaml"}, FileNotFoundError, "harness_config"),
])
def test_invalid_arguments_fail_at_launch_time(arguments, error, match):
    with pytest.raises(error, match=match):
        evaluate(**arguments)


def test_planner_arguments(tmp_path):
    replay = tmp_path / "demo.replay.jsonl"
    replay.write_text("")
    got = received(evaluate(planner="replay", replay_file=str(replay))[2]["planner"])
    assert (got["backend"], got["replay_file"]) == ("replay", str(replay))
    got = received(evaluate(planner="llm", model="qwen2.5:7b-instruct")[2]["planner"])
    assert (got["backend"], got["model"]) == ("llm", "qwen2.5:7b-instruct")
    assert received(evaluate(planner="llm")[2]["planner"])["model"] == ""  # the params file's (empty: env)
    script = tmp_path / "turns.yaml"
    script.write_text("turns: []\n")
    got = received(evaluate(planner_script=str(script))[2]["planner"])
    assert (got["backend"], got["script_file"]) == ("scripted", str(script))
    # No planner argument: a params file that names a backend keeps it (as robot-harness up does).
    params = tmp_path / "site.yaml"
    params.write_text("planner:\n  ros__parameters: {backend: llm, model: site-model}\n")
    got = received(evaluate(params_file=str(params))[2]["planner"])
    assert (got["backend"], got["model"]) == ("llm", "site-model"), got


def test_use_sim_time_reaches_every_node():
    _, _, nodes = evaluate(use_sim="true", use_sim_time="true")
    for name, n in nodes.items():
        assert received(n, "sim_robot" if name == "sim_robot" else None)["use_sim_time"] is True
        if name == "sim_robot":  # its dict is '/**': bt_navigator, in the same process, gets it too
            assert received(n, "bt_navigator")["use_sim_time"] is True


def test_docstring_usage_lines_use_declared_arguments():
    text = LAUNCH_FILE.read_text()
    declared = set(evaluate()[0])
    used = {a.split(":=")[0] for line in text.splitlines() if "ros2 launch" in line
            for a in line.split("#")[0].split()[4:]}
    assert used and used <= declared, used - declared
    assert {"namespace", "params_file"} <= used


def test_a_non_boolean_condition_value_is_an_error_like_launch():
    import importlib

    with lg.use_standins():
        launch = importlib.import_module("launch")
        from launch.conditions import IfCondition
        from launch.substitutions import LaunchConfiguration

        with pytest.raises(launch.InvalidConditionExpressionError, match="yes"):
            IfCondition(LaunchConfiguration("x")).evaluate(_ctx(launch, x="yes"))
        for ok in ("TRUE", "False", "1", "0"):  # case-insensitive true/false/1/0 are accepted
            IfCondition(LaunchConfiguration("x")).evaluate(_ctx(launch, x=ok))


def _ctx(launch, **configs):
    c = launch.LaunchContext()
    c.launch_configurations.update(configs)
    return c


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
            GroupAction([PushRosNamespace("a"), PushRosNamespace("b/"),
                         OpaqueFunction(function=lambda c: seen.append(c.launch_configurations["ros_namespace"]))]),
            OpaqueFunction(function=lambda c: seen.append(c.launch_configurations.get("ros_namespace"))),
            GroupAction([PushRosNamespace(""),
                         OpaqueFunction(function=lambda c: seen.append(c.launch_configurations["ros_namespace"]))]),
        ])
        lg.evaluate(scoped, {})
        # push_ros_namespace.py + namespace_utils: relative pushes nest, trailing '/' stripped, '' is the root
        assert seen == ["/a/b", None, "/"]
        with pytest.raises(SubstitutionFailure, match="The resulting namespace is invalid"):
            lg.evaluate(LaunchDescription([PushRosNamespace("a-b")]), {})
    assert lg.parse_launch_arguments(["use_sim:=true", "namespace:="]) == {"use_sim": "true", "namespace": ""}
    with pytest.raises(ValueError, match="expected format"):
        lg.parse_launch_arguments(["use_sim=true"])


def test_standin_node_follows_launch_ros(tmp_path):
    with lg.use_standins():
        from launch import LaunchDescription, SubstitutionFailure
        from launch.actions import GroupAction
        from launch.substitutions import LaunchConfiguration
        from launch_ros.actions import Node, PushRosNamespace

        def run(node, push=None, **configs):
            entities = [PushRosNamespace(push), node] if push is not None else [node]
            return lg.evaluate(LaunchDescription([GroupAction(entities)]), configs)[1][0]

        n = run(Node(package="robot_harness", executable="planner", name="planner", namespace="ns"), "robot1")
        assert n.expanded_node_namespace == "/robot1/ns"
        n = run(Node(package="robot_harness", executable="planner", namespace="/abs"), "robot1")
        assert n.expanded_node_namespace == "/abs"
        n = run(Node(package="robot_harness", executable="planner", name="planner",
                     parameters=[{"a": {"b": 1}, "c": "x"}], remappings=[("x", "y")],
                     arguments=["--flag"], ros_arguments=["--log-level", "debug"]))
        assert n.cmd[1:] == ["--flag", "--ros-args", "--log-level", "debug", "--ros-args",
                             "-r", "__node:=planner", "--params-file", n.param_files[0], "-r", "x:=y"]
        # no namespace known: '/**' (node.py is_node_name_fully_specified)
        assert yaml.safe_load(Path(n.param_files[0]).read_text()) == {"/**": {"ros__parameters": {"a.b": 1, "c": "x"}}}
        # evaluate_parameters: lists are tuples (yaml.dump: !!python/tuple), ints with floats become floats,
        # a substitution's text is YAML; a pushed namespace makes the name fully specified
        n = run(Node(package="robot_harness", executable="planner", name="planner",
                     parameters=[{"l": ["a", "b"], "f": [1, 2.5], "s": LaunchConfiguration("v"), "e": "", "t": "true"}]),
                "robot1", v="3")
        text = Path(n.param_files[0]).read_text()
        assert "!!python/tuple" in text
        assert yaml.load(text, Loader=_Loader) == {"/robot1/planner": {"ros__parameters": {
            "l": ["a", "b"], "f": [1.0, 2.5], "s": 3, "e": "", "t": "true"}}}
        for bad in ({"m": LaunchConfiguration("v")}, {"m": [True, 1]}, {"m": []}):
            with pytest.raises(TypeError):
                run(Node(package="robot_harness", executable="planner", parameters=[bad]), v="{a: 1}")
        # a parameter file that does not exist is skipped with a warning (node.py), not passed
        n = run(Node(package="robot_harness", executable="planner", parameters=[str(tmp_path / "nope.yaml")]))
        assert n.param_files == [] and "--params-file" not in n.cmd and "not a file" in n.warnings[0]
        # rclpy.validate_node_name on the name as given: '/planner' is refused
        with pytest.raises(Exception, match="node name"):
            run(Node(package="robot_harness", executable="planner", name="/planner"))
        # ExecutableInPackage: a missing executable fails when the Node executes
        with pytest.raises(SubstitutionFailure, match="executable 'no_such_exe' not found"):
            run(Node(package="robot_harness", executable="no_such_exe"))


@pytest.mark.parametrize("spec", NODE_SPECS, ids=lambda s: s.name)
def test_every_parameter_file_has_a_section_for_its_node(spec):
    params = load_node_params(REPO / "config" / spec.param_file, spec.name)
    assert params, f"{spec.param_file} has no ros__parameters for {spec.name}"


def test_every_node_has_an_installed_executable():
    cmake = (REPO / "CMakeLists.txt").read_text()
    for spec in NODE_SPECS:
        assert (REPO / "bin" / spec.executable).is_file()
        assert f"bin/{spec.executable}" in cmake
