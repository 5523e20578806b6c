"""Memory of verified attempts (issue 18, RegenHarness §4.8): derivation from real mission journals (the
in-process eval runner on the simulated robot), similarity and retrieval, provider statistics, the
planner's examples, and the append-only store on in-memory and SQLite journals."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.completion import ReceiptStatus
from robot_harness.core.errors import UsageError
from robot_harness.core.journal import MEMORY_TABLES, Journal, JournalReadError, MemoryJournal, SqliteJournal
from robot_harness.core.journal_pg import PostgresJournal
from robot_harness.core.memory import (EPISODES, OUTCOMES, AttemptOutcome, EpisodeRecord, MemoryStore, PlanStep,
                                       ProviderOutcome, Signature, UnknownMemory, UnreadableMemory, Verification,
                                       current, derive, few_shot, fit, provider_stats, retrieve, similarity, states)
from robot_harness.core.context import context_size
from robot_harness.core.payloads import ModelTurnStarted, ReceiptRecorded, payload_of
from robot_harness.core.records import EventDraft, EventType, JournalEvent
from robot_harness.core.scenario import load_scenario
from robot_harness.eval.modes import run_one

REPO = Path(__file__).resolve().parents[2]
EVAL = REPO / "scenarios" / "eval"
NOT_RECORDED = {"memory": {"record": False}}
"""The runner remembers each mission as it ends; these missions are left for the tests to record."""
SCENARIOS = {"inspection": "inspection-none", "message": "message-none", "failed": "inspection-no_path",
             "unknown": "inspection-confident_done"}


@pytest.fixture(scope="module")
def missions(tmp_path_factory) -> dict:
    """Real missions, one journal file: name -> (mission id, status, events); the file under ``path``."""
    root = tmp_path_factory.mktemp("memory")
    path = root / "journal.sqlite3"
    out: dict = {"path": path}
    for name, scenario in SCENARIOS.items():
        r = run_one(load_scenario(EVAL / f"{scenario}.yaml"), "gated", workdir=root / name, journal_path=path,
                    overrides=NOT_RECORDED)
        out[name] = (r.mission_id, r.status)
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    j.setup()
    for name in SCENARIOS:
        out[name] = (*out[name], j.events(mission_id=out[name][0]))
    j.close()
    assert [out[n][1] for n in SCENARIOS] == ["SUCCEEDED", "SUCCEEDED", "FAILED", "UNKNOWN"]
    return out


def _events(missions: dict, name: str) -> list[JournalEvent]:
    return list(missions[name][2])


def _by_id(events: list[JournalEvent]) -> dict[str, JournalEvent]:
    return {e.event_id: e for e in events}


# --------------------------------------------------------------------------- derivation


def test_a_succeeded_mission_gives_a_verified_episode_and_succeeded_provider_outcomes(missions):
    events = _events(missions, "inspection")
    [ep], outcomes = derive(events, now=5.0)
    assert ep.verification is Verification.VERIFIED and ep.outcome == "SUCCEEDED"
    assert ep.mission_id == missions["inspection"][0] and ep.recorded_at == 5.0
    assert ep.goal == "Go to office_storage, capture an image there and return to dock."
    assert ep.signature == Signature(kinds=("at_place", "at_place", "image_captured"),
                                     places=("dock", "office_storage"))
    assert ep.contract["kind"] == "completion_contract" and len(ep.contract["obligations"]) == 3
    assert [(s.skill, s.arguments, s.verified) for s in ep.plan] == [
        ("navigate_to", {"place": "office_storage"}, True), ("capture_image", {"label": "office_storage"}, True),
        ("navigate_to", {"place": "dock"}, True)]
    assert [s.result for s in ep.plan] == ["accepted", "ok", "accepted"]  # accepted is not the verified outcome
    assert all(s.receipt == "SUCCEEDED" for s in ep.plan)

    # provenance names the real journal events, each of its type
    by_id = _by_id(events)
    for key, type_ in (("mission_started", EventType.MISSION_STARTED), ("contract_frozen", EventType.CONTRACT_FROZEN),
                       ("verdict", EventType.VERDICT_RECORDED), ("commit", EventType.COMMIT_RECORDED),
                       ("mission_finished", EventType.MISSION_FINISHED)):
        assert by_id[ep.provenance[key]].type is type_, key
    verdict = by_id[ep.provenance["verdict"]].payload["verdict"]
    commit = by_id[ep.provenance["commit"]].payload["commit"]
    assert verdict["goal_verdict"] == "verified_done" and commit["verdict_id"] == verdict["verdict_id"]
    assert set(verdict["evidence_ids"]) <= set(ep.evidence_ids) and commit["commit_id"] in ep.evidence_ids

    assert sorted((o.capability, o.provider, o.context.get("place", ""), o.outcome.value) for o in outcomes) == [
        ("camera", "builtin", "", "succeeded"),
        ("navigation", "sim/navigate_to_pose", "dock", "succeeded"),
        ("navigation", "sim/navigate_to_pose", "office_storage", "succeeded")]
    for o in outcomes:
        receipt = by_id[o.provenance["receipt"]]
        assert receipt.type is EventType.RECEIPT_RECORDED
        assert o.evidence_ids[0] == receipt.payload["receipt"]["receipt_id"]
        assert o.tool_call_id == receipt.tool_call_id
    nav = [o for o in outcomes if o.capability == "navigation"]
    assert all(by_id[o.provenance["action_started"]].robot_action_id == o.action_id for o in nav)

    # deterministic: the same mission gives the same records, ids included, whenever it is derived
    [again], outcomes_again = derive(events, now=99.0)
    assert again.model_copy(update={"recorded_at": 5.0}) == ep
    assert [o.memory_id for o in outcomes_again] == [o.memory_id for o in outcomes]
    assert ep.memory_id.startswith("ep-") and all(o.memory_id.startswith("po-") for o in outcomes)
    assert len({o.memory_id for o in outcomes}) == len(outcomes)


def test_a_failed_mission_gives_a_failed_episode_that_retrieve_never_returns(missions):
    [failed], outcomes = derive(_events(missions, "failed"), now=1.0)
    assert failed.verification is Verification.FAILED and failed.outcome == "FAILED"
    assert failed.provenance["verdict"] and not failed.provenance["commit"]  # a verdict, never committed
    # the first navigation had no path and never ran: not in the plan, and no provider outcome for it
    assert [s.skill for s in failed.plan] == ["capture_image", "navigate_to"]
    assert not any(o.context.get("place") == "office_storage" for o in outcomes)
    # its own contract is the most similar there is, and still it is never an example
    assert similarity(failed.signature, failed.contract) == 1.0
    assert retrieve([failed], failed.contract, 5) == []
    [ok], _ = derive(_events(missions, "inspection"), now=1.0)
    assert retrieve([failed, ok], failed.contract, 5) == [ok]
    assert few_shot([failed]) == []


def test_a_mission_that_ended_unknown_is_not_verified(missions):
    [ep], _ = derive(_events(missions, "unknown"), now=1.0)
    assert ep.verification is Verification.UNKNOWN and ep.outcome == "UNKNOWN"
    assert retrieve([ep], ep.contract, 5) == []


def test_a_mission_that_has_not_ended_gives_nothing(missions):
    events = _events(missions, "inspection")
    unfinished = [e for e in events if e.type is not EventType.MISSION_FINISHED]
    assert derive(unfinished, now=1.0) == ([], [])
    assert derive([], now=1.0) == ([], [])
    with pytest.raises(UsageError, match="one mission"):
        derive(events + _events(missions, "message"), now=1.0)


def _replace(events: list[JournalEvent], event_id: str, payload: dict) -> list[JournalEvent]:
    return [e.model_copy(update={"payload": payload}) if e.event_id == event_id else e for e in events]


def test_nothing_unverified_is_remembered_as_a_success(missions):
    events = _events(missions, "inspection")
    [ep], outcomes = derive(events, now=1.0)
    by_id = _by_id(events)

    # SUCCEEDED without the commit of its verdict: not verified
    no_commit = [e for e in events if e.event_id != ep.provenance["commit"]]
    assert derive(no_commit, now=1.0)[0][0].verification is Verification.UNKNOWN

    # a verdict that does not read: skipped, named, and the episode is not verified
    garbled = _replace(events, ep.provenance["verdict"], {"verdict": {"goal_verdict": 7}})
    [g], _ = derive(garbled, now=1.0)
    assert g.verification is Verification.UNKNOWN and g.provenance["unreadable"] == [ep.provenance["verdict"]]

    # an action the backend accepted and nobody verified (no outcome, no receipt): unknown, not counted
    nav = next(o for o in outcomes if o.context.get("place") == "office_storage")
    cut = [e for e in events if not (e.robot_action_id == nav.action_id and e.type in (
        EventType.ROBOT_ACTION_OUTCOME, EventType.RECEIPT_RECORDED))]
    [cut_ep], cut_outcomes = derive(cut, now=1.0)
    accepted = next(o for o in cut_outcomes if o.action_id == nav.action_id)
    assert accepted.outcome is AttemptOutcome.UNKNOWN
    assert provider_stats(cut_outcomes, "navigation") == {"sim/navigate_to_pose": (1, 1)}
    assert [s.verified for s in cut_ep.plan] == [False, True, True]

    # a physical receipt that says SUCCEEDED with no verified outcome beside it: not a success
    no_outcome = [e for e in events if not (e.robot_action_id == nav.action_id
                                            and e.type is EventType.ROBOT_ACTION_OUTCOME)]
    assert next(o for o in derive(no_outcome, now=1.0)[1] if o.action_id == nav.action_id).outcome \
        is AttemptOutcome.UNKNOWN

    # a receipt that says SUCCEEDED against an outcome that says FAILED: not a success
    outcome_ev = next(e for e in events
                      if e.type is EventType.ROBOT_ACTION_OUTCOME and e.robot_action_id == nav.action_id)
    contradicted = _replace(events, outcome_ev.event_id, {**outcome_ev.payload, "state": "FAILED"})
    assert next(o for o in derive(contradicted, now=1.0)[1] if o.action_id == nav.action_id).outcome \
        is AttemptOutcome.FAILED
    assert by_id[nav.provenance["action_outcome"]].type is EventType.ROBOT_ACTION_OUTCOME


def test_the_intent_names_the_provider_and_capability_when_it_carries_them(missions):
    events = _events(missions, "inspection")
    start = next(e for e in events if e.type is EventType.ROBOT_ACTION_STARTED)
    routed = _replace(events, start.event_id, {**start.payload, "intent": {**start.payload["intent"],
                                                                           "provider": "alt_nav"}})
    lease = next(e for e in events if e.type is EventType.LEASE_ACQUIRED and e.payload.get("intent"))
    routed = _replace(routed, lease.event_id, {**lease.payload, "intent": {**lease.payload["intent"],
                                                                          "provider": "cam2", "capability": "camera"}})
    outcomes = derive(routed, now=1.0)[1]
    assert {(o.capability, o.provider) for o in outcomes} == {
        ("navigation", "alt_nav"), ("navigation", "sim/navigate_to_pose"), ("camera", "cam2")}


def _run(tmp_path: Path, scenario: Path) -> tuple[str, list[JournalEvent]]:
    """One more real mission, alone in a journal of its own: its status and its events."""
    path = tmp_path / "journal.sqlite3"
    r = run_one(load_scenario(scenario), "gated", workdir=tmp_path / "w", journal_path=path, overrides=NOT_RECORDED)
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    j.setup()
    try:
        return r.status, list(j.events(mission_id=r.mission_id))
    finally:
        j.close()


@pytest.mark.parametrize("scenario, capability", [("message-no_ack", "messaging"), ("speech-no_ack", "speech")])
def test_a_speech_or_message_nobody_acknowledged_is_not_a_success(tmp_path, scenario, capability):
    """The robot's reply carries an ack error: the tool said ok and the receipt SUCCEEDED, the verifier
    judged the delivery ambiguous and the mission ended UNKNOWN; memory must not count a success."""
    status, events = _run(tmp_path, EVAL / f"{scenario}.yaml")
    assert status == "UNKNOWN"
    [ep], outcomes = derive(events, now=1.0)
    [call] = [o for o in outcomes if o.capability == capability]
    receipt = _by_id(events)[call.provenance["receipt"]].payload["receipt"]
    assert receipt["status"] == "SUCCEEDED" and "ack_error" in json.dumps(receipt["result"])
    assert call.outcome is AttemptOutcome.UNKNOWN
    assert provider_stats(outcomes, capability) == {"builtin": (0, 0)}  # listed, never an attempt
    assert not next(s for s in ep.plan if s.tool_call_id == call.tool_call_id).verified


def test_a_capability_call_succeeds_only_on_evidence_the_verifier_accepts(missions):
    def outcome(events: list[JournalEvent], capability: str, ev: JournalEvent, **change) -> AttemptOutcome:
        changed = _replace(events, ev.event_id, {**ev.payload, "receipt": {**ev.payload["receipt"], **change}})
        return next(o for o in derive(changed, now=1.0)[1] if o.capability == capability).outcome

    events = _events(missions, "message")
    [msg] = [o for o in derive(events, now=1.0)[1] if o.capability == "messaging"]
    assert msg.outcome is AttemptOutcome.SUCCEEDED
    ev = _by_id(events)[msg.provenance["receipt"]]
    result = ev.payload["receipt"]["result"]
    io = result["content"]["receipt"]

    def delivered(new_io: dict) -> dict:
        return {"result": {**result, "content": {"receipt": new_io}}}

    unacknowledged = {**{k: v for k, v in io.items() if k != "ack"}, "ack_error": "no acknowledgement within 2 s"}
    assert outcome(events, "messaging", ev, **delivered(unacknowledged)) is AttemptOutcome.UNKNOWN
    other_payload = {**io, "ack": {**io["ack"], "sha256": "0" * 64}}
    assert outcome(events, "messaging", ev, **delivered(other_payload)) is AttemptOutcome.UNKNOWN
    other_message = {**io, "ack": {**io["ack"], "message_id": "msg-someone-elses"}}
    assert outcome(events, "messaging", ev, **delivered(other_message)) is AttemptOutcome.UNKNOWN
    assert outcome(events, "messaging", ev, status="FAILED") is AttemptOutcome.FAILED  # the call failed: an attempt

    # an image: only with its artifact's uri and sha256
    events = _events(missions, "inspection")
    [cam] = [o for o in derive(events, now=1.0)[1] if o.capability == "camera"]
    assert cam.outcome is AttemptOutcome.SUCCEEDED
    ev = _by_id(events)[cam.provenance["receipt"]]
    receipt = ev.payload["receipt"]
    no_image = {"result": {**receipt["result"], "content": {}},
                "evidence": [e for e in receipt["evidence"] if e["kind"] != "artifact"]}
    assert outcome(events, "camera", ev, **no_image) is AttemptOutcome.UNKNOWN


def test_a_goal_the_backend_rejected_is_a_failed_attempt_of_its_provider(tmp_path):
    """routing_degraded_provider: nav_main (the robot's own Nav2) rejects every goal; the fallback ran the
    same navigation on nav_backup. The rejection is nav_main's failed attempt."""
    status, events = _run(tmp_path, REPO / "scenarios" / "routing_degraded_provider.yaml")
    assert status == "SUCCEEDED"
    _, outcomes = derive(events, now=1.0)
    assert provider_stats(outcomes, "navigation") == {"nav_backup": (2, 2), "nav_main": (0, 1)}
    [main] = [o for o in outcomes if o.provider == "nav_main"]
    assert main.outcome is AttemptOutcome.FAILED and not main.provenance["action_outcome"]
    by_id = _by_id(events)
    rejected = by_id[main.provenance["action_rejected"]]
    assert rejected.type is EventType.ROBOT_ACTION_STATE_CHANGED and rejected.robot_action_id == main.action_id
    assert (rejected.payload["from"], rejected.payload["to"]) == ("REQUESTED", "FAILED")
    receipt = by_id[main.provenance["receipt"]].payload["receipt"]
    assert (receipt["status"], receipt["action_id"]) == ("REJECTED", main.action_id)

    # a goal the harness could not send at all (no answer from the backend) is not the backend's rejection
    not_sent = _replace(events, rejected.event_id, {**rejected.payload, "reason": "not sent: navigator gone"})
    assert next(o for o in derive(not_sent, now=1.0)[1] if o.provider == "nav_main").outcome is AttemptOutcome.UNKNOWN


@pytest.mark.parametrize("code", ["duplicate_dispatch", "lease_conflict"])
def test_a_harness_refusal_is_nobodys_attempt_and_relabels_nothing(tmp_path, code):
    """inspection-repeated_request: the second navigate_to is refused as a duplicate (REJECTED, naming the
    earlier action, which succeeded). A refusal counts for no provider, even one journaled under the
    earlier call's own id (the last receipt of a call otherwise counts)."""
    status, events = _run(tmp_path, EVAL / "inspection-repeated_request.yaml")
    assert status == "SUCCEEDED"
    [dup] = [e for e in events if e.type is EventType.RECEIPT_RECORDED
             and (e.payload["receipt"]["result"].get("content") or {}).get("code") == "duplicate_dispatch"]
    earlier = dup.payload["receipt"]["action_id"]
    _, outcomes = derive(events, now=1.0)
    first = next(o for o in outcomes if o.action_id == earlier)
    assert first.outcome is AttemptOutcome.SUCCEEDED and first.tool_call_id != dup.tool_call_id
    assert dup.tool_call_id not in {o.tool_call_id for o in outcomes}
    assert provider_stats(outcomes, "navigation") == {"sim/navigate_to_pose": (2, 2)}

    receipt = dup.payload["receipt"]
    refusal = {**receipt, "receipt_id": "rcpt-refusal", "invocation_id": first.tool_call_id,
               "result": {**receipt["result"], "content": {**receipt["result"]["content"], "code": code}}}
    forged = [*events, dup.model_copy(update={"event_id": "ev-refusal", "tool_call_id": first.tool_call_id,
                                              "payload": {**dup.payload, "receipt": refusal}})]
    _, again = derive(forged, now=1.0)
    assert next(o for o in again if o.action_id == earlier).outcome is AttemptOutcome.SUCCEEDED
    assert provider_stats(again, "navigation") == {"sim/navigate_to_pose": (2, 2)}


# --------------------------------------------------------------------------- similarity and retrieval


def _sig(kinds: tuple[str, ...], places: tuple[str, ...] = (), recipients: tuple[str, ...] = ()) -> Signature:
    return Signature(kinds=tuple(sorted(kinds)), places=tuple(sorted(places)), recipients=tuple(sorted(recipients)))


def test_similarity_ranks_shared_kinds_then_shared_places():
    q = _sig(("at_place", "at_place", "image_captured"), ("dock", "office_storage"))
    same = similarity(q, q)
    other_places = similarity(q, _sig(("at_place", "at_place", "image_captured"), ("dock", "lab")))
    fewer_kinds = similarity(q, _sig(("at_place", "image_captured"), ("dock", "office_storage")))
    one_kind = similarity(q, _sig(("at_place",), ("kitchen",)))
    assert same == 1.0 > fewer_kinds > other_places > one_kind > 0.0
    assert fewer_kinds == pytest.approx(0.6 * 2 / 3 + 0.4)  # the kinds are a multiset
    assert similarity(q, _sig(("spoken",), ("dock", "office_storage"))) == 0.0  # no kind shared
    assert similarity(_sig(("spoken",)), _sig(("spoken",))) == 1.0  # neither names a place
    a, b = _sig(("message_delivered", "at_place"), ("lab",), ("ops",)), _sig(("message_delivered",), (), ("cto",))
    assert similarity(a, b) == similarity(b, a) < similarity(a, _sig(("message_delivered",), (), ("ops",)))


def test_signatures_come_from_contracts_or_their_json(missions):
    [ep], _ = derive(_events(missions, "message"), now=1.0)
    assert ep.signature == Signature(kinds=("at_place", "message_delivered"), places=("lab",), recipients=("ops",))
    assert Signature.of(ep.contract) == Signature.of(ep.signature.model_dump()) == ep.signature
    assert Signature.of(None) == Signature.of({}) == Signature()


def _ep(memory_id: str, signature: Signature, *, ended_at: float = 1.0,
        verification: Verification = Verification.VERIFIED, supersedes: str = "", valid: bool = True) -> EpisodeRecord:
    return EpisodeRecord(memory_id=memory_id, mission_id=f"mission-{memory_id}", goal=memory_id, signature=signature,
                         verification=verification, ended_at=ended_at, recorded_at=0.0, supersedes=supersedes,
                         valid=valid, plan=(PlanStep(skill="navigate_to", arguments={"place": "lab"}, verified=True),))


def test_retrieve_orders_by_similarity_then_recency_then_id_and_leaves_out_dissimilar():
    q = _sig(("at_place", "image_captured"), ("lab",))
    eps = [_ep("ep-c", _sig(("at_place",), ("lab",)), ended_at=9.0),
           _ep("ep-b", q, ended_at=1.0), _ep("ep-a", q, ended_at=1.0), _ep("ep-d", q, ended_at=5.0),
           _ep("ep-x", _sig(("spoken",), ("lab",)), ended_at=20.0)]
    assert [e.memory_id for e in retrieve(eps, q, 10)] == ["ep-d", "ep-a", "ep-b", "ep-c"]
    assert [e.memory_id for e in retrieve(eps, q, 2)] == ["ep-d", "ep-a"]
    assert retrieve(eps, q, 0) == []
    with pytest.raises(UsageError):
        retrieve(eps, q, -1)


def test_retrieve_leaves_out_unverified_superseded_and_forgotten_records():
    q = _sig(("at_place",), ("lab",))
    kept = _ep("ep-kept", q)
    old, fix = _ep("ep-old", q), _ep("ep-fix", q, supersedes="ep-old")
    gone = _ep("ep-gone", q)
    forgetting = _ep("fg-gone", q, supersedes="ep-gone", valid=False)
    failed = _ep("ep-failed", q, verification=Verification.FAILED)
    unknown = _ep("ep-unknown", q, verification=Verification.UNKNOWN)
    eps = [kept, old, fix, gone, forgetting, failed, unknown]
    assert {e.memory_id for e in retrieve(eps, q, 10)} == {"ep-kept", "ep-fix"}
    assert [e.memory_id for e in current(eps)] == ["ep-kept", "ep-fix", "ep-failed", "ep-unknown"]
    assert states(eps) == {"ep-kept": "current", "ep-old": "superseded", "ep-fix": "current", "ep-gone": "forgotten",
                           "fg-gone": "forgetting", "ep-failed": "current", "ep-unknown": "current"}


def test_a_chain_with_a_forgotten_record_is_forgotten_whole():
    """As a journal of the previous harness left it: the original forgotten, its correction not."""
    q = _sig(("at_place",), ("lab",))
    a, fix, again = _ep("ep-a", q), _ep("ep-fix", q, supersedes="ep-a"), _ep("ep-again", q, supersedes="ep-fix")
    gone = _ep("fg-a", q, supersedes="ep-a", valid=False)
    other = _ep("ep-other", q)
    eps = [a, fix, again, gone, other]
    assert current(eps) == [other] and retrieve(eps, q, 10) == [other]
    assert states(eps) == {"ep-a": "forgotten", "ep-fix": "forgotten", "ep-again": "forgotten", "fg-a": "forgetting",
                           "ep-other": "current"}


# --------------------------------------------------------------------------- provider statistics


def _po(memory_id: str, provider: str, outcome: AttemptOutcome, *, capability: str = "navigation",
        place: str = "lab", supersedes: str = "", valid: bool = True) -> ProviderOutcome:
    return ProviderOutcome(memory_id=memory_id, mission_id="m", provider=provider, capability=capability,
                           context={"skill": "navigate_to", "place": place}, outcome=outcome, recorded_at=0.0,
                           supersedes=supersedes, valid=valid)


def test_provider_stats_count_verified_successes_over_known_outcomes():
    S, F, U = AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED, AttemptOutcome.UNKNOWN
    outcomes = [_po("po-1", "nav2", S), _po("po-2", "nav2", S, place="dock"), _po("po-3", "nav2", F),
                _po("po-4", "nav2", U), _po("po-5", "alt", U), _po("po-6", "alt", F, place="dock"),
                _po("po-7", "cam", S, capability="camera"),
                _po("po-8", "nav2", S), _po("fg-8", "nav2", S, supersedes="po-8", valid=False),
                _po("po-9", "alt", F), _po("po-9b", "alt", S, supersedes="po-9")]
    assert provider_stats(outcomes, "navigation") == {"alt": (1, 2), "nav2": (2, 3)}
    assert provider_stats(outcomes, "navigation", {"place": "dock"}) == {"alt": (0, 1), "nav2": (1, 1)}
    assert provider_stats(outcomes, "navigation", {"place": "lab"}) == {"alt": (1, 1), "nav2": (1, 2)}
    assert provider_stats(outcomes, "camera") == {"cam": (1, 1)}
    assert provider_stats(outcomes, "speech") == {}
    assert provider_stats([_po("po-u", "alt", U)], "navigation") == {"alt": (0, 0)}


def test_real_missions_give_provider_stats(missions):
    outcomes = [o for n in SCENARIOS for o in derive(_events(missions, n), now=1.0)[1]]
    nav = provider_stats(outcomes, "navigation")
    wins, tries = nav["sim/navigate_to_pose"]
    assert list(nav) == ["sim/navigate_to_pose"] and wins == tries > 0
    assert provider_stats(outcomes, "messaging") == {"builtin": (1, 1)}
    assert provider_stats(outcomes, "navigation", {"place": "lab"}) == {"sim/navigate_to_pose": (1, 1)}


# --------------------------------------------------------------------------- the planner's examples


def test_few_shot_gives_verified_steps_of_verified_episodes_and_fit_trims_from_the_end(missions):
    [ok], _ = derive(_events(missions, "inspection"), now=1.0)
    [msg], _ = derive(_events(missions, "message"), now=1.0)
    [failed], _ = derive(_events(missions, "failed"), now=1.0)
    unverified_step = ok.model_copy(update={"plan": (*ok.plan, PlanStep(skill="spin", verified=False),
                                                     PlanStep(skill="back_up", verified=True, proposed_by="recovery"))})
    shots = few_shot([unverified_step, failed, msg])
    assert shots == [
        {"goal": ok.goal, "outcome": "verified", "memory_id": ok.memory_id,
         "plan": [{"skill": "navigate_to", "arguments": {"place": "office_storage"}},
                  {"skill": "capture_image", "arguments": {"label": "office_storage"}},
                  {"skill": "navigate_to", "arguments": {"place": "dock"}}]},
        {"goal": msg.goal, "outcome": "verified", "memory_id": msg.memory_id,
         "plan": [{"skill": "navigate_to", "arguments": {"place": "lab"}},
                  {"skill": "send_message", "arguments": {"to": "ops", "text": "Arrived at the lab."}}]}]
    size = len(json.dumps(shots, separators=(",", ":"), sort_keys=True).encode())
    assert fit(shots, size) == shots
    assert fit(shots, size - 1) == shots[:1]
    assert fit(shots, 10) == []


# --------------------------------------------------------------------------- the store


def _copy_into(events: list[JournalEvent], j: Journal | None = None) -> Journal:
    """``events`` appended again (new seqs and ids) to ``j``, a fresh ``MemoryJournal`` by default."""
    j = j if j is not None else MemoryJournal(clock=ManualClock(1000.0), ids=IdGenerator(3))
    j.setup()
    for e in events:
        j.append([EventDraft(type=e.type, mission_id=e.mission_id, model_turn_id=e.model_turn_id,
                             tool_call_id=e.tool_call_id, robot_action_id=e.robot_action_id,
                             snapshot_id=e.snapshot_id, payload=e.payload)])
    return j


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def journal(request, missions, tmp_path):
    if request.param == "memory":
        j = _copy_into([e for n in SCENARIOS for e in _events(missions, n)])
    elif request.param == "postgres":
        j = _copy_into([e for n in SCENARIOS for e in _events(missions, n)],
                              PostgresJournal(request.getfixturevalue("pg_url"), clock=ManualClock(1000.0),
                                              ids=IdGenerator(3)))
    else:
        path = tmp_path / "journal.sqlite3"
        shutil.copy(missions["path"], path)
        j = SqliteJournal(path, clock=ManualClock(1000.0), ids=IdGenerator(3))
        j.setup()
    yield j
    j.close()


def _mission(journal, goal_start: str, status: str) -> str:
    return next(m["mission_id"] for m in journal.missions()
                if m["goal"].startswith(goal_start) and m["status"] == status)


def test_recording_a_mission_is_idempotent(journal):
    store = MemoryStore(journal)
    mid = _mission(journal, "Go to office_storage", "SUCCEEDED")
    assert store.record_mission(mid, now=1.0) == (1, 3)
    assert store.record_mission(mid, now=2.0) == (0, 0)
    assert len(journal.memory_rows("memory_episodes")) == 1
    assert len(journal.memory_rows("memory_provider_outcomes")) == 3
    added = store.record_all(now=3.0)
    assert added[mid] == (0, 0) and sum(e for e, _ in added.values()) == 3
    assert store.record_all(now=4.0) == {m: (0, 0) for m in added}
    assert [e.verification.value for e in store.episodes()] == ["verified", "verified", "failed", "unknown"]
    assert store.episodes()[0].recorded_at == 1.0 and store.episodes()[0].recorded_by == "derive"
    with pytest.raises(UsageError, match="no mission"):
        store.record_mission("mission-nope", now=5.0)


def test_examples_and_provider_stats_read_only_verified_memory(journal):
    store = MemoryStore(journal)
    store.record_all(now=1.0)
    failed = next(e for e in store.episodes() if e.verification is Verification.FAILED)
    examples = store.examples(failed.contract, 10)
    assert [e["goal"] for e in examples] == ["Go to office_storage, capture an image there and return to dock.",
                                             "Go to lab and send a message to ops."]
    by_id = {e.memory_id: e for e in store.episodes()}
    assert all(by_id[e["memory_id"]].verification is Verification.VERIFIED for e in examples)
    assert by_id[examples[0]["memory_id"]].signature == failed.signature  # the same task, verified, comes first
    assert examples == few_shot(retrieve(store.episodes(), failed.contract, 10))
    assert json.loads(json.dumps(examples)) == examples  # JSON-ready, as the planner's context and a tape need
    nav = store.provider_stats("navigation")
    assert list(nav) == ["sim/navigate_to_pose"] and nav["sim/navigate_to_pose"][0] == nav["sim/navigate_to_pose"][1]
    assert store.provider_stats("navigation", {"place": "lab"}) == {"sim/navigate_to_pose": (1, 1)}


def test_forget_is_append_only(journal):
    store = MemoryStore(journal)
    store.record_all(now=1.0)
    rows_before = journal.memory_rows("memory_episodes")
    target = retrieve(store.episodes(), store.episodes()[0].contract, 1)[0]
    tomb = store.forget(target.memory_id, by="alice", reason="the map changed", now=7.0)
    rows_after = journal.memory_rows("memory_episodes")
    assert len(rows_after) == len(rows_before) + 1 and rows_after[:-1] == rows_before  # nothing changed or deleted
    assert (tomb.supersedes, tomb.valid, tomb.recorded_by, tomb.reason, tomb.recorded_at) == (
        target.memory_id, False, "alice", "the map changed", 7.0)
    assert rows_after[-1]["memory_id"] == tomb.memory_id and rows_after[-1]["valid"] == 0
    assert target.memory_id not in {e.memory_id for e in store.episodes()}
    assert {target.memory_id, tomb.memory_id} <= {e.memory_id for e in store.episodes(include_forgotten=True)}
    assert target.memory_id not in {e["memory_id"] for e in store.examples(target.contract, 10)}

    # forgetting again changes nothing; a forgotten mission is never derived into memory again
    assert store.forget(target.memory_id, by="bob", reason="again", now=8.0) == tomb
    assert store.record_mission(target.mission_id, now=9.0) == (0, 0)
    assert len(journal.memory_rows("memory_episodes")) == len(rows_after)
    with pytest.raises(UnknownMemory) as err:
        store.forget("ep-nope", by="alice", reason="x", now=9.0)
    assert isinstance(err.value, UsageError) and err.value.code == "unknown_memory"
    with pytest.raises(UsageError, match="is a forgetting"):
        store.forget(tomb.memory_id, by="alice", reason="x", now=9.0)
    with pytest.raises(UsageError, match="why"):
        store.forget(target.memory_id, by="alice", reason=" ", now=9.0)

    # a provider outcome: forgotten, and no longer counted
    nav = next(o for o in store.outcomes() if o.context.get("place") == "lab")
    store.forget(nav.memory_id, by="alice", reason="a test run", now=9.0)
    assert store.provider_stats("navigation", {"place": "lab"}) == {}
    exported = store.export()
    assert {r["memory_id"] for r in exported} >= {target.memory_id, tomb.memory_id, nav.memory_id}
    assert next(r for r in exported if r["memory_id"] == tomb.memory_id)["supersedes"] == target.memory_id


def test_a_changed_derivation_appends_a_correction_that_supersedes_the_record(journal):
    store = MemoryStore(journal)
    mid = _mission(journal, "Go to office_storage", "SUCCEEDED")
    store.record_mission(mid, now=1.0)
    cam = next(o for o in store.outcomes() if o.capability == "camera")
    assert cam.outcome is AttemptOutcome.SUCCEEDED
    # the call's receipt, written again as FAILED (a later writer's finding; the last receipt of a call counts)
    ev = next(e for e in journal.events(mission_id=mid, types=[EventType.RECEIPT_RECORDED])
              if e.tool_call_id == cam.tool_call_id)
    receipt = payload_of(ev, ReceiptRecorded).receipt.model_copy(update={"receipt_id": "rcpt-again",
                                                                         "status": ReceiptStatus.FAILED})
    journal.append([EventDraft(type=EventType.RECEIPT_RECORDED, mission_id=mid, tool_call_id=ev.tool_call_id,
                               payload=ReceiptRecorded(receipt=receipt))])
    assert store.record_mission(mid, now=2.0) == (1, 1)  # the episode's plan changed too
    fix = next(o for o in store.outcomes() if o.capability == "camera")
    assert fix.supersedes == cam.memory_id and fix.outcome is AttemptOutcome.FAILED and fix.reason
    assert cam.memory_id in {o.memory_id for o in store.outcomes(include_forgotten=True)}
    assert store.provider_stats("camera") == {"builtin": (0, 1)}
    assert store.record_mission(mid, now=3.0) == (0, 0)

    # forgotten, then changed again: the episode is corrected, the forgotten outcome is not brought back
    store.forget(fix.memory_id, by="alice", reason="a bad camera day", now=4.0)
    receipt = receipt.model_copy(update={"receipt_id": "rcpt-third", "status": ReceiptStatus.SUCCEEDED})
    journal.append([EventDraft(type=EventType.RECEIPT_RECORDED, mission_id=mid, tool_call_id=ev.tool_call_id,
                               payload=ReceiptRecorded(receipt=receipt))])
    assert store.record_mission(mid, now=5.0) == (1, 0)
    assert store.provider_stats("camera") == {}


def _rewrite_receipt(journal, mission_id: str, tool_call_id: str, receipt_id: str, status: ReceiptStatus) -> None:
    """A call's receipt written again (a later writer's finding; the last receipt of a call counts)."""
    ev = next(e for e in journal.events(mission_id=mission_id, types=[EventType.RECEIPT_RECORDED])
              if e.tool_call_id == tool_call_id)
    receipt = payload_of(ev, ReceiptRecorded).receipt.model_copy(update={"receipt_id": receipt_id, "status": status})
    journal.append([EventDraft(type=EventType.RECEIPT_RECORDED, mission_id=mission_id, tool_call_id=tool_call_id,
                               payload=ReceiptRecorded(receipt=receipt))])


def test_forgetting_a_corrected_record_forgets_its_whole_chain(journal):
    store = MemoryStore(journal)
    mid = _mission(journal, "Go to office_storage", "SUCCEEDED")
    store.record_mission(mid, now=1.0)
    [original] = store.episodes()
    cam = next(o for o in store.outcomes() if o.capability == "camera")
    _rewrite_receipt(journal, mid, cam.tool_call_id, "rcpt-again", ReceiptStatus.FAILED)
    assert store.record_mission(mid, now=2.0) == (1, 1)
    [fix] = store.episodes()
    assert fix.supersedes == original.memory_id and fix.verification is Verification.VERIFIED
    assert [e["memory_id"] for e in store.examples(fix.contract, 5)] == [fix.memory_id]

    before = journal.memory_rows(EPISODES)
    tomb = store.forget(original.memory_id, by="alice", reason="the map changed", now=3.0)
    after = journal.memory_rows(EPISODES)
    assert after[:len(before)] == before and len(after) == len(before) + 2  # appended, nothing changed
    assert {(r["supersedes"], r["valid"], r["recorded_by"]) for r in after[len(before):]} == {
        (original.memory_id, 0, "alice"), (fix.memory_id, 0, "alice")}
    assert (tomb.supersedes, tomb.reason) == (original.memory_id, "the map changed")
    assert store.episodes() == [] and store.examples(fix.contract, 5) == []
    assert {m: s for m, s in states(store.episodes(include_forgotten=True)).items() if m.startswith("ep-")} == {
        original.memory_id: "forgotten", fix.memory_id: "forgotten"}
    # idempotent, from either end of the chain; and never derived again
    assert store.forget(original.memory_id, by="bob", reason="again", now=4.0) == tomb
    assert store.forget(fix.memory_id, by="bob", reason="again", now=4.0).supersedes == fix.memory_id
    assert store.record_mission(mid, now=5.0) == (0, 0)
    assert len(journal.memory_rows(EPISODES)) == len(after)

    # forgetting the correction forgets what it corrected too
    fixed_cam = next(o for o in store.outcomes() if o.capability == "camera")
    assert fixed_cam.supersedes == cam.memory_id
    n = len(journal.memory_rows(OUTCOMES))
    store.forget(fixed_cam.memory_id, by="alice", reason="a bad camera day", now=6.0)
    assert {r["supersedes"] for r in journal.memory_rows(OUTCOMES)[n:]} == {fixed_cam.memory_id, cam.memory_id}
    assert store.provider_stats("camera") == {}


def test_a_row_this_code_cannot_read_fails_the_read_and_names_it(journal):
    """A value a newer harness wrote (or a hand edit): a JournalReadError naming table, row and field, never
    a bare ValidationError; another mission's recording, which reads only its own rows, goes on."""
    store = MemoryStore(journal)
    store.record_all(now=1.0)
    nav = next(o for o in store.outcomes() if o.capability == "navigation")
    newer = {**nav.model_dump(mode="json", exclude={"kind"}), "memory_id": "po-newer", "outcome": "partially",
             "valid": 1}
    journal.add_memory_row(OUTCOMES, newer)
    for read in (lambda: store.provider_stats("navigation"), store.outcomes,
                 lambda: store.record_mission(nav.mission_id, now=2.0)):
        with pytest.raises(UnreadableMemory) as err:
            read()
        e = err.value
        assert isinstance(e, JournalReadError) and e.code == "unreadable_memory"
        assert (e.table, e.memory_id, e.field) == (OUTCOMES, "po-newer", "outcome")
        assert all(w in e.message for w in (OUTCOMES, "po-newer", "outcome")) and "\n" not in e.message
        assert e.to_dict()["field"] == "outcome"
        assert type(e)(e.message, **e.details).to_dict() == e.to_dict()  # as a decision tape raises it again
    other = next(m["mission_id"] for m in journal.missions() if m["mission_id"] != nav.mission_id and m["status"])
    assert store.record_mission(other, now=2.0) == (0, 0)
    assert store.episodes()  # the other table reads

    journal.add_memory_row(EPISODES, {**store.episodes()[0].model_dump(mode="json", exclude={"kind"}),
                                      "memory_id": "ep-future", "format_version": 99, "valid": 1})
    with pytest.raises(UnreadableMemory, match="format_version") as err:
        store.examples({"obligations": [{"kind": "at_place", "params": {"place": "dock"}}]}, 3)
    assert err.value.memory_id == "ep-future"


def test_recording_a_mission_reads_only_its_own_rows(journal, monkeypatch):
    store = MemoryStore(journal)
    assert journal.memory_last_seq(OUTCOMES) == -1 and journal.memory_rows(OUTCOMES, mission_id="m") == []
    store.record_all(now=1.0)
    mid = _mission(journal, "Go to lab", "SUCCEEDED")
    every = journal.memory_rows(OUTCOMES)
    mine = journal.memory_rows(OUTCOMES, mission_id=mid)
    assert mine and mine == [r for r in every if r["mission_id"] == mid] and len(mine) < len(every)
    assert journal.memory_last_seq(OUTCOMES) == every[-1]["seq"]

    read, asked = journal.memory_rows, []

    def spy(table, **only):
        asked.append((table, only))
        return read(table, **only)

    monkeypatch.setattr(journal, "memory_rows", spy)
    assert store.record_mission(mid, now=2.0) == (0, 0)
    assert {t for t, _ in asked} == {EPISODES, OUTCOMES} and all(only == {"mission_id": mid} for _, only in asked)


def test_a_writer_that_raced_another_appends_nothing_twice(journal, monkeypatch):
    """Another recorder (or forgetter) appends between this one's read and its append: the append is refused
    as stale, this one reads again and finds the work done."""
    first, second = MemoryStore(journal), MemoryStore(journal)
    mid = _mission(journal, "Go to office_storage", "SUCCEEDED")
    read = journal.memory_rows
    race: list = []

    def read_then_race(table, **only):
        rows = read(table, **only)
        if race and race[0] is not None:
            other, race[0] = race[0], None
            other()
        return rows

    monkeypatch.setattr(journal, "memory_rows", read_then_race)
    race.append(lambda: second.record_mission(mid, now=2.0))
    assert first.record_mission(mid, now=1.0) == (0, 0)
    assert len(read("memory_episodes")) == 1 and len(read("memory_provider_outcomes")) == 3
    assert {e.recorded_at for e in first.episodes()} == {2.0}

    target = first.episodes()[0].memory_id
    race[0] = lambda: second.forget(target, by="bob", reason="first", now=3.0)
    tomb = first.forget(target, by="alice", reason="second", now=4.0)
    assert (tomb.recorded_by, tomb.reason) == ("bob", "first") and len(read("memory_episodes")) == 2


def test_memory_survives_reopening_a_sqlite_journal(missions, tmp_path):
    path = tmp_path / "j.sqlite3"
    shutil.copy(missions["path"], path)
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    j.setup()
    store = MemoryStore(j)
    store.record_all(now=1.0)
    store.forget(store.outcomes()[0].memory_id, by="alice", reason="x", now=2.0)
    episodes, outcomes = store.episodes(include_forgotten=True), store.outcomes(include_forgotten=True)
    examples = store.examples(episodes[0].contract, 3)
    j.close()
    again = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    again.setup()
    store = MemoryStore(again)
    assert store.episodes(include_forgotten=True) == episodes and store.outcomes(include_forgotten=True) == outcomes
    assert store.examples(episodes[0].contract, 3) == examples and len(store.outcomes()) == len(outcomes) - 2
    again.close()
    con = sqlite3.connect(path)  # plain for sqlite-utils: text, numbers and JSON in TEXT, no blobs
    try:
        for table, (_, columns, _) in MEMORY_TABLES.items():
            kinds: set[str] = set()
            for column in columns:  # names from MEMORY_TABLES
                kinds |= {t for (t,) in con.execute(f"SELECT DISTINCT typeof({column}) FROM {table}")}  # noqa: S608
            assert kinds and kinds <= {"text", "integer", "real", "null"}, (table, kinds)
        row = con.execute("SELECT signature, valid FROM memory_episodes ORDER BY seq LIMIT 1").fetchone()
        assert json.loads(row[0])["kinds"] and row[1] == 1
    finally:
        con.close()


def test_a_journal_without_the_memory_tables_migrates_on_open(missions, tmp_path):
    path = tmp_path / "old.sqlite3"
    shutil.copy(missions["path"], path)
    con = sqlite3.connect(path)  # as a journal of the previous harness: no 0005, no memory tables
    con.executescript("DROP TABLE IF EXISTS memory_episodes; DROP TABLE IF EXISTS memory_provider_outcomes;"
                      "DELETE FROM migrations WHERE name = '0005_memory';")
    con.commit()
    assert not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_episodes'").fetchone()
    con.close()
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    try:
        j.setup()
        assert j.applied_migrations()[-1] == "0005_memory"
        store = MemoryStore(j)
        assert store.episodes() == [] and store.outcomes() == []
        assert sum(e for e, _ in store.record_all(now=1.0).values()) == 4
    finally:
        j.close()


def test_memory_tables_refuse_unknown_tables_and_columns(journal):
    with pytest.raises(UsageError, match="no memory table"):
        journal.memory_rows("config_versions")
    with pytest.raises(UsageError, match="no configuration table"):
        journal.config_rows("memory_episodes")
    with pytest.raises(UsageError, match="no column"):
        journal.add_memory_row("memory_episodes", {"memory_id": "ep-x", "sql": "x"})


# -- the runner's side: remembered as each mission ends, read back by the next --------------------------


def _contexts(path: Path, mission_id: str) -> list[dict]:
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    j.setup()
    try:
        return [payload_of(e, ModelTurnStarted).context for e in j.events(mission_id=mission_id)
                if e.type is EventType.MODEL_TURN_STARTED]
    finally:
        j.close()


def test_each_mission_is_remembered_as_it_ends_and_the_next_similar_one_is_shown_its_plan(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    first = run_one(load_scenario(EVAL / "inspection-none.yaml"), "gated", workdir=tmp_path / "a", journal_path=path)
    failed = run_one(load_scenario(EVAL / "inspection-no_path.yaml"), "gated", workdir=tmp_path / "b",
                     journal_path=path)
    second = run_one(load_scenario(EVAL / "inspection-none.yaml"), "gated", workdir=tmp_path / "c", journal_path=path)
    assert (first.status, failed.status, second.status) == ("SUCCEEDED", "FAILED", "SUCCEEDED")
    assert "verified_examples" not in _contexts(path, first.mission_id)[0]  # nothing remembered yet
    shown = _contexts(path, second.mission_id)[0]["verified_examples"]
    j = SqliteJournal(path, clock=ManualClock(0.0), ids=IdGenerator(None))
    j.setup()
    try:
        store = MemoryStore(j)
        episodes = {e.mission_id: e for e in store.episodes()}
    finally:
        j.close()
    assert episodes[first.mission_id].verification is Verification.VERIFIED
    assert episodes[failed.mission_id].verification is Verification.FAILED
    assert episodes[second.mission_id].verification is Verification.VERIFIED
    # only the verified attempt, never the failed one (remembered before the second mission ran, same task)
    assert [e["memory_id"] for e in shown] == [episodes[first.mission_id].memory_id]
    assert episodes[failed.mission_id].memory_id not in {e["memory_id"] for e in shown}


def test_the_examples_are_bounded_by_the_config_and_the_context_cap(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    for k in range(3):
        run_one(load_scenario(EVAL / "inspection-none.yaml"), "gated", workdir=tmp_path / f"w{k}", journal_path=path)
    one = run_one(load_scenario(EVAL / "inspection-none.yaml"), "gated", workdir=tmp_path / "one", journal_path=path,
                  overrides={"memory": {"examples": 1}})
    none = run_one(load_scenario(EVAL / "inspection-none.yaml"), "gated", workdir=tmp_path / "none",
                   journal_path=path, overrides={"memory": {"examples": 0}})
    tight = run_one(load_scenario(EVAL / "inspection-none.yaml"), "gated", workdir=tmp_path / "tight",
                    journal_path=path, overrides={"context_byte_cap": 1200})
    assert len(_contexts(path, one.mission_id)[0]["verified_examples"]) == 1
    assert "verified_examples" not in _contexts(path, none.mission_id)[0]
    for ctx in _contexts(path, tight.mission_id):
        assert context_size(ctx) <= 1200 or "verified_examples" not in ctx
