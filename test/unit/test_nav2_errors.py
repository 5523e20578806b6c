"""Nav2's result codes are named and sorted into kinds, and what Nav2 said went wrong reaches the action's
outcome and the planner's next turn (issue 16, part 4)."""
from __future__ import annotations

import pytest

from robot_harness.core.nav2_errors import Nav2ErrorKind, describe_nav2_error
from robot_harness.core.records import EventType

from .test_engine import GO_OFFICE, make


@pytest.mark.parametrize("code, name, kind", [
    (0, "NONE", Nav2ErrorKind.NONE),
    (105, "FAILED_TO_MAKE_PROGRESS", Nav2ErrorKind.STUCK),
    (104, "PATIENCE_EXCEEDED", Nav2ErrorKind.STUCK),
    (206, "GOAL_OCCUPIED", Nav2ErrorKind.GOAL_BLOCKED),
    (208, "NO_VALID_PATH", Nav2ErrorKind.NO_PATH),
    (205, "START_OCCUPIED", Nav2ErrorKind.START_BLOCKED),
    (309, "NO_VIAPOINTS_GIVEN", Nav2ErrorKind.NO_PATH),
    (603, "STOP_ON_MISSED_WAYPOINT", Nav2ErrorKind.WAYPOINT),
    (714, "COLLISION_AHEAD", Nav2ErrorKind.STUCK),
    (712, "TF_ERROR", Nav2ErrorKind.TF_ERROR),
    (741, "TIMEOUT", Nav2ErrorKind.TIMEOUT),
    (9001, "FAILED_TO_LOAD_BEHAVIOR_TREE", Nav2ErrorKind.CONFIGURATION),
    (9103, "TIMEOUT", Nav2ErrorKind.TIMEOUT),
])
def test_each_kilted_code_is_named_with_its_kind(code, name, kind):
    err = describe_nav2_error(code)
    assert (err.name, err.kind) == (name, kind)


@pytest.mark.parametrize("code", [1, 99, 209, 705, 750, 9004, 65535])
def test_an_unknown_code_keeps_its_number(code):
    err = describe_nav2_error(code, "odd")
    assert err.kind is Nav2ErrorKind.UNKNOWN and err.name == f"CODE_{code}" and err.describe().endswith(": odd")


def test_an_abort_with_nav2s_error_names_it_in_the_outcome_and_the_next_turn():
    runner, robot, journal, planner = make([GO_OFFICE, {"done": "arrived"}], robot_kw={
        "mode": "abort", "abort_detail": {"error_code": 105, "error_msg": "Failed to make progress"}})
    runner.run("go to the office")
    # the navigation's outcome first; a stuck robot then gets recovery's first Nav2 behaviour (its own outcome)
    outcome = [e.payload for e in journal.events(types=[EventType.ROBOT_ACTION_OUTCOME])][0]
    assert "Nav2 error 105 FAILED_TO_MAKE_PROGRESS (controller_server (FollowPath), stuck): Failed to make progress" \
        in outcome["reason"], outcome["reason"]
    delivered = [e.payload for e in journal.events(types=[EventType.RUNTIME_EVENT_DELIVERED])]
    assert delivered and delivered[0]["detail"]["nav2_error"]["kind"] == "stuck", delivered
    decided = [e.payload for e in journal.events(types=[EventType.RECOVERY_DECIDED])][0]
    assert decided["failure"]["nav2_kind"] == "stuck" and decided["decision"]["rung"] == "nav2_behavior"
    assert "FAILED_TO_MAKE_PROGRESS" in str(planner.requests[1].context)


def test_an_abort_without_an_error_code_adds_nothing():
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "arrived"}], robot_kw={"mode": "abort"})
    runner.run("go to the office")
    (outcome,) = [e.payload for e in journal.events(types=[EventType.ROBOT_ACTION_OUTCOME])]
    assert "Nav2 error" not in outcome["reason"]


def test_the_error_is_named_when_the_status_says_aborted_a_moment_before_the_result_arrives():
    """Over DDS the goal's status topic often reports the end before the result (with Nav2's error code) is
    delivered: the supervisor waits for the result (bounded) instead of judging without it."""
    runner, robot, journal, planner = make([GO_OFFICE, {"done": "arrived"}], robot_kw={
        "mode": "abort", "status_first": True,
        "abort_detail": {"error_code": 105, "error_msg": "Failed to make progress"}})
    runner.run("go to the office")
    outcome = [e.payload for e in journal.events(types=[EventType.ROBOT_ACTION_OUTCOME])][0]
    assert "Nav2 error 105 FAILED_TO_MAKE_PROGRESS" in outcome["reason"], outcome["reason"]
