"""Harness configuration (the ``harness`` section of config/*.yaml and scenarios)."""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .records import Pose2D

__all__ = ["Preconditions", "OutcomeTolerance", "NavigationConfig", "LimitsConfig", "ContractConfig", "VerificationConfig", "RecoveryConfig", "InteractionsConfig", "APPROVAL_POLICIES", "McpConfig", "HarnessConfig",
           "load_harness_config", "dotted_overrides", "deep_merge", "place_pose", "place_poses", "place_aliases",
           "Workspace", "navigation_workspace",
           "CAPABILITIES", "ProviderCard", "RoutingWeights", "RoutingConfig", "MemoryConfig"]


APPROVAL_POLICIES = ("owner", "operator")
"""Who may approve (core/interactions.ApprovalPolicy): the mission's owner, or only an operator credential."""
_APPROVER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_ROS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")
_REDACTED = "***"
"""What the journal's redactor writes for a value under a secret-looking key (core/journal.REDACTED)."""


class _Cfg(BaseModel):
    # Every number finite: a NaN timeout or tolerance compares false with everything and would switch a check off.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Preconditions(_Cfg):
    """What must still hold, on a fresh snapshot, right before a managed dispatch."""

    max_observation_age_s: float = Field(default=0.5, gt=0.0)
    """The fresh pose must be AVAILABLE and at most this old."""
    max_pose_drift_m: float = Field(default=0.3, ge=0.0)
    """Fresh pose vs. the pose in the snapshot the model decided on."""
    max_yaw_drift_rad: float = Field(default=0.6, ge=0.0)
    localization_continuous: bool = True
    """No localization jump may have been seen between the decision and the fresh snapshot."""
    controller_idle: bool = True
    """The navigation controller must report no active goal."""
    no_conflicting_action: bool = True
    """No other managed action of this harness may be in flight."""
    target_unchanged: bool = True
    """The resolved target must be the same as when the model decided."""
    battery_min: float | None = Field(default=0.1, ge=0.0, le=1.0)
    """Minimum state of charge (0..1); None disables the check."""
    max_goal_distance_m: float | None = Field(default=200.0, gt=0.0)
    """A navigation target farther than this from the fresh pose is refused (``precondition_changed``);
    None disables the check."""
    # -- readiness and feasibility, asked of the robot right before each navigation (``ports.FeasibilityPort``)
    lifecycle_active: tuple[str, ...] = ("bt_navigator", "amcl")
    """Lifecycle nodes (relative to the robot's namespace) that must report ``active``: the navigator and the
    localizer (a robot localizing with another node names it here; empty: not checked)."""
    max_pose_std_xy_m: float | None = Field(default=0.5, gt=0.0, allow_inf_nan=False)
    """The localizer's x and y standard deviations (from the pose covariance) must be at most this; None: not checked."""
    max_pose_std_yaw_rad: float | None = Field(default=0.5, gt=0.0, allow_inf_nan=False)
    require_covariance: bool = False
    """A pose source without a covariance (a TF lookup) fails the covariance check instead of skipping it."""
    path_feasible: bool = True
    """A ``ComputePathToPose`` dry run from the fresh pose must return a path (skipped, and said so, when the
    robot has no planner server)."""
    require_planner: bool = False
    """No planner server fails ``path_feasible`` instead of skipping it."""
    max_path_length_m: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    """The planned path must be at most this long; and, always, short enough to walk in the mission's time
    left at the pace the action timeout allows per metre (``timeout_per_m_s * length <= time left``)."""
    goal_cell_free: bool = True
    """The goal's cell in the global costmap (Nav2's ``GetCosts``) must cost at most ``max_goal_cost`` (skipped,
    and said so, when the robot serves no costmap query)."""
    max_goal_cost: int = Field(default=252, ge=0, le=255)
    """Nav2's costs: 253 inscribed, 254 lethal, 255 no information; the default refuses all three."""
    require_costmap: bool = False
    """No costmap query fails ``goal_cell_free`` instead of skipping it."""
    probe_timeout_s: float = Field(default=2.0, gt=0.0, le=60.0, allow_inf_nan=False)
    """How long each readiness or feasibility question may take before it counts as unanswered (failed)."""


class OutcomeTolerance(_Cfg):
    """How the navigation outcome check decides SUCCEEDED."""

    xy_m: float = Field(default=0.25, gt=0.0)
    yaw_rad: float = Field(default=0.35, gt=0.0)
    max_pose_age_s: float = Field(default=0.5, gt=0.0)
    """The post-terminal pose must be at most this old."""
    require_no_pose_jump: bool = True
    """A localization discontinuity during the action makes the outcome UNKNOWN."""
    settle_s: float = Field(default=1.0, ge=0.0)
    """How long to wait after the terminal report for a pose observed after it."""


class Workspace(_Cfg):
    """The part of the map a navigation target may lie in (metres, map frame)."""

    min_x: float = Field(allow_inf_nan=False)
    min_y: float = Field(allow_inf_nan=False)
    max_x: float = Field(allow_inf_nan=False)
    max_y: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> "Workspace":
        if not (self.min_x < self.max_x and self.min_y < self.max_y):
            raise ValueError("a workspace needs min_x < max_x and min_y < max_y")
        return self

    def contains(self, x: float, y: float) -> bool:
        return self.min_x <= x <= self.max_x and self.min_y <= y <= self.max_y


class NavigationConfig(_Cfg):
    backend: str = "nav2/navigate_to_pose"
    accept_timeout_s: float = Field(default=5.0, gt=0.0)
    timeout_s: float = Field(default=20.0, gt=0.0)
    """Fixed part of the whole-action timeout."""
    timeout_per_m_s: float = Field(default=4.0, ge=0.0)
    """Added per metre of straight-line distance (0.25 m/s worst-case average)."""
    cancel_timeout_s: float = Field(default=3.0, gt=0.0)
    lookup_timeout_s: float = Field(default=3.0, gt=0.0)
    """How long to wait for a goal to show up in the backend's status when its acceptance was lost
    (or while reconciling a lease): the goal is looked up by id, never sent again."""
    progress_journal_period_s: float = Field(default=0.5, ge=0.0)
    """ROBOT_ACTION_PROGRESS events are journaled at most this often."""
    preconditions: Preconditions = Preconditions()
    ready_wait_s: float = Field(default=3.0, ge=0.0, le=60.0, allow_inf_nan=False)
    """How long admission waits for the fields the preconditions need (pose, navigator status, battery)
    before refusing the mission with the missing one: a robot that has just come up reports its battery
    and its navigator's state a moment after its pose. 0 refuses at once."""
    outcome: OutcomeTolerance = OutcomeTolerance()
    workspace: Workspace | None = None
    """Where targets may lie; None: the known places' bounding box grown by ``workspace_margin_m``."""
    workspace_margin_m: float = Field(default=10.0, ge=0.0, allow_inf_nan=False)
    route_sample_period_s: float = Field(default=0.1, ge=0.02, le=2.0, allow_inf_nan=False)
    """While a route runs (navigate_through / follow_waypoints), how often the supervisor samples the
    localized pose for the next waypoint: the first fresh pose within ``verification.xy_tolerance_m`` of it
    is journaled as that waypoint's evidence (a robot passing at v m/s needs v * period well under twice
    the tolerance to be seen)."""


class LimitsConfig(_Cfg):
    mission_timeout_s: float = Field(default=300.0, gt=0.0)
    max_turns: int = Field(default=20, ge=1)
    max_silent_turns: int = Field(default=1, ge=0)
    """Consecutive model turns with no tool calls, no done proposal and no text (the planner has
    nothing more to propose) before the mission ends."""
    max_text_only_turns: int = Field(default=2, ge=0)
    """Model turns answered in prose only (no tool call, no done proposal); each gets one recorded
    error and a new turn, until this budget is spent."""
    max_tool_calls_per_turn: int = Field(default=8, ge=1)
    max_done_rejections: int = Field(default=3, ge=0)
    """Done proposals the verifier may turn down before the mission ends on the last verdict."""


class ContractConfig(_Cfg):
    """How the mission's completion contract is compiled (at admission, before any planning)."""

    compiler: str = "grammar"
    """grammar | scenario | llm. ``grammar``: the goal compiler (core/goals; ``template`` is its old name);
    ``scenario`` uses ``obligations`` verbatim; ``llm``: a model's contract, post-validated against the goal
    compiler's and the coverage review (an under-bound one is repaired or refused, never used)."""
    lexicon_file: str = ""
    """The goal compiler's lexicon; empty: the packaged config/goal_lexicon.yaml."""

    @model_validator(mode="before")
    @classmethod
    def _old_records(cls, data: Any) -> Any:
        """Journals written before the goal compiler carry ``templates_file`` (the removed template
        compiler's file): still readable, the key is dropped."""
        if isinstance(data, dict) and "templates_file" in data:
            data = {k: v for k, v in data.items() if k != "templates_file"}
        return data
    mission_templates_file: str = ""
    """Named mission templates a program may send instead of a goal (Mission ``template``; core/mission_spec.py);
    empty: the packaged config/mission_templates.yaml."""
    obligations: list[dict[str, Any]] = Field(default_factory=list)
    """A scenario-provided contract (obligation dicts); non-empty implies the scenario compiler."""
    llm: dict[str, Any] = Field(default_factory=dict)
    """For ``compiler: llm``: the LLM client settings (robot_harness.llm.LLMConfig keys: base_url, model,
    api_key_env, ...). The compiler runs in its own clean context: the goal and the places, nothing else."""
    require_coverage: bool = True
    """Refuse to plan (WAITING_USER) when the coverage review finds parts of the goal no obligation covers."""


class RecoveryConfig(_Cfg):
    """How often each recovery rung may be used in one mission (see core/recovery.py)."""

    re_perceive: int = Field(default=2, ge=0)
    adjust_view: int = Field(default=1, ge=0)
    local_replan: int = Field(default=3, ge=0)
    """Replans are bounded; 3 by default."""
    switch_provider_or_skill: int = Field(default=1, ge=0)
    nav2_behavior: int = Field(default=3, ge=0)
    """Nav2 behaviours the recovery policy may run in one mission (the ``nav2_behavior`` rung)."""
    nav2_behaviors: dict[str, list[Literal["clear_costmaps", "back_up", "spin", "wait"]]] = Field(
        default_factory=lambda: {"stuck": ["clear_costmaps", "back_up", "spin"],
                                 "start_blocked": ["back_up", "clear_costmaps", "spin"]})
    """Per kind of Nav2 error (``nav2_errors.Nav2ErrorKind`` value), the behaviours to run, in order, one per
    failure, before the planner retries (Nav2's own recovery tree: clear the costmaps, back up, spin);
    a kind not listed never opens the rung."""
    behavior_args: dict[str, dict[str, Any]] = Field(default_factory=lambda: {
        "back_up": {"distance": 0.3, "speed": 0.1}, "spin": {"angle": 1.57}, "wait": {"seconds": 2.0},
        "clear_costmaps": {"costmaps": ["global", "local"]}})
    """The arguments each behaviour is run with (the skills' own argument models validate them)."""
    alternatives: dict[str, list[str]] = Field(default_factory=dict)
    """Authorized alternatives per skill (empty: the switch rung is never open)."""
    advisor: Literal["none", "llm"] = "none"
    """llm: a model advises among the authorized rungs (it sees the C4 recovery view; other answers are ignored)."""
    llm: dict[str, Any] = Field(default_factory=dict)
    """For ``advisor: llm``: robot_harness.llm.LLMConfig keys (base_url, model, api_key_env, ...)."""
    repair: Literal["suffix", "whole"] = "suffix"
    """suffix: a replan keeps the verified prefix; whole: the planner re-plans the whole mission
    (a baseline for bench/repair.py, not for robots)."""


class VerificationConfig(_Cfg):
    """The verifier's deterministic predicates."""

    xy_tolerance_m: float = Field(default=0.5, gt=0.0)
    yaw_tolerance_rad: float | None = Field(default=0.5, gt=0.0)
    final_pose_max_age_s: float = Field(default=2.0, gt=0.0)


class InteractionsConfig(_Cfg):
    """Operator approvals and questions (core/interactions.py)."""

    approval_tags: list[str] = Field(default_factory=lambda: ["requires_approval"])
    """A call of a skill carrying any of these tags waits for an approval of that exact call (by the
    mission's owner, unless ``approval_policy`` names the tag ``operator``)."""
    approval_policy: dict[str, str] = Field(default_factory=lambda: {"requires_approval": "owner",
                                                                     "requires_operator": "operator"})
    """Per tag, who may approve: ``owner`` (the mission's owner token; for a mission sent without one, the
    operator token) or ``operator`` (only the operator token or an ``approvers`` token, and never the
    credential the mission's sender presented). A tag named here needs approval even if it is not in
    ``approval_tags``; a skill with tags of both policies gets ``operator``."""
    approvers: dict[str, str] = Field(default_factory=dict)
    """Further credentials that may approve under the ``operator`` policy: name -> the environment
    variable (of the supervisor) holding that approver's token, e.g. ``{alice: ROBOT_HARNESS_APPROVER_ALICE}``.
    The journal records an answer given with one as ``approver:<name>``."""
    skill_tags: dict[str, list[str]] = Field(default_factory=dict)
    """Policy tags added per skill, e.g. ``{navigate_to: [requires_approval]}``."""
    timeout_s: float = Field(default=600.0, gt=0)
    """An unanswered interaction expires after this long: an approval counts as not given."""
    ask_operator: bool = False
    """Offer the model an ``ask_operator`` tool (a question, free text or choices)."""
    operator_token_env: str = "ROBOT_HARNESS_OPERATOR_TOKEN"
    """The environment variable (of the supervisor) holding the operator token: the credential of the
    ``operator`` policy, and the owner credential of a mission sent without an owner token."""

    @model_validator(mode="after")
    def _known_policies(self) -> InteractionsConfig:
        for tag, policy in self.approval_policy.items():
            if policy not in APPROVAL_POLICIES:
                raise ValueError(
                    f"interactions.approval_policy.{tag}: unknown policy {policy!r}; use 'owner' (the mission's "
                    "owner approves) or 'operator' (only the operator token or an interactions.approvers token, "
                    "never the mission's sender)")
        for name, env in self.approvers.items():
            if not _APPROVER_NAME.fullmatch(name):
                raise ValueError(f"interactions.approvers: approver name {name!r} must be letters, digits, '_', "
                                 "'-' or '.' (it is journaled as approver:<name>)")
            if env != _REDACTED and not _ENV_NAME.fullmatch(env or ""):  # a journaled config may be redacted
                raise ValueError(f"interactions.approvers.{name}: {env!r} is not an environment variable name "
                                 "(the approver's token is read from that variable, never from the file)")
        return self

    def approval_policy_for(self, tags: Iterable[str]) -> str | None:
        """Who may approve a call of a skill with ``tags`` (``operator`` wins over ``owner``), or None when
        its calls need no approval."""
        tags = set(tags)
        named = {self.approval_policy[t] for t in tags if t in self.approval_policy}
        if "operator" in named:
            return "operator"
        if named or tags & set(self.approval_tags):
            return "owner"
        return None


class McpConfig(_Cfg):
    """The supervisor's MCP server (an operator surface; off unless enabled)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    """Loopback by default; any other address needs a bearer token."""
    port: int = Field(default=8770, ge=0, le=65535)
    """0 picks a free port (tests); the supervisor logs the URL."""
    token_env: str = "ROBOT_HARNESS_MCP_TOKEN"
    """Environment variable holding the bearer token; when set, every request needs it."""
    max_calls: int = Field(default=200, ge=1)
    """Calls per session mission (its turn budget)."""
    session_timeout_s: float = Field(default=3600.0, gt=0)
    """A session mission's deadline."""
    idle_close_s: float = Field(default=300.0, gt=0)
    """A session with no call in flight for this long ends (freeing the robot for missions)."""
    decision_timeout_s: float = Field(default=30.0, gt=0)
    """How long a call waits for its immediate answer (approvals add interactions.timeout_s)."""


class EvalAblations(_Cfg):
    """Benchmark-only switches that take one safeguard out (``robot-harness eval``'s ablations).

    Never turn one off on a robot: each exists to measure what its safeguard is worth.
    """

    evidence_binding: bool = True
    """Off: an action's outcome is the backend's word, about whichever goal it was (no goal-id
    correlation, no fresh-pose check of the outcome)."""
    plan_gate: bool = True
    """Off: a well-formed plan is run whatever the plan gate finds (its diagnostics are still reported);
    bench/plan_gate.py measures the motion that costs."""


CAPABILITIES = ("navigation", "camera", "speech", "messaging")
"""The capability classes a provider may implement (issue 18; core/routing.py)."""


class ProviderCard(_Cfg):
    """One provider of a capability class (a navigation stack, a camera, a speaker, a message gateway) and
    what routing knows of it before any outcome is remembered (core/routing.py scores these)."""

    capability: Literal["navigation", "camera", "speech", "messaging"]
    namespace: str = Field(default="", max_length=200)
    """Where it is served: for navigation the prefix of its Nav2 action names ("" the robot's own Nav2, e.g.
    ``alt``: ``alt/navigate_to_pose``); for a camera its image topic ("" the configured camera)."""
    p_success: float = Field(default=0.9, ge=0.0, le=1.0)
    """Expected success probability (the prior; remembered verified outcomes refine it)."""
    risk: float = Field(default=0.0, ge=0.0, le=1.0)
    latency_s: float = Field(default=0.0, ge=0.0)
    """Expected time of one use (for navigation, per metre), normalized among the candidates."""
    cost: float = Field(default=0.0, ge=0.0)
    health: float = Field(default=1.0, ge=0.0, le=1.0)
    """1: healthy; the score takes 1 - health."""
    preconditions: list[str] = Field(default_factory=list)
    effects: list[str] = Field(default_factory=list)
    enabled: bool = True

    @model_validator(mode="after")
    def _a_ros_name(self) -> "ProviderCard":
        if self.namespace and not _ROS_NAME.fullmatch(self.namespace.strip("/")):
            what = "an action namespace" if self.capability == "navigation" else "a topic name"
            raise ValueError(f"namespace {self.namespace!r} is not {what}: segments of letters, digits and "
                             "underscores (not starting with a digit) separated by '/'")
        return self


class RoutingWeights(_Cfg):
    """``s = p*p̂ - r*r̂ - u*û - l*l̂ - c*ĉ - h*ĥ`` (core/routing.score)."""

    p: float = Field(default=1.0, ge=0.0)
    r: float = Field(default=0.5, ge=0.0)
    u: float = Field(default=0.25, ge=0.0)
    l: float = Field(default=0.2, ge=0.0)  # noqa: E741 - the issue's name for the latency weight
    c: float = Field(default=0.1, ge=0.0)
    h: float = Field(default=0.5, ge=0.0)


class RoutingConfig(_Cfg):
    weights: RoutingWeights = RoutingWeights()
    prior_strength: float = Field(default=4.0, gt=0.0)
    """How many remembered outcomes a card's ``p_success`` counts as (p̂ = (k*p + wins) / (k + tries))."""
    fallback: bool = True
    """After a provider's failure, the ``switch_provider_or_skill`` rung re-runs the same call on the next
    provider (within the recovery budget); False: routing only."""


class MemoryConfig(_Cfg):
    """Memory of verified attempts (core/memory.py)."""

    examples: int = Field(default=3, ge=0, le=20)
    """How many verified plans of the most similar goals the planner is shown (0: none)."""
    record: bool = True
    """Derive memory from each finished mission's committed verdicts and receipts."""
    routing_stats: bool = True
    """Routing reads the providers' remembered verified outcomes (else only the cards and this mission)."""


ROBOT_RESOURCES = frozenset({"base", "camera", "speaker", "messenger"})
"""The resources of one robot's own body the skills lease (``skills.Skill.resources``); a site resource
may not take one of these names."""


class SiteResource(_Cfg):
    """One resource the robots of a site share (an elevator, a door, a corridor, a dock)."""

    places: list[str] = Field(default_factory=list)
    """Places that need it: a robot holds it while it is inside one (within ``radius_m`` of the place), from
    the navigation that goes in to the one that comes out."""
    skills: list[str] = Field(default_factory=list)
    """Skills that need it for as long as one of their calls runs (e.g. ``dock`` for ``dock_2``)."""
    radius_m: float = Field(default=1.0, gt=0.0, le=100.0)
    """How far from a place's pose a robot counts as inside it."""


class SiteConfig(_Cfg):
    """The fleet's shared resources (issue 19): leased across every robot writing one journal database."""

    resources: dict[str, SiteResource] = Field(default_factory=dict)
    lease_wait_s: float = Field(default=30.0, ge=0.0, le=3600.0)
    """How long a robot waits (journaled) for a shared resource another robot holds before the call is
    refused with the holder named; 0: refused at once."""
    poll_s: float = Field(default=0.5, gt=0.0, le=10.0)
    """How often a waiting robot looks again."""

    @model_validator(mode="after")
    def _names(self) -> "SiteConfig":
        for name in self.resources:
            if name in ROBOT_RESOURCES:
                raise ValueError(f"site resource {name!r} takes the name of a robot's own resource "
                                 f"({', '.join(sorted(ROBOT_RESOURCES))})")
            if not _ROS_NAME.fullmatch(name) or "/" in name:
                raise ValueError(f"site resource {name!r} must be a name of letters, digits and underscores")
        return self


class JournalConfig(_Cfg):
    """Where the journal lives when the supervisor is not told (its ``journal_path`` parameter, ``up --journal``)."""

    url: str = Field(default="", max_length=2000)
    """A ``postgresql://`` URL: the fleet's shared journal database (every robot's harness writes its events
    there, each under its namespace). "": the SQLite file ``$ROS_HOME/robot_harness/journal.sqlite3``."""

    @model_validator(mode="after")
    def _a_database(self) -> "JournalConfig":
        if self.url and not self.url.startswith(("postgresql://", "postgres://")):
            raise ValueError("journal.url must be a postgresql:// URL (a SQLite file is given with --journal)")
        return self


class HarnessConfig(_Cfg):
    frame_id: str = "map"
    context_byte_cap: int = Field(default=6000, ge=512)
    """Upper bound on the JSON context the model receives per turn."""
    snapshot_byte_cap: int = Field(default=1500, ge=256)
    """Upper bound on the snapshot projection inside that context."""
    places: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Named places: ``{x, y, yaw}`` in ``frame_id``, optionally ``aliases`` (what people call the place,
    e.g. ``loading_bay: {x: 15, y: -8, aliases: ["loading bay", "the bay"]}``; the goal compiler reads them)."""
    navigation: NavigationConfig = NavigationConfig()
    limits: LimitsConfig = LimitsConfig()
    contract: ContractConfig = ContractConfig()
    verification: VerificationConfig = VerificationConfig()
    recovery: RecoveryConfig = RecoveryConfig()
    interactions: InteractionsConfig = InteractionsConfig()
    mcp: McpConfig = McpConfig()
    eval_ablations: EvalAblations = EvalAblations()
    providers: dict[str, ProviderCard] = Field(default_factory=dict)
    """Capability cards, one per provider (issue 18); none: every capability has its one built-in provider."""
    routing: RoutingConfig = RoutingConfig()
    memory: MemoryConfig = MemoryConfig()
    site: SiteConfig = SiteConfig()
    journal: JournalConfig = JournalConfig()
    """Resources shared with the other robots of a fleet (one journal database for all of them)."""
    artifacts_dir: str = ""
    """Where capture_image writes artifacts; empty: beside the journal."""

    @model_validator(mode="after")
    def _site_places_exist(self) -> "HarnessConfig":
        for name, res in self.site.resources.items():
            unknown = sorted(set(res.places) - set(self.places))
            if unknown:
                raise ValueError(f"site resource {name!r} names unknown place(s) {', '.join(unknown)}"
                                 f" (places: {', '.join(sorted(self.places)) or 'none'})")
        return self


def navigation_workspace(nav: NavigationConfig, places: Mapping[str, Pose2D]) -> Workspace | None:
    """The configured workspace, else the places' bounding box plus the margin (None without places)."""
    if nav.workspace is not None:
        return nav.workspace
    if not places:
        return None
    xs = [p.x for p in places.values()]
    ys = [p.y for p in places.values()]
    m = max(nav.workspace_margin_m, 0.5)
    return Workspace(min_x=min(xs) - m, min_y=min(ys) - m, max_x=max(xs) + m, max_y=max(ys) + m)


def place_pose(spec: Mapping[str, Any]) -> Pose2D:
    """The pose of one ``places`` entry (its ``aliases`` are not part of it)."""
    return Pose2D(**{k: v for k, v in spec.items() if k != "aliases"})


def place_poses(config: HarnessConfig) -> dict[str, Pose2D]:
    """``config.places`` as poses."""
    return {name: place_pose(spec) for name, spec in config.places.items()}


def place_aliases(config: HarnessConfig) -> dict[str, tuple[str, ...]]:
    """``config.places``' aliases by place (places without any are left out)."""
    return {name: tuple(spec["aliases"]) for name, spec in config.places.items() if spec.get("aliases")}


def load_harness_config(*, file_text: str | None = None, overrides: dict | None = None) -> HarnessConfig:
    """Build a HarnessConfig from YAML text plus nested overrides (deep-merged)."""
    import yaml

    from .errors import UsageError

    base = yaml.safe_load(file_text) if file_text else {}
    if base is None:
        base = {}
    if not isinstance(base, dict):
        raise UsageError("harness configuration must be a mapping")
    merged = deep_merge(base, overrides or {})
    try:
        return HarnessConfig.model_validate(merged)
    except Exception as exc:  # pydantic.ValidationError
        raise UsageError(f"invalid harness configuration: {exc}") from None


def dotted_overrides(pairs: list[tuple[str, str]]) -> dict:
    """``[("limits.mission_timeout_s", "60")]`` -> ``{"limits": {"mission_timeout_s": 60}}`` (values parsed as YAML)."""
    import yaml

    from .errors import UsageError

    out: dict = {}
    for key, raw in pairs:
        if not key or any(not part for part in key.split(".")):
            raise UsageError(f"bad override key {key!r}")
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError as exc:
            raise UsageError(f"override {key}: value is not valid YAML: {exc}") from None
        node = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UsageError(f"override {key}: {'.'.join(parts[:i + 1])} is given a value by another override")
        if isinstance(node.get(parts[-1]), dict):
            raise UsageError(f"override {key}: it has keys given by another override")
        node[parts[-1]] = value
    return out


MISSION_OVERRIDABLE: tuple[str, ...] = (
    "limits.", "navigation.accept_timeout_s", "navigation.timeout_s", "navigation.timeout_per_m_s",
    "navigation.cancel_timeout_s", "navigation.lookup_timeout_s", "navigation.progress_journal_period_s",
)
"""What a mission's sender may change for its own mission (``Mission.overrides``, ``--set``): its budgets and
timeouts. Everything else is the site's: who may approve (``interactions``), the workspace and the
preconditions, the places, the verifier's tolerances, the contract compiler. A sender that could change
those would approve its own calls or loosen the checks on its own mission."""


def check_mission_overrides(pairs: Sequence[tuple[str, str]]) -> None:
    """A ``UsageError`` naming every override key a mission's sender may not change (``MISSION_OVERRIDABLE``)."""
    from .errors import UsageError

    refused = [k for k, _ in pairs if not any(k == p or (p.endswith(".") and k.startswith(p))
                                              for p in MISSION_OVERRIDABLE)]
    if refused:
        raise UsageError(f"override(s) {', '.join(sorted(set(refused)))} not allowed for one mission: a mission may "
                         "change only limits.* and the navigation timeouts; the rest (approval policy, workspace, "
                         "preconditions, places, tolerances) is the site's harness configuration",
                         field="overrides", refused=sorted(set(refused)))


def deep_merge(a: dict, b: dict) -> dict:
    """``b`` merged into a copy of ``a``, recursively for nested mappings."""
    out = dict(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def packaged_config(name: str) -> Path | None:
    """A shipped config file: the source checkout's config/, else share/robot_harness/config under an ament prefix."""

    candidates = [Path(__file__).resolve().parents[2] / "config" / name]
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            candidates.append(Path(prefix) / "share" / "robot_harness" / "config" / name)
    return next((p for p in candidates if p.is_file()), None)
