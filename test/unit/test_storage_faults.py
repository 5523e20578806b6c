"""Disk and storage faults under a real journal and a real MissionRunner.

Every fault is produced for real, never by patching our code: a full disk is
SQLite's own page limit (``max_page_count``; a small tmpfs needs root), a
locked database is a second connection holding ``BEGIN EXCLUSIVE`` past the
busy timeout, read-only storage is the immutable attribute (``chattr +i``,
which binds root too and, unlike a permission change, also stops writes
through descriptors already open) or, for a journal being reopened by a
non-root user, plain permissions; corruption is garbage bytes over database
pages or WAL frames.

For each fault: the append raises a typed error naming the file and SQLite's
error; nothing of the failed batch is visible (seqs, revisions, leases, the
bytes on disk where they can be compared); the runner sends no goal after the
failure and ends the mission BLOCKED; and once storage returns the same
journal object (or, after corruption, a restored and reopened one, as a
restarted node would) runs the next mission. When a *read* meets the
corruption first, the mission ends BLOCKED just the same.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import struct
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig
from robot_harness.compose import mission_runner
from robot_harness.core.mission.runner import MissionRunner
from robot_harness.core.errors import JournalWriteError
from robot_harness.core.journal import JournalReadError, SqliteJournal, open_journal
from robot_harness.core.records import EventDraft, EventType, MissionStatus
from robot_harness.core.skills import default_skills

from .fakes import FakeRobot, ScriptPlanner
from .test_engine import GO_OFFICE, PLACES

E = EventType
M = "m-1"
GO_DOCK = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]}
GARBAGE = b"\xa5\x5a" * 4096  # fixed, so every run damages the same bytes the same way


# ------------------------------------------------------------------ helpers


def batch(k: int, mission: str = M) -> list[EventDraft]:
    """One batch of three events: a lease, an observation, a result (two state changes)."""
    return [
        EventDraft(type=E.LEASE_ACQUIRED, mission_id=mission, payload={"resource": f"r{k}", "owner": f"a{k}"}),
        EventDraft(type=E.MODEL_TURN_STARTED, mission_id=mission, payload={"k": k, "pad": "x" * 2000}),
        EventDraft(type=E.TOOL_RESULT_RECORDED, mission_id=mission, payload={"k": k}),
    ]


def observed(journal: SqliteJournal) -> tuple:
    """Everything a failed batch could have leaked into: seqs, the mission's revision, leases."""
    return ([e.seq for e in journal.events()], journal.revision(M), sorted(journal.leases()))


def assert_whole_batches(journal: SqliteJournal, k: int) -> None:
    """The journal holds exactly batches 1..k, each complete, and its index agrees."""
    events = journal.events()
    assert [e.seq for e in events] == list(range(1, 3 * k + 1))
    assert [e.type for e in events] == [d.type for i in range(1, k + 1) for d in batch(i)]
    assert journal.revision(M) == 2 * k
    assert sorted(journal.leases()) == [f"r{i}" for i in range(1, k + 1)]


def reopen(path: Path, seed: int) -> SqliteJournal:
    """A restarted node's journal: a new connection, a new id seed (event ids stay unique)."""
    return open_journal(path, clock=ManualClock(), ids=IdGenerator(seed=seed), busy_timeout_ms=50)


def digest(*paths: Path) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "-" for p in paths]


def side(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def checkpoint(path: Path) -> None:
    """Move every committed page from the WAL into the database file (another connection does it)."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0


def smash_pages(path: Path, first_page: int = 2) -> None:
    """Overwrite every database page from ``first_page`` on with garbage (SQLite is not asked anything)."""
    with open(path, "rb") as f:
        page_size = struct.unpack(">H", f.read(18)[16:18])[0]  # the header's page size field
    pages = path.stat().st_size // page_size
    assert pages > first_page
    with open(path, "r+b") as f:
        for page in range(first_page, pages + 1):
            f.seek((page - 1) * page_size)
            f.write(GARBAGE[:page_size])


def wal_transactions(wal: Path) -> list[list[int]]:
    """Byte offsets of the WAL's frames, grouped by transaction (a commit frame ends one)."""
    data = wal.read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    txs: list[list[int]] = []
    frames: list[int] = []
    off = 32
    while off + 24 + page_size <= len(data) and data[off + 8:off + 16] == salts:
        frames.append(off)
        if struct.unpack(">I", data[off + 4:off + 8])[0]:  # db size after commit: non-zero on a commit frame
            txs.append(frames)
            frames = []
        off += 24 + page_size
    return txs


def crash_image(path: Path, dest: Path) -> Path:
    """The files a power cut would leave right now (every commit was fsynced: synchronous=FULL)."""
    dest.parent.mkdir()
    shutil.copyfile(path, dest)
    shutil.copyfile(side(path, "-wal"), side(dest, "-wal"))
    return dest


def runner_for(journal: SqliteJournal, *, seed: int, turns=(GO_OFFICE, {"done": "arrived"}),
               on_capture: Callable[[str, FakeRobot], None] | None = None,
               planner_before: Callable[[int], None] | None = None) -> tuple[MissionRunner, FakeRobot]:
    """``test_engine.make`` for a given journal and id seed (a restarted node must not reuse ids)."""
    clock = ManualClock()
    robot = FakeRobot(clock=clock, on_capture=on_capture)
    config = HarnessConfig(places=PLACES)
    runner = mission_runner(config=config, journal=journal, clock=clock, ids=IdGenerator(seed=seed),
                           skills=default_skills(config.navigation), snapshots=robot,
                           planner=ScriptPlanner(list(turns), before=planner_before), navigation=robot, robot_io=robot)
    return runner, robot


# ------------------------------------------------------------------ read-only storage


def _immutable_unsupported(where: Path) -> str | None:
    """Why ``chattr +i`` cannot make ``where`` read-only here, or None when it can."""
    if shutil.which("chattr") is None:
        return "chattr is not installed"
    probe = where / "immutable-probe"
    probe.write_bytes(b"a")
    fd = os.open(probe, os.O_WRONLY)
    try:
        if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode != 0:
            return (f"chattr +i failed on {where} (needs CAP_LINUX_IMMUTABLE and a filesystem with the"
                    " immutable attribute, e.g. ext4; tmpfs and overlayfs lack it)")
        try:
            os.write(fd, b"b")
            return f"an immutable file on {where} still accepted a write through an open descriptor"
        except OSError:
            return None
    finally:
        os.close(fd)
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
        probe.unlink()


class ReadOnly:
    """Makes paths read-only for real and always undoes it.

    ``live=True`` must also stop writes through descriptors SQLite already
    holds, which only the immutable attribute does (a permission change is
    checked at open time only). Otherwise, for a journal opened afresh,
    permissions suffice for a non-root user; root ignores them, so root uses
    the immutable attribute as well. SQLite's ``-shm`` is never touched: it is
    memory-mapped, and a write fault on it kills the process with SIGBUS.
    """

    def __init__(self, where: Path) -> None:
        self.where = where
        self._frozen: list[Path] = []
        self._chmodded: list[tuple[Path, int]] = []

    def apply(self, *paths: Path, live: bool) -> None:
        root = os.geteuid() == 0
        if live or root:
            reason = _immutable_unsupported(self.where)
            if reason:
                who = "root ignores file permissions" if root else "permissions do not revoke open descriptors"
                pytest.skip(f"no real read-only storage here: {who}, and {reason}")
            subprocess.run(["chattr", "+i", *map(str, paths)], check=True)
            self._frozen.extend(paths)
        else:
            for p in paths:
                self._chmodded.append((p, p.stat().st_mode))
                p.chmod(0o555 if p.is_dir() else 0o444)

    def restore(self) -> None:
        """What an operator does: write access back on the file and, after a
        permission change, on the -wal/-shm SQLite created with its mode."""
        if self._frozen:
            subprocess.run(["chattr", "-i", *map(str, self._frozen)], check=True)
            self._frozen = []
        for p, mode in reversed(self._chmodded):
            p.chmod(mode)
            for sidecar in (side(p, "-wal"), side(p, "-shm")):  # SQLite made them with the file's mode
                if sidecar.exists() and not p.is_dir():
                    sidecar.chmod(mode)
        self._chmodded = []


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[ReadOnly]:
    ro = ReadOnly(tmp_path)
    try:
        yield ro
    finally:
        ro.restore()  # never leave an immutable file behind for pytest's cleanup


# ------------------------------------------------------------------ the faults


class Fault:
    """One storage fault: how to open the journal, break storage, and bring it back."""

    name = ""
    code = ""  # the sqlite_code the failed append reports (a prefix: IOERR has extended codes)
    later = ""  # what a retry reports while storage is still broken, when it differs
    words = ""  # what the message tells the operator
    same_object = True  # False: recovery is a restored file and a reopened journal

    def __init__(self, path: Path, read_only: ReadOnly) -> None:
        self.path = path
        self.read_only = read_only

    def open(self) -> SqliteJournal:
        return reopen(self.path, seed=1)

    def prepare(self, journal: SqliteJournal) -> None:
        """Called once the journal holds what recovery should find again."""

    def inject(self, journal: SqliteJournal) -> None:
        raise NotImplementedError

    def restore(self, journal: SqliteJournal) -> SqliteJournal:
        raise NotImplementedError

    def cleanup(self) -> None:
        """Undo whatever a failed test left broken."""


class DiskFull(Fault):
    name, code, words = "disk_full", "SQLITE_FULL", "is full"

    def inject(self, journal: SqliteJournal) -> None:
        journal.set_max_pages(1)  # held at its current size: the next page it needs is refused

    def restore(self, journal: SqliteJournal) -> SqliteJournal:
        journal.set_max_pages(None)
        return journal


class Locked(Fault):
    name, code, words = "locked", "SQLITE_BUSY", "write lock"
    locker: sqlite3.Connection | None = None

    def inject(self, journal: SqliteJournal) -> None:
        self.locker = sqlite3.connect(self.path, isolation_level=None)
        self.locker.execute("BEGIN EXCLUSIVE")

    def restore(self, journal: SqliteJournal) -> SqliteJournal:
        self.cleanup()
        return journal

    def cleanup(self) -> None:
        if self.locker is not None:
            self.locker.execute("ROLLBACK")
            self.locker.close()
            self.locker = None


class ReadOnlyDisk(Fault):
    name, code, words = "read_only", "SQLITE_IOERR", "storage refused"
    later = "SQLITE_READONLY"  # the replacement connection opens the immutable file read-only

    def inject(self, journal: SqliteJournal) -> None:
        self.read_only.apply(self.path, side(self.path, "-wal"), self.path.parent, live=True)

    def restore(self, journal: SqliteJournal) -> SqliteJournal:
        self.read_only.restore()
        return journal


class Corrupted(Fault):
    name, code, words = "corrupted", "SQLITE_CORRUPT", "corrupt"
    same_object = False

    def prepare(self, journal: SqliteJournal) -> None:
        self.backup = self.path.with_name("backup.db")  # the operator's last good copy
        with contextlib.closing(sqlite3.connect(self.path)) as src, \
                contextlib.closing(sqlite3.connect(self.backup)) as dst:
            src.backup(dst)

    def inject(self, journal: SqliteJournal) -> None:
        checkpoint(self.path)  # the pages now live in the main file, where the damage lands
        smash_pages(self.path)

    def restore(self, journal: SqliteJournal) -> SqliteJournal:
        journal.close()
        aside = self.path.parent / "corrupt"
        aside.mkdir()
        for suffix in ("", "-wal", "-shm"):  # together: a stale -wal would be replayed into the backup
            if side(self.path, suffix).exists():
                side(self.path, suffix).rename(aside / (self.path.name + suffix))
        shutil.copyfile(self.backup, self.path)
        return reopen(self.path, seed=2)


FAULTS = [DiskFull, Locked, ReadOnlyDisk, Corrupted]


@pytest.fixture(params=FAULTS, ids=lambda f: f.name)
def fault(request, tmp_path: Path, read_only: ReadOnly) -> Iterator[Fault]:
    f = request.param(tmp_path / "journal.db", read_only)
    yield f
    f.cleanup()


# ------------------------------------------------------------------ every fault


def test_a_failed_append_names_file_and_error_writes_nothing_and_storage_coming_back_ends_it(fault: Fault):
    j = fault.open()
    j.append(batch(1))
    fault.prepare(j)
    before = observed(j)
    delivered: list[list] = []
    j.subscribe(delivered.append)
    files = (fault.path, side(fault.path, "-wal"))

    fault.inject(j)
    on_disk = digest(*files)
    with pytest.raises(JournalWriteError) as info:
        j.append(batch(2))
    err = info.value
    assert err.details["path"] == str(fault.path) and str(fault.path) in err.message
    assert err.details["sqlite_code"].startswith(fault.code)
    assert err.details["sqlite_error"] in err.message and fault.words in err.message
    assert err.details["corrupt"] is isinstance(fault, Corrupted)
    assert delivered == []  # listeners only ever see committed batches
    if isinstance(fault, Corrupted):
        with pytest.raises(JournalReadError) as read:
            j.events()
        assert read.value.details["corrupt"] and str(fault.path) in read.value.message
        with pytest.raises(JournalWriteError, match="corrupt"):
            j.append(batch(2))  # refused without touching the file again
        assert digest(*files) == on_disk
    else:
        assert observed(j) == before  # no seq, revision or lease of the failed batch
        if not isinstance(fault, DiskFull):  # a full disk may spill pages of the doomed batch past the WAL's end
            assert digest(*files) == on_disk

    j = fault.restore(j)
    assert [e.seq for e in j.append(batch(2))] == [4, 5, 6]  # no gap where the failure was
    assert_whole_batches(j, 2)
    assert delivered == ([] if not fault.same_object else [j.events(after_seq=3)])
    j.close()
    # the index was never ahead of the file: a fresh reader folds the same state
    fresh = reopen(fault.path, seed=3)
    assert_whole_batches(fresh, 2)
    fresh.close()


def test_the_fault_at_dispatch_means_no_goal_a_blocked_mission_and_the_next_runs_once_storage_is_back(fault: Fault):
    j = fault.open()
    fault.prepare(j)
    injected: list[str] = []

    def break_storage_before_dispatch(reason: str, robot: FakeRobot) -> None:
        if reason == "pre_dispatch" and not injected:
            fault.inject(j)
            injected.append(reason)

    runner, robot = runner_for(j, seed=11, on_capture=break_storage_before_dispatch)
    out = runner.run("go to the office")
    assert injected
    assert out.status is MissionStatus.BLOCKED
    assert robot.goals == []  # the dispatch intent could not be made durable, so nothing was sent
    assert out.summary.startswith("journal write failed; no new physical work")
    assert str(fault.path) in out.summary and fault.code in out.summary
    assert runner.physical_blocked and str(fault.path) in runner.physical_blocked
    assert fault.code in runner.physical_blocked
    if not isinstance(fault, Corrupted):  # nothing of the dispatch commit is visible
        assert j.events(types=[E.ACTION_PRECONDITION_CHECKED, E.ROBOT_ACTION_STARTED, E.LEASE_ACQUIRED]) == []
        assert j.leases() == {} and j.dispatches(out.mission_id) == []

    down = runner.run("go to the office")  # storage still broken (a small record may still fit a full disk)
    assert down.status is MissionStatus.BLOCKED and down.summary.startswith("journal")
    assert robot.goals == [] and runner.physical_blocked and (fault.later or fault.code) in runner.physical_blocked

    j = fault.restore(j)
    if not fault.same_object:
        runner, robot = runner_for(j, seed=12)  # a restarted node on the restored file
    out = runner.run("go to the office")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    assert len(robot.goals) == 1 and runner.physical_blocked is None
    j.close()


def test_the_fault_mid_mission_lets_the_finished_navigation_stand_and_sends_no_second_goal(fault: Fault):
    j = fault.open()
    fault.prepare(j)

    injected: list[int] = []

    def break_storage_at_second_turn(turn_index: int) -> None:
        if turn_index == 1 and not injected:
            fault.inject(j)
            injected.append(turn_index)

    runner, robot = runner_for(j, seed=11, turns=(GO_OFFICE, GO_DOCK, {"done": "x"}),
                               planner_before=break_storage_at_second_turn)
    out = runner.run("go to the office, then return to dock")
    assert injected and out.status is MissionStatus.BLOCKED
    assert len(robot.goals) == 1  # the office goal ran; the dock goal never went out
    assert runner.physical_blocked and fault.code in runner.physical_blocked
    if not isinstance(fault, Corrupted):
        (outcome,) = j.events(types=[E.ROBOT_ACTION_OUTCOME])
        assert outcome.payload["state"] == "SUCCEEDED"
        assert j.leases() == {}  # released with the verified outcome, before storage broke
        assert len(j.events(types=[E.ROBOT_ACTION_STARTED])) == 1
    j = fault.restore(j)
    goal = "go to the office, then return to dock"  # the same script again, on the same node
    if not fault.same_object:
        runner, robot = runner_for(j, seed=12)
        goal = "go to the office"
    out = runner.run(goal)
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    assert runner.physical_blocked is None
    j.close()


def test_corruption_met_by_a_read_first_also_ends_the_mission_blocked(tmp_path: Path, read_only: ReadOnly):
    fault = Corrupted(tmp_path / "journal.db", read_only)
    j = fault.open()
    fault.prepare(j)
    turns: list[str] = []

    def corrupt_before_second_turn(reason: str, robot: FakeRobot) -> None:
        if reason == "before_model_turn":
            turns.append(reason)
            if len(turns) == 2:
                fault.inject(j)  # the engine's next journal call is a read of the task state

    runner, robot = runner_for(j, seed=11, turns=(GO_OFFICE, GO_DOCK, {"done": "x"}),
                               on_capture=corrupt_before_second_turn)
    out = runner.run("go to the office, then return to dock")
    assert out.status is MissionStatus.BLOCKED and len(robot.goals) == 1
    assert runner.physical_blocked and "SQLITE_CORRUPT" in runner.physical_blocked


# ------------------------------------------------------------------ read-only at (re)start


def test_a_restarted_node_on_read_only_storage_refuses_to_open_and_opens_once_writable(tmp_path: Path,
                                                                                         read_only: ReadOnly):
    path = tmp_path / "journal.db"
    with reopen(path, seed=1) as j:
        j.append(batch(1))
    on_disk = digest(path)
    read_only.apply(path, tmp_path, live=False)  # the file and its directory: no -wal or -shm can be made

    with pytest.raises(JournalWriteError) as info:
        reopen(path, seed=2)
    assert str(path) in info.value.message
    code = info.value.details["sqlite_code"]  # immutable (root): no -shm can be made; permissions: a read-only dir
    assert code in {"SQLITE_CANTOPEN", "SQLITE_READONLY_DIRECTORY"}
    assert ("cannot be opened" if code == "SQLITE_CANTOPEN" else "read-only") in info.value.message
    assert digest(path) == on_disk

    read_only.restore()
    j = reopen(path, seed=2)
    assert_whole_batches(j, 1)
    runner, robot = runner_for(j, seed=11)
    assert runner.run("go to the office").status is MissionStatus.SUCCEEDED
    j.close()


def test_a_journal_opened_on_a_read_only_file_reads_refuses_writes_and_writes_once_it_is_writable(
        tmp_path: Path, read_only: ReadOnly):
    path = tmp_path / "journal.db"
    with reopen(path, seed=1) as j:
        j.append(batch(1))
    read_only.apply(path, live=False)  # the directory stays writable, so SQLite opens the file read-only

    j = reopen(path, seed=2)
    assert_whole_batches(j, 1)
    for _ in range(2):  # the second try replaces the connection, which is still read-only
        with pytest.raises(JournalWriteError) as info:
            j.append(batch(2))
        assert info.value.details["sqlite_code"] == "SQLITE_READONLY" and "read-only" in info.value.message
        assert_whole_batches(j, 1)

    read_only.restore()  # a connection that opened the file read-only stays so: the journal replaces it
    assert [e.seq for e in j.append(batch(2))] == [4, 5, 6]
    assert_whole_batches(j, 2)
    j.close()


# ------------------------------------------------------------------ corruption


def test_damaged_pages_are_refused_at_open_and_left_exactly_as_found(tmp_path: Path):
    path = tmp_path / "journal.db"
    with reopen(path, seed=1) as j:
        j.append(batch(1))
        j.append(batch(2))
    smash_pages(path, first_page=3)
    on_disk = digest(path)

    with pytest.raises(JournalReadError) as info:
        SqliteJournal(path, clock=ManualClock(), ids=IdGenerator(seed=2))
    err = info.value
    assert err.details["corrupt"] is True and err.details["path"] == str(path) and str(path) in err.message
    assert "corrupt" in err.message and "move it aside" in err.message and "backup" in err.message
    with pytest.raises(JournalReadError):
        open_journal(path, clock=ManualClock(), ids=IdGenerator(seed=3))
    assert digest(path) == on_disk
    assert not side(path, "-wal").exists() or side(path, "-wal").stat().st_size == 0


def test_a_file_that_is_not_a_database_is_refused_and_left_as_it_is(tmp_path: Path):
    path = tmp_path / "journal.db"
    with reopen(path, seed=1) as j:
        j.append(batch(1))
    with open(path, "r+b") as f:
        f.write(GARBAGE[:100])  # the database header
    on_disk = digest(path)
    with pytest.raises(JournalReadError) as info:
        reopen(path, seed=2)
    assert info.value.details["sqlite_code"] == "SQLITE_NOTADB" and info.value.details["corrupt"] is True
    assert str(path) in info.value.message and "corrupt" in info.value.message
    assert digest(path) == on_disk


@pytest.mark.parametrize(("damage", "survivors"), [
    ("torn_last_commit", 3),   # the commit being written when power went: never acknowledged, dropped
    ("garbage_mid_wal", 2),    # checksums fail from the damaged frame on: later commits are dropped too
    ("garbage_wal_header", 1),  # the whole WAL is ignored; what a checkpoint moved into the file remains
])
def test_wal_damage_found_after_a_crash_leaves_a_prefix_of_whole_batches(tmp_path: Path, damage: str,
                                                                        survivors: int):
    path = tmp_path / "live" / "journal.db"
    path.parent.mkdir()
    live = reopen(path, seed=1)
    live.append(batch(1))
    checkpoint(path)
    for k in (2, 3, 4):
        live.append(batch(k))
    image = crash_image(path, tmp_path / "crash" / "journal.db")
    live.close()
    wal = side(image, "-wal")
    txs = wal_transactions(wal)
    assert len(txs) == 3  # one WAL transaction per append
    offset = {"torn_last_commit": txs[2][-1] + 24 + 100, "garbage_mid_wal": txs[1][0] + 24 + 100,
              "garbage_wal_header": 0}[damage]
    with open(wal, "r+b") as f:
        f.seek(offset)
        f.write(GARBAGE[:32])

    j = reopen(image, seed=2)  # SQLite gives no sign of what it dropped: this is the honest limit
    assert_whole_batches(j, survivors)
    assert [e.seq for e in j.append(batch(survivors + 1))] == [3 * survivors + i for i in (1, 2, 3)]
    j.close()
    again = reopen(image, seed=3)  # dropped frames never come back over the new commits
    assert_whole_batches(again, survivors + 1)
    again.close()


def test_an_unreadable_wal_next_to_a_file_without_schema_is_not_set_up_as_a_fresh_journal(tmp_path: Path):
    path = tmp_path / "live" / "journal.db"
    path.parent.mkdir()
    live = reopen(path, seed=1)  # never checkpointed: the schema and every event are in the WAL only
    live.append(batch(1))
    image = crash_image(path, tmp_path / "crash" / "journal.db")
    live.close()
    with open(side(image, "-wal"), "r+b") as f:
        f.write(GARBAGE[:32])
    on_disk = digest(image, side(image, "-wal"))

    with pytest.raises(JournalReadError) as info:
        SqliteJournal(image, clock=ManualClock(), ids=IdGenerator(seed=2))
    assert info.value.details["corrupt"] is True and "not a new journal" in info.value.message
    assert digest(image, side(image, "-wal")) == on_disk
    with contextlib.closing(sqlite3.connect(image)) as conn:  # no schema was created over it
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0


def test_garbage_written_into_the_wal_while_open_is_refused_at_the_next_open(tmp_path: Path):
    path = tmp_path / "journal.db"
    j = reopen(path, seed=1)
    j.append(batch(1))
    j.append(batch(2))
    wal = side(path, "-wal")
    with open(wal, "r+b") as f:
        for tx in wal_transactions(wal):
            for frame in tx:
                f.seek(frame + 24)  # page images only: the frame headers (and checksums) stay
                f.write(GARBAGE[:4096])
    # Open connections read WAL frames through their index without re-checking
    # checksums, and closing checkpoints the damaged pages into the file.
    j.close()
    with pytest.raises(JournalReadError) as info:
        reopen(path, seed=2)
    assert info.value.details["corrupt"] is True and str(path) in info.value.message


def test_a_file_replaced_by_an_older_copy_under_a_live_journal_is_refused(tmp_path: Path, read_only: ReadOnly):
    path = tmp_path / "journal.db"
    with reopen(path, seed=1) as j:
        j.append(batch(1))
    old = tmp_path / "old.db"
    shutil.copyfile(path, old)
    with reopen(path, seed=2) as j:
        j.append(batch(2))
    read_only.apply(path, live=False)
    j = reopen(path, seed=3)  # a node restarted on read-only storage: it reads, and has seen seq 6
    assert_whole_batches(j, 2)
    with pytest.raises(JournalWriteError):
        j.append(batch(3))  # SQLITE_READONLY: the journal replaces its connection at the next call
    read_only.restore()
    shutil.copyfile(old, path)  # meanwhile someone copies an older journal over the file
    with pytest.raises(JournalWriteError) as info:
        j.append(batch(3))
    assert "replaced" in info.value.message and info.value.details["seen_seq"] == 6
    assert info.value.details["file_seq"] == 3
    j.close()
