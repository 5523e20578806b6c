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
from .records import Availability, EventType, FieldMeta, JournalEvent, WorldSnapshot, to_json

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
# Each returns one line, or raises (KeyError, TypeError, ValueError, ...) when
# the payload is not the shape it knows; the caller then falls back to JSON.


def _mission_started(p: Mapping[str, Any]) -> str:
    return f"goal: {_compact(p['goal'])}"


def _snapshot(p: Mapping[str, Any]) -> str:
    s = WorldSnapshot.model_validate(p["snapshot"])
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


def _model_response(p: Mapping[str, Any]) -> str:
    r = p.get("response", p)
    if not any(k in r for k in ("tool_calls", "done", "text")):
        raise KeyError("not a model response")
    parts = []
    calls = r.get("tool_calls") or []
    if calls:
        parts.append(f"{len(calls)} tool call(s): " + ", ".join(str(c["name"]) for c in calls))
    if r.get("done") is not None:
        parts.append(f"done: {_compact(r['done'])}")
    if r.get("text"):
        parts.append(f"text: {_compact(r['text'])}")
    return "; ".join(parts) or "silent (no tool call, no done)"


def _tool_call(p: Mapping[str, Any]) -> str:
    call = p.get("tool_call") or p.get("call") or p
    args = call.get("arguments") or {}
    rendered = ", ".join(f"{k}={_compact(v)}" for k, v in args.items())
    return f"{call['name']}({rendered})"


def _tool_result(p: Mapping[str, Any]) -> str:
    r = p.get("result") or p
    status = r["status"]
    out = f"{r['name']} -> {status}" if r.get("name") else f"-> {status}"
    err = r.get("error")
    if isinstance(err, Mapping):
        code = err.get("error") or err.get("code") or ""
        msg = err.get("message") or ""
        out += f": {code} {_compact(msg) if msg else ''}".rstrip()
    elif err:
        out += f": {_compact(err)}"
    return out


def _preconditions(p: Mapping[str, Any]) -> str:
    ok = bool(p["ok"])
    checks = list(p["checks"])
    passed = [c for c in checks if c["ok"]]
    failed = [c for c in checks if not c["ok"]]

    def named(c: Mapping[str, Any]) -> str:
        detail = c.get("detail")
        return f"{c['name']} ({_one_line(detail)})" if detail else str(c["name"])

    head = f"{'ok' if ok else 'REFUSED'} {len(passed)}/{len(checks)} passed"
    if failed:
        return f"{head}; failed: " + ", ".join(named(c) for c in failed)
    return f"{head}: " + ", ".join(str(c["name"]) for c in passed) if passed else head


def _action_started(p: Mapping[str, Any]) -> str:
    a = p.get("action") or p
    out = str(a["skill"])
    t = a.get("target")
    if isinstance(t, Mapping):
        out += f" target {_pose(t['x'], t['y'], t.get('yaw'))}"
    return out


def _state_changed(p: Mapping[str, Any]) -> str:
    out = f"{p['from']} -> {p['to']}"
    return f"{out} ({p['reason']})" if p.get("reason") else out


def _outcome(p: Mapping[str, Any]) -> str:
    return f"{p['state']}: {p['reason']}" if p.get("reason") else str(p["state"])


def _mission_finished(p: Mapping[str, Any]) -> str:
    return f"{p['status']}: {p['summary']}" if p.get("summary") else str(p["status"])


def _turn_started(p: Mapping[str, Any]) -> str:
    return f"turn {p['turn_index']} | context {p.get('context_bytes', '?')} bytes"


def _progress(p: Mapping[str, Any]) -> str:
    d = p.get("distance_remaining")
    return "distance remaining " + (f"{d:.2f} m" if isinstance(d, (int, float)) else "n/a")


def _delivered(p: Mapping[str, Any]) -> str:
    return f"{p.get('type', 'runtime_event')}: {p.get('state', '')} {(p.get('detail') or {}).get('reason', '')}".strip()


def _uncorrelated(p: Mapping[str, Any]) -> str:
    return f"goal {str(p.get('goal_id', ''))[:12]} {p.get('status') or p.get('type', '')}: not ours, ignored"


def _contract(p: Mapping[str, Any]) -> str:
    if p.get("error"):
        return f"no contract: {p['error'].get('message', p['error'])}"
    c = p["contract"]
    parts = [f"contract {c['contract_id']} rev {c['revision']} ({c['compiler']})"]
    for o in c["obligations"]:
        deps = f" after {','.join(o['depends_on'])}" if o.get("depends_on") else ""
        parts.append(f"{o['id']} {o['kind']}: {o['description']}{deps}")
    cov = c.get("coverage")
    if cov:
        parts.append("coverage ok" if cov["ok"] else "coverage MISSING: " + "; ".join(cov.get("uncovered", [])))
    return " | ".join(parts)


def _receipt(p: Mapping[str, Any]) -> str:
    r = p["receipt"]
    ev = ", ".join(e["id"] for e in r.get("evidence", []))
    return f"{r['receipt_id']} {r['skill']} {r['status']} | v{r['state_version']} rev {r['contract_revision']}" +         (f" | evidence {ev}" if ev else "")


def _done_proposed(p: Mapping[str, Any]) -> str:
    return f"planner proposes done (a request, not evidence): {p.get('text', '')!r}"


def _verdict(p: Mapping[str, Any]) -> str:
    v = p["verdict"]
    parts = [f"{v['verdict_id']} {v['goal_verdict'].upper()} | contract rev {v['contract_revision']} v{v['state_version']}"]
    for st in v["steps"]:
        parts.append(f"{st['obligation_id']} {st['verdict']} [{st['layer']}] {st['reason']}")
    if v.get("evidence_ids"):
        parts.append("evidence " + ", ".join(v["evidence_ids"]))
    return " | ".join(parts)


def _commit(p: Mapping[str, Any]) -> str:
    c = p["commit"]
    return (f"{c['commit_id']} accepts {c['verdict_id']} | state v{c['state_version_before']} -> "
            f"v{c['state_version_after']} | committed {', '.join(c['obligations'])}")


def _gate_rejected(p: Mapping[str, Any]) -> str:
    return f"gate refused {p.get('verdict_id', '?')}: {p.get('message', '')}"


def _fact(p: Mapping[str, Any]) -> str:
    f = p["fact"]
    sup = f" supersedes {f['supersedes']}" if f.get("supersedes") else ""
    return f"{f['status']} {f['key']}{sup}"


def _lease(p: Mapping[str, Any]) -> str:
    why = p.get("why") or p.get("reason") or ""
    return f"{p['resource']} owner {p['owner']}" + (f" | {why}" if why else "") + \
        (f" | by {p['operator']}" if p.get("operator") else "")


def _reconciled(p: Mapping[str, Any]) -> str:
    status = f" (backend: {p['backend_status']})" if p.get("backend_status") else ""
    state = f" -> action {p['action_state']}" if p.get("action_state") else ""
    return f"{p.get('finding', '?')}{status}{state} | {p.get('detail', '')}"


def _stop(p: Mapping[str, Any]) -> str:
    return f"stop from {p.get('source', '?')}: {p.get('reason', '')}"


def _refused(p: Mapping[str, Any]) -> str:
    return f"refused ({p.get('code', '?')}) from {p.get('source', '?')}: {p.get('reason', '')}"


def _interaction(p: Mapping[str, Any]) -> str:
    if "resolution" in p:
        said = p.get("answer") or p.get("choice")
        return f"{p['interaction_id']} {p['resolution']}" + (f" {said!r}" if said else "") + \
            f" by {p.get('operator') or '?'}"
    return f"{p['interaction_id']} {p['kind']} asked of {p.get('owner') or 'the owner'}: {p.get('prompt', '')}"


_SUMMARIES: dict[EventType, Callable[[Mapping[str, Any]], str]] = {
    EventType.LEASE_ACQUIRED: _lease,
    EventType.LEASE_RELEASED: _lease,
    EventType.LEASE_BLOCKED: _lease,
    EventType.ROBOT_ACTION_RECONCILED: _reconciled,
    EventType.STOP_REQUESTED: _stop,
    EventType.MISSION_REFUSED: _refused,
    EventType.INTERACTION_REQUESTED: _interaction,
    EventType.INTERACTION_RESOLVED: _interaction,
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
    EventType.ROBOT_ACTION_STATE_CHANGED: _state_changed,
    EventType.ROBOT_ACTION_OUTCOME: _outcome,
    EventType.MISSION_FINISHED: _mission_finished,
}


def summary_line(ev: JournalEvent) -> tuple[str, bool]:
    """The summary and whether it came from a known shape (wrapped, not cut)."""
    fn = _SUMMARIES.get(ev.type)
    if fn is not None:
        try:
            return _one_line(fn(ev.payload)), True
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
        while j < len(events) and events[j].type is EventType.ROBOT_ACTION_PROGRESS:
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
                ]
            )
        return buf.getvalue()
    raise UsageError(f"unknown export format {fmt!r}; use 'jsonl' or 'csv'", fmt=fmt)
