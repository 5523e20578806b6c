"""The closed loop's old address, kept as a thin façade: the loop is ``core.mission.runner``.

Build a runner with ``robot_harness.compose.mission_runner`` (the deployed
collaborators) or ``MissionRunner`` itself (every collaborator given).
"""
from __future__ import annotations

from .mission.progress import MALFORMED_ARGUMENTS
from .mission.runner import MAX_GOAL_CHARS, MissionOutcome, MissionRunner
from .ports import ModelCallSource

__all__ = ["MissionOutcome", "MissionRunner", "ModelCallSource", "MAX_GOAL_CHARS", "MALFORMED_ARGUMENTS"]
