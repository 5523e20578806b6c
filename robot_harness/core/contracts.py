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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from .completion import CompletionContract, CoverageReport, EvidenceKind, Obligation, ObligationKind
from .errors import RefusalError, ScenarioError, UsageError
from .records import Pose2D

__all__ = [
    "ContractError",
    "ContractCompiler",
    "CoverageReviewer",
    "TemplateVerbs",
    "TemplateConfig",
    "TemplateContractCompiler",
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
        "a message was delivered and acknowledged. params: {to: the recipient, default \"operator\"}"
    ),
    ObligationKind.SPOKEN: "the robot said a sentence aloud. params: {text: what to say, if the goal quotes it}",
    ObligationKind.ROUTE_CLOSED: (
        "a closed route: leave the start by more than min_departure_m metres, visit the waypoints in order, "
        "come back. params: {start: a known place or \"start\", waypoints: [known places], min_departure_m: number}"
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

_AT_PLACE_EVIDENCE = (EvidenceKind.NAVIGATION_RECEIPT, EvidenceKind.POSE_OBSERVATION)
_IMAGE_EVIDENCE = (EvidenceKind.IMAGE_ARTIFACT,)
_MESSAGE_EVIDENCE = (EvidenceKind.DELIVERY_RECEIPT,)
_SPEECH_EVIDENCE = (EvidenceKind.SPEECH_RECEIPT,)
_ROUTE_EVIDENCE = (EvidenceKind.NAVIGATION_RECEIPT, EvidenceKind.POSE_OBSERVATION, EvidenceKind.TRAJECTORY)
_SEMANTIC_EVIDENCE = (EvidenceKind.SEMANTIC_JUDGEMENT, EvidenceKind.IMAGE_ARTIFACT)

_FIELD_KINDS = frozenset({ObligationKind.AT_PLACE, ObligationKind.IMAGE_CAPTURED,
                          ObligationKind.ROUTE_CLOSED, ObligationKind.SEMANTIC})
"""Obligations carried out in the world, which a return (and a report) comes after."""

_OBLIGATIONS: TypeAdapter[tuple[Obligation, ...]] = TypeAdapter(tuple[Obligation, ...])


def _problems(exc: ValidationError) -> list[str]:
    return [f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors(include_url=False)]


def _obligation_problems(obligations: Sequence[Obligation], places: Mapping[str, Any] | None) -> list[str]:
    """What makes a well-formed obligation list unusable; place names are checked when places are given."""
    problems: list[str] = []
    if not obligations:
        problems.append("the contract has no obligations")

    def known(value: Any) -> bool:
        return places is None or (isinstance(value, str) and value in places)

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
        elif o.kind in (ObligationKind.IMAGE_CAPTURED, ObligationKind.SEMANTIC):
            if "place" in p and not (isinstance(p["place"], str) and known(p["place"])):
                problems.append(f"{o.id}: unknown place {p['place']!r}")
            if o.kind is ObligationKind.SEMANTIC and not (isinstance(p.get("question"), str) and p["question"]):
                problems.append(f"{o.id}: semantic needs params.question")
        elif o.kind is ObligationKind.ROUTE_CLOSED:
            wps = p.get("waypoints")
            if not isinstance(wps, list) or not wps:
                problems.append(f"{o.id}: route_closed needs a non-empty params.waypoints list")
            else:
                problems.extend(f"{o.id}: unknown waypoint {w!r}" for w in wps if not (isinstance(w, str) and known(w)))
            start = p.get("start", "start")
            if start != "start" and not (isinstance(start, str) and known(start)):
                problems.append(f"{o.id}: unknown start place {start!r}")
            dep = p.get("min_departure_m", 0.0)
            if isinstance(dep, bool) or not isinstance(dep, int | float) or dep < 0:
                problems.append(f"{o.id}: params.min_departure_m must be a non-negative number")
        elif o.kind is ObligationKind.MESSAGE_DELIVERED:
            if "to" in p and not (isinstance(p["to"], str) and p["to"]):
                problems.append(f"{o.id}: params.to must be a non-empty string")
        elif o.kind is ObligationKind.SPOKEN and "text" in p and not isinstance(p["text"], str):
            problems.append(f"{o.id}: params.text must be a string")
    if len(finals) > 1:
        problems.append(f"only one at_place obligation may be final, got {finals}")
    return problems


def _build(goal: str, *, mission_id: str, contract_id: str, compiler: str, obligations: Any,
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


# --------------------------------------------------------------------------- template compiler


class _Cfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _words(v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    out = tuple(" ".join(str(w).lower().split()) for w in v)
    if not out or any(not w for w in out):
        raise ValueError("a word list must be non-empty and hold no empty entries")
    return out


class TemplateVerbs(_Cfg):
    """The phrases each template recognizes at the start of a clause (case-insensitive, multi-word allowed)."""

    navigate: tuple[str, ...] = ("go", "travel", "navigate", "drive", "walk", "head", "move")
    """Followed by ``to <place>``."""
    visit: tuple[str, ...] = ("visit",)
    return_: tuple[str, ...] = Field(default=("return", "come back", "go back", "head back"), alias="return")
    inspect: tuple[str, ...] = ("inspect",)
    capture: tuple[str, ...] = ("capture", "take", "snap")
    """Followed by an image noun: ``take a photo``."""
    photograph: tuple[str, ...] = ("photograph",)
    image_nouns: tuple[str, ...] = ("image", "photo", "picture", "photograph", "snapshot")
    report: tuple[str, ...] = ("report",)
    notify: tuple[str, ...] = ("notify", "tell", "inform", "alert", "message", "email")
    """Followed by the recipient: ``tell bob``."""
    send: tuple[str, ...] = ("send", "deliver", "email", "message")
    """Followed by a message noun [+ ``to <recipient>``]: ``deliver a message to bob``."""
    message_nouns: tuple[str, ...] = ("message", "report", "notification", "update", "summary")
    say: tuple[str, ...] = ("say", "announce", "speak")
    semantic: tuple[str, ...] = ("identify", "find", "look for", "search for", "check", "count", "determine",
                                 "locate")
    patrol: tuple[str, ...] = ("patrol",)

    @field_validator("*", mode="before")
    @classmethod
    def _norm(cls, v: Any) -> tuple[str, ...]:
        return _words(v)


class TemplateConfig(_Cfg):
    """config/contract_templates.yaml. The defaults here are the shipped file (a test keeps them equal)."""

    format_version: int = 1
    base_place: str = Field(default="dock", min_length=1)
    """The place "return to base/dock/home" (and a bare "return") means."""
    base_aliases: tuple[str, ...] = ("base", "dock", "home")
    default_recipient: str = Field(default="operator", min_length=1)
    self_recipients: tuple[str, ...] = ("me", "us")
    """Recipients that mean the user, i.e. the default recipient."""
    final_pose_max_age_s: float = Field(default=2.0, gt=0.0)
    """Bound on the age of the fresh pose that proves the final at_place at verification."""
    evidence_max_age_s: float | None = Field(default=None, gt=0.0)
    """``max_age_s`` of every other obligation: how old its evidence may be at verification.
    None: evidence of what happened does not expire (set it above the longest mission if used)."""
    min_departure_m: float = Field(default=1.0, ge=0.0)
    fillers: tuple[str, ...] = ("please", "first", "then", "and", "finally", "next", "also", "now",
                                "afterwards", "after that")
    """Words dropped from the start of a clause."""
    continuation_starters: tuple[str, ...] = ("the", "a", "an", "any", "all", "some", "no", "there", "its",
                                              "their", "whether", "if", "how", "which", "what")
    """A clause starting with one of these, right after a semantic clause, continues its question
    ("check whether the door is open and the light is off"); any other unmatched clause is refused."""
    verbs: TemplateVerbs = TemplateVerbs()

    @field_validator("base_aliases", "self_recipients", "fillers", "continuation_starters", mode="before")
    @classmethod
    def _norm(cls, v: Any) -> tuple[str, ...]:
        return _words(v)


def _alt(words: Iterable[str]) -> str:
    ordered = sorted(set(words), key=lambda w: (-len(w), w))
    return "(?:" + "|".join(r"\s+".join(re.escape(p) for p in w.split()) for w in ordered) + ")"


_BOUNDARY = r"(?=\s*(?:$|[,;]|\.(?:\s|$))|\s+(?:and|then)\b)"
_QUOTE = re.compile(r"\"([^\"]*)\"|“([^”]*)”|‘([^’]*)’|(?<!\w)'([^']*?)'(?!\w)")
_PLACEHOLDER = re.compile(r"\x00([QP])(\d+)\x00")
_SPLIT = re.compile(r"[,;]|\.(?=\s|$)|\b(?:and|then)\b", re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_RECIPIENT_TO = re.compile(r"\bto\s+(?:(?:the|my|our)\s+)?(?P<to>[\w\-]+)", re.IGNORECASE)


class _Patterns:
    """The compiled regular expressions of one TemplateConfig."""

    def __init__(self, cfg: TemplateConfig) -> None:
        v = cfg.verbs
        ret, img, msg = _alt(v.return_), _alt(v.image_nouns), _alt(v.message_nouns)
        place_tail = r"(?:\s+(?:to\s+)?(?P<rplace>(?:(?!\s+(?:and|then)\b)[^,.;\x00])+?))?"
        flags = re.IGNORECASE
        self.patrol_route = re.compile(
            rf"\b{_alt(v.patrol)}\s+(?:the\s+)?route\s+(?P<wps>[^,.;\x00]+?(?:\s*(?:->|→)\s*[^,.;\x00]+?)+?)"
            rf"(?:\s+and\s+{ret}{place_tail})?{_BOUNDARY}", flags)
        self.patrol_list = re.compile(
            rf"\b{_alt(v.patrol)}\s+(?:the\s+route\s+)?(?P<wps>[^.;\x00]+?)\s*,?\s+and\s+{ret}{place_tail}{_BOUNDARY}",
            flags)
        self.patrol_word = re.compile(rf"{_alt(v.patrol)}\b", flags)
        self.fillers = re.compile(rf"^(?:{_alt(cfg.fillers)}\b[\s,]*)+", flags)
        self.ret = re.compile(rf"{ret}(?:\s+(?:to\s+)?(?P<place>.+))?", flags)
        self.navigate = re.compile(rf"{_alt(v.navigate)}\s+(?:over\s+)?to\s+(?P<place>.+)", flags)
        self.visit = re.compile(rf"{_alt(v.visit)}\s+(?P<place>.+)", flags)
        self.inspect = re.compile(rf"{_alt(v.inspect)}\s+(?P<place>.+)", flags)
        self.capture = re.compile(
            rf"{_alt(v.capture)}\s+(?:(?:an?|one|the|some|another)\s+)?{img}s?\b(?P<rest>.*)", flags)
        self.photograph = re.compile(rf"{_alt(v.photograph)}\b(?P<rest>.*)", flags)
        self.report = re.compile(rf"{_alt(v.report)}\b(?P<rest>.*)", flags)
        self.send = re.compile(
            rf"{_alt(v.send)}\s+(?:(?:an?|the|one|my|our)\s+)?(?:{msg}|{img})s?\b(?P<rest>.*)", flags)
        self.send_someone = re.compile(
            rf"{_alt(v.send)}\s+(?:(?:the|my|our)\s+)?(?P<to>[\w\-]+)\s+(?:an?|the)\s+(?:{msg}|{img})s?\b.*", flags)
        self.notify = re.compile(rf"{_alt(v.notify)}\s+(?:(?:the|my|our)\s+)?(?P<to>[\w\-]+)\b.*", flags)
        self.say = re.compile(rf"{_alt(v.say)}\b\s*(?P<text>.*)", flags)
        self.semantic = re.compile(rf"{_alt(v.semantic)}\b.*", flags)
        self.continuation = re.compile(rf"{_alt(cfg.continuation_starters)}\b.*", flags)


@dataclass
class _Draft:
    kind: ObligationKind
    description: str
    params: dict[str, Any]
    evidence: tuple[EvidenceKind, ...]
    source: str
    depends_on: list[str] = field(default_factory=list)
    max_age_s: float | None = None


@dataclass
class _Compilation:
    """The state of one compile: obligations so far and what "there" refers to."""

    goal: str
    places: Mapping[str, Any]
    cfg: TemplateConfig
    quotes: list[str] = field(default_factory=list)
    patrols: list[tuple[str, re.Match[str]]] = field(default_factory=list)
    drafts: list[_Draft] = field(default_factory=list)
    recent_place: str | None = None
    last_at: dict[str, str] = field(default_factory=dict)

    def add(self, draft: _Draft) -> str:
        self.drafts.append(draft)
        return f"o{len(self.drafts)}"

    def field_ids(self) -> list[str]:
        return [f"o{i + 1}" for i, d in enumerate(self.drafts) if d.kind in _FIELD_KINDS]

    def restore(self, text: str, *, quoted: bool = True) -> str:
        def sub(m: re.Match[str]) -> str:
            if m.group(1) == "P":
                return self.patrols[int(m.group(2))][0]
            q = self.quotes[int(m.group(2))]
            return q if quoted else _QUOTE.sub(lambda qm: next(g for g in qm.groups() if g is not None), q)

        return _PLACEHOLDER.sub(sub, text)

    def refuse(self, message: str, **details: Any) -> ContractError:
        return ContractError(message, compiler="template", goal=self.goal, **details)

    def resolve(self, text: str, *, clause: str, alias: bool = False) -> str:
        """A known place's key for ``text`` (case, spaces/underscores and a leading article ignored)."""
        raw = self.restore(text, quoted=False).strip().strip(".!?").strip()
        name = _ARTICLE.sub("", raw)
        key = _place_key(name)
        index = {_place_key(k): k for k in self.places}
        if key in index:
            return index[key]
        if alias and key in {_place_key(a) for a in self.cfg.base_aliases} and self.cfg.base_place in self.places:
            return self.cfg.base_place
        raise self.refuse(f"unknown place {name!r} in {clause!r}", place=name, clause=clause,
                          known_places=sorted(self.places))

    def go(self, place: str, source: str, *, depends_on: list[str] | None = None) -> str:
        oid = self.add(_Draft(ObligationKind.AT_PLACE, f"The robot reached {place}.", {"place": place, "final": False},
                              _AT_PLACE_EVIDENCE, source, depends_on=list(depends_on or [])))
        self.recent_place = place
        self.last_at[place] = oid
        return oid

    def image(self, place: str | None, source: str) -> None:
        if place is not None and place != self.recent_place:
            self.go(place, source)
        params = {"place": place} if place is not None else {}
        where = f" at {place}" if place is not None else ""
        deps = [self.last_at[place]] if place is not None else []
        self.add(_Draft(ObligationKind.IMAGE_CAPTURED, f"An image was captured{where}.", params, _IMAGE_EVIDENCE,
                        source, depends_on=deps))


def _place_key(name: str) -> str:
    return re.sub(r"[\s\-_]+", "_", name.strip().lower())


class TemplateContractCompiler:
    """Rule/template compiler: splits the goal into clauses and maps each to obligations.

    Every clause must match a template; a clause that matches none, or names an
    unknown place, refuses the whole goal (``ContractError``) rather than
    dropping it.
    """

    name = "template"

    def __init__(self, config: TemplateConfig | Mapping[str, Any] | None = None) -> None:
        if config is None:
            config = TemplateConfig()
        elif not isinstance(config, TemplateConfig):
            try:
                config = TemplateConfig.model_validate(dict(config))
            except ValidationError as exc:
                raise UsageError("invalid contract template configuration", problems=_problems(exc)) from None
        self.config = config
        self._rx = _Patterns(config)

    @classmethod
    def from_yaml(cls, path: str | Path) -> TemplateContractCompiler:
        """Load a template configuration file (e.g. config/contract_templates.yaml)."""
        import yaml

        p = Path(path)
        try:
            raw = yaml.safe_load(p.read_text())
        except OSError as exc:
            raise UsageError(f"cannot read contract templates {p}: {exc.strerror}", path=str(p)) from None
        except yaml.YAMLError as exc:
            raise UsageError(f"contract templates {p} are not valid YAML: {exc}", path=str(p)) from None
        if not isinstance(raw, dict):
            raise UsageError(f"contract templates {p} must be a YAML mapping", path=str(p))
        return cls(raw)

    def compile(self, goal: str, *, mission_id: str, contract_id: str,
                places: Mapping[str, Pose2D]) -> CompletionContract:
        st = _Compilation(goal=goal, places=places, cfg=self.config)
        clauses = self._clauses(goal, st)
        if not clauses:
            raise st.refuse("the goal is empty")
        continues = False
        for clause in clauses:
            continues = self._clause(clause, st, continues)
        self._mark_final(st)
        for d in st.drafts:
            if d.max_age_s is None:
                d.max_age_s = self.config.evidence_max_age_s
        obligations = [
            Obligation(id=f"o{i + 1}", kind=d.kind, description=d.description, params=d.params,
                       evidence=d.evidence, max_age_s=d.max_age_s, depends_on=tuple(d.depends_on), source=d.source)
            for i, d in enumerate(st.drafts)
        ]
        return _build(goal, mission_id=mission_id, contract_id=contract_id, compiler=self.name,
                      obligations=obligations, places=places)

    def _clauses(self, goal: str, st: _Compilation) -> list[str]:
        """Split on , ; . and/then, keeping quoted text and "patrol A, B and C and return" whole."""

        def quote(m: re.Match[str]) -> str:
            st.quotes.append(m.group(0))
            return f"\x00Q{len(st.quotes) - 1}\x00"

        def patrol(m: re.Match[str]) -> str:
            st.patrols.append((st.restore(m.group(0)), m))
            return f"\x00P{len(st.patrols) - 1}\x00"

        text = _QUOTE.sub(quote, goal)
        text = self._rx.patrol_route.sub(patrol, text)
        text = self._rx.patrol_list.sub(patrol, text)
        out = []
        for piece in _SPLIT.split(text):
            piece = self._rx.fillers.sub("", piece.strip(" \t\n.!?")).strip()
            if piece:
                out.append(piece)
        return out

    def _clause(self, clause: str, st: _Compilation, continues: bool) -> bool:
        """Compile one clause; returns whether a following clause may continue it (a semantic question)."""
        rx, cfg = self._rx, self.config
        source = st.restore(clause)
        pm = _PLACEHOLDER.fullmatch(clause)
        if pm and pm.group(1) == "P":
            self._patrol(st, *st.patrols[int(pm.group(2))])
            return False
        if rx.patrol_word.match(clause):
            raise st.refuse(f"cannot compile {source!r}: a patrol must close the route "
                            "(\"patrol A, B and C and return\" or \"patrol the route A -> B\")", clause=source)
        if m := rx.ret.fullmatch(clause):
            target = m.group("place")
            place = st.resolve(target, clause=source, alias=True) if target else self._base(st, source)
            st.go(place, source, depends_on=st.field_ids())
            return False
        if m := (rx.navigate.fullmatch(clause) or rx.visit.fullmatch(clause)):
            st.go(st.resolve(m.group("place"), clause=source), source)
            return False
        if m := rx.inspect.fullmatch(clause):
            st.image(st.resolve(m.group("place"), clause=source), source)
            return False
        if m := rx.capture.fullmatch(clause):
            st.image(self._image_place(m.group("rest"), st, source), source)
            return False
        if m := rx.photograph.fullmatch(clause):
            st.image(self._image_place(m.group("rest"), st, source), source)
            return False
        to: str | None = None
        if m := (rx.report.fullmatch(clause) or rx.send.fullmatch(clause)):
            r = _RECIPIENT_TO.search(st.restore(m.group("rest"), quoted=False))
            to = r.group("to") if r else cfg.default_recipient
        elif m := (rx.send_someone.fullmatch(clause) or rx.notify.fullmatch(clause)):
            to = m.group("to")
        if to is not None:
            if to.lower() in cfg.self_recipients:
                to = cfg.default_recipient
            deps = [f"o{i + 1}" for i in range(len(st.drafts))]
            st.add(_Draft(ObligationKind.MESSAGE_DELIVERED, f"A message was delivered to {to}.", {"to": to},
                          _MESSAGE_EVIDENCE, source, depends_on=deps))
            return False
        if m := rx.say.fullmatch(clause):
            # Only quoted words are a sentence to say verbatim (the verifier checks the spoken text's
            # sha256 against it); "say hello to the operator" leaves the wording to the planner.
            raw = m.group("text").strip()
            text = st.restore(raw, quoted=False).strip()
            quoted = bool((q := _PLACEHOLDER.fullmatch(raw)) and q.group(1) == "Q")
            params = {"text": text} if quoted and text else {}
            desc = f"The robot said: {text}" if params else (
                f"The robot spoke ({text})." if text else "The robot spoke.")
            st.add(_Draft(ObligationKind.SPOKEN, desc, params, _SPEECH_EVIDENCE, source))
            return False
        if rx.semantic.fullmatch(clause):
            params: dict[str, Any] = {"question": source}
            deps = []
            if st.recent_place is not None:
                params["place"] = st.recent_place
                deps.append(st.last_at[st.recent_place])
            st.add(_Draft(ObligationKind.SEMANTIC, f"Semantic judgement: {source}", params, _SEMANTIC_EVIDENCE,
                          source, depends_on=deps))
            return True
        if continues and rx.continuation.fullmatch(clause):
            prev = st.drafts[-1]
            prev.params["question"] = f"{prev.params['question']} and {source}"
            prev.source = prev.params["question"]
            prev.description = f"Semantic judgement: {prev.source}"
            return True
        raise st.refuse(f"no contract template matches {source!r}", clause=source)

    def _base(self, st: _Compilation, source: str) -> str:
        if self.config.base_place not in st.places:
            raise st.refuse(f"unknown base place {self.config.base_place!r} for {source!r}",
                            place=self.config.base_place, clause=source, known_places=sorted(st.places))
        return self.config.base_place

    def _image_place(self, rest: str, st: _Compilation, source: str) -> str | None:
        """Where an image must be taken: "at/in <place>", "there", "of <place>", else the most recent place."""
        text = st.restore(rest, quoted=False).strip()
        low = text.lower()
        if not low:
            return st.recent_place
        if m := re.search(r"(?:^|\s)(?:at|in|inside)\s+(?P<p>.+)$", text, re.IGNORECASE):
            return st.resolve(m.group("p"), clause=source)
        if re.search(r"(?:^|\s)(?:there|here)$", low) or low in ("there", "here"):
            if st.recent_place is None:
                raise st.refuse(f"{source!r}: 'there' refers to no earlier place", clause=source)
            return st.recent_place
        obj = re.sub(r"^of\s+", "", text, flags=re.IGNORECASE)
        key = _place_key(_ARTICLE.sub("", obj))
        for k in st.places:
            if _place_key(k) == key:
                return k
        return st.recent_place

    def _patrol(self, st: _Compilation, source: str, m: re.Match[str]) -> None:
        names = [n for n in re.split(r"\s*(?:,|->|→)\s*|\s+and\s+", st.restore(m.group("wps"), quoted=False).strip(),
                                     flags=re.IGNORECASE) if n.strip()]
        waypoints = [st.resolve(n, clause=source) for n in names]
        if m.group("rplace"):
            start = st.resolve(m.group("rplace"), clause=source, alias=True)
        elif self.config.base_place in st.places:
            start = self.config.base_place
        else:
            start = "start"
        while waypoints and waypoints[0] == start:
            waypoints.pop(0)
        while waypoints and waypoints[-1] == start:
            waypoints.pop()
        if not waypoints:
            raise st.refuse(f"{source!r}: the route has no waypoint besides its start", clause=source)
        params = {"start": start, "waypoints": waypoints, "min_departure_m": self.config.min_departure_m}
        st.add(_Draft(ObligationKind.ROUTE_CLOSED, f"Closed route from {start} via {', '.join(waypoints)} "
                      f"and back to {start}.", params, _ROUTE_EVIDENCE, source))
        st.recent_place = None

    def _mark_final(self, st: _Compilation) -> None:
        """The last at_place is final, unless a route moves the robot on after it."""
        last = max((i for i, d in enumerate(st.drafts) if d.kind is ObligationKind.AT_PLACE), default=None)
        if last is None or any(d.kind is ObligationKind.ROUTE_CLOSED for d in st.drafts[last + 1:]):
            return
        d = st.drafts[last]
        d.params["final"] = True
        d.max_age_s = self.config.final_pose_max_age_s
        d.description = f"The robot is at {d.params['place']} when the mission is verified."


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
        return _build(goal, mission_id=mission_id, contract_id=contract_id, compiler=self.name,
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
- Use only place names from the known places, spelled exactly as given.
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
    """A contract compiled by a language model, in a clean context.

    The model sees only the system prompt, the goal and the known place names:
    no planner context, tools or history. Its JSON reply is validated whole;
    anything malformed refuses the goal. Errors raised by ``complete`` itself
    (transport, timeout) propagate unchanged.
    """

    def __init__(self, complete: CompleteFn, *, name: str = "llm") -> None:
        self.complete = complete
        self.name = name

    def messages(self, goal: str, *, places: Mapping[str, Any]) -> list[dict[str, Any]]:
        user = json.dumps({"goal": goal, "known_places": sorted(places)}, ensure_ascii=False)
        return [{"role": "system", "content": CONTRACT_SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def compile(self, goal: str, *, mission_id: str, contract_id: str,
                places: Mapping[str, Pose2D]) -> CompletionContract:
        reply = _parse_reply(self.complete(self.messages(goal, places=places)), _ContractReply, who=self.name)
        return _build(goal, mission_id=mission_id, contract_id=contract_id, compiler=self.name,
                      obligations=reply.obligations, places=places)


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


# --------------------------------------------------------------------------- rule coverage review

_MOVE_KINDS = frozenset({ObligationKind.AT_PLACE, ObligationKind.ROUTE_CLOSED})
_REVIEW_VERBS: dict[str, tuple[str, frozenset[ObligationKind]]] = {
    **dict.fromkeys(("go", "travel", "navigate", "drive", "walk", "head", "move", "return", "come"),
                    ("move", _MOVE_KINDS)),
    "visit": ("place", _MOVE_KINDS),
    "patrol": ("place", frozenset({ObligationKind.ROUTE_CLOSED})),
    "inspect": ("place", frozenset({ObligationKind.AT_PLACE, ObligationKind.IMAGE_CAPTURED, ObligationKind.SEMANTIC})),
    **dict.fromkeys(("capture", "photograph", "snap", "take"), ("capture", frozenset({ObligationKind.IMAGE_CAPTURED}))),
    **dict.fromkeys(("report", "send", "deliver", "notify", "tell", "inform", "alert", "message", "email"),
                    ("message", frozenset({ObligationKind.MESSAGE_DELIVERED}))),
    **dict.fromkeys(("say", "announce", "speak"), ("speech", frozenset({ObligationKind.SPOKEN}))),
    **dict.fromkeys(("identify", "find", "look", "check", "count", "search", "detect", "verify", "determine",
                     "locate"), ("semantic", frozenset({ObligationKind.SEMANTIC}))),
    **dict.fromkeys(("pick", "place", "put", "bring", "fetch", "carry", "open", "close", "push", "press",
                     "grab", "drop", "wait", "follow", "charge", "dock", "clean", "lift", "give", "turn", "lock",
                     "unlock"), ("other", frozenset())),
}
_NOUN_BEFORE = frozenset({"the", "a", "an", "this", "that", "these", "those", "each", "every", "my", "your", "our",
                          "its", "his", "her", "their", "at", "in", "on", "of", "from", "by", "near", "with", "for",
                          "is", "are", "was", "were", "be", "been", "being", "no", "any", "some"})
_MOVE_PARTICLES = frozenset({"to", "back", "over", "toward", "towards", "home", "around", "into", "through", "up",
                             "down", "along", "out", "inside", "outside"})
_STOP = frozenset({"the", "a", "an", "to", "of", "at", "in", "on", "there", "here", "it", "this", "that", "and",
                   "then", "back", "up", "down", "over", "for", "whether", "if", "is", "are", "with", "from", "into",
                   "me", "us", "please", "some", "any", "all", "one", "out", "around", "my", "our", "your"})
_IMAGE_WORDS = frozenset({"image", "images", "photo", "photos", "picture", "pictures", "photograph", "snapshot"})
_MESSAGE_WORDS = frozenset({"message", "messages", "report", "reports", "notification", "notifications", "update",
                            "updates", "summary", "summaries", "note", "notes", "email", "news"}) | _IMAGE_WORDS
"""What "deliver" must deliver to be a message; "deliver the package" is a physical delivery."""
_WORD = re.compile(r"[A-Za-z0-9]+")  # the same alphabet as _tokens: place names like p0 or room_101
_REVIEW_BOUNDARY = re.compile(r"[,;]|\.(?=\s|$)|\b(?:and|then)\b", re.IGNORECASE)


def _tokens(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


@dataclass(frozen=True)
class _Phrase:
    text: str
    verb: str
    role: str
    kinds: frozenset[ObligationKind]
    obj: frozenset[str]
    """Words that an obligation's parameters must share with the phrase (empty: any)."""


class RuleCoverageReviewer:
    """Independent coverage review: its own verb list, its own reading of the goal.

    Every action phrase (a verb from its list, up to the next clause boundary
    or verb) must be covered by some obligation: one whose ``source`` contains
    the verb and shares a word with the phrase's object, or one whose kind
    matches the verb and whose parameters name the phrase's object (the place,
    recipient or thing). Quoted text (what to say) is not read for actions.
    """

    def __init__(self, *, base_place: str = "dock", base_aliases: Iterable[str] = ("base", "home", "dock", "start"),
                 name: str = "rule") -> None:
        self.name = name
        self.base_place = base_place
        self.base_aliases = frozenset(a.lower() for a in base_aliases)

    def review(self, goal: str, obligations: Sequence[Obligation]) -> CoverageReport:
        phrases = self.phrases(goal)
        if not phrases:
            return CoverageReport(reviewer=self.name, ok=False, notes="found no action phrase in the goal to check")
        uncovered: list[str] = []
        for ph in phrases:
            if not any(self._covers(o, ph) for o in obligations) and ph.text not in uncovered:
                uncovered.append(ph.text)
        notes = f"{len(phrases)} action phrase(s), {len(uncovered)} uncovered"
        return CoverageReport(reviewer=self.name, ok=not uncovered, uncovered=tuple(uncovered), notes=notes)

    def phrases(self, goal: str) -> list[_Phrase]:
        """The goal's action phrases, in order."""
        masked = _QUOTE.sub(lambda m: " " * len(m.group(0)), goal)
        words = list(_WORD.finditer(masked))
        starts: list[tuple[int, str]] = []
        for i, w in enumerate(words):
            verb = w.group(0).lower()
            if verb not in _REVIEW_VERBS:
                continue
            prev = words[i - 1].group(0).lower() if i else ""
            if prev in _NOUN_BEFORE:
                continue
            if prev == "to" and i >= 2 and (words[i - 2].group(0).lower() in _REVIEW_VERBS
                                            or words[i - 2].group(0).lower() == "back"):
                continue
            starts.append((w.start(), verb))
        bounds = [m.start() for m in _REVIEW_BOUNDARY.finditer(masked)] + [len(masked)]
        out = []
        for k, (start, verb) in enumerate(starts):
            end = min([b for b in bounds if b > start] + ([starts[k + 1][0]] if k + 1 < len(starts) else []))
            text = goal[start:end].strip(" \t\n,;.!?")
            out.append(self._phrase(text, verb, masked[start:end]))
        return out

    def _phrase(self, text: str, verb: str, masked: str) -> _Phrase:
        role, kinds = _REVIEW_VERBS[verb]
        rest = [w.lower() for w in _WORD.findall(masked)][1:]
        content = [w for w in rest if w not in _STOP and w != verb]
        obj: set[str] = set(content)
        if role == "move" and rest and rest[0] not in _MOVE_PARTICLES:
            role, kinds = "other", frozenset()
        elif role == "move":
            obj = {t for w in content for t in (_tokens(self.base_place) if w in self.base_aliases else {w})}
        elif role == "capture":
            if verb == "take" and not _IMAGE_WORDS & set(rest):
                role, kinds = "other", frozenset()
            else:
                m = re.search(r"\b(?:at|in|inside)\s+(.+)$", masked, re.IGNORECASE)
                obj = _tokens(m.group(1)) - _STOP if m else set()
        elif role == "message" and verb == "deliver" and not _MESSAGE_WORDS & set(rest):
            role, kinds = "other", frozenset()
        elif role == "message":
            m = re.search(r"\bto\s+(?:(?:the|my|our)\s+)?([A-Za-z_]+)", masked)
            if verb not in ("report", "send", "deliver"):
                m = m or re.search(rf"{verb}\s+(?:(?:the|my|our)\s+)?([A-Za-z_]+)", masked, re.IGNORECASE)
            who = m.group(1).lower() if m else ""
            obj = set() if who in ("", "me", "us") else _tokens(who)
        elif role == "speech":
            obj = set()
        return _Phrase(text=text, verb=verb, role=role, kinds=kinds, obj=frozenset(obj))

    def _covers(self, o: Obligation, ph: _Phrase) -> bool:
        source = _tokens(o.source)
        if ph.verb in source and (not ph.obj or ph.obj & source):
            return True
        if o.kind not in ph.kinds:
            return False
        if not ph.obj:
            return True
        if ph.role == "semantic":
            grounding = _tokens(" ".join([*_strings(o.params), o.description]))
        else:
            keys = {"move": ("place", "start", "waypoints"), "place": ("place", "start", "waypoints"),
                    "capture": ("place",), "message": ("to",)}.get(ph.role, ())
            grounding = _tokens(" ".join(s for k in keys for s in _strings(o.params.get(k))))
        return bool(ph.obj & grounding)


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
