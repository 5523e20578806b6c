"""Node names as ``ros2 launch`` makes them: launch_ros turns ``Node(name=NAME)`` into
``--ros-args -r __node:=NAME`` on the executable's command line, a *global* remap that renames
every node the process creates unless a node pins its own name. The installed executables are
started exactly that way here; the graph must then hold each name once, the helper nodes under
their own names, and every declared parameter must be readable through the node's parameter
service (with a duplicate name, ``ros2 param get`` reaches whichever node answers first)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from ._graph import install_lib

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config"


LIB = install_lib()


def launched(exe: str, name: str, *params: str, param_file: str) -> subprocess.Popen:
    """As launch_ros runs ``Node(executable=exe, name=name, parameters=[param_file])``."""
    args = [str(LIB / exe), "--ros-args", "-r", f"__node:={name}", "--params-file", str(CONFIG / param_file)]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ))  # the test's own domain (conftest)


def stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=5)
    return out or ""


@pytest.fixture
def probe():
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
    node = Node("test_node_names_probe", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    yield node, ex
    ex.remove_node(node)
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)


def names_until(node: Node, want: set[str], timeout_s: float = 20.0) -> list[str]:
    """Every node name on the graph (repeats kept) once all of ``want`` are there."""
    deadline = time.monotonic() + timeout_s
    names: list[str] = []
    while time.monotonic() < deadline:
        names = [n for n, _ns in node.get_node_names_and_namespaces()]
        if want <= set(names):
            break
        time.sleep(0.2)
    return names


def parameter(node: Node, ex: SingleThreadedExecutor, target: str, name: str) -> object:
    from rcl_interfaces.srv import GetParameters

    cli = node.create_client(GetParameters, f"/{target}/get_parameters")
    try:
        assert cli.wait_for_service(timeout_sec=10.0), f"/{target}/get_parameters never appeared"
        fut = cli.call_async(GetParameters.Request(names=[name]))
        ex.spin_until_future_complete(fut, timeout_sec=10.0)
        assert fut.done() and fut.result() is not None, f"/{target}/get_parameters did not answer"
        (value,) = fut.result().values
        return value.string_value
    finally:
        node.destroy_client(cli)


def test_a_launched_supervisor_and_verifier_keep_one_name_each_and_answer_for_their_parameters(tmp_path, probe):
    node, ex = probe
    journal = tmp_path / "journal.sqlite3"
    procs = {
        "supervisor": launched("supervisor", "supervisor", "autostart:=true", f"journal_path:={journal}",
                               f"bag_dir:={tmp_path / 'bags'}", param_file="supervisor.yaml"),
        "verifier": launched("verifier", "verifier", "autostart:=true", param_file="verifier.yaml"),
    }
    try:
        # The helpers exist only once their parent is configured: wait for them, by their own names.
        want = {"supervisor", "supervisor_dispatch", "verifier", "verifier_observe"}
        names = names_until(node, want)
        assert want <= set(names), f"nodes on the graph: {sorted(names)}"
        for name in ("supervisor", "verifier"):
            assert names.count(name) == 1, f"{name} appears {names.count(name)} times: {sorted(names)}"
        assert len([n for n in names if n.startswith(("supervisor", "verifier"))]) == \
            len({n for n in names if n.startswith(("supervisor", "verifier"))}), sorted(names)
        # ``ros2 param get /supervisor journal_path``, four times: always the supervisor's own value.
        for _ in range(4):
            assert parameter(node, ex, "supervisor", "journal_path") == str(journal)
    finally:
        logs = {name: stop(p) for name, p in procs.items()}
    for name, log in logs.items():
        assert "already registered for node name" not in log.lower(), f"{name}:\n{log[-2000:]}"


def test_a_launch_name_other_than_the_default_names_the_helpers_after_it(tmp_path, probe):
    node, _ex = probe
    proc = launched("supervisor", "harness_supervisor", "autostart:=true", f"journal_path:={tmp_path / 'j.sqlite3'}",
                    f"bag_dir:={tmp_path / 'bags'}", param_file="supervisor.yaml")
    try:
        want = {"harness_supervisor", "harness_supervisor_dispatch"}
        names = names_until(node, want)
        assert want <= set(names), f"nodes on the graph: {sorted(names)}"
        assert names.count("harness_supervisor") == 1 and "supervisor" not in names, sorted(names)
    finally:
        stop(proc)


def test_a_launch_name_for_the_sim_renames_none_of_its_nodes(probe):
    """The sim hosts eight nodes in one process, each pinned by a node-local remap: a launch
    ``name=`` (``-r __node:=robot_sim``) renames none of them (its parameters are keyed
    ``sim_robot:``, and Nav2 clients look for ``bt_navigator``, ``amcl`` and the others by name)."""
    node, _ex = probe
    proc = launched("sim_robot", "robot_sim", "autostart:=true", param_file="sim_robot.yaml")
    try:
        want = {"sim_robot", "bt_navigator", "amcl", "planner_server", "global_costmap", "local_costmap",
                "behavior_server", "waypoint_follower"}
        names = names_until(node, want)
        assert want <= set(names), f"nodes on the graph: {sorted(names)}"
        assert "robot_sim" not in names and all(names.count(n) == 1 for n in want), sorted(names)
    finally:
        stop(proc)
