"""Completion authority: the only user of the contract compiler, the verifier and the commit gate.

The contract is compiled from the goal alone and frozen before the planner
runs. A done proposal is a request for verification: the independent
verifier judges it against the contract, the receipts and a fresh
snapshot, and only the commit gate, binding the verdict to the current
task state, can end a mission in success.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..clock import Clock, IdGenerator
from ..completion import GoalVerdict, Receipt, StepVerdict, Verdict
from ..config import HarnessConfig
from ..contracts import ContractCompiler, ContractError, CoverageReviewer, compile_contract
from ..errors import HarnessError
from ..gate import CommitGate, GateRejection, TaskState, commit_drafts, original_goal_check
from ..ports import VerifierPort
from ..payloads import FreshSnapshotPart, VerdictRecorded
from ..records import EventDraft, EventType, MissionStatus, RuntimeEvent, WorldSnapshot
from ..recovery import Failure, FailureKind, RecoveryBudgets
from ..verifier import Verifier, VerifyRequest
from ..mission.ledger import MissionLedger
from ..mission.observations import VERDICT_TOPIC, Observations
from ..mission.progress import ProgressViews
from ..mission.state import MissionEnd, MissionState
from ..mission.usage import ModelUsage, error_record

__all__ = ["DoneAuthority", "DoneOutcome", "describe_steps"]


@dataclass(frozen=True)
class DoneOutcome:
    """What a done proposal came to: the mission's end, or what the planner hears next and the failure
    recovery answers (a rejected done)."""

    end: MissionEnd | None = None
    event: RuntimeEvent | None = None
    failure: Failure | None = None


@dataclass(eq=False, kw_only=True)
class DoneAuthority:
    config: HarnessConfig
    state: MissionState
    ledger: MissionLedger
    observations: Observations
    views: ProgressViews | None
    usage: ModelUsage
    compiler: ContractCompiler
    reviewer: CoverageReviewer
    verifier: VerifierPort
    progress_verifier: Verifier
    gate: CommitGate
    ids: IdGenerator
    clock: Clock

    # -- admission ------------------------------------------------------------------

    def freeze_contract(self) -> MissionEnd | None:
        """Compile the completion contract from the goal alone, before the planner sees anything.

        Returns the mission's end when there is no usable contract (nothing is planned then).
        """
        s = self.state
        contract_id = self.ids.new("contract")
        try:
            contract = compile_contract(s.goal, compiler=self.compiler, reviewer=self.reviewer,
                                        mission_id=s.mission_id, contract_id=contract_id, places=s.places)
        except Exception as exc:  # noqa: BLE001 - any compiler/reviewer failure refuses the goal, on the record
            # A refused goal, an unreachable or refusing model endpoint, a compiler's own bug:
            # the failure and every model call made for it are journaled, and nothing is planned.
            calls = self.usage.take("contract", self.compiler, self.reviewer, error=exc)
            self.ledger.append(EventType.CONTRACT_FROZEN, payload={"error": error_record(exc), "llm_calls": calls})
            if isinstance(exc, ContractError):
                why = exc.message
            elif isinstance(exc, HarnessError):
                why = f"the contract compiler failed ({exc.code}: {exc.message})"
            else:
                why = f"the contract compiler raised {type(exc).__name__}: {exc}"
            return MissionEnd(MissionStatus.BLOCKED, f"no completion contract for this goal, nothing was planned: {why}")
        # The recovery budget is part of what the mission was admitted with.
        contract = contract.model_copy(update={
            "recovery_budgets": RecoveryBudgets.from_config(self.config.recovery).model_dump()})
        calls = self.usage.take("contract", self.compiler, self.reviewer)
        self.ledger.append(EventType.CONTRACT_FROZEN, payload={
            "contract": contract.model_dump(mode="json"),
            "state_version": self.ledger.task_state().state_version + 1, "llm_calls": calls})
        coverage = contract.coverage
        if coverage is not None and not coverage.ok and self.config.contract.require_coverage:
            return MissionEnd(MissionStatus.WAITING_USER, (
                "the completion contract does not cover all of the goal (" + "; ".join(coverage.uncovered)
                + "): an operator must clarify or extend it; nothing was planned"))
        return None

    # -- progress -------------------------------------------------------------------

    def evidenced(self, task: TaskState, snapshot: WorldSnapshot) -> set[str]:
        """Obligations the receipts so far already satisfy (in-process predicates, no extra capture)."""
        s = self.state
        receipts = tuple(r for r in task.receipts if r.state_version > s.progress_since)
        if task.contract is None or not receipts:
            return set()
        request = VerifyRequest(
            mission_id=s.mission_id, goal=s.goal, contract=task.contract, receipts=receipts,
            state_version=task.state_version, plan_node_id="progress", invocation_id="progress",
            places=dict(s.places), trajectory=tuple(s.trajectory),
        )
        try:
            verdict = self.progress_verifier.verify(request, snapshot)
        except HarnessError:
            return set()
        return {st.obligation_id for st in verdict.steps if st.verdict is StepVerdict.SATISFIED}

    # -- a done proposal ------------------------------------------------------------------

    def verify(self, turn_id: str, invocation_id: str, text: str) -> DoneOutcome:
        """A done proposal goes to the independent verifier; only the commit gate can end the mission in success.

        The proposal's text is journaled for audit and never reaches the verifier.
        """
        s = self.state
        assert self.views is not None
        self.ledger.stage("verifying_goal")
        self.ledger.append(EventType.DONE_PROPOSED, model_turn_id=turn_id, tool_call_id=invocation_id,
                            payload={"text": text})
        s.proposals.append(text)
        task = self.ledger.task_state()
        # C3: the verifier's view of the same state. Its role policy admits no
        # item of planner provenance, so the proposal text above cannot reach it.
        view = self.views.verifier_view(task)
        receipts = tuple(Receipt.model_validate(i.value["receipt"]) for i in view.of_kind("receipt"))
        request = VerifyRequest(
            mission_id=s.mission_id, goal=view.of_kind("goal")[0].value["goal"], contract=task.contract,
            receipts=receipts, state_version=task.state_version, plan_node_id=turn_id, invocation_id=invocation_id,
            places=dict(s.places), trajectory=tuple(s.trajectory),
        )
        try:
            verdict, fresh = self.verifier.verify(request)
        except HarnessError as exc:
            s.done_rejections += 1
            if s.done_rejections >= self.config.limits.max_done_rejections:
                return DoneOutcome(end=MissionEnd(MissionStatus.UNKNOWN, f"the verifier was unavailable ({exc.message}); "
                                                  "completion not established"))
            return DoneOutcome(event=RuntimeEvent(type="done_not_verified", tool_call_id=invocation_id,
                                                  state="verifier_unavailable",
                                                  detail={"reason": f"the verifier did not answer: {exc.message}"}))
        s.last_verdict = verdict
        self.observations.record(VERDICT_TOPIC, verdict)
        fresh_draft = self.observations.snapshot_draft(fresh, "verification")
        fresh_ref = s.snapshot_refs.get(fresh.snapshot_id)
        # The fresh snapshot the verdict was judged on is evidence of the outcome whether or not
        # a step cited it: by id, and by its bag ref when recorded (see Observations.evidence_ids).
        s.verdict_evidence = [verdict.verdict_id, *verdict.evidence_ids, fresh.snapshot_id]
        # The exact request beside the verdict: with the fresh snapshot (journaled too) a replay can
        # re-run the verifier on precisely what it saw.
        fresh_part = (FreshSnapshotPart(snapshot_id=fresh.snapshot_id, bag_ref=fresh_ref) if fresh_ref is not None
                      else FreshSnapshotPart(snapshot_id=fresh.snapshot_id))
        verdict_draft = self.ledger.draft(EventType.VERDICT_RECORDED, model_turn_id=turn_id, tool_call_id=invocation_id,
                                           snapshot_id=fresh.snapshot_id, payload=VerdictRecorded(
                                               verdict=verdict, request=request.model_dump(mode="json"),
                                               fresh_snapshot=fresh_part))
        if verdict.goal_verdict is GoalVerdict.VERIFIED_DONE:
            return self._commit(turn_id, invocation_id, verdict, [fresh_draft, verdict_draft])
        self.ledger.append_many([fresh_draft, verdict_draft])
        if verdict.goal_verdict is GoalVerdict.BLOCKED:
            return DoneOutcome(end=MissionEnd(MissionStatus.BLOCKED,
                                              "verifier: blocked: " + describe_steps(verdict, unsatisfied_only=True)))
        if verdict.goal_verdict is GoalVerdict.WAITING_USER:
            return DoneOutcome(end=MissionEnd(MissionStatus.WAITING_USER, "verifier: waiting for the operator: "
                                              + describe_steps(verdict, unsatisfied_only=True)))
        s.done_rejections += 1
        if s.done_rejections >= self.config.limits.max_done_rejections:
            return DoneOutcome(end=self.give_up(f"{s.done_rejections} done proposals were not verified"))
        contract = task.contract
        assert contract is not None
        missing = [{"obligation": o.id, "description": o.description, "verdict": verdict.step(o.id).verdict.value,
                    "reason": verdict.step(o.id).reason}
                   for o in contract.obligations if o.id in verdict.missing]
        return DoneOutcome(
            event=RuntimeEvent(type="done_rejected", tool_call_id=invocation_id, state=verdict.goal_verdict.value,
                               detail={"verdict_id": verdict.verdict_id, "missing": missing,
                                       "note": "the mission is not done; the obligations above lack evidence"}),
            failure=Failure(failure_id=self.ids.new("fail"), failure_kind=FailureKind.DONE_REJECTED,
                            reason="the verifier found obligations without evidence",
                            tool_call_id=invocation_id, obligation_ids=tuple(verdict.missing)))

    def _commit(self, turn_id: str, invocation_id: str, verdict: Verdict,
                verdict_drafts: list[EventDraft]) -> DoneOutcome:
        """Gate the verdict against the current task state and commit it atomically."""
        s = self.state
        task = self.ledger.task_state()
        try:
            commit = self.gate.decide(verdict, state=task, plan_node_id=turn_id, invocation_id=invocation_id)
        except GateRejection as exc:
            self.ledger.append_many([*verdict_drafts, self.ledger.draft(
                EventType.GATE_REJECTED, model_turn_id=turn_id, tool_call_id=invocation_id,
                payload={"verdict_id": verdict.verdict_id, "code": exc.code, "message": exc.message, **exc.details})])
            s.done_rejections += 1
            return DoneOutcome(event=RuntimeEvent(type="done_rejected", tool_call_id=invocation_id,
                                                  state="gate_rejected", detail={"reason": exc.message}))
        # commit_drafts starts with the verdict itself: ours (with its request) goes in its place,
        # after the fresh snapshot.
        self.ledger.append_many([*verdict_drafts, *(
            self.ledger.draft(EventType(type_), model_turn_id=turn_id, tool_call_id=invocation_id, payload=payload)
            for type_, payload in commit_drafts(commit, verdict)[1:])])
        s.verdict_evidence.append(commit.commit_id)
        after = self.ledger.task_state()
        ok, why = original_goal_check(after.contract, after, goal=s.goal)
        if not ok:
            return DoneOutcome(end=MissionEnd(MissionStatus.UNKNOWN,
                                              f"verdict committed but the original-goal check failed: {why}"))
        return DoneOutcome(end=MissionEnd(MissionStatus.SUCCEEDED, f"verified by {verdict.verifier or self.verifier.name}: "
                                          + describe_steps(verdict, unsatisfied_only=False)))

    def give_up(self, why: str) -> MissionEnd:
        """The planner stopped or a budget ran out: the last verdict (if any) decides between FAILED and UNKNOWN."""
        verdict = self.state.last_verdict
        if verdict is None:
            return MissionEnd(MissionStatus.UNKNOWN, f"{why}; no verified done proposal, so the goal is not established")
        unsatisfied = describe_steps(verdict, unsatisfied_only=True)
        if any(s.verdict is StepVerdict.VIOLATED for s in verdict.steps):
            return MissionEnd(MissionStatus.FAILED, f"{why}; the evidence contradicts the goal: {unsatisfied}")
        return MissionEnd(MissionStatus.UNKNOWN, f"{why}; the evidence does not establish the goal: {unsatisfied}")


def describe_steps(verdict: Verdict, *, unsatisfied_only: bool) -> str:
    steps = [st for st in verdict.steps if not unsatisfied_only or st.verdict is not StepVerdict.SATISFIED]
    return "; ".join(f"{st.obligation_id} {st.verdict.value} ({st.reason})" for st in steps) or "no obligations"
