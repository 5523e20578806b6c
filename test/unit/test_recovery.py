"""Bounded recovery (core/recovery.py) and its use in the engine."""
from __future__ import annotations

from robot_harness.core.records import EventType, MissionStatus
from robot_harness.core.recovery import Failure, FailureKind, RecoveryBudgets, RecoveryPolicy, Rung

from .test_engine import GO_OFFICE, make


def failure(kind: FailureKind, skill: str = "navigate_to") -> Failure:
    return Failure(failure_id="f1", failure_kind=kind, reason="test", skill=skill)


def test_the_ladder_starts_where_the_failure_kind_says_and_climbs_as_budgets_are_spent() -> None:
    policy = RecoveryPolicy(RecoveryBudgets(re_perceive=1, adjust_view=1, local_replan=1))
    spent: dict[Rung, int] = {}
    rungs = []
    for _ in range(4):
        d = policy.decide(failure(FailureKind.ACTION_UNKNOWN), spent=spent)
        spent[d.rung] = spent.get(d.rung, 0) + 1
        rungs.append(d.rung)
    # switch is not open (no alternatives); an action that may still be moving ends in a safe stop
    assert rungs == [Rung.RE_PERCEIVE, Rung.ADJUST_VIEW, Rung.LOCAL_REPLAN, Rung.SAFE_STOP]
    last = policy.decide(failure(FailureKind.ACTION_UNKNOWN), spent=spent)
    assert last.escalated and last.terminal and last.budgets_left["local_replan"] == 0


def test_exhausted_budgets_escalate_to_a_human_instead_of_retrying() -> None:
    policy = RecoveryPolicy(RecoveryBudgets(local_replan=3))
    spent = {Rung.LOCAL_REPLAN: 3}
    d = policy.decide(failure(FailureKind.DISPATCH_REJECTED), spent=spent)
    assert d.rung is Rung.HUMAN_HANDOFF and d.escalated


def test_switch_is_open_only_with_an_authorized_alternative() -> None:
    spent = {Rung.LOCAL_REPLAN: 3}
    without = RecoveryPolicy().decide(failure(FailureKind.DISPATCH_REJECTED), spent=spent)
    with_alt = RecoveryPolicy(alternatives={"navigate_to": ["navigate_through_poses"]}).decide(
        failure(FailureKind.DISPATCH_REJECTED), spent=spent)
    assert without.rung is Rung.HUMAN_HANDOFF and with_alt.rung is Rung.SWITCH


def test_a_model_may_advise_only_among_the_authorized_options() -> None:
    wild = RecoveryPolicy(advisor=lambda f, opts, ctx: "retry_forever").decide(failure(FailureKind.TOOL_ERROR), spent={})
    assert wild.rung is Rung.LOCAL_REPLAN and "not an authorized option" in wild.advice
    fine = RecoveryPolicy(advisor=lambda f, opts, ctx: "human_handoff").decide(failure(FailureKind.TOOL_ERROR), spent={})
    assert fine.rung is Rung.HUMAN_HANDOFF and fine.authorized[0] is Rung.LOCAL_REPLAN
    broken = RecoveryPolicy(advisor=lambda f, opts, ctx: 1 / 0).decide(failure(FailureKind.TOOL_ERROR), spent={})
    assert broken.rung is Rung.LOCAL_REPLAN and "advisor failed" in broken.advice


def test_the_engine_charges_each_failing_turn_once_and_hands_off_when_replans_run_out() -> None:
    bad = {"tool_calls": [{"name": "teleport", "arguments": {}}, {"name": "fly", "arguments": {}}]}
    runner, robot, journal, planner = make([bad] * 6, recovery={"local_replan": 2})
    out = runner.run("go to the office")
    decisions = [e.payload["decision"]["rung"] for e in journal.events(types=[EventType.RECOVERY_DECIDED])]
    assert decisions == ["local_replan", "local_replan", "human_handoff"]  # one per turn, not per call
    assert out.status is MissionStatus.WAITING_USER and "operator" in out.summary
    assert len(planner.requests) == 3 and robot.goals == []
    # the planner is told what recovery decided, with the budget left
    event = planner.requests[1].context["runtime_events"][-1]
    assert event["type"] == "recovery" and event["state"] == "local_replan"
    assert event["detail"]["budgets_left"]["local_replan"] == 1


def test_a_stalled_action_past_every_budget_ends_in_a_safe_stop() -> None:
    runner, robot, journal, planner = make([GO_OFFICE] * 6, robot_kw={"mode": "silent"},
                                           recovery={"re_perceive": 1, "adjust_view": 0, "local_replan": 1})
    out = runner.run("go to the office")
    rungs = [e.payload["decision"]["rung"] for e in journal.events(types=[EventType.RECOVERY_DECIDED])]
    assert rungs == ["re_perceive", "local_replan", "safe_stop"]
    assert out.status is MissionStatus.UNKNOWN and "safe stop" in out.summary
    # The stalled goal's cancel was never confirmed, so the base stays blocked: the
    # repeated proposals were refused (lease_conflict) and the robot was never sent again.
    assert len(robot.goals) == 1 and robot.cancels == [robot.goals[0]["goal_id"]]
    kinds = [e.payload["failure"]["failure_kind"] for e in journal.events(types=[EventType.RECOVERY_DECIDED])]
    assert kinds == ["action_unknown", "resource_blocked", "resource_blocked"]


PLACES_2 = {"dock": {"x": 0.0, "y": 0.0, "yaw": 0.0}, "office": {"x": 3.0, "y": 1.0, "yaw": 1.57}}


def _frontiers(planner) -> list[list[str]]:
    return [[o["id"] for o in r.context["progress"]["frontier"]] for r in planner.requests]


def test_the_planner_sees_the_verified_prefix_leave_its_frontier() -> None:
    go_dock = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]}
    runner, robot, journal, planner = make([GO_OFFICE, go_dock, {"done": "ok"}])
    out = runner.run("go to the office, then return to dock")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    # o1 (office) leaves the frontier once its receipt is on record; only the gate commits
    assert _frontiers(planner) == [["o1", "o2"], ["o2"], []]
    assert planner.requests[1].context["progress"]["evidenced"] == ["o1"]
    assert planner.requests[1].context["progress"]["committed"] == []


def test_whole_plan_replanning_forgets_the_prefix_after_a_failure_suffix_repair_keeps_it() -> None:
    go_dock = {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "dock"}}]}
    turns = [GO_OFFICE, go_dock, go_dock, {"done": "ok"}]

    def rejecting_second_goal(robot) -> None:
        robot.mode = "reject" if len(robot.goals) == 2 else "normal"

    suffix = make(turns, robot_kw={"on_send": rejecting_second_goal})
    suffix[0].run("go to the office, then return to dock")
    whole = make(turns, robot_kw={"on_send": rejecting_second_goal}, recovery={"repair": "whole"})
    whole[0].run("go to the office, then return to dock")
    assert _frontiers(suffix[3])[2] == ["o2"]
    assert _frontiers(whole[3])[2] == ["o1", "o2"]


def test_adjust_view_widens_the_next_planner_turn_and_only_that_one() -> None:
    # the first goal aborts (ACTION_FAILED starts at adjust_view); later turns see the usual view again
    def abort_first(robot) -> None:
        robot.mode = "abort" if len(robot.goals) == 1 else "normal"

    runner, robot, journal, planner = make([GO_OFFICE, GO_OFFICE, {"done": "ok"}], robot_kw={"on_send": abort_first})
    out = runner.run("go to the office")
    rungs = [e.payload["decision"]["rung"] for e in journal.events(types=[EventType.RECOVERY_DECIDED])]
    assert rungs[0] == "adjust_view", rungs
    progress = [r.context["progress"] for r in planner.requests]
    assert "view" not in progress[0]
    assert progress[1].get("view") == "widened after adjust_view" and progress[1]["recent_failures"]
    assert "view" not in progress[2]
    assert out.status is MissionStatus.SUCCEEDED, out.summary


def test_switch_names_only_the_authorized_alternatives_of_the_failed_skill() -> None:
    runner, robot, journal, planner = make([GO_OFFICE, {"done": "x"}], robot_kw={"mode": "reject"},
                                           recovery={"local_replan": 0,
                                                     "alternatives": {"navigate_to": ["navigate_through_poses"],
                                                                      "speak": ["send_message"]}})
    runner.run("go to the office")
    decisions = [e.payload["decision"]["rung"] for e in journal.events(types=[EventType.RECOVERY_DECIDED])]
    assert decisions[0] == "switch_provider_or_skill", decisions
    event = planner.requests[1].context["runtime_events"][-1]
    assert event["state"] == "switch_provider_or_skill"
    assert event["detail"]["alternatives"] == ["navigate_through_poses"]
