"""Typed journal payloads (core/payloads.py): one model per event type, old journals still read,
wrong shapes refused on write, and no reader outside payloads.py re-learns a payload's dict keys."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from robot_harness.core import payloads as P
from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.errors import UsageError
from robot_harness.core.journal import open_journal
from robot_harness.core.records import ActionStatus, EventDraft, EventType, JournalEvent
from robot_harness.evidence.replay import journal_from_jsonl

E = EventType
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "robot_harness"
RECORDED = sorted((ROOT / "test" / "replay" / "regression").glob("*.jsonl"))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def journal(request, tmp_path):
    target = (None if request.param == "memory" else tmp_path / "j.db" if request.param == "sqlite"
              else request.getfixturevalue("pg_url"))
    j = open_journal(target, clock=ManualClock(), ids=IdGenerator(seed=3))
    yield j
    j.close()


def recorded_events() -> list[JournalEvent]:
    out = []
    for path in RECORDED:
        for line in path.read_text().splitlines():
            if line.strip():
                out.append(JournalEvent.model_validate_json(line))
    return out


def test_every_event_type_has_its_own_model():
    assert set(P.PAYLOAD_MODELS) == set(EventType)
    for type_, model in P.PAYLOAD_MODELS.items():
        assert model.EVENT_TYPE is type_
        assert model.__doc__, model.__name__
    assert len(set(P.PAYLOAD_MODELS.values())) == len(EventType)


def test_recorded_journals_written_before_typed_payloads_still_read():
    events = recorded_events()
    assert len(events) > 100 and RECORDED
    seen = set()
    for ev in events:
        typed = P.payload_of(ev)
        assert isinstance(typed, P.PAYLOAD_MODELS[ev.type])
        assert typed.payload_version == 0, "written as plain dicts"
        seen.add(ev.type)
    assert {E.MISSION_STARTED, E.RECEIPT_RECORDED, E.VERDICT_RECORDED, E.COMMIT_RECORDED,
            E.ROBOT_ACTION_STARTED, E.MISSION_FINISHED} <= seen
    # fields added after those journals were written read with their defaults
    started = next(P.payload_of(ev, P.MissionStarted) for ev in events if ev.type is E.MISSION_STARTED)
    assert started.goal and started.owner_hmac == "" and started.sender_hmac == ""


def test_recorded_journals_can_be_written_again_through_the_validating_journal():
    for path in RECORDED:
        recorded = [JournalEvent.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]
        rebuilt = journal_from_jsonl(path).events()  # every event re-appended: validated on write
        assert [e.payload for e in rebuilt] == [e.payload for e in recorded], path.name


def test_unknown_keys_are_kept_and_missing_later_fields_default(journal):
    (ev,) = journal.append([EventDraft(type=E.STOP_REQUESTED, mission_id="m-1",
                                       payload={"reason": "aisle", "from_another_writer": [1, 2]})])
    typed = P.payload_of(ev, P.StopRequested)
    assert (typed.reason, typed.source) == ("aisle", "")
    assert typed.model_extra == {"from_another_writer": [1, 2]}
    assert P.payload_dict(typed) == {"reason": "aisle", "from_another_writer": [1, 2],
                                     "payload_version": P.PAYLOAD_FORMAT_VERSION}


def test_a_writer_passes_the_model_and_the_journal_stores_its_dump(journal):
    model = P.RobotActionStateChanged(from_=ActionStatus.REQUESTED, to=ActionStatus.ACCEPTED, revision=1,
                                      reason="accepted by the backend")
    (ev,) = journal.append([EventDraft(type=E.ROBOT_ACTION_STATE_CHANGED, mission_id="m-1", robot_action_id="a-1",
                                       payload=model)])
    assert ev.payload == {"from": "REQUESTED", "to": "ACCEPTED", "revision": 1, "reason": "accepted by the backend",
                          "payload_version": P.PAYLOAD_FORMAT_VERSION}
    again = P.payload_of(journal.events()[0], P.RobotActionStateChanged)
    assert (again.from_, again.to, again.revision, again.backend_goal_id) == (
        ActionStatus.REQUESTED, ActionStatus.ACCEPTED, 1, "")
    assert json.loads(json.dumps(ev.payload)) == ev.payload


def test_a_wrong_shape_is_refused_on_write_and_nothing_is_stored(journal):
    bad = [
        EventDraft(type=E.LEASE_ACQUIRED, mission_id="m-1", payload={"resource": "base"}),  # no owner
        EventDraft(type=E.ROBOT_ACTION_STATE_CHANGED, mission_id="m-1", payload={"to": "FLYING"}),
        EventDraft(type=E.RECEIPT_RECORDED, mission_id="m-1", payload={"receipt": {"not": "a receipt"}}),
        EventDraft(type=E.MISSION_FINISHED, mission_id="m-1", payload={"evidence_seqs": "all of them"}),
        EventDraft(type=E.STOP_REQUESTED, mission_id="m-1", payload=P.DoneProposed(text="another type's model")),
    ]
    for draft in bad:
        with pytest.raises(P.PayloadShapeError) as info:
            journal.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-1", payload={"goal": "g"}), draft])
        assert isinstance(info.value, UsageError)
        assert draft.type.value in info.value.message
    assert journal.last_seq() == 0


def test_payload_of_is_typed_cached_and_follows_a_copied_event(journal):
    (ev,) = journal.append([EventDraft(type=E.DONE_PROPOSED, mission_id="m-1", payload={"text": "arrived"})])
    first = P.payload_of(ev, P.DoneProposed)
    assert first.text == "arrived" and P.payload_of(ev) is first
    copied = ev.model_copy(update={"payload": {"text": "something else"}})
    assert P.payload_of(copied, P.DoneProposed).text == "something else"
    assert P.payload_of(ev, P.DoneProposed) is first
    with pytest.raises(P.PayloadShapeError):
        P.payload_of(ev, P.StopRequested)
    assert P.payload_of((E.DONE_PROPOSED, {"text": "pair"}), P.DoneProposed).text == "pair"
    draft = EventDraft(type=E.DONE_PROPOSED, payload=P.DoneProposed(text="draft"))
    assert P.payload_of(draft, P.DoneProposed) is draft.payload


def test_a_stored_payload_that_does_not_validate_is_a_read_error():
    odd = JournalEvent(seq=1, event_id="ev-1", type=E.VERDICT_RECORDED, stamp=1.0,
                       payload={"verdict": {"not": "a verdict"}})
    with pytest.raises(P.PayloadReadError, match="VERDICT_RECORDED"):
        P.payload_of(odd)


# --------------------------------------------------------------------------- no reader re-learns a payload

READS = re.compile(r"payload\.get\(|payload\[")
ALIASES = re.compile(r"=\s*[\w.]+\.payload\s*$")
"""``p = event.payload`` (then ``p["x"]``): the same dict read under another name."""

NOT_YET_CONVERTED: frozenset[str] = frozenset()
"""Readers still written against the payload dicts: none (engine.py, nodes/supervisor.py,
core/mission|execution|authority and evidence/foxglove.py were on it while they were converted)."""
NOT_YET_CONVERTED_PACKAGES: tuple[str, ...] = ()
"""Package folders likewise (``robot_harness/core/<package>/``); empty."""


def test_no_payload_dict_reads_outside_payloads_py():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "robot_harness/core/payloads.py" or rel in NOT_YET_CONVERTED \
                or (NOT_YET_CONVERTED_PACKAGES and rel.startswith(NOT_YET_CONVERTED_PACKAGES)):
            continue
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if READS.search(line) or ALIASES.search(line):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "read payloads through payloads.payload_of:\n" + "\n".join(offenders)


def test_the_allow_list_names_only_files_that_still_need_it():
    assert not NOT_YET_CONVERTED_PACKAGES
    for rel in NOT_YET_CONVERTED:
        path = ROOT / rel
        assert path.is_file(), f"{rel} is gone: remove it from the list"
        text = path.read_text()
        assert READS.search(text) or any(ALIASES.search(line) for line in text.splitlines()), \
            f"{rel} reads payloads typed now: remove it from the list"
