"""``robot-harness memory``: the memory of verified attempts in a journal database (docs/memory.md).

``show`` (episodes and provider statistics), ``export`` (every row as JSON lines), ``forget`` (append the
forgettings of a record's chain), ``record`` (derive memory from missions already in the journal). The work is
``robot_harness/core/memory.py``'s ``MemoryStore``; this module parses and prints.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from .cli import Console, ExitCode, _check_writable, _journal_arg, _mission_id, add_command, add_group, open_journal

__all__ = ["register", "COMMANDS"]

COMMANDS = ("memory",)

_J = "--journal /tmp/rh/journal.sqlite3"


def register(sub: Any) -> None:
    g = add_group(
        sub, "memory", help="the memory of verified attempts: show, export, forget, record",
        description="Episodes (goal, contract, the calls that ran, how the mission ended and whether that was "
                    "verified) and provider outcomes (which provider ran each physical or capability call, and "
                    "its verified outcome), derived from finished missions and kept append-only in the journal "
                    "database. The planner's examples are verified episodes only; routing's statistics count "
                    "only verified outcomes.",
        examples=[f"robot-harness memory show {_J}", f"robot-harness memory record {_J} --all",
                  f"robot-harness memory forget ep-0123456789abcdef {_J} --reason 'map changed'"])

    s = add_command(
        g, "show", help="episodes and provider statistics",
        description="The current episodes (newest last) and, per capability and provider, the verified "
                    "successes, failures and unknown outcomes. --all lists forgotten and superseded records "
                    "too, and the forgettings, each with its state. A memory row this harness cannot read "
                    "(written by a newer one, or edited by hand) exits 5 (unreadable_memory), naming it.",
        examples=[f"robot-harness memory show {_J}", f"robot-harness memory show {_J} --kind providers --json",
                  f"robot-harness memory show {_J} --all"],
        run=_show)
    _journal_arg(s)
    s.add_argument("--kind", choices=("episodes", "providers"), default=None,
                   help="only episodes, or only provider outcomes and statistics (default both)")
    s.add_argument("--all", action="store_true", help="include forgotten and superseded records and forgettings")

    e = add_command(
        g, "export", help="every memory row as JSON lines",
        description="Every row of memory_episodes and memory_provider_outcomes as stored, forgotten and "
                    "superseded ones and the forgettings included (each with its supersedes relation), one JSON "
                    "object per line with its table; --json gives one JSON array instead.",
        examples=[f"robot-harness memory export {_J} > memory.jsonl",
                  f"robot-harness memory export {_J} --out memory.jsonl"],
        run=_export)
    _journal_arg(e)
    e.add_argument("--out", type=Path, default=None, help="write to this file (default stdout)")

    f = add_command(
        g, "forget", help="forget a memory record (append-only)",
        description="Forget MEMORY_ID and its whole chain (the records it corrected and the corrections of it): "
                    "a forgetting (who and why) is appended for each, the records stay in their table, and none "
                    "is an example or counted in statistics any more; the mission is never derived into memory "
                    "again. Forgetting again adds nothing. An unknown id exits 2.",
        examples=[f"robot-harness memory forget ep-0123456789abcdef {_J} --reason 'map changed'",
                  f"robot-harness memory forget po-0123456789abcdef {_J} --reason 'mislabelled' --by alice"],
        run=_forget)
    f.add_argument("memory_id", metavar="MEMORY_ID", help="an ep-... or po-... id (memory show lists them)")
    _journal_arg(f)
    f.add_argument("--reason", required=True, help="why, for the record")
    f.add_argument("--by", default=None, help="who forgets, for the record (default $USER)")

    r = add_command(
        g, "record", help="derive memory from missions in the journal",
        description="Derive episodes and provider outcomes from finished missions already in the journal (a "
                    "backfill; a supervisor records each mission as it ends). Idempotent: a mission recorded "
                    "before adds nothing unless its journal changed. Default: every finished mission.",
        examples=[f"robot-harness memory record {_J}", f"robot-harness memory record {_J} --mission last"],
        run=_record)
    _journal_arg(r)
    which = r.add_mutually_exclusive_group()
    which.add_argument("--mission", default=None, help="one mission id, or last")
    which.add_argument("--all", action="store_true", help="every finished mission (the default)")


def _store(journal: Any) -> Any:
    from .core.memory import MemoryStore

    return MemoryStore(journal)


def _show(args: argparse.Namespace, console: Console) -> int:
    from .core.memory import provider_summary, states

    with open_journal(args.journal) as journal:
        store = _store(journal)
        episodes = store.episodes(include_forgotten=args.all) if args.kind != "providers" else []
        outcomes = store.outcomes(include_forgotten=args.all) if args.kind != "episodes" else []
    state = {**states(episodes), **states(outcomes)}
    doc: dict[str, Any] = {}
    if args.kind != "providers":
        doc["episodes"] = [{**e.model_dump(mode="json"), "state": state[e.memory_id]} for e in episodes]
    if args.kind != "episodes":
        doc["providers"] = provider_summary(outcomes)
        doc["outcomes"] = [{**o.model_dump(mode="json"), "state": state[o.memory_id]} for o in outcomes]

    def text() -> str:
        lines: list[str] = []
        if "episodes" in doc:
            lines.append(f"episodes ({len(episodes)}):")
            for e in episodes:
                if not e.valid:
                    lines.append(f"  {e.memory_id} forgets {e.supersedes} ({e.recorded_by}: {e.reason})")
                    continue
                mark = "" if state[e.memory_id] == "current" else f" [{state[e.memory_id]}]"
                lines.append(f"  {e.memory_id} {e.verification.value:<8} {e.outcome:<9} {e.mission_id}{mark}")
                lines.append(f"    {e.goal[:100]}")
                lines.append(f"    {', '.join(s.skill for s in e.plan) or 'no calls'}")
        if "providers" in doc:
            lines.append("providers (verified successes / attempts with a known outcome):")
            for p in doc["providers"]:
                lines.append(f"  {p['capability']:<11} {p['provider']:<24} {p['succeeded']}/{p['attempts']}"
                             + (f" ({p['unknown']} unknown)" if p["unknown"] else ""))
            if not doc["providers"]:
                lines.append("  (none)")
        return "\n".join(lines)

    console.result(doc, text)
    return ExitCode.OK


def _export(args: argparse.Namespace, console: Console) -> int:
    with open_journal(args.journal) as journal:
        rows = _store(journal).export()
    if args.json:
        text = json.dumps(rows, indent=1) + "\n"
    else:
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    if args.out:
        _check_writable(args.out, "--out")
        args.out.write_text(text)
        console.info(f"{len(rows)} memory row(s) written to {args.out}")
    else:
        console.write(text)
    return ExitCode.OK


def _forget(args: argparse.Namespace, console: Console) -> int:
    by = args.by or os.environ.get("USER") or "operator"
    from .core.memory import UnknownMemory

    with open_journal(args.journal) as journal:
        try:
            tomb = _store(journal).forget(args.memory_id, by=by, reason=args.reason, now=time.time())
        except UnknownMemory as exc:
            exc.message += f" (robot-harness memory show --journal {journal.path} --all lists them)"
            raise
    doc = {"memory_id": tomb.memory_id, "forgot": tomb.supersedes, "by": tomb.recorded_by, "reason": tomb.reason,
           "recorded_at": tomb.recorded_at}
    console.result(doc, lambda: f"{tomb.supersedes} forgotten by {tomb.recorded_by} ({tomb.memory_id}): {tomb.reason}")
    return ExitCode.OK


def _record(args: argparse.Namespace, console: Console) -> int:
    with open_journal(args.journal) as journal:
        store = _store(journal)
        if args.mission:
            mid = _mission_id(journal, args.mission)
            added = {mid: store.record_mission(mid, now=time.time(), by="robot-harness memory record")}
        else:
            added = store.record_all(now=time.time(), by="robot-harness memory record")
    doc = {"missions": [{"mission_id": m, "episodes": e, "outcomes": o} for m, (e, o) in added.items()],
           "episodes": sum(e for e, _ in added.values()), "outcomes": sum(o for _, o in added.values())}
    console.result(doc, lambda: f"{len(added)} mission(s) read: {doc['episodes']} episode(s) and "
                                f"{doc['outcomes']} provider outcome(s) added")
    return ExitCode.OK
