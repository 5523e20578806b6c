"""The goal compiler's vocabulary: verb classes, connectors, fillers and places.

Everything a word of a goal can mean is data (``config/goal_lexicon.yaml``,
validated by ``Lexicon``); this module turns it into indexes the parser
matches whole token sequences against, longest first. A single-word verb also
matches its inflections (``go``: goes, going, went, gone), so the lexicon lists
base forms only.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import UsageError

__all__ = ["Lexicon", "LexiconVerbs", "VERB_CLASSES", "PhraseIndex", "PlaceBook", "PlaceRef", "tokens_of", "inflections",
           "load_lexicon"]

VERB_CLASSES = ("navigate", "return", "image", "inspect", "speak", "message", "report", "route", "semantic",
                "unsupported")
"""Every verb belongs to one class; the class decides what a clause compiles to (docs/goal_compiler.md)."""

_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")


def tokens_of(phrase: str) -> tuple[str, ...]:
    """A phrase as the parser's tokens (lower case, words only; ``_`` and spaces alike)."""
    return tuple(_WORD.findall(phrase.lower().replace("’", "'").replace("_", " ")))


_IRREGULAR: dict[str, tuple[str, ...]] = {
    "go": ("goes", "going", "went", "gone"), "take": ("takes", "taking", "took", "taken"),
    "make": ("makes", "making", "made"), "get": ("gets", "getting", "got", "gotten"),
    "come": ("comes", "coming", "came"), "drive": ("drives", "driving", "drove", "driven"),
    "say": ("says", "saying", "said"), "tell": ("tells", "telling", "told"), "send": ("sends", "sending", "sent"),
    "swing": ("swings", "swinging", "swung"), "run": ("runs", "running", "ran"), "find": ("finds", "finding", "found"),
    "speak": ("speaks", "speaking", "spoke", "spoken"), "shoot": ("shoots", "shooting", "shot"),
    "let": ("lets", "letting"), "put": ("puts", "putting"), "hold": ("holds", "holding", "held"),
    "bring": ("brings", "bringing", "brought"), "write": ("writes", "writing", "wrote", "written"),
    "give": ("gives", "giving", "gave", "given"), "do": ("does", "doing", "did", "done"),
    "see": ("sees", "seeing", "saw", "seen"), "sit": ("sits", "sitting", "sat"), "lie": ("lies", "lying", "lay"),
    "sing": ("sings", "singing", "sang", "sung"), "throw": ("throws", "throwing", "threw", "thrown"),
    "leave": ("leaves", "leaving", "left"), "begin": ("begins", "beginning", "began", "begun"),
    "stand": ("stands", "standing", "stood"), "sleep": ("sleeps", "sleeping", "slept"),
    "read": ("reads", "reading"), "feed": ("feeds", "feeding", "fed"), "shut": ("shuts", "shutting"),
    "e-mail": ("e-mails", "e-mailing", "e-mailed"), "dm": ("dms", "dming", "dmed"),
}
_VOWELS = set("aeiou")


def inflections(word: str) -> set[str]:
    """``word`` and its inflected forms (over-generation is harmless: the forms are only matched)."""
    if word in _IRREGULAR:
        return {word, *_IRREGULAR[word]}
    out = {word}
    if not word.isalpha() or len(word) < 2:
        return out
    # -s
    if word.endswith(("s", "sh", "ch", "x", "z", "o")):
        out.add(word + "es")
    elif word.endswith("y") and word[-2] not in _VOWELS:
        out.add(word[:-1] + "ies")
    else:
        out.add(word + "s")
    # -ing / -ed
    stems = [word]
    if word.endswith("e") and not word.endswith(("ee", "ye", "oe")):
        stems = [word[:-1]]
    elif len(word) >= 3 and word[-1] not in _VOWELS | set("wxy") and word[-2] in _VOWELS and word[-3] not in _VOWELS:
        stems = [word, word + word[-1]]  # stop -> stopping, visit -> visiting, patrol -> patrolling
    for stem in stems:
        out.add(stem + "ing")
        if word.endswith("y") and word[-2] not in _VOWELS:
            out.add(word[:-1] + "ied")
        elif word.endswith("e"):
            out.add(word + "d")
        else:
            out.add(stem + "ed")
    return out


class _Cfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _phrases(v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list | tuple):
        raise ValueError("must be a list of phrases")
    out = tuple(" ".join(tokens_of(str(p))) for p in v)
    if not out or any(not p for p in out):
        raise ValueError("a phrase list must be non-empty and hold no empty phrase")
    return out


class LexiconVerbs(_Cfg):
    """Verb phrases by class. A phrase matches at the start of a clause; its first word also in inflected forms."""

    navigate: tuple[str, ...]
    """Go to a place: ``at_place``."""
    return_: tuple[str, ...] = Field(alias="return")
    """Go back: ``at_place`` at the named place, else ``start``."""
    image: tuple[str, ...]
    """Take an image: ``image_captured``."""
    inspect: tuple[str, ...]
    """Go to a place and take an image there."""
    speak: tuple[str, ...]
    """Say something aloud: ``spoken``."""
    message: tuple[str, ...]
    """Send a message to a recipient: ``message_delivered``."""
    report: tuple[str, ...]
    """Tell the user: ``message_delivered`` to the default recipient, by message or speech."""
    route: tuple[str, ...]
    """A closed route: ``route_closed``."""
    semantic: tuple[str, ...]
    """A question only a judgement can settle: ``semantic``."""
    unsupported: tuple[str, ...]
    """Actions the robot cannot be held to: the goal is refused."""

    @field_validator("*", mode="before")
    @classmethod
    def _norm(cls, v: Any) -> tuple[str, ...]:
        return _phrases(v)


_STOP_VERBS = ("stop at", "stop off at", "stop in at", "stop over at", "make a stop at", "make stops at",
               "make a quick stop at", "make a brief stop at", "make a short stop at", "pay a visit to",
               "call in at", "drop in at", "drop in on", "look in at")
_PASS_VERBS = ("pass", "pass by", "pass through", "pass via", "pass along", "go past", "drive past", "walk past",
               "head past", "move past", "travel past", "roll past", "go by way of", "go via", "travel via",
               "route via", "route through")
_VIA_WORDS = ("via", "by way of", "through", "past", "passing", "passing by", "passing through", "passing via",
              "going via", "going through", "going past", "going by way of", "driving through", "driving via",
              "driving past", "travelling through", "traveling through", "travelling via", "traveling via",
              "heading through", "heading via", "moving through", "stopping at", "stopping by", "stopping off at",
              "stopping in at", "stopping over at", "making a stop at", "making stops at", "with a stop at",
              "with stops at", "with a quick stop at", "with a stopover at", "with stopovers at",
              "by going through", "by going via", "by passing", "by passing through", "by way of going through")
_ON_THE_WAY = ("on the way", "on your way", "along the way", "en route", "on route", "on the route",
               "along the route", "on the way over", "on your way over", "on the way there", "on your way there",
               "as you go", "as you pass", "in passing")
_IN_ORDER = ("in order", "in that order", "in this order", "in the order given", "in the given order",
             "in the order listed", "in the listed order", "in the order i listed", "in the order i gave",
             "in the order named", "in the order above", "in the same order", "in sequence", "in turn",
             "one after another", "one after the other", "one by one", "sequentially")
_LIST_LEADS = ("the following", "the following places", "the following stops", "the following locations",
               "the following rooms", "the following waypoints", "the following points", "the following spots",
               "these places", "these stops", "these locations", "these rooms", "these waypoints", "these points",
               "these spots", "each of these places", "each of the following", "all of the following",
               "all of these places", "all these places", "these")


class Lexicon(_Cfg):
    """config/goal_lexicon.yaml. The defaults are the shipped file (``Lexicon.default()``)."""

    format_version: int = 1
    base_place: str = Field(default="dock", min_length=1)
    base_aliases: tuple[str, ...]
    start_phrases: tuple[str, ...]
    there_phrases: tuple[str, ...]
    default_recipient: str = Field(default="operator", min_length=1)
    self_recipients: tuple[str, ...]
    final_pose_max_age_s: float = Field(default=2.0, gt=0.0)
    evidence_max_age_s: float | None = Field(default=None, gt=0.0)
    min_departure_m: float = Field(default=1.0, ge=0.0)
    verbs: LexiconVerbs
    message_media: tuple[str, ...]
    message_nouns: tuple[str, ...]
    image_leads: tuple[str, ...]
    image_nouns: tuple[str, ...]
    route_back: tuple[str, ...]
    sequence_words: tuple[str, ...]
    before_words: tuple[str, ...]
    after_words: tuple[str, ...]
    any_order: tuple[str, ...]
    unverifiable_markers: tuple[str, ...]
    """Negations, conditions, counts and times: a goal the compiler refuses that has one is refused whatever a
    model makes of it (``LLMContractCompiler``)."""
    fillers: tuple[str, ...]
    # Waypoints (docs/goal_compiler.md, "Waypoints"). The shipped defaults below apply when a lexicon file
    # leaves these keys out; a site lexicon may replace any of them.
    stop_verbs: tuple[str, ...] = Field(default=_STOP_VERBS, validate_default=True)
    """Navigate verbs that name stops: each place is an ``at_place`` ("stop at A, B and C")."""
    pass_verbs: tuple[str, ...] = Field(default=_PASS_VERBS, validate_default=True)
    """Navigate verbs whose places are points on the way: a destination must follow ("pass A on the way to C")."""
    via_words: tuple[str, ...] = Field(default=_VIA_WORDS, validate_default=True)
    """Words that introduce points on the way, before or after the destination ("go to C via A",
    "go via A to C", "drive to C, stopping at A"). A bare ``through`` with no destination after it names the
    destination itself ("go through the hallway")."""
    on_the_way: tuple[str, ...] = Field(default=_ON_THE_WAY, validate_default=True)
    """"A on the way": A is a stop before the destination named next to it; with ``to`` / ``back to``
    after it ("on your way to C") it introduces that destination."""
    in_order: tuple[str, ...] = Field(default=_IN_ORDER, validate_default=True)
    """Phrases that only affirm the stated order ("visit A, B and C in that order"): not clauses."""
    list_leads: tuple[str, ...] = Field(default=_LIST_LEADS, validate_default=True)
    """What announces a list of places after a navigate verb ("visit the following places: A, B, C")."""
    contrast_words: tuple[str, ...] = Field(default=("but", "but also", "but then"), validate_default=True)
    """Connectors like ``and`` ("go to the lobby, but stop at the lab on the way"); ``but first`` puts the
    step after it first."""

    @field_validator("base_aliases", "start_phrases", "there_phrases", "self_recipients", "message_media",
                     "message_nouns", "image_leads", "image_nouns", "route_back", "sequence_words", "before_words", "after_words",
                     "any_order", "unverifiable_markers", "fillers", "stop_verbs", "pass_verbs", "via_words",
                     "on_the_way", "in_order", "list_leads", "contrast_words", mode="before")
    @classmethod
    def _norm(cls, v: Any) -> tuple[str, ...]:
        return _phrases(v)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], *, source: str = "goal lexicon") -> Lexicon:
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as exc:
            problems = [f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}"
                        for e in exc.errors(include_url=False)]
            raise UsageError(f"invalid {source}: {problems[0]}", problems=problems) from None

    @classmethod
    def default(cls) -> Lexicon:
        """The shipped lexicon (config/goal_lexicon.yaml)."""
        return load_lexicon(DEFAULT_LEXICON)

    def verb_phrases(self) -> list[tuple[str, str]]:
        """Every (class, phrase), in the order a tie between equally long matches is decided."""
        v = self.verbs
        navigate = (*v.navigate, *self.stop_verbs, *self.pass_verbs)
        return [(cls, phrase) for cls, phrases in (
            ("report", v.report), ("return", v.return_), ("route", v.route), ("inspect", v.inspect), ("image", v.image),
            ("speak", v.speak), ("semantic", v.semantic), ("message", v.message), ("navigate", navigate),
            ("unsupported", v.unsupported)) for phrase in phrases]

    def supported_verbs(self) -> dict[str, tuple[str, ...]]:
        """A few verbs per supported class, for refusals that help."""
        v = self.verbs
        return {"navigate": v.navigate[:6], "return": v.return_[:3], "image": v.image[:3], "inspect": v.inspect[:2],
                "speak": v.speak[:3], "message": v.message[:6], "report": v.report[:3], "route": v.route[:5],
                "semantic": v.semantic[:5]}


DEFAULT_LEXICON = Path(__file__).resolve().parents[3] / "config" / "goal_lexicon.yaml"
"""The lexicon in a source checkout (installed packages: share/robot_harness/config/goal_lexicon.yaml)."""

_CACHE: dict[tuple[str, float], Lexicon] = {}


def load_lexicon(path: str | Path) -> Lexicon:
    """A lexicon file, validated (``UsageError`` names the file and the first problem)."""
    import yaml

    p = Path(path).expanduser()
    try:
        key = (str(p.resolve()), p.stat().st_mtime)
        if key in _CACHE:
            return _CACHE[key]
        raw = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read goal lexicon {p}: {exc.strerror}", path=str(p)) from None
    except yaml.YAMLError as exc:
        raise UsageError(f"goal lexicon {p} is not valid YAML: {exc}", path=str(p)) from None
    if not isinstance(raw, dict):
        raise UsageError(f"goal lexicon {p} must be a YAML mapping", path=str(p))
    lex = Lexicon.from_mapping(raw, source=f"goal lexicon {p}")
    _CACHE[key] = lex
    return lex


class PhraseIndex:
    """Token sequences to values, matched longest first at a position."""

    def __init__(self) -> None:
        self._by_first: dict[str, list[tuple[tuple[str, ...], Any]]] = {}

    def add(self, tokens: Sequence[str], value: Any) -> None:
        toks = tuple(tokens)
        if not toks:
            return
        bucket = self._by_first.setdefault(toks[0], [])
        if all(t != toks for t, _ in bucket):
            bucket.append((toks, value))
            bucket.sort(key=lambda e: -len(e[0]))

    def add_phrase(self, phrase: str, value: Any, *, inflect: bool = False) -> None:
        toks = tokens_of(phrase)
        if not toks:
            return
        firsts = inflections(toks[0]) if inflect else {toks[0]}
        for first in firsts:
            self.add((first, *toks[1:]), value)

    def match(self, tokens: Sequence[str], i: int) -> tuple[int, Any] | None:
        """(length, value) of the longest phrase starting at ``tokens[i]``, or None."""
        if i >= len(tokens):
            return None
        for toks, value in self._by_first.get(tokens[i], ()):
            n = len(toks)
            if tuple(tokens[i:i + n]) == toks:
                return n, value
        return None

    def find(self, tokens: Sequence[str], start: int = 0) -> tuple[int, int, Any] | None:
        """The first match at or after ``start``: (position, length, value)."""
        for i in range(start, len(tokens)):
            m = self.match(tokens, i)
            if m is not None:
                return i, m[0], m[1]
        return None


@dataclass(frozen=True)
class PlaceRef:
    """What a place phrase refers to: a known place, the base, the start, or "there"."""

    kind: str
    """place | base | start | there"""
    name: str = ""


ARTICLES = frozenset({"the", "a", "an", "our", "my", "your", "this", "that"})


class PlaceBook:
    """The mission's known places and what people call them, as one phrase index."""

    def __init__(self, places: Iterable[str], *, aliases: Mapping[str, Sequence[str]] | None = None,
                 lexicon: Lexicon) -> None:
        self.names = tuple(sorted(places))
        self.base_place = lexicon.base_place
        self.index = PhraseIndex()
        self._spellings: dict[str, str] = {}
        for name in self.names:
            self._add(name, PlaceRef("place", name))
            for alias in (aliases or {}).get(name, ()):
                self._add(alias, PlaceRef("place", name))
        for phrase in lexicon.base_aliases:
            self._add(phrase, PlaceRef("base"), plural=False)
        for phrase in lexicon.start_phrases:
            self._add(phrase, PlaceRef("start"), plural=False)
        for phrase in lexicon.there_phrases:
            self._add(phrase, PlaceRef("there"), plural=False)

    def _add(self, phrase: str, ref: PlaceRef, *, plural: bool = True) -> None:
        toks = tokens_of(phrase)
        while toks and toks[0] in ARTICLES and len(toks) > 1 and ref.kind == "place":
            toks = toks[1:]
        if not toks:
            return
        self.index.add(toks, ref)
        if ref.kind == "place":
            self._spellings.setdefault(" ".join(toks), ref.name)
        if plural and toks[-1][-1:] != "s":
            self.index.add((*toks[:-1], toks[-1] + "s"), ref)

    def match(self, tokens: Sequence[str], i: int) -> tuple[int, PlaceRef] | None:
        """A place phrase at ``tokens[i]`` (leading articles skipped): (tokens consumed, ref)."""
        j = i
        while j < len(tokens) and tokens[j] in ARTICLES:
            j += 1
        m = self.index.match(tokens, j)
        if m is None and j > i:
            m = self.index.match(tokens, i)  # an alias that starts with an article ("the bay")
            if m is not None:
                return m[0], m[1]
        if m is None:
            return None
        return (j - i) + m[0], m[1]

    def nearest(self, phrase: str, n: int = 3, *, cutoff: float = 0.6) -> list[str]:
        """Known places whose name or alias is closest to ``phrase`` (for "did you mean ...?")."""
        import difflib

        key = " ".join(t for t in tokens_of(phrase) if t not in ARTICLES)
        hits = difflib.get_close_matches(key, list(self._spellings), n=n * 2, cutoff=cutoff)
        out: list[str] = []
        for h in hits:
            name = self._spellings[h]
            if name not in out:
                out.append(name)
        if not out and cutoff <= 0.6:
            words = set(key.split())
            out = [self._spellings[s] for s in self._spellings if words & set(s.split())]
        return list(dict.fromkeys(out))[:n]
