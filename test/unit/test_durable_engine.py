"""Durable execution in the closed loop: lost acknowledgments, duplicate
requests, leases between two runners sharing one journal, Stop from another
writer, and restart reconciliation, against scripted outside-world fakes."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig
from robot_harness.core.durable import LeaseState
from robot_harness.compose import mission_runner
from robot_harness.core.errors import UsageError
from robot_harness.core.journal import MemoryJournal, SqliteJournal
from robot_harness.core.reconcile import Finding, Reconciler
from robot_harness.core.records import ControllerState, EventDraft, EventType, MissionStatus
from robot_harness.core.skills import default_skills

from .fakes import FakeRobot, ScriptPlanner
from .test_engine import GO_OFFICE, PLACES, assert_one_result_per_call, results

E = EventType


def make(turns, *, robot=None, journal=None, clock=None, planner_before=None, seed=7, **robot_kw):
    clock = clock or ManualClock()
    ids = IdGenerator(seed=seed)
    robot = robot or FakeRobot(clock=clock, **robot_kw)
    config = HarnessConfig(places=PLACES)
    journal = journal or MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    planner = ScriptPlanner(turns, before=planner_before)
    runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids, skills=default_skills(config.navigation),
                           snapshots=robot, planner=planner, navigation=robot, robot_io=robot)
    return runner, robot, journal


def of(journal, type_):
    return [e.payload for e in journal.events(types=[type_])]


def test_a_lost_acknowledgment_is_looked_up_not_resent():
    runner, robot, journal = make([GO_OFFICE, {"done": "arrived"}], mode="lost_ack")
    out = runner.run("go to the office")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    assert len(robot.goals) == 1, "the goal went out once"
    goal_id = robot.goals[0]["goal_id"]
    assert robot.lookups == [goal_id]
    (found,) = of(journal, E.ROBOT_ACTION_RECONCILED)
    assert found["finding"] == "acknowledgment_lost" and found["backend_status"] == "executing"
    (started,) = of(journal, E.ROBOT_ACTION_STARTED)
    assert started["dispatch"]["goal_id"] == goal_id, "the goal was sent under the id its intent recorded"
    assert results(journal)[0]["status"] == "accepted"
    released = of(journal, E.LEASE_RELEASED)
    assert [(r["resource"], r["why"]) for r in released] == [("base", "confirmed_terminal")]
    assert journal.leases() == {}


def test_a_request_that_never_arrived_is_unknown_and_blocks_the_base_until_reconciled():
    runner, robot, journal = make([GO_OFFICE, GO_OFFICE, {"done": "arrived"}], mode="lost_request")
    runner.planner.before = lambda i: setattr(robot, "mode", "normal") if i == 1 else None  # it answers again
    out = runner.run("go to the office")
    states = [e.payload["to"] for e in journal.events(types=[E.ROBOT_ACTION_STATE_CHANGED])]
    assert states[0] == "UNKNOWN", "no accept/reject and no trace on the backend: unknown, not failed"
    (blocked,) = of(journal, E.LEASE_BLOCKED)
    assert blocked["resource"] == "base"
    # the next dispatch first settles the blocked lease: the backend does not know the
    # goal and the robot is idle and stationary, so the base is released, then used
    reconciled = of(journal, E.ROBOT_ACTION_RECONCILED)
    assert [r["finding"] for r in reconciled] == ["acknowledgment_lost", "not_tracked_stopped"]
    whys = [r["why"] for r in of(journal, E.LEASE_RELEASED)]
    assert whys[0] == "confirmed_stopped"
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    assert len(robot.goals) == 1, "only the second request reached the robot"
    assert_one_result_per_call(journal)


def test_an_unknown_action_still_running_on_the_backend_blocks_the_next_motion():
    runner, robot, journal = make([GO_OFFICE, GO_OFFICE], mode="silent")
    out = runner.run("go to the office")
    assert len(robot.goals) == 1
    second = results(journal)[1]
    assert second["status"] == "rejected" and second["content"]["code"] == "lease_conflict"
    assert "unknown outcome" in second["content"]["reason"]
    assert journal.leases()["base"].state is LeaseState.BLOCKED
    assert out.status is not MissionStatus.SUCCEEDED


def test_a_mission_id_runs_once():
    runner, robot, journal = make([GO_OFFICE, {"done": "arrived"}])
    first = runner.run("go to the office", mission_id="mission-1")
    assert first.status is MissionStatus.SUCCEEDED
    again, robot2, _ = make([GO_OFFICE, {"done": "arrived"}], journal=journal, seed=8)
    with pytest.raises(UsageError, match="already exists"):
        again.run("go to the office", mission_id="mission-1")
    assert robot2.goals == [] and len(robot.goals) == 1


def test_two_runners_sharing_a_journal_cannot_both_command_the_base(tmp_path: Path):
    clock = ManualClock()
    shared = tmp_path / "journal.sqlite3"
    a_journal = SqliteJournal(shared, clock=clock, ids=IdGenerator(seed=1))
    b_journal = SqliteJournal(shared, clock=clock, ids=IdGenerator(seed=2))
    b_runner, b_robot, _ = make([GO_OFFICE, {"done": "arrived"}], journal=b_journal, clock=clock, seed=2,
                                snap_prefix="b-snap")
    b_out = {}
    a_runner, a_robot, _ = make([GO_OFFICE, {"done": "arrived"}], journal=a_journal, clock=clock, seed=1)
    # While A's goal is being sent (its intent and lease are committed), B tries to drive.
    a_robot.on_send = lambda r: b_out.setdefault("out", b_runner.run("go to the office"))
    a_out = a_runner.run("go to the office")
    assert a_out.status is MissionStatus.SUCCEEDED, a_out.summary
    assert b_robot.goals == [], "B never commanded the base"
    b_results = [e.payload for e in b_journal.events(mission_id=b_runner.mission_id, types=[E.TOOL_RESULT_RECORDED])]
    assert b_results[0]["content"]["code"] == "lease_conflict"
    assert b_results[0]["content"]["lease"]["owner"].startswith("act-")
    assert b_out["out"].status is not MissionStatus.SUCCEEDED
    a_journal.close(), b_journal.close()


def test_a_stop_from_another_writer_cancels_the_turns_calls_and_nothing_moves():
    runner, robot, journal = make([GO_OFFICE])

    def operator_stop(turn_index):
        m = runner.mission_id
        journal.append([EventDraft(type=E.STOP_REQUESTED, mission_id=m, payload={"reason": "operator pressed stop"})],
                       expected_revision=journal.revision(m))

    runner.planner.before = operator_stop
    out = runner.run("go to the office")
    assert out.status is MissionStatus.CANCELLED and "operator pressed stop" in out.summary
    assert robot.goals == []
    (res,) = results(journal)
    assert res["status"] == "cancelled"
    assert_one_result_per_call(journal)


def test_a_stop_during_motion_cancels_and_records_the_confirmed_outcome():
    runner, robot, journal = make([GO_OFFICE, {"done": "arrived"}], polls_to_finish=50)
    polls = {"n": 0}
    real_poll = robot.poll

    def poll(timeout_s):
        polls["n"] += 1
        if polls["n"] == 5:
            m = runner.mission_id
            journal.append([EventDraft(type=E.STOP_REQUESTED, mission_id=m, payload={"reason": "operator"})],
                           expected_revision=journal.revision(m))
        return real_poll(timeout_s)

    robot.poll = poll
    out = runner.run("go to the office")
    assert out.status is MissionStatus.CANCELLED
    assert robot.cancels == [robot.goals[0]["goal_id"]]
    (outcome,) = of(journal, E.ROBOT_ACTION_OUTCOME)
    assert "backend confirmed canceled" in outcome["reason"]
    assert [r["why"] for r in of(journal, E.LEASE_RELEASED)] == ["confirmed_terminal"]


def test_a_speaker_held_by_someone_else_refuses_speech():
    runner, robot, journal = make([{"tool_calls": [{"name": "speak", "arguments": {"text": "hello"}}]}])
    journal.append([EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-other", payload={
        "resource": "speaker", "owner": "call-x", "expires_at": 1e12})])
    runner.run("say hello")
    (res,) = results(journal)
    assert res["status"] == "rejected" and res["content"]["code"] == "lease_conflict"


# ----------------------------------------------------------------- restart


def interrupted(journal, robot):
    """A journal as a supervisor leaves it when killed mid-motion."""
    runner, _, _ = make([GO_OFFICE, {"done": "arrived"}], robot=robot, journal=journal)

    def die(timeout_s):
        raise SystemExit("supervisor killed")

    robot.on_send = lambda r: setattr(r, "poll", die)
    with pytest.raises(SystemExit):
        runner.run("go to the office", mission_id="mission-k")
    return runner


@pytest.mark.parametrize("backend, arrived, finding, state, lease_after", [
    ("executing", False, Finding.BACKEND_ACTIVE, "UNKNOWN", LeaseState.BLOCKED),
    ("succeeded", True, Finding.BACKEND_TERMINAL, "SUCCEEDED", None),
    ("succeeded", False, Finding.BACKEND_TERMINAL, "FAILED", None),
    ("aborted", False, Finding.BACKEND_TERMINAL, "FAILED", None),
    ("canceled", False, Finding.BACKEND_TERMINAL, "FAILED", None),
    (None, False, Finding.NOT_TRACKED_STOPPED, "UNKNOWN", None),
    ("unreachable", False, Finding.BACKEND_UNREACHABLE, "UNKNOWN", LeaseState.BLOCKED),
])
def test_restart_reconciles_the_in_flight_action_without_resending(backend, arrived, finding, state, lease_after):
    clock = ManualClock()
    robot = FakeRobot(clock=clock)
    journal = MemoryJournal(clock=clock, ids=IdGenerator(seed=3))
    interrupted(journal, robot)
    (goal,) = robot.goals
    assert journal.open_missions() == ["mission-k"]
    # after the restart the backend says:
    if backend == "unreachable":
        robot.reachable = False
    elif backend is None:
        robot.status.pop(goal["goal_id"])
        robot.controller = ControllerState.IDLE
    else:
        robot.status[goal["goal_id"]] = backend
    if arrived:
        robot.pose, robot.controller = goal["target"], ControllerState.IDLE
    settled = Reconciler(journal=journal, navigation=robot, snapshots=robot, clock=clock,
                         sleep=clock.advance).reconcile_open_missions()
    assert [s.finding for s in settled] == [finding]
    assert [s.action_state.value for s in settled] == [state]
    assert len(robot.goals) == 1 and robot.cancels == [], "nothing re-sent, nothing cancelled"
    states = [e.payload["to"] for e in journal.events(types=[E.ROBOT_ACTION_STATE_CHANGED])]
    assert states[-1] == state
    if finding is Finding.BACKEND_TERMINAL:  # judged like any terminal report: VERIFYING, then the outcome check
        assert states[-2] == "VERIFYING"
        (outcome,) = of(journal, E.ROBOT_ACTION_OUTCOME)
        assert outcome["state"] == state and outcome["evidence"]["backend_terminal"] == backend
    else:
        assert of(journal, E.ROBOT_ACTION_OUTCOME) == []
    (finished,) = of(journal, E.MISSION_FINISHED)
    assert finished["status"] == "UNKNOWN" and "interrupted" in finished["summary"], \
        "the mission's goal was never verified, whatever its action ended as"
    assert journal.open_missions() == []
    lease = journal.leases().get("base")
    assert (lease.state if lease else None) is lease_after
