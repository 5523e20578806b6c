"""SimWorld on its own: kinematics, goal bookkeeping and every fault's effect.

The world is stepped by hand, so these tests are exact and take milliseconds.
"""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from robot_harness.core.errors import ScenarioError, UsageError
from robot_harness.core.records import Pose2D
from robot_harness.sim import (
    ARRIVAL_TOLERANCE_M,
    GoalEventType,
    GoalStatus,
    SimConfig,
    SimWorld,
    parse_faults,
)
from robot_harness.sim.world import DEFAULT_COMPLETION_CLAIM, EXTERNAL_GOAL_NOTE

REPO = Path(__file__).resolve().parents[2]


def make_world(*faults: dict[str, Any], **kw: Any) -> SimWorld:
    kw.setdefault("speed", 1.0)
    return SimWorld(SimConfig.from_data({"faults": list(faults), **kw}))


def run(world: SimWorld, seconds: float, dt: float = 0.02) -> None:
    for _ in range(int(round(seconds / dt))):
        world.step(dt)


def run_until_done(world: SimWorld, index: int, budget_s: float = 30.0) -> None:
    """Step until goal ``index`` ends; fail (rather than hang) past the budget."""
    steps = int(budget_s / 0.02)
    for _ in range(steps):
        if world.goal(index).status.terminal:
            return
        world.step(0.02)
    pytest.fail(f"goal {index} still {world.goal(index).status} after {budget_s}s")


# --------------------------------------------------------------------------- kinematics and goals


def test_reaches_goal_position_then_yaw() -> None:
    w = make_world()
    d = w.submit_goal(2.0, 1.0, 1.2)
    assert d.accepted and d.goal_index == 1
    run_until_done(w, 1)
    g = w.goal(1)
    assert g.status is GoalStatus.SUCCEEDED
    assert w.true_pose.distance_to(Pose2D(x=2.0, y=1.0)) <= ARRIVAL_TOLERANCE_M
    assert w.true_pose.yaw == pytest.approx(1.2, abs=1e-6)
    assert w.twist.vx == 0.0 and w.twist.wz == 0.0
    assert [e.event for e in w.events] == [
        GoalEventType.RECEIVED,
        GoalEventType.ACCEPTED,
        GoalEventType.SUCCEEDED,
    ]
    assert w.active_goal is None


def test_walks_at_configured_speed() -> None:
    w = make_world(speed=2.0)
    w.submit_goal(10.0, 0.0, 0.0)
    run(w, 1.0)
    assert w.true_pose.x == pytest.approx(2.0, abs=1e-6)
    assert w.twist.vx == pytest.approx(2.0)
    assert w.goal(1).distance_remaining == pytest.approx(8.0, abs=1e-6)


@pytest.mark.parametrize("target", [(-1.0, 0.0, 0.0), (0.0, 0.3, 0.0), (0.05, -0.05, -2.0)])
def test_goals_behind_or_beside_are_reached_without_orbiting(target: tuple[float, float, float]) -> None:
    w = make_world(speed=3.0, yaw_rate=1.0)
    w.submit_goal(*target)
    run_until_done(w, 1, budget_s=10.0)
    assert w.goal(1).status is GoalStatus.SUCCEEDED
    assert w.true_pose.distance_to(Pose2D(x=target[0], y=target[1])) <= ARRIVAL_TOLERANCE_M


def test_one_large_step_equals_many_small_ones() -> None:
    a, b = make_world(), make_world()
    a.submit_goal(1.0, 1.0, 0.5)
    b.submit_goal(1.0, 1.0, 0.5)
    a.step(4.0)
    run(b, 4.0)
    assert a.true_pose == b.true_pose
    assert a.goal(1).status is GoalStatus.SUCCEEDED


def test_battery_drains_per_metre_walked() -> None:
    w = make_world(battery_start=0.8, battery_drain_per_m=0.01)
    w.submit_goal(2.0, 0.0, 0.0)
    run_until_done(w, 1)
    assert w.odometer_m == pytest.approx(2.0, abs=ARRIVAL_TOLERANCE_M)
    assert w.battery == pytest.approx(0.8 - 0.01 * w.odometer_m)


def test_new_goal_preempts_running_one() -> None:
    w = make_world()
    w.submit_goal(5.0, 0.0, 0.0)
    run(w, 0.5)
    d = w.submit_goal(0.0, 1.0, 0.0)
    assert d.accepted and d.goal_index == 2 and w.goals_received == 2
    first = w.goal(1)
    assert first.status is GoalStatus.ABORTED and "preempted by goal 2" in first.reason
    assert w.active_goal is not None and w.active_goal.index == 2
    run_until_done(w, 2)
    assert w.goal(2).status is GoalStatus.SUCCEEDED
    assert w.true_pose.distance_to(Pose2D(x=0.0, y=1.0)) <= ARRIVAL_TOLERANCE_M


def test_cancel_stops_the_robot() -> None:
    w = make_world()
    w.submit_goal(5.0, 0.0, 0.0)
    run(w, 0.5)
    assert not w.cancel(goal_index=7), "cancelling another goal must not touch the active one"
    assert w.cancel(goal_index=1)
    where = w.true_pose
    run(w, 1.0)
    assert w.goal(1).status is GoalStatus.CANCELED
    assert w.true_pose == where
    assert not w.cancel(), "nothing left to cancel"
    assert w.events[-1].event is GoalEventType.CANCELED


def test_events_are_drained_once() -> None:
    w = make_world()
    w.submit_goal(1.0, 0.0, 0.0)
    first = w.drain_events()
    assert [e.event for e in first] == [GoalEventType.RECEIVED, GoalEventType.ACCEPTED]
    assert w.drain_events() == []
    run_until_done(w, 1)
    assert [e.event for e in w.drain_events()] == [GoalEventType.SUCCEEDED]
    ev = w.events[-1]
    assert ev.goal_index == 1 and ev.target == Pose2D(x=1.0, y=0.0) and ev.true_pose == w.true_pose


def test_misuse_raises_usage_errors() -> None:
    w = make_world()
    with pytest.raises(UsageError):
        w.step(-0.1)
    with pytest.raises(UsageError):
        w.goal(1)


# --------------------------------------------------------------------------- faults


def test_reject_on_goal_n_leaves_running_goal_alone() -> None:
    w = make_world({"kind": "reject", "on_goal": 2})
    assert w.submit_goal(3.0, 0.0, 0.0).accepted
    run(w, 0.2)
    d = w.submit_goal(0.0, 3.0, 0.0)
    assert not d.accepted and d.goal_index == 2 and "reject" in d.reason
    assert w.goal(2).status is GoalStatus.REJECTED
    assert w.goal(1).status is GoalStatus.ACTIVE
    assert w.submit_goal(1.0, 0.0, 0.0).accepted, "only the 2nd goal is rejected"
    assert w.goals_received == 3


def test_reject_at_s_rejects_everything_after() -> None:
    w = make_world({"kind": "reject", "at_s": 1.0})
    assert w.submit_goal(0.1, 0.0, 0.0).accepted
    run(w, 1.0)
    assert not w.submit_goal(0.2, 0.0, 0.0).accepted
    assert not w.submit_goal(0.3, 0.0, 0.0).accepted


def test_early_success_reports_success_far_from_goal() -> None:
    w = make_world({"kind": "early_success", "on_goal": 1})
    w.submit_goal(5.0, 0.0, 0.0)
    run(w, 0.28)
    assert w.goal(1).status is GoalStatus.ACTIVE
    run(w, 0.04)
    g = w.goal(1)
    assert g.status is GoalStatus.SUCCEEDED and g.ended_t == pytest.approx(0.3, abs=0.021)
    where = w.true_pose
    assert where.distance_to(g.target) > 4.0
    run(w, 1.0)
    assert w.true_pose == where, "the robot stops when the goal 'succeeds'"


def test_stall_keeps_goal_active_with_constant_distance() -> None:
    w = make_world({"kind": "stall", "on_goal": 1, "after_s": 0.5})
    w.submit_goal(5.0, 0.0, 0.0)
    run(w, 0.6)
    where, dist = w.true_pose, w.goal(1).distance_remaining
    assert where.x == pytest.approx(0.5, abs=0.03)
    run(w, 10.0)
    g = w.goal(1)
    assert g.status is GoalStatus.ACTIVE and g.feedback_enabled
    assert w.true_pose == where and g.distance_remaining == dist
    assert w.twist.vx == 0.0
    assert w.cancel(1) and w.goal(1).status is GoalStatus.CANCELED
    w.submit_goal(1.0, 0.0, 0.0)
    run_until_done(w, 2)
    assert w.goal(2).status is GoalStatus.SUCCEEDED, "the stall belonged to goal 1 only"


def test_no_feedback_only_silences_its_goal() -> None:
    w = make_world({"kind": "no_feedback", "on_goal": 1})
    w.submit_goal(1.0, 0.0, 0.0)
    assert not w.goal(1).feedback_enabled
    run_until_done(w, 1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED
    assert w.true_pose.distance_to(Pose2D(x=1.0, y=0.0)) <= ARRIVAL_TOLERANCE_M
    w.submit_goal(0.0, 0.0, 0.0)
    assert w.goal(2).feedback_enabled


def test_localization_jump_leaves_truth_off_goal_while_navigator_succeeds() -> None:
    w = make_world({"kind": "localization_jump", "on_goal": 1, "dx": 1.0, "dy": -0.5}, speed=2.0)
    w.submit_goal(4.0, 0.0, 0.0)
    run(w, 0.2)
    assert w.localized_pose == w.true_pose
    run_until_done(w, 1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED
    assert w.localized_pose.distance_to(Pose2D(x=4.0, y=0.0)) <= ARRIVAL_TOLERANCE_M
    assert w.true_pose.distance_to(Pose2D(x=3.0, y=0.5)) <= ARRIVAL_TOLERANCE_M
    assert w.published_pose().pose == w.localized_pose


def test_relocalize_moves_only_the_estimate_and_the_robot_then_drives_on_it() -> None:
    w = make_world({"kind": "localization_jump", "at_s": 5.0, "dx": 0.5}, speed=2.0, start={"x": 1.0, "y": 2.0, "yaw": 0.3})
    w.submit_goal(3.0, 2.0, 0.0)
    run(w, 0.3)
    truth, events, odometer = w.true_pose, len(w.events), w.odometer_m
    w.relocalize(-1.0, 0.5, math.pi / 2)
    # The estimate jumps to the given pose; the robot, its odometry and the goal log do not move.
    est = w.localized_pose
    assert (est.x, est.y, est.yaw) == (pytest.approx(-1.0), pytest.approx(0.5), pytest.approx(math.pi / 2))
    assert w.true_pose == truth and w.odometer_m == odometer and len(w.events) == events
    assert w.published_pose().pose == est
    assert w.goal(1).status is GoalStatus.ACTIVE
    # The controller drives on the new estimate: the goal succeeds where the estimate says it is.
    run_until_done(w, 1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED
    end = w.localized_pose
    assert end.distance_to(Pose2D(x=3.0, y=2.0)) <= ARRIVAL_TOLERANCE_M
    assert end.yaw == pytest.approx(0.0, abs=1e-6)
    assert w.true_pose.distance_to(end) > 1.0, "only the estimate was moved: the truth ends elsewhere"
    # A later localization_jump adds its offset on top of the correction, in the map frame.
    before = w.localized_pose
    run(w, 5.0)
    assert w.localized_pose.x == pytest.approx(before.x + 0.5) and w.localized_pose.y == pytest.approx(before.y)
    # Relocalizing onto the truth gives the identity back.
    t = w.true_pose
    w.relocalize(t.x, t.y, t.yaw)
    assert w.localized_pose == w.true_pose


def test_localization_jump_at_s_without_goal() -> None:
    w = make_world({"kind": "localization_jump", "at_s": 0.5})
    run(w, 0.48)
    assert w.localized_pose.x == 0.0
    run(w, 0.04)
    assert w.localized_pose.x == pytest.approx(3.0) and w.true_pose.x == 0.0


def test_frozen_pose_repeats_pose_and_stamp() -> None:
    w = make_world({"kind": "frozen_pose", "on_goal": 1, "after_s": 0.5})
    w.submit_goal(3.0, 0.0, 0.0)
    run(w, 0.3)
    live = w.published_pose()
    assert live.stamp_t == pytest.approx(0.3) and live.pose == w.localized_pose
    run(w, 0.3)
    frozen = w.published_pose()
    run(w, 1.0)
    assert w.published_pose() == frozen
    assert frozen.stamp_t == pytest.approx(0.5, abs=0.021)
    assert w.true_pose.x > frozen.pose.x + 0.9, "the robot keeps walking on odometry"
    assert w.pose_frozen


def test_pose_noise_is_seeded_and_only_on_the_published_pose() -> None:
    def samples(seed: int) -> list[Pose2D]:
        w = make_world({"kind": "pose_noise", "at_s": 0.0, "std_xy": 0.1}, seed=seed)
        w.step(0.02)
        out = [w.published_pose().pose for _ in range(400)]
        assert w.localized_pose == Pose2D(x=0.0, y=0.0, yaw=0.0)
        return out

    a, b, c = samples(1), samples(1), samples(2)
    assert a == b and a != c
    xs = [p.x for p in a]
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    assert abs(mean) < 0.03 and 0.07 < std < 0.13
    quiet = make_world({"kind": "pose_noise", "on_goal": 1})
    assert quiet.published_pose().pose == quiet.localized_pose, "no noise before the trigger"


def test_die_stops_everything() -> None:
    w = make_world({"kind": "die", "on_goal": 1, "after_s": 0.4})
    w.submit_goal(5.0, 0.0, 0.0)
    run(w, 0.38)
    assert not w.dead
    run(w, 0.04)
    assert w.dead
    where, n_events = w.true_pose, len(w.events)
    run(w, 2.0)
    assert w.true_pose == where and w.twist.vx == 0.0
    assert w.goal(1).status is GoalStatus.ACTIVE, "a dead robot never reports a result"
    assert not w.submit_goal(0.0, 0.0, 0.0).accepted
    assert not w.cancel()
    assert len(w.events) == n_events


def test_at_s_goal_fault_affects_goals_from_then_on() -> None:
    w = make_world({"kind": "stall", "at_s": 0.5})
    w.submit_goal(5.0, 0.0, 0.0)
    run(w, 1.0)
    assert w.true_pose.x == pytest.approx(0.5, abs=0.03)
    assert w.goal(1).status is GoalStatus.ACTIVE


def test_ack_delay_is_reported_per_goal_and_changes_nothing_else() -> None:
    w = make_world({"kind": "ack_delay", "on_goal": 2, "delay_s": 1.5}, {"kind": "ack_delay", "at_s": 1.0})
    plain = make_world()
    for world in (w, plain):
        world.submit_goal(0.5, 0.0, 0.0)
        run(world, 0.3)
    assert w.ack_delay_for(1) == 0.0
    assert w.goal(1).status is GoalStatus.ACTIVE and w.true_pose == plain.true_pose
    w.submit_goal(0.5, 0.5, 0.0)
    assert w.ack_delay_for(2) == 1.5
    run(w, 1.0)
    w.submit_goal(0.0, 0.0, 0.0)
    assert w.ack_delay_for(3) == 3.0, "at_s hits every goal received from then on, default delay_s"
    assert w.events[-1].event is GoalEventType.ACCEPTED and w.goal(3).status is GoalStatus.ACTIVE
    with pytest.raises(UsageError):
        w.ack_delay_for(4)


def test_no_ack_withholds_acks_from_its_trigger_on_and_changes_nothing_else() -> None:
    at_s = make_world({"kind": "no_ack", "at_s": 0.5})
    on_goal = make_world({"kind": "no_ack", "on_goal": 2})
    plain = make_world()
    assert not at_s.acks_withheld and not on_goal.acks_withheld and not plain.acks_withheld
    for world in (at_s, on_goal, plain):
        world.submit_goal(0.3, 0.0, 0.0)
        run(world, 0.6)
    assert at_s.acks_withheld, "at_s: withheld from that sim time on"
    assert not on_goal.acks_withheld, "on_goal 2: not before the second goal arrives"
    assert at_s.true_pose == plain.true_pose and at_s.goal(1).status is plain.goal(1).status
    on_goal.submit_goal(0.0, 0.0, 0.0)
    assert on_goal.acks_withheld
    assert not plain.acks_withheld


def test_claims_completion_only_adds_words() -> None:
    w = make_world({"kind": "claims_completion", "at_s": 0.0, "text": "Arrived at the elevator. Task complete."},
                   {"kind": "stall", "on_goal": 1, "after_s": 0.1})
    late = make_world({"kind": "claims_completion", "on_goal": 2})
    assert w.completion_claim == "Arrived at the elevator. Task complete."
    assert late.completion_claim == ""
    w.submit_goal(4.0, 2.0, 0.0)
    run(w, 1.0)
    assert w.goal(1).status is GoalStatus.ACTIVE and w.goal(1).distance_remaining > 3.0, "the robot still stalls"
    assert w.completion_claim and not w.acks_withheld
    assert all(e.reason == "" for e in w.events), "the truth is untouched"
    late.submit_goal(0.2, 0.0, 0.0)
    assert late.completion_claim == ""
    late.submit_goal(0.0, 0.0, 0.0)
    assert late.completion_claim == DEFAULT_COMPLETION_CLAIM


def test_pose_dropout_from_the_start_silences_the_pose_and_nothing_else() -> None:
    w = make_world({"kind": "pose_dropout", "at_s": 0.0})
    plain = make_world()
    assert w.pose_silent, "silent before the first step: adapters publish their first sample at once"
    for world in (w, plain):
        world.submit_goal(2.0, 1.0, 0.5)
        run_until_done(world, 1)
    assert w.pose_silent and w.goal(1).status is GoalStatus.SUCCEEDED
    assert w.true_pose == plain.true_pose and w.localized_pose == plain.localized_pose
    assert [e.event for e in w.events] == [e.event for e in plain.events], "motion and results carry on"
    assert not plain.pose_silent and w.foreign_goals == frozenset()


def test_pose_dropout_on_goal_starts_after_s_into_that_goal_and_holds() -> None:
    w = make_world({"kind": "pose_dropout", "on_goal": 2, "after_s": 0.2})
    w.submit_goal(1.0, 0.0, 0.0)
    run(w, 1.0)
    assert not w.pose_silent, "the first goal is not affected"
    w.submit_goal(3.0, 0.0, 0.0)
    run(w, 0.16)
    assert not w.pose_silent
    run(w, 0.06)
    assert w.pose_silent
    run_until_done(w, 2)
    assert w.pose_silent and w.goal(2).status is GoalStatus.SUCCEEDED
    (default,) = parse_faults([{"kind": "pose_dropout", "on_goal": 1}])
    assert default.delay_s() == 0.3


def test_external_goal_preempts_the_running_goal_and_drives_the_robot_off() -> None:
    w = make_world({"kind": "external_goal", "at_s": 0.5, "dx": 0.0, "dy": -2.0}, speed=2.0)
    w.submit_goal(5.0, 0.0, 0.0)
    run(w, 0.48)
    assert w.goals_received == 1 and w.foreign_goals == frozenset()
    run(w, 0.04)
    at_fire = w.goal(2)
    assert w.foreign_goals == {2} and at_fire.status is GoalStatus.ACTIVE
    assert at_fire.target.x == pytest.approx(1.0, abs=0.05) and at_fire.target.y == pytest.approx(-2.0, abs=1e-9)
    assert at_fire.target.yaw == pytest.approx(0.0), "the robot's yaw at the time"
    mine = w.goal(1)
    assert mine.status is GoalStatus.ABORTED and mine.reason == "preempted by goal 2"
    run_until_done(w, 2)
    assert w.true_pose.distance_to(at_fire.target) <= ARRIVAL_TOLERANCE_M
    assert w.goals_received == 2 and w.foreign_goals == {2}, "fired once"
    events = [(e.goal_index, e.event) for e in w.events]
    assert events == [(1, GoalEventType.RECEIVED), (1, GoalEventType.ACCEPTED), (2, GoalEventType.RECEIVED),
                      (1, GoalEventType.ABORTED), (2, GoalEventType.ACCEPTED), (2, GoalEventType.SUCCEEDED)]
    assert [e.reason for e in w.events if e.event is GoalEventType.RECEIVED] == ["", EXTERNAL_GOAL_NOTE]


def test_external_goal_on_an_idle_robot_is_from_the_true_pose_and_obeys_other_faults() -> None:
    w = make_world({"kind": "localization_jump", "at_s": 0.0, "dx": 1.0},
                   {"kind": "external_goal", "at_s": 0.1, "dx": 0.5})
    run(w, 0.2)
    assert w.goal(1).target == Pose2D(x=0.5, y=0.0, yaw=0.0), "from the truth, not from the localized pose"
    assert w.foreign_goals == {1}
    refused = make_world({"kind": "reject", "at_s": 0.0}, {"kind": "external_goal", "at_s": 0.1, "dx": 1.0})
    run(refused, 0.2)
    assert refused.goal(1).status is GoalStatus.REJECTED and refused.foreign_goals == {1}
    dead = make_world({"kind": "die", "at_s": 0.1}, {"kind": "external_goal", "at_s": 0.2, "dx": 1.0})
    run(dead, 0.4)
    assert dead.goals_received == 0 and dead.foreign_goals == frozenset(), "a dead robot takes no goal"


# --------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("fault", "needle"),
    [
        ({"kind": "teleport", "on_goal": 1}, "teleport"),
        ({"kind": "stall", "on_goal": 1, "dx": 1.0}, "dx"),
        ({"kind": "stall"}, "exactly one trigger"),
        ({"kind": "stall", "on_goal": 1, "at_s": 2.0}, "exactly one trigger"),
        ({"kind": "stall", "on_goal": 0}, "on_goal"),
        ({"kind": "die", "at_s": 1.0, "after_s": -1.0}, "after_s"),
        ({"kind": "reject", "on_goal": 1, "after_s": 0.5}, "after_s"),
        ({"kind": "pose_noise", "on_goal": 1, "std_xy": "lots"}, "std_xy"),
        ({"kind": "ack_delay", "on_goal": 1, "delay_s": 0.0}, "delay_s"),
        ({"kind": "ack_delay", "on_goal": 1, "delay_s": -2.0}, "delay_s"),
        ({"kind": "ack_delay", "delay_s": 1.0}, "exactly one trigger"),
        ({"kind": "ack_delay", "on_goal": 1, "at_s": 0.5}, "exactly one trigger"),
        ({"kind": "ack_delay", "on_goal": 1, "after_s": 0.5}, "after_s"),
        ({"kind": "no_ack"}, "exactly one trigger"),
        ({"kind": "no_ack", "at_s": 0.0, "after_s": 1.0}, "after_s"),
        ({"kind": "claims_completion", "at_s": 0.0, "text": ""}, "text"),
        ({"kind": "claims_completion", "on_goal": 1, "dx": 1.0}, "dx"),
        ({"kind": "pose_dropout"}, "exactly one trigger"),
        ({"kind": "pose_dropout", "at_s": 0.0, "dx": 1.0}, "dx"),
        ({"kind": "external_goal", "on_goal": 1}, "external_goal needs"),
        ({"kind": "external_goal", "at_s": 1.0, "after_s": 0.5}, "after_s"),
        ({"kind": "external_goal", "at_s": 1.0, "dx": "far"}, "dx"),
    ],
)
def test_bad_fault_config_raises_scenario_error(fault: dict[str, Any], needle: str) -> None:
    with pytest.raises(ScenarioError) as info:
        SimConfig.from_data({"faults": [fault]})
    assert needle in str(info.value)
    assert info.value.details["errors"]
    with pytest.raises(ScenarioError):
        parse_faults([fault])


def test_the_scenario_schema_knows_exactly_the_worlds_fault_kinds() -> None:
    import typing

    from robot_harness.core.scenario import FAULT_KINDS
    from robot_harness.sim.world import Fault

    classes = typing.get_args(typing.get_args(Fault)[0])
    assert sorted(FAULT_KINDS) == sorted(c.model_fields["kind"].default for c in classes)


def test_bad_config_fields_raise() -> None:
    with pytest.raises(ScenarioError, match="speed"):
        SimConfig.from_data({"speed": 0.0})
    with pytest.raises(ScenarioError, match="battery_start"):
        SimConfig.from_data({"battery_start": 1.5})
    with pytest.raises(ScenarioError, match="wheels"):
        SimConfig.from_data({"wheels": 4})
    with pytest.raises(ValidationError):
        SimConfig.model_validate({"faults": [{"kind": "nope", "on_goal": 1}]})


def test_faults_parse_from_json_with_defaults() -> None:
    faults = parse_faults('[{"kind": "localization_jump", "on_goal": 2}, {"kind": "reject", "at_s": 1}]')
    jump, reject = faults
    assert (jump.dx, jump.dy, jump.delay_s()) == (3.0, 0.0, 0.3)
    assert reject.kind == "reject" and reject.at_s == 1.0
    (ack,) = parse_faults('[{"kind": "ack_delay", "on_goal": 1}]')
    assert ack.kind == "ack_delay" and ack.delay_s == 3.0
    with pytest.raises(ScenarioError):
        parse_faults("not json")


def test_config_defaults() -> None:
    c = SimConfig()
    assert (c.speed, c.yaw_rate, c.pose_rate_hz, c.odom_rate_hz, c.camera_rate_hz) == (0.5, 1.5, 20, 50, 2)
    assert (c.battery_start, c.battery_drain_per_m, c.seed, c.faults) == (0.9, 0.002, 0, ())


# --------------------------------------------------------------------------- camera and purity


def test_camera_image_depends_on_true_pose() -> None:
    w = make_world()
    a = w.camera_image(64, 48)
    assert len(a) == 64 * 48 * 3
    w.submit_goal(1.0, 0.5, 2.0)
    run_until_done(w, 1)
    assert w.camera_image(64, 48) != a


def test_sim_package_does_not_import_rclpy() -> None:
    code = "import sys, robot_harness.sim; assert 'rclpy' not in sys.modules, 'rclpy was imported'"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
