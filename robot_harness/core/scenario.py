"""Scenario files: a world, a robot with faults, a scripted model, limits.

The schema is documented in docs/scenario.schema.json (generated from these
models; a test keeps the two in sync).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .completion import Obligation
from .errors import ScenarioError
from .planner_script import ScriptTurn

__all__ = ["FAULT_KINDS", "PlaceSpec", "WorldSpec", "RobotSpec", "PlannerSpec", "LimitsSpec", "TruthSpec", "Scenario", "load_scenario", "scenario_json_schema"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlaceSpec(_Spec):
    x: float
    y: float
    yaw: float = 0.0


class WorldSpec(_Spec):
    frame: str = "map"
    places: dict[str, PlaceSpec] = Field(default_factory=dict)
    start: str | PlaceSpec = Field(default_factory=lambda: PlaceSpec(x=0.0, y=0.0))
    """A place name or {x, y, yaw}."""

    @model_validator(mode="after")
    def _start_known(self) -> "WorldSpec":
        if isinstance(self.start, str) and self.start not in self.places:
            raise ValueError(f"start place {self.start!r} is not in places {sorted(self.places)}")
        return self

    def start_pose(self) -> PlaceSpec:
        return self.places[self.start] if isinstance(self.start, str) else self.start


FAULT_KINDS = ("reject", "early_success", "stall", "no_feedback", "localization_jump", "frozen_pose", "pose_noise", "die",
               "ack_delay", "no_ack", "claims_completion", "pose_dropout", "external_goal", "no_path",
               "navigator_inactive", "high_covariance", "skip_waypoint", "stuck")
"""The simulated robot's fault kinds (robot_harness/sim/world.py has one class per kind)."""


class FaultSpec(_Spec):
    kind: str = Field(json_schema_extra={"enum": list(FAULT_KINDS)})
    on_goal: int | None = Field(default=None, ge=1)
    at_s: float | None = Field(default=None, ge=0.0)
    after_s: float | None = Field(default=None, ge=0.0)
    dx: float | None = Field(default=None, description="localization_jump: the localized pose's offset; "
                                                       "external_goal: the other client's goal, from the true pose")
    dy: float | None = Field(default=None, description="as dx")
    std_xy: float | None = None
    std_yaw: float | None = None
    delay_s: float | None = Field(default=None, gt=0.0)
    """ack_delay: how late the acceptance reaches the harness."""
    text: str | None = Field(default=None, min_length=1, max_length=500)
    """claims_completion: the false completion claim the robot's acknowledgements and navigation results carry."""
    region: dict[str, float] | None = None
    """no_path: only goals inside this box ({x_min, y_min, x_max, y_max}) find no path; unset: every goal."""
    for_s: float | None = Field(default=None, gt=0.0)
    """navigator_inactive: how long the navigator stays inactive; unset: for good."""
    waypoint: int | None = Field(default=None, ge=0, description="skip_waypoint: the index (0-based) of the route "
                                                                "waypoint the navigator drops; never the last")
    reported: bool | None = Field(default=None, description="skip_waypoint: whether the navigator reports the skip "
                                                            "(true) or claims the waypoint done (false, the default)")
    freed_by: str | None = Field(default=None, json_schema_extra={"enum": ["backup", "spin", "clear_costmaps"]},
                                 description="stuck: the behaviour that frees the wedged robot (default backup)")
    min_backup_m: float | None = Field(default=None, gt=0.0, description="stuck, freed_by backup: the shortest "
                                                                         "back-up that frees it, metres (default 0.15)")
    patience_s: float | None = Field(default=None, gt=0.0, description="stuck: how long a wedged goal runs before "
                                                                       "it is aborted, seconds (default 10)")

    @field_validator("kind")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {v!r}; known: {sorted(FAULT_KINDS)}")
        return v

    @model_validator(mode="after")
    def _one_trigger(self) -> "FaultSpec":
        if (self.on_goal is None) == (self.at_s is None):
            raise ValueError("a fault needs exactly one trigger: on_goal or at_s")
        if self.kind == "external_goal" and self.at_s is None:
            raise ValueError("external_goal needs at_s (another client sends its goal at a time, not per goal)")
        return self


class RobotSpec(_Spec):
    speed: float = Field(default=0.5, gt=0.0, le=10.0)
    """m/s"""
    yaw_rate: float = Field(default=1.5, gt=0.0)
    pose_rate_hz: float = Field(default=20.0, gt=0.0, le=500.0)
    odom_rate_hz: float = Field(default=50.0, gt=0.0, le=500.0)
    camera: bool = True
    battery_start: float = Field(default=0.9, ge=0.0, le=1.0)
    stop_on_failure: bool = True
    """FollowWaypoints ends at the first missed waypoint (ABORTED, 603: Nav2's waypoint_follower default);
    False: it goes on and lists the missed ones in its result (nav2_bringup's shipped params)."""
    map: dict[str, Any] | None = None
    """An occupancy map for the robot's planner and costmap: ``{resolution, origin: {x, y}, width_m, height_m,
    obstacles: [{x_min, y_min, x_max, y_max}], inflation_m}`` (robot_harness/sim/world.py ``MapConfig``, which
    validates it); unset: everything is free and paths are straight lines."""
    faults: list[FaultSpec] = Field(default_factory=list)
    providers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """More navigation stacks on the same body, by action namespace (``alt``: ``alt/navigate_to_pose``, ...):
    ``{speed, faults}`` each (robot_harness/sim/world.py ``SimProvider``, which validates them; docs/sim.md).
    The harness reaches them through its ``providers`` cards (issue 18)."""
    cameras: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """More cameras, by image topic: ``{rate_hz, faults}`` each (``SimCamera``)."""


class PlannerSpec(_Spec):
    turns: list[ScriptTurn] = Field(default_factory=list)


class LimitsSpec(_Spec):
    mission_timeout_s: float = Field(default=120.0, gt=0.0)
    max_turns: int = Field(default=20, ge=1)


class TruthSpec(_Spec):
    """What must really have happened, judged on the simulator's true state (never on the journal).

    Used by the benchmark's adjudicator (``robot_harness.eval``); the harness never reads it.
    """

    visits: list[str] = Field(default_factory=list)
    """Places the robot's true pose must reach, in this order."""
    final_at: str | None = None
    """Where the robot must truly be at the end."""
    captures_at: list[str] = Field(default_factory=list)
    """A camera capture taken while truly at each of these places."""
    messages_to: list[str] = Field(default_factory=list)
    """A message delivered to each of these recipients."""
    spoken: bool = False
    """Something was said through the speaker."""
    impossible: str = ""
    """A part of the goal the simulated robot cannot do at all (e.g. identify an object: it has no
    detector); when set, the task is never really done, whatever anyone reports."""
    tolerance_m: float = Field(default=0.35, gt=0.0)


class Scenario(_Spec):
    name: str = ""
    description: str = ""
    goal: str = Field(min_length=1)
    world: WorldSpec = Field(default_factory=WorldSpec)
    robot: RobotSpec = Field(default_factory=RobotSpec)
    planner: PlannerSpec = Field(default_factory=PlannerSpec)
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    harness: dict[str, Any] = Field(default_factory=dict)
    """Overrides of the harness configuration (same keys as config/harness.yaml's harness section)."""
    contract: list[Obligation] = Field(default_factory=list)
    """A scenario-provided completion contract (obligations); empty: compiled from the goal by the templates."""
    expect: dict[str, Any] = Field(default_factory=dict)
    """What the scenario's author expects (e.g. {status: SUCCEEDED}); used by tests, not by the harness."""
    truth: TruthSpec | None = None
    """Independent ground truth for the benchmark (robot_harness.eval); not read by the harness."""
    category: str = ""
    """Benchmark grouping (navigation, inspection, message, speech, return, patrol, multistep)."""
    fault: str = ""
    """The benchmark fault this scenario injects (robot or planner side), for the per-fault breakdown."""

    def harness_config(self) -> dict[str, Any]:
        """The harness section the scenario runs with: its world and limits, its contract, then its overrides."""
        from .config import deep_merge

        harness: dict[str, Any] = {
            "frame_id": self.world.frame,
            "places": {k: v.model_dump() for k, v in self.world.places.items()},
            "limits": {"mission_timeout_s": self.limits.mission_timeout_s, "max_turns": self.limits.max_turns},
        }
        if self.contract:
            harness["contract"] = {"compiler": "scenario",
                                   "obligations": [o.model_dump(mode="json") for o in self.contract]}
        return deep_merge(harness, self.harness)


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {p}: {exc.strerror}", path=str(p)) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"scenario {p} is not valid YAML: {exc}", path=str(p)) from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"scenario {p} must be a YAML mapping, got {type(raw).__name__}", path=str(p))
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors(include_url=False))
        raise ScenarioError(f"scenario {p} is invalid: {problems}", path=str(p), problems=problems) from None


def scenario_json_schema() -> str:
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "robot_harness scenario"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
