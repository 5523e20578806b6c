"""The live mission dashboard: a small web app over the journal, with operator actions.

Reads and writes are kept apart on purpose:

* **Reads** come from the SQLite journal, opened read-only (``mode=ro``),
  live beside the supervisor that writes it (WAL: readers never block the
  writer), or from a fleet's PostgreSQL database through the ``Journal`` API
  (read-only snapshots; every robot's missions, each with its robot, and the
  fleet's leases). Every view is folded from journal events by the ROS-free
  ``core.mission_view``; the page shows what the journal says and nothing
  else. The live feed is Server-Sent Events on the journal's ``seq``.
* **Writes** (send a mission, answer an approval or question, Stop) go
  through an ``OperatorPort``. ``RosOperatorPort`` talks to the running
  supervisor the way ``client.py`` and ``robot-harness stop`` do (the Mission
  action, ``~/stop``) and records answers in the journal exactly like
  ``robot-harness answer`` (``core.interactions.resolve``: a token the
  interaction's approval policy accepts, compared as a keyed digest with the
  key beside the journal; first answer wins). The dashboard holds no
  authority of its own: an approval still needs the owner's token (policy
  ``owner``) or an operator's that is not the mission sender's (policy
  ``operator``), and only the verifier and the commit gate make a mission
  SUCCEEDED.

Security: the server binds 127.0.0.1 by default. It refuses a non-loopback
host unless an operator token is configured; with a token configured, every
write must carry it as ``Authorization: Bearer <token>``. Writes must be JSON
(a cross-site form cannot send it without a CORS preflight, which is never
granted), a browser ``Origin`` must match the ``Host``, and on loopback the
``Host`` must be a loopback name (DNS rebinding). Reads are not
authenticated: bind beyond loopback only on a network you trust with the
mission data.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import hashlib
import hmac
import json
import os
import re
import signal
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import is_loopback
from ..core.engine import MAX_GOAL_CHARS
from ..core.errors import BackendUnavailable, HarnessError, HarnessTimeout, MissionRefused, RefusalError, UsageError
from ..core.durable import INDEXED_TYPES, SITE, DurableIndex
from ..core.journal import (
    EVENT_COLUMNS,
    Journal,
    JournalReadError,
    connect_read_only,
    event_from_row,
    index_event,
    is_database_url,
    redact_url,
    robot_id_of,
    summarize_missions,
)
from ..core.mission_view import mission_view, missions_list
from ..core.records import EventType, JournalEvent

__all__ = [
    "TOKEN_ENV",
    "DashboardHandle",
    "JournalReader",
    "OperatorPort",
    "RosOperatorPort",
    "create_app",
    "event_columns",
    "main",
    "robot_of_stop_service",
    "serve",
]

TOKEN_ENV = "ROBOT_HARNESS_OPERATOR_TOKEN"
"""Default environment variable holding the operator token (the same one ``robot-harness answer`` reads)."""

PAGE = Path(__file__).with_name("dashboard.html")
_MAX_BODY_BYTES = 64 * 1024
_KEEPALIVE_S = 15.0
_MISSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
_INTERACTION_TYPES = (EventType.INTERACTION_REQUESTED, EventType.INTERACTION_RESOLVED)


# ============================================================================ reading


def event_columns(conn: sqlite3.Connection) -> tuple[str, bool]:
    """What a read-only reader selects from a SQLite journal's ``events`` (``EVENT_COLUMNS``, comma-separated,
    in order, for ``event_from_row``), and whether the file has robot ids. A reader cannot migrate the file,
    so one from before migration 0006 has no ``robot_id`` column: it is selected as '' (the robot without a
    namespace, whose events those are). The column never goes away once there: a reader may keep a True."""
    has = any(r[1] == "robot_id" for r in conn.execute("PRAGMA table_info(events)"))
    cols = EVENT_COLUMNS if has else tuple("'' AS robot_id" if c == "robot_id" else c for c in EVENT_COLUMNS)
    return ", ".join(cols), has


class JournalReader:
    """A read-only, thread-safe view of a journal, live while others write it.

    ``path`` is a SQLite file or a fleet's ``postgresql://`` database. The file is opened ``mode=ro``: it
    is never written, checkpointed or created, and may not exist yet (the dashboard started before the
    supervisor): every read then returns nothing, and the file is opened once it appears. A database is
    read through the ``Journal`` API (each read one snapshot; the schema is set up if the database has
    none yet). Each mission's events are cached and extended incrementally by ``seq``; the missions list
    is recomputed only when the journal grew; the leases are folded from the lease events as they come.
    ``path`` is the file, or the URL with its password redacted.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 2.0, cache_missions: int = 8) -> None:
        self._url = str(path) if is_database_url(path) else ""
        self.path: str | Path = redact_url(self._url) if self._url else Path(path).expanduser()
        self._timeout = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._journal: Journal | None = None
        self._lock = threading.Lock()
        self._cache: collections.OrderedDict[str, list[JournalEvent]] = collections.OrderedDict()
        self._cache_size = cache_missions
        self._missions: tuple[int, list[dict[str, Any]]] | None = None
        self._index = DurableIndex()  # a file's leases, folded from its lease events
        self._robot_column = False  # the file's events carry robot_id (migration 0006)

    def exists(self) -> bool:
        """Whether there is a journal to read yet (a database is always there to ask)."""
        return bool(self._url) or Path(self.path).exists()

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and Path(self.path).exists():
            self._conn = connect_read_only(self.path, timeout_s=self._timeout, isolation_level=None)
        return self._conn

    def _query(self, fn: Callable[[sqlite3.Connection], Any], empty: Any) -> Any:
        """``fn(conn)`` inside one read transaction (a consistent snapshot of the file); ``empty``
        when there is no journal file, or no schema in it, yet."""
        with self._lock:
            try:
                conn = self._connect()
                if conn is None:
                    return empty
                conn.execute("BEGIN")
                try:
                    return fn(conn)
                finally:
                    if conn.in_transaction:
                        conn.execute("COMMIT")  # ends the read transaction; nothing was written
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):  # the supervisor has not set the file up yet
                    return empty
                raise JournalReadError(f"reading the journal {self.path} failed: {exc}", path=str(self.path),
                                       sqlite_error=str(exc)) from exc
            except sqlite3.Error as exc:
                raise JournalReadError(f"reading the journal {self.path} failed: {exc}", path=str(self.path),
                                       sqlite_error=str(exc)) from exc

    def _api(self, fn: Callable[[Journal], Any]) -> Any:
        """``fn(journal)`` on the database (opened at first use, and again after a failed open)."""
        from ..core.clock import IdGenerator, SystemClock
        from ..core.journal import open_journal

        with self._lock:
            if self._journal is None:
                self._journal = open_journal(self._url, clock=SystemClock(), ids=IdGenerator(None),
                                             busy_timeout_ms=int(self._timeout * 1000))
            return fn(self._journal)

    def _columns(self, c: sqlite3.Connection) -> str:
        """The ``events`` columns to select (``event_columns``; checked until the file has robot ids)."""
        if self._robot_column:
            return ", ".join(EVENT_COLUMNS)
        cols, self._robot_column = event_columns(c)
        return cols

    _event = staticmethod(event_from_row)

    def last_seq(self) -> int:
        if self._url:
            return int(self._api(lambda j: j.last_seq()))
        return int(self._query(lambda c: c.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0], 0))

    def changed_missions(self, after_seq: int) -> tuple[int, list[str]]:
        """The journal's last seq and the mission ids with events after ``after_seq``."""
        if self._url:
            def read(j: Journal) -> tuple[int, list[str]]:
                new = j.events(after_seq=after_seq, limit=_FEED_BATCH)  # a long way behind: caught up in steps
                # with nothing new, never a seq past what was read: a commit in between is news next time
                last = new[-1].seq if new else min(max(after_seq, 0), j.last_seq())
                return last, list(dict.fromkeys(e.mission_id for e in new if e.mission_id))
            return self._api(read)

        def fn(c: sqlite3.Connection) -> tuple[int, list[str]]:
            last = int(c.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])
            ids = [r[0] for r in c.execute("SELECT DISTINCT mission_id FROM events WHERE seq > ? AND mission_id != ''",
                                           (int(after_seq),))]
            return last, ids
        return self._query(fn, (0, []))

    def missions(self, robot: str | None = None) -> list[dict[str, Any]]:
        """The picker's rows (``core.mission_view.missions_list``, each with its ``robot_id``), newest first;
        ``robot``: only that robot's. Recomputed only when the journal grew."""
        if self._url:
            def read(j: Journal) -> list[dict[str, Any]]:
                last = j.last_seq()
                cached = self._missions
                if cached is not None and cached[0] == last:
                    return cached[1]
                rows = _rows(j.missions(), j.events(types=_INTERACTION_TYPES))
                self._missions = (last, rows)  # under the reader's lock
                return rows
            rows = self._api(read)
        else:
            rows = self._query(self._file_missions, [])
        return rows if robot is None else [r for r in rows if r["robot_id"] == robot]

    def _file_missions(self, c: sqlite3.Connection) -> list[dict[str, Any]]:
        cols = self._columns(c)
        last = int(c.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])
        cached = self._missions
        if cached is not None and cached[0] == last:
            return cached[1]
        first_robot = ("(SELECT e.robot_id FROM events e WHERE e.mission_id = events.mission_id ORDER BY e.seq LIMIT 1)"
                       if self._robot_column else "''")
        spans = c.execute(f"SELECT mission_id, MIN(seq), MAX(seq), COUNT(*), {first_robot} FROM events"
                          " WHERE mission_id != '' GROUP BY mission_id").fetchall()
        marks = [self._event(r) for r in c.execute(
            f"SELECT {cols} FROM events WHERE type IN (?, ?, ?) AND mission_id != '' ORDER BY seq",
            tuple(t.value for t in _MISSION_MARKS))]
        asks = [self._event(r) for r in c.execute(
            f"SELECT {cols} FROM events WHERE type IN (?, ?) ORDER BY seq", tuple(t.value for t in _INTERACTION_TYPES))]
        rows = _rows(summarize_missions(spans, marks), asks)
        self._missions = (last, rows)  # under the reader's lock
        return rows

    def events(self, mission_id: str) -> list[JournalEvent]:
        """All events of one mission, in seq order (cached; only newer ones are read)."""
        with self._lock:
            cached = list(self._cache.get(mission_id, []))
        after = cached[-1].seq if cached else 0
        if self._url:
            new = self._api(lambda j: j.events(mission_id=mission_id, after_seq=after))
        else:
            new = self._query(lambda c: [self._event(r) for r in c.execute(
                f"SELECT {self._columns(c)} FROM events WHERE mission_id = ? AND seq > ? ORDER BY seq",
                (mission_id, after))], [])
        events = cached + new
        if events:
            with self._lock:
                self._cache[mission_id] = events
                self._cache.move_to_end(mission_id)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return events

    def mission_robot(self, mission_id: str) -> str | None:
        """The robot whose mission ``mission_id`` is (None: the journal has no such mission, yet)."""
        return next((m["robot_id"] for m in self.missions() if m["mission_id"] == mission_id), None)

    def interaction_mission(self, interaction_id: str) -> str | None:
        """The mission that asked ``interaction_id`` (None: no mission asked it)."""
        asked = (EventType.INTERACTION_REQUESTED,)
        if self._url:
            events = self._api(lambda j: j.events(types=asked))
        else:
            events = self._query(lambda c: [self._event(r) for r in c.execute(
                f"SELECT {self._columns(c)} FROM events WHERE type = ? ORDER BY seq", (asked[0].value,))], [])
        from ..core.interactions import interactions

        asked_by = interactions(events).get(interaction_id)
        return asked_by.mission_id if asked_by is not None else None

    def leases(self, robot: str | None = None) -> list[dict[str, Any]]:
        """The leases in force, every robot's (``robot``: the ones that robot sees, its own and the site's), by
        ``Lease.key``: each with the robot holding it, its scope and its fencing token."""
        if self._url:
            held = self._api(lambda j: j.all_leases())
        else:
            held = self._query(self._file_leases, {})
        return [{**lease.model_dump(mode="json"), "key": key} for key, lease in sorted(held.items())
                if robot is None or lease.scope == SITE or lease.robot_id == robot]

    def _file_leases(self, c: sqlite3.Connection) -> dict[str, Any]:
        self._columns(c)
        robot = "robot_id" if self._robot_column else "''"
        wanted = sorted(t.value for t in INDEXED_TYPES)
        rows = c.execute(
            f"SELECT seq, type, mission_id, tool_call_id, robot_action_id, payload, {robot} FROM events"
            f" WHERE seq > ? AND type IN ({', '.join('?' * len(wanted))}) ORDER BY seq",
            (self._index.seq, *wanted)).fetchall()
        self._index.apply(index_event(*r) for r in rows)
        return dict(self._index.leases)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._journal is not None:
                self._journal.close()
                self._journal = None


_MISSION_MARKS = (EventType.MISSION_STARTED, EventType.MISSION_FINISHED, EventType.MISSION_REFUSED)
_FEED_BATCH = 2000
"""At most this many events are read per poll of a database's feed (the rest on the next polls)."""


def _rows(summaries: list[dict[str, Any]], asks: list[JournalEvent]) -> list[dict[str, Any]]:
    """``missions_list``'s rows, each with the robot of its mission."""
    robots = {s["mission_id"]: s.get("robot_id") or "" for s in summaries}
    return [{**row, "robot_id": robots.get(row["mission_id"], "")}
            for row in missions_list(summaries, interaction_events=asks)]


def robots_of(missions: list[dict[str, Any]], leases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The robots a journal knows (from their missions and leases), each with its count of missions, of
    running ones, and of leases held."""
    out: dict[str, dict[str, Any]] = {}
    for m in missions:
        row = out.setdefault(m["robot_id"], {"robot_id": m["robot_id"], "missions": 0, "running": 0, "leases": 0})
        row["missions"] += 1
        row["running"] += not m["finished"]
    for lease in leases:
        rid = lease.get("robot_id") or ""
        out.setdefault(rid, {"robot_id": rid, "missions": 0, "running": 0, "leases": 0})["leases"] += 1
    return sorted(out.values(), key=lambda r: r["robot_id"])


# ============================================================================ writing


@runtime_checkable
class OperatorPort(Protocol):
    """What the dashboard may ask of the harness. Each method raises a ``HarnessError`` to refuse
    (``UsageError`` for bad input, ``NotAuthorized``, ``CommandConflict``, ``BackendUnavailable``,
    ``HarnessTimeout``...) and returns a JSON-ready dict on success."""

    def send_mission(self, *, goal: str, mission_id: str, owner: str, owner_token: str,
                     overrides: Mapping[str, str]) -> dict[str, Any]:
        """Hand the goal to the supervisor; return once it is accepted (``{"mission_id", "accepted"}``)."""

    def resolve_interaction(self, *, interaction_id: str, resolution: str, token: str, answer: str, choice: str,
                            operator: str) -> dict[str, Any]:
        """Record an answer (``{"recorded", "interaction"}``); the first answer wins."""

    def stop(self, *, mission_id: str, reason: str) -> dict[str, Any]:
        """Stop the running mission (``{"ok", "detail"}``)."""


def _wait(fut: Any, timeout_s: float, what: str) -> Any:
    done = threading.Event()
    fut.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout_s):
        raise HarnessTimeout(f"{what} within {timeout_s} s", timeout_s=timeout_s)
    return fut.result()


def _send_until_answered(send: Callable[[], Any], *, mission_id: str, answer_timeout_s: float,
                         max_sends: int) -> Any:
    """Send a goal (``send()`` returns a future of its goal handle) until one send is accepted.

    A send unanswered for ``answer_timeout_s`` (lost in discovery, a
    supervisor restarting) is repeated with the same mission id, which the
    supervisor never runs twice; a late acceptance of an earlier send still
    counts, so a repeat refused because the first is already running is not
    taken for a refusal. Refused only when every send was answered and none
    accepted; ``HarnessTimeout`` after ``max_sends`` unanswered windows.
    """
    answered: list[Any] = []
    news = threading.Event()

    def on_answer(fut: Any) -> None:
        with contextlib.suppress(Exception):  # a send that failed outright counts as unanswered
            answered.append(fut.result())
        news.set()

    sent, window_ends = 0, 0.0
    while True:
        handle = next((h for h in list(answered) if h.accepted), None)
        if handle is not None:
            return handle
        if sent and len(answered) == sent:
            raise RefusalError("the supervisor refused the mission (another mission is running, the robot's backend "
                               "is not active, or the goal or an override is invalid; its log says which)",
                               mission_id=mission_id)
        if time.monotonic() >= window_ends:
            if sent == max_sends:
                raise HarnessTimeout(f"the supervisor never answered {sent} sends of mission {mission_id}; send it "
                                     "again with the same mission id", mission_id=mission_id)
            send().add_done_callback(on_answer)
            sent, window_ends = sent + 1, time.monotonic() + answer_timeout_s
        news.wait(0.05)
        news.clear()


class RosOperatorPort:
    """Operator actions on a running harness over ROS, and answers through the journal.

    ``node`` must be spun by the caller's executor (``BringUp.add_node``, or a
    ``BackgroundSpinner``); the methods run on other threads (the web
    server's) and wait, bounded, on the futures it completes. A mission goal
    carries the mission id the dashboard chose, so a lost answer is re-sent
    with the same id and the supervisor never runs it twice
    (``_send_until_answered``; the wait per send is longer than the
    supervisor's own admission check, up to 5 s for the backend's state).
    """

    def __init__(self, node: Any, *, journal_path: str | Path, mission_action: str = "/robot_harness/mission",
                 stop_service: str = "/supervisor/stop", timeout_s: float = 10.0, answer_timeout_s: float = 15.0,
                 max_sends: int = 3, admission_timeout_s: float = 10.0) -> None:
        from ..action import Mission
        from ..nodes._util import ActionClient  # rclpy's, safe to create under a spinning executor
        from ..srv import Stop

        self.node = node
        self.journal_path: str | Path = str(journal_path) if is_database_url(journal_path) \
            else Path(journal_path).expanduser()
        self.timeout_s = timeout_s
        self.answer_timeout_s = answer_timeout_s
        self.max_sends = max_sends
        self.admission_timeout_s = admission_timeout_s
        self._Mission, self._Stop = Mission, Stop
        self._action = ActionClient(node, Mission, mission_action)
        self._stop = node.create_client(Stop, stop_service)
        self._lock = threading.Lock()
        self._results: dict[str, Any] = {}  # keeps each goal's result future alive until it arrives

    def send_mission(self, *, goal: str, mission_id: str, owner: str, owner_token: str,
                     overrides: Mapping[str, str]) -> dict[str, Any]:
        from diagnostic_msgs.msg import KeyValue

        if not self._action.wait_for_server(timeout_sec=self.timeout_s):
            raise BackendUnavailable(f"no mission server answers within {self.timeout_s} s (is the harness running?)")
        msg = self._Mission.Goal(goal=goal, mission_id=mission_id, owner=owner, owner_token=owner_token,
                                 overrides=[KeyValue(key=k, value=str(v)) for k, v in overrides.items()])
        admitted = threading.Event()  # the first feedback: the mission was admitted and runs
        with self._lock:  # one send at a time: a retry must not race a second mission
            handle = _send_until_answered(
                lambda: self._action.send_goal_async(msg, feedback_callback=lambda _fb: admitted.set()),
                mission_id=mission_id, answer_timeout_s=self.answer_timeout_s, max_sends=self.max_sends)
        fut = handle.get_result_async()
        self._results[mission_id] = fut
        fut.add_done_callback(lambda _f: (self._results.pop(mission_id, None), admitted.set()))
        # A refusal (busy, navigator not active, no fresh pose...) is the goal's result, with no feedback
        # before it: wait for whichever comes first, so the operator is told why, not "accepted".
        admitted.wait(self.admission_timeout_s)
        if fut.done():
            result = fut.result().result
            if result.refusal:
                raise MissionRefused(f"mission {mission_id} was not run: {result.summary}", mission_id=mission_id,
                                     refusal=result.refusal)
        return {"mission_id": mission_id, "accepted": True}

    def resolve_interaction(self, *, interaction_id: str, resolution: str, token: str, answer: str, choice: str,
                            operator: str) -> dict[str, Any]:
        from ..core.interactions import interaction_robot
        from ..core.clock import IdGenerator, SystemClock
        from ..core.interactions import journal_token_hasher, resolve
        from ..core.journal import local_state_path, open_journal

        target = self.journal_path
        if isinstance(target, Path) and not target.exists():
            raise BackendUnavailable(f"no journal at {target}", path=str(target))
        journal = open_journal(target, clock=SystemClock(), ids=IdGenerator(None))
        try:
            robot = interaction_robot(journal, interaction_id)
        finally:
            journal.close()
        # journaled in the name of the robot whose mission asked, checked with that robot's token key
        hasher = journal_token_hasher(local_state_path(target, robot))
        journal = open_journal(target, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot)
        try:
            interaction, recorded = resolve(journal, interaction_id=interaction_id, resolution=resolution, token=token,
                                            clock=SystemClock(), answer=answer, choice=choice, operator=operator,
                                            hasher=hasher)
        finally:
            journal.close()
        return {"recorded": recorded, "interaction": interaction.view()}

    def stop(self, *, mission_id: str, reason: str) -> dict[str, Any]:
        if not self._stop.wait_for_service(timeout_sec=self.timeout_s):
            raise BackendUnavailable(f"no supervisor answers {self._stop.srv_name} (is the harness running?)")
        resp = _wait(self._stop.call_async(self._Stop.Request(mission_id=mission_id, reason=reason)), self.timeout_s,
                     "the supervisor did not answer the stop")
        if not resp.ok:
            raise RefusalError(resp.error or "the supervisor refused the stop", mission_id=mission_id)
        return {"ok": True, "detail": resp.error or "stop sent"}

    def destroy(self) -> None:
        self._action.destroy()
        self.node.destroy_client(self._stop)


# ============================================================================ the app


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class SendMission(_Body):
    goal: str = Field(min_length=1, max_length=MAX_GOAL_CHARS)
    mission_id: str = Field(default="", max_length=128)
    owner: str = Field(default="", max_length=128)
    owner_token: str = Field(default="", max_length=512)
    overrides: dict[str, str | int | float | bool] = Field(default_factory=dict)
    robot: str | None = Field(default=None, max_length=256)
    """The robot the mission is for (the page sends the one it shows); None: this dashboard's own."""


class Answer(_Body):
    resolution: Literal["approve", "deny", "dismiss", "answer"]
    answer: str = Field(default="", max_length=4000)
    choice: str = Field(default="", max_length=256)
    token: str = Field(default="", max_length=512)
    operator: str = Field(default="", max_length=128)
    mission_id: str = Field(default="", max_length=128)
    """The mission on screen (the interaction's own mission, from the journal, comes first)."""


class StopBody(_Body):
    mission_id: str = Field(default="", max_length=128)
    """The mission on screen: it names the robot to stop (which then stops whatever it runs)."""
    reason: str = Field(default="operator stop (dashboard)", max_length=500)


_STATUS = {"not_authorized": 403, "not_found": 404, "command_conflict": 409, "backend_unavailable": 503,
           "journal_read_failed": 503, "journal_write_failed": 503, "timeout": 504, "token_key": 503}


def _error_status(exc: HarnessError) -> int:
    if exc.code in _STATUS:
        return _STATUS[exc.code]
    return 400 if isinstance(exc, UsageError) else 409


def _shown(robot_id: str) -> str:
    """A robot id as people write it: its namespace, ``/`` for the robot without one."""
    return robot_id or "/"


def _script_hashes(page: str, tag: str) -> list[str]:
    return ["'sha256-" + base64.b64encode(hashlib.sha256(m.encode()).digest()).decode() + "'"
            for m in re.findall(rf"<{tag}>(.*?)</{tag}>", page, flags=re.S)]


def create_app(*, reader: JournalReader, operator: OperatorPort | None = None, token: str = "",
               loopback_only: bool = True, clock: Callable[[], float] = time.time, poll_interval_s: float = 0.25,
               stopping: threading.Event | None = None, robot: str | None = None,
               operator_robot: str | None = None) -> Any:
    """The Starlette app. ``token`` (non-empty) is required as a bearer token on every write;
    ``loopback_only`` makes it refuse requests whose ``Host`` is not a loopback name;
    ``stopping`` ends live feeds (the server sets it on shutdown); ``robot``: the robot whose missions and
    leases are listed when a request names none (None: every robot's).

    ``operator_robot``: the robot whose supervisor ``operator`` reaches (its robot id). Then a Stop, a
    send or an answer for another robot's mission, or a send for another robot, is refused (409
    ``other_robot``, naming whose it is) before it reaches the port, and with no ``robot`` the list
    defaults to this one's missions when the journal holds it and other robots. None: the port is not tied to
    a robot (as a single robot's dashboard always was), and nothing is checked."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    page = PAGE.read_text(encoding="utf-8")
    csp = ("default-src 'none'; script-src " + " ".join(_script_hashes(page, "script")) + "; style-src "
           + " ".join(_script_hashes(page, "style")) + "; connect-src 'self'; img-src 'self' data:;"
           " base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    page_headers = {"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Frame-Options": "DENY"}
    stopping = stopping or threading.Event()
    run = asyncio.to_thread
    controls = None if operator is None or operator_robot is None else robot_id_of(operator_robot)

    def error(status: int, code: str, message: str, **details: Any) -> JSONResponse:
        return JSONResponse({"error": code, "message": message, **details}, status_code=status,
                            headers={"WWW-Authenticate": "Bearer"} if status == 401 else None)

    def host_ok(request: Request) -> bool:
        host = request.headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host[1:host.find("]")]
        return not loopback_only or is_loopback(name)

    async def guard_read(request: Request) -> JSONResponse | None:
        if not host_ok(request):
            return error(403, "forbidden_host", "this dashboard answers only to a loopback Host name")
        return None

    async def guard_write(request: Request) -> tuple[JSONResponse | None, dict[str, Any], str]:
        """The checks every write passes, cheapest first; returns (the refusal or None, the body, the bearer token)."""
        bad = await guard_read(request)
        if bad is not None:
            return bad, {}, ""
        origin = request.headers.get("origin")
        if origin is not None and origin.split("://", 1)[-1] != request.headers.get("host", ""):
            return error(403, "cross_origin", f"writes from origin {origin} are refused"), {}, ""
        bearer = ""
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            bearer = auth[7:].strip()
        if token and not hmac.compare_digest(bearer.encode(), token.encode()):
            return error(401, "unauthenticated", "this dashboard requires the operator token as a bearer token"
                         " on every write" + (" (the one presented is wrong)" if bearer else "")), {}, ""
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return error(415, "unsupported_media_type", "send the body as application/json"), {}, bearer
        raw = b""
        async for chunk in request.stream():  # bounded: a huge body is refused, never held
            raw += chunk
            if len(raw) > _MAX_BODY_BYTES:
                return error(413, "too_large", f"the body is over {_MAX_BODY_BYTES} bytes"), {}, bearer
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError) as exc:
            return error(400, "invalid_json", f"the body is not JSON: {exc}"), {}, bearer
        if not isinstance(body, dict):
            return error(400, "invalid_body", "the body must be a JSON object"), {}, bearer
        if operator is None:
            return error(503, "read_only", "this dashboard was started without an operator port (read-only)"), {}, bearer
        return None, body, bearer

    async def parse_write(request: Request, model: type[BaseModel]) -> tuple[JSONResponse | None, Any, str]:
        """A write's checks, then its body as ``model``: (the refusal or None, the request, the bearer token)."""
        bad, body, bearer = await guard_write(request)
        if bad is not None:
            return bad, None, bearer
        try:
            return None, model.model_validate(body), bearer
        except ValidationError as exc:
            return invalid(exc), None, bearer

    def invalid(exc: ValidationError) -> JSONResponse:
        problems = [{"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()]
        text = "; ".join(f"{p['field'] or 'body'}: {p['problem']}" for p in problems)
        return error(400, "invalid_request", text, problems=problems)

    async def robot_filter(request: Request, robots: list[dict[str, Any]] | None = None) -> str | None:
        """``?robot=``: a robot's namespace (``/`` or empty: the robot without one), ``*``: every robot;
        absent: the dashboard's ``--robot``, else the robot it controls when the journal holds it and others
        (``robots``: the journal's, if already read), else every robot. A name that is not a namespace is a 400."""
        given = request.query_params.get("robot")
        if given is not None:
            return None if given == "*" else robot_id_of(given)
        if robot is not None or controls is None:
            return robot
        if robots is None:
            robots = robots_of(await run(reader.missions), await run(reader.leases))
        several = len(robots) > 1 and any(r["robot_id"] == controls for r in robots)
        return controls if several else None

    def other_robot(what: str, *, robot_id: str, mission_id: str = "") -> JSONResponse:
        theirs = f"mission {mission_id} belongs to" if mission_id else "it is for"
        namespace = f" --namespace {robot_id}" if robot_id else ""
        return error(409, "other_robot",
                     f"{what} refused: {theirs} robot {_shown(robot_id)}, and this dashboard acts for robot "
                     f"{_shown(controls or '')} only (its supervisor, its token key); use robot {_shown(robot_id)}'s "
                     f"own dashboard (robot-harness up{namespace} --dashboard)",
                     mission_id=mission_id, robot_id=robot_id, controls=controls)

    async def check_mission(what: str, mission_id: str) -> JSONResponse | None:
        """None when ``mission_id`` is this dashboard's robot's, or not in the journal (yet), or nothing is checked."""
        if controls is None or not mission_id:
            return None
        theirs = await run(reader.mission_robot, mission_id)
        return None if theirs is None or theirs == controls else other_robot(what, robot_id=theirs,
                                                                              mission_id=mission_id)

    async def call(fn: Callable[[], dict[str, Any]], status: int = 200) -> JSONResponse:
        try:
            return JSONResponse(await run(fn), status_code=status)
        except HarnessError as exc:
            return JSONResponse(exc.to_dict(), status_code=_error_status(exc))

    # -- routes ------------------------------------------------------------------

    async def index(request: Request) -> Response:
        return (await guard_read(request)) or HTMLResponse(page, headers=page_headers)

    async def health(request: Request) -> Response:
        return (await guard_read(request)) or JSONResponse({
            "ok": True, "journal": str(reader.path), "journal_exists": reader.exists(),
            "last_seq": await run(reader.last_seq), "writes": operator is not None, "token_required": bool(token),
            "robot": robot, "controls": controls, "now": clock()})

    async def list_missions(request: Request) -> Response:
        """``{"missions": [...], "robot", "robots": [...], "controls", "last_seq", "now"}``: the missions of
        ``?robot=`` (each with its ``robot_id``), every robot the journal knows (``robots_of``), and the robot
        whose supervisor this dashboard's writes reach (None: not tied to one, or read-only)."""
        bad = await guard_read(request)
        if bad is not None:
            return bad
        last = await run(reader.last_seq)
        everyone = await run(reader.missions)
        robots = robots_of(everyone, await run(reader.leases))
        only = await robot_filter(request, robots)
        return JSONResponse({"missions": [m for m in everyone if only is None or m["robot_id"] == only],
                             "robot": only, "robots": robots, "controls": controls, "last_seq": last,
                             "now": clock()})

    async def list_leases(request: Request) -> Response:
        """``{"leases": [...], "robot", "last_seq"}``: the leases in force (every robot's, or the ones ``?robot=``
        sees: its own and the site's), each with its key, holder robot, scope and fencing token."""
        bad = await guard_read(request)
        if bad is not None:
            return bad
        only = await robot_filter(request)
        last = await run(reader.last_seq)
        return JSONResponse({"leases": await run(reader.leases, only), "robot": only, "last_seq": last})

    async def get_mission(request: Request) -> Response:
        bad = await guard_read(request)
        if bad is not None:
            return bad
        mission_id = request.path_params["mission_id"]
        events = await run(reader.events, mission_id)
        if not events:
            return error(404, "not_found", f"no mission {mission_id!r} in the journal", mission_id=mission_id)
        return JSONResponse(mission_view(events, now=clock(), mission_id=mission_id))

    async def feed(request: Request) -> Response:
        """Server-Sent Events: ``journal`` events ``{"last_seq", "missions": [changed ids]}`` as the journal grows
        (from ``after_seq``, or the ``Last-Event-ID`` of a reconnecting browser; without either, from now)."""
        bad = await guard_read(request)
        if bad is not None:
            return bad
        given = request.headers.get("last-event-id") or request.query_params.get("after_seq")
        try:
            after = None if given is None else int(given)
        except ValueError:
            return error(400, "invalid_request", "after_seq must be an integer")

        async def stream() -> AsyncIterator[str]:
            # Without a starting point the first event is just where the journal is now.
            seen = -1 if after is None else after
            start = await run(reader.last_seq) if after is None else after
            quiet_since = time.monotonic()
            yield "retry: 1000\n\n"
            while not stopping.is_set():
                last, changed = await run(reader.changed_missions, max(start, seen, 0))
                if last != seen:
                    seen = last
                    quiet_since = time.monotonic()
                    yield f"id: {last}\nevent: journal\ndata: {json.dumps({'last_seq': last, 'missions': changed})}\n\n"
                elif time.monotonic() - quiet_since > _KEEPALIVE_S:
                    quiet_since = time.monotonic()
                    yield ": keep-alive\n\n"
                if await request.is_disconnected():
                    return
                await asyncio.sleep(poll_interval_s)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def send_mission(request: Request) -> Response:
        bad, req, bearer = await parse_write(request, SendMission)
        if bad is not None:
            return bad
        if req.mission_id and not _MISSION_ID.match(req.mission_id):
            return error(400, "invalid_request", "mission_id: letters, digits and _.:- only (up to 128)")
        if controls is not None and req.robot is not None and robot_id_of(req.robot) != controls:
            return other_robot("send", robot_id=robot_id_of(req.robot))
        refused = await check_mission("send", req.mission_id)  # a mission id is the fleet's, never reused
        if refused is not None:
            return refused
        mission_id = req.mission_id or f"mission-{uuid.uuid4().hex[:12]}"
        assert operator is not None
        return await call(lambda: operator.send_mission(
            goal=req.goal, mission_id=mission_id, owner=req.owner, owner_token=req.owner_token or bearer,
            overrides={k: json.dumps(v) if isinstance(v, bool) else str(v) for k, v in req.overrides.items()}),
            status=202)

    async def answer(request: Request) -> Response:
        bad, req, bearer = await parse_write(request, Answer)
        if bad is not None:
            return bad
        interaction_id = request.path_params["interaction_id"]
        if controls is not None:
            asked_by = await run(reader.interaction_mission, interaction_id)
            refused = await check_mission(f"the answer to {interaction_id}", asked_by or req.mission_id)
            if refused is not None:
                return refused
        assert operator is not None
        return await call(lambda: operator.resolve_interaction(
            interaction_id=interaction_id, resolution=req.resolution,
            token=req.token or bearer, answer=req.answer, choice=req.choice, operator=req.operator))

    async def stop(request: Request) -> Response:
        bad, req, _ = await parse_write(request, StopBody)
        if bad is not None:
            return bad
        refused = await check_mission("STOP", req.mission_id)
        if refused is not None:
            return refused
        assert operator is not None
        # The mission named the robot; the robot stops whatever it runs, so a view a step behind (a finished
        # mission on screen while the next one runs) never makes Stop miss.
        return await call(lambda: operator.stop(mission_id="", reason=req.reason))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error(exc.status_code, code, f"{request.method} {request.url.path}: {exc.detail}")

    async def harness_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HarnessError)
        return JSONResponse(exc.to_dict(), status_code=_error_status(exc))

    async def internal_error(request: Request, exc: Exception) -> Response:
        return error(500, "internal_error", f"{type(exc).__name__}: {exc}")

    return Starlette(routes=[
        Route("/", index, methods=["GET"]),
        Route("/api/health", health, methods=["GET"]),
        Route("/api/missions", list_missions, methods=["GET"]),
        Route("/api/missions", send_mission, methods=["POST"]),
        Route("/api/missions/{mission_id}", get_mission, methods=["GET"]),
        Route("/api/leases", list_leases, methods=["GET"]),
        Route("/api/feed", feed, methods=["GET"]),
        Route("/api/interactions/{interaction_id}", answer, methods=["POST"]),
        Route("/api/stop", stop, methods=["POST"]),
    ], exception_handlers={HTTPException: http_error, HarnessError: harness_error,
                                        Exception: internal_error})


# ============================================================================ serving


class DashboardHandle:
    """A running dashboard: ``url``, and ``stop()`` (idempotent, bounded)."""

    def __init__(self, server: Any, thread: threading.Thread, stopping: threading.Event, reader: JournalReader,
                 url: str) -> None:
        self._server, self._thread, self._stopping, self._reader = server, thread, stopping, reader
        self.url = url

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping.set()  # live feeds end first, so the server's graceful shutdown has nothing to wait for
        self._server.should_exit = True
        self._thread.join(timeout=timeout_s)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout=timeout_s)
        self._reader.close()

    def __enter__(self) -> "DashboardHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(*, journal_path: str | Path, operator: OperatorPort | None = None, host: str = "127.0.0.1", port: int = 0,
          token: str = "", poll_interval_s: float = 0.25, start_timeout_s: float = 10.0,
          robot: str | None = None, operator_robot: str | None = None) -> DashboardHandle:
    """Start the dashboard on a background thread; returns once it accepts connections.

    ``journal_path``: a SQLite file or a ``postgresql://`` URL (asked once before serving: a database that
    does not answer is its ``JournalReadError``). ``port=0`` picks a free port (see ``handle.url``). A
    non-loopback ``host`` is refused (``UsageError``) unless ``token`` is set. ``robot``: the robot whose
    missions are listed unless a request names another (None: every robot's). ``operator_robot``: the
    robot whose supervisor ``operator`` reaches; writes for another robot's missions are refused (see
    ``create_app``).
    """
    import uvicorn

    robot = None if robot is None else robot_id_of(robot)  # a name that is not a namespace: before binding
    operator_robot = None if operator_robot is None else robot_id_of(operator_robot)
    loopback = is_loopback(host)
    if not loopback and not token:
        raise UsageError(f"refusing to serve the dashboard on {host}: beyond loopback it needs an operator token "
                         f"(set ${TOKEN_ENV}, or --token-env NAME) so that writes are authenticated", host=host)
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise UsageError(f"cannot serve the dashboard on {host}: {exc}", host=host) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise BackendUnavailable(f"cannot serve the dashboard on {host}:{port}: {exc.strerror or exc}", host=host,
                                 port=port) from exc
    reader = JournalReader(journal_path)
    try:
        reader.last_seq()  # a wrong database URL, password or host is said now, not on the page
    except BaseException:
        sock.close()
        reader.close()
        raise
    stopping = threading.Event()
    app = create_app(reader=reader, operator=operator, token=token, loopback_only=loopback,
                     poll_interval_s=poll_interval_s, stopping=stopping,
                     robot=robot, operator_robot=operator_robot)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off",
                            ws="none", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # noqa: BLE001 - reported by serve() below
            failed.append(exc)
        finally:
            sock.close()

    thread = threading.Thread(target=run, name="robot_harness-dashboard", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if failed or not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            reader.close()
            why = f"{type(failed[0]).__name__}: {failed[0]}" if failed else f"not serving after {start_timeout_s} s"
            raise HarnessTimeout(f"the dashboard could not serve on {host}:{port}: {why}", host=host, port=port)
        time.sleep(0.02)
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    return DashboardHandle(server, thread, stopping, reader, f"http://{shown}:{bound[1]}/")


# ============================================================================ CLI


DEFAULT_PORT = 8771
"""robot_harness's operator ports: 8770 MCP, 8771 this dashboard (8765 is Foxglove's bridge)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The dashboard's options (for ``robot-harness dashboard`` and :func:`main`)."""
    from ..cli import journal_arg, robot_arg

    journal_arg(p, what="the journal to show (it may not exist yet)")
    robot_arg(p, what="list this robot's missions first (default: every robot's; the page switches to any)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; beyond loopback a token "
                                                       "is required)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (0 picks a free one; default {DEFAULT_PORT})")
    p.add_argument("--token-env", default=TOKEN_ENV, help=f"environment variable holding the operator token "
                                                          f"(default {TOKEN_ENV}); when set, every write needs it")
    p.add_argument("--read-only", action="store_true", help="no ROS: show missions, refuse every write")
    p.add_argument("--mission-action", default="/robot_harness/mission")
    p.add_argument("--stop-service", default="/supervisor/stop",
                   help="the supervisor's stop service (default /supervisor/stop); <namespace>/supervisor/stop ties "
                        "Stop, Send and answers to that robot's missions")
    p.add_argument("--timeout", type=float, default=10.0, help="bound on each wait for the supervisor (s)")


def robot_of_stop_service(name: str) -> str | None:
    """The robot whose supervisor offers the stop service ``name``: ``<namespace>/supervisor/stop``, as
    ``robot-harness up --namespace`` names it (``/supervisor/stop``: the robot without a namespace); None
    for any other name (the dashboard's writes are then not tied to a robot)."""
    suffix = "/supervisor/stop"
    text = "/" + name.strip().strip("/")
    if not text.endswith(suffix):
        return None
    try:
        return robot_id_of(text[: -len(suffix)])
    except UsageError:
        return None


def run(args: argparse.Namespace, *, info: Callable[[str], None], stop: threading.Event | None = None) -> int:
    """Serve until ``stop`` is set (or SIGINT/SIGTERM on the main thread); returns 0. Raises ``UsageError``
    (a non-loopback host without a token) or another ``HarnessError`` (the port is taken)."""
    from ..cli import journal_target_of

    journal = journal_target_of(args.journal)
    robot = None if args.robot is None else robot_id_of(args.robot)
    token = os.environ.get(args.token_env, "")
    ctx = spinner = port = None
    stop = stop or threading.Event()
    try:
        if not args.read_only:
            import rclpy

            from ..nodes.executors import BackgroundSpinner

            ctx = rclpy.Context()
            rclpy.init(context=ctx)
            spinner = BackgroundSpinner(context=ctx, name="robot_harness_dashboard").start()
            port = RosOperatorPort(spinner.node, journal_path=journal, mission_action=args.mission_action,
                                   stop_service=args.stop_service, timeout_s=args.timeout)
        controls = None if port is None else robot_of_stop_service(args.stop_service)
        handle = serve(journal_path=journal, operator=port, host=args.host, port=args.port, token=token, robot=robot,
                       operator_robot=controls)
        acts = "read-only" if port is None else "" if controls is None else f"writes for robot {_shown(controls)}"
        info(f"dashboard at {handle.url} (journal {redact_url(journal)}{', ' + acts if acts else ''}"
             f"{', token required for writes' if token else ''}); Ctrl-C stops it")
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(0.5):
            pass
        handle.stop()
        return 0
    finally:
        if spinner is not None:
            if spinner.stop() and port is not None:  # see BackgroundSpinner.quiet
                port.destroy()
            spinner.destroy()
        if ctx is not None:
            import rclpy

            rclpy.try_shutdown(context=ctx)


def main(argv: list[str] | None = None) -> int:
    """``python -m robot_harness.operator.dashboard``: serve until SIGINT/SIGTERM. Exit 2 on a usage error
    (a non-loopback host without a token), 4 when it cannot serve (the port is taken)."""
    import sys

    p = argparse.ArgumentParser(prog="robot-harness dashboard", description="Serve the live mission dashboard.")
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args, info=lambda m: print(m, file=sys.stderr, flush=True))
    except HarnessError as exc:
        print(f"robot-harness dashboard: {exc.message}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 4


if __name__ == "__main__":  # python -m robot_harness.operator.dashboard
    raise SystemExit(main())
