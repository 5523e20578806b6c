"""Decision replay of a mission the supervisor ran: its journal and its decision tape, no robot, no model.

The supervisor keeps each mission's decision tape in the journal database
(``Journal.put_tape``). :func:`replay_journal_mission` rebuilds the runner the
mission ran with (the configuration and the ``run`` inputs on the tape, the
ports as the tape's players, the journal as it was when the mission started)
and compares every event it writes with the recorded one
(:func:`robot_harness.core.decisions.replay_decisions`).
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from .compose import mission_runner
from .core.clock import IdGenerator, SystemClock
from .core.config import deep_merge, load_harness_config
from .core.config_versions import ConfigPin
from .core.decisions import DecisionReplay, ReplayJournal, WhatIf, replay_decisions, what_if
from .core.errors import UsageError
from .core.interactions import MissionCredentials
from .core.journal import open_journal, redact_url
from .core.payloads import MissionStarted, payload_of
from .core.records import EventType
from .core.skills import default_skills
from .core.tape import TapePlayer

__all__ = ["replay_journal_mission", "what_if_journal_mission"]


def replay_journal_mission(journal_path: str | Path, mission_id: str, *,
                           overrides: dict[str, Any] | None = None) -> DecisionReplay:
    """Replay ``mission_id`` of the journal at ``journal_path`` (a SQLite file or a ``postgresql://`` URL) by
    decision; NondeterminismError at the
    first difference, UsageError when the mission or its tape is not there."""
    mission, player, run, replayed = _rebuild(journal_path, mission_id, overrides=overrides, lenient=False)
    return replay_decisions(mission, player, run, replayed, perf_counter=time.perf_counter)


def what_if_journal_mission(journal_path: str | Path, mission_id: str, *,
                            overrides: dict[str, Any]) -> WhatIf:
    """The mission under ``overrides``: its first changed decision and, when the recording's answers
    carry the replay to its end, the status it would have ended with."""
    mission, player, run, replayed = _rebuild(journal_path, mission_id, overrides=overrides, lenient=True)
    result = what_if(mission, player, run, replayed)
    if "verifier" in player.ports and "verification" in overrides:
        result = dataclasses.replace(result, note=(
            "the verifier ran as its own node: its verdicts are read from the tape, not judged again under "
            "the changed verification settings (robot-harness replay without --decisions re-judges them)"))
    return result


def _rebuild(journal_path: str | Path, mission_id: str, *, overrides: dict[str, Any] | None,
             lenient: bool) -> tuple[list[Any], TapePlayer, Any, Any]:
    journal = open_journal(journal_path, clock=SystemClock(), ids=IdGenerator(None))
    try:
        events = journal.events()
        tape = journal.get_tape(mission_id)
    finally:
        journal.close()
    mission = [e for e in events if e.mission_id == mission_id]
    where = redact_url(journal_path)
    if not mission:
        raise UsageError(f"no mission {mission_id!r} in {where}", mission_id=mission_id)
    if tape is None or "run" not in tape.meta:
        raise UsageError(f"mission {mission_id} has no decision tape in {where} (it ran before the "
                         "supervisor kept tapes, or its tape could not be written: see the supervisor's log)",
                         mission_id=mission_id)
    before = [e for e in events if e.seq < mission[0].seq]
    config = load_harness_config(overrides=deep_merge(tape.meta.get("config", {}), overrides or {}))
    run = tape.meta["run"]
    player = TapePlayer(tape.entries, tape.ports, lenient=lenient)
    ports = {role: player.port(role) for role in tape.ports}
    extra: dict[str, Any] = {}
    if run.get("session"):
        from .operator.session import SessionContractCompiler

        extra = {"contract_compiler": SessionContractCompiler(), "coverage_reviewer": SessionContractCompiler()}
    elif run.get("spec"):
        from .core.mission_spec import MissionSpec, StructuredCoverageReviewer, structured_compiler

        extra = {"contract_compiler": structured_compiler(MissionSpec.model_validate(run["spec"]), config=config),
                 "coverage_reviewer": StructuredCoverageReviewer()}
    started = payload_of(mission[0], MissionStarted) if mission[0].type is EventType.MISSION_STARTED else None
    pin = (ConfigPin(version=started.config_version, content_hash=started.config_hash)
           if started is not None and started.config_version else None)  # the version it was pinned to, as it was
    others = [e for e in events if mission[0].seq < e.seq < mission[-1].seq and e.mission_id != mission_id]
    replay_journal = ReplayJournal(before, mission, others)
    runner = mission_runner(
        config=config, journal=replay_journal, clock=player.clock(), ids=player.ids(),
        skills=default_skills(config.navigation, ask_operator=config.interactions.ask_operator),
        snapshots=ports.get("snapshots"), planner=ports.get("planner"), navigation=ports.get("navigation"),
        robot_io=ports.get("robot_io"), feasibility=ports.get("feasibility"), verifier=ports.get("verifier"),
        recorder=ports.get("recorder"), recovery=ports.get("recovery"), artifacts=ports.get("artifacts"),
        memory=ports.get("memory"), stop_reads=player.stop_reads(), config_pin=pin, **extra)
    credentials = MissionCredentials.model_validate(run.get("credentials") or {})
    return (mission, player,
            lambda: runner.run(run["goal"], mission_id=mission_id, owner=run.get("owner", ""), credentials=credentials),
            lambda: replay_journal.events(mission_id=mission_id))
