"""The managed-action state machine. Transitions are checked here and nowhere else.

REQUESTED -> ACCEPTED -> RUNNING -> VERIFYING -> SUCCEEDED / FAILED / UNKNOWN.
A backend's own "succeeded" only moves an action to VERIFYING; only the
outcome check (``outcome``) may produce SUCCEEDED.

``check_change`` is the one check: a change must start from the state and
revision the action is at, and go where ``ALLOWED_TRANSITIONS`` allows. The
writer's in-memory action applies it (``ManagedAction.transition``), and the
journal applies it again, against the state and revision it holds for the
action, to every ``ROBOT_ACTION_STATE_CHANGED`` before the commit: a writer
holding a stale view (another writer moved the action, or it moved a copy
twice) is refused there with ``StaleRevision``, nothing written.
"""
from __future__ import annotations

from typing import Any

from .errors import IllegalTransition, StaleRevision
from .nav_goals import NavGoal
from .records import ActionStatus, ActionView, Pose2D, WorldSnapshot

__all__ = ["ALLOWED_TRANSITIONS", "ManagedAction", "check_change"]

S = ActionStatus
ALLOWED_TRANSITIONS: dict[ActionStatus, frozenset[ActionStatus]] = {
    S.REQUESTED: frozenset({S.ACCEPTED, S.FAILED, S.UNKNOWN}),
    S.ACCEPTED: frozenset({S.RUNNING, S.VERIFYING, S.FAILED, S.UNKNOWN}),
    S.RUNNING: frozenset({S.VERIFYING, S.FAILED, S.UNKNOWN}),
    S.VERIFYING: frozenset({S.SUCCEEDED, S.FAILED, S.UNKNOWN}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.UNKNOWN: frozenset(),
}


def check_change(action_id: str, *, state: ActionStatus, revision: int, from_state: str, to_state: str,
                 new_revision: int) -> None:
    """Refuse a change that does not start where the action is, or goes where it may not.

    ``state``/``revision``: where the action is (as its holder knows it);
    ``from_state``/``new_revision``: where the writer says it moves it from, and
    the revision the change creates. Raises ``StaleRevision`` (the writer's view
    is stale) or ``IllegalTransition`` (the state machine forbids the move).
    """
    if from_state != state.value or new_revision != revision + 1:
        raise StaleRevision(
            f"action {action_id} is {state.value} at revision {revision};"
            f" the writer moved it from {from_state} to revision {new_revision}",
            action_id=action_id, state=state.value, revision=revision)
    try:
        to = ActionStatus(to_state)
    except ValueError:
        raise IllegalTransition(f"{action_id}: {to_state!r} is not an action state", action_id=action_id,
                                from_state=state.value, to_state=to_state) from None
    if to not in ALLOWED_TRANSITIONS[state]:
        raise IllegalTransition(
            f"{action_id}: {state.value} -> {to.value} is not allowed",
            action_id=action_id,
            from_state=state.value,
            to_state=to.value,
        )


class ManagedAction:
    """One managed physical action and its revisioned state.

    ``transition`` is the only way to change ``state``; it applies
    ``check_change`` and returns the journal payload describing the change
    (which the journal checks again against what it holds).
    """

    def __init__(
        self,
        *,
        action_id: str,
        mission_id: str,
        tool_call_id: str,
        model_turn_id: str,
        skill: str,
        target: Pose2D | None,
        decision_snapshot_id: str,
        backend: str,
        now: float,
    ) -> None:
        self.action_id = action_id
        self.mission_id = mission_id
        self.tool_call_id = tool_call_id
        self.model_turn_id = model_turn_id
        self.skill = skill
        self.target = target
        self.decision_snapshot_id = decision_snapshot_id
        self.backend = backend
        self.state = ActionStatus.REQUESTED
        self.revision = 0
        self.backend_goal_id = ""
        self.backend_status = ""
        self.reason = ""
        self.outcome_snapshot_id = ""
        self.requested_at = now
        self.updated_at = now
        self.accepted_at: float | None = None
        self.last_progress_at: float | None = None
        self.terminal_reported_at: float | None = None
        self.timeout_s = 0.0
        self.goal: NavGoal | None = NavGoal(poses=(target,)) if target is not None else None
        """What was sent to Nav2 (the dispatcher sets it; a NavigateToPose to ``target`` by default)."""
        self.waypoint_names: tuple[str, ...] = ()
        """A route's place names, in order (as the call gave them)."""
        self.waypoints_seen: dict[int, tuple[str, float]] = {}
        """Route waypoint index -> (journaled snapshot id, pose stamp) of the first fresh pose observed within
        tolerance of it during the action, in route order (``execution/supervise``)."""
        self.waypoint_reports: tuple[Any, ...] = ()
        """What the backend said of each waypoint (``nav_goals.WaypointReport``), from its terminal report."""
        self.dispatch_snapshot: WorldSnapshot | None = None
        """The fresh pre-dispatch snapshot: the baseline the outcome check compares against."""

    @property
    def terminal(self) -> bool:
        return self.state.terminal

    def transition(self, to: ActionStatus, *, now: float, reason: str = "") -> dict:
        """Move to ``to`` (checked by ``check_change``) and return the journal payload of the change."""
        check_change(self.action_id, state=self.state, revision=self.revision, from_state=self.state.value,
                     to_state=to.value, new_revision=self.revision + 1)
        change = {
            "from": self.state.value,
            "to": to.value,
            "reason": reason,
            "revision": self.revision + 1,
            "backend_goal_id": self.backend_goal_id,
        }
        self.state = to
        self.revision += 1
        self.updated_at = now
        if reason:
            self.reason = reason
        return change

    def view(self) -> ActionView:
        return ActionView(
            action_id=self.action_id,
            tool_call_id=self.tool_call_id,
            skill=self.skill,
            state=self.state,
            revision=self.revision,
            backend_goal_id=self.backend_goal_id,
            backend_status=self.backend_status,
            reason=self.reason,
            target=self.target,
            decision_snapshot_id=self.decision_snapshot_id,
            outcome_snapshot_id=self.outcome_snapshot_id,
            requested_at=self.requested_at,
            updated_at=self.updated_at,
        )
