"""The Mission action as a client sees it: YAML goals, per-mission overrides,
refusals, cancellation and Stop — on the real in-process graph."""
from __future__ import annotations

import json
import threading
import time

import pytest
import yaml

from robot_harness.bringup import BringUp
from robot_harness.client import MissionClient

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "spot": {"x": 2.0, "y": 1.0, "yaw": 0.0}}


def set_message_fields(msg, values):
    """What `ros2 action send_goal ... "<yaml>"` does (rosidl_runtime_py.set_message_fields), minimally."""
    import importlib

    types = msg.get_fields_and_field_types()
    for name, value in values.items():
        assert name in types, f"unknown field {name}"
        if isinstance(value, list) and types[name].startswith("sequence<"):
            pkg, typ = types[name][len("sequence<"):-1].split("/")
            item_cls = getattr(importlib.import_module(f"{pkg}.msg"), typ)
            setattr(msg, name, [set_message_fields(item_cls(), v) for v in value])
        else:
            setattr(msg, name, value)
    return msg


def test_the_mission_goal_is_sendable_from_yaml():
    from robot_harness.action import Mission

    text = "{goal: 'Go to office_storage, capture an image there, return to dock and report.', " \
           "mission_id: m-1, overrides: [{key: limits.mission_timeout_s, value: '60'}]}"
    goal = set_message_fields(Mission.Goal(), yaml.safe_load(text))
    assert goal.goal.startswith("Go to office_storage")
    assert goal.overrides[0].key == "limits.mission_timeout_s" and goal.overrides[0].value == "60"
    constants = {getattr(Mission.Result, c) for c in dir(Mission.Result)
                 if c.isupper() and isinstance(getattr(Mission.Result, c), str)}
    assert {"SUCCEEDED", "FAILED", "UNKNOWN", "BLOCKED", "WAITING_USER", "CANCELLED"} <= constants


def _graph(tmp_path, faults):
    turns = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "spot"}}]}, {"done": "at the spot"}]
    overrides = {
        "sim_robot": {"speed": 3.0, "faults_json": json.dumps(faults)},
        "planner": {"turns_json": json.dumps(turns)},
        "supervisor": {"journal_path": str(tmp_path / "j.sqlite3"),
                       "harness_config_json": json.dumps({"places": PLACES, "navigation": {"timeout_s": 60.0}})},
    }
    with BringUp(overrides=overrides) as g:
        client = MissionClient(g.context)
        g.add_node(client.node, client.destroy)
        yield g, client


@pytest.fixture
def graph(tmp_path):
    yield from _graph(tmp_path, [])


@pytest.fixture
def stalling_graph(tmp_path):
    yield from _graph(tmp_path, [{"kind": "stall", "on_goal": 1, "after_s": 0.1}])


def test_overrides_apply_to_one_mission_and_bad_ones_are_refused(graph):
    g, client = graph
    accepted, result = client.send("Go to the spot.", overrides={"limits.max_turns": "1"})
    assert accepted
    assert result.status == "UNKNOWN" and "turn budget of 1" in result.summary
    # the next mission has the configured limits again and goes through
    accepted, result = client.send("Go to the spot.")
    assert accepted and result.status == "SUCCEEDED", result.summary
    # a malformed override never starts a mission
    accepted, refused = client.send("Go to the spot.", overrides={"limits.no_such_limit": "3"})
    assert accepted and refused.refusal == "invalid_goal" and "no_such_limit" in refused.summary, refused.summary
    # nor one that loosens the site's checks on itself (who approves, the workspace, the tolerances)
    accepted, refused = client.send("Go to the spot.", overrides={
        "interactions.approval_policy.requires_operator": "owner"})
    assert accepted and refused.refusal == "invalid_goal" and "not allowed for one mission" in refused.summary
    accepted, refused = client.send("   ")
    assert accepted and refused.refusal == "invalid_goal", "an empty goal is refused"
    assert refused.status == "BLOCKED" and "1..2000 characters" in refused.summary, refused.summary


def test_cancel_stops_the_robot_and_reports_cancelled(stalling_graph):
    g, client = stalling_graph
    # the robot stalls on its first goal: cancel the mission while the goal is running
    from robot_harness.action import Mission

    box, handle_box = {}, {}

    def send():
        fut = client.client.send_goal_async(Mission.Goal(goal="Go to the spot."))
        while not fut.done():
            time.sleep(0.02)
        handle_box["h"] = fut.result()
        res = handle_box["h"].get_result_async()
        while not res.done():
            time.sleep(0.02)
        box["result"] = res.result()

    t = threading.Thread(target=send)
    t.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(e.goal_index == 1 and e.event.value == "accepted" for e in g.sim.goal_log):
        time.sleep(0.05)
    assert any(e.goal_index == 1 for e in g.sim.goal_log), "the goal reached the robot"
    handle_box["h"].cancel_goal_async()
    t.join(timeout=30)
    assert box["result"].result.status == "CANCELLED", box["result"].result.summary
    time.sleep(0.5)
    assert any(e.goal_index == 1 and e.event.value == "canceled" for e in g.sim.goal_log), [(e.goal_index, e.event.value, e.reason) for e in g.sim.goal_log]
    import sqlite3

    db = sqlite3.connect(g.supervisor.journal_path)
    (reason,) = db.execute("select json_extract(payload, '$.reason') from events where type='ROBOT_ACTION_OUTCOME' "
                           "order by seq desc limit 1").fetchone()
    assert "backend confirmed canceled" in reason, reason


def test_stop_service_stops_the_running_mission(stalling_graph):
    from rclpy.node import Node

    from robot_harness.srv import Stop

    g, client = stalling_graph
    box = {}
    t = threading.Thread(target=lambda: box.update(zip(("accepted", "result"), client.send("Go to the spot."))))
    t.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(e.event.value == "accepted" for e in g.sim.goal_log):
        time.sleep(0.05)
    node = Node("test_stop_client", context=g.context)
    g.add_node(node)
    cli = node.create_client(Stop, "/supervisor/stop")
    assert cli.wait_for_service(timeout_sec=10)
    fut = cli.call_async(Stop.Request(reason="operator pressed stop"))
    deadline = time.monotonic() + 10
    while not fut.done() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fut.done() and fut.result().ok
    t.join(timeout=30)
    assert box["accepted"]
    assert box["result"].status == "CANCELLED"
    assert "operator pressed stop" in box["result"].summary
    assert any(e.event.value == "canceled" for e in g.sim.goal_log)


def _journal_events(g, type_):
    import sqlite3

    db = sqlite3.connect(g.supervisor.journal_path)
    try:
        return [json.loads(p) for (p,) in db.execute("select payload from events where type=? order by seq", (type_,))]
    finally:
        db.close()


def test_a_stop_is_journaled_before_the_runner_acts_on_it(stalling_graph):
    test_stop_service_stops_the_running_mission(stalling_graph)
    g, _ = stalling_graph
    (stop,) = _journal_events(g, "STOP_REQUESTED")
    assert stop == {"reason": "operator pressed stop", "source": "stop_service"}
    (released,) = _journal_events(g, "LEASE_RELEASED")
    assert released["resource"] == "base" and released["why"] == "confirmed_terminal"


def test_a_repeated_mission_request_gets_the_recorded_outcome_and_nothing_moves_again(graph):
    g, client = graph
    accepted, first = client.send("Go to the spot.", mission_id="mission-repeat-1")
    assert accepted and first.status == "SUCCEEDED", first.summary
    goals = len(g.sim.goal_log)
    accepted, again = client.send("Go to the spot.", mission_id="mission-repeat-1")
    assert accepted, "a repeat is answered, not refused"
    assert again.status == "SUCCEEDED" and again.mission_id == "mission-repeat-1"
    assert again.summary.startswith("repeated request; nothing was run again")
    assert again.verdict_id == first.verdict_id and list(again.evidence_ids) == list(first.evidence_ids)
    assert len(g.sim.goal_log) == goals, "the robot was not sent anywhere again"
    assert len(_journal_events(g, "MISSION_STARTED")) == 1


def test_a_lost_acknowledgment_is_found_by_goal_id_and_the_robot_moves_once(tmp_path):
    gen = _graph(tmp_path, [{"kind": "ack_delay", "on_goal": 1, "delay_s": 2.5}])
    g, client = next(gen)
    try:
        accepted, result = client.send("Go to the spot.", overrides={"navigation.accept_timeout_s": "0.5",
                                                                      "navigation.lookup_timeout_s": "5.0"})
        assert accepted and result.status == "SUCCEEDED", result.summary
        accepted_goals = [e for e in g.sim.goal_log if e.event.value == "accepted"]
        assert len(accepted_goals) == 1, "one motion: the lost acknowledgment was looked up, not re-sent"
        (found,) = _journal_events(g, "ROBOT_ACTION_RECONCILED")
        assert found["finding"] == "acknowledgment_lost" and found["backend_status"] in ("accepted", "executing", "succeeded")
    finally:
        next(gen, None)


def test_check_preconditions_answers_over_the_service_journals_the_check_and_moves_nothing(graph):
    """``/supervisor/check_preconditions``: the same pre-dispatch check, on demand, for a stated decision snapshot."""
    from rclpy.node import Node

    from robot_harness.core.records import EventType
    from robot_harness.nodes._util import wait_future
    from robot_harness.srv import CheckPreconditions

    g, client = graph
    accepted, result = client.send("Go to the spot.")
    assert accepted and result.status == "SUCCEEDED", result.summary
    journal = g.supervisor.journal
    snaps = [e.snapshot_id for e in journal.events(mission_id=result.mission_id)
             if e.type is EventType.WORLD_SNAPSHOT_CAPTURED]
    at_dock, at_spot = snaps[0], snaps[-1]

    node = Node("precondition_probe", context=g.context)
    g.add_node(node)
    cli = node.create_client(CheckPreconditions, "/supervisor/check_preconditions")
    assert cli.wait_for_service(timeout_sec=10.0)

    def check(skill, arguments, snapshot_id):
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        req = CheckPreconditions.Request(mission_id=result.mission_id, skill=skill,
                                         arguments_json=text, decision_snapshot_id=snapshot_id)
        return wait_future(cli.call_async(req), 10.0, "check_preconditions")

    goals_before = len(g.sim.goal_log)

    ok = check("navigate_to", {"place": "dock"}, at_spot)
    assert ok.ok and not ok.error, ok.report_json
    assert ok.fresh_snapshot_id and ok.fresh_snapshot_id != at_spot
    assert json.loads(ok.report_json)["ok"] is True

    drifted = check("navigate_to", {"place": "dock"}, at_dock)  # decided at the dock; the robot is at the spot now
    assert not drifted.ok and not drifted.error
    failed = [c for c in json.loads(drifted.report_json)["checks"] if not c["ok"]]
    assert failed and all("drift" in c["name"] for c in failed), failed

    for skill, arguments, snapshot_id, problem in [
        ("fly_to", {"place": "dock"}, at_spot, "fly_to"),
        ("navigate_to", {"place": 3}, at_spot, "place"),
        ("navigate_to", {"place": "dock"}, "snap-does-not-exist", "snap-does-not-exist"),
        ("get_pose", {}, at_spot, "not a managed physical action"),
        ("navigate_to", "{not json", at_spot, "arguments_json"),
    ]:
        bad = check(skill, arguments, snapshot_id)
        assert not bad.ok and problem in bad.error, (skill, bad.error)

    assert len(g.sim.goal_log) == goals_before, "a precondition check never moves the robot"
    recorded = journal.events(mission_id=result.mission_id, types=[EventType.ACTION_PRECONDITION_CHECKED])
    assert [e.payload["ok"] for e in recorded[-2:]] == [True, False], "both answered checks are journaled"


def test_check_preconditions_during_a_running_action_reports_the_conflict(stalling_graph):
    """An on-demand check while a mission's navigation is running must see that action, not an idle robot."""
    from rclpy.node import Node

    from robot_harness.action import Mission
    from robot_harness.core.records import EventType
    from robot_harness.nodes._util import wait_future
    from robot_harness.srv import CheckPreconditions

    g, client = stalling_graph
    box = {}

    def send():
        fut = client.client.send_goal_async(Mission.Goal(goal="Go to the spot.", mission_id="m-busy"))
        while not fut.done():
            time.sleep(0.02)
        box["handle"] = fut.result()

    threading.Thread(target=send, daemon=True).start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(e.event.value == "accepted" for e in g.sim.goal_log):
        time.sleep(0.05)
    assert any(e.event.value == "accepted" for e in g.sim.goal_log), "the goal reached the robot"
    snaps = [e.snapshot_id for e in g.supervisor.journal.events(mission_id="m-busy", types=[EventType.WORLD_SNAPSHOT_CAPTURED])]

    node = Node("precondition_probe_busy", context=g.context)
    g.add_node(node)
    cli = node.create_client(CheckPreconditions, "/supervisor/check_preconditions")
    assert cli.wait_for_service(timeout_sec=10.0)
    req = CheckPreconditions.Request(mission_id="m-busy", skill="navigate_to", arguments_json='{"place": "dock"}',
                                     decision_snapshot_id=snaps[-1])
    resp = wait_future(cli.call_async(req), 10.0, "check_preconditions")
    failed = {c["name"] for c in json.loads(resp.report_json)["checks"] if not c["ok"]}
    assert not resp.ok and "no_conflicting_action" in failed, resp.report_json
    box["handle"].cancel_goal_async()
