"""Replay a recorded mission's verification and commit gate, and report what differs.

Every verdict is journaled with the exact request the verifier got and the
fresh snapshot it judged (``VERDICT_RECORDED``: ``verdict``, ``request``;
the snapshot by id). A replay re-runs the same ``Verifier`` on those inputs,
under the mission's own configuration or a changed one (``overrides``, e.g. a
tighter tolerance), then puts each replayed verdict through the commit gate
against the task state the journal held at that moment. No robot, no model,
no waiting: a mission of minutes replays in milliseconds.

A difference is reported per obligation (``o2: satisfied -> violated``), for
the goal verdict, and for the gate's decision.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.authority import verifier_config
from ..core.clock import IdGenerator, ManualClock
from ..core.completion import Verdict
from ..core.config import deep_merge, load_harness_config
from ..core.errors import UsageError
from ..core.gate import CommitGate, GateRejection, TaskState
from ..core.journal import Journal
from ..core.records import EventType
from ..core.verifier import Verifier, VerifyRequest, check_file_artifact

__all__ = ["ReplayedVerdict", "ReplayReport", "replay_mission"]


@dataclass
class ReplayedVerdict:
    seq: int
    recorded_id: str
    recorded: str
    replayed: str
    recorded_committed: bool
    replayed_committed: bool
    diffs: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "recorded_verdict_id": self.recorded_id, "recorded": self.recorded,
                "replayed": self.replayed, "recorded_committed": self.recorded_committed,
                "replayed_committed": self.replayed_committed, "diffs": self.diffs}


@dataclass
class ReplayReport:
    mission_id: str
    overrides: dict[str, Any]
    verdicts: list[ReplayedVerdict]
    skipped: int = 0
    """Verdicts recorded without their request (journals older than this feature)."""

    @property
    def identical(self) -> bool:
        return not any(v.diffs for v in self.verdicts)

    def as_dict(self) -> dict[str, Any]:
        return {"mission_id": self.mission_id, "overrides": self.overrides, "identical": self.identical,
                "skipped": self.skipped, "verdicts": [v.as_dict() for v in self.verdicts]}


def _steps(v: Verdict) -> dict[str, str]:
    return {s.obligation_id: s.verdict.value for s in v.steps}


def replay_mission(journal: Journal, mission_id: str, *, overrides: dict[str, Any] | None = None,
                   semantic: Any = None) -> ReplayReport:
    """Re-verify every recorded done proposal of ``mission_id``; ``overrides`` change the harness config."""
    events = journal.events(mission_id=mission_id)
    started = next((e for e in events if e.type is EventType.MISSION_STARTED), None)
    if started is None:
        raise UsageError(f"no mission {mission_id!r} in the journal", mission_id=mission_id)
    config = load_harness_config(overrides=deep_merge(started.payload.get("config") or {}, overrides or {}))
    committed = {e.payload["commit"]["verdict_id"] for e in events if e.type is EventType.COMMIT_RECORDED}
    out: list[ReplayedVerdict] = []
    skipped = 0
    for i, ev in enumerate(events):
        if ev.type is not EventType.VERDICT_RECORDED:
            continue
        if "request" not in ev.payload:
            skipped += 1
            continue
        recorded = Verdict.model_validate(ev.payload["verdict"])
        request = VerifyRequest.model_validate(ev.payload["request"])
        fresh = journal.get_snapshot(ev.snapshot_id)
        clock = ManualClock(recorded.created_at or fresh.captured_at)  # the verdict's own time
        verifier = Verifier(verifier_config(config), semantic=semantic, artifact_check=check_file_artifact,
                            ids=IdGenerator(0), clock=clock, name="replay")
        replayed = verifier.verify(request, fresh)
        # the gate, against the task state the journal held just before this verdict
        state = TaskState.from_events(events[:i], mission_id=mission_id)
        try:
            CommitGate(ids=IdGenerator(0), clock=clock).decide(replayed, state=state, plan_node_id=ev.model_turn_id, invocation_id=ev.tool_call_id)
            replay_commit = True
        except GateRejection:
            replay_commit = False
        diffs: list[str] = []
        if recorded.goal_verdict != replayed.goal_verdict:
            diffs.append(f"goal: {recorded.goal_verdict.value} -> {replayed.goal_verdict.value}")
        before, after = _steps(recorded), _steps(replayed)
        for ob in sorted(set(before) | set(after)):
            if before.get(ob) != after.get(ob):
                diffs.append(f"{ob}: {before.get(ob, '-')} -> {after.get(ob, '-')}")
        was_committed = recorded.verdict_id in committed
        if was_committed != replay_commit:
            diffs.append(f"commit: {'yes' if was_committed else 'no'} -> {'yes' if replay_commit else 'no'}")
        out.append(ReplayedVerdict(seq=ev.seq, recorded_id=recorded.verdict_id, recorded=recorded.goal_verdict.value,
                                   replayed=replayed.goal_verdict.value, recorded_committed=was_committed,
                                   replayed_committed=replay_commit, diffs=diffs))
    return ReplayReport(mission_id=mission_id, overrides=dict(overrides or {}), verdicts=out, skipped=skipped)
