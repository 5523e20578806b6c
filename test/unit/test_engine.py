"""The closed loop against scripted outside-world fakes: each failure behaviour
the product promises, checked on the journal the real engine writes."""
from __future__ import annotations

import sqlite3
from collections import Counter

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig
from robot_harness.compose import mission_runner
from robot_harness.core.errors import UsageError
from robot_harness.core.journal import MemoryJournal, SqliteJournal
from robot_harness.core.records import ActionStatus, EventType, MissionStatus, Pose2D
from robot_harness.core.skills import default_skills

from .fakes import FakeRobot, ScriptPlanner

PLACES = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "office": {"x": 3.0, "y": 1.0, "yaw": 1.57}}
GO_OFFICE = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "office"}}]}


def make(turns, *, robot_kw=None, journal=None, planner_before=None, **cfg):
    clock = ManualClock()
    ids = IdGenerator(seed=7)
    robot = FakeRobot(clock=clock, **(robot_kw or {}))
    config = HarnessConfig(places=PLACES, **cfg)
    journal = journal or MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    planner = ScriptPlanner(turns, before=planner_before)
    runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids, skills=default_skills(config.navigation),
                           snapshots=robot, planner=planner, navigation=robot, robot_io=robot)
    return runner, robot, journal, planner


def types(journal):
    return [e.type for e in journal.events()]


def results(journal):
    return [e.payload for e in journal.events(types=[EventType.TOOL_RESULT_RECORDED])]


def assert_one_result_per_call(journal):
    calls = [e.tool_call_id for e in journal.events(types=[EventType.TOOL_CALL_RECORDED])]
    res = [e.tool_call_id for e in journal.events(types=[EventType.TOOL_RESULT_RECORDED])]
    assert Counter(calls) == Counter(res)
    assert all(v == 1 for v in Counter(res).values())


def test_clean_navigation_is_verified_and_fully_journaled():
    runner, robot, journal, planner = make([GO_OFFICE, {"done": "arrived"}])
    out = runner.run("go to the office")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    assert len(robot.goals) == 1
    seen = set(types(journal))
    for t in ("MODEL_TURN_STARTED", "WORLD_SNAPSHOT_CAPTURED", "MODEL_RESPONSE_RECORDED", "TOOL_CALL_RECORDED",
              "ACTION_PRECONDITION_CHECKED", "TOOL_RESULT_RECORDED", "ROBOT_ACTION_STARTED", "ROBOT_ACTION_PROGRESS",
              "ROBOT_ACTION_OUTCOME", "MISSION_FINISHED"):
        assert EventType(t) in seen, t
    # the immediate result says only "accepted"; the outcome arrives in the next turn's context
    assert results(journal)[0]["status"] == "accepted"
    second_ctx = planner.requests[1].context
    assert second_ctx["runtime_events"][0]["state"] == "SUCCEEDED"
    assert second_ctx["runtime_events"][0]["tool_call_id"] == "c0-0"
    # snapshots: before each turn, pre-dispatch, post-terminal
    # (post_terminal may be re-captured until a pose observed after the terminal report arrives)
    collapsed = [c for i, c in enumerate(robot.captures) if i == 0 or c != robot.captures[i - 1]]
    assert collapsed == ["before_model_turn", "pre_dispatch", "post_terminal", "before_model_turn", "verification"]
    # the verifier's own fresh snapshot is journaled with its verdict
    assert len(journal.events(types=[EventType.WORLD_SNAPSHOT_CAPTURED])) == 5, "only the final post-terminal snapshot is kept"
    states = [e.payload["to"] for e in journal.events(types=[EventType.ROBOT_ACTION_STATE_CHANGED])]
    assert states == ["ACCEPTED", "RUNNING", "VERIFYING", "SUCCEEDED"]
    assert_one_result_per_call(journal)
    # every model turn is bound to the snapshot it was built from
    for ev in journal.events(types=[EventType.MODEL_TURN_STARTED]):
        assert journal.get_snapshot(ev.snapshot_id).reason == "before_model_turn"


def test_dispatch_intent_is_durable_before_the_goal_is_sent():
    at_send = []
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "ok"}])
    robot.on_send = lambda r: at_send.append([e.type for e in journal.events()])
    runner.run("go to the office")
    # the intent and the lease it holds are the last commit before the goal goes out
    assert at_send and at_send[0][-2:] == [EventType.ROBOT_ACTION_STARTED, EventType.LEASE_ACQUIRED]


def test_tool_exception_gives_one_error_result_and_the_mission_goes_on():
    runner, robot, journal, _ = make(
        [{"tool_calls": [{"name": "capture_image"}]}, {"done": "took a picture"}], robot_kw={"mode": "camera_broken"})
    out = runner.run("take a picture")
    (res,) = results(journal)
    assert res["status"] == "error" and "camera driver crashed" in res["error"]["message"]
    assert out.status is not MissionStatus.SUCCEEDED
    assert_one_result_per_call(journal)


def test_changed_preconditions_mean_no_dispatch_and_a_new_turn_on_the_fresh_snapshot():
    def push(reason, robot):
        if reason == "pre_dispatch":
            robot.pose = Pose2D(x=robot.pose.x + 1.0, y=robot.pose.y)  # someone pushed the robot

    turn0 = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "office"}}, {"name": "speak", "arguments": {"text": "hi"}}]}
    runner, robot, journal, planner = make([turn0, {"done": "x"}], robot_kw={"on_capture": push})
    out = runner.run("go to the office")
    assert robot.goals == []
    res = results(journal)
    assert [r["status"] for r in res] == ["precondition_changed", "skipped"]
    failed = {c["name"] for c in res[0]["content"]["failed"]}
    assert failed == {"pose_drift"}
    # a new turn on the fresh snapshot; then the done proposal is not verified
    # (the contract's AT_PLACE has no evidence) and the planner is asked again
    assert len(planner.requests) == 3
    assert journal.events(types=[EventType.ROBOT_ACTION_STARTED]) == []
    assert out.status is MissionStatus.UNKNOWN  # nothing was tried, so nothing contradicts the goal either
    assert_one_result_per_call(journal)


def test_stale_pose_blocks_dispatch():
    runner, robot, journal, _ = make([GO_OFFICE], robot_kw={"pose_age_s": 3.0})
    runner.run("go to the office")
    assert robot.goals == []
    (res,) = results(journal)
    assert res["status"] == "precondition_changed"
    assert "observation_age" in {c["name"] for c in res["content"]["failed"]}


def test_controller_rejection_is_failed():
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "there"}], robot_kw={"mode": "reject"})
    out = runner.run("go to the office")
    assert results(journal)[0]["status"] == "rejected"
    assert out.actions[0].state is ActionStatus.FAILED
    assert out.status is MissionStatus.FAILED


def test_missing_completion_gives_unknown_after_timeout_and_a_cancel():
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "there"}], robot_kw={"mode": "silent"})
    out = runner.run("go to the office")
    assert out.actions[0].state is ActionStatus.UNKNOWN
    assert "no terminal report" in out.actions[0].reason
    assert robot.cancels == [robot.goals[0]["goal_id"]]
    assert out.status is MissionStatus.UNKNOWN


def test_uncorrelated_success_cannot_complete_an_action():
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "there"}], robot_kw={"mode": "foreign_success"})
    out = runner.run("go to the office")
    assert out.actions[0].state is ActionStatus.UNKNOWN
    (unc,) = journal.events(types=[EventType.BACKEND_EVENT_UNCORRELATED])
    assert unc.payload["goal_id"] == "someone-else"


def test_controller_success_contradicted_by_pose_is_not_success():
    runner, robot, journal, _ = make([GO_OFFICE, {"done": "there"}], robot_kw={"mode": "early_success"})
    out = runner.run("go to the office")
    assert out.actions[0].state is ActionStatus.FAILED
    assert "from target" in out.actions[0].reason
    assert out.status is MissionStatus.FAILED


def test_localization_jump_during_action_is_unknown():
    def jump(robot):
        robot.pose_jumps += 1

    runner, robot, journal, _ = make([GO_OFFICE, {"done": "there"}], robot_kw={"on_send": jump})
    out = runner.run("go to the office")
    assert out.actions[0].state is ActionStatus.UNKNOWN


def test_at_most_one_physical_action_per_step():
    two = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "office"}},
                          {"name": "navigate_to", "arguments": {"place": "dock"}}]}
    runner, robot, journal, _ = make([two, {"done": "x"}])
    runner.run("go to the office")
    assert len(robot.goals) == 1
    assert [r["status"] for r in results(journal)] == ["accepted", "rejected"]
    assert results(journal)[1]["content"]["code"] == "one_physical_action_per_step"


def test_unknown_tools_and_invalid_arguments_are_errors_not_dispatches():
    bad = {"tool_calls": [{"name": "teleport", "arguments": {}},
                          {"name": "navigate_to", "arguments": {"place": "office", "x": 1.0}},
                          {"name": "navigate_to", "arguments": {"place": "mars"}}]}
    runner, robot, journal, _ = make([bad, {"done": "x"}])
    runner.run("go to the office")
    res = results(journal)
    assert [r["error"]["code"] for r in res] == ["unknown_tool", "invalid_arguments", "invalid_arguments"]
    assert robot.goals == []
    assert_one_result_per_call(journal)


def test_silent_model_is_never_success():
    runner, robot, journal, _ = make([GO_OFFICE])  # script ends without done
    out = runner.run("go to the office")
    assert out.status is MissionStatus.UNKNOWN
    assert "stopped proposing" in out.summary


def test_done_without_any_physical_evidence_is_unknown():
    runner, robot, journal, _ = make([{"done": "All done, robot is at the office!"}])
    out = runner.run("go to the office")
    assert out.status is MissionStatus.UNKNOWN


def test_failed_step_then_successful_retry_is_success():
    runner, robot, journal, _ = make([GO_OFFICE, GO_OFFICE, {"done": "x"}], robot_kw={"mode": "abort"})

    def fix(reason, r):
        if reason == "before_model_turn" and len(r.goals) == 1:
            r.mode = "normal"

    robot.on_capture = fix
    out = runner.run("go to the office")
    assert [a.state for a in out.actions] == [ActionStatus.FAILED, ActionStatus.SUCCEEDED]
    assert out.status is MissionStatus.SUCCEEDED


def test_journal_write_failure_stops_new_physical_work(tmp_path):
    path = tmp_path / "j.sqlite3"
    clock = ManualClock()
    journal = SqliteJournal(path, clock=clock, ids=IdGenerator(1), busy_timeout_ms=50)
    locker = sqlite3.connect(path, isolation_level=None)

    locked = []

    def lock_before_second_turn(turn_index):
        if turn_index == 1 and not locked:
            locker.execute("BEGIN EXCLUSIVE")
            locked.append(True)

    runner, robot, journal, _ = make([GO_OFFICE, {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]}],
                                     journal=journal, planner_before=lock_before_second_turn)
    out = runner.run("go to the office, then return to dock")
    assert out.status is MissionStatus.BLOCKED
    assert len(robot.goals) == 1  # the second navigation never went out
    assert runner.physical_blocked
    locker.execute("ROLLBACK")
    # storage is back: the next mission runs and clears the block
    out2 = runner.run("go to the office")
    assert out2.status is not MissionStatus.BLOCKED
    assert runner.physical_blocked is None


def test_redaction_hook_applies_to_tool_arguments():
    turn = {"tool_calls": [{"name": "speak", "arguments": {"text": "hi", "api_key": "sk-123"}}]}
    runner, robot, journal, _ = make([turn, {"done": "x"}])
    runner.run("say hi")
    (call,) = journal.events(types=[EventType.TOOL_CALL_RECORDED])
    assert call.payload["arguments"]["api_key"] != "sk-123"
    assert "sk-123" not in str([e.payload for e in journal.events()])


def test_bad_goals_are_usage_errors():
    runner, *_ = make([])
    with pytest.raises(UsageError):
        runner.run("   ")
    with pytest.raises(UsageError):
        runner.run("x" * 5000)


def test_context_is_bounded_and_carries_no_raw_streams():
    runner, robot, journal, planner = make([GO_OFFICE, {"done": "x"}], context_byte_cap=1500, snapshot_byte_cap=700)
    runner.run("go to the office")
    import json

    for req in planner.requests:
        assert len(json.dumps(req.context, separators=(",", ":"), sort_keys=True)) <= 1500


def test_losing_the_snapshot_source_before_verification_is_never_success():
    from robot_harness.core.errors import BackendUnavailable

    def die_after_terminal(reason, robot):
        if reason == "post_terminal":
            raise BackendUnavailable("aggregator gone")

    runner, robot, journal, _ = make([GO_OFFICE, {"done": "x"}], robot_kw={"on_capture": die_after_terminal})
    out = runner.run("go to the office")
    assert out.status is MissionStatus.BLOCKED
    assert "aggregator gone" in out.summary
    assert out.actions[0].state is not ActionStatus.SUCCEEDED
    assert journal.events(types=[EventType.ROBOT_ACTION_OUTCOME]) == []
    assert robot.cancels == [robot.goals[0]["goal_id"]], "an unjudged action is asked to stop"


def test_a_text_only_answer_gets_one_error_and_a_new_turn_within_budget():
    runner, robot, journal, planner = make([{"text": "I will now drive to the office."}, GO_OFFICE, {"done": "there"}])
    out = runner.run("go to the office")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    second = planner.requests[1].context["runtime_events"]
    assert [e["type"] for e in second] == ["text_only_response"]
    assert second[0]["detail"]["code"] == "no_tool_call"


def test_text_only_answers_past_the_budget_end_the_mission_without_motion():
    chatter = {"text": "Everything is fine, I am basically there."}
    runner, robot, journal, planner = make([chatter] * 5)
    out = runner.run("go to the office")
    assert out.status is MissionStatus.UNKNOWN
    assert "text-only" in out.summary
    assert len(planner.requests) == 3  # the budget is 2 re-asks
    assert robot.goals == []


def test_malformed_tool_arguments_are_one_standard_error_and_nothing_moves():
    bad = {"tool_calls": [{"name": "navigate_to", "arguments": {"__malformed_arguments__": "{place: office"}}]}
    runner, robot, journal, planner = make([bad, GO_OFFICE, {"done": "there"}])
    out = runner.run("go to the office")
    first = results(journal)[0]
    assert first["status"] == "error" and first["error"]["code"] == "malformed_arguments"
    assert first["error"]["raw"] == "{place: office"
    assert len(robot.goals) == 1  # only the well-formed call of the next turn moved the robot
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    assert_one_result_per_call(journal)


# ----------------------------------------------------------------- idempotent capability calls

SAY_HI = {"name": "speak", "arguments": {"text": "hi"}}


def counting(robot, method):
    """Count what reaches the robot's speaker/camera (the outside world), calling through."""
    calls = []
    real = getattr(robot, method)

    def wrapped(**kw):
        calls.append(kw)
        return real(**kw)

    setattr(robot, method, wrapped)
    return calls


def intents(journal):
    return [e.payload["intent"] for e in journal.events(types=[EventType.LEASE_ACQUIRED]) if "intent" in e.payload]


def test_the_same_speech_twice_in_one_turn_is_spoken_once_and_the_repeat_gets_the_existing_record():
    turn = {"tool_calls": [{**SAY_HI, "id": "say-1"}, {**SAY_HI, "id": "say-2"}]}
    runner, robot, journal, _ = make([turn])
    spoken = counting(robot, "speak")
    runner.run("go to the office")
    assert spoken == [{"text": "hi"}]
    first, second = results(journal)
    assert first["status"] == "ok"
    assert second["status"] == "rejected" and second["content"]["code"] == "duplicate_dispatch"
    existing = second["content"]["existing"]
    (intent,) = intents(journal)
    assert existing["key"] == intent["key"] and existing["match"] == "same_key"
    assert existing["tool_call_id"] == "say-1" and existing["status"] == "ok"
    assert existing["content"] == first["content"]
    receipts = {e.tool_call_id: e.payload["receipt"] for e in journal.events(types=[EventType.RECEIPT_RECORDED])}
    assert existing["receipt_id"] == receipts["say-1"]["receipt_id"] and receipts["say-1"]["status"] == "SUCCEEDED"
    # keyed by task, node, attempt and state version, durable before the speaker was used
    m = runner.mission_id
    assert intent["key"] == f"{m}/{intent['node']}/a1/v{intent['state_version']}" and intent["node"].startswith("speak:")
    assert intent["tool_call_id"] == "say-1"
    assert [r["resource"] for r in (e.payload for e in journal.events(types=[EventType.LEASE_RELEASED]))] == ["speaker"]
    assert_one_result_per_call(journal)


def test_the_same_speech_asked_again_next_turn_is_the_same_request():
    runner, robot, journal, _ = make([{"tool_calls": [SAY_HI]}, {"tool_calls": [SAY_HI]}])
    spoken = counting(robot, "speak")
    runner.run("go to the office")
    assert len(spoken) == 1
    second = results(journal)[1]
    assert second["content"]["code"] == "duplicate_dispatch" and second["content"]["existing"]["match"] == "just_done"
    assert len(intents(journal)) == 1


def test_the_same_speech_after_other_physical_work_is_a_new_request():
    runner, robot, journal, _ = make([{"tool_calls": [SAY_HI]}, GO_OFFICE, {"tool_calls": [SAY_HI]}])
    spoken = counting(robot, "speak")
    runner.run("go to the office")
    assert len(spoken) == 2
    first, second = intents(journal)
    assert first["node"] == second["node"] and first["key"] != second["key"]
    assert [r["status"] for r in results(journal)] == ["ok", "accepted", "ok"]


def test_the_same_speech_after_a_verdict_is_the_planners_answer_to_it_not_a_repeat():
    # said, then "done" is judged (the office was never reached: continue), then said again
    runner, robot, journal, _ = make([{"tool_calls": [SAY_HI]}, {"done": "I said hi"}, {"tool_calls": [SAY_HI]}])
    spoken = counting(robot, "speak")
    runner.run("go to the office")
    assert journal.events(types=[EventType.VERDICT_RECORDED]), "the done proposal was judged"
    assert len(spoken) == 2
    assert [r["status"] for r in results(journal) if r["name"] == "speak"] == ["ok", "ok"]


def test_a_failed_capture_is_retried_only_under_a_new_authorized_attempt():
    capture = {"tool_calls": [{"name": "capture_image", "arguments": {"label": "office"}}]}
    runner, robot, journal, _ = make([capture, capture], robot_kw={"mode": "camera_broken"})
    tried = counting(robot, "capture_image")
    runner.run("go to the office")
    assert len(tried) == 2
    first, second = intents(journal)
    assert (first["attempt"], second["attempt"]) == (1, 2) and first["node"] == second["node"]
    (decided, *_) = [e.payload for e in journal.events(types=[EventType.RECOVERY_DECIDED])]
    assert decided["failure"]["failure_kind"] == "tool_error" and decided["decision"]["rung"] == "local_replan"


def test_an_observer_that_raises_never_leaves_the_mission_open():
    def broken(stage, view, event):
        raise RuntimeError("feedback publisher gone")

    clock, ids = ManualClock(), IdGenerator(seed=7)
    robot = FakeRobot(clock=clock)
    config = HarnessConfig(places=PLACES)
    journal = MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids, skills=default_skills(config.navigation),
                           snapshots=robot, planner=ScriptPlanner([GO_OFFICE, {"done": "arrived"}]), navigation=robot,
                           robot_io=robot, on_update=broken)
    out = runner.run("go to the office")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    assert journal.open_missions() == []
