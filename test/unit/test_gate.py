"""The commit gate and task state derived from journal records."""
from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.completion import (
    CompletionContract,
    FactStatus,
    GoalVerdict,
    Obligation,
    ObligationKind,
    Receipt,
    ReceiptStatus,
    Verdict,
)
from robot_harness.core.errors import RefusalError, UsageError
from robot_harness.core.gate import (
    COMMIT_RECORDED,
    CONTRACT_FROZEN,
    FACT_RECORDED,
    RECEIPT_RECORDED,
    VERDICT_RECORDED,
    CommitGate,
    GateRejection,
    TaskState,
    commit_drafts,
    observe_fact,
    original_goal_check,
    record_draft,
)
from robot_harness.core.journal import JournalReadError
from robot_harness.core.records import (
    Availability,
    EventType,
    FieldMeta,
    JournalEvent,
    Pose2D,
    WorldSnapshot,
)
from robot_harness.core.verifier import Verifier, VerifierConfig, VerifyRequest

T0 = 1000.0
MISSION = "m1"
GOAL = "Go to the elevator and say hello"
PLACES = {"elevator": Pose2D(x=5.0, y=0.0)}
O1 = Obligation(id="o1", kind=ObligationKind.AT_PLACE, description="at the elevator", params={"place": "elevator"})
O2 = Obligation(id="o2", kind=ObligationKind.SPOKEN, description="say hello", depends_on=("o1",))


def contract(revision: int = 1) -> CompletionContract:
    return CompletionContract(contract_id=f"c{revision}", mission_id=MISSION, revision=revision, goal=GOAL,
                              compiler="test", obligations=(O1, O2), supersedes=f"c{revision - 1}" if revision > 1 else "")


def receipt(rid: str, skill: str, *, start: float, end: float, revision: int = 1, state_version: int = 0,
            args: dict | None = None, pose: Pose2D | None = None) -> Receipt:
    result: dict = {}
    if skill == "speak":  # what RobotIO.speak returns once the speaker acknowledged the sentence
        digest = hashlib.sha256(str((args or {}).get("text", "")).encode()).hexdigest()
        result = {"receipt": {"text_sha256": digest, "ack": {"by": "test/speaker", "at": end, "sha256": digest}}}
    return Receipt(receipt_id=rid, mission_id=MISSION, contract_revision=revision, state_version=state_version,
                   plan_node_id="turn-1", invocation_id=f"call-{rid}", skill=skill, request={"arguments": args or {}},
                   result=result, status=ReceiptStatus.SUCCEEDED, started_at=start, ended_at=end, pose_at_end=pose)


def good_receipts(revision: int = 1, offset: float = 0.0) -> list[Receipt]:
    return [
        receipt(f"r{revision}-nav", "navigate_to", start=T0 + offset + 1, end=T0 + offset + 10, revision=revision,
                args={"place": "elevator"}, pose=Pose2D(x=5.0, y=0.1)),
        receipt(f"r{revision}-say", "speak", start=T0 + offset + 11, end=T0 + offset + 12, revision=revision,
                args={"text": "hello"}),
    ]


def journal(*records) -> list[tuple[str, dict]]:
    """Drafts as the journal would store and return them (JSON-normalized)."""
    out = [("MISSION_STARTED", {"mission_id": MISSION, "goal": GOAL})]
    for r in records:
        pairs = r if isinstance(r, list) else [r] if isinstance(r, tuple) else [record_draft(r)]
        out.extend((t, json.loads(json.dumps(p))) for t, p in pairs)
    return out


def verify(state: TaskState, *, plan_node_id: str = "turn-9", invocation_id: str = "done-9") -> Verdict:
    assert state.contract is not None
    req = VerifyRequest(mission_id=MISSION, goal=state.goal, contract=state.contract, receipts=state.receipts,
                        state_version=state.state_version, plan_node_id=plan_node_id, invocation_id=invocation_id,
                        places=PLACES)
    fresh = WorldSnapshot(snapshot_id="snap-f", mission_id=MISSION, captured_at=T0 + 100, pose=Pose2D(x=5.0, y=0.0),
                          pose_meta=FieldMeta(availability=Availability.AVAILABLE, source_stamp=T0 + 99.9, age_s=0.1))
    v = Verifier(VerifierConfig(), semantic=None, artifact_check=lambda u, s: None, ids=IdGenerator(seed=3),
                 clock=ManualClock(T0 + 100)).verify(req, fresh)
    return v


def gate() -> CommitGate:
    return CommitGate(IdGenerator(seed=5), ManualClock(T0 + 101))


@pytest.fixture
def state() -> TaskState:
    return TaskState.from_records(journal(contract(), *good_receipts()))


# --------------------------------------------------------------------------- task state


def test_state_version_counts_state_changing_records(state):
    assert state.mission_id == MISSION and state.goal == GOAL
    assert state.state_version == 3  # contract + two receipts
    assert [r.receipt_id for r in state.receipts] == ["r1-nav", "r1-say"]
    assert state.committed == () and not state.done


def test_round_trip_through_the_journal(state):
    verdict = verify(state)
    assert verdict.goal_verdict is GoalVerdict.VERIFIED_DONE, verdict.steps
    commit = gate().decide(verdict, state=state, plan_node_id="turn-9", invocation_id="done-9")
    after = TaskState.from_records(journal(contract(), *good_receipts(), commit_drafts(commit, verdict)))
    assert after.state_version == commit.state_version_after == state.state_version + 1
    assert after.committed == ("o1", "o2") and after.done
    assert [f.fact_id for f in after.facts] == [f.fact_id for f in commit.facts]
    assert after.receipts == state.receipts and after.contract == state.contract


def test_from_events_accepts_journal_events_and_skips_other_missions(state):
    verdict = verify(state)
    commit = gate().decide(verdict, state=state, plan_node_id="turn-9", invocation_id="done-9")
    events = [JournalEvent(seq=1, event_id="e1", type=EventType.MISSION_STARTED, stamp=T0, mission_id=MISSION,
                           payload={"goal": GOAL}),
              JournalEvent(seq=2, event_id="e2", type=EventType.MISSION_STARTED, stamp=T0, mission_id="m2",
                           payload={"goal": "something else"})]
    for i, (t, p) in enumerate(journal(contract(), *good_receipts(), commit_drafts(commit, verdict))[1:]):
        events.append(SimpleNamespace(type=SimpleNamespace(value=t) if i % 2 else t, payload=p, mission_id=MISSION))
    rebuilt = TaskState.from_events(events, mission_id=MISSION)
    assert rebuilt.goal == GOAL and rebuilt.done and rebuilt.state_version == 4
    with pytest.raises(JournalReadError):
        TaskState.from_events(events)  # two missions and no mission_id to pick one


def test_inconsistent_journals_do_not_rebuild(state):
    verdict = verify(state)
    commit = gate().decide(verdict, state=state, plan_node_id="turn-9", invocation_id="done-9")
    drafts = commit_drafts(commit, verdict)
    with pytest.raises(JournalReadError):  # an extra receipt moved the state before the commit
        TaskState.from_records(journal(contract(), *good_receipts(), receipt("rx", "speak", start=T0, end=T0), drafts))
    with pytest.raises(JournalReadError):  # commit without its verdict
        TaskState.from_records(journal(contract(), *good_receipts(), drafts[1:]))
    with pytest.raises(JournalReadError):  # revision 3 after revision 1
        TaskState.from_records(journal(contract(), contract(3)))
    with pytest.raises(JournalReadError):
        TaskState.from_records([(CONTRACT_FROZEN, {"contract": {"bogus": 1}})])


# --------------------------------------------------------------------------- the gate


def test_matching_verdict_commits_one_fact_per_obligation(state):
    verdict = verify(state)
    commit = gate().decide(verdict, state=state, plan_node_id="turn-9", invocation_id="done-9")
    assert (commit.verdict_id, commit.contract_id, commit.contract_revision) == (verdict.verdict_id, "c1", 1)
    assert (commit.state_version_before, commit.state_version_after) == (3, 4)
    assert commit.obligations == ("o1", "o2")
    assert [f.key for f in commit.facts] == ["obligation:o1", "obligation:o2"]
    assert all(f.status is FactStatus.COMMITTED and f.supersedes == "" for f in commit.facts)
    assert commit.facts[0].provenance == verdict.step("o1").evidence_ids
    assert "r1-nav" in commit.facts[0].provenance


def test_commit_on_a_new_revision_supersedes_the_previous_facts(state):
    v1 = verify(state)
    c1 = gate().decide(v1, state=state, plan_node_id="turn-9", invocation_id="done-9")
    history = [contract(), *good_receipts(), commit_drafts(c1, v1), contract(2), *good_receipts(2, offset=50)]
    state2 = TaskState.from_records(journal(*history))
    assert state2.contract is not None and state2.contract.revision == 2
    assert state2.committed == () and not state2.done
    v2 = verify(state2, plan_node_id="turn-20", invocation_id="done-20")
    assert v2.goal_verdict is GoalVerdict.VERIFIED_DONE
    assert "r1-nav" not in v2.evidence_ids  # revision 1 receipts are not evidence for revision 2
    c2 = CommitGate(IdGenerator(seed=6), ManualClock(T0 + 200)).decide(
        v2, state=state2, plan_node_id="turn-20", invocation_id="done-20")
    assert [f.supersedes for f in c2.facts] == [f.fact_id for f in c1.facts]
    final = TaskState.from_records(journal(*history, commit_drafts(c2, v2)))
    assert final.done and len(final.facts) == 4


@pytest.mark.parametrize("field, kwargs, change", [
    ("state_version", {}, {"state_version": 2}),
    ("invocation_id", {"invocation_id": "done-10"}, {}),
    ("plan_node_id", {"plan_node_id": "turn-10"}, {}),
    ("mission_id", {}, {"mission_id": "m2"}),
    ("contract_id", {}, {"contract_id": "c0"}),
    ("contract_revision", {}, {"contract_revision": 2}),
])
def test_verdict_bound_to_anything_else_is_rejected(state, field, kwargs, change):
    verdict = verify(state).model_copy(update=change)
    binding = {"plan_node_id": "turn-9", "invocation_id": "done-9", **kwargs}
    with pytest.raises(GateRejection) as exc:
        gate().decide(verdict, state=state, **binding)
    assert exc.value.field == field
    assert exc.value.code == "gate_rejected" and isinstance(exc.value, RefusalError)
    assert exc.value.to_dict()["field"] == field


def test_verdict_from_an_earlier_state_version_is_rejected(state):
    stale = verify(state)
    later = TaskState.from_records(journal(contract(), *good_receipts(), receipt("r-extra", "speak", start=T0 + 13, end=T0 + 14)))
    with pytest.raises(GateRejection) as exc:
        gate().decide(stale, state=later, plan_node_id="turn-9", invocation_id="done-9")
    assert exc.value.field == "state_version"
    assert (exc.value.expected, exc.value.actual) == (4, 3)


def test_only_verified_done_is_accepted():
    partial = TaskState.from_records(journal(contract(), good_receipts()[0]))
    verdict = verify(partial)
    assert verdict.goal_verdict is GoalVerdict.CONTINUE
    with pytest.raises(GateRejection) as exc:
        gate().decide(verdict, state=partial, plan_node_id="turn-9", invocation_id="done-9")
    assert exc.value.field == "goal_verdict"


def test_a_forged_verified_done_is_rejected(state):
    verdict = verify(state)
    dropped = verdict.model_copy(update={"steps": verdict.steps[:1]})
    with pytest.raises(GateRejection) as exc:
        gate().decide(dropped, state=state, plan_node_id="turn-9", invocation_id="done-9")
    assert exc.value.field == "steps"
    uncited = verdict.model_copy(update={"evidence_ids": ("snap-f",)})
    with pytest.raises(GateRejection) as exc:
        gate().decide(uncited, state=state, plan_node_id="turn-9", invocation_id="done-9")
    assert exc.value.field == "evidence_ids"


def test_nothing_is_committed_twice(state):
    verdict = verify(state)
    commit = gate().decide(verdict, state=state, plan_node_id="turn-9", invocation_id="done-9")
    after = TaskState.from_records(journal(contract(), *good_receipts(), commit_drafts(commit, verdict)))
    again = verify(after, plan_node_id="turn-10", invocation_id="done-10")
    with pytest.raises(GateRejection) as exc:
        gate().decide(again, state=after, plan_node_id="turn-10", invocation_id="done-10")
    assert exc.value.field == "done"


def test_commit_drafts_are_verdict_then_commit_then_facts(state):
    verdict = verify(state)
    commit = gate().decide(verdict, state=state, plan_node_id="turn-9", invocation_id="done-9")
    drafts = commit_drafts(commit, verdict)
    assert [t for t, _ in drafts] == [VERDICT_RECORDED, COMMIT_RECORDED, FACT_RECORDED, FACT_RECORDED]
    assert drafts[1][1]["commit"]["commit_id"] == commit.commit_id
    json.dumps(drafts)  # journal-ready
    other = verdict.model_copy(update={"verdict_id": "verdict-x"})
    with pytest.raises(UsageError):
        commit_drafts(commit, other)
    assert record_draft(state.receipts[0])[0] == RECEIPT_RECORDED
    with pytest.raises(UsageError):
        record_draft(Pose2D(x=0, y=0))


def test_observed_facts_chain_apart_from_committed_ones(state):
    ids, clock = IdGenerator(seed=9), ManualClock(T0 + 50)
    f1 = observe_fact(state, key="robot.pose", value={"x": 1.0}, provenance=["snap-1"], ids=ids, clock=clock)
    s1 = TaskState.from_records(journal(contract(), *good_receipts(), f1))
    f2 = observe_fact(s1, key="robot.pose", value={"x": 2.0}, provenance=["snap-2"], ids=ids, clock=clock)
    assert f1.status is FactStatus.OBSERVED and f1.supersedes == "" and f2.supersedes == f1.fact_id
    assert f2.state_version == s1.state_version == 3  # observing does not change task state
    with pytest.raises(UsageError):
        observe_fact(state, key="obligation:o1", value={}, provenance=["snap-1"], ids=ids, clock=clock)
    with pytest.raises(UsageError):
        observe_fact(state, key="robot.pose", value={}, provenance=[], ids=ids, clock=clock)


# --------------------------------------------------------------------------- before reporting success


def test_original_goal_check(state):
    ok, why = original_goal_check(contract(), state)
    assert not ok and "o1" in why
    verdict = verify(state)
    commit = gate().decide(verdict, state=state, plan_node_id="turn-9", invocation_id="done-9")
    after = TaskState.from_records(journal(contract(), *good_receipts(), commit_drafts(commit, verdict)))
    ok, why = original_goal_check(contract(), after)
    assert ok, why
    drifted = after.model_copy(update={"goal": "Go to the elevator"})
    assert original_goal_check(contract(), drifted)[0] is False
    assert original_goal_check(contract(2), after)[0] is False
    assert original_goal_check(contract(), after.model_copy(update={"goal": ""}))[0] is False
    assert original_goal_check(contract(), after.model_copy(update={"goal": ""}), goal=GOAL)[0] is True
    assert original_goal_check(contract(), after, goal="Go somewhere else")[0] is False


def test_a_failed_contract_compilation_changes_nothing():
    s = TaskState.from_records(journal((CONTRACT_FROZEN, {"error": {"code": "x", "message": "no template"}})))
    assert s.contract is None and s.state_version == 0
