"""Test-wide set-up: loopback-only DDS, a random domain per run, source first.

Every DDS participant a test starts uses the shipped loopback profile and a
ROS_DOMAIN_ID chosen at random for this run (unless the caller set one), so
parallel runs on one machine do not see each other.
"""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Sources first: robot_harness/__init__ extends __path__ to the install space,
# where the generated msg/srv/action packages live.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(REPO / "config" / "fastdds_loopback.xml")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
# LOCALHOST would make rmw_fastrtps bind non-loopback interfaces (test_loopback.py): the profile rules.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "SUBNET"
os.environ.pop("ROS_STATIC_PEERS", None)
# A fresh domain for every test run (RH_TEST_DOMAIN_ID pins one for debugging);
# subprocesses the tests start inherit it.
os.environ["ROS_DOMAIN_ID"] = os.environ.get("RH_TEST_DOMAIN_ID") or str(random.SystemRandom().randint(0, 232))


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
