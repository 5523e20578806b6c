"""Restart reconciliation: what each backend answer about an interrupted action
makes of its record and its resource, fail-closed. The backend's "succeeded"
counts only through the engine's outcome check on a fresh snapshot."""
from __future__ import annotations

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.durable import LeaseState
from robot_harness.core.errors import BackendUnavailable
from robot_harness.core.journal import MemoryJournal
from robot_harness.core.reconcile import Finding, Reconciler
from robot_harness.core.records import ActionStatus, ControllerState, EventType, MissionStatus, Pose2D

from .fakes import FakeRobot
from .test_durable_engine import interrupted

E = EventType


class LookupRobot(FakeRobot):
    """A backend that can also answer ``rejected`` or refuse lookups altogether."""

    answer: str | None = None
    lookup_error: type[BaseException] | None = None

    def lookup(self, goal_id: str, *, timeout_s: float) -> str | None:
        self.lookups.append(goal_id)
        if self.lookup_error is not None:
            raise self.lookup_error("lookup is not available here")
        return self.answer


def restarted(answer, *, at_target=False, then=None, **reconciler_kw):
    """Interrupt mission-k mid-motion, then reconcile it with the backend answering ``answer``
    (``then`` changes the robot after the interruption)."""
    clock = ManualClock()
    robot = LookupRobot(clock=clock)
    journal = MemoryJournal(clock=clock, ids=IdGenerator(seed=3))
    interrupted(journal, robot)
    (goal,) = robot.goals
    robot.answer = answer
    if at_target:
        robot.pose, robot.controller = goal["target"], ControllerState.IDLE
    if then is not None:
        then(robot)
    reconciler_kw.setdefault("sleep", clock.advance)
    (settled,) = Reconciler(journal=journal, navigation=robot, snapshots=robot, clock=clock,
                            **reconciler_kw).reconcile_open_missions()
    return settled, journal, robot


def states(journal):
    return [e.payload["to"] for e in journal.events(types=[E.ROBOT_ACTION_STATE_CHANGED])]


def only(journal, type_):
    (ev,) = journal.events(types=[type_])
    return ev.payload


def assert_nothing_replayed(journal, robot):
    assert len(robot.goals) == 1 and robot.cancels == [], "nothing re-sent, nothing cancelled"
    assert len(journal.events(types=[E.ROBOT_ACTION_STARTED])) == 1, "no second dispatch intent"
    finished = only(journal, E.MISSION_FINISHED)
    assert finished["status"] == MissionStatus.UNKNOWN.value, "an interrupted mission's goal was never verified"
    assert journal.open_missions() == []


def test_succeeded_and_the_fresh_pose_at_the_target_is_succeeded():
    s, journal, robot = restarted("succeeded", at_target=True)
    assert (s.finding, s.action_state) == (Finding.BACKEND_TERMINAL, ActionStatus.SUCCEEDED)
    assert states(journal)[-2:] == ["VERIFYING", "SUCCEEDED"]
    outcome = only(journal, E.ROBOT_ACTION_OUTCOME)
    assert outcome["evidence"]["distance_to_target_m"] == 0.0 and outcome["evidence"]["reconciled"] is True
    post = journal.events(types=[E.ROBOT_ACTION_OUTCOME])[0].snapshot_id
    assert journal.get_snapshot(post).reason == "reconcile_outcome", "the evidence snapshot is journaled"
    assert [(e.payload["resource"], e.payload["why"]) for e in journal.events(types=[E.LEASE_RELEASED])] == [
        ("base", "confirmed_terminal")]
    assert journal.leases() == {}
    assert_nothing_replayed(journal, robot)
    assert "SUCCEEDED" in only(journal, E.MISSION_FINISHED)["summary"]


def test_succeeded_on_the_controllers_word_alone_is_never_success():
    far, journal, robot = restarted("succeeded")  # the robot is still where the motion started
    assert far.action_state is ActionStatus.FAILED and "from target" in only(journal, E.ROBOT_ACTION_OUTCOME)["reason"]
    assert_nothing_replayed(journal, robot)


def _stale(robot):
    robot.pose_age_s = 5.0


def _jumped(robot):
    robot.pose_jumps += 1


@pytest.mark.parametrize("why, then, reconciler_kw", [
    ("stale pose", _stale, {}),
    ("localization jumped", _jumped, {}),
    ("pose observed only before the lookup", None, {"sleep": None}),
])
def test_succeeded_without_trustworthy_evidence_is_unknown_but_the_resource_is_free(why, then, reconciler_kw):
    s, journal, robot = restarted("succeeded", at_target=True, then=then, **reconciler_kw)
    assert s.action_state is ActionStatus.UNKNOWN, why
    assert only(journal, E.ROBOT_ACTION_OUTCOME)["state"] == "UNKNOWN"
    assert journal.leases() == {}, "the backend confirmed the goal is over: the base is not blocked"
    assert_nothing_replayed(journal, robot)


def test_succeeded_with_no_snapshot_to_check_is_unknown():
    def down(robot):
        def capture(reason, _robot):
            raise BackendUnavailable("aggregator is down")
        robot.on_capture = capture

    s, journal, robot = restarted("succeeded", at_target=True, then=down)
    assert s.action_state is ActionStatus.UNKNOWN and "aggregator is down" in s.reason
    assert journal.events(types=[E.ROBOT_ACTION_OUTCOME])[0].snapshot_id == ""
    assert_nothing_replayed(journal, robot)


@pytest.mark.parametrize("answer", ["aborted", "canceled"])
def test_aborted_or_canceled_is_failed_and_releases_the_resource(answer):
    s, journal, robot = restarted(answer)
    assert (s.finding, s.action_state, s.released) == (Finding.BACKEND_TERMINAL, ActionStatus.FAILED, ("base",))
    assert only(journal, E.ROBOT_ACTION_OUTCOME)["evidence"]["backend_terminal"] == answer
    assert journal.leases() == {}
    assert_nothing_replayed(journal, robot)


def test_aborted_at_the_target_is_conflicting_evidence_exactly_as_the_engine_judges_it():
    s, journal, robot = restarted("aborted", at_target=True)
    assert s.action_state is ActionStatus.UNKNOWN and "conflicting evidence" in s.reason
    assert journal.leases() == {}


def test_rejected_is_failed_without_an_outcome_check():
    s, journal, robot = restarted("rejected")
    assert (s.finding, s.action_state, s.released) == (Finding.BACKEND_REJECTED, ActionStatus.FAILED, ("base",))
    assert states(journal)[-1] == "FAILED" and "VERIFYING" not in states(journal)
    assert journal.events(types=[E.ROBOT_ACTION_OUTCOME]) == []
    assert_nothing_replayed(journal, robot)


@pytest.mark.parametrize("answer", ["accepted", "executing", "canceling", "unknown"])
def test_a_goal_still_running_after_the_restart_is_unknown_and_keeps_the_resource_blocked(answer):
    s, journal, robot = restarted(answer)
    assert (s.finding, s.action_state, s.blocked) == (Finding.BACKEND_ACTIVE, ActionStatus.UNKNOWN, ("base",))
    assert journal.leases()["base"].state is LeaseState.BLOCKED
    assert journal.events(types=[E.ROBOT_ACTION_OUTCOME]) == []
    assert_nothing_replayed(journal, robot)


@pytest.mark.parametrize("error, finding", [
    (BackendUnavailable, Finding.BACKEND_UNREACHABLE),
    (NotImplementedError, Finding.LOOKUP_UNSUPPORTED),
])
def test_a_lookup_that_fails_or_is_unsupported_is_unknown_and_blocks(error, finding):
    s, journal, robot = restarted("succeeded", at_target=True, then=lambda r: setattr(r, "lookup_error", error))
    assert (s.finding, s.action_state, s.blocked) == (finding, ActionStatus.UNKNOWN, ("base",))
    assert journal.leases()["base"].state is LeaseState.BLOCKED
    assert_nothing_replayed(journal, robot)


def test_a_goal_the_backend_does_not_track_while_the_robot_moves_is_unknown_and_blocks():
    s, journal, robot = restarted(None)  # the fake reports velocity while its controller is active
    assert (s.finding, s.action_state, s.blocked) == (Finding.NOT_TRACKED, ActionStatus.UNKNOWN, ("base",))
    assert_nothing_replayed(journal, robot)


def test_reconciling_twice_changes_nothing_the_second_time():
    s, journal, robot = restarted("succeeded", at_target=True)
    before = journal.last_seq()
    again = Reconciler(journal=journal, navigation=robot, snapshots=robot,
                       clock=ManualClock()).reconcile_open_missions()
    assert again == [] and journal.last_seq() == before


def test_an_action_already_unknown_keeps_its_record_when_its_lease_is_settled():
    """An outcome the journal already recorded is not rewritten: only its resource is settled."""
    clock = ManualClock()
    robot = LookupRobot(clock=clock, mode="silent")
    journal = MemoryJournal(clock=clock, ids=IdGenerator(seed=3))
    interrupted(journal, robot)
    reconciler = Reconciler(journal=journal, navigation=robot, snapshots=robot, clock=clock, sleep=clock.advance)
    robot.answer = "executing"
    (first,) = reconciler.reconcile_open_missions()
    assert first.action_state is ActionStatus.UNKNOWN
    robot.answer = "succeeded"
    robot.pose, robot.controller = Pose2D(x=99.0, y=99.0), ControllerState.IDLE
    settled = reconciler.settle_lease(journal.leases()["base"])
    assert settled is not None and settled.released == ("base",) and settled.action_state is None
    assert states(journal)[-1] == "UNKNOWN", "the earlier UNKNOWN stands"


@pytest.mark.parametrize("answer, at_target, final", [
    ("succeeded", True, ActionStatus.SUCCEEDED),
    ("aborted", False, ActionStatus.FAILED),
    ("executing", False, ActionStatus.UNKNOWN),
])
def test_an_action_whose_acceptance_never_reached_the_journal_is_reconciled_too(answer, at_target, final):
    """Killed between send_goal and the journaled acceptance: the action is still REQUESTED in the
    journal, but the backend knows the goal by its key-derived id, so it was accepted."""
    from .test_durable_engine import GO_OFFICE, make

    clock = ManualClock()
    robot = LookupRobot(clock=clock)
    journal = MemoryJournal(clock=clock, ids=IdGenerator(seed=3))
    runner, _, _ = make([GO_OFFICE, {"done": "arrived"}], robot=robot, journal=journal)

    def die(_robot):
        raise SystemExit("supervisor killed between the send and the journaled acceptance")

    robot.on_send = die
    with pytest.raises(SystemExit):
        runner.run("go to the office", mission_id="mission-r")
    assert states(journal) == [], "the acceptance was never journaled"
    (goal,) = robot.goals
    robot.on_send, robot.answer = None, answer
    if at_target:
        robot.pose, robot.controller = goal["target"], ControllerState.IDLE
    (settled,) = Reconciler(journal=journal, navigation=robot, snapshots=robot, clock=clock,
                            sleep=clock.advance).reconcile_open_missions()
    assert settled.action_state is final
    if answer != "executing":  # a terminal answer is judged: the acceptance is recorded first
        assert states(journal)[:2] == ["ACCEPTED", "VERIFYING"]
    assert_nothing_replayed(journal, robot)


def test_one_mission_that_cannot_be_settled_does_not_leave_the_others_open(monkeypatch):
    from robot_harness.core.errors import JournalWriteError
    from robot_harness.core.reconcile import ReconcileError

    clock = ManualClock()
    robot = LookupRobot(clock=clock)
    journal = MemoryJournal(clock=clock, ids=IdGenerator(seed=3))
    interrupted(journal, robot)
    from robot_harness.core.records import EventDraft

    # a second mission the dead supervisor had only just admitted
    journal.append([EventDraft(type=E.MISSION_STARTED, mission_id="mission-2", payload={"goal": "go to the dock"})])
    assert sorted(journal.open_missions()) == ["mission-2", "mission-k"]
    reconciler = Reconciler(journal=journal, navigation=robot, snapshots=robot, clock=clock, sleep=clock.advance)
    real = reconciler._reconcile_mission  # noqa: SLF001

    def first_fails(mission_id):
        if mission_id == "mission-k":
            raise JournalWriteError("disk hiccup", sqlite_error=None)
        return real(mission_id)

    monkeypatch.setattr(reconciler, "_reconcile_mission", first_fails)
    with pytest.raises(ReconcileError) as err:
        reconciler.reconcile_open_missions()
    assert "mission-k" in err.value.message and journal.open_missions() == ["mission-k"]


def test_two_reconcilers_at_once_finish_the_mission_once():
    """The kill test found a restarted supervisor writing two MISSION_FINISHED for one interrupted
    mission: a repeated request reconciled while activation did. Each reconciler's writes are checked
    against the revision it found the mission open at, so the one that comes second writes nothing."""
    clock = ManualClock()
    journal = MemoryJournal(clock=clock, ids=IdGenerator(seed=3))

    class SlowBackend(LookupRobot):
        """Answers the first lookup only after a second reconciler has done its whole work."""

        def lookup(self, goal_id: str, *, timeout_s: float) -> str | None:
            if not self.lookups:
                self.lookups.append(goal_id)
                Reconciler(journal=journal, navigation=self, snapshots=self, clock=clock,
                           sleep=clock.advance).reconcile_open_missions()
                return self.answer
            return super().lookup(goal_id, timeout_s=timeout_s)

    robot = SlowBackend(clock=clock)
    interrupted(journal, robot)
    robot.answer = "executing"
    first = Reconciler(journal=journal, navigation=robot, snapshots=robot, clock=clock, sleep=clock.advance)
    first.reconcile_open_missions()
    finished = [e for e in journal.events() if e.type is E.MISSION_FINISHED]
    assert len(finished) == 1 and journal.open_missions() == []
    assert len([e for e in journal.events() if e.type is E.ROBOT_ACTION_RECONCILED]) == 1


def test_a_write_that_does_not_finish_the_mission_does_not_leave_it_open():
    """Another writer moving the mission without finishing it (an operator's Stop or answer, a lease
    cleared) while it is reconciled: the reconciler reads again and still gives it its one end."""
    from robot_harness.core.records import EventDraft

    clock = ManualClock()
    journal = MemoryJournal(clock=clock, ids=IdGenerator(seed=3))

    class Interjecting(LookupRobot):
        def lookup(self, goal_id: str, *, timeout_s: float) -> str | None:
            if not self.lookups:
                (mission_id,) = journal.open_missions()
                journal.append([EventDraft(type=E.STOP_REQUESTED, mission_id=mission_id,
                                           payload={"reason": "operator", "source": "stop_service"})])
            return super().lookup(goal_id, timeout_s=timeout_s)

    robot = Interjecting(clock=clock)
    interrupted(journal, robot)
    robot.answer = "executing"
    Reconciler(journal=journal, navigation=robot, snapshots=robot, clock=clock,
               sleep=clock.advance).reconcile_open_missions()
    assert journal.open_missions() == []
    assert len([e for e in journal.events() if e.type is E.MISSION_FINISHED]) == 1
    assert len([e for e in journal.events() if e.type is E.ROBOT_ACTION_RECONCILED]) == 1
