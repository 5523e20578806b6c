"""launch.conditions stand-in: IfCondition/UnlessCondition with launch's strict evaluation
(launch/conditions/evaluate_condition_expression.py: only true/false/1/0, case-insensitive)."""
from __future__ import annotations

from typing import Any

import launch
from launch.substitutions import normalize, perform

VALID_TRUE = ("true", "1")
VALID_FALSE = ("false", "0")


def evaluate_condition_expression(context: Any, expression: Any) -> bool:
    text = perform(context, expression).lower()
    if text in VALID_TRUE:
        return True
    if text in VALID_FALSE:
        return False
    raise launch.InvalidConditionExpressionError(
        f"invalid condition expression {text!r}: expected one of {list(VALID_TRUE + VALID_FALSE)}")


class IfCondition:
    def __init__(self, predicate_expression: Any) -> None:
        self.predicate_expression = normalize(predicate_expression)

    def evaluate(self, context: Any) -> bool:
        return evaluate_condition_expression(context, self.predicate_expression)


class UnlessCondition(IfCondition):
    def evaluate(self, context: Any) -> bool:
        return not evaluate_condition_expression(context, self.predicate_expression)
