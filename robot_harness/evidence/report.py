"""A mission report for a person: one self-contained HTML file from the journal.

What it shows, all from the journal (the source of truth): the goal and the
final status; the frozen contract with each obligation's last verdict and the
evidence it cited; a plot of the robot's trajectory over the named places;
the action timeline with lifecycle states; the model's turns and tool calls;
and the images cited as evidence, embedded with their sha256 (re-hashed now:
a missing or changed image is marked, never shown as if it were fine).
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..core.errors import UsageError
from ..core.journal import Journal
from ..core.mission_view import mission_view
from ..core.records import EventType, JournalEvent

__all__ = ["render_report"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;font-size:.9rem}td,th{border:1px solid #ddd;padding:.3rem .5rem;
vertical-align:top;text-align:left}th{background:#f4f4f4}.SUCCEEDED,.satisfied,.verified_done{color:#17702b;
font-weight:600}.FAILED,.violated{color:#b3261e;font-weight:600}.UNKNOWN,.ambiguous,.continue,.BLOCKED,
.WAITING_USER,.CANCELLED,.unsafe{color:#a05a00;font-weight:600}code{font-size:.85em}.bad{color:#b3261e}
td code{word-break:break-all}figure{margin:0}img.evidence{image-rendering:pixelated;width:192px;border:1px solid #ccc}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _span(value: str) -> str:
    return f'<span class="{_e(value)}">{_e(value)}</span>'


def _trajectory_png(poses: list[tuple[float, float, float]], places: dict[str, dict[str, float]]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    if poses:
        xs, ys = [p[1] for p in poses], [p[2] for p in poses]
        ax.plot(xs, ys, "-", color="#1f77b4", lw=1.5, label="robot (journaled snapshots)")
        ax.plot(xs[0], ys[0], "o", color="#1f77b4")
        ax.plot(xs[-1], ys[-1], "s", color="#1f77b4")
    for name, p in places.items():
        ax.plot(p["x"], p["y"], "^", color="#d62728")
        ax.annotate(name, (p["x"], p["y"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x (m, map)")
    ax.set_ylabel("y (m, map)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _image(uri: str, sha256: str, artifacts_dir: Path | None) -> str:
    path = Path(unquote(urlparse(uri).path)) if uri.startswith("file:") else Path(uri)
    if artifacts_dir is not None:
        path = artifacts_dir / path.name
    try:
        data = path.read_bytes()
    except OSError:
        return f'<p class="bad">missing: {_e(uri)} (sha256 {_e(sha256)})</p>'
    digest = hashlib.sha256(data).hexdigest()
    note = "sha256 matches" if digest == sha256 else f'<span class="bad">CHANGED: file has {digest}</span>'
    mime = "image/png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "image/jpeg" if data[:2] == b"\xff\xd8" else ""
    img = (f'<img class="evidence" alt="{_e(path.name)}" src="data:{mime};base64,{base64.b64encode(data).decode()}">'
           if mime else "<p>(not an image a browser shows)</p>")
    return f"<figure>{img}<figcaption><code>{_e(path.name)}</code><br>sha256 <code>{_e(sha256)}</code> - {note}" \
           "</figcaption></figure>"


def render_report(journal: Journal, mission_id: str, *, artifacts_dir: str | Path | None = None) -> str:
    events = journal.events(mission_id=mission_id)
    if not any(e.type is EventType.MISSION_STARTED for e in events):
        raise UsageError(f"no mission {mission_id!r} in the journal", mission_id=mission_id)
    # The same reading of the journal the live dashboard shows (core/mission_view.py).
    view = mission_view(events, now=events[-1].stamp, mission_id=mission_id)
    mission = view["mission"]
    arts = Path(artifacts_dir) if artifacts_dir is not None else None
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Mission {_e(mission_id)}</title>"
             f"<style>{_CSS}</style></head><body>",
             f"<h1>Mission <code>{_e(mission_id)}</code>: {_span(mission['status'])}</h1>",
             f"<p><b>Goal:</b> {_e(mission['goal'])}</p>"]
    if mission["finished"]:
        parts.append(f"<p><b>Summary:</b> {_e(mission['summary'])}</p>")
    parts += _contract_section(view)
    parts += _trajectory_section(view)
    parts += _timeline_section(view, t0=events[0].stamp)
    parts += _model_section(view)
    parts += _evidence_images(events, arts)
    parts.append(f"<p><small>From the journal, {len(events)} events (seq {events[0].seq}-{events[-1].seq}).</small></p>"
                 "</body></html>")
    return "\n".join(parts)


def _contract_section(view: dict[str, Any]) -> list[str]:
    contract = view["contract"]
    if contract is None or not contract.get("obligations"):
        return ["<h2>Contract</h2><p>No contract was frozen.</p>"]
    last = view["verdicts"][-1] if view["verdicts"] else None
    committed = bool(view["commits"])
    rows = ["<h2>Contract and verdict</h2>",
            f"<p>Contract <code>{_e(contract['contract_id'])}</code> rev {_e(contract['revision'])} "
            f"({_e(contract['compiler'])} compiler). "
            + (f"Last verdict <code>{_e(last['verdict_id'])}</code>: {_span(last['goal_verdict'])}"
               f"{' - committed by the gate' if committed else ''}." if last else "No done proposal was verified.")
            + "</p>",
            "<table><tr><th>obligation</th><th>what</th><th>verdict</th><th>why</th><th>evidence</th></tr>"]
    for ob in contract["obligations"]:
        judged = ob.get("verdict_id")
        rows.append(f"<tr><td>{_e(ob['id'])}</td><td>{_e(ob['description'])}</td>"
                    f"<td>{_span(ob['state'] if judged else '-')}</td><td>{_e(ob.get('reason') or '')}</td>"
                    f"<td><code>{_e(', '.join(ob.get('evidence_ids') or []))}</code></td></tr>")
    rows.append("</table>")
    return rows


def _trajectory_section(view: dict[str, Any]) -> list[str]:
    trajectory = view["trajectory"]
    poses = [(p["t"], p["x"], p["y"]) for p in trajectory["points"] if p["source"] == "snapshot"]
    png = _trajectory_png(sorted(poses), trajectory["places"])
    return ["<h2>Trajectory</h2>",
            f'<img alt="trajectory" src="data:image/png;base64,{base64.b64encode(png).decode()}">',
            f"<p><small>{len(poses)} distinct fresh pose observations from the journal's snapshots, over the named "
            "places.</small></p>"]


def _timeline_section(view: dict[str, Any], *, t0: float) -> list[str]:
    rows = ["<h2>Actions</h2><table><tr><th>t (s)</th><th>action</th><th>transition</th><th>reason</th></tr>"]
    changes = sorted(((st["seq"], st, a) for a in view["actions"] for st in a["states"]), key=lambda c: c[0])
    last_state: dict[str, str] = {}
    for _, st, a in changes:
        before = last_state.get(a["action_id"])
        last_state[a["action_id"]] = st["state"]
        if before is None:
            what, why = "REQUESTED", f"to {json.dumps(a.get('target') or {})}"
        else:
            what, why = f"{_e(before)} &rarr; {_span(st['state'])}", st.get("reason") or ""
        rows.append(f"<tr><td>{st['at'] - t0:.2f}</td><td><code>{_e(a['action_id'])}</code></td>"
                    f"<td>{what}</td><td>{_e(why)}</td></tr>")
    rows.append("</table>")
    return rows


def _model_section(view: dict[str, Any]) -> list[str]:
    rows = ["<h2>Model turns and tool calls</h2><table><tr><th>turn</th><th>the model</th><th>results</th></tr>"]
    for turn, t in enumerate(tt for tt in view["turns"] if tt.get("response") is not None):
        r = t["response"]
        calls = t.get("tool_calls") or []
        said = [f"<code>{_e(c['name'])}({_e(json.dumps(c.get('arguments', {})))})</code>" for c in calls]
        if r.get("done"):
            said.append(f"done: <i>{_e(r['done'])}</i>")
        if r.get("text"):
            said.append(f"<i>{_e(r['text'])}</i>")
        got = [f"{_e(c['name'])}: {_span(str((c.get('result') or {}).get('status', '-')))}" for c in calls]
        rows.append(f"<tr><td>{turn}</td><td>{'<br>'.join(said) or '(nothing)'}</td><td>{'<br>'.join(got)}</td></tr>")
    rows.append("</table>")
    return rows


def _evidence_images(events: list[JournalEvent], artifacts_dir: Path | None) -> list[str]:
    seen: dict[str, str] = {}
    for e in events:
        if e.type is EventType.RECEIPT_RECORDED:
            for ev in (e.payload.get("receipt") or {}).get("evidence", []):
                if ev.get("kind") == "artifact" and ev.get("uri") and ev.get("sha256"):
                    seen.setdefault(ev["uri"], ev["sha256"])
    if not seen:
        return []
    return ["<h2>Images cited as evidence</h2>", *(_image(u, h, artifacts_dir) for u, h in seen.items())]
