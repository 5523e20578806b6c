"""ROS implementations of the core's ports (snapshot, planner, Nav2, robot I/O).

Each blocks the calling executor thread on an rclpy future with a bounded wait;
the supervisor runs them from a MultiThreadedExecutor with reentrant callback
groups, so the futures complete on other threads.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import queue
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

from action_msgs.msg import GoalStatus, GoalStatusArray
from geometry_msgs.msg import PoseStamped
from rclpy.action.client import ClientGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy
from sensor_msgs.msg import Image
from std_msgs.msg import String

from ..core.clock import Clock, IdGenerator
from ..core.errors import BackendUnavailable, HarnessTimeout, ToolExecutionError, UsageError
from ..core.nav_goals import NavGoal, NavGoalKind
from ..core.ports import BackendEvent, GoalAck, PlannerRequest
from ..core.records import ArtifactRef, ModelResponse, Pose2D, WorldSnapshot
from . import conversions as cv
from ..evidence.png import encode_png
from ._util import ActionClient, LatchedSource, wait_future

def _nav2_type(module: str, name: str) -> Any:
    """``nav2_msgs.<module>.<name>`` (Nav2 on a robot; the test-only stand-in here, same interface), or None
    when this robot's nav2_msgs lacks it (an older Nav2, a trimmed build): what needs it is then refused or
    reported not applicable, never an ImportError."""
    try:
        return getattr(importlib.import_module(f"nav2_msgs.{module}"), name)
    except (ImportError, AttributeError):
        return None


_ACTION_TYPE_NAMES = {
    NavGoalKind.NAVIGATE_TO_POSE: "NavigateToPose", NavGoalKind.NAVIGATE_THROUGH_POSES: "NavigateThroughPoses",
    NavGoalKind.FOLLOW_WAYPOINTS: "FollowWaypoints", NavGoalKind.SPIN: "Spin", NavGoalKind.BACK_UP: "BackUp",
    NavGoalKind.WAIT: "Wait",
}
NAV2_ACTION_TYPES: dict[NavGoalKind, Any] = {kind: _nav2_type("action", name)
                                             for kind, name in _ACTION_TYPE_NAMES.items()}
"""The action type of each kind in this robot's nav2_msgs (None: it has none; that kind is refused)."""
NavigateToPose = NAV2_ACTION_TYPES[NavGoalKind.NAVIGATE_TO_POSE]
ClearEntireCostmap = _nav2_type("srv", "ClearEntireCostmap")
ComputePathToPose = _nav2_type("action", "ComputePathToPose")  # the planner server's dry run
GetCosts = _nav2_type("srv", "GetCosts")  # the costmap's query (Kilted)

__all__ = ["DropSink", "new_request_id", "correlated", "RosSnapshotPort", "RosPlannerPort", "RosVerifierPort", "RosRecoveryPort", "Nav2NavigationPort", "RosFeasibilityPort", "RosRobotIO",
           "GOAL_STATUS_NAMES", "NAV2_ACTION_TYPES", "recovery_call_budget"]

GOAL_STATUS_NAMES = {
    GoalStatus.STATUS_UNKNOWN: "unknown",
    GoalStatus.STATUS_ACCEPTED: "accepted",
    GoalStatus.STATUS_EXECUTING: "executing",
    GoalStatus.STATUS_CANCELING: "canceling",
    GoalStatus.STATUS_SUCCEEDED: "succeeded",
    GoalStatus.STATUS_CANCELED: "canceled",
    GoalStatus.STATUS_ABORTED: "aborted",
}


DropSink = Callable[[dict[str, str]], None]
"""Told of every response dropped for carrying another mission's or request's ids (the supervisor journals it)."""


def new_request_id(kind: str) -> str:
    """A request id unique to one call (``<kind>-<12 hex>``); a retry of the same call keeps it."""
    return f"{kind}-{uuid.uuid4().hex[:12]}"


def correlated(response: Any, request: Any, *, service: str, call: str, logger: Any = None,
               sink: DropSink | None = None, note: str = "") -> bool:
    """True when ``response`` echoes ``request``'s mission_id and request_id; otherwise it is dropped:
    logged, handed to ``sink`` (to be journaled) and False. A response for another mission or request
    comes from another graph's node on the same domain (same service name), or is a late answer to an
    earlier call: acting on it would run this mission on someone else's decision."""
    if response.mission_id == request.mission_id and response.request_id == request.request_id:
        return True
    record = {"service": service, "call": call,
              "expected_mission_id": request.mission_id, "expected_request_id": request.request_id,
              "received_mission_id": response.mission_id, "received_request_id": response.request_id,
              "note": note}
    if logger is not None:
        logger.warning(f"{call} ({service}): dropped a response for mission {response.mission_id!r} request "
                       f"{response.request_id!r}; asked for mission {request.mission_id!r} request "
                       f"{request.request_id!r} ({note})")
    if sink is not None:
        try:
            sink(record)
        except Exception as exc:  # noqa: BLE001 - the drop stands; the sink's own failure is its to report
            if logger is not None:
                logger.error(f"dropped response not recorded: {type(exc).__name__}: {exc}")
    return False


def _call_idempotent(client: Any, request: Any, timeout_s: float, what: str, *, attempts: int = 3,
                     logger: Any = None, sink: DropSink | None = None) -> Any:
    """Call a read-only service, asking again if no answer came (``attempts`` in all).

    ``wait_for_service`` returns as soon as the request path is matched; the
    server's response writer can still be discovering this client's reader,
    and a response sent before that match is lost (seen here: the first
    capture of a fresh client unanswered for 2 s, about 1 run in 20; and, on a
    loaded CI host, two in a row). Asking again is safe only because these
    calls change nothing; each retry is logged.

    A response carrying another mission's or request's ids is dropped (``correlated``) and counts as
    no answer: asked again while attempts remain, else ``BackendUnavailable``.
    """
    service = getattr(client, "srv_name", what)
    for attempt in range(1, attempts + 1):
        last = attempt == attempts
        try:
            response = wait_future(client.call_async(request), timeout_s, what)
        except HarnessTimeout:
            if last:
                raise
            if logger is not None:
                logger.warning(f"{what}: no answer within {timeout_s:.1f} s; asking again ({attempt + 1}/{attempts})")
            continue
        if correlated(response, request, service=service, call=what, logger=logger, sink=sink,
                      note="treated as no answer" if last else f"asking again ({attempt + 1}/{attempts})"):
            return response
    raise BackendUnavailable(f"{what}: every answer was for another mission or request (another graph on this "
                             f"ROS domain serves {service}?)", service=service)


class RosSnapshotPort:
    """Captures snapshots through the aggregator's ``capture`` service."""

    def __init__(self, node: Node, service: str, *, timeout_s: float = 2.0, on_dropped: DropSink | None = None) -> None:
        from ..srv import CaptureSnapshot

        self._srv_type = CaptureSnapshot
        self._on_dropped = on_dropped
        self._node = node
        self._client = node.create_client(CaptureSnapshot, service, callback_group=ReentrantCallbackGroup())
        self._retired: list[Any] = []
        self._timeout_s = timeout_s
        self._service = service
        self._logger = node.get_logger()

    def renew(self) -> None:
        """Ask through a new client from now on (new DDS endpoints, matched afresh).

        For a client whose requests keep going unanswered while the service is
        there. The old client is kept, unused, until ``destroy``: destroying an
        entity while its node's executor may be waiting on it is not safe.
        """
        self._retired.append(self._client)
        self._client = self._node.create_client(self._srv_type, self._service, callback_group=ReentrantCallbackGroup())

    def capture(self, *, reason: str, mission_id: str) -> WorldSnapshot:
        if not self._client.wait_for_service(timeout_sec=self._timeout_s):
            raise BackendUnavailable(f"snapshot service {self._service} is not available", service=self._service)
        req = self._srv_type.Request(mission_id=mission_id, reason=reason, request_id=new_request_id("capture"))
        resp = _call_idempotent(self._client, req, self._timeout_s, f"snapshot capture ({self._service})",
                                logger=self._logger, sink=self._on_dropped)
        if not resp.ok:
            raise BackendUnavailable(f"snapshot capture refused: {resp.error}", service=self._service)
        return cv.msg_to_snapshot(resp.snapshot)

    def destroy(self, node: Node) -> None:
        for client in (*self._retired, self._client):
            node.destroy_client(client)
        self._retired.clear()


class RosPlannerPort:
    """Asks the planner node for one model turn through ``plan_turn``."""

    def __init__(self, node: Node, service: str, *, timeout_s: float = 60.0, on_dropped: DropSink | None = None) -> None:
        from ..srv import PlanTurn

        self._srv_type = PlanTurn
        self._on_dropped = on_dropped
        self._logger = node.get_logger()
        self._client = node.create_client(PlanTurn, service, callback_group=ReentrantCallbackGroup())
        self._timeout_s = timeout_s
        self._service = service

    def next_turn(self, request: PlannerRequest) -> ModelResponse:
        from ..msg import ToolSpec

        if not self._client.wait_for_service(timeout_sec=min(5.0, self._timeout_s)):
            raise BackendUnavailable(f"planner service {self._service} is not available", service=self._service)
        tools = [
            ToolSpec(name=t["function"]["name"], description=t["function"]["description"],
                     parameters_json_schema=json.dumps(t["function"]["parameters"], sort_keys=True),
                     physical=t["function"]["name"] == "navigate_to")
            for t in request.tools
        ]
        req = self._srv_type.Request(mission_id=request.mission_id, model_turn_id=request.model_turn_id,
                                     turn_index=request.turn_index, context_json=json.dumps(request.context), tools=tools,
                                     request_id=new_request_id("turn"))
        resp = wait_future(self._client.call_async(req), self._timeout_s, "planner turn")
        # A model turn is not asked twice (it may cost a model call): an answer for another request is no answer.
        if not correlated(resp, req, service=self._service, call="planner turn", logger=self._logger,
                          sink=self._on_dropped, note="treated as no answer"):
            raise BackendUnavailable(f"planner turn: the answer from {self._service} was for another mission or "
                                     "request (another graph on this ROS domain?); not acted on", service=self._service)
        if not resp.ok:
            meta: dict[str, Any] = {}
            if resp.response_json:
                try:
                    meta = ModelResponse.model_validate_json(resp.response_json).meta
                except ValueError:
                    meta = {}
            raise ToolExecutionError(f"planner error: {resp.error}", meta=meta)
        return ModelResponse.model_validate_json(resp.response_json)

    def destroy(self, node: Node) -> None:
        node.destroy_client(self._client)


class RosVerifierPort:
    """The verifier node's ``verify`` service as the core's VerifierPort.

    Sends only the VerifyRequest (goal, contract, receipts, state version);
    an unreachable verifier or a refused request is an error, never a verdict.
    """

    def __init__(self, node: Node, service: str, *, timeout_s: float = 10.0, on_dropped: DropSink | None = None) -> None:
        from ..srv import Verify

        self._srv_type = Verify
        self._on_dropped = on_dropped
        self._logger = node.get_logger()
        self._client = node.create_client(Verify, service, callback_group=ReentrantCallbackGroup())
        self._timeout_s = timeout_s
        self._service = service
        self.name = service

    def verify(self, request: Any) -> tuple[Any, WorldSnapshot]:
        from ..core.completion import Verdict

        if not self._client.wait_for_service(timeout_sec=min(5.0, self._timeout_s)):
            raise BackendUnavailable(f"verifier service {self._service} is not available", service=self._service)
        req = self._srv_type.Request(mission_id=request.mission_id, request_id=new_request_id("verify"),
                                     request_json=request.model_dump_json())
        resp = _call_idempotent(self._client, req, self._timeout_s, f"verification ({self._service})", attempts=2,
                                logger=self._logger, sink=self._on_dropped)
        if not resp.ok:
            raise BackendUnavailable(f"verifier refused: {resp.error}", service=self._service)
        return Verdict.model_validate_json(resp.verdict_json), WorldSnapshot.model_validate_json(resp.snapshot_json)

    def destroy(self, node: Node) -> None:
        node.destroy_client(self._client)


def recovery_call_budget(advisor: str, llm: Mapping[str, Any] | None = None) -> tuple[float, int]:
    """``(timeout_s, attempts)`` for ``RosRecoveryPort`` given the recovery node's advisor.

    ``advisor`` is ``"none"`` or ``"llm"``; ``llm`` holds the advisor's
    ``LLMConfig`` keys (only ``timeout_s``, ``max_retries``,
    ``backoff_initial_s`` and ``backoff_max_s`` matter; missing ones take
    LLMConfig's defaults). With a model: one ask, waiting for every model
    attempt plus its backoff, with a few seconds to spare.
    """
    if advisor in ("", "none"):
        return 2.0, 2
    if advisor != "llm":
        raise UsageError(f"unknown recovery advisor {advisor!r} (none | llm)", advisor=advisor)
    from ..llm.client import LLMConfig

    defaults = LLMConfig.model_fields
    cfg = dict(llm or {})

    def value(key: str) -> float:
        return float(cfg[key]) if cfg.get(key) is not None else float(defaults[key].default)

    tries = int(value("max_retries")) + 1
    backoff = sum(min(value("backoff_initial_s") * 2.0 ** i, value("backoff_max_s")) for i in range(tries - 1))
    return tries * value("timeout_s") + backoff + 5.0, 1


class RosRecoveryPort:
    """The recovery node's ``decide`` service as the engine's recovery policy.

    If the node does not answer, the same policy decides in this process (the
    budgets are the mission's, passed with every call) and the decision says
    so: a dead recovery node never leaves a failure unanswered.
    """

    def __init__(self, node: Node, service: str, *, fallback: Any, timeout_s: float = 2.0, attempts: int = 2,
                 on_dropped: DropSink | None = None) -> None:
        """``timeout_s`` bounds each ask, ``attempts`` how many asks in all (see ``recovery_call_budget``).

        Without an advisor the node answers in milliseconds, so a short wait and
        a second ask cover a lost response. With a model advisor one ask must
        outlast the model's own bound: asking again would run the model twice.
        """
        from ..srv import Recover

        if timeout_s <= 0.0 or attempts < 1:
            raise UsageError("recovery port needs timeout_s > 0 and attempts >= 1", timeout_s=timeout_s, attempts=attempts)
        self._srv_type = Recover
        self._client = node.create_client(Recover, service, callback_group=ReentrantCallbackGroup())
        self._timeout_s = timeout_s
        self._attempts = attempts
        self._service = service
        self._fallback = fallback
        self._calls: list[Any] = []
        self._on_dropped = on_dropped
        self._logger = node.get_logger()
        self.mission_id = ""
        """The mission the next decisions are for (the recovery policy's ``decide`` does not carry it):
        set by the supervisor when it builds a mission's runner; sent and checked with every ask."""

    def drain_calls(self) -> list[Any]:
        """The recovery node's advisor's model calls since the last drain (``core.ports.ModelCallSource``)."""
        calls, self._calls = self._calls, []
        return calls

    def decide(self, failure: Any, *, spent: Any, context: Any = None, budgets: Any = None) -> Any:
        from ..core.recovery import RecoveryDecision

        body = json.dumps({"failure": failure.model_dump(mode="json"), "spent": {r.value: n for r, n in spent.items()},
                           "budgets": budgets.model_dump() if budgets is not None else None,
                           "context": context or {}}, default=str)
        why = ""
        if not self._client.wait_for_service(timeout_sec=min(1.0, self._timeout_s)):
            why = f"recovery service {self._service} is not available"
        else:
            try:
                req = self._srv_type.Request(mission_id=self.mission_id, request_id=new_request_id("recover"),
                                             request_json=body)
                resp = _call_idempotent(self._client, req, self._timeout_s, f"recovery ({self._service})",
                                        attempts=self._attempts, logger=self._logger, sink=self._on_dropped)
                if resp.ok:
                    try:
                        self._calls.extend(json.loads(resp.llm_calls_json or "[]"))
                    except ValueError:
                        pass  # a malformed list of records costs the records, not the decision
                    return RecoveryDecision.model_validate_json(resp.decision_json)
                why = f"recovery refused: {resp.error}"
            except (HarnessTimeout, BackendUnavailable) as exc:
                why = exc.message
        decision = self._fallback.decide(failure, spent=spent, context=context, budgets=budgets)
        return decision.model_copy(update={"advice": f"{why}; decided in the supervisor by the same policy"})

    def destroy(self, node: Node) -> None:
        node.destroy_client(self._client)


class Nav2NavigationPort:
    """Nav2 as the core's NavigationPort: every ``NavGoalKind``, each to its own interface.

    NavigateToPose (``action_name``) goes as it always has; NavigateThroughPoses, FollowWaypoints and the
    behaviours Spin, BackUp and Wait each go to their own action client, made on first use; CLEAR_COSTMAPS
    calls the costmaps' ``ClearEntireCostmap`` services and ends at once. A kind whose interface is
    configured empty, or whose type this robot's nav2_msgs lacks, is refused with a rejected ack.

    Feedback and results arrive per goal handle; every action's status topic is also watched (one map
    of goal id -> (action, status)), so ``lookup`` and ``adopt`` find a goal of any action, and events
    about goals this harness did not start reach the core too (which records them as uncorrelated and
    ignores them).
    """

    name = "nav2/navigate_to_pose"

    _SENT_KEPT = 1000
    """How many sent goals' kinds are remembered (for ``lookup`` / ``adopt`` / ``cancel``)."""
    _DISCOVERY_S = 2.0
    """The longest a send waits for its server to be discovered (less when the caller's bound is less)."""

    def __init__(self, node: Node, action_name: str = "navigate_to_pose", *, clock: Clock,
                 through_poses_action: str = "navigate_through_poses",
                 follow_waypoints_action: str = "follow_waypoints", spin_action: str = "spin",
                 backup_action: str = "backup", wait_action: str = "wait",
                 clear_global_costmap_service: str = "global_costmap/clear_entirely_global_costmap",
                 clear_local_costmap_service: str = "local_costmap/clear_entirely_local_costmap") -> None:
        """Names are Nav2's defaults, relative (resolved in ``node``'s namespace); an empty one: the robot
        serves no such interface, and goals of that kind are refused."""
        if NavigateToPose is None:
            raise BackendUnavailable("nav2_msgs is not installed")
        self._node = node
        self._clock = clock
        self._group = ReentrantCallbackGroup()
        self._names: dict[NavGoalKind, str] = {
            NavGoalKind.NAVIGATE_TO_POSE: action_name, NavGoalKind.NAVIGATE_THROUGH_POSES: through_poses_action,
            NavGoalKind.FOLLOW_WAYPOINTS: follow_waypoints_action, NavGoalKind.SPIN: spin_action,
            NavGoalKind.BACK_UP: backup_action, NavGoalKind.WAIT: wait_action}
        self._types: dict[NavGoalKind, Any] = {kind: NAV2_ACTION_TYPES.get(kind) for kind in self._names}
        self._costmap_names = {"global": clear_global_costmap_service, "local": clear_local_costmap_service}
        self._clients: dict[NavGoalKind, ActionClient] = {}
        self._costmap_clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._client = self._action_client(NavGoalKind.NAVIGATE_TO_POSE)
        self._events: queue.Queue[BackendEvent] = queue.Queue(maxsize=10_000)
        self._handles: dict[str, Any] = {}
        self._goals: dict[str, tuple[NavGoalKind, int]] = {}
        """Every goal the watched servers list now: goal id -> (its action, its last GoalStatus)."""
        self._sent: dict[str, NavGoalKind] = {}
        """Goals sent or tracked here -> their action (the last ``_SENT_KEPT``)."""
        qos = QoSProfile(depth=10, reliability=QoSReliabilityPolicy.RELIABLE,
                         durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
        self._status_subs: dict[NavGoalKind, Any] = {}
        self._status_sources: dict[NavGoalKind, LatchedSource] = {}
        for kind, name in self._names.items():
            if name and self._types[kind] is not None:
                topic = f"{name}/_action/status"
                self._status_subs[kind] = node.create_subscription(
                    GoalStatusArray, topic, lambda msg, k=kind: self._on_status(k, msg), qos,
                    callback_group=self._group)
                self._status_sources[kind] = LatchedSource(node, topic)

    def server_ready(self) -> bool:
        """The navigator's action server is discovered now (nothing is sent)."""
        return bool(self._client.server_is_ready())

    def _refusal(self, kind: NavGoalKind) -> str:
        """Why goals of ``kind`` cannot be sent here at all (empty: they can)."""
        if not self._names[kind]:
            return f"the robot serves no {kind.value} interface (its action name is configured empty)"
        if self._types[kind] is None:
            return f"this robot's nav2_msgs has no {_ACTION_TYPE_NAMES[kind]} action: the robot serves no {kind.value}"
        return ""

    def _action_client(self, kind: NavGoalKind) -> ActionClient:
        with self._lock:
            client = self._clients.get(kind)
            if client is None:
                client = self._clients[kind] = ActionClient(self._node, self._types[kind], self._names[kind],
                                                            callback_group=self._group)
            return client

    def _remember(self, goal_id: str, kind: NavGoalKind) -> None:
        with self._lock:
            self._sent.pop(goal_id, None)
            self._sent[goal_id] = kind
            while len(self._sent) > self._SENT_KEPT:
                del self._sent[next(iter(self._sent))]

    def send_goal(self, *, target: Pose2D, frame_id: str, timeout_s: float, goal_id: str = "",
                  goal: NavGoal | None = None) -> GoalAck:
        """Send one goal (``ports.NavigationPort.send_goal``). NavigateToPose: an absent navigator raises
        BackendUnavailable, as ever. Any other kind: refused (a rejected ack saying why) when its interface
        is configured empty, missing from nav2_msgs or not on the graph within the discovery bound."""
        kind = NavGoalKind.NAVIGATE_TO_POSE if goal is None else goal.kind
        if kind is NavGoalKind.CLEAR_COSTMAPS:
            assert goal is not None
            return self._clear_costmaps(goal, goal_id, timeout_s)
        refusal = self._refusal(kind)
        if refusal:
            return GoalAck(accepted=False, goal_id=goal_id, reason=refusal)
        client, name = self._action_client(kind), self._names[kind]
        if not client.wait_for_server(timeout_sec=min(timeout_s, self._DISCOVERY_S)):
            if kind is NavGoalKind.NAVIGATE_TO_POSE:
                raise BackendUnavailable(f"action server {name} is not available", action=name)
            return GoalAck(accepted=False, goal_id=goal_id,
                           reason=f"no {name} action server on the graph: the robot serves no {kind.value} now")
        # Events queued before this dispatch cannot be about the goal we are
        # about to send; drop them so an idle harness does not replay a backlog.
        self._drain()
        msg = cv.nav_goal_to_msg(goal if goal is not None else NavGoal(poses=(target,)), self._types[kind].Goal(),
                                 frame_id=frame_id, stamp=self._clock.now())
        if goal_id:
            self._remember(goal_id, kind)
        future = client.send_goal_async(msg, feedback_callback=self._on_feedback,
                                        goal_uuid=cv.hex_to_goal_id(goal_id) if goal_id else None)
        answered = threading.Event()
        future.add_done_callback(lambda _f: answered.set())
        if not answered.wait(timeout_s):
            # Not cancelled: a late acceptance still registers the goal's
            # handle, so the goal can be tracked and stopped once looked up.
            future.add_done_callback(lambda f, k=kind: self._register_late(k, f))
            raise HarnessTimeout(f"{kind.value} accept/reject: no answer within {timeout_s:.1f} s",
                                 what=f"{kind.value} accept/reject", timeout_s=timeout_s, goal_id=goal_id)
        if future.exception() is not None:
            raise future.exception()  # type: ignore[misc]
        handle = future.result()
        goal_id = cv.goal_id_to_hex(handle.goal_id)
        if not handle.accepted:
            return GoalAck(accepted=False, goal_id=goal_id, reason=f"goal rejected by {kind.value}")
        self._track(goal_id, handle, kind)
        return GoalAck(accepted=True, goal_id=goal_id)

    def _clear_costmaps(self, goal: NavGoal, goal_id: str, timeout_s: float) -> GoalAck:
        """Call each asked costmap's ClearEntireCostmap (both when ``goal.costmaps`` is empty), bounded by
        ``timeout_s``; accepted under the goal id, with a terminal result event already queued: succeeded
        when every service answered, else aborted with why. A service configured empty or not on the graph
        (within the discovery bound) refuses the goal, naming it; nothing is called then."""
        goal_id = goal_id or uuid.uuid4().hex
        which = tuple(dict.fromkeys(goal.costmaps or ("global", "local")))
        if ClearEntireCostmap is None:
            return GoalAck(accepted=False, goal_id=goal_id, reason="this robot's nav2_msgs has no ClearEntireCostmap "
                           "service: the robot serves no clear_costmaps")
        for costmap in which:
            if not self._costmap_names[costmap]:
                return GoalAck(accepted=False, goal_id=goal_id, reason=f"the robot serves no {costmap} costmap "
                               "clearing interface (its service name is configured empty)")
        clients = [(costmap, self._costmap_client(costmap)) for costmap in which]
        found_by = time.monotonic() + min(timeout_s, self._DISCOVERY_S)
        for costmap, client in clients:
            if not client.wait_for_service(timeout_sec=max(0.0, found_by - time.monotonic())):
                return GoalAck(accepted=False, goal_id=goal_id, reason=f"no {self._resolved(client.srv_name)} "
                               f"service on the graph (the {costmap} costmap's clearing)")
        self._drain()
        calls = [(client, client.call_async(ClearEntireCostmap.Request())) for _, client in clients]
        answered_by = time.monotonic() + timeout_s
        failures: list[str] = []
        for client, future in calls:
            name = self._resolved(client.srv_name)
            try:
                wait_future(future, max(0.0, answered_by - time.monotonic()), name)
            except HarnessTimeout:
                failures.append(f"{name} did not answer within {timeout_s:.1f} s")
            except Exception as exc:  # noqa: BLE001 - a failed call is this goal's outcome, not the caller's error
                failures.append(f"{name} failed: {type(exc).__name__}: {exc}")
        self._put(BackendEvent(goal_id=goal_id, type="result", status="aborted" if failures else "succeeded",
                               stamp=self._clock.now(),
                               detail={"error_code": 0, "error_msg": "; ".join(failures), "costmaps": list(which)}))
        return GoalAck(accepted=True, goal_id=goal_id)

    def _resolved(self, name: str) -> str:
        try:
            return str(self._node.resolve_service_name(name))
        except Exception:  # noqa: BLE001 - only for messages: the name as configured will do
            return name

    def _costmap_client(self, costmap: str) -> Any:
        with self._lock:
            client = self._costmap_clients.get(costmap)
            if client is None:
                client = self._costmap_clients[costmap] = self._node.create_client(
                    ClearEntireCostmap, self._costmap_names[costmap], callback_group=self._group)
            return client

    def lookup(self, goal_id: str, *, timeout_s: float) -> str | None:
        """The backend's status of ``goal_id`` from the actions' (latched) status topics.

        Waits up to ``timeout_s`` for the goal to appear on any of them; None when no server tracks it
        (never accepted, expired, or a restarted server). Raises BackendUnavailable when the server it
        would be on is not there to ask: the one it was sent to, or the navigator for a goal this port
        never sent.
        """
        for kind, source in self._status_sources.items():
            if source.gone():
                with self._lock:  # a restarted server: the dead one's goals describe nothing now
                    self._goals = {g: v for g, v in self._goals.items() if v[0] is not kind}
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                found = self._goals.get(goal_id)
            if found is not None:
                return GOAL_STATUS_NAMES.get(found[1], "unknown")
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        with self._lock:
            kind = self._sent.get(goal_id, NavGoalKind.NAVIGATE_TO_POSE)
            client = self._clients.get(kind, self._client)
        if not client.server_is_ready():
            raise BackendUnavailable(f"action server {self._names[kind]} is not available to look up {goal_id}",
                                     action=self._names[kind])
        return None

    def adopt(self, goal_id: str) -> None:
        """Track a goal found by lookup (its acceptance never reached us): results and cancel work as if we
        had it, on the client of the action whose status lists it."""
        with self._lock:
            if goal_id in self._handles:
                return
            found = self._goals.get(goal_id)
            kind = found[0] if found is not None else self._sent.get(goal_id, NavGoalKind.NAVIGATE_TO_POSE)
        refusal = self._refusal(kind)
        if refusal:
            raise BackendUnavailable(f"cannot adopt {goal_id}: {refusal}", action=self._names[kind])
        client = self._action_client(kind)
        # A client made just now: let it discover the server (bounded) so the result request is not lost.
        client.wait_for_server(timeout_sec=self._DISCOVERY_S)
        response = self._types[kind].Impl.SendGoalService.Response()
        response.accepted = True
        self._track(goal_id, ClientGoalHandle(client, cv.hex_to_goal_id(goal_id), response), kind)

    def _register_late(self, kind: NavGoalKind, future: Any) -> None:
        try:
            handle = future.result()
        except Exception:
            return
        if handle is not None and handle.accepted:
            self._track(cv.goal_id_to_hex(handle.goal_id), handle, kind)

    def _track(self, goal_id: str, handle: Any, kind: NavGoalKind) -> None:
        self._remember(goal_id, kind)
        with self._lock:
            if goal_id in self._handles:
                return
            self._handles[goal_id] = handle
        handle.get_result_async().add_done_callback(lambda f, gid=goal_id: self._on_result(gid, f))

    def poll(self, timeout_s: float) -> list[BackendEvent]:
        out: list[BackendEvent] = []
        try:
            out.append(self._events.get(timeout=max(0.0, timeout_s)))
        except queue.Empty:
            return out
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    def _put(self, event: BackendEvent) -> None:
        """Queue an event; when nobody polls for a long time, the oldest are dropped."""
        while True:
            try:
                self._events.put_nowait(event)
                return
            except queue.Full:
                try:
                    self._events.get_nowait()
                except queue.Empty:
                    pass

    def _drain(self) -> None:
        while True:
            try:
                self._events.get_nowait()
            except queue.Empty:
                return

    def cancel(self, goal_id: str, *, timeout_s: float) -> bool:
        with self._lock:
            handle = self._handles.get(goal_id)
            kind = self._sent.get(goal_id, NavGoalKind.NAVIGATE_TO_POSE)
        if handle is None:
            self._node.get_logger().warning(f"cancel {goal_id}: no live goal handle (already finished?)")
            return False
        try:
            resp = wait_future(handle.cancel_goal_async(), timeout_s, f"{kind.value} cancel")
        except Exception as exc:  # timeout or a dead server: the stop is not confirmed
            self._node.get_logger().warning(f"cancel {goal_id} not acknowledged: {exc}")
            return False
        ok = resp.return_code == 0 and len(resp.goals_canceling) > 0
        if not ok:
            self._node.get_logger().warning(f"cancel {goal_id} refused by the server (return code {resp.return_code})")
        return ok

    # -- callbacks (executor threads) --

    def _on_feedback(self, msg: Any) -> None:
        self._put(cv.nav_feedback_to_event(cv.goal_id_to_hex(msg.goal_id), msg.feedback, stamp=self._clock.now()))

    def _on_result(self, goal_id: str, future: Any) -> None:
        try:
            res = future.result()
        except Exception:  # the server died or the client was destroyed: no evidence, nothing to report
            return
        self._put(cv.nav_result_to_event(goal_id, res.result, status=GOAL_STATUS_NAMES.get(res.status, "unknown"),
                                         stamp=self._clock.now()))
        with self._lock:
            self._handles.pop(goal_id, None)

    def _on_status(self, kind: NavGoalKind, msg: GoalStatusArray) -> None:
        self._status_sources[kind].on_message()
        # The array lists every goal the server still tracks; remembering only
        # those keeps the map bounded.
        current = {cv.goal_id_to_hex(st.goal_info.goal_id): st.status for st in msg.status_list}
        with self._lock:
            previous = {g: v[1] for g, v in self._goals.items() if v[0] is kind}
            goals = {g: v for g, v in self._goals.items() if v[0] is not kind}
            goals.update((g, (kind, st)) for g, st in current.items())
            self._goals = goals
        for gid, status in current.items():
            if previous.get(gid) != status:
                self._put(BackendEvent(goal_id=gid, type="status", status=GOAL_STATUS_NAMES.get(status, "unknown"),
                                       stamp=self._clock.now()))

    def destroy(self) -> None:
        for sub in self._status_subs.values():
            self._node.destroy_subscription(sub)
        self._status_subs.clear()
        for client in self._costmap_clients.values():
            self._node.destroy_client(client)
        self._costmap_clients.clear()
        for action_client in self._clients.values():
            action_client.destroy()
        self._clients.clear()


class _PendingAck:
    """One speak/send_message call waiting for its acknowledgement."""

    __slots__ = ("done", "ack")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ack: dict[str, Any] | None = None


def _parse_ack(data: str) -> dict[str, Any] | None:
    """An acknowledgement's fields, or None when the message is not one.

    Kept: ``by``, ``at``, ``sha256`` (required), ``message_id`` and ``to``
    (messages), ``note`` (free text from the receiver: shown, never evidence).
    """
    try:
        raw = json.loads(data)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    by, at, digest = raw.get("by"), raw.get("at"), raw.get("sha256")
    if not (isinstance(by, str) and by and isinstance(digest, str) and digest
            and isinstance(at, (int, float)) and not isinstance(at, bool)):
        return None
    ack: dict[str, Any] = {"by": by, "at": float(at), "sha256": digest}
    for key in ("message_id", "to", "note"):
        if isinstance(raw.get(key), str):
            ack[key] = raw[key]
    return ack


class RosRobotIO:
    """Camera, speaker and message outbox of the robot, over topics.

    ``speak`` and ``send_message`` publish, then wait (at most
    ``ack_timeout_s``) for the receiver's acknowledgement on
    ``<topic>/ack``: a speech ack is matched by the sha256 of the text, a
    message ack by its ``message_id``. The result carries ``ack`` only when one
    arrived; otherwise ``ack_error`` says why (the payload may still have gone
    out, nobody confirmed it). A message ack whose sha256 differs from what was
    sent is kept as it is, for the verifier to reject. The ack subscriptions
    are made once here; their callbacks run on other executor threads while
    the caller waits.

    More cameras (issue 18's camera providers): ``use_camera(topic)`` picks the camera the next
    ``capture_image`` reads by its image topic ("" the configured one); a topic not read before is
    subscribed then, and that capture waits (at most ``max_frame_age_s``) for its first frame.
    """

    class _Camera:
        """One more camera read: its subscription and its latest frame (with when it came)."""

        def __init__(self, clock: Clock) -> None:
            self._clock = clock
            self.sub: Any = None
            self.frame: tuple[Image, float] | None = None

        def on_image(self, msg: Image) -> None:
            self.frame = (msg, self._clock.now())

    def __init__(self, node: Node, *, clock: Clock, ids: IdGenerator, artifacts_dir: Path, camera_topic: str,
                 speech_topic: str, message_topic: str, max_frame_age_s: float = 2.0,
                 speech_ack_topic: str = "", message_ack_topic: str = "", ack_timeout_s: float = 2.0) -> None:
        if ack_timeout_s <= 0.0:
            raise UsageError("ack_timeout_s must be positive", ack_timeout_s=ack_timeout_s)
        self._clock = clock
        self._ids = ids
        self._dir = artifacts_dir
        self._max_age = max_frame_age_s
        self._frame: tuple[Image, float] | None = None
        self._node = node
        self._ack_timeout_s = ack_timeout_s
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], list[_PendingAck]] = {}
        group = self._group = ReentrantCallbackGroup()
        self._sub = node.create_subscription(Image, camera_topic, self._on_image, 2, callback_group=group)
        self._camera_topic = camera_topic
        self._cameras: dict[str, RosRobotIO._Camera] = {}
        """The other cameras read so far, by image topic."""
        self._next_camera = ""
        self._speech = node.create_publisher(String, speech_topic, 10)
        self._messages = node.create_publisher(String, message_topic, 10)
        self._speech_topic = speech_topic
        self._message_topic = message_topic
        self.speech_ack_topic = speech_ack_topic or f"{speech_topic}/ack"
        self.message_ack_topic = message_ack_topic or f"{message_topic}/ack"
        self._ack_subs = [
            node.create_subscription(String, self.speech_ack_topic, lambda m: self._on_ack("speech", m), 50,
                                     callback_group=group),
            node.create_subscription(String, self.message_ack_topic, lambda m: self._on_ack("message", m), 50,
                                     callback_group=group),
        ]

    def _on_image(self, msg: Image) -> None:
        self._frame = (msg, self._clock.now())

    def _on_ack(self, channel: str, msg: String) -> None:
        ack = _parse_ack(msg.data)
        if ack is None:
            self._node.get_logger().warning(f"ignored a malformed {channel} acknowledgement: {msg.data[:200]!r}")
            return
        key = (channel, ack["sha256"] if channel == "speech" else ack.get("message_id", ""))
        with self._lock:
            waiters = self._pending.get(key)
            if not waiters:
                return  # not ours, or it came after its sender stopped waiting
            waiter = waiters.pop(0)
            if not waiters:
                del self._pending[key]
            waiter.ack = ack  # under the lock: a waiter that has left the table is never written to
        waiter.done.set()

    def _publish_and_wait(self, channel: str, key: str, publisher: Any, data: str) -> dict[str, Any]:
        """Publish ``data`` and wait (bounded) for its ack: ``{"ack": ...}`` or ``{"ack_error": ...}``."""
        deadline = time.monotonic() + self._ack_timeout_s
        waiter = _PendingAck()
        with self._lock:
            self._pending.setdefault((channel, key), []).append(waiter)
        subscribers = 0
        try:
            # A publisher not yet matched to any reader would drop the payload: wait
            # for discovery within the same bound.
            while publisher.get_subscription_count() == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            subscribers = publisher.get_subscription_count()
            publisher.publish(String(data=data))
            waiter.done.wait(max(0.0, deadline - time.monotonic()))
        finally:
            with self._lock:
                waiters = self._pending.get((channel, key), [])
                if waiter in waiters:
                    waiters.remove(waiter)
                if not waiters:
                    self._pending.pop((channel, key), None)
        if waiter.ack is not None:
            return {"ack": waiter.ack}
        why = f"no acknowledgement on {self.speech_ack_topic if channel == 'speech' else self.message_ack_topic} " \
              f"within {self._ack_timeout_s:.1f} s"
        if subscribers == 0:
            why += f" (nobody subscribes to {publisher.topic_name})"
        return {"ack_error": why}

    def use_camera(self, topic: str) -> None:
        """The camera the next ``capture_image`` reads, by its image topic ("" or the configured topic: the
        configured camera), for that one capture."""
        with self._lock:
            if topic and topic != self._camera_topic and topic not in self._cameras:
                camera = self._Camera(self._clock)
                camera.sub = self._node.create_subscription(Image, topic, camera.on_image, 2,
                                                            callback_group=self._group)
                self._cameras[topic] = camera
            self._next_camera = topic

    def capture_image(self, *, label: str) -> ArtifactRef:
        with self._lock:
            topic, self._next_camera = self._next_camera, ""
            camera = self._cameras.get(topic)
        if camera is None:
            frame, topic_name = self._frame, self._sub.topic_name
        else:  # a camera subscribed by use_camera: its first frame may still be on its way
            deadline = time.monotonic() + self._max_age
            while camera.frame is None and time.monotonic() < deadline:
                time.sleep(0.01)
            frame, topic_name = camera.frame, camera.sub.topic_name
        if frame is None:
            raise ToolExecutionError("no camera frame has been received", topic=topic_name)
        msg, received = frame
        age = self._clock.now() - received
        if age > self._max_age:
            raise ToolExecutionError(f"the latest camera frame is {age:.1f} s old (max {self._max_age} s)")
        if msg.encoding not in ("rgb8", "bgr8") or msg.width == 0 or msg.height == 0:
            raise ToolExecutionError(f"unsupported image encoding {msg.encoding!r}")
        png = encode_png(bytes(msg.data), msg.width, msg.height, msg.step, bgr=msg.encoding == "bgr8")
        self._dir.mkdir(parents=True, exist_ok=True)
        path = self._dir / f"{self._ids.new('img')}.png"
        path.write_bytes(png)
        if label:
            path.with_suffix(".json").write_text(json.dumps({"label": label, "stamp": cv.stamp_to_float(msg.header.stamp)}))
        return ArtifactRef(uri=path.resolve().as_uri(), sha256=hashlib.sha256(png).hexdigest(),
                           media_type="image/png", size_bytes=len(png))

    def speak(self, *, text: str) -> dict[str, Any]:
        digest = hashlib.sha256(text.encode()).hexdigest()
        spoken_at = self._clock.now()
        outcome = self._publish_and_wait("speech", digest, self._speech, text)
        return {"spoken_at": spoken_at, "topic": self._speech_topic, "text_sha256": digest, **outcome}

    def send_message(self, *, to: str, text: str, artifacts: list[ArtifactRef]) -> dict[str, Any]:
        message_id = self._ids.new("msg")
        body = {"message_id": message_id, "to": to, "text": text, "artifacts": [a.model_dump() for a in artifacts],
                "sent_at": self._clock.now()}
        data = json.dumps(body, sort_keys=True)
        outbox = self._dir / "outbox"
        outbox.mkdir(parents=True, exist_ok=True)
        (outbox / f"{message_id}.json").write_text(data)
        outcome = self._publish_and_wait("message", message_id, self._messages, data)
        result: dict[str, Any] = {"message_id": message_id, "sent_at": body["sent_at"], "to": to,
                                  "topic": self._message_topic, "sha256": hashlib.sha256(data.encode()).hexdigest(),
                                  "outbox": str(outbox / f"{message_id}.json"), **outcome}
        if "ack" in outcome:
            result["delivered_at"] = outcome["ack"]["at"]
        return result

    def destroy(self) -> None:
        with self._lock:
            waiters = [w for ws in self._pending.values() for w in ws]
            self._pending.clear()
        for w in waiters:
            w.done.set()  # no ack: the callers return with ack_error at once
        with self._lock:
            cameras, self._cameras = list(self._cameras.values()), {}
        for sub in (self._sub, *self._ack_subs, *(c.sub for c in cameras)):
            self._node.destroy_subscription(sub)
        self._node.destroy_publisher(self._speech)
        self._node.destroy_publisher(self._messages)


class RosFeasibilityPort:
    """Readiness and feasibility, asked of Nav2 right before each navigation (``ports.FeasibilityPort``):
    ``<node>/get_state`` of each lifecycle node, a ``ComputePathToPose`` dry run on the planner server
    (``use_start`` with the fresh pose, as ``BasicNavigator.getPath`` does), and ``GetCosts`` of the goal
    cell on the global costmap. A server not on the graph is ABSENT (the check says it was not applicable);
    one that is there but silent past ``probe_timeout_s`` is UNANSWERED (the check fails)."""

    def __init__(self, node: Node, *, planner_action: str = "compute_path_to_pose",
                 cost_service: str = "global_costmap/get_cost_global_costmap", planner_id: str = "") -> None:
        from lifecycle_msgs.srv import GetState

        self._node = node
        self._get_state = GetState
        self._group = ReentrantCallbackGroup()
        self._states: dict[str, Any] = {}
        self._planner_id = planner_id
        self._planner = (ActionClient(node, ComputePathToPose, planner_action, callback_group=self._group)
                         if ComputePathToPose is not None and planner_action else None)
        self._planner_name = planner_action
        self._costs = (node.create_client(GetCosts, cost_service, callback_group=self._group)
                       if GetCosts is not None and cost_service else None)
        self._cost_name = cost_service

    def probe(self, *, pre: Any, start: Pose2D | None, goal: Pose2D | None, frame_id: str) -> Any:
        from ..core.preconditions import Feasibility

        began = time.monotonic()
        timeout = float(pre.probe_timeout_s)
        lifecycle = tuple(self._lifecycle(node, timeout) for node in pre.lifecycle_active)
        path = cost = None
        if goal is not None and start is not None:
            if pre.path_feasible:
                path = self._path(start, goal, frame_id, timeout)
            if pre.goal_cell_free:
                cost = self._cost(goal, frame_id, timeout)
        return Feasibility(lifecycle=lifecycle, path=path, goal_cost=cost, duration_s=time.monotonic() - began)

    def _lifecycle(self, node_name: str, timeout: float) -> Any:
        from ..core.preconditions import LifecycleProbe, ProbeStatus

        client = self._states.get(node_name)
        if client is None:
            client = self._states[node_name] = self._node.create_client(
                self._get_state, f"{node_name}/get_state", callback_group=self._group)
        if not client.wait_for_service(timeout_sec=min(timeout, 1.0)):
            return LifecycleProbe(node=node_name, status=ProbeStatus.UNANSWERED,
                                  error=f"{client.srv_name} is not available")
        try:
            resp = wait_future(client.call_async(self._get_state.Request()), timeout, client.srv_name)
        except HarnessTimeout as exc:
            return LifecycleProbe(node=node_name, status=ProbeStatus.UNANSWERED, error=exc.message)
        return LifecycleProbe(node=node_name, state=resp.current_state.label)

    def _path(self, start: Pose2D, goal: Pose2D, frame_id: str, timeout: float) -> Any:
        from ..core.preconditions import PathProbe, ProbeStatus

        if self._planner is None:
            return PathProbe(status=ProbeStatus.ABSENT, error="nav2_msgs has no ComputePathToPose here")
        if not self._planner.server_is_ready():
            return PathProbe(status=ProbeStatus.ABSENT, error=f"no {self._planner_name} action server")
        request = ComputePathToPose.Goal(goal=_stamped(self._node, goal, frame_id),
                                         start=_stamped(self._node, start, frame_id),
                                         planner_id=self._planner_id, use_start=True)
        try:
            handle = wait_future(self._planner.send_goal_async(request), timeout, f"{self._planner_name} goal")
            if handle is None or not handle.accepted:
                return PathProbe(status=ProbeStatus.UNANSWERED, error="the planner server rejected the dry run")
            result = wait_future(handle.get_result_async(), timeout, f"{self._planner_name} result")
        except HarnessTimeout as exc:
            return PathProbe(status=ProbeStatus.UNANSWERED, error=exc.message)
        r = result.result
        poses = list(r.path.poses)
        length = sum(_hop(a, b) for a, b in zip(poses, poses[1:])) if poses else None
        planning = r.planning_time.sec + r.planning_time.nanosec * 1e-9
        ok = result.status == GoalStatus.STATUS_SUCCEEDED and r.error_code == 0 and bool(poses)
        return PathProbe(ok=ok, length_m=length, poses=len(poses), error_code=int(r.error_code),
                         error=str(r.error_msg) or ("" if ok else GOAL_STATUS_NAMES.get(result.status, "")),
                         planning_time_s=planning)

    def _cost(self, goal: Pose2D, frame_id: str, timeout: float) -> Any:
        from ..core.preconditions import CostProbe, ProbeStatus

        if self._costs is None:
            return CostProbe(status=ProbeStatus.ABSENT, error="nav2_msgs has no GetCosts here")
        if not self._costs.service_is_ready():
            return CostProbe(status=ProbeStatus.ABSENT, error=f"no {self._cost_name} service")
        request = GetCosts.Request(use_footprint=False, poses=[_stamped(self._node, goal, frame_id)])
        try:
            resp = wait_future(self._costs.call_async(request), timeout, self._cost_name)
        except HarnessTimeout as exc:
            return CostProbe(status=ProbeStatus.UNANSWERED, error=exc.message)
        if not resp.success or len(resp.costs) != 1:
            return CostProbe(status=ProbeStatus.UNANSWERED,
                             error=f"{self._cost_name} answered success={resp.success} with {len(resp.costs)} costs")
        return CostProbe(cost=float(resp.costs[0]))

    def destroy(self) -> None:
        for client in self._states.values():
            self._node.destroy_client(client)
        self._states.clear()
        if self._costs is not None:
            self._node.destroy_client(self._costs)
        if self._planner is not None:
            self._planner.destroy()


def _stamped(node: Node, pose: Pose2D, frame_id: str) -> PoseStamped:
    """``pose`` in ``frame_id``, stamped now by the node's clock (sim time when the node uses it)."""
    return cv.pose2d_to_stamped(pose, frame_id, node.get_clock().now().nanoseconds * 1e-9)


def _hop(a: Any, b: Any) -> float:
    pa, pb = a.pose.position, b.pose.position
    return float(((pb.x - pa.x) ** 2 + (pb.y - pa.y) ** 2) ** 0.5)
