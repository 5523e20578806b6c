"""Operator interactions: approval of an exact call, or a question, that a mission waits on.

An interaction is two journal events: INTERACTION_REQUESTED (what is asked,
of whom, until when) and at most one INTERACTION_RESOLVED (the first answer
wins). Everything else is derived from them, so interactions survive
restarts with the journal.

* **Exact.** An approval names the call (tool, canonical arguments and their
  sha256); approving it approves that call and nothing else.
* **Authenticated, by policy.** Who may answer is decided when the
  interaction is asked and journaled with it (``policy``, the digests of the
  credentials that may answer, and ``waiting_on``: why nobody can, if nobody
  can), so every resolver (the supervisor's service, ``robot-harness answer``,
  the dashboard) applies the same rule and an audit reads who could have
  answered:

  - ``owner`` (:attr:`ApprovalPolicy.OWNER`): the holder of the mission's
    owner token; a mission sent without one falls back to the operator token.
  - ``operator``: only the operator token or a configured approver's token,
    and **never the credential the mission's sender presented** (the owner
    token it sent the mission with, an MCP client's bearer token), whatever
    else that token also is. A mission sent with no credential has no sender
    token to exclude.

  With nobody able to answer the call still waits, until the interaction
  expires (fail closed), and ``waiting_on`` names the missing setting.
* **Salted.** Tokens are stored only as HMAC-SHA256 under a per-install key
  (:class:`TokenHasher`, the key injected by the caller; the file is
  :func:`token_key_path` of the journal, mode 0600). Records written before
  keyed hashes (a plain sha256 ``owner_sha256``) still resolve, under the
  owner policy they were asked with.
* **Recorded.** The resolution names the credential kind that answered
  (``answered_as``: ``owner``, ``operator``, ``approver:<name>``, or
  ``harness`` for expiry, Stop and restart), beside the operator name the
  answerer gave. (Not a key named ``credential``: the journal's redactor
  blanks those.)
* **Idempotent.** The same resolution twice returns the first decision; a
  different resolution of a resolved interaction is ``command_conflict``.
"""
from __future__ import annotations

import enum
import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .clock import Clock
from .config import InteractionsConfig
from .errors import RefusalError, UsageError
from .journal import Journal
from .payloads import InteractionRequested, InteractionResolved, payload_dict, payload_of
from .records import EventDraft, EventType, JournalEvent

__all__ = [
    "interaction_robot",
    "allowed_resolutions",
    "journal_token_hasher",
    "ApprovalPolicy",
    "Approver",
    "authorize",
    "CommandConflict",
    "CredentialSet",
    "HARNESS_CREDENTIAL",
    "Interaction",
    "InteractionKind",
    "InteractionNotFound",
    "MissionCredentials",
    "NotAuthorized",
    "OPERATOR_CREDENTIAL",
    "OWNER_CREDENTIAL",
    "Resolution",
    "TokenHasher",
    "TokenKeyError",
    "arguments_sha256",
    "interaction_id_for",
    "interactions",
    "load_token_key",
    "request_fields",
    "resolve",
    "token_key_path",
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


class ApprovalPolicy(str, enum.Enum):
    """Who may answer an interaction; fixed, and journaled, when it is asked."""

    OWNER = "owner"
    """The mission's owner: its owner token, or the operator token for a mission sent without one."""
    OPERATOR = "operator"
    """Only the operator token or a configured approver's, never the credential the mission's sender presented."""


OWNER_CREDENTIAL = "owner"
OPERATOR_CREDENTIAL = "operator"
APPROVER_PREFIX = "approver:"
HARNESS_CREDENTIAL = "harness"
"""The credential kind of resolutions the harness itself writes (expiry, Stop, restart)."""

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
    """The resolver's token is not one the interaction's policy accepts."""

    code = "not_authorized"


class InteractionNotFound(UsageError):
    code = "not_found"


class TokenKeyError(RefusalError):
    """The per-install token key cannot be created or read, or is not private to its owner."""

    code = "token_key"


# ============================================================================ keyed token digests

TOKEN_KEY_SUFFIX = ".token_key"
_KEY_BYTES = 32
_KEY_ID_LABEL = b"robot_harness token key id"


def token_key_path(journal_path: str | Path) -> Path:
    """Where the token key of a journal lives: beside it, ``<journal>.token_key``
    (by default ``$ROS_HOME/robot_harness/journal.sqlite3.token_key``)."""
    p = Path(journal_path).expanduser()
    return p.with_name(p.name + TOKEN_KEY_SUFFIX)


def journal_token_hasher(journal_path: str | Path) -> "TokenHasher | None":
    """The ``TokenHasher`` of the key beside the journal, or None when there is none yet (then only records
    from before keyed digests can be answered): for the surfaces that answer through the journal (the CLI's
    ``answer``, the dashboard). Raises ``TokenKeyError`` for a key it may not read or that others may."""
    path = token_key_path(journal_path)
    if not path.exists():
        return None
    return TokenHasher(load_token_key(path, create=False))


def load_token_key(path: str | Path, *, create: bool,
                   random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> bytes:
    """The key at ``path``; with ``create``, a new random one if there is none (written whole, mode 0600,
    never replaced). Raises ``TokenKeyError`` naming the path: missing (without ``create``), unreadable,
    not a key, or readable by group or others."""
    path = Path(path).expanduser()
    if create and not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, random_bytes(_KEY_BYTES).hex().encode() + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # atomic, and never over a key another process created first
            except FileExistsError:
                pass
        except OSError as exc:
            raise TokenKeyError(f"cannot create the token key {path}: {exc.strerror or exc} (errno {exc.errno})",
                                path=str(path), errno=exc.errno) from None
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    try:
        st = os.stat(path)
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise TokenKeyError(f"no token key at {path} (the supervisor creates it on its first start, beside its "
                            "journal)", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenKeyError(f"cannot read the token key {path}: {exc} (run as the user that owns the journal)",
                            path=str(path)) from None
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise TokenKeyError(f"the token key {path} is readable by others (mode {stat.S_IMODE(st.st_mode):04o}); "
                            f"chmod 600 {path}", path=str(path))
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise TokenKeyError(f"{path} does not hold a token key (expected {2 * _KEY_BYTES} hex digits)",
                            path=str(path))
    return key


class TokenHasher:
    """HMAC-SHA256 of tokens under one per-install key: what is stored and compared, never the token.

    ``key_id`` (a keyed digest of a fixed label) is journaled with the digests, so a resolver holding
    another key is told so instead of "wrong token".
    """

    scheme = "hmac-sha256"

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise UsageError("a token key needs at least 16 bytes")
        self._key = bytes(key)
        self.key_id = hmac.new(self._key, _KEY_ID_LABEL, hashlib.sha256).hexdigest()[:16]

    def digest(self, token: str) -> str:
        """The keyed digest of ``token`` (hex); "" for no token."""
        return hmac.new(self._key, token.encode(), hashlib.sha256).hexdigest() if token else ""

    def matches(self, token: str, stored: str) -> bool:
        """Whether ``token`` is the one ``stored`` was made from (constant time; no token matches nothing)."""
        return bool(token) and bool(stored) and hmac.compare_digest(self.digest(token), stored)

    def __repr__(self) -> str:
        return f"TokenHasher(key_id={self.key_id!r})"


def token_sha256(token: str) -> str:
    """The unkeyed sha256 that records written before keyed digests carry (``owner_sha256``); for reading them."""
    return hashlib.sha256(token.encode()).hexdigest() if token else ""


def arguments_sha256(arguments: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def interaction_id_for(mission_id: str, tool_call_id: str) -> str:
    """Deterministic: the same call of the same mission always asks the same interaction."""
    return "ask-" + hashlib.sha256(f"{mission_id}/{tool_call_id}".encode()).hexdigest()[:16]


# ============================================================================ who may answer


class Approver(BaseModel):
    """One credential the operator policy accepts: its journaled name and its keyed digest."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    """``operator`` (the operator token) or ``approver:<name>`` (``interactions.approvers``)."""
    hmac: str


class MissionCredentials(BaseModel):
    """Who may answer one mission's interactions, as keyed digests (never a token)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    key_id: str = ""
    owner_hmac: str = ""
    """The owner policy's credential: the owner token sent with the mission, else the operator token."""
    sender_hmac: str = ""
    """The credential the mission's sender presented (its owner token; an MCP client's bearer token);
    empty when it presented none. The operator policy never accepts it."""
    approvers: tuple[Approver, ...] = ()
    """The operator policy's credentials configured when the mission started."""
    missing: str = ""
    """Why there is no operator credential (naming the setting), or ""."""


class CredentialSet:
    """The operator credentials of one supervisor, built once from its environment; hands each mission
    its :class:`MissionCredentials`. Holds tokens only as digests."""

    def __init__(self, hasher: TokenHasher, *, operator_token: str = "",
                 operator_token_env: str = "ROBOT_HARNESS_OPERATOR_TOKEN",
                 approvers: Mapping[str, str] | None = None, unset: Iterable[str] = ()) -> None:
        self.hasher = hasher
        self.operator_token_env = operator_token_env
        self._operator = hasher.digest(operator_token)
        found = [Approver(name=OPERATOR_CREDENTIAL, hmac=self._operator)] if self._operator else []
        found += [Approver(name=APPROVER_PREFIX + name, hmac=hasher.digest(token))
                  for name, token in sorted((approvers or {}).items()) if token]
        self.approvers = tuple(found)
        unset = list(unset)
        self.missing = "" if found else (
            f"no operator credential is configured: set ${operator_token_env} in the supervisor's environment"
            + (f" (the approvers' variables {', '.join('$' + u for u in unset)} are unset too)" if unset
               else " or configure interactions.approvers"))

    @classmethod
    def from_environment(cls, config: InteractionsConfig, environ: Mapping[str, str],
                         hasher: TokenHasher) -> CredentialSet:
        """The operator token from ``config.operator_token_env`` and each approver's from its variable."""
        tokens = {name: environ.get(env, "") for name, env in config.approvers.items()}
        return cls(hasher, operator_token=environ.get(config.operator_token_env, ""),
                   operator_token_env=config.operator_token_env, approvers=tokens,
                   unset=[config.approvers[n] for n, t in tokens.items() if not t])

    @property
    def operator_configured(self) -> bool:
        return bool(self._operator)

    def is_operator(self, token: str) -> bool:
        """Whether ``token`` is the operator token (e.g. to clear a blocked resource)."""
        return self.hasher.matches(token, self._operator)

    def for_mission(self, owner_token: str) -> MissionCredentials:
        """A mission sent with ``owner_token`` (possibly ""): it owns the mission, else the operator token
        does; it is also the sender's credential, which the operator policy refuses."""
        sender = self.hasher.digest(owner_token)
        return MissionCredentials(key_id=self.hasher.key_id, owner_hmac=sender or self._operator,
                                  sender_hmac=sender, approvers=self.approvers, missing=self.missing)

    def for_program(self, sender_token: str) -> MissionCredentials:
        """A mission a program sent over a surface that authenticated it with ``sender_token`` (an MCP
        client's bearer token, possibly ""): the operator token owns it; the sender's token never approves."""
        return MissionCredentials(key_id=self.hasher.key_id, owner_hmac=self._operator,
                                  sender_hmac=self.hasher.digest(sender_token), approvers=self.approvers,
                                  missing=self.missing)


def request_fields(policy: ApprovalPolicy, credentials: MissionCredentials, *, legacy_owner_sha256: str = "",
                   operator_token_env: str = "ROBOT_HARNESS_OPERATOR_TOKEN") -> dict[str, Any]:
    """The INTERACTION_REQUESTED fields that say who may answer: the policy, the digests, and
    ``waiting_on``, why nobody can (naming the setting; it reads after "the interaction"), or "" when
    someone can."""
    fields: dict[str, Any] = {"policy": policy.value, "key_id": credentials.key_id,
                              "owner_hmac": credentials.owner_hmac, "sender_hmac": credentials.sender_hmac,
                              "approvers": [a.model_dump() for a in credentials.approvers]}
    if legacy_owner_sha256:
        fields["owner_sha256"] = legacy_owner_sha256
    waiting_on = ""
    if policy is ApprovalPolicy.OWNER and not (credentials.owner_hmac or legacy_owner_sha256):
        waiting_on = (f"has no owner credential: the mission was sent without an owner token and "
                      f"${operator_token_env} is not set for the supervisor")
    elif policy is ApprovalPolicy.OPERATOR:
        eligible = [a for a in credentials.approvers if a.hmac != credentials.sender_hmac]
        if not credentials.approvers:
            waiting_on = "needs an operator, and " + (credentials.missing or (
                f"no operator credential is configured: set ${operator_token_env} in the supervisor's environment"
                " or configure interactions.approvers"))
        elif not eligible:
            waiting_on = ("needs an operator, and every configured operator credential is the one this mission's "
                          "sender presented, which never approves its own mission: send it with a token of its "
                          "own, or configure another approver (interactions.approvers)")
    fields["waiting_on"] = waiting_on
    return fields


# ============================================================================ the record


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
    policy: ApprovalPolicy = ApprovalPolicy.OWNER
    """Who may answer (a record without one was asked under the owner rule)."""
    key_id: str = ""
    owner_hmac: str = ""
    sender_hmac: str = ""
    approvers: tuple[Approver, ...] = ()
    owner_sha256: str = ""
    """Only in records written before keyed digests: the owner token's plain sha256."""
    waiting_on: str = ""
    """Why nobody can answer (the missing setting), or ""."""
    requested_at: float = 0.0
    expires_at: float = 0.0
    resolution: dict[str, Any] | None = Field(default=None)
    """{resolution, answer, choice, operator, answered_as, resolved_at} once resolved; ``answered_as`` is
    the credential kind (``owner``, ``operator``, ``approver:<name>``, ``harness``; "" in older records)."""

    @property
    def pending(self) -> bool:
        return self.resolution is None

    def view(self) -> dict[str, Any]:
        """What an operator surface shows: no credential material, the approvers by name only."""
        out = self.model_dump(mode="json", exclude={"owner_sha256", "owner_hmac", "sender_hmac", "key_id",
                                                    "approvers"})
        out["approvers"] = [a.name for a in self.approvers] if self.policy is ApprovalPolicy.OPERATOR else []
        return out


_RESOLUTION_FIELDS = ("resolution", "answer", "choice", "operator", "answered_as", "resolved_at")


def interactions(events: Iterable[JournalEvent]) -> dict[str, Interaction]:
    """Fold INTERACTION_* events (in seq order) into interactions by id."""
    out: dict[str, Interaction] = {}
    for ev in events:
        if ev.type is EventType.INTERACTION_REQUESTED:
            asked = payload_of(ev, InteractionRequested)
            written = payload_dict(asked)
            out[asked.interaction_id] = Interaction(mission_id=ev.mission_id, **{
                k: v for k, v in written.items() if k in Interaction.model_fields and k != "mission_id"})
        elif ev.type is EventType.INTERACTION_RESOLVED:
            answered = payload_of(ev, InteractionResolved)
            known = out.get(answered.interaction_id)
            if known is not None and known.resolution is None:
                out[known.interaction_id] = known.model_copy(update={"resolution": {
                    k: getattr(answered, k) for k in _RESOLUTION_FIELDS}})
    return out


def _load(journal: Journal, interaction_id: str, mission_id: str | None = None) -> Interaction:
    found = interactions(journal.events(mission_id=mission_id, types=[EventType.INTERACTION_REQUESTED,
                                                                      EventType.INTERACTION_RESOLVED]))
    if interaction_id not in found:
        raise InteractionNotFound(f"no interaction {interaction_id}", interaction_id=interaction_id)
    return found[interaction_id]


def authorize(interaction: Interaction, token: str, hasher: TokenHasher | None) -> str:
    """The credential kind ``token`` answers ``interaction`` with (``owner``, ``operator``,
    ``approver:<name>``) under the policy it was asked with; raises ``NotAuthorized`` saying why not.

    ``hasher`` holds the token key the interaction's digests were made with; without it only records
    written before keyed digests can be answered.
    """
    iid, mid = interaction.interaction_id, interaction.mission_id
    if interaction.policy is ApprovalPolicy.OWNER and not interaction.owner_hmac:
        if not interaction.owner_sha256:
            raise NotAuthorized(f"mission {mid} has no owner credential; nobody may resolve {iid} (send missions "
                                "with an owner token, or set the operator token for the supervisor)")
        if token and hmac.compare_digest(token_sha256(token), interaction.owner_sha256):
            return OWNER_CREDENTIAL  # a record from before keyed digests
        raise NotAuthorized(f"the token presented is not mission {mid}'s owner token")
    if hasher is None:
        raise NotAuthorized(f"{iid}'s credentials are keyed digests and this resolver has no token key (it lives "
                            "beside the journal, <journal>.token_key; run as the user that owns the journal)")
    if interaction.key_id and interaction.key_id != hasher.key_id:
        raise NotAuthorized(f"{iid} was asked under another token key (key id {interaction.key_id}, this resolver "
                            f"has {hasher.key_id}): the key beside the journal was replaced, or this is another "
                            "journal's key; nobody can answer it with this key")
    if interaction.policy is ApprovalPolicy.OWNER:
        if hasher.matches(token, interaction.owner_hmac):
            return OWNER_CREDENTIAL
        raise NotAuthorized(f"the token presented is not mission {mid}'s owner token")
    if hasher.matches(token, interaction.sender_hmac):
        raise NotAuthorized(f"the token presented is the credential mission {mid} was sent with: under the operator "
                            f"policy the mission's sender never answers {iid}, whatever else its token is")
    for approver in interaction.approvers:
        if hasher.matches(token, approver.hmac):
            return approver.name
    if interaction.waiting_on:
        raise NotAuthorized(f"nobody can answer {iid} yet: it {interaction.waiting_on}")
    raise NotAuthorized(f"{iid} needs an operator: the token presented is neither the operator token nor a "
                        f"configured approver's ({', '.join(a.name for a in interaction.approvers)})")


def resolution_draft(interaction: Interaction, resolution: Resolution, *, answer: str = "", choice: str = "",
                     operator: str = "", answered_as: str | None = None, now: float) -> EventDraft:
    """The INTERACTION_RESOLVED event; ``answered_as`` (the credential kind) defaults to ``harness`` when
    the harness resolves."""
    if answered_as is None:
        answered_as = HARNESS_CREDENTIAL if operator == HARNESS_CREDENTIAL else ""
    return EventDraft(type=EventType.INTERACTION_RESOLVED, mission_id=interaction.mission_id,
                      tool_call_id=(interaction.call or {}).get("tool_call_id", ""), payload=payload_dict(InteractionResolved(
                          interaction_id=interaction.interaction_id, resolution=resolution.value, answer=answer,
                          choice=choice, operator=operator, answered_as=answered_as, resolved_at=now)))


class _AlreadyResolved(Exception):
    def __init__(self, interaction: Interaction) -> None:
        self.interaction = interaction


def resolve(journal: Journal, *, interaction_id: str, resolution: str, token: str, clock: Clock, answer: str = "",
            choice: str = "", operator: str = "", mission_id: str | None = None,
            hasher: TokenHasher | None = None) -> tuple[Interaction, bool]:
    """Record an operator's resolution; returns (the interaction as resolved, whether this call recorded it).

    ``hasher`` is the token key of the journal (see :func:`authorize`). Raises InteractionNotFound,
    NotAuthorized, UsageError (a resolution the kind does not allow, a choice not offered), CommandConflict.
    """
    try:
        wanted = Resolution(resolution)
    except ValueError:
        raise UsageError(f"resolution must be one of approve, deny, dismiss, answer; got {resolution!r}") from None
    owner_mission = _load(journal, interaction_id, mission_id).mission_id

    def build() -> list[EventDraft]:
        current = _load(journal, interaction_id, owner_mission)  # fresh on every attempt
        answered_as = authorize(current, token, hasher)
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
        return [resolution_draft(current, wanted, answer=answer, choice=choice, operator=operator,
                                 answered_as=answered_as, now=clock.now())]

    try:
        journal.transition(owner_mission, build)
    except _AlreadyResolved as same:
        return same.interaction, False
    return _load(journal, interaction_id, owner_mission), True


def interaction_robot(journal: Any, interaction_id: str) -> str:
    """The robot whose mission asked ``interaction_id`` ("" when none asked it: ``resolve`` says so). An answer
    is journaled in that robot's name, and checked with its token key (``core.journal.local_state_path``)."""
    asked = interactions(journal.events(types=[EventType.INTERACTION_REQUESTED])).get(interaction_id)
    return journal.robot_of(asked.mission_id) if asked is not None else ""
