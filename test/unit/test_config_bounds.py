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
