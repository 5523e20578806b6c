"""The composition root: the one place that wires concrete backends into the core.

The core takes its collaborators as required arguments and imports nothing
from ``llm/``, ``evidence/``, ``nodes/`` or ``operator/``. This module picks,
from a config, which contract compiler a mission gets (the goal grammar, a
scenario's obligations, or a model checked against the grammar), the
coverage review, the recovery policy and its advisor, the artifact checker
(``evidence.bag.verify_artifact``, the same one replay and audit use) and
the in-process verifier, and builds a ``MissionRunner`` from them. The
supervisor node gives the runner the verifier node's service instead of the
in-process verifier, so in deployment the judgement happens in another
process that never sees the planner.
"""
from __future__ import annotations

from typing import Any

from .core.authority import InProcessVerifier, verifier_config
from .core.config import HarnessConfig, packaged_config, place_aliases
from .core.contracts import ContractCompiler, CoverageReviewer, RuleCoverageReviewer, ScenarioContractCompiler
from .core.errors import UsageError
from .core.goals import GoalCompiler, Lexicon, load_lexicon
from .core.mission.runner import MissionRunner
from .core.ports import SnapshotPort
from .core.clock import Clock, IdGenerator
from .core.recovery import RecoveryBudgets, RecoveryPolicy
from .evidence.bag import verify_artifact

__all__ = ["default_contract_compiler", "default_coverage_reviewer", "goal_lexicon", "recovery_advisor",
           "recovery_policy", "verifier_config", "file_artifact_check", "in_process_verifier", "mission_runner",
           "packaged_config"]

file_artifact_check = verify_artifact
"""Re-hash a file:// artifact; raises when it is missing or changed (the one checker: live, replay, audit)."""


def goal_lexicon(config: HarnessConfig) -> Lexicon:
    """The goal compiler's lexicon: ``contract.lexicon_file``, else the shipped config/goal_lexicon.yaml."""
    if config.contract.lexicon_file:
        return load_lexicon(config.contract.lexicon_file)
    path = packaged_config("goal_lexicon.yaml")
    if path is None:
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
        raise UsageError(f"unknown contract compiler {config.contract.compiler!r} (grammar | scenario | llm)")
    rules = GoalCompiler(goal_lexicon(config), aliases=place_aliases(config))
    if config.contract.compiler == "llm":
        from .core.contracts import LLMContractCompiler
        from .llm.client import ChatClient, LLMConfig, chat_complete_fn

        return LLMContractCompiler(complete=chat_complete_fn(ChatClient(LLMConfig(**config.contract.llm))),
                                   reference=rules, reviewer=default_coverage_reviewer(config))
    return rules


def recovery_advisor(config: HarnessConfig) -> Any:
    """The model that advises recovery (``recovery.advisor: llm``), or None."""
    if config.recovery.advisor != "llm":
        return None
    from .llm.advisor import LLMRecoveryAdvisor
    from .llm.client import ChatClient, LLMConfig

    return LLMRecoveryAdvisor(ChatClient(LLMConfig(**config.recovery.llm)))


def recovery_policy(config: HarnessConfig) -> RecoveryPolicy:
    """The in-process recovery ladder with its budgets, alternatives and (optional) advisor."""
    return RecoveryPolicy(RecoveryBudgets.from_config(config.recovery), alternatives=config.recovery.alternatives,
                          advisor=recovery_advisor(config))


def in_process_verifier(*, config: HarnessConfig, snapshots: SnapshotPort, ids: IdGenerator, clock: Clock,
                        semantic: Any = None, artifact_check: Any = None) -> InProcessVerifier:
    """``artifact_check`` (default: the files on disk, ``evidence.bag.verify_artifact``) is how cited
    artifacts are looked at: a decision tape wraps it, as it reads the world."""
    return InProcessVerifier(config=config, snapshots=snapshots, ids=ids, clock=clock,
                             artifact_check=artifact_check or file_artifact_check, semantic=semantic)


class ArtifactChecker:
    """The artifact check as a port (one method), so a decision tape can record what it answered."""

    def __init__(self, check: Any = None) -> None:
        self._check = check or file_artifact_check

    def check(self, *args: Any, **kwargs: Any) -> Any:
        return self._check(*args, **kwargs)


def mission_runner(*, config: HarnessConfig, snapshots: SnapshotPort, ids: IdGenerator, clock: Clock,
                   verifier: Any = None, contract_compiler: ContractCompiler | None = None,
                   coverage_reviewer: CoverageReviewer | None = None, recovery: Any = None,
                   artifacts: Any = None, **parts: Any) -> MissionRunner:
    """A ``MissionRunner`` with the deployed collaborators for what ``parts`` does not give.

    ``parts``: the runner's other arguments (journal, skills, planner,
    navigation, robot_io, recorder, on_update, sleep). ``artifacts``: an
    :class:`ArtifactChecker` for the in-process verifier (default: the files).
    """
    return MissionRunner(
        config=config, snapshots=snapshots, ids=ids, clock=clock,
        verifier=verifier or in_process_verifier(config=config, snapshots=snapshots, ids=ids, clock=clock,
                                                 artifact_check=artifacts.check if artifacts is not None else None),
        contract_compiler=contract_compiler or default_contract_compiler(config),
        coverage_reviewer=coverage_reviewer or default_coverage_reviewer(config),
        recovery=recovery or recovery_policy(config),
        progress_verifier_config=verifier_config(config),
        **parts)
