"""Every binding of docs/goal_compiler.md decides a verdict, and eligible skills decide which receipts count.

Each binding is tested as a pair on one trace: with the binding the violating
trace is not satisfied, and with only that binding dropped from the obligation
the same trace is. A compiler that stops emitting a binding, or a verifier that
stops reading one, fails here.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from robot_harness.core import verifier as verifier_module
from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.completion import (
    DEFAULT_SKILLS,
    CompletionContract,
    EvidenceKind,
    GoalVerdict,
    Obligation,
    ObligationKind,
    Receipt,
    ReceiptStatus,
    StepVerdict,
    Verdict,
    admissible_skills,
    eligible_skills,
)
from robot_harness.core.context import SKILL_OBLIGATION_KINDS, subgoal_for
from robot_harness.core.records import Availability, FieldMeta, Pose2D, WorldSnapshot
from robot_harness.core.verifier import PoseSample, Verifier, VerifierConfig, VerifyRequest

T0 = 1000.0
MISSION = "m1"
PLACES = {
    "lobby": Pose2D(x=0.0, y=0.0, yaw=0.0),
    "elevator": Pose2D(x=5.0, y=0.0, yaw=1.5),
    "kitchen": Pose2D(x=0.0, y=6.0, yaw=0.0),
    "lab": Pose2D(x=6.0, y=6.0, yaw=0.0),
    "start": Pose2D(x=1.0, y=-3.0, yaw=0.0),
}
SHA_IMG = "a" * 64
AT_LOBBY = Pose2D(x=0.1, y=0.0, yaw=0.0)
AT_ELEVATOR = Pose2D(x=5.0, y=0.1, yaw=1.5)
AT_KITCHEN = Pose2D(x=0.0, y=6.1, yaw=0.0)
AT_LAB = Pose2D(x=6.0, y=6.1, yaw=0.0)
AT_START = Pose2D(x=1.0, y=-3.1, yaw=0.0)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def artifact_check(uri: str, sha256: str) -> None:
    if (uri, sha256) != ("file:///art/img1.png", SHA_IMG):
        raise ValueError("sha256 mismatch")


# --------------------------------------------------------------------------- receipts and snapshots


def receipt(rid: str, skill: str, *, start: float, end: float, args: dict, result: dict | None = None,
            pose: Pose2D | None = None) -> Receipt:
    return Receipt(receipt_id=rid, mission_id=MISSION, contract_revision=1, state_version=1, plan_node_id="turn-1",
                   invocation_id=f"call-{rid}", skill=skill, physical=skill == "navigate_to",
                   request={"arguments": args}, result=result or {}, status=ReceiptStatus.SUCCEEDED,
                   started_at=start, ended_at=end, pose_at_end=pose, pose_stamp=end if pose else None)


def nav(place: str, rid: str = "r-nav", *, start: float = T0 + 1, end: float = T0 + 20,
        pose: Pose2D | None = None, args: dict | None = None) -> Receipt:
    return receipt(rid, "navigate_to", start=start, end=end, args=args or {"place": place},
                   pose=pose if pose is not None else PLACES[place])


def speech_io(text: str, *, at: float, heard: str | None = None) -> dict:
    """What RobotIO.speak returns; ``heard``: the device hashed (and acknowledged) other words."""
    digest = sha(heard if heard is not None else text)
    return {"spoken_at": at, "text_sha256": digest, "ack": {"by": "sim_robot/speaker", "at": at, "sha256": digest}}


def speak(text: str = "hello", rid: str = "r-say", *, start: float = T0 + 21, end: float = T0 + 22,
          pose: Pose2D | None = AT_ELEVATOR, io: dict | None = None) -> Receipt:
    return receipt(rid, "speak", start=start, end=end, args={"text": text}, pose=pose,
                   result={"status": "ok", "content": {"receipt": io if io is not None else speech_io(text, at=end)}})


def message_io(*, to: str, text: str, at: float, ack_sha: str | None = None) -> dict:
    payload = sha(f"msg-1|{to}|{text}")
    return {"message_id": "msg-1", "delivered_at": at, "to": to, "sha256": payload,
            "ack": {"by": "sim_robot/outbox", "at": at, "sha256": ack_sha or payload, "message_id": "msg-1"}}


def message(text: str = "at the elevator", to: str = "operator", rid: str = "r-msg", *, start: float = T0 + 21,
            end: float = T0 + 21.5, io: dict | None = None) -> Receipt:
    return receipt(rid, "send_message", start=start, end=end, args={"to": to, "text": text},
                   result={"receipt": io if io is not None else message_io(to=to, text=text, at=end)})


def capture(pose: Pose2D) -> Receipt:
    return receipt("r-cap", "capture_image", start=T0 + 21, end=T0 + 22, args={"label": "a photo"}, pose=pose,
                   result={"status": "ok", "content": {"artifact": {"uri": "file:///art/img1.png", "sha256": SHA_IMG}}})


def snap(pose: Pose2D | None) -> WorldSnapshot:
    return WorldSnapshot(snapshot_id="snap-fresh", mission_id=MISSION, captured_at=T0 + 30, pose=pose,
                         pose_meta=FieldMeta(availability=Availability.AVAILABLE, source_stamp=T0 + 29.9, age_s=0.1,
                                             max_age_s=0.5))


def samples(*points: tuple[float, float, float]) -> tuple[PoseSample, ...]:
    return tuple(PoseSample(t=t, pose=Pose2D(x=x, y=y), source_id=f"snap-{i}") for i, (t, x, y) in enumerate(points))


def verify(obligations: tuple[Obligation, ...], receipts: list[Receipt], fresh: WorldSnapshot, *,
           trajectory: tuple[PoseSample, ...] = (), places: dict[str, Pose2D] = PLACES) -> Verdict:
    contract = CompletionContract(contract_id="c1", mission_id=MISSION, goal="(test)", compiler="test",
                                  obligations=obligations)
    req = VerifyRequest(mission_id=MISSION, goal="(test)", contract=contract, receipts=tuple(receipts),
                        state_version=10, plan_node_id="turn-9", invocation_id="done-9", places=places,
                        trajectory=trajectory)
    return Verifier(VerifierConfig(), semantic=None, artifact_check=artifact_check, ids=IdGenerator(seed=7),
                    clock=ManualClock(T0 + 31)).verify(req, fresh)


# --------------------------------------------------------------------------- obligations


def ob(oid: str, kind: ObligationKind, **params) -> Obligation:
    return Obligation(id=oid, kind=kind, description=f"{kind.value} {params}", params=params)


def after(o: Obligation, *deps: str) -> Obligation:
    return Obligation.model_validate({**o.model_dump(), "depends_on": deps})


def with_eligible(o: Obligation, *skills: str) -> Obligation:
    return Obligation.model_validate({**o.model_dump(), "eligible": skills})


def drop(o: Obligation, binding: str) -> Obligation:
    """``o`` without one binding (a parameter, or its order); the binding must be there to drop."""
    data = o.model_dump()
    if binding == "depends_on":
        assert data["depends_on"], f"{o.id} has no order to drop"
        data["depends_on"] = ()
    elif binding == "eligible":
        assert data["eligible"], f"{o.id} names no eligible skills to drop"
        data["eligible"] = ()
        data["evidence"] = ()
    else:
        assert binding in data["params"], f"{o.id} does not bind {binding}"
        del data["params"][binding]
    return Obligation.model_validate(data)


REPORT = with_eligible(ob("o2", ObligationKind.MESSAGE_DELIVERED, to="operator"), "send_message", "speak")
"""``report`` / ``tell me`` / ``let me know``: an acknowledged message or an acknowledged speech."""
ROUTE_LAP = ob("o1", ObligationKind.ROUTE_CLOSED, start="lobby", waypoints=[], min_departure_m=1.0)


# --------------------------------------------------------------------------- each binding, as a pair

Trace = Callable[[], list[Receipt]]

PAIRS = [
    pytest.param((ob("o1", ObligationKind.AT_PLACE, place="elevator", final=True),), "o1", "final",
                 lambda: [nav("elevator")], snap(AT_LOBBY), (), StepVerdict.VIOLATED,
                 id="at_place-final-fresh-pose"),
    pytest.param((ob("o1", ObligationKind.IMAGE_CAPTURED, place="kitchen"),), "o1", "place",
                 lambda: [capture(AT_LAB)], snap(AT_LAB), (), StepVerdict.VIOLATED, id="image-place"),
    pytest.param((ob("o1", ObligationKind.SPOKEN, text="the lab is closed"),), "o1", "text",
                 lambda: [speak("the kitchen is closed")], snap(AT_LAB), (), StepVerdict.VIOLATED, id="spoken-text"),
    pytest.param((ob("o1", ObligationKind.SPOKEN, text="hello", place="lobby"),), "o1", "place",
                 lambda: [speak("hello", pose=AT_KITCHEN)], snap(AT_KITCHEN), (), StepVerdict.VIOLATED,
                 id="spoken-place"),
    pytest.param((ob("o1", ObligationKind.MESSAGE_DELIVERED, to="security_team"),), "o1", "to",
                 lambda: [message(to="maria")], snap(AT_LOBBY), (), StepVerdict.VIOLATED, id="message-to"),
    pytest.param((ob("o1", ObligationKind.MESSAGE_DELIVERED, to="operator", text="the lab is closed"),), "o1", "text",
                 lambda: [message("the lab is open")], snap(AT_LOBBY), (), StepVerdict.VIOLATED, id="message-text"),
    pytest.param((with_eligible(ob("o1", ObligationKind.MESSAGE_DELIVERED, to="operator", text="all clear"),
                                "send_message", "speak"),), "o1", "text",
                 lambda: [speak("something else")], snap(AT_LOBBY), (), StepVerdict.VIOLATED, id="spoken-report-text"),
    pytest.param((ob("o1", ObligationKind.AT_PLACE, place="elevator", final=True),
                  after(ob("o2", ObligationKind.SPOKEN, text="hello"), "o1")), "o2", "depends_on",
                 lambda: [speak("hello", start=T0 + 0.2, end=T0 + 0.8, pose=AT_LOBBY), nav("elevator")],
                 snap(AT_ELEVATOR), (), StepVerdict.VIOLATED, id="order-speech-after-arrival"),
    pytest.param((ob("o1", ObligationKind.AT_PLACE, place="elevator", final=True), after(REPORT, "o1")),
                 "o2", "depends_on",
                 lambda: [speak("on my way", start=T0 + 5, end=T0 + 6, pose=Pose2D(x=2.0, y=0.0)), nav("elevator")],
                 snap(AT_ELEVATOR), (), StepVerdict.VIOLATED, id="order-spoken-report-while-driving"),
    pytest.param((ob("o1", ObligationKind.ROUTE_CLOSED, start="lobby", waypoints=["kitchen", "lab"],
                     min_departure_m=2.0),), "o1", "waypoints",
                 lambda: [nav("kitchen", "r-1", start=T0 + 1, end=T0 + 10),
                          nav("lobby", "r-2", start=T0 + 11, end=T0 + 20, pose=AT_LOBBY)],
                 snap(AT_LOBBY), samples((T0, 0.0, 0.0), (T0 + 5, 0.0, 3.0)), StepVerdict.VIOLATED,
                 id="route-waypoints"),
    pytest.param((ob("o1", ObligationKind.ROUTE_CLOSED, start="lobby", waypoints=[], min_departure_m=3.0),), "o1",
                 "min_departure_m",
                 lambda: [nav("", "r-1", start=T0 + 1, end=T0 + 10, args={"x": 2.0, "y": 0.0}, pose=Pose2D(x=2.0, y=0.0)),
                          nav("lobby", "r-2", start=T0 + 11, end=T0 + 20, pose=AT_LOBBY)],
                 snap(AT_LOBBY), samples((T0, 0.0, 0.0), (T0 + 5, 1.0, 0.0)), StepVerdict.VIOLATED,
                 id="route-departure"),
    pytest.param((ob("o1", ObligationKind.ROUTE_CLOSED, start="kitchen", waypoints=[], min_departure_m=2.0),), "o1",
                 "start",
                 lambda: [nav("lab", "r-1", start=T0 + 1, end=T0 + 10),
                          nav("lobby", "r-2", start=T0 + 11, end=T0 + 20, pose=AT_LOBBY)],
                 snap(AT_LOBBY), samples((T0, 0.0, 0.0), (T0 + 5, 3.0, 3.0)), StepVerdict.VIOLATED, id="route-start"),
    pytest.param((ob("o1", ObligationKind.IMAGE_CAPTURED, place="lab"),
                  after(ob("o2", ObligationKind.MESSAGE_DELIVERED, to="operator", attachments=["o1"]), "o1")), "o2",
                 "attachments", lambda: [capture(AT_LAB), message("here it is", start=T0 + 23, end=T0 + 23.5)],
                 snap(AT_LAB), (), StepVerdict.VIOLATED, id="message-attachments"),
]


def test_a_count_of_images_needs_that_many_distinct_images():
    two = (ob("o1", ObligationKind.IMAGE_CAPTURED, place="lab", count=2),)
    first = capture(AT_LAB)
    same = first.model_copy(update={"receipt_id": "r-cap2", "invocation_id": "call-r-cap2"})
    once = verify(two, [first, same], snap(AT_LAB))  # the same image twice is one image
    assert once.step("o1").verdict is StepVerdict.AMBIGUOUS and "1 of the 2" in once.step("o1").reason
    assert verify((drop(two[0], "count"),), [first, same], snap(AT_LAB)).goal_verdict is GoalVerdict.VERIFIED_DONE

    def check(uri: str, sha256: str) -> None:
        if sha256 not in (SHA_IMG, "b" * 64):
            raise ValueError("sha256 mismatch")

    other = same.model_copy(update={"result": {"status": "ok", "content": {"artifact": {
        "uri": "file:///art/img2.png", "sha256": "b" * 64}}}})
    contract = CompletionContract(contract_id="c1", mission_id=MISSION, goal="(test)", compiler="test", obligations=two)
    req = VerifyRequest(mission_id=MISSION, goal="(test)", contract=contract, receipts=(first, other), state_version=10,
                        plan_node_id="turn-9", invocation_id="done-9", places=PLACES)
    v = Verifier(VerifierConfig(), semantic=None, artifact_check=check, ids=IdGenerator(seed=7),
                 clock=ManualClock(T0 + 31)).verify(req, snap(AT_LAB))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps


def test_a_message_that_carries_the_image_satisfies_its_attachment_binding():
    obligations = (ob("o1", ObligationKind.IMAGE_CAPTURED, place="lab"),
                   after(ob("o2", ObligationKind.MESSAGE_DELIVERED, to="operator", attachments=["o1"]), "o1"))
    sent = message("here it is", start=T0 + 23, end=T0 + 23.5)
    sent = sent.model_copy(update={"request": {"arguments": {**sent.request["arguments"], "artifacts": [
        {"uri": "file:///art/img1.png", "sha256": SHA_IMG}]}}})
    v = verify(obligations, [capture(AT_LAB), sent], snap(AT_LAB))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    other = sent.model_copy(update={"request": {"arguments": {**sent.request["arguments"], "artifacts": [
        {"uri": "file:///art/img2.png", "sha256": "b" * 64}]}}})
    assert verify(obligations, [capture(AT_LAB), other], snap(AT_LAB)).step("o2").verdict is StepVerdict.VIOLATED


@pytest.mark.parametrize("obligations, oid, binding, trace, fresh, trajectory, bound_verdict", PAIRS)
def test_the_binding_decides_and_dropping_it_would_let_the_trace_through(
        obligations: tuple[Obligation, ...], oid: str, binding: str, trace: Trace, fresh: WorldSnapshot,
        trajectory: tuple[PoseSample, ...], bound_verdict: StepVerdict):
    bound = verify(obligations, trace(), fresh, trajectory=trajectory)
    assert bound.step(oid).verdict is bound_verdict, bound.step(oid).reason
    assert bound.goal_verdict is GoalVerdict.CONTINUE and oid in bound.missing
    loose = tuple(drop(o, binding) if o.id == oid else o for o in obligations)
    unbound = verify(loose, trace(), fresh, trajectory=trajectory)
    assert unbound.step(oid).verdict is StepVerdict.SATISFIED, unbound.step(oid).reason
    assert unbound.goal_verdict is GoalVerdict.VERIFIED_DONE, unbound.steps


def test_at_place_place_decides_and_an_at_place_without_one_is_never_satisfied():
    """The place cannot be dropped into a pass (an at_place with no place fails closed), so the pair is
    the bound place against the place the trace went to."""
    trace = [nav("kitchen")]
    wrong = verify((ob("o1", ObligationKind.AT_PLACE, place="lab"),), trace, snap(AT_KITCHEN))
    assert wrong.step("o1").verdict is not StepVerdict.SATISFIED and wrong.goal_verdict is GoalVerdict.CONTINUE
    right = verify((ob("o1", ObligationKind.AT_PLACE, place="kitchen"),), trace, snap(AT_KITCHEN))
    assert right.goal_verdict is GoalVerdict.VERIFIED_DONE, right.steps
    placeless = verify((drop(ob("o1", ObligationKind.AT_PLACE, place="kitchen"), "place"),), trace, snap(AT_KITCHEN))
    assert placeless.step("o1").verdict is StepVerdict.AMBIGUOUS


def test_a_navigation_that_ended_elsewhere_does_not_satisfy_the_place():
    v = verify((ob("o1", ObligationKind.AT_PLACE, place="kitchen"),), [nav("kitchen", pose=AT_LAB)], snap(AT_LAB))
    assert v.step("o1").verdict is StepVerdict.VIOLATED


# --------------------------------------------------------------------------- text and recipients, normalised


def test_spoken_text_is_compared_ignoring_whitespace_and_case():
    said = ob("o1", ObligationKind.SPOKEN, text="The lab is closed")
    v = verify((said,), [speak("  the LAB is\tclosed ")], snap(AT_LAB))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    assert "the sentence the contract names" in v.step("o1").reason


def test_spoken_text_needs_an_ack_of_what_was_actually_sent():
    said = ob("o1", ObligationKind.SPOKEN, text="hello")
    # the arguments say "hello", but the device hashed and acknowledged other words
    v = verify((said,), [speak("hello", io=speech_io("hello", at=T0 + 22, heard="hullo"))], snap(AT_LAB))
    assert v.step("o1").verdict is StepVerdict.VIOLATED
    assert "not the one sent" in v.step("o1").reason
    unacked = speak("hello", io={"spoken_at": T0 + 22, "text_sha256": sha("hello")})
    assert verify((said,), [unacked], snap(AT_LAB)).step("o1").verdict is StepVerdict.AMBIGUOUS


def test_wrong_words_are_violated_even_without_an_ack():
    said = ob("o1", ObligationKind.SPOKEN, text="hello")
    v = verify((said,), [speak("goodbye", io={"spoken_at": T0 + 22, "text_sha256": sha("goodbye")})], snap(AT_LAB))
    assert v.step("o1").verdict is StepVerdict.VIOLATED
    assert "goodbye" not in v.model_dump_json()


def test_a_speech_with_no_pose_recorded_is_ambiguous_for_a_place():
    there = ob("o1", ObligationKind.SPOKEN, text="hello", place="lobby")
    v = verify((there,), [speak("hello", pose=None)], snap(AT_LOBBY))
    assert v.step("o1").verdict is StepVerdict.AMBIGUOUS and "no pose" in v.step("o1").reason
    here = verify((there,), [speak("hello", pose=Pose2D(x=0.2, y=0.1, yaw=3.0))], snap(AT_LOBBY))
    assert here.goal_verdict is GoalVerdict.VERIFIED_DONE, "no heading check for speech"


@pytest.mark.parametrize("sent_to", ["Security Team", "security_team", " security   team ", "SECURITY_TEAM"])
def test_recipients_match_ignoring_case_whitespace_and_underscores(sent_to: str):
    tell = ob("o1", ObligationKind.MESSAGE_DELIVERED, to="security_team")
    v = verify((tell,), [message(to=sent_to)], snap(AT_LOBBY))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps


def test_message_text_is_compared_normalised_and_the_ack_must_still_match_the_payload():
    tell = ob("o1", ObligationKind.MESSAGE_DELIVERED, to="operator", text="the lab is closed")
    ok = verify((tell,), [message("The lab  is CLOSED")], snap(AT_LOBBY))
    assert ok.goal_verdict is GoalVerdict.VERIFIED_DONE, ok.steps
    other = message("the lab is closed", io=message_io(to="operator", text="the lab is closed", at=T0 + 21.5,
                                                       ack_sha="c" * 64))
    v = verify((tell,), [other], snap(AT_LOBBY))
    assert v.step("o1").verdict is StepVerdict.VIOLATED and "confirms payload sha256" in v.step("o1").reason


# --------------------------------------------------------------------------- eligible skills


def test_a_spoken_report_satisfies_a_report_only_because_speech_is_eligible():
    said = [speak("all done")]
    v = verify((REPORT,), said, snap(AT_LOBBY))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    assert "spoke the report" in v.step("o2").reason and "r-say" in v.step("o2").evidence_ids
    narrowed = verify((drop(REPORT, "eligible"),), said, snap(AT_LOBBY))
    assert narrowed.step("o2").verdict is StepVerdict.AMBIGUOUS
    assert "send_message" in narrowed.step("o2").reason


@pytest.mark.parametrize("eligible", [(), ("send_message",)], ids=["default", "explicit"])
def test_a_speech_never_satisfies_a_message_only_obligation(eligible: tuple[str, ...]):
    tell = with_eligible(ob("o2", ObligationKind.MESSAGE_DELIVERED, to="operator"), *eligible)
    assert eligible_skills(tell) == ("send_message",)
    v = verify((tell,), [speak("all done")], snap(AT_LOBBY))
    assert v.step("o2").verdict is StepVerdict.AMBIGUOUS and v.goal_verdict is GoalVerdict.CONTINUE
    assert "r-say" not in v.evidence_ids
    with_speech = verify((with_eligible(tell, "send_message", "speak"),), [speak("all done")], snap(AT_LOBBY))
    assert with_speech.goal_verdict is GoalVerdict.VERIFIED_DONE


def test_a_report_is_satisfied_by_a_message_too_and_a_badly_acked_speech_is_not():
    assert verify((REPORT,), [message()], snap(AT_LOBBY)).goal_verdict is GoalVerdict.VERIFIED_DONE
    lying = speak("all done", io=speech_io("all done", at=T0 + 22) | {"text_sha256": sha("nothing")})
    assert verify((REPORT,), [lying], snap(AT_LOBBY)).step("o2").verdict is StepVerdict.VIOLATED


def test_a_record_that_bypassed_validation_gets_no_ineligible_skill():
    smuggled = ob("o2", ObligationKind.MESSAGE_DELIVERED, to="operator").model_copy(
        update={"eligible": ("speak", "navigate_to")})
    assert eligible_skills(smuggled) == ("speak",)
    nothing = ob("o1", ObligationKind.AT_PLACE, place="kitchen").model_copy(update={"eligible": ("speak",)})
    assert eligible_skills(nothing) == ()
    v = verify((nothing,), [nav("kitchen"), speak(pose=AT_KITCHEN)], snap(AT_KITCHEN))
    assert v.step("o1").verdict is StepVerdict.AMBIGUOUS and v.goal_verdict is GoalVerdict.CONTINUE


@pytest.mark.parametrize("kind, skill", [
    (ObligationKind.AT_PLACE, "speak"),
    (ObligationKind.SPOKEN, "send_message"),
    (ObligationKind.IMAGE_CAPTURED, "navigate_to"),
    (ObligationKind.ROUTE_CLOSED, "capture_image"),
    (ObligationKind.MESSAGE_DELIVERED, "navigate_to"),
    (ObligationKind.SEMANTIC, "capture_image"),
    (ObligationKind.MESSAGE_DELIVERED, "shout"),
])
def test_an_ineligible_skill_is_refused_by_name(kind: ObligationKind, skill: str):
    with pytest.raises(ValidationError, match=repr(skill)):
        Obligation(id="o1", kind=kind, description="x", eligible=(skill,))


def test_eligible_skills_defaults_and_the_evidence_a_spoken_report_accepts():
    assert set(DEFAULT_SKILLS) == set(ObligationKind)
    for kind in ObligationKind:
        assert eligible_skills(Obligation(id="o1", kind=kind, description="x")) == DEFAULT_SKILLS[kind]
    assert DEFAULT_SKILLS[ObligationKind.SEMANTIC] == ()
    assert admissible_skills(ObligationKind.MESSAGE_DELIVERED) == ("send_message", "speak")
    assert EvidenceKind.SPEECH_RECEIPT in REPORT.evidence and EvidenceKind.DELIVERY_RECEIPT in REPORT.evidence
    given = Obligation(id="o1", kind=ObligationKind.MESSAGE_DELIVERED, description="x",
                       eligible=("send_message", "speak"), evidence=(EvidenceKind.DELIVERY_RECEIPT,))
    assert given.evidence == (EvidenceKind.DELIVERY_RECEIPT, EvidenceKind.SPEECH_RECEIPT)
    with pytest.raises(ValidationError, match="duplicate"):
        Obligation(id="o1", kind=ObligationKind.MESSAGE_DELIVERED, description="x", eligible=("speak", "speak"))


def test_an_obligation_journaled_before_eligible_existed_still_reads():
    old = '{"id":"o2","kind":"message_delivered","description":"tell","params":{"to":"operator"},' \
          '"evidence":["delivery_receipt"],"max_age_s":null,"depends_on":[],"source":""}'
    o = Obligation.model_validate_json(old)
    assert o.eligible == () and o.evidence == (EvidenceKind.DELIVERY_RECEIPT,)
    assert eligible_skills(o) == ("send_message",)
    assert Obligation.model_validate_json(REPORT.model_dump_json()) == REPORT


def test_the_skill_names_live_in_completion_and_the_verifier_re_exports_them():
    from robot_harness.core import completion

    for name in ("NAVIGATE_SKILL", "CAPTURE_SKILL", "MESSAGE_SKILL", "SPEAK_SKILL"):
        assert getattr(verifier_module, name) == getattr(completion, name) and name in verifier_module.__all__


def test_a_skill_serves_an_obligation_iff_it_is_eligible_for_it():
    c = CompletionContract(contract_id="c1", mission_id=MISSION, goal="(test)", compiler="test", obligations=(
        ob("o1", ObligationKind.MESSAGE_DELIVERED, to="maria"), REPORT))
    assert subgoal_for(c, "speak").id == "o2"
    assert subgoal_for(c, "send_message").id == "o1"
    assert subgoal_for(c, "send_message", done={"o1"}).id == "o2"
    only_message = CompletionContract(contract_id="c1", mission_id=MISSION, goal="(test)", compiler="test",
                                      obligations=(ob("o1", ObligationKind.MESSAGE_DELIVERED, to="maria"),))
    assert subgoal_for(only_message, "speak") is None
    for skill, kinds in SKILL_OBLIGATION_KINDS.items():
        assert set(kinds) == {k for k in ObligationKind if skill in admissible_skills(k)}


# --------------------------------------------------------------------------- closed routes and `start`


def test_a_lap_with_no_waypoints_needs_a_departure_and_a_return():
    stayed = [nav("lobby", "r-1", start=T0 + 1, end=T0 + 2, pose=AT_LOBBY)]
    v = verify((ROUTE_LAP,), stayed, snap(AT_LOBBY), trajectory=samples((T0, 0.0, 0.0), (T0 + 1.5, 0.3, 0.1)))
    assert v.step("o1").verdict is StepVerdict.VIOLATED and "never departed" in v.step("o1").reason
    lap = [nav("kitchen", "r-1", start=T0 + 1, end=T0 + 10), nav("lobby", "r-2", start=T0 + 11, end=T0 + 20, pose=AT_LOBBY)]
    done = verify((ROUTE_LAP,), lap, snap(AT_LOBBY), trajectory=samples((T0, 0.0, 0.0)))
    assert done.goal_verdict is GoalVerdict.VERIFIED_DONE, done.steps
    not_back = verify((ROUTE_LAP,), lap[:1], snap(AT_KITCHEN), trajectory=samples((T0, 0.0, 0.0)))
    assert not_back.step("o1").verdict is StepVerdict.VIOLATED and "not back" in not_back.step("o1").reason


@pytest.mark.parametrize("obligation, trace, fresh", [
    pytest.param(ob("o1", ObligationKind.AT_PLACE, place="start", final=True), lambda: [nav("start")], AT_START,
                 id="at_place"),
    pytest.param(ob("o1", ObligationKind.ROUTE_CLOSED, start="start", waypoints=["elevator"], min_departure_m=1.0),
                 lambda: [nav("elevator", "r-1", start=T0 + 1, end=T0 + 10),
                          nav("start", "r-2", start=T0 + 11, end=T0 + 20)], AT_START, id="route"),
])
def test_start_is_an_ordinary_place(obligation: Obligation, trace: Trace, fresh: Pose2D):
    v = verify((obligation,), trace(), snap(fresh), trajectory=samples((T0, 1.0, -3.0)))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    unknown = verify((obligation,), trace(), snap(fresh), trajectory=samples((T0, 1.0, -3.0)),
                     places={k: p for k, p in PLACES.items() if k != "start"})
    assert unknown.step("o1").verdict is StepVerdict.AMBIGUOUS and "'start'" in unknown.step("o1").reason


# --------------------------------------------------------------------------- the founding incident


def test_the_incident_goal_travel_to_the_elevator_and_report():
    """"Travel to the elevator, and report.": the good twin arrives and then speaks its report; the
    incident spoke (a lookup is not a navigation) without ever moving."""
    obligations = (ob("o1", ObligationKind.AT_PLACE, place="elevator", final=True), after(REPORT, "o1"))
    good = verify(obligations, [nav("elevator"), speak("I am at the elevator")], snap(AT_ELEVATOR))
    assert good.goal_verdict is GoalVerdict.VERIFIED_DONE, good.steps
    assert {"r-nav", "r-say", "snap-fresh"} <= set(good.evidence_ids)
    lookup = receipt("r-lookup", "lookup_place", start=T0 + 1, end=T0 + 1.1, args={"place": "elevator"},
                     result={"place": "elevator", "x": 5.0, "y": 0.0})
    incident = verify(obligations, [lookup, speak("I am at the elevator", start=T0 + 2, end=T0 + 3, pose=AT_LOBBY)],
                      snap(AT_LOBBY))
    assert incident.goal_verdict is GoalVerdict.CONTINUE
    assert incident.step("o1").verdict is StepVerdict.AMBIGUOUS and "navigate_to" in incident.step("o1").reason
    assert incident.step("o2").verdict is not StepVerdict.SATISFIED and set(incident.missing) == {"o1", "o2"}


# --------------------------------------------------------------------------- the compiled contract carries each binding


def compiled(goal: str) -> tuple[Obligation, ...]:
    from robot_harness.core.goals import GoalCompiler

    return GoalCompiler().compile(goal, mission_id=MISSION, contract_id="c1", places=PLACES).obligations


COMPILED_PAIRS = [
    pytest.param("Go to the lobby and say 'hello' there.", "o2", "text",
                 lambda: [nav("lobby", pose=AT_LOBBY), speak("goodbye", pose=AT_LOBBY)], snap(AT_LOBBY),
                 id="speech-text"),
    pytest.param("Go to the lobby and say 'hello' there.", "o2", "place",
                 lambda: [nav("lobby", pose=AT_LOBBY), speak("hello", pose=AT_KITCHEN)], snap(AT_LOBBY),
                 id="speech-place"),
    pytest.param("Go to the lobby and say 'hello' there.", "o2", "depends_on",
                 lambda: [speak("hello", start=T0 + 0.2, end=T0 + 0.5, pose=AT_LOBBY), nav("lobby", pose=AT_LOBBY)],
                 snap(AT_LOBBY), id="speech-order"),
    pytest.param("Tell the security team 'all clear'.", "o1", "to", lambda: [message("all clear", to="maria")],
                 snap(AT_LOBBY), id="message-to"),
    pytest.param("Tell the security team 'all clear'.", "o1", "text",
                 lambda: [message("nothing to report", to="security team")], snap(AT_LOBBY), id="message-text"),
    pytest.param("Go to the kitchen and take a picture there.", "o2", "place",
                 lambda: [nav("kitchen", pose=AT_KITCHEN), capture(AT_LAB)], snap(AT_KITCHEN), id="image-place"),
    pytest.param("Go to the elevator.", "o1", "final", lambda: [nav("elevator")], snap(AT_LOBBY), id="final"),
]


@pytest.mark.parametrize("goal, oid, binding, trace, fresh", COMPILED_PAIRS)
def test_each_binding_the_compiler_emits_decides_the_verdict(goal: str, oid: str, binding: str, trace: Trace,
                                                             fresh: WorldSnapshot):
    """The goal compiler's own contract: with the binding the bad trace fails; drop it and the trace passes."""
    obligations = compiled(goal)
    bound = verify(obligations, trace(), fresh)
    assert bound.goal_verdict is not GoalVerdict.VERIFIED_DONE and oid in bound.missing, bound.steps
    loose = tuple(drop(o, binding) if o.id == oid else o for o in obligations)
    if binding == "final":  # the compiler bounds only the final place's freshness: a non-final one is history
        loose = tuple(o.model_copy(update={"max_age_s": None}) if o.id == oid else o for o in loose)
    unbound = verify(loose, trace(), fresh)
    assert unbound.goal_verdict is GoalVerdict.VERIFIED_DONE, unbound.steps


def test_a_route_the_robot_moves_on_from_is_judged_back_at_its_start_on_the_recorded_poses():
    route = ob("o1", ObligationKind.ROUTE_CLOSED, start="lobby", waypoints=["kitchen"], min_departure_m=1.0,
               final=False)
    then = after(ob("o2", ObligationKind.AT_PLACE, place="lab", final=True), "o1")
    trace = [nav("kitchen", "r-1", start=T0 + 1, end=T0 + 10), nav("lobby", "r-2", start=T0 + 11, end=T0 + 15,
                                                                  pose=AT_LOBBY),
             nav("lab", "r-3", start=T0 + 16, end=T0 + 25, pose=AT_LAB)]
    came_back = samples((T0, 0.0, 0.0), (T0 + 5, 0.0, 3.0), (T0 + 10, 0.0, 6.0), (T0 + 15, 0.1, 0.0),
                        (T0 + 25, 6.0, 6.1))
    v = verify((route, then), trace, snap(AT_LAB), trajectory=came_back)
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    never = samples((T0, 0.0, 0.0), (T0 + 5, 0.0, 3.0), (T0 + 10, 0.0, 6.0), (T0 + 25, 6.0, 6.1))
    direct = [trace[0], trace[2]]
    v = verify((route, then), direct, snap(AT_LAB), trajectory=never)
    assert v.step("o1").verdict is StepVerdict.VIOLATED and "never came back" in v.step("o1").reason
