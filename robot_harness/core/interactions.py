"""Operator interactions: approval of an exact call, or a question, that a mission waits on.

An interaction is two journal events: INTERACTION_REQUESTED (what is asked,
of whom, until when) and at most one INTERACTION_RESOLVED (the first answer
wins). Everything else is derived from them, so interactions survive
restarts with the journal.

* **Exact.** An approval names the call (tool, canonical arguments and their
  sha256); approving it approves that call and nothing else.
* **Authenticated.** Only the mission's owner may answer: the resolver
  presents the owner token given with the mission (only its sha256 is ever
  stored). A mission without one falls back to the operator token from the
  environment; with neither, nobody can answer (fail closed).
* **Idempotent.** The same resolution twice returns the first decision; a
  different resolution of a resolved interaction is ``command_conflict``.
"""
from __future__ import annotations

import enum
import hashlib
import hmac
import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .clock import Clock
from .errors import RefusalError, UsageError
from .journal import Journal
from .records import EventDraft, EventType, JournalEvent

__all__ = [
    "allowed_resolutions",
    "CommandConflict",
    "Interaction",
    "InteractionKind",
    "InteractionNotFound",
    "NotAuthorized",
    "Resolution",
    "arguments_sha256",
    "interaction_id_for",
    "interactions",
    "resolve",
    "token_sha256",
]


class InteractionKind(str, enum.Enum):
    APPROVAL = "approval"
    QUESTION = "question"


class Resolution(str, enum.Enum):
    APPROVE = "approve"
    DENY = "deny"
    DISMISS = "dismiss"
    ANSWER = "answer"
    EXPIRED = "expired"
    """Written by the harness when nobody answered in time."""


_ALLOWED = {
    InteractionKind.APPROVAL: {Resolution.APPROVE, Resolution.DENY, Resolution.DISMISS},
    InteractionKind.QUESTION: {Resolution.ANSWER, Resolution.DISMISS},
}


def allowed_resolutions(kind: InteractionKind) -> frozenset[Resolution]:
    """The answers an interaction of ``kind`` accepts."""
    return frozenset(_ALLOWED[kind])


class CommandConflict(RefusalError):
    """The interaction was already resolved differently; the first resolution stands."""

    code = "command_conflict"


class NotAuthorized(RefusalError):
    """The resolver did not present the mission owner's token."""

    code = "not_authorized"


class InteractionNotFound(UsageError):
    code = "not_found"


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest() if token else ""


def arguments_sha256(arguments: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def interaction_id_for(mission_id: str, tool_call_id: str) -> str:
    """Deterministic: the same call of the same mission always asks the same interaction."""
    return "ask-" + hashlib.sha256(f"{mission_id}/{tool_call_id}".encode()).hexdigest()[:16]


class Interaction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    interaction_id: str
    mission_id: str
    kind: InteractionKind
    prompt: str
    call: dict[str, Any] | None = None
    """For an approval: {tool_call_id, name, arguments, arguments_sha256}."""
    choices: tuple[str, ...] = ()
    owner: str = ""
    owner_sha256: str = ""
    requested_at: float = 0.0
    expires_at: float = 0.0
    resolution: dict[str, Any] | None = Field(default=None)
    """{resolution, answer, choice, operator, resolved_at} once resolved."""

    @property
    def pending(self) -> bool:
        return self.resolution is None

    def view(self) -> dict[str, Any]:
        """What an operator surface shows (no credential material)."""
        return self.model_dump(mode="json", exclude={"owner_sha256"})


def interactions(events: Iterable[JournalEvent]) -> dict[str, Interaction]:
    """Fold INTERACTION_* events (in seq order) into interactions by id."""
    out: dict[str, Interaction] = {}
    for ev in events:
        if ev.type is EventType.INTERACTION_REQUESTED:
            out[ev.payload["interaction_id"]] = Interaction(mission_id=ev.mission_id, **{
                k: v for k, v in ev.payload.items() if k in Interaction.model_fields and k != "mission_id"})
        elif ev.type is EventType.INTERACTION_RESOLVED:
            known = out.get(ev.payload["interaction_id"])
            if known is not None and known.resolution is None:
                out[known.interaction_id] = known.model_copy(update={"resolution": {
                    k: ev.payload.get(k, "") for k in ("resolution", "answer", "choice", "operator", "resolved_at")}})
    return out


def _load(journal: Journal, interaction_id: str, mission_id: str | None = None) -> Interaction:
    found = interactions(journal.events(mission_id=mission_id, types=[EventType.INTERACTION_REQUESTED,
                                                                      EventType.INTERACTION_RESOLVED]))
    if interaction_id not in found:
        raise InteractionNotFound(f"no interaction {interaction_id}", interaction_id=interaction_id)
    return found[interaction_id]


def resolution_draft(interaction: Interaction, resolution: Resolution, *, answer: str = "", choice: str = "",
                     operator: str = "", now: float) -> EventDraft:
    return EventDraft(type=EventType.INTERACTION_RESOLVED, mission_id=interaction.mission_id,
                      tool_call_id=(interaction.call or {}).get("tool_call_id", ""), payload={
                          "interaction_id": interaction.interaction_id, "resolution": resolution.value,
                          "answer": answer, "choice": choice, "operator": operator, "resolved_at": now})


class _AlreadyResolved(Exception):
    def __init__(self, interaction: Interaction) -> None:
        self.interaction = interaction


def resolve(journal: Journal, *, interaction_id: str, resolution: str, token: str, clock: Clock, answer: str = "",
            choice: str = "", operator: str = "", mission_id: str | None = None) -> tuple[Interaction, bool]:
    """Record an operator's resolution; returns (the interaction as resolved, whether this call recorded it).

    Raises InteractionNotFound, NotAuthorized, UsageError (a resolution the
    kind does not allow, a choice not offered), CommandConflict.
    """
    try:
        wanted = Resolution(resolution)
    except ValueError:
        raise UsageError(f"resolution must be one of approve, deny, dismiss, answer; got {resolution!r}") from None
    owner_mission = _load(journal, interaction_id, mission_id).mission_id

    def build() -> list[EventDraft]:
        current = _load(journal, interaction_id, owner_mission)  # fresh on every attempt
        if not current.owner_sha256:
            raise NotAuthorized(f"mission {current.mission_id} has no owner credential; nobody may resolve "
                                f"{interaction_id} (send missions with an owner token, or set the operator token)")
        if not hmac.compare_digest(token_sha256(token), current.owner_sha256):
            raise NotAuthorized(f"the token presented is not mission {current.mission_id}'s owner token")
        if wanted not in _ALLOWED[current.kind]:
            raise UsageError(f"a {current.kind.value} is resolved with one of "
                             f"{sorted(r.value for r in _ALLOWED[current.kind])}, not {wanted.value}")
        if wanted is Resolution.ANSWER and current.choices and choice not in current.choices:
            raise UsageError(f"choice must be one of {list(current.choices)}; got {choice!r}")
        if current.resolution is not None:
            first = current.resolution
            if (first["resolution"], first.get("answer", ""), first.get("choice", "")) == (wanted.value, answer, choice):
                raise _AlreadyResolved(current)  # the same resolution again: the first decision
            detail = first.get("answer") or first.get("choice")
            raise CommandConflict(f"{interaction_id} was already resolved: {first['resolution']}"
                                  + (f" ({detail})" if detail else ""), first=first)
        return [resolution_draft(current, wanted, answer=answer, choice=choice, operator=operator, now=clock.now())]

    try:
        journal.transition(owner_mission, build)
    except _AlreadyResolved as same:
        return same.interaction, False
    return _load(journal, interaction_id, owner_mission), True
