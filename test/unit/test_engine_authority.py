"""Completion authority inside the real engine: the contract is frozen before
the planner runs, receipts are the evidence, the verifier never sees planner
text, and only the commit gate (with a verdict bound to the current state)
ends a mission in success."""
from __future__ import annotations

import json

from robot_harness.compose import in_process_verifier
from robot_harness.core.authority import InProcessVerifier
from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.completion import EvidenceRef
from robot_harness.core.config import HarnessConfig
from robot_harness.compose import mission_runner
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


class BagRecorder:
    """The evidence bag as the engine's ``EvidenceRecorder`` port sees it (an outside-world stand-in):
    every record gets a bag ref at the next log time."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.stopped: list[str] = []
        self.records: list[tuple[str, object, EvidenceRef]] = []

    def start(self, mission_id: str) -> None:
        self.started.append(mission_id)

    def record_record(self, topic, record):
        ref = EvidenceRef.for_bag("mission.mcap", topic, 1_000_000 * (len(self.records) + 1), sequence=len(self.records) + 1)
        self.records.append((topic, record, ref))
        return ref

    def stop(self, *, status: str = "", summary: str = "") -> dict:
        self.stopped.append(status)
        return {"bag": "mission.mcap", "path": "/tmp/mission.mcap", "messages": len(self.records), "dropped": 0}

    def ref_of(self, record_id: str) -> EvidenceRef:
        (ref,) = [r for _, rec, r in self.records if getattr(rec, "snapshot_id", None) == record_id]
        return ref


def make(turns, *, verifier_factory=None, robot_kw=None, recorder=None):
    clock = ManualClock()
    ids = IdGenerator(seed=11)
    robot = FakeRobot(clock=clock, **(robot_kw or {}))
    config = HarnessConfig(places=PLACES)
    journal = MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    planner = ScriptPlanner(turns)
    inner = in_process_verifier(config=config, snapshots=robot, ids=ids, clock=clock)
    verifier = verifier_factory(inner) if verifier_factory else inner
    runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids, skills=default_skills(config.navigation),
                           snapshots=robot, planner=planner, navigation=robot, robot_io=robot, verifier=verifier,
                           recorder=recorder)
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


def test_the_fresh_verification_snapshot_is_cited_by_id_and_by_its_bag_ref():
    bag = BagRecorder()
    runner, _, journal, _, _ = make([GO_OFFICE, DONE], recorder=bag)
    out = runner.run("go to the office")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    (verdict_ev,) = of(journal, EventType.VERDICT_RECORDED)
    fresh_id = verdict_ev.payload["verdict"]["fresh_snapshot_id"]
    ref = bag.ref_of(fresh_id)
    assert ref.topic == "/robot_harness/snapshots"
    assert verdict_ev.payload["fresh_snapshot"] == {"snapshot_id": fresh_id, "bag_ref": ref.model_dump(mode="json")}
    # the mission result and its journal record cite it, by id and by bag ref, next to the verdict and commit
    (finished,) = of(journal, EventType.MISSION_FINISHED)
    for cited in (list(out.evidence_ids), finished.payload["evidence_ids"]):
        assert fresh_id in cited and ref.id in cited
        assert cited.index(ref.id) == cited.index(fresh_id) + 1
        assert verdict_ev.payload["verdict"]["verdict_id"] in cited
        assert of(journal, EventType.COMMIT_RECORDED)[0].payload["commit"]["commit_id"] in cited
    # every bag ref cited is a snapshot the bag holds (the outcome snapshot's too)
    bag_ids = {r.id for topic, _, r in bag.records if topic == "/robot_harness/snapshots"}
    cited_bag = [i for i in out.evidence_ids if i.startswith("bag:")]
    assert len(cited_bag) == 2 and set(cited_bag) <= bag_ids
    assert bag.stopped == ["SUCCEEDED"]


def test_each_skill_call_is_journaled_with_its_skill_view_and_no_planner_words():
    planner_words = "I AM CERTAINLY AT THE OFFICE ALREADY"
    go = {**GO_OFFICE, "text": planner_words}
    say = {"tool_calls": [{"name": "speak", "arguments": {"text": "hi"}}], "text": planner_words}
    bad = {"tool_calls": [{"name": "teleport", "arguments": {}}]}
    runner, _, journal, _, _ = make([bad, go, say, {"done": planner_words}])
    runner.run("go to the office")
    calls = {e.payload["name"]: e.payload for e in of(journal, EventType.TOOL_CALL_RECORDED)}
    assert "skill_view" not in calls["teleport"]  # no skill, no view
    nav = calls["navigate_to"]["skill_view"]
    assert nav["role"] == "skill" and nav["scope"] == "o1"
    kinds = [i["kind"] for i in nav["items"]]
    assert kinds.count("obligation") == 1 and "goal" not in kinds and "proposal" not in kinds
    (obligation,) = [i for i in nav["items"] if i["kind"] == "obligation"]
    assert obligation["id"] == "o1" and obligation["params"]["place"] == "office"
    (target,) = [i for i in nav["items"] if i["kind"] == "target"]
    assert target["place"] == "office" and target["pose"] == PLACES["office"]
    assert {i["key"] for i in nav["items"] if i["kind"] == "observation"} >= {"robot.pose", "robot.controller"}
    assert nav["bytes"] <= 2000 and len(json.dumps(nav["items"])) <= 2000
    # a speech the contract does not ask for: no subgoal, no obligation; earlier planner words nowhere
    speak = calls["speak"]["skill_view"]
    assert speak["scope"] == "" and not [i for i in speak["items"] if i["kind"] == "obligation"]
    for view in (nav, speak):
        assert planner_words not in json.dumps(view)
