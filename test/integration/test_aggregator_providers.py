"""The snapshot aggregator over several navigation providers on one body (issue 18), over real (loopback) DDS.

sim_robot serves a second Nav2 stack under ``alt``; a goal sent to ``alt/navigate_to_pose`` drives the
same robot. Watching ``alt`` (``nav_namespaces``), the aggregator's captures say the controller is ACTIVE
while that goal runs, with its id and its navigator's distance remaining, and IDLE once it has ended (the
pre-dispatch checks and the verifier read these snapshots). A provider card whose stack does not run
leaves the state known. By default only the robot's own navigator is watched, as before. The in-process
bring-up gives the aggregator the namespaces of the harness configuration's navigation cards.

The rigs are test_sim_robot's (one rclpy Context per test, on the test's own ROS domain); the aggregator
spins on an executor of its own, as its executable does, stopped before the rig's teardown.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from action_msgs.msg import GoalStatus as RosGoalStatus
from nav2_msgs.action import NavigateToPose
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter

from robot_harness.bringup import NODE_SPECS, BringUp
from robot_harness.core.records import ControllerState, WorldSnapshot
from robot_harness.msg import WorldSnapshot as WorldSnapshotMsg
from robot_harness.nodes.conversions import goal_id_to_hex, msg_to_snapshot
from robot_harness.nodes.snapshot_aggregator import SnapshotAggregator
from robot_harness.sim import GoalStatus, SimConfig
from robot_harness.srv import CaptureSnapshot

from .test_sim_robot import make_rig, nav_goal, wait_future, wait_until  # noqa: F401 - fixture
from .test_sim_robot_routes import Nav2, nav2  # noqa: F401 - fixture

ALT_SPEED = 0.5
"""m/s: a 2 m goal on alt runs for 4 s, long enough to be seen running."""
OWN_STATUS = "navigate_to_pose/_action/status"
ALT_STATUS = "alt/navigate_to_pose/_action/status"


def two_stacks() -> SimConfig:
    return SimConfig.from_data({"speed": 1.0, "yaw_rate": 3.0, "providers": {"alt": {"speed": ALT_SPEED}}})


@dataclass
class Watched:
    """A sim rig with a second stack, its Nav2 clients, and an active aggregator watching it."""

    nav2: Nav2
    node: SnapshotAggregator
    capture_client: Any
    published: list[WorldSnapshotMsg]

    def capture(self) -> WorldSnapshot:
        """A snapshot through the aggregator's ``~/capture`` service."""
        response = wait_future(self.capture_client.call_async(CaptureSnapshot.Request(reason="test")), 5.0,
                               "a capture")
        assert response.ok, response.error
        return msg_to_snapshot(response.snapshot)

    def until(self, ok: Callable[[WorldSnapshot], bool], what: str, timeout_s: float = 6.0) -> WorldSnapshot:
        last: list[WorldSnapshot] = []

        def check() -> bool:
            last[:] = [self.capture()]
            return ok(last[0])

        try:
            wait_until(check, timeout_s, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last capture: {last[0] if last else None}") from None
        return last[0]

    def subscribed(self) -> set[str]:
        return {sub.topic_name for sub in self.node.subscriptions}


@pytest.fixture
def watch(nav2: Callable[..., Nav2]) -> Iterator[Callable[..., Watched]]:  # noqa: F811 - the imported fixture
    made: list[tuple[SingleThreadedExecutor, threading.Thread, SnapshotAggregator]] = []

    def build(config: SimConfig, **params: Any) -> Watched:
        n = nav2(config)
        agg = SnapshotAggregator(context=n.rig.ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in {"snapshot_rate_hz": 0.0, **params}.items()])
        executor = SingleThreadedExecutor(context=n.rig.ctx)
        executor.add_node(agg)
        thread = threading.Thread(target=executor.spin, daemon=True)
        thread.start()
        made.append((executor, thread, agg))
        assert agg.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert agg.trigger_activate() == TransitionCallbackReturn.SUCCESS
        published = n.rig.collect(WorldSnapshotMsg, "/snapshot_aggregator/snapshot")
        client = n.rig.client.create_client(CaptureSnapshot, "/snapshot_aggregator/capture")
        assert client.wait_for_service(timeout_sec=5.0), "the aggregator's capture service"
        return Watched(n, agg, client, published)

    yield build
    for executor, thread, agg in made:  # before the rig's teardown shuts the context down
        executor.shutdown(timeout_sec=5.0)
        thread.join(timeout=5.0)
        assert not thread.is_alive(), "the aggregator's executor did not stop"
        agg.destroy_node()


def idle(s: WorldSnapshot) -> bool:
    return s.controller_state is ControllerState.IDLE


def test_a_goal_on_a_provider_makes_the_controller_active_until_it_ends(watch: Callable[..., Watched]) -> None:
    w = watch(two_stacks(), nav_namespaces=["alt", "/alt/", "ghost", ""])
    # Known idle although ghost's stack does not run: a provider that is not there drives nothing.
    w.until(idle, "the controller idle")

    sent = w.nav2.send(NavigateToPose, "alt/navigate_to_pose", nav_goal(2.0, 0.0))
    assert sent.handle.accepted
    goal = goal_id_to_hex(sent.handle.goal_id)
    running = w.until(lambda s: s.controller_state is ControllerState.ACTIVE and s.distance_remaining is not None,
                      "alt's goal seen running, with its distance remaining")
    view = w.nav2.rig.robot.goal_view(1)
    assert view.provider == "alt" and view.status is GoalStatus.ACTIVE, "captured while the goal runs"
    assert running.nav_goal_id == goal and running.navigation_meta.fresh
    assert 0.0 < running.distance_remaining <= 2.0 + 1e-6
    wait_until(lambda: any(m.reason == "salient_event" and m.nav_goal_id == goal for m in w.published),
               3.0, "a salient snapshot for the controller going active")

    status, _result = sent.result(timeout_s=10.0)
    assert status == RosGoalStatus.STATUS_SUCCEEDED
    after = w.until(idle, "the controller idle once alt's goal ended")
    assert after.nav_goal_id == "" and after.distance_remaining is None
    wait_until(lambda: any(m.reason == "salient_event" and
                           msg_to_snapshot(m).controller_state is ControllerState.IDLE for m in w.published),
               3.0, "a salient snapshot for the controller going idle")
    assert w.nav2.rig.robot.world.received_by("") == 0, "the robot's own navigator never had a goal"
    # Each namespace once, the robot's own first; the field names every status topic it is built from.
    ghost = "ghost/navigate_to_pose/_action/status"
    assert after.navigation_meta.source == f"{OWN_STATUS}, {ALT_STATUS}, {ghost}"
    assert {t.lstrip("/") for t in w.subscribed() if "_action" in t} == {
        OWN_STATUS, ALT_STATUS, ghost, *(t.replace("status", "feedback") for t in (OWN_STATUS, ALT_STATUS, ghost))}


def test_by_default_only_the_robots_own_navigator_is_watched(watch: Callable[..., Watched]) -> None:
    w = watch(two_stacks())
    assert w.node.get_parameter("nav_namespaces").value == [""]
    assert {t.lstrip("/") for t in w.subscribed() if "_action" in t} == {
        OWN_STATUS, "navigate_to_pose/_action/feedback"}
    assert w.until(idle, "the controller idle").navigation_meta.source == OWN_STATUS

    sent = w.nav2.send(NavigateToPose, "navigate_to_pose", nav_goal(1.0, 0.0))
    assert sent.handle.accepted
    running = w.until(lambda s: s.controller_state is ControllerState.ACTIVE, "the own goal seen running")
    assert running.nav_goal_id == goal_id_to_hex(sent.handle.goal_id)
    assert sent.result(timeout_s=10.0)[0] == RosGoalStatus.STATUS_SUCCEEDED
    w.until(idle, "the controller idle once the own goal ended")


def test_the_bring_up_gives_the_aggregator_the_navigation_cards_namespaces(tmp_path: Path) -> None:
    spec = next(s for s in NODE_SPECS if s.name == "snapshot_aggregator")

    def given(providers: dict[str, Any], aggregator: dict[str, Any] | None = None) -> Any:
        overrides = {"supervisor": {"harness_config_json": json.dumps({"providers": providers})},
                     **({"snapshot_aggregator": aggregator} if aggregator is not None else {})}
        return BringUp(overrides=overrides).params_for(spec).get("nav_namespaces")

    own = {"capability": "navigation"}
    alt = {"capability": "navigation", "namespace": "alt"}
    rear = {"capability": "camera", "namespace": "rear/image_raw"}
    assert given({"own": own, "quick": alt, "rear": rear}) == ["alt"]
    assert given({"quick": alt}) == ["alt"], "one card under its own namespace: the robot is driven there"
    assert given({"own": own}) is None, "one card for the robot's own Nav2 is no choice (routing's rule)"
    assert given({}) is None
    assert given({"own": own, "quick": alt}, {"nav_namespaces": ["other"]}) == ["other"], "an explicit value stands"

    overrides = {
        "sim_robot": {"providers_json": json.dumps({"alt": {"speed": ALT_SPEED}})},
        "supervisor": {"journal_path": str(tmp_path / "journal.sqlite3"),
                       "harness_config_json": json.dumps({"providers": {"own": own, "quick": alt}})},
    }
    with BringUp(overrides=overrides) as graph:
        assert graph.nodes["snapshot_aggregator"].get_parameter("nav_namespaces").value == ["alt"]
        probe = Node("aggregator_providers_probe", context=graph.context)
        client = ActionClient(probe, NavigateToPose, "alt/navigate_to_pose")
        capture = probe.create_client(CaptureSnapshot, "snapshot_aggregator/capture")

        def destroy() -> None:
            client.destroy()
            probe.destroy_node()

        graph.add_node(probe, destroy)

        def snapshot() -> WorldSnapshot:
            response = wait_future(capture.call_async(CaptureSnapshot.Request(reason="test")), 5.0, "a capture")
            assert response.ok, response.error
            return msg_to_snapshot(response.snapshot)

        assert capture.wait_for_service(timeout_sec=5.0) and client.wait_for_server(timeout_sec=5.0)
        handle = wait_future(client.send_goal_async(nav_goal(2.0, 0.0)), 5.0, "alt's goal response")
        assert handle.accepted
        wait_until(lambda: snapshot().controller_state is ControllerState.ACTIVE, 6.0, "alt's goal seen running")
        assert graph.sim.goal_view(1).status is GoalStatus.ACTIVE, "captured while the goal runs"
        assert wait_future(handle.get_result_async(), 10.0, "alt's result").status == RosGoalStatus.STATUS_SUCCEEDED
        wait_until(lambda: snapshot().controller_state is ControllerState.IDLE, 6.0,
                   "the controller idle once alt's goal ended")


def test_the_launch_file_gives_the_aggregator_the_navigation_cards_namespaces(tmp_path: Path) -> None:
    from ..unit.test_launch_equivalence import evaluate, received

    harness = tmp_path / "harness.yaml"
    harness.write_text(json.dumps({"providers": {"own": {"capability": "navigation"},
                                                 "quick": {"capability": "navigation", "namespace": "alt"}}}))
    nodes = evaluate(use_sim="true", namespace="robot1", harness_config=str(harness))[2]
    assert received(nodes["snapshot_aggregator"])["nav_namespaces"] == ["alt"]
    assert "nav_namespaces" not in received(evaluate(use_sim="true")[2]["snapshot_aggregator"]), \
        "the shipped harness.yaml has no navigation cards: the aggregator's default"
