"""A mission report for a person: one self-contained HTML file from the journal.

What it shows, all from the journal (the source of truth): the goal and the
final status; the frozen contract with each obligation's last verdict and the
evidence it cited; a plot of the robot's trajectory over the named places;
the action timeline with lifecycle states; the model's turns and tool calls;
and the images cited as evidence, embedded with their sha256 (re-hashed now:
a missing or changed image is marked, never shown as if it were fine).

The trajectory is the path the mission bag recorded on the robot's pose topic
(``/amcl_pose``, downsampled to at most ``_PATH_MAX_POINTS``) when the bag is
at hand, with the journal's snapshot poses marked on it; without a bag (or a
pose topic in it) the journal's snapshot poses alone, joined by straight lines.
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

from ..core.errors import HarnessError, UsageError
from ..core.journal import Journal
from ..core.mission_view import mission_view
from ..core.payloads import MissionFinished, ReceiptRecorded, payload_of
from ..core.records import EventType, JournalEvent

__all__ = ["render_report"]

_PATH_MAX_POINTS = 2000
_POSE_TOPIC = "/amcl_pose"
_PATH_TYPES = ("geometry_msgs/msg/PoseWithCovarianceStamped", "geometry_msgs/msg/PoseStamped", "nav_msgs/msg/Odometry")

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


def _trajectory_png(poses: list[tuple[float, float, float]], places: dict[str, dict[str, float]], *,
                    path: list[tuple[float, float, float]] | None = None, path_label: str = "") -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    if path:
        xs, ys = [p[1] for p in path], [p[2] for p in path]
        ax.plot(xs, ys, "-", color="#1f77b4", lw=1.5, label=path_label)
        ax.plot(xs[0], ys[0], "o", color="#1f77b4")
        ax.plot(xs[-1], ys[-1], "s", color="#1f77b4")
        if poses:
            ax.plot([p[1] for p in poses], [p[2] for p in poses], ".", color="#ff7f0e", ms=7, zorder=3,
                    label="journaled snapshots")
    elif poses:
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
    if ax.get_legend_handles_labels()[0]:  # nothing labelled (no poses at all): no empty legend
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _find_bag(journal: Journal, events: list[JournalEvent], mission_id: str) -> Path | None:
    """The mission's bag: where its end record says it was written, else ``bags/<mission>/`` beside the journal."""
    finished = next((e for e in reversed(events) if e.type is EventType.MISSION_FINISHED), None)
    bag = payload_of(finished, MissionFinished).bag if finished is not None else None
    recorded = bag.path if bag is not None else ""
    if recorded and Path(recorded).is_file():
        return Path(recorded)
    path = getattr(journal, "path", None)
    beside = Path(path).parent / "bags" / mission_id if path else None
    return beside if beside is not None and beside.is_dir() else None


def _recorded_path(bag: Path, topic: str) -> tuple[list[tuple[float, float, float]], int]:
    """``(t, x, y)`` of the poses ``topic`` carries in ``bag`` (evenly downsampled, ends kept), and their count."""
    from .bag import BagFormatError, read_bag_decoded

    points: list[tuple[float, float, float]] = []
    for m, msg in read_bag_decoded(bag, topics=[topic]):
        if m.type_name not in _PATH_TYPES:
            raise BagFormatError(f"{topic} carries {m.type_name}, not one of {list(_PATH_TYPES)}", topic=topic,
                                 type_name=m.type_name)
        pose = msg.pose.pose if hasattr(msg.pose, "pose") else msg.pose  # with or without covariance
        points.append((msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9, pose.position.x, pose.position.y))
    points.sort()
    total = len(points)
    if total > _PATH_MAX_POINTS:
        step = total / _PATH_MAX_POINTS
        points = [points[int(i * step)] for i in range(_PATH_MAX_POINTS - 1)] + [points[-1]]
    return points, total


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


def _pose_source(events: list[Any]) -> str:
    """The topic the mission's snapshots took their pose from (the most common; a TF source is no topic)."""
    from collections import Counter

    from ..core.payloads import WorldSnapshotCaptured, payload_of

    seen: Counter[str] = Counter()
    for e in events:
        if e.type is EventType.WORLD_SNAPSHOT_CAPTURED:
            snapshot = payload_of(e, WorldSnapshotCaptured).snapshot
            source = snapshot.pose_meta.source if snapshot is not None else ""
            if source.startswith("/"):
                seen[source] += 1
    return seen.most_common(1)[0][0] if seen else _POSE_TOPIC


def render_report(journal: Journal, mission_id: str, *, artifacts_dir: str | Path | None = None,
                  bag: str | Path | None = None, pose_topic: str | None = None) -> str:
    """The report page (``pose_topic``: the bag topic plotted; by default the one the mission's snapshots
    took their pose from, so a graph under a namespace plots ``/robot1/amcl_pose``, else ``/amcl_pose``). ``bag`` (the mission's bag folder or ``.mcap``; found by itself when the
    journal's end record or a ``bags/`` folder beside the journal points to it) gives the plotted
    path; a bag that cannot be read is said on the page, and the journal's poses are plotted instead."""
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
    parts += _trajectory_section(view, Path(bag) if bag is not None else _find_bag(journal, events, mission_id),
                                 pose_topic or _pose_source(events))
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


def _trajectory_section(view: dict[str, Any], bag: Path | None, topic: str) -> list[str]:
    trajectory = view["trajectory"]
    poses = sorted((p["t"], p["x"], p["y"]) for p in trajectory["points"] if p["source"] == "snapshot")
    path: list[tuple[float, float, float]] = []
    note = ""
    if bag is not None:
        try:
            path, total = _recorded_path(bag, topic)
        except HarnessError as exc:
            note = f"The bag {_e(bag)} could not be read ({_e(exc.code)}: {_e(exc.message)}); "
        else:
            if not path:
                note = f"The bag {_e(bag.name)} has no {_e(topic)} messages; "
    if path:
        shown = "" if len(path) == total else f", {len(path)} shown"
        caption = (f"{total} poses recorded on <code>{_e(topic)}</code> in the mission bag <code>{_e(bag.name)}</code>"
                   f"{shown}; dots: the {len(poses)} fresh pose observations of the journal's snapshots; over the "
                   "named places.")
        png = _trajectory_png(poses, trajectory["places"], path=path, path_label=f"robot ({topic}, bag)")
    else:
        caption = (f"{note}{len(poses)} distinct fresh pose observations from the journal's snapshots, over the "
                   "named places.")
        png = _trajectory_png(poses, trajectory["places"])
    return ["<h2>Trajectory</h2>",
            f'<img alt="trajectory" src="data:image/png;base64,{base64.b64encode(png).decode()}">',
            f"<p><small>{caption[0].upper() + caption[1:]}</small></p>"]


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
            for ev in payload_of(e, ReceiptRecorded).receipt.evidence:
                if ev.kind == "artifact" and ev.uri and ev.sha256:
                    seen.setdefault(ev.uri, ev.sha256)
    if not seen:
        return []
    return ["<h2>Images cited as evidence</h2>", *(_image(u, h, artifacts_dir) for u, h in seen.items())]
