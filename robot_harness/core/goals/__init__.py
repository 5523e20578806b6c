"""The goal compiler: natural-language goals to completion contracts (docs/goal_compiler.md)."""
from __future__ import annotations

from .compare import ContractShape, compare_contracts, entails, shape_of
from .compiler import REFUSAL_REASONS, START_PLACE, GoalCompiler
from .lexicon import DEFAULT_LEXICON, Lexicon, LexiconVerbs, load_lexicon

__all__ = ["GoalCompiler", "START_PLACE", "REFUSAL_REASONS", "Lexicon", "LexiconVerbs", "load_lexicon",
           "DEFAULT_LEXICON", "ContractShape", "compare_contracts", "entails", "shape_of"]
