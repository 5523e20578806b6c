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
from .config import HarnessConfig, VerificationConfig
from .contracts import ContractCompiler, ScenarioContractCompiler, TemplateContractCompiler
from .ports import SnapshotPort
from .records import WorldSnapshot
from .verifier import Verifier, VerifierConfig, VerifyRequest

__all__ = ["default_contract_compiler", "recovery_advisor", "verifier_config", "file_artifact_check", "InProcessVerifier",
           "PACKAGED_TEMPLATES"]

PACKAGED_TEMPLATES = Path(__file__).resolve().parents[2] / "config" / "contract_templates.yaml"
"""The template file in a source checkout; installed packages find it under share/robot_harness/config."""


def _templates_path(config: HarnessConfig) -> Path | None:
    if config.contract.templates_file:
        return Path(config.contract.templates_file).expanduser()
    candidates = [PACKAGED_TEMPLATES]
    import os

    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            candidates.append(Path(prefix) / "share" / "robot_harness" / "config" / "contract_templates.yaml")
    return next((p for p in candidates if p.is_file()), None)


def default_contract_compiler(config: HarnessConfig) -> ContractCompiler:
    """Scenario-provided obligations when the config carries them, else the template compiler."""
    if config.contract.obligations or config.contract.compiler == "scenario":
        return ScenarioContractCompiler(config.contract.obligations)
    if config.contract.compiler == "llm":
        # Imported here: the core stays free of the openai client unless asked for.
        from ..llm.client import ChatClient, LLMConfig, chat_complete_fn
        from .contracts import LLMContractCompiler

        return LLMContractCompiler(complete=chat_complete_fn(ChatClient(LLMConfig(**config.contract.llm))))
    if config.contract.compiler != "template":
        from .errors import UsageError

        raise UsageError(f"unknown contract compiler {config.contract.compiler!r} (template | scenario | llm)")
    path = _templates_path(config)
    if path is None:
        return TemplateContractCompiler()
    return TemplateContractCompiler.from_yaml(path)


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
