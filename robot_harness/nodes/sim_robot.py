"""ROS adapter for the simulated quadruped: a stand-in for the robot plus Nav2.

``SimRobot`` owns eight nodes around one ``SimWorld``:

* ``sim_robot`` (plain node): its publishers carry the robot's sensors
  (localization ``amcl_pose``, ``odom``, ``battery_state``,
  ``camera/image_raw``) plus two sim-only truth channels (``~/ground_truth``,
  ``~/goal_log``) that the harness under test must never use. A 50 Hz tick
  steps the world by the elapsed ROS clock time and publishes every stream
  that is due.
  It also stands in for the robot's speaker and message outbox: it listens on
  the speech and message topics and acknowledges each payload on
  ``<topic>/ack`` (std_msgs/String JSON: ``by``, ``at``, ``sha256`` of the
  exact payload, and ``message_id``/``to`` for messages), the receiving side
  of the delivery contract that ``RosRobotIO`` waits for.
* ``bt_navigator`` (lifecycle node): serves ``navigate_to_pose`` and
  ``navigate_through_poses`` exactly where Nav2 serves them, and answers
  ``bt_navigator/get_state`` as ``nav2_simple_commander`` expects.
* ``waypoint_follower`` (lifecycle node): serves ``follow_waypoints``
  (FollowWaypoints; ``stop_on_failure`` is a ``sim_robot`` parameter, see
  ``_WaypointFollower``).
* ``behavior_server`` (lifecycle node): serves ``spin``, ``backup`` and
  ``wait``, Nav2's default behaviours (see ``_BehaviorServer``).
* ``amcl`` (lifecycle node): the lifecycle face of the sim's localization, so
  ``BasicNavigator.waitUntilNav2Active()`` (localizer ``amcl``) finds it
  active; once configured it takes ``initialpose`` and relocalizes the world
  (``SimWorld.relocalize``: only the estimate jumps, as in Nav2). See
  ``_Amcl`` for how far it follows AMCL, and where it does not.
* ``planner_server`` (lifecycle node): serves ``compute_path_to_pose``
  (nav2_msgs/action/ComputePathToPose) from ``SimWorld.plan_path``, as
  Nav2's planner server does (see ``_PlannerServer``).
* ``global_costmap`` (lifecycle node, in the sub-namespace
  ``global_costmap`` as Nav2's planner server puts its costmap): serves
  ``global_costmap/get_cost_global_costmap`` (nav2_msgs/srv/GetCosts) from
  ``SimWorld.cost_at`` and ``global_costmap/clear_entirely_global_costmap``
  (nav2_msgs/srv/ClearEntireCostmap) from ``SimWorld.clear_costmaps`` (see
  ``_GlobalCostmap``).
* ``local_costmap`` (lifecycle node, in the sub-namespace ``local_costmap``
  as Nav2's controller server puts its costmap): serves
  ``local_costmap/clear_entirely_local_costmap`` (see ``_Costmap``).

Navigation providers (``SimConfig.providers``, the ``providers_json`` parameter; issue 18): for each
namespace ``ns`` there, a second navigation stack on the same body, as nav2_bringup brings one up in a
namespace: its own ``bt_navigator``, ``waypoint_follower`` and ``behavior_server`` in the sub-namespace
``ns`` of the robot's (pinned there as the costmaps are), serving ``ns/navigate_to_pose``,
``ns/navigate_through_poses``, ``ns/follow_waypoints``, ``ns/spin``, ``ns/backup`` and ``ns/wait`` exactly
as the robot's own servers do (the same ``_ActionHost`` code: status, feedback, results, refusals), each
goal entering the world tagged with ``ns`` (``SimWorld.submit_*``'s ``provider``): at that stack's speed,
under its faults. The body, its planner_server, costmaps and localization stay one; ``navigator_inactive``
holds only the robot's own bt_navigator.

More cameras (``SimConfig.cameras``, the ``cameras_json`` parameter): each publishes the built-in camera's
frame on its own topic (relative, so under the robot's namespace) at its own rate, until its
``camera_dead`` fault starts (``SimWorld.camera_live``).

Every action goal mirrors one world goal (``_ActionHost``): the world decides
acceptance, motion, feedback values and the end, with Nav2's error codes
(``GoalView.error_code``: the planner's for a goal without a path, 105 for a
``stuck`` robot, 603 for FollowWaypoints stopping on a missed waypoint, a
behaviour's own), and keeps the truth of every route's waypoints
(``WaypointView.reached_t``), which a ``skip_waypoint`` fault may contradict.

The world's readiness faults show on these surfaces: ``high_covariance`` in
the covariance ``amcl_pose`` carries (``SimWorld.pose_covariance``), and
``navigator_inactive`` in bt_navigator's lifecycle state: while it holds the
tick deactivates bt_navigator (the running goal aborts, ``get_state`` says
inactive, goals are rejected as Nav2's inactive action server rejects them)
and activates it again when it ends. A goal without a path (a map's obstacle,
``no_path``) is accepted and aborted by the world; its result carries the
planner's ComputePathToPose error code and message, as Nav2's bt_navigator
passes its planner's error on.

Every name is relative, so the whole robot moves under a namespace
(``SimRobot(namespace=...)`` in-process, ``--ros-args -r __ns:=/x`` for the
executable; both apply to all eight nodes) and resolves, at the root, to the
names it always had (``/amcl_pose``, ``/sim_robot/ground_truth``, ...). Each
node pins its own name with a node-local remap, so a launch ``name=``
(``-r __node:=NAME``, a global remap) renames none of them: ``~/`` topics stay
under ``sim_robot`` and the parameter file's ``sim_robot:`` section keeps
applying.

The pose is published whatever ``amcl``'s lifecycle state (Nav2's AMCL
publishes nothing until it is active and has an initial pose): the sim's
localization is initialised from ``start`` and always on, which is what the
harness's own tests rely on (``autostart:=false`` with only ``bt_navigator``
activated still gives a pose). With ``autostart`` (the default) ``amcl`` is
active from the start anyway, like an AMCL with ``set_initial_pose: true``.

All world access goes through one lock; the world itself stays single-threaded
and ROS-free. Each action's execute callback blocks a worker thread for the
whole goal, and a goal callback under an ``ack_delay`` fault blocks one while
it holds the acceptance back; the action servers sit in reentrant callback
groups, so the executor needs at least ``MIN_EXECUTOR_THREADS`` threads (one
per concurrently running goal or held acceptance, plus requests; the world
runs one goal at a time, so at most two execute callbacks overlap, during a
preemption).

Faults of the robot's outside are decided by the world and carried out here,
as ``robot_harness.eval.simports`` carries them out in-process: while
``SimWorld.pose_silent`` holds (``pose_dropout``) nothing is published on the
pose topic; a goal the world sends itself (``external_goal``) preempts the
running goal, whose ROS goal then ends ABORTED as Nav2 ends a preempted goal,
and the sim node sends it to ``navigate_to_pose`` as another client would
(tagged ``EXTERNAL_GOAL_TAG`` in ``behavior_tree``), so the navigator's status
and feedback list it the way Nav2's list every client's goals.

With ``truth_log_path`` set, the sim also appends ground truth to a JSON-lines
file (see ``_TruthLog``) that survives the process being killed.

The tick runs on its own thread rather than as an executor timer, so the
publishing schedule does not depend on how busy the executor is. The executor
is the harness's MultiThreadedExecutor (:mod:`robot_harness.nodes.executors`):
rclpy's own re-submits a callback that is queued but not yet started on every
loop without waiting (ros2/rclpy#1452), a busy loop that starved everything in
the process (measured: amcl_pose fell from 20 Hz to 1-3 Hz while the process
burned a full core). The executor only serves requests (goals, cancels,
lifecycle, parameters).
"""
from __future__ import annotations

import enum
import functools
import hashlib
import json
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import rclpy
from builtin_interfaces.msg import Duration as DurationMsg
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import PoseStamped, PoseWithCovariance, PoseWithCovarianceStamped, Quaternion
from nav2_msgs.action import (BackUp, ComputePathToPose, FollowWaypoints, NavigateThroughPoses, NavigateToPose, Spin,
                              Wait)
from nav2_msgs.msg import WaypointStatus
from nav2_msgs.srv import ClearEntireCostmap, GetCosts
from nav_msgs.msg import Odometry
from nav_msgs.msg import Path as PathMsg
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_system_default
from rcl_interfaces.msg import ParameterDescriptor
from sensor_msgs.msg import BatteryState, Image
from std_msgs.msg import String

from robot_harness.core.errors import HarnessError, ScenarioError, UsageError
from robot_harness.core.nav_goals import NavGoalKind, WaypointState
from robot_harness.core.records import Pose2D
from robot_harness.nodes._lifecycle import HarnessLifecycleNode
from robot_harness.nodes._util import ActionClient
from robot_harness.nodes._util import autostart as autostart_node
from robot_harness.nodes.executors import MultiThreadedExecutor
from robot_harness.sim.world import (
    COST_LETHAL,
    COST_NO_INFORMATION,
    ExternalGoalFault,
    GoalDecision,
    GoalEvent,
    GoalEventType,
    GoalStatus,
    GoalView,
    PlanErrorCode,
    PlanResult,
    SimConfig,
    SimWorld,
    WaypointView,
    parse_faults,
)

__all__ = ["DieMode", "SimRobot", "MIN_EXECUTOR_THREADS", "SPEAKER_ID", "OUTBOX_ID", "EXTERNAL_GOAL_TAG",
           "PLANNER_ID", "COSTMAP_NAMESPACE", "GET_COSTS_SERVICE", "LOCAL_COSTMAP_NAMESPACE", "MAX_ROUTE_POSES",
           "main"]

MIN_EXECUTOR_THREADS = 5
"""Two goals overlapping during a preemption, one held acceptance (``ack_delay``), plus a request."""

TICK_RATE_HZ = 50.0
"""The lowest tick rate; the tick runs faster when a stream must (up to MAX_TICK_RATE_HZ)."""
MAX_TICK_RATE_HZ = 1000.0
GROUND_TRUTH_RATE_HZ = 10.0
BATTERY_RATE_HZ = 1.0
FEEDBACK_PERIOD_S = 0.1
_EXECUTE_POLL_S = 0.02
"""Upper bound on each wait inside the execute callback (and so on its reaction time)."""
_DESTROY_WAIT_S = 2.0
_TICK_BUDGET_OVERRUN_S = 0.5
"""A tick this late resyncs its schedule instead of firing a burst of catch-up ticks."""
CAMERA_WIDTH = 64
CAMERA_HEIGHT = 48
DIE_EXIT_CODE = 3
SPEAKER_ID = "sim_robot/speaker"
"""``by`` of a speech acknowledgement."""
OUTBOX_ID = "sim_robot/outbox"
"""``by`` of a message acknowledgement."""
EXTERNAL_GOAL_TAG = "sim_robot/external_goal/"
"""``behavior_tree`` of the ROS goal that carries world goal N of an ``external_goal`` fault: the tag, then N."""
PLANNER_ID = "GridBased"
"""The planner_server's one planner (Nav2's default id); ``planner_id`` "" means it too, as in Nav2."""
COSTMAP_NAMESPACE = "global_costmap"
"""The costmap node's sub-namespace and name (Nav2: ``Costmap2DROS("global_costmap", <planner's namespace>)``)."""
GET_COSTS_SERVICE = "get_cost_global_costmap"
"""Nav2's ``"get_cost_" + get_name()``, in the costmap's namespace: ``global_costmap/get_cost_global_costmap``."""
LOCAL_COSTMAP_NAMESPACE = "local_costmap"
"""The local costmap node's sub-namespace and name (Nav2: ``Costmap2DROS("local_costmap", <controller's namespace>)``):
it serves ``local_costmap/clear_entirely_local_costmap``, as the global one ``global_costmap/clear_entirely_...``."""
_PATH_SPACING_M = 0.1
"""Pose spacing of a served path without a map (with one: its resolution, as Nav2's grid planners give)."""

_Result = NavigateToPose.Result


class DieMode(str, enum.Enum):
    """What the adapter does when the world's ``die`` fault fires."""

    EXIT = "exit"
    """The process calls ``os._exit(3)``: the realistic case for the standalone executable."""
    SILENT = "silent"
    """Keep the process, go quiet: for in-process bring-up and tests.

    No topic is published again and the running goal never gets a result or
    feedback; new goals and cancel requests are refused at once. (A true
    non-answer is not possible: rclpy cannot destroy an action server under a
    spinning executor, ros2/rclpy#1385, and a never-finishing goal callback
    busy-loops the executor.) ``bt_navigator/get_state`` keeps answering.
    """


# --------------------------------------------------------------------------- message helpers
# Private to the sim: the harness's own conversions live in its conversions module.


def _yaw_to_quaternion(yaw: float) -> Quaternion:
    q = Quaternion()
    q.z = math.sin(yaw / 2.0)
    q.w = math.cos(yaw / 2.0)
    return q


def _time_msg(ns: int) -> TimeMsg:
    return TimeMsg(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _duration_msg(seconds: float) -> DurationMsg:
    ns = max(0, int(round(seconds * 1e9)))
    return DurationMsg(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _pose_stamped(pose: Pose2D, stamp_ns: int, frame_id: str = "map") -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = frame_id
    msg.header.stamp = _time_msg(stamp_ns)
    msg.pose.position.x = pose.x
    msg.pose.position.y = pose.y
    msg.pose.orientation = _yaw_to_quaternion(pose.yaw)
    return msg


def _msg_to_pose(msg: PoseStamped | PoseWithCovariance) -> Pose2D:
    """The planar pose of a ``PoseStamped`` or a ``PoseWithCovariance`` (both hold a ``pose``)."""
    q = msg.pose.orientation
    yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
    return Pose2D(x=msg.pose.position.x, y=msg.pose.position.y, yaw=yaw)


# --------------------------------------------------------------------------- parameters

_DYNAMIC = ParameterDescriptor(dynamic_typing=True)
"""Numbers may arrive as int or double from launch files; pydantic does the checking."""


def _parameter_defaults(
    config: SimConfig,
    die_mode: DieMode,
    pose_topic: str,
    autostart: bool,
    truth_log_path: str,
    speech_topic: str,
    message_topic: str,
) -> dict[str, Any]:
    faults = [f.model_dump(mode="json", exclude_none=True) for f in config.faults]
    return {
        "start.x": config.start.x,
        "start.y": config.start.y,
        "start.yaw": config.start.yaw,
        "speed": config.speed,
        "yaw_rate": config.yaw_rate,
        "pose_rate_hz": config.pose_rate_hz,
        "odom_rate_hz": config.odom_rate_hz,
        "camera_rate_hz": config.camera_rate_hz,
        "battery_start": config.battery_start,
        "battery_drain_per_m": config.battery_drain_per_m,
        "faults_json": json.dumps(faults),
        "map_json": config.map.model_dump_json() if config.map is not None else "",
        "providers_json": json.dumps({ns: p.model_dump(mode="json", exclude_none=True)
                                      for ns, p in config.providers.items()}),
        "cameras_json": json.dumps({topic: c.model_dump(mode="json", exclude_none=True)
                                    for topic, c in config.cameras.items()}),
        "seed": config.seed,
        "stop_on_failure": config.stop_on_failure,
        "pose_topic": pose_topic,
        "autostart": autostart,
        "die_mode": die_mode.value,
        "truth_log_path": truth_log_path,
        "speech_topic": speech_topic,
        "message_topic": message_topic,
    }


@dataclass(frozen=True)
class _Settings:
    config: SimConfig
    pose_topic: str
    autostart: bool
    die_mode: DieMode
    truth_log_path: str
    speech_topic: str
    message_topic: str


def _parse_map(text: str) -> Any:
    """``map_json``: "" for no map, else a ``MapConfig`` as JSON (``SimConfig.from_data`` validates it)."""
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ScenarioError(f"invalid sim config: map_json is not JSON: {exc}", map_json=text[:200]) from exc


def _parse_object(name: str, text: str) -> Any:
    """``providers_json`` (``{namespace: {speed, faults}}``, ``SimProvider``) or ``cameras_json`` (``{topic:
    {rate_hz, faults}}``, ``SimCamera``): "" or ``{}`` for none, else JSON that ``SimConfig`` validates."""
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ScenarioError(f"invalid sim config: {name} is not JSON: {exc}", **{name: text[:200]}) from exc


def _read_settings(node: Node, defaults: dict[str, Any]) -> _Settings:
    """Declare every parameter (defaults from the given config) and validate the result."""
    values = {
        name: node.declare_parameter(name, default, _DYNAMIC).value for name, default in defaults.items()
    }
    config = SimConfig.from_data(
        {
            "start": {"x": values["start.x"], "y": values["start.y"], "yaw": values["start.yaw"]},
            **{
                k: values[k]
                for k in (
                    "speed",
                    "yaw_rate",
                    "pose_rate_hz",
                    "odom_rate_hz",
                    "camera_rate_hz",
                    "battery_start",
                    "battery_drain_per_m",
                    "seed",
                    "stop_on_failure",
                )
            },
            "faults": parse_faults(str(values["faults_json"])),
            "map": _parse_map(str(values["map_json"])),
            "providers": _parse_object("providers_json", str(values["providers_json"])),
            "cameras": _parse_object("cameras_json", str(values["cameras_json"])),
        }
    )
    try:
        die_mode = DieMode(values["die_mode"])
    except ValueError as exc:
        raise UsageError(
            f"die_mode must be one of {[m.value for m in DieMode]}", die_mode=values["die_mode"]
        ) from exc
    return _Settings(
        config=config,
        pose_topic=str(values["pose_topic"]),
        autostart=bool(values["autostart"]),
        die_mode=die_mode,
        truth_log_path=str(values["truth_log_path"]),
        speech_topic=str(values["speech_topic"]),
        message_topic=str(values["message_topic"]),
    )


class _TruthLog:
    """Append-only JSON lines of ground truth for tests and crash scripts; the harness never reads it.

    Every line is flushed as it is written, so a SIGKILLed sim leaves each line
    it wrote, and append mode lets a restarted sim continue the same file.
    Callers ``enqueue`` records (in order, possibly under the world lock) and
    call ``write_pending`` once that lock is released, so file I/O never holds
    it; after ``write_pending`` returns, everything enqueued before it is on
    disk. A failed write is logged as a warning and its line dropped: the sim
    keeps running.
    """

    def __init__(self, path: str, logger: Any) -> None:
        self.path = path
        self._logger = logger
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._file: TextIO | None = None
        self._failing = False

    def enqueue(self, record: dict[str, Any]) -> None:
        self._queue.append(record)

    @property
    def pending(self) -> bool:
        return bool(self._queue)

    def write(self, record: dict[str, Any]) -> None:
        self.enqueue(record)
        self.write_pending()

    def write_pending(self) -> None:
        with self._lock:
            while self._queue:
                line = json.dumps(self._queue.popleft(), separators=(",", ":")) + "\n"
                try:
                    if self._file is None:
                        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                        self._file = open(self.path, "a", encoding="utf-8")
                    self._file.write(line)
                    self._file.flush()
                    self._failing = False
                except (OSError, ValueError) as exc:
                    if not self._failing:  # one warning per run of failures
                        self._logger.warning(f"truth log {self.path}: write failed, line dropped: {exc}")
                    self._failing = True
                    self._close_quietly()

    def close(self) -> None:
        """Close the file (a later line reopens it in append mode)."""
        with self._lock:
            self._close_quietly()

    def _close_quietly(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass


# --------------------------------------------------------------------------- the robot


@dataclass(frozen=True)
class _GoalProbe:
    """One consistent read of what the execute callback needs."""

    view: GoalView
    localized: Pose2D
    stamp_ns: int
    dead: bool


class SimRobot:
    """The simulated robot and its Nav2 stand-ins, ready to be added to an executor.

    Parameters of the ``sim_robot`` node override the constructor's values, so
    the same class serves the executable (parameters from the command line)
    and in-process bring-up (a ``SimConfig`` passed directly).
    """

    def __init__(
        self,
        *,
        config: SimConfig | None = None,
        context: Context | None = None,
        die_mode: DieMode = DieMode.SILENT,
        pose_topic: str = "amcl_pose",
        autostart: bool = True,
        truth_log_path: str = "",
        speech_topic: str = "speech/say",
        message_topic: str = "robot_harness/messages",
        parameter_overrides: Sequence[Parameter] | None = None,
        namespace: str = "",
    ) -> None:
        self._context = context or rclpy.utilities.get_default_context()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._silenced = False
        self._destroyed = False
        self._running_goals = 0
        self._running_cv = threading.Condition(self._lock)
        self._goal_log: list[GoalEvent] = []
        self._deliveries: list[dict[str, Any]] = []
        self._external_sent: set[int] = set()
        self._external_bound: set[int] = set()
        self._navigator_held = False
        """True while the tick holds bt_navigator inactive for a ``navigator_inactive`` fault."""
        self.namespace = namespace
        # Pinned like the helpers (module docstring): a launch name renames none of the sim's nodes.
        self.node = Node("sim_robot", context=self._context, namespace=namespace,
                         parameter_overrides=list(parameter_overrides or ()),
                         cli_args=["--ros-args", "-r", "__node:=sim_robot"])
        try:
            settings = _read_settings(
                self.node,
                _parameter_defaults(
                    config or SimConfig(), die_mode, pose_topic, autostart, truth_log_path, speech_topic, message_topic
                ),
            )
        except HarnessError:
            self.node.destroy_node()
            raise
        self.config = settings.config
        self.die_mode = settings.die_mode
        self.pose_topic = settings.pose_topic
        self.truth_log_path = settings.truth_log_path
        self.speech_topic = settings.speech_topic
        self.message_topic = settings.message_topic
        self._truth = _TruthLog(self.truth_log_path, self.node.get_logger()) if self.truth_log_path else None
        self.world = SimWorld(self.config)
        self._t0_ns = self.node.get_clock().now().nanoseconds
        self._last_step_ns = self._t0_ns
        self._tick_thread: threading.Thread | None = None
        self._build_io()
        self.navigator = _Navigator(self, context=self._context, namespace=namespace)
        self.amcl = _Amcl(self, context=self._context, namespace=namespace)
        self.planner = _PlannerServer(self, context=self._context, namespace=namespace)
        self.behavior_server = _BehaviorServer(self, context=self._context, namespace=namespace)
        self.waypoint_follower = _WaypointFollower(self, context=self._context, namespace=namespace)
        # Under the sim node's resolved namespace (a global __ns remap included), as Nav2 nests its costmaps.
        base = self.node.get_namespace().rstrip("/")
        self.costmap = _GlobalCostmap(self, context=self._context, namespace=f"{base}/{COSTMAP_NAMESPACE}")
        self.local_costmap = _LocalCostmap(self, context=self._context, namespace=f"{base}/{LOCAL_COSTMAP_NAMESPACE}")
        self.provider_hosts: dict[str, tuple[_ActionHost, ...]] = {
            ns: (_Navigator(self, context=self._context, namespace=f"{base}/{ns}", provider=ns),
                 _BehaviorServer(self, context=self._context, namespace=f"{base}/{ns}", provider=ns),
                 _WaypointFollower(self, context=self._context, namespace=f"{base}/{ns}", provider=ns))
            for ns in self.config.providers}
        """Each navigation provider's bt_navigator, behavior_server and waypoint_follower, by namespace."""
        self._context.on_shutdown(self._on_context_shutdown)
        if settings.autostart:
            # nav2_bringup's lifecycle order: the controller's costmap, the planner, the behaviours, the navigator,
            # then the waypoint follower.
            autostart_node(self.amcl)
            autostart_node(self.local_costmap)
            autostart_node(self.costmap)
            autostart_node(self.planner)
            autostart_node(self.behavior_server)
            if self.world.navigator_active:
                autostart_node(self.navigator)
            else:  # navigator_inactive from the start: bt_navigator never activates
                self._navigator_held = True
                self.navigator.trigger_configure()
            autostart_node(self.waypoint_follower)
            for hosts in self.provider_hosts.values():  # another stack: its behaviours, navigator, follower
                for host in hosts:
                    autostart_node(host)

    # ----------------------------------------------------------------- public

    @property
    def nodes(self) -> tuple[Node, ...]:
        """sim_robot, bt_navigator, amcl, planner_server, global_costmap, local_costmap, behavior_server,
        waypoint_follower, then each navigation provider's bt_navigator, behavior_server, waypoint_follower."""
        return (self.node, self.navigator, self.amcl, self.planner, self.costmap, self.local_costmap,
                self.behavior_server, self.waypoint_follower,
                *(host for hosts in self.provider_hosts.values() for host in hosts))

    @property
    def goal_log(self) -> list[GoalEvent]:
        """Every goal event published so far (stamped), oldest first."""
        with self._lock:
            return list(self._goal_log)

    @property
    def deliveries(self) -> list[dict[str, Any]]:
        """Every speech/message payload received so far, oldest first, and whether it was acknowledged."""
        with self._lock:
            return [dict(d) for d in self._deliveries]

    @property
    def silenced(self) -> bool:
        """True once the robot died in ``silent`` mode."""
        return self._silenced

    def add_to_executor(self, executor: Executor) -> None:
        """Serve every node's requests on ``executor`` and start the world ticking."""
        for n in self.nodes:
            executor.add_node(n)
        self.start()

    def start(self) -> None:
        """Start the tick thread (sim time 0 is now). Idempotent; ``add_to_executor`` calls it."""
        with self._lock:
            if self._tick_thread is not None or self._stop.is_set():
                return
            self._t0_ns = self._last_step_ns = self.node.get_clock().now().nanoseconds
            self._tick_thread = threading.Thread(target=self._tick_loop, name="sim_robot_tick", daemon=True)
            self._tick_thread.start()
        if self._truth is not None:
            self._truth.write({"kind": "sim_started", "pid": os.getpid(), "stamp": time.time()})

    def stop(self) -> bool:
        """Stop ticking, end running goals (aborted, or silent if dead), wait for their callbacks.

        Call before ``executor.shutdown()``: a running execute callback holds an
        executor thread until it sees this flag (or the context shutting down).
        Every wait is bounded; returns False if something was still running
        when its wait ran out.
        """
        self._stop.set()
        thread = self._tick_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=_DESTROY_WAIT_S)
        with self._running_cv:
            goals_done = self._running_cv.wait_for(lambda: self._running_goals == 0, timeout=_DESTROY_WAIT_S)
        return goals_done and not (thread is not None and thread.is_alive())

    def destroy(self) -> None:
        """``stop()``, detach every node from its executor, destroy them. Safe to repeat.

        Use the order ``stop()``, ``executor.shutdown()``, ``destroy()``. If the
        executor is still spinning, the action server is not destroyed here
        but left to garbage collection: destroying an rclpy action server while
        an executor builds its wait set crashes the executor (ros2/rclpy#1385).
        """
        self.stop()
        if self._destroyed:
            return
        self._destroyed = True
        spinning = False
        for n in self.nodes:
            executor = n.executor
            if executor is not None:
                # rclpy exposes no public "is shut down" query.
                spinning = spinning or not getattr(executor, "_is_shutdown", True)
                executor.remove_node(n)
        provider_hosts = [host for hosts in self.provider_hosts.values() for host in hosts]
        for host in (self.navigator, self.waypoint_follower, self.behavior_server, self.planner, *provider_hosts):
            host.release_action_server(destroy=not spinning)
        client, self._external_client = self._external_client, None
        if client is not None and not spinning:  # the same rule as the server's (ros2/rclpy#1385)
            client.destroy()
        for n in self.nodes:
            n.destroy_node()
        if self._truth is not None:
            self._truth.write_pending()
            self._truth.close()

    # ----------------------------------------------------------------- used by the navigator

    @property
    def stopping(self) -> bool:
        return self._stop.is_set() or not self._context.ok()

    def wait(self, timeout_s: float) -> None:
        """A bounded pause that ends early when the robot is being destroyed."""
        self._stop.wait(timeout_s)

    def submit(self, command: Callable[[SimWorld], GoalDecision]) -> tuple[bool, str, int]:
        """Run one of the world's ``submit_*`` calls under the lock: (accepted, reason, goal index).

        The world's ``UsageError`` (a request it cannot take) passes through, with nothing logged.
        """
        with self._lock:
            try:
                decision = command(self.world)
            finally:
                self._flush_events()
        self._write_truth()
        return decision.accepted, decision.reason, decision.goal_index

    def bind_external_goal(self, tag: str) -> int:
        """The world goal index an ``EXTERNAL_GOAL_TAG`` request carries; 0 unless the world sent it and it is unbound."""
        try:
            index = int(tag.removeprefix(EXTERNAL_GOAL_TAG))
        except ValueError:
            return 0
        with self._lock:
            if index not in self._external_sent or index in self._external_bound:
                return 0
            self._external_bound.add(index)
            return index

    def ack_delay(self, index: int) -> float:
        """Seconds to hold back the acceptance of world goal ``index`` (``ack_delay`` fault)."""
        with self._lock:
            return self.world.ack_delay_for(index)

    def log_goal_bound(self, index: int, goal_id: bytes) -> None:
        """Record in the truth log which ROS goal UUID runs world goal ``index``."""
        if self._truth is not None:
            self._truth.write(
                {
                    "kind": "sim_goal_bound",
                    "goal_index": index,
                    "goal_id": goal_id.hex(),
                    "stamp": time.time(),
                    "pid": os.getpid(),
                }
            )

    def refuse_goal(self, pose: Pose2D | None, reason: str, provider: str = "") -> None:
        """Log a goal a server refused before the world saw it (goal index 0); ``pose`` None: where the robot is;
        ``provider``: the navigation provider whose server refused it."""
        with self._lock:
            w = self.world
            pose = pose if pose is not None else w.localized_pose
            self.node.get_logger().warning(f"goal to ({pose.x:.2f}, {pose.y:.2f}) rejected: {reason}")
            self._publish_event(
                GoalEvent(
                    event=GoalEventType.REJECTED,
                    goal_index=0,
                    target=pose,
                    true_pose=w.true_pose,
                    localized_pose=w.localized_pose,
                    t=w.t,
                    reason=reason,
                    provider=provider,
                )
            )
        self._write_truth()

    def relocalize(self, pose: Pose2D) -> None:
        """The localization estimate jumps to ``pose`` (``amcl``'s initialpose); the robot does not move."""
        with self._lock:
            self.world.relocalize(pose.x, pose.y, pose.yaw)

    def cancel_goal(self, index: int) -> bool:
        with self._lock:
            done = self.world.cancel(index)
            self._flush_events()
        self._write_truth()
        return done

    def abort_goal(self, reason: str, index: int | None = None) -> bool:
        with self._lock:
            done = self.world.abort(reason, index)
            self._flush_events()
        self._write_truth()
        return done

    def abort_kinds(self, kinds: frozenset[NavGoalKind], reason: str, provider: str = "") -> bool:
        """Abort the running world goal if it is ``provider``'s, of one of ``kinds`` (its server deactivates
        or shuts down)."""
        with self._lock:
            active = self.world.active_goal
            done = (active is not None and active.kind in kinds and active.provider == provider
                    and self.world.abort(reason, active.index))
            self._flush_events()
        self._write_truth()
        return done

    def clear_costmaps(self, which: str) -> bool:
        """A costmap's ``clear_entirely_*`` service: ``SimWorld.clear_costmaps`` (False: dead, nothing cleared)."""
        with self._lock:
            cleared = not self._silenced and self.world.clear_costmaps([which])
            if self._truth is not None:
                self._truth.enqueue({"kind": "sim_costmap_cleared", "costmap": which, "cleared": cleared,
                                     "t": self.world.t, "stamp": time.time()})
        self._write_truth()
        return cleared

    def goal_view(self, index: int) -> GoalView:
        """The world's view of goal ``index`` (ground truth included: each waypoint's ``reached_t``)."""
        with self._lock:
            return self.world.goal(index)

    def log_route_truth(self, view: GoalView) -> None:
        """Record in the truth log what became of each waypoint of a finished route (a goal event has no room)."""
        if self._truth is None or not view.waypoints:
            return
        self._truth.write({
            "kind": "sim_route_waypoints", "goal_index": view.index, "goal_kind": view.kind.value,
            "status": view.status.value, "stamp": time.time(),
            "waypoints": [{"index": wp.index, "state": wp.state.value, "error_code": wp.error_code,
                           "reached_t": wp.reached_t} for wp in view.waypoints],
        })

    def completion_claim(self) -> str:
        """The active ``claims_completion`` text ('' when none): navigation results carry it instead of the truth."""
        with self._lock:
            return self.world.completion_claim

    def plan_path(self, start: Pose2D | None, goal: Pose2D) -> tuple[PlanResult, int]:
        """The world's plan from ``start`` (None: the localized pose, ComputePathToPose's ``use_start`` false)
        to ``goal``, and the ROS stamp (ns) of the moment it was planned."""
        with self._lock:
            plan = self.world.plan_path(start if start is not None else self.world.localized_pose, goal)
            return plan, self.stamp_ns(self.world.t)

    def costs(self, points: Sequence[tuple[float, float]]) -> list[tuple[int, bool]]:
        """(cost, on the map) of each point, from one consistent read of the world."""
        with self._lock:
            return [(self.world.cost_at(x, y), self.world.in_map(x, y)) for x, y in points]

    @property
    def path_spacing_m(self) -> float:
        m = self.config.map
        return m.resolution if m is not None else _PATH_SPACING_M

    def probe(self, index: int) -> _GoalProbe:
        with self._lock:
            return _GoalProbe(
                view=self.world.goal(index),
                localized=self.world.localized_pose,
                stamp_ns=self.stamp_ns(self.world.t),
                dead=self.world.dead,
            )

    def goal_started(self) -> None:
        with self._running_cv:
            self._running_goals += 1

    def goal_finished(self) -> None:
        with self._running_cv:
            self._running_goals -= 1
            self._running_cv.notify_all()

    def stamp_ns(self, t: float) -> int:
        """ROS time (ns) of sim time ``t``: the world is stepped with ROS clock deltas from ``t0``."""
        return self._t0_ns + int(round(t * 1e9))

    def speed_for(self, provider: str) -> float:
        """The walking speed of ``provider``'s goals (the configuration's: no lock needed)."""
        return self.world.speed_for(provider)

    # ----------------------------------------------------------------- internals

    def _on_context_shutdown(self) -> None:
        self._stop.set()

    def _build_io(self) -> None:
        """Publishers and the streams the tick publishes.

        Streams are scheduled on sim time, so a stream faster than the tick
        publishes once per tick.
        """
        n, cfg = self.node, self.config

        def pub(msg_type: type, topic: str, qos: QoSProfile | int) -> Publisher:
            # No QoS-event waitables: each one is rebuilt into every executor wait set.
            return n.create_publisher(
                msg_type, topic, qos, event_callbacks=PublisherEventCallbacks(use_default_callbacks=False)
            )

        # AMCL's own pose QoS (nav2_amcl/src/amcl_node.cpp, kilted, AmclNode::initPubSub:
        # KeepLast(1).transient_local().reliable()): a TRANSIENT_LOCAL reader such as
        # nav2_simple_commander's BasicNavigator matches it and a late joiner gets the last pose.
        amcl_qos = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self._pose_pub = pub(PoseWithCovarianceStamped, self.pose_topic, amcl_qos)
        self._odom_pub = pub(Odometry, "odom", 10)
        self._battery_pub = pub(BatteryState, "battery_state", 10)
        self._camera_pub = pub(Image, "camera/image_raw", 5)
        self._truth_pub = pub(PoseStamped, "~/ground_truth", 10)
        log_qos = QoSProfile(
            depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self._log_pub = pub(String, "~/goal_log", log_qos)
        self._speech_ack_pub = pub(String, f"{self.speech_topic}/ack", 10)
        self._message_ack_pub = pub(String, f"{self.message_topic}/ack", 10)
        no_events = SubscriptionEventCallbacks(use_default_callbacks=False)
        self._speech_sub = n.create_subscription(
            String, self.speech_topic, lambda m: self._on_delivery("speech", m), 10, event_callbacks=no_events
        )
        self._message_sub = n.create_subscription(
            String, self.message_topic, lambda m: self._on_delivery("message", m), 10, event_callbacks=no_events
        )
        self._streams = [
            _Stream(1.0 / cfg.pose_rate_hz, self._publish_pose),
            _Stream(1.0 / cfg.odom_rate_hz, self._publish_odom),
            _Stream(1.0 / BATTERY_RATE_HZ, self._publish_battery),
            _Stream(1.0 / GROUND_TRUTH_RATE_HZ, self._publish_ground_truth),
        ]
        if cfg.camera_rate_hz > 0:
            self._streams.append(_Stream(1.0 / cfg.camera_rate_hz, self._publish_camera))
        for topic, camera in cfg.cameras.items():
            self._streams.append(_Stream(1.0 / camera.rate_hz, functools.partial(
                self._publish_extra_camera, topic, pub(Image, topic, 5))))
        # Another client of the navigator, only when a fault needs one (each client adds wait-set entries).
        self._external_client: ActionClient | None = None
        if any(isinstance(f, ExternalGoalFault) for f in cfg.faults):
            self._external_client = ActionClient(n, NavigateToPose, "navigate_to_pose")
        # A stream cannot publish faster than the tick: tick at least as fast as the fastest one.
        self.tick_rate_hz = min(MAX_TICK_RATE_HZ, max(TICK_RATE_HZ, cfg.pose_rate_hz, cfg.odom_rate_hz))

    @contextmanager
    def shutdown_tolerant(self) -> Iterator[None]:
        """Swallow rcl errors only when they come from the context shutting down under us.

        Ctrl-C shuts the context from a signal handler while the tick may be
        mid-publish; that race is not a bug, any other rcl error is.
        """
        try:
            yield
        except _rclpy.RCLError:
            if not self.stopping:
                raise

    def _on_delivery(self, channel: str, msg: String) -> None:
        """Acknowledge a speech or message payload, unless the robot is dead or a ``no_ack`` fault holds acks back.

        The ack names the exact payload by sha256, so the sender can tell its
        own delivery from another; a ``claims_completion`` fault adds its false
        claim as the ack's ``note`` (free text, never evidence).
        """
        data = msg.data
        digest = hashlib.sha256(data.encode()).hexdigest()
        with self._lock:
            withheld = self._silenced or self.world.dead or self.stopping or self.world.acks_withheld
            claim = self.world.completion_claim
            at = self.node.get_clock().now().nanoseconds / 1e9
            ack: dict[str, Any] = {"by": SPEAKER_ID if channel == "speech" else OUTBOX_ID, "at": at, "sha256": digest}
            if channel == "message":
                try:
                    body = json.loads(data)
                except ValueError:
                    body = None
                if isinstance(body, dict):
                    ack.update({k: body[k] for k in ("message_id", "to") if isinstance(body.get(k), str)})
            if claim:
                ack["note"] = claim
            record = {"kind": "sim_delivery", "channel": channel, "sha256": digest, "acked": not withheld,
                      "message_id": ack.get("message_id", ""), "data": data, "stamp": at}
            self._deliveries.append(record)
            if self._truth is not None:
                self._truth.enqueue(record)
            if not withheld:
                with self.shutdown_tolerant():
                    pub = self._speech_ack_pub if channel == "speech" else self._message_ack_pub
                    pub.publish(String(data=json.dumps(ack, sort_keys=True)))
        self._write_truth()

    def _publish_event(self, event: GoalEvent) -> None:
        stamped = event.model_copy(update={"stamp": self.stamp_ns(event.t) / 1e9})
        self._goal_log.append(stamped)
        if self._truth is not None:
            self._truth.enqueue(stamped.model_dump(mode="json"))
        with self.shutdown_tolerant():
            self._log_pub.publish(String(data=stamped.model_dump_json()))

    def _write_truth(self) -> None:
        """Write queued truth-log lines; call with the world lock released."""
        if self._truth is not None and self._truth.pending:
            self._truth.write_pending()

    def _flush_events(self) -> None:
        for event in self.world.drain_events():
            self._publish_event(event)

    def _tick_loop(self) -> None:
        """Tick at ``tick_rate_hz`` on a fixed schedule until stopped (every wait bounded by one period)."""
        period = 1.0 / self.tick_rate_hz
        next_at = time.monotonic() + period
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            if not self._context.ok():
                return
            self._on_tick()
            next_at += period
            if time.monotonic() - next_at > _TICK_BUDGET_OVERRUN_S:
                next_at = time.monotonic() + period
            if self._silenced:
                return

    def _on_tick(self) -> None:
        with self._lock:
            if self._silenced:
                return
            now_ns = self.node.get_clock().now().nanoseconds
            dt = (now_ns - self._last_step_ns) / 1e9
            if dt > 0.0:
                self._last_step_ns = now_ns
                self.world.step(dt)
            self._flush_events()
            died = self.world.dead
            navigator_allowed = self.world.navigator_active
            external = self._new_external_goals()
            if not died and not self.stopping:
                t = self.world.t
                for stream in self._streams:
                    if stream.due(t):
                        with self.shutdown_tolerant():
                            stream.publish()
        self._write_truth()
        if died:
            self._on_death()
            return
        self._follow_navigator_fault(navigator_allowed)
        if external:
            self._send_external_goals(external)

    def _follow_navigator_fault(self, allowed: bool) -> None:
        """Hold bt_navigator inactive while ``navigator_inactive`` holds; activate it again once it ends.

        A real deactivation, outside the world lock: the running goal aborts
        (``_Navigator.deactivated``), ``get_state`` says inactive and goals
        are rejected. Only a navigator the fault deactivated is reactivated.
        """
        nav = self.navigator
        if self.stopping:
            return
        if not allowed and nav.active:
            self._navigator_held = True
            nav.get_logger().warning("navigator_inactive fault: bt_navigator deactivating")
            nav.trigger_deactivate()
        elif allowed and self._navigator_held:
            self._navigator_held = False
            if nav.lifecycle_state == "inactive":
                nav.get_logger().info("navigator_inactive fault over: bt_navigator activating")
                nav.trigger_activate()

    def _new_external_goals(self) -> list[tuple[int, PoseStamped]]:
        """Accepted world goals of ``external_goal`` faults not yet sent to the navigator (call under the lock)."""
        new = sorted(self.world.foreign_goals - self._external_sent)
        self._external_sent.update(new)
        views = [self.world.goal(i) for i in new]
        return [(v.index, _pose_stamped(v.target, self.stamp_ns(v.received_t)))
                for v in views if v.status is not GoalStatus.REJECTED]

    def _send_external_goals(self, goals: list[tuple[int, PoseStamped]]) -> None:
        """Send each as another client of ``navigate_to_pose`` (the world already runs it; this gives it a ROS goal).

        Fire and forget, as the other client's result is nobody's business
        here; a request that cannot go out leaves the world goal running
        without a ROS goal, and says so in the log.
        """
        client = self._external_client
        if client is None or self.stopping:
            return
        for index, target in goals:
            if not client.server_is_ready():
                self.node.get_logger().warning(
                    f"external_goal: navigate_to_pose is not reachable; world goal {index} runs without a ROS goal"
                )
                continue
            goal = NavigateToPose.Goal()
            goal.pose = target
            goal.behavior_tree = f"{EXTERNAL_GOAL_TAG}{index}"
            with self.shutdown_tolerant():
                client.send_goal_async(goal)

    def _on_death(self) -> None:
        if self.die_mode is DieMode.EXIT:
            self.node.get_logger().error(f"die fault fired: exiting with code {DIE_EXIT_CODE}")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(DIE_EXIT_CODE)
        with self._lock:
            if self._silenced:
                return
            self._silenced = True
        self.node.get_logger().warning("die fault fired: robot is silent from now on")

    # The publishers below run under the lock, from _on_tick only.

    def _publish_pose(self) -> None:
        if self.world.pose_silent:
            return  # the pose_dropout fault: the localization topic goes silent
        sample = self.world.published_pose()
        var_x, var_y, var_yaw = self.world.pose_covariance
        msg = PoseWithCovarianceStamped()
        stamped = _pose_stamped(sample.pose, self.stamp_ns(sample.stamp_t))
        msg.header = stamped.header
        msg.pose.pose = stamped.pose
        cov = [0.0] * 36  # row-major 6x6 over (x, y, z, roll, pitch, yaw)
        cov[0], cov[7], cov[35] = var_x, var_y, var_yaw
        msg.pose.covariance = cov
        self._pose_pub.publish(msg)

    def _publish_odom(self) -> None:
        pose, twist = self.world.true_pose, self.world.twist
        msg = Odometry()
        stamped = _pose_stamped(pose, self.stamp_ns(self.world.t), frame_id="odom")
        msg.header = stamped.header
        msg.child_frame_id = "base_link"
        msg.pose.pose = stamped.pose
        msg.twist.twist.linear.x = twist.vx
        msg.twist.twist.linear.y = twist.vy
        msg.twist.twist.angular.z = twist.wz
        self._odom_pub.publish(msg)

    def _publish_battery(self) -> None:
        msg = BatteryState()
        msg.header.stamp = _time_msg(self.stamp_ns(self.world.t))
        msg.percentage = float(self.world.battery)
        msg.voltage = float("nan")
        msg.present = True
        msg.power_supply_status = BatteryState.POWER_SUPPLY_STATUS_DISCHARGING
        self._battery_pub.publish(msg)

    def _publish_ground_truth(self) -> None:
        self._truth_pub.publish(_pose_stamped(self.world.true_pose, self.stamp_ns(self.world.t)))

    def _publish_camera(self) -> None:
        self._camera_pub.publish(self._camera_frame("camera"))

    def _publish_extra_camera(self, topic: str, publisher: Publisher) -> None:
        if self.world.camera_live(topic):  # a camera_dead fault: this topic goes silent for good
            publisher.publish(self._camera_frame(topic.split("/")[0]))

    def _camera_frame(self, frame_id: str) -> Image:
        msg = Image()
        msg.header.stamp = _time_msg(self.stamp_ns(self.world.t))
        msg.header.frame_id = frame_id
        msg.height, msg.width = CAMERA_HEIGHT, CAMERA_WIDTH
        msg.encoding = "rgb8"
        msg.step = 3 * CAMERA_WIDTH
        msg.data = self.world.camera_image(CAMERA_WIDTH, CAMERA_HEIGHT)
        return msg


@dataclass
class _Stream:
    """One periodic topic, scheduled on sim time by the tick."""

    period_s: float
    publish: Callable[[], None]
    next_t: float = 0.0

    def due(self, t: float) -> bool:
        """True (and schedule the next slot) when ``t`` reached this stream's slot.

        Slots advance by exactly one period so the average rate is exact; after
        a stall the stream skips ahead instead of bursting to catch up.
        """
        if t + 1e-9 < self.next_t:
            return False
        self.next_t += self.period_s
        if self.next_t <= t:
            self.next_t = t + self.period_s
        return True


# --------------------------------------------------------------------------- Nav2's action servers


@dataclass(frozen=True)
class _Surface:
    """One Nav2 action a sim lifecycle node serves, and how its messages map onto the world's goals.

    ``submit`` hands an accepted request to the world (``SimRobot.submit`` runs it under the lock;
    ``UsageError`` for a request the world cannot take, which is then refused); ``feedback`` and
    ``result`` build the action's own fields from the goal's ``GoalView``. What every Nav2 result
    shares (``error_code``, ``error_msg``) and the terminal state are the host's (``_ActionHost._finish``).
    """

    action: Any
    """The action type (nav2_msgs/action/...)."""
    name: str
    """The action's name, relative (Nav2's default)."""
    unknown: int
    """The action's UNKNOWN code: an abort the world gave no code of its own (preempted, deactivated)."""
    submit: Callable[[SimWorld, Any], GoalDecision]
    feedback: Callable[[Any, _GoalProbe], Any]
    result: Callable[[Any, GoalView], Any]
    target: Callable[[Any], Pose2D | None] = lambda _request: None
    """Where the goal would take the robot, for the log of a refused goal (None: where it is)."""
    frames: Callable[[Any], list[str]] = lambda _request: []
    """The frames of the request's poses; a goal with one other than ``map`` (or "") is refused."""
    nav2_words: bool = True
    """Abort messages: the world's copy of this server's Nav2 ``error_msg`` first (True), or the world's
    reason, which names the cause (False: bt_navigator's, as navigate_to_pose always said)."""


class _ActionHost(HarnessLifecycleNode):
    """A lifecycle node of the sim serving Nav2 actions, each goal mirroring one world goal.

    Shared by bt_navigator, waypoint_follower and behavior_server, so every action
    answers as navigate_to_pose always has: its servers are created at configure
    and kept (ros2/rclpy#1385), goals are accepted only while active (and refused,
    with a REJECTED line in the goal log, otherwise), an accepted goal is bound to
    its world goal index and its execute callback mirrors the world's verdict
    into the ROS goal state, feedback and result until the goal ends, the robot
    dies or the sim stops, so the world stays the single source of truth about
    goals. A dead robot (``silent``) refuses goals and cancels and never answers
    a running goal; an ``ack_delay`` fault holds the acceptance back while the
    world goal already runs. Every goal of any kind preempts the running one (the
    world's one-goal rule): its ROS goal ends ABORTED, as a Nav2 server ends a
    goal its successor preempted.
    """

    check_twins = False  # the robot's Nav2 servers: a second one is the supervisor's to refuse

    kinds: frozenset[NavGoalKind] = frozenset()
    """The world goal kinds this node runs: aborted when it deactivates or shuts down."""

    def __init__(self, name: str, robot: SimRobot, *, context: Context, namespace: str = "",
                 provider: str = "") -> None:
        # No parameter services: these nodes have no parameters here, and every service costs a
        # wait-set entry on each executor wake-up. The name is pinned by a node-local remap, so a
        # launch name given to the sim process (``--ros-args -r __node:=...``) does not rename it too
        # (see ``BackgroundSpinner``); a provider's node also pins its sub-namespace (``namespace`` is then
        # the resolved one), as the costmaps do, so a global ``__ns`` remap does not fold it into the robot's.
        pins = ["-r", f"__ns:={namespace}"] if provider else []
        super().__init__(name, context=context, namespace=namespace, start_parameter_services=False,
                         cli_args=["--ros-args", *pins, "-r", f"__node:={name}"])
        self.provider = provider
        """The navigation provider (namespace) whose goals this node serves; "" the robot's own Nav2."""
        self._robot = robot
        self._group = ReentrantCallbackGroup()
        self._servers: list[ActionServer] = []
        self._server_lock = threading.Lock()
        self._pending: dict[int, int] = {}

    def surfaces(self) -> tuple[_Surface, ...]:
        """The actions this node serves."""
        return ()

    # ----------------------------------------------------------------- lifecycle

    def build(self, params: dict[str, Any]) -> None:
        with self._server_lock:
            if not self._servers:
                self._servers = [
                    ActionServer(
                        self,
                        s.action,
                        s.name,
                        execute_callback=functools.partial(self._execute, s),
                        goal_callback=functools.partial(self._on_goal, s),
                        cancel_callback=self._on_cancel,
                        callback_group=self._group,
                    )
                    for s in self.surfaces()
                ]

    @property
    def lifecycle_state(self) -> str:
        """The label of the current lifecycle state (``unconfigured``, ``inactive``, ``active``, ...)."""
        return str(self._state_machine.current_state[1])

    def deactivated(self) -> None:
        self._robot.abort_kinds(self.kinds, f"{self._label} deactivated", self.provider)

    @property
    def _label(self) -> str:
        """The node's name as its words say it: ``bt_navigator``, or ``alt/bt_navigator`` for a provider's."""
        return f"{self.provider}/{self.get_name()}" if self.provider else self.get_name()

    def release(self) -> None:
        """Nothing: the servers are kept (and reused by the next configure) instead of destroyed, since
        destroying one under a spinning executor can crash the executor (ros2/rclpy#1385). Goals are
        refused unless active anyway; ``SimRobot.destroy`` drops them (``release_action_server``)."""

    def shutting_down(self) -> None:
        self._robot.abort_kinds(self.kinds, f"{self._label} shutting down", self.provider)

    def release_action_server(self, *, destroy: bool) -> None:
        """Drop every action server; destroy them only when no executor can be using them. Safe to repeat."""
        with self._server_lock:
            servers, self._servers = self._servers, []
        if destroy:
            for server in servers:
                server.destroy()

    # ----------------------------------------------------------------- action callbacks

    def _bound_index(self, surface: _Surface, request: Any) -> int | None:
        """A world goal this request stands for that already runs (0: none to bind, refused); None: a new goal."""
        return None

    def _on_goal(self, surface: _Surface, request: Any) -> GoalResponse:
        robot = self._robot
        if robot.silenced:
            return GoalResponse.REJECT
        bound = self._bound_index(surface, request)
        if bound is not None:
            if bound == 0:
                return GoalResponse.REJECT
            self._pending[id(request)] = bound
            return GoalResponse.ACCEPT
        target = surface.target(request)
        if not self._active:
            robot.refuse_goal(target, f"{self._label} is not active", self.provider)
            return GoalResponse.REJECT
        frame = next((f for f in surface.frames(request) if f not in ("", "map")), None)
        if frame is not None:
            robot.refuse_goal(target, f"unsupported frame '{frame}'", self.provider)
            return GoalResponse.REJECT
        try:
            accepted, reason, index = robot.submit(lambda world: surface.submit(world, request))
        except UsageError as exc:  # a request the world cannot take (no poses, a zero speed, ...)
            robot.refuse_goal(target, f"{surface.name}: {exc.message}", self.provider)
            return GoalResponse.REJECT
        if not accepted:
            self.get_logger().info(f"{surface.name} goal {index} rejected: {reason}")
            return GoalResponse.REJECT
        delay_s = robot.ack_delay(index)
        if delay_s > 0.0:
            # The world goal is already running (the tick moves the robot);
            # only the answer to the client is late. This blocks one executor
            # thread; the reentrant group keeps goals and cancels flowing.
            self.get_logger().info(f"goal {index} accepted; answering in {delay_s:.2f} s (ack_delay fault)")
            robot.wait(delay_s)
            if robot.stopping or robot.silenced:
                # No ROS goal will exist to mirror it: end the world goal now.
                robot.abort_goal(f"{self._label} shutting down", index)
                return GoalResponse.REJECT
        self._pending[id(request)] = index
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        return CancelResponse.REJECT if self._robot.silenced else CancelResponse.ACCEPT

    def _execute(self, surface: _Surface, goal_handle: ServerGoalHandle) -> Any:
        index = self._pending.pop(id(goal_handle.request), 0)
        if index == 0:
            goal_handle.abort()
            return surface.action.Result(error_code=surface.unknown, error_msg="goal was not registered with the world")
        self._robot.log_goal_bound(index, bytes(goal_handle.goal_id.uuid))
        self._robot.goal_started()
        try:
            return self._run_goal(surface, goal_handle, index)
        finally:
            self._robot.goal_finished()

    def _run_goal(self, surface: _Surface, goal_handle: ServerGoalHandle, index: int) -> Any:
        """Mirror world goal ``index`` into ROS until it ends, the robot dies, or we stop.

        A dead robot never answers: the loop parks (in bounded waits) until the
        adapter is destroyed, and returns without setting a terminal state.
        """
        robot = self._robot
        request = goal_handle.request
        last_feedback_ns: int | None = None
        last_waypoint: int | None = None
        cancel_sent = False
        while True:
            if robot.stopping:
                probe = robot.probe(index)
                if probe.dead or robot.silenced:
                    return surface.action.Result(error_code=surface.unknown, error_msg="robot is dead")
                robot.abort_goal(f"{self._label} shutting down", index)
                goal_handle.abort()
                return surface.action.Result(error_code=surface.unknown, error_msg=f"{self._label} shutting down")
            probe = robot.probe(index)
            if not probe.dead:
                status = probe.view.status
                if status.terminal:
                    return self._finish(surface, goal_handle, probe.view, robot.completion_claim())
                if goal_handle.is_cancel_requested and not cancel_sent:
                    cancel_sent = True
                    robot.cancel_goal(index)
                    continue
                # Nav2's waypoint follower publishes on every loop turn, so each waypoint it drives to gets
                # feedback however short the leg: a change of waypoint is published without waiting the period.
                if probe.view.feedback_enabled and (
                    last_feedback_ns is None
                    or probe.stamp_ns - last_feedback_ns >= FEEDBACK_PERIOD_S * 1e9
                    or probe.view.current_waypoint != last_waypoint
                ):
                    last_feedback_ns, last_waypoint = probe.stamp_ns, probe.view.current_waypoint
                    with robot.shutdown_tolerant():
                        goal_handle.publish_feedback(surface.feedback(request, probe))
            robot.wait(_EXECUTE_POLL_S)

    def _finish(self, surface: _Surface, goal_handle: ServerGoalHandle, view: GoalView, claim: str = "") -> Any:
        """End the ROS goal as the world did; a ``claims_completion`` fault replaces the message with its claim.

        An abort carries the world's Nav2 error code (the planner's for a goal
        without a path, 105 for a stuck robot, 603, a behaviour's own), or the
        action's UNKNOWN when the world has none (preempted, deactivated).
        """
        result = surface.result(goal_handle.request, view)
        if view.status is GoalStatus.SUCCEEDED:
            goal_handle.succeed()
            result.error_code, result.error_msg = 0, claim
        elif view.status is GoalStatus.CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
            result.error_code, result.error_msg = 0, claim or "canceled"
        else:
            goal_handle.abort()
            words = (view.error_msg or view.reason) if surface.nav2_words else (view.reason or view.error_msg)
            result.error_code = view.error_code or surface.unknown
            result.error_msg = claim or words or view.status.value.lower()
        self._robot.log_route_truth(view)
        return result


# -- message building for the actions (private to the sim, as the helpers above)

_WAYPOINT_STATUS = {
    WaypointState.PENDING: WaypointStatus.PENDING,
    WaypointState.COMPLETED: WaypointStatus.COMPLETED,
    WaypointState.SKIPPED: WaypointStatus.SKIPPED,
    WaypointState.FAILED: WaypointStatus.FAILED,
}
MAX_ROUTE_POSES = 10_000
"""The most poses a route may hold once FollowWaypoints' loops are unrolled (``number_of_loops`` is a uint32)."""


def _in_global_frame(src: PoseStamped) -> PoseStamped:
    """A requested pose as Nav2 keeps it once transformed into the global frame: the same pose, in ``map``."""
    msg = PoseStamped()
    msg.header.frame_id = "map"
    msg.header.stamp = src.header.stamp
    msg.pose = src.pose
    return msg


def _waypoint_status(wp: WaypointView, index: int, pose: PoseStamped) -> WaypointStatus:
    return WaypointStatus(waypoint_status=_WAYPOINT_STATUS[wp.state], waypoint_index=index,
                          waypoint_pose=_in_global_frame(pose), error_code=wp.error_code, error_msg=wp.error_msg)


def _seconds(d: DurationMsg) -> float:
    return d.sec + d.nanosec * 1e-9


def _elapsed(view: GoalView) -> DurationMsg:
    """A behaviour's ``total_elapsed_time``: sim seconds from its arrival to its end."""
    return _duration_msg((view.ended_t - view.received_t) if view.ended_t is not None else 0.0)


def _navigation_feedback(fb: Any, robot: SimRobot, probe: _GoalProbe) -> Any:
    """The fields NavigateToPose and NavigateThroughPoses feedback share."""
    view = probe.view
    fb.current_pose = _pose_stamped(probe.localized, probe.stamp_ns)
    fb.navigation_time = _duration_msg((probe.stamp_ns - robot.stamp_ns(view.received_t)) / 1e9)
    fb.estimated_time_remaining = _duration_msg(view.distance_remaining / robot.speed_for(view.provider))
    fb.number_of_recoveries = 0
    fb.distance_remaining = float(view.distance_remaining)
    return fb


class _Navigator(_ActionHost):
    """``bt_navigator``: ``navigate_to_pose`` and ``navigate_through_poses``, accepting goals only while active.

    From nav2_bt_navigator (navigation2 branch kilted at 71a1d84f):
    ``navigators/navigate_through_poses.cpp``: a NavigateThroughPoses goal's
    poses (``nav_msgs/Goals``) are taken one by one into the global frame;
    feedback carries the NavigateToPose fields plus
    ``number_of_poses_remaining`` (the poses still on the blackboard, which
    passed and dropped ones leave) and ``waypoint_statuses``; on completion
    every PENDING waypoint becomes COMPLETED on success and FAILED otherwise,
    and the result lists every waypoint. The world keeps those states
    (``SimWorld.submit_route``, ``follow=False``); a leg without a path aborts
    with ComputePathThroughPoses' number, a stuck robot with 105. Where it
    differs: a pose whose frame is not ``map`` (or "") is refused, as the
    sim's navigate_to_pose refuses one (Nav2 accepts, then aborts TF_ERROR),
    and so is an empty route (Nav2 accepts it and its planner aborts, 309);
    ``behavior_tree`` is ignored except for an ``external_goal`` tag.
    """

    kinds = frozenset({NavGoalKind.NAVIGATE_TO_POSE, NavGoalKind.NAVIGATE_THROUGH_POSES})

    def __init__(self, robot: SimRobot, *, context: Context, namespace: str = "", provider: str = "") -> None:
        super().__init__("bt_navigator", robot, context=context, namespace=namespace, provider=provider)

    def surfaces(self) -> tuple[_Surface, ...]:
        ns = self.provider
        return (
            _Surface(
                NavigateToPose, "navigate_to_pose", _Result.UNKNOWN,
                submit=lambda w, r: w.submit_goal(*_pose_args(_msg_to_pose(r.pose)), provider=ns),
                feedback=lambda _r, probe: _navigation_feedback(NavigateToPose.Feedback(), self._robot, probe),
                result=lambda _r, _view: NavigateToPose.Result(),
                target=lambda r: _msg_to_pose(r.pose),
                frames=lambda r: [r.pose.header.frame_id],
                nav2_words=False,
            ),
            _Surface(
                NavigateThroughPoses, "navigate_through_poses", NavigateThroughPoses.Result.UNKNOWN,
                submit=lambda w, r: w.submit_route([_msg_to_pose(p) for p in r.poses.goals], follow=False,
                                                   provider=ns),
                feedback=self._through_poses_feedback,
                result=lambda r, view: NavigateThroughPoses.Result(waypoint_statuses=_through_statuses(r, view)),
                target=lambda r: _msg_to_pose(r.poses.goals[-1]) if r.poses.goals else None,
                frames=lambda r: [p.header.frame_id for p in r.poses.goals],
                nav2_words=False,
            ),
        )

    def _through_poses_feedback(self, request: Any, probe: _GoalProbe) -> NavigateThroughPoses.Feedback:
        fb = _navigation_feedback(NavigateThroughPoses.Feedback(), self._robot, probe)
        fb.number_of_poses_remaining = probe.view.poses_remaining
        fb.waypoint_statuses = _through_statuses(request, probe.view)
        return fb

    def _bound_index(self, surface: _Surface, request: Any) -> int | None:
        if (self.provider or surface.action is not NavigateToPose
                or not request.behavior_tree.startswith(EXTERNAL_GOAL_TAG)):
            return None  # another client's goals are sent to the robot's own navigator only
        # The world already runs it (whatever our lifecycle state): bind, do not submit again.
        index = self._robot.bind_external_goal(request.behavior_tree)
        if index == 0:
            self._robot.refuse_goal(_msg_to_pose(request.pose),
                                    f"no external goal to bind for '{request.behavior_tree}'")
        return index


def _pose_args(pose: Pose2D) -> tuple[float, float, float]:
    return pose.x, pose.y, pose.yaw


def _through_statuses(request: NavigateThroughPoses.Goal, view: GoalView) -> list[WaypointStatus]:
    goals = request.poses.goals
    return [_waypoint_status(wp, wp.index, goals[wp.index]) for wp in view.waypoints]


def _follow_route(request: FollowWaypoints.Goal) -> list[Pose2D]:
    """The poses FollowWaypoints visits, in order: from ``goal_index`` to the end, then ``number_of_loops``
    more rounds from the first (waypoint_follower's loop); ``UsageError`` for none, a start past the end or
    more than ``MAX_ROUTE_POSES``."""
    poses = [_msg_to_pose(p) for p in request.poses]
    n, start, loops = len(poses), int(request.goal_index), int(request.number_of_loops)
    if n == 0:
        raise UsageError("Empty vector of waypoints passed to waypoint following action", poses=0)
    if start >= n:
        raise UsageError(f"goal_index {start} is past the last of {n} waypoints", goal_index=start, poses=n)
    if (n - start) + n * loops > MAX_ROUTE_POSES:
        raise UsageError(f"{loops} loops of {n} waypoints is more than {MAX_ROUTE_POSES} poses",
                         number_of_loops=loops, poses=n)
    return poses[start:] + poses * loops


def _follow_index(request: FollowWaypoints.Goal, i: int) -> int:
    """Index into ``request.poses`` of the i-th pose ``_follow_route`` visits (what waypoint_follower reports)."""
    return (int(request.goal_index) + i) % len(request.poses)


class _WaypointFollower(_ActionHost):
    """``waypoint_follower``: ``follow_waypoints`` (FollowWaypoints), a NavigateToPose per waypoint.

    From nav2_waypoint_follower (``src/waypoint_follower.cpp``, kilted at
    71a1d84f): the node name and the action name; goals are answered only
    while active; the goal starts at ``goal_index`` and goes round
    ``number_of_loops`` more times from the first waypoint; feedback is
    ``current_waypoint`` (the index into ``poses``); a waypoint whose
    NavigateToPose fails is a missed waypoint (FAILED, its index and pose,
    the navigation's error code and message), and with ``stop_on_failure``
    (the parameter, default true there; here the ``sim_robot`` parameter, as
    ``SimConfig.stop_on_failure``) the goal aborts at once with
    STOP_ON_MISSED_WAYPOINT (603, "Failed to process waypoint N in waypoint
    list and stop on failure is enabled. Terminating action."), otherwise it
    goes on and succeeds listing the missed ones. The world decides all of it
    (``SimWorld.submit_route``, ``follow=True``). Where it differs: an empty
    list is refused (Nav2 accepts and aborts NO_VALID_WAYPOINTS, 602), as are
    a ``goal_index`` past the end (Nav2 reads past its list) and a pose outside
    ``map``; no task executor runs at a waypoint; the waypoints' own
    NavigateToPose goals are the world's and do not appear on
    ``navigate_to_pose``.
    """

    kinds = frozenset({NavGoalKind.FOLLOW_WAYPOINTS})

    def __init__(self, robot: SimRobot, *, context: Context, namespace: str = "", provider: str = "") -> None:
        super().__init__("waypoint_follower", robot, context=context, namespace=namespace, provider=provider)

    def surfaces(self) -> tuple[_Surface, ...]:
        ns = self.provider
        return (
            _Surface(
                FollowWaypoints, "follow_waypoints", FollowWaypoints.Result.UNKNOWN,
                submit=lambda w, r: w.submit_route(_follow_route(r), follow=True, provider=ns),
                feedback=lambda r, probe: FollowWaypoints.Feedback(
                    current_waypoint=_follow_index(r, probe.view.current_waypoint)),
                result=lambda r, view: FollowWaypoints.Result(missed_waypoints=[
                    _waypoint_status(wp, _follow_index(r, wp.index), r.poses[_follow_index(r, wp.index)])
                    for wp in view.waypoints if wp.state is WaypointState.FAILED]),
                target=lambda r: _msg_to_pose(r.poses[-1]) if r.poses else None,
                frames=lambda r: [p.header.frame_id for p in r.poses],
            ),
        )


class _BehaviorServer(_ActionHost):
    """``behavior_server``: ``spin``, ``backup`` and ``wait``, Nav2's behaviours, from the world's.

    From nav2_behaviors (kilted at 71a1d84f): ``src/behavior_server.cpp``
    names the node and its default plugins, whose names are the action names
    (``timed_behavior.hpp``: one SimpleActionServer per behaviour, named
    after it, serving only while active); a behaviour's result carries
    ``total_elapsed_time`` and, when it fails, ``"<name> failed:<why>"`` with
    its code (``plugins/spin.cpp``: TIMEOUT 701 past a positive
    ``time_allowance``; ``plugins/back_up.cpp``: target.y or target.z not 0
    is INVALID_INPUT 713 before it moves, the signs of distance and speed are
    ignored; ``drive_on_heading.hpp``: TIMEOUT 711, COLLISION_AHEAD 714);
    feedback is ``angular_distance_traveled`` (signed), ``distance_traveled``
    and ``time_left``. The world runs them (``submit_spin``,
    ``submit_backup``, ``submit_wait``), and they run while bt_navigator is
    inactive and while the robot is stuck (backing up frees it). Where it
    differs: a goal to one behaviour preempts whatever runs (Nav2 would run a
    behaviour beside a navigation); ``disable_collision_checks`` is ignored
    (a spin never collides, a back-up always checks); a BackUp with speed 0
    is refused (Nav2 creeps at its minimum speed); a negative time is taken as
    0 (Nav2: no allowance, a wait done at once).
    """

    kinds = frozenset({NavGoalKind.SPIN, NavGoalKind.BACK_UP, NavGoalKind.WAIT})

    def __init__(self, robot: SimRobot, *, context: Context, namespace: str = "", provider: str = "") -> None:
        super().__init__("behavior_server", robot, context=context, namespace=namespace, provider=provider)

    def surfaces(self) -> tuple[_Surface, ...]:
        ns = self.provider
        return (
            _Surface(
                Spin, "spin", Spin.Result.UNKNOWN,
                submit=lambda w, r: w.submit_spin(
                    float(r.target_yaw), time_allowance_s=max(0.0, _seconds(r.time_allowance)), provider=ns),
                feedback=lambda _r, probe: Spin.Feedback(
                    angular_distance_traveled=float(probe.view.angular_distance_traveled)),
                result=lambda _r, view: Spin.Result(total_elapsed_time=_elapsed(view)),
            ),
            _Surface(
                BackUp, "backup", BackUp.Result.UNKNOWN,
                submit=lambda w, r: w.submit_backup(
                    float(r.target.x), float(r.speed), time_allowance_s=max(0.0, _seconds(r.time_allowance)),
                    target_y=float(r.target.y), target_z=float(r.target.z), provider=ns),
                feedback=lambda _r, probe: BackUp.Feedback(distance_traveled=float(probe.view.distance_traveled)),
                result=lambda _r, view: BackUp.Result(total_elapsed_time=_elapsed(view)),
            ),
            _Surface(
                Wait, "wait", Wait.Result.UNKNOWN,
                submit=lambda w, r: w.submit_wait(max(0.0, _seconds(r.time)), provider=ns),
                feedback=lambda _r, probe: Wait.Feedback(time_left=_duration_msg(probe.view.time_left)),
                result=lambda _r, view: Wait.Result(total_elapsed_time=_elapsed(view)),
            ),
        )


class _Amcl(HarnessLifecycleNode):
    """``amcl``: the lifecycle node Nav2 clients wait for, and the sim's ``initialpose`` input.

    What it takes from nav2_amcl (``nav2_amcl/src/amcl_node.cpp``, navigation2 branch
    kilted at 71a1d84f49dc48e226c96619188ee12054824ff3): the name
    ``amcl`` (BasicNavigator's default localizer); ``initialpose`` is
    subscribed once configured (``initPubSub`` runs in ``on_configure``) with
    ``SystemDefaultsQoS``, which rclpy spells ``qos_profile_system_default``;
    a pose whose frame is not the global frame (``map``, leading slash
    stripped) is ignored with a warning, and one that arrives while not active
    is kept and applied on activation (``init_pose_received_on_inactive``).
    Where it differs: an empty frame is taken as ``map`` (the harness's goals
    use either), and the pose itself is published by the ``sim_robot`` node
    whatever this node's state (module docstring). A relocalization moves only
    the estimate (``SimWorld.relocalize``); nothing is journaled, the world is
    the truth.
    """

    check_twins = False  # the robot's localizer, not a harness node

    _FRAMES = ("", "map")

    def __init__(self, robot: SimRobot, *, context: Context, namespace: str = "") -> None:
        # Pinned and without parameter services, as bt_navigator (see _ActionHost.__init__).
        super().__init__("amcl", context=context, namespace=namespace, start_parameter_services=False,
                         cli_args=["--ros-args", "-r", "__node:=amcl"])
        self._robot = robot
        self._sub: Any = None
        self._listening = False
        self._pending: Pose2D | None = None

    def build(self, params: dict[str, Any]) -> None:
        # Created once and kept (like bt_navigator's server); only heard between configure and cleanup.
        if self._sub is None:
            self._sub = self.create_subscription(
                PoseWithCovarianceStamped, "initialpose", self._on_initial_pose, qos_profile_system_default,
                event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False),
            )
        self._listening = True

    def activated(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            self._relocalize(pending)

    def release(self) -> None:
        self._listening = False
        self._pending = None

    def _on_initial_pose(self, msg: PoseWithCovarianceStamped) -> None:
        if not self._listening or self._robot.silenced:
            return
        frame = msg.header.frame_id.lstrip("/")
        if frame not in self._FRAMES:
            self.get_logger().warning(
                f"ignoring initial pose in frame '{msg.header.frame_id}'; initial poses must be in 'map'")
            return
        pose = _msg_to_pose(msg.pose)
        if not all(math.isfinite(v) for v in (pose.x, pose.y, pose.yaw)):
            self.get_logger().error("initialpose is malformed (not finite); rejecting")
            return
        if not self._active:
            self._pending = pose
            self.get_logger().warning("initial pose received, but amcl is not active: applied on activation")
            return
        self._relocalize(pose)

    def _relocalize(self, pose: Pose2D) -> None:
        self._robot.relocalize(pose)
        self.get_logger().info(f"relocalized: estimate now x={pose.x:.3f} y={pose.y:.3f} yaw={pose.yaw:.3f}")


class _PlannerServer(HarnessLifecycleNode):
    """``planner_server``: ``compute_path_to_pose`` from the world's planner, as Nav2's planner server serves it.

    From nav2_planner (``planner_server.cpp``, navigation2 branch kilted at
    71a1d84f): the node name, the action name (relative, so under the
    robot's namespace), created at configure and answering goals only while
    active (nav2_util's SimpleActionServer rejects every goal while inactive:
    "Action server is inactive. Rejecting the goal."); ``use_start`` false
    plans from the robot's pose (here the localized pose); a ``planner_id``
    that is neither the one planner nor empty is INVALID_PLANNER; a pose
    that cannot be brought into ``map`` is TF_ERROR; the other failures are
    the world's (``SimWorld.plan_path``), each aborting the goal with its code
    and message; a found path is a ``nav_msgs/Path`` in ``map`` with a pose
    every cell (the map's resolution, 0.1 m without one), each facing along
    the path and the last with the goal's orientation, and ``planning_time``
    is the time the request took. Where it differs: there is no costmap to
    wait for and no ``plan`` topic, and ``compute_path_through_poses`` is not
    served.
    """

    check_twins = False  # the robot's planner, not a harness node

    def __init__(self, robot: SimRobot, *, context: Context, namespace: str = "") -> None:
        # Pinned and without parameter services, as bt_navigator (see _ActionHost.__init__).
        super().__init__("planner_server", context=context, namespace=namespace, start_parameter_services=False,
                         cli_args=["--ros-args", "-r", "__node:=planner_server"])
        self._robot = robot
        self._server: ActionServer | None = None
        self._server_lock = threading.Lock()

    def build(self, params: dict[str, Any]) -> None:
        with self._server_lock:
            if self._server is None:  # kept across cleanup, as bt_navigator's (ros2/rclpy#1385)
                self._server = ActionServer(
                    self,
                    ComputePathToPose,
                    "compute_path_to_pose",
                    execute_callback=self._execute,
                    goal_callback=self._on_goal,
                    cancel_callback=lambda _handle: CancelResponse.ACCEPT,
                )

    def release_action_server(self, *, destroy: bool) -> None:
        """Drop compute_path_to_pose; destroy it only when no executor can be using it. Safe to repeat."""
        with self._server_lock:
            server, self._server = self._server, None
        if server is not None and destroy:
            server.destroy()

    def _on_goal(self, request: ComputePathToPose.Goal) -> GoalResponse:
        if self._robot.silenced or not self._active:
            self.get_logger().info("Action server is inactive. Rejecting the goal.")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute(self, goal_handle: ServerGoalHandle) -> ComputePathToPose.Result:
        started = time.monotonic()
        plan, stamp_ns = self._plan(goal_handle.request)
        result = ComputePathToPose.Result()
        result.planning_time = _duration_msg(time.monotonic() - started)
        if plan.ok:
            result.path = _path_msg(plan, stamp_ns, self._robot.path_spacing_m)
            goal_handle.succeed()
        else:
            self.get_logger().warning(f"planning failed ({plan.error.value}): {plan.message}")
            result.error_code = plan.error.number
            result.error_msg = plan.message
            goal_handle.abort()
        return result

    def _plan(self, request: ComputePathToPose.Goal) -> tuple[PlanResult, int]:
        if request.planner_id not in ("", PLANNER_ID):
            return PlanResult(PlanErrorCode.INVALID_PLANNER, f"Planner id {request.planner_id} is invalid"), 0
        frames = [request.goal.header.frame_id] + ([request.start.header.frame_id] if request.use_start else [])
        if any(f.lstrip("/") not in ("", "map") for f in frames):
            return PlanResult(PlanErrorCode.TF_ERROR, "Unable to transform poses to global frame "
                                                      f"(frames {frames}; the sim has only 'map')"), 0
        start = _msg_to_pose(request.start) if request.use_start else None
        return self._robot.plan_path(start, _msg_to_pose(request.goal))


def _path_msg(plan: PlanResult, stamp_ns: int, spacing_m: float) -> PathMsg:
    """The plan's polyline as a ``nav_msgs/Path`` in ``map``, a pose every ``spacing_m`` along each segment."""
    msg = PathMsg()
    msg.header.frame_id = "map"
    msg.header.stamp = _time_msg(stamp_ns)
    poses = plan.poses
    out: list[PoseStamped] = []
    for a, b in zip(poses, poses[1:]):
        n = max(1, math.ceil(math.hypot(b.x - a.x, b.y - a.y) / spacing_m))
        out += [_pose_stamped(Pose2D(x=a.x + (b.x - a.x) * k / n, y=a.y + (b.y - a.y) * k / n, yaw=a.yaw), stamp_ns)
                for k in range(n)]
    out.append(_pose_stamped(poses[-1], stamp_ns))
    msg.poses = out
    return msg


class _Costmap(HarnessLifecycleNode):
    """A costmap node of the sim: named as its sub-namespace, serving ``clear_entirely_<name>``.

    From nav2_costmap_2d (kilted at 71a1d84f): ``Costmap2DROS`` nests its node
    in a sub-namespace of its own name under its server's namespace (a
    node-local ``__ns`` remap, which a global namespace remap does not
    override): ``global_costmap`` under the planner's, ``local_costmap`` under
    the controller's (``nav2_controller/src/controller_server.cpp``);
    ``clear_costmap_service.cpp`` serves ``"clear_entirely_" + getName()``
    (nav2_msgs/srv/ClearEntireCostmap, an empty request and response) from
    configure on. A clear goes to ``SimWorld.clear_costmaps`` (counted; frees
    a robot a ``stuck`` fault freed by ``clear_costmaps`` holds). Before
    configure and after cleanup the service still answers (it is kept, as the
    action servers are) but clears nothing; a dead robot's clear clears nothing.
    """

    check_twins = False  # the robot's costmap, not a harness node

    def __init__(self, name: str, robot: SimRobot, *, context: Context, namespace: str) -> None:
        super().__init__(name, context=context, namespace=namespace, start_parameter_services=False,
                         cli_args=["--ros-args", "-r", f"__ns:={namespace}", "-r", f"__node:={name}"])
        self._robot = robot
        self._which = name.removesuffix("_costmap")
        self._clear_service: Any = None
        self._serving = False

    def build(self, params: dict[str, Any]) -> None:
        if self._clear_service is None:  # created once and kept; answered only while configured
            self._clear_service = self.create_service(
                ClearEntireCostmap, f"clear_entirely_{self.get_name()}", self._on_clear_entirely)
        self._serving = True

    def release(self) -> None:
        self._serving = False

    def _on_clear_entirely(self, request: ClearEntireCostmap.Request,
                           response: ClearEntireCostmap.Response) -> ClearEntireCostmap.Response:
        if not self._serving:
            self.get_logger().warning(f"clear_entirely_{self.get_name()}: not configured, nothing cleared")
            return response
        self.get_logger().info(f"Received request to clear entirely the {self.get_name()}")
        self._robot.clear_costmaps(self._which)
        return response


class _LocalCostmap(_Costmap):
    """``local_costmap`` (in the sub-namespace ``local_costmap``): only ``clear_entirely_local_costmap``."""

    def __init__(self, robot: SimRobot, *, context: Context, namespace: str) -> None:
        super().__init__(LOCAL_COSTMAP_NAMESPACE, robot, context=context, namespace=namespace)


class _GlobalCostmap(_Costmap):
    """``global_costmap``: ``clear_entirely_global_costmap`` and ``GetCosts``, answered from ``SimWorld.cost_at``.

    From nav2_costmap_2d (``costmap_2d_ros.cpp``, kilted at 71a1d84f): the node
    is named ``global_costmap`` in the sub-namespace ``global_costmap`` of the
    planner's namespace (see ``_Costmap``), and serves
    ``get_cost_global_costmap`` (``"get_cost_" + get_name()``) from configure
    on. Each pose is looked up in ``map``: a pose in another frame cannot be
    transformed (``success`` false, cost 255, NO_INFORMATION), one off the map
    is ``success`` false with cost 254 (LETHAL_OBSTACLE, as Kilted answers it),
    the rest get their cell's cost (0 free, 253 inscribed, 254 lethal).
    ``use_footprint`` is accepted and changes nothing: the sim's footprint is
    its centre, the inflation standing for its radius. Before configure and
    after cleanup every pose is answered 255 with ``success`` false.
    """

    def __init__(self, robot: SimRobot, *, context: Context, namespace: str) -> None:
        super().__init__(COSTMAP_NAMESPACE, robot, context=context, namespace=namespace)
        self._service: Any = None

    def build(self, params: dict[str, Any]) -> None:
        if self._service is None:  # created once and kept; answered only while configured
            self._service = self.create_service(GetCosts, GET_COSTS_SERVICE, self._on_get_costs)
        super().build(params)

    def _on_get_costs(self, request: GetCosts.Request, response: GetCosts.Response) -> GetCosts.Response:
        poses = list(request.poses)
        in_map_frame = [p.header.frame_id.lstrip("/") in ("", "map") for p in poses]
        looked_up = self._robot.costs([(p.pose.position.x, p.pose.position.y) for p in poses])
        costs: list[float] = []
        success = self._serving
        for ok_frame, (cost, on_map) in zip(in_map_frame, looked_up):
            if not self._serving or not ok_frame:
                costs.append(float(COST_NO_INFORMATION))
                success = False
            elif not on_map:
                costs.append(float(COST_LETHAL))
                success = False
            else:
                costs.append(float(cost))
        response.costs = costs
        response.success = success
        return response


# --------------------------------------------------------------------------- executable


def main(argv: Sequence[str] | None = None) -> int:
    """``sim_robot`` executable: parameters from ``--ros-args``; dies for real by default.

    ``argv`` is the full vector including the program name (default ``sys.argv``).
    Returns 0 on Ctrl-C or external shutdown, 2 on an invalid configuration;
    the ``die`` fault in ``exit`` mode ends the process with code 3.
    """
    rclpy.init(args=list(argv) if argv is not None else sys.argv)
    robot: SimRobot | None = None
    executor = MultiThreadedExecutor(num_threads=max(MIN_EXECUTOR_THREADS, 8))
    try:
        try:
            robot = SimRobot(die_mode=DieMode.EXIT)
        except HarnessError as exc:
            print(f"sim_robot: {exc}", file=sys.stderr)
            return 2
        except _rclpy.RCLError:
            if rclpy.ok():
                raise
            return 0  # Ctrl-C during start-up shut the context under the constructor.
        robot.add_to_executor(executor)
        robot.node.get_logger().info(
            f"sim_robot up: start={robot.config.start.model_dump()} speed={robot.config.speed} "
            f"faults={len(robot.config.faults)} providers={','.join(robot.config.providers) or 'none'} "
            f"cameras={','.join(robot.config.cameras) or 'none'} "
            f"die_mode={robot.die_mode.value} "
            f"truth_log={robot.truth_log_path or 'off'}"
        )
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except _rclpy.RCLError:
        if rclpy.ok():
            raise  # Ctrl-C can land while the executor builds a wait set; anything else is real.
    finally:
        if robot is not None:
            robot.stop()
        executor.shutdown(timeout_sec=2.0)
        if robot is not None:
            robot.destroy()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
