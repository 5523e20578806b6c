"""Real nodes publish /diagnostics over loopback DDS: one status per node named with its fully
qualified name (namespace included), and a node whose configure failed reports ERROR with why."""
from __future__ import annotations

import time

import pytest


def test_nodes_publish_diagnostics():
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from robot_harness.nodes.planner import PlannerNode
    from robot_harness.nodes.verifier import VerifierNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    nodes = []
    try:
        fast = Parameter("diagnostic_period_s", value=0.2)
        nodes.append(PlannerNode(context=ctx, parameter_overrides=[fast, Parameter("autostart", value=True)]))
        nodes.append(VerifierNode(context=ctx, namespace="robot1", parameter_overrides=[
            fast, Parameter("autostart", value=True), Parameter("verification_json", value="{not json")]))
        probe = Node("diag_probe", context=ctx)
        seen: dict[str, DiagnosticStatus] = {}
        probe.create_subscription(DiagnosticArray, "/diagnostics",
                                  lambda m: seen.update({s.name: s for s in m.status}), 10)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (*nodes, probe):
            ex.add_node(n)
        deadline = time.monotonic() + 15
        want = {"/planner: lifecycle", "/robot1/verifier: lifecycle"}
        while time.monotonic() < deadline and not want <= set(seen):
            ex.spin_once(timeout_sec=0.1)
        assert want <= set(seen), sorted(seen)
        assert seen["/planner: lifecycle"].level == DiagnosticStatus.OK
        bad = seen["/robot1/verifier: lifecycle"]
        assert bad.level == DiagnosticStatus.ERROR and "verification_json" in bad.message
        assert bad.hardware_id == "/robot1/verifier"
        ex.shutdown()
        probe.destroy_node()
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=ctx)


def test_subclass_tasks_and_a_raising_task():
    import rclpy
    from diagnostic_msgs.msg import DiagnosticStatus
    from rclpy.parameter import Parameter

    from robot_harness.nodes._lifecycle import HarnessLifecycleNode
    from robot_harness.nodes.diagnostics import Check, Level

    class Probe(HarnessLifecycleNode):
        def __init__(self, **kw):
            super().__init__("diag_sub", **kw)
            self.value = 7  # set after the base class: the tasks are asked for lazily

        def diagnostic_tasks(self):
            return {"value": lambda: Check(Level.OK, f"value {self.value}"), "boom": lambda: 1 / 0}

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        node = Probe(context=ctx, namespace="robot2", parameter_overrides=[Parameter("diagnostic_period_s", value=0.0)])
        try:
            by_name = {s.name: s for s in node.diagnostics.statuses()}
            assert by_name["/robot2/diag_sub: value"].message == "value 7"
            assert by_name["/robot2/diag_sub: boom"].level == DiagnosticStatus.ERROR
            assert "ZeroDivisionError" in by_name["/robot2/diag_sub: boom"].message
            assert by_name["/robot2/diag_sub: lifecycle"].level == DiagnosticStatus.WARN
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)


def test_the_graph_reports_journal_freshness_navigator_planner_and_the_last_mission(tmp_path):
    """The whole graph on the simulated robot: every node's own tasks on /diagnostics (ros2 topic echo
    /diagnostics, rqt_robot_monitor), OK while all is well; the last mission's status after one; a pose
    that stops coming is ERROR on the aggregator's freshness, naming the field and its age."""
    import threading

    import rclpy  # noqa: F401 - the graph's context is rclpy's
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.node import Node

    from robot_harness.bringup import BringUp
    from robot_harness.client import MissionClient
    from robot_harness.runner import scenario_overrides

    from ._graph import DONE, GO_SPOT, scenario

    sc = scenario([GO_SPOT, DONE])
    overrides = scenario_overrides(sc, journal_path=tmp_path / "journal.sqlite3", artifacts_dir=tmp_path / "art")
    for name in ("snapshot_aggregator", "planner", "verifier", "recovery", "supervisor"):
        overrides.setdefault(name, {})["diagnostic_period_s"] = 0.2
    seen: dict[str, DiagnosticStatus] = {}
    lock = threading.Lock()

    def on_array(msg: DiagnosticArray) -> None:
        with lock:
            seen.update({s.name: s for s in msg.status})

    def status(name: str, until, timeout_s: float = 20.0) -> DiagnosticStatus:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with lock:
                got = seen.get(name)
            if got is not None and until(got):
                return got
            time.sleep(0.05)
        with lock:
            raise AssertionError(f"{name}: {seen.get(name)}; all: {sorted(seen)}")

    def ok(s: DiagnosticStatus) -> bool:
        return s.level == DiagnosticStatus.OK

    with BringUp(overrides=overrides) as graph:
        probe = Node("diag_graph_probe", context=graph.context)
        probe.create_subscription(DiagnosticArray, "/diagnostics", on_array, 50)
        graph.add_node(probe)
        fresh = status("/snapshot_aggregator: snapshot freshness", ok)
        values = {kv.key: kv.value for kv in fresh.values}
        assert values["pose.state"] == "fresh" and values["pose.source"] == "/amcl_pose", values
        assert "scripted backend ready" in status("/planner: planner backend", ok).message
        status("/verifier: verifier", ok)
        status("/recovery: recovery policy", ok)
        journal = status("/supervisor: journal", ok)
        assert str(tmp_path / "journal.sqlite3") in {kv.value for kv in journal.values}, journal
        nav = status("/supervisor: navigator", ok)
        assert "bt_navigator active" in nav.message, nav.message
        assert status("/supervisor: mission", ok).message == "no mission yet"

        client = MissionClient(graph.context)
        graph.add_node(client.node, client.destroy)
        accepted, result = client.send(sc.goal, timeout_s=90.0, server_timeout_s=20.0)
        assert accepted and result.status == "SUCCEEDED", result.summary
        last = status("/supervisor: mission", lambda s: "SUCCEEDED" in s.message)
        assert last.level == DiagnosticStatus.OK and result.mission_id in last.message
        # The planner's last status may predate its second call: wait for one that counts it.
        status("/planner: planner backend", lambda s: ok(s) and s.message.endswith("2 call(s)"))

        # The robot stops publishing (its tick ends): the pose goes stale, which missions are refused for.
        assert graph.sim.stop()
        stale = status("/snapshot_aggregator: snapshot freshness", lambda s: s.level == DiagnosticStatus.ERROR,
                       timeout_s=45.0)
        assert "pose" in stale.message and ("stale" in stale.message or "missing" in stale.message), stale.message
