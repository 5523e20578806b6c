"""The journal: the ordered, durable record a mission is reconstructed from.

It is the harness's source of truth for *what happened and why* (which
snapshot a decision saw, which tool call became which robot action, how that
action ended). It is not conversational memory: nothing here is fed back to a
model except through the engine.

``Journal`` is the storage contract; ``MemoryJournal`` and ``SqliteJournal``
implement it and pass one conformance suite. What every backend guarantees:

* ``append`` is atomic: the events of one call commit together or not at all.
* ``seq`` is strictly increasing with no gaps left by failed appends; ``stamp``
  and ``event_id`` come from the injected clock and id generator only.
* Payloads are normalized to JSON and passed through the redaction hook before
  they are stored; what ``append`` returns is exactly what a later read returns.
* A failed write raises ``JournalWriteError`` (or ``StaleRevision``), writes
  nothing, and leaves the journal usable once the cause goes away (a corrupt
  file excepted: it must be restored and reopened, see below).
* Listeners see committed batches only, in commit order, and cannot break a
  write by raising.

Storage faults (``SqliteJournal``; ``test/unit/test_storage_faults.py``
produces each one for real):

* **Full disk or page limit, read-only or failing storage, a lock held past
  ``busy_timeout_ms``.** The append raises ``JournalWriteError`` naming the
  file, the SQLite error and its code (``details``: ``path``,
  ``sqlite_error``, ``sqlite_code``, ``corrupt``); SQLite rolls the batch
  back, so no event of it, and nothing in the durable index, survives. Once
  the cause goes away the same object works again: after an I/O, read-only or
  cannot-open error it replaces its connection before the next write (a
  connection that opened a read-only file stays read-only for life).
* **Corruption.** Before it connects read-write, the journal inspects an
  existing file through a read-only connection (``PRAGMA quick_check``; it
  never checkpoints or deletes the ``-wal``): a damaged file, or one that is
  not a database at all, raises ``JournalReadError`` with ``corrupt=True``
  and is left byte for byte as found; so is a file with no schema next to a
  ``-wal`` SQLite could not read, rather than becoming a fresh journal over
  it. Damage met later (``SQLITE_CORRUPT``) makes every later write on that
  object refuse. The remedy is an operator's: move the file and its
  ``-wal``/``-shm`` aside together (a stale ``-wal`` would be replayed into a
  restored copy), or restore a backup, and reopen. Corruption is found only
  where SQLite looks (page structure, as pages are read), never inside a
  payload's text.
* **What WAL checksums do.** Every WAL frame carries a checksum chained over
  all frames before it. When SQLite rebuilds its WAL index (the first
  connection after a crash), it replays frames up to the first one that fails
  its checksum or salt and ignores that frame and everything after it, as if
  those transactions never committed. A torn last write (power lost during
  the commit that was never acknowledged) is therefore harmless; garbage in
  the middle of the WAL silently drops every later commit, and garbage in
  the WAL header drops the whole WAL; SQLite cannot tell the two apart. What
  survives is always a prefix of whole batches, never half of one. Lost
  dispatch intents are why a restarted harness reconciles with the backend
  by the goal id derived from each dispatch key. While a connection is open
  SQLite reads WAL frames through its index without re-checking checksums
  (and usually from its page cache), and the last connection's close
  checkpoints them into the file, so garbage written into a live WAL shows
  up as ``SQLITE_CORRUPT`` when a damaged page is read, or at the next open.
* A commit whose fsync fails reports failure, yet its frames may be complete
  in the WAL and reappear after a crash: one more reason a failed write stops
  physical work instead of being retried blindly.
"""
from __future__ import annotations

import abc
import bisect
import collections
import contextlib
import dataclasses
import functools
import itertools
import json
import logging
import re
import sqlite3
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pydantic_core import to_jsonable_python

from .clock import Clock, IdGenerator
from .durable import INDEXED_TYPES, DispatchRecord, DurableIndex, Lease
from .errors import JournalWriteError, RefusalError, StaleRevision, UsageError
from .payloads import (
    EventPayload,
    MissionFinished,
    MissionRefused,
    MissionStarted,
    PayloadShapeError,
    WorldSnapshotCaptured,
    payload_dict,
    payload_of,
    prime,
    validate_draft_payload,
)
from .records import EventDraft, EventType, JournalEvent, WorldSnapshot
from .tape import FORMAT_VERSION as TAPE_FORMAT_VERSION, Tape, tape_from_jsonl, tape_to_jsonl

__all__ = [
    "summarize_missions",
    "connect_read_only",
    "event_from_row",
    "index_event",
    "is_database_url",
    "check_database_url",
    "local_state_path",
    "redact_url",
    "UrlParts",
    "robot_id_of",
    "CONFIG_TABLES",
    "MEMORY_TABLES",
    "EVENT_COLUMNS",
    "MIGRATIONS",
    "REDACTED",
    "Journal",
    "JournalReadError",
    "Listener",
    "MemoryJournal",
    "Redactor",
    "SqliteJournal",
    "UnknownSnapshot",
    "default_journal_path",
    "default_redactor",
    "open_journal",
]

_log = logging.getLogger(__name__)

Listener = Callable[[list[JournalEvent]], None]


Redactor = Callable[[dict[str, Any]], dict[str, Any]]

REDACTED = "***"

CONFIG_TABLES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "config_versions": ("version", ("content_hash", "parent", "created_at", "proposed_by", "proposer_hmac",
                                    "overrides", "manifest"), ("overrides", "manifest")),
    "config_evaluations": ("evaluation_id", ("version", "baseline", "passed", "evaluated_at", "report"), ("report",)),
    "config_releases": ("release_id", ("version", "action", "previous", "evaluation_id", "approved_as", "operator",
                                       "reason", "released_at"), ()),
}
"""The harness configuration's versions, their evaluations and releases (migration 0004): per table, its key,
its other columns and which of them hold JSON. The only writer is ``robot_harness/config_loop.py``."""

_MEMORY_COMMON = ("recorded_at", "recorded_by", "reason", "supersedes", "valid")
MEMORY_TABLES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "memory_episodes": ("seq", ("memory_id", "format_version", "mission_id", "goal", "signature", "contract", "plan",
                                "outcome", "verification", "evidence_ids", "provenance", "ended_at",
                                *_MEMORY_COMMON),
                        ("signature", "contract", "plan", "evidence_ids", "provenance")),
    "memory_provider_outcomes": ("seq", ("memory_id", "format_version", "mission_id", "provider", "capability",
                                         "context", "outcome", "action_id", "tool_call_id", "evidence_ids",
                                         "provenance", "observed_at", *_MEMORY_COMMON),
                                 ("context", "evidence_ids", "provenance")),
}
"""Memory of verified attempts (migration 0005), in the same shape as ``CONFIG_TABLES``: append-only rows,
``seq`` in append order. The only writer is ``core/memory.MemoryStore``."""

_ROW_TABLES = {**CONFIG_TABLES, **MEMORY_TABLES}


class UnknownSnapshot(UsageError, KeyError):
    """``get_snapshot`` was asked for a snapshot id the journal never recorded."""

    code = "unknown_snapshot"

    def __init__(self, snapshot_id: str) -> None:
        super().__init__(f"no snapshot {snapshot_id!r} in the journal", snapshot_id=snapshot_id)
        self.snapshot_id = snapshot_id

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class JournalReadError(RefusalError):
    """The journal could not be read; the engine cannot reconstruct state and must stop."""

    code = "journal_read_failed"


# --------------------------------------------------------------------------- redaction

_SECRET_WORDS = frozenset(
    {"apikey", "token", "password", "secret", "authorization", "credential", "credentials"}
)
_WORD_SPLIT = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z0-9])(?=[A-Z])")


@functools.lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    """Cached: payload keys repeat endlessly (every snapshot has the same ones)."""
    words = [w.lower() for w in _WORD_SPLIT.split(key) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(a == "api" and b == "key" for a, b in zip(words, words[1:]))


def default_redactor(payload: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``payload`` with secret-looking values replaced by ``"***"``.

    A database URL's password (``postgresql://user:PASSWORD@...``, ``password=``) is masked wherever the
    URL appears. A key is secret when one of its words (split on punctuation and camelCase,
    case-insensitive) is api_key/apikey, token, password, secret, authorization,
    credential or credentials: ``OPENAI_API_KEY``, ``access_token``,
    ``Authorization`` and ``clientSecret`` are redacted; ``prompt_tokens`` and
    ``max_tokens`` (model usage counters) are not. Keys are matched at any depth
    of nested dicts and lists. Secrets inside free text under an innocent key are
    not detected; callers must not put them there.
    """

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (REDACTED if isinstance(k, str) and _is_secret_key(k) else walk(v))
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        if isinstance(value, str) and value.startswith(("postgresql://", "postgres://")):
            return redact_url(value)  # a database URL's password (journal.url in a journaled config)
        return value

    return walk(payload)


# --------------------------------------------------------------------------- schema

MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "0001_events",
        (
            """CREATE TABLE events (
                seq INTEGER PRIMARY KEY,
                event_id TEXT NOT NULL UNIQUE,
                format_version INTEGER NOT NULL,
                type TEXT NOT NULL,
                stamp REAL NOT NULL,
                mission_id TEXT NOT NULL DEFAULT '',
                model_turn_id TEXT NOT NULL DEFAULT '',
                tool_call_id TEXT NOT NULL DEFAULT '',
                robot_action_id TEXT NOT NULL DEFAULT '',
                snapshot_id TEXT NOT NULL DEFAULT '',
                payload TEXT NOT NULL /* JSON */
            )""",
            "CREATE INDEX events_mission_id ON events (mission_id)",
            "CREATE INDEX events_type ON events (type)",
        ),
    ),
    (
        "0002_snapshots",
        (
            """CREATE TABLE snapshots (
                snapshot_id TEXT PRIMARY KEY,
                seq INTEGER NOT NULL REFERENCES events (seq),
                mission_id TEXT NOT NULL DEFAULT '',
                reason TEXT NOT NULL DEFAULT '',
                captured_at REAL NOT NULL,
                json TEXT NOT NULL /* WorldSnapshot */
            )""",
            "CREATE INDEX snapshots_mission_id ON snapshots (mission_id)",
        ),
    ),
    (
        "0003_decision_tapes",
        (
            """CREATE TABLE decision_tapes (
                mission_id TEXT PRIMARY KEY,
                format_version INTEGER NOT NULL,
                recorded_at REAL NOT NULL,
                readings INTEGER NOT NULL,
                ports TEXT NOT NULL /* JSON: {"ports": each taped port's methods and attributes, "meta": {...}}, as in the blob's header */,
                entries BLOB NOT NULL /* zlib: the tape file (tape.tape_to_jsonl) */
            )""",
        ),
    ),
    (
        "0004_config_versions",
        (
            """CREATE TABLE config_versions (
                version INTEGER PRIMARY KEY,
                content_hash TEXT NOT NULL /* sha256 of the overrides' canonical JSON */,
                parent INTEGER,
                created_at REAL NOT NULL,
                proposed_by TEXT NOT NULL DEFAULT '',
                proposer_hmac TEXT NOT NULL DEFAULT '' /* keyed digest of the proposer's credential, or '' */,
                overrides TEXT NOT NULL /* JSON: the changes over the site's harness configuration file */,
                manifest TEXT NOT NULL /* JSON: config_versions.Manifest */
            )""",
            """CREATE TABLE config_evaluations (
                evaluation_id INTEGER PRIMARY KEY AUTOINCREMENT,
                version INTEGER NOT NULL REFERENCES config_versions (version),
                baseline INTEGER NOT NULL REFERENCES config_versions (version),
                passed INTEGER NOT NULL,
                evaluated_at REAL NOT NULL,
                report TEXT NOT NULL /* JSON */
            )""",
            """CREATE TABLE config_releases (
                release_id INTEGER PRIMARY KEY AUTOINCREMENT,
                version INTEGER NOT NULL REFERENCES config_versions (version),
                action TEXT NOT NULL /* initial | release | rollback */,
                previous INTEGER,
                evaluation_id INTEGER,
                approved_as TEXT NOT NULL DEFAULT '' /* the credential kind: operator, approver:<name> */,
                operator TEXT NOT NULL DEFAULT '',
                reason TEXT NOT NULL DEFAULT '',
                released_at REAL NOT NULL
            )""",
        ),
    ),
    (
        "0005_memory",
        (
            """CREATE TABLE memory_episodes (
                seq INTEGER PRIMARY KEY,
                memory_id TEXT NOT NULL UNIQUE /* ep-...: deterministic from the mission */,
                format_version INTEGER NOT NULL,
                mission_id TEXT NOT NULL,
                goal TEXT NOT NULL DEFAULT '',
                signature TEXT NOT NULL /* JSON: the contract's obligation kinds, places and recipients */,
                contract TEXT NOT NULL /* JSON: the frozen contract, or {} */,
                plan TEXT NOT NULL /* JSON: the physical and capability calls that ran, in order */,
                outcome TEXT NOT NULL /* the mission's final status */,
                verification TEXT NOT NULL /* verified | failed | unknown */,
                evidence_ids TEXT NOT NULL /* JSON */,
                provenance TEXT NOT NULL /* JSON: journal event ids, config version */,
                ended_at REAL,
                recorded_at REAL NOT NULL,
                recorded_by TEXT NOT NULL DEFAULT '',
                reason TEXT NOT NULL DEFAULT '',
                supersedes TEXT NOT NULL DEFAULT '' /* the memory_id this row replaces (or forgets), or '' */,
                valid INTEGER NOT NULL /* 0: a forgetting */
            )""",
            "CREATE INDEX memory_episodes_mission_id ON memory_episodes (mission_id)",
            """CREATE TABLE memory_provider_outcomes (
                seq INTEGER PRIMARY KEY,
                memory_id TEXT NOT NULL UNIQUE /* po-...: deterministic from the mission and the call */,
                format_version INTEGER NOT NULL,
                mission_id TEXT NOT NULL,
                provider TEXT NOT NULL,
                capability TEXT NOT NULL /* navigation | camera | speech | messaging */,
                context TEXT NOT NULL /* JSON: {"skill", "place"?} */,
                outcome TEXT NOT NULL /* succeeded (verified) | failed | unknown */,
                action_id TEXT NOT NULL DEFAULT '',
                tool_call_id TEXT NOT NULL DEFAULT '',
                evidence_ids TEXT NOT NULL /* JSON */,
                provenance TEXT NOT NULL /* JSON: journal event ids */,
                observed_at REAL,
                recorded_at REAL NOT NULL,
                recorded_by TEXT NOT NULL DEFAULT '',
                reason TEXT NOT NULL DEFAULT '',
                supersedes TEXT NOT NULL DEFAULT '',
                valid INTEGER NOT NULL
            )""",
            "CREATE INDEX memory_provider_outcomes_mission_id ON memory_provider_outcomes (mission_id)",
            "CREATE INDEX memory_provider_outcomes_capability ON memory_provider_outcomes (capability, provider)",
        ),
    ),
    (
        "0006_robot_id",
        (
            "ALTER TABLE events ADD COLUMN robot_id TEXT NOT NULL DEFAULT '' /* the writing robot (namespace) */",
            "CREATE INDEX events_robot_id ON events (robot_id, seq)",
        ),
    ),
)
"""Named schema migrations, applied in order, each recorded in ``migrations``
in the same transaction as its change. Append only: never edit a shipped one."""

EVENT_COLUMNS = (
    "seq",
    "event_id",
    "format_version",
    "type",
    "stamp",
    "mission_id",
    "model_turn_id",
    "tool_call_id",
    "robot_action_id",
    "snapshot_id",
    "payload",
    "robot_id",
)
"""Columns of the ``events`` table, in order (also the CSV export's columns)."""
_COLUMNS = EVENT_COLUMNS


ROBOT_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(/[A-Za-z][A-Za-z0-9_]*)*$")
"""A robot id: a ROS namespace without its leading and trailing slashes (``robot1``, ``site_a/robot1``)."""


def robot_id_of(namespace: str | None) -> str:
    """The robot id of a ROS namespace (``/robot1`` -> ``robot1``; "" or ``/`` -> ""); a ``UsageError``
    for anything that is not a namespace."""
    text = (namespace or "").strip().strip("/")
    if text and not ROBOT_ID.match(text):
        raise UsageError(f"robot id {namespace!r} is not a ROS namespace (letters, digits, '_', segments by '/',"
                         " each starting with a letter)", robot_id=namespace)
    return text


def index_event(seq: int, type_: str, mission_id: str, tool_call_id: str, action_id: str, payload: str,
                robot_id: str) -> JournalEvent:
    """The part of an ``events`` row the durable index folds (a backend's catch-up query: seq, type,
    mission id, tool call id, action id, the payload of an ``INDEXED_TYPES`` event or '{}', robot id)."""
    return JournalEvent.model_construct(seq=seq, type=EventType(type_), mission_id=mission_id,
                                        tool_call_id=tool_call_id, robot_action_id=action_id,
                                        payload=json.loads(payload), robot_id=robot_id)


def event_from_row(row: Sequence[Any]) -> JournalEvent:
    """One ``events`` row (``EVENT_COLUMNS``, in order; an old reader's row may lack the trailing
    ``robot_id``) as its record; raises ValueError/ValidationError."""
    data = dict(zip(EVENT_COLUMNS, row))
    data["payload"] = json.loads(data["payload"])
    return JournalEvent.model_validate(data)


def connect_read_only(path: str | Path, *, timeout_s: float, **kwargs: Any) -> sqlite3.Connection:
    """A connection that can never write, checkpoint or create the journal (``mode=ro``), for
    readers beside a running supervisor (WAL: they never block its writes)."""
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=timeout_s,
                           check_same_thread=False, **kwargs)
_MISSION_MARKS = (EventType.MISSION_STARTED, EventType.MISSION_FINISHED, EventType.MISSION_REFUSED)


# --------------------------------------------------------------------------- shared core


@dataclasses.dataclass(frozen=True)
class _Prepared:
    """A draft whose payload is already normalized, redacted and serialized."""

    draft: EventDraft
    payload: dict[str, Any]
    payload_json: str
    snapshot: WorldSnapshot | None
    snapshot_json: str
    typed: EventPayload
    """The payload as its model (validated on the way in; primes the appended event's cache)."""


@dataclasses.dataclass(frozen=True)
class _SnapshotRow:
    snapshot_id: str
    seq: int
    mission_id: str
    reason: str
    captured_at: float
    json: str


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _dumps_nan(value: Any) -> str:
    """For decision tapes: a reading is kept exactly, a non-finite float included."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


def _stale(expected: int, actual: int) -> StaleRevision:
    err = StaleRevision(
        f"journal is at seq {actual}, caller expected {expected}; re-read and retry",
        expected=expected,
        actual=actual,
    )
    err.expected = expected  # type: ignore[attr-defined]
    err.actual = actual  # type: ignore[attr-defined]
    return err


REFUSED = "REFUSED"
"""``missions()``'s status for a request that was refused and never admitted (MISSION_REFUSED only)."""


def summarize_missions(
    spans: Iterable[tuple[Any, ...]], marks: Iterable[JournalEvent]
) -> list[dict[str, Any]]:
    """One summary per mission, ordered by first seq; unknown fields are None. A span is (mission id,
    first seq, last seq, event count[, robot id])."""
    out: dict[str, dict[str, Any]] = {}
    for mission_id, first, last, count, *robot in spans:
        out[mission_id] = {
            "mission_id": mission_id,
            "robot_id": robot[0] if robot else "",
            "first_seq": first,
            "last_seq": last,
            "event_count": count,
            "started_at": None,
            "goal": None,
            "finished_at": None,
            "status": None,
            "summary": None,
        }
    for ev in marks:
        row = out.get(ev.mission_id)
        if row is None:
            continue
        if ev.type is EventType.MISSION_STARTED and row["started_at"] is None:
            row["started_at"] = ev.stamp
            row["goal"] = _marked(ev, MissionStarted, "goal")
            if row["status"] == REFUSED:  # refused once, admitted when sent again
                row["status"] = row["summary"] = row["finished_at"] = None
        elif ev.type is EventType.MISSION_REFUSED and row["started_at"] is None:
            row["finished_at"] = ev.stamp
            row["status"] = REFUSED
            row["summary"] = _marked(ev, MissionRefused, "reason")
            row["goal"] = _marked(ev, MissionRefused, "goal")
        elif ev.type is EventType.MISSION_FINISHED:
            row["finished_at"] = ev.stamp
            row["status"] = _marked(ev, MissionFinished, "status")
            row["summary"] = _marked(ev, MissionFinished, "summary")
    return sorted(out.values(), key=lambda r: r["first_seq"])


def _marked(ev: JournalEvent, model: type[Any], field: str) -> Any:
    """A mission mark's field as written, or None when the writer did not write it (or it does not read)."""
    try:
        typed = payload_of(ev, model)
    except RefusalError:
        return None
    return getattr(typed, field) if field in typed.model_fields_set else None


class Journal(abc.ABC):
    """The storage contract every journal backend satisfies.

    ``append`` is a template method: normalization, redaction, stamping and
    listener delivery live here; a backend only provides ``_commit`` (store a
    batch atomically under its lock) and the reads. Backends are thread-safe:
    the ROS supervisor calls in from executor threads.
    """

    def __init__(self, *, clock: Clock, ids: IdGenerator, redact: Redactor = default_redactor,
                 robot_id: str = "") -> None:
        self._robot_id = robot_id_of(robot_id)
        self._clock = clock
        self._ids = ids
        self._redact = redact
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._pending: collections.deque[list[JournalEvent]] = collections.deque()
        self._delivery_lock = threading.Lock()
        self._delivering = False
        self._index = DurableIndex()

    @property
    def robot_id(self) -> str:
        """The robot this journal object writes for: every event it commits carries it ("" for a harness
        not under a namespace). Many robots' journal objects may share one database."""
        return self._robot_id

    # -- lifecycle ---------------------------------------------------------

    @abc.abstractmethod
    def setup(self) -> None:
        """Create or upgrade the schema. Safe to call any number of times."""

    @abc.abstractmethod
    def applied_migrations(self) -> list[str]:
        """Names of the migrations applied to this journal, in order."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release storage. Idempotent; any later call raises ``UsageError``."""

    def __enter__(self) -> "Journal":
        self.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------

    def append(
        self, drafts: Sequence[EventDraft], *, expected_last_seq: int | None = None,
        expected_revision: int | None = None,
    ) -> list[JournalEvent]:
        """Commit ``drafts`` as consecutive events, all or none, and return them.

        With ``expected_last_seq``, the append is a compare-and-set on the whole
        journal; with ``expected_revision``, on the batch's mission (all drafts
        name one mission; see ``durable.TRANSITION_TYPES``). Either way a
        mismatch raises ``StaleRevision`` (``expected``/``actual``) and nothing
        is written. Every batch is also checked against the durable index:
        a repeated dispatch key raises ``DuplicateDispatch``, a lease held by
        another owner ``LeaseConflict``, a stale action transition
        ``StaleRevision``. Storage failures raise ``JournalWriteError``. All
        events of one call share one ``clock.now()`` stamp. Listeners run after
        the commit, never before.
        """
        if isinstance(drafts, EventDraft):
            raise UsageError("append() takes a sequence of EventDraft records; wrap a single one in a list")
        prepared = [self._prepare(d) for d in drafts]
        committed = self._commit(prepared, expected_last_seq, expected_revision)
        self._deliver()
        return committed

    # -- durable state (derived from events; see durable.py) ------------------

    def revision(self, mission_id: str) -> int:
        """The mission's revision: how many state-changing events it has."""
        with self._indexed() as index:
            return index.revision(mission_id)

    def transition(self, mission_id: str, build: Callable[[], Sequence[EventDraft]], *,
                   attempts: int = 8) -> list[JournalEvent]:
        """A revision-checked transition of ``mission_id`` by a writer other than its runner.

        ``build`` reads whatever it needs and returns the drafts (or raises to
        give up); it runs again on fresh state whenever another writer moved
        the mission between the read and the commit. After ``attempts`` stale
        reads the last ``StaleRevision`` propagates.
        """
        for attempt in range(attempts):
            revision = self.revision(mission_id)
            drafts = build()
            try:
                return self.append(drafts, expected_revision=revision)
            except StaleRevision as exc:
                if "mission_id" not in exc.details or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def leases(self) -> dict[str, Lease]:
        """Resource leases in force (held or blocked) that this journal's robot sees, by resource: its own
        resources' and the site's (whoever holds them; ``Lease.robot_id`` says who)."""
        with self._indexed() as index:
            return index.leases_of(self._robot_id)

    def all_leases(self) -> dict[str, Lease]:
        """Every lease in force in the database, every robot's, by ``Lease.key`` (``robot1/base``,
        ``elevator_1``): the fleet's view, for operators and the dashboard."""
        with self._indexed() as index:
            return dict(index.leases)

    def dispatch(self, key: str) -> DispatchRecord | None:
        """The execution record of a dispatch key, if one was ever recorded."""
        with self._indexed() as index:
            return index.dispatches.get(key)

    def dispatch_for_action(self, action_id: str) -> DispatchRecord | None:
        with self._indexed() as index:
            return index.dispatch_for_action(action_id)

    def dispatches(self, mission_id: str) -> list[DispatchRecord]:
        """A mission's execution records, in dispatch order."""
        with self._indexed() as index:
            return sorted((r for r in index.dispatches.values() if r.mission_id == mission_id), key=lambda r: r.seq)

    def robot_of(self, mission_id: str) -> str:
        """The robot that started ``mission_id`` ("" for a robot without an id, or a mission never started)."""
        with self._indexed() as index:
            return index.mission_robot.get(mission_id, "")

    def open_missions(self, *, robot_id: str | None = None, all_robots: bool = False) -> list[str]:
        """Missions started and never finished (in start order): candidates for reconciliation. Only this
        journal's robot's (or ``robot_id``'s) unless ``all_robots``: a harness reconciles its own robot's
        missions, never another robot's."""
        robot = self._robot_id if robot_id is None else robot_id_of(robot_id)
        with self._indexed() as index:
            return sorted((m for m in index.open_missions if all_robots or index.mission_robot.get(m, "") == robot),
                          key=index.open_missions.__getitem__)

    @abc.abstractmethod
    def _indexed(self) -> contextlib.AbstractContextManager[DurableIndex]:
        """The durable index, caught up with every committed event, held under the lock."""

    def _prepare(self, draft: EventDraft) -> _Prepared:
        if not isinstance(draft, EventDraft):
            raise UsageError(f"append() takes EventDraft records, got {type(draft).__name__}")
        # A model is dumped through the payloads' adapter (another type's model is refused here); a plain
        # dict is stored as given once it validates below.
        source = payload_dict(validate_draft_payload(draft.type, draft.payload)) \
            if isinstance(draft.payload, EventPayload) else draft.payload
        try:
            plain = to_jsonable_python(source, inf_nan_mode="null")
            redacted = self._redact(plain)
            if not isinstance(redacted, dict):
                raise TypeError(f"redactor returned {type(redacted).__name__}, not dict")
            payload_json = _dumps(redacted)
        except Exception as exc:  # unserializable payload or a broken redactor: nothing is stored
            raise JournalWriteError(
                f"{draft.type.value} payload cannot be stored as JSON: {exc}",
                event_type=draft.type.value,
                sqlite_error=None,
            ) from exc
        payload: dict[str, Any] = json.loads(payload_json)
        typed = validate_draft_payload(draft.type, payload)  # what readers will read: a wrong shape is never stored
        snapshot: WorldSnapshot | None = None
        snapshot_json = ""
        if isinstance(typed, WorldSnapshotCaptured):
            snapshot = typed.snapshot
            if snapshot is None:
                raise PayloadShapeError("WORLD_SNAPSHOT_CAPTURED needs its snapshot: WorldSnapshotCaptured(snapshot=...)",
                                        type=draft.type.value)
            if draft.snapshot_id and draft.snapshot_id != snapshot.snapshot_id:
                raise UsageError(
                    "event snapshot_id disagrees with the snapshot it carries",
                    event_snapshot_id=draft.snapshot_id,
                    snapshot_id=snapshot.snapshot_id,
                )
            snapshot_json = snapshot.model_dump_json()
        return _Prepared(draft, payload, payload_json, snapshot, snapshot_json, typed)

    def _materialize(
        self, prepared: Sequence[_Prepared], last_seq: int, expected_last_seq: int | None,
        expected_revision: int | None,
    ) -> tuple[list[JournalEvent], list[_SnapshotRow]]:
        """Check a batch against the (caught-up) index, then give it its seqs, ids
        and stamp. Called by ``_commit`` under the lock."""
        if expected_last_seq is not None and expected_last_seq != last_seq:
            raise _stale(expected_last_seq, last_seq)
        self._index.validate([p.draft for p in prepared], expected_revision=expected_revision,
                             robot_id=self._robot_id)
        if not prepared:
            return [], []
        stamp = self._clock.now()
        events: list[JournalEvent] = []
        snaps: list[_SnapshotRow] = []
        for i, p in enumerate(prepared, start=1):
            d = p.draft
            ev = JournalEvent(
                seq=last_seq + i,
                event_id=self._ids.new("ev"),
                type=d.type,
                stamp=stamp,
                mission_id=d.mission_id,
                model_turn_id=d.model_turn_id,
                tool_call_id=d.tool_call_id,
                robot_action_id=d.robot_action_id,
                snapshot_id=d.snapshot_id or (p.snapshot.snapshot_id if p.snapshot else ""),
                payload=p.payload,
                robot_id=self._robot_id,
            )
            prime(ev, p.typed)
            events.append(ev)
            if p.snapshot is not None:
                snaps.append(
                    _SnapshotRow(
                        snapshot_id=p.snapshot.snapshot_id,
                        seq=ev.seq,
                        mission_id=p.snapshot.mission_id or d.mission_id,
                        reason=p.snapshot.reason,
                        captured_at=p.snapshot.captured_at,
                        json=p.snapshot_json,
                    )
                )
        return events, snaps

    @abc.abstractmethod
    def _commit(
        self, prepared: Sequence[_Prepared], expected_last_seq: int | None, expected_revision: int | None
    ) -> list[JournalEvent]:
        """Atomically store a batch: under the lock, read the last seq, call
        ``_materialize``, persist, and, once durable and still under the lock,
        fold the events into the index and hand them to ``_enqueue`` so
        listeners see commit order."""

    # -- listeners ---------------------------------------------------------

    def subscribe(self, callback: Listener) -> Callable[[], None]:
        """Call ``callback(events)`` after every committed append; returns an unsubscribe function.

        Batches are delivered in commit order. A listener may read or append to
        the journal. Exceptions it raises are logged and swallowed: a broken
        listener never fails a write that already committed.
        """
        with self._delivery_lock:
            self._listeners.append(callback)

        def unsubscribe() -> None:
            with self._delivery_lock:
                with contextlib.suppress(ValueError):
                    self._listeners.remove(callback)

        return unsubscribe

    def _enqueue(self, events: list[JournalEvent]) -> None:
        if events:
            with self._delivery_lock:
                self._pending.append(events)

    def _deliver(self) -> None:
        # One thread drains at a time, so batches reach listeners in commit
        # order even when appends race; a listener that appends just queues.
        with self._delivery_lock:
            if self._delivering:
                return
            self._delivering = True
        while True:
            with self._delivery_lock:
                if not self._pending:
                    self._delivering = False
                    return
                batch = self._pending.popleft()
                listeners = tuple(self._listeners)
            for listener in listeners:
                try:
                    listener(list(batch))
                except Exception:
                    _log.exception("journal listener %r raised; ignored", listener)
                except BaseException:
                    with self._delivery_lock:
                        self._delivering = False
                    raise

    # -- reading -----------------------------------------------------------

    def events(
        self,
        *,
        mission_id: str | None = None,
        after_seq: int = 0,
        types: Iterable[EventType] | None = None,
        limit: int | None = None,
        robot_id: str | None = None,
    ) -> list[JournalEvent]:
        """Events with ``seq > after_seq``, ordered by seq, optionally filtered (by mission, by type, by the
        robot that wrote them, at most ``limit``). A negative limit, an unknown type or a robot id that is
        not a namespace is a ``UsageError``."""
        wanted = self._check_query(types, limit)
        robot = None if robot_id is None else robot_id_of(robot_id)
        if wanted == () or limit == 0:
            return []
        return self._events(mission_id=mission_id, after_seq=after_seq, wanted=wanted, limit=limit, robot_id=robot)

    @abc.abstractmethod
    def _events(self, *, mission_id: str | None, after_seq: int, wanted: tuple[EventType, ...] | None,
                limit: int | None, robot_id: str | None = None) -> list[JournalEvent]:
        """The backend's query behind ``events``, with the arguments checked."""

    @abc.abstractmethod
    def last_seq(self) -> int:
        """The highest committed seq (0 for an empty journal)."""

    @abc.abstractmethod
    def get_snapshot(self, snapshot_id: str) -> WorldSnapshot:
        """The snapshot recorded by a WORLD_SNAPSHOT_CAPTURED event; ``UnknownSnapshot`` if none."""

    def put_tape(self, mission_id: str, tape: Tape) -> None:
        """Keep ``tape`` (the readings the mission's decisions took) beside its events, once per
        mission; a second tape for one mission is a ``JournalWriteError``."""
        if not mission_id:
            raise UsageError("a decision tape belongs to a mission: mission_id is empty")
        # the blob is the tape file itself (tape_to_jsonl: header, then readings), zlib'd; the header is
        # also in ``ports`` as plain JSON, for a reader with sqlite-utils
        self._put_tape(mission_id, zlib.compress(tape_to_jsonl(tape).encode(), 6), len(tape),
                       _dumps_nan({"ports": tape.ports, "meta": tape.meta}))

    def get_tape(self, mission_id: str) -> Tape | None:
        """The mission's decision tape, or None when it was not taped."""
        row = self._get_tape(mission_id)
        return None if row is None else tape_from_jsonl(zlib.decompress(row[0]).decode())

    @abc.abstractmethod
    def _put_tape(self, mission_id: str, blob: bytes, readings: int, ports_json: str) -> None: ...

    @abc.abstractmethod
    def _get_tape(self, mission_id: str) -> tuple[bytes, str] | None: ...

    def add_config_row(self, table: str, row: dict[str, Any], *, expected_last_key: int | None = None) -> int:
        """Append one row to a configuration table (``CONFIG_TABLES``) and return its key (a version is
        the next number). ``expected_last_key``: the table's highest key the writer read, or a
        ``StaleRevision`` (another writer released or rolled back in between); -1 for an empty table."""
        return self._add_table_row(CONFIG_TABLES, "configuration", table, row, expected_last_key)

    def config_rows(self, table: str) -> list[dict[str, Any]]:
        """A configuration table's rows in key order, JSON columns decoded."""
        return self._table_rows(CONFIG_TABLES, "configuration", table)

    def add_memory_row(self, table: str, row: dict[str, Any], *, expected_last_key: int | None = None) -> int:
        """Append one row to a memory table (``MEMORY_TABLES``) and return its ``seq``; as ``add_config_row``."""
        return self._add_table_row(MEMORY_TABLES, "memory", table, row, expected_last_key)

    def memory_rows(self, table: str, *, mission_id: str | None = None) -> list[dict[str, Any]]:
        """A memory table's rows in append order, JSON columns decoded; ``mission_id``: only that mission's
        rows (an indexed read)."""
        return self._table_rows(MEMORY_TABLES, "memory", table,
                                where=None if mission_id is None else ("mission_id", mission_id))

    def memory_last_seq(self, table: str) -> int:
        """The ``seq`` of a memory table's last row, -1 when it has none: what ``add_memory_row`` compares
        ``expected_last_key`` with, without reading the rows."""
        key = self._row_table(MEMORY_TABLES, "memory", table)[0]
        return self._last_key(table, key)

    def _add_table_row(self, tables: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]], what: str, table: str,
                 row: dict[str, Any], expected_last_key: int | None) -> int:
        key, columns, json_columns = self._row_table(tables, what, table)
        unknown = set(row) - set(columns)
        if unknown:
            raise UsageError(f"{table} has no column(s) {sorted(unknown)}")
        values = {c: (json.dumps(row[c], sort_keys=True, allow_nan=False) if c in json_columns else row[c])
                  for c in columns if c in row}
        return self._insert_row(table, key, values, expected_last_key)

    def _table_rows(self, tables: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]], what: str,
              table: str, where: tuple[str, Any] | None = None) -> list[dict[str, Any]]:
        key, columns, json_columns = self._row_table(tables, what, table)
        rows = self._select_rows(table, key, (key, *columns), where)
        return [{c: (json.loads(v) if c in json_columns and v is not None else v) for c, v in r.items()} for r in rows]

    @staticmethod
    def _row_table(tables: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]], what: str,
                   table: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        if table not in tables:
            raise UsageError(f"no {what} table {table!r}; known: {sorted(tables)}")
        return tables[table]

    @abc.abstractmethod
    def _insert_row(self, table: str, key: str, values: dict[str, Any], expected_last_key: int | None) -> int:
        """Append ``values`` to ``table`` (a ``CONFIG_TABLES`` or ``MEMORY_TABLES`` name) under the next key."""

    @abc.abstractmethod
    def _select_rows(self, table: str, key: str, columns: tuple[str, ...],
                     where: tuple[str, Any] | None = None) -> list[dict[str, Any]]:
        """``columns`` of ``table``'s rows in key order; ``where`` (a column of ``columns``, a value): only
        the rows whose column equals the value."""

    @abc.abstractmethod
    def _last_key(self, table: str, key: str) -> int:
        """``table``'s highest key, -1 when it has no row."""

    @abc.abstractmethod
    def missions(self, *, robot_id: str | None = None) -> list[dict[str, Any]]:
        """One dict per mission id, ordered by first seq: ``mission_id``, ``robot_id`` (of the mission's
        first event), ``first_seq``, ``last_seq``, ``event_count``, ``started_at``, ``goal``
        (from MISSION_STARTED), ``finished_at``, ``status``, ``summary`` (from
        MISSION_FINISHED); None where unknown. ``robot_id``: only that robot's missions."""

    @staticmethod
    def _check_query(types: Iterable[EventType] | None, limit: int | None) -> tuple[EventType, ...] | None:
        if limit is not None and limit < 0:
            raise UsageError("limit must be >= 0", limit=limit)
        if types is None:
            return None
        try:
            return tuple(EventType(t) for t in types)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc


# --------------------------------------------------------------------------- memory


class MemoryJournal(Journal):
    """An in-process journal with the same contract as ``SqliteJournal``.

    For tests and dry runs: it is lost with the process. Payloads are kept as
    JSON text so readers get fresh copies, exactly as from SQLite.
    """

    def __init__(self, *, clock: Clock, ids: IdGenerator, redact: Redactor = default_redactor,
                 robot_id: str = "") -> None:
        super().__init__(clock=clock, ids=ids, redact=redact, robot_id=robot_id)
        self._rows: list[tuple[JournalEvent, str]] = []
        self._event_ids: set[str] = set()
        self._snapshots: dict[str, _SnapshotRow] = {}
        self._tapes: dict[str, tuple[bytes, str]] = {}
        self._tables: dict[str, list[dict[str, Any]]] = {t: [] for t in _ROW_TABLES}
        self._migrations: list[str] = []
        self._closed = False

    def setup(self) -> None:
        with self._open():
            for name, _ in MIGRATIONS:
                if name not in self._migrations:
                    self._migrations.append(name)

    def applied_migrations(self) -> list[str]:
        with self._open():
            return list(self._migrations)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    @contextlib.contextmanager
    def _open(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise UsageError("journal is closed")
            yield

    def _commit(
        self, prepared: Sequence[_Prepared], expected_last_seq: int | None, expected_revision: int | None
    ) -> list[JournalEvent]:
        with self._open():
            last = self._rows[-1][0].seq if self._rows else 0
            events, snaps = self._materialize(prepared, last, expected_last_seq, expected_revision)
            ids = [e.event_id for e in events]
            if len(set(ids)) != len(ids) or self._event_ids.intersection(ids):
                raise JournalWriteError("duplicate event_id", sqlite_error=None)
            snap_ids = [s.snapshot_id for s in snaps]
            if len(set(snap_ids)) != len(snap_ids) or any(s in self._snapshots for s in snap_ids):
                raise JournalWriteError("duplicate snapshot_id", sqlite_error=None)
            for ev, p in zip(events, prepared):
                self._rows.append((ev, p.payload_json))
            self._event_ids.update(ids)
            self._snapshots.update((s.snapshot_id, s) for s in snaps)
            self._index.apply(events)
            self._enqueue(events)
            return events

    @contextlib.contextmanager
    def _indexed(self) -> Iterator[DurableIndex]:
        with self._open():
            yield self._index

    def _events(self, *, mission_id: str | None, after_seq: int, wanted: tuple[EventType, ...] | None,
                limit: int | None, robot_id: str | None = None) -> list[JournalEvent]:
        out: list[JournalEvent] = []
        with self._open():
            start = bisect.bisect_right(self._rows, after_seq, key=lambda row: row[0].seq)  # rows are in seq order
            for ev, payload_json in itertools.islice(self._rows, start, None):
                if limit is not None and len(out) >= limit:
                    break
                if mission_id is not None and ev.mission_id != mission_id:
                    continue
                if robot_id is not None and ev.robot_id != robot_id:
                    continue
                if wanted is not None and ev.type not in wanted:
                    continue
                out.append(ev.model_copy(update={"payload": json.loads(payload_json)}))
        return out

    def last_seq(self) -> int:
        with self._open():
            return self._rows[-1][0].seq if self._rows else 0

    def _put_tape(self, mission_id: str, blob: bytes, readings: int, ports_json: str) -> None:
        with self._open():
            if mission_id in self._tapes:
                raise JournalWriteError(f"mission {mission_id} has a decision tape already", sqlite_error=None)
            self._tapes[mission_id] = (blob, ports_json)

    def _get_tape(self, mission_id: str) -> tuple[bytes, str] | None:
        with self._open():
            return self._tapes.get(mission_id)

    def _insert_row(self, table: str, key: str, values: dict[str, Any], expected_last_key: int | None) -> int:
        with self._open():
            rows = self._tables[table]
            last = rows[-1][key] if rows else -1
            if expected_last_key is not None and last != expected_last_key:
                raise StaleRevision(f"{table} moved: its last row is {last}, not {expected_last_key}",
                                    table=table, last=last)
            new = max(last, 0) + 1
            rows.append({key: new, **values})
            return new

    def _select_rows(self, table: str, key: str, columns: tuple[str, ...],
                     where: tuple[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._open():
            return [{c: r.get(c) for c in columns} for r in self._tables[table]
                    if where is None or r.get(where[0]) == where[1]]

    def _last_key(self, table: str, key: str) -> int:
        with self._open():
            rows = self._tables[table]
            return rows[-1][key] if rows else -1

    def get_snapshot(self, snapshot_id: str) -> WorldSnapshot:
        with self._open():
            row = self._snapshots.get(snapshot_id)
        if row is None:
            raise UnknownSnapshot(snapshot_id)
        return WorldSnapshot.model_validate_json(row.json)

    def missions(self, *, robot_id: str | None = None) -> list[dict[str, Any]]:
        robot = None if robot_id is None else robot_id_of(robot_id)
        spans: dict[str, list[Any]] = {}
        marks: list[JournalEvent] = []
        with self._open():
            for ev, payload_json in self._rows:
                if not ev.mission_id or (robot is not None and ev.robot_id != robot):
                    continue
                span = spans.setdefault(ev.mission_id, [ev.seq, ev.seq, 0, ev.robot_id])
                span[1] = ev.seq
                span[2] += 1
                if ev.type in _MISSION_MARKS:
                    marks.append(ev.model_copy(update={"payload": json.loads(payload_json)}))
        return summarize_missions(((m, *span) for m, span in spans.items()), marks)


# --------------------------------------------------------------------------- sqlite


# SQLite primary result codes (sqlite3.h); exceptions carry the extended code.
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR = 5, 6, 8, 10
_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 11, 13, 14, 26
_CORRUPT_CODES = frozenset({_SQLITE_CORRUPT, _SQLITE_NOTADB})
_RECONNECT_CODES = frozenset({_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN})
"""Errors after which the connection may be unable to write (opened read-only, pager in error): replace it."""
_HINTS = {
    _SQLITE_BUSY: "another connection held the journal's write lock longer than busy_timeout_ms",
    _SQLITE_LOCKED: "another connection held the journal's write lock longer than busy_timeout_ms",
    _SQLITE_READONLY: ("the journal file (or its -wal/-shm, which SQLite creates with the file's permissions),"
                       " its directory or its disk is read-only"),
    _SQLITE_IOERR: "the storage refused or failed the I/O (read-only or immutable file, failing disk)",
    _SQLITE_FULL: "the disk, or the journal's max_pages limit, is full",
    _SQLITE_CANTOPEN: "the journal or its -wal/-shm files cannot be opened (missing, or not writable)",
}
_CORRUPT_HINT = ("the journal file is corrupt: stop, then move it aside together with its -wal and -shm files"
                 " or restore it from a backup (`sqlite3 FILE .recover` salvages what is readable);"
                 " the harness appends nothing more to it and never sets up a fresh journal over it")
_WAL_HEADER_BYTES = 32
_FIRST_OPEN_STEP_S = 0.02  # between looks while another process sets up the same new file


def _first_open_steps(busy_timeout_s: float) -> int:
    """How many looks, ``_FIRST_OPEN_STEP_S`` apart, fit in the busy timeout (at least one)."""
    return max(1, int(busy_timeout_s / _FIRST_OPEN_STEP_S))


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


@dataclasses.dataclass
class _Tx:
    conn: sqlite3.Connection
    after_commit: list[Callable[[], None]] = dataclasses.field(default_factory=list)


class SqliteJournal(Journal):
    """A journal in one SQLite file, durable across crashes and power loss.

    * WAL mode: readers (timeline, CLI, ``sqlite-utils``) never block the writer.
    * ``synchronous=FULL``: the WAL is fsynced at every commit, so a commit that
      returned is on disk. ``NORMAL`` survives a process crash but may lose the
      last commits on power loss; a lost dispatch-intent or dispatch record
      could then let a restarted harness move the robot twice. The cost is
      measured in ``bench/``.
    * One connection, guarded by a lock (the ROS supervisor calls in from
      executor threads), ``check_same_thread=False``; every statement runs in
      ``_transaction``, which rolls back on any exception, so a failed write
      leaves no partial batch and no open transaction behind.
    * ``busy_timeout_ms`` bounds the wait for another writer's lock;
      ``max_pages`` (``PRAGMA max_page_count``; ``set_max_pages`` changes it
      live) bounds the file's size. Either limit being hit raises
      ``JournalWriteError``.
    * Plain tables (``events``, ``snapshots``, ``decision_tapes``, ``config_versions``,
      ``config_evaluations``, ``config_releases``, ``migrations``) that
      ``sqlite-utils`` and the ``sqlite3`` shell can query and export.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock,
        ids: IdGenerator,
        redact: Redactor = default_redactor,
        busy_timeout_ms: int = 2000,
        max_pages: int | None = None,
        robot_id: str = "",
    ) -> None:
        super().__init__(clock=clock, ids=ids, redact=redact, robot_id=robot_id)
        if int(busy_timeout_ms) < 0:
            raise UsageError("busy_timeout_ms must be >= 0", busy_timeout_ms=busy_timeout_ms)
        if max_pages is not None and int(max_pages) < 1:
            raise UsageError("max_pages must be >= 1", max_pages=max_pages)
        self.path = str(path)
        self._ready = False
        self._busy_timeout_s = int(busy_timeout_ms) / 1000.0
        self._max_pages = None if max_pages is None else int(max_pages)
        self._default_max_pages = 0  # SQLite's own limit, read at connect
        self._reconnect = False
        self._corrupt: JournalWriteError | None = None
        self._closed = False
        if self.path != ":memory:" and Path(self.path).exists():
            self._inspect()
        self._conn: sqlite3.Connection | None = self._connect()

    def health(self) -> dict[str, Any]:
        """What the journal knows of itself now, cheaply (no lock, no I/O): ``closed``, ``corrupt`` (the
        damage found, or None) and ``reconnect_pending`` (the connection is to be made anew before the next
        write). For ``/diagnostics``."""
        corrupt = self._corrupt
        return {"closed": self._closed, "corrupt": corrupt.message if corrupt is not None else None,
                "reconnect_pending": self._reconnect}

    def _inspect(self) -> None:
        """Refuse a damaged file before any read-write connection touches it.

        A read-only connection runs ``PRAGMA quick_check`` (page structure,
        about 0.2 s per 100 MB) and looks for the schema: read-only, it never
        checkpoints or deletes the ``-wal`` on close, so the files are left
        exactly as found. A file without a schema next to a ``-wal`` holding
        more than a header is refused too: SQLite could not read that WAL (bad
        header or checksums), so it is not a new journal and must not become
        one; it is looked at again within the busy timeout first, since another
        process setting up the same new file shows just that until it commits.
        Failures that are not corruption are left to the real open.
        """
        pause = threading.Event()  # never set: its wait is the pause between looks
        for _ in range(_first_open_steps(self._busy_timeout_s)):
            try:
                with contextlib.closing(sqlite3.connect(f"{Path(self.path).resolve().as_uri()}?mode=ro", uri=True,
                                                        timeout=self._busy_timeout_s)) as probe:
                    problems = [r[0] for r in probe.execute("PRAGMA quick_check").fetchall()]
                    tables = probe.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
            except sqlite3.Error as exc:
                if _primary_code(exc) in _CORRUPT_CODES:
                    raise self._storage_error(exc, "open") from exc
                return
            if problems != ["ok"]:
                raise JournalReadError(
                    f"journal {self.path} failed its integrity check: {'; '.join(problems[:3])}; {_CORRUPT_HINT}",
                    sqlite_error="; ".join(problems[:10]), sqlite_code="SQLITE_CORRUPT", path=self.path,
                    corrupt=True)
            try:
                wal_bytes = Path(self.path + "-wal").stat().st_size
            except OSError:
                wal_bytes = 0
            if tables or wal_bytes <= _WAL_HEADER_BYTES:
                return
            # No schema, yet frames in the WAL: another process may be setting up this same new file
            # (its first transaction is not committed yet); that ends within its lock's hold.
            pause.wait(_FIRST_OPEN_STEP_S)
        raise JournalReadError(
            f"journal {self.path} has no schema, but its -wal holds {wal_bytes} bytes SQLite could not read"
            " (a damaged WAL header or checksums, or a crash during the very first setup): it is not a new"
            f" journal; {_CORRUPT_HINT}",
            path=self.path, wal_bytes=wal_bytes, corrupt=True, sqlite_error=None, sqlite_code=None)

    def _connect(self) -> sqlite3.Connection:
        """A configured connection (WAL, synchronous=FULL, the page limit in force)."""
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise self._storage_error(exc, "open") from exc
        try:
            mode = self._wal_mode(conn)
            if mode != "wal" and self.path != ":memory:":
                raise sqlite3.OperationalError(f"journal_mode is {mode!r}, WAL unavailable")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._default_max_pages = int(conn.execute("PRAGMA max_page_count").fetchone()[0])
            if self._max_pages is not None:
                # PRAGMA takes no bound parameters; the value is a checked int.
                conn.execute(f"PRAGMA max_page_count = {self._max_pages}")
        except sqlite3.Error as exc:
            conn.close()
            raise self._storage_error(exc, "open") from exc
        return conn

    def _wal_mode(self, conn: sqlite3.Connection) -> str:
        """Switch the file to WAL (a no-op once it is); the journal mode in force.

        On a brand-new file the switch needs the file to itself, and SQLite answers ``SQLITE_BUSY``
        at once, without its busy handler, while another process is opening the same file: so the
        switch is tried again, ``_FIRST_OPEN_STEP_S`` apart, within the busy timeout."""
        pause = threading.Event()  # never set: its wait is the pause between tries
        steps = _first_open_steps(self._busy_timeout_s)
        for step in range(steps):
            try:
                return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if _primary_code(exc) != _SQLITE_BUSY or step == steps - 1:
                    raise
            pause.wait(_FIRST_OPEN_STEP_S)
        raise AssertionError("unreachable: the last try returns or raises")

    def _storage_error(self, exc: sqlite3.Error, doing: str) -> JournalWriteError | JournalReadError:
        """The typed error for a SQLite failure while ``doing`` (open, read, write):
        the file, SQLite's words and code, and what they mean.

        Opening a corrupt file is a read error (the existing journal cannot be
        read), any other open failure a write error; a corrupt page met while
        appending stays a write error, so the engine's handling of failed
        writes covers it.
        """
        primary = _primary_code(exc)
        name = getattr(exc, "sqlite_errorname", None) or "unknown"
        corrupt = primary in _CORRUPT_CODES
        hint = _CORRUPT_HINT if corrupt else _HINTS.get(primary, "")
        if doing == "open":
            kind: type[JournalWriteError | JournalReadError] = JournalReadError if corrupt else JournalWriteError
        else:
            kind = JournalWriteError if doing == "write" else JournalReadError
        return kind(
            f"journal {doing} failed on {self.path}: {exc} ({name})" + (f"; {hint}" if hint else ""),
            sqlite_error=str(exc), sqlite_code=name, path=self.path, corrupt=corrupt,
        )

    # -- the one way in ----------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[_Tx]:
        """Hold the lock for one transaction; commit on success, roll back on any exception.

        sqlite errors become ``JournalWriteError`` (writes) or
        ``JournalReadError`` (reads), see ``_storage_error``. ``after_commit``
        hooks run only once COMMIT has returned (the batch is durable), still
        under the lock: a failed commit never reaches the index or listeners.
        After corruption was seen, writes are refused without touching the
        file; after an error that can leave the connection unable to write,
        the next write replaces it (reads carry on with the old one).
        """
        with self._lock:
            if self._closed:
                raise UsageError("journal is closed")
            if write and self._corrupt is not None:
                raise JournalWriteError(self._corrupt.message, **self._corrupt.details)
            if self._conn is None or (write and self._reconnect):
                try:
                    self._replace_connection()
                except (JournalWriteError, JournalReadError) as exc:
                    kind = JournalWriteError if write else JournalReadError
                    if isinstance(exc, kind):
                        raise
                    raise kind(exc.message, **exc.details) from exc
            conn = self._conn
            assert conn is not None
            tx = _Tx(conn)
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                yield tx
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        _log.exception("rollback failed on %s", self.path)
                if isinstance(exc, sqlite3.Error):
                    err = self._storage_error(exc, "write" if write else "read")
                    self._note_failure(exc, err)
                    raise err from exc
                raise
            for hook in tx.after_commit:
                hook()

    def _note_failure(self, exc: sqlite3.Error, err: JournalWriteError | JournalReadError) -> None:
        """Remember what a failure says about the file (corrupt) or the connection (replace it)."""
        if err.details.get("corrupt"):
            self._corrupt = JournalWriteError(err.message, **err.details)
        elif _primary_code(exc) in _RECONNECT_CODES:
            self._reconnect = True

    def _replace_connection(self) -> None:
        """Drop the connection and open a fresh one (storage may be back); under the lock.

        The old one is closed first: SQLite shares one ``-shm`` mapping among
        a process's connections to a file, and one opened read-only would
        leave the new connection read-only too. Until a connection opens,
        every call tries again. The new connection must see at least every
        event the durable index already holds: a file that went backwards
        (swapped for an older copy) is refused, since the index would be
        ahead of it.
        """
        old, self._conn, self._reconnect = self._conn, None, True
        if old is not None:
            with contextlib.suppress(sqlite3.Error):
                old.close()
        new = self._connect()
        try:
            has_events = new.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
            last = new.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0] if has_events else 0
        except sqlite3.Error as exc:
            new.close()
            err = self._storage_error(exc, "read")
            self._note_failure(exc, err)
            raise err from exc
        if last < self._index.seq:
            new.close()
            raise JournalReadError(
                f"journal file {self.path} now ends at seq {last} but this journal already saw seq"
                f" {self._index.seq}: the file was replaced; reopen it", path=self.path, file_seq=last,
                seen_seq=self._index.seq)
        self._conn, self._reconnect = new, False

    def _ensure_ready(self) -> None:
        if not self._ready:
            self.setup()

    # -- lifecycle ---------------------------------------------------------

    def setup(self) -> None:
        """Apply missing migrations. On an up-to-date file this only reads, so
        a reader (CLI, timeline) never waits on the supervisor's write lock."""
        with self._transaction(write=False) as tx:
            done = self._applied(tx.conn)
        if len(done) < len(MIGRATIONS):
            with self._transaction(write=True) as tx:
                tx.conn.execute(
                    "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
                )
                done = self._applied(tx.conn)
                for name, statements in MIGRATIONS:
                    if name in done:
                        continue
                    for sql in statements:
                        tx.conn.execute(sql)
                    tx.conn.execute(
                        "INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, self._clock.now())
                    )
        self._ready = True

    def set_max_pages(self, max_pages: int | None) -> int:
        """Change the page limit (``None``: SQLite's own) on this live journal; returns the limit in force.

        For operators freeing or adding space without a restart. SQLite never
        lowers the limit below the file's current size, so a small value holds
        the file at its size: the next write needing a new page fails.
        """
        if max_pages is not None and int(max_pages) < 1:
            raise UsageError("max_pages must be >= 1", max_pages=max_pages)
        limit = self._default_max_pages if max_pages is None else int(max_pages)
        with self._transaction(write=False) as tx:
            # PRAGMA takes no bound parameters; the value is a checked int.
            in_force = int(tx.conn.execute(f"PRAGMA max_page_count = {limit}").fetchone()[0])
            self._max_pages = None if max_pages is None else in_force  # kept for a replacement connection
        return in_force

    def _applied(self, conn: sqlite3.Connection) -> set[str]:
        """Migrations recorded in the file; refuses a file from a newer harness."""
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
        ).fetchone()
        done = {r[0] for r in conn.execute("SELECT name FROM migrations")} if has_table else set()
        unknown = done - {name for name, _ in MIGRATIONS}
        if unknown:
            raise UsageError(
                "journal was written by a newer harness (unknown migrations)",
                unknown=sorted(unknown),
                path=self.path,
            )
        return done

    def applied_migrations(self) -> list[str]:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            return [r[0] for r in tx.conn.execute("SELECT name FROM migrations ORDER BY rowid")]

    def pragmas(self) -> dict[str, Any]:
        """The durability settings in force on this connection (for diagnostics and bench/)."""
        names = ("journal_mode", "synchronous", "foreign_keys", "busy_timeout", "max_page_count", "page_size")
        with self._transaction(write=False) as tx:
            return {n: tx.conn.execute(f"PRAGMA {n}").fetchone()[0] for n in names}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- writing -----------------------------------------------------------

    def _commit(
        self, prepared: Sequence[_Prepared], expected_last_seq: int | None, expected_revision: int | None
    ) -> list[JournalEvent]:
        try:
            self._ensure_ready()
        except JournalReadError as exc:  # an append that cannot happen is a failed write
            raise JournalWriteError(exc.message, **exc.details) from exc
        with self._transaction(write=True) as tx:
            last = tx.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]
            self._catch_up(tx.conn)  # other processes' commits, under the write lock
            events, snaps = self._materialize(prepared, last, expected_last_seq, expected_revision)
            tx.conn.executemany(
                f"INSERT INTO events ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                [
                    (
                        ev.seq,
                        ev.event_id,
                        ev.format_version,
                        ev.type.value,
                        ev.stamp,
                        ev.mission_id,
                        ev.model_turn_id,
                        ev.tool_call_id,
                        ev.robot_action_id,
                        ev.snapshot_id,
                        p.payload_json,
                        ev.robot_id,
                    )
                    for ev, p in zip(events, prepared)
                ],
            )
            tx.conn.executemany(
                "INSERT INTO snapshots (snapshot_id, seq, mission_id, reason, captured_at, json)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [dataclasses.astuple(s) for s in snaps],
            )
            tx.after_commit.append(lambda: self._index.apply(events))
            tx.after_commit.append(lambda: self._enqueue(events))
        return events

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        """Fold events committed since the index last looked (by any process)."""
        indexed = ", ".join(f"'{t.value}'" for t in INDEXED_TYPES)
        rows = conn.execute(
            "SELECT seq, type, mission_id, tool_call_id, robot_action_id,"
            f" CASE WHEN type IN ({indexed}) THEN payload ELSE '{{}}' END, robot_id"
            " FROM events WHERE seq > ? ORDER BY seq", (self._index.seq,)).fetchall()
        self._index.apply(index_event(*row) for row in rows)

    @contextlib.contextmanager
    def _indexed(self) -> Iterator[DurableIndex]:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            self._catch_up(tx.conn)
            yield self._index

    # -- reading -----------------------------------------------------------

    @staticmethod
    def _row_to_event(row: Sequence[Any]) -> JournalEvent:
        return event_from_row(row)

    def _events(self, *, mission_id: str | None, after_seq: int, wanted: tuple[EventType, ...] | None,
                limit: int | None, robot_id: str | None = None) -> list[JournalEvent]:
        where = ["seq > ?"]
        params: list[Any] = [int(after_seq)]
        if mission_id is not None:
            where.append("mission_id = ?")
            params.append(mission_id)
        if robot_id is not None:
            where.append("robot_id = ?")
            params.append(robot_id)
        if wanted is not None:
            where.append(f"type IN ({', '.join('?' * len(wanted))})")
            params.extend(t.value for t in wanted)
        sql = f"SELECT {', '.join(_COLUMNS)} FROM events WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            rows = tx.conn.execute(sql, params).fetchall()
        return [self._row_to_event(r) for r in rows]

    def last_seq(self) -> int:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            return int(tx.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])

    def _put_tape(self, mission_id: str, blob: bytes, readings: int, ports_json: str) -> None:
        self._ensure_ready()
        with self._transaction(write=True) as tx:
            if tx.conn.execute("SELECT 1 FROM decision_tapes WHERE mission_id = ?", (mission_id,)).fetchone():
                raise JournalWriteError(f"mission {mission_id} has a decision tape already", sqlite_error=None)
            tx.conn.execute(
                "INSERT INTO decision_tapes (mission_id, format_version, recorded_at, readings, ports, entries)"
                " VALUES (?, ?, ?, ?, ?, ?)", (mission_id, TAPE_FORMAT_VERSION, self._clock.now(), readings,
                                               ports_json, blob))

    def _get_tape(self, mission_id: str) -> tuple[bytes, str] | None:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            row = tx.conn.execute("SELECT entries, ports FROM decision_tapes WHERE mission_id = ?",
                                  (mission_id,)).fetchone()
        return None if row is None else (bytes(row[0]), str(row[1]))

    def _insert_row(self, table: str, key: str, values: dict[str, Any], expected_last_key: int | None) -> int:
        self._ensure_ready()
        # table and column names come from CONFIG_TABLES / MEMORY_TABLES, never from a caller's text
        with self._transaction(write=True) as tx:
            last = tx.conn.execute(f"SELECT MAX({key}) FROM {table}").fetchone()[0]  # noqa: S608
            last = -1 if last is None else int(last)
            if expected_last_key is not None and last != expected_last_key:
                raise StaleRevision(f"{table} moved: its last row is {last}, not {expected_last_key}",
                                    table=table, last=last)
            new = max(last, 0) + 1
            cols = (key, *values)
            tx.conn.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",  # noqa: S608
                            (new, *values.values()))
            return new

    def _select_rows(self, table: str, key: str, columns: tuple[str, ...],
                     where: tuple[str, Any] | None = None) -> list[dict[str, Any]]:
        self._ensure_ready()
        # table and column names from CONFIG_TABLES / MEMORY_TABLES, never a caller's text; the value a parameter
        sql = f"SELECT {', '.join(columns)} FROM {table}" + (f" WHERE {where[0]} = ?" if where else "")  # noqa: S608
        with self._transaction(write=False) as tx:
            rows = tx.conn.execute(f"{sql} ORDER BY {key}", (where[1],) if where else ()).fetchall()
        return [dict(zip(columns, r)) for r in rows]

    def _last_key(self, table: str, key: str) -> int:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            last = tx.conn.execute(f"SELECT MAX({key}) FROM {table}").fetchone()[0]  # noqa: S608
        return -1 if last is None else int(last)

    def get_snapshot(self, snapshot_id: str) -> WorldSnapshot:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            row = tx.conn.execute("SELECT json FROM snapshots WHERE snapshot_id = ?", (snapshot_id,)).fetchone()
        if row is None:
            raise UnknownSnapshot(snapshot_id)
        return WorldSnapshot.model_validate_json(row[0])

    def missions(self, *, robot_id: str | None = None) -> list[dict[str, Any]]:
        robot = None if robot_id is None else robot_id_of(robot_id)
        by_robot, params = ("", []) if robot is None else (" AND robot_id = ?", [robot])
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            spans = tx.conn.execute(
                "SELECT mission_id, MIN(seq), MAX(seq), COUNT(*),"
                " (SELECT e.robot_id FROM events e WHERE e.mission_id = events.mission_id ORDER BY e.seq LIMIT 1)"
                f" FROM events WHERE mission_id != ''{by_robot} GROUP BY mission_id", params
            ).fetchall()
            marks = tx.conn.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM events WHERE type IN ({', '.join('?' * len(_MISSION_MARKS))})"
                f" AND mission_id != ''{by_robot} ORDER BY seq",
                [*(t.value for t in _MISSION_MARKS), *params],
            ).fetchall()
        return summarize_missions(spans, (self._row_to_event(r) for r in marks))


# --------------------------------------------------------------------------- factory

_SQLITE_ONLY = ("busy_timeout_ms", "max_pages")


def default_journal_path() -> Path:
    """Where the supervisor keeps its journal unless told otherwise: ``$ROS_HOME/robot_harness/journal.sqlite3``."""
    import os

    home = Path(os.environ.get("ROS_HOME", Path.home() / ".ros"))
    return home / "robot_harness" / "journal.sqlite3"


_URL_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/*")
_PASSWORD_KEY = re.compile(r"(?i)^[a-z_]*password$")  # password=, sslpassword=


@dataclasses.dataclass(frozen=True)
class UrlParts:
    """A URL taken apart where passwords can be: the one reader of a journal URL's secrets. Redaction,
    the URL a node's parameter may carry, the refusal of an unescaped ``/`` and the scrubbing of error
    messages all ask it, so they agree on what the password is.

    The user information is everything before the last ``@`` ahead of the query, so a password holding
    an unescaped ``/``, ``:`` or ``@`` is taken whole; a parameter whose key ends in ``password``
    (``password=``, ``sslpassword=``) holds a secret too. Works on any ``scheme:/...`` text, so a
    mistyped URL's password is known before it is refused."""

    prefix: str  # the scheme and its slashes: "postgresql://"
    userinfo: str  # "user:password", "user", or "" (no "@")
    at: str  # "@" or ""
    location: str  # hosts, ports and the database
    q: str  # "?" or ""
    query: str

    @classmethod
    def of(cls, url: str) -> UrlParts:
        prefix = m.group(0) if (m := _URL_PREFIX.match(url)) else ""
        body, q, query = url[len(prefix):].partition("?")
        userinfo, at, location = body.rpartition("@")
        return cls(prefix, userinfo, at, location, q, query)

    @property
    def password(self) -> str | None:
        """The user information's password as written (percent-encoded), or None."""
        user, colon, password = self.userinfo.partition(":")
        return password if colon else None

    def params(self) -> list[tuple[str, str]]:
        return [(key, value) for key, _, value in (part.partition("=") for part in self.query.split("&"))] \
            if self.q else []

    def secrets(self) -> set[str]:
        """Every password of the URL, as written and percent-decoded."""
        written = [self.password or ""] + [v for k, v in self.params() if _PASSWORD_KEY.match(k)]
        return {s for w in written for s in (w, unquote(w)) if s}

    def redacted(self) -> str:
        """The URL with every password replaced by ``***``."""
        userinfo = self.userinfo.partition(":")[0] + ":" + REDACTED if self.password is not None else self.userinfo
        query = "&".join(f"{k}={REDACTED}" if "=" in part and _PASSWORD_KEY.match(k) else part
                         for part, (k, _) in zip(self.query.split("&"), self.params())) if self.q else ""
        return f"{self.prefix}{userinfo}{self.at}{self.location}{self.q}{query}"

    def without_password(self) -> tuple[str, str]:
        """The URL without its ``password`` (the user information's, and a ``password=`` parameter), and that
        password percent-decoded ("" when it has none)."""
        password = self.password or next((v for k, v in self.params() if k.lower() == "password"), "")
        userinfo = self.userinfo.partition(":")[0]
        kept = [part for part, (k, _) in zip(self.query.split("&"), self.params()) if k.lower() != "password"]
        url = f"{self.prefix}{userinfo}{self.at}{self.location}" + (f"?{'&'.join(kept)}" if kept else "")
        return url, unquote(password)


def redact_url(target: str | Path) -> str:
    """A journal target fit to print: a database URL's passwords replaced by ``***`` (a path as it is);
    see ``UrlParts``."""
    text = str(target)
    return UrlParts.of(text).redacted() if is_database_url(text) else text


def check_database_url(url: str) -> None:
    """A ``UsageError`` for a database URL whose user or password holds an unescaped ``/`` (libpq would
    read a different host and database, and the password could be printed as a path): percent-encode it."""
    if "/" in UrlParts.of(url).userinfo:
        raise UsageError(f"journal URL {redact_url(url)}: the user or password holds an unescaped '/'; percent-encode"
                         " it (%2F), or pass the password through $PGPASSWORD or ~/.pgpass", journal=redact_url(url))


def local_state_path(target: str | Path | None, robot_id: str = "") -> Path:
    """Where a harness keeps what belongs beside its journal on this machine (the interactions' token key,
    artifacts, bags: ``<this>.parent``, named from ``<this>``): the journal file itself, or, for a fleet's
    database, ``$ROS_HOME/robot_harness/<robot>/journal`` (each robot's own)."""
    if target is None or str(target) == "":
        return default_journal_path()
    if is_database_url(target):
        return default_journal_path().parent / (robot_id_of(robot_id) or "robot") / "journal"
    return Path(target).expanduser()


def is_database_url(target: str | Path | None) -> bool:
    """Whether a journal target names a PostgreSQL database (``postgresql://`` or ``postgres://``)
    rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def open_journal(path: str | Path | None, **kw: Any) -> Journal:
    """Open and set up a journal: ``None`` or ``":memory:"`` gives a ``MemoryJournal``
    (SQLite-only options are ignored), a ``postgresql://`` URL a ``PostgresJournal`` (the fleet's
    shared database; ``busy_timeout_ms`` bounds its waits too), anything else a ``SqliteJournal`` file.
    ``clock`` and ``ids`` are required keywords; ``redact`` and ``robot_id`` are optional."""
    journal: Journal
    if path is None or str(path) == ":memory:":
        for key in _SQLITE_ONLY:
            kw.pop(key, None)
        journal = MemoryJournal(**kw)
    elif is_database_url(path):
        from .journal_pg import PostgresJournal  # psycopg is needed only by a fleet's harness

        check_database_url(str(path))

        kw.pop("max_pages", None)
        journal = PostgresJournal(str(path), **kw)
    else:
        journal = SqliteJournal(path, **kw)
    try:
        journal.setup()
    except BaseException:
        journal.close()
        raise
    return journal
