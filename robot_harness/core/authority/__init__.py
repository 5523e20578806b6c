"""Completion authority: receipts (``receipts``), the done decision (``done``), and the in-process
verifier port. What decides that a mission is done takes its collaborators by injection: the
concrete ones (the artifact checker, a model-backed compiler or advisor) are wired in
``robot_harness.compose``, outside the core.
"""
from __future__ import annotations

from ..clock import Clock, IdGenerator
from ..completion import Verdict
from ..config import HarnessConfig, VerificationConfig
from ..ports import SnapshotPort
from ..records import WorldSnapshot
from ..verifier import ArtifactCheck, Verifier, VerifierConfig, VerifyRequest

__all__ = ["InProcessVerifier", "verifier_config"]


def verifier_config(config: HarnessConfig | VerificationConfig) -> VerifierConfig:
    v = config.verification if isinstance(config, HarnessConfig) else config
    return VerifierConfig(**v.model_dump())


class InProcessVerifier:
    """A ``VerifierPort`` running the core ``Verifier`` in this process on a fresh snapshot.

    The verifier node runs the same ``Verifier``; in deployment the judgement
    happens there, in another process that never sees the planner.
    """

    name = "verifier(in-process)"

    def __init__(self, *, config: HarnessConfig, snapshots: SnapshotPort, ids: IdGenerator, clock: Clock,
                 artifact_check: ArtifactCheck, semantic: object = None) -> None:
        self._snapshots = snapshots
        self._verifier = Verifier(verifier_config(config), semantic=semantic, artifact_check=artifact_check,
                                  ids=ids, clock=clock, name=self.name)

    def verify(self, request: VerifyRequest) -> tuple[Verdict, WorldSnapshot]:
        fresh = self._snapshots.capture(reason="verification", mission_id=request.mission_id)
        return self._verifier.verify(request, fresh), fresh
