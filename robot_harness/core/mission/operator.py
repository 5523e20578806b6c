"""Approvals and questions: the mission asks whoever the site's approval policy names, then waits.

The request is journaled first, with the policy and the digests of the
credentials that may answer (so every resolver applies the same rule), and
survives a restart. Neither the model nor its client approves its own
call: the answer comes from outside, as a journaled resolution.
"""
from __future__ import annotations

from dataclasses import dataclass

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from ..clock import Clock
from ..config import HarnessConfig
from ..execution import results
from ..interactions import (
    ApprovalPolicy,
    Interaction,
    InteractionKind,
    Resolution,
    arguments_sha256,
    interaction_id_for,
    interactions,
    request_fields,
    resolution_draft,
)
from ..records import EventType, ToolCall, ToolResult, ToolResultStatus
from ..skills import Skill, SkillRegistry
from .ledger import MissionLedger
from .state import MissionState, StopFlag

__all__ = ["OperatorDesk"]


@dataclass(eq=False, kw_only=True)
class OperatorDesk:
    config: HarnessConfig
    state: MissionState
    ledger: MissionLedger
    skills: SkillRegistry
    clock: Clock
    stop: StopFlag
    sleep: Callable[[float], None]

    def policy(self, skill: Skill) -> ApprovalPolicy | None:
        """Who may approve a call of ``skill`` (its own tags and ``interactions.skill_tags``), or None."""
        cfg = self.config.interactions
        policy = cfg.approval_policy_for(set(skill.tags) | set(cfg.skill_tags.get(skill.name, ())))
        return ApprovalPolicy(policy) if policy is not None else None

    def approve(self, turn_id: str, call: ToolCall, skill: Skill, args: BaseModel) -> ToolResult | None:
        """Wait for an approval of this exact call (by whom its policy says); None when approved, else its one result."""
        arguments = args.model_dump(mode="json", exclude_none=True)
        resolved = self._interact(turn_id, call, InteractionKind.APPROVAL, self.policy(skill) or ApprovalPolicy.OWNER,
                                  prompt=f"approve {skill.name}({json.dumps(arguments, sort_keys=True)})?",
                                  subject={"tool_call_id": call.id, "name": skill.name, "arguments": arguments,
                                           "arguments_sha256": arguments_sha256(arguments)})
        how = resolved.resolution or {}
        if how.get("resolution") == Resolution.APPROVE.value:
            self.state.approvals[call.id] = resolved.interaction_id
            return None
        if how.get("resolution") == Resolution.DENY.value:
            return results.result(call, ToolResultStatus.DENIED, {
                "reason": f"the operator denied this call ({resolved.interaction_id}); nothing was run",
                "operator": how.get("operator", ""), "answered_as": how.get("answered_as", "")})
        return results.cancelled(
            call, f"approval {how.get('resolution', 'not given')} ({resolved.interaction_id}); nothing was run"
                  + (f"; nobody could approve: it {resolved.waiting_on}" if resolved.waiting_on else ""),
            policy=resolved.policy.value)

    def ask(self, turn_id: str, call: ToolCall, args: Any) -> ToolResult:
        """The model's question to the operator; the answer (or why there is none) is the call's result."""
        skill = self.skills.get(call.name)
        resolved = self._interact(turn_id, call, InteractionKind.QUESTION, self.policy(skill) or ApprovalPolicy.OWNER,
                                  prompt=args.question, choices=tuple(args.choices))
        how = resolved.resolution or {}
        if how.get("resolution") == Resolution.ANSWER.value:
            return results.result(call, ToolResultStatus.OK, {
                "answer": how.get("answer", ""), "choice": how.get("choice", ""), "operator": how.get("operator", ""),
                "answered_as": how.get("answered_as", ""), "interaction_id": resolved.interaction_id})
        return results.cancelled(
            call, f"question {how.get('resolution', 'not answered')} ({resolved.interaction_id})"
                  + (f"; nobody could answer: it {resolved.waiting_on}" if resolved.waiting_on else ""))

    def _interact(self, turn_id: str, call: ToolCall, kind: InteractionKind, policy: ApprovalPolicy, *, prompt: str,
                  subject: dict[str, Any] | None = None, choices: tuple[str, ...] = ()) -> Interaction:
        """Ask whoever ``policy`` names, then wait (bounded) for the first resolution.

        With nobody able to answer it still waits, and its ``waiting_on`` says
        which setting is missing. A Stop dismisses it and the deadline (the
        interaction's or the mission's) expires it; either is recorded as a
        resolution, so an operator's later answer meets ``command_conflict``
        rather than silently changing the past.
        """
        s, now = self.state, self.clock.now()
        interaction_id = interaction_id_for(s.mission_id, call.id)
        timeout_s = self.config.interactions.timeout_s
        self.ledger.append_many([self.ledger.draft(
            EventType.INTERACTION_REQUESTED, model_turn_id=turn_id, tool_call_id=call.id, payload={
                "interaction_id": interaction_id, "kind": kind.value, "prompt": prompt, "call": subject,
                "choices": list(choices), "owner": s.owner,
                **request_fields(policy, s.credentials, legacy_owner_sha256=s.owner_sha,
                                 operator_token_env=self.config.interactions.operator_token_env),
                "requested_at": now, "expires_at": now + timeout_s})])
        self.ledger.stage("waiting_user")
        deadline = min(self.clock.monotonic() + timeout_s, s.deadline)
        while True:
            self.ledger.absorb()
            found = self._interaction(interaction_id)
            if found.resolution is not None:
                break
            if self.stop or self.clock.monotonic() >= deadline:
                why = Resolution.DISMISS if self.stop else Resolution.EXPIRED
                self.ledger.append_many([resolution_draft(found, why, operator="harness", now=self.clock.now())])
                continue  # re-read: if the operator answered first, that answer stands
            self.sleep(0.1)
        self.ledger.stage("planning")
        return found

    def _interaction(self, interaction_id: str) -> Interaction:
        return interactions(self.ledger.events(EventType.INTERACTION_REQUESTED,
                                                EventType.INTERACTION_RESOLVED))[interaction_id]
