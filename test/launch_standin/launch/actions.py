"""launch.actions stand-in: DeclareLaunchArgument, OpaqueFunction, GroupAction, SetLaunchConfiguration."""
from __future__ import annotations

from typing import Any, Callable

import launch
from launch.substitutions import normalize, perform


class DeclareLaunchArgument(launch.Action):
    """launch/actions/declare_launch_argument.py (3.7): a default outside ``choices`` is a RuntimeError at
    construction; at execution a missing required argument and a value outside ``choices`` are errors."""

    def __init__(self, name: str, *, default_value: Any = None, description: str | None = None,
                 choices: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name = name
        self.default_value = None if default_value is None else normalize(default_value)
        self.description = description or ("no description given" if choices is None
                                           else f"One of: {choices}")
        self.choices = None if choices is None else list(choices)
        if self.choices is not None and self.default_value is not None:
            if all(hasattr(s, "text") for s in self.default_value):
                default = "".join(s.text for s in self.default_value)
                if default not in self.choices:
                    raise RuntimeError(f"Provided default_value '{default}' is not in provided choices "
                                       f"'{self.choices}'.")

    def execute(self, context: Any) -> None:
        if self.name not in context.launch_configurations:
            if self.default_value is None:
                raise RuntimeError(f"Required launch argument '{self.name}' (description: "
                                   f"'{self.description}') was not provided")
            context.launch_configurations[self.name] = perform(context, self.default_value)
        value = context.launch_configurations[self.name]
        if self.choices is not None and value not in self.choices:
            raise RuntimeError(f"Argument '{self.name}' provided value '{value}' is not valid. "
                               f"Valid options are: {self.choices}")
        return None


class SetLaunchConfiguration(launch.Action):
    def __init__(self, name: Any, value: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name, self.value = normalize(name), normalize(value)

    def execute(self, context: Any) -> None:
        context.launch_configurations[perform(context, self.name)] = perform(context, self.value)


class OpaqueFunction(launch.Action):
    """launch/actions/opaque_function.py: ``function(context, *args, **kwargs)`` returns entities or None."""

    def __init__(self, *, function: Callable[..., Any], args: list | None = None, kwargs: dict | None = None,
                 **left: Any) -> None:
        super().__init__(**left)
        if not callable(function):
            raise TypeError("OpaqueFunction expected a callable for 'function'")
        self.function, self.args, self.kwargs = function, list(args or []), dict(kwargs or {})

    def execute(self, context: Any) -> list[Any] | None:
        return self.function(context, *self.args, **self.kwargs)


class _PopConfigs(launch.Action):
    def execute(self, context: Any) -> None:
        context._pop_launch_configurations()


class GroupAction(launch.Action):
    """launch/actions/group_action.py: scoped pushes launch configurations (copied when forwarding, else
    only ``launch_configurations``) and pops them after the group's actions."""

    def __init__(self, actions: list[Any], *, scoped: bool = True, forwarding: bool = True,
                 launch_configurations: dict | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.actions = list(actions)
        self.scoped, self.forwarding = scoped, forwarding
        self.launch_configurations = dict(launch_configurations or {})

    def execute(self, context: Any) -> list[Any]:
        sets = [SetLaunchConfiguration(k, v) for k, v in self.launch_configurations.items()]
        if not self.scoped:
            return sets + self.actions
        context._push_launch_configurations(forwarding=self.forwarding)
        return sets + self.actions + [_PopConfigs()]
