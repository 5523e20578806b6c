"""Skills are ordinary tools; some carry managed-physical-action metadata.

A tool is a name, a description and a JSON schema generated from a pydantic
model. ``ManagedActionSpec`` adds how the action is dispatched, tracked and
verified; it never changes the tool's name, description or schema, so the
model sees the same tool either way.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .completion import FOLLOW_WAYPOINTS_SKILL, NAVIGATE_THROUGH_SKILL, ROUTE_SKILLS
from .config import NavigationConfig
from .errors import InvalidArgumentsError, ToolExecutionError, UnknownToolError, UsageError
from .nav_goals import BACKEND_NAMES, MAX_WAYPOINTS, NavGoal, NavGoalKind
from .ports import RobotIO
from .records import ArtifactRef, Pose2D, WorldSnapshot

__all__ = [
    "READ_ONLY",
    "ManagedActionSpec",
    "ToolEnv",
    "Skill",
    "SkillRegistry",
    "NavigateToArgs",
    "RouteArgs",
    "SpinArgs",
    "BackUpArgs",
    "WaitArgs",
    "ClearCostmapsArgs",
    "NAVIGATE_THROUGH",
    "FOLLOW_WAYPOINTS",
    "ROUTE_SKILLS",
    "BEHAVIOR_SKILLS",
    "RECOVERY_ONLY",
    "nav_goal_for",
    "ProposeDoneArgs",
    "PROPOSE_DONE",
    "default_skills",
    "resolve_target",
]


class ManagedActionSpec(BaseModel):
    """Metadata that turns a tool into a managed physical action."""

    model_config = ConfigDict(frozen=True)
    resource: str = "base"
    backend: str = "nav2/navigate_to_pose"
    navigation: NavigationConfig = NavigationConfig()
    goal_kind: NavGoalKind = NavGoalKind.NAVIGATE_TO_POSE
    """Which Nav2 interface the action's goal goes to (``nav_goals.NavGoal``)."""


class ToolEnv:
    """What an ordinary tool may touch: places, the last snapshot, robot I/O."""

    def __init__(self, *, places: Mapping[str, Pose2D], robot_io: RobotIO | None, snapshot: WorldSnapshot | None) -> None:
        self.places = places
        self.robot_io = robot_io
        self.snapshot = snapshot

    def require_io(self) -> RobotIO:
        if self.robot_io is None:
            raise ToolExecutionError("this harness has no robot I/O configured")
        return self.robot_io


class Skill:
    """One tool the model can call."""

    def __init__(
        self,
        *,
        name: str,
        description: str,
        args_model: type[BaseModel],
        handler: Callable[[ToolEnv, Any], dict[str, Any]] | None = None,
        managed: ManagedActionSpec | None = None,
        resources: tuple[str, ...] = (),
        tags: tuple[str, ...] = (),
    ) -> None:
        if (handler is None) == (managed is None):
            raise UsageError(f"skill {name!r} needs exactly one of handler or managed")
        self.name = name
        self.description = description
        self.args_model = args_model
        self.handler = handler
        self.managed = managed
        self.resources = tuple(dict.fromkeys([*((managed.resource,) if managed is not None else ()), *resources]))
        """Exclusive leases taken before the skill runs (a managed action's own resource first)."""
        self.tags = frozenset(tags) | ({"physical"} if managed is not None else frozenset())
        """Policy tags (``physical``, ``requires_approval``...) that config can attach rules to."""

    @property
    def physical(self) -> bool:
        return self.managed is not None

    def parameters_schema(self) -> dict[str, Any]:
        return self.args_model.model_json_schema()

    def tool_spec(self) -> dict[str, Any]:
        """The OpenAI function-calling tool definition (identical with or without metadata)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters_schema()},
        }

    def validate(self, arguments: Any) -> BaseModel:
        if not isinstance(arguments, dict):
            raise InvalidArgumentsError(
                f"{self.name}: arguments must be a JSON object, got {type(arguments).__name__}", tool=self.name
            )
        try:
            return self.args_model.model_validate(arguments)
        except ValidationError as exc:
            raise InvalidArgumentsError(
                f"{self.name}: invalid arguments",
                tool=self.name,
                problems=[{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors(include_url=False)],
            ) from None


class SkillRegistry:
    def __init__(self, skills: Iterable[Skill]) -> None:
        self._skills: dict[str, Skill] = {}
        for s in skills:
            if s.name in self._skills:
                raise UsageError(f"duplicate skill {s.name!r}")
            self._skills[s.name] = s

    def get(self, name: str) -> Skill:
        try:
            return self._skills[name]
        except KeyError:
            raise UnknownToolError(f"unknown tool {name!r}", tool=name, available=sorted(self._skills)) from None

    def names(self) -> list[str]:
        return list(self._skills)

    def tool_specs(self) -> list[dict[str, Any]]:
        """What the planner is offered: every skill but the recovery policy's own (``RECOVERY_ONLY``)."""
        return [s.tool_spec() for s in self._skills.values() if RECOVERY_ONLY not in s.tags]

    def __iter__(self):
        return iter(self._skills.values())


# --- the navigation skill set ------------------------------------------------


class _Args(BaseModel):
    """Tool arguments: no unknown fields, and no NaN or infinity in any number."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class NavigateToArgs(_Args):
    """Either a named place, or x/y (and optional yaw) in the map frame."""

    place: str | None = Field(default=None, description="A named place (see lookup_place).")
    x: float | None = Field(default=None, description="Target x in metres, map frame.")
    y: float | None = Field(default=None, description="Target y in metres, map frame.")
    yaw: float | None = Field(default=None, description="Target heading in radians, map frame (default 0).")

    @field_validator("yaw")
    @classmethod
    def _normalised(cls, yaw: float | None) -> float | None:
        """Any finite heading, as its equivalent in [-pi, pi]."""
        return None if yaw is None else math.remainder(yaw, math.tau)

    @model_validator(mode="after")
    def _one_target(self) -> "NavigateToArgs":
        has_xy = self.x is not None or self.y is not None
        if self.place is not None and (has_xy or self.yaw is not None):
            raise ValueError("give either place or x/y/yaw, not both")
        if self.place is None and (self.x is None or self.y is None):
            raise ValueError("give place, or both x and y")
        return self


class RouteArgs(_Args):
    """The named places of a route, in the order the robot must visit them."""

    places: list[str] = Field(min_length=1, max_length=MAX_WAYPOINTS,
                              description="Named places (see lookup_place), in visiting order; the last is where "
                                          "the route ends.")


class SpinArgs(_Args):
    angle: float = Field(description="Signed angle to turn in place, radians (positive: counter-clockwise).",
                         ge=-2.0 * math.pi, le=2.0 * math.pi)

    @field_validator("angle")
    @classmethod
    def _non_zero(cls, angle: float) -> float:
        if angle == 0.0:
            raise ValueError("a spin of 0 rad does nothing")
        return angle


class BackUpArgs(_Args):
    distance: float = Field(default=0.3, gt=0.0, le=2.0, description="How far to drive straight back, metres.")
    speed: float = Field(default=0.1, gt=0.0, le=0.5, description="Metres per second.")


class WaitArgs(_Args):
    seconds: float = Field(default=2.0, gt=0.0, le=60.0, description="How long to stand still.")


class ClearCostmapsArgs(_Args):
    costmaps: list[Literal["global", "local"]] = Field(default_factory=lambda: ["global", "local"], min_length=1,
                                                       max_length=2, description="Which costmaps to clear.")


class LookupPlaceArgs(_Args):
    place: str = Field(description="Name of the place.")


class GetPoseArgs(_Args):
    pass


class CaptureImageArgs(_Args):
    label: str = Field(default="", description="Optional label stored with the image.")


class SpeakArgs(_Args):
    text: str = Field(min_length=1, max_length=2000, description="What to say aloud.")


class ArtifactArg(_Args):
    uri: str
    sha256: str


class SendMessageArgs(_Args):
    to: str = Field(default="operator", description="Recipient.")
    text: str = Field(min_length=1, max_length=4000)
    artifacts: list[ArtifactArg] = Field(default_factory=list, description="Artifact references (uri + sha256) to attach.")


READ_ONLY = "read_only"
"""Tag of a skill with no side effect at all (it reads state): the only kind an operator surface may
mark read-only. Anything that moves, sends, speaks or captures is not."""
PROPOSE_DONE = "propose_done"


PROPOSE_PLAN = "propose_plan"


class PlanStepArgs(_Args):
    skill: str = Field(min_length=1, max_length=64, description="The tool the step calls (not propose_plan; propose_done only as the last step).")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Its arguments, as for the tool itself.")
    effect: str = Field(default="", max_length=500, description="What the step achieves, in words.")
    serves: str = Field(default="", max_length=32, description="The id of the contract obligation it serves (o1, ...).")


class ProposePlanArgs(_Args):
    steps: list[PlanStepArgs] = Field(min_length=1, max_length=32, description="The steps, in order.")


def _propose_plan(env: ToolEnv, args: ProposePlanArgs) -> dict[str, Any]:
    raise UsageError("propose_plan is checked by the plan gate, not run as a capability")


class ProposeDoneArgs(_Args):
    summary: str = Field(min_length=1, max_length=2000, description="What you believe was achieved, for the operator.")


def _propose_done(env: ToolEnv, args: ProposeDoneArgs) -> dict[str, Any]:
    # The engine intercepts propose_done before any handler runs; reaching
    # this means a registry was used without the engine, which is a bug.
    raise ToolExecutionError("propose_done is handled by the mission engine, not by a handler")


ASK_OPERATOR = "ask_operator"


class AskOperatorArgs(_Args):
    question: str = Field(min_length=1, max_length=1000, description="The question, for the mission's owner.")
    choices: list[str] = Field(default_factory=list, max_length=10,
                               description="Allowed answers; empty for a free-text answer.")


def _ask_operator(env: ToolEnv, args: AskOperatorArgs) -> dict[str, Any]:
    raise ToolExecutionError("ask_operator is handled by the mission engine (it waits on the operator)")


NAVIGATE_THROUGH = NAVIGATE_THROUGH_SKILL
FOLLOW_WAYPOINTS = FOLLOW_WAYPOINTS_SKILL
BEHAVIOR_SKILLS = {"clear_costmaps": NavGoalKind.CLEAR_COSTMAPS, "back_up": NavGoalKind.BACK_UP,
                   "spin": NavGoalKind.SPIN, "wait": NavGoalKind.WAIT}
"""Nav2's behaviours as skills (the recovery policy's ``nav2_behavior`` rung runs them)."""
RECOVERY_ONLY = "recovery_only"
"""Tag of a skill only the recovery policy may call: not offered to the planner, refused from it."""


def route_poses(args: RouteArgs, places: Mapping[str, Pose2D], *, tool: str) -> tuple[Pose2D, ...]:
    """The poses of a route's places, in order (an unknown place is the caller's mistake, named)."""
    unknown = [p for p in args.places if p not in places]
    if unknown:
        raise InvalidArgumentsError(f"unknown place {unknown[0]!r}", tool=tool, unknown=unknown,
                                    known_places=sorted(places))
    return tuple(places[p] for p in args.places)


def nav_goal_for(skill: Skill, args: BaseModel, places: Mapping[str, Pose2D]) -> NavGoal:
    """The Nav2 goal a managed skill's call sends (raises InvalidArgumentsError for an unknown place)."""
    assert skill.managed is not None
    kind = skill.managed.goal_kind
    if kind is NavGoalKind.NAVIGATE_TO_POSE:
        assert isinstance(args, NavigateToArgs)
        return NavGoal(poses=(resolve_target(args, places),))
    if isinstance(args, RouteArgs):
        return NavGoal(kind=kind, poses=route_poses(args, places, tool=skill.name))
    if isinstance(args, SpinArgs):
        return NavGoal(kind=kind, spin_dist_rad=args.angle)
    if isinstance(args, BackUpArgs):
        return NavGoal(kind=kind, backup_dist_m=args.distance, backup_speed_mps=args.speed)
    if isinstance(args, WaitArgs):
        return NavGoal(kind=kind, wait_s=args.seconds)
    if isinstance(args, ClearCostmapsArgs):
        return NavGoal(kind=kind, costmaps=tuple(dict.fromkeys(args.costmaps)))
    raise UsageError(f"skill {skill.name!r}: no Nav2 goal for arguments of type {type(args).__name__}")


def resolve_target(args: NavigateToArgs, places: Mapping[str, Pose2D]) -> Pose2D:
    if args.place is not None:
        try:
            return places[args.place]
        except KeyError:
            raise InvalidArgumentsError(
                f"unknown place {args.place!r}", tool="navigate_to", known_places=sorted(places)
            ) from None
    assert args.x is not None and args.y is not None
    return Pose2D(x=args.x, y=args.y, yaw=args.yaw or 0.0)


def _lookup_place(env: ToolEnv, args: LookupPlaceArgs) -> dict[str, Any]:
    try:
        p = env.places[args.place]
    except KeyError:
        raise InvalidArgumentsError(f"unknown place {args.place!r}", tool="lookup_place", known_places=sorted(env.places)) from None
    return {"place": args.place, "frame": "map", "x": p.x, "y": p.y, "yaw": p.yaw}


def _get_pose(env: ToolEnv, args: GetPoseArgs) -> dict[str, Any]:
    snap = env.snapshot
    if snap is None:
        raise ToolExecutionError("no snapshot available")
    meta = snap.pose_meta
    out: dict[str, Any] = {"availability": meta.availability.value, "age_s": meta.age_s, "snapshot_id": snap.snapshot_id}
    if snap.pose is not None:
        out.update(x=round(snap.pose.x, 3), y=round(snap.pose.y, 3), yaw=round(snap.pose.yaw, 3))
    return out


def _capture_image(env: ToolEnv, args: CaptureImageArgs) -> dict[str, Any]:
    ref = env.require_io().capture_image(label=args.label)
    return {"artifact": ref.model_dump(exclude={"kind"})}


def _speak(env: ToolEnv, args: SpeakArgs) -> dict[str, Any]:
    return {"receipt": env.require_io().speak(text=args.text)}


def _verify_artifact(a: ArtifactArg) -> ArtifactRef:
    """Check an attached artifact's hash before it is sent anywhere."""
    parsed = urlparse(a.uri)
    if parsed.scheme != "file":
        raise InvalidArgumentsError(f"artifact {a.uri!r}: only file:// artifacts can be attached", tool="send_message")
    path = Path(parsed.path)
    if not path.is_file():
        raise InvalidArgumentsError(f"artifact {a.uri!r} does not exist", tool="send_message")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != a.sha256:
        raise InvalidArgumentsError(
            f"artifact {a.uri!r}: sha256 mismatch", tool="send_message", expected=a.sha256, actual=digest
        )
    return ArtifactRef(uri=a.uri, sha256=digest, size_bytes=len(data))


def _send_message(env: ToolEnv, args: SendMessageArgs) -> dict[str, Any]:
    refs = [_verify_artifact(a) for a in args.artifacts]
    return {"receipt": env.require_io().send_message(to=args.to, text=args.text, artifacts=refs)}


_BEHAVIOR_TEXT = {
    NavGoalKind.CLEAR_COSTMAPS: "Clear Nav2's global and local costmaps (phantom obstacles); the robot does not move.",
    NavGoalKind.BACK_UP: "Drive straight back a short distance (Nav2's BackUp behaviour).",
    NavGoalKind.SPIN: "Turn in place by an angle (Nav2's Spin behaviour).",
    NavGoalKind.WAIT: "Stand still for a while (Nav2's Wait behaviour).",
}
_BEHAVIOR_ARGS: dict[NavGoalKind, type[BaseModel]] = {
    NavGoalKind.CLEAR_COSTMAPS: ClearCostmapsArgs, NavGoalKind.BACK_UP: BackUpArgs, NavGoalKind.SPIN: SpinArgs,
    NavGoalKind.WAIT: WaitArgs,
}


def default_skills(navigation: NavigationConfig | None = None, *, ask_operator: bool = False) -> SkillRegistry:
    """The skills the simulated robot (and a Nav2 robot) offers the model (``ask_operator`` when enabled)."""
    nav = navigation or NavigationConfig()
    extra = [Skill(name=ASK_OPERATOR, description=(
        "Ask the mission's owner a question and wait for the answer (free text, or one of the choices you "
        "offer). Use it when the goal is ambiguous or a decision is not yours to make."),
        args_model=AskOperatorArgs, handler=_ask_operator)] if ask_operator else []
    return SkillRegistry([
        Skill(
            name="navigate_to",
            description=(
                "Drive the robot to a named place or to x/y/yaw in the map frame. Returns as soon as the "
                "navigation backend accepts or rejects the goal; the verified outcome arrives in a later turn "
                "as a runtime event."
            ),
            args_model=NavigateToArgs,
            managed=ManagedActionSpec(backend=nav.backend, navigation=nav),
        ),
        Skill(
            name=NAVIGATE_THROUGH,
            description=(
                "Drive through the named places in order without stopping at them, ending at the last (Nav2's "
                "NavigateThroughPoses). Returns when the backend accepts or rejects the route; the verified "
                "outcome, with each waypoint passed or missed, arrives in a later turn as a runtime event."
            ),
            args_model=RouteArgs,
            managed=ManagedActionSpec(backend=BACKEND_NAMES[NavGoalKind.NAVIGATE_THROUGH_POSES], navigation=nav,
                                      goal_kind=NavGoalKind.NAVIGATE_THROUGH_POSES),
        ),
        Skill(
            name=FOLLOW_WAYPOINTS,
            description=(
                "Stop at each named place in order, ending at the last (Nav2's FollowWaypoints). Returns when "
                "the backend accepts or rejects the route; the verified outcome, with each waypoint reached or "
                "missed, arrives in a later turn as a runtime event."
            ),
            args_model=RouteArgs,
            managed=ManagedActionSpec(backend=BACKEND_NAMES[NavGoalKind.FOLLOW_WAYPOINTS], navigation=nav,
                                      goal_kind=NavGoalKind.FOLLOW_WAYPOINTS),
        ),
        *(Skill(name=name, description=_BEHAVIOR_TEXT[kind], args_model=_BEHAVIOR_ARGS[kind],
                managed=ManagedActionSpec(backend=BACKEND_NAMES[kind], navigation=nav, goal_kind=kind),
                tags=(RECOVERY_ONLY,))
          for name, kind in BEHAVIOR_SKILLS.items()),
        Skill(name="lookup_place", description="Resolve a place name to its pose in the map frame, without moving.",
              args_model=LookupPlaceArgs, handler=_lookup_place, tags=(READ_ONLY,)),
        Skill(name="get_pose", description="The robot's current localized pose with its availability and age.",
              args_model=GetPoseArgs, handler=_get_pose, tags=(READ_ONLY,)),
        Skill(name="capture_image", description="Capture an image from the robot's camera; returns an artifact reference with its sha256.",
              args_model=CaptureImageArgs, handler=_capture_image, resources=("camera",)),
        Skill(name="speak", description="Say a sentence aloud through the robot's speaker.",
              args_model=SpeakArgs, handler=_speak, resources=("speaker",)),
        Skill(name="send_message", description="Send a text message (with optional artifact references) to a recipient; returns a delivery receipt.",
              args_model=SendMessageArgs, handler=_send_message, resources=("messenger",)),
        Skill(name=PROPOSE_PLAN, description=(
            "Propose the whole plan at once: every step (tool, arguments, intended effect, the obligation it "
            "serves). A zero-token gate checks it against the goal's contract before anything moves (every "
            "obligation covered, in an order its dependencies allow, each step where it must happen) and answers "
            "with typed diagnostics if not. An accepted plan is run by the harness one step per turn through the "
            "same checks; if a step fails you are told, and asked for the rest only. It may end with a "
            "propose_done step (arguments: summary): done is then proposed when the steps before it have run, "
            "and the verifier judges it on evidence as always."),
              args_model=ProposePlanArgs, handler=_propose_plan),
        Skill(name=PROPOSE_DONE, description=(
            "Propose that the user's goal is achieved. This asks the harness's independent verifier to check "
            "the goal's completion contract against execution receipts and fresh observations; it does not "
            "end the mission by itself. If obligations are missing, they come back in the next turn."),
              args_model=ProposeDoneArgs, handler=_propose_done),
        *extra,
    ])


def tool_specs_json(registry: SkillRegistry) -> str:
    return json.dumps(registry.tool_specs(), sort_keys=True)
