"""A tool is the same tool to the model whether or not it is a managed physical action.

``ManagedActionSpec`` (dispatch, tracking, verification, leases) is the
harness's business: it must never change a tool's name, description or JSON
schema, so a planner cannot tell (and need not know) which tools the harness
supervises.
"""
from __future__ import annotations

import json

import pytest

from robot_harness.core.config import NavigationConfig
from robot_harness.core.skills import ManagedActionSpec, NavigateToArgs, Skill, SkillRegistry, default_skills


def _handler(env, args):  # an ordinary tool's body; never called here
    raise AssertionError("not called")


def _pair(name: str, description: str, args_model, managed: ManagedActionSpec) -> tuple[Skill, Skill]:
    plain = Skill(name=name, description=description, args_model=args_model, handler=_handler)
    physical = Skill(name=name, description=description, args_model=args_model, managed=managed)
    return plain, physical


@pytest.mark.parametrize("managed", [
    pytest.param(ManagedActionSpec(), id="defaults"),
    pytest.param(ManagedActionSpec(resource="arm", backend="moveit/move_group",
                                   navigation=NavigationConfig(timeout_s=99.0, backend="other/backend")), id="custom"),
])
def test_managed_metadata_never_changes_name_description_or_schema(managed):
    shipped = default_skills().get("navigate_to")
    plain, physical = _pair(shipped.name, shipped.description, NavigateToArgs, managed)
    assert physical.physical and not plain.physical
    assert physical.tool_spec() == plain.tool_spec()
    # byte for byte, as it goes to the model
    assert json.dumps(physical.tool_spec(), sort_keys=True) == json.dumps(plain.tool_spec(), sort_keys=True)
    assert physical.tool_spec() == shipped.tool_spec()
    spec = physical.tool_spec()["function"]
    assert (spec["name"], spec["description"], spec["parameters"]) == (
        shipped.name, shipped.description, NavigateToArgs.model_json_schema())


def test_resources_and_policy_tags_do_not_change_the_spec_either():
    shipped = default_skills().get("navigate_to")
    tagged = Skill(name=shipped.name, description=shipped.description, args_model=NavigateToArgs,
                   managed=ManagedActionSpec(resource="base"), resources=("camera",), tags=("requires_approval",))
    assert tagged.tags == {"physical", "requires_approval"} and tagged.resources == ("base", "camera")
    assert tagged.tool_spec() == shipped.tool_spec()


def test_no_metadata_words_leak_into_any_shipped_tool():
    registry = default_skills()
    # a skill's own name may be its Nav2 interface's name too (follow_waypoints): that is the tool, not metadata
    managed_text = {v for s in registry if s.managed is not None
                    for k, v in s.managed.model_dump(mode="json").items() if isinstance(v, str) and len(v) >= 10
                    and v != s.name}
    assert managed_text, "the shipped registry has a managed skill"
    specs = json.dumps(registry.tool_specs())
    for words in managed_text:
        assert words not in specs, words
    # every spec has exactly the OpenAI function shape, nothing more
    for spec in registry.tool_specs():
        assert set(spec) == {"type", "function"} and set(spec["function"]) == {"name", "description", "parameters"}


def test_a_registry_reads_the_same_with_managed_or_plain_navigation():
    shipped = default_skills()
    plain_nav = Skill(name="navigate_to", description=shipped.get("navigate_to").description,
                      args_model=NavigateToArgs, handler=_handler)
    swapped = SkillRegistry(plain_nav if s.name == "navigate_to" else s for s in shipped)
    assert swapped.tool_specs() == shipped.tool_specs()


def test_the_comparison_can_tell_tools_apart():
    """Guard against a vacuous test: a different description or schema is a different spec."""
    shipped = default_skills().get("navigate_to")
    other_text = Skill(name=shipped.name, description=shipped.description + " Fast.", args_model=NavigateToArgs,
                       managed=ManagedActionSpec())
    other_schema = Skill(name=shipped.name, description=shipped.description,
                         args_model=default_skills().get("lookup_place").args_model, managed=ManagedActionSpec())
    assert other_text.tool_spec() != shipped.tool_spec()
    assert other_schema.tool_spec() != shipped.tool_spec()
