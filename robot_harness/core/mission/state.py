"""Everything one mission holds while it runs, built fresh for each run.

``MissionState`` is the mission's working memory; nothing in it is the
source of truth. What the journal already says (the task state: contract,
receipts, facts, commits, the state version) is read from the ledger, never
kept here beside it. ``StopFlag`` outlives a mission (a Stop may arrive
between admission and the first step) and is the one value another thread
writes.
"""
from __future__ import annotations

from collections.abc import Callable

import math
from dataclasses import dataclass, field
from typing import Any

from ..completion import EvidenceRef, Verdict
from ..interactions import MissionCredentials
from ..lifecycle import ManagedAction
from ..records import MissionStatus, Pose2D
from ..recovery import Rung
from ..verifier import PoseSample

__all__ = ["MissionEnd", "MissionState", "StopFlag", "new_usage"]


class StopFlag:
    """Why the running mission was asked to stop, or None. Set from any thread; read at each check.

    ``reads`` sees every read and answers it: a decision tape records what each read found (a Stop
    is an input from outside, whose timing decides where the mission ends) and a replay answers
    from the tape."""

    def __init__(self, reads: Callable[[str | None], str | None] | None = None) -> None:
        self._reason: str | None = None
        self._reads = reads

    @property
    def reason(self) -> str | None:
        return self._reads(self._reason) if self._reads is not None else self._reason

    def request(self, reason: str) -> None:
        self._reason = reason

    def clear(self) -> None:
        self._reason = None

    def __bool__(self) -> bool:
        return bool(self.reason)


@dataclass(frozen=True)
class MissionEnd:
    """How a mission ends: its final status and the one-line summary the journal and the caller get.

    Every part that can end a mission returns one (or None to go on); the
    runner is the only place that turns it into the mission's last records.
    """

    status: MissionStatus
    summary: str


def new_usage() -> dict[str, Any]:
    """``llm_calls`` and the token/latency sums cover every model call of the mission: the planner's turns,
    the contract compiler's and coverage reviewer's, and the recovery advisor's (``llm_calls_by_role``)."""
    return {"planner_turns": 0, "llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
            "llm_latency_ms": 0.0, "llm_calls_by_role": {}}


@dataclass
class MissionState:
    """One mission's working state. Owned by the runner; each part reads and writes only its own fields."""

    mission_id: str
    goal: str
    places: dict[str, Pose2D]
    """The map's places, plus ``start`` when the contract names it (bound at admission)."""
    deadline: float = math.inf
    """Monotonic time at which the mission times out."""
    owner: str = ""
    owner_sha: str = ""
    credentials: MissionCredentials = field(default_factory=MissionCredentials)
    # execution
    actions: list[ManagedAction] = field(default_factory=list)
    """Every managed action of the mission, in dispatch order (execution's)."""
    active: ManagedAction | None = None
    """The action being supervised now, or None (execution's)."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """Each tool call with its result, as the outcome reports them (the turn's)."""
    call_started: dict[str, float] = field(default_factory=dict)
    """Wall time each call began, until its receipt is written (receipts')."""
    attempts: dict[str, int] = field(default_factory=dict)
    """Plan node -> the attempt recovery authorized (recovery's)."""
    node_of_call: dict[str, str] = field(default_factory=dict)
    """Tool call id -> its plan node (dispatch's)."""
    approvals: dict[str, str] = field(default_factory=dict)
    """Tool call id -> the interaction that approved it (the operator desk's)."""
    turn_state_version: int = 0
    """The state version this turn's decisions are keyed on."""
    # evidence
    evidence: list[int] = field(default_factory=list)
    """Journal seqs the mission's result cites."""
    trajectory: list[PoseSample] = field(default_factory=list)
    snapshot_refs: dict[str, EvidenceRef] = field(default_factory=dict)
    """Snapshot id -> its ref in the evidence bag."""
    bag: dict[str, Any] = field(default_factory=dict)
    recorder_error: str = ""
    # completion
    last_verdict: Verdict | None = None
    verdict_evidence: list[str] = field(default_factory=list)
    done_rejections: int = 0
    proposals: list[str] = field(default_factory=list)
    """The planner's done texts (planner provenance: never in the verifier's view)."""
    fact_heads: dict[str, str] = field(default_factory=dict)
    """Fact key -> the id of its latest OBSERVED fact (receipts')."""
    turn_done: set[str] = field(default_factory=set)
    """Obligations committed or already evidenced, as of this turn's planner view (scopes C2)."""
    progress_since: int = 0
    """Receipts at or below this state version no longer count as progress (``recovery.repair: whole``)."""
    # routing (issue 18)
    provider_of: dict[str, str] = field(default_factory=dict)
    """Action id (a navigation) or tool call id (a capability call) -> the provider it was routed to (dispatch's)."""
    provider_failed: dict[str, dict[str, str]] = field(default_factory=dict)
    """Plan node -> provider -> why it may not act for that node again this mission (the runner's, on a failure)."""
    remembered: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    """Capability -> its providers' remembered verified outcomes, read from memory once (the runner's)."""
    provider_tally: dict[str, list[int]] = field(default_factory=dict)
    """Provider -> [verified successes, attempts with a known outcome] this mission (the runner's)."""
    # recovery and usage
    spent: dict[Rung, int] = field(default_factory=dict)
    wide_view_turns: int = 0
    usage: dict[str, Any] = field(default_factory=new_usage)
