"""The plan gate (issue 18): a zero-token check of a whole plan against the frozen contract, before motion.

A plan is a list of steps (skill, arguments, intended effect, the obligation it serves). The gate runs
it symbolically from the robot's current place, with each skill's declared effect (a navigation puts the
robot at its place, a route visits its places in order, a capture, a sentence or a message happens
where the robot then is), and checks, for every obligation not yet evidenced:

* **coverage**: some step's effect satisfies it (the place, the words, the recipient, the attachments);
* **order**: that step comes after the steps serving the obligations it depends on;
* **preconditions**: a step that must happen at a place happens there ("step 3 speaks at reception but
  no step before it reaches reception");
* **arguments**: the skill exists, the planner may call it, its arguments validate, its places are known;
* **final place**: a ``final`` place is where the plan leaves the robot.

A plan may end with ``propose_done``: when every step before it has run, the harness proposes done with
its summary, and the verifier judges it on evidence as any done proposal (a plan's done is a proposal
made early, never an approval). Anywhere else in a plan it is refused.

It returns typed diagnostics (:class:`PlanDiagnostic`), never raises on a bad plan, and calls no model.
Obligations that need a semantic judgement cannot be checked here: they are listed, not refused.
"""
from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .completion import (CAPTURE_SKILL, MESSAGE_SKILL, NAVIGATE_SKILL, ROUTE_SKILLS, SPEAK_SKILL, CompletionContract,
                         Obligation, ObligationKind)
from .errors import UsageError
from .records import Pose2D
from .skills import PROPOSE_DONE, PROPOSE_PLAN, RECOVERY_ONLY, SkillRegistry

__all__ = ["PlanStep", "Plan", "DiagnosticCode", "PlanDiagnostic", "PlanCheck", "check_plan", "START"]

START = "start"
"""The place name of where the robot stands when the plan starts (a route's ``start``)."""
_AT_M = 0.5
"""An x/y navigation target, or the robot's pose, within this of a known place counts as at it."""


class PlanStep(BaseModel):
    """One step the planner proposes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    skill: str = Field(min_length=1, max_length=64)
    arguments: dict[str, Any] = Field(default_factory=dict)
    effect: str = Field(default="", max_length=500, description="What the step is meant to achieve, in words.")
    serves: str = Field(default="", max_length=32, description="The id of the obligation it serves, or empty.")


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    steps: tuple[PlanStep, ...] = Field(min_length=1, max_length=32)


class DiagnosticCode(str, enum.Enum):
    UNKNOWN_SKILL = "unknown_skill"
    NOT_PLANNABLE = "not_plannable"
    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_PLACE = "unknown_place"
    UNCOVERED = "uncovered_obligation"
    WRONG_PLACE = "precondition_unmet"
    WRONG_ORDER = "wrong_order"
    DOES_NOT_SERVE = "does_not_serve"
    FINAL_PLACE_LEFT = "final_place_left"
    UNKNOWN_OBLIGATION = "unknown_obligation"


class PlanDiagnostic(BaseModel):
    """One thing wrong with a plan, for the model to repair (``step``: 1-based, 0 for the whole plan)."""

    model_config = ConfigDict(frozen=True)
    code: DiagnosticCode
    step: int = 0
    obligation: str = ""
    message: str


@dataclass(frozen=True)
class PlanCheck:
    ok: bool
    diagnostics: tuple[PlanDiagnostic, ...]
    serves: Mapping[str, int] = field(default_factory=dict)
    """Obligation id -> the 1-based step found to serve it."""
    unchecked: tuple[str, ...] = ()
    """Obligations the gate cannot judge (semantic ones): neither covered nor refused here."""

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "diagnostics": [d.model_dump(mode="json") for d in self.diagnostics],
                "serves": dict(self.serves), "unchecked": list(self.unchecked)}


@dataclass
class _Effect:
    """What one step does, in the gate's terms."""

    step: int
    skill: str
    visits: tuple[str, ...] = ()
    """Places the robot reaches, in order (a navigation: its place; a route: each)."""
    at: str | None = None
    """Where the robot is while the step acts (before it, for a non-moving step)."""
    args: Mapping[str, Any] = field(default_factory=dict)


def _place_of(pose: Pose2D | None, places: Mapping[str, Pose2D]) -> str | None:
    if pose is None:
        return None
    near = [(math.hypot(p.x - pose.x, p.y - pose.y), name) for name, p in places.items()]
    near = [n for n in near if n[0] <= _AT_M]
    return min(near)[1] if near else None


def _words(text: Any) -> str:
    return " ".join("".join(c.lower() if c.isalnum() else " " for c in str(text)).split())


def _where(place: str | None) -> str:
    return "where the robot starts" if place == START else (place or "an unknown place")


def check_plan(plan: Plan, contract: CompletionContract, *, skills: SkillRegistry, places: Mapping[str, Pose2D],
               robot: Pose2D | None = None, evidenced: Sequence[str] = ()) -> PlanCheck:
    """Check ``plan`` against ``contract`` from the robot's pose ``robot``; obligations in ``evidenced``
    (the verified prefix) need no step. Pure: no model, no robot, no clock."""
    diags: list[PlanDiagnostic] = []
    start_place = _place_of(robot, places) or START
    effects = _simulate(plan, skills, places, start_place, diags)
    obligations = {o.id: o for o in contract.obligations}
    for i, st in enumerate(plan.steps, 1):
        if st.serves and st.serves not in obligations:
            diags.append(PlanDiagnostic(code=DiagnosticCode.UNKNOWN_OBLIGATION, step=i, obligation=st.serves,
                                        message=f"step {i} says it serves {st.serves}, which the contract does not "
                                                f"have (obligations: {', '.join(obligations)})"))
    done = set(evidenced)
    serves: dict[str, int] = {}
    unchecked: list[str] = []
    for ob in contract.obligations:
        if ob.id in done:
            continue
        if ob.kind is ObligationKind.SEMANTIC:
            unchecked.append(ob.id)
            continue
        after = max((serves[d] for d in ob.depends_on if d in serves), default=0)
        declared = [e for e in effects if plan.steps[e.step - 1].serves == ob.id]
        found = _serving(ob, effects, after, start_place, diags if declared else None, declared)
        if found is None:
            if not any(d.obligation == ob.id for d in diags):
                diags.append(_uncovered(ob, effects, after))
            continue
        serves[ob.id] = found
        for dep in ob.depends_on:
            if dep in serves and serves[dep] > found:
                diags.append(PlanDiagnostic(code=DiagnosticCode.WRONG_ORDER, step=found, obligation=ob.id,
                                            message=f"step {found} serves {ob.id}, which depends on {dep}, served only "
                                                    f"later by step {serves[dep]}"))
        if ob.kind is ObligationKind.AT_PLACE and ob.params.get("final"):
            place = str(ob.params.get("place"))
            end = next((e.visits[-1] for e in reversed(effects) if e.visits), start_place)
            if end != place:
                mover = next((e.step for e in reversed(effects) if e.visits), 0)
                diags.append(PlanDiagnostic(code=DiagnosticCode.FINAL_PLACE_LEFT, step=mover, obligation=ob.id,
                                            message=f"{ob.id} wants the robot to end at {place}, but step {mover} "
                                                    f"leaves it at {_where(end)}"))
    return PlanCheck(ok=not diags, diagnostics=tuple(diags), serves=serves, unchecked=tuple(unchecked))


def _simulate(plan: Plan, skills: SkillRegistry, places: Mapping[str, Pose2D], start: str,
              diags: list[PlanDiagnostic]) -> list[_Effect]:
    """Each step's effect, from ``start``; argument and skill problems go to ``diags`` (the step then has
    no effect, so what depends on it is reported too)."""
    at: str | None = start
    out: list[_Effect] = []
    for i, st in enumerate(plan.steps, 1):
        try:
            skill = skills.get(st.skill)
        except UsageError:
            diags.append(PlanDiagnostic(code=DiagnosticCode.UNKNOWN_SKILL, step=i,
                                        message=f"step {i}: there is no skill {st.skill!r} (skills: "
                                                f"{', '.join(s.name for s in skills if RECOVERY_ONLY not in s.tags)})"))
            out.append(_Effect(step=i, skill=st.skill, at=at))
            continue
        if RECOVERY_ONLY in skill.tags or skill.name == PROPOSE_PLAN or (
                skill.name == PROPOSE_DONE and i != len(plan.steps)):
            why = ("the recovery policy's own" if RECOVERY_ONLY in skill.tags else
                   "a plan does not propose plans" if skill.name == PROPOSE_PLAN else
                   "done may only be the last step: it is proposed when every step before it has run, and verified")
            diags.append(PlanDiagnostic(code=DiagnosticCode.NOT_PLANNABLE, step=i,
                                        message=f"step {i}: {st.skill} is not a step a plan may take here ({why})"))
            out.append(_Effect(step=i, skill=st.skill, at=at))
            continue
        try:
            args = skill.validate(dict(st.arguments)).model_dump(exclude_none=True)
        except UsageError as exc:
            problems = "; ".join(f"{'.'.join(str(x) for x in p['loc'])}: {p['msg']}"
                                 for p in exc.details.get("problems", [])) or exc.message
            diags.append(PlanDiagnostic(code=DiagnosticCode.INVALID_ARGUMENTS, step=i,
                                        message=f"step {i}: {st.skill} arguments: {problems}"))
            out.append(_Effect(step=i, skill=st.skill, at=at))
            continue
        visits = _visits(st.skill, args, places, i, diags)
        out.append(_Effect(step=i, skill=st.skill, visits=visits, at=at, args=args))
        if visits:
            at = visits[-1]
    return out


def _visits(skill: str, args: Mapping[str, Any], places: Mapping[str, Pose2D], i: int,
            diags: list[PlanDiagnostic]) -> tuple[str, ...]:
    if skill == NAVIGATE_SKILL:
        if "place" in args:
            names = [str(args["place"])]
        else:
            near = _place_of(Pose2D(x=float(args["x"]), y=float(args["y"])), places)
            return (near or f"({args['x']:g}, {args['y']:g})",)
    elif skill in ROUTE_SKILLS:
        names = [str(p) for p in args.get("places", [])]
    else:
        return ()
    unknown = [n for n in names if n not in places]
    if unknown:
        diags.append(PlanDiagnostic(code=DiagnosticCode.UNKNOWN_PLACE, step=i,
                                    message=f"step {i}: {', '.join(unknown)} is not a known place (places: "
                                            f"{', '.join(sorted(places))})"))
    return tuple(names)


def _satisfies(ob: Obligation, e: _Effect, start: str) -> bool:
    p = ob.params
    if ob.kind is ObligationKind.AT_PLACE:
        return str(p.get("place")) in e.visits
    if ob.kind is ObligationKind.ROUTE_CLOSED:
        return False  # judged over several steps (_route_closed)
    if ob.kind is ObligationKind.IMAGE_CAPTURED:
        return e.skill == CAPTURE_SKILL and (not p.get("place") or e.at == p.get("place"))
    if ob.kind is ObligationKind.SPOKEN:
        return e.skill == SPEAK_SKILL and (not p.get("text") or _words(e.args.get("text")) == _words(p["text"])) and (
            not p.get("place") or e.at == p.get("place"))
    if ob.kind is ObligationKind.MESSAGE_DELIVERED:
        return e.skill == MESSAGE_SKILL and (not p.get("to") or _words(e.args.get("to")) == _words(p["to"])) and (
            not p.get("text") or _words(e.args.get("text")) == _words(p["text"]))
    return False


def _kind_matches(ob: Obligation, e: _Effect) -> bool:
    """The step is of the obligation's sort, whatever its place or words."""
    return {ObligationKind.AT_PLACE: bool(e.visits), ObligationKind.IMAGE_CAPTURED: e.skill == CAPTURE_SKILL,
            ObligationKind.SPOKEN: e.skill == SPEAK_SKILL, ObligationKind.MESSAGE_DELIVERED: e.skill == MESSAGE_SKILL,
            ObligationKind.ROUTE_CLOSED: bool(e.visits)}.get(ob.kind, False)


def _serving(ob: Obligation, effects: Sequence[_Effect], after: int, start: str,
             diags: list[PlanDiagnostic] | None, declared: Sequence[_Effect]) -> int | None:
    """The step serving ``ob`` (the one that says so, else the first that does after ``after``)."""
    if ob.kind is ObligationKind.ROUTE_CLOSED:
        return _route_closed(ob, effects, start)
    if declared:
        for e in declared:
            if _satisfies(ob, e, start):
                return e.step
        e = declared[0]
        assert diags is not None
        diags.append(_mismatch(ob, e))
        return None
    return next((e.step for e in effects if e.step > after and _satisfies(ob, e, start)), None) or next(
        (e.step for e in effects if _satisfies(ob, e, start)), None)


def _route_closed(ob: Obligation, effects: Sequence[_Effect], start: str) -> int | None:
    want = [str(w) for w in ob.params.get("waypoints") or ()]
    home = str(ob.params.get("start") or START)
    home = start if home == START else home
    trail = [(e.step, v) for e in effects for v in e.visits]
    k = 0
    for step, v in trail:
        if k < len(want) and v == want[k]:
            k += 1
        elif k == len(want) and v == home:
            return step
    return None


def _mismatch(ob: Obligation, e: _Effect) -> PlanDiagnostic:
    p = ob.params
    if _kind_matches(ob, e) and p.get("place") and ob.kind is not ObligationKind.AT_PLACE and e.at != p.get("place"):
        verb = {ObligationKind.SPOKEN: "speaks", ObligationKind.IMAGE_CAPTURED: "captures an image"}.get(ob.kind, "acts")
        return PlanDiagnostic(code=DiagnosticCode.WRONG_PLACE, step=e.step, obligation=ob.id,
                              message=f"step {e.step} {verb} at {_where(e.at)}, but {ob.id} needs it at {p['place']} "
                                      f"and no step before it reaches {p['place']}")
    return PlanDiagnostic(code=DiagnosticCode.DOES_NOT_SERVE, step=e.step, obligation=ob.id,
                          message=f"step {e.step} ({e.skill}) says it serves {ob.id}, but does not: {ob.id} "
                                  f"{_wants(ob)}")


def _wants(ob: Obligation) -> str:
    p = ob.params
    if ob.kind is ObligationKind.AT_PLACE:
        return f"wants the robot at {p.get('place')}"
    if ob.kind is ObligationKind.IMAGE_CAPTURED:
        return "wants an image" + (f" captured at {p['place']}" if p.get("place") else "")
    if ob.kind is ObligationKind.SPOKEN:
        return "wants " + (f"{p['text']!r} said" if p.get("text") else "a sentence said") + (
            f" at {p['place']}" if p.get("place") else "")
    if ob.kind is ObligationKind.MESSAGE_DELIVERED:
        return "wants a message" + (f" to {p['to']}" if p.get("to") else "") + (
            f" saying {p['text']!r}" if p.get("text") else "")
    if ob.kind is ObligationKind.ROUTE_CLOSED:
        return f"wants a round through {', '.join(map(str, p.get('waypoints') or ()))} and back"
    return ob.description


def _uncovered(ob: Obligation, effects: Sequence[_Effect], after: int) -> PlanDiagnostic:
    """Why no step serves ``ob``: a step of its sort in the wrong place, or nothing of its sort at all."""
    p = ob.params
    near = [e for e in effects if _kind_matches(ob, e)]
    if near and p.get("place") and ob.kind in (ObligationKind.SPOKEN, ObligationKind.IMAGE_CAPTURED):
        e = near[0]
        if e.at != p.get("place"):
            return _mismatch(ob, e)
    return PlanDiagnostic(code=DiagnosticCode.UNCOVERED, obligation=ob.id,
                          message=f"no step serves {ob.id}: it {_wants(ob)}")
