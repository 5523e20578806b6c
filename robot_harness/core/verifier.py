"""The independent verifier: judges a done proposal against the completion contract.

It sees only what ``VerifyRequest`` carries (the user's goal, the frozen
contract, executed receipts, named places and the journaled pose history)
plus one fresh snapshot. There is no field for planner text, messages or
reasoning, so nothing the planner *said* can count as evidence.

Each obligation is judged in layers, cheapest first, stopping at the first
failure:

1. **floor** — only receipts of this mission, of the current contract
   revision, written at or before the request's state version and terminal
   ``SUCCEEDED`` count as positive evidence; an obligation whose
   dependencies are not satisfied is ``ambiguous`` (unless its own evidence
   is already ``violated``).
2. **predicate** — one deterministic check per ``ObligationKind``.
3. **semantic** — only for ``SEMANTIC`` obligations, or obligations that
   list ``SEMANTIC_JUDGEMENT`` evidence, after their predicate passed.

Guarantees: an exception anywhere in judging one obligation (a malformed
receipt, a raising semantic checker, an artifact that fails its checksum)
makes that obligation anything but ``satisfied``; ``verified_done`` needs
every obligation satisfied and at least one receipt cited.

Choices worth knowing:

* "No evidence" is ``ambiguous``; evidence that contradicts the obligation
  (ended elsewhere, wrong recipient, checksum mismatch, wrong order, fresh
  pose elsewhere) is ``violated``; a fresh pose that is missing, stale or
  observed before the evidence it should confirm is ``stale``.
* A localization jump (``fresh.last_pose_jump_at``) at or after the start of
  the evidence window makes a pose-based obligation ``ambiguous``, not
  ``unsafe``: the jump says the pose cannot be trusted, not that the robot is
  in danger, and a later re-observation can settle it. ``unsafe`` comes only
  from the semantic layer.
* Ordering: a dependent's receipt must *start* at or after its dependencies'
  satisfying receipts *ended* (the earliest satisfying receipt of each
  dependency anchors it), so a message sent while the robot was still driving
  does not count as sent "after arriving".
* Pose-vs-place checks use the xy tolerance and, for AT_PLACE and
  IMAGE_CAPTURED, the yaw tolerance (``yaw_tolerance_rad=None`` disables it);
  route checks (departure, waypoints, return) use xy only.
"""
from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field

from .clock import Clock, IdGenerator
from .completion import (
    CompletionContract,
    EvidenceKind,
    GoalVerdict,
    Obligation,
    ObligationKind,
    ObligationVerdict,
    Receipt,
    ReceiptStatus,
    StepVerdict,
    Verdict,
    artifact_evidence_id,
)
from .errors import UsageError
from .records import FORMAT_VERSION, ArtifactRef, Availability, Pose2D, WorldSnapshot

__all__ = [
    "NAVIGATE_SKILL",
    "CAPTURE_SKILL",
    "MESSAGE_SKILL",
    "SPEAK_SKILL",
    "PoseSample",
    "VerifyRequest",
    "VerifierConfig",
    "SemanticChecker",
    "ArtifactCheck",
    "Verifier",
    "check_file_artifact",
]

NAVIGATE_SKILL = "navigate_to"
CAPTURE_SKILL = "capture_image"
MESSAGE_SKILL = "send_message"
SPEAK_SKILL = "speak"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PoseSample(_Frozen):
    """One journaled pose observation (from a snapshot or a receipt)."""

    t: float
    """Source stamp of the observation (epoch seconds)."""
    pose: Pose2D
    source_id: str
    """The snapshot id or evidence id the pose came from (cited in verdicts)."""


class VerifyRequest(_Frozen):
    """Everything the verifier may look at besides the fresh snapshot.

    Deliberately has no field for planner text, messages or reasoning;
    ``extra="forbid"`` makes smuggling one in a validation error.
    """

    kind: Literal["verify_request"] = "verify_request"
    format_version: int = FORMAT_VERSION
    mission_id: str
    goal: str
    """The user's original goal (handed to the semantic checker)."""
    contract: CompletionContract
    receipts: tuple[Receipt, ...] = ()
    state_version: int
    plan_node_id: str
    """The model turn that proposed done."""
    invocation_id: str
    """The done proposal's call id."""
    places: dict[str, Pose2D] = Field(default_factory=dict)
    trajectory: tuple[PoseSample, ...] = ()
    """Pose history from journaled snapshots and receipts, any order."""


class VerifierConfig(_Frozen):
    xy_tolerance_m: float = Field(default=0.5, gt=0.0)
    yaw_tolerance_rad: float | None = Field(default=0.5, gt=0.0)
    """None: heading is not checked against places."""
    final_pose_max_age_s: float = Field(default=2.0, gt=0.0)
    """Default bound on the fresh pose's age (``Obligation.max_age_s`` overrides it)."""
    require_fresh_pose: bool = True
    """False: final AT_PLACE and ROUTE_CLOSED's return are judged on recorded poses
    only (offline replays without a live robot). Never False on a robot."""


class SemanticChecker(Protocol):
    """A model-backed judge for what no predicate can decide (e.g. "a drink bottle is visible")."""

    def judge(
        self,
        obligation: Obligation,
        *,
        goal: str,
        receipts: tuple[Receipt, ...],
        artifacts: tuple[ArtifactRef, ...],
    ) -> tuple[StepVerdict, str]: ...


ArtifactCheck = Callable[[str, str], None]
"""``(uri, sha256)``: returns if the artifact exists and matches, raises otherwise."""


def check_file_artifact(uri: str, sha256: str) -> None:
    """An ``ArtifactCheck`` for ``file://`` URIs (and plain paths): re-hash the bytes."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        raise UsageError(f"artifact {uri!r}: only file artifacts can be checked", uri=uri)
    path = Path(unquote(parsed.path) if parsed.scheme else uri)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise ValueError(f"sha256 mismatch: expected {sha256}, file has {digest}")


# --------------------------------------------------------------------------- internals


def _observation_only(ob: Obligation) -> bool:
    """An obligation whose contract accepts pose observations and no execution receipt."""
    return ob.kind is ObligationKind.AT_PLACE and EvidenceKind.POSE_OBSERVATION in ob.evidence \
        and EvidenceKind.NAVIGATION_RECEIPT not in ob.evidence


class _Unresolved(Exception):
    """A place or parameter the predicate cannot interpret (the obligation is ambiguous)."""


@dataclass
class _Outcome:
    verdict: StepVerdict
    layer: Literal["floor", "predicate", "semantic"]
    reason: str
    evidence: list[str] = field(default_factory=list)
    done_at: float | None = None
    """When the satisfying evidence ended (anchors dependents' ordering)."""
    receipts: tuple[Receipt, ...] = ()
    """The receipts that satisfied the predicate (handed to the semantic layer)."""


@dataclass
class _Place:
    pose: Pose2D
    label: str
    has_yaw: bool


class _Sev(enum.IntEnum):
    AMBIGUOUS = 1
    STALE = 2
    VIOLATED = 3


def _dedupe(ids: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in ids if i))


def _receipt_ids(r: Receipt) -> list[str]:
    ids = r.evidence_ids()
    if r.outcome_snapshot_id:
        ids.append(r.outcome_snapshot_id)
    return ids


def _as_pose(spec: Any) -> tuple[Pose2D, bool] | None:
    if isinstance(spec, Pose2D):
        return spec, True
    if isinstance(spec, Mapping) and isinstance(spec.get("x"), (int, float)) and isinstance(spec.get("y"), (int, float)):
        yaw = spec.get("yaw")
        has_yaw = isinstance(yaw, (int, float))
        return Pose2D(x=float(spec["x"]), y=float(spec["y"]), yaw=float(yaw) if has_yaw else 0.0), has_yaw
    return None


def _arguments(r: Receipt) -> Mapping[str, Any]:
    args = r.request.get("arguments", {})
    return args if isinstance(args, Mapping) else {}


def _result_views(r: Receipt) -> list[Mapping[str, Any]]:
    """The receipt's result, and the tool result's ``content`` inside it when the engine nested it there."""
    content = r.result.get("content")
    return [r.result, content] if isinstance(content, Mapping) else [r.result]


def _nav_target(r: Receipt, places: Mapping[str, Pose2D]) -> Pose2D | None:
    """Where a navigate_to receipt was sent: the executor's resolved target, else the arguments."""
    for resolved in (r.request.get("target"), r.result.get("target")):
        pose = _as_pose(resolved)
        if pose is not None:
            return pose[0]
    args = _arguments(r)
    name = args.get("place")
    if isinstance(name, str):
        return places.get(name)
    xy = _as_pose(args)
    return xy[0] if xy is not None else None


def _artifact_of(r: Receipt) -> tuple[str, str] | None:
    for view in _result_views(r):
        art = view.get("artifact")
        if isinstance(art, Mapping) and isinstance(art.get("uri"), str) and isinstance(art.get("sha256"), str) \
                and art["uri"] and art["sha256"]:
            return art["uri"], art["sha256"]
    for e in r.evidence:
        if e.kind == "artifact":
            return e.uri, e.sha256
    return None


def _delivery_ack(r: Receipt) -> Mapping[str, Any] | None:
    for view in _result_views(r):
        for candidate in (view.get("receipt"), view):
            if isinstance(candidate, Mapping) and (candidate.get("delivered_at") or candidate.get("message_id")):
                return candidate
    return None


def _norm(s: Any) -> str:
    return str(s).strip().casefold()


# --------------------------------------------------------------------------- verifier


class Verifier:
    """Judges ``VerifyRequest`` + a fresh snapshot into a ``Verdict``; never reads planner text."""

    def __init__(
        self,
        config: VerifierConfig,
        *,
        semantic: SemanticChecker | None,
        artifact_check: ArtifactCheck,
        ids: IdGenerator,
        clock: Clock,
        name: str = "verifier",
    ) -> None:
        self.config = config
        self.name = name
        self._semantic = semantic
        self._artifact_check = artifact_check
        self._ids = ids
        self._clock = clock

    # ------------------------------------------------------------------ entry point

    def verify(self, request: VerifyRequest, fresh: WorldSnapshot) -> Verdict:
        contract = request.contract
        if contract.mission_id != request.mission_id:
            raise UsageError(
                f"contract {contract.contract_id} belongs to mission {contract.mission_id!r}, "
                f"not {request.mission_id!r}",
                contract_mission_id=contract.mission_id, mission_id=request.mission_id,
            )
        if fresh.mission_id and fresh.mission_id != request.mission_id:
            raise UsageError(
                f"fresh snapshot {fresh.snapshot_id} belongs to mission {fresh.mission_id!r}",
                snapshot_mission_id=fresh.mission_id, mission_id=request.mission_id,
            )
        seen: set[str] = set()
        for r in request.receipts:
            if r.receipt_id in seen:
                raise UsageError(f"duplicate receipt id {r.receipt_id!r} in the request", receipt_id=r.receipt_id)
            seen.add(r.receipt_id)

        eligible, excluded = self._floor(request)
        outcomes: dict[str, _Outcome] = {}
        for ob in self._topological(contract):
            try:
                outcomes[ob.id] = self._judge_obligation(ob, request, fresh, eligible, excluded, outcomes)
            except Exception as exc:  # noqa: BLE001 - fail closed: a malformed record is never evidence
                outcomes[ob.id] = _Outcome(
                    StepVerdict.AMBIGUOUS, "predicate", f"could not evaluate: {type(exc).__name__}: {exc}"
                )

        steps = tuple(
            ObligationVerdict(
                obligation_id=ob.id,
                verdict=outcomes[ob.id].verdict,
                layer=outcomes[ob.id].layer,
                reason=outcomes[ob.id].reason,
                evidence_ids=_dedupe(outcomes[ob.id].evidence),
            )
            for ob in contract.obligations
        )
        evidence_ids = _dedupe([i for s in steps for i in s.evidence_ids])
        missing = tuple(s.obligation_id for s in steps if s.verdict is not StepVerdict.SATISFIED)
        cited_receipts = seen.intersection(evidence_ids)
        if any(s.verdict is StepVerdict.UNSAFE for s in steps):
            goal = GoalVerdict.BLOCKED
        elif steps and not missing and (cited_receipts or all(_observation_only(ob) for ob in contract.obligations)):
            # Execution evidence is required, unless the contract itself says observations suffice
            # (a recording of a robot the harness did not drive).
            goal = GoalVerdict.VERIFIED_DONE
        else:
            goal = GoalVerdict.CONTINUE
        return Verdict(
            verdict_id=self._ids.new("verdict"),
            mission_id=request.mission_id,
            contract_id=contract.contract_id,
            contract_revision=contract.revision,
            state_version=request.state_version,
            plan_node_id=request.plan_node_id,
            invocation_id=request.invocation_id,
            goal_verdict=goal,
            steps=steps,
            missing=missing,
            evidence_ids=evidence_ids,
            fresh_snapshot_id=fresh.snapshot_id,
            created_at=self._clock.now(),
            verifier=self.name,
        )

    # ------------------------------------------------------------------ layer 1: floor

    @staticmethod
    def _floor(request: VerifyRequest) -> tuple[list[Receipt], dict[str, list[str]]]:
        """Receipts that may serve as positive evidence, and why the others may not (by skill)."""
        rev = request.contract.revision
        eligible: list[Receipt] = []
        excluded: dict[str, list[str]] = {}
        for r in sorted(request.receipts, key=lambda r: (r.ended_at, r.started_at)):
            why = ""
            if r.mission_id != request.mission_id:
                why = f"{r.receipt_id} belongs to mission {r.mission_id!r}"
            elif r.contract_revision != rev:
                why = f"{r.receipt_id} is from contract revision {r.contract_revision}, not {rev}"
            elif r.state_version > request.state_version:
                why = f"{r.receipt_id} was written at state version {r.state_version} > {request.state_version}"
            elif r.status is not ReceiptStatus.SUCCEEDED:
                why = f"{r.receipt_id} {r.status.value}"
            if why:
                excluded.setdefault(r.skill, []).append(why)
            else:
                eligible.append(r)
        return eligible, excluded

    @staticmethod
    def _topological(contract: CompletionContract) -> list[Obligation]:
        done: set[str] = set()
        order: list[Obligation] = []
        pending = list(contract.obligations)
        while pending:  # the contract validator already rejected cycles
            ready = [o for o in pending if all(d in done for d in o.depends_on)]
            for o in ready:
                order.append(o)
                done.add(o.id)
            pending = [o for o in pending if o.id not in done]
        return order

    def _judge_obligation(
        self,
        ob: Obligation,
        request: VerifyRequest,
        fresh: WorldSnapshot,
        eligible: list[Receipt],
        excluded: dict[str, list[str]],
        prior: dict[str, _Outcome],
    ) -> _Outcome:
        unmet = [d for d in ob.depends_on if prior[d].verdict is not StepVerdict.SATISFIED]
        not_before: float | None = None
        anchors: list[str] = []
        if not unmet and ob.depends_on:
            not_before = max(prior[d].done_at or 0.0 for d in ob.depends_on)
            anchors = [d for d in ob.depends_on if prior[d].done_at == not_before]

        own = self._predicate(ob, request, fresh, eligible, excluded, not_before, anchors)
        if unmet:
            if own.verdict in (StepVerdict.VIOLATED, StepVerdict.UNSAFE):
                return own
            states = ", ".join(prior[d].verdict.value for d in unmet)
            return _Outcome(StepVerdict.AMBIGUOUS, "floor",
                            f"dependency {', '.join(unmet)} not satisfied ({states})", own.evidence)
        if own.verdict is not StepVerdict.SATISFIED:
            return own
        if ob.kind is ObligationKind.SEMANTIC or EvidenceKind.SEMANTIC_JUDGEMENT in ob.evidence:
            return self._semantic_layer(ob, request, own)
        return own

    # ------------------------------------------------------------------ layer 2: predicates

    def _predicate(
        self,
        ob: Obligation,
        request: VerifyRequest,
        fresh: WorldSnapshot,
        eligible: list[Receipt],
        excluded: dict[str, list[str]],
        not_before: float | None,
        anchors: list[str],
    ) -> _Outcome:
        skill = {
            ObligationKind.AT_PLACE: NAVIGATE_SKILL,
            ObligationKind.IMAGE_CAPTURED: CAPTURE_SKILL,
            ObligationKind.MESSAGE_DELIVERED: MESSAGE_SKILL,
            ObligationKind.SPOKEN: SPEAK_SKILL,
            ObligationKind.ROUTE_CLOSED: NAVIGATE_SKILL,
        }.get(ob.kind)
        if _observation_only(ob):
            return self._observed_at_place(ob, request, not_before)
        if skill is None:  # SEMANTIC: any current receipt may be what the judge looks at
            if not eligible:
                return _Outcome(StepVerdict.AMBIGUOUS, "floor", self._no_evidence("any skill", request, excluded, None))
            return _Outcome(StepVerdict.SATISFIED, "floor", "current receipts exist",
                            [i for r in eligible for i in _receipt_ids(r)], max(r.ended_at for r in eligible), tuple(eligible))
        candidates = [r for r in eligible if r.skill == skill]
        if not candidates:
            failed = self._failed_attempts(ob, request, skill)
            if failed:
                # No success, and the attempts that were made ended in a known
                # failure: that is evidence against, not missing evidence.
                return _Outcome(StepVerdict.VIOLATED, "floor",
                                "no success; attempts failed: " + "; ".join(
                                    f"{r.receipt_id} {r.status.value} ({_failure_reason(r)})" for r in failed),
                                [r.receipt_id for r in failed])
            return _Outcome(StepVerdict.AMBIGUOUS, "floor", self._no_evidence(skill, request, excluded, skill))

        ordered: list[Receipt] = []
        early: list[str] = []
        for r in candidates:
            if not_before is not None and r.started_at < not_before:
                early.append(f"{r.receipt_id} started at {r.started_at:.3f}, before dependency "
                             f"{'/'.join(anchors)} was satisfied at {not_before:.3f}")
            else:
                ordered.append(r)

        def run(receipts: list[Receipt]) -> _Outcome:
            try:
                if ob.kind is ObligationKind.AT_PLACE:
                    return self._at_place(ob, request, fresh, receipts)
                if ob.kind is ObligationKind.IMAGE_CAPTURED:
                    return self._image_captured(ob, request, receipts)
                if ob.kind is ObligationKind.MESSAGE_DELIVERED:
                    return self._message_delivered(ob, receipts)
                if ob.kind is ObligationKind.SPOKEN:
                    return self._spoken(receipts)
                return self._route_closed(ob, request, fresh, eligible, receipts)
            except _Unresolved as exc:
                return _Outcome(StepVerdict.AMBIGUOUS, "predicate", str(exc))

        out = run(ordered)
        if out.verdict is StepVerdict.SATISFIED or not early:
            return out
        kept = {r.receipt_id for r in ordered}
        too_early = run([r for r in candidates if r.receipt_id not in kept])
        if too_early.verdict is StepVerdict.SATISFIED:
            # the evidence exists, but not in the order the goal asked for
            return _Outcome(StepVerdict.VIOLATED, "predicate",
                            f"{too_early.reason}, but out of order: {'; '.join(early)}", too_early.evidence)
        return out

    def _failed_attempts(self, ob: Obligation, request: VerifyRequest, skill: str) -> list[Receipt]:
        """Current attempts at this obligation that ended FAILED/REJECTED, when none ended UNKNOWN.

        For AT_PLACE only navigations toward the obligation's place count (a
        navigation elsewhere is neither for nor against it).
        """
        rev = request.contract.revision
        mine = [r for r in request.receipts
                if r.mission_id == request.mission_id and r.contract_revision == rev and r.skill == skill
                and r.state_version <= request.state_version]
        if ob.kind is ObligationKind.AT_PLACE:
            try:
                place = self._resolve(ob.params.get("place", ob.params.get("pose")), request.places)
            except _Unresolved:
                return []
            mine = [r for r in mine if (t := _nav_target(r, request.places)) is not None
                    and t.distance_to(place.pose) <= self.config.xy_tolerance_m]
        if not mine or any(r.status is ReceiptStatus.UNKNOWN for r in mine):
            return []
        # A call refused before anything was tried (preconditions changed, or
        # skipped after another refusal) is not an attempt that failed.
        not_tried = ("precondition_changed", "skipped")
        return [r for r in mine if r.status in (ReceiptStatus.FAILED, ReceiptStatus.REJECTED)
                and (r.result or {}).get("status") not in not_tried]

    @staticmethod
    def _no_evidence(what: str, request: VerifyRequest, excluded: dict[str, list[str]], skill: str | None) -> str:
        why = [w for s, ws in excluded.items() if skill is None or s == skill for w in ws]
        msg = f"no SUCCEEDED {what} receipt of mission {request.mission_id} under contract revision {request.contract.revision}"
        return f"{msg} (not evidence: {'; '.join(why)})" if why else msg

    def _resolve(self, spec: Any, places: Mapping[str, Pose2D]) -> _Place:
        if isinstance(spec, str):
            if spec not in places:
                raise _Unresolved(f"unknown place {spec!r} (known: {sorted(places)})")
            return _Place(places[spec], spec, True)
        pose = _as_pose(spec)
        if pose is None:
            raise _Unresolved(f"cannot interpret place {spec!r}")
        return _Place(pose[0], f"({pose[0].x:.2f}, {pose[0].y:.2f})", pose[1])

    def _pose_error(self, pose: Pose2D, place: _Place, *, yaw: bool = True) -> str:
        """Empty if ``pose`` is within tolerance of ``place``, else why not."""
        d = pose.distance_to(place.pose)
        if d > self.config.xy_tolerance_m:
            return f"{d:.2f} m from {place.label} (tolerance {self.config.xy_tolerance_m} m)"
        tol = self.config.yaw_tolerance_rad
        if yaw and tol is not None and place.has_yaw:
            e = pose.yaw_error(place.pose)
            if e > tol:
                return f"heading {e:.2f} rad off {place.label} (tolerance {tol} rad)"
        return ""

    def _fresh_pose(self, ob: Obligation, fresh: WorldSnapshot, window_start: float, evidence_end: float) -> tuple[Pose2D | None, _Outcome | None]:
        """The trusted current pose, or the outcome that explains why there is none."""
        ev = [fresh.snapshot_id]
        meta = fresh.pose_meta
        if fresh.pose is None or meta.availability is not Availability.AVAILABLE:
            return None, _Outcome(StepVerdict.STALE, "predicate",
                                  f"fresh pose in {fresh.snapshot_id} is {meta.availability.value}", ev)
        ages = [a for a in (
            fresh.captured_at - meta.source_stamp if meta.source_stamp is not None else None,
            meta.age_s,
        ) if a is not None]
        max_age = ob.max_age_s if ob.max_age_s is not None else self.config.final_pose_max_age_s
        if not ages:
            return None, _Outcome(StepVerdict.STALE, "predicate", f"fresh pose in {fresh.snapshot_id} has no stamp or age", ev)
        if max(ages) > max_age:
            return None, _Outcome(StepVerdict.STALE, "predicate",
                                  f"fresh pose in {fresh.snapshot_id} is {max(ages):.2f} s old (max {max_age} s)", ev)
        if fresh.captured_at < evidence_end:
            return None, _Outcome(StepVerdict.STALE, "predicate",
                                  f"snapshot {fresh.snapshot_id} was captured before the evidence it should confirm ended", ev)
        if fresh.last_pose_jump_at is not None and fresh.last_pose_jump_at >= window_start:
            return None, _Outcome(StepVerdict.AMBIGUOUS, "predicate",
                                  f"localization jumped at {fresh.last_pose_jump_at:.3f} (after {window_start:.3f}); "
                                  "the pose cannot be trusted", ev)
        return fresh.pose, None

    @staticmethod
    def _worst(violations: list[tuple[_Sev, str, list[str]]], fallback: str) -> _Outcome:
        if not violations:
            return _Outcome(StepVerdict.AMBIGUOUS, "predicate", fallback)
        sev = max(v[0] for v in violations)
        verdict = {_Sev.AMBIGUOUS: StepVerdict.AMBIGUOUS, _Sev.STALE: StepVerdict.STALE,
                   _Sev.VIOLATED: StepVerdict.VIOLATED}[sev]
        return _Outcome(verdict, "predicate", "; ".join(v[1] for v in violations),
                        [i for v in violations for i in v[2]])

    def _observed_at_place(self, ob: Obligation, request: VerifyRequest, not_before: float | None) -> _Outcome:
        """AT_PLACE when the contract accepts pose observations alone (e.g. a recording from a robot the
        harness did not drive): a recorded pose within tolerance of the place, after any dependency."""
        place = self._resolve(ob.params.get("place", ob.params.get("pose")), request.places)
        samples = sorted((p for p in request.trajectory if not_before is None or p.t >= not_before), key=lambda p: p.t)
        if not samples:
            return _Outcome(StepVerdict.AMBIGUOUS, "predicate", f"no pose observation to judge {place.label} on")
        for p in samples:
            if not self._pose_error(p.pose, place):
                return _Outcome(StepVerdict.SATISFIED, "predicate",
                                f"observed within tolerance of {place.label} at t={p.t:.3f} ({p.source_id})",
                                [p.source_id], p.t)
        closest = min(samples, key=lambda p: p.pose.distance_to(place.pose))
        return _Outcome(StepVerdict.VIOLATED, "predicate",
                        f"{len(samples)} pose observations, none within tolerance of {place.label}; closest "
                        f"{self._pose_error(closest.pose, place)} ({closest.source_id})", [closest.source_id])

    def _at_place(self, ob: Obligation, request: VerifyRequest, fresh: WorldSnapshot, navs: list[Receipt]) -> _Outcome:
        place = self._resolve(ob.params.get("place", ob.params.get("pose")), request.places)
        problems: list[tuple[_Sev, str, list[str]]] = []
        hit: Receipt | None = None
        for r in navs:
            target = _nav_target(r, request.places)
            if target is None or target.distance_to(place.pose) > self.config.xy_tolerance_m:
                continue  # a navigation elsewhere is neither for nor against
            if r.pose_at_end is None:
                problems.append((_Sev.AMBIGUOUS, f"{r.receipt_id} recorded no pose at its end", [r.receipt_id]))
                continue
            err = self._pose_error(r.pose_at_end, place)
            if err:
                problems.append((_Sev.VIOLATED, f"{r.receipt_id} ended {err}", _receipt_ids(r)))
                continue
            hit = r
            break
        if hit is None:
            return self._worst(problems, f"no SUCCEEDED {NAVIGATE_SKILL} receipt to {place.label}")
        evidence = _receipt_ids(hit)
        reason = f"{hit.receipt_id} navigated to {place.label} and ended within tolerance"
        if not ob.params.get("final") or not self.config.require_fresh_pose:
            return _Outcome(StepVerdict.SATISFIED, "predicate", reason, evidence, hit.ended_at, (hit,))
        pose, failure = self._fresh_pose(ob, fresh, hit.started_at, hit.ended_at)
        if failure is not None:
            failure.evidence = evidence + failure.evidence
            return failure
        assert pose is not None
        err = self._pose_error(pose, place)
        evidence.append(fresh.snapshot_id)
        if err:
            return _Outcome(StepVerdict.VIOLATED, "predicate", f"fresh pose in {fresh.snapshot_id} is {err}", evidence)
        return _Outcome(StepVerdict.SATISFIED, "predicate", f"{reason}; fresh pose in {fresh.snapshot_id} still there",
                        evidence, hit.ended_at, (hit,))

    def _image_captured(self, ob: Obligation, request: VerifyRequest, caps: list[Receipt]) -> _Outcome:
        spec = ob.params.get("place")
        place = self._resolve(spec, request.places) if spec is not None else None
        problems: list[tuple[_Sev, str, list[str]]] = []
        for r in caps:
            art = _artifact_of(r)
            if art is None:
                problems.append((_Sev.AMBIGUOUS, f"{r.receipt_id} carries no artifact uri+sha256", [r.receipt_id]))
                continue
            if place is not None:  # cheaper than re-hashing the file
                if r.pose_at_end is None:
                    problems.append((_Sev.AMBIGUOUS, f"{r.receipt_id} recorded no pose", [r.receipt_id]))
                    continue
                err = self._pose_error(r.pose_at_end, place)
                if err:
                    problems.append((_Sev.VIOLATED, f"{r.receipt_id} was captured {err}", _receipt_ids(r)))
                    continue
            try:
                self._artifact_check(*art)
            except Exception as exc:  # noqa: BLE001 - any failure to re-check is a mismatch
                why = f"{r.receipt_id}: artifact checksum mismatch/missing for {art[0]}: {type(exc).__name__}: {exc}"
                problems.append((_Sev.VIOLATED, why, _receipt_ids(r)))
                continue
            where = f" at {place.label}" if place is not None else ""
            return _Outcome(StepVerdict.SATISFIED, "predicate", f"{r.receipt_id} captured {art[0]}{where}; sha256 matches",
                            [*_receipt_ids(r), artifact_evidence_id(art[1])], r.ended_at, (r,))
        return self._worst(problems, f"no SUCCEEDED {CAPTURE_SKILL} receipt")

    def _message_delivered(self, ob: Obligation, msgs: list[Receipt]) -> _Outcome:
        want = ob.params.get("to")
        problems: list[tuple[_Sev, str, list[str]]] = []
        for r in msgs:
            ack = _delivery_ack(r)
            if ack is None:
                problems.append((_Sev.AMBIGUOUS, f"{r.receipt_id} has no delivery acknowledgement", [r.receipt_id]))
                continue
            if want is not None:
                to = _arguments(r).get("to", ack.get("to"))
                if to is None:
                    problems.append((_Sev.AMBIGUOUS, f"{r.receipt_id} does not say its recipient", [r.receipt_id]))
                    continue
                if _norm(to) != _norm(want):
                    problems.append((_Sev.VIOLATED, f"{r.receipt_id} went to {to!r}, not {want!r}", _receipt_ids(r)))
                    continue
            return _Outcome(StepVerdict.SATISFIED, "predicate", f"{r.receipt_id} delivered (ack {ack.get('message_id') or ack.get('delivered_at')})",
                            _receipt_ids(r), r.ended_at, (r,))
        return self._worst(problems, f"no SUCCEEDED {MESSAGE_SKILL} receipt")

    @staticmethod
    def _spoken(speaks: list[Receipt]) -> _Outcome:
        if not speaks:
            return _Outcome(StepVerdict.AMBIGUOUS, "predicate", f"no SUCCEEDED {SPEAK_SKILL} receipt")
        r = speaks[0]
        return _Outcome(StepVerdict.SATISFIED, "predicate", f"{r.receipt_id} spoke", _receipt_ids(r), r.ended_at, (r,))

    def _route_closed(self, ob: Obligation, request: VerifyRequest, fresh: WorldSnapshot,
                      eligible: list[Receipt], navs: list[Receipt]) -> _Outcome:
        """Depart, visit the waypoints in order, be back at the start now.

        The route counts from the first current navigation (so poses from an
        earlier attempt cannot close it). ``params.start`` names the start; if
        absent, it is where the robot was when that navigation began.
        """
        if not navs:
            return _Outcome(StepVerdict.AMBIGUOUS, "predicate", f"no SUCCEEDED {NAVIGATE_SKILL} receipt in order")
        t0 = min(r.started_at for r in navs)
        first_nav = min(navs, key=lambda r: r.started_at)
        samples = sorted(
            [*request.trajectory,
             *(PoseSample(t=r.pose_stamp if r.pose_stamp is not None else r.ended_at, pose=r.pose_at_end, source_id=r.receipt_id)
               for r in eligible if r.pose_at_end is not None)],
            key=lambda s: s.t,
        )
        before = [s for s in samples if s.t <= t0]
        window = [s for s in samples if s.t >= t0]
        evidence = [first_nav.receipt_id]
        spec = ob.params.get("start")
        if spec is not None:
            start = self._resolve(spec, request.places)
        else:
            origin = before[-1] if before else (window[0] if window else None)
            if origin is None:
                return _Outcome(StepVerdict.AMBIGUOUS, "predicate", "no pose known for the start of the route", evidence)
            start = _Place(origin.pose, f"start ({origin.pose.x:.2f}, {origin.pose.y:.2f})", False)
            evidence.append(origin.source_id)
        waypoints = [self._resolve(w, request.places) for w in ob.params.get("waypoints", ())]
        min_dep = float(ob.params.get("min_departure_m", 2.0 * self.config.xy_tolerance_m))

        departed: PoseSample | None = None
        idx = 0
        for s in window:
            if departed is None and s.pose.distance_to(start.pose) > min_dep:
                departed = s
                evidence.append(s.source_id)
            if idx < len(waypoints) and not self._pose_error(s.pose, waypoints[idx], yaw=False):
                evidence.append(s.source_id)
                idx += 1
        if departed is None:
            far = max((s.pose.distance_to(start.pose) for s in window), default=0.0)
            return _Outcome(StepVerdict.VIOLATED, "predicate",
                            f"never departed more than {min_dep} m from {start.label} (farthest {far:.2f} m)", evidence)
        if idx < len(waypoints):
            return _Outcome(StepVerdict.VIOLATED, "predicate",
                            f"waypoint {waypoints[idx].label} (#{idx + 1}) not visited in order", evidence)

        last_end = max(r.ended_at for r in navs)
        if self.config.require_fresh_pose:
            pose, failure = self._fresh_pose(ob, fresh, t0, last_end)
            if failure is not None:
                failure.evidence = evidence + failure.evidence
                return failure
            assert pose is not None
            here, here_id, here_t = pose, fresh.snapshot_id, fresh.captured_at
        else:
            here, here_id, here_t = window[-1].pose, window[-1].source_id, window[-1].t
        evidence.append(here_id)
        err = self._pose_error(here, start, yaw=False)
        if err:
            return _Outcome(StepVerdict.VIOLATED, "predicate", f"not back: current pose ({here_id}) is {err}", evidence)
        return _Outcome(StepVerdict.SATISFIED, "predicate",
                        f"departed {departed.pose.distance_to(start.pose):.2f} m, visited {len(waypoints)} waypoint(s) in order, "
                        f"back at {start.label} ({here_id})", evidence, here_t, tuple(navs))

    # ------------------------------------------------------------------ layer 3: semantic

    def _semantic_layer(self, ob: Obligation, request: VerifyRequest, passed: _Outcome) -> _Outcome:
        receipts = passed.receipts
        artifacts: list[ArtifactRef] = []
        evidence = list(passed.evidence)
        for r in receipts:
            art = _artifact_of(r)
            if art is None:
                continue
            try:
                self._artifact_check(*art)
            except Exception:  # noqa: BLE001, S112 - an artifact that no longer matches is not shown to the judge
                continue
            artifacts.append(ArtifactRef(uri=art[0], sha256=art[1]))
            evidence.append(artifact_evidence_id(art[1]))
        verdict, reason = self._judge(ob, goal=request.goal, receipts=tuple(receipts), artifacts=tuple(artifacts))
        return _Outcome(verdict, "semantic", reason, evidence, passed.done_at if verdict is StepVerdict.SATISFIED else None)

    def _judge(self, ob: Obligation, *, goal: str, receipts: tuple[Receipt, ...],
               artifacts: tuple[ArtifactRef, ...]) -> tuple[StepVerdict, str]:
        """The semantic checker, fenced: a raise or a malformed answer is ambiguous, never satisfied."""
        if self._semantic is None:
            return StepVerdict.AMBIGUOUS, "no semantic checker configured"
        try:
            out = self._semantic.judge(ob, goal=goal, receipts=receipts, artifacts=artifacts)
        except Exception as exc:  # noqa: BLE001 - the judge is untrusted code
            return StepVerdict.AMBIGUOUS, f"semantic checker failed: {type(exc).__name__}: {exc}"
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], StepVerdict)):
            return StepVerdict.AMBIGUOUS, f"semantic checker returned {str(out)[:200]!r}, not (StepVerdict, reason)"
        return out[0], f"semantic: {out[1]}"


def _failure_reason(r: Receipt) -> str:
    res = r.result or {}
    if isinstance(res.get("reason"), str):
        return res["reason"]
    content = res.get("content")
    if isinstance(content, dict) and isinstance(content.get("reason"), str):
        return content["reason"]
    err = res.get("error")
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    return r.status.value.lower()
