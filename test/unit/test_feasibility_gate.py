"""The readiness and feasibility gate (issue 16, part 1): each check says what it checked with its numbers,
fails closed on a silent server, and is kept as not applicable (never dropped) when the robot cannot answer;
in the engine, a failing check sends nothing and the action timeout follows the planned path's length."""
from __future__ import annotations

import pytest

from robot_harness.compose import mission_runner
from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig, Preconditions
from robot_harness.core.journal import MemoryJournal
from robot_harness.core.preconditions import (CostProbe, Feasibility, LifecycleProbe, PathProbe, ProbeStatus,
                                              check_preconditions)
from robot_harness.core.records import (Availability, ControllerState, EventType, FieldMeta, MissionStatus, Pose2D,
                                        PoseCovariance, WorldSnapshot)
from robot_harness.core.skills import default_skills

from .fakes import FakeRobot, ScriptPlanner

TARGET = Pose2D(x=3.0, y=1.0)
GOOD_COV = PoseCovariance(var_x=0.01, var_y=0.02, var_yaw=0.01)
ACTIVE = (LifecycleProbe(node="bt_navigator", state="active"), LifecycleProbe(node="amcl", state="active"))
READY = Feasibility(lifecycle=ACTIVE, path=PathProbe(ok=True, length_m=3.4, poses=35), goal_cost=CostProbe(cost=0))


def snap(cov: PoseCovariance | None = GOOD_COV) -> WorldSnapshot:
    meta = FieldMeta(availability=Availability.AVAILABLE, source_stamp=99.9, age_s=0.1, max_age_s=0.5, source="/amcl_pose")
    return WorldSnapshot(snapshot_id="s", captured_at=100.0, pose=Pose2D(x=0.0, y=0.0), pose_meta=meta,
                         pose_covariance=cov, controller_state=ControllerState.IDLE, navigation_meta=meta,
                         battery=0.9, battery_meta=meta)


def report(feasibility, *, pre=Preconditions(), cov=GOOD_COV, budget=None):
    return check_preconditions(pre, decision=snap(cov), fresh=snap(cov), target_at_decision=TARGET, target_now=TARGET,
                               active_actions=[], feasibility=feasibility, path_budget_m=budget)


def by_name(r):
    return {c.name: c for c in r.checks}


def test_a_ready_robot_and_a_reachable_goal_pass_every_check_with_its_numbers():
    r = report(READY)
    assert r.ok, r.failed
    checks = by_name(r)
    assert checks["lifecycle_active"].detail.startswith("bt_navigator active, amcl active")
    assert "0.141 m" in checks["localization_covariance"].detail  # sqrt(0.02): the worse of x and y
    assert "3.40 m (35 poses)" in checks["path_feasible"].detail
    assert "cost 0 " in checks["goal_cell_free"].detail
    assert all(c.applicable for c in r.checks)


@pytest.mark.parametrize("feasibility, cov, name, words", [
    (READY.model_copy(update={"lifecycle": (ACTIVE[0], LifecycleProbe(node="amcl", state="inactive"))}), GOOD_COV,
     "lifecycle_active", "amcl inactive"),
    (READY.model_copy(update={"lifecycle": (LifecycleProbe(node="bt_navigator", status=ProbeStatus.UNANSWERED,
                                                           error="/bt_navigator/get_state is not available"),
                                            ACTIVE[1])}), GOOD_COV,
     "lifecycle_active", "bt_navigator not answered (/bt_navigator/get_state is not available)"),
    (READY.model_copy(update={"lifecycle": ACTIVE[:1]}), GOOD_COV, "lifecycle_active", "amcl not answered (not asked)"),
    (READY, PoseCovariance(var_x=1.0, var_y=0.01, var_yaw=0.01), "localization_covariance", "std xy 1.000 m (max 0.5 m)"),
    (READY, PoseCovariance(var_x=0.01, var_y=0.01, var_yaw=float("nan")), "localization_covariance", "yaw inf rad"),
    (READY.model_copy(update={"path": PathProbe(ok=False, error_code=208, error="no valid path")}), GOOD_COV,
     "path_feasible", "planner error 208: no valid path"),
    (READY.model_copy(update={"path": PathProbe(status=ProbeStatus.UNANSWERED, error="no result within 2.0 s")}),
     GOOD_COV, "path_feasible", "did not answer: no result within 2.0 s"),
    (READY.model_copy(update={"goal_cost": CostProbe(cost=254)}), GOOD_COV, "goal_cell_free", "cost 254 (max 252"),
    (READY.model_copy(update={"goal_cost": CostProbe(cost=255)}), GOOD_COV, "goal_cell_free", "255 no information"),
    (READY.model_copy(update={"goal_cost": CostProbe(status=ProbeStatus.UNANSWERED, error="timed out")}), GOOD_COV,
     "goal_cell_free", "did not answer: timed out"),
])
def test_each_readiness_and_feasibility_check_fails_on_its_own_with_the_reason(feasibility, cov, name, words):
    r = report(feasibility, cov=cov)
    assert [c.name for c in r.failed] == [name], r.failed
    assert words in r.failed[0].detail, r.failed[0].detail


def test_the_path_length_is_bounded_by_the_site_and_by_the_missions_time_left():
    long = READY.model_copy(update={"path": PathProbe(ok=True, length_m=42.0, poses=400)})
    assert report(long).ok and "path_length" not in by_name(report(long))  # no bound at all: not a check
    site = report(long, pre=Preconditions(max_path_length_m=30.0))
    assert [c.name for c in site.failed] == ["path_length"]
    assert "path 42.00 m (max 30.00 m: navigation.preconditions.max_path_length_m)" in site.failed[0].detail
    late = report(long, pre=Preconditions(max_path_length_m=100.0), budget=12.5)
    assert "max 12.50 m: what the mission's time left allows" in late.failed[0].detail
    assert report(long, budget=50.0).ok


def test_what_the_robot_cannot_answer_is_on_the_record_as_not_applicable_unless_the_site_requires_it():
    absent = Feasibility(lifecycle=ACTIVE, path=PathProbe(status=ProbeStatus.ABSENT, error="no compute_path_to_pose "
                                                                                            "action server"),
                         goal_cost=CostProbe(status=ProbeStatus.ABSENT, error="no global_costmap/get_cost service"))
    r = report(absent, cov=None)
    assert r.ok
    skipped = {c.name: c.detail for c in r.checks if not c.applicable}
    assert set(skipped) == {"path_feasible", "goal_cell_free", "localization_covariance"}
    assert "no planner server (no compute_path_to_pose action server); not checked" == skipped["path_feasible"]
    assert "no covariance from the pose source /amcl_pose" == skipped["localization_covariance"]
    strict = report(absent, cov=None, pre=Preconditions(require_planner=True, require_costmap=True,
                                                        require_covariance=True))
    assert {c.name for c in strict.failed} == {"path_feasible", "goal_cell_free", "localization_covariance"}
    assert all(c.applicable for c in strict.checks)
    nobody = report(None)  # a harness with no robot to ask (no port wired): said, not silently passed
    assert {c.name for c in nobody.checks if not c.applicable} == {"lifecycle_active", "path_feasible", "goal_cell_free"}


def test_checks_the_site_turns_off_are_not_asked_or_listed():
    pre = Preconditions(lifecycle_active=(), max_pose_std_xy_m=None, max_pose_std_yaw_rad=None, path_feasible=False,
                        goal_cell_free=False)
    names = {c.name for c in report(None, pre=pre).checks}
    assert not names & {"lifecycle_active", "localization_covariance", "path_feasible", "goal_cell_free"}


# --------------------------------------------------------------------------- in the engine


class Robot:
    """A feasibility port over fixed answers (the outside world), recording what it was asked."""

    def __init__(self, answer: Feasibility) -> None:
        self.answer = answer
        self.asked: list[tuple[Pose2D | None, Pose2D | None]] = []

    def probe(self, *, pre, start, goal, frame_id):
        self.asked.append((start, goal))
        return self.answer


def run(answer: Feasibility, **cfg):
    clock, ids = ManualClock(), IdGenerator(seed=7)
    robot = FakeRobot(clock=clock)
    config = HarnessConfig(places={"dock": {"x": 0.0, "y": 0.0}, "office": {"x": 3.0, "y": 1.0}}, **cfg)
    journal = MemoryJournal(clock=clock, ids=ids)
    journal.setup()
    gate = Robot(answer)
    runner = mission_runner(config=config, journal=journal, clock=clock, ids=ids,
                            skills=default_skills(config.navigation), snapshots=robot,
                            planner=ScriptPlanner([{"tool_calls": [{"name": "navigate_to",
                                                                    "arguments": {"place": "office"}}]},
                                                   {"done": "at the office"}]),
                            navigation=robot, robot_io=robot, feasibility=gate)
    return runner.run("go to the office"), robot, journal, gate


def test_a_goal_in_an_obstacle_is_refused_before_anything_is_sent():
    out, robot, journal, gate = run(READY.model_copy(update={"goal_cost": CostProbe(cost=254)}))
    assert robot.goals == [] and out.status is not MissionStatus.SUCCEEDED
    assert gate.asked and gate.asked[0][1] == Pose2D(x=3.0, y=1.0)
    (result,) = [e.payload for e in journal.events(types=[EventType.TOOL_RESULT_RECORDED])]
    assert result["status"] == "precondition_changed"
    assert [f["name"] for f in result["content"]["failed"]] == ["goal_cell_free"]
    (checked,) = [e.payload for e in journal.events(types=[EventType.ACTION_PRECONDITION_CHECKED])]
    assert not checked["ok"] and "goal_cell_free" in {c["name"] for c in checked["checks"]}


def test_the_action_timeout_follows_the_planned_path_not_the_straight_line():
    detour = READY.model_copy(update={"path": PathProbe(ok=True, length_m=12.0, poses=120)})
    out, robot, journal, _ = run(detour)
    assert len(robot.goals) == 1, out.summary
    (started,) = [e.payload for e in journal.events(types=[EventType.ROBOT_ACTION_STARTED])]
    nav = HarnessConfig().navigation
    assert started["intent"]["timeout_s"] == pytest.approx(nav.timeout_s + nav.timeout_per_m_s * 12.0, abs=0.01)


def test_the_missions_time_left_bounds_the_walk_not_the_timeouts_fixed_slack():
    """A 60 s mission with a 60 s action timeout still reaches a goal 8 m away (32 s at the 4 s/m pace);
    a 20 m path (80 s) cannot be walked in the time left and is refused with nothing sent."""
    cfg = {"limits": {"mission_timeout_s": 60.0}, "navigation": {"timeout_s": 60.0, "timeout_per_m_s": 4.0}}
    near = READY.model_copy(update={"path": PathProbe(ok=True, length_m=8.0, poses=80)})
    out, robot, journal, _ = run(near, **cfg)
    assert len(robot.goals) == 1, out.summary
    (checked,) = [e.payload for e in journal.events(types=[EventType.ACTION_PRECONDITION_CHECKED])]
    (length,) = [c for c in checked["checks"] if c["name"] == "path_length"]
    assert length["ok"] and "max 15.00 m: what the mission's time left allows" in length["detail"], length

    far = READY.model_copy(update={"path": PathProbe(ok=True, length_m=20.0, poses=200)})
    out, robot, journal, _ = run(far, **cfg)
    assert robot.goals == [] and out.status is not MissionStatus.SUCCEEDED
    (result,) = [e.payload for e in journal.events(types=[EventType.TOOL_RESULT_RECORDED])]
    assert [f["name"] for f in result["content"]["failed"]] == ["path_length"], result
