"""The planner node: serves one model turn at a time on ``~/plan_turn``.

Backends (parameter ``backend``):

* ``scripted`` — recorded model responses (``turns_json`` / ``script_file``);
* ``llm`` — any OpenAI-compatible endpoint through the ``openai`` client
  (``robot_harness.llm``): ``base_url`` (empty: ``OPENAI_BASE_URL``),
  ``model``, the key from ``api_key_env`` or ``api_key_file`` (never
  journaled), timeout, retries with backoff, max tokens, temperature, seed;
  with ``record_file`` every turn is also appended to a replay file;
* ``replay`` — a replay file recorded by ``llm``; a request that differs from
  the recorded one fails loudly (``NondeterminismError``).

The planner proposes; it never approves — the supervisor, the verifier and
the commit gate decide what a response means. Model I/O (redacted request
and response, tokens, latency) travels back in the response's ``meta`` for
the supervisor to journal.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from rclpy.callback_groups import ReentrantCallbackGroup
from pydantic import TypeAdapter, ValidationError

from ..core.errors import HarnessError
from ..core.planner_script import ScriptedPlanner, ScriptTurn
from ..core.ports import PlannerRequest
from ..core.records import ModelResponse
from ._lifecycle import ConfigureError, HarnessLifecycleNode
from .diagnostics import Check, planner_check
from ._util import run_node

__all__ = ["PlannerNode", "main", "load_turns", "make_backend"]

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


class PlannerNode(HarnessLifecycleNode):
    def __init__(self, **kwargs) -> None:
        super().__init__("planner", params={
            "backend": "scripted", "turns_json": "", "script_file": "",
            "model": "", "base_url": "", "api_key_env": "OPENAI_API_KEY", "api_key_file": "",
            "timeout_s": 60.0, "max_retries": 2, "backoff_initial_s": 0.5, "backoff_max_s": 8.0,
            "max_tokens": 1024, "temperature": 0.0, "seed": 0, "max_output_chars": 20000,
            "record_file": "", "replay_file": "",
            "autostart": False,
        }, **kwargs)
        self._backend: Any = None
        self._srv = None
        self._calls = 0
        self._last_error: str | None = None
        self.autostart_if_asked()

    def diagnostic_tasks(self) -> dict[str, Callable[[], Check]]:
        return {"planner backend": self._backend_diagnostic}

    def _backend_diagnostic(self) -> Check:
        p = self.parameters()
        return planner_check(backend=str(p["backend"]), configured=self._backend is not None, calls=self._calls,
                             last_error=self._last_error, base_url=str(p.get("base_url") or ""))

    def build(self, params: dict[str, Any]) -> None:
        from ..srv import PlanTurn

        try:
            self._backend, description = make_backend(params)
        except (OSError, ValidationError, yaml.YAMLError, ValueError, HarnessError) as exc:
            raise ConfigureError(f"planner backend {params['backend']!r}", exc) from exc
        self._srv = self.create_service(PlanTurn, "~/plan_turn", self._on_plan_turn, callback_group=ReentrantCallbackGroup())
        self.get_logger().info(description)

    def release(self) -> None:
        if self._srv is not None:
            self.destroy_service(self._srv)
            self._srv = None
        self._backend = None

    def _on_plan_turn(self, request, response):
        response.mission_id, response.request_id = request.mission_id, request.request_id  # correlation, always
        response = self._plan_turn(request, response)
        self._calls += 1
        self._last_error = None if response.ok else response.error
        return response

    def _plan_turn(self, request, response):
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
            if isinstance(self._backend, ScriptedPlanner):
                delay = self._backend.delay_for(request.turn_index)
                if delay:
                    time.sleep(delay)  # simulated model latency
                out = self._backend.next_turn(req)
            else:
                out, call = self._backend.turn(req)
                if call is not None:
                    out = out.model_copy(update={"meta": {**out.meta, "llm_call": call.model_dump(mode="json")}})
        except HarnessError as exc:
            response.ok, response.error = False, f"{exc.code}: {exc.message}"
            call = getattr(exc, "call", None)
            if call is not None:  # the failed call's I/O is journaled too
                response.response_json = ModelResponse(meta={"llm_call": call.model_dump(mode="json")}).model_dump_json()
            return response
        except ValueError as exc:
            response.ok, response.error = False, str(exc)
            return response
        response.ok, response.response_json = True, out.model_dump_json()
        return response


def make_backend(p: dict[str, Any]) -> tuple[Any, str]:
    """The backend for the node's parameters, and a line describing it (no secrets)."""
    backend = p["backend"]
    if backend == "scripted":
        turns = load_turns(turns_json=p["turns_json"], script_file=p["script_file"])
        return ScriptedPlanner(turns), f"scripted planner with {len(turns)} turn(s)"
    if backend == "replay":
        from ..llm.planner import ReplayPlanner

        if not p["replay_file"]:
            raise ValueError("backend 'replay' needs replay_file")
        return ReplayPlanner(Path(p["replay_file"])), f"replaying model responses from {p['replay_file']}"
    if backend == "llm":
        from ..llm.client import ChatClient, LLMConfig
        from ..llm.planner import OpenAIPlanner, RecordingPlanner

        config = LLMConfig(
            base_url=p["base_url"], model=p["model"], api_key_env=p["api_key_env"], api_key_file=p["api_key_file"],
            timeout_s=float(p["timeout_s"]), max_retries=int(p["max_retries"]),
            backoff_initial_s=float(p.get("backoff_initial_s", 0.5)), backoff_max_s=float(p.get("backoff_max_s", 8.0)),
            max_tokens=int(p["max_tokens"]), temperature=float(p["temperature"]),
            seed=int(p["seed"]) if int(p["seed"]) >= 0 else None,
            max_output_chars=int(p.get("max_output_chars", 20000)),
        )
        client = ChatClient(config)
        planner: Any = OpenAIPlanner(client)
        what = f"LLM planner: model {client.config.model} at {client.endpoint}"
        if p["record_file"]:
            planner = RecordingPlanner(planner, Path(p["record_file"]))
            what += f"; recording to {p['record_file']}"
        return planner, what
    raise ValueError(f"unknown planner backend {backend!r} (scripted | llm | replay)")


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``ros2 run robot_harness planner``."""
    return run_node(PlannerNode, argv)
