"""The decision tape: what a mission's decisions read from outside the core, in the order read.

A mission's decisions are a function of the code and of its inputs: the clock's
readings, the ids it drew, and every answer a port gave (snapshots, model turns,
goal acknowledgments, backend events, feasibility probes, verdicts, robot I/O
receipts), errors included. :class:`TapeRecorder` wraps the runtime's clock, id
generator and ports and appends each reading to a :class:`Tape`;
:class:`TapePlayer` hands the same readings back, in the same order, to a runner
being replayed, and raises :class:`~.errors.NondeterminismError` at the first
call the recording did not make (another port, another method, other
arguments), the way Temporal's replayer fails on a history the workflow code no
longer produces. Arguments are kept as a digest: enough to say that the replay
asked something else, without copying snapshots into the tape twice.

Values cross the tape through one codec (:func:`encode` / :func:`decode`):
pydantic models by their class (only ``robot_harness`` classes are rebuilt),
tuples, enums and non-finite floats survive the round trip, so a replayed
decision sees exactly what the recorded one saw.
"""
from __future__ import annotations

import enum
import hashlib
import importlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic_core import to_jsonable_python

from .errors import HarnessError, NondeterminismError, UsageError

__all__ = ["FORMAT_VERSION", "TapeEntry", "Tape", "TapeRecorder", "TapePlayer", "encode", "decode", "args_digest",
           "tape_to_jsonl", "tape_from_jsonl"]

FORMAT_VERSION = 1

_OWN = "robot_harness."
"""Only classes under this package are rebuilt from a tape: a tape is data, never code to import."""


class TapeEntry(BaseModel):
    """One reading a mission's decisions took, in the order taken (``index`` is unique and increasing)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["tape_entry"] = "tape_entry"
    format_version: int = FORMAT_VERSION
    index: int
    """Position in the mission's tape, from 0."""
    source: str
    """What was read: ``clock``, ``ids``, or a port's role (``snapshots``, ``planner``, ``navigation``, ...)."""
    call: str
    """The method: ``now``, ``monotonic``, ``new``, ``capture``, ``send_goal``, ``poll``, ..."""
    args: str = ""
    """A digest of the call's arguments (:func:`args_digest`); the id prefix for ``ids.new``."""
    answer: Any = None
    """The encoded answer (:func:`encode`); None when the call raised."""
    error: dict[str, Any] | None = None
    """The exception the call raised: ``{"type", "message", "details"}``."""


class Tape:
    """A mission's readings, appended in order."""

    def __init__(self) -> None:
        self.entries: list[TapeEntry] = []
        self.ports: dict[str, dict[str, Any]] = {}
        """Each taped port by role: ``{"methods": [...], "attrs": {...}}`` (plain attributes such as
        ``navigation.name``, encoded, read once when it was wrapped)."""
        self.meta: dict[str, Any] = {}
        """What a replay needs besides the readings (the harness configuration the mission ran under)."""

    def append(self, source: str, call: str, *, args: str = "", answer: Any = None,
               error: dict[str, Any] | None = None) -> TapeEntry:
        entry = TapeEntry(index=len(self.entries), source=source, call=call, args=args, answer=answer, error=error)
        self.entries.append(entry)
        return entry

    def __len__(self) -> int:
        return len(self.entries)


def tape_to_jsonl(tape: Tape) -> str:
    """A tape as a file: a header line (``{"kind": "tape", ...}``: ports and meta), then one reading per line."""
    head = {"kind": "tape", "format_version": FORMAT_VERSION, "ports": tape.ports, "meta": tape.meta}
    lines = [json.dumps(head, sort_keys=True, allow_nan=True)]
    lines += [json.dumps(e.model_dump(), sort_keys=True, allow_nan=True) for e in tape.entries]
    return "\n".join(lines) + "\n"


def tape_from_jsonl(text: str) -> Tape:
    """What :func:`tape_to_jsonl` wrote; UsageError when the text is not a tape."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise UsageError("an empty file is not a decision tape")
    head = json.loads(lines[0])
    if not isinstance(head, dict) or head.get("kind") != "tape":
        raise UsageError("not a decision tape: its first line is not a tape header")
    tape = Tape()
    tape.ports, tape.meta = dict(head.get("ports") or {}), dict(head.get("meta") or {})
    tape.entries = [TapeEntry.model_validate(json.loads(line)) for line in lines[1:]]
    return tape


# -- the codec ---------------------------------------------------------------------------------


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _import(name: str) -> Any:
    if not name.startswith(_OWN):
        raise UsageError(f"a tape names {name!r}: only robot_harness classes are rebuilt from a tape")
    module, _, attr = name.rpartition(".")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError:  # a nested class: Outer.Inner
        module, _, outer = module.rpartition(".")
        obj = getattr(importlib.import_module(module), outer)
    return getattr(obj, attr)


def encode(value: Any) -> Any:
    """A JSON-able form of ``value`` that :func:`decode` turns back into an equal value."""
    if isinstance(value, enum.Enum):  # before str and int: a str-valued enum is both
        return {"$enum": _qualname(type(value)), "value": value.value}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, BaseModel):
        return {"$model": _qualname(type(value)), "data": to_jsonable_python(value, inf_nan_mode="constants")}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise UsageError(f"cannot tape a dict with non-string keys: {sorted(map(repr, value))[:3]}")
        body = {k: encode(v) for k, v in value.items()}
        return {"$dict": body} if any(k.startswith("$") for k in value) else body
    raise UsageError(f"cannot tape a {type(value).__name__}", type=_qualname(type(value)))


def decode(value: Any) -> Any:
    """The value :func:`encode` was given."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$model" in value:
        cls = _import(value["$model"])
        return cls.model_validate(value["data"])
    if "$enum" in value:
        return _import(value["$enum"])(value["value"])
    if "$tuple" in value:
        return tuple(decode(v) for v in value["$tuple"])
    if "$dict" in value:
        return {k: decode(v) for k, v in value["$dict"].items()}
    return {k: decode(v) for k, v in value.items()}


def _encode_loose(value: Any) -> Any:
    """For a digest only: what :func:`encode` cannot carry (a callable) is named by its type."""
    try:
        return encode(value)
    except UsageError:
        if isinstance(value, (list, tuple)):
            return [_encode_loose(v) for v in value]
        if isinstance(value, dict):
            return {str(k): _encode_loose(v) for k, v in value.items()}
        return f"<{type(value).__name__}>"


def args_digest(args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    """16 hex of the arguments' encoded form: equal arguments, equal digests."""
    text = json.dumps([_encode_loose(list(args)), _encode_loose(kwargs)], sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _encode_error(exc: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _qualname(type(exc)), "message": str(exc)}
    if isinstance(exc, HarnessError):
        out["message"] = exc.message
        out["details"] = _encode_loose(exc.details)
    return out


def _decode_error(err: dict[str, Any]) -> BaseException:
    name, message = str(err.get("type", "")), str(err.get("message", ""))
    if name.startswith(_OWN):
        cls = _import(name)
        if isinstance(cls, type) and issubclass(cls, HarnessError):
            return cls(message, **dict(err.get("details") or {}))
    builtin = getattr(__import__("builtins"), name.rpartition(".")[2], None) if name.startswith("builtins.") else None
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        return builtin(message)
    return RuntimeError(f"{name}: {message}")


# -- recording ---------------------------------------------------------------------------------


class _RecordingClock:
    def __init__(self, clock: Any, tape: Tape) -> None:
        self._clock, self._tape = clock, tape

    def now(self) -> float:
        t = self._clock.now()
        self._tape.append("clock", "now", answer=t)
        return t

    def monotonic(self) -> float:
        t = self._clock.monotonic()
        self._tape.append("clock", "monotonic", answer=t)
        return t


class _RecordingIds:
    def __init__(self, ids: Any, tape: Tape) -> None:
        self._ids, self._tape = ids, tape

    def new(self, prefix: str) -> str:
        value = self._ids.new(prefix)
        self._tape.append("ids", "new", args=prefix, answer=value)
        return value


def _proxy(name: str, methods: dict[str, Callable[..., Any]], attrs: dict[str, Any]) -> Any:
    """An object with exactly these methods and attributes (so protocol checks see what the port has)."""
    namespace: dict[str, Any] = {m: (lambda fn: (lambda self, *a, **k: fn(*a, **k)))(fn) for m, fn in methods.items()}
    namespace.update(attrs)
    namespace["__repr__"] = lambda self: f"<{name}>"
    return type(name, (), namespace)()


class TapeRecorder:
    """Wraps the runtime's inputs so that every reading lands on ``tape``."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape

    def clock(self, clock: Any) -> Any:
        return _RecordingClock(clock, self.tape)

    def ids(self, ids: Any) -> Any:
        return _RecordingIds(ids, self.tape)

    def stop_reads(self) -> Callable[[Any], Any]:
        """For ``StopFlag(reads=...)``: each read of the Stop flag, on the tape."""
        def read(value: Any) -> Any:
            self.tape.append("stop", "read", answer=value)
            return value
        return read

    def port(self, port: Any, source: str, methods: Iterable[str], *, attrs: Iterable[str] = ()) -> Any:
        """``port`` with each of ``methods`` it has taped (answer or error); ``attrs`` read through."""
        tape = self.tape

        def taped(call: str, fn: Callable[..., Any]) -> Callable[..., Any]:
            def run(*args: Any, **kwargs: Any) -> Any:
                digest = args_digest(args, kwargs)
                try:
                    answer = fn(*args, **kwargs)
                except Exception as exc:
                    tape.append(source, call, args=digest, error=_encode_error(exc))
                    raise
                tape.append(source, call, args=digest, answer=encode(answer))
                return answer
            return run

        wrapped = {m: taped(m, getattr(port, m)) for m in methods if callable(getattr(port, m, None))}
        values = {a: getattr(port, a) for a in attrs if hasattr(port, a)}
        self.tape.ports[source] = {"methods": sorted(wrapped), "attrs": {a: encode(v) for a, v in values.items()}}
        return _proxy(f"Taped[{source}]", wrapped, values)


# -- replaying ---------------------------------------------------------------------------------


class TapePlayer:
    """Hands a recorded tape back, reading for reading; the first call the recording did not make raises."""

    def __init__(self, entries: Sequence[TapeEntry], ports: dict[str, dict[str, Any]] | None = None, *,
                 lenient: bool = False) -> None:
        self.entries = list(entries)
        self.lenient = lenient
        """A what-if: a call with other arguments still gets the recorded answer (counted in ``changed_args``);
        only another port or method ends the replay."""
        self.changed_args: list[int] = []
        self.ports = ports or {}
        """The recorded ports' methods and attributes (:attr:`Tape.ports`)."""
        self.position = 0
        self.failure: NondeterminismError | None = None
        """The first difference this player raised: the runner may have taken it for a world fault and
        gone on, but the replay is not the recording from there on."""
        self.on_failure: Callable[[], Any] | None = None
        """Called once, at the first difference; what it returns is kept in ``failure_mark``."""
        self.failure_mark: Any = None

    @property
    def remaining(self) -> list[TapeEntry]:
        return self.entries[self.position:]

    def take(self, source: str, call: str, args: str) -> Any:
        """The recorded answer to this call (or its error, raised), if it is the next one recorded."""
        try:
            return self._take(source, call, args)
        except NondeterminismError as exc:
            if self.failure is None:
                self.failure = exc
                if self.on_failure is not None:
                    self.failure_mark = self.on_failure()
            raise

    def _take(self, source: str, call: str, args: str) -> Any:
        i = self.position
        if i >= len(self.entries):
            raise NondeterminismError(
                f"the replay read {source}.{call} after the recording's last reading (#{i - 1})",
                tape_index=i, replayed=f"{source}.{call}")
        entry = self.entries[i]
        if (entry.source, entry.call) != (source, call):
            raise NondeterminismError(
                f"reading #{i}: the replay read {source}.{call} where the recording read {entry.source}.{entry.call}",
                tape_index=i, recorded=f"{entry.source}.{entry.call}", replayed=f"{source}.{call}")
        if entry.args != args and self.lenient:
            self.changed_args.append(i)
        elif entry.args != args:
            raise NondeterminismError(
                f"reading #{i}: the replay called {source}.{call} with other arguments than the recording "
                f"({args} != {entry.args})", tape_index=i, recorded=entry.args, replayed=args, field="args")
        self.position = i + 1
        if entry.error is not None:
            raise _decode_error(entry.error)
        return decode(entry.answer)

    def clock(self) -> Any:
        player = self

        class _Clock:
            def now(self) -> float:
                return float(player.take("clock", "now", ""))

            def monotonic(self) -> float:
                return float(player.take("clock", "monotonic", ""))
        return _Clock()

    def ids(self) -> Any:
        player = self

        class _Ids:
            def new(self, prefix: str) -> str:
                return str(player.take("ids", "new", prefix))
        return _Ids()

    def stop_reads(self) -> Callable[[Any], Any]:
        """For ``StopFlag(reads=...)``: each read of the Stop flag answered from the tape."""
        return lambda _value: self.take("stop", "read", "")

    def port(self, source: str, methods: Iterable[str] | None = None, *, attrs: dict[str, Any] | None = None) -> Any:
        """A stand-in for the recorded port: each of ``methods`` (by default the ones the recorded port
        had) answers from the tape; ``attrs`` (by default the recorded ones) read as they were."""
        def answering(call: str) -> Callable[..., Any]:
            return lambda *args, **kwargs: self.take(source, call, args_digest(args, kwargs))

        recorded = self.ports.get(source, {})
        if methods is None:
            methods = recorded.get("methods", ())
        if attrs is None:
            attrs = {a: decode(v) for a, v in recorded.get("attrs", {}).items()}
        return _proxy(f"Replayed[{source}]", {m: answering(m) for m in methods}, dict(attrs))
