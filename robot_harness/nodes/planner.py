"""The planner node: serves one model turn at a time on ``~/plan_turn``.

In this release the backend is scripted/replay (recorded model responses);
an LLM backend plugs in behind the same service. The planner proposes; it
never approves — the supervisor decides what a response means.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from pydantic import TypeAdapter, ValidationError

from ..core.errors import HarnessError
from ..core.planner_script import ScriptedPlanner, ScriptTurn
from ..core.ports import PlannerRequest
from ._util import declare_params, run_node

__all__ = ["PlannerNode", "main", "load_turns"]

_TURNS = TypeAdapter(list[ScriptTurn])


def load_turns(*, turns_json: str, script_file: str) -> list[ScriptTurn]:
    """Turns from inline JSON, or from a YAML file holding ``turns:`` or a scenario's ``planner.turns``."""
    if turns_json:
        return _TURNS.validate_json(turns_json)
    if script_file:
        raw = yaml.safe_load(Path(script_file).read_text()) or {}
        if "planner" in raw:
            raw = raw["planner"] or {}
        return _TURNS.validate_python(raw.get("turns", []))
    return []


class PlannerNode(LifecycleNode):
    def __init__(self, **kwargs) -> None:
        super().__init__("planner", **kwargs)
        self._params = declare_params(self, {"backend": "scripted", "turns_json": "", "script_file": "", "autostart": False})
        self._backend: ScriptedPlanner | None = None
        self._srv = None
        self._active = False
        if self._params["autostart"]:
            self.trigger_configure()
            self.trigger_activate()

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        from ..srv import PlanTurn

        p = {k: self.get_parameter(k).value for k in self._params}
        if p["backend"] != "scripted":
            self.get_logger().error(f"planner backend {p['backend']!r} is not available in this build (use 'scripted')")
            return TransitionCallbackReturn.FAILURE
        try:
            turns = load_turns(turns_json=p["turns_json"], script_file=p["script_file"])
        except (OSError, ValidationError, yaml.YAMLError, ValueError) as exc:
            self.get_logger().error(f"cannot load the planner script: {exc}")
            return TransitionCallbackReturn.FAILURE
        self._backend = ScriptedPlanner(turns)
        self._srv = self.create_service(PlanTurn, "~/plan_turn", self._on_plan_turn, callback_group=ReentrantCallbackGroup())
        self.get_logger().info(f"scripted planner with {len(turns)} turn(s)")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._srv is not None:
            self.destroy_service(self._srv)
            self._srv = None
        self._backend = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self.on_cleanup(state)

    def _on_plan_turn(self, request, response):
        if not self._active or self._backend is None:
            response.ok, response.error = False, "planner is not active"
            return response
        try:
            req = PlannerRequest(
                mission_id=request.mission_id, model_turn_id=request.model_turn_id, turn_index=request.turn_index,
                context=json.loads(request.context_json or "{}"),
                tools=tuple({"type": "function", "function": {"name": t.name, "description": t.description,
                                                               "parameters": json.loads(t.parameters_json_schema or "{}")}}
                            for t in request.tools),
            )
            delay = self._backend.delay_for(request.turn_index)
            if delay:
                time.sleep(delay)  # simulated model latency
            out = self._backend.next_turn(req)
        except (HarnessError, ValueError) as exc:
            response.ok, response.error = False, str(exc)
            return response
        response.ok, response.response_json = True, out.model_dump_json()
        return response


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``ros2 run robot_harness planner``."""
    return run_node(PlannerNode, argv)
