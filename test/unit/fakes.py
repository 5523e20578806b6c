"""Scripted fakes of the *outside world* (robot, aggregator, planner) for core tests.

They implement the core's ports on a ManualClock. Nothing of robot_harness
itself is faked: the engine, journal, preconditions and outcome checks under
test are the real ones.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from robot_harness.core.clock import ManualClock
from robot_harness.core.errors import BackendUnavailable, HarnessError, HarnessTimeout
from robot_harness.core.ports import BackendEvent, GoalAck, PlannerRequest
from robot_harness.core.records import (
    ArtifactRef,
    Availability,
    ControllerState,
    FieldMeta,
    ModelResponse,
    Pose2D,
    ToolCall,
    Velocity,
    WorldSnapshot,
)


@dataclass
class FakeRobot:
    """A robot + aggregator + Nav2 stand-in driven by the engine's polls.

    mode: normal | reject | early_success | silent | foreign_success | abort |
          lost_ack (accepted and running, but the acceptance never arrives) |
          lost_request (the goal never reaches the backend and no answer comes)
    ``status`` is what the backend's status topic would say per goal id (for ``lookup``).
    ``acks``: whether the speaker and outbox acknowledge deliveries (the delivery
    contract: results carry ``ack`` only when confirmed, else ``ack_error``).
    """

    clock: ManualClock
    pose: Pose2D = field(default_factory=lambda: Pose2D(x=0.0, y=0.0))
    mode: str = "normal"
    polls_to_finish: int = 3
    pose_age_s: float = 0.05
    battery: float = 0.8
    controller: ControllerState = ControllerState.IDLE
    pose_jumps: int = 0
    goals: list[dict[str, Any]] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    captures: list[str] = field(default_factory=list)
    on_capture: Callable[[str, "FakeRobot"], None] | None = None
    on_send: Callable[["FakeRobot"], None] | None = None
    name: str = "fake/nav"
    status: dict[str, str] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)
    reachable: bool = True
    snap_prefix: str = "snap"
    acks: bool = True
    abort_detail: dict[str, Any] = field(default_factory=dict)
    """What an ``abort`` result carries (Nav2's ``error_code`` / ``error_msg``)."""
    status_first: bool = False
    """An abort is seen on the action's status topic a poll before its result arrives (as over DDS)."""
    spoken: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    _polls: int = 0
    _queue: list[BackendEvent] = field(default_factory=list)
    _n: int = 0

    # SnapshotPort
    def capture(self, *, reason: str, mission_id: str) -> WorldSnapshot:
        self.captures.append(reason)
        if self.on_capture:
            self.on_capture(reason, self)
        self._n += 1
        now = self.clock.now()
        fresh = lambda age, max_age: FieldMeta(  # noqa: E731
            availability=Availability.AVAILABLE if age <= max_age else Availability.STALE,
            source_stamp=now - age, age_s=age, max_age_s=max_age, source="fake")
        moving = self.controller is ControllerState.ACTIVE and self.mode != "silent"
        return WorldSnapshot(
            snapshot_id=f"{self.snap_prefix}-{self._n}", mission_id=mission_id, reason=reason, captured_at=now,
            velocity=Velocity(vx=0.4 if moving else 0.0), velocity_meta=fresh(0.02, 0.5),
            pose=self.pose, pose_meta=fresh(self.pose_age_s, 0.5), pose_jumps=self.pose_jumps,
            controller_state=self.controller, navigation_meta=fresh(0.1, 2.0),
            battery=self.battery, battery_meta=fresh(0.5, 5.0),
        )

    # NavigationPort
    def send_goal(self, *, target: Pose2D, frame_id: str, timeout_s: float, goal_id: str = "",
                  goal: Any = None) -> GoalAck:
        if not self.reachable:
            raise BackendUnavailable("fake navigator is down")
        gid = goal_id or f"goal{len(self.goals) + 1}"
        if self.mode == "lost_request":
            self.clock.advance(timeout_s)
            raise HarnessTimeout(f"no answer within {timeout_s} s")
        if gid in self.status:
            return GoalAck(accepted=False, goal_id=gid, reason="duplicate goal id")  # as an action server does
        self.goals.append({"goal_id": gid, "target": target, "goal": goal})
        if self.on_send:
            self.on_send(self)
        if self.mode == "reject":
            self.status[gid] = "rejected"
            return GoalAck(accepted=False, goal_id=gid, reason="rejected by fake")
        self._polls = 0
        self.controller = ControllerState.ACTIVE
        self.status[gid] = "executing"
        if self.mode == "lost_ack":
            self.mode = "normal"  # the goal runs normally; only its acceptance was lost
            self.clock.advance(timeout_s)
            raise HarnessTimeout(f"no answer within {timeout_s} s")
        return GoalAck(accepted=True, goal_id=gid)

    def lookup(self, goal_id: str, *, timeout_s: float) -> str | None:
        self.lookups.append(goal_id)
        if not self.reachable:
            raise BackendUnavailable("fake navigator is down")
        status = self.status.get(goal_id)
        return None if status == "rejected" else status

    def adopt(self, goal_id: str) -> None:
        pass

    def poll(self, timeout_s: float) -> list[BackendEvent]:
        self.clock.advance(max(timeout_s, 0.01))
        if self._queue:
            queued, self._queue = self._queue, []
            return queued
        if not self.goals or self.controller is not ControllerState.ACTIVE:
            return []
        goal = self.goals[-1]
        gid, target = goal["goal_id"], goal["target"]
        self._polls += 1
        if self.mode == "silent":
            return []
        if self.mode == "foreign_success":
            if self._polls == 1:
                return [BackendEvent(goal_id="someone-else", type="status", status="succeeded")]
            return [BackendEvent(goal_id=gid, type="feedback", distance_remaining=3.0, current_pose=self.pose)]
        if self._polls < self.polls_to_finish:
            return [BackendEvent(goal_id=gid, type="feedback", distance_remaining=1.0, current_pose=self.pose)]
        self.controller = ControllerState.IDLE
        if self.mode == "early_success":
            self.status[gid] = "succeeded"
            return [BackendEvent(goal_id=gid, type="result", status="succeeded")]
        if self.mode == "abort":
            self.status[gid] = "aborted"
            result = BackendEvent(goal_id=gid, type="result", status="aborted", detail=dict(self.abort_detail))
            if self.status_first:
                self._queue.append(result)
                return [BackendEvent(goal_id=gid, type="status", status="aborted")]
            return [result]
        self.pose = target
        self.status[gid] = "succeeded"
        return [BackendEvent(goal_id=gid, type="result", status="succeeded")]

    def cancel(self, goal_id: str, *, timeout_s: float) -> bool:
        self.cancels.append(goal_id)
        if self.mode == "silent":
            return False  # a dead navigator confirms nothing
        self.controller = ControllerState.IDLE
        if self.status.get(goal_id) == "executing":
            self.status[goal_id] = "canceled"
            self._queue.append(BackendEvent(goal_id=goal_id, type="result", status="canceled"))
        return True

    # RobotIO
    def capture_image(self, *, label: str) -> ArtifactRef:
        if self.mode == "camera_broken":
            raise RuntimeError("camera driver crashed")
        return ArtifactRef(uri="file:///tmp/fake.png", sha256="0" * 64, media_type="image/png")

    def speak(self, *, text: str) -> dict[str, Any]:
        self.spoken.append(text)
        digest = hashlib.sha256(text.encode()).hexdigest()
        result: dict[str, Any] = {"spoken_at": self.clock.now(), "text_sha256": digest}
        if not self.acks:
            return {**result, "ack_error": "no acknowledgement from fake/speaker within 2.0 s"}
        return {**result, "ack": {"by": "fake/speaker", "at": self.clock.now(), "sha256": digest}}

    def send_message(self, *, to: str, text: str, artifacts: list[ArtifactRef]) -> dict[str, Any]:
        message_id = f"m{len(self.messages) + 1}"
        payload = json.dumps({"message_id": message_id, "to": to, "text": text,
                              "artifacts": [a.model_dump() for a in artifacts]}, sort_keys=True)
        self.messages.append({"message_id": message_id, "to": to, "text": text})
        digest = hashlib.sha256(payload.encode()).hexdigest()
        result: dict[str, Any] = {"message_id": message_id, "to": to, "sent_at": self.clock.now(), "sha256": digest}
        if not self.acks:
            return {**result, "ack_error": "no acknowledgement from fake/outbox within 2.0 s"}
        ack = {"by": "fake/outbox", "at": self.clock.now(), "sha256": digest, "message_id": message_id}
        return {**result, "delivered_at": ack["at"], "ack": ack}


class ScriptPlanner:
    """A model that says the given turns, in order, then nothing."""

    def __init__(self, turns: list[dict[str, Any]], *, before: Callable[[int], None] | None = None) -> None:
        self.turns = turns
        self.requests: list[PlannerRequest] = []
        self.before = before

    def next_turn(self, request: PlannerRequest) -> ModelResponse:
        self.requests.append(request)
        if self.before:
            self.before(request.turn_index)
        if request.turn_index >= len(self.turns):
            return ModelResponse()
        t = self.turns[request.turn_index]
        if isinstance(t, HarnessError):
            raise t
        calls = tuple(ToolCall(id=c.get("id", f"c{request.turn_index}-{i}"), name=c["name"], arguments=c.get("arguments", {}))
                      for i, c in enumerate(t.get("tool_calls", [])))
        return ModelResponse(tool_calls=calls, done=t.get("done"), text=t.get("text", ""))
