"""What the harness asks of Nav2: one goal of one of its actions, as a record.

``NavGoal`` is the request a managed physical action sends through
``ports.NavigationPort.send_goal``: Nav2's ``NavigateToPose``,
``NavigateThroughPoses`` and ``FollowWaypoints``, its behaviours ``Spin``,
``BackUp`` and ``Wait``, and the ``ClearEntireCostmap`` services (answered as a
goal that ends at once). A backend reports on it with ``BackendEvent``s; a
route's per-waypoint reports (Kilted's ``WaypointStatus``) arrive in a
terminal event's ``detail["waypoints"]`` as ``WaypointReport`` dicts.
"""
from __future__ import annotations

import enum
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .records import Pose2D

__all__ = ["NavGoalKind", "NavGoal", "WaypointState", "WaypointReport", "ROUTE_KINDS", "BEHAVIOR_KINDS",
           "MAX_WAYPOINTS", "BACKEND_NAMES"]

MAX_WAYPOINTS = 50
"""The most poses one route goal may carry."""


class NavGoalKind(str, enum.Enum):
    """Which Nav2 interface a goal goes to (values are Nav2's default action names, relative)."""

    NAVIGATE_TO_POSE = "navigate_to_pose"
    """bt_navigator's NavigateToPose: one pose."""
    NAVIGATE_THROUGH_POSES = "navigate_through_poses"
    """bt_navigator's NavigateThroughPoses: pass through each pose in order, stop at the last."""
    FOLLOW_WAYPOINTS = "follow_waypoints"
    """waypoint_follower's FollowWaypoints: stop at each pose in order (a NavigateToPose per pose)."""
    SPIN = "spin"
    """behavior_server's Spin: turn in place by ``spin_dist_rad``."""
    BACK_UP = "backup"
    """behavior_server's BackUp: drive straight back ``backup_dist_m`` at ``backup_speed_mps``."""
    WAIT = "wait"
    """behavior_server's Wait: stand still for ``wait_s``."""
    CLEAR_COSTMAPS = "clear_costmaps"
    """The costmaps' ``clear_entirely_*`` services (global, local): no motion, ends at once."""


ROUTE_KINDS = frozenset({NavGoalKind.NAVIGATE_THROUGH_POSES, NavGoalKind.FOLLOW_WAYPOINTS})
BEHAVIOR_KINDS = frozenset({NavGoalKind.SPIN, NavGoalKind.BACK_UP, NavGoalKind.WAIT, NavGoalKind.CLEAR_COSTMAPS})

BACKEND_NAMES = {kind: f"nav2/{kind.value}" for kind in NavGoalKind}
"""The ``ManagedAction.backend`` each kind is recorded under."""


class NavGoal(BaseModel):
    """One goal for Nav2; every number finite, the fields of its kind set and the others left at 0."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    kind: NavGoalKind = NavGoalKind.NAVIGATE_TO_POSE
    poses: tuple[Pose2D, ...] = ()
    """NAVIGATE_TO_POSE: exactly one; a route: 1..MAX_WAYPOINTS, in order, the last is where it ends."""
    spin_dist_rad: float = 0.0
    """SPIN: signed angle to turn (Nav2's ``target_yaw``: how far, not a heading), non-zero, |x| <= 2 pi."""
    backup_dist_m: float = 0.0
    """BACK_UP: how far back, > 0 (sent as ``target.x``; Nav2 refuses a non-zero y or z)."""
    backup_speed_mps: float = 0.0
    """BACK_UP: > 0."""
    wait_s: float = 0.0
    """WAIT: > 0."""
    time_allowance_s: float = 0.0
    """SPIN / BACK_UP: Nav2's ``time_allowance`` (0: the behaviour's own default)."""
    costmaps: tuple[Literal["global", "local"], ...] = ()
    """CLEAR_COSTMAPS: which (empty: both)."""

    @model_validator(mode="after")
    def _fields_of_its_kind(self) -> "NavGoal":
        k = self.kind
        if k is NavGoalKind.NAVIGATE_TO_POSE and len(self.poses) != 1:
            raise ValueError(f"navigate_to_pose takes exactly one pose, got {len(self.poses)}")
        if k in ROUTE_KINDS and not 1 <= len(self.poses) <= MAX_WAYPOINTS:
            raise ValueError(f"{k.value} takes 1 to {MAX_WAYPOINTS} poses, got {len(self.poses)}")
        if k in BEHAVIOR_KINDS and self.poses:
            raise ValueError(f"{k.value} takes no poses")
        if k is NavGoalKind.SPIN and not 0.0 < abs(self.spin_dist_rad) <= 2.0 * math.pi:
            raise ValueError(f"spin_dist_rad must be non-zero and at most 2 pi in size, got {self.spin_dist_rad}")
        if k is NavGoalKind.BACK_UP and not (self.backup_dist_m > 0.0 and self.backup_speed_mps > 0.0):
            raise ValueError("backup needs backup_dist_m > 0 and backup_speed_mps > 0")
        if k is NavGoalKind.WAIT and not self.wait_s > 0.0:
            raise ValueError("wait needs wait_s > 0")
        if self.time_allowance_s < 0.0:
            raise ValueError("time_allowance_s must be >= 0")
        unused = {"spin_dist_rad": k is not NavGoalKind.SPIN, "backup_dist_m": k is not NavGoalKind.BACK_UP,
                  "backup_speed_mps": k is not NavGoalKind.BACK_UP, "wait_s": k is not NavGoalKind.WAIT}
        for name, off in unused.items():
            if off and getattr(self, name) != 0.0:
                raise ValueError(f"{name} is not a field of a {k.value} goal")
        if self.costmaps and k is not NavGoalKind.CLEAR_COSTMAPS:
            raise ValueError(f"costmaps is not a field of a {k.value} goal")
        return self

    @property
    def target(self) -> Pose2D | None:
        """Where the goal ends (the last pose); None for a behaviour."""
        return self.poses[-1] if self.poses else None

    def length_from(self, start: Pose2D) -> float:
        """Straight-line metres from ``start`` through the goal's poses in order (0 for a behaviour)."""
        total, here = 0.0, start
        for pose in self.poses:
            total, here = total + here.distance_to(pose), pose
        return total

    @property
    def moves(self) -> bool:
        """Whether the robot may move (everything but clearing costmaps)."""
        return self.kind is not NavGoalKind.CLEAR_COSTMAPS


class WaypointState(str, enum.Enum):
    """Kilted's ``WaypointStatus.waypoint_status``, by name."""

    PENDING = "pending"
    COMPLETED = "completed"
    SKIPPED = "skipped"
    FAILED = "failed"


class WaypointReport(BaseModel):
    """What the backend said of one waypoint of a route (``BackendEvent.detail["waypoints"]`` items).

    NavigateThroughPoses reports every waypoint (``waypoint_statuses``); FollowWaypoints reports only the
    missed ones (``missed_waypoints``), so a waypoint it does not list has no report. Nav2's word, never
    evidence that the robot was there."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    index: int = Field(ge=0)
    state: WaypointState
    error_code: int = 0
    error_msg: str = ""

    @property
    def missed(self) -> bool:
        return self.state in (WaypointState.SKIPPED, WaypointState.FAILED)
