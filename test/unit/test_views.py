"""Role-isolated context views (core/views.py): one pool, four bounded views."""
from __future__ import annotations

import json

import pytest

from robot_harness.core.views import ROLE_POLICY, ContextItem, Provenance, Role, ViewBudget, build_view

NOW = 1000.0


def item(item_id: str, *, key: str = "", kind: str = "observation", prov: Provenance = Provenance.OBSERVATION,
         **kw) -> ContextItem:
    return ContextItem(item_id=item_id, key=key or item_id, kind=kind, provenance=prov, **kw)


def pool() -> list[ContextItem]:
    return [
        item("goal", kind="goal", prov=Provenance.USER, value={"goal": "go to the office"}, priority=100),
        item("o1", key="obligation:o1", kind="obligation", prov=Provenance.CONTRACT, scope="o1",
             value={"id": "o1", "description": "at office"}),
        item("o2", key="obligation:o2", kind="obligation", prov=Provenance.CONTRACT, scope="o2",
             value={"id": "o2", "description": "report"}),
        item("r1", key="receipt:c1", kind="receipt", prov=Provenance.RECEIPT, scope="o1", value={"ok": True}, observed_at=990.0),
        item("pose", key="robot.pose", value={"x": 3.0}, source="amcl", observed_at=999.5, max_age_s=2.0),
        item("fail1", key="failure:c0", kind="failure", prov=Provenance.HARNESS, value={"skill": "navigate_to"}),
        item("budget", kind="budget", prov=Provenance.HARNESS, value={"replans_left": 2}),
        item("claim", kind="proposal", prov=Provenance.PLANNER, value={"text": "I HAVE ARRIVED, mission complete"}),
        item("thought", kind="model_text", prov=Provenance.PLANNER, value={"text": "the robot is surely there"}),
    ]


def test_planner_text_never_reaches_the_verifier_view() -> None:
    view = build_view(pool(), role=Role.VERIFIER, now=NOW)
    assert all(i.provenance is not Provenance.PLANNER for i in view.items)
    text = view.as_json()
    assert "ARRIVED" not in text and "surely" not in text
    assert view.dropped["role"] >= 2
    # by construction: the policy table gives the verifier no planner provenance at all
    assert Provenance.PLANNER not in ROLE_POLICY[Role.VERIFIER]
    assert {i.item_id for i in view.items} == {"goal", "o1", "o2", "r1", "pose"}


@pytest.mark.parametrize("role", list(Role))
def test_no_planner_claim_in_any_view_but_the_planners_own(role: Role) -> None:
    ids = {i.item_id for i in build_view(pool(), role=role, now=NOW).items}
    if role is Role.PLANNER:
        assert "claim" in ids and "thought" not in ids  # its proposals, not free text
    else:
        assert not ids & {"claim", "thought"}


def test_the_skill_view_is_scoped_to_one_subgoal() -> None:
    view = build_view(pool(), role=Role.SKILL, now=NOW, scope="o1")
    ids = {i.item_id for i in view.items}
    assert ids == {"o1", "r1", "pose"}
    assert view.dropped["scope"] == 1  # o2


def test_the_recovery_view_has_failures_budgets_and_evidence_but_not_the_goal_text() -> None:
    ids = {i.item_id for i in build_view(pool(), role=Role.RECOVERY, now=NOW).items}
    assert {"fail1", "budget", "r1", "pose"} <= ids and "goal" not in ids


def test_expired_observations_are_dropped() -> None:
    view = build_view(pool(), role=Role.PLANNER, now=NOW + 5.0)
    assert "pose" not in {i.item_id for i in view.items}
    assert view.dropped["expired"] == 1


def test_superseded_records_are_dropped_and_the_newest_link_stays() -> None:
    items = [item("p1", key="robot.pose", value={"x": 1.0}, source="amcl"),
             item("p2", key="robot.pose", value={"x": 2.0}, source="amcl", supersedes="p1"),
             item("p3", key="robot.pose", value={"x": 3.0}, source="amcl", supersedes="p2")]
    view = build_view(items, role=Role.PLANNER, now=NOW)
    assert [i.item_id for i in view.items] == ["p3"] and view.dropped["superseded"] == 2


def test_unresolved_conflicts_are_withheld_until_reobserved() -> None:
    a = item("a", key="door", value={"open": True}, source="camera")
    b = item("b", key="door", value={"open": False}, source="lidar")
    view = build_view([a, b], role=Role.VERIFIER, now=NOW)
    assert view.items == () and view.withheld_conflicts == ("door",)
    c = item("c", key="door", value={"open": False}, source="camera", supersedes="a")  # re-observed
    view = build_view([a, b, c], role=Role.VERIFIER, now=NOW)
    assert {i.item_id for i in view.items} == {"b", "c"} and view.withheld_conflicts == ()


def test_item_and_byte_budgets_keep_high_priority_and_recent_items() -> None:
    items = [item(f"n{k}", key=f"k{k}", value={"blob": "x" * 100}, observed_at=float(k), priority=10) for k in range(50)]
    items.append(item("goal", kind="goal", prov=Provenance.USER, value={"goal": "g"}, priority=100))
    view = build_view(items, role=Role.PLANNER, now=NOW, budget=ViewBudget(max_items=5, max_bytes=100_000))
    ids = [i.item_id for i in view.items]
    assert "goal" in ids and len(ids) == 5
    assert set(ids) - {"goal"} == {"n49", "n48", "n47", "n46"}  # the newest
    small = build_view(items, role=Role.PLANNER, now=NOW, budget=ViewBudget(max_items=64, max_bytes=600))
    assert small.bytes <= 600 and len(json.dumps([1] * 0)) < small.bytes
    assert small.dropped["budget"] > 0


# ----------------------------------------------------------------- C2, as the engine builds it


def _contract():
    from robot_harness.core.completion import CompletionContract, Obligation, ObligationKind

    return CompletionContract(contract_id="c1", mission_id="m1", goal="go to the office, say hello, visit the dock and come back", compiler="t",
                              obligations=(
                                  Obligation(id="o1", kind=ObligationKind.AT_PLACE, description="at the office",
                                             params={"place": "office", "final": False}),
                                  Obligation(id="o2", kind=ObligationKind.SPOKEN, description="said hello",
                                             depends_on=("o1",)),
                                  Obligation(id="o3", kind=ObligationKind.AT_PLACE, description="at the dock",
                                             params={"place": "dock", "final": False}, depends_on=("o2",)),
                                  Obligation(id="o4", kind=ObligationKind.AT_PLACE, description="back at the office",
                                             params={"place": "office", "final": True}, depends_on=("o3",))))


def _receipt(rid: str, skill: str, words: str):
    from robot_harness.core.completion import Receipt, ReceiptStatus

    return Receipt(receipt_id=rid, mission_id="m1", contract_revision=1, state_version=2, plan_node_id="turn-1",
                   invocation_id=f"call-{rid}", skill=skill, request={"arguments": {"text": words}},
                   result={"content": {"spoken": words}}, status=ReceiptStatus.FAILED, started_at=990.0, ended_at=991.0)


def test_the_skill_view_of_a_call_is_its_subgoal_target_and_observations_without_model_words() -> None:
    from robot_harness.core.context import SKILL_VIEW_BUDGET, compile_skill_view
    from robot_harness.core.records import Availability, FieldMeta, Pose2D, WorldSnapshot

    words = "PLANNER SAYS THE ROBOT HAS ARRIVED"
    snap = WorldSnapshot(snapshot_id="s1", captured_at=NOW, pose=Pose2D(x=1.0, y=2.0),
                         pose_meta=FieldMeta(availability=Availability.AVAILABLE, source_stamp=NOW - 0.1, age_s=0.1,
                                             max_age_s=0.5))
    receipts = [_receipt("r1", "speak", words), _receipt("r2", "navigate_to", words)]
    office = Pose2D(x=3.0, y=1.0, yaw=1.57)
    nav = compile_skill_view(contract=_contract(), skill="navigate_to", now=NOW, place="office", target=office,
                             snapshot=snap, receipts=receipts)
    assert nav.role is Role.SKILL and nav.scope == "o1"
    assert [i.item_id for i in nav.of_kind("obligation")] == ["obligation:o1"]  # one subgoal, not the others
    (target,) = nav.of_kind("target")
    assert target.value == {"skill": "navigate_to", "place": "office", "pose": office.model_dump()}
    assert {i.key for i in nav.of_kind("observation")} == {"robot.pose", "robot.controller"}
    assert [i.item_id for i in nav.of_kind("receipt")] == ["r2"]  # earlier attempts of this skill only
    assert nav.of_kind("receipt")[0].value["status"] == "FAILED"
    assert nav.bytes <= SKILL_VIEW_BUDGET.max_bytes
    speak = compile_skill_view(contract=_contract(), skill="speak", now=NOW, snapshot=snap, receipts=receipts)
    assert speak.scope == "o2" and [i.item_id for i in speak.of_kind("receipt")] == ["r1"]
    for view in (nav, speak):
        assert words not in view.as_json()
        assert all(i.provenance is not Provenance.PLANNER for i in view.items)
    # the subgoal is the first open one of its place: the office again, once o1 is done, is o4
    assert compile_skill_view(contract=_contract(), skill="navigate_to", now=NOW, place="dock").scope == "o3"
    assert compile_skill_view(contract=_contract(), skill="navigate_to", now=NOW, place="office",
                              done={"o1"}).scope == "o4"
    # coordinates near a known place are that place's subgoal; elsewhere there is none
    places = {"office": office, "dock": Pose2D(x=0.0, y=0.0)}
    near = Pose2D(x=3.1, y=1.0)
    assert compile_skill_view(contract=_contract(), skill="navigate_to", now=NOW, target=near, places=places).scope == "o1"
    far = Pose2D(x=9.0, y=9.0)
    assert compile_skill_view(contract=_contract(), skill="navigate_to", now=NOW, target=far, places=places).scope == ""
    # a stale pose is withheld, not presented as fact
    later = compile_skill_view(contract=_contract(), skill="navigate_to", now=NOW + 5.0, place="office", snapshot=snap)
    assert "robot.pose" not in {i.key for i in later.items} and later.dropped["expired"] == 1


def test_the_skill_role_admits_grounded_targets_but_no_other_harness_bookkeeping() -> None:
    target = item("t", key="target", kind="target", prov=Provenance.HARNESS, value={"place": "office"}, scope="o1")
    ids = {i.item_id for i in build_view([*pool(), target], role=Role.SKILL, now=NOW, scope="o1").items}
    assert "t" in ids and not ids & {"fail1", "budget"}
    assert "t" not in {i.item_id for i in build_view([*pool(), target], role=Role.VERIFIER, now=NOW).items}
