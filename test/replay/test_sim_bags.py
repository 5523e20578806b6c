"""Mission bags the simulated robot recorded (the regression set) read from the outside: as a
recording with a pose topic and Nav2's action status, and by rosbag2 itself when it is installed."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_harness.core.scenario import load_scenario
from robot_harness.evidence.bag import McapEvidenceStore, read_bag_metadata
from robot_harness.evidence.replay import NAV2_STATUS_TOPIC, replay_bag

HERE = Path(__file__).resolve().parent
REG = HERE / "regression"
ELEVATOR = HERE / "sim_elevator.scenario.yaml"


def bag(case: str) -> Path:
    (found,) = [d for d in (REG / case).glob("mission-*") if d.is_dir()]
    return found


def patrol_scenario():
    scenario = load_scenario(ELEVATOR)
    o1 = scenario.contract[0]
    steps = [o1.model_copy(update={"id": f"o{i}", "params": {"place": p},
                                   "depends_on": (f"o{i - 1}",) if i > 1 else ()})
             for i, p in enumerate(("corridor_a", "corridor_b", "dock"), 1)]
    return scenario.model_copy(update={"goal": "Patrol corridor_a and corridor_b and return to dock.",
                                       "contract": steps})


def test_nav2_status_goals_are_read_beside_the_poses():
    replay = replay_bag(bag("patrol-none"), patrol_scenario())
    assert replay.verdict.goal_verdict.value == "verified_done"
    assert replay.nav_status_topic == NAV2_STATUS_TOPIC
    assert [g.status for g in replay.nav_goals] == ["SUCCEEDED"] * 3
    ends = [g.end_pose for g in replay.nav_goals]
    assert [(round(p.x), round(p.y)) for p in ends] == [(3, 0), (3, 3), (0, 0)], ends
    assert all(g.accepted_at <= g.ended_at for g in replay.nav_goals) and replay.notes == []


def test_a_success_the_navigator_claims_early_is_noted_and_the_poses_decide():
    replay = replay_bag(bag("navigation-early_success"), load_scenario(ELEVATOR))
    (step,) = replay.verdict.steps
    assert step.verdict.value == "violated" and replay.verdict.goal_verdict.value == "continue"
    (goal,) = replay.nav_goals
    assert goal.status == "SUCCEEDED"
    (note,) = replay.notes
    assert "SUCCEEDED" in note and "from the nearest place (dock)" in note


def _pose_cdr(x: float, y: float, t: float) -> bytes:
    from geometry_msgs.msg import PoseWithCovarianceStamped
    from rclpy.serialization import serialize_message

    msg = PoseWithCovarianceStamped()
    msg.header.frame_id = "map"
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int(round((t % 1) * 1e9))
    msg.pose.pose.position.x, msg.pose.pose.position.y = x, y
    msg.pose.pose.orientation.w = 1.0
    return serialize_message(msg)


def _status_cdr(code: int, accepted: float) -> bytes:
    from action_msgs.msg import GoalStatus, GoalStatusArray
    from rclpy.serialization import serialize_message

    st = GoalStatus(status=code)
    st.goal_info.goal_id.uuid = list(range(16))
    st.goal_info.stamp.sec = int(accepted)
    return serialize_message(GoalStatusArray(status_list=[st]))


def test_a_recording_that_ends_while_the_navigator_still_drives_is_not_done(tmp_path: Path):
    """The elevator is reached, but Nav2 still executes a goal when the recording stops."""
    store = McapEvidenceStore(tmp_path)
    store.open_bag("run.mcap", metadata={})
    store.add_channel("/amcl_pose", "geometry_msgs/msg/PoseWithCovarianceStamped")
    store.add_channel(NAV2_STATUS_TOPIC, "action_msgs/msg/GoalStatusArray")
    t0, log0 = 100.0, 1_700_000_000_000_000_000  # sim-time headers, wall-clock log times
    store.write(NAV2_STATUS_TOPIC, _status_cdr(2, t0), log_time_ns=log0)
    for i, (x, y) in enumerate([(0.0, 0.0), (2.0, 1.0), (4.0, 2.0), (4.5, 2.2)]):
        store.write("/amcl_pose", _pose_cdr(x, y, t0 + i), log_time_ns=log0 + i * 1_000_000_000)
    store.close()
    replay = replay_bag(tmp_path / "run", load_scenario(ELEVATOR))
    assert replay.verdict.steps[0].verdict.value == "satisfied", "the poses say the place was reached"
    assert replay.verdict.goal_verdict.value == "continue", "but the robot never came to rest"
    (goal,) = replay.nav_goals
    assert goal.status == "EXECUTING" and goal.ended_at is None and goal.accepted_at == t0
    assert "still running goal 00010203" in replay.notes[-1] and "not verified done" in replay.notes[-1]

    # the same recording where the navigator finished: done
    store = McapEvidenceStore(tmp_path / "finished")
    store.open_bag("run.mcap", metadata={})
    store.add_channel("/amcl_pose", "geometry_msgs/msg/PoseWithCovarianceStamped")
    store.add_channel(NAV2_STATUS_TOPIC, "action_msgs/msg/GoalStatusArray")
    store.write(NAV2_STATUS_TOPIC, _status_cdr(2, t0), log_time_ns=log0)
    for i, (x, y) in enumerate([(0.0, 0.0), (2.0, 1.0), (4.0, 2.0)]):
        store.write("/amcl_pose", _pose_cdr(x, y, t0 + i), log_time_ns=log0 + i * 1_000_000_000)
    store.write(NAV2_STATUS_TOPIC, _status_cdr(4, t0), log_time_ns=log0 + 2_500_000_000)
    store.close()
    done = replay_bag(tmp_path / "finished" / "run", load_scenario(ELEVATOR))
    assert done.verdict.goal_verdict.value == "verified_done" and done.notes == []
    (goal,) = done.nav_goals
    assert goal.status == "SUCCEEDED" and goal.ended_at == pytest.approx(t0 + 2.5)
    assert (goal.end_pose.x, goal.end_pose.y) == (4.0, 2.0)


def test_ros2_bag_reads_a_harness_mission_bag(tmp_path: Path):
    """rosbag2's own reader opens the bag and every message deserializes with the installed types
    (skipped where rosbag2_py is not installed; on a robot with ROS it proves ``ros2 bag`` compatibility)."""
    rosbag2_py = pytest.importorskip("rosbag2_py")
    from rclpy.serialization import deserialize_message
    from rosidl_runtime_py.utilities import get_message

    path = bag("inspection-none")
    reader = rosbag2_py.SequentialReader()
    reader.open(rosbag2_py.StorageOptions(uri=str(path), storage_id="mcap"),
                rosbag2_py.ConverterOptions(input_serialization_format="cdr", output_serialization_format="cdr"))
    types = {t.name: t.type for t in reader.get_all_topics_and_types()}
    assert {"/amcl_pose", NAV2_STATUS_TOPIC, "/robot_harness/journal", "/robot_harness/snapshots"} <= set(types)
    counts: dict[str, int] = {}
    while reader.has_next():
        topic, data, _t = reader.read_next()
        deserialize_message(data, get_message(types[topic]))
        counts[topic] = counts.get(topic, 0) + 1
    expected = {t["topic_metadata"]["name"]: t["message_count"]
                for t in read_bag_metadata(path)["topics_with_message_count"] if t["message_count"]}
    assert counts == expected


def _recorder():
    import importlib.util

    script = HERE.parents[1] / "scripts" / "record_regression.py"
    spec = importlib.util.spec_from_file_location("record_regression", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_recording_script_writes_a_case_that_replays_from_any_form_of_the_bag_path(tmp_path: Path):
    from robot_harness.evidence.replay import journal_from_jsonl, replay_mission, replay_recording

    status, size = _recorder().record("inspection-none", tmp_path)
    assert status == "SUCCEEDED" and 0 < size <= 400_000
    journal_file = tmp_path / "inspection-none.jsonl"
    (folder,) = [d for d in (tmp_path / "inspection-none").glob("mission-*") if d.is_dir()]
    assert sorted(p.name for p in folder.iterdir()) == sorted([f"{folder.name}.mcap", "metadata.yaml"])
    journal = journal_from_jsonl(journal_file)
    for where in (folder, folder / f"{folder.name}.mcap", folder.parent):
        report = replay_mission(journal, folder.name, artifacts_dir=folder.parent, bag_dir=where)
        assert report.identical and report.bag_evidence_checked > 0, (where, [v.diffs for v in report.verdicts])
    by_file = replay_recording(folder / f"{folder.name}.mcap", journal=journal_file, artifacts_dir=folder.parent)
    assert by_file.identical and by_file.mission_id == folder.name
