"""Bounded recovery: what the harness does after a structured failure.

A ``Failure`` is what went wrong, in the harness's terms (never the model's
words). ``RecoveryPolicy.decide`` picks the response from a fixed ladder,

    re-perceive -> adjust view -> Nav2 behaviour -> local replan -> switch provider/skill -> safe stop
    -> human handoff

starting at the first rung that suits the failure kind and skipping rungs
whose budget is spent. Every rung but the last two is charged to a budget
(``RecoveryBudgets``); when all are spent the decision escalates (safe stop
for a failure that may have left the robot moving, otherwise a human
handoff) instead of retrying. A model may *advise*: it is shown only the
authorized options and its choice is taken only if it is one of them; any
other answer is recorded and ignored.

Pure and deterministic: the engine (or the recovery node) passes the
counts spent so far and journals the decision.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .config import RecoveryConfig
from .records import FORMAT_VERSION

__all__ = ["FailureKind", "Rung", "LADDER", "Failure", "RecoveryBudgets", "RecoveryDecision", "RecoveryPolicy",
           "Advisor"]


class FailureKind(str, enum.Enum):
    ACTION_FAILED = "action_failed"
    """A physical action ended FAILED (the backend aborted, or the verified pose contradicts success)."""
    ACTION_UNKNOWN = "action_unknown"
    """A physical action ended UNKNOWN (timeout, lost feedback, stale evidence): it may still be moving."""
    DISPATCH_REJECTED = "dispatch_rejected"
    """The backend refused the goal; nothing moved."""
    RESOURCE_BLOCKED = "resource_blocked"
    """The resource is leased by another invocation, or blocked by one of unknown outcome; nothing was sent
    (but the robot may still be moving for that other invocation)."""
    PRECONDITION_CHANGED = "precondition_changed"
    """The world changed between decision and dispatch; nothing moved."""
    TOOL_ERROR = "tool_error"
    """A capability failed (camera, speech, message)."""
    INVALID_MODEL_OUTPUT = "invalid_model_output"
    """Unknown tool, invalid or malformed arguments, prose instead of action."""
    DONE_REJECTED = "done_rejected"
    """The verifier found obligations without evidence."""
    VERIFIER_UNAVAILABLE = "verifier_unavailable"


class Rung(str, enum.Enum):
    RE_PERCEIVE = "re_perceive"
    """Decide again on a fresh snapshot (the next turn captures one)."""
    ADJUST_VIEW = "adjust_view"
    """Give the planner more of the failure's evidence in its next view."""
    NAV2_BEHAVIOR = "nav2_behavior"
    """Run the next of Nav2's behaviours the failure's kind lists (``Failure.behaviors``: clear the costmaps,
    back up, spin) as a managed action, then the planner retries. Open only for a Nav2 failure with such a
    list (a robot that made no progress, or whose start cell is blocked); the first rung for it."""
    LOCAL_REPLAN = "local_replan"
    """The planner re-plans only what is left (the verified prefix stays): suffix repair."""
    SWITCH = "switch_provider_or_skill"
    """Try an authorized alternative provider or skill."""
    SAFE_STOP = "safe_stop"
    """Stop the robot (cancel what runs) and end the mission without success."""
    HUMAN_HANDOFF = "human_handoff"
    """End the mission WAITING_USER: an operator decides."""


LADDER: tuple[Rung, ...] = tuple(Rung)

_FIRST_RUNG: Mapping[FailureKind, Rung] = {
    FailureKind.PRECONDITION_CHANGED: Rung.RE_PERCEIVE,
    FailureKind.ACTION_UNKNOWN: Rung.RE_PERCEIVE,
    FailureKind.ACTION_FAILED: Rung.ADJUST_VIEW,
    FailureKind.DISPATCH_REJECTED: Rung.LOCAL_REPLAN,
    FailureKind.RESOURCE_BLOCKED: Rung.RE_PERCEIVE,
    FailureKind.TOOL_ERROR: Rung.LOCAL_REPLAN,
    FailureKind.INVALID_MODEL_OUTPUT: Rung.LOCAL_REPLAN,
    FailureKind.DONE_REJECTED: Rung.LOCAL_REPLAN,
    FailureKind.VERIFIER_UNAVAILABLE: Rung.RE_PERCEIVE,
}
_MAY_BE_MOVING = frozenset({FailureKind.ACTION_UNKNOWN, FailureKind.RESOURCE_BLOCKED})


class Failure(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["failure"] = "failure"
    format_version: int = FORMAT_VERSION
    failure_id: str
    failure_kind: FailureKind
    reason: str
    skill: str = ""
    tool_call_id: str = ""
    action_id: str = ""
    obligation_ids: tuple[str, ...] = ()
    nav2_kind: str = ""
    """The kind of the Nav2 error behind an action's failure (``nav2_errors.Nav2ErrorKind``), "" when none."""
    behaviors: tuple[str, ...] = ()
    """The Nav2 behaviours (skill names, in order) the site's recovery config lists for ``nav2_kind``
    (``recovery.nav2_behaviors``); empty: the ``nav2_behavior`` rung is not open for this failure."""
    provider: str = ""
    """The provider the failed action was routed to (core/routing.py), "" when there was no choice."""
    providers: tuple[str, ...] = ()
    """Other providers of the same capability that may act for the same obligation (issue 18); non-empty:
    the ``switch_provider_or_skill`` rung is open, and first unless ``behaviors`` are: the fallback keeps the
    obligation and changes who acts."""


class RecoveryBudgets(BaseModel):
    """How often each rung may be used in one mission (the contract's recovery budget)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    re_perceive: int = Field(default=2, ge=0)
    adjust_view: int = Field(default=1, ge=0)
    local_replan: int = Field(default=3, ge=0)
    """Replans are bounded; 3 by default."""
    switch_provider_or_skill: int = Field(default=1, ge=0)
    nav2_behavior: int = Field(default=3, ge=0)
    """Nav2 behaviours run as recovery in one mission (each costmap clear, back-up or spin counts one)."""

    @classmethod
    def from_config(cls, config: RecoveryConfig) -> "RecoveryBudgets":
        return cls(**config.model_dump(include=set(cls.model_fields)))

    def of(self, rung: Rung) -> int | None:
        """The budget of a rung; None for the terminal rungs (always available)."""
        return getattr(self, rung.value, None) if rung not in (Rung.SAFE_STOP, Rung.HUMAN_HANDOFF) else None


class RecoveryDecision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["recovery_decision"] = "recovery_decision"
    format_version: int = FORMAT_VERSION
    failure_id: str
    rung: Rung
    reason: str
    authorized: tuple[Rung, ...]
    """The options that were open (the advisor may choose only among these)."""
    budgets_left: dict[str, int]
    escalated: bool = False
    advice: str = ""
    """What an advisor said, and whether it was taken."""

    @property
    def terminal(self) -> bool:
        return self.rung in (Rung.SAFE_STOP, Rung.HUMAN_HANDOFF)


Advisor = Callable[[Failure, Sequence[Rung], Mapping[str, object]], str]
"""A model's advice: given the failure, the authorized rungs and the C4 recovery view (core/views.py),
the name of one of the rungs."""


class RecoveryPolicy:
    def __init__(self, budgets: RecoveryBudgets = RecoveryBudgets(), *, alternatives: Mapping[str, Sequence[str]] = {},
                 advisor: Advisor | None = None) -> None:
        self.budgets = budgets
        self.alternatives = {k: tuple(v) for k, v in alternatives.items()}
        self.advisor = advisor

    def authorized(self, failure: Failure, spent: Mapping[Rung, int]) -> list[Rung]:
        """The rungs open for this failure: from its first rung up, budgets permitting, plus the terminal ones."""
        first = Rung.NAV2_BEHAVIOR if failure.behaviors else _FIRST_RUNG[failure.failure_kind]
        start = LADDER.index(first)
        open_: list[Rung] = []
        ladder = LADDER[start:]
        if failure.providers and failure.failure_kind not in _MAY_BE_MOVING and not failure.behaviors:
            # another provider can act for the same obligation: the fallback comes first (unless Nav2's own
            # behaviours answer the failure: a stuck robot is stuck whichever stack drives it)
            ladder = (Rung.SWITCH, *(r for r in ladder if r is not Rung.SWITCH))
        for rung in ladder:
            budget = self.budgets.of(rung)
            if rung is Rung.SWITCH and not self.alternatives.get(failure.skill) and not (
                    failure.providers and failure.failure_kind not in _MAY_BE_MOVING):
                continue  # nothing to switch to
            if rung is Rung.NAV2_BEHAVIOR and not failure.behaviors:
                continue  # not a failure a Nav2 behaviour answers
            if budget is None or spent.get(rung, 0) < budget:
                open_.append(rung)
        return open_

    def decide(self, failure: Failure, *, spent: Mapping[Rung, int], context: Mapping[str, object] | None = None,
               budgets: RecoveryBudgets | None = None) -> RecoveryDecision:
        """``budgets``: the mission's (from its contract) when given, else this policy's defaults;
        ``context``: the C4 view handed to the advisor."""
        if budgets is not None and budgets != self.budgets:
            return RecoveryPolicy(budgets, alternatives=self.alternatives, advisor=self.advisor).decide(
                failure, spent=spent, context=context)
        open_ = self.authorized(failure, spent)
        non_terminal = [r for r in open_ if r not in (Rung.SAFE_STOP, Rung.HUMAN_HANDOFF)]
        if non_terminal:
            rung, escalated = non_terminal[0], False
            reason = f"{failure.failure_kind.value}: {rung.value} (cheapest open rung)"
        else:
            rung = Rung.SAFE_STOP if failure.failure_kind in _MAY_BE_MOVING else Rung.HUMAN_HANDOFF
            escalated = True
            reason = f"{failure.failure_kind.value}: recovery budgets spent; {rung.value}"
        advice = ""
        if self.advisor is not None and non_terminal:
            try:
                said = str(self.advisor(failure, tuple(open_), dict(context or {}))).strip()
            except Exception as exc:  # noqa: BLE001 - advice is optional; its failure is recorded
                said, advice = "", f"advisor failed: {type(exc).__name__}: {exc}"
            if said:
                chosen = next((r for r in open_ if r.value == said), None)
                if chosen is None:
                    advice = f"advisor said {said!r}, not an authorized option; ignored"
                else:
                    rung, escalated = chosen, chosen in (Rung.SAFE_STOP, Rung.HUMAN_HANDOFF)
                    advice = f"advisor chose {said}"
                    reason = f"{failure.failure_kind.value}: {rung.value} (advised, authorized)"
        left = {}
        for r in LADDER:
            budget = self.budgets.of(r)
            if budget is not None:
                left[r.value] = max(0, budget - spent.get(r, 0) - (1 if r is rung else 0))
        return RecoveryDecision(failure_id=failure.failure_id, rung=rung, reason=reason, authorized=tuple(open_),
                                budgets_left=left, escalated=escalated, advice=advice)
