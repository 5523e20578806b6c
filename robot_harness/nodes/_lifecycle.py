"""The harness's lifecycle node: the transitions are a template, the nodes fill in small hooks.

Every harness node follows the lifecycle that launch_ros and nav2's lifecycle
manager drive: resources are built in ``on_configure`` and destroyed in
``on_cleanup``, requests are served only while active, and ``on_activate`` /
``on_deactivate`` call ``super()`` so lifecycle publishers (and any other
managed entity) turn on and off with the node. :class:`HarnessLifecycleNode`
writes those transitions once; a node overrides the hooks, never ``on_*``:

========================  ===================================================
hook                      called
========================  ===================================================
``build(params)``         configuring; raise :class:`ConfigureError` to fail
``activating()``          activating, before the node serves requests
``activated()``           activating, once it serves them (``active`` is True)
``deactivated()``         deactivating, once it has stopped serving them
``release()``             cleaning up; also after a failed configure, on error
                          processing and in ``destroy_node`` (idempotent)
``shutting_down()``       shutting down (default: ``release()``)
========================  ===================================================

Configuring is refused while another node on the domain has this node's fully
qualified name (another graph in the same namespace): its services would answer
this graph's requests. Discovery takes a moment, so the graph is watched until
``name_clash_discovery_s`` after the node was created, and a twin must outlast
``name_clash_grace_s`` (25 s: a killed graph stays in discovery for its DDS
lease, 20 s by Fast DDS's default).

A configure that fails names the reason once (``_util.transition_failed``:
``transition_error`` for a bring-up in this process, one log line) and leaves
nothing half-built behind. With ``autostart`` among the node's parameters,
:meth:`autostart_if_asked` (the end of the subclass's ``__init__``) configures
and activates only if configuring succeeded (``_util.autostart``).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from ._util import autostart, declare_params, nodes_named, transition_failed
from .diagnostics import Check, Diagnostics, lifecycle_check

__all__ = ["ConfigureError", "HarnessLifecycleNode"]


class ConfigureError(Exception):
    """Raised by :meth:`HarnessLifecycleNode.build`: configuring fails with ``what`` and its ``cause``.

    Not a ``HarnessError``: it never leaves the node; ``transition_failed``
    turns the cause into the node's ``transition_error``.
    """

    def __init__(self, what: str, cause: BaseException) -> None:
        super().__init__(f"{what}: {cause}" if what else str(cause))
        self.what = what
        self.cause = cause


class HarnessLifecycleNode(LifecycleNode):
    """A ``LifecycleNode`` whose transition callbacks are a template over small hooks (module docstring).

    ``params`` are declared with their defaults at construction; ``build``
    receives their current values (a lifecycle manager may have set them
    since). ``active`` is True exactly while the node is active.
    """

    check_twins = True
    """Refuse to configure beside a node of the same full name (False: the simulated robot's nodes, stand-ins
    for the robot's own; a second navigator is the supervisor's to refuse, ``SupervisorNode.name_clash``)."""

    def __init__(self, node_name: str, *, params: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._born = time.monotonic()
        self._p = declare_params(self, dict(params or {}))
        # The grace outlasts a killed node's DDS lease: Fast DDS's default is 20 s (Cyclone's 10 s);
        # config/fastdds_loopback.xml makes it 4 s, and a site with a short lease may shorten this too.
        for name, default in (("name_clash_discovery_s", 2.0), ("name_clash_grace_s", 25.0)):
            if not self.has_parameter(name):
                self.declare_parameter(name, default)
        self._active = False
        self.transition_error: Exception | None = None
        """Why the last configure failed (``_util.transition_failed``); None after one that succeeded."""
        # /diagnostics from construction on, so a node whose configure failed reports ERROR with why.
        # The subclass's tasks are asked for on the first publish (its __init__ has returned by then).
        if not self.has_parameter("diagnostic_period_s"):
            self.declare_parameter("diagnostic_period_s", 1.0)
        self.diagnostics = Diagnostics(self, hardware_id=self.get_fully_qualified_name(),
                                       period_s=float(self.get_parameter("diagnostic_period_s").value),
                                       tasks_factory=self.diagnostic_tasks)
        self.diagnostics.add("lifecycle", self._lifecycle_diagnostic)

    @property
    def active(self) -> bool:
        return self._active

    def parameters(self) -> dict[str, Any]:
        """The current values of the parameters declared at construction."""
        return {k: self.get_parameter(k).value for k in self._p}

    def autostart_if_asked(self) -> bool:
        """Configure and activate now when the ``autostart`` parameter is true; True when active."""
        return bool(self._p.get("autostart")) and autostart(self)

    def diagnostic_tasks(self) -> dict[str, Callable[[], Check]]:
        """The node's own ``/diagnostics`` tasks (name -> check), asked for once, on the first publish."""
        return {}

    def _lifecycle_diagnostic(self) -> Check:
        err = self.transition_error
        return lifecycle_check(self._state_machine.current_state[1],
                               (getattr(err, "message", None) or str(err)) if err is not None else None)

    # -- hooks ---------------------------------------------------------------------

    def build(self, params: dict[str, Any]) -> None:
        """Create the node's resources from ``params``; raise :class:`ConfigureError` to refuse."""

    def activating(self) -> None:
        """Work before the node serves requests (warm-ups, reconciliation); raise :class:`ConfigureError`
        to refuse the activation (the node stays inactive, the reason kept as ``transition_error``)."""

    def activated(self) -> None:
        """Work once the node serves requests (timers, servers that call back into it)."""

    def deactivated(self) -> None:
        """Work once the node no longer serves requests (stop what runs, cancel timers)."""

    def release(self) -> None:
        """Destroy what ``build`` created. Idempotent, and safe after a ``build`` that failed half-way."""

    def shutting_down(self) -> None:
        """The node is being finalised; by default the same as cleaning up."""
        self.release()

    # -- the template ------------------------------------------------------------------

    def twins(self) -> int:
        """How many nodes on the graph have this node's fully qualified name (itself included)."""
        return nodes_named(self, self.get_fully_qualified_name())

    def wait_out_a_twin(self) -> int:
        """Watch for a twin until discovery had its time, then give one the grace to leave; the count left."""
        discovered = self._born + float(self.get_parameter("name_clash_discovery_s").value)
        count = self.twins()
        while count < 2 and time.monotonic() < discovered:
            time.sleep(0.1)
            count = self.twins()
        deadline = time.monotonic() + float(self.get_parameter("name_clash_grace_s").value)
        while count > 1 and time.monotonic() < deadline:
            time.sleep(0.5)
            count = self.twins()
        return count

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.transition_error = None
        count = self.wait_out_a_twin() if self.check_twins else 1
        if count > 1:
            from ..core.errors import NameClash

            me = self.get_fully_qualified_name()
            return transition_failed(self, "refusing to configure", NameClash(
                f"{count} nodes are named {me} on ROS domain {self.context.get_domain_id()}: another graph uses "
                f"this namespace ({self.get_namespace()}); give each graph its own namespace (--namespace / "
                "namespace:=) or domain", node=me))
        try:
            self.build(self.parameters())
        except ConfigureError as exc:
            self._release_quietly()
            return transition_failed(self, exc.what, exc.cause)
        return super().on_configure(state)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.transition_error = None
        try:
            self.activating()
        except ConfigureError as exc:  # activation refused (e.g. the node's names are taken): stays inactive
            return transition_failed(self, exc.what, exc.cause)
        self._active = True
        self.activated()
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self.deactivated()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self.shutting_down()
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised: back to unconfigured (rclpy's default) with nothing half-built kept."""
        self._active = False
        self._release_quietly()
        return super().on_error(state)

    def destroy_node(self) -> None:
        """Release what configure made (helper threads included) even without a cleanup transition."""
        self._active = False
        if "diagnostics" in self.__dict__:  # else its construction failed (a bad parameter): nothing was built
            self._release_quietly()
            self.diagnostics.stop()
        super().destroy_node()
        # rclpy's LifecycleNode never destroys its state machine, which holds the rcl node: without this
        # the node (and its lifecycle services) stay on the ROS graph until the process exits, and a
        # graph stopped in a process that goes on (BringUp.stop) looks alive to every other graph.
        machine = getattr(self, "_state_machine", None)
        if machine is not None:
            machine.destroy_when_not_in_use()

    def _release_quietly(self) -> None:
        try:
            self.release()
        except Exception as exc:  # noqa: BLE001 - the transition's own outcome is what gets reported
            self.get_logger().warning(f"releasing resources: {type(exc).__name__}: {exc}")
