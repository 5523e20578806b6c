"""Capability cards and routing (issue 18): the score, its inputs, exclusions, the routed navigation port and
the recovery ladder's provider fallback rung. Pure; the end-to-end fallback on the simulated robot is in
test_routing_missions.py."""
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


def test_equal_scores_go_to_the_card_listed_first() -> None:
    assert route("navigation", {"x": FAST, "y": FAST}, RoutingConfig()).chosen == "x"
    assert route("navigation", {"y": FAST, "x": FAST}, RoutingConfig()).chosen == "y"


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
