"""The closed loop, ROS-free: admit -> freeze the contract -> model turns -> the mission's end.

Each turn: observe -> model turn -> tool calls -> fresh-state check ->
dispatch -> correlated supervision -> fresh snapshot -> verified outcome ->
next turn. ``MissionRunner.run`` is synchronous; it talks to the world only
through the ports and to storage only through the ``Journal``. It creates no
threads and reads time only from the injected clock. Every loop has a
budget: turns, silent turns, tool calls per turn, mission time, action time.

A mission ends in one place (``_finish``), from a ``MissionEnd`` value that
the part which decided returns; only a world fault (no snapshot), a storage
fault or a bug arrives as an exception, and each maps to its own end.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..clock import Clock, IdGenerator
from ..config import HarnessConfig, place_poses
from ..site import Site
from ..config_versions import ConfigPin
from ..context import compile_planner_context, context_size
from ..contracts import START_PLACE, ContractCompiler, CoverageReviewer
from ..errors import HarnessError, JournalWriteError, StaleRevision, UsageError
from ..gate import CommitGate
from ..interactions import MissionCredentials
from ..journal import Journal, JournalReadError
from ..ports import (EvidenceRecorder, FeasibilityPort, InteractivePlanner, NavigationPort, PlannerPort, PlannerRequest, RobotIO,
                     SnapshotPort, VerifierPort)
from ..reconcile import Reconciler
from ..payloads import ModelResponseRecorded, ModelTurnStarted, RuntimeEventDelivered
from ..records import (ActionView, Availability, EventType, MissionStatus, ModelResponse, RuntimeEvent, ToolResult,
                       ToolResultStatus,
                       WorldSnapshot)
from ..recovery import Failure, FailureKind
from ..skills import SkillRegistry
from ..verifier import Verifier, VerifierConfig
from ..authority.done import DoneAuthority
from ..authority.receipts import Receipts
from ..execution.dispatch import Blocked, Dispatcher
from ..execution.results import HARNESS_REFUSALS
from ..execution.leases import Leases
from ..execution.supervise import ActionSupervisor
from .behaviors import BehaviorRunner
from .ledger import MissionLedger, Observer
from .observations import NoWorldSnapshot, Observations
from .operator import OperatorDesk
from .plans import PlanDesk
from .progress import ProgressViews
from .recovery import Recovery, worst_failure
from .state import MissionEnd, MissionState, StopFlag, new_usage
from .turn import TurnExecutor
from .usage import ModelUsage, error_record

__all__ = ["MissionOutcome", "MissionRunner", "MAX_GOAL_CHARS"]

_log = logging.getLogger(__name__)

MAX_GOAL_CHARS = 2000


class MissionOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: str = "mission_outcome"
    mission_id: str
    status: MissionStatus
    summary: str
    evidence_seqs: tuple[int, ...] = ()
    evidence_ids: tuple[str, ...] = ()
    tool_calls: tuple[dict[str, Any], ...] = ()
    actions: tuple[ActionView, ...] = ()
    contract: dict[str, Any] | None = None
    """The frozen completion contract (None when the goal could not be compiled)."""
    verdict: dict[str, Any] | None = None
    """The verifier's last verdict on a done proposal (None when none was proposed)."""
    bag: dict[str, Any] = {}
    """The evidence bag's summary (path, messages, dropped); empty when not recorded."""
    model_usage: dict[str, Any] = {}
    """Planner turns; LLM calls (planner, contract compiler/reviewer, recovery advisor: ``llm_calls_by_role``),
    tokens and LLM latency of the mission."""


@dataclass
class _Loop:
    """What carries from one turn to the next."""

    pending: list[RuntimeEvent] = field(default_factory=list)
    """Runtime events (outcomes, recovery advice, rejections) the next turn delivers."""
    last_results: list[ToolResult] = field(default_factory=list)
    silent: int = 0
    text_only: int = 0
    examples: list[dict[str, Any]] | None = None
    """The verified plans of similar goals shown to the planner (retrieved once, at the first turn)."""
    asks: int = 0
    """Model calls made so far (a turn taken from an accepted plan asks no model)."""


@dataclass
class _Mission:
    """One run's parts, wired to its state and its ledger."""

    state: MissionState
    ledger: MissionLedger
    observations: Observations
    views: ProgressViews
    done: DoneAuthority
    supervisor: ActionSupervisor
    turns: TurnExecutor
    recovery: Recovery
    plans: PlanDesk


@dataclass(eq=False, kw_only=True)
class MissionRunner:
    """Runs one mission at a time through the closed loop.

    Every collaborator is required: ``robot_harness.compose.mission_runner``
    builds the deployed ones from a config (the contract compiler and the
    coverage review over the goal lexicon, the in-process verifier, the
    recovery policy with its advisor).
    """

    config: HarnessConfig
    journal: Journal
    clock: Clock
    ids: IdGenerator
    skills: SkillRegistry
    snapshots: SnapshotPort
    planner: PlannerPort
    navigation: NavigationPort
    verifier: VerifierPort
    contract_compiler: ContractCompiler
    coverage_reviewer: CoverageReviewer
    recovery: Any
    """The recovery policy: the recovery node (via a port with the same ``decide``) or the same policy in-process."""
    progress_verifier_config: VerifierConfig
    """The verifier's settings, for the in-process check of which obligations are already evidenced."""
    robot_io: RobotIO | None = None
    feasibility: FeasibilityPort | None = None
    """Answers the readiness and feasibility checks before each navigation (None: reported not applicable)."""
    recorder: EvidenceRecorder | None = None
    on_update: Observer | None = None
    """Watches every mission (feedback, MCP sessions); read when a mission starts."""
    sleep: Callable[[float], None] | None = None
    """A bounded wait (for an operator's answer); by default the backend poll, which also advances a test clock."""
    stop_reads: Callable[[str | None], str | None] | None = None
    """Sees every read of the Stop flag (``StopFlag``'s ``reads``): a decision tape's recorder or player."""
    config_pin: ConfigPin | None = None
    """The configuration version ``config`` is (core/config_versions.py), journaled in MISSION_STARTED."""
    memory: Any = None
    """Memory of verified attempts (core/memory.MemoryStore, or its decision tape): ``examples(contract, k)``
    for the planner's context, ``provider_stats(capability)`` for routing, ``record_mission(mission_id, now=)``
    after each mission. None: the mission neither reads nor writes memory."""

    def __post_init__(self) -> None:
        self.gate = CommitGate(ids=self.ids, clock=self.clock)
        self._tool_specs = tuple(self.skills.tool_specs())
        self._physical_skills = frozenset(sk.name for sk in self.skills if sk.physical)
        self._stop = StopFlag(self.stop_reads)
        self._blocked = Blocked()
        self._usage = ModelUsage(new_usage())
        """Across missions: the components' call lists are read on from where the last mission left them."""
        self._progress_verifier = Verifier(self.progress_verifier_config, semantic=None,
                                           artifact_check=_no_artifact_check, ids=IdGenerator(0), clock=self.clock,
                                           name="progress")
        self._m: _Mission | None = None
        self.reconciler = Reconciler(journal=self.journal, navigation=self.navigation, snapshots=self.snapshots,
                                     clock=self.clock, lookup_timeout_s=self.config.navigation.lookup_timeout_s,
                                     outcome=self.config.navigation.outcome, on_events=self._notify,
                                     site=Site(self.config.site, place_poses(self.config)))

    def _wait(self, seconds: float) -> None:
        if self.sleep is not None:
            self.sleep(seconds)
        else:
            self.navigation.poll(seconds)

    # -- public ---------------------------------------------------------------

    @property
    def mission_id(self) -> str:
        """The mission this runner is running (or last ran); empty before the first."""
        return self._m.state.mission_id if self._m is not None else ""

    @property
    def physical_blocked(self) -> str | None:
        """Why new physical work is refused (a journal write failed), or None."""
        return self._blocked.reason

    @property
    def stop_requested(self) -> str | None:
        """The pending Stop's reason (for the running mission, or the next one), or None."""
        return self._stop.reason

    def request_stop(self, reason: str = "stop requested") -> None:
        """Ask the running mission to stop at its next check (thread-safe flag)."""
        self._stop.request(reason)

    def active_actions(self) -> list[ActionView]:
        """Views of this mission's managed actions (for an on-demand precondition check)."""
        return [a.view() for a in self._m.state.actions] if self._m is not None else []

    def run(self, goal: str, *, mission_id: str = "", owner: str = "", owner_token_sha256: str = "",
            credentials: MissionCredentials | None = None) -> MissionOutcome:
        """Run one mission. ``owner`` names its owner; ``credentials`` (keyed digests, never a token:
        ``interactions.CredentialSet.for_mission``) say who may answer its interactions under each
        approval policy. ``owner_token_sha256`` is the older, unkeyed form (an owner and nothing else;
        the operator policy then has no credential and waits). A Stop requested before ``run`` starts
        (between a mission's admission and its first step) applies to it: the mission ends CANCELLED,
        nothing runs."""
        try:
            return self._run(goal, mission_id=mission_id, owner=owner, owner_token_sha256=owner_token_sha256,
                             credentials=credentials or MissionCredentials())
        finally:
            self._stop.clear()  # a Stop is for one mission

    # -- one mission ---------------------------------------------------------------

    def _build(self, state: MissionState) -> _Mission:
        ledger = MissionLedger(journal=self.journal, mission_id=state.mission_id, stop=self._stop,
                               observer=self.on_update)
        observations = Observations(state=state, ledger=ledger, snapshots=self.snapshots, recorder=self.recorder,
                                    navigation=self.navigation, clock=self.clock)
        receipts = Receipts(state=state, ledger=ledger, observations=observations, ids=self.ids, clock=self.clock,
                            physical_skills=self._physical_skills)
        leases = Leases(state=state, ledger=ledger, reconciler=self.reconciler,
                        site=Site(self.config.site, state.places), clock=self.clock, sleep=self._wait)
        done = DoneAuthority(config=self.config, state=state, ledger=ledger, observations=observations, views=None,
                             usage=self._usage, compiler=self.contract_compiler, reviewer=self.coverage_reviewer,
                             verifier=self.verifier, progress_verifier=self._progress_verifier, gate=self.gate,
                             ids=self.ids, clock=self.clock)
        views = ProgressViews(state=state, ledger=ledger, skills=self.skills, clock=self.clock, evidenced=done.evidenced)
        done.views = views
        supervisor = ActionSupervisor(config=self.config, state=state, ledger=ledger, observations=observations,
                                      leases=leases, receipts=receipts, navigation=self.navigation, skills=self.skills,
                                      clock=self.clock, stop=self._stop)
        dispatcher = Dispatcher(config=self.config, state=state, ledger=ledger, observations=observations,
                                leases=leases, navigation=self.navigation, robot_io=self.robot_io, ids=self.ids,
                                clock=self.clock, blocked=self._blocked, feasibility=self.feasibility,
                                remembered=self._remembered)
        operator = OperatorDesk(config=self.config, state=state, ledger=ledger, skills=self.skills, clock=self.clock,
                                stop=self._stop, sleep=self._wait)
        plans = PlanDesk(state=state, ledger=ledger, skills=self.skills, evidenced=done.evidenced,
                         enforce=self.config.eval_ablations.plan_gate)
        turns = TurnExecutor(config=self.config, state=state, ledger=ledger, skills=self.skills, dispatcher=dispatcher,
                             operator=operator, receipts=receipts, clock=self.clock, stop=self._stop, plans=plans)
        behaviors = BehaviorRunner(state=state, ledger=ledger, observations=observations, turns=turns,
                                   supervisor=supervisor, ids=self.ids)
        recovery = Recovery(config=self.config, state=state, ledger=ledger, views=views, usage=self._usage,
                            policy=self.recovery, abandon=supervisor.abandon, run_behavior=behaviors.run)
        return _Mission(state=state, ledger=ledger, observations=observations, views=views, done=done,
                        supervisor=supervisor, turns=turns, recovery=recovery, plans=plans)

    def _run(self, goal: str, *, mission_id: str, owner: str, owner_token_sha256: str,
             credentials: MissionCredentials) -> MissionOutcome:
        if not isinstance(goal, str) or not goal.strip():
            raise UsageError("a mission needs a non-empty natural-language goal")
        if len(goal) > MAX_GOAL_CHARS:
            raise UsageError(f"goal is {len(goal)} characters; the limit is {MAX_GOAL_CHARS}")
        state = MissionState(
            mission_id=mission_id or self.ids.new("mission"), goal=goal,
            places=place_poses(self.config),  # per mission: ``start`` is this mission's own
            deadline=self.clock.monotonic() + self.config.limits.mission_timeout_s,
            owner=owner, owner_sha=owner_token_sha256, credentials=credentials)
        m = self._m = self._build(state)
        self._usage.usage = state.usage
        m.observations.start_recorder()  # first, so the bag holds the whole journal of the mission
        admitted = self._admit(m)
        if admitted is not None:
            return admitted
        internal_error: dict[str, Any] | None = None
        try:
            end = self._mission(m)
        except NoWorldSnapshot as exc:
            end = MissionEnd(MissionStatus.BLOCKED, exc.message)
        except (JournalWriteError, JournalReadError) as exc:
            # The source of truth cannot be written (or read back): no new physical work until it can.
            self._blocked.reason = str(exc)
            m.supervisor.abandon()
            m.observations.stop_recorder(MissionStatus.BLOCKED, f"journal failed: {exc}")
            what = "write" if isinstance(exc, JournalWriteError) else "read"
            return self._outcome(m, MissionStatus.BLOCKED, f"journal {what} failed; no new physical work: {exc}")
        except Exception as exc:  # noqa: BLE001 - a bug or a port's unexpected error must not leave the mission open
            # Fail closed: the outcome is unknown, the robot is asked to stop, the bag is
            # closed and the mission is finished in the journal with the error.
            internal_error = error_record(exc)
            end = MissionEnd(MissionStatus.UNKNOWN, f"harness internal error, outcome unknown: {type(exc).__name__}: {exc}")
        return self._finish(m, end, internal_error)

    def _admit(self, m: _Mission) -> MissionOutcome | None:
        """Journal the mission's start (revision 0 expected: a mission id is admitted once, ever)."""
        s = m.state
        try:
            m.ledger.append_many([m.ledger.draft(EventType.MISSION_STARTED, payload={
                "goal": s.goal,
                "config": self.config.model_dump(mode="json"),
                **({"config_version": self.config_pin.version, "config_hash": self.config_pin.content_hash}
                   if self.config_pin is not None else {}),
                "tools": [sk.name for sk in self.skills],
                "owner": s.owner,
                **({"owner_sha256": s.owner_sha} if s.owner_sha else {}),
                "owner_hmac": s.credentials.owner_hmac,
                "sender_hmac": s.credentials.sender_hmac,
            })], retry_stale=False)
            self._blocked.reason = None  # a successful write clears an earlier storage failure
        except StaleRevision:
            m.observations.stop_recorder()
            raise UsageError(f"mission {s.mission_id} already exists in the journal; a mission id is run once",
                             mission_id=s.mission_id) from None
        except JournalWriteError as exc:
            self._blocked.reason = str(exc)
            m.observations.stop_recorder(MissionStatus.BLOCKED, f"journal unavailable: {exc}")
            return self._outcome(m, MissionStatus.BLOCKED, f"journal unavailable, mission not started: {exc}")
        except Exception as exc:  # noqa: BLE001 - not admitted: nothing to finish, but the bag is closed
            m.observations.stop_recorder(MissionStatus.BLOCKED, f"mission not started: {type(exc).__name__}: {exc}")
            raise
        return None

    def _mission(self, m: _Mission) -> MissionEnd:
        end = m.done.freeze_contract()
        if end is not None:
            return end
        self._bind_start(m)
        return self._turns(m)

    def _finish(self, m: _Mission, end: MissionEnd, internal_error: dict[str, Any] | None) -> MissionOutcome:
        """The one place a mission ends: stop what still moves, close the bag, journal the end."""
        s, summary = m.state, end.summary
        if s.active is not None and not s.active.terminal:
            # e.g. the snapshot source died mid-action: do not leave the robot driving unsupervised
            stopped = m.supervisor.abandon()
            if stopped:
                summary += f"; in-flight action {stopped} was asked to stop"
        bag = m.observations.stop_recorder(end.status, summary)
        try:
            ev = m.ledger.append(EventType.MISSION_FINISHED, payload={
                "status": end.status.value, "summary": summary, "evidence_seqs": list(s.evidence),
                "evidence_ids": m.observations.evidence_ids(), "bag": bag,
                "verdict_id": s.last_verdict.verdict_id if s.last_verdict else "",
                "model_usage": copy.deepcopy(s.usage),
                **({"internal_error": internal_error} if internal_error else {}),
            })
            s.evidence.append(ev.seq)
        except JournalWriteError as exc:
            self._blocked.reason = str(exc)
            return self._outcome(m, MissionStatus.BLOCKED, f"{summary} (final record not persisted: {exc})")
        self._remember(s.mission_id)
        return self._outcome(m, end.status, summary)

    def _remember(self, mission_id: str) -> None:
        """Derive memory from the finished mission's committed verdicts and receipts (core/memory.py); a
        failure is logged, never the mission's: memory is advice, the journal is the truth."""
        if self.memory is None or not self.config.memory.record:
            return
        try:
            self.memory.record_mission(mission_id, now=self.clock.now())
        except Exception as exc:  # noqa: BLE001 - the mission is over and journaled; memory is advice
            _log.warning("mission %s not remembered: %s", mission_id, exc)

    def _bind_start(self, m: _Mission) -> None:
        """Give the reserved place ``start`` its pose: where the robot is now, at admission.

        Only when the contract names it and the map has no place of that name. The pose comes from a
        journaled snapshot (reason ``admission``); without a fresh localized pose, ``start`` stays
        unknown, so nothing can navigate to it and no obligation at it can be satisfied (fail closed).
        """
        s, contract = m.state, m.ledger.task_state().contract
        assert contract is not None
        if START_PLACE in s.places:
            return
        named = any(START_PLACE == o.params.get(k) or START_PLACE in (o.params.get("waypoints") or ())
                    for o in contract.obligations for k in ("place", "start"))
        if not named:
            return
        snap = m.observations.capture_now("admission")
        if snap.pose is not None and snap.pose_meta.availability is Availability.AVAILABLE:
            s.places[START_PLACE] = snap.pose

    # -- the turns -------------------------------------------------------------

    def _turns(self, m: _Mission) -> MissionEnd:
        """Model turns until one ends the mission or the turn budget runs out."""
        loop = _Loop()
        for turn_index in range(self.config.limits.max_turns):
            end = self._turn(m, loop, turn_index)
            if end is not None:
                return end
        return m.done.give_up(f"turn budget of {self.config.limits.max_turns} exhausted without a verified done")

    def _turn(self, m: _Mission, loop: _Loop, turn_index: int) -> MissionEnd | None:
        """One turn: plan on a fresh snapshot, act on the response, judge a done proposal."""
        s = m.state
        if isinstance(self.planner, InteractivePlanner):
            # An operator session idles here until its next call, a Stop or the deadline.
            self.planner.wait_for_call(lambda: bool(self._stop) or self.clock.monotonic() >= s.deadline)
        end = self._budget_end(s)
        if end is not None:
            return end
        turn_id, snap, response, planner_error = self._plan(m, loop, turn_index)
        end = self._screen(m, loop, response, planner_error)
        if end is not None or response.silent:  # a silent (or prose-only) turn does nothing more
            return end
        turn = m.turns.run(turn_id, snap, response.tool_calls)
        loop.last_results = list(turn.results)
        outcome = m.supervisor.supervise(turn.action) if turn.action is not None else None
        if outcome is not None:
            loop.pending.append(outcome)
        self._tally(m, loop.last_results, outcome)
        failure = worst_failure(loop.last_results, outcome, physical=self._physical_skills, ids=self.ids)
        if failure is not None:
            failure = self._provider_fallback(m, failure, loop.last_results)
            step = m.recovery.recover(turn_id, failure)
            if step.event is not None:
                loop.pending.append(step.event)
            if step.end is not None:
                m.plans.interrupt(f"{failure.failure_kind.value}: {failure.reason}")
                return step.end
            stopped = m.plans.failed(f"{failure.failure_kind.value}: {failure.reason}",
                                     **self._plan_resume(m, failure, step.event, loop.last_results))
            if stopped is not None:
                loop.pending.append(stopped)
        stopped = self._plan_step_refused(m, loop.last_results)
        if stopped is not None:
            loop.pending.append(stopped)
        end = self._budget_end(s)  # a Stop (or the deadline) during this turn ends it before any verification
        if end is not None:
            return end
        if turn.done_call is not None:
            return self._judge(m, loop, turn_id, turn.done_call.id, str(turn.done_call.arguments.get("summary", "")))
        if response.done is not None:
            return self._judge(m, loop, turn_id, f"{turn_id}/done", response.done)
        return None

    def _plan(self, m: _Mission, loop: _Loop, turn_index: int) -> tuple[str, WorldSnapshot, ModelResponse, str | None]:
        """Capture the turn's snapshot, compile and journal its context, ask the planner, journal the answer."""
        s, ledger = m.state, m.ledger
        ledger.stage("planning")
        snap, snap_draft = m.observations.capture("before_model_turn")
        turn_id = self.ids.new("turn")
        s.turn_state_version = ledger.task_state().state_version  # what this turn's decisions are keyed on
        step = m.plans.next_call(self.ids, snap)  # before the context: a plan the gate stops is news for the model
        if isinstance(step, RuntimeEvent):
            loop.pending.append(step)
            step = None
        ctx = compile_planner_context(
            progress=m.views.planner_progress(snap),
            goal=s.goal,
            turn_index=turn_index,
            snapshot=snap,
            places=sorted(s.places),
            runtime_events=loop.pending,
            last_results=loop.last_results,
            byte_cap=self.config.context_byte_cap,
            snapshot_byte_cap=self.config.snapshot_byte_cap,
            examples=self._examples(m, loop),
        )
        # The snapshot, the turn and what it delivers to the model: one commit.
        ledger.append_many([
            snap_draft,
            ledger.draft(EventType.MODEL_TURN_STARTED, model_turn_id=turn_id, snapshot_id=snap.snapshot_id,
                         payload=ModelTurnStarted(turn_index=turn_index, context_bytes=context_size(ctx), context=ctx)),
            *(ledger.draft(EventType.RUNTIME_EVENT_DELIVERED, model_turn_id=turn_id, tool_call_id=ev.tool_call_id,
                           robot_action_id=ev.action_id, payload=RuntimeEventDelivered.of(ev)) for ev in loop.pending),
        ])
        loop.pending = []
        if step is not None:  # the accepted plan's next step: the harness's turn, no model call
            call, meta = step
            response, planner_error = ModelResponse(tool_calls=(call,), meta=meta), None
        else:
            response, planner_error = self._ask_planner(s, turn_id, loop.asks, ctx)
            loop.asks += 1
            self._usage.count_turn(response)
        # The response and every tool call in it are recorded in one commit, before any call runs.
        ledger.append_many([
            ledger.draft(EventType.MODEL_RESPONSE_RECORDED, model_turn_id=turn_id, snapshot_id=snap.snapshot_id,
                         payload=ModelResponseRecorded(response=response, error=planner_error)),
            *(ledger.draft(EventType.TOOL_CALL_RECORDED, model_turn_id=turn_id, tool_call_id=call.id,
                           snapshot_id=snap.snapshot_id,
                           payload={"name": call.name, "arguments": call.arguments, "index": index,
                                    **m.views.skill_view(call, snap)})
              for index, call in enumerate(response.tool_calls)),
        ])
        return turn_id, snap, response, planner_error

    def _screen(self, m: _Mission, loop: _Loop, response: ModelResponse, planner_error: str | None) -> MissionEnd | None:
        """Prose is not action, and silence is not progress: each is counted against its budget."""
        limits = self.config.limits
        if response.text_only and planner_error is None:
            loop.text_only += 1
            if loop.text_only > limits.max_text_only_turns:
                return m.done.give_up(f"{loop.text_only} text-only model answers (budget {limits.max_text_only_turns})")
            loop.pending.append(RuntimeEvent(type="text_only_response", state="error", detail={
                "code": "no_tool_call",
                "reason": "the last answer was text only; act through the tools, or call propose_done",
            }))
            return None
        if response.silent:
            loop.silent += 1
            if loop.silent >= limits.max_silent_turns:
                why = f"planner error: {planner_error}" if planner_error else "the planner stopped proposing actions"
                return m.done.give_up(why)
            return None
        loop.silent = 0
        return None

    def _plan_resume(self, m: _Mission, failure: Failure, advice: RuntimeEvent | None,
                     results: Any) -> dict[str, bool]:
        """Whether an accepted plan may resume after this failure of its step without asking the model
        (``PlanDesk.failed``): the site repairs suffixes, the step's failure left nothing moving, the harness
        did not refuse the step itself (a duplicate, a lease held, no provider: asking again changes nothing),
        and recovery chose a rung that goes on; ``redo`` False when a provider fallback already did the step."""
        plan = m.plans.active
        ours = plan is not None and bool(plan.ran) and failure.tool_call_id == plan.ran[-1]
        kinds = (FailureKind.DISPATCH_REJECTED, FailureKind.ACTION_FAILED, FailureKind.TOOL_ERROR,
                 FailureKind.PRECONDITION_CHANGED)
        if not ours or failure.failure_kind not in kinds or self.config.recovery.repair != "suffix" or advice is None \
                or _refused_by_harness(results, failure.tool_call_id):
            return {"resumable": False}
        fallback = advice.detail.get("fallback_outcome")
        if fallback is not None:  # the switch rung re-ran the step on another provider
            return {"resumable": fallback == "SUCCEEDED", "redo": False}
        return {"resumable": True}

    def _plan_step_refused(self, m: _Mission, results: Any) -> RuntimeEvent | None:
        """Stop an accepted plan whose last step was not done and is not being resumed: denied, cancelled,
        refused or in error without a failure recovery answers (an approval that expired, a duplicate,
        a lease held). The steps after it must not run as if it had."""
        plan = m.plans.active
        if plan is None or not plan.ran or plan.recheck:
            return None
        r = next((r for r in results if r.tool_call_id == plan.ran[-1]), None)
        if r is None or r.status in (ToolResultStatus.OK, ToolResultStatus.ACCEPTED):
            return None
        why = (r.content or {}).get("reason") or (r.error or {}).get("message") or ""
        return m.plans.interrupt(f"{r.name} {r.status.value}" + (f": {why}" if why else ""))

    def _remembered(self, capability: str) -> Any:
        """Routing's remembered verified outcomes of ``capability``'s providers (none without memory), read
        once per mission (at its first turn, ``_examples``: never between a dispatch's fresh-state check and
        its send). Memory is advice: a read that fails is logged and routing goes on the cards alone."""
        if self.memory is None or not self.config.memory.routing_stats or self._m is None:
            return {}
        cache = self._m.state.remembered
        if capability not in cache:
            try:
                cache[capability] = dict(self.memory.provider_stats(capability))
            except Exception as exc:  # noqa: BLE001 - advice only: whatever the store raises, route on the cards
                _log.warning("memory unreadable, routing %s on the cards alone: %s", capability, exc)
                cache[capability] = {}
        return cache[capability]

    def _examples(self, m: _Mission, loop: _Loop) -> list[dict[str, Any]]:
        """The verified plans of the most similar goals, retrieved once per mission (memory.examples), and the
        providers' remembered outcomes for routing, read here too (the mission's first turn)."""
        if loop.examples is None:
            loop.examples = []
            contract = m.ledger.task_state().contract
            if self.memory is not None and self.config.memory.examples and contract is not None:
                try:
                    loop.examples = list(self.memory.examples(contract, self.config.memory.examples))
                except Exception as exc:  # noqa: BLE001 - advice only: whatever the store raises, no examples
                    _log.warning("memory unreadable, no examples: %s", exc)
            for capability in sorted({c.capability for c in self.config.providers.values()}):
                self._remembered(capability)
        return loop.examples

    def _tally(self, m: _Mission, results: Any, outcome: RuntimeEvent | None) -> None:
        """This mission's outcomes per routed provider: a verified success, or a failure (a rejection, a
        FAILED outcome); UNKNOWN is neither (issue 18; remembered outcomes come from core/memory)."""
        s = m.state
        ended = [(outcome.action_id, outcome.state)] if outcome is not None else []
        ended += [(r.action_id, "FAILED") for r in results if r.status is ToolResultStatus.REJECTED and r.action_id
                  and not _refused_by_harness([r], r.tool_call_id)]
        # a capability call (camera, speech, messaging) is over when it returns: keyed by its call id
        ended += [(r.tool_call_id, "SUCCEEDED" if r.status is ToolResultStatus.OK else "FAILED") for r in results
                  if r.tool_call_id in s.provider_of and r.status in (ToolResultStatus.OK, ToolResultStatus.ERROR)]
        for action_id, state in ended:
            provider = s.provider_of.get(action_id or "")
            if provider and state in ("SUCCEEDED", "FAILED"):
                tally = s.provider_tally.setdefault(provider, [0, 0])
                tally[0] += state == "SUCCEEDED"
                tally[1] += 1

    def _provider_fallback(self, m: _Mission, failure: Failure, results: Any = ()) -> Failure:
        """A routed action that failed (rejected, or FAILED: never UNKNOWN, which may still be moving; not a
        failure the site answers with Nav2's behaviours, which is the body's or the world's): its provider may
        not act for that plan node again this mission, and the others that may are named."""
        s = m.state
        provider = s.provider_of.get(failure.action_id, "") or s.provider_of.get(failure.tool_call_id, "")
        node = s.node_of_call.get(failure.tool_call_id)
        if not provider or node is None or failure.failure_kind not in (FailureKind.ACTION_FAILED,
                                                                        FailureKind.DISPATCH_REJECTED,
                                                                        FailureKind.TOOL_ERROR):
            return failure
        if failure.nav2_kind and self.config.recovery.nav2_behaviors.get(failure.nav2_kind):
            return failure  # the body's or the world's (a stuck robot, a blocked start): Nav2's behaviours answer it
        if _refused_by_harness(results, failure.tool_call_id):
            return failure  # a duplicate or a held lease: the harness refused it, no provider was asked
        s.provider_failed.setdefault(node, {})[provider] = f"failed this obligation: {failure.reason}"[:200]
        card = self.config.providers.get(provider)
        capability = card.capability if card is not None else "navigation"
        if capability == "navigation":
            served = set(getattr(self.navigation, "providers", ()))
        elif capability == "camera" and hasattr(self.robot_io, "use_camera"):
            served = set(self.config.providers)
        else:
            served = set()  # one device of its kind on this robot: nobody to switch to
        others = tuple(sorted(n for n, c in self.config.providers.items() if c.capability == capability
                              and c.enabled and n in served and n not in s.provider_failed[node]))
        return failure.model_copy(update={"provider": provider, "providers": others})

    def _recover(self, m: _Mission, loop: _Loop, turn_id: str, failure: Failure) -> MissionEnd | None:
        step = m.recovery.recover(turn_id, failure)
        if step.event is not None:
            loop.pending.append(step.event)
        return step.end

    def _judge(self, m: _Mission, loop: _Loop, turn_id: str, invocation_id: str, text: str) -> MissionEnd | None:
        """A done proposal: the authority's verdict ends the mission, or the planner hears why not and
        recovery answers a rejected done like any other setback."""
        done = m.done.verify(turn_id, invocation_id, text)
        if done.end is not None:
            return done.end
        if done.event is not None:
            loop.pending.append(done.event)
        if done.failure is not None:
            return self._recover(m, loop, turn_id, done.failure)
        return None

    def _ask_planner(self, s: MissionState, turn_id: str, ask_index: int,
                     ctx: dict[str, Any]) -> tuple[ModelResponse, str | None]:
        request = PlannerRequest(mission_id=s.mission_id, model_turn_id=turn_id, turn_index=ask_index,
                                 context=ctx, tools=self._tool_specs)
        try:
            return self.planner.next_turn(request), None
        except HarnessError as exc:
            # A failed model call is still journaled with whatever I/O it had.
            meta = exc.details.get("meta") if isinstance(exc.details.get("meta"), dict) else {}
            return ModelResponse(meta=meta), f"{exc.code}: {exc.message}"

    def _budget_end(self, s: MissionState) -> MissionEnd | None:
        if self._stop:
            return MissionEnd(MissionStatus.CANCELLED, f"mission cancelled: {self._stop.reason}")
        if self.clock.monotonic() >= s.deadline:
            return MissionEnd(MissionStatus.UNKNOWN,
                              f"mission timeout ({self.config.limits.mission_timeout_s} s) before a verified done")
        return None

    # -- observers and the outcome ------------------------------------------------

    def _notify(self, events: Any) -> None:
        """The reconciler's writes, to the same observer as the mission's own."""
        if self.on_update is None:
            return
        for event in events:
            try:
                self.on_update("", None, event)
            except Exception:  # noqa: BLE001 - an observer only watches
                _log.exception("the update observer raised on a reconciler event; ignored")

    def _outcome(self, m: _Mission, status: MissionStatus, summary: str) -> MissionOutcome:
        s = m.state
        task = m.ledger.last_task_state()
        contract = task.contract if task is not None else None
        return MissionOutcome(
            mission_id=s.mission_id, status=status, summary=summary,
            evidence_seqs=tuple(s.evidence), evidence_ids=tuple(m.observations.evidence_ids()),
            contract=contract.model_dump(mode="json") if contract else None,
            verdict=s.last_verdict.model_dump(mode="json") if s.last_verdict else None,
            bag=dict(s.bag),
            model_usage=copy.deepcopy(s.usage),
            tool_calls=tuple(s.calls), actions=tuple(a.view() for a in s.actions),
        )


def _no_artifact_check(uri: str, sha256: str) -> None:
    """The progress verifier only shapes planning: it does not re-hash artifacts (the real verifier does)."""


def _refused_by_harness(results: Any, tool_call_id: str) -> bool:
    """The call's result is the harness's own refusal (a duplicate, a held lease, no provider): not a
    provider's failure, and asking again unchanged would be refused again."""
    return any(r.tool_call_id == tool_call_id and isinstance(r.content, dict)
               and r.content.get("code") in HARNESS_REFUSALS for r in results)
