"""Journal events folded into Foxglove-friendly values, without ROS or the Foxglove SDK.

A real mission (the engine against the scripted fakes) is folded and the
result checked against the journal it came from; single events check levels,
roles and robustness; the shipped layout must be exactly what the code builds.
The live bridge's journal follower reads a file from before robot ids and a
fleet's PostgreSQL database (skipped without PostgreSQL).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig
from robot_harness.compose import mission_runner
from robot_harness.core.journal import MemoryJournal
from robot_harness.core.records import (
    ActionStatus,
    Availability,
    EventType,
    FieldMeta,
    JournalEvent,
    MissionStatus,
    Pose2D,
    WorldSnapshot,
)
from robot_harness.core.skills import default_skills
from robot_harness.evidence import foxglove as fx

from .fakes import FakeRobot, ScriptPlanner

REPO = Path(__file__).resolve().parents[2]
PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "office": {"x": 3.0, "y": 1.0, "yaw": 1.57}}
GO_OFFICE = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "office"}}]}
E = EventType


def run_mission(turns, **robot_kw):
    clock = ManualClock()
    ids = IdGenerator(seed=7)
    robot = FakeRobot(clock=clock, **robot_kw)
    config = HarnessConfig(places=PLACES)
    journal = MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids, skills=default_skills(config.navigation),
                           snapshots=robot, planner=ScriptPlanner(turns), navigation=robot, robot_io=robot)
    outcome = runner.run("go to the office")
    return outcome, journal


def ev(type_: EventType, payload=None, *, seq=1, stamp=1_700_000_000.5, **kw) -> JournalEvent:
    return JournalEvent(seq=seq, event_id=f"ev-{seq}", type=type_, stamp=stamp, mission_id=kw.pop("mission_id", "m-1"),
                        payload=payload or {}, **kw)


def snap(i: int, x: float, y: float, *, stamp: float, availability=Availability.AVAILABLE, frame="map") -> WorldSnapshot:
    return WorldSnapshot(snapshot_id=f"s-{i}", mission_id="m-1", captured_at=stamp + 0.01, frame_id=frame,
                         pose=Pose2D(x=x, y=y, yaw=0.1 * i),
                         pose_meta=FieldMeta(availability=availability, source_stamp=stamp, age_s=0.01, max_age_s=0.5))


def snapshot_event(s: WorldSnapshot, seq: int) -> JournalEvent:
    return ev(E.WORLD_SNAPSHOT_CAPTURED, {"reason": s.reason, "snapshot": s.model_dump(mode="json")},
              seq=seq, stamp=s.captured_at, snapshot_id=s.snapshot_id)


def of(kind, items):
    return [i for i in items if isinstance(i, kind)]


# ----------------------------------------------------------------- a whole mission


def test_a_verified_mission_folds_into_lines_poses_path_places_and_action_states():
    outcome, journal = run_mission([GO_OFFICE, {"done": "arrived"}])
    assert outcome.status is MissionStatus.SUCCEEDED, outcome.summary
    events = journal.events()
    derived = fx.DerivedTopics().feed_all(events)

    (places,) = of(fx.PlacesUpdate, derived)
    assert places.frame_id == "map" and [n for n, _ in places.places] == ["dock", "office"]
    assert places.places[1][1] == Pose2D(x=3.0, y=1.0, yaw=1.57)
    assert places.stamp == events[0].stamp

    lines = of(fx.LogLine, derived)
    by_type = {line.event_type: line for line in lines if line.seq}
    verdict = by_type["VERDICT_RECORDED"]
    assert verdict.level is fx.LogLevel.INFO and verdict.name == "robot_harness.verifier"
    assert "VERIFIED_DONE" in verdict.msg and verdict.msg.startswith(f"[{verdict.seq}] VERDICT_RECORDED: ")
    assert by_type["COMMIT_RECORDED"].name == "robot_harness.gate"
    assert by_type["MISSION_FINISHED"].level is fx.LogLevel.INFO and "SUCCEEDED" in by_type["MISSION_FINISHED"].msg
    assert by_type["TOOL_CALL_RECORDED"].name == "robot_harness.planner" and "navigate_to" in by_type["TOOL_CALL_RECORDED"].msg
    assert any("places in map: dock (0.00, 0.00), office (3.00, 1.00)" in line.msg for line in lines)
    # Snapshots and progress have their own topics, not lines; every other event has exactly one.
    lined = [e for e in events if e.type not in (E.WORLD_SNAPSHOT_CAPTURED, E.ROBOT_ACTION_PROGRESS)]
    assert sorted(line.seq for line in lines if line.event_type != "MISSION_STARTED" or "places" not in line.msg) == \
        [e.seq for e in lined]
    assert all(line.stamp == next(e.stamp for e in events if e.seq == line.seq) for line in lines)

    # The path is the fresh snapshot poses in order; its last pose is the final snapshot's
    # observation (a later snapshot of the same observation adds nothing).
    snapshots = [e.payload["snapshot"] for e in events if e.type is E.WORLD_SNAPSHOT_CAPTURED]
    final = WorldSnapshot.model_validate(snapshots[-1])
    path = of(fx.PathUpdate, derived)[-1]
    assert path.poses[-1].pose == final.pose == Pose2D(x=3.0, y=1.0, yaw=1.57)
    assert path.poses[-1].stamp == final.pose_meta.source_stamp and path.frame_id == final.frame_id
    assert path.poses[0].pose == Pose2D(x=0.0, y=0.0)
    assert of(fx.StampedPose, derived)[-1] == path.poses[-1]
    assert len(of(fx.SnapshotUpdate, derived)) == len(snapshots)

    states = [u.action.state for u in of(fx.ActionStateUpdate, derived)]
    assert states == [ActionStatus.REQUESTED, ActionStatus.ACCEPTED, ActionStatus.RUNNING, ActionStatus.VERIFYING,
                      ActionStatus.SUCCEEDED]
    last = of(fx.ActionStateUpdate, derived)[-1]
    assert last.action.skill == "navigate_to" and last.action.revision == 4 and last.backend == "fake/nav"
    assert of(fx.VerdictUpdate, derived)[-1].verdict["goal_verdict"] == "verified_done"
    assert of(fx.ProgressUpdate, derived), "the fake robot reports feedback"


def test_a_rejected_goal_is_an_error_line_and_a_failed_action():
    outcome, journal = run_mission([GO_OFFICE], mode="reject")
    assert outcome.status is not MissionStatus.SUCCEEDED
    derived = fx.DerivedTopics().feed_all(journal.events())
    failed = [line for line in of(fx.LogLine, derived)
              if line.event_type in ("ROBOT_ACTION_STATE_CHANGED", "ROBOT_ACTION_OUTCOME") and "FAILED" in line.msg]
    assert failed and all(line.level is fx.LogLevel.ERROR for line in failed)
    assert of(fx.ActionStateUpdate, derived)[-1].action.state is ActionStatus.FAILED
    finished = [line for line in of(fx.LogLine, derived) if line.event_type == "MISSION_FINISHED"]
    assert finished[-1].level >= fx.LogLevel.WARN


# ----------------------------------------------------------------- single events


VERDICT = {"verdict_id": "v-1", "mission_id": "m-1", "contract_id": "c-1", "contract_revision": 1, "state_version": 2,
           "plan_node_id": "turn-1", "invocation_id": "call-1", "goal_verdict": "continue", "steps": []}
"""A whole verdict record as the verifier writes it (the journal refuses a partial one)."""
RECOVERY = {"failure": {"failure_id": "fail-1", "failure_kind": "action_failed", "reason": "aborted"},
            "decision": {"failure_id": "fail-1", "rung": "local_replan", "reason": "budget left",
                         "authorized": ["local_replan"], "budgets_left": {"local_replan": 1}}}
"""A whole recovery decision as the engine journals it."""


@pytest.mark.parametrize(("type_", "payload", "level", "role"), [
    (E.GATE_REJECTED, {"verdict_id": "v-1", "message": "stale state version"}, "WARN", "gate"),
    (E.STOP_REQUESTED, {"reason": "person in the aisle", "source": "cli"}, "WARN", "operator"),
    (E.VERDICT_RECORDED, {"verdict": {**VERDICT, "verdict_id": "v-2", "goal_verdict": "continue"}}, "WARN", "verifier"),
    (E.VERDICT_RECORDED, {"verdict": {**VERDICT, "verdict_id": "v-3", "goal_verdict": "blocked"}}, "ERROR", "verifier"),
    (E.ROBOT_ACTION_OUTCOME, {"state": "UNKNOWN", "reason": "pose stale"}, "WARN", "dispatcher"),
    (E.MISSION_FINISHED, {"status": "BLOCKED", "summary": "journal unavailable"}, "ERROR", "supervisor"),
    (E.MISSION_FINISHED, {"status": "CANCELLED", "summary": "stopped"}, "WARN", "supervisor"),
    (E.INTERACTION_REQUESTED, {"interaction_id": "ask-1", "kind": "approval", "prompt": "go?"}, "WARN", "supervisor"),
    (E.INTERACTION_RESOLVED, {"interaction_id": "ask-1", "resolution": "approve", "operator": "ana"}, "INFO", "operator"),
    (E.INTERACTION_RESOLVED, {"interaction_id": "ask-1", "resolution": "deny", "operator": "ana"}, "WARN", "operator"),
    (E.TOOL_RESULT_RECORDED, {"result": {"name": "navigate_to", "status": "precondition_changed"}}, "WARN", "supervisor"),
    (E.ACTION_PRECONDITION_CHECKED, {"ok": False, "checks": [{"name": "pose_fresh", "ok": False}]}, "WARN", "dispatcher"),
    (E.CONTRACT_FROZEN, {"error": {"code": "uncompilable", "message": "no such place"}}, "ERROR", "contracts"),
    (E.RECOVERY_DECIDED, RECOVERY, "WARN", "recovery"),
    (E.FACT_RECORDED, {"fact": {"status": "OBSERVED", "key": "robot.pose"}}, "DEBUG", "supervisor"),
])
def test_levels_and_roles(type_, payload, level, role):
    line = fx.log_line(ev(type_, payload, seq=12))
    assert line is not None and line.level is fx.LogLevel[level] and line.name == f"robot_harness.{role}"
    assert line.msg.startswith(f"[12] {type_.value}: ") and line.seq == 12 and line.mission_id == "m-1"


def test_recovery_lines_say_what_failed_and_what_was_chosen():
    line = fx.log_line(ev(E.RECOVERY_DECIDED, RECOVERY))
    assert line is not None and line.msg.endswith("action_failed: aborted -> local_replan: budget left")


@pytest.mark.parametrize("type_", list(EventType))
def test_no_payload_shape_breaks_the_fold(type_):
    topics = fx.DerivedTopics()
    for payload in ({}, {"snapshot": {"nope": 1}, "action": 3, "to": "SIDEWAYS", "verdict": None, "config": []},
                    {"status": None, "result": "x", "places": {"a": {"x": "far"}}}):
        out = topics.feed(ev(type_, payload, robot_action_id="act-1"))
        lines = of(fx.LogLine, out)
        if type_ in (E.WORLD_SNAPSHOT_CAPTURED, E.ROBOT_ACTION_PROGRESS):
            assert not lines
        else:
            assert len(lines) == 1 and type_.value in lines[0].msg


def test_long_lines_are_cut():
    line = fx.log_line(ev(E.DONE_PROPOSED, {"text": "x" * 10_000}))
    assert line is not None and len(line.msg) == 2000 and line.msg.endswith("...")


def test_finish_line_mirrors_mission_finished():
    line = fx.finish_line(mission_id="m-1", status="FAILED", summary="far\nfrom target", stamp=5.0)
    assert line.level is fx.LogLevel.ERROR and line.msg == "MISSION_FINISHED: FAILED: far from target"
    assert line.seq == 0 and line.stamp == 5.0
    assert fx.finish_line(mission_id="m", status="SUCCEEDED", summary="", stamp=1.0).level is fx.LogLevel.INFO


# ----------------------------------------------------------------- poses, path, places


def test_only_fresh_poses_are_drawn_and_the_path_only_moves_forward():
    topics = fx.DerivedTopics()
    topics.feed(ev(E.MISSION_STARTED, {"config": {}}))
    out = topics.feed(snapshot_event(snap(1, 1.0, 0.0, stamp=100.0), 2))
    assert of(fx.StampedPose, out)[0].stamp == 100.0
    assert not of(fx.StampedPose, topics.feed(snapshot_event(snap(2, 5.0, 0.0, stamp=101.0, availability=Availability.STALE), 3)))
    assert not of(fx.PathUpdate, topics.feed(snapshot_event(snap(3, 6.0, 0.0, stamp=99.0), 4))), "older than the path"
    out = topics.feed(snapshot_event(snap(4, 2.0, 0.0, stamp=102.0), 5))
    assert [p.pose.x for p in of(fx.PathUpdate, out)[0].poses] == [1.0, 2.0]
    missing = snap(5, 0.0, 0.0, stamp=103.0).model_copy(update={"pose": None, "pose_meta": FieldMeta()})
    assert of(fx.SnapshotUpdate, topics.feed(snapshot_event(missing, 6))) and not of(fx.StampedPose, topics.feed(snapshot_event(missing, 7)))


def test_a_robot_standing_still_does_not_grow_the_path_but_its_last_pose_is_the_latest():
    topics = fx.DerivedTopics()
    still = [snap(i, 1.0, 2.0, stamp=100.0 + i) for i in range(5)]
    still = [s.model_copy(update={"pose": Pose2D(x=1.0, y=2.0, yaw=0.0)}) for s in still]
    outs = [topics.feed(snapshot_event(s, i + 1)) for i, s in enumerate(still)]
    last = of(fx.PathUpdate, outs[-1])[0]
    assert len(last.poses) == 1 and last.poses[0].stamp == 104.0 and last.poses[0].snapshot_id == "s-4"


def test_a_long_path_is_decimated_keeping_its_ends():
    topics = fx.DerivedTopics(max_path_poses=8)
    for i in range(40):
        out = topics.feed(snapshot_event(snap(i, float(i), 0.0, stamp=100.0 + i), i + 1))
    poses = of(fx.PathUpdate, out)[0].poses
    assert len(poses) <= 8 and poses[0].pose.x == 0.0 and poses[-1].pose.x == 39.0
    assert [p.pose.x for p in poses] == sorted(p.pose.x for p in poses)


def test_a_new_mission_starts_a_new_path():
    topics = fx.DerivedTopics()
    topics.feed(ev(E.MISSION_STARTED, {"config": {}}, mission_id="m-1"))
    topics.feed(snapshot_event(snap(1, 1.0, 0.0, stamp=100.0), 2))
    topics.feed(ev(E.MISSION_STARTED, {"config": {}}, seq=3, mission_id="m-2"))
    assert topics.mission_id == "m-2"
    out = topics.feed(snapshot_event(snap(2, 2.0, 0.0, stamp=101.0), 4).model_copy(update={"mission_id": "m-2"}))
    assert [p.pose.x for p in of(fx.PathUpdate, out)[0].poses] == [2.0]


def test_events_of_another_mission_add_nothing():
    topics = fx.DerivedTopics()
    topics.feed(ev(E.MISSION_STARTED, {"config": {}}, mission_id="m-1"))
    assert topics.feed(ev(E.STOP_REQUESTED, {"reason": "not yours"}, seq=2, mission_id="m-9")) == []
    assert of(fx.LogLine, topics.feed(ev(E.LEASE_RELEASED, {"resource": "base", "owner": "x"}, seq=3, mission_id="")))


def test_places_from_config_skip_what_is_not_a_place():
    got = fx.places_from_config({"frame_id": "site", "places": {"a": {"x": 1, "y": 2}, "b": {"x": "?"}, "c": 3}},
                                stamp=7.0)
    assert got is not None and got.frame_id == "site" and got.places == (("a", Pose2D(x=1.0, y=2.0)),)
    assert fx.places_from_config({"places": {}}, stamp=1.0) is None


def test_stamps_and_quaternions():
    assert fx.split_stamp(1_700_000_000.25) == (1_700_000_000, 250_000_000)
    assert fx.split_stamp(float("nan")) == (0, 0) and fx.split_stamp(-1.0) == (0, 0)
    x, y, z, w = fx.quaternion_from_yaw(math.pi / 2)
    assert (x, y) == (0.0, 0.0) and z == pytest.approx(math.sqrt(0.5)) and w == pytest.approx(math.sqrt(0.5))


# ----------------------------------------------------------------- live JSON


def test_every_live_message_matches_its_channel_schema():
    jsonschema = pytest.importorskip("jsonschema")
    _, journal = run_mission([GO_OFFICE, {"done": "arrived"}])
    derived = fx.DerivedTopics().feed_all(journal.events())
    validators = {t: jsonschema.Draft202012Validator(s) for t, s in fx.LIVE_CHANNELS.items()}
    for schema in fx.LIVE_CHANNELS.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    seen = set()
    for item in derived:
        for topic, message, log_time in fx.to_live_json(item):
            validators[topic].validate(message)
            json.dumps(message, allow_nan=False)
            assert log_time == item.stamp
            seen.add(topic)
    assert seen == set(fx.LIVE_CHANNELS)
    line = next(i for i in derived if isinstance(i, fx.LogLine) and i.event_type == "VERDICT_RECORDED")
    ((_, msg, _),) = fx.to_live_json(line)
    assert msg["level"] == 2 and msg["name"] == "robot_harness.verifier" and msg["line"] == line.seq
    assert {s["title"] for t, s in fx.LIVE_CHANNELS.items() if t in (fx.POSE_TOPIC, fx.PATH_TOPIC, fx.LOG_TOPIC)} == \
        {"foxglove.PoseInFrame", "foxglove.PosesInFrame", "foxglove.Log"}


def test_live_snapshots_use_the_ros_message_field_names():
    s = snap(1, 1.0, 2.0, stamp=100.0).model_copy(update={"distance_remaining": 3.5})
    ((topic, msg, _),) = fx.to_live_json(fx.SnapshotUpdate(stamp=100.0, snapshot=s))
    assert topic == fx.SNAPSHOTS_TOPIC and msg["distance_remaining"] == 3.5
    assert msg["pose"]["position"] == {"x": 1.0, "y": 2.0, "z": 0.0} and msg["pose_meta"]["age_s"] == 0.01
    assert msg["pose_meta"]["availability"] == "AVAILABLE" and msg["pose_meta"]["source_stamp"] == {"sec": 100, "nsec": 0}


# ----------------------------------------------------------------- the layout


def test_the_shipped_layout_is_the_one_the_code_builds():
    shipped = (REPO / "config" / "foxglove_layout.json").read_text()
    assert shipped == fx.layout_json(), (
        "config/foxglove_layout.json is out of date; regenerate it with\n"
        "  python -c 'from robot_harness.evidence.foxglove import layout_json; print(layout_json(), end=\"\")'"
        " > config/foxglove_layout.json")


def test_the_layout_is_complete_and_names_only_topics_the_harness_writes():
    layout = json.loads(fx.layout_json())
    panels = fx.layout_panels(layout["layout"])
    assert sorted(panels) == sorted(layout["configById"]) and len(set(panels)) == len(panels)
    kinds = {p.split("!", 1)[0] for p in panels}
    assert {"3D", "RosOut", "Plot", "StateTransitions", "RawMessages"} <= kinds
    written = {fx.LOG_TOPIC, fx.POSE_TOPIC, fx.PATH_TOPIC, fx.PLACES_TOPIC, fx.PLACE_LABELS_TOPIC, fx.ACTION_STATE_TOPIC,
               fx.SNAPSHOTS_TOPIC, fx.PROGRESS_TOPIC, fx.VERDICTS_TOPIC, "/amcl_pose", "/navigate_to_pose/_action/feedback"}
    named = set(layout["configById"]["3D!robot_harness"]["topics"])
    for cfg in layout["configById"].values():
        for key in ("topicToRender", "topicPath"):
            if key in cfg:
                named.add(cfg[key])
        named.update(p["value"].split(".", 1)[0] for p in cfg.get("paths", []))
    assert named <= written, named - written
    assert layout["configById"]["RosOut!robot_harness"]["topicToRender"] == fx.LOG_TOPIC


def test_the_fold_loads_no_ros():
    code = "import sys, robot_harness.evidence.foxglove; assert 'rclpy' not in sys.modules; assert 'foxglove' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ----------------------------------------------------------------- the live bridge's journal follower (no SDK)


def _old_journal(path: Path) -> None:
    """A journal file from before robot ids: no robot_id column, migration 0006 not recorded."""
    import sqlite3

    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventDraft

    j = SqliteJournal(path, clock=ManualClock(1.0), ids=IdGenerator(1))
    j.setup()
    j.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-old", payload={"goal": "go"}),
              EventDraft(type=E.DONE_PROPOSED, mission_id="m-old", payload={"text": "there"})])
    j.close()
    db = sqlite3.connect(path)
    db.executescript("DROP INDEX events_robot_id; ALTER TABLE events DROP COLUMN robot_id;"
                     " DELETE FROM migrations WHERE name = '0006_robot_id';")
    db.close()


def test_the_follower_reads_a_journal_file_from_before_robot_ids(tmp_path):
    import sqlite3

    from robot_harness.core.clock import SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.records import EventDraft
    from robot_harness.operator.foxglove_bridge import JournalFollower

    path = tmp_path / "old.sqlite3"
    _old_journal(path)
    follower = JournalFollower(path)
    try:
        assert follower.start_seq() == 0
        events, last = follower.read(after_seq=0)
        assert [(e.seq, e.type, e.mission_id, e.robot_id) for e in events] == [
            (1, E.MISSION_STARTED, "m-old", ""), (2, E.DONE_PROPOSED, "m-old", "")]
        assert last == 2 and follower.skipped == 0
        assert follower.read(after_seq=2) == ([], 2)
        # the supervisor starts, migrates the file and writes on: followed without reopening
        j = SqliteJournal(path, clock=SystemClock(), ids=IdGenerator(None), robot_id="robot1")
        j.setup()
        j.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-new", payload={"goal": "again"})])
        j.close()
        events, last = follower.read(after_seq=2)
        assert [(e.seq, e.mission_id, e.robot_id) for e in events] == [(3, "m-new", "robot1")] and last == 3
    finally:
        follower.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM migrations WHERE name = '0006_robot_id'").fetchone() == (1,)
    db.close()


def test_the_follower_reads_a_fleet_database_through_the_journal_api(pg_url):
    pytest.importorskip("psycopg")
    from robot_harness.core.clock import SystemClock
    from robot_harness.core.journal import open_journal
    from robot_harness.core.records import EventDraft
    from robot_harness.operator.foxglove_bridge import JournalFollower

    secret = "hunter2-secret"
    follower = JournalFollower(pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{secret}@"))
    try:
        assert secret not in str(follower.path) and str(follower.path).startswith("postgresql://postgres:***@")
        assert follower.start_seq() == 0 and follower.read(after_seq=0) == ([], 0), "no schema yet reads as empty"
        for robot, mission in (("robot1", "m-1"), ("robot2", "m-2")):
            j = open_journal(pg_url, clock=SystemClock(), ids=IdGenerator(None), robot_id=robot)
            try:
                j.append([EventDraft(type=E.MISSION_STARTED, mission_id=mission, payload={"goal": "go"}),
                          EventDraft(type=E.DONE_PROPOSED, mission_id=mission, payload={"text": "there"})])
            finally:
                j.close()
        assert follower.start_seq() == 2, "just before the latest MISSION_STARTED"
        assert follower.start_seq("m-1") == 0
        events, last = follower.read(after_seq=1, limit=2)
        assert [(e.seq, e.mission_id, e.robot_id) for e in events] == [(2, "m-1", "robot1"), (3, "m-2", "robot2")]
        assert last == 3 and follower.read(after_seq=4) == ([], 4)
    finally:
        follower.close()


def test_the_bridge_takes_a_journal_file_or_url_like_the_other_commands(tmp_path, monkeypatch, capsys):
    import argparse

    from robot_harness.operator import foxglove_bridge as fb

    p = argparse.ArgumentParser()
    fb.add_arguments(p)
    url = "postgresql://harness@db.local/fleet"
    assert p.parse_args(["--journal", url]).journal == url
    assert p.parse_args(["--journal", str(tmp_path / "j.sqlite3")]).journal == tmp_path / "j.sqlite3"
    with pytest.raises(SystemExit) as bad:
        p.parse_args(["--journal", "mysql://harness@db.local/fleet"])
    assert bad.value.code == 2
    # the journal named nowhere is $ROBOT_HARNESS_JOURNAL's; a file that is not there is a usage error (exit 2)
    monkeypatch.setenv("ROBOT_HARNESS_JOURNAL", str(tmp_path / "from-env.sqlite3"))
    assert fb.main(["--port", "0"]) == 2
    assert f"no journal at {tmp_path / 'from-env.sqlite3'}" in capsys.readouterr().err


def test_a_database_that_does_not_answer_is_said_at_once_without_its_password(capsys):
    pytest.importorskip("psycopg")
    from robot_harness.core.journal import JournalReadError
    from robot_harness.operator import foxglove_bridge as fb

    url = "postgresql://harness:hunter2-secret@127.0.0.1:1/fleet?connect_timeout=2"
    with pytest.raises(JournalReadError) as caught:
        fb.JournalFollower(url)
    assert "hunter2-secret" not in str(caught.value) and "harness:***@" in str(caught.value)
    assert fb.main(["--journal", url, "--port", "0"]) == 5
    assert "hunter2-secret" not in capsys.readouterr().err
