"""A model that proposes a configuration revision (issue 17), in its own clean context.

It sees the failed missions (goal, how each ended and why, the refusals and timeouts on the record),
the keys a revision may change with their bounds and current values, and the protected keys it may
never change. It answers with one JSON object; whatever it answers becomes a candidate only through
the same checks as any other (``core.config_versions.check_overrides``: a protected key is refused,
named), is kept with the call's record in its manifest, and is released only through the same
evaluation and approval. The model proposes; it never approves.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.config import deep_merge
from ..core.config_versions import EVOLVABLE, MEASURES, PROTECTED, flatten, set_key
from ..core.errors import RefusalError
from ..core.payloads import MissionFinished, MissionStarted, ToolResultRecorded, payload_of
from ..core.records import EventType, JournalEvent
from .client import ChatClient, LLMCall

__all__ = ["PROPOSER_SYSTEM_PROMPT", "LLMConfigProposer", "ProposalUnusable", "failure_digest"]

PROPOSER_SYSTEM_PROMPT = """\
You propose one revision of a robot harness's configuration (prompt robot_harness.proposer/1).
You receive the missions that failed, the keys you may change (with their bounds and current values)
and the keys you may never change. Propose the smallest change that would let such missions succeed
without making the robot less safe. Answer with one JSON object and nothing else:
{"changes": {"<dotted.key>": <value>, ...}, "intended_effect": "<one sentence>", "target_measure": "success_rate"}
Answer {"changes": {}} when no change to these keys would help."""

_MAX_MISSIONS = 12
_MAX_TEXT = 400


class ProposalUnusable(RefusalError):
    """The model's answer is not a proposal (not JSON, not an object, no changes)."""

    code = "proposal_unusable"


def failure_digest(events: Sequence[JournalEvent], missions: Sequence[str]) -> list[dict[str, Any]]:
    """What the model is shown of each failed mission: goal, status, why, and the refusals on the record."""
    out = []
    for mid in list(missions)[:_MAX_MISSIONS]:
        evs = [e for e in events if e.mission_id == mid]
        start = next((payload_of(e, MissionStarted) for e in evs if e.type is EventType.MISSION_STARTED), None)
        end = next((payload_of(e, MissionFinished) for e in reversed(evs) if e.type is EventType.MISSION_FINISHED),
                   None)
        if start is None or end is None or end.status == "SUCCEEDED":
            continue
        refused = []
        for e in evs:
            if e.type is EventType.TOOL_RESULT_RECORDED:
                r = payload_of(e, ToolResultRecorded)
                if r.status is not None and r.status.value not in ("ok", "accepted"):
                    refused.append(f"{r.name}: {r.status.value} {json.dumps(r.content or r.error, default=str)}"
                                   [:_MAX_TEXT])
        out.append({"mission_id": mid, "goal": start.goal[:_MAX_TEXT], "status": end.status,
                    "why": end.summary[:_MAX_TEXT], "refused_calls": refused[:5]})
    return out


class LLMConfigProposer:
    """One chat call per proposal; ``calls`` keeps every call's record (kept in the candidate's manifest)."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.calls: list[LLMCall] = []

    def __call__(self, failures: Sequence[Mapping[str, Any]], current: Mapping[str, Any]) -> dict[str, Any]:
        """``{"changes", "intended_effect", "target_measure"}`` from the model; ``ProposalUnusable`` when its
        answer is none (the call is recorded either way)."""
        flat = flatten(current)
        user = json.dumps({
            "failed_missions": list(failures),
            "may_change": {k: {"min": b.lo, "max": b.hi, "integer": b.integer, "current": flat.get(k)}
                           for k, b in EVOLVABLE.items()}
            | {"places.<name>.aliases": {"places": sorted((current.get("places") or {}))},
               "recovery.nav2_behaviors.<kind>": {"behaviours": ["clear_costmaps", "back_up", "spin", "wait"]}},
            "never_change": sorted(PROTECTED),
            "target_measures": list(MEASURES),
        }, separators=(",", ":"), default=str)
        from .client import LLMError

        try:
            result = self.client.complete([{"role": "system", "content": PROPOSER_SYSTEM_PROMPT},
                                           {"role": "user", "content": user}])
        except LLMError as exc:
            self.calls.append(exc.call)
            raise
        self.calls.append(result.call)
        text = result.message.get("content") if isinstance(result.message.get("content"), str) else ""
        body = text.strip()
        if body.startswith("```"):
            body = body.strip("`").removeprefix("json").strip()
        try:
            answer = json.loads(body)
        except ValueError:
            raise ProposalUnusable(f"the model's answer is not JSON: {text[:200]!r}", answer=text[:_MAX_TEXT]) from None
        if not isinstance(answer, dict) or not isinstance(answer.get("changes"), dict):
            raise ProposalUnusable(f"the model's answer has no \"changes\" object: {text[:200]!r}",
                                   answer=text[:_MAX_TEXT])
        changes = _nest(answer["changes"])
        target = answer.get("target_measure") if answer.get("target_measure") in MEASURES else "success_rate"
        effect = answer.get("intended_effect") if isinstance(answer.get("intended_effect"), str) else ""
        return {"changes": changes, "intended_effect": effect[:_MAX_TEXT], "target_measure": target}


def _nest(changes: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` or ``{"a": {"b": 1}}`` -> ``{"a": {"b": 1}}``."""
    out: dict[str, Any] = {}
    flat = flatten(changes)
    for key, value in flat.items():
        if any(other.startswith(str(key) + ".") for other in flat):
            raise ProposalUnusable(f"the model's changes give {key} and keys under it both a value")
        out = deep_merge(out, set_key(str(key), value))
    return out
