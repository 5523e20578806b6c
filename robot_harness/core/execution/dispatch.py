"""Dispatch: the only caller of ``NavigationPort.send_goal``, and the runner of capability calls.

A physical call is dispatched only after a fresh-state check passes, with its
keyed intent and leases durable in the same commit as that check; a lost
acknowledgment is looked up by goal id, never re-sent. A capability call
that holds resources is keyed and leased the same way.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from typing import Any

from pydantic import BaseModel

from ..clock import Clock, IdGenerator
from ..config import HarnessConfig, navigation_workspace
from ..durable import SITE, DispatchKey, DuplicateDispatch, LeaseConflict, ReleaseReason, StaleFence, goal_uuid_for
from ..errors import HarnessError, HarnessTimeout, UsageError
from ..lifecycle import ManagedAction
from ..ports import FeasibilityPort, NavigationPort, RobotIO
from ..routing import SKILL_CAPABILITY, Outcomes, ProviderNavigation, RoutingDecision, route
from ..nav_goals import NavGoal, NavGoalKind
from ..preconditions import CostProbe, Feasibility, PathProbe, ProbeStatus, check_preconditions
from ..reconcile import ACTIVE_STATUSES, TERMINAL_STATUSES
from ..payloads import ActionPreconditionChecked
from ..records import (ActionStatus, Availability, EventDraft, EventType, ToolCall, ToolResult, ToolResultStatus,
                       WorldSnapshot)
from ..skills import Skill, ToolEnv, nav_goal_for
from ..mission.ledger import MissionLedger, StoppedBeforeDispatch
from ..mission.observations import Observations
from ..mission.state import MissionState
from . import results
from .leases import LEASE_MARGIN_S, Leases

__all__ = ["Dispatcher", "Blocked", "SITE_RACES"]

SITE_RACES = 3
"""How often a navigation goes back to waiting for a site resource another robot's commit took between this
robot's look and its own commit (each time through the whole fresh-state check again)."""


class _LostSiteRace(Exception):
    """A site resource found free was taken by another robot's commit first; nothing of this try was written."""


class Blocked:
    """Why new physical work is refused (a journal write failed), shared by the runner and the dispatcher."""

    def __init__(self) -> None:
        self.reason: str | None = None


@dataclass(eq=False, kw_only=True)
class Dispatcher:
    config: HarnessConfig
    state: MissionState
    ledger: MissionLedger
    observations: Observations
    leases: Leases
    navigation: NavigationPort
    robot_io: RobotIO | None
    ids: IdGenerator
    clock: Clock
    blocked: Blocked
    feasibility: FeasibilityPort | None = None
    """Who answers the readiness and feasibility checks (None: each is reported not applicable)."""
    remembered: Callable[[str], Outcomes] | None = None
    """Remembered verified outcomes per provider of a capability (core/memory's operational memory), for routing."""

    # -- managed physical actions ---------------------------------------------------

    def navigate(self, turn_id: str, decision: WorldSnapshot, call: ToolCall, skill: Skill,
                 args: Any) -> tuple[ToolResult, ManagedAction | None]:
        """Dispatch one physical call; the action when the backend accepted it (supervision follows).

        Any Nav2 goal (``skill.managed.goal_kind``): a pose, a route through places, a behaviour. A route
        is checked leg by leg (a path to each waypoint from the one before, each waypoint's cell); a
        behaviour has no target, so only the world and readiness checks apply to it."""
        assert skill.managed is not None
        s, nav = self.state, skill.managed.navigation
        if self.blocked.reason:
            return results.rejected(call, f"physical work blocked: {self.blocked.reason}"), None
        try:
            goal_decision = nav_goal_for(skill, args, s.places)
        except UsageError as exc:
            return results.error(call, exc.code, exc.message, exc.details), None
        key = self.leases.key(skill, args)
        s.node_of_call[call.id] = key.node
        existing = self.leases.just_done(key)  # a repeated key is refused by the intent's commit
        if existing is not None:
            return _duplicate(call, DuplicateDispatch("already dispatched", existing)), None
        self.ledger.stage("checking")
        conflict = self.leases.free(skill)
        if conflict is not None:
            return _lease_conflict(call, conflict), None
        site = self.leases.site_needs(skill, decision.pose, goal_decision.poses)
        for race in range(SITE_RACES + 1):
            conflict = self.leases.free_site(site, deadline=s.deadline)
            if conflict is not None:
                return _lease_conflict(call, conflict), None
            try:
                return self._check_and_send(turn_id, decision, call, skill, args, key, goal_decision, site,
                                            last_try=race == SITE_RACES)
            except _LostSiteRace:
                continue  # another robot's commit took it between the look and ours: wait for it again
        raise AssertionError("unreachable")

    def _check_and_send(self, turn_id: str, decision: WorldSnapshot, call: ToolCall, skill: Skill, args: Any,
                        key: DispatchKey, goal_decision: NavGoal, site: tuple[str, ...], *,
                        last_try: bool) -> tuple[ToolResult, ManagedAction | None]:
        """The fresh-state check right before dispatch, the keyed intent and the send. ``_LostSiteRace`` when
        a site resource this robot found free was taken by another robot's commit first (unless ``last_try``):
        nothing was written, and the caller waits for it again."""
        s = self.state
        assert skill.managed is not None
        nav = skill.managed.navigation
        # Last, right before dispatch: the fresh-state check (reconciling a lease may have taken a while).
        fresh, snap_draft = self.observations.capture("pre_dispatch")
        goal = nav_goal_for(skill, args, s.places)
        feasibility = self._probe(nav.preconditions, fresh, goal)
        report = check_preconditions(
            nav.preconditions, decision=decision, fresh=fresh,
            target_at_decision=goal_decision.target, target_now=goal.target, waypoints=goal.poses[:-1],
            active_actions=[a.view() for a in s.actions if not a.terminal],  # only a live one can conflict
            workspace=navigation_workspace(nav, s.places),
            feasibility=feasibility, path_budget_m=self._path_budget_m(nav),
        )
        check_draft = self.ledger.draft(EventType.ACTION_PRECONDITION_CHECKED, model_turn_id=turn_id,
                                         tool_call_id=call.id, snapshot_id=fresh.snapshot_id,
                                         payload=ActionPreconditionChecked.model_validate(report.model_dump(mode="json")))
        if not report.ok:
            self.ledger.append_many([snap_draft, check_draft])
            return results.result(call, ToolResultStatus.PRECONDITION_CHANGED, {
                "failed": [c.model_dump() for c in report.failed],
                "fresh_snapshot_id": fresh.snapshot_id,
                "note": "nothing was sent to the robot; a new turn starts on the fresh snapshot",
            }), None
        action = ManagedAction(
            action_id=self.ids.new("act"), mission_id=s.mission_id, tool_call_id=call.id, model_turn_id=turn_id,
            skill=skill.name, target=goal.target if goal.target is not None else fresh.pose,
            decision_snapshot_id=decision.snapshot_id, backend=skill.managed.backend, now=self.clock.now(),
        )
        action.goal = goal
        action.waypoint_names = tuple(getattr(args, "places", ()) or ())
        action.dispatch_snapshot = fresh
        path = feasibility.path if feasibility is not None else None
        distance = goal.length_from(fresh.pose) if fresh.pose is not None else 0.0
        distance += _behavior_extent(goal)  # 0 for a navigation
        if path is not None and path.ok and path.length_m is not None:  # the way it will walk, not the crow's
            distance = max(distance, path.length_m)
        action.timeout_s = nav.timeout_s + nav.timeout_per_m_s * distance + goal.wait_s
        routing = self._route(key.node)
        if routing is not None and routing.chosen is None:
            self.ledger.append_many([snap_draft, check_draft])
            return results.rejected(call, f"no navigation provider may act: {routing.reason}", code="no_provider",
                                    routing=routing.as_dict()), None
        refused = self._commit_intent(turn_id, call, skill, key, action, [snap_draft, check_draft], routing, site,
                                      lost_race_raises=not last_try)
        if refused is not None:
            return refused, None
        return self._send(call, skill, action, goal_uuid_for(key.text))

    def _probe(self, pre: Any, fresh: WorldSnapshot, goal: NavGoal) -> Feasibility | None:
        """The robot's readiness and feasibility answers, asked right before the check (None: no one to ask).

        A route is asked leg by leg: the first leg with the readiness questions, each later one from the
        waypoint before it; the answers are folded into one (the paths' lengths summed, the first leg
        without a path and the costliest waypoint cell named)."""
        if self.feasibility is None:
            return None
        if len(goal.poses) <= 1:
            return self.feasibility.probe(pre=pre, start=fresh.pose, goal=goal.target, frame_id=self.config.frame_id)
        legs: list[Feasibility] = []
        start = fresh.pose
        for k, pose in enumerate(goal.poses):
            legs.append(self.feasibility.probe(pre=pre if k == 0 else pre.model_copy(update={"lifecycle_active": ()}),
                                               start=start, goal=pose, frame_id=self.config.frame_id))
            start = pose
        return _fold_legs(legs)

    def _path_budget_m(self, nav: Any) -> float | None:
        """The longest path the robot could walk in the mission's time left at the pace the action timeout
        allows per metre (``timeout_per_m_s``); None when the mission has no deadline or the timeout does not
        grow with length. The timeout's fixed part (``timeout_s``) is slack for acceptance and the last
        metre, not travel: counting it refused a reachable goal whenever ``timeout_s`` was near the mission's
        own limit (an 8 m goal at 0.25 m/s in a 60 s mission with ``timeout_s: 60``)."""
        left = self.state.deadline - self.clock.monotonic()
        if not math.isfinite(left) or nav.timeout_per_m_s <= 0.0:
            return None
        return max(left, 0.0) / nav.timeout_per_m_s

    def _route(self, node: str) -> RoutingDecision | None:
        """Which navigation provider acts for plan node ``node`` (None: the port has one provider only).

        Scored over the navigation cards the port serves, with the remembered verified outcomes plus this
        mission's; a provider that failed this node in this mission is excluded (the fallback)."""
        if not isinstance(self.navigation, ProviderNavigation):
            return None
        cards = {n: c for n, c in self.config.providers.items() if c.capability == "navigation"}
        if not cards:
            return None
        served = set(self.navigation.providers)
        excluded = {n: "not served by this robot" for n in cards if n not in served}
        excluded.update(self.state.provider_failed.get(node, {}))
        return route("navigation", cards, self.config.routing, outcomes=self._outcomes("navigation"),
                     excluded=excluded)

    def _route_capability(self, skill: str, node: str) -> RoutingDecision | None:
        """Which provider acts for a capability call (camera, speech, messaging); None when the site lists no
        card of its capability. A camera is chosen only where the robot I/O can switch cameras."""
        capability = SKILL_CAPABILITY.get(skill)
        cards = {n: c for n, c in self.config.providers.items() if c.capability == capability}
        if capability is None or not cards:
            return None
        excluded = dict(self.state.provider_failed.get(node, {}))
        if len(cards) > 1 and not _switchable(capability, self.robot_io):
            # the robot's I/O has one device of this kind: one card may act for it, the first by name
            first = min(cards)
            excluded.update({n: f"this robot's I/O cannot switch {capability} providers" for n in cards if n != first})
        return route(capability, cards, self.config.routing, outcomes=self._outcomes(capability), excluded=excluded)

    def _outcomes(self, capability: str) -> dict[str, tuple[int, int]]:
        """Remembered verified outcomes of ``capability``'s providers plus this mission's."""
        outcomes = dict(self.remembered(capability)) if self.remembered is not None else {}
        for name, (wins, tries) in self.state.provider_tally.items():
            w0, t0 = outcomes.get(name, (0, 0))
            outcomes[name] = (w0 + wins, t0 + tries)
        return outcomes

    def _commit_intent(self, turn_id: str, call: ToolCall, skill: Skill, key: DispatchKey, action: ManagedAction,
                       checked: list[EventDraft], routing: RoutingDecision | None = None,
                       site: tuple[str, ...] = (), lost_race_raises: bool = False) -> ToolResult | None:
        """Make the fresh snapshot, the passing check, the dispatch intent (keyed, so a repeat is
        refused) and the resource leases durable, in one revision-checked commit, before anything
        is sent. None when committed; else the call's result (a duplicate, a lease conflict, a Stop)."""
        s, nav = self.state, skill.managed.navigation  # type: ignore[union-attr]
        assert action.target is not None
        started = self.ledger.draft(
            EventType.ROBOT_ACTION_STARTED, model_turn_id=turn_id, tool_call_id=call.id,
            robot_action_id=action.action_id, snapshot_id=checked[0].snapshot_id, payload={
                "intent": {"backend": self.navigation.name, "target": action.target.model_dump(),
                           "frame_id": self.config.frame_id, "timeout_s": round(action.timeout_s, 2),
                           "arguments": call.arguments,
                           # which provider acts, and every candidate's score (issue 18): same commit
                           **({"provider": routing.chosen, "capability": "navigation", "routing": routing.as_dict()}
                              if routing is not None else {})},
                "dispatch": {"key": key.text, "goal_id": goal_uuid_for(key.text),
                             "resources": [*skill.resources, *site],
                             "node": key.node, "attempt": key.attempt, "state_version": key.state_version},
                # under which policy decision: the passing pre-dispatch check (same commit),
                # the operator's approval, and the recovery attempt that authorized it
                "policy": {"preconditions": "passed", "approval": s.approvals.get(call.id, ""),
                           "authorized_attempt": key.attempt},
                "action": action.view().model_dump(mode="json"),
            })
        expires = action.requested_at + action.timeout_s + nav.cancel_timeout_s + LEASE_MARGIN_S
        try:
            committed = self.ledger.append_many([*checked, started,
                                                 *self.leases.acquire_drafts(skill, action.action_id, expires,
                                                                             site=site)])
        except DuplicateDispatch as exc:
            return _duplicate(call, exc)
        except LeaseConflict as exc:
            if lost_race_raises and exc.lease.scope == SITE and exc.lease.robot_id != self.ledger.journal.robot_id:
                raise _LostSiteRace() from exc
            return _lease_conflict(call, exc)
        except StaleFence as exc:  # this robot lost a site lease it meant to hand on: nothing is sent
            return results.rejected(call, f"lease lost: {exc.message}; nothing was sent", code=exc.code,
                                    **exc.details)
        except StoppedBeforeDispatch as stop:
            return results.cancelled(call, f"stopped before dispatch: {stop}; nothing was sent")
        s.evidence.append(next(e.seq for e in committed if e.type is EventType.ROBOT_ACTION_STARTED))
        if routing is not None and routing.chosen:
            s.provider_of[action.action_id] = routing.chosen
        s.actions.append(action)
        s.active = action
        return None

    def _send(self, call: ToolCall, skill: Skill, action: ManagedAction,
              goal_id: str) -> tuple[ToolResult, ManagedAction | None]:
        """Send the goal (the one ``send_goal`` call of the harness) and record what the backend said."""
        nav = skill.managed.navigation  # type: ignore[union-attr]
        assert action.target is not None
        self.ledger.stage("dispatching", action)
        try:
            # A NavigateToPose goes as it always has (a port that knows only it keeps working).
            other = action.goal is not None and action.goal.kind is not NavGoalKind.NAVIGATE_TO_POSE
            if self.state.provider_of.get(action.action_id):
                self.navigation.use(self.state.provider_of[action.action_id])  # type: ignore[attr-defined]
            ack = self.navigation.send_goal(target=action.target, frame_id=self.config.frame_id,
                                            timeout_s=nav.accept_timeout_s, goal_id=goal_id,
                                            **({"goal": action.goal} if other else {}))
        except HarnessTimeout as exc:
            return self._lost_acknowledgment(call, action, skill, goal_id, exc.message)
        except HarnessError as exc:
            self._end_before_motion(action, skill, ActionStatus.FAILED, f"not sent: {exc.message}")
            return results.rejected(call, exc.message, action_id=action.action_id), None
        if not ack.accepted:
            action.backend_goal_id = ack.goal_id
            self._end_before_motion(action, skill, ActionStatus.FAILED,
                                    f"{results.BACKEND_REJECTED}: {ack.reason or 'no reason given'}")
            return results.rejected(call, ack.reason or "rejected by the navigation backend",
                                    action_id=action.action_id), None
        action.backend_goal_id = ack.goal_id
        action.accepted_at = self.clock.monotonic()
        self.ledger.append_many([self.ledger.transition(action, ActionStatus.ACCEPTED, "accepted by the backend",
                                                        now=self.clock.now())])
        return _accepted(call, action), action

    def _lost_acknowledgment(self, call: ToolCall, action: ManagedAction, skill: Skill, goal_id: str,
                             why: str) -> tuple[ToolResult, ManagedAction | None]:
        """No accept/reject arrived in time. The goal may be running: look it up by its id, never re-send it."""
        nav = skill.managed.navigation  # type: ignore[union-attr]
        try:
            status = self.navigation.lookup(goal_id, timeout_s=nav.lookup_timeout_s)
            detail = f"backend reports the goal {status}" if status else "backend does not track the goal"
        except HarnessError as exc:
            status, detail = None, f"backend could not be asked: {exc.message}"
        self.ledger.append(EventType.ROBOT_ACTION_RECONCILED, tool_call_id=call.id, robot_action_id=action.action_id,
                            payload={"finding": "acknowledgment_lost", "backend_status": status or "",
                                     "detail": f"{why}; {detail}", "goal_id": goal_id})
        if status in ACTIVE_STATUSES or status in TERMINAL_STATUSES:
            self.navigation.adopt(goal_id)
            action.backend_goal_id = goal_id
            action.accepted_at = self.clock.monotonic()
            self.ledger.append_many([self.ledger.transition(
                action, ActionStatus.ACCEPTED, f"acceptance lost; found on the backend by goal id ({status})",
                now=self.clock.now())])
            return _accepted(call, action, "the acceptance was lost, but the backend runs the goal (looked up "
                                           "by its id; it was not sent again); the verified outcome arrives "
                                           "as a runtime event"), action
        action.backend_goal_id = goal_id
        # Maybe moving, maybe not: UNKNOWN, and the resource stays blocked until reconciled.
        self.ledger.append_many([
            self.ledger.transition(action, ActionStatus.UNKNOWN, f"no accept/reject from the backend: {why}; {detail}",
                                    now=self.clock.now()),
            *self.leases.end_drafts(skill, action.action_id, None, detail)])
        self.state.active = None
        return results.error(call, "backend_timeout", f"{why}; {detail}; the {'/'.join(skill.resources)} "
                             "stays reserved until the backend confirms the goal ended",
                             action_id=action.action_id), None

    def _end_before_motion(self, action: ManagedAction, skill: Skill, state: ActionStatus, reason: str) -> None:
        """The backend refused the goal or it was never sent: nothing moves, the leases end (a site place's
        too when the robot stood outside it at dispatch: it did not move)."""
        snap = action.dispatch_snapshot
        pose = snap.pose if snap is not None and snap.pose_meta.availability is Availability.AVAILABLE else None
        self.ledger.append_many([self.ledger.transition(action, state, reason, now=self.clock.now()),
                                  *self.leases.end_drafts(skill, action.action_id, ReleaseReason.CONFIRMED_TERMINAL,
                                                           reason, pose=pose)])
        self.state.active = None

    # -- capability calls -----------------------------------------------------------

    def run_capability(self, decision: WorldSnapshot, call: ToolCall, skill: Skill, args: BaseModel) -> ToolResult:
        """Run a non-physical skill's handler once; keyed and leased when it holds resources."""
        s = self.state
        env = ToolEnv(places=s.places, robot_io=self.robot_io, snapshot=decision)
        assert skill.handler is not None
        routing: RoutingDecision | None = None
        if skill.resources:
            # Keyed like a navigation: the same request again returns the existing execution record.
            key = self.leases.key(skill, args)
            s.node_of_call[call.id] = key.node
            existing = self.leases.capability_record(key)
            if existing is not None:
                return _duplicate_capability(call, existing)
            conflict = self.leases.free(skill)
            site = self.leases.site_needs(skill)
            if conflict is None:
                conflict = self.leases.free_site(site, deadline=s.deadline)
            # The intent (keyed, under which policy decision) rides on the leases: durable before the call runs.
            intent = {"key": key.text, "node": key.node, "attempt": key.attempt, "state_version": key.state_version,
                      "tool_call_id": call.id, "skill": skill.name,
                      "policy": {"approval": s.approvals.get(call.id, ""), "authorized_attempt": key.attempt}}
            routing = self._route_capability(skill.name, key.node)
            if routing is not None:
                if routing.chosen is None:
                    return results.rejected(call, f"no {routing.capability} provider may act: {routing.reason}",
                                            code="no_provider", routing=routing.as_dict())
                intent.update(provider=routing.chosen, capability=routing.capability, routing=routing.as_dict())
            try:
                if conflict is not None:
                    raise conflict
                self.ledger.append_many(self.leases.acquire_drafts(skill, call.id, self.clock.now() + LEASE_MARGIN_S,
                                                                     intent=intent, site=site))
            except LeaseConflict as exc:
                return _lease_conflict(call, exc)
            except StaleFence as exc:
                return results.rejected(call, f"lease lost: {exc.message}; nothing was run", code=exc.code,
                                        **exc.details)
            except StoppedBeforeDispatch as stop:
                return results.cancelled(call, f"stopped before the call ran: {stop}; nothing was run")
        if skill.resources and routing is not None and routing.chosen:
            s.provider_of[call.id] = routing.chosen
        try:
            if skill.resources and routing is not None and routing.chosen and routing.capability == "camera" \
                    and hasattr(self.robot_io, "use_camera"):
                # the next capture reads this camera (inside the try: the lease ends however it goes)
                self.robot_io.use_camera(self.config.providers[routing.chosen].namespace)  # type: ignore[union-attr]
            content = skill.handler(env, args)
        except HarnessError as exc:
            return results.error(call, exc.code, exc.message, exc.details)
        except Exception as exc:  # a tool's own bug or I/O failure: one recorded error result
            return results.error(call, "tool_exception", f"{type(exc).__name__}: {exc}")
        finally:
            if skill.resources:  # the call returned (or raised): it is over
                self.ledger.append_many(self.leases.end_drafts(skill, call.id, ReleaseReason.CONFIRMED_TERMINAL,
                                                                 "the call returned"))
        return results.result(call, ToolResultStatus.OK, content)


def _switchable(capability: str | None, robot_io: Any) -> bool:
    """Whether the robot's I/O can act through another provider of ``capability`` (only cameras, by topic:
    ``RobotIO.use_camera``; one speaker and one message gateway are not switched)."""
    return capability == "camera" and hasattr(robot_io, "use_camera")


def _accepted(call: ToolCall, action: ManagedAction, note: str = "") -> ToolResult:
    return results.result(call, ToolResultStatus.ACCEPTED, {
        "backend_goal_id": action.backend_goal_id,
        "target": action.target.model_dump() if action.target else None,
        "note": note or "accepted is not completion; the verified outcome arrives as a runtime event",
    }, action_id=action.action_id)


def _duplicate(call: ToolCall, exc: DuplicateDispatch) -> ToolResult:
    rec = exc.existing
    return results.rejected(call, "duplicate request: this exact dispatch (task, node, attempt, state version) "
                            "already exists; nothing new was sent", code="duplicate_dispatch", action_id=rec.action_id,
                            existing=rec.model_dump(mode="json"))


def _duplicate_capability(call: ToolCall, existing: dict[str, Any]) -> ToolResult:
    why = ("this exact invocation (task, node, attempt, state version) already ran"
           if existing["match"] == "same_key" else "the same invocation just ran and succeeded, and nothing ran since")
    return results.rejected(call, f"duplicate request: {why}; nothing was run again", code="duplicate_dispatch",
                            existing=existing)


def _lease_conflict(call: ToolCall, exc: LeaseConflict) -> ToolResult:
    return results.rejected(call, f"{exc.message}; nothing was sent", code="lease_conflict",
                            lease=exc.lease.model_dump(mode="json"))


def _behavior_extent(goal: NavGoal) -> float:
    """The metres a behaviour's action timeout is sized by (a spin counts its arc at 0.5 m radius)."""
    return goal.backup_dist_m + abs(goal.spin_dist_rad) * 0.5


def _fold_legs(legs: list[Feasibility]) -> Feasibility:
    """One answer for a route from its legs' (see ``Dispatcher._probe``); legs are named by waypoint number."""
    paths = [(k, f.path) for k, f in enumerate(legs) if f.path is not None]
    path: PathProbe | None = None
    if paths:
        bad = next(((k, p) for k, p in paths if p.status is not ProbeStatus.ANSWERED or not p.ok
                    or p.length_m is None), None)
        if bad is not None:
            k, p = bad
            path = p.model_copy(update={"where": f"leg {k + 1} (to waypoint #{k + 1})"})
        else:
            path = PathProbe(ok=True, length_m=sum(p.length_m or 0.0 for _, p in paths),
                             poses=sum(p.poses for _, p in paths),
                             planning_time_s=sum(p.planning_time_s or 0.0 for _, p in paths))
    costs = [(k, f.goal_cost) for k, f in enumerate(legs) if f.goal_cost is not None]
    cost: CostProbe | None = None
    if costs:
        unanswered = next(((k, c) for k, c in costs if c.status is not ProbeStatus.ANSWERED or c.cost is None), None)
        k, c = unanswered if unanswered is not None else max(costs, key=lambda kc: kc[1].cost or 0.0)
        cost = c.model_copy(update={"where": f"waypoint #{k + 1}"})
    return Feasibility(lifecycle=legs[0].lifecycle, path=path, goal_cost=cost,
                       duration_s=sum(f.duration_s for f in legs))
