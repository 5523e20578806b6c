"""Time and identity come from the runtime, never from the core itself.

The core takes a ``Clock`` and an ``IdGenerator`` so a recorded mission can be
re-run with the same times and ids (temporal's ``workflow.now()`` habit).
"""
from __future__ import annotations

import random
import time
from typing import Protocol

__all__ = ["Clock", "SystemClock", "ManualClock", "IdGenerator"]


class Clock(Protocol):
    def now(self) -> float:
        """Wall time, seconds since the epoch (stamps journal records and ROS messages)."""

    def monotonic(self) -> float:
        """Monotonic seconds, for timeouts and durations."""


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock tests advance by hand; both readings move together."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._t = start
        self._start = start

    def now(self) -> float:
        return self._t

    def monotonic(self) -> float:
        return self._t - self._start

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._t += seconds


class IdGenerator:
    """Short, prefixed, collision-resistant ids from a seedable RNG.

    With a seed, the same sequence of calls yields the same ids (replay);
    without one, ids are random per process.
    """

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)

    def new(self, prefix: str) -> str:
        return f"{prefix}-{self._rng.getrandbits(48):012x}"
