"""SnapshotBuilder freshness, controller state, salient events, and the model projection."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from robot_harness.core.errors import UsageError
from robot_harness.core.records import (
    ActionStatus,
    ActionView,
    ArtifactRef,
    Availability,
    ControllerState,
    Pose2D,
    Velocity,
)
from robot_harness.core.snapshot import (
    ByteCapTooSmall,
    FreshnessConfig,
    SalientEventType,
    SnapshotBuilder,
    project_for_model,
)

T0 = 1_700_000_000.0


def capture(b: SnapshotBuilder, now: float, **kw):
    return b.capture(snapshot_id="snap-test", now=now, reason="on_request", **kw)


# -- freshness ---------------------------------------------------------------------


def test_never_observed_fields_are_missing_with_no_value():
    snap = capture(SnapshotBuilder(), T0)
    for meta in (snap.pose_meta, snap.velocity_meta, snap.navigation_meta, snap.battery_meta):
        assert meta.availability is Availability.MISSING
        assert meta.source_stamp is None and meta.age_s is None
    assert snap.pose is None and snap.velocity is None and snap.battery is None
    assert snap.controller_state is ControllerState.UNKNOWN
    assert snap.distance_remaining is None


def test_fresh_fields_are_available_with_age_from_source_stamp():
    b = SnapshotBuilder()
    b.update_pose(Pose2D(x=1.0, y=2.0, yaw=0.5), T0, "/amcl_pose")
    b.update_velocity(Velocity(vx=0.3, wz=0.1), T0 + 0.1, "/odom")
    b.update_battery(0.8, T0, "/battery_state")
    snap = capture(b, T0 + 0.2)
    assert snap.pose == Pose2D(x=1.0, y=2.0, yaw=0.5)
    assert snap.pose_meta.availability is Availability.AVAILABLE
    assert snap.pose_meta.age_s == pytest.approx(0.2, abs=1e-6)
    assert snap.pose_meta.source_stamp == T0
    assert snap.pose_meta.source == "/amcl_pose"
    assert snap.pose_meta.max_age_s == 0.5
    assert snap.velocity_meta.age_s == pytest.approx(0.1, abs=1e-6)
    assert snap.velocity == Velocity(vx=0.3, wz=0.1)
    assert snap.battery == 0.8 and snap.battery_meta.fresh


def test_old_fields_are_stale_but_keep_value_for_diagnosis():
    b = SnapshotBuilder()
    b.update_pose(Pose2D(x=1.0, y=2.0), T0, "/amcl_pose")
    b.update_battery(0.8, T0, "/battery_state")
    snap = capture(b, T0 + 0.6)
    assert snap.pose_meta.availability is Availability.STALE
    assert snap.pose == Pose2D(x=1.0, y=2.0)
    assert snap.battery_meta.availability is Availability.AVAILABLE  # 5 s bound
    snap = capture(b, T0 + 5.1)
    assert snap.battery_meta.availability is Availability.STALE


def test_freshness_bound_is_inclusive_and_configurable():
    b = SnapshotBuilder(FreshnessConfig(pose_max_age_s=1.0))
    b.update_pose(Pose2D(x=0.0, y=0.0), T0, "p")
    assert capture(b, T0 + 1.0).pose_meta.fresh
    assert not capture(b, T0 + 1.001).pose_meta.fresh


def test_stamp_far_in_the_future_is_not_trusted():
    b = SnapshotBuilder()
    b.update_pose(Pose2D(x=0.0, y=0.0), T0 + 10.0, "p")
    assert capture(b, T0).pose_meta.availability is Availability.STALE


def test_older_observation_does_not_replace_newer():
    b = SnapshotBuilder()
    b.update_pose(Pose2D(x=1.0, y=0.0), T0 + 1.0, "p")
    b.update_pose(Pose2D(x=0.5, y=0.0), T0, "p")
    snap = capture(b, T0 + 1.0)
    assert snap.pose.x == 1.0 and snap.pose_meta.source_stamp == T0 + 1.0


def test_nan_battery_is_ignored():
    b = SnapshotBuilder()
    assert list(b.update_battery(float("nan"), T0, "bat")) == []
    assert capture(b, T0).battery_meta.availability is Availability.MISSING


def test_invalid_config_is_rejected():
    with pytest.raises(ValidationError):
        FreshnessConfig(pose_max_age_s=0.0)
    with pytest.raises(ValidationError):
        FreshnessConfig(unknown=1.0)


# -- controller ----------------------------------------------------------------------


def test_controller_idle_then_active_then_idle_with_events():
    b = SnapshotBuilder()
    assert list(b.update_nav_status([], T0, "nav")) == []  # first IDLE is not salient
    assert capture(b, T0).controller_state is ControllerState.IDLE

    events = b.update_nav_status(["g1"], T0 + 1.0, "nav")
    assert [e.type for e in events] == [SalientEventType.CONTROLLER_ACTIVE]
    assert events[0].detail == {"goal_ids": ["g1"]}
    snap = capture(b, T0 + 1.0)
    assert snap.controller_state is ControllerState.ACTIVE and snap.nav_goal_id == "g1"

    assert list(b.update_nav_status(["g1"], T0 + 1.5, "nav")) == []  # same state: no event
    events = b.update_nav_status([], T0 + 2.0, "nav")
    assert [e.type for e in events] == [SalientEventType.CONTROLLER_IDLE]
    assert events[0].detail == {"previous_goal_ids": ["g1"]}
    snap = capture(b, T0 + 2.0)
    assert snap.controller_state is ControllerState.IDLE and snap.nav_goal_id == ""


def test_first_status_active_is_salient():
    events = SnapshotBuilder().update_nav_status(["g"], T0, "nav")
    assert [e.type for e in events] == [SalientEventType.CONTROLLER_ACTIVE]


def test_controller_unknown_when_status_stale():
    b = SnapshotBuilder()
    b.update_nav_status(["g1"], T0, "nav")
    snap = capture(b, T0 + 2.5)
    assert snap.navigation_meta.availability is Availability.STALE
    assert snap.controller_state is ControllerState.UNKNOWN


def test_feedback_for_active_goal_refreshes_status_and_gives_distance():
    b = SnapshotBuilder()
    b.update_nav_status(["g1"], T0, "nav")
    b.update_nav_feedback("g1", Pose2D(x=1.0, y=1.0), 3.25, T0 + 1.9, "fb")
    snap = capture(b, T0 + 3.0)
    assert snap.controller_state is ControllerState.ACTIVE
    assert snap.navigation_meta.age_s == pytest.approx(1.1, abs=1e-6)
    assert snap.distance_remaining == 3.25
    assert b.last_feedback_pose == Pose2D(x=1.0, y=1.0)


def test_feedback_for_other_goal_neither_refreshes_nor_reports_distance():
    b = SnapshotBuilder()
    b.update_nav_status(["g1"], T0, "nav")
    b.update_nav_feedback("other", None, 3.0, T0 + 1.9, "fb")
    snap = capture(b, T0 + 2.5)
    assert snap.controller_state is ControllerState.UNKNOWN
    assert snap.nav_goal_id == "g1"
    assert snap.distance_remaining is None


def test_stale_feedback_distance_is_dropped():
    b = SnapshotBuilder()
    b.update_nav_status(["g1"], T0 + 5.0, "nav")
    b.update_nav_feedback("g1", None, 3.0, T0, "fb")
    assert capture(b, T0 + 5.0).distance_remaining is None


# -- salient events ------------------------------------------------------------------


def test_pose_jump_detected_and_counted():
    b = SnapshotBuilder()
    assert list(b.update_pose(Pose2D(x=0.0, y=0.0), T0, "p")) == []
    # 0.1 s later: allowed 1.0 + 2.0 * 0.1 = 1.2 m
    assert list(b.update_pose(Pose2D(x=1.1, y=0.0), T0 + 0.1, "p")) == []
    events = b.update_pose(Pose2D(x=3.0, y=0.0), T0 + 0.2, "p")
    assert [e.type for e in events] == [SalientEventType.POSE_JUMP]
    assert events[0].detail["displacement_m"] == pytest.approx(1.9)
    assert events[0].detail["allowed_m"] == pytest.approx(1.2, abs=1e-6)
    snap = capture(b, T0 + 0.2)
    assert snap.pose_jumps == 1 and snap.last_pose_jump_at == T0 + 0.2
    assert snap.pose == Pose2D(x=3.0, y=0.0)  # the jump is reported, the pose still taken


def test_long_gap_allows_proportionally_more_motion():
    b = SnapshotBuilder()
    b.update_pose(Pose2D(x=0.0, y=0.0), T0, "p")
    assert list(b.update_pose(Pose2D(x=10.0, y=0.0), T0 + 5.0, "p")) == []  # 1 + 2*5 = 11 m
    assert b.pose_jumps == 0


def test_battery_low_fires_once_per_crossing():
    b = SnapshotBuilder()
    assert list(b.update_battery(0.5, T0, "bat")) == []
    events = b.update_battery(0.14, T0 + 1, "bat")
    assert [e.type for e in events] == [SalientEventType.BATTERY_LOW]
    assert events[0].detail == {"battery": 0.14, "threshold": 0.15}
    assert list(b.update_battery(0.10, T0 + 2, "bat")) == []
    assert list(b.update_battery(0.155, T0 + 3, "bat")) == []  # within hysteresis: not re-armed
    assert list(b.update_battery(0.14, T0 + 4, "bat")) == []
    assert list(b.update_battery(0.5, T0 + 5, "bat")) == []  # re-armed
    assert [e.type for e in b.update_battery(0.05, T0 + 6, "bat")] == [SalientEventType.BATTERY_LOW]


def test_first_battery_reading_below_threshold_fires():
    events = SnapshotBuilder().update_battery(0.05, T0, "bat")
    assert [e.type for e in events] == [SalientEventType.BATTERY_LOW]


# -- projection ----------------------------------------------------------------------


def _rich_snapshot(n_artifacts: int = 5, reason_len: int = 300):
    b = SnapshotBuilder()
    b.update_pose(Pose2D(x=1.23456, y=-2.34567, yaw=0.123456), T0, "/amcl_pose")
    b.update_velocity(Velocity(vx=0.2), T0, "/odom")
    b.update_battery(0.876, T0, "/battery_state")
    b.update_nav_status(["g1"], T0, "nav")
    b.update_nav_feedback("g1", None, 4.5678, T0, "fb")
    action = ActionView(
        action_id="act-1", tool_call_id="call-1", skill="navigate_to", state=ActionStatus.RUNNING
    )
    outcome = ActionView(
        action_id="act-0",
        tool_call_id="call-0",
        skill="navigate_to",
        state=ActionStatus.FAILED,
        reason="x" * reason_len,
    )
    artifacts = [
        ArtifactRef(uri=f"file:///tmp/img{i}.png", sha256=f"{i:064x}", media_type="image/png")
        for i in range(n_artifacts)
    ]
    return b.capture(
        snapshot_id="snap-abc",
        now=T0 + 0.26,
        reason="before_model_turn",
        active_action=action,
        recent_outcome=outcome,
        artifacts=artifacts,
    )


def test_projection_is_rounded_and_complete_when_it_fits():
    out = project_for_model(_rich_snapshot(), byte_cap=100_000)
    assert out["truncated"] is False
    assert out["pose"] == {"x": 1.23, "y": -2.35, "yaw": 0.12}
    assert out["availability"]["pose"] == {"status": "AVAILABLE", "age_s": 0.3}
    assert out["availability"]["velocity"]["status"] == "AVAILABLE"
    assert out["controller"] == "active"
    assert out["distance_remaining_m"] == 4.57
    assert out["battery_pct"] == 87.6
    assert out["active_action"] == {"action_id": "act-1", "skill": "navigate_to", "state": "RUNNING"}
    assert out["recent_outcome"]["state"] == "FAILED"
    assert out["artifacts"][0] == {"uri": "file:///tmp/img0.png", "sha256": f"{0:064x}"}
    assert set(out["artifacts"][0]) == {"uri", "sha256"}


def test_projection_of_empty_snapshot_reports_missing():
    out = project_for_model(SnapshotBuilder().capture(snapshot_id="s", now=T0, reason="r"), byte_cap=2000)
    assert out["pose"] is None
    assert out["availability"]["pose"] == {"status": "MISSING", "age_s": None}
    assert out["controller"] == "unknown"
    assert "battery_pct" not in out and "distance_remaining_m" not in out


def test_projection_respects_every_cap_and_flags_truncation():
    snap = _rich_snapshot()
    full = len(json.dumps(project_for_model(snap, byte_cap=100_000)))
    essentials = None
    for cap in range(full, 0, -7):
        try:
            out = project_for_model(snap, byte_cap=cap)
        except ValueError:
            essentials = cap
            break
        assert len(json.dumps(out)) <= cap
        assert out["truncated"] is (cap < full)
        assert "pose" in out and "availability" in out
    assert essentials is not None and essentials < 400


def test_projection_drops_artifacts_before_outcome_detail():
    snap = _rich_snapshot(n_artifacts=5, reason_len=50)
    full = project_for_model(snap, byte_cap=100_000)
    no_artifacts = dict(full)
    del no_artifacts["artifacts"]
    out = project_for_model(snap, byte_cap=len(json.dumps(no_artifacts)) + 20)
    assert out["truncated"] is True
    assert "artifacts" not in out
    assert out["recent_outcome"]["reason"] == "x" * 50
    assert out["active_action"]["state"] == "RUNNING"


def test_projection_drops_some_artifacts_first():
    snap = _rich_snapshot(n_artifacts=5, reason_len=10)
    full = project_for_model(snap, byte_cap=100_000)
    out = project_for_model(snap, byte_cap=len(json.dumps(full)) - 10)
    assert out["truncated"] is True
    assert len(out["artifacts"]) == 4
    assert out["artifacts"] == full["artifacts"][:4]


def test_projection_too_small_cap_raises():
    with pytest.raises(ValueError) as exc_info:
        project_for_model(_rich_snapshot(), byte_cap=50)
    assert isinstance(exc_info.value, ByteCapTooSmall)
    assert isinstance(exc_info.value, UsageError)
    assert exc_info.value.details["byte_cap"] == 50


def test_core_snapshot_does_not_load_rclpy():
    code = (
        "import sys; import robot_harness.core.snapshot; "
        "bad = [m for m in sys.modules if m.startswith(('rclpy', 'robot_harness.msg'))]; "
        "sys.exit(1 if bad else 0)"
    )
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
