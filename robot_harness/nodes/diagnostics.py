"""``/diagnostics`` for every harness node, as ROS users monitor a robot.

Reproduces what matters of ros/diagnostics' python ``diagnostic_updater.Updater``
(read at ros/diagnostics 3.2.0, ``_diagnostic_updater.py``), without depending on it:
one ``diagnostic_msgs/DiagnosticArray`` per period on the absolute topic
``/diagnostics`` (depth 1), header stamp from the node clock, one
``DiagnosticStatus`` per task named ``"<node>: <task>"``. Unlike upstream (whose
``use_fqn`` default is off and joins ``//name`` at the root namespace) the name
is always the fully qualified node name, so two robots' nodes are told apart.
A task that raises reports ERROR with the exception text; it never kills the node.

The check functions below are pure (plain values in, :class:`Check` out) so they
are unit-tested in milliseconds; nodes gather the values and register them.
"""
from __future__ import annotations

import enum
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..core.journal import is_database_url

__all__ = ["Level", "Check", "Diagnostics", "FieldAge", "lifecycle_check", "journal_check",
           "snapshot_freshness_check", "navigator_check", "planner_check", "mission_check", "field_ages"]


class Level(int, enum.Enum):
    """DiagnosticStatus levels (the message's byte constants)."""

    OK = 0
    """Working as intended."""
    WARN = 1
    """Working, but something needs a look."""
    ERROR = 2
    """Not doing its job."""
    STALE = 3
    """No recent information (set by aggregators, rarely by a node)."""


@dataclass(frozen=True)
class Check:
    """One task's result: a level, a one-line message and key/value details."""

    level: Level
    message: str
    values: Mapping[str, Any] = field(default_factory=dict)


# -- pure checks ---------------------------------------------------------------------------------

def lifecycle_check(state: str, transition_error: str | None = None) -> Check:
    """ERROR when unconfigured after a failed configure (with why), WARN inactive/unconfigured, OK active."""
    values = {"state": state}
    if state == "active":
        return Check(Level.OK, "active", values)
    if transition_error:
        return Check(Level.ERROR, f"configure failed: {transition_error}", {**values, "transition_error": transition_error})
    if state == "finalized":
        return Check(Level.ERROR, "finalized", values)
    return Check(Level.WARN, f"{state}, not active", values)


def journal_check(*, path: str, is_open: bool, closed: bool = False, corrupt: str | None = None,
                  reconnect_pending: bool = False, dir_writable: bool | None = None,
                  file_writable: bool | None = None) -> Check:
    """The supervisor's journal: open, not corrupt, its file and directory writable (no write made)."""
    values = {"path": path, "open": is_open, "dir_writable": dir_writable, "file_writable": file_writable,
              "reconnect_pending": reconnect_pending}
    if not is_open or closed:
        return Check(Level.ERROR, "no journal open (not configured)" if not closed else "journal closed", values)
    if corrupt:
        return Check(Level.ERROR, f"journal refuses writes: {corrupt}", values)
    if file_writable is False or dir_writable is False:
        return Check(Level.ERROR, f"journal {path} is not writable", values)
    if reconnect_pending:
        return Check(Level.WARN, "the last write failed; the next one reopens the journal", values)
    return Check(Level.OK, f"journal {path} writable", values)


def journal_facts(journal: Any) -> dict[str, Any]:
    """The keyword arguments of :func:`journal_check` read from a journal object (cheap: no lock, no write)."""
    if journal is None:
        return {"path": "", "is_open": False}
    path = str(getattr(journal, "path", ":memory:"))
    health = journal.health() if hasattr(journal, "health") else {}  # SqliteJournal's; other journals say nothing
    facts: dict[str, Any] = {"path": path, "is_open": True, "closed": bool(health.get("closed", False)),
                             "corrupt": health.get("corrupt"), "reconnect_pending": bool(health.get("reconnect_pending"))}
    if path != ":memory:" and not is_database_url(path):  # a fleet's database has no file here to check
        facts["dir_writable"] = os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)
        facts["file_writable"] = os.access(path, os.W_OK) if os.path.exists(path) else None
    return facts


class FieldAge(NamedTuple):
    """A snapshot field's age (None: never received) and its bound."""

    age_s: float | None
    max_age_s: float
    source: str = ""


def field_ages(snapshot: Any) -> dict[str, FieldAge]:
    """The per-field ages of a core ``WorldSnapshot``."""
    return {name: FieldAge(m.age_s, m.max_age_s, m.source) for name, m in (
        ("pose", snapshot.pose_meta), ("velocity", snapshot.velocity_meta),
        ("navigation", snapshot.navigation_meta), ("battery", snapshot.battery_meta))}


def snapshot_freshness_check(fields: Mapping[str, FieldAge], *, critical: tuple[str, ...] = ("pose",)) -> Check:
    """OK when every field is fresh (``|age| <= max age``, as the snapshot builder judges); a stale or
    missing ``critical`` field (missions are refused without a fresh pose) is ERROR, any other WARN."""
    values: dict[str, Any] = {}
    bad: list[str] = []
    worst = Level.OK
    for name, f in fields.items():
        if f.age_s is None:
            what = "missing"
        elif abs(f.age_s) <= f.max_age_s:
            what = "fresh"
        else:
            what = "stale"
        values[f"{name}.state"] = what
        values[f"{name}.age_s"] = "" if f.age_s is None else f"{f.age_s:.2f}"
        values[f"{name}.max_age_s"] = f"{f.max_age_s:g}"
        if f.source:
            values[f"{name}.source"] = f.source
        if what != "fresh":
            bad.append(f"{name} {what}" + ("" if f.age_s is None else f" ({f.age_s:.1f} s > {f.max_age_s:g} s)"))
            worst = max(worst, Level.ERROR if name in critical else Level.WARN)
    return Check(worst, "all fields fresh" if not bad else "; ".join(bad), values)


def navigator_check(*, action: str, server_available: bool, backend_state: str | None = None,
                    backend_node: str = "") -> Check:
    """NavigateToPose reachable and the navigator's lifecycle state active (``None``: not known yet)."""
    values = {"action": action, "server_available": server_available, "backend_node": backend_node,
              "backend_state": backend_state or "unknown"}
    if not server_available:
        return Check(Level.ERROR, f"action server {action} is not available", values)
    if backend_node and backend_state is not None and backend_state != "active":
        return Check(Level.ERROR, f"navigator {backend_node} is {backend_state}, not active", values)
    if backend_node and backend_state is None:
        return Check(Level.WARN, f"{action} available; {backend_node}'s state not known yet", values)
    return Check(Level.OK, f"{action} available" + (f", {backend_node} active" if backend_node else ""), values)


def planner_check(*, backend: str, configured: bool, calls: int = 0, last_error: str | None = None,
                  base_url: str = "") -> Check:
    """The planner's backend: its kind, the last call's outcome, the endpoint (base URL only, never a key)."""
    values = {"backend": backend, "calls": calls, "last_error": last_error or ""}
    if backend == "llm":
        values["base_url"] = base_url.split("?", 1)[0]
    if not configured:
        return Check(Level.ERROR, f"no {backend} backend (not configured)", values)
    if last_error:
        return Check(Level.WARN, f"last call failed: {last_error}", values)
    return Check(Level.OK, f"{backend} backend ready" + (f", {calls} call(s)" if calls else ""), values)


_BAD_ENDS = {"FAILED": Level.WARN, "BLOCKED": Level.WARN, "UNKNOWN": Level.ERROR}


def mission_check(*, running: str = "", last_id: str = "", last_status: str = "", last_summary: str = "") -> Check:
    """The mission in progress or the last one's status: UNKNOWN is ERROR (the world may not be as
    recorded), FAILED/BLOCKED WARN, anything else OK."""
    values = {"running": running, "last_mission_id": last_id, "last_status": last_status}
    if running:
        return Check(Level.OK, f"mission {running} running", values)
    if not last_status:
        return Check(Level.OK, "no mission yet", values)
    level = _BAD_ENDS.get(last_status.upper(), Level.OK)
    return Check(level, f"last mission {last_id} {last_status}" + (f": {last_summary}" if last_summary else ""), values)


# -- the publisher --------------------------------------------------------------------------------

class Diagnostics:
    """Publishes the node's tasks on ``/diagnostics`` every ``period_s`` (0: never; ``stop()`` ends it).

    ``tasks_factory`` (optional) is called once, on the first publish, and its tasks are added after
    those added with :meth:`add`: a subclass's attributes exist by then (its ``__init__`` has returned).
    """

    def __init__(self, node: Any, *, hardware_id: str = "", period_s: float = 1.0,
                 tasks_factory: Callable[[], Mapping[str, Callable[[], Check]]] | None = None) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        if period_s < 0:
            from ..core.errors import UsageError

            raise UsageError("diagnostic_period_s must be >= 0 (0 disables /diagnostics)", period_s=period_s)
        self._node = node
        self.hardware_id = hardware_id
        self.period_s = float(period_s)
        self._tasks: dict[str, Callable[[], Check]] = {}
        self._factory = tasks_factory
        self._lock = threading.Lock()
        self._pub: Any = None
        self._timer: Any = None
        if self.period_s > 0:
            self._pub = node.create_publisher(DiagnosticArray, "/diagnostics", 1)
            self._timer = node.create_timer(self.period_s, self.publish)

    def add(self, task_name: str, fn: Callable[[], Check]) -> None:
        with self._lock:
            self._tasks[task_name] = fn

    def statuses(self) -> list[Any]:
        """One DiagnosticStatus per task, run now."""
        from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

        with self._lock:
            if self._factory is not None:
                factory, self._factory = self._factory, None
                try:
                    extra = dict(factory())
                except Exception as exc:  # noqa: BLE001 - a broken override is reported, never fatal
                    extra = {"diagnostic_tasks": _raiser(exc)}
                for k, v in extra.items():
                    self._tasks.setdefault(k, v)
            tasks = list(self._tasks.items())
        prefix = self._node.get_fully_qualified_name()
        out = []
        for name, fn in tasks:
            try:
                check = fn()
                if not isinstance(check, Check):
                    raise TypeError(f"task returned {type(check).__name__}, not Check")
            except Exception as exc:  # noqa: BLE001 - the task's failure is its status
                check = Check(Level.ERROR, f"{type(exc).__name__}: {exc}")
            status = DiagnosticStatus(level=bytes([int(check.level)]), name=f"{prefix}: {name}",
                                      message=check.message, hardware_id=self.hardware_id)
            status.values = [KeyValue(key=str(k), value=str(v)) for k, v in check.values.items()]
            out.append(status)
        return out

    def publish(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        pub = self._pub
        if pub is None:
            return
        msg = DiagnosticArray()
        msg.header.stamp = self._node.get_clock().now().to_msg()
        msg.status = self.statuses()
        try:
            pub.publish(msg)
        except Exception:  # noqa: BLE001 - a publisher destroyed under us at shutdown
            pass

    def stop(self) -> None:
        timer, self._timer = self._timer, None
        pub, self._pub = self._pub, None
        if timer is not None:
            self._node.destroy_timer(timer)
        if pub is not None:
            self._node.destroy_publisher(pub)


def _raiser(exc: Exception) -> Callable[[], Check]:
    def fn() -> Check:
        raise exc
    return fn
