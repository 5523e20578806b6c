"""The lifecycle manager: brings the harness's lifecycle nodes up and down as one, and watches them.

Behaves like Nav2's ``nav2_lifecycle_manager`` (read at ros-navigation/navigation2, branch
``kilted``: ``src/lifecycle_manager.cpp``, ``include/nav2_lifecycle_manager/lifecycle_manager.hpp``,
``src/lifecycle_manager_client.cpp``, and ``nav2_util``'s ``LifecycleServiceClient``), written
here in Python:

* Parameters with Kilted's names and defaults: ``node_names`` (string array, in bring-up order),
  ``autostart`` (false), ``bond_timeout`` (4.0 s; 0 turns liveness checks off), ``service_timeout``
  (5.0 s), ``bond_respawn_max_duration`` (10.0 s), ``attempt_respawn_reconnection`` (true). Ours in
  addition: ``bond_heartbeat_period`` (0.25 s, how often the manager polls each node) and
  ``transition_timeout`` (60.0 s, the bound on one ``change_state``: an activation may warm up).
* ``~/manage_nodes`` (``robot_harness/srv/ManageNodes``, Nav2's ``ManageLifecycleNodes`` numbers):
  STARTUP configures every node in order then activates every node in order; PAUSE deactivates in
  reverse order; RESUME activates in order; RESET deactivates then cleans up, in reverse order;
  SHUTDOWN brings every node down (reverse order) and finalizes it; CONFIGURE / CLEANUP one step.
  A command stops at the first node that fails (the later nodes are left as they were) and answers
  ``success: false``. ``~/is_active`` (``std_srvs/Trigger``): true only while every managed node is
  active; otherwise the message names the nodes that are not.
* Each node is reached through ``<name>/change_state`` and ``<name>/get_state``, resolved like any
  client name: a relative name lands in the manager's namespace. A transition counts only when
  ``change_state`` answers success *and* a following ``get_state`` reports the state it leads to.
  Every wait is bounded: ``service_timeout`` for a service to appear and for ``get_state``,
  ``transition_timeout`` for ``change_state``.
* Liveness without bondcpp: once the nodes are active, every ``bond_heartbeat_period`` the manager
  sends each node a ``get_state`` without waiting for it and reads the answer on a later tick. A
  node that has not answered for longer than ``bond_timeout``, or answers with a state other than
  active, is down: the manager logs Nav2's ``CRITICAL FAILURE`` line and resets the nodes in
  reverse order (the last node, the one that admits work, stops first), leaving a silent one alone
  rather than waiting on it. With ``attempt_respawn_reconnection`` it then asks every node for its state once a second
  for up to ``bond_respawn_max_duration`` and, when all answer, runs STARTUP again.

Differences from Nav2, on purpose: the reset after a failure (and SHUTDOWN) reads each node's state
first and applies only the transitions that lead down from it, instead of sending every transition
and logging the refusals; a ``manage_nodes`` command ends a pending respawn wait (someone took
over); a command with an unknown number answers ``success: false``.

The node creates no helper nodes, so a launch ``name=`` may rename it freely.
"""
from __future__ import annotations

import enum
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future

from ..core.errors import UsageError
from ._util import nodes_named, run_node
from .diagnostics import Check, Diagnostics, Level

__all__ = ["ManagedState", "LifecycleManager", "main"]

# lifecycle_msgs/msg/State and Transition ids (stable across ROS 2 distributions).
_UNCONFIGURED, _INACTIVE, _ACTIVE, _FINALIZED = 1, 2, 3, 4
_CONFIGURE, _CLEANUP, _ACTIVATE, _DEACTIVATE, _SHUTDOWN = 1, 2, 3, 4, 5
_STATE_LABELS = {0: "unknown", _UNCONFIGURED: "unconfigured", _INACTIVE: "inactive", _ACTIVE: "active",
                 _FINALIZED: "finalized"}
_TRANSITIONS: dict[int, tuple[str, str, int]] = {
    # transition id -> (what the log says, what the node was asked to do, the state it must lead to)
    _CONFIGURE: ("Configuring", "configure", _INACTIVE),
    _CLEANUP: ("Cleaning up", "clean up", _UNCONFIGURED),
    _ACTIVATE: ("Activating", "activate", _ACTIVE),
    _DEACTIVATE: ("Deactivating", "deactivate", _INACTIVE),
    _SHUTDOWN: ("Shutting down", "shut down", _FINALIZED),
}
_FORWARD = (_CONFIGURE, _ACTIVATE)
"""Transitions applied in ``node_names`` order; every other one goes in reverse order."""


class ManagedState(str, enum.Enum):
    """What the manager last brought the managed nodes to, as a whole (Nav2's ``NodeState``)."""

    UNCONFIGURED = "unconfigured"
    """Every node was reset or cleaned up (also the state before the first command)."""
    INACTIVE = "inactive"
    """Every node was configured or paused."""
    ACTIVE = "active"
    """Every node was activated; liveness is being watched."""
    FINALIZED = "finalized"
    """The nodes were shut down."""
    UNKNOWN = "unknown"
    """A command failed part-way: the nodes may be in different states."""


class _Failed(Exception):
    """One node's step failed; the message says why (caught inside the manager, never raised out)."""


@dataclass
class _Managed:
    """One managed node: its two lifecycle clients and what the manager knows of it."""

    name: str
    change_state: Any
    get_state: Any
    known: str = "unknown"
    """The state label of its last ``get_state`` answer ("unknown" before one, or once it is down)."""
    last_answer: float = 0.0
    pending: Future | None = None
    pending_since: float = 0.0
    probes: list[Future] = field(default_factory=list)
    not_active_since: float | None = None
    """When its answers began saying another state than active (None: its last answer said active)."""
    clash_reported: bool = False
    """A twin (another graph's node of this name) was seen and logged; reset once it is gone."""


class LifecycleManager(Node):
    """Drives ``node_names`` through their lifecycle and resets them when one goes down (module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("lifecycle_manager", **kwargs)
        from lifecycle_msgs.srv import ChangeState, GetState
        from rcl_interfaces.msg import ParameterDescriptor
        from std_srvs.srv import Trigger

        from ..srv import ManageNodes

        self._GetState, self._ChangeState, self._ManageNodes = GetState, ChangeState, ManageNodes
        self.declare_parameter("node_names", Parameter.Type.STRING_ARRAY)
        self.declare_parameter("autostart", False)
        self.declare_parameter("attempt_respawn_reconnection", True)
        loose = ParameterDescriptor(dynamic_typing=True)  # bond_timeout:=1 (an int) is still a duration
        for name, default in (("bond_timeout", 4.0), ("service_timeout", 5.0), ("bond_respawn_max_duration", 10.0),
                              ("bond_heartbeat_period", 0.25), ("transition_timeout", 60.0),
                              ("diagnostic_period_s", 1.0)):
            self.declare_parameter(name, default, loose)
        try:
            names = list(self.get_parameter("node_names").value or [])
        except ParameterUninitializedException:  # none were given
            names = []
        if len(set(names)) != len(names) or any(not n for n in names):
            raise UsageError(f"node_names must be distinct, non-empty node names: {names}", node_names=names)
        self.node_names: list[str] = names
        self.autostart = bool(self.get_parameter("autostart").value)
        self.attempt_respawn_reconnection = bool(self.get_parameter("attempt_respawn_reconnection").value)
        self.bond_timeout = self._seconds("bond_timeout", allow_zero=True)
        self.service_timeout = self._seconds("service_timeout")
        self.bond_respawn_max_duration = self._seconds("bond_respawn_max_duration", allow_zero=True)
        self.bond_heartbeat_period = self._seconds("bond_heartbeat_period")
        self.transition_timeout = self._seconds("transition_timeout")

        self.state = ManagedState.UNCONFIGURED
        # Commands and the liveness timers take turns (Nav2 runs them on one mutually exclusive
        # group); the clients' answers arrive on the reentrant group, on other executor threads,
        # so a command waiting for an answer never holds up the answer itself.
        self._commands = MutuallyExclusiveCallbackGroup()
        self._answers = ReentrantCallbackGroup()
        self._nodes = [
            _Managed(n, self.create_client(ChangeState, f"{n}/change_state", callback_group=self._answers),
                     self.create_client(GetState, f"{n}/get_state", callback_group=self._answers))
            for n in names]
        self._watching = False
        self._respawn_since: float | None = None
        self._respawning = False
        self._manage_srv = self.create_service(ManageNodes, "~/manage_nodes", self._on_manage_nodes,
                                               callback_group=self._commands)
        self._is_active_srv = self.create_service(Trigger, "~/is_active", self._on_is_active,
                                                  callback_group=self._answers)
        self._heartbeat_timer = self.create_timer(self.bond_heartbeat_period, self._heartbeat,
                                                  callback_group=self._commands)
        self._respawn_timer = self.create_timer(1.0, self._check_respawn, callback_group=self._commands)
        self._autostart_timer: Any = None
        if self.autostart:
            self._autostart_timer = self.create_timer(0.01, self._autostart, callback_group=self._commands)
        self.diagnostics = Diagnostics(self, hardware_id=self.get_fully_qualified_name(),
                                       period_s=self._seconds("diagnostic_period_s", allow_zero=True))
        self.diagnostics.add("managed nodes", self._diagnostic)
        if not names:
            self.get_logger().warning("node_names is empty: there is nothing to manage")
        self.get_logger().info(
            f"Managing {names} (autostart={self.autostart}, bond_timeout={self.bond_timeout:.2f} s, "
            f"heartbeat every {self.bond_heartbeat_period:.2f} s)")

    def _seconds(self, name: str, *, allow_zero: bool = False) -> float:
        value = self.get_parameter(name).value
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"{name} must be a number of seconds, not {value!r}", parameter=name) from None
        if seconds < 0 or (seconds == 0 and not allow_zero):
            raise UsageError(f"{name} must be {'>= 0' if allow_zero else '> 0'} s, not {seconds}", parameter=name)
        return seconds

    # -- the commands (Nav2's startup / pause / resume / reset / shutdown / configure / cleanup) ------

    def _command(self, transitions: tuple[int, ...], then: ManagedState, starting: str, done: str,
                 failed: str) -> bool:
        """One manage_nodes command as Nav2 runs it: each transition on every node (in its order), stopping
        at the first failure (state UNKNOWN); watched again once the system is ACTIVE."""
        self.get_logger().info(starting)
        if not all(self._change_all(t) for t in transitions):
            self.get_logger().error(failed)
            self.state = ManagedState.UNKNOWN
            return False
        self.get_logger().info(done)
        self.state = then
        if then is ManagedState.ACTIVE:
            self._start_watching()
        return True

    def startup(self) -> bool:
        """Configure every node in order, then activate every node in order; watch them once active."""
        return self._command((_CONFIGURE, _ACTIVATE), ManagedState.ACTIVE, "Starting managed nodes bringup...",
                             "Managed nodes are active", "Failed to bring up all requested nodes. Aborting bringup.")

    def adopt(self) -> bool:
        """Take over nodes someone else brought up in order (the in-process bring-up, which waits for the
        world before it activates the supervisor): each must answer active now; then they are watched as
        after a startup. False, logged, when one is not."""
        for node in self._nodes:
            try:
                state_id = self._get_state(node)
            except _Failed as exc:
                self.get_logger().error(f"Cannot adopt {node.name}: {exc}")
                return False
            if state_id != _ACTIVE:
                self.get_logger().error(f"Cannot adopt {node.name}: it is {node.known}, not active")
                return False
        self.get_logger().info("Managed nodes are active (brought up in this process)")
        self.state = ManagedState.ACTIVE
        self._start_watching()
        return True

    def stop_watching(self) -> None:
        """No more liveness checks (the graph is being stopped on purpose: its nodes going is not a failure)."""
        self._stop_watching()

    def configure(self) -> bool:
        return self._command((_CONFIGURE,), ManagedState.INACTIVE, "Configuring managed nodes...",
                             "Managed nodes are now configured",
                             "Failed to configure all requested nodes. Aborting bringup.")

    def cleanup(self) -> bool:
        return self._command((_CLEANUP,), ManagedState.UNCONFIGURED, "Cleaning up managed nodes...",
                             "Managed nodes have been cleaned up",
                             "Failed to cleanup all requested nodes. Aborting cleanup.")

    def pause(self) -> bool:
        self._stop_watching()
        return self._command((_DEACTIVATE,), ManagedState.INACTIVE, "Pausing managed nodes...",
                             "Managed nodes have been paused", "Failed to pause nodes: aborting pause")

    def resume(self) -> bool:
        return self._command((_ACTIVATE,), ManagedState.ACTIVE, "Resuming managed nodes...",
                             "Managed nodes are active", "Failed to resume nodes: aborting resume")

    def reset(self) -> bool:
        """Deactivate every node, then clean every node up, in reverse order; stop at the first failure."""
        self._stop_watching()
        return self._command((_DEACTIVATE, _CLEANUP), ManagedState.UNCONFIGURED, "Resetting managed nodes...",
                             "Managed nodes have been reset", "Failed to reset nodes: aborting reset")

    def shutdown(self) -> bool:
        """Bring every node down from wherever it is and finalize it (reverse order); true when all are."""
        self._stop_watching()
        self.get_logger().info("Shutting down managed nodes...")
        self.state = ManagedState.FINALIZED
        ok = self._bring_down(_FINALIZED)
        self.get_logger().info("Managed nodes have been shut down" if ok
                               else "Shut down what answered; some managed nodes are not finalized")
        return ok

    def hard_reset(self, down: Iterable[str] = ()) -> bool:
        """Reset what still answers, past any failure, never waiting on the nodes in ``down``."""
        self._stop_watching()
        self.get_logger().info("Resetting managed nodes...")
        ok = self._bring_down(_UNCONFIGURED, skip=set(down))
        self.get_logger().info("Managed nodes have been reset")
        self.state = ManagedState.UNCONFIGURED
        return ok

    # -- one node, all nodes --------------------------------------------------------------------------

    def _change_all(self, transition: int) -> bool:
        order = self._nodes if transition in _FORWARD else list(reversed(self._nodes))
        return all(self._change_one(n, transition) for n in order)

    def _change_one(self, node: _Managed, transition: int) -> bool:
        verb, asked, expected = _TRANSITIONS[transition]
        self.get_logger().info(f"{verb} {node.name}")
        try:
            if not node.change_state.wait_for_service(timeout_sec=self.service_timeout):
                raise _Failed(f"{node.change_state.srv_name} is not available after {self.service_timeout:.1f} s")
            request = self._ChangeState.Request()
            request.transition.id = transition
            answer = self._wait(node.change_state.call_async(request), self.transition_timeout,
                                node.change_state.srv_name)
            state_id = self._get_state(node)
            now = _STATE_LABELS.get(state_id, str(state_id))
            if not answer.success:
                raise _Failed(f"the node refused to {asked} (it is {now}; its own log says why)")
            if state_id != expected:
                raise _Failed(f"change_state answered success but get_state says {now}, "
                              f"not {_STATE_LABELS[expected]}")
        except _Failed as exc:
            self.get_logger().error(f"Failed to change state for node: {node.name}: {exc}")
            return False
        return True

    def _get_state(self, node: _Managed, timeout_s: float | None = None) -> int:
        """The node's primary state id, asked now (bounded by ``service_timeout``); records it as known."""
        timeout_s = self.service_timeout if timeout_s is None else timeout_s
        if not node.get_state.wait_for_service(timeout_sec=timeout_s):
            node.known = "unknown"
            raise _Failed(f"{node.get_state.srv_name} is not available after {timeout_s:.1f} s")
        try:
            answer = self._wait(node.get_state.call_async(self._GetState.Request()), timeout_s,
                                node.get_state.srv_name)
        except _Failed:
            node.known = "unknown"
            raise
        node.known = answer.current_state.label or _STATE_LABELS.get(answer.current_state.id, "unknown")
        return int(answer.current_state.id)

    def _bring_down(self, target: int, *, skip: set[str] | None = None) -> bool:
        """Take every node (reverse order) down to ``target`` from the state it reports, past failures.

        All deactivations come before any cleanup, as in Nav2's reset, so the last node stops
        serving first. A node in ``skip`` (known to be down), or one that does not answer
        ``get_state`` within ``service_timeout``, is left alone. True when every node got there.
        """
        skip = skip or set()
        ok = True
        states: dict[str, int] = {}
        for node in reversed(self._nodes):
            if node.name in skip:
                node.known = "unknown"
                self.get_logger().warning(f"Skipping {node.name}: it is down")
                ok = False
                continue
            try:
                states[node.name] = self._get_state(node)
            except _Failed as exc:
                self.get_logger().error(f"Skipping {node.name}: {exc}")
                ok = False
        steps = [(_ACTIVE, _DEACTIVATE), (_INACTIVE, _CLEANUP)]
        if target == _FINALIZED:
            steps.append((_UNCONFIGURED, _SHUTDOWN))
        for source, transition in steps:
            for node in reversed(self._nodes):
                if states.get(node.name) == source:
                    if self._change_one(node, transition):
                        states[node.name] = _TRANSITIONS[transition][2]
                    else:
                        ok = False
                        states.pop(node.name, None)
        return ok and all(states.get(n.name) == target for n in self._nodes)

    def _wait(self, future: Future, timeout_s: float, what: str) -> Any:
        """The future's result within ``timeout_s``; ends early (as a failure) when ROS shuts down."""
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        deadline = time.monotonic() + timeout_s
        while not done.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline or not self.context.ok():
                future.cancel()
                raise _Failed(f"no answer from {what} within {timeout_s:.1f} s"
                              if self.context.ok() else f"{what}: shutting down")
        if future.cancelled() or future.exception() is not None:
            raise _Failed(f"{what}: {future.exception() or 'cancelled'}")
        return future.result()

    # -- liveness (what bondcpp does for Nav2) --------------------------------------------------------

    def _start_watching(self) -> None:
        if self.bond_timeout <= 0:
            return
        now = time.monotonic()
        for node in self._nodes:
            node.last_answer, node.pending, node.not_active_since = now, None, None
        self._watching = True
        self.get_logger().info(f"Watching managed nodes: get_state every {self.bond_heartbeat_period:.2f} s, "
                               f"down after {self.bond_timeout:.2f} s without an answer")

    def _stop_watching(self) -> None:
        self._watching = False
        for node in self._nodes:
            if node.pending is not None:
                node.pending.cancel()
                node.pending = None

    def _heartbeat(self) -> None:
        """One liveness tick: read the answers that came, declare a node down, send the next asks."""
        if not self._watching or self.state is not ManagedState.ACTIVE:
            return
        now = time.monotonic()
        for node in self._nodes:
            f = node.pending
            if f is not None and f.done():
                node.pending = None
                if not f.cancelled() and f.exception() is None:
                    state = f.result().current_state
                    node.known = state.label or _STATE_LABELS.get(state.id, "unknown")
                    node.last_answer = now
                    if state.id != _ACTIVE:
                        # Down once it has said so for bond_timeout: one answer may come from another graph's
                        # node of the same name (seen: a twin still configuring), not yet in this graph's view.
                        node.not_active_since = node.not_active_since or now
                        if now - node.not_active_since >= self.bond_timeout:
                            self._node_down(node, f"IS DOWN: it reports {node.known}, not active.", silent=False)
                            return
                    else:
                        node.not_active_since = None
            silent = now - node.last_answer
            if silent > self.bond_timeout:
                self._node_down(node, f"IS DOWN after not receiving a heartbeat for {int(silent * 1000)} ms.",
                                silent=True)
                return
            if node.pending is not None and now - node.pending_since > self.bond_timeout / 2:
                node.pending.cancel()  # ask again: a request may be lost while a server restarts
                node.pending = None
            if node.pending is None:
                node.pending, node.pending_since = node.get_state.call_async(self._GetState.Request()), now

    def _twins(self, node: _Managed) -> int:
        """How many nodes on the graph have the managed node's full name (its get_state's node)."""
        fqn = node.get_state.srv_name.rsplit("/", 1)[0]
        return nodes_named(self, fqn)

    def _node_down(self, node: _Managed, what: str, *, silent: bool) -> None:
        """Nav2's reaction to a broken bond. A silent node is not waited on; one that answered with
        another state than active is brought down with the others. Not while another graph has a node
        of the same name: its get_state answers for it too (lifecycle services carry no ids), so what it
        says is not this node's state; that graph's nodes refuse to configure, and the supervisor refuses
        missions, until it is gone."""
        twins = self._twins(node)
        if twins > 1:
            if not node.clash_reported:
                node.clash_reported = True
                self.get_logger().warning(
                    f"{twins} nodes are named {node.get_state.srv_name.rsplit('/', 1)[0]}: another graph uses this "
                    f"namespace; not acting on get_state answers ({what.strip()}) while it is there")
            node.last_answer = time.monotonic()
            return
        node.clash_reported = False
        node.not_active_since = None
        if silent:
            self.get_logger().info(f"Have not received a heartbeat from {node.name}.")
            node.known = "unknown"
        self.get_logger().error(f"CRITICAL FAILURE: SERVER {node.name} {what} Shutting down related nodes.")
        self.hard_reset(down=[node.name] if silent else [])
        if self.attempt_respawn_reconnection:
            self._respawning, self._respawn_since = True, None
            self.get_logger().info(f"Waiting up to {self.bond_respawn_max_duration:.1f} s for every managed "
                                   "node to answer again")
        else:
            self.get_logger().info("attempt_respawn_reconnection is false: the managed nodes stay down")

    def _check_respawn(self) -> None:
        """Once a second after a failure: when every node answered last tick's get_state, start up again."""
        if not self._respawning:
            return
        if self.state is ManagedState.ACTIVE:  # someone brought the system up meanwhile
            self._end_respawn()
            return
        now = time.monotonic()
        if self._respawn_since is None:
            self._respawn_since = now
        live = 0
        for node in self._nodes:
            answered = any(f.done() and not f.cancelled() and f.exception() is None for f in node.probes)
            live += answered
            for f in node.probes:
                f.cancel()
            node.probes = []
        if live == len(self._nodes):
            self.get_logger().info("Successfully re-established connections from server respawns, starting back up.")
            self._end_respawn()
            self.startup()
            return
        if now - self._respawn_since >= self.bond_respawn_max_duration:
            self.get_logger().info("Failed to re-establish connection from a server crash after maximum timeout.")
            self._end_respawn()
            return
        for node in self._nodes:
            if node.get_state.service_is_ready():
                node.probes.append(node.get_state.call_async(self._GetState.Request()))

    def _end_respawn(self) -> None:
        self._respawning, self._respawn_since = False, None
        for node in self._nodes:
            for f in node.probes:
                f.cancel()
            node.probes = []

    # -- services, autostart, diagnostics -------------------------------------------------------------

    def _autostart(self) -> None:
        timer, self._autostart_timer = self._autostart_timer, None
        if timer is None:
            return
        self.destroy_timer(timer)
        self.startup()

    def _on_manage_nodes(self, request: Any, response: Any) -> Any:
        req = self._ManageNodes.Request
        commands = {req.STARTUP: self.startup, req.PAUSE: self.pause, req.RESUME: self.resume,
                    req.RESET: self.reset, req.SHUTDOWN: self.shutdown, req.CONFIGURE: self.configure,
                    req.CLEANUP: self.cleanup}
        command = commands.get(request.command)
        if command is None:
            self.get_logger().error(f"manage_nodes: unknown command {request.command} (0-6)")
            response.success = False
            return response
        me = self.get_fully_qualified_name()
        twins = nodes_named(self, me)
        if twins > 1:
            # Another graph's manager in this namespace: the nodes this one would drive may be that graph's.
            self.get_logger().error(f"manage_nodes refused: {twins} nodes are named {me} (another graph uses this "
                                    "namespace); give each graph its own namespace or domain")
            response.success = False
            return response
        if self._respawning:
            self.get_logger().info("A manage_nodes command ends the wait for respawned nodes")
            self._end_respawn()
        response.success = bool(command())
        return response

    def is_active(self) -> tuple[bool, str]:
        """True when the manager brought every node to active and none has been seen otherwise since."""
        not_active = [f"{n.name} is {n.known}" for n in self._nodes if n.known != "active"]
        if self.state is ManagedState.ACTIVE and not not_active:
            return True, "Managed nodes are active"
        return False, "; ".join(not_active) or f"managed nodes are {self.state.value}"

    def _on_is_active(self, _request: Any, response: Any) -> Any:
        response.success, response.message = self.is_active()
        return response

    def _diagnostic(self) -> Check:
        level = {ManagedState.FINALIZED: Level.WARN, ManagedState.UNKNOWN: Level.ERROR}.get(self.state, Level.OK)
        message = {ManagedState.UNKNOWN: "An error has occurred during a node state transition",
                   ManagedState.FINALIZED: "Managed nodes have been shut down"}.get(
                       self.state, f"Managed nodes are {self.state.value}")
        return Check(level, message, {n.name: n.known for n in self._nodes})

    def destroy_node(self) -> None:
        self._stop_watching()
        self._end_respawn()
        self.diagnostics.stop()
        super().destroy_node()


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``ros2 run robot_harness lifecycle_manager``."""
    return run_node(LifecycleManager, argv, threads=4)


if __name__ == "__main__":
    import sys

    sys.exit(main())
