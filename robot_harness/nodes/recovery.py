"""The recovery node: decides the response to a structured failure.

It serves ``~/decide`` (robot_harness/srv/Recover) with the core
``RecoveryPolicy``: a fixed ladder (re-perceive, adjust view, Nav2 behaviour, local
replan, switch provider/skill, safe stop, human handoff) and per-mission budgets from
its parameters. The supervisor sends the failure and what the mission has
spent so far, journals the decision and acts on it; the node keeps no state
between calls, so a restarted recovery node cannot hand out a spent budget
twice.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from ..core.recovery import Failure, RecoveryBudgets, RecoveryPolicy, Rung
from ._lifecycle import ConfigureError, HarnessLifecycleNode
from .diagnostics import Check, Level
from ._util import run_node

__all__ = ["RecoveryNode", "main"]


class RecoveryNode(HarnessLifecycleNode):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("recovery", params={
            "re_perceive": 2, "adjust_view": 1, "local_replan": 3, "switch_provider_or_skill": 1, "nav2_behavior": 3,
            "alternatives_json": "", "advisor": "none", "advisor_llm_json": "", "autostart": False,
        }, **kwargs)
        self._policy: RecoveryPolicy | None = None
        self._srv: Any = None
        self.autostart_if_asked()

    def diagnostic_tasks(self) -> dict[str, Callable[[], Check]]:
        return {"recovery policy": lambda: Check(
            Level.OK, f"policy ready (advisor {self.parameters()['advisor']})", {}) if self._policy is not None
            else Check(Level.WARN, "not configured: the supervisor decides in-process", {})}

    def build(self, params: dict[str, Any]) -> None:
        from ..srv import Recover

        p = params
        try:
            budgets = RecoveryBudgets(re_perceive=int(p["re_perceive"]), adjust_view=int(p["adjust_view"]),
                                      local_replan=int(p["local_replan"]),
                                      switch_provider_or_skill=int(p["switch_provider_or_skill"]),
                                      nav2_behavior=int(p["nav2_behavior"]))
            alternatives = json.loads(p["alternatives_json"]) if p["alternatives_json"] else {}
            if not isinstance(alternatives, dict):
                raise ValueError("alternatives_json must be a JSON object")
        except (ValueError, ValidationError) as exc:
            raise ConfigureError("recovery parameters", exc) from exc
        advisor = None
        if p["advisor"] == "llm":
            try:
                from ..llm.advisor import LLMRecoveryAdvisor
                from ..llm.client import ChatClient, LLMConfig

                advisor = LLMRecoveryAdvisor(ChatClient(LLMConfig(**json.loads(p["advisor_llm_json"] or "{}"))))
            except Exception as exc:  # noqa: BLE001 - a misconfigured advisor must not start silently
                raise ConfigureError("recovery advisor", exc) from exc
        elif p["advisor"] != "none":
            raise ConfigureError("advisor", ValueError(f"unknown advisor {p['advisor']!r} (none | llm)"))
        self._policy = RecoveryPolicy(budgets, alternatives=alternatives, advisor=advisor)
        self._srv = self.create_service(Recover, "~/decide", self._on_decide)

    def release(self) -> None:
        if self._srv is not None:
            self.destroy_service(self._srv)
            self._srv = None
        self._policy = None

    def _on_decide(self, request: Any, response: Any) -> Any:
        response.mission_id, response.request_id = request.mission_id, request.request_id  # correlation, always
        if not self._active or self._policy is None:
            response.ok, response.error = False, "recovery is not active"
            return response
        try:
            body = json.loads(request.request_json)
            failure = Failure.model_validate(body["failure"])
            spent = {Rung(k): int(v) for k, v in (body.get("spent") or {}).items()}
            budgets = RecoveryBudgets.model_validate(body["budgets"]) if body.get("budgets") else None
            context = body.get("context") or {}
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            response.ok, response.error = False, f"malformed recovery request: {exc}"
            return response
        response.ok = True
        calls = getattr(self._policy.advisor, "calls", None)
        seen = len(calls) if isinstance(calls, list) else 0
        # The mission's budgets (from its contract) win over this node's defaults.
        response.decision_json = self._policy.decide(failure, spent=spent, context=context,
                                                     budgets=budgets).model_dump_json()
        # The advisor's model calls for this decision go back to the supervisor, whose journal
        # records every model call of the mission (this node keeps no journal).
        made = calls[seen:] if isinstance(calls, list) else []
        response.llm_calls_json = json.dumps([c.model_dump(mode="json") if hasattr(c, "model_dump") else c
                                              for c in made], default=str)
        return response


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``ros2 run robot_harness recovery``."""
    return run_node(RecoveryNode, argv, threads=1)
