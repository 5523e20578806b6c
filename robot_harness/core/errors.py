"""One exception tree for the whole harness.

``HarnessError`` is the root. ``UsageError`` is "you used the API wrong" (bad
scenario file, unknown tool, invalid arguments); ``RefusalError`` is the
harness declining to do something at run time (stale preconditions, gate
rejections, timeouts, journal failures). Each carries structured attributes so
callers never parse messages.
"""
from __future__ import annotations

from typing import Any

__all__ = [
    "HarnessError",
    "UsageError",
    "ScenarioError",
    "UnknownToolError",
    "InvalidArgumentsError",
    "RefusalError",
    "MissionRefused",
    "NameClash",
    "PreconditionChanged",
    "IllegalTransition",
    "HarnessTimeout",
    "JournalWriteError",
    "StaleRevision",
    "BackendUnavailable",
    "NondeterminismError",
    "ToolExecutionError",
]


class HarnessError(Exception):
    """Root of every error robot_harness raises on purpose."""

    code = "harness_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.details}


class UsageError(HarnessError):
    """The caller used the API wrong; retrying the same call cannot help."""

    code = "usage_error"


class ScenarioError(UsageError):
    """A scenario file does not validate."""

    code = "invalid_scenario"


class UnknownToolError(UsageError):
    """The model (or a client) named a tool that is not offered."""

    code = "unknown_tool"


class InvalidArgumentsError(UsageError):
    """Tool arguments did not validate against the tool's schema."""

    code = "invalid_arguments"


class RefusalError(HarnessError):
    """The harness refused to act at run time (the world or the harness said no)."""

    code = "refused"


class MissionRefused(RefusalError):
    """The supervisor refused a mission before anything ran (busy, not active, invalid goal, no fresh
    pose, navigator not active); ``refusal`` is its code, the message its reason."""

    code = "mission_refused"


class PreconditionChanged(RefusalError):
    """A managed action's preconditions no longer hold on a fresh snapshot."""

    code = "precondition_changed"


class IllegalTransition(RefusalError):
    """A lifecycle transition that the state machine does not allow."""

    code = "illegal_transition"


class HarnessTimeout(RefusalError):
    """A bounded wait ran out."""

    code = "timeout"


class JournalWriteError(RefusalError):
    """A required record could not be persisted; no new physical work may start."""

    code = "journal_write_failed"


class StaleRevision(RefusalError):
    """A writer held a stale revision; re-read and retry."""

    code = "stale_revision"


class NameClash(RefusalError):
    """Another graph on this ROS domain uses this graph's names (the same namespace): a second supervisor,
    a second server of a harness service or action, a second navigator. Two graphs under one name would
    answer each other's requests, so the graph refuses to start and missions are refused."""

    code = "name_clash"


class BackendUnavailable(RefusalError):
    """The physical backend (e.g. Nav2's navigator) is not active or not reachable."""

    code = "backend_unavailable"


class NondeterminismError(HarnessError):
    """A replay asked for something different from what was recorded."""

    code = "nondeterminism"


class ToolExecutionError(HarnessError):
    """A tool's implementation raised; reported to the model as one error result."""

    code = "tool_error"
