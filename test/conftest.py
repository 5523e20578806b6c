"""Test-wide set-up: loopback-only DDS, a random domain per run and per test, source first.

Every DDS participant a test starts uses the shipped loopback profile and a
ROS_DOMAIN_ID chosen at random for this run (unless the caller set one), so
parallel runs on one machine do not see each other; each test then moves to a
domain of its own (``own_domain``), so a graph an earlier test left shutting
down does not answer this one's goals.
"""
from __future__ import annotations

import itertools
import os
import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Sources first: robot_harness/__init__ extends __path__ to the install space,
# where the generated msg/srv/action packages live.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
pytest_plugins = ["test.pg"]  # pg_server, pg_url: a throw-away PostgreSQL server (test/pg.py)

os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(REPO / "config" / "fastdds_loopback.xml")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
# LOCALHOST would make rmw_fastrtps bind non-loopback interfaces (test_loopback.py): the profile rules.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "SUBNET"
os.environ.pop("ROS_STATIC_PEERS", None)
# A domain for this run, claimed (robot_harness.domains): two runs on one machine at once never share
# one. RH_TEST_DOMAIN_ID pins one for debugging. Subprocesses the tests start inherit it.
from robot_harness.domains import claim as _claim_domain  # noqa: E402

_RNG = random.SystemRandom()
_PINNED = os.environ.get("RH_TEST_DOMAIN_ID")
try:
    _RUN_CLAIM = None if _PINNED else _claim_domain()
except RuntimeError as _exc:  # no lock could be taken (a read-only tmp): draw, as before claims existed
    print(f"conftest: {_exc}; drawing domains without claims", file=sys.stderr)
    _RUN_CLAIM = None
os.environ["ROS_DOMAIN_ID"] = _PINNED or str(_RUN_CLAIM.domain if _RUN_CLAIM else _RNG.randint(0, 232))

# Every test gets a domain of its own (its processes and its in-process contexts read the environment):
# a graph another test left shutting down must not take this test's goals, so no two tests in a row
# share one (a shuffled cycle over 0-232, the run's domain last), and each is claimed for the test's
# length, so another run's test never has it meanwhile.
_ORDER = [d for d in range(0, 233) if str(d) != os.environ["ROS_DOMAIN_ID"]]
_RNG.shuffle(_ORDER)
_NEXT = itertools.count()


def _claim_next():
    """The next free domain of the cycle (the run's own as the last resort: it is held already)."""
    start = next(_NEXT)
    order = [_ORDER[(start + i) % len(_ORDER)] for i in range(len(_ORDER))]
    try:
        return _claim_domain(order)
    except RuntimeError:
        return None


@pytest.fixture(autouse=True)
def own_domain(monkeypatch):
    """A ROS_DOMAIN_ID of this test's own (module comment above); never assume you are alone."""
    if _PINNED:
        yield
        return
    if _RUN_CLAIM is None:  # no claims on this machine: the shuffled cycle alone, as before
        monkeypatch.setenv("ROS_DOMAIN_ID", str(_ORDER[next(_NEXT) % len(_ORDER)]))
        yield
        return
    held = _claim_next()
    monkeypatch.setenv("ROS_DOMAIN_ID", str(held.domain) if held else os.environ["ROS_DOMAIN_ID"])
    try:
        yield
    finally:
        if held is not None:
            held.release()


def pytest_configure(config):  # noqa: D103 - pytest hook
    # rclpy's EventsExecutor calls faulthandler.enable() when one is made: inside a test that
    # re-aims Python's crash report at the test's captured stderr, and a native abort (which ends
    # the process before pytest prints a capture) then dies without a word. Keep the report on the
    # terminal, where pytest's faulthandler plugin aimed it.
    import faulthandler

    enable = faulthandler.enable

    def keep_terminal(file=None, all_threads=True):
        if file is None and faulthandler.is_enabled():
            return None
        return enable(file=sys.stderr if file is None else file, all_threads=all_threads)

    faulthandler.enable = keep_terminal


def pytest_report_header(config):  # noqa: D103 - pytest hook
    return [f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} FASTDDS_DEFAULT_PROFILES_FILE={os.environ['FASTDDS_DEFAULT_PROFILES_FILE']}"]

SHARED = REPO.parent / "shared"


def pytest_collection_modifyitems(config, items):  # noqa: D103 - pytest hook
    import pytest

    for item in items:
        parts = Path(str(item.fspath)).parts
        for marker in ("unit", "integration", "replay"):
            if marker in parts:
                item.add_marker(getattr(pytest.mark, marker))
