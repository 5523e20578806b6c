"""What a mission observes and records as evidence: world snapshots and the evidence bag.

``Observations.capture`` is the only place a mission asks for a snapshot; it
stamps the snapshot with the mission's actions, extends the pose trajectory
the verifier judges, records it in the bag and drafts its journal event.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from ..clock import Clock
from ..completion import EvidenceRef
from ..errors import HarnessError, RefusalError
from ..ports import EvidenceRecorder, NavigationPort, SnapshotPort
from ..payloads import WorldSnapshotCaptured
from ..records import Availability, EventDraft, EventType, MissionStatus, WorldSnapshot
from ..verifier import PoseSample
from .ledger import MissionLedger
from .state import MissionState

__all__ = ["NoWorldSnapshot", "Observations", "SNAPSHOT_TOPIC", "VERDICT_TOPIC"]

SNAPSHOT_TOPIC = "/robot_harness/snapshots"
VERDICT_TOPIC = "/robot_harness/verdicts"


class NoWorldSnapshot(RefusalError):
    """The snapshot source did not answer: the mission cannot see the world, so it ends BLOCKED."""

    code = "no_world_snapshot"


@dataclass(eq=False, kw_only=True)
class Observations:
    state: MissionState
    ledger: MissionLedger
    snapshots: SnapshotPort
    recorder: EvidenceRecorder | None
    navigation: NavigationPort
    clock: Clock

    def capture(self, reason: str) -> tuple[WorldSnapshot, EventDraft]:
        """Capture a snapshot and draft its journal event (for the caller's commit).

        Raises ``NoWorldSnapshot`` when the source does not answer.
        """
        snap = self.peek(reason)
        return snap, self.keep(snap, reason)

    def peek(self, reason: str) -> WorldSnapshot:
        """Capture a snapshot, stamped with the mission's actions, without recording it: only what is
        kept (``keep``) is journaled and joins the trajectory the verifier judges."""
        s = self.state
        try:
            snap = self.snapshots.capture(reason=reason, mission_id=s.mission_id)
        except HarnessError as exc:
            raise NoWorldSnapshot(f"no world snapshot ({reason}): {exc.message}", reason=reason) from None
        active = s.active.view() if s.active is not None else None
        recent = next((a.view() for a in reversed(s.actions) if a.terminal), None)
        return snap.model_copy(update={"active_action": active, "recent_outcome": recent, "mission_id": s.mission_id})

    def keep(self, snap: WorldSnapshot, reason: str) -> EventDraft:
        """A peeked snapshot joins the pose trajectory; its journal event is drafted (for the caller's commit)."""
        s, meta = self.state, snap.pose_meta
        if snap.pose is not None and meta.availability is Availability.AVAILABLE and meta.source_stamp is not None:
            if not s.trajectory or s.trajectory[-1].t < meta.source_stamp:
                s.trajectory.append(PoseSample(t=meta.source_stamp, pose=snap.pose, source_id=snap.snapshot_id))
        return self.snapshot_draft(snap, reason)

    def capture_now(self, reason: str) -> WorldSnapshot:
        """Capture a snapshot and commit its event at once."""
        snap, draft = self.capture(reason)
        self.ledger.append_many([draft])
        return snap

    def capture_after(self, not_before: float | None, settle_s: float) -> tuple[WorldSnapshot, EventDraft]:
        """The post-terminal snapshot, waiting (bounded) for a pose observed after the terminal report."""
        deadline = self.clock.monotonic() + settle_s
        snap, draft = self.capture("post_terminal")
        while not_before is not None and self.clock.monotonic() < deadline:
            stamp = snap.pose_meta.source_stamp
            if stamp is not None and stamp >= not_before:
                break
            self.navigation.poll(0.05)  # a bounded wait; late events about a judged goal are irrelevant
            snap, draft = self.capture("post_terminal")
        return snap, draft

    def snapshot_draft(self, snap: WorldSnapshot, reason: str) -> EventDraft:
        """A snapshot's journal event, after recording it in the bag (its ref rides on the event)."""
        ref = self.record(SNAPSHOT_TOPIC, snap)
        if ref is not None:
            self.state.snapshot_refs[snap.snapshot_id] = ref
        typed = (WorldSnapshotCaptured(reason=reason, snapshot=snap, bag_ref=ref) if ref is not None
                 else WorldSnapshotCaptured(reason=reason, snapshot=snap))
        return self.ledger.draft(EventType.WORLD_SNAPSHOT_CAPTURED, snapshot_id=snap.snapshot_id, payload=typed)

    def snapshot_evidence(self, snapshot_id: str) -> list[EvidenceRef]:
        """A snapshot as evidence: its journal ref, and its bag ref when it was recorded."""
        out = [EvidenceRef.for_journal(f"snapshot:{snapshot_id}")]
        if snapshot_id in self.state.snapshot_refs:
            out.append(self.state.snapshot_refs[snapshot_id])
        return out

    # -- the evidence bag ---------------------------------------------------------

    def start_recorder(self) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder.start(self.state.mission_id)
        except Exception as exc:  # noqa: BLE001 - recording is evidence, never a reason to stop
            self.state.recorder_error = f"{type(exc).__name__}: {exc}"

    def stop_recorder(self, status: MissionStatus | None = None, summary_text: str = "") -> dict[str, Any]:
        """Close the bag; with the mission's end it also records that last line (MISSION_FINISHED
        itself is written after the bag closes, since it cites the bag)."""
        if self.recorder is None:
            return {}
        try:
            summary = self.recorder.stop(status=status.value if status else "", summary=summary_text)
        except Exception as exc:  # noqa: BLE001
            summary = {"error": f"{type(exc).__name__}: {exc}"}
        err = self.state.recorder_error
        self.state.bag = {**summary, "start_error": err} if err else summary
        return self.state.bag

    def record(self, topic: str, record: Any) -> EvidenceRef | None:
        if self.recorder is None:
            return None
        try:
            return self.recorder.record_record(topic, record)
        except Exception:  # noqa: BLE001 - a dropped bag message is counted by the recorder
            return None

    def evidence_ids(self) -> list[str]:
        """What the mission's result cites: actions, the snapshots their outcomes were judged on, the
        last verdict with its evidence, the fresh snapshot it was judged on and the commit. A
        snapshot recorded in the bag is cited by its bag ref too, right after its id."""
        s = self.state
        ids: list[str] = []
        for a in s.actions:
            ids += [a.action_id, a.outcome_snapshot_id]
        ids += s.verdict_evidence
        cited: list[str] = []
        for x in ids:
            cited.append(x)
            ref = s.snapshot_refs.get(x)
            if ref is not None:
                cited.append(ref.id)
        seen: set[str] = set()
        return [x for x in cited if x and not (x in seen or seen.add(x))]
