"""The revision loop (issue 17): propose a configuration revision from failure records, evaluate it against
the released version, release it with an operator's approval, roll it back.

The rules live in :mod:`robot_harness.core.config_versions` (what may change, the acceptance rule, the
generators, the store); this module puts them to work on a journal file with the parts that are not the
core's: the benchmark's simulated missions, the regression set's decision replay, the approval check.
It is the only writer of the ``config_*`` tables (the supervisor only reads the released version, and
writes version 1 on first use).

* ``propose``: candidates from the failed missions (``core.config_versions.propose``), each checked
  against the protected keys and bounds, kept as a new (unreleased) version with its manifest.
* ``evaluate``: the candidate and the released version side by side, (1) on the benchmark's scenarios
  and any held-out scenario folders (the generator saw none of them: it reads only the journal's
  missions), (2) by decision replay of the regression set under the candidate (what changes, and where
  each mission would end); :func:`~robot_harness.core.config_versions.judge` decides; the evaluation is
  kept.
* ``release``: a passing evaluation against the version released now, and an operator's credential
  (``core.interactions.authorize`` under the operator policy; the proposer's own credential never
  approves); applies from the next mission.
* ``rollback``: to the version before (or a named one), with an operator's credential.
"""
from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .core.clock import IdGenerator, SystemClock
from .core.config import HarnessConfig, deep_merge, load_harness_config
from .core.config_versions import (Candidate, ConfigStore, Judgement, Manifest, Tolerance, content_hash, judge,
                                   propose as propose_candidates)
from .core.errors import UsageError
from .core.interactions import (ApprovalPolicy, CredentialSet, Interaction, InteractionKind, NotAuthorized, TokenHasher,
                                authorize, load_token_key, token_key_path)
from .core.journal import Journal, is_database_url, local_state_path, open_journal
from .core.payloads import MissionStarted, payload_of
from .core.records import EventType
from .core.scenario import Scenario, load_scenario

__all__ = ["REPO", "REGRESSION_SET", "DEFAULT_SUITES", "propose", "evaluate", "release", "rollback", "history",
           "run_missions", "measures"]

REPO = Path(__file__).resolve().parents[1]
REGRESSION_SET = REPO / "test" / "replay" / "decisions"
DEFAULT_SUITES = (REPO / "scenarios" / "eval", REPO / "scenarios" / "rsi" / "heldout")


@contextlib.contextmanager
def _journal(path: str | Path) -> Iterator[Journal]:
    """The journal at ``path`` (a SQLite file or a ``postgresql://`` URL), set up, closed again; a missing file
    is a usage error."""
    if not is_database_url(path) and not Path(path).is_file():
        raise UsageError(f"no journal at {path}", path=str(path))
    journal = open_journal(path, clock=SystemClock(), ids=IdGenerator(None))
    try:
        yield journal
    finally:
        journal.close()


def _hasher(path: str | Path) -> TokenHasher:
    """The token key beside the journal (made, mode 0600, when there is none yet); for a database, on this
    machine where a harness keeps its key (``core.journal.local_state_path``)."""
    return TokenHasher(load_token_key(token_key_path(local_state_path(path)), create=True))


def _base(journal: Journal, missions: Sequence[str] | None) -> dict[str, Any]:
    """The configuration a candidate is checked against: the newest motivating mission's own, as its
    MISSION_STARTED journaled it (the places a new alias must name; what the candidate must still load
    over)."""
    started = [e for e in journal.events(types=[EventType.MISSION_STARTED])
               if missions is None or e.mission_id in missions]
    if not started:
        raise UsageError("no mission to learn from in the journal" + (f" among {', '.join(missions)}" if missions else ""))
    return payload_of(started[-1], MissionStarted).config


# --------------------------------------------------------------------------- propose


def propose(journal_path: str | Path, *, missions: Sequence[str] | None = None, proposed_by: str = "robot-harness config propose",
            proposer_token: str = "", manual: dict[str, Any] | None = None, intended_effect: str = "",
            target: str = "success_rate", site: HarnessConfig | None = None,
            llm: Any = None) -> list[dict[str, Any]]:
    """Candidate revisions of the released version from the failed missions (those that ran under it, or
    ``missions``); each is checked and kept as a new version. Returns ``[{version, existing, manifest,
    overrides}]`` (empty: nothing to propose; ``existing``: a version with these changes was proposed
    before). ``manual``: one candidate with these changes instead (a person's), through the same checks;
    ``llm`` (an ``llm.client.LLMConfig``): one candidate a model proposes from the failures, through the
    same checks, the call's record kept in its manifest."""
    with _journal(journal_path) as journal:
        store = ConfigStore(journal, now=time.time)
        active = store.active()
        events = journal.events()
        if manual is not None:
            base = (_base(journal, missions) if missions or any(e.type is EventType.MISSION_STARTED for e in events)
                    else (site or site_config(None)).model_dump(mode="json"))
            found = [_manual(manual, base=base, active=active, missions=missions, intended_effect=intended_effect,
                             target=target)]
        else:
            if missions is None:  # the failures under the version released now (before versions: version 1's)
                live = {active["version"], 0} if active["version"] == 1 else {active["version"]}
                missions = [e.mission_id for e in events if e.type is EventType.MISSION_STARTED
                            and payload_of(e, MissionStarted).config_version in live]
                if not missions:
                    return []  # nothing ran under the released version yet: nothing to learn from
            base = _base(journal, missions)
            if llm is not None:
                found = _llm_candidate(llm, events, missions, base=base, active=active)
                proposed_by = f"llm:{llm.model}"
            else:
                found = propose_candidates(events, missions=missions, version=active["version"],
                                           overrides=active["overrides"])
        proposer_hmac = _hasher(journal_path).digest(proposer_token) if proposer_token else ""
        out = []
        known = {v["content_hash"]: v["version"] for v in store.versions()}
        for cand in found:
            same = known.get(content_hash(cand.overrides))
            if same is not None and manual is None and llm is None:  # proposed before: say so, go on
                out.append({"version": same, "existing": True, "overrides": cand.overrides,
                            "manifest": cand.manifest.model_dump(mode="json")})
                continue
            number = store.add_candidate(cand, base=base, proposed_by=proposed_by, proposer_hmac=proposer_hmac)
            out.append({"version": number, "existing": False, "overrides": cand.overrides,
                        "manifest": cand.manifest.model_dump(mode="json")})
        return out


def _llm_candidate(llm: Any, events: Sequence[Any], missions: Sequence[str], *, base: dict[str, Any],
                   active: dict[str, Any]) -> list[Candidate]:
    """The model's proposal from the failed missions, as a candidate (none when it proposes no change)."""
    from .llm.client import ChatClient
    from .llm.proposer import LLMConfigProposer, failure_digest

    failures = failure_digest(events, missions)
    if not failures:
        return []
    client = ChatClient(llm)
    try:
        proposer = LLMConfigProposer(client)
        answer = proposer(failures, deep_merge(base, active["overrides"]))
    finally:
        client.close()
    if not answer["changes"]:
        return []
    return [_manual(answer["changes"], base=base, active=active, missions=[f["mission_id"] for f in failures],
                    intended_effect=answer["intended_effect"], target=answer["target_measure"],
                    generator=f"llm:{llm.model}",
                    evidence=[{"llm_call": c.model_dump(mode="json")} for c in proposer.calls])]


def _manual(changes: dict[str, Any], *, base: dict[str, Any], active: dict[str, Any], missions: Sequence[str] | None,
            intended_effect: str, target: str, generator: str = "manual",
            evidence: list[dict[str, Any]] | None = None) -> Candidate:
    from .core.config_versions import MEASURES, flatten, get_key

    if target not in MEASURES:
        raise UsageError(f"unknown target measure {target!r}; known: {', '.join(MEASURES)}")
    flat = flatten(changes)
    merged = deep_merge(base, active["overrides"])
    change = {k: {"from": get_key(merged, k), "to": v} for k, v in sorted(flat.items())}
    return Candidate(deep_merge(active["overrides"], changes), Manifest(
        component=", ".join(sorted(flat)), change=change, generator=generator, motivating_missions=list(missions or []),
        evidence=list(evidence or []),
        intended_effect=intended_effect, target_measure=target, rollback_version=active["version"]))


# --------------------------------------------------------------------------- evaluate


def _load_dir(directory: Path) -> list[Scenario]:
    scenarios = [load_scenario(p) for p in sorted(Path(directory).glob("*.yaml"))]
    if not scenarios:
        raise UsageError(f"no scenarios (*.yaml) in {directory}", path=str(directory))
    return scenarios


def measures(results: Sequence[Any], *, costs_over: Sequence[Any] | None = None) -> dict[str, Any]:
    """The benchmark's measures (``eval.run.measures``) of ``results``, with the costs (``eval.run.COSTS``)
    taken over ``costs_over`` instead (default: the same runs; none: 0)."""
    from .eval.run import COSTS, measures as run_measures

    out = run_measures(results)
    if costs_over is not None:
        costs = run_measures(costs_over) if costs_over else dict.fromkeys(COSTS, 0.0)
        out.update({k: costs[k] for k in COSTS})
    return out


def fit(overrides: dict[str, Any], scenario: Scenario) -> dict[str, Any]:
    """A version's changes as they apply to ``scenario``'s world: aliases of places it does not have are
    left out (a site's place is not the benchmark's)."""
    places = overrides.get("places")
    if not isinstance(places, dict):
        return overrides
    known = set(scenario.harness_config().get("places") or {})
    kept = {name: spec for name, spec in places.items() if name in known}
    out = {k: v for k, v in overrides.items() if k != "places"}
    return {**out, "places": kept} if kept else out


def _suite_runs(scenarios: Sequence[Scenario], overrides: dict[str, Any], workdir: Path) -> list[Any]:
    from .eval.modes import run_one

    return [run_one(sc, "gated", workdir=workdir / sc.name, overrides=fit(overrides, sc)) for sc in scenarios]


def _regression_what_ifs(directory: Path, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """Each regression case replayed by decision under ``overrides``: its first changed decision and where
    it would end (undetermined when the change asks the world what the recording never asked)."""
    from .eval.decisions import case_names, load_case, what_if_recorded

    cases = case_names(directory)
    if not cases:
        raise UsageError(f"no decision cases (*.tape.jsonl.gz) in {directory}", path=str(directory))
    out = []
    for name in cases:
        scenario, events, tape = load_case(directory, name)
        doc = what_if_recorded(scenario, events, tape, overrides=fit(overrides, scenario)).as_dict()
        out.append({"case": name, **{k: doc[k] for k in ("recorded_status", "same_decisions", "first_change",
                                                         "final_status", "left_tape")}})
    return out


def evaluate(journal_path: str | Path, version: int, *, suites: Sequence[Path] = DEFAULT_SUITES,
             regression: Path | None = REGRESSION_SET, tolerance: Tolerance = Tolerance(),
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Candidate ``version`` against the released one: the report (kept as an evaluation) with
    ``passed``."""
    with _journal(journal_path) as journal:
        store = ConfigStore(journal, now=time.time)
        active = store.active()
        cand = store.version(version)
        if cand["version"] == active["version"]:
            raise UsageError(f"version {version} is the released version: there is nothing to compare it with")
        started = time.perf_counter()
        runs: dict[str, dict[str, list[Any]]] = {"baseline": {}, "candidate": {}}
        with tempfile.TemporaryDirectory(prefix="robot_harness-evaluate-") as tmp:
            for suite in suites:
                scenarios = _load_dir(suite)
                for side, overrides in (("baseline", active["overrides"]), ("candidate", cand["overrides"])):
                    if progress is not None:
                        progress(f"{side} (version {active['version'] if side == 'baseline' else version}) on "
                                 f"{suite.name}: {len(scenarios)} missions")
                    runs[side][str(suite)] = _suite_runs(scenarios, overrides, Path(tmp) / side / suite.name)
        per_suite = {str(s): {side: measures(runs[side][str(s)]) for side in runs} for s in suites}
        # Costs compare like with like: over the missions that ended the same way under both versions (a
        # mission the candidate lets finish takes longer than one that timed out; that is not a cost).
        pairs = [(b, c) for suite in runs["baseline"] for b, c in zip(runs["baseline"][suite], runs["candidate"][suite])]
        same = [(b, c) for b, c in pairs if b.status == c.status]
        base_all = measures([b for b, _ in pairs], costs_over=[b for b, _ in same])
        cand_all = measures([c for _, c in pairs], costs_over=[c for _, c in same])
        target = cand["manifest"].get("target_measure", "success_rate")
        verdict: Judgement = judge(base_all, cand_all, target=target, tolerance=tolerance)
        reasons = list(verdict.reasons)
        changed_runs = [{"scenario": b.scenario, "baseline": b.status, "candidate": c.status,
                         "truth_done": c.truth.done} for b, c in pairs if b.status != c.status]
        what_ifs: list[dict[str, Any]] = []
        if regression is not None:
            if progress is not None:
                progress(f"decision replay of the regression set under version {version}")
            what_ifs = _regression_what_ifs(regression, cand["overrides"])
            for w in what_ifs:
                if w["recorded_status"] == "SUCCEEDED" and w["final_status"] not in ("SUCCEEDED", "undetermined"):
                    reasons.append(f"regression case {w['case']} would end {w['final_status']}, not SUCCEEDED: "
                                   f"{w['first_change']}")
        report = {
            "version": version, "baseline": active["version"], "passed": not reasons, "reasons": reasons,
            "target_measure": target, "tolerance": {"rate": tolerance.rate, "cost": tolerance.cost},
            "measures": verdict.as_dict()["measures"], "missions": len(pairs), "costs_over": len(same),
            "per_suite": per_suite, "changed_missions": changed_runs,
            "regression_set": what_ifs, "wall_s": round(time.perf_counter() - started, 2),
        }
        report["evaluation_id"] = store.add_evaluation(version, active["version"], not reasons, report)
        return report


# --------------------------------------------------------------------------- release, rollback


def _approve(journal_path: str | Path, store: ConfigStore, version: int, *, what: str, token: str,
             site: HarnessConfig, environ: Mapping[str, str]) -> str:
    """The credential kind ``token`` approves ``what`` with, under the operator policy: the operator token
    or a configured approver's (from the site's environment, as the supervisor reads them), never the
    credential the version was proposed with. ``NotAuthorized`` (exit 3) otherwise."""
    hasher = _hasher(journal_path)
    creds = CredentialSet.from_environment(site.interactions, environ, hasher)
    if creds.missing:
        raise NotAuthorized(f"nobody can approve the {what} of version {version}: no operator credential is "
                            f"configured in this environment (set ${site.interactions.operator_token_env}, or "
                            "configure interactions.approvers and set their variables)", version=version)
    if not token:
        raise NotAuthorized(f"the {what} of version {version} needs an operator's approval: present the operator "
                            f"token or an approver's (--token, or ${site.interactions.operator_token_env})",
                            version=version)
    row = store.version(version)
    if row.get("proposer_hmac") and hasher.matches(token, row["proposer_hmac"]):
        raise NotAuthorized(f"the token presented is the credential version {version} was proposed with: a "
                            "version is never approved by its proposer, whatever else its token is", version=version)
    request = Interaction(interaction_id=f"config-{what}-{version}", mission_id="", kind=InteractionKind.APPROVAL,
                          prompt=f"{what} configuration version {version}", policy=ApprovalPolicy.OPERATOR,
                          key_id=hasher.key_id, sender_hmac=row.get("proposer_hmac") or "",
                          approvers=creds.approvers, waiting_on=creds.missing)
    return authorize(request, token, hasher)


def release(journal_path: str | Path, version: int, *, token: str, site: HarnessConfig, environ: Mapping[str, str],
            operator: str = "", reason: str = "") -> dict[str, Any]:
    """Release ``version``: it needs a passing evaluation against the version released now and an
    operator's credential; missions started from now on run under it."""
    with _journal(journal_path) as journal:
        store = ConfigStore(journal, now=time.time)
        active = store.active()
        if version == active["version"]:
            raise UsageError(f"version {version} is already the released version")
        evaluation = store.passing_evaluation(version)
        expected = store.releases()[-1]["release_id"]
        approved_as = _approve(journal_path, store, version, what="release", token=token, site=site, environ=environ)
        rid = store.record_release(version, action="release", approved_as=approved_as, operator=operator,
                                   reason=reason, evaluation_id=evaluation["evaluation_id"], expected_release=expected)
        return {"release_id": rid, "version": version, "previous": active["version"], "approved_as": approved_as,
                "evaluation_id": evaluation["evaluation_id"]}


def rollback(journal_path: str | Path, version: int | None = None, *, token: str, site: HarnessConfig,
             environ: Mapping[str, str], operator: str = "", reason: str = "") -> dict[str, Any]:
    """Return to ``version`` (default: the version released before the current one) with an operator's
    credential; no evaluation is needed to go back to a version that was released before."""
    with _journal(journal_path) as journal:
        store = ConfigStore(journal, now=time.time)
        active = store.active()
        releases = store.releases()
        if version is None:
            version = releases[-1]["previous"] if releases[-1]["previous"] is not None else None
            if version is None:
                raise UsageError(f"version {active['version']} is the first release: there is nothing to roll back to")
        released_before = {r["version"] for r in releases}
        if version not in released_before:
            raise UsageError(f"version {version} was never released: only a released version is rolled back to "
                             f"(released: {', '.join(str(v) for v in sorted(released_before))})", version=version)
        if version == active["version"]:
            raise UsageError(f"version {version} is the released version already")
        approved_as = _approve(journal_path, store, version, what="rollback", token=token, site=site, environ=environ)
        rid = store.record_release(version, action="rollback", approved_as=approved_as, operator=operator,
                                   reason=reason, evaluation_id=None, expected_release=releases[-1]["release_id"])
        return {"release_id": rid, "version": version, "previous": active["version"], "approved_as": approved_as}


def history(journal_path: str | Path) -> dict[str, Any]:
    """Versions (with manifests), evaluations (verdicts and reasons), releases (who, when), the active one,
    and how many missions ran under each version."""
    with _journal(journal_path) as journal:
        store = ConfigStore(journal, now=time.time)
        active = store.active()
        ran: dict[int, int] = {}
        for e in journal.events(types=[EventType.MISSION_STARTED]):
            v = payload_of(e, MissionStarted).config_version
            ran[v] = ran.get(v, 0) + 1
        return {
            "active": active["version"],
            "versions": [{**v, "missions": ran.get(v["version"], 0)} for v in store.versions()],
            "evaluations": [{k: e[k] for k in ("evaluation_id", "version", "baseline", "passed", "evaluated_at")}
                            | {"reasons": e["report"].get("reasons", [])} for e in store.evaluations()],
            "releases": store.releases(),
            "unpinned_missions": ran.get(0, 0),
        }


# --------------------------------------------------------------------------- missions under the released version


def run_missions(journal_path: str | Path, scenarios: Sequence[Scenario], *, workdir: Path | None = None) -> list[Any]:
    """Run each scenario's mission on the in-process simulated robot into the journal at ``journal_path``,
    under the version released when it starts (as the supervisor does), pinned to it in its
    MISSION_STARTED. For a mission family's evidence, and for the end-to-end test of the loop."""
    from .eval.modes import run_one

    if not is_database_url(journal_path):
        Path(journal_path).parent.mkdir(parents=True, exist_ok=True)
    workdir = workdir or Path(tempfile.mkdtemp(prefix="robot_harness-missions-"))
    out = []
    for sc in scenarios:
        journal = open_journal(journal_path, clock=SystemClock(), ids=IdGenerator(None))
        try:
            pin, overrides = ConfigStore(journal, now=time.time).pin()
        finally:
            journal.close()
        out.append(run_one(sc, "gated", workdir=workdir / sc.name, overrides=fit(overrides, sc),
                           journal_path=journal_path, config_pin=pin))
    return out


def site_config(path: Path | None) -> HarnessConfig:
    """The site's harness configuration (its approvers): ``path``, or the packaged config/harness.yaml."""
    from .core.config import packaged_config

    path = path or packaged_config("harness.yaml")
    if path is None or not Path(path).is_file():
        raise UsageError(f"no harness configuration at {path}")
    return load_harness_config(file_text=Path(path).read_text())

