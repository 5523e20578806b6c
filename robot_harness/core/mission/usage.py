"""A mission's model usage: every model call (planner, contract compiler and reviewer, recovery
advisor), taken once each from the components that made it, counted into the mission's usage."""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from ..errors import HarnessError
from ..ports import ModelCallSource
from ..records import ModelResponse

__all__ = ["ModelUsage", "error_record"]


class ModelUsage:
    """Counts model calls into ``usage`` (a ``MissionState.usage`` dict), and hands each call's record over once.

    A ``ModelCallSource`` hands its records over itself. A component that only
    keeps a ``calls`` list of ``llm_call`` records (the llm package's
    ``ChatCompleteFn`` and ``LLMRecoveryAdvisor``, also when wrapped as a
    compiler's ``complete`` or a policy's ``advisor``) is read from where the
    last look left off; other entries in such a list (a test double's recorded
    messages) are not model calls and are skipped.
    """

    def __init__(self, usage: dict[str, Any]) -> None:
        self.usage = usage
        self._read: list[list[Any]] = []
        """[the list, how many of its entries were taken], per list seen (held by identity)."""

    def count_turn(self, response: ModelResponse) -> None:
        self.usage["planner_turns"] += 1
        call = response.meta.get("llm_call") if isinstance(response.meta, dict) else None
        if isinstance(call, dict):
            self._count(call, "planner")

    def take(self, role: str, *sources: Any, error: BaseException | None = None) -> list[dict[str, Any]]:
        """The model calls ``sources`` made since the last look (journaled by the caller), counted as ``role``'s."""
        found: list[Any] = []
        lists: list[list[Any]] = []
        for source in sources:
            for part in (source, getattr(source, "complete", None), getattr(source, "advisor", None)):
                if part is None:
                    continue
                if isinstance(part, ModelCallSource):
                    found.extend(part.drain_calls())
                    continue
                calls = getattr(part, "calls", None)
                if isinstance(calls, list) and not any(calls is seen for seen in lists):
                    lists.append(calls)
                    found.extend(self._unread(calls))
        failed = getattr(error, "call", None)
        if failed is not None and not any(failed is f for f in found):
            found.append(failed)  # the failed call's record, when the component did not keep it
        records = [r for r in map(_llm_call_record, found) if r is not None]
        for call in records:
            self._count(call, role)
        return records

    def _count(self, call: dict[str, Any], role: str) -> None:
        """One model call's tokens and latency, into the mission's usage (in total and per role)."""
        u = self.usage
        u["llm_calls"] += 1
        by_role = u["llm_calls_by_role"]
        by_role[role] = by_role.get(role, 0) + 1
        tokens = call.get("usage") or {}
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            u[key] += int(tokens.get(key) or 0)
        u["llm_latency_ms"] += float(call.get("latency_ms") or 0.0)

    def _unread(self, calls: list[Any]) -> list[Any]:
        entry = next((e for e in self._read if e[0] is calls), None)
        if entry is None:
            entry = [calls, 0]
            self._read.append(entry)
        start, entry[1] = entry[1], len(calls)
        return calls[start:]


def _llm_call_record(value: Any) -> dict[str, Any] | None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict) and value.get("kind") == "llm_call":
        return json.loads(json.dumps(value, default=str))
    return None


def error_record(exc: BaseException) -> dict[str, Any]:
    """An exception as the journal keeps it: code, message, type and (JSON-safe) structured details."""
    if isinstance(exc, HarnessError):
        details = {k: v for k, v in exc.details.items() if k not in ("meta", "call")}
        out = {"code": exc.code, "message": exc.message, "type": type(exc).__name__}
        if details:
            out["details"] = json.loads(json.dumps(details, default=str))
        return out
    return {"code": "unexpected_error", "message": f"{type(exc).__name__}: {exc}"[:2000], "type": type(exc).__name__}
