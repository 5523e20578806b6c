"""Tokens and clauses: the first two stages of compiling a goal.

``tokenize`` takes quoted text out first (single, double and typographic
quotes; an apostrophe inside a word is not a quote), so a payload is never
read for actions and is bound verbatim later. ``split_clauses`` cuts the
token stream at punctuation and at the lexicon's connectors and records, per
clause, the connector in front of it (sequence, ``before``, ``after``) and the
sentence it belongs to, which is what ordering needs. Route markers
("... and back") and "in any order" are recognised here because they would
otherwise be cut apart at their "and".
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .lexicon import Lexicon, PhraseIndex, tokens_of

__all__ = ["Tok", "Clause", "Segmenter", "tokenize", "BACK", "QUOTE_PREFIX"]

_QUOTE = re.compile(r'"([^"]*)"|“([^”]*)”|(?<![\w])‘(.*?)’(?![\w])|(?<![\w])\'(.*?)\'(?![\w])', re.DOTALL)
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
    for m in _QUOTE.finditer(goal):
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

    @property
    def words(self) -> list[str]:
        return [t.text for t in self.toks]


_SENTENCE_END = frozenset({".", "!", "?", ";"})


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
        self.back = PhraseIndex()
        for phrase in lexicon.route_back:
            self.back.add_phrase(phrase, BACK)
        self.any_order = PhraseIndex()
        for phrase in lexicon.any_order:
            self.any_order.add_phrase(phrase, True)
        self.verb_starts = verb_starts
        self.fillers = fillers

    def split(self, toks: list[Tok]) -> list[Clause]:
        words = [t.text for t in toks]
        out: list[Clause] = []
        cur: list[Tok] = []
        state = {"conn": "", "sentence": 0, "first": True}

        def flush() -> None:
            if cur:
                out.append(Clause(list(cur), state["conn"], state["sentence"], state["first"]))  # type: ignore[arg-type]
                state["first"] = False
                state["conn"] = ""
                cur.clear()

        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            if t.punct:
                flush()
                if t.text in _SENTENCE_END:
                    state["sentence"] = int(state["sentence"]) + 1
                    state["first"] = True
                    state["conn"] = ""
                i += 1
                continue
            if (m := self.any_order.match(words, i)) is not None:
                target = cur if cur else (out[-1].toks if out else None)
                if cur:
                    flush()
                if out and target is not None:
                    out[-1].any_order = True
                i += m[0]
                continue
            if (m := self.back.match(words, i)) is not None and self._ends_here(words, i + m[0]):
                cur.append(Tok(BACK, t.start, toks[i + m[0] - 1].end))
                i += m[0]
                continue
            if (v := self.verb_starts.match(words, i)) is not None and "and" in words[i:i + v[0]]:
                cur.extend(toks[i:i + v[0]])  # a verb phrase with an "and" in it: "there and back"
                i += v[0]
                continue
            if (m := self.connectors.match(words, i)) is not None:
                flush()
                if state["conn"] not in ("before", "after"):
                    state["conn"] = m[1]
                i += m[0]
                continue
            if t.text == "to" and cur and self.verb_starts.match(words, i + 1) is not None \
                    and not self._all_filler([*(c.text for c in cur), "to"]):
                flush()
                state["conn"] = "seq"
                i += 1
                continue
            cur.append(t)
            i += 1
        flush()
        return out

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


_unused = (field, tokens_of)
