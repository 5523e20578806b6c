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
client of the navigator; not any adapter's client's goals).
"""
from __future__ import annotations

import enum
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from robot_harness.core.errors import ScenarioError, UsageError
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
    "DEFAULT_COMPLETION_CLAIM",
    "EXTERNAL_GOAL_NOTE",
    "SimConfig",
    "GoalStatus",
    "GoalEventType",
    "GoalEvent",
    "GoalDecision",
    "GoalView",
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

_YAW_DONE_RAD = 1e-6

_DEFAULT_AFTER_ON_GOAL_S = 0.3

DEFAULT_COMPLETION_CLAIM = "Arrived at the goal. Task complete."
"""What a ``claims_completion`` fault says when the scenario gives no text."""

EXTERNAL_GOAL_NOTE = "external_goal fault: another client's goal"
"""The reason on the RECEIVED event of a goal the world sent itself (``external_goal``)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- faults


class _FaultBase(_Frozen):
    """A trigger shared by every fault: the n-th goal received, or a sim time."""

    on_goal: int | None = Field(default=None, ge=1)
    """Affect the n-th goal received (1-based, rejected goals count)."""
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
    | ExternalGoalFault,
    Field(discriminator="kind"),
]
_FAULTS_ADAPTER: TypeAdapter[list[Fault]] = TypeAdapter(list[Fault])

_GoalFault = EarlySuccessFault | StallFault | NoFeedbackFault
_WorldFault = LocalizationJumpFault | FrozenPoseFault | PoseNoiseFault | DieFault | PoseDropoutFault | ExternalGoalFault


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

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> "SimConfig":
        """Validate a mapping (e.g. a scenario's ``sim:`` section), raising ``ScenarioError``."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise _scenario_error("sim config", exc) from exc


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


@dataclass(frozen=True)
class GoalDecision:
    """The world's answer to a goal request."""

    accepted: bool
    reason: str
    goal_index: int


@dataclass(frozen=True)
class GoalView:
    """A read-only picture of one goal, as the navigator would report it."""

    index: int
    target: Pose2D
    status: GoalStatus
    received_t: float
    ended_t: float | None
    reason: str
    distance_remaining: float
    """Localized distance to the target (what Nav2's feedback would say)."""
    feedback_enabled: bool


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


class _Goal:
    def __init__(self, index: int, target: Pose2D, received_t: float) -> None:
        self.index = index
        self.target = target
        self.received_t = received_t
        self.status = GoalStatus.ACTIVE
        self.ended_t: float | None = None
        self.reason = ""
        self.phase = _Phase.DRIVING
        self.stalled = False
        self.feedback_enabled = True


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
        self._active: _Goal | None = None
        self._events: list[GoalEvent] = []
        self._undrained = 0
        self._world_faults_fired: set[int] = set()
        self._foreign: set[int] = set()
        self._odometer_m = 0.0

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

        ``on_goal`` matches the n-th goal; ``at_s`` every goal received at or
        after that sim time. The longest matching delay wins.
        """
        g = self._goals.get(index)
        if g is None:
            raise UsageError(f"no goal with index {index}", goal_index=index, goals_received=len(self._goals))
        delays = [
            f.delay_s
            for f in self.config.faults
            if isinstance(f, AckDelayFault)
            and (f.on_goal == index or (f.at_s is not None and g.received_t + 1e-9 >= f.at_s))
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

    def camera_image(self, width: int = 64, height: int = 48) -> bytes:
        """A synthetic rgb8 frame that changes with the true pose.

        Background colour follows position, a bright vertical bar follows yaw,
        so two frames from different poses differ and frames are cheap to make.
        """
        if width <= 0 or height <= 0:
            raise UsageError("camera image needs a positive size", width=width, height=height)
        bg = bytes(
            (
                int(128 + 127 * math.sin(self._x)),
                int(128 + 127 * math.sin(self._y)),
                int(128 + 127 * math.cos(self._yaw)),
            )
        )
        row = bytearray(bg * width)
        col = int((self._yaw + math.pi) / (2.0 * math.pi) * width) % width
        for c in range(max(0, col - 1), min(width, col + 2)):
            row[3 * c : 3 * c + 3] = b"\xff\xff\xff"
        return bytes(row) * height

    # ----------------------------------------------------------------- commands

    def submit_goal(self, x: float, y: float, yaw: float) -> GoalDecision:
        """Receive a goal; a newly accepted goal preempts (aborts) the running one."""
        return self._submit(x, y, yaw, "")

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
        g = self._active
        if g is not None and g.phase is _Phase.ROTATING:
            est = self.localized_pose
            if math.hypot(g.target.x - est.x, g.target.y - est.y) > ARRIVAL_TOLERANCE_M:
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

    def _submit(self, x: float, y: float, yaw: float, note: str) -> GoalDecision:
        """``submit_goal``; ``note`` is the RECEIVED event's reason (who sent the goal, when not the client)."""
        if self._dead:
            return GoalDecision(accepted=False, reason="robot is dead", goal_index=0)
        index = len(self._goals) + 1
        goal = _Goal(index, Pose2D(x=x, y=y, yaw=normalize_angle(yaw)), self._t)
        self._goals[index] = goal
        self._emit(GoalEventType.RECEIVED, goal, note)
        reject = self._reject_reason(index)
        if reject:
            self._end(goal, GoalStatus.REJECTED, reject)
            return GoalDecision(accepted=False, reason=reject, goal_index=index)
        if self._active is not None:
            self._end(self._active, GoalStatus.ABORTED, f"preempted by goal {index}")
        self._active = goal
        self._emit(GoalEventType.ACCEPTED, goal)
        self._apply_goal_faults()
        return GoalDecision(accepted=True, reason="", goal_index=index)

    def _view(self, g: _Goal) -> GoalView:
        est = self.localized_pose
        return GoalView(
            index=g.index,
            target=g.target,
            status=g.status,
            received_t=g.received_t,
            ended_t=g.ended_t,
            reason=g.reason,
            distance_remaining=math.hypot(g.target.x - est.x, g.target.y - est.y),
            feedback_enabled=g.feedback_enabled,
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
            )
        )
        self._undrained += 1

    _END_EVENTS = {
        GoalStatus.SUCCEEDED: GoalEventType.SUCCEEDED,
        GoalStatus.ABORTED: GoalEventType.ABORTED,
        GoalStatus.CANCELED: GoalEventType.CANCELED,
        GoalStatus.REJECTED: GoalEventType.REJECTED,
    }

    def _end(self, g: _Goal, status: GoalStatus, reason: str) -> None:
        """The one place a goal leaves ACTIVE."""
        if g.status is not GoalStatus.ACTIVE:
            raise UsageError("goal already finished", goal_index=g.index, status=g.status.value)
        g.status, g.reason, g.ended_t = status, reason, self._t
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
        return (f.on_goal or 0) in self._goals

    def _reject_reason(self, index: int) -> str:
        for f in self.config.faults:
            if isinstance(f, RejectFault):
                if f.on_goal == index or (f.at_s is not None and self._t >= f.at_s):
                    return "goal rejected (reject fault)"
        return ""

    def _goal_fault_start(self, f: _GoalFault, g: _Goal) -> float | None:
        if f.on_goal is not None:
            return g.received_t + f.delay_s() if f.on_goal == g.index else None
        assert f.at_s is not None
        return max(f.at_s, g.received_t + f.delay_s())

    def _world_fault_start(self, f: _WorldFault) -> float | None:
        if isinstance(f, ExternalGoalFault):
            return f.at_s
        if f.at_s is not None:
            return f.at_s + f.delay_s()
        g = self._goals.get(f.on_goal or 0)
        return g.received_t + f.delay_s() if g is not None else None

    def _apply_goal_faults(self) -> None:
        g = self._active
        if g is None:
            return
        for f in self.config.faults:
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
        self._apply_goal_faults()
        g = self._active
        if g is None or g.stalled:
            self._v = self._w = 0.0
            return
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
        est = self.localized_pose
        dx, dy = g.target.x - est.x, g.target.y - est.y
        d = math.hypot(dx, dy)
        if d <= ARRIVAL_TOLERANCE_M:
            g.phase = _Phase.ROTATING
            self._v = self._w = 0.0
            return
        residual = self._turn_toward(math.atan2(dy, dx), h)
        self._v = 0.0
        if abs(residual) < _HEADING_GATE_RAD:
            dist = min(self.config.speed * h, d * math.cos(residual))
            self._x += dist * math.cos(self._yaw)
            self._y += dist * math.sin(self._yaw)
            self._v = dist / h
            self._odometer_m += dist
            self._battery = max(0.0, self._battery - self.config.battery_drain_per_m * dist)
        est = self.localized_pose
        if math.hypot(g.target.x - est.x, g.target.y - est.y) <= ARRIVAL_TOLERANCE_M:
            g.phase = _Phase.ROTATING

    def _rotate_to_goal_yaw(self, g: _Goal, h: float) -> None:
        self._v = 0.0
        residual = self._turn_toward(g.target.yaw, h)
        if abs(residual) <= _YAW_DONE_RAD:
            self._yaw = g.target.yaw if self._offset_yaw == 0.0 else normalize_angle(g.target.yaw - self._offset_yaw)
            self._v = self._w = 0.0
            self._end(g, GoalStatus.SUCCEEDED, "")
