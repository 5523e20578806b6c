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
