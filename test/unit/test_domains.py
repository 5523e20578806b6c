"""Domain claims: two runs on one machine never hold one domain at once; a dead holder frees it."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from robot_harness.domains import MAX_DOMAIN_ID, claim, try_claim


@pytest.fixture(autouse=True)
def lock_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RH_DOMAIN_LOCK_DIR", str(tmp_path / "locks"))
    return tmp_path / "locks"


def _holder(domain: int) -> subprocess.Popen:
    """Another process that claims ``domain`` and holds it until its stdin closes (or it is killed)."""
    code = textwrap.dedent(f"""
        import sys
        from robot_harness.domains import try_claim
        held = try_claim({domain})
        print("held" if held else "refused", flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_domain_another_process_holds_is_skipped_and_freed_when_it_dies():
    proc = _holder(7)
    try:
        assert try_claim(7) is None
        got = claim([7, 8, 9])
        assert got.domain == 8
        got.release()
    finally:
        proc.kill()
        proc.wait()
    again = try_claim(7)  # the kernel dropped the dead holder's lock
    assert again is not None and again.domain == 7
    again.release()


def test_one_process_cannot_hold_a_domain_twice_and_a_release_frees_it():
    first = try_claim(3)
    assert first is not None and first.held
    assert try_claim(3) is None
    other = claim([3, 4, 5], avoid=[4])
    assert other.domain == 5
    other.release()
    first.release()
    first.release()  # idempotent
    assert not first.held
    again = try_claim(3)
    assert again is not None
    again.release()


def test_every_domain_held_is_an_error_and_out_of_range_is_refused():
    proc = _holder(11)
    try:
        with pytest.raises(RuntimeError, match="every ROS_DOMAIN_ID"):
            claim([11])
    finally:
        proc.kill()
        proc.wait()
    with pytest.raises(ValueError):
        try_claim(MAX_DOMAIN_ID + 1)
    with pytest.raises(ValueError):
        try_claim(-1)


def test_the_default_order_covers_the_whole_range():
    seen = set()
    held = []
    for _ in range(MAX_DOMAIN_ID + 1):
        c = claim()
        seen.add(c.domain)
        held.append(c)
    assert seen == set(range(MAX_DOMAIN_ID + 1))
    with pytest.raises(RuntimeError):
        claim()
    for c in held:
        c.release()


def test_a_lock_file_this_user_cannot_write_is_still_claimed_read_only(lock_dir):
    import os

    first = try_claim(21)  # makes the folder and the file
    assert first is not None
    first.release()
    os.chmod(lock_dir / "21.lock", 0o444)
    again = try_claim(21)
    assert again is not None and try_claim(21) is None, "a read-only descriptor still takes the flock"
    again.release()


def test_an_unopenable_lock_is_skipped_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("RH_DOMAIN_LOCK_DIR", str(tmp_path / "file-not-folder"))
    (tmp_path / "file-not-folder").write_text("x")
    assert try_claim(5) is None
    with pytest.raises(RuntimeError):
        claim([5, 6])
