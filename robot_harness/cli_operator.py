"""Operator commands of ``robot-harness``: interactions, resources, Stop.

Interactions and resources are read and written in the journal itself (the
same core functions the supervisor's services call, and safe beside a running
supervisor: the journal is multi-process), so they work before, during and
after a restart. Stop goes to the running supervisor (``~/stop``), since only
it can cancel the robot's motion now.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .core.errors import UsageError

__all__ = ["add_parsers", "dispatch", "COMMANDS"]

COMMANDS = ("interactions", "answer", "resources", "stop")
TOKEN_ENV = "ROBOT_HARNESS_OPERATOR_TOKEN"


def add_parsers(sub: Any) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    i = sub.add_parser("interactions", help="list approvals and questions missions wait on",
                       epilog="examples:\n  robot-harness interactions\n  robot-harness interactions --all --json",
                       formatter_class=fmt)
    i.add_argument("--journal", type=Path)
    i.add_argument("--mission", default="", help="only this mission")
    i.add_argument("--all", action="store_true", help="resolved ones too (default: pending only)")
    i.add_argument("--json", action="store_true")

    a = sub.add_parser("answer", help="approve, deny or dismiss a call, or answer a question",
                       epilog="examples:\n  robot-harness answer ask-1a2b3c approve --operator alice\n"
                              "  robot-harness answer ask-1a2b3c answer --choice north\n"
                              f"the owner token comes from --token or ${TOKEN_ENV}; the first answer wins "
                              "(a different second answer exits 3 with command_conflict)",
                       formatter_class=fmt)
    a.add_argument("interaction_id")
    a.add_argument("resolution", choices=("approve", "deny", "dismiss", "answer"))
    a.add_argument("--text", default="", help="free-text answer to a question")
    a.add_argument("--choice", default="", help="one of the question's choices")
    a.add_argument("--token", default=None, help=f"the mission owner's token (default ${TOKEN_ENV})")
    a.add_argument("--operator", default=os.environ.get("USER", ""), help="who answers, for the record")
    a.add_argument("--journal", type=Path)
    a.add_argument("--json", action="store_true")

    r = sub.add_parser("resources", help="resource leases in force; clear one an unknown outcome blocks",
                       epilog="examples:\n  robot-harness resources\n"
                              "  robot-harness resources --clear base --reason 'robot checked: parked' --operator alice",
                       formatter_class=fmt)
    r.add_argument("--journal", type=Path)
    r.add_argument("--clear", metavar="RESOURCE", help="release this resource (blocked leases only; journaled)")
    r.add_argument("--reason", default="")
    r.add_argument("--operator", default=os.environ.get("USER", ""))
    r.add_argument("--json", action="store_true")

    s = sub.add_parser("stop", help="stop the running mission (cancels its calls, asks the robot to stop)",
                       epilog="example: robot-harness stop --reason 'person in the aisle'", formatter_class=fmt)
    s.add_argument("--mission", default="", help="only if this mission is the one running")
    s.add_argument("--reason", default="operator stop")
    s.add_argument("--timeout", type=float, default=10.0)


def dispatch(args: argparse.Namespace, *, journal_path: Any, open_journal: Any) -> int:
    if args.command == "stop":
        return _stop(args)
    journal = open_journal(journal_path(args.journal))
    try:
        journal.setup()
        if args.command == "interactions":
            return _interactions(args, journal)
        if args.command == "answer":
            return _answer(args, journal)
        return _resources(args, journal)
    finally:
        journal.close()


def _interactions(args: argparse.Namespace, journal: Any) -> int:
    from .core.interactions import interactions
    from .core.records import EventType

    found = interactions(journal.events(mission_id=args.mission or None, types=[
        EventType.INTERACTION_REQUESTED, EventType.INTERACTION_RESOLVED]))
    rows = [i.view() for i in found.values() if args.all or i.pending]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no pending interactions" if not args.all else "no interactions")
    for row in rows:
        res = row["resolution"]
        state = f"{res['resolution']} by {res.get('operator') or '?'}" if res else "PENDING"
        choices = f" choices={row['choices']}" if row["choices"] else ""
        print(f"{row['interaction_id']}  {row['mission_id']}  {row['kind']}  {state}\n    {row['prompt']}{choices}")
    return 0


def _answer(args: argparse.Namespace, journal: Any) -> int:
    from .core.clock import SystemClock
    from .core.interactions import resolve

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV, "")
    interaction, recorded = resolve(journal, interaction_id=args.interaction_id, resolution=args.resolution,
                                    token=token, clock=SystemClock(), answer=args.text, choice=args.choice,
                                    operator=args.operator)
    if args.json:
        print(json.dumps({"recorded": recorded, "interaction": interaction.view()}, indent=2))
    else:
        res = interaction.resolution or {}
        print(("recorded: " if recorded else "already recorded (the first answer stands): ")
              + f"{interaction.interaction_id} {res.get('resolution')}")
    return 0


def _resources(args: argparse.Namespace, journal: Any) -> int:
    from .core.clock import SystemClock
    from .core.reconcile import clear_resource

    if args.clear:
        lease = clear_resource(journal, resource=args.clear, reason=args.reason, operator=args.operator,
                               clock=SystemClock())
        print(f"cleared {args.clear} (was {lease.state.value} by {lease.owner}, mission {lease.mission_id})")
        return 0
    leases = {r: lease.model_dump(mode="json") for r, lease in journal.leases().items()}
    if args.json:
        print(json.dumps(leases, indent=2))
        return 0
    if not leases:
        print("no resource is leased")
    for r, lease in leases.items():
        print(f"{r}: {lease['state']} by {lease['owner']} (mission {lease['mission_id']})"
              + (f" - {lease['reason']}" if lease["reason"] else ""))
    return 0


def _stop(args: argparse.Namespace) -> int:
    import time

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from .core.errors import BackendUnavailable, HarnessTimeout
    from .srv import Stop

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node("robot_harness_stop", context=ctx)
    try:
        cli = node.create_client(Stop, "/supervisor/stop")
        if not cli.wait_for_service(timeout_sec=args.timeout):
            raise BackendUnavailable("no supervisor answers /supervisor/stop (is the harness running?)")
        fut = cli.call_async(Stop.Request(mission_id=args.mission, reason=args.reason))
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        deadline = time.monotonic() + args.timeout
        while not fut.done() and time.monotonic() < deadline:
            ex.spin_once(timeout_sec=0.1)
        if not fut.done():
            raise HarnessTimeout(f"the supervisor did not answer the stop within {args.timeout} s")
        resp = fut.result()
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    if not resp.ok:
        raise UsageError(resp.error)
    print(f"stop sent{': ' + resp.error if resp.error else ''}", file=sys.stderr)
    return 0
