"""Issue 15: every request between harness nodes carries the mission id and a request id, and a response
for another mission or request is dropped and journaled, never acted on.

The real graph against the simulated robot, with the supervisor's planner service pointed at a planner
that answers every turn with another mission's ids (what another graph's planner on the same domain and
service name does): its proposed navigation must never reach the robot."""
from __future__ import annotations

import json
from typing import Any

from robot_harness.core.records import ModelResponse, ToolCall

from ._graph import DONE, GO_SPOT, of_type, run, scenario

ROGUE = "/rogue_planner/plan_turn"


class RoguePlanner:
    """A planner service answering with a navigate_to proposal, under ids that are not the request's."""

    def __init__(self, node: Any, *, foreign: bool) -> None:
        from robot_harness.srv import PlanTurn

        self.asked: list[tuple[str, str]] = []
        self.foreign = foreign
        self.srv = node.create_service(PlanTurn, ROGUE, self._on_turn)

    def _on_turn(self, request: Any, response: Any) -> Any:
        self.asked.append((request.mission_id, request.request_id))
        if self.foreign:
            response.mission_id, response.request_id = "mission-of-another-graph", "turn-of-another-graph"
        else:
            response.mission_id, response.request_id = request.mission_id, request.request_id
        call = GO_SPOT["tool_calls"][0] if len(self.asked) == 1 else None
        out = ModelResponse(tool_calls=(ToolCall(id=f"c{len(self.asked)}", name=call["name"], arguments=call["arguments"]),)
                            if call else (), done=None if call else DONE["done"])
        response.ok, response.response_json = True, out.model_dump_json()
        return response


def _run_with(tmp_path, *, foreign: bool) -> tuple[dict, list, RoguePlanner]:
    from rclpy.node import Node

    holder: dict[str, RoguePlanner] = {}

    def hook(graph: Any) -> None:
        node = Node("rogue_planner", context=graph.context)
        holder["rogue"] = RoguePlanner(node, foreign=foreign)
        graph.add_node(node)

    report, events = run(tmp_path, scenario([GO_SPOT, DONE], timeout_s=20.0), graph_hook=hook,
                         extra_overrides={"supervisor": {"planner_service": ROGUE, "planner_timeout_s": 5.0}})
    return report, events, holder["rogue"]


def test_a_turn_answered_for_another_mission_is_dropped_journaled_and_nothing_moves(tmp_path):
    report, events, rogue = _run_with(tmp_path, foreign=True)
    assert rogue.asked, "the supervisor asked the rogue planner"
    mission_id = report["mission_id"]
    assert all(m == mission_id and r.startswith("turn-") for m, r in rogue.asked), rogue.asked
    assert len({r for _, r in rogue.asked}) == len(rogue.asked), "a request id per turn"
    dropped = of_type(events, "RESPONSE_DROPPED")
    assert dropped, report["event_counts"]
    first = dropped[0].payload
    assert first["service"] == ROGUE and first["call"] == "planner turn"
    assert (first["expected_mission_id"], first["expected_request_id"]) == rogue.asked[0]
    assert (first["received_mission_id"], first["received_request_id"]) == \
        ("mission-of-another-graph", "turn-of-another-graph")
    # Never acted on: no tool call recorded from it, nothing dispatched, nothing reached the robot.
    assert of_type(events, "TOOL_CALL_RECORDED") == [] and of_type(events, "ROBOT_ACTION_STARTED") == []
    assert [e for e in report["sim_truth"]["goal_log"] if e["event"] == "received"] == []
    assert report["status"] != "SUCCEEDED", json.dumps(report["summary"])


def test_the_same_planner_answering_with_the_requests_ids_is_acted_on(tmp_path):
    """The control: the same stand-in echoing the ids drives the mission to SUCCEEDED (the test above fails
    for the ids alone)."""
    report, events, rogue = _run_with(tmp_path, foreign=False)
    assert report["status"] == "SUCCEEDED", report["summary"]
    assert of_type(events, "RESPONSE_DROPPED") == []
    assert len(of_type(events, "ROBOT_ACTION_STARTED")) == 1
