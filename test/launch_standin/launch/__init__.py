"""Stand-in for ros2/launch 3.7.x (Kilted): the part harness.launch.py uses.

Behaviour follows launch/launch_description.py, launch/launch_context.py,
launch/actions/*.py, launch/conditions/*.py and launch/substitutions/*.py of
ros2/launch (kilted); this is our own code, not a copy.
"""
from __future__ import annotations

from typing import Any

__all__ = ["LaunchDescription", "LaunchContext", "SubstitutionFailure", "InvalidConditionExpressionError",
           "Action", "Substitution", "actions", "conditions", "substitutions"]


class SubstitutionFailure(RuntimeError):
    """launch.substitutions.substitution_failure.SubstitutionFailure."""


class InvalidConditionExpressionError(Exception):
    """launch.conditions.InvalidConditionExpressionError."""


class LaunchContext:
    """launch_configurations is a dict that GroupAction(scoped=True) pushes/pops."""

    def __init__(self, argv: list[str] | None = None) -> None:
        self.argv = list(argv or [])
        self._configs: list[dict[str, str]] = [{}]
        self.locals: dict[str, Any] = {}

    @property
    def launch_configurations(self) -> dict[str, str]:
        return self._configs[-1]

    def _push_launch_configurations(self, forwarding: bool = True) -> None:
        self._configs.append(dict(self._configs[-1]) if forwarding else {})

    def _pop_launch_configurations(self) -> None:
        if len(self._configs) == 1:
            raise RuntimeError("launch configurations stack is empty")
        self._configs.pop()

    def perform_substitution(self, sub: Any) -> str:
        return substitutions.perform(self, sub)


class Action:
    def __init__(self, *, condition: Any = None) -> None:
        self.condition = condition

    def visit(self, context: LaunchContext) -> list[Any] | None:
        if self.condition is not None and not self.condition.evaluate(context):
            return None
        return self.execute(context)

    def execute(self, context: LaunchContext) -> list[Any] | None:  # pragma: no cover - overridden
        return None


class Substitution:
    def perform(self, context: LaunchContext) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


class LaunchDescription:
    """A list of entities; visiting it yields them in order (launch_description.py)."""

    def __init__(self, initial_entities: list[Any] | None = None) -> None:
        self.entities = list(initial_entities or [])

    def add_action(self, action: Any) -> None:
        self.entities.append(action)

    def visit(self, context: LaunchContext) -> list[Any]:
        return list(self.entities)

    def get_launch_arguments(self) -> list[Any]:
        """Every DeclareLaunchArgument, also inside groups (launch_description.get_launch_arguments)."""
        out: list[Any] = []

        def walk(entities: list[Any]) -> None:
            for e in entities:
                if isinstance(e, actions.DeclareLaunchArgument):
                    out.append(e)
                elif isinstance(e, actions.GroupAction):
                    walk(e.actions)
                elif isinstance(e, LaunchDescription):
                    walk(e.entities)
        walk(self.entities)
        return out


from . import actions, conditions, substitutions  # noqa: E402,F401  (after the base classes)
