"""Human-readable views of journal events: a timeline and flat exports.

``render_timeline`` is for a person asking "what happened in this mission and
why": one line per event (time since the first event, seq, type, a summary
of the payload that matters for that type) and, under it, the ids that tie
the event to a model turn, tool call, robot action or snapshot. A payload of
an unexpected shape never breaks rendering; it is shown as compact JSON.

``export_events`` writes the same columns as the journal's ``events`` table
(JSON Lines through the records adapter, or CSV) for other tools.
"""
from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from .errors import UsageError
from .journal import EVENT_COLUMNS
from .payloads import (
    RecoveryDecided,
    ActionPreconditionChecked,
    BackendEventUncorrelated,
    CommitRecorded,
    ContractFrozen,
    DoneProposed,
    EventPayload,
    FactRecorded,
    GateRejected,
    InteractionRequested,
    InteractionResolved,
    LeaseAcquired,
    LeaseBlocked,
    LeaseReleased,
    MissionFinished,
    MissionRefused,
    MissionStarted,
    ModelResponseRecorded,
    ModelTurnStarted,
    ReceiptRecorded,
    ResponseDropped,
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
from .preconditions import Check
from .records import Availability, EventType, FieldMeta, JournalEvent, to_json

__all__ = ["EXPORT_COLUMNS", "render_timeline", "export_events", "summary_line"]

EXPORT_COLUMNS = EVENT_COLUMNS
"""Column order of the CSV export, identical to the journal's ``events`` table."""

_MIN_WIDTH = 50
_MAX_SUMMARY_LINES = 5
_MIN_SUMMARY_ROOM = 30
_TYPE_WIDTH = max(len(t.value) for t in EventType)
_ID_FIELDS = (
    ("model_turn_id", "turn"),
    ("tool_call_id", "call"),
    ("robot_action_id", "action"),
    ("snapshot_id", "snap"),
)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fit(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."


def _pose(x: float, y: float, yaw: float | None = None) -> str:
    if yaw is None:
        return f"({x:.2f}, {y:.2f})"
    return f"({x:.2f}, {y:.2f}, {math.degrees(yaw):.0f}deg)"


def _meta(label: str, meta: FieldMeta, value: str) -> str:
    if meta.availability is Availability.MISSING:
        return f"{label} MISSING"
    stale = meta.availability is Availability.STALE
    bits = [label, "STALE"] if stale else [label]
    if value:
        bits.append(value)
    if meta.age_s is not None:
        bound = f" > {meta.max_age_s:.2f}s" if stale and meta.max_age_s else ""
        bits.append(f"age {meta.age_s:.2f}s{bound}")
    return " ".join(bits)


# ----------------------------------------------------------------- per-type summaries
# Each takes its event type's payload model and returns one line, or raises
# (KeyError, TypeError, ValueError, ...) when the payload lacks what the line
# is about; the caller then falls back to JSON.


def _given(p: EventPayload, *fields: str) -> None:
    """Raise ``KeyError`` unless the writer wrote every one of ``fields`` (a default is not a summary)."""
    for name in fields:
        if name not in p.model_fields_set:
            raise KeyError(name)


def _mission_started(p: MissionStarted) -> str:
    _given(p, "goal")
    return f"goal: {_compact(p.goal)}"


def _snapshot(p: WorldSnapshotCaptured) -> str:
    s = p.snapshot
    if s is None:
        raise KeyError("snapshot")
    parts = [s.reason]
    pose = _pose(s.pose.x, s.pose.y, s.pose.yaw) if s.pose else ""
    parts.append(_meta("pose", s.pose_meta, pose))
    nav = s.controller_state.value
    if s.distance_remaining is not None:
        nav += f" {s.distance_remaining:.2f}m left"
    parts.append(f"nav {nav}")
    battery = f"{s.battery * 100:.0f}%" if s.battery is not None else ""
    parts.append(_meta("battery", s.battery_meta, battery))
    if s.active_action is not None:
        parts.append(f"active {s.active_action.skill} {s.active_action.state.value}")
    return " | ".join(parts)


def _model_response(p: ModelResponseRecorded) -> str:
    r = p.response
    if r is None:
        raise KeyError("not a model response")
    parts = []
    if r.meta.get("source") == "plan":  # core/planner_script.PLAN_SOURCE: the harness's turn, no model call
        parts.append(f"plan step {r.meta.get('step', '?')}/{r.meta.get('of', '?')} (no model call)")
    if r.tool_calls:
        parts.append(f"{len(r.tool_calls)} tool call(s): " + ", ".join(c.name for c in r.tool_calls))
    if r.done is not None:
        parts.append(f"done: {_compact(r.done)}")
    if r.text:
        parts.append(f"text: {_compact(r.text)}")
    return "; ".join(parts) or "silent (no tool call, no done)"


def _tool_call(p: ToolCallRecorded) -> str:
    _given(p, "name")
    rendered = ", ".join(f"{k}={_compact(v)}" for k, v in p.arguments.items())
    by = "" if p.proposed_by == "planner" else f"[{p.proposed_by}] "
    return f"{by}{p.name}({rendered})"


def _tool_result(p: ToolResultRecorded) -> str:
    if p.status is None:
        raise KeyError("status")
    status = p.status.value
    out = f"{p.name} -> {status}" if p.name else f"-> {status}"
    err = p.error
    if isinstance(err, Mapping):
        code = err.get("error") or err.get("code") or ""
        msg = err.get("message") or ""
        out += f": {code} {_compact(msg) if msg else ''}".rstrip()
    elif err:
        out += f": {_compact(err)}"
    content = p.content if isinstance(p.content, Mapping) else {}
    if content.get("code") == "plan_refused" and isinstance(content.get("diagnostics"), list):
        # the plan gate's typed diagnostics, one per line (core/plan_gate.py)
        out += ": plan_refused" + "".join(
            f"\n{d.get('code')} (step {d.get('step')}{', ' + str(d['obligation']) if d.get('obligation') else ''}): "
            f"{d.get('message', '')}" for d in content["diagnostics"] if isinstance(d, Mapping))
    elif content.get("plan") == "accepted":
        out += f": plan of {content.get('steps')} steps accepted"
    return out


def _preconditions(p: ActionPreconditionChecked) -> str:
    _given(p, "checks")
    checks = list(p.checks)
    passed = [c for c in checks if c.ok]
    failed = [c for c in checks if not c.ok]

    def named(c: Check) -> str:
        return f"{c.name} ({_one_line(c.detail)})" if c.detail else c.name

    head = f"{'ok' if p.ok else 'REFUSED'} {len(passed)}/{len(checks)} passed"
    if failed:
        return f"{head}; failed: " + ", ".join(named(c) for c in failed)
    return f"{head}: " + ", ".join(c.name for c in passed) if passed else head


def _action_started(p: RobotActionStarted) -> str:
    a = p.action
    _given(a, "skill")
    out = a.skill
    if a.target is not None:
        out += f" target {_pose(a.target.x, a.target.y, a.target.yaw)}"
    if p.intent is not None and p.intent.provider:
        out += f" via {p.intent.provider}" + (f" ({p.intent.routing['reason']})" if p.intent.routing else "")
    return out


def _recovery_decided(p: RecoveryDecided) -> str:
    f, d = p.failure, p.decision
    out = f"{f.failure_kind.value}"
    if f.provider:
        out += f" on {f.provider}"
    out += f" -> {d.rung.value}" + (" (escalated)" if d.escalated else "")
    if f.providers:
        out += f"; other providers: {', '.join(f.providers)}"
    return out + (f" | {_compact(f.reason)}" if f.reason else "")


def _state_changed(p: RobotActionStateChanged) -> str:
    if p.from_ is None:
        raise KeyError("from")
    out = f"{p.from_.value} -> {p.to.value}"
    return f"{out} ({p.reason})" if p.reason else out


def _outcome(p: RobotActionOutcome) -> str:
    return f"{p.state.value}: {p.reason}" if p.reason else p.state.value


def _mission_finished(p: MissionFinished) -> str:
    _given(p, "status")
    return f"{p.status}: {p.summary}" if p.summary else p.status


def _turn_started(p: ModelTurnStarted) -> str:
    if p.turn_index is None:
        raise KeyError("turn_index")
    return f"turn {p.turn_index} | context {p.context_bytes if p.context_bytes is not None else '?'} bytes"


def _progress(p: RobotActionProgress) -> str:
    reached = p.waypoint_reached
    if isinstance(reached, Mapping):
        name = reached.get("place") or "waypoint"
        return f"waypoint {name} (#{int(reached.get('index', 0)) + 1}) reached: seen in {reached.get('snapshot_id', '?')}"
    d = p.distance_remaining
    return "distance remaining " + (f"{d:.2f} m" if d is not None else "n/a")


def _delivered(p: RuntimeEventDelivered) -> str:
    return f"{p.type}: {p.state} {p.detail.get('reason', '')}".strip()


def _uncorrelated(p: BackendEventUncorrelated) -> str:
    return f"goal {p.goal_id[:12]} {p.status or p.type}: not ours, ignored"


def _contract(p: ContractFrozen) -> str:
    if p.error:
        return f"no contract: {p.error.get('message', p.error)}"
    c = p.contract
    if c is None:
        raise KeyError("contract")
    parts = [f"contract {c.contract_id} rev {c.revision} ({c.compiler})"]
    for o in c.obligations:
        deps = f" after {','.join(o.depends_on)}" if o.depends_on else ""
        parts.append(f"{o.id} {o.kind.value}: {o.description}{deps}")
    cov = c.coverage
    if cov:
        parts.append("coverage ok" if cov.ok else "coverage MISSING: " + "; ".join(cov.uncovered))
    return " | ".join(parts)


def _receipt(p: ReceiptRecorded) -> str:
    r = p.receipt
    ev = ", ".join(e.id for e in r.evidence)
    return f"{r.receipt_id} {r.skill} {r.status.value} | v{r.state_version} rev {r.contract_revision}" + \
        (f" | evidence {ev}" if ev else "")


def _done_proposed(p: DoneProposed) -> str:
    return f"planner proposes done (a request, not evidence): {p.text!r}"


def _verdict(p: VerdictRecorded) -> str:
    v = p.verdict
    parts = [f"{v.verdict_id} {v.goal_verdict.value.upper()} | contract rev {v.contract_revision} v{v.state_version}"]
    for st in v.steps:
        parts.append(f"{st.obligation_id} {st.verdict.value} [{st.layer}] {st.reason}")
    if v.evidence_ids:
        parts.append("evidence " + ", ".join(v.evidence_ids))
    return " | ".join(parts)


def _commit(p: CommitRecorded) -> str:
    c = p.commit
    return (f"{c.commit_id} accepts {c.verdict_id} | state v{c.state_version_before} -> "
            f"v{c.state_version_after} | committed {', '.join(c.obligations)}")


def _gate_rejected(p: GateRejected) -> str:
    return f"gate refused {p.verdict_id if 'verdict_id' in p.model_fields_set else '?'}: {p.message}"


def _fact(p: FactRecorded) -> str:
    f = p.fact
    sup = f" supersedes {f.supersedes}" if f.supersedes else ""
    return f"{f.status.value} {f.key}{sup}"


def _lease(p: LeaseAcquired | LeaseReleased | LeaseBlocked) -> str:
    why = p.why if isinstance(p, LeaseReleased) else p.reason if isinstance(p, LeaseBlocked) else ""
    operator = p.operator if isinstance(p, LeaseReleased) else ""
    return f"{p.resource} owner {p.owner}" + (f" | {why}" if why else "") + (f" | by {operator}" if operator else "")


def _reconciled(p: RobotActionReconciled) -> str:
    status = f" (backend: {p.backend_status})" if p.backend_status else ""
    state = f" -> action {p.action_state}" if p.action_state else ""
    finding = p.finding if "finding" in p.model_fields_set else "?"
    return f"{finding}{status}{state} | {p.detail}"


def _stop(p: StopRequested) -> str:
    return f"stop from {p.source if 'source' in p.model_fields_set else '?'}: {p.reason}"


def _refused(p: MissionRefused) -> str:
    code = p.code if "code" in p.model_fields_set else "?"
    source = p.source if "source" in p.model_fields_set else "?"
    return f"refused ({code}) from {source}: {p.reason}"


def _dropped(p: ResponseDropped) -> str:
    return (f"dropped a {p.call or 'response'} from {p.service or '?'} for mission {p.received_mission_id or '?'} "
            f"request {p.received_request_id or '?'} (asked: {p.expected_mission_id} {p.expected_request_id}); {p.note}")


def _resolved(p: InteractionResolved) -> str:
    said = p.answer or p.choice
    return f"{p.interaction_id} {p.resolution}" + (f" {said!r}" if said else "") + f" by {p.operator or '?'}"


def _requested(p: InteractionRequested) -> str:
    _given(p, "kind")
    return f"{p.interaction_id} {p.kind} asked of {p.owner or 'the owner'}: {p.prompt}"


_SUMMARIES: dict[EventType, Callable[[Any], str]] = {
    EventType.LEASE_ACQUIRED: _lease,
    EventType.LEASE_RELEASED: _lease,
    EventType.LEASE_BLOCKED: _lease,
    EventType.ROBOT_ACTION_RECONCILED: _reconciled,
    EventType.STOP_REQUESTED: _stop,
    EventType.MISSION_REFUSED: _refused,
    EventType.RESPONSE_DROPPED: _dropped,
    EventType.INTERACTION_REQUESTED: _requested,
    EventType.INTERACTION_RESOLVED: _resolved,
    EventType.CONTRACT_FROZEN: _contract,
    EventType.RECEIPT_RECORDED: _receipt,
    EventType.DONE_PROPOSED: _done_proposed,
    EventType.VERDICT_RECORDED: _verdict,
    EventType.COMMIT_RECORDED: _commit,
    EventType.GATE_REJECTED: _gate_rejected,
    EventType.FACT_RECORDED: _fact,
    EventType.MODEL_TURN_STARTED: _turn_started,
    EventType.ROBOT_ACTION_PROGRESS: _progress,
    EventType.RUNTIME_EVENT_DELIVERED: _delivered,
    EventType.BACKEND_EVENT_UNCORRELATED: _uncorrelated,
    EventType.MISSION_STARTED: _mission_started,
    EventType.WORLD_SNAPSHOT_CAPTURED: _snapshot,
    EventType.MODEL_RESPONSE_RECORDED: _model_response,
    EventType.TOOL_CALL_RECORDED: _tool_call,
    EventType.TOOL_RESULT_RECORDED: _tool_result,
    EventType.ACTION_PRECONDITION_CHECKED: _preconditions,
    EventType.ROBOT_ACTION_STARTED: _action_started,
    EventType.RECOVERY_DECIDED: _recovery_decided,
    EventType.ROBOT_ACTION_STATE_CHANGED: _state_changed,
    EventType.ROBOT_ACTION_OUTCOME: _outcome,
    EventType.MISSION_FINISHED: _mission_finished,
}


def summary_line(ev: JournalEvent) -> tuple[str, bool]:
    """The summary and whether it came from a known shape (wrapped, not cut)."""
    fn = _SUMMARIES.get(ev.type)
    if fn is not None:
        try:
            return _one_line(fn(payload_of(ev))), True
        except Exception:  # any surprise in the payload's shape: show it raw
            pass
    return (_compact(ev.payload) if ev.payload else ""), False


def _wrap(summary: str, room: int) -> list[str]:
    """Wrap at `` | `` between summary parts where possible, inside a part only if it must."""
    lines: list[str] = []
    for part in summary.split(" | "):
        if lines and len(lines[-1]) + 3 + len(part) <= room:
            lines[-1] += " | " + part
        else:
            lines.extend(textwrap.wrap(part, room) or [""])
    return lines or [""]


# ----------------------------------------------------------------- public


def _collapse_progress(events: Sequence[JournalEvent]) -> list[JournalEvent | tuple[int, float]]:
    """Keep the first and last of each run of progress events; the rest become a count."""
    out: list[JournalEvent | tuple[int, float]] = []
    i = 0
    while i < len(events):
        j = i
        while j < len(events) and events[j].type is EventType.ROBOT_ACTION_PROGRESS \
                and payload_of(events[j], RobotActionProgress).waypoint_reached is None:  # evidence: never folded
            j += 1
        if j - i > 2:
            out += [events[i], (j - i - 2, events[j - 1].stamp - events[i].stamp), events[j - 1]]
            i = j
        else:
            out.append(events[i])
            i += 1
    return out


def render_timeline(events: Sequence[JournalEvent], *, width: int = 100, collapse_progress: bool = True) -> str:
    """A readable timeline: a header, then one line per event and an id line under it.

    Times are seconds since the first event. No line is longer than ``width``
    (at least 50): summaries of known payloads wrap onto up to five lines,
    raw JSON fallbacks are cut, and anything cut ends in ``...``. When the events span several
    missions, each event's mission id is shown with its other ids.
    """
    width = max(int(width), _MIN_WIDTH)
    if not events:
        return "(no events)\n"
    t0 = events[0].stamp
    missions = list(dict.fromkeys(e.mission_id for e in events if e.mission_id))
    started = _dt.datetime.fromtimestamp(t0, tz=_dt.timezone.utc).isoformat(timespec="milliseconds")
    header = " | ".join(
        [
            ("mission " if len(missions) == 1 else "missions ") + (", ".join(missions) or "(none)"),
            f"{len(events)} events",
            f"seq {events[0].seq}..{events[-1].seq}",
            f"{events[-1].stamp - t0:.3f}s from {started.replace('+00:00', 'Z')}",
        ]
    )
    lines = [_fit(header, width)]
    indent = " " * (10 + 1 + 5 + 2)
    for ev in (_collapse_progress(events) if collapse_progress else events):
        if isinstance(ev, tuple):
            lines.append(_fit(f"{'':>10} {'':>5}  ... {ev[0]} more progress updates over {ev[1]:.1f}s", width))
            continue
        prefix = f"{'+%.3fs' % (ev.stamp - t0):>10} {ev.seq:>5}  {ev.type.value:<{_TYPE_WIDTH}}  "
        summary, known = summary_line(ev)
        # Narrow terminals: the summary moves under the type instead of being squeezed.
        narrow = width - len(prefix) < _MIN_SUMMARY_ROOM
        column = len(indent) if narrow else len(prefix)
        chunks = [summary]
        if known:
            chunks = _wrap(summary, width - column)
            if len(chunks) > _MAX_SUMMARY_LINES:
                chunks = chunks[:_MAX_SUMMARY_LINES]
                chunks[-1] += "..."
        if narrow:
            lines.append(prefix.rstrip())
            chunks = [c for c in chunks if c]
        else:
            lines.append(_fit((prefix + chunks.pop(0)).rstrip(), width))
        lines.extend(_fit(" " * column + c, width) for c in chunks)
        ids = [f"{label}={getattr(ev, attr)}" for attr, label in _ID_FIELDS if getattr(ev, attr)]
        if len(missions) > 1 and ev.mission_id:
            ids.insert(0, f"mission={ev.mission_id}")
        if ids:
            lines.append(_fit(indent + " ".join(ids), width))
    return "\n".join(lines) + "\n"


def export_events(events: Sequence[JournalEvent], fmt: Literal["jsonl", "csv"]) -> str:
    """Events as JSON Lines (each line parses back with ``records.from_json``) or
    CSV (``EXPORT_COLUMNS``, payload as compact JSON, stamps at full precision)."""
    if fmt == "jsonl":
        return "".join(to_json(ev) + "\n" for ev in events)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(EXPORT_COLUMNS)
        for ev in events:
            writer.writerow(
                [
                    ev.seq,
                    ev.event_id,
                    ev.format_version,
                    ev.type.value,
                    repr(ev.stamp),
                    ev.mission_id,
                    ev.model_turn_id,
                    ev.tool_call_id,
                    ev.robot_action_id,
                    ev.snapshot_id,
                    _compact(ev.payload),
                    ev.robot_id,
                ]
            )
        return buf.getvalue()
    raise UsageError(f"unknown export format {fmt!r}; use 'jsonl' or 'csv'", fmt=fmt)
