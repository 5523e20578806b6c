"""The scripted/replay planner backend: recorded model responses, turn by turn.

Used by the demo and the tests (no API key, no network). When the script runs
out it answers as a silent model would (no tool calls, no done), so a mission
whose script ends early is never counted as success.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .errors import NondeterminismError
from .payloads import ModelResponseRecorded, PayloadReadError, payload_of
from .ports import PlannerRequest
from .records import EventType, JournalEvent, ModelResponse, ToolCall

__all__ = ["ScriptCall", "ScriptTurn", "ScriptedPlanner", "PLAN_SOURCE"]

PLAN_SOURCE = "plan"
"""``ModelResponse.meta["source"]`` of a turn the harness took from an accepted plan (no model call)."""


class ScriptCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    arguments: Any = Field(default_factory=dict)
    """Usually an object; anything else is passed through so invalid calls can be scripted."""
    id: str | None = None


class ScriptTurn(BaseModel):
    """One recorded model turn."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tool_calls: list[ScriptCall] = Field(default_factory=list)
    done: str | None = None
    text: str = ""
    delay_s: float = Field(default=0.0, ge=0.0, le=60.0)
    """Simulated model latency (applied by the planner node, not the core)."""
    expect_turn_index: int | None = None
    """Replay check: the turn index this response was recorded for."""


class ScriptedPlanner:
    """Serves scripted turns in order; ``next_turn`` is the PlannerPort method."""

    name = "scripted"

    def __init__(self, turns: Sequence[ScriptTurn]) -> None:
        self._turns = list(turns)
        self.calls = 0

    @classmethod
    def from_journal(cls, events: Sequence[JournalEvent]) -> "ScriptedPlanner":
        """Replay the model responses a journal recorded, checking turn order; raises ``PayloadReadError``
        when a recorded turn cannot be read."""
        turns: list[ScriptTurn] = []
        for ev in events:
            if ev.type is EventType.MODEL_RESPONSE_RECORDED:
                r = payload_of(ev, ModelResponseRecorded).response
                if r is None:
                    raise PayloadReadError(f"{ev.event_id}: a recorded model turn without its response cannot be "
                                           "replayed", event_id=ev.event_id)
                if r.meta.get("source") == PLAN_SOURCE:
                    continue  # the harness's own turn, from an accepted plan: no model was asked
                turns.append(ScriptTurn(
                    tool_calls=[ScriptCall(name=c.name, arguments=c.arguments, id=c.id) for c in r.tool_calls],
                    done=r.done, text=r.text, expect_turn_index=len(turns),
                ))
        return cls(turns)

    def delay_for(self, turn_index: int) -> float:
        return self._turns[turn_index].delay_s if turn_index < len(self._turns) else 0.0

    def next_turn(self, request: PlannerRequest) -> ModelResponse:
        self.calls += 1
        i = request.turn_index
        if i >= len(self._turns):
            return ModelResponse(meta={"note": "script exhausted: a silent model"})  # silent, not text-only
        turn = self._turns[i]
        if turn.expect_turn_index is not None and turn.expect_turn_index != i:
            raise NondeterminismError(
                f"replay asked for turn {i} but the recording has turn {turn.expect_turn_index} here",
                turn_index=i, recorded_turn_index=turn.expect_turn_index,
            )
        calls = tuple(
            ToolCall(id=c.id or f"call-{request.model_turn_id}-{k}", name=c.name,
                     arguments=c.arguments if isinstance(c.arguments, dict) else {"__invalid__": c.arguments})
            for k, c in enumerate(turn.tool_calls)
        )
        return ModelResponse(tool_calls=calls, done=turn.done, text=turn.text)
