"""launch_ros.actions stand-in: Node and PushRosNamespace.

The command line is built in the order of launch_ros 0.28 (launch_ros/actions/node.py,
__init__ + _perform_substitutions + execute):

    <lib>/<package>/<executable> [arguments...] [--ros-args ros_arguments...]
        --ros-args [-r __node:=NAME] [-r __ns:=/NS] [--params-file F]... [-r from:=to]...

* ``name=`` becomes ``-r __node:=NAME`` — a *global* remap: every node in that process is renamed.
  The name is validated as given (rclpy.validate_node_name; node.py's ``lstrip('/')`` result is
  discarded, so ``/planner`` is refused).
* the namespace is ``prefix_namespace(ros_namespace pushed by PushRosNamespace, namespace=)`` made
  absolute (launch_ros/utilities/namespace_utils.py: trailing '/' stripped; an absolute ``namespace=``
  ignores the pushed one); neither given adds no ``__ns``. Validated with rclpy.validate_namespace.
* each parameters entry, in order: a path -> ``--params-file PATH``, or, when no such file exists, a
  warning and nothing (node.py: "Parameter file path is not a file"); a dict -> a temporary YAML
  ``{node_name if fully specified else '/**': {'ros__parameters': params}}``, written with
  ``yaml.dump`` (lists are tuples there, so ``!!python/tuple``, which rcl reads as a list), keys of
  nested dicts joined with '.', values as normalize_parameter_dict + evaluate_parameter_dict make
  them (utilities/normalize_parameters.py, evaluate_parameters.py), then ``--params-file`` of it.
  "Fully specified" = both the name and the namespace known (a pushed namespace counts).
* the executable: ExecutableInPackage (substitutions/executable_in_package.py) — the package prefix
  from the ament index, then ``which(executable, path=<prefix>/lib/<package>)``; a missing one is a
  SubstitutionFailure when the Node executes. ``ALLOW_MISSING`` (test-only, not upstream) names
  executables that evaluate to their would-be path instead, for tests that must not need them.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

import yaml
from rclpy.validate_namespace import validate_namespace
from rclpy.validate_node_name import validate_node_name

import launch
from launch.substitutions import normalize, perform

ALLOW_MISSING: set[str] = set()
"""Test-only: executables resolved to ``<prefix>/lib/<package>/<name>`` even when not installed."""


def prefix_namespace(base_ns: str | None, ns: str | None) -> str | None:
    """launch_ros/utilities/namespace_utils.py prefix_namespace."""
    if base_ns is None and ns is None:
        return None
    if ns is None:
        combined = base_ns
    elif not base_ns or ns.startswith("/"):
        combined = ns
    else:
        combined = ("" if base_ns == "/" else base_ns) + "/" + ns
    return combined if combined == "/" else combined.rstrip("/")


def make_namespace_absolute(ns: str | None) -> str | None:
    if ns is None:
        return None
    return ns if ns.startswith("/") else "/" + ns


def find_executable(package: str, executable: str) -> str:
    """ament_index: the prefix whose share/ament_index/resource_index/packages/<package> exists."""
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        if os.path.isfile(os.path.join(prefix, "share", "ament_index", "resource_index", "packages", package)):
            libexec = os.path.join(prefix, "lib", package)
            if not os.path.exists(libexec):
                raise launch.SubstitutionFailure(f"package '{package}' found at '{prefix}', but libexec "
                                                 f"directory '{libexec}' does not exist")
            found = shutil.which(executable, path=libexec)
            if found is None and executable in ALLOW_MISSING:
                return os.path.join(libexec, executable)
            if found is None:
                raise launch.SubstitutionFailure(f"executable '{executable}' not found on the libexec "
                                                 f"directory '{libexec}' ")
            return found
    raise LookupError(f"package '{package}' not found, searching: {os.environ.get('AMENT_PREFIX_PATH', '')}")


class PushRosNamespace(launch.Action):
    """launch_ros/actions/push_ros_namespace.py: ros_namespace := absolute(prefix(previous, pushed));
    an invalid result is a SubstitutionFailure."""

    def __init__(self, namespace: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.namespace = normalize(namespace)

    def execute(self, context: Any) -> None:
        pushed = perform(context, self.namespace)
        previous = context.launch_configurations.get("ros_namespace")
        ns = make_namespace_absolute(prefix_namespace(previous, pushed))
        try:
            validate_namespace(ns)
        except Exception:
            raise launch.SubstitutionFailure(
                f"The resulting namespace is invalid: [previous_namespace='{previous}', "
                f"pushed_namespace='{pushed}']") from None
        context.launch_configurations["ros_namespace"] = ns


PushROSNamespace = PushRosNamespace


def _uniform(name: str, values: list[Any]) -> tuple:
    """evaluate_parameters.check_sequence_type_is_allowed: non-empty, one of bool/int/float/str, all alike."""
    if not values or type(values[0]) not in (bool, int, float, str) or not all(
            isinstance(v, type(values[0])) for v in values):
        raise TypeError("Expected a non-empty sequence, with items of uniform type. Allowed sequence item types "
                        f'are bool, int, float, str. Got inconsistent input for "{name}"')
    return tuple(values)


def _from_text(name: str, text: str) -> Any:
    """A substitution's text read as YAML (evaluate_parameter_dict): '' stays '', a scalar is typed, a
    uniform list becomes a tuple; a mapping, null or mixed list is a TypeError."""
    if text == "":
        text = "''"
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        raise TypeError(f"Unable to parse the value of parameter {name} as yaml.") from None
    if type(loaded) in (bool, int, float, str, bytes):
        return loaded
    if isinstance(loaded, list):
        return _uniform(name, loaded)
    raise TypeError(f"Allowed value types are bytes, bool, int, float, str, Sequence[bool], Sequence[int], "
                    f'Sequence[float], Sequence[str]. Got {type(loaded)} for "{name}".')


def _is_subs(value: Any) -> bool:
    return isinstance(value, launch.Substitution)


def _evaluate_value(context: Any, name: str, value: Any) -> Any:
    """normalize_parameter_dict + evaluate_parameter_dict (launch_ros 0.28 utilities) for one value."""
    if isinstance(value, str):  # yaml.dump then yaml.safe_load: the same string
        return value
    if _is_subs(value):
        return _from_text(name, perform(context, value))
    if isinstance(value, (bool, int, float, bytes)):
        return value
    if isinstance(value, (list, tuple)):
        kinds = set()
        for v in value:
            if _is_subs(v):
                kinds.add("subs")
            elif isinstance(v, str):
                kinds.add(str)
            elif isinstance(v, bool):
                kinds.add(bool)
            elif isinstance(v, int):
                kinds.add(int)
            elif isinstance(v, float):
                kinds.add(float)
            elif isinstance(v, (list, tuple)):
                kinds.add(tuple)
            else:
                raise TypeError(f"unsupported parameter list item {v!r}")
        if kinds == {int}:
            return tuple(int(v) for v in value)
        if kinds in ({float}, {int, float}):
            return tuple(float(v) for v in value)
        if "subs" in kinds and kinds <= {str, "subs"}:  # one string made of the pieces
            return _from_text(name, perform(context, list(value)))
        if kinds == {bool}:
            return tuple(bool(v) for v in value)
        if not value:  # an empty tuple is not a valid value (ensure_argument_type)
            raise TypeError(f"parameter {name}: an empty list has no type")
        items = [perform(context, v) if not isinstance(v, (bool, int, float, str)) else yaml.dump(v)
                 for v in value]
        return _uniform(name, [yaml.safe_load(i) for i in items])
    raise TypeError(f"Unexpected type for parameter value {value!r}")


def _evaluate_dict(context: Any, params: Mapping, prefix: str = "") -> dict[str, Any]:
    """Nested dicts collapse to dotted names (normalize_parameter_dict's ``_prefix``)."""
    out: dict[str, Any] = {}
    for k, v in params.items():
        key = perform(context, k)
        full = f"{prefix}.{key}" if prefix else key
        if isinstance(v, Mapping):
            out.update(_evaluate_dict(context, v, full))
        else:
            out[full] = _evaluate_value(context, full, v)
    return out


def _typed_bool(context: Any, value: Any) -> bool:
    """launch 3.7 ExecuteLocal respawn: perform_typed_substitution(bool) = coerce_to_type: '1'/'0' map to
    true/false, then YAML rules (so 'yes'/'on' are true too); anything not a bool is a ValueError."""
    if isinstance(value, bool):
        return value
    text = perform(context, value)
    loaded = yaml.safe_load({"1": "true", "0": "false"}.get(text, text)) if text else text
    if not isinstance(loaded, bool):
        raise ValueError(f"Cannot convert value '{text}' to '{bool}'")
    return loaded


class Node(launch.Action):
    def __init__(self, *, executable: Any, package: Any = None, name: Any = None, namespace: Any = None,
                 exec_name: Any = None, parameters: list | None = None, remappings: list | None = None,
                 ros_arguments: list | None = None, arguments: list | None = None, output: str = "log",
                 respawn: Any = False, respawn_delay: float | None = None, condition: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(condition=condition)
        if parameters is not None and not isinstance(parameters, list):
            raise TypeError("Node parameters must be a list")
        self.package, self.executable = package, executable
        self.node_name, self.node_namespace, self.exec_name = name, namespace, exec_name
        self.parameters, self.remappings = parameters, remappings
        self.ros_arguments, self.arguments = ros_arguments, arguments
        self.output, self.respawn, self.respawn_delay = output, respawn, respawn_delay
        self.extra = kwargs
        # filled by execute
        self.cmd: list[str] | None = None
        self.expanded_node_name: str | None = None
        self.expanded_node_namespace: str | None = None
        self.param_files: list[str] = []
        self.generated_param_files: list[str] = []
        self.warnings: list[str] = []

    def execute(self, context: Any) -> None:
        package = perform(context, self.package) if self.package is not None else None
        executable = perform(context, self.executable)
        cmd = [find_executable(package, executable) if package is not None else executable]
        cmd += [perform(context, a) for a in (self.arguments or [])]
        if self.ros_arguments is not None:
            cmd += ["--ros-args"] + [perform(context, a) for a in self.ros_arguments]
        cmd += ["--ros-args"]
        if self.node_name is not None:
            self.expanded_node_name = perform(context, self.node_name)
            validate_node_name(self.expanded_node_name)
            cmd += ["-r", f"__node:={self.expanded_node_name}"]
        given = perform(context, self.node_namespace) if self.node_namespace is not None else None
        ns = make_namespace_absolute(prefix_namespace(context.launch_configurations.get("ros_namespace"), given))
        if ns is not None:
            validate_namespace(ns)
            self.expanded_node_namespace = ns
            cmd += ["-r", f"__ns:={ns}"]
        for entry in self.parameters or []:
            if isinstance(entry, Mapping):
                params = _evaluate_dict(context, entry)
                key = "/**"
                if self.expanded_node_name is not None and ns is not None:
                    key = prefix_namespace(ns, self.expanded_node_name)
                with tempfile.NamedTemporaryFile("w", prefix="launch_params_", delete=False) as h:
                    yaml.dump({key: {"ros__parameters": params}}, h, default_flow_style=False)
                path = h.name
                self.generated_param_files.append(path)
            elif isinstance(entry, (str, pathlib.Path, launch.Substitution, list)):
                path = str(entry) if isinstance(entry, pathlib.Path) else perform(context, entry)
                if not os.path.isfile(path):
                    self.warnings.append(f"Parameter file path is not a file: {path}")
                    continue
            else:
                raise TypeError(f"invalid parameters entry {entry!r}")
            self.param_files.append(path)
            cmd += ["--params-file", path]
        for src, dst in self.remappings or []:
            cmd += ["-r", f"{perform(context, src)}:={perform(context, dst)}"]
        self.cmd = cmd
        self.respawn_value = _typed_bool(context, self.respawn)
        delay = self.respawn_delay
        if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float))):
            raise TypeError(f"respawn_delay is Optional[float] (launch ExecuteLocal), got {delay!r}")
        self.respawn_delay_value = float(delay or 0.0)
        context.locals.setdefault("started_nodes", []).append(self)
        return None
