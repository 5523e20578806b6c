"""A mission as an operator sees it: one JSON-ready dict folded from its journal events.

``mission_view`` is what the live dashboard serves (``operator/dashboard.py``)
and what its page renders; ``missions_list`` is the picker's list. Both are
pure: the journal's events (in seq order) and the time to judge ages against
go in, plain dicts, lists, strings and numbers come out (``json.dumps`` takes
them as they are), so a recorded journal always renders the same way.

What the view guarantees:

* **Nothing is inferred that the journal does not say.** A mission without
  ``MISSION_FINISHED`` is ``WAITING_USER`` while one of its interactions is
  pending and ``RUNNING`` otherwise (either may also be a mission interrupted
  and not yet reconciled); an obligation no verdict judged is ``pending``; an obligation
  counts as committed only when a ``COMMIT_RECORDED`` of the current contract
  names it. The planner's words (``DONE_PROPOSED``, response text) are shown
  as what the planner said, never as a state.
* **Staleness is explicit.** Every snapshot field says whether it was
  trusted when captured (its ``FieldMeta``) and whether it still is at
  ``now``: a field is stale when its availability was STALE or MISSING, or
  when its age at ``now`` exceeds its freshness limit. The limit is the
  field's own ``max_age_s`` (the aggregator's ``FreshnessConfig``); for the
  pose it is the tighter of that and the mission config's
  ``navigation.preconditions.max_observation_age_s``, the bound a dispatch
  is held to (``core/preconditions.py``).
* **A payload of an unexpected shape never breaks the view.** That event is
  listed under ``unparsed`` with the error, and the rest of the view stands.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError

from .durable import DurableIndex
from .errors import UsageError
from .interactions import InteractionKind, allowed_resolutions, interactions
from .payloads import (
    ActionPreconditionChecked,
    CommitRecorded,
    ContractFrozen,
    DoneProposed,
    EventPayload,
    GateRejected,
    InteractionRequested,
    LeaseAcquired,
    LeaseBlocked,
    LeaseReleased,
    MissionFinished,
    MissionStarted,
    ModelResponseRecorded,
    ModelTurnStarted,
    PayloadReadError,
    ReceiptRecorded,
    RecoveryDecided,
    RobotActionOutcome,
    RobotActionProgress,
    RobotActionReconciled,
    RobotActionStarted,
    RobotActionStateChanged,
    RuntimeEventDelivered,
    StopRequested,
    ToolCallRecorded,
    ToolResultRecorded,
    VerdictRecorded,
    WorldSnapshotCaptured,
    payload_of,
)
from .records import ActionStatus, Availability, EventType, JournalEvent, MissionStatus
from .timeline import render_timeline

__all__ = ["VIEW_FORMAT_VERSION", "RUNNING", "WAITING_USER", "UnknownMission", "live_status", "mission_view",
           "missions_list", "pending_interactions"]

VIEW_FORMAT_VERSION = 1
"""Bumped when a key of the view changes meaning or disappears (the page checks it)."""

RUNNING = "RUNNING"
"""The status of a mission with no ``MISSION_FINISHED`` event (running, or interrupted and not reconciled)."""
WAITING_USER = MissionStatus.WAITING_USER.value
"""The status of an unfinished mission while one of its interactions waits for the operator."""


def live_status(final_status: str | None, *, pending_interactions: int) -> str:
    """A mission's status as an operator should read it now.

    A final status (``MISSION_FINISHED``) always wins; an unfinished mission is
    ``WAITING_USER`` while any of its interactions is pending and ``RUNNING``
    otherwise, so it goes back to ``RUNNING`` as soon as the last one is resolved.
    """
    if final_status:
        return final_status
    return WAITING_USER if pending_interactions > 0 else RUNNING


def pending_interactions(interaction_events: Iterable[JournalEvent]) -> dict[str, int]:
    """Pending interactions per mission id, from INTERACTION_* events (any missions, seq order; others are ignored)."""
    out: dict[str, int] = {}
    for i in interactions(e for e in interaction_events
                          if e.type in (EventType.INTERACTION_REQUESTED, EventType.INTERACTION_RESOLVED)).values():
        if i.pending:
            out[i.mission_id] = out.get(i.mission_id, 0) + 1
    return out


class UnknownMission(UsageError):
    """No event of the mission asked for is among the events given."""

    code = "not_found"


_TRAJECTORY_MAX_POINTS = 2000
_TAIL_EVENTS = 40
_E = EventType
_M = TypeVar("_M", bound=EventPayload)

_PARSE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, ValidationError, PayloadReadError)


def _num(value: Any) -> float | None:
    """A finite float, or None (JSON has no NaN or infinity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


# ----------------------------------------------------------------------------- snapshot


def _field(name: str, value: Any, display: str, meta: Any, *, now: float, limit_s: float | None) -> dict[str, Any]:
    availability = meta.availability
    age_at_capture = _num(meta.age_s)
    age_now = _round(now - meta.source_stamp) if meta.source_stamp is not None else None
    reasons: list[str] = []
    if availability is Availability.MISSING:
        reasons.append("MISSING: never observed")
    elif availability is Availability.STALE:
        reasons.append("STALE when captured" + (f" (older than {meta.max_age_s:g} s)" if meta.max_age_s else ""))
    if availability is not Availability.MISSING and limit_s and age_now is not None and abs(age_now) > limit_s:
        reasons.append(f"now {age_now:.1f} s old (limit {limit_s:g} s)")
    return {
        "name": name,
        "value": value,
        "display": display,
        "availability": availability.value,
        "source": meta.source,
        "source_stamp": meta.source_stamp,
        "age_at_capture_s": _round(age_at_capture),
        "age_s": age_now,
        "limit_s": limit_s,
        "stale": bool(reasons),
        "stale_reason": "; ".join(reasons),
    }


def _snapshot_view(ev: JournalEvent, *, now: float, pose_limit_s: float | None) -> dict[str, Any]:
    s = payload_of(ev, WorldSnapshotCaptured).snapshot
    if s is None:
        raise KeyError("snapshot")

    def limit(meta: Any, extra: float | None = None) -> float | None:
        bounds = [b for b in (meta.max_age_s or None, extra) if b]
        return min(bounds) if bounds else None

    pose = s.pose.model_dump() if s.pose else None
    pose_display = f"({s.pose.x:.2f}, {s.pose.y:.2f}) yaw {math.degrees(s.pose.yaw):.0f}°" if s.pose else "-"
    vel = s.velocity.model_dump() if s.velocity else None
    vel_display = f"vx {s.velocity.vx:.2f} vy {s.velocity.vy:.2f} wz {s.velocity.wz:.2f}" if s.velocity else "-"
    nav_bits = [s.controller_state.value]
    if s.distance_remaining is not None:
        nav_bits.append(f"{s.distance_remaining:.2f} m left")
    if s.nav_goal is not None:
        nav_bits.append(f"goal ({s.nav_goal.x:.2f}, {s.nav_goal.y:.2f})")
    battery_display = f"{s.battery * 100:.0f} %" if s.battery is not None else "-"
    fields = [
        _field("pose", pose, pose_display, s.pose_meta, now=now, limit_s=limit(s.pose_meta, pose_limit_s)),
        _field("velocity", vel, vel_display, s.velocity_meta, now=now, limit_s=limit(s.velocity_meta)),
        _field("navigation", {"controller_state": s.controller_state.value, "distance_remaining": s.distance_remaining,
                              "nav_goal_id": s.nav_goal_id,
                              "nav_goal": s.nav_goal.model_dump() if s.nav_goal else None},
               " | ".join(nav_bits), s.navigation_meta, now=now, limit_s=limit(s.navigation_meta)),
        _field("battery", s.battery, battery_display, s.battery_meta, now=now, limit_s=limit(s.battery_meta)),
    ]
    return {
        "snapshot_id": s.snapshot_id,
        "seq": ev.seq,
        "reason": s.reason,
        "captured_at": s.captured_at,
        "age_s": _round(now - s.captured_at),
        "frame_id": s.frame_id,
        "fields": fields,
        "stale_fields": [f["name"] for f in fields if f["stale"]],
        "pose_jumps": s.pose_jumps,
        "last_pose_jump_at": s.last_pose_jump_at,
        "active_action": s.active_action.model_dump(mode="json") if s.active_action else None,
        "recent_outcome": s.recent_outcome.model_dump(mode="json") if s.recent_outcome else None,
        "artifacts": [a.model_dump(mode="json") for a in s.artifacts],
    }


# ----------------------------------------------------------------------------- the fold


class _Fold:
    """One pass over a mission's events; each ``_on_<type>`` may raise on an odd payload."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.started: JournalEvent | None = None
        self.finished: JournalEvent | None = None
        self.contract: dict[str, Any] | None = None
        self.contract_error: dict[str, Any] | None = None
        self.snapshot_event: JournalEvent | None = None
        self.points: list[dict[str, Any]] = []
        self.actions: dict[str, dict[str, Any]] = {}
        self.turns: list[dict[str, Any]] = []
        self.turn_by_id: dict[str, dict[str, Any]] = {}
        self.calls: dict[str, dict[str, Any]] = {}
        self.verdicts: list[dict[str, Any]] = []
        self.commits: list[dict[str, Any]] = []
        self.gate_rejections: list[dict[str, Any]] = []
        self.done_proposals: list[dict[str, Any]] = []
        self.recoveries: list[dict[str, Any]] = []
        self.receipts: list[dict[str, Any]] = []
        self.lease_history: list[dict[str, Any]] = []
        self.stops: list[dict[str, Any]] = []
        self.unparsed: list[dict[str, Any]] = []

    # -- mission ------------------------------------------------------------

    def _on_mission_started(self, ev: JournalEvent) -> None:
        if self.started is None:
            self.started = ev

    def _on_mission_finished(self, ev: JournalEvent) -> None:
        self.finished = ev

    def _on_stop_requested(self, ev: JournalEvent) -> None:
        p = payload_of(ev, StopRequested)
        self.stops.append({"seq": ev.seq, "at": ev.stamp, "reason": p.reason, "source": p.source})

    # -- contract and its judgement ---------------------------------------------

    def _on_contract_frozen(self, ev: JournalEvent) -> None:
        p = payload_of(ev, ContractFrozen)
        c = p.contract
        if c is not None:
            self.contract = {"contract_id": c.contract_id, "revision": c.revision, "compiler": c.compiler,
                             "goal": c.goal, "coverage": c.coverage.model_dump(mode="json") if c.coverage else None,
                             "frozen_at": ev.stamp, "seq": ev.seq,
                             "obligations": [o.model_dump(mode="json") for o in c.obligations]}
        else:
            self.contract_error = dict(p.error or {"message": "contract compilation failed"})

    def _on_verdict_recorded(self, ev: JournalEvent) -> None:
        v = payload_of(ev, VerdictRecorded).verdict
        self.verdicts.append({
            "verdict_id": v.verdict_id, "seq": ev.seq, "at": ev.stamp, "goal_verdict": v.goal_verdict.value,
            "contract_id": v.contract_id, "contract_revision": v.contract_revision,
            "state_version": v.state_version, "verifier": v.verifier,
            "missing": list(v.missing), "evidence_ids": list(v.evidence_ids),
            "fresh_snapshot_id": v.fresh_snapshot_id, "tool_call_id": ev.tool_call_id,
            "steps": [{"obligation_id": s.obligation_id, "verdict": s.verdict.value, "layer": s.layer,
                       "reason": s.reason, "evidence_ids": list(s.evidence_ids)} for s in v.steps],
            "commit_id": None, "rejected": None,
        })

    def _on_commit_recorded(self, ev: JournalEvent) -> None:
        c = payload_of(ev, CommitRecorded).commit
        self.commits.append({"commit_id": c.commit_id, "verdict_id": c.verdict_id, "seq": ev.seq,
                             "at": ev.stamp, "contract_id": c.contract_id, "contract_revision": c.contract_revision,
                             "state_version_before": c.state_version_before,
                             "state_version_after": c.state_version_after,
                             "obligations": list(c.obligations)})

    def _on_gate_rejected(self, ev: JournalEvent) -> None:
        p = payload_of(ev, GateRejected)
        self.gate_rejections.append({"verdict_id": p.verdict_id, "seq": ev.seq, "at": ev.stamp,
                                     "code": p.code, "message": p.message})

    def _on_done_proposed(self, ev: JournalEvent) -> None:
        self.done_proposals.append({"seq": ev.seq, "at": ev.stamp, "text": payload_of(ev, DoneProposed).text,
                                    "model_turn_id": ev.model_turn_id, "tool_call_id": ev.tool_call_id})

    def _on_receipt_recorded(self, ev: JournalEvent) -> None:
        r = payload_of(ev, ReceiptRecorded).receipt
        self.receipts.append({"receipt_id": r.receipt_id, "seq": ev.seq, "skill": r.skill,
                              "status": r.status.value, "at": r.ended_at,
                              "tool_call_id": r.invocation_id, "action_id": r.action_id,
                              "state_version": r.state_version,
                              "evidence_ids": [e.id for e in r.evidence]})

    def _on_recovery_decided(self, ev: JournalEvent) -> None:
        p = payload_of(ev, RecoveryDecided)
        f, d = p.failure, p.decision
        self.recoveries.append({"seq": ev.seq, "at": ev.stamp, "failure": f.failure_kind.value,
                                "reason": f.reason, "rung": d.rung.value,
                                "why": d.reason, "tool_call_id": ev.tool_call_id})

    # -- world ------------------------------------------------------------------

    def _on_world_snapshot_captured(self, ev: JournalEvent) -> None:
        snap = payload_of(ev, WorldSnapshotCaptured).snapshot
        if snap is None:
            raise KeyError("snapshot")
        self.snapshot_event = ev
        if snap.pose is not None and snap.pose_meta.availability is Availability.AVAILABLE:
            t = _num(snap.pose_meta.source_stamp) or _num(snap.captured_at) or ev.stamp
            self.points.append({"x": float(snap.pose.x), "y": float(snap.pose.y), "t": t, "source": "snapshot",
                                "id": snap.snapshot_id})

    # -- actions ----------------------------------------------------------------

    def _action(self, action_id: str) -> dict[str, Any]:
        if action_id not in self.actions:  # an event about an action whose start is not in these events
            self.actions[action_id] = {"action_id": action_id, "skill": "", "tool_call_id": "", "model_turn_id": "",
                                       "arguments": {}, "target": None, "approval": "", "goal_id": "",
                                       "started_at": None, "state": ActionStatus.REQUESTED.value, "states": [],
                                       "progress": {"count": 0, "distance_remaining": None, "at": None},
                                       "outcome": None, "reconciled": None}
        return self.actions[action_id]

    def _on_robot_action_started(self, ev: JournalEvent) -> None:
        p = payload_of(ev, RobotActionStarted)
        a = self._action(ev.robot_action_id)
        a.update(skill=p.action.skill, tool_call_id=ev.tool_call_id, model_turn_id=ev.model_turn_id,
                 arguments=dict(p.intent.arguments) if p.intent is not None else {},
                 target=p.target.model_dump() if p.target is not None else None,
                 approval=p.policy.approval if p.policy is not None else "",
                 goal_id=p.dispatch.goal_id if p.dispatch is not None else "", started_at=ev.stamp)
        a["states"].append({"state": ActionStatus.REQUESTED.value, "at": ev.stamp, "reason": "dispatch intent recorded",
                            "seq": ev.seq})

    def _on_robot_action_state_changed(self, ev: JournalEvent) -> None:
        p = payload_of(ev, RobotActionStateChanged)
        a = self._action(ev.robot_action_id)
        a["states"].append({"state": p.to.value, "at": ev.stamp, "reason": p.reason, "seq": ev.seq})
        a["state"] = p.to.value

    def _on_robot_action_progress(self, ev: JournalEvent) -> None:
        p = payload_of(ev, RobotActionProgress)
        a = self._action(ev.robot_action_id)
        d = _num(p.distance_remaining)
        a["progress"] = {"count": a["progress"]["count"] + 1, "distance_remaining": d, "at": ev.stamp}
        pose = p.current_pose
        if pose is not None and _num(pose.x) is not None and _num(pose.y) is not None:
            self.points.append({"x": float(pose.x), "y": float(pose.y), "t": ev.stamp, "source": "progress",
                                "id": ev.robot_action_id})

    def _on_robot_action_outcome(self, ev: JournalEvent) -> None:
        p = payload_of(ev, RobotActionOutcome)
        a = self._action(ev.robot_action_id)
        a["outcome"] = {"state": p.state.value, "reason": p.reason, "at": ev.stamp, "seq": ev.seq,
                        "snapshot_id": ev.snapshot_id, "evidence": p.evidence or {}}

    def _on_robot_action_reconciled(self, ev: JournalEvent) -> None:
        p = payload_of(ev, RobotActionReconciled)
        a = self._action(ev.robot_action_id)
        a["reconciled"] = {"finding": p.finding, "detail": p.detail, "backend_status": p.backend_status,
                           "at": ev.stamp}

    # -- model turns --------------------------------------------------------------

    def _on_model_turn_started(self, ev: JournalEvent) -> None:
        p = payload_of(ev, ModelTurnStarted)
        turn = {"turn_id": ev.model_turn_id, "index": p.turn_index if p.turn_index is not None else len(self.turns),
                "started_at": ev.stamp, "snapshot_id": ev.snapshot_id,
                "context_bytes": p.context_bytes, "runtime_events": [], "response": None,
                "tool_calls": []}
        self.turns.append(turn)
        self.turn_by_id[ev.model_turn_id] = turn

    def _turn(self, ev: JournalEvent) -> dict[str, Any] | None:
        return self.turn_by_id.get(ev.model_turn_id)

    def _on_runtime_event_delivered(self, ev: JournalEvent) -> None:
        turn = self._turn(ev)
        if turn is not None:
            p = payload_of(ev, RuntimeEventDelivered)
            turn["runtime_events"].append({"type": p.type, "state": p.state, "tool_call_id": p.tool_call_id,
                                           "reason": str(p.detail.get("reason", ""))})

    def _on_model_response_recorded(self, ev: JournalEvent) -> None:
        turn = self._turn(ev)
        p = payload_of(ev, ModelResponseRecorded)
        r = p.response
        usage = ((r.meta.get("llm_call") or {}).get("usage")) if r is not None else None
        response = {"at": ev.stamp, "text": r.text if r is not None else "", "done": r.done if r is not None else None,
                    "error": p.error, "tool_call_count": len(r.tool_calls) if r is not None else 0,
                    "usage": usage if isinstance(usage, Mapping) else None}
        if turn is not None:
            turn["response"] = response

    def _on_tool_call_recorded(self, ev: JournalEvent) -> None:
        p = payload_of(ev, ToolCallRecorded)
        call = {"tool_call_id": ev.tool_call_id, "name": p.name, "arguments": dict(p.arguments), "at": ev.stamp,
                "result": None, "preconditions": None, "interaction_id": "", "action_id": ""}
        self.calls[ev.tool_call_id] = call
        turn = self._turn(ev)
        if turn is not None:
            turn["tool_calls"].append(call)

    def _on_tool_result_recorded(self, ev: JournalEvent) -> None:
        call = self.calls.get(ev.tool_call_id)
        r = payload_of(ev, ToolResultRecorded).result()
        result = {"status": r.status.value, "content": r.content or {}, "error": r.error,
                  "action_id": r.action_id or "", "at": ev.stamp, "seq": ev.seq}
        if call is not None:
            call["result"] = result
            call["action_id"] = result["action_id"]

    def _on_action_precondition_checked(self, ev: JournalEvent) -> None:
        call = self.calls.get(ev.tool_call_id)
        p = payload_of(ev, ActionPreconditionChecked)
        report = {"ok": p.ok, "snapshot_id": ev.snapshot_id,
                  "failed": [{"name": c.name, "detail": c.detail} for c in p.checks if not c.ok],
                  "checks": len(p.checks)}
        if call is not None:
            call["preconditions"] = report

    def _on_interaction_requested(self, ev: JournalEvent) -> None:
        call = self.calls.get(ev.tool_call_id)
        if call is not None:
            call["interaction_id"] = payload_of(ev, InteractionRequested).interaction_id

    # -- leases -------------------------------------------------------------------

    def _lease(self, ev: JournalEvent, state: str) -> None:
        p = payload_of(ev)
        if not isinstance(p, (LeaseAcquired, LeaseReleased, LeaseBlocked)):
            raise TypeError(f"{ev.type.value} is not a lease event")
        acquired = p if isinstance(p, LeaseAcquired) else None
        released = p if isinstance(p, LeaseReleased) else None
        self.lease_history.append({
            "seq": ev.seq, "at": ev.stamp, "resource": p.resource, "owner": p.owner, "event": state,
            "skill": acquired.skill if acquired else "", "expires_at": _num(acquired.expires_at) if acquired else None,
            "why": released.why if released else p.reason if isinstance(p, LeaseBlocked) else "",
            "detail": released.detail if released else "", "operator": released.operator if released else ""})

    def _on_lease_acquired(self, ev: JournalEvent) -> None:
        self._lease(ev, "acquired")

    def _on_lease_released(self, ev: JournalEvent) -> None:
        self._lease(ev, "released")

    def _on_lease_blocked(self, ev: JournalEvent) -> None:
        self._lease(ev, "blocked")

    # -- driver ---------------------------------------------------------------------

    def typed(self, ev: JournalEvent | None, model: type[_M]) -> _M:
        """The mission mark's payload; its defaults when there is none, or (listed as unparsed) it does not read."""
        if ev is None:
            return model()
        try:
            return payload_of(ev, model)
        except PayloadReadError as exc:
            self.unparsed.append({"seq": ev.seq, "type": ev.type.value, "error": f"{type(exc).__name__}: {exc}"})
            return model()

    def feed(self, ev: JournalEvent) -> None:
        handler = getattr(self, f"_on_{ev.type.value.lower()}", None)
        if handler is None:
            return
        try:
            handler(ev)
        except _PARSE_ERRORS as exc:
            self.unparsed.append({"seq": ev.seq, "type": ev.type.value, "error": f"{type(exc).__name__}: {exc}"})


# ----------------------------------------------------------------------------- sections


def _contract_view(fold: _Fold) -> dict[str, Any] | None:
    if fold.contract is None:
        return {"error": fold.contract_error, "obligations": []} if fold.contract_error else None
    c = fold.contract
    mine = [v for v in fold.verdicts
            if v["contract_id"] == c["contract_id"] and v["contract_revision"] in (None, c["revision"])]
    committed: dict[str, str] = {}
    for commit in fold.commits:
        if commit["contract_id"] == c["contract_id"] and commit["contract_revision"] in (None, c["revision"]):
            for ob in commit["obligations"]:
                committed.setdefault(ob, commit["commit_id"])
    obligations = []
    for o in c["obligations"]:
        oid = str(o["id"])
        latest = next(((v, s) for v in reversed(mine) for s in v["steps"] if s["obligation_id"] == oid), None)
        step = latest[1] if latest else None
        obligations.append({
            "id": oid, "kind": str(o.get("kind", "")), "description": str(o.get("description", "")),
            "depends_on": list(o.get("depends_on", [])), "params": o.get("params") or {},
            "state": step["verdict"] if step else "pending",
            "layer": step["layer"] if step else "", "reason": step["reason"] if step else "",
            "evidence_ids": step["evidence_ids"] if step else [],
            "verdict_id": latest[0]["verdict_id"] if latest else "",
            "committed": oid in committed, "commit_id": committed.get(oid, ""),
        })
    return {**{k: v for k, v in c.items() if k != "obligations"}, "error": None, "obligations": obligations,
            "committed": sorted(committed), "all_committed": bool(obligations) and all(o["committed"] for o in obligations)}


def _trajectory(fold: _Fold, places: Mapping[str, Any]) -> dict[str, Any]:
    seen: set[tuple[float, float, float]] = set()
    points = []
    for p in sorted(fold.points, key=lambda p: p["t"]):
        key = (round(p["t"], 3), round(p["x"], 3), round(p["y"], 3))
        if key not in seen:
            seen.add(key)
            points.append({**p, "x": round(p["x"], 3), "y": round(p["y"], 3)})
    dropped = 0
    if len(points) > _TRAJECTORY_MAX_POINTS:  # keep the ends and an even spread between them
        step = len(points) / _TRAJECTORY_MAX_POINTS
        kept = [points[int(i * step)] for i in range(_TRAJECTORY_MAX_POINTS - 1)] + [points[-1]]
        dropped, points = len(points) - len(kept), kept
    named = {}
    for name, p in places.items():
        if isinstance(p, Mapping) and _num(p.get("x")) is not None and _num(p.get("y")) is not None:
            named[str(name)] = {"x": float(p["x"]), "y": float(p["y"]), "yaw": _num(p.get("yaw")) or 0.0}
    targets = []
    for a in fold.actions.values():
        t = a.get("target")
        if isinstance(t, Mapping) and _num(t.get("x")) is not None and _num(t.get("y")) is not None:
            targets.append({"action_id": a["action_id"], "x": float(t["x"]), "y": float(t["y"]), "state": a["state"]})
    xs = [p["x"] for p in points] + [p["x"] for p in named.values()] + [t["x"] for t in targets]
    ys = [p["y"] for p in points] + [p["y"] for p in named.values()] + [t["y"] for t in targets]
    bounds = None
    if xs:
        pad = max(0.5, 0.1 * max(max(xs) - min(xs), max(ys) - min(ys)))
        bounds = {"min_x": min(xs) - pad, "max_x": max(xs) + pad, "min_y": min(ys) - pad, "max_y": max(ys) + pad}
    return {"points": points, "dropped_points": dropped, "places": named, "targets": targets, "bounds": bounds}


def _leases(fold: _Fold, events: Sequence[JournalEvent]) -> dict[str, Any]:
    index = DurableIndex()
    try:
        index.apply(e for e in events if e.type in (_E.LEASE_ACQUIRED, _E.LEASE_RELEASED, _E.LEASE_BLOCKED))
        held = [lease.model_dump(mode="json") for lease in index.leases.values()]
    except _PARSE_ERRORS:
        held = []
    return {"in_force": held, "history": fold.lease_history}


def _interactions(events: Sequence[JournalEvent], now: float) -> list[dict[str, Any]]:
    try:
        found = interactions(e for e in events if e.type in (_E.INTERACTION_REQUESTED, _E.INTERACTION_RESOLVED))
    except _PARSE_ERRORS:
        return []
    out = []
    for i in found.values():
        row = i.view()
        res = i.resolution or {}
        row.update(
            pending=i.pending,
            state="pending" if i.pending else str(res.get("resolution", "")),
            # Past its deadline but not yet marked expired: the engine will record the expiry.
            overdue=i.pending and bool(i.expires_at) and now > i.expires_at,
            expires_in_s=_round(i.expires_at - now) if i.pending and i.expires_at else None,
            allowed=sorted(r.value for r in allowed_resolutions(InteractionKind(i.kind))),
        )
        out.append(row)
    return out


def _activity(status: str, fold: _Fold, pending: list[dict[str, Any]]) -> str:
    """One line: what the mission is doing now, as far as the journal says."""
    if fold.finished is not None:
        return f"finished: {status}"
    if pending:
        return f"waiting for the operator: {pending[0]['kind']} {pending[0]['interaction_id']}"
    live = [a for a in fold.actions.values() if not ActionStatus(a["state"]).terminal]
    if live:
        a = live[-1]
        return f"{a['skill']} {a['action_id']} {a['state']}"
    if fold.done_proposals and (not fold.verdicts or fold.verdicts[-1]["seq"] < fold.done_proposals[-1]["seq"]):
        return "verifying a done proposal"
    if fold.turns:
        return f"model turn {fold.turns[-1]['index']}"
    return "admitted"


# ----------------------------------------------------------------------------- public


def mission_view(events: Sequence[JournalEvent], *, now: float, mission_id: str | None = None) -> dict[str, Any]:
    """Everything an operator needs about one mission, from its journal events (seq order).

    ``events`` are one mission's events (``Journal.events(mission_id=...)``);
    with ``mission_id`` given, other missions' events are ignored. ``now`` is
    the time ages are judged against (the same clock as the journal's stamps).
    Raises ``UnknownMission`` when there are no events of the mission at all.
    """
    if mission_id is not None:
        events = [e for e in events if e.mission_id == mission_id]
    if not events:
        raise UnknownMission(f"no events for mission {mission_id!r}", mission_id=mission_id)
    mission_id = mission_id or events[0].mission_id
    fold = _Fold(now)
    for ev in events:
        fold.feed(ev)
    started, finished = fold.started, fold.finished
    sp = fold.typed(started, MissionStarted)
    fp = fold.typed(finished, MissionFinished)
    config = sp.config
    pose_limit = _num(((config.get("navigation") or {}).get("preconditions") or {}).get("max_observation_age_s"))

    snapshot = None
    if fold.snapshot_event is not None:
        try:
            snapshot = _snapshot_view(fold.snapshot_event, now=now, pose_limit_s=pose_limit)
        except _PARSE_ERRORS as exc:
            fold.unparsed.append({"seq": fold.snapshot_event.seq, "type": fold.snapshot_event.type.value,
                                  "error": f"{type(exc).__name__}: {exc}"})
    interaction_rows = _interactions(events, now)
    pending = [i for i in interaction_rows if i["pending"]]
    status = live_status((fp.status if "status" in fp.model_fields_set else RUNNING) if finished is not None else None,
                         pending_interactions=len(pending))
    for v in fold.verdicts:
        v["commit_id"] = next((c["commit_id"] for c in fold.commits if c["verdict_id"] == v["verdict_id"]), None)
        v["rejected"] = next((g for g in fold.gate_rejections if g["verdict_id"] == v["verdict_id"]), None)
    actions = sorted(fold.actions.values(), key=lambda a: (a["started_at"] is None, a["started_at"] or 0.0))
    for a in actions:
        a["reason"] = a["outcome"]["reason"] if a["outcome"] else (a["states"][-1]["reason"] if a["states"] else "")

    return {
        "kind": "mission_view",
        "format_version": VIEW_FORMAT_VERSION,
        "now": now,
        "mission": {
            "mission_id": mission_id,
            "goal": sp.goal,
            "owner": sp.owner,
            "status": status,
            "finished": finished is not None,
            "activity": _activity(status, fold, pending),
            "started_at": started.stamp if started is not None else None,
            "finished_at": finished.stamp if finished is not None else None,
            "duration_s": _round((finished.stamp if finished is not None else now) - started.stamp)
            if started is not None else None,
            "summary": fp.summary,
            "verdict_id": fp.verdict_id,
            "evidence_ids": list(fp.evidence_ids),
            "bag": fp.bag.model_dump(mode="json", exclude_unset=True) if fp.bag is not None else {},
            "model_usage": fp.model_usage,
            "tools": list(sp.tools),
            "first_seq": events[0].seq,
            "last_seq": events[-1].seq,
            "event_count": len(events),
        },
        "contract": _contract_view(fold),
        "snapshot": snapshot,
        "trajectory": _trajectory(fold, config.get("places") or {}),
        "actions": actions,
        "turns": fold.turns,
        "done_proposals": fold.done_proposals,
        "verdicts": fold.verdicts,
        "commits": fold.commits,
        "gate_rejections": fold.gate_rejections,
        "receipts": fold.receipts,
        "recoveries": fold.recoveries,
        "interactions": interaction_rows,
        "pending_interactions": [i["interaction_id"] for i in pending],
        "leases": _leases(fold, events),
        "stops": fold.stops,
        "journal_tail": render_timeline(events[-_TAIL_EVENTS:], width=140),
        "unparsed": fold.unparsed,
    }


def missions_list(summaries: Iterable[Mapping[str, Any]], *,
                  interaction_events: Iterable[JournalEvent] = ()) -> list[dict[str, Any]]:
    """The mission picker's rows, newest first.

    ``summaries`` are ``Journal.missions()`` rows; ``interaction_events`` the
    journal's INTERACTION_* events (any missions), which give each row its
    count of pending interactions. A mission with no ``MISSION_FINISHED`` is
    ``WAITING_USER`` while it has a pending interaction, else ``RUNNING``.
    """
    pending = pending_interactions(interaction_events)
    rows = []
    for s in summaries:
        mid = str(s["mission_id"])
        rows.append({
            "mission_id": mid,
            "goal": s.get("goal") or "",
            "status": live_status(s.get("status"), pending_interactions=pending.get(mid, 0)),
            "finished": s.get("status") is not None,
            "started_at": s.get("started_at"),
            "finished_at": s.get("finished_at"),
            "summary": s.get("summary") or "",
            "first_seq": s.get("first_seq"),
            "last_seq": s.get("last_seq"),
            "event_count": s.get("event_count"),
            "pending_interactions": pending.get(mid, 0),
        })
    rows.sort(key=lambda r: r["first_seq"] or 0, reverse=True)
    return rows
