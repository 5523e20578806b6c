"""A ROS-free simulated quadruped with scripted faults.

``SimWorld`` is the physics and the navigator's brain of the simulated robot;
the ROS adapter (``robot_harness.nodes.sim_robot``) only feeds it time and
goals and publishes what it reports. It has no clock and no threads of its own:
time moves only through ``step(dt)``, and randomness comes from a seeded RNG,
so a scenario plays out the same way every time it is stepped the same way.

Two poses are kept apart on purpose. The TRUE pose is where the robot really
is; the LOCALIZED pose is what its localization believes: the truth seen
through a rigid correction (a rotation, then a translation, like the
map->odom transform AMCL keeps), the identity until a ``localization_jump``
fault or a ``relocalize`` moves it. The controller drives on the localized
pose, as Nav2 does, so a localization fault leaves the truth off-goal while
the navigator reports success: exactly the kind of lie the harness has to catch.

Some faults live on the robot's outside, so the world only decides them and
its adapters carry them out the same way: ``pose_silent`` (``pose_dropout``:
publish no pose), ``ack_delay_for`` and ``acks_withheld`` (late or missing
acknowledgements), ``completion_claim`` (the words results carry), and
``foreign_goals`` (``external_goal``: goals the world sent itself, as another
client of the navigator; not any adapter's client's goals), ``navigator_active``
(``navigator_inactive``: the adapter's bt_navigator reports it, and refuses
goals while it is False) and ``pose_covariance`` (what the localization
publishes; ``high_covariance`` raises it).

A scenario may declare an occupancy map (``SimConfig.map``: a rectangle with
box obstacles, inflated by ``inflation_m``). The world then answers what Nav2's
planner server and global costmap answer: ``plan_path`` (a shortest
8-connected path on the inflated grid by jump point search, an A* that skips
symmetric paths; Nav2's ComputePathToPose error names) and ``cost_at``
(Nav2's cost values). Without a map everything is free and every path is the
straight line. A goal is planned when it arrives, from the localized pose:
the robot walks the planned path (straight segments between grid waypoints),
and a goal that has no path (occupied, outside the map, unreachable, or a
``no_path`` fault) is accepted, never moves the robot, and is aborted
``PLAN_FAILURE_ABORT_S`` later with the planner's error, as Nav2's navigator
aborts a goal its planner cannot serve (it never drives into the obstacle).

Goals come in Nav2's kinds (``core.nav_goals.NavGoalKind``), one index each
in one goal log, a new one of any kind preempting the running one:

* ``submit_goal``: NavigateToPose.
* ``submit_route``: NavigateThroughPoses (``follow=False``: every leg planned
  at once, as ComputePathThroughPoses plans; each intermediate position is
  passed without turning to its yaw; a leg without a path aborts the goal with
  the ComputePathThroughPoses number) or FollowWaypoints (``follow=True``: a
  NavigateToPose per waypoint, planned when it starts, each yaw reached; a
  waypoint whose NavigateToPose fails is a missed waypoint, and then
  ``SimConfig.stop_on_failure`` decides, as waypoint_follower's parameter
  does). Per-waypoint reports follow Kilted's ``WaypointStatus``.
* ``submit_spin``, ``submit_backup``, ``submit_wait``: behavior_server's
  behaviours, which do not need bt_navigator; they end with Nav2's error
  codes and messages (time allowance, collision ahead, invalid input).
* ``clear_costmaps``: a service, not a goal; counted.

Two faults act on these: ``skip_waypoint`` (the navigator drops a waypoint of
a route and says so, or lies that it went there) and ``stuck`` (the robot is
wedged: navigation goals fail to make progress until a back-up, a spin or a
costmap clear frees it).

One body may have several navigation stacks (``SimConfig.providers``, keyed by
the namespace its actions are served under; issue 18's navigation providers).
Every ``submit_*`` takes the ``provider`` the goal came through ("" the robot's
own Nav2): the goal walks at that provider's speed and only that provider's
navigation faults (``SimProvider.faults``; ``SimConfig.faults`` for the robot's
own) apply to it, each ``on_goal`` counting the goals that provider received.
The body is shared: one goal log, one running goal (a goal of any provider
preempts the running one), and the body faults (``SimConfig.faults``' others)
hit whatever runs. ``navigator_inactive`` is the robot's own bt_navigator's and
refuses and aborts only its goals. With no providers every goal is the robot's
own and each ``on_goal`` counts the world's goals, as it always did.

More cameras (``SimConfig.cameras``, keyed by image topic) see what the built-in
one sees, each at its own rate, until its ``camera_dead`` fault silences it
(``camera_live``); the adapters publish them.
"""
from __future__ import annotations

import enum
import heapq
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, TypeAdapter, ValidationError, model_validator

from robot_harness.core.errors import ScenarioError, UsageError
from robot_harness.core.nav_goals import NavGoalKind, WaypointState
from robot_harness.core.records import FORMAT_VERSION, Pose2D, Velocity, normalize_angle

__all__ = [
    "ARRIVAL_TOLERANCE_M",
    "Fault",
    "RejectFault",
    "EarlySuccessFault",
    "StallFault",
    "NoFeedbackFault",
    "LocalizationJumpFault",
    "FrozenPoseFault",
    "PoseNoiseFault",
    "DieFault",
    "AckDelayFault",
    "NoAckFault",
    "ClaimsCompletionFault",
    "PoseDropoutFault",
    "ExternalGoalFault",
    "NoPathFault",
    "NavigatorInactiveFault",
    "HighCovarianceFault",
    "SkipWaypointFault",
    "StuckFault",
    "ProviderFault",
    "PROVIDER_FAULT_KINDS",
    "SimProvider",
    "CameraDeadFault",
    "SimCamera",
    "BUILTIN_CAMERA_TOPIC",
    "DEFAULT_COMPLETION_CLAIM",
    "EXTERNAL_GOAL_NOTE",
    "NAVIGATOR_INACTIVE_REASON",
    "DEFAULT_POSE_VARIANCE",
    "PLAN_FAILURE_ABORT_S",
    "STUCK_ABORT_S",
    "STUCK_ERROR_MSG",
    "FOLLOW_PATH_FAILED_TO_MAKE_PROGRESS",
    "FOLLOW_WAYPOINTS_UNKNOWN",
    "FOLLOW_WAYPOINTS_STOP_ON_MISSED_WAYPOINT",
    "NAVIGATE_TO_POSE_UNKNOWN",
    "NAVIGATE_TO_POSE_REFUSED_MSG",
    "SKIPPED_WAYPOINT_MSG",
    "SPIN_TIMEOUT",
    "BACKUP_TIMEOUT",
    "BACKUP_INVALID_INPUT",
    "BACKUP_COLLISION_AHEAD",
    "MAX_MAP_CELLS",
    "COST_FREE",
    "COST_INSCRIBED",
    "COST_LETHAL",
    "COST_NO_INFORMATION",
    "Box",
    "MapOrigin",
    "MapConfig",
    "PlanErrorCode",
    "COMPUTE_PATH_TO_POSE_ERROR_CODES",
    "COMPUTE_PATH_THROUGH_POSES_ERROR_CODES",
    "PlanResult",
    "SimConfig",
    "GoalStatus",
    "GoalEventType",
    "GoalEvent",
    "GoalDecision",
    "GoalView",
    "WaypointView",
    "StampedPose",
    "SimWorld",
    "parse_faults",
]

ARRIVAL_TOLERANCE_M = 0.02
"""Distance (on the localized pose) at which the robot stops translating."""

_MAX_SUBSTEP_S = 0.02
"""Large ``step(dt)`` calls are split so motion and fault triggers stay fine-grained."""

_HEADING_GATE_RAD = 0.35
"""Heading error above which the robot turns in place before walking on (avoids orbiting a close goal)."""

_PATH_HEADING_GATE_RAD = 0.05
"""The gate on a map: the robot turns (almost) fully at each corner, so it keeps to the planned path."""

_YAW_DONE_RAD = 1e-6

_DEFAULT_AFTER_ON_GOAL_S = 0.3

DEFAULT_COMPLETION_CLAIM = "Arrived at the goal. Task complete."
"""What a ``claims_completion`` fault says when the scenario gives no text."""

EXTERNAL_GOAL_NOTE = "external_goal fault: another client's goal"
"""The reason on the RECEIVED event of a goal the world sent itself (``external_goal``)."""

NAVIGATOR_INACTIVE_REASON = "bt_navigator is not active"
"""Why a goal is refused while ``navigator_inactive`` holds (the ROS adapter's words for an inactive navigator)."""

DEFAULT_POSE_VARIANCE = (0.0025, 0.0025, 0.0004)
"""(var_x m^2, var_y m^2, var_yaw rad^2) the localization reports with no fault: 5 cm and 0.02 rad std."""

PLAN_FAILURE_ABORT_S = 1.0
"""Sim seconds after which a goal whose plan failed is aborted (Nav2 aborts once its planner gives up)."""

STUCK_ABORT_S = 10.0
"""Sim seconds a navigation goal (or a FollowWaypoints leg) of a ``stuck`` robot runs before it is aborted.

Nav2's SimpleProgressChecker fails FollowPath after ``movement_time_allowance``
(10 s by default, nav2_controller/plugins/simple_progress_checker.cpp) without
``required_movement_radius`` of motion. The navigator's own recovery subtree
is left out: the goal fails where a BT would try its recoveries, so freeing the
robot is the harness's job."""

STUCK_ERROR_MSG = "Failed to make progress"
"""controller_server's words for FAILED_TO_MAKE_PROGRESS (nav2_controller/src/controller_server.cpp)."""

FOLLOW_PATH_FAILED_TO_MAKE_PROGRESS = 105
"""nav2_msgs/action/FollowPath FAILED_TO_MAKE_PROGRESS: how every navigation goal of a stuck robot ends."""

FOLLOW_WAYPOINTS_UNKNOWN = 600
"""nav2_msgs/action/FollowWaypoints UNKNOWN: a waypoint whose NavigateToPose bt_navigator refused."""

FOLLOW_WAYPOINTS_STOP_ON_MISSED_WAYPOINT = 603
"""nav2_msgs/action/FollowWaypoints STOP_ON_MISSED_WAYPOINT: a waypoint missed while ``stop_on_failure`` holds."""

NAVIGATE_TO_POSE_UNKNOWN = 9000
"""nav2_msgs/action/NavigateToPose UNKNOWN: the code of a FollowWaypoints waypoint a ``skip_waypoint`` fault
reports missed (its NavigateToPose ended without a cause a BT node names)."""

NAVIGATE_TO_POSE_REFUSED_MSG = "navigate_to_pose action client failed to send goal to server."
"""waypoint_follower's words when bt_navigator refuses a waypoint's NavigateToPose (it is inactive)."""

SKIPPED_WAYPOINT_MSG = "waypoint skipped by the navigator (skip_waypoint fault)"
"""The message of a FollowWaypoints waypoint a reported ``skip_waypoint`` fault marks missed."""

SPIN_TIMEOUT = 701
"""nav2_msgs/action/Spin TIMEOUT."""
BACKUP_TIMEOUT = 711
"""nav2_msgs/action/BackUp TIMEOUT."""
BACKUP_INVALID_INPUT = 713
"""nav2_msgs/action/BackUp INVALID_INPUT: a target with a non-zero y or z."""
BACKUP_COLLISION_AHEAD = 714
"""nav2_msgs/action/BackUp COLLISION_AHEAD."""

MAX_MAP_CELLS = 250_000
"""The largest grid a scenario may declare (500 x 500 cells), so a plan stays well under a tick."""

COST_FREE = 0
"""Nav2's FREE_SPACE."""
COST_INSCRIBED = 253
"""Nav2's INSCRIBED_INFLATED_OBSTACLE: the robot's centre here means a collision."""
COST_LETHAL = 254
"""Nav2's LETHAL_OBSTACLE: inside a declared obstacle."""
COST_NO_INFORMATION = 255
"""Nav2's NO_INFORMATION: outside the map."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- faults


class _FaultBase(_Frozen):
    """A trigger shared by every fault: the n-th goal received, or a sim time."""

    on_goal: int | None = Field(default=None, ge=1)
    """Affect the n-th goal received (1-based, rejected goals count) by the navigation provider whose fault
    this is (``SimConfig.faults``: the robot's own Nav2, which also takes ``external_goal``'s goals)."""
    at_s: float | None = Field(default=None, ge=0.0)
    """Switch the fault on for good at this sim time (seconds since start)."""

    @model_validator(mode="after")
    def _one_trigger(self) -> "_FaultBase":
        if (self.on_goal is None) == (self.at_s is None):
            raise ValueError("a fault needs exactly one trigger: 'on_goal' or 'at_s'")
        return self


class _DelayedFault(_FaultBase):
    """A fault whose effect may start some time after its trigger."""

    after_s: float | None = Field(default=None, ge=0.0)
    """Delay from the trigger; defaults to 0.3 s into the goal for ``on_goal``, 0 for ``at_s``."""

    def delay_s(self) -> float:
        if self.after_s is not None:
            return self.after_s
        return _DEFAULT_AFTER_ON_GOAL_S if self.on_goal is not None else 0.0


class RejectFault(_FaultBase):
    """The goal is rejected on arrival (``at_s``: every goal received from then on)."""

    kind: Literal["reject"] = "reject"


class EarlySuccessFault(_DelayedFault):
    """The goal reports SUCCEEDED after ``after_s`` while still far away; the robot stops."""

    kind: Literal["early_success"] = "early_success"


class StallFault(_DelayedFault):
    """The robot stops after ``after_s``; the goal stays ACTIVE until cancelled or preempted."""

    kind: Literal["stall"] = "stall"


class NoFeedbackFault(_DelayedFault):
    """The goal produces no feedback; motion and result are normal.

    Unlike the other goal faults, ``after_s`` defaults to 0 so the goal is
    silent from its first instant.
    """

    kind: Literal["no_feedback"] = "no_feedback"

    def delay_s(self) -> float:
        return self.after_s if self.after_s is not None else 0.0


class LocalizationJumpFault(_DelayedFault):
    """From the trigger on, the localized pose is truth plus a persistent offset."""

    kind: Literal["localization_jump"] = "localization_jump"
    dx: float = 3.0
    dy: float = 0.0


class FrozenPoseFault(_DelayedFault):
    """From the trigger on, the published localization repeats its last pose and stamp."""

    kind: Literal["frozen_pose"] = "frozen_pose"


class PoseNoiseFault(_DelayedFault):
    """From the trigger on, the published pose carries seeded gaussian noise."""

    kind: Literal["pose_noise"] = "pose_noise"
    std_xy: float = Field(default=0.05, ge=0.0)
    std_yaw: float = Field(default=0.02, ge=0.0)


class DieFault(_DelayedFault):
    """At the trigger the robot dies: no pose, no feedback, no result, ever again."""

    kind: Literal["die"] = "die"


class AckDelayFault(_FaultBase):
    """The goal is accepted and the robot starts moving, but the acceptance reaches the client late.

    Simulates a lost or slow acknowledgment: the world accepts the goal at
    once (its events say so and the robot walks), while the ROS adapter holds
    the goal response for ``delay_s`` before answering ACCEPT. ``at_s``: every
    goal received from then on. The world itself only reports the delay
    (``SimWorld.ack_delay_for``); motion and result are normal.
    """

    kind: Literal["ack_delay"] = "ack_delay"
    delay_s: float = Field(default=3.0, gt=0.0)
    """How long the acceptance response is held back, wall seconds."""


class NoAckFault(_FaultBase):
    """Speech and messages still reach the robot, but it never acknowledges them.

    Active from ``at_s`` on, or (``on_goal``) from the moment the n-th goal is
    received. Lets a test show that an unacknowledged delivery is not success.
    """

    kind: Literal["no_ack"] = "no_ack"


class ClaimsCompletionFault(_FaultBase):
    """Robot-side text confidently claims the task is done, whatever really happened.

    While active (from ``at_s``, or from the arrival of the ``on_goal``-th
    goal), every delivery acknowledgement carries ``text`` as its ``note`` and
    every navigation result carries it as its message, failed, cancelled and
    preempted goals included. Motion, goal states, poses and the truth log are
    untouched: only the words lie.
    """

    kind: Literal["claims_completion"] = "claims_completion"
    text: str = Field(default=DEFAULT_COMPLETION_CLAIM, min_length=1, max_length=500)


class PoseDropoutFault(_DelayedFault):
    """From the trigger on, the localization topic goes silent: no pose is published, ever again.

    ``at_s: 0`` means no pose is ever published. Motion, feedback and results
    carry on, and the localized pose still drives the controller: only the
    evidence is missing. The world only reports it (``SimWorld.pose_silent``);
    each adapter leaves its pose topic unpublished while it holds.
    """

    kind: Literal["pose_dropout"] = "pose_dropout"


class ExternalGoalFault(_FaultBase):
    """At ``at_s`` another client sends the navigator a goal ``dx``/``dy`` from the robot's true pose.

    The world submits the goal itself, on the first step at or after ``at_s``,
    keeping the robot's yaw: it preempts whatever goal is running (that goal
    ends ABORTED, "preempted by goal N", as Nav2 preempts) and the robot drives
    off. It is not the adapter's client's goal: ``SimWorld.foreign_goals``
    lists its index so the adapters can tell it apart. Only ``at_s`` triggers
    it: another client's goal comes at a time, not per goal.
    """

    kind: Literal["external_goal"] = "external_goal"
    dx: float = 0.0
    dy: float = 0.0

    @model_validator(mode="after")
    def _at_a_time(self) -> "ExternalGoalFault":
        if self.at_s is None:
            raise ValueError("external_goal needs 'at_s' (another client sends its goal at a time, not per goal)")
        return self


class Box(_Frozen):
    """An axis-aligned rectangle in the map frame, metres."""

    x_min: FiniteFloat
    y_min: FiniteFloat
    x_max: FiniteFloat
    y_max: FiniteFloat

    @model_validator(mode="after")
    def _positive_area(self) -> "Box":
        if not (self.x_min < self.x_max and self.y_min < self.y_max):
            raise ValueError("a box needs x_min < x_max and y_min < y_max")
        return self

    def contains(self, x: float, y: float) -> bool:
        return self.x_min <= x <= self.x_max and self.y_min <= y <= self.y_max


class NoPathFault(_FaultBase):
    """The planner finds no path (NO_VALID_PATH), whatever the map says.

    ``at_s``: every plan asked from then on; ``on_goal``: the plans for the
    n-th goal (of the provider whose fault it is), that is the n-th goal itself
    and every dry run (``plan_path`` for that provider) asked while it is the
    next goal to arrive. With ``region``, only goals
    inside it (a place behind a closed door). A goal sent anyway is accepted
    and aborted ``PLAN_FAILURE_ABORT_S`` later, as every goal whose plan fails.
    A goal inside an obstacle is not this fault: declare the obstacle on the map.
    """

    kind: Literal["no_path"] = "no_path"
    region: Box | None = None
    """Only goals inside this box find no path; unset: every goal."""


class NavigatorInactiveFault(_DelayedFault):
    """bt_navigator is not active: ``at_s: 0`` never activates; a later trigger deactivates it.

    While it holds, ``SimWorld.navigator_active`` is False, a goal is refused
    (``NAVIGATOR_INACTIVE_REASON``, goal index 0: an inactive Nav2 action
    server rejects goals before any navigation starts) and the running goal is
    aborted, as a deactivating bt_navigator aborts it. ``on_goal``: from
    ``after_s`` into that goal (it is the goal aborted). ``for_s`` bounds it
    (the navigator is active again afterwards); unset, it holds for good.
    """

    kind: Literal["navigator_inactive"] = "navigator_inactive"
    for_s: float | None = Field(default=None, gt=0.0)
    """How long the navigator stays inactive, sim seconds; unset: for good."""


class HighCovarianceFault(_DelayedFault):
    """From the trigger on, the localization reports a large covariance, as a lost AMCL does.

    Only the reported uncertainty changes: ``pose_covariance`` adds
    ``std_xy``^2 to var_x and var_y and ``std_yaw``^2 to var_yaw. The estimate
    itself stays where it is (combine with ``pose_noise`` or
    ``localization_jump`` for a pose that is also wrong), so a test sees the
    covariance check alone.
    """

    kind: Literal["high_covariance"] = "high_covariance"
    std_xy: float = Field(default=1.0, gt=0.0)
    std_yaw: float = Field(default=0.5, gt=0.0)


class SkipWaypointFault(_FaultBase):
    """The navigator drops one waypoint of a route goal: it never goes there.

    Applies to route goals only (NavigateThroughPoses, FollowWaypoints):
    ``on_goal``: that goal; ``at_s``: every route goal from then on (a
    waypoint not yet passed when the fault starts). The robot drives from the
    waypoint before straight on to the one after. ``reported`` decides what
    the navigator says: False is the silent lie (NavigateThroughPoses reports
    the waypoint COMPLETED, FollowWaypoints does not list it, and the goal
    succeeds); True reports it (SKIPPED by NavigateThroughPoses, which still
    succeeds; FAILED in FollowWaypoints' missed waypoints, ``NAVIGATE_TO_POSE_UNKNOWN``,
    and the goal ends as ``SimConfig.stop_on_failure`` says). Either way the
    waypoint's ``reached_t`` stays None unless the robot really passes it.
    The last waypoint cannot be skipped (it is where the route ends): a fault
    naming the last waypoint, or one beyond, of a route leaves that route alone
    (a live planner may send a shorter route than the scenario foresaw; the
    world never stops on it).
    """

    kind: Literal["skip_waypoint"] = "skip_waypoint"
    waypoint: int = Field(ge=0)
    """Index into the route's poses (0-based); never the last."""
    reported: bool = False
    """Whether the navigator admits the skip (True) or reports the waypoint done (False)."""


class StuckFault(_DelayedFault):
    """From the trigger on the robot is wedged until a behaviour frees it.

    Every navigation goal (NavigateToPose, NavigateThroughPoses, each
    FollowWaypoints leg) makes no progress and is aborted ``patience_s`` (``STUCK_ABORT_S``)
    after it started (or after the robot got stuck) with controller_server's
    FAILED_TO_MAKE_PROGRESS (``FOLLOW_PATH_FAILED_TO_MAKE_PROGRESS``,
    ``STUCK_ERROR_MSG``). Behaviours still run (backing up is how a wedged
    robot gets out). The robot is free for good once the ``freed_by``
    behaviour succeeds while it is stuck: a BackUp that covered at least
    ``min_backup_m``, a Spin through a non-zero angle, or a costmap clear.
    """

    kind: Literal["stuck"] = "stuck"
    freed_by: Literal["backup", "spin", "clear_costmaps"] = "backup"
    """The behaviour that frees the robot."""
    patience_s: FiniteFloat = Field(default=STUCK_ABORT_S, gt=0.0)
    """How long a wedged goal runs before it is aborted (Nav2's progress checker allowance), sim seconds."""
    min_backup_m: FiniteFloat = Field(default=0.15, gt=0.0)
    """freed_by backup: the shortest back-up that frees it, metres."""


Fault = Annotated[
    RejectFault
    | EarlySuccessFault
    | StallFault
    | NoFeedbackFault
    | LocalizationJumpFault
    | FrozenPoseFault
    | PoseNoiseFault
    | DieFault
    | AckDelayFault
    | NoAckFault
    | ClaimsCompletionFault
    | PoseDropoutFault
    | ExternalGoalFault
    | NoPathFault
    | NavigatorInactiveFault
    | HighCovarianceFault
    | SkipWaypointFault
    | StuckFault,
    Field(discriminator="kind"),
]
_FAULTS_ADAPTER: TypeAdapter[list[Fault]] = TypeAdapter(list[Fault])

_GoalFault = EarlySuccessFault | StallFault | NoFeedbackFault
_WorldFault = (LocalizationJumpFault | FrozenPoseFault | PoseNoiseFault | DieFault | PoseDropoutFault
               | ExternalGoalFault | NavigatorInactiveFault | HighCovarianceFault | StuckFault)

ProviderFault = Annotated[
    RejectFault | EarlySuccessFault | StallFault | NoFeedbackFault | AckDelayFault | NoPathFault | SkipWaypointFault,
    Field(discriminator="kind"),
]
"""The faults of one navigation stack (``SimProvider.faults``): what its navigator does with the goals it
receives. The body's faults (pose, localization, death, deliveries, a wedged robot, another client,
bt_navigator's lifecycle) are the robot's and go in ``SimConfig.faults``."""

PROVIDER_FAULT_KINDS = ("reject", "early_success", "stall", "no_feedback", "ack_delay", "no_path", "skip_waypoint")
"""The kinds a ``SimProvider`` may declare (``ProviderFault``)."""


def _scenario_error(what: str, exc: ValidationError, root: str = "") -> ScenarioError:
    """One line per problem, located like ``faults[0].stall.dx``, instead of pydantic's type dump."""
    errors = exc.errors(include_url=False)
    lines = []
    for err in errors:
        loc = root
        for part in err["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        lines.append(f"{loc or '<root>'}: {err['msg']}")
    return ScenarioError(f"invalid {what}: " + "; ".join(lines), errors=errors)


def parse_faults(data: str | bytes | list[Any]) -> list[Fault]:
    """Validate a fault list (JSON text or already-parsed list).

    Raises ``ScenarioError`` naming the offending entry and field, so a typo in
    a scenario fails loudly instead of silently running a clean robot.
    """
    try:
        if isinstance(data, (str, bytes)):
            return _FAULTS_ADAPTER.validate_json(data)
        return _FAULTS_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise _scenario_error("sim faults", exc, root="faults") from exc


class MapOrigin(_Frozen):
    """The map's lower-left corner in the map frame, metres (Nav2's map origin, without a yaw)."""

    x: FiniteFloat = 0.0
    y: FiniteFloat = 0.0


class MapConfig(_Frozen):
    """A small occupancy map a scenario declares: a rectangle of square cells with box obstacles.

    A cell is lethal where an obstacle overlaps it (an obstacle partly off
    the map is clipped to it; one wholly off the map is a mistake and refused),
    inscribed where its centre lies within ``inflation_m`` of a lethal cell's
    edge, free elsewhere; outside the rectangle there is no information.
    """

    resolution: FiniteFloat = Field(default=0.1, gt=0.0)
    """Cell size, metres."""
    origin: MapOrigin = MapOrigin()
    width_m: FiniteFloat = Field(gt=0.0)
    height_m: FiniteFloat = Field(gt=0.0)
    obstacles: tuple[Box, ...] = ()
    inflation_m: FiniteFloat = Field(default=0.3, ge=0.0)
    """The robot's inscribed radius: cells this close to an obstacle are in collision for its centre."""

    @property
    def size_cells(self) -> tuple[int, int]:
        """(columns, rows): each side rounded up to whole cells."""
        return (math.ceil(self.width_m / self.resolution - 1e-9), math.ceil(self.height_m / self.resolution - 1e-9))

    @property
    def bounds(self) -> Box:
        """The map's rectangle (whole cells)."""
        nx, ny = self.size_cells
        return Box(x_min=self.origin.x, y_min=self.origin.y,
                   x_max=self.origin.x + nx * self.resolution, y_max=self.origin.y + ny * self.resolution)

    @model_validator(mode="after")
    def _bounded_and_on_the_map(self) -> "MapConfig":
        if self.resolution > min(self.width_m, self.height_m):
            raise ValueError(f"resolution {self.resolution} m is larger than the map ({self.width_m} x {self.height_m} m)")
        nx, ny = self.size_cells
        if nx * ny > MAX_MAP_CELLS:
            raise ValueError(f"the map has {nx} x {ny} cells, more than {MAX_MAP_CELLS}: use a coarser resolution")
        b = self.bounds
        for i, o in enumerate(self.obstacles):
            if o.x_max <= b.x_min or o.x_min >= b.x_max or o.y_max <= b.y_min or o.y_min >= b.y_max:
                raise ValueError(f"obstacles[{i}] lies wholly outside the map "
                                 f"([{b.x_min}, {b.x_max}] x [{b.y_min}, {b.y_max}])")
        return self


BUILTIN_CAMERA_TOPIC = "camera/image_raw"
"""The built-in camera's image topic (relative); its rate is ``SimConfig.camera_rate_hz``."""


class CameraDeadFault(_DelayedFault):
    """From the trigger on one camera publishes nothing, ever again (its driver died); the robot carries on.

    ``on_goal`` counts the robot's own Nav2's goals, as every fault of the body does.
    """

    kind: Literal["camera_dead"] = "camera_dead"


class SimCamera(_Frozen):
    """One more camera on the body (``SimConfig.cameras``, keyed by its image topic): it sees what the
    built-in camera sees, at its own rate, until a ``camera_dead`` fault silences it."""

    rate_hz: float = Field(default=2.0, gt=0.0)
    faults: tuple[CameraDeadFault, ...] = ()


_TOPIC = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")
"""A relative ROS topic name: tokens separated by '/'."""

_NAMESPACE_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""One ROS name token: where a navigation provider's actions are served (``<namespace>/navigate_to_pose``)."""


class SimProvider(_Frozen):
    """One more navigation stack on the robot's body (issue 18: a capability with several providers).

    Served by the ROS adapter under its namespace (``<namespace>/navigate_to_pose``,
    ``navigate_through_poses``, ``follow_waypoints``, ``spin``, ``backup``, ``wait``), relative to the
    robot's; each goal it receives walks at its ``speed`` and meets its ``faults`` (each ``on_goal``
    counting this provider's goals), e.g. a fast but flaky stack beside a slow, reliable one.
    """

    speed: float | None = Field(default=None, gt=0.0)
    """Walking speed of its goals, m/s; unset: ``SimConfig.speed``."""
    faults: tuple[ProviderFault, ...] = ()
    """Its navigator's faults (``ProviderFault``: the goal-scoped kinds)."""


class SimConfig(_Frozen):
    """Everything that makes one simulated robot differ from another."""

    start: Pose2D = Pose2D(x=0.0, y=0.0, yaw=0.0)
    speed: float = Field(default=0.5, gt=0.0)
    """Walking speed, m/s."""
    yaw_rate: float = Field(default=1.5, gt=0.0)
    """Turn rate limit, rad/s."""
    pose_rate_hz: float = Field(default=20.0, gt=0.0)
    odom_rate_hz: float = Field(default=50.0, gt=0.0)
    camera_rate_hz: float = Field(default=2.0, ge=0.0)
    """0 disables the camera."""
    battery_start: float = Field(default=0.9, ge=0.0, le=1.0)
    battery_drain_per_m: float = Field(default=0.002, ge=0.0)
    faults: tuple[Fault, ...] = ()
    seed: int = 0
    stop_on_failure: bool = True
    """FollowWaypoints: abort at the first missed waypoint (603) rather than go on to the next, as
    waypoint_follower's ``stop_on_failure`` parameter (default True in its code)."""
    map: MapConfig | None = None
    """The occupancy map plans and costs are answered from; unset: everything is free, paths are straight."""
    providers: dict[str, SimProvider] = Field(default_factory=dict)
    """Navigation stacks besides the robot's own Nav2 (whose speed and faults are the fields above), keyed by
    the namespace their actions are served under (one ROS name token, e.g. ``alt``); empty: only the own."""
    cameras: dict[str, SimCamera] = Field(default_factory=dict)
    """Cameras besides the built-in one (``camera/image_raw``), keyed by their image topic (relative)."""

    @model_validator(mode="after")
    def _providers_named(self) -> "SimConfig":
        for ns in self.providers:
            if not _NAMESPACE_SEGMENT.fullmatch(ns):
                raise ValueError(f"provider namespace {ns!r} is not one ROS name token (letters, digits, '_'; "
                                 "not starting with a digit; the robot's own Nav2 is not a provider here)")
        for topic in self.cameras:
            if not _TOPIC.fullmatch(topic) or topic == BUILTIN_CAMERA_TOPIC:
                raise ValueError(f"camera topic {topic!r} is not a relative topic name other than the built-in "
                                 f"camera's {BUILTIN_CAMERA_TOPIC!r}")
        return self

    @model_validator(mode="after")
    def _start_on_the_map(self) -> "SimConfig":
        if self.map is None:
            return self
        x, y = self.start.x, self.start.y
        if not self.map.bounds.contains(x, y):
            raise ValueError(f"start ({x}, {y}) lies outside the map")
        for i, o in enumerate(self.map.obstacles):
            if o.contains(x, y):
                raise ValueError(f"start ({x}, {y}) lies inside map.obstacles[{i}]")
        return self

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> "SimConfig":
        """Validate a mapping (e.g. a scenario's ``sim:`` section), raising ``ScenarioError``."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise _scenario_error("sim config", exc) from exc


# --------------------------------------------------------------------------- the map and its planner


class PlanErrorCode(str, enum.Enum):
    """How a plan ended, by the names of Nav2 Kilted's ComputePathToPose result codes."""

    NONE = "NONE"
    """A path was found."""
    UNKNOWN = "UNKNOWN"
    """Nav2's catch-all; the world never produces it."""
    INVALID_PLANNER = "INVALID_PLANNER"
    """The request named a planner the server does not have (the ROS adapter's; never the world's)."""
    TF_ERROR = "TF_ERROR"
    """A pose could not be transformed (the ROS adapter's, for a frame other than ``map``)."""
    START_OUTSIDE_MAP = "START_OUTSIDE_MAP"
    """The start lies off the map."""
    GOAL_OUTSIDE_MAP = "GOAL_OUTSIDE_MAP"
    """The goal lies off the map."""
    START_OCCUPIED = "START_OCCUPIED"
    """The start cell is inscribed or lethal (the robot stands in collision: a stuck robot)."""
    GOAL_OCCUPIED = "GOAL_OCCUPIED"
    """The goal cell is inscribed or lethal."""
    TIMEOUT = "TIMEOUT"
    """The search ran out of its expansion budget."""
    NO_VALID_PATH = "NO_VALID_PATH"
    """No collision-free path connects start and goal (or a ``no_path`` fault holds)."""

    @property
    def number(self) -> int:
        """The code's value in nav2_msgs/action/ComputePathToPose (Kilted)."""
        return COMPUTE_PATH_TO_POSE_ERROR_CODES[self]

    @property
    def through_poses_number(self) -> int:
        """The code's value in nav2_msgs/action/ComputePathThroughPoses (Kilted): a route's plan failure."""
        return COMPUTE_PATH_THROUGH_POSES_ERROR_CODES[self]


COMPUTE_PATH_TO_POSE_ERROR_CODES: Mapping[PlanErrorCode, int] = MappingProxyType({
    PlanErrorCode.NONE: 0,
    PlanErrorCode.UNKNOWN: 200,
    PlanErrorCode.INVALID_PLANNER: 201,
    PlanErrorCode.TF_ERROR: 202,
    PlanErrorCode.START_OUTSIDE_MAP: 203,
    PlanErrorCode.GOAL_OUTSIDE_MAP: 204,
    PlanErrorCode.START_OCCUPIED: 205,
    PlanErrorCode.GOAL_OCCUPIED: 206,
    PlanErrorCode.TIMEOUT: 207,
    PlanErrorCode.NO_VALID_PATH: 208,
})
"""The one table of numbers: nav2_msgs/action/ComputePathToPose.action, navigation2 branch kilted at 71a1d84f."""

COMPUTE_PATH_THROUGH_POSES_ERROR_CODES: Mapping[PlanErrorCode, int] = MappingProxyType({
    PlanErrorCode.NONE: 0,
    PlanErrorCode.UNKNOWN: 300,
    PlanErrorCode.INVALID_PLANNER: 301,
    PlanErrorCode.TF_ERROR: 302,
    PlanErrorCode.START_OUTSIDE_MAP: 303,
    PlanErrorCode.GOAL_OUTSIDE_MAP: 304,
    PlanErrorCode.START_OCCUPIED: 305,
    PlanErrorCode.GOAL_OCCUPIED: 306,
    PlanErrorCode.TIMEOUT: 307,
    PlanErrorCode.NO_VALID_PATH: 308,
})
"""nav2_msgs/action/ComputePathThroughPoses.action at the same commit (309 NO_VIAPOINTS_GIVEN has no name here:
the world refuses an empty route as a caller mistake)."""


@dataclass(frozen=True)
class PlanResult:
    """The answer to one ``plan_path``: a path, or Nav2's error name and a message saying why.

    On success ``poses`` runs from the exact start to the exact goal through
    the centres of the cells where the grid path turns, each pose facing the
    next one and the last the goal's yaw; ``length_m`` is the polyline's
    length. On failure ``poses`` is empty and ``length_m`` is 0.
    """

    error: PlanErrorCode
    message: str = ""
    poses: tuple[Pose2D, ...] = ()
    length_m: float = 0.0
    expansions: int = 0
    """Cells the search expanded (0 when it did not run): its cost, for the bounded-time test."""

    @property
    def ok(self) -> bool:
        return self.error is PlanErrorCode.NONE

    @property
    def points(self) -> tuple[tuple[float, float], ...]:
        return tuple((p.x, p.y) for p in self.poses)


_SQRT2 = math.sqrt(2.0)
_NEIGHBOURS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1))


def _fmt(x: float, y: float) -> str:
    return f"({x:.2f}, {y:.2f})"


class _Grid:
    """The inflated occupancy grid of a ``MapConfig``; row-major costs, cell (i, j) at index j * nx + i.

    Built once per world, with the free cells' connected components labelled
    (about 20 ms for 200 x 200 cells), so a goal cut off from the start is
    refused without a search and a search never floods a whole map in vain.
    """

    def __init__(self, m: MapConfig) -> None:
        self.res = m.resolution
        self.ox, self.oy = m.origin.x, m.origin.y
        self.nx, self.ny = m.size_cells
        self.cost = bytearray(self.nx * self.ny)
        self._components: list[int] | None = None
        lethal: list[tuple[int, int, int, int]] = []
        for o in m.obstacles:
            i0, i1 = self._span(o.x_min, o.x_max, self.ox, self.nx)
            j0, j1 = self._span(o.y_min, o.y_max, self.oy, self.ny)
            lethal.append((i0, i1, j0, j1))
            for j in range(j0, j1 + 1):
                row = j * self.nx
                self.cost[row + i0 : row + i1 + 1] = bytes([COST_LETHAL]) * (i1 - i0 + 1)
        r = m.inflation_m
        if r > 0.0:
            for i0, i1, j0, j1 in lethal:
                self._inflate(i0, i1, j0, j1, r)
        self._w = self.nx + 2
        """The search's row stride: its copy of the grid has a blocked border, so no move needs a bounds check."""
        self._blocked = bytearray(b"\x01") * (self._w * (self.ny + 2))
        for j in range(self.ny):
            row = self.cost[j * self.nx : (j + 1) * self.nx]
            start = (j + 1) * self._w + 1
            self._blocked[start : start + self.nx] = bytes(c >= COST_INSCRIBED for c in row)
        self.components()

    def _span(self, lo: float, hi: float, origin: float, n: int) -> tuple[int, int]:
        """The cells [a, b] an interval overlaps, clipped to the map (that it overlaps the map is validated).

        An edge on a cell boundary does not take the next cell (the 1e-9 absorbs ``1.0 / 0.1`` rounding).
        """
        a = math.floor((lo - origin) / self.res + 1e-9)
        b = math.ceil((hi - origin) / self.res - 1e-9) - 1
        return max(0, a), min(n - 1, max(a, b))

    def _inflate(self, i0: int, i1: int, j0: int, j1: int, r: float) -> None:
        """Mark inscribed every non-lethal cell whose centre is within ``r`` of the lethal rectangle's edge."""
        res, nx, ny = self.res, self.nx, self.ny
        x_lo, x_hi = self.ox + i0 * res, self.ox + (i1 + 1) * res
        y_lo, y_hi = self.oy + j0 * res, self.oy + (j1 + 1) * res
        reach = math.ceil(r / res)
        r2 = r * r + 1e-12
        for j in range(max(0, j0 - reach), min(ny - 1, j1 + reach) + 1):
            cy = self.oy + (j + 0.5) * res
            dy = max(y_lo - cy, 0.0, cy - y_hi)
            row = j * nx
            for i in range(max(0, i0 - reach), min(nx - 1, i1 + reach) + 1):
                cx = self.ox + (i + 0.5) * res
                dx = max(x_lo - cx, 0.0, cx - x_hi)
                if dx * dx + dy * dy <= r2 and self.cost[row + i] < COST_INSCRIBED:
                    self.cost[row + i] = COST_INSCRIBED

    def cell(self, x: float, y: float) -> tuple[int, int] | None:
        """The (i, j) of the cell holding a point; None off the map (a private helper's 'no cell')."""
        if not (math.isfinite(x) and math.isfinite(y)):
            return None
        i = math.floor((x - self.ox) / self.res)
        j = math.floor((y - self.oy) / self.res)
        if 0 <= i < self.nx and 0 <= j < self.ny:
            return (i, j)
        return None

    def cost_at(self, x: float, y: float) -> int:
        c = self.cell(x, y)
        return COST_NO_INFORMATION if c is None else self.cost[c[1] * self.nx + c[0]]

    def heading(self, a: int, b: int) -> tuple[int, int]:
        """The unit grid direction from cell ``a`` to cell ``b`` (on one straight or diagonal run)."""
        (ay, ax), (by, bx) = divmod(a, self.nx), divmod(b, self.nx)
        return ((bx > ax) - (bx < ax), (by > ay) - (by < ay))

    def centre(self, index: int) -> tuple[float, float]:
        i, j = index % self.nx, index // self.nx
        return (self.ox + (i + 0.5) * self.res, self.oy + (j + 0.5) * self.res)

    def components(self) -> list[int]:
        """A label per cell: the 4-connected component of free cells it belongs to, -1 for blocked cells.

        With corner cutting forbidden, 8-connected moves join exactly the cells
        4-connected moves join, so this is also the search's reachability.
        """
        if self._components is not None:
            return self._components
        nx, ny, cost = self.nx, self.ny, self.cost
        label = [-1] * (nx * ny)
        current = 0
        for seed in range(nx * ny):
            if label[seed] != -1 or cost[seed] >= COST_INSCRIBED:
                continue
            label[seed] = current
            stack = [seed]
            while stack:
                c = stack.pop()
                i = c % nx
                for n, ok in ((c - 1, i > 0), (c + 1, i < nx - 1), (c - nx, c >= nx), (c + nx, c < nx * (ny - 1))):
                    if ok and label[n] == -1 and cost[n] < COST_INSCRIBED:
                        label[n] = current
                        stack.append(n)
            current += 1
        self._components = label
        return label

    def search(self, start: int, goal: int, budget: int) -> tuple[list[int], int]:
        """Jump point search (A* that skips symmetric paths) from cell ``start`` to cell ``goal``.

        Both cells free and in one component. 8-connected without corner
        cutting (a diagonal step needs both orthogonal neighbours free), octile
        costs and heuristic, so the path is a shortest one on the grid, as
        plain A* finds, at a fraction of the expansions (a wall across a
        200 x 200 map: about ten jump points instead of 15 000 cells). Returns
        (jump points, expansions): consecutive points are joined by one
        straight or diagonal run of free cells; no points when ``budget``
        expansions did not reach the goal.
        """
        w, nx, b = self._w, self.nx, self._blocked
        s, g = self._pad(start), self._pad(goal)
        gy, gx = divmod(g, w)
        g_score: dict[int, float] = {s: 0.0}
        parent: dict[int, int] = {}
        closed: set[int] = set()
        heap: list[tuple[float, int]] = [(0.0, s)]
        expansions = 0
        while heap:
            _, c = heapq.heappop(heap)
            if c in closed:
                continue
            if c == g:
                points = [c]
                while c in parent:
                    c = parent[c]
                    points.append(c)
                points.reverse()
                return [(q // w - 1) * nx + q % w - 1 for q in points], expansions
            if expansions >= budget:
                return [], expansions
            closed.add(c)
            expansions += 1
            cy, cx = divmod(c, w)
            g_c = g_score[c]
            for dx, dy in self._directions(c, parent.get(c)):
                jp = self._jump(c, dx, dy, g)
                if jp < 0 or jp in closed:
                    continue
                jy, jx = divmod(jp, w)
                g_n = g_c + _octile(jx - cx, jy - cy)
                if g_n < g_score.get(jp, math.inf):
                    g_score[jp] = g_n
                    parent[jp] = c
                    # A hair over the octile distance breaks ties toward the goal; the path stays shortest.
                    heapq.heappush(heap, (g_n + _octile(gx - jx, gy - jy) * (1.0 + 1e-9), jp))
        return [], expansions

    def _pad(self, index: int) -> int:
        return (index // self.nx + 1) * self._w + index % self.nx + 1

    def _directions(self, c: int, p: int | None) -> list[tuple[int, int]]:
        """The moves worth trying from jump point ``c`` reached from ``p`` (every legal one from the start)."""
        b, w = self._blocked, self._w
        out: list[tuple[int, int]] = []
        if p is None:
            for dx, dy in _NEIGHBOURS:
                if not b[c + dx + dy * w] and (not (dx and dy) or (not b[c + dx] and not b[c + dy * w])):
                    out.append((dx, dy))
            return out
        (cy, cx), (py, px) = divmod(c, w), divmod(p, w)
        dx, dy = (cx > px) - (cx < px), (cy > py) - (cy < py)
        if dx and dy:
            vertical, horizontal = not b[c + dy * w], not b[c + dx]
            if vertical:
                out.append((0, dy))
            if horizontal:
                out.append((dx, 0))
            if vertical and horizontal:
                out.append((dx, dy))
        elif dx:
            ahead, up, down = not b[c + dx], not b[c + w], not b[c - w]
            if ahead:
                out.append((dx, 0))
                if up:
                    out.append((dx, 1))
                if down:
                    out.append((dx, -1))
            if up:
                out.append((0, 1))
            if down:
                out.append((0, -1))
        else:
            ahead, right, left = not b[c + dy * w], not b[c + 1], not b[c - 1]
            if ahead:
                out.append((0, dy))
                if right:
                    out.append((1, dy))
                if left:
                    out.append((-1, dy))
            if right:
                out.append((1, 0))
            if left:
                out.append((-1, 0))
        return out

    def _jump(self, c: int, dx: int, dy: int, goal: int) -> int:
        """The next jump point from ``c`` in direction (dx, dy), or -1 when the run ends in a blocked cell."""
        b, w = self._blocked, self._w
        if not (dx and dy):
            return self._run(c, dx + dy * w, w if dx else 1, goal)
        off, ox, oy = dx + dy * w, dx, dy * w
        while True:
            n = c + off
            if b[n]:
                return -1
            if n == goal or self._run(n, ox, w, goal) >= 0 or self._run(n, oy, 1, goal) >= 0:
                return n
            if b[n + ox] or b[n + oy]:
                return -1  # the next diagonal step would cut a corner
            c = n

    def _run(self, c: int, off: int, side: int, goal: int) -> int:
        """A straight run from ``c`` by ``off``: the goal, or a cell with a forced neighbour (a side opens up)."""
        b = self._blocked
        while True:
            n = c + off
            if b[n]:
                return -1
            if n == goal:
                return n
            if (not b[n + side] and b[n - off + side]) or (not b[n - side] and b[n - off - side]):
                return n
            c = n


def _octile(dx: int, dy: int) -> float:
    """The 8-connected distance, in cells, of a (dx, dy) offset."""
    dx, dy = abs(dx), abs(dy)
    return dx + dy + (_SQRT2 - 2.0) * (dx if dx < dy else dy)


# --------------------------------------------------------------------------- goals and events


class GoalStatus(str, enum.Enum):
    """Where one navigation goal stands inside the world."""

    ACTIVE = "ACTIVE"
    """Accepted and not finished; the robot is working on it (or stalled on it)."""
    SUCCEEDED = "SUCCEEDED"
    """The navigator reported success (truthfully or not)."""
    ABORTED = "ABORTED"
    """Ended without success: preempted by a newer goal or aborted by the navigator."""
    CANCELED = "CANCELED"
    """Cancelled on request."""
    REJECTED = "REJECTED"
    """Refused on arrival; it never ran."""

    @property
    def terminal(self) -> bool:
        return self is not GoalStatus.ACTIVE


class GoalEventType(str, enum.Enum):
    """What happened to a goal; one event per transition, in order."""

    RECEIVED = "received"
    """A goal request arrived (before the accept/reject decision)."""
    ACCEPTED = "accepted"
    """The goal was accepted and is now the active goal."""
    REJECTED = "rejected"
    """The goal was refused."""
    SUCCEEDED = "succeeded"
    """The goal reported success."""
    ABORTED = "aborted"
    """The goal ended without success (e.g. preempted)."""
    CANCELED = "canceled"
    """The goal was cancelled."""


class GoalEvent(_Frozen):
    """One line of the sim's goal log: ground truth the harness never sees directly.

    Tests and benchmarks compare the harness's verdicts against this log.
    """

    kind: Literal["sim_goal_event"] = "sim_goal_event"
    format_version: int = FORMAT_VERSION
    event: GoalEventType
    goal_index: int
    """1-based index of the goal in arrival order; 0 for a goal the world never received."""
    target: Pose2D
    true_pose: Pose2D
    localized_pose: Pose2D
    t: float
    """Sim time (seconds since start)."""
    stamp: float = 0.0
    """Epoch seconds, filled in by the ROS adapter; 0 inside the pure world."""
    reason: str = ""
    provider: str = Field(default="", exclude_if=lambda v: v == "")
    """The navigation provider the goal came through ("" the robot's own Nav2: left out of the serialized
    line, which stays as it was before providers existed)."""


@dataclass(frozen=True)
class GoalDecision:
    """The world's answer to a goal request."""

    accepted: bool
    reason: str
    goal_index: int


@dataclass(frozen=True)
class WaypointView:
    """One pose of a route goal: what the navigator says of it, and whether the robot really got there."""

    index: int
    pose: Pose2D
    state: WaypointState
    """What Nav2 reports (Kilted's ``WaypointStatus``): NavigateThroughPoses' state of it; for FollowWaypoints
    COMPLETED once the follower moved on past it without listing it, FAILED when it is a missed waypoint."""
    error_code: int = 0
    error_msg: str = ""
    reached_t: float | None = None
    """Ground truth: sim time the localized pose first came within ``ARRIVAL_TOLERANCE_M`` of it while the goal
    ran; None if it never did (a skipped waypoint, whatever the navigator says)."""


@dataclass(frozen=True)
class GoalView:
    """A read-only picture of one goal, as the navigator would report it (and, for waypoints, the truth)."""

    index: int
    target: Pose2D
    """Where the goal ends: the pose (a route's last); for a behaviour, the localized pose when it arrived."""
    status: GoalStatus
    received_t: float
    ended_t: float | None
    reason: str
    distance_remaining: float
    """Localized distance left along the planned path (what Nav2's feedback would say): a route's through
    every pose still ahead; FollowWaypoints' current leg's; a back-up's distance left; 0 for a spin or a wait."""
    feedback_enabled: bool
    plan_error: PlanErrorCode = PlanErrorCode.NONE
    """Why the goal's (or its current leg's) plan failed (NONE: it has a path); such a goal is aborted with it."""
    kind: NavGoalKind = NavGoalKind.NAVIGATE_TO_POSE
    poses: tuple[Pose2D, ...] = ()
    """The poses asked for: NavigateToPose's one, a route's in order; none for a behaviour."""
    current_waypoint: int = 0
    """A route: the index of the pose being driven to (FollowWaypoints' ``current_waypoint``); after the end,
    the last one it was."""
    poses_remaining: int = 0
    """Poses the navigator still means to go through, the current one included and dropped ones not
    (NavigateThroughPoses' ``number_of_poses_remaining``); 0 once the goal has ended."""
    waypoints: tuple[WaypointView, ...] = ()
    """A route's poses, one view each, in order; empty for other kinds."""
    error_code: int = 0
    """How the goal ended, as its Nav2 result says: 0 on success (and while it runs, and when cancelled or
    preempted); the planner's number for a plan failure (ComputePathToPose's 2xx, a NavigateThroughPoses'
    ComputePathThroughPoses 3xx); 105 for a stuck robot; 603 for FollowWaypoints stopping on a missed
    waypoint; a behaviour's own (701, 711, 713, 714)."""
    error_msg: str = ""
    distance_traveled: float = 0.0
    """BackUp: how far it has backed up (Nav2's feedback)."""
    angular_distance_traveled: float = 0.0
    """Spin: the signed angle turned so far (Nav2's feedback)."""
    time_left: float = 0.0
    """Wait: seconds left (Nav2's feedback)."""
    provider: str = ""
    """The navigation provider it came through ("" the robot's own Nav2)."""
    nth: int = 0
    """Its place among that provider's goals (1-based): what that provider's faults' ``on_goal`` counts."""


@dataclass(frozen=True)
class StampedPose:
    """A published localization sample and the sim time it claims to be from."""

    pose: Pose2D
    stamp_t: float


class _Phase(enum.Enum):
    """Controller phase of the active goal."""

    DRIVING = "driving"
    """Walking toward the target position."""
    ROTATING = "rotating"
    """At the target position, turning in place to the target yaw."""


_BT_NAVIGATOR_KINDS = frozenset({NavGoalKind.NAVIGATE_TO_POSE, NavGoalKind.NAVIGATE_THROUGH_POSES})
"""The kinds bt_navigator serves: refused, and aborted, while it is inactive."""

_BEHAVIOR_NAMES = {NavGoalKind.SPIN: "spin", NavGoalKind.BACK_UP: "backup", NavGoalKind.WAIT: "wait"}
"""behavior_server's plugin names (nav2_bringup's nav2_params.yaml): the prefix of a failed behaviour's message."""


class _Waypoint:
    """One pose of a route and what has become of it."""

    def __init__(self, index: int, pose: Pose2D) -> None:
        self.index = index
        self.pose = pose
        self.state = WaypointState.PENDING
        self.error_code = 0
        self.error_msg = ""
        self.reached_t: float | None = None
        self.passed = False
        """Done with, one way or another: driven to, dropped or missed; the navigator will not go there."""

    def view(self) -> WaypointView:
        return WaypointView(self.index, self.pose, self.state, self.error_code, self.error_msg, self.reached_t)


class _Route:
    def __init__(self, poses: tuple[Pose2D, ...], follow: bool) -> None:
        self.follow = follow
        self.wps = [_Waypoint(i, p) for i, p in enumerate(poses)]
        self.current = 0
        self.later: list[tuple[int, PlanResult]] = []
        """NavigateThroughPoses: the planned legs after the current one, each with the waypoint it ends at."""


class _Behaviour:
    """A behaviour's request and progress; ``amount`` is the spin's angle, the back-up's distance or the wait."""

    def __init__(self, kind: NavGoalKind, amount: float, speed: float, allowance: float, started_t: float) -> None:
        self.kind = kind
        self.amount = amount
        self.speed = speed
        self.allowance = allowance
        """Nav2's ``time_allowance``, seconds; 0: none (behavior_server checks it only when positive)."""
        self.started_t = started_t
        self.progress = 0.0
        """Spin: signed angle turned; BackUp: distance backed up."""


class _Goal:
    def __init__(self, index: int, target: Pose2D, received_t: float,
                 kind: NavGoalKind = NavGoalKind.NAVIGATE_TO_POSE, *, provider: str = "", nth: int = 0) -> None:
        self.index = index
        self.provider = provider
        self.nth = nth or index
        """The n-th goal its provider received: what that provider's faults' ``on_goal`` counts."""
        self.kind = kind
        self.target = target
        self.leg_target = target
        """Where the current leg ends (the target for NavigateToPose; the current waypoint for a route)."""
        self.received_t = received_t
        self.status = GoalStatus.ACTIVE
        self.ended_t: float | None = None
        self.reason = ""
        self.error_code = 0
        self.error_msg = ""
        self.phase = _Phase.DRIVING
        self.stalled = False
        self.feedback_enabled = True
        self.route: _Route | None = None
        self.behaviour: _Behaviour | None = None
        self.stuck_since: float | None = None
        """Sim time the current leg found the robot stuck (``stuck`` fault); None while it is free."""
        self.waypoints: list[tuple[float, float]] = []
        """The current leg's planned path after the start, its end last; empty while the plan has failed."""
        self.rest_m: list[float] = []
        """Path length from each waypoint to the last."""
        self.next_wp = 0
        self.plan_error = PlanErrorCode.NONE
        self.plan_message = ""
        self.fail_at = math.inf
        """Sim time at which a goal whose plan failed is aborted."""

    def set_plan(self, plan: PlanResult, t: float) -> None:
        if plan.ok:
            self.waypoints = list(plan.points[1:])
            rest = [0.0] * len(self.waypoints)
            for k in range(len(self.waypoints) - 2, -1, -1):
                (x0, y0), (x1, y1) = self.waypoints[k], self.waypoints[k + 1]
                rest[k] = rest[k + 1] + math.hypot(x1 - x0, y1 - y0)
            self.rest_m, self.next_wp = rest, 0
            self.plan_error, self.plan_message, self.fail_at = PlanErrorCode.NONE, "", math.inf
        else:
            self.waypoints, self.rest_m, self.next_wp = [], [], 0
            self.plan_error, self.plan_message = plan.error, plan.message
            self.fail_at = t + PLAN_FAILURE_ABORT_S


# --------------------------------------------------------------------------- the world


class SimWorld:
    """The simulated quadruped, advanced only by ``step(dt)``.

    Not thread-safe: the ROS adapter serializes every call under one lock.
    """

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self._rng = random.Random(self.config.seed)
        self._t = 0.0
        s = self.config.start
        self._x, self._y, self._yaw = s.x, s.y, normalize_angle(s.yaw)
        self._v = 0.0
        self._w = 0.0
        self._battery = self.config.battery_start
        self._offset_x = 0.0
        self._offset_y = 0.0
        self._offset_yaw = 0.0
        """The localization correction: localized = R(offset_yaw) * true + (offset_x, offset_y)."""
        self._frozen: StampedPose | None = None
        self._noise: PoseNoiseFault | None = None
        self._dead = False
        self._goals: dict[int, _Goal] = {}
        self._by_provider: dict[tuple[str, int], _Goal] = {}
        """(provider, its n-th goal) -> the goal; the robot's own Nav2 is provider ""."""
        self._received: dict[str, int] = {}
        """Goals each provider received."""
        self._active: _Goal | None = None
        self._events: list[GoalEvent] = []
        self._undrained = 0
        self._world_faults_fired: set[int] = set()
        self._foreign: set[int] = set()
        self._odometer_m = 0.0
        self._grid = _Grid(self.config.map) if self.config.map is not None else None
        self._freed: set[int] = set()
        """Indices (in ``config.faults``) of the ``stuck`` faults a behaviour has freed the robot from."""
        self._costmap_clears = 0

    # ----------------------------------------------------------------- queries

    @property
    def t(self) -> float:
        """Sim seconds since start."""
        return self._t

    @property
    def true_pose(self) -> Pose2D:
        return Pose2D(x=self._x, y=self._y, yaw=self._yaw)

    @property
    def localized_pose(self) -> Pose2D:
        """What the robot believes (truth through the localization correction); the controller drives on it."""
        x, y = self._x, self._y
        if self._offset_yaw == 0.0:
            return Pose2D(x=x + self._offset_x, y=y + self._offset_y, yaw=self._yaw)
        c, s = math.cos(self._offset_yaw), math.sin(self._offset_yaw)
        return Pose2D(x=c * x - s * y + self._offset_x, y=s * x + c * y + self._offset_y,
                      yaw=normalize_angle(self._yaw + self._offset_yaw))

    def published_pose(self) -> StampedPose:
        """The next localization sample to publish.

        Frozen: the same pose and stamp as at the freeze. Noisy: each call draws
        fresh noise from the seeded RNG, so call order matters for replay.
        """
        if self._frozen is not None:
            return self._frozen
        pose = self.localized_pose
        if self._noise is not None:
            pose = Pose2D(
                x=pose.x + self._rng.gauss(0.0, self._noise.std_xy),
                y=pose.y + self._rng.gauss(0.0, self._noise.std_xy),
                yaw=normalize_angle(pose.yaw + self._rng.gauss(0.0, self._noise.std_yaw)),
            )
        return StampedPose(pose=pose, stamp_t=self._t)

    @property
    def pose_frozen(self) -> bool:
        return self._frozen is not None

    @property
    def pose_silent(self) -> bool:
        """True while a ``pose_dropout`` fault holds: adapters publish no localization sample.

        Read from the fault's trigger at the current time (not latched by a
        step), so ``at_s: 0`` holds before the first step, when adapters send
        their first samples.
        """
        for f in self.config.faults:
            if isinstance(f, PoseDropoutFault):
                start = self._world_fault_start(f)
                if start is not None and self._t + 1e-9 >= start:
                    return True
        return False

    @property
    def foreign_goals(self) -> frozenset[int]:
        """Indices of the goals the world's ``external_goal`` faults sent (another client's, accepted or not)."""
        return frozenset(self._foreign)

    @property
    def pose_noise_std(self) -> tuple[float, float]:
        """(std_xy, std_yaw) of the published pose noise; zeros when there is none."""
        if self._noise is None:
            return (0.0, 0.0)
        return (self._noise.std_xy, self._noise.std_yaw)

    @property
    def pose_covariance(self) -> tuple[float, float, float]:
        """(var_x m^2, var_y m^2, var_yaw rad^2) the localization publishes with its pose.

        ``DEFAULT_POSE_VARIANCE`` plus the square of every active noise: the
        ``pose_noise`` the published pose really carries, and the
        ``high_covariance`` it only claims. Read at the current time, so
        ``at_s: 0`` holds before the first step.
        """
        var_x, var_y, var_yaw = DEFAULT_POSE_VARIANCE
        std_xy, std_yaw = self.pose_noise_std
        extra_xy, extra_yaw = std_xy**2, std_yaw**2
        for f in self.config.faults:
            if isinstance(f, HighCovarianceFault) and self._started(f):
                extra_xy += f.std_xy**2
                extra_yaw += f.std_yaw**2
        return (var_x + extra_xy, var_y + extra_xy, var_yaw + extra_yaw)

    @property
    def navigator_active(self) -> bool:
        """False while a ``navigator_inactive`` fault holds: goals are refused, the adapter's bt_navigator is inactive."""
        for f in self.config.faults:
            if isinstance(f, NavigatorInactiveFault) and self._started(f):
                start = self._world_fault_start(f)
                assert start is not None
                if f.for_s is None or self._t + 1e-9 < start + f.for_s:
                    return False
        return True

    @property
    def has_map(self) -> bool:
        """True when the scenario declared a map (``SimConfig.map``)."""
        return self._grid is not None

    def cost_at(self, x: float, y: float) -> int:
        """Nav2's cost of the map cell holding (x, y): ``COST_FREE``, ``COST_INSCRIBED``, ``COST_LETHAL``,
        or ``COST_NO_INFORMATION`` off the map. Without a map every (finite) point is free."""
        if self._grid is None:
            return COST_FREE if math.isfinite(x) and math.isfinite(y) else COST_NO_INFORMATION
        return self._grid.cost_at(x, y)

    def in_map(self, x: float, y: float) -> bool:
        """True when (x, y) lies on the map (any finite point, without one)."""
        if self._grid is None:
            return math.isfinite(x) and math.isfinite(y)
        return self._grid.cell(x, y) is not None

    def plan_path(self, start: Pose2D, goal: Pose2D, *, max_expansions: int | None = None,
                  provider: str = "") -> PlanResult:
        """Plan as Nav2's planner server would, without moving anything: a path or an error name.

        Checks in Nav2's order: the start, then the goal, on the map
        (``*_OUTSIDE_MAP``) and not inscribed or lethal (``*_OCCUPIED``); a
        ``no_path`` fault for the next goal to arrive (``NO_VALID_PATH``); a
        goal cut off from the start (``NO_VALID_PATH``, without searching);
        then the search (``_Grid.search``: shortest, 8-connected, no corner
        cutting), expanding at most ``max_expansions`` jump points (default:
        the grid's cell count; exhausted: ``TIMEOUT``). Without a map
        the path is the straight line. Pure: the RNG, the goals and the events
        are untouched. ``provider``: whose planner answers (its ``no_path``
        faults, its next goal); "" the robot's own, whose planner_server the
        adapters serve.
        """
        if max_expansions is not None and max_expansions < 0:
            raise UsageError("max_expansions cannot be negative", max_expansions=max_expansions)
        self._check_provider(provider)
        return self._plan(start, goal, max_expansions, provider=provider, nth=self.received_by(provider) + 1)

    @property
    def stuck(self) -> bool:
        """Ground truth: a ``stuck`` fault holds and no behaviour has freed the robot yet."""
        return self._stuck_fault() is not None

    @property
    def costmap_clears(self) -> int:
        """Ground truth: how many ``clear_costmaps`` calls succeeded."""
        return self._costmap_clears

    @property
    def twist(self) -> Velocity:
        """Body-frame velocity over the last substep (true odometry)."""
        return Velocity(vx=self._v, vy=0.0, wz=self._w)

    @property
    def battery(self) -> float:
        """State of charge, 0..1."""
        return self._battery

    @property
    def odometer_m(self) -> float:
        """True distance walked since start."""
        return self._odometer_m

    @property
    def dead(self) -> bool:
        return self._dead

    @property
    def goals_received(self) -> int:
        return len(self._goals)

    def received_by(self, provider: str = "") -> int:
        """How many goals ``provider`` received ("" the robot's own Nav2; refused-while-inactive ones not)."""
        self._check_provider(provider)
        return self._received.get(provider, 0)

    def speed_for(self, provider: str = "") -> float:
        """The walking speed of ``provider``'s goals, m/s (its own, else ``SimConfig.speed``)."""
        if not provider:
            return self.config.speed
        self._check_provider(provider)
        speed = self.config.providers[provider].speed
        return self.config.speed if speed is None else speed

    @property
    def active_goal(self) -> GoalView | None:
        return self._view(self._active) if self._active is not None else None

    def goal(self, index: int) -> GoalView:
        """The goal with this 1-based index; ``UsageError`` if it was never received."""
        g = self._goals.get(index)
        if g is None:
            raise UsageError(f"no goal with index {index}", goal_index=index, goals_received=len(self._goals))
        return self._view(g)

    @property
    def events(self) -> tuple[GoalEvent, ...]:
        """Every goal event since start, in order."""
        return tuple(self._events)

    def ack_delay_for(self, index: int) -> float:
        """Seconds the acceptance of goal ``index`` is held back (0 when no ``ack_delay`` fault hits it).

        ``on_goal`` matches its provider's n-th goal (its provider's faults); ``at_s``
        every goal received at or after that sim time. The longest matching delay wins.
        """
        g = self._goals.get(index)
        if g is None:
            raise UsageError(f"no goal with index {index}", goal_index=index, goals_received=len(self._goals))
        delays = [
            f.delay_s
            for f in self._faults_of(g.provider)
            if isinstance(f, AckDelayFault)
            and (f.on_goal == g.nth or (f.at_s is not None and g.received_t + 1e-9 >= f.at_s))
        ]
        return max(delays, default=0.0)

    @property
    def acks_withheld(self) -> bool:
        """True while a ``no_ack`` fault is active: deliveries arrive but are never acknowledged."""
        return any(isinstance(f, NoAckFault) and self._fault_active(f) for f in self.config.faults)

    @property
    def completion_claim(self) -> str:
        """The false completion text of the active ``claims_completion`` fault ('' when none; the last listed wins)."""
        claims = [f.text for f in self.config.faults if isinstance(f, ClaimsCompletionFault) and self._fault_active(f)]
        return claims[-1] if claims else ""

    def drain_events(self) -> list[GoalEvent]:
        """Events produced since the last drain (the adapter publishes each once)."""
        new = self._events[len(self._events) - self._undrained :] if self._undrained else []
        self._undrained = 0
        return new

    def camera_live(self, topic: str = "") -> bool:
        """Whether the camera on ``topic`` publishes now ("" or the built-in topic: the built-in camera, while
        the robot lives; another: a ``SimConfig.cameras`` key, until its ``camera_dead`` fault starts)."""
        if self._dead:
            return False
        if topic in ("", BUILTIN_CAMERA_TOPIC):
            return True
        camera = self.config.cameras.get(topic)
        if camera is None:
            raise UsageError(f"no camera on {topic!r} (cameras: {', '.join(self.config.cameras) or 'none'} "
                             f"besides {BUILTIN_CAMERA_TOPIC!r})", topic=topic)
        return not any(self._started(f) for f in camera.faults)

    def camera_image(self, width: int = 64, height: int = 48, *, at: Pose2D | None = None) -> bytes:
        """A synthetic rgb8 frame that changes with the true pose (``at``: as seen from that pose instead).

        Background colour follows position, a bright vertical bar follows yaw,
        so two frames from different poses differ and frames are cheap to make.
        """
        if width <= 0 or height <= 0:
            raise UsageError("camera image needs a positive size", width=width, height=height)
        x, y, yaw = (self._x, self._y, self._yaw) if at is None else (at.x, at.y, at.yaw)
        bg = bytes(
            (
                int(128 + 127 * math.sin(x)),
                int(128 + 127 * math.sin(y)),
                int(128 + 127 * math.cos(yaw)),
            )
        )
        row = bytearray(bg * width)
        col = int((yaw + math.pi) / (2.0 * math.pi) * width) % width
        for c in range(max(0, col - 1), min(width, col + 2)):
            row[3 * c : 3 * c + 3] = b"\xff\xff\xff"
        return bytes(row) * height

    # ----------------------------------------------------------------- commands

    def submit_goal(self, x: float, y: float, yaw: float, *, provider: str = "") -> GoalDecision:
        """Receive a goal through ``provider`` ("" the robot's own Nav2; another: a ``SimConfig.providers``
        key, else ``UsageError``); a newly accepted goal preempts (aborts) the running one, whoever sent it."""
        self._check_provider(provider)
        return self._submit(x, y, yaw, "", provider)

    def submit_route(self, poses: Sequence[Pose2D], *, follow: bool, provider: str = "") -> GoalDecision:
        """Receive a route goal: NavigateThroughPoses (``follow=False``) or FollowWaypoints (``follow=True``).

        One goal, one index, its target the last pose; it preempts the running
        goal like any goal. NavigateThroughPoses is bt_navigator's (refused
        while it is inactive); every leg is planned now, the first from the
        localized pose and each next from the pose before, and a leg without
        a path aborts the goal ``PLAN_FAILURE_ABORT_S`` later with its
        ComputePathThroughPoses number. FollowWaypoints is waypoint_follower's:
        accepted even while bt_navigator is inactive, whose refusal of each
        waypoint's NavigateToPose then makes it a missed waypoint
        (``FOLLOW_WAYPOINTS_UNKNOWN``); each waypoint is planned when its turn
        comes, from the localized pose, and a failed plan misses it after
        ``PLAN_FAILURE_ABORT_S`` with its ComputePathToPose number.

        Raises ``UsageError`` for no poses or a non-finite one, and
        ``ScenarioError`` when a ``skip_waypoint`` fault for this goal names
        its last waypoint or one beyond (the last cannot be skipped).
        """
        self._check_provider(provider)
        route = tuple(poses)
        if not route:
            raise UsageError("a route needs at least one pose", poses=0)
        for i, p in enumerate(route):
            if not all(math.isfinite(v) for v in (p.x, p.y, p.yaw)):
                raise UsageError(f"route pose {i} is not finite", index=i, pose=p.model_dump())
        route = tuple(Pose2D(x=p.x, y=p.y, yaw=normalize_angle(p.yaw)) for p in route)
        kind = NavGoalKind.FOLLOW_WAYPOINTS if follow else NavGoalKind.NAVIGATE_THROUGH_POSES
        decision, g = self._receive(kind, route[-1], "", provider)
        if g is None:
            return decision
        g.route = _Route(route, follow)
        self._note_reached(g)
        if follow:
            self._start_follow_leg(g)
        else:
            self._apply_through_skips(g, replan=False)
            self._plan_through(g)
        self._apply_goal_faults()
        return decision

    def submit_spin(self, angle_rad: float, *, time_allowance_s: float = 0.0, provider: str = "") -> GoalDecision:
        """Receive a Spin: turn in place by ``angle_rad`` (signed: positive is counter-clockwise) at ``yaw_rate``.

        behavior_server's, so it runs while bt_navigator is inactive. It
        succeeds once it has turned the whole angle (0 at once); past a
        positive ``time_allowance_s`` it aborts with ``SPIN_TIMEOUT``. Raises
        ``UsageError`` for a non-finite angle or a negative or non-finite allowance.
        """
        if not math.isfinite(angle_rad):
            raise UsageError("the spin angle must be finite", angle_rad=angle_rad)
        self._check_allowance(time_allowance_s)
        self._check_provider(provider)
        return self._submit_behaviour(_Behaviour(NavGoalKind.SPIN, angle_rad, 0.0, time_allowance_s, self._t),
                                      provider)

    def submit_backup(self, dist_m: float, speed_mps: float, *, time_allowance_s: float = 0.0,
                      target_y: float = 0.0, target_z: float = 0.0, provider: str = "") -> GoalDecision:
        """Receive a BackUp: drive straight back (against the heading) ``|dist_m|`` at ``min(|speed_mps|, speed)``
        (``speed``: the provider's).

        As Nav2's BackUp, the signs of the distance and the speed are ignored
        (it always backs up), and a target with a non-zero ``target_y`` or
        ``target_z`` is accepted and aborted at once with ``BACKUP_INVALID_INPUT``.
        Each step checks the next position on the map: a cost of
        ``COST_INSCRIBED`` or more (off the map included) stops it, aborted
        with ``BACKUP_COLLISION_AHEAD`` (no map: nothing to hit). Past a
        positive ``time_allowance_s`` it aborts with ``BACKUP_TIMEOUT``. Runs
        while bt_navigator is inactive and while the robot is stuck. Raises
        ``UsageError`` for a non-finite number, a zero speed or a negative allowance.
        """
        for name, v in (("dist_m", dist_m), ("speed_mps", speed_mps), ("target_y", target_y), ("target_z", target_z)):
            if not math.isfinite(v):
                raise UsageError(f"backup {name} must be finite", **{name: v})
        if speed_mps == 0.0:
            raise UsageError("backup needs a non-zero speed", speed_mps=speed_mps)
        self._check_allowance(time_allowance_s)
        self._check_provider(provider)
        decision = self._submit_behaviour(_Behaviour(
            NavGoalKind.BACK_UP, abs(dist_m), min(abs(speed_mps), self.speed_for(provider)), time_allowance_s, self._t),
            provider)
        g = self._goals.get(decision.goal_index)
        if decision.accepted and g is self._active and (target_y != 0.0 or target_z != 0.0):
            self._end(g, GoalStatus.ABORTED, "backup refused: a target off the x axis",
                      BACKUP_INVALID_INPUT, "Backing up in Y and Z not supported, will only move in X.")
        return decision

    def submit_wait(self, duration_s: float, *, provider: str = "") -> GoalDecision:
        """Receive a Wait: stand still for ``duration_s`` sim seconds (0: done at the next step), then succeed.

        behavior_server's, so it runs while bt_navigator is inactive. Raises
        ``UsageError`` for a negative or non-finite duration.
        """
        if not (math.isfinite(duration_s) and duration_s >= 0.0):
            raise UsageError("a wait needs a finite duration >= 0", duration_s=duration_s)
        self._check_provider(provider)
        return self._submit_behaviour(_Behaviour(NavGoalKind.WAIT, duration_s, 0.0, 0.0, self._t), provider)

    def clear_costmaps(self, which: Sequence[str] = ()) -> bool:
        """Answer the costmaps' ``clear_entirely_*`` services (``"global"``, ``"local"``; empty: both).

        Not a goal: nothing in the goal log, no motion. True (and counted in
        ``costmap_clears``) unless the robot is dead; frees a robot held by a
        ``stuck`` fault freed by ``clear_costmaps``. ``UsageError`` for another name.
        """
        unknown = sorted(set(which) - {"global", "local"})
        if unknown:
            raise UsageError(f"unknown costmap(s) {unknown}: 'global' or 'local'", which=list(which))
        if self._dead:
            return False
        self._costmap_clears += 1
        self._free_stuck("clear_costmaps", 0.0)
        return True

    def cancel(self, goal_index: int | None = None) -> bool:
        """Cancel the active goal (only if it is ``goal_index``, when given); the robot stops."""
        return self._finish_active(GoalStatus.CANCELED, "canceled on request", goal_index)

    def abort(self, reason: str, goal_index: int | None = None) -> bool:
        """Abort the active goal (e.g. the navigator is deactivating); the robot stops."""
        return self._finish_active(GoalStatus.ABORTED, reason, goal_index)

    def relocalize(self, x: float, y: float, yaw: float) -> None:
        """The localization is told where the robot is (AMCL's ``initialpose``): the estimate jumps there.

        Only the estimate moves, as in Nav2: the true pose, the odometry, the
        battery and every goal stay as they are, and no event is logged (the
        world is the truth; nobody journals it). From now on the localized pose
        follows the truth through the new correction, so a later
        ``localization_jump`` adds its offset on top. A running goal carries on
        toward its target on the new estimate (back to walking if the estimate
        left the target). While a ``frozen_pose`` fault holds the published
        sample stays frozen; a dead robot's estimate moves but nothing publishes it.
        """
        yaw = normalize_angle(yaw)
        self._offset_yaw = normalize_angle(yaw - self._yaw)
        c, s = math.cos(self._offset_yaw), math.sin(self._offset_yaw)
        self._offset_x = x - (c * self._x - s * self._y)
        self._offset_y = y - (s * self._x + c * self._y)
        self._replan_active()
        g = self._active
        if g is not None and g.behaviour is None and g.phase is _Phase.ROTATING:
            est = self.localized_pose
            if math.hypot(g.leg_target.x - est.x, g.leg_target.y - est.y) > ARRIVAL_TOLERANCE_M:
                g.phase = _Phase.DRIVING

    def step(self, dt: float) -> None:
        """Advance the world by ``dt`` sim seconds (split into small substeps)."""
        if dt < 0.0:
            raise UsageError("time does not go backwards", dt=dt)
        remaining = dt
        while remaining > 1e-12 and not self._dead:
            h = min(_MAX_SUBSTEP_S, remaining)
            remaining -= h
            self._substep(h)
        if self._dead:
            self._v = self._w = 0.0

    # ----------------------------------------------------------------- internals

    def _submit(self, x: float, y: float, yaw: float, note: str, provider: str = "") -> GoalDecision:
        """``submit_goal``; ``note`` is the RECEIVED event's reason (who sent the goal, when not the client).

        An accepted goal is planned at once from the localized pose.
        """
        decision, g = self._receive(NavGoalKind.NAVIGATE_TO_POSE, Pose2D(x=x, y=y, yaw=normalize_angle(yaw)), note,
                                    provider)
        if g is not None:
            g.set_plan(self._plan_for(g, self.localized_pose, g.target), self._t)
            self._apply_goal_faults()
        return decision

    def _receive(self, kind: NavGoalKind, target: Pose2D, note: str,
                 provider: str = "") -> tuple[GoalDecision, _Goal | None]:
        """The arrival every goal shares: refused, rejected, or accepted as the active goal (preempting).

        A dead robot answers nothing worth logging. An inactive navigator
        refuses its own kinds before the goal counts (index 0, one REJECTED
        event), as a ROS adapter refuses for its inactive bt_navigator; that
        is the robot's own navigator, so only its own goals (provider "").
        Returns the accepted goal for its caller to set up, else None.
        """
        if self._dead:
            return GoalDecision(accepted=False, reason="robot is dead", goal_index=0), None
        if kind in _BT_NAVIGATOR_KINDS and not provider and not self.navigator_active:
            self._events.append(GoalEvent(
                event=GoalEventType.REJECTED, goal_index=0, target=target,
                true_pose=self.true_pose, localized_pose=self.localized_pose, t=self._t,
                reason=NAVIGATOR_INACTIVE_REASON))
            self._undrained += 1
            return GoalDecision(accepted=False, reason=NAVIGATOR_INACTIVE_REASON, goal_index=0), None
        index = len(self._goals) + 1
        nth = self._received[provider] = self._received.get(provider, 0) + 1
        goal = _Goal(index, target, self._t, kind, provider=provider, nth=nth)
        self._goals[index] = goal
        self._by_provider[(provider, nth)] = goal
        self._emit(GoalEventType.RECEIVED, goal, note)
        reject = self._reject_reason(goal)
        if reject:
            self._end(goal, GoalStatus.REJECTED, reject)
            return GoalDecision(accepted=False, reason=reject, goal_index=index), None
        if self._active is not None:
            self._end(self._active, GoalStatus.ABORTED, f"preempted by goal {index}")
        self._active = goal
        self._emit(GoalEventType.ACCEPTED, goal)
        return GoalDecision(accepted=True, reason="", goal_index=index), goal

    def _submit_behaviour(self, b: _Behaviour, provider: str = "") -> GoalDecision:
        decision, g = self._receive(b.kind, self.localized_pose, "", provider)
        if g is not None:
            g.behaviour = b
            self._apply_goal_faults()
        return decision

    def _check_provider(self, provider: str) -> None:
        if provider and provider not in self.config.providers:
            raise UsageError(f"no navigation provider {provider!r} on this robot (providers: "
                             f"{', '.join(self.config.providers) or 'none'}; '' is its own Nav2)", provider=provider)

    def _faults_of(self, provider: str) -> Sequence[Fault | ProviderFault]:
        """The faults of the navigator ``provider`` names: its card's, or (``""``) the robot's own list."""
        return self.config.providers[provider].faults if provider else self.config.faults

    def _plan_for(self, g: _Goal, start: Pose2D, goal: Pose2D) -> PlanResult:
        """A plan for goal ``g`` (a leg of it): its provider's planner, its place among that provider's goals."""
        return self._plan(start, goal, None, provider=g.provider, nth=g.nth)

    @staticmethod
    def _check_allowance(time_allowance_s: float) -> None:
        if not (math.isfinite(time_allowance_s) and time_allowance_s >= 0.0):
            raise UsageError("time_allowance_s must be finite and >= 0 (0: none)", time_allowance_s=time_allowance_s)

    # -- routes

    def _skip_for(self, g: _Goal, i: int) -> SkipWaypointFault | None:
        """The ``skip_waypoint`` fault that drops waypoint ``i`` of route goal ``g`` now, if any (never the last)."""
        assert g.route is not None
        if i >= len(g.route.wps) - 1:
            return None
        for f in self._faults_of(g.provider):
            if isinstance(f, SkipWaypointFault) and f.waypoint == i and (
                    f.on_goal == g.nth or (f.at_s is not None and self._t + 1e-9 >= f.at_s)):
                return f
        return None

    def _note_reached(self, g: _Goal) -> None:
        """Ground truth: stamp every waypoint the localized pose is within ``ARRIVAL_TOLERANCE_M`` of."""
        if g.route is None:
            return
        est = self.localized_pose
        for wp in g.route.wps:
            if wp.reached_t is None and math.hypot(wp.pose.x - est.x, wp.pose.y - est.y) <= ARRIVAL_TOLERANCE_M + 1e-9:
                wp.reached_t = self._t

    def _apply_through_skips(self, g: _Goal, *, replan: bool = True) -> None:
        """NavigateThroughPoses drops every waypoint a ``skip_waypoint`` fault names, as soon as it holds.

        Silent: the state stays PENDING (the navigator's list just lost it; the
        end turns it COMPLETED). Reported: SKIPPED, as RemoveInCollisionGoals
        marks a goal it removes. The legs ahead are planned again without it.
        """
        r = g.route
        assert r is not None
        dropped = False
        for wp in r.wps[r.current:-1]:
            if wp.passed:
                continue
            f = self._skip_for(g, wp.index)
            if f is not None:
                wp.passed, dropped = True, True
                if f.reported:
                    wp.state = WaypointState.SKIPPED
        if dropped and replan:
            self._plan_through(g)

    def _plan_through(self, g: _Goal) -> None:
        """Plan every leg still ahead of a NavigateThroughPoses goal; the first from the localized pose."""
        r = g.route
        assert r is not None
        ahead = [wp for wp in r.wps[r.current:] if not wp.passed]
        plans: list[tuple[int, PlanResult]] = []
        start = self.localized_pose
        for wp in ahead:
            plan = self._plan_for(g, start, wp.pose)
            if not plan.ok:
                g.set_plan(plan, self._t)
                r.later = []
                return
            plans.append((wp.index, plan))
            start = wp.pose
        (r.current, first), r.later = plans[0], plans[1:]
        g.leg_target = r.wps[r.current].pose
        g.phase = _Phase.DRIVING
        g.set_plan(first, self._t)

    def _start_follow_leg(self, g: _Goal) -> None:
        """FollowWaypoints sends the NavigateToPose of waypoint ``current`` (or moves past it), in order.

        A waypoint a ``skip_waypoint`` fault names is dropped (silent: as if
        done; reported: missed); one bt_navigator refuses is missed; past the
        last waypoint the goal succeeds.
        """
        r = g.route
        assert r is not None
        while g is self._active:
            if r.current >= len(r.wps):
                r.current = len(r.wps) - 1
                self._end(g, GoalStatus.SUCCEEDED, "")
                return
            wp = r.wps[r.current]
            g.leg_target, g.phase, g.stuck_since = wp.pose, _Phase.DRIVING, None
            f = self._skip_for(g, wp.index)
            if f is not None:
                if f.reported:
                    self._miss(g, wp, NAVIGATE_TO_POSE_UNKNOWN, SKIPPED_WAYPOINT_MSG)
                else:
                    wp.passed, wp.state = True, WaypointState.COMPLETED
                r.current += 1
                continue
            if not g.provider and not self.navigator_active:
                self._miss(g, wp, FOLLOW_WAYPOINTS_UNKNOWN, NAVIGATE_TO_POSE_REFUSED_MSG)
                r.current += 1
                continue
            g.set_plan(self._plan_for(g, self.localized_pose, wp.pose), self._t)
            return

    def _miss(self, g: _Goal, wp: _Waypoint, code: int, msg: str) -> None:
        """A FollowWaypoints waypoint failed; with ``stop_on_failure`` the goal ends here (603)."""
        wp.passed, wp.state, wp.error_code, wp.error_msg = True, WaypointState.FAILED, code, msg
        if self.config.stop_on_failure:
            self._end(g, GoalStatus.ABORTED, f"waypoint {wp.index} missed ({code}: {msg}); stop_on_failure",
                      FOLLOW_WAYPOINTS_STOP_ON_MISSED_WAYPOINT,
                      f"Failed to process waypoint {wp.index} in waypoint list and stop on failure is enabled."
                      " Terminating action.")

    def _leg_failed(self, g: _Goal, code: int, msg: str, reason: str) -> None:
        """The current leg's navigation failed: the goal aborts, or (FollowWaypoints) the waypoint is missed."""
        r = g.route
        if r is None or not r.follow:
            self._end(g, GoalStatus.ABORTED, reason, code, msg)
            return
        self._miss(g, r.wps[r.current], code, msg)
        if g is self._active:
            r.current += 1
            self._start_follow_leg(g)

    def _plan_failed(self, g: _Goal) -> None:
        err = g.plan_error
        reason = f"planning failed ({err.value}): {g.plan_message}"
        if g.route is not None and not g.route.follow:
            self._leg_failed(g, err.through_poses_number, g.plan_message, reason)
        else:
            self._leg_failed(g, err.number, g.plan_message, reason)

    def _arrived(self, g: _Goal) -> None:
        """At the current leg's position: turn to its yaw, or pass straight on (NavigateThroughPoses, not the last)."""
        r = g.route
        if r is not None and not r.follow and r.later:
            wp = r.wps[r.current]
            wp.passed, wp.state = True, WaypointState.COMPLETED
            (r.current, plan), r.later = r.later[0], r.later[1:]
            g.leg_target = r.wps[r.current].pose
            g.set_plan(plan, self._t)
            g.phase = _Phase.DRIVING
            return
        g.phase = _Phase.ROTATING
        self._v = self._w = 0.0

    def _leg_done(self, g: _Goal) -> None:
        """At the current leg's pose, yaw included: the goal succeeds, or FollowWaypoints goes on."""
        r = g.route
        if r is None:
            self._end(g, GoalStatus.SUCCEEDED, "")
            return
        wp = r.wps[r.current]
        wp.passed, wp.state = True, WaypointState.COMPLETED
        if not r.follow:
            self._end(g, GoalStatus.SUCCEEDED, "")
            return
        r.current += 1
        self._start_follow_leg(g)

    # -- behaviours and the stuck fault

    def _stuck_fault(self) -> StuckFault | None:
        for i, f in enumerate(self.config.faults):
            if isinstance(f, StuckFault) and i not in self._freed and self._started(f):
                return f
        return None

    def _free_stuck(self, by: str, backed_up_m: float) -> None:
        for i, f in enumerate(self.config.faults):
            if isinstance(f, StuckFault) and i not in self._freed and self._started(f) and f.freed_by == by:
                if by != "backup" or backed_up_m + 1e-9 >= f.min_backup_m:
                    self._freed.add(i)

    def _run_behaviour(self, g: _Goal, h: float) -> None:
        """One substep of behavior_server's cycle: the time allowance first, then the motion, then done?"""
        b = g.behaviour
        assert b is not None
        self._v = self._w = 0.0
        name = _BEHAVIOR_NAMES[b.kind]
        if b.allowance > 0.0 and self._t - b.started_t > b.allowance + 1e-9:
            what, code = ("Spin", SPIN_TIMEOUT) if b.kind is NavGoalKind.SPIN else ("DriveOnHeading", BACKUP_TIMEOUT)
            self._end(g, GoalStatus.ABORTED, f"{name}: time allowance of {b.allowance:g} s exceeded", code,
                      f"{name} failed:Exceeded time allowance before reaching the {what} goal - Exiting {what}")
            return
        if b.kind is NavGoalKind.WAIT:
            if self._t + 1e-9 >= b.started_t + b.amount:
                self._end(g, GoalStatus.SUCCEEDED, "")
            return
        if b.kind is NavGoalKind.SPIN:
            turn = math.copysign(min(self.config.yaw_rate * h, abs(b.amount) - abs(b.progress)), b.amount)
            self._yaw = normalize_angle(self._yaw + turn)
            b.progress += turn
            self._w = turn / h
            if abs(b.amount) - abs(b.progress) < 1e-6:
                b.progress = b.amount
                if b.amount != 0.0:
                    self._free_stuck("spin", 0.0)
                self._end(g, GoalStatus.SUCCEEDED, "")
            return
        step = min(b.speed * h, b.amount - b.progress)
        if step > 0.0:
            est = self.localized_pose
            nx, ny = est.x - step * math.cos(est.yaw), est.y - step * math.sin(est.yaw)
            if self.cost_at(nx, ny) >= COST_INSCRIBED:
                self._end(g, GoalStatus.ABORTED, f"backup: collision ahead at {_fmt(nx, ny)} (cost "
                          f"{self.cost_at(nx, ny)})", BACKUP_COLLISION_AHEAD,
                          f"{name} failed:Collision Ahead - Exiting DriveOnHeading")
                return
            self._x -= step * math.cos(self._yaw)
            self._y -= step * math.sin(self._yaw)
            self._v = -step / h
            b.progress += step
            self._odometer_m += step
            self._battery = max(0.0, self._battery - self.config.battery_drain_per_m * step)
        if b.amount - b.progress <= 1e-9:
            self._free_stuck("backup", b.progress)
            self._end(g, GoalStatus.SUCCEEDED, "")

    def _plan(self, start: Pose2D, goal: Pose2D, max_expansions: int | None, *, provider: str, nth: int) -> PlanResult:
        """``plan_path`` for ``provider``'s ``nth`` goal (its ``no_path`` faults' ``on_goal`` match it)."""
        grid = self._grid
        s = gl = 0
        for what, p, code in (("start", start, PlanErrorCode.START_OUTSIDE_MAP),
                              ("goal", goal, PlanErrorCode.GOAL_OUTSIDE_MAP)):
            if not (math.isfinite(p.x) and math.isfinite(p.y)):
                return PlanResult(code, f"{what} {_fmt(p.x, p.y)} is not a finite position")
        if grid is not None:
            s_cell, g_cell = grid.cell(start.x, start.y), grid.cell(goal.x, goal.y)
            if s_cell is None:
                return PlanResult(PlanErrorCode.START_OUTSIDE_MAP, f"start {_fmt(start.x, start.y)} lies outside the map")
            if g_cell is None:
                return PlanResult(PlanErrorCode.GOAL_OUTSIDE_MAP, f"goal {_fmt(goal.x, goal.y)} lies outside the map")
            s, gl = s_cell[1] * grid.nx + s_cell[0], g_cell[1] * grid.nx + g_cell[0]
            if grid.cost[s] >= COST_INSCRIBED:
                return PlanResult(PlanErrorCode.START_OCCUPIED,
                                  f"start {_fmt(start.x, start.y)} is in collision (cost {grid.cost[s]})")
            if grid.cost[gl] >= COST_INSCRIBED:
                return PlanResult(PlanErrorCode.GOAL_OCCUPIED,
                                  f"goal {_fmt(goal.x, goal.y)} is in an occupied cell (cost {grid.cost[gl]})")
        if self._no_path_for(goal, provider, nth):
            return PlanResult(PlanErrorCode.NO_VALID_PATH, f"no valid path to {_fmt(goal.x, goal.y)} (no_path fault)")
        if grid is None or s == gl:
            return self._path_through([(start.x, start.y), (goal.x, goal.y)], goal, 0)
        labels = grid.components()
        if labels[s] != labels[gl]:
            return PlanResult(PlanErrorCode.NO_VALID_PATH, f"no valid path from {_fmt(start.x, start.y)} to "
                                                          f"{_fmt(goal.x, goal.y)}: the goal is cut off from the start")
        budget = grid.nx * grid.ny if max_expansions is None else max_expansions
        cells, expansions = grid.search(s, gl, budget)
        if not cells:
            return PlanResult(PlanErrorCode.TIMEOUT, f"no path to {_fmt(goal.x, goal.y)} within {budget} expansions",
                              expansions=expansions)
        points = [(start.x, start.y)]
        for k in range(1, len(cells) - 1):
            if grid.heading(cells[k - 1], cells[k]) != grid.heading(cells[k], cells[k + 1]):
                points.append(grid.centre(cells[k]))
        points.append((goal.x, goal.y))
        return self._path_through(points, goal, expansions)

    @staticmethod
    def _path_through(points: list[tuple[float, float]], goal: Pose2D, expansions: int) -> PlanResult:
        poses, length = [], 0.0
        for k, (x, y) in enumerate(points):
            if k + 1 < len(points):
                nx_, ny_ = points[k + 1]
                length += math.hypot(nx_ - x, ny_ - y)
                yaw = math.atan2(ny_ - y, nx_ - x) if (nx_, ny_) != (x, y) else goal.yaw
            else:
                yaw = goal.yaw
            poses.append(Pose2D(x=x, y=y, yaw=normalize_angle(yaw)))
        return PlanResult(PlanErrorCode.NONE, "", tuple(poses), length, expansions)

    def _no_path_for(self, goal: Pose2D, provider: str, nth: int) -> bool:
        for f in self._faults_of(provider):
            if not isinstance(f, NoPathFault):
                continue
            if f.region is not None and not f.region.contains(goal.x, goal.y):
                continue
            if f.on_goal == nth or (f.at_s is not None and self._t + 1e-9 >= f.at_s):
                return True
        return False

    def _replan_active(self) -> None:
        """The estimate jumped (``relocalize``, ``localization_jump``): plan the running goal again from it."""
        g = self._active
        if g is None or self._grid is None or g.behaviour is not None:
            return
        g.set_plan(self._plan_for(g, self.localized_pose, g.leg_target), self._t)

    def _view(self, g: _Goal) -> GoalView:
        est = self.localized_pose
        b, r = g.behaviour, g.route
        if b is not None:
            remaining = b.amount - b.progress if b.kind is NavGoalKind.BACK_UP else 0.0
        elif g.waypoints:
            wx, wy = g.waypoints[g.next_wp]
            remaining = math.hypot(wx - est.x, wy - est.y) + g.rest_m[g.next_wp]
        else:
            remaining = math.hypot(g.leg_target.x - est.x, g.leg_target.y - est.y)
        if r is not None and not r.follow:
            remaining += sum(plan.length_m for _, plan in r.later)
        active = g.status is GoalStatus.ACTIVE
        if r is not None:
            poses = tuple(wp.pose for wp in r.wps)
            left = sum(1 for wp in r.wps[r.current:] if not wp.passed) if active else 0
        else:
            poses = (g.target,) if b is None else ()
            left = 1 if active and b is None else 0
        return GoalView(
            index=g.index,
            target=g.target,
            status=g.status,
            received_t=g.received_t,
            ended_t=g.ended_t,
            reason=g.reason,
            distance_remaining=remaining,
            feedback_enabled=g.feedback_enabled,
            plan_error=g.plan_error,
            kind=g.kind,
            poses=poses,
            current_waypoint=r.current if r is not None else 0,
            poses_remaining=left,
            waypoints=tuple(wp.view() for wp in r.wps) if r is not None else (),
            error_code=g.error_code,
            error_msg=g.error_msg,
            distance_traveled=b.progress if b is not None and b.kind is NavGoalKind.BACK_UP else 0.0,
            angular_distance_traveled=b.progress if b is not None and b.kind is NavGoalKind.SPIN else 0.0,
            time_left=(max(0.0, b.started_t + b.amount - self._t) if active else 0.0)
            if b is not None and b.kind is NavGoalKind.WAIT else 0.0,
            provider=g.provider,
            nth=g.nth,
        )

    def _emit(self, kind: GoalEventType, g: _Goal, reason: str = "") -> None:
        self._events.append(
            GoalEvent(
                event=kind,
                goal_index=g.index,
                target=g.target,
                true_pose=self.true_pose,
                localized_pose=self.localized_pose,
                t=self._t,
                reason=reason,
                provider=g.provider,
            )
        )
        self._undrained += 1

    _END_EVENTS = {
        GoalStatus.SUCCEEDED: GoalEventType.SUCCEEDED,
        GoalStatus.ABORTED: GoalEventType.ABORTED,
        GoalStatus.CANCELED: GoalEventType.CANCELED,
        GoalStatus.REJECTED: GoalEventType.REJECTED,
    }

    def _end(self, g: _Goal, status: GoalStatus, reason: str, error_code: int = 0, error_msg: str = "") -> None:
        """The one place a goal leaves ACTIVE, with its Nav2 result's error code and message.

        A route's waypoints still PENDING are settled as Nav2 settles them:
        NavigateThroughPoses turns them COMPLETED when it succeeds and FAILED
        otherwise (its goalCompleted); FollowWaypoints' success lists no more
        missed waypoints, so they count as COMPLETED, and otherwise they stay PENDING.
        """
        if g.status is not GoalStatus.ACTIVE:
            raise UsageError("goal already finished", goal_index=g.index, status=g.status.value)
        g.status, g.reason, g.ended_t = status, reason, self._t
        g.error_code, g.error_msg = error_code, error_msg
        if g.route is not None and (status is GoalStatus.SUCCEEDED or not g.route.follow):
            final = WaypointState.COMPLETED if status is GoalStatus.SUCCEEDED else WaypointState.FAILED
            for wp in g.route.wps:
                if wp.state is WaypointState.PENDING:
                    wp.state = final
        if g is self._active:
            self._active = None
            self._v = self._w = 0.0
        self._emit(self._END_EVENTS[status], g, reason)

    def _finish_active(self, status: GoalStatus, reason: str, goal_index: int | None) -> bool:
        g = self._active
        if self._dead or g is None or (goal_index is not None and g.index != goal_index):
            return False
        self._end(g, status, reason)
        return True

    def _fault_active(self, f: NoAckFault | ClaimsCompletionFault) -> bool:
        """A standing fault: on from ``at_s``, or from the arrival of the ``on_goal``-th goal."""
        if f.at_s is not None:
            return self._t + 1e-9 >= f.at_s
        return ("", f.on_goal or 0) in self._by_provider

    def _reject_reason(self, g: _Goal) -> str:
        for f in self._faults_of(g.provider):
            if isinstance(f, RejectFault):
                if f.on_goal == g.nth or (f.at_s is not None and self._t >= f.at_s):
                    return "goal rejected (reject fault)"
        return ""

    def _goal_fault_start(self, f: _GoalFault, g: _Goal) -> float | None:
        if f.on_goal is not None:
            return g.received_t + f.delay_s() if f.on_goal == g.nth else None
        assert f.at_s is not None
        return max(f.at_s, g.received_t + f.delay_s())

    def _started(self, f: _WorldFault | CameraDeadFault) -> bool:
        """A world fault read at the current time rather than latched by a step."""
        start = self._world_fault_start(f)
        return start is not None and self._t + 1e-9 >= start

    def _world_fault_start(self, f: _WorldFault | CameraDeadFault) -> float | None:
        if isinstance(f, ExternalGoalFault):
            return f.at_s
        if f.at_s is not None:
            return f.at_s + f.delay_s()
        g = self._by_provider.get(("", f.on_goal or 0))  # the robot's faults count its own Nav2's goals
        return g.received_t + f.delay_s() if g is not None else None

    def _apply_goal_faults(self) -> None:
        g = self._active
        if g is None:
            return
        for f in self._faults_of(g.provider):
            if not isinstance(f, (EarlySuccessFault, StallFault, NoFeedbackFault)):
                continue
            start = self._goal_fault_start(f, g)
            if start is None or self._t + 1e-9 < start:
                continue
            if isinstance(f, NoFeedbackFault):
                g.feedback_enabled = False
            elif isinstance(f, StallFault):
                g.stalled = True
            else:
                self._end(g, GoalStatus.SUCCEEDED, "early_success fault")
                return

    def _apply_world_faults(self) -> None:
        for i, f in enumerate(self.config.faults):
            if i in self._world_faults_fired or not isinstance(
                f, (LocalizationJumpFault, FrozenPoseFault, PoseNoiseFault, DieFault, ExternalGoalFault)
            ):
                continue
            start = self._world_fault_start(f)
            if start is None or self._t + 1e-9 < start:
                continue
            self._world_faults_fired.add(i)
            if isinstance(f, LocalizationJumpFault):
                self._offset_x += f.dx
                self._offset_y += f.dy
                self._replan_active()
            elif isinstance(f, FrozenPoseFault):
                if self._frozen is None:
                    self._frozen = self.published_pose()
            elif isinstance(f, PoseNoiseFault):
                self._noise = f
            elif isinstance(f, ExternalGoalFault):
                sent = self._submit(self._x + f.dx, self._y + f.dy, self._yaw, EXTERNAL_GOAL_NOTE)
                self._foreign.add(sent.goal_index)
            else:
                self._dead = True
                return

    def _substep(self, h: float) -> None:
        self._t += h
        self._apply_world_faults()
        if self._dead:
            return
        g = self._active
        if g is not None and g.kind in _BT_NAVIGATOR_KINDS and not g.provider and not self.navigator_active:
            self._end(g, GoalStatus.ABORTED, "bt_navigator deactivated (navigator_inactive fault)")
        self._apply_goal_faults()
        g = self._active
        if g is None or g.stalled:
            self._v = self._w = 0.0
            return
        if g.behaviour is not None:
            self._run_behaviour(g, h)
        else:
            self._navigate(g, h)

    def _navigate(self, g: _Goal, h: float) -> None:
        """One substep of a navigation goal: the route's bookkeeping, a failed plan, a stuck robot, or motion."""
        r = g.route
        if r is not None:
            self._note_reached(g)
            if not r.follow:
                self._apply_through_skips(g)
            elif not g.provider and not self.navigator_active:
                # bt_navigator deactivated under the waypoint's NavigateToPose: aborted with an empty result.
                self._leg_failed(g, 0, "", "bt_navigator deactivated (navigator_inactive fault)")
            elif self._skip_for(g, r.current) is not None:
                self._start_follow_leg(g)
            if g is not self._active:
                self._v = self._w = 0.0
                return
        if g.plan_error is not PlanErrorCode.NONE:
            self._v = self._w = 0.0
            if self._t + 1e-9 >= g.fail_at:
                self._plan_failed(g)
            return
        wedged = self._stuck_fault()
        if wedged is not None:
            self._v = self._w = 0.0
            if g.stuck_since is None:
                g.stuck_since = self._t
            if self._t + 1e-9 >= g.stuck_since + wedged.patience_s:
                self._leg_failed(g, FOLLOW_PATH_FAILED_TO_MAKE_PROGRESS, STUCK_ERROR_MSG,
                                 "failed to make progress (stuck fault)")
            return
        g.stuck_since = None
        if g.phase is _Phase.DRIVING:
            self._drive(g, h)
        else:
            self._rotate_to_goal_yaw(g, h)

    def _turn_toward(self, desired: float, h: float) -> float:
        """Turn toward ``desired``, a heading in the localized frame (where targets are); the residual error."""
        desired = desired - self._offset_yaw if self._offset_yaw != 0.0 else desired
        err = normalize_angle(desired - self._yaw)
        limit = self.config.yaw_rate * h
        turn = max(-limit, min(limit, err))
        self._yaw = normalize_angle(self._yaw + turn)
        self._w = turn / h
        return err - turn

    def _drive(self, g: _Goal, h: float) -> None:
        """Walk toward the next waypoint of the plan; the last one is the target's position."""
        est = self.localized_pose
        last = len(g.waypoints) - 1
        while g.next_wp < last and math.hypot(g.waypoints[g.next_wp][0] - est.x,
                                              g.waypoints[g.next_wp][1] - est.y) <= ARRIVAL_TOLERANCE_M:
            g.next_wp += 1
        wx, wy = g.waypoints[g.next_wp]
        dx, dy = wx - est.x, wy - est.y
        d = math.hypot(dx, dy)
        if d <= ARRIVAL_TOLERANCE_M:
            self._arrived(g)
            self._v = self._w = 0.0
            return
        residual = self._turn_toward(math.atan2(dy, dx), h)
        self._v = 0.0
        if abs(residual) < (_HEADING_GATE_RAD if self._grid is None else _PATH_HEADING_GATE_RAD):
            dist = min(self.speed_for(g.provider) * h, d * math.cos(residual))
            self._x += dist * math.cos(self._yaw)
            self._y += dist * math.sin(self._yaw)
            self._v = dist / h
            self._odometer_m += dist
            self._battery = max(0.0, self._battery - self.config.battery_drain_per_m * dist)
        self._note_reached(g)
        est = self.localized_pose
        if g.next_wp == last and math.hypot(wx - est.x, wy - est.y) <= ARRIVAL_TOLERANCE_M:
            v, w = self._v, self._w
            self._arrived(g)
            self._v, self._w = v, w

    def _rotate_to_goal_yaw(self, g: _Goal, h: float) -> None:
        self._v = 0.0
        yaw = g.leg_target.yaw
        residual = self._turn_toward(yaw, h)
        if abs(residual) <= _YAW_DONE_RAD:
            self._yaw = yaw if self._offset_yaw == 0.0 else normalize_angle(yaw - self._offset_yaw)
            self._v = self._w = 0.0
            self._leg_done(g)
