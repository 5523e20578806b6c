"""Issue 13: a configuration number that would switch a check off is refused at load, with its field.

A NaN compares false with everything (a NaN tolerance or age bound would accept nothing or
everything, depending on how the comparison is written); a negative timeout or budget is a typo.
"""
from __future__ import annotations

import math

import pytest

from robot_harness.core.config import load_harness_config
from robot_harness.core.errors import UsageError

BAD = [
    ("limits", "mission_timeout_s", math.nan),
    ("limits", "mission_timeout_s", -5.0),
    ("limits", "max_turns", 0),
    ("limits", "max_tool_calls_per_turn", -1),
    ("navigation", "timeout_s", math.inf),
    ("navigation", "cancel_timeout_s", 0.0),
    ("verification", "xy_tolerance_m", -0.5),
    ("verification", "final_pose_max_age_s", math.nan),
]


@pytest.mark.parametrize("section, key, value", BAD, ids=[f"{s}.{k}={v}" for s, k, v in BAD])
def test_a_number_that_would_disable_a_check_is_refused_naming_the_field(section, key, value):
    with pytest.raises(UsageError) as refused:
        load_harness_config(file_text=None, overrides={section: {key: value}})
    assert f"{section}.{key}" in refused.value.message


@pytest.mark.parametrize("path, value", [
    (("navigation", "preconditions", "max_observation_age_s"), math.nan),
    (("navigation", "preconditions", "battery_min"), 1.5),
    (("navigation", "outcome", "xy_m"), 0.0),
])
def test_nested_bounds_hold_too(path, value):
    overrides: dict = {}
    node = overrides
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value
    with pytest.raises(UsageError, match=path[-1]):
        load_harness_config(file_text=None, overrides=overrides)


def test_the_shipped_configuration_and_zero_where_zero_means_off_still_load():
    cfg = load_harness_config(file_text=None, overrides={"limits": {"max_done_rejections": 0, "max_silent_turns": 0},
                                                         "navigation": {"timeout_per_m_s": 0.0}})
    assert cfg.limits.max_done_rejections == 0 and cfg.navigation.timeout_per_m_s == 0.0


@pytest.mark.parametrize("key", ["interactions.approval_policy.requires_operator", "interactions.skill_tags",
                                 "navigation.workspace_margin_m", "navigation.preconditions.max_goal_distance_m",
                                 "places.lab", "verification.xy_tolerance_m", "contract.compiler", "limits"])
def test_a_mission_may_not_loosen_the_sites_checks_on_itself(key):
    """Issue 13's attack, by another door: `--set interactions.approval_policy.requires_operator=owner` made
    the sender an approver again; a workspace or tolerance override would loosen the checks on its own goal."""
    from robot_harness.core.config import check_mission_overrides

    with pytest.raises(UsageError, match="not allowed for one mission") as refused:
        check_mission_overrides([(key, "x"), ("limits.max_turns", "3")])
    assert refused.value.details["refused"] == [key]


def test_a_mission_may_change_its_own_budgets_and_timeouts():
    from robot_harness.core.config import check_mission_overrides, dotted_overrides

    pairs = [("limits.mission_timeout_s", "60"), ("navigation.accept_timeout_s", "0.5"),
             ("navigation.lookup_timeout_s", "5")]
    check_mission_overrides(pairs)
    assert dotted_overrides(pairs)["limits"] == {"mission_timeout_s": 60}


def test_overrides_that_contradict_each_other_are_a_usage_error():
    from robot_harness.core.config import dotted_overrides

    for pairs in ([("limits", "1"), ("limits.max_turns", "2")], [("limits.max_turns", "2"), ("limits", "1")]):
        with pytest.raises(UsageError, match="another override"):
            dotted_overrides(pairs)
