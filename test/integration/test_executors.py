"""The harness's MultiThreadedExecutor: rclpy's behaviour without the resubmit busy loop (rclpy#1452)."""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Iterator

import pytest
import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String

from robot_harness.nodes.executors import MultiThreadedExecutor


@pytest.fixture
def node_and_executor() -> Iterator[tuple[Node, MultiThreadedExecutor]]:
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node("executor_test", context=ctx)
    executor = MultiThreadedExecutor(num_threads=4, context=ctx)
    executor.add_node(node)
    yield node, executor
    executor.shutdown(timeout_sec=2.0)
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def test_a_subscription_does_not_make_the_executor_spin(node_and_executor: tuple[Node, MultiThreadedExecutor]) -> None:
    # rclpy 9.1.2's own executor burns about four CPU seconds in this window
    # (its spin thread resubmits each queued message handler until a worker
    # starts it); this one needs a few hundredths.
    node, executor = node_and_executor
    got: list[String] = []
    node.create_subscription(String, "/executor_test", got.append, 10)
    pub = node.create_publisher(String, "/executor_test", 10)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5.0
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    before = _cpu_s()
    for i in range(20):
        pub.publish(String(data=str(i)))
        time.sleep(0.05)
    used = _cpu_s() - before
    deadline = time.monotonic() + 2.0
    while len(got) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [m.data for m in got] == [str(i) for i in range(20)]
    assert used < 0.5, f"{used:.2f} CPU s for 20 messages in 1 s: the executor is busy-looping"


def test_mutually_exclusive_callbacks_never_overlap_and_all_run(
    node_and_executor: tuple[Node, MultiThreadedExecutor],
) -> None:
    node, executor = node_and_executor
    group = MutuallyExclusiveCallbackGroup()
    active = 0
    overlaps = 0
    runs = 0
    lock = threading.Lock()

    def slow(_msg: String) -> None:
        nonlocal active, overlaps, runs
        with lock:
            active += 1
            overlaps += active > 1
        time.sleep(0.01)
        with lock:
            active -= 1
            runs += 1

    node.create_subscription(String, "/executor_excl_a", slow, 50, callback_group=group)
    node.create_subscription(String, "/executor_excl_b", slow, 50, callback_group=group)
    pub_a = node.create_publisher(String, "/executor_excl_a", 50)
    pub_b = node.create_publisher(String, "/executor_excl_b", 50)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5.0
    while (pub_a.get_subscription_count() < 1 or pub_b.get_subscription_count() < 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(10):
        pub_a.publish(String(data=str(i)))
        pub_b.publish(String(data=str(i)))
    deadline = time.monotonic() + 5.0
    while runs < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runs == 20
    assert overlaps == 0


def test_a_callback_exception_reaches_the_spinning_thread(node_and_executor: tuple[Node, MultiThreadedExecutor]) -> None:
    node, executor = node_and_executor

    def boom() -> None:
        raise RuntimeError("callback failed")

    node.create_timer(0.01, boom)
    with pytest.raises(RuntimeError, match="callback failed"):
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)


def test_a_spinner_that_does_not_stop_keeps_its_node_rather_than_crash_the_process() -> None:
    """Destroying entities under a spinning EventsExecutor is a native crash (ros2/rclpy#1644):
    a spinner held up in a callback past its stop timeout leaves its node alone, and gives it up
    only once it has really stopped."""
    from robot_harness.nodes.executors import BackgroundSpinner

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    release, entered = threading.Event(), threading.Event()
    try:
        spinner = BackgroundSpinner(context=ctx, name="held_spinner").start()

        def held(_msg: String) -> None:
            entered.set()
            release.wait(10.0)

        sub = spinner.node.create_subscription(String, "held_topic", held, 10)
        pub = spinner.node.create_publisher(String, "held_topic", 10)
        deadline = time.monotonic() + 10.0
        while not entered.is_set() and time.monotonic() < deadline:
            pub.publish(String(data="x"))
            time.sleep(0.05)
        assert entered.is_set(), "the callback never ran"
        assert not spinner.stop(timeout_s=0.2) and not spinner.quiet
        spinner.destroy()
        assert spinner.node.handle is not None and spinner.node.get_name() == "held_spinner", "destroyed under a spin"
        release.set()
        assert spinner.stop(timeout_s=5.0) and spinner.quiet
        spinner.node.destroy_subscription(sub)
        spinner.node.destroy_publisher(pub)
        spinner.node.destroy_node()
    finally:
        release.set()
        rclpy.try_shutdown(context=ctx)


def test_the_spinner_runs_rclpys_single_threaded_executor_unless_asked_for_events() -> None:
    from rclpy.executors import SingleThreadedExecutor

    from robot_harness.nodes.executors import BackgroundSpinner

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        default = BackgroundSpinner(context=ctx, name="default_spinner")
        assert default.kind == "single_threaded" and isinstance(default.executor, SingleThreadedExecutor)
        with pytest.raises(ValueError, match="not one of single_threaded, events"):
            BackgroundSpinner(context=ctx, name="bogus_spinner", executor="bogus")
        default.start()
        pub = default.node.create_publisher(String, "spun_topic", 10)
        got = threading.Event()
        sub = default.node.create_subscription(String, "spun_topic", lambda _m: got.set(), 10)
        deadline = time.monotonic() + 10.0
        while not got.is_set() and time.monotonic() < deadline:
            pub.publish(String(data="x"))
            got.wait(0.05)
        assert got.is_set(), "nothing was spun"
        assert default.stop(timeout_s=2.0), "a spin_once loop stops within its poll"
        default.node.destroy_subscription(sub)
        default.node.destroy_publisher(pub)
        default.destroy()
    finally:
        rclpy.try_shutdown(context=ctx)


def test_action_clients_created_under_a_spinning_executor_never_kill_it() -> None:
    """rclpy adds an ActionClient to its node's waitables before setting the lock its wait-set methods
    take; an executor building its wait set in that instant dies (ros2/rclpy#1589). rclpy's own class
    killed it within 5 s of this loop in 2 of 3 runs; the harness's must not, in the same loop."""
    from nav2_msgs.action import ComputePathToPose
    from rclpy.executors import SingleThreadedExecutor

    from robot_harness.nodes._util import ActionClient

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node("action_client_race", context=ctx)
    executor = rclpy.executors.SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    died: list[BaseException] = []

    def spin() -> None:
        try:
            executor.spin()
        except BaseException as exc:  # the executor's death is what this test looks for
            died.append(exc)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    clients = []
    try:
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline and not died:
            clients.append(ActionClient(node, ComputePathToPose, "compute_path_to_pose"))
        assert not died, f"the executor died after {len(clients)} clients: {died[0]!r}"
        assert spinner.is_alive() and len(clients) > 50, len(clients)
        client = clients[-1]
        assert client._lock is client.__dict__["_lock"]  # one lock, the one set before rclpy's constructor
    finally:
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5.0)
        for client in clients:
            client.destroy()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
