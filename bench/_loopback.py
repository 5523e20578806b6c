"""The guard every bench script runs first: DDS must be confined to the shipped loopback profile.

A bench starts ROS participants (or may, through the code it loads); on a shared
machine they must not talk to anything but 127.0.0.1. ``source scripts/env.sh``
points ``FASTDDS_DEFAULT_PROFILES_FILE`` at ``config/fastdds_loopback.xml``;
anything else (unset, another file, a file that differs) is refused.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["PROFILE", "loopback_problem", "require_loopback"]

PROFILE = Path(__file__).resolve().parents[1] / "config" / "fastdds_loopback.xml"


def loopback_problem(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> str:
    """Why the DDS setup is not the shipped loopback profile ('' when it is)."""
    value = environ.get("FASTDDS_DEFAULT_PROFILES_FILE", "")
    if not value:
        return "FASTDDS_DEFAULT_PROFILES_FILE is not set"
    path = Path(value)
    if not path.is_file():
        return f"FASTDDS_DEFAULT_PROFILES_FILE={value} is not a file"
    if path.resolve() != PROFILE and path.read_bytes() != PROFILE.read_bytes():
        return f"FASTDDS_DEFAULT_PROFILES_FILE={value} is not the shipped loopback profile {PROFILE}"
    return ""


_HELD: list = []
"""This bench's domain claim, held to the process's exit."""


def require_loopback() -> None:
    """Exit 2 with a clear message unless DDS is on the shipped loopback profile; then hold a domain of
    this bench's own (the shell's, unless another run of the harness holds it: then a free one)."""
    problem = loopback_problem()
    if problem:
        print(f"{problem}: run under `source scripts/env.sh` (loopback-only DDS profile)", file=sys.stderr)
        raise SystemExit(2)
    sys.path.insert(0, str(PROFILE.parents[1]))
    from robot_harness.domains import MAX_DOMAIN_ID, claim, try_claim

    want = os.environ.get("ROS_DOMAIN_ID", "")
    held = try_claim(int(want)) if want.isdigit() and int(want) <= MAX_DOMAIN_ID else None
    if held is None:
        held = claim()
        print(f"ROS_DOMAIN_ID={want or '(unset)'} is held by another run: this bench uses {held.domain}",
              file=sys.stderr)
    os.environ["ROS_DOMAIN_ID"] = str(held.domain)
    _HELD.append(held)
