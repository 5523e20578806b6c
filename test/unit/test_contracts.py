"""Contract compilers and the coverage review: goals in, frozen contracts out."""
from __future__ import annotations

import json

import pytest

from robot_harness.core.completion import CompletionContract, EvidenceKind, Obligation, ObligationKind
from robot_harness.core.contracts import (
    ContractError,
    FakeContractLLM,
    LLMContractCompiler,
    LLMCoverageReviewer,
    RuleCoverageReviewer,
    ScenarioContractCompiler,
    compile_contract,
    review_coverage,
    revise,
)
from robot_harness.core.errors import ScenarioError, UsageError
from robot_harness.core.goals import GoalCompiler
from robot_harness.core.records import Pose2D
from robot_harness.core.skills import default_skills

DEMO_GOAL = "Go to office_storage, capture an image there, return to dock and report."
INCIDENT_GOAL = "Identify a drink bottle, travel to the elevator, and report."


def places(*names: str) -> dict[str, Pose2D]:
    return {n: Pose2D(x=float(i), y=0.0) for i, n in enumerate(names)}


DEMO_PLACES = places("dock", "office_storage")


def compile_(compiler, goal, where=DEMO_PLACES, **kw):
    return compiler.compile(goal, mission_id="m-1", contract_id="c-1", places=where, **kw)


def at(oid, place, final, deps=(), source=""):
    return {"id": oid, "kind": "at_place", "description": f"at {place}", "params": {"place": place, "final": final},
            "evidence": ["navigation_receipt", "pose_observation"], "depends_on": list(deps), "source": source}


# The goal compiler's own tests are in test_goal_compiler.py.


# --------------------------------------------------------------------------- coverage review


def test_review_catches_an_omitted_obligation():
    goal = "Pick up the bottle and go to the kitchen"
    hand_made = CompletionContract(contract_id="c", mission_id="m", goal=goal, compiler="hand",
                                   obligations=[at("o1", "kitchen", True, source="go to the kitchen")])
    report = review_coverage(hand_made, reviewer=RuleCoverageReviewer())
    assert not report.ok and report.uncovered == ("Pick up the bottle",)


def test_review_does_not_trust_a_kind_match_for_another_place():
    goal = "Go to the kitchen, go to the lab and report."
    obligations = [at("o1", "kitchen", False), at("o2", "lab", True),
                   {"id": "o3", "kind": "message_delivered", "description": "report", "evidence": ["delivery_receipt"]}]
    full = CompletionContract(contract_id="c", mission_id="m", goal=goal, compiler="llm", obligations=obligations)
    assert review_coverage(full, reviewer=RuleCoverageReviewer()).ok  # no sources: matched by kind + place
    missing = CompletionContract(contract_id="c", mission_id="m", goal=goal, compiler="llm",
                                 obligations=[obligations[0], obligations[2]])
    assert review_coverage(missing, reviewer=RuleCoverageReviewer()).uncovered == ("go to the lab",)


def test_review_ignores_quoted_speech_and_noun_uses():
    goal = "Say 'go home and open the door', then send a report to the operator"
    obligations = [{"id": "o1", "kind": "spoken", "description": "say", "evidence": ["speech_receipt"]},
                   {"id": "o2", "kind": "message_delivered", "description": "msg", "params": {"to": "operator"},
                    "evidence": ["delivery_receipt"]}]
    c = CompletionContract(contract_id="c", mission_id="m", goal=goal, compiler="hand", obligations=obligations)
    report = RuleCoverageReviewer().review(goal, c.obligations)
    assert report.ok, report
    wrong_recipient = [obligations[0], {**obligations[1], "params": {"to": "bob"}}]
    c2 = CompletionContract(contract_id="c", mission_id="m", goal=goal, compiler="hand", obligations=wrong_recipient)
    assert review_coverage(c2, reviewer=RuleCoverageReviewer()).uncovered == ("send a report to the operator",)


def test_llm_reviewer_with_fake_model():
    contract = compile_(GoalCompiler(), DEMO_GOAL)
    fake = FakeContractLLM(['{"ok": false, "uncovered": ["capture an image there"], "notes": "x"}', "nope",
                            '{"ok": true, "uncovered": ["report"]}'])
    reviewer = LLMCoverageReviewer(fake)
    report = review_coverage(contract, reviewer=reviewer)
    assert report.reviewer == "llm-coverage" and report.uncovered == ("capture an image there",)
    sent = fake.calls[0][1]["content"]
    assert DEMO_GOAL in sent and '"source"' not in sent  # the compiler's clause mapping is withheld
    for _ in range(2):  # malformed, then self-contradictory
        with pytest.raises(ContractError):
            review_coverage(contract, reviewer=reviewer)


# --------------------------------------------------------------------------- scenario compiler


def test_scenario_compiler_takes_the_contract_verbatim():
    obligations = [at("o1", "office_storage", False),
                   {"id": "o2", "kind": "image_captured", "description": "image", "params": {"place": "office_storage"},
                    "evidence": ["image_artifact"], "depends_on": ["o1"]}]
    c = ScenarioContractCompiler(obligations).compile(DEMO_GOAL, mission_id="m", contract_id="c", places=DEMO_PLACES)
    assert c.compiler == "scenario" and [o.id for o in c.obligations] == ["o1", "o2"]
    assert c.obligation("o2").depends_on == ("o1",)
    with pytest.raises(ContractError):  # valid shape, but a place this mission does not know
        ScenarioContractCompiler([at("o1", "lab", True)]).compile("x", mission_id="m", contract_id="c",
                                                                   places=DEMO_PLACES)


@pytest.mark.parametrize("obligations", [
    [{**at("o1", "dock", True), "kind": "teleported"}],  # unknown kind
    [at("o1", "dock", False, deps=["o2"]), at("o2", "office_storage", True, deps=["o1"])],  # cycle
    [at("o1", "dock", True, deps=["o9"])],  # unknown dependency
    [at("o1", "dock", True), at("o1", "office_storage", False)],  # duplicate id
    [at("o1", "dock", True), at("o2", "office_storage", True)],  # two finals
    [{**at("o1", "dock", True), "evidence": []}],  # nothing could prove it
    [],
])
def test_scenario_compiler_rejects_bad_obligations(obligations):
    with pytest.raises(ScenarioError):
        ScenarioContractCompiler(obligations)


# --------------------------------------------------------------------------- LLM compiler


def llm_reply(*obligations) -> str:
    return json.dumps({"obligations": list(obligations)})


def test_llm_compiler_parses_a_good_reply_in_a_clean_context():
    fake = FakeContractLLM(["```json\n" + llm_reply(at("o1", "office_storage", False, source="Go to office_storage"),
                                                    at("o2", "dock", True, deps=["o1"], source="return to dock"))
                            + "\n```"])
    c = LLMContractCompiler(fake).compile(DEMO_GOAL, mission_id="m", contract_id="c", places=DEMO_PLACES)
    assert c.compiler == "llm" and [o.params["place"] for o in c.obligations] == ["office_storage", "dock"]
    (messages,) = fake.calls
    assert [m["role"] for m in messages] == ["system", "user"]
    assert all(set(m) == {"role", "content"} for m in messages)  # no tools, no tool calls
    assert json.loads(messages[1]["content"]) == {"goal": DEMO_GOAL, "known_places": ["dock", "office_storage"]}
    system = messages[0]["content"]
    for kind in [*ObligationKind, *EvidenceKind]:
        assert kind.value in system
    assert '"depends_on"' in system and '"obligations"' in system  # the schema is in the prompt
    # no planner context: no tool is named, except the two a report may be satisfied by, which are part
    # of the contract's own vocabulary (Obligation.eligible)
    for skill in set(default_skills().names()) - {"send_message", "speak"}:
        assert skill not in system
    assert "tool_call" not in json.dumps(messages)


@pytest.mark.parametrize("reply", [
    "Sure! Here is the contract: o1 at_place",  # not JSON
    '{"obligations": [{"id": "o1", "kind": "at_place"}',  # truncated
    llm_reply({**at("o1", "dock", True), "kind": "AT_PLACE"}),  # schema violation
    llm_reply(at("o1", "office_storage", False), at("o2", "dock", True, deps=["o3"])),  # unknown dependency
    llm_reply(at("o1", "garage", True)),  # unknown place
    '{"obligations": []}',
])
def test_llm_compiler_refuses_anything_malformed(reply):
    with pytest.raises(ContractError):
        LLMContractCompiler(FakeContractLLM([reply])).compile(DEMO_GOAL, mission_id="m", contract_id="c",
                                                             places=DEMO_PLACES)


def test_fake_llm_runs_out_loudly():
    fake = FakeContractLLM([])
    with pytest.raises(UsageError):
        fake([{"role": "user", "content": "x"}])
    assert len(fake.calls) == 1


# --------------------------------------------------------------------------- admission helpers


def test_compile_contract_rejects_a_compiler_that_answers_another_question():
    class Liar:
        name = "liar"

        def compile(self, goal, *, mission_id, contract_id, places):
            return CompletionContract(contract_id=contract_id, mission_id=mission_id, goal="something else",
                                      compiler=self.name, obligations=[at("o1", "dock", True)])

    with pytest.raises(ContractError):
        compile_contract(DEMO_GOAL, compiler=Liar(), reviewer=RuleCoverageReviewer(), mission_id="m",
                         contract_id="c", places=DEMO_PLACES)


def test_revise_makes_a_new_record():
    c1 = compile_contract(DEMO_GOAL, compiler=GoalCompiler(), reviewer=RuleCoverageReviewer(),
                          mission_id="m", contract_id="c-1", places=DEMO_PLACES)
    kept = [o for o in c1.obligations if o.kind is not ObligationKind.MESSAGE_DELIVERED]
    c2 = revise(c1, obligations=kept, contract_id="c-2")
    assert (c2.revision, c2.supersedes, c2.coverage, c2.goal) == (2, "c-1", None, c1.goal)
    assert len(c1.obligations) == 4 and c1.revision == 1  # the old record is untouched
    assert revise(c2, obligations=kept, contract_id="c-3").revision == 3
    with pytest.raises(UsageError):
        revise(c1, obligations=kept, contract_id="c-1")
    with pytest.raises(ContractError):
        revise(c1, obligations=[Obligation(id="o1", kind=ObligationKind.SPOKEN, description="x",
                                           evidence=(EvidenceKind.SPEECH_RECEIPT,), depends_on=("o1",))],
               contract_id="c-4")


def test_coverage_review_reads_place_names_with_digits() -> None:
    # regression: the reviewer's word pattern once dropped digits, so "p0" never matched place "p0"
    from robot_harness.core.contracts import RuleCoverageReviewer, ScenarioContractCompiler, compile_contract

    places = {"p0": Pose2D(x=0.0, y=0.0), "room_101": Pose2D(x=5.0, y=0.0)}
    obligations = [{"id": "o1", "kind": "at_place", "description": "The robot reached room_101.",
                    "params": {"place": "room_101", "final": True}, "evidence": ["navigation_receipt"]}]
    ok = compile_contract("Go to room_101.", compiler=ScenarioContractCompiler(obligations),
                          reviewer=RuleCoverageReviewer(), mission_id="m", contract_id="c", places=places)
    assert ok.coverage is not None and ok.coverage.ok
    missed = compile_contract("Go to room_101 and go to p0.", compiler=ScenarioContractCompiler(obligations),
                              reviewer=RuleCoverageReviewer(), mission_id="m", contract_id="c", places=places)
    assert missed.coverage is not None and missed.coverage.uncovered == ("go to p0",)
