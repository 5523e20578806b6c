"""launch.substitutions stand-in: TextSubstitution, LaunchConfiguration, PythonExpression."""
from __future__ import annotations

from typing import Any

import launch


def normalize(value: Any) -> list[Any]:
    """launch.utilities.normalize_to_list_of_substitutions: str -> TextSubstitution; list concatenates."""
    if isinstance(value, (str, launch.Substitution)):
        value = [value]
    out = []
    for v in value:
        if isinstance(v, str):
            out.append(TextSubstitution(text=v))
        elif isinstance(v, launch.Substitution):
            out.append(v)
        else:
            raise TypeError(f"expected str or Substitution, got {type(v).__name__}: {v!r}")
    return out


def perform(context: Any, value: Any) -> str:
    """launch.utilities.perform_substitutions: concatenation of each performed piece."""
    return "".join(s.perform(context) for s in normalize(value))


class TextSubstitution(launch.Substitution):
    def __init__(self, *, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError("TextSubstitution text must be a str")
        self.text = text

    def perform(self, context: Any) -> str:
        return self.text


class LaunchConfiguration(launch.Substitution):
    """launch/substitutions/launch_configuration.py: the value, else the default, else SubstitutionFailure."""

    def __init__(self, variable_name: Any, *, default: Any = None) -> None:
        self.variable_name = normalize(variable_name)
        self.default = None if default is None else normalize(default)

    def perform(self, context: Any) -> str:
        name = perform(context, self.variable_name)
        if name in context.launch_configurations:
            return context.launch_configurations[name]
        if self.default is None:
            raise launch.SubstitutionFailure(f"launch configuration '{name}' does not exist")
        return perform(context, self.default)

    def __repr__(self) -> str:
        return f"LaunchConfiguration({''.join(getattr(s, 'text', '?') for s in self.variable_name)!r})"


class PythonExpression(launch.Substitution):
    """launch/substitutions/python_expression.py: eval of the joined text, with ``math`` symbols (str of the result)."""

    def __init__(self, expression: Any, python_modules: Any = ("math",)) -> None:
        self.expression = normalize(expression)
        self.python_modules = list(python_modules)

    def perform(self, context: Any) -> str:
        import importlib
        import math

        env: dict[str, Any] = {}
        for m in self.python_modules:
            mod = importlib.import_module(m)
            env[m] = mod
            if m == "math":
                env.update(vars(math))
        return str(eval(perform(context, self.expression), {}, env))  # noqa: S307 - as upstream
