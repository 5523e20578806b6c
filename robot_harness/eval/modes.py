"""Run one scenario under one harness mode, in-process on the simulated world.

* ``gated``: the full harness (``MissionRunner``: preconditions, leases,
  receipts, contracts, the independent verifier and the commit gate).
* ``monitored``: lifecycle tracking with timeouts, and no evidence gate: an
  action counts as done when the backend says it succeeded; the mission when
  the planner says done and no tracked action failed or timed out.
* ``direct``: today's agents: a navigation tool waits for the backend's
  result and reports it; the mission is done when the planner says so.

All three get the same world, faults and scripted model turns; the planner
sees each tool's result, and a scripted planner does not adapt to it (so the
inputs stay identical across modes). A turn's ``delay_s`` is the model's
latency: the world runs on while the planner "thinks", as it does on a robot.
"""
from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..core.clock import IdGenerator
from ..core.config import deep_merge, load_harness_config, place_poses
from ..compose import in_process_verifier, mission_runner
from ..core.errors import HarnessError, HarnessTimeout
from ..core.journal import open_journal
from ..core.memory import MemoryStore
from ..core.planner_script import ScriptedPlanner
from ..core.ports import PlannerRequest
from ..core.records import MissionStatus, Pose2D
from ..core.routing import navigation_providers
from ..core.scenario import Scenario
from ..core.nav_goals import NavGoal, NavGoalKind
from ..core.skills import PROPOSE_DONE, default_skills, nav_goal_for
from ..sim.world import SimConfig, parse_faults
from .adjudicate import Truth, adjudicate, duplicate_dispatches, foreign_preemptions
from .simports import SimPorts

__all__ = ["MODES", "ABLATIONS", "RunResult", "run_one", "sim_config", "sim_ports"]

MODES = ("direct", "monitored", "gated")
_UNBOUNDED = 10_000
ABLATIONS: dict[str, dict[str, Any]] = {
    # the pre-dispatch re-check passes whatever the fresh snapshot says
    "gated-no-revalidation": {"navigation": {"preconditions": {
        "max_observation_age_s": 1e9, "max_pose_drift_m": 1e9, "max_yaw_drift_rad": 1e9, "localization_continuous": False,
        "controller_idle": False, "no_conflicting_action": False, "target_unchanged": False, "battery_min": None,
        # nor the readiness and feasibility checks (issue 16)
        "lifecycle_active": [], "max_pose_std_xy_m": None, "max_pose_std_yaw_rad": None, "path_feasible": False,
        "goal_cell_free": False}}},
    # recovery never runs out of budget: only the turn budget and the mission timeout stop a loop
    "gated-no-bounded-recovery": {"recovery": {"re_perceive": _UNBOUNDED, "adjust_view": _UNBOUNDED,
                                               "local_replan": _UNBOUNDED, "switch_provider_or_skill": _UNBOUNDED},
                                  "limits": {"max_done_rejections": _UNBOUNDED}},
    # an action's outcome is the backend's word, about any goal, unbound to a fresh observation
    "gated-no-evidence-binding": {"eval_ablations": {"evidence_binding": False}},
    # the verifier's context is not isolated from the planner's: it reads the planner's claim
    # (here: what the planner said when it proposed done settles what no sensor can)
    "gated-no-role-isolation": {},
}


@dataclass
class RunResult:
    scenario: str
    category: str
    fault: str
    mode: str
    status: str
    truth: Truth
    duplicates: int
    wall_ms: float
    steps: int
    planner_calls: int
    sim_s: float
    recovery: str = ""
    summary: str = ""
    tokens: int = 0
    """Model tokens the mission used (0 for scripted turns; a recorded model's replay reports its own)."""
    dispatches: int = 0
    """Goals sent to the robot (accepted or not)."""
    stale_dispatches: int = 0
    """Motions sent on a world that had changed unseen: accepted while the pose stream was silent or
    frozen, or preempting a goal another client had the robot executing (from the simulator's truth)."""
    infeasible_dispatches: int = 0
    """Goals sent that could not be reached: the navigator inactive, or no path from the true pose (a goal in
    an obstacle, off the map, behind a closed door), from the simulator's truth."""
    recoveries: int = 0
    """Recovery decisions the mission took (the harness's own; 0 for the baselines)."""
    mission_id: str = ""

    @property
    def missed_waypoints_accepted(self) -> int:
        """Places the task had the robot pass that it never truly passed, in a mission declared SUCCEEDED."""
        return self.truth.missed_visits if self.claimed else 0

    @property
    def claimed(self) -> bool:
        return self.status == MissionStatus.SUCCEEDED.value

    def as_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "category": self.category, "fault": self.fault, "mode": self.mode,
                "status": self.status, "truth_done": self.truth.done, "truth_unmet": self.truth.unmet,
                "duplicates": self.duplicates, "wall_ms": round(self.wall_ms, 2), "steps": self.steps,
                "planner_calls": self.planner_calls, "tokens": self.tokens, "sim_s": round(self.sim_s, 2),
                "dispatches": self.dispatches, "stale_dispatches": self.stale_dispatches,
                "infeasible_dispatches": self.infeasible_dispatches,
                "missed_waypoints_accepted": self.missed_waypoints_accepted, "recovery": self.recovery,
                "recoveries": self.recoveries, "mission_id": self.mission_id, "summary": self.summary[:300]}


def sim_config(scenario: Scenario) -> SimConfig:
    """The world's configuration: the scenario's robot, with every fault it declares."""
    start = scenario.world.start_pose()
    r = scenario.robot
    world_faults = [f.model_dump(exclude_none=True) for f in r.faults]
    return SimConfig.from_data({
        "start": {"x": start.x, "y": start.y, "yaw": start.yaw}, "speed": r.speed, "yaw_rate": r.yaw_rate,
        "pose_rate_hz": r.pose_rate_hz, "odom_rate_hz": r.odom_rate_hz, "battery_start": r.battery_start,
        "camera_rate_hz": 2.0 if r.camera else 0.0, "faults": tuple(parse_faults(world_faults)), "map": r.map,
        "stop_on_failure": r.stop_on_failure, "providers": r.providers, "cameras": r.cameras})


def sim_ports(scenario: Scenario, artifacts_dir: Path, *, harness: Mapping[str, Any] | None = None) -> SimPorts:
    """The scenario's simulated robot, in-process on a virtual clock; with two or more navigation provider
    cards (or one under a namespace of its own: ``core/routing.navigation_providers``) in the harness configuration (``harness``, else the scenario's), routed through them by name, as
    the supervisor routes its Nav2 ports (one navigation card is no routing there either)."""
    cards = load_harness_config(overrides=dict(harness if harness is not None else scenario.harness_config())).providers
    navigation = navigation_providers(cards)
    return SimPorts(config=sim_config(scenario), artifacts_dir=artifacts_dir,
                    navigation_providers=navigation)


class _ClaimTrackingPlanner(ScriptedPlanner):
    """The scenario's turns; remembers the last thing it claimed (for the role-isolation ablation)."""

    def __init__(self, scenario: Scenario, ports: SimPorts) -> None:
        super().__init__(scenario.planner.turns)
        self.last_claim = ""
        self._ports = ports

    def next_turn(self, request: PlannerRequest) -> Any:
        self._ports.advance(self.delay_for(request.turn_index))  # the model's latency: the world runs on
        response = super().next_turn(request)
        claims = [response.done or "", response.text] + [
            str(c.arguments.get("summary", "")) for c in response.tool_calls if c.name == PROPOSE_DONE]
        self.last_claim = " ".join(c for c in claims if c) or self.last_claim
        return response


class _ClaimReadingChecker:
    """A semantic judge whose context holds the planner's words: it believes a confident claim."""

    def __init__(self, planner: _ClaimTrackingPlanner) -> None:
        self.planner = planner

    def judge(self, ob: Any, *, goal: str, receipts: Any, artifacts: Any) -> tuple[Any, str]:
        from ..core.completion import StepVerdict

        if self.planner.last_claim:
            return StepVerdict.SATISFIED, f"the planner says so: {self.planner.last_claim[:120]!r}"
        return StepVerdict.AMBIGUOUS, "nothing claimed"


def run_one(scenario: Scenario, mode: str, *, workdir: Path | None = None, journal: str = "memory",
            overrides: dict[str, Any] | None = None, journal_path: Path | None = None,
            config_pin: Any = None, planner: Callable[[Scenario, SimPorts], Any] | None = None) -> RunResult:
    """One mission of ``scenario`` under ``mode`` (a MODES entry or an ABLATIONS key).

    ``overrides``: changes over the scenario's harness configuration (a configuration version's, for
    ``robot-harness config evaluate``); ``journal_path``: a journal file shared with other runs (random
    mission ids then), ``config_pin`` the version journaled with the mission; ``planner``: who plays the
    model (built on the run's ports; it must count its turns in ``calls``), by default the scenario's script."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="robot_harness-eval-"))
    workdir.mkdir(parents=True, exist_ok=True)
    harness = deep_merge(scenario.harness_config(), overrides or {})  # the same the ROS runner hands the supervisor
    ports = sim_ports(scenario, workdir / "artifacts", harness=harness)
    if journal_path is not None:
        ports.ids = IdGenerator(None)  # snapshot ids unique in a journal other runs write to
    planner = planner(scenario, ports) if planner is not None else _ClaimTrackingPlanner(scenario, ports)
    started = time.perf_counter()
    tokens = 0
    if mode == "gated" or mode in ABLATIONS:
        status, summary, steps, recovery, tokens, recoveries, mission_id = _gated(
            scenario, mode, harness, ports, planner, workdir, journal, journal_path=journal_path, pin=config_pin)
    elif mode in ("direct", "monitored"):
        status, summary, steps, recovery = _baseline(scenario, mode, harness, ports, planner)
        recoveries, mission_id = 0, ""
    else:
        raise ValueError(f"unknown mode {mode!r}; known: {[*MODES, *ABLATIONS]}")
    wall_ms = (time.perf_counter() - started) * 1000.0 - ports.sim_cpu_s * 1000.0  # the harness's (or agent's) own
    return RunResult(scenario=scenario.name, category=scenario.category, fault=scenario.fault, mode=mode,
                     status=status, truth=adjudicate(scenario, ports),
                     duplicates=duplicate_dispatches(ports.world.events), wall_ms=wall_ms, steps=steps,
                     planner_calls=planner.calls, sim_s=ports.clock.monotonic(), recovery=recovery, summary=summary,
                     tokens=tokens, dispatches=len(ports.sent_goals),
                     stale_dispatches=ports.blind_dispatches + foreign_preemptions(ports.world.events,
                                                                                   ports.foreign_goals),
                     infeasible_dispatches=ports.infeasible_dispatches, recoveries=recoveries,
                     mission_id=mission_id)


class _GatedRun(NamedTuple):
    status: str
    summary: str
    steps: int
    recovery: str
    tokens: int
    recoveries: int
    mission_id: str


def _gated(scenario: Scenario, mode: str, harness: dict[str, Any], ports: SimPorts, planner: Any, workdir: Path,
           journal_kind: str, *, journal_path: Path | None = None, pin: Any = None) -> _GatedRun:
    config = load_harness_config(overrides=deep_merge(harness, ABLATIONS.get(mode, {})))
    ids = IdGenerator(7 if journal_path is None else None)
    journal = (open_journal(str(journal_path or workdir / "journal.sqlite3"), clock=ports.clock, ids=ids)
               if journal_kind == "sqlite" or journal_path is not None else open_journal(None, clock=ports.clock, ids=ids))
    verifier = None
    if mode == "gated-no-role-isolation":
        verifier = in_process_verifier(config=config, snapshots=ports, ids=ids, clock=ports.clock,
                                       semantic=_ClaimReadingChecker(planner))
    runner = mission_runner(config=config, journal=journal, clock=ports.clock, ids=ids, memory=MemoryStore(journal),
                           skills=default_skills(config.navigation, ask_operator=config.interactions.ask_operator),
                           snapshots=ports, planner=planner, navigation=ports, robot_io=ports, sleep=ports.sleep,
                           verifier=verifier, feasibility=ports, config_pin=pin)
    out = runner.run(scenario.goal)
    from ..core.payloads import RecoveryDecided, payload_of
    from ..core.records import EventType

    events = journal.events(mission_id=out.mission_id)
    steps = sum(1 for e in events if e.type is EventType.TOOL_CALL_RECORDED)
    rungs = [payload_of(e, RecoveryDecided).decision.rung.value for e in events if e.type is EventType.RECOVERY_DECIDED]
    recovery = _recovery_outcome(out.status.value, rungs)
    journal.close()
    return _GatedRun(status=out.status.value, summary=out.summary, steps=steps, recovery=recovery,
                     tokens=int(out.model_usage.get("total_tokens") or 0), recoveries=len(rungs),
                     mission_id=out.mission_id)


def _recovery_outcome(status: str, rungs: list[str]) -> str:
    if not rungs:
        return ""
    if status == MissionStatus.SUCCEEDED.value:
        return "recovered"
    if rungs[-1] in ("safe_stop", "human_handoff"):
        return "escalated"
    return "failed"


def _baseline(scenario: Scenario, mode: str, harness: dict[str, Any], ports: SimPorts,
              planner: Any) -> tuple[str, str, int, str]:
    """The direct and monitored loops: a tool-calling agent with a navigation tool and the devices."""
    config = load_harness_config(overrides=harness)
    places = place_poses(config)
    skills = default_skills(config.navigation)
    nav = config.navigation
    deadline = ports.clock.monotonic() + config.limits.mission_timeout_s
    failures: list[str] = []
    steps = 0
    last: list[dict[str, Any]] = []
    for turn in range(config.limits.max_turns):
        if ports.clock.monotonic() >= deadline:
            return MissionStatus.UNKNOWN.value, "mission timeout", steps, ""
        response = planner.next_turn(PlannerRequest(mission_id="eval", model_turn_id=f"t{turn}", turn_index=turn,
                                                    context={"last_results": last}, tools=()))
        last = []
        done_text = response.done
        for call in response.tool_calls:
            steps += 1
            if call.name == PROPOSE_DONE:
                done_text = str(call.arguments.get("summary", "done"))
                continue
            try:
                skill = skills.get(call.name)
                args = skill.validate(call.arguments)
            except HarnessError as exc:
                last.append({"name": call.name, "error": exc.message})
                continue
            if skill.physical:
                try:
                    goal = nav_goal_for(skill, args, places)
                except HarnessError as exc:
                    last.append({"name": call.name, "error": exc.message})
                    continue
                result = _navigate(ports, goal, mode, nav, deadline)
                if result != "succeeded":
                    failures.append(result)
                last.append({"name": call.name, "result": result})
            else:
                try:
                    content = _device_call(ports, call.name, args, places)
                    last.append({"name": call.name, "result": content})
                    if mode == "monitored" and isinstance(content, dict) and "ack_error" in content:
                        failures.append(f"{call.name}: {content['ack_error']}")  # a delivery that timed out
                except HarnessError as exc:
                    failures.append(exc.message)
                    last.append({"name": call.name, "error": exc.message})
        if done_text is not None:
            if mode == "monitored" and failures:
                return (MissionStatus.UNKNOWN.value,
                        f"planner said done, but tracked actions failed: {'; '.join(failures)}", steps, "")
            return MissionStatus.SUCCEEDED.value, f"planner said done: {done_text}", steps, ""
        if response.silent:
            return MissionStatus.UNKNOWN.value, "the planner stopped", steps, ""
    return MissionStatus.UNKNOWN.value, "turn budget exhausted", steps, ""


def _navigate(ports: SimPorts, goal: NavGoal, mode: str, nav: Any, deadline: float) -> str:
    """direct: send and wait for the backend's word (re-sending once when no answer comes, as clients
    commonly do); monitored: the same with a timeout, a cancel, and 'unknown' when no terminal report came.
    A route is one goal: the backend's word on it is all either loop hears (no per-waypoint evidence)."""
    target = goal.target or ports.world.localized_pose
    sends = 0
    while True:
        sends += 1
        try:
            ack = ports.send_goal(target=target, frame_id="map", timeout_s=nav.accept_timeout_s,
                                  **({"goal": goal} if goal.kind is not NavGoalKind.NAVIGATE_TO_POSE else {}))
        except HarnessTimeout:
            if mode == "direct" and sends < 2:
                continue  # no answer: ask again (a second motion if the first was in fact accepted)
            return "no answer from the navigator"
        except HarnessError as exc:
            return f"not sent: {exc.message}"
        break
    if not ack.accepted:
        return f"rejected: {ack.reason}"
    limit = (nav.timeout_s + nav.timeout_per_m_s * goal.length_from(ports.world.localized_pose)
             if mode == "monitored" else math.inf)
    started = ports.clock.monotonic()
    while ports.clock.monotonic() < min(deadline, started + limit):
        for ev in ports.poll(0.1):
            if ev.goal_id == ack.goal_id and ev.status in ("succeeded", "aborted", "canceled"):
                return ev.status
    if mode == "monitored":
        ports.cancel(ack.goal_id, timeout_s=nav.cancel_timeout_s)
        return "unknown: no terminal report before the timeout"
    return "unknown: mission timeout"


def _device_call(ports: SimPorts, name: str, args: Any, places: dict[str, Pose2D]) -> Any:
    if name == "capture_image":
        return ports.capture_image(label=getattr(args, "label", "")).model_dump()
    if name == "speak":
        return ports.speak(text=args.text)
    if name == "send_message":
        return ports.send_message(to=args.to, text=args.text, artifacts=[])
    if name == "lookup_place":
        return places[args.place].model_dump() if args.place in places else {"error": "unknown place"}
    if name == "get_pose":  # what the pose topic last carried, as the harness's get_pose reports it
        snap = ports.capture(reason="get_pose", mission_id="eval")
        return {"availability": snap.pose_meta.availability.value, "age_s": snap.pose_meta.age_s,
                **(snap.pose.model_dump() if snap.pose is not None else {})}
    return {"note": f"{name} is not simulated in the baseline"}

