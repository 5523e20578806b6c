"""Site resources in a mission (issue 19), in-process on the simulated robot: a place's resource is held
from the navigation that goes in to the one that comes out (handed on by its fencing token), a call waits
for a resource another robot holds and is refused with the holder named when it stays taken, and the
configuration refuses what cannot work."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import load_harness_config
from robot_harness.core.durable import SITE
from robot_harness.core.errors import UsageError
from robot_harness.core.journal import SqliteJournal
from robot_harness.core.payloads import ToolResultRecorded, payload_of
from robot_harness.core.records import EventDraft, EventType, Pose2D
from robot_harness.core.scenario import load_scenario
from robot_harness.core.site import Site
from robot_harness.eval.modes import run_one

E = EventType
SITE_CFG = {"resources": {"elevator_1": {"places": ["elevator"], "radius_m": 0.6}}, "lease_wait_s": 5.0,
            "poll_s": 0.5}


def _scenario(tmp_path: Path, turns: list[dict[str, Any]], goal: str, site: dict[str, Any] | None = None) -> Path:
    data = {
        "name": "site_elevator", "description": "a place that needs a site resource", "goal": goal,
        "world": {"frame": "map", "places": {"dock": {"x": 0.0, "y": 0.0}, "elevator": {"x": 2.0, "y": 0.0},
                                             "lab": {"x": 4.0, "y": 1.0}}, "start": "dock"},
        "robot": {"speed": 2.0, "pose_rate_hz": 20},
        "planner": {"turns": turns}, "limits": {"mission_timeout_s": 120},
        "harness": {"navigation": {"timeout_s": 10.0, "timeout_per_m_s": 2.0}, "site": site or SITE_CFG},
        "expect": {"status": "SUCCEEDED"},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(tmp_path: Path, path: Path, journal: Path) -> tuple[Any, list]:
    result = run_one(load_scenario(path), "gated", workdir=tmp_path / "w", journal_path=journal)
    j = SqliteJournal(journal, clock=ManualClock(0.0), ids=IdGenerator(None))
    try:
        return result, list(j.events(mission_id=result.mission_id))
    finally:
        j.close()


THROUGH = [{"tool_calls": [{"name": "navigate_to", "arguments": {"place": "elevator"}}]},
           {"tool_calls": [{"name": "navigate_to", "arguments": {"place": "lab"}}]},
           {"done": "Through the elevator, at the lab."}]


def test_a_places_resource_is_held_while_inside_and_handed_on_by_its_fence(tmp_path: Path) -> None:
    result, events = _run(tmp_path, _scenario(tmp_path, THROUGH, "Go to the elevator, then go to the lab."),
                          tmp_path / "j.sqlite3")
    assert result.status == "SUCCEEDED", result.summary
    lease = [(e.type, e.payload) for e in events
             if e.type in (E.LEASE_ACQUIRED, E.LEASE_RELEASED) and e.payload["resource"] == "elevator_1"]
    acquired_in, handed, acquired_out, released = lease
    assert acquired_in[0] is E.LEASE_ACQUIRED and acquired_in[1]["scope"] == SITE
    # arriving in the elevator ended the first navigation, but not its hold on the elevator
    assert handed[0] is E.LEASE_RELEASED and handed[1]["why"] == "handed_over"
    assert handed[1]["owner"] == acquired_in[1]["owner"]
    acquired_in_seq = next(e.seq for e in events if e.type is E.LEASE_ACQUIRED and e.payload["resource"] == "elevator_1")
    assert handed[1]["fence"] == acquired_in_seq
    assert acquired_out[0] is E.LEASE_ACQUIRED and acquired_out[1]["owner"] != acquired_in[1]["owner"]
    assert released[0] is E.LEASE_RELEASED and released[1]["why"] == "confirmed_terminal"  # left: released
    started = [e for e in events if e.type is E.ROBOT_ACTION_STARTED]
    assert ["elevator_1" in e.payload["dispatch"]["resources"] for e in started] == [True, True]


def test_a_call_waits_for_another_robots_hold_and_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    journal = tmp_path / "j.sqlite3"
    other = SqliteJournal(journal, clock=ManualClock(), ids=IdGenerator(seed=99), robot_id="robot9")
    other.setup()
    other.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-other"),
                  EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-other", payload={
                      "resource": "elevator_1", "owner": "act-other", "scope": SITE, "expires_at": 0.0})])
    fence = other.leases()["elevator_1"].fence
    other.close()
    turns = [THROUGH[0], {"done": "I could not get into the elevator."}]
    result, events = _run(tmp_path, _scenario(tmp_path, turns, "Go to the elevator."), journal)
    assert result.status != "SUCCEEDED"
    waited = [e.payload for e in events if e.type is E.LEASE_WAITED]
    assert [w["outcome"] for w in waited] == ["waiting", "waiting", "waiting", "refused"]  # said again every 2 s
    assert waited[0]["holder_robot"] == "robot9" and waited[0]["fence"] == fence
    assert 5.0 <= waited[-1]["waited_s"] <= 6.0  # bounded by site.lease_wait_s
    (res,) = [payload_of(e, ToolResultRecorded) for e in events if e.type is E.TOOL_RESULT_RECORDED]
    assert res.status.value == "rejected" and res.content["code"] == "lease_conflict"
    assert "robot9" in res.content["reason"] and res.content["lease"]["owner"] == "act-other"
    assert not [e for e in events if e.type is E.ROBOT_ACTION_STARTED]  # nothing moved


def test_site_configuration_is_checked() -> None:
    with pytest.raises(UsageError, match="unknown place"):
        load_harness_config(overrides={"places": {"dock": {"x": 0, "y": 0}},
                                       "site": {"resources": {"elevator_1": {"places": ["elevator"]}}}})
    with pytest.raises(UsageError, match="robot's own resource"):
        load_harness_config(overrides={"site": {"resources": {"base": {}}}})
    with pytest.raises(UsageError, match="postgresql"):
        load_harness_config(overrides={"journal": {"url": "/tmp/j.sqlite3"}})


def test_where_a_robot_is_inside_and_what_a_motion_needs() -> None:
    cfg = load_harness_config(overrides={
        "places": {"elevator": {"x": 2.0, "y": 0.0}, "dock": {"x": 0.0, "y": 0.0}},
        "site": {"resources": {"elevator_1": {"places": ["elevator"], "radius_m": 0.5},
                               "dock_2": {"skills": ["dock"]}}}})
    site = Site(cfg.site, {"elevator": Pose2D(x=2.0, y=0.0), "dock": Pose2D(x=0.0, y=0.0)})
    assert site.inside(Pose2D(x=2.3, y=0.3)) == ("elevator_1",) and site.inside(Pose2D(x=2.6, y=0.0)) == ()
    assert site.for_motion("navigate_to", Pose2D(x=0, y=0), [Pose2D(x=2, y=0)]) == ("elevator_1",)
    assert site.for_motion("navigate_to", Pose2D(x=2, y=0), [Pose2D(x=0, y=0)]) == ("elevator_1",)  # leaving
    assert site.for_motion("dock", Pose2D(x=0, y=0), []) == ("dock_2",)
    assert site.place_bound("elevator_1") and not site.place_bound("dock_2")


def _other_robot_waits(journal: Path, *, ended: bool) -> None:
    """robot9 began waiting for the (free) elevator just now (the sim's clock), and maybe stopped waiting."""
    from robot_harness.eval import simports

    other = SqliteJournal(journal, clock=ManualClock(simports._EPOCH), ids=IdGenerator(seed=99), robot_id="robot9")
    other.setup()
    other.append([EventDraft(type=E.LEASE_WAITED, mission_id="m-other", payload={
        "resource": "elevator_1", "outcome": "waiting", "holder_robot": "robot7", "limit_s": 60.0})])
    if ended:
        other.append([EventDraft(type=E.LEASE_WAITED, mission_id="m-other", payload={
            "resource": "elevator_1", "outcome": "refused", "waited_s": 60.0, "limit_s": 60.0})])
    other.close()


def test_first_come_first_served_a_free_resource_goes_to_the_robot_that_waited_first(tmp_path: Path) -> None:
    journal = tmp_path / "j.sqlite3"
    _other_robot_waits(journal, ended=False)
    turns = [THROUGH[0], {"done": "I could not get into the elevator."}]
    result, events = _run(tmp_path, _scenario(tmp_path, turns, "Go to the elevator."), journal)
    assert result.status != "SUCCEEDED"
    waited = [e.payload for e in events if e.type is E.LEASE_WAITED]
    assert [w["outcome"] for w in waited] == ["waiting", "waiting", "waiting", "refused"]  # said again every 2 s
    assert waited[0]["holder_robot"] == "robot9" and waited[0]["fence"] == 0  # queued behind, nobody holds it
    (res,) = [payload_of(e, ToolResultRecorded) for e in events if e.type is E.TOOL_RESULT_RECORDED]
    assert res.content["code"] == "lease_conflict" and "asked for it first" in res.content["reason"]
    assert not [e for e in events if e.type is E.ROBOT_ACTION_STARTED]


def test_a_wait_that_ended_holds_nobody_back(tmp_path: Path) -> None:
    journal = tmp_path / "j.sqlite3"
    _other_robot_waits(journal, ended=True)
    result, events = _run(tmp_path, _scenario(tmp_path, THROUGH, "Go to the elevator, then go to the lab."), journal)
    assert result.status == "SUCCEEDED", result.summary
    assert not [e for e in events if e.type is E.LEASE_WAITED]


def test_a_stale_pose_at_the_end_never_releases_a_places_lease(tmp_path: Path) -> None:
    """Localization lost on the way into the elevator: the robot may be inside, so the elevator stays leased
    (a guess from an older pose would have released it with the robot standing in it)."""
    path = _scenario(tmp_path, [THROUGH[0], {"done": "In the elevator."}], "Go to the elevator.")
    data = yaml.safe_load(path.read_text())
    data["robot"]["faults"] = [{"kind": "pose_dropout", "on_goal": 1, "after_s": 0.5}]
    path.write_text(yaml.safe_dump(data))
    result, events = _run(tmp_path, path, tmp_path / "j.sqlite3")
    assert result.status != "SUCCEEDED"
    assert not [e for e in events if e.type is E.LEASE_RELEASED and e.payload["resource"] == "elevator_1"]
    j = SqliteJournal(tmp_path / "j.sqlite3", clock=ManualClock(0.0), ids=IdGenerator(None))
    try:
        assert j.leases()["elevator_1"].scope == SITE
    finally:
        j.close()


class _Succeeded:
    name = "fake"

    def lookup(self, goal_id: str, *, timeout_s: float) -> str:
        return "succeeded"


class _Still:
    def __init__(self, snap: Any) -> None:
        self.snap = snap

    def capture(self, *, reason: str, mission_id: str) -> Any:
        return self.snap


@pytest.mark.parametrize("site_known", [True, False])
def test_a_restart_keeps_a_places_lease_while_the_robot_is_inside(tmp_path: Path, site_known: bool) -> None:
    """The harness died with the robot in the elevator (its mission left open): the restart's reconciliation
    confirms the goal ended and keeps the elevator; told nothing of the site's places, it keeps every site
    lease (never released on a guess)."""
    import sqlite3

    from robot_harness.core.config import place_poses
    from robot_harness.core.reconcile import Reconciler

    journal = tmp_path / "j.sqlite3"
    result, _ = _run(tmp_path, _scenario(tmp_path, [THROUGH[0], {"done": "In the elevator."}], "Go to the elevator."),
                     journal)
    assert result.status == "SUCCEEDED", result.summary
    with sqlite3.connect(journal) as db:  # as if the harness died before the mission's end was written
        db.execute("DELETE FROM events WHERE type = 'MISSION_FINISHED'")
    j = SqliteJournal(journal, clock=ManualClock(1e10), ids=IdGenerator(5))
    try:
        last = j.events(types=[E.WORLD_SNAPSHOT_CAPTURED])[-1].snapshot_id
        snap = j.get_snapshot(last)
        cfg = load_harness_config(overrides={"places": {"elevator": {"x": 2.0, "y": 0.0}}, "site": SITE_CFG})
        site = {"site": Site(cfg.site, place_poses(cfg))} if site_known else {}
        Reconciler(journal=j, navigation=_Succeeded(), snapshots=_Still(snap), clock=ManualClock(1e10),
                   **site).reconcile_open_missions()
        assert j.open_missions() == []
        assert j.leases()["elevator_1"].owner == j.events(types=[E.LEASE_ACQUIRED])[-1].payload["owner"]
        if site_known:  # the same robot standing outside: released, by its fence
            outside = snap.model_copy(update={"pose": Pose2D(x=0.0, y=0.0)})
            with sqlite3.connect(journal) as db:
                db.execute("DELETE FROM events WHERE type = 'MISSION_FINISHED'")
            j.close()
            j = SqliteJournal(journal, clock=ManualClock(1e10), ids=IdGenerator(6))
            Reconciler(journal=j, navigation=_Succeeded(), snapshots=_Still(outside), clock=ManualClock(1e10),
                       **site).reconcile_open_missions()
            released = [e.payload for e in j.events(types=[E.LEASE_RELEASED]) if e.payload["resource"] == "elevator_1"]
            assert released and released[-1]["fence"] > 0 and "elevator_1" not in j.leases()
    finally:
        j.close()


def test_a_dead_robots_wait_holds_nobody_back(tmp_path: Path) -> None:
    """robot9's harness was killed while it waited (its wait never ended, never renewed): once it is older
    than three renewal periods, the free elevator is not kept for it."""
    from robot_harness.core.execution.leases import WAIT_REFRESH_S
    from robot_harness.eval import simports

    journal = tmp_path / "j.sqlite3"
    other = SqliteJournal(journal, clock=ManualClock(simports._EPOCH - 3 * WAIT_REFRESH_S - 1.0),
                          ids=IdGenerator(seed=99), robot_id="robot9")
    other.setup()
    other.append([EventDraft(type=E.LEASE_WAITED, mission_id="m-other", payload={
        "resource": "elevator_1", "outcome": "waiting", "holder_robot": "robot7", "limit_s": 600.0})])
    other.close()
    result, events = _run(tmp_path, _scenario(tmp_path, THROUGH, "Go to the elevator, then go to the lab."), journal)
    assert result.status == "SUCCEEDED", result.summary
    assert not [e for e in events if e.type is E.LEASE_WAITED]
