"""The one constructor of tool results: every call gets exactly one, made here."""
from __future__ import annotations

from typing import Any

from ..records import ToolCall, ToolResult, ToolResultStatus

__all__ = ["result", "error", "rejected", "cancelled", "HARNESS_REFUSALS", "BACKEND_REJECTED"]

BACKEND_REJECTED = "rejected by the backend"
"""How the dispatcher words an action's REQUESTED -> FAILED when the backend refused the goal (as opposed to a
goal it could not send at all); core/memory.py reads it back."""

HARNESS_REFUSALS = frozenset({"duplicate_dispatch", "lease_conflict", "no_provider", "stale_fencing_token"})
"""Result codes of a call the harness itself refused before any provider was asked (a repeat, a held lease,
no provider may act): never a provider's failure, and asking again unchanged is refused again."""


def result(call: ToolCall, status: ToolResultStatus, content: dict[str, Any] | None = None, *,
           action_id: str | None = None, error: dict[str, Any] | None = None) -> ToolResult:
    """The result of ``call``: its status, what the model reads (``content``) and, for an error, ``error``."""
    fields: dict[str, Any] = {"tool_call_id": call.id, "name": call.name, "status": status, "content": content or {}}
    if action_id is not None:
        fields["action_id"] = action_id
    if error is not None:
        fields["error"] = error
    return ToolResult(**fields)


def error(call: ToolCall, code: str, message: str, details: dict[str, Any] | None = None, *,
          action_id: str | None = None) -> ToolResult:
    """An ERROR result: the call was malformed, unknown, or failed while running."""
    return result(call, ToolResultStatus.ERROR, action_id=action_id,
                  error={"code": code, "message": message, **(details or {})})


def rejected(call: ToolCall, reason: str, *, code: str = "", action_id: str | None = None,
             **content: Any) -> ToolResult:
    """A REJECTED result: the harness refused the call; nothing ran (or the backend refused it)."""
    return result(call, ToolResultStatus.REJECTED, {**({"code": code} if code else {}), "reason": reason, **content},
                  action_id=action_id)


def cancelled(call: ToolCall, reason: str, **content: Any) -> ToolResult:
    """A CANCELLED result: a Stop, an expiry or a withdrawn approval ended the call before it ran."""
    return result(call, ToolResultStatus.CANCELLED, {"reason": reason, **content})
