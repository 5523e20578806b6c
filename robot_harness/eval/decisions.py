"""Decision replay of a scenario's gated mission on the in-process simulated robot.

:func:`record` runs the mission as the benchmark's gated mode does, with a
:class:`~robot_harness.core.tape.TapeRecorder` around the clock, the ids and
every port; :func:`replay` runs the same code again with nothing but the tape
(no world, no planner: the robot and the model are the tape) and compares
every journal event (:func:`robot_harness.core.decisions.replay_decisions`).
``overrides`` replays under a changed harness configuration; a change that
alters a decision is then reported as the first event that differs.
"""
from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compose import ArtifactChecker, mission_runner
from ..core.clock import IdGenerator
from ..core.config import HarnessConfig, deep_merge, load_harness_config
from ..core.decisions import PORTS, DecisionReplay, ReplayJournal, WhatIf, replay_decisions, what_if
from ..core.journal import Journal, MemoryJournal
from ..core.memory import MemoryStore
from ..core.records import JournalEvent
from ..core.scenario import Scenario
from ..core.skills import default_skills
from ..core.tape import Tape, TapePlayer, TapeRecorder
from .modes import _ClaimTrackingPlanner, sim_ports

__all__ = ["Recording", "record", "replay", "replay_recorded", "what_if_recorded", "case_names", "load_case"]

_ROLES = ("snapshots", "planner", "navigation", "robot_io", "feasibility", "artifacts", "memory")


@dataclass(frozen=True)
class Recording:
    """One recorded mission: the journal before it, its events, and the tape its decisions read."""

    scenario: str
    status: str
    events: tuple[JournalEvent, ...]
    tape: Tape
    before: tuple[JournalEvent, ...] = ()
    """The journal's events before the mission's first (earlier missions, leases)."""


def _runner(config: HarnessConfig, *, journal: Any, clock: Any, ids: Any, ports: dict[str, Any], sleep: Any,
            stop_reads: Any) -> Any:
    """The gated mode's runner on these parts (``ports`` by role: the real ones taped, or a tape's players)."""
    return mission_runner(config=config, journal=journal, clock=clock, ids=ids, stop_reads=stop_reads,
                          skills=default_skills(config.navigation, ask_operator=config.interactions.ask_operator),
                          sleep=sleep, **ports)


def _config(scenario: Scenario, overrides: dict[str, Any] | None = None) -> HarnessConfig:
    return load_harness_config(overrides=deep_merge(scenario.harness_config(), overrides or {}))


def record(scenario: Scenario, *, workdir: Path | None = None, journal: Journal | None = None,
           ids: IdGenerator | None = None) -> Recording:
    """The scenario's gated mission on the simulated robot, taped; into ``journal`` when given (a
    journal earlier missions wrote to), else a fresh one. The journal's own stamps and ids are not
    taped: they are not decisions."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="robot_harness-decisions-"))
    sim = sim_ports(scenario, workdir / "artifacts")
    own = journal is None
    if journal is None:
        journal = MemoryJournal(clock=sim.clock, ids=IdGenerator(11))
        journal.setup()
    real = {"snapshots": sim, "planner": _ClaimTrackingPlanner(scenario, sim), "navigation": sim, "robot_io": sim,
            "feasibility": sim, "artifacts": ArtifactChecker(), "memory": MemoryStore(journal)}
    tape = Tape()
    rec = TapeRecorder(tape)
    ports = {role: rec.port(real[role], role, PORTS[role], attrs=("name", "providers")) for role in _ROLES}
    start = journal.last_seq()
    runner = _runner(_config(scenario), journal=journal, clock=rec.clock(sim.clock), ids=rec.ids(ids or IdGenerator(7)),
                     ports=ports, sleep=sim.sleep, stop_reads=rec.stop_reads())
    out = runner.run(scenario.goal)
    events = tuple(journal.events(mission_id=out.mission_id))
    before = tuple(e for e in journal.events() if e.seq <= start)
    if own:
        journal.close()
    return Recording(scenario=scenario.name, status=out.status.value, events=events, tape=tape, before=before)


def replay(scenario: Scenario, recording: Recording, *, overrides: dict[str, Any] | None = None) -> DecisionReplay:
    """Re-run the mission on the tape alone; NondeterminismError at the first decision that differs."""
    return replay_recorded(scenario, recording.events, recording.tape, before=recording.before, overrides=overrides)


def replay_recorded(scenario: Scenario, events: Sequence[JournalEvent], tape: Tape, *,
                    before: Sequence[JournalEvent] = (), overrides: dict[str, Any] | None = None) -> DecisionReplay:
    """A recorded mission of ``scenario`` (its events and tape, e.g. from the regression set) replayed
    by decision: the roles on the tape answer from it; the others are absent, as they were."""
    player, run, replayed = _rebuild(scenario, events, tape, before=before, overrides=overrides, lenient=False)
    return replay_decisions(events, player, run, replayed, perf_counter=time.perf_counter)


def what_if_recorded(scenario: Scenario, events: Sequence[JournalEvent], tape: Tape, *,
                     before: Sequence[JournalEvent] = (), overrides: dict[str, Any]) -> WhatIf:
    """A recorded mission of ``scenario`` under ``overrides``: its first changed decision, and where it would
    end when the recording's answers carry the replay to its end (``core.decisions.what_if``)."""
    player, run, replayed = _rebuild(scenario, events, tape, before=before, overrides=overrides, lenient=True)
    return what_if(events, player, run, replayed)


def _rebuild(scenario: Scenario, events: Sequence[JournalEvent], tape: Tape, *, before: Sequence[JournalEvent],
             overrides: dict[str, Any] | None, lenient: bool) -> tuple[TapePlayer, Any, Any]:
    """The gated runner on the tape's players: the player, the mission's run and its replayed events."""
    player = TapePlayer(tape.entries, tape.ports, lenient=lenient)
    ports = {role: player.port(role) for role in tape.ports}
    journal = ReplayJournal(before, events)
    runner = _runner(_config(scenario, overrides), journal=journal, clock=player.clock(), ids=player.ids(),
                     ports=ports, sleep=lambda _dt: None, stop_reads=player.stop_reads())
    mission_id = events[0].mission_id if events else None
    return player, lambda: runner.run(scenario.goal), lambda: journal.events(mission_id=mission_id)


def case_names(directory: Path) -> list[str]:
    """The cases of a decision set folder (``<case>.jsonl.gz`` + ``<case>.tape.jsonl.gz``, as
    scripts/record_decision_set.py writes them), sorted."""
    return sorted(p.name.removesuffix(".tape.jsonl.gz") for p in Path(directory).glob("*.tape.jsonl.gz"))


def load_case(directory: Path, name: str) -> tuple[Scenario, list[JournalEvent], Tape]:
    """One case of a decision set: its benchmark scenario, its journal's events and its tape."""
    import gzip

    from ..core.scenario import load_scenario
    from ..core.tape import tape_from_jsonl
    from ..evidence.replay import journal_from_jsonl
    from .run import SUITE_DIR

    tape = tape_from_jsonl(gzip.decompress((Path(directory) / f"{name}.tape.jsonl.gz").read_bytes()).decode())
    with tempfile.TemporaryDirectory(prefix="robot_harness-case-") as tmp:
        plain = Path(tmp) / f"{name}.jsonl"
        plain.write_bytes(gzip.decompress((Path(directory) / f"{name}.jsonl.gz").read_bytes()))
        journal = journal_from_jsonl(plain)
        try:
            events = journal.events()
        finally:
            journal.close()
    return load_scenario(SUITE_DIR / f"{tape.meta['scenario']}.yaml"), events, tape
