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
from robot_harness.sim.world import (
    COMPUTE_PATH_TO_POSE_ERROR_CODES,
    COST_FREE,
    COST_INSCRIBED,
    COST_LETHAL,
    COST_NO_INFORMATION,
    DEFAULT_COMPLETION_CLAIM,
    DEFAULT_POSE_VARIANCE,
    EXTERNAL_GOAL_NOTE,
    NAVIGATOR_INACTIVE_REASON,
    PLAN_FAILURE_ABORT_S,
    PlanErrorCode,
)

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


# --------------------------------------------------------------------------- the map and its planner

WALL = {"x_min": -0.5, "y_min": -9.0, "x_max": 0.5, "y_max": 9.5}
"""A wall across a 20 m map with a gap at the bottom (and a squeeze at the top): every crossing detours."""


def map_world(*faults: dict[str, Any], obstacles: list[dict[str, float]] | None = None, **kw: Any) -> SimWorld:
    kw.setdefault("start", {"x": -9.0, "y": 0.0, "yaw": 0.0})
    m = {"resolution": 0.1, "origin": {"x": -10.0, "y": -10.0}, "width_m": 20.0, "height_m": 20.0,
         "obstacles": [WALL] if obstacles is None else obstacles, "inflation_m": 0.3}
    m.update(kw.pop("map", {}))
    return make_world(*faults, map=m, **kw)


def polyline_samples(points: tuple[tuple[float, float], ...], step: float = 0.01) -> list[tuple[float, float]]:
    out = []
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        n = max(1, int(math.hypot(x1 - x0, y1 - y0) / step))
        out += [(x0 + (x1 - x0) * k / n, y0 + (y1 - y0) * k / n) for k in range(n + 1)]
    return out


def test_without_a_map_everything_is_free_and_paths_are_straight() -> None:
    w = make_world()
    assert not w.has_map and w.in_map(1e6, -1e6)
    assert w.cost_at(3.0, -2.0) == COST_FREE and w.cost_at(1e6, 1e6) == COST_FREE
    plan = w.plan_path(Pose2D(x=0.0, y=0.0), Pose2D(x=3.0, y=4.0, yaw=1.0))
    assert plan.ok and plan.error.number == 0 and plan.message == ""
    assert plan.points == ((0.0, 0.0), (3.0, 4.0)) and plan.length_m == pytest.approx(5.0)
    assert plan.poses[0].yaw == pytest.approx(math.atan2(4.0, 3.0)) and plan.poses[-1].yaw == pytest.approx(1.0)
    assert w.events == () and w.goals_received == 0, "a dry run changes nothing"
    nan = w.plan_path(Pose2D(x=0.0, y=0.0), Pose2D(x=math.nan, y=0.0))
    assert nan.error is PlanErrorCode.GOAL_OUTSIDE_MAP and "not a finite position" in nan.message
    assert w.cost_at(math.inf, 0.0) == COST_NO_INFORMATION and not w.in_map(0.0, math.nan)


def test_costs_follow_the_obstacles_and_their_inflation() -> None:
    w = map_world()
    assert w.has_map
    assert w.cost_at(0.0, 0.0) == COST_LETHAL
    assert w.cost_at(0.45, 9.45) == COST_LETHAL, "the cells the box overlaps"
    assert w.cost_at(0.75, 0.0) == COST_INSCRIBED and w.cost_at(-0.75, 0.0) == COST_INSCRIBED
    assert w.cost_at(0.95, 0.0) == COST_FREE, "0.45 m from the wall: beyond the 0.3 m inflation"
    assert w.cost_at(-9.0, 0.0) == COST_FREE and w.cost_at(9.95, 9.95) == COST_FREE
    assert w.cost_at(10.05, 0.0) == COST_NO_INFORMATION and not w.in_map(10.05, 0.0)
    assert w.cost_at(-10.0, -10.0) == COST_FREE and w.in_map(-10.0, -10.0), "the origin is the first cell's corner"


def test_a_path_around_an_obstacle_is_longer_than_the_straight_line_and_stays_free() -> None:
    w = map_world()
    start, goal = Pose2D(x=-9.0, y=0.0), Pose2D(x=9.0, y=0.0, yaw=0.5)
    plan = w.plan_path(start, goal)
    assert plan.ok, plan.message
    assert plan.points[0] == (-9.0, 0.0) and plan.points[-1] == (9.0, 0.0) and plan.poses[-1].yaw == 0.5
    assert plan.length_m > start.distance_to(goal) + 5.0
    length = sum(math.dist(a, b) for a, b in zip(plan.points, plan.points[1:]))
    assert plan.length_m == pytest.approx(length)
    assert all(w.cost_at(x, y) < COST_INSCRIBED for x, y in polyline_samples(plan.points))
    assert min(y for _, y in plan.points) < -9.0, "the short way round, through the gap at the bottom"


def test_the_robot_walks_the_planned_path_around_the_obstacle() -> None:
    w = map_world(speed=2.0)
    plan = w.plan_path(w.localized_pose, Pose2D(x=3.0, y=0.0))
    assert w.submit_goal(3.0, 0.0, 0.0).accepted
    assert w.goal(1).distance_remaining == pytest.approx(plan.length_m)
    assert w.goal(1).plan_error is PlanErrorCode.NONE
    trail = []
    for _ in range(int(60.0 / 0.02)):
        if w.goal(1).status.terminal:
            break
        w.step(0.02)
        trail.append(w.true_pose)
    assert w.goal(1).status is GoalStatus.SUCCEEDED
    assert w.true_pose.distance_to(Pose2D(x=3.0, y=0.0)) <= ARRIVAL_TOLERANCE_M
    assert all(w.cost_at(p.x, p.y) < COST_INSCRIBED for p in trail), "never into the wall or its inflation"
    assert w.odometer_m == pytest.approx(plan.length_m, abs=0.05)


def test_a_goal_in_an_obstacle_is_goal_occupied_and_a_sent_one_is_aborted_without_moving() -> None:
    w = map_world()
    for x in (0.0, 0.7):  # in the wall, in its inflation
        plan = w.plan_path(w.localized_pose, Pose2D(x=x, y=0.0))
        assert plan.error is PlanErrorCode.GOAL_OCCUPIED and plan.error.number == 206
        assert plan.poses == () and plan.length_m == 0.0 and f"({x:.2f}, 0.00)" in plan.message
    assert w.submit_goal(0.0, 0.0, 0.0).accepted, "Nav2's navigator accepts it; its planner fails"
    assert w.goal(1).plan_error is PlanErrorCode.GOAL_OCCUPIED
    run(w, PLAN_FAILURE_ABORT_S - 0.1)
    assert w.goal(1).status is GoalStatus.ACTIVE and w.true_pose == Pose2D(x=-9.0, y=0.0)
    run(w, 0.12)
    g = w.goal(1)
    assert g.status is GoalStatus.ABORTED and g.ended_t == pytest.approx(PLAN_FAILURE_ABORT_S, abs=0.021)
    assert "planning failed (GOAL_OCCUPIED)" in g.reason and "occupied" in g.reason
    assert w.true_pose == Pose2D(x=-9.0, y=0.0) and w.odometer_m == 0.0
    assert w.submit_goal(-8.0, 0.0, 0.0).accepted
    run_until_done(w, 2)
    assert w.goal(2).status is GoalStatus.SUCCEEDED, "the next feasible goal runs as usual"


def test_outside_the_map_and_a_start_in_collision() -> None:
    w = map_world()
    here = w.localized_pose
    off = w.plan_path(here, Pose2D(x=12.0, y=0.0))
    assert off.error is PlanErrorCode.GOAL_OUTSIDE_MAP and off.error.number == 204
    assert w.plan_path(Pose2D(x=-11.0, y=0.0), here).error is PlanErrorCode.START_OUTSIDE_MAP
    stuck = w.plan_path(Pose2D(x=-0.7, y=0.0), here)
    assert stuck.error is PlanErrorCode.START_OCCUPIED and "cost 253" in stuck.message
    w.submit_goal(12.0, 0.0, 0.0)
    run(w, PLAN_FAILURE_ABORT_S + 0.1)
    assert w.goal(1).status is GoalStatus.ABORTED and "GOAL_OUTSIDE_MAP" in w.goal(1).reason


def test_a_goal_cut_off_from_the_start_is_no_valid_path_without_a_search() -> None:
    room = [{"x_min": 2.0, "y_min": 2.0, "x_max": 6.0, "y_max": 2.2}, {"x_min": 2.0, "y_min": 5.8, "x_max": 6.0, "y_max": 6.0},
            {"x_min": 2.0, "y_min": 2.0, "x_max": 2.2, "y_max": 6.0}, {"x_min": 5.8, "y_min": 2.0, "x_max": 6.0, "y_max": 6.0}]
    w = map_world(obstacles=room)
    plan = w.plan_path(w.localized_pose, Pose2D(x=4.0, y=4.0))
    assert plan.error is PlanErrorCode.NO_VALID_PATH and plan.error.number == 208
    assert plan.expansions == 0 and "cut off" in plan.message
    assert w.plan_path(Pose2D(x=3.0, y=3.0), Pose2D(x=5.0, y=5.0)).ok, "inside the room is connected"


def test_the_search_budget_ends_in_timeout() -> None:
    w = map_world()
    plan = w.plan_path(w.localized_pose, Pose2D(x=9.0, y=0.0), max_expansions=1)
    assert plan.error is PlanErrorCode.TIMEOUT and plan.error.number == 207 and plan.expansions == 1
    assert w.plan_path(w.localized_pose, Pose2D(x=9.0, y=0.0), max_expansions=100).ok
    with pytest.raises(UsageError):
        w.plan_path(w.localized_pose, Pose2D(x=9.0, y=0.0), max_expansions=-1)


def test_a_200_by_200_grid_plans_well_under_50_ms() -> None:
    import time

    w = map_world()
    assert w.config.map is not None and w.config.map.size_cells == (200, 200)
    best, plan = math.inf, None
    for goal in ((9.0, 0.0), (9.0, 9.0), (9.0, -9.9)):
        for _ in range(3):  # the best of three: a loaded machine slows a run, never speeds one
            t0 = time.perf_counter()
            plan = w.plan_path(Pose2D(x=-9.0, y=0.0), Pose2D(x=goal[0], y=goal[1]))
            best = min(best, time.perf_counter() - t0)
        assert plan is not None and plan.ok and plan.expansions < 100
        best_for_goal, best = best, math.inf
        assert best_for_goal < 0.05, f"plan to {goal} took {best_for_goal * 1e3:.1f} ms"


def _reference_length(w: SimWorld, start: tuple[int, int], goal: tuple[int, int]) -> float | None:
    """Plain Dijkstra on cell centres (8-connected, no corner cutting), in metres: what the planner must match."""
    import heapq

    m = w.config.map
    assert m is not None
    nx, ny = m.size_cells

    def free(i: int, j: int) -> bool:
        return 0 <= i < nx and 0 <= j < ny and w.cost_at(m.origin.x + (i + 0.5) * m.resolution,
                                                          m.origin.y + (j + 0.5) * m.resolution) < COST_INSCRIBED

    dist = {start: 0.0}
    heap = [(0.0, start)]
    while heap:
        d, (i, j) = heapq.heappop(heap)
        if (i, j) == goal:
            return d * m.resolution
        if d > dist[(i, j)]:
            continue
        for di in (-1, 0, 1):
            for dj in (-1, 0, 1):
                if (di or dj) and free(i + di, j + dj) and (not (di and dj) or (free(i + di, j) and free(i, j + dj))):
                    nd = d + math.hypot(di, dj)
                    if nd < dist.get((i + di, j + dj), math.inf):
                        dist[(i + di, j + dj)] = nd
                        heapq.heappush(heap, (nd, (i + di, j + dj)))
    return None


@pytest.mark.parametrize("seed", range(8))
def test_paths_are_shortest_on_the_grid_and_free(seed: int) -> None:
    import random

    rng = random.Random(seed)
    obstacles = []
    for _ in range(rng.randint(3, 10)):
        x, y = rng.uniform(-2.5, 2.5), rng.uniform(-2.5, 2.5)
        obstacles.append({"x_min": x, "y_min": y, "x_max": x + rng.uniform(0.05, 1.5), "y_max": y + rng.uniform(0.05, 1.5)})
    w = make_world(start={"x": -2.95, "y": -2.95}, map={
        "resolution": 0.1, "origin": {"x": -3.0, "y": -3.0}, "width_m": 6.0, "height_m": 6.0,
        "obstacles": obstacles, "inflation_m": rng.choice([0.0, 0.1, 0.2])})
    m = w.config.map
    assert m is not None
    centre = lambda c: Pose2D(x=-3.0 + (c[0] + 0.5) * 0.1, y=-3.0 + (c[1] + 0.5) * 0.1)  # noqa: E731
    free = [(i, j) for i in range(60) for j in range(60) if w.cost_at(centre((i, j)).x, centre((i, j)).y) < COST_INSCRIBED]
    for _ in range(6):
        a, b = rng.choice(free), rng.choice(free)
        plan = w.plan_path(centre(a), centre(b))
        want = _reference_length(w, a, b)
        if want is None:
            assert plan.error is PlanErrorCode.NO_VALID_PATH
            continue
        assert plan.ok and plan.length_m == pytest.approx(want, abs=1e-9)
        assert all(w.cost_at(x, y) < COST_INSCRIBED for x, y in polyline_samples(plan.points, 0.02))


def test_relocalizing_replans_the_running_goal() -> None:
    w = map_world(speed=1.0)
    w.submit_goal(-9.0, 5.0, 0.0)
    run(w, 0.5)
    w.relocalize(-0.7, 0.0, 0.0)  # the estimate says the robot stands in the wall's inflation
    g = w.goal(1)
    assert g.plan_error is PlanErrorCode.START_OCCUPIED and g.status is GoalStatus.ACTIVE
    run(w, PLAN_FAILURE_ABORT_S + 0.05)
    assert w.goal(1).status is GoalStatus.ABORTED and "START_OCCUPIED" in w.goal(1).reason
    t = w.true_pose
    w.relocalize(t.x, t.y, t.yaw)
    w.submit_goal(5.0, 0.0, 0.0)
    w.relocalize(t.x, t.y + 1.0, t.yaw)
    assert w.goal(2).plan_error is PlanErrorCode.NONE, "a feasible estimate gets a new path"
    assert w.goal(2).distance_remaining == pytest.approx(
        w.plan_path(w.localized_pose, Pose2D(x=5.0, y=0.0)).length_m)


def test_the_error_code_table_is_kilteds_compute_path_to_pose() -> None:
    assert {c.value: n for c, n in COMPUTE_PATH_TO_POSE_ERROR_CODES.items()} == {
        "NONE": 0, "UNKNOWN": 200, "INVALID_PLANNER": 201, "TF_ERROR": 202, "START_OUTSIDE_MAP": 203,
        "GOAL_OUTSIDE_MAP": 204, "START_OCCUPIED": 205, "GOAL_OCCUPIED": 206, "TIMEOUT": 207, "NO_VALID_PATH": 208}
    assert set(COMPUTE_PATH_TO_POSE_ERROR_CODES) == set(PlanErrorCode)


# --------------------------------------------------------------------------- readiness faults


def test_no_path_at_s_fails_every_plan_from_then_on_even_without_a_map() -> None:
    w = make_world({"kind": "no_path", "at_s": 1.0})
    goal = Pose2D(x=1.0, y=0.0)
    assert w.plan_path(w.localized_pose, goal).ok
    run(w, 1.0)
    plan = w.plan_path(w.localized_pose, goal)
    assert plan.error is PlanErrorCode.NO_VALID_PATH and "no_path fault" in plan.message
    assert w.submit_goal(1.0, 0.0, 0.0).accepted
    run(w, PLAN_FAILURE_ABORT_S + 0.05)
    g = w.goal(1)
    assert g.status is GoalStatus.ABORTED and "NO_VALID_PATH" in g.reason and w.true_pose.x == 0.0


def test_no_path_in_a_region_spares_goals_elsewhere() -> None:
    w = map_world({"kind": "no_path", "at_s": 0.0, "region": {"x_min": 4.0, "y_min": -1.0, "x_max": 6.0, "y_max": 1.0}})
    here = w.localized_pose
    assert w.plan_path(here, Pose2D(x=5.0, y=0.0)).error is PlanErrorCode.NO_VALID_PATH
    assert w.plan_path(here, Pose2D(x=7.0, y=0.0)).ok
    assert w.plan_path(here, Pose2D(x=0.0, y=0.0)).error is PlanErrorCode.GOAL_OCCUPIED, "the map is checked first"


def test_no_path_on_goal_covers_that_goal_and_its_dry_runs() -> None:
    w = make_world({"kind": "no_path", "on_goal": 2})
    goal = Pose2D(x=0.5, y=0.0)
    assert w.plan_path(w.localized_pose, goal).ok, "the next goal is the first"
    w.submit_goal(0.5, 0.0, 0.0)
    run_until_done(w, 1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED
    assert w.plan_path(w.localized_pose, goal).error is PlanErrorCode.NO_VALID_PATH, "the dry run for goal 2"
    w.submit_goal(0.0, 0.0, 0.0)
    assert w.goal(2).plan_error is PlanErrorCode.NO_VALID_PATH
    run(w, PLAN_FAILURE_ABORT_S + 0.05)
    assert w.goal(2).status is GoalStatus.ABORTED
    assert w.plan_path(w.localized_pose, goal).ok, "goal 3 is unaffected"


def test_navigator_inactive_from_the_start_refuses_every_goal_before_it_counts() -> None:
    w = make_world({"kind": "navigator_inactive", "at_s": 0.0})
    assert not w.navigator_active, "inactive before the first step"
    d = w.submit_goal(1.0, 0.0, 0.0)
    assert not d.accepted and d.goal_index == 0 and d.reason == NAVIGATOR_INACTIVE_REASON
    assert w.goals_received == 0
    (ev,) = w.drain_events()
    assert ev.event is GoalEventType.REJECTED and ev.goal_index == 0 and ev.reason == NAVIGATOR_INACTIVE_REASON
    run(w, 5.0)
    assert not w.navigator_active and w.true_pose == Pose2D(x=0.0, y=0.0)


def test_navigator_inactive_later_aborts_the_running_goal_and_for_s_brings_it_back() -> None:
    w = make_world({"kind": "navigator_inactive", "at_s": 0.5, "for_s": 1.0})
    w.submit_goal(5.0, 0.0, 0.0)
    run(w, 0.48)
    assert w.navigator_active and w.goal(1).status is GoalStatus.ACTIVE
    run(w, 0.04)
    g = w.goal(1)
    assert not w.navigator_active and g.status is GoalStatus.ABORTED and "bt_navigator deactivated" in g.reason
    where = w.true_pose
    assert not w.submit_goal(1.0, 0.0, 0.0).accepted
    run(w, 1.0)
    assert w.navigator_active and w.true_pose == where
    assert w.submit_goal(1.0, 0.0, 0.0).accepted and w.goals_received == 2


def test_navigator_inactive_on_goal_starts_after_s_into_that_goal() -> None:
    w = make_world({"kind": "navigator_inactive", "on_goal": 1})
    assert w.navigator_active
    w.submit_goal(5.0, 0.0, 0.0)
    run(w, 0.28)
    assert w.navigator_active
    run(w, 0.04)
    assert not w.navigator_active and w.goal(1).status is GoalStatus.ABORTED


def test_pose_covariance_default_noise_and_high_covariance() -> None:
    plain = make_world()
    assert plain.pose_covariance == DEFAULT_POSE_VARIANCE
    w = make_world({"kind": "high_covariance", "at_s": 1.0, "std_xy": 0.8, "std_yaw": 0.4})
    assert w.pose_covariance == DEFAULT_POSE_VARIANCE
    w.submit_goal(2.0, 0.0, 0.0)
    run(w, 1.0)
    vx, vy, vyaw = w.pose_covariance
    assert vx == pytest.approx(DEFAULT_POSE_VARIANCE[0] + 0.64) and vy == vx
    assert vyaw == pytest.approx(DEFAULT_POSE_VARIANCE[2] + 0.16)
    assert w.published_pose().pose == w.localized_pose, "only the reported uncertainty changes"
    run_until_done(w, 1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED
    noisy = make_world({"kind": "pose_noise", "at_s": 0.0, "std_xy": 0.1, "std_yaw": 0.05},
                       {"kind": "high_covariance", "at_s": 0.0})
    noisy.step(0.02)
    vx, _, vyaw = noisy.pose_covariance
    assert vx == pytest.approx(DEFAULT_POSE_VARIANCE[0] + 0.01 + 1.0)
    assert vyaw == pytest.approx(DEFAULT_POSE_VARIANCE[2] + 0.0025 + 0.25)
    late = make_world({"kind": "high_covariance", "on_goal": 1, "after_s": 0.5})
    late.submit_goal(3.0, 0.0, 0.0)
    run(late, 0.4)
    assert late.pose_covariance == DEFAULT_POSE_VARIANCE
    run(late, 0.12)
    assert late.pose_covariance[0] > 1.0


@pytest.mark.parametrize(
    ("sim", "needle"),
    [
        ({"map": {"width_m": 10, "height_m": 10, "resolution": 0.0}}, "resolution"),
        ({"map": {"width_m": -1, "height_m": 10}}, "width_m"),
        ({"map": {"height_m": 10}}, "width_m"),
        ({"map": {"width_m": 10, "height_m": 10, "origin": {"x": float("inf"), "y": 0}}}, "origin.x"),
        ({"map": {"width_m": float("nan"), "height_m": 10}}, "width_m"),
        ({"map": {"width_m": 10, "height_m": 10, "resolution": 20}}, "larger than the map"),
        ({"map": {"width_m": 100, "height_m": 100, "resolution": 0.1}}, "coarser resolution"),
        ({"map": {"width_m": 10, "height_m": 10, "inflation_m": -0.1}}, "inflation_m"),
        ({"map": {"width_m": 10, "height_m": 10, "cells": 4}}, "cells"),
        ({"map": {"width_m": 10, "height_m": 10, "obstacles": [{"x_min": 1, "y_min": 1, "x_max": 1, "y_max": 2}]}},
         "x_min < x_max"),
        ({"map": {"width_m": 10, "height_m": 10, "obstacles": [{"x_min": 1, "y_min": 1, "x_max": 2}]}}, "y_max"),
        ({"map": {"width_m": 10, "height_m": 10, "obstacles": [{"x_min": 11, "y_min": 1, "x_max": 12, "y_max": 2}]}},
         "obstacles[0] lies wholly outside the map"),
        ({"start": {"x": 1.5, "y": 1.5}, "map": {"width_m": 10, "height_m": 10,
                                                 "obstacles": [{"x_min": 1, "y_min": 1, "x_max": 2, "y_max": 2}]}},
         "inside map.obstacles[0]"),
        ({"start": {"x": -1.0, "y": 1.0}, "map": {"width_m": 10, "height_m": 10}}, "outside the map"),
    ],
)
def test_bad_map_config_raises_scenario_error(sim: dict[str, Any], needle: str) -> None:
    with pytest.raises(ScenarioError) as info:
        SimConfig.from_data(sim)
    assert needle in str(info.value)


def test_an_obstacle_partly_off_the_map_is_clipped() -> None:
    w = make_world(start={"x": 1.0, "y": 1.0},
                   map={"width_m": 4, "height_m": 4, "inflation_m": 0.0,
                        "obstacles": [{"x_min": 3.0, "y_min": -5.0, "x_max": 9.0, "y_max": 2.0}]})
    assert w.cost_at(3.5, 0.05) == COST_LETHAL and w.cost_at(3.5, 2.05) == COST_FREE
    assert w.cost_at(2.95, 1.0) == COST_FREE, "no inflation declared"
    assert w.plan_path(w.localized_pose, Pose2D(x=3.5, y=3.5)).ok


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
        ({"kind": "no_path"}, "exactly one trigger"),
        ({"kind": "no_path", "at_s": 0.0, "after_s": 1.0}, "after_s"),
        ({"kind": "no_path", "at_s": 0.0, "region": {"x_min": 1, "y_min": 0, "x_max": 0, "y_max": 1}}, "x_min < x_max"),
        ({"kind": "no_path", "at_s": 0.0, "region": [0, 0, 1, 1]}, "region"),
        ({"kind": "navigator_inactive", "at_s": 0.0, "for_s": 0.0}, "for_s"),
        ({"kind": "navigator_inactive", "on_goal": 1, "dx": 1.0}, "dx"),
        ({"kind": "high_covariance", "at_s": 0.0, "std_xy": 0.0}, "std_xy"),
        ({"kind": "high_covariance", "at_s": 0.0, "std_yaw": -1.0}, "std_yaw"),
        ({"kind": "high_covariance"}, "exactly one trigger"),
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
    assert c.map is None
    (np, ni, hc) = parse_faults([{"kind": "no_path", "at_s": 0}, {"kind": "navigator_inactive", "at_s": 0},
                                 {"kind": "high_covariance", "on_goal": 1}])
    assert np.region is None and ni.for_s is None and (hc.std_xy, hc.std_yaw, hc.delay_s()) == (1.0, 0.5, 0.3)


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
