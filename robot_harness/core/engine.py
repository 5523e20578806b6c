"""The closed loop, ROS-free: observe -> model turn -> tool calls -> fresh-state
check -> dispatch -> correlated tracking -> fresh snapshot -> verified outcome
-> next turn.

``MissionRunner.run`` is synchronous; it talks to the world only through the
ports in ``ports`` and to storage only through the ``Journal``. It creates no
threads and reads time only from the injected clock. Every loop has a budget:
turns, silent turns, tool calls per turn, mission time, action time.
"""
from __future__ import annotations

import copy
import json
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from .clock import Clock, IdGenerator
from .completion import (
    CompletionContract,
    EvidenceRef,
    Fact,
    FactStatus,
    GoalVerdict,
    Receipt,
    ReceiptStatus,
    StepVerdict,
    Verdict,
)
from .config import HarnessConfig, navigation_workspace, place_poses
from .contracts import (
    ContractCompiler,
    ContractError,
    CoverageReviewer,
    START_PLACE,
    compile_contract,
)
from .context import compile_planner_context, compile_skill_view, context_size
from .durable import TRANSITION_TYPES, DispatchKey, DuplicateDispatch, LeaseConflict, ReleaseReason, goal_uuid_for
from .errors import HarnessError, HarnessTimeout, JournalWriteError, StaleRevision, UsageError
from .gate import CommitGate, GateRejection, TaskState, TaskStateFold, commit_drafts, original_goal_check, record_draft
from .journal import Journal, JournalReadError
from .lifecycle import ManagedAction
from .outcome import BackendTerminal, OutcomeVerdict, check_navigation_outcome
from .ports import (EvidenceRecorder, InteractivePlanner, ModelCallSource, NavigationPort, PlannerPort, PlannerRequest, RobotIO,
                    SnapshotPort, VerifierPort)
from .preconditions import check_preconditions
from .records import (
    ActionStatus,
    Availability,
    ActionView,
    EventDraft,
    EventType,
    JournalEvent,
    MissionStatus,
    ModelResponse,
    Pose2D,
    RuntimeEvent,
    ToolCall,
    ToolResult,
    ToolResultStatus,
    WorldSnapshot,
)
from .interactions import (
    ApprovalPolicy,
    Interaction,
    InteractionKind,
    MissionCredentials,
    Resolution,
    arguments_sha256,
    interaction_id_for,
    interactions,
    request_fields,
    resolution_draft,
)
from .skills import ASK_OPERATOR, PROPOSE_DONE, NavigateToArgs, Skill, SkillRegistry, ToolEnv, resolve_target
from .authority import (
    InProcessVerifier,
    default_contract_compiler,
    default_coverage_reviewer,
    recovery_advisor,
    verifier_config,
)
from .verifier import PoseSample, Verifier, VerifyRequest
from .reconcile import ACTIVE_STATUSES, TERMINAL_STATUSES, Reconciler
from .recovery import Failure, FailureKind, RecoveryBudgets, RecoveryPolicy, Rung
from .views import ContextItem, Provenance, Role, ViewBudget, build_view

_log = logging.getLogger(__name__)

__all__ = ["MissionOutcome", "MissionRunner", "ModelCallSource", "MAX_GOAL_CHARS", "MALFORMED_ARGUMENTS"]

MAX_GOAL_CHARS = 2000
MALFORMED_ARGUMENTS = "__malformed_arguments__"
"""The key a planner adapter puts the raw text under when a model's tool arguments are not a JSON object."""
_RECEIPT_STATUS = {
    ToolResultStatus.OK: ReceiptStatus.SUCCEEDED,
    ToolResultStatus.ERROR: ReceiptStatus.FAILED,
    ToolResultStatus.REJECTED: ReceiptStatus.REJECTED,
    ToolResultStatus.PRECONDITION_CHANGED: ReceiptStatus.REJECTED,
    ToolResultStatus.SKIPPED: ReceiptStatus.REJECTED,
    ToolResultStatus.CANCELLED: ReceiptStatus.REJECTED,
    ToolResultStatus.DENIED: ReceiptStatus.REJECTED,
}
_STALE_RETRIES = 8
"""How often one write re-reads the mission after another writer moved it, before giving up."""
_LEASE_MARGIN_S = 10.0
"""A lease outlives its action's supervision bound by this much before it counts as orphaned."""
_VERIFIER_BUDGET = ViewBudget(max_items=4096, max_bytes=8 * 1024 * 1024)
"""The verifier sees every receipt; its bound only stops a runaway mission."""
_PLANNER_PROGRESS_BUDGET = ViewBudget(max_items=32, max_bytes=1500)
_PLANNER_WIDE_BUDGET = ViewBudget(max_items=64, max_bytes=4000)
"""C1 for the turn after an ``adjust_view`` recovery: more of the failure history and evidence."""
_RECOVERY_BUDGET = ViewBudget(max_items=24, max_bytes=4000)
_FOREIGN_TYPES = (EventType.STOP_REQUESTED, EventType.INTERACTION_RESOLVED)
"""What another writer may add to a running mission."""
_STATE_EVENTS = (EventType.CONTRACT_FROZEN, EventType.RECEIPT_RECORDED, EventType.VERDICT_RECORDED,
                 EventType.COMMIT_RECORDED, EventType.FACT_RECORDED)
_TERMINAL_STATUS = {
    "succeeded": BackendTerminal.SUCCEEDED,
    "aborted": BackendTerminal.ABORTED,
    "canceled": BackendTerminal.CANCELED,
}


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


class _ModelCallTap:
    """Takes, once each, the model-call records that components made since the last look.

    A ``ModelCallSource`` hands them over itself. A component that only keeps a
    ``calls`` list of ``llm_call`` records (the llm package's ``ChatCompleteFn``
    and ``LLMRecoveryAdvisor``, also when wrapped as a compiler's ``complete`` or
    a policy's ``advisor``) is read from where the tap left off; other entries
    in such a list (a test double's recorded messages) are not model calls and
    are skipped.
    """

    def __init__(self) -> None:
        self._read: list[list[Any]] = []
        """[the list, how many of its entries were taken], per list seen (held by identity)."""

    def take(self, *sources: Any, error: BaseException | None = None) -> list[dict[str, Any]]:
        found: list[Any] = []
        lists: list[list[Any]] = []
        for source in sources:
            for part in (source, getattr(source, "complete", None), getattr(source, "advisor", None)):
                if part is None:
                    continue
                if isinstance(part, ModelCallSource):
                    found.extend(part.drain_calls())
                    continue
                calls = getattr(part, "calls", None)
                if isinstance(calls, list) and not any(calls is seen for seen in lists):
                    lists.append(calls)
                    found.extend(self._unread(calls))
        failed = getattr(error, "call", None)
        if failed is not None and not any(failed is f for f in found):
            found.append(failed)  # the failed call's record, when the component did not keep it
        return [r for r in map(_llm_call_record, found) if r is not None]

    def _unread(self, calls: list[Any]) -> list[Any]:
        entry = next((e for e in self._read if e[0] is calls), None)
        if entry is None:
            entry = [calls, 0]
            self._read.append(entry)
        start, entry[1] = entry[1], len(calls)
        return calls[start:]


def _llm_call_record(value: Any) -> dict[str, Any] | None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict) and value.get("kind") == "llm_call":
        return json.loads(json.dumps(value, default=str))
    return None


def _error_record(exc: BaseException) -> dict[str, Any]:
    """An exception as the journal keeps it: code, message, type and (JSON-safe) structured details."""
    if isinstance(exc, HarnessError):
        details = {k: v for k, v in exc.details.items() if k not in ("meta", "call")}
        out = {"code": exc.code, "message": exc.message, "type": type(exc).__name__}
        if details:
            out["details"] = json.loads(json.dumps(details, default=str))
        return out
    return {"code": "unexpected_error", "message": f"{type(exc).__name__}: {exc}"[:2000], "type": type(exc).__name__}


class _Stop(Exception):
    """Internal: the mission ends now with this status."""

    def __init__(self, status: MissionStatus, summary: str) -> None:
        super().__init__(summary)
        self.status = status
        self.summary = summary


class _StoppedBeforeDispatch(Exception):
    """Internal: a Stop arrived while a dispatch intent was being committed; nothing was sent."""


class MissionRunner:
    """Runs one mission at a time through the closed loop."""

    def __init__(
        self,
        *,
        config: HarnessConfig,
        journal: Journal,
        clock: Clock,
        ids: IdGenerator,
        skills: SkillRegistry,
        snapshots: SnapshotPort,
        planner: PlannerPort,
        navigation: NavigationPort,
        robot_io: RobotIO | None = None,
        on_update: Callable[[str, ActionView | None, JournalEvent | None], None] | None = None,
        verifier: VerifierPort | None = None,
        contract_compiler: ContractCompiler | None = None,
        coverage_reviewer: CoverageReviewer | None = None,
        recorder: EvidenceRecorder | None = None,
        recovery: Any = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.config = config
        self.journal = journal
        self.clock = clock
        self.ids = ids
        self.skills = skills
        self.snapshots = snapshots
        self.planner = planner
        self.navigation = navigation
        self.robot_io = robot_io
        self._on_update = on_update
        self._places = place_poses(config)
        self.contract_compiler = contract_compiler or default_contract_compiler(config)
        self.coverage_reviewer = coverage_reviewer or default_coverage_reviewer(config)
        self.verifier = verifier or InProcessVerifier(config=config, snapshots=snapshots, ids=ids, clock=clock)
        self.gate = CommitGate(ids=ids, clock=clock)
        # The recovery node (via a port with the same decide()) or the same policy in-process.
        self.recovery = recovery or RecoveryPolicy(RecoveryBudgets.from_config(config.recovery),
                                                   alternatives=config.recovery.alternatives,
                                                   advisor=recovery_advisor(config))
        self.recorder = recorder
        self._sleep = sleep or (lambda s: self.navigation.poll(s))
        """A bounded wait (for an operator's answer); by default the backend poll, which also advances a test clock."""
        self._tool_specs = tuple(skills.tool_specs())
        self._physical_skills = frozenset(sk.name for sk in skills if sk.physical)
        self._recorder_error = ""
        self._stop_requested: str | None = None
        self._physical_blocked: str | None = None
        self._active: ManagedAction | None = None
        # per-mission state
        self._mission_id = ""
        self._actions: list[ManagedAction] = []
        self._calls: list[dict[str, Any]] = []
        self._evidence: list[int] = []
        self._deadline = math.inf
        self._goal = ""
        self._contract: CompletionContract | None = None
        self._state_version = 0
        self._trajectory: list[PoseSample] = []
        self._last_verdict: Verdict | None = None
        self._done_rejections = 0
        self._verdict_evidence: list[str] = []
        self._call_started: dict[str, float] = {}
        self._fact_heads: dict[str, str] = {}
        self._snapshot_refs: dict[str, EvidenceRef] = {}
        self._bag: dict[str, Any] = {}
        self._usage: dict[str, Any] = _new_usage()
        self._proposals: list[str] = []
        self._spent: dict[Rung, int] = {}
        self._state_fold = TaskStateFold()
        self._state_seq = 0
        self._state_cache: TaskState | None = None
        self._progress_since = 0
        self._revision = 0
        self._turn_state_version = 0
        self._attempts: dict[str, int] = {}
        self._node_of_call: dict[str, str] = {}
        self._approvals: dict[str, str] = {}
        self._model_calls = _ModelCallTap()
        self._turn_done: set[str] = set()
        """Obligations committed or already evidenced, as of this turn's planner view (scopes C2)."""
        self.reconciler = Reconciler(journal=journal, navigation=navigation, snapshots=snapshots, clock=clock,
                                     lookup_timeout_s=config.navigation.lookup_timeout_s,
                                     outcome=config.navigation.outcome, on_events=self._notify)
        self._progress_verifier = Verifier(verifier_config(config), semantic=None, artifact_check=lambda u, h: None,
                                           ids=IdGenerator(0), clock=clock, name="progress")

    # -- public ---------------------------------------------------------------

    @property
    def mission_id(self) -> str:
        """The mission this runner is running (or last ran); empty before the first."""
        return self._mission_id

    @property
    def physical_blocked(self) -> str | None:
        """Why new physical work is refused (a journal write failed), or None."""
        return self._physical_blocked

    def request_stop(self, reason: str = "stop requested") -> None:
        """Ask the running mission to stop at its next check (thread-safe flag)."""
        self._stop_requested = reason

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
            self._stop_requested = None  # a Stop is for one mission

    def _run(self, goal: str, *, mission_id: str, owner: str, owner_token_sha256: str,
             credentials: MissionCredentials) -> MissionOutcome:
        if not isinstance(goal, str) or not goal.strip():
            raise UsageError("a mission needs a non-empty natural-language goal")
        if len(goal) > MAX_GOAL_CHARS:
            raise UsageError(f"goal is {len(goal)} characters; the limit is {MAX_GOAL_CHARS}")
        self._mission_id = mission_id or self.ids.new("mission")
        self._places = place_poses(self.config)  # per mission: ``start`` is this mission's own
        self._actions, self._calls, self._evidence = [], [], []
        self._wide_view_turns = 0
        self._goal, self._contract, self._state_version = goal, None, 0
        self._trajectory, self._last_verdict, self._done_rejections, self._verdict_evidence = [], None, 0, []
        self._call_started, self._fact_heads, self._snapshot_refs, self._bag = {}, {}, {}, {}
        self._usage = _new_usage()
        self._proposals = []
        self._spent = {}
        self._progress_since = 0
        self._state_fold, self._state_seq, self._state_cache = TaskStateFold(), 0, None
        self._revision, self._turn_state_version, self._attempts, self._node_of_call = 0, 0, {}, {}
        self._owner, self._owner_sha, self._approvals = owner, owner_token_sha256, {}
        self._credentials = credentials
        self._turn_done = set()
        self._active = None
        self._deadline = self.clock.monotonic() + self.config.limits.mission_timeout_s
        self._recorder_error = ""
        self._start_recorder()  # first, so the bag holds the whole journal of the mission
        try:
            # Revision 0 expected: a mission id is admitted once, ever.
            self._append_many([self._draft(EventType.MISSION_STARTED, payload={
                "goal": goal,
                "config": self.config.model_dump(mode="json"),
                "tools": [s.name for s in self.skills],
                "owner": owner,
                **({"owner_sha256": owner_token_sha256} if owner_token_sha256 else {}),
                "owner_hmac": credentials.owner_hmac,
                "sender_hmac": credentials.sender_hmac,
            })], retry_stale=False)
            # A successful write clears an earlier storage failure.
            self._physical_blocked = None
        except StaleRevision:
            self._bag = self._stop_recorder()
            raise UsageError(f"mission {self._mission_id} already exists in the journal; a mission id is run once",
                             mission_id=self._mission_id) from None
        except JournalWriteError as exc:
            self._physical_blocked = str(exc)
            self._bag = self._stop_recorder(MissionStatus.BLOCKED, f"journal unavailable: {exc}")
            return self._outcome(MissionStatus.BLOCKED, f"journal unavailable, mission not started: {exc}")
        except Exception as exc:  # noqa: BLE001 - not admitted: nothing to finish, but the bag is closed
            self._bag = self._stop_recorder(MissionStatus.BLOCKED, f"mission not started: {type(exc).__name__}: {exc}")
            raise
        internal_error: dict[str, Any] | None = None
        try:
            self._freeze_contract(goal)
            self._bind_start()
            status, summary = self._loop(goal)
        except _Stop as stop:
            status, summary = stop.status, stop.summary
            if self._active is not None and not self._active.terminal:
                # e.g. the snapshot source died mid-action: do not leave the robot driving unsupervised
                summary += f"; in-flight action {self._abandon_active()} was asked to stop"
        except (JournalWriteError, JournalReadError) as exc:
            # The source of truth cannot be written (or read back): no new physical work until it can.
            self._physical_blocked = str(exc)
            self._abandon_active()
            self._bag = self._stop_recorder(MissionStatus.BLOCKED, f"journal failed: {exc}")
            what = "write" if isinstance(exc, JournalWriteError) else "read"
            return self._outcome(MissionStatus.BLOCKED, f"journal {what} failed; no new physical work: {exc}")
        except Exception as exc:  # noqa: BLE001 - a bug or a port's unexpected error must not leave the mission open
            # Fail closed: the outcome is unknown, the robot is asked to stop, the bag is
            # closed and the mission is finished in the journal with the error.
            status = MissionStatus.UNKNOWN
            summary = f"harness internal error, outcome unknown: {type(exc).__name__}: {exc}"
            internal_error = _error_record(exc)
            stopped = self._abandon_active()
            if stopped:
                summary += f"; in-flight action {stopped} was asked to stop"
        bag = self._bag = self._stop_recorder(status, summary)
        try:
            ev = self._append(EventType.MISSION_FINISHED, payload={
                "status": status.value, "summary": summary, "evidence_seqs": list(self._evidence),
                "evidence_ids": self._evidence_ids(), "bag": bag,
                "verdict_id": self._last_verdict.verdict_id if self._last_verdict else "",
                "model_usage": copy.deepcopy(self._usage),
                **({"internal_error": internal_error} if internal_error else {}),
            })
            self._evidence.append(ev.seq)
        except JournalWriteError as exc:
            self._physical_blocked = str(exc)
            return self._outcome(MissionStatus.BLOCKED, f"{summary} (final record not persisted: {exc})")
        return self._outcome(status, summary)

    # -- the loop -------------------------------------------------------------

    def _loop(self, goal: str) -> tuple[MissionStatus, str]:
        limits = self.config.limits
        pending: list[RuntimeEvent] = []
        last_results: list[ToolResult] = []
        silent = text_only = 0
        for turn_index in range(limits.max_turns):
            if isinstance(self.planner, InteractivePlanner):
                # An operator session idles here until its next call, a Stop or the deadline.
                self.planner.wait_for_call(lambda: bool(self._stop_requested)
                                           or self.clock.monotonic() >= self._deadline)
            self._check_budget()
            self._update("planning")
            snap, snap_draft = self._capture("before_model_turn", defer=True)
            turn_id = self.ids.new("turn")
            self._turn_state_version = self._state_version  # what this turn's decisions are keyed on
            ctx = compile_planner_context(
                progress=self._planner_progress(snap),
                goal=goal,
                turn_index=turn_index,
                snapshot=snap,
                places=sorted(self._places),
                runtime_events=pending,
                last_results=last_results,
                byte_cap=self.config.context_byte_cap,
                snapshot_byte_cap=self.config.snapshot_byte_cap,
            )
            # The snapshot, the turn and what it delivers to the model: one commit.
            self._append_many([
                snap_draft,
                self._draft(EventType.MODEL_TURN_STARTED, model_turn_id=turn_id, snapshot_id=snap.snapshot_id, payload={
                    "turn_index": turn_index, "context_bytes": context_size(ctx), "context": ctx,
                }),
                *(self._draft(EventType.RUNTIME_EVENT_DELIVERED, model_turn_id=turn_id, tool_call_id=ev.tool_call_id,
                              robot_action_id=ev.action_id, payload=ev.model_dump(mode="json")) for ev in pending),
            ])
            pending = []
            response, planner_error = self._ask_planner(turn_id, turn_index, ctx)
            self._count_model_io(response)
            # The response and every tool call in it are recorded in one commit, before any call runs.
            self._append_many([
                self._draft(EventType.MODEL_RESPONSE_RECORDED, model_turn_id=turn_id, snapshot_id=snap.snapshot_id, payload={
                    "response": response.model_dump(mode="json"), "error": planner_error,
                }),
                *(self._draft(EventType.TOOL_CALL_RECORDED, model_turn_id=turn_id, tool_call_id=call.id,
                              snapshot_id=snap.snapshot_id,
                              payload={"name": call.name, "arguments": call.arguments, "index": index,
                                       **self._skill_view(call, snap)})
                  for index, call in enumerate(response.tool_calls)),
            ])
            if response.text_only and planner_error is None:
                # Prose is not action: one recorded error, a new turn, within budget.
                text_only += 1
                if text_only > limits.max_text_only_turns:
                    return self._give_up(f"{text_only} text-only model answers (budget {limits.max_text_only_turns})")
                pending.append(RuntimeEvent(type="text_only_response", state="error", detail={
                    "code": "no_tool_call",
                    "reason": "the last answer was text only; act through the tools, or call propose_done",
                }))
                continue
            if response.silent:
                silent += 1
                if silent >= limits.max_silent_turns:
                    why = f"planner error: {planner_error}" if planner_error else "the planner stopped proposing actions"
                    return self._give_up(why)
                continue
            silent = 0
            last_results, action, done_call = self._run_tool_calls(turn_id, snap, response.tool_calls)
            outcome_event = self._supervise(action) if action is not None else None
            if outcome_event is not None:
                pending.append(outcome_event)
            failure = self._worst_failure(last_results, outcome_event)
            if failure is not None:
                pending.append(self._recover(turn_id, failure))
            self._check_budget()  # a Stop (or the deadline) during this turn ends it before any verification
            proposal: tuple[str, str] | None = None
            if done_call is not None:
                proposal = (done_call.id, str(done_call.arguments.get("summary", "")))
            elif response.done is not None:
                proposal = (f"{turn_id}/done", response.done)
            if proposal is not None:
                final, event = self._verify_done(turn_id, *proposal)
                if final is not None:
                    return final
                if event is not None:
                    pending.append(event)
        return self._give_up(f"turn budget of {limits.max_turns} exhausted without a verified done")

    def _count_model_io(self, response: ModelResponse) -> None:
        self._usage["planner_turns"] += 1
        call = response.meta.get("llm_call") if isinstance(response.meta, dict) else None
        if isinstance(call, dict):
            self._count_llm_call(call, "planner")

    def _count_llm_call(self, call: dict[str, Any], role: str) -> None:
        """One model call's tokens and latency, into the mission's usage (in total and per role)."""
        self._usage["llm_calls"] += 1
        by_role = self._usage["llm_calls_by_role"]
        by_role[role] = by_role.get(role, 0) + 1
        usage = call.get("usage") or {}
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            self._usage[key] += int(usage.get(key) or 0)
        self._usage["llm_latency_ms"] += float(call.get("latency_ms") or 0.0)

    def active_actions(self) -> list[ActionView]:
        """Views of this mission's managed actions (for an on-demand precondition check)."""
        return [a.view() for a in self._actions]

    def _take_model_calls(self, role: str, *sources: Any, error: BaseException | None = None) -> list[dict[str, Any]]:
        """The model calls ``sources`` made since the last look (journaled by the caller), counted."""
        calls = self._model_calls.take(*sources, error=error)
        for call in calls:
            self._count_llm_call(call, role)
        return calls

    def _skill_view(self, call: ToolCall, snapshot: WorldSnapshot) -> dict[str, Any]:
        """C2, the skill's view of this call's subgoal, journaled with the call (``{"skill_view": ...}``);
        empty for what is not a skill invocation (unknown tools, invalid arguments, done proposals,
        operator questions). Built from harness state only: see ``context.compile_skill_view``."""
        if call.name in (PROPOSE_DONE, ASK_OPERATOR) or MALFORMED_ARGUMENTS in call.arguments:
            return {}
        try:
            skill = self.skills.get(call.name)
            args = skill.validate(call.arguments)
        except UsageError:
            return {}
        place: str | None = None
        target: Pose2D | None = None
        if isinstance(args, NavigateToArgs):
            try:
                target = resolve_target(args, self._places)
            except UsageError:
                target = None
            place = args.place if target is not None else None
        state = self._task_state()
        nav = skill.managed.navigation if skill.managed is not None else None
        view = compile_skill_view(
            contract=state.contract, skill=skill.name, now=self.clock.now(),
            done=self._turn_done | set(state.committed), place=place, target=target, places=self._places,
            near_m=nav.outcome.xy_m if nav is not None else 0.5, snapshot=snapshot, receipts=state.receipts)
        return {"skill_view": {"role": view.role.value, "scope": view.scope, "items": view.as_list(),
                               "dropped": dict(view.dropped), "withheld_conflicts": list(view.withheld_conflicts),
                               "bytes": view.bytes}}

    def _ask_planner(self, turn_id: str, turn_index: int, ctx: dict[str, Any]) -> tuple[ModelResponse, str | None]:
        request = PlannerRequest(
            mission_id=self._mission_id, model_turn_id=turn_id, turn_index=turn_index,
            context=ctx, tools=self._tool_specs,
        )
        try:
            return self.planner.next_turn(request), None
        except HarnessError as exc:
            # A failed model call is still journaled with whatever I/O it had.
            meta = exc.details.get("meta") if isinstance(exc.details.get("meta"), dict) else {}
            return ModelResponse(meta=meta), f"{exc.code}: {exc.message}"

    # -- tool calls -----------------------------------------------------------

    def _run_tool_calls(
        self, turn_id: str, decision: WorldSnapshot, calls: Sequence[ToolCall]
    ) -> tuple[list[ToolResult], ManagedAction | None, ToolCall | None]:
        results: list[ToolResult] = []
        dispatched: ManagedAction | None = None
        done_call: ToolCall | None = None
        stop_reason: str | None = None
        seen: set[str] = set()
        limit = self.config.limits.max_tool_calls_per_turn
        for index, call in enumerate(calls):
            action: ManagedAction | None = None
            if call.id in seen:
                result = self._error(call, "duplicate_tool_call_id", f"tool call id {call.id!r} was already used in this turn")
            elif index >= limit:
                result = ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED,
                                    content={"reason": f"more than {limit} tool calls in one turn"})
            elif self._stop_requested:
                result = ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.CANCELLED,
                                    content={"reason": f"stopped: {self._stop_requested}; not run"})
            elif stop_reason is not None:
                result = ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.SKIPPED,
                                    content={"reason": stop_reason})
            elif call.name == PROPOSE_DONE:
                result = self._accept_done_call(call, first=done_call is None)
                if result.status is ToolResultStatus.OK:
                    done_call = call
            else:
                self._call_started[call.id] = self.clock.now()
                result, action = self._run_one(turn_id, decision, call, physical_done=dispatched is not None)
                if result.status is ToolResultStatus.PRECONDITION_CHANGED:
                    stop_reason = "an earlier call in this turn hit precondition_changed; decide again on the fresh snapshot"
            seen.add(call.id)
            results.append(result)
            if action is not None:
                dispatched = action
            drafts = [self._draft(EventType.TOOL_RESULT_RECORDED, model_turn_id=turn_id, tool_call_id=call.id,
                                  robot_action_id=result.action_id or "", payload=result.model_dump(mode="json"))]
            if action is None and call.name != PROPOSE_DONE:
                # Everything but an accepted physical action ends here: its receipt
                # is written with its result, in the same commit. An accepted
                # action's receipt is written with its verified outcome.
                drafts += self._receipt_draft(turn_id, decision, call, result)
            self._append_many(drafts)
            self._calls.append({
                "id": call.id, "name": call.name, "arguments": call.arguments,
                "result": result.model_dump(mode="json", exclude={"kind", "format_version"}),
                "action_id": result.action_id,
            })
        return results, dispatched, done_call

    def _accept_done_call(self, call: ToolCall, *, first: bool) -> ToolResult:
        try:
            self.skills.get(PROPOSE_DONE).validate(call.arguments)
        except UsageError as exc:
            return self._error(call, exc.code, exc.message, exc.details)
        if not first:
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED,
                              content={"reason": "one done proposal per turn"})
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.OK, content={
            "note": "verification requested: the independent verifier decides, against the goal's completion "
                    "contract, receipts and fresh observations; its verdict arrives in the next turn",
        })

    def _run_one(
        self, turn_id: str, decision: WorldSnapshot, call: ToolCall, *, physical_done: bool
    ) -> tuple[ToolResult, ManagedAction | None]:
        if MALFORMED_ARGUMENTS in call.arguments:
            return self._error(call, "malformed_arguments",
                               f"{call.name}: the arguments are not a JSON object; nothing was run",
                               {"raw": str(call.arguments[MALFORMED_ARGUMENTS])[:500]}), None
        try:
            skill = self.skills.get(call.name)
            args = skill.validate(call.arguments)
        except UsageError as exc:
            return self._error(call, exc.code, exc.message, exc.details), None
        if skill.name == ASK_OPERATOR:
            return self._ask_operator(turn_id, call, args), None
        if skill.physical and physical_done:
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED, content={
                "code": "one_physical_action_per_step",
                "reason": "at most one new managed physical action per decision step; propose it again next turn",
            }), None
        if self._needs_approval(skill):
            refused = self._approval(turn_id, call, skill, args)
            if refused is not None:
                return refused, None
        if skill.physical:
            return self._dispatch(turn_id, decision, call, skill, args)
        env = ToolEnv(places=self._places, robot_io=self.robot_io, snapshot=decision)
        assert skill.handler is not None
        if skill.resources:
            # Keyed like a navigation: the same request again returns the existing execution record.
            key = self._dispatch_key(skill, args)
            self._node_of_call[call.id] = key.node
            existing = self._capability_record(key)
            if existing is not None:
                return self._duplicate_capability_result(call, existing), None
            conflict = self._free_resources(skill)
            # The intent (keyed, under which policy decision) rides on the leases: durable before the call runs.
            intent = {"key": key.text, "node": key.node, "attempt": key.attempt, "state_version": key.state_version,
                      "tool_call_id": call.id, "skill": skill.name,
                      "policy": {"approval": self._approvals.get(call.id, ""), "authorized_attempt": key.attempt}}
            try:
                if conflict is not None:
                    raise conflict
                self._append_many(self._lease_drafts(skill, call.id, self.clock.now() + _LEASE_MARGIN_S, intent=intent))
            except LeaseConflict as exc:
                return self._lease_conflict_result(call, exc), None
            except _StoppedBeforeDispatch as stop:
                return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.CANCELLED,
                                  content={"reason": f"stopped before the call ran: {stop}; nothing was run"}), None
        try:
            content = skill.handler(env, args)
        except HarnessError as exc:
            return self._error(call, exc.code, exc.message, exc.details), None
        except Exception as exc:  # a tool's own bug or I/O failure: one recorded error result
            return self._error(call, "tool_exception", f"{type(exc).__name__}: {exc}"), None
        finally:
            if skill.resources:  # the call returned (or raised): it is over
                self._append_many(self._lease_end_drafts(skill, call.id, ReleaseReason.CONFIRMED_TERMINAL,
                                                         "the call returned"))
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.OK, content=content), None

    # -- operator interactions ------------------------------------------------

    def _approval_policy(self, skill: Skill) -> ApprovalPolicy | None:
        """Who may approve a call of ``skill`` (its own tags and ``interactions.skill_tags``), or None."""
        cfg = self.config.interactions
        policy = cfg.approval_policy_for(set(skill.tags) | set(cfg.skill_tags.get(skill.name, ())))
        return ApprovalPolicy(policy) if policy is not None else None

    def _needs_approval(self, skill: Skill) -> bool:
        return self._approval_policy(skill) is not None

    def _approval(self, turn_id: str, call: ToolCall, skill: Skill, args: BaseModel) -> ToolResult | None:
        """Wait for an approval of this exact call (by whom its policy says); None when approved, else its one result."""
        arguments = args.model_dump(mode="json", exclude_none=True)
        resolved = self._interact(turn_id, call, InteractionKind.APPROVAL, self._approval_policy(skill) or ApprovalPolicy.OWNER,
                                  prompt=f"approve {skill.name}({json.dumps(arguments, sort_keys=True)})?",
                                  subject={"tool_call_id": call.id, "name": skill.name, "arguments": arguments,
                                        "arguments_sha256": arguments_sha256(arguments)})
        how = resolved.resolution or {}
        if how.get("resolution") == Resolution.APPROVE.value:
            self._approvals[call.id] = resolved.interaction_id
            return None
        if how.get("resolution") == Resolution.DENY.value:
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.DENIED, content={
                "reason": f"the operator denied this call ({resolved.interaction_id}); nothing was run",
                "operator": how.get("operator", ""), "answered_as": how.get("answered_as", "")})
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.CANCELLED, content={
            "reason": f"approval {how.get('resolution', 'not given')} ({resolved.interaction_id}); nothing was run"
                      + (f"; nobody could approve: it {resolved.waiting_on}" if resolved.waiting_on else ""),
            "policy": resolved.policy.value})

    def _ask_operator(self, turn_id: str, call: ToolCall, args: Any) -> ToolResult:
        skill = self.skills.get(call.name)
        resolved = self._interact(turn_id, call, InteractionKind.QUESTION,
                                  self._approval_policy(skill) or ApprovalPolicy.OWNER, prompt=args.question,
                                  choices=tuple(args.choices))
        how = resolved.resolution or {}
        if how.get("resolution") == Resolution.ANSWER.value:
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.OK, content={
                "answer": how.get("answer", ""), "choice": how.get("choice", ""), "operator": how.get("operator", ""),
                "answered_as": how.get("answered_as", ""), "interaction_id": resolved.interaction_id})
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.CANCELLED, content={
            "reason": f"question {how.get('resolution', 'not answered')} ({resolved.interaction_id})"
                      + (f"; nobody could answer: it {resolved.waiting_on}" if resolved.waiting_on else "")})

    def _interact(self, turn_id: str, call: ToolCall, kind: InteractionKind, policy: ApprovalPolicy, *, prompt: str,
                  subject: dict[str, Any] | None = None, choices: tuple[str, ...] = ()) -> Interaction:
        """Ask whoever ``policy`` names, then wait (bounded) for the first resolution.

        The request is journaled first, with the policy and the digests of the
        credentials that may answer (so every resolver applies the same rule),
        so it survives a restart. With nobody able to answer it still waits, and
        its ``waiting_on`` says which setting is missing. A Stop
        dismisses it and the deadline (the interaction's or the mission's)
        expires it; either is recorded as a resolution, so an operator's later
        answer meets ``command_conflict`` rather than silently changing the past.
        """
        now = self.clock.now()
        interaction_id = interaction_id_for(self._mission_id, call.id)
        timeout_s = self.config.interactions.timeout_s
        self._append_many([self._draft(EventType.INTERACTION_REQUESTED, model_turn_id=turn_id, tool_call_id=call.id, payload={
            "interaction_id": interaction_id, "kind": kind.value, "prompt": prompt, "call": subject,
            "choices": list(choices), "owner": self._owner,
            **request_fields(policy, self._credentials, legacy_owner_sha256=self._owner_sha,
                             operator_token_env=self.config.interactions.operator_token_env),
            "requested_at": now, "expires_at": now + timeout_s})])
        self._update("waiting_user")
        deadline = min(self.clock.monotonic() + timeout_s, self._deadline)
        while True:
            self._absorb()
            found = self._interaction(interaction_id)
            if found.resolution is not None:
                break
            if self._stop_requested or self.clock.monotonic() >= deadline:
                why = Resolution.DISMISS if self._stop_requested else Resolution.EXPIRED
                self._append_many([resolution_draft(found, why, operator="harness", now=self.clock.now())])
                continue  # re-read: if the operator answered first, that answer stands
            self._sleep(0.1)
        self._update("planning")
        return found

    def _interaction(self, interaction_id: str) -> Interaction:
        return interactions(self.journal.events(mission_id=self._mission_id, types=[
            EventType.INTERACTION_REQUESTED, EventType.INTERACTION_RESOLVED]))[interaction_id]

    @staticmethod
    def _error(call: ToolCall, code: str, message: str, details: dict[str, Any] | None = None) -> ToolResult:
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.ERROR,
                          error={"code": code, "message": message, **(details or {})})

    # -- managed physical actions ---------------------------------------------

    def _dispatch(
        self, turn_id: str, decision: WorldSnapshot, call: ToolCall, skill: Skill, args: Any
    ) -> tuple[ToolResult, ManagedAction | None]:
        assert skill.managed is not None and isinstance(args, NavigateToArgs)
        nav = skill.managed.navigation
        if self._physical_blocked:
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED,
                              content={"reason": f"physical work blocked: {self._physical_blocked}"}), None
        try:
            target_decision = resolve_target(args, self._places)
        except UsageError as exc:
            return self._error(call, exc.code, exc.message, exc.details), None
        dispatch_key = self._dispatch_key(skill, args)
        self._node_of_call[call.id] = dispatch_key.node
        existing = self._just_done(dispatch_key)  # a repeated key is refused by the intent's commit
        if existing is not None:
            return self._duplicate_result(call, DuplicateDispatch("already dispatched", existing)), None
        self._update("checking")
        conflict = self._free_resources(skill)
        if conflict is not None:
            return self._lease_conflict_result(call, conflict), None
        # Last, right before dispatch: the fresh-state check (reconciling a lease may have taken a while).
        fresh, snap_draft = self._capture("pre_dispatch", defer=True)
        target_now = resolve_target(args, self._places)
        report = check_preconditions(
            nav.preconditions, decision=decision, fresh=fresh,
            target_at_decision=target_decision, target_now=target_now,
            active_actions=[a.view() for a in self._actions], workspace=navigation_workspace(nav, self._places),
        )
        check_draft = self._draft(EventType.ACTION_PRECONDITION_CHECKED, model_turn_id=turn_id, tool_call_id=call.id,
                                  snapshot_id=fresh.snapshot_id, payload=report.model_dump(mode="json"))
        if not report.ok:
            self._append_many([snap_draft, check_draft])
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.PRECONDITION_CHANGED, content={
                "failed": [c.model_dump() for c in report.failed],
                "fresh_snapshot_id": fresh.snapshot_id,
                "note": "nothing was sent to the robot; a new turn starts on the fresh snapshot",
            }), None
        now = self.clock.now()
        action = ManagedAction(
            action_id=self.ids.new("act"), mission_id=self._mission_id, tool_call_id=call.id, model_turn_id=turn_id,
            skill=skill.name, target=target_now, decision_snapshot_id=decision.snapshot_id,
            backend=self.navigation.name, now=now,
        )
        action.dispatch_snapshot = fresh
        distance = fresh.pose.distance_to(target_now) if fresh.pose else 0.0
        timeout_s = nav.timeout_s + nav.timeout_per_m_s * distance
        key, goal_id = dispatch_key, goal_uuid_for(dispatch_key.text)
        # The fresh snapshot, the passing check, the dispatch intent (keyed, so a
        # repeat is refused) and the resource leases are durable (one
        # revision-checked commit) before anything is sent to the robot.
        try:
            committed = self._append_many([snap_draft, check_draft, self._draft(
                EventType.ROBOT_ACTION_STARTED, model_turn_id=turn_id, tool_call_id=call.id,
                robot_action_id=action.action_id, snapshot_id=fresh.snapshot_id, payload={
                    "intent": {"backend": self.navigation.name, "target": target_now.model_dump(),
                               "frame_id": self.config.frame_id, "timeout_s": round(timeout_s, 2),
                               "arguments": call.arguments},
                    "dispatch": {"key": key.text, "goal_id": goal_id, "resources": list(skill.resources),
                                 "node": key.node, "attempt": key.attempt, "state_version": key.state_version},
                    # under which policy decision: the passing pre-dispatch check (same commit),
                    # the operator's approval, and the recovery attempt that authorized it
                    "policy": {"preconditions": "passed", "approval": self._approvals.get(call.id, ""),
                               "authorized_attempt": key.attempt},
                    "action": action.view().model_dump(mode="json"),
                }), *self._lease_drafts(skill, action.action_id,
                                        now + timeout_s + nav.cancel_timeout_s + _LEASE_MARGIN_S)])
        except DuplicateDispatch as exc:
            return self._duplicate_result(call, exc), None
        except LeaseConflict as exc:
            return self._lease_conflict_result(call, exc), None
        except _StoppedBeforeDispatch as stop:
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.CANCELLED,
                              content={"reason": f"stopped before dispatch: {stop}; nothing was sent"}), None
        self._evidence.append(committed[2].seq)
        action.timeout_s = timeout_s
        self._actions.append(action)
        self._active = action
        self._update("dispatching", action)
        try:
            ack = self.navigation.send_goal(target=target_now, frame_id=self.config.frame_id,
                                            timeout_s=nav.accept_timeout_s, goal_id=goal_id)
        except HarnessTimeout as exc:
            return self._lost_acknowledgment(call, action, skill, goal_id, exc.message)
        except HarnessError as exc:
            self._end_before_motion(action, skill, ActionStatus.FAILED, f"not sent: {exc.message}")
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED, action_id=action.action_id,
                              content={"reason": exc.message}), None
        if not ack.accepted:
            action.backend_goal_id = ack.goal_id
            self._end_before_motion(action, skill, ActionStatus.FAILED,
                                    f"rejected by the backend: {ack.reason or 'no reason given'}")
            return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED, action_id=action.action_id,
                              content={"reason": ack.reason or "rejected by the navigation backend"}), None
        action.backend_goal_id = ack.goal_id
        action.accepted_at = self.clock.monotonic()
        self._transition(action, ActionStatus.ACCEPTED, "accepted by the backend")
        return self._accepted_result(call, action), action

    def _accepted_result(self, call: ToolCall, action: ManagedAction, note: str = "") -> ToolResult:
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.ACCEPTED, action_id=action.action_id, content={
            "backend_goal_id": action.backend_goal_id,
            "target": action.target.model_dump() if action.target else None,
            "note": note or "accepted is not completion; the verified outcome arrives as a runtime event",
        })

    def _lost_acknowledgment(self, call: ToolCall, action: ManagedAction, skill: Skill, goal_id: str,
                             why: str) -> tuple[ToolResult, ManagedAction | None]:
        """No accept/reject arrived in time. The goal may be running: look it up by its id, never re-send it."""
        nav = skill.managed.navigation  # type: ignore[union-attr]
        try:
            status = self.navigation.lookup(goal_id, timeout_s=nav.lookup_timeout_s)
            detail = f"backend reports the goal {status}" if status else "backend does not track the goal"
        except HarnessError as exc:
            status, detail = None, f"backend could not be asked: {exc.message}"
        self._append(EventType.ROBOT_ACTION_RECONCILED, tool_call_id=call.id, robot_action_id=action.action_id, payload={
            "finding": "acknowledgment_lost", "backend_status": status or "", "detail": f"{why}; {detail}",
            "goal_id": goal_id})
        if status in ACTIVE_STATUSES or status in TERMINAL_STATUSES:
            self.navigation.adopt(goal_id)
            action.backend_goal_id = goal_id
            action.accepted_at = self.clock.monotonic()
            self._transition(action, ActionStatus.ACCEPTED, f"acceptance lost; found on the backend by goal id ({status})")
            return self._accepted_result(call, action, "the acceptance was lost, but the backend runs the goal (looked up "
                                                       "by its id; it was not sent again); the verified outcome arrives "
                                                       "as a runtime event"), action
        action.backend_goal_id = goal_id
        # Maybe moving, maybe not: UNKNOWN, and the resource stays blocked until reconciled.
        self._append_many([self._transition(action, ActionStatus.UNKNOWN, f"no accept/reject from the backend: {why}; {detail}",
                                            defer=True), *self._lease_end_drafts(skill, action.action_id, None, detail)])
        self._active = None
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.ERROR, action_id=action.action_id,
                          error={"code": "backend_timeout", "message": f"{why}; {detail}; the {'/'.join(skill.resources)} "
                                 "stays reserved until the backend confirms the goal ended"}), None

    def _end_before_motion(self, action: ManagedAction, skill: Skill, state: ActionStatus, reason: str) -> None:
        """The backend refused the goal or it was never sent: nothing moves, the leases end."""
        self._append_many([self._transition(action, state, reason, defer=True),
                           *self._lease_end_drafts(skill, action.action_id, ReleaseReason.CONFIRMED_TERMINAL, reason)])
        self._active = None

    # -- leases and keys --------------------------------------------------------

    def _just_done(self, key: DispatchKey) -> Any:
        """The execution record of this node if it is the last physical action, verified SUCCEEDED, and no
        new attempt was authorized since: asking for it again (e.g. after a lost acknowledgment that was
        then found) is the same request, not a new motion. Going back to a place after going elsewhere
        is a new request."""
        last = self._actions[-1] if self._actions else None
        if last is None or last.state is not ActionStatus.SUCCEEDED:
            return None
        record = self.journal.dispatch_for_action(last.action_id)
        if record is None or not record.key.startswith(f"{key.mission_id}/{key.node}/a{key.attempt}/"):
            return None
        return record

    def _dispatch_key(self, skill: Skill, args: BaseModel) -> DispatchKey:
        node = DispatchKey.for_call(mission_id=self._mission_id, skill=skill.name,
                                    arguments=args.model_dump(mode="json", exclude_none=True), attempt=1, state_version=0).node
        return DispatchKey(mission_id=self._mission_id, node=node, attempt=self._attempts.get(node, 1),
                           state_version=self._turn_state_version)

    def _lease_drafts(self, skill: Skill, owner: str, expires_at: float, *,
                      intent: dict[str, Any] | None = None) -> list[EventDraft]:
        """``intent``: a capability call's keyed dispatch intent, carried by each of its leases."""
        return [self._draft(EventType.LEASE_ACQUIRED, robot_action_id=owner if skill.physical else "",
                            tool_call_id="" if skill.physical or intent is None else owner, payload={
            "resource": r, "owner": owner, "expires_at": round(expires_at, 3), "skill": skill.name,
            **({"intent": intent} if intent is not None else {})})
            for r in skill.resources]

    def _capability_record(self, key: DispatchKey) -> dict[str, Any] | None:
        """The execution record of a keyed capability call that this request repeats, or None.

        A repeat is the same key (task, node, attempt, state version), or, as for
        a navigation (``_just_done``), the same node and attempt when that call is
        the mission's last keyed invocation, it succeeded, and no verdict has been
        given since (after one, e.g. an image judged stale, calling again is the
        planner's answer to it, not a repeat). Read from the journal, the source
        of truth.
        """
        intents: list[tuple[str, str, int]] = []
        """(key, tool call id, seq) of every keyed invocation of the mission, navigation or capability, in order."""
        results: dict[str, dict[str, Any]] = {}
        receipts: dict[str, str] = {}
        last_verdict_seq = 0
        for ev in self.journal.events(mission_id=self._mission_id, types=[
                EventType.ROBOT_ACTION_STARTED, EventType.LEASE_ACQUIRED, EventType.TOOL_RESULT_RECORDED,
                EventType.RECEIPT_RECORDED, EventType.VERDICT_RECORDED]):
            if ev.type is EventType.ROBOT_ACTION_STARTED and (ev.payload.get("dispatch") or {}).get("key"):
                intents.append((ev.payload["dispatch"]["key"], ev.tool_call_id, ev.seq))
            elif ev.type is EventType.LEASE_ACQUIRED and isinstance(ev.payload.get("intent"), dict):
                k = str(ev.payload["intent"].get("key", ""))
                if k and not (intents and intents[-1][0] == k):  # one intent, one lease per resource
                    intents.append((k, str(ev.payload["intent"].get("tool_call_id", "")), ev.seq))
            elif ev.type is EventType.TOOL_RESULT_RECORDED:
                results[ev.tool_call_id] = ev.payload
            elif ev.type is EventType.RECEIPT_RECORDED:
                receipts[ev.tool_call_id] = str((ev.payload.get("receipt") or {}).get("receipt_id", ""))
            elif ev.type is EventType.VERDICT_RECORDED:
                last_verdict_seq = ev.seq
        match, why = next((i for i in intents if i[0] == key.text), None), "same_key"
        if match is None and intents:
            last = intents[-1]
            if last[0].startswith(f"{key.mission_id}/{key.node}/a{key.attempt}/") \
                    and (results.get(last[1]) or {}).get("status") == ToolResultStatus.OK.value \
                    and last_verdict_seq < last[2]:
                match, why = last, "just_done"
        if match is None:
            return None
        result = results.get(match[1]) or {}
        return {"key": match[0], "match": why, "tool_call_id": match[1], "status": result.get("status", ""),
                "content": result.get("content") or {}, "error": result.get("error"),
                "receipt_id": receipts.get(match[1], "")}

    def _lease_end_drafts(self, skill: Skill, owner: str, why: ReleaseReason | None, detail: str) -> list[EventDraft]:
        """Release (``why`` given: confirmed terminal or stopped) or block (None: outcome unknown) a call's leases."""
        if why is None:
            return [self._draft(EventType.LEASE_BLOCKED, payload={"resource": r, "owner": owner, "reason": detail})
                    for r in skill.resources]
        return [self._draft(EventType.LEASE_RELEASED, payload={"resource": r, "owner": owner, "why": why.value,
                                                                "detail": detail}) for r in skill.resources]

    def _free_resources(self, skill: Skill) -> LeaseConflict | None:
        """Settle leases on the skill's resources left by ended owners; the conflict that remains, if any."""
        leases = self.journal.leases()
        for resource in skill.resources:
            lease = leases.get(resource)
            if lease is None:
                continue
            settled = self.reconciler.settle_lease(lease)
            if settled is None or resource not in settled.released:
                held = self.journal.leases().get(resource)
                if held is not None:
                    return LeaseConflict.of(held, settled.detail if settled else "")
        return None

    @staticmethod
    def _duplicate_result(call: ToolCall, exc: DuplicateDispatch) -> ToolResult:
        rec = exc.existing
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED, action_id=rec.action_id,
                          content={"code": "duplicate_dispatch", "reason": "duplicate request: this exact dispatch (task, node, attempt, state version) "
                                             "already exists; nothing new was sent",
                                   "existing": rec.model_dump(mode="json")})

    @staticmethod
    def _duplicate_capability_result(call: ToolCall, existing: dict[str, Any]) -> ToolResult:
        why = ("this exact invocation (task, node, attempt, state version) already ran"
               if existing["match"] == "same_key" else "the same invocation just ran and succeeded, and nothing ran since")
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED, content={
            "code": "duplicate_dispatch", "reason": f"duplicate request: {why}; nothing was run again",
            "existing": existing})

    @staticmethod
    def _lease_conflict_result(call: ToolCall, exc: LeaseConflict) -> ToolResult:
        return ToolResult(tool_call_id=call.id, name=call.name, status=ToolResultStatus.REJECTED, content={
            "code": "lease_conflict", "reason": f"{exc.message}; nothing was sent",
            "lease": exc.lease.model_dump(mode="json")})

    def _supervise(self, action: ManagedAction) -> RuntimeEvent:
        """Track one accepted action to a terminal report (or timeout), then verify it."""
        self._update("running", action)
        nav_cfg = self.skills.get(action.skill).managed.navigation  # type: ignore[union-attr]
        timeout_s = action.timeout_s
        started = self.clock.monotonic()
        deadline = min(started + timeout_s, self._deadline)
        terminal = BackendTerminal.NONE
        last_progress_journal = -math.inf
        uncorrelated_seen: set[tuple[str, str]] = set()
        earlier_goals = {a.backend_goal_id for a in self._actions if a is not action and a.backend_goal_id}
        why_none = f"no terminal report within {timeout_s:.1f} s"
        stop_confirmed = False
        while terminal is BackendTerminal.NONE:
            now = self.clock.monotonic()
            if self._stop_requested:
                why_none = f"stopped: {self._stop_requested}"
                break
            if now >= deadline:
                if deadline == self._deadline:
                    why_none = "mission timeout while the action was running"
                break
            for ev in self.navigation.poll(min(0.1, deadline - now)):
                if not self.config.eval_ablations.evidence_binding and ev.status in _TERMINAL_STATUS:
                    ev = ev.model_copy(update={"goal_id": action.backend_goal_id})  # ablation: any report is "ours"
                if ev.goal_id != action.backend_goal_id and ev.goal_id in earlier_goals:
                    continue  # a late report about an action that is already judged
                if ev.goal_id != action.backend_goal_id:
                    key = (ev.goal_id, ev.status or ev.type)
                    if key not in uncorrelated_seen:
                        uncorrelated_seen.add(key)
                        self._append(EventType.BACKEND_EVENT_UNCORRELATED, robot_action_id=action.action_id, payload={
                            "goal_id": ev.goal_id, "type": ev.type, "status": ev.status,
                            "note": "not the goal this action started; ignored",
                        })
                    continue
                if action.state is ActionStatus.ACCEPTED and (ev.type == "feedback" or ev.status == "executing"):
                    self._transition(action, ActionStatus.RUNNING, "backend reports execution")
                if ev.type == "feedback":
                    action.last_progress_at = self.clock.monotonic()
                    if action.last_progress_at - last_progress_journal >= nav_cfg.progress_journal_period_s:
                        last_progress_journal = action.last_progress_at
                        self._append(EventType.ROBOT_ACTION_PROGRESS, tool_call_id=action.tool_call_id,
                                     robot_action_id=action.action_id, payload={
                                         "distance_remaining": ev.distance_remaining,
                                         "current_pose": ev.current_pose.model_dump() if ev.current_pose else None,
                                     })
                        self._update("running", action)
                if ev.status in _TERMINAL_STATUS:
                    terminal = _TERMINAL_STATUS[ev.status]
                    action.backend_status = ev.status
                    action.terminal_reported_at = ev.stamp or self.clock.now()
                    break
        if terminal is BackendTerminal.NONE and action.backend_goal_id:
            acknowledged = self.navigation.cancel(action.backend_goal_id, timeout_s=nav_cfg.cancel_timeout_s)
            action.backend_status = "cancel_acknowledged" if acknowledged else "cancel_unacknowledged"
            # An acknowledged cancel is not a stopped robot: wait (bounded) for the
            # goal's terminal report. Either way the requested action did not
            # complete on its own, so the verdict stays UNKNOWN; the reason says
            # whether the stop was confirmed.
            # A refused cancel usually means the goal ended on its own meanwhile;
            # its terminal report is then the evidence to judge.
            confirmed = self._await_terminal(action, nav_cfg.cancel_timeout_s)
            if confirmed in (BackendTerminal.SUCCEEDED, BackendTerminal.ABORTED):
                terminal = confirmed
            elif confirmed is BackendTerminal.CANCELED:
                stop_confirmed = True
                why_none += "; cancel requested, backend confirmed canceled"
            else:
                why_none += "; cancel requested, stop NOT confirmed by the backend" + ("" if acknowledged else " (refused)")
        self._update("verifying", action)
        # The post-terminal snapshot before the move to VERIFYING: when it cannot be captured the
        # action is abandoned from the state the journal holds, not from an uncommitted one.
        post, post_draft = self._capture_after(action.terminal_reported_at, nav_cfg.outcome.settle_s)
        verifying = self._transition(action, ActionStatus.VERIFYING,
                                     f"backend {terminal.value}" if terminal is not BackendTerminal.NONE else why_none,
                                     defer=True)
        assert action.target is not None and action.dispatch_snapshot is not None
        verdict = check_navigation_outcome(
            target=action.target, backend=terminal, post=post, dispatch=action.dispatch_snapshot, tol=nav_cfg.outcome,
            not_before=action.terminal_reported_at,
        )
        if not self.config.eval_ablations.evidence_binding and terminal is BackendTerminal.SUCCEEDED:
            verdict = OutcomeVerdict(state=ActionStatus.SUCCEEDED, reason="backend succeeded (ablation: not bound "
                                     "to a fresh observation)", evidence={"backend_terminal": "succeeded"})
        reason = verdict.reason if terminal is not BackendTerminal.NONE else f"{why_none}; {verdict.reason}"
        action.outcome_snapshot_id = post.snapshot_id
        final = self._transition(action, verdict.state, reason, defer=True)
        # The lease ends only on a confirmed end (a terminal report, or a confirmed
        # cancel); otherwise the robot may still be moving and the resource stays blocked.
        skill = self.skills.get(action.skill)
        confirmed_end = terminal is not BackendTerminal.NONE or stop_confirmed
        lease_end = self._lease_end_drafts(
            skill, action.action_id, ReleaseReason.CONFIRMED_TERMINAL if confirmed_end else None,
            f"backend {action.backend_status}" if confirmed_end else f"{why_none}: the robot may still be moving")
        # VERIFYING, the post-terminal snapshot, the verdict, its evidence and the lease: one commit.
        committed = self._append_many([verifying, post_draft, final, *lease_end, self._draft(
            EventType.ROBOT_ACTION_OUTCOME, tool_call_id=action.tool_call_id, robot_action_id=action.action_id,
            snapshot_id=post.snapshot_id, payload={
                "state": verdict.state.value, "reason": reason, "evidence": verdict.evidence,
                "action": action.view().model_dump(mode="json"),
            }), *self._action_receipt_draft(action, post, reason)])
        self._evidence.append(next(e.seq for e in committed if e.type is EventType.ROBOT_ACTION_OUTCOME))
        self._active = None
        self._update("verifying", action)
        return RuntimeEvent(type="robot_action_outcome", tool_call_id=action.tool_call_id, action_id=action.action_id,
                            state=verdict.state.value, detail={"reason": reason, "skill": action.skill,
                                                               "target": action.target.model_dump() if action.target else None})

    def _await_terminal(self, action: ManagedAction, timeout_s: float) -> BackendTerminal:
        deadline = self.clock.monotonic() + timeout_s
        while (now := self.clock.monotonic()) < deadline:
            for ev in self.navigation.poll(min(0.1, deadline - now)):
                if ev.goal_id == action.backend_goal_id and ev.status in _TERMINAL_STATUS:
                    action.backend_status = ev.status
                    action.terminal_reported_at = ev.stamp or self.clock.now()
                    return _TERMINAL_STATUS[ev.status]
        return BackendTerminal.NONE

    def _capture_after(self, not_before: float | None, settle_s: float) -> tuple[WorldSnapshot, EventDraft]:
        """The post-terminal snapshot, waiting (bounded) for a pose observed after the terminal report."""
        deadline = self.clock.monotonic() + settle_s
        snap, draft = self._capture("post_terminal", defer=True)
        while not_before is not None and self.clock.monotonic() < deadline:
            stamp = snap.pose_meta.source_stamp
            if stamp is not None and stamp >= not_before:
                break
            self.navigation.poll(0.05)  # a bounded wait; late events about a judged goal are irrelevant
            snap, draft = self._capture("post_terminal", defer=True)
        return snap, draft

    def _abandon_active(self) -> str:
        """Supervision failed mid-action: ask the backend to stop rather than move unsupervised.

        The action ends UNKNOWN (its outcome was never verified), with its
        receipt (status UNKNOWN; the backend's last word in its result); its
        leases are released only when the backend confirmed the goal ended (a
        terminal report before or after the cancel), else blocked. Best
        effort: the journal itself may be what failed. Returns the abandoned
        action's id (empty when none was in flight).
        """
        action = self._active
        self._active = None
        if action is None:
            return ""
        if action.terminal:
            return action.action_id
        nav = self.skills.get(action.skill).managed.navigation  # type: ignore[union-attr]
        ended = BackendTerminal.NONE
        if action.backend_goal_id:
            try:
                self.navigation.cancel(action.backend_goal_id, timeout_s=nav.cancel_timeout_s)
                ended = self._await_terminal(action, nav.cancel_timeout_s)
            except Exception:  # noqa: BLE001 - best effort: the backend may be what failed; the stop stays unconfirmed
                pass
        confirmed = ended is not BackendTerminal.NONE or action.backend_status in _TERMINAL_STATUS
        detail = (f"supervision was cut short; backend confirmed the goal {action.backend_status}" if confirmed
                  else "supervision was cut short; the backend did not confirm the goal ended")
        try:
            self._append_many([self._transition(action, ActionStatus.UNKNOWN, detail, defer=True),
                               *self._lease_end_drafts(self.skills.get(action.skill), action.action_id,
                                                       ReleaseReason.CONFIRMED_TERMINAL if confirmed else None, detail),
                               *self._action_receipt_draft(action, None, detail)])
        except (HarnessError, _StoppedBeforeDispatch):
            pass
        return action.action_id

    # -- completion authority ---------------------------------------------------

    def _freeze_contract(self, goal: str) -> None:
        """Compile the completion contract from the goal alone, before the planner sees anything."""
        contract_id = self.ids.new("contract")
        try:
            contract = compile_contract(goal, compiler=self.contract_compiler, reviewer=self.coverage_reviewer,
                                        mission_id=self._mission_id, contract_id=contract_id, places=self._places)
        except Exception as exc:  # noqa: BLE001 - any compiler/reviewer failure refuses the goal, on the record
            # A refused goal, an unreachable or refusing model endpoint, a compiler's own bug:
            # the failure and every model call made for it are journaled, and nothing is planned.
            calls = self._take_model_calls("contract", self.contract_compiler, self.coverage_reviewer, error=exc)
            self._append(EventType.CONTRACT_FROZEN, payload={"error": _error_record(exc), "llm_calls": calls})
            if isinstance(exc, ContractError):
                why = exc.message
            elif isinstance(exc, HarnessError):
                why = f"the contract compiler failed ({exc.code}: {exc.message})"
            else:
                why = f"the contract compiler raised {type(exc).__name__}: {exc}"
            raise _Stop(MissionStatus.BLOCKED,
                        f"no completion contract for this goal, nothing was planned: {why}") from None
        # The recovery budget is part of what the mission was admitted with.
        contract = contract.model_copy(update={
            "recovery_budgets": RecoveryBudgets.from_config(self.config.recovery).model_dump()})
        self._contract = contract
        self._state_version += 1
        calls = self._take_model_calls("contract", self.contract_compiler, self.coverage_reviewer)
        self._append(EventType.CONTRACT_FROZEN, payload={"contract": contract.model_dump(mode="json"),
                                                         "state_version": self._state_version, "llm_calls": calls})
        coverage = contract.coverage
        if coverage is not None and not coverage.ok and self.config.contract.require_coverage:
            raise _Stop(MissionStatus.WAITING_USER, (
                "the completion contract does not cover all of the goal (" + "; ".join(coverage.uncovered)
                + "): an operator must clarify or extend it; nothing was planned"))

    def _bind_start(self) -> None:
        """Give the reserved place ``start`` its pose: where the robot is now, at admission.

        Only when the contract names it and the map has no place of that name. The pose comes from a
        journaled snapshot (reason ``admission``); without a fresh localized pose, ``start`` stays
        unknown, so nothing can navigate to it and no obligation at it can be satisfied (fail closed).
        """
        assert self._contract is not None
        if START_PLACE in self._places:
            return
        named = any(START_PLACE == o.params.get(k) or START_PLACE in (o.params.get("waypoints") or ())
                    for o in self._contract.obligations for k in ("place", "start"))
        if not named:
            return
        snap = self._capture("admission")
        if snap.pose is not None and snap.pose_meta.availability is Availability.AVAILABLE:
            self._places[START_PLACE] = snap.pose

    def _receipt_draft(self, turn_id: str, decision: WorldSnapshot, call: ToolCall, result: ToolResult) -> list[EventDraft]:
        """The receipt of a call that ended with its tool result (capabilities, refusals, failed dispatches)."""
        status = _RECEIPT_STATUS.get(result.status, ReceiptStatus.FAILED)
        if result.error and result.error.get("code") == "backend_timeout":
            status = ReceiptStatus.UNKNOWN
        evidence: list[EvidenceRef] = [EvidenceRef.for_journal(f"snapshot:{decision.snapshot_id}")]
        if decision.snapshot_id in self._snapshot_refs:
            evidence.append(self._snapshot_refs[decision.snapshot_id])
        artifact = result.content.get("artifact") if isinstance(result.content, dict) else None
        if isinstance(artifact, dict) and artifact.get("uri") and artifact.get("sha256"):
            evidence.append(EvidenceRef.for_artifact(artifact["uri"], artifact["sha256"]))
        started = self._call_started.pop(call.id, self.clock.now())
        return self._new_receipt(
            turn_id=turn_id, call=call, physical=call.name in self._physical_skills,
            result=result.model_dump(mode="json", exclude={"kind", "format_version"}), status=status,
            started_at=started, decision_snapshot_id=decision.snapshot_id, action_id=result.action_id or "",
            pose_snapshot=decision, evidence=evidence,
        )

    def _action_receipt_draft(self, action: ManagedAction, post: WorldSnapshot | None, reason: str) -> list[EventDraft]:
        """The receipt of an accepted physical action, written with its terminal state: the verified
        outcome, or (``post`` None: supervision cut short, nothing observed after it) UNKNOWN."""
        status = {ActionStatus.SUCCEEDED: ReceiptStatus.SUCCEEDED, ActionStatus.FAILED: ReceiptStatus.FAILED}.get(
            action.state, ReceiptStatus.UNKNOWN)
        call = next((c for c in self._calls if c["id"] == action.tool_call_id), None)
        arguments = call["arguments"] if call is not None else {}
        evidence = []
        if post is not None:
            evidence.append(EvidenceRef.for_journal(f"snapshot:{post.snapshot_id}"))
            if post.snapshot_id in self._snapshot_refs:
                evidence.append(self._snapshot_refs[post.snapshot_id])
        return self._new_receipt(
            turn_id=action.model_turn_id, call=ToolCall(id=action.tool_call_id, name=action.skill, arguments=arguments),
            physical=True, status=status, started_at=self._call_started.pop(action.tool_call_id, self.clock.now()),
            result={"state": action.state.value, "reason": reason, "backend_goal_id": action.backend_goal_id,
                    "backend_status": action.backend_status,
                    "target": action.target.model_dump() if action.target else None},
            decision_snapshot_id=action.decision_snapshot_id, outcome_snapshot_id=post.snapshot_id if post else "",
            action_id=action.action_id, pose_snapshot=post, evidence=evidence,
        )

    def _new_receipt(self, *, turn_id: str, call: ToolCall, physical: bool, result: dict[str, Any], status: ReceiptStatus,
                     started_at: float, decision_snapshot_id: str, action_id: str, pose_snapshot: WorldSnapshot | None,
                     evidence: list[EvidenceRef], outcome_snapshot_id: str = "") -> list[EventDraft]:
        assert self._contract is not None
        self._state_version += 1
        seen = pose_snapshot if pose_snapshot is not None and pose_snapshot.pose is not None \
            and pose_snapshot.pose_meta.availability is Availability.AVAILABLE else None
        receipt = Receipt(
            receipt_id=self.ids.new("rcpt"), mission_id=self._mission_id, contract_revision=self._contract.revision,
            state_version=self._state_version, plan_node_id=turn_id, invocation_id=call.id, skill=call.name,
            physical=physical, request={"arguments": call.arguments}, result=result, status=status,
            started_at=started_at, ended_at=self.clock.now(), decision_snapshot_id=decision_snapshot_id,
            outcome_snapshot_id=outcome_snapshot_id, action_id=action_id,
            pose_at_end=seen.pose if seen is not None else None,
            pose_stamp=seen.pose_meta.source_stamp if seen is not None else None,
            evidence=tuple(evidence),
        )
        type_, payload = record_draft(receipt)
        drafts = [self._draft(EventType(type_), model_turn_id=turn_id, tool_call_id=call.id,
                              robot_action_id=action_id, payload=payload)]
        for fact in self._observed_facts(receipt):
            type_, payload = record_draft(fact)
            drafts.append(self._draft(EventType(type_), model_turn_id=turn_id, tool_call_id=call.id, payload=payload))
        return drafts

    def _observed_facts(self, receipt: Receipt) -> list[Fact]:
        """What a successful receipt reports, as OBSERVED facts (never trusted task state; only the gate commits)."""
        if receipt.status is not ReceiptStatus.SUCCEEDED:
            return []
        found: list[tuple[str, dict[str, Any]]] = []
        if receipt.pose_at_end is not None:
            found.append(("robot.pose", {**receipt.pose_at_end.model_dump(), "stamp": receipt.pose_stamp}))
        if receipt.skill != PROPOSE_DONE and not receipt.physical:
            content = receipt.result.get("content") if isinstance(receipt.result, dict) else None
            if isinstance(content, dict) and content:
                found.append((f"result.{receipt.skill}", content))
        facts = []
        for key, value in found:
            fact = Fact(fact_id=self.ids.new("fact"), mission_id=self._mission_id, key=key, value=value,
                        status=FactStatus.OBSERVED, provenance=tuple(receipt.evidence_ids()),
                        observed_at=receipt.ended_at, state_version=receipt.state_version,
                        supersedes=self._fact_heads.get(key, ""))
            self._fact_heads[key] = fact.fact_id
            facts.append(fact)
        return facts

    def _context_pool(self, state: TaskState, snapshot: WorldSnapshot | None) -> list[ContextItem]:
        """Every piece of mission state as a versioned, provenance-tagged item (see core/views.py)."""
        now = self.clock.now()
        items = [ContextItem(item_id="goal", key="goal", kind="goal", provenance=Provenance.USER,
                             value={"goal": self._goal}, priority=100)]
        committed = set(state.committed)
        if state.contract is not None:
            for o in state.contract.obligations:
                items.append(ContextItem(
                    item_id=f"obligation:{o.id}", key=f"obligation:{o.id}", kind="obligation",
                    provenance=Provenance.CONTRACT, scope=o.id, priority=90,
                    value={"id": o.id, "kind": o.kind.value, "description": o.description,
                           "committed": o.id in committed, "depends_on": list(o.depends_on)}))
        for f in state.facts:
            prov = Provenance.COMMITTED if f.status is FactStatus.COMMITTED else Provenance.OBSERVATION
            items.append(ContextItem(item_id=f.fact_id, key=f.key, kind="fact", provenance=prov, value=dict(f.value),
                                     source=f.provenance[0] if f.provenance else "", observed_at=f.observed_at,
                                     supersedes=f.supersedes, priority=70 if prov is Provenance.COMMITTED else 40))
        for r in state.receipts:
            items.append(ContextItem(item_id=r.receipt_id, key=f"receipt:{r.invocation_id}", kind="receipt",
                                     provenance=Provenance.RECEIPT, value={"receipt": r.model_dump(mode="json")},
                                     source=r.skill, observed_at=r.ended_at, priority=60))
            if r.status is not ReceiptStatus.SUCCEEDED:
                items.append(ContextItem(item_id=f"failure:{r.receipt_id}", key=f"failure:{r.invocation_id}",
                                         kind="failure", provenance=Provenance.HARNESS, observed_at=r.ended_at,
                                         value={"skill": r.skill, "status": r.status.value,
                                                "arguments": r.request.get("arguments", {})}, priority=55))
        if snapshot is not None and snapshot.pose is not None:
            items.append(ContextItem(item_id=f"pose:{snapshot.snapshot_id}", key="robot.pose", kind="observation",
                                     provenance=Provenance.OBSERVATION, source="snapshot", value=snapshot.pose.model_dump(),
                                     observed_at=snapshot.pose_meta.source_stamp, max_age_s=snapshot.pose_meta.max_age_s))
        for text in self._proposals:
            items.append(ContextItem(item_id=f"proposal:{len(items)}", key="proposal", kind="proposal",
                                     provenance=Provenance.PLANNER, value={"text": text}, observed_at=now, priority=10))
        return items

    def _planner_progress(self, snapshot: WorldSnapshot) -> dict[str, Any]:
        """C1's share of the task state: what is left (the frontier), what is committed, what failed.

        ``evidenced``: obligations whose evidence is already on record (the
        verified prefix, judged by the same predicates the verifier uses, on
        this turn's snapshot). It only shapes planning; only the commit gate
        commits. With ``recovery.repair: whole`` a replan after a failure
        starts again from the whole contract (the baseline bench/repair.py
        measures suffix repair against).
        """
        state = self._task_state()
        wide = self._wide_view_turns > 0
        if wide:
            self._wide_view_turns -= 1
        view = build_view(self._context_pool(state, snapshot), role=Role.PLANNER,
                          now=self.clock.now(), budget=_PLANNER_WIDE_BUDGET if wide else _PLANNER_PROGRESS_BUDGET)
        obligations = [i.value for i in view.of_kind("obligation")]
        evidenced = self._evidenced(state, snapshot)
        self._turn_done = evidenced | set(state.committed)
        return {
            "frontier": [{k: o[k] for k in ("id", "kind", "description", "depends_on")} for o in obligations
                         if not o["committed"] and o["id"] not in evidenced],
            "evidenced": sorted(evidenced),
            "committed": [o["id"] for o in obligations if o["committed"]],
            "recent_failures": [i.value for i in view.of_kind("failure")][-(8 if wide else 3):],
            **({"view": "widened after adjust_view"} if wide else {}),
        }

    def _evidenced(self, state: TaskState, snapshot: WorldSnapshot) -> set[str]:
        """Obligations the receipts so far already satisfy (in-process predicates, no extra capture)."""
        receipts = tuple(r for r in state.receipts if r.state_version > self._progress_since)
        if state.contract is None or not receipts:
            return set()
        request = VerifyRequest(
            mission_id=self._mission_id, goal=self._goal, contract=state.contract, receipts=receipts,
            state_version=state.state_version, plan_node_id="progress", invocation_id="progress",
            places=dict(self._places), trajectory=tuple(self._trajectory),
        )
        try:
            verdict = self._progress_verifier.verify(request, snapshot)
        except HarnessError:
            return set()
        return {st.obligation_id for st in verdict.steps if st.verdict is StepVerdict.SATISFIED}

    def _task_state(self) -> TaskState:
        """The task state, derived from this mission's journal (the source of truth).

        Reads only the state events committed since the last call and derives
        the state again only when there are some; what it derives from is
        still exactly the journal's record of this mission.
        """
        new = self.journal.events(mission_id=self._mission_id, after_seq=self._state_seq, types=_STATE_EVENTS)
        if new or self._state_cache is None:
            self._state_fold.feed(new)  # each event folded once, in journal order
            if new:
                self._state_seq = new[-1].seq
            self._state_cache = self._state_fold.state
        return self._state_cache

    def _verify_done(self, turn_id: str, invocation_id: str, text: str) -> tuple[tuple[MissionStatus, str] | None, RuntimeEvent | None]:
        """A done proposal goes to the independent verifier; only the commit gate can end the mission in success.

        The proposal's text is journaled for audit and never reaches the verifier.
        """
        self._update("verifying_goal")
        self._append(EventType.DONE_PROPOSED, model_turn_id=turn_id, tool_call_id=invocation_id, payload={"text": text})
        self._proposals.append(text)
        state = self._task_state()
        # C3: the verifier's view of the same state. Its role policy admits no
        # item of planner provenance, so the proposal text above cannot reach it.
        view = build_view(self._context_pool(state, None), role=Role.VERIFIER, now=self.clock.now(),
                          budget=_VERIFIER_BUDGET)
        receipts = tuple(Receipt.model_validate(i.value["receipt"]) for i in view.of_kind("receipt"))
        request = VerifyRequest(
            mission_id=self._mission_id, goal=view.of_kind("goal")[0].value["goal"], contract=state.contract,
            receipts=receipts, state_version=state.state_version, plan_node_id=turn_id, invocation_id=invocation_id,
            places=dict(self._places), trajectory=tuple(self._trajectory),
        )
        try:
            verdict, fresh = self.verifier.verify(request)
        except HarnessError as exc:
            self._done_rejections += 1
            event = RuntimeEvent(type="done_not_verified", tool_call_id=invocation_id, state="verifier_unavailable",
                                 detail={"reason": f"the verifier did not answer: {exc.message}"})
            if self._done_rejections >= self.config.limits.max_done_rejections:
                return (MissionStatus.UNKNOWN, f"the verifier was unavailable ({exc.message}); completion not established"), None
            return None, event
        self._last_verdict = verdict
        self._record("/robot_harness/verdicts", verdict)
        fresh_ref = self._record("/robot_harness/snapshots", fresh)
        if fresh_ref is not None:
            self._snapshot_refs[fresh.snapshot_id] = fresh_ref
        # The fresh snapshot the verdict was judged on is evidence of the outcome whether or not
        # a step cited it: by id, and by its bag ref when recorded (see _evidence_ids).
        self._verdict_evidence = [verdict.verdict_id, *verdict.evidence_ids, fresh.snapshot_id]
        fresh_draft = self._draft(EventType.WORLD_SNAPSHOT_CAPTURED, snapshot_id=fresh.snapshot_id,
                                  payload={"reason": "verification", "snapshot": fresh.model_dump(mode="json"),
                                           **({"bag_ref": fresh_ref.model_dump(mode="json")} if fresh_ref else {})})
        # The exact request beside the verdict: with the fresh snapshot (journaled too) a replay can
        # re-run the verifier on precisely what it saw.
        verdict_draft = self._draft(EventType.VERDICT_RECORDED, model_turn_id=turn_id, tool_call_id=invocation_id,
                                    snapshot_id=fresh.snapshot_id, payload={
                                        "verdict": verdict.model_dump(mode="json"),
                                        "request": request.model_dump(mode="json"),
                                        "fresh_snapshot": {"snapshot_id": fresh.snapshot_id, **(
                                            {"bag_ref": fresh_ref.model_dump(mode="json")} if fresh_ref else {})}})
        if verdict.goal_verdict is GoalVerdict.VERIFIED_DONE:
            return self._commit(turn_id, invocation_id, verdict, [fresh_draft, verdict_draft])
        self._append_many([fresh_draft, verdict_draft])
        if verdict.goal_verdict is GoalVerdict.BLOCKED:
            return (MissionStatus.BLOCKED, "verifier: blocked: " + _describe_steps(verdict, unsatisfied_only=True)), None
        if verdict.goal_verdict is GoalVerdict.WAITING_USER:
            return (MissionStatus.WAITING_USER, "verifier: waiting for the operator: " + _describe_steps(verdict, unsatisfied_only=True)), None
        self._done_rejections += 1
        if self._done_rejections >= self.config.limits.max_done_rejections:
            return self._give_up(f"{self._done_rejections} done proposals were not verified"), None
        self._recover(turn_id, Failure(failure_id=self.ids.new("fail"), failure_kind=FailureKind.DONE_REJECTED,
                                       reason="the verifier found obligations without evidence",
                                       tool_call_id=invocation_id, obligation_ids=tuple(verdict.missing)))
        assert self._contract is not None
        missing = [{"obligation": o.id, "description": o.description, "verdict": verdict.step(o.id).verdict.value,
                    "reason": verdict.step(o.id).reason}
                   for o in self._contract.obligations if o.id in verdict.missing]
        return None, RuntimeEvent(type="done_rejected", tool_call_id=invocation_id, state=verdict.goal_verdict.value,
                                  detail={"verdict_id": verdict.verdict_id, "missing": missing,
                                          "note": "the mission is not done; the obligations above lack evidence"})

    def _commit(self, turn_id: str, invocation_id: str, verdict: Verdict,
                verdict_drafts: list[EventDraft]) -> tuple[tuple[MissionStatus, str] | None, RuntimeEvent | None]:
        """Gate the verdict against the current task state and commit it atomically."""
        state = self._task_state()
        try:
            commit = self.gate.decide(verdict, state=state, plan_node_id=turn_id, invocation_id=invocation_id)
        except GateRejection as exc:
            self._append_many([*verdict_drafts, self._draft(
                EventType.GATE_REJECTED, model_turn_id=turn_id, tool_call_id=invocation_id,
                payload={"verdict_id": verdict.verdict_id, "code": exc.code, "message": exc.message, **exc.details})])
            self._done_rejections += 1
            return None, RuntimeEvent(type="done_rejected", tool_call_id=invocation_id, state="gate_rejected",
                                      detail={"reason": exc.message})
        # commit_drafts starts with the verdict itself: ours (with its request) goes in its place,
        # after the fresh snapshot.
        drafts = [*verdict_drafts, *(
            self._draft(EventType(type_), model_turn_id=turn_id, tool_call_id=invocation_id, payload=payload)
            for type_, payload in commit_drafts(commit, verdict)[1:])]
        self._state_version = commit.state_version_after
        self._append_many(drafts)
        self._verdict_evidence.append(commit.commit_id)
        ok, why = original_goal_check(self._contract, self._task_state(), goal=self._goal)
        if not ok:
            return (MissionStatus.UNKNOWN, f"verdict committed but the original-goal check failed: {why}"), None
        return (MissionStatus.SUCCEEDED, f"verified by {verdict.verifier or self.verifier.name}: "
                + _describe_steps(verdict, unsatisfied_only=False)), None

    def _worst_failure(self, results: Sequence[ToolResult], outcome: RuntimeEvent | None) -> Failure | None:
        """The one failure of this turn that recovery answers (the most severe, if several)."""
        found: list[tuple[int, Failure]] = []

        def add(rank: int, kind: FailureKind, reason: str, **kw: Any) -> None:
            found.append((rank, Failure(failure_id=self.ids.new("fail"), failure_kind=kind, reason=reason, **kw)))

        if outcome is not None and outcome.state in (ActionStatus.UNKNOWN.value, ActionStatus.FAILED.value):
            kind = FailureKind.ACTION_UNKNOWN if outcome.state == ActionStatus.UNKNOWN.value else FailureKind.ACTION_FAILED
            add(0 if kind is FailureKind.ACTION_UNKNOWN else 1, kind, str(outcome.detail.get("reason", "")),
                skill=str(outcome.detail.get("skill", "")), tool_call_id=outcome.tool_call_id, action_id=outcome.action_id)
        for r in results:
            if r.status is ToolResultStatus.PRECONDITION_CHANGED:
                add(3, FailureKind.PRECONDITION_CHANGED, "preconditions changed before dispatch", skill=r.name,
                    tool_call_id=r.tool_call_id)
            elif r.status is ToolResultStatus.REJECTED and r.content.get("code") == "lease_conflict":
                add(1, FailureKind.RESOURCE_BLOCKED, str(r.content.get("reason", "")), skill=r.name,
                    tool_call_id=r.tool_call_id)
            elif r.status is ToolResultStatus.REJECTED and r.name in self._physical_skills and r.action_id:
                add(2, FailureKind.DISPATCH_REJECTED, str(r.content.get("reason", "")), skill=r.name,
                    tool_call_id=r.tool_call_id, action_id=r.action_id)
            elif r.status is ToolResultStatus.REJECTED and r.name in self._physical_skills:
                add(4, FailureKind.INVALID_MODEL_OUTPUT, str(r.content.get("reason", "")), skill=r.name,
                    tool_call_id=r.tool_call_id)
            elif r.status is ToolResultStatus.ERROR:
                code = (r.error or {}).get("code", "")
                kind = FailureKind.INVALID_MODEL_OUTPUT if code in _MODEL_ERRORS else FailureKind.TOOL_ERROR
                add(4, kind, f"{code}: {(r.error or {}).get('message', '')}", skill=r.name, tool_call_id=r.tool_call_id)
        return min(found, key=lambda x: x[0])[1] if found else None

    def _recover(self, turn_id: str, failure: Failure) -> RuntimeEvent:
        """Journal the failure and the rung recovery chose; end the mission on a terminal rung."""
        budgets = RecoveryBudgets(**self._contract.recovery_budgets) if self._contract and self._contract.recovery_budgets \
            else None
        context: dict[str, Any] = {}
        if getattr(self.recovery, "advisor", True) is not None:
            # C4 for an advisor (in-process, or the recovery node's); the rule ladder alone does not read it.
            view = build_view(self._context_pool(self._task_state(), None), role=Role.RECOVERY, now=self.clock.now(),
                              budget=_RECOVERY_BUDGET)
            context = {"failure": failure.model_dump(mode="json"), "spent": {r.value: n for r, n in self._spent.items()},
                       "view": view.as_list()}
        decision = self.recovery.decide(failure, spent=self._spent, context=context, budgets=budgets)
        calls = self._take_model_calls("recovery", self.recovery)
        self._spent[decision.rung] = self._spent.get(decision.rung, 0) + 1
        node = self._node_of_call.get(failure.tool_call_id)
        if node is not None and decision.rung not in (Rung.SAFE_STOP, Rung.HUMAN_HANDOFF):
            self._attempts[node] = self._attempts.get(node, 1) + 1  # recovery authorizes a new attempt: a new key
        self._append(EventType.RECOVERY_DECIDED, model_turn_id=turn_id, tool_call_id=failure.tool_call_id,
                     robot_action_id=failure.action_id, payload={
                         "failure": failure.model_dump(mode="json"), "decision": decision.model_dump(mode="json"),
                         "llm_calls": calls})
        if decision.rung is Rung.SAFE_STOP:
            stopped = self._abandon_active()
            raise _Stop(MissionStatus.UNKNOWN, f"safe stop after {failure.failure_kind.value} ({failure.reason}); "
                        f"{decision.reason}" + (f"; {stopped} asked to stop" if stopped else ""))
        if decision.rung is Rung.HUMAN_HANDOFF:
            raise _Stop(MissionStatus.WAITING_USER, f"handed to an operator after {failure.failure_kind.value} "
                        f"({failure.reason}); {decision.reason}")
        if decision.rung is Rung.LOCAL_REPLAN and self.config.recovery.repair == "whole":
            self._progress_since = self._state_version  # the baseline: re-plan (and redo) the whole mission
        detail: dict[str, Any] = {"failure": failure.failure_kind.value, "reason": failure.reason,
                                  "do": _RUNG_ADVICE[decision.rung], "budgets_left": decision.budgets_left}
        if decision.rung is Rung.ADJUST_VIEW:
            self._wide_view_turns = 1  # the next planner turn sees more failure history and evidence
        if decision.rung is Rung.SWITCH:
            # Only the alternatives authorized for the failed skill (config recovery.alternatives).
            detail["alternatives"] = list(self.config.recovery.alternatives.get(failure.skill or "", []))
        return RuntimeEvent(type="recovery", tool_call_id=failure.tool_call_id, action_id=failure.action_id,
                            state=decision.rung.value, detail=detail)

    def _give_up(self, why: str) -> tuple[MissionStatus, str]:
        """The planner stopped or a budget ran out: the last verdict (if any) decides between FAILED and UNKNOWN."""
        verdict = self._last_verdict
        if verdict is None:
            return MissionStatus.UNKNOWN, f"{why}; no verified done proposal, so the goal is not established"
        unsatisfied = _describe_steps(verdict, unsatisfied_only=True)
        if any(s.verdict is StepVerdict.VIOLATED for s in verdict.steps):
            return MissionStatus.FAILED, f"{why}; the evidence contradicts the goal: {unsatisfied}"
        return MissionStatus.UNKNOWN, f"{why}; the evidence does not establish the goal: {unsatisfied}"

    def _start_recorder(self) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder.start(self._mission_id)
        except Exception as exc:  # noqa: BLE001 - recording is evidence, never a reason to stop
            self._recorder_error = f"{type(exc).__name__}: {exc}"

    def _stop_recorder(self, status: MissionStatus | None = None, summary_text: str = "") -> dict[str, Any]:
        """Close the bag; with the mission's end it also records that last line (MISSION_FINISHED
        itself is written after the bag closes, since it cites the bag)."""
        if self.recorder is None:
            return {}
        try:
            summary = self.recorder.stop(status=status.value if status else "", summary=summary_text)
        except Exception as exc:  # noqa: BLE001
            summary = {"error": f"{type(exc).__name__}: {exc}"}
        return {**summary, "start_error": self._recorder_error} if self._recorder_error else summary

    def _record(self, topic: str, record: Any) -> EvidenceRef | None:
        if self.recorder is None:
            return None
        try:
            return self.recorder.record_record(topic, record)
        except Exception:  # noqa: BLE001 - a dropped bag message is counted by the recorder
            return None

    def _evidence_ids(self) -> list[str]:
        """What the mission's result cites: actions, the snapshots their outcomes were judged on, the
        last verdict with its evidence, the fresh snapshot it was judged on and the commit. A
        snapshot recorded in the bag is cited by its bag ref too, right after its id."""
        ids: list[str] = []
        for a in self._actions:
            ids += [a.action_id, a.outcome_snapshot_id]
        ids += self._verdict_evidence
        cited: list[str] = []
        for x in ids:
            cited.append(x)
            ref = self._snapshot_refs.get(x)
            if ref is not None:
                cited.append(ref.id)
        seen: set[str] = set()
        return [x for x in cited if x and not (x in seen or seen.add(x))]

    # -- helpers ----------------------------------------------------------------

    def _check_budget(self) -> None:
        if self._stop_requested:
            raise _Stop(MissionStatus.CANCELLED, f"mission cancelled: {self._stop_requested}")
        if self.clock.monotonic() >= self._deadline:
            raise _Stop(MissionStatus.UNKNOWN, f"mission timeout ({self.config.limits.mission_timeout_s} s) before a verified done")

    def _capture(self, reason: str, *, defer: bool = False) -> Any:
        """Capture and persist a snapshot; with ``defer`` return (snapshot, draft) for a later batched commit."""
        try:
            snap = self.snapshots.capture(reason=reason, mission_id=self._mission_id)
        except HarnessError as exc:
            raise _Stop(MissionStatus.BLOCKED, f"no world snapshot ({reason}): {exc.message}") from None
        active = self._active.view() if self._active is not None else None
        recent = next((a.view() for a in reversed(self._actions) if a.terminal), None)
        snap = snap.model_copy(update={"active_action": active, "recent_outcome": recent, "mission_id": self._mission_id})
        meta = snap.pose_meta
        if snap.pose is not None and meta.availability is Availability.AVAILABLE and meta.source_stamp is not None:
            if not self._trajectory or self._trajectory[-1].t < meta.source_stamp:
                self._trajectory.append(PoseSample(t=meta.source_stamp, pose=snap.pose, source_id=snap.snapshot_id))
        ref = self._record("/robot_harness/snapshots", snap)
        if ref is not None:
            self._snapshot_refs[snap.snapshot_id] = ref
        draft = self._draft(EventType.WORLD_SNAPSHOT_CAPTURED, snapshot_id=snap.snapshot_id,
                            payload={"reason": reason, "snapshot": snap.model_dump(mode="json"),
                                     **({"bag_ref": ref.model_dump(mode="json")} if ref else {})})
        if defer:
            return snap, draft
        self._append_many([draft])
        return snap

    def _transition(self, action: ManagedAction, to: ActionStatus, reason: str, *, defer: bool = False) -> EventDraft | None:
        """Move the action (revision-checked) and journal it, now or in the caller's batch."""
        change = action.transition(to, now=self.clock.now(), reason=reason, expected_revision=action.revision)
        draft = self._draft(EventType.ROBOT_ACTION_STATE_CHANGED, tool_call_id=action.tool_call_id,
                            robot_action_id=action.action_id, payload=change)
        if defer:
            return draft
        self._append_many([draft])
        return None

    def _draft(self, type_: EventType, **fields: Any) -> EventDraft:
        return EventDraft(type=type_, mission_id=self._mission_id, **fields)

    def _append(self, type_: EventType, **fields: Any) -> JournalEvent:
        return self._append_many([self._draft(type_, **fields)])[0]

    def _append_many(self, drafts: Sequence[EventDraft], *, retry_stale: bool = True) -> list[JournalEvent]:
        """One atomic, durable, revision-checked commit (one fsync) for several events.

        When another writer moved the mission meanwhile (an operator Stop, an
        interaction's answer), the commit is refused; the runner reads what
        changed and retries from the fresh state, unless what changed forbids
        the write (a Stop forbids a new dispatch).
        """
        drafts = list(drafts)
        if not drafts:
            return []
        for _ in range(_STALE_RETRIES):
            try:
                events = self.journal.append(drafts, expected_revision=self._revision)
                break
            except StaleRevision as exc:
                if not retry_stale or "mission_id" not in exc.details:
                    raise
                self._absorb()
                if self._stop_requested and any(d.type is EventType.ROBOT_ACTION_STARTED or (
                        d.type is EventType.LEASE_ACQUIRED and "intent" in d.payload) for d in drafts):
                    raise _StoppedBeforeDispatch(self._stop_requested) from None
        else:
            raise JournalWriteError(f"mission {self._mission_id} kept moving under this writer "
                                    f"({_STALE_RETRIES} stale revisions in a row)", sqlite_error=None)
        self._revision += sum(1 for e in events if e.type in TRANSITION_TYPES)
        self._notify(events)
        return events

    def _notify(self, events: Sequence[JournalEvent]) -> None:
        if self._on_update is not None:
            for event in events:
                self._observe("", None, event)

    def _observe(self, stage: str, view: ActionView | None, event: JournalEvent | None) -> None:
        """Tell the observer (feedback, MCP sessions); it only watches, so its failure is logged,
        never raised into the mission (which would leave it open after a committed write)."""
        assert self._on_update is not None
        try:
            self._on_update(stage, view, event)
        except Exception:  # noqa: BLE001 - see the docstring
            _log.exception("mission %s: the update observer raised; ignored", self._mission_id)

    def _absorb(self) -> None:
        """Read what other writers did to this mission (Stop, interaction answers) and catch up."""
        for ev in self.journal.events(mission_id=self._mission_id, types=_FOREIGN_TYPES):
            if ev.type is EventType.STOP_REQUESTED and not self._stop_requested:
                self._stop_requested = str(ev.payload.get("reason") or "operator stop")
        self._revision = self.journal.revision(self._mission_id)

    def _update(self, stage: str, action: ManagedAction | None = None) -> None:
        if self._on_update is not None:
            self._observe(stage, action.view() if action else None, None)

    def _outcome(self, status: MissionStatus, summary: str) -> MissionOutcome:
        return MissionOutcome(
            mission_id=self._mission_id, status=status, summary=summary,
            evidence_seqs=tuple(self._evidence), evidence_ids=tuple(self._evidence_ids()),
            contract=self._contract.model_dump(mode="json") if self._contract else None,
            verdict=self._last_verdict.model_dump(mode="json") if self._last_verdict else None,
            bag=dict(self._bag),
            model_usage=copy.deepcopy(self._usage),
            tool_calls=tuple(self._calls), actions=tuple(a.view() for a in self._actions),
        )


_MODEL_ERRORS = frozenset({"unknown_tool", "invalid_arguments", "malformed_arguments", "duplicate_tool_call_id"})
_RUNG_ADVICE = {
    Rung.RE_PERCEIVE: "decide again on the fresh snapshot in this turn",
    Rung.ADJUST_VIEW: "look at the failure's evidence (runtime_events, last_tool_results and the widened "
                      "progress.recent_failures) before acting",
    Rung.LOCAL_REPLAN: "re-plan only what is left (progress.frontier); verified steps stay done",
    Rung.SWITCH: "use one of the authorized alternative skills listed in alternatives",
}


def _new_usage() -> dict[str, Any]:
    """``llm_calls`` and the token/latency sums cover every model call of the mission: the planner's turns,
    the contract compiler's and coverage reviewer's, and the recovery advisor's (``llm_calls_by_role``)."""
    return {"planner_turns": 0, "llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
            "llm_latency_ms": 0.0, "llm_calls_by_role": {}}


def _describe_steps(verdict: Verdict, *, unsatisfied_only: bool) -> str:
    steps = [st for st in verdict.steps if not unsatisfied_only or st.verdict is not StepVerdict.SATISFIED]
    return "; ".join(f"{st.obligation_id} {st.verdict.value} ({st.reason})" for st in steps) or "no obligations"
