"""What the core needs from the outside world, as small protocols.

The ROS adapters in ``robot_harness.nodes`` implement these over topics,
services and actions; unit tests implement them with scripted fakes.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from .records import ArtifactRef, ModelResponse, Pose2D, WorldSnapshot

if TYPE_CHECKING:
    from .completion import EvidenceRef, Verdict
    from .config import Preconditions
    from .nav_goals import NavGoal
    from .preconditions import Feasibility
    from .verifier import VerifyRequest

__all__ = ["ModelCallSource", "SnapshotPort", "PlannerRequest", "PlannerPort", "InteractivePlanner", "GoalAck", "BackendEvent", "NavigationPort", "FeasibilityPort", "RobotIO",
           "VerifierPort", "EvidenceRecorder"]


class SnapshotPort(Protocol):
    def capture(self, *, reason: str, mission_id: str) -> WorldSnapshot:
        """Capture a fresh snapshot now (raises HarnessError when the aggregator is unreachable)."""


class PlannerRequest(BaseModel):
    model_config = ConfigDict(frozen=True)
    mission_id: str
    model_turn_id: str
    turn_index: int
    """The index of this model call among the mission's model calls (0 first). A turn the harness takes
    from an accepted plan (core/mission/plans.py) asks no model, so it is not counted: a recorded model
    replays call for call whatever the plan's length."""
    context: dict[str, Any]
    tools: tuple[dict[str, Any], ...]


class PlannerPort(Protocol):
    def next_turn(self, request: PlannerRequest) -> ModelResponse:
        """One model turn. The planner proposes; it never approves."""


@runtime_checkable
class InteractivePlanner(Protocol):
    """A planner whose turns arrive from outside (an operator's MCP session): the runner waits
    for the next call before it captures the snapshot the call is decided on."""

    def wait_for_call(self, stop: Callable[[], bool], *, poll_s: float = 0.1) -> None: ...


class GoalAck(BaseModel):
    model_config = ConfigDict(frozen=True)
    accepted: bool
    goal_id: str = ""
    reason: str = ""


class BackendEvent(BaseModel):
    """Something the navigation backend said about one goal."""

    model_config = ConfigDict(frozen=True)
    goal_id: str
    type: str
    """feedback | status | result"""
    status: str = ""
    """accepted | executing | canceling | succeeded | aborted | canceled"""
    distance_remaining: float | None = None
    current_pose: Pose2D | None = None
    stamp: float = 0.0
    detail: dict[str, Any] = Field(default_factory=dict)


class NavigationPort(Protocol):
    name: str

    def send_goal(self, *, target: Pose2D, frame_id: str, timeout_s: float, goal_id: str = "",
                  goal: "NavGoal | None" = None) -> GoalAck:
        """Send a goal under ``goal_id`` (32 hex; the backend's own when empty) and wait (bounded)
        for accept/reject. Raises BackendUnavailable or HarnessTimeout (the goal may still be
        accepted later: look it up, never re-send it under a new id).

        ``goal``: which Nav2 interface and what for it (``nav_goals.NavGoal``); None is a
        NavigateToPose to ``target``. For a route ``target`` is its last pose, for a behaviour the
        robot's pose at dispatch. A route's terminal event carries ``detail["waypoints"]`` (a list of
        ``nav_goals.WaypointReport`` dicts) when the backend reports them; feedback carries
        ``number_of_poses_remaining`` / ``current_waypoint`` in ``detail``."""

    def lookup(self, goal_id: str, *, timeout_s: float) -> str | None:
        """The backend's current status of a goal (accepted | executing | canceling | succeeded |
        aborted | canceled), waiting up to ``timeout_s`` for it to appear; None when the backend
        does not track it. Raises BackendUnavailable when the backend cannot be asked."""

    def adopt(self, goal_id: str) -> None:
        """Track a goal found by ``lookup`` whose acceptance never arrived (results, cancel)."""

    def poll(self, timeout_s: float) -> list[BackendEvent]:
        """Backend events received since the last poll, waiting at most timeout_s for the first."""

    def cancel(self, goal_id: str, *, timeout_s: float) -> bool:
        """Ask the backend to cancel a goal; True when the cancel was acknowledged."""


class FeasibilityPort(Protocol):
    """Asks the robot, right before a navigation, whether it is ready and the target reachable."""

    def probe(self, *, pre: "Preconditions", start: Pose2D | None, goal: Pose2D | None,
              frame_id: str) -> "Feasibility":
        """The lifecycle states of ``pre.lifecycle_active``, and (when ``goal`` and ``start`` are given and the
        checks are on) a path dry run from ``start`` and the goal cell's cost, each bounded by
        ``pre.probe_timeout_s``. Never raises for a missing or silent server: that is the answer's status."""


class RobotIO(Protocol):
    def capture_image(self, *, label: str) -> ArtifactRef:
        """Save the latest camera frame as an artifact (raises when there is no fresh frame)."""

    def speak(self, *, text: str) -> dict[str, Any]:
        """Say something; returns a receipt."""

    def send_message(self, *, to: str, text: str, artifacts: list[ArtifactRef]) -> dict[str, Any]:
        """Deliver a message; returns a delivery receipt."""


class VerifierPort(Protocol):
    """The independent verifier. It gets the goal, the frozen contract, receipts and
    the task state version, and fetches fresh observations itself; the request
    type has no field for anything the planner said."""

    name: str

    def verify(self, request: "VerifyRequest") -> "tuple[Verdict, WorldSnapshot]":
        """Judge a done proposal; returns the verdict and the fresh snapshot it was judged on
        (raises HarnessError when the verifier is unreachable)."""


class EvidenceRecorder(Protocol):
    """Where a mission's evidence goes (the MCAP bag); recording never stops a mission."""

    def start(self, mission_id: str) -> None:
        """Open the mission's bag."""

    def record_record(self, topic: str, record: BaseModel) -> "EvidenceRef | None":
        """Write a harness record (snapshot, receipt, verdict) and return its evidence ref, or None if dropped."""

    def stop(self, *, status: str = "", summary: str = "") -> dict[str, Any]:
        """Close the bag; returns its summary (path, message counts, dropped)."""


@runtime_checkable
class ModelCallSource(Protocol):
    """A component that calls a model of its own (a contract compiler, a coverage reviewer, a
    recovery advisor) and hands back the records of those calls, each once, for the journal.

    Each record is an ``llm_call`` (``robot_harness.llm.client.LLMCall`` or its JSON form):
    redacted request and response, token counts, latency. The runner journals them with the
    event they belong to (``CONTRACT_FROZEN``, ``RECOVERY_DECIDED``) and counts them in the
    mission's model usage.
    """

    def drain_calls(self) -> Sequence[Any]: ...
