"""The managed-action state machine. Transitions happen here and nowhere else.

REQUESTED -> ACCEPTED -> RUNNING -> VERIFYING -> SUCCEEDED / FAILED / UNKNOWN.
A backend's own "succeeded" only moves an action to VERIFYING; only the
outcome check (``outcome``) may produce SUCCEEDED.
"""
from __future__ import annotations

from .errors import IllegalTransition
from .records import ActionStatus, ActionView, Pose2D, WorldSnapshot

__all__ = ["ALLOWED_TRANSITIONS", "ManagedAction"]

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


class ManagedAction:
    """One managed physical action and its revisioned state.

    ``transition`` is the only way to change ``state``; it checks the expected
    revision (a writer holding a stale view gets ``IllegalTransition``) and
    returns the journal payload describing the change.
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
        self.dispatch_snapshot: WorldSnapshot | None = None
        """The fresh pre-dispatch snapshot: the baseline the outcome check compares against."""

    @property
    def terminal(self) -> bool:
        return self.state.terminal

    def transition(self, to: ActionStatus, *, now: float, reason: str = "", expected_revision: int | None = None) -> dict:
        if expected_revision is not None and expected_revision != self.revision:
            raise IllegalTransition(
                f"stale revision for {self.action_id}: expected {expected_revision}, have {self.revision}",
                action_id=self.action_id,
                expected_revision=expected_revision,
                revision=self.revision,
            )
        if to not in ALLOWED_TRANSITIONS[self.state]:
            raise IllegalTransition(
                f"{self.action_id}: {self.state.value} -> {to.value} is not allowed",
                action_id=self.action_id,
                from_state=self.state.value,
                to_state=to.value,
            )
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
