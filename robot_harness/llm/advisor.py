"""A model that advises recovery, in its own clean context.

It sees the structured failure, the rungs the harness authorizes for it, and
the C4 recovery view (failures, attempts, budgets, evidence around the
failure; never the planner's words). It answers with one rung name; the
policy takes the answer only if it is one of the authorized rungs
(core/recovery.py), and records it either way.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.recovery import Failure, Rung
from .client import ChatClient, ChatCompleteFn

__all__ = ["LLMRecoveryAdvisor", "ADVISOR_SYSTEM_PROMPT"]

ADVISOR_SYSTEM_PROMPT = """\
You advise the recovery of a mobile robot harness after a failure (prompt robot_harness.advisor/1).
You receive the failure, the options the harness authorizes, and a bounded view of the evidence.
Answer with exactly one option name from the list, nothing else. If unsure, answer the first option."""


class LLMRecoveryAdvisor:
    def __init__(self, client: ChatClient) -> None:
        self._complete = ChatCompleteFn(client)
        self.calls: list[Any] = self._complete.calls

    def __call__(self, failure: Failure, options: Sequence[Rung], context: Mapping[str, object]) -> str:
        user = json.dumps({"failure": failure.model_dump(mode="json"), "options": [o.value for o in options],
                           "view": context.get("view", [])}, separators=(",", ":"), default=str)
        reply = self._complete([{"role": "system", "content": ADVISOR_SYSTEM_PROMPT}, {"role": "user", "content": user}])
        return reply.strip().strip('"').strip()
