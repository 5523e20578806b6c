"""The operator's view of a mission, folded from real journal events.

Missions run on the real engine, journal, verifier and gate with the scripted
robot and planner fakes (``fakes.py``); the view must say what the journal
says: contract states and the evidence the verifier cited, field ages at the
time asked, the lifecycle of each action, and what an operator needs to
answer a pending interaction.
"""
from __future__ import annotations

import json

import pytest

from robot_harness.core.interactions import interactions, resolve, token_sha256
from robot_harness.core.mission_view import (
    RUNNING,
    WAITING_USER,
    UnknownMission,
    live_status,
    mission_view,
    missions_list,
)
from robot_harness.core.records import EventDraft, EventType

from .test_engine import GO_OFFICE
from .test_interactions import TOKEN, answer_once, make, pending

E = EventType
OWNER = {"owner": "alice", "owner_token_sha256": token_sha256(TOKEN)}


def _json_ready(view):
    """The view survives strict JSON (no NaN, no pydantic objects) unchanged."""
    assert json.loads(json.dumps(view, allow_nan=False)) == view


@pytest.fixture(scope="module")
def approved_mission():
    runner, robot, journal, clock = make([GO_OFFICE, {"done": "arrived"}], operator=answer_once("approve"))
    out = runner.run("go to the office", **OWNER)
    assert out.status.value == "SUCCEEDED", out.summary
    return journal.events(), clock.now()


def test_a_verified_mission_shows_its_obligations_satisfied_committed_and_the_cited_evidence(approved_mission):
    events, now = approved_mission
    view = mission_view(events, now=now)
    _json_ready(view)
    m = view["mission"]
    assert (m["status"], m["goal"], m["owner"], m["finished"]) == ("SUCCEEDED", "go to the office", "alice", True)
    assert m["first_seq"] == events[0].seq and m["last_seq"] == events[-1].seq and m["event_count"] == len(events)
    (ob,) = view["contract"]["obligations"]
    (verdict,) = view["verdicts"]
    (commit,) = view["commits"]
    assert ob["state"] == "satisfied" and ob["committed"] and ob["commit_id"] == commit["commit_id"]
    assert ob["verdict_id"] == verdict["verdict_id"] and verdict["commit_id"] == commit["commit_id"]
    assert verdict["goal_verdict"] == "verified_done" and verdict["rejected"] is None
    # the evidence shown is exactly what the verifier cited for this obligation, and it exists in the journal
    step = events_of(events, E.VERDICT_RECORDED)[0].payload["verdict"]["steps"][0]
    assert ob["evidence_ids"] == step["evidence_ids"] and ob["evidence_ids"]
    receipt_ids = {e.payload["receipt"]["receipt_id"] for e in events_of(events, E.RECEIPT_RECORDED)}
    assert receipt_ids & set(ob["evidence_ids"])
    assert view["contract"]["all_committed"] and view["contract"]["committed"] == [ob["id"]]


def test_an_action_shows_its_lifecycle_in_order_with_its_verified_outcome(approved_mission):
    events, now = approved_mission
    (action,) = mission_view(events, now=now)["actions"]
    assert action["skill"] == "navigate_to" and action["arguments"] == {"place": "office"}
    assert [s["state"] for s in action["states"]] == ["REQUESTED", "ACCEPTED", "RUNNING", "VERIFYING", "SUCCEEDED"]
    times = [s["at"] for s in action["states"]]
    assert times == sorted(times)
    assert action["outcome"]["state"] == "SUCCEEDED" and "fresh pose" in action["outcome"]["reason"]
    assert action["approval"].startswith("ask-"), "the action names the approval it ran under"
    assert action["target"] == {"x": 3.0, "y": 1.0, "yaw": 1.57}


def test_model_turns_pair_each_tool_call_with_its_one_standard_result(approved_mission):
    events, now = approved_mission
    view = mission_view(events, now=now)
    first, second = view["turns"]
    (call,) = first["tool_calls"]
    assert call["name"] == "navigate_to" and call["result"]["status"] == "accepted"
    assert call["action_id"] == view["actions"][0]["action_id"]
    assert call["preconditions"]["ok"] and call["interaction_id"] == view["interactions"][0]["interaction_id"]
    assert second["response"]["done"] == "arrived" and second["tool_calls"] == []
    delivered = [e["type"] for e in second["runtime_events"]]
    assert "robot_action_outcome" in delivered, "the outcome reached the next turn as a runtime event"
    assert [d["text"] for d in view["done_proposals"]] == ["arrived"]


def test_the_trajectory_runs_from_the_dock_to_the_office_over_the_configured_places(approved_mission):
    events, now = approved_mission
    tr = mission_view(events, now=now)["trajectory"]
    assert set(tr["places"]) == {"dock", "office"}
    assert (tr["points"][0]["x"], tr["points"][0]["y"]) == (0.0, 0.0)
    assert (tr["points"][-1]["x"], tr["points"][-1]["y"]) == (3.0, 1.0)
    assert [p["t"] for p in tr["points"]] == sorted(p["t"] for p in tr["points"])
    b = tr["bounds"]
    assert b["min_x"] < 0.0 < 3.0 < b["max_x"] and b["min_y"] < 0.0 < 1.0 < b["max_y"]
    assert tr["targets"][0]["x"] == 3.0


def test_a_resolved_approval_and_the_released_lease_are_shown(approved_mission):
    events, now = approved_mission
    view = mission_view(events, now=now)
    (i,) = view["interactions"]
    assert not i["pending"] and i["state"] == "approve" and i["resolution"]["operator"] == "alice"
    assert "owner_sha256" not in i, "no credential material in the view"
    assert view["pending_interactions"] == []
    assert [h["event"] for h in view["leases"]["history"]] == ["acquired", "released"]
    assert view["leases"]["in_force"] == []


def test_field_ages_are_judged_at_now_against_each_fields_freshness_limit(approved_mission):
    events, _ = approved_mission
    snap = events_of(events, E.WORLD_SNAPSHOT_CAPTURED)[-1].payload["snapshot"]
    pose_stamp = snap["pose_meta"]["source_stamp"]
    at_capture = mission_view(events, now=snap["captured_at"])["snapshot"]
    assert at_capture["stale_fields"] == []
    assert all(f["stale"] is False and f["availability"] == "AVAILABLE" for f in at_capture["fields"])
    # 1 s after the pose was observed: the pose (limit 0.5 s) is stale, the battery (5 s) is not
    later = mission_view(events, now=pose_stamp + 1.0)["snapshot"]
    fields = {f["name"]: f for f in later["fields"]}
    assert fields["pose"]["stale"] and fields["pose"]["age_s"] == pytest.approx(1.0, abs=1e-3)
    assert "limit 0.5 s" in fields["pose"]["stale_reason"]
    assert not fields["battery"]["stale"] and fields["battery"]["limit_s"] == 5.0
    assert "pose" in later["stale_fields"] and "battery" not in later["stale_fields"]


def test_the_pose_limit_is_the_tighter_of_the_snapshots_and_the_dispatch_precondition():
    runner, robot, journal, clock = make([GO_OFFICE, {"done": "arrived"}], operator=answer_once("approve"),
                                         navigation={"preconditions": {"max_observation_age_s": 0.2}})
    runner.run("go to the office", **OWNER)
    events = journal.events()
    snap = events_of(events, E.WORLD_SNAPSHOT_CAPTURED)[-1].payload["snapshot"]
    pose = next(f for f in mission_view(events, now=snap["pose_meta"]["source_stamp"] + 0.3)["snapshot"]["fields"]
                if f["name"] == "pose")
    assert pose["limit_s"] == 0.2 and pose["stale"], "0.3 s is fresh for the aggregator (0.5) but not for dispatch"


def test_a_field_stale_when_captured_is_marked_and_the_refused_dispatch_is_explained():
    runner, robot, journal, clock = make([GO_OFFICE], operator=answer_once("approve"))
    robot.pose_age_s = 2.0  # every pose the robot reports is older than its 0.5 s bound
    runner.run("go to the office", **OWNER)
    events = journal.events()
    view = mission_view(events, now=clock.now())
    pose = next(f for f in view["snapshot"]["fields"] if f["name"] == "pose")
    assert pose["availability"] == "STALE" and pose["stale"] and pose["stale_reason"].startswith("STALE when captured")
    call = view["turns"][0]["tool_calls"][0]
    assert call["result"]["status"] == "precondition_changed"
    assert "observation_age" in [f["name"] for f in call["preconditions"]["failed"]]
    assert view["actions"] == [], "nothing was dispatched"
    assert view["trajectory"]["points"] == [], "a stale pose is not plotted as where the robot was"


def test_a_pending_approval_carries_what_an_operator_needs_to_answer_it():
    seen = {}

    def operator(runner, journal, clock):
        asks = pending(journal)
        if asks and "view" not in seen:
            seen["view"] = mission_view(journal.events(mission_id=runner.mission_id), now=clock.now())
            seen["list"] = missions_list(journal.missions(), interaction_events=journal.events())
            resolve(journal, interaction_id=asks[0].interaction_id, resolution="approve", token=TOKEN, clock=clock)
            seen["after"] = mission_view(journal.events(mission_id=runner.mission_id), now=clock.now())
            seen["list_after"] = missions_list(journal.missions(), interaction_events=journal.events())

    runner, robot, journal, clock = make([GO_OFFICE, {"done": "arrived"}], operator=operator)
    runner.run("go to the office", **OWNER)
    view = seen["view"]
    _json_ready(view)
    (i,) = view["interactions"]
    assert view["mission"]["status"] == WAITING_USER and not view["mission"]["finished"]
    assert view["pending_interactions"] == [i["interaction_id"]]
    assert view["mission"]["activity"].startswith("waiting for the operator: approval " + i["interaction_id"])
    assert i["pending"] and i["state"] == "pending" and i["allowed"] == ["approve", "deny", "dismiss"]
    assert i["call"]["name"] == "navigate_to" and i["call"]["arguments"] == {"place": "office"}
    assert i["expires_in_s"] == pytest.approx(30.0, abs=0.5)
    assert view["actions"] == [] and view["turns"][0]["tool_calls"][0]["result"] is None
    assert view["contract"]["obligations"][0]["state"] == "pending"
    (row,) = seen["list"]
    assert row["status"] == WAITING_USER and row["pending_interactions"] == 1
    # answered: the same mission, still unfinished, is RUNNING again everywhere
    after = seen["after"]
    assert after["mission"]["status"] == RUNNING and after["pending_interactions"] == []
    assert not after["mission"]["activity"].startswith("waiting")
    (row,) = seen["list_after"]
    assert (row["status"], row["pending_interactions"]) == (RUNNING, 0)
    assert mission_view(journal.events(), now=clock.now())["mission"]["status"] == "SUCCEEDED"


def test_a_question_lists_its_choices_and_the_answer_resolution():
    ask = {"tool_calls": [{"name": "ask_operator", "arguments": {"question": "Which door?", "choices": ["north", "south"]}}]}
    seen = {}

    def operator(runner, journal, clock):
        for i in pending(journal):
            seen["row"] = mission_view(journal.events(), now=clock.now())["interactions"][0]
            resolve(journal, interaction_id=i.interaction_id, resolution="answer", choice="south", token=TOKEN,
                    clock=clock, operator="bob")

    runner, robot, journal, clock = make([ask], operator=operator)
    runner.run("find the right door", **OWNER)
    assert seen["row"]["kind"] == "question" and seen["row"]["choices"] == ["north", "south"]
    assert seen["row"]["allowed"] == ["answer", "dismiss"]
    (done,) = mission_view(journal.events(), now=clock.now())["interactions"]
    assert done["state"] == "answer" and done["resolution"]["choice"] == "south" and done["resolution"]["operator"] == "bob"


def test_a_stop_is_listed_and_the_mission_shows_cancelled():
    def operator(runner, journal, clock):
        m = runner.mission_id
        if not journal.events(mission_id=m, types=[E.STOP_REQUESTED]):
            journal.append([EventDraft(type=E.STOP_REQUESTED, mission_id=m,
                                       payload={"reason": "person in the aisle", "source": "stop_service"})],
                           expected_revision=journal.revision(m))

    runner, robot, journal, clock = make([GO_OFFICE], operator=operator)
    runner.run("go to the office", **OWNER)
    view = mission_view(journal.events(), now=clock.now())
    assert view["mission"]["status"] == "CANCELLED"
    assert [(s["reason"], s["source"]) for s in view["stops"]] == [("person in the aisle", "stop_service")]
    assert view["interactions"][0]["state"] == "dismiss"


def test_an_odd_payload_is_listed_as_unparsed_and_the_rest_of_the_view_stands(approved_mission):
    events, now = approved_mission
    odd = events[-1].model_copy(update={"seq": events[-1].seq + 1, "type": E.VERDICT_RECORDED,
                                        "payload": {"verdict": {"not": "a verdict"}}})
    view = mission_view([*events, odd], now=now)
    assert [(u["seq"], u["type"]) for u in view["unparsed"]] == [(odd.seq, "VERDICT_RECORDED")]
    assert view["contract"]["obligations"][0]["state"] == "satisfied" and len(view["verdicts"]) == 1


def test_other_missions_events_are_ignored_and_an_unknown_mission_is_an_error(approved_mission):
    events, now = approved_mission
    mission_id = events[0].mission_id
    foreign = events[0].model_copy(update={"seq": 10_000, "mission_id": "m-other"})
    assert mission_view([*events, foreign], now=now, mission_id=mission_id)["mission"]["event_count"] == len(events)
    with pytest.raises(UnknownMission, match="no events"):
        mission_view(events, now=now, mission_id="m-nobody")


def test_the_missions_list_is_newest_first_with_running_missions_and_their_pending_asks():
    summaries = [
        {"mission_id": "m-1", "first_seq": 1, "last_seq": 5, "event_count": 5, "started_at": 1.0, "goal": "a",
         "finished_at": 2.0, "status": "SUCCEEDED", "summary": "ok"},
        {"mission_id": "m-2", "first_seq": 6, "last_seq": 9, "event_count": 4, "started_at": 3.0, "goal": "b",
         "finished_at": None, "status": None, "summary": None},
    ]
    _, _, journal, _ = make([])
    journal.append([EventDraft(type=E.INTERACTION_REQUESTED, mission_id="m-2", payload={
        "interaction_id": "ask-1", "kind": "approval", "prompt": "go?", "owner_sha256": "x"})])
    rows = missions_list(summaries, interaction_events=journal.events())
    assert [r["mission_id"] for r in rows] == ["m-2", "m-1"]
    assert (rows[0]["status"], rows[0]["finished"], rows[0]["pending_interactions"]) == (WAITING_USER, False, 1)
    assert (rows[1]["status"], rows[1]["finished"], rows[1]["pending_interactions"]) == ("SUCCEEDED", True, 0)
    assert len(interactions(journal.events())) == 1


def test_a_question_waits_as_waiting_user_and_an_answer_makes_it_running_again():
    ask = {"tool_calls": [{"name": "ask_operator", "arguments": {"question": "Which door?", "choices": ["n", "s"]}}]}
    seen = []

    def operator(runner, journal, clock):
        statuses = lambda: (mission_view(journal.events(), now=clock.now())["mission"]["status"],  # noqa: E731
                            missions_list(journal.missions(), interaction_events=journal.events())[0]["status"])
        for i in pending(journal):
            seen.append(statuses())
            resolve(journal, interaction_id=i.interaction_id, resolution="answer", choice="s", token=TOKEN,
                    clock=clock)
            seen.append(statuses())

    runner, robot, journal, clock = make([ask], operator=operator)
    runner.run("find the right door", **OWNER)
    assert seen == [(WAITING_USER, WAITING_USER), (RUNNING, RUNNING)]


def test_a_final_status_wins_over_a_pending_interaction():
    """A finished mission shows how it finished, even if its journal left an interaction unresolved."""
    assert live_status("UNKNOWN", pending_interactions=1) == "UNKNOWN"
    assert live_status(None, pending_interactions=2) == WAITING_USER
    assert live_status(None, pending_interactions=0) == RUNNING
    summaries = [{"mission_id": "m-1", "first_seq": 1, "last_seq": 3, "event_count": 3, "started_at": 1.0,
                  "goal": "a", "finished_at": 2.0, "status": "CANCELLED", "summary": "stopped"}]
    _, _, journal, _ = make([])
    journal.append([EventDraft(type=E.INTERACTION_REQUESTED, mission_id="m-1", payload={
        "interaction_id": "ask-1", "kind": "question", "prompt": "which?", "owner_sha256": "x"})])
    (row,) = missions_list(summaries, interaction_events=journal.events())
    assert (row["status"], row["finished"], row["pending_interactions"]) == ("CANCELLED", True, 1)


def events_of(events, type_):
    return [e for e in events if e.type is type_]
