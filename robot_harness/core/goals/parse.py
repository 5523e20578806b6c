"""Tokens and clauses: the first two stages of compiling a goal.

``tokenize`` takes quoted text out first (single, double and typographic
quotes; an apostrophe inside a word is not a quote), so a payload is never
read for actions and is bound verbatim later. ``split_clauses`` cuts the
token stream at punctuation and at the lexicon's connectors and records, per
clause, the connector in front of it (sequence, ``before``, ``after``) and the
sentence it belongs to, which is what ordering needs. Route markers
("... and back") and "in any order" are recognised here because they would
otherwise be cut apart at their "and"; phrases that only affirm the order
("in that order", "one after another") are dropped here for the same reason.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .lexicon import Lexicon, PhraseIndex, tokens_of

__all__ = ["Tok", "Clause", "Segmenter", "tokenize", "BACK", "QUOTE_PREFIX", "QUOTE_PATTERN"]

QUOTE_PATTERN = re.compile(r'"([^"]*)"|“([^”]*)”|(?<![\w])‘(.*?)’(?![\w])|(?<![\w])\'(.*?)\'(?![\w])', re.DOTALL)
_TOKEN = re.compile(r"«q(\d+)»|(?:^|(?<=\s))\d{1,2}[.)](?=\s)|(?:^|(?<=\n))\s*[-*•](?=\s)|\n|->|→|[,;:!?]|\.(?=\s|$|[\"'”’)])|\.$|[a-z0-9]+(?:['-][a-z0-9]+)*", re.IGNORECASE)

BACK = "\x00back"
"""The token a route marker ("and back", "there and back") becomes."""
QUOTE_PREFIX = "\x00q"


@dataclass(frozen=True)
class Tok:
    text: str
    """Lower case word, punctuation mark, ``BACK`` or ``\\x00q<n>`` for quote n."""
    start: int
    end: int
    """The token's span in the goal as written."""

    @property
    def quote(self) -> int | None:
        return int(self.text[len(QUOTE_PREFIX):]) if self.text.startswith(QUOTE_PREFIX) else None

    @property
    def punct(self) -> bool:
        return self.text in {",", ";", ":", "!", "?", ".", "->", "→"}


def tokenize(goal: str) -> tuple[list[Tok], list[str]]:
    """The goal's tokens (spans into ``goal``) and its quoted payloads, in order."""
    quotes: list[str] = []
    spans: list[tuple[int, int]] = []
    pieces: list[str] = []
    last = 0
    for m in QUOTE_PATTERN.finditer(goal):
        body = next(g for g in m.groups() if g is not None)
        pieces.append(goal[last:m.start()])
        pieces.append(f"«q{len(quotes)}»")
        spans.append((m.start(), m.end()))
        quotes.append(body)
        last = m.end()
    pieces.append(goal[last:])
    masked = "".join(pieces)
    # offsets in ``masked`` back to ``goal``
    toks: list[Tok] = []
    shift_points: list[tuple[int, int]] = []  # (masked position, delta to add)
    pos_m = 0
    pos_g = 0
    k = 0
    for i, piece in enumerate(pieces):
        if i % 2 == 1:
            start_g, end_g = spans[k]
            shift_points.append((pos_m, start_g - pos_m))
            pos_m += len(piece)
            pos_g = end_g
            k += 1
        else:
            shift_points.append((pos_m, pos_g - pos_m))
            pos_m += len(piece)
            pos_g += len(piece)

    def to_goal(p: int, *, end: bool = False) -> int:
        delta = 0
        for at, d in shift_points:
            if at <= p - (1 if end else 0) or (at == 0 and p == 0):
                delta = d
            else:
                break
        return p + delta

    for m in _TOKEN.finditer(masked.replace("’", "'")):
        if m.group(1) is not None:
            q = int(m.group(1))
            toks.append(Tok(f"{QUOTE_PREFIX}{q}", spans[q][0], spans[q][1]))
            continue
        text = m.group(0).lower()
        if text == "→":
            text = "->"
        elif text == "\n" or text.strip() in ("-", "*", "•") or re.fullmatch(r"\d{1,2}[.)]", text):
            text = ","  # a line break, a bullet or a list number ("1)", "2.") ends a clause
        toks.append(Tok(text, to_goal(m.start()), to_goal(m.end(), end=True)))
    return toks, quotes


@dataclass
class Clause:
    toks: list[Tok]
    connector: str = ""
    """The connector in front of the clause: "" (none or a comma), "seq", "before" or "after"."""
    sentence: int = 0
    first_in_sentence: bool = False
    any_order: bool = False
    position: str = ""
    """"first" / "last" when the clause ends with that word ("go to the lab last"): where it goes."""
    link: tuple[str, ...] = ()
    """What separates the clause from the one before it, as written: ``(",", "and")``, ``("then",)``,
    ``(".",)``; empty for the goal's first clause. A via list runs on only over a weak link
    ("go to C via A, B and D")."""

    @property
    def words(self) -> list[str]:
        return [t.text for t in self.toks]


_SENTENCE_END = frozenset({".", "!", "?", ";"})
_STRONG = frozenset({"then", "and then", "after that", "afterwards", "afterward", "next", "finally", "and finally",
                     "lastly", "and lastly", "followed by", "after this", "subsequently"})
_CONTENT_WORDS = frozenset({"that", "saying", "whether", "if", "how", "what", "where", "which", "who", "why",
                            "when", "once"})
_LET = frozenset({"let", "lets", "letting"})


class Segmenter:
    """Splits tokens into clauses using one lexicon's connectors."""

    def __init__(self, lexicon: Lexicon, *, verb_starts: PhraseIndex, fillers: PhraseIndex) -> None:
        self.connectors = PhraseIndex()
        for phrase in lexicon.sequence_words:
            self.connectors.add_phrase(phrase, "seq")
        for phrase in lexicon.before_words:
            self.connectors.add_phrase(phrase, "before")
        for phrase in lexicon.after_words:
            self.connectors.add_phrase(phrase, "after")
        self.contrast = PhraseIndex()
        for phrase in lexicon.contrast_words:
            self.connectors.add_phrase(phrase, "seq")
            self.contrast.add_phrase(phrase, True)
        self.back = PhraseIndex()
        for phrase in lexicon.route_back:
            self.back.add_phrase(phrase, BACK)
        self.any_order = PhraseIndex()
        for phrase in lexicon.any_order:
            self.any_order.add_phrase(phrase, True)
        self.in_order = PhraseIndex()
        for phrase in lexicon.in_order:
            self.in_order.add_phrase(phrase, True)
        self.verb_starts = verb_starts
        self.fillers = fillers
        self.imperatives = {tokens_of(p)[0] for _, p in lexicon.verb_phrases()} | {"do", "make", "take", "run", "let",
                                                                                  "come", "go"}

    def split(self, toks: list[Tok]) -> list[Clause]:
        """Clauses, cut at punctuation and connectors.

        Inside a payload (what to say, what a message says: after a speech verb, or after ``that``,
        ``saying``, ``whether``, ``how``... of a message or report, or after ``let X know``) only a
        sentence end, a strong sequencer ("then", "after that", "finally") or a weak connector or comma
        followed by an imperative verb ("and go to the lab") ends the clause: "tell Bob that the lab is
        closed and the kitchen is open" is one message.
        """
        words = [t.text for t in toks]
        out: list[Clause] = []
        cur: list[Tok] = []
        state: dict[str, object] = {"conn": "", "sentence": 0, "first": True, "any_order": False, "content": False}
        link: list[str] = []

        def flush() -> None:
            if cur:
                out.append(Clause(list(cur), str(state["conn"]), int(state["sentence"]),  # type: ignore[arg-type]
                                  bool(state["first"]), bool(state["any_order"]), link=tuple(link),
                                  position=str(state.pop("position", ""))))
                state["first"] = False
                state["conn"] = ""
                state["any_order"] = False
                cur.clear()
                link.clear()
            state["content"] = False

        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            content = bool(state["content"])
            if t.text == ":" and not content and cur and self._payload_starts([*(c.text for c in cur), ":"]):
                cur.append(t)  # "message Bob: meet me in the lab": the rest is what he is told
                state["content"] = True
                i += 1
                continue
            if t.punct:
                if content and t.text in (",", ":", "->") and not self._ends_content(words, i + 1):
                    cur.append(t)  # a comma inside a payload: "the meeting is at 3, not 4"
                    i += 1
                    continue
                flush()
                if out:
                    link.append(t.text)
                if t.text in _SENTENCE_END:
                    state["sentence"] = int(state["sentence"]) + 1  # type: ignore[call-overload]
                    state["first"] = True
                    state["conn"] = ""
                i += 1
                continue
            if not content and (m := self.in_order.match(words, i)) is not None:
                i += m[0]  # "in that order" (and "in order to ..."): the order is the text's anyway
                continue
            if not content and (m := self.any_order.match(words, i)) is not None:
                if cur:
                    state["any_order"] = True
                    flush()
                elif out and not state["first"]:
                    out[-1].any_order = True
                else:
                    state["any_order"] = True  # "in any order, visit ...": the next clause
                i += m[0]
                continue
            if not content and (m := self.back.match(words, i)) is not None and self._ends_here(words, i + m[0]):
                cur.append(Tok(BACK, t.start, toks[i + m[0] - 1].end))
                i += m[0]
                continue
            if not content and (v := self.verb_starts.match(words, i)) is not None and "and" in words[i:i + v[0]]:
                cur.extend(toks[i:i + v[0]])  # a verb phrase with an "and" in it: "there and back"
                i += v[0]
                continue
            if (m := self.connectors.match(words, i)) is not None:
                strong = " ".join(words[i:i + m[0]]) in _STRONG
                if content and not strong and not self._ends_content(words, i + m[0]):
                    cur.extend(toks[i:i + m[0]])
                    i += m[0]
                    continue
                trailing = words[i] in ("first", "last", "lastly") and cur and self._ends_here(words, i + m[0])
                flush()
                if out:
                    link.extend(words[i:i + m[0]])
                if self.contrast.match(words, i) is not None and words[i + m[0]:i + m[0] + 1] == ["first"]:
                    state["position"] = "first"  # "go to the lobby, but first stop at the lab"
                if trailing:
                    out[-1].position = "first" if words[i] == "first" else "last"
                elif state["conn"] not in ("before", "after"):
                    state["conn"] = m[1]
                i += m[0]
                continue
            if not content and t.text == "to" and cur and self.verb_starts.match(words, i + 1) is not None \
                    and not self._all_filler([*(c.text for c in cur), "to"]):
                flush()
                link.append("to")
                state["conn"] = "seq"
                i += 1
                continue
            cur.append(t)
            i += 1
            if not content and self._payload_starts([c.text for c in cur]):
                state["content"] = True
        flush()
        return out

    def _payload_starts(self, words: list[str]) -> bool:
        """Whether the clause so far has reached a payload (see ``split``)."""
        k = 0
        while k < len(words):
            m = self.fillers.match(words, k)
            if m is None:
                break
            k += m[0]
        if k < len(words) and words[k] in _LET and words[-1] == "know":
            return True  # "let Bob know ...": what follows is what Bob is told
        v = self.verb_starts.match(words, k)
        if v is None:
            return False
        cls = v[1][0] if isinstance(v[1], tuple) else v[1]
        if cls == "speak":  # an unquoted payload (a quote is one token: nothing to hold together)
            after = [w for w in words[k + v[0]:] if w != ":"]
            return bool(after) and not after[0].startswith(QUOTE_PREFIX) and words[-1] != ":"
        if cls in ("message", "report"):
            return words[-1] in _CONTENT_WORDS or (words[-1] == ":" and len(words) > k + v[0])
        return False

    def _ends_content(self, words: list[str], j: int) -> bool:
        """Whether a weak connector or comma before ``words[j]`` ends a payload: an imperative follows."""
        while j < len(words) and words[j] in ("then", "please", "also", "and", ",", ":", "->", "first", "next",
                                              "finally"):
            j += 1
        if j >= len(words):
            return False  # "say see you later": a payload runs to the end
        v = self.verb_starts.match(words, j)
        return v is not None and words[j] in self.imperatives

    def _all_filler(self, words: list[str]) -> bool:
        i = 0
        while i < len(words):
            m = self.fillers.match(words, i)
            if m is None:
                return False
            i += m[0]
        return True

    def _ends_here(self, words: list[str], j: int) -> bool:
        """Whether a route marker ending before ``words[j]`` closes its clause."""
        if j >= len(words):
            return True
        w = words[j]
        if w in {",", ";", ":", "!", "?", ".", "->"}:
            return True
        return self.connectors.match(words, j) is not None or self.any_order.match(words, j) is not None \
            or w in {"again", "please", "thanks"}


def restore(goal: str, toks: list[Tok]) -> str:
    """The goal's own words for a run of tokens (quotes included as written)."""
    if not toks:
        return ""
    return goal[toks[0].start:toks[-1].end].strip()

