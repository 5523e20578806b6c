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
    check_file_artifact,
)

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


def message(rid: str = "r-msg", *, start: float = T0 + 21, end: float = T0 + 21.5, to: str = "operator", **kw) -> Receipt:
    return receipt(rid, "send_message", start=start, end=end, args={"to": to, "text": "at the elevator"},
                   result={"receipt": {"message_id": "msg-1", "delivered_at": end, "to": to}}, **kw)


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
        "status": "ok", "content": {"receipt": {"message_id": "msg-9", "delivered_at": T0 + 21.5, "to": "operator"}}}})
    v = verifier().verify(request(INCIDENT, moved, sent), snap())
    assert v.goal_verdict is GoalVerdict.VERIFIED_DONE, v.steps


def test_message_without_delivery_ack_is_not_satisfied():
    unacked = receipt("r-msg", "send_message", start=T0 + 21, end=T0 + 22, args={"to": "operator"}, result={"queued": True})
    v = verifier().verify(request(INCIDENT, nav(), unacked), snap())
    assert v.step("o2").verdict is StepVerdict.AMBIGUOUS


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


def test_check_file_artifact(tmp_path):
    f = tmp_path / "img.png"
    f.write_bytes(b"pixels")
    digest = hashlib.sha256(b"pixels").hexdigest()
    check_file_artifact(f.as_uri(), digest)
    with pytest.raises(ValueError):
        check_file_artifact(f.as_uri(), SHA_OTHER)
    with pytest.raises(FileNotFoundError):
        check_file_artifact((tmp_path / "nope").as_uri(), digest)


def test_spoken():
    said = Obligation(id="o4", kind=ObligationKind.SPOKEN, description="say hello")
    speak = receipt("r-say", "speak", start=T0 + 1, end=T0 + 2, args={"text": "hello"}, result={"receipt": {"spoken": "hello"}})
    assert verifier().verify(request(contract(said), speak), snap()).goal_verdict is GoalVerdict.VERIFIED_DONE
    failed = speak.model_copy(update={"status": ReceiptStatus.UNKNOWN})
    assert verifier().verify(request(contract(said), failed), snap()).goal_verdict is GoalVerdict.CONTINUE


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


def test_semantic_without_checker_is_ambiguous():
    v = verifier().verify(request(contract(BOTTLE), capture()), snap())
    assert v.step("o5").verdict is StepVerdict.AMBIGUOUS
    assert v.step("o5").reason == "no semantic checker configured"


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
