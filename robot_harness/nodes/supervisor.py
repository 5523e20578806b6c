"""The supervisor node: the Mission action server and the agent loop's host.

It refuses missions until its backend is active (Nav2's navigator lifecycle
state, as nav2_simple_commander's ``waitUntilNav2Active`` checks), then runs
the core ``MissionRunner`` with ROS ports: snapshots from the aggregator, turns
from the planner, NavigateToPose for motion. Every journal event is published
on ``~/events`` after it commits.
"""
from __future__ import annotations

import json
import os
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from lifecycle_msgs.srv import GetState
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import QoSProfile, QoSReliabilityPolicy

from ..core.clock import IdGenerator, SystemClock
from ..core.config_versions import ConfigPin, ConfigStore
from ..core.config import (HarnessConfig, check_mission_overrides, deep_merge, dotted_overrides, load_harness_config,
                           NavigationConfig, navigation_workspace, place_poses)
from ..core.site import Site
from ..compose import ArtifactChecker, default_contract_compiler, mission_runner
from ..core.decisions import PORTS
from ..core.tape import Tape, TapeRecorder
from ..core.mission.runner import MAX_GOAL_CHARS, MissionRunner
from ..core.errors import (HarnessError, HarnessTimeout, JournalWriteError, MissionRefused, NameClash, RefusalError,
                           UsageError)
from ..core.mission_spec import MissionSpec, StructuredCoverageReviewer, structured_compiler
from ..operator.session import ExternalPlanner, SessionContractCompiler, SessionHost
from ..core.memory import MemoryStore
from ..core.journal import (
    Journal,
    SqliteJournal,
    default_journal_path,
    is_database_url,
    local_state_path,
    open_journal,
    redact_url,
    robot_id_of,
)
from ..core.payloads import ContractFrozen, MissionFinished, PayloadReadError, payload_of
from ..core.preconditions import check_preconditions, not_ready
from ..core.interactions import CredentialSet, TokenHasher, interactions, load_token_key, resolve, token_key_path
from ..core.reconcile import Reconciler, clear_resource
from ..core.records import ActionView, EventDraft, EventType, JournalEvent, MissionStatus
from ..core.routing import RoutedNavigation, navigation_providers
from ..core.skills import default_skills, resolve_target
from .. import __version__
from ..client import NO_RECORDED_END  # the client tells a repeat without a journaled end from a final answer
from . import conversions as cv
from ._lifecycle import ConfigureError, HarnessLifecycleNode
from .diagnostics import Check, Level, journal_check, journal_facts, mission_check, navigator_check
from ._util import nodes_named, run_node, wait_future
from .executors import BackgroundSpinner
from .listener import EventPublisher, JournalFanout
from .ros_ports import (Nav2NavigationPort, RosFeasibilityPort, RosPlannerPort, RosRecoveryPort, RosRobotIO, RosSnapshotPort, RosVerifierPort,
                        recovery_call_budget)

__all__ = ["SupervisorNode", "main", "default_journal_path", "navigation_port", "RoutedNav2"]


def _refuse_unnamed_leftovers(journal: Journal, robot_id: str) -> None:
    """A robot that now runs under a namespace must not walk past what it left open before it had one (a
    journal written before robot ids, or the same robot started without its namespace): those missions
    would never be reconciled and a blocked lease of its own body (the robot may be moving) would be
    invisible to it. Refused, named, until they are settled under the old name."""
    if not robot_id:
        return
    missions = journal.open_missions(robot_id="")
    leases = sorted(lease.resource for lease in journal.all_leases().values()
                    if lease.robot_id == "" and lease.scope != "site")
    if missions or leases:
        raise UsageError(
            f"this journal holds what a harness without a namespace left open (missions {missions or 'none'},"
            f" leases on {leases or 'nothing'}); this robot now runs as {robot_id!r} and would not see them:"
            " start it once without a namespace to reconcile them (or clear the leases: robot-harness resources"
            " --clear RESOURCE --reason ... --operator ...), or give it a journal of its own",
            robot_id=robot_id, open_missions=missions, leases=leases)

ACTIVE_STATE_ID = 3  # lifecycle_msgs/State.PRIMARY_STATE_ACTIVE
_SESSION_START_WAIT_S = 5.0
"""How long an MCP call waits for the robot to be freed before it is refused as busy."""

_NAV2_ACTIONS = {"nav_action": "action_name", "nav_through_poses_action": "through_poses_action",
                 "follow_waypoints_action": "follow_waypoints_action", "spin_action": "spin_action",
                 "backup_action": "backup_action", "wait_action": "wait_action"}
"""The supervisor's Nav2 action parameters -> Nav2NavigationPort's keywords."""


@dataclass(eq=False)
class RoutedNav2(RoutedNavigation):
    """One Nav2NavigationPort per navigation provider, routed (core/routing.RoutedNavigation), with what the
    supervisor asks of its navigation port besides the NavigationPort: ``server_ready`` (any provider's
    navigator discovered) and ``destroy`` (every port's)."""

    def server_ready(self) -> bool:
        return any(port.server_ready() for port in self.ports.values())

    def destroy(self) -> None:
        for port in self.ports.values():
            port.destroy()


def navigation_port(node: Any, p: Mapping[str, Any], config: HarnessConfig, *, clock: Any) -> Any:
    """The mission's NavigationPort on ``node``: Nav2 at the parameters' names; with two or more navigation
    provider cards, or one under a namespace of its own (``config.providers``, issue 18;
    ``core/routing.navigation_providers``), one Nav2NavigationPort per card, every action name under
    the card's namespace (``alt``: ``alt/navigate_to_pose``; "" the names as configured; an empty name stays
    empty), routed by card name. The costmaps' clearing services are the body's: the same for every card."""
    costmaps = {"clear_global_costmap_service": p["clear_global_costmap_service"],
                "clear_local_costmap_service": p["clear_local_costmap_service"]}
    cards = navigation_providers(config.providers)
    if not cards:
        return Nav2NavigationPort(node, clock=clock, **{kw: p[param] for param, kw in _NAV2_ACTIONS.items()},
                                  **costmaps)

    def under(ns: str, name: str) -> str:
        return f"{ns}/{name.lstrip('/')}" if ns and name else name

    ports: dict[str, Any] = {}
    try:
        for card, ns in cards.items():
            ports[card] = Nav2NavigationPort(
                node, clock=clock, **{kw: under(ns, p[param]) for param, kw in _NAV2_ACTIONS.items()}, **costmaps)
    except BaseException:
        for port in ports.values():
            port.destroy()
        raise
    return RoutedNav2(ports)


class SupervisorNode(HarnessLifecycleNode):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("supervisor", params={
            "journal_path": "",
            "harness_config_file": "",
            "harness_config_json": "",
            "artifacts_dir": "",
            "nav_action": "navigate_to_pose",
            "nav_through_poses_action": "navigate_through_poses",
            "follow_waypoints_action": "follow_waypoints",
            "spin_action": "spin",
            "backup_action": "backup",
            "wait_action": "wait",
            "clear_global_costmap_service": "global_costmap/clear_entirely_global_costmap",
            "clear_local_costmap_service": "local_costmap/clear_entirely_local_costmap",
            "planner_action": "compute_path_to_pose",
            "goal_cost_service": "global_costmap/get_cost_global_costmap",
            "capture_service": "snapshot_aggregator/capture",
            "planner_service": "planner/plan_turn",
            "verifier_service": "verifier/verify",
            "verifier_timeout_s": 15.0,
            "recovery_service": "recovery/decide",
            "recovery_timeout_s": 0.0,
            "backend_lifecycle_node": "bt_navigator",
            "camera_topic": "camera/image_raw",
            "speech_topic": "speech/say",
            "message_topic": "robot_harness/messages",
            "mission_action": "robot_harness/mission",
            "salient_snapshot_topic": "snapshot_aggregator/snapshot",
            "planner_timeout_s": 240.0,
            "warm_up_timeout_s": 20.0,
            "journal_busy_timeout_ms": 2000,
            "bag_dir": "",
            "bag_max_bytes": 512 * 1024 * 1024,
            "bag_max_duration_s": 3600.0,
            "record_evidence": True,
            "id_seed": -1,
            "autostart": False,
        }, **kwargs)
        self._mission_server: Any = None
        """The Mission action server: made at the first activation, once no other graph holds this namespace,
        and kept for the node's life (refusing while not active): destroying an action server under a
        spinning executor crashes it (ros2/rclpy#1385; seen when a lifecycle manager reset the graph)."""
        self.last_outcome: Any = None
        """The last mission's ``MissionOutcome`` in this process (``/diagnostics``), None before the first."""
        self._diag_backend: Any = None
        self._diag_backend_state: str | None = None
        self._group = ReentrantCallbackGroup()
        self._wall = SystemClock()
        self._ids = IdGenerator(None)
        self._journal: Journal | None = None
        self._config: HarnessConfig | None = None
        self._busy = threading.Lock()
        self._admit = threading.Lock()
        self._reconciling = threading.Lock()
        """One reconciliation at a time: activation's, and a repeated request's for an open mission."""
        self._admitted_id = ""
        """The mission id the running request was admitted with (before its runner journals it)."""
        self._pending_stop: str | None = None
        """A Stop that arrived after a mission was admitted but before its runner existed."""
        self._mcp: Any = None
        self.mcp_error = ""
        """Why the MCP server did not start (empty: it runs, or was not asked for)."""
        self._session_host: SessionHost | None = None
        self._session_timer: Any = None
        self._unsubscribe_session: Any = None
        self._runner: MissionRunner | None = None
        self._tapes: dict[str, Tape] = {}
        """Decision tapes of the missions running, kept when each ends (``_keep_tapes``)."""
        """The runner of the mission in progress (None between missions and while one is being built)."""
        self._entities: list[Any] = []
        self._ports: list[Any] = []
        self.journal_path = ""
        self.autostart_if_asked()

    @property
    def journal(self) -> Journal | None:
        """The journal while configured (tests subscribe to it; nodes publish from it)."""
        return self._journal

    # -- lifecycle --------------------------------------------------------------

    def build(self, params: dict[str, Any]) -> None:
        from ..action import Mission
        from ..msg import ActionState, JournalEvent as JournalEventMsg
        from ..srv import CheckPreconditions, ClearResource, ListInteractions, ResolveInteraction, Stop

        p = params
        try:
            text = Path(p["harness_config_file"]).read_text() if p["harness_config_file"] else None
            import json

            overrides = json.loads(p["harness_config_json"]) if p["harness_config_json"] else {}
            self._config = load_harness_config(file_text=text, overrides=overrides)
        except (OSError, ValueError, UsageError, yaml.YAMLError) as exc:
            raise ConfigureError("harness configuration", exc) from exc
        seed = int(p["id_seed"])
        try:
            robot_id = robot_id_of(self.get_namespace())
        except UsageError as exc:
            raise ConfigureError("robot namespace", exc) from exc
        # Robots sharing one database draw ids from different sequences even under one seed (ids are unique there).
        self._ids = IdGenerator(None if seed < 0 else (seed ^ zlib.crc32(robot_id.encode()) if robot_id else seed))
        target = p["journal_path"] or self._config.journal.url
        if is_database_url(target) and not robot_id:
            # robots sharing one database are told apart by their namespaces: an unnamed harness would
            # reconcile (and settle the leases of) every other unnamed robot's missions as its own
            raise ConfigureError("robot namespace", UsageError(
                "a fleet's journal database needs each robot under a namespace of its own (robot-harness up"
                " --namespace robot1, or the nodes' namespace in a launch file); this supervisor has none",
                journal=redact_url(target)))
        # a fleet's database: this robot's events carry its namespace; its files (token key, artifacts, bags)
        # stay on this machine, under its own directory
        path = local_state_path(target, robot_id)
        self.journal_path = redact_url(target) if is_database_url(target) else str(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigureError(f"journal {path}", JournalWriteError(
                f"cannot create the journal's directory: {exc.strerror} ({exc.filename})", path=str(path),
                errno=exc.errno)) from exc
        try:
            if is_database_url(target):
                journal = open_journal(target, clock=self._wall, ids=self._ids, robot_id=robot_id,
                                       busy_timeout_ms=int(p["journal_busy_timeout_ms"]))
            else:
                journal = SqliteJournal(path, clock=self._wall, ids=self._ids, robot_id=robot_id,
                                        busy_timeout_ms=int(p["journal_busy_timeout_ms"]))
                try:
                    journal.setup()
                except BaseException:
                    journal.close()
                    raise
        except HarnessError as exc:  # the journal's message names the file, the SQLite error and what to do
            raise ConfigureError("", exc) from exc
        except OSError as exc:
            raise ConfigureError(f"journal {self.journal_path}", JournalWriteError(
                f"cannot open the journal: {exc.strerror or exc}", path=self.journal_path, errno=exc.errno)) from exc
        try:
            _refuse_unnamed_leftovers(journal, robot_id)
        except UsageError as exc:
            journal.close()
            raise ConfigureError("journal", exc) from exc
        self._journal = journal
        artifacts = Path(p["artifacts_dir"] or self._config.artifacts_dir or (path.parent / "artifacts")).expanduser()
        reliable = QoSProfile(depth=200, reliability=QoSReliabilityPolicy.RELIABLE)
        self._events_pub = self.create_publisher(JournalEventMsg, "~/events", reliable)
        self._state_pub = self.create_publisher(ActionState, "~/action_state", 10)
        # One journal listener on a thread of its own (commit order kept), not on the mission thread,
        # which would otherwise wait for DDS and the disk between a tool call and its goal
        # (bench/overhead.py): each event is converted once for ~/events and the evidence bag.
        self._events_listener = JournalFanout(name="supervisor-events", logger=self.get_logger())
        self._unsubscribe = self._journal.subscribe(self._events_listener)
        self._events_listener.attach(EventPublisher(self._events_pub), name="~/events")
        # The mission loop's clients (snapshot capture, planner, navigation)
        # live on a helper node with its own single-threaded spinner: see
        # BackgroundSpinner for why.
        self._spinner = BackgroundSpinner(context=self.context, name=f"{self.get_name()}_dispatch",
                                          namespace=self.get_namespace()).start()
        io_node = self._spinner.node
        dropped = self._journal_dropped
        self._snapshots = RosSnapshotPort(io_node, p["capture_service"], on_dropped=dropped)
        self._planner = RosPlannerPort(io_node, p["planner_service"], timeout_s=float(p["planner_timeout_s"]),
                                       on_dropped=dropped)
        # Empty: the robot serves no such interface (goals of that kind are refused).
        self._nav = navigation_port(io_node, p, self._config, clock=self._wall)
        # Empty planner_action / goal_cost_service: the robot has none (those checks say not applicable).
        self._feasibility = RosFeasibilityPort(io_node, planner_action=p["planner_action"],
                                               cost_service=p["goal_cost_service"])
        # Empty verifier_service: the verifier runs in this process (tests, a
        # robot without the verifier node); the gate is the same either way.
        self._verifier = RosVerifierPort(io_node, p["verifier_service"], timeout_s=float(p["verifier_timeout_s"]),
                                         on_dropped=dropped) if p["verifier_service"] else None
        self._recovery_port = None
        if p["recovery_service"]:
            from ..core.recovery import RecoveryBudgets, RecoveryPolicy

            fallback = RecoveryPolicy(RecoveryBudgets.from_config(self._config.recovery),
                                      alternatives=self._config.recovery.alternatives)
            # A model advisor in the recovery node can take its whole LLM budget to answer; asking
            # again after a short wait would buy a second (paid) model call. recovery_timeout_s > 0
            # wins; otherwise the wait follows the harness config's recovery.advisor / recovery.llm.
            if float(p["recovery_timeout_s"]) > 0:
                timeout_s, attempts = float(p["recovery_timeout_s"]), 1
            else:
                timeout_s, attempts = recovery_call_budget(self._config.recovery.advisor, self._config.recovery.llm)
            self._recovery_port = RosRecoveryPort(io_node, p["recovery_service"], fallback=fallback,
                                                  timeout_s=timeout_s, attempts=attempts, on_dropped=dropped)
        self._recorder = None
        self._recorder_spinner = None
        if p["record_evidence"]:
            from ..evidence.bag import McapEvidenceStore
            from .recorder import HarnessEvidenceRecorder, MissionRecorder

            bag_dir = Path(p["bag_dir"] or (path.parent / "bags")).expanduser()
            store = McapEvidenceStore(bag_dir, max_bytes=int(p["bag_max_bytes"]) or None,
                                      max_duration_s=float(p["bag_max_duration_s"]) or None)
            # Raw recording callbacks run on their own spinner, away from the
            # mission loop's clients.
            self._recorder_spinner = BackgroundSpinner(context=self.context, name=f"{self.get_name()}_recorder",
                                                       namespace=self.get_namespace()).start()
            self._mission_recorder = MissionRecorder(self._recorder_spinner.node, store)
            self._mission_recorder.subscribe()
            self._recorder = HarnessEvidenceRecorder(self._mission_recorder, self._journal, logger=self.get_logger(),
                                                     events=self._events_listener)
            self.get_logger().info(f"mission evidence bags in {bag_dir}")
        self._io = RosRobotIO(self, clock=self._wall, ids=self._ids, artifacts_dir=artifacts,
                              camera_topic=p["camera_topic"], speech_topic=p["speech_topic"], message_topic=p["message_topic"])
        self._backend_state = None
        if p["backend_lifecycle_node"]:
            self._backend_state = self.create_client(GetState, _lifecycle_service(p['backend_lifecycle_node']),
                                                     callback_group=self._group)
        from ..msg import WorldSnapshot as WorldSnapshotMsg

        self._salient_sub = self.create_subscription(WorldSnapshotMsg, p["salient_snapshot_topic"], self._on_snapshot, 10,
                                                     callback_group=self._group)
        self._check_srv = self.create_service(CheckPreconditions, "~/check_preconditions", self._on_check,
                                              callback_group=self._group)
        self._stop_srv = self.create_service(Stop, "~/stop", self._on_stop, callback_group=self._group)
        self._interaction_srvs = [
            self.create_service(ResolveInteraction, "~/resolve_interaction", self._on_resolve, callback_group=self._group),
            self.create_service(ListInteractions, "~/interactions", self._on_list_interactions, callback_group=self._group),
            self.create_service(ClearResource, "~/clear_resource", self._on_clear_resource, callback_group=self._group),
        ]
        try:  # tokens are kept only as keyed digests; the key lives beside the journal (mode 0600, made once)
            hasher = TokenHasher(load_token_key(token_key_path(path), create=True))
        except HarnessError as exc:
            raise ConfigureError("token key", exc) from exc
        self._credentials = CredentialSet.from_environment(self._config.interactions, os.environ, hasher)
        icfg = self._config.interactions
        gated = [s.name for s in default_skills(self._config.navigation, ask_operator=icfg.ask_operator)
                 if icfg.approval_policy_for(set(s.tags) | set(icfg.skill_tags.get(s.name, ()))) == "operator"]
        if gated and not self._credentials.approvers:
            self.get_logger().warning(f"calls of {', '.join(gated)} need an operator's approval and will wait "
                                      f"until they expire: {self._credentials.missing}")
        self.get_logger().info(f"journal at {path}; artifacts in {artifacts}")

    def activating(self) -> None:
        self._refuse_a_taken_namespace()
        self._serve_missions()
        self._warm_up()
        self._reconcile_interrupted()

    # -- /diagnostics ------------------------------------------------------------------------

    def diagnostic_tasks(self) -> dict[str, Callable[[], Check]]:
        return {"journal": self._journal_diagnostic, "navigator": self._navigator_diagnostic,
                "mission": self._mission_diagnostic}

    def _journal_diagnostic(self) -> Check:
        journal = self._journal
        if journal is None:
            return Check(Level.ERROR if self.transition_error is not None else Level.WARN,
                         "no journal (the supervisor is not configured)", {})
        return journal_check(**journal_facts(journal))

    def _navigator_diagnostic(self) -> Check:
        """NavigateToPose reachable, and the navigator's lifecycle state as its last answer said (asked
        again each period, never waited on: a diagnostics tick must not block the executor)."""
        nav, client = getattr(self, "_nav", None), getattr(self, "_backend_state", None)
        if nav is None:
            return Check(Level.WARN, "not configured", {})
        p = self.parameters()
        fut = self._diag_backend
        if fut is not None and fut.done():
            self._diag_backend = None
            if not fut.cancelled() and fut.exception() is None:
                self._diag_backend_state = fut.result().current_state.label or "unknown"
        if client is not None and self._diag_backend is None:
            if client.service_is_ready():
                self._diag_backend = client.call_async(GetState.Request())
            else:
                self._diag_backend_state = f"unreachable ({client.srv_name})"
        return navigator_check(action=self.resolve_topic_name(p["nav_action"]), server_available=nav.server_ready(),
                               backend_state=self._diag_backend_state if client is not None else None,
                               backend_node=p["backend_lifecycle_node"] if client is not None else "")

    def _mission_diagnostic(self) -> Check:
        last = self.last_outcome
        return mission_check(running=self._runner_mission_id() if self._busy.locked() else "",
                             last_id=last.mission_id if last is not None else "",
                             last_status=last.status.value if last is not None else "",
                             last_summary=last.summary[:300] if last is not None else "")

    # -- one graph per name on the domain -------------------------------------------------

    def name_clash(self) -> str:
        """Why this graph's names are taken by another graph on the ROS domain ("" when they are not):
        another node with this supervisor's fully-qualified name, a second server of the services it
        calls (capture, planner, verifier, recovery), a second server of its mission action or of the
        navigator's action. Two graphs in one namespace answer each other's requests (issue 15)."""
        p = self.parameters()
        problems: list[str] = []
        me = self.get_fully_qualified_name()
        twins = nodes_named(self, me)
        if twins > 1:
            problems.append(f"{twins} nodes are named {me}")
        for param in ("capture_service", "planner_service", "verifier_service", "recovery_service"):
            if p[param]:
                service = self.resolve_service_name(p[param])
                servers = self.count_services(service)
                if servers > 1:
                    problems.append(f"{servers} servers answer {service}")
        for what, action in (("mission", p["mission_action"]), ("navigation", p["nav_action"])):
            # An action server is its send_goal service (a status publisher alone is not one).
            send_goal = self.resolve_service_name(f"{action.rstrip('/')}/_action/send_goal")
            servers = self.count_services(send_goal)
            if servers > 1:
                problems.append(f"{servers} {what} action servers answer {send_goal}")
        if not problems:
            return ""
        return (f"another graph on ROS domain {self.context.get_domain_id()} uses this namespace "
                f"({self.get_namespace()}): {'; '.join(problems)}; give each graph its own namespace "
                "(--namespace / namespace:=) or domain")

    def lasting_name_clash(self) -> str:
        """``name_clash`` that outlasts ``name_clash_grace_s``: a node killed and restarted (SIGKILL: no
        goodbye) leaves its dead twin in discovery for its DDS lease, and a dead twin answers nothing, so a
        mission is held that long, not refused, before a clash counts."""
        why = self.name_clash()
        deadline = time.monotonic() + float(self.get_parameter("name_clash_grace_s").value)
        while why and time.monotonic() < deadline:
            time.sleep(0.5)
            why = self.name_clash()
        return why

    def _serve_missions(self) -> None:
        """The Mission action server, made at the first activation and kept (refusing while inactive):
        made only once the namespace is this graph's, so a second graph's supervisor never answers a goal
        meant for the first (with two servers the client takes whichever answer comes first)."""
        if self._mission_server is None:
            from ..action import Mission

            self._mission_server = ActionServer(
                self, Mission, self.parameters()["mission_action"], execute_callback=self._execute,
                goal_callback=self._on_goal, cancel_callback=self._on_cancel, callback_group=self._group)

    def _refuse_a_taken_namespace(self) -> None:
        """Refuse to activate while another graph holds this graph's names. Discovery takes a moment, so
        the names are watched until ``name_clash_discovery_s`` after this node was created; a graph that
        was just killed (SIGKILL: no goodbye) stays in discovery for its DDS lease (Fast DDS's default 20 s;
        4 s in config/fastdds_loopback.xml), so a clash must last ``name_clash_grace_s`` before it refuses."""
        discovered = self._born + float(self.get_parameter("name_clash_discovery_s").value)
        why = self.name_clash()
        while not why and time.monotonic() < discovered:
            time.sleep(0.1)
            why = self.name_clash()
        deadline = time.monotonic() + float(self.get_parameter("name_clash_grace_s").value)
        while why and time.monotonic() < deadline:
            time.sleep(0.5)
            why = self.name_clash()
        if why:
            raise ConfigureError("refusing to activate", NameClash(why))

    def activated(self) -> None:
        self._start_mcp()

    def _warm_up(self) -> None:
        """Snapshots through the mission loop's own client until one is answered (bounded by
        ``warm_up_timeout_s``), so its discovery is settled before the first mission is admitted.

        A fresh client's first requests can go unanswered while DDS still
        matches the server's response writer to it; on a starved host that
        has taken several seconds (seen in CI: the first mission then met an
        unanswered capture and ended BLOCKED). Never fatal: a mission that
        still finds no snapshot is refused (fail closed), not run blind.
        """
        deadline = time.monotonic() + float(self.get_parameter("warm_up_timeout_s").value)
        attempt = 0
        while True:
            attempt += 1
            try:
                self._snapshots.capture(reason="readiness", mission_id="")
                if attempt > 1:
                    self.get_logger().info(f"snapshot service answered on warm-up attempt {attempt}")
                return
            except HarnessError as exc:
                if not isinstance(exc, HarnessTimeout) or time.monotonic() >= deadline:
                    # Only an unanswered request is worth asking again; no server at all
                    # (no aggregator in this graph yet) or a refusal is reported once.
                    spinner = self._spinner
                    state = (f"dispatch spinner {'alive' if spinner.alive() else 'DEAD'}, {spinner.errors} spin "
                             f"error(s)" + (f", last {spinner.error!r}" if spinner.error is not None else ""))
                    self.get_logger().warning(f"snapshot capture not ready at activation ({exc.message}; {state}); "
                                              "missions are refused until it answers")
                    return
                if attempt % 2 == 0:
                    # Two rounds of asking unanswered while the service is there: ask through a
                    # fresh client (new endpoints, matched afresh) rather than the same one again.
                    self._snapshots.renew()
                    self.get_logger().warning(f"snapshot service not answering ({exc.message}); asking again "
                                              "through a new client")
                else:
                    self.get_logger().info(f"snapshot service not answering yet ({exc.message}); asking again")
                time.sleep(0.2)

    def _reconcile_interrupted(self) -> None:
        """Missions a previous supervisor left open were interrupted: settle each with the backend.

        Nothing is re-sent, cancelled or resumed; each open mission ends UNKNOWN
        with what the backend said, and a resource whose mutation cannot be
        settled stays blocked until reconciled or cleared by an operator.
        """
        assert self._journal is not None and self._config is not None
        reconciler = Reconciler(journal=self._journal, navigation=self._nav, snapshots=self._snapshots, clock=self._wall,
                                lookup_timeout_s=self._config.navigation.lookup_timeout_s,
                                outcome=self._config.navigation.outcome, sleep=time.sleep,
                                site=Site(self._config.site, place_poses(self._config)))
        try:
            with self._reconciling:
                with self._admit:  # the mission running here, or admitted and not yet journaled by its runner
                    live = frozenset({self._runner_mission_id(), self._admitted_id}) - {""}
                settled = reconciler.reconcile_open_missions(skip=live)
        except HarnessError as exc:
            self.get_logger().error(f"reconciling interrupted missions failed: {exc}; physical work will stay blocked "
                                    "on any resource they held")
            return
        for s in settled:
            self.get_logger().warning(f"reconciled {s.mission_id}/{s.action_id}: {s.finding.value} ({s.detail})"
                                      + (f"; {', '.join(s.blocked)} stays blocked" if s.blocked else ""))

    def deactivated(self) -> None:
        self._stop_mcp("supervisor deactivated")
        self._stop_current("supervisor deactivated", source="lifecycle")

    def release(self) -> None:
        self._teardown()

    def shutting_down(self) -> None:
        self._stop_current("supervisor shutting down", source="lifecycle")
        self._teardown()

    def destroy_node(self) -> None:
        """Stop the mission in progress first; the base class then tears down what configure made
        (spinner threads included) even without a cleanup transition."""
        if "_admit" not in self.__dict__:  # rclpy destroys a node whose construction failed (a bad parameter)
            super().destroy_node()
            return
        self._stop_current("supervisor destroyed", source="lifecycle")
        server, self._mission_server = self._mission_server, None
        if server is not None:
            try:
                server.destroy()
            except Exception as exc:  # noqa: BLE001 - the node goes anyway
                self.get_logger().warning(f"destroying the mission server: {type(exc).__name__}: {exc}")
        super().destroy_node()

    def _teardown(self) -> None:
        """Undo on_configure. Idempotent, and safe after a configure that failed half-way: the journal is
        taken first (a second call finds none and returns), and each step runs only for what exists, so
        rclpy's own cleanup calling it again, or a journal that never opened, is not an internal error."""
        journal, self._journal = self._journal, None
        if journal is None:
            return

        def have(name: str) -> Any:
            return getattr(self, name, None)

        def on_quiet_spinner(name: str) -> Any:
            """A port whose entities live on the dispatch node: left alone while its spinner still runs."""
            spinner = have("_spinner")
            return have(name) if spinner is None or spinner.quiet else None

        steps: list[tuple[str, Callable[[], Any]]] = [
            ("MCP server", lambda: self._stop_mcp("supervisor shutting down")),
            ("journal listener", lambda: have("_unsubscribe") and self._unsubscribe()),
            ("~/events", lambda: have("_events_listener") and not self._events_listener.close(2.0) and
             self.get_logger().warning("~/events: some committed events were not published within 2 s")),
            ("dispatch spinner", lambda: have("_spinner") and not self._spinner.stop() and
             self.get_logger().warning("the dispatch spinner did not stop within 2 s")),
            ("navigation port", lambda: on_quiet_spinner("_nav") and self._nav.destroy()),
            ("feasibility port", lambda: on_quiet_spinner("_feasibility") and self._feasibility.destroy()),
            ("robot I/O port", lambda: have("_io") and self._io.destroy()),
            ("snapshot port", lambda: on_quiet_spinner("_snapshots") and self._snapshots.destroy(self._spinner.node)),
            ("planner port", lambda: on_quiet_spinner("_planner") and self._planner.destroy(self._spinner.node)),
            ("verifier port", lambda: on_quiet_spinner("_verifier") and self._verifier.destroy(self._spinner.node)),
            ("recovery port", lambda: on_quiet_spinner("_recovery_port") and self._recovery_port.destroy(self._spinner.node)),
            ("evidence recorder", self._close_recorder),
            ("dispatch node", lambda: have("_spinner") and self._spinner.destroy()),
            ("services", lambda: [self.destroy_service(srv) for srv in (have("_check_srv"), have("_stop_srv"),
                                                                        *(have("_interaction_srvs") or ()))
                                  if srv is not None]),
            ("backend state client", lambda: have("_backend_state") and self.destroy_client(self._backend_state)),
            ("subscriptions", lambda: have("_salient_sub") and self.destroy_subscription(self._salient_sub)),
            ("publishers", lambda: [self.destroy_publisher(pub) for pub in (have("_events_pub"), have("_state_pub"))
                                    if pub is not None]),
        ]
        for what, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - tear down the rest; say what did not go
                self.get_logger().warning(f"teardown of the {what}: {type(exc).__name__}: {exc}")
        for name in ("_unsubscribe", "_events_listener", "_spinner", "_nav", "_feasibility", "_io", "_snapshots",
                     "_planner", "_verifier", "_recovery_port", "_check_srv", "_stop_srv", "_backend_state",
                     "_salient_sub", "_events_pub", "_state_pub"):
            if name in self.__dict__:
                setattr(self, name, None)
        self._interaction_srvs = []
        try:
            journal.close()
        except Exception as exc:  # noqa: BLE001
            self.get_logger().warning(f"closing the journal: {type(exc).__name__}: {exc}")

    def _close_recorder(self) -> None:
        spinner = getattr(self, "_recorder_spinner", None)
        if spinner is None:
            return
        if spinner.stop():
            self._mission_recorder.close()  # closes a bag left open by a mission cut short
        else:  # its subscriptions stay (see BackgroundSpinner.quiet); the bag is closed all the same
            self._mission_recorder.stop()
        spinner.destroy()
        self._recorder_spinner = None

    # -- backend readiness --------------------------------------------------------

    def backend_active(self, timeout_s: float = 5.0) -> tuple[bool, str]:
        """Is the navigator's lifecycle state ACTIVE? (waitUntilNav2Active's check, bounded.)"""
        if self._backend_state is None:
            return True, "backend lifecycle check disabled"
        if not self._backend_state.wait_for_service(timeout_sec=timeout_s):
            return False, f"{self._backend_state.srv_name} is not available"
        try:
            resp = wait_future(self._backend_state.call_async(GetState.Request()), timeout_s,
                               f"{self._backend_state.srv_name}")
        except HarnessTimeout as exc:
            return False, exc.message
        if resp.current_state.id != ACTIVE_STATE_ID:
            return False, f"navigator is {resp.current_state.label}, not active"
        return True, "active"

    def _lifecycle_not_active(self, pre: Any) -> str:
        """Why not every node of ``navigation.preconditions.lifecycle_active`` is active ("" when all are):
        asked once, as the dispatch gate will ask before each navigation, so a mission is not admitted only
        to have every navigation refused (a localizer its manager never brought up)."""
        port = getattr(self, "_feasibility", None)
        if port is None or not pre.lifecycle_active:
            return ""
        from ..core.preconditions import ProbeStatus

        probes = port.probe(pre=pre, start=None, goal=None, frame_id="").lifecycle
        lagging = [f"{p.node} {p.state or 'unknown'}" if p.status is ProbeStatus.ANSWERED
                   else f"{p.node} not answered ({p.error})"
                   for p in probes if p.status is not ProbeStatus.ANSWERED or p.state != "active"]
        if not lagging:
            return ""
        return (f"Nav2 is not active: {', '.join(lagging)} (navigation.preconditions.lifecycle_active lists "
                f"{', '.join(pre.lifecycle_active)}; each must be active)")

    # -- Mission action -----------------------------------------------------------

    def _on_goal(self, goal_request: Any) -> GoalResponse:
        """Accept every request the journal can record: a refusal is answered in the result (BLOCKED,
        with its reason) and journaled, not given as a bare REJECT that tells the client nothing.
        Only a supervisor with no journal (not configured) rejects."""
        if self._journal is None:
            self.get_logger().warning("mission refused: the supervisor is not configured (no journal)")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _goal_problem(self, goal_request: Any) -> tuple[str, str] | None:
        """(code, reason) when the request itself cannot be run: bad goal text, bad or forbidden overrides."""
        # A structured mission's own problems are not refused here: they end it BLOCKED, on the record.
        try:
            self._check_goal_text(cv.msg_to_mission_spec(goal_request))
        except UsageError as exc:
            return "invalid_goal", f"{exc.message}; got {len(goal_request.goal)}"
        try:
            default_contract_compiler(self._mission_config(goal_request))  # a malformed scenario contract is refused here
        except UsageError as exc:
            return "invalid_goal", f"invalid mission configuration: {exc.message}"
        except (TypeError, ValueError) as exc:  # overrides no schema foresaw: still the request's fault, said so
            return "invalid_goal", f"invalid mission configuration: {type(exc).__name__}: {exc}"
        return None

    def _busy_reason(self) -> str:
        session = self._session_host.mission_id if self._session_host is not None else ""
        if session:
            return (f"an MCP operator session (mission {session}) holds the robot; end it with harness_stop, "
                    "then send the mission")
        current = self._runner_mission_id() or self._admitted_id
        return f"another mission is running ({current or 'being admitted'}); stop it with robot-harness stop" + \
            (f" --mission {current}" if current else "")

    def _readiness_problem(self, mission_id: str) -> tuple[str, str] | None:
        """(code, reason) when the world is not ready for a mission: a name clash, the navigator not
        active, or (``preconditions.not_ready``, waited for up to ``navigation.ready_wait_s``) no fresh
        pose, navigator status or battery, or a battery below the minimum (which topic, how old)."""
        clash = self.lasting_name_clash()
        if clash:
            return "name_clash", clash
        ok, why = self.backend_active()
        if not ok:
            return "backend_not_active", f"the navigator is not active: {why}"
        nav = self._config.navigation if self._config is not None else NavigationConfig()
        lagging = self._lifecycle_not_active(nav.preconditions)
        if lagging:
            return "backend_not_active", lagging
        deadline = time.monotonic() + nav.ready_wait_s
        while True:
            try:
                snap = self._snapshots.capture(reason="admission_check", mission_id=mission_id)
            except HarnessError as exc:
                return "no_snapshot", f"no world snapshot: {exc.message}"
            problem = not_ready(snap, nav.preconditions)
            if problem is None or time.monotonic() >= deadline:
                return problem
            time.sleep(0.1)

    def _refuse(self, goal_handle: Any, mission_id: str, code: str, reason: str, *, source: str = "mission_action") -> Any:
        """Journal the refusal (the request's id, goal, owner, code and reason) and answer BLOCKED with it."""
        from ..action import Mission

        req = goal_handle.request
        self.get_logger().warning(f"mission {mission_id} refused ({code}): {reason}")
        note = self._journal_refusal(mission_id, code, reason, source=source, goal=req.goal, owner=req.owner)
        result = Mission.Result(mission_id=mission_id, status=MissionStatus.BLOCKED.value,
                                summary=f"refused ({code}): {reason}{note}", journal_path=self.journal_path)
        result.refusal = code
        goal_handle.abort()
        return result

    def _journal_refusal(self, mission_id: str, code: str, reason: str, *, source: str, goal: str = "",
                         owner: str = "") -> str:
        """Record a refused request; "" or why it could not be recorded (the refusal stands either way)."""
        journal = self._journal
        if journal is None:
            return " (not journaled: the supervisor has no journal)"
        draft = EventDraft(type=EventType.MISSION_REFUSED, mission_id=mission_id, payload={
            "code": code, "reason": reason, "source": source, "goal": goal[:MAX_GOAL_CHARS], "owner": owner[:200]})
        try:
            journal.append([draft])
        except HarnessError as exc:
            self.get_logger().error(f"refusal of {mission_id} not journaled: {exc}")
            return f" (not journaled: {exc.message})"
        return ""

    def _journal_dropped(self, record: dict[str, str]) -> None:
        """Journal a response dropped for carrying another mission's or request's ids (``ros_ports.correlated``)."""
        journal = self._journal
        if journal is None:
            return
        try:
            journal.append([EventDraft(type=EventType.RESPONSE_DROPPED, mission_id=record["expected_mission_id"],
                                       payload=record)])
        except HarnessError as exc:
            self.get_logger().error(f"dropped response not journaled: {exc}")

    def _on_cancel(self, goal_handle: Any) -> CancelResponse:
        mission_id = goal_handle.request.mission_id or self._runner_mission_id()
        if self._runner is not None and self._busy.locked() and mission_id == self._runner_mission_id():
            self._stop_mission(mission_id, "mission cancelled by the client", source="mission_cancel")
        return CancelResponse.ACCEPT

    def _stop_mission(self, mission_id: str, reason: str, *, source: str) -> str:
        """Journal the Stop (a revision-checked transition of the mission), then tell the runner.

        The runner also learns of it from the journal at its next write, so a
        Stop is never lost between the two. Returns an error text, or "".
        """
        error = ""
        if self._journal is not None and mission_id:
            draft = EventDraft(type=EventType.STOP_REQUESTED, mission_id=mission_id,
                               payload={"reason": reason, "source": source})
            try:
                self._journal.transition(mission_id, lambda: [draft])
            except HarnessError as exc:
                error = f"stop not journaled ({exc}); the running mission was still told to stop"
        if self._runner is not None:
            self._runner.request_stop(reason)
        return error

    def _site_config(self) -> tuple[HarnessConfig, ConfigPin]:
        """The site's configuration under the released version, read as each mission starts (a release
        applies from the next mission; a running one keeps its version). Version 1, the site's file
        unchanged, is written on first use. A journal that cannot say which version is released raises
        (a ``HarnessError``): the mission is refused rather than run under a version nobody chose."""
        assert self._config is not None and self._journal is not None
        pin, overrides = ConfigStore(self._journal, now=self._wall.now).pin()
        if not overrides:
            return self._config, pin
        return load_harness_config(overrides=deep_merge(self._config.model_dump(mode="json"), overrides)), pin

    @staticmethod
    def _site_config_problem(exc: HarnessError) -> tuple[str, str]:
        """The refusal of a mission whose configuration version cannot be read, or not applied to this
        site's file (a version naming a place the file no longer has)."""
        if isinstance(exc, UsageError):
            return "config_invalid", (f"the released configuration version does not apply to this site's harness "
                                      f"configuration: {exc.message} (robot-harness config rollback)")
        return "journal_unavailable", f"which configuration version is released cannot be read: {exc}"

    def _mission_config(self, goal_request: Any, site: HarnessConfig | None = None) -> HarnessConfig:
        assert self._config is not None
        base = site if site is not None else self._config
        pairs = [(kv.key, kv.value) for kv in goal_request.overrides]
        if not pairs:
            return base
        check_mission_overrides(pairs)  # the sender may not loosen the site's checks on its own mission
        return load_harness_config(
            file_text=None,
            overrides=deep_merge(base.model_dump(mode="json"), dotted_overrides(pairs)),
        )

    def _execute(self, goal_handle: Any) -> Any:
        from ..action import Mission

        result = Mission.Result()
        existing = goal_handle.request.mission_id
        problem: tuple[str, str] | None = None
        if not self._active:
            # Not even a repeat is answered before activation: its reconciliation (of missions a dead
            # supervisor left open) is not done yet. A following client asks again.
            return self._refuse(goal_handle, existing or self._ids.new("mission"), "not_active",
                                "the supervisor is not active yet (configured, not activated, or deactivated)")
        with self._admit:
            # A repeat (a client re-sending after a lost answer) of the mission being admitted or
            # run here, or of one already journaled, gets that mission's record: never a second run.
            repeat = bool(existing) and (existing == self._admitted_id or (
                self._journal is not None and self._journal.revision(existing) > 0))
            if not repeat:
                problem = self._goal_problem(goal_handle.request)
                if problem is None and not self._busy.acquire(blocking=False):
                    problem = ("busy", self._busy_reason())
                if problem is None:
                    self._admitted_id = existing = existing or self._ids.new("mission")
        if repeat:
            return self._repeat(goal_handle, existing)
        mission_id = existing or self._ids.new("mission")
        if problem is not None:
            return self._refuse(goal_handle, mission_id, *problem)
        try:
            problem = self._readiness_problem(mission_id)
            if problem is not None:
                return self._refuse(goal_handle, mission_id, *problem)
            req = goal_handle.request
            try:
                site, pin = self._site_config()
            except HarnessError as exc:
                return self._refuse(goal_handle, mission_id, *self._site_config_problem(exc))
            config = self._mission_config(req, site)
            state = {"stage": "admitted", "action": None}

            def on_update(stage: str, action: ActionView | None, event: JournalEvent | None) -> None:
                if stage:
                    state["stage"] = stage
                if action is not None:
                    state["action"] = action
                    self._state_pub.publish(cv.action_view_to_msg(action, self._runner_mission_id()))
                fb = Mission.Feedback()
                fb.mission_id = self._runner_mission_id()
                fb.stage = state["stage"]
                if event is not None:
                    fb.latest_event = cv.journal_event_to_msg(event)
                fb.active_action = cv.action_view_to_msg(state["action"], fb.mission_id)
                goal_handle.publish_feedback(fb)

            assert self._journal is not None
            try:
                spec = cv.msg_to_mission_spec(req)
                goal, structured = self._mission_inputs(config, spec)
                runner = self._new_runner(config, self._planner, on_update, mission_id=mission_id, config_pin=pin,
                                          **structured)
                credentials = self._credentials.for_mission(req.owner_token)
                self._tape_inputs(mission_id, goal=goal, owner=req.owner, credentials=credentials, spec=spec)
                outcome = runner.run(goal, mission_id=mission_id, owner=req.owner, credentials=credentials)
                self.last_outcome = outcome
            except UsageError as exc:
                goal_handle.abort()
                result.status, result.summary = MissionStatus.FAILED.value, f"invalid mission: {exc}"
                return result
            except Exception as exc:  # a harness bug must still give the client one answer, and never success
                self.get_logger().error(f"mission aborted by an internal error: {type(exc).__name__}: {exc}")
                goal_handle.abort()
                result.status = MissionStatus.UNKNOWN.value
                result.summary = f"harness internal error, outcome unknown: {type(exc).__name__}: {exc}"
                result.journal_path = self.journal_path
                return result
            result.mission_id = outcome.mission_id
            result.status = outcome.status.value
            result.summary = outcome.summary
            result.evidence_seqs = list(outcome.evidence_seqs)
            result.evidence_ids = list(outcome.evidence_ids)
            result.verdict_id = (outcome.verdict or {}).get("verdict_id", "")
            result.contract_id = (outcome.contract or {}).get("contract_id", "")
            result.journal_path = self.journal_path
            result.bag_path = outcome.bag.get("path", "")
            if outcome.status is MissionStatus.CANCELLED and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            elif outcome.status is MissionStatus.SUCCEEDED:
                goal_handle.succeed()
            else:
                goal_handle.abort()
            return result
        finally:
            self._release_mission()

    @staticmethod
    def _mission_inputs(config: HarnessConfig, spec: MissionSpec) -> tuple[str, dict[str, Any]]:
        """The goal text a mission runs with and its runner's contract arguments: none for a goal (its
        words are compiled as configured), the spec's own compiler for a structured mission, with a
        review that does not second-guess the program's contract (the fields were checked instead)."""
        if not spec.structured:
            return spec.goal, {}
        compiler = structured_compiler(spec, config=config)
        return compiler.description, {"contract_compiler": compiler, "coverage_reviewer": StructuredCoverageReviewer()}

    def _new_runner(self, config: HarnessConfig, planner: Any, on_update: Any, *, mission_id: str,
                    **kw: Any) -> MissionRunner:
        """Build the admitted mission's runner and publish it; a Stop that came first applies to it."""
        assert self._journal is not None
        if self._recovery_port is not None:
            self._recovery_port.mission_id = mission_id  # sent and checked with each recovery ask
        # Every reading the mission's decisions take goes on its decision tape (kept in the journal
        # database when the mission ends: ``robot-harness replay --decisions``).
        tape = Tape()
        tape.meta = {"config": config.model_dump(mode="json")}
        rec = TapeRecorder(tape)

        def taped(port: Any, role: str) -> Any:
            return None if port is None else rec.port(port, role, PORTS[role], attrs=("name", "providers"))

        runner = mission_runner(
            config=config, journal=self._journal, clock=rec.clock(self._wall), ids=rec.ids(self._ids),
            skills=default_skills(config.navigation, ask_operator=config.interactions.ask_operator),
            snapshots=taped(self._snapshots, "snapshots"), planner=taped(planner, "planner"),
            navigation=taped(self._nav, "navigation"), robot_io=taped(self._io, "robot_io"),
            feasibility=taped(self._feasibility, "feasibility"), on_update=on_update,
            verifier=taped(self._verifier, "verifier"), recorder=taped(self._recorder, "recorder"),
            recovery=taped(self._recovery_port, "recovery"),
            artifacts=taped(ArtifactChecker(), "artifacts") if self._verifier is None else None,
            memory=taped(MemoryStore(self._journal), "memory"),  # verified attempts, in the journal's database
            stop_reads=rec.stop_reads(), **kw,
        )
        self._tapes[mission_id] = tape
        with self._admit:
            self._runner = runner
            if self._pending_stop is not None:
                runner.request_stop(self._pending_stop)  # honoured from the mission's first step
                self._pending_stop = None
        return runner

    def _tape_inputs(self, mission_id: str, *, goal: str, owner: str, credentials: Any, spec: Any = None,
                     session: bool = False) -> None:
        """What ``runner.run`` is given, on the mission's tape: a replay runs the same call. Credentials
        are keyed digests (never a token); a structured mission's spec rebuilds its compiler."""
        tape = self._tapes.get(mission_id)
        if tape is not None:
            tape.meta["run"] = {"goal": goal, "owner": owner, "credentials": credentials.model_dump(mode="json"),
                                "spec": spec.model_dump(mode="json") if spec is not None and spec.structured else None,
                                "session": session}

    def _release_mission(self) -> None:
        """The admitted mission is over: keep its decision tape, forget its runner and any pending Stop,
        then free the robot."""
        self._keep_tapes()
        with self._admit:
            self._runner = None
            self._admitted_id = ""
            self._pending_stop = None
        self._busy.release()

    def _keep_tapes(self) -> None:
        """The ended missions' decision tapes into the journal database. A tape that cannot be kept is
        logged, never a failure of the mission: the events are the record; the tape replays them."""
        tapes, self._tapes = self._tapes, {}
        for mission_id, tape in tapes.items():
            if not len(tape) or self._journal is None:
                continue
            try:
                self._journal.put_tape(mission_id, tape)
            except Exception as exc:  # noqa: BLE001 - see the docstring
                self.get_logger().warning(f"mission {mission_id}: its decision tape ({len(tape)} readings) was not "
                                          f"kept: {type(exc).__name__}: {exc}")

    def stop_missions(self, reason: str, *, timeout_s: float) -> bool:
        """Stop the mission or MCP session in progress (journaled, like a Stop) and wait until it has
        ended, at most ``timeout_s``: for a bring-up stopping the graph. True when nothing runs now."""
        self._active = False  # nothing new is admitted from here on (refused not_active, journaled)
        if not self._busy.locked():
            return True
        self._stop_mcp(reason)
        self._stop_current(reason, source="shutdown")
        if not self._busy.acquire(timeout=timeout_s):
            self.get_logger().warning(f"the mission in progress did not end within {timeout_s:g} s of: {reason}")
            return False
        self._busy.release()
        return True

    def _stop_current(self, reason: str, *, source: str) -> str:
        """Stop the mission in progress, even one admitted whose runner is not built yet."""
        with self._admit:
            if self._runner is None:
                if self._busy.locked():
                    self._pending_stop = reason
                return ""
            mission_id = self._runner.mission_id
        return self._stop_mission(mission_id, reason, source=source)

    # -- MCP: an operator session mission ---------------------------------------------

    def _start_mcp(self) -> None:
        """Serve MCP (``mcp.enabled``): skills as tools, every call a turn of an operator session mission."""
        assert self._config is not None and self._journal is not None
        cfg = self._config.mcp
        if not cfg.enabled or self._mcp is not None:
            return
        from ..operator.mcp_server import serve

        self._session_host = SessionHost(start=self._start_session, stop=self._end_session,
                                         new_id=lambda: self._ids.new("mcp"), idle_close_s=cfg.idle_close_s)
        self._unsubscribe_session = self._journal.subscribe(self._observe_for_session)
        decision_s = cfg.decision_timeout_s + self._config.interactions.timeout_s
        try:
            self._mcp = serve(self._session_host, list(default_skills(self._config.navigation,
                                                                      ask_operator=self._config.interactions.ask_operator)),
                              bind=cfg.host, port=cfg.port, token=os.environ.get(cfg.token_env, ""),
                              decision_timeout_s=decision_s, version=__version__, missions=self)
        except Exception as exc:  # never fatal to the supervisor: missions run without MCP
            self.mcp_error = f"{type(exc).__name__}: {exc}"
            self.get_logger().error(f"MCP server not started: {self.mcp_error}")
            self._unsubscribe_session()
            self._session_host = None
            return
        self._session_timer = self.create_timer(1.0, self._session_host.tick, callback_group=self._group)
        self.get_logger().info(f"MCP server at {self._mcp.url}")

    def _observe_for_session(self, events: list[JournalEvent]) -> None:
        host = self._session_host
        for event in events:
            try:
                if host is not None:
                    host.observe(event)
            except Exception as exc:  # a notifier's failure must not hide the rest of the batch
                self.get_logger().error(f"MCP session observer: {type(exc).__name__}: {exc}")

    def _stop_mcp(self, reason: str) -> None:
        if self._mcp is None or self._session_host is None:
            return
        self._session_host.end(reason)
        self.destroy_timer(self._session_timer)
        self._mcp.stop()
        self._unsubscribe_session()
        self._mcp = None

    @property
    def mcp_url(self) -> str:
        return self._mcp.url if self._mcp is not None else ""

    def _start_session(self, planner: ExternalPlanner, caller: str) -> str:
        """Run a session mission for ``planner`` in its own thread; refused while anything else runs."""
        mission_id = self._ids.new("mcp-session")
        spec = MissionSpec(goal="MCP operator session")
        if not self._active or self._journal is None or self._config is None:
            raise self._refusal(mission_id, "not_active", "the supervisor is not active", spec, caller)
        clash = self.lasting_name_clash()
        if clash:
            raise self._refusal(mission_id, "name_clash", clash, spec, caller)
        ok, why = self.backend_active()
        if not ok:
            raise self._refusal(mission_id, "backend_not_active", f"the navigator is not active: {why}", spec, caller)
        lagging = self._lifecycle_not_active(self._config.navigation.preconditions)
        if lagging:
            raise self._refusal(mission_id, "backend_not_active", lagging, spec, caller)
        # A session that was just stopped (or a mission in its last writes) frees the robot within
        # moments: wait that long before refusing, not longer.
        if not self._busy.acquire(timeout=_SESSION_START_WAIT_S):
            raise self._refusal(mission_id, "busy", self._busy_reason() + "; an MCP session can start when it ends",
                                spec, caller)
        with self._admit:
            self._admitted_id = mission_id
        try:
            cfg = self._config.mcp
            try:
                site, pin = self._site_config()
            except HarnessError as exc:
                raise self._refusal(mission_id, *self._site_config_problem(exc), spec, caller) from None
            config = load_harness_config(file_text=None, overrides=deep_merge(site.model_dump(mode="json"), {
                "limits": {"max_turns": cfg.max_calls, "mission_timeout_s": cfg.session_timeout_s}}))

            def run() -> None:
                why = "ended"
                try:
                    runner = self._new_runner(config, planner, self._publish_action_state, mission_id=mission_id,
                                              config_pin=pin, contract_compiler=SessionContractCompiler(),
                                              coverage_reviewer=SessionContractCompiler())
                    goal = (f"MCP operator session ({caller or 'mcp'}): operator-directed tool calls; "
                            "an MCP session never declares completion")
                    credentials = self._credentials.for_program(os.environ.get(self._config.mcp.token_env, ""))
                    self._tape_inputs(mission_id, goal=goal, owner=caller, credentials=credentials, session=True)
                    outcome = runner.run(goal, mission_id=mission_id, owner=caller, credentials=credentials)
                    self.last_outcome = outcome
                    why = f"ended {outcome.status.value}: {outcome.summary}"
                    self.get_logger().info(f"MCP session {mission_id} {why}")
                except Exception as exc:  # one answer for the clients, never success
                    why = f"aborted: {type(exc).__name__}: {exc}"
                    self.get_logger().error(f"MCP session {mission_id} {why}")
                finally:
                    try:
                        planner.abandon(f"session mission {mission_id} {why}")
                    finally:
                        self._release_mission()

            threading.Thread(target=run, name=f"mcp-session-{mission_id}", daemon=True).start()
        except BaseException:
            self._release_mission()
            raise
        return mission_id

    def _end_session(self, mission_id: str, reason: str) -> None:
        if self._busy.locked() and mission_id in (self._runner_mission_id(), self._admitted_id):
            self._stop_current(reason, source="mcp")

    # -- MCP: whole missions (operator/mcp_server.py's MissionSubmitter) -----------------

    def validate_mission(self, spec: MissionSpec) -> dict[str, Any]:
        """The contract ``spec`` would be admitted with, compiled against this supervisor's places and
        templates; nothing is journaled and nothing moves. ``ContractError`` (with ``problems``) if none."""
        from ..compose import default_contract_compiler, default_coverage_reviewer
        from ..core.contracts import compile_contract

        if self._config is None:
            raise RefusalError("the supervisor is not configured")
        self._check_goal_text(spec)
        goal, structured = self._mission_inputs(self._config, spec)
        places = {k: _pose(v) for k, v in self._config.places.items()}
        compiler = structured.get("contract_compiler") or default_contract_compiler(self._config)
        reviewer = structured.get("coverage_reviewer") or default_coverage_reviewer(self._config)
        contract = compile_contract(goal, compiler=compiler, reviewer=reviewer, mission_id="validation",
                                    contract_id="validation", places=places)
        return {"status": "valid", "goal": goal, "source": spec.source,
                "contract": contract.model_dump(mode="json", exclude={"contract_id", "mission_id"})}

    def submit_mission(self, spec: MissionSpec, *, caller: str, on_admitted: Any = None,
                       on_stage: Any = None) -> dict[str, Any]:
        """Run one mission for an MCP client, admitted and run like a Mission goal (same runner, journal
        and verifier), and return its result once it ends. Refused (``RefusalError``) while the robot is
        busy, an MCP session included; the caller is the owner, the operator token answers its approvals."""
        if not self._active or self._journal is None or self._config is None:
            raise self._refusal(self._ids.new("mission"), "not_active", "the supervisor is not active", spec, caller)
        self._check_goal_text(spec)
        mission_id = self._ids.new("mission")
        session = self._session_host.mission_id if self._session_host is not None else ""
        if session or not self._busy.acquire(blocking=False):
            raise self._refusal(mission_id, "busy", self._busy_reason(), spec, caller)
        with self._admit:
            self._admitted_id = mission_id
        try:
            problem = self._readiness_problem(mission_id)
            if problem is not None:
                raise self._refusal(mission_id, *problem, spec, caller)
            try:
                config, pin = self._site_config()
            except HarnessError as exc:
                raise self._refusal(mission_id, *self._site_config_problem(exc), spec, caller) from None
            if on_admitted is not None:
                on_admitted(mission_id)
            last = {"stage": ""}

            def on_update(stage: str, action: ActionView | None, event: JournalEvent | None) -> None:
                if action is not None:
                    self._state_pub.publish(cv.action_view_to_msg(action, mission_id))
                if stage and stage != last["stage"] and on_stage is not None:
                    last["stage"] = stage
                    on_stage(stage)

            goal, structured = self._mission_inputs(config, spec)
            runner = self._new_runner(config, self._planner, on_update, mission_id=mission_id, config_pin=pin,
                                      **structured)
            credentials = self._credentials.for_program(os.environ.get(self._config.mcp.token_env, ""))
            self._tape_inputs(mission_id, goal=goal, owner=caller[:200], credentials=credentials, spec=spec)
            outcome = runner.run(goal, mission_id=mission_id, owner=caller[:200], credentials=credentials)
            self.last_outcome = outcome
            return {"mission_id": outcome.mission_id, "status": outcome.status.value, "summary": outcome.summary,
                    "contract_id": (outcome.contract or {}).get("contract_id", ""),
                    "verdict_id": (outcome.verdict or {}).get("verdict_id", ""),
                    "evidence_ids": list(outcome.evidence_ids), "journal": self.journal_path,
                    "bag": outcome.bag.get("path", "")}
        finally:
            self._release_mission()

    def _refusal(self, mission_id: str, code: str, reason: str, spec: MissionSpec, caller: str) -> MissionRefused:
        """An MCP submission refused: journaled like a Mission goal's refusal, raised to the MCP client."""
        note = self._journal_refusal(mission_id, code, reason, source="mcp", goal=spec.goal, owner=caller)
        self.get_logger().warning(f"MCP mission {mission_id} refused ({code}): {reason}")
        return MissionRefused(f"refused ({code}): {reason}{note}", mission_id=mission_id, refusal=code)

    def stop_mission(self, mission_id: str, reason: str) -> str:
        """Stop ``mission_id`` if it is the one running (journaled, like a Stop); "" or why not."""
        with self._admit:
            current = self._runner_mission_id() or self._admitted_id
        if not self._busy.locked() or not mission_id or mission_id != current:
            return f"mission {mission_id} is not running"
        return self._stop_current(reason, source="mcp")

    @staticmethod
    def _check_goal_text(spec: MissionSpec) -> None:
        if len(spec.goal) > MAX_GOAL_CHARS or not (spec.goal.strip() or spec.structured):
            raise UsageError(f"a mission needs a goal of 1..{MAX_GOAL_CHARS} characters, a contract or a template",
                             field="goal")

    def _publish_action_state(self, stage: str, action: ActionView | None, event: JournalEvent | None) -> None:
        if action is not None:
            self._state_pub.publish(cv.action_view_to_msg(action, self._runner_mission_id()))

    def _runner_mission_id(self) -> str:
        return self._runner.mission_id if self._runner is not None else ""

    def _repeat(self, goal_handle: Any, mission_id: str) -> Any:
        """A mission id seen before: wait for it if it runs here, then answer with its journaled record."""
        from ..action import Mission

        while self._busy.locked() and mission_id in (self._runner_mission_id(), self._admitted_id):
            threading.Event().wait(0.1)
        assert self._journal is not None
        if mission_id in self._journal.open_missions() and self._runner_mission_id() != mission_id:
            self._reconcile_interrupted()
        finished = self._journal.events(mission_id=mission_id, types=[EventType.MISSION_FINISHED])
        result = Mission.Result(mission_id=mission_id, journal_path=self.journal_path)
        if not finished:
            result.status = MissionStatus.UNKNOWN.value
            result.summary = f"repeated request for a mission with {NO_RECORDED_END}; nothing was run again"
            goal_handle.abort()
            return result
        try:
            end = payload_of(finished[-1], MissionFinished)
            contract = self._journal.events(mission_id=mission_id, types=[EventType.CONTRACT_FROZEN])
            frozen = payload_of(contract[-1], ContractFrozen).contract if contract else None
        except PayloadReadError as exc:
            result.status = MissionStatus.UNKNOWN.value
            result.summary = f"repeated request; nothing was run again. The recorded end cannot be read: {exc.message}"
            goal_handle.abort()
            return result
        result.status = end.status or MissionStatus.UNKNOWN.value
        result.summary = f"repeated request; nothing was run again. Recorded outcome: {end.summary}"
        result.evidence_seqs = list(end.evidence_seqs)
        result.evidence_ids = list(end.evidence_ids)
        result.verdict_id = end.verdict_id
        result.bag_path = end.bag.path if end.bag is not None else ""
        result.contract_id = frozen.contract_id if frozen is not None else ""
        (goal_handle.succeed if result.status == MissionStatus.SUCCEEDED.value else goal_handle.abort)()
        return result

    # -- services -----------------------------------------------------------------

    def _on_stop(self, request: Any, response: Any) -> Any:
        if not self._busy.locked():
            response.ok, response.error = True, "no mission running"
            return response
        current = self._runner_mission_id() or self._admitted_id
        if request.mission_id and current and request.mission_id != current:
            response.ok, response.error = False, f"mission {request.mission_id} is not running"
            return response
        error = self._stop_current(request.reason or "operator stop", source="stop_service")
        response.ok, response.error = True, error
        return response

    def _on_check(self, request: Any, response: Any) -> Any:
        response.mission_id, response.request_id = request.mission_id, request.request_id
        assert self._config is not None and self._journal is not None
        try:
            skill = default_skills(self._config.navigation).get(request.skill)
            args = skill.validate(json.loads(request.arguments_json or "{}"))
            if skill.managed is None:
                raise UsageError(f"{request.skill} is not a managed physical action")
            decision = self._journal.get_snapshot(request.decision_snapshot_id)
            places = {k: _pose(v) for k, v in self._config.places.items()}
            target = resolve_target(args, places)  # type: ignore[arg-type]
            fresh = self._snapshots.capture(reason="pre_dispatch", mission_id=request.mission_id)
        except HarnessError as exc:
            # The details say what was wrong (e.g. which argument failed validation and why).
            details = f" {json.dumps(exc.details, sort_keys=True, default=str)}" if exc.details else ""
            response.ok, response.error = False, f"{exc.message}{details}"
            return response
        except ValueError as exc:  # arguments_json is not JSON
            response.ok, response.error = False, f"arguments_json: {exc}"
            return response
        runner = self._runner  # the mission in progress, if any: its running action is a conflict
        active = runner.active_actions() if runner is not None else []
        pre = skill.managed.navigation.preconditions
        feasibility = (self._feasibility.probe(pre=pre, start=fresh.pose, goal=target, frame_id=self._config.frame_id)
                       if self._feasibility is not None else None)
        report = check_preconditions(pre, decision=decision, fresh=fresh,
                                     target_at_decision=target, target_now=target, active_actions=active,
                                     workspace=navigation_workspace(skill.managed.navigation, places),
                                     feasibility=feasibility)
        try:
            self._journal.append([
                EventDraft(type=EventType.WORLD_SNAPSHOT_CAPTURED, mission_id=request.mission_id, snapshot_id=fresh.snapshot_id,
                           payload={"reason": "pre_dispatch", "snapshot": fresh.model_dump(mode="json")}),
                EventDraft(type=EventType.ACTION_PRECONDITION_CHECKED, mission_id=request.mission_id,
                           snapshot_id=fresh.snapshot_id, payload=report.model_dump(mode="json")),
            ])
        except HarnessError as exc:
            response.ok, response.error = False, f"could not record the check: {exc}"
            return response
        response.ok = report.ok
        response.report_json = report.model_dump_json()
        response.fresh_snapshot_id = fresh.snapshot_id
        return response

    def _on_resolve(self, request: Any, response: Any) -> Any:
        assert self._journal is not None
        try:
            interaction, recorded = resolve(self._journal, interaction_id=request.interaction_id,
                                            resolution=request.resolution, token=request.token, clock=self._wall,
                                            answer=request.answer, choice=request.choice, operator=request.operator_name,
                                            hasher=self._credentials.hasher)
        except HarnessError as exc:
            response.ok, response.code, response.error = False, "invalid" if exc.code == "usage_error" else exc.code, exc.message
            return response
        response.ok, response.code, response.recorded = True, "ok", recorded
        response.interaction_json = json.dumps(interaction.view())
        return response

    def _on_list_interactions(self, request: Any, response: Any) -> Any:
        assert self._journal is not None
        try:
            found = interactions(self._journal.events(mission_id=request.mission_id or None, types=[
                EventType.INTERACTION_REQUESTED, EventType.INTERACTION_RESOLVED]))
        except HarnessError as exc:
            response.ok, response.error = False, str(exc)
            return response
        listed = [i.view() for i in found.values() if i.pending or not request.pending_only]
        response.ok, response.interactions_json = True, json.dumps(listed)
        return response

    def _on_clear_resource(self, request: Any, response: Any) -> Any:
        assert self._journal is not None
        if not self._credentials.operator_configured:
            response.ok, response.error = False, (
                f"no operator token configured (set {self._config.interactions.operator_token_env} for the "
                "supervisor); nobody may clear resources over ROS")
            return response
        if not self._credentials.is_operator(request.token):
            response.ok, response.error = False, "not_authorized: wrong operator token"
            return response
        try:
            lease = clear_resource(self._journal, resource=request.resource, reason=request.reason,
                                   operator=request.operator_name, clock=self._wall)
        except HarnessError as exc:
            response.ok, response.error = False, str(exc)
            return response
        self.get_logger().warning(f"{request.operator_name} cleared {request.resource} (held by {lease.owner}): {request.reason}")
        response.ok = True
        return response

    def _on_snapshot(self, msg: Any) -> None:
        """Persist snapshots the aggregator took on salient events (pose jump, controller change, battery low)."""
        if msg.reason != "salient_event" or self._journal is None:
            return
        snap = cv.msg_to_snapshot(msg)
        mission_id = self._runner_mission_id() if self._busy.locked() else ""
        try:
            self._journal.append([EventDraft(type=EventType.WORLD_SNAPSHOT_CAPTURED, mission_id=mission_id,
                                             snapshot_id=snap.snapshot_id,
                                             payload={"reason": "salient_event", "snapshot": snap.model_dump(mode="json")})])
        except HarnessError as exc:
            self.get_logger().error(f"could not persist salient snapshot {snap.snapshot_id}: {exc}")


def _lifecycle_service(node: str) -> str:
    """``<node>/get_state``: relative (under this node's namespace, as Nav2's clients name
    ``bt_navigator``) unless the parameter names the node absolutely (``/robot1/bt_navigator``)."""
    node = node.strip().rstrip("/")
    return f"{node}/get_state"


def _pose(v: dict) -> Any:
    from ..core.config import place_pose

    return place_pose(v)


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``ros2 run robot_harness supervisor``."""
    return run_node(SupervisorNode, argv)
