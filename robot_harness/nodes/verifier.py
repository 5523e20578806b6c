"""The verifier node: the only process that judges whether a mission is done.

It serves ``~/verify`` (robot_harness/srv/Verify). Its input is only the
user's original goal, the frozen completion contract, the mission's execution
receipts and the task state version; it captures a fresh snapshot itself from
the snapshot aggregator. It never sees the planner's claims, messages or
reasoning (the request type has no field for them and refuses extra fields),
and it writes nothing: its verdict goes back to the supervisor, whose commit
gate decides whether the verdict still matches the current task state.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from ..compose import file_artifact_check, verifier_config
from ..core.clock import IdGenerator, SystemClock
from ..core.config import VerificationConfig
from ..core.errors import HarnessError
from ..core.verifier import Verifier, VerifyRequest
from ._lifecycle import ConfigureError, HarnessLifecycleNode
from .diagnostics import Check, Level
from ._util import run_node
from .executors import BackgroundSpinner
from .ros_ports import RosSnapshotPort

__all__ = ["VerifierNode", "main"]


class VerifierNode(HarnessLifecycleNode):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("verifier", params={
            "capture_service": "snapshot_aggregator/capture",
            "capture_timeout_s": 2.0,
            "verification_json": "",
            "id_seed": -1,
            "autostart": False,
        }, **kwargs)
        self._verifier: Verifier | None = None
        self._snapshots: RosSnapshotPort | None = None
        self._spinner: BackgroundSpinner | None = None
        self._srv: Any = None
        self.autostart_if_asked()

    def diagnostic_tasks(self) -> dict[str, Callable[[], Check]]:
        return {"verifier": lambda: Check(Level.OK, "verifier ready", {}) if self._verifier is not None
                else Check(Level.WARN, "not configured: no verdicts", {})}

    def build(self, params: dict[str, Any]) -> None:
        from ..srv import Verify

        p = params
        try:
            v = VerificationConfig.model_validate(json.loads(p["verification_json"]) if p["verification_json"] else {})
        except (ValueError, ValidationError) as exc:
            raise ConfigureError("verification_json", exc) from exc
        seed = int(p["id_seed"])
        self._verifier = Verifier(
            verifier_config(v),
            semantic=None, artifact_check=file_artifact_check, ids=IdGenerator(None if seed < 0 else seed),
            clock=SystemClock(), name=self.get_fully_qualified_name(),
        )
        # The capture client lives on its own spinner so the service callback
        # can wait for it on this node's single-threaded executor.
        self._spinner = BackgroundSpinner(context=self.context, name=f"{self.get_name()}_observe",
                                          namespace=self.get_namespace()).start()
        self._snapshots = RosSnapshotPort(self._spinner.node, p["capture_service"], timeout_s=float(p["capture_timeout_s"]))
        self._srv = self.create_service(Verify, "~/verify", self._on_verify)

    def release(self) -> None:
        """Also the observation spinner's thread (``destroy_node`` calls this without a cleanup transition)."""
        if self._srv is not None:
            self.destroy_service(self._srv)
            self._srv = None
        if self._spinner is not None:
            if self._spinner.stop() and self._snapshots is not None:  # see BackgroundSpinner.quiet
                self._snapshots.destroy(self._spinner.node)
            self._spinner.destroy()
            self._spinner = None
        self._snapshots = None
        self._verifier = None

    def _on_verify(self, request: Any, response: Any) -> Any:
        response.mission_id, response.request_id = request.mission_id, request.request_id  # correlation, always
        if not self._active or self._verifier is None or self._snapshots is None:
            response.ok, response.error = False, "verifier is not active"
            return response
        try:
            req = VerifyRequest.model_validate_json(request.request_json)
        except ValidationError as exc:
            response.ok, response.error = False, f"malformed verify request: {exc.error_count()} problem(s): {exc.errors(include_url=False)[:3]}"
            return response
        if request.mission_id and req.mission_id != request.mission_id:
            response.ok, response.error = False, (f"malformed verify request: sent for mission {request.mission_id!r} "
                                                  f"but its body is mission {req.mission_id!r}")
            return response
        try:
            fresh = self._snapshots.capture(reason="verification", mission_id=req.mission_id)
            verdict = self._verifier.verify(req, fresh)
        except HarnessError as exc:
            response.ok, response.error = False, f"{exc.code}: {exc.message}"
            return response
        response.ok = True
        response.verdict_json = verdict.model_dump_json()
        response.snapshot_json = fresh.model_dump_json()
        return response


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``ros2 run robot_harness verifier``."""
    return run_node(VerifierNode, argv, threads=1)
