"""``GoalCompiler``: parse a goal, bind every phrase, emit the contract.

Three stages, each a pure function of the goal, the places and the lexicon:

1. **Clauses** (``parse``): quotes out, tokens, clauses cut at punctuation and
   connectors, each with its connector and sentence.
2. **Intents**: each clause's verb (longest lexicon match at its start, or the
   previous clause's verb when it has none of its own: "drive to A, then to B")
   and its arguments: places (unresolved references: a place, the base, the
   start, "there"), recipients, text. A clause the lexicon cannot read refuses
   the goal; nothing is dropped.
3. **Steps**: intents put in the goal's order ("Y after X" puts X first), places
   resolved in that order ("there" is the last place named; an image or a
   speech binds the place the robot is at), implicit navigations added,
   ``depends_on`` chained, the last place made final.

A motion clause is read as a *leg* (``_Leg``): points on the way and a
destination, in any of the orders people say them ("go via A to C", "go to C
via A", "pass A on the way to C", "drive to C, stopping at A"); the places
become one navigation in visiting order. A via list after its destination runs
on over weak links ("go to C via A, B and D": A, B, D, C).

The rules are written down in docs/goal_compiler.md; the gold set in
test/contracts_gold/ holds the compiler to them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..completion import DEFAULT_EVIDENCE, CompletionContract, EvidenceKind, ObligationKind
from ..records import Pose2D
from .lexicon import ARTICLES, Lexicon, PhraseIndex, PlaceBook, PlaceRef, inflections, tokens_of
from .parse import BACK, Clause, Segmenter, Tok, restore, tokenize

__all__ = ["GoalCompiler", "START_PLACE", "REFUSAL_REASONS"]

START_PLACE = "start"
"""The reserved place name for where the robot was when the mission was admitted (the engine fills it in)."""

REFUSAL_REASONS = ("unknown_place", "unsupported_action", "not_understood")

_NAV_PARTICLES = (("over", "to"), ("up", "to"), ("down", "to"), ("across", "to"), ("back", "to"), ("on", "to"),
                  ("round", "to"), ("around", "to"), ("over",), ("to",), ("into",), ("inside",), ("towards",),
                  ("toward",), ("by",), ("at",), ("onto",), ("in",), ("through",), ("as", "far", "as"), ("all", "the",
                  "way", "to"), ("the", "way", "to"), ("way", "to"))
_RETURN_PARTICLES = (("back", "to"), ("back",), ("to",), ("over", "to"), ("into",), ("towards",), ("toward",),
                     ("again",))
_ROUTE_PARTICLES = (("of",), ("around",), ("round",), ("through",), ("to",), ("via",), ("past",), ("between",),
                    ("along",), ("across",), ("at",), ("in",), ("by",), ("the", "route"), ("route",), ("the", "loop"),
                    ("the", "circuit"), ("visiting",), ("covering",), ("including",), ("from",))
_DEST_PARTICLES = (("to",), ("on", "to"), ("onto",), ("over", "to"), ("up", "to"), ("down", "to"), ("across", "to"),
                   ("into",), ("towards",), ("toward",), ("as", "far", "as"), ("all", "the", "way", "to"),
                   ("the", "way", "to"), ("back", "to"), ("ending", "at"), ("ending", "up", "at"), ("ending", "in"),
                   ("finishing", "at"), ("then", "to"), ("then", "on", "to"), ("onward", "to"), ("onwards", "to"),
                   ("straight", "to"), ("and", "on", "to"), ("and", "then", "to"))
"""What introduces the destination after a via list ("via A to C", "past A and on to C")."""
_FROM = (("from",), ("starting", "at"), ("starting", "from"), ("beginning", "at"), ("leaving", "from"))
_WEAK_LINKS = frozenset({",", "and", ", and", "plus", ", plus", "as well as", ", as well as"})
"""What joins the items of one list ("via A, B and D"), as opposed to steps ("via A, then D")."""
_IMAGE_PLACE_PARTICLES = (("of",), ("at",), ("in",), ("inside",), ("from",), ("over",), ("near",), ("by",),
                          ("outside",), ("showing",))
_LIGHT_VERBS = (("do",), ("make",), ("go", "on"), ("take",), ("run",), ("complete",), ("perform",), ("carry", "out"),
                ("start",), ("begin",))
_DETERMINERS = frozenset({"a", "an", "the", "one", "another", "quick", "full", "short", "single", "complete",
                          "little", "brief", "final", "some", "couple", "of", "few", "two", "three", "several",
                          "new", "fresh", "clear", "good", "nice", "2", "3"})
_NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
            "couple": 2, "pair": 2, **{str(n): n for n in range(2, 21)}}
_SPEECH_TAILS = frozenset({"aloud", "loudly", "clearly", "please"})
_MESSAGE_DETERMINERS = frozenset({"a", "an", "the", "some", "any", "my", "our", "this", "quick", "short", "brief",
                                  "status", "final", "little", "new"})
_POSSESSIVES = frozenset({"your", "his", "her", "their", "its"})
_COPULAS = frozenset({"is", "are", "was", "were", "will", "has", "have", "had", "can", "can't", "cannot", "should",
                      "must", "isn't", "aren't", "wasn't", "won't", "needs", "need", "looks", "seems", "it's", "i'm",
                      "we're", "they're", "you're", "there's", "am"})
_SUBJECT_STARTS = frozenset({"the", "a", "an", "this", "that", "these", "those", "we", "i", "it", "he", "she", "they",
                             "you", "everything", "everyone", "everybody", "nobody", "nothing", "all", "our", "my",
                             "your", "his", "her", "their", "its", "there", "it's", "i'm", "we're", "they're",
                             "you're", "there's", "lunch", "dinner", "breakfast", "coffee"})
_QUESTION_STARTS = frozenset({"whether", "if", "how", "what", "where", "which", "who", "why"})
_OCCASION_STARTS = frozenset({"when", "once", "after", "as"})
_PAYLOAD_STARTS = frozenset({"that", "saying", "with", ":", *_QUESTION_STARTS, *_OCCASION_STARTS})
_NOT_STATEMENTS = frozenset({"only", "if", "unless", "except", "not", "never", "in", "every", "each", "twice", "again",
                             "later", "tomorrow", "today", "at", "by", "before", "after", "until", "without"})
_REPORT_TOPICS = frozenset({"position", "location", "status", "progress", "battery", "level", "arrival", "findings",
                            "results", "result", "state", "situation", "number", "count", "answer", "pose", "back",
                            "in", "status report", "update", "whereabouts"})
_NOT_NAMES = frozenset({"in", "at", "on", "by", "to", "for", "with", "from", "of", "not", "and", "or", "every", "each",
                        "all", "when", "once", "again", "twice", "now", "later", "today", "tomorrow", "minutes",
                        "minute", "hours", "hour", "seconds", "asap", "only", "if", "then", "also", "it", "them",
                        "this", "that", "there", "here", "me", "us", "you", "anyone", "everyone", "everybody",
                        "somebody", "someone", "nobody"})


def _starts(words: Sequence[str], i: int, options: Sequence[tuple[str, ...]]) -> int:
    """Length of the longest of ``options`` at ``words[i]`` (0: none)."""
    best = 0
    for opt in options:
        n = len(opt)
        if n > best and tuple(words[i:i + n]) == opt:
            best = n
    return best


@dataclass
class _Intent:
    """One clause read: what it asks for, with references still unresolved."""

    cls: str
    source: str
    group: int
    places: list[PlaceRef] = field(default_factory=list)
    """navigate/return/inspect: the targets; image/speak: where (empty: where the robot is); route: waypoints."""
    text: str | None = None
    to: str | None = None
    eligible: tuple[str, ...] = ()
    start: PlaceRef | None = None
    question: str = ""
    explicit_place: bool = False
    subject: str = ""
    """image: what it must show ("of the whiteboard"), judged semantically."""
    attach: str = ""
    """message: carries images: "last" ("send it to me") or "all" since the last message ("send them")."""
    ask: str = ""
    """message: a question to check before it is sent ("tell me whether the door is open")."""
    ask_place: PlaceRef | None = None
    """semantic (or a message's ``ask``): the place the question names ("in the lobby")."""
    count: int = 1
    """image: how many distinct images ("take three photos"; a plural with no number: at least two)."""
    via_open: str = ""
    """navigate: the places so far are points on the way and the destination is still to come ("go via A");
    "through": with none, they are the destinations themselves ("go through the hallway")."""
    via_at: int | None = None
    """navigate: where a via list that follows its destination goes on ("go to C via A, and B": before C)."""
    on_way: bool = False
    """navigate: stops on the way to the destination of the motion before it ("... and stop at A on the way")."""
    unordered: bool = False
    """navigate: the points on the way (all places but the last) in any order ("go to C via A and B in any
    order")."""


@dataclass
class _Leg:
    """One motion clause read: the places on the way, then the destination."""

    via: list[PlaceRef] = field(default_factory=list)
    dest: PlaceRef | None = None
    lead: str = ""
    """"via" / "through": the clause opened with a via word or a pass verb (its places are on the way)."""
    via_after: bool = False
    """The via list followed the destination ("to C via A"): a list after the clause goes on before C."""
    bare: bool = False
    """The destination is a place with no particle ("..., the kitchen"): a via list may take it."""
    back: bool = False
    on_way: bool = False


@dataclass
class _Group:
    """A clause with a verb of its own and the verb-less clauses that continue it."""

    gid: int
    sentence: int
    connector: str
    first_in_sentence: bool
    intents: list[_Intent] = field(default_factory=list)
    any_order: bool = False
    position: str = ""
    """"first" / "last": the goal said where this step goes ("go to the lab last")."""


class _Refusal(Exception):
    def __init__(self, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.details = details


@dataclass
class _Draft:
    kind: ObligationKind
    params: dict[str, Any]
    source: str
    description: str
    depends_on: list[int] = field(default_factory=list)
    eligible: tuple[str, ...] = ()


class GoalCompiler:
    """Compiles natural-language goals with one lexicon; see the module docstring.

    Guarantees: every clause of the goal becomes an obligation, a refusal, or
    (politeness, filler, an occasion like "when you get there") nothing by
    rule; every place named is a known place or ``start``; the same inputs give
    the same contract. Refusals are ``ContractError`` with ``details.reason``
    one of ``REFUSAL_REASONS``, the phrase, the nearest known places and the
    supported verbs.
    """

    name = "grammar"

    def __init__(self, lexicon: Lexicon | None = None, *, aliases: Mapping[str, Sequence[str]] | None = None) -> None:
        self.lexicon = lexicon if lexicon is not None else Lexicon.default()
        self.aliases = {k: tuple(v) for k, v in (aliases or {}).items()}
        lex = self.lexicon
        self._verbs = PhraseIndex()
        v = lex.verbs
        for cls, phrase in lex.verb_phrases():
            self._verbs.add_phrase(phrase, (cls, phrase), inflect=True)
        self._let = inflections("let")
        self._image_leads = {f for lead in lex.image_leads for f in inflections(lead)}
        self._image_nouns = frozenset(lex.image_nouns)
        self._message_nouns = PhraseIndex()
        for phrase in lex.message_nouns:
            self._message_nouns.add_phrase(phrase, True)
        self._media = frozenset(lex.message_media)
        self._route_nouns = {t for p in v.route for t in tokens_of(p)[-1:]}
        self._fillers = PhraseIndex()
        self._fillers_rev = PhraseIndex()
        for phrase in lex.fillers:
            toks = tokens_of(phrase)
            self._fillers.add(toks, True)
            self._fillers_rev.add(tuple(reversed(toks)), True)
        self._seq_words = PhraseIndex()
        for phrase in (*lex.sequence_words, *lex.before_words, *lex.after_words):
            self._seq_words.add_phrase(phrase, True)
        self._self = PhraseIndex()
        for phrase in lex.self_recipients:
            self._self.add_phrase(phrase, True)
        self._pass_verbs = frozenset(" ".join(tokens_of(p)) for p in lex.pass_verbs)
        self._via = PhraseIndex()
        for phrase in lex.via_words:
            self._via.add_phrase(phrase, "through" if tokens_of(phrase) == ("through",) else "via")
        self._on_way = PhraseIndex()
        self._way_to = PhraseIndex()
        for phrase in lex.on_the_way:
            self._on_way.add_phrase(phrase, True)
            if tokens_of(phrase)[-1] != "there":
                self._way_to.add_phrase(f"{phrase} to", True)
                self._way_to.add_phrase(f"{phrase} back to", True)
        self._list_leads = PhraseIndex()
        for phrase in lex.list_leads:
            self._list_leads.add_phrase(phrase, True)
        self._segmenter = Segmenter(lex, verb_starts=self._verbs, fillers=self._fillers)

    @classmethod
    def from_yaml(cls, path: str, *, aliases: Mapping[str, Sequence[str]] | None = None) -> GoalCompiler:
        from .lexicon import load_lexicon

        return cls(load_lexicon(path), aliases=aliases)

    # ------------------------------------------------------------------ entry point

    def compile(self, goal: str, *, mission_id: str, contract_id: str,
                places: Mapping[str, Pose2D]) -> CompletionContract:
        from ..contracts import ContractError, build_contract

        book = PlaceBook(places, aliases={k: v for k, v in self.aliases.items() if k in places}, lexicon=self.lexicon)
        try:
            drafts = self._drafts(goal, book)
        except _Refusal as r:
            if r.reason == "not_understood" and "nearest" not in r.details and r.details.get("phrase"):
                near = [p for w in str(r.details["phrase"]).split() if len(w) > 3
                        for p in book.nearest(w, 1, cutoff=0.8)]
                r.details["nearest"] = list(dict.fromkeys(near))
                if near:
                    r.message += f"; if a place was meant: {' or '.join(dict.fromkeys(near))}?"
            raise ContractError(f"{self.name}: {r.message}", compiler=self.name, goal=goal, reason=r.reason,
                                known_places=sorted(places), supported_verbs=self.lexicon.supported_verbs(),
                                **r.details) from None
        obligations = [self._obligation(i, d) for i, d in enumerate(drafts)]
        return build_contract(goal, mission_id=mission_id, contract_id=contract_id, compiler=self.name,
                              obligations=obligations, places={**places, START_PLACE: Pose2D(x=0.0, y=0.0)})

    def _obligation(self, i: int, d: _Draft) -> dict[str, Any]:
        final = d.kind is ObligationKind.AT_PLACE and d.params.get("final") is True
        out: dict[str, Any] = {
            "id": f"o{i + 1}", "kind": d.kind.value, "description": d.description, "params": d.params,
            "evidence": [e.value for e in _evidence(d.kind, d.eligible)],
            "max_age_s": self.lexicon.final_pose_max_age_s if final else self.lexicon.evidence_max_age_s,
            "depends_on": [f"o{j + 1}" for j in d.depends_on], "source": d.source,
        }
        if d.eligible:
            out["eligible"] = list(d.eligible)
        return out

    # ------------------------------------------------------------------ stages

    def _drafts(self, goal: str, book: PlaceBook) -> list[_Draft]:
        toks, quotes = tokenize(goal)
        clauses = self._segmenter.split(toks)
        groups = self._groups(goal, clauses, quotes, book)
        intents_in_order = self._order(groups)
        if not any(g.intents for g in groups):
            raise _Refusal("not_understood", "the goal asks for nothing this robot can do"
                           + (f": {goal.strip()!r}" if goal.strip() else " (it is empty)"),
                           phrase=goal.strip())
        self._close_vias(intents_in_order)
        return self._steps(intents_in_order, book)

    # -- stage 2: clauses to intents

    def _groups(self, goal: str, clauses: list[Clause], quotes: list[str], book: PlaceBook) -> list[_Group]:
        groups: list[_Group] = []
        prev: tuple[str, str] | None = None  # (class, verb phrase) of the last clause with a verb
        deferred: list[tuple[list[Tok], _Group]] = []  # "after the lab, go to ...": read with the next verb
        start_at: PlaceRef | None = None  # "starting at the lobby, patrol ..."
        way_dest: list[Any] = []  # "on your way to C, stop at ...": [C, source, last group on the way, sentence]
        on_way_next = False  # "on the way, stop at the lab": the next clause's places are stops

        def last_intent() -> _Intent | None:
            return next((i for g in reversed(groups) for i in reversed(g.intents)), None)

        def end_way(final: bool = False) -> None:
            if way_dest and (way_dest[2] is not None or final):
                ref, src, gid, _ = way_dest
                way_dest.clear()
                if gid is None:
                    raise _Refusal("not_understood", f"{src!r} says where the robot is going but not what to do on "
                                   "the way", phrase=src, nearest=[])
                groups[gid].intents.append(_Intent("navigate", src, gid, places=[ref]))

        for clause in clauses:
            toks = self._strip(clause.toks, trailing=False)
            if not toks:
                continue
            words = [t.text for t in toks]
            verb = self._verb(words)
            if verb is None or verb[1][0] not in ("speak", "message", "report"):
                toks = self._strip(toks)
                if not toks:
                    continue
                words = [t.text for t in toks]
                verb = self._verb(words)
            last = last_intent()
            # a quote standing alone after "say:" / "message bob:" is what to say or send
            if len(toks) == 1 and toks[0].quote is not None and last is not None \
                    and last.cls in ("speak", "message") and last.text is None:
                last.text = quotes[toks[0].quote]
                continue
            if verb is None and prev is None and (ref := self._start_modifier(words, book)) is not None:
                start_at = ref
                continue
            on_way = on_way_next
            on_way_next = False
            if verb is None and self._way_to.match(words, 0) is None \
                    and (m := self._on_way.match(words, 0)) is not None:
                self._not_back(words, m[0], restore(goal, toks))
                if m[0] == len(words):
                    on_way_next = True  # "on the way, stop at the lab"
                    continue
                if (v := self._verb(words[m[0]:])) is not None:
                    toks, words, verb, on_way = toks[m[0]:], words[m[0]:], v, True  # "on the way stop at A"
            if verb is None and not way_dest and (way := self._way_modifier(words, book)) is not None \
                    and not any(g.sentence == clause.sentence and g.intents for g in groups):
                ref, k = way  # "on your way to C, stop at A": C after the next step
                way_dest.extend([ref, restore(goal, toks[:k]), None, clause.sentence])
                if k == len(words):
                    continue
                toks, words = toks[k:], words[k:]
                verb = self._verb(words)
            if self._via.match(words, 0) is not None and clause.connector not in ("before", "after") \
                    and not (prev is not None and prev[0] == "route" and verb is None):
                # "go to C, passing A": a via list goes with the motion before it; alone, it opens one (after a
                # closed route's verb it is more of the route: "do a loop of A, through B")
                verb = None if prev is not None and prev[0] in ("navigate", "return") else (0, ("navigate", "via"))
            continuation = prev is not None and (verb is None or self._is_place_list(words, book))
            new_group = not continuation or clause.connector in ("before", "after") or not groups \
                or bool(clause.position)
            if new_group:
                if way_dest and (clause.sentence != way_dest[3] or " ".join(clause.link) not in _WEAK_LINKS):
                    end_way()  # the way ends with its sentence or at a "then"
                groups.append(_Group(len(groups), clause.sentence, clause.connector, clause.first_in_sentence))
                if way_dest:
                    way_dest[2] = len(groups) - 1
            group = groups[-1]
            group.any_order = group.any_order or clause.any_order
            group.position = group.position or clause.position
            if verb is None and prev is None and self._is_place_list(words, book):
                deferred.append((toks, group))
                continue
            if continuation:
                assert prev is not None
                intents = self._continue(prev, toks, goal, quotes, book, group.gid, groups, link=clause.link)
            else:
                if verb is None:
                    phrase = restore(goal, toks)
                    raise _Refusal("not_understood", f"did not understand {phrase!r}: it names no action "
                                   f"(supported: {_verbs_text(self.lexicon)})", phrase=phrase)
                n, (cls, phrase) = verb
                intents = self._read(cls, phrase, toks, n, goal, quotes, book, group.gid)
                prev = (cls, phrase)
            for intent in intents:
                last = last_intent()
                intent.on_way = intent.on_way or (on_way and intent.cls == "navigate" and bool(intent.places))
                if intent.cls == "return" and last is not None and last.cls == "route" and len(intent.places) == 1 \
                        and (last.start is None or last.start == intent.places[0]):
                    # "patrol A and B and return to base": the route ends where it starts
                    if intent.places[0].kind != "start":
                        last.start = intent.places[0]
                    last.source = f"{last.source}, {intent.source}"
                    continue
                if intent.cls == "route" and start_at is not None and intent.start is None:
                    intent.start, start_at = start_at, None
                elif start_at is not None:
                    # "from the lobby, go to the lab": be at the lobby first
                    group.intents.append(_Intent("navigate", intent.source, group.gid, places=[start_at]))
                    start_at = None
                group.intents.append(intent)
            if any(i.on_way for i in group.intents):
                self._stops_on_the_way(groups)
            if deferred and prev is not None:
                for dtoks, dgroup in deferred:
                    dgroup.intents.extend(self._continue(prev, dtoks, goal, quotes, book, dgroup.gid, groups))
                deferred.clear()
        for g in groups:
            for i in g.intents:
                if i.cls == "speak" and i.text is None:
                    raise _Refusal("not_understood", f"{i.source!r} says nothing: what should be said?",
                                   phrase=i.source)
        end_way(final=True)
        for g in groups:
            if g.any_order and len(g.intents) == 1 and g.intents[0].cls == "navigate" and len(g.intents[0].places) > 2:
                g.intents[0].unordered = True  # "go to C via A and B in any order": A and B, then C
        if start_at is not None:
            raise _Refusal("not_understood", "a starting place with nothing to start from it", phrase=goal)
        if deferred:
            phrase = restore(goal, deferred[0][0])
            raise _Refusal("not_understood", f"did not understand {phrase!r}: it names no action "
                           f"(supported: {_verbs_text(self.lexicon)})", phrase=phrase)
        return groups

    def _way_modifier(self, words: list[str], book: PlaceBook) -> tuple[PlaceRef, int] | None:
        """``on your way to X`` / ``en route to X`` alone or before a verb: where the robot goes after the next
        step, and how many words say so."""
        m = self._way_to.match(words, 0)
        p = book.match(words, m[0]) if m is not None else None
        if m is None or p is None:
            return None
        k = m[0] + p[0]
        return (p[1], k) if k == len(words) or self._verb(words[k:]) is not None else None

    def _stops_on_the_way(self, groups: list[_Group]) -> None:
        """``... and stop at A and B on the way``: the current group's places go before the destination of the
        motion right before it; with no such motion they are points on the way to the next one."""
        group = groups[-1]
        movers = [i for i in group.intents if i.cls == "navigate" and i.places]
        before = next((i for g in reversed(groups[:-1]) for i in reversed(g.intents) if i.cls != "noop"), None)
        for i in movers:
            i.on_way = False
        if before is not None and before.cls in ("navigate", "return") and before.places and not before.via_open \
                and len(movers) == len(group.intents):
            at = len(before.places) - 1
            points = [p for i in movers for p in i.places]
            before.places[at:at] = points
            before.via_at = at + len(points)
            before.source = ", ".join([before.source, *(i.source for i in movers)])
            group.intents = [i for i in group.intents if i not in movers]
            return
        for i in movers:
            i.via_open = i.via_open or "via"

    def _close_vias(self, groups: list[_Group]) -> None:
        """Every via list has a destination: its own, or the next step when that is a motion ("go via the lab,
        then return to base"); a bare ``through`` list is the destination ("go through the hallway")."""
        flat = [i for g in groups for i in g.intents if i.cls != "noop"]
        for k, it in enumerate(flat):
            if it.cls not in ("navigate", "return") or not it.via_open:
                continue
            kind, it.via_open = it.via_open, ""
            nxt = flat[k + 1] if k + 1 < len(flat) else None
            if kind == "through" or (nxt is not None and nxt.cls in ("navigate", "return") and nxt.places):
                continue
            raise _Refusal("not_understood", f"{it.source!r} names places on the way but no destination after "
                           "them (say where to go: 'go to X via A and B')", phrase=it.source, clause=it.source,
                           nearest=[])

    def _start_modifier(self, words: list[str], book: PlaceBook) -> PlaceRef | None:
        """``starting at X`` / ``from X`` / ``beginning at X`` standing alone: where a route starts."""
        k = _starts(words, 0, (("starting", "at"), ("starting", "from"), ("beginning", "at"), ("from",),
                               ("starting", "out", "from"), ("leaving", "from")))
        if not k:
            return None
        m = book.match(words, k)
        return m[1] if m is not None and k + m[0] == len(words) else None

    def _strip(self, toks: list[Tok], *, trailing: bool = True) -> list[Tok]:
        """Without leading (and trailing) filler, politeness and sequence words."""
        changed = True
        while changed and toks:
            changed = False
            words = [t.text for t in toks]
            for index in (self._fillers, self._seq_words):
                m = index.match(words, 0)
                if m is not None and m[0] < len(words) + 1:
                    toks = toks[m[0]:]
                    changed = True
                    break
            if changed or not toks or not trailing:
                continue
            rev = [t.text for t in reversed(toks)]
            m = self._fillers_rev.match(rev, 0)
            if m is not None:
                toks = toks[:len(toks) - m[0]]
                changed = True
        return toks

    def _verb(self, words: list[str]) -> tuple[int, tuple[str, str]] | None:
        """The verb phrase a clause starts with: (length, (class, phrase))."""
        best = self._verbs.match(words, 0)
        if words and words[0] in self._let:
            try:
                k = words.index("know", 1, 7)
            except ValueError:
                k = -1
            if k > 0:
                return 1, ("message", "let know")
        # light verbs before a route noun: "do a lap of", "make a round trip to"
        n = _starts(words, 0, _LIGHT_VERBS) or (1 if words and words[0] in inflections("do") else 0)
        if n or (words and words[0] in ("another", "one")):
            j = n
            while j < len(words) and words[j] in _DETERMINERS:
                j += 1
            m = self._verbs.match(words, j)
            if m is not None and m[1][0] == "route":
                return j + m[0], m[1]
        # an image lead, a few words, an image noun: "take three quick photos"
        if words and words[0] in self._image_leads:
            for j in range(1, min(len(words), 6)):
                if words[j] in self._image_nouns:
                    if best is None or best[0] < j + 1:
                        return j + 1, ("image", " ".join(words[:j + 1]))
                    break
                if words[j] not in _DETERMINERS and words[j] not in _NUMBERS and words[j] not in {"quick", "few"}:
                    break
        return best

    def _is_place_list(self, words: list[str], book: PlaceBook) -> bool:
        i = _starts(words, 0, _NAV_PARTICLES)
        m = book.match(words, i)
        return m is not None and i + m[0] == len(words) and m[1].kind == "place"

    # -- reading one clause

    def _read(self, cls: str, phrase: str, toks: list[Tok], n: int, goal: str, quotes: list[str], book: PlaceBook,
              gid: int) -> list[_Intent]:
        words = [t.text for t in toks]
        source = restore(goal, toks)
        rest = toks[n:]
        if cls == "unsupported":
            raise _Refusal("unsupported_action", f"{source!r}: {phrase!r} is not an action this robot can be held "
                           f"to (supported: {_verbs_text(self.lexicon)})", phrase=source, verb=phrase)
        if cls in ("navigate", "return"):
            # "go take a picture": the motion verb only introduces the next one
            if cls == "navigate" and rest and self._verb([t.text for t in rest]) is not None \
                    and not self._is_place_list([t.text for t in rest], book):
                k = self._verb([t.text for t in rest])
                assert k is not None
                return self._read(k[1][0], k[1][1], rest, k[0], goal, quotes, book, gid)
            return [self._motion(cls, rest, source, book, gid, goal,
                                 via_mode="via" if phrase in self._pass_verbs else "")]
        if cls == "route":
            if any(w in _NUMBERS and w not in ("couple", "pair") or w in ("twice", "thrice") for w in words[:n + 1]):
                raise _Refusal("not_understood", f"{source!r}: a number of rounds cannot be verified (ask for one "
                               "route at a time)", phrase=source)
            return [self._route(rest, source, book, gid, goal)]
        if cls in ("image", "inspect"):
            intent = self._image(cls, phrase, words, rest, source, book, gid, goal)
            said = tokens_of(phrase)
            numbers = [_NUMBERS[w] for w in said if w in _NUMBERS]
            if numbers:
                intent.count = numbers[0]
            elif said and said[-1] in self._image_nouns and said[-1].endswith("s") and said[-1] != "photograph":
                intent.count = 2  # "take some photos": more than one
            return [intent]
        if cls == "speak":
            return [self._speech(rest, source, quotes, book, gid, goal)]
        if cls in ("message", "report"):
            return [self._message(cls, phrase, toks, n, source, quotes, book, gid, goal)]
        assert cls == "semantic"
        return [_Intent("semantic", source, gid, question=source, ask_place=self._mentioned_place(rest, book))]

    def _continue(self, prev: tuple[str, str], toks: list[Tok], goal: str, quotes: list[str], book: PlaceBook,
                  gid: int, groups: list[_Group], *, link: tuple[str, ...] = ()) -> list[_Intent]:
        cls, phrase = prev
        source = restore(goal, toks)
        words = [t.text for t in toks]
        last = next((i for g in reversed(groups) for i in reversed(g.intents)), None)
        if cls in ("navigate", "return"):
            return self._continue_motion(last, toks, source, book, gid, goal, link)
        if cls == "route":
            last = next((i for g in reversed(groups) for i in reversed(g.intents)), None)
            if last is not None and last.cls == "route":
                extra = self._route(toks, source, book, gid, goal)
                last.places.extend(extra.places)
                last.source = f"{last.source}, {source}"
                if extra.start is not None:
                    last.start = extra.start
                return []
            return [self._route(toks, source, book, gid, goal)]
        if cls in ("image", "inspect"):
            image = self._image(cls, phrase, words, toks, source, book, gid, goal, continued=True)
            if last is not None and last.cls in ("image", "inspect"):
                image.count = last.count  # "take two photos in the lab and the kitchen": two at each
            return [image]
        if cls == "speak" and any(t.quote is not None for t in toks):
            return [self._speech(toks, source, quotes, book, gid, goal)]  # "say 'hi' and 'bye'"
        if cls == "speak" and last is not None and last.cls == "speak" and last.explicit_place \
                and self._is_place_list(words, book):
            # "announce 'X' in the lobby and the cafeteria": the same words at the next place too
            m = book.match(words, _starts(words, 0, _NAV_PARTICLES))
            assert m is not None
            return [_Intent("speak", source, gid, places=[m[1]], text=last.text, explicit_place=True)]
        if cls == "message" and last is not None and last.cls == "message":
            # another recipient of the same message: "tell Bob and Alice 'hi'", "email Bob, Alice and Carol"
            k = next((x for x, t in enumerate(toks) if t.quote is not None or t.text in _PAYLOAD_STARTS), len(toks))
            to, is_self = self._recipient_name(toks[:k], source, required=True, book=book)
            own = _Intent("message", source, gid)
            self._body(own, "message", phrase, toks[k:], source, quotes, book, goal)
            if own.ask or own.places:
                raise _Refusal("not_understood", f"did not understand {source!r} after {phrase!r}", phrase=source)
            text = own.text if own.text is not None else last.text
            siblings = [i for i in groups[-1].intents if i.cls == "message"] if groups else []
            if own.text is not None:
                for sib in siblings:  # the words said at the end are for every recipient named before them
                    if sib.text is None:
                        sib.text = text
            return [_Intent("message", source, gid, to=to, text=text, attach=last.attach,
                            eligible=last.eligible if is_self else ())]
        if cls == "semantic":
            last = next((i for g in reversed(groups) for i in reversed(g.intents)), None)
            if last is not None and last.cls == "semantic":
                last.question = f"{last.question} and {source}"
                last.source = last.question
                return []
        raise _Refusal("not_understood", f"did not understand {source!r} (after {phrase!r})", phrase=source)

    # -- arguments

    def _place_at(self, words: list[str], i: int, book: PlaceBook, goal: str, toks: list[Tok],
                  *, clause: str) -> tuple[int, PlaceRef]:
        """The place phrase at ``words[i]`` or a refusal naming the unknown place."""
        m = book.match(words, i)
        if m is not None:
            return m
        j = i
        while j < len(words) and words[j] in ARTICLES:
            j += 1
        if j >= len(words) and i > 0:
            raise _Refusal("not_understood", f"{clause!r} names no place after {words[i - 1]!r}", phrase=clause,
                           nearest=[])
        end = j
        while end < len(words) and words[end] != BACK and not words[end].startswith("\x00") \
                and words[end] not in {"and", "then", "to", "from", "via", "for", "with", "at", "in", "on", "when"} \
                and (end == j or self._via.match(words, end) is None):
            end += 1
        phrase = restore(goal, toks[j:end]) if end > j else restore(goal, toks[i:]) or clause
        if not phrase:
            raise _Refusal("not_understood", f"{clause!r} names no place", phrase=clause)
        inside = next((k for k in range(j + 1, end) if book.match(words, k) is not None), None)
        if inside is not None:  # "zorp the kitchen": a known place after words nobody knows
            what = restore(goal, toks[j:inside])
            raise _Refusal("not_understood", f"did not understand {what!r} in {clause!r}", phrase=what,
                           clause=clause)
        near = book.nearest(phrase)
        hint = f"; did you mean {' or '.join(near)}?" if near else ""
        raise _Refusal("unknown_place", f"unknown place {phrase!r} in {clause!r}{hint} "
                       f"(known places: {', '.join(book.names)})", phrase=phrase, clause=clause, nearest=near)

    def _leftover(self, words: list[str], i: int, goal: str, toks: list[Tok], clause: str) -> None:
        """Refuse what is left of a clause after its arguments, unless it is filler."""
        rest = [t for t in toks[i:] if t.text != BACK]
        rest = self._strip(rest)
        if rest:
            phrase = restore(goal, rest)
            raise _Refusal("not_understood", f"did not understand {phrase!r} in {clause!r}", phrase=phrase,
                           clause=clause)

    def _motion(self, cls: str, toks: list[Tok], source: str, book: PlaceBook, gid: int, goal: str, *,
                via_mode: str = "") -> _Intent:
        words = [t.text for t in toks]
        if not via_mode and self._via.match(words, 0) is None and not _starts(words, 0, _FROM):
            parts = _RETURN_PARTICLES if cls == "return" else _NAV_PARTICLES
            i = _starts(words, 0, parts)
            if i >= len(words) or words[i] == BACK:
                if cls == "return":
                    self._leftover(words, i, goal, toks, source)
                    return _Intent("return", source, gid, places=[PlaceRef("start")])
                if not words:
                    return _Intent("noop", source, gid)
                raise _Refusal("not_understood", f"{source!r} names no place to go to", phrase=source)
            m = self._list_leads.match(words, i)
            if cls == "navigate" and m is not None and i + m[0] == len(words) and book.match(words, i) is None:
                return _Intent("noop", source, gid)  # "visit the following places: A, B and C"
        return self._leg_intent(cls, self._leg(cls, toks, source, book, goal, via_mode=via_mode), source, gid)

    def _leg(self, cls: str, toks: list[Tok], source: str, book: PlaceBook, goal: str, *,
             via_mode: str = "") -> _Leg:
        """A motion clause's places: ``[from A] (via B | to C [via B | on the way to D]) [and back] [on the way]``,
        each place known or refused by name."""
        words = [t.text for t in toks]
        leg = _Leg()
        i = 0

        def place(at: int) -> tuple[int, PlaceRef]:
            return self._place_at(words, at, book, goal, toks, clause=source)

        if k := _starts(words, 0, _FROM):  # "go from the lab to the lobby": the lab first ("from here": nothing)
            n, ref = place(k)
            leg.via.extend([ref] if ref.kind != "start" else [])
            i = k + n
        v = self._via.match(words, i)
        if via_mode or v is not None or leg.via:
            leg.lead = v[1] if v is not None else via_mode or "via"
            if v is not None or not leg.via:
                i += v[0] if v is not None else 0
                if v is not None or not (_starts(words, i, _DEST_PARTICLES) or self._way_to.match(words, i)):
                    n, ref = place(i)
                    leg.via.append(ref)
                    i += n
            k = _starts(words, i, _DEST_PARTICLES) or (w[0] if (w := self._way_to.match(words, i)) else 0)
            if cls == "return" and not k and i < len(words) and words[i] == "back":
                k = 1
            if k:
                n, leg.dest = place(i + k)
                i += k + n
        else:
            w = self._way_to.match(words, i)
            k = w[0] if w is not None else _starts(words, i, _RETURN_PARTICLES if cls == "return" else _NAV_PARTICLES)
            n, ref = place(i + k)
            leg.bare = k == 0 and i == 0
            i += k + n
            if (w := self._way_to.match(words, i)) is not None:
                # "swing by A on your way to B": A, then B
                n, leg.dest = place(i + w[0])
                leg.via, leg.bare = [ref], False
                i += w[0] + n
            else:
                leg.dest = ref
                if k := _starts(words, i, _FROM):  # "go to the lobby from the lab"
                    n, origin = place(i + k)
                    leg.via = [origin] if origin.kind != "start" else []
                    i += k + n
        while leg.dest is not None and (v := self._via.match(words, i)) is not None:
            n, via = place(i + v[0])  # "go to C via A": A, then C
            leg.via.append(via)
            leg.via_after = True
            i += v[0] + n
        if i < len(words) and words[i] == BACK:
            leg.back = True
            i += 1
        if (m := self._on_way.match(words, i)) is not None:
            self._not_back(words, i + m[0], source)
            leg.on_way = True
            i += m[0]
        self._leftover(words, i, goal, toks, source)
        return leg

    def _not_back(self, words: list[str], i: int, source: str) -> None:
        """"on the way back" names no place to be back at: refused rather than guessed."""
        if words[i:i + 1] in (["back"], [BACK]) and words[i + 1:i + 2] != ["to"]:
            raise _Refusal("not_understood", f"{source!r}: 'on the way back' does not say back where (say 'on "
                           "your way back to X', or where to stop before the return)", phrase=source, nearest=[])

    def _leg_intent(self, cls: str, leg: _Leg, source: str, gid: int) -> _Intent:
        dest = leg.dest
        if dest is None and cls == "return" and not leg.back:
            dest = PlaceRef("start")  # "come back via the lobby"
        places = [*leg.via, *([dest] if dest is not None else [])]
        if leg.back:
            return _Intent("route", source, gid, places=places, start=None)
        intent = _Intent("return" if cls == "return" and len(places) == 1 else "navigate", source, gid,
                         places=places)
        if dest is None:
            intent.via_open = leg.lead or "via"
        if leg.via_after:
            intent.via_at = len(leg.via)
        # "stop at A on the way" / "pass A on the way": A goes before the destination of the motion before it
        intent.on_way = leg.on_way and (dest is None or not (leg.via or leg.lead))
        return intent

    def _continue_motion(self, last: _Intent | None, toks: list[Tok], source: str, book: PlaceBook, gid: int,
                         goal: str, link: tuple[str, ...]) -> list[_Intent]:
        """A motion clause with no verb of its own: more of an open via list ("go via A and B to C"), more of a
        via list after its destination ("go to C via A, B and D"), a via list for the motion before it ("go to
        C, passing A"), or the next destination ("go to A, then B")."""
        moving = last is not None and last.cls in ("navigate", "return") and bool(last.places)
        if moving and last is not None and last.via_open:
            leg = self._leg("navigate", toks, source, book, goal, via_mode=last.via_open)
            last.places.extend(leg.via)
            if leg.dest is not None:
                last.places.append(leg.dest)
                last.via_open = ""
            if leg.back:
                last.cls, last.start, last.via_open = "route", None, ""
            last.on_way = last.on_way or (leg.on_way and bool(last.via_open))  # "pass A and B on the way"
            last.source = f"{last.source}, {source}"
            return []
        leg = self._leg("navigate", toks, source, book, goal)
        points = (leg.via if leg.lead and leg.dest is None else [leg.dest] if leg.bare and not leg.via else []) \
            if not leg.back else []
        if moving and last is not None and points:
            weak = " ".join(link) in _WEAK_LINKS
            if last.via_at is None and leg.lead and link == (",",):
                last.via_at = len(last.places) - 1  # "drive to C, stopping at A": A before C
            if last.via_at is not None and weak:
                assert all(p is not None for p in points)
                last.places[last.via_at:last.via_at] = points  # type: ignore[misc]
                last.via_at += len(points)
                last.cls = "navigate"
                last.source = f"{last.source}, {source}"
                return []
        return [self._leg_intent("navigate", leg, source, gid)]

    def _route(self, toks: list[Tok], source: str, book: PlaceBook, gid: int, goal: str) -> _Intent:
        words = [t.text for t in toks]
        intent = _Intent("route", source, gid)
        i = 0
        while i < len(words):
            if words[i] == BACK:
                i += 1
                continue
            if words[i] in ("and", "then"):
                i += 1
                continue
            k = _starts(words, i, (("starting", "at"), ("starting", "from"), ("beginning", "at"), ("start", "at"),
                                   ("returning", "to"), ("ending", "at"), ("finishing", "at")))
            if k or (words[i] == "from" and i > 0):
                k = k or 1
                n, ref = self._place_at(words, i + k, book, goal, toks, clause=source)
                intent.start = ref
                i += k + n
                continue
            k = _starts(words, i, _ROUTE_PARTICLES)
            if k:
                i += k
                continue
            if words[i] in _NUMBERS and words[i] not in ("couple", "pair"):
                raise _Refusal("not_understood", f"{source!r}: a number of rounds cannot be verified (ask for one "
                               "route at a time)", phrase=source)
            if words[i] in _DETERMINERS or words[i] in self._route_nouns:
                i += 1
                continue
            m = book.match(words, i)
            if m is None:
                rest = self._strip(toks[i:])
                if not rest:
                    break
                self._place_at(words, i, book, goal, toks, clause=source)
            assert m is not None
            intent.places.append(m[1])
            i += m[0]
        return intent

    def _image(self, cls: str, phrase: str, words: list[str], rest: list[Tok], source: str, book: PlaceBook, gid: int,
               goal: str, *, continued: bool = False) -> _Intent:
        r = [t.text for t in rest]
        i = _starts(r, 0, _IMAGE_PLACE_PARTICLES)
        direct = cls == "inspect" or len(tokens_of(phrase)) == 1 or continued
        intent = _Intent(cls, source, gid)
        if i == 0 and not direct:
            # "take a photo" [there | here | at X]: nothing after the noun means where the robot is
            j = 0
            while j < len(r) and r[j] in _DETERMINERS:
                j += 1
            if j < len(r):
                m = book.match(r, j)
                if m is not None and m[1].kind in ("there", "start"):
                    intent.places, intent.explicit_place = [m[1]], True
                    self._leftover(r, j + m[0], goal, rest, source)
                    return intent
                self._leftover(r, j, goal, rest, source)
            return intent
        if i >= len(r):
            if cls == "inspect" and not continued:
                intent.places = [PlaceRef("there")]
                return intent
            return intent
        if book.match(r, i) is None and r[:i] in (["of"], ["showing"]) and not continued:
            # "a picture of the whiteboard [in the lab]": what an image shows needs a judgement
            k = next((x for x in range(i, len(r)) if r[x] in ("at", "in", "inside", "from")
                      and book.match(r, x + 1) is not None), len(r))
            intent.subject = restore(goal, rest[i:k])
            if k < len(r):
                n, ref = self._place_at(r, k + 1, book, goal, rest, clause=source)
                intent.places, intent.explicit_place = [ref], True
                self._leftover(r, k + 1 + n, goal, rest, source)
            return intent
        n, ref = self._place_at(r, i, book, goal, rest, clause=source)
        intent.places, intent.explicit_place = [ref], True
        self._leftover(r, i + n, goal, rest, source)
        return intent

    def _speech(self, toks: list[Tok], source: str, quotes: list[str], book: PlaceBook, gid: int, goal: str) -> _Intent:
        intent = _Intent("speak", source, gid)
        if toks and toks[0].text == ":":
            toks = toks[1:]  # "announce: ..."
        words = [t.text for t in toks]
        qs = [t.quote for t in toks if t.quote is not None]
        # where: "... there", "... at/in <place>" at the end
        end = len(words)
        while end > 0 and words[end - 1] in _SPEECH_TAILS:
            end -= 1
        for start in range(0, end):
            if words[start] in ("at", "in", "inside", "near", "by") or (words[start] in book.index._by_first
                                                                         and start > 0):
                off = 1 if words[start] in ("at", "in", "inside", "near", "by") else 0
                m = book.match(words, start + off)
                if m is not None and start + off + m[0] == end and (off or m[1].kind in ("there", "start")):
                    if m[1].kind == "there" or m[1].kind == "place" or m[1].kind == "base" or m[1].kind == "start":
                        intent.places, intent.explicit_place = [m[1]], True
                        end = start
                        break
        body = [t for t in toks[:end] if t.text not in {"to", "everyone", "everybody", "the", "room"} or qs == []]
        if qs and not quotes[qs[0]].strip():
            raise _Refusal("not_understood", f"{source!r} quotes nothing to say", phrase=source)
        if qs:
            intent.text = quotes[qs[0]]
            leftover = [t for t in toks[:end] if t.quote is None and t.text not in {"to", "everyone", "everybody",
                                                                                     "all", "the", "visitors", "them",
                                                                                     "people", "aloud", "out",
                                                                                     "loud", "that", "this"}]
            if len(qs) > 1:
                raise _Refusal("not_understood", f"{source!r} quotes more than one sentence to say", phrase=source)
            if self._strip(leftover):
                phrase = restore(goal, self._strip(leftover))
                raise _Refusal("not_understood", f"did not understand {phrase!r} in {source!r}", phrase=phrase,
                               clause=source)
            return intent
        body = toks[:end]
        if body and body[0].text == "that":
            body = body[1:]
        text = restore(goal, body).strip(" ,.!?")
        if text:
            intent.text = text  # else a lone quote may follow ("announce: 'closing'"); checked after all clauses
        return intent

    def _message(self, cls: str, phrase: str, toks: list[Tok], n: int, source: str, quotes: list[str],
                 book: PlaceBook, gid: int, goal: str) -> _Intent:
        """A message or a report: recipient, then a body (quoted text, ``that ...``, a statement, a question
        to check first, an occasion such as ``when you reach the lab``), nothing left unread."""
        words = [t.text for t in toks]
        verb = tokens_of(phrase)
        medium = phrase in self._media or bool(verb[:1] and verb[0] in self._media)
        intent = _Intent("message", source, gid)
        recipient: list[Tok] = []
        has_noun = False
        if phrase == "let know":
            k = words.index("know")
            recipient, body = toks[1:k], toks[k + 1:]
        elif cls == "report":
            rest = toks[n:]
            k = next((x for x, t in enumerate(rest) if t.text == "to"), None)
            body = rest
            if k is not None and k <= 1:
                recipient = self._recipient_toks(rest[k + 1:])
                body = rest[k + 1 + len(recipient):]
        else:
            rest = toks[n:]
            r = [t.text for t in rest]
            statement = self._statement_start(r)
            j = 0
            done = False
            while j < len(r):
                w = r[j]
                if w.startswith("\x00") or (statement is not None and j >= statement):
                    break
                k = j
                while k < len(r) and r[k] in _MESSAGE_DETERMINERS:
                    k += 1
                if (k < len(r) and r[k] in self._image_nouns) or (
                        j == 0 and w in ("it", "them", "these", "those") and (medium or phrase == "deliver")):
                    plural = (k < len(r) and r[k] in self._image_nouns and r[k].endswith("s")) or w != "it"
                    intent.attach = "all" if plural else "last"  # "send it to me", "email the photos to ops"
                    has_noun = True
                    j = (k if r[k:k + 1] and r[k] in self._image_nouns else j) + 1
                    done = done or bool(recipient)
                    continue
                m = self._message_nouns.match(r, k)
                if m is not None:
                    has_noun = True
                    j = k + m[0]
                    done = done or bool(recipient)
                    continue
                if w in ("to", "for") and not recipient:
                    j += 1
                    continue
                if done or w in _PAYLOAD_STARTS or w in _POSSESSIVES or (w == "to" and recipient):
                    break
                sm = self._self.match(r, j)
                if sm is not None and not recipient:
                    recipient = rest[j:j + sm[0]]
                    j += sm[0]
                    done = True
                    continue
                if w in ARTICLES and not recipient:
                    j += 1
                    continue
                recipient.append(rest[j])
                j += 1
            body = rest[j:]
        if phrase in ("send", "deliver") and not has_noun and not intent.attach and not any(
                t.quote is not None or t.text in ("that", "saying", ":") for t in body):
            raise _Refusal("unsupported_action", f"{source!r}: only messages can be sent (supported: "
                           f"{_verbs_text(self.lexicon)})", phrase=source, verb=phrase)
        to, is_self = self._recipient_name(recipient, source, required=phrase in ("tell", "let know", "inform"),
                                           book=book)
        self._body(intent, "report" if cls == "report" or (is_self and not medium) else cls, phrase, body, source,
                   quotes, book, goal)
        intent.to = to
        if not intent.attach and (cls == "report" or (is_self and not medium and phrase not in ("send", "deliver"))):
            intent.eligible = ("send_message", "speak") if is_self else ()
        return intent

    def _statement_start(self, r: list[str]) -> int | None:
        """Where an unmarked statement starts after a recipient: "tell Bob the lab is closed" -> 2."""
        c = next((x for x, w in enumerate(r) if w in _COPULAS), None)
        if c is None or c == 0 or any(w in _PAYLOAD_STARTS or w.startswith("\x00") for w in r[:c]):
            return None
        for s in range(c - 1, 0, -1):
            if r[s] in _SUBJECT_STARTS:
                return s
        return c - 1 if c >= 2 else None

    def _body(self, intent: _Intent, cls: str, phrase: str, body: list[Tok], source: str, quotes: list[str],
              book: PlaceBook, goal: str) -> None:
        """What follows the recipient, bound or refused."""
        words = [t.text for t in body]
        qs = [t.quote for t in body if t.quote is not None]
        if phrase == "confirm":
            # "confirm the door is locked": a claim to check before the report, not words to repeat
            if body:
                intent.ask = source
                intent.ask_place = self._mentioned_place(body, book)
            return
        if qs and not quotes[qs[0]].strip():
            raise _Refusal("not_understood", f"{source!r} quotes nothing to send", phrase=source)
        if qs:
            intent.text = quotes[qs[0]]
            leftover = [t for t in body if t.quote is None and t.text not in ("saying", "with", "the", "message",
                                                                             "text", "note", "words", ":")]
            self._occasion(intent, leftover, source, book, goal)
            return
        if not body:
            return
        w0 = words[0]
        if w0 in ("that", "saying", ":") and len(body) > 1:
            intent.text = restore(goal, body[1:]).strip(" ,.!?")
            if not intent.text:
                raise _Refusal("not_understood", f"{source!r} says nothing", phrase=source)
            return
        if w0 in _QUESTION_STARTS:
            intent.ask = restore(goal, body)  # "tell me whether the door is open": check it, then report
            intent.ask_place = self._mentioned_place(body, book)
            return
        if w0 in _OCCASION_STARTS:
            self._occasion(intent, body, source, book, goal)
            return
        if cls == "report" and all(w in _REPORT_TOPICS or w in ARTICLES or w in _POSSESSIVES for w in words):
            return  # "report your position": what a report is about
        if w0 not in _NOT_STATEMENTS and any(w in _COPULAS for w in words):
            intent.text = restore(goal, body).strip(" ,.!?")  # "tell Bob the lab is closed"
            return
        if cls == "report" and w0 not in _NOT_STATEMENTS and (w0 in ARTICLES or w0 in _POSSESSIVES):
            intent.ask = source  # "report the number of people in the lobby": find out, then report
            intent.ask_place = self._mentioned_place(body, book)
            return
        stripped = self._strip(body)
        if stripped:
            phrase_ = restore(goal, stripped)
            raise _Refusal("not_understood", f"did not understand {phrase_!r} in {source!r} (a message binds "
                           "its recipient, quoted text or a 'that ...' clause, and when it is sent)",
                           phrase=phrase_, clause=source)

    def _mentioned_place(self, toks: list[Tok], book: PlaceBook) -> PlaceRef | None:
        """The one known place a question names ("in the lobby", "of the lab"), if exactly one."""
        words = [t.text for t in toks]
        found: list[PlaceRef] = []
        for k in range(1, len(words)):
            if words[k - 1] in ("in", "at", "of", "near", "inside", "from", "by"):
                m = book.match(words, k)
                if m is not None and m[1].kind == "place" and m[1] not in found:
                    found.append(m[1])
        return found[0] if len(found) == 1 else None

    def _occasion(self, intent: _Intent, body: list[Tok], source: str, book: PlaceBook, goal: str) -> None:
        """``when you reach the lab`` / ``once you get there`` / ``when you are done``: the order, and a place."""
        body = self._strip(body)
        if not body:
            return
        words = [t.text for t in body]
        if words[0] in _OCCASION_STARTS:
            k = 1
            while k < len(words) and words[k] in ("you", "you've", "you're", "have", "are", "get", "got", "reach",
                                                  "reached", "arrive", "arrived", "at", "to", "in", "back", "done",
                                                  "finished", "finish", "there", "been"):
                if words[k] in ("there",) or (words[k] in ("done", "finished", "finish") and k == len(words) - 1):
                    break
                k += 1
            if "back" in words[1:k]:
                intent.places = [PlaceRef("start")]  # "report once (you're) back"
                if k == len(words):
                    return
            if k == len(words):
                return
            if words[k] == "there" and k == len(words) - 1:
                return
            m = book.match(words, k)
            if m is not None and k + m[0] == len(words):
                intent.places = [m[1]]
                return
        phrase = restore(goal, body)
        raise _Refusal("not_understood", f"did not understand {phrase!r} in {source!r}", phrase=phrase, clause=source)

    def _recipient_toks(self, toks: list[Tok]) -> list[Tok]:
        out: list[Tok] = []
        for t in toks:
            if t.quote is not None or t.text in _PAYLOAD_STARTS or t.text in ("to",):
                break
            out.append(t)
        return out

    def _recipient_name(self, recipient: list[Tok], source: str, *, required: bool,
                        book: PlaceBook | None = None) -> tuple[str, bool]:
        """The recipient's name (lower case, ``_`` between words) and whether it is the user."""
        words = [t.text for t in recipient if t.quote is None]
        while words and words[0] in ARTICLES and self._self.match(words, 0) is None:
            words = words[1:]
        if not words:
            if required:
                raise _Refusal("not_understood", f"{source!r} names nobody to tell", phrase=source)
            return self.lexicon.default_recipient, True
        sm = self._self.match(words, 0)
        if sm is not None and sm[0] == len(words):
            return self.lexicon.default_recipient, True
        if len(words) > 3 or any(not w.replace("-", "").replace("'", "").isalpha() or w in _NOT_NAMES for w in words) \
                or (book is not None and book.match(words, 0) is not None):
            phrase = " ".join(words)
            raise _Refusal("not_understood", f"{phrase!r} in {source!r} is not a recipient (a name of up to three "
                           "words)", phrase=phrase, clause=source)
        return "_".join(words), False

    # -- stage 3: order

    def _order(self, groups: list[_Group]) -> list[_Group]:
        """Groups in the goal's order: "before X, Y" and "Y after X" put X where it belongs."""
        out: list[_Group] = []
        by_sentence: dict[int, list[_Group]] = {}
        for g in groups:
            by_sentence.setdefault(g.sentence, []).append(g)
        for s in sorted(by_sentence):
            gs = by_sentence[s]
            if gs and gs[0].connector == "before" and gs[0].first_in_sentence and len(gs) > 1:
                gs = [*gs[1:], gs[0]]
            k = 1
            while k < len(gs):
                if gs[k].connector == "after" and not gs[k].first_in_sentence:
                    gs = [*gs[:k - 1], gs[k], gs[k - 1], *gs[k + 1:]]
                k += 1
            out.extend(gs)
        firsts = [g for g in out if g.position == "first"]
        lasts = [g for g in out if g.position == "last"]
        if len(firsts) > 1 or len(lasts) > 1:
            raise _Refusal("not_understood", "more than one step is said to come first (or last)", phrase="")
        return [*firsts, *(g for g in out if not g.position), *lasts]

    # -- stage 4: steps

    def _steps(self, groups: list[_Group], book: PlaceBook) -> list[_Draft]:
        drafts: list[_Draft] = []
        current: str | None = None
        last_named: str | None = None
        prev: list[int] = []
        lex = self.lexicon

        def resolve(ref: PlaceRef, source: str) -> str:
            nonlocal last_named
            if ref.kind == "place":
                last_named = ref.name
                return ref.name
            if ref.kind == "base":
                if lex.base_place not in book.names:
                    raise _Refusal("unknown_place", f"{source!r} means the base place {lex.base_place!r}, which "
                                   f"this map does not have (known places: {', '.join(book.names)})",
                                   phrase=lex.base_place, clause=source, nearest=[])
                last_named = lex.base_place
                return lex.base_place
            if ref.kind == "start":
                last_named = START_PLACE
                return START_PLACE
            if last_named is None and current is None:
                raise _Refusal("not_understood", f"{source!r}: 'there' refers to no place named before it",
                               phrase=source)
            return last_named or current  # type: ignore[return-value]

        def add(draft: _Draft, deps: list[int]) -> int:
            draft.depends_on = sorted(set(deps))
            drafts.append(draft)
            return len(drafts) - 1

        def go(place: str, source: str, deps: list[int]) -> int:
            nonlocal current
            current = place
            return add(_Draft(ObligationKind.AT_PLACE, {"place": place, "final": False}, source,
                              f"The robot reached {place}."), deps)

        for g in groups:
            before_group = list(prev)
            ends: list[int] = []
            for intent in g.intents:
                deps = list(before_group) if g.any_order else list(prev)
                last = self._emit(intent, deps, resolve, add, go, lambda: current, drafts)
                if last is None:
                    continue
                if intent.cls == "route":
                    current = None
                if g.any_order:
                    ends.extend(last)
                else:
                    prev = last
            if g.any_order and ends:
                prev = ends
        # a route the robot moves on from is history (its return is judged on the recorded poses)
        for i, d in enumerate(drafts):
            if d.kind is ObligationKind.ROUTE_CLOSED and any(x.kind in (ObligationKind.AT_PLACE,
                                                                        ObligationKind.ROUTE_CLOSED)
                                                             for x in drafts[i + 1:]):
                d.params["final"] = False
        # the last place is final unless a route moves the robot on after it
        last_at = max((i for i, d in enumerate(drafts) if d.kind is ObligationKind.AT_PLACE), default=None)
        if last_at is not None and not any(d.kind is ObligationKind.ROUTE_CLOSED for d in drafts[last_at + 1:]):
            d = drafts[last_at]
            d.params["final"] = True
            d.description = f"The robot is at {d.params['place']} when the mission is verified."
        if not drafts:
            raise _Refusal("not_understood", "the goal asks for nothing this robot can do", phrase="")
        return drafts

    def _emit(self, intent: _Intent, deps: list[int], resolve: Any, add: Any, go: Any, current: Any,
              drafts: list[_Draft]) -> list[int] | None:
        src = intent.source
        if intent.cls == "noop":
            return None
        if intent.cls in ("navigate", "return"):
            out: list[int] = []
            points: list[int] = []
            for k, ref in enumerate(intent.places):
                place = resolve(ref, src)
                if intent.unordered and k < len(intent.places) - 1:
                    points.append(go(place, src, deps))  # each from where the robot was before the list
                    continue
                idx = go(place, src, points or deps)
                deps = [idx]
                out = [idx]
            return out
        if intent.cls == "route":
            waypoints = [resolve(r, src) for r in intent.places]
            start = resolve(intent.start, src) if intent.start is not None else START_PLACE
            while waypoints and waypoints[0] == start:
                waypoints.pop(0)
            while waypoints and waypoints[-1] == start:
                waypoints.pop()
            params = {"start": start, "waypoints": waypoints, "min_departure_m": self.lexicon.min_departure_m}
            via = f" via {', '.join(waypoints)}" if waypoints else ""
            return [add(_Draft(ObligationKind.ROUTE_CLOSED, params, src,
                               f"Closed route: leave {start}{via} and come back to {start}."), deps)]
        if intent.cls in ("image", "inspect"):
            where = resolve(intent.places[0], src) if intent.places else current()
            if where is not None and where != current():
                deps = [go(where, src, deps)]
            params = {"place": where} if where is not None else {}
            at = f" at {where}" if where is not None else ""
            what = "An image was" if intent.count == 1 else f"{intent.count} distinct images were"
            image = add(_Draft(ObligationKind.IMAGE_CAPTURED, {**params, **({"count": intent.count} if intent.count > 1
                                                                             else {})}, src,
                               f"{what} captured{at}."), deps)
            if not intent.subject:
                return [image]
            question = {"question": f"the image shows {intent.subject}", **params}
            return [add(_Draft(ObligationKind.SEMANTIC, question, src,
                               f"Semantic judgement: the image shows {intent.subject}"), [image])]
        if intent.cls == "speak":
            where = resolve(intent.places[0], src) if intent.places else current()
            if where is not None and where != current():
                deps = [go(where, src, deps)]
            params: dict[str, Any] = {}
            if intent.text is not None:
                params["text"] = intent.text
            if where is not None:
                params["place"] = where
            said = f" {intent.text!r}" if intent.text is not None else ""
            at = f" at {where}" if where is not None else ""
            return [add(_Draft(ObligationKind.SPOKEN, params, src, f"The robot said{said}{at}."), deps)]
        if intent.cls == "message":
            if intent.places:  # "let me know when you reach the lab": be there first
                where = resolve(intent.places[0], src)
                if where != current():
                    deps = [go(where, src, deps)]
            if intent.ask:  # "tell me whether the door is open": the answer needs a judgement first
                if intent.ask_place is not None:
                    where = resolve(intent.ask_place, src)
                    if where != current():
                        deps = [go(where, src, deps)]
                question = {"question": intent.ask, **({"place": current()} if current() is not None else {})}
                deps = [add(_Draft(ObligationKind.SEMANTIC, question, src, f"Semantic judgement: {intent.ask}"), deps)]
            params = {"to": intent.to}
            if intent.text is not None:
                params["text"] = intent.text
            if intent.attach:
                since = max((k for k, d in enumerate(drafts) if d.kind is ObligationKind.MESSAGE_DELIVERED
                             and not d.params.get("attachments")), default=-1)
                images = [k for k in range(len(drafts)) if drafts[k].kind is ObligationKind.IMAGE_CAPTURED]
                if intent.attach == "all":
                    images = [k for k in images if k > since] or images[-1:]
                else:
                    images = images[-1:]
                if not images:
                    raise _Refusal("not_understood", f"{src!r}: no image is taken before it to send", phrase=src)
                params["attachments"] = [f"o{k + 1}" for k in images]
            saying = f" saying {intent.text!r}" if intent.text is not None else ""
            carrying = " with the image" if intent.attach else ""
            what = (f"{intent.to} was told{saying}, by an acknowledged message or speech." if "speak" in intent.eligible
                    else f"A message{carrying} was delivered to {intent.to}{saying}.")
            return [add(_Draft(ObligationKind.MESSAGE_DELIVERED, params, src, what, eligible=intent.eligible), deps)]
        assert intent.cls == "semantic"
        params = {"question": intent.question}
        if intent.ask_place is not None:  # "find the keys in the kitchen": be there to look
            named = resolve(intent.ask_place, src)
            if named != current():
                deps = [go(named, src, deps)]
        where = current()
        if where is not None:
            params["place"] = where
        return [add(_Draft(ObligationKind.SEMANTIC, params, src, f"Semantic judgement: {intent.question}"), deps)]


def _evidence(kind: ObligationKind, eligible: tuple[str, ...]) -> tuple[EvidenceKind, ...]:
    base = DEFAULT_EVIDENCE[kind]
    if kind is ObligationKind.MESSAGE_DELIVERED and "speak" in eligible:
        return (*base, EvidenceKind.SPEECH_RECEIPT)
    return base


def _verbs_text(lex: Lexicon) -> str:
    return "; ".join(f"{cls}: {', '.join(v)}" for cls, v in lex.supported_verbs().items())
