"""The verifier, case by case, on hand-built receipts and snapshots."""
from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.completion import (
    CompletionContract,
    EvidenceKind,
    GoalVerdict,
    Obligation,
    ObligationKind,
    Receipt,
    ReceiptStatus,
    StepVerdict,
)
from robot_harness.core.errors import UsageError
from robot_harness.core.records import Availability, FieldMeta, Pose2D, WorldSnapshot
from robot_harness.core.verifier import (
    PoseSample,
    Verifier,
    VerifierConfig,
    VerifyRequest,
)
from robot_harness.evidence.bag import EvidenceMismatch, EvidenceNotFound, verify_artifact

T0 = 1000.0
MISSION = "m1"
GOAL = "Go to the elevator and message the operator when you are there"
PLACES = {
    "lobby": Pose2D(x=0.0, y=0.0, yaw=0.0),
    "elevator": Pose2D(x=5.0, y=0.0, yaw=1.5),
    "kitchen": Pose2D(x=0.0, y=6.0, yaw=0.0),
    "lab": Pose2D(x=6.0, y=6.0, yaw=0.0),
}
SHA_GOOD = "a" * 64
SHA_OTHER = "b" * 64
ARTIFACTS = {"file:///art/img1.png": SHA_GOOD}


def artifact_check(uri: str, sha256: str) -> None:
    if uri not in ARTIFACTS:
        raise FileNotFoundError(uri)
    if ARTIFACTS[uri] != sha256:
        raise ValueError("sha256 mismatch")


def contract(*obligations: Obligation, revision: int = 1, cid: str = "c1") -> CompletionContract:
    return CompletionContract(contract_id=cid, mission_id=MISSION, revision=revision, goal=GOAL,
                              compiler="test", obligations=obligations, supersedes="c0" if revision > 1 else "")


AT_ELEVATOR = Obligation(id="o1", kind=ObligationKind.AT_PLACE, description="be at the elevator",
                         params={"place": "elevator", "final": True}, evidence=(EvidenceKind.NAVIGATION_RECEIPT,))
MESSAGE = Obligation(id="o2", kind=ObligationKind.MESSAGE_DELIVERED, description="tell the operator",
                     params={"to": "operator"}, depends_on=("o1",))
INCIDENT = contract(AT_ELEVATOR, MESSAGE)


def receipt(rid: str, skill: str, *, start: float, end: float, status: ReceiptStatus = ReceiptStatus.SUCCEEDED,
            args: dict | None = None, result: dict | None = None, pose: Pose2D | None = None, revision: int = 1,
            state_version: int = 1, mission: str = MISSION, target: dict | None = None) -> Receipt:
    request: dict = {"arguments": args or {}}
    if target is not None:
        request["target"] = target
    return Receipt(receipt_id=rid, mission_id=mission, contract_revision=revision, state_version=state_version,
                   plan_node_id="turn-1", invocation_id=f"call-{rid}", skill=skill, physical=skill == "navigate_to",
                   request=request, result=result or {}, status=status, started_at=start, ended_at=end,
                   pose_at_end=pose, pose_stamp=end if pose else None)


def nav(rid: str = "r-nav", *, start: float = T0 + 1, end: float = T0 + 20, pose: Pose2D | None = None,
        **kw) -> Receipt:
    args = kw.pop("args", {"place": "elevator"})
    return receipt(rid, "navigate_to", start=start, end=end, args=args,
                   pose=pose if pose is not None else Pose2D(x=5.1, y=0.05, yaw=1.45), **kw)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def message_io(*, to: str = "operator", text: str = "at the elevator", at: float = T0 + 21.5, acked: bool = True,
               message_id: str = "msg-1", ack: dict | None = None) -> dict:
    """What RobotIO.send_message returns (see the delivery acknowledgement contract)."""
    payload = sha(f"{message_id}|{to}|{text}")
    io = {"message_id": message_id, "delivered_at": at, "to": to, "sha256": payload}
    if acked:
        io["ack"] = {"by": "sim_robot/outbox", "at": at, "sha256": payload, "message_id": message_id, **(ack or {})}
    else:
        io["ack_error"] = "no acknowledgement within 2.0 s"
    return io


def message(rid: str = "r-msg", *, start: float = T0 + 21, end: float = T0 + 21.5, to: str = "operator",
            text: str = "at the elevator", io: dict | None = None, **kw) -> Receipt:
    return receipt(rid, "send_message", start=start, end=end, args={"to": to, "text": text},
                   result={"receipt": io if io is not None else message_io(to=to, text=text, at=end)}, **kw)


def speech_io(text: str, *, at: float = T0 + 2, acked: bool = True, **ack_update) -> dict:
    io = {"spoken_at": at, "text_sha256": sha(text)}
    if acked:
        io["ack"] = {"by": "sim_robot/speaker", "at": at, "sha256": sha(text), **ack_update}
    return io


def speak(text: str = "hello", rid: str = "r-say", *, start: float = T0 + 1, end: float = T0 + 2,
          io: dict | None = None, **kw) -> Receipt:
    return receipt(rid, "speak", start=start, end=end, args={"text": text},
                   result={"status": "ok", "content": {"receipt": io if io is not None else speech_io(text, at=end)}}, **kw)


NEAR_ELEVATOR = Pose2D(x=5.0, y=0.1, yaw=1.5)
IN_KITCHEN = Pose2D(x=0.1, y=6.0)


def snap(pose: Pose2D | None = NEAR_ELEVATOR, *, at: float = T0 + 30, age: float = 0.1,
         availability: Availability = Availability.AVAILABLE, jump_at: float | None = None,
         sid: str = "snap-fresh") -> WorldSnapshot:
    return WorldSnapshot(
        snapshot_id=sid, mission_id=MISSION, captured_at=at, pose=pose,
        pose_meta=FieldMeta(availability=availability, source_stamp=at - age, age_s=age, max_age_s=0.5),
        pose_jumps=1 if jump_at is not None else 0, last_pose_jump_at=jump_at,
    )


def request(c: CompletionContract, *receipts: Receipt, state_version: int = 10,
            trajectory: tuple[PoseSample, ...] = ()) -> VerifyRequest:
    return VerifyRequest(mission_id=MISSION, goal=GOAL, contract=c, receipts=receipts, state_version=state_version,
                         plan_node_id="turn-9", invocation_id="done-9", places=PLACES, trajectory=trajectory)


def verifier(semantic=None, **cfg) -> Verifier:
    return Verifier(VerifierConfig(**cfg), semantic=semantic, artifact_check=artifact_check,
                    ids=IdGenerator(seed=7), clock=ManualClock(T0 + 31))


# --------------------------------------------------------------------------- the incident and the good trace


def test_incident_lookup_only_is_not_done():
    lookup = receipt("r-lookup", "lookup_place", start=T0 + 1, end=T0 + 1.1, args={"place": "elevator"},
                     result={"place": "elevator", "x": 5.0, "y": 0.0})
    v = verifier().verify(request(INCIDENT, lookup, message(start=T0 + 2, end=T0 + 2.5)),
                          snap(Pose2D(x=0.0, y=0.0)))
    assert v.goal_verdict is GoalVerdict.CONTINUE
    assert "o1" in v.missing
    assert v.step("o1").verdict is StepVerdict.AMBIGUOUS
    assert "navigate_to" in v.step("o1").reason
    assert v.step("o2").verdict is StepVerdict.AMBIGUOUS
    assert "dependency o1 not satisfied" in v.step("o2").reason


def test_good_trace_is_verified_done_and_bound_to_what_it_judged():
    v = verifier().verify(request(INCIDENT, nav(), message()), snap())
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    assert v.missing == ()
    assert (v.mission_id, v.contract_id, v.contract_revision, v.state_version, v.plan_node_id, v.invocation_id) == (
        MISSION, "c1", 1, 10, "turn-9", "done-9")
    assert v.fresh_snapshot_id == "snap-fresh"
    assert {"r-nav", "r-msg", "snap-fresh"} <= set(v.evidence_ids)
    assert v.step("o1").evidence_ids == ("r-nav", "snap-fresh")
    assert v.verifier == "verifier" and v.created_at == T0 + 31


@pytest.mark.parametrize("navs", [
    pytest.param([nav(args={"x": 5.0, "y": 0.0, "yaw": 1.5})], id="by-coordinates"),
    pytest.param([nav(target={"x": 5.0, "y": 0.0, "yaw": 1.5}, args={"x": 5.0, "y": 0.0})], id="resolved-target"),
    pytest.param([nav("r-nav1", start=T0 + 1, end=T0 + 8, args={"place": "lobby"}, pose=Pose2D(x=0.0, y=0.1)),
                  nav("r-nav2", start=T0 + 9, end=T0 + 20)], id="two-navigations"),
    pytest.param([nav("r-nav1", start=T0 + 1, end=T0 + 8, status=ReceiptStatus.FAILED),
                  nav("r-nav2", start=T0 + 9, end=T0 + 20)], id="retry-after-failure"),
])
def test_alternate_valid_plans_are_accepted(navs):
    v = verifier().verify(request(INCIDENT, *navs, message()), snap())
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps


# --------------------------------------------------------------------------- AT_PLACE


def test_failed_navigation_is_not_evidence():
    v = verifier().verify(request(INCIDENT, nav(status=ReceiptStatus.FAILED), message()), snap())
    assert v.goal_verdict is GoalVerdict.CONTINUE
    assert v.step("o1").verdict is not StepVerdict.SATISFIED
    assert "FAILED" in v.step("o1").reason
    assert v.missing == ("o1", "o2")


@pytest.mark.parametrize("fresh", [
    pytest.param(snap(age=5.0), id="old-stamp"),
    pytest.param(snap(age=5.0, availability=Availability.STALE), id="stale"),
    pytest.param(snap(None, availability=Availability.MISSING), id="missing"),
    pytest.param(snap(at=T0 + 10), id="captured-before-arrival"),
])
def test_stale_fresh_pose_is_stale(fresh):
    v = verifier().verify(request(INCIDENT, nav(), message()), fresh)
    assert v.step("o1").verdict is StepVerdict.STALE, v.step("o1").reason
    assert v.goal_verdict is GoalVerdict.CONTINUE


def test_obligation_max_age_overrides_the_default():
    strict = AT_ELEVATOR.model_copy(update={"max_age_s": 0.05})
    v = verifier().verify(request(contract(strict), nav()), snap(age=0.1))
    assert v.step("o1").verdict is StepVerdict.STALE


def test_fresh_pose_elsewhere_is_violated():
    v = verifier().verify(request(INCIDENT, nav(), message()), snap(Pose2D(x=0.0, y=0.0)))
    assert v.step("o1").verdict is StepVerdict.VIOLATED
    assert "snap-fresh" in v.step("o1").evidence_ids


def test_navigation_that_ended_elsewhere_is_violated():
    v = verifier().verify(request(INCIDENT, nav(pose=Pose2D(x=3.0, y=0.0, yaw=1.5))), snap())
    assert v.step("o1").verdict is StepVerdict.VIOLATED


def test_heading_counts_unless_disabled():
    turned = nav(pose=Pose2D(x=5.0, y=0.0, yaw=-1.5))
    fresh = snap(Pose2D(x=5.0, y=0.0, yaw=-1.5))
    assert verifier().verify(request(contract(AT_ELEVATOR), turned), fresh).step("o1").verdict is StepVerdict.VIOLATED
    relaxed = verifier(yaw_tolerance_rad=None).verify(request(contract(AT_ELEVATOR), turned), fresh)
    assert relaxed.goal_verdict is GoalVerdict.VERIFIED_DONE


def test_localization_jump_after_arrival_is_ambiguous():
    v = verifier().verify(request(contract(AT_ELEVATOR), nav()), snap(jump_at=T0 + 25))
    assert v.step("o1").verdict is StepVerdict.AMBIGUOUS
    assert "localization jumped" in v.step("o1").reason
    earlier = verifier().verify(request(contract(AT_ELEVATOR), nav()), snap(jump_at=T0 - 100))
    assert earlier.goal_verdict is GoalVerdict.VERIFIED_DONE


def test_non_final_at_place_needs_no_fresh_pose():
    visited = AT_ELEVATOR.model_copy(update={"params": {"place": "elevator"}})
    v = verifier().verify(request(contract(visited), nav()), snap(Pose2D(x=0.0, y=0.0)))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE
    assert "snap-fresh" not in v.step("o1").evidence_ids


def test_unknown_place_is_ambiguous():
    nowhere = AT_ELEVATOR.model_copy(update={"params": {"place": "moon"}})
    v = verifier().verify(request(contract(nowhere), nav()), snap())
    assert v.step("o1").verdict is StepVerdict.AMBIGUOUS and "moon" in v.step("o1").reason


# --------------------------------------------------------------------------- the floor


def test_receipt_from_an_earlier_contract_revision_is_ignored():
    rev2 = contract(AT_ELEVATOR, MESSAGE, revision=2, cid="c2")
    v = verifier().verify(request(rev2, nav(revision=1), message(revision=2)), snap())
    assert v.goal_verdict is GoalVerdict.CONTINUE
    assert v.step("o1").verdict is StepVerdict.AMBIGUOUS
    assert "revision 1" in v.step("o1").reason
    assert "r-nav" not in v.evidence_ids
    ok = verifier().verify(request(rev2, nav(revision=2), message(revision=2)), snap())
    assert ok.goal_verdict is GoalVerdict.VERIFIED_DONE and ok.contract_revision == 2


def test_receipts_of_other_missions_or_later_states_are_ignored():
    for bad in (nav(mission="m2"), nav(state_version=11)):
        v = verifier().verify(request(contract(AT_ELEVATOR), bad, state_version=10), snap())
        assert v.step("o1").verdict is StepVerdict.AMBIGUOUS, bad


def test_no_receipts_is_never_done():
    assert verifier().verify(request(contract(AT_ELEVATOR)), snap()).goal_verdict is GoalVerdict.CONTINUE
    empty = CompletionContract(contract_id="c1", mission_id=MISSION, goal=GOAL, compiler="t", obligations=())
    assert verifier().verify(request(empty), snap()).goal_verdict is GoalVerdict.CONTINUE


def test_message_before_the_navigation_is_out_of_order():
    v = verifier().verify(request(INCIDENT, nav(), message(start=T0 + 5, end=T0 + 5.5)), snap())
    assert v.step("o1").verdict is StepVerdict.SATISFIED
    assert v.step("o2").verdict is StepVerdict.VIOLATED
    assert "out of order" in v.step("o2").reason
    assert v.missing == ("o2",)


def test_message_while_driving_does_not_count_as_after_arrival():
    v = verifier().verify(request(INCIDENT, nav(), message(start=T0 + 19, end=T0 + 21)), snap())
    assert v.step("o2").verdict is StepVerdict.VIOLATED


def test_message_to_someone_else_is_violated():
    v = verifier().verify(request(INCIDENT, nav(), message(to="boss")), snap())
    assert v.step("o2").verdict is StepVerdict.VIOLATED


def test_engine_shaped_receipts_are_understood():
    """The engine nests tool results under ``content`` and puts the resolved target in ``result.target``."""
    moved = nav(args={"place": "kitchen"}).model_copy(update={"result": {"target": {"x": 5.0, "y": 0.0, "yaw": 1.5}}})
    sent = message().model_copy(update={"request": {"arguments": {"text": "here"}}, "result": {
        "status": "ok", "content": {"receipt": message_io(message_id="msg-9")}}})
    v = verifier().verify(request(INCIDENT, moved, sent), snap())
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps


def test_message_without_delivery_ack_is_not_satisfied():
    unacked = receipt("r-msg", "send_message", start=T0 + 21, end=T0 + 22, args={"to": "operator"}, result={"queued": True})
    v = verifier().verify(request(INCIDENT, nav(), unacked), snap())
    assert v.step("o2").verdict is StepVerdict.AMBIGUOUS


# --------------------------------------------------------------------------- delivery acknowledgements


def test_a_sent_message_without_an_ack_is_ambiguous_with_the_reason():
    v = verifier().verify(request(INCIDENT, nav(), message(io=message_io(acked=False))), snap())
    assert v.step("o2").verdict is StepVerdict.AMBIGUOUS
    assert "no delivery acknowledgement" in v.step("o2").reason
    assert "no acknowledgement within 2.0 s" in v.step("o2").reason
    assert v.goal_verdict is GoalVerdict.CONTINUE and v.missing == ("o2",)


@pytest.mark.parametrize("io, why", [
    pytest.param(message_io(ack={"sha256": "c" * 64}), "confirms payload sha256", id="other-payload"),
    pytest.param(message_io(ack={"message_id": "msg-2"}), "is for message 'msg-2'", id="other-message"),
])
def test_an_ack_of_something_else_is_violated(io, why):
    v = verifier().verify(request(INCIDENT, nav(), message(io=io)), snap())
    assert v.step("o2").verdict is StepVerdict.VIOLATED
    assert why in v.step("o2").reason


@pytest.mark.parametrize("io", [
    pytest.param(message_io(ack={"by": ""}), id="no-receiver"),
    pytest.param(message_io(ack={"at": "soon"}), id="no-time"),
    pytest.param(message_io(ack={"sha256": "not-a-digest"}), id="bad-digest"),
    pytest.param({**message_io(), "ack": "delivered"}, id="not-an-object"),
    pytest.param({k: v for k, v in message_io().items() if k != "sha256"}, id="sender-recorded-no-hash"),
])
def test_a_malformed_ack_is_ambiguous_never_satisfied(io):
    v = verifier().verify(request(INCIDENT, nav(), message(io=io)), snap())
    assert v.step("o2").verdict is StepVerdict.AMBIGUOUS, v.step("o2").reason


def test_an_acked_retry_after_an_unacked_send_counts():
    first = message("r-msg1", start=T0 + 21, end=T0 + 21.5, io=message_io(acked=False))
    retry = message("r-msg2", start=T0 + 22, end=T0 + 22.5)
    v = verifier().verify(request(INCIDENT, nav(), first, retry), snap())
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE
    assert "r-msg2" in v.step("o2").evidence_ids and "acknowledged by 'sim_robot/outbox'" in v.step("o2").reason


def test_an_acked_message_to_the_wrong_recipient_is_violated():
    v = verifier().verify(request(INCIDENT, nav(), message(to="boss")), snap())
    assert v.step("o2").verdict is StepVerdict.VIOLATED and "'boss'" in v.step("o2").reason


def test_request_has_no_field_for_planner_text():
    with pytest.raises(ValidationError):
        VerifyRequest(mission_id=MISSION, goal=GOAL, contract=INCIDENT, state_version=1, plan_node_id="p",
                      invocation_id="i", planner_text="I am definitely at the elevator")


def test_request_for_another_missions_contract_is_a_usage_error():
    other = CompletionContract(contract_id="cx", mission_id="m2", goal=GOAL, compiler="t", obligations=(AT_ELEVATOR,))
    with pytest.raises(UsageError):
        verifier().verify(request(other, nav()), snap())


# --------------------------------------------------------------------------- images, speech, semantics


PHOTO = Obligation(id="o3", kind=ObligationKind.IMAGE_CAPTURED, description="photo of the kitchen",
                   params={"place": "kitchen"})


def capture(uri: str = "file:///art/img1.png", sha: str = SHA_GOOD, pose: Pose2D = IN_KITCHEN) -> Receipt:
    return receipt("r-cap", "capture_image", start=T0 + 1, end=T0 + 2, pose=pose,
                   result={"status": "ok", "content": {"artifact": {"uri": uri, "sha256": sha, "media_type": "image/png"}}})


def test_image_captured_at_the_place_with_matching_checksum():
    v = verifier().verify(request(contract(PHOTO), capture()), snap())
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE
    assert f"artifact:sha256:{SHA_GOOD}" in v.evidence_ids


@pytest.mark.parametrize("cap", [
    pytest.param(capture(sha=SHA_OTHER), id="checksum-mismatch"),
    pytest.param(capture(uri="file:///art/gone.png"), id="missing-file"),
])
def test_artifact_checksum_mismatch_is_violated(cap):
    v = verifier().verify(request(contract(PHOTO), cap), snap())
    assert v.step("o3").verdict is StepVerdict.VIOLATED
    assert "artifact checksum mismatch/missing" in v.step("o3").reason


def test_image_captured_elsewhere_is_violated():
    v = verifier().verify(request(contract(PHOTO), capture(pose=Pose2D(x=5.0, y=0.0))), snap())
    assert v.step("o3").verdict is StepVerdict.VIOLATED


def test_the_artifact_checker_rehashes_the_file(tmp_path):
    """The one artifact checker (live verifier, replay and audit): ``evidence.bag.verify_artifact``."""
    f = tmp_path / "img.png"
    f.write_bytes(b"pixels")
    digest = hashlib.sha256(b"pixels").hexdigest()
    verify_artifact(f.as_uri(), digest)
    with pytest.raises(EvidenceMismatch):
        verify_artifact(f.as_uri(), SHA_OTHER)
    with pytest.raises(EvidenceNotFound):
        verify_artifact((tmp_path / "nope").as_uri(), digest)


SAID = Obligation(id="o4", kind=ObligationKind.SPOKEN, description="say something")
SAY_HELLO = Obligation(id="o4", kind=ObligationKind.SPOKEN, description="say 'hello'", params={"text": "hello"})


def test_spoken():
    said = speak("good morning")
    assert verifier().verify(request(contract(SAID), said), snap()).goal_verdict is GoalVerdict.VERIFIED_DONE
    failed = said.model_copy(update={"status": ReceiptStatus.UNKNOWN})
    assert verifier().verify(request(contract(SAID), failed), snap()).goal_verdict is GoalVerdict.CONTINUE


def test_speech_needs_an_ack_of_the_spoken_text():
    v = verifier().verify(request(contract(SAID), speak(io=speech_io("hello", acked=False))), snap())
    assert v.step("o4").verdict is StepVerdict.AMBIGUOUS and "no delivery acknowledgement" in v.step("o4").reason
    other = verifier().verify(request(contract(SAID), speak(io=speech_io("hello", sha256=sha("hullo")))), snap())
    assert other.step("o4").verdict is StepVerdict.VIOLATED
    legacy = receipt("r-say", "speak", start=T0 + 1, end=T0 + 2, args={"text": "hello"},
                     result={"receipt": {"spoken": "hello"}})
    assert verifier().verify(request(contract(SAID), legacy), snap()).step("o4").verdict is StepVerdict.AMBIGUOUS


def test_speech_the_contract_quotes_must_be_the_sentence_acknowledged():
    right = verifier().verify(request(contract(SAY_HELLO), speak("hello")), snap())
    assert right.goal_verdict is GoalVerdict.VERIFIED_DONE, right.steps
    wrong = verifier().verify(request(contract(SAY_HELLO), speak("goodbye")), snap())
    assert wrong.step("o4").verdict is StepVerdict.VIOLATED
    assert "not the one the contract names" in wrong.step("o4").reason
    then_right = verifier().verify(request(contract(SAY_HELLO), speak("goodbye"),
                                           speak("hello", "r-say2", start=T0 + 3, end=T0 + 4)), snap())
    assert then_right.goal_verdict is GoalVerdict.VERIFIED_DONE
    assert then_right.step("o4").evidence_ids == ("r-say2",)


BOTTLE = Obligation(id="o5", kind=ObligationKind.SEMANTIC, description="identify a drink bottle",
                    evidence=(EvidenceKind.IMAGE_ARTIFACT, EvidenceKind.SEMANTIC_JUDGEMENT))


class Judge:
    def __init__(self, answer):
        self.answer = answer
        self.seen: list = []

    def judge(self, obligation, *, goal, receipts, artifacts):
        self.seen.append((obligation.id, goal, [r.receipt_id for r in receipts], [a.uri for a in artifacts]))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_semantic_without_checker_is_ambiguous_and_waits_for_the_user():
    v = verifier().verify(request(contract(BOTTLE), capture()), snap())
    assert v.step("o5").verdict is StepVerdict.AMBIGUOUS
    assert v.step("o5").reason == "no semantic checker configured"
    assert v.goal_verdict is GoalVerdict.WAITING_USER and v.missing == ("o5",)
    assert "r-cap" in v.step("o5").evidence_ids


@pytest.mark.parametrize("answer", [
    pytest.param(RuntimeError("model timed out"), id="raises"),
    pytest.param(("satisfied", "looks like a bottle"), id="string-not-enum"),
    pytest.param(StepVerdict.SATISFIED, id="not-a-tuple"),
    pytest.param(None, id="none"),
])
def test_semantic_checker_failure_is_ambiguous(answer):
    v = verifier(Judge(answer)).verify(request(contract(BOTTLE), capture()), snap())
    assert v.step("o5").verdict is StepVerdict.AMBIGUOUS
    assert v.step("o5").layer == "semantic"
    assert v.goal_verdict is GoalVerdict.CONTINUE


def test_semantic_checker_sees_goal_receipts_and_checked_artifacts_only():
    judge = Judge((StepVerdict.SATISFIED, "a bottle on the table"))
    v = verifier(judge).verify(request(contract(BOTTLE), capture()), snap())
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE
    assert judge.seen == [("o5", GOAL, ["r-cap"], ["file:///art/img1.png"])]
    unsafe = verifier(Judge((StepVerdict.UNSAFE, "the bottle is on fire"))).verify(request(contract(BOTTLE), capture()), snap())
    assert unsafe.goal_verdict is GoalVerdict.BLOCKED


class RecordingJudge:
    """A semantic checker double (the judge is an injected port): keeps everything it was given."""

    def __init__(self, answer=(StepVerdict.SATISFIED, "a bottle is visible")):
        self.answer = answer
        self.calls: list[dict] = []

    def judge(self, obligation, *, goal, receipts, artifacts):
        self.calls.append({"obligation": obligation, "goal": goal, "receipts": receipts, "artifacts": artifacts})
        return self.answer

    def seen_text(self) -> str:
        return "\n".join(
            "\n".join([c["obligation"].model_dump_json(), c["goal"], *(r.model_dump_json() for r in c["receipts"]),
                       *(a.model_dump_json() for a in c["artifacts"])]) for c in self.calls)


PLANNER_WORDS = ("MISSION COMPLETE", "Robot verified at the elevator", "CONFIRMED_BY_PLANNER",
                 "Everything is verified", "I see the drink bottle")


def planner_heavy_receipts() -> list[Receipt]:
    """Receipts whose arguments (and results echoing them) carry the planner's confident words."""
    claim = "MISSION COMPLETE. Robot verified at the elevator."
    moved = nav(args={"place": "elevator", "note": "Everything is verified"})
    sent = message(start=T0 + 21, end=T0 + 21.5, text=claim,
                   io={**message_io(text=claim), "preview": claim.upper(), "echo": {"text": claim}})
    said = speak("I see the drink bottle", start=T0 + 22, end=T0 + 23)
    said = said.model_copy(update={"result": {**said.result, "content": {
        **said.result["content"], "spoken": "I see the drink bottle", "log": ["said:", "I see the drink bottle!"]}}})
    cap = capture().model_copy(update={"request": {"arguments": {"label": "CONFIRMED_BY_PLANNER"}},
                                       "started_at": T0 + 24, "ended_at": T0 + 25})
    return [moved, sent, said, cap]


def test_the_semantic_judge_never_sees_the_planners_words():
    judge = RecordingJudge()
    semantic = BOTTLE.model_copy(update={"depends_on": ()})
    # a message and a speech whose contract asks for a judgement on them too: the judge gets those receipts
    judged_msg = MESSAGE.model_copy(update={"depends_on": (), "evidence": (EvidenceKind.DELIVERY_RECEIPT,
                                                                           EvidenceKind.SEMANTIC_JUDGEMENT)})
    judged_say = SAID.model_copy(update={"evidence": (EvidenceKind.SPEECH_RECEIPT, EvidenceKind.SEMANTIC_JUDGEMENT)})
    v = verifier(judge).verify(request(contract(semantic, judged_msg, judged_say), *planner_heavy_receipts()), snap())
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    assert [c["obligation"].id for c in judge.calls] == ["o5", "o2", "o4"]
    seen = judge.seen_text().casefold()
    for words in PLANNER_WORDS:
        assert words.casefold() not in seen, words
    # ...but the structure it needs is all there
    shown = {r.receipt_id: r for c in judge.calls for r in c["receipts"]}
    assert set(shown) == {"r-nav", "r-msg", "r-say", "r-cap"}
    assert shown["r-nav"].request["arguments"] == {"place": "elevator"}
    assert shown["r-msg"].request["arguments"] == {"to": "operator"}
    sent = shown["r-msg"].result["receipt"]
    assert sent["message_id"] == "msg-1" and sent["ack"]["sha256"] == sent["sha256"] and "preview" not in sent
    assert shown["r-say"].request["arguments"] == {}
    assert shown["r-say"].result["content"]["receipt"]["text_sha256"] == sha("I see the drink bottle")
    assert shown["r-cap"].result["content"]["artifact"]["sha256"] == SHA_GOOD
    assert [a.uri for a in judge.calls[0]["artifacts"]] == ["file:///art/img1.png"]
    # messages and speech are words, not observations: never what a judgement of the world rests on
    assert {r.receipt_id for r in judge.calls[0]["receipts"]} == {"r-nav", "r-cap"}
    # and nothing of it comes back in the verdict either
    verdict_text = v.model_dump_json().casefold()
    assert not any(w.casefold() in verdict_text for w in PLANNER_WORDS)


def test_a_planner_string_in_a_structural_argument_is_not_shown_either():
    judge = RecordingJudge()
    smuggled = nav(args={"place": "elevator. MISSION COMPLETE", "x": 5.0, "y": 0.0})
    v = verifier(judge).verify(request(contract(BOTTLE.model_copy(update={"depends_on": ()})), smuggled), snap())
    assert "mission complete" not in judge.seen_text().casefold()
    assert judge.calls[0]["receipts"][0].request["arguments"] == {"x": 5.0, "y": 0.0}
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE


def test_failure_reasons_do_not_repeat_the_planners_words():
    claim = "MISSION COMPLETE. Robot verified at the elevator."
    failed = receipt("r-msg", "send_message", start=T0 + 21, end=T0 + 22, status=ReceiptStatus.FAILED,
                     args={"to": "operator", "text": claim},
                     result={"status": "error", "error": {"code": "tool_error", "message": f"cannot send {claim!r}"}})
    v = verifier().verify(request(contract(MESSAGE.model_copy(update={"depends_on": ()})), failed), snap())
    assert v.step("o2").verdict is StepVerdict.VIOLATED
    assert "tool_error" in v.step("o2").reason and "mission complete" not in v.model_dump_json().casefold()


def test_semantic_layer_runs_only_after_the_predicate_passes():
    judged_photo = PHOTO.model_copy(update={"evidence": (EvidenceKind.SEMANTIC_JUDGEMENT,)})
    judge = Judge((StepVerdict.SATISFIED, "fine"))
    v = verifier(judge).verify(request(contract(judged_photo), capture(sha=SHA_OTHER)), snap())
    assert v.step("o3").verdict is StepVerdict.VIOLATED and v.step("o3").layer == "predicate"
    assert judge.seen == []


# --------------------------------------------------------------------------- closed routes


ROUTE = Obligation(id="o6", kind=ObligationKind.ROUTE_CLOSED, description="patrol kitchen then lab and come back",
                   params={"start": "lobby", "waypoints": ["kitchen", "lab"], "min_departure_m": 2.0})


def samples(*points: tuple[float, float, float]) -> tuple[PoseSample, ...]:
    return tuple(PoseSample(t=t, pose=Pose2D(x=x, y=y), source_id=f"snap-{i}") for i, (t, x, y) in enumerate(points))


def route_navs(*legs: tuple[str, float, float, Pose2D]) -> list[Receipt]:
    return [nav(f"r-{i}", start=s, end=e, args={"place": p}, pose=pose) for i, (p, s, e, pose) in enumerate(legs)]


def test_closed_route_with_start_inside_tolerance_and_no_departure_is_not_satisfied():
    navs = route_navs(("lobby", T0 + 1, T0 + 2, Pose2D(x=0.1, y=0.0)))
    traj = samples((T0 + 0.5, 0.0, 0.0), (T0 + 1.5, 0.2, 0.1), (T0 + 2, 0.1, 0.0))
    no_wp = ROUTE.model_copy(update={"params": {"start": "lobby", "min_departure_m": 2.0}})
    v = verifier().verify(request(contract(no_wp), *navs, trajectory=traj), snap(Pose2D(x=0.0, y=0.0)))
    assert v.step("o6").verdict is not StepVerdict.SATISFIED
    assert "never departed" in v.step("o6").reason


def test_closed_route_with_departure_waypoints_and_return_is_satisfied():
    navs = route_navs(("kitchen", T0 + 1, T0 + 10, Pose2D(x=0.0, y=6.0)),
                      ("lab", T0 + 11, T0 + 18, Pose2D(x=6.0, y=6.1)),
                      ("lobby", T0 + 19, T0 + 28, Pose2D(x=0.1, y=0.0)))
    traj = samples((T0, 0.0, 0.0), (T0 + 5, 0.0, 3.0), (T0 + 15, 3.0, 6.0), (T0 + 24, 3.0, 3.0))
    v = verifier().verify(request(contract(ROUTE), *navs, trajectory=traj), snap(Pose2D(x=0.0, y=0.1)))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    assert {"r-0", "r-1", "snap-fresh"} <= set(v.step("o6").evidence_ids)


def test_closed_route_out_of_order_or_not_back_is_not_satisfied():
    navs = route_navs(("lab", T0 + 1, T0 + 10, Pose2D(x=6.0, y=6.0)),
                      ("kitchen", T0 + 11, T0 + 18, Pose2D(x=0.0, y=6.0)),
                      ("lobby", T0 + 19, T0 + 28, Pose2D(x=0.0, y=0.0)))
    v = verifier().verify(request(contract(ROUTE), *navs), snap(Pose2D(x=0.0, y=0.0)))
    assert v.step("o6").verdict is StepVerdict.VIOLATED and "lab" in v.step("o6").reason
    navs = route_navs(("kitchen", T0 + 1, T0 + 10, Pose2D(x=0.0, y=6.0)), ("lab", T0 + 11, T0 + 18, Pose2D(x=6.0, y=6.0)))
    v = verifier().verify(request(contract(ROUTE), *navs), snap(Pose2D(x=6.0, y=6.0)))
    assert v.step("o6").verdict is StepVerdict.VIOLATED and "not back" in v.step("o6").reason


def test_closed_route_ignores_poses_from_before_its_first_navigation():
    old = samples((T0 - 50, 0.0, 6.0), (T0 - 40, 6.0, 6.0))
    navs = route_navs(("lobby", T0 + 1, T0 + 2, Pose2D(x=0.0, y=0.0)))
    v = verifier().verify(request(contract(ROUTE), *navs, trajectory=old), snap(Pose2D(x=0.0, y=0.0)))
    assert v.step("o6").verdict is StepVerdict.VIOLATED


def test_closed_route_start_defaults_to_where_the_route_began():
    implicit = ROUTE.model_copy(update={"params": {"waypoints": ["lab"]}})
    navs = route_navs(("lab", T0 + 1, T0 + 10, Pose2D(x=6.0, y=6.0)), ("kitchen", T0 + 11, T0 + 18, Pose2D(x=0.0, y=6.0)))
    traj = samples((T0, 0.0, 6.0))
    v = verifier().verify(request(contract(implicit), *navs, trajectory=traj), snap(Pose2D(x=0.0, y=6.0)))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    assert "snap-0" in v.step("o6").evidence_ids


# --------------------------------------------------------------------------- freshness (Obligation.max_age_s)


def aged(ob: Obligation, max_age_s: float) -> Obligation:
    return ob.model_copy(update={"max_age_s": max_age_s, "depends_on": ()})


def test_an_old_message_is_stale_and_a_fresh_resend_counts():
    # the verifier's clock reads T0 + 31
    ob = aged(MESSAGE, 5.0)
    v = verifier().verify(request(contract(ob), message(start=T0 + 21, end=T0 + 21.5)), snap())
    assert v.step("o2").verdict is StepVerdict.STALE and v.step("o2").layer == "floor"
    assert "max_age_s=5.0" in v.step("o2").reason and "r-msg 9.5 s" in v.step("o2").reason
    assert v.goal_verdict is GoalVerdict.CONTINUE
    again = message("r-msg2", start=T0 + 29, end=T0 + 29.5)
    ok = verifier().verify(request(contract(ob), message(start=T0 + 21, end=T0 + 21.5), again), snap())
    assert ok.goal_verdict is GoalVerdict.VERIFIED_DONE and ok.step("o2").evidence_ids == ("r-msg2",)


def test_stale_evidence_that_is_also_wrong_says_what_is_wrong():
    v = verifier().verify(request(contract(aged(MESSAGE, 5.0)), message(to="boss", start=T0 + 21, end=T0 + 21.5)),
                          snap())
    assert v.step("o2").verdict is StepVerdict.VIOLATED


@pytest.mark.parametrize("ob, evidence", [
    pytest.param(aged(PHOTO, 10.0), lambda: capture(), id="image"),
    pytest.param(aged(SAID, 10.0), lambda: speak(), id="speech"),
    pytest.param(aged(AT_ELEVATOR.model_copy(update={"params": {"place": "elevator"}}), 10.0), lambda: nav(end=T0 + 2),
                 id="visited-place"),
    pytest.param(aged(BOTTLE, 10.0), lambda: capture(), id="semantic"),
])
def test_every_obligation_kind_honours_max_age(ob, evidence):
    v = verifier(RecordingJudge()).verify(request(contract(ob), evidence()), snap())
    (step,) = v.steps
    assert step.verdict is StepVerdict.STALE, step.reason
    loose = ob.model_copy(update={"max_age_s": 60.0})
    assert verifier(RecordingJudge()).verify(request(contract(loose), evidence()), snap()).goal_verdict \
        is GoalVerdict.VERIFIED_DONE


def test_a_navigations_pose_stamp_dates_it():
    visited = aged(AT_ELEVATOR.model_copy(update={"params": {"place": "elevator"}}), 10.0)
    late_receipt = nav(end=T0 + 30).model_copy(update={"pose_stamp": T0 + 12})  # pose observed long before
    assert verifier().verify(request(contract(visited), late_receipt), snap()).step("o1").verdict is StepVerdict.STALE


def test_a_final_place_is_bounded_by_the_fresh_pose_not_by_the_old_navigation():
    strict = AT_ELEVATOR.model_copy(update={"max_age_s": 2.0})
    v = verifier().verify(request(contract(strict), nav(end=T0 + 5)), snap(age=0.1))  # arrived 26 s ago
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps
    assert verifier().verify(request(contract(strict), nav(end=T0 + 5)), snap(age=3.0)).step("o1").verdict \
        is StepVerdict.STALE


def test_an_observation_only_place_seen_too_long_ago_is_stale():
    seen = Obligation(id="o1", kind=ObligationKind.AT_PLACE, description="seen at the lab", params={"place": "lab"},
                      evidence=(EvidenceKind.POSE_OBSERVATION,), max_age_s=5.0)
    old = samples((T0 + 10, 6.0, 6.0), (T0 + 20, 0.0, 0.0))
    v = verifier().verify(request(contract(seen), trajectory=old), snap())
    assert v.step("o1").verdict is StepVerdict.STALE
    recent = samples((T0 + 29, 6.0, 6.0))
    assert verifier().verify(request(contract(seen), trajectory=recent), snap()).goal_verdict is GoalVerdict.VERIFIED_DONE


def test_an_offline_route_whose_last_pose_is_old_is_stale():
    navs = route_navs(("kitchen", T0 + 1, T0 + 5, Pose2D(x=0.0, y=6.0)), ("lab", T0 + 6, T0 + 9, Pose2D(x=6.0, y=6.0)),
                      ("lobby", T0 + 10, T0 + 14, Pose2D(x=0.0, y=0.1)))
    traj = samples((T0, 0.0, 0.0), (T0 + 3, 0.0, 3.0), (T0 + 14, 0.0, 0.0))
    route = ROUTE.model_copy(update={"max_age_s": 5.0})
    v = verifier(require_fresh_pose=False).verify(request(contract(route), *navs, trajectory=traj), snap())
    assert v.step("o6").verdict is StepVerdict.STALE and "last recorded pose" in v.step("o6").reason
    loose = ROUTE.model_copy(update={"max_age_s": 30.0})
    ok = verifier(require_fresh_pose=False).verify(request(contract(loose), *navs, trajectory=traj), snap())
    assert ok.goal_verdict is GoalVerdict.VERIFIED_DONE, ok.steps


def test_the_lexicon_defaults_keep_a_two_minute_demo_fresh():
    """The demo's contract as the shipped lexicon compiles it, on a ~2-minute trace: nothing is stale."""
    from robot_harness.core.goals import GoalCompiler

    places = {"dock": Pose2D(x=0.0, y=0.0, yaw=0.0), "office_storage": Pose2D(x=12.0, y=4.5, yaw=1.57)}
    c = GoalCompiler().compile(
        "Go to office_storage, capture an image there, return to dock and report.", mission_id=MISSION,
        contract_id="c1", places=places)
    there = Pose2D(x=12.0, y=4.4, yaw=1.6)
    trace = [
        nav("r-nav1", start=T0 + 2, end=T0 + 40, args={"place": "office_storage"}, pose=there),
        receipt("r-cap", "capture_image", start=T0 + 42, end=T0 + 43, pose=there,
                result={"content": {"artifact": {"uri": "file:///art/img1.png", "sha256": SHA_GOOD}}}),
        nav("r-nav2", start=T0 + 45, end=T0 + 85, args={"place": "dock"}, pose=Pose2D(x=0.1, y=0.0, yaw=0.05)),
        message(start=T0 + 90, end=T0 + 91),
    ]
    req = VerifyRequest(mission_id=MISSION, goal=c.goal, contract=c, receipts=tuple(trace), state_version=10,
                        plan_node_id="turn-9", invocation_id="done-9", places=places)
    v = Verifier(VerifierConfig(), semantic=None, artifact_check=artifact_check, ids=IdGenerator(seed=7),
                 clock=ManualClock(T0 + 120)).verify(req, snap(Pose2D(x=0.0, y=0.05), at=T0 + 119.9))
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps


# --------------------------------------------------------------------------- blocked and waiting_user from rules


def test_an_obligation_waiting_only_for_a_judgement_makes_the_goal_wait_for_the_user():
    look = BOTTLE.model_copy(update={"depends_on": ("o1",)})
    v = verifier().verify(request(contract(AT_ELEVATOR, look), nav(), capture().model_copy(
        update={"started_at": T0 + 21, "ended_at": T0 + 22, "pose_at_end": NEAR_ELEVATOR})), snap())
    assert v.goal_verdict is GoalVerdict.WAITING_USER, v.steps
    assert v.step("o1").verdict is StepVerdict.SATISFIED and v.missing == ("o5",)


def test_an_obligation_after_one_that_awaits_a_judgement_waits_too():
    look = BOTTLE.model_copy(update={"depends_on": ()})
    report = MESSAGE.model_copy(update={"depends_on": ("o5",)})
    v = verifier().verify(request(contract(look, report), capture(), message()), snap())
    assert v.goal_verdict is GoalVerdict.WAITING_USER, v.steps
    assert v.step("o2").verdict is StepVerdict.AMBIGUOUS and "awaits a semantic judgement" in v.step("o2").reason
    # its own evidence still has to hold: an unacknowledged report is work the planner can still do
    unacked = verifier().verify(request(contract(look, report), capture(), message(io=message_io(acked=False))), snap())
    assert unacked.goal_verdict is GoalVerdict.CONTINUE


def test_missing_work_beside_a_pending_judgement_is_continue_not_waiting():
    look = BOTTLE.model_copy(update={"depends_on": ()})
    lookup = receipt("r-lookup", "lookup_place", start=T0 + 1, end=T0 + 1.1, args={"place": "elevator"})
    v = verifier().verify(request(contract(look, AT_ELEVATOR), lookup), snap(Pose2D(x=0.0, y=0.0)))
    assert v.goal_verdict is GoalVerdict.CONTINUE and set(v.missing) == {"o1", "o5"}
    none = verifier().verify(request(contract(look)), snap())
    assert none.goal_verdict is GoalVerdict.CONTINUE, "no receipt at all: nothing for a human to judge"
    judged = verifier(Judge((StepVerdict.AMBIGUOUS, "cannot tell"))).verify(request(contract(look), capture()), snap())
    assert judged.goal_verdict is GoalVerdict.CONTINUE, "a configured checker's doubt is not a reason to stop"


def lease_refusal(rid: str, state: str, *, start: float, end: float) -> Receipt:
    lease = {"resource": "base", "owner": "act-1", "mission_id": MISSION, "state": state}
    return receipt(rid, "navigate_to", start=start, end=end, status=ReceiptStatus.REJECTED, args={"place": "elevator"},
                   result={"status": "rejected", "content": {"code": "lease_conflict", "reason": "busy", "lease": lease}})


def test_a_refusal_because_the_base_is_blocked_by_an_unknown_action_is_unsafe_and_blocks_the_goal():
    lost = nav("r-nav1", start=T0 + 1, end=T0 + 10, status=ReceiptStatus.UNKNOWN)
    refused = lease_refusal("r-nav2", "blocked", start=T0 + 11, end=T0 + 11.1)
    v = verifier().verify(request(INCIDENT, lost, refused), snap(Pose2D(x=2.0, y=0.0)))
    assert v.step("o1").verdict is StepVerdict.UNSAFE and v.step("o1").layer == "floor"
    assert "blocked by an action of unknown outcome" in v.step("o1").reason
    assert v.step("o1").evidence_ids == ("r-nav2",)
    assert v.goal_verdict is GoalVerdict.BLOCKED


def test_a_lease_held_by_someone_else_or_a_later_attempt_is_not_unsafe():
    held = verifier().verify(request(INCIDENT, lease_refusal("r-nav1", "held", start=T0 + 1, end=T0 + 1.1)), snap())
    assert held.step("o1").verdict is StepVerdict.VIOLATED and held.goal_verdict is GoalVerdict.CONTINUE
    later = verifier().verify(request(INCIDENT, lease_refusal("r-nav1", "blocked", start=T0 + 1, end=T0 + 1.1),
                                      nav("r-nav2", start=T0 + 2, end=T0 + 9, status=ReceiptStatus.FAILED)), snap())
    assert later.step("o1").verdict is StepVerdict.VIOLATED and later.goal_verdict is GoalVerdict.CONTINUE
    done = verifier().verify(request(INCIDENT, lease_refusal("r-nav1", "blocked", start=T0 + 1, end=T0 + 1.1),
                                     nav(), message()), snap())
    assert done.goal_verdict is GoalVerdict.VERIFIED_DONE


def test_the_incident_goal_compiled_by_the_goal_compiler():
    """"Identify the drink bottle, travel to the elevator, and report.": lookup alone is rejected naming the
    missing navigation; the full trace is accepted by a satisfied judge, and waits for a human without one."""
    from robot_harness.core.goals import GoalCompiler

    c = GoalCompiler().compile(
        "Identify the drink bottle, travel to the elevator, and report.", mission_id=MISSION, contract_id="c1",
        places=PLACES)
    sem, at_elevator, report = (o.id for o in c.obligations)
    lookup = receipt("r-lookup", "lookup_place", start=T0 + 1, end=T0 + 1.1, args={"place": "elevator"})

    def run(*receipts, judge=None):
        req = VerifyRequest(mission_id=MISSION, goal=c.goal, contract=c, receipts=receipts, state_version=10,
                            plan_node_id="turn-9", invocation_id="done-9", places=PLACES)
        return verifier(judge).verify(req, snap())

    incident = run(lookup, judge=RecordingJudge((StepVerdict.SATISFIED, "a bottle")))
    assert incident.goal_verdict is GoalVerdict.CONTINUE
    assert at_elevator in incident.missing and "navigate_to" in incident.step(at_elevator).reason
    cap = capture().model_copy(update={"started_at": T0 + 2, "ended_at": T0 + 3})
    trace = (lookup, cap, nav(start=T0 + 4, end=T0 + 20), message(start=T0 + 21, end=T0 + 21.5))
    assert run(*trace, judge=RecordingJudge((StepVerdict.SATISFIED, "a bottle"))).goal_verdict \
        is GoalVerdict.VERIFIED_DONE
    waiting = run(*trace)
    # the steps are ordered (identify, then travel, then report): all that follows the judgement waits for it
    assert waiting.goal_verdict is GoalVerdict.WAITING_USER and set(waiting.missing) == {sem, at_elevator, report}
    assert "awaits a semantic judgement" in waiting.step(at_elevator).reason


# --------------------------------------------------------------------------- waypoints of a route (issue 16)

WP_A = Pose2D(x=2.0, y=0.0)
WP_B = Pose2D(x=2.0, y=2.0)
VIA_PLACES = {"a": WP_A, "b": WP_B, "elevator": PLACES["elevator"]}
VIA_A = Obligation(id="w1", kind=ObligationKind.AT_PLACE, description="via a", params={"place": "a", "final": False})
VIA_B = Obligation(id="w2", kind=ObligationKind.AT_PLACE, description="via b", params={"place": "b", "final": False},
                   depends_on=("w1",))
WP_END = Obligation(id="w3", kind=ObligationKind.AT_PLACE, description="at the elevator",
                 params={"place": "elevator", "final": True}, depends_on=("w2",))
VIA_ROUTE = contract(VIA_A, VIA_B, WP_END)


def route_receipt(*, status: ReceiptStatus = ReceiptStatus.SUCCEEDED, reported: dict | None = None,
                  start: float = T0 + 1, end: float = T0 + 20, end_stamp: float | None = None) -> Receipt:
    rows = [{"index": k, "place": name, "pose": pose.model_dump(), "observed": None,
             "reported": (reported or {}).get(k)}
            for k, (name, pose) in enumerate((("a", WP_A), ("b", WP_B), ("elevator", PLACES["elevator"])))]
    r = receipt("r-route", "navigate_through", start=start, end=end, status=status,
                args={"places": ["a", "b", "elevator"]}, pose=NEAR_ELEVATOR,
                result={"target": PLACES["elevator"].model_dump(), "waypoints": rows})
    return r.model_copy(update={"pose_stamp": end_stamp}) if end_stamp is not None else r


def sample(t: float, pose: Pose2D, sid: str) -> PoseSample:
    return PoseSample(t=t, pose=pose, source_id=sid)


def route_request(*receipts: Receipt, trajectory: tuple[PoseSample, ...]) -> VerifyRequest:
    return VerifyRequest(mission_id=MISSION, goal=GOAL, contract=VIA_ROUTE, receipts=receipts, state_version=10,
                         plan_node_id="turn-9", invocation_id="done-9", places=VIA_PLACES, trajectory=trajectory)


PASSES = (sample(T0 + 3, WP_A, "s-a"), sample(T0 + 8, WP_B, "s-b"), sample(T0 + 20, NEAR_ELEVATOR, "s-end"))


def test_each_waypoint_of_a_route_is_satisfied_by_a_journaled_pose_in_order():
    v = verifier().verify(route_request(route_receipt(), trajectory=PASSES), snap())
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, [(s.obligation_id, s.reason) for s in v.steps]
    assert "s-a" in v.steps[0].evidence_ids and "s-b" in v.steps[1].evidence_ids


def test_a_pose_near_a_waypoint_before_the_previous_one_does_not_count():
    # b seen at T0+2, before a (T0+3): out of order, so b is not passed after a
    early_b = (sample(T0 + 2, WP_B, "s-b"), sample(T0 + 3, WP_A, "s-a"), sample(T0 + 20, NEAR_ELEVATOR, "s-end"))
    v = verifier().verify(route_request(route_receipt(), trajectory=early_b), snap())
    steps = {s.obligation_id: s for s in v.steps}
    assert steps["w2"].verdict is StepVerdict.VIOLATED and "never observed" in steps["w2"].reason


def test_a_waypoint_the_backend_reports_skipped_is_violated_whatever_the_poses_say():
    skipped = route_receipt(reported={1: {"index": 1, "state": "skipped", "error_code": 0, "error_msg": ""}})
    v = verifier().verify(route_request(skipped, trajectory=PASSES), snap())
    steps = {s.obligation_id: s for s in v.steps}
    assert steps["w2"].verdict is StepVerdict.VIOLATED and "reported skipped by the backend" in steps["w2"].reason
    assert v.goal_verdict is not GoalVerdict.VERIFIED_DONE


def test_an_unknown_route_without_a_pass_is_ambiguous_not_violated():
    unknown = route_receipt(status=ReceiptStatus.UNKNOWN)
    v = verifier().verify(route_request(unknown, trajectory=(PASSES[0],)), snap())
    steps = {s.obligation_id: s for s in v.steps}
    assert steps["w1"].verdict is StepVerdict.SATISFIED
    assert steps["w2"].verdict is StepVerdict.AMBIGUOUS, steps["w2"]


def test_a_failed_route_still_shows_its_end_by_its_own_end_pose_and_a_final_place_needs_the_robot_there_now():
    # the route FAILED (say, a waypoint missed): its end pose, stamped a hair after the receipt's end, counts as
    # the pass of the elevator; the final place also needs the fresh pose there
    failed = route_receipt(status=ReceiptStatus.FAILED, end=T0 + 20, end_stamp=T0 + 20.0001)
    end_pass = (*PASSES[:2], sample(T0 + 20.0001, NEAR_ELEVATOR, "s-end"))
    there = verifier().verify(route_request(failed, trajectory=end_pass), snap())
    assert {s.obligation_id: s for s in there.steps}["w3"].verdict is StepVerdict.SATISFIED
    gone = verifier().verify(route_request(failed, trajectory=end_pass), snap(IN_KITCHEN))
    w3 = {s.obligation_id: s for s in gone.steps}["w3"]
    assert w3.verdict is StepVerdict.VIOLATED and "fresh pose" in w3.reason, w3
