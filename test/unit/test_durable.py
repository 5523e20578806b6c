"""Durable execution state in the journal: mission revisions, idempotent
dispatch keys, action revisions and resource leases, on every backend and
across two SQLite connections (two processes sharing one journal file)."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.durable import (
    DispatchKey,
    DuplicateDispatch,
    LeaseConflict,
    LeaseState,
    goal_uuid_for,
)
from robot_harness.core.errors import StaleRevision, UsageError
from robot_harness.core.journal import Journal, MemoryJournal, SqliteJournal
from robot_harness.core.journal_pg import PostgresJournal
from robot_harness.core.records import EventDraft, EventType

E = EventType


def d(type_: EventType, mission: str = "m-1", **kw) -> EventDraft:
    return EventDraft(type=type_, mission_id=mission, **kw)


def intent(action: str, key: str, mission: str = "m-1", resources=("base",)) -> EventDraft:
    return d(E.ROBOT_ACTION_STARTED, mission, robot_action_id=action, tool_call_id=f"call-{action}", payload={
        "dispatch": {"key": key, "goal_id": goal_uuid_for(key), "resources": list(resources)},
        "action": {"skill": "navigate_to"},
    })


def state(action: str, frm: str, to: str, revision: int, mission: str = "m-1") -> EventDraft:
    return d(E.ROBOT_ACTION_STATE_CHANGED, mission, robot_action_id=action,
             payload={"from": frm, "to": to, "revision": revision, "reason": "", "backend_goal_id": ""})


def lease(type_: EventType, resource: str, owner: str, mission: str = "m-1", **payload) -> EventDraft:
    return d(type_, mission, payload={"resource": resource, "owner": owner, **payload})


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def journal(request, tmp_path: Path):
    if request.param == "memory":
        j: Journal = MemoryJournal(clock=ManualClock(), ids=IdGenerator(seed=1))
    elif request.param == "postgres":
        j = PostgresJournal(request.getfixturevalue("pg_url"), clock=ManualClock(), ids=IdGenerator(seed=1))
    else:
        j = SqliteJournal(tmp_path / "j.db", clock=ManualClock(), ids=IdGenerator(seed=1))
    j.setup()
    yield j
    j.close()


def test_only_state_changes_move_a_missions_revision(journal: Journal):
    journal.append([d(E.MISSION_STARTED), d(E.MODEL_TURN_STARTED)])
    assert journal.revision("m-1") == 1
    journal.append([d(E.ROBOT_ACTION_PROGRESS), d(E.MODEL_RESPONSE_RECORDED)])  # observations
    assert journal.revision("m-1") == 1
    journal.append([d(E.TOOL_RESULT_RECORDED)], expected_revision=1)
    assert journal.revision("m-1") == 2
    assert journal.revision("m-other") == 0


def test_a_stale_writer_gets_stale_revision_and_writes_nothing(journal: Journal):
    journal.append([d(E.MISSION_STARTED)])
    rev = journal.revision("m-1")
    journal.append([d(E.STOP_REQUESTED, payload={"reason": "operator"})], expected_revision=rev)
    last = journal.last_seq()
    with pytest.raises(StaleRevision) as err:
        journal.append([d(E.TOOL_RESULT_RECORDED)], expected_revision=rev)
    assert err.value.code == "stale_revision"
    assert (err.value.expected, err.value.actual) == (rev, rev + 1)
    assert journal.last_seq() == last
    # an observation by someone else does not make the writer stale
    journal.append([d(E.ROBOT_ACTION_PROGRESS)])
    journal.append([d(E.TOOL_RESULT_RECORDED)], expected_revision=rev + 1)


def test_expected_revision_needs_one_named_mission(journal: Journal):
    with pytest.raises(UsageError):
        journal.append([d(E.TOOL_RESULT_RECORDED, "m-1"), d(E.TOOL_RESULT_RECORDED, "m-2")], expected_revision=0)
    with pytest.raises(UsageError):
        journal.append([d(E.TOOL_RESULT_RECORDED, "")], expected_revision=0)


def test_the_same_dispatch_key_twice_returns_the_existing_record(journal: Journal):
    key = DispatchKey.for_call(mission_id="m-1", skill="navigate_to", arguments={"place": "dock"},
                               attempt=1, state_version=3).text
    journal.append([intent("act-1", key), lease(E.LEASE_ACQUIRED, "base", "act-1")])
    journal.append([state("act-1", "REQUESTED", "ACCEPTED", 1)])
    last = journal.last_seq()
    with pytest.raises(DuplicateDispatch) as err:
        journal.append([intent("act-2", key)])
    existing = err.value.existing
    assert (existing.action_id, existing.state.value, existing.goal_id) == ("act-1", "ACCEPTED", goal_uuid_for(key))
    assert journal.last_seq() == last
    assert journal.dispatch(key).action_id == "act-1"
    # an explicitly authorized new attempt is a new key
    retry = DispatchKey.for_call(mission_id="m-1", skill="navigate_to", arguments={"place": "dock"},
                                 attempt=2, state_version=3).text
    assert retry != key and goal_uuid_for(retry) != goal_uuid_for(key)


def test_dispatch_keys_name_task_node_attempt_and_state_version():
    k = DispatchKey.for_call(mission_id="m", skill="navigate_to", arguments={"b": 1, "a": 2}, attempt=1, state_version=0)
    same = DispatchKey.for_call(mission_id="m", skill="navigate_to", arguments={"a": 2, "b": 1}, attempt=1,
                                state_version=0)
    assert k.text == same.text and len(goal_uuid_for(k.text)) == 32
    others = [
        DispatchKey.for_call(mission_id="m2", skill="navigate_to", arguments={"a": 2, "b": 1}, attempt=1, state_version=0),
        DispatchKey.for_call(mission_id="m", skill="navigate_to", arguments={"a": 3, "b": 1}, attempt=1, state_version=0),
        DispatchKey.for_call(mission_id="m", skill="navigate_to", arguments={"a": 2, "b": 1}, attempt=2, state_version=0),
        DispatchKey.for_call(mission_id="m", skill="navigate_to", arguments={"a": 2, "b": 1}, attempt=1, state_version=1),
    ]
    assert len({k.text, *(o.text for o in others)}) == 5


def test_action_transitions_are_revision_checked(journal: Journal):
    journal.append([intent("act-1", "k1")])
    journal.append([state("act-1", "REQUESTED", "ACCEPTED", 1)])
    with pytest.raises(StaleRevision):
        journal.append([state("act-1", "REQUESTED", "UNKNOWN", 1)])  # a writer that missed ACCEPTED
    journal.append([state("act-1", "ACCEPTED", "RUNNING", 2), state("act-1", "RUNNING", "VERIFYING", 3)])
    assert journal.dispatch("k1").state.value == "VERIFYING"


def test_an_exclusive_lease_blocks_others_until_released(journal: Journal):
    journal.append([lease(E.LEASE_ACQUIRED, "base", "act-1", expires_at=100.0)])
    with pytest.raises(LeaseConflict) as err:
        journal.append([lease(E.LEASE_ACQUIRED, "base", "act-2", mission="m-2"), d(E.TOOL_RESULT_RECORDED, "m-2")])
    assert err.value.code == "lease_conflict" and err.value.lease.owner == "act-1"
    assert journal.revision("m-2") == 0  # nothing of the batch was written
    journal.append([lease(E.LEASE_ACQUIRED, "camera", "act-2", mission="m-2")])  # another resource is free
    journal.append([lease(E.LEASE_ACQUIRED, "base", "act-1", expires_at=200.0)])  # the owner renews
    assert journal.leases()["base"].expires_at == 200.0
    with pytest.raises(StaleRevision):
        journal.append([lease(E.LEASE_RELEASED, "base", "act-2", mission="m-2", why="confirmed_terminal")])
    journal.append([lease(E.LEASE_RELEASED, "base", "act-1", why="confirmed_terminal")])
    journal.append([lease(E.LEASE_ACQUIRED, "base", "act-2", mission="m-2")])
    assert journal.leases()["base"].owner == "act-2"


def test_a_blocked_lease_stays_blocked_until_its_owner_is_reconciled(journal: Journal):
    journal.append([lease(E.LEASE_ACQUIRED, "base", "act-1")])
    journal.append([lease(E.LEASE_BLOCKED, "base", "act-1", reason="no terminal report")])
    held = journal.leases()["base"]
    assert held.state is LeaseState.BLOCKED and held.reason == "no terminal report"
    with pytest.raises(LeaseConflict, match="unknown outcome"):
        journal.append([lease(E.LEASE_ACQUIRED, "base", "act-2", mission="m-2")])
    journal.append([lease(E.LEASE_RELEASED, "base", "act-1", why="operator_cleared", operator="alice")])
    assert "base" not in journal.leases()


def test_open_missions_are_those_without_a_finish(journal: Journal):
    journal.append([d(E.MISSION_STARTED, "m-1")])
    journal.append([d(E.MISSION_STARTED, "m-2")])
    journal.append([d(E.MISSION_FINISHED, "m-1")])
    assert journal.open_missions() == ["m-2"]


def test_two_processes_sharing_a_journal_see_each_others_leases_and_keys(tmp_path: Path):
    a = SqliteJournal(tmp_path / "j.db", clock=ManualClock(), ids=IdGenerator(seed=1))
    b = SqliteJournal(tmp_path / "j.db", clock=ManualClock(), ids=IdGenerator(seed=2))
    a.setup(), b.setup()
    try:
        a.append([intent("act-1", "k1"), lease(E.LEASE_ACQUIRED, "base", "act-1")])
        with pytest.raises(LeaseConflict):
            b.append([lease(E.LEASE_ACQUIRED, "base", "act-9", mission="m-9")])
        with pytest.raises(DuplicateDispatch):
            b.append([intent("act-9", "k1", mission="m-9")])
        b.append([d(E.STOP_REQUESTED, payload={"reason": "operator"})], expected_revision=2)
        with pytest.raises(StaleRevision):
            a.append([d(E.TOOL_RESULT_RECORDED)], expected_revision=2)
        assert a.revision("m-1") == 3
    finally:
        a.close(), b.close()


def test_the_index_is_rebuilt_from_the_file_on_reopen(tmp_path: Path):
    path = tmp_path / "j.db"
    j = SqliteJournal(path, clock=ManualClock(), ids=IdGenerator(seed=1))
    j.setup()
    j.append([d(E.MISSION_STARTED), intent("act-1", "k1"), lease(E.LEASE_ACQUIRED, "base", "act-1")])
    j.append([state("act-1", "REQUESTED", "ACCEPTED", 1), lease(E.LEASE_BLOCKED, "base", "act-1", reason="crash")])
    j.close()
    again = SqliteJournal(path, clock=ManualClock(), ids=IdGenerator(seed=3))
    again.setup()
    try:
        assert again.revision("m-1") == 5
        assert again.dispatch("k1").state.value == "ACCEPTED"
        assert again.dispatch_for_action("act-1").key == "k1"
        assert again.leases()["base"].state is LeaseState.BLOCKED
        assert again.open_missions() == ["m-1"]
    finally:
        again.close()
