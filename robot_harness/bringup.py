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

__all__ = ["NodeSpec", "NODE_SPECS", "config_dir", "load_node_params", "BringUp"]


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


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def load_node_params(path: Path, node_name: str) -> dict[str, Any]:
    """Parameters for one node from a ROS 2 parameter file (``name: ros__parameters:``), flattened."""
    data = yaml.safe_load(path.read_text()) or {}
    out: dict[str, Any] = {}
    for key in ("/**", node_name, f"/{node_name}"):
        section = data.get(key)
        if isinstance(section, Mapping):
            _flatten("", section.get("ros__parameters", {}), out)
    return out


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
    ) -> None:
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
        values = load_node_params(self.params_dir / spec.param_file, spec.name)
        values.update(self.overrides.get(spec.name, {}))
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
        node_classes = {"snapshot_aggregator": SnapshotAggregator, "planner": PlannerNode, "verifier": VerifierNode,
                        "recovery": RecoveryNode, "supervisor": SupervisorNode}
        try:
            for spec in self.specs():
                params = self.params_for(spec)
                if spec.name == "sim_robot":
                    from .nodes.sim_robot import DieMode, SimRobot

                    params["die_mode"] = DieMode.SILENT.value  # one process: "dying" must not kill the harness
                    self.sim = SimRobot(context=self.context, parameter_overrides=_to_parameters(params))
                    self.sim.add_to_executor(self.executor)
                    continue
                params["autostart"] = False  # this bring-up is the lifecycle manager
                node = node_classes[spec.name](context=self.context, parameter_overrides=_to_parameters(params))
                self.nodes[spec.name] = node
                self.executor.add_node(node)
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
        except BaseException:
            self.stop()
            raise
        return self

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
        for node in list(self.nodes.values()):
            try:
                node.destroy_node()
            except Exception:
                pass
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
