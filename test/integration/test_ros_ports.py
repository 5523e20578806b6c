"""ROS ports against stand-in servers over loopback DDS: what a slow answer costs.

The recovery port used to ask twice after 2 s; with a model advisor behind the
recovery service that meant running the model twice. These tests pin the
bounded-wait and single-ask behaviour the supervisor configures.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import rclpy
from rclpy.node import Node

from robot_harness.core.errors import UsageError
from robot_harness.core.recovery import Failure, FailureKind, RecoveryDecision, RecoveryPolicy, Rung
from robot_harness.nodes.executors import MultiThreadedExecutor
from robot_harness.nodes.ros_ports import RosRecoveryPort, recovery_call_budget

from ._spin import spin_in_thread
from .test_sim_robot import wait_until

SERVICE = "/test_recovery/decide"
ADVISOR_S = 1.0
"""How long the stand-in model takes to advise."""


class SlowRecovery:
    """A recovery service whose policy has a slow model advisor; counts the model calls."""

    def __init__(self, node: Node) -> None:
        from robot_harness.srv import Recover

        self.advised = 0
        self.answer_for: tuple[str, str] | None = None
        """(mission_id, request_id) to answer with instead of the request's: another graph's node."""
        self.asked: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self.policy = RecoveryPolicy(advisor=self._advise)
        self.srv = node.create_service(Recover, SERVICE, self._on_decide)

    def _advise(self, failure: Any, options: Any, context: Any) -> str:
        with self._lock:
            self.advised += 1
        time.sleep(ADVISOR_S)
        return "human_handoff"

    def _on_decide(self, request: Any, response: Any) -> Any:
        import json

        body = json.loads(request.request_json)
        self.asked.append((request.mission_id, request.request_id))
        response.mission_id, response.request_id = self.answer_for or (request.mission_id, request.request_id)
        decision = self.policy.decide(Failure.model_validate(body["failure"]), spent={})
        response.ok, response.decision_json = True, decision.model_dump_json()
        return response


@pytest.fixture
def graph() -> Iterator[tuple[Node, SlowRecovery]]:
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    server = Node("test_recovery", context=ctx)
    client = Node("test_recovery_client", context=ctx)
    executor = MultiThreadedExecutor(num_threads=4, context=ctx)
    executor.add_node(server)
    executor.add_node(client)
    slow = SlowRecovery(server)

    thread = spin_in_thread(executor, ctx)
    try:
        yield client, slow
    finally:
        rclpy.try_shutdown(context=ctx)
        thread.join(timeout=5.0)
        executor.shutdown(timeout_sec=2.0)
        server.destroy_node()
        client.destroy_node()
        ctx.destroy()


def failure() -> Failure:
    return Failure(failure_id="f1", failure_kind=FailureKind.TOOL_ERROR, reason="test", skill="navigate_to")


def test_a_short_wait_with_a_second_ask_runs_a_slow_advisor_twice(graph: tuple[Node, SlowRecovery]) -> None:
    client, slow = graph
    port = RosRecoveryPort(client, SERVICE, fallback=RecoveryPolicy(), timeout_s=0.4, attempts=2)
    decision: RecoveryDecision = port.decide(failure(), spent={})
    assert "decided in the supervisor" in decision.advice and decision.rung is Rung.LOCAL_REPLAN
    wait_until(lambda: slow.advised == 2, 5.0, "the second ask to reach the model")


def test_one_ask_that_outlasts_the_advisor_gets_its_answer_and_runs_it_once(graph: tuple[Node, SlowRecovery]) -> None:
    client, slow = graph
    timeout_s, attempts = recovery_call_budget("llm", {"timeout_s": ADVISOR_S, "max_retries": 0})
    assert attempts == 1 and timeout_s > ADVISOR_S
    port = RosRecoveryPort(client, SERVICE, fallback=RecoveryPolicy(), timeout_s=timeout_s, attempts=attempts)
    decision: RecoveryDecision = port.decide(failure(), spent={})
    assert decision.rung is Rung.HUMAN_HANDOFF and "advisor chose" in decision.advice
    time.sleep(0.5)
    assert slow.advised == 1


def test_an_answer_for_another_mission_or_request_is_dropped_recorded_and_never_acted_on(
        graph: tuple[Node, SlowRecovery]) -> None:
    """The server answers with another mission's ids (another graph on the domain): each answer is dropped
    and handed to the sink (the supervisor journals it), the ask is repeated with the same ids, and the
    decision is the caller's own fallback, saying why, never the foreign answer (HUMAN_HANDOFF here)."""
    client, slow = graph
    slow.answer_for = ("mission-other", "recover-other")
    dropped: list[dict[str, str]] = []
    port = RosRecoveryPort(client, SERVICE, fallback=RecoveryPolicy(), timeout_s=ADVISOR_S + 2.0, attempts=2,
                           on_dropped=dropped.append)
    port.mission_id = "mission-mine"
    decision: RecoveryDecision = port.decide(failure(), spent={})
    assert decision.rung is Rung.LOCAL_REPLAN and "another mission or request" in decision.advice
    assert "decided in the supervisor" in decision.advice
    assert len(slow.asked) == 2 and slow.asked[0] == slow.asked[1] and slow.asked[0][0] == "mission-mine"
    assert slow.asked[0][1].startswith("recover-")
    assert [(d["expected_mission_id"], d["received_mission_id"], d["received_request_id"]) for d in dropped] == \
        [("mission-mine", "mission-other", "recover-other")] * 2
    assert dropped[0]["expected_request_id"] == slow.asked[0][1] and dropped[0]["service"] == SERVICE
    assert "asking again" in dropped[0]["note"] and "no answer" in dropped[1]["note"]
    # The same server answering with the request's own ids is acted on.
    slow.answer_for = None
    assert port.decide(failure(), spent={}).rung is Rung.HUMAN_HANDOFF


def test_recovery_call_budget() -> None:
    assert recovery_call_budget("none") == (2.0, 2)
    # LLMConfig defaults: 60 s per attempt, 2 retries, backoff 0.5 s then 1 s; 5 s spare.
    assert recovery_call_budget("llm", {}) == (3 * 60.0 + 0.5 + 1.0 + 5.0, 1)
    assert recovery_call_budget("llm", {"timeout_s": 10, "max_retries": 3, "backoff_initial_s": 4,
                                        "backoff_max_s": 6}) == (4 * 10 + 4 + 6 + 6 + 5.0, 1)
    with pytest.raises(UsageError, match="unknown recovery advisor"):
        recovery_call_budget("oracle")


def test_the_port_refuses_a_budget_that_can_never_answer(graph: tuple[Node, SlowRecovery]) -> None:
    client, _ = graph
    with pytest.raises(UsageError):
        RosRecoveryPort(client, SERVICE, fallback=RecoveryPolicy(), timeout_s=2.0, attempts=0)
    with pytest.raises(UsageError):
        RosRecoveryPort(client, SERVICE, fallback=RecoveryPolicy(), timeout_s=0.0)


def test_the_recovery_nodes_model_calls_come_back_to_the_caller_for_its_journal() -> None:
    """The real recovery node with an llm advisor (the local OpenAI-compatible server): the decision's
    model call travels back in the response, so the supervisor journals every model call of a mission."""
    import json

    from rclpy.parameter import Parameter

    from robot_harness.core.ports import ModelCallSource
    from robot_harness.nodes.recovery import RecoveryNode
    from test.fake_openai import FakeOpenAI

    with FakeOpenAI([{"content": "human_handoff"}]) as fake:
        ctx = rclpy.Context()
        rclpy.init(context=ctx)
        node = RecoveryNode(context=ctx, parameter_overrides=[
            Parameter("advisor", value="llm"),
            Parameter("advisor_llm_json", value=json.dumps({"base_url": fake.base_url, "model": "advisor-model",
                                                            "timeout_s": 5.0, "max_retries": 0})),
        ])
        client = Node("test_recovery_llm_client", context=ctx)
        executor = MultiThreadedExecutor(num_threads=4, context=ctx)
        executor.add_node(node)
        executor.add_node(client)
        thread = threading.Thread(target=executor.spin, daemon=True)
        thread.start()
        try:  # torn down executor first, context last (a context shut down under a spin raises in it)
            assert node.trigger_configure().name == "SUCCESS" and node.trigger_activate().name == "SUCCESS"
            timeout_s, attempts = recovery_call_budget("llm", {"timeout_s": 5.0, "max_retries": 0})
            port = RosRecoveryPort(client, "/recovery/decide", fallback=RecoveryPolicy(), timeout_s=timeout_s,
                                   attempts=attempts)
            assert isinstance(port, ModelCallSource)
            decision = port.decide(failure(), spent={})
            assert decision.rung is Rung.HUMAN_HANDOFF and decision.advice == "advisor chose human_handoff"
            (call,) = port.drain_calls()
            assert call["kind"] == "llm_call" and call["model"] == "advisor-model"
            assert port.drain_calls() == [], "each record is handed over once"
            assert len(fake.requests) == 1
        finally:
            executor.shutdown(timeout_sec=5.0)
            thread.join(timeout=5.0)
            node.destroy_node()
            client.destroy_node()
            rclpy.try_shutdown(context=ctx)
