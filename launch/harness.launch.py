"""Bring up the robot_harness node graph, one process per node, with the arguments Nav2's bringup takes.

    ros2 launch robot_harness harness.launch.py                                  # on a Nav2 robot
    ros2 launch robot_harness harness.launch.py use_sim:=true                    # with the simulated robot
    ros2 launch robot_harness harness.launch.py use_sim:=true namespace:=robot1  # every node under /robot1
    ros2 launch robot_harness harness.launch.py params_file:=/path/to/robot_harness_params.yaml
    ros2 launch robot_harness harness.launch.py planner:=llm model:=qwen2.5:7b-instruct
    ros2 launch robot_harness harness.launch.py planner:=replay replay_file:=/tmp/rh/demo.replay.jsonl

    ros2 action send_goal /robot1/robot_harness/mission robot_harness/action/Mission \\
      "{goal: 'Go to office_storage, capture an image there, return to dock and report.'}"

Parameters: ``params_file`` is one YAML file holding every node's section (``supervisor:
ros__parameters: ...``, ``/**`` for all); by default the package's config/*.yaml, combined.
As in Nav2 (nav2_bringup navigation_launch.py), the file is rewritten for the namespace
(``<robot_namespace>`` replaced, sections nested under it: robot_harness.params) and every
node gets it, so each takes its own section. Then the launch arguments: ``use_sim_time`` for
every node, ``planner``/``planner_script``/``replay_file``/``model`` for the planner,
``harness_config`` for the supervisor. When that configuration has navigation provider cards, the
snapshot aggregator is given their namespaces (``nav_namespaces``, unless the params file sets it), as
robot_harness.bringup gives them, so a goal on any provider's Nav2 is seen.

Lifecycle: the harness nodes start unconfigured (``autostart: false``); ``lifecycle_manager``
configures and activates them in order (supervisor last) when ``autostart`` is true. The
default planner is ``scripted`` with the shipped demo scenario's turns (scenarios/demo.yaml),
so the demo goal above SUCCEEDS right after ``use_sim:=true`` comes up. The simulated robot
(``use_sim``) hosts eight nodes (sim_robot, bt_navigator, amcl, planner_server, global_costmap, local_costmap,
behavior_server, waypoint_follower), each name pinned, and starts
itself; it is never given a ``name=`` (launch_ros passes it as ``-r __node:=``, which would
rename every node of a process whose nodes did not pin their names).

An unknown ``planner``, an invalid ``namespace`` or ``log_level``, a missing file: an error at
launch time, before any process starts.
"""
import os
import tempfile

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, GroupAction, OpaqueFunction
from launch_ros.actions import Node, PushRosNamespace

from robot_harness.bringup import NODE_SPECS, provider_nav_namespaces
from robot_harness.params import dump_params, merge_params, node_params, normalize_namespace, rewrite_params

PACKAGE = "robot_harness"
MANAGED = ("snapshot_aggregator", "planner", "verifier", "recovery", "supervisor")
"""Configured and activated by the lifecycle manager in this order: the supervisor last, once
what it calls is active."""
PLANNERS = ("scripted", "replay", "llm")
LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")
RESPAWN_DELAY_S = 2.0  # nav2_bringup navigation_launch.py
BOND_TIMEOUT_S = 4.0

ARGUMENTS = (
    ("namespace", "", "Top-level namespace ('' or robot1 or /robot1)"),
    ("use_sim", "false", "Start the simulated robot (sim_robot with its bt_navigator, amcl, planner_server, "
                         "global_costmap, local_costmap, behavior_server and waypoint_follower)"),
    ("use_sim_time", "false", "Use the /clock topic for every node"),
    ("params_file", "", "One parameter file for all launched nodes; empty: the package's config/*.yaml"),
    ("autostart", "true", "Configure and activate the harness nodes (lifecycle_manager)"),
    ("log_level", "info", f"Log level of every node, one of {list(LOG_LEVELS)}"),
    ("use_respawn", "false", "Restart a node that exits"),
    ("planner", "", "Planner backend: scripted (planner_script's turns), replay (replay_file), llm (model); "
                    "empty: the params file's planner, and the demo's turns when that is scripted with none"),
    ("planner_script", "", "planner:=scripted: a script or scenario YAML; empty: scenarios/demo.yaml"),
    ("replay_file", "", "planner:=replay: a recording made with the llm backend's record_file"),
    ("model", "", "planner:=llm: the model; empty: the params file's, else $ROBOT_HARNESS_MODEL"),
    ("harness_config", "", "Harness configuration YAML for the supervisor; empty: config/harness.yaml"),
)


def _bool(name, text):
    """launch's condition rule (evaluate_condition_expression): true/false/1/0, any case."""
    value = text.strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise ValueError(f"launch argument {name}:={text!r}: expected true or false (or 1/0)")


def _file(name, path):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"launch argument {name}: no file at {path!r}")
    return os.path.abspath(path)


def _default_params(share):
    """The package's per-node files combined into one document: robot_harness.bringup's NODE_SPECS,
    then config/lifecycle_manager.yaml when the package ships one (the manager is no in-process node)."""
    import yaml

    paths = [os.path.join(share, "config", spec.param_file) for spec in NODE_SPECS]
    manager = os.path.join(share, "config", "lifecycle_manager.yaml")
    docs = []
    for path in paths + ([manager] if os.path.isfile(manager) else []):
        with open(path) as f:
            docs.append(yaml.safe_load(f) or {})
    return dump_params(merge_params(docs))


def _planner_params(planner, args, share, file_values):
    """The planner's launch values over the params file's (``file_values``). No ``planner``: the file's
    backend stands, and a scripted planner with no turns (the shipped default) gets the demo's, so the
    demo goal SUCCEEDS right after launch; ``planner_script`` alone means scripted with it."""
    if planner == "":
        if args["planner_script"]:
            planner = "scripted"
        elif file_values.get("backend", "scripted") == "scripted" and not (
                file_values.get("script_file") or file_values.get("turns_json")):
            planner = "scripted"
        else:
            return {}
    if planner == "scripted":
        script = args["planner_script"] or os.path.join(share, "scenarios", "demo.yaml")
        return {"backend": "scripted", "turns_json": "", "script_file": _file("planner_script", script)}
    if planner == "replay":
        if not args["replay_file"]:
            raise ValueError("planner:=replay needs replay_file:=FILE (a recording of the llm backend)")
        return {"backend": "replay", "replay_file": _file("replay_file", args["replay_file"])}
    out = {"backend": "llm"}
    if args["model"]:
        out["model"] = args["model"]
    return out


def _nodes(context):
    args = {name: context.launch_configurations[name] for name, _, _ in ARGUMENTS}
    share = get_package_share_directory(PACKAGE)
    namespace = normalize_namespace(args["namespace"])
    use_sim = _bool("use_sim", args["use_sim"])
    use_sim_time = _bool("use_sim_time", args["use_sim_time"])
    autostart = _bool("autostart", args["autostart"])
    respawn = _bool("use_respawn", args["use_respawn"])
    log_level = args["log_level"].strip().lower()
    if log_level not in LOG_LEVELS:
        raise ValueError(f"launch argument log_level:={args['log_level']!r}: expected one of {list(LOG_LEVELS)}")
    planner = args["planner"].strip()
    if planner not in ("", *PLANNERS):
        raise ValueError(f"launch argument planner:={planner!r}: expected one of {list(PLANNERS)} (or empty)")
    harness_config = _file("harness_config", args["harness_config"] or os.path.join(share, "config", "harness.yaml"))

    if args["params_file"]:
        with open(_file("params_file", args["params_file"])) as f:
            text = f.read()
    else:
        text = _default_params(share)
    rewritten = rewrite_params(text, namespace)
    with tempfile.NamedTemporaryFile("w", prefix="robot_harness_params_", suffix=".yaml", delete=False) as h:
        h.write(dump_params(rewritten))
    params_file = h.name

    common = {
        "package": PACKAGE,
        "output": "screen",
        "respawn": respawn,
        "respawn_delay": RESPAWN_DELAY_S,
        "arguments": ["--ros-args", "--log-level", log_level],
        # As nav2_bringup: TF under the namespace too (tf2_ros listens on /tf; the robot publishes <ns>/tf).
        "remappings": [("/tf", "tf"), ("/tf_static", "tf_static")],
    }
    launch_values = {
        "planner": _planner_params(planner, args, share, node_params(rewritten, "planner", namespace)),
        "supervisor": {"harness_config_file": harness_config},
    }
    if "nav_namespaces" not in node_params(rewritten, "snapshot_aggregator", namespace):
        supervisor = {**node_params(rewritten, "supervisor", namespace), **launch_values["supervisor"]}
        extra = provider_nav_namespaces(supervisor)
        if extra:
            launch_values["snapshot_aggregator"] = {"nav_namespaces": extra}
    nodes = [PushRosNamespace(namespace or "/")]  # as nav2_bringup: every node gets -r __ns:=
    if use_sim:
        nodes.append(Node(executable="sim_robot", parameters=[params_file, {"use_sim_time": use_sim_time}], **common))
    for name in MANAGED:
        values = {**launch_values.get(name, {}), "autostart": False, "use_sim_time": use_sim_time}
        nodes.append(Node(executable=name, name=name, parameters=[params_file, values], **common))
    manager = {"node_names": list(MANAGED), "autostart": autostart, "use_sim_time": use_sim_time}
    if "bond_timeout" not in node_params(rewritten, "lifecycle_manager", namespace):
        manager["bond_timeout"] = BOND_TIMEOUT_S
    nodes.append(Node(executable="lifecycle_manager", name="lifecycle_manager",
                      parameters=[params_file, manager], **common))
    return [GroupAction(nodes)]


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=description)
                for name, default, description in ARGUMENTS]
    return LaunchDescription([*declared, OpaqueFunction(function=_nodes)])
