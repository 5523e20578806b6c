"""Send a Mission goal (words, an explicit contract, or a template) and follow it: used by the CLI and the tests.

The client follows a mission by its **id**, not only by the goal handle it got.
A goal handle lives and dies with the supervisor process that accepted it: when
that supervisor is killed and restarted, the handle's result never comes. So
the client watches the server that accepted the goal; once that server has left
the graph (its status publisher is gone, or a status list no longer holds the
goal), it waits for a supervisor to come back and sends the same request again.
A known mission id is safe to send again: the supervisor answers it with the
mission's journaled record (reconciling an interrupted mission first) and runs
nothing twice (``SupervisorNode._repeat``).
"""
from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .core.errors import BackendUnavailable, HarnessTimeout

__all__ = ["FollowReport", "MissionClient", "lookup_hint"]

# What ``SupervisorNode._repeat`` says when it has no MISSION_FINISHED for the id (reconciliation failed
# or was not possible): a status, but not the mission's final one.
NO_RECORDED_END = "no recorded end"


def lookup_hint(mission_id: str) -> str:
    """The command that shows a mission's journaled outcome, for messages that cannot give it."""
    return f"robot-harness journal show --mission {mission_id}"


@dataclasses.dataclass
class FollowReport:
    """How the last ``MissionClient.send`` reached its answer (for the CLI's messages, tests and the kill test)."""

    mission_id: str = ""
    """The mission followed."""
    sends: int = 0
    """Goals sent for it, all with the same mission id."""
    server_losses: int = 0
    """Times the server following the mission left the graph before answering."""
    unanswered: int = 0
    """Sends that got neither an acceptance nor a refusal in time, from a server that stayed."""
    refused_while_back: int = 0
    """Refusals of a re-send by a supervisor that had just come back (not active yet)."""
    reasked: int = 0
    """Re-sends after an answer that was not the mission's final status."""
    lost_at: float | None = None
    """``time.monotonic()`` when the last server loss was noticed."""
    answered_at: float | None = None
    """``time.monotonic()`` when the answer arrived."""


class _Attempt:
    """One send of the mission's goal: its goal handle, its result and the server it went to."""

    def __init__(self, future: Any, servers: frozenset[tuple[int, ...]]) -> None:
        self.sent_at = time.monotonic()
        self.servers = servers  # status publishers on the graph when sent; extended at acceptance
        self.handle: Any = None
        self.result: Any = None
        self.feedback_at = 0.0
        self.seen_in_status = False
        self.dropped_from_status = False
        self.noted = False  # its acceptance was taken into account
        self._lock = threading.Lock()
        future.add_done_callback(self._on_goal)

    def _on_goal(self, fut: Any) -> None:
        handle = fut.result()
        with self._lock:
            self.handle = handle
        if handle is not None and handle.accepted:
            handle.get_result_async().add_done_callback(self._on_result)

    def _on_result(self, fut: Any) -> None:
        with self._lock:
            self.result = fut.result()

    @property
    def goal_uuid(self) -> bytes:
        handle = self.handle
        return bytes(handle.goal_id.uuid) if handle is not None else b""

    @property
    def refused(self) -> bool:
        return self.handle is not None and not self.handle.accepted


class MissionClient:
    """A small node with a Mission action client, in a given context."""

    def __init__(self, context: Any, *, action_name: str = "/robot_harness/mission", node_name: str = "mission_client") -> None:
        from action_msgs.msg import GoalStatusArray
        from rclpy.node import Node
        from rclpy.qos import qos_profile_action_status_default

        from .action import Mission
        from .nodes._util import ActionClient  # rclpy's, safe to create under a spinning executor

        self.Mission = Mission
        self.node = Node(node_name, context=context)
        self.client = ActionClient(self.node, Mission, action_name)
        self.action_name = action_name
        self._status_topic = f"{action_name.rstrip('/')}/_action/status"
        self._attempts: list[_Attempt] = []
        self._attempts_lock = threading.Lock()
        self.follow = FollowReport()
        # A second reader of the status list (rclpy's own updates goal handles only): it notices a
        # status list that no longer holds an accepted goal, i.e. a server that does not know it.
        self._status_sub = self.node.create_subscription(GoalStatusArray, self._status_topic, self._on_status,
                                                         qos_profile_action_status_default)

    # -- graph observations ---------------------------------------------------------

    def _servers(self) -> frozenset[tuple[int, ...]]:
        """The mission action's status publishers on the graph now, by endpoint gid: one per server."""
        return frozenset(tuple(info.endpoint_gid) for info in self.node.get_publishers_info_by_topic(self._status_topic))

    def _on_status(self, msg: Any) -> None:
        present = {bytes(s.goal_info.goal_id.uuid) for s in msg.status_list}
        with self._attempts_lock:
            attempts = list(self._attempts)
        for a in attempts:
            uid = a.goal_uuid
            if not uid or a.result is not None:
                continue
            if uid in present:
                a.seen_in_status = True
            elif a.seen_in_status:
                a.dropped_from_status = True

    def _server_lost(self, a: _Attempt) -> bool:
        """Has the server this attempt went to gone, with the attempt still unanswered?

        Gone: none of the status publishers seen when it was sent (or accepted) is on the graph any
        more (DDS drops a killed process's endpoints when its participant lease ends: 4 s in the
        shipped loopback profile), or a status list no longer holds the accepted goal. Feedback in the
        last second means the server is alive, whatever the graph cache says.
        """
        if time.monotonic() - a.feedback_at < 1.0:
            return False
        if a.dropped_from_status:
            return True
        return bool(a.servers) and not (a.servers & self._servers())

    # -- sending ----------------------------------------------------------------------

    def _send_once(self, msg: Any, on_feedback: Callable[[Any], None] | None) -> _Attempt:
        holder: list[_Attempt] = []

        def fb(m: Any) -> None:
            if holder:
                holder[0].feedback_at = time.monotonic()
            if on_feedback is not None:
                on_feedback(m.feedback)

        servers = self._servers()
        attempt = _Attempt(self.client.send_goal_async(msg, feedback_callback=fb), servers)
        holder.append(attempt)
        with self._attempts_lock:
            self._attempts.append(attempt)
        self.follow.sends += 1
        return attempt

    def _wait_for_server(self, lost: frozenset[tuple[int, ...]], deadline: float) -> bool:
        """Until a mission server other than the lost one is ready (False at the deadline)."""
        while time.monotonic() < deadline:
            if self.client.server_is_ready() and (self._servers() - lost):
                return True
            time.sleep(0.1)
        return False

    def send(
        self,
        goal: str,
        *,
        mission_id: str = "",
        overrides: dict[str, str] | None = None,
        timeout_s: float = 600.0,
        server_timeout_s: float = 30.0,
        on_feedback: Callable[[Any], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        owner: str = "",
        owner_token: str = "",
        answer_timeout_s: float = 10.0,
        max_sends: int = 4,
        max_server_losses: int = 20,
        max_reasks: int = 3,
        retry_pause_s: float = 0.5,
        comeback_s: float = 30.0,
        contract: str | Sequence[Any] | Mapping[str, Any] | None = None,
        template: str = "",
        template_params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
    ) -> tuple[bool, Any]:
        """Returns (accepted, result). Needs an executor spinning ``self.node``.

        ``contract`` (text, or obligations as data) or ``template`` with ``template_params`` make a
        structured mission (``goal`` is then its description, and may be empty); the supervisor checks
        it field by field, and an invalid one comes back BLOCKED with the problems in ``summary``.

        The mission id is chosen here when not given, so the request can be
        sent again safely, and is: when no accept/reject arrives within
        ``answer_timeout_s`` from a server that stays (a request lost in
        discovery; at most ``max_sends`` in a row), and when the server that
        was following the mission leaves the graph (a supervisor killed or
        restarted; at most ``max_server_losses``). After a loss the client
        waits for a mission server to come back, sends the same request, and
        returns the restarted supervisor's answer: the mission's journaled
        record, reconciled if it was interrupted. A refused request is
        ``(False, None)`` (a goal rejected) or ``(True, result)`` with
        ``result.refusal`` naming the reason; the caller reports it. A
        supervisor that comes back refuses until it is active (and has a fresh
        pose), so within ``comeback_s`` of a re-send after a loss a refusal is
        asked again (a mission the lost server had admitted is answered as a
        repeat once the new one is active; one still refused after that was
        never admitted, and the refusal is the answer). An answer that is not the
        mission's final status (the supervisor has no recorded end for it) is
        asked again ``max_reasks`` times, ``retry_pause_s`` apart and more.

        ``on_notice`` hears one line when the client starts waiting for a
        supervisor to come back and when it re-sends. ``self.follow`` says how
        the answer was reached. Raises ``BackendUnavailable`` when no server is
        there at first, ``HarnessTimeout`` (naming the mission id and how to
        look it up in the journal) when no final answer arrives in ``timeout_s``.
        """
        from diagnostic_msgs.msg import KeyValue

        from .core.mission_spec import MissionSpec
        from .nodes.conversions import mission_spec_to_goal

        spec = MissionSpec.build(goal=goal, contract=contract, template=template, params=template_params)
        mission_id = mission_id or f"mission-{uuid.uuid4().hex[:12]}"
        self.follow = follow = FollowReport(mission_id=mission_id)
        with self._attempts_lock:
            self._attempts = []
        if not self.client.wait_for_server(timeout_sec=server_timeout_s):
            raise BackendUnavailable(f"no mission server at {self.action_name} within {server_timeout_s} s",
                                     mission_id=mission_id)
        msg = mission_spec_to_goal(spec, self.Mission.Goal(
            mission_id=mission_id, owner=owner, owner_token=owner_token,
            overrides=[KeyValue(key=k, value=str(v)) for k, v in (overrides or {}).items()]))
        deadline = time.monotonic() + timeout_s
        notice = on_notice or (lambda _text: None)
        back_at = 0.0  # when the last re-send after a server loss went out
        unanswered_in_row = 0
        current = self._send_once(msg, on_feedback)

        accepted_once = False  # a server accepted this mission id before: it may have run it

        def coming_back(refusal: str = "") -> bool:
            """A supervisor just came back after a loss: its refusals (not active yet, no fresh pose yet)
            are not the answer for a mission the lost one may have admitted. "Not active" for a mission
            that was accepted is never the answer: activation (reconciliation, bag finalisation) can
            take longer than ``comeback_s``, so it is asked again until the deadline."""
            if follow.server_losses == 0:
                return False
            if refusal == "not_active" and accepted_once:
                return True
            return time.monotonic() - back_at <= comeback_s

        while True:
            answer = self._answer()
            if answer is not None:
                attempt, response = answer
                result = response.result
                if getattr(result, "refusal", "") and coming_back(result.refusal):
                    follow.refused_while_back += 1
                    self._forget(attempt)
                    self._pause(min(2.0, retry_pause_s * 2 ** min(follow.refused_while_back - 1, 4)), deadline)
                    current = self._send_once(msg, on_feedback)
                    continue
                if getattr(result, "refusal", "") or self._final(result):
                    follow.answered_at = time.monotonic()
                    return True, result  # a refusal is the caller's to report (it names its reason)
                if follow.reasked >= max_reasks:
                    raise self._timeout(
                        f"mission {mission_id}: the supervisor answered {follow.reasked + 1} times without the "
                        f"mission's final status ({result.status or 'no status'}: {result.summary[:200]})",
                        timeout_s, follow)
                follow.reasked += 1
                notice(f"{mission_id}: the supervisor has no final status for it yet; asking again")
                self._forget(attempt)
                self._pause(retry_pause_s * 2 ** (follow.reasked - 1), deadline)
                current = self._send_once(msg, on_feedback)
                continue
            if time.monotonic() > deadline:
                raise self._timeout(self._timeout_text(mission_id, timeout_s, follow), timeout_s, follow)
            if current.handle is not None and current.handle.accepted and not current.noted:
                current.noted, unanswered_in_row = True, 0
                accepted_once = accepted_once or follow.server_losses == 0
                current.servers = current.servers | self._servers()  # the server that accepted, if it is new
            if current.refused:
                if not coming_back():
                    return False, None
                follow.refused_while_back += 1
                self._pause(retry_pause_s, deadline)
                current = self._send_once(msg, on_feedback)
                continue
            if self._server_lost(current):
                follow.server_losses += 1
                follow.lost_at = time.monotonic()
                if follow.server_losses > max_server_losses:
                    raise self._timeout(f"mission {mission_id}: the mission server left the graph "
                                        f"{follow.server_losses} times while following it", timeout_s, follow)
                notice(f"{mission_id}: the supervisor following it left the graph; waiting for it to come back")
                if not self._wait_for_server(current.servers, deadline):
                    continue  # the deadline check above says what happened
                notice(f"{mission_id}: a supervisor is back; asking it for the mission by id")
                back_at = time.monotonic()
                current = self._send_once(msg, on_feedback)
                continue
            if current.handle is None and time.monotonic() - current.sent_at > answer_timeout_s:
                follow.unanswered += 1
                unanswered_in_row += 1
                if unanswered_in_row >= max_sends:
                    raise HarnessTimeout(
                        f"the mission server never answered {unanswered_in_row} sends of mission {mission_id}; "
                        f"if it was admitted, its outcome is in the journal: {lookup_hint(mission_id)}",
                        mission_id=mission_id, lookup=lookup_hint(mission_id), sends=follow.sends)
                current = self._send_once(msg, on_feedback)  # no accept/reject: the same request again
                continue
            time.sleep(0.1)

    def _answer(self) -> tuple[_Attempt, Any] | None:
        """The first result any send of this mission got (an old handle's result counts too)."""
        with self._attempts_lock:
            for a in self._attempts:
                if a.result is not None:
                    return a, a.result
        return None

    def _forget(self, attempt: _Attempt) -> None:
        with self._attempts_lock:
            self._attempts = [a for a in self._attempts if a is not attempt]

    def _final(self, result: Any) -> bool:
        """A mission's final status, not a supervisor saying it has none on record."""
        from .core.records import MissionStatus

        return result.status in {s.value for s in MissionStatus} and NO_RECORDED_END not in result.summary

    @staticmethod
    def _pause(seconds: float, deadline: float) -> None:
        time.sleep(max(0.0, min(seconds, deadline - time.monotonic())))

    @staticmethod
    def _timeout_text(mission_id: str, timeout_s: float, follow: FollowReport) -> str:
        if follow.lost_at is not None and follow.sends and follow.server_losses:
            gone = time.monotonic() - follow.lost_at
            return (f"mission {mission_id}: no final status within {timeout_s:g} s; the supervisor following it "
                    f"left the graph {gone:.1f} s ago and no supervisor answered for it since")
        return f"mission {mission_id} did not finish within {timeout_s:g} s; it may still be running"

    @staticmethod
    def _timeout(text: str, timeout_s: float, follow: FollowReport) -> HarnessTimeout:
        hint = lookup_hint(follow.mission_id)
        return HarnessTimeout(f"{text}; its journaled outcome: {hint}", mission_id=follow.mission_id,
                              lookup=hint, timeout_s=timeout_s, sends=follow.sends,
                              server_losses=follow.server_losses)

    def destroy(self) -> None:
        self.node.destroy_subscription(self._status_sub)
        self.client.destroy()
        self.node.destroy_node()
