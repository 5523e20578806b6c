"""robot_harness.pgserver against a real PostgreSQL: one server for the module, one more cluster for
the start-failure tests; the test fixtures of test/pg.py at the end. Skips without PostgreSQL."""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from robot_harness import pgserver
from robot_harness.core.errors import UsageError
from robot_harness.pgserver import PgNotInstalled, PgServer, PgServerError, find_bindir

REPO = Path(__file__).resolve().parents[2]
needs_pg = pytest.mark.skipif(find_bindir() is None, reason=f"PostgreSQL is not installed: {pgserver.INSTALL_HINT}")


@pytest.fixture(scope="module")
def server() -> Iterator[PgServer]:
    if find_bindir() is None:
        pytest.skip(f"PostgreSQL is not installed: {pgserver.INSTALL_HINT}")
    with PgServer(fsync=False) as s:
        yield s


def _databases(s: PgServer) -> set[str]:
    with psycopg.connect(s.url(), autocommit=True) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "robot_harness.pgserver", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=90)


def test_a_started_server_answers_on_loopback_as_the_superuser(server):
    url = server.url()
    assert url == f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
    assert (server.directory / "port").read_text().strip() == str(server.port)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        assert conn.execute("SHOW max_connections").fetchone() == ("200",)
        assert conn.execute("SHOW unix_socket_directories").fetchone() == (str(server.directory),)
        assert conn.execute("SHOW fsync").fetchone() == ("off",)
    hba = [line.split() for line in (server.data_dir / "pg_hba.conf").read_text().splitlines()
           if line.strip() and not line.startswith("#")]
    assert {tuple(line) for line in hba if line[0] == "host"} == {("host", "all", "all", "127.0.0.1/32", "trust"),
                                                                  ("host", "replication", "all", "127.0.0.1/32", "trust")}
    assert "database system is ready" in (server.directory / "server.log").read_text()


def test_create_and_drop_a_database(server):
    url = server.create_database("t_create_drop")
    assert url == server.url("t_create_drop")
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE x (a int)")
        conn.execute("INSERT INTO x VALUES (1)")
    with pytest.raises(PgServerError, match="already exists") as info:
        server.create_database("t_create_drop")
    assert info.value.action == "create_database"
    held = psycopg.connect(url)  # an open session does not stop the drop (WITH (FORCE))
    try:
        server.drop_database("t_create_drop")
    finally:
        held.close()
    assert "t_create_drop" not in _databases(server)
    with pytest.raises(PgServerError, match="does not exist"):
        server.drop_database("t_create_drop")
    server.drop_database("t_create_drop", missing_ok=True)


@pytest.mark.parametrize("name", ["", "1abc", "a-b", 'x"; DROP DATABASE postgres; --', "a" * 64])
def test_a_database_name_must_be_a_plain_identifier(server, name):
    with pytest.raises(UsageError):
        server.create_database(name)
    with pytest.raises(UsageError):
        server.drop_database(name, missing_ok=True)


def test_starting_twice_in_one_directory_reuses_the_cluster_and_stop_is_idempotent(server):
    server.create_database("t_marker")
    try:
        again = PgServer(server.directory).start()  # running: nothing happens
        assert again.port == server.port and again.is_running()
        mtime = (server.data_dir / "postmaster.pid").stat().st_mtime_ns
        server.start()
        assert (server.data_dir / "postmaster.pid").stat().st_mtime_ns == mtime
        with pytest.raises(PgServerError, match="already runs on port"):
            PgServer(server.directory, port=server.port + 1 if server.port < 65535 else 1024).start()

        again.stop()
        assert not server.is_running() and not (server.data_dir / "postmaster.pid").exists()
        server.stop()
        again.stop()

        restarted = PgServer(server.directory, fsync=False).start()  # the same cluster, on its last port
        assert restarted.port == server.port
        assert "t_marker" in _databases(server)
    finally:
        server.start()
        server.drop_database("t_marker", missing_ok=True)


def test_stop_without_a_cluster_does_nothing(tmp_path):
    PgServer(tmp_path / "never-started").stop()
    assert not (tmp_path / "never-started").exists()


def test_missing_binaries_are_a_typed_error(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    with pytest.raises(PgNotInstalled) as info:
        PgServer(tmp_path / "srv", bindir=empty).start()
    assert isinstance(info.value, PgServerError) and info.value.action == "find_bindir"
    assert "initdb" in str(info.value) and "pg_ctl" in str(info.value)
    with pytest.raises(PgNotInstalled):
        with PgServer(tmp_path / "srv", bindir=empty):
            pass


def test_without_any_installation_the_cli_exits_4_and_says_how_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(pgserver, "find_bindir", lambda **_: None)
    assert pgserver.main(["start", "--dir", str(tmp_path / "srv")]) == 4
    assert "apt-get install postgresql" in capsys.readouterr().err


@needs_pg
def test_a_port_in_use_fails_with_the_log_when_pinned_and_is_retried_when_drawn(server, monkeypatch):
    directory = Path(tempfile.mkdtemp(prefix="rh-pg-test-", dir="/tmp"))
    try:
        with pytest.raises(PgServerError) as info:
            PgServer(directory, port=server.port, fsync=False).start()
        assert info.value.action == "start"
        assert "Address already in use" in info.value.log_tail and "Address already in use" in str(info.value)
        assert str(directory / "server.log") in str(info.value)

        free_port = pgserver._free_port  # noqa: SLF001
        drawn = iter([server.port])  # the first port drawn is taken
        monkeypatch.setattr(pgserver, "_free_port", lambda: next(drawn, None) or free_port())
        second = PgServer(directory, fsync=False)
        try:
            assert second.start().port != server.port
            with psycopg.connect(second.url()) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            second.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@needs_pg
@pytest.mark.skipif(os.geteuid() != 0, reason="the postgres account is used only when running as root")
def test_as_root_a_directory_the_postgres_user_cannot_reach_is_refused(tmp_path):
    pwd.getpwnam("postgres")
    if os.stat(tmp_path.parent).st_mode & 0o001:
        pytest.skip(f"{tmp_path.parent} is open to everyone here")
    with pytest.raises(PgServerError, match="cannot reach"):
        PgServer(tmp_path / "srv").start()


@needs_pg
def test_the_cli_starts_reports_and_stops_a_server_in_a_directory(server):
    d = str(server.directory)
    started = _cli("start", "--dir", d)  # running already: the same server
    assert (started.returncode, started.stdout.strip()) == (0, server.url()), started.stderr
    assert _cli("url", "--dir", d).stdout.strip() == server.url()
    try:
        assert _cli("stop", "--dir", d).returncode == 0
        assert not server.is_running()
        assert _cli("stop", "--dir", d).returncode == 0
        gone = _cli("url", "--dir", d)
        assert gone.returncode == 1 and "no server is running" in gone.stderr
    finally:
        restarted = _cli("start", "--dir", d, "--no-fsync")
    assert (restarted.returncode, restarted.stdout.strip()) == (0, server.url()), restarted.stderr


def test_cli_usage_errors_exit_2(tmp_path):
    assert _cli().returncode == 2
    assert _cli("start").returncode == 2
    assert _cli("frobnicate", "--dir", str(tmp_path)).returncode == 2
    bad_port = _cli("start", "--dir", str(tmp_path / "srv"), "--port", "70000")
    assert bad_port.returncode == 2 and "outside 1-65535" in bad_port.stderr


# ---------------------------------------------------------------------- the fixtures of test/pg.py

_SEEN: list[str] = []


@pytest.mark.parametrize("round_", [1, 2])
def test_pg_url_gives_each_test_a_fresh_database_dropped_afterwards(pg_server, pg_url, round_):
    with psycopg.connect(pg_url) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
        conn.execute("CREATE TABLE t (a int)")
    assert name.startswith("t_") and pg_url == pg_server.url(name)
    assert not set(_SEEN) & _databases(pg_server)  # the previous test's database is gone
    _SEEN.append(name)
