"""A verdict the verifier node really gave, replayed against a newer state version, is rejected by the gate.

The mission runs on the real node graph (verifier node over loopback DDS,
sim_robot); the test then takes the verdict the gate committed and offers it
to the commit gate again, first against the state it judged (still
acceptable: the replay itself is sound) and then against that state plus one
later receipt (a newer state version): refused, naming the state version,
never reinterpreted.
"""
from __future__ import annotations

import pytest

from robot_harness.core.clock import IdGenerator, SystemClock
from robot_harness.core.completion import Verdict
from robot_harness.core.gate import CommitGate, GateRejection, TaskState
from robot_harness.core.records import EventType

from ._graph import DONE, GO_SPOT, run, scenario


def test_a_real_verdict_replayed_against_a_newer_state_version_is_rejected(tmp_path):
    report, events = run(tmp_path, scenario([GO_SPOT, DONE]))
    assert report["status"] == "SUCCEEDED", report["summary"]
    (verdict_event,) = [e for e in events if e.type is EventType.VERDICT_RECORDED]
    verdict = Verdict.model_validate(verdict_event.payload["verdict"])
    assert verdict.verifier.startswith("/verifier"), "judged by the verifier node, not in-process"
    assert [e for e in events if e.type is EventType.COMMIT_RECORDED], "the gate committed it in the mission"
    judged = [e for e in events if e.seq < verdict_event.seq]
    state = TaskState.from_events(judged)
    assert state.state_version == verdict.state_version

    gate = CommitGate(IdGenerator(None), SystemClock())
    accepted = gate.decide(verdict, state=state, plan_node_id=verdict.plan_node_id,
                           invocation_id=verdict.invocation_id)
    assert accepted.verdict_id == verdict.verdict_id

    (receipt_event, *_) = [e for e in judged if e.type is EventType.RECEIPT_RECORDED]
    later = dict(receipt_event.payload["receipt"], receipt_id="rcpt-later-attempt")
    newer = TaskState.from_events([*judged, (EventType.RECEIPT_RECORDED.value, {"receipt": later})])
    assert newer.state_version == verdict.state_version + 1
    with pytest.raises(GateRejection) as refused:
        gate.decide(verdict, state=newer, plan_node_id=verdict.plan_node_id, invocation_id=verdict.invocation_id)
    assert refused.value.details["field"] == "state_version"
