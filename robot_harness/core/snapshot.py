"""The world as the harness believes it: latest observations with provenance.

``SnapshotBuilder`` keeps, per field, the newest observation together with the
header stamp it carried and the source it came from. ``capture`` freezes that
into a ``WorldSnapshot`` in which every field says whether it can be trusted
(AVAILABLE), is too old (STALE) or was never seen (MISSING); nothing is ever a
silent zero. ``project_for_model`` is the only view of a snapshot the model
gets: small, rounded, and guaranteed to fit a byte budget.

No ROS and no clock here: the node passes stamps and "now" in, so the same
observations always yield the same snapshot.
"""
from __future__ import annotations

import enum
import json
import math
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from robot_harness.core.errors import UsageError
from robot_harness.core.records import (
    FORMAT_VERSION,
    ActionView,
    ArtifactRef,
    Availability,
    ControllerState,
    FieldMeta,
    NavProgress,
    Pose2D,
    PoseCovariance,
    Velocity,
    WorldSnapshot,
    normalize_angle,
)

__all__ = [
    "FreshnessConfig",
    "SalientEventType",
    "SalientEvent",
    "SnapshotBuilder",
    "ByteCapTooSmall",
    "project_for_model",
]


class FreshnessConfig(BaseModel):
    """How old each field may be and still be trusted, plus salient-event thresholds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pose_max_age_s: float = Field(0.5, gt=0.0)
    velocity_max_age_s: float = Field(0.5, gt=0.0)
    navigation_max_age_s: float = Field(2.0, gt=0.0)
    battery_max_age_s: float = Field(5.0, gt=0.0)
    jump_threshold_m: float = Field(1.0, gt=0.0)
    """Displacement beyond what the robot could have driven that counts as a localization jump."""
    max_speed_mps: float = Field(2.0, ge=0.0)
    """Fastest plausible motion; ``max_speed_mps * dt`` is added to the jump threshold."""
    battery_low_threshold: float = Field(0.15, ge=0.0, le=1.0)
    battery_low_hysteresis: float = Field(0.02, ge=0.0, le=1.0)
    """The battery must climb this far above the threshold before another battery_low fires."""


class SalientEventType(str, enum.Enum):
    """Observations worth a snapshot of their own (the supervisor journals them)."""

    POSE_JUMP = "pose_jump"
    """Consecutive poses further apart than the robot could have moved."""
    CONTROLLER_IDLE = "controller_idle"
    """The navigator went from executing a goal to having none."""
    CONTROLLER_ACTIVE = "controller_active"
    """The navigator accepted or started executing a goal."""
    BATTERY_LOW = "battery_low"
    """The state of charge crossed below the configured threshold."""


class SalientEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["salient_event"] = "salient_event"
    format_version: int = FORMAT_VERSION
    type: SalientEventType
    stamp: float
    """Source stamp of the observation that raised the event."""
    source: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)


_NO_EVENTS: tuple[SalientEvent, ...] = ()


def _meta(stamp: float | None, source: str, max_age: float, now: float) -> FieldMeta:
    if stamp is None:
        return FieldMeta(availability=Availability.MISSING, max_age_s=max_age, source=source)
    age = now - stamp
    # A stamp from further in the future than the bound is a clock mismatch
    # (sim time vs wall time), which is no more trustworthy than an old one.
    fresh = -max_age <= age <= max_age
    return FieldMeta(
        availability=Availability.AVAILABLE if fresh else Availability.STALE,
        source_stamp=stamp,
        age_s=age,
        max_age_s=max_age,
        source=source,
    )


class SnapshotBuilder:
    """Latest observation per field, with source stamps; captures snapshots.

    Guarantees: an observation older (by source stamp) than the one already
    held for its field is ignored, so a late message never overwrites a newer
    belief; freshness is judged at capture time from ``now - source_stamp``;
    the ``update_*`` methods never raise on well-formed input and return the
    salient events the observation raised (usually none).
    """

    def __init__(self, config: FreshnessConfig | None = None, *, frame_id: str = "map") -> None:
        self.config = config if config is not None else FreshnessConfig()
        self.frame_id = frame_id
        self.pose_jumps = 0
        self.last_pose_jump_at: float | None = None

        self._pose: Pose2D | None = None
        self._pose_stamp: float | None = None
        self._pose_source = ""
        self._pose_covariance: PoseCovariance | None = None

        self._velocity: Velocity | None = None
        self._velocity_stamp: float | None = None
        self._velocity_source = ""

        self._battery: float | None = None
        self._battery_stamp: float | None = None
        self._battery_source = ""
        self._battery_low = False

        self._active_goal_ids: tuple[str, ...] = ()
        self._nav_stamp: float | None = None
        self._nav_source = ""
        self._nav_state: ControllerState | None = None

        self._fb_goal_id = ""
        self._fb_pose: Pose2D | None = None
        self._fb_distance: float | None = None
        self._fb_stamp: float | None = None
        self._fb_source = ""
        self._fb_progress: NavProgress | None = None

    def expect_sources(self, *, pose: str = "", velocity: str = "", battery: str = "", navigation: str = "") -> None:
        """Name where each field comes from before its first message, so a field never observed says
        which topic it waits on (``FieldMeta.source``, "no pose received on /amcl_pose")."""
        self._pose_source = self._pose_source or pose
        self._velocity_source = self._velocity_source or velocity
        self._battery_source = self._battery_source or battery
        self._nav_source = self._nav_source or navigation

    # -- observations ------------------------------------------------------

    def update_pose(self, pose: Pose2D, stamp: float, source: str,
                    covariance: PoseCovariance | None = None) -> Sequence[SalientEvent]:
        """Record a localized pose (with the localizer's covariance when its source has one); reports a
        ``pose_jump`` when it is implausibly far from the last."""
        prev, prev_stamp = self._pose, self._pose_stamp
        if prev_stamp is not None and stamp < prev_stamp:
            return _NO_EVENTS
        self._pose = pose
        self._pose_stamp = stamp
        self._pose_source = source
        self._pose_covariance = covariance
        if prev is None or prev_stamp is None:
            return _NO_EVENTS
        dt = stamp - prev_stamp
        displacement = math.hypot(pose.x - prev.x, pose.y - prev.y)
        allowed = self.config.jump_threshold_m + self.config.max_speed_mps * dt
        if displacement <= allowed:
            return _NO_EVENTS
        self.pose_jumps += 1
        self.last_pose_jump_at = stamp
        return [
            SalientEvent(
                type=SalientEventType.POSE_JUMP,
                stamp=stamp,
                source=source,
                detail={
                    "from": {"x": prev.x, "y": prev.y, "yaw": prev.yaw},
                    "to": {"x": pose.x, "y": pose.y, "yaw": pose.yaw},
                    "displacement_m": displacement,
                    "allowed_m": allowed,
                    "dt_s": dt,
                    "pose_jumps": self.pose_jumps,
                },
            )
        ]

    def update_velocity(self, v: Velocity, stamp: float, source: str) -> Sequence[SalientEvent]:
        """Record body velocity (odometry twist)."""
        if self._velocity_stamp is not None and stamp < self._velocity_stamp:
            return _NO_EVENTS
        self._velocity = v
        self._velocity_stamp = stamp
        self._velocity_source = source
        return _NO_EVENTS

    def update_battery(self, fraction: float, stamp: float, source: str) -> Sequence[SalientEvent]:
        """Record state of charge (0..1); reports ``battery_low`` once per downward crossing.

        A non-finite fraction (``BatteryState`` reports NaN when unmeasured) is
        not an observation and is ignored.
        """
        if not math.isfinite(fraction):
            return _NO_EVENTS
        if self._battery_stamp is not None and stamp < self._battery_stamp:
            return _NO_EVENTS
        self._battery = fraction
        self._battery_stamp = stamp
        self._battery_source = source
        threshold = self.config.battery_low_threshold
        if fraction < threshold:
            if not self._battery_low:
                self._battery_low = True
                return [
                    SalientEvent(
                        type=SalientEventType.BATTERY_LOW,
                        stamp=stamp,
                        source=source,
                        detail={"battery": fraction, "threshold": threshold},
                    )
                ]
        elif fraction >= threshold + self.config.battery_low_hysteresis:
            self._battery_low = False
        return _NO_EVENTS

    def update_nav_status(
        self, active_goal_ids: Sequence[str], stamp: float, source: str
    ) -> Sequence[SalientEvent]:
        """Record the navigator's goals in ACCEPTED or EXECUTING.

        The controller is ACTIVE when there is any, IDLE otherwise; a change
        between the two is reported (the first IDLE after start-up is not).
        Re-asserting the same list with a newer stamp only refreshes freshness.
        """
        if self._nav_stamp is not None and stamp < self._nav_stamp:
            return _NO_EVENTS
        previous_ids = self._active_goal_ids
        previous_state = self._nav_state
        ids = tuple(active_goal_ids)
        state = ControllerState.ACTIVE if ids else ControllerState.IDLE
        self._active_goal_ids = ids
        self._nav_stamp = stamp
        self._nav_source = source
        self._nav_state = state
        if state is previous_state or (previous_state is None and state is ControllerState.IDLE):
            return _NO_EVENTS
        if state is ControllerState.ACTIVE:
            return [
                SalientEvent(
                    type=SalientEventType.CONTROLLER_ACTIVE,
                    stamp=stamp,
                    source=source,
                    detail={"goal_ids": list(ids)},
                )
            ]
        return [
            SalientEvent(
                type=SalientEventType.CONTROLLER_IDLE,
                stamp=stamp,
                source=source,
                detail={"previous_goal_ids": list(previous_ids)},
            )
        ]

    def update_nav_feedback(
        self,
        goal_id: str,
        current_pose: Pose2D | None,
        distance_remaining: float | None,
        stamp: float,
        source: str,
        progress: NavProgress | None = None,
    ) -> Sequence[SalientEvent]:
        """Record navigator feedback for one goal (``progress``: its time and recovery counters).

        Feedback for a goal the status lists as active also confirms that
        status, so it refreshes the navigation stamp (the status topic itself
        only publishes on change). ``current_pose`` is the navigator's own
        idea of the pose; it is kept for diagnosis, never used as the pose.
        """
        if self._fb_stamp is not None and stamp < self._fb_stamp:
            return _NO_EVENTS
        self._fb_goal_id = goal_id
        self._fb_pose = current_pose
        self._fb_distance = (
            distance_remaining
            if distance_remaining is not None and math.isfinite(distance_remaining)
            else None
        )
        self._fb_stamp = stamp
        self._fb_source = source
        self._fb_progress = progress
        if goal_id in self._active_goal_ids and self._nav_stamp is not None and stamp > self._nav_stamp:
            self._nav_stamp = stamp
        return _NO_EVENTS

    @property
    def active_goal_ids(self) -> tuple[str, ...]:
        """Goals the last status message listed as ACCEPTED or EXECUTING."""
        return self._active_goal_ids

    @property
    def has_nav_status(self) -> bool:
        return self._nav_stamp is not None

    @property
    def last_feedback_pose(self) -> Pose2D | None:
        return self._fb_pose

    # -- capture -----------------------------------------------------------

    def capture(
        self,
        *,
        snapshot_id: str,
        now: float,
        reason: str,
        mission_id: str = "",
        active_action: ActionView | None = None,
        recent_outcome: ActionView | None = None,
        artifacts: Sequence[ArtifactRef] = (),
    ) -> WorldSnapshot:
        """Freeze the current beliefs, judged for freshness at ``now``.

        A STALE field keeps its value (for diagnosis); a MISSING one has none.
        The controller is UNKNOWN unless the navigation status is AVAILABLE.
        Distance remaining is only reported from fresh feedback for the goal
        the status lists as active.
        """
        cfg = self.config
        pose_meta = _meta(self._pose_stamp, self._pose_source, cfg.pose_max_age_s, now)
        velocity_meta = _meta(
            self._velocity_stamp, self._velocity_source, cfg.velocity_max_age_s, now
        )
        battery_meta = _meta(self._battery_stamp, self._battery_source, cfg.battery_max_age_s, now)
        nav_meta = _meta(self._nav_stamp, self._nav_source, cfg.navigation_max_age_s, now)

        if nav_meta.fresh and self._nav_state is not None:
            controller = self._nav_state
        else:
            controller = ControllerState.UNKNOWN

        goal_id = ""
        if self._active_goal_ids:
            goal_id = (
                self._fb_goal_id
                if self._fb_goal_id in self._active_goal_ids
                else self._active_goal_ids[0]
            )
        distance: float | None = None
        progress: NavProgress | None = None
        if (
            goal_id
            and self._fb_goal_id == goal_id
            and self._fb_stamp is not None
            and abs(now - self._fb_stamp) <= cfg.navigation_max_age_s
        ):
            distance = self._fb_distance
            progress = self._fb_progress

        return WorldSnapshot(
            snapshot_id=snapshot_id,
            mission_id=mission_id,
            reason=reason,
            captured_at=now,
            frame_id=self.frame_id,
            pose=self._pose,
            pose_meta=pose_meta,
            pose_jumps=self.pose_jumps,
            last_pose_jump_at=self.last_pose_jump_at,
            pose_covariance=self._pose_covariance,
            velocity=self._velocity,
            velocity_meta=velocity_meta,
            controller_state=controller,
            nav_goal_id=goal_id,
            distance_remaining=distance,
            nav_progress=progress,
            navigation_meta=nav_meta,
            battery=self._battery,
            battery_meta=battery_meta,
            active_action=active_action,
            recent_outcome=recent_outcome,
            artifacts=tuple(artifacts),
        )


# -- the model's view ---------------------------------------------------------


class ByteCapTooSmall(UsageError, ValueError):
    """``project_for_model`` was given a byte cap below its essentials (pose + availability)."""

    code = "byte_cap_too_small"


def _field(meta: FieldMeta) -> dict[str, Any]:
    return {
        "status": meta.availability.value,
        "age_s": None if meta.age_s is None else round(meta.age_s, 1),
    }


def _action(view: ActionView) -> dict[str, Any]:
    out: dict[str, Any] = {"action_id": view.action_id, "skill": view.skill, "state": view.state.value}
    if view.reason:
        out["reason"] = view.reason
    return out


def _size(d: dict[str, Any]) -> int:
    return len(json.dumps(d))


def project_for_model(snapshot: WorldSnapshot, *, byte_cap: int) -> dict[str, Any]:
    """The size-bounded view of a snapshot that goes into the model's context.

    Pose is rounded to centimetres and 0.01 rad, ages to 0.1 s; every field
    carries its availability, so a stale or missing value is never presented
    as fact. Raw streams never appear; artifacts appear only as
    ``{uri, sha256}``.

    Guarantees ``len(json.dumps(result)) <= byte_cap``. When the full view
    does not fit, items are dropped lowest priority first (artifacts one by
    one, recent outcome detail, recent outcome, active action reason, pose
    jump count, battery, distance remaining, active action, controller,
    snapshot id) and ``"truncated"`` is true. Raises ``ByteCapTooSmall`` (a
    ``ValueError``) when even pose and availability do not fit.
    """
    pose = snapshot.pose
    result: dict[str, Any] = {
        "snapshot_id": snapshot.snapshot_id,
        "pose": None
        if pose is None
        else {"x": round(pose.x, 2), "y": round(pose.y, 2), "yaw": round(normalize_angle(pose.yaw), 2)},
        "availability": {
            "pose": _field(snapshot.pose_meta),
            "velocity": _field(snapshot.velocity_meta),
            "navigation": _field(snapshot.navigation_meta),
            "battery": _field(snapshot.battery_meta),
        },
        "controller": snapshot.controller_state.value,
    }
    if snapshot.pose_jumps:
        result["pose_jumps"] = snapshot.pose_jumps
    if snapshot.distance_remaining is not None:
        result["distance_remaining_m"] = round(snapshot.distance_remaining, 2)
    if snapshot.battery is not None:
        result["battery_pct"] = round(snapshot.battery * 100.0, 1)
    if snapshot.active_action is not None:
        result["active_action"] = _action(snapshot.active_action)
    if snapshot.recent_outcome is not None:
        result["recent_outcome"] = _action(snapshot.recent_outcome)
    if snapshot.artifacts:
        result["artifacts"] = [{"uri": a.uri, "sha256": a.sha256} for a in snapshot.artifacts]
    result["truncated"] = False
    if _size(result) <= byte_cap:
        return result

    result["truncated"] = True
    artifacts = result.get("artifacts")
    while artifacts:
        artifacts.pop()
        if not artifacts:
            del result["artifacts"]  # an empty list would claim there are none
        if _size(result) <= byte_cap:
            return result

    def drop(key: str, sub: str | None = None) -> None:
        if sub is None:
            result.pop(key, None)
        elif isinstance(result.get(key), dict):
            result[key].pop(sub, None)

    steps: list[tuple[str, str | None]] = [
        ("recent_outcome", "reason"),
        ("recent_outcome", None),
        ("active_action", "reason"),
        ("pose_jumps", None),
        ("battery_pct", None),
        ("distance_remaining_m", None),
        ("active_action", None),
        ("controller", None),
        ("snapshot_id", None),
    ]
    for key, sub in steps:
        drop(key, sub)
        if _size(result) <= byte_cap:
            return result
    raise ByteCapTooSmall(
        f"byte_cap {byte_cap} is below the {_size(result)} bytes that pose and availability need",
        byte_cap=byte_cap,
        required=_size(result),
    )
