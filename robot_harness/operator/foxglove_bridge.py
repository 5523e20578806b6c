"""A live Foxglove view of the running mission: the journal, followed read-only, over Foxglove's WebSocket protocol.

The bridge reads the supervisor's SQLite journal through a read-only
connection (it cannot write, and it never takes the writer's lock; a file
from before robot ids, which it cannot migrate, reads as one robot), or a
fleet's PostgreSQL journal through the ``Journal`` API, polls
for events past the last seq it has seen, folds them with
:class:`robot_harness.evidence.foxglove.DerivedTopics` (the fold the mission
bags are written with) and publishes the result as JSON channels with JSON
schemas through the ``foxglove-sdk`` package (:data:`LIVE_CHANNELS`): the
harness's log lines, the robot's pose, the path so far, the named places and
their labels, action states, progress, snapshots (every field with its
availability and age) and verdicts. Open ``ws://127.0.0.1:8765`` in Foxglove
(Open connection > Foxglove WebSocket) with ``config/foxglove_layout.json``.

It holds no authority: it has no write path to the journal and offers
Foxglove nothing to call or publish (no client-publish, services or
parameters). The server has no authentication, so it binds to loopback
unless told otherwise.

A viewer that connects mid-mission gets, when it subscribes, the latest
message of every channel and the last :data:`LOG_BACKLOG` log lines (other
viewers already subscribed see those again). The SDK keeps no history of
its own: a channel's messages reach only the clients subscribed when they
are logged.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from . import is_loopback
from .dashboard import event_columns
from ..core.errors import HarnessError, UsageError
from ..core.journal import (
    Journal,
    JournalReadError,
    connect_read_only,
    event_from_row,
    is_database_url,
    redact_url,
)
from ..core.records import EventType, JournalEvent
from ..evidence.foxglove import LIVE_CHANNELS, LOG_TOPIC, DerivedTopics, layout_json, to_live_json

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "LOG_BACKLOG",
    "FoxgloveBridge",
    "JournalFollower",
    "add_arguments",
    "main",
    "run",
    "serve",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
LOG_BACKLOG = 200
"""Log lines a viewer gets when it subscribes to the log mid-mission."""

_BATCH = 500
_log = logging.getLogger(__name__)


class JournalFollower:
    """New events of a journal: a SQLite file through a read-only connection, or a fleet's ``postgresql://``
    database through the ``Journal`` API (its schema is set up if it has none yet, as the dashboard does).

    Opening refuses a path that is not a file (:class:`UsageError`) and a file
    SQLite cannot read, or a database that does not answer (:class:`JournalReadError`).
    A journal with no tables yet reads as empty; a file from before robot ids
    (migration 0006, which a read-only reader cannot apply) reads as the robot
    without a namespace. ``path`` is the file, or the URL with its password
    redacted. Not thread-safe: one thread reads.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 1.0) -> None:
        self._conn: sqlite3.Connection | None = None
        self._journal: Journal | None = None
        self._cols = ""
        if is_database_url(path):
            from ..core.clock import IdGenerator, SystemClock
            from ..core.journal import open_journal

            self.path: str | Path = redact_url(str(path))
            self._journal = open_journal(str(path), clock=SystemClock(), ids=IdGenerator(None),
                                         busy_timeout_ms=int(busy_timeout_s * 1000))
        else:
            self.path = Path(path)
            if not self.path.is_file():
                raise UsageError(f"no journal at {self.path}", path=str(self.path))
            try:
                self._conn = connect_read_only(self.path, timeout_s=busy_timeout_s)
                self._conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            except sqlite3.Error as exc:
                raise JournalReadError(f"cannot read the journal {self.path}: {exc}", path=str(self.path),
                                       sqlite_error=str(exc)) from exc
        self.skipped = 0
        """Events read but not understood (a newer format), passed over."""

    def read(self, *, after_seq: int, limit: int = _BATCH) -> tuple[list[JournalEvent], int]:
        """Up to ``limit`` events with seq > ``after_seq``, and the last seq read (passed-over events included)."""
        if self._journal is not None:
            events = self._journal.events(after_seq=int(after_seq), limit=int(limit))
            return events, (events[-1].seq if events else after_seq)
        assert self._conn is not None
        try:
            rows = self._conn.execute(f"SELECT {self._columns()} FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                                      (int(after_seq), int(limit))).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return [], after_seq
            raise
        events: list[JournalEvent] = []
        last = after_seq
        for row in rows:
            last = int(row[0])  # EVENT_COLUMNS begin with seq
            try:
                events.append(event_from_row(row))
            except (ValueError, ValidationError):
                self.skipped += 1
        return events, last

    def _columns(self) -> str:
        """The columns to select (``dashboard.event_columns``), checked until the file has robot ids."""
        assert self._conn is not None
        if self._cols:
            return self._cols
        cols, has_robot_ids = event_columns(self._conn)
        if has_robot_ids:
            self._cols = cols
        return cols

    def start_seq(self, mission_id: str | None = None) -> int:
        """Where following begins: just before the latest ``MISSION_STARTED`` (of ``mission_id`` if given),
        so the path and places are whole; the journal's end when there is none."""
        if self._journal is not None:
            started = self._journal.events(mission_id=mission_id or None, types=[EventType.MISSION_STARTED])
            return started[-1].seq - 1 if started else self._journal.last_seq()
        assert self._conn is not None
        try:
            sql = "SELECT MAX(seq) FROM events WHERE type = ?"
            params: list[Any] = [EventType.MISSION_STARTED.value]
            if mission_id:
                sql += " AND mission_id = ?"
                params.append(mission_id)
            (seq,) = self._conn.execute(sql, params).fetchone()
            if seq is not None:
                return int(seq) - 1
            (last,) = self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
            return int(last)
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._journal is not None:
            self._journal.close()


class _Listener:
    """Notes which channels viewers subscribe to (called on the SDK's threads)."""

    def __init__(self, on_subscribe: Callable[[str], None]) -> None:
        self._on_subscribe = on_subscribe

    def on_subscribe(self, client: Any, channel: Any) -> None:
        self._on_subscribe(channel.topic)

    def on_unsubscribe(self, client: Any, channel: Any) -> None:
        return None


class FoxgloveBridge:
    """A running bridge (see :func:`serve`): ``port``, ``url``, :meth:`stop`.

    One thread polls the journal every ``poll_s`` seconds and publishes; a
    failed read is logged, counted in ``errors`` and retried at the next poll.
    """

    def __init__(self, follower: JournalFollower, *, host: str, port: int, poll_s: float,
                 mission_id: str | None, name: str) -> None:
        import foxglove

        if poll_s <= 0:
            raise UsageError("poll_s must be > 0", poll_s=poll_s)
        self._follower = follower
        self._poll_s = float(poll_s)
        self._mission_id = mission_id
        self._derived = DerivedTopics()
        self._after_seq = follower.start_seq(mission_id)
        self._lock = threading.Lock()
        self._resend: set[str] = set()
        self._latest: dict[str, tuple[dict[str, Any], float]] = {}
        self._log_backlog: collections.deque[tuple[dict[str, Any], float]] = collections.deque(maxlen=LOG_BACKLOG)
        self._stop = threading.Event()
        self.published = 0
        self.errors = 0
        self._context = foxglove.Context()
        self._channels = {topic: foxglove.Channel(topic, schema=schema, context=self._context)
                          for topic, schema in LIVE_CHANNELS.items()}
        try:
            self._server = foxglove.start_server(
                name=name, host=host, port=port, context=self._context, capabilities=[],
                server_listener=_Listener(self._subscribed))
        except Exception as exc:  # the SDK raises RuntimeError for an address in use or not ours
            raise UsageError(f"cannot listen on {host}:{port}: {exc}", host=host, port=port) from exc
        self.host = host
        self.port = int(self._server.port)
        self._thread = threading.Thread(target=self._loop, name="foxglove-bridge", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}"

    @property
    def last_seq(self) -> int:
        """The last journal seq the bridge has read."""
        with self._lock:
            return self._after_seq

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop polling, close the server and the journal connection; idempotent."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
        self._server.stop()
        with contextlib.suppress(sqlite3.Error, HarnessError):
            self._follower.close()

    def __enter__(self) -> FoxgloveBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals -------------------------------------------------------------------

    def _subscribed(self, topic: str) -> None:
        with self._lock:
            self._resend.add(topic)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._poll()
            except Exception as exc:  # noqa: BLE001 - a bad read must not end the bridge; retried next poll
                self.errors += 1
                _log.warning("foxglove bridge: reading %s failed: %s", self._follower.path, exc)
            self._stop.wait(self._poll_s)

    def _poll(self) -> None:
        with self._lock:
            resend, self._resend = self._resend, set()
        for topic in resend:
            backlog = list(self._log_backlog) if topic == LOG_TOPIC else \
                [self._latest[topic]] if topic in self._latest else []
            for message, stamp in backlog:
                self._publish(topic, message, stamp, remember=False)
        while not self._stop.is_set():
            events, last = self._follower.read(after_seq=self._after_seq)
            for event in events:
                if self._mission_id and event.mission_id and event.mission_id != self._mission_id:
                    continue
                try:
                    for item in self._derived.feed(event):
                        for topic, message, stamp in to_live_json(item):
                            self._publish(topic, message, stamp)
                except Exception as exc:  # one odd event is skipped (and said), never replayed forever
                    _log.warning("foxglove bridge: event %s (%s) skipped: %s", event.seq, event.type.value, exc)
            with self._lock:
                done = last == self._after_seq
                self._after_seq = last
            if done:
                return

    def _publish(self, topic: str, message: dict[str, Any], stamp: float, *, remember: bool = True) -> None:
        if remember:
            if topic == LOG_TOPIC:
                self._log_backlog.append((message, stamp))
            else:
                self._latest[topic] = (message, stamp)
        self._channels[topic].log(message, log_time=_ns(stamp))
        self.published += 1


def _ns(stamp: float) -> int:
    return max(0, round(stamp * 1e9))


def serve(journal_path: str | Path, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, poll_s: float = 0.2,
          mission_id: str | None = None, name: str = "robot_harness") -> FoxgloveBridge:
    """Follow ``journal_path`` and serve it to Foxglove on ``host:port`` (``port=0``: any free port).

    ``journal_path``: a SQLite file or a fleet's ``postgresql://`` URL.
    Starts from the latest mission's ``MISSION_STARTED`` (of ``mission_id``,
    which also filters the events, if given). Raises :class:`UsageError` when
    there is no journal file or the ``foxglove-sdk`` package is missing, and
    :class:`JournalReadError` when SQLite cannot read the file or the database
    does not answer.
    """
    try:
        import foxglove  # noqa: F401
    except ImportError as exc:
        raise UsageError("the live bridge needs the foxglove-sdk package (pip install foxglove-sdk)") from exc
    follower = JournalFollower(journal_path)
    try:
        return FoxgloveBridge(follower, host=host, port=port, poll_s=poll_s, mission_id=mission_id, name=name)
    except BaseException:
        follower.close()
        raise


# --------------------------------------------------------------------------- command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The bridge's options (for ``robot-harness foxglove`` and :func:`main`)."""
    from ..cli import journal_arg

    journal_arg(p, what="the journal to follow (read-only)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help="address to listen on (default 127.0.0.1; the server has no authentication)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--mission", default=None, help="follow only this mission (default: the latest, then each new one)")
    p.add_argument("--poll", type=float, default=0.2, help="seconds between journal reads (default 0.2)")
    p.add_argument("--print-layout", action="store_true",
                   help="print the Foxglove layout (config/foxglove_layout.json) and exit")


def run(args: argparse.Namespace, *, info: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
        write: Callable[[str], None] | None = None, stop: threading.Event | None = None) -> int:
    """Serve until ``stop`` is set (or SIGINT/SIGTERM when run on the main thread); returns 0.

    Errors are raised (:class:`UsageError`, :class:`JournalReadError`) for the caller to map to an exit code.
    """
    if args.print_layout:
        (write or sys.stdout.write)(layout_json())
        return 0
    if not is_loopback(args.host):
        info(f"warning: listening on {args.host}: anyone who can reach it sees the mission (no authentication)")
    from ..cli import journal_target_of

    journal = journal_target_of(args.journal)
    stop = stop or threading.Event()
    restore: list[tuple[int, Any]] = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            restore.append((sig, signal.signal(sig, lambda *_: stop.set())))
    try:
        bridge = serve(journal, host=args.host, port=args.port, poll_s=args.poll, mission_id=args.mission)
        with bridge:
            info(f"Foxglove bridge on {bridge.url} following {redact_url(journal)}")
            info("open it in Foxglove: Open connection > Foxglove WebSocket; layout: config/foxglove_layout.json")
            while not stop.wait(0.5):
                pass
    finally:
        for sig, handler in restore:
            signal.signal(sig, handler)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m robot_harness.operator.foxglove_bridge``: exit 0 when stopped, 2 on bad usage, 5 when the
    journal cannot be read or its database does not answer (the codes ``robot-harness`` uses)."""
    p = argparse.ArgumentParser(prog="robot-harness foxglove",
                                description="Serve the running mission to Foxglove over WebSocket (read-only).")
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except UsageError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except HarnessError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 5


if __name__ == "__main__":
    sys.exit(main())
