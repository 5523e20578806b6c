"""robot_harness.params: namespaces, Nav2's params rewriting and rcl's node matching.

Each fact is checked twice: against the value upstream's source gives (cited), and against the
real rcl/rclpy of this install (the parameter overrides a node created from the same files gets),
so a wrong reading of upstream and a wrong implementation both fail.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from robot_harness.params import (NAMESPACE_MAX_LENGTH, dump_params, merge_params, node_params,
                                  normalize_namespace, rewrite_params)

P = lambda **kw: {"ros__parameters": kw}  # noqa: E731


def rclpy_overrides(tmp_path: Path, docs: list, name: str, namespace: str) -> dict:
    """What a real rclpy node /<namespace>/<name> receives from ``--params-file`` of each doc, in order
    (rclpy Node::get_parameters -> _populate_node_parameters_from_rcl_params)."""
    import rclpy
    from rclpy.context import Context

    args = ["--ros-args"]
    for i, doc in enumerate(docs):
        path = tmp_path / f"params_{i}.yaml"
        path.write_text(doc if isinstance(doc, str) else dump_params(doc))
        args += ["--params-file", str(path)]
    context = Context()
    rclpy.init(args=args, context=context)
    try:
        node = rclpy.create_node(name, namespace=namespace or "/", context=context, enable_rosout=False,
                                 start_parameter_services=False)
        try:
            return {k: p.value for k, p in node._parameter_overrides.items()}
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def as_file(docs: list) -> dict:
    """Several --params-file behave as one file, their sections in order (rcl arguments.c parses every
    file into the same rcl_params_t)."""
    if len(docs) == 1:
        return docs[0]
    out: dict = {}
    for d in docs:
        d = yaml.safe_load(d) if isinstance(d, str) else d
        for k, v in d.items():
            out.setdefault(k, {}).setdefault("ros__parameters", {}).update(v["ros__parameters"])
    return out


# --------------------------------------------------------------------------- normalize_namespace

@pytest.mark.parametrize("given,expected", [
    ("", ""), ("/", ""), (None, ""),  # the root
    ("robot1", "/robot1"), ("/robot1", "/robot1"),  # launch_ros make_namespace_absolute
    ("fleet/robot_1", "/fleet/robot_1"), ("/_a", "/_a"),
])
def test_normalize_namespace(given, expected):
    assert normalize_namespace(given) == expected


@pytest.mark.parametrize("given,rule", [
    # rmw/src/validate_namespace.c, as rclpy.validate_namespace words them
    ("/robot1/", "not end with a '/'"),
    ("robot-1", "alphanumerics, '_', or '/'"),
    ("robot 1", "alphanumerics, '_', or '/'"),
    ("~/x", "alphanumerics"),
    ("//robot1", "repeated '/'"),
    ("/a//b", "repeated '/'"),
    ("1robot", "token that starts with a number"),
    ("/fleet/2", "token that starts with a number"),
    ("/" + "a" * NAMESPACE_MAX_LENGTH, "not exceed 245"),
])
def test_invalid_namespaces_are_refused_with_the_rule(given, rule):
    with pytest.raises(ValueError, match=rule.replace("(", r"\(")) as err:
        normalize_namespace(given)
    assert repr(given) in str(err.value)


@pytest.mark.parametrize("ns", ["robot1", "/robot1", "/a/b_c/d1", "/robot1/", "robot-1", "//a", "/1a", "/a/1",
                                "/" + "a" * (NAMESPACE_MAX_LENGTH - 1), "/" + "a" * NAMESPACE_MAX_LENGTH, "/ä"])
def test_normalize_namespace_agrees_with_rclpy(ns):
    """rclpy.validate_namespace (rmw_validate_namespace) on the absolute form accepts exactly what we accept."""
    from rclpy.exceptions import InvalidNamespaceException
    from rclpy.validate_namespace import validate_namespace

    absolute = ns if ns.startswith("/") else "/" + ns
    try:
        validate_namespace(absolute)
        rclpy_ok = True
    except InvalidNamespaceException:
        rclpy_ok = False
    try:
        ours = normalize_namespace(ns)
    except ValueError:
        ours = None
    assert (ours is not None) == rclpy_ok, ns
    if rclpy_ok:
        assert ours == absolute


def test_the_module_imports_no_rclpy():
    code = "import sys, robot_harness.params; print('rclpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- rewrite_params

TEXT = """\
supervisor:
  ros__parameters:
    speech_topic: <robot_namespace>/speech/say
    n: 3
/**:
  ros__parameters:
    use_tf: false
/**/planner:
  ros__parameters:
    backend: scripted
"""


def test_rewrite_at_the_root_replaces_the_token_with_nothing_and_nests_nothing():
    # Nav2 humble/jazzy bringup_launch.py: ReplaceString(replacements={'<robot_namespace>': ('/', namespace)},
    # condition=IfCondition(use_namespace)); at the root ours gives '' so '<robot_namespace>/x' is '/x'.
    data = rewrite_params(TEXT, "")
    assert list(data) == ["supervisor", "/**", "/**/planner"]
    assert data["supervisor"]["ros__parameters"]["speech_topic"] == "/speech/say"
    assert rewrite_params(TEXT, "/") == data


def test_rewrite_under_a_namespace_nests_relative_sections_like_rewritten_yaml():
    # nav2_common rewritten_yaml.py: `if root_key: data = {root_key: data}`; rcl then reads robot1/supervisor.
    data = rewrite_params(TEXT, "robot1")
    assert data["robot1"] == {"supervisor": {"ros__parameters": {"speech_topic": "/robot1/speech/say", "n": 3}}}
    # absolute keys stay at the top: nested, rcl would read 'robot1//**' (next test)
    assert data["/**"] == {"ros__parameters": {"use_tf": False}}
    assert "/**/planner" in data
    assert rewrite_params(TEXT, "/robot1") == data


def test_a_wildcard_nested_under_a_namespace_is_refused_by_rcl(tmp_path):
    # why rewrite_params keeps absolute keys out of the nesting: rcl_yaml_param_parser parse.c _validate_name
    # ("contains repeated forward slash") refuses the whole file, rclpy.init fails
    with pytest.raises(Exception, match="repeated forward slash"):  # rclpy's _rclpy.RCLError
        rclpy_overrides(tmp_path, [{"robot1": {"/**": P(a=1)}}], "supervisor", "/robot1")


@pytest.mark.parametrize("ns", ["", "/robot1", "/fleet/robot_2"])
@pytest.mark.parametrize("name", ["supervisor", "planner", "verifier"])
def test_rewritten_sections_reach_the_nodes_under_the_namespace(tmp_path, ns, name):
    data = rewrite_params(TEXT, ns)
    ours = node_params(data, name, ns)
    assert ours == rclpy_overrides(tmp_path, [data], name, ns)
    assert ours.get("use_tf") is False
    if name == "supervisor":
        assert ours["speech_topic"] == f"{ns}/speech/say"
    if name == "planner":
        assert ours["backend"] == "scripted"


def test_rewrite_refuses_a_document_that_is_not_a_mapping():
    with pytest.raises(ValueError, match="mapping of node names"):
        rewrite_params("- a\n- b\n", "")
    assert rewrite_params("", "/robot1") == {}


def test_merge_params_keeps_order_and_refuses_a_key_twice():
    assert list(merge_params([{"b": P(x=1)}, {"a": P(x=2)}])) == ["b", "a"]
    with pytest.raises(ValueError, match="'a' appears in more than one"):
        merge_params([{"a": P(x=1)}, {"a": P(x=2)}])
    # dump_params keeps the order (yaml.safe_dump would sort '/**' first and change which wins)
    assert list(yaml.safe_load(dump_params({"supervisor": P(a=1), "/**": P(a=2)}))) == ["supervisor", "/**"]


# --------------------------------------------------------------------------- node_params

# (docs given as --params-file in order, node name, namespace, expected): rclpy node.cpp
# _populate_node_parameters_from_rcl_params: a '/' is put before a key without one, '/*' -> '(/\w+)'
# (so '/**' is '(/\w+)*'), regex_match on the fully qualified name; matching sections are applied in the
# order of rcl_params_t's node_names, a later one overriding (parse.c find_node: a key seen again adds to
# the entry where it was first seen).
CASES = [
    pytest.param([{"/**": P(a=1)}], "supervisor", "/robot1", {"a": 1}, id="/** matches every node"),
    pytest.param([{"supervisor": P(a=1)}], "supervisor", "", {"a": 1}, id="plain name at the root"),
    pytest.param([{"supervisor": P(a=1)}], "supervisor", "/robot1", {}, id="plain name is root only"),
    pytest.param([{"/supervisor": P(a=1)}], "supervisor", "", {"a": 1}, id="/name"),
    pytest.param([{"robot1/supervisor": P(a=1)}], "supervisor", "/robot1", {"a": 1}, id="ns/name"),
    pytest.param([{"/robot1/supervisor": P(a=1)}], "supervisor", "/robot1", {"a": 1}, id="/ns/name"),
    pytest.param([{"robot1": {"supervisor": P(a=1)}}], "supervisor", "/robot1", {"a": 1}, id="nested ns: name:"),
    pytest.param([{"/robot1": {"supervisor": P(a=1)}}], "supervisor", "/robot1", {"a": 1}, id="nested /ns: name:"),
    pytest.param([{"robot1": {"supervisor": P(a=1)}}], "supervisor", "", {}, id="nested ns misses root"),
    pytest.param([{"/**/supervisor": P(a=1)}], "supervisor", "/a/b", {"a": 1}, id="/**/name any depth"),
    pytest.param([{"/**/supervisor": P(a=1)}], "supervisor", "", {"a": 1}, id="/**/name at root"),
    pytest.param([{"/**/supervisor": P(a=1)}], "planner", "/a", {}, id="/**/name other name"),
    pytest.param([{"/*/supervisor": P(a=1)}], "supervisor", "/a", {"a": 1}, id="/* one level"),
    pytest.param([{"/*/supervisor": P(a=1)}], "supervisor", "/a/b", {}, id="/* not two levels"),
    pytest.param([{"/robot1/*": P(a=1)}], "planner", "/robot1", {"a": 1}, id="/ns/* any name"),
    pytest.param([{"/**": P(a=1), "supervisor": P(a=2)}], "supervisor", "", {"a": 2}, id="later wins"),
    pytest.param([{"supervisor": P(a=2), "/**": P(a=1)}], "supervisor", "", {"a": 1},
                 id="later wildcard wins over earlier name"),
    pytest.param([{"supervisor": P(a=2)}, {"/**": P(a=3)}], "supervisor", "", {"a": 3}, id="later file wins"),
    pytest.param([{"/**": P(a=3)}, {"supervisor": P(a=2)}, {"/**": P(a=4)}], "supervisor", "", {"a": 2},
                 id="repeated key keeps its first place"),
    pytest.param([{"/**": P(a=1, b=1)}, {"supervisor": P(b=2)}], "supervisor", "", {"a": 1, "b": 2}, id="merge"),
    pytest.param([{"supervisor": {"ros__parameters": {"x": {"y": {"z": 1}}, "w": [1, 2]}}}], "supervisor", "",
                 {"x.y.z": 1, "w": [1, 2]}, id="nested parameters flatten to dots"),
]


@pytest.mark.parametrize("docs,name,ns,expected", CASES)
def test_node_params_matching(tmp_path, docs, name, ns, expected):
    assert node_params(as_file(docs), name, ns) == expected
    assert rclpy_overrides(tmp_path, docs, name, ns) == expected


def test_node_params_refuses_a_qualified_name():
    with pytest.raises(ValueError, match="plain node name"):
        node_params({}, "robot1/supervisor")
    with pytest.raises(ValueError, match="invalid namespace"):
        node_params({}, "supervisor", "robot-1")


def test_node_params_refuses_a_value_where_a_node_name_belongs():
    with pytest.raises(ValueError, match="'supervisor/journal_path' holds a value"):
        node_params({"supervisor": {"journal_path": "x"}}, "supervisor")
