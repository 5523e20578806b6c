"""The simulated robot's ROS-free half: physics, navigator logic and scripted faults.

Nothing here imports rclpy; ``robot_harness.nodes.sim_robot`` is the thin ROS
adapter that steps a ``SimWorld`` on the ROS clock and publishes what it reports.
"""
from robot_harness.sim.world import (
    ARRIVAL_TOLERANCE_M,
    DieFault,
    EarlySuccessFault,
    Fault,
    FrozenPoseFault,
    GoalDecision,
    GoalEvent,
    GoalEventType,
    GoalStatus,
    GoalView,
    LocalizationJumpFault,
    NoFeedbackFault,
    PoseNoiseFault,
    RejectFault,
    SimConfig,
    SimWorld,
    StallFault,
    StampedPose,
    parse_faults,
)

__all__ = [
    "ARRIVAL_TOLERANCE_M",
    "DieFault",
    "EarlySuccessFault",
    "Fault",
    "FrozenPoseFault",
    "GoalDecision",
    "GoalEvent",
    "GoalEventType",
    "GoalStatus",
    "GoalView",
    "LocalizationJumpFault",
    "NoFeedbackFault",
    "PoseNoiseFault",
    "RejectFault",
    "SimConfig",
    "SimWorld",
    "StallFault",
    "StampedPose",
    "parse_faults",
]
