"""robot-harness: the command line over the library (a thin wrapper).

Every command is registered with ``add_command``, which gives it the same
shape: a one-line help, a description, copy-pasteable examples, ``--json``
when it prints a result, ``--progress``/``--quiet`` when it runs long, and
the exit codes it can return (``ExitCode``). A handler takes the parsed
arguments and a ``Console`` and returns an ``ExitCode``; errors are raised, and
``main`` turns them into one ``robot-harness: error: ...`` line on stderr and
the matching exit code. docs/cli.md describes every command and how to add one.
"""
from __future__ import annotations

import argparse
import contextlib
import enum
import importlib
import json
import os
import shutil
import signal
import re
import sys
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .core.errors import HarnessError, UsageError

TOKEN_ENV = "ROBOT_HARNESS_OPERATOR_TOKEN"
"""The environment variable holding a mission owner's token (``mission``, ``answer``)."""

__all__ = ["main", "build_parser", "add_command", "add_group", "ExitCode", "Console", "Progress", "Handler",
           "exit_code_for", "mission_exit_code"]


class ExitCode(enum.IntEnum):
    """What the exit status of ``robot-harness`` means (one table: ``--help``, docs/cli.md)."""

    def __new__(cls, value: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning  # type: ignore[attr-defined]
        return member

    OK = 0, ("done: the mission reached a final status (SUCCEEDED or not: read it in the output), "
             "the replay matched, the evidence is intact")
    NOT_SUCCEEDED = 1, ("with --require-success: the mission ended FAILED, UNKNOWN, BLOCKED, CANCELLED or "
                        "WAITING_USER; a replay found differences")
    USAGE = 2, "bad usage: unknown option, invalid scenario or contract file, no such journal, mission or interaction"
    REFUSED = 3, ("the harness refused: mission not admitted (busy, not active, invalid, navigator not active, no "
                  "fresh pose), a token the approval policy does not accept, a conflicting answer")
    UNAVAILABLE = 4, "nothing answered in time: no running graph or service, a timeout, the model endpoint"
    EVIDENCE = 5, "the journal or the evidence cannot be trusted: unreadable journal, evidence missing or changed"
    BUG = 70, "an unexpected error inside robot_harness (traceback printed; please report it)"
    INTERRUPTED = 130, "interrupted (Ctrl-C)"
    TERMINATED = 143, "terminated (SIGTERM, e.g. by timeout(1) or a service manager); what ran is on the record"
    PIPE = 141, "stdout was closed early (e.g. | head)"


def exit_code_table() -> str:
    return "exit codes:\n" + "\n".join(f"  {c.value:>3}  {c.meaning}" for c in ExitCode)  # type: ignore[attr-defined]


# Error codes (``HarnessError.code`` anywhere in an exception's class tree) by exit code; the
# codes are the structured attribute every error carries, so no error class has to be imported here.
_UNAVAILABLE = frozenset({"timeout", "backend_unavailable", "llm_unavailable"})
_EVIDENCE = frozenset({"journal_read_failed", "journal_write_failed", "evidence_error", "nondeterminism"})


def exit_code_for(exc: HarnessError) -> ExitCode:
    """The exit code of an error the harness raised on purpose."""
    if isinstance(exc, UsageError):
        return ExitCode.USAGE
    codes = {getattr(c, "code", None) for c in type(exc).__mro__}
    if codes & _UNAVAILABLE:
        return ExitCode.UNAVAILABLE
    if codes & _EVIDENCE:
        return ExitCode.EVIDENCE
    return ExitCode.REFUSED


def mission_exit_code(status: str, *, require_success: bool = False) -> ExitCode:
    """0 for a mission that reached any final status: the mission ran, and its status (in the
    output) says how it ended. With ``require_success`` (``--require-success``, for CI scripts),
    1 for any final status but SUCCEEDED. A status that is not final is a harness bug."""
    from .core.records import MissionStatus

    if status not in {s.value for s in MissionStatus}:
        raise RuntimeError(f"the mission ended without a final status ({status!r})")
    if require_success and status != MissionStatus.SUCCEEDED.value:
        return ExitCode.NOT_SUCCEEDED
    return ExitCode.OK


# --------------------------------------------------------------------------- output


class Progress:
    """A live status line on stderr for long runs, and a closing summary.

    Live when stderr is a terminal (rewritten in place) or with ``--progress``
    (one plain line per change when stderr is not a terminal); never under
    ``--json`` or ``--quiet`` unless ``--progress`` asks. The summary goes to
    stderr unless ``--json``/``--quiet``. Safe to call from an executor thread
    (mission feedback) while the main thread writes.
    """

    def __init__(self, stream: TextIO, *, live: bool, summary: bool) -> None:
        self._lock = threading.Lock()
        self.stream = stream
        self.live = live
        self.summary = summary
        self.tty = _isatty(stream)
        self.t0 = time.monotonic()
        self._key: str | None = None
        self._drawn = 0.0
        self._dirty = False

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def update(self, text: str, *, key: str | None = None) -> None:
        """Show ``text``. On a terminal it is redrawn at most ten times a second (always when
        ``key`` changes); elsewhere it is written only when ``key`` (default: the text) changes."""
        if not self.live:
            return
        with self._lock:
            self._draw(text, text if key is None else key)

    def _draw(self, text: str, key: str) -> None:
        now = time.monotonic()
        if self.tty:
            if key == self._key and now - self._drawn < 0.1:
                return
            width = max(20, shutil.get_terminal_size((100, 24)).columns - 1)
            self.stream.write("\r\033[K" + text[:width])
            self._dirty = True
        elif key != self._key:
            self.stream.write(text + "\n")
        else:
            return
        self.stream.flush()
        self._key, self._drawn = key, now

    def mission(self, fb: Any) -> None:
        """``MissionClient`` feedback (``Mission.action``): stage, the active action, the latest event."""
        act, kind = fb.active_action, fb.latest_event.kind
        key = f"{fb.mission_id} {fb.stage}"
        if act.action_id:
            key += f" {act.skill} {act.state}"
        if kind:
            key += f" {kind}"
        self.update(f"[{self.elapsed():6.1f}s] {key}", key=key)

    def clear(self) -> None:
        with self._lock:
            if self._dirty:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self._dirty = False

    def done(self, summary: str = "") -> None:
        """Clear the live line; write ``summary`` (one line) unless quiet."""
        self.clear()
        if summary and self.summary:
            self.stream.write(summary + "\n")
            self.stream.flush()


class Console:
    """Where a command's output goes: its result on stdout, everything else on stderr.

    ``result`` writes the one result a command prints: a JSON document under
    ``--json``, text otherwise. While a handler runs, ``print()`` goes to
    stderr, so a stray print can never corrupt a JSON result.
    """

    def __init__(self, *, json_output: bool = False, quiet: bool = False, progress: bool = False,
                 stdout: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self.json = json_output
        self.quiet = quiet
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        silent = json_output or quiet
        self.progress = Progress(self.stderr, live=progress or (not silent and _isatty(self.stderr)),
                                 summary=not silent)

    @classmethod
    def for_args(cls, args: argparse.Namespace) -> Console:
        return cls(json_output=getattr(args, "json", False), quiet=getattr(args, "quiet", False),
                   progress=getattr(args, "progress", False))

    def result(self, doc: Any, text: str | Callable[[], str] | None = None) -> None:
        """The command's result: ``doc`` as JSON under ``--json``, else ``text`` (or ``doc`` as JSON)."""
        self.progress.clear()
        if self.json or text is None:
            out = json.dumps(doc, indent=2, default=str)
        else:
            out = text() if callable(text) else text
        self.write(out if out.endswith("\n") or not out else out + "\n")

    def write(self, text: str) -> None:
        """Raw text on stdout (an export); under ``--json`` use ``result`` instead."""
        self.stdout.write(text)
        self.stdout.flush()

    def info(self, message: str) -> None:
        """A note for the person at the terminal (stderr; silent under ``--json``/``--quiet``)."""
        if not (self.json or self.quiet):
            self.progress.clear()
            print(message, file=self.stderr)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# --------------------------------------------------------------------------- registration

Handler = Callable[[argparse.Namespace, Console], int]
"""A command: parsed arguments and a console in, an ``ExitCode`` out; errors are raised."""

_ALWAYS = (ExitCode.OK, ExitCode.USAGE, ExitCode.INTERRUPTED, ExitCode.TERMINATED)


def add_command(
    sub: Any,
    name: str,
    *,
    help: str,  # noqa: A002 - argparse's own name
    description: str,
    examples: Sequence[str],
    run: Handler,
    json_output: bool = True,
    progress: bool = False,
    exit_codes: Sequence[ExitCode] = (),
    notes: str = "",
) -> argparse.ArgumentParser:
    """Register one command on ``sub`` (a subparsers action) and return its parser for its own options.

    ``examples`` are complete command lines (a trailing ``# comment`` is
    fine); ``json_output`` adds ``--json``; ``progress`` adds ``--progress``
    and ``--quiet``; ``exit_codes`` are the codes beyond 0, 2 and 130 that
    the command can return; ``notes`` is free text printed after the examples.
    """
    if not examples:
        raise ValueError(f"command {name!r} needs at least one example")
    codes = sorted(set(_ALWAYS) | set(exit_codes))
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    if notes:
        epilog += "\n\n" + notes.strip("\n")
    epilog += "\n\nexit codes:\n" + "\n".join(f"  {c.value:>3}  {c.meaning}" for c in codes)  # type: ignore[attr-defined]
    p = sub.add_parser(name, help=help, description=_wrap(description), epilog=epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(handler=run, exit_codes=codes)
    out = p.add_argument_group("output")
    if json_output:
        out.add_argument("--json", action="store_true",
                         help="print the result as one JSON document on stdout (errors too); nothing else on stdout")
    if progress:
        out.add_argument("--progress", action="store_true",
                         help="show progress on stderr even when it is not a terminal (or under --json)")
        out.add_argument("-q", "--quiet", action="store_true", help="no progress and no notes on stderr")
    return p


def add_group(sub: Any, name: str, *, help: str, description: str, examples: Sequence[str]) -> Any:  # noqa: A002
    """A command with subcommands (``journal show``); returns the subparsers action for ``add_command``."""
    g = sub.add_parser(name, help=help, description=_wrap(description),
                       epilog="examples:\n" + "\n".join(f"  {e}" for e in examples)
                              + f"\n\nrobot-harness {name} SUBCOMMAND --help for each one's options and exit codes",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    return g.add_subparsers(dest=f"{name}_command", required=True, metavar="SUBCOMMAND", title="subcommands")


def _wrap(text: str) -> str:
    return "\n\n".join(textwrap.fill(" ".join(par.split()), width=88) for par in text.split("\n\n"))


DESCRIPTION = """\
Evidence-gated closed-loop agent harness for ROS 2 robots.

A model proposes tool calls; the harness checks fresh state before any motion,
tracks every physical action, and declares a mission done only on verified
evidence, all recorded in a journal (SQLite) and a bag (MCAP)."""

EXAMPLES = """\
examples:
  robot-harness demo                                 # the inspection demo on the simulated robot
  robot-harness run --scenario scenarios/demo.yaml --journal /tmp/rh/journal.sqlite3
  robot-harness journal show --journal /tmp/rh/journal.sqlite3
  robot-harness up &                                 # sim + harness graph; then, from another shell:
  robot-harness mission "Go to office_storage and come back to dock."
  robot-harness eval --quick

robot-harness COMMAND --help shows a command's options, examples and exit codes (docs/cli.md)."""


COMMAND_MODULES = ("cli_operator", "cli_surfaces", "cli_config", "cli_memory")
"""Modules of ``robot_harness`` that add commands: each has ``register(sub)``, which calls ``add_command``.
They may import this module at their top (it is loaded by then); heavy imports belong inside handlers."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-harness", description=DESCRIPTION,
                                epilog=EXAMPLES + "\n\n" + exit_code_table(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"robot-harness {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    _register_run_commands(sub)
    _register_journal_commands(sub)
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__package__}.{name}").register(sub)
    _register_eval_commands(sub)
    return p


_FINAL_STATUS_NOTE = ("a mission that reaches a final status exits 0, SUCCEEDED or not (the output says which);\n"
                      "--require-success makes any final status but SUCCEEDED exit 1 (for CI scripts)")


NAMESPACE_ENV = "ROBOT_HARNESS_NAMESPACE"


def namespace_arg(p: argparse.ArgumentParser) -> None:
    """``--namespace NS``: the graph's ROS namespace (``up``, ``launch namespace:=``), default $ROBOT_HARNESS_NAMESPACE."""
    p.add_argument("--namespace", default=os.environ.get(NAMESPACE_ENV, ""), metavar="NS",
                   help=f"the graph's ROS namespace, as given to `up --namespace` or the launch file's namespace:= "
                        f"(default ${NAMESPACE_ENV}, else the root); two graphs on one ROS domain need two namespaces")


def namespace_of(args: argparse.Namespace) -> str:
    """``--namespace`` normalized (``robot1`` -> ``/robot1``, the root ""); a bad namespace is a usage error
    naming the rule it breaks."""
    from .params import normalize_namespace

    try:
        return normalize_namespace(getattr(args, "namespace", "") or "")
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def namespaced(args: argparse.Namespace, name: str) -> str:
    """``name`` (absolute at the root, e.g. ``/robot_harness/mission``) under ``--namespace`` (``namespace_of``)."""
    return f"{namespace_of(args)}/{name.lstrip('/')}"


def _register_run_commands(sub: Any) -> None:
    up = add_command(
        sub, "up", help="bring up the node graph in this process (Ctrl-C stops it)",
        description="Start the harness nodes (supervisor, planner, verifier, snapshot aggregator, recovery) and, "
                    "unless --no-sim, the simulated robot, in this process. Missions are sent from another shell "
                    "with `robot-harness mission`. Ctrl-C (or SIGTERM) stops the graph: that is how `up` ends, "
                    "with exit 0.",
        examples=["robot-harness up --journal /tmp/rh/journal.sqlite3 --planner-script scenarios/demo.yaml",
                  "robot-harness up --mcp --dashboard            # + MCP on :8770 and the dashboard on :8771",
                  "robot-harness up --no-sim --harness-config config/harness.yaml   # a real Nav2 robot"],
        run=_up, json_output=False, exit_codes=(ExitCode.UNAVAILABLE, ExitCode.EVIDENCE))
    up.add_argument("--no-sim", action="store_true", help="do not start the simulated robot (use a real Nav2 robot)")
    namespace_arg(up)
    journal_arg(up, what="the journal the supervisor writes",
                default=f"${JOURNAL_ENV}, else the harness config's journal.url, else "
                        "$ROS_HOME/robot_harness/journal.sqlite3")
    up.add_argument("--harness-config", type=Path, help="harness configuration YAML (default config/harness.yaml)")
    up.add_argument("--params-dir", type=Path, help="directory with the nodes' parameter files (default: the package's config/)")
    up.add_argument("--params-file", type=Path,
                    help="one ROS 2 parameter file for every node (as the launch file's params_file:=; "
                         "<robot_namespace> and namespaced keys work as in Nav2); default: the nodes' own files")
    up.add_argument("--use-sim-time", action="store_true", help="every node on /clock time (use_sim_time)")
    up.add_argument("--log-level", default="", choices=("", "debug", "info", "warn", "error", "fatal"),
                    help="every node's log level (default: info)")
    planner = up.add_argument_group("planner (default: scripted, with --planner-script)")
    planner.add_argument("--planner-script", type=Path,
                         help="recorded model responses for the scripted planner (a YAML file with turns:, or a "
                              "scenario file)")
    _planner_args(planner)
    ops = up.add_argument_group("operator surfaces")
    ops.add_argument("--mcp", action="store_true", help="serve the skills over MCP from the supervisor (docs/mcp.md)")
    ops.add_argument("--mcp-port", type=int, default=None,
                     help="MCP port (default: the harness config's mcp.port, 8770; 0: any free)")
    ops.add_argument("--dashboard", action="store_true", help="serve the live dashboard too (docs/dashboard.md)")
    ops.add_argument("--dashboard-port", type=int, default=8771, help="dashboard port (default 8771; 0: any free)")

    m = add_command(
        sub, "mission", help="send a mission to a running graph and follow it",
        description="Send a mission to the graph `robot-harness up` (or the launch file) runs, follow its "
                    "progress, and print the result. The mission is a natural-language goal, or, for programs, "
                    "an explicit contract (--contract FILE: YAML or JSON obligations) or a named mission template "
                    "(--template NAME --param KEY=VALUE ...), with the goal as an optional description. A "
                    "structured mission the supervisor finds invalid ends BLOCKED with every problem named by "
                    "field. Ctrl-C stops following, not the mission: stop it with `robot-harness stop`.",
        examples=['robot-harness mission "Go to office_storage and come back to dock." '
                  '--set limits.mission_timeout_s=60',
                  "robot-harness mission --contract contract.yaml --json",
                  "robot-harness mission --template inspect_and_return --param place=office_storage"],
        run=_mission, progress=True, notes=_FINAL_STATUS_NOTE,
        exit_codes=(ExitCode.NOT_SUCCEEDED, ExitCode.REFUSED, ExitCode.UNAVAILABLE))
    m.add_argument("goal", nargs="?", default="",
                   help="the natural-language goal (with --contract or --template: an optional description)")
    source = m.add_mutually_exclusive_group()
    source.add_argument("--contract", type=Path, metavar="FILE",
                        help="an explicit contract: a YAML or JSON file holding a list of obligations in the "
                             "scenario contract format (or a mapping with an `obligations` key)")
    source.add_argument("--template", default="", metavar="NAME",
                        help="a mission template of the supervisor (config/mission_templates.yaml), e.g. go_to, "
                             "inspect_and_return, deliver_message, patrol")
    m.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a template parameter (repeatable); a place list is comma-separated: waypoints=a,b")
    m.add_argument("--mission-id", default="", help="the mission id (default: a new one); sending it again is safe")
    namespace_arg(m)
    m.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="this mission's own budgets and timeouts: limits.* and the navigation timeouts "
                        "(e.g. limits.mission_timeout_s=60); anything else is the site's config and is refused")
    m.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the result (default 900)")
    m.add_argument("--owner", default=os.environ.get("USER", ""), help="who sends the mission (recorded)")
    m.add_argument("--owner-token", default=None,
                   help=f"secret that lets its holder answer this mission's approvals and questions "
                        f"(default ${TOKEN_ENV})")
    _require_success_arg(m)

    r = add_command(
        sub, "run", help="start sim + graph in this process, run one scenario, exit",
        description="Start the simulated robot and the harness graph in this process, run the scenario's "
                    "mission, stop everything, and print the timeline and the result (or the report as JSON).",
        examples=["robot-harness run --scenario scenarios/demo.yaml",
                  "robot-harness run --scenario scenarios/failed_navigation.yaml --journal /tmp/rh/journal.sqlite3 "
                  "--report /tmp/rh/report.json",
                  "robot-harness run --scenario scenarios/demo.yaml --require-success --json | jq .status"],
        run=_run, progress=True, notes=_FINAL_STATUS_NOTE,
        exit_codes=(ExitCode.NOT_SUCCEEDED, ExitCode.REFUSED, ExitCode.UNAVAILABLE, ExitCode.EVIDENCE))
    r.add_argument("--scenario", type=Path, required=True, help="the scenario file (docs/scenario.schema.json)")
    _run_args(r)

    d = add_command(
        sub, "demo", help="the inspection demo on the simulated robot with recorded model responses",
        description="`robot-harness run` on the shipped scenarios/demo.yaml: the quadruped inspects a room and "
                    "comes back, with recorded model turns (or a live model with --planner llm).",
        examples=["robot-harness demo",
                  "OPENAI_BASE_URL=http://127.0.0.1:11434/v1 robot-harness demo --planner llm --model qwen2.5:7b "
                  "--record /tmp/rh/demo.replay.jsonl",
                  "robot-harness demo --replay /tmp/rh/demo.replay.jsonl --require-success"],
        run=_run, progress=True, notes=_FINAL_STATUS_NOTE,
        exit_codes=(ExitCode.NOT_SUCCEEDED, ExitCode.REFUSED, ExitCode.UNAVAILABLE, ExitCode.EVIDENCE))
    _run_args(d)


def _require_success_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--require-success", action="store_true",
                   help="exit 1 unless the mission SUCCEEDED (for CI scripts; default: exit 0 for any final "
                        "status, which the output reports)")


def _run_args(p: argparse.ArgumentParser) -> None:
    _require_success_arg(p)
    p.add_argument("--journal", type=_journal_type, metavar="FILE|URL",
                   help=f"the journal to write: a SQLite file or a postgresql:// URL (default ${JOURNAL_ENV}, else "
                        "$ROBOT_HARNESS_RUNS/<time>/journal.sqlite3, $ROBOT_HARNESS_RUNS defaulting to runs/; with "
                        "a URL the bags and artifacts go to that folder)")
    p.add_argument("--report", type=Path, help="also write the JSON report to this file")
    namespace_arg(p)  # a fleet's database (--journal postgresql://...) needs the robot's namespace
    _planner_args(p.add_argument_group("planner (default: the scenario's recorded turns)"))


def _planner_args(g: Any) -> None:
    g.add_argument("--planner", choices=("scripted", "llm", "replay"), default=None,
                   help="llm: any OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY); "
                        "replay: a file recorded with --record (default: scripted, or replay with --replay)")
    g.add_argument("--model", default="", help="model name for --planner llm (default: $ROBOT_HARNESS_MODEL)")
    g.add_argument("--record", type=Path, help="with --planner llm: append every model turn to this replay file")
    g.add_argument("--replay", type=Path, help="serve the model turns recorded in this file (--planner replay)")


def _register_journal_commands(sub: Any) -> None:
    js = add_group(
        sub, "journal", help="read a journal: a mission's timeline, its events, its evidence",
        description="Read the journal (SQLite) a supervisor writes: `show` a mission as a timeline, `export` "
                    "its events, `verify` the evidence it cites. Safe beside a running supervisor.",
        examples=["robot-harness journal show --journal /tmp/rh/journal.sqlite3",
                  "robot-harness journal export --journal /tmp/rh/journal.sqlite3 --format csv --out events.csv",
                  "robot-harness journal verify --journal /tmp/rh/journal.sqlite3"])
    show = add_command(
        js, "show", help="a readable timeline of a mission",
        description="A mission's events as a timeline (contract, model turns, tool calls, actions, verdicts, "
                    "commit), or the list of missions; --json gives the events themselves.",
        examples=["robot-harness journal show                 # the last mission in the default journal",
                  "robot-harness journal show --journal /tmp/rh/journal.sqlite3 --mission list",
                  "robot-harness journal show --journal /tmp/rh/journal.sqlite3 --mission last --json"],
        run=_journal_show, exit_codes=(ExitCode.EVIDENCE,))
    _journal_arg(show)
    robot_arg(show)
    show.add_argument("--mission", default="last", help="mission id, or 'last' (default), or 'list'")

    ex = add_command(
        js, "export", help="export events as JSON lines or CSV",
        description="Every event (or one mission's) in the journal's own format: JSON lines that parse back "
                    "into records, CSV for a spreadsheet, or with --json one JSON array.",
        examples=["robot-harness journal export --journal /tmp/rh/journal.sqlite3 > events.jsonl",
                  "robot-harness journal export --journal /tmp/rh/journal.sqlite3 --format csv --out events.csv",
                  "robot-harness journal export --journal /tmp/rh/journal.sqlite3 --mission last --json"],
        run=_journal_export, exit_codes=(ExitCode.EVIDENCE,))
    _journal_arg(ex)
    robot_arg(ex, what="only the events this robot wrote (with --mission: one of its missions)")
    ex.add_argument("--mission", default="", help="only this mission id, or 'last' (default: every mission)")
    ex.add_argument("--format", choices=("jsonl", "csv"), default="jsonl", help="(default jsonl; --json: one array)")
    ex.add_argument("--out", type=Path, help="file to write (default stdout)")

    ver = add_command(
        js, "verify", help="re-check every piece of evidence a mission cites (bag messages, artifacts)",
        description="Re-read every bag message and re-hash every artifact a mission's receipts, verdicts and "
                    "commit cite; exit 5 if anything is missing or changed.",
        examples=["robot-harness journal verify --journal /tmp/rh/journal.sqlite3",
                  "robot-harness journal verify --journal /tmp/rh/journal.sqlite3 --mission last "
                  "--bags /tmp/rh/bags --json"],
        run=_journal_verify, exit_codes=(ExitCode.EVIDENCE,))
    _journal_arg(ver)
    robot_arg(ver, what="a mission of this robot (--mission last: its newest)")
    ver.add_argument("--mission", default="last", help="mission id, or 'last' (default)")
    ver.add_argument("--bags", type=Path, help="bag directory (default: bags/ beside the journal; for a database, "
                                               "beside the robot's files, $ROS_HOME/robot_harness/<robot>/bags)")


def _register_eval_commands(sub: Any) -> None:
    rp = add_command(
        sub, "replay", help="re-run verification and the commit gate over recorded missions; report diffs",
        description="Re-run the verifier and the commit gate over a recorded mission's journaled inputs, under "
                    "its own config or a changed one (--set), in milliseconds; report every verdict or commit "
                    "that differs. Several bags replay one after the other. With --scenario, judge a recording "
                    "of a robot the harness did not drive against the scenario's contract.",
        examples=["robot-harness replay /tmp/rh/bags/mission-1a2b3c4d5e6f/   # the journal is beside bags/",
                  "robot-harness replay --journal /tmp/rh/journal.sqlite3 --mission last "
                  "--set verification.xy_tolerance_m=0.1",
                  "robot-harness replay /tmp/rh/bags/*/ --json        # every mission in the folder"],
        run=_replay, progress=True, exit_codes=(ExitCode.NOT_SUCCEEDED, ExitCode.EVIDENCE),
        notes="--json: one bag gives its replay document; several give {\"identical\": ..., \"replays\": [...]}")
    rp.add_argument("bag", nargs="*", type=Path, help="mission bags (folder or .mcap) written by the harness")
    rp.add_argument("--journal", type=_journal_type, metavar="FILE|URL",
                    help=f"the journal, a file or a postgresql:// URL (default: beside each bag's bags/ folder, "
                         f"else ${JOURNAL_ENV}, else $ROS_HOME/robot_harness/journal.sqlite3)")
    robot_arg(rp, what="a mission of this robot (--mission last: its newest)")
    rp.add_argument("--mission", default="", help="mission id, or 'last' (default: the bag's mission)")
    rp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="change the harness config for the replay (e.g. a verifier tolerance)")
    rp.add_argument("--scenario", type=Path,
                    help="a recording of a robot the harness did not drive: judge this scenario's contract "
                         "against the bag's pose topic")
    rp.add_argument("--pose-topic", default="/amcl_pose", help="with --scenario (default /amcl_pose)")
    rp.add_argument("--artifacts", type=Path, help="look cited images up by file name here (a recording moved)")
    rp.add_argument("--decisions", action="store_true",
                    help="replay the decisions, not only the verdicts: re-run the mission runner on the mission's "
                         "decision tape (no robot, no model) and fail (exit 1) at the first event that differs; "
                         "with --set, report the first decision that changes and where the mission would end")

    rep = add_command(
        sub, "report", help="a self-contained HTML report of a mission for a person",
        description="One HTML page: goal, contract and verdicts with their evidence, a trajectory plot over the "
                    "places, the action timeline, the model's turns, and the evidence images with their sha256.",
        examples=["robot-harness report --journal /tmp/rh/journal.sqlite3 --out /tmp/rh/mission.html",
                  "robot-harness report mission-1a2b3c4d5e6f --journal /tmp/rh/journal.sqlite3",
                  "robot-harness report --journal /tmp/rh/journal.sqlite3 --mission last --json"],
        run=_report, exit_codes=(ExitCode.EVIDENCE,))
    rep.add_argument("mission_arg", nargs="?", metavar="MISSION", help="mission id, or 'last' (default)")
    _journal_arg(rep)
    robot_arg(rep, what="a mission of this robot (last: its newest)")
    rep.add_argument("--mission", default=None, help="the same as MISSION")
    rep.add_argument("--out", type=Path, help="the HTML file (default: report-<mission>.html here)")
    rep.add_argument("--artifacts", type=Path, help="look cited images up by file name here (a recording moved)")
    rep.add_argument("--bag", type=Path, default=None,
                     help="the mission's bag folder or .mcap for the plotted path (default: found beside the journal)")

    ev = add_command(
        sub, "eval", help="the fault-injection benchmark: every suite scenario under every harness mode",
        description="Run every scenario of the suite under every harness mode (direct, monitored, gated and the "
                    "ablations) and write table.md, results.json, runs.json and PNG plots to --out. The suite is "
                    "scenarios/eval (python scripts/make_eval_suite.py); docs/evaluation.md explains the numbers.",
        examples=["robot-harness eval --quick                       # the navigation and inspection tasks",
                  "robot-harness eval --out runs/eval --modes direct,gated",
                  "robot-harness eval --quick --json > results.json"],
        run=_eval, progress=True)
    ev.add_argument("--quick", action="store_true", help="the navigation and inspection tasks only (for CI)")
    ev.add_argument("--out", type=Path, default=Path("runs/eval"), help="results folder (default runs/eval)")
    ev.add_argument("--modes", default="", help="comma-separated subset of: direct, monitored, gated, gated-no-...")
    ev.add_argument("--scenarios", type=Path, help="a folder of scenario files (default scenarios/eval)")


# --------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console.for_args(args)
    try:
        with contextlib.redirect_stdout(console.stderr), _interruptible():
            return int(args.handler(args, console))
    except HarnessError as exc:
        # a refusal names its code (scripts and people grep for command_conflict, not_authorized, ...)
        message = exc.message if isinstance(exc, UsageError) else f"{exc.code}: {exc.message}"
        return _fail(console, exit_code_for(exc), message, {**exc.to_dict(), "message": exc.message})
    except Terminated:
        return _fail(console, ExitCode.TERMINATED, "terminated (SIGTERM)", {"error": "terminated"})
    except KeyboardInterrupt:
        return _fail(console, ExitCode.INTERRUPTED, "interrupted", {"error": "interrupted"})
    except BrokenPipeError:
        # the reader went away (| head): say nothing more on a closed pipe
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.PIPE
    except OSError as exc:  # a path the user gave that cannot be read or written, a full disk: not a bug
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(console, ExitCode.USAGE, f"{where}{exc.strerror or exc}",
                     {"error": "os_error", "errno": exc.errno, "path": exc.filename})
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a bug, reported as one
        if _is_journal_error(exc):
            return _fail(console, ExitCode.EVIDENCE, f"the journal cannot be read: {exc}",
                         {"error": "journal_read_failed"})
        console.progress.clear()
        console.stderr.write(_scrub(traceback.format_exc()))
        return _fail(console, ExitCode.BUG,
                     f"internal error in robot_harness {__version__}: {type(exc).__name__}: {exc}\n"
                     "this is a bug: please report it with the command line and the traceback above",
                     {"error": "internal_error"})
    finally:
        console.progress.clear()


class Terminated(KeyboardInterrupt):
    """SIGTERM: unwinds like Ctrl-C (graphs stop, the journal closes, a mission cut short is recorded)
    and exits 143 instead of dying mid-write."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt (exit 130) even in a process started in the
    background by a script, which inherits an ignored SIGINT; SIGTERM raises ``Terminated``
    (exit 143). ``up`` installs its own handlers (a stop signal is how it ends, with exit 0)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous_term = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)


def _is_journal_error(exc: BaseException) -> bool:
    """A storage driver's own error that reached the command (the journal wraps what it expects): SQLite's,
    or psycopg's for a journal database (only when psycopg is loaded: it never is for a file)."""
    import sqlite3

    psycopg = sys.modules.get("psycopg")
    return isinstance(exc, sqlite3.DatabaseError) or (psycopg is not None and isinstance(exc, psycopg.Error))


def _fail(console: Console, code: ExitCode, message: str, doc: dict[str, Any]) -> int:
    console.progress.clear()
    message = _scrub(message).rstrip()  # a database URL's password is never printed
    print(f"robot-harness: error: {message}", file=console.stderr)
    if console.json:
        with contextlib.suppress(OSError):
            console.write(json.dumps(_scrubbed({"message": message.splitlines()[0], **doc, "exit_code": int(code)}),
                                     indent=2, default=str) + "\n")
    return int(code)


# --------------------------------------------------------------------------- journal helpers

JOURNAL_ENV = "ROBOT_HARNESS_JOURNAL"
"""The journal every command uses when ``--journal`` is not given, a SQLite file or a ``postgresql://`` URL;
when it is unset too, ``$ROS_HOME/robot_harness/journal.sqlite3``."""

_SECRETS: set[str] = set()
"""Passwords of the database URLs this process was given: never printed (``_scrub``)."""


_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")


def journal_target(text: str) -> str | Path:
    """``--journal``'s type: a ``postgresql://`` (``postgres://``) URL as given (a ``Path`` would fold its
    ``//``), anything else a file path. The URL's password is remembered so no error prints it. Text that
    looks like another URL (``postgresql:/...``, ``mysql://...``) is a usage error, never a file name."""
    from .core.journal import check_database_url, is_database_url

    if is_database_url(text):
        _remember_secrets(text)
        check_database_url(text)  # the one rule, before any part of it is split off for a node's parameter
        return text
    if _URL_LIKE.match(text):
        _remember_secrets(text)
        raise UsageError(f"journal {_scrub(text)!r} is not a postgresql:// URL (nor a SQLite file's path)",
                         journal=_scrub(text))
    return Path(text)


def _journal_type(text: str) -> str | Path:
    """``journal_target`` for argparse (a bad target is its usage error, exit 2)."""
    try:
        return journal_target(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _remember_secrets(url: str) -> None:
    """Keep every spelling (as written, percent-decoded) of a URL's passwords (``core.journal.UrlParts``)."""
    from .core.journal import UrlParts

    _SECRETS.update(UrlParts.of(url).secrets())


def _scrub(text: str) -> str:
    """``text`` with every remembered password replaced by ``***`` (longest first): anywhere, or, one of
    under four characters, where a URL holds a password (after ``:`` or ``=``, before ``@``, ``&`` or
    the end), so that ``p`` does not take every p out of the message."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
        else:
            text = re.sub(rf"(?<=[:=]){re.escape(secret)}(?=[@&\s\"']|$)", "***", text)
    return text


def _scrubbed(value: Any) -> Any:
    """``_scrub`` over every string of a JSON-ready document."""
    if isinstance(value, str):
        return _scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrubbed(v) for v in value]
    return value


def journal_arg(p: argparse.ArgumentParser, *, what: str = "the journal",
                default: str = f"${JOURNAL_ENV}, else $ROS_HOME/robot_harness/journal.sqlite3") -> None:
    """``--journal FILE|URL`` (default ``$ROBOT_HARNESS_JOURNAL``, else the supervisor's default file)."""
    p.add_argument("--journal", type=_journal_type, metavar="FILE|URL",
                   help=f"{what}: a SQLite file or a postgresql:// URL (a fleet's database); default {default}")


_journal_arg = journal_arg  # the name command modules import


def robot_arg(p: argparse.ArgumentParser, *,
              what: str = "only this robot's missions (default: every robot's)") -> None:
    """``--robot NAME``: a robot of a fleet's journal, by its namespace (``robot1``, ``/robot1``; ``/`` for a
    robot without one)."""
    p.add_argument("--robot", default=None, metavar="NAME",
                   help=f"{what}; NAME is the robot's namespace: robot1 or /robot1, '/' for a robot without one")


def robot_of(args: argparse.Namespace) -> str | None:
    """``--robot`` as a robot id (None: every robot); a name that is not a namespace is a usage error."""
    from .core.journal import robot_id_of

    given = getattr(args, "robot", None)
    return None if given is None else robot_id_of(given)


def journal_target_of(given: str | Path | None) -> str | Path:
    """The journal a command means: ``--journal``, else ``$ROBOT_HARNESS_JOURNAL``, else the supervisor's
    default file. A URL stays a string, a file is a ``Path``."""
    from .core.journal import default_journal_path

    if given is not None and str(given):
        return given if isinstance(given, Path) else journal_target(str(given))
    env = os.environ.get(JOURNAL_ENV, "").strip()
    return journal_target(env) if env else default_journal_path()


def _journal_path(given: str | Path | None) -> str | Path:
    """The journal a command reads: a database URL as it is, or a file that must exist (a usage error)."""
    target = journal_target_of(given)
    if isinstance(target, str):
        return target
    if not target.is_file():
        if given:
            hint = ""
        elif os.environ.get(JOURNAL_ENV, "").strip():
            hint = f" (from ${JOURNAL_ENV})"
        else:
            hint = " (pass --journal PATH, or run a mission first)"
        raise UsageError(f"no journal at {target}{hint}", path=str(target))
    return target


def graph_journal(target: str | Path) -> str:
    """The journal as the supervisor's ``journal_path`` parameter (``up``, ``run``): a database URL without
    its password, which goes to this process's ``$PGPASSWORD`` instead (libpq reads it, and the in-process
    nodes share the environment). A node's parameters are readable by anyone on the ROS domain (``ros2
    param get``); the environment is not."""
    from .core.journal import UrlParts, is_database_url

    text = str(target)
    if not is_database_url(text):
        return text
    url, password = UrlParts.of(text).without_password()
    if password:
        os.environ["PGPASSWORD"] = password
    return url


@contextlib.contextmanager
def open_journal(given: str | Path | None, *, robot_id: str = "") -> Iterator[Any]:
    """The journal ``--journal`` (or ``$ROBOT_HARNESS_JOURNAL``, or the default file) names, set up, and
    closed again: the one way every command opens one (``core.journal.open_journal``: a SQLite file or a
    PostgreSQL database). ``robot_id``: the robot its writes are for, whose view of leases it has. A missing
    file is a usage error; an unreachable database a ``JournalReadError`` (exit 5)."""
    from .core.clock import IdGenerator, SystemClock
    from .core.journal import open_journal as open_target

    journal = open_target(_journal_path(given), clock=SystemClock(), ids=IdGenerator(None), robot_id=robot_id)
    try:
        yield journal
    finally:
        journal.close()


def _mission_id(journal: Any, spec: str, missions: list[dict[str, Any]] | None = None, *,
                robot: str | None = None) -> str:
    """A mission id the journal knows (of ``robot``, when given), or its newest for ``last``."""
    missions = journal.missions(robot_id=robot) if missions is None else missions
    whose = "" if robot is None else f" of robot {robot or '/'}"
    if spec == "last":
        if not missions:
            raise UsageError(f"the journal {journal.path} has no missions{whose}",
                             **({} if robot is None else {"robot": robot}))
        return missions[-1]["mission_id"]
    if not any(m["mission_id"] == spec for m in missions):
        flag = "" if robot is None else f" --robot {robot or '/'}"
        raise UsageError(f"no mission {spec!r}{whose} in {journal.path} (robot-harness journal show --journal "
                         f"{journal.path}{flag} --mission list lists them)", mission_id=spec)
    return spec


def _pairs(items: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out.append((k, v))
    return out


# --------------------------------------------------------------------------- journal


def _journal_show(args: argparse.Namespace, console: Console) -> int:
    from .core.timeline import render_timeline

    robot = robot_of(args)
    with open_journal(args.journal) as journal:
        missions = journal.missions(robot_id=robot)
        if args.mission == "list":
            from .core.mission_view import live_status, pending_interactions
            from .core.records import EventType

            # An unfinished mission reads RUNNING, or WAITING_USER while an operator interaction is pending.
            waiting = pending_interactions(journal.events(types=[EventType.INTERACTION_REQUESTED,
                                                                 EventType.INTERACTION_RESOLVED]))
            missions = [{**m, "status": live_status(m.get("status"), pending_interactions=waiting.get(m["mission_id"], 0)),
                         "finished": m.get("status") is not None} for m in missions]
            fleet = any(m.get("robot_id") for m in missions)  # a robot column only where robots have names
            width = max((len(m.get("robot_id") or "/") for m in missions), default=0)
            console.result(missions, lambda: "\n".join(
                f"{m['mission_id']}  " + (f"{m.get('robot_id') or '/':<{width}}  " if fleet else "")
                + f"{m.get('status') or '-':<10} {m.get('goal') or ''}" for m in missions)
                or ("no missions" + ("" if robot is None else f" of robot {robot or '/'}")))
            return ExitCode.OK
        mid = _mission_id(journal, args.mission, missions, robot=robot)
        events = journal.events(mission_id=mid)
    if not events:
        raise UsageError(f"no events for mission {mid}", mission_id=mid)
    console.result([_event_doc(e) for e in events], lambda: render_timeline(events))
    return ExitCode.OK


def _event_doc(event: Any) -> Any:
    from .core.records import to_json

    return json.loads(to_json(event))


def _journal_export(args: argparse.Namespace, console: Console) -> int:
    from .core.timeline import export_events

    robot = robot_of(args)
    with open_journal(args.journal) as journal:
        if args.mission:  # one mission (of the robot), all its events, whoever wrote them
            events = journal.events(mission_id=_mission_id(journal, args.mission, robot=robot))
        else:
            events = journal.events(robot_id=robot)
    if args.json:
        text = json.dumps([_event_doc(e) for e in events], indent=1) + "\n"
    else:
        text = export_events(events, args.format)
    if args.out:
        _check_writable(args.out, "--out")
        args.out.write_text(text)
        console.info(f"{len(events)} event(s) written to {args.out}")
    else:
        console.write(text)
    return ExitCode.OK


def _journal_verify(args: argparse.Namespace, console: Console) -> int:
    from .core.journal import local_state_path
    from .evidence.audit import audit_mission

    robot = robot_of(args)
    with open_journal(args.journal) as journal:
        mid = _mission_id(journal, args.mission, robot=robot)
        events = journal.events(mission_id=mid)
        whose = events[0].robot_id if events else ""
        bags = args.bags or _bag_root(events, local_state_path(journal_target_of(args.journal), whose).parent / "bags")
    if not events:
        raise UsageError(f"no events for mission {mid}", mission_id=mid)
    report = audit_mission(events, bag_dir=bags)

    def text() -> str:
        lines = [f"{'ok  ' if c.ok else 'FAIL'} {c.id}" + (f"  ({c.problem})" if c.problem else "")
                 + f"  cited by {', '.join(c.cited_by)}" for c in report.checks]
        lines += [f"bag  {note}" for note in report.notes]
        unfinalised = report.unfinalised
        lines.append(f"{len(report.checks)} evidence item(s) checked for mission {mid}: "
                     + ("all present and unchanged" if report.ok else f"{len(report.failures)} missing or changed")
                     + (f"; {len(unfinalised)} bag(s) unfinalised (an interrupted recording, read by a linear "
                        "scan; the next `robot-harness up` finalises it)" if unfinalised else ""))
        return "\n".join(lines)

    console.result({**report.model_dump(mode="json"), "ok": report.ok, "notes": list(report.notes)}, text)
    return ExitCode.OK if report.ok else ExitCode.EVIDENCE


def _bag_root(events: Sequence[Any], beside: Path) -> Path:
    """Where a mission's bags are: ``beside`` the journal (its robot's files, for a database) when that
    folder holds the mission's, else the root of the bag its end record names (``<root>/<mission>/<mission>.mcap``:
    a run that kept its bags elsewhere), else ``beside`` (where verify then says they are missing)."""
    from .core.payloads import MissionFinished, payload_of
    from .core.records import EventType

    mission_id = events[0].mission_id if events else ""
    if (beside / mission_id).is_dir() if mission_id else beside.is_dir():
        return beside
    end = next((e for e in reversed(events) if e.type is EventType.MISSION_FINISHED), None)
    try:
        bag = payload_of(end, MissionFinished).bag if end is not None else None
    except HarnessError:  # an end record this harness cannot read names no bag
        bag = None
    recorded = Path(bag.path) if bag is not None and bag.path else None
    return recorded.parent.parent if recorded is not None and recorded.is_file() else beside


# --------------------------------------------------------------------------- replay, report, eval


def _replay(args: argparse.Namespace, console: Console) -> int:
    bags: list[Path] = list(args.bag)
    if args.scenario is not None:
        return _replay_scenario(args, console, bags)
    if len(bags) > 1 and args.mission:
        raise UsageError("--mission names one mission; with several bags each bag replays its own")
    robot = robot_of(args)
    targets: list[tuple[str | Path | None, str, Path | None]] = []  # (journal, mission, bag folder)
    for bag in bags:
        bag = bag.resolve()
        bag_dir = bag if bag.is_dir() else bag.parent
        if not bag_dir.is_dir() or not bag.exists():
            raise UsageError(f"no bag at {bag}")
        # <journal dir>/bags/<mission>/<mission>.mcap; a fleet's robot keeps its bags beside no journal file
        journal: str | Path | None = args.journal or bag_dir.parent.parent / "journal.sqlite3"
        if args.journal is None and not Path(journal).is_file() and os.environ.get(JOURNAL_ENV, "").strip():
            journal = journal_target_of(None)
        elif args.journal is None and not Path(journal).is_file():
            raise UsageError(
                f"{bag} has no harness journal beside it (looked for {journal}): replaying a mission needs "
                "its journal (--journal PATH), and a recording the harness did not make needs a contract "
                "to judge it against (--scenario FILE, with --pose-topic if it is not /amcl_pose)",
                bag=str(bag), journal=str(journal))
        targets.append((journal, args.mission or bag_dir.name, bag_dir))
    if not targets:
        targets.append((args.journal, args.mission or "last", None))
    overrides = _overrides(args.set)
    if args.decisions:
        return _replay_decisions(targets, overrides, console, robot=robot)
    progress = console.progress
    reports = []
    for i, (journal_path, mission, bag_dir) in enumerate(targets, 1):
        if len(targets) > 1:
            progress.update(f"[{i}/{len(targets)}] replaying {mission}", key=str(i))
        reports.append(_replay_one(journal_path, mission, overrides=overrides, artifacts=args.artifacts,
                                   bag_dir=bag_dir, robot=robot))
    identical = all(r.identical for r in reports)
    if len(reports) == 1:
        doc: Any = reports[0].as_dict()
    else:
        doc = {"identical": identical, "replays": [r.as_dict() for r in reports]}
        differ = sum(not r.identical for r in reports)
        progress.done(f"replayed {len(reports)} missions in {progress.elapsed():.1f} s: "
                      + ("every verdict replays the same" if identical else f"{differ} differ"))
    console.result(doc, lambda: "\n".join(_replay_text(r) for r in reports))
    return ExitCode.OK if identical else ExitCode.NOT_SUCCEEDED


def _replay_decisions(targets: Sequence[tuple[str | Path | None, str, Path | None]], overrides: dict[str, Any],
                      console: Console, *, robot: str | None = None) -> int:
    """``replay --decisions``: each mission re-run on its tape; exit 1 when one decides otherwise."""
    from .core.errors import NondeterminismError
    from .decision_replay import replay_journal_mission, what_if_journal_mission

    docs: list[dict[str, Any]] = []
    for journal_path, mission, _bag in targets:
        path = _journal_path(journal_path)
        with open_journal(path) as j:
            mid = _mission_id(j, mission, robot=robot)
        if overrides:
            docs.append(what_if_journal_mission(path, mid, overrides=overrides).as_dict())
            continue
        try:
            docs.append(replay_journal_mission(path, mid).as_dict())
        except NondeterminismError as exc:
            docs.append({"mission_id": mid, "same_decisions": False, "difference": exc.message,
                         **{k: v for k, v in exc.details.items() if isinstance(v, (str, int, float))}})

    def text(doc: dict[str, Any]) -> str:
        mid = doc["mission_id"]
        if "final_status" in doc:
            change = doc["first_change"] or "no decision changed"
            end = f"it would end {doc['final_status']}" if doc["final_status"] != "undetermined" else (
                f"where it would end is undetermined: {doc['left_tape']}")
            note = f" (note: {doc['note']})" if doc.get("note") else ""
            return f"mission {mid} (recorded {doc['recorded_status']}), what if: {change}; {end}{note}"
        if doc["same_decisions"]:
            return (f"mission {mid}: same decisions ({doc['events']} events, {doc['readings']} readings) in "
                    f"{doc['replay_s'] * 1000:.1f} ms: {doc['speed_ratio']:.0f}x real time")
        return f"mission {mid}: NONDETERMINISM: {doc['difference']}"

    console.result(docs[0] if len(docs) == 1 else {"replays": docs}, lambda: "\n".join(text(d) for d in docs))
    same = all(d.get("same_decisions", False) or "final_status" in d for d in docs)
    return ExitCode.OK if same else ExitCode.NOT_SUCCEEDED


def _overrides(items: Sequence[str]) -> dict[str, Any]:
    from .core.config import dotted_overrides

    return dotted_overrides(_pairs(items))


def _replay_one(journal_path: str | Path | None, mission: str, *, overrides: dict[str, Any], artifacts: Path | None,
                bag_dir: Path | None = None, robot: str | None = None) -> Any:
    from .evidence.replay import replay_mission

    with open_journal(journal_path) as j:
        mid = _mission_id(j, mission, robot=robot)
        return replay_mission(j, mid, overrides=overrides, artifacts_dir=artifacts, bag_dir=bag_dir)


def _replay_text(report: Any) -> str:
    lines = []
    for v in report.verdicts:
        state = "same" if not v.diffs else "DIFFERS: " + "; ".join(v.diffs)
        lines.append(f"seq {v.seq} {v.recorded_id}: recorded {v.recorded}"
                     f"{' (committed)' if v.recorded_committed else ''}, replayed {v.replayed}"
                     f"{' (committed)' if v.replayed_committed else ''} - {state}")
    mission = report.mission_id
    if not report.verdicts:
        lines.append(f"mission {mission}: no replayable verdict" + (
            f" ({report.skipped} recorded before requests were journaled)" if report.skipped else ""))
    lines.append(f"mission {mission}: {report.bag_evidence_checked} cited bag message(s) checked in "
                 f"{report.bag_dir or 'no bag'}")
    lines.append(f"mission {mission}: " + ("every verdict replays the same" if report.identical else "verdicts differ"))
    return "\n".join(lines)


def _replay_scenario(args: argparse.Namespace, console: Console, bags: list[Path]) -> int:
    from .core.scenario import load_scenario
    from .evidence.replay import replay_bag

    if not bags:
        raise UsageError("--scenario needs the BAG to judge")
    scenario = load_scenario(args.scenario)
    results = []
    for i, bag in enumerate(bags, 1):
        if len(bags) > 1:
            console.progress.update(f"[{i}/{len(bags)}] judging {bag}", key=str(i))
        results.append(replay_bag(bag, scenario, pose_topic=args.pose_topic).as_dict())

    def text() -> str:
        lines = []
        for out in results:
            lines.append(f"{out['poses']} poses on {out['pose_topic']} over {out['span_s']} s: {out['goal_verdict']}")
            lines += [f"  {st['obligation']} {st['verdict']}: {st['reason']}" for st in out["steps"]]
            lines += [f"  nav2 goal {g['goal_id'][:8]}: {g['status']}" for g in out.get("nav_goals", [])]
            lines += [f"  note: {n}" for n in out.get("notes", [])]
        return "\n".join(lines)

    console.result(results[0] if len(results) == 1 else {"replays": results}, text)
    return ExitCode.OK


def _report(args: argparse.Namespace, console: Console) -> int:
    from .evidence.report import render_report

    if args.mission_arg and args.mission and args.mission_arg != args.mission:
        raise UsageError(f"two missions given ({args.mission_arg} and --mission {args.mission}): give one")
    robot = robot_of(args)
    with open_journal(args.journal) as j:
        mission = _mission_id(j, args.mission_arg or args.mission or "last", robot=robot)
        page = render_report(j, mission, artifacts_dir=args.artifacts, bag=args.bag)
    out = args.out or Path(f"report-{mission}.html")
    _check_writable(out, "--out")
    out.write_text(page)
    console.result({"mission_id": mission, "report": str(out), "bytes": len(page.encode())},
                   f"report: {out} ({len(page) // 1024} KiB, self-contained)")
    return ExitCode.OK


def _eval(args: argparse.Namespace, console: Console) -> int:
    import tempfile

    from .eval.run import ALL_MODES, SUITE_DIR, load_suite, run_suite, table, write_outputs

    modes = [m.strip() for m in args.modes.split(",") if m.strip()] or list(ALL_MODES)
    unknown = [m for m in modes if m not in ALL_MODES]
    if unknown:
        raise UsageError(f"unknown mode(s) {unknown}; known: {list(ALL_MODES)}")
    try:
        scenarios = load_suite(args.scenarios or SUITE_DIR, quick=args.quick)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    progress = console.progress
    started = time.monotonic()

    def step(i: int, n: int, r: Any) -> None:
        spent = time.monotonic() - started
        eta = spent / i * (n - i)
        progress.update(f"[{i}/{n}] {spent:5.0f}s, ~{eta:.0f}s left  {r.mode:<26} {r.scenario}", key=str(i))

    with tempfile.TemporaryDirectory(prefix="robot_harness-eval-") as work:
        results = run_suite(scenarios, modes, workdir=Path(work), progress=step)
    report = write_outputs(results, args.out, wall_s=time.monotonic() - started, quick=args.quick)
    progress.done(f"eval: {report['scenarios']} scenarios x {len(modes)} modes = {report['runs']} runs in "
                  f"{report['wall_s']} s; results in {args.out}")
    console.result(report, lambda: table(report["modes"]) + "\n" + (
        f"{report['scenarios']} scenarios, {report['runs']} runs in {report['wall_s']} s; results in {args.out} "
        "(table.md, results.json, runs.json, modes.png, false_completion_by_fault.png)"))
    return ExitCode.OK


# --------------------------------------------------------------------------- graph commands


def _planner_overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    planner = args.planner or ("replay" if args.replay else "scripted")
    if planner == "scripted":
        if args.record or args.replay or args.model:
            raise UsageError("--model and --record need --planner llm (--replay FILE serves a recording)")
        return {}
    if planner == "replay":
        if not args.replay:
            raise UsageError("--planner replay needs --replay FILE")
        if args.record or args.model:
            raise UsageError("--model and --record need --planner llm; a replay serves the recorded turns")
        if not args.replay.is_file():
            raise UsageError(f"no replay file at {args.replay}")
        return {"planner": {"backend": "replay", "replay_file": str(args.replay.resolve())}}
    if args.replay:
        raise UsageError("--replay serves a recording instead of the model: drop --planner llm "
                         "(or record with --record FILE)")
    out: dict[str, Any] = {"backend": "llm", **({"model": args.model} if args.model else {})}  # else the file's
    if args.record:
        _check_writable(args.record, "--record")
        out["record_file"] = str(args.record.resolve())
    return {"planner": out}


def _run(args: argparse.Namespace, console: Console) -> int:
    from .core.errors import JournalWriteError
    from .core.scenario import load_scenario
    from .runner import run_scenario

    planner = _planner_overrides(args)
    scenario = load_scenario(_demo_scenario() if args.command == "demo" else args.scenario)
    out = Path(os.environ.get("ROBOT_HARNESS_RUNS", "runs")) / time.strftime("%Y%m%d-%H%M%S")
    given = args.journal or os.environ.get(JOURNAL_ENV, "").strip()
    journal = journal_target_of(given) if given else out / "journal.sqlite3"
    files: Path | None = None
    # Before the robot moves: a journal or a report that cannot be written is said now, not after the mission.
    if isinstance(journal, str):  # a database: reachable now, or exit 5; the run's bags and artifacts in out/
        with open_journal(journal):
            pass
        files = out / "artifacts"
        _check_writable(files, "the run's folder", error=JournalWriteError)
    else:
        _check_writable(journal, "--journal", error=JournalWriteError)
    if args.report:
        _check_writable(args.report, "--report")
    console.info(f"mission: {scenario.goal}")
    progress = console.progress
    namespace = namespace_of(args)  # a bad namespace is a usage error before anything starts
    report = run_scenario(scenario, journal_path=graph_journal(journal) if files else journal,
                          report_path=args.report, on_feedback=progress.mission, extra_overrides=planner,
                          artifacts_dir=files, namespace=namespace)
    progress.done(f"{report['mission_id']}: {report['status']} after {progress.elapsed():.1f} s; "
                  f"journal {report['journal']}")
    console.result(report, lambda: _run_text(report, args.report, journal))
    if report.get("refusal"):
        print(f"robot-harness: error: mission {report['mission_id']} was not run: {report['summary']}",
              file=console.stderr)
        return ExitCode.REFUSED
    if not report.get("event_counts", {}).get("MISSION_FINISHED"):
        # the journal could not take the mission's end (locked, full, unwritable): what it holds is not the record
        print(f"robot-harness: error: the journal holds no end for mission {report['mission_id']}: "
              f"{report['summary']}", file=console.stderr)
        return ExitCode.EVIDENCE
    if _model_never_answered(report["status"], report.get("summary") or "", console):
        return ExitCode.UNAVAILABLE
    return mission_exit_code(report["status"], require_success=args.require_success)


_MODEL_UNAVAILABLE = re.compile(r"llm_unavailable: ([^;]*)")
"""How a mission's summary says the planner's model endpoint never answered (the LLM client's error code)."""


def _model_never_answered(status: str, summary: str, console: Console) -> bool:
    """A mission that did not succeed because its model endpoint never answered: said on stderr (exit 4)."""
    model = _MODEL_UNAVAILABLE.search(summary)
    if model is None or status == "SUCCEEDED":
        return False
    print(f"robot-harness: error: the model endpoint did not answer: {model.group(1)}", file=console.stderr)
    return True


def _check_writable(path: Path, what: str, *, error: type[HarnessError] = UsageError) -> None:
    """``path`` can be created or written (its folder is made); ``error`` naming the cause if not
    (a ``UsageError``; for the journal a ``JournalWriteError``, exit 5 as when the supervisor finds it)."""
    target = path.expanduser()
    if target.is_dir():
        raise error(f"{what} {path} is a directory, not a file", field=what, path=str(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise error(f"{what} {path}: cannot create its folder {target.parent}: {exc.strerror or exc}",
                    field=what, path=str(path), errno=exc.errno) from None
    probe = target if target.exists() else target.parent
    if not os.access(probe, os.W_OK) or _read_only_fs(target.parent):
        raise error(f"{what} {path}: {probe} is not writable"
                    + (" (a read-only file system)" if _read_only_fs(target.parent) else ""),
                    field=what, path=str(path))


def _read_only_fs(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _run_text(report: dict[str, Any], report_path: Path | None, journal: str | Path) -> str:
    """The timeline, the calls and where the records are; then, last, what the mission came to:
    status, contract, the verifier's verdict and the evidence behind it. ``journal``: the run's (the
    report names it with a database URL's password redacted)."""
    from .core.timeline import render_timeline

    with open_journal(journal) as j:
        events = j.events(mission_id=report["mission_id"])
    lines = [render_timeline(events), "", "tool calls:"]
    for call in report["tool_calls"]:
        res = call.get("result") or {}
        state = f" -> {call['action_state']}" if call.get("action_state") else ""
        lines.append(f"  {call['name']}({json.dumps(call['arguments'])}): {res.get('status')}{state}")
    if not report["tool_calls"]:
        lines.append("  none")
    lines.append(f"journal: {report['journal']} (evidence at seqs {report['evidence_seqs']})")
    bag = report.get("bag") or {}
    if bag.get("path"):
        lines.append(f"bag:     {bag['path']} ({bag.get('messages', 0)} messages"
                     + (f", {bag['dropped']} dropped" if bag.get("dropped") else "") + ")")
    if report_path:
        lines.append(f"report:  {report_path}")
    lines += ["", f"status:  {report['status']}", f"summary: {report['summary']}"]
    contract = report.get("contract")
    if contract:
        lines.append(f"contract {contract['contract_id']} (revision {contract['revision']}, "
                     f"{contract['compiler']} compiler):")
        lines += [f"  {o['id']} {o['kind']}: {o['description']}" for o in contract["obligations"]]
    verdict = report.get("verdict")
    if verdict:
        lines.append(f"verdict {verdict['verdict_id']} by {verdict['verifier']}: {verdict['goal_verdict']}"
                     f" (contract revision {verdict['contract_revision']}, state version {verdict['state_version']})")
        lines += [f"  {st['obligation_id']} {st['verdict']}: {st['reason']}" for st in verdict["steps"]]
    else:
        lines.append("verdict: none")
    if report.get("commit"):
        lines.append(f"committed by the gate: {report['commit']['commit_id']}")
    lines.append(f"evidence ids: {', '.join(report.get('evidence_ids') or []) or 'none'}")
    return "\n".join(lines)


def _demo_scenario() -> Path:
    candidate = Path(__file__).resolve().parent.parent / "scenarios" / "demo.yaml"
    if candidate.is_file():
        return candidate
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory("robot_harness")) / "scenarios" / "demo.yaml"


def _up(args: argparse.Namespace, console: Console) -> int:
    from .bringup import BringUp, config_dir

    overrides: dict[str, dict[str, Any]] = {"supervisor": {}}
    if args.journal or os.environ.get(JOURNAL_ENV, "").strip():  # else the config's journal.url, else the file
        overrides["supervisor"]["journal_path"] = graph_journal(journal_target_of(args.journal))
    cfg = args.harness_config or (config_dir() / "harness.yaml")
    overrides["supervisor"]["harness_config_file"] = str(cfg)
    overrides.update(_planner_overrides(args))
    if args.planner_script:
        if (args.planner or "scripted") != "scripted" or args.replay:
            raise UsageError("--planner-script is for the scripted planner; drop it with --planner llm or replay")
        overrides.setdefault("planner", {})["script_file"] = str(args.planner_script.resolve())
    if args.mcp:  # the config file's mcp section (host, token, budgets) stands; this only turns it on
        mcp = {"enabled": True, **({"port": args.mcp_port} if args.mcp_port is not None else {})}
        overrides["supervisor"]["harness_config_json"] = json.dumps({"mcp": mcp})
    graph = BringUp(use_sim=not args.no_sim, params_dir=args.params_dir, overrides=overrides, namespace=args.namespace,
                    params_file=args.params_file, use_sim_time=args.use_sim_time, log_level=args.log_level)
    graph.preflight_s = 2.0  # a graph already in this namespace: refuse before the robot or any node starts
    graph.with_manager = True  # lifecycle_manager/manage_nodes and is_active, as under the launch file
    try:
        # Up without a fresh pose is still up: the supervisor refuses missions with the reason
        # (journaled) until localization publishes, then admits them.
        graph.start(require_ready=False, ready_timeout_s=5.0)
    except BaseException:  # Ctrl-C or a failure while starting: nothing may be left running
        graph.stop()
        raise
    stop = {"flag": False}
    try:
        if args.mcp:
            url = graph.supervisor.mcp_url
            print(f"MCP server at {url}" if url else
                  f"robot-harness: warning: MCP server not started: {graph.supervisor.mcp_error or 'see the log'}; "
                  "missions still run through the Mission action", file=console.stderr, flush=True)
        if args.dashboard:
            _start_dashboard(graph, args.dashboard_port, console, args, cfg)
        # Explicit handlers, installed before "graph up" is said (a Ctrl-C right after it must stop the
        # graph, not escape past it): a process started in the background by a script inherits an
        # ignored SIGINT, and Ctrl-C/`kill -INT` must still stop it.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.__setitem__("flag", True))
        print(f"robot_harness graph up (sim={'on' if not args.no_sim else 'off'}, namespace "
              f"{graph.namespace or '/'}); journal "
              f"{graph.supervisor.journal_path}", file=console.stderr, flush=True)
        print("send missions with: robot-harness mission \"<goal>\"  (Ctrl-C to stop)", file=console.stderr,
              flush=True)
        if graph.unready:
            print(f"robot-harness: warning: the world is not observable yet ({'; '.join(graph.unready.values())}); "
                  "missions are refused, with that reason, until it is", file=console.stderr, flush=True)
        while not stop["flag"]:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        graph.stop()
    return ExitCode.OK


def _start_dashboard(graph: Any, port: int, console: Console, args: argparse.Namespace, cfg: Path) -> None:
    """The dashboard in this process, on a node of the graph (stopped with it), over the supervisor's journal
    (whose database URL the supervisor shows only redacted: it is taken from where the supervisor took it).
    Its writes reach this graph's supervisor only: it is told the graph's robot, refuses Stop, Send and
    answers for another robot's missions, and lists this robot's missions first in a fleet's journal."""
    from rclpy.node import Node

    from .core.journal import is_database_url, robot_id_of
    from .operator.dashboard import TOKEN_ENV as DASH_TOKEN_ENV, RosOperatorPort, serve

    journal: str | Path = graph.supervisor.journal_path
    if args.journal or os.environ.get(JOURNAL_ENV, "").strip():
        journal = journal_target_of(args.journal)
    elif is_database_url(journal):
        from .core.config import load_harness_config

        journal = journal_target(load_harness_config(file_text=Path(cfg).read_text()).journal.url)
    node = Node("robot_harness_dashboard", context=graph.context, namespace=graph.namespace or "/")
    operator = RosOperatorPort(node, journal_path=journal, mission_action=namespaced(args, "/robot_harness/mission"),
                               stop_service=namespaced(args, "/supervisor/stop"))
    handle = serve(journal_path=journal, operator=operator, port=port, token=os.environ.get(DASH_TOKEN_ENV, ""),
                   operator_robot=robot_id_of(graph.namespace))
    graph.add_node(node, lambda: (handle.stop(), operator.destroy(), node.destroy_node()))
    print(f"dashboard at {handle.url}", file=console.stderr, flush=True)


def _mission(args: argparse.Namespace, console: Console) -> int:
    import uuid

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from .client import MissionClient

    overrides = dict(_pairs(args.set))
    structured = _mission_source(args)
    mission_id = args.mission_id or f"mission-{uuid.uuid4().hex[:12]}"
    token = args.owner_token if args.owner_token is not None else os.environ.get(TOKEN_ENV, "")
    ctx = rclpy.Context()
    # no rclpy SIGINT handler: Ctrl-C must raise KeyboardInterrupt here (exit 130)
    rclpy.init(context=ctx, signal_handler_options=SignalHandlerOptions.NO)
    client = MissionClient(ctx, action_name=namespaced(args, "/robot_harness/mission"))
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(client.node)
    t = threading.Thread(target=ex.spin, daemon=True)
    t.start()
    progress = console.progress
    progress.update(f"[{progress.elapsed():6.1f}s] {mission_id} waiting for the mission server", key="wait")
    followed: list[Any] = []

    def on_feedback(fb: Any) -> None:
        followed.append(True)
        progress.mission(fb)

    def on_notice(text: str) -> None:  # the supervisor lost and found again, the request re-sent
        progress.update(f"[{progress.elapsed():6.1f}s] {text}", key="follow")

    try:
        accepted, result = client.send(args.goal, mission_id=mission_id, overrides=overrides,
                                       timeout_s=args.timeout, server_timeout_s=min(30.0, args.timeout),
                                       on_feedback=on_feedback, on_notice=on_notice, owner=args.owner,
                                       owner_token=token, **structured)
    except KeyboardInterrupt:
        if followed:
            progress.clear()
            print(f"robot-harness: stopped following {mission_id}; the mission keeps running on the supervisor "
                  f"(robot-harness stop --mission {mission_id})", file=console.stderr)
        raise
    finally:
        progress.clear()
        ex.shutdown(timeout_sec=2.0)
        t.join(timeout=5.0)
        client.destroy()
        rclpy.try_shutdown(context=ctx)
    if not accepted:
        from .core.errors import MissionRefused

        raise MissionRefused(f"mission {mission_id}: the supervisor rejected the request without a reason (it is "
                             "not configured: no journal; see its log)", mission_id=mission_id, refusal="rejected")
    if getattr(result, "refusal", ""):
        from .core.errors import MissionRefused

        raise MissionRefused(f"mission {result.mission_id or mission_id} was not run: {result.summary}",
                             mission_id=result.mission_id or mission_id, refusal=result.refusal)
    out = {"mission_id": result.mission_id, "status": result.status, "summary": result.summary,
           "evidence_seqs": list(result.evidence_seqs), "evidence_ids": list(result.evidence_ids),
           "verdict_id": result.verdict_id, "contract_id": result.contract_id,
           "journal": result.journal_path, "bag": result.bag_path}
    progress.done(f"{out['mission_id']}: {out['status']} after {progress.elapsed():.1f} s")
    console.result(out, f"mission: {out['mission_id']}\nstatus:  {out['status']}\nsummary: {out['summary']}"
                        f"\nverdict: {out['verdict_id'] or 'none'}\njournal: {out['journal']}"
                        f"\nbag:     {out['bag'] or 'not recorded'}")
    if _model_never_answered(out["status"], out["summary"] or "", console):
        return ExitCode.UNAVAILABLE
    return mission_exit_code(out["status"], require_success=args.require_success)


def _mission_source(args: argparse.Namespace) -> dict[str, Any]:
    """``MissionClient.send``'s structured-mission arguments from ``--contract`` / ``--template`` / ``--param``.

    The contract file is read and checked here (shape and obligation schema); what needs the
    mission's places or the supervisor's templates is checked by the supervisor.
    """
    from .core.mission_spec import read_contract_file

    if args.param and not args.template:
        raise UsageError("--param needs --template NAME", field="--param")
    if not (args.goal.strip() or args.contract or args.template.strip()):
        raise UsageError("give a goal, --contract FILE or --template NAME")
    if args.contract:
        return {"contract": read_contract_file(args.contract)}
    if not args.template:
        return {}
    params = []
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param expects KEY=VALUE, got {item!r}", field="--param")
        params.append((key.strip(), value))
    return {"template": args.template, "template_params": params}
