"""Outcome checks: the independent judgement of what a physical action achieved.

A backend's "succeeded" is one piece of evidence. The verdict also needs a
fresh post-terminal observation that agrees; missing or conflicting evidence
gives UNKNOWN or FAILED, never SUCCEEDED.
"""
from __future__ import annotations

import enum
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from collections.abc import Mapping, Sequence

from .config import OutcomeTolerance
from .nav_goals import NavGoal, NavGoalKind, WaypointReport
from .records import ActionStatus, Availability, Pose2D, WorldSnapshot, normalize_angle

__all__ = ["BackendTerminal", "OutcomeVerdict", "check_navigation_outcome", "check_route_waypoints",
           "check_behavior_outcome", "waypoint_rows"]


class BackendTerminal(str, enum.Enum):
    """How the backend said a goal ended (evidence, not verdict)."""

    SUCCEEDED = "succeeded"
    """The backend reported success."""
    ABORTED = "aborted"
    """The backend gave up."""
    CANCELED = "canceled"
    """The goal was cancelled (by us, an operator, or preemption)."""
    NONE = "none"
    """No terminal report arrived within the timeout."""


class OutcomeVerdict(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: str = "outcome_verdict"
    state: ActionStatus
    reason: str
    evidence: dict[str, Any] = Field(default_factory=dict)


def _fresh_after(post: WorldSnapshot, tol: OutcomeTolerance, not_before: float | None) -> tuple[bool, bool]:
    """(the post-terminal pose is fresh, it was observed at or after ``not_before``): a pose observed before
    the terminal report says nothing about where the action ended, so it is not fresh."""
    meta = post.pose_meta
    observed_after = not_before is None or (meta.source_stamp is not None and meta.source_stamp >= not_before)
    fresh = (post.pose is not None and meta.availability is Availability.AVAILABLE and meta.age_s is not None
             and meta.age_s <= tol.max_pose_age_s and observed_after)
    return fresh, observed_after


def check_navigation_outcome(
    *,
    target: Pose2D,
    backend: BackendTerminal,
    post: WorldSnapshot,
    dispatch: WorldSnapshot,
    tol: OutcomeTolerance,
    not_before: float | None = None,
) -> OutcomeVerdict:
    """Judge a navigation action from the backend's report and a fresh pose.

    ``not_before`` is when the terminal report arrived: a pose observed before
    it says nothing about where the action ended, so it does not count as fresh.
    """
    evidence: dict[str, Any] = {
        "backend_terminal": backend.value,
        "post_snapshot_id": post.snapshot_id,
        "dispatch_snapshot_id": dispatch.snapshot_id,
        "pose_availability": post.pose_meta.availability.value,
        "pose_age_s": post.pose_meta.age_s,
        "target": target.model_dump(),
    }
    if backend is BackendTerminal.NONE:
        return OutcomeVerdict(state=ActionStatus.UNKNOWN, reason="no terminal report from the backend before the timeout", evidence=evidence)

    fresh, evidence["pose_observed_after_terminal"] = _fresh_after(post, tol, not_before)
    if not fresh or post.pose is None:
        if backend is not BackendTerminal.SUCCEEDED:
            return OutcomeVerdict(state=ActionStatus.FAILED, reason=f"backend {backend.value}; no fresh pose to check", evidence=evidence)
        return OutcomeVerdict(
            state=ActionStatus.UNKNOWN,
            reason=f"backend succeeded but no fresh pose observed after the terminal report "
            f"({post.pose_meta.availability.value.lower()}, age {post.pose_meta.age_s}) — success cannot be confirmed",
            evidence=evidence,
        )

    distance = post.pose.distance_to(target)
    yaw_err = post.pose.yaw_error(target)
    evidence.update(
        distance_to_target_m=round(distance, 3),
        yaw_error_rad=round(yaw_err, 3),
        final_pose=post.pose.model_dump(),
        pose_jumps_during_action=post.pose_jumps - dispatch.pose_jumps,
    )
    if tol.require_no_pose_jump and post.pose_jumps != dispatch.pose_jumps:
        return OutcomeVerdict(
            state=ActionStatus.UNKNOWN,
            reason="localization jumped during the action; the final pose cannot be trusted",
            evidence=evidence,
        )
    within = distance <= tol.xy_m and yaw_err <= tol.yaw_rad
    if backend is BackendTerminal.SUCCEEDED:
        if within:
            return OutcomeVerdict(
                state=ActionStatus.SUCCEEDED,
                reason=f"backend succeeded and fresh pose is {distance:.2f} m / {yaw_err:.2f} rad from target",
                evidence=evidence,
            )
        return OutcomeVerdict(
            state=ActionStatus.FAILED,
            reason=f"backend reported success but the fresh pose is {distance:.2f} m / {yaw_err:.2f} rad from target "
            f"(tolerance {tol.xy_m} m / {tol.yaw_rad} rad)",
            evidence=evidence,
        )
    if within:
        return OutcomeVerdict(
            state=ActionStatus.UNKNOWN,
            reason=f"conflicting evidence: backend {backend.value} but the pose is within tolerance of the target",
            evidence=evidence,
        )
    return OutcomeVerdict(
        state=ActionStatus.FAILED,
        reason=f"backend {backend.value}; pose {distance:.2f} m from target",
        evidence=evidence,
    )


def waypoint_rows(goal: NavGoal, *, seen: Mapping[int, tuple[str, float]], reports: Sequence[WaypointReport],
                  names: Sequence[str]) -> list[dict[str, Any]]:
    """A route's waypoints as records (a route receipt's result, its outcome's evidence): place, pose, what
    the backend reported, and the harness's own observation (snapshot id and pose stamp), or None."""
    told = {r.index: r for r in reports}
    return [{"index": k, "place": names[k] if k < len(names) else "", "pose": pose.model_dump(),
             "reported": told[k].model_dump(mode="json") if k in told else None,
             "observed": {"snapshot_id": seen[k][0], "t": seen[k][1]} if k in seen else None}
            for k, pose in enumerate(goal.poses)]


def check_route_waypoints(verdict: OutcomeVerdict, *, goal: NavGoal, seen: Mapping[int, tuple[str, float]],
                          reports: Sequence[WaypointReport], names: Sequence[str]) -> OutcomeVerdict:
    """A route also needs each waypoint before the last: a fresh pose observed within tolerance of it, in
    order, during the action (``seen``), and no report from the backend that it was skipped or failed.
    A route whose end was verified but which missed a waypoint is FAILED, naming it: Nav2's SUCCEEDED
    for a route says nothing about the waypoints (a skipped one is reported COMPLETED, or not at all)."""
    told = {r.index: r for r in reports}
    rows = waypoint_rows(goal, seen=seen, reports=reports, names=names)
    missed = []
    last = len(goal.poses) - 1
    for k, pose in enumerate(goal.poses):
        label = rows[k]["place"] or f"({pose.x:.2f}, {pose.y:.2f})"
        rep, obs = told.get(k), seen.get(k)
        if rep is not None and rep.missed:
            said = f": {rep.error_msg}" if rep.error_msg else ""
            missed.append(f"waypoint {label} (#{k + 1}) reported {rep.state.value} by the backend "
                          f"(error {rep.error_code}{said})")
        elif obs is None and k < last:
            missed.append(f"waypoint {label} (#{k + 1}) was never observed: no fresh pose within tolerance of "
                          "it during the action")
    evidence = {**verdict.evidence, "waypoints": rows, "waypoints_missed": len(missed)}
    if not missed:
        return verdict.model_copy(update={"evidence": evidence})
    state = ActionStatus.FAILED if verdict.state is ActionStatus.SUCCEEDED else verdict.state
    return OutcomeVerdict(state=state, reason=f"{verdict.reason}; but {'; '.join(missed)}", evidence=evidence)


def check_behavior_outcome(*, goal: NavGoal, backend: BackendTerminal, post: WorldSnapshot, dispatch: WorldSnapshot,
                           tol: OutcomeTolerance, not_before: float | None = None) -> OutcomeVerdict:
    """Judge a Nav2 behaviour from the backend's report and a fresh pose against the pose at dispatch:
    a back-up must have moved the robot back (at least half the distance asked), a spin turned it by the
    angle asked (within the yaw tolerance) without driving off, a wait left it where it was. Clearing the
    costmaps moves nothing: the services' answer is all there is to see."""
    evidence: dict[str, Any] = {"backend_terminal": backend.value, "behavior": goal.kind.value,
                                "post_snapshot_id": post.snapshot_id, "dispatch_snapshot_id": dispatch.snapshot_id}
    if backend is BackendTerminal.NONE:
        return OutcomeVerdict(state=ActionStatus.UNKNOWN, reason="no terminal report from the backend before the "
                              "timeout", evidence=evidence)
    if goal.kind is NavGoalKind.CLEAR_COSTMAPS:
        if backend is BackendTerminal.SUCCEEDED:
            return OutcomeVerdict(state=ActionStatus.SUCCEEDED, reason="the costmaps' clear services answered",
                                  evidence=evidence)
        return OutcomeVerdict(state=ActionStatus.FAILED, reason=f"costmap clear {backend.value}", evidence=evidence)
    start = dispatch.pose
    fresh, _ = _fresh_after(post, tol, not_before)
    if not fresh or post.pose is None or start is None:
        state = ActionStatus.UNKNOWN if backend is BackendTerminal.SUCCEEDED else ActionStatus.FAILED
        return OutcomeVerdict(state=state, reason=f"backend {backend.value}; no fresh pose after the behaviour "
                              "to compare with the pose at dispatch", evidence=evidence)
    dx, dy = post.pose.x - start.x, post.pose.y - start.y
    moved = post.pose.distance_to(start)
    turned = normalize_angle(post.pose.yaw - start.yaw)
    back = -(dx * math.cos(start.yaw) + dy * math.sin(start.yaw))
    evidence.update(moved_m=round(moved, 3), backed_m=round(back, 3), turned_rad=round(turned, 3),
                    final_pose=post.pose.model_dump(), pose_jumps_during_action=post.pose_jumps - dispatch.pose_jumps)
    if tol.require_no_pose_jump and post.pose_jumps != dispatch.pose_jumps:
        return OutcomeVerdict(state=ActionStatus.UNKNOWN, reason="localization jumped during the behaviour; "
                              "what it did cannot be told", evidence=evidence)
    if goal.kind is NavGoalKind.BACK_UP:
        ok = back >= 0.5 * goal.backup_dist_m and moved <= goal.backup_dist_m + tol.xy_m
        did = f"backed up {back:.2f} m (asked {goal.backup_dist_m:g} m; moved {moved:.2f} m in all)"
    elif goal.kind is NavGoalKind.SPIN:
        err = abs(normalize_angle(turned - goal.spin_dist_rad))
        ok = err <= tol.yaw_rad and moved <= tol.xy_m
        did = f"turned {turned:.2f} rad (asked {goal.spin_dist_rad:.2f}; off by {err:.2f}), moved {moved:.2f} m"
    else:
        ok = moved <= tol.xy_m and abs(turned) <= tol.yaw_rad
        did = f"moved {moved:.2f} m and turned {turned:.2f} rad while waiting"
    if backend is not BackendTerminal.SUCCEEDED:
        return OutcomeVerdict(state=ActionStatus.FAILED, reason=f"backend {backend.value}; {did}", evidence=evidence)
    if ok:
        return OutcomeVerdict(state=ActionStatus.SUCCEEDED, reason=f"backend succeeded and the fresh pose agrees: {did}",
                              evidence=evidence)
    return OutcomeVerdict(state=ActionStatus.FAILED, reason=f"backend reported success but the fresh pose "
                          f"disagrees: {did}", evidence=evidence)
