"""The snapshot aggregator: a lifecycle node that turns robot topics into WorldSnapshots.

It feeds a core ``SnapshotBuilder`` from the localized pose (``/amcl_pose``,
or map -> base_link from tf2), odometry, the battery, and the navigator's
hidden action topics (``<nav_action>/_action/status`` and ``/_action/feedback``),
so it observes Nav2 without being its client. It serves ``~/capture`` and
publishes ``~/snapshot`` at a low rate (reason ``periodic``) and on salient
events (reason ``salient_event``).

A body may carry further Nav2 stacks, each under an action namespace (the
harness configuration's navigation provider cards, issue 18): ``nav_namespaces``
names them, and each one's ``<ns>/<nav_action>`` is watched as the robot's own.
The controller is ACTIVE while any watched navigator lists a goal, so a goal
sent to ``alt/navigate_to_pose`` is not taken for an idle robot.

Source stamps are message header stamps; "now" is the node clock, so the
freshness of every field is judged on one time base (sim time included).
The navigator's status topic has no header and only publishes on change, so
its stamp is the receipt time, re-asserted while the status publisher is
still on the graph (or confirmed by feedback for the active goal).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import rclpy
import rclpy.time
from action_msgs.msg import GoalStatusArray
from geometry_msgs.msg import PoseWithCovarianceStamped
from nav2_msgs.action import NavigateToPose
from nav_msgs.msg import Odometry
from pydantic import ValidationError
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos import (
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_action_status_default,
    qos_profile_sensor_data,
)
from sensor_msgs.msg import BatteryState

from robot_harness.core.clock import IdGenerator
from robot_harness.core.errors import RefusalError
from robot_harness.core.records import WorldSnapshot
from robot_harness.core.snapshot import FreshnessConfig, SalientEvent, SnapshotBuilder
from robot_harness.msg import WorldSnapshot as WorldSnapshotMsg
from robot_harness.nodes._lifecycle import ConfigureError, HarnessLifecycleNode
from robot_harness.nodes.diagnostics import Check, Level, field_ages, snapshot_freshness_check
from robot_harness.nodes._util import LatchedSource, run_node
from robot_harness.nodes.conversions import (
    nav_feedback_progress,
    parse_odometry_twist,
    parse_pose_and_covariance,
    active_goal_ids,
    goal_id_to_hex,
    pose_msg_to_pose2d,
    snapshot_to_msg,
    stamp_to_float,
    transform_to_pose2d,
)
from robot_harness.srv import CaptureSnapshot

__all__ = ["SnapshotAggregator", "main"]

NavFeedbackMessage = NavigateToPose.Impl.FeedbackMessage

_FRESHNESS_PARAMS = (
    "pose_max_age_s",
    "velocity_max_age_s",
    "navigation_max_age_s",
    "battery_max_age_s",
    "jump_threshold_m",
    "max_speed_mps",
    "battery_low_threshold",
)

_RELIABLE_10 = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


@dataclass(eq=False)
class _NavWatch:
    """One navigator (the robot's own Nav2, or a provider's under its namespace) as the aggregator follows it.

    Touched only by the node's default callback group (status, feedback, the liveness timer), one at a time."""

    status_topic: str
    feedback_topic: str
    latched: LatchedSource
    goal_ids: tuple[str, ...] = ()
    """Its goals in ACCEPTED or EXECUTING, as its last status said (voided when its publisher restarted)."""
    publisher_ticks: int = 0
    """Consecutive liveness ticks its status publisher has been on the graph."""
    vouched: bool = False
    """Its goal list can be vouched for: a status was received, or its publisher was seen idle for two ticks."""


class SnapshotAggregator(HarnessLifecycleNode):
    """Lifecycle node ``snapshot_aggregator``; see the module docstring.

    Unconfigured: parameters only. Configured (inactive): subscriptions,
    publisher, timers and ``~/capture`` exist and observations already feed
    the builder (so latched state such as the navigator's transient-local
    status is not lost), but ``~/capture`` answers ``ok=false`` and nothing is
    published. Active: snapshots are served and published.
    """

    def __init__(self, node_name: str = "snapshot_aggregator", **kwargs: Any) -> None:
        defaults = FreshnessConfig()
        super().__init__(node_name, params={
            "pose_topic": "amcl_pose",  # relative: under the node's namespace, like Nav2's AMCL
            "use_tf": False,
            "map_frame": "map",
            "base_frame": "base_link",
            "tf_rate_hz": 20.0,
            "odom_topic": "odom",
            "battery_topic": "battery_state",
            "nav_action": "navigate_to_pose",
            # Further Nav2 stacks on this body, by action namespace ("alt": alt/navigate_to_pose). The robot's own
            # ("") is always watched; [""] is the default because rclpy cannot type an empty list.
            "nav_namespaces": [""],
            **{name: float(getattr(defaults, name)) for name in _FRESHNESS_PARAMS},
            "snapshot_rate_hz": 1.0,
            "salient_min_interval_s": 0.5,
            "autostart": False,
        }, **kwargs)

        self._ids = IdGenerator()
        self._builder: SnapshotBuilder | None = None
        self._lock = threading.Lock()
        """Guards the builder: observations and captures may run on different executor threads."""
        self._capture_group = MutuallyExclusiveCallbackGroup()
        """The capture service's own group. In the node's default (mutually exclusive) group,
        a multi-threaded executor starves it: every wait finds a fresh pose or odometry message
        ready first, which takes the group, so the ready request is skipped pass after pass
        (seen: no capture answered for 25 s in the one-process bring-up on a loaded host)."""
        self._subscriptions_made: list[Any] = []
        self._timers_made: list[Any] = []
        self._periodic_timers: list[Any] = []
        """Timers that run only while active (the rest run while configured)."""
        self._snapshot_pub: Any = None
        self._capture_srv: Any = None
        self._tf_buffer: Any = None
        self._tf_listener: Any = None
        self._pose_source = ""
        self._odom_source = ""
        self._battery_source = ""
        self._nav_watches: tuple[_NavWatch, ...] = ()
        self._nav_source = ""
        """Where the navigation field comes from: the watched status topics, the robot's own first."""
        self._tf_source = ""
        self._salient_min_interval = 0.5
        self._last_salient: dict[str, float] = {}

        self.autostart_if_asked()

    # -- lifecycle ------------------------------------------------------------------

    def build(self, params: dict[str, Any]) -> None:
        try:
            config = FreshnessConfig(**{name: params[name] for name in _FRESHNESS_PARAMS})
        except ValidationError as exc:
            raise ConfigureError("invalid freshness parameters", exc) from exc
        rate = float(params["snapshot_rate_hz"])
        tf_rate = float(params["tf_rate_hz"])
        if rate < 0.0 or tf_rate <= 0.0:
            raise ConfigureError("rates", ValueError("snapshot_rate_hz must be >= 0 and tf_rate_hz > 0"))
        try:
            self._create_resources(config, rate, tf_rate)
        except Exception as exc:  # a half-built node must not stay half-built (the template releases it)
            raise ConfigureError("configure failed", exc) from exc

    def activated(self) -> None:
        self._last_salient.clear()
        for timer in self._periodic_timers:
            timer.reset()

    def deactivated(self) -> None:
        for timer in self._periodic_timers:
            timer.cancel()

    def release(self) -> None:
        self._destroy_resources()

    @property
    def is_active(self) -> bool:
        return self._active

    # -- resources --------------------------------------------------------------------

    def _create_resources(self, config: FreshnessConfig, rate: float, tf_rate: float) -> None:
        map_frame = str(self.get_parameter("map_frame").value)
        self._builder = SnapshotBuilder(config, frame_id=map_frame)
        self._salient_min_interval = float(self.get_parameter("salient_min_interval_s").value)

        self._snapshot_pub = self.create_lifecycle_publisher(
            WorldSnapshotMsg, "~/snapshot", _RELIABLE_10
        )
        self._capture_srv = self.create_service(CaptureSnapshot, "~/capture", self._on_capture,
                                                callback_group=self._capture_group)

        use_tf = bool(self.get_parameter("use_tf").value)
        if use_tf and not self._start_tf(map_frame, tf_rate):
            use_tf = False
        if not use_tf:
            pose_topic = self._resolved("pose_topic")
            self._pose_source = pose_topic
            self._subscriptions_made.append(
                self.create_subscription(
                    PoseWithCovarianceStamped, pose_topic, self._on_pose, _RELIABLE_10, raw=True
                )
            )

        odom_topic = self._resolved("odom_topic")
        self._odom_source = odom_topic
        self._subscriptions_made.append(
            self.create_subscription(Odometry, odom_topic, self._on_odom, qos_profile_sensor_data, raw=True)
        )
        battery_topic = self._resolved("battery_topic")
        self._battery_source = battery_topic
        self._subscriptions_made.append(
            self.create_subscription(
                BatteryState, battery_topic, self._on_battery, qos_profile_sensor_data
            )
        )

        nav_action = str(self.get_parameter("nav_action").value).rstrip("/")
        watches = [self._watch_navigator(action) for action in self._nav_actions(nav_action)]
        self._nav_watches = tuple(watches)
        self._nav_source = ", ".join(w.status_topic for w in watches)

        self._builder.expect_sources(pose=self._tf_source if use_tf else self._pose_source, velocity=odom_topic,
                                     battery=battery_topic, navigation=self._nav_source)
        self._timers_made.append(
            self.create_timer(config.navigation_max_age_s / 4.0, self._on_nav_liveness)
        )
        if rate > 0.0:
            timer = self.create_timer(1.0 / rate, self._on_periodic, autostart=False)
            self._periodic_timers.append(timer)
            self._timers_made.append(timer)

    def _nav_actions(self, nav_action: str) -> list[str]:
        """``nav_action`` (the robot's own navigator) first, then under each of ``nav_namespaces`` once
        (``alt``: ``alt/navigate_to_pose``, as the supervisor's ports name a provider's actions)."""
        actions = [nav_action]
        for raw in self.get_parameter("nav_namespaces").value or ():
            ns = str(raw).strip("/")
            action = f"{ns}/{nav_action.lstrip('/')}" if ns else nav_action
            if action in actions:
                continue
            try:
                self.resolve_topic_name(action)
            except Exception as exc:  # rclpy's own error, said as a configuration problem
                raise ConfigureError(f"nav_namespaces entry {raw!r} is not a valid namespace", exc) from exc
            actions.append(action)
        return actions

    def _watch_navigator(self, action: str) -> _NavWatch:
        """Subscribe to one navigator's status and feedback."""
        watch = _NavWatch(status_topic=f"{action}/_action/status", feedback_topic=f"{action}/_action/feedback",
                          latched=LatchedSource(self, f"{action}/_action/status"))
        self._subscriptions_made.append(self.create_subscription(
            GoalStatusArray, watch.status_topic, lambda msg: self._on_nav_status(watch, msg),
            qos_profile_action_status_default))
        self._subscriptions_made.append(self.create_subscription(
            NavFeedbackMessage, watch.feedback_topic, lambda msg: self._on_nav_feedback(watch, msg), _RELIABLE_10))
        return watch

    def _resolved(self, param: str) -> str:
        """The topic parameter's fully-qualified name (``amcl_pose`` -> ``/robot1/amcl_pose`` under ``/robot1``):
        subscribed by it, and named by it in every snapshot's field sources and the model's view."""
        name = str(self.get_parameter(param).value)
        try:
            return self.resolve_topic_name(name)
        except Exception as exc:  # an invalid name: rclpy's own error, said as a configuration problem
            raise ConfigureError(f"{param} {name!r} is not a valid topic name", exc) from exc

    def _start_tf(self, map_frame: str, tf_rate: float) -> bool:
        try:
            import tf2_ros  # type: ignore[import-not-found]
        except ImportError:
            self.get_logger().warning("use_tf is set but tf2_ros is not importable; using pose_topic")
            return False
        base_frame = str(self.get_parameter("base_frame").value)
        self._tf_source = f"tf:{map_frame}->{base_frame}"
        self._tf_buffer = tf2_ros.Buffer()
        self._tf_listener = tf2_ros.TransformListener(self._tf_buffer, self)
        tf_errors = (
            tf2_ros.LookupException,
            tf2_ros.ConnectivityException,
            tf2_ros.ExtrapolationException,
        )

        def on_tf_tick() -> None:
            builder = self._builder
            if builder is None:
                return
            try:
                t = self._tf_buffer.lookup_transform(map_frame, base_frame, rclpy.time.Time())
            except tf_errors:
                return
            with self._lock:
                events = builder.update_pose(
                    transform_to_pose2d(t.transform), stamp_to_float(t.header.stamp), self._tf_source
                )
            if events:
                self._on_salient(events)

        self._timers_made.append(self.create_timer(1.0 / tf_rate, on_tf_tick))
        return True

    def _destroy_resources(self) -> None:
        self._active = False
        for sub in self._subscriptions_made:
            self.destroy_subscription(sub)
        self._subscriptions_made.clear()
        for timer in self._timers_made:
            self.destroy_timer(timer)
        self._timers_made.clear()
        self._periodic_timers.clear()
        self._nav_watches = ()
        if self._capture_srv is not None:
            self.destroy_service(self._capture_srv)
            self._capture_srv = None
        if self._snapshot_pub is not None:
            self.destroy_lifecycle_publisher(self._snapshot_pub)
            self._snapshot_pub = None
        if self._tf_listener is not None:
            unregister = getattr(self._tf_listener, "unregister", None)
            if unregister is not None:
                unregister()
            self._tf_listener = None
            self._tf_buffer = None
        self._builder = None

    # -- observations (hot path: no logging, no work beyond the update) --------------------

    def _on_pose(self, data: bytes) -> None:
        # Subscribed raw: six numbers are decoded straight from the CDR bytes.
        builder = self._builder
        if builder is None:
            return
        stamp, pose, covariance = parse_pose_and_covariance(data)
        with self._lock:
            events = builder.update_pose(pose, stamp, self._pose_source, covariance)
        if events:
            self._on_salient(events)

    def _on_odom(self, data: bytes) -> None:
        builder = self._builder
        if builder is None:
            return
        stamp, velocity = parse_odometry_twist(data)
        with self._lock:
            builder.update_velocity(velocity, stamp, self._odom_source)

    def _on_battery(self, msg: BatteryState) -> None:
        builder = self._builder
        if builder is None:
            return
        with self._lock:
            events = builder.update_battery(
                msg.percentage, stamp_to_float(msg.header.stamp), self._battery_source
            )
        if events:
            self._on_salient(events)

    def _active_goal_ids(self) -> tuple[str, ...]:
        """Every watched navigator's active goals, the robot's own first (goal ids are UUIDs: no clashes)."""
        return tuple(goal for watch in self._nav_watches for goal in watch.goal_ids)

    def _on_nav_status(self, watch: _NavWatch, msg: GoalStatusArray) -> None:
        builder = self._builder
        if builder is None:
            return
        watch.latched.on_message()
        watch.goal_ids = tuple(active_goal_ids(msg))
        watch.vouched = True
        with self._lock:
            events = builder.update_nav_status(self._active_goal_ids(), self._now(), self._nav_source)
        if events:
            self._on_salient(events)

    def _on_nav_feedback(self, watch: _NavWatch, msg: Any) -> None:
        builder = self._builder
        if builder is None:
            return
        current = msg.feedback.current_pose
        stamp = current.header.stamp
        with self._lock:
            builder.update_nav_feedback(
                goal_id_to_hex(msg.goal_id),
                pose_msg_to_pose2d(current.pose),
                msg.feedback.distance_remaining,
                stamp_to_float(stamp) if stamp.sec or stamp.nanosec else self._now(),
                watch.feedback_topic,
                nav_feedback_progress(msg.feedback),
            )

    def _on_nav_liveness(self) -> None:
        """Re-assert the latched navigators' status while it can be vouched for.

        An action server that has never had a goal never publishes status;
        once its status publisher has been seen on two consecutive ticks with
        nothing received, it is taken to be idle. A navigator whose status
        publisher is off the graph counts for nothing, unless it last listed a
        goal: then nothing is re-asserted (the navigation field goes stale and
        the controller UNKNOWN) until it is back. With several navigators
        (``nav_namespaces``), one vouched for and none so lost is enough, so a
        provider card whose stack does not run leaves the robot's state known.
        """
        builder = self._builder
        if builder is None:
            return
        vouched = voided = lost = False
        for watch in self._nav_watches:
            if self.count_publishers(watch.status_topic) == 0:
                watch.publisher_ticks = 0
                lost = lost or bool(watch.goal_ids)
                continue
            watch.publisher_ticks += 1
            if watch.latched.gone():
                # The navigator that sent the latched status died; its successor has
                # published nothing (transient local would have delivered it): idle.
                self.get_logger().warning(f"navigator status publisher on {watch.status_topic} restarted: "
                                          "its predecessor's goals are void")
                watch.goal_ids = ()
                voided = True
            elif watch.vouched or watch.publisher_ticks >= 2:
                watch.vouched = vouched = True
        if (voided or vouched) and not lost:
            with self._lock:
                events = builder.update_nav_status(self._active_goal_ids(), self._now(), self._nav_source)
            if events:
                self._on_salient(events)

    # -- /diagnostics ------------------------------------------------------------------------

    def diagnostic_tasks(self) -> dict[str, Callable[[], Check]]:
        return {"snapshot freshness": self._freshness_diagnostic}

    def _freshness_diagnostic(self) -> Check:
        """Each field's age against its bound, as a capture now would judge it (configured or active)."""
        builder = self._builder
        if builder is None:
            return Check(Level.WARN, "not configured: no snapshots", {})
        with self._lock:
            snap = builder.capture(snapshot_id="diagnostics", now=self._now(), reason="diagnostics")
        return snapshot_freshness_check(field_ages(snap))

    # -- snapshots ---------------------------------------------------------------------------

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def capture(self, *, reason: str, mission_id: str = "") -> WorldSnapshot:
        """A snapshot now. Raises ``RefusalError`` unless the node is active."""
        builder = self._builder
        if builder is None or not self._active:
            raise RefusalError("snapshot_aggregator is not active", node=self.get_name())
        with self._lock:
            return builder.capture(
                snapshot_id=self._ids.new("snap"), now=self._now(), reason=reason, mission_id=mission_id
            )

    def _publish(self, snapshot: WorldSnapshot) -> None:
        pub = self._snapshot_pub
        if pub is not None and self._active:
            pub.publish(snapshot_to_msg(snapshot))

    def _on_salient(self, events: Sequence[SalientEvent]) -> None:
        if not self._active:
            return
        now = time.monotonic()
        fresh = []
        for event in events:
            last = self._last_salient.get(event.type.value)
            if last is not None and now - last < self._salient_min_interval:
                continue
            self._last_salient[event.type.value] = now
            fresh.append(event)
        if not fresh:
            return
        snapshot = self.capture(reason="salient_event")
        for event in fresh:
            self.get_logger().info(
                f"salient event {event.type.value} -> snapshot {snapshot.snapshot_id}: {event.detail}"
            )
        self._publish(snapshot)

    def _on_periodic(self) -> None:
        if self._builder is None or not self._active:
            return
        self._publish(self.capture(reason="periodic"))

    def _on_capture(
        self, request: CaptureSnapshot.Request, response: CaptureSnapshot.Response
    ) -> CaptureSnapshot.Response:
        response.mission_id, response.request_id = request.mission_id, request.request_id  # correlation, always
        if self._builder is None or not self._active:
            response.ok = False
            response.error = "snapshot_aggregator is not active"
            return response
        snapshot = self.capture(reason=request.reason or "on_request", mission_id=request.mission_id)
        response.ok = True
        response.snapshot = snapshot_to_msg(snapshot)
        return response


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``ros2 run robot_harness snapshot_aggregator``.

    Its callbacks never block, so one thread spins it (cheapest at 200 Hz pose).
    """
    return run_node(SnapshotAggregator, argv, threads=1)
