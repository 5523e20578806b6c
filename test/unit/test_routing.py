"""Capability cards and routing (issue 18): the score, its inputs, exclusions, the routed navigation port and
the recovery ladder's provider fallback rung. Pure; the end-to-end fallback on the simulated robot is in
test_plans.py-like mission tests below and scenarios/routing_degraded_provider.yaml (test_scenarios).""" 
from __future__ import annotations

import math

import pytest

from robot_harness.core.config import ProviderCard, RoutingConfig, RoutingWeights, load_harness_config
from robot_harness.core.errors import BackendUnavailable, UsageError
from robot_harness.core.ports import BackendEvent, GoalAck
from robot_harness.core.records import Pose2D
from robot_harness.core.recovery import Failure, FailureKind, RecoveryBudgets, RecoveryPolicy, Rung
from robot_harness.core.routing import RoutedNavigation, route

FAST = ProviderCard(capability="navigation", namespace="", p_success=0.8, latency_s=1.0, cost=1.0, risk=0.1)
SLOW = ProviderCard(capability="navigation", namespace="alt", p_success=0.95, latency_s=3.0, cost=1.0, risk=0.05)
CAMERA = ProviderCard(capability="camera")
CARDS = {"nav_fast": FAST, "nav_slow": SLOW, "cam": CAMERA}


def _by(decision):
    return {c.provider: c for c in decision.candidates}


def test_the_score_is_the_weighted_sum_the_config_names() -> None:
    cfg = RoutingConfig(weights=RoutingWeights(p=1.0, r=0.5, u=0.25, l=0.2, c=0.1, h=0.5), prior_strength=4.0)
    d = route("navigation", CARDS, cfg)
    fast = _by(d)["nav_fast"]
    p = 0.8
    u = math.sqrt(p * (1 - p) / 5.0)
    assert fast.terms["p"] == pytest.approx(p) and fast.terms["u"] == pytest.approx(u)
    assert fast.terms["l"] == pytest.approx(1 / 3) and fast.terms["c"] == pytest.approx(1.0)
    assert fast.score == pytest.approx(1.0 * p - 0.5 * 0.1 - 0.25 * u - 0.2 / 3 - 0.1 * 1.0 - 0.5 * 0.0)
    assert set(_by(d)) == {"nav_fast", "nav_slow"}  # only the capability's providers


def test_the_weights_decide_between_speed_and_reliability() -> None:
    reliable = route("navigation", CARDS, RoutingConfig(weights=RoutingWeights(p=2.0, l=0.0)))
    quick = route("navigation", CARDS, RoutingConfig(weights=RoutingWeights(p=0.0, r=0.0, u=0.0, l=1.0)))
    assert reliable.chosen == "nav_slow" and quick.chosen == "nav_fast"
    assert "ahead of" in reliable.reason


def test_remembered_verified_outcomes_refine_the_cards_prior() -> None:
    cfg = RoutingConfig(weights=RoutingWeights(p=1.0, r=0.0, u=0.0, l=0.0, c=0.0, h=0.0))
    before = route("navigation", CARDS, cfg)
    assert before.chosen == "nav_slow"
    after = route("navigation", CARDS, cfg, outcomes={"nav_slow": (0, 10), "nav_fast": (10, 10)})
    assert after.chosen == "nav_fast"
    assert _by(after)["nav_slow"].terms["p"] == pytest.approx(4 * 0.95 / 14)
    # more outcomes, less uncertainty
    assert _by(after)["nav_fast"].terms["u"] < _by(before)["nav_fast"].terms["u"]


def test_an_excluded_provider_never_acts_and_is_named() -> None:
    d = route("navigation", CARDS, RoutingConfig(), excluded={"nav_slow": "failed this obligation"})
    assert d.chosen == "nav_fast" and _by(d)["nav_slow"].excluded == "failed this obligation"
    assert "nav_slow (failed this obligation)" in d.reason
    none = route("navigation", CARDS, RoutingConfig(), excluded={"nav_slow": "x", "nav_fast": "y"})
    assert none.chosen is None and "excluded" in none.reason


def test_health_and_disabled_cards() -> None:
    sick = {"a": FAST.model_copy(update={"health": 0.0}), "b": FAST}
    assert route("navigation", sick, RoutingConfig()).chosen == "b"
    off = {"a": FAST.model_copy(update={"enabled": False})}
    d = route("navigation", off, RoutingConfig())
    assert d.chosen is None and "no provider" in d.reason


def test_the_decision_does_not_hang_on_the_order_the_cards_are_listed_in() -> None:
    # a journaled configuration comes back with its keys sorted (decision replay): ties go to the first name
    assert route("navigation", {"x": FAST, "y": FAST}, RoutingConfig()).chosen == "x"
    assert route("navigation", {"y": FAST, "x": FAST}, RoutingConfig()).chosen == "x"
    a = route("navigation", {"nav_main": FAST, "nav_backup": SLOW}, RoutingConfig())
    b = route("navigation", {"nav_backup": SLOW, "nav_main": FAST}, RoutingConfig())
    assert a.as_dict() == b.as_dict()


def test_cards_are_validated_like_all_config() -> None:
    with pytest.raises(UsageError):
        load_harness_config(overrides={"providers": {"a": {"capability": "teleport"}}})
    with pytest.raises(UsageError):
        load_harness_config(overrides={"providers": {"a": {"capability": "navigation", "p_success": 1.5}}})
    with pytest.raises(UsageError):
        load_harness_config(overrides={"routing": {"weights": {"p": float("nan")}}})


class _Port:
    def __init__(self, name: str, *, down: bool = False) -> None:
        self.name, self.down = name, down
        self.sent: list[str] = []
        self.events: list[BackendEvent] = []
        self.cancelled: list[str] = []

    def send_goal(self, *, target, frame_id, timeout_s, goal_id="", goal=None) -> GoalAck:
        self.sent.append(goal_id)
        return GoalAck(accepted=True, goal_id=goal_id)

    def lookup(self, goal_id, *, timeout_s):
        if self.down:
            raise BackendUnavailable(f"{self.name} down")
        return "executing" if goal_id in self.sent else None

    def adopt(self, goal_id) -> None:
        pass

    def poll(self, timeout_s):
        out, self.events = self.events, []
        return out

    def cancel(self, goal_id, *, timeout_s) -> bool:
        self.cancelled.append(goal_id)
        return goal_id in self.sent


def test_the_routed_port_sends_through_the_chosen_provider_and_follows_its_goals() -> None:
    a, b = _Port("a"), _Port("b")
    nav = RoutedNavigation({"nav_a": a, "nav_b": b})
    assert nav.providers == ("nav_a", "nav_b")
    nav.send_goal(target=Pose2D(x=1, y=0), frame_id="map", timeout_s=1.0, goal_id="g1")
    nav.use("nav_b")
    nav.send_goal(target=Pose2D(x=1, y=0), frame_id="map", timeout_s=1.0, goal_id="g2")
    nav.send_goal(target=Pose2D(x=1, y=0), frame_id="map", timeout_s=1.0, goal_id="g3")  # `use` holds for one send
    assert a.sent == ["g1", "g3"] and b.sent == ["g2"]
    assert nav.cancel("g2", timeout_s=1.0) and b.cancelled == ["g2"] and a.cancelled == []
    assert nav.lookup("g2", timeout_s=1.0) == "executing"
    b.events.append(BackendEvent(goal_id="g2", type="result", status="succeeded"))
    assert [e.goal_id for e in nav.poll(0.1)] == ["g2"]
    with pytest.raises(UsageError):
        nav.use("nav_c")


def test_a_lookup_of_an_unknown_goal_asks_every_provider() -> None:
    a, b = _Port("a", down=True), _Port("b")
    nav = RoutedNavigation({"nav_a": a, "nav_b": b})
    b.sent.append("adopted")
    assert nav.lookup("adopted", timeout_s=1.0) == "executing"
    assert nav.lookup("nobody", timeout_s=1.0) is None
    with pytest.raises(BackendUnavailable):
        RoutedNavigation({"nav_a": a}).lookup("x", timeout_s=1.0)


def _failure(kind: FailureKind, providers: tuple[str, ...] = ("nav_b",), behaviors: tuple[str, ...] = ()) -> Failure:
    return Failure(failure_id="f", failure_kind=kind, reason="aborted", skill="navigate_to", provider="nav_a",
                   providers=providers, behaviors=behaviors)


def test_the_fallback_rung_comes_first_when_another_provider_may_act() -> None:
    policy = RecoveryPolicy(RecoveryBudgets())
    for kind in (FailureKind.ACTION_FAILED, FailureKind.DISPATCH_REJECTED):
        d = policy.decide(_failure(kind), spent={})
        assert d.rung is Rung.SWITCH, kind
    # but a failure Nav2's behaviours answer (a stuck robot is stuck whichever stack drives it) gets them first
    stuck = policy.decide(_failure(FailureKind.ACTION_FAILED, behaviors=("clear_costmaps",)), spent={})
    assert stuck.rung is Rung.NAV2_BEHAVIOR and Rung.SWITCH in stuck.authorized
    # within its budget: spent, the ladder goes on as before
    spent = policy.decide(_failure(FailureKind.ACTION_FAILED), spent={Rung.SWITCH: 1})
    assert spent.rung is Rung.ADJUST_VIEW and Rung.SWITCH not in spent.authorized


def test_no_fallback_for_an_action_that_may_still_be_moving_or_with_nobody_to_switch_to() -> None:
    policy = RecoveryPolicy(RecoveryBudgets())
    unknown = policy.decide(_failure(FailureKind.ACTION_UNKNOWN), spent={})
    assert unknown.rung is not Rung.SWITCH and Rung.SWITCH not in unknown.authorized
    alone = policy.decide(_failure(FailureKind.ACTION_FAILED, providers=()), spent={})
    assert Rung.SWITCH not in alone.authorized


# -- on the simulated robot: routing, fallback and what is not a provider's failure --------------------------

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import yaml  # noqa: E402

from robot_harness.core.clock import IdGenerator, ManualClock  # noqa: E402
from robot_harness.core.journal import SqliteJournal  # noqa: E402
from robot_harness.core.payloads import RecoveryDecided, RobotActionStarted, ToolResultRecorded, payload_of  # noqa: E402
from robot_harness.core.records import EventType  # noqa: E402
from robot_harness.core.scenario import load_scenario  # noqa: E402
from robot_harness.eval.modes import run_one  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _mission(tmp_path: Path, edit: Any = None) -> tuple[Any, list]:
    data = yaml.safe_load((REPO / "scenarios" / "routing_degraded_provider.yaml").read_text())
    if edit is not None:
        edit(data)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_one(load_scenario(path), "gated", workdir=tmp_path / "w", journal_path=tmp_path / "j.sqlite3")
    j = SqliteJournal(tmp_path / "j.sqlite3", clock=ManualClock(0.0), ids=IdGenerator(None))
    try:
        return result, list(j.events(mission_id=result.mission_id))
    finally:
        j.close()


def _started(events: list) -> list[RobotActionStarted]:
    return [payload_of(e, RobotActionStarted) for e in events if e.type is EventType.ROBOT_ACTION_STARTED]


def test_a_degraded_stack_is_routed_around_and_every_decision_is_journaled(tmp_path: Path) -> None:
    result, events = _mission(tmp_path)
    assert result.status == "SUCCEEDED", result.summary
    started = _started(events)
    assert [s.intent.provider for s in started] == ["nav_main", "nav_backup", "nav_backup"]
    for s in started:  # each with both candidates and their score terms
        assert {c["provider"] for c in s.intent.routing["candidates"]} == {"nav_main", "nav_backup"}
        assert all({"p", "r", "u", "l", "c", "h"} <= set(c["terms"]) for c in s.intent.routing["candidates"])
    # the fallback: the same call, on the other stack, through recovery's rung and its budget
    (decided,) = [payload_of(e, RecoveryDecided) for e in events if e.type is EventType.RECOVERY_DECIDED]
    assert decided.decision.rung is Rung.SWITCH and decided.failure.provider == "nav_main"
    assert decided.failure.providers == ("nav_backup",)
    assert started[1].intent.arguments == started[0].intent.arguments
    excluded = {c["provider"]: c.get("excluded", "") for c in started[1].intent.routing["candidates"]}
    assert excluded["nav_main"].startswith("failed this obligation")
    # the next navigation: nav_main's failure this mission lowers its estimate below nav_backup's
    terms = {c["provider"]: c["terms"] for c in started[2].intent.routing["candidates"]}
    assert terms["nav_main"]["tries"] == 1 and terms["nav_main"]["wins"] == 0


def test_without_a_second_card_the_degraded_stack_fails_the_mission(tmp_path: Path) -> None:
    def one_card(data: dict[str, Any]) -> None:
        del data["harness"]["providers"]["nav_backup"]
    result, events = _mission(tmp_path, one_card)
    assert result.status != "SUCCEEDED"
    assert all(not s.intent.provider for s in _started(events))  # one card: no routing, as before providers


def test_a_repeated_request_is_not_a_providers_failure_and_moves_nothing(tmp_path: Path) -> None:
    def repeat(data: dict[str, Any]) -> None:
        data["robot"]["faults"] = []
        turns = data["planner"]["turns"]
        turns.insert(1, {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "office_storage"}}]})
    result, events = _mission(tmp_path, repeat)
    started = _started(events)
    assert [s.intent.arguments.get("place") for s in started] == ["office_storage", "dock"]  # never sent twice
    dup = [payload_of(e, ToolResultRecorded) for e in events if e.type is EventType.TOOL_RESULT_RECORDED
           and payload_of(e, ToolResultRecorded).content.get("code") == "duplicate_dispatch"]
    assert len(dup) == 1
    for e in events:
        if e.type is EventType.RECOVERY_DECIDED:
            f = payload_of(e, RecoveryDecided).failure
            assert not f.providers and f.provider == "", "a duplicate refusal is not the provider's failure"
    assert result.status == "SUCCEEDED", result.summary


def test_a_card_namespace_must_be_a_ros_name() -> None:
    with pytest.raises(UsageError, match="namespace 'back up' is not an action namespace"):
        load_harness_config(overrides={"providers": {"a": {"capability": "navigation", "namespace": "back up"}}})
    with pytest.raises(UsageError, match="is not a topic name"):
        load_harness_config(overrides={"providers": {"c": {"capability": "camera", "namespace": "rear cam/image"}}})
    ok = load_harness_config(overrides={"providers": {"c": {"capability": "camera", "namespace": "/rear_cam/image_raw"},
                                                      "n": {"capability": "navigation", "namespace": "alt/nav2"}}})
    assert ok.providers["n"].namespace == "alt/nav2"


def test_one_navigation_card_under_its_own_namespace_is_driven_there() -> None:
    from robot_harness.core.routing import navigation_providers

    own = ProviderCard(capability="navigation")
    alt = ProviderCard(capability="navigation", namespace="/alt/")
    assert navigation_providers({"own": own}) == {}
    assert navigation_providers({"alt": alt}) == {"alt": "alt"}
    assert navigation_providers({"own": own, "alt": alt, "cam": CAMERA}) == {"own": "", "alt": "alt"}
