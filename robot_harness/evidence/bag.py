"""The mission evidence store: one rosbag2-compatible MCAP bag per mission.

Everything a verifier may cite as ``bag`` evidence lives here: the backend
topics recorded raw (CDR bytes, exactly as they crossed the wire) and the
harness's own records. A bag evidence ref names the bag file, the topic, the
log time and the channel sequence, and carries the sha256 of the message
bytes; :meth:`EvidenceStore.read` finds the message again and refuses it when
the bytes no longer match.

Bags are written the way ``rosbag2_storage_mcap`` writes them, so ``ros2 bag
info``/``play`` and any MCAP tool read them: profile ``ros2``, message
encoding ``cdr``, ``ros2msg`` schemas holding the complete concatenated
message definition (:class:`MessageDefinitions`), ``offered_qos_profiles`` and
``topic_type_hash`` in each channel's metadata, a ``rosbag2`` metadata record
(``serialized_metadata``, BagMetadata version 9 as Jazzy and Kilted write it)
and a ``metadata.yaml`` beside the file. The layout is a rosbag2 bag
directory: ``<root>/<mission_id>/<mission_id>.mcap`` + ``metadata.yaml``.

Records are unchunked and every message is flushed as it is written (rosbag2's
``fastwrite`` preset), so evidence can be re-read while the mission runs and
what was written before a crash is on disk. A bag whose writer died has no
summary or footer, and perhaps a record cut short at its end: every reader
here scans such a file linearly and recovers each complete record
(:func:`bag_state` says what was recovered and how many bytes were lost), and
:meth:`McapEvidenceStore.finalise_interrupted` rewrites it, atomically, into
a finished bag with its summary and ``metadata.yaml``. The writer holds an
exclusive ``flock`` on the file for as long as the bag is open, so a bag a
live process is still writing is never mistaken for an interrupted one.

This module never imports rclpy or generated messages.
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import json
import logging
import os
import re
import struct
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple
from urllib.parse import unquote, urlparse

import mcap
import yaml
from mcap.data_stream import ReadDataStream
from mcap.exceptions import McapError
from mcap.reader import make_reader
from mcap.records import Channel, Chunk, Header, Message, Metadata, Schema
from mcap.stream_reader import breakup_chunk
from mcap.writer import CompressionType, Writer
from pydantic import BaseModel, ConfigDict

from robot_harness import __version__ as _HARNESS_VERSION
from robot_harness.core.completion import EvidenceRef
from robot_harness.core.errors import RefusalError, UsageError
from robot_harness.core.records import FORMAT_VERSION

__all__ = [
    "EvidenceError",
    "EvidenceNotFound",
    "EvidenceMismatch",
    "BagFormatError",
    "MessageDefinitionNotFound",
    "EvidenceStoreMisuse",
    "MessageDefinitions",
    "normalize_type_name",
    "qos_profiles_yaml",
    "TopicSummary",
    "BagSummary",
    "BagState",
    "BagFinalisation",
    "bag_state",
    "EvidenceStore",
    "MemoryEvidenceStore",
    "McapEvidenceStore",
    "BagMessage",
    "read_bag_messages",
    "read_bag_decoded",
    "read_bag_metadata",
    "verify_artifact",
    "ROSBAG2_METADATA_VERSION",
    "LIBRARY",
]

log = logging.getLogger(__name__)

ROSBAG2_METADATA_VERSION = 9
"""The BagMetadata version rosbag2 writes in Jazzy and Kilted (QoS profiles as a YAML sequence)."""

LIBRARY = f"robot_harness {_HARNESS_VERSION} (mcap-python {mcap.__version__})"
"""The MCAP header's library string."""

_DEFAULT_ROS_DISTRO = "kilted"


# --------------------------------------------------------------------------- errors


class EvidenceError(RefusalError):
    """Evidence could not be produced or trusted; a verifier must not accept it.

    The message is never empty: a blank one is replaced by the code and the
    details (what and where), so an operator always reads a reason.
    """

    code = "evidence_error"

    def __init__(self, message: str, **details: Any) -> None:
        if not str(message).strip():
            where = ", ".join(f"{k}={v}" for k, v in details.items()) or "no details"
            message = f"{self.code} ({where})"
        super().__init__(message, **details)


def _describe(exc: BaseException) -> str:
    """``str(exc)``, or the exception's type when it has no text (mcap's ``EndOfFile()``)."""
    text = str(exc).strip()
    return text if text else f"{type(exc).__name__} (the file ends inside a record)"


class EvidenceNotFound(EvidenceError):
    """The cited bag, message or artifact does not exist (or was dropped by a bound)."""

    code = "evidence_not_found"


class EvidenceMismatch(EvidenceError):
    """The cited bytes exist but their sha256 differs from the one the ref carries."""

    code = "evidence_mismatch"


class BagFormatError(EvidenceError):
    """A bag that cannot be read as a ROS 2 (CDR) MCAP bag: wrong profile or encoding, corrupt records."""

    code = "bag_format"


class MessageDefinitionNotFound(UsageError):
    """No ``.msg`` (or derivable ``.action``/``.srv``) definition for a type or one of its dependencies."""

    code = "message_definition_not_found"


class EvidenceStoreMisuse(UsageError):
    """The store was called out of order: no open bag, unknown topic, time going backwards, ..."""

    code = "evidence_store_misuse"


# --------------------------------------------------------------------------- message definitions

_BUILTIN_TYPES = frozenset(
    {
        "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
        "int32", "uint32", "int64", "uint64", "string", "wstring",
    }
)
_SEPARATOR = "=" * 80
_MAX_DEPTH = 50
"""rosbag2's ROSBAG2_CPP_LOCAL_MESSAGE_DEFINITION_SOURCE_MAX_RECURSION_DEPTH."""

_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_TYPE_NAME_RE = re.compile(rf"^({_NAME})/(?:(msg|srv|action)/)?({_NAME})$")
_FIELD_TYPE_RE = re.compile(r"^[A-Za-z0-9_/]+$")
_BOUNDED_STRING_RE = re.compile(r"^w?string<=\d+$")
_ACTION_PART_RE = re.compile(r"^(.+)_(Goal|Result|Feedback|FeedbackMessage)$")
_SRV_PART_RE = re.compile(r"^(.+)_(Request|Response)$")


def normalize_type_name(type_name: str) -> str:
    """``pkg/Type`` -> ``pkg/msg/Type``; ``pkg/<msg|srv|action>/Type`` unchanged.

    Bag schemas and rosbag2 metadata name types both ways (older writers drop
    ``/msg/``); inside the harness a type always has three parts.
    """
    match = _TYPE_NAME_RE.match(type_name)
    if match is None:
        raise MessageDefinitionNotFound(
            f"not a ROS interface type name: {type_name!r} (expected pkg/msg/Type)", type_name=type_name
        )
    pkg, ns, name = match.groups()
    return f"{pkg}/{ns or 'msg'}/{name}"


@dataclass(frozen=True)
class _Spec:
    text: str
    dependencies: tuple[str, ...]
    """Referenced type names, as rosbag2 spells them (``pkg/Type``), sorted and unique."""


class MessageDefinitions:
    """Complete ``ros2msg`` definitions, byte-for-byte as rosbag2 writes them into MCAP schemas.

    The text is the type's own ``.msg`` file, then for every dependency
    (depth-first, each dependency's own dependencies in sorted order, every
    type once) a line of 80 ``=``, a line ``MSG: pkg/Type`` and that type's
    ``.msg`` file (``rosbag2_cpp``'s ``LocalMessageDefinitionSource``).

    Definitions are found at ``<prefix>/share/<pkg>/msg/<Type>.msg`` under the
    install prefixes in ``search_roots`` (default: ``AMENT_PREFIX_PATH``, then
    ``sys.prefix``, where pip-installed ROS wheels put ``share/``). Beyond
    rosbag2 (which leaves these schemas empty): action parts
    (``pkg/action/X_Goal|_Result|_Feedback|_FeedbackMessage``) and service
    parts (``pkg/srv/X_Request|_Response``) are derived from the ``.action`` /
    ``.srv`` file the way rosidl derives them; a bare ``Header`` means
    ``std_msgs/Header`` unless the package defines its own; ``wstring`` and
    bounded strings are builtins.
    """

    def __init__(self, *, search_roots: Sequence[str | os.PathLike[str]] | None = None) -> None:
        if search_roots is None:
            found = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
            if sys.prefix not in found:
                found.append(sys.prefix)
            search_roots = found
        self._prefixes: tuple[Path, ...] = tuple(Path(p) for p in search_roots)
        self._specs: dict[tuple[str, str | None, str], _Spec] = {}
        self._lock = threading.Lock()

    @property
    def search_roots(self) -> tuple[Path, ...]:
        return self._prefixes

    def full_text(self, type_name: str) -> str:
        """The complete concatenated definition of ``type_name`` (``pkg/msg/Type`` or ``pkg/Type``).

        Raises :class:`MessageDefinitionNotFound` naming the missing type when
        the type or any dependency has no definition.
        """
        pkg, ns, name = self._parse(type_name)
        with self._lock:
            root = self._load(pkg, ns, name, root=type_name)
            seen: set[tuple[str, str | None, str]] = set()
            return self._append(root, pkg, seen, depth=_MAX_DEPTH, root=type_name)

    def dependencies(self, type_name: str) -> list[str]:
        """The ``MSG:`` names of :meth:`full_text`, in the order they appear."""
        return [
            line[len("MSG: "):]
            for line in self.full_text(type_name).splitlines()
            if line.startswith("MSG: ")
        ]

    def type_hash(self, type_name: str) -> str:
        """The type's RIHS01 description hash from rosidl's ``.json`` beside the definition, or ``""``.

        rosbag2 stores it as ``type_description_hash``; an empty value is legal.
        """
        pkg, ns, name = self._parse(type_name)
        candidates: list[tuple[str, str]] = []
        if ns in (None, "msg"):
            candidates.append(("msg", name))
        for kind, pattern in (("action", _ACTION_PART_RE), ("srv", _SRV_PART_RE)):
            match = pattern.match(name)
            if ns in (None, kind) and match:
                candidates.append((kind, match.group(1)))
        for kind, base in candidates:
            path = self._find(pkg, kind, f"{base}.json")
            if path is None:
                continue
            try:
                hashes = json.loads(path.read_text(encoding="utf-8")).get("type_hashes", [])
            except (OSError, ValueError):
                continue
            wanted = f"{pkg}/{kind}/{name}"
            for entry in hashes:
                if entry.get("type_name") == wanted:
                    return str(entry.get("hash_string", ""))
        return ""

    # -- resolution -----------------------------------------------------------------

    @staticmethod
    def _parse(type_name: str) -> tuple[str, str | None, str]:
        match = _TYPE_NAME_RE.match(type_name)
        if match is None:
            raise MessageDefinitionNotFound(
                f"not a ROS interface type name: {type_name!r}", type_name=type_name
            )
        pkg, ns, name = match.groups()
        return pkg, ns, name

    def _append(
        self, spec: _Spec, pkg: str, seen: set[tuple[str, str | None, str]], *, depth: int, root: str
    ) -> str:
        if depth <= 0:
            raise MessageDefinitionNotFound(
                f"definition of {root} nests deeper than {_MAX_DEPTH} levels", type_name=root
            )
        out = spec.text
        for dep in spec.dependencies:
            dep_key = self._parse(dep)
            if dep_key in seen:
                continue
            seen.add(dep_key)
            dep_spec = self._load(*dep_key, root=root)
            out += f"\n{_SEPARATOR}\nMSG: {dep}\n"
            out += self._append(dep_spec, dep_key[0], seen, depth=depth - 1, root=root)
        return out

    def _find(self, pkg: str, kind: str, file_name: str) -> Path | None:
        for prefix in self._prefixes:
            path = prefix / "share" / pkg / kind / file_name
            if path.is_file():
                return path
        return None

    def _load(self, pkg: str, ns: str | None, name: str, *, root: str) -> _Spec:
        key = (pkg, ns, name)
        cached = self._specs.get(key)
        if cached is not None:
            return cached
        text = self._read_text(pkg, ns, name)
        if text is None:
            missing = f"{pkg}/{ns}/{name}" if ns else f"{pkg}/{name}"
            raise MessageDefinitionNotFound(
                f"no message definition for {missing}"
                + ("" if missing == root else f" (needed by {root})")
                + f"; searched share/{pkg}/ under {[str(p) for p in self._prefixes]}",
                type_name=missing,
                root=root,
                search_roots=[str(p) for p in self._prefixes],
            )
        spec = _Spec(text=text, dependencies=self._dependencies(text, pkg))
        self._specs[key] = spec
        return spec

    def _read_text(self, pkg: str, ns: str | None, name: str) -> str | None:
        if ns in (None, "msg"):
            path = self._find(pkg, "msg", f"{name}.msg")
            if path is not None:
                return path.read_text(encoding="utf-8")
        match = _ACTION_PART_RE.match(name)
        if ns in (None, "action") and match:
            base, part = match.groups()
            path = self._find(pkg, "action", f"{base}.action")
            if path is not None:
                if part == "FeedbackMessage":
                    return f"unique_identifier_msgs/UUID goal_id\n{pkg}/{base}_Feedback feedback\n"
                sections = _split_sections(path.read_text(encoding="utf-8"), 3)
                if sections is not None:
                    return sections[("Goal", "Result", "Feedback").index(part)]
        match = _SRV_PART_RE.match(name)
        if ns in (None, "srv") and match:
            base, part = match.groups()
            path = self._find(pkg, "srv", f"{base}.srv")
            if path is not None:
                sections = _split_sections(path.read_text(encoding="utf-8"), 2)
                if sections is not None:
                    return sections[("Request", "Response").index(part)]
        return None

    def _dependencies(self, text: str, pkg: str) -> tuple[str, ...]:
        deps: set[str] = set()
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            token = stripped.split()[0]
            base = re.sub(r"\[[^\]]*\]$", "", token)
            if base in _BUILTIN_TYPES or _BOUNDED_STRING_RE.match(base):
                continue
            if not _FIELD_TYPE_RE.match(base):
                continue
            if "/" not in base:
                if base == "Header" and self._read_text(pkg, "msg", "Header") is None:
                    base = "std_msgs/Header"
                else:
                    base = f"{pkg}/{base}"
            deps.add(base)
        return tuple(sorted(deps))


def _split_sections(text: str, count: int) -> list[str] | None:
    sections: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip() == "---":
            sections.append([])
        else:
            sections[-1].append(line)
    if len(sections) != count:
        return None
    return ["".join(f"{line}\n" for line in part) for part in sections]


# --------------------------------------------------------------------------- QoS

_INFINITE = {"sec": 9223372036, "nsec": 854775807}
_QOS_DEFAULTS: dict[str, Any] = {
    "history": "keep_last",
    "depth": 10,
    "reliability": "reliable",
    "durability": "volatile",
    "deadline": _INFINITE,
    "lifespan": _INFINITE,
    "liveliness": "automatic",
    "liveliness_lease_duration": _INFINITE,
    "avoid_ros_namespace_conventions": False,
}


def qos_profiles_yaml(profiles: Sequence[Mapping[str, Any]]) -> str:
    """Offered QoS profiles as rosbag2 writes them into a channel's ``offered_qos_profiles``.

    Each profile is a mapping with rosbag2's keys and named policy values
    (``history: keep_last``, ``reliability: best_effort``, ...; durations as
    ``{sec, nsec}``); missing keys take rclcpp's defaults with infinite
    durations. An empty sequence gives ``""`` (no publisher known).
    """
    lines: list[str] = []
    for given in profiles:
        unknown = set(given) - set(_QOS_DEFAULTS)
        if unknown:
            raise EvidenceStoreMisuse(f"unknown QoS keys {sorted(unknown)}", keys=sorted(unknown))
        p = {**_QOS_DEFAULTS, **given}
        deadline, lifespan, lease = (_duration_lines(k, p[k]) for k in
                                     ("deadline", "lifespan", "liveliness_lease_duration"))
        lines += [
            f"- history: {p['history']}",
            f"  depth: {int(p['depth'])}",
            f"  reliability: {p['reliability']}",
            f"  durability: {p['durability']}",
            *deadline,
            *lifespan,
            f"  liveliness: {p['liveliness']}",
            *lease,
            f"  avoid_ros_namespace_conventions: {'true' if p['avoid_ros_namespace_conventions'] else 'false'}",
        ]
    return "\n".join(lines)


def _duration_lines(key: str, value: Mapping[str, Any]) -> list[str]:
    return [f"  {key}:", f"    sec: {int(value['sec'])}", f"    nsec: {int(value['nsec'])}"]


def _qos_list(qos_yaml: str) -> list[Any]:
    if not qos_yaml.strip():
        return []
    try:
        value = yaml.safe_load(qos_yaml)
    except yaml.YAMLError as exc:
        raise EvidenceStoreMisuse(f"offered_qos_profiles is not YAML: {exc}") from None
    if not isinstance(value, list):
        raise EvidenceStoreMisuse("offered_qos_profiles must be a YAML sequence of profiles")
    return value


# --------------------------------------------------------------------------- summaries


class TopicSummary(BaseModel):
    """One channel of a closed bag."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str
    type_name: str
    message_count: int
    dropped: int = 0


class BagSummary(BaseModel):
    """What a closed mission bag holds, and what it had to leave out.

    ``truncated`` is the warning flag: a size or duration bound was reached and
    every later write was dropped (counted in ``dropped``), so the bag is a
    complete prefix of the mission rather than a bag with holes.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["bag_summary"] = "bag_summary"
    format_version: int = FORMAT_VERSION
    bag: str
    """File name of the bag, as evidence refs cite it (``<mission_id>.mcap``)."""
    path: str = ""
    """Absolute path of the bag file (empty for the in-memory store)."""
    message_count: int
    payload_bytes: int
    """Sum of the accepted messages' CDR sizes (what ``max_bytes`` bounds)."""
    start_time_ns: int = 0
    end_time_ns: int = 0
    topics: tuple[TopicSummary, ...] = ()
    dropped: int = 0
    truncated: bool = False
    truncated_reason: Literal["", "max_bytes", "max_duration"] = ""
    metadata: dict[str, str] = {}

    @property
    def duration_ns(self) -> int:
        return self.end_time_ns - self.start_time_ns

    def count(self, topic: str) -> int:
        for t in self.topics:
            if t.topic == topic:
                return t.message_count
        raise KeyError(topic)


# --------------------------------------------------------------------------- the store


_BAG_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.mcap$")


@dataclass
class _Channel:
    topic: str
    type_name: str
    schema_text: str
    qos_yaml: str
    type_hash: str
    message_count: int = 0
    dropped: int = 0
    last_log_time_ns: int = 0


@dataclass
class _OpenBag:
    name: str
    metadata: dict[str, str]
    channels: dict[str, _Channel] = field(default_factory=dict)
    message_count: int = 0
    payload_bytes: int = 0
    start_time_ns: int = 0
    end_time_ns: int = 0
    dropped: int = 0
    truncated_reason: Literal["", "max_bytes", "max_duration"] = ""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class EvidenceStore(ABC):
    """The storage contract for mission evidence; every backend passes one shared test suite.

    Life cycle per mission: :meth:`open_bag`, :meth:`add_channel` per topic,
    :meth:`write` per message, :meth:`close` (idempotent; returns the same
    :class:`BagSummary` again). One bag is open at a time; a store may open
    the next mission's bag after closing one, and never reopens or
    overwrites an existing bag. :meth:`read` serves any bag this store holds,
    open or closed.

    Guarantees: log times are non-decreasing per topic (equal times are
    allowed, as in rosbag2; a write going back in time is a caller bug and
    raises :class:`EvidenceStoreMisuse`). Each accepted message gets the next
    per-channel sequence number, starting at 1. Bounds (``max_bytes`` of
    payload, ``max_duration_s`` since the bag's first message) never raise:
    the first write that would exceed one truncates the bag, that write and
    every later one is dropped and counted, and the returned ref has
    ``sequence == 0`` and never resolves. All methods are thread-safe.
    """

    def __init__(
        self,
        *,
        definitions: MessageDefinitions | None = None,
        max_bytes: int | None = None,
        max_duration_s: float | None = None,
        ros_distro: str | None = None,
    ) -> None:
        if max_bytes is not None and max_bytes <= 0:
            raise EvidenceStoreMisuse("max_bytes must be positive", max_bytes=max_bytes)
        if max_duration_s is not None and max_duration_s <= 0:
            raise EvidenceStoreMisuse("max_duration_s must be positive", max_duration_s=max_duration_s)
        self._definitions = definitions if definitions is not None else MessageDefinitions()
        self._max_bytes = max_bytes
        self._max_duration_ns = None if max_duration_s is None else int(max_duration_s * 1e9)
        self._ros_distro = ros_distro or os.environ.get("ROS_DISTRO") or _DEFAULT_ROS_DISTRO
        self._bag: _OpenBag | None = None
        self._last_summary: BagSummary | None = None
        self._lock = threading.RLock()

    # -- public contract (template methods; backends implement the _backend_* hooks) ------

    @property
    def bag_name(self) -> str:
        """The open bag's file name, else the last closed one's, else ``""``."""
        with self._lock:
            if self._bag is not None:
                return self._bag.name
            return self._last_summary.bag if self._last_summary is not None else ""

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._bag is not None

    @property
    def truncated(self) -> bool:
        """True once a bound was hit in the open (or last closed) bag."""
        with self._lock:
            if self._bag is not None:
                return bool(self._bag.truncated_reason)
            return self._last_summary is not None and self._last_summary.truncated

    def open_bag(self, name: str, *, metadata: Mapping[str, str]) -> None:
        """Start the mission's bag ``<mission_id>.mcap``; ``metadata`` becomes rosbag2's ``custom_data``."""
        with self._lock:
            if self._bag is not None:
                raise EvidenceStoreMisuse(
                    f"bag {self._bag.name} is still open; close it first", open_bag=self._bag.name
                )
            if not _BAG_NAME_RE.match(name):
                raise EvidenceStoreMisuse(
                    f"bag name must be '<mission_id>.mcap' without directories, got {name!r}", bag=name
                )
            bad = [k for k, v in metadata.items() if not (isinstance(k, str) and isinstance(v, str))]
            if bad:
                raise EvidenceStoreMisuse(f"bag metadata must map str to str; bad keys {bad}")
            self._backend_open(name, dict(metadata))
            self._bag = _OpenBag(name=name, metadata=dict(metadata))

    def add_channel(self, topic: str, type_name: str, *, qos_yaml: str = "") -> None:
        """Register ``topic`` with its type's complete definition; a repeat with the same type is a no-op.

        ``qos_yaml`` is the publishers' offered QoS in rosbag2's form
        (:func:`qos_profiles_yaml`), ``""`` when unknown.
        """
        with self._lock:
            bag = self._require_open()
            if not topic.startswith("/"):
                raise EvidenceStoreMisuse(f"topic must be absolute, got {topic!r}", topic=topic)
            full_type = normalize_type_name(type_name)
            existing = bag.channels.get(topic)
            if existing is not None:
                if existing.type_name != full_type:
                    raise EvidenceStoreMisuse(
                        f"{topic} is already recorded as {existing.type_name}, not {full_type}",
                        topic=topic, type_name=full_type, recorded_type=existing.type_name,
                    )
                return
            _qos_list(qos_yaml)
            channel = _Channel(
                topic=topic,
                type_name=full_type,
                schema_text=self._definitions.full_text(full_type),
                qos_yaml=qos_yaml,
                type_hash=self._definitions.type_hash(full_type),
            )
            self._backend_add_channel(bag.name, channel)
            bag.channels[topic] = channel

    def write(
        self, topic: str, data: bytes, *, log_time_ns: int, publish_time_ns: int | None = None
    ) -> EvidenceRef:
        """Append one serialized (CDR) message; returns the ref that cites it.

        A write dropped by a bound returns a ref with ``sequence == 0`` that
        :meth:`read` will refuse with :class:`EvidenceNotFound`.
        """
        with self._lock:
            bag = self._require_open()
            channel = bag.channels.get(topic)
            if channel is None:
                raise EvidenceStoreMisuse(f"no channel for {topic}; add_channel first", topic=topic)
            if isinstance(log_time_ns, bool) or not isinstance(log_time_ns, int) or log_time_ns <= 0:
                raise EvidenceStoreMisuse(
                    f"log_time_ns must be a positive int, got {log_time_ns!r}", topic=topic
                )
            if log_time_ns < channel.last_log_time_ns:
                raise EvidenceStoreMisuse(
                    f"log time went backwards on {topic}: {log_time_ns} < {channel.last_log_time_ns}",
                    topic=topic, log_time_ns=log_time_ns, last_log_time_ns=channel.last_log_time_ns,
                )
            publish = log_time_ns if publish_time_ns is None else publish_time_ns
            if publish < 0:
                raise EvidenceStoreMisuse("publish_time_ns must be >= 0", topic=topic)
            payload = bytes(data)
            digest = _sha256(payload)
            channel.last_log_time_ns = log_time_ns

            reason = self._bound_exceeded(bag, len(payload), log_time_ns)
            if reason:
                if not bag.truncated_reason:
                    bag.truncated_reason = reason
                    log.warning(
                        "evidence bag %s truncated at %s on %s: %s reached; later writes are dropped",
                        bag.name, log_time_ns, topic, reason,
                    )
                bag.dropped += 1
                channel.dropped += 1
                return EvidenceRef.for_bag(bag.name, topic, log_time_ns, sequence=0, sha256=digest)

            sequence = channel.message_count + 1
            self._backend_write(bag.name, channel, sequence, log_time_ns, publish, payload)
            channel.message_count = sequence
            if bag.message_count == 0:
                bag.start_time_ns = bag.end_time_ns = log_time_ns
            else:
                bag.start_time_ns = min(bag.start_time_ns, log_time_ns)
                bag.end_time_ns = max(bag.end_time_ns, log_time_ns)
            bag.message_count += 1
            bag.payload_bytes += len(payload)
            return EvidenceRef.for_bag(bag.name, topic, log_time_ns, sequence=sequence, sha256=digest)

    def close(self) -> BagSummary:
        """Finish the bag (rosbag2 metadata record, ``metadata.yaml``); idempotent."""
        with self._lock:
            if self._bag is None:
                if self._last_summary is not None:
                    return self._last_summary
                raise EvidenceStoreMisuse("no bag was opened")
            bag = self._bag
            summary = BagSummary(
                bag=bag.name,
                path=self._bag_path(bag.name),
                message_count=bag.message_count,
                payload_bytes=bag.payload_bytes,
                start_time_ns=bag.start_time_ns,
                end_time_ns=bag.end_time_ns,
                topics=tuple(
                    TopicSummary(topic=c.topic, type_name=c.type_name,
                                 message_count=c.message_count, dropped=c.dropped)
                    for c in sorted(bag.channels.values(), key=lambda c: c.topic)
                ),
                dropped=bag.dropped,
                truncated=bool(bag.truncated_reason),
                truncated_reason=bag.truncated_reason,
                metadata=bag.metadata,
            )
            self._backend_close(bag.name, self._rosbag2_metadata(bag))
            self._bag = None
            self._last_summary = summary
            return summary

    def read(self, ref: EvidenceRef) -> bytes:
        """The message ``ref`` cites, after checking its bytes against ``ref.sha256``.

        Matches topic and log time, and the sequence when the ref carries one
        (``sequence != 0``). Raises :class:`EvidenceNotFound` or
        :class:`EvidenceMismatch`; never returns unverified bytes.
        """
        if ref.kind != "bag":
            raise EvidenceStoreMisuse(f"not a bag evidence ref: {ref.id}", ref=ref.id, kind=ref.kind)
        with self._lock:
            candidates = self._backend_find(ref.bag, ref.topic, ref.log_time_ns)
        if ref.sequence:
            candidates = [c for c in candidates if c[0] == ref.sequence]
        if not candidates:
            raise EvidenceNotFound(
                f"no message on {ref.topic} at {ref.log_time_ns}"
                + (f" with sequence {ref.sequence}" if ref.sequence else "")
                + f" in {ref.bag}"
                + (" (a write dropped by a bag bound has sequence 0)" if ref.sequence == 0 else "")
                + self._not_found_detail(ref.bag),
                ref=ref.id, bag=ref.bag, topic=ref.topic, log_time_ns=ref.log_time_ns,
                sequence=ref.sequence,
            )
        if not ref.sha256:
            raise EvidenceMismatch(
                f"{ref.id} carries no sha256 to verify against", ref=ref.id, expected="", actual=""
            )
        digests = []
        for _sequence, data in candidates:
            digest = _sha256(data)
            if digest == ref.sha256:
                return data
            digests.append(digest)
        raise EvidenceMismatch(
            f"{ref.id}: sha256 of the stored bytes does not match the ref",
            ref=ref.id, expected=ref.sha256, actual=digests,
        )

    # -- backend hooks ----------------------------------------------------------------------

    @abstractmethod
    def _backend_open(self, name: str, metadata: dict[str, str]) -> None:
        """Create the bag; refuse (EvidenceStoreMisuse) a name this store already holds."""

    @abstractmethod
    def _backend_add_channel(self, name: str, channel: _Channel) -> None: ...

    @abstractmethod
    def _backend_write(
        self, name: str, channel: _Channel, sequence: int, log_time_ns: int, publish_time_ns: int,
        data: bytes,
    ) -> None: ...

    @abstractmethod
    def _backend_close(self, name: str, rosbag2_metadata: dict[str, Any]) -> None: ...

    @abstractmethod
    def _backend_find(self, bag: str, topic: str, log_time_ns: int) -> list[tuple[int, bytes]]:
        """``(sequence, data)`` of every message on ``topic`` at ``log_time_ns``; unknown bag -> EvidenceNotFound."""

    def _bag_path(self, name: str) -> str:
        return ""

    def _not_found_detail(self, bag: str) -> str:
        """What to add to a not-found message about the bag itself (unfinished, cut short)."""
        return ""

    def finalise_interrupted(self) -> list[BagFinalisation]:
        """Finish the bags a writer that died left unfinished; what was done, one entry per bag.
        Nothing to do for a store that keeps nothing across processes."""
        return []

    # -- helpers ------------------------------------------------------------------------------

    def _require_open(self) -> _OpenBag:
        if self._bag is None:
            raise EvidenceStoreMisuse("no bag is open; call open_bag first")
        return self._bag

    def _bound_exceeded(self, bag: _OpenBag, size: int, log_time_ns: int) -> str:
        if bag.truncated_reason:
            return bag.truncated_reason
        if self._max_bytes is not None and bag.payload_bytes + size > self._max_bytes:
            return "max_bytes"
        if (
            self._max_duration_ns is not None
            and bag.message_count > 0
            and log_time_ns - bag.start_time_ns > self._max_duration_ns
        ):
            return "max_duration"
        return ""

    def _rosbag2_metadata(self, bag: _OpenBag) -> dict[str, Any]:
        """rosbag2's BagMetadata (version 9) for the bag as it is now."""
        duration = bag.end_time_ns - bag.start_time_ns
        return {
            "version": ROSBAG2_METADATA_VERSION,
            "storage_identifier": "mcap",
            "duration": {"nanoseconds": duration},
            "starting_time": {"nanoseconds_since_epoch": bag.start_time_ns},
            "message_count": bag.message_count,
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": c.topic,
                        "type": c.type_name,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": _qos_list(c.qos_yaml),
                        "type_description_hash": c.type_hash,
                    },
                    "message_count": c.message_count,
                }
                for c in bag.channels.values()
            ],
            "compression_format": "",
            "compression_mode": "",
            "relative_file_paths": [bag.name],
            "files": [
                {
                    "path": bag.name,
                    "starting_time": {"nanoseconds_since_epoch": bag.start_time_ns},
                    "duration": {"nanoseconds": duration},
                    "message_count": bag.message_count,
                }
            ],
            "custom_data": dict(bag.metadata),
            "ros_distro": self._ros_distro,
        }


def _dump_yaml(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096)


class MemoryEvidenceStore(EvidenceStore):
    """The in-memory backend: the same contract, nothing on disk (tests, dry runs)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._messages: dict[str, dict[tuple[str, int], list[tuple[int, bytes]]]] = {}
        self._metadata: dict[str, dict[str, Any]] = {}

    def rosbag2_metadata(self, bag: str) -> dict[str, Any]:
        """The BagMetadata a closed bag would carry on disk."""
        with self._lock:
            if bag not in self._metadata:
                raise EvidenceNotFound(f"no closed bag {bag}", bag=bag)
            return self._metadata[bag]

    def _backend_open(self, name: str, metadata: dict[str, str]) -> None:
        if name in self._messages:
            raise EvidenceStoreMisuse(f"bag {name} already exists; evidence is never overwritten", bag=name)
        self._messages[name] = {}

    def _backend_add_channel(self, name: str, channel: _Channel) -> None:
        return None

    def _backend_write(
        self, name: str, channel: _Channel, sequence: int, log_time_ns: int, publish_time_ns: int,
        data: bytes,
    ) -> None:
        self._messages[name].setdefault((channel.topic, log_time_ns), []).append((sequence, data))

    def _backend_close(self, name: str, rosbag2_metadata: dict[str, Any]) -> None:
        self._metadata[name] = rosbag2_metadata

    def _backend_find(self, bag: str, topic: str, log_time_ns: int) -> list[tuple[int, bytes]]:
        messages = self._messages.get(bag)
        if messages is None:
            raise EvidenceNotFound(f"no bag {bag} in this store", bag=bag)
        return list(messages.get((topic, log_time_ns), []))


_MESSAGE_OPCODE = 0x05
_RECORD_PREFIX = struct.Struct("<BQ")
_MESSAGE_HEADER = struct.Struct("<HIQQ")
_LOCK_RETRIES = 3
_LOCK_RETRY_S = 0.02
_LOCK_WAIT_S = 2.0
"""How long a writer waits for the lock of the file it has just created (a finaliser that listed
the directory at that instant holds it for a moment, then sees the bag is not its to touch)."""


@dataclass
class _McapBag:
    path: Path
    stream: Any
    writer: Writer
    schema_ids: dict[str, int] = field(default_factory=dict)
    channel_ids: dict[str, int] = field(default_factory=dict)


class McapEvidenceStore(EvidenceStore):
    """The MCAP backend: rosbag2 bag directories under ``root``.

    ``<root>/<mission_id>/<mission_id>.mcap`` plus ``metadata.yaml``, readable
    by ``ros2 bag info <root>/<mission_id>``. Refs to bags this instance wrote
    are served from the offset index it keeps while writing (cheap, also while
    the bag is open); other bags under ``root`` are scanned once, linearly,
    into the same kind of index, which is what lets a bag whose writer died
    (no summary, no footer, maybe a record cut short) be read: every complete
    record is found, and a ref beyond them is not found, naming the bag and
    what it lost (:meth:`bag_state`).

    While a bag is open its writer holds an exclusive ``flock`` on the file
    (released by close, or by the kernel when the process dies), so
    :meth:`finalise_interrupted` can tell a bag being written from one left
    unfinished by a crash.
    """

    def __init__(self, root: str | os.PathLike[str], **options: Any) -> None:
        super().__init__(**options)
        self._root = Path(root)
        self._open: _McapBag | None = None
        self._index: dict[str, dict[tuple[str, int], list[_MessageAt]]] = {}
        """bag -> (topic, log time) -> messages, for bags this instance wrote."""
        self._scans: dict[str, tuple[tuple[int, int, int], BagState, dict[tuple[str, int], list[_MessageAt]]]] = {}
        """bag -> (inode, size, mtime), its state and index, for bags scanned from disk."""

    @property
    def root(self) -> Path:
        return self._root

    def bag_dir(self, bag: str) -> Path:
        """The rosbag2 bag directory of ``<mission_id>.mcap``."""
        return self._root / bag[: -len(".mcap")]

    def _bag_path(self, name: str) -> str:
        return str((self.bag_dir(name) / name).resolve())

    def bag_state(self, bag: str) -> BagState:
        """What ``bag`` holds on disk now (:class:`BagState`): finalised or not, being recorded,
        how many complete messages, how many bytes a crash cut off."""
        if not _BAG_NAME_RE.match(bag):
            raise EvidenceNotFound(f"not a bag name this store writes: {bag!r}", bag=bag)
        with self._lock:
            if self._open is not None and self._open.path.name == bag:
                count = sum(len(v) for v in self._index[bag].values())
                fields: dict[str, Any] = {"bag": bag, "path": str(self._open.path), "recording": True,
                                          "recovered_records": count, "truncated_bytes": 0, "lost_record": "",
                                          "exists": True, "finalised": False, "interrupted": False}
                return BagState(**fields, note=_state_note(fields))
            return self._scanned(bag)[0]

    # -- writing ---------------------------------------------------------------------------

    def _backend_open(self, name: str, metadata: dict[str, str]) -> None:
        directory = self.bag_dir(name)
        path = directory / name
        if path.exists() or (directory / "metadata.yaml").exists():
            raise EvidenceStoreMisuse(
                f"bag {path} already exists; evidence is never overwritten", bag=name, path=str(path)
            )
        directory.mkdir(parents=True, exist_ok=True)
        stream = _create_locked(path)
        try:
            writer = Writer(stream, compression=CompressionType.NONE, use_chunking=False)
            writer.start(profile="ros2", library=LIBRARY)
            writer.add_metadata(_OPEN_METADATA, dict(metadata))
            stream.flush()
        except BaseException:
            stream.close()
            raise
        self._open = _McapBag(path=path, stream=stream, writer=writer)
        self._index[name] = {}
        self._scans.pop(name, None)

    def _backend_add_channel(self, name: str, channel: _Channel) -> None:
        bag = self._require_mcap(name)
        schema_id = bag.schema_ids.get(channel.type_name)
        if schema_id is None:
            schema_id = bag.writer.register_schema(
                name=channel.type_name, encoding="ros2msg", data=channel.schema_text.encode("utf-8")
            )
            bag.schema_ids[channel.type_name] = schema_id
        bag.channel_ids[channel.topic] = bag.writer.register_channel(
            topic=channel.topic,
            message_encoding="cdr",
            schema_id=schema_id,
            metadata={"offered_qos_profiles": channel.qos_yaml, "topic_type_hash": channel.type_hash},
        )

    def _backend_write(
        self, name: str, channel: _Channel, sequence: int, log_time_ns: int, publish_time_ns: int,
        data: bytes,
    ) -> None:
        bag = self._require_mcap(name)
        channel_id = bag.channel_ids[channel.topic]
        try:
            bag.writer.add_message(
                channel_id=channel_id, log_time=log_time_ns, data=data,
                publish_time=publish_time_ns, sequence=sequence,
            )
            bag.stream.flush()
        except OSError as exc:
            raise EvidenceError(
                f"cannot write to {bag.path}: {_describe(exc)}", bag=name, topic=channel.topic, path=str(bag.path)
            ) from exc
        length = _RECORD_PREFIX.size + _MESSAGE_HEADER.size + len(data)
        offset = bag.stream.tell() - length
        self._index[name].setdefault((channel.topic, log_time_ns), []).append(
            _MessageAt(channel_id, sequence, log_time_ns, publish_time_ns, offset, length)
        )

    def _backend_close(self, name: str, rosbag2_metadata: dict[str, Any]) -> None:
        bag = self._require_mcap(name)
        serialized = _dump_yaml(rosbag2_metadata)
        bag.writer.add_metadata(
            "rosbag2", {"serialized_metadata": serialized, "ROS_DISTRO": str(rosbag2_metadata["ros_distro"])}
        )
        bag.writer.finish()
        bag.stream.close()  # releases the writer's lock
        self._open = None
        _write_metadata_yaml(bag.path.parent, rosbag2_metadata, durable=False)

    # -- reading ---------------------------------------------------------------------------

    def _backend_find(self, bag: str, topic: str, log_time_ns: int) -> list[tuple[int, bytes]]:
        if not _BAG_NAME_RE.match(bag):
            raise EvidenceNotFound(f"not a bag name this store writes: {bag!r}", bag=bag)
        path = self.bag_dir(bag) / bag
        index = self._index.get(bag)
        if index is None:
            if not path.is_file():
                raise EvidenceNotFound(f"no bag file {path}", bag=bag, path=str(path))
            index = self._scanned(bag)[1]
        return self._read_indexed(path, index.get((topic, log_time_ns), []), log_time_ns)

    def _not_found_detail(self, bag: str) -> str:
        try:
            state = self.bag_state(bag)
        except EvidenceError:
            return ""
        if not state.exists:
            return f" (no bag file at {state.path})"
        if state.finalised and not state.interrupted:
            return ""
        return f"; {state.note}"

    def _scanned(self, bag: str) -> tuple[BagState, dict[tuple[str, int], list[_MessageAt]]]:
        path = self.bag_dir(bag) / bag
        try:
            st = path.stat()
        except FileNotFoundError:
            return _scan_file(path)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._scans.get(bag)
        if cached is not None and cached[0] == key and not cached[1].recording:
            return cached[1], cached[2]
        state, index = _scan_file(path)
        self._scans[bag] = (key, state, index)
        return state, index

    def _read_indexed(self, path: Path, entries: list[_MessageAt], log_time_ns: int) -> list[tuple[int, bytes]]:
        found: list[tuple[int, bytes]] = []
        if not entries:
            return found
        try:
            with open(path, "rb") as stream:
                for entry in entries:
                    found.append((entry.sequence, _read_message(stream, path, entry, log_time_ns)))
        except OSError as exc:
            raise EvidenceNotFound(f"cannot read {path}: {_describe(exc)}", path=str(path)) from exc
        return found

    def _require_mcap(self, name: str) -> _McapBag:
        if self._open is None or self._open.path.name != name:
            raise EvidenceStoreMisuse(f"bag {name} is not open", bag=name)
        return self._open

    # -- after a crash ---------------------------------------------------------------------

    def finalise_interrupted(self) -> list[BagFinalisation]:
        """Finish every bag under ``root`` a dead writer left unfinished; returns what was done.

        A bag is interrupted when its file has no footer and no live process
        holds the writer's lock (the bag this store has open, and any bag
        another process is writing, are left alone: ``skipped_recording``).
        Each is rewritten into a finished bag -- the same schemas, channels,
        messages (bytes, sequences, times) and metadata records, then the
        ``rosbag2`` metadata record, the summary and the footer -- into a
        temporary file that is fsynced and renamed over the original, then
        ``metadata.yaml`` the same way. Interrupted at any point, the original
        or its finished copy is there, never neither. ``custom_data`` keeps
        what the bag was opened with and adds ``robot_harness.interrupted:
        "true"`` and ``robot_harness.truncated_bytes`` (the bytes of a record
        cut short that could not be kept). A finished bag with
        ``metadata.yaml`` costs one small read and is not reported, so
        calling this again is a no-op.
        """
        results: list[BagFinalisation] = []
        if not self._root.is_dir():
            return results
        for directory in sorted(p for p in self._root.iterdir() if p.is_dir()):
            name = f"{directory.name}.mcap"
            path = directory / name
            _remove_stale_creations(directory)
            if not _BAG_NAME_RE.match(name) or not path.is_file():
                continue
            with self._lock:
                if self._open is not None and self._open.path == path:
                    continue
            try:
                result = self._finalise_one(name, path)
            except (OSError, EvidenceError) as exc:
                reason = exc.message if isinstance(exc, EvidenceError) else _describe(exc)
                result = BagFinalisation(bag=name, path=str(path), action="skipped_unreadable",
                                         note=f"{name}: not finalised: {reason}")
            if result is not None:
                log.debug("%s", result.note)  # the caller reports it (the recorder logs each one)
                results.append(result)
        return results

    def _finalise_one(self, name: str, path: Path) -> BagFinalisation | None:
        started = time.monotonic()
        with open(path, "rb") as stream:
            taken = _lock_state(stream)
            for _ in range(_LOCK_RETRIES):
                if taken is not False:
                    break
                time.sleep(_LOCK_RETRY_S)  # a reader (journal verify) holds it for an instant; a writer for good
                taken = _lock_state(stream)
            if taken is not True:
                if _looks_finished(stream, os.fstat(stream.fileno()).st_size):
                    return None
                why = "being written by a live process (its lock is held)" if taken is False else \
                    "cannot tell whether a process is writing it (the file system refuses flock)"
                return BagFinalisation(bag=name, path=str(path), action="skipped_recording",
                                       note=f"{name}: left alone: {why}")
            try:
                if os.fstat(stream.fileno()).st_ino != os.stat(path).st_ino:
                    return None  # another process finalised it meanwhile
                size = os.fstat(stream.fileno()).st_size
                if _looks_finished(stream, size):
                    if (path.parent / "metadata.yaml").is_file():
                        return None
                    _write_metadata_yaml(path.parent, read_bag_metadata(path), durable=True)
                    return BagFinalisation(bag=name, path=str(path), action="metadata_written",
                                           seconds=time.monotonic() - started,
                                           note=f"{name}: metadata.yaml written beside the finished bag")
                walk, metadata = self._rewrite(name, path, stream, size)
                _write_metadata_yaml(path.parent, metadata, durable=True)
            finally:
                fcntl.flock(stream.fileno(), fcntl.LOCK_UN)
        lost = f"; {walk.truncated_bytes} bytes after the last complete record dropped" + (
            f" ({walk.lost})" if walk.lost else "") if walk.truncated_bytes else ""
        return BagFinalisation(
            bag=name, path=str(path), action="finalised", recovered_records=walk.messages,
            truncated_bytes=walk.truncated_bytes, lost_record=walk.lost, seconds=time.monotonic() - started,
            note=f"{name}: finalised after an interrupted recording: {walk.messages} messages kept{lost}",
        )

    def _rewrite(self, name: str, path: Path, source: Any, size: int) -> tuple[_Walk, dict[str, Any]]:
        tmp = path.with_name(f".{name}.finalising")
        tmp.unlink(missing_ok=True)  # left by a finalisation interrupted in its turn; the original is intact
        walk = _Walk(source, size, read_data=True)
        custom: dict[str, str] = {}
        channels: dict[int, _Channel] = {}
        schema_ids: dict[int, int] = {}
        channel_ids: dict[int, int] = {}
        start = end = count = payload = 0
        header_seen = False
        try:
            with open(tmp, "xb") as out:
                writer = Writer(out, compression=CompressionType.NONE, use_chunking=False)
                for item in walk:
                    if isinstance(item, Header):
                        writer.start(profile=item.profile, library=item.library)
                        header_seen = True
                        continue
                    if not header_seen:
                        writer.start(profile="ros2", library=LIBRARY)
                        header_seen = True
                    if isinstance(item, Schema):
                        if item.id not in schema_ids:
                            schema_ids[item.id] = writer.register_schema(item.name, item.encoding, item.data)
                    elif isinstance(item, Channel):
                        if item.id in channel_ids:
                            continue
                        schema = walk.schemas.get(item.schema_id)
                        channel_ids[item.id] = writer.register_channel(
                            item.topic, item.message_encoding, schema_ids.get(item.schema_id, 0), item.metadata)
                        qos_yaml = item.metadata.get("offered_qos_profiles", "")
                        try:
                            _qos_list(qos_yaml)
                        except EvidenceStoreMisuse:
                            qos_yaml = ""  # metadata.yaml then says "unknown"; the channel keeps the original text
                        channels[item.id] = _Channel(
                            topic=item.topic, type_name=_type_name(schema), schema_text="", qos_yaml=qos_yaml,
                            type_hash=item.metadata.get("topic_type_hash", ""))
                    elif isinstance(item, Metadata):
                        if item.name == _OPEN_METADATA:
                            custom = dict(item.metadata)
                        writer.add_metadata(item.name, dict(item.metadata))
                    elif isinstance(item, _MessageAt):
                        assert item.data is not None
                        writer.add_message(channel_ids[item.channel_id], item.log_time, item.data, item.publish_time,
                                           sequence=item.sequence)
                        channels[item.channel_id].message_count += 1
                        start = item.log_time if count == 0 else min(start, item.log_time)
                        end = max(end, item.log_time)
                        count += 1
                        payload += len(item.data)
                if not header_seen:  # the writer died before its header reached the disk: an empty bag
                    writer.start(profile="ros2", library=LIBRARY)
                opened = _OpenBag(
                    name=name,
                    metadata={"mission_id": name[: -len(".mcap")], **custom, _INTERRUPTED_KEY: "true",
                              _LOST_BYTES_KEY: str(walk.truncated_bytes)},
                    channels={c.topic: c for c in channels.values()},
                    message_count=count, payload_bytes=payload, start_time_ns=start, end_time_ns=end,
                )
                metadata = self._rosbag2_metadata(opened)
                writer.add_metadata(
                    "rosbag2", {"serialized_metadata": _dump_yaml(metadata), "ROS_DISTRO": str(metadata["ros_distro"])})
                writer.finish()
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # an error, not a kill: leave nothing behind; the original is intact
            raise
        _fsync_dir(path.parent)
        self._scans.pop(name, None)
        return walk, metadata


def _create_locked(path: Path) -> Any:
    """Create ``path`` exclusively, already holding the writer's lock.

    The file is created under a temporary name, locked, and then linked to
    its real name (which fails if the name exists), so no other process can
    ever see the bag's name without its lock held.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.creating")
    tmp.unlink(missing_ok=True)
    stream = open(tmp, "xb")  # noqa: SIM115 - closed in _backend_close
    try:
        fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise EvidenceStoreMisuse(
                f"bag {path} already exists; evidence is never overwritten", bag=path.name, path=str(path)
            ) from None
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        # No hard links or no flock here: create the name directly and lock it as soon as it exists.
        stream.close()
        tmp.unlink(missing_ok=True)
        log.warning("evidence bag %s: %s; locking after creation", path, _describe(exc))
        stream = open(path, "xb")  # noqa: SIM115
        deadline = time.monotonic() + _LOCK_WAIT_S
        while _lock_state(stream) is False:
            if time.monotonic() >= deadline:
                stream.close()
                raise EvidenceError(f"cannot lock the new bag {path}: another process holds it", path=str(path))
            time.sleep(0.01)
    except BaseException:
        stream.close()
        raise
    return stream


def _remove_stale_creations(directory: Path) -> None:
    """Remove the temporary files of bag creations whose process died before naming the bag."""
    for stale in directory.glob(".*.mcap.*.creating"):
        try:
            with open(stale, "rb") as stream:
                if _lock_state(stream) is not True:
                    continue
                stale.unlink()
        except OSError:
            continue


def _read_message(stream: Any, path: Path, entry: _MessageAt, log_time_ns: int) -> bytes:
    if entry.chunked:
        stream.seek(entry.offset)
        prefix = stream.read(_RECORD_PREFIX.size)
        _opcode, length = _RECORD_PREFIX.unpack(prefix)
        try:
            records = breakup_chunk(Chunk.read(ReadDataStream(io.BytesIO(stream.read(length)))), validate_crc=True)
            record = records[entry.length]
        except (McapError, EOFError, struct.error, ValueError, IndexError) as exc:
            raise BagFormatError(f"{path}: the chunk at offset {entry.offset} no longer reads: {_describe(exc)}",
                                 path=str(path), offset=entry.offset) from exc
        if not isinstance(record, Message) or (record.sequence, record.log_time) != (entry.sequence, log_time_ns):
            raise BagFormatError(f"{path}: the chunk at offset {entry.offset} changed", path=str(path))
        return bytes(record.data)
    stream.seek(entry.offset)
    record = stream.read(entry.length)
    if len(record) != entry.length:
        raise BagFormatError(f"{path} is shorter than its index", path=str(path))
    opcode, content_length = _RECORD_PREFIX.unpack_from(record)
    chan, seq, log_time, _publish = _MESSAGE_HEADER.unpack_from(record, _RECORD_PREFIX.size)
    if (opcode, content_length, chan, seq, log_time) != (
        _MESSAGE_OPCODE, entry.length - _RECORD_PREFIX.size, entry.channel_id, entry.sequence, log_time_ns
    ):
        raise BagFormatError(
            f"{path}: the message record at offset {entry.offset} is not the one indexed",
            path=str(path), offset=entry.offset,
        )
    return record[_RECORD_PREFIX.size + _MESSAGE_HEADER.size:]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_metadata_yaml(directory: Path, metadata: dict[str, Any], *, durable: bool) -> None:
    """``metadata.yaml`` replaced atomically; ``durable`` fsyncs the file and the directory too."""
    target = directory / "metadata.yaml"
    tmp = target.with_name(".metadata.yaml.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(_dump_yaml({"rosbag2_bagfile_information": metadata}))
        if durable:
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, target)
    if durable:
        _fsync_dir(directory)


# --------------------------------------------------------------------------- reading bags


class BagMessage(NamedTuple):
    """One message of a bag, undecoded."""

    topic: str
    type_name: str
    """Always ``pkg/<msg|srv|action>/Type`` (schemas without ``/msg/`` are normalized)."""
    log_time_ns: int
    data: bytes


def _bag_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        meta = path / "metadata.yaml"
        if meta.is_file():
            info = _load_metadata_yaml(meta)
            names = info.get("relative_file_paths") or []
            return [path / str(n) for n in names]
        files = sorted(path.glob("*.mcap"))
        if files:
            return files
    raise EvidenceNotFound(f"no MCAP bag at {path}", path=str(path))


def _load_metadata_yaml(meta: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(meta.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BagFormatError(f"{meta} is not YAML: {exc}", path=str(meta)) from exc
    info = doc.get("rosbag2_bagfile_information") if isinstance(doc, dict) else None
    if not isinstance(info, dict):
        raise BagFormatError(f"{meta} has no rosbag2_bagfile_information", path=str(meta))
    return info


def read_bag_messages(
    path: str | os.PathLike[str], *, topics: Collection[str] | None = None
) -> Iterator[BagMessage]:
    """Every message of a rosbag2 MCAP bag (a ``.mcap`` file or a bag directory), undecoded.

    Refuses, with :class:`BagFormatError`, a bag whose profile is not ``ros2``,
    or that holds a channel whose message encoding is not ``cdr`` or whose
    schema encoding is not ``ros2msg``/``ros2idl`` -- on any topic, not only
    the ones asked for: a bag this reader cannot read is named as such rather
    than looking empty. With a summary the check runs before anything is
    yielded. Messages stream in file order (the order rosbag2 received them),
    never loading a whole bag into memory.
    """
    for _file, schema, channel, message in _iter_records(Path(path), topics):
        yield BagMessage(channel.topic, _type_name(schema), message.log_time, bytes(message.data))


def read_bag_decoded(
    path: str | os.PathLike[str], *, topics: Collection[str]
) -> Iterator[tuple[BagMessage, Any]]:
    """The messages of ``topics``, each with its decoding by the bag's own schema (no ROS needed).

    Same checks as :func:`read_bag_messages`. The decoded value has the
    message's fields as attributes (``msg.header.stamp.sec``...). A schema the
    decoder cannot parse, or bytes that do not match it, raise
    :class:`BagFormatError` naming the topic.
    """
    from mcap_ros2.decoder import DecoderFactory

    factory = DecoderFactory()
    decoders: dict[tuple[str, int], Any] = {}
    for file, schema, channel, message in _iter_records(Path(path), topics):
        key = (str(file), channel.schema_id)
        try:
            decoder = decoders.get(key)
            if decoder is None:
                decoder = decoders[key] = factory.decoder_for(channel.message_encoding, schema)
                if decoder is None:
                    raise ValueError("no decoder for this schema")
            value = decoder(bytes(message.data))
        except Exception as exc:  # noqa: BLE001 - the decoder raises assorted errors for bad schemas and bytes
            raise BagFormatError(
                f"{file}: cannot decode {channel.topic} ({_type_name(schema) or 'no schema'}) with the bag's "
                f"schema: {type(exc).__name__}: {exc}", path=str(file), topic=channel.topic,
            ) from exc
        yield BagMessage(channel.topic, _type_name(schema), message.log_time, bytes(message.data)), value


_SCHEMA_ENCODINGS = ("ros2msg", "ros2idl")


def _type_name(schema: Any) -> str:
    type_name = schema.name if schema is not None else ""
    return normalize_type_name(type_name) if _TYPE_NAME_RE.match(type_name) else type_name


def _iter_records(path: Path, topics: Collection[str] | None) -> Iterator[tuple[Path, Any, Any, Any]]:
    """``(file, schema, channel, message)`` of the wanted topics, after checking every channel's encodings."""
    wanted = None if topics is None else frozenset(topics)
    for file in _bag_files(path):
        try:
            with open(file, "rb") as stream:
                if not _looks_finished(stream, os.fstat(stream.fileno()).st_size):
                    yield from _iter_unfinished(file, stream, wanted)
                    continue
                stream.seek(0)
                reader = make_reader(stream)
                header = reader.get_header()
                if header.profile != "ros2":
                    raise BagFormatError(
                        f"{file}: MCAP profile {header.profile!r} is not 'ros2'", path=str(file),
                        profile=header.profile,
                    )
                summary = reader.get_summary()
                checked: set[int] = set()
                if summary is not None:
                    for channel in summary.channels.values():
                        _require_ros2(file, channel, summary.schemas.get(channel.schema_id))
                        checked.add(channel.id)
                # Without a summary the file is scanned anyway: read every channel, so each is checked.
                filter_ = wanted if summary is not None else None
                for schema, channel, message in reader.iter_messages(topics=filter_, log_time_order=False):
                    if channel.id not in checked:
                        _require_ros2(file, channel, schema)
                        checked.add(channel.id)
                    if wanted is None or channel.topic in wanted:
                        yield file, schema, channel, message
        except (McapError, EOFError, struct.error) as exc:
            raise BagFormatError(f"cannot read {file}: {_describe(exc)}", path=str(file)) from exc


def _iter_unfinished(file: Path, stream: Any, wanted: frozenset[str] | None) -> Iterator[tuple[Path, Any, Any, Any]]:
    """The complete records of a bag whose writer never finished it (no footer), by a linear scan;
    a cut or torn tail ends the iteration with a warning naming what was lost."""
    walk = _Walk(stream, os.fstat(stream.fileno()).st_size, read_data=True)
    checked: set[int] = set()
    for item in walk:
        if isinstance(item, Header) and item.profile != "ros2":
            raise BagFormatError(f"{file}: MCAP profile {item.profile!r} is not 'ros2'", path=str(file),
                                 profile=item.profile)
        if not isinstance(item, _MessageAt):
            continue
        channel = walk.channels[item.channel_id]
        schema = walk.schemas.get(channel.schema_id)
        if channel.id not in checked:
            _require_ros2(file, channel, schema)
            checked.add(channel.id)
        if wanted is None or channel.topic in wanted:
            yield file, schema, channel, Message(channel_id=item.channel_id, sequence=item.sequence,
                                                 log_time=item.log_time, publish_time=item.publish_time,
                                                 data=item.data or b"")
    if walk.truncated_bytes or walk.problem:
        log.warning("%s is unfinalised (%s); read its %d complete messages", file, walk.problem, walk.messages)


def _require_ros2(file: Path, channel: Any, schema: Any) -> None:
    if channel.message_encoding != "cdr":
        raise BagFormatError(
            f"{file}: unsupported message encoding {channel.message_encoding!r} on topic {channel.topic}; "
            "only 'cdr' (ROS 2) bags are read",
            path=str(file), topic=channel.topic, message_encoding=channel.message_encoding,
        )
    if schema is not None and schema.encoding not in _SCHEMA_ENCODINGS:
        raise BagFormatError(
            f"{file}: unsupported schema encoding {schema.encoding!r} on topic {channel.topic}; "
            f"expected one of {list(_SCHEMA_ENCODINGS)}",
            path=str(file), topic=channel.topic, schema_encoding=schema.encoding,
        )


def read_bag_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """rosbag2's BagMetadata of a bag: ``metadata.yaml`` of a bag directory, else the file's
    last ``rosbag2`` metadata record (several may exist; the last one holds), else the
    ``metadata.yaml`` beside the file. Raises :class:`BagFormatError` when there is none.
    """
    p = Path(path)
    if p.is_dir():
        if (p / "metadata.yaml").is_file():
            return _load_metadata_yaml(p / "metadata.yaml")
        p = _bag_files(p)[0]
    if not p.is_file():
        raise EvidenceNotFound(f"no MCAP bag at {p}", path=str(p))
    last: str | None = None
    unfinished = False
    try:
        with open(p, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            unfinished = not _looks_finished(stream, size)
            stream.seek(0)
            records = (r for r in _Walk(stream, size) if isinstance(r, Metadata)) if unfinished \
                else make_reader(stream).iter_metadata()
            for record in records:
                if record.name == "rosbag2" and record.metadata.get("serialized_metadata"):
                    last = record.metadata["serialized_metadata"]
    except (McapError, EOFError, struct.error) as exc:
        raise BagFormatError(f"cannot read {p}: {_describe(exc)}", path=str(p)) from exc
    if last is not None:
        doc = yaml.safe_load(last)
        if isinstance(doc, dict):
            return doc
    if (p.parent / "metadata.yaml").is_file():
        return _load_metadata_yaml(p.parent / "metadata.yaml")
    raise BagFormatError(f"{p} carries no rosbag2 metadata"
                         + (" (it is unfinalised: its writer never closed it)" if unfinished else ""), path=str(p))


# --------------------------------------------------------------------------- unfinished bags

_MAGIC = b"\x89MCAP0\r\n"
_FOOTER = struct.Struct("<BQQQI")
"""A footer record with its prefix: opcode 0x02, length 20, summary start, summary offset start, crc."""
_OPCODES = {
    0x01: "header", 0x02: "footer", 0x03: "schema", 0x04: "channel", 0x05: "message", 0x06: "chunk",
    0x07: "message index", 0x08: "chunk index", 0x09: "attachment", 0x0A: "attachment index",
    0x0B: "statistics", 0x0C: "metadata", 0x0D: "metadata index", 0x0E: "summary offset", 0x0F: "data end",
}
_OPEN_METADATA = "robot_harness.bag"
"""The metadata record written when a bag opens: its rosbag2 ``custom_data``, so a bag whose writer
died can be finalised with the metadata it was opened with."""
_INTERRUPTED_KEY = "robot_harness.interrupted"
_LOST_BYTES_KEY = "robot_harness.truncated_bytes"


@dataclass(frozen=True, slots=True)
class _MessageAt:
    """A complete message record: where it is, and (when asked for) its bytes."""

    channel_id: int
    sequence: int
    log_time: int
    publish_time: int
    offset: int
    """File offset of the record (of its chunk, for a message inside a chunk)."""
    length: int
    """Whole record length, prefix included (for a chunked message: its index in the chunk)."""
    chunked: bool = False
    data: bytes | None = None


class _Walk:
    """One linear pass over an MCAP file's records that survives an unfinished or torn tail.

    Iterating yields ``Header``, ``Schema``, ``Channel``, ``Metadata`` and
    :class:`_MessageAt` items of the data section, in file order. It stops at
    the footer, at the end of the file, or at the first record that is cut
    short or is not a record (an opcode MCAP does not define, a length past
    the end, a body that does not parse): what follows the last complete
    record is the lost tail, described afterwards by ``end``, ``lost`` and
    ``problem``. This is what ``mcap recover`` does, without the copy.
    """

    def __init__(self, stream: Any, size: int, *, read_data: bool = False) -> None:
        self._stream = stream
        self.size = size
        self._read_data = read_data
        self.end = 0
        """Offset just past the last complete record (or the magic)."""
        self.finalised = False
        """A footer and the closing magic were found: the writer finished the file."""
        self.records = 0
        self.messages = 0
        self.lost = ""
        """What the record cut short at the end was, when its start survived."""
        self.problem = ""
        self.orphans = 0
        """Messages on a channel the file never defined (skipped)."""
        self.channels: dict[int, Channel] = {}
        self.schemas: dict[int, Schema] = {}

    @property
    def truncated_bytes(self) -> int:
        return self.size - self.end if not self.finalised else 0

    def __iter__(self) -> Iterator[Any]:
        stream = self._stream
        stream.seek(0)
        magic = stream.read(len(_MAGIC))
        if magic != _MAGIC[: len(magic)]:
            raise BagFormatError(f"not an MCAP file (magic {magic!r})", magic=repr(magic))
        if len(magic) < len(_MAGIC):
            self.problem = "the file ends inside the MCAP magic"
            return
        self.end = offset = len(_MAGIC)
        in_summary = False
        while True:
            if offset == self.size:
                self.problem = "no footer: the writer never finished the file"
                return
            prefix = stream.read(_RECORD_PREFIX.size)
            if len(prefix) < _RECORD_PREFIX.size:
                self._cut(f"a record prefix cut at {len(prefix)} of {_RECORD_PREFIX.size} bytes")
                return
            opcode, length = _RECORD_PREFIX.unpack(prefix)
            kind = _OPCODES.get(opcode)
            if kind is None and opcode < 0x80:
                self.problem = f"bytes at offset {offset} are not an MCAP record (opcode {opcode:#04x})"
                return
            body_at = offset + _RECORD_PREFIX.size
            if length > self.size - body_at:
                self._cut_record(kind or f"record {opcode:#04x}", opcode, length, body_at)
                return
            try:
                item = self._parse(opcode, length, body_at, in_summary)
            except (McapError, EOFError, struct.error, ValueError, UnicodeDecodeError) as exc:
                self.problem = f"the {kind} record at offset {offset} does not parse: {_describe(exc)}"
                return
            offset = body_at + length
            stream.seek(offset)
            if opcode == 0x02:
                if stream.read(len(_MAGIC)) == _MAGIC and offset + len(_MAGIC) == self.size:
                    self.finalised = True
                    self.end = self.size
                    self.problem = ""
                else:
                    self.problem = "a footer without the closing magic"
                return
            self.records += 1
            self.end = offset
            if opcode == 0x0F:
                in_summary = True
            if item is None:
                continue
            if isinstance(item, list):
                yield from item
            else:
                yield item

    def _parse(self, opcode: int, length: int, body_at: int, in_summary: bool) -> Any:
        stream = self._stream
        if in_summary or opcode not in (0x01, 0x03, 0x04, 0x05, 0x06, 0x0C):
            return None  # summary, index and attachment records: rebuilt on finalisation, never cited
        if opcode == 0x05:
            if length < _MESSAGE_HEADER.size:
                raise ValueError(f"message record of {length} bytes")
            channel_id, sequence, log_time, publish_time = _MESSAGE_HEADER.unpack(stream.read(_MESSAGE_HEADER.size))
            data = stream.read(length - _MESSAGE_HEADER.size) if self._read_data else None
            return self._message(_MessageAt(channel_id, sequence, log_time, publish_time,
                                            body_at - _RECORD_PREFIX.size, _RECORD_PREFIX.size + length, data=data))
        body = ReadDataStream(io.BytesIO(stream.read(length)))
        if opcode == 0x01:
            return Header.read(body)
        if opcode == 0x03:
            schema = Schema.read(body)
            self.schemas[schema.id] = schema
            return schema
        if opcode == 0x04:
            channel = Channel.read(body)
            self.channels[channel.id] = channel
            return channel
        if opcode == 0x0C:
            return Metadata.read(body)
        out: list[Any] = []
        for index, record in enumerate(breakup_chunk(Chunk.read(body), validate_crc=True)):
            if isinstance(record, Schema):
                self.schemas[record.id] = record
                out.append(record)
            elif isinstance(record, Channel):
                self.channels[record.id] = record
                out.append(record)
            elif isinstance(record, Message):
                item = self._message(_MessageAt(
                    record.channel_id, record.sequence, record.log_time, record.publish_time,
                    body_at - _RECORD_PREFIX.size, index, chunked=True,
                    data=bytes(record.data) if self._read_data else None))
                if item is not None:
                    out.append(item)
        return out

    def _message(self, message: _MessageAt) -> _MessageAt | None:
        if message.channel_id not in self.channels:
            self.orphans += 1
            return None
        self.messages += 1
        return message

    def _cut(self, what: str) -> None:
        self.lost = what
        self.problem = f"{self.size - self.end} bytes at the end are not a complete record: {what}"

    def _cut_record(self, kind: str, opcode: int, length: int, body_at: int) -> None:
        have = self.size - body_at
        total = f"cut at {have + _RECORD_PREFIX.size} of {length + _RECORD_PREFIX.size} bytes"
        what = f"a {kind} record {total}"
        if opcode == 0x05 and have >= _MESSAGE_HEADER.size:
            channel_id, sequence, log_time, _ = _MESSAGE_HEADER.unpack(self._stream.read(_MESSAGE_HEADER.size))
            channel = self.channels.get(channel_id)
            topic = channel.topic if channel is not None else f"channel {channel_id}"
            what = f"a message on {topic} (sequence {sequence}, log time {log_time}) {total}"
        self._cut(what)


class BagState(BaseModel):
    """What one bag file holds as found on disk: finished or not, recovered and lost.

    A bag whose writer died (a crash, SIGKILL, power loss) has no summary and
    no footer, and may end in a record cut short. Its complete records are
    evidence like any other; the cut record, and anything after it, is lost
    and counted here.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["bag_state"] = "bag_state"
    format_version: int = FORMAT_VERSION
    bag: str
    """File name, as evidence refs cite it."""
    path: str
    exists: bool = True
    finalised: bool = False
    """The file has its footer: the writer finished it (or a restarted harness finalised it)."""
    recording: bool = False
    """A live process holds the writer's lock: the bag is being written now, not interrupted."""
    interrupted: bool = False
    """The writer died before closing: the bag is unfinalised, or was finalised after the crash."""
    recovered_records: int = 0
    """Complete message records read from the file."""
    truncated_bytes: int = 0
    """Bytes after the last complete record (for a finalised bag: those dropped when it was finalised)."""
    lost_record: str = ""
    """The record cut short at the end, when its start survived (``a message on /odom (sequence 41, ...``)."""
    file_bytes: int = 0
    note: str = ""
    """One line for an operator."""


class BagFinalisation(BaseModel):
    """What :meth:`McapEvidenceStore.finalise_interrupted` did with one bag."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["bag_finalisation"] = "bag_finalisation"
    format_version: int = FORMAT_VERSION
    bag: str
    path: str
    action: Literal["finalised", "metadata_written", "skipped_recording", "skipped_unreadable"]
    """``finalised``: rewritten with its summary and ``metadata.yaml``; ``metadata_written``: the MCAP
    was finished but ``metadata.yaml`` was missing; ``skipped_*``: left untouched, and why."""
    recovered_records: int = 0
    truncated_bytes: int = 0
    lost_record: str = ""
    seconds: float = 0.0
    note: str = ""


def _looks_finished(stream: Any, size: int) -> bool:
    """The file ends in a footer record and the magic (O(1); a full scan is what proves it)."""
    if size < len(_MAGIC) * 2 + _FOOTER.size:
        return False
    stream.seek(size - len(_MAGIC) - _FOOTER.size)
    tail = stream.read(_FOOTER.size + len(_MAGIC))
    opcode, length, summary_start, _offsets, _crc = _FOOTER.unpack_from(tail)
    return tail[_FOOTER.size:] == _MAGIC and opcode == 0x02 and length == 20 and summary_start < size


def _lock_state(stream: Any) -> bool | None:
    """Try the writer's lock on ``stream``: True taken (the caller now holds it), False held by a
    live writer, None when this file system cannot tell (treated as held)."""
    try:
        fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def _state_note(state_: dict[str, Any]) -> str:
    name = state_["bag"]
    if not state_["exists"]:
        return f"{name}: no bag file at {state_['path']}"
    lost = state_["truncated_bytes"]
    tail = (f"; {lost} bytes after the last complete record were lost"
            + (f" ({state_['lost_record']})" if state_["lost_record"] else "")) if lost else ""
    count = state_["recovered_records"]
    if state_["recording"]:
        return f"{name}: being recorded by a live process; {count} messages so far"
    if not state_["finalised"]:
        return (f"{name}: unfinalised (its writer stopped before closing it); {count} complete messages "
                f"recovered by a linear scan{tail}")
    if state_["interrupted"]:
        return f"{name}: finalised after an interrupted recording; {count} messages{tail}"
    return f"{name}: finalised; {count} messages"


def bag_state(path: str | os.PathLike[str]) -> BagState:
    """Scan one ``.mcap`` file and say what it holds (see :class:`BagState`); never raises for a
    cut or torn tail, only :class:`BagFormatError` for a file that is not MCAP at all."""
    return _scan_file(Path(path))[0]


def _scan_file(path: Path) -> tuple[BagState, dict[tuple[str, int], list[_MessageAt]]]:
    """The bag's state and its offset index, (topic, log time) -> messages, from one linear pass."""
    fields: dict[str, Any] = {"bag": path.name, "path": str(path), "exists": path.is_file()}
    index: dict[tuple[str, int], list[_MessageAt]] = {}
    if not fields["exists"]:
        fields["note"] = _state_note({**fields, "truncated_bytes": 0, "recovered_records": 0, "lost_record": "",
                                      "recording": False, "finalised": False, "interrupted": False})
        return BagState(**fields), index
    custom: dict[str, str] = {}
    try:
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            walk = _Walk(stream, size)
            for item in walk:
                if isinstance(item, _MessageAt):
                    topic = walk.channels[item.channel_id].topic
                    index.setdefault((topic, item.log_time), []).append(item)
                elif isinstance(item, Metadata) and item.name == "rosbag2":
                    doc = yaml.safe_load(item.metadata.get("serialized_metadata") or "") or {}
                    custom = dict(doc.get("custom_data") or {}) if isinstance(doc, dict) else {}
            recording = False
            if not walk.finalised:
                taken = _lock_state(stream)
                recording = taken is False  # None: this file system cannot tell; said unfinalised
                if taken:
                    fcntl.flock(stream.fileno(), fcntl.LOCK_UN)
    except OSError as exc:
        raise BagFormatError(f"cannot read {path}: {_describe(exc)}", path=str(path)) from exc
    except yaml.YAMLError as exc:
        raise BagFormatError(f"{path}: its rosbag2 metadata record is not YAML: {exc}", path=str(path)) from exc
    interrupted = (not walk.finalised and not recording) or custom.get(_INTERRUPTED_KEY) == "true"
    lost = walk.truncated_bytes
    if walk.finalised:
        recorded = str(custom.get(_LOST_BYTES_KEY, "0"))
        lost = int(recorded) if recorded.isdigit() else 0
    fields.update(finalised=walk.finalised, recording=recording, interrupted=interrupted,
                  recovered_records=walk.messages, truncated_bytes=lost, lost_record=walk.lost,
                  file_bytes=size)
    fields["note"] = _state_note(fields)
    return BagState(**fields), index


# --------------------------------------------------------------------------- artifacts


def verify_artifact(uri: str, sha256: str) -> None:
    """Check that the ``file://`` artifact at ``uri`` still has digest ``sha256``.

    Raises :class:`EvidenceNotFound` (no such file), :class:`EvidenceMismatch`
    (different bytes) or :class:`EvidenceStoreMisuse` (not a local file URI).
    """
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        raise EvidenceStoreMisuse(f"only local file:// artifact URIs are verifiable, got {uri!r}", uri=uri)
    path = Path(unquote(parsed.path))
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError as exc:
        raise EvidenceNotFound(f"artifact {uri} does not exist", uri=uri) from exc
    except IsADirectoryError as exc:
        raise EvidenceNotFound(f"artifact {uri} is a directory", uri=uri) from exc
    actual = digest.hexdigest()
    if actual != sha256.lower():
        raise EvidenceMismatch(
            f"artifact {uri}: sha256 {actual} does not match {sha256}", uri=uri, expected=sha256, actual=actual
        )
