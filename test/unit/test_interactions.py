"""Operator interactions in the closed loop: approval of an exact call, denial,
dismissal, expiry, questions, owner authentication, idempotent resolution,
and durability across a journal reopen."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig
from robot_harness.compose import mission_runner
from robot_harness.core.errors import UsageError
from robot_harness.core.interactions import (
    CommandConflict,
    InteractionNotFound,
    NotAuthorized,
    interactions,
    resolve,
    token_sha256,
)
from robot_harness.core.journal import MemoryJournal, SqliteJournal
from robot_harness.core.records import EventDraft, EventType, MissionStatus
from robot_harness.core.skills import default_skills

from .fakes import FakeRobot, ScriptPlanner
from .test_engine import GO_OFFICE, PLACES, assert_one_result_per_call, results

E = EventType
TOKEN = "owner-secret"
APPROVE_NAV = {"interactions": {"skill_tags": {"navigate_to": ["requires_approval"]}, "timeout_s": 30.0,
                                "ask_operator": True}}


def make(turns, *, operator=None, journal=None, clock=None, **cfg):
    """``operator(runner, journal, clock)`` is called on every wait tick of the engine."""
    clock = clock or ManualClock()
    ids = IdGenerator(seed=7)
    robot = FakeRobot(clock=clock)
    config = HarnessConfig(places=PLACES, **{**APPROVE_NAV, **cfg})
    journal = journal or MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    box = {}

    def sleep(s):
        clock.advance(s)
        if operator is not None:
            operator(box["runner"], journal, clock)

    runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids,
                           skills=default_skills(config.navigation, ask_operator=True), snapshots=robot,
                           planner=ScriptPlanner(turns), navigation=robot, robot_io=robot, sleep=sleep)
    box["runner"] = runner
    return runner, robot, journal, clock


def pending(journal):
    return [i for i in interactions(journal.events()).values() if i.pending]


def answer_once(resolution, **kw):
    def operator(runner, journal, clock):
        for i in pending(journal):
            resolve(journal, interaction_id=i.interaction_id, resolution=resolution, token=TOKEN, clock=clock,
                    operator="alice", **kw)
    return operator


def test_an_approved_call_runs_exactly_as_approved():
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "arrived"}], operator=answer_once("approve"))
    out = runner.run("go to the office", owner="alice", owner_token_sha256=token_sha256(TOKEN))
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    (i,) = interactions(journal.events()).values()
    assert i.kind.value == "approval" and i.call["name"] == "navigate_to" and i.call["arguments"]["place"] == "office"
    assert i.resolution["resolution"] == "approve" and i.resolution["operator"] == "alice"
    # the request was journaled before anything was sent; the dispatch came after the approval
    order = [e.type for e in journal.events(types=[E.INTERACTION_REQUESTED, E.INTERACTION_RESOLVED,
                                                   E.ROBOT_ACTION_STARTED])]
    assert order == [E.INTERACTION_REQUESTED, E.INTERACTION_RESOLVED, E.ROBOT_ACTION_STARTED]
    (started,) = [e.payload for e in journal.events(types=[E.ROBOT_ACTION_STARTED])]
    assert started["policy"]["approval"] == i.interaction_id, "the intent names the approval it runs under"
    assert len(robot.goals) == 1


@pytest.mark.parametrize("resolution, status", [("deny", "denied"), ("dismiss", "cancelled")])
def test_a_denied_or_dismissed_call_never_runs(resolution, status):
    runner, robot, journal, _ = make([GO_OFFICE], operator=answer_once(resolution))
    runner.run("go to the office", owner="alice", owner_token_sha256=token_sha256(TOKEN))
    (res,) = results(journal)
    assert res["status"] == status
    assert robot.goals == []
    assert_one_result_per_call(journal)


def test_an_unanswered_approval_expires_and_nothing_runs():
    runner, robot, journal, _ = make([GO_OFFICE], operator=None)
    runner.run("go to the office", owner="alice", owner_token_sha256=token_sha256(TOKEN))
    (i,) = interactions(journal.events()).values()
    assert i.resolution["resolution"] == "expired" and i.resolution["operator"] == "harness"
    assert results(journal)[0]["status"] == "cancelled" and robot.goals == []


def test_a_mission_waiting_on_an_operator_reports_waiting_user():
    stages = []
    clock = ManualClock()
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "arrived"}], operator=answer_once("approve"), clock=clock)
    runner.on_update = lambda stage, action, event: stages.append(stage) if stage else None
    runner.run("go to the office", owner="alice", owner_token_sha256=token_sha256(TOKEN))
    assert "waiting_user" in stages


def test_only_the_owner_may_answer_and_the_first_answer_wins():
    seen = {}

    def operator(runner, journal, clock):
        for i in pending(journal):
            with pytest.raises(NotAuthorized):
                resolve(journal, interaction_id=i.interaction_id, resolution="approve", token="guess", clock=clock)
            first, recorded = resolve(journal, interaction_id=i.interaction_id, resolution="approve", token=TOKEN,
                                      clock=clock)
            again, recorded_again = resolve(journal, interaction_id=i.interaction_id, resolution="approve",
                                            token=TOKEN, clock=clock)
            with pytest.raises(CommandConflict):
                resolve(journal, interaction_id=i.interaction_id, resolution="deny", token=TOKEN, clock=clock)
            seen.update(recorded=recorded, recorded_again=recorded_again, same=first == again)

    runner, robot, journal, _ = make([GO_OFFICE, {"done": "arrived"}], operator=operator)
    out = runner.run("go to the office", owner="alice", owner_token_sha256=token_sha256(TOKEN))
    assert seen == {"recorded": True, "recorded_again": False, "same": True}
    assert out.status is MissionStatus.SUCCEEDED
    assert len(journal.events(types=[E.INTERACTION_RESOLVED])) == 1


def test_a_mission_without_an_owner_credential_cannot_be_approved_by_anyone():
    def operator(runner, journal, clock):
        for i in pending(journal):
            with pytest.raises(NotAuthorized, match="no owner credential"):
                resolve(journal, interaction_id=i.interaction_id, resolution="approve", token="", clock=clock)

    runner, robot, journal, _ = make([GO_OFFICE], operator=operator, interactions={
        **APPROVE_NAV["interactions"], "timeout_s": 1.0})
    runner.run("go to the office")
    assert robot.goals == []


def test_a_question_gets_the_owners_choice():
    ask = {"tool_calls": [{"name": "ask_operator", "arguments": {"question": "Which door?",
                                                                  "choices": ["north", "south"]}}]}

    def operator(runner, journal, clock):
        for i in pending(journal):
            with pytest.raises(UsageError, match="choice must be one of"):
                resolve(journal, interaction_id=i.interaction_id, resolution="answer", choice="west", token=TOKEN,
                        clock=clock)
            with pytest.raises(UsageError, match="resolved with one of"):
                resolve(journal, interaction_id=i.interaction_id, resolution="approve", token=TOKEN, clock=clock)
            resolve(journal, interaction_id=i.interaction_id, resolution="answer", choice="south", token=TOKEN,
                    clock=clock)

    runner, robot, journal, _ = make([ask], operator=operator)
    runner.run("find the right door", owner="alice", owner_token_sha256=token_sha256(TOKEN))
    (res,) = results(journal)
    assert res["status"] == "ok" and res["content"]["choice"] == "south"


def test_a_stop_while_waiting_dismisses_the_interaction_and_cancels_the_mission():
    def operator(runner, journal, clock):
        m = runner.mission_id
        if not journal.events(mission_id=m, types=[E.STOP_REQUESTED]):
            journal.append([EventDraft(type=E.STOP_REQUESTED, mission_id=m, payload={"reason": "operator stop"})],
                           expected_revision=journal.revision(m))

    runner, robot, journal, _ = make([GO_OFFICE], operator=operator)
    out = runner.run("go to the office", owner="alice", owner_token_sha256=token_sha256(TOKEN))
    assert out.status is MissionStatus.CANCELLED
    (i,) = interactions(journal.events()).values()
    assert i.resolution["resolution"] == "dismiss"
    assert results(journal)[0]["status"] == "cancelled" and robot.goals == []


def test_interactions_survive_a_reopen_and_stay_idempotent(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    clock = ManualClock()
    j = SqliteJournal(path, clock=clock, ids=IdGenerator(seed=1))
    j.setup()
    j.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-1"),
              EventDraft(type=E.INTERACTION_REQUESTED, mission_id="m-1", payload={
                  "interaction_id": "ask-1", "kind": "approval", "prompt": "approve navigate_to?",
                  "call": {"tool_call_id": "c1", "name": "navigate_to", "arguments": {"place": "dock"}},
                  "owner": "alice", "owner_sha256": token_sha256(TOKEN), "requested_at": 1.0, "expires_at": 2.0})])
    j.close()
    again = SqliteJournal(path, clock=clock, ids=IdGenerator(seed=2))  # a restarted node
    again.setup()
    assert [i.interaction_id for i in pending(again)] == ["ask-1"]
    resolve(again, interaction_id="ask-1", resolution="deny", token=TOKEN, clock=clock, operator="alice")
    _, recorded = resolve(again, interaction_id="ask-1", resolution="deny", token=TOKEN, clock=clock)
    assert not recorded
    with pytest.raises(CommandConflict):
        resolve(again, interaction_id="ask-1", resolution="approve", token=TOKEN, clock=clock)
    with pytest.raises(InteractionNotFound):
        resolve(again, interaction_id="ask-nope", resolution="approve", token=TOKEN, clock=clock)
    again.close()
