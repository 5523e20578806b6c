"""Send a Mission goal and follow it: used by the CLI and the tests."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .core.errors import BackendUnavailable, HarnessTimeout

__all__ = ["MissionClient"]


class MissionClient:
    """A small node with a Mission action client, in a given context."""

    def __init__(self, context: Any, *, action_name: str = "/robot_harness/mission", node_name: str = "mission_client") -> None:
        from rclpy.action import ActionClient
        from rclpy.node import Node

        from .action import Mission

        self.Mission = Mission
        self.node = Node(node_name, context=context)
        self.client = ActionClient(self.node, Mission, action_name)

    def send(
        self,
        goal: str,
        *,
        mission_id: str = "",
        overrides: dict[str, str] | None = None,
        timeout_s: float = 600.0,
        server_timeout_s: float = 30.0,
        on_feedback: Callable[[Any], None] | None = None,
    ) -> tuple[bool, Any]:
        """Returns (accepted, result). Needs an executor spinning ``self.node``."""
        from diagnostic_msgs.msg import KeyValue

        if not self.client.wait_for_server(timeout_sec=server_timeout_s):
            raise BackendUnavailable(f"no mission server at {self.client._action_name} within {server_timeout_s} s")  # noqa: SLF001
        msg = self.Mission.Goal(goal=goal, mission_id=mission_id,
                                overrides=[KeyValue(key=k, value=str(v)) for k, v in (overrides or {}).items()])
        done = threading.Event()
        box: dict[str, Any] = {}

        def on_goal(fut: Any) -> None:
            handle = fut.result()
            box["handle"] = handle
            if not handle.accepted:
                done.set()
                return
            handle.get_result_async().add_done_callback(lambda f: (box.__setitem__("result", f.result()), done.set()))

        fb = (lambda m: on_feedback(m.feedback)) if on_feedback else None
        self.client.send_goal_async(msg, feedback_callback=fb).add_done_callback(on_goal)
        deadline = time.monotonic() + timeout_s
        while not done.wait(0.1):
            if time.monotonic() > deadline:
                raise HarnessTimeout(f"mission did not finish within {timeout_s} s")
        handle = box["handle"]
        if not handle.accepted:
            return False, None
        return True, box["result"].result

    def destroy(self) -> None:
        self.client.destroy()
        self.node.destroy_node()
