"""Decision replay of missions the real graph ran (supervisor over loopback DDS against sim_robot):
the journal database keeps each mission's tape; the replay decides the same way with no robot and
no model."""
from __future__ import annotations

import pytest

from ._graph import DONE, GO_SPOT, run, scenario

pytest.importorskip("rclpy")


def test_a_mission_on_the_real_graph_replays_by_decision(tmp_path):
    from robot_harness.decision_replay import replay_journal_mission

    report, events = run(tmp_path, scenario([GO_SPOT, DONE]))
    assert report["status"] == "SUCCEEDED", report["summary"]
    assert events[0].payload["config_version"] == 1, "a fresh journal's first mission runs under version 1"
    result = replay_journal_mission(tmp_path / "journal.sqlite3", report["mission_id"])
    assert result.events == len(events) and result.readings > 50
    assert result.speed_ratio > 10.0, result.as_dict()


def test_the_supervisor_runs_each_mission_under_the_released_version_and_it_replays(tmp_path):
    """A version released in the journal database (issue 17) applies from the supervisor's next mission:
    its changes are in the configuration the mission journals, and the mission is pinned to it."""
    import time

    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.config import load_harness_config
    from robot_harness.core.config_versions import Candidate, ConfigStore, Manifest, content_hash
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.decision_replay import replay_journal_mission

    path = tmp_path / "journal.sqlite3"
    j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None))
    j.setup()
    store = ConfigStore(j, now=time.time)
    changes = {"limits": {"max_turns": 7}, "navigation": {"timeout_per_m_s": 2.5}}
    v = store.add_candidate(Candidate(changes, Manifest(component="limits.max_turns", rollback_version=1)),
                            base=load_harness_config().model_dump(mode="json"), proposed_by="test")
    eid = store.add_evaluation(v, 1, True, {"reasons": []})
    store.record_release(v, action="release", approved_as="operator", operator="test", reason="", evaluation_id=eid,
                         expected_release=store.releases()[-1]["release_id"])
    j.close()
    report, events = run(tmp_path, scenario([GO_SPOT, DONE]))
    assert report["status"] == "SUCCEEDED", report["summary"]
    started = events[0].payload
    assert (started["config_version"], started["config_hash"]) == (v, content_hash(changes))
    assert started["config"]["limits"]["max_turns"] == 7 and started["config"]["navigation"]["timeout_per_m_s"] == 2.5
    result = replay_journal_mission(path, report["mission_id"])
    assert result.events == len(events)


@pytest.mark.parametrize("faults", [
    [{"kind": "reject", "on_goal": 1}],
    [{"kind": "early_success", "on_goal": 1, "after_s": 0.2}],
    [{"kind": "stall", "on_goal": 1, "after_s": 0.2}],
], ids=["rejected", "early_success", "stall"])
def test_failures_on_the_real_graph_replay_by_decision(tmp_path, faults):
    from robot_harness.decision_replay import replay_journal_mission

    report, events = run(tmp_path, scenario([GO_SPOT, DONE], faults=faults))
    assert report["status"] in ("FAILED", "UNKNOWN"), report["summary"]
    result = replay_journal_mission(tmp_path / "journal.sqlite3", report["mission_id"])
    assert result.events == len(events)


def test_the_cli_says_same_decisions_and_exits_1_naming_a_changed_event(tmp_path):
    import json
    import sqlite3
    import subprocess
    import sys

    report, _ = run(tmp_path, scenario([GO_SPOT, DONE]))
    journal = tmp_path / "journal.sqlite3"
    cli = [sys.executable, "-m", "robot_harness", "replay", "--decisions", "--journal", str(journal),
           "--mission", report["mission_id"]]
    same = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert same.returncode == 0 and "same decisions" in same.stdout and "x real time" in same.stdout, same
    what = subprocess.run([*cli, "--set", "navigation.timeout_s=9", "--json"], capture_output=True, text=True,
                          timeout=120)
    doc = json.loads(what.stdout)
    assert what.returncode == 0 and doc["field"] == "payload.intent.timeout_s" and doc["final_status"] == "SUCCEEDED"
    # the record says the harness gave the action another timeout than the code would
    db = sqlite3.connect(journal)
    seq, payload = db.execute("SELECT seq, payload FROM events WHERE type = 'ROBOT_ACTION_STARTED'").fetchone()
    body = json.loads(payload)
    body["intent"]["timeout_s"] += 1.0
    db.execute("UPDATE events SET payload = ? WHERE seq = ?", (json.dumps(body), seq))
    db.commit()
    db.close()
    changed = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert changed.returncode == 1, changed
    assert "NONDETERMINISM" in changed.stdout and f"#{seq} ROBOT_ACTION_STARTED" in changed.stdout
    assert "payload.intent.timeout_s" in changed.stdout


def test_a_mission_an_operator_stopped_replays_by_decision(tmp_path):
    """A Stop is an input from outside: where each read of the Stop flag found it is on the tape,
    so the replay ends the mission where the recording did, CANCELLED."""
    import threading
    import time

    from rclpy.node import Node

    from robot_harness.decision_replay import replay_journal_mission
    from robot_harness.srv import Stop

    from .test_mission_service import _graph as service_graph

    graphs = service_graph(tmp_path, [{"kind": "stall", "on_goal": 1, "after_s": 0.1}])
    g, client = next(graphs)
    try:
        box: dict = {}
        t = threading.Thread(target=lambda: box.update(zip(("accepted", "result"), client.send("Go to the spot."))))
        t.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(e.event.value == "accepted" for e in g.sim.goal_log):
            time.sleep(0.05)
        node = Node("test_replay_stop_client", context=g.context)
        g.add_node(node)
        cli = node.create_client(Stop, "/supervisor/stop")
        assert cli.wait_for_service(timeout_sec=10)
        fut = cli.call_async(Stop.Request(reason="operator pressed stop"))
        t.join(timeout=30)
        assert box["result"].status == "CANCELLED", box["result"].summary
    finally:
        graphs.close()
    result = replay_journal_mission(tmp_path / "j.sqlite3", box["result"].mission_id)
    assert result.events > 10


def test_a_routed_mission_with_a_provider_fallback_and_a_plan_replays_by_decision(tmp_path):
    """The tape keeps the config as sorted JSON: nothing routing decides may hang on the cards' order (the
    cards are listed here against the alphabet on purpose); the plan's turns are the harness's own."""
    from robot_harness.decision_replay import replay_journal_mission

    plan = {"tool_calls": [{"name": "propose_plan", "arguments": {"steps": [
        {"skill": "navigate_to", "arguments": {"place": "spot"}},
        {"skill": "propose_done", "arguments": {"summary": "at the spot"}}]}}]}
    cards = {"nav_main": {"capability": "navigation", "p_success": 0.95, "latency_s": 1.0},
             "nav_backup": {"capability": "navigation", "namespace": "backup", "p_success": 0.9, "latency_s": 2.0}}
    report, events = run(tmp_path, scenario([plan], faults=[{"kind": "reject", "at_s": 0.0}],
                                            robot={"providers": {"backup": {"speed": 2.0}}},
                                            harness={"providers": cards}))
    assert report["status"] == "SUCCEEDED", report["summary"]
    started = [e.payload["intent"]["provider"] for e in events if e.type.value == "ROBOT_ACTION_STARTED"]
    assert started == ["nav_main", "nav_backup"]
    result = replay_journal_mission(tmp_path / "journal.sqlite3", report["mission_id"])
    assert result.events == len(events)
