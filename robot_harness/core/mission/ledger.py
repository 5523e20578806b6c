"""The only journal writer for a running mission.

Every event a mission writes goes through ``MissionLedger.append_many``: one
atomic, durable, revision-checked commit, retried from the fresh state when
another writer (an operator's Stop, an interaction's answer) moved the
mission meanwhile. The task state (contract, receipts, facts, commits and
the state version) is read from here, folded from the journal once per
event; nothing beside it keeps a copy.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..durable import TRANSITION_TYPES
from ..errors import HarnessError, JournalWriteError, StaleRevision
from ..gate import TaskState, TaskStateFold
from ..journal import Journal
from ..lifecycle import ManagedAction
from ..payloads import LeaseAcquired, RobotActionStateChanged, StopRequested, payload_of
from ..records import ActionStatus, ActionView, EventDraft, EventType, JournalEvent
from .state import StopFlag

__all__ = ["MissionLedger", "StoppedBeforeDispatch", "Observer"]

_log = logging.getLogger(__name__)

Observer = Callable[[str, ActionView | None, JournalEvent | None], None]
"""Watches a mission: ``(stage, action view, event)``; called after each commit and at each stage."""

_STALE_RETRIES = 8
"""How often one write re-reads the mission after another writer moved it, before giving up."""
_FOREIGN_TYPES = (EventType.STOP_REQUESTED, EventType.INTERACTION_RESOLVED)
"""What another writer may add to a running mission."""
_STATE_EVENTS = (EventType.CONTRACT_FROZEN, EventType.RECEIPT_RECORDED, EventType.VERDICT_RECORDED,
                 EventType.COMMIT_RECORDED, EventType.FACT_RECORDED)


class StoppedBeforeDispatch(Exception):
    """A Stop arrived while a dispatch intent was being committed: the intent was not written, nothing was sent."""


class MissionLedger:
    """One mission's writer and its view of the journal.

    ``seen_revision`` is the optimistic-concurrency token: the mission
    revision this writer last read or wrote. It is not derived state kept
    twice: a commit expected at it is refused when anyone else moved the
    mission since.
    """

    def __init__(self, *, journal: Journal, mission_id: str, stop: StopFlag, observer: Observer | None) -> None:
        self.journal = journal
        self.mission_id = mission_id
        self._stop = stop
        self._observer = observer
        self.seen_revision = 0
        self._fold = TaskStateFold()
        self._folded_seq = 0
        self._state: TaskState | None = None
        self._stale = True
        """Whether the journal may hold state events not folded yet: after this writer committed one, or
        after another writer moved the mission (any state change moves its revision, so it is seen here)."""

    # -- writing ----------------------------------------------------------------

    def stop_reason(self) -> str | None:
        """The pending Stop's reason, or None."""
        return self._stop.reason

    def draft(self, type_: EventType, **fields: Any) -> EventDraft:
        return EventDraft(type=type_, mission_id=self.mission_id, **fields)

    def append(self, type_: EventType, **fields: Any) -> JournalEvent:
        return self.append_many([self.draft(type_, **fields)])[0]

    def append_many(self, drafts: Sequence[EventDraft | None], *, retry_stale: bool = True) -> list[JournalEvent]:
        """One atomic, durable, revision-checked commit (one fsync) for several events.

        When another writer moved the mission meanwhile, the commit is refused;
        the ledger reads what changed and retries from the fresh state, unless
        what changed forbids the write (a Stop forbids a new dispatch intent:
        ``StoppedBeforeDispatch``). ``None`` entries are skipped.
        """
        batch = [d for d in drafts if d is not None]
        if not batch:
            return []
        for _ in range(_STALE_RETRIES):
            try:
                events = self.journal.append(batch, expected_revision=self.seen_revision)
                break
            except StaleRevision as exc:
                if not retry_stale or "mission_id" not in exc.details:
                    raise
                self.absorb()
                if self._stop and any(_is_dispatch_intent(d) for d in batch):
                    raise StoppedBeforeDispatch(self._stop.reason) from None
        else:
            raise JournalWriteError(f"mission {self.mission_id} kept moving under this writer "
                                    f"({_STALE_RETRIES} stale revisions in a row)", sqlite_error=None)
        self.seen_revision += sum(1 for e in events if e.type in TRANSITION_TYPES)
        if any(e.type in _STATE_EVENTS for e in events):
            self._stale = True
        if self._observer is not None:
            for event in events:
                self._observe("", None, event)
        return events

    def transition(self, action: ManagedAction, to: ActionStatus, reason: str, *, now: float) -> EventDraft:
        """Move the action and return its change as a draft, for the caller's commit.

        The journal checks the change against the state and revision it holds for
        the action (``lifecycle.check_change``), so a writer with a stale view is
        refused there, in one place.
        """
        change = action.transition(to, now=now, reason=reason)
        return self.draft(EventType.ROBOT_ACTION_STATE_CHANGED, tool_call_id=action.tool_call_id,
                          robot_action_id=action.action_id, payload=RobotActionStateChanged.model_validate(change))

    # -- reading ----------------------------------------------------------------

    def absorb(self) -> None:
        """Read what other writers did to this mission (a Stop, interaction answers) and catch up."""
        for ev in self.journal.events(mission_id=self.mission_id, types=_FOREIGN_TYPES):
            if ev.type is EventType.STOP_REQUESTED and not self._stop:
                self._stop.request(_stop_reason(ev))
        self.seen_revision = self.journal.revision(self.mission_id)
        self._stale = True

    def task_state(self) -> TaskState:
        """The task state, derived from this mission's journal (the source of truth).

        Reads the state events committed since the last read, and only when
        there can be some (this writer committed one, or another writer moved
        the mission); each event is folded once, in journal order.
        """
        if self._stale or self._state is None:
            new = self.journal.events(mission_id=self.mission_id, after_seq=self._folded_seq, types=_STATE_EVENTS)
            self._fold.feed(new)
            if new:
                self._folded_seq = new[-1].seq
            self._state = self._fold.state
            self._stale = False
        return self._state

    def last_task_state(self) -> TaskState | None:
        """The task state, or, when the journal cannot be read now (a mission's outcome after a
        storage fault), the one of the last successful read; None before any."""
        try:
            return self.task_state()
        except HarnessError:
            return self._state

    def events(self, *types: EventType) -> list[JournalEvent]:
        return self.journal.events(mission_id=self.mission_id, types=list(types))

    # -- observers ----------------------------------------------------------------

    def stage(self, stage: str, action: ManagedAction | None = None) -> None:
        """Tell the observer what the mission is doing now (feedback, MCP sessions)."""
        if self._observer is not None:
            self._observe(stage, action.view() if action else None, None)

    def _observe(self, stage: str, view: ActionView | None, event: JournalEvent | None) -> None:
        """The observer only watches, so its failure is logged, never raised into the mission
        (which would leave it open after a committed write)."""
        assert self._observer is not None
        try:
            self._observer(stage, view, event)
        except Exception:  # noqa: BLE001 - see the docstring
            _log.exception("mission %s: the update observer raised; ignored", self.mission_id)


def _is_dispatch_intent(draft: EventDraft) -> bool:
    return draft.type is EventType.ROBOT_ACTION_STARTED or (
        draft.type is EventType.LEASE_ACQUIRED and payload_of(draft, LeaseAcquired).intent is not None)


def _stop_reason(event: JournalEvent) -> str:
    return payload_of(event, StopRequested).reason or "operator stop"
