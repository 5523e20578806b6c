"""Nav2's result error codes (Kilted, nav2_msgs 1.4), named and sorted into the kinds of failure the planner
and the recovery policy act on.

Since Jazzy, ``bt_navigator`` puts the error of the behavior-tree node that failed into its own result
(``NavigateToPose.Result.error_code``): a planner's ``NO_VALID_PATH`` (208) or a controller's
``FAILED_TO_MAKE_PROGRESS`` (105) reaches the harness through the navigator, beside the navigator's own
codes (9000-9003, 9100-9103). Each server owns a block of a hundred; a code no table here knows is kept with
its number and said to be unknown, never dropped.
"""
from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict

__all__ = ["Nav2ErrorKind", "Nav2Error", "describe_nav2_error"]


class Nav2ErrorKind(str, enum.Enum):
    NONE = "none"
    NO_PATH = "no_path"
    """The planner found no path (or was given no via points)."""
    GOAL_BLOCKED = "goal_blocked"
    """The goal is occupied or outside the map: no retry of the same goal can succeed."""
    START_BLOCKED = "start_blocked"
    """The robot's own cell is occupied or off the map: it must move (back up) or relocalize first."""
    STUCK = "stuck"
    """The controller made no progress, or a behavior saw a collision ahead."""
    TF_ERROR = "tf_error"
    """A transform was missing: localization or the TF tree, not the goal."""
    TIMEOUT = "timeout"
    CONFIGURATION = "configuration"
    """An invalid plugin or behavior tree, or invalid input: a site or harness fault, not the world's."""
    WAYPOINT = "waypoint"
    """The waypoint follower's own failures (a waypoint missed, none valid)."""
    UNKNOWN = "unknown"


class Nav2Error(BaseModel):
    model_config = ConfigDict(frozen=True)
    code: int
    name: str
    """The constant's name in its interface (``NO_VALID_PATH``), or ``CODE_<n>`` for an unknown code."""
    server: str
    """Which Nav2 server's block the code is in (planner_server, controller_server, bt_navigator, ...)."""
    kind: Nav2ErrorKind
    message: str = ""

    def describe(self) -> str:
        said = f": {self.message}" if self.message else ""
        return f"Nav2 error {self.code} {self.name} ({self.server}, {self.kind.value}){said}"


_K = Nav2ErrorKind
# (first code of the block, server, {offset: (name, kind)}): the constants of each Kilted interface.
_BLOCKS: tuple[tuple[int, str, dict[int, tuple[str, Nav2ErrorKind]]], ...] = (
    (100, "controller_server (FollowPath)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("INVALID_CONTROLLER", _K.CONFIGURATION), 2: ("TF_ERROR", _K.TF_ERROR),
        3: ("INVALID_PATH", _K.NO_PATH), 4: ("PATIENCE_EXCEEDED", _K.STUCK), 5: ("FAILED_TO_MAKE_PROGRESS", _K.STUCK),
        6: ("NO_VALID_CONTROL", _K.STUCK), 7: ("CONTROLLER_TIMED_OUT", _K.TIMEOUT)}),
    (200, "planner_server (ComputePathToPose)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("INVALID_PLANNER", _K.CONFIGURATION), 2: ("TF_ERROR", _K.TF_ERROR),
        3: ("START_OUTSIDE_MAP", _K.START_BLOCKED), 4: ("GOAL_OUTSIDE_MAP", _K.GOAL_BLOCKED),
        5: ("START_OCCUPIED", _K.START_BLOCKED), 6: ("GOAL_OCCUPIED", _K.GOAL_BLOCKED), 7: ("TIMEOUT", _K.TIMEOUT),
        8: ("NO_VALID_PATH", _K.NO_PATH)}),
    (300, "planner_server (ComputePathThroughPoses)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("INVALID_PLANNER", _K.CONFIGURATION), 2: ("TF_ERROR", _K.TF_ERROR),
        3: ("START_OUTSIDE_MAP", _K.START_BLOCKED), 4: ("GOAL_OUTSIDE_MAP", _K.GOAL_BLOCKED),
        5: ("START_OCCUPIED", _K.START_BLOCKED), 6: ("GOAL_OCCUPIED", _K.GOAL_BLOCKED), 7: ("TIMEOUT", _K.TIMEOUT),
        8: ("NO_VALID_PATH", _K.NO_PATH), 9: ("NO_VIAPOINTS_GIVEN", _K.NO_PATH)}),
    (500, "smoother_server (SmoothPath)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("INVALID_SMOOTHER", _K.CONFIGURATION), 2: ("TIMEOUT", _K.TIMEOUT),
        3: ("SMOOTHED_PATH_IN_COLLISION", _K.NO_PATH), 4: ("FAILED_TO_SMOOTH_PATH", _K.NO_PATH),
        5: ("INVALID_PATH", _K.NO_PATH)}),
    (600, "waypoint_follower (FollowWaypoints)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("TASK_EXECUTOR_FAILED", _K.WAYPOINT), 2: ("NO_VALID_WAYPOINTS", _K.WAYPOINT),
        3: ("STOP_ON_MISSED_WAYPOINT", _K.WAYPOINT)}),
    (700, "behavior_server (Spin)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("TIMEOUT", _K.TIMEOUT), 2: ("TF_ERROR", _K.TF_ERROR),
        3: ("COLLISION_AHEAD", _K.STUCK)}),
    (710, "behavior_server (BackUp)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("TIMEOUT", _K.TIMEOUT), 2: ("TF_ERROR", _K.TF_ERROR),
        3: ("INVALID_INPUT", _K.CONFIGURATION), 4: ("COLLISION_AHEAD", _K.STUCK)}),
    (720, "behavior_server (DriveOnHeading)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("TIMEOUT", _K.TIMEOUT), 2: ("TF_ERROR", _K.TF_ERROR),
        3: ("COLLISION_AHEAD", _K.STUCK), 4: ("INVALID_INPUT", _K.CONFIGURATION)}),
    (740, "behavior_server (Wait)", {0: ("UNKNOWN", _K.UNKNOWN), 1: ("TIMEOUT", _K.TIMEOUT)}),
    (9000, "bt_navigator (NavigateToPose)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("FAILED_TO_LOAD_BEHAVIOR_TREE", _K.CONFIGURATION), 2: ("TF_ERROR", _K.TF_ERROR),
        3: ("TIMEOUT", _K.TIMEOUT)}),
    (9100, "bt_navigator (NavigateThroughPoses)", {
        0: ("UNKNOWN", _K.UNKNOWN), 1: ("FAILED_TO_LOAD_BEHAVIOR_TREE", _K.CONFIGURATION), 2: ("TF_ERROR", _K.TF_ERROR),
        3: ("TIMEOUT", _K.TIMEOUT)}),
)


def describe_nav2_error(code: int, message: str = "") -> Nav2Error:
    """Name a Nav2 result code (0: none) and sort it into its kind; an unknown code keeps its number."""
    code = int(code)
    if code == 0:
        return Nav2Error(code=0, name="NONE", server="", kind=Nav2ErrorKind.NONE, message=message)
    for base, server, names in sorted(_BLOCKS, key=lambda b: -b[0]):
        if code >= base and code - base in names:
            name, kind = names[code - base]
            return Nav2Error(code=code, name=name, server=server, kind=kind, message=message)
    return Nav2Error(code=code, name=f"CODE_{code}", server="unknown", kind=Nav2ErrorKind.UNKNOWN, message=message)
