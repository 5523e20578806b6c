"""DDS domains claimed on this machine, so two runs of the harness's tests, benchmarks or crash
tests started at once do not share one.

Two ROS 2 graphs on one ``ROS_DOMAIN_ID`` on one machine talk to each other:
one run's mission server takes another's goals, its ``~/events`` reach the
other's listeners. Drawing a domain at random is not enough when runs
overlap (a test suite draws one per test, about 300 a run, from 233). A claim
is an exclusive ``flock`` on ``<tmp>/robot_harness-domains/<id>.lock``: the
kernel drops it when the holder exits, killed or not, so a crashed run never
leaves a domain taken. Processes that are not the harness's do not ask; this
keeps the harness's own runs apart, nothing more.
"""
from __future__ import annotations

import fcntl
import os
import random
import tempfile
from collections.abc import Iterable
from pathlib import Path

MAX_DOMAIN_ID = 232
"""The highest ROS_DOMAIN_ID whose Fast DDS ports stay in range on Linux."""


def lock_dir() -> Path:
    return Path(os.environ.get("RH_DOMAIN_LOCK_DIR") or Path(tempfile.gettempdir()) / "robot_harness-domains")


class DomainClaim:
    """One domain held by this process until :meth:`release` (or its exit)."""

    def __init__(self, domain: int, fd: int) -> None:
        self.domain = domain
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __repr__(self) -> str:
        return f"DomainClaim({self.domain}, held={self.held})"


def _open_lock(domain: int) -> int | None:
    """A descriptor on the domain's lock file, or None when this user may not open it. The folder is
    shared by every user of the machine (sticky, like /tmp); a lock file another user made is opened
    read-only, which ``flock`` accepts."""
    d = lock_dir()
    try:
        if not d.is_dir():
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o1777)
    except OSError:
        pass  # another user made it, or a read-only tmp: opening below says whether it serves
    path = d / f"{domain}.lock"
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(path, flags, 0o666)
        except OSError:
            continue
    return None


def try_claim(domain: int) -> DomainClaim | None:
    """The domain if no other process (of the harness's) holds it now, else None (also when its lock
    file cannot be opened at all)."""
    if not 0 <= domain <= MAX_DOMAIN_ID:
        raise ValueError(f"ROS_DOMAIN_ID {domain} is outside 0-{MAX_DOMAIN_ID}")
    fd = _open_lock(domain)
    if fd is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return DomainClaim(domain, fd)


def claim(order: Iterable[int] | None = None, *, avoid: Iterable[int] = ()) -> DomainClaim:
    """The first free domain in ``order`` (default: all of 0-232, shuffled), skipping ``avoid``.

    Raises ``RuntimeError`` when every one is held: more than 233 runs at once."""
    skip = set(avoid)
    if order is None:
        order = random.SystemRandom().sample(range(MAX_DOMAIN_ID + 1), MAX_DOMAIN_ID + 1)
    for domain in order:
        if domain in skip:
            continue
        held = try_claim(domain)
        if held is not None:
            return held
    raise RuntimeError(f"every ROS_DOMAIN_ID in 0-{MAX_DOMAIN_ID} is claimed under {lock_dir()}")
