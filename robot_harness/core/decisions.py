"""Decision replay: re-run the mission runner on a recorded tape and fail loudly at the first difference.

A verdict replay (``evidence/replay.py``) shows that a recorded mission's
verdict is reproducible. This shows that the harness would *decide* the same
way again: the runner is re-run with the recorded readings (:mod:`.tape`) as
its clock, ids and ports, and every journal event it writes is compared with
the recorded one, in order: type, seq, ids, stamp and payload. The first
difference raises :class:`~.errors.NondeterminismError` naming the recorded
event, the replayed event and the field that differs (a dotted path into the
event). A replay that asks the tape for a reading the recording did not take
fails the same way, at that reading, after the events written up to then were
found equal.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .clock import IdGenerator
from .config import HarnessConfig
from .errors import NondeterminismError
from .journal import MemoryJournal
from .payloads import MissionFinished, WorldSnapshotCaptured, payload_of
from .records import EventDraft, EventType, JournalEvent
from .tape import TapePlayer

__all__ = ["PORTS", "Divergence", "DecisionReplay", "WhatIf", "ReplayJournal", "first_divergence", "replay_decisions",
           "what_if"]

PORTS: dict[str, tuple[str, ...]] = {
    "snapshots": ("capture",),
    "planner": ("next_turn", "wait_for_call", "drain_calls"),
    "navigation": ("send_goal", "lookup", "adopt", "poll", "cancel", "use"),
    "robot_io": ("capture_image", "speak", "send_message", "use_camera"),
    "feasibility": ("probe",),
    "verifier": ("verify",),
    "recorder": ("start", "record_record", "stop"),
    "recovery": ("decide", "drain_calls"),
    "artifacts": ("check",),
    "memory": ("provider_stats", "examples", "record_mission"),
}
"""The runner's ports by role, with the methods whose answers a tape keeps."""

_MISSING = object()


@dataclass(frozen=True)
class Divergence:
    """Where a replay's events first differ from the recording's."""

    index: int
    """Position in the mission's events (0-based)."""
    recorded: JournalEvent | None
    replayed: JournalEvent | None
    field: str
    """A dotted path into the event (``payload.intent.timeout_s``); ``event`` when one side has none."""
    recorded_value: Any = None
    replayed_value: Any = None

    @staticmethod
    def _name(event: JournalEvent | None) -> str:
        return "nothing" if event is None else f"#{event.seq} {event.type.value} ({event.event_id})"

    def message(self) -> str:
        if self.recorded is None or self.replayed is None:
            return (f"event {self.index}: the recording has {self._name(self.recorded)}, "
                    f"the replay {self._name(self.replayed)}")
        return (f"event {self.index}: recorded {self._name(self.recorded)}, replayed {self._name(self.replayed)}: "
                f"{self.field} is {_short(self.replayed_value)} in the replay, {_short(self.recorded_value)} "
                f"in the recording")

    def error(self) -> NondeterminismError:
        return NondeterminismError(
            self.message(), event_index=self.index, field=self.field,
            recorded=self._name(self.recorded), replayed=self._name(self.replayed),
            recorded_value=_short(self.recorded_value), replayed_value=_short(self.replayed_value))


def _short(value: Any, limit: int = 160) -> str:
    text = "(absent)" if value is _MISSING else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _diff(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            found = _diff(a.get(key, _MISSING), b.get(key, _MISSING), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = _diff(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        if len(a) != len(b):
            return f"{path}.length", len(a), len(b)
        return None
    if a is b or a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b):
        return None
    return path, a, b


def _new_defaults(recorded: dict[str, Any], replayed: dict[str, Any]) -> dict[str, Any]:
    """The recorded event, with the configuration sections a newer harness added (absent from a recording
    made before they existed) taken from the replay when the replay has them at their defaults: a section
    that did not exist then and changes nothing now is not a decision (a recording stays replayable)."""
    rec_cfg = (recorded.get("payload") or {}).get("config")
    rep_cfg = (replayed.get("payload") or {}).get("config")
    if recorded.get("type") is not EventType.MISSION_STARTED or not isinstance(rec_cfg, dict) \
            or not isinstance(rep_cfg, dict):
        return recorded
    defaults = _config_defaults()
    added = {k: v for k, v in rep_cfg.items() if k not in rec_cfg and k in defaults and v == defaults[k]}
    if not added:
        return recorded
    return {**recorded, "payload": {**recorded["payload"], "config": {**rec_cfg, **added}}}


@functools.cache
def _config_defaults() -> dict[str, Any]:
    return HarnessConfig().model_dump(mode="json")


def first_divergence(recorded: Sequence[JournalEvent], replayed: Sequence[JournalEvent]) -> Divergence | None:
    """The first event (in order) where the two differ, or None when they are the same."""
    for i, (rec, rep) in enumerate(zip(recorded, replayed)):
        replayed_dump = rep.model_dump(mode="python")
        found = _diff(_new_defaults(rec.model_dump(mode="python"), replayed_dump), replayed_dump, "event")
        if found is not None:
            path, a, b = found
            return Divergence(i, rec, rep, path.removeprefix("event."), a, b)
    if len(recorded) != len(replayed):
        i = min(len(recorded), len(replayed))
        return Divergence(i, recorded[i] if i < len(recorded) else None,
                          replayed[i] if i < len(replayed) else None, "event")
    return None


@dataclass(frozen=True)
class DecisionReplay:
    """A replay that decided exactly as recorded."""

    mission_id: str
    events: int
    readings: int
    replay_s: float
    recorded_s: float
    """The recorded mission's length on its own clock (first to last event stamp)."""

    @property
    def speed_ratio(self) -> float:
        return self.recorded_s / self.replay_s if self.replay_s > 0 else float("inf")

    def as_dict(self) -> dict[str, Any]:
        return {"mission_id": self.mission_id, "same_decisions": True, "events": self.events,
                "readings": self.readings, "replay_s": round(self.replay_s, 4), "recorded_s": round(self.recorded_s, 3),
                "speed_ratio": round(self.speed_ratio, 1)}


def replay_decisions(recorded: Sequence[JournalEvent], player: TapePlayer, run: Callable[[], Any],
                     replayed: Callable[[], Sequence[JournalEvent]], *,
                     perf_counter: Callable[[], float]) -> DecisionReplay:
    """Run ``run`` (a runner built on ``player``'s clock, ids and ports) and compare ``replayed()`` with
    ``recorded``. Raises NondeterminismError at the first difference; returns the replay's figures, its
    time read from ``perf_counter`` (the caller's: the core reads no clock of its own)."""
    started = perf_counter()
    player.on_failure = lambda: len(replayed())  # how many events were written when the tape first differed
    tape_error: NondeterminismError | None = None
    try:
        run()
    except NondeterminismError as exc:
        tape_error = exc
    tape_error = player.failure or tape_error  # the runner may have taken the tape's error for a world fault
    elapsed = perf_counter() - started
    events = list(replayed())
    divergence = first_divergence(recorded, events)
    written = player.failure_mark if player.failure is not None else len(events)
    if divergence is not None and (tape_error is None or divergence.index < written):
        raise divergence.error() from tape_error
    if tape_error is not None:
        last = events[written - 1] if 0 < written <= len(events) else None
        raise NondeterminismError(
            f"{tape_error.message} (the {written} event(s) written before it are as recorded"
            + (f", the last #{last.seq} {last.type.value})" if last is not None else ")"), **tape_error.details) \
            from tape_error
    if player.remaining:
        nxt = player.remaining[0]
        raise NondeterminismError(
            f"the replay finished with {len(player.remaining)} recorded reading(s) unread: the recording went on "
            f"with #{nxt.index} {nxt.source}.{nxt.call}", tape_index=nxt.index, recorded=f"{nxt.source}.{nxt.call}")
    stamps = [e.stamp for e in recorded]
    return DecisionReplay(mission_id=recorded[0].mission_id if recorded else "", events=len(events),
                          readings=len(player.entries), replay_s=elapsed,
                          recorded_s=(max(stamps) - min(stamps)) if stamps else 0.0)


OTHER_WRITERS = frozenset({EventType.STOP_REQUESTED, EventType.INTERACTION_RESOLVED, EventType.RESPONSE_DROPPED})
"""Event types another writer may put into a running mission (the supervisor for a Stop, an operator's
answer, a dropped response); the runner writes INTERACTION_RESOLVED too (an expiry), never the others."""


def written_by_others(event: JournalEvent) -> bool:
    """An event of the mission that the runner did not write: :data:`OTHER_WRITERS`, and the
    snapshots the supervisor keeps when the aggregator reports a salient event."""
    if event.type in OTHER_WRITERS:
        return True
    return (event.type is EventType.WORLD_SNAPSHOT_CAPTURED
            and payload_of(event, WorldSnapshotCaptured).reason == "salient_event")


def _same_start(event: JournalEvent, draft: EventDraft) -> bool:
    """The runner's next write is this recorded event itself (an INTERACTION_RESOLVED on expiry)."""
    if event.type is not draft.type:
        return False
    return (event.type is not EventType.WORLD_SNAPSHOT_CAPTURED
            or payload_of(draft, WorldSnapshotCaptured).reason == payload_of(event, WorldSnapshotCaptured).reason)


class _FixedClock:
    def __init__(self) -> None:
        self.stamp = 0.0

    def now(self) -> float:
        return self.stamp

    def monotonic(self) -> float:
        return self.stamp


class ReplayJournal(MemoryJournal):
    """The journal a replayed runner writes to.

    It holds the recorded journal as it was when the mission started (``before``: every recorded
    event with a lower seq, leases and open missions included), so the replay starts from the
    same durable state. Each event the runner writes gets the seq, event id and stamp the
    recording gave the event at that place: the journal's numbering is not a decision, and the
    comparison then shows only what the runner decided. An event another writer put into the
    recorded mission (:data:`OTHER_WRITERS`) is put in again at its recorded place, before the
    runner's next write, when the runner's batch does not begin with it.
    """

    def __init__(self, before: Sequence[JournalEvent], mission: Sequence[JournalEvent],
                 others: Sequence[JournalEvent] = ()) -> None:
        """``others``: the events other missions (another robot's, a refused request's) put between the
        mission's first and last event; each is put back at its recorded seq before the runner's next
        write, so the replay sees the journal as the mission saw it (another robot's lease, say)."""
        self._clock_fixed = _FixedClock()
        # the runner replays as the robot that ran the mission (a fleet's database holds several)
        super().__init__(clock=self._clock_fixed, ids=IdGenerator(0), robot_id=mission[0].robot_id if mission else "")
        self._mission_id = mission[0].mission_id if mission else ""
        self._recorded = {e.seq: e for e in [*before, *mission, *others]}
        self.setup()
        for event in before:
            self._put(event)

    @staticmethod
    def _draft(event: JournalEvent) -> EventDraft:
        return EventDraft(type=event.type, mission_id=event.mission_id, model_turn_id=event.model_turn_id,
                          tool_call_id=event.tool_call_id, robot_action_id=event.robot_action_id,
                          snapshot_id=event.snapshot_id, payload=event.payload)

    def _put(self, event: JournalEvent) -> None:
        """Put a recorded event back as the robot that wrote it (its leases are that robot's)."""
        mine, self._robot_id = self._robot_id, event.robot_id
        try:
            super().append([self._draft(event)])
        finally:
            self._robot_id = mine

    def append(self, drafts: Sequence[EventDraft], *, expected_last_seq: int | None = None,
               expected_revision: int | None = None) -> list[JournalEvent]:
        if not isinstance(drafts, EventDraft) and drafts:
            while True:
                nxt = self._recorded.get(self.last_seq() + 1)
                if nxt is None or (nxt.mission_id == self._mission_id
                                   and (not written_by_others(nxt) or _same_start(nxt, drafts[0]))):
                    break
                self._put(nxt)
        return super().append(drafts, expected_last_seq=expected_last_seq, expected_revision=expected_revision)

    def _materialize(self, prepared: Sequence[Any], last_seq: int, expected_last_seq: int | None,
                     expected_revision: int | None) -> tuple[list[JournalEvent], list[Any]]:
        first = self._recorded.get(last_seq + 1)
        self._clock_fixed.stamp = first.stamp if first is not None else 0.0
        events, snaps = super()._materialize(prepared, last_seq, expected_last_seq, expected_revision)
        fixed = []
        for ev in events:
            rec = self._recorded.get(ev.seq)
            fixed.append(ev if rec is None else ev.model_copy(update={"event_id": rec.event_id, "stamp": rec.stamp}))
        return fixed, snaps


@dataclass(frozen=True)
class WhatIf:
    """A replay under another configuration: the first decision that changed and where the mission ended."""

    mission_id: str
    recorded_status: str
    first_change: Divergence | None
    final_status: str
    """The replayed mission's status, or "" when the replay could not reach its end on the tape."""
    left_tape: str = ""
    """Why the replay stopped early: it asked the world something the recording never asked."""
    note: str = ""
    """What the what-if could not change (a part whose answers came from the tape)."""

    def as_dict(self) -> dict[str, Any]:
        return {"mission_id": self.mission_id, "recorded_status": self.recorded_status, "note": self.note,
                "same_decisions": self.first_change is None,
                "first_change": self.first_change.message() if self.first_change else "",
                "field": self.first_change.field if self.first_change else "",
                "final_status": self.final_status or "undetermined", "left_tape": self.left_tape}


def _status(events: Sequence[JournalEvent]) -> str:
    for e in reversed(events):
        if e.type is EventType.MISSION_FINISHED:
            return payload_of(e, MissionFinished).status
    return ""


def what_if(recorded: Sequence[JournalEvent], player: TapePlayer, run: Callable[[], Any],
            replayed: Callable[[], Sequence[JournalEvent]]) -> WhatIf:
    """Run on a lenient ``player``: a call with other arguments gets the recorded answer (the world is
    assumed to answer as it did); another call ends the replay there, its final status undetermined."""
    if not player.lenient:
        raise ValueError("what_if needs a lenient TapePlayer")
    left = ""
    try:
        run()
    except NondeterminismError as exc:
        left = exc.message
    left = player.failure.message if player.failure is not None else left
    events = list(replayed())

    def inputs_aside(seq: Sequence[JournalEvent]) -> list[JournalEvent]:
        # The configuration is what the what-if changed, not a decision: MISSION_STARTED carries it.
        return [e.model_copy(update={"payload": {k: v for k, v in e.payload.items() if k != "config"}})
                if e.type is EventType.MISSION_STARTED else e for e in seq]

    recorded, events = inputs_aside(recorded), inputs_aside(events)
    return WhatIf(mission_id=recorded[0].mission_id if recorded else "", recorded_status=_status(recorded),
                  first_change=first_divergence(recorded, events), final_status="" if left else _status(events),
                  left_tape=left)
