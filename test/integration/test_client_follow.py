"""MissionClient follows a mission by id: across a SIGKILL and restart of `robot-harness up`, through a
server that died before answering the goal, past answers that are not the mission's final status, and
says so (exit 4, the mission id, how to look it up) when no supervisor comes back."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import kill_test  # noqa: E402  (the kill test's `robot-harness up` graph: crash-test files and parameters)

from robot_harness.core.clock import IdGenerator, SystemClock  # noqa: E402
from robot_harness.core.errors import HarnessTimeout  # noqa: E402
from robot_harness.core.journal import SqliteJournal  # noqa: E402
from robot_harness.core.records import EventType  # noqa: E402


def _installed() -> bool:
    return any((Path(p) / "lib" / "robot_harness" / "supervisor").exists()
               for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p)


needs_install = pytest.mark.skipif(not _installed(), reason="robot_harness is not built/installed (run make setup)")


def _wait(cond: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class _Client:
    """A MissionClient spinning in its own context (as the CLI runs it)."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        from robot_harness.client import MissionClient

        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.mc = MissionClient(self.ctx)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.mc.node)
        self.thread = threading.Thread(target=self.ex.spin, daemon=True)
        self.thread.start()
        self.box: dict[str, Any] = {}
        self.feedback: list[Any] = []

    def send_in_background(self, mission_id: str, **kw: Any) -> threading.Thread:
        def run() -> None:
            try:
                self.box["answer"] = self.mc.send(kill_test.ct.GOAL, mission_id=mission_id,
                                                  on_feedback=self.feedback.append, **kw)
            except Exception as exc:  # noqa: BLE001 - the test asserts on it
                self.box["error"] = exc
            self.box["at"] = time.monotonic()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def close(self) -> None:
        import rclpy

        self.ex.shutdown(timeout_sec=2.0)
        self.thread.join(timeout=5.0)
        self.mc.destroy()
        rclpy.try_shutdown(context=self.ctx)


def _finished(journal: Path, mission_id: str) -> list[Any]:
    j = SqliteJournal(journal, clock=SystemClock(), ids=IdGenerator(None))
    try:
        return j.events(mission_id=mission_id, types=[EventType.MISSION_FINISHED])
    finally:
        j.close()


@needs_install
def test_a_killed_and_restarted_up_is_followed_to_the_reconciled_answer(tmp_path):
    graph = kill_test.UpGraph(tmp_path, sim_inside=True)
    graph.start("up")
    client = _Client()
    try:
        _wait(graph.up_ready, 60, "robot-harness up")
        worker = client.send_in_background("follow-1", timeout_s=120.0)
        # The mission runs: its first action is on the way (a feedback naming it).
        _wait(lambda: any(fb.active_action.action_id for fb in client.feedback) or not worker.is_alive(), 60,
              "the first action")
        assert worker.is_alive(), client.box
        graph.restart("up")
        restarted = graph.up_started_at
        worker.join(timeout=90)
        assert not worker.is_alive(), "the client never answered after the restart"
        assert "error" not in client.box, client.box.get("error")
        accepted, result = client.box["answer"]
        finished = _finished(graph.journal, "follow-1")
        assert accepted and len(finished) == 1
        assert result.status == finished[0].payload["status"] == "UNKNOWN"  # interrupted, reconciled
        assert result.summary.startswith("repeated request; nothing was run again")
        assert "interrupted" in result.summary
        assert client.mc.follow.server_losses == 1 and client.mc.follow.sends >= 2
        assert client.box["at"] - restarted < 30.0, "answered within seconds of the restart, not at the timeout"
    finally:
        client.close()
        graph.stop()


@needs_install
def test_no_supervisor_back_exits_4_naming_the_mission_and_how_to_look_it_up(tmp_path):
    graph = kill_test.UpGraph(tmp_path, sim_inside=True)
    graph.start("up")
    client = _Client()  # only to see the mission admitted, on the supervisor's events
    try:
        _wait(graph.up_ready, 60, "robot-harness up")
        journal_events: list[Any] = []
        from robot_harness.msg import JournalEvent

        client.mc.node.create_subscription(JournalEvent, "/supervisor/events", journal_events.append, 100)
        t0 = time.monotonic()
        proc = subprocess.Popen(["robot-harness", "mission", kill_test.ct.GOAL, "--mission-id", "follow-2", "--json",
                                 "--timeout", "25"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait(lambda: any(e.kind == "MISSION_STARTED" for e in journal_events) or proc.poll() is not None, 60,
              "the mission's admission")
        graph.kill("up")  # and nothing comes back
        out, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        client.close()
        graph.stop()
    assert proc.returncode == 4, (out, err)
    doc = json.loads(out)
    assert doc["error"] == "timeout" and doc["mission_id"] == "follow-2"
    assert "robot-harness journal show --mission follow-2" in doc["message"]
    assert "left the graph" in doc["message"] and "Traceback" not in err
    assert elapsed < 25 + 15, "the client gives up at its own timeout"


STAND_IN = textwrap.dedent("""
    # A mission server that takes a goal request and never answers it (a supervisor hung, then killed).
    import time, rclpy
    from rclpy.action import ActionServer
    from rclpy.node import Node
    from robot_harness.action import Mission
    rclpy.init()
    node = Node("hung_supervisor")
    def on_goal(request):
        print("goal", request.mission_id, flush=True)
        time.sleep(3600)
    server = ActionServer(node, Mission, "/robot_harness/mission", execute_callback=lambda h: None,
                          goal_callback=on_goal)
    print("ready", flush=True)
    rclpy.spin(node)
""")


@needs_install
def test_a_server_killed_before_answering_the_goal_is_asked_again_by_the_one_that_comes_back(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    hung = subprocess.Popen([sys.executable, "-c", STAND_IN], stdout=subprocess.PIPE, text=True, env=env)
    graph = kill_test.UpGraph(tmp_path, sim_inside=True)
    client = _Client()
    try:
        assert hung.stdout.readline().strip() == "ready"
        worker = client.send_in_background("follow-3", timeout_s=120.0, answer_timeout_s=60.0)
        assert hung.stdout.readline().strip() == "goal follow-3"
        hung.send_signal(signal.SIGKILL)
        hung.wait()
        graph.start("up")
        worker.join(timeout=100)
        assert not worker.is_alive() and "error" not in client.box, client.box
        accepted, result = client.box["answer"]
        finished = _finished(graph.journal, "follow-3")
        assert accepted and len(finished) == 1 and result.status == finished[0].payload["status"]
        assert result.status == "SUCCEEDED", result.summary  # never admitted before: it ran, once, here
        assert client.mc.follow.server_losses == 1 and client.mc.follow.unanswered == 0
    finally:
        if hung.poll() is None:
            hung.kill()
        client.close()
        graph.stop()


class _ScriptedServer:
    """A mission server in its own context that answers each goal with the next scripted (status, summary)."""

    def __init__(self, answers: list[tuple[str, str]]) -> None:
        import rclpy
        from rclpy.action import ActionServer
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        from robot_harness.action import Mission

        self.answers, self.goals = list(answers), []
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.node = Node("scripted_supervisor", context=self.ctx)

        def execute(handle: Any) -> Any:
            self.goals.append(handle.request.mission_id)
            status, summary = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            handle.abort()
            return Mission.Result(mission_id=handle.request.mission_id, status=status, summary=summary)

        self.server = ActionServer(self.node, Mission, "/robot_harness/mission", execute_callback=execute)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.thread = threading.Thread(target=self.ex.spin, daemon=True)
        self.thread.start()

    def close(self) -> None:
        import rclpy

        self.ex.shutdown(timeout_sec=2.0)
        self.thread.join(timeout=5.0)
        self.server.destroy()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)


NOT_FINAL = ("UNKNOWN", "repeated request for a mission with no recorded end; nothing was run again")


def test_an_answer_that_is_not_the_final_status_is_asked_again():
    server = _ScriptedServer([NOT_FINAL, NOT_FINAL, ("FAILED", "repeated request; nothing was run again. Recorded "
                                                               "outcome: the robot never reached spot")])
    client = _Client()
    try:
        accepted, result = client.mc.send("Go to spot.", mission_id="follow-4", timeout_s=30.0, retry_pause_s=0.1)
    finally:
        client.close()
        server.close()
    assert accepted and result.status == "FAILED"
    assert server.goals == ["follow-4"] * 3 and client.mc.follow.reasked == 2


def test_answers_that_never_give_the_final_status_end_in_a_timeout_naming_the_mission():
    server = _ScriptedServer([NOT_FINAL])
    client = _Client()
    try:
        with pytest.raises(HarnessTimeout) as err:
            client.mc.send("Go to spot.", mission_id="follow-5", timeout_s=30.0, retry_pause_s=0.1, max_reasks=2)
    finally:
        client.close()
        server.close()
    assert "follow-5" in err.value.message and "no recorded end" in err.value.message
    assert err.value.details["lookup"] == "robot-harness journal show --mission follow-5"
    assert server.goals == ["follow-5"] * 3
