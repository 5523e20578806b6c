"""PostgreSQL fixtures (registered by test/conftest.py): one throw-away server per test session,
a fresh database per test.

``pg_server`` starts lazily, the first time a test asks for it, so a run without PostgreSQL tests
starts none; without PostgreSQL installed those tests skip and say how to install it. The server
runs with ``fsync=off`` (a crash loses it; it is thrown away anyway) and is stopped and its
directory removed when the session ends.
"""
from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from robot_harness.pgserver import INSTALL_HINT, PgServer, find_bindir


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A running server of this session's own (PgServer in a fresh /tmp directory)."""
    if find_bindir() is None:
        pytest.skip(f"PostgreSQL is not installed: {INSTALL_HINT}")
    with PgServer(fsync=False) as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a database of this test's own, dropped (open sessions and all) when the test ends."""
    name = f"t_{secrets.token_hex(8)}"
    url = pg_server.create_database(name)
    try:
        yield url
    finally:
        pg_server.drop_database(name, missing_ok=True)
