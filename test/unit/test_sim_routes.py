"""SimWorld's Nav2 routes, behaviours, costmap clears and the skip_waypoint / stuck faults.

The world is stepped by hand, so every number here is exact; each test takes milliseconds.
"""
from __future__ import annotations

import math
from typing import Any

import pytest

from robot_harness.core.errors import ScenarioError, UsageError
from robot_harness.core.nav_goals import NavGoalKind, WaypointState
from robot_harness.core.records import Pose2D
from robot_harness.sim import (
    BACKUP_COLLISION_AHEAD,
    BACKUP_INVALID_INPUT,
    BACKUP_TIMEOUT,
    FOLLOW_PATH_FAILED_TO_MAKE_PROGRESS,
    FOLLOW_WAYPOINTS_STOP_ON_MISSED_WAYPOINT,
    FOLLOW_WAYPOINTS_UNKNOWN,
    NAVIGATE_TO_POSE_REFUSED_MSG,
    NAVIGATE_TO_POSE_UNKNOWN,
    NAVIGATOR_INACTIVE_REASON,
    PLAN_FAILURE_ABORT_S,
    SPIN_TIMEOUT,
    STUCK_ABORT_S,
    STUCK_ERROR_MSG,
    GoalEventType,
    GoalStatus,
    PlanErrorCode,
    SimConfig,
    SimWorld,
    parse_faults,
)

# An L: east to (2, 0), north to (2, 2), west to (0, 2). The straight line from (2, 0) to (0, 2) passes
# (1, 1), 1.41 m from (2, 2): a robot that skips the corner never comes near it.
L_ROUTE = (Pose2D(x=2.0, y=0.0, yaw=-1.5), Pose2D(x=2.0, y=2.0, yaw=0.5), Pose2D(x=0.0, y=2.0, yaw=3.0))
CORNER = L_ROUTE[1]

# A wall across x = 3..3.4 (inflated 0.3 m) from y = -2 to 2, on a 10 x 6 m map from (-2, -3).
WALL_MAP = {"resolution": 0.1, "origin": {"x": -2.0, "y": -3.0}, "width_m": 10.0, "height_m": 6.0,
            "obstacles": [{"x_min": 3.0, "y_min": -3.0, "x_max": 3.4, "y_max": 3.0}], "inflation_m": 0.3}


def make_world(*faults: dict[str, Any], **kw: Any) -> SimWorld:
    kw.setdefault("speed", 1.0)
    return SimWorld(SimConfig.from_data({"faults": list(faults), **kw}))


class Track:
    """Steps a world until a goal ends, keeping the true pose of every step (what really happened)."""

    def __init__(self, world: SimWorld) -> None:
        self.world = world
        self.poses: list[tuple[float, Pose2D]] = [(world.t, world.true_pose)]

    def run(self, seconds: float) -> None:
        for _ in range(int(round(seconds / 0.02))):
            self.world.step(0.02)
            self.poses.append((self.world.t, self.world.true_pose))

    def until_done(self, index: int, budget_s: float = 60.0) -> None:
        for _ in range(int(budget_s / 0.02)):
            if self.world.goal(index).status.terminal:
                return
            self.world.step(0.02)
            self.poses.append((self.world.t, self.world.true_pose))
        pytest.fail(f"goal {index} still {self.world.goal(index).status} after {budget_s}s")

    def closest(self, p: Pose2D) -> float:
        return min(q.distance_to(p) for _, q in self.poses)


def states(world: SimWorld, index: int) -> list[WaypointState]:
    return [wp.state for wp in world.goal(index).waypoints]


# --------------------------------------------------------------------------- NavigateThroughPoses


def test_through_poses_passes_every_waypoint_in_order_and_ends_at_the_last_yaw() -> None:
    w = make_world()
    d = w.submit_route(L_ROUTE, follow=False)
    assert d.accepted and d.goal_index == 1
    v = w.goal(1)
    assert v.kind is NavGoalKind.NAVIGATE_THROUGH_POSES and v.target == L_ROUTE[-1] and v.poses == L_ROUTE
    assert (v.current_waypoint, v.poses_remaining) == (0, 3)
    assert v.distance_remaining == pytest.approx(6.0)  # through every pose still ahead, not just the first
    track = Track(w)
    track.run(2.5)
    assert (w.goal(1).current_waypoint, w.goal(1).poses_remaining) == (1, 2)
    track.until_done(1)
    v = w.goal(1)
    assert (v.status, v.error_code, v.error_msg, v.poses_remaining) == (GoalStatus.SUCCEEDED, 0, "", 0)
    reached = [wp.reached_t for wp in v.waypoints]
    assert all(t is not None for t in reached) and reached == sorted(reached) and len(set(reached)) == 3
    assert states(w, 1) == [WaypointState.COMPLETED] * 3
    assert w.true_pose.distance_to(L_ROUTE[-1]) < 0.03 and w.true_pose.yaw == pytest.approx(3.0)
    # Only the last pose's yaw is reached: the robot never turned to waypoint 0's (-1.5, facing south).
    assert min(abs(q.yaw - (-1.5)) for _, q in track.poses) > 1.0
    assert [e.event for e in w.events] == [GoalEventType.RECEIVED, GoalEventType.ACCEPTED, GoalEventType.SUCCEEDED]


def test_follow_waypoints_stops_at_each_pose_yaw() -> None:
    w = make_world()
    w.submit_route(L_ROUTE, follow=True)
    track = Track(w)
    track.until_done(1)
    v = w.goal(1)
    assert v.kind is NavGoalKind.FOLLOW_WAYPOINTS
    assert (v.status, v.error_code, v.current_waypoint) == (GoalStatus.SUCCEEDED, 0, 2)
    assert states(w, 1) == [WaypointState.COMPLETED] * 3
    for wp in L_ROUTE:  # at each pose, facing its yaw, before going on
        assert any(q.distance_to(wp) < 0.03 and abs(q.yaw - wp.yaw) < 1e-6 for _, q in track.poses), wp


def test_a_new_goal_preempts_a_route_and_its_pending_waypoints_fail() -> None:
    w = make_world()
    w.submit_route(L_ROUTE, follow=False)
    Track(w).run(2.5)
    assert w.submit_goal(0.0, 0.0, 0.0).accepted
    v = w.goal(1)
    assert (v.status, v.reason) == (GoalStatus.ABORTED, "preempted by goal 2")
    assert states(w, 1) == [WaypointState.COMPLETED, WaypointState.FAILED, WaypointState.FAILED]


def test_bad_routes_are_caller_mistakes() -> None:
    w = make_world()
    with pytest.raises(UsageError):
        w.submit_route([], follow=False)
    with pytest.raises(UsageError):
        w.submit_route([Pose2D(x=math.nan, y=0.0)], follow=True)
    assert w.goals_received == 0


# --------------------------------------------------------------------------- skip_waypoint


@pytest.mark.parametrize("follow", [False, True])
def test_a_silent_skip_reports_the_waypoint_done_though_the_robot_never_went_there(follow: bool) -> None:
    w = make_world({"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1})
    w.submit_route(L_ROUTE, follow=follow)
    track = Track(w)
    track.until_done(1)
    v = w.goal(1)
    assert (v.status, v.error_code) == (GoalStatus.SUCCEEDED, 0)
    assert states(w, 1) == [WaypointState.COMPLETED] * 3  # the lie: nothing says it was skipped
    assert v.waypoints[1].reached_t is None
    assert track.closest(CORNER) > 0.5
    assert v.waypoints[0].reached_t is not None and v.waypoints[2].reached_t is not None


def test_a_reported_skip_in_through_poses_is_skipped_and_the_goal_succeeds() -> None:
    w = make_world({"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1, "reported": True})
    w.submit_route(L_ROUTE, follow=False)
    assert w.goal(1).poses_remaining == 2  # the navigator dropped it at once
    track = Track(w)
    track.until_done(1)
    v = w.goal(1)
    assert v.status is GoalStatus.SUCCEEDED
    assert states(w, 1) == [WaypointState.COMPLETED, WaypointState.SKIPPED, WaypointState.COMPLETED]
    assert (v.waypoints[1].error_code, v.waypoints[1].reached_t) == (0, None)
    assert track.closest(CORNER) > 0.5


@pytest.mark.parametrize("stop_on_failure", [True, False])
def test_a_reported_skip_in_follow_waypoints_is_a_missed_waypoint(stop_on_failure: bool) -> None:
    w = make_world({"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1, "reported": True},
                   stop_on_failure=stop_on_failure)
    w.submit_route(L_ROUTE, follow=True)
    track = Track(w)
    track.until_done(1)
    v = w.goal(1)
    missed = v.waypoints[1]
    assert (missed.state, missed.error_code, missed.reached_t) == (WaypointState.FAILED, NAVIGATE_TO_POSE_UNKNOWN, None)
    assert track.closest(CORNER) > 0.5
    if stop_on_failure:
        assert (v.status, v.error_code) == (GoalStatus.ABORTED, FOLLOW_WAYPOINTS_STOP_ON_MISSED_WAYPOINT)
        assert v.error_msg.startswith("Failed to process waypoint 1 in waypoint list")
        assert v.waypoints[2].state is WaypointState.PENDING and v.waypoints[2].reached_t is None
        assert w.true_pose.distance_to(L_ROUTE[0]) < 0.03  # it stopped where the follower gave up
    else:
        assert (v.status, v.error_code) == (GoalStatus.SUCCEEDED, 0)
        assert v.waypoints[2].state is WaypointState.COMPLETED and v.waypoints[2].reached_t is not None


def test_a_timed_skip_drops_the_waypoint_being_driven_to() -> None:
    w = make_world({"kind": "skip_waypoint", "at_s": 2.5, "waypoint": 1})
    w.submit_route(L_ROUTE, follow=False)
    track = Track(w)
    track.until_done(1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED and w.goal(1).waypoints[1].reached_t is None
    assert track.closest(CORNER) > 0.3


def test_the_last_waypoint_cannot_be_skipped() -> None:
    with pytest.raises(ScenarioError, match="waypoint"):
        parse_faults([{"kind": "skip_waypoint", "on_goal": 1, "waypoint": -1}])
    with pytest.raises(ScenarioError, match="waypoint"):
        parse_faults([{"kind": "skip_waypoint", "on_goal": 1}])
    # A fault naming the last waypoint leaves the route alone: a live planner may send a shorter route than the
    # scenario foresaw, and the world never stops on it.
    w = make_world({"kind": "skip_waypoint", "on_goal": 1, "waypoint": 2})
    w.submit_route(L_ROUTE, follow=False)
    Track(w).until_done(1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED and all(v.reached_t is not None for v in w.goal(1).waypoints)
    # A timed fault leaves a route too short for it alone.
    w = make_world({"kind": "skip_waypoint", "at_s": 0.0, "waypoint": 1})
    w.submit_route(L_ROUTE[:2], follow=True)
    Track(w).until_done(1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED and w.goal(1).waypoints[1].reached_t is not None


def test_skip_waypoint_leaves_navigate_to_pose_alone() -> None:
    w = make_world({"kind": "skip_waypoint", "on_goal": 1, "waypoint": 0})
    w.submit_goal(1.0, 0.0, 0.0)
    Track(w).until_done(1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED and w.true_pose.distance_to(Pose2D(x=1.0, y=0.0)) < 0.03


# --------------------------------------------------------------------------- legs without a path


def test_a_through_poses_leg_into_an_obstacle_aborts_the_route_without_moving() -> None:
    w = make_world(map=WALL_MAP)
    route = [Pose2D(x=1.0, y=0.0), Pose2D(x=3.2, y=0.0), Pose2D(x=5.0, y=0.0)]
    w.submit_route(route, follow=False)
    assert w.goal(1).plan_error is PlanErrorCode.GOAL_OCCUPIED
    Track(w).until_done(1)
    v = w.goal(1)
    assert (v.status, v.error_code) == (GoalStatus.ABORTED, 306)  # ComputePathThroughPoses GOAL_OCCUPIED
    assert "occupied" in v.error_msg and v.ended_t == pytest.approx(PLAN_FAILURE_ABORT_S, abs=0.03)
    assert states(w, 1) == [WaypointState.FAILED] * 3
    assert w.odometer_m == 0.0


def test_a_through_poses_route_around_the_wall_plans_each_leg() -> None:
    w = make_world(map=WALL_MAP)
    route = [Pose2D(x=1.0, y=0.0), Pose2D(x=5.0, y=0.0)]  # the wall runs the whole height: cut off
    w.submit_route(route, follow=False)
    Track(w).until_done(1)
    assert (w.goal(1).status, w.goal(1).error_code) == (GoalStatus.ABORTED, 308)  # NO_VALID_PATH


@pytest.mark.parametrize("stop_on_failure", [True, False])
def test_a_follow_waypoints_leg_into_an_obstacle_is_missed_then_stop_on_failure_decides(stop_on_failure: bool) -> None:
    w = make_world(map=WALL_MAP, stop_on_failure=stop_on_failure)
    route = [Pose2D(x=1.0, y=0.0), Pose2D(x=3.2, y=0.0), Pose2D(x=1.0, y=1.0, yaw=1.0)]
    w.submit_route(route, follow=True)
    Track(w).until_done(1)
    v = w.goal(1)
    missed = v.waypoints[1]
    assert (missed.state, missed.error_code) == (WaypointState.FAILED, 206)  # ComputePathToPose GOAL_OCCUPIED
    assert "occupied" in missed.error_msg and missed.reached_t is None
    assert v.waypoints[0].state is WaypointState.COMPLETED
    if stop_on_failure:
        assert (v.status, v.error_code) == (GoalStatus.ABORTED, FOLLOW_WAYPOINTS_STOP_ON_MISSED_WAYPOINT)
        assert v.waypoints[2].reached_t is None
    else:
        assert (v.status, v.error_code) == (GoalStatus.SUCCEEDED, 0)
        assert v.waypoints[2].state is WaypointState.COMPLETED and w.true_pose.yaw == pytest.approx(1.0)


def test_config_defaults_stop_on_failure() -> None:
    assert SimConfig().stop_on_failure is True
    (skip, stuck) = parse_faults([{"kind": "skip_waypoint", "at_s": 0, "waypoint": 0}, {"kind": "stuck", "on_goal": 1}])
    assert (skip.reported, stuck.freed_by, stuck.min_backup_m, stuck.delay_s()) == (False, "backup", 0.15, 0.3)


# --------------------------------------------------------------------------- behaviours


@pytest.mark.parametrize("angle", [1.2, -2.0])
def test_spin_turns_in_place_by_the_signed_angle(angle: float) -> None:
    w = make_world(start={"x": 1.0, "y": 1.0, "yaw": 0.5})
    d = w.submit_spin(angle)
    assert d.accepted and w.goal(1).kind is NavGoalKind.SPIN and w.goal(1).target == w.true_pose
    Track(w).run(0.4)
    mid = w.goal(1).angular_distance_traveled
    assert mid == pytest.approx(math.copysign(0.6, angle))
    Track(w).until_done(1)
    v = w.goal(1)
    assert (v.status, v.error_code, v.angular_distance_traveled) == (GoalStatus.SUCCEEDED, 0, angle)
    assert w.true_pose.yaw == pytest.approx(0.5 + angle) and (w.true_pose.x, w.true_pose.y) == (1.0, 1.0)
    assert v.ended_t == pytest.approx(abs(angle) / 1.5, abs=0.03)


def test_spin_past_its_time_allowance_times_out() -> None:
    w = make_world()
    w.submit_spin(3.0, time_allowance_s=1.0)
    Track(w).until_done(1)
    v = w.goal(1)
    assert (v.status, v.error_code) == (GoalStatus.ABORTED, SPIN_TIMEOUT)
    assert v.error_msg == "spin failed:Exceeded time allowance before reaching the Spin goal - Exiting Spin"
    assert v.angular_distance_traveled == pytest.approx(1.5, abs=0.04)


def test_backup_drives_straight_back_at_the_capped_speed() -> None:
    w = make_world(start={"x": 0.0, "y": 0.0, "yaw": math.pi / 2}, speed=0.5)
    w.submit_backup(0.4, 2.0)  # asks 2 m/s; the robot walks at most 0.5
    Track(w).run(0.4)
    assert w.goal(1).distance_traveled == pytest.approx(0.2) and w.goal(1).distance_remaining == pytest.approx(0.2)
    assert w.twist.vx == pytest.approx(-0.5)
    Track(w).until_done(1)
    v = w.goal(1)
    assert (v.status, v.error_code, v.distance_traveled) == (GoalStatus.SUCCEEDED, 0, pytest.approx(0.4))
    assert (w.true_pose.x, w.true_pose.y, w.true_pose.yaw) == pytest.approx((0.0, -0.4, math.pi / 2))
    assert v.ended_t == pytest.approx(0.8, abs=0.03)


def test_backup_ignores_the_signs_of_distance_and_speed_as_nav2_does() -> None:
    w = make_world()
    w.submit_backup(-0.3, -0.25)
    Track(w).until_done(1)
    assert w.goal(1).status is GoalStatus.SUCCEEDED and w.true_pose.x == pytest.approx(-0.3)


def test_backup_stops_before_a_collision_behind() -> None:
    w = make_world(map=WALL_MAP, start={"x": 4.5, "y": 0.0, "yaw": 0.0})  # the wall's inflation ends at 3.7
    w.submit_backup(2.0, 0.5)
    Track(w).until_done(1)
    v = w.goal(1)
    assert (v.status, v.error_code) == (GoalStatus.ABORTED, BACKUP_COLLISION_AHEAD)
    assert v.error_msg == "backup failed:Collision Ahead - Exiting DriveOnHeading"
    assert 3.7 <= w.true_pose.x < 3.8 and w.cost_at(w.true_pose.x, 0.0) < 253


def test_backup_times_out_and_refuses_a_target_off_the_x_axis() -> None:
    w = make_world()
    w.submit_backup(2.0, 0.5, time_allowance_s=1.0)
    Track(w).until_done(1)
    v = w.goal(1)
    assert (v.status, v.error_code) == (GoalStatus.ABORTED, BACKUP_TIMEOUT)
    assert v.error_msg.startswith("backup failed:Exceeded time allowance")
    d = w.submit_backup(0.3, 0.1, target_y=0.2)
    v = w.goal(d.goal_index)
    assert d.accepted and (v.status, v.error_code) == (GoalStatus.ABORTED, BACKUP_INVALID_INPUT)
    assert v.error_msg == "Backing up in Y and Z not supported, will only move in X."


def test_wait_stands_still_for_its_duration() -> None:
    w = make_world()
    w.submit_wait(1.0)
    Track(w).run(0.4)
    assert w.goal(1).time_left == pytest.approx(0.6) and w.goal(1).status is GoalStatus.ACTIVE
    Track(w).until_done(1)
    v = w.goal(1)
    assert (v.status, v.time_left, v.ended_t) == (GoalStatus.SUCCEEDED, 0.0, pytest.approx(1.0))
    assert w.true_pose == Pose2D(x=0.0, y=0.0, yaw=0.0)


@pytest.mark.parametrize("call", [
    lambda w: w.submit_spin(math.inf),
    lambda w: w.submit_spin(1.0, time_allowance_s=-1.0),
    lambda w: w.submit_backup(math.nan, 0.1),
    lambda w: w.submit_backup(0.3, 0.0),
    lambda w: w.submit_wait(-1.0),
    lambda w: w.submit_wait(math.nan),
    lambda w: w.clear_costmaps(["everything"]),
])
def test_bad_behaviour_inputs_are_caller_mistakes(call: Any) -> None:
    w = make_world()
    with pytest.raises(UsageError):
        call(w)
    assert w.goals_received == 0 and w.costmap_clears == 0


def test_behaviours_are_goals_that_preempt_and_are_preempted() -> None:
    w = make_world()
    w.submit_goal(3.0, 0.0, 0.0)
    Track(w).run(0.5)
    assert w.submit_spin(1.0).goal_index == 2
    assert w.goal(1).status is GoalStatus.ABORTED and w.goal(1).reason == "preempted by goal 2"
    assert w.submit_wait(5.0).goal_index == 3
    assert (w.goal(2).status, w.goal(2).error_code) == (GoalStatus.ABORTED, 0)
    assert w.cancel(3) and w.goal(3).status is GoalStatus.CANCELED


def test_behaviours_run_while_bt_navigator_is_inactive() -> None:
    w = make_world({"kind": "navigator_inactive", "at_s": 0.0})
    refused = w.submit_goal(1.0, 0.0, 0.0)
    assert (refused.accepted, refused.reason) == (False, NAVIGATOR_INACTIVE_REASON)
    assert not w.submit_route(L_ROUTE, follow=False).accepted
    for submit in (lambda: w.submit_spin(0.5), lambda: w.submit_backup(0.2, 0.2), lambda: w.submit_wait(0.3)):
        d = submit()
        assert d.accepted
        Track(w).until_done(d.goal_index)
        assert w.goal(d.goal_index).status is GoalStatus.SUCCEEDED
    assert w.true_pose.x == pytest.approx(-0.2 * math.cos(0.5))
    assert w.clear_costmaps(["local"]) and w.costmap_clears == 1


def test_follow_waypoints_is_accepted_by_the_follower_but_bt_navigator_refuses_each_waypoint() -> None:
    w = make_world({"kind": "navigator_inactive", "at_s": 0.0})
    d = w.submit_route(L_ROUTE, follow=True)
    v = w.goal(d.goal_index)
    assert d.accepted and (v.status, v.error_code) == (GoalStatus.ABORTED, FOLLOW_WAYPOINTS_STOP_ON_MISSED_WAYPOINT)
    assert (v.waypoints[0].error_code, v.waypoints[0].error_msg) == (FOLLOW_WAYPOINTS_UNKNOWN,
                                                                    NAVIGATE_TO_POSE_REFUSED_MSG)


def test_clear_costmaps_is_counted_and_a_dead_robot_does_not_answer() -> None:
    w = make_world({"kind": "die", "at_s": 1.0})
    assert w.clear_costmaps(["global", "local"]) and w.clear_costmaps([]) and w.costmap_clears == 2
    assert w.goals_received == 0 and w.events == ()
    Track(w).run(1.1)
    assert not w.clear_costmaps(["global"]) and w.costmap_clears == 2
    assert not w.submit_spin(1.0).accepted


# --------------------------------------------------------------------------- stuck


def test_a_stuck_robot_fails_to_make_progress_until_a_backup_frees_it() -> None:
    w = make_world({"kind": "stuck", "at_s": 0.0})
    assert w.stuck
    w.submit_goal(2.0, 0.0, 0.0)
    Track(w).until_done(1)
    v = w.goal(1)
    assert (v.status, v.error_code, v.error_msg) == (GoalStatus.ABORTED, FOLLOW_PATH_FAILED_TO_MAKE_PROGRESS,
                                                     STUCK_ERROR_MSG)
    assert v.ended_t == pytest.approx(STUCK_ABORT_S, abs=0.03) and w.odometer_m == 0.0
    w.submit_backup(0.1, 0.2)  # too short to get out
    Track(w).until_done(2)
    assert w.goal(2).status is GoalStatus.SUCCEEDED and w.stuck
    w.submit_goal(2.0, 0.0, 0.0)
    Track(w).run(1.0)
    assert w.true_pose.x == pytest.approx(-0.1)  # still wedged
    w.submit_backup(0.3, 0.2)
    Track(w).until_done(4)
    assert w.goal(4).status is GoalStatus.SUCCEEDED and not w.stuck
    w.submit_goal(2.0, 0.0, 0.0)
    Track(w).until_done(5)
    assert (w.goal(5).status, w.goal(5).error_code) == (GoalStatus.SUCCEEDED, 0)
    assert w.true_pose.distance_to(Pose2D(x=2.0, y=0.0)) < 0.03


@pytest.mark.parametrize("freed_by", ["spin", "clear_costmaps"])
def test_a_stuck_robot_freed_by_a_spin_or_a_costmap_clear(freed_by: str) -> None:
    w = make_world({"kind": "stuck", "on_goal": 1, "after_s": 0.5, "freed_by": freed_by})
    w.submit_goal(3.0, 0.0, 0.0)
    Track(w).run(1.0)
    assert w.stuck and w.true_pose.x == pytest.approx(0.5, abs=0.03)
    w.submit_backup(0.5, 0.5)  # not this fault's way out
    Track(w).until_done(2)
    assert w.stuck
    if freed_by == "spin":
        w.submit_spin(0.5)
        Track(w).until_done(3)
        w.submit_goal(3.0, 0.0, 0.0)
    else:
        backed = w.true_pose.x
        w.submit_goal(3.0, 0.0, 0.0)
        Track(w).run(1.0)
        assert w.true_pose.x == backed
        assert w.clear_costmaps(["local"])  # a service: the running goal carries on, unstuck
    assert not w.stuck
    index = w.goals_received
    Track(w).until_done(index)
    assert w.goal(index).status is GoalStatus.SUCCEEDED


def test_a_stuck_robot_fails_routes_of_both_kinds() -> None:
    w = make_world({"kind": "stuck", "at_s": 0.0}, stop_on_failure=False)
    w.submit_route(L_ROUTE, follow=False)
    Track(w).until_done(1)
    assert (w.goal(1).status, w.goal(1).error_code) == (GoalStatus.ABORTED, FOLLOW_PATH_FAILED_TO_MAKE_PROGRESS)
    assert states(w, 1) == [WaypointState.FAILED] * 3
    w.submit_route(L_ROUTE[:2], follow=True)
    Track(w).until_done(2)
    v = w.goal(2)
    assert (v.status, v.error_code) == (GoalStatus.SUCCEEDED, 0)  # the follower goes on; every waypoint missed
    assert [(wp.state, wp.error_code) for wp in v.waypoints] == [(WaypointState.FAILED, 105)] * 2
    assert v.ended_t - v.received_t == pytest.approx(2 * STUCK_ABORT_S, abs=0.05)
