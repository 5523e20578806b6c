"""Completion authority inside the real engine: the contract is frozen before
the planner runs, receipts are the evidence, the verifier never sees planner
text, and only the commit gate (with a verdict bound to the current state)
ends a mission in success."""
from __future__ import annotations

from robot_harness.core.authority import InProcessVerifier
from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig
from robot_harness.core.engine import MissionRunner
from robot_harness.core.errors import BackendUnavailable
from robot_harness.core.journal import MemoryJournal
from robot_harness.core.records import EventType, MissionStatus
from robot_harness.core.skills import default_skills

from .fakes import FakeRobot, ScriptPlanner

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "office": {"x": 3.0, "y": 1.0, "yaw": 1.57}}
GO_OFFICE = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "office"}}]}
SAY_HI = {"tool_calls": [{"name": "speak", "arguments": {"text": "hi"}}]}
DONE = {"done": "I am certainly at the office. VERIFIED. Mission complete."}


class LateReplayVerifier:
    """A verifier link that loses the answer to the first proposal and later delivers
    that stale verdict as the answer to the second one (a lost acknowledgment
    followed by a replay), then behaves."""

    name = "late-replay"

    def __init__(self, inner: InProcessVerifier) -> None:
        self.inner = inner
        self.requests = []
        self.stale = None

    def verify(self, request):
        self.requests.append(request)
        if len(self.requests) == 1:
            self.stale = self.inner.verify(request)
            raise BackendUnavailable("verifier answer lost", service="test")
        if len(self.requests) == 2:
            return self.stale
        return self.inner.verify(request)


def make(turns, *, verifier_factory=None, robot_kw=None):
    clock = ManualClock()
    ids = IdGenerator(seed=11)
    robot = FakeRobot(clock=clock, **(robot_kw or {}))
    config = HarnessConfig(places=PLACES)
    journal = MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    planner = ScriptPlanner(turns)
    inner = InProcessVerifier(config=config, snapshots=robot, ids=ids, clock=clock)
    verifier = verifier_factory(inner) if verifier_factory else inner
    runner = MissionRunner(config=config, journal=journal, clock=clock, ids=ids, skills=default_skills(config.navigation),
                           snapshots=robot, planner=planner, navigation=robot, robot_io=robot, verifier=verifier)
    return runner, robot, journal, planner, verifier


def of(journal, t):
    return [e for e in journal.events() if e.type is t]


def test_the_contract_is_frozen_before_the_planner_is_asked_anything():
    runner, _, journal, planner, _ = make([GO_OFFICE, DONE])
    out = runner.run("go to the office")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    seq_contract = of(journal, EventType.CONTRACT_FROZEN)[0].seq
    seq_first_turn = of(journal, EventType.MODEL_TURN_STARTED)[0].seq
    assert seq_contract < seq_first_turn
    # the planner sees what is left to do (read-only), never the contract record itself
    first = planner.requests[0].context
    assert "contract" not in first
    assert [o["id"] for o in first["progress"]["frontier"]] == ["o1"] and first["progress"]["committed"] == []


def test_a_replayed_verdict_from_an_earlier_state_version_is_rejected_by_the_gate():
    turns = [GO_OFFICE, DONE, SAY_HI, DONE, DONE]
    runner, robot, journal, planner, verifier = make(turns, verifier_factory=LateReplayVerifier)
    out = runner.run("go to the office")
    # the stale verdict said verified_done, but it was bound to the first proposal
    # (its plan node, invocation and state version) - the gate refuses it
    (rejected,) = of(journal, EventType.GATE_REJECTED)
    assert rejected.payload["verdict_id"] == verifier.stale[0].verdict_id
    assert verifier.stale[0].goal_verdict.value == "verified_done"
    assert rejected.payload["field"] == "state_version"
    assert (rejected.payload["expected"], rejected.payload["actual"]) == (3, 2)
    assert set(rejected.payload["mismatches"]) == {"state_version", "plan_node_id", "invocation_id"}
    # the third proposal is judged afresh and committed
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    (commit,) = of(journal, EventType.COMMIT_RECORDED)
    assert commit.payload["commit"]["verdict_id"] != verifier.stale[0].verdict_id
    assert commit.payload["commit"]["state_version_before"] > verifier.stale[0].state_version


def test_the_verifier_never_receives_the_planners_words():
    class Recording:
        name = "recording"

        def __init__(self, inner):
            self.inner, self.requests = inner, []

        def verify(self, request):
            self.requests.append(request)
            return self.inner.verify(request)

    runner, _, journal, _, verifier = make([GO_OFFICE, DONE], verifier_factory=Recording)
    runner.run("go to the office")
    (request,) = verifier.requests
    text = request.model_dump_json()
    assert "VERIFIED. Mission complete" not in text and "certainly" not in text
    # the proposal text is kept for audit, as a request, never as evidence
    (proposal,) = of(journal, EventType.DONE_PROPOSED)
    assert proposal.payload["text"] == DONE["done"]


def test_every_executed_call_has_exactly_one_immutable_receipt_bound_to_its_turn_and_snapshot():
    runner, _, journal, _, _ = make([GO_OFFICE, SAY_HI, DONE])
    runner.run("go to the office")
    receipts = [e.payload["receipt"] for e in of(journal, EventType.RECEIPT_RECORDED)]
    results = of(journal, EventType.TOOL_RESULT_RECORDED)
    assert sorted(r["invocation_id"] for r in receipts) == sorted(e.tool_call_id for e in results)
    versions = [r["state_version"] for r in receipts]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    turns = {e.model_turn_id for e in of(journal, EventType.MODEL_TURN_STARTED)}
    for r in receipts:
        assert r["plan_node_id"] in turns and r["decision_snapshot_id"]
        assert r["ended_at"] >= r["started_at"]
    nav = next(r for r in receipts if r["skill"] == "navigate_to")
    assert nav["status"] == "SUCCEEDED" and nav["outcome_snapshot_id"] and nav["pose_at_end"]


def test_observed_facts_are_kept_apart_from_committed_ones_and_supersede_instead_of_overwriting():
    runner, _, journal, _, _ = make([GO_OFFICE, {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]},
                                     GO_OFFICE, DONE])
    out = runner.run("go to the office")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    facts = [e.payload["fact"] for e in of(journal, EventType.FACT_RECORDED)]
    poses = [f for f in facts if f["key"] == "robot.pose"]
    assert len(poses) == 3 and all(f["status"] == "observed" for f in poses)
    assert poses[0]["supersedes"] == "" and poses[1]["supersedes"] == poses[0]["fact_id"]
    assert poses[2]["supersedes"] == poses[1]["fact_id"]
    committed = [f for f in facts if f["status"] == "committed"]
    assert [f["key"] for f in committed] == ["obligation:o1"]
    # the commit and its facts are one atomic transition: consecutive seqs, one commit
    commit_ev = of(journal, EventType.COMMIT_RECORDED)[0]
    fact_ev = [e for e in of(journal, EventType.FACT_RECORDED) if e.payload["fact"]["status"] == "committed"][0]
    assert fact_ev.seq == commit_ev.seq + 1


def test_an_uncovered_goal_is_not_planned_at_all():
    runner, robot, journal, planner, _ = make([GO_OFFICE, DONE])
    out = runner.run("go to the office and pick up the parcel")
    assert out.status in (MissionStatus.BLOCKED, MissionStatus.WAITING_USER), out.summary
    assert "pick up the parcel" in out.summary
    assert planner.requests == [] and robot.goals == []
