"""Small helpers shared by the nodes: bounded waits on rclpy futures, params."""
from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient as _RclpyActionClient
from rclpy.task import Future

from ..core.errors import HarnessError, HarnessTimeout, UsageError

__all__ = ["ActionClient", "LatchedSource", "wait_future", "declare_params", "run_node", "transition_failed", "autostart"]


def autostart(node: Any) -> bool:
    """Configure, then activate only if configuring succeeded (``autostart:=true``, one process per node).

    A node whose configure failed stays unconfigured, with the reason logged once, instead of being
    activated over a half-built state. True when the node is active."""
    ret = node.trigger_configure()
    if getattr(ret, "name", str(ret)) != "SUCCESS":
        why = getattr(node, "transition_error", None)
        node.get_logger().error(f"autostart: configure failed ({why.message if why is not None else ret}); "
                                "staying unconfigured: fix the parameter and restart, or configure it again")
        return False
    node.trigger_activate()
    return True


def transition_failed(node: Any, what: str, exc: BaseException) -> Any:
    """Log why a lifecycle transition failed and keep it as ``node.transition_error``: a bring-up in
    this process raises it (its own exit code and message) instead of "configure failed, see the log".

    A ``HarnessError`` keeps its class (a journal error stays a journal error, exit 5) with ``what``
    put before its message; anything else (a bad parameter, an unreadable file) is a ``UsageError``.
    """
    from pydantic import ValidationError
    from rclpy.lifecycle import TransitionCallbackReturn

    if isinstance(exc, HarnessError):
        detail = exc.message
    elif isinstance(exc, ValidationError):  # one line, every field named
        detail = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
    elif isinstance(exc, OSError) and exc.strerror:
        detail = f"{exc.strerror}: {exc.filename or ''}"
    else:
        detail = str(exc)
    message = f"{node.get_name()}: {what}: {detail}" if what else f"{node.get_name()}: {detail}"
    node.get_logger().error(message)
    if isinstance(exc, HarnessError):
        exc.message = message
        exc.args = (message,)
        node.transition_error = exc
    else:
        node.transition_error = UsageError(message, node=node.get_name())
    return TransitionCallbackReturn.FAILURE


class ActionClient(_RclpyActionClient):
    """rclpy's ActionClient, safe to create while an executor spins its node in another thread.

    rclpy (up to and including Kilted's wheels) adds the client to its node's waitables before it sets
    the lock its wait-set methods take, so an executor building its wait set in that instant dies with
    ``AttributeError: 'ActionClient' object has no attribute '_lock'`` and the node stops spinning
    (ros2/rclpy#1589). Measured here: creating clients in a loop under a spinning executor killed it
    in 2 of 3 five-second runs. The lock is set here before rclpy's constructor runs, and kept when
    that constructor sets it again, so the executor and the client always share one lock. Everything
    else is rclpy's own code; on an rclpy with the upstream fix this is a harmless no-op."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__["_lock"] = threading.Lock()
        super().__init__(*args, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_lock" and "_lock" in self.__dict__:
            return  # the lock the executor may already hold stays the client's lock
        super().__setattr__(name, value)


def wait_future(future: Future, timeout_s: float, what: str) -> Any:
    """Block the calling executor thread until ``future`` is done, at most ``timeout_s``.

    Only valid from a thread other than the one that must complete the future
    (the nodes run in a MultiThreadedExecutor with reentrant callback groups).
    """
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout_s):
        future.cancel()
        raise HarnessTimeout(f"{what}: no answer within {timeout_s:.1f} s", what=what, timeout_s=timeout_s)
    exc = future.exception()
    if exc is not None:
        raise exc
    return future.result()


def declare_params(node: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """Declare parameters with defaults and return their current values."""
    values = {}
    for name, default in defaults.items():
        if not node.has_parameter(name):
            node.declare_parameter(name, default)
        values[name] = node.get_parameter(name).value
    return values


def run_node(factory: Any, argv: list[str] | None, *, threads: int = 4) -> int:
    """The body of every node executable: init, spin, clean up.

    ``threads >= 2``: the harness's MultiThreadedExecutor
    (:mod:`robot_harness.nodes.executors`, rclpy's without its resubmit busy
    loop) — a node that blocks one thread
    on a future (the supervisor's mission loop) needs others to complete it,
    and the default thread count is the number of cores (2 on small robots).
    ``threads == 1``: a SingleThreadedExecutor, cheaper for nodes whose
    callbacks never block (the high-rate snapshot aggregator).
    """
    import sys

    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    from robot_harness.nodes.executors import MultiThreadedExecutor

    rclpy.init(args=argv if argv is not None else sys.argv)
    node = None
    try:
        node = factory()
        executor = SingleThreadedExecutor() if threads == 1 else MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def full_node_names(node: Any) -> list[str]:
    """Every node on the graph as ``/ns/name``, duplicates kept (two graphs in one namespace show twice)."""
    return [f"{ns.rstrip('/')}/{name}" for name, ns in node.get_node_names_and_namespaces()]


def nodes_named(node: Any, fqn: str) -> int:
    """How many nodes on the graph, as ``node`` sees it, have the full name ``fqn``."""
    return full_node_names(node).count(fqn)


class LatchedSource:
    """Which publishers a publish-on-change topic's last message could have come from.

    An action's status topic publishes only on change (transient local). When
    the server process dies and a new one starts, the last array we hold is
    the dead server's: it must not be taken for the new server's state. A
    message remembers the publishers on the graph when it arrived; once none
    of them remains, that message describes nobody (``gone``).
    """

    def __init__(self, node: Any, topic: str) -> None:
        self._node = node
        self._topic = topic
        self._sources: frozenset[bytes] = frozenset()

    def publishers(self) -> frozenset[bytes]:
        return frozenset(bytes(bytearray(i.endpoint_gid)) for i in self._node.get_publishers_info_by_topic(self._topic))

    def on_message(self) -> None:
        self._sources = self.publishers()

    def gone(self) -> bool:
        """True (once) when every publisher that could have sent the last message has left the graph."""
        if not self._sources:
            return False
        if self._sources & self.publishers():
            return False
        self._sources = frozenset()
        return True
