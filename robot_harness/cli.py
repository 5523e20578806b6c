"""robot-harness: the command line over the library (a thin wrapper).

Exit codes: 0 the mission reached a terminal status (whatever it was) or the
command did its job; 2 bad usage or an invalid scenario file; 3 a runtime
failure (no graph to talk to, the journal cannot be read, ...).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from . import cli_operator
from .core.errors import HarnessError, ScenarioError, UsageError

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_USAGE, EXIT_RUNTIME = 0, 2, 3

EPILOG = """\
examples:
  robot-harness demo
  robot-harness run --scenario scenarios/demo.yaml --report /tmp/report.json
  robot-harness up                      # sim + harness graph, Ctrl-C to stop
  robot-harness mission "Go to office_storage and come back to dock."
  robot-harness journal show --journal /tmp/run/journal.sqlite3
  robot-harness journal export --format jsonl --journal /tmp/run/journal.sqlite3
  robot-harness interactions            # approvals and questions waiting on you
  robot-harness answer ask-1a2b3c approve
  robot-harness resources               # leases; --clear a resource an unknown outcome blocks
  robot-harness stop --reason "person in the aisle"
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-harness", description="Evidence-gated closed-loop agent harness for ROS 2 robots.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", help="bring up the node graph in this process (Ctrl-C stops it)",
                        epilog="example: robot-harness up --journal /tmp/j.sqlite3", formatter_class=argparse.RawDescriptionHelpFormatter)
    up.add_argument("--no-sim", action="store_true", help="do not start the simulated robot (use a real Nav2 robot)")
    up.add_argument("--journal", type=Path, help="journal file (default $ROS_HOME/robot_harness/journal.sqlite3)")
    up.add_argument("--harness-config", type=Path, help="harness configuration YAML (default config/harness.yaml)")
    up.add_argument("--params-dir", type=Path, help="directory with the nodes' parameter files (default: the package's config/)")
    up.add_argument("--planner-script", type=Path,
                    help="recorded model responses for the scripted planner (a YAML file with turns:, or a scenario file)")

    m = sub.add_parser("mission", help="send a mission to a running graph and follow it",
                       epilog='example: robot-harness mission "Go to office_storage" --set limits.mission_timeout_s=60',
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("goal", help="the natural-language goal")
    m.add_argument("--mission-id", default="")
    m.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override for this mission")
    m.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the result")
    m.add_argument("--json", action="store_true", help="print the result as JSON")
    m.add_argument("--owner", default=os.environ.get("USER", ""), help="who sends the mission (recorded)")
    m.add_argument("--owner-token", default=None,
                   help=f"secret that lets its holder answer this mission's approvals and questions "
                        f"(default ${cli_operator.TOKEN_ENV})")

    r = sub.add_parser("run", help="start sim + graph in this process, run one scenario, exit",
                       epilog="example: robot-harness run --scenario scenarios/demo.yaml --report report.json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--scenario", type=Path, required=True)
    r.add_argument("--journal", type=Path)
    r.add_argument("--report", type=Path)
    r.add_argument("--json", action="store_true", help="print the report as JSON instead of a timeline")
    _planner_args(r)

    d = sub.add_parser("demo", help="the inspection demo on the simulated robot with recorded model responses",
                       epilog="examples:\n  robot-harness demo\n"
                              "  OPENAI_BASE_URL=http://127.0.0.1:11434/v1 robot-harness demo --planner llm --model qwen2.5:7b "
                              "--record demo.replay.jsonl\n"
                              "  robot-harness demo --planner replay --replay demo.replay.jsonl",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("--journal", type=Path)
    d.add_argument("--report", type=Path)
    d.add_argument("--json", action="store_true")
    _planner_args(d)

    j = sub.add_parser("journal", help="read a journal: show a mission timeline or export events")
    jsub = j.add_subparsers(dest="journal_command", required=True, metavar="SUBCOMMAND")
    show = jsub.add_parser("show", help="a readable timeline of a mission",
                           epilog="example: robot-harness journal show --journal j.sqlite3 --mission last",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("--journal", type=Path)
    show.add_argument("--mission", default="last", help="mission id, or 'last' (default), or 'list'")
    show.add_argument("--json", action="store_true")
    ex = jsub.add_parser("export", help="export events as JSON lines or CSV",
                         epilog="example: robot-harness journal export --format csv --out events.csv",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("--journal", type=Path)
    ex.add_argument("--mission", default="", help="only this mission (default: all)")
    ex.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    ex.add_argument("--out", type=Path, help="file to write (default stdout)")
    ver = jsub.add_parser("verify", help="re-check every piece of evidence a mission cites (bag messages, artifacts)",
                          epilog="example: robot-harness journal verify --journal runs/x/journal.sqlite3 --mission last\n"
                                 "exit 0: all evidence present and unchanged; 3: something is missing or changed",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    ver.add_argument("--journal", type=Path)
    ver.add_argument("--mission", default="last", help="mission id, or 'last' (default)")
    ver.add_argument("--bags", type=Path, help="bag directory (default: bags/ beside the journal)")
    ver.add_argument("--json", action="store_true")

    rp = sub.add_parser("replay", help="re-run verification and the commit gate over a recorded mission; report diffs",
                        epilog="examples:\n  robot-harness replay runs/x/bags/mission-1a2b/   # the bag's journal is beside bags/\n"
                               "  robot-harness replay --journal j.sqlite3 --mission last "
                               "--set verification.xy_tolerance_m=0.1\n"
                               "exit 0: every verdict replays the same; 1: a verdict or a commit differs",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("bag", nargs="?", type=Path, help="a mission bag (folder or .mcap) written by the harness")
    rp.add_argument("--journal", type=Path, help="the journal (default: beside the bag's bags/ folder)")
    rp.add_argument("--mission", default="", help="mission id, or 'last' (default: the bag's mission)")
    rp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="change the harness config for the replay (e.g. a verifier tolerance)")
    rp.add_argument("--scenario", type=Path,
                    help="a recording of a robot the harness did not drive: judge this scenario's contract "
                         "against the bag's pose topic")
    rp.add_argument("--pose-topic", default="/amcl_pose", help="with --scenario (default /amcl_pose)")
    rp.add_argument("--artifacts", type=Path, help="look cited images up by file name here (a recording moved)")
    rp.add_argument("--json", action="store_true")
    cli_operator.add_parsers(sub)

    rep = sub.add_parser("report", help="a self-contained HTML report of a mission for a person",
                         epilog="example: robot-harness report --journal runs/x/journal.sqlite3 --out mission.html\n"
                                "goal, contract and verdicts with their evidence, a trajectory plot over the places, "
                                "the action timeline, the model's turns, and the evidence images with their sha256",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    rep.add_argument("--journal", type=Path)
    rep.add_argument("--mission", default="last", help="mission id, or 'last' (default)")
    rep.add_argument("--out", type=Path, help="the HTML file (default: report-<mission>.html here)")
    rep.add_argument("--artifacts", type=Path, help="look cited images up by file name here (a recording moved)")

    ev = sub.add_parser("eval", help="the fault-injection benchmark: every suite scenario under every harness mode",
                        epilog="examples:\n  robot-harness eval --quick\n  robot-harness eval --out runs/eval\n"
                               "writes table.md, results.json, runs.json and PNG plots to --out; "
                               "the suite is scenarios/eval (python scripts/make_eval_suite.py)",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("--quick", action="store_true", help="the navigation and inspection tasks only (for CI)")
    ev.add_argument("--out", type=Path, default=Path("runs/eval"), help="results folder (default runs/eval)")
    ev.add_argument("--modes", default="", help="comma-separated subset of: direct, monitored, gated, gated-no-...")
    ev.add_argument("--scenarios", type=Path, help="a folder of scenario files (default scenarios/eval)")
    ev.add_argument("--json", action="store_true", help="print results.json instead of the table")
    return p


def _planner_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("planner (default: the scenario's recorded turns)")
    g.add_argument("--planner", choices=("scripted", "llm", "replay"), default="scripted",
                   help="llm: any OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY); "
                        "replay: a file recorded with --record")
    g.add_argument("--model", default="", help="model name for --planner llm (default: $ROBOT_HARNESS_MODEL)")
    g.add_argument("--record", type=Path, help="with --planner llm: append every model turn to this replay file")
    g.add_argument("--replay", type=Path, help="with --planner replay: the recorded file")


def _planner_overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    if args.planner == "scripted":
        if args.record or args.replay or args.model:
            raise UsageError("--model, --record and --replay need --planner llm or replay")
        return {}
    if args.planner == "replay":
        if not args.replay:
            raise UsageError("--planner replay needs --replay FILE")
        if not args.replay.is_file():
            raise UsageError(f"no replay file at {args.replay}")
        return {"planner": {"backend": "replay", "replay_file": str(args.replay.resolve())}}
    out: dict[str, Any] = {"backend": "llm", "model": args.model}
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        out["record_file"] = str(args.record.resolve())
    return {"planner": out}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except (ScenarioError, UsageError) as exc:
        print(f"robot-harness: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    except HarnessError as exc:
        print(f"robot-harness: {exc.code}: {exc.message}", file=sys.stderr)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "journal":
        return _journal(args)
    if args.command in ("run", "demo"):
        return _run(args)
    if args.command == "up":
        return _up(args)
    if args.command == "mission":
        return _mission(args)
    if args.command == "eval":
        return _eval(args)
    if args.command == "replay":
        return _replay(args)
    if args.command == "report":
        return _report(args)
    if args.command in cli_operator.COMMANDS:
        return cli_operator.dispatch(args, journal_path=_journal_path, open_journal=_open_journal)
    raise UsageError(f"unknown command {args.command}")


def _eval(args: argparse.Namespace) -> int:
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
    progress = _Progress(enabled=not args.json)
    started = time.monotonic()
    total = len(scenarios) * len(modes)
    with tempfile.TemporaryDirectory(prefix="robot_harness-eval-") as work:
        results = run_suite(scenarios, modes, workdir=Path(work),
                            progress=lambda i, n, r: progress.line(f"[{i}/{total}] {r.mode:<26} {r.scenario}"))
    progress.close()
    report = write_outputs(results, args.out, wall_s=time.monotonic() - started, quick=args.quick)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(table(report["modes"]))
        print(f"{report['scenarios']} scenarios, {report['runs']} runs in {report['wall_s']} s; "
              f"results in {args.out} (table.md, results.json, runs.json, modes.png, false_completion_by_fault.png)")
    return EXIT_OK


def _mission_id(journal: Any, spec: str, missions: list[dict[str, Any]] | None = None) -> str:
    """A mission id as given, or the journal's newest for ``last``."""
    if spec != "last":
        return spec
    missions = journal.missions() if missions is None else missions
    if not missions:
        raise UsageError("the journal has no missions")
    return missions[-1]["mission_id"]


def _report(args: argparse.Namespace) -> int:
    from .evidence.report import render_report

    j = _open_journal(_journal_path(args.journal))
    try:
        j.setup()
        mission = _mission_id(j, args.mission)
        page = render_report(j, mission, artifacts_dir=args.artifacts)
    finally:
        j.close()
    out = args.out or Path(f"report-{mission}.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    print(f"report: {out} ({len(page) // 1024} KiB, self-contained)")
    return EXIT_OK


def _replay(args: argparse.Namespace) -> int:
    from .core.config import dotted_overrides
    from .evidence.replay import replay_bag, replay_mission

    if args.scenario is not None:
        if args.bag is None:
            raise UsageError("--scenario needs the BAG to judge")
        from .core.scenario import load_scenario

        result = replay_bag(args.bag, load_scenario(args.scenario), pose_topic=args.pose_topic)
        out = result.as_dict()
        if args.json:
            print(json.dumps(out, indent=2))
        else:
            print(f"{out['poses']} poses on {out['pose_topic']} over {out['span_s']} s: {out['goal_verdict']}")
            for st in out["steps"]:
                print(f"  {st['obligation']} {st['verdict']}: {st['reason']}")
        return EXIT_OK

    mission = args.mission
    journal_path = args.journal
    if args.bag is not None:
        bag = args.bag.resolve()
        bag_dir = bag if bag.is_dir() else bag.parent
        if not bag_dir.is_dir():
            raise UsageError(f"no bag at {args.bag}")
        mission = mission or bag_dir.name  # <journal dir>/bags/<mission>/<mission>.mcap
        journal_path = journal_path or bag_dir.parent.parent / "journal.sqlite3"
    pairs = []
    for item in args.set:
        if "=" not in item:
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        pairs.append(tuple(item.split("=", 1)))
    j = _open_journal(_journal_path(journal_path))
    try:
        j.setup()
        mission = _mission_id(j, mission or "last")
        report = replay_mission(j, mission, overrides=dotted_overrides(pairs), artifacts_dir=args.artifacts)
    finally:
        j.close()
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        for v in report.verdicts:
            state = "same" if not v.diffs else "DIFFERS: " + "; ".join(v.diffs)
            print(f"seq {v.seq} {v.recorded_id}: recorded {v.recorded}"
                  f"{' (committed)' if v.recorded_committed else ''}, replayed {v.replayed}"
                  f"{' (committed)' if v.replayed_committed else ''} - {state}")
        if not report.verdicts:
            print(f"mission {mission}: no replayable verdict" + (f" ({report.skipped} recorded before requests were "
                                                                  "journaled)" if report.skipped else ""))
        print(f"mission {mission}: " + ("every verdict replays the same" if report.identical else "verdicts differ"))
    return EXIT_OK if report.identical else 1


def _journal_path(p: Path | None) -> Path:
    from .core.journal import default_journal_path

    path = p or default_journal_path()
    if not path.is_file():
        raise UsageError(f"no journal at {path}")
    return path


def _open_journal(path: Path):
    from .core.clock import IdGenerator, SystemClock
    from .core.journal import SqliteJournal

    return SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None))


def _journal(args: argparse.Namespace) -> int:
    from .core.timeline import export_events, render_timeline

    journal = _open_journal(_journal_path(args.journal))
    try:
        if args.journal_command == "show":
            missions = journal.missions()
            if args.mission == "list":
                print(json.dumps(missions, indent=2) if args.json else
                      "\n".join(f"{m['mission_id']}  {m.get('status') or '-':<10} {m.get('goal') or ''}" for m in missions))
                return EXIT_OK
            mid = _mission_id(journal, args.mission, missions)
            events = journal.events(mission_id=mid)
            if not events:
                raise UsageError(f"no events for mission {mid}")
            if args.json:
                print(json.dumps([e.model_dump(mode="json") for e in events], indent=1))
            else:
                print(render_timeline(events))
            return EXIT_OK
        if args.journal_command == "verify":
            return _verify_evidence(journal, args)
        events = journal.events(mission_id=args.mission or None)
        text = export_events(events, args.format)
        if args.out:
            args.out.write_text(text)
        else:
            sys.stdout.write(text)
        return EXIT_OK
    finally:
        journal.close()


def _verify_evidence(journal: Any, args: argparse.Namespace) -> int:
    from .evidence.audit import audit_mission

    mid = _mission_id(journal, args.mission)
    events = journal.events(mission_id=mid)
    if not events:
        raise UsageError(f"no events for mission {mid}")
    bags = args.bags or (Path(journal.path).parent / "bags")
    report = audit_mission(events, bag_dir=bags)
    if args.json:
        print(json.dumps({**report.model_dump(mode="json"), "ok": report.ok}, indent=2))
    else:
        for c in report.checks:
            print(f"{'ok  ' if c.ok else 'FAIL'} {c.id}" + (f"  ({c.problem})" if c.problem else "")
                  + f"  cited by {', '.join(c.cited_by)}")
        print(f"{len(report.checks)} evidence item(s) checked for mission {mid}: "
              + ("all present and unchanged" if report.ok else f"{len(report.failures)} missing or changed"))
    return EXIT_OK if report.ok else EXIT_RUNTIME


class _Progress:
    """One status line on a terminal, plain lines otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.last = ""

    def __call__(self, fb: Any) -> None:
        if not self.enabled:
            return
        act = fb.active_action
        ev = fb.latest_event.kind if fb.latest_event.kind else ""
        line = f"[{time.monotonic() - self.t0:6.1f}s] {fb.stage:<11}"
        if act.action_id:
            line += f" {act.skill} {act.state:<9}"
        if ev:
            line += f" {ev}"
        if line == self.last:
            return
        self.last = line
        if self.tty:
            sys.stderr.write("\r\033[K" + line[:120])
            sys.stderr.flush()
        elif ev in ("TOOL_RESULT_RECORDED", "ROBOT_ACTION_OUTCOME", "MODEL_TURN_STARTED"):
            print(line, file=sys.stderr)

    def line(self, text: str) -> None:
        """A progress line for long runs: rewritten in place on a terminal, silent otherwise."""
        if self.enabled and self.tty:
            sys.stderr.write("\r\033[K" + text[:120])
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\r\033[K")


def _run(args: argparse.Namespace) -> int:
    from .core.scenario import load_scenario
    from .runner import run_scenario

    if args.command == "demo":
        scenario_path = _demo_scenario()
    else:
        scenario_path = args.scenario
    scenario = load_scenario(scenario_path)
    journal = args.journal
    if journal is None:
        out = Path(os.environ.get("ROBOT_HARNESS_RUNS", "runs")) / time.strftime("%Y%m%d-%H%M%S")
        journal = out / "journal.sqlite3"
    progress = _Progress(enabled=not args.json)
    if not args.json:
        print(f"mission: {scenario.goal}", file=sys.stderr)
    try:
        report = run_scenario(scenario, journal_path=journal, report_path=args.report, on_feedback=progress,
                              extra_overrides=_planner_overrides(args))
    finally:
        progress.close()
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return EXIT_OK
    from .core.timeline import render_timeline

    j = _open_journal(Path(report["journal"]))
    try:
        events = j.events(mission_id=report["mission_id"])
    finally:
        j.close()
    print(render_timeline(events))
    print()
    print(f"status:  {report['status']}")
    print(f"summary: {report['summary']}")
    contract = report.get("contract")
    if contract:
        print(f"contract {contract['contract_id']} (revision {contract['revision']}, {contract['compiler']} compiler):")
        for o in contract["obligations"]:
            print(f"  {o['id']} {o['kind']}: {o['description']}")
    verdict = report.get("verdict")
    if verdict:
        print(f"verdict {verdict['verdict_id']} by {verdict['verifier']}: {verdict['goal_verdict']}"
              f" (contract revision {verdict['contract_revision']}, state version {verdict['state_version']})")
        for st in verdict["steps"]:
            print(f"  {st['obligation_id']} {st['verdict']}: {st['reason']}")
    if report.get("commit"):
        print(f"committed by the gate: {report['commit']['commit_id']}")
    print(f"evidence ids: {', '.join(report.get('evidence_ids') or []) or 'none'}")
    print(f"journal: {report['journal']} (seqs {report['evidence_seqs']})")
    bag = report.get("bag") or {}
    if bag.get("path"):
        print(f"bag:     {bag['path']} ({bag.get('messages', 0)} messages"
              + (f", {bag['dropped']} dropped" if bag.get("dropped") else "") + ")")
    for call in report["tool_calls"]:
        res = call.get("result") or {}
        state = f" -> {call['action_state']}" if call.get("action_state") else ""
        print(f"  {call['name']}({json.dumps(call['arguments'])}): {res.get('status')}{state}")
    if args.report:
        print(f"report:  {args.report}")
    return EXIT_OK


def _demo_scenario() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "scenarios" / "demo.yaml",):
        if candidate.is_file():
            return candidate
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory("robot_harness")) / "scenarios" / "demo.yaml"


def _up(args: argparse.Namespace) -> int:
    from .bringup import BringUp, config_dir

    overrides: dict[str, dict[str, Any]] = {"supervisor": {}}
    if args.journal:
        overrides["supervisor"]["journal_path"] = str(args.journal)
    cfg = args.harness_config or (config_dir() / "harness.yaml")
    overrides["supervisor"]["harness_config_file"] = str(cfg)
    if args.planner_script:
        overrides["planner"] = {"script_file": str(args.planner_script.resolve())}
    graph = BringUp(use_sim=not args.no_sim, params_dir=args.params_dir, overrides=overrides)
    graph.start()
    print(f"robot_harness graph up (sim={'on' if not args.no_sim else 'off'}); journal {graph.supervisor.journal_path}",
          file=sys.stderr)
    print("send missions with: robot-harness mission \"<goal>\"  (Ctrl-C to stop)", file=sys.stderr)
    stop = {"flag": False}
    # Explicit handlers: a process started in the background by a script
    # inherits an ignored SIGINT, and Ctrl-C/`kill -INT` must still stop it.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.__setitem__("flag", True))
    try:
        while not stop["flag"]:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        graph.stop()
    return EXIT_OK


def _mission(args: argparse.Namespace) -> int:
    import threading

    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from .client import MissionClient

    overrides = {}
    for item in args.set:
        if "=" not in item:
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        overrides[k] = v
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    client = MissionClient(ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(client.node)
    t = threading.Thread(target=ex.spin, daemon=True)
    t.start()
    progress = _Progress(enabled=not args.json)
    try:
        token = args.owner_token if args.owner_token is not None else os.environ.get(cli_operator.TOKEN_ENV, "")
        accepted, result = client.send(args.goal, mission_id=args.mission_id, overrides=overrides,
                                       timeout_s=args.timeout, on_feedback=progress, owner=args.owner,
                                       owner_token=token)
    finally:
        progress.close()
        ex.shutdown(timeout_sec=2.0)
        t.join(timeout=5.0)
        client.destroy()
        rclpy.try_shutdown(context=ctx)
    if not accepted:
        print("robot-harness: the supervisor refused the mission (not active, busy, backend not active, or bad goal)",
              file=sys.stderr)
        return EXIT_RUNTIME
    out = {"mission_id": result.mission_id, "status": result.status, "summary": result.summary,
           "evidence_seqs": list(result.evidence_seqs), "evidence_ids": list(result.evidence_ids),
           "verdict_id": result.verdict_id, "contract_id": result.contract_id,
           "journal": result.journal_path, "bag": result.bag_path}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"status:  {out['status']}\nsummary: {out['summary']}\nverdict: {out['verdict_id'] or 'none'}"
              f"\njournal: {out['journal']}\nbag:     {out['bag'] or 'not recorded'}")
    return EXIT_OK
