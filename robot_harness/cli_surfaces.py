"""Operator-surface commands of ``robot-harness``: the live dashboard and the Foxglove bridge.

The MCP server is part of the supervisor (``mcp.enabled``; ``robot-harness up --mcp``).
Neither command here holds authority: the dashboard's writes go to the running
supervisor or through the same core functions the CLI uses, and the bridge
only reads the journal.
"""
from __future__ import annotations

import argparse
from typing import Any

from .cli import Console, ExitCode, add_command

__all__ = ["register"]


def register(sub: Any) -> None:
    from .operator import dashboard, foxglove_bridge

    d = add_command(
        sub, "dashboard", help="serve the live mission dashboard on localhost (answers, missions, Stop)",
        description="A web page over the journal, live: the mission and its contract, the world snapshot with "
                    "field ages (stale fields marked), the trajectory, the action timeline, model turns, "
                    "verdicts and commits. It sends missions, answers approvals and questions, and stops the "
                    "running mission through the supervisor. Over a fleet's database (--journal postgresql://...) "
                    "it lists every robot's missions, each with its robot, and the fleet's leases with the robot "
                    "holding each and its token; --robot picks the robot listed first. Loopback only unless a "
                    "token is set.",
        examples=["robot-harness dashboard                       # http://127.0.0.1:8771/",
                  "robot-harness dashboard --journal /tmp/rh/journal.sqlite3 --port 0",
                  "robot-harness dashboard --read-only --journal postgresql://harness@db.local/fleet --robot robot1"],
        run=_dashboard, json_output=False, exit_codes=(ExitCode.UNAVAILABLE, ExitCode.EVIDENCE),
        notes="docs/dashboard.md; writes need the operator token when $ROBOT_HARNESS_OPERATOR_TOKEN is set")
    dashboard.add_arguments(d)

    f = add_command(
        sub, "foxglove", help="serve the running mission to Foxglove over WebSocket (read-only)",
        description="A live Foxglove WebSocket (foxglove-sdk) following the journal: the harness log, pose, "
                    "path, places, snapshots with ages, action states and verdicts, as JSON channels. Mission "
                    "bags open in Foxglove without it; the layout is config/foxglove_layout.json.",
        examples=["robot-harness foxglove                        # ws://127.0.0.1:8765",
                  "robot-harness foxglove --journal /tmp/rh/journal.sqlite3 --mission last",
                  "robot-harness foxglove --print-layout > layout.json"],
        run=_foxglove, json_output=False, exit_codes=(ExitCode.UNAVAILABLE, ExitCode.EVIDENCE),
        notes="docs/foxglove.md")
    foxglove_bridge.add_arguments(f)


def _dashboard(args: argparse.Namespace, console: Console) -> int:
    from .operator import dashboard

    return dashboard.run(args, info=lambda m: print(m, file=console.stderr, flush=True))


def _foxglove(args: argparse.Namespace, console: Console) -> int:
    from .operator import foxglove_bridge

    if args.mission and not args.print_layout:  # an id the journal knows, or its newest for `last`
        from .cli import _mission_id, open_journal

        with open_journal(args.journal) as journal:
            args.mission = _mission_id(journal, args.mission)
    return foxglove_bridge.run(args, info=lambda m: print(m, file=console.stderr, flush=True),
                               write=console.write)
