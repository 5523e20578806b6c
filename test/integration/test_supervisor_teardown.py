"""Tearing the supervisor down is never an internal error: twice, or after a configure that failed half-way
(issue 13: Ctrl-C on `up` and a corrupt journal under `run` both reached a second teardown and raised)."""
from __future__ import annotations

from pathlib import Path

import pytest
import rclpy
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

from robot_harness.nodes.supervisor import SupervisorNode


@pytest.fixture()
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    ctx.try_shutdown()


def supervisor(context, journal: Path, **params) -> SupervisorNode:
    overrides = [Parameter("journal_path", value=str(journal)), Parameter("verifier_service", value=""),
                 Parameter("record_evidence", value=False),
                 *(Parameter(k, value=v) for k, v in params.items())]
    return SupervisorNode(context=context, parameter_overrides=overrides)


def test_a_configured_supervisor_torn_down_twice_is_a_no_op_the_second_time(context, tmp_path: Path):
    node = supervisor(context, tmp_path / "journal.sqlite3")
    assert node.trigger_configure() is TransitionCallbackReturn.SUCCESS
    assert node.journal is not None
    node._teardown()
    assert node.journal is None
    node._teardown()  # rclpy's own cleanup calls it again: nothing left, nothing raised
    node.destroy_node()


def test_a_supervisor_whose_journal_is_corrupt_fails_to_configure_and_tears_down_cleanly(context, tmp_path: Path):
    corrupt = tmp_path / "journal.sqlite3"
    corrupt.write_bytes(b"this is not a database" * 100)
    node = supervisor(context, corrupt)
    assert node.trigger_configure() is TransitionCallbackReturn.FAILURE  # the journal cannot be opened
    node.destroy_node()  # no AttributeError for what configure never made
    node._teardown()
