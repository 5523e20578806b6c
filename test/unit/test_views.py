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
