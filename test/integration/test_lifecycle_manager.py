"""The lifecycle manager over real processes: the installed recovery and verifier executables
(``autostart:=false``) and the manager, talking over loopback DDS, in a namespace and at the root.

Checked from a test client through the nodes' own ``get_state`` services: bring-up in order,
PAUSE / RESUME / RESET / SHUTDOWN, ``is_active``, a failed configure stopping the bring-up, and a
SIGKILLed node detected within ``bond_timeout`` (the other node brought down), then brought back
with the restarted node once it answers again.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from ._graph import install_lib

REPO = Path(__file__).resolve().parents[2]


LIB = install_lib()

BOND_TIMEOUT_S = 1.0
RESPAWN_MAX_S = 15.0
READER_LAG_S = 2.0  # a line the process has written reaches Proc.lines through a thread


class Proc:
    """A node process whose merged stdout/stderr is collected line by line (never blocks the pipe)."""

    def __init__(self, name: str, args: list[str]) -> None:
        env = {**os.environ, "RCUTILS_COLORIZED_OUTPUT": "0", "PYTHONUNBUFFERED": "1"}
        self.name = name
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  cwd=REPO, env=env)
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, needle: str, timeout_s: float, *, after: int = 0) -> int:
        """Index of the first line from ``after`` on that contains ``needle``, waiting at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            for i in range(after, len(self.lines)):
                if needle in self.lines[i]:
                    return i
            if time.monotonic() >= deadline:
                raise AssertionError(f"{self.name} did not log {needle!r} within {timeout_s} s:\n{self.text()[-4000:]}")
            time.sleep(0.05)

    def index(self, needle: str, *, after: int = 0) -> int:
        """Like wait_line for a line already written: the reader thread may still be a moment behind."""
        return self.wait_line(needle, READER_LAG_S, after=after)

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)
        self._t.join(timeout=5)


def harness_node(exe: str, ns: str, *params: str) -> Proc:
    args = [str(LIB / exe), "--ros-args", "-p", "autostart:=false"]
    if ns:
        args += ["-r", f"__ns:={ns}"]
    for p in params:
        args += ["-p", p]
    return Proc(exe, args)


def manager(ns: str, *params: str, names: str = "['recovery','verifier']", service_timeout_s: float = 3.0) -> Proc:
    """The installed executable once CMakeLists.txt installs it, the module until then."""
    args = [str(LIB / "lifecycle_manager")]
    args += ["--ros-args", "-p", f"node_names:={names}",
             "-p", f"bond_timeout:={BOND_TIMEOUT_S}", "-p", "bond_heartbeat_period:=0.2",
             "-p", f"service_timeout:={service_timeout_s}", "-p", f"bond_respawn_max_duration:={RESPAWN_MAX_S}"]
    if ns:
        args += ["-r", f"__ns:={ns}"]
    for p in params:
        args += ["-p", p]
    return Proc("lifecycle_manager", args)


class Client:
    """The test's own view: each node's get_state, the manager's manage_nodes and is_active."""

    def __init__(self, ns: str) -> None:
        from lifecycle_msgs.srv import GetState
        from rclpy.node import Node
        from std_srvs.srv import Trigger

        from robot_harness.srv import ManageNodes

        self.GetState, self.Trigger, self.ManageNodes = GetState, Trigger, ManageNodes
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.node = Node("test_lifecycle_manager_client", context=self.ctx)
        self.get = {n: self.node.create_client(GetState, f"{ns}/{n}/get_state") for n in ("recovery", "verifier")}
        self.manage = self.node.create_client(ManageNodes, f"{ns}/lifecycle_manager/manage_nodes")
        self.active = self.node.create_client(Trigger, f"{ns}/lifecycle_manager/is_active")
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self._t = threading.Thread(target=self.ex.spin, daemon=True)
        self._t.start()

    def call(self, cli, request, timeout_s: float):
        assert cli.wait_for_service(timeout_sec=min(timeout_s, 10.0)), f"{cli.srv_name} never appeared"
        done = threading.Event()
        fut = cli.call_async(request)
        fut.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            fut.cancel()
            raise AssertionError(f"{cli.srv_name}: no answer within {timeout_s} s")
        return fut.result()

    def state(self, node: str) -> str:
        cli = self.get[node]
        if not cli.service_is_ready():
            return "absent"
        done = threading.Event()
        fut = cli.call_async(self.GetState.Request())
        fut.add_done_callback(lambda _f: done.set())
        if not done.wait(1.0):
            fut.cancel()
            return "no answer"
        return fut.result().current_state.label

    def wait_states(self, want: dict[str, str], timeout_s: float) -> float:
        t0 = time.monotonic()
        seen: dict[str, str] = {}
        while time.monotonic() - t0 < timeout_s:
            seen = {n: self.state(n) for n in want}
            if seen == want:
                return time.monotonic() - t0
            time.sleep(0.1)
        raise AssertionError(f"wanted {want} within {timeout_s} s, last seen {seen}")

    def command(self, name: str, timeout_s: float = 30.0) -> bool:
        req = self.ManageNodes.Request(command=getattr(self.ManageNodes.Request, name))
        return bool(self.call(self.manage, req, timeout_s).success)

    def is_active(self) -> tuple[bool, str]:
        r = self.call(self.active, self.Trigger.Request(), 5.0)
        return bool(r.success), r.message

    def close(self) -> None:
        self.ex.shutdown(timeout_sec=2.0)
        self._t.join(timeout=5.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)


def _stop_all(procs: list[Proc]) -> None:
    for p in procs:
        try:
            p.stop()
        except Exception:  # noqa: BLE001 - stop the rest regardless
            pass


def test_manager_drives_namespaced_nodes_and_brings_a_killed_one_back():
    ns = "/robot7"
    procs = [harness_node("recovery", ns), harness_node("verifier", ns)]
    client = None
    try:
        procs.append(manager(ns, "autostart:=true", service_timeout_s=8.0))
        rec, _ver, mgr = procs
        client = Client(ns)
        both = lambda s: {"recovery": s, "verifier": s}  # noqa: E731

        # autostart: configure in order, then activate in order, found through relative names.
        client.wait_states(both("active"), 25.0)
        mgr.wait_line("Managed nodes are active", 5.0)
        steps = [mgr.index(s) for s in ("Configuring recovery", "Configuring verifier",
                                        "Activating recovery", "Activating verifier", "Managed nodes are active")]
        assert steps == sorted(steps), mgr.text()
        assert client.is_active() == (True, "Managed nodes are active")

        # PAUSE deactivates in reverse order; is_active says which nodes are not active.
        mark = len(mgr.lines)
        assert client.command("PAUSE")
        client.wait_states(both("inactive"), 5.0)
        assert mgr.index("Deactivating verifier", after=mark) < mgr.index("Deactivating recovery", after=mark)
        active, why = client.is_active()
        assert not active and "recovery is inactive" in why and "verifier is inactive" in why, why
        assert not client.command("PAUSE"), "deactivating inactive nodes must fail"
        # The reply can arrive before the reader thread has the manager's log line.
        mgr.wait_line("Failed to change state for node: verifier", READER_LAG_S, after=mark)
        # A failed command leaves the manager in "unknown"; resume from what the nodes really are.
        assert client.command("RESUME")
        client.wait_states(both("active"), 5.0)
        assert client.is_active()[0]

        # A SIGKILLed node: CRITICAL FAILURE within bond_timeout + a margin, the other brought down.
        mark = len(mgr.lines)
        rec.p.kill()
        rec.p.wait(timeout=5)
        t0 = time.monotonic()
        line = mgr.wait_line("CRITICAL FAILURE: SERVER recovery IS DOWN after not receiving a heartbeat for",
                             BOND_TIMEOUT_S + 3.0, after=mark)
        detected = time.monotonic() - t0
        assert "Shutting down related nodes." in mgr.lines[line]
        # The dead node is skipped: well under service_timeout (8 s), which asking it would have waited.
        assert client.wait_states({"verifier": "unconfigured"}, 15.0) < 5.0
        assert mgr.index("Deactivating verifier", after=line) < mgr.index("Cleaning up verifier", after=line)
        assert "Deactivating recovery" not in "\n".join(mgr.lines[line:]), "the dead node must not be waited on"
        assert not client.is_active()[0]

        # Restarted: the manager sees it answer again and starts both up.
        mark = len(mgr.lines)
        procs[0] = rec = harness_node("recovery", ns)
        t1 = time.monotonic()
        client.wait_states(both("active"), RESPAWN_MAX_S)
        back = time.monotonic() - t1
        # Both answer active before the manager's last get_state and its log line: give it a round trip too.
        mgr.wait_line("Successfully re-established connections from server respawns, starting back up.",
                      READER_LAG_S + 3.0, after=mark)
        mgr.wait_line("Managed nodes are active", READER_LAG_S + 3.0, after=mark)
        assert client.is_active()[0]

        # RESET: deactivate, then clean up, in reverse order; SHUTDOWN finalizes.
        mark = len(mgr.lines)
        assert client.command("RESET")
        client.wait_states(both("unconfigured"), 5.0)
        order = [mgr.index(s, after=mark) for s in ("Deactivating verifier", "Deactivating recovery",
                                                    "Cleaning up verifier", "Cleaning up recovery")]
        assert order == sorted(order), "\n".join(mgr.lines[mark:])
        assert not client.is_active()[0]
        assert client.command("SHUTDOWN")
        client.wait_states(both("finalized"), 5.0)
        print(f"kill detected after {detected:.2f} s; both active again {back:.2f} s after the restart")
    finally:
        if client is not None:
            client.close()
        _stop_all(procs)
    for p in procs:
        assert "Traceback" not in p.text(), f"{p.name}:\n{p.text()[-3000:]}"


def test_a_failed_configure_stops_the_startup_before_the_later_nodes():
    # At the root namespace; the recovery node refuses to configure (an unknown advisor).
    procs = [harness_node("recovery", "", "advisor:=oracle"), harness_node("verifier", "")]
    client = None
    try:
        procs.append(manager("", "autostart:=false"))
        mgr = procs[2]
        client = Client("")
        client.wait_states({"recovery": "unconfigured", "verifier": "unconfigured"}, 20.0)
        assert not client.command("STARTUP")
        mgr.wait_line("Failed to change state for node: recovery: the node refused to configure", READER_LAG_S)
        mgr.wait_line("Failed to bring up all requested nodes. Aborting bringup.", READER_LAG_S)
        assert "Configuring verifier" not in mgr.text() and "Activating" not in mgr.text(), mgr.text()
        client.wait_states({"recovery": "unconfigured", "verifier": "unconfigured"}, 5.0)  # still: nothing changed
        active, why = client.is_active()
        assert not active and "verifier is" in why, why
    finally:
        if client is not None:
            client.close()
        _stop_all(procs)
    assert "unknown advisor" in procs[0].text()


class Liar:
    """Not a harness node: a node's two lifecycle services, answering what the test tells them to.

    ``honest``: each transition leads where it should; otherwise ``change_state`` says success and
    the state stays ``reported``. The only way to see the manager check ``get_state`` after a
    ``change_state`` success, and an answer other than active taken as the node being down."""

    def __init__(self, client: Client) -> None:
        from lifecycle_msgs.srv import ChangeState

        self.reported, self.honest, self.transitions = 1, False, []
        self._srvs = [client.node.create_service(ChangeState, "/liar/change_state", self._change),
                      client.node.create_service(client.GetState, "/liar/get_state", self._get)]

    def _change(self, request, response):
        self.transitions.append(request.transition.id)
        if self.honest:
            self.reported = {1: 2, 2: 1, 3: 3, 4: 2, 5: 4}[request.transition.id]
        response.success = True
        return response

    def _get(self, _request, response):
        response.current_state.id = self.reported
        response.current_state.label = {1: "unconfigured", 2: "inactive", 3: "active", 4: "finalized"}[self.reported]
        return response


def test_success_needs_get_state_to_agree_and_a_node_reporting_inactive_is_down():
    client = Client("")
    procs: list[Proc] = []
    try:
        liar = Liar(client)
        procs.append(manager("", "autostart:=false", "attempt_respawn_reconnection:=false", names="['liar']"))
        mgr = procs[0]
        assert not client.command("STARTUP"), "change_state said success but the node stayed unconfigured"
        mgr.wait_line("Failed to change state for node: liar: change_state answered success but get_state says "
                      "unconfigured, not inactive", READER_LAG_S)
        assert liar.transitions == [1]

        liar.honest = True
        assert client.command("STARTUP")
        assert liar.reported == 3 and client.is_active()[0]
        mark = len(mgr.lines)
        liar.reported = 2  # it now claims inactive: down, though it answers
        # Down after bond_timeout of non-active answers, read once per 0.2 s heartbeat: ~1.2-1.4 s nominal.
        mgr.wait_line("CRITICAL FAILURE: SERVER liar IS DOWN: it reports inactive, not active.", BOND_TIMEOUT_S + 4.0,
                      after=mark)
        # After the CRITICAL line the manager still cleans the liar up (three service calls) before this.
        mgr.wait_line("attempt_respawn_reconnection is false: the managed nodes stay down", READER_LAG_S + 3.0,
                      after=mark)
        assert liar.transitions[-1] == 2 and liar.reported == 1, liar.transitions  # cleaned up, not deactivated
        time.sleep(1.5)
        assert "Starting managed nodes bringup" not in "\n".join(mgr.lines[mark:])
        assert not client.is_active()[0]
    finally:
        _stop_all(procs)
        client.close()
    assert "Traceback" not in procs[0].text(), procs[0].text()[-3000:]


def test_a_node_that_never_comes_back_leaves_the_system_down_after_bond_respawn_max_duration():
    client = Client("")
    procs: list[Proc] = []
    try:
        liar = Liar(client)
        liar.honest = True
        procs.append(manager("", "autostart:=true", "bond_respawn_max_duration:=2.0", names="['liar']"))
        mgr = procs[0]
        mgr.wait_line("Managed nodes are active", 15.0)
        mark = len(mgr.lines)
        for srv in liar._srvs:  # silent from now on, as a dead process is
            client.node.destroy_service(srv)
        mgr.wait_line("CRITICAL FAILURE: SERVER liar IS DOWN after not receiving a heartbeat for", BOND_TIMEOUT_S + 3.0,
                      after=mark)
        mgr.wait_line("Failed to re-establish connection from a server crash after maximum timeout.", 6.0, after=mark)
        assert "Starting managed nodes bringup" not in "\n".join(mgr.lines[mark:])
        assert not client.is_active()[0]
    finally:
        _stop_all(procs)
        client.close()
    assert "Traceback" not in procs[0].text(), procs[0].text()[-3000:]


def test_a_second_manager_in_the_namespace_refuses_every_command():
    """Two lifecycle managers named /robot8/lifecycle_manager (two graphs in one namespace): whichever
    answers, it refuses, because the nodes it would drive may be the other graph's; nothing is changed."""
    procs = [harness_node("recovery", "/robot8"), harness_node("verifier", "/robot8")]
    client = None
    try:
        procs += [manager("/robot8", "autostart:=false"), manager("/robot8", "autostart:=false")]
        client = Client("/robot8")
        client.wait_states({"recovery": "unconfigured", "verifier": "unconfigured"}, 20.0)
        deadline = time.monotonic() + 20.0
        while client.node.get_node_names_and_namespaces().count(("lifecycle_manager", "/robot8")) < 2:
            assert time.monotonic() < deadline, "the two managers never both appeared"
            time.sleep(0.1)
        time.sleep(1.0)  # and each has seen the other
        deadline = time.monotonic() + 10.0
        while not all("2 nodes are named /robot8/lifecycle_manager" in p.text() for p in procs[2:]) \
                and time.monotonic() < deadline:
            assert not client.command("STARTUP")
            time.sleep(0.2)
        assert any("manage_nodes refused: 2 nodes are named /robot8/lifecycle_manager" in p.text() for p in procs[2:])
        client.wait_states({"recovery": "unconfigured", "verifier": "unconfigured"}, 5.0)  # still: nothing changed
    finally:
        if client is not None:
            client.close()
        _stop_all(procs)
