"""Plans through the mission runner (issue 18): a whole plan proposed with ``propose_plan`` is judged by the
zero-token plan gate before anything moves, an accepted one runs one step per turn with no model call
through the same dispatch path, and after a failed step the planner is asked for the rest only.

Real missions: the in-process runner on the simulated robot (eval/modes), a real SQLite journal."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.journal import SqliteJournal
from robot_harness.core.payloads import ModelResponseRecorded, RuntimeEventDelivered, ToolResultRecorded, payload_of
from robot_harness.core.planner_script import PLAN_SOURCE, ScriptedPlanner
from robot_harness.core.ports import PlannerRequest
from robot_harness.core.records import EventType, JournalEvent
from robot_harness.core.scenario import load_scenario
from robot_harness.eval.modes import run_one

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, name: str, edit: Any = None) -> tuple[Any, list[JournalEvent]]:
    data = yaml.safe_load((REPO / "scenarios" / f"{name}.yaml").read_text())
    if edit is not None:
        edit(data)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_one(load_scenario(path), "gated", workdir=tmp_path / "w", journal_path=tmp_path / "j.sqlite3")
    journal = SqliteJournal(tmp_path / "j.sqlite3", clock=ManualClock(0.0), ids=IdGenerator(None))
    try:
        return result, list(journal.events(mission_id=result.mission_id))
    finally:
        journal.close()


def _results(events: list[JournalEvent], name: str) -> list[ToolResultRecorded]:
    return [p for e in events if e.type is EventType.TOOL_RESULT_RECORDED
            for p in [payload_of(e, ToolResultRecorded)] if p.name == name]


def _first(events: list[JournalEvent], etype: EventType) -> int:
    return next((e.seq for e in events if e.type is etype), 10**9)


def test_a_plan_that_speaks_before_reaching_the_place_is_refused_with_no_motion(tmp_path: Path) -> None:
    result, events = _run(tmp_path, "plan_speaks_before_reaching")
    assert result.status == "SUCCEEDED", result.summary
    refused, accepted = _results(events, "propose_plan")
    assert refused.status.value == "rejected" and refused.content["code"] == "plan_refused"
    (diag,) = refused.content["diagnostics"]
    assert diag["code"] == "precondition_unmet" and diag["step"] == 1 and diag["obligation"] == "o2"
    assert "lobby" in diag["message"] and "speaks at" in diag["message"]
    assert accepted.status.value == "ok" and accepted.content["plan"] == "accepted"
    # Nothing moved and nothing was said before the repaired plan was accepted.
    accepted_seq = next(e.seq for e in events if e.type is EventType.TOOL_RESULT_RECORDED
                        and payload_of(e, ToolResultRecorded).tool_call_id == accepted.tool_call_id)
    assert _first(events, EventType.ROBOT_ACTION_STARTED) > accepted_seq
    assert not any(p.name == "speak" and (e.seq < accepted_seq) for e in events
                   if e.type is EventType.TOOL_RESULT_RECORDED for p in [payload_of(e, ToolResultRecorded)])


def test_an_accepted_plan_runs_one_step_per_turn_without_asking_the_model(tmp_path: Path) -> None:
    result, events = _run(tmp_path, "plan_speaks_before_reaching")
    responses = [payload_of(e, ModelResponseRecorded).response for e in events
                 if e.type is EventType.MODEL_RESPONSE_RECORDED]
    sources = [r.meta.get("source") for r in responses]
    assert sources == [None, None, PLAN_SOURCE, PLAN_SOURCE, None]
    assert [c.name for r in responses[2:4] for c in r.tool_calls] == ["navigate_to", "speak"]
    assert result.planner_calls == 3  # two plans and done; the two steps cost no model call
    # Each step went through the same path as a planner's call: one result and one receipt each.
    assert len(_results(events, "navigate_to")) == 1 and len(_results(events, "speak")) == 1
    assert sum(1 for e in events if e.type is EventType.RECEIPT_RECORDED) == 2


def test_after_a_failed_step_the_plan_stops_and_only_the_suffix_is_planned(tmp_path: Path) -> None:
    result, events = _run(tmp_path, "plan_suffix_after_failure")
    assert result.status == "SUCCEEDED", result.summary
    interrupted = [payload_of(e, RuntimeEventDelivered) for e in events if e.type is EventType.RUNTIME_EVENT_DELIVERED
                   and payload_of(e, RuntimeEventDelivered).type == "plan_interrupted"]
    (stop,) = interrupted
    assert stop.detail["steps_run"] == 3 and stop.detail["of"] == 4
    assert [s["skill"] for s in stop.detail["remaining"]] == ["send_message"]
    # the first rejection was repaired without the model: the plan resumed once at the failed step
    resumed = [payload_of(e, ModelResponseRecorded).response for e in events
               if e.type is EventType.MODEL_RESPONSE_RECORDED
               and payload_of(e, ModelResponseRecorded).response.meta.get("resumed")]
    assert [(r.meta["step"], r.tool_calls[0].name) for r in resumed] == [(3, "navigate_to")]
    # The suffix plan was checked against what was still open: the image and office_storage were evidenced.
    second = _results(events, "propose_plan")[1]
    assert second.content["plan"] == "accepted" and {"o1", "o2"} <= set(second.content["evidenced"])
    assert result.planner_calls == 3
    assert len(_results(events, "capture_image")) == 1  # the verified prefix is not redone


def test_a_plan_beside_another_call_is_refused_and_each_call_gets_one_result(tmp_path: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        first = data["planner"]["turns"][1]["tool_calls"]
        first.append({"name": "get_pose", "arguments": {}})
    result, events = _run(tmp_path, "plan_speaks_before_reaching", edit)
    plans = _results(events, "propose_plan")
    assert plans[1].status.value == "rejected" and "alone" in plans[1].content["reason"]
    calls = {e.tool_call_id for e in events if e.type is EventType.TOOL_CALL_RECORDED}
    answered = [e.tool_call_id for e in events if e.type is EventType.TOOL_RESULT_RECORDED]
    assert sorted(answered) == sorted(calls)  # exactly one result per call
    assert result.status != "SUCCEEDED"  # the planner's script never proposed a plan alone again


@pytest.mark.parametrize("steps", ["not a list", [], [{"skill": "navigate_to", "arguments": {"place": "lobby"},
                                                       "bogus": 1}]])
def test_a_malformed_plan_is_an_invalid_arguments_error_and_nothing_moves(tmp_path: Path, steps: Any) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["planner"]["turns"] = [{"tool_calls": [{"name": "propose_plan", "arguments": {"steps": steps}}]}]
    result, events = _run(tmp_path, "plan_speaks_before_reaching", edit)
    (plan,) = _results(events, "propose_plan")
    assert plan.status.value == "error" and plan.error and plan.error["code"] == "invalid_arguments"
    assert _first(events, EventType.ROBOT_ACTION_STARTED) == 10**9
    assert result.status != "SUCCEEDED"


def test_a_recorded_mission_with_plan_turns_replays_the_model_calls_only(tmp_path: Path) -> None:
    _, events = _run(tmp_path, "plan_suffix_after_failure")
    replay = ScriptedPlanner.from_journal(events)
    asked = [replay.next_turn(PlannerRequest(mission_id="m", model_turn_id=f"t{i}", turn_index=i, context={},
                                             tools=())) for i in range(3)]
    assert [c.name for r in asked for c in r.tool_calls] == ["propose_plan", "propose_plan"]
    assert asked[2].done is not None


def test_a_plan_may_end_with_done_which_the_verifier_still_judges(tmp_path: Path) -> None:
    def ends_with_done(data: dict[str, Any]) -> None:
        turns = data["planner"]["turns"]
        turns[1]["tool_calls"][0]["arguments"]["steps"].append(
            {"skill": "propose_done", "arguments": {"summary": "at the lobby, said hello"}})
        del turns[2:]
    result, events = _run(tmp_path, "plan_speaks_before_reaching", ends_with_done)
    assert result.status == "SUCCEEDED", result.summary
    assert result.planner_calls == 2
    assert any(e.type is EventType.VERDICT_RECORDED for e in events)

    def done_too_soon(data: dict[str, Any]) -> None:
        ends_with_done(data)
        data["planner"]["turns"][1]["tool_calls"][0]["arguments"]["steps"].pop(1)  # never speaks
    result, events = _run(tmp_path / "soon", "plan_speaks_before_reaching", done_too_soon)
    assert result.status != "SUCCEEDED"  # the plan's gate refuses it: o2 is not covered
    assert _results(events, "propose_plan")[1].content["diagnostics"][0]["code"] == "uncovered_obligation"


def test_a_transient_failure_is_repaired_without_the_model_when_the_rest_still_passes_the_gate(tmp_path: Path) -> None:
    def once(data: dict[str, Any]) -> None:
        data["robot"]["faults"] = [{"kind": "reject", "on_goal": 2}]
        plan = data["planner"]["turns"][0]["tool_calls"][0]["arguments"]["steps"]
        plan.append({"skill": "propose_done", "arguments": {"summary": "inspected, back, reported"}})
        del data["planner"]["turns"][1:]
    result, events = _run(tmp_path, "plan_suffix_after_failure", once)
    assert result.status == "SUCCEEDED", result.summary
    assert result.planner_calls == 1  # the plan, nothing else: the rejected step was re-validated and resumed
    assert not any(e.type is EventType.RUNTIME_EVENT_DELIVERED
                   and payload_of(e, RuntimeEventDelivered).type == "plan_interrupted" for e in events)
    # recovery still decided, and charged its budget, as for any failure
    assert sum(1 for e in events if e.type is EventType.RECOVERY_DECIDED) == 1

    def whole(data: dict[str, Any]) -> None:
        once(data)
        data.setdefault("harness", {})["recovery"] = {"repair": "whole"}
    result, events = _run(tmp_path / "whole", "plan_suffix_after_failure", whole)
    assert any(e.type is EventType.RUNTIME_EVENT_DELIVERED
               and payload_of(e, RuntimeEventDelivered).type == "plan_interrupted" for e in events)



def test_a_step_not_done_stops_the_plan_before_the_steps_after_it(tmp_path: Path) -> None:
    def needs_approval(data: dict[str, Any]) -> None:
        # the drive needs an approval nobody gives: it expires, the call is cancelled, nothing moved
        data.setdefault("harness", {})["interactions"] = {"skill_tags": {"navigate_to": ["requires_approval"]},
                                                          "timeout_s": 2.0}
    result, events = _run(tmp_path, "plan_speaks_before_reaching", needs_approval)
    (nav,) = _results(events, "navigate_to")
    assert nav.status.value == "cancelled"
    assert _results(events, "speak") == [], "the plan went on to speak where it was not"
    stops = [payload_of(e, RuntimeEventDelivered) for e in events if e.type is EventType.RUNTIME_EVENT_DELIVERED
             and payload_of(e, RuntimeEventDelivered).type == "plan_interrupted"]
    assert len(stops) == 1 and stops[0].detail["steps_run"] == 1 and "cancelled" in stops[0].detail["reason"]
    assert result.status != "SUCCEEDED"
