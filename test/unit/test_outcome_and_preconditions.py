"""The outcome check and the precondition check, case by case."""
from __future__ import annotations

import pytest

from robot_harness.core.config import OutcomeTolerance, Preconditions
from robot_harness.core.outcome import BackendTerminal, check_navigation_outcome
from robot_harness.core.preconditions import check_preconditions
from robot_harness.core.records import ActionStatus, ActionView, Availability, ControllerState, FieldMeta, Pose2D, WorldSnapshot

T0 = 1000.0
TARGET = Pose2D(x=2.0, y=1.0, yaw=0.5)


def snap(pose=TARGET, *, age=0.05, availability=Availability.AVAILABLE, jumps=0, controller=ControllerState.IDLE,
         battery=0.8, sid="s", now=T0):
    return WorldSnapshot(
        snapshot_id=sid, captured_at=now, pose=pose,
        pose_meta=FieldMeta(availability=availability, source_stamp=now - age, age_s=age, max_age_s=0.5),
        pose_jumps=jumps, controller_state=controller,
        navigation_meta=FieldMeta(availability=Availability.AVAILABLE, age_s=0.1, source_stamp=now - 0.1),
        battery=battery, battery_meta=FieldMeta(availability=Availability.AVAILABLE, age_s=0.5, source_stamp=now - 0.5),
    )


@pytest.mark.parametrize("backend, post, expected", [
    (BackendTerminal.SUCCEEDED, snap(), ActionStatus.SUCCEEDED),
    (BackendTerminal.SUCCEEDED, snap(Pose2D(x=0.0, y=0.0)), ActionStatus.FAILED),
    (BackendTerminal.SUCCEEDED, snap(Pose2D(x=2.0, y=1.0, yaw=2.0)), ActionStatus.FAILED),  # wrong heading
    (BackendTerminal.SUCCEEDED, snap(age=3.0, availability=Availability.STALE), ActionStatus.UNKNOWN),
    (BackendTerminal.SUCCEEDED, snap(None, availability=Availability.MISSING), ActionStatus.UNKNOWN),
    (BackendTerminal.SUCCEEDED, snap(jumps=1), ActionStatus.UNKNOWN),
    (BackendTerminal.ABORTED, snap(Pose2D(x=0.0, y=0.0)), ActionStatus.FAILED),
    (BackendTerminal.ABORTED, snap(), ActionStatus.UNKNOWN),  # conflicting evidence
    (BackendTerminal.CANCELED, snap(None, availability=Availability.MISSING), ActionStatus.FAILED),
    (BackendTerminal.NONE, snap(), ActionStatus.UNKNOWN),  # no terminal report: never success
])
def test_navigation_outcome(backend, post, expected):
    verdict = check_navigation_outcome(target=TARGET, backend=backend, post=post, dispatch=snap(sid="d"), tol=OutcomeTolerance())
    assert verdict.state is expected, verdict.reason


def test_a_pose_observed_before_the_terminal_report_does_not_confirm_success():
    post = snap(age=0.05)  # observed at T0 - 0.05
    early = check_navigation_outcome(target=TARGET, backend=BackendTerminal.SUCCEEDED, post=post, dispatch=snap(),
                                     tol=OutcomeTolerance(), not_before=T0 - 0.01)
    assert early.state is ActionStatus.UNKNOWN
    late = check_navigation_outcome(target=TARGET, backend=BackendTerminal.SUCCEEDED, post=post, dispatch=snap(),
                                    tol=OutcomeTolerance(), not_before=T0 - 0.10)
    assert late.state is ActionStatus.SUCCEEDED


def _check(fresh, decision=None, *, target_now=TARGET, active=(), pre=Preconditions()):
    return check_preconditions(pre, decision=decision or snap(Pose2D(x=0, y=0), sid="d"), fresh=fresh,
                               target_at_decision=TARGET, target_now=target_now, active_actions=list(active))


def failed(report):
    return {c.name for c in report.failed}


def test_preconditions_hold_on_an_unchanged_world():
    report = _check(snap(Pose2D(x=0.05, y=0.0)))
    assert report.ok and not report.failed
    assert {c.name for c in report.checks} >= {"observation_age", "pose_drift", "localization_continuous",
                                              "controller_idle", "no_conflicting_action", "target_unchanged",
                                              "battery_min"}


@pytest.mark.parametrize("fresh, kw, name", [
    (snap(Pose2D(x=0, y=0), age=1.0, availability=Availability.STALE), {}, "observation_age"),
    (snap(Pose2D(x=1.0, y=0)), {}, "pose_drift"),
    (snap(Pose2D(x=0, y=0), jumps=1), {}, "localization_continuous"),
    (snap(Pose2D(x=0, y=0), controller=ControllerState.ACTIVE), {}, "controller_idle"),
    (snap(Pose2D(x=0, y=0), controller=ControllerState.UNKNOWN), {}, "controller_idle"),
    (snap(Pose2D(x=0, y=0), battery=0.05), {}, "battery_min"),
    (snap(Pose2D(x=0, y=0)), {"target_now": Pose2D(x=9, y=9)}, "target_unchanged"),
    (snap(Pose2D(x=0, y=0)), {"active": [ActionView(action_id="a", tool_call_id="c", skill="navigate_to",
                                                    state=ActionStatus.RUNNING)]}, "no_conflicting_action"),
])
def test_each_precondition_can_fail(fresh, kw, name):
    report = _check(fresh, **kw)
    assert not report.ok
    assert name in failed(report)


def test_a_blind_decision_cannot_pass_the_drift_check():
    blind = snap(None, availability=Availability.MISSING, sid="d")
    report = _check(snap(Pose2D(x=0, y=0)), decision=blind)
    assert "pose_drift" in failed(report)


def test_localization_continuity_can_be_switched_off_like_the_other_checks():
    jumped = snap(Pose2D(x=0, y=0), jumps=1)
    assert "localization_continuous" in failed(_check(jumped))
    off = _check(jumped, pre=Preconditions(localization_continuous=False))
    assert off.ok and "localization_continuous" not in {c.name for c in off.checks}, "not made at all"


def _missing(source):
    return FieldMeta(availability=Availability.MISSING, source=source)


def _stale(source, age):
    return FieldMeta(availability=Availability.STALE, source=source, age_s=age, source_stamp=T0 - age, max_age_s=2.0)


@pytest.mark.parametrize("change, pre, code, words", [
    ({"pose_meta": _missing("/amcl_pose"), "pose": None}, Preconditions(), "no_fresh_pose", "/amcl_pose"),
    ({"navigation_meta": _missing("/navigate_to_pose/_action/status")}, Preconditions(), "no_navigator_status",
     "no navigator status received on /navigate_to_pose/_action/status"),
    ({"navigation_meta": _stale("/r/navigate_to_pose/_action/status", 7.0)}, Preconditions(), "no_navigator_status",
     "7.0 s old"),
    ({"battery_meta": _missing("/battery_state"), "battery": None}, Preconditions(), "no_fresh_battery",
     "/battery_state"),
    ({"battery": 0.05}, Preconditions(battery_min=0.1), "battery_low", "0.05"),
])
def test_admission_names_the_first_field_a_first_move_would_lack(change, pre, code, words):
    from robot_harness.core.preconditions import not_ready

    got = not_ready(snap().model_copy(update=change), pre)
    assert got is not None and got[0] == code and words in got[1], got


def test_admission_asks_only_what_the_site_checks_and_never_a_busy_controllers_end():
    from robot_harness.core.preconditions import not_ready

    assert not_ready(snap(), Preconditions()) is None
    unknown = snap().model_copy(update={"navigation_meta": _missing("/s"), "battery_meta": _missing("/b"),
                                        "battery": None})
    assert not_ready(unknown, Preconditions(controller_idle=False, battery_min=None)) is None
    assert not_ready(snap(battery=0.01), Preconditions(battery_min=None)) is None
    # a fresh, busy controller: the pre-dispatch check waits it out, admission does not refuse
    assert not_ready(snap(controller=ControllerState.ACTIVE), Preconditions()) is None
