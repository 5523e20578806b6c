"""Stop during motion (issue 5): the actual outcome of an executing navigation
is recorded, confirmed or unknown, and never overwritten; a base whose stop
was never confirmed stays blocked."""
from __future__ import annotations

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig
from robot_harness.core.durable import LeaseState
from robot_harness.compose import mission_runner
from robot_harness.core.journal import MemoryJournal
from robot_harness.core.ports import BackendEvent
from robot_harness.core.records import ControllerState, EventDraft, EventType, MissionStatus
from robot_harness.core.skills import default_skills

from .fakes import FakeRobot, ScriptPlanner
from .test_engine import GO_OFFICE, PLACES, assert_one_result_per_call

E = EventType


def make(turns, *, journal=None, clock=None, seed=7, **robot_kw):
    clock = clock or ManualClock()
    ids = IdGenerator(seed=seed)
    robot = FakeRobot(clock=clock, **robot_kw)
    config = HarnessConfig(places=PLACES)
    journal = journal or MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids, skills=default_skills(config.navigation),
                           snapshots=robot, planner=ScriptPlanner(turns), navigation=robot, robot_io=robot)
    return runner, robot, journal


def operator_stop(runner, journal, reason="operator pressed stop"):
    """What the supervisor's Stop service does: journal the Stop, then tell the runner."""
    m = runner.mission_id
    journal.transition(m, lambda: [EventDraft(type=E.STOP_REQUESTED, mission_id=m,
                                              payload={"reason": reason, "source": "stop_service"})])
    runner.request_stop(reason)


def stop_at_poll(runner, robot, journal, n, *, before=None):
    """Press Stop at the robot's n-th poll while the goal is executing (``before`` runs first)."""
    real_poll, count = robot.poll, {"n": 0}

    def poll(timeout_s):
        count["n"] += 1
        if count["n"] == n:
            if before is not None:
                before()
            operator_stop(runner, journal)
        return real_poll(timeout_s)

    robot.poll = poll


def of(journal, type_, action_id=None):
    return [e.payload for e in journal.events(types=[type_]) if action_id is None or e.robot_action_id == action_id]


def test_a_stop_the_backend_never_confirms_leaves_the_action_unknown_and_the_base_blocked():
    runner, robot, journal = make([GO_OFFICE, {"done": "arrived"}], mode="silent")
    stop_at_poll(runner, robot, journal, 3)
    out = runner.run("go to the office")

    assert out.status is MissionStatus.CANCELLED, out.summary
    (goal,) = robot.goals
    assert robot.cancels == [goal["goal_id"]], "the backend was asked to stop"
    (action,) = out.actions
    states = [p["to"] for p in of(journal, E.ROBOT_ACTION_STATE_CHANGED, action.action_id)]
    assert states[-1] == "UNKNOWN", states
    (outcome,) = of(journal, E.ROBOT_ACTION_OUTCOME)
    assert outcome["state"] == "UNKNOWN"
    assert "stop NOT confirmed" in outcome["reason"] and "operator pressed stop" in outcome["reason"]
    (receipt,) = [p["receipt"] for p in of(journal, E.RECEIPT_RECORDED) if p["receipt"]["physical"]]
    assert receipt["status"] == "UNKNOWN" and receipt["result"]["backend_status"] == "cancel_unacknowledged"
    # the base is blocked, never released: the robot may still be moving
    assert of(journal, E.LEASE_RELEASED) == []
    (blocked,) = of(journal, E.LEASE_BLOCKED)
    assert blocked["resource"] == "base" and blocked["owner"] == action.action_id
    assert journal.leases()["base"].state is LeaseState.BLOCKED
    assert journal.open_missions() == []
    assert_one_result_per_call(journal)

    # The next mission cannot drive while the backend still runs the goal it never stopped.
    again, robot2, _ = make([GO_OFFICE], journal=journal, seed=8, snap_prefix="b-snap")
    robot2.status = dict(robot.status)  # the same backend: the goal is still executing there
    robot2.controller = ControllerState.ACTIVE
    later = again.run("go to the office")
    assert robot2.goals == []
    (res,) = [e.payload for e in journal.events(mission_id=again.mission_id, types=[E.TOOL_RESULT_RECORDED])]
    assert res["status"] == "rejected" and res["content"]["code"] == "lease_conflict"
    assert journal.leases()["base"].state is LeaseState.BLOCKED
    assert later.status is not MissionStatus.SUCCEEDED


@pytest.mark.parametrize("ended, state, receipt", [("succeeded", "SUCCEEDED", "SUCCEEDED"),
                                                    ("aborted", "FAILED", "FAILED")])
def test_a_goal_that_ended_just_before_the_cancel_keeps_its_actual_outcome(ended, state, receipt):
    runner, robot, journal = make([GO_OFFICE, {"done": "arrived"}], polls_to_finish=50)
    held: list[BackendEvent] = []

    def goal_ends_on_the_backend():
        # The goal ends on the backend, but its result is still in flight when Stop is pressed.
        gid = robot.goals[-1]["goal_id"]
        if ended == "succeeded":
            robot.pose = robot.goals[-1]["target"]
        robot.status[gid] = ended
        robot.controller = ControllerState.IDLE
        held.append(BackendEvent(goal_id=gid, type="result", status=ended, stamp=robot.clock.now()))

    real_cancel = robot.cancel

    def cancel(goal_id, *, timeout_s):
        acknowledged = real_cancel(goal_id, timeout_s=timeout_s)  # a finished goal: nothing to cancel
        robot._queue.extend(held)  # ...and the result that was in flight arrives
        held.clear()
        return acknowledged

    robot.cancel = cancel
    stop_at_poll(runner, robot, journal, 3, before=goal_ends_on_the_backend)
    out = runner.run("go to the office")

    assert out.status is MissionStatus.CANCELLED, out.summary
    (goal,) = robot.goals
    assert robot.cancels == [goal["goal_id"]]
    (action,) = out.actions
    changes = of(journal, E.ROBOT_ACTION_STATE_CHANGED, action.action_id)
    assert [c["to"] for c in changes][-2:] == ["VERIFYING", state], "the actual outcome, then nothing after it"
    assert action.state.value == state and action.backend_status == ended
    (outcome,) = of(journal, E.ROBOT_ACTION_OUTCOME)
    assert outcome["state"] == state and outcome["evidence"]["backend_terminal"] == ended
    (rcpt,) = [p["receipt"] for p in of(journal, E.RECEIPT_RECORDED) if p["receipt"]["physical"]]
    assert rcpt["status"] == receipt and rcpt["result"]["backend_status"] == ended
    # a confirmed end: the base is free again
    assert [r["why"] for r in of(journal, E.LEASE_RELEASED)] == ["confirmed_terminal"]
    assert of(journal, E.LEASE_BLOCKED) == [] and journal.leases() == {}
    (finished,) = of(journal, E.MISSION_FINISHED)
    assert finished["status"] == "CANCELLED"
