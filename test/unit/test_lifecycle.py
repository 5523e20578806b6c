"""The managed-action state machine, checked in one place (``lifecycle.check_change``): by the
writer's action and again by the journal, against the state and revision the journal holds."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.durable import goal_uuid_for
from robot_harness.core.errors import IllegalTransition, StaleRevision
from robot_harness.core.journal import Journal, MemoryJournal, SqliteJournal
from robot_harness.core.journal_pg import PostgresJournal
from robot_harness.core.lifecycle import ALLOWED_TRANSITIONS, ManagedAction, check_change
from robot_harness.core.records import ActionStatus, EventDraft, EventType

S = ActionStatus


def action(action_id: str = "act-1") -> ManagedAction:
    return ManagedAction(action_id=action_id, mission_id="m-1", tool_call_id="call-1", model_turn_id="turn-1",
                         skill="navigate_to", target=None, decision_snapshot_id="snap-1", backend="nav2", now=0.0)


def started(a: ManagedAction) -> EventDraft:
    key = f"m-1/node/a1/v0/{a.action_id}"
    return EventDraft(type=EventType.ROBOT_ACTION_STARTED, mission_id="m-1", robot_action_id=a.action_id,
                      tool_call_id=a.tool_call_id, payload={
                          "dispatch": {"key": key, "goal_id": goal_uuid_for(key), "resources": []},
                          "action": a.view().model_dump(mode="json")})


def change(a: ManagedAction, payload: dict) -> EventDraft:
    return EventDraft(type=EventType.ROBOT_ACTION_STATE_CHANGED, mission_id="m-1", robot_action_id=a.action_id,
                      tool_call_id=a.tool_call_id, payload=payload)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def journal(request, tmp_path: Path):
    j: Journal = (MemoryJournal(clock=ManualClock(), ids=IdGenerator(seed=1)) if request.param == "memory"
                  else PostgresJournal(request.getfixturevalue("pg_url"), clock=ManualClock(), ids=IdGenerator(seed=1))
                  if request.param == "postgres"
                  else SqliteJournal(tmp_path / "j.db", clock=ManualClock(), ids=IdGenerator(seed=1)))
    j.setup()
    yield j
    j.close()


def test_every_state_reaches_only_what_the_table_allows():
    for frm in S:
        for to in S:
            a = action()
            a.state, a.revision = frm, 3
            if to in ALLOWED_TRANSITIONS[frm]:
                change_ = a.transition(to, now=1.0, reason="r")
                assert (change_["from"], change_["to"], change_["revision"]) == (frm.value, to.value, 4)
                assert (a.state, a.revision) == (to, 4)
            else:
                with pytest.raises(IllegalTransition):
                    a.transition(to, now=1.0)
                assert (a.state, a.revision) == (frm, 3)  # a refused move changes nothing


def test_a_backend_success_cannot_skip_verification():
    a = action()
    a.transition(S.ACCEPTED, now=1.0)
    with pytest.raises(IllegalTransition, match="ACCEPTED -> SUCCEEDED is not allowed"):
        a.transition(S.SUCCEEDED, now=2.0)


def test_check_change_refuses_a_stale_start_and_a_skipped_revision():
    check_change("a", state=S.ACCEPTED, revision=1, from_state="ACCEPTED", to_state="RUNNING", new_revision=2)
    with pytest.raises(StaleRevision):
        check_change("a", state=S.RUNNING, revision=2, from_state="ACCEPTED", to_state="RUNNING", new_revision=2)
    with pytest.raises(StaleRevision):
        check_change("a", state=S.ACCEPTED, revision=1, from_state="ACCEPTED", to_state="RUNNING", new_revision=3)
    with pytest.raises(IllegalTransition):
        check_change("a", state=S.ACCEPTED, revision=1, from_state="ACCEPTED", to_state="bogus", new_revision=2)


def test_the_journal_refuses_a_writer_whose_copy_of_the_action_is_stale(journal: Journal):
    mine = action()
    journal.append([EventDraft(type=EventType.MISSION_STARTED, mission_id="m-1", payload={"goal": "g"}), started(mine)])
    theirs = action()  # a second writer's view of the same action, taken before the first moved it
    journal.append([change(mine, mine.transition(S.ACCEPTED, now=1.0))])
    last = journal.last_seq()
    with pytest.raises(StaleRevision, match="is ACCEPTED at revision 1"):
        journal.append([change(theirs, theirs.transition(S.FAILED, now=2.0, reason="late"))])
    assert journal.last_seq() == last  # nothing of the refused batch was written
    journal.append([change(mine, mine.transition(S.RUNNING, now=3.0))])
    assert journal.dispatch_for_action(mine.action_id).state is S.RUNNING


def test_the_journal_refuses_a_move_the_state_machine_forbids(journal: Journal):
    a = action()
    journal.append([EventDraft(type=EventType.MISSION_STARTED, mission_id="m-1", payload={"goal": "g"}), started(a)])
    last = journal.last_seq()
    forged = {"from": "REQUESTED", "to": "SUCCEEDED", "revision": 1, "reason": "backend said so", "backend_goal_id": ""}
    with pytest.raises(IllegalTransition, match="REQUESTED -> SUCCEEDED is not allowed"):
        journal.append([change(a, forged)])
    assert journal.last_seq() == last
    assert journal.dispatch_for_action(a.action_id).state is S.REQUESTED
