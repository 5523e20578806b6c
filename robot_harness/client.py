"""Send a Mission goal (words, an explicit contract, or a template) and follow it: used by the CLI and the tests."""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
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
        owner: str = "",
        owner_token: str = "",
        answer_timeout_s: float = 10.0,
        max_sends: int = 4,
        contract: str | Sequence[Any] | Mapping[str, Any] | None = None,
        template: str = "",
        template_params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
    ) -> tuple[bool, Any]:
        """Returns (accepted, result). Needs an executor spinning ``self.node``.

        ``contract`` (text, or obligations as data) or ``template`` with ``template_params`` make a
        structured mission (``goal`` is then its description, and may be empty); the supervisor checks
        it field by field, and an invalid one comes back BLOCKED with the problems in ``summary``.

        The mission id is chosen here when not given, so the request can be
        sent again safely: when no accept/reject arrives within
        ``answer_timeout_s`` (a request lost in discovery, a supervisor that
        restarted), the same request goes out again, and the supervisor answers
        a known mission id with that mission's record instead of running it twice.
        """
        from diagnostic_msgs.msg import KeyValue

        from .core.mission_spec import MissionSpec
        from .nodes.conversions import mission_spec_to_goal

        spec = MissionSpec.build(goal=goal, contract=contract, template=template, params=template_params)
        if not self.client.wait_for_server(timeout_sec=server_timeout_s):
            raise BackendUnavailable(f"no mission server at {self.client._action_name} within {server_timeout_s} s")  # noqa: SLF001
        mission_id = mission_id or f"mission-{uuid.uuid4().hex[:12]}"
        msg = mission_spec_to_goal(spec, self.Mission.Goal(
            mission_id=mission_id, owner=owner, owner_token=owner_token,
            overrides=[KeyValue(key=k, value=str(v)) for k, v in (overrides or {}).items()]))
        fb = (lambda m: on_feedback(m.feedback)) if on_feedback else None
        deadline = time.monotonic() + timeout_s
        for _ in range(max_sends):
            done = threading.Event()
            box: dict[str, Any] = {}

            def on_goal(fut: Any, box: dict[str, Any] = box, done: threading.Event = done) -> None:
                handle = fut.result()
                box["handle"] = handle
                if not handle.accepted:
                    done.set()
                    return
                handle.get_result_async().add_done_callback(lambda f: (box.__setitem__("result", f.result()), done.set()))

            self.client.send_goal_async(msg, feedback_callback=fb).add_done_callback(on_goal)
            answer_by = time.monotonic() + answer_timeout_s
            while not done.wait(0.1):
                if time.monotonic() > deadline:
                    raise HarnessTimeout(f"mission did not finish within {timeout_s} s", mission_id=mission_id)
                if "handle" not in box and time.monotonic() > answer_by:
                    break  # no accept/reject: send the same request again
            if done.is_set():
                handle = box["handle"]
                if not handle.accepted:
                    return False, None
                return True, box["result"].result
        raise HarnessTimeout(f"the mission server never answered {max_sends} sends of mission {mission_id}",
                             mission_id=mission_id)

    def destroy(self) -> None:
        self.client.destroy()
        self.node.destroy_node()
