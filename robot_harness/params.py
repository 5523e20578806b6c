"""ROS 2 parameter files the way Nav2's launch files and rcl treat them, without rclpy.

One parameter file can hold every node's section (``supervisor: ros__parameters: ...``);
the launch file and the in-process bring-up both read it through these functions,
so a node gets the same values either way:

* :func:`normalize_namespace` refuses what rcl would refuse, with the rule it breaks.
* :func:`rewrite_params` is what Nav2's bringup does to a params file for a namespace:
  the ``<robot_namespace>`` token replaced (humble/jazzy ``ReplaceString``), the document
  nested under the namespace (nav2_common ``RewrittenYaml(root_key=namespace)``).
* :func:`node_params` is the flattened ``ros__parameters`` rclpy applies to one node,
  following rcl_yaml_param_parser (how keys nest into node names) and rclpy's
  ``_populate_node_parameters_from_rcl_params`` (which names match, which wins).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

__all__ = ["NAMESPACE_TOKEN", "NAMESPACE_MAX_LENGTH", "normalize_namespace", "rewrite_params",
           "merge_params", "node_params", "dump_params"]

NAMESPACE_TOKEN = "<robot_namespace>"
"""The token Nav2 params files use where the robot's namespace goes (``<robot_namespace>/scan``)."""

NAMESPACE_MAX_LENGTH = 245
"""rmw/validate_namespace.h: RMW_NAMESPACE_MAX_LENGTH = RMW_TOPIC_MAX_NAME_LENGTH (255 - 8) - 2."""

_PARAMS_KEY = "ros__parameters"


def normalize_namespace(ns: str | None) -> str:
    """``''``/``'/'``/``None`` -> ``''`` (the root); ``'robot1'`` or ``'/robot1'`` -> ``'/robot1'``.

    A relative name is made absolute as launch_ros's ``make_namespace_absolute`` does; the
    result must then pass rmw's ``rmw_validate_namespace`` (the rules rclpy's
    ``validate_namespace`` reports), else a ``ValueError`` naming the rule it breaks.
    """
    if ns is None:
        return ""
    if not isinstance(ns, str):
        raise TypeError(f"namespace must be a str, got {type(ns).__name__}")
    if ns in ("", "/"):
        return ""
    full = ns if ns.startswith("/") else "/" + ns

    def refuse(rule: str) -> ValueError:
        return ValueError(f"invalid namespace {ns!r}: namespace must {rule}")

    if full.endswith("/"):
        raise refuse("not end with a '/', unless only a '/'")
    bad = re.search(r"[^A-Za-z0-9_/]", full)
    if bad:
        raise refuse(f"not contain characters other than alphanumerics, '_', or '/' (found {bad.group()!r})")
    if "//" in full:
        raise refuse("not contain repeated '/'")
    if re.search(r"/[0-9]", full):
        raise refuse("not have a token that starts with a number")
    if len(full) > NAMESPACE_MAX_LENGTH:
        raise refuse(f"not exceed {NAMESPACE_MAX_LENGTH} characters (RMW_NAMESPACE_MAX_LENGTH), "
                     f"it has {len(full)}")
    return full


def rewrite_params(text: str, namespace: str) -> dict[str, Any]:
    """The params document ``text`` as the nodes under ``namespace`` should read it.

    ``<robot_namespace>`` becomes the normalized namespace (``/robot1``; ``''`` at the root,
    so ``<robot_namespace>/scan`` is ``/scan``). Under a namespace, every section whose key
    is relative (``supervisor:``, ``planner:``) is nested under the namespace's name, as
    ``RewrittenYaml(root_key='robot1')`` nests the whole document, so rcl reads
    ``robot1/supervisor`` and the section reaches ``/robot1/supervisor``. Absolute keys
    (``/**``, ``/**/planner``, ``/robot2/planner``) already say which nodes they mean and stay
    where they are: nested, rcl would read ``robot1//**`` and refuse the whole file
    ("contains repeated forward slash").
    """
    ns = normalize_namespace(namespace)
    data = yaml.safe_load(text.replace(NAMESPACE_TOKEN, ns))
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"a parameter file holds a mapping of node names, not {type(data).__name__}")
    if not ns:
        return dict(data)
    absolute = {k: v for k, v in data.items() if str(k).startswith("/")}
    relative = {k: v for k, v in data.items() if not str(k).startswith("/")}
    out: dict[str, Any] = dict(absolute)
    if relative:
        out[ns.lstrip("/")] = relative
    return out


def merge_params(documents: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One document holding every given document's sections, in order.

    A node key in two documents is refused: in one file rcl would merge the two sections
    and let the later value win, which hides which file meant what.
    """
    out: dict[str, Any] = {}
    for doc in documents:
        for key, section in (doc or {}).items():
            if key in out:
                raise ValueError(f"node key {key!r} appears in more than one parameter file")
            out[key] = section
    return out


def dump_params(data: Mapping[str, Any]) -> str:
    """YAML text keeping the sections' order (order decides which section wins in rcl)."""
    return yaml.safe_dump(dict(data), sort_keys=False, default_flow_style=False)


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def _sections(data: Mapping[str, Any], prefix: str, out: list[tuple[str, dict[str, Any]]]) -> None:
    """(node name key, flat params) as rcl_yaml_param_parser builds them: nested keys above
    ``ros__parameters`` are joined with '/' into one node name; a name seen again adds to
    (and overrides in) the entry made where it was first seen (parse.c ``find_node``)."""
    for key, value in data.items():
        name = f"{prefix}/{key}" if prefix else str(key)
        if not isinstance(value, Mapping):
            raise ValueError(f"parameter file: {name!r} holds a value where a node name or "
                             f"'{_PARAMS_KEY}' was expected")
        if _PARAMS_KEY in value:
            flat: dict[str, Any] = {}
            _flatten("", value[_PARAMS_KEY] or {}, flat)
            for seen, params in out:
                if seen == name:
                    params.update(flat)
                    break
            else:
                out.append((name, flat))
            rest = {k: v for k, v in value.items() if k != _PARAMS_KEY}
            if rest:
                _sections(rest, name, out)
        else:
            _sections(value, name, out)


def _matches(key: str, fqn: str) -> bool:
    """rclpy node.cpp: a leading '/' is added, every ``/*`` becomes ``(/\\w+)`` (so ``/**`` is
    ``(/\\w+)*``), the rest is taken as a regular expression (rcl only lets names, ``*`` and ``**``
    through) and the whole fully qualified name must match it."""
    if not key.startswith("/"):
        key = "/" + key
    try:
        return re.fullmatch(key.replace("/*", "(/\\w+)"), fqn, flags=re.ASCII) is not None
    except re.error as exc:  # rcl lets only names, * and ** through: anything else is the file's mistake
        raise ValueError(f"parameter file: {key!r} is not a node name (names, * and ** only): {exc}") from exc


def node_params(data: Mapping[str, Any], node_name: str, namespace: str = "") -> dict[str, Any]:
    """The flattened (``a.b``) parameters rclpy gives the node ``<namespace>/<node_name>`` from ``data``.

    Every section whose node key matches the fully qualified name is applied in the order
    the keys first appear in the file, a later one overriding an earlier one: a ``/**``
    section after ``supervisor:`` wins over it (no preference for the more specific key).
    Several files given to one node behave as one file, their sections in that order.
    """
    if "/" in node_name or not node_name:
        raise ValueError(f"node_name must be a plain node name, got {node_name!r}")
    ns = normalize_namespace(namespace)
    fqn = f"{ns}/{node_name}"
    sections: list[tuple[str, dict[str, Any]]] = []
    _sections(data, "", sections)
    out: dict[str, Any] = {}
    for key, params in sections:
        if _matches(key, fqn):
            out.update(params)
    return out
