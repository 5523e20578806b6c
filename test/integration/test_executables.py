"""One process per node, as `ros2 launch` would run them: the installed
executables with the shipped parameter files, talking over loopback DDS."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import rclpy
import yaml
from rclpy.executors import SingleThreadedExecutor

from robot_harness.client import MissionClient

from ._graph import install_lib

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config"


LIB = install_lib()


def start(exe: str, *params: str, param_file: str) -> subprocess.Popen:
    args = [str(LIB / exe), "--ros-args", "--params-file", str(CONFIG / param_file)]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture
def ros_client():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    client = MissionClient(ctx, node_name="test_mission_client")
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(client.node)
    t = threading.Thread(target=ex.spin, daemon=True)
    t.start()
    yield ctx, client
    ex.shutdown(timeout_sec=2.0)
    t.join(timeout=5.0)
    client.destroy()
    rclpy.try_shutdown(context=ctx)


def change_state(ctx, node: str, transition_id: int) -> bool:
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState
    from rclpy.node import Node

    n = Node("test_lifecycle_client", context=ctx)
    try:
        cli = n.create_client(ChangeState, f"/{node}/change_state")
        assert cli.wait_for_service(timeout_sec=10.0)
        fut = cli.call_async(ChangeState.Request(transition=Transition(id=transition_id)))
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(n)
        ex.spin_until_future_complete(fut, timeout_sec=10.0)
        ex.remove_node(n)
        return bool(fut.done() and fut.result().success)
    finally:
        n.destroy_node()


def wait_until_world_is_observed(ctx, timeout_s: float = 20.0) -> None:
    """Poll the aggregator until pose, navigator and battery are all AVAILABLE and
    the controller is idle (a fixed sleep was not enough on a loaded CI host)."""
    from rclpy.node import Node

    from robot_harness.msg import FieldMeta
    from robot_harness.srv import CaptureSnapshot

    n = Node("test_snapshot_client", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(n)
    try:
        cli = n.create_client(CaptureSnapshot, "/snapshot_aggregator/capture")
        assert cli.wait_for_service(timeout_sec=10.0)
        deadline = time.monotonic() + timeout_s
        snap = None
        while time.monotonic() < deadline:
            fut = cli.call_async(CaptureSnapshot.Request(reason="on_request"))
            ex.spin_until_future_complete(fut, timeout_sec=5.0)
            snap = fut.result().snapshot if fut.done() and fut.result().ok else None
            if snap is not None and snap.controller_state == "idle" and all(
                    m.availability == FieldMeta.AVAILABLE
                    for m in (snap.pose_meta, snap.navigation_meta, snap.battery_meta)):
                return
            time.sleep(0.2)
        raise AssertionError(f"the aggregator never saw a fresh pose, an idle navigator and a battery reading: {snap}")
    finally:
        ex.remove_node(n)
        n.destroy_node()


def _tool_results(journal: Path) -> str:
    """The journal's tool results, for a failure message that says why."""
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventType

    j = SqliteJournal(journal, clock=SystemClock(), ids=IdGenerator(None))
    try:
        return "\n".join(json.dumps(e.payload, default=str)[:600]
                         for e in j.events(types=[EventType.TOOL_RESULT_RECORDED]))
    finally:
        j.close()


def test_separate_processes_refuse_until_nav2_is_active_then_verify_and_survive_a_dead_robot(tmp_path, ros_client):
    ctx, client = ros_client
    script = tmp_path / "turns.yaml"
    script.write_text(yaml.safe_dump({"turns": [
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]},
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]},
        {"done": "Back at the dock."},
    ]}))
    harness = tmp_path / "harness.yaml"
    harness.write_text(yaml.safe_dump({
        "places": {"dock": {"x": 0.0, "y": 0.0}, "spot": {"x": 1.5, "y": 0.5}},
        "navigation": {"timeout_s": 3.0, "timeout_per_m_s": 0.5},
    }))
    journal = tmp_path / "journal.sqlite3"
    die_on_second_goal = json.dumps([{"kind": "die", "on_goal": 2, "after_s": 0.3}])
    procs = {
        "sim_robot": start("sim_robot", "autostart:=false", "speed:=3.0", f"faults_json:='{die_on_second_goal}'",
                           param_file="sim_robot.yaml"),
        "snapshot_aggregator": start("snapshot_aggregator", "autostart:=true", param_file="snapshot_aggregator.yaml"),
        "planner": start("planner", "autostart:=true", f"script_file:={script}", param_file="planner.yaml"),
        "verifier": start("verifier", "autostart:=true", param_file="verifier.yaml"),
        "recovery": start("recovery", "autostart:=true", param_file="recovery.yaml"),
        "supervisor": start("supervisor", "autostart:=true", f"journal_path:={journal}", f"harness_config_file:={harness}",
                            param_file="supervisor.yaml"),
    }
    try:
        # bt_navigator is unconfigured: the supervisor must refuse missions.
        accepted, refused = client.send("Go to spot, then return to dock.", server_timeout_s=20.0, timeout_s=30.0)
        assert accepted and refused.refusal == "backend_not_active", "a mission was admitted while Nav2's navigator was not active"
        assert refused.status == "BLOCKED" and "not active" in refused.summary, refused.summary

        assert change_state(ctx, "bt_navigator", 1)  # configure
        assert change_state(ctx, "bt_navigator", 3)  # activate
        # the navigator alone is not Nav2: the localizer (amcl, navigation.preconditions.lifecycle_active) is
        # still unconfigured, and a mission is refused at admission rather than admitted to have every
        # navigation refused
        accepted, refused = client.send("Go to spot, then return to dock.", timeout_s=30.0)
        assert accepted and refused.refusal == "backend_not_active", refused.summary
        assert "Nav2 is not active: amcl unconfigured (" in refused.summary, refused.summary
        assert change_state(ctx, "amcl", 1)  # what Nav2's localization lifecycle manager does
        assert change_state(ctx, "amcl", 3)
        wait_until_world_is_observed(ctx)

        accepted, result = client.send("Go to spot, then return to dock.", timeout_s=60.0)
        assert accepted
        # goal 1 verified; the robot process dies during goal 2: that action is
        # UNKNOWN, and the verifier (its own process) cannot establish "at dock"
        story = _tool_results(journal)
        assert result.status == "UNKNOWN", f"{result.summary}\n{story}"
        assert "o1" not in result.summary and "o2" in result.summary, f"{result.summary}\n{story}"
        assert any(i.startswith("verdict-") for i in result.evidence_ids), list(result.evidence_ids)
        assert procs["sim_robot"].wait(timeout=10) == 3, "die_mode=exit ends the robot process"
        for name in ("snapshot_aggregator", "planner", "verifier", "recovery", "supervisor"):
            assert procs[name].poll() is None, f"{name} must survive the robot's death"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(2)
        for name, p in procs.items():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    for name in ("snapshot_aggregator", "planner", "verifier", "recovery", "supervisor"):
        out = procs[name].stdout.read() if procs[name].stdout else ""
        assert "Traceback" not in out, f"{name}:\n{out[-3000:]}"
