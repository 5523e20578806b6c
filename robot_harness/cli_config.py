"""``robot-harness config``: the harness configuration's versions and the revision loop (issue 17).

``propose`` (candidates from failed missions), ``evaluate`` (candidate vs the released version: benchmark
scenarios, held-out scenarios, the regression set by decision), ``release`` (a passing evaluation and an
operator's credential), ``rollback``, ``history``; ``run`` runs scenario missions on the in-process
simulated robot under the released version, into a journal (a mission family's evidence). The work is
``robot_harness/config_loop.py``'s; this module parses and prints.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from .cli import (JOURNAL_ENV, TOKEN_ENV, Console, ExitCode, _journal_arg, _journal_path, _journal_type, add_command,
                  add_group, journal_target_of)
from .core.errors import UsageError

__all__ = ["register", "COMMANDS"]

COMMANDS = ("config",)

_J = "--journal /tmp/rh/journal.sqlite3"


def _credential_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--token", default=None, help=f"the operator's or an approver's token (default ${TOKEN_ENV})")
    p.add_argument("--operator", default="", help="who approves, for the record (a name, not a credential)")
    p.add_argument("--reason", default="", help="why, for the record")
    p.add_argument("--harness-config", type=Path,
                   help="the site's harness configuration, for its approvers (default config/harness.yaml)")


def register(sub: Any) -> None:
    g = add_group(
        sub, "config", help="the harness configuration's versions: propose, evaluate, release, roll back",
        description="The harness configuration that may evolve (timeouts, budgets, recovery preferences, place "
                    "aliases) as numbered versions in the journal database; every mission is pinned to the "
                    "version released when it starts. A revision is proposed from failed missions, evaluated "
                    "against the released version, and released only with a passing evaluation and an "
                    "operator's credential; protected keys (the commit gate, the verifier, the safety "
                    "preconditions, the approval policy, role isolation) are never revised.",
        examples=[f"robot-harness config propose {_J}", f"robot-harness config evaluate 2 {_J}",
                  f"robot-harness config release 2 {_J} --operator alice"])
    p = add_command(
        g, "propose", help="candidate revisions from failed missions",
        description="Read the failed missions (those that ran under the released version, or --from-missions) "
                    "and propose revisions of the released "
                    "version, deterministically: a longer timeout per metre for navigations that timed out "
                    "still closing in after most of their way; an alias for a place phrase the goal compiler "
                    "refused that is near exactly one known place; more turns or mission time for missions "
                    "whose budget ran out while they were still getting things done. Each is checked "
                    "(protected keys, bounds) and kept as a new, unreleased version with its manifest.",
        examples=[f"robot-harness config propose {_J}",
                  f"robot-harness config propose {_J} --from-missions mission-1a2b3c4d5e6f mission-2b3c4d5e6f7a",
                  f"robot-harness config propose {_J} --set limits.max_turns=30 --intended-effect 'longer patrols' "
                  "--target success_rate"],
        run=_propose, exit_codes=(ExitCode.REFUSED, ExitCode.UNAVAILABLE))
    _journal_arg(p)
    p.add_argument("--from-missions", nargs="+", default=None, metavar="MISSION",
                   help="learn from these missions (default: the failed missions that ran under the released "
                        "version)")
    p.add_argument("--proposer", default="robot-harness config propose", help="who proposes, for the record")
    p.add_argument("--token", default="",
                   help="the proposer's credential (only given here, never read from the environment): "
                        "a version is never released with the credential it was proposed with")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="propose this change instead (a person's or a model's candidate; repeatable), through "
                        "the same checks: a protected key is refused, named")
    p.add_argument("--intended-effect", default="", help="with --set: what the change should improve")
    p.add_argument("--target", default="success_rate",
                   help="with --set: the measure its evaluation must find strictly better (default success_rate)")
    p.add_argument("--harness-config", type=Path,
                   help="with --set and no mission in the journal: the site's configuration it revises")
    p.add_argument("--llm", action="store_true",
                   help="ask a model (OpenAI-compatible: $OPENAI_BASE_URL, --model or $ROBOT_HARNESS_MODEL) for one "
                        "candidate instead; it passes the same checks, and the call is kept in its manifest")
    p.add_argument("--model", default="", help="with --llm: the model's name")

    e = add_command(
        g, "evaluate", help="a candidate version against the released one",
        description="Run the benchmark's scenarios and the held-out scenarios under the released version and "
                    "under the candidate, side by side, and replay the regression set by decision under the "
                    "candidate (what changes, where each mission would end). Passes when no safety count "
                    "rises (false completions, duplicate, stale or infeasible dispatches, missed waypoints "
                    "accepted), the manifest's target measure is strictly better, and no other measure is "
                    "worse beyond the tolerance; costs compare the missions that ended the same way under "
                    "both. The evaluation is kept; exit 1 when it does not pass.",
        examples=[f"robot-harness config evaluate 2 {_J}",
                  f"robot-harness config evaluate 2 {_J} --suite scenarios/rsi/heldout --tolerance cost=0.3"],
        run=_evaluate, progress=True, exit_codes=(ExitCode.NOT_SUCCEEDED,))
    e.add_argument("version", type=int, help="the candidate version")
    _journal_arg(e)
    e.add_argument("--suite", action="append", type=Path, default=None, metavar="DIR",
                   help="a folder of scenarios to compare on (repeatable; default scenarios/eval and "
                        "scenarios/rsi/heldout)")
    e.add_argument("--regression", type=Path, default=None,
                   help="the regression set's folder (default test/replay/decisions)")
    e.add_argument("--no-regression", action="store_true", help="skip the regression set's decision replay")
    e.add_argument("--tolerance", action="append", default=[], metavar="KIND=VALUE",
                   help="rate=ABS (how much worse a rate may get; default 0) and cost=SHARE (how much a cost "
                        "may rise, as a share of the baseline; default 0.1)")

    r = add_command(
        g, "release", help="release a version that passed its evaluation, with an operator's credential",
        description="Make VERSION the released version: it needs a passing evaluation against the version "
                    "released now, and the operator token or a configured approver's (never the credential "
                    "it was proposed with). Missions started from now on run under it; a running mission "
                    "keeps its own.",
        examples=[f"robot-harness config release 2 {_J} --operator alice --reason 'slow quadruped fleet'"],
        run=_release, exit_codes=(ExitCode.REFUSED,))
    r.add_argument("version", type=int)
    _journal_arg(r)
    _credential_args(r)

    rb = add_command(
        g, "rollback", help="return to an earlier released version",
        description="Make an earlier released version (default: the one released before the current) the "
                    "released version again, with the operator token or an approver's.",
        examples=[f"robot-harness config rollback {_J}", f"robot-harness config rollback 1 {_J} --reason 'regressed'"],
        run=_rollback, exit_codes=(ExitCode.REFUSED,))
    rb.add_argument("version", type=int, nargs="?", default=None)
    _journal_arg(rb)
    _credential_args(rb)

    h = add_command(
        g, "history", help="versions, manifests, evaluations and releases",
        description="Every version (its changes, manifest and how many missions ran under it), every "
                    "evaluation (passed or why not) and every release or rollback (who approved, when).",
        examples=[f"robot-harness config history {_J}", f"robot-harness config history {_J} --json"],
        run=_history)
    _journal_arg(h)

    rn = add_command(
        g, "run", help="run scenario missions on the in-process simulated robot under the released version",
        description="Each scenario's mission on the in-process simulated robot (virtual time), journaled into "
                    "--journal under the version released when it starts, as a supervisor would: a mission "
                    "family's evidence for propose, or its result after a release.",
        examples=[f"robot-harness config run scenarios/rsi/train {_J}"],
        run=_run, progress=True)
    rn.add_argument("scenarios", nargs="+", type=Path, help="scenario files or folders of them")
    rn.add_argument("--journal", type=_journal_type, metavar="FILE|URL",
                    help=f"the journal to write (a file, made if missing, or a postgresql:// URL; default "
                         f"${JOURNAL_ENV}, which one of them must give)")


def _propose(args: argparse.Namespace, console: Console) -> int:
    from .config_loop import propose

    from .cli import _overrides
    from .config_loop import site_config

    manual = _overrides(args.set) if args.set else None
    if manual is not None and args.llm:
        raise UsageError("--set and --llm are two proposers: give one")
    llm = None
    if args.llm:
        from .llm.client import LLMConfig

        llm = LLMConfig(model=args.model)
    found = propose(_journal_path(args.journal), missions=args.from_missions, proposed_by=args.proposer,
                    proposer_token=args.token, manual=manual, intended_effect=args.intended_effect,
                    target=args.target, site=site_config(args.harness_config) if manual is not None else None,
                    llm=llm)

    def text() -> str:
        if not found:
            return "no candidate: the failed missions show nothing a revision could fix"
        return "\n".join(f"version {c['version']} {'proposed before' if c.get('existing') else 'proposed'} "
                         f"({c['manifest']['generator']}): "
                         + "; ".join(f"{k} {v['from']} -> {v['to']}" for k, v in c["manifest"]["change"].items())
                         + f"\n  intended effect: {c['manifest']['intended_effect']}"
                         + f"\n  motivated by: {', '.join(c['manifest']['motivating_missions'])}" for c in found)

    console.result({"candidates": found}, text)
    return ExitCode.OK


def _tolerance(items: list[str]) -> Any:
    import math

    from .core.config_versions import Tolerance

    values: dict[str, float] = {}
    for item in items:
        kind, sep, raw = item.partition("=")
        if not sep or kind not in ("rate", "cost"):
            raise UsageError(f"--tolerance {item!r}: expected rate=VALUE or cost=VALUE")
        try:
            v = float(raw)
        except ValueError:
            raise UsageError(f"--tolerance {item!r}: {raw!r} is not a number") from None
        if not math.isfinite(v) or v < 0.0 or v > 1.0:
            raise UsageError(f"--tolerance {item!r}: the value must be a finite number in [0, 1]")
        values[kind] = v
    return Tolerance(**values)


def _evaluate(args: argparse.Namespace, console: Console) -> int:
    from .config_loop import DEFAULT_SUITES, REGRESSION_SET, evaluate

    tolerance = _tolerance(args.tolerance)
    suites = args.suite or list(DEFAULT_SUITES)
    regression = None if args.no_regression else (args.regression or REGRESSION_SET)
    report = evaluate(_journal_path(args.journal), args.version, suites=suites, regression=regression, tolerance=tolerance,
                      progress=lambda s: console.progress.update(s))

    def text() -> str:
        lines = [f"version {report['version']} against the released version {report['baseline']} "
                 f"({report['missions']} missions each, costs over the {report['costs_over']} that ended the same "
                 f"way; {report['wall_s']:.1f} s):",
                 f"  {'measure':<28}{'released':>10}{'candidate':>11}"]
        for m in report["measures"]:
            mark = "target " if m["target"] else ""
            lines.append(f"  {m['measure']:<28}{m['baseline']:>10g}{m['candidate']:>11g}  "
                         f"{mark}{'ok' if m['ok'] else 'WORSE'}")
        for c in report["changed_missions"]:
            lines.append(f"  changed: {c['scenario']}: {c['baseline']} -> {c['candidate']}")
        for w in report["regression_set"]:
            change = w["first_change"] or "same decisions"
            lines.append(f"  regression {w['case']} ({w['recorded_status']}): would end {w['final_status']}; "
                         f"{change[:160]}")
        verdict = "PASSED" if report["passed"] else "NOT PASSED: " + "; ".join(report["reasons"])
        lines.append(f"evaluation {report['evaluation_id']}: {verdict}")
        return "\n".join(lines)

    console.result(report, text)
    return ExitCode.OK if report["passed"] else ExitCode.NOT_SUCCEEDED


def _credentials(args: argparse.Namespace) -> dict[str, Any]:
    from .config_loop import site_config

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV, "")
    return {"token": token, "site": site_config(args.harness_config), "environ": dict(os.environ),
            "operator": args.operator, "reason": args.reason}


def _release(args: argparse.Namespace, console: Console) -> int:
    from .config_loop import release

    out = release(_journal_path(args.journal), args.version, **_credentials(args))
    console.result(out, lambda: f"version {out['version']} released (was {out['previous']}; approved as "
                                f"{out['approved_as']}, evaluation {out['evaluation_id']}): it applies from the "
                                "next mission")
    return ExitCode.OK


def _rollback(args: argparse.Namespace, console: Console) -> int:
    from .config_loop import rollback

    out = rollback(_journal_path(args.journal), args.version, **_credentials(args))
    console.result(out, lambda: f"rolled back to version {out['version']} (was {out['previous']}; approved as "
                                f"{out['approved_as']}): it applies from the next mission")
    return ExitCode.OK


def _history(args: argparse.Namespace, console: Console) -> int:
    from .config_loop import history

    doc = history(_journal_path(args.journal))

    def text() -> str:
        lines = [f"released: version {doc['active']}"]
        for v in doc["versions"]:
            m = v["manifest"]
            change = "; ".join(f"{k} {c['from']} -> {c['to']}" for k, c in m.get("change", {}).items()) or "(none)"
            lines.append(f"version {v['version']} {v['content_hash'][:12]} by {v['proposed_by']}: {change}; "
                         f"{v['missions']} mission(s) ran under it")
            if m.get("intended_effect"):
                lines.append(f"  {m['intended_effect']}")
        for e in doc["evaluations"]:
            lines.append(f"evaluation {e['evaluation_id']}: version {e['version']} vs {e['baseline']}: "
                         + ("passed" if e["passed"] else "not passed: " + "; ".join(e["reasons"])))
        for r in doc["releases"]:
            who = f", approved as {r['approved_as']}" + (f" ({r['operator']})" if r["operator"] else "") \
                if r["approved_as"] else ""
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["released_at"]))
            lines.append(f"{when} {r['action']} of version {r['version']}{who}"
                         + (f": {r['reason']}" if r["reason"] else ""))
        return "\n".join(lines)

    console.result(doc, text)
    return ExitCode.OK


def _run(args: argparse.Namespace, console: Console) -> int:
    from .config_loop import run_missions
    from .core.scenario import load_scenario

    files: list[Path] = []
    for p in args.scenarios:
        if p.is_dir():
            files += sorted(p.glob("*.yaml"))
        elif p.is_file():
            files.append(p)
        else:
            raise UsageError(f"no scenario file or folder at {p}")
    if not files:
        raise UsageError("no scenario files (*.yaml) given")
    if not (args.journal or os.environ.get(JOURNAL_ENV, "").strip()):
        raise UsageError(f"config run needs the journal to write: --journal FILE|URL (or ${JOURNAL_ENV})")
    scenarios = [load_scenario(f) for f in files]
    console.progress.update(f"running {len(scenarios)} missions")
    results = run_missions(journal_target_of(args.journal), scenarios)
    docs = [{"scenario": r.scenario, "mission_id": r.mission_id, "status": r.status, "truth_done": r.truth.done,
             "summary": r.summary[:200]} for r in results]
    console.result({"missions": docs}, lambda: "\n".join(f"{d['scenario']}: {d['status']} ({d['mission_id']})"
                                                          for d in docs))
    return ExitCode.OK
