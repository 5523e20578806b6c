"""The planner's LLM backend, and a recorder/replayer for its turns.

``OpenAIPlanner`` builds every turn from the harness's context alone (one
system prompt, one user message holding the context): it keeps no history, so
the same context always produces the same request. The reply becomes a
``ModelResponse``; how a malformed reply is represented is fixed here so the
engine can answer it with its own standard errors:

* arguments that are not a JSON object become
  ``{"__malformed_arguments__": <raw text, cut to 2000 chars>}``;
* unknown tool names pass through unchanged;
* a reply cut off by the token limit (``finish_reason == "length"``) is never
  acted on: it becomes text only, prefixed with ``TRUNCATED_REPLY_MARKER``.

``RecordingPlanner`` writes each turn to a JSON-lines file and
``ReplayPlanner`` serves it back, raising ``NondeterminismError`` when the
harness asks for a turn that differs from the recording (temporal's replayer).
"""
from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from ..core.engine import MALFORMED_ARGUMENTS as MALFORMED_ARGUMENTS_KEY
from ..core.errors import NondeterminismError, UsageError
from ..core.journal import default_redactor
from ..core.ports import PlannerRequest
from ..core.records import FORMAT_VERSION, ModelResponse, ToolCall
from .client import (
    ChatClient,
    LLMBadResponse,
    LLMCall,
    LLMError,
    LLMRateLimited,
    LLMRequestRejected,
    LLMUnavailable,
)

__all__ = [
    "PLANNER_PROMPT_VERSION",
    "PLANNER_SYSTEM_PROMPT",
    "MALFORMED_ARGUMENTS_KEY",
    "MAX_MALFORMED_ARGUMENT_CHARS",
    "TRUNCATED_REPLY_MARKER",
    "VOLATILE_CONTEXT_KEYS",
    "TurnPlanner",
    "OpenAIPlanner",
    "parse_reply",
    "planner_messages",
    "canonical_context",
    "request_digest",
    "RecordedTurn",
    "ReplayFileError",
    "RecordingPlanner",
    "ReplayPlanner",
]

PLANNER_PROMPT_VERSION = "robot_harness.planner/2"

PLANNER_SYSTEM_PROMPT = f"""\
You are the planner of a mobile robot supervised by robot_harness (prompt {PLANNER_PROMPT_VERSION}).

Each turn you receive one JSON object: the goal, the turn index, a bounded view of the world, the known \
places, runtime_events that arrived since your last turn, and the results of your last tool calls. You have \
no other memory: everything you know is in that object.

Rules:
1. Act only through the tools. Text you write is recorded but changes nothing in the world.
2. A tool result reports only what the call established at once. "accepted" means a backend accepted a \
physical action, not that it happened. Physical outcomes arrive later as runtime_events (for example \
robot_action_outcome); wait for them before you rely on an outcome.
3. Start at most one physical action per turn, and none while another is still active.
4. Trust only world fields whose availability is AVAILABLE; STALE and MISSING values are not facts.
5. If a result is rejected, precondition_changed or error, read its reason and choose again; do not repeat \
the same call unchanged.
6. When you believe the goal is achieved, call propose_done with a short summary. An independent verifier \
checks the evidence against the mission's contract; your summary is not evidence. If it is rejected, a \
runtime event says what is missing.
7. Never claim success, completion or an observation in text. The harness decides the mission status.
8. You may propose the whole plan at once with propose_plan (each step: tool, arguments, intended effect, the contract obligation it serves; it may end with propose_done). It is checked against the contract before anything moves; if it is refused, read the diagnostics and propose a corrected plan. An accepted plan is run step by step by the harness; if a step fails (a plan_interrupted runtime event), plan only what is left.
9. verified_examples, when present, are plans that were verified for similar goals in earlier missions: examples to learn from, not facts about this mission.
"""

MAX_MALFORMED_ARGUMENT_CHARS = 2000
TRUNCATED_REPLY_MARKER = "[reply cut off by the token limit (finish_reason=length); not acted on] "

VOLATILE_CONTEXT_KEYS: frozenset[str] = frozenset({
    "snapshot_id", "decision_snapshot_id", "outcome_snapshot_id",
    "age_s",
    "stamp", "captured_at", "requested_at", "updated_at", "source_stamp", "last_pose_jump_at",
})
"""Keys dropped, at any depth, from a context before it is digested: snapshot ids, ages and timestamps
(they differ between a recording and its replay although the decision inputs are the same)."""


# --------------------------------------------------------------------------- the LLM planner


def planner_messages(request: PlannerRequest) -> list[dict[str, Any]]:
    """The whole prompt of one turn: the fixed system prompt and the context as compact JSON."""
    user = json.dumps(request.context, ensure_ascii=False, separators=(",", ":"))
    return [{"role": "system", "content": PLANNER_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _arguments(raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}  # servers send "" for a call without arguments
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    return {MALFORMED_ARGUMENTS_KEY: raw[:MAX_MALFORMED_ARGUMENT_CHARS]}


def parse_reply(message: dict[str, Any], finish_reason: str | None, *, model_turn_id: str,
                max_text_chars: int) -> ModelResponse:
    """A chat message (``ChatResult.message``) as a ``ModelResponse``; never raises on model output.

    Never sets ``done``: a done proposal is the ``propose_done`` tool call.
    Blank arguments mean ``{}``.
    """
    text = message.get("content") or ""
    if finish_reason == "length":
        return ModelResponse(text=TRUNCATED_REPLY_MARKER + text[:max_text_chars])
    calls = tuple(
        ToolCall(id=c.get("id") or f"{model_turn_id}-{i}", name=c["function"]["name"],
                 arguments=_arguments(c["function"].get("arguments") or ""))
        for i, c in enumerate(message.get("tool_calls") or ())
    )
    return ModelResponse(tool_calls=calls, text=text[:max_text_chars])


class TurnPlanner(Protocol):
    """A planner that also hands back the record of its model call (what the planner node journals)."""

    def turn(self, request: PlannerRequest) -> tuple[ModelResponse, LLMCall]: ...


class OpenAIPlanner:
    """The ``PlannerPort`` over a ``ChatClient``: proposes, never approves.

    ``next_turn`` returns the response and leaves the call's record in
    ``last_call`` (also after a failure, from the error's ``.call``);
    ``turn`` returns both. Client errors propagate as ``LLMError``\\ s.
    """

    name = "openai"

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.last_call: LLMCall | None = None

    def turn(self, request: PlannerRequest) -> tuple[ModelResponse, LLMCall]:
        self.last_call = None
        try:
            result = self.client.complete(planner_messages(request), tools=list(request.tools) or None)
        except LLMError as exc:
            self.last_call = exc.call
            raise
        self.last_call = result.call
        response = parse_reply(result.message, result.finish_reason, model_turn_id=request.model_turn_id,
                               max_text_chars=self.client.config.max_output_chars)
        return response, result.call

    def next_turn(self, request: PlannerRequest) -> ModelResponse:
        return self.turn(request)[0]


# --------------------------------------------------------------------------- recording and replay


def _strip_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_volatile(v) for k, v in value.items() if k not in VOLATILE_CONTEXT_KEYS}
    if isinstance(value, list | tuple):
        return [_strip_volatile(v) for v in value]
    return value


def _canonical_json(value: Any, *, indent: int | None = None) -> str:
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=separators, indent=indent, default=str)


def canonical_context(context: dict[str, Any]) -> dict[str, Any]:
    """What a recording and its replay must agree on: the decision inputs, not sensor noise.

    A replay runs the same scenario on a robot (or sim) whose poses, battery
    and timings differ slightly from the recording, and whose action/snapshot
    ids are new. What must be the same is what the model was told that could
    change its decision: the goal, the turn, the places, which world fields
    were available, the controller state, the contract frontier and committed
    obligations, the runtime events (type, state, the call they answer) and
    the last results (call, status, error code). ``VOLATILE_CONTEXT_KEYS`` are
    dropped from what remains.
    """
    world = context.get("world") or {}
    progress = context.get("progress") or {}

    def result_key(r: Any) -> dict[str, Any]:
        body = (r or {}).get("content") or {}
        if not isinstance(body, dict):
            return {"tool_call_id": (r or {}).get("tool_call_id")}
        err = body.get("error") if isinstance(body.get("error"), dict) else {}
        return {"tool_call_id": r.get("tool_call_id"), "status": body.get("status"), "error": err.get("code")}

    projected = {
        "goal": context.get("goal"),
        "turn_index": context.get("turn_index"),
        "places": sorted(context.get("places") or []),
        "world": {
            "availability": {k: (v or {}).get("status") for k, v in sorted((world.get("availability") or {}).items())},
            "controller": world.get("controller"),
            "pose_known": world.get("pose") is not None,
        },
        "progress": {
            "frontier": [o.get("id") for o in progress.get("frontier", [])],
            "committed": list(progress.get("committed", [])),
        },
        "runtime_events": [{"type": e.get("type"), "state": e.get("state"), "tool_call_id": e.get("tool_call_id")}
                           for e in context.get("runtime_events") or []],
        "last_tool_results": [result_key(r) for r in context.get("last_tool_results") or []],
    }
    return json.loads(_canonical_json(_strip_volatile(projected)))


def request_digest(request: PlannerRequest) -> str:
    """sha256 of the canonical JSON of ``{"context": canonical_context(...), "tools": request.tools}``."""
    body = {"context": canonical_context(request.context), "tools": list(request.tools)}
    return hashlib.sha256(_canonical_json(body).encode("utf-8")).hexdigest()


def _tool_names(tools: Sequence[dict[str, Any]]) -> list[str]:
    return [str((t.get("function") or {}).get("name", "")) if isinstance(t, dict) else "" for t in tools]


class RecordedTurn(BaseModel):
    """One line of a replay file: the turn the harness asked for and what the model answered (or raised)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["recorded_turn"] = "recorded_turn"
    format_version: int = FORMAT_VERSION
    turn_index: int
    mission_id: str = ""
    request_digest: str
    context: dict[str, Any]
    """``canonical_context`` of the request, redacted: shown in divergence diffs, not digested again."""
    tool_names: tuple[str, ...] = ()
    response: ModelResponse | None = None
    error: dict[str, Any] | None = None
    """``{"code", "message"}`` when the turn raised an ``LLMError`` (replayed as the same error)."""
    llm_call: LLMCall | None = None


class ReplayFileError(UsageError):
    """A replay file is missing, unreadable or not a recording in this format."""

    code = "invalid_replay_file"


class RecordingPlanner:
    """Wraps a ``TurnPlanner`` and appends every turn to a JSON-lines replay file.

    A turn that raised an ``LLMError`` is recorded too (and re-raised), so a
    replay fails the same way. The file is created at construction; an
    existing non-empty file is refused unless ``overwrite=True``.
    """

    def __init__(self, inner: TurnPlanner, path: str | Path, *, overwrite: bool = False) -> None:
        self.inner = inner
        self.path = Path(path)
        if self.path.exists() and self.path.stat().st_size and not overwrite:
            raise ReplayFileError(f"{str(self.path)!r} already holds a recording (pass overwrite=True)",
                                  path=str(self.path))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")
        self.last_call: LLMCall | None = None
        self.turns = 0

    @property
    def name(self) -> str:
        return f"recording:{getattr(self.inner, 'name', type(self.inner).__name__)}"

    def turn(self, request: PlannerRequest) -> tuple[ModelResponse, LLMCall]:
        base = {"turn_index": request.turn_index, "mission_id": request.mission_id,
                "request_digest": request_digest(request),
                "context": default_redactor(canonical_context(request.context)),
                "tool_names": _tool_names(request.tools)}
        try:
            response, call = self.inner.turn(request)
        except LLMError as exc:
            self.last_call = exc.call
            self._append(RecordedTurn(**base, error={"code": exc.code, "message": exc.message}, llm_call=exc.call))
            raise
        self.last_call = call
        self._append(RecordedTurn(**base, response=response, llm_call=call))
        return response, call

    def next_turn(self, request: PlannerRequest) -> ModelResponse:
        return self.turn(request)[0]

    def _append(self, record: RecordedTurn) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(record.model_dump_json() + "\n")
            f.flush()
        self.turns += 1


_REPLAYED_ERRORS: dict[str, type[LLMError]] = {
    cls.code: cls for cls in (LLMUnavailable, LLMRateLimited, LLMRequestRejected, LLMBadResponse)
}

_DIFF_LINES = 24


def _diff(recorded: dict[str, Any], incoming: dict[str, Any]) -> str:
    lines = list(difflib.unified_diff(
        _canonical_json(recorded, indent=1).splitlines(), _canonical_json(incoming, indent=1).splitlines(),
        fromfile="recorded", tofile="replayed", lineterm="", n=1,
    ))
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"... ({len(lines) - _DIFF_LINES} more diff lines)"]
    return "\n".join(lines)


class ReplayPlanner:
    """Serves a ``RecordingPlanner`` file turn by turn, checking each request against the recording.

    The n-th request gets the n-th recorded turn. A different turn index or
    request digest, or a request past the end of the recording, raises
    ``NondeterminismError`` naming the turn, with a short diff of the
    canonical contexts. A recorded failure is raised again as the same
    ``LLMError`` class with the recorded ``.call``.
    """

    name = "replay"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._turns = self._load(self.path)
        self._next = 0
        self.last_call: LLMCall | None = None

    @staticmethod
    def _load(path: Path) -> list[RecordedTurn]:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ReplayFileError(f"cannot read the replay file {str(path)!r}: {exc.strerror or exc}",
                                  path=str(path)) from None
        turns = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                turns.append(RecordedTurn.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                where = ".".join(str(x) for x in first["loc"]) or "(line)"
                raise ReplayFileError(f"{str(path)!r} line {number} is not a recorded turn: {where}: {first['msg']}",
                                      path=str(path), line=number) from None
        return turns

    @property
    def remaining(self) -> int:
        return len(self._turns) - self._next

    def turn(self, request: PlannerRequest) -> tuple[ModelResponse, LLMCall]:
        position = self._next
        if position >= len(self._turns):
            raise NondeterminismError(
                f"replay: turn {request.turn_index} was requested but the recording ends after "
                f"{len(self._turns)} turn(s)",
                turn_index=request.turn_index, recorded_turns=len(self._turns),
            )
        rec = self._turns[position]
        digest = request_digest(request)
        if rec.turn_index != request.turn_index or rec.request_digest != digest:
            incoming = default_redactor(canonical_context(request.context))
            diff = _diff(rec.context, incoming)
            names = _tool_names(request.tools)
            if not diff:
                diff = (f"tools: recorded {list(rec.tool_names)}, replayed {names}"
                        if rec.tool_names != tuple(names) else "the contexts agree; the tool definitions differ")
            what = ("the request differs from the recording" if rec.turn_index == request.turn_index else
                    f"the recording has turn {rec.turn_index} at position {position}")
            raise NondeterminismError(
                f"replay diverged at turn {request.turn_index}: {what}\n{diff}",
                turn_index=request.turn_index, recorded_turn_index=rec.turn_index, position=position,
                recorded_digest=rec.request_digest, digest=digest, diff=diff,
            )
        self._next += 1
        self.last_call = rec.llm_call
        if rec.error is not None or rec.response is None:
            error = rec.error or {"code": LLMBadResponse.code, "message": "recorded turn has no response"}
            cls = _REPLAYED_ERRORS.get(str(error.get("code")), LLMBadResponse)
            call = rec.llm_call or LLMCall(model="replay", base_url="replay:0")
            raise cls(str(error.get("message", "")), call=call, replayed=True)
        call = rec.llm_call or LLMCall(model="replay", base_url="replay:0")
        return rec.response, call

    def next_turn(self, request: PlannerRequest) -> ModelResponse:
        return self.turn(request)[0]
