"""A scenario contract judged against a real rosbag2 recording of a robot the
harness never drove (../shared/fixtures/bags: a Nav2 TurtleBot4 run)."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.scenario import load_scenario
from robot_harness.evidence.bag import BagFormatError
from robot_harness.evidence.replay import replay_bag

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parents[1].parent / "shared" / "fixtures" / "bags"
NAV2 = FIXTURES / "evo_nav2_turtlebot.mcap"
pytestmark = pytest.mark.skipif(not NAV2.is_file(), reason=f"rosbag2 fixtures not found at {FIXTURES}")


def test_the_nav2_run_is_judged_from_amcl_pose_alone():
    scenario = load_scenario(HERE / "nav2_turtlebot.scenario.yaml")
    replay = replay_bag(NAV2, scenario)
    assert replay.poses == 135 and replay.span_s > 90, "header stamps in sim time, used as they are"
    assert replay.verdict.goal_verdict.value == "verified_done"
    o1, o2 = replay.verdict.steps
    assert o1.verdict.value == "satisfied" and "far_end" in o1.reason
    assert o2.verdict.value == "satisfied" and "start_area" in o2.reason
    assert all(i.startswith("evo_nav2_turtlebot.mcap:/amcl_pose@") for i in replay.verdict.evidence_ids)


def test_a_place_the_robot_never_reached_is_violated_with_the_closest_approach():
    scenario = load_scenario(HERE / "nav2_turtlebot.scenario.yaml")
    never = scenario.model_copy(update={"contract": [
        scenario.contract[0].model_copy(update={"params": {"place": "charging_dock"}})]})
    (step,) = replay_bag(NAV2, never).verdict.steps
    assert step.verdict.value == "violated" and "closest 8.75 m from charging_dock" in step.reason


def test_a_topic_that_is_not_a_pose_is_refused_clearly():
    scenario = load_scenario(HERE / "nav2_turtlebot.scenario.yaml")
    with pytest.raises(BagFormatError, match="std_msgs/msg/String, not one of"):
        replay_bag(FIXTURES / "rosbag2_talker.mcap", scenario, pose_topic="/topic")


def test_a_recording_without_nav2_status_is_judged_from_poses_alone():
    replay = replay_bag(NAV2, load_scenario(HERE / "nav2_turtlebot.scenario.yaml"))
    assert replay.nav_status_topic == "" and replay.nav_goals == [] and replay.notes == []


def test_an_unknown_message_encoding_is_named_not_mistaken_for_a_missing_topic():
    scenario = load_scenario(HERE / "nav2_turtlebot.scenario.yaml")
    with pytest.raises(BagFormatError, match=r"unsupported message encoding 'wrong_format' on topic /\w+") as info:
        replay_bag(FIXTURES / "rosbag2_wrong_rmw_test.mcap", scenario)  # asks for /amcl_pose, which it lacks
    assert info.value.details["message_encoding"] == "wrong_format"
