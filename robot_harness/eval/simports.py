"""The simulated robot in-process, on a virtual clock: the core's ports over ``SimWorld``.

``sim_robot`` (the ROS node) and this module drive the same pure world model
(``robot_harness.sim.world``) with the same faults; this one skips DDS and
real time, so a mission of minutes runs in milliseconds and a whole benchmark
suite fits in a CI budget. What the harness sees goes through the same core
``SnapshotBuilder`` the aggregator feeds; what really happened stays in the
world (true pose, goal history), which only the adjudicator reads.

Time: a ``ManualClock`` that advances only when the harness waits (a backend poll, a
bounded sleep, a model's latency). Each advance steps the world and publishes what the
robot's topics would have carried in that interval (pose at 20 Hz, odometry, battery,
navigator status, feedback).

Deliveries follow the delivery acknowledgement contract ``sim_robot`` and ``RosRobotIO``
keep over ROS: a speech or message result carries an ``ack`` from the receiving device,
whose sha256 is that of the exact payload, unless the world withholds acks (the ``no_ack``
fault: the payload arrives, no ack does); then the sender waits out its bounded wait and
returns ``ack_error`` instead.

Two faults of the robot's outside are decided by the world and carried out here as
``sim_robot`` carries them out over ROS:

* ``pose_dropout``: while ``SimWorld.pose_silent`` holds (from ``at_s``, or ``after_s``
  into the ``on_goal``-th goal; ``at_s: 0``: from the start) no pose is published.
  Motion, feedback and results carry on: only the evidence is missing.
* ``external_goal``: at ``at_s`` the world sends the navigator a goal ``dx``/``dy`` from
  the robot's true pose, as another client would (``SimWorld.foreign_goals``); the robot
  drives off on it and a running harness goal ends aborted (preempted). It is not the
  harness's goal: its events reach no harness handle, but the navigator's status lists
  it, as Nav2's does.

Every Nav2 interface of ``core.nav_goals.NavGoal`` goes to the world's matching call
(``submit_goal``, ``submit_route``, ``submit_spin`` / ``submit_backup`` / ``submit_wait``);
``CLEAR_COSTMAPS`` is a service that answers at once, so its goal id gets an accepted ack
and, in the same breath, a terminal ``succeeded`` result. What the events carry in
``detail``, as the real backend would report it:

* every result: ``error_code`` and ``error_msg`` (Nav2's result fields; 0 and "" on
  success), and ``message`` while a ``claims_completion`` fault holds;
* a route's result: ``waypoints``, a list of ``WaypointReport`` dicts: every waypoint with
  its state for NavigateThroughPoses (``waypoint_statuses``), only the missed ones for
  FollowWaypoints (``missed_waypoints``);
* feedback: ``number_of_poses_remaining`` (NavigateThroughPoses), ``current_waypoint``
  (FollowWaypoints), ``distance_traveled`` (BackUp), ``angular_distance_traveled`` (Spin),
  ``time_left`` (Wait); a behaviour's feedback has no ``distance_remaining``.

Navigation providers (issue 18): given ``navigation_providers`` (provider name -> the namespace of its
Nav2 actions, from the harness config's navigation cards), the ports are a ``core.routing.ProviderNavigation``:
``use(name)`` picks the provider the next ``send_goal`` goes through (else the first), and the goal enters
the world through that namespace's ``SimConfig.providers`` stack ("" the robot's own), at its speed and
under its faults. A namespace the world does not serve answers as ``nodes.ros_ports.Nav2NavigationPort``
answers for an action server it does not discover: after its discovery bound, NavigateToPose raises
``BackendUnavailable`` and another kind gets a rejected ack. Costmap clears are the body's (the robot's own
costmaps, whichever provider). Without providers the ports have no ``providers`` or ``use`` at all.

More cameras (``SimConfig.cameras``): each one's frames are kept as its topic would carry them (at its
rate, none once its ``camera_dead`` fault starts), and ``use_camera(topic)`` picks the camera the next
``capture_image`` reads, as ``RosRobotIO.use_camera`` does: its latest frame, refused as ``RosRobotIO``
refuses one older than ``MAX_FRAME_AGE_S`` or none at all.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.clock import IdGenerator, ManualClock
from ..core.errors import BackendUnavailable, HarnessTimeout, ToolExecutionError, UsageError
from ..core.nav_goals import NavGoal, NavGoalKind, WaypointReport, WaypointState
from ..core.ports import BackendEvent, GoalAck
from ..core.preconditions import CostProbe, Feasibility, LifecycleProbe, PathProbe, ProbeStatus
from ..core.records import ArtifactRef, Pose2D, PoseCovariance, WorldSnapshot
from ..core.snapshot import FreshnessConfig, SnapshotBuilder
from ..evidence.png import encode_png
from ..sim.world import BUILTIN_CAMERA_TOPIC, GoalDecision, GoalEventType, GoalStatus, GoalView, SimConfig, SimWorld

__all__ = ["SimPorts", "Capture", "ACK_WAIT_S"]

_EPOCH = 1_800_000_000.0
_POSE_PERIOD_S = 0.05
_ODOM_PERIOD_S = 0.02
_BATTERY_PERIOD_S = 1.0
_FEEDBACK_PERIOD_S = 0.2
ACK_WAIT_S = 2.0
"""How long a sender waits for a delivery acknowledgement (the contract's default bounded wait)."""
DISCOVERY_S = 2.0
"""How long a send looks for an action server before giving up (``Nav2NavigationPort._DISCOVERY_S``)."""
MAX_FRAME_AGE_S = 2.0
"""The oldest camera frame a capture takes (``RosRobotIO``'s ``max_frame_age_s`` default)."""
SPEAKER_ID = "sim_robot/speaker"
OUTBOX_ID = "sim_robot/outbox"
_STATUS_NAMES = {
    GoalEventType.SUCCEEDED: "succeeded",
    GoalEventType.ABORTED: "aborted",
    GoalEventType.CANCELED: "canceled",
}


@dataclass
class Capture:
    """One camera capture, with the true pose at that instant (for adjudication)."""

    label: str
    true_pose: Pose2D
    t: float
    sha256: str
    camera: str = ""
    """The image topic it was read from ("" the built-in camera)."""


@dataclass
class _Goal:
    goal_id: str
    index: int
    """The world's goal index; 0 for a costmap clear (a service, not a goal)."""
    kind: NavGoalKind = NavGoalKind.NAVIGATE_TO_POSE
    last_feedback: float = -math.inf
    ended: bool = False
    namespace: str = ""
    """The namespace of the provider it went through ("" the robot's own Nav2)."""


_NAVIGATION_KINDS = frozenset({NavGoalKind.NAVIGATE_TO_POSE, NavGoalKind.NAVIGATE_THROUGH_POSES,
                               NavGoalKind.FOLLOW_WAYPOINTS})
"""Goals that take the robot somewhere: counted by ``blind_dispatches`` and ``infeasible_dispatches``."""


@dataclass
class _Streams:
    pose: float = -math.inf
    odom: float = -math.inf
    battery: float = -math.inf


@dataclass
class SimPorts:
    """NavigationPort + SnapshotPort + RobotIO + FeasibilityPort over one ``SimWorld``."""

    config: SimConfig
    artifacts_dir: Path
    freshness: FreshnessConfig = field(default_factory=FreshnessConfig)
    name: str = "sim/navigate_to_pose"
    navigation_providers: Mapping[str, str] = field(default_factory=dict)
    """Navigation provider name -> the namespace of its Nav2 actions ("" the robot's own); empty: one provider,
    and no ``providers`` / ``use`` (``isinstance(ports, ProviderNavigation)`` is then False)."""

    def __post_init__(self) -> None:
        self._namespaces = {name: ns.strip("/") for name, ns in self.navigation_providers.items()}
        self._next_provider = ""
        self._next_camera = ""
        self._frames: dict[str, tuple[float, Pose2D]] = {}
        """Each extra camera's latest frame: (when, the true pose it shows)."""
        if self._namespaces:
            # Only now: the protocol is checked on these attributes, and without providers there is no routing.
            self.providers: tuple[str, ...] = tuple(self._namespaces)
            self.use = self._use
        self.clock = ManualClock(_EPOCH)
        """Virtual time: it moves only when the harness waits (``advance``)."""
        self.world = SimWorld(self.config)
        self.builder = SnapshotBuilder(self.freshness)
        self.ids = IdGenerator(self.config.seed)
        self._goals: dict[str, _Goal] = {}
        self._by_index: dict[int, _Goal] = {}
        self._events: list[BackendEvent] = []
        self._streams = _Streams()
        self._status_tracked: dict[str, str] = {}
        self.captures: list[Capture] = []
        self.spoken: list[tuple[str, float]] = []
        self.messages: list[dict[str, Any]] = []
        self.sent_goals: list[str] = []
        self.sim_cpu_s = 0.0
        """Wall time spent simulating the world (stepping, publishing), so the harness's own cost can be told apart."""
        self.blind_dispatches = 0
        """Goals accepted while the pose stream was silent or frozen beyond the freshness bound (ground truth)."""
        self.infeasible_dispatches = 0
        """Navigation goals sent that could not be reached (ground truth): the navigator inactive, or no path from
        the true pose (the goal in an obstacle, off the map, behind a closed door); for a route, some leg without a
        path (the first from the true pose, each next from the waypoint before). Behaviours are not counted."""
        self._pose_sample_t: float | None = None
        self.trajectory: list[tuple[float, Pose2D]] = [(self.clock.now(), self.world.true_pose)]
        """The robot's true pose every 0.1 s of sim time (ground truth; the harness never sees it)."""
        self._publish(force=True)

    # -- time -----------------------------------------------------------------

    def advance(self, dt: float) -> None:
        """Step the world by ``dt`` (in small slices) and publish what its topics would carry."""
        started = time.perf_counter()
        try:
            self._advance(dt)
        finally:
            self.sim_cpu_s += time.perf_counter() - started

    def _advance(self, dt: float) -> None:
        end = self.clock.now() + max(0.0, dt)
        while self.clock.now() < end - 1e-9:
            h = min(0.02, end - self.clock.now())
            self.world.step(h)
            self.clock.advance(h)
            if self.clock.now() - self.trajectory[-1][0] >= 0.1 - 1e-9:
                self.trajectory.append((self.clock.now(), self.world.true_pose))
            self._publish()

    def sleep(self, dt: float) -> None:
        self.advance(dt)

    @property
    def foreign_goals(self) -> set[int]:
        """World goal indices another client sent (``external_goal``), not the harness."""
        return set(self.world.foreign_goals)

    # -- SnapshotPort ---------------------------------------------------------

    def capture(self, *, reason: str, mission_id: str) -> WorldSnapshot:
        """The aggregator outlives the robot: a dead robot's fields simply go STALE."""
        return self.builder.capture(snapshot_id=self.ids.new("snap"), now=self.clock.now(), reason=reason,
                                    mission_id=mission_id)

    # -- NavigationPort -------------------------------------------------------

    def _use(self, provider: str) -> None:
        """``ProviderNavigation.use``: the provider the next ``send_goal`` goes through."""
        if provider not in self._namespaces:
            raise UsageError(f"no navigation provider {provider!r} (providers: {', '.join(self._namespaces)})",
                             provider=provider)
        self._next_provider = provider

    def _take_namespace(self) -> str:
        """The namespace the next send goes through (the chosen provider's, else the first's), chosen once."""
        name, self._next_provider = self._next_provider, ""
        if not self._namespaces:
            return ""
        return self._namespaces[name or next(iter(self._namespaces))]

    def send_goal(self, *, target: Pose2D, frame_id: str, timeout_s: float, goal_id: str = "",
                  goal: NavGoal | None = None) -> GoalAck:
        """``goal`` None or NAVIGATE_TO_POSE: a NavigateToPose to ``target`` (the goal's pose when given)."""
        kind = goal.kind if goal is not None else NavGoalKind.NAVIGATE_TO_POSE
        ns = self._take_namespace()
        if ns and ns not in self.config.providers and kind is not NavGoalKind.CLEAR_COSTMAPS:
            return self._not_served(f"{ns}/{kind.value}", kind, goal_id, timeout_s)
        if self.world.dead:
            self.advance(timeout_s)
            raise HarnessTimeout(f"no answer within {timeout_s} s")
        goal_id = goal_id or self.ids.new("goal")
        if goal_id in self._status_tracked:
            return GoalAck(accepted=False, goal_id=goal_id, reason="goal id already exists")
        self.sent_goals.append(goal_id)
        if kind is NavGoalKind.CLEAR_COSTMAPS:
            assert goal is not None
            return self._clear_costmaps(goal_id, goal)
        if kind in _NAVIGATION_KINDS and not self._feasible(goal.poses if goal is not None else (target,), ns):
            self.infeasible_dispatches += 1
        decision = self._dispatch(kind, target, goal, ns)
        if not decision.accepted:
            return GoalAck(accepted=False, goal_id=goal_id, reason=decision.reason)
        if kind in _NAVIGATION_KINDS and self._pose_blind():
            self.blind_dispatches += 1
        g = _Goal(goal_id, decision.goal_index, kind, namespace=ns)
        self._goals[goal_id] = g
        self._by_index[decision.goal_index] = g
        self._status_tracked[goal_id] = "executing"
        delay = self.world.ack_delay_for(decision.goal_index)  # the ack_delay fault: accepted, moving, answer late
        if delay >= timeout_s:
            self.advance(timeout_s)
            raise HarnessTimeout(f"no answer within {timeout_s} s")
        self.advance(delay)
        return GoalAck(accepted=True, goal_id=goal_id)

    def _not_served(self, name: str, kind: NavGoalKind, goal_id: str, timeout_s: float) -> GoalAck:
        """No such action server: looked for within the discovery bound, then Nav2NavigationPort's answer."""
        self.advance(min(timeout_s, DISCOVERY_S))
        if kind is NavGoalKind.NAVIGATE_TO_POSE:
            raise BackendUnavailable(f"action server {name} is not available", action=name)
        return GoalAck(accepted=False, goal_id=goal_id,
                       reason=f"no {name} action server on the graph: the robot serves no {kind.value} now")

    def _dispatch(self, kind: NavGoalKind, target: Pose2D, goal: NavGoal | None, provider: str = "") -> GoalDecision:
        w = self.world
        if goal is None:
            return w.submit_goal(target.x, target.y, target.yaw, provider=provider)
        if kind is NavGoalKind.NAVIGATE_TO_POSE:
            p = goal.poses[0]
            return w.submit_goal(p.x, p.y, p.yaw, provider=provider)
        if kind in (NavGoalKind.NAVIGATE_THROUGH_POSES, NavGoalKind.FOLLOW_WAYPOINTS):
            return w.submit_route(goal.poses, follow=kind is NavGoalKind.FOLLOW_WAYPOINTS, provider=provider)
        if kind is NavGoalKind.SPIN:
            return w.submit_spin(goal.spin_dist_rad, time_allowance_s=goal.time_allowance_s, provider=provider)
        if kind is NavGoalKind.BACK_UP:
            return w.submit_backup(goal.backup_dist_m, goal.backup_speed_mps, time_allowance_s=goal.time_allowance_s,
                                   provider=provider)
        return w.submit_wait(goal.wait_s, provider=provider)

    def _feasible(self, poses: tuple[Pose2D, ...], provider: str = "") -> bool:
        """Ground truth: the provider's navigator is active and every leg has a path (the first from the true
        pose) with its planner."""
        w = self.world
        if not provider and not w.navigator_active:
            return False
        start = w.true_pose
        for p in poses:
            if not w.plan_path(start, p, provider=provider).ok:
                return False
            start = p
        return True

    def _clear_costmaps(self, goal_id: str, goal: NavGoal) -> GoalAck:
        """The costmaps' clear services answered: accepted, and at once succeeded."""
        self.world.clear_costmaps(goal.costmaps)
        self._goals[goal_id] = _Goal(goal_id, 0, NavGoalKind.CLEAR_COSTMAPS, ended=True)
        self._status_tracked[goal_id] = "succeeded"
        self._events.append(BackendEvent(goal_id=goal_id, type="result", status="succeeded", stamp=self.clock.now(),
                                         detail={"error_code": 0, "error_msg": ""}))
        return GoalAck(accepted=True, goal_id=goal_id)

    def poll(self, timeout_s: float) -> list[BackendEvent]:
        if not self._events:
            self.advance(max(timeout_s, 0.01))
        out, self._events = self._events, []
        return out

    def cancel(self, goal_id: str, *, timeout_s: float) -> bool:
        g = self._goals.get(goal_id)
        if g is None or self.world.dead or g.kind is NavGoalKind.CLEAR_COSTMAPS:
            if self.world.dead:
                self.advance(timeout_s)
            return False
        self.world.cancel(g.index)
        self._publish()
        return True

    def lookup(self, goal_id: str, *, timeout_s: float) -> str | None:
        if self.world.dead:
            raise BackendUnavailable("navigator is not answering")
        return self._status_tracked.get(goal_id)

    def adopt(self, goal_id: str) -> None:
        pass

    # -- FeasibilityPort ------------------------------------------------------

    def probe(self, *, pre: Any, start: Pose2D | None, goal: Pose2D | None, frame_id: str) -> Feasibility:
        """What ``sim_robot``'s lifecycle services, planner server and costmap would answer (a dead robot: none)."""
        w, dead = self.world, self.world.dead
        lifecycle = tuple(
            LifecycleProbe(node=n, status=ProbeStatus.UNANSWERED, error=f"{n}/get_state is not available") if dead
            else LifecycleProbe(node=n, state="inactive" if n == "bt_navigator" and not w.navigator_active
                                else "active")
            for n in pre.lifecycle_active)
        path = cost = None
        if goal is not None and start is not None:
            if pre.path_feasible:
                if dead:
                    path = PathProbe(status=ProbeStatus.UNANSWERED, error="no answer from the planner server")
                else:
                    plan = w.plan_path(start, goal)
                    path = PathProbe(ok=plan.ok, length_m=plan.length_m if plan.ok else None, poses=len(plan.poses),
                                     error_code=plan.error.number, error=plan.message)
            if pre.goal_cell_free:
                cost = (CostProbe(status=ProbeStatus.UNANSWERED, error="no answer from the costmap") if dead
                        else CostProbe(cost=float(w.cost_at(goal.x, goal.y))))
        return Feasibility(lifecycle=lifecycle, path=path, goal_cost=cost)

    # -- RobotIO --------------------------------------------------------------

    def use_camera(self, topic: str) -> None:
        """The camera the next ``capture_image`` reads, by image topic ("" the built-in camera), once."""
        self._next_camera = topic

    def capture_image(self, *, label: str) -> ArtifactRef:
        topic, self._next_camera = self._next_camera, ""
        if topic not in ("", BUILTIN_CAMERA_TOPIC):
            return self._capture_from(topic, label)
        if self.world.dead:
            raise ToolExecutionError("no camera frame has been received")
        data = encode_png(self.world.camera_image(64, 48), 64, 48, 64 * 3, bgr=False)
        digest = hashlib.sha256(data).hexdigest()
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        path = self.artifacts_dir / f"{self.ids.new('img')}.png"
        path.write_bytes(data)
        self.captures.append(Capture(label=label, true_pose=self.world.true_pose, t=self.clock.now(), sha256=digest))
        return ArtifactRef(uri=path.resolve().as_uri(), sha256=digest, media_type="image/png",
                           size_bytes=len(data))

    def _capture_from(self, topic: str, label: str) -> ArtifactRef:
        """A capture from an extra camera's latest frame (none on a topic no camera of the robot publishes)."""
        frame = self._frames.get(topic)
        if frame is None:
            raise ToolExecutionError("no camera frame has been received", topic=topic)
        t, pose = frame
        age = self.clock.now() - t
        if age > MAX_FRAME_AGE_S:
            raise ToolExecutionError(f"the latest camera frame is {age:.1f} s old (max {MAX_FRAME_AGE_S} s)")
        data = encode_png(self.world.camera_image(64, 48, at=pose), 64, 48, 64 * 3, bgr=False)
        digest = hashlib.sha256(data).hexdigest()
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        path = self.artifacts_dir / f"{self.ids.new('img')}.png"
        path.write_bytes(data)
        self.captures.append(Capture(label=label, true_pose=pose, t=t, sha256=digest, camera=topic))
        return ArtifactRef(uri=path.resolve().as_uri(), sha256=digest, media_type="image/png",
                           size_bytes=len(data))

    def speak(self, *, text: str) -> dict[str, Any]:
        digest = hashlib.sha256(text.encode()).hexdigest()
        self.spoken.append((text, self.clock.now()))  # the speaker says it, acknowledged or not
        result: dict[str, Any] = {"spoken_at": self.clock.now(), "text_sha256": digest}
        return self._acknowledged(result, by=SPEAKER_ID, sha256=digest)

    def send_message(self, *, to: str, text: str, artifacts: list[ArtifactRef]) -> dict[str, Any]:
        """The payload string is what ``RosRobotIO`` publishes; the outbox acknowledges its sha256."""
        message_id = self.ids.new("msg")
        body = {"message_id": message_id, "to": to, "text": text, "artifacts": [a.model_dump() for a in artifacts],
                "sent_at": self.clock.now()}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        self.messages.append({"message_id": message_id, "to": to, "text": text,
                              "artifacts": [a.sha256 for a in artifacts], "t": self.clock.now(),
                              "true_pose": self.world.true_pose, "sha256": digest})
        result: dict[str, Any] = {"message_id": message_id, "to": to, "sent_at": body["sent_at"], "sha256": digest}
        return self._acknowledged(result, by=OUTBOX_ID, sha256=digest, message_id=message_id)

    def _acknowledged(self, result: dict[str, Any], *, by: str, sha256: str, message_id: str = "") -> dict[str, Any]:
        """The receiver's ack, or (``no_ack``) the sender's bounded wait and an ``ack_error``."""
        if getattr(self.world, "acks_withheld", False):
            self.advance(ACK_WAIT_S)
            result["ack_error"] = f"no acknowledgement from {by} within {ACK_WAIT_S} s"
            return result
        ack: dict[str, Any] = {"by": by, "at": self.clock.now(), "sha256": sha256}
        if message_id:
            ack["message_id"] = message_id
        claim = getattr(self.world, "completion_claim", "")
        if claim:
            ack["note"] = claim  # the claims_completion fault: the device's words lie, its hash does not
        result["ack"] = ack
        return result

    # -- ground truth -------------------------------------------------------------

    def _pose_blind(self) -> bool:
        """No pose sample, or the newest one (by its stamp: a frozen pose keeps its old one) too old."""
        if self._pose_sample_t is None:
            return True
        return self.clock.now() - self._pose_sample_t > self.freshness.pose_max_age_s

    # -- topics -----------------------------------------------------------------

    def _publish(self, *, force: bool = False) -> None:
        now = self.clock.now()
        w = self.world
        s = self._streams
        for ev in w.drain_events():
            g = self._by_index.get(ev.goal_index)
            if g is None:
                continue
            status = _STATUS_NAMES.get(ev.event)
            if status is not None:
                g.ended = True
                self._status_tracked[g.goal_id] = status
                detail = _result_detail(w.goal(ev.goal_index))
                claim = getattr(w, "completion_claim", "")
                if claim:
                    detail["message"] = claim
                self._events.append(BackendEvent(goal_id=g.goal_id, type="result", status=status, stamp=now,
                                                 detail=detail))
        if w.dead:
            return  # a dead robot publishes nothing, ever again
        if (force or now - s.pose >= _POSE_PERIOD_S - 1e-9) and not w.pose_silent:
            s.pose = now
            sample = w.published_pose()
            self.builder.update_pose(sample.pose, _EPOCH + sample.stamp_t, "/amcl_pose", _covariance(w.pose_covariance))
            self._pose_sample_t = _EPOCH + sample.stamp_t
        if force or now - s.odom >= _ODOM_PERIOD_S - 1e-9:
            s.odom = now
            self.builder.update_velocity(w.twist, now, "/odom")
        if force or now - s.battery >= _BATTERY_PERIOD_S - 1e-9:
            s.battery = now
            self.builder.update_battery(w.battery, now, "/battery_state")
        for topic, camera in self.config.cameras.items():
            last = self._frames.get(topic)
            if (last is None or now - last[0] >= 1.0 / camera.rate_hz - 1e-9) and w.camera_live(topic):
                self._frames[topic] = (now, w.true_pose)
        active = w.active_goal
        active_ids = [g.goal_id for g in self._goals.values() if active is not None and g.index == active.index]
        if active is not None and active.index in w.foreign_goals:
            active_ids = [f"foreign-{active.index}"]  # Nav2's status lists every client's goals
        self.builder.update_nav_status(active_ids, now, "navigate_to_pose/_action/status")
        if active is not None and active.status is GoalStatus.ACTIVE:
            g = self._by_index.get(active.index)
            if g is not None and active.feedback_enabled and now - g.last_feedback >= _FEEDBACK_PERIOD_S:
                g.last_feedback = now
                distance = None if g.kind not in _NAVIGATION_KINDS else active.distance_remaining
                self._events.append(BackendEvent(goal_id=g.goal_id, type="feedback", distance_remaining=distance,
                                                 current_pose=w.localized_pose, stamp=now,
                                                 detail=_feedback_detail(active)))
                self.builder.update_nav_feedback(g.goal_id, w.localized_pose, distance, now,
                                                 f"{g.namespace}/{g.kind.value}/_action/feedback".lstrip("/"))


def _result_detail(view: GoalView) -> dict[str, Any]:
    """A terminal event's ``detail``: the Nav2 result's error fields and, for a route, its waypoint reports."""
    detail: dict[str, Any] = {"error_code": view.error_code, "error_msg": view.error_msg}
    if view.kind is NavGoalKind.NAVIGATE_THROUGH_POSES:
        reported = view.waypoints  # waypoint_statuses: every waypoint
    elif view.kind is NavGoalKind.FOLLOW_WAYPOINTS:
        reported = tuple(wp for wp in view.waypoints if wp.state is WaypointState.FAILED)  # missed_waypoints
    else:
        return detail
    detail["waypoints"] = [WaypointReport(index=wp.index, state=wp.state, error_code=wp.error_code,
                                          error_msg=wp.error_msg).model_dump(mode="json") for wp in reported]
    return detail


def _feedback_detail(view: GoalView) -> dict[str, Any]:
    """A feedback event's ``detail``: what this kind's Nav2 feedback carries besides pose and distance."""
    kind = view.kind
    if kind is NavGoalKind.NAVIGATE_THROUGH_POSES:
        return {"number_of_poses_remaining": view.poses_remaining}
    if kind is NavGoalKind.FOLLOW_WAYPOINTS:
        return {"current_waypoint": view.current_waypoint}
    if kind is NavGoalKind.SPIN:
        return {"angular_distance_traveled": view.angular_distance_traveled}
    if kind is NavGoalKind.BACK_UP:
        return {"distance_traveled": view.distance_traveled}
    if kind is NavGoalKind.WAIT:
        return {"time_left_s": view.time_left}
    return {}


def _covariance(variances: tuple[float, float, float]) -> PoseCovariance:
    var_x, var_y, var_yaw = variances
    return PoseCovariance(var_x=var_x, var_y=var_y, var_yaw=var_yaw)
