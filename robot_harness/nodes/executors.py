"""A MultiThreadedExecutor that does not spin on callbacks waiting for a worker.

rclpy's ``MultiThreadedExecutor`` (up to and including Kilted's 9.1.x) yields,
on every pass of its wait loop, each task that is *in progress but not yet
executing*; a task that was just handed to the thread pool is such a task, so
the spin thread resubmits it again and again without waiting, holding the GIL
while the pool's workers are trying to start it (ros2/rclpy#1452, fixed
upstream by ros2/rclpy#1547). Measured here: a node with one subscription
burned four CPU seconds per wall second and starved a 50 Hz thread in the
same process down to 20 Hz.

:class:`MultiThreadedExecutor` below keeps rclpy's executor and changes one
thing: a task that is already queued in the pool is not queued again; the
spin thread instead blocks (GIL released) until a worker starts it, bounded by
``_QUEUED_WAIT_S``. Everything else (wait set, callback groups, shutdown) is
rclpy's own code. On an rclpy with the upstream fix this is a harmless no-op.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from rclpy.executors import (
    ConditionReachedException,
    ExternalShutdownException,
    ShutdownException,
    TimeoutException,
)
from rclpy.executors import MultiThreadedExecutor as _RclpyMultiThreadedExecutor

__all__ = ["BackgroundSpinner", "MultiThreadedExecutor"]

_QUEUED_WAIT_S = 0.05
"""Upper bound on one wait for a worker to start an already-queued task."""


class MultiThreadedExecutor(_RclpyMultiThreadedExecutor):
    """rclpy's MultiThreadedExecutor without the resubmit busy loop (rclpy#1452)."""

    def __init__(self, num_threads: int | None = None, *, context: Any = None) -> None:
        super().__init__(num_threads=num_threads, context=context)
        self._queued: set[Any] = set()
        self._queued_cond = threading.Condition()

    def _run_queued(self, handler: Any) -> None:
        with self._queued_cond:
            self._queued.discard(handler)
            self._queued_cond.notify_all()
        handler()

    def _spin_once_impl(
        self,
        timeout_sec: Any = None,
        wait_condition: Callable[[], bool] = lambda: False,
    ) -> None:
        try:
            handler, _entity, _node = self.wait_for_ready_callbacks(timeout_sec, None, wait_condition)
        except (ExternalShutdownException, ShutdownException, TimeoutException, ConditionReachedException):
            return
        with self._queued_cond:
            if handler in self._queued:
                # Already waiting for a worker: let one start it rather than
                # queueing it again (which is what makes rclpy's loop spin).
                self._queued_cond.wait_for(lambda: handler not in self._queued, _QUEUED_WAIT_S)
                return
            self._queued.add(handler)
        try:
            self._executor.submit(self._run_queued, handler)
        except RuntimeError:
            if self._is_shutdown:  # shutdown() closed the pool under this wait
                return
            raise
        self._futures.append(handler)
        for future in self._futures[:]:
            if future.done():
                self._futures.remove(future)
                future.result()  # raise any exceptions, as rclpy does


SPINNER_EXECUTORS = ("single_threaded", "events")
DEFAULT_SPINNER_EXECUTOR = "single_threaded"


class BackgroundSpinner:
    """A plain node on its own single-threaded executor thread, for a node's latency-critical clients.

    The supervisor's mission loop blocks a worker of its MultiThreadedExecutor
    for the whole mission and, on the way to every dispatch, waits on a
    snapshot capture and a goal acceptance. Those clients live on this node
    instead, spun by rclpy's ``SingleThreadedExecutor`` on a thread of its own,
    driven by a ``spin_once`` loop so that :meth:`stop` is prompt. Callbacks on
    this node must never block (no waiting on futures inside them); callers on
    other threads wait on the futures it completes.

    ``executor="events"`` spins it with ``rclpy.experimental.EventsExecutor``
    instead, which ``bench/overhead.py`` measured faster on this path. It is not
    the default: it is experimental in rclpy 9.1 (Kilted), its C++ calls back
    from DDS threads into objects Python frees (ros2/rclpy#1644 crashes the
    process when entities go away with callbacks registered), its destructor
    runs a teardown that can throw (``std::terminate``), and it takes over the
    process's SIGINT/SIGTERM. A harness that drives a robot must not be taken
    down by its executor. (Three of seven full test runs with it as the default
    ended in a native abort of the process; the one caught with Python's stack
    aborted inside ``gc.collect()`` after the graph's context was shut down.)
    """

    POLL_S = 0.1

    def __init__(self, *, context: Any, name: str, namespace: str = "",
                 executor: str = DEFAULT_SPINNER_EXECUTOR) -> None:
        from rclpy.node import Node

        if executor not in SPINNER_EXECUTORS:
            raise ValueError(f"spinner executor {executor!r} is not one of {', '.join(SPINNER_EXECUTORS)}")
        self.kind = executor
        if executor == "events":
            from rclpy.experimental import EventsExecutor

            self.executor: Any = EventsExecutor(context=context)
        else:
            from rclpy.executors import SingleThreadedExecutor

            self.executor = SingleThreadedExecutor(context=context)
        self.context = context
        # A node-local remap of its own name: ``ros2 launch`` starts the process with
        # ``--ros-args -r __node:=<launch name>``, a global remap that would rename this helper
        # to its parent's name too (Nav2's lifecycle nodes pin their helper nodes' names the
        # same way). Local arguments win over global ones; the namespace and topic remaps
        # still apply.
        self.node = Node(name, namespace=namespace or None, context=context,
                         cli_args=["--ros-args", "-r", f"__node:={name}"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=f"{name}-spinner", daemon=True)
        self.error: BaseException | None = None
        """The last error a ``spin_once`` raised (logged; spinning went on)."""
        self.errors = 0
        self._destroyed = False

    def start(self) -> "BackgroundSpinner":
        self.executor.add_node(self.node)
        self._thread.start()
        return self

    def _spin(self) -> None:
        """Spin until stopped. An error from one ``spin_once`` is logged and spinning goes on: a
        dead spinner would leave every client on this node unanswered for the node's lifetime."""
        backoff = 0.0
        while not self._stop.is_set() and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=self.POLL_S)
                backoff = 0.0
            except (ExternalShutdownException, ShutdownException):
                return
            except Exception as exc:  # noqa: BLE001 - see the docstring
                if self._stop.is_set() or not self.context.ok():
                    return
                self.error = exc
                self.errors += 1
                if self.errors <= 10 or self.errors % 100 == 0:  # a persistent error is not logged 100 times/s
                    try:
                        self.node.get_logger().error(
                            f"spinner {self.node.get_name()}: {type(exc).__name__}: {exc}; spinning on "
                            f"({self.errors} error(s) so far)")
                    except Exception:  # noqa: BLE001 - the node may be going away
                        pass
                backoff = min(1.0, max(0.01, backoff * 2))  # 10 ms doubling to 1 s, reset by a clean pass
                self._stop.wait(backoff)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 2.0) -> bool:
        """Stop spinning (before any entity on the node is destroyed); True when the thread ended."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)
        return not self._thread.is_alive()

    @property
    def quiet(self) -> bool:
        """Nothing spins the node now: its entities may be destroyed. Destroying one under a
        spinning EventsExecutor frees what its thread still uses (ros2/rclpy#1644): a native crash
        of the whole process, not an exception."""
        return not self._thread.is_alive()

    def destroy(self) -> None:
        """After :meth:`stop` and after the owners destroyed their entities (idempotent). A thread
        that did not stop leaves the node to the process's exit, logged, rather than crash it."""
        if self._destroyed:
            return
        self._destroyed = True
        if not self.stop():
            try:
                self.node.get_logger().error(
                    f"spinner {self.node.get_name()} did not stop; its node is left to the process's exit")
            except Exception:  # noqa: BLE001 - the context may be shut down already
                pass
            return
        try:
            self.executor.remove_node(self.node)
        except Exception:  # noqa: BLE001 - the context may be shut down already
            pass
        try:
            self.executor.shutdown()
        except Exception:  # noqa: BLE001 - the context may be shut down already
            pass
        self.node.destroy_node()
