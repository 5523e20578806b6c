"""Nothing unvalidated reaches the robot: finite numbers, a normalised heading, a target inside the workspace
and within reach of the fresh pose, or no goal is sent (issue 13, "validate before dispatch")."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_harness.core.config import HarnessConfig, NavigationConfig, Preconditions, Workspace, navigation_workspace
from robot_harness.core.errors import InvalidArgumentsError
from robot_harness.core.preconditions import check_preconditions
from robot_harness.core.records import Availability, ControllerState, FieldMeta, MissionStatus, Pose2D, WorldSnapshot
from robot_harness.core.skills import default_skills, resolve_target

from .test_engine import make, results

NAV = default_skills(NavigationConfig()).get("navigate_to")
PLACES = {"dock": Pose2D(x=0.0, y=0.0), "office": Pose2D(x=3.0, y=1.0, yaw=1.57)}
WORKSPACE = navigation_workspace(NavigationConfig(), PLACES)

numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-10**20, max_value=10**20),
                    st.sampled_from([1e6, -1e6, 9.2e18, 1e308, -0.0, 5e-324]))
arguments = st.fixed_dictionaries({}, optional={"x": numbers, "y": numbers, "yaw": numbers,
                                                "place": st.sampled_from(["dock", "office"])})


def snapshot(pose: Pose2D | None = Pose2D(x=0.0, y=0.0)) -> WorldSnapshot:
    meta = FieldMeta(availability=Availability.AVAILABLE, source_stamp=99.9, age_s=0.1, max_age_s=0.5)
    return WorldSnapshot(snapshot_id="snap-1", captured_at=100.0, pose=pose, pose_meta=meta,
                         controller_state=ControllerState.IDLE, navigation_meta=meta, battery=0.9, battery_meta=meta)


@settings(max_examples=400, deadline=None)
@given(arguments)
def test_no_argument_set_that_validates_yields_a_non_finite_or_out_of_workspace_goal_that_passes(args):
    try:
        parsed = NAV.validate(args)
    except InvalidArgumentsError:
        return  # refused before anything: nothing could be sent
    target = resolve_target(parsed, PLACES)
    assert all(math.isfinite(v) for v in (target.x, target.y, target.yaw))
    assert -math.pi <= target.yaw <= math.pi
    report = check_preconditions(Preconditions(), decision=snapshot(), fresh=snapshot(), target_at_decision=target,
                                 target_now=target, active_actions=[], workspace=WORKSPACE)
    if report.ok:
        assert WORKSPACE.contains(target.x, target.y)
        assert Pose2D(x=0.0, y=0.0).distance_to(target) <= Preconditions().max_goal_distance_m


@pytest.mark.parametrize("args", [{"x": 1.0, "y": 2.0, "yaw": float("nan")}, {"x": float("inf"), "y": 0.0},
                                  {"x": 1.0, "y": float("-inf")}])
def test_non_finite_numbers_are_invalid_arguments(args):
    with pytest.raises(InvalidArgumentsError):
        NAV.validate(args)


def test_a_heading_is_normalised():
    assert NAV.validate({"x": 1.0, "y": 1.0, "yaw": 3 * math.pi + 0.5}).yaw == pytest.approx(-math.pi + 0.5)


def test_the_workspace_defaults_to_the_places_bounding_box_plus_the_margin_and_can_be_configured():
    assert WORKSPACE == Workspace(min_x=-10.0, min_y=-10.0, max_x=13.0, max_y=11.0)
    site = NavigationConfig(workspace={"min_x": -1, "min_y": -1, "max_x": 1, "max_y": 1})
    assert navigation_workspace(site, PLACES) == Workspace(min_x=-1, min_y=-1, max_x=1, max_y=1)
    assert navigation_workspace(NavigationConfig(), {}) is None
    with pytest.raises(ValueError):
        Workspace(min_x=1, min_y=0, max_x=0, max_y=1)


@pytest.mark.parametrize("target, failed", [(Pose2D(x=1e6, y=0.0), {"target_in_workspace", "goal_distance"}),
                                             (Pose2D(x=9.2e18, y=9.2e18), {"target_in_workspace", "goal_distance"}),
                                             (Pose2D(x=12.0, y=0.0), set())])
def test_far_targets_fail_the_precondition_check(target, failed):
    report = check_preconditions(Preconditions(max_goal_distance_m=50.0), decision=snapshot(), fresh=snapshot(),
                                 target_at_decision=target, target_now=target, active_actions=[], workspace=WORKSPACE)
    assert {c.name for c in report.failed} == failed


@pytest.mark.parametrize("args, status", [({"x": 1.0, "y": 0.5, "yaw": float("nan")}, "error"),
                                          ({"x": 1e6, "y": 0.0}, "precondition_changed"),
                                          ({"x": 9.2e18, "y": 0.0}, "precondition_changed")])
def test_the_engine_sends_no_goal_for_an_unvalidated_target(args, status):
    turns = [{"tool_calls": [{"name": "navigate_to", "arguments": args}]}, {"done": "there"}]
    runner, robot, journal, _ = make(turns)
    out = runner.run("go to the office")
    assert robot.goals == [], "nothing reached the robot"
    (res,) = results(journal)
    assert res["status"] == status, res
    assert out.status is not MissionStatus.SUCCEEDED


def test_a_config_without_places_still_bounds_the_goal_distance():
    config = HarnessConfig()
    nav = config.navigation
    target = Pose2D(x=500.0, y=0.0)
    report = check_preconditions(nav.preconditions, decision=snapshot(), fresh=snapshot(), target_at_decision=target,
                                 target_now=target, active_actions=[],
                                 workspace=navigation_workspace(nav, {}))
    assert [c.name for c in report.failed] == ["goal_distance"]
