"""The journal in a PostgreSQL database: one database for a fleet's harnesses.

``PostgresJournal`` passes the same conformance suite as ``MemoryJournal`` and
``SqliteJournal`` (``test/unit/test_journal.py`` and the suites beside it run
against all three) and keeps the same tables and columns (``PG_MIGRATIONS``:
the SQLite schema in PostgreSQL's types, one twin per migration of
``journal.MIGRATIONS``). What it adds is many writers on many machines:

* **One writer at a time, across every process.** Each write transaction
  starts by taking a transaction-scoped advisory lock (``WRITE_LOCK_KEY``),
  then reads the last seq and catches the durable index up from the rows
  other writers committed, validates the batch against it and inserts. The
  lock is released only once the commit is visible, so the next writer's
  statements see it: the same guarantee as SQLite's ``BEGIN IMMEDIATE``
  (module ``durable``: every check sees every committed event).
* **Reads never wait for writers**: they run in ``REPEATABLE READ READ ONLY``
  transactions (one snapshot for all their statements, like a WAL reader).
* **Every wait is bounded**: ``busy_timeout_ms`` is the session's
  ``lock_timeout`` (the write lock, a migration's table locks), and
  ``statement_timeout`` is that plus ``max(busy_timeout_ms, 5 s)``. A wait
  that runs out is a ``JournalWriteError`` (``JournalReadError`` for a read)
  that wrote nothing.
* **A lost connection** (the server restarted, the network dropped) is an
  error for the call that met it, unless the call met it at the transaction's
  opening (BEGIN, the write lock), before anything of the transaction ran: the
  server dropped an idle session, so the call connects anew and opens its
  transaction once more (once: a server still down is the call's error). A
  new connection refuses a database that now ends before what this journal
  already saw (a restored older backup). Nothing is retried once a statement
  of the transaction ran: a COMMIT whose connection dropped may or may not
  have committed (``commit_outcome="unknown"``); the index never folds it, the
  next call catches up from whatever the database holds, and as with SQLite's
  failed fsync a failed write stops physical work rather than being retried
  blindly.

Errors carry ``pg_error`` (the server's or libpq's words), ``sqlstate`` (None
for a connection failure) and ``url`` (the password replaced by ``***``:
neither a message nor a detail ever holds it).

psycopg is imported only when a ``PostgresJournal`` is made, so the core
imports without it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .clock import Clock, IdGenerator
from .durable import INDEXED_TYPES, DurableIndex
from .errors import JournalWriteError, StaleRevision, UsageError
from .journal import (
    CONFIG_TABLES,
    EVENT_COLUMNS,
    MEMORY_TABLES,
    MIGRATIONS,
    REDACTED,
    Journal,
    JournalReadError,
    Redactor,
    UnknownSnapshot,
    UrlParts,
    default_redactor,
    event_from_row,
    index_event,
    is_database_url,
    redact_url,
    robot_id_of,
    summarize_missions,
)
from .journal import _MISSION_MARKS, _Prepared  # noqa: PLC2701 - the backends' shared core
from .records import EventType, JournalEvent, WorldSnapshot
from .tape import FORMAT_VERSION as TAPE_FORMAT_VERSION

if TYPE_CHECKING:
    import psycopg

__all__ = ["PG_MIGRATIONS", "PostgresJournal", "WRITE_LOCK_KEY"]

_log = logging.getLogger(__name__)

WRITE_LOCK_KEY = 0x7268_6A72_6E6C_0001
"""The advisory lock (``pg_advisory_xact_lock``) every journal write transaction takes first, setup's
included; per database. Another tool that must not interleave with the harness's writes may take it too."""

PG_MIGRATIONS: dict[str, tuple[str, ...]] = {
    "0001_events": (
        """CREATE TABLE events (
            seq BIGINT PRIMARY KEY,
            event_id TEXT NOT NULL UNIQUE,
            format_version INTEGER NOT NULL,
            type TEXT NOT NULL,
            stamp DOUBLE PRECISION NOT NULL,
            mission_id TEXT NOT NULL DEFAULT '',
            model_turn_id TEXT NOT NULL DEFAULT '',
            tool_call_id TEXT NOT NULL DEFAULT '',
            robot_action_id TEXT NOT NULL DEFAULT '',
            snapshot_id TEXT NOT NULL DEFAULT '',
            payload TEXT NOT NULL /* JSON, byte for byte as appended (not jsonb, which would reorder it) */
        )""",
        "CREATE INDEX events_mission_id ON events (mission_id)",
        "CREATE INDEX events_type ON events (type)",
    ),
    "0002_snapshots": (
        """CREATE TABLE snapshots (
            snapshot_id TEXT PRIMARY KEY,
            seq BIGINT NOT NULL REFERENCES events (seq),
            mission_id TEXT NOT NULL DEFAULT '',
            reason TEXT NOT NULL DEFAULT '',
            captured_at DOUBLE PRECISION NOT NULL,
            json TEXT NOT NULL /* WorldSnapshot */
        )""",
        "CREATE INDEX snapshots_mission_id ON snapshots (mission_id)",
    ),
    "0003_decision_tapes": (
        """CREATE TABLE decision_tapes (
            mission_id TEXT PRIMARY KEY,
            format_version INTEGER NOT NULL,
            recorded_at DOUBLE PRECISION NOT NULL,
            readings BIGINT NOT NULL,
            ports TEXT NOT NULL /* JSON, as in the blob's header */,
            entries BYTEA NOT NULL /* zlib: the tape file (tape.tape_to_jsonl) */
        )""",
    ),
    # SQLite's AUTOINCREMENT keys are plain keys here: the journal assigns every key itself (under the
    # write lock), and an identity column's sequence would hand another inserter keys already taken.
    "0004_config_versions": (
        """CREATE TABLE config_versions (
            version BIGINT PRIMARY KEY,
            content_hash TEXT NOT NULL,
            parent BIGINT,
            created_at DOUBLE PRECISION NOT NULL,
            proposed_by TEXT NOT NULL DEFAULT '',
            proposer_hmac TEXT NOT NULL DEFAULT '',
            overrides TEXT NOT NULL /* JSON */,
            manifest TEXT NOT NULL /* JSON: config_versions.Manifest */
        )""",
        """CREATE TABLE config_evaluations (
            evaluation_id BIGINT PRIMARY KEY,
            version BIGINT NOT NULL REFERENCES config_versions (version),
            baseline BIGINT NOT NULL REFERENCES config_versions (version),
            passed INTEGER NOT NULL,
            evaluated_at DOUBLE PRECISION NOT NULL,
            report TEXT NOT NULL /* JSON */
        )""",
        """CREATE TABLE config_releases (
            release_id BIGINT PRIMARY KEY,
            version BIGINT NOT NULL REFERENCES config_versions (version),
            action TEXT NOT NULL /* initial | release | rollback */,
            previous BIGINT,
            evaluation_id BIGINT,
            approved_as TEXT NOT NULL DEFAULT '',
            operator TEXT NOT NULL DEFAULT '',
            reason TEXT NOT NULL DEFAULT '',
            released_at DOUBLE PRECISION NOT NULL
        )""",
    ),
    "0005_memory": (
        """CREATE TABLE memory_episodes (
            seq BIGINT PRIMARY KEY,
            memory_id TEXT NOT NULL UNIQUE,
            format_version INTEGER NOT NULL,
            mission_id TEXT NOT NULL,
            goal TEXT NOT NULL DEFAULT '',
            signature TEXT NOT NULL /* JSON */,
            contract TEXT NOT NULL /* JSON */,
            plan TEXT NOT NULL /* JSON */,
            outcome TEXT NOT NULL,
            verification TEXT NOT NULL,
            evidence_ids TEXT NOT NULL /* JSON */,
            provenance TEXT NOT NULL /* JSON */,
            ended_at DOUBLE PRECISION,
            recorded_at DOUBLE PRECISION NOT NULL,
            recorded_by TEXT NOT NULL DEFAULT '',
            reason TEXT NOT NULL DEFAULT '',
            supersedes TEXT NOT NULL DEFAULT '',
            valid INTEGER NOT NULL
        )""",
        "CREATE INDEX memory_episodes_mission_id ON memory_episodes (mission_id)",
        """CREATE TABLE memory_provider_outcomes (
            seq BIGINT PRIMARY KEY,
            memory_id TEXT NOT NULL UNIQUE,
            format_version INTEGER NOT NULL,
            mission_id TEXT NOT NULL,
            provider TEXT NOT NULL,
            capability TEXT NOT NULL,
            context TEXT NOT NULL /* JSON */,
            outcome TEXT NOT NULL,
            action_id TEXT NOT NULL DEFAULT '',
            tool_call_id TEXT NOT NULL DEFAULT '',
            evidence_ids TEXT NOT NULL /* JSON */,
            provenance TEXT NOT NULL /* JSON */,
            observed_at DOUBLE PRECISION,
            recorded_at DOUBLE PRECISION NOT NULL,
            recorded_by TEXT NOT NULL DEFAULT '',
            reason TEXT NOT NULL DEFAULT '',
            supersedes TEXT NOT NULL DEFAULT '',
            valid INTEGER NOT NULL
        )""",
        "CREATE INDEX memory_provider_outcomes_mission_id ON memory_provider_outcomes (mission_id)",
        "CREATE INDEX memory_provider_outcomes_capability ON memory_provider_outcomes (capability, provider)",
    ),
    "0006_robot_id": (
        "ALTER TABLE events ADD COLUMN robot_id TEXT NOT NULL DEFAULT '' /* the writing robot (namespace) */",
        "CREATE INDEX events_robot_id ON events (robot_id, seq)",
    ),
}
"""``journal.MIGRATIONS`` in PostgreSQL, by the same names: each is applied, and recorded in ``migrations``,
in the transaction that applies the SQLite twin's change here. Append only, in step with ``MIGRATIONS``."""

if list(PG_MIGRATIONS) != [name for name, _ in MIGRATIONS]:  # not an assert: it must hold under -O too
    raise ImportError("journal_pg.PG_MIGRATIONS must name exactly journal.MIGRATIONS, in order: "
                      f"{[n for n, _ in MIGRATIONS]} != {list(PG_MIGRATIONS)}")

_ROW_TABLES = {**CONFIG_TABLES, **MEMORY_TABLES}
_NAMES = [name for name, _ in MIGRATIONS]
_STATEMENT_SLACK_MS = 5000
_HINTS = {
    "55P03": "another writer held the journal's write lock (or a table lock) longer than busy_timeout_ms",
    "57014": "a statement ran longer than statement_timeout (busy_timeout_ms plus its slack)",
    "23505": "a record with this id is in the journal already (an id generator reused its seed?)",
    "23503": "a record refers to one the journal does not hold",
    "53100": "the database server's disk is full",
    "53200": "the database server is out of memory",
    "53300": "the database server has no connection slot left",
    "25006": "the server accepts no writes (a standby, or default_transaction_read_only)",
    "42501": "the database role lacks a privilege on the journal's tables",
    "3D000": "the database does not exist",
    "28000": "the server refused the role",
    "28P01": "the server refused the password",
}
_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03", "57P05"})
"""admin_shutdown (a fast shutdown, ``pg_terminate_backend``), crash_shutdown, cannot_connect_now,
idle_session_timeout: the server ended the session, it did not refuse a statement."""
_CONNECTION_HINT = "the connection to the server failed or was lost (server down, restarted or unreachable); " \
                   "the next call connects anew"
def _url_secrets(url: str, parsed_password: str | None) -> list[str]:
    """Every spelling of the URL's passwords (as written, percent-decoded, and as libpq read it), longest
    first: ``_scrub`` removes them from any text a server or libpq error puts in a message."""
    found = UrlParts.of(url).secrets() | {parsed_password or ""}
    return sorted((s for s in found if s), key=len, reverse=True)


def _psycopg(url: str) -> Any:
    try:
        import psycopg
        import psycopg.sql  # noqa: F401 - the journal composes identifiers with it
    except ImportError as exc:
        raise UsageError(f"a PostgreSQL journal ({url}) needs psycopg: pip install 'psycopg[binary]' (or run"
                         " `make setup`)", url=url) from exc
    return psycopg


@dataclasses.dataclass
class _Tx:
    cur: "psycopg.Cursor[Any]"
    after_commit: list[Callable[[], None]] = dataclasses.field(default_factory=list)

    def one(self, query: Any, params: Sequence[Any] | None = None) -> Any:
        row = self.cur.execute(query, params).fetchone()
        return None if row is None else row[0]


class PostgresJournal(Journal):
    """A journal in a PostgreSQL database that many harnesses (robots) share; see the module's docstring.

    ``url`` is a ``postgresql://`` (or ``postgres://``) URL; ``busy_timeout_ms`` bounds every lock wait
    (and, with slack, every statement); ``robot_id`` is stamped on every event this object writes.
    One connection, guarded by the journal's lock, made at first use and made anew after it was lost.
    ``url`` (and ``path``, for code written for file journals) is the URL with its password redacted.
    """

    def __init__(
        self,
        url: str,
        *,
        clock: Clock,
        ids: IdGenerator,
        redact: Redactor = default_redactor,
        busy_timeout_ms: int = 2000,
        robot_id: str = "",
    ) -> None:
        super().__init__(clock=clock, ids=ids, redact=redact, robot_id=robot_id)
        self.url = redact_url(str(url))
        if not is_database_url(url):
            raise UsageError(f"{self.url!r} is not a postgresql:// URL", url=self.url)
        if int(busy_timeout_ms) < 0:
            raise UsageError("busy_timeout_ms must be >= 0", busy_timeout_ms=busy_timeout_ms)
        self._secrets = _url_secrets(url, None)
        self._pg = _psycopg(self.url)
        try:
            given = self._pg.conninfo.conninfo_to_dict(url)
        except self._pg.Error as exc:
            raise UsageError(f"{self.url} is not a valid PostgreSQL URL: {self._scrub(str(exc))}",
                             url=self.url) from None
        self._secrets = _url_secrets(url, given.get("password"))
        self._url = url
        # lock_timeout 0 would mean "wait for ever": the shortest bounded wait stands in for SQLite's 0.
        self._lock_timeout_ms = max(1, int(busy_timeout_ms))
        self._statement_timeout_ms = self._lock_timeout_ms + max(self._lock_timeout_ms, _STATEMENT_SLACK_MS)
        self._connect_kwargs: dict[str, Any] = {"autocommit": True, "client_encoding": "UTF8",
                                                "fallback_application_name": "robot_harness journal"}
        if "connect_timeout" not in given:
            self._connect_kwargs["connect_timeout"] = max(2, math.ceil(self._statement_timeout_ms / 1000))
        self._conn: psycopg.Connection[Any] | None = None
        self._reconnect = False
        self._ready = False
        self._closed = False

    @property
    def path(self) -> str:
        """The redacted URL: what a file journal's ``path`` is to messages naming where the journal is."""
        return self.url

    def __repr__(self) -> str:
        return f"PostgresJournal({self.url!r}, robot_id={self.robot_id!r})"

    def health(self) -> dict[str, Any]:
        """As ``SqliteJournal.health`` (no lock, no I/O): ``closed``, ``corrupt`` (always None: the server
        owns its storage) and ``reconnect_pending`` (the connection was lost or never made after a failure;
        the next call connects anew)."""
        return {"closed": self._closed, "corrupt": None, "reconnect_pending": self._reconnect}

    def settings(self) -> dict[str, Any]:
        """The session settings in force (for diagnostics and bench/)."""
        names = ("lock_timeout", "statement_timeout", "server_version", "server_encoding", "client_encoding",
                 "default_transaction_isolation")
        with self._transaction(write=False) as tx:
            return {n: tx.one(f"SHOW {n}") for n in names}

    # -- errors --------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def _error(self, exc: Exception, doing: str, *, write: bool, **extra: Any) -> JournalWriteError | JournalReadError:
        """The typed error for a psycopg failure while ``doing`` (connect, read, write, commit)."""
        sqlstate = getattr(exc, "sqlstate", None)
        diag = getattr(exc, "diag", None)
        words = " ".join(self._scrub(getattr(diag, "message_primary", None) or str(exc)).split())
        if sqlstate in _HINTS:
            hint = _HINTS[sqlstate]
        elif sqlstate is None or sqlstate.startswith(("08", "57P")):
            hint = _CONNECTION_HINT
        else:
            hint = ""
        kind = JournalWriteError if write else JournalReadError
        return kind(f"journal {doing} failed on {self.url}: {words}" + (f" (SQLSTATE {sqlstate})" if sqlstate else "")
                    + (f"; {hint}" if hint else ""), pg_error=words, sqlstate=sqlstate, url=self.url, **extra)

    def _lost(self, conn: "psycopg.Connection[Any]") -> bool:
        return bool(conn.closed or conn.broken)

    # -- the one way in ------------------------------------------------------

    def _connect(self, *, write: bool) -> "psycopg.Connection[Any]":
        pg = self._pg
        try:
            conn = pg.connect(self._url, **self._connect_kwargs)
        except pg.Error as exc:
            raise self._error(exc, "connect", write=write) from None
        try:
            conn.execute("SELECT set_config('lock_timeout', %s, false), set_config('statement_timeout', %s, false)",
                         (f"{self._lock_timeout_ms}ms", f"{self._statement_timeout_ms}ms"))
        except pg.Error as exc:
            conn.close()
            raise self._error(exc, "connect", write=write) from None
        return conn

    def _replace_connection(self, *, write: bool) -> None:
        """Drop the connection (if any) and make a new one; under the lock. Until one is made every call
        tries again. The database must hold at least every event the durable index has seen: one that
        went backwards (restored from an older backup, recreated) is refused, as the index is ahead of it."""
        old, self._conn, self._reconnect = self._conn, None, True
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()
        new = self._connect(write=write)
        try:
            has_events = new.execute("SELECT to_regclass('events') IS NOT NULL").fetchone()[0]  # type: ignore[index]
            last = new.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0] \
                if has_events else 0  # type: ignore[index]
        except self._pg.Error as exc:
            new.close()
            raise self._error(exc, "read", write=write) from None
        if last < self._index.seq:
            new.close()
            kind = JournalWriteError if write else JournalReadError
            raise kind(f"journal database {self.url} now ends at seq {last} but this journal already saw seq"
                       f" {self._index.seq}: the database was replaced; reopen it", url=self.url, file_seq=last,
                       seen_seq=self._index.seq, pg_error=None, sqlstate=None)
        self._conn, self._reconnect = new, False

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[_Tx]:
        """Hold the lock for one transaction; commit on success, roll back on any exception.

        A write transaction is ``READ COMMITTED`` and takes ``WRITE_LOCK_KEY`` before any other
        statement: each later statement takes a fresh snapshot, so it sees every transaction committed
        before the lock was granted (PostgreSQL releases a transaction's locks only after its commit is
        visible). That is what SQLite's ``BEGIN IMMEDIATE`` gives, and it needs no retry loop, which
        ``SERIALIZABLE`` would (and the core keeps no clock to pace one with). A read is one snapshot
        (``REPEATABLE READ READ ONLY``: never a serialization failure, never a wait for a writer).
        psycopg errors become ``JournalWriteError``/``JournalReadError``; ``after_commit`` hooks run
        once COMMIT has returned, still under the lock.
        """
        pg = self._pg
        with self._lock:
            if self._closed:
                raise UsageError("journal is closed")
            tx = self._begin(write=write)
            conn = tx.cur.connection
            committing = False
            try:
                yield tx
                committing = True
                tx.cur.execute("COMMIT")
                if tx.cur.statusmessage != "COMMIT":  # PostgreSQL answers ROLLBACK to COMMIT in a failed transaction
                    kind = JournalWriteError if write else JournalReadError
                    raise kind(f"journal transaction on {self.url} was rolled back by the server"
                               f" ({tx.cur.statusmessage})", pg_error=tx.cur.statusmessage, sqlstate=None,
                               url=self.url)
            except BaseException as exc:
                lost = self._abort(conn)
                if isinstance(exc, pg.Error):
                    extra = {"commit_outcome": "unknown"} if committing and lost else {}
                    err = self._error(exc, "commit" if committing else ("write" if write else "read"),
                                      write=write, **extra)
                    if extra:
                        err.message += ("; the commit may have happened: the next call reads what the database"
                                        " holds")
                        err.args = (err.message,)
                    raise err from None
                raise
            finally:
                with contextlib.suppress(Exception):
                    tx.cur.close()
            for hook in tx.after_commit:
                hook()

    def _begin(self, *, write: bool, retried: bool = False) -> _Tx:
        """BEGIN (and, to write, the write lock) on the connection, made anew if it was lost; under the lock.

        A session the server dropped while it sat idle (a restart, a failover, ``idle_session_timeout``, a
        NAT forgetting the flow, ``pg_terminate_backend``) is found only by the next statement. When that
        is one of these opening statements, nothing of the transaction has run, so the connection is made
        anew (``_replace_connection``: a database that went backwards is still refused) and the opening is
        tried once more; a second failure, or any other, is the call's error. Nothing is retried once a
        statement of the transaction has executed (``_transaction``).
        """
        if self._conn is None or self._reconnect or self._lost(self._conn):
            self._replace_connection(write=write)
        conn = self._conn
        assert conn is not None
        tx = _Tx(conn.cursor())
        try:
            if write:
                tx.cur.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                tx.cur.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
            else:
                tx.cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return tx
        except BaseException as exc:
            with contextlib.suppress(Exception):
                tx.cur.close()
            self._abort(conn)
            if not isinstance(exc, self._pg.Error):
                raise
            if retried or not self._dropped(exc):
                raise self._error(exc, "write" if write else "read", write=write) from None
            self._reconnect = True
            _log.warning("journal connection to %s was dropped (%s); connecting anew", self.url,
                         getattr(exc, "sqlstate", None) or "no SQLSTATE")
        return self._begin(write=write, retried=True)

    def _dropped(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the session itself is gone (libpq lost the connection, a connection
        exception, the server shut it down or terminated it), not that a statement failed in it."""
        if not isinstance(exc, self._pg.OperationalError):
            return False
        sqlstate = getattr(exc, "sqlstate", None)
        return sqlstate is None or sqlstate.startswith("08") or sqlstate in _SESSION_ENDED

    def _abort(self, conn: "psycopg.Connection[Any]") -> bool:
        """Roll back whatever ``conn`` has open (if it still can); True, and a reconnect pending, if lost."""
        pg = self._pg
        lost = self._lost(conn)
        if not lost and conn.info.transaction_status != pg.pq.TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except pg.Error:
                _log.warning("rollback failed on %s", self.url, exc_info=True)
            lost = self._lost(conn)
        if lost:
            self._reconnect = True
        return lost

    def _ensure_ready(self) -> None:
        if not self._ready:
            self.setup()

    # -- lifecycle -----------------------------------------------------------

    def setup(self) -> None:
        """Apply missing migrations. On an up-to-date database this only reads; harnesses starting
        together on a fresh database take turns under the write lock, and only the first migrates."""
        with self._transaction(write=False) as tx:
            done = self._applied(tx)
        if len(done) < len(MIGRATIONS):
            with self._transaction(write=True) as tx:
                tx.cur.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY,"
                               " applied_at DOUBLE PRECISION NOT NULL)")
                done = self._applied(tx)
                for name in _NAMES:
                    if name in done:
                        continue
                    for statement in PG_MIGRATIONS[name]:
                        tx.cur.execute(statement)
                    tx.cur.execute("INSERT INTO migrations (name, applied_at) VALUES (%s, %s)",
                                   (name, self._clock.now()))
        self._ready = True

    def _applied(self, tx: _Tx) -> set[str]:
        """Migrations recorded in the database; refuses a database from a newer harness."""
        if not tx.one("SELECT to_regclass('migrations') IS NOT NULL"):
            return set()
        done = {r[0] for r in tx.cur.execute("SELECT name FROM migrations").fetchall()}
        unknown = done - set(_NAMES)
        if unknown:
            raise UsageError("journal was written by a newer harness (unknown migrations)",
                             unknown=sorted(unknown), url=self.url)
        return done

    def applied_migrations(self) -> list[str]:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            done = self._applied(tx)
        return [n for n in _NAMES if n in done]  # applied in this order, always

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    # -- writing -------------------------------------------------------------

    def _commit(
        self, prepared: Sequence[_Prepared], expected_last_seq: int | None, expected_revision: int | None
    ) -> list[JournalEvent]:
        try:
            self._ensure_ready()
        except JournalReadError as exc:  # an append that cannot happen is a failed write
            raise JournalWriteError(exc.message, **exc.details) from exc
        cols = self._pg.sql.SQL(", ").join(map(self._pg.sql.Identifier, EVENT_COLUMNS))
        with self._transaction(write=True) as tx:
            last = int(tx.one("SELECT COALESCE(MAX(seq), 0) FROM events"))
            if last < self._index.seq:
                raise JournalWriteError(
                    f"journal database {self.url} now ends at seq {last} but this journal already saw seq"
                    f" {self._index.seq}: the database was replaced; reopen it", url=self.url, file_seq=last,
                    seen_seq=self._index.seq, pg_error=None, sqlstate=None)
            self._catch_up(tx)  # other writers' commits, under the write lock
            events, snaps = self._materialize(prepared, last, expected_last_seq, expected_revision)
            if events:
                tx.cur.executemany(
                    self._pg.sql.SQL("INSERT INTO events ({}) VALUES ({})").format(
                        cols, self._pg.sql.SQL(", ").join(self._pg.sql.Placeholder() * len(EVENT_COLUMNS))),
                    [(ev.seq, ev.event_id, ev.format_version, ev.type.value, ev.stamp, ev.mission_id,
                      ev.model_turn_id, ev.tool_call_id, ev.robot_action_id, ev.snapshot_id, p.payload_json,
                      ev.robot_id) for ev, p in zip(events, prepared)])
            if snaps:
                tx.cur.executemany(
                    "INSERT INTO snapshots (snapshot_id, seq, mission_id, reason, captured_at, json)"
                    " VALUES (%s, %s, %s, %s, %s, %s)", [dataclasses.astuple(s) for s in snaps])
            tx.after_commit.append(lambda: self._index.apply(events))
            tx.after_commit.append(lambda: self._enqueue(events))
        return events

    def _catch_up(self, tx: _Tx) -> None:
        """Fold events committed since the index last looked (by any writer)."""
        rows = tx.cur.execute(
            "SELECT seq, type, mission_id, tool_call_id, robot_action_id,"
            " CASE WHEN type = ANY(%s) THEN payload ELSE '{}' END, robot_id"
            " FROM events WHERE seq > %s ORDER BY seq",
            (sorted(t.value for t in INDEXED_TYPES), self._index.seq)).fetchall()
        self._index.apply(index_event(*row) for row in rows)

    @contextlib.contextmanager
    def _indexed(self) -> Iterator[DurableIndex]:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            self._catch_up(tx)
            yield self._index

    # -- reading -------------------------------------------------------------

    def _events(self, *, mission_id: str | None, after_seq: int, wanted: tuple[EventType, ...] | None,
                limit: int | None, robot_id: str | None = None) -> list[JournalEvent]:
        sql = self._pg.sql
        where = [sql.SQL("seq > %s")]
        params: list[Any] = [int(after_seq)]
        if mission_id is not None:
            where.append(sql.SQL("mission_id = %s"))
            params.append(mission_id)
        if robot_id is not None:
            where.append(sql.SQL("robot_id = %s"))
            params.append(robot_id)
        if wanted is not None:
            where.append(sql.SQL("type = ANY(%s)"))
            params.append([t.value for t in wanted])
        query = sql.SQL("SELECT {} FROM events WHERE {} ORDER BY seq").format(
            sql.SQL(", ").join(map(sql.Identifier, EVENT_COLUMNS)), sql.SQL(" AND ").join(where))
        if limit is not None:
            query += sql.SQL(" LIMIT %s")
            params.append(int(limit))
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            rows = tx.cur.execute(query, params).fetchall()
        return [event_from_row(r) for r in rows]

    def last_seq(self) -> int:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            return int(tx.one("SELECT COALESCE(MAX(seq), 0) FROM events"))

    def get_snapshot(self, snapshot_id: str) -> WorldSnapshot:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            text = tx.one("SELECT json FROM snapshots WHERE snapshot_id = %s", (snapshot_id,))
        if text is None:
            raise UnknownSnapshot(snapshot_id)
        return WorldSnapshot.model_validate_json(text)

    def _put_tape(self, mission_id: str, blob: bytes, readings: int, ports_json: str) -> None:
        self._ensure_ready()
        with self._transaction(write=True) as tx:
            if tx.one("SELECT 1 FROM decision_tapes WHERE mission_id = %s", (mission_id,)):
                raise JournalWriteError(f"mission {mission_id} has a decision tape already", pg_error=None,
                                        sqlstate=None, url=self.url)
            tx.cur.execute(
                "INSERT INTO decision_tapes (mission_id, format_version, recorded_at, readings, ports, entries)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (mission_id, TAPE_FORMAT_VERSION, self._clock.now(), readings, ports_json, blob))

    def _get_tape(self, mission_id: str) -> tuple[bytes, str] | None:
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            row = tx.cur.execute("SELECT entries, ports FROM decision_tapes WHERE mission_id = %s",
                                 (mission_id,)).fetchone()
        return None if row is None else (bytes(row[0]), str(row[1]))

    def _table(self, table: str, *columns: str) -> Any:
        """``table`` as an identifier, once it and ``columns`` are checked against CONFIG_TABLES/MEMORY_TABLES
        (the base class already did; a caller's text never reaches the SQL)."""
        key, cols, _ = _ROW_TABLES[table]
        unknown = set(columns) - {key, *cols}
        if unknown:
            raise UsageError(f"{table} has no column(s) {sorted(unknown)}")
        return self._pg.sql.Identifier(table)

    def _insert_row(self, table: str, key: str, values: dict[str, Any], expected_last_key: int | None) -> int:
        sql = self._pg.sql
        cols = (key, *values)
        ident = self._table(table, *cols)
        self._ensure_ready()
        with self._transaction(write=True) as tx:
            last = tx.one(sql.SQL("SELECT MAX({}) FROM {}").format(sql.Identifier(key), ident))
            last = -1 if last is None else int(last)
            if expected_last_key is not None and last != expected_last_key:
                raise StaleRevision(f"{table} moved: its last row is {last}, not {expected_last_key}",
                                    table=table, last=last)
            new = max(last, 0) + 1
            tx.cur.execute(
                sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                    ident, sql.SQL(", ").join(map(sql.Identifier, cols)),
                    sql.SQL(", ").join(sql.Placeholder() * len(cols))),
                # SQLite keeps a bool as 0/1; PostgreSQL would not put a boolean into an INTEGER column
                (new, *(int(v) if isinstance(v, bool) else v for v in values.values())))
            return new

    def _select_rows(self, table: str, key: str, columns: tuple[str, ...],
                     where: tuple[str, Any] | None = None) -> list[dict[str, Any]]:
        sql = self._pg.sql
        ident = self._table(table, key, *columns, *((where[0],) if where else ()))
        query = sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(map(sql.Identifier, columns)), ident)
        if where is not None:
            query += sql.SQL(" WHERE {} = %s").format(sql.Identifier(where[0]))
        query += sql.SQL(" ORDER BY {}").format(sql.Identifier(key))
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            rows = tx.cur.execute(query, (where[1],) if where else ()).fetchall()
        return [dict(zip(columns, r)) for r in rows]

    def _last_key(self, table: str, key: str) -> int:
        sql = self._pg.sql
        ident = self._table(table, key)
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            last = tx.one(sql.SQL("SELECT MAX({}) FROM {}").format(sql.Identifier(key), ident))
        return -1 if last is None else int(last)

    def missions(self, *, robot_id: str | None = None) -> list[dict[str, Any]]:
        robot = None if robot_id is None else robot_id_of(robot_id)
        by_robot, params = ("", []) if robot is None else (" AND robot_id = %s", [robot])
        cols = ", ".join(EVENT_COLUMNS)  # fixed names, not a caller's text
        self._ensure_ready()
        with self._transaction(write=False) as tx:
            spans = tx.cur.execute(
                "SELECT mission_id, MIN(seq), MAX(seq), COUNT(*),"
                " (SELECT e.robot_id FROM events e WHERE e.mission_id = events.mission_id ORDER BY e.seq LIMIT 1)"
                f" FROM events WHERE mission_id <> ''{by_robot} GROUP BY mission_id", params).fetchall()
            marks = tx.cur.execute(
                f"SELECT {cols} FROM events WHERE type = ANY(%s) AND mission_id <> ''{by_robot} ORDER BY seq",
                [[t.value for t in _MISSION_MARKS], *params]).fetchall()
        return summarize_missions(spans, (event_from_row(r) for r in marks))
