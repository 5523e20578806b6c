"""Navigation providers in the simulated robot (issue 18): several Nav2 stacks on one body; more cameras.

SimWorld stepped by hand, and SimPorts on its virtual clock, as the ProviderNavigation the
dispatcher routes through; nothing of the project is mocked.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from robot_harness.core.errors import BackendUnavailable, ScenarioError, ToolExecutionError, UsageError
from robot_harness.core.nav_goals import NavGoal, NavGoalKind
from robot_harness.core.ports import BackendEvent
from robot_harness.core.records import Pose2D
from robot_harness.core.routing import ProviderNavigation
from robot_harness.core.scenario import Scenario
from robot_harness.eval.modes import sim_ports
from robot_harness.eval.simports import DISCOVERY_S, SimPorts
from robot_harness.sim import GoalEventType, GoalStatus, SimConfig, SimWorld
from robot_harness.sim.world import COMPUTE_PATH_TO_POSE_ERROR_CODES, NAVIGATOR_INACTIVE_REASON, PlanErrorCode

TWO_STACKS: dict[str, Any] = {"speed": 0.5, "providers": {"fast": {"speed": 2.0}, "slow": {}}}


def world(**kw: Any) -> SimWorld:
    return SimWorld(SimConfig.from_data(kw))


def run_until_done(w: SimWorld, index: int, budget_s: float = 60.0) -> float:
    """Step until goal ``index`` ends; the sim time it ended at (fail past the budget rather than hang)."""
    for _ in range(int(budget_s / 0.02)):
        if w.goal(index).status.terminal:
            return w.t
        w.step(0.02)
    pytest.fail(f"goal {index} still {w.goal(index).status} after {budget_s}s")


# --------------------------------------------------------------------------- the world


@pytest.mark.parametrize("provider, speed", [("", 0.5), ("fast", 2.0), ("slow", 0.5)])
def test_a_goal_walks_at_the_speed_of_the_provider_it_came_through(provider: str, speed: float) -> None:
    w = world(**TWO_STACKS)
    d = w.submit_goal(4.0, 0.0, 0.0, provider=provider)
    assert d.accepted
    ended = run_until_done(w, d.goal_index)
    view = w.goal(d.goal_index)
    assert view.status is GoalStatus.SUCCEEDED and view.provider == provider
    assert ended == pytest.approx(4.0 / speed, abs=0.1)
    assert w.speed_for(provider) == speed


def test_a_providers_reject_fault_hits_only_its_goals_counted_among_its_own() -> None:
    w = world(faults=[{"kind": "reject", "on_goal": 1}],
              providers={"alt": {"faults": [{"kind": "reject", "on_goal": 2}]}})
    sent = [("", 1.0), ("alt", 1.0), ("", 2.0), ("alt", 2.0), ("alt", 3.0)]
    decisions = [w.submit_goal(x, 0.0, 0.0, provider=p) for p, x in sent]
    assert [d.accepted for d in decisions] == [False, True, True, False, True]
    assert [d.goal_index for d in decisions] == [1, 2, 3, 4, 5], "one goal log: the world's index"
    assert [(w.goal(i).provider, w.goal(i).nth) for i in range(1, 6)] == [
        ("", 1), ("alt", 1), ("", 2), ("alt", 2), ("alt", 3)]
    assert (w.received_by(""), w.received_by("alt")) == (2, 3)


def test_a_providers_abort_fault_aborts_its_goal_and_not_the_same_goal_through_another() -> None:
    w = world(providers={"alt": {"faults": [{"kind": "no_path", "on_goal": 1}]}})
    start, target = w.localized_pose, Pose2D(x=2.0, y=0.0)
    assert not w.plan_path(start, target, provider="alt").ok, "alt's planner has no path for its next goal"
    assert w.plan_path(start, target).ok, "the robot's own planner has one"
    alt = w.submit_goal(2.0, 0.0, 0.0, provider="alt")
    run_until_done(w, alt.goal_index)
    view = w.goal(alt.goal_index)
    assert view.status is GoalStatus.ABORTED
    assert view.error_code == COMPUTE_PATH_TO_POSE_ERROR_CODES[PlanErrorCode.NO_VALID_PATH]
    assert w.true_pose.x == pytest.approx(0.0, abs=1e-9), "never moved"
    own = w.submit_goal(2.0, 0.0, 0.0)
    run_until_done(w, own.goal_index)
    assert w.goal(own.goal_index).status is GoalStatus.SUCCEEDED
    again = w.submit_goal(0.0, 0.0, 0.0, provider="alt")
    run_until_done(w, again.goal_index)
    assert w.goal(again.goal_index).status is GoalStatus.SUCCEEDED, "on_goal 1 was alt's first goal only"


def test_a_providers_goal_faults_and_ack_delay_are_its_own() -> None:
    w = world(faults=[{"kind": "stall", "on_goal": 2, "after_s": 0.1}],
              providers={"alt": {"faults": [{"kind": "ack_delay", "on_goal": 1, "delay_s": 4.0},
                                            {"kind": "early_success", "on_goal": 2, "after_s": 0.2}]}})
    own1 = w.submit_goal(1.0, 0.0, 0.0)
    alt1 = w.submit_goal(1.0, 1.0, 0.0, provider="alt")
    assert (w.ack_delay_for(own1.goal_index), w.ack_delay_for(alt1.goal_index)) == (0.0, 4.0)
    run_until_done(w, alt1.goal_index)
    assert w.goal(alt1.goal_index).status is GoalStatus.SUCCEEDED, "world goal 2 is alt's first: no stall"
    alt2 = w.submit_goal(5.0, 5.0, 0.0, provider="alt")
    run_until_done(w, alt2.goal_index)
    assert w.goal(alt2.goal_index).reason == "early_success fault"
    own2 = w.submit_goal(0.0, 0.0, 0.0)
    for _ in range(50):
        w.step(0.02)
    assert w.goal(own2.goal_index).status is GoalStatus.ACTIVE and w.twist.vx == 0.0, "the own second goal stalls"


def test_one_body_a_goal_of_any_provider_preempts_the_running_one() -> None:
    w = world(**TWO_STACKS)
    own = w.submit_goal(5.0, 0.0, 0.0)
    w.step(0.5)
    fast = w.submit_goal(0.0, 3.0, 0.0, provider="fast")
    assert fast.accepted
    assert w.goal(own.goal_index).status is GoalStatus.ABORTED
    assert w.goal(own.goal_index).reason == f"preempted by goal {fast.goal_index}"
    assert w.active_goal is not None and w.active_goal.provider == "fast"
    spin = w.submit_spin(1.0, provider="slow")
    assert w.goal(fast.goal_index).status is GoalStatus.ABORTED and w.active_goal.index == spin.goal_index


def test_navigator_inactive_refuses_only_the_robots_own_navigator() -> None:
    w = world(faults=[{"kind": "navigator_inactive", "at_s": 0.0}], providers={"alt": {}})
    refused = w.submit_goal(1.0, 0.0, 0.0)
    assert not refused.accepted and refused.reason == NAVIGATOR_INACTIVE_REASON
    alt = w.submit_route([Pose2D(x=1.0, y=0.0), Pose2D(x=1.0, y=1.0)], follow=False, provider="alt")
    assert alt.accepted
    run_until_done(w, alt.goal_index)
    assert w.goal(alt.goal_index).status is GoalStatus.SUCCEEDED


def test_without_providers_every_goal_is_the_robots_own_and_its_log_line_is_unchanged() -> None:
    faults = [{"kind": "reject", "on_goal": 2}, {"kind": "external_goal", "at_s": 0.5, "dx": 1.0}]
    plain, declared = world(faults=faults), world(faults=faults, providers={})
    for w in (plain, declared):
        w.submit_goal(2.0, 0.0, 0.0)
        run_until_done(w, 1)
        w.submit_goal(3.0, 0.0, 0.0)  # world goal 3: the external goal was 2, and the own Nav2 counted it
        run_until_done(w, 3)
    assert [e.model_dump_json() for e in plain.events] == [e.model_dump_json() for e in declared.events]
    assert [(e.event, e.goal_index) for e in plain.events][:5] == [
        (GoalEventType.RECEIVED, 1), (GoalEventType.ACCEPTED, 1), (GoalEventType.RECEIVED, 2),
        (GoalEventType.REJECTED, 2), (GoalEventType.SUCCEEDED, 1)]
    assert '"provider"' not in plain.events[0].model_dump_json(), "the serialized line is as it always was"
    assert [plain.goal(i).nth for i in (1, 2, 3)] == [1, 2, 3]


def test_a_providers_events_name_it() -> None:
    w = world(providers={"alt": {}})
    w.submit_goal(1.0, 0.0, 0.0, provider="alt")
    assert {e.provider for e in w.events} == {"alt"}
    assert '"provider":"alt"' in w.events[0].model_dump_json()


@pytest.mark.parametrize("providers, needle", [
    ({"": {}}, "not one ROS name token"),
    ({"a/b": {}}, "not one ROS name token"),
    ({"9lives": {}}, "not one ROS name token"),
    ({"alt": {"faults": [{"kind": "die", "at_s": 1.0}]}}, "providers.alt.faults[0]"),
    ({"alt": {"speed": 0.0}}, "providers.alt.speed"),
])
def test_a_bad_provider_is_a_scenario_error(providers: dict[str, Any], needle: str) -> None:
    with pytest.raises(ScenarioError) as err:
        SimConfig.from_data({"providers": providers})
    assert needle in str(err.value)


def test_an_unknown_provider_is_a_usage_error() -> None:
    w = world(providers={"alt": {}})
    with pytest.raises(UsageError, match="no navigation provider 'other'"):
        w.submit_goal(1.0, 0.0, 0.0, provider="other")
    with pytest.raises(UsageError):
        w.plan_path(w.localized_pose, Pose2D(x=1.0, y=0.0), provider="other")
    assert w.goals_received == 0


# --------------------------------------------------------------------------- SimPorts as a ProviderNavigation


def ports(tmp_path: Path, providers: dict[str, str], **config: Any) -> SimPorts:
    return SimPorts(config=SimConfig.from_data({**TWO_STACKS, **config}), artifacts_dir=tmp_path,
                    navigation_providers=providers)


def result_of(p: SimPorts, goal_id: str, budget_s: float = 60.0) -> BackendEvent:
    start = p.clock.now()
    while p.clock.now() - start < budget_s:
        for ev in p.poll(0.1):
            if ev.goal_id == goal_id and ev.type == "result":
                return ev
    pytest.fail(f"no result for {goal_id} within {budget_s}s")


def test_simports_without_providers_is_no_provider_navigation(tmp_path: Path) -> None:
    p = ports(tmp_path, {})
    assert not isinstance(p, ProviderNavigation)
    assert not hasattr(p, "use") and not hasattr(p, "providers")


def test_simports_sends_through_the_provider_used_and_then_the_first_again(tmp_path: Path) -> None:
    p = ports(tmp_path, {"own": "", "quick": "fast"})
    assert isinstance(p, ProviderNavigation) and p.providers == ("own", "quick")
    p.use("quick")
    t0 = p.clock.now()
    ack = p.send_goal(target=Pose2D(x=4.0, y=0.0), frame_id="map", timeout_s=2.0, goal_id="q" * 32)
    assert ack.accepted
    assert result_of(p, ack.goal_id).status == "succeeded"
    assert p.clock.now() - t0 == pytest.approx(4.0 / 2.0, abs=0.25), "at fast's 2 m/s"
    assert p.lookup("q" * 32, timeout_s=0) == "succeeded"
    ack = p.send_goal(target=Pose2D(x=0.0, y=0.0), frame_id="map", timeout_s=2.0, goal_id="o" * 32)
    assert p.world.goal(2).provider == "", "no use(): the first provider, the robot's own"
    p.use("quick")
    assert p.cancel("o" * 32, timeout_s=1.0) and result_of(p, "o" * 32).status == "canceled"
    ack = p.send_goal(target=Pose2D(x=1.0, y=0.0), frame_id="map", timeout_s=2.0)
    assert p.world.goal(3).provider == "fast", "use() holds until a send, whatever is asked in between"


def test_simports_a_providers_rejection_is_its_own(tmp_path: Path) -> None:
    p = ports(tmp_path, {"own": "", "quick": "fast"}, faults=[{"kind": "reject", "on_goal": 1}])
    ack = p.send_goal(target=Pose2D(x=1.0, y=0.0), frame_id="map", timeout_s=2.0)
    assert not ack.accepted and "reject" in ack.reason
    p.use("quick")
    assert p.send_goal(target=Pose2D(x=1.0, y=0.0), frame_id="map", timeout_s=2.0).accepted


def test_simports_a_namespace_the_robot_does_not_serve_answers_as_an_undiscovered_server(tmp_path: Path) -> None:
    p = ports(tmp_path, {"own": "", "gone": "elsewhere"})
    p.use("gone")
    t0 = p.clock.now()
    with pytest.raises(BackendUnavailable, match="elsewhere/navigate_to_pose is not available"):
        p.send_goal(target=Pose2D(x=1.0, y=0.0), frame_id="map", timeout_s=5.0)
    assert p.clock.now() - t0 == pytest.approx(DISCOVERY_S), "looked for it within the discovery bound"
    p.use("gone")
    ack = p.send_goal(target=Pose2D(x=1.0, y=0.0), frame_id="map", timeout_s=1.0,
                      goal=NavGoal(kind=NavGoalKind.SPIN, spin_dist_rad=1.0))
    assert not ack.accepted and ack.reason == ("no elsewhere/spin action server on the graph: "
                                               "the robot serves no spin now")
    assert p.world.goals_received == 0 and p.sent_goals == []
    with pytest.raises(UsageError):
        p.use("nobody")


def test_eval_routes_with_two_navigation_cards_or_one_under_its_own_namespace(tmp_path: Path) -> None:
    def scenario(cards: dict[str, Any]) -> Scenario:
        return Scenario.model_validate({"goal": "go", "harness": {"providers": cards}})

    two = sim_ports(scenario({"own": {"capability": "navigation"},
                              "alt": {"capability": "navigation", "namespace": "alt"},
                              "cam": {"capability": "camera", "namespace": "camera2/image_raw"}}), tmp_path)
    assert isinstance(two, ProviderNavigation) and two.providers == ("own", "alt")
    one = sim_ports(scenario({"alt": {"capability": "navigation", "namespace": "alt"}}), tmp_path)
    assert isinstance(one, ProviderNavigation) and one.providers == ("alt",)  # driven through that stack alone
    own = sim_ports(scenario({"own": {"capability": "navigation"}}), tmp_path)
    assert not isinstance(own, ProviderNavigation)  # the robot's own Nav2, unrouted, as before providers


# --------------------------------------------------------------------------- a second camera


REAR = "rear/image_raw"


def test_a_second_camera_is_read_once_when_used_and_goes_silent_when_dead(tmp_path: Path) -> None:
    p = SimPorts(config=SimConfig.from_data({"cameras": {REAR: {"rate_hz": 5.0, "faults": [
        {"kind": "camera_dead", "at_s": 3.0}]}}}), artifacts_dir=tmp_path)
    p.advance(1.0)
    p.use_camera(REAR)
    p.capture_image(label="rear")
    p.capture_image(label="front")
    assert [c.camera for c in p.captures] == [REAR, ""], "use_camera holds for one capture"
    assert p.world.camera_live(REAR) and p.world.camera_live()
    p.advance(2.5)
    assert not p.world.camera_live(REAR) and p.world.camera_live(), "only the rear camera died"
    p.use_camera(REAR)
    p.capture_image(label="last frame, still fresh")
    assert p.captures[-1].t <= p.clock.now() - 0.5 + 1e-6, "the frame from before it died"
    p.advance(2.0)
    p.use_camera(REAR)
    with pytest.raises(ToolExecutionError, match="old"):
        p.capture_image(label="rear")
    p.capture_image(label="front")
    p.use_camera("nobody/image_raw")
    with pytest.raises(ToolExecutionError, match="no camera frame"):
        p.capture_image(label="none")


@pytest.mark.parametrize("cameras", [{"camera/image_raw": {}}, {"/rear": {}}, {"rear//image": {}},
                                     {REAR: {"rate_hz": 0.0}}, {REAR: {"faults": [{"kind": "die", "at_s": 1}]}}])
def test_a_bad_camera_is_a_scenario_error(cameras: dict[str, Any]) -> None:
    with pytest.raises(ScenarioError):
        SimConfig.from_data({"cameras": cameras})


def test_the_docs_examples_are_a_valid_sim_config_and_valid_cards() -> None:
    import re

    import yaml

    from robot_harness.core.config import load_harness_config

    text = (Path(__file__).resolve().parents[2] / "docs" / "sim.md").read_text()
    sim, cards = (yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S))
    config = SimConfig.from_data(sim)
    assert set(config.providers) == {"fast", "careful"} and set(config.cameras) == {"rear_camera/image_raw"}
    harness = load_harness_config(overrides=cards)
    navigation = {c.namespace for c in harness.providers.values() if c.capability == "navigation"}
    assert navigation - {""} == set(config.providers), "every navigation card names a stack the sim serves"
