"""Operator commands of ``robot-harness``: interactions, answer, resources, stop.

Interactions and resources are read and written in the journal itself (the
same core functions the supervisor's services call, and safe beside a running
supervisor: the journal is multi-process), so they work before, during and
after a restart. Stop goes to the running supervisor (``~/stop``), since only
it can cancel the robot's motion now.

This module is also the pattern for a command module: ``register(sub)``
calls ``add_command`` once per command; handlers take ``(args, console)``,
raise the harness's errors, and return an ``ExitCode`` (docs/cli.md).
"""
from __future__ import annotations

import argparse
import os
from typing import Any

from .cli import (TOKEN_ENV, Console, ExitCode, _journal_arg, add_command, journal_target_of,
                  namespace_arg, namespaced, open_journal, robot_arg, robot_of)
from .core.errors import UsageError
from .core.interactions import interaction_robot
from .core.interactions import journal_token_hasher as _journal_token_hasher

__all__ = ["register", "COMMANDS", "TOKEN_ENV"]

COMMANDS = ("interactions", "answer", "resources", "stop")


def register(sub: Any) -> None:
    i = add_command(
        sub, "interactions", help="list approvals and questions missions wait on",
        description="The approvals and questions missions are waiting on (read from the journal, so this works "
                    "whether or not a supervisor runs); --all shows resolved ones too.",
        examples=["robot-harness interactions",
                  "robot-harness interactions --journal /tmp/rh/journal.sqlite3 --all --json"],
        run=_interactions)
    _journal_arg(i)
    i.add_argument("--mission", default="", help="only this mission")
    i.add_argument("--all", action="store_true", help="resolved ones too (default: pending only)")

    a = add_command(
        sub, "answer", help="approve, deny or dismiss a call, or answer a question",
        description="Resolve one interaction with a token its approval policy accepts: the mission's owner "
                    "token (policy owner), or the operator token or an approver's (policy operator; never the "
                    "token the mission was sent with). The first answer wins: the same answer again is accepted "
                    "(and changes nothing), a different one is refused (exit 3, command_conflict). The decision "
                    "is journaled with who made it and which credential kind (answered_as).",
        examples=["robot-harness answer ask-1a2b3c approve --operator alice",
                  "robot-harness answer ask-1a2b3c answer --choice north --token s3cret",
                  f"{TOKEN_ENV}=s3cret robot-harness answer ask-1a2b3c deny --json"],
        run=_answer, exit_codes=(ExitCode.REFUSED,),
        notes=f"the token comes from --token or ${TOKEN_ENV}; tokens are compared as keyed digests with the "
              "key beside the journal (<journal>.token_key; for a database, the robot's "
              "$ROS_HOME/robot_harness/<robot>/journal.token_key), so run as the user that owns it, on the "
              "robot's machine")
    a.add_argument("interaction_id", help="the id `robot-harness interactions` shows (ask-...)")
    a.add_argument("resolution", choices=("approve", "deny", "dismiss", "answer"))
    a.add_argument("--text", default="", help="free-text answer to a question")
    a.add_argument("--choice", default="", help="one of the question's choices")
    a.add_argument("--token", default=None, help=f"the owner's, operator's or an approver's token, as the policy "
                                                  f"requires (default ${TOKEN_ENV})")
    a.add_argument("--operator", default=os.environ.get("USER", ""), help="who answers, for the record")
    _journal_arg(a)

    r = add_command(
        sub, "resources", help="resource leases in force; clear one an unknown outcome blocks",
        description="The resource leases in force, every robot's in a fleet's journal (each with the robot "
                    "holding it and its fencing token, the seq that acquired it). An action whose outcome the "
                    "harness could not establish leaves its resource blocked until a person checks the robot and "
                    "clears it (journaled, "
                    "with who and why). A robot's own resource is cleared in that robot's name (--robot); a "
                    "site resource (an elevator, a door: scope site) by its name alone.",
        examples=["robot-harness resources",
                  "robot-harness resources --clear base --robot robot1 --reason 'robot checked: parked' "
                  "--operator alice",
                  "robot-harness resources --journal /tmp/rh/journal.sqlite3 --json"],
        run=_resources, exit_codes=(ExitCode.REFUSED,))
    _journal_arg(r)
    robot_arg(r, what="only what this robot sees, its own resources and the site's (default: every robot's); "
                      "with --clear, whose resource it is")
    r.add_argument("--clear", metavar="RESOURCE", help="release this resource (blocked leases only; journaled)")
    r.add_argument("--reason", default="", help="why it is safe to clear (required with --clear)")
    r.add_argument("--operator", default=os.environ.get("USER", ""), help="who clears, for the record")

    s = add_command(
        sub, "stop", help="stop the running mission (cancels its calls, asks the robot to stop)",
        description="Ask the running supervisor (<namespace>/supervisor/stop) to stop the mission: its remaining calls "
                    "are cancelled, the robot is asked to stop, and the real outcome is recorded.",
        examples=["robot-harness stop --reason 'person in the aisle'",
                  "robot-harness stop --mission mission-1a2b3c4d5e6f --timeout 3 --json"],
        run=_stop, exit_codes=(ExitCode.UNAVAILABLE,))
    s.add_argument("--mission", default="", help="only if this mission is the one running")
    s.add_argument("--reason", default="operator stop", help="recorded with the stop")
    s.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the supervisor (default 10)")
    namespace_arg(s)


def _interactions(args: argparse.Namespace, console: Console) -> int:
    from .core.interactions import interactions
    from .core.records import EventType

    with open_journal(args.journal) as journal:
        found = interactions(journal.events(mission_id=args.mission or None, types=[
            EventType.INTERACTION_REQUESTED, EventType.INTERACTION_RESOLVED]))
    rows = [i.view() for i in found.values() if args.all or i.pending]

    def text() -> str:
        if not rows:
            return "no pending interactions" if not args.all else "no interactions"
        lines = []
        for row in rows:
            res = row["resolution"]
            state = "PENDING"
            if res:
                state = f"{res['resolution']} by {res.get('operator') or '?'}"
                state += f" ({res['answered_as']})" if res.get("answered_as") else ""
            who = f"policy {row['policy']}" + (f": {', '.join(row['approvers'])}" if row["approvers"] else "")
            choices = f" choices={row['choices']}" if row["choices"] else ""
            lines.append(f"{row['interaction_id']}  {row['mission_id']}  {row['kind']}  {state}  [{who}]\n"
                         f"    {row['prompt']}{choices}")
            if row["waiting_on"] and not res:
                lines.append(f"    nobody can answer yet: it {row['waiting_on']}")
        return "\n".join(lines)

    console.result(rows, text)
    return ExitCode.OK


def _answer(args: argparse.Namespace, console: Console) -> int:
    from .core.clock import SystemClock
    from .core.interactions import resolve
    from .core.journal import local_state_path

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV, "")
    with open_journal(args.journal) as journal:
        robot = interaction_robot(journal, args.interaction_id)
    local = local_state_path(journal_target_of(args.journal), robot)
    with open_journal(args.journal, robot_id=robot) as journal:  # the answer is journaled as its mission's robot's
        interaction, recorded = resolve(journal, interaction_id=args.interaction_id, resolution=args.resolution,
                                        token=token, clock=SystemClock(), answer=args.text, choice=args.choice,
                                        operator=args.operator, hasher=_journal_token_hasher(local))
    res = interaction.resolution or {}
    console.result({"recorded": recorded, "interaction": interaction.view()},
                   ("recorded: " if recorded else "already recorded (the first answer stands): ")
                   + f"{interaction.interaction_id} {res.get('resolution')}"
                   + (f" (as {res['answered_as']})" if res.get("answered_as") else ""))
    return ExitCode.OK


def _resources(args: argparse.Namespace, console: Console) -> int:
    from .core.clock import SystemClock
    from .core.reconcile import clear_resource

    robot = robot_of(args)
    if args.clear:
        if robot is None:
            robot = _holder(args.journal, args.clear)
        with open_journal(args.journal, robot_id=robot) as journal:  # that robot's view, and its name on the record
            lease = clear_resource(journal, resource=args.clear, reason=args.reason, operator=args.operator,
                                   clock=SystemClock())
        whose = "" if lease.scope == "site" or not lease.robot_id else f" of robot {lease.robot_id}"
        console.result({"cleared": args.clear, "robot_id": lease.robot_id, "lease": lease.model_dump(mode="json")},
                       f"cleared {args.clear}{whose} (was {lease.state.value} by {lease.owner}, mission "
                       f"{lease.mission_id}, fencing token {lease.fence})")
        return ExitCode.OK
    with open_journal(args.journal, robot_id=robot or "") as journal:
        held = journal.all_leases() if robot is None else {lease.key: lease for lease in journal.leases().values()}
    leases = {key: {**lease.model_dump(mode="json"), "key": key} for key, lease in sorted(held.items())}
    for lease in leases.values():
        lease["clear_command"] = _clear_command(lease, args.journal) if lease["state"] == "blocked" else ""

    def text() -> str:
        if not leases:
            return "no resource is leased"
        lines = []
        for key, lease in leases.items():
            holder = f"robot {lease['robot_id']}, " if lease.get("robot_id") else ""
            scope = " (site)" if lease.get("scope") == "site" else ""
            lines.append(f"{key}{scope}: {lease['state']} by {lease['owner']} ({holder}mission {lease['mission_id']}, "
                         f"fencing token {lease['fence']})" + (f" - {lease['reason']}" if lease["reason"] else ""))
            if lease["clear_command"]:
                lines.append(f"  nothing may use {key} until it is cleared: check the robot (is it stopped, where is "
                             f"it?), then\n  {lease['clear_command']}")
        return "\n".join(lines)

    console.result(leases, text)
    return ExitCode.OK


def _holder(journal_arg: Any, resource: str) -> str:
    """Whose view clears ``resource`` when ``--robot`` is not given: a site lease's holder, or the one robot
    holding a resource of that name; two robots holding one is a usage error naming them (never a guess)."""
    with open_journal(journal_arg) as journal:
        held = [lease for lease in journal.all_leases().values() if lease.resource == resource]
    site = [lease for lease in held if lease.scope == "site"]
    if site:
        return site[0].robot_id
    robots = sorted({lease.robot_id for lease in held})
    if len(robots) > 1:
        raise UsageError(f"resource {resource!r} is leased by robots {', '.join(r or '/' for r in robots)}: name "
                         "the one to clear it for with --robot", resource=resource, robots=robots)
    return robots[0] if robots else ""


def _clear_command(lease: dict[str, Any], journal: Any) -> str:
    """The exact command that clears a blocked lease (the reason and the operator are the person's to give);
    a database URL is shown with its password redacted."""
    import shlex

    from .core.journal import redact_url

    where = f" --journal {shlex.quote(redact_url(journal))}" if journal else ""
    robot = f" --robot {shlex.quote(lease['robot_id'])}" if lease.get("robot_id") and lease.get("scope") != "site" \
        else ""
    return (f"robot-harness resources --clear {shlex.quote(lease['resource'])}{robot} --reason '<what you checked>' "
            f"--operator \"$USER\"{where}")


def _stop(args: argparse.Namespace, console: Console) -> int:
    import time

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from rclpy.node import Node

    from .core.errors import BackendUnavailable, HarnessTimeout
    from .srv import Stop

    ctx = rclpy.Context()
    # no rclpy SIGINT handler: Ctrl-C must raise KeyboardInterrupt here (exit 130)
    rclpy.init(context=ctx, signal_handler_options=SignalHandlerOptions.NO)
    node = Node("robot_harness_stop", context=ctx)
    try:
        service = namespaced(args, "/supervisor/stop")
        cli = node.create_client(Stop, service)
        if not cli.wait_for_service(timeout_sec=args.timeout):
            raise BackendUnavailable(f"no supervisor answers {service} within {args.timeout} s "
                                     "(is the harness running, on this ROS_DOMAIN_ID?)")
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
    console.result({"ok": True, "message": resp.error}, f"stop sent{': ' + resp.error if resp.error else ''}")
    return ExitCode.OK
