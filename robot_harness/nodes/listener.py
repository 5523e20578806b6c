"""Journal listeners that run on a thread of their own, off the appending (mission) thread.

The journal calls its listeners on the appending thread, after the commit
(``core/journal.py``); the core has no threads, so whatever must not make the
mission wait lives here, in the nodes:

* :class:`BackgroundListener` wraps one listener: delivery only enqueues, the
  callback runs on its thread, batches in commit order.
* :class:`JournalFanout` is the supervisor's one journal listener: one thread
  converts each committed event to its ROS message once (and serializes it
  once, lazily: only if a consumer asks) and hands the same
  :class:`ConvertedEvent` objects to every attached consumer (the ``~/events``
  publisher, the mission's evidence bag), each in commit order. A consumer that
  raises is logged and skipped for that batch; the others still get it.

Why it is cheap on the mission thread: an append's delivery is one
``deque.append`` under a short lock (no copy, no conversion). Why it is cheap
beside it: the worker hands the GIL back between batches, so a commit
returning from its fsync waits for at most one batch's work, not for a
switch interval per acquisition.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..core.records import JournalEvent

__all__ = ["BackgroundListener", "ConvertedEvent", "Consumer", "EventPublisher", "JournalFanout", "Tap"]

_log = logging.getLogger(__name__)

Listener = Callable[[list[JournalEvent]], None]


class BackgroundListener:
    """A journal listener run on a thread of its own, batches in commit order.

    The journal calls its listeners on the appending thread, after the
    commit; for the mission thread that means waiting for every listener
    (publishing each event over DDS, writing it into the bag) between a tool
    call and the goal it sends. Wrapped in this, a listener's work leaves that
    path: delivery only enqueues. ``flush`` waits (bounded) until everything
    enqueued so far has been handled; ``close`` flushes and ends the thread.
    A listener's exception is logged and swallowed, as the journal does.

    A :class:`JournalFanout` with this one consumer, handed the plain events.
    """

    def __init__(self, callback: Listener, *, name: str = "journal-listener") -> None:
        self._callback = callback
        self._fanout = JournalFanout(name=name)
        self._fanout.attach(self._deliver, name=f"journal listener {callback!r}")
        self._thread = self._fanout._thread  # noqa: SLF001 - the same thread, for whoever joins it

    def __call__(self, events: list[JournalEvent]) -> None:
        self._fanout(list(events))

    def _deliver(self, batch: Sequence[ConvertedEvent]) -> None:
        self._callback([c.event for c in batch])

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every batch enqueued so far was handled; False if ``timeout_s`` ran out first."""
        return self._fanout.flush(timeout_s)

    def close(self, timeout_s: float = 5.0) -> bool:
        """Flush (bounded), then end the thread. What is still queued after a failed flush is dropped
        (the caller is moving on, e.g. closing the bag those events were for), and so are later
        deliveries. Returns whether it flushed."""
        return self._fanout.close(timeout_s)


class ConvertedEvent:
    """A committed event with its ``robot_harness/msg/JournalEvent`` and that message's CDR bytes.

    Each is computed once, on first use, on the fan-out's thread (not
    thread-safe otherwise): the ``~/events`` publisher and the bag get the very
    same bytes, and nothing is converted for a consumer that does not ask.
    """

    __slots__ = ("event", "_msg", "_cdr")

    def __init__(self, event: JournalEvent) -> None:
        self.event = event
        self._msg: Any = None
        self._cdr: bytes | None = None

    @property
    def msg(self) -> Any:
        if self._msg is None:
            from . import conversions as cv

            self._msg = cv.journal_event_to_msg(self.event)
        return self._msg

    @property
    def cdr(self) -> bytes:
        if self._cdr is None:
            from rclpy.serialization import serialize_message

            self._cdr = serialize_message(self.msg)
        return self._cdr


Consumer = Callable[[Sequence[ConvertedEvent]], None]
"""Called on the fan-out's thread with each batch (commit order) delivered while it is attached."""


class EventPublisher:
    """The ``~/events`` consumer: publishes each event's CDR bytes (the bytes the bag records).

    While nobody subscribes it converts nothing: the topic is volatile, so a
    later subscriber would not get those messages anyway.
    """

    def __init__(self, publisher: Any) -> None:
        self._publisher = publisher
        self.published = 0

    def __call__(self, events: Sequence[ConvertedEvent]) -> None:
        pub = self._publisher
        if pub.get_subscription_count() == 0:
            return
        for ev in events:
            pub.publish(ev.cdr)
        self.published += len(events)


class Tap:
    """One consumer attached to a :class:`JournalFanout`: it gets the batches enqueued between
    :meth:`JournalFanout.attach` and :meth:`detach`, exactly those, in commit order."""

    def __init__(self, fanout: "JournalFanout", consumer: Consumer, name: str, start: int) -> None:
        self._fanout = fanout
        self.consumer = consumer
        self.name = name
        self.start = start
        self.end: int | None = None
        self.closed = False
        self.failures = 0
        """Batches whose delivery raised (logged; the other consumers still got them)."""

    def wants(self, index: int) -> bool:
        return not self.closed and index >= self.start and (self.end is None or index < self.end)

    def detach(self, timeout_s: float = 5.0) -> bool:
        """Stop after every batch enqueued so far was delivered (bounded); False when ``timeout_s`` ran
        out first, and then what was still queued for it is dropped. Safe to repeat."""
        return self._fanout._detach(self, timeout_s)  # noqa: SLF001 - the tap's own fan-out


class JournalFanout:
    """One journal listener, one thread, any number of consumers; each event converted at most once.

    Subscribe it to the journal (``journal.subscribe(fanout)``) and
    :meth:`attach` consumers; each consumer sees the batches enqueued while it
    is attached, in commit order, as lists of :class:`ConvertedEvent` shared
    by all of them. ``flush``/``close`` behave as :class:`BackgroundListener`'s.
    """

    def __init__(self, *, name: str = "journal-fanout", logger: Any = None) -> None:
        self._name = name
        self._logger = logger
        self._cv = threading.Condition(threading.Lock())
        self._queue: collections.deque[Sequence[JournalEvent]] = collections.deque()
        self._taps: list[Tap] = []
        self._enqueued = 0
        """Batches enqueued so far; a batch's index is the count before it."""
        self._handled = 0
        """Batches delivered (or dropped) so far, in order."""
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- the journal side (the appending thread) -------------------------------------

    def __call__(self, events: Sequence[JournalEvent]) -> None:
        """O(1): the journal hands every listener a list of its own, kept as it is."""
        with self._cv:
            if self._closed:
                return
            self._queue.append(events)
            self._enqueued += 1
            self._cv.notify()

    # -- consumers ---------------------------------------------------------------------

    def attach(self, consumer: Consumer, *, name: str = "") -> Tap:
        """Deliver every batch enqueued from now on to ``consumer`` until the returned tap is detached."""
        with self._cv:
            tap = Tap(self, consumer, name or getattr(consumer, "__qualname__", repr(consumer)), self._enqueued)
            self._taps.append(tap)
        return tap

    def _detach(self, tap: Tap, timeout_s: float) -> bool:
        with self._cv:
            if tap.closed:
                return True
            if tap.end is None:
                tap.end = self._enqueued
            done = self._wait(lambda: self._handled >= tap.end, timeout_s)  # type: ignore[operator]
            tap.closed = True
            if tap in self._taps:
                self._taps.remove(tap)
        if not done:
            self._warn(f"{self._name}: {tap.name} detached with batches still queued for it")
        return done

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every batch enqueued so far was delivered; False if ``timeout_s`` ran out first."""
        with self._cv:
            target = self._enqueued
            return self._wait(lambda: self._handled >= target, timeout_s)

    def close(self, timeout_s: float = 5.0) -> bool:
        """Flush (bounded), then end the thread; what is still queued after a failed flush is dropped,
        and so are later deliveries. Returns whether it flushed."""
        flushed = self.flush(timeout_s)
        with self._cv:
            self._closed = True
            dropped = len(self._queue)
            self._queue.clear()
            self._cv.notify_all()
        if dropped:
            self._warn(f"{self._name}: closed with {dropped} batch(es) undelivered")
        self._thread.join(timeout=max(0.1, timeout_s))
        return flushed

    # -- the worker --------------------------------------------------------------------

    def _wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Under ``self._cv``."""
        deadline = time.monotonic() + timeout_s
        while not done():
            left = deadline - time.monotonic()
            if left <= 0.0 or (self._closed and not self._thread.is_alive()):
                return done()
            self._cv.wait(left)
        return True

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if not self._queue:
                    self._cv.notify_all()
                    return  # closed and drained
                events = self._queue.popleft()
                index = self._handled
                taps = [t for t in self._taps if t.wants(index)]
            if taps:
                batch = [ConvertedEvent(e) for e in events]
                for tap in taps:
                    if not tap.wants(index):  # detached (timed out) meanwhile
                        continue
                    try:
                        tap.consumer(batch)
                    except Exception as exc:  # noqa: BLE001 - one consumer's failure must not stop the others
                        tap.failures += 1
                        seqs = [getattr(e, "seq", "?") for e in events[:1] + events[-1:]]
                        self._warn(f"{self._name}: {tap.name} raised on events {'..'.join(map(str, seqs))}: "
                                   f"{type(exc).__name__}: {exc}", exc_info=True)
            with self._cv:
                self._handled = index + 1
                self._cv.notify_all()
            # Hand the GIL over now, not after a switch interval: the appending thread,
            # back from its commit's fsync, waits for one batch's work at most.
            time.sleep(0)

    def _warn(self, message: str, *, exc_info: bool = False) -> None:
        if self._logger is not None:
            self._logger.warning(message)
        else:
            _log.warning(message, exc_info=exc_info)
