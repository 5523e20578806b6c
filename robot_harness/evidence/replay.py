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

The evidence is checked too, not only the reasoning: every bag message a
recorded (or replayed) verdict cites (``bag:<bag><topic>@<log time>``), and the
bag copy of every snapshot it cites, is read again from the mission's bag and
its sha256 compared with the one the journal holds. A missing message makes
each step citing it at best ambiguous, changed bytes make it violated (fail
closed, as the verifier treats a changed image), and either is reported as a
difference (``evidence bag:...: evidence_mismatch: ...``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.authority import verifier_config
from ..core.clock import IdGenerator, ManualClock
from ..core.completion import EvidenceRef, GoalVerdict, StepVerdict, Verdict
from ..core.config import deep_merge, load_harness_config
from ..core.errors import HarnessError, UsageError
from ..core.gate import CommitGate, GateRejection, TaskState
from ..core.journal import Journal, is_database_url
from ..core.payloads import (
    CommitRecorded,
    MissionFinished,
    MissionStarted,
    ReceiptRecorded,
    VerdictRecorded,
    WorldSnapshotCaptured,
    payload_of,
)
from ..core.records import EventType, JournalEvent
from ..core.scenario import Scenario
from ..core.verifier import Verifier, VerifyRequest
from .bag import verify_artifact

__all__ = ["NAV2_STATUS_TOPIC", "BagReplay", "NavGoal", "ReplayedVerdict", "ReplayReport", "journal_from_jsonl",
           "replay_bag", "replay_mission", "replay_recording"]


@dataclass
class ReplayedVerdict:
    seq: int
    recorded_id: str
    recorded: str
    replayed: str
    recorded_committed: bool
    replayed_committed: bool
    diffs: list[str] = field(default_factory=list)
    bag_evidence: dict[str, str] = field(default_factory=dict)
    """Each bag message the verdict cites -> ``""`` (there, unchanged) or what is wrong with it."""

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "recorded_verdict_id": self.recorded_id, "recorded": self.recorded,
                "replayed": self.replayed, "recorded_committed": self.recorded_committed,
                "replayed_committed": self.replayed_committed, "diffs": self.diffs,
                "bag_evidence": [{"id": i, "ok": not p, **({"problem": p} if p else {})}
                                 for i, p in self.bag_evidence.items()]}


@dataclass
class ReplayReport:
    mission_id: str
    overrides: dict[str, Any]
    verdicts: list[ReplayedVerdict]
    skipped: int = 0
    """Verdicts recorded without their request (journals older than this feature)."""
    bag_dir: str = ""
    """Where cited bag messages were looked up (``""``: no bag was found; any citation then fails)."""

    @property
    def identical(self) -> bool:
        return not any(v.diffs for v in self.verdicts)

    @property
    def bag_evidence_checked(self) -> int:
        return len({i for v in self.verdicts for i in v.bag_evidence})

    def as_dict(self) -> dict[str, Any]:
        return {"mission_id": self.mission_id, "overrides": self.overrides, "identical": self.identical,
                "skipped": self.skipped, "bag_dir": self.bag_dir, "bag_evidence_checked": self.bag_evidence_checked,
                "verdicts": [v.as_dict() for v in self.verdicts]}


def _artifact_check(artifacts_dir: str | Path | None) -> Any:
    """``bag.verify_artifact`` (the one artifact checker, as the live verifier uses it), where the URI
    points, or, with ``artifacts_dir``, on the file of the same name in that folder."""
    if artifacts_dir is None:
        return _verify_here

    def moved(uri: str, sha256: str) -> None:
        from urllib.parse import unquote, urlparse

        verify_artifact((Path(artifacts_dir) / Path(unquote(urlparse(uri).path)).name).resolve().as_uri(), sha256)

    return moved


def _verify_here(uri: str, sha256: str) -> None:
    """``verify_artifact`` on the recorded URI; a bare path (older receipts) is taken as a local file."""
    from urllib.parse import urlparse

    verify_artifact(uri if urlparse(uri).scheme else Path(uri).resolve().as_uri(), sha256)


def _steps(v: Verdict) -> dict[str, str]:
    return {s.obligation_id: s.verdict.value for s in v.steps}


def replay_mission(journal: Journal, mission_id: str, *, overrides: dict[str, Any] | None = None,
                   semantic: Any = None, artifacts_dir: str | Path | None = None,
                   bag_dir: str | Path | None = None) -> ReplayReport:
    """Re-verify every recorded done proposal of ``mission_id``; ``overrides`` change the harness config.

    Artifacts are re-hashed where their URIs point, or, with ``artifacts_dir``, by file name in that
    folder (a recording moved to another machine); a missing or changed one is a difference.

    Bag messages the verdicts cite are read from ``bag_dir``: the mission's bag folder
    (``<root>/<mission_id>/``), its ``.mcap`` file, or the root holding such folders. Without it, the
    ``bags/`` folder beside a SQLite journal, else the bag file the mission's end record names. A cited
    message that is not there (no bag found included), or whose bytes changed, is a difference and
    fails its steps closed.
    """
    events = journal.events(mission_id=mission_id)
    started = next((e for e in events if e.type is EventType.MISSION_STARTED), None)
    if started is None:
        raise UsageError(f"no mission {mission_id!r} in the journal", mission_id=mission_id)
    config = load_harness_config(overrides=deep_merge(payload_of(started, MissionStarted).config, overrides or {}))
    committed = {payload_of(e, CommitRecorded).commit.verdict_id for e in events if e.type is EventType.COMMIT_RECORDED}
    evidence = _BagEvidence(events, _default_bag_dir(journal, events) if bag_dir is None else Path(bag_dir))
    out: list[ReplayedVerdict] = []
    skipped = 0
    for i, ev in enumerate(events):
        if ev.type is not EventType.VERDICT_RECORDED:
            continue
        recorded_payload = payload_of(ev, VerdictRecorded)
        if recorded_payload.request is None:
            skipped += 1
            continue
        recorded = recorded_payload.verdict
        request = VerifyRequest.model_validate(recorded_payload.request)
        fresh = journal.get_snapshot(ev.snapshot_id)
        clock = ManualClock(recorded.created_at or fresh.captured_at)  # the verdict's own time
        verifier = Verifier(verifier_config(config), semantic=semantic, artifact_check=_artifact_check(artifacts_dir),
                            ids=IdGenerator(0), clock=clock, name="replay")
        replayed = verifier.verify(request, fresh)
        checks = evidence.check([*recorded.evidence_ids, *replayed.evidence_ids], request)
        replayed = evidence.fail_closed(replayed, checks, recorded)
        # the gate, against the task state the journal held just before this verdict
        state = TaskState.from_events(events[:i], mission_id=mission_id)
        try:
            CommitGate(ids=IdGenerator(0), clock=clock).decide(replayed, state=state, plan_node_id=ev.model_turn_id, invocation_id=ev.tool_call_id)
            replay_commit = True
        except GateRejection:
            replay_commit = False
        diffs: list[str] = [f"evidence {ref_id}: {problem}" for ref_id, problem in checks.items() if problem]
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
                                   replayed_committed=replay_commit, diffs=diffs, bag_evidence=checks))
    return ReplayReport(mission_id=mission_id, overrides=dict(overrides or {}), verdicts=out, skipped=skipped,
                        bag_dir=str(evidence.root) if evidence.root is not None else "")


def _default_bag_dir(journal: Journal, events: list[JournalEvent]) -> Path | None:
    path = getattr(journal, "path", None)
    if path and not is_database_url(path) and Path(path).parent.joinpath("bags").is_dir():
        return Path(path).parent / "bags"
    finished = next((e for e in reversed(events) if e.type is EventType.MISSION_FINISHED), None)
    bag = payload_of(finished, MissionFinished).bag if finished is not None else None
    recorded = bag.path if bag is not None else ""
    return Path(recorded) if recorded and Path(recorded).is_file() else None


_SEVERITY = {StepVerdict.SATISFIED: 0, StepVerdict.AMBIGUOUS: 1, StepVerdict.STALE: 2, StepVerdict.VIOLATED: 3,
             StepVerdict.UNSAFE: 4}


class _BagEvidence:
    """The mission's bag messages, checked against the refs the journal holds for them (once each).

    Several messages can share an evidence id (same topic and log time, told apart by their
    sequence and sha256); an id is sound only when every message the journal recorded under it is.
    """

    def __init__(self, events: list[JournalEvent], bag_dir: Path | None) -> None:
        self._refs: dict[str, list[EvidenceRef]] = {}
        self._snapshot_copies: dict[str, str] = {}
        """A snapshot cited by id stands on its copy in the bag as well."""
        for e in events:
            if e.type is EventType.WORLD_SNAPSHOT_CAPTURED:
                bag_ref = payload_of(e, WorldSnapshotCaptured).bag_ref
                ref = self._add(bag_ref) if bag_ref is not None else None
                if ref is not None and e.snapshot_id:
                    self._snapshot_copies[e.snapshot_id] = ref.id
            elif e.type is EventType.RECEIPT_RECORDED:
                for raw in payload_of(e, ReceiptRecorded).receipt.evidence:
                    self._add(raw)
        self._dir = bag_dir
        self._stores: dict[Path, Any] = {}
        self._checked: dict[str, str] = {}
        self.root: Path | None = bag_dir

    def _add(self, raw: Any) -> EvidenceRef | None:
        try:
            ref = raw if isinstance(raw, EvidenceRef) else EvidenceRef.model_validate(raw)
        except ValueError:
            return None
        if ref.kind == "bag":
            known = self._refs.setdefault(ref.id, [])
            if all((k.sequence, k.sha256) != (ref.sequence, ref.sha256) for k in known):
                known.append(ref)
        return ref

    def check(self, ids: Sequence[str], request: VerifyRequest) -> dict[str, str]:
        """``id -> ""`` for each bag message behind ``ids`` that is there with the bytes its refs name,
        else the problem."""
        for r in request.receipts:  # the verifier's inputs name their refs too
            for ref in r.evidence:
                self._add(ref)
        out: dict[str, str] = {}
        for ref_id in self.bag_ids(ids):
            if ref_id not in self._checked:
                self._checked[ref_id] = self._check(ref_id)
            out[ref_id] = self._checked[ref_id]
        return out

    def bag_ids(self, ids: Sequence[str]) -> list[str]:
        """The bag messages behind ``ids``: bag refs themselves, and the bag copies of cited snapshots."""
        out: list[str] = []
        for i in ids:
            copy = self._snapshot_copies.get(i.removeprefix("journal:snapshot:"))
            for b in (i if i.startswith("bag:") else "", copy or ""):
                if b and b not in out:
                    out.append(b)
        return out

    def _check(self, ref_id: str) -> str:
        from .audit import check_evidence
        from .bag import McapEvidenceStore

        refs = self._refs.get(ref_id)
        if not refs:
            return "evidence_not_found: cited, but no record in the journal carries its ref (and sha256)"
        if self._dir is None:
            return f"evidence_not_found: no bag found for {refs[0].bag} (give the bag's folder)"
        for ref in refs:
            root = self._root_for(ref)
            store = self._stores.setdefault(root, McapEvidenceStore(root))
            check = check_evidence(ref, store=store)
            if not check.ok:
                return check.problem
        return ""

    def _root_for(self, ref: EvidenceRef) -> Path:
        assert self._dir is not None
        d = self._dir
        if d.is_file():  # the .mcap itself
            return d.parent.parent
        if (d / ref.bag).is_file():  # the bag's folder
            return d.parent
        return d

    def fail_closed(self, verdict: Verdict, checks: dict[str, str], recorded: Verdict) -> Verdict:
        """The verdict with every step that cites -- or whose recorded counterpart cited -- a missing
        (ambiguous) or changed (violated) bag message made at least that bad; a goal it no longer
        supports is not done."""
        bad = {i: p for i, p in checks.items() if p}
        if not bad:
            return verdict
        cited_before = {s.obligation_id: s.evidence_ids for s in recorded.steps}
        steps = []
        for s in verdict.steps:
            hits = [i for i in self.bag_ids([*s.evidence_ids, *cited_before.get(s.obligation_id, ())]) if i in bad]
            implied = StepVerdict.VIOLATED if any(bad[i].startswith("evidence_mismatch") for i in hits) \
                else StepVerdict.AMBIGUOUS
            if hits and _SEVERITY[implied] > _SEVERITY[s.verdict]:
                what = "changed" if implied is StepVerdict.VIOLATED else "missing"
                s = s.model_copy(update={"verdict": implied,
                                         "reason": f"{s.reason}; cited bag evidence {', '.join(hits)} is {what}"})
            steps.append(s)
        missing = tuple(s.obligation_id for s in steps if s.verdict is not StepVerdict.SATISFIED)
        goal = verdict.goal_verdict
        if goal is GoalVerdict.VERIFIED_DONE and missing:
            goal = GoalVerdict.CONTINUE
        return verdict.model_copy(update={"steps": tuple(steps), "missing": missing, "goal_verdict": goal})


def replay_recording(bag: str | Path, *, journal: Journal | str | Path | None = None, mission_id: str = "",
                     overrides: dict[str, Any] | None = None, semantic: Any = None,
                     artifacts_dir: str | Path | None = None) -> ReplayReport:
    """Replay the mission a harness bag recorded (``robot-harness replay BAG``), checking the bag as well.

    ``bag`` is the mission's bag folder (``<journal dir>/bags/<mission_id>/``) or its ``.mcap``. The
    mission is the one the bag's metadata names (``custom_data.mission_id``), else the folder's name.
    ``journal`` is a journal, a SQLite journal file, a ``postgresql://`` URL (a fleet's database) or a
    ``journal export --format jsonl`` file; by default the ``journal.sqlite3`` two folders up from the bag's
    folder, where the supervisor writes both.
    """
    from .bag import read_bag_metadata

    path = Path(bag)
    if not path.exists():
        raise UsageError(f"no bag at {path}", path=str(path))
    folder = path if path.is_dir() else path.parent
    if not mission_id:
        try:
            mission_id = str((read_bag_metadata(path).get("custom_data") or {}).get("mission_id") or "")
        except HarnessError:
            mission_id = ""
        mission_id = mission_id or folder.name
    if journal is None:
        journal = folder.parent.parent / "journal.sqlite3"
    if not isinstance(journal, (str, Path)):
        return replay_mission(journal, mission_id, overrides=overrides, semantic=semantic,
                              artifacts_dir=artifacts_dir, bag_dir=folder)
    if not is_database_url(journal):
        jpath = Path(journal)
        if not jpath.is_file():
            raise UsageError(f"no journal at {jpath} for the bag {path} (name it)", path=str(jpath))
        if jpath.suffix == ".jsonl":
            return replay_mission(journal_from_jsonl(jpath), mission_id, overrides=overrides, semantic=semantic,
                                  artifacts_dir=artifacts_dir, bag_dir=folder)
    from ..core.clock import SystemClock
    from ..core.journal import open_journal

    j = open_journal(journal, clock=SystemClock(), ids=IdGenerator(None))
    try:
        return replay_mission(j, mission_id, overrides=overrides, semantic=semantic, artifacts_dir=artifacts_dir,
                              bag_dir=folder)
    finally:
        j.close()


# --------------------------------------------------------------------------- recordings from elsewhere


@dataclass
class NavGoal:
    """One navigation goal as the recording's Nav2 action status topic tells it."""

    goal_id: str
    status: str
    """The last status seen: ACCEPTED, EXECUTING, CANCELING, SUCCEEDED, CANCELED, ABORTED (or UNKNOWN)."""
    accepted_at: float
    """``goal_info.stamp``: when the navigator accepted it (its own clock, like the pose headers)."""
    ended_at: float | None = None
    """When a terminal status was first recorded, on the pose topic's clock; None while it runs."""
    end_pose: Any = None
    """The last recorded pose at ``ended_at`` (Pose2D), if any."""

    def as_dict(self) -> dict[str, Any]:
        return {"goal_id": self.goal_id, "status": self.status, "accepted_at": round(self.accepted_at, 3),
                "ended_at": None if self.ended_at is None else round(self.ended_at, 3),
                "end_pose": self.end_pose.model_dump() if self.end_pose is not None else None}


@dataclass
class BagReplay:
    bag: str
    pose_topic: str
    poses: int
    span_s: float
    verdict: Verdict
    nav_status_topic: str = ""
    """The Nav2 status topic read (``""``: the recording has none)."""
    nav_goals: list[NavGoal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Where the navigator's word and the recorded poses tell different stories, and what that changed."""

    def as_dict(self) -> dict[str, Any]:
        return {"bag": self.bag, "pose_topic": self.pose_topic, "poses": self.poses, "span_s": round(self.span_s, 3),
                "goal_verdict": self.verdict.goal_verdict.value,
                "steps": [{"obligation": s.obligation_id, "verdict": s.verdict.value, "reason": s.reason}
                          for s in self.verdict.steps],
                "nav_status_topic": self.nav_status_topic, "nav_goals": [g.as_dict() for g in self.nav_goals],
                "notes": self.notes}


_POSE_TYPES = ("geometry_msgs/msg/PoseWithCovarianceStamped", "geometry_msgs/msg/PoseStamped")
_STATUS_TYPE = "action_msgs/msg/GoalStatusArray"
_GOAL_STATUS = {0: "UNKNOWN", 1: "ACCEPTED", 2: "EXECUTING", 3: "CANCELING", 4: "SUCCEEDED", 5: "CANCELED",
                6: "ABORTED"}
_TERMINAL = frozenset({"SUCCEEDED", "CANCELED", "ABORTED"})
NAV2_STATUS_TOPIC = "/navigate_to_pose/_action/status"


def replay_bag(bag: str | Path, scenario: Scenario, *, pose_topic: str = "/amcl_pose",
               nav_status_topic: str = NAV2_STATUS_TOPIC) -> BagReplay:
    """Judge a scenario's contract against a rosbag2 recording's pose topic, and its Nav2 status if any.

    For recordings of robots the harness did not drive (no receipts): the
    contract's obligations must accept pose observations (``evidence:
    [pose_observation]``); the recorded poses are the trajectory, and the last
    one stands in for the fresh observation (judged offline: no live robot).
    Header stamps are used as they are (sim time stays sim time).

    When the recording has the navigator's action status (``nav_status_topic``),
    its goals are read too (``nav_goals``). The navigator's word never proves a
    place was reached -- the poses decide -- but it can deny completion: a goal
    still running when the recording ends means the robot had not come to rest,
    so the goal verdict cannot be ``verified_done``. A goal the navigator calls
    SUCCEEDED while the robot is not within tolerance of any named place is
    noted (the early-success fault, seen from outside).
    """
    from rclpy.serialization import deserialize_message

    from action_msgs.msg import GoalStatusArray
    from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped

    from ..core.completion import CompletionContract
    from ..core.config import HarnessConfig
    from ..core.contracts import RuleCoverageReviewer, ScenarioContractCompiler, compile_contract
    from ..core.records import Availability, ControllerState, FieldMeta, Pose2D, WorldSnapshot
    from ..core.verifier import PoseSample
    from ..nodes.conversions import goal_id_to_hex, yaw_from_quaternion
    from .bag import BagFormatError, read_bag_messages

    if not scenario.contract:
        raise UsageError("replaying a foreign recording needs a scenario-provided contract (contract: [...])")
    samples: list[PoseSample] = []
    pose_log_ns: list[int] = []
    statuses: list[tuple[int, Any]] = []  # (log time, GoalStatusArray)
    for m in read_bag_messages(bag, topics=[pose_topic, nav_status_topic]):
        if m.topic == nav_status_topic and m.topic != pose_topic:
            if m.type_name != _STATUS_TYPE:
                raise BagFormatError(f"{nav_status_topic} carries {m.type_name}, not {_STATUS_TYPE}",
                                     topic=nav_status_topic, type_name=m.type_name)
            statuses.append((m.log_time_ns, deserialize_message(m.data, GoalStatusArray)))
            continue
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
        pose_log_ns.append(m.log_time_ns)
    if not samples:
        raise UsageError(f"no messages on {pose_topic} in {bag}", topic=pose_topic)
    places = {k: Pose2D(x=v.x, y=v.y, yaw=v.yaw) for k, v in scenario.world.places.items()}
    mission_id = f"replay-{Path(bag).stem}"
    contract: CompletionContract = compile_contract(
        scenario.goal, compiler=ScenarioContractCompiler(scenario.contract), reviewer=RuleCoverageReviewer(),
        mission_id=mission_id, contract_id="contract-replay", places=places)
    last = max(samples, key=lambda p: p.t)
    goals = _nav_goals(statuses, samples, pose_log_ns, goal_id_to_hex)
    running = [g for g in goals if g.status not in _TERMINAL]
    nav = {}
    if statuses:
        nav = {"controller_state": ControllerState.ACTIVE if running else ControllerState.IDLE,
               "nav_goal_id": running[-1].goal_id if running else "",
               "navigation_meta": FieldMeta(availability=Availability.AVAILABLE, source_stamp=last.t, age_s=0.0,
                                            max_age_s=1e9, source=nav_status_topic)}
    fresh = WorldSnapshot(snapshot_id="bag-last-pose", mission_id=mission_id, reason="replay", captured_at=last.t,
                          pose=last.pose, pose_meta=FieldMeta(availability=Availability.AVAILABLE, source_stamp=last.t,
                                                              age_s=0.0, max_age_s=1e9, source=pose_topic), **nav)
    config = HarnessConfig(places={k: v.model_dump() for k, v in places.items()}, **(
        {"verification": scenario.harness["verification"]} if "verification" in scenario.harness else {}))
    vcfg = verifier_config(config).model_copy(update={"require_fresh_pose": False})
    verifier = Verifier(vcfg, semantic=None, artifact_check=_verify_here, ids=IdGenerator(0),
                        clock=ManualClock(last.t), name="replay")
    request = VerifyRequest(mission_id=mission_id, goal=scenario.goal, contract=contract, receipts=(), state_version=1,
                            plan_node_id="replay", invocation_id="replay", places=places, trajectory=tuple(samples))
    verdict = verifier.verify(request, fresh)
    notes: list[str] = []
    for g in goals:
        if g.status == "SUCCEEDED" and g.end_pose is not None and places:
            name, where = min(places.items(), key=lambda kv: kv[1].distance_to(g.end_pose))
            if where.distance_to(g.end_pose) > vcfg.xy_tolerance_m:
                notes.append(f"the navigator reported goal {g.goal_id[:8]} SUCCEEDED at t={g.ended_at:.3f} with the "
                             f"robot {where.distance_to(g.end_pose):.2f} m from the nearest place ({name})")
    if running:
        notes.append(f"the navigator was still running goal {running[-1].goal_id[:8]} ({running[-1].status}) when "
                     "the recording ended: the robot had not come to rest")
        if verdict.goal_verdict is GoalVerdict.VERIFIED_DONE:
            verdict = verdict.model_copy(update={"goal_verdict": GoalVerdict.CONTINUE})
            notes[-1] += ", so the goal is not verified done"
    return BagReplay(bag=str(bag), pose_topic=pose_topic, poses=len(samples), span_s=last.t - min(p.t for p in samples),
                     verdict=verdict, nav_status_topic=nav_status_topic if statuses else "", nav_goals=goals,
                     notes=notes)


def _nav_goals(statuses: list[tuple[int, Any]], samples: list[Any], pose_log_ns: list[int],
               goal_id_to_hex: Any) -> list[NavGoal]:
    """Each goal's last status; a terminal one's time and pose, mapped from log time to the pose clock
    through the pose message recorded nearest to it (header stamps may be sim time, log times wall time)."""
    import bisect

    order = sorted(range(len(samples)), key=lambda k: pose_log_ns[k])
    logs = [pose_log_ns[k] for k in order]

    def at(log_ns: int) -> tuple[float, Any]:
        k = bisect.bisect_right(logs, log_ns)
        before = order[k - 1] if k else order[0]
        near = min((order[x] for x in (k - 1, k) if 0 <= x < len(order)), key=lambda y: abs(pose_log_ns[y] - log_ns))
        return samples[near].t + (log_ns - pose_log_ns[near]) * 1e-9, samples[before].pose

    goals: dict[str, NavGoal] = {}
    for log_ns, msg in sorted(statuses, key=lambda s: s[0]):
        for st in msg.status_list:
            gid = goal_id_to_hex(st.goal_info.goal_id)
            status = _GOAL_STATUS.get(int(st.status), "UNKNOWN")
            g = goals.get(gid)
            if g is None:
                stamp = st.goal_info.stamp
                g = goals[gid] = NavGoal(goal_id=gid, status=status, accepted_at=stamp.sec + stamp.nanosec * 1e-9)
            if g.ended_at is not None:
                continue  # a terminal status is final
            g.status = status
            if status in _TERMINAL:
                g.ended_at, g.end_pose = at(log_ns)
    return list(goals.values())


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
