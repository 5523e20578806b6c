"""One executor spinning in a thread for a test rig, until its context is shut down.

The rigs' teardown stops spinning by shutting the context down. rclpy reports that where it lands:
``ExternalShutdownException``, an ``RCLError``, or, when the shutdown catches the executor building
its wait set, ``InvalidHandle`` ("cannot use Destroyable because destruction was requested"). Each is
the end of spinning then; while the context is up, each is a real error and is raised (pytest reports
an exception in a thread)."""
from __future__ import annotations

import threading
from typing import Any

from rclpy._rclpy_pybind11 import InvalidHandle, RCLError
from rclpy.executors import ExternalShutdownException

__all__ = ["spin_in_thread"]


def spin_in_thread(executor: Any, ctx: Any) -> threading.Thread:
    def spin() -> None:
        try:
            executor.spin()
        except (ExternalShutdownException, RCLError, InvalidHandle):
            if ctx.ok():
                raise

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    return thread
