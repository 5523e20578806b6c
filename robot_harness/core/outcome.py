"""Outcome checks: the independent judgement of what a physical action achieved.

A backend's "succeeded" is one piece of evidence. The verdict also needs a
fresh post-terminal observation that agrees; missing or conflicting evidence
gives UNKNOWN or FAILED, never SUCCEEDED.
"""
from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .config import OutcomeTolerance
from .records import ActionStatus, Availability, Pose2D, WorldSnapshot

__all__ = ["BackendTerminal", "OutcomeVerdict", "check_navigation_outcome"]


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

    observed_after = (
        not_before is None
        or (post.pose_meta.source_stamp is not None and post.pose_meta.source_stamp >= not_before)
    )
    evidence["pose_observed_after_terminal"] = observed_after
    fresh = (
        post.pose is not None
        and post.pose_meta.availability is Availability.AVAILABLE
        and post.pose_meta.age_s is not None
        and post.pose_meta.age_s <= tol.max_pose_age_s
        and observed_after
    )
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
