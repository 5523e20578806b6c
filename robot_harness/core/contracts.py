"""Contract compilers and the coverage review: what "done" means, fixed at admission.

Before the planner sees anything, a ``ContractCompiler`` turns the user's goal
into a frozen ``CompletionContract`` (atomic obligations, the evidence that may
prove each, freshness bounds and dependencies). A ``CoverageReviewer`` then
re-reads the goal with a clean context (never the compiler's working) and
reports action phrases that no obligation covers.

Guarantees every compiler here keeps:

- a compiler returns a whole, validated contract or raises ``ContractError``;
  there is no partial contract;
- every place an obligation names is a key of the known places, so a mission
  naming an unknown place is refused before anything moves;
- compiling is a pure function of (goal, ids, places, configuration): no clock,
  no randomness, so the same input always yields the same digest;
- a change to a contract is a new revision (``revise``), never an edit.
"""
from __future__ import annotations

import copy
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .completion import CompletionContract, CoverageReport, EvidenceKind, Obligation, ObligationKind
from .errors import RefusalError, ScenarioError, UsageError
from .goals.coverage import RuleCoverageReviewer
from .records import Pose2D

__all__ = [
    "ContractError",
    "ContractCompiler",
    "CoverageReviewer",
    "ScenarioContractCompiler",
    "LLMContractCompiler",
    "LLMCoverageReviewer",
    "FakeContractLLM",
    "RuleCoverageReviewer",
    "CompleteFn",
    "OBLIGATION_KIND_MEANINGS",
    "EVIDENCE_KIND_MEANINGS",
    "review_coverage",
    "compile_contract",
    "build_contract",
    "START_PLACE",
    "revise",
]

CompleteFn = Callable[[list[dict[str, Any]]], str]
"""Chat messages (OpenAI format) in, the model's text out."""


class ContractError(RefusalError):
    """No valid contract (or coverage review) could be produced for this goal; the mission is refused."""

    code = "contract_refused"


@runtime_checkable
class ContractCompiler(Protocol):
    """Turns a goal into revision 1 of a contract, or raises ``ContractError``."""

    name: str

    def compile(
        self, goal: str, *, mission_id: str, contract_id: str, places: Mapping[str, Pose2D]
    ) -> CompletionContract: ...


@runtime_checkable
class CoverageReviewer(Protocol):
    """Checks obligations against the goal; sees only the goal and the obligations."""

    name: str

    def review(self, goal: str, obligations: Sequence[Obligation]) -> CoverageReport: ...


OBLIGATION_KIND_MEANINGS: dict[ObligationKind, str] = {
    ObligationKind.AT_PLACE: (
        "the robot reached a named place. params: {place: one of the known places, final: true if the robot "
        "must still be there when the mission is verified (only the last place the goal leaves it at), else false}"
    ),
    ObligationKind.IMAGE_CAPTURED: (
        "an image was captured by the robot's camera. params: {place: the known place it must be taken at, "
        "if the goal says where}"
    ),
    ObligationKind.MESSAGE_DELIVERED: (
        "a message was delivered and acknowledged. params: {to: the recipient, default \"operator\"; text: the "
        "words to send, verbatim, if the goal gives them}. A report to the user (report, tell me, let me know) "
        "lists eligible: [\"send_message\", \"speak\"]: a spoken report satisfies it too"
    ),
    ObligationKind.SPOKEN: (
        "the robot said a sentence aloud. params: {text: what to say, verbatim, if the goal gives it; place: the "
        "known place it must be said at: the place the goal names or says \"there\" of, or where the robot is "
        "at that step}"
    ),
    ObligationKind.ROUTE_CLOSED: (
        "a closed route: leave the start by more than min_departure_m metres, visit the waypoints in order, "
        "come back. params: {start: a known place or \"start\" (where the robot was at the mission's start), "
        "waypoints: [known places] (may be empty for a lap), min_departure_m: number}"
    ),
    ObligationKind.SEMANTIC: (
        "something only a visual/semantic judgement can decide, e.g. identify, find or count a thing. "
        "params: {question: the goal's words for it, place: a known place, if the goal says where}"
    ),
}

EVIDENCE_KIND_MEANINGS: dict[EvidenceKind, str] = {
    EvidenceKind.NAVIGATION_RECEIPT: "the executor's receipt of a navigation that ended verified at the target",
    EvidenceKind.POSE_OBSERVATION: "a localized pose observation of the robot",
    EvidenceKind.IMAGE_ARTIFACT: "a captured image file with its sha256",
    EvidenceKind.DELIVERY_RECEIPT: "the transport's acknowledgement that a message was delivered",
    EvidenceKind.SPEECH_RECEIPT: "the audio output's acknowledgement that a sentence was spoken",
    EvidenceKind.TRAJECTORY: "the recorded sequence of poses over the mission",
    EvidenceKind.SEMANTIC_JUDGEMENT: "a recorded judgement of a vision/language model on cited evidence",
}

_OBLIGATIONS: TypeAdapter[tuple[Obligation, ...]] = TypeAdapter(tuple[Obligation, ...])


def _problems(exc: ValidationError) -> list[str]:
    return [f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors(include_url=False)]


START_PLACE = "start"
"""Where the robot was when the mission was admitted: a place every contract may name (the engine resolves it)."""


def _obligation_problems(obligations: Sequence[Obligation], places: Mapping[str, Any] | None) -> list[str]:
    """What makes a well-formed obligation list unusable; place names are checked when places are given."""
    problems: list[str] = []
    if not obligations:
        problems.append("the contract has no obligations")

    def known(value: Any) -> bool:
        return places is None or (isinstance(value, str) and (value in places or value == START_PLACE))

    finals: list[str] = []
    for o in obligations:
        p = o.params
        if not o.evidence:
            problems.append(f"{o.id}: no acceptable evidence kinds")
        if o.max_age_s is not None and o.max_age_s <= 0:
            problems.append(f"{o.id}: max_age_s must be positive")
        if o.kind is ObligationKind.AT_PLACE:
            if not isinstance(p.get("place"), str) or not p["place"]:
                problems.append(f"{o.id}: at_place needs params.place")
            elif not known(p["place"]):
                problems.append(f"{o.id}: unknown place {p['place']!r}")
            final = p.get("final", False)
            if not isinstance(final, bool):
                problems.append(f"{o.id}: params.final must be true or false")
            elif final:
                finals.append(o.id)
        elif o.kind in (ObligationKind.IMAGE_CAPTURED, ObligationKind.SEMANTIC, ObligationKind.SPOKEN):
            if "place" in p and not (isinstance(p["place"], str) and known(p["place"])):
                problems.append(f"{o.id}: unknown place {p['place']!r}")
            if o.kind is ObligationKind.SEMANTIC and not (isinstance(p.get("question"), str) and p["question"]):
                problems.append(f"{o.id}: semantic needs params.question")
        elif o.kind is ObligationKind.ROUTE_CLOSED:
            wps = p.get("waypoints")
            dep = p.get("min_departure_m", 0.0)
            if not isinstance(wps, list):
                problems.append(f"{o.id}: route_closed needs a params.waypoints list")
            elif not wps and not (isinstance(dep, int | float) and not isinstance(dep, bool) and dep > 0):
                problems.append(f"{o.id}: a route_closed with no waypoints (a lap) needs min_departure_m > 0")
            else:
                problems.extend(f"{o.id}: unknown waypoint {w!r}" for w in wps if not (isinstance(w, str) and known(w)))
            start = p.get("start", "start")
            if start != "start" and not (isinstance(start, str) and known(start)):
                problems.append(f"{o.id}: unknown start place {start!r}")
            if "final" in p and not isinstance(p["final"], bool):
                problems.append(f"{o.id}: params.final must be true or false")
            if isinstance(dep, bool) or not isinstance(dep, int | float) or dep < 0:
                problems.append(f"{o.id}: params.min_departure_m must be a non-negative number")
        elif o.kind is ObligationKind.MESSAGE_DELIVERED:
            if "to" in p and not (isinstance(p["to"], str) and p["to"]):
                problems.append(f"{o.id}: params.to must be a non-empty string")
        if o.kind is ObligationKind.IMAGE_CAPTURED and "count" in p and not (
                isinstance(p["count"], int) and not isinstance(p["count"], bool) and 1 <= p["count"] <= 20):
            problems.append(f"{o.id}: params.count must be a whole number from 1 to 20")
        if o.kind is ObligationKind.MESSAGE_DELIVERED and "attachments" in p:
            att = p["attachments"]
            kinds = {x.id: x.kind for x in obligations}
            if not isinstance(att, list) or not att or any(kinds.get(a) is not ObligationKind.IMAGE_CAPTURED
                                                           for a in att):
                problems.append(f"{o.id}: params.attachments must list image_captured obligation ids")
        if o.kind in (ObligationKind.SPOKEN, ObligationKind.MESSAGE_DELIVERED) and "text" in p \
                and not (isinstance(p["text"], str) and p["text"].strip()):
            problems.append(f"{o.id}: params.text must be a non-empty string")
    if len(finals) > 1:
        problems.append(f"only one at_place obligation may be final, got {finals}")
    return problems


def build_contract(goal: str, *, mission_id: str, contract_id: str, compiler: str, obligations: Any,
                   places: Mapping[str, Any]) -> CompletionContract:
    """Revision 1 of a contract, validated whole, or ``ContractError``."""
    try:
        contract = CompletionContract(contract_id=contract_id, mission_id=mission_id, goal=goal,
                                      compiler=compiler, obligations=obligations)
    except ValidationError as exc:
        raise ContractError(f"{compiler}: the obligations do not form a valid contract", compiler=compiler,
                            goal=goal, problems=_problems(exc)) from None
    problems = _obligation_problems(contract.obligations, places)
    if problems:
        raise ContractError(f"{compiler}: {problems[0]}", compiler=compiler, goal=goal, problems=problems,
                            known_places=sorted(places))
    return contract


# --------------------------------------------------------------------------- scenario compiler


class ScenarioContractCompiler:
    """The contract a scenario states verbatim (a list of obligation dicts).

    The list is validated when the compiler is built (a malformed list is the
    scenario author's mistake: ``ScenarioError``); place names are checked
    against the mission's places at compile time (``ContractError``).
    """

    name = "scenario"

    def __init__(self, obligations: Sequence[Mapping[str, Any] | Obligation]) -> None:
        try:
            parsed = _OBLIGATIONS.validate_python(list(obligations))
            CompletionContract(contract_id="-", mission_id="-", goal="-", compiler=self.name, obligations=parsed)
        except ValidationError as exc:
            problems = _problems(exc)
            raise ScenarioError(f"scenario contract is invalid: {'; '.join(problems)}", problems=problems) from None
        problems = _obligation_problems(parsed, None)
        if problems:
            raise ScenarioError(f"scenario contract is invalid: {'; '.join(problems)}", problems=problems)
        self.obligations = parsed

    def compile(self, goal: str, *, mission_id: str, contract_id: str,
                places: Mapping[str, Pose2D]) -> CompletionContract:
        return build_contract(goal, mission_id=mission_id, contract_id=contract_id, compiler=self.name,
                      obligations=self.obligations, places=places)


# --------------------------------------------------------------------------- LLM compiler and reviewer


class _ContractReply(BaseModel):
    model_config = ConfigDict(extra="forbid", title="ContractReply")
    obligations: list[Obligation] = Field(min_length=1)


class _CoverageReply(BaseModel):
    model_config = ConfigDict(extra="forbid", title="CoverageReply")
    ok: bool
    uncovered: list[str] = Field(default_factory=list)
    notes: str = ""


def _kinds_text() -> str:
    kinds = "\n".join(f"- {k.value}: {OBLIGATION_KIND_MEANINGS[k]}" for k in ObligationKind)
    evidence = "\n".join(f"- {e.value}: {EVIDENCE_KIND_MEANINGS[e]}" for e in EvidenceKind)
    return f"Obligation kinds:\n{kinds}\n\nEvidence kinds:\n{evidence}"


def _schema(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), sort_keys=True, separators=(",", ":"))


CONTRACT_SYSTEM_PROMPT = f"""\
You write completion contracts for a mobile robot. Given a user's goal and the \
names of the places the robot knows, list the atomic obligations that must all \
be proven, with evidence, before the mission may be called done. You do not \
plan, choose actions or talk to the robot; you only state what "done" means.

Rules:
- One obligation per atomic requirement of the goal. Omit nothing the goal asks \
for and add nothing it does not ask for.
- ids are "o1", "o2", ... in the order the goal states the requirements.
- "source" is the exact words of the goal the obligation comes from; \
"description" says in one sentence what must be true.
- Use only place names from the known places, spelled exactly as given, or "start" for where the robot \
was when the mission began ("come back here", "return to where you started").
- Bind every parameter the goal gives: the place of an image or a speech ("there", "at X"), quoted text \
verbatim, the recipient, and the order (depends_on: each step depends on the step before it).
- At most one at_place obligation has params.final = true: the place the goal \
leaves the robot at, where it must still be when the mission is verified. \
Every other at_place has final = false.
- depends_on lists obligations that must be satisfied before this one: an \
image at a place depends on reaching it; a return depends on the work done \
before it; a report depends on everything before it.
- evidence lists the evidence kinds that may prove the obligation.
- max_age_s: for the final at_place, how old (seconds) the pose observation may \
be at verification, e.g. 2.0; otherwise null.

{_kinds_text()}

Reply with exactly one JSON object and nothing else, valid against this JSON schema:
{_schema(_ContractReply)}
"""

COVERAGE_SYSTEM_PROMPT = f"""\
You review a completion contract for a mobile robot. Given the user's goal and \
the contract's obligations, find every action the goal asks for that no \
obligation requires (an omission). Judge from the goal's words and the \
obligations' kinds and parameters only.

{_kinds_text()}

Reply with exactly one JSON object and nothing else, valid against this JSON schema:
{_schema(_CoverageReply)}
"ok" is true only when "uncovered" is empty; "uncovered" quotes the goal's words \
for each omitted action.
"""


def _parse_reply(text: Any, model: type[BaseModel], *, who: str) -> Any:
    """The model's reply as ``model``, or ContractError; one code fence around the JSON is tolerated."""
    if not isinstance(text, str):
        raise ContractError(f"{who}: the model returned {type(text).__name__}, not text", compiler=who)
    body = text.strip()
    if m := re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.DOTALL):
        body = m.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ContractError(f"{who}: the model's reply is not JSON: {exc}", compiler=who, reply=text[:2000]) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = _problems(exc)
        raise ContractError(f"{who}: the model's reply does not match the schema: {problems[0]}", compiler=who,
                            problems=problems, reply=text[:2000]) from None


class LLMContractCompiler:
    """A contract compiled by a language model, in a clean context, then held to the rules.

    The model sees only the system prompt, the goal and the known place names:
    no planner context, tools or history. Its JSON reply is validated whole;
    anything malformed refuses the goal. Errors raised by ``complete`` itself
    (transport, timeout) propagate unchanged.

    Post-validation (``reference``, ``reviewer``): the model's contract is
    never used under-bound. When the rule compiler (``reference``) compiles the
    goal, the model's contract must bind everything the reference binds
    (places, text, recipients, order, finality: ``goals.compare.entails``); if it
    does not, the reference's contract is used instead and the repair is
    noted in the contract's coverage notes. When the reference refuses the goal,
    the model's contract must still bind every quoted payload of the goal
    verbatim and pass the rule-based coverage review, or the goal is refused.
    """

    def __init__(self, complete: CompleteFn, *, name: str = "llm", reference: ContractCompiler | None = None,
                 reviewer: CoverageReviewer | None = None) -> None:
        self.complete = complete
        self.name = name
        self.reference = reference
        self.reviewer = reviewer

    def messages(self, goal: str, *, places: Mapping[str, Any]) -> list[dict[str, Any]]:
        user = json.dumps({"goal": goal, "known_places": sorted(places)}, ensure_ascii=False)
        return [{"role": "system", "content": CONTRACT_SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def compile(self, goal: str, *, mission_id: str, contract_id: str,
                places: Mapping[str, Pose2D]) -> CompletionContract:
        reply = _parse_reply(self.complete(self.messages(goal, places=places)), _ContractReply, who=self.name)
        contract = build_contract(goal, mission_id=mission_id, contract_id=contract_id, compiler=self.name,
                                  obligations=reply.obligations, places=places)
        return self._post_validate(contract, places=places)

    def _post_validate(self, contract: CompletionContract, *, places: Mapping[str, Pose2D]) -> CompletionContract:
        from .goals.compare import entails, shape_of
        from .goals.parse import tokenize

        goal = contract.goal
        reference: CompletionContract | None = None
        refused: ContractError | None = None
        if self.reference is not None:
            try:
                reference = self.reference.compile(goal, mission_id=contract.mission_id,
                                                   contract_id=contract.contract_id, places=places)
            except ContractError as exc:
                refused = exc
        if reference is not None:
            under = entails(shape_of(contract), shape_of(reference))
            if not under:
                return contract
            note = (f"repaired: the model's contract was under-bound ({'; '.join(under[:3])}); "
                    f"the {self.reference.name} compiler's contract is used")  # type: ignore[union-attr]
            return CompletionContract.model_validate({
                **reference.model_dump(), "compiler": self.name,
                "coverage": CoverageReport(reviewer=f"{self.name}-post-validation", ok=True, notes=note).model_dump()})
        problems: list[str] = []
        if refused is not None and refused.details.get("reason") in ("unknown_place", "unsupported_action"):
            # nothing a model writes makes an unknown place known or an unsupported action verifiable
            raise ContractError(f"{self.name}: refused by the rules whatever the model says: {refused.message}",
                                compiler=self.name, goal=goal, reason=refused.details["reason"],
                                problems=[refused.message])
        toks, quotes = tokenize(goal)
        lexicon = getattr(self.reference, "lexicon", None)
        if refused is not None and lexicon is not None:
            from .goals.lexicon import PhraseIndex

            markers = PhraseIndex()
            for phrase in lexicon.unverifiable_markers:
                markers.add_phrase(phrase, True)
            words = [t.text for t in toks]
            found = [words[i] for i in range(len(words)) if markers.match(words, i) is not None]
            if found:
                raise ContractError(
                    f"{self.name}: the goal says {found[0]!r}, which no check can hold a contract to, and the rules "
                    f"cannot read it ({refused.message}); rephrase it", compiler=self.name, goal=goal,
                    reason="under_bound", problems=[f"unverifiable: {w!r}" for w in found])
        bound = {" ".join(str(o.params.get("text", "")).split()).casefold() for o in contract.obligations}
        problems += [f"quoted text {q!r} is bound by no obligation" for q in quotes
                     if " ".join(q.split()).casefold() not in bound]
        if self.reviewer is not None:
            report = self.reviewer.review(goal, contract.obligations)
            if not report.ok:
                problems += [f"uncovered: {u!r}" for u in report.uncovered] or [report.notes]
        if problems:
            why = f" (the {self.reference.name} compiler refused it: {refused.message})" if refused is not None \
                and self.reference is not None else ""
            raise ContractError(f"{self.name}: the model's contract is under-bound: {problems[0]}{why}",
                                compiler=self.name, goal=goal, problems=problems, reason="under_bound")
        return contract


class LLMCoverageReviewer:
    """Coverage review by a language model that sees the goal and the obligations (not their sources)."""

    def __init__(self, complete: CompleteFn, *, name: str = "llm-coverage") -> None:
        self.complete = complete
        self.name = name

    def messages(self, goal: str, obligations: Sequence[Obligation]) -> list[dict[str, Any]]:
        listed = [o.model_dump(mode="json", include={"id", "kind", "description", "params"}) for o in obligations]
        user = json.dumps({"goal": goal, "obligations": listed}, ensure_ascii=False, sort_keys=True)
        return [{"role": "system", "content": COVERAGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def review(self, goal: str, obligations: Sequence[Obligation]) -> CoverageReport:
        reply = _parse_reply(self.complete(self.messages(goal, obligations)), _CoverageReply, who=self.name)
        if reply.ok == bool(reply.uncovered):
            raise ContractError(f"{self.name}: ok={reply.ok} contradicts uncovered={reply.uncovered}",
                                compiler=self.name)
        return CoverageReport(reviewer=self.name, ok=reply.ok, uncovered=tuple(reply.uncovered), notes=reply.notes)


class FakeContractLLM:
    """A scripted contract model for tests (pydantic-ai's function-model idea).

    Give it replies (returned in order; running out is a ``UsageError``) or a
    function of the messages. Every call's messages are recorded in ``calls``.
    """

    def __init__(self, replies: Iterable[str] | CompleteFn) -> None:
        self._fn: CompleteFn | None = None
        self._replies: deque[str] = deque()
        if callable(replies):
            self._fn = replies
        else:
            self._replies.extend([replies] if isinstance(replies, str) else replies)
        self.calls: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.calls.append(copy.deepcopy(messages))
        if self._fn is not None:
            return self._fn(messages)
        if not self._replies:
            raise UsageError("FakeContractLLM has no scripted reply left", calls=len(self.calls))
        return self._replies.popleft()


# --------------------------------------------------------------------------- admission helpers


def review_coverage(contract: CompletionContract, *, reviewer: CoverageReviewer) -> CoverageReport:
    """Run a clean-context review: the reviewer gets the goal and the obligations, nothing else."""
    report = reviewer.review(contract.goal, contract.obligations)
    if not isinstance(report, CoverageReport):
        raise ContractError(f"reviewer {getattr(reviewer, 'name', reviewer)!r} returned no CoverageReport")
    return report


def compile_contract(goal: str, *, compiler: ContractCompiler, reviewer: CoverageReviewer, mission_id: str,
                     contract_id: str, places: Mapping[str, Pose2D]) -> CompletionContract:
    """Compile, check and review a goal: revision 1 of the contract with ``coverage`` filled in.

    An uncovered report does not raise: it is recorded in the contract and the
    admission policy decides. A compiler returning a contract for another goal,
    mission or id, or with unusable obligations, raises ``ContractError``.
    """
    contract = compiler.compile(goal, mission_id=mission_id, contract_id=contract_id, places=places)
    expected = (goal, mission_id, contract_id, 1, compiler.name)
    got = (contract.goal, contract.mission_id, contract.contract_id, contract.revision, contract.compiler)
    if got != expected:
        raise ContractError(f"compiler {compiler.name!r} returned a contract for {got}, expected {expected}",
                            compiler=compiler.name)
    problems = _obligation_problems(contract.obligations, places)
    if problems:
        raise ContractError(f"compiler {compiler.name!r}: {problems[0]}", compiler=compiler.name, problems=problems)
    report = review_coverage(contract, reviewer=reviewer)
    if contract.coverage is not None and contract.coverage.notes:  # the compiler's own note (e.g. a repair)
        report = report.model_copy(update={"notes": f"{report.notes}; {contract.coverage.notes}"})
    return CompletionContract.model_validate({**contract.model_dump(), "coverage": report.model_dump()})


def revise(contract: CompletionContract, *, obligations: Sequence[Obligation | Mapping[str, Any]], contract_id: str,
           compiler: str | None = None, places: Mapping[str, Pose2D] | None = None) -> CompletionContract:
    """A new record: revision + 1 of ``contract`` with new obligations, superseding it (coverage not carried over)."""
    if contract_id == contract.contract_id:
        raise UsageError(f"a revision needs a new contract id, got the old one {contract_id!r}",
                         contract_id=contract_id)
    name = compiler or contract.compiler
    try:
        new = CompletionContract(contract_id=contract_id, mission_id=contract.mission_id,
                                 revision=contract.revision + 1, goal=contract.goal, compiler=name,
                                 obligations=tuple(obligations), supersedes=contract.contract_id)
    except ValidationError as exc:
        raise ContractError("the revised obligations do not form a valid contract", compiler=name,
                            problems=_problems(exc)) from None
    problems = _obligation_problems(new.obligations, places)
    if problems:
        raise ContractError(f"revision {new.revision}: {problems[0]}", compiler=name, problems=problems)
    return new
