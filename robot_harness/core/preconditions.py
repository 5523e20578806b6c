"""Pre-dispatch revalidation: is the world still what the model decided on?"""
from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from .config import Preconditions, Workspace
from .records import ActionView, Availability, ControllerState, Pose2D, WorldSnapshot

__all__ = ["Check", "PreconditionReport", "check_preconditions", "not_ready"]


class Check(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    ok: bool
    detail: str


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
) -> PreconditionReport:
    """Evaluate every declared precondition; all of them, so the report is complete.

    A target must also be finite, inside ``workspace`` (when there is one) and within
    ``pre.max_goal_distance_m`` of the fresh pose: nothing unvalidated reaches the robot."""
    checks: list[Check] = []
    if target_now is not None:
        finite = all(math.isfinite(v) for v in (target_now.x, target_now.y, target_now.yaw))
        checks.append(Check(name="target_finite", ok=finite, detail=f"target {target_now}"))
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
        same = target_at_decision is not None and target_now is not None and target_at_decision == target_now
        checks.append(Check(name="target_unchanged", ok=same, detail=f"decision {target_at_decision}, now {target_now}"))
    if pre.battery_min is not None:
        bm = fresh.battery_meta
        ok = bm.availability is Availability.AVAILABLE and fresh.battery is not None and fresh.battery >= pre.battery_min
        checks.append(Check(
            name="battery_min",
            ok=ok,
            detail=f"battery {_fmt(fresh.battery)} ({bm.availability.value}), min {pre.battery_min}",
        ))
    return PreconditionReport(
        ok=all(c.ok for c in checks),
        checks=tuple(checks),
        decision_snapshot_id=decision.snapshot_id,
        fresh_snapshot_id=fresh.snapshot_id,
    )


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
