"""A throw-away PostgreSQL server in one directory, for tests, benchmarks and operators.

``PgServer(dir).start()`` makes a cluster in ``dir/pgdata`` the first time
(``initdb``, trust authentication on the local socket and 127.0.0.1 only) and
starts it listening on 127.0.0.1 and a socket in ``dir``; a later ``start``
in the same directory reuses the cluster, and one while it runs changes
nothing. ``stop`` is safe to call twice. The server's log is ``dir/server.log``
and its port is kept in ``dir/port``, so another process (the CLI's ``url`` and
``stop``) finds it later. The superuser is always ``postgres``.

``initdb`` and ``postgres`` refuse to run as root: as root, every server
command runs as the ``postgres`` system user (Debian's package makes it) via
``runuser``, and the directory is handed to that user, so it must sit where that
user can reach it (``/tmp``, not pytest's mode-700 ``tmp_path``).

This is not a production server: anyone on this machine may connect as any
role without a password.

CLI: ``python -m robot_harness.pgserver start --dir DIR [--port N]`` prints the
URL; ``url --dir DIR``; ``stop --dir DIR``. Exit 2: usage; 4: PostgreSQL is not
installed; 1: the server failed (the message names what and quotes the log).
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from robot_harness.core.errors import HarnessError, UsageError

if TYPE_CHECKING:
    from typing_extensions import LiteralString

__all__ = ["PgServer", "PgServerError", "PgNotInstalled", "find_bindir", "INSTALL_HINT", "main"]

INSTALL_HINT = "install it with `apt-get install postgresql` (or run `make setup` as root)"
SUPERUSER = "postgres"
HOST = "127.0.0.1"
_DEBIAN_ROOT = Path("/usr/lib/postgresql")
_NEEDED = ("initdb", "pg_ctl", "postgres")
_DB_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_SOCKET_MAX = 107  # sun_path on Linux, less the NUL
_START_TIMEOUT_S = 30
_PORT_ATTEMPTS = 5


class PgServerError(HarnessError):
    """A server command failed; ``action`` names the step, ``log_tail`` the log's last lines."""

    code = "pg_server_failed"

    def __init__(self, message: str, *, action: str, log_tail: str = "", **details: Any) -> None:
        text = f"{message}\n--- last lines of the log ---\n{log_tail}" if log_tail.strip() else message
        super().__init__(text, action=action, log_tail=log_tail, **details)
        self.action = action
        self.log_tail = log_tail


class PgNotInstalled(PgServerError):
    """No PostgreSQL server binaries (initdb, pg_ctl, postgres) were found."""

    code = "pg_not_installed"


def _has_server(bindir: Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in _NEEDED)


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", path.parent.name)) or (-1,)


def find_bindir(*, major: str | None = None) -> Path | None:
    """The directory of the server binaries: the newest ``/usr/lib/postgresql/*/bin`` (Debian's
    layout; the one of version ``major`` when given and present), else ``pg_config --bindir``, else
    where ``initdb`` sits on ``PATH``. None when no server is installed."""
    debian = sorted((p for p in _DEBIAN_ROOT.glob("*/bin") if _has_server(p)), key=_version_key, reverse=True)
    if major is not None:
        debian = [p for p in debian if p.parent.name == major] or debian
    if debian:
        return debian[0]
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True)
            candidate = Path(out.stdout.strip())
            if out.stdout.strip() and _has_server(candidate):
                return candidate
    initdb = shutil.which("initdb")
    if initdb and _has_server(Path(initdb).resolve().parent):
        return Path(initdb).resolve().parent
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class PgServer:
    """One PostgreSQL cluster in ``directory`` (a fresh ``/tmp/rh-pg-*`` when None, removed again when
    the ``with`` block ends). ``port`` pins the TCP port; by default the last one this directory used
    when it is free, else a random free one. ``fsync=False`` makes ``initdb --no-sync`` and runs the
    server with ``fsync=off``: fast, and a power cut may lose or corrupt the cluster (tests only).
    ``bindir`` overrides :func:`find_bindir`."""

    def __init__(
        self,
        directory: Path | None = None,
        *,
        port: int | None = None,
        fsync: bool = True,
        bindir: Path | None = None,
    ) -> None:
        if port is not None and not 0 < port < 65536:
            raise UsageError(f"port {port} is outside 1-65535", port=port)
        self._owns_directory = directory is None
        # /tmp, not tempfile's default: as root the server runs as postgres, which must reach the directory.
        self.directory = (Path(tempfile.mkdtemp(prefix="rh-pg-", dir="/tmp")) if directory is None
                          else Path(directory).absolute())
        self.fsync = fsync
        self._wanted_port = port
        self._bindir = Path(bindir) if bindir is not None else None
        self._port: int | None = None

    # ------------------------------------------------------------------ layout

    @property
    def data_dir(self) -> Path:
        return self.directory / "pgdata"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def port_file(self) -> Path:
        return self.directory / "port"

    @property
    def socket_dir(self) -> Path:
        return self.directory

    @property
    def port(self) -> int:
        """The port this server listens on (or last listened on); PgServerError when none is known."""
        if self._port is None:
            self._port = self._running_port() or self._remembered_port()
        if self._port is None:
            raise PgServerError(f"no PostgreSQL server has run in {self.directory}", action="url")
        return self._port

    def url(self, dbname: str = "postgres") -> str:
        """A ``postgresql://`` URL to ``dbname`` over 127.0.0.1 as the superuser (no password: trust)."""
        return f"postgresql://{SUPERUSER}@{HOST}:{self.port}/{quote(dbname, safe='')}"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> PgServer:
        """Start the server (making the cluster first when the directory has none); nothing happens when
        it already runs. Raises PgNotInstalled without binaries, PgServerError when start fails."""
        bindir = self._require_bindir()
        with self._locked():
            running = self._running_port()
            if running is not None:
                if self._wanted_port is not None and running != self._wanted_port:
                    raise PgServerError(f"the server in {self.directory} already runs on port {running}, "
                                        f"not {self._wanted_port}; stop it first", action="start", port=running)
                self._port = running
                return self
            if not (self.data_dir / "PG_VERSION").is_file():
                self._initdb(bindir)
            self._start(bindir)
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended); nothing happens when it is not
        running or the directory has no cluster."""
        if not (self.data_dir / "PG_VERSION").is_file():
            return
        bindir = self._require_bindir()
        with self._locked():
            if self._status(bindir) != 0:
                return
            proc = self._run([str(bindir / "pg_ctl"), "stop", "-D", str(self.data_dir), "-m", "fast", "-w",
                              "-t", str(_START_TIMEOUT_S)], timeout=_START_TIMEOUT_S + 15, action="stop")
            if proc.returncode != 0 and self._status(bindir) == 0:
                raise PgServerError(f"pg_ctl stop failed in {self.directory}: {proc.stdout.strip()}",
                                    action="stop", log_tail=_tail(self.log_file))

    def is_running(self) -> bool:
        return self._running_port() is not None

    def close(self) -> None:
        """Stop the server and, when this object made the directory, remove it."""
        try:
            self.stop()
        finally:
            if self._owns_directory:
                shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PgServer:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------ databases

    def create_database(self, name: str) -> str:
        """Create database ``name`` (a plain identifier); returns its URL. PgServerError when it exists."""
        self._sql("CREATE DATABASE {}", name, action="create_database")
        return self.url(name)

    def drop_database(self, name: str, *, missing_ok: bool = False) -> None:
        """Drop database ``name``, ending its open sessions (``WITH (FORCE)``)."""
        self._sql("DROP DATABASE IF EXISTS {} WITH (FORCE)" if missing_ok else "DROP DATABASE {} WITH (FORCE)",
                  name, action="drop_database")

    @staticmethod
    def _check_name(name: str) -> str:
        if not _DB_NAME.fullmatch(name):
            raise UsageError(f"database name {name!r} is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63)",
                             database=name)
        return name

    def _sql(self, template: LiteralString, name: str, *, action: str) -> None:
        """Run ``template`` with ``name`` as its quoted identifier, outside a transaction (CREATE and DROP
        DATABASE cannot run inside one)."""
        import psycopg
        from psycopg import sql

        statement = sql.SQL(template).format(sql.Identifier(self._check_name(name)))
        try:
            with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
                conn.execute(statement)
        except psycopg.Error as exc:
            raise PgServerError(f"{action} {name!r} failed on {self.url()}: {exc}".strip(), action=action,
                                database=name) from exc

    # ------------------------------------------------------------------ internals

    def _require_bindir(self) -> Path:
        if self._bindir is not None:
            if not _has_server(self._bindir):
                missing = [n for n in _NEEDED if not os.access(self._bindir / n, os.X_OK)]
                raise PgNotInstalled(f"{self._bindir} holds no PostgreSQL server (missing: {', '.join(missing)})",
                                     action="find_bindir", bindir=str(self._bindir))
            return self._bindir
        version = self.data_dir / "PG_VERSION"
        major = version.read_text().strip() if version.is_file() else None
        found = find_bindir(major=major)
        if found is None:
            raise PgNotInstalled(f"PostgreSQL's server (initdb, pg_ctl, postgres) is not installed: {INSTALL_HINT}",
                                 action="find_bindir")
        self._bindir = found
        return found

    def _run_as(self) -> pwd.struct_passwd | None:
        """The account the server commands run as: ``postgres`` when this is root, else None (this user)."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(SUPERUSER)
        except KeyError:
            raise PgServerError("initdb and postgres refuse to run as root and there is no 'postgres' user "
                                f"to run them as: {INSTALL_HINT}", action="start") from None

    def _run(self, argv: Sequence[str], *, timeout: float, action: str,
             new_session: bool = False) -> subprocess.CompletedProcess[str]:
        program = Path(argv[0]).name
        account = self._run_as()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        kwargs: dict[str, Any] = {}
        if account is not None:
            runuser = shutil.which("runuser")
            if runuser:
                argv = [runuser, "-u", account.pw_name, "--", *argv]
            else:
                kwargs = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
                env["HOME"] = account.pw_dir
        try:
            return subprocess.run(list(argv), cwd=self.directory, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=timeout, start_new_session=new_session, **kwargs)
        except subprocess.TimeoutExpired as exc:
            raise PgServerError(f"{program} ({action}) did not finish in {timeout:.0f} s in {self.directory}",
                                action=action, log_tail=_tail(self.log_file)) from exc
        except OSError as exc:
            raise PgServerError(f"could not run {program}: {exc}", action=action) from exc

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The directory made, handed to the server's account, and locked against another process's
        start or stop in it."""
        self._prepare_directory()
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _prepare_directory(self) -> None:
        d = self.directory
        if len(str(d / ".s.PGSQL.65535.lock")) > _SOCKET_MAX:
            raise UsageError(f"{d} is too long a path for a Unix socket (at most about {_SOCKET_MAX - 21} characters)",
                             directory=str(d))
        created = not d.exists()
        d.mkdir(parents=True, exist_ok=True)
        account = self._run_as()
        if account is None:
            return
        blocked = _untraversable(d.parent, account)
        if blocked is not None:
            raise PgServerError(f"{account.pw_name} cannot reach {d}: {blocked} is closed to it "
                                "(put the server under /tmp, e.g. tempfile.mkdtemp(dir='/tmp'))",
                                action="start", directory=str(d))
        st = d.stat()
        if st.st_uid != account.pw_uid:
            if not (created or self._owns_directory or not any(p.name != ".lock" for p in d.iterdir())):
                raise PgServerError(f"{d} belongs to uid {st.st_uid} and is not empty; the server runs as "
                                    f"{account.pw_name} and needs a directory of its own", action="start")
            os.chown(d, account.pw_uid, account.pw_gid)
            os.chmod(d, st.st_mode | stat.S_IRWXU)

    def _initdb(self, bindir: Path) -> None:
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise PgServerError(f"{self.data_dir} exists without PG_VERSION (an interrupted initdb?); remove it "
                                "and start again", action="initdb")
        argv = [str(bindir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "-A", "trust",
                "-E", "UTF8", "--locale=C"]
        if not self.fsync:
            argv.append("--no-sync")
        proc = self._run(argv, timeout=120, action="initdb")
        if proc.returncode != 0:
            raise PgServerError(f"initdb failed in {self.data_dir} (exit {proc.returncode})", action="initdb",
                                log_tail="\n".join(proc.stdout.splitlines()[-20:]))
        hba = self.data_dir / "pg_hba.conf"
        hba.write_text("# robot_harness.pgserver: trust on the local socket and 127.0.0.1 only (a throw-away server)\n"
                       "local all all trust\n"
                       f"host all all {HOST}/32 trust\n"
                       "local replication all trust\n"
                       f"host replication all {HOST}/32 trust\n")
        account = self._run_as()
        if account is not None:
            os.chown(hba, account.pw_uid, account.pw_gid)

    def _start(self, bindir: Path) -> None:
        candidates: list[int]
        if self._wanted_port is not None:
            candidates = [self._wanted_port]
        else:
            remembered = self._remembered_port()
            candidates = ([remembered] if remembered else []) + [_free_port() for _ in range(_PORT_ATTEMPTS)]
        for i, port in enumerate(candidates):
            options = [f"listen_addresses={HOST}", f"port={port}", f"unix_socket_directories={self.socket_dir}",
                       "max_connections=200"]
            if not self.fsync:
                options.append("fsync=off")
            # pg_ctl hands -o to /bin/sh: quote each setting.
            opts = " ".join(f"-c {_sh_quote(o)}" for o in options)
            log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
            proc = self._run([str(bindir / "pg_ctl"), "start", "-D", str(self.data_dir), "-l", str(self.log_file),
                              "-w", "-t", str(_START_TIMEOUT_S), "-o", opts],
                             timeout=_START_TIMEOUT_S + 15, action="start", new_session=True)
            if proc.returncode == 0:
                self._port = port
                self.port_file.write_text(f"{port}\n")
                return
            new_log = _read_from(self.log_file, log_offset)
            if self._status(bindir) == 0:  # started late (pg_ctl's wait ran out): do not leave it behind
                self._run([str(bindir / "pg_ctl"), "stop", "-D", str(self.data_dir), "-m", "immediate", "-w"],
                          timeout=_START_TIMEOUT_S, action="stop")
            collided = "Address already in use" in new_log
            if collided and i + 1 < len(candidates):
                continue
            tail = "\n".join(new_log.splitlines()[-20:]) or proc.stdout.strip()
            raise PgServerError(f"PostgreSQL did not start in {self.directory} on port {port} "
                                f"(pg_ctl exit {proc.returncode}; log {self.log_file})",
                                action="start", log_tail=tail, port=port)

    def _status(self, bindir: Path) -> int:
        """``pg_ctl status``: 0 running, 3 not running, 4 no cluster."""
        return self._run([str(bindir / "pg_ctl"), "status", "-D", str(self.data_dir)], timeout=15,
                         action="status").returncode

    def _running_port(self) -> int | None:
        """The port of the postmaster running this cluster, from ``postmaster.pid``; None when none runs."""
        if not (self.data_dir / "PG_VERSION").is_file():
            return None
        if self._status(self._require_bindir()) != 0:
            return None
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            return int(lines[3])
        except (OSError, IndexError, ValueError):
            return self._remembered_port()

    def _remembered_port(self) -> int | None:
        try:
            return int(self.port_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def __repr__(self) -> str:
        return f"PgServer({str(self.directory)!r}, port={self._port})"


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _untraversable(path: Path, account: pwd.struct_passwd) -> Path | None:
    """The first of ``path`` and its ancestors ``account`` may not enter (search permission), or None."""
    groups = set(os.getgrouplist(account.pw_name, account.pw_gid))
    for p in [path, *path.parents]:
        st = p.stat()
        if st.st_uid == account.pw_uid:
            bit = stat.S_IXUSR
        elif st.st_gid in groups:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return p
    return None


# ---------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m robot_harness.pgserver",
                                     description="A throw-away PostgreSQL server in one directory.")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start the server (initdb the first time); prints its URL")
    start.add_argument("--dir", required=True, type=Path, help="the server's directory (data, socket, log)")
    start.add_argument("--port", type=int, help="TCP port on 127.0.0.1 (default: the last one, else a free one)")
    start.add_argument("--no-fsync", action="store_true", help="initdb --no-sync and fsync=off (tests only)")
    for name, text in (("stop", "stop the server (nothing happens when it is not running)"),
                       ("url", "print the running server's URL")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--dir", required=True, type=Path, help="the server's directory")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 on success, 1 when the server failed or is not running, 2 on usage errors, 4 when
    PostgreSQL is not installed."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        server = PgServer(args.dir, port=getattr(args, "port", None), fsync=not getattr(args, "no_fsync", False))
        if args.command == "start":
            print(server.start().url())
        elif args.command == "stop":
            server.stop()
        else:
            if not server.is_running():
                print(f"pgserver: no server is running in {args.dir}", file=sys.stderr)
                return 1
            print(server.url())
    except PgNotInstalled as exc:
        print(f"pgserver: {exc.message}", file=sys.stderr)
        if "apt-get" not in exc.message:
            print(f"pgserver: {INSTALL_HINT}", file=sys.stderr)
        return 4
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"pgserver: {exc.message}", file=sys.stderr)
        return 2
    except PgServerError as exc:
        print(f"pgserver: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
