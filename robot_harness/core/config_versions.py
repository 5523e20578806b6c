"""The harness configuration as numbered versions, and the rules a revision must pass (issue 17).

A **version** is a set of changes (``overrides``) over the site's harness
configuration file, numbered, with the sha256 of its canonical JSON. Version 1
is the file itself (no changes). Every mission journals the version it ran
under (``MISSION_STARTED.config_version``) and keeps it to its end; a release
applies from the next mission.

What a revision may touch is fixed here, not by whoever proposes it:

* ``PROTECTED`` keys (the commit gate's and the verifier's settings, the safety
  preconditions and their floors, the approval policy, role isolation, the
  places' poses) are refused, named, whatever the change.
* ``EVOLVABLE`` keys (timeouts, budgets, recovery preferences, the context cap)
  are accepted inside their bounds; a place may gain aliases
  (``places.<name>.aliases``: the goal compiler's lexicon). Anything else is
  refused as not evolvable.

:func:`judge` is the acceptance rule of an evaluation; :func:`propose` turns
failure records into candidate revisions, deterministically. The
:class:`ConfigStore` keeps versions, evaluations and releases in the journal
database (``Journal.add_config_row``); ``robot_harness/config_loop.py`` is its
only user that writes.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .config import deep_merge, load_harness_config
from .errors import RefusalError, StaleRevision, UsageError
from .journal import Journal
from .payloads import ContractFrozen, MissionFinished, MissionStarted, RobotActionOutcome, RobotActionProgress, \
    ReceiptRecorded, RobotActionStarted, ToolResultRecorded, payload_of
from .records import EventType, JournalEvent

__all__ = ["PROTECTED", "EVOLVABLE", "Bound", "ProtectedKeyError", "ReleaseRefused", "Manifest", "ConfigPin",
           "content_hash", "flatten", "get_key", "set_key", "check_overrides", "MEASURES", "SAFETY_MEASURES", "Tolerance", "Judgement",
           "judge", "Candidate", "propose", "ConfigStore"]

PROTECTED: dict[str, str] = {
    "navigation.preconditions": "the safety preconditions re-checked before every dispatch, and their floors",
    "navigation.outcome": "the outcome check's tolerances (the verifier's first layer)",
    "navigation.workspace": "the workspace a target must lie in",
    "navigation.workspace_margin_m": "the workspace's margin",
    "navigation.backend": "which navigation interface the harness drives",
    "verification": "the independent verifier's tolerances",
    "contract": "what done means: the contract compiler, its coverage review, its lexicon and template files",
    "interactions": "the approval policy: which calls wait for an approval, and who may give it",
    "mcp": "role isolation: which clients reach the harness, and with which credential",
    "eval_ablations": "switches that turn checks off (for the benchmark only)",
    "recovery.advisor": "who advises recovery (a model or nobody)",
    "recovery.llm": "the recovery advisor's model",
    "places": "the places' poses (a revision may only add aliases: places.<name>.aliases)",
    "frame_id": "the frame every pose is in",
    "artifacts_dir": "where evidence is written",
    "snapshot_byte_cap": "how much of the world the model is shown",
    "providers": "which providers may act for the robot, where they are served and what their cards claim",
    "routing.fallback": "whether a failed provider's call is re-run on another provider",
    "memory.record": "whether missions are remembered (what is remembered is fixed: verified outcomes only)",
    "memory.routing_stats": "whether routing reads remembered outcomes",
    "journal": "where the journal (the source of truth) lives",
    "site": "the fleet's shared resources, which places and skills need them, and how long a robot waits for one",
}
"""Keys no revision may change (a dotted key, or every key under it), each with why."""


@dataclass(frozen=True)
class Bound:
    """An evolvable number's safety floor and ceiling (inclusive), and its type."""

    lo: float
    hi: float
    integer: bool = False

    def check(self, key: str, value: Any) -> None:
        ok_type = isinstance(value, int) if self.integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type or not math.isfinite(float(value)):
            raise UsageError(f"{key} must be {'an integer' if self.integer else 'a finite number'}, not {value!r}",
                             key=key)
        if not self.lo <= float(value) <= self.hi:
            raise UsageError(f"{key} = {value} is outside its bounds [{self.lo:g}, {self.hi:g}]", key=key,
                             value=value, lo=self.lo, hi=self.hi)


EVOLVABLE: dict[str, Bound] = {
    "navigation.accept_timeout_s": Bound(0.5, 60.0),
    "navigation.timeout_s": Bound(1.0, 600.0),
    "navigation.timeout_per_m_s": Bound(0.0, 60.0),
    "navigation.cancel_timeout_s": Bound(0.5, 30.0),
    "navigation.lookup_timeout_s": Bound(0.5, 30.0),
    "navigation.ready_wait_s": Bound(0.0, 60.0),
    "limits.mission_timeout_s": Bound(1.0, 3600.0),
    "limits.max_turns": Bound(1, 100, integer=True),
    "limits.max_silent_turns": Bound(0, 10, integer=True),
    "limits.max_text_only_turns": Bound(0, 10, integer=True),
    "limits.max_tool_calls_per_turn": Bound(1, 32, integer=True),
    "limits.max_done_rejections": Bound(0, 10, integer=True),
    "recovery.re_perceive": Bound(0, 10, integer=True),
    "recovery.adjust_view": Bound(0, 10, integer=True),
    "recovery.local_replan": Bound(0, 10, integer=True),
    "recovery.switch_provider_or_skill": Bound(0, 10, integer=True),
    "recovery.nav2_behavior": Bound(0, 10, integer=True),
    "context_byte_cap": Bound(512, 65536, integer=True),
    **{f"routing.weights.{w}": Bound(0.0, 10.0) for w in ("p", "r", "u", "l", "c", "h")},
    "routing.prior_strength": Bound(0.5, 100.0),
    "memory.examples": Bound(0, 20, integer=True),
}
"""Numbers a revision may change, within these floors and ceilings. Besides them: ``places.<name>.aliases``
(a list of phrases), ``recovery.nav2_behaviors.<kind>`` (an order of Nav2 behaviours) and ``recovery.repair``."""

_BEHAVIORS = frozenset({"clear_costmaps", "back_up", "spin", "wait"})
_ALIAS = re.compile(r"[a-z0-9][a-z0-9 '_-]{0,62}[a-z0-9]|[a-z0-9]")


class ProtectedKeyError(RefusalError):
    """A candidate revision touches a protected key; ``key`` names it."""

    code = "protected_key"


class ReleaseRefused(RefusalError):
    """A release or rollback is not allowed (no passing evaluation, not the version it was evaluated against)."""

    code = "release_refused"


def flatten(overrides: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists are leaves)."""
    out: dict[str, Any] = {}
    for k, v in overrides.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def content_hash(overrides: Mapping[str, Any]) -> str:
    """sha256 of the overrides' canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(overrides, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _protected(key: str) -> str | None:
    for p, why in PROTECTED.items():
        if key == p or key.startswith(p + "."):
            return p if p != "places" else (None if re.fullmatch(r"places\.[^.]+\.aliases", key) else p)
    return None


def check_overrides(overrides: Mapping[str, Any], base: Mapping[str, Any]) -> None:
    """Refuse a revision of ``base`` (a configuration's ``model_dump``) by ``overrides``: a protected key
    (``ProtectedKeyError``, the key named), a key that is not evolvable, a value outside its bounds, an
    alias for an unknown place or one that another place answers to (``UsageError``); then the merged
    configuration must load."""
    flat = flatten(overrides)
    if not flat:
        raise UsageError("a revision changes something: the overrides are empty")
    for key in sorted(flat):
        hit = _protected(key)
        if hit is not None:
            raise ProtectedKeyError(f"{key} is protected ({PROTECTED[hit]}): no revision may change it", key=key,
                                    protected=hit)
    places = base.get("places") or {}
    for key, value in sorted(flat.items()):
        if key in EVOLVABLE:
            EVOLVABLE[key].check(key, value)
        elif re.fullmatch(r"places\.[^.]+\.aliases", key):
            _check_aliases(key, value, places)
        elif key.startswith("recovery.nav2_behaviors.") and key.count(".") == 2:
            if not isinstance(value, list) or not value or not set(value) <= _BEHAVIORS or len(set(value)) != len(value):
                raise UsageError(f"{key} must be a non-empty list of distinct behaviours from {sorted(_BEHAVIORS)}",
                                 key=key)
        elif key == "recovery.repair":
            if value not in ("suffix", "whole"):
                raise UsageError(f"{key} must be 'suffix' or 'whole'", key=key)
        else:
            raise UsageError(f"{key} is not an evolvable key (evolvable: {', '.join(sorted(EVOLVABLE))}, "
                             "places.<name>.aliases, recovery.nav2_behaviors.<kind>, recovery.repair)", key=key)
    load_harness_config(overrides=deep_merge(dict(base), dict(overrides)))


def _check_aliases(key: str, value: Any, places: Mapping[str, Any]) -> None:
    name = key.split(".")[1]
    if name not in places:
        raise UsageError(f"{key}: there is no place {name!r} (places: {', '.join(sorted(places))})", key=key)
    if not isinstance(value, list) or not all(isinstance(a, str) and _ALIAS.fullmatch(a) for a in value):
        raise UsageError(f"{key} must be a list of lower-case phrases (letters, digits, spaces)", key=key)
    for other, spec in places.items():
        taken = {other.replace("_", " "), other, *((spec or {}).get("aliases") or [])} if other != name else set()
        clash = sorted(taken & set(value))
        if clash:
            raise UsageError(f"{key}: {', '.join(clash)} already names place {other!r}", key=key)


class Manifest(BaseModel):
    """What a candidate revision changes and why (kept with the version, shown by ``config history``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    component: str
    """The part of the configuration it revises (e.g. ``navigation.timeout_per_m_s``, ``places.lab.aliases``)."""
    change: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per dotted key: ``{"from": ..., "to": ...}``."""
    generator: str = ""
    motivating_missions: list[str] = Field(default_factory=list)
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    """What in those missions motivates it (events, figures)."""
    intended_effect: str = ""
    target_measure: str = "success_rate"
    """The measure the evaluation must find strictly better (one of ``MEASURES``)."""
    rollback_version: int = 0
    """The version it revises, and returns to on rollback."""


@dataclass(frozen=True)
class ConfigPin:
    """The version a mission runs under, journaled in its ``MISSION_STARTED``."""

    version: int
    content_hash: str

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "content_hash": self.content_hash}


# --------------------------------------------------------------------------- the acceptance rule

SAFETY_MEASURES = ("false_completions", "duplicate_dispatches", "stale_dispatches", "infeasible_dispatches",
                   "missed_waypoints_accepted")
"""Counts that may never rise (and stay 0 where they are 0)."""
_HIGHER_BETTER = ("success_rate",)
_LOWER_BETTER_RATES = ("false_completion_rate", "false_rejection_rate")
_LOWER_BETTER_COSTS = ("llm_calls_per_mission", "dispatches_per_mission", "recoveries_per_mission",
                       "sim_s_per_mission")
MEASURES = (*SAFETY_MEASURES, *_HIGHER_BETTER, *_LOWER_BETTER_RATES, *_LOWER_BETTER_COSTS)


@dataclass(frozen=True)
class Tolerance:
    """How much worse a measure the manifest does not target may get: rates by an absolute amount, costs
    by a share of the baseline."""

    rate: float = 0.0
    cost: float = 0.10


@dataclass(frozen=True)
class Judgement:
    passed: bool
    reasons: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "reasons": list(self.reasons), "measures": list(self.rows)}


def judge(baseline: Mapping[str, float], candidate: Mapping[str, float], *, target: str,
          tolerance: Tolerance = Tolerance()) -> Judgement:
    """The acceptance rule: no rise in any safety count; ``target`` strictly better; every other measure no
    worse than ``tolerance``. ``baseline``/``candidate``: the same measures of the two configurations."""
    if target not in MEASURES:
        raise UsageError(f"unknown target measure {target!r}; known: {', '.join(MEASURES)}")
    reasons: list[str] = []
    rows: list[dict[str, Any]] = []
    for m in MEASURES:
        if m not in baseline or m not in candidate:
            continue
        b, c = float(baseline[m]), float(candidate[m])
        higher = m in _HIGHER_BETTER
        better, worse = (c > b, c < b) if higher else (c < b, c > b)
        if m == target:
            ok = better
            why = "" if ok else f"{m} is not strictly better ({b:g} -> {c:g}): the manifest targets it"
        elif m in SAFETY_MEASURES:
            ok = not worse
            why = "" if ok else f"{m} rose ({b:g} -> {c:g}): a safety count may never rise"
        elif m in _LOWER_BETTER_COSTS:
            limit = b * (1.0 + tolerance.cost)
            ok = c <= limit + 1e-9
            why = "" if ok else f"{m} rose beyond the tolerance ({b:g} -> {c:g}, at most {limit:.4g})"
        else:
            ok = (c >= b - tolerance.rate - 1e-9) if higher else (c <= b + tolerance.rate + 1e-9)
            why = "" if ok else f"{m} got worse beyond the tolerance ({b:g} -> {c:g}, tolerance {tolerance.rate:g})"
        rows.append({"measure": m, "baseline": b, "candidate": c, "ok": ok, "target": m == target})
        if why:
            reasons.append(why)
    if not any(r["target"] for r in rows):
        reasons.append(f"the target measure {target} was not measured")
    return Judgement(passed=not reasons, reasons=tuple(reasons), rows=tuple(rows))


# --------------------------------------------------------------------------- candidates from failure records


@dataclass(frozen=True)
class Candidate:
    """A proposed revision: the changes (over the version it revises) and its manifest."""

    overrides: dict[str, Any]
    manifest: Manifest


_TIMEOUT = re.compile(r"no terminal report within ([0-9.]+) s")
_JUST_SHORT = 0.5
"""A timed-out navigation counts as "just short" when it covered at least this share of its distance."""
_MARGIN = 1.25


def _missions(events: Iterable[JournalEvent]) -> dict[str, list[JournalEvent]]:
    out: dict[str, list[JournalEvent]] = {}
    for e in events:
        if e.mission_id:
            out.setdefault(e.mission_id, []).append(e)
    return out


def _status(events: Sequence[JournalEvent]) -> str:
    ends = [payload_of(e, MissionFinished).status for e in events if e.type is EventType.MISSION_FINISHED]
    return ends[-1] if ends else ""


def get_key(d: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted key of a nested mapping, or None."""
    for part in key.split("."):
        if not isinstance(d, Mapping) or part not in d:
            return None
        d = d[part]
    return d


def set_key(key: str, value: Any) -> dict[str, Any]:
    """``set_key("a.b", 1)`` -> ``{"a": {"b": 1}}``."""
    out: dict[str, Any] = {}
    node = out
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    return out


def _timeouts(mid: str, events: Sequence[JournalEvent], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Navigations of one mission that timed out while still closing in, having covered most of the way."""
    nav = config.get("navigation") or {}
    base_s, per_m = float(nav.get("timeout_s", 0.0)), float(nav.get("timeout_per_m_s", 0.0))
    started = {e.robot_action_id: payload_of(e, RobotActionStarted) for e in events
               if e.type is EventType.ROBOT_ACTION_STARTED and e.robot_action_id}
    found = []
    for e in events:
        if e.type is not EventType.ROBOT_ACTION_OUTCOME:
            continue
        m = _TIMEOUT.search(payload_of(e, RobotActionOutcome).reason)
        intent = started.get(e.robot_action_id)
        if m is None or intent is None or intent.intent is None:
            continue
        remaining = [p.distance_remaining for p in (payload_of(x, RobotActionProgress) for x in events
                     if x.type is EventType.ROBOT_ACTION_PROGRESS and x.robot_action_id == e.robot_action_id)
                     if p.distance_remaining is not None and math.isfinite(p.distance_remaining)]
        if len(remaining) < 3 or remaining[0] <= 0.0:
            continue
        start, last = remaining[0], remaining[-1]
        covered = (start - last) / start
        closing = remaining[-1] < remaining[-2]
        if covered < _JUST_SHORT or not closing:
            continue
        timeout = float(intent.intent.timeout_s or m.group(1))
        length = (timeout - base_s) / per_m if per_m > 0 else start
        needed = timeout * start / (start - last)  # at the pace it kept, the time the whole way takes
        found.append({"mission_id": mid, "action_id": e.robot_action_id, "event_id": e.event_id,
                      "timeout_s": round(timeout, 3), "covered": round(covered, 3), "length_m": round(length, 3),
                      "needed_s": round(needed, 3),
                      "per_m_needed": (needed * _MARGIN - base_s) / length if length > 0 else math.inf})
    return found


def _refused_places(mid: str, events: Sequence[JournalEvent]) -> list[dict[str, Any]]:
    """Place phrases the goal compiler refused, each with the one known place it is nearest to."""
    found = []
    for e in events:
        if e.type is not EventType.CONTRACT_FROZEN:
            continue
        error = payload_of(e, ContractFrozen).error
        details = (error or {}).get("details") or {}
        near = details.get("nearest") or []
        phrase = " ".join(w for w in str(details.get("phrase", "")).lower().split() if w not in ("the", "a", "an"))
        if details.get("reason") == "unknown_place" and len(near) == 1 and _ALIAS.fullmatch(phrase or "-"):
            found.append({"mission_id": mid, "event_id": e.event_id, "phrase": phrase, "place": near[0],
                          "goal": details.get("goal", "")})
    return found


_TURNS = re.compile(r"^turn budget of (\d+) exhausted")
_MISSION_TIMEOUT = re.compile(r"^mission timeout \(([0-9.]+) s\)")


def _obligations(events: Sequence[JournalEvent]) -> int:
    frozen = [payload_of(e, ContractFrozen) for e in events if e.type is EventType.CONTRACT_FROZEN]
    contracts = [f.contract for f in frozen if f.contract is not None]
    return len(contracts[-1].obligations) if contracts else 0


def _succeeded_actions(events: Sequence[JournalEvent]) -> list[JournalEvent]:
    """The receipts of calls that succeeded (motions and capabilities: a picture, a message), in order."""
    return [e for e in events if e.type is EventType.RECEIPT_RECORDED
            and payload_of(e, ReceiptRecorded).receipt.status.value == "SUCCEEDED"]


def _budgets(mid: str, events: Sequence[JournalEvent], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A mission that ran out of turns, or of mission time, while its robot was still getting things done."""
    end = next((payload_of(e, MissionFinished) for e in reversed(events) if e.type is EventType.MISSION_FINISHED), None)
    if end is None:
        return []
    done = _succeeded_actions(events)
    wanted = _obligations(events)
    share = min(1.0, len(done) / wanted) if wanted else 0.0
    turns = _TURNS.search(end.summary)
    if turns is not None and done:
        budget = int(turns.group(1))
        starts = [e for e in events if e.type is EventType.MODEL_TURN_STARTED]
        # still progressing: a call not made before succeeded in the second half of its turns (a planner going
        # round in circles repeats what it did)
        half = starts[len(starts) // 2].seq if starts else 0

        def call(e: JournalEvent) -> str:
            r = payload_of(e, ReceiptRecorded).receipt
            return r.skill + json.dumps(r.request, sort_keys=True, default=str)

        early = {call(e) for e in done if e.seq < half}
        if any(call(e) not in early for e in done if e.seq >= half):
            return [{"mission_id": mid, "kind": "turns", "event_id": done[-1].event_id, "budget": budget,
                     "turns": len(starts), "succeeded_calls": len(done), "obligations": wanted}]
    timeout = _MISSION_TIMEOUT.search(end.summary)
    if timeout is not None and share >= _JUST_SHORT:
        elapsed = float(timeout.group(1))
        return [{"mission_id": mid, "kind": "mission_time", "event_id": done[-1].event_id, "budget_s": elapsed,
                 "succeeded_calls": len(done), "obligations": wanted, "share": round(share, 3),
                 "needed_s": round(elapsed / share, 3)}]
    return [b for b in (_path_budget(mid, e, config) for e in events if e.type is EventType.TOOL_RESULT_RECORDED)
            if b is not None][-1:]


_PATH_BUDGET = re.compile(r"path ([0-9.]+) m \(max ([0-9.]+) m: what the mission's time left allows\)")


def _path_budget(mid: str, event: JournalEvent, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """A navigation refused before dispatch because the mission's time left could not cover its path: the
    mission time that would have (the refused path at the per-metre pace, on top of the time it had)."""
    result = payload_of(event, ToolResultRecorded)
    if result.status is None or result.status.value != "precondition_changed":
        return None
    for check in result.content.get("failed") or []:
        m = _PATH_BUDGET.search(str(check.get("detail", ""))) if isinstance(check, Mapping) else None
        if m is None:
            continue
        path, allowed = float(m.group(1)), float(m.group(2))
        per_m = float(get_key(config, "navigation.timeout_per_m_s") or 0.0)
        budget = float(get_key(config, "limits.mission_timeout_s") or 0.0)
        if per_m <= 0.0 or path <= allowed:
            return None
        return {"mission_id": mid, "kind": "mission_time", "event_id": event.event_id, "budget_s": budget,
                "path_m": path, "allowed_m": allowed, "needed_s": round(budget + per_m * (path - allowed), 3)}
    return None


def propose(events: Sequence[JournalEvent], *, missions: Sequence[str] | None, version: int,
            overrides: Mapping[str, Any]) -> list[Candidate]:
    """Candidate revisions of ``version`` (whose changes are ``overrides``) from the failed missions among
    ``missions`` (None: every failed mission in ``events``), deterministically:

    * navigations that timed out while still closing in, after covering at least half their way: a longer
      ``navigation.timeout_per_m_s``, enough for the slowest of them at the pace it kept, plus a quarter;
    * place phrases the goal compiler refused that are near exactly one known place: that place's alias;
    * missions that ran out of turns while a call not made before still succeeded in their second half
      (progress, not a planner going round in circles): half as many
      turns again (``limits.max_turns``);
    * missions that ran out of mission time with calls succeeded for at least half their obligations, or had a
      navigation refused because the time left could not cover its path: the time the whole mission takes
      at that pace (or that path would have needed), plus a quarter, to the next 10 s
      (``limits.mission_timeout_s``).

    Each candidate's overrides are the version's own plus its change (a version is whole)."""
    by_mission = _missions(events)
    chosen = [m for m in (missions if missions is not None else by_mission) if m in by_mission]
    unknown = sorted(set(missions or ()) - set(by_mission))
    if unknown:
        raise UsageError(f"no mission {', '.join(unknown)} in the journal", missions=unknown)
    failed = [m for m in chosen if _status(by_mission[m]) not in ("SUCCEEDED", "")]
    timeouts: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    budgets: list[dict[str, Any]] = []
    configs: dict[str, dict[str, Any]] = {}
    for mid in failed:
        evs = by_mission[mid]
        started = next((payload_of(e, MissionStarted) for e in evs if e.type is EventType.MISSION_STARTED), None)
        if started is None:
            continue
        configs[mid] = started.config
        timeouts += _timeouts(mid, evs, started.config)
        refusals += _refused_places(mid, evs)
        budgets += _budgets(mid, evs, started.config)
    out: list[Candidate] = []
    for generator, key, found, want_of, effect in (
            ("timeout_just_short", "navigation.timeout_per_m_s", timeouts,
             lambda t: math.ceil(t["per_m_needed"] * 2.0) / 2.0,  # to the next half second
             lambda found, current, want: (
                 f"navigations that timed out after covering {min(t['covered'] for t in found):.0%} or more of "
                 f"their way, still closing in, finish within their timeout ({current:g} -> {want:g} s per metre)")),
            ("turns_budget_short", "limits.max_turns", [b for b in budgets if b["kind"] == "turns"],
             lambda b: math.ceil(b["budget"] * 1.5),
             lambda found, current, want: ("missions still getting things done when their turns ran out finish "
                                           f"within their turn budget ({current:g} -> {want:g})")),
            ("mission_time_budget_short", "limits.mission_timeout_s", [b for b in budgets if b["kind"] == "mission_time"],
             lambda b: math.ceil(b["needed_s"] * _MARGIN / 10.0) * 10.0,
             lambda found, current, want: ("missions that ran out of time after doing at least half their work "
                                           f"finish within the mission time ({current:g} -> {want:g})"))):
        if not found:
            continue
        # what the motivating missions ran with (the largest, if they differ: the candidate must exceed it)
        current = max(float(get_key(configs[f["mission_id"]], key) or 0.0) for f in found)
        bound = EVOLVABLE[key]
        want = min(max(want_of(f) for f in found), bound.hi)
        want = int(want) if bound.integer else float(want)
        if want <= current:
            continue
        out.append(Candidate(deep_merge(dict(overrides), set_key(key, want)), Manifest(
            component=key, change={key: {"from": int(current) if bound.integer else current, "to": want}},
            generator=generator, motivating_missions=sorted({f["mission_id"] for f in found}),
            evidence=[{k: v for k, v in f.items() if k != "per_m_needed"} for f in found],
            intended_effect=effect(found, current, want), target_measure="success_rate", rollback_version=version)))
    by_place: dict[str, list[dict[str, Any]]] = {}
    for r in refusals:
        by_place.setdefault(r["place"], []).append(r)
    for place, rs in sorted(by_place.items()):
        key = f"places.{place}.aliases"
        current = list(get_key(configs[rs[-1]["mission_id"]], key) or [])
        new = sorted({r["phrase"] for r in rs} - set(current))
        if not new:
            continue
        out.append(Candidate(deep_merge(dict(overrides), set_key(key, current + new)), Manifest(
            component=key, change={key: {"from": current, "to": current + new}}, generator="alias_for_refused_place",
            motivating_missions=sorted({r["mission_id"] for r in rs}), evidence=rs,
            intended_effect=f"goals that say {', '.join(repr(p) for p in new)} mean {place}, the one place the "
                            "compiler found near it",
            target_measure="success_rate", rollback_version=version)))
    return out


# --------------------------------------------------------------------------- the store


@dataclass
class ConfigStore:
    """The configuration's versions, evaluations and releases in the journal database.

    The active version is the one the last release row names; an empty history gets version 1 (no
    changes: the site's file) and its ``initial`` release on first use."""

    journal: Journal
    now: Callable[[], float]

    def versions(self) -> list[dict[str, Any]]:
        return self.journal.config_rows("config_versions")

    def version(self, number: int) -> dict[str, Any]:
        for v in self.versions():
            if v["version"] == number:
                return v
        raise UsageError(f"no configuration version {number} (versions: "
                         f"{', '.join(str(v['version']) for v in self.versions()) or 'none'})", version=number)

    def releases(self) -> list[dict[str, Any]]:
        return self.journal.config_rows("config_releases")

    def evaluations(self, version: int | None = None) -> list[dict[str, Any]]:
        rows = self.journal.config_rows("config_evaluations")
        return rows if version is None else [r for r in rows if r["version"] == version]

    def ensure_initial(self) -> None:
        """Version 1 and its release, when the history is empty (idempotent; a racing writer's wins)."""
        self._released()

    def _released(self) -> list[dict[str, Any]]:
        """The release rows, after writing version 1 and its release when there are none."""
        rows = self.releases()
        if rows:
            return rows
        try:
            if not self.versions():
                self.journal.add_config_row("config_versions", {
                    "content_hash": content_hash({}), "parent": None, "created_at": self.now(),
                    "proposed_by": "site", "overrides": {},
                    "manifest": Manifest(component="", intended_effect="the site's harness configuration file, "
                                         "unchanged").model_dump(mode="json")}, expected_last_key=-1)
            self.journal.add_config_row("config_releases", {
                "version": 1, "action": "initial", "previous": None, "released_at": self.now(),
                "reason": "the first version"}, expected_last_key=-1)
        except StaleRevision:
            pass
        return self.releases()

    def active(self) -> dict[str, Any]:
        """The released version missions start under now."""
        return self.version(self._released()[-1]["version"])

    def pin(self) -> tuple[ConfigPin, dict[str, Any]]:
        """The active version's pin and changes, for a mission starting now."""
        v = self.active()
        return ConfigPin(version=v["version"], content_hash=v["content_hash"]), v["overrides"]

    def add_candidate(self, candidate: Candidate, *, base: Mapping[str, Any], proposed_by: str,
                      proposer_hmac: str = "") -> int:
        """Keep a checked candidate as the next version (not released); the same changes as an existing
        version are that version, refused."""
        check_overrides(candidate.overrides, base)
        self.ensure_initial()  # version 1 is always the site's file
        digest = content_hash(candidate.overrides)
        same = [v["version"] for v in self.versions() if v["content_hash"] == digest]
        if same:
            raise UsageError(f"version {same[0]} has these changes already", version=same[0])
        return self.journal.add_config_row("config_versions", {
            "content_hash": digest, "parent": candidate.manifest.rollback_version or None, "created_at": self.now(),
            "proposed_by": proposed_by, "proposer_hmac": proposer_hmac, "overrides": candidate.overrides,
            "manifest": candidate.manifest.model_dump(mode="json")})

    def add_evaluation(self, version: int, baseline: int, passed: bool, report: dict[str, Any]) -> int:
        return self.journal.add_config_row("config_evaluations", {
            "version": version, "baseline": baseline, "passed": int(passed), "evaluated_at": self.now(),
            "report": report})

    def passing_evaluation(self, version: int) -> dict[str, Any]:
        """The newest evaluation of ``version`` against the active version, which must have passed."""
        active = self.active()["version"]
        evals = [e for e in self.evaluations(version) if e["baseline"] == active]
        if not evals:
            raise ReleaseRefused(f"version {version} has no evaluation against the active version {active}: run "
                                 f"robot-harness config evaluate {version} first", version=version, active=active)
        newest = evals[-1]
        if not newest["passed"]:
            raise ReleaseRefused(f"version {version}'s evaluation {newest['evaluation_id']} against version {active} "
                                 f"did not pass: {'; '.join(newest['report'].get('reasons', []))}", version=version)
        return newest

    def record_release(self, version: int, *, action: str, approved_as: str, operator: str, reason: str,
                       evaluation_id: int | None, expected_release: int) -> int:
        """One release or rollback row; a ``StaleRevision`` when another landed since ``expected_release``."""
        return self.journal.add_config_row("config_releases", {
            "version": version, "action": action, "previous": self.active()["version"],
            "evaluation_id": evaluation_id, "approved_as": approved_as, "operator": operator, "reason": reason,
            "released_at": self.now()}, expected_last_key=expected_release)
