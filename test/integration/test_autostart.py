"""autostart:=true (one process per node): a node whose configure fails stays unconfigured with the
reason kept and logged, instead of being activated over a half-built state (issue 14's first step)."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("module, cls, bad, needle", [
    ("verifier", "VerifierNode", {"verification_json": "{not json"}, "verification_json"),
    ("recovery", "RecoveryNode", {"advisor": "oracle"}, "unknown advisor"),
    ("planner", "PlannerNode", {"backend": "scripted", "script_file": "/nonexistent/turns.yaml"}, "/nonexistent"),
])
def test_a_failed_configure_is_not_activated(module, cls, bad, needle):
    import importlib

    import rclpy
    from rclpy.parameter import Parameter

    node_cls = getattr(importlib.import_module(f"robot_harness.nodes.{module}"), cls)
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        params = [Parameter("autostart", value=True), *(Parameter(k, value=v) for k, v in bad.items())]
        node = node_cls(context=ctx, parameter_overrides=params)
        try:
            assert node._state_machine.current_state[1] == "unconfigured"  # noqa: SLF001
            assert node.transition_error is not None and needle in node.transition_error.message
        finally:
            node.destroy_node()
        good = node_cls(context=ctx, parameter_overrides=[Parameter("autostart", value=True)])
        try:
            assert good._state_machine.current_state[1] == "active"  # noqa: SLF001
        finally:
            good.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
