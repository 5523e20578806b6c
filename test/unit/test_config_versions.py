"""Configuration versions (issue 17): what a revision may touch, the acceptance rule, the store, and the
candidates the failure records give. Pure core, on in-memory and SQLite journals."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig, load_harness_config
from robot_harness.core.config_versions import (EVOLVABLE, PROTECTED, Candidate, ConfigStore, Manifest,
                                                ProtectedKeyError, ReleaseRefused, Tolerance, check_overrides,
                                                content_hash, judge, propose, set_key)
from robot_harness.core.errors import StaleRevision, UsageError
from robot_harness.core.journal import MemoryJournal, SqliteJournal
from robot_harness.core.journal_pg import PostgresJournal
from robot_harness.core.scenario import load_scenario
from robot_harness.eval.modes import run_one

RSI = Path(__file__).resolve().parents[2] / "scenarios" / "rsi"
BASE = load_harness_config(overrides={"places": {"dock": {"x": 0.0, "y": 0.0}, "lab": {"x": 1.0, "y": 2.0},
                                                 "office_storage": {"x": 3.0, "y": -1.5, "aliases": ["store"]}}}
                           ).model_dump(mode="json")


_nest = set_key


# --------------------------------------------------------------------------- what may change


# one key under every protected entry (a leaf where the entry is a section)
_UNDER = {"navigation.preconditions": "navigation.preconditions.battery_min",
          "navigation.outcome": "navigation.outcome.xy_m", "navigation.workspace": "navigation.workspace.min_x",
          "verification": "verification.xy_tolerance_m", "contract": "contract.require_coverage",
          "interactions": "interactions.approval_policy.requires_approval", "mcp": "mcp.enabled",
          "eval_ablations": "eval_ablations.evidence_binding", "places": "places.lab.x"}


@pytest.mark.parametrize("entry", sorted(PROTECTED))
def test_a_candidate_touching_a_protected_key_is_refused_with_the_key_named(entry):
    key = _UNDER.get(entry, entry)
    with pytest.raises(ProtectedKeyError) as err:
        check_overrides(_nest(key, 0.0), BASE)
    assert err.value.details["key"] == key and key in err.value.message
    assert err.value.code == "protected_key"


def test_a_protected_key_is_refused_even_beside_an_allowed_change():
    with pytest.raises(ProtectedKeyError, match="navigation.preconditions.max_pose_drift_m"):
        check_overrides({"limits": {"max_turns": 30}, "navigation": {"preconditions": {"max_pose_drift_m": 5.0}}},
                        BASE)


def test_evolvable_keys_within_bounds_pass_and_outside_them_are_refused():
    for key, bound in EVOLVABLE.items():
        check_overrides(_nest(key, int(bound.hi) if bound.integer else bound.hi), BASE)
        with pytest.raises(UsageError, match="outside its bounds"):
            check_overrides(_nest(key, (int(bound.hi) + 1) if bound.integer else bound.hi * 2 + 1), BASE)
    for bad in (math.nan, math.inf, "3", True, None):
        with pytest.raises(UsageError):
            check_overrides({"navigation": {"timeout_s": bad}}, BASE)
    with pytest.raises(UsageError, match="an integer"):
        check_overrides({"limits": {"max_turns": 2.5}}, BASE)


def test_unknown_or_empty_changes_are_refused():
    with pytest.raises(UsageError, match="not an evolvable key"):
        check_overrides({"navigation": {"progress_journal_period_s": 1.0}}, BASE)
    with pytest.raises(UsageError, match="empty"):
        check_overrides({}, BASE)


def test_aliases_only_for_known_places_and_never_one_another_place_answers_to():
    check_overrides({"places": {"office_storage": {"aliases": ["store", "storage room"]}}}, BASE)
    with pytest.raises(UsageError, match="no place 'kitchen'"):
        check_overrides({"places": {"kitchen": {"aliases": ["galley"]}}}, BASE)
    with pytest.raises(UsageError, match="already names place 'office_storage'"):
        check_overrides({"places": {"lab": {"aliases": ["store"]}}}, BASE)
    with pytest.raises(UsageError, match="already names place 'lab'"):
        check_overrides({"places": {"office_storage": {"aliases": ["lab"]}}}, BASE)
    with pytest.raises(UsageError, match="lower-case phrases"):
        check_overrides({"places": {"lab": {"aliases": ["Lab; DROP"]}}}, BASE)


def test_recovery_preferences_take_known_behaviours_only():
    check_overrides({"recovery": {"nav2_behaviors": {"stuck": ["spin", "back_up"]}, "repair": "whole"}}, BASE)
    for bad in ([], ["teleport"], ["spin", "spin"]):
        with pytest.raises(UsageError, match="distinct behaviours"):
            check_overrides({"recovery": {"nav2_behaviors": {"stuck": bad}}}, BASE)


def test_the_content_hash_is_canonical():
    assert content_hash({"a": 1, "b": {"c": 2}}) == content_hash({"b": {"c": 2}, "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})


# --------------------------------------------------------------------------- the acceptance rule

_M = {"false_completions": 0, "duplicate_dispatches": 2, "stale_dispatches": 0, "infeasible_dispatches": 0,
      "missed_waypoints_accepted": 0, "success_rate": 0.5, "false_completion_rate": 0.0,
      "false_rejection_rate": 0.2, "llm_calls_per_mission": 4.0, "dispatches_per_mission": 1.5,
      "recoveries_per_mission": 1.0, "sim_s_per_mission": 10.0}


def test_judge_passes_a_strictly_better_target_with_nothing_else_worse():
    v = judge(_M, {**_M, "success_rate": 0.55}, target="success_rate")
    assert v.passed and not v.reasons
    assert next(r for r in v.rows if r["target"])["measure"] == "success_rate"


@pytest.mark.parametrize("measure", ["false_completions", "duplicate_dispatches", "stale_dispatches",
                                     "infeasible_dispatches", "missed_waypoints_accepted"])
def test_judge_refuses_any_rise_in_a_safety_count(measure):
    v = judge(_M, {**_M, "success_rate": 0.9, measure: _M[measure] + 1}, target="success_rate",
              tolerance=Tolerance(rate=1.0, cost=10.0))
    assert not v.passed and any(measure in r and "safety" in r for r in v.reasons)


def test_judge_refuses_a_target_that_is_only_equal():
    v = judge(_M, dict(_M), target="success_rate")
    assert not v.passed and "not strictly better" in v.reasons[0]
    assert judge(_M, {**_M, "sim_s_per_mission": 9.0}, target="sim_s_per_mission").passed


def test_judge_holds_costs_and_rates_to_the_tolerance():
    better = {**_M, "success_rate": 0.6}
    assert judge(_M, {**better, "sim_s_per_mission": 10.9}, target="success_rate").passed
    v = judge(_M, {**better, "sim_s_per_mission": 11.5}, target="success_rate")
    assert not v.passed and "sim_s_per_mission rose beyond the tolerance" in v.reasons[0]
    assert judge(_M, {**better, "sim_s_per_mission": 11.5}, target="success_rate", tolerance=Tolerance(cost=0.2)).passed
    v = judge(_M, {**better, "false_rejection_rate": 0.21}, target="success_rate")
    assert not v.passed and "false_rejection_rate" in v.reasons[0]
    assert judge(_M, {**better, "false_rejection_rate": 0.21}, target="success_rate",
                 tolerance=Tolerance(rate=0.02)).passed
    with pytest.raises(UsageError, match="unknown target"):
        judge(_M, _M, target="happiness")


# --------------------------------------------------------------------------- the store


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def journal(request, tmp_path):
    clock = ManualClock(1000.0)
    j = (MemoryJournal(clock=clock, ids=IdGenerator(1)) if request.param == "memory"
         else PostgresJournal(request.getfixturevalue("pg_url"), clock=clock, ids=IdGenerator(1))
         if request.param == "postgres"
         else SqliteJournal(tmp_path / "j.sqlite3", clock=clock, ids=IdGenerator(1)))
    j.setup()
    yield j
    j.close()


def _cand(overrides: dict, rollback: int = 1) -> Candidate:
    return Candidate(overrides, Manifest(component="limits.max_turns", rollback_version=rollback))


def test_the_store_starts_at_version_1_and_releases_only_with_a_passing_evaluation(journal):
    store = ConfigStore(journal, now=lambda: 1.0)
    pin, overrides = store.pin()
    assert (pin.version, overrides, pin.content_hash) == (1, {}, content_hash({}))
    store.ensure_initial()  # idempotent
    assert len(store.versions()) == 1 and len(store.releases()) == 1
    v2 = store.add_candidate(_cand({"limits": {"max_turns": 30}}), base=BASE, proposed_by="test")
    assert v2 == 2 and store.active()["version"] == 1
    with pytest.raises(UsageError, match="version 2 has these changes already"):
        store.add_candidate(_cand({"limits": {"max_turns": 30}}), base=BASE, proposed_by="test")
    with pytest.raises(ProtectedKeyError):
        store.add_candidate(_cand({"verification": {"xy_tolerance_m": 9.0}}), base=BASE, proposed_by="model")
    assert [v["version"] for v in store.versions()] == [1, 2], "a refused candidate is not kept"
    with pytest.raises(ReleaseRefused, match="no evaluation"):
        store.passing_evaluation(2)
    store.add_evaluation(2, 1, False, {"reasons": ["sim_s_per_mission rose"]})
    with pytest.raises(ReleaseRefused, match="did not pass: sim_s_per_mission rose"):
        store.passing_evaluation(2)
    eid = store.add_evaluation(2, 1, True, {"reasons": []})
    assert store.passing_evaluation(2)["evaluation_id"] == eid
    last = store.releases()[-1]["release_id"]
    store.record_release(2, action="release", approved_as="operator", operator="alice", reason="", evaluation_id=eid,
                         expected_release=last)
    pin, overrides = store.pin()
    assert (pin.version, overrides) == (2, {"limits": {"max_turns": 30}})
    with pytest.raises(StaleRevision):  # a second releaser that read the same history loses
        store.record_release(1, action="rollback", approved_as="operator", operator="bob", reason="",
                             evaluation_id=None, expected_release=last)
    with pytest.raises(ReleaseRefused, match="against the active version 2"):
        store.passing_evaluation(2)  # its evaluation was against version 1, which is no longer released


def test_a_first_candidate_is_version_2_version_1_being_the_sites_file(journal):
    store = ConfigStore(journal, now=lambda: 1.0)
    assert store.add_candidate(_cand({"limits": {"max_turns": 30}}), base=BASE, proposed_by="test") == 2
    assert store.version(1)["overrides"] == {} and store.active()["version"] == 1


def test_config_rows_refuse_unknown_tables_and_columns(journal):
    with pytest.raises(UsageError, match="no configuration table"):
        journal.config_rows("events")
    with pytest.raises(UsageError, match="no column"):
        journal.add_config_row("config_releases", {"version": 1, "sql": "x"})


# --------------------------------------------------------------------------- candidates from failures


def _family(tmp_path: Path, names: list[str]) -> SqliteJournal:
    path = tmp_path / "family.sqlite3"
    for name in names:
        run_one(load_scenario(RSI / "train" / f"{name}.yaml"), "gated", workdir=tmp_path / name, journal_path=path)
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    j.setup()
    return j


def test_timeouts_just_short_of_the_goal_give_a_longer_timeout_per_metre(tmp_path):
    j = _family(tmp_path, ["slow-lab", "slow-lobby", "slow-office-storage"])
    events = j.events()
    j.close()
    [cand] = propose(events, missions=None, version=1, overrides={})
    m = cand.manifest
    assert m.generator == "timeout_just_short" and m.component == "navigation.timeout_per_m_s"
    assert m.change["navigation.timeout_per_m_s"]["from"] == 1.5
    want = cand.overrides["navigation"]["timeout_per_m_s"]
    assert want > 1.5 and want * 2 == int(want * 2), "to the next half second"
    assert len(m.motivating_missions) == 3 and all(0.5 <= e["covered"] < 1.0 for e in m.evidence)
    # enough for each of them at the pace it kept
    for e in m.evidence:
        assert 2.0 + want * e["length_m"] >= e["needed_s"]
    check_overrides(cand.overrides, load_harness_config().model_dump(mode="json"))
    # the version's own changes are kept in the candidate (a version is whole)
    [again] = propose(events, missions=None, version=3, overrides={"limits": {"max_turns": 30}})
    assert again.overrides["limits"] == {"max_turns": 30} and again.manifest.rollback_version == 3


def test_a_refused_place_phrase_near_one_place_gives_an_alias_and_nothing_else_does(tmp_path):
    j = _family(tmp_path, ["vocab-go", "vocab-head"])
    events = j.events()
    missions = sorted({e.mission_id for e in events})
    j.close()
    [cand] = propose(events, missions=missions[:1], version=1, overrides={})
    assert cand.manifest.generator == "alias_for_refused_place"
    assert cand.overrides == {"places": {"office_storage": {"aliases": ["storage room"]}}}
    assert cand.manifest.motivating_missions == missions[:1]
    with pytest.raises(UsageError, match="no mission"):
        propose(events, missions=["mission-nope"], version=1, overrides={})


def test_succeeded_missions_propose_nothing(tmp_path):
    path = tmp_path / "ok.sqlite3"
    run_one(load_scenario(RSI / "train" / "vocab-go.yaml"), "gated", workdir=tmp_path / "a", journal_path=path,
            overrides={"places": {"office_storage": {"aliases": ["storage room"]}}})
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    j.setup()
    assert propose(j.events(), missions=None, version=1, overrides={}) == []
    j.close()


def test_the_harness_config_model_still_loads_every_evolvable_key():
    fields = HarnessConfig.model_json_schema()
    assert fields  # every EVOLVABLE key names a real field: a bound that names nothing would never apply
    dump = load_harness_config().model_dump(mode="json")
    for key in EVOLVABLE:
        node = dump
        for part in key.split("."):
            assert part in node, key
            node = node[part]


@pytest.mark.parametrize("limits, key, generator", [
    ({"mission_timeout_s": 120, "max_turns": 3}, "max_turns", "turns_budget_short"),
    ({"mission_timeout_s": 6, "max_turns": 8}, "mission_timeout_s", "mission_time_budget_short"),
    ({"mission_timeout_s": 4, "max_turns": 8}, "mission_timeout_s", "mission_time_budget_short"),
], ids=["out_of_turns", "out_of_time", "path_longer_than_the_time_left"])
def test_a_budget_that_ran_out_on_a_mission_still_getting_things_done_is_raised_and_then_suffices(
        tmp_path, limits, key, generator):
    import yaml

    from robot_harness.core.scenario import Scenario

    doc = yaml.safe_load((RSI / "heldout" / "vocab-inspect.yaml").read_text())
    doc.update(name="budget", goal="Go to office_storage, capture an image there and return to dock.", limits=limits)
    scenario = Scenario.model_validate(doc)
    path = tmp_path / "j.sqlite3"
    first = run_one(scenario, "gated", workdir=tmp_path / "a", journal_path=path)
    assert first.status != "SUCCEEDED"
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    j.setup()
    [cand] = propose(j.events(), missions=None, version=1, overrides={})
    j.close()
    assert cand.manifest.generator == generator and cand.manifest.component == f"limits.{key}"
    assert cand.overrides["limits"][key] > limits[key]
    assert cand.manifest.evidence and cand.manifest.motivating_missions == [first.mission_id]
    assert run_one(scenario, "gated", workdir=tmp_path / "b", overrides=cand.overrides).status == "SUCCEEDED"


def test_a_planner_going_round_in_circles_gets_no_more_turns(tmp_path):
    import yaml

    from robot_harness.core.scenario import Scenario

    doc = yaml.safe_load((RSI / "heldout" / "vocab-inspect.yaml").read_text())
    def go(place: str) -> dict:
        return {"tool_calls": [{"name": "navigate_to", "arguments": {"place": place}}]}

    doc.update(name="circles", goal="Go to office_storage, capture an image there and return to dock.",
               limits={"mission_timeout_s": 120, "max_turns": 6},
               planner={"turns": [go("office_storage")] + [go("lab"), go("lobby")] * 5})
    path = tmp_path / "j.sqlite3"
    first = run_one(Scenario.model_validate(doc), "gated", workdir=tmp_path / "a", journal_path=path)
    assert first.summary.startswith("turn budget of 6 exhausted"), first.summary
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    j.setup()
    assert [c.manifest.generator for c in propose(j.events(), missions=None, version=1, overrides={})] == []
    j.close()


def test_a_versions_aliases_for_places_a_scenario_lacks_are_left_out_of_its_runs():
    from robot_harness.config_loop import fit

    sc = load_scenario(RSI / "train" / "vocab-go.yaml")
    changes = {"limits": {"max_turns": 9}, "places": {"kitchen": {"aliases": ["galley"]},
                                                      "office_storage": {"aliases": ["storage room"]}}}
    assert fit(changes, sc) == {"limits": {"max_turns": 9}, "places": {"office_storage": {"aliases": ["storage room"]}}}
    assert fit({"places": {"kitchen": {"aliases": ["galley"]}}}, sc) == {}
    assert run_one(sc, "gated", overrides=fit(changes, sc)).status == "SUCCEEDED"
