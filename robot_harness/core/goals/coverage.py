"""The rule-based coverage review: every action phrase of the goal must be covered.

It re-reads the goal with a clean context: the goal's words and the
contract's obligations (kinds and parameters), never the compiler's working
or the obligations' ``source`` (a compiler, or a model, could claim any
words there). It shares the lexicon's vocabulary with the compiler but not
its algorithm: it spots verb phrases anywhere in the goal (not clause by
clause) and asks of each whether some obligation of a fitting kind is
grounded in the phrase's object: the place (by name or alias), the recipient,
the thing a question is about. A dropped clause, a merged step ("go to A then
B" as one obligation at B), a message to the wrong recipient, an image at
another place: each leaves a phrase uncovered.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..completion import CoverageReport, Obligation, ObligationKind, eligible_skills
from .lexicon import Lexicon, PhraseIndex, inflections, tokens_of
from .parse import QUOTE_PATTERN

__all__ = ["RuleCoverageReviewer"]

_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*|[,;:.!?]|->|→", re.IGNORECASE)
_BOUNDARY = frozenset({",", ";", ":", ".", "!", "?", "->", "→", "and", "then"})
_NOUN_BEFORE = frozenset({"the", "a", "an", "this", "that", "these", "those", "each", "every", "my", "your", "our",
                          "its", "his", "her", "their", "of", "is", "are", "was", "were", "be", "been", "being", "no",
                          "any", "some", "quick", "short", "full", "following", "brief"})
_STOP = frozenset({"the", "a", "an", "to", "of", "at", "in", "on", "there", "here", "it", "this", "that", "and",
                   "then", "back", "up", "down", "over", "for", "whether", "if", "is", "are", "with", "from", "into",
                   "me", "us", "please", "some", "any", "all", "one", "out", "around", "my", "our", "your", "by",
                   "through", "via", "quick", "again", "when", "you", "get", "thanks", "now", "know", "round",
                   "trip", "lap", "loop", "circuit", "way", "make", "do", "route", "rounds", "tour", "patrol",
                   # waypoints: what joins the places of a route, not a place ("go to C via A", "stop at A, B
                   # and C in that order", "visit the following places: ...")
                   "past", "passing", "stop", "stops", "stopping", "stopover", "along", "en", "going", "order",
                   "sequence", "following", "these", "those", "places", "locations", "rooms", "waypoints", "points",
                   "spots", "other", "another", "turn", "given", "listed", "named", "above", "same"})
_KINDS = {
    "navigate": frozenset({ObligationKind.AT_PLACE, ObligationKind.ROUTE_CLOSED}),
    "return": frozenset({ObligationKind.AT_PLACE, ObligationKind.ROUTE_CLOSED}),
    "route": frozenset({ObligationKind.ROUTE_CLOSED}),
    "inspect": frozenset({ObligationKind.AT_PLACE, ObligationKind.IMAGE_CAPTURED, ObligationKind.SEMANTIC}),
    "image": frozenset({ObligationKind.IMAGE_CAPTURED, ObligationKind.SEMANTIC}),
    "speak": frozenset({ObligationKind.SPOKEN}),
    "message": frozenset({ObligationKind.MESSAGE_DELIVERED}),
    "report": frozenset({ObligationKind.MESSAGE_DELIVERED}),
    "semantic": frozenset({ObligationKind.SEMANTIC}),
    "unsupported": frozenset(),
}
_GROUNDING_KEYS = {"navigate": ("place", "start", "waypoints"), "return": ("place", "start", "waypoints"),
                   "route": ("place", "start", "waypoints"), "inspect": ("place",), "image": ("place",),
                   "message": ("to",), "report": ("to",)}


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
    cls: str
    obj: frozenset[str]
    """Words an obligation's parameters must share with the phrase (empty: any obligation of a fitting kind)."""


class RuleCoverageReviewer:
    """Independent coverage review over the lexicon's verbs (see the module docstring)."""

    def __init__(self, *, lexicon: Lexicon | None = None, aliases: Mapping[str, Sequence[str]] | None = None,
                 base_place: str | None = None, base_aliases: Iterable[str] | None = None,
                 name: str = "rule") -> None:
        self.name = name
        self.lexicon = lex = lexicon if lexicon is not None else Lexicon.default()
        self.base_place = base_place or lex.base_place
        self._base = {w for p in (base_aliases if base_aliases is not None else lex.base_aliases) for w in tokens_of(p)}
        self._start = {w for p in lex.start_phrases for w in tokens_of(p)}
        self._self = {" ".join(tokens_of(p)) for p in lex.self_recipients}
        self._aliases = {name: {w for a in names for w in tokens_of(a)} for name, names in (aliases or {}).items()}
        self._verbs = PhraseIndex()
        for cls, phrase in lex.verb_phrases():
            self._verbs.add_phrase(phrase, cls, inflect=True)
        self._image_leads = {f for lead in lex.image_leads for f in inflections(lead)}
        self._image_nouns = frozenset(lex.image_nouns)
        self._let = inflections("let")
        self._nouns = {w for p in lex.message_nouns for w in tokens_of(p)}
        self._light = {f for w in ("do", "make", "take", "run", "complete", "perform") for f in inflections(w)}
        self._fillers = PhraseIndex()
        for phrase in lex.fillers:
            self._fillers.add_phrase(phrase, True)
        self._via = PhraseIndex()  # what makes the places after it points on the way
        for phrase in lex.via_words:
            self._via.add_phrase(phrase, True)
        for phrase in lex.pass_verbs:
            self._via.add_phrase(phrase, True, inflect=True)
        self._way_to = PhraseIndex()
        for phrase in lex.on_the_way:
            self._way_to.add_phrase(f"{phrase} to", True)
            self._way_to.add_phrase(f"{phrase} back to", True)

    def review(self, goal: str, obligations: Sequence[Obligation]) -> CoverageReport:
        named = {" ".join(tokens_of(s)) for o in obligations for k in ("place", "start", "waypoints")
                 for s in _strings(o.params.get(k))}
        phrases = self.phrases(goal, places=named)
        if not phrases:
            return CoverageReport(reviewer=self.name, ok=False, notes="found no action phrase in the goal to check")
        uncovered: list[str] = []
        for ph in phrases:
            if not any(self._covers(o, ph) for o in obligations) and ph.text not in uncovered:
                uncovered.append(ph.text)
        notes = f"{len(phrases)} action phrase(s), {len(uncovered)} uncovered"
        return CoverageReport(reviewer=self.name, ok=not uncovered, uncovered=tuple(uncovered), notes=notes)

    def phrases(self, goal: str, *, places: Iterable[str] = ()) -> list[_Phrase]:
        """The goal's action phrases, in order (quoted text is never read for actions).

        A verb that is (the start of) a place name right after a preposition is the place: "go to spot"."""
        named = {tuple(p.split()) for p in places}
        masked = QUOTE_PATTERN.sub(lambda m: " " * len(m.group(0)), goal.replace("’", "'") if "‘" not in goal else goal)
        found = [(m.group(0).lower(), m.start(), m.end()) for m in _WORD.finditer(masked)]
        words = [w for w, _, _ in found]
        starts: list[tuple[int, int, str]] = []  # (index, length, class)
        i = 0
        while i < len(words):
            hit = self._verb_at(words, i)
            if hit is None or (i and words[i - 1] in _NOUN_BEFORE and hit[1] != "report") or (
                    i and words[i - 1] in ("to", "at", "in", "by", "from", "via", "through", "past", "of")
                    and any(tuple(words[i:i + len(p)]) == p for p in named)):
                i += 1
                continue
            starts.append((i, hit[0], hit[1]))
            i += hit[0]
            if hit[1] in ("message", "report", "semantic", "speak"):
                # what follows is content (who, what, whether): no verb of its own up to the next boundary
                while i < len(words) and words[i] not in _BOUNDARY:
                    i += 1
        out: list[_Phrase] = []
        for k, (i, n, cls) in enumerate(starts):
            end = starts[k + 1][0] if k + 1 < len(starts) else len(words)
            j = i + n
            while j < end and words[j] not in _BOUNDARY:
                j += 1
            if cls in ("route", "semantic"):  # a list of waypoints or a question may run on past "and"
                j = end
                while j > i + n and words[j - 1] in _BOUNDARY:
                    j -= 1
            if cls in ("navigate", "return"):
                # "go via A and B to C", "go to C via A": C and A each need their own obligation (a dropped
                # waypoint is uncovered); a via list runs on past "and" to the end of its sentence
                e = i + n
                while e < end and words[e] not in (".", "!", "?", ";"):
                    e += 1
                if any(self._via.match(words, x) or self._way_to.match(words, x) for x in range(i, e)):
                    j = e
                    while j > i + n and words[j - 1] in _BOUNDARY:
                        j -= 1
                cuts = self._legs(words, i, i + n, j)
                for a, b in zip([i, *cuts], [*cuts, j]):
                    text = goal[found[a][1]:found[b - 1][2]].strip(" \t\n,;.!?")
                    out.append(self._phrase(text, cls, [w for w in words[(i + n if a == i else a):b]
                                                        if w not in _BOUNDARY]))
                continue
            text = goal[found[i][1]:found[j - 1][2] if j > i else found[i][2]].strip(" \t\n,;.!?")
            obj_words = [w for w in words[i + n:j] if w not in _BOUNDARY]
            if cls == "message" and words[i] in self._let:
                obj_words = ["to", *words[i + 1:i + n - 1]]  # "let <recipient> know"
            out.append(self._phrase(text, cls, obj_words))
        return out

    def _legs(self, words: list[str], i: int, start: int, j: int) -> list[int]:
        """Where a motion phrase (verb at ``i``, its places from ``start`` to ``j``) turns to another place: a
        via word ("via", "by way of", "past"), "on the way to", and the "to" that ends a via list ("go via A to
        C", "pass A to C")."""
        cuts: list[int] = []
        via = False
        k = i
        while k < j:
            m = self._via.match(words, k) or self._way_to.match(words, k)
            if m is not None:
                if k > start:
                    cuts.append(k)
                via = self._via.match(words, k) is not None
                k += m[0]
                continue
            if via and words[k] in ("to", "into", "towards", "toward"):
                cuts.append(k)
                via = False
            k += 1
        return cuts

    def _verb_at(self, words: list[str], i: int) -> tuple[int, str] | None:
        if words[i] in self._let and "know" in words[i + 1:i + 6]:
            return words.index("know", i + 1) - i + 1, "message"
        if words[i] in self._light:
            j = i + 1
            while j < len(words) and words[j] in ("a", "an", "the", "quick", "full", "short", "one", "another"):
                j += 1
            m = self._verbs.match(words, j)
            if m is not None and m[1] == "route":
                return j - i + m[0], "route"
        if words[i] in self._image_leads:
            for j in range(i + 1, min(len(words), i + 6)):
                if words[j] in self._image_nouns:
                    return j - i + 1, "image"
                if words[j] in _BOUNDARY:
                    break
        m = self._verbs.match(words, i)
        return (m[0], m[1]) if m is not None else None

    def _phrase(self, text: str, cls: str, rest: list[str]) -> _Phrase:
        content = [w for w in rest if w not in _STOP]
        obj: set[str] = set()
        if cls in ("navigate", "return", "route", "inspect"):
            for w in content:
                if w in self._base:
                    obj |= _tokens(self.base_place)
                elif w in self._start:
                    obj.add("start")
                else:
                    obj.add(w)
        elif cls == "image":
            if "at" in rest or "in" in rest or "of" in rest:
                k = max(rest.index(p) for p in ("at", "in", "of") if p in rest)
                obj = {w for w in rest[k + 1:] if w not in _STOP}
        elif cls in ("message", "report"):
            who = " ".join(w for w in rest if w not in ("to", "the", "my", "our"))
            if any(who.startswith(s) for s in self._self) or not who:
                obj = set()
            elif cls == "message":
                after = rest[rest.index("to") + 1:] if "to" in rest else rest
                names = [w for w in after if w not in ("the", "my", "our", "a", "an", "your")
                         and w not in self._nouns][:1]
                obj = set(names) - _STOP
            elif "to" in rest:
                obj = {w for w in rest[rest.index("to") + 1:][:2] if w not in _STOP}
        elif cls == "semantic":
            obj = set(content)
        return _Phrase(text=text, cls=cls, obj=frozenset(obj))

    def _grounding(self, o: Obligation, keys: tuple[str, ...]) -> set[str]:
        out: set[str] = set()
        for s in (s for k in keys for s in _strings(o.params.get(k))):
            out |= _tokens(s)
            out |= self._aliases.get(s, set())
        return out

    def _covers(self, o: Obligation, ph: _Phrase) -> bool:
        kinds = _KINDS[ph.cls]
        if ph.cls == "report" and o.kind is ObligationKind.SPOKEN:
            return True  # a spoken report
        if o.kind not in kinds:
            return False
        if ph.cls in ("message", "report") and not ph.obj and "to" in o.params:
            to = " ".join(tokens_of(str(o.params["to"])))
            return to in self._self or "speak" in eligible_skills(o) or to == " ".join(
                tokens_of(self.lexicon.default_recipient))
        if not ph.obj:
            return True
        if ph.cls == "semantic" or o.kind is ObligationKind.SEMANTIC:
            grounding = _tokens(" ".join([*_strings(o.params), o.description]))
        else:
            grounding = self._grounding(o, _GROUNDING_KEYS.get(ph.cls, ()))
        return bool(ph.obj & grounding)
