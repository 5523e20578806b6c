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
from pathlib import Path
from typing import Any

from ..core.authority import verifier_config
from ..core.clock import IdGenerator, ManualClock
from ..core.completion import Verdict
from ..core.config import deep_merge, load_harness_config
from ..core.errors import UsageError
from ..core.gate import CommitGate, GateRejection, TaskState
from ..core.journal import Journal
from ..core.records import EventType
from ..core.scenario import Scenario
from ..core.verifier import Verifier, VerifyRequest, check_file_artifact

__all__ = ["BagReplay", "ReplayedVerdict", "ReplayReport", "journal_from_jsonl", "replay_bag", "replay_mission"]


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


def _artifact_check(artifacts_dir: str | Path | None) -> Any:
    if artifacts_dir is None:
        return check_file_artifact

    def moved(uri: str, sha256: str) -> None:
        from urllib.parse import unquote, urlparse

        check_file_artifact(str(Path(artifacts_dir) / Path(unquote(urlparse(uri).path)).name), sha256)

    return moved


def _steps(v: Verdict) -> dict[str, str]:
    return {s.obligation_id: s.verdict.value for s in v.steps}


def replay_mission(journal: Journal, mission_id: str, *, overrides: dict[str, Any] | None = None,
                   semantic: Any = None, artifacts_dir: str | Path | None = None) -> ReplayReport:
    """Re-verify every recorded done proposal of ``mission_id``; ``overrides`` change the harness config.

    Artifacts are re-hashed where their URIs point, or, with ``artifacts_dir``, by file name in that
    folder (a recording moved to another machine); a missing or changed one is a difference.
    """
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
        verifier = Verifier(verifier_config(config), semantic=semantic, artifact_check=_artifact_check(artifacts_dir),
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


# --------------------------------------------------------------------------- recordings from elsewhere


@dataclass
class BagReplay:
    bag: str
    pose_topic: str
    poses: int
    span_s: float
    verdict: Verdict

    def as_dict(self) -> dict[str, Any]:
        return {"bag": self.bag, "pose_topic": self.pose_topic, "poses": self.poses, "span_s": round(self.span_s, 3),
                "goal_verdict": self.verdict.goal_verdict.value,
                "steps": [{"obligation": s.obligation_id, "verdict": s.verdict.value, "reason": s.reason}
                          for s in self.verdict.steps]}


_POSE_TYPES = ("geometry_msgs/msg/PoseWithCovarianceStamped", "geometry_msgs/msg/PoseStamped")


def replay_bag(bag: str | Path, scenario: Scenario, *, pose_topic: str = "/amcl_pose") -> BagReplay:
    """Judge a scenario's contract against a rosbag2 recording's pose topic alone.

    For recordings of robots the harness did not drive (no receipts): the
    contract's obligations must accept pose observations (``evidence:
    [pose_observation]``); the recorded poses are the trajectory, and the last
    one stands in for the fresh observation (judged offline: no live robot).
    Header stamps are used as they are (sim time stays sim time).
    """
    from rclpy.serialization import deserialize_message

    from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped

    from ..core.completion import CompletionContract
    from ..core.config import HarnessConfig
    from ..core.contracts import RuleCoverageReviewer, ScenarioContractCompiler, compile_contract
    from ..core.records import Availability, FieldMeta, Pose2D, WorldSnapshot
    from ..nodes.conversions import yaw_from_quaternion
    from ..core.verifier import PoseSample
    from .bag import BagFormatError, read_bag_messages

    if not scenario.contract:
        raise UsageError("replaying a foreign recording needs a scenario-provided contract (contract: [...])")
    samples: list[PoseSample] = []
    for m in read_bag_messages(bag, topics=[pose_topic]):
        if m.type_name not in _POSE_TYPES:
            raise BagFormatError(f"{pose_topic} carries {m.type_name}, not one of {list(_POSE_TYPES)}",
                                 topic=pose_topic, type_name=m.type_name)
        cls = PoseWithCovarianceStamped if m.type_name.endswith("WithCovarianceStamped") else PoseStamped
        msg = deserialize_message(m.data, cls)
        pose = msg.pose.pose if cls is PoseWithCovarianceStamped else msg.pose
        t = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        samples.append(PoseSample(t=t, pose=Pose2D(x=pose.position.x, y=pose.position.y,
                                                   yaw=yaw_from_quaternion(pose.orientation)),
                                  source_id=f"{Path(bag).name}:{pose_topic}@{m.log_time_ns}"))
    if not samples:
        raise UsageError(f"no messages on {pose_topic} in {bag}", topic=pose_topic)
    places = {k: Pose2D(x=v.x, y=v.y, yaw=v.yaw) for k, v in scenario.world.places.items()}
    mission_id = f"replay-{Path(bag).stem}"
    contract: CompletionContract = compile_contract(
        scenario.goal, compiler=ScenarioContractCompiler(scenario.contract), reviewer=RuleCoverageReviewer(),
        mission_id=mission_id, contract_id="contract-replay", places=places)
    last = max(samples, key=lambda p: p.t)
    fresh = WorldSnapshot(snapshot_id="bag-last-pose", mission_id=mission_id, reason="replay", captured_at=last.t,
                          pose=last.pose, pose_meta=FieldMeta(availability=Availability.AVAILABLE, source_stamp=last.t,
                                                              age_s=0.0, max_age_s=1e9, source=pose_topic))
    config = HarnessConfig(places={k: v.model_dump() for k, v in places.items()}, **(
        {"verification": scenario.harness["verification"]} if "verification" in scenario.harness else {}))
    vcfg = verifier_config(config).model_copy(update={"require_fresh_pose": False})
    verifier = Verifier(vcfg, semantic=None, artifact_check=check_file_artifact, ids=IdGenerator(0),
                        clock=ManualClock(last.t), name="replay")
    request = VerifyRequest(mission_id=mission_id, goal=scenario.goal, contract=contract, receipts=(), state_version=1,
                            plan_node_id="replay", invocation_id="replay", places=places, trajectory=tuple(samples))
    verdict = verifier.verify(request, fresh)
    return BagReplay(bag=str(bag), pose_topic=pose_topic, poses=len(samples), span_s=last.t - min(p.t for p in samples),
                     verdict=verdict)


def journal_from_jsonl(path: str | Path) -> Any:
    """A journal rebuilt from ``robot-harness journal export --format jsonl`` (for regression sets kept as text).

    Events are re-appended in their order with their stamps, payloads, mission,
    turn, call, action and snapshot ids; only their seqs and event ids are new.
    """
    import json as _json

    from ..core.journal import MemoryJournal
    from ..core.records import EventDraft, JournalEvent

    recorded = [JournalEvent.model_validate(_json.loads(line))
                for line in Path(path).read_text().splitlines() if line.strip()]
    clock = ManualClock(recorded[0].stamp if recorded else 0.0)
    journal = MemoryJournal(clock=clock, ids=IdGenerator(0))
    journal.setup()
    for ev in recorded:
        clock.advance(max(0.0, ev.stamp - clock.now()))  # the recorded stamps, so timelines keep their times
        journal.append([EventDraft(type=ev.type, mission_id=ev.mission_id, model_turn_id=ev.model_turn_id,
                                   tool_call_id=ev.tool_call_id, robot_action_id=ev.robot_action_id,
                                   snapshot_id=ev.snapshot_id, payload=ev.payload)])
    return journal
