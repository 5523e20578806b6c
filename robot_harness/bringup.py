"""In-process bring-up: the same nodes and parameter files as
launch/harness.launch.py, in one process on a MultiThreadedExecutor.

``launch`` is not installable on every development machine; this module is
what ``robot-harness up``/``run``/``demo`` and the integration tests use. A
test checks that it and the launch file list the same nodes and files.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

__all__ = ["NodeSpec", "NODE_SPECS", "config_dir", "load_node_params", "provider_nav_namespaces", "BringUp"]


@dataclass(frozen=True)
class NodeSpec:
    executable: str
    name: str
    param_file: str
    sim_only: bool = False


NODE_SPECS: tuple[NodeSpec, ...] = (
    NodeSpec("sim_robot", "sim_robot", "sim_robot.yaml", sim_only=True),
    NodeSpec("snapshot_aggregator", "snapshot_aggregator", "snapshot_aggregator.yaml"),
    NodeSpec("planner", "planner", "planner.yaml"),
    NodeSpec("verifier", "verifier", "verifier.yaml"),
    NodeSpec("recovery", "recovery", "recovery.yaml"),
    NodeSpec("supervisor", "supervisor", "supervisor.yaml"),
)


def config_dir() -> Path:
    """The package's config/ directory (source checkout or install share)."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "config",):
        if (candidate / "supervisor.yaml").is_file():
            return candidate
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("robot_harness")) / "config"
    except Exception as exc:  # pragma: no cover - depends on the installation
        raise FileNotFoundError("cannot find robot_harness/config") from exc


def load_node_params(path: Path, node_name: str, namespace: str = "") -> dict[str, Any]:
    """Parameters rclpy would give the node ``<namespace>/<node_name>`` from the ROS 2 parameter file
    ``path`` (``name: ros__parameters:``, ``/**``, nested namespaces, ``<robot_namespace>``), flattened; the
    launch file reads its parameters through the same functions (``robot_harness.params``)."""
    from .params import node_params, rewrite_params

    return node_params(rewrite_params(path.read_text(), namespace), node_name, namespace)


def provider_nav_namespaces(supervisor_params: Mapping[str, Any]) -> list[str]:
    """The snapshot aggregator's ``nav_namespaces`` for the harness configuration the supervisor is given
    (``harness_config_file``, ``harness_config_json``): the action namespaces of the navigation provider cards
    (``core/routing.navigation_providers``, the rule the supervisor builds its Nav2 ports by), so a goal on any
    of them is seen in every snapshot; empty with none. A configuration that does not load gives none here:
    the supervisor refuses to configure with it and says why."""
    import json

    from .core.config import load_harness_config
    from .core.errors import UsageError
    from .core.routing import navigation_providers

    path = str(supervisor_params.get("harness_config_file") or "")
    text = str(supervisor_params.get("harness_config_json") or "")
    try:
        config = load_harness_config(file_text=Path(path).read_text() if path else None,
                                     overrides=json.loads(text) if text else {})
    except (OSError, ValueError, UsageError, yaml.YAMLError):
        return []
    return [ns for ns in dict.fromkeys(navigation_providers(config.providers).values()) if ns]


@contextlib.contextmanager
def _parameter_errors(node: str, path: Path) -> Any:
    """A parameter value rclpy refuses (an int where the node declares a float, a list of mixed types) is the
    parameter file's mistake: a usage error naming the node and the file, not an internal error."""
    from rclpy.exceptions import ParameterException

    from .core.errors import UsageError

    try:
        yield
    except (ParameterException, TypeError) as exc:
        raise UsageError(f"{node}: a parameter from {path} (or an override) is not what the node takes: "
                         f"{type(exc).__name__}: {exc}", node=node, path=str(path)) from exc


def _to_parameters(values: Mapping[str, Any]) -> list[Any]:
    from rclpy.parameter import Parameter

    return [Parameter(name, value=value) for name, value in values.items()]


class BringUp:
    """Start the node graph in this process; ``with BringUp(...) as graph:``."""

    def __init__(
        self,
        *,
        use_sim: bool = True,
        params_dir: Path | None = None,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        threads: int = 6,
        domain_id: int | None = None,
        namespace: str = "",
        params_file: Path | None = None,
        use_sim_time: bool = False,
        log_level: str = "",
    ) -> None:
        """``namespace``: every node (the simulated robot's too) and every name they use relatively lives
        under it (``robot1`` -> ``/robot1/supervisor``, ``/robot1/robot_harness/mission``); "" is the root.
        ``params_file``: one parameter file for every node (as the launch file's ``params_file:=``), instead
        of each node's own file in ``params_dir``. ``use_sim_time`` and ``log_level`` (debug, info, warn,
        error, fatal) apply to every node, as the launch file's arguments do."""
        from .core.errors import UsageError
        from .params import normalize_namespace

        try:
            self.namespace = normalize_namespace(namespace)
        except (TypeError, ValueError) as exc:
            raise UsageError(str(exc), namespace=namespace) from exc
        if params_file is not None and not Path(params_file).is_file():
            raise UsageError(f"no parameter file at {params_file}", path=str(params_file))
        self.params_file = Path(params_file) if params_file is not None else None
        self.use_sim_time = bool(use_sim_time)
        levels = ("", "debug", "info", "warn", "error", "fatal")
        if log_level.lower() not in levels:
            raise UsageError(f"log level {log_level!r} is not one of {', '.join(levels[1:])}", log_level=log_level)
        self.log_level = log_level.lower()
        self.use_sim = use_sim
        self.params_dir = params_dir or config_dir()
        self.overrides = {k: dict(v) for k, v in (overrides or {}).items()}
        self.threads = threads
        self.domain_id = domain_id
        self.nodes: dict[str, Any] = {}
        self.sim: Any = None
        self.context: Any = None
        self.executor: Any = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._guests: list[Callable[[], None]] = []
        self.stop_timeout_s = 15.0
        """How long ``stop()`` waits for a mission in progress to end (cancelled, on the record)."""
        self.with_manager = False
        """True (``robot-harness up``): once started, a ``lifecycle_manager`` node adopts the harness nodes
        and serves ``lifecycle_manager/manage_nodes`` and ``is_active`` as under the launch file (without
        its liveness watch: ``bond_timeout`` 0 in one process)."""
        self.manager: Any = None
        self.preflight_s = 0.0
        """With > 0 (``robot-harness up``): before starting anything, look this long for another graph
        holding the namespace (its supervisor or robot) and refuse to start (``NameClash``) while it is
        there past the supervisor's grace (a killed graph leaves discovery within its DDS lease)."""
        self.unready: dict[str, str] = {}
        """After ``start(require_ready=False)``: what was still not observable when the supervisor was activated."""

    def add_node(self, node: Any, destroy: Callable[[], None] | None = None) -> None:
        """Spin a caller's node (a client, a test probe) on this graph's executor.

        It is destroyed by ``stop()`` once the executor has stopped: destroying
        an entity while another thread waits on it fails in rcl ("pointer is
        invalid"), and ``remove_node`` does not wait for a wait in progress.
        """
        self.executor.add_node(node)
        self._guests.append(destroy or node.destroy_node)

    def specs(self) -> list[NodeSpec]:
        return [s for s in NODE_SPECS if self.use_sim or not s.sim_only]

    def params_for(self, spec: NodeSpec) -> dict[str, Any]:
        from .core.errors import UsageError

        path = self.params_file or (self.params_dir / spec.param_file)
        try:
            values = load_node_params(path, spec.name, self.namespace)
        except (ValueError, yaml.YAMLError) as exc:
            raise UsageError(f"parameter file {path}: {exc}", path=str(path)) from exc
        if self.use_sim_time:
            values["use_sim_time"] = True
        values.update(self.overrides.get(spec.name, {}))
        if spec.name == "snapshot_aggregator" and "nav_namespaces" not in values:
            extra = provider_nav_namespaces(self.params_for(next(s for s in NODE_SPECS if s.name == "supervisor")))
            if extra:  # else the node's default: rclpy cannot type an empty list
                values["nav_namespaces"] = extra
        return values

    def _transition(self, name: str, step: str) -> None:
        """One lifecycle transition; a failure raises the node's own error (``transition_error``: a
        journal that cannot open, a planner with no model), so the caller gets its exit code and cause."""
        node = self.nodes[name]
        node.transition_error = None
        ret = getattr(node, f"trigger_{step}")()
        if getattr(ret, "name", str(ret)) != "SUCCESS":
            if node.transition_error is not None:
                raise node.transition_error
            raise RuntimeError(f"{name}: {step} failed ({ret}); see the node's log")

    def start(self, *, wait_ready: bool = True, require_ready: bool = True, ready_timeout_s: float = 15.0) -> "BringUp":
        """Configure and activate the graph, the supervisor last.

        With ``wait_ready`` (and the simulated robot) the supervisor is activated once the world is
        observable, waiting up to ``ready_timeout_s``; with ``require_ready`` a world still not
        observable then is a ``HarnessTimeout`` naming what is missing and why. Without it the graph
        comes up anyway (``robot-harness up``): ``unready`` says what is missing, and the supervisor
        refuses missions with that reason until it is fresh.
        """
        import rclpy
        from robot_harness.nodes.executors import MultiThreadedExecutor

        from .core.errors import HarnessTimeout
        from .nodes.planner import PlannerNode
        from .nodes.snapshot_aggregator import SnapshotAggregator
        from .nodes.supervisor import SupervisorNode
        from .nodes.recovery import RecoveryNode
        from .nodes.verifier import VerifierNode

        self.context = rclpy.Context()
        self._stopping = False
        kw = {} if self.domain_id is None else {"domain_id": self.domain_id}
        rclpy.init(context=self.context, **kw)
        self.executor = MultiThreadedExecutor(num_threads=self.threads, context=self.context)
        if self.preflight_s > 0:
            try:
                self._preflight()
            except BaseException:
                self.stop()
                raise
        node_classes = {"snapshot_aggregator": SnapshotAggregator, "planner": PlannerNode, "verifier": VerifierNode,
                        "recovery": RecoveryNode, "supervisor": SupervisorNode}
        try:
            for spec in self.specs():
                params = self.params_for(spec)
                with _parameter_errors(spec.name, self.params_file or self.params_dir / spec.param_file):
                    self._make_node(spec, params, node_classes)
            if self.log_level:
                from rclpy.logging import LoggingSeverity

                for node in [*self.nodes.values(), *(self.sim.nodes if self.sim is not None else ())]:
                    node.get_logger().set_level(LoggingSeverity[self.log_level.upper()])
            self._thread = threading.Thread(target=self._spin, name="robot_harness-executor", daemon=True)
            self._thread.start()
            # Lifecycle order: everything configured, the observers active, and
            # the supervisor (which admits missions) last, once the world is
            # observable — a mission admitted earlier would only meet MISSING fields.
            for name in ("snapshot_aggregator", "planner", "verifier", "recovery", "supervisor"):
                self._transition(name, "configure")
            for name in ("snapshot_aggregator", "planner", "verifier", "recovery"):
                self._transition(name, "activate")
            if self.use_sim and wait_ready:
                try:
                    self.wait_ready(ready_timeout_s)
                except HarnessTimeout:
                    if require_ready:
                        raise
                    self.unready = self.not_ready()
            self._transition("supervisor", "activate")
            if self.with_manager:
                self._start_manager()
        except BaseException:
            self.stop()
            raise
        return self

    MANAGED = ("snapshot_aggregator", "planner", "verifier", "recovery", "supervisor")
    """The harness's lifecycle nodes in bring-up order (the launch file's lifecycle_manager node_names)."""

    def _start_manager(self) -> None:
        from rclpy.parameter import Parameter

        from .core.errors import BackendUnavailable
        from .nodes.lifecycle_manager import LifecycleManager

        self.manager = LifecycleManager(context=self.context, namespace=self.namespace, parameter_overrides=[
            Parameter("node_names", value=list(self.MANAGED)), Parameter("autostart", value=False),
            # No liveness watch in one process: a node cannot die alone here, and a loaded executor answering
            # get_state late must not reset a working graph (a failed transition still says why).
            Parameter("bond_timeout", value=0.0)])
        self.executor.add_node(self.manager)
        if not self.manager.adopt():
            raise BackendUnavailable("lifecycle_manager could not adopt the harness nodes (see its log)")

    def _make_node(self, spec: NodeSpec, params: dict[str, Any], node_classes: Mapping[str, Any]) -> None:
        if spec.name == "sim_robot":
            from .nodes.sim_robot import DieMode, SimRobot

            params["die_mode"] = DieMode.SILENT.value  # one process: "dying" must not kill the harness
            self.sim = SimRobot(context=self.context, namespace=self.namespace,
                                parameter_overrides=_to_parameters(params))
            self.sim.add_to_executor(self.executor)
            return
        params["autostart"] = False  # this bring-up is the lifecycle manager
        # Nodes made together in one process need no discovery window of their own: `up` looked for
        # another graph in the namespace before starting (preflight_s); an override keeps its value.
        params.setdefault("name_clash_discovery_s", 0.0)
        node = node_classes[spec.name](context=self.context, namespace=self.namespace,
                                       parameter_overrides=_to_parameters(params))
        self.nodes[spec.name] = node
        self.executor.add_node(node)

    def _preflight(self) -> None:
        """Refuse to start in a namespace another graph on the domain holds (see ``preflight_s``): nothing of
        this graph, its simulated robot included, is created before the check. A graph seen there must
        outlast the supervisor's ``name_clash_grace_s`` (a killed graph leaves with its DDS lease)."""
        import time

        from rclpy.node import Node

        from .core.errors import NameClash
        from .nodes._util import full_node_names

        grace_s = float(self.params_for(next(s for s in NODE_SPECS if s.name == "supervisor")).get(
            "name_clash_grace_s", 25.0))
        taken_names = {f"{self.namespace}/{s.name}" for s in self.specs()}
        probe = Node("robot_harness_preflight", namespace=self.namespace or "/", context=self.context,
                     start_parameter_services=False, enable_rosout=False,
                     cli_args=["--ros-args", "-r", "__node:=robot_harness_preflight"])
        try:
            start = time.monotonic()
            seen: set[str] = set()
            while True:
                names = set(full_node_names(probe))
                seen = taken_names & names
                elapsed = time.monotonic() - start
                if (not seen and elapsed >= self.preflight_s) or (seen and elapsed >= self.preflight_s + grace_s):
                    break
                time.sleep(0.1)
        finally:
            probe.destroy_node()
        if seen:
            domain = self.context.get_domain_id()
            raise NameClash(f"another graph on ROS domain {domain} uses the namespace {self.namespace or '/'}: "
                            f"{', '.join(sorted(seen))} already run; give each graph its own namespace "
                            "(--namespace / namespace:=) or domain", namespace=self.namespace, nodes=sorted(seen))

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            self.executor.spin()
        except ExternalShutdownException:
            pass
        except Exception:
            # Once stop() has begun, entities are being torn down under the
            # last wait; rclpy then raises from the wait set or the worker
            # pool. Anything earlier is a real fault and propagates.
            if not self._stopping:
                raise

    def wait_ready(self, timeout_s: float = 15.0) -> None:
        """Wait (bounded) until the aggregator sees pose, battery and the navigator's state.

        The in-process equivalent of waiting for localization and Nav2 to come
        up before sending the first mission.
        """
        import time

        from .core.errors import HarnessTimeout

        deadline = time.monotonic() + timeout_s
        while True:
            problems = self.not_ready()
            if not problems:
                return
            if time.monotonic() >= deadline:
                raise HarnessTimeout(f"graph not ready after {timeout_s:g} s: {'; '.join(problems.values())}",
                                     missing=sorted(problems))
            time.sleep(0.05)

    def not_ready(self) -> dict[str, str]:
        """What the aggregator cannot see fresh now (pose, battery, navigation), each with why
        (its topic, the last message's age); empty when the world is observable."""
        from .core.records import Availability

        snap = self.nodes["snapshot_aggregator"].capture(reason="readiness")
        metas = {"pose": snap.pose_meta, "battery": snap.battery_meta, "navigation": snap.navigation_meta}
        names = {"pose": "pose", "battery": "battery state", "navigation": "navigator status"}
        return {k: m.why_not_fresh(names[k]) for k, m in metas.items() if m.availability is not Availability.AVAILABLE}

    @property
    def supervisor(self) -> Any:
        return self.nodes["supervisor"]

    def stop(self) -> None:
        import rclpy

        if self.context is None:
            return
        # A mission in progress is stopped while the graph still runs: its goal is cancelled through the
        # navigator, the cancel confirmed and the mission ends CANCELLED on the record (bounded), before
        # the robot and the executor go away under it.
        if self.manager is not None:
            self.manager.stop_watching()  # the nodes going away now is on purpose, not a failure to reset
        supervisor = self.nodes.get("supervisor")
        if supervisor is not None and self._thread is not None and self._thread.is_alive():
            supervisor.stop_missions("the graph is stopping (Ctrl-C or SIGTERM)", timeout_s=self.stop_timeout_s)
        self._stopping = True
        # End the sim's running goals, stop spinning, then destroy: destroying
        # entities under a spinning executor races its wait set.
        if self.sim is not None:
            self.sim.stop()
        if self.executor is not None:
            self.executor.shutdown(timeout_sec=5.0)
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._settle_tasks()
        if self.sim is not None:
            self.sim.destroy()
        for destroy in reversed(self._guests):
            try:
                destroy()
            except Exception:
                pass
        self._guests.clear()
        for node in [*([self.manager] if self.manager is not None else []), *self.nodes.values()]:
            try:
                node.destroy_node()
            except Exception:
                pass
        self.manager = None
        self._settle_tasks()
        rclpy.try_shutdown(context=self.context)
        # rclpy frees DDS participants only on garbage collection; lingering
        # ones slow discovery for the next graph in this process.
        import gc

        gc.collect()
        self.nodes.clear()
        self.context = None

    def _settle_tasks(self) -> None:
        """Collect the executor's callback tasks that ended with an error while the graph was being torn
        down (an entity destroyed under a pending callback: rclpy's InvalidHandle, "cannot use Destroyable
        because destruction was requested"). Expected at shutdown, not a fault; left uncollected, rclpy
        prints each one to stderr at exit, after the command's own last line."""
        executor = self.executor
        if executor is None:
            return
        with getattr(executor, "_tasks_lock", contextlib.nullcontext()):
            tasks = [t for t, *_ in getattr(executor, "_tasks", ())]
        for task in tasks:
            if task.done():
                task.exception()  # marks it retrieved

    def __enter__(self) -> "BringUp":
        """Start (``with BringUp(...) as graph``), or take a graph already started (``with graph.start(...)``)."""
        return self if self.context is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
