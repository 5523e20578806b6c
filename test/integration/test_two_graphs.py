"""Issue 15: two harness graphs on one ROS domain.

Two `robot-harness up --namespace ...` processes (each with its own simulated robot, planner script and
journal) run concurrent missions sent with `robot-harness mission --namespace ...`: each ends as it does
alone, and nothing of one graph (a planner turn, a goal, a pose) reaches the other. A third graph in a
namespace already taken refuses to start with the reason (exit 3, name_clash), and the graph that holds
the namespace refuses missions while the intruder is there, then admits them again."""
from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from .test_cli import CLI, REPO, cli, interrupt

pytestmark = pytest.mark.integration

PLACES = {"dock": {"x": 0.0, "y": 0.0}, "spot": {"x": 1.2, "y": 0.4, "yaw": 0.3}, "shelf": {"x": -1.0, "y": 1.0}}


def _script(tmp_path: Path, name: str, place: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"turns": [
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": place}}]},
        {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]},
        {"done": "Back at the dock."},
    ]}))
    return path


def _params_file(tmp_path: Path) -> Path:
    """One parameter file for every node (as a site writes one): the package's files combined, then a
    ``/**`` section (last: it wins) shortening the name-clash grace to this machine's DDS lease (4 s in
    config/fastdds_loopback.xml; the shipped 25 s covers Fast DDS's default 20 s)."""
    from robot_harness.bringup import NODE_SPECS
    from robot_harness.params import dump_params, merge_params

    docs = [yaml.safe_load((REPO / "config" / spec.param_file).read_text()) for spec in NODE_SPECS]
    docs.append({"/**": {"ros__parameters": {"name_clash_grace_s": 6.0}}})
    path = tmp_path / "params.yaml"
    path.write_text(dump_params(merge_params(docs)))
    return path


def _up(tmp_path: Path, name: str, namespace: str, place: str) -> tuple[subprocess.Popen, Path]:
    config = tmp_path / f"{name}-harness.yaml"
    config.write_text(yaml.safe_dump({"places": PLACES, "navigation": {"timeout_s": 20.0}}))
    journal = tmp_path / name / "journal.sqlite3"
    log = open(tmp_path / f"{name}-up.log", "w")
    try:
        proc = subprocess.Popen([*CLI, "up", "--namespace", namespace, "--journal", str(journal),
                                 "--params-file", str(_params_file(tmp_path)),
                                 "--planner-script", str(_script(tmp_path, name, place)),
                                 "--harness-config", str(config)],
                                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
    finally:
        log.close()
    return proc, journal


def _log(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}-up.log").read_text()


def _wait_up(tmp_path: Path, name: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while "graph up" not in _log(tmp_path, name):
        assert proc.poll() is None, f"{name} exited {proc.returncode}:\n{_log(tmp_path, name)[-3000:]}"
        assert time.monotonic() < deadline, _log(tmp_path, name)[-3000:]
        time.sleep(0.2)


def _mission(namespace: str, goal: str) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "mission", goal, "--namespace", namespace, "--json", "--timeout", "90"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _manager(*, robot: str, command: int | None):
    """``/<robot>/lifecycle_manager``: ``manage_nodes`` with ``command`` (ManageNodes), or ``is_active``."""
    import rclpy
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    from robot_harness.srv import ManageNodes

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = Node("test_manager_client", context=ctx)
    try:
        if command is None:
            client, request = node.create_client(Trigger, f"/{robot}/lifecycle_manager/is_active"), Trigger.Request()
        else:
            client = node.create_client(ManageNodes, f"/{robot}/lifecycle_manager/manage_nodes")
            request = ManageNodes.Request(command=command)
        assert client.wait_for_service(timeout_sec=10.0), client.srv_name
        future = client.call_async(request)
        from rclpy.executors import SingleThreadedExecutor

        executor = SingleThreadedExecutor(context=ctx)
        executor.add_node(node)
        executor.spin_until_future_complete(future, timeout_sec=60.0)
        executor.shutdown()
        assert future.done(), f"{client.srv_name}: no answer"
        return future.result()
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)


def _start_catching(graph, raised: list) -> None:
    try:
        graph.start(require_ready=False)
    except BaseException as exc:  # noqa: BLE001 - the test reads what start raised
        raised.append(exc.with_traceback(None))  # its frames would keep the graph's nodes (and DDS entries) alive
    finally:
        graph.stop()


def _events(journal: Path, mission_id: str) -> list[tuple[str, dict]]:
    with contextlib.closing(sqlite3.connect(journal)) as db:
        rows = db.execute("SELECT type, payload FROM events WHERE mission_id = ? ORDER BY seq", (mission_id,)).fetchall()
    return [(t, json.loads(p)) for t, p in rows]


def _places_sent(events: list[tuple[str, dict]]) -> list[str]:
    return [p["arguments"]["place"] for t, p in events if t == "TOOL_CALL_RECORDED" and p.get("name") == "navigate_to"]


def test_two_namespaces_on_one_domain_run_concurrent_missions_and_one_namespace_refuses_a_second_graph(tmp_path):
    a, journal_a = _up(tmp_path, "a", "robot_a", "spot")
    b, journal_b = _up(tmp_path, "b", "/robot_b", "shelf")
    intruder = None
    try:
        _wait_up(tmp_path, "a", a)
        _wait_up(tmp_path, "b", b)
        goal = "Go to the spot and come back to the dock."
        ma, mb = _mission("robot_a", goal), _mission("robot_b", "Go to the shelf and come back to the dock.")
        out_a, err_a = ma.communicate(timeout=150)
        out_b, err_b = mb.communicate(timeout=150)
        assert ma.returncode == 0 and mb.returncode == 0, (err_a[-2000:], err_b[-2000:])
        ra, rb = json.loads(out_a), json.loads(out_b)
        assert ra["status"] == "SUCCEEDED", ra["summary"]
        assert rb["status"] == "SUCCEEDED", rb["summary"]
        assert ra["journal"] == str(journal_a) and rb["journal"] == str(journal_b)
        # Each graph ran its own script only: robot_a went to the spot, robot_b to the shelf; no turn crossed over.
        ev_a, ev_b = _events(journal_a, ra["mission_id"]), _events(journal_b, rb["mission_id"])
        assert _places_sent(ev_a) == ["spot", "dock"] and _places_sent(ev_b) == ["shelf", "dock"]
        for events in (ev_a, ev_b):
            assert not [t for t, _ in events if t in ("RESPONSE_DROPPED", "BACKEND_EVENT_UNCORRELATED")]
        # Each judged its own robot's pose, by its namespaced topic.
        sources_a = {p["snapshot"]["pose_meta"]["source"] for t, p in ev_a if t == "WORLD_SNAPSHOT_CAPTURED"}
        sources_b = {p["snapshot"]["pose_meta"]["source"] for t, p in ev_b if t == "WORLD_SNAPSHOT_CAPTURED"}
        assert sources_a == {"/robot_a/amcl_pose"} and sources_b == {"/robot_b/amcl_pose"}
        with contextlib.closing(sqlite3.connect(journal_b)) as db:
            assert db.execute("SELECT count(*) FROM events WHERE mission_id = ?", (ra["mission_id"],)).fetchone() == (0,)

        # robot_b's lifecycle manager (as under the launch file): PAUSE deactivates every node, the supervisor
        # first, so missions are refused; RESUME brings them back.
        assert _manager(robot="robot_b", command=None).success
        assert _manager(robot="robot_b", command=1).success  # PAUSE
        paused = _manager(robot="robot_b", command=None)
        assert not paused.success and "supervisor" in paused.message, paused.message
        refused_b = cli("mission", goal, "--namespace", "robot_b", "--json", "--timeout", "30", timeout=60)
        assert refused_b.returncode == 3 and "not_active" in refused_b.stderr, refused_b.stderr[-2000:]
        assert _manager(robot="robot_b", command=2).success  # RESUME
        assert _manager(robot="robot_b", command=None).success

        # `up` in robot_a's namespace: it refuses to start, with the reason, before its robot or any node
        # exists (so robot_a never sees a second pose or navigator).
        intruder, _ = _up(tmp_path, "intruder", "robot_a", "spot")
        intruder.wait(timeout=60)
        log = _log(tmp_path, "intruder")
        assert intruder.returncode == 3, f"exit {intruder.returncode}\n{log[-3000:]}"
        # Refused by its preflight, before anything starts (naming robot_a's nodes), or, when discovery was
        # slower than that on a loaded host, by its first node that sees its twin at configure.
        error = [line for line in log.splitlines() if line.startswith("robot-harness: error: name_clash")]
        assert error and "/robot_a/" in error[-1], log[-3000:]
        assert "Traceback" not in log, log[-3000:]

        # A graph that skips that check (a launch file, an in-process bring-up): each of its nodes refuses to
        # configure beside its twin, and meanwhile robot_a's supervisor sees the clash too and refuses missions.
        from robot_harness.bringup import BringUp
        from robot_harness.core.errors import NameClash

        # A long grace keeps it up (refusing) while robot_a is probed: a probe admitted before robot_a
        # discovered it runs a whole mission first.
        clash = {"name_clash_discovery_s": 2.0, "name_clash_grace_s": 25.0}
        second = BringUp(use_sim=False, namespace="robot_a", overrides={
            **{name: dict(clash) for name in BringUp.MANAGED},
            "supervisor": {**clash, "journal_path": str(tmp_path / "second" / "journal.sqlite3")}})
        raised: list[BaseException] = []
        starter = threading.Thread(target=lambda: _start_catching(second, raised), daemon=True)
        starter.start()
        refused = None
        probes: list = []
        t0 = time.monotonic()
        deadline = time.monotonic() + 60.0
        while starter.is_alive() and time.monotonic() < deadline:
            probe = cli("mission", goal, "--namespace", "robot_a", "--json", "--timeout", "30", timeout=60)
            if probe.returncode == 3 and "name_clash" in probe.stderr:
                refused = probe
                break
            probes.append((round(time.monotonic() - t0, 1), probe.returncode, probe.stderr[-300:]))
            time.sleep(0.3)
        starter.join(timeout=60)
        assert raised and isinstance(raised[0], NameClash), raised
        # Its first node refuses to configure (nothing of it serves), naming the node its twin holds.
        assert "refusing to configure" in raised[0].message and "/robot_a/snapshot_aggregator" in raised[0].message
        assert refused is not None, f"robot_a's supervisor never refused a mission while the second graph was up: {probes}"
        assert "another graph on ROS domain" in refused.stderr, refused.stderr[-2000:]

        # The second graph gone (its participants leave with it), robot_a admits and completes missions again.
        deadline = time.monotonic() + 30.0
        while True:
            again = cli("mission", goal, "--namespace", "robot_a", "--json", "--timeout", "90", timeout=150)
            if again.returncode != 3 or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        assert again.returncode == 0, again.stderr[-3000:]
        assert json.loads(again.stdout)["status"] == "SUCCEEDED", again.stdout
    finally:
        for proc in (intruder, a, b):
            if proc is not None and proc.poll() is None:
                interrupt(proc)
