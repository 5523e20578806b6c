"""Wiring for completion authority: which contract compiler a mission gets, and
the in-process verifier port (the same ``Verifier`` the verifier node runs).

The engine uses ``InProcessVerifier`` when no verifier port is given (unit
tests, ``bench/``); the supervisor node gives it the verifier node's service
instead, so in deployment the judgement happens in another process that
never sees the planner.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .clock import Clock, IdGenerator
from .completion import Verdict
from .config import HarnessConfig, VerificationConfig, place_aliases
from .contracts import ContractCompiler, CoverageReviewer, RuleCoverageReviewer, ScenarioContractCompiler
from .goals import GoalCompiler, Lexicon, load_lexicon
from .ports import SnapshotPort
from .records import WorldSnapshot
from .verifier import Verifier, VerifierConfig, VerifyRequest

__all__ = ["default_contract_compiler", "default_coverage_reviewer", "goal_lexicon", "recovery_advisor",
           "verifier_config", "file_artifact_check", "InProcessVerifier", "packaged_config"]


def packaged_config(name: str) -> Path | None:
    """A shipped config file: the source checkout's config/, else share/robot_harness/config under an ament prefix."""
    import os

    candidates = [Path(__file__).resolve().parents[2] / "config" / name]
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            candidates.append(Path(prefix) / "share" / "robot_harness" / "config" / name)
    return next((p for p in candidates if p.is_file()), None)


def goal_lexicon(config: HarnessConfig) -> Lexicon:
    """The goal compiler's lexicon: ``contract.lexicon_file``, else the shipped config/goal_lexicon.yaml."""
    if config.contract.lexicon_file:
        return load_lexicon(config.contract.lexicon_file)
    path = packaged_config("goal_lexicon.yaml")
    if path is None:
        from .errors import UsageError

        raise UsageError("no goal lexicon: set contract.lexicon_file (the package ships config/goal_lexicon.yaml)")
    return load_lexicon(path)


def default_coverage_reviewer(config: HarnessConfig) -> CoverageReviewer:
    """The rule-based coverage review over the same lexicon and the map's aliases."""
    return RuleCoverageReviewer(lexicon=goal_lexicon(config), aliases=place_aliases(config))


def default_contract_compiler(config: HarnessConfig) -> ContractCompiler:
    """Scenario-provided obligations when the config carries them, else the goal compiler (or the model's)."""
    if config.contract.obligations or config.contract.compiler == "scenario":
        return ScenarioContractCompiler(config.contract.obligations)
    if config.contract.compiler not in ("grammar", "template", "llm"):
        from .errors import UsageError

        raise UsageError(f"unknown contract compiler {config.contract.compiler!r} (grammar | scenario | llm)")
    rules = GoalCompiler(goal_lexicon(config), aliases=place_aliases(config))
    if config.contract.compiler == "llm":
        # Imported here: the core stays free of the openai client unless asked for.
        from ..llm.client import ChatClient, LLMConfig, chat_complete_fn
        from .contracts import LLMContractCompiler

        return LLMContractCompiler(complete=chat_complete_fn(ChatClient(LLMConfig(**config.contract.llm))),
                                   reference=rules, reviewer=default_coverage_reviewer(config))
    return rules


def verifier_config(config: HarnessConfig | VerificationConfig) -> VerifierConfig:
    v = config.verification if isinstance(config, HarnessConfig) else config
    return VerifierConfig(**v.model_dump())


def file_artifact_check(uri: str, sha256: str) -> None:
    """Re-hash a file:// artifact; raises when it is missing or changed."""
    from ..evidence.bag import verify_artifact

    verify_artifact(uri, sha256)


class InProcessVerifier:
    """A ``VerifierPort`` running the core ``Verifier`` in this process on a fresh snapshot."""

    name = "verifier(in-process)"

    def __init__(self, *, config: HarnessConfig, snapshots: SnapshotPort, ids: IdGenerator, clock: Clock,
                 semantic: Any = None) -> None:
        self._snapshots = snapshots
        self._verifier = Verifier(verifier_config(config), semantic=semantic, artifact_check=file_artifact_check,
                                  ids=ids, clock=clock, name=self.name)

    def verify(self, request: VerifyRequest) -> tuple[Verdict, WorldSnapshot]:
        fresh = self._snapshots.capture(reason="verification", mission_id=request.mission_id)
        return self._verifier.verify(request, fresh), fresh


def recovery_advisor(config: HarnessConfig) -> Any:
    """The model that advises recovery (``recovery.advisor: llm``), or None."""
    if config.recovery.advisor != "llm":
        return None
    from ..llm.advisor import LLMRecoveryAdvisor
    from ..llm.client import ChatClient, LLMConfig

    return LLMRecoveryAdvisor(ChatClient(LLMConfig(**config.recovery.llm)))
