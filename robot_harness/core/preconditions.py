"""Pre-dispatch revalidation: is the world still what the model decided on, is the robot ready to move,
and can the goal be reached?

The readiness and feasibility answers (lifecycle states, a path dry run, the goal cell's cost) are asked of
the robot by a ``ports.FeasibilityPort`` and handed in as a ``Feasibility``; the checks here are pure. A check
the robot cannot answer (no planner server, no costmap query, a pose source without covariance) is kept in
the report as not applicable (``Check.applicable`` False, with why), never left out silently."""
from __future__ import annotations

import enum
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from .config import Preconditions, Workspace
from .records import ActionView, Availability, ControllerState, Pose2D, WorldSnapshot

__all__ = ["Check", "CostProbe", "Feasibility", "LifecycleProbe", "PathProbe", "PreconditionReport", "ProbeStatus",
           "check_preconditions", "not_ready"]


class Check(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    ok: bool
    detail: str
    applicable: bool = True
    """False: the robot cannot answer this check (``detail`` says why); it passes, on the record."""


class ProbeStatus(str, enum.Enum):
    ANSWERED = "answered"
    ABSENT = "absent"
    """The robot has no such server (no planner server, no costmap query)."""
    UNANSWERED = "unanswered"
    """The server is there but gave no answer in time, or failed: the check fails (fail closed)."""


class _Probe(BaseModel):
    model_config = ConfigDict(frozen=True)
    status: ProbeStatus = ProbeStatus.ANSWERED
    error: str = ""
    """Why it is absent or unanswered, or the server's own error message."""
    where: str = ""
    """For a route, which leg or waypoint this answer is about ("" for a single goal)."""


class LifecycleProbe(_Probe):
    node: str
    state: str = ""
    """The lifecycle state's label (``active``, ``inactive``, ...); "" when not answered."""


class PathProbe(_Probe):
    """A ``ComputePathToPose`` dry run from the fresh pose to the target."""

    ok: bool = False
    length_m: float | None = None
    poses: int = 0
    error_code: int = 0
    """Nav2's result code (0: none)."""
    planning_time_s: float | None = None


class CostProbe(_Probe):
    """The goal cell's cost in the global costmap (Nav2 ``GetCosts``)."""

    cost: float | None = None


class Feasibility(BaseModel):
    """What the robot said, right before a navigation, about its readiness and the target (journaled in the
    precondition report's checks)."""

    model_config = ConfigDict(frozen=True)
    lifecycle: tuple[LifecycleProbe, ...] = ()
    path: PathProbe | None = None
    """None: not asked (the check is off, or there is no target or pose)."""
    goal_cost: CostProbe | None = None
    duration_s: float = Field(default=0.0, ge=0.0)
    """How long asking took."""


class PreconditionReport(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: str = "precondition_report"
    ok: bool
    checks: tuple[Check, ...]
    decision_snapshot_id: str
    fresh_snapshot_id: str

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]


def check_preconditions(
    pre: Preconditions,
    *,
    decision: WorldSnapshot,
    fresh: WorldSnapshot,
    target_at_decision: Pose2D | None,
    target_now: Pose2D | None,
    active_actions: Sequence[ActionView],
    workspace: Workspace | None = None,
    feasibility: Feasibility | None = None,
    path_budget_m: float | None = None,
    waypoints: Sequence[Pose2D] = (),
) -> PreconditionReport:
    """Evaluate every declared precondition; all of them, so the report is complete.

    A target must also be finite, inside ``workspace`` (when there is one) and within
    ``pre.max_goal_distance_m`` of the fresh pose: nothing unvalidated reaches the robot.
    ``feasibility``: the robot's answers (``ports.FeasibilityPort``); None when this harness has no one to
    ask (each such check is then reported not applicable). ``path_budget_m``: the longest path the robot
    could walk in the mission's time left (None: no bound from time). ``waypoints``: a route's poses before
    ``target_now`` (each finite and in the workspace); a behaviour has no target (``target_*`` None)."""
    checks: list[Check] = []
    if target_now is not None:
        finite = all(math.isfinite(v) for v in (target_now.x, target_now.y, target_now.yaw))
        checks.append(Check(name="target_finite", ok=finite, detail=f"target {target_now}"))
        for k, w in enumerate(waypoints):
            w_ok = all(math.isfinite(v) for v in (w.x, w.y, w.yaw)) and (
                workspace is None or workspace.contains(w.x, w.y))
            if not w_ok:
                checks.append(Check(name="waypoints_valid", ok=False,
                                    detail=f"waypoint #{k + 1} ({w.x:.2f}, {w.y:.2f}) is not finite or lies outside "
                                           "the workspace"))
                break
        else:
            if waypoints:
                checks.append(Check(name="waypoints_valid", ok=True,
                                    detail=f"{len(waypoints)} waypoint(s) before the target, finite, in the workspace"))
        if workspace is not None:
            inside = finite and workspace.contains(target_now.x, target_now.y)
            checks.append(Check(name="target_in_workspace", ok=inside, detail=(
                f"target ({target_now.x:.2f}, {target_now.y:.2f}) in x [{workspace.min_x:.1f}, {workspace.max_x:.1f}], "
                f"y [{workspace.min_y:.1f}, {workspace.max_y:.1f}]" if finite else "target is not finite")))
        if pre.max_goal_distance_m is not None:
            if fresh.pose is None or not finite:
                checks.append(Check(name="goal_distance", ok=False, detail="no fresh pose or no finite target"))
            else:
                d = fresh.pose.distance_to(target_now)
                checks.append(Check(name="goal_distance", ok=d <= pre.max_goal_distance_m,
                                    detail=f"target {d:.2f} m away (max {pre.max_goal_distance_m} m)"))
    meta = fresh.pose_meta
    age_ok = meta.availability is Availability.AVAILABLE and meta.age_s is not None and meta.age_s <= pre.max_observation_age_s
    checks.append(Check(
        name="observation_age",
        ok=age_ok,
        detail=f"pose {meta.availability.value}, age {_fmt(meta.age_s)} s (max {pre.max_observation_age_s} s)",
    ))
    if decision.pose is None or decision.pose_meta.availability is not Availability.AVAILABLE:
        checks.append(Check(name="pose_drift", ok=False, detail="the decision snapshot had no fresh pose"))
    elif fresh.pose is None:
        checks.append(Check(name="pose_drift", ok=False, detail="no pose in the fresh snapshot"))
    else:
        drift = decision.pose.distance_to(fresh.pose)
        yaw_drift = decision.pose.yaw_error(fresh.pose)
        ok = drift <= pre.max_pose_drift_m and yaw_drift <= pre.max_yaw_drift_rad
        checks.append(Check(
            name="pose_drift",
            ok=ok,
            detail=f"moved {drift:.2f} m / {yaw_drift:.2f} rad since decision (max {pre.max_pose_drift_m} m / {pre.max_yaw_drift_rad} rad)",
        ))
    if pre.localization_continuous:
        checks.append(Check(
            name="localization_continuous",
            ok=fresh.pose_jumps == decision.pose_jumps,
            detail=f"{fresh.pose_jumps - decision.pose_jumps} localization jump(s) since decision",
        ))
    if pre.controller_idle:
        idle = fresh.controller_state is ControllerState.IDLE and fresh.navigation_meta.availability is Availability.AVAILABLE
        checks.append(Check(
            name="controller_idle",
            ok=idle,
            detail=f"controller {fresh.controller_state.value} ({fresh.navigation_meta.availability.value})",
        ))
    if pre.no_conflicting_action:
        live = [a for a in active_actions if not a.state.terminal]
        checks.append(Check(
            name="no_conflicting_action",
            ok=not live,
            detail="none in flight" if not live else "in flight: " + ", ".join(f"{a.action_id} ({a.state.value})" for a in live),
        ))
    if pre.target_unchanged:
        if target_at_decision is None and target_now is None:
            checks.append(Check(name="target_unchanged", ok=True, applicable=False,
                                detail="no target: a behaviour acts where the robot is"))
        else:
            same = target_at_decision is not None and target_now is not None and target_at_decision == target_now
            checks.append(Check(name="target_unchanged", ok=same,
                                detail=f"decision {target_at_decision}, now {target_now}"))
    if pre.battery_min is not None:
        bm = fresh.battery_meta
        ok = bm.availability is Availability.AVAILABLE and fresh.battery is not None and fresh.battery >= pre.battery_min
        checks.append(Check(
            name="battery_min",
            ok=ok,
            detail=f"battery {_fmt(fresh.battery)} ({bm.availability.value}), min {pre.battery_min}",
        ))
    checks.extend(_readiness_checks(pre, fresh, feasibility))
    if target_now is not None:
        checks.extend(_feasibility_checks(pre, feasibility, path_budget_m))
    return PreconditionReport(
        ok=all(c.ok for c in checks),
        checks=tuple(checks),
        decision_snapshot_id=decision.snapshot_id,
        fresh_snapshot_id=fresh.snapshot_id,
    )


_NOT_ASKED = "this harness has no feasibility probe (no robot to ask)"


def _readiness_checks(pre: Preconditions, fresh: WorldSnapshot, feasibility: Feasibility | None) -> list[Check]:
    checks: list[Check] = []
    if pre.lifecycle_active:
        if feasibility is None:
            checks.append(Check(name="lifecycle_active", ok=True, applicable=False, detail=_NOT_ASKED))
        else:
            told = {p.node: p for p in feasibility.lifecycle}
            parts, ok = [], True
            for node in pre.lifecycle_active:
                probe = told.get(node)
                if probe is None or probe.status is not ProbeStatus.ANSWERED:
                    ok = False
                    parts.append(f"{node} not answered ({probe.error if probe is not None and probe.error else 'not asked'})")
                else:
                    ok = ok and probe.state == "active"
                    parts.append(f"{node} {probe.state or 'unknown'}")
            checks.append(Check(name="lifecycle_active", ok=ok, detail=", ".join(parts) + " (must be active)"))
    if pre.max_pose_std_xy_m is not None or pre.max_pose_std_yaw_rad is not None:
        cov = fresh.pose_covariance
        if cov is None:
            why = f"no covariance from the pose source {fresh.pose_meta.source or '(none)'}"
            checks.append(Check(name="localization_covariance", ok=not pre.require_covariance,
                                applicable=pre.require_covariance,
                                detail=why + ("" if not pre.require_covariance else " (required)")))
        else:
            xy_ok = pre.max_pose_std_xy_m is None or cov.std_xy <= pre.max_pose_std_xy_m
            yaw_ok = pre.max_pose_std_yaw_rad is None or cov.std_yaw <= pre.max_pose_std_yaw_rad
            checks.append(Check(name="localization_covariance", ok=xy_ok and yaw_ok, detail=(
                f"pose std xy {cov.std_xy:.3f} m (max {_bound(pre.max_pose_std_xy_m)} m), "
                f"yaw {cov.std_yaw:.3f} rad (max {_bound(pre.max_pose_std_yaw_rad)} rad)")))
    return checks


def _at(probe: _Probe) -> str:
    return f"{probe.where}: " if probe.where else ""


def _feasibility_checks(pre: Preconditions, feasibility: Feasibility | None,
                        path_budget_m: float | None) -> list[Check]:
    checks: list[Check] = []
    if pre.path_feasible:
        path = feasibility.path if feasibility is not None else None
        if path is None or path.status is ProbeStatus.ABSENT:
            checks.append(_unanswerable("path_feasible", feasibility, path, "no planner server",
                                        pre.require_planner, "require_planner"))
        elif path.status is ProbeStatus.UNANSWERED:
            checks.append(Check(name="path_feasible", ok=False,
                                detail=f"{_at(path)}the planner did not answer: {path.error}"))
        elif not path.ok or path.length_m is None:
            checks.append(Check(name="path_feasible", ok=False, detail=(
                f"{_at(path)}no path to the target (planner error {path.error_code}"
                f"{': ' + path.error if path.error else ''})")))
        else:
            checks.append(Check(name="path_feasible", ok=True,
                                detail=f"a path of {path.length_m:.2f} m ({path.poses} poses)"))
            limits = [(b, what) for b, what in ((pre.max_path_length_m, "navigation.preconditions.max_path_length_m"),
                                                (path_budget_m, "what the mission's time left allows"))
                      if b is not None]
            if limits:
                bound, what = min(limits)
                checks.append(Check(name="path_length", ok=path.length_m <= bound, detail=(
                    f"path {path.length_m:.2f} m (max {max(bound, 0.0):.2f} m: {what})")))
    if pre.goal_cell_free:
        cost = feasibility.goal_cost if feasibility is not None else None
        if cost is None or cost.status is ProbeStatus.ABSENT:
            checks.append(_unanswerable("goal_cell_free", feasibility, cost, "no costmap query",
                                        pre.require_costmap, "require_costmap"))
        elif cost.status is ProbeStatus.UNANSWERED or cost.cost is None:
            checks.append(Check(name="goal_cell_free", ok=False,
                                detail=f"{_at(cost)}the costmap did not answer: {cost.error or 'no cost'}"))
        else:
            checks.append(Check(name="goal_cell_free", ok=cost.cost <= pre.max_goal_cost, detail=(
                f"{_at(cost)}goal cell cost {cost.cost:g} (max {pre.max_goal_cost}; 253 inscribed, 254 lethal, "
                f"255 no information)")))
    return checks


def _unanswerable(name: str, feasibility: Feasibility | None, probe: _Probe | None, absent: str, required: bool,
                  flag: str) -> Check:
    """A check the robot cannot answer (no one asked, or no such server): not applicable, on the record, or
    failed when the site requires it (``navigation.preconditions.<flag>``)."""
    why = _NOT_ASKED if feasibility is None else f"{absent} ({probe.error if probe else 'not asked'})"
    return Check(name=name, ok=not required, applicable=required,
                 detail=why + (f" (required: navigation.preconditions.{flag})" if required else "; not checked"))


def _bound(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def not_ready(snap: WorldSnapshot, pre: Preconditions) -> tuple[str, str] | None:
    """(code, reason) when a mission admitted on ``snap`` could not make its first move: a field the
    motion preconditions need (``pre``) is missing or stale, or the battery is below their minimum.

    Admission asks this so that a robot whose navigator or battery has not been heard from yet (it has
    just come up, or has just been replaced) refuses the mission with the cause, instead of admitting it
    and failing every navigation call on ``precondition_changed``. A controller that is fresh but busy is
    not refused here: a goal about to end is the precondition check's to wait out, right before dispatch."""
    if not snap.pose_meta.fresh:
        return "no_fresh_pose", (f"{snap.pose_meta.why_not_fresh('localized pose')}; missions are refused "
                                 "until localization publishes again")
    if pre.controller_idle and not snap.navigation_meta.fresh:
        return "no_navigator_status", (f"{snap.navigation_meta.why_not_fresh('navigator status')}; missions are "
                                       "refused until the navigator's state is known (its action status)")
    if pre.battery_min is not None:
        if not snap.battery_meta.fresh:
            return "no_fresh_battery", (f"{snap.battery_meta.why_not_fresh('battery state')}; missions are refused "
                                        "until the battery reports (or navigation.preconditions.battery_min is null)")
        if snap.battery is None or snap.battery < pre.battery_min:
            return "battery_low", (f"battery {_fmt(snap.battery)} is below the minimum {pre.battery_min} "
                                   "(navigation.preconditions.battery_min): no navigation could start")
    return None


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"
