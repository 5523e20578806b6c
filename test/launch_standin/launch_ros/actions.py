"""launch_ros.actions stand-in: Node and PushRosNamespace.

The command line is built in the order of launch_ros 0.28 (launch_ros/actions/node.py,
__init__ + _perform_substitutions + execute):

    <lib>/<package>/<executable> [arguments...] [--ros-args ros_arguments...]
        --ros-args [-r __node:=NAME] [-r __ns:=/NS] [--params-file F]... [-r from:=to]...

* ``name=`` becomes ``-r __node:=NAME`` — a *global* remap: every node in that process is renamed.
* the namespace is ``prefix_namespace(ros_namespace pushed by PushRosNamespace, namespace=)`` made
  absolute (launch_ros/utilities/namespace_utils.py); an absolute ``namespace=`` ignores the pushed one;
  no namespace at all (neither given) adds no ``__ns``.
* each parameters entry: a path -> ``--params-file PATH``; a dict -> a temporary YAML
  ``{'/**' (or the full node name when name and namespace are known): {'ros__parameters': flat}}``
  with nested keys flattened to dotted names and substitution values YAML-parsed
  (launch_ros/utilities/evaluate_parameters.py), then ``--params-file`` of it.
* the executable is ``<prefix>/lib/<package>/<executable>`` for the prefix of AMENT_PREFIX_PATH that
  registers the package (ament_index_python.get_executable_path / packages resource).
"""
from __future__ import annotations

import os
import pathlib
import re
import tempfile
from collections.abc import Mapping
from typing import Any

import yaml

import launch
from launch.substitutions import normalize, perform

_NS_RE = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)*/?$")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def prefix_namespace(base_ns: str | None, ns: str | None) -> str | None:
    if base_ns is None:
        return ns
    if ns is None:
        return base_ns
    if ns.startswith("/"):
        return ns
    if ns == "":
        return base_ns
    return base_ns.rstrip("/") + "/" + ns if base_ns not in ("", "/") else "/" + ns


def make_namespace_absolute(ns: str | None) -> str | None:
    if ns is None:
        return None
    return ns if ns.startswith("/") else "/" + ns


def validate_namespace(ns: str) -> None:
    if ns != "/" and (ns.endswith("/") or not _NS_RE.match(ns) or "//" in ns):
        raise ValueError(f"invalid namespace {ns!r}")


def validate_node_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise ValueError(f"invalid node name {name!r}")


def find_executable(package: str, executable: str) -> str:
    """ament_index: the prefix whose share/ament_index/resource_index/packages/<package> exists."""
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        if os.path.isfile(os.path.join(prefix, "share", "ament_index", "resource_index", "packages", package)):
            path = os.path.join(prefix, "lib", package, executable)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"executable '{executable}' not found on the libexec directory "
                                        f"'{os.path.join(prefix, 'lib', package)}'")
            return path
    raise LookupError(f"package '{package}' not found, searching: {os.environ.get('AMENT_PREFIX_PATH', '')}")


class PushRosNamespace(launch.Action):
    """launch_ros/actions/push_ros_namespace.py: ros_namespace := absolute(prefix(previous, pushed))."""

    def __init__(self, namespace: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.namespace = normalize(namespace)

    def execute(self, context: Any) -> None:
        pushed = perform(context, self.namespace)
        previous = context.launch_configurations.get("ros_namespace")
        ns = make_namespace_absolute(prefix_namespace(previous, pushed))
        validate_namespace(ns)
        context.launch_configurations["ros_namespace"] = ns


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def _evaluate_value(context: Any, value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) and not isinstance(value, str):
        return value
    if isinstance(value, str):
        return value
    if isinstance(value, launch.Substitution) or (isinstance(value, list) and value and all(
            isinstance(v, (str, launch.Substitution)) for v in value)
            and any(isinstance(v, launch.Substitution) for v in value)):
        text = perform(context, value)
        # evaluate_parameters: a substitution's text is read as YAML (so "true" -> True, "3" -> 3),
        # keeping the text when YAML gives a mapping/null
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError:
            return text
        return text if loaded is None or isinstance(loaded, dict) else loaded
    if isinstance(value, (list, tuple)):
        return [_evaluate_value(context, v) for v in value]
    raise TypeError(f"unsupported parameter value {value!r}")


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

    def _dict_params(self, context: Any, params: Mapping) -> dict[str, Any]:
        flat: dict[str, Any] = {}
        for k, v in params.items():
            key = perform(context, k) if not isinstance(k, str) else k
            if isinstance(v, Mapping):
                sub: dict[str, Any] = {}
                _flatten("", self._dict_params(context, v), sub)
                for sk, sv in sub.items():
                    flat[f"{key}.{sk}"] = sv
            else:
                flat[key] = _evaluate_value(context, v)
        return flat

    def execute(self, context: Any) -> None:
        package = perform(context, self.package) if self.package is not None else None
        executable = perform(context, self.executable)
        cmd = [find_executable(package, executable) if package is not None else executable]
        cmd += [perform(context, a) for a in (self.arguments or [])]
        if self.ros_arguments is not None:
            cmd += ["--ros-args"] + [perform(context, a) for a in self.ros_arguments]
        cmd += ["--ros-args"]
        if self.node_name is not None:
            self.expanded_node_name = perform(context, self.node_name).lstrip("/")
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
                flat = self._dict_params(context, entry)
                key = "/**"
                if self.expanded_node_name is not None and ns is not None:
                    key = (ns.rstrip("/") + "/" + self.expanded_node_name)
                with tempfile.NamedTemporaryFile("w", prefix="launch_params_", delete=False) as h:
                    yaml.dump({key: {"ros__parameters": flat}}, h, default_flow_style=False)
                path = h.name
                self.generated_param_files.append(path)
            elif isinstance(entry, (str, pathlib.Path, launch.Substitution, list)):
                path = str(entry) if isinstance(entry, pathlib.Path) else perform(context, entry)
            else:
                raise TypeError(f"invalid parameters entry {entry!r}")
            self.param_files.append(path)
            cmd += ["--params-file", path]
        for src, dst in self.remappings or []:
            cmd += ["-r", f"{perform(context, src)}:={perform(context, dst)}"]
        self.cmd = cmd
        respawn = self.respawn
        if not isinstance(respawn, bool):
            from launch.conditions import evaluate_condition_expression
            respawn = evaluate_condition_expression(context, respawn)
        self.respawn_value = respawn
        delay = self.respawn_delay
        self.respawn_delay_value = float(perform(context, delay)) if isinstance(
            delay, (str, launch.Substitution, list)) else float(delay or 0.0)
        context.locals.setdefault("started_nodes", []).append(self)
        return None
