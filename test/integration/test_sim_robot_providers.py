"""sim_robot's navigation providers over real (loopback) DDS (issue 18): two Nav2 stacks, one body.
And a second camera, read by topic through RosRobotIO.use_camera.

A provider's stack (``SimConfig.providers``) serves Nav2's actions under its namespace, relative to
the robot's, each goal entering the world tagged with it: its speed, its faults. Reached through real
rclpy clients (the rigs of test_sim_robot and test_sim_robot_routes) and through the supervisor's own
navigation port (``supervisor.navigation_port``), which routes by card name to ``<namespace>/...``.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from action_msgs.msg import GoalStatus as RosGoalStatus
from nav2_msgs.action import FollowWaypoints, NavigateToPose, Spin
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from std_msgs.msg import String

from robot_harness.core.clock import IdGenerator, SystemClock
from robot_harness.core.config import load_harness_config
from robot_harness.core.errors import ToolExecutionError
from robot_harness.core.records import Pose2D
from robot_harness.core.routing import ProviderNavigation
from robot_harness.nodes.executors import BackgroundSpinner
from robot_harness.nodes.ros_ports import Nav2NavigationPort, RosRobotIO
from robot_harness.nodes.supervisor import navigation_port
from robot_harness.sim import GoalStatus, SimConfig

from .test_sim_robot import Rig, make_rig, nav_goal, wait_until  # noqa: F401 - fixture
from .test_sim_robot_routes import Nav2, follow, nav2  # noqa: F401 - fixture

OWN_SPEED = 0.5
ALT_SPEED = 3.0
NAV2_PARAMS = {"nav_action": "navigate_to_pose", "nav_through_poses_action": "navigate_through_poses",
               "follow_waypoints_action": "follow_waypoints", "spin_action": "spin", "backup_action": "backup",
               "wait_action": "wait", "clear_global_costmap_service": "global_costmap/clear_entirely_global_costmap",
               "clear_local_costmap_service": "local_costmap/clear_entirely_local_costmap"}
"""The supervisor's defaults for its Nav2 names."""


def two_stacks(**kw: Any) -> SimConfig:
    return SimConfig.from_data({"speed": OWN_SPEED, "yaw_rate": 3.0, "providers": {"alt": {"speed": ALT_SPEED}}, **kw})


def test_a_goal_to_alt_moves_the_robot_at_alts_speed_and_succeeds(nav2: Callable[..., Nav2]) -> None:  # noqa: F811
    n = nav2(two_stacks())
    status, result, feedback = n.run(NavigateToPose, "alt/navigate_to_pose", nav_goal(1.5, 0.0), timeout_s=6.0)
    assert status == RosGoalStatus.STATUS_SUCCEEDED and result.error_code == NavigateToPose.Result.NONE
    view = n.rig.robot.goal_view(1)
    assert view.provider == "alt" and view.status is GoalStatus.SUCCEEDED
    assert view.ended_t is not None
    took = view.ended_t - view.received_t
    assert took == pytest.approx(1.5 / ALT_SPEED, abs=0.2), f"{took:.2f} s: not alt's {ALT_SPEED} m/s"
    truth = n.rig.robot.world.true_pose
    assert abs(truth.x - 1.5) <= 0.05 and abs(truth.y) <= 0.05
    # Feedback as the own navigator's, its time estimate at alt's speed.
    assert feedback and feedback[0].current_pose.header.frame_id == "map"
    first = feedback[0]
    estimate = first.estimated_time_remaining.sec + first.estimated_time_remaining.nanosec * 1e-9
    assert estimate == pytest.approx(first.distance_remaining / ALT_SPEED, abs=0.02)
    # The goal log names the provider; the robot's own navigator saw nothing.
    log_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    log = n.rig.collect(String, "/sim_robot/goal_log", log_qos)
    wait_until(lambda: len(log) >= 3, 3.0, "the goal log")
    lines = [json.loads(m.data) for m in log]
    assert [(e["event"], e.get("provider")) for e in lines] == [("received", "alt"), ("accepted", "alt"),
                                                               ("succeeded", "alt")]
    assert n.rig.robot.world.received_by("") == 0


def test_a_reject_fault_on_the_robots_own_navigator_leaves_alt_accepting(
        nav2: Callable[..., Nav2]) -> None:  # noqa: F811
    n = nav2(two_stacks(faults=[{"kind": "reject", "at_s": 0.0}]))
    own = n.send(NavigateToPose, "navigate_to_pose", nav_goal(1.0, 0.0))
    assert not own.handle.accepted, "the robot's own navigator rejects (its reject fault)"
    status, _result, _ = n.run(NavigateToPose, "alt/navigate_to_pose", nav_goal(1.0, 0.0), timeout_s=6.0)
    assert status == RosGoalStatus.STATUS_SUCCEEDED
    assert [(n.rig.robot.goal_view(i).provider, n.rig.robot.goal_view(i).status) for i in (1, 2)] == [
        ("", GoalStatus.REJECTED), ("alt", GoalStatus.SUCCEEDED)]


def test_under_a_robot_namespace_a_providers_stack_is_under_it(nav2: Callable[..., Nav2]) -> None:  # noqa: F811
    n = nav2(two_stacks(), namespace="/robot1")
    names = {node.get_fully_qualified_name() for node in n.rig.robot.nodes}
    assert {"/robot1/alt/bt_navigator", "/robot1/alt/behavior_server", "/robot1/alt/waypoint_follower",
            "/robot1/bt_navigator"} <= names
    for node in ("alt/bt_navigator", "alt/behavior_server", "alt/waypoint_follower"):
        assert n.state(node) == "active", node
    assert n.run(Spin, "alt/spin", Spin.Goal(target_yaw=0.5))[0] == RosGoalStatus.STATUS_SUCCEEDED
    status, _result, _ = n.run(FollowWaypoints, "alt/follow_waypoints", follow((0.6, 0.0, 0.0)), timeout_s=6.0)
    assert status == RosGoalStatus.STATUS_SUCCEEDED
    assert [n.rig.robot.goal_view(i).provider for i in (1, 2)] == ["alt", "alt"]
    actions = {name for name, _ in n.rig.client.get_service_names_and_types()}
    assert "/robot1/alt/navigate_to_pose/_action/send_goal" in actions
    assert "/alt/navigate_to_pose/_action/send_goal" not in actions, "nothing of alt's at the root"


@dataclass
class Dispatch:
    """A rig, and a BackgroundSpinner node on its context with ports on it, as the supervisor's dispatch node."""

    rig: Rig
    node: Any
    owned: list[Any] = field(default_factory=list)

    def own(self, port: Any) -> Any:
        """Destroyed at teardown once the spinner has stopped, as the supervisor destroys its ports."""
        self.owned.append(port)
        return port


@pytest.fixture
def dispatch(make_rig: Callable[..., Rig]) -> Iterator[Callable[[SimConfig], Dispatch]]:  # noqa: F811
    made: list[tuple[BackgroundSpinner, Dispatch]] = []

    def build(config: SimConfig) -> Dispatch:
        rig = make_rig(config)
        spinner = BackgroundSpinner(context=rig.ctx, name="providers_dispatch").start()
        made.append((spinner, Dispatch(rig, spinner.node)))
        return made[-1][1]

    yield build
    for spinner, d in made:  # before the rig's teardown shuts the context down
        spinner.stop()
        for port in d.owned:
            port.destroy()
        spinner.destroy()


def until_result(port: Any, goal_id: str, timeout_s: float = 8.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for ev in port.poll(0.1):
            if ev.goal_id == goal_id and ev.type == "result":
                return str(ev.status)
    raise AssertionError(f"no result for {goal_id} within {timeout_s} s")


def test_the_supervisors_navigation_port_routes_by_card_to_the_cards_namespace(
        dispatch: Callable[[SimConfig], Dispatch]) -> None:
    d = dispatch(two_stacks(faults=[{"kind": "reject", "at_s": 0.0}]))
    config = load_harness_config(overrides={"providers": {
        "own": {"capability": "navigation"}, "quick": {"capability": "navigation", "namespace": "alt"},
        "eyes": {"capability": "camera"}}})
    port = d.own(navigation_port(d.node, NAV2_PARAMS, config, clock=SystemClock()))
    assert isinstance(port, ProviderNavigation) and port.providers == ("own", "quick")
    ack = port.send_goal(target=Pose2D(x=1.0, y=0.0), frame_id="map", timeout_s=5.0, goal_id="a" * 32)
    assert not ack.accepted, "no use(): the first card, the robot's own navigator, which rejects"
    port.use("quick")
    ack = port.send_goal(target=Pose2D(x=1.0, y=0.0), frame_id="map", timeout_s=5.0, goal_id="b" * 32)
    assert ack.accepted, ack.reason
    assert until_result(port, "b" * 32) == "succeeded"
    assert port.lookup("b" * 32, timeout_s=2.0) == "succeeded"
    assert d.rig.robot.goal_view(2).provider == "alt"
    wait_until(port.server_ready, 2.0, "a navigator discovered")
    one = d.own(navigation_port(d.node, NAV2_PARAMS, load_harness_config(overrides={"providers": {
        "quick": {"capability": "navigation", "namespace": "alt"}}}), clock=SystemClock()))
    # one card under its own namespace: the robot is driven through that stack alone, not its own Nav2
    assert isinstance(one, ProviderNavigation) and one.providers == ("quick",)
    ack = one.send_goal(target=Pose2D(x=0.0, y=0.0), frame_id="map", timeout_s=5.0, goal_id="c" * 32)
    assert ack.accepted, "the own navigator rejects everything here: accepted means alt took it"
    own = d.own(navigation_port(d.node, NAV2_PARAMS, load_harness_config(overrides={"providers": {
        "mine": {"capability": "navigation"}}}), clock=SystemClock()))
    assert isinstance(own, Nav2NavigationPort) and not isinstance(own, ProviderNavigation)


def test_a_second_camera_is_published_and_read_by_topic_until_it_dies(
        dispatch: Callable[[SimConfig], Dispatch], tmp_path: Path) -> None:
    rear = "rear/image_raw"
    dead_at = 4.0  # late enough that discovery and the first capture beat it on a loaded machine
    d = dispatch(two_stacks(cameras={rear: {"rate_hz": 10.0, "faults": [{"kind": "camera_dead", "at_s": dead_at}]}}))
    io = d.own(RosRobotIO(d.node, clock=SystemClock(), ids=IdGenerator(1), artifacts_dir=tmp_path,
                          camera_topic="camera/image_raw", speech_topic="speech/say",
                          message_topic="robot_harness/messages"))
    frames = d.rig.collect(Image, "/rear/image_raw")
    io.use_camera(rear)
    assert io.capture_image(label="rear").size_bytes > 0, "its first frame waited for"
    wait_until(lambda: bool(frames), 3.0, "the rear camera's frames on /rear/image_raw")
    assert frames[-1].header.frame_id == "rear"
    wait_until(lambda: d.rig.robot.world.t > dead_at + 2.2, dead_at + 6.0, "the rear camera dead for over 2 s")
    heard = len(frames)
    time.sleep(0.3)
    assert len(frames) == heard, "a dead camera publishes nothing"
    io.use_camera(rear)
    with pytest.raises(ToolExecutionError, match="old"):
        io.capture_image(label="rear")

    def front() -> bool:
        try:
            return io.capture_image(label="front").size_bytes > 0
        except ToolExecutionError:
            return False

    wait_until(front, 3.0, "a capture from the built-in camera, as ever")
