"""Operator interactions over ROS: an approval answered through the
supervisor's service resumes the mission; the same flow across a supervisor
SIGKILL and restart leaves a durable, idempotent record and moves nothing."""
from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import time

import pytest
import yaml

from robot_harness.bringup import BringUp
from robot_harness.client import MissionClient

from .test_executables import LIB, ros_client, start, wait_until_world_is_observed  # noqa: F401 (fixtures)

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 1.5, "y": 0.5, "yaw": 0.0}}
TURNS = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]}, {"done": "at the spot"}]
APPROVAL = {"skill_tags": {"navigate_to": ["requires_approval"]}, "timeout_s": 60.0}
TOKEN = "owner-s3cret"


def _events(journal_path, type_):
    db = sqlite3.connect(journal_path)
    try:
        return [(m, json.loads(p)) for m, p in db.execute(
            "select mission_id, payload from events where type=? order by seq", (type_,))]
    finally:
        db.close()


def _call(node, executor_owner, srv_type, name, request, timeout_s=10.0):
    cli = node.create_client(srv_type, name)
    assert cli.wait_for_service(timeout_sec=timeout_s), name
    fut = cli.call_async(request)
    deadline = time.monotonic() + timeout_s
    while not fut.done() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fut.done(), f"{name} did not answer"
    return fut.result()


def test_an_approval_answered_over_ros_lets_the_mission_move(tmp_path):
    import threading

    from rclpy.node import Node

    from robot_harness.srv import ListInteractions, ResolveInteraction

    journal = tmp_path / "j.sqlite3"
    overrides = {
        "sim_robot": {"speed": 3.0},
        "planner": {"turns_json": json.dumps(TURNS)},
        "supervisor": {"journal_path": str(journal), "harness_config_json": json.dumps({
            "places": PLACES, "interactions": APPROVAL})},
    }
    with BringUp(overrides=overrides) as g:
        client = MissionClient(g.context)
        g.add_node(client.node, client.destroy)
        probe = Node("test_operator", context=g.context)
        g.add_node(probe)
        box = {}
        t = threading.Thread(target=lambda: box.update(zip(("accepted", "result"), client.send(
            "Go to the spot.", owner="alice", owner_token=TOKEN))))
        t.start()
        pending = []
        deadline = time.monotonic() + 20
        while not pending and time.monotonic() < deadline:
            resp = _call(probe, g, ListInteractions, "/supervisor/interactions", ListInteractions.Request(pending_only=True))
            pending = json.loads(resp.interactions_json)
            time.sleep(0.1)
        (ask,) = pending
        assert ask["kind"] == "approval" and ask["call"]["arguments"] == {"place": "spot"}
        assert g.sim.goal_log == [], "nothing moves before the approval"
        wrong = _call(probe, g, ResolveInteraction, "/supervisor/resolve_interaction", ResolveInteraction.Request(
            interaction_id=ask["interaction_id"], resolution="approve", token="guess", operator_name="mallory"))
        assert not wrong.ok and wrong.code == "not_authorized"
        ok = _call(probe, g, ResolveInteraction, "/supervisor/resolve_interaction", ResolveInteraction.Request(
            interaction_id=ask["interaction_id"], resolution="approve", token=TOKEN, operator_name="alice"))
        assert ok.ok and ok.recorded
        t.join(timeout=60)
        assert box["accepted"] and box["result"].status == "SUCCEEDED", box["result"].summary
        conflict = _call(probe, g, ResolveInteraction, "/supervisor/resolve_interaction", ResolveInteraction.Request(
            interaction_id=ask["interaction_id"], resolution="deny", token=TOKEN, operator_name="alice"))
        assert not conflict.ok and conflict.code == "command_conflict"
        assert [m for m, _ in _events(journal, "MISSION_STARTED")][0] == box["result"].mission_id
        assert _events(journal, "MISSION_STARTED")[0][1]["owner"] == "alice"
        assert TOKEN not in journal.read_bytes().decode("latin-1"), "the token itself is never stored"


@contextlib.contextmanager
def _killed_while_asking(tmp_path, ros_client, *, turns, interactions, mission_id):
    """Start the graph (one process per node), send ``mission_id``, SIGKILL the supervisor once the
    mission waits on its operator, restart it, and wait for it to settle the mission. Yields
    ``(journal, ask)``, the journal path and the interaction as first requested."""
    import threading

    from robot_harness.core.errors import HarnessTimeout

    ctx, client = ros_client
    script = tmp_path / "turns.yaml"
    script.write_text(yaml.safe_dump({"turns": turns}))
    harness = tmp_path / "harness.yaml"
    harness.write_text(yaml.safe_dump({"places": PLACES, "interactions": interactions}))
    journal = tmp_path / "journal.sqlite3"
    sup_args = ("autostart:=true", f"journal_path:={journal}", f"harness_config_file:={harness}")
    procs = {
        "sim_robot": start("sim_robot", "autostart:=true", "speed:=3.0", param_file="sim_robot.yaml"),
        "snapshot_aggregator": start("snapshot_aggregator", "autostart:=true", param_file="snapshot_aggregator.yaml"),
        "planner": start("planner", "autostart:=true", f"script_file:={script}", param_file="planner.yaml"),
        "verifier": start("verifier", "autostart:=true", param_file="verifier.yaml"),
        "recovery": start("recovery", "autostart:=true", param_file="recovery.yaml"),
        "supervisor": start("supervisor", *sup_args, param_file="supervisor.yaml"),
    }
    try:
        wait_until_world_is_observed(ctx)

        def first_send():  # its answer dies with the supervisor
            try:
                client.send("Go to the spot.", mission_id=mission_id, owner="alice", owner_token=TOKEN,
                            timeout_s=40.0, answer_timeout_s=5.0)
            except HarnessTimeout:
                pass

        threading.Thread(target=first_send, daemon=True).start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (journal.exists() and _events(journal, "INTERACTION_REQUESTED")):
            time.sleep(0.1)
        ((_, ask),) = _events(journal, "INTERACTION_REQUESTED")
        procs["supervisor"].send_signal(signal.SIGKILL)
        procs["supervisor"].wait()
        procs["supervisor"] = start("supervisor", *sup_args, param_file="supervisor.yaml")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _events(journal, "MISSION_FINISHED"):
            time.sleep(0.2)
        yield journal, ask
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs.values():
            try:
                proc.wait(timeout=15)
            except Exception:
                proc.kill()
                proc.wait()


def test_a_pending_approval_survives_a_supervisor_kill_as_a_durable_record(tmp_path, ros_client):
    from robot_harness.cli import main as cli_main

    _, client = ros_client
    with _killed_while_asking(tmp_path, ros_client, turns=TURNS, interactions=APPROVAL,
                              mission_id="m-approve-1") as (journal, ask):
        # the restarted supervisor closes the interrupted mission: the call is cancelled,
        # the approval dismissed (nothing was run), the mission UNKNOWN
        ((_, finished),) = _events(journal, "MISSION_FINISHED")
        assert finished["status"] == "UNKNOWN" and "interrupted" in finished["summary"]
        ((_, dismissed),) = _events(journal, "INTERACTION_RESOLVED")
        assert dismissed["resolution"] == "dismiss" and dismissed["operator"] == "harness"
        results = [p["status"] for _, p in _events(journal, "TOOL_RESULT_RECORDED")]
        assert results == ["cancelled"]
        assert _events(journal, "ROBOT_ACTION_STARTED") == [], "the unapproved call never reached the robot"
        # the record is durable and idempotent: an operator's later approval meets the first answer
        code = cli_main(["answer", ask["interaction_id"], "approve", "--token", TOKEN, "--journal", str(journal)])
        assert code == 3
        # the client's retry of the same mission gets the recorded outcome and nothing runs
        accepted, result = client.send("Go to the spot.", mission_id="m-approve-1", owner_token=TOKEN,
                                       server_timeout_s=20.0, timeout_s=60.0)
        assert accepted and result.status == "UNKNOWN" and result.summary.startswith("repeated request")
        assert len(_events(journal, "MISSION_STARTED")) == 1


QUESTION_TURNS = [{"tool_calls": [{"name": "ask_operator", "arguments": {
    "question": "Which door should I use?", "choices": ["north", "south"]}}]},
    {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]}, {"done": "at the spot"}]


def test_a_pending_question_survives_a_supervisor_kill_and_a_late_answer_meets_the_first_resolution(
        tmp_path, ros_client):
    from robot_harness.cli import main as cli_main
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.mission_view import mission_view

    _, client = ros_client
    with _killed_while_asking(tmp_path, ros_client, turns=QUESTION_TURNS,
                              interactions={"ask_operator": True, "timeout_s": 60.0},
                              mission_id="m-question-1") as (journal, ask):
        assert ask["kind"] == "question" and ask["choices"] == ["north", "south"]
        # the question's record survives the kill; the restarted supervisor dismisses it (the mission is
        # over: nobody waits for the answer any more) and finishes the mission UNKNOWN, resuming nothing
        ((_, finished),) = _events(journal, "MISSION_FINISHED")
        assert finished["status"] == "UNKNOWN" and "interrupted" in finished["summary"]
        assert "pending interaction(s) were dismissed" in finished["summary"]
        ((_, asked_after),) = _events(journal, "INTERACTION_REQUESTED")
        assert asked_after == ask, "the question's record is unchanged"
        ((_, dismissed),) = _events(journal, "INTERACTION_RESOLVED")
        assert dismissed["resolution"] == "dismiss" and dismissed["operator"] == "harness"
        assert [p["status"] for _, p in _events(journal, "TOOL_RESULT_RECORDED")] == ["cancelled"]
        assert _events(journal, "ROBOT_ACTION_STARTED") == [], "nothing moved, before or after the restart"
        assert len(_events(journal, "MODEL_TURN_STARTED")) == 1, "no turn after the question: nothing resumed"
        # a late answer gets a clear refusal (the first resolution stands); the same dismissal again is
        # accepted and changes nothing
        answer = ["answer", ask["interaction_id"], "answer", "--choice", "south", "--token", TOKEN,
                  "--journal", str(journal)]
        assert cli_main(answer) == 3
        same = ["answer", ask["interaction_id"], "dismiss", "--token", TOKEN, "--journal", str(journal)]
        assert cli_main(same) == 0
        assert len(_events(journal, "INTERACTION_RESOLVED")) == 1
        j = SqliteJournal(journal, clock=SystemClock(), ids=IdGenerator())
        try:
            j.setup()
            view = mission_view(j.events(mission_id="m-question-1"), now=time.time())
        finally:
            j.close()
        assert view["mission"]["status"] == "UNKNOWN" and view["pending_interactions"] == []
        assert [i["state"] for i in view["interactions"]] == ["dismiss"]
        # the client's retry of the same mission gets the recorded outcome and nothing runs
        accepted, result = client.send("Go to the spot.", mission_id="m-question-1", owner_token=TOKEN,
                                       server_timeout_s=20.0, timeout_s=60.0)
        assert accepted and result.status == "UNKNOWN" and result.summary.startswith("repeated request")
        assert len(_events(journal, "MISSION_STARTED")) == 1
        assert _events(journal, "ROBOT_ACTION_STARTED") == []
