"""The plan gate (issue 18): a whole plan checked against the frozen contract before anything moves, with
typed diagnostics for the model to repair; pure, no model calls."""
from __future__ import annotations

import pytest

from robot_harness.compose import default_contract_compiler, default_coverage_reviewer
from robot_harness.core.config import load_harness_config
from robot_harness.core.contracts import compile_contract
from robot_harness.core.plan_gate import DiagnosticCode, Plan, PlanStep, check_plan
from robot_harness.core.records import Pose2D
from robot_harness.core.skills import default_skills

PLACES = {"dock": (0.0, 0.0), "reception": (3.0, 1.0), "lab": (-2.0, 2.0), "office_storage": (3.0, -1.5)}
CONFIG = load_harness_config(overrides={"places": {k: {"x": x, "y": y} for k, (x, y) in PLACES.items()}})
POSES = {k: Pose2D(x=x, y=y) for k, (x, y) in PLACES.items()}
SKILLS = default_skills(CONFIG.navigation)
DOCK = Pose2D(x=0.0, y=0.0)


def contract(goal: str):
    return compile_contract(goal, compiler=default_contract_compiler(CONFIG), reviewer=default_coverage_reviewer(CONFIG),
                            mission_id="m", contract_id="c", places=POSES)


def go(place: str, serves: str = "") -> PlanStep:
    return PlanStep(skill="navigate_to", arguments={"place": place}, effect=f"at {place}", serves=serves)


def say(text: str, serves: str = "") -> PlanStep:
    return PlanStep(skill="speak", arguments={"text": text}, serves=serves)


def snap(serves: str = "") -> PlanStep:
    return PlanStep(skill="capture_image", arguments={"label": "x"}, serves=serves)


def check(goal: str, *steps: PlanStep, robot: Pose2D = DOCK, evidenced=()):
    return check_plan(Plan(steps=steps), contract(goal), skills=SKILLS, places=POSES, robot=robot, evidenced=evidenced)


def codes(result) -> list[str]:
    return [d.code.value for d in result.diagnostics]


def test_a_plan_that_does_what_the_contract_says_in_order_passes():
    r = check("Go to office_storage, capture an image there and return to dock.", go("office_storage"), snap(),
              go("dock"))
    assert r.ok, r.diagnostics
    assert dict(r.serves) == {"o1": 1, "o2": 2, "o3": 3}


def test_speaking_before_reaching_the_place_it_must_be_said_at_is_refused_with_a_typed_diagnostic():
    r = check("Go to the reception and say 'welcome' there.", say("welcome", "o2"), go("reception", "o1"))
    assert not r.ok
    d = next(d for d in r.diagnostics if d.obligation == "o2")
    assert d.code is DiagnosticCode.WRONG_PLACE and d.step == 1
    assert "step 1 speaks at dock, but o2 needs it at reception" in d.message and "no step before it reaches reception" in d.message


def test_an_obligation_no_step_serves_is_named():
    r = check("Go to office_storage, capture an image there and return to dock.", go("office_storage"), go("dock"))
    assert codes(r) == ["uncovered_obligation"] and r.diagnostics[0].obligation == "o2"
    assert "wants an image captured at office_storage" in r.diagnostics[0].message


def test_the_words_and_the_recipient_are_bound():
    r = check("Go to the reception and say 'welcome' there.", go("reception"), say("goodbye"))
    assert codes(r) == ["uncovered_obligation"] and "'welcome'" in r.diagnostics[0].message
    assert check("Go to the reception and say 'welcome' there.", go("reception"), say("Welcome!")).ok
    goal = "Go to the lab, take a picture, then send it to bob with the text 'lab ok'."
    msg = PlanStep(skill="send_message", arguments={"to": "alice", "text": "lab ok"})
    r = check(goal, go("lab"), snap(), msg)
    assert codes(r) == ["uncovered_obligation"] and "to bob" in r.diagnostics[0].message
    ok = PlanStep(skill="send_message", arguments={"to": "bob", "text": "lab ok"})
    assert check(goal, go("lab"), snap(), ok).ok
    r = check(goal, go("lab"), ok, snap())
    assert "wrong_order" in codes(r)


def test_a_final_place_the_plan_leaves_is_refused():
    r = check("Go to the reception and say 'welcome' there.", go("reception"), say("welcome"), go("dock"))
    assert codes(r) == ["final_place_left"] and r.diagnostics[0].step == 3


def test_bad_steps_are_named_without_raising():
    r = check("Go to the reception.", PlanStep(skill="teleport", arguments={}), go("reception"))
    assert codes(r) == ["unknown_skill"]
    r = check("Go to the reception.", PlanStep(skill="back_up", arguments={}), go("reception"))
    assert codes(r) == ["not_plannable"]
    r = check("Go to the reception.", PlanStep(skill="navigate_to", arguments={"place": "reception", "x": 1.0}))
    assert codes(r)[0] == "invalid_arguments" and "uncovered_obligation" in codes(r)
    r = check("Go to the reception.", go("kitchen"), go("reception"))
    assert codes(r) == ["unknown_place"]
    r = check("Go to the reception.", go("reception", serves="o9"))
    assert codes(r) == ["unknown_obligation"]


def test_a_step_claiming_an_obligation_it_does_not_serve_is_refused():
    r = check("Go to office_storage, capture an image there and return to dock.", go("office_storage"),
              go("dock", serves="o2"), snap(), go("dock"))
    assert "does_not_serve" in codes(r)


def test_the_verified_prefix_needs_no_step_and_the_suffix_starts_where_the_robot_is():
    goal = "Go to office_storage, capture an image there and return to dock."
    at_storage = Pose2D(x=3.0, y=-1.45)
    assert check(goal, snap(), go("dock"), robot=at_storage, evidenced=("o1",)).ok
    r = check(goal, snap(), go("dock"), robot=DOCK, evidenced=("o1",))
    assert codes(r) == ["precondition_unmet"], r.diagnostics


def test_routes_visit_their_places_in_order_and_close_the_round():
    assert check("Patrol the lab and the reception and come back.",
                 PlanStep(skill="follow_waypoints", arguments={"places": ["lab", "reception", "dock"]})).ok
    r = check("Patrol the lab and the reception and come back.",
              PlanStep(skill="follow_waypoints", arguments={"places": ["reception", "lab"]}))
    assert codes(r) == ["uncovered_obligation"] and "round through lab, reception" in r.diagnostics[0].message
    assert check("Patrol the lab and the reception and come back.", go("lab"), go("reception"), go("dock")).ok


@pytest.mark.parametrize("steps", [(), tuple(PlanStep(skill="get_pose") for _ in range(33))])
def test_an_empty_or_huge_plan_is_not_a_plan(steps):
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Plan(steps=steps)


def test_done_may_end_a_plan_and_nowhere_else() -> None:
    done = PlanStep(skill="propose_done", arguments={"summary": "said it at reception"})
    ok = check("Go to reception and say 'hi' there.", go("reception"), say("hi"), done)
    assert ok.ok, ok.diagnostics
    early = check("Go to reception and say 'hi' there.", go("reception"), done, say("hi"))
    assert not early.ok and early.diagnostics[0].code is DiagnosticCode.NOT_PLANNABLE and early.diagnostics[0].step == 2
    bad = check("Go to reception and say 'hi' there.", go("reception"), say("hi"), PlanStep(skill="propose_done"))
    assert not bad.ok and bad.diagnostics[0].code is DiagnosticCode.INVALID_ARGUMENTS
    nested = check("Go to reception.", go("reception"), PlanStep(skill="propose_plan", arguments={"steps": []}))
    assert not nested.ok and nested.diagnostics[0].code is DiagnosticCode.NOT_PLANNABLE
