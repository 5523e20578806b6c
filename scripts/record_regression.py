#!/usr/bin/env python3
"""Record the verdict-regression set: a few benchmark missions, run gated on the simulated
world, each kept as its journal export (JSON lines), the images its verdicts cite, and its
mission bag (a rosbag2 MCAP bag, as the supervisor's recorder writes it), under
test/replay/regression/:

    <case>.jsonl                                the journal (robot-harness journal export --format jsonl)
    <case>/img-*.png                            the artifacts the receipts cite
    <case>/<mission_id>/<mission_id>.mcap       the mission bag + metadata.yaml (ros2 bag info reads it)

test/replay/test_regression_replays.py replays each one's verification and commit gate from
the journal and cross-checks every bag message the verdicts cite against the bag; it fails on
any verdict that differs: a change to the verifier, the gate or the contracts that alters a
recorded decision shows up there. Re-record deliberately after such a change:
``python scripts/record_regression.py`` (``--out DIR`` writes elsewhere, e.g. to look first).

The missions run in-process on the virtual clock (``robot_harness.eval``); the bag is filled
the way the live graph fills it: a ``MissionRecorder`` subscribed (raw CDR) to what the
simulated robot publishes, and the ``HarnessEvidenceRecorder`` writing the journal, snapshots,
verdicts and the Foxglove topics. Log times are the virtual clock's and the scratch folder is
fixed, so a re-recording with no behaviour change differs only where rclpy's CDR serializer
leaves alignment padding uninitialized (and in those messages' sha256s). To stay small (see
``MAX_BAG_BYTES``) the robot's topics are recorded at reduced rates: ``/amcl_pose`` at
``POSE_HZ`` (AMCL itself publishes at a few Hz), Nav2's goal status on every change, no
odometry or battery; the harness's own records, which the verdicts cite, are all there.
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import math
import shutil
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "test" / "replay" / "regression"
SCENARIOS = ("inspection-none", "patrol-none", "multistep-none", "navigation-early_success",
             "inspection-localization_jump", "message-confident_done", "speech-stale_pose",
             "navigation-verifier_uncertainty")
POSE_HZ = 5.0
MAX_BAG_BYTES = 400_000
"""A committed bag larger than this is refused: the set must stay small enough to keep in git."""

log = logging.getLogger("record_regression")


class _InProcessGraph:
    """What ``MissionRecorder`` needs of an rclpy node, over the simulated robot in this process.

    Subscriptions are callbacks handed CDR bytes (``raw=True``, as the live recorder asks), the
    clock is the simulation's virtual clock, and each topic's publisher offers the QoS the
    recorder subscribes with (so the bag's ``offered_qos_profiles`` are filled in).
    """

    def __init__(self, clock: Any, qos: dict[str, Any]) -> None:
        self._clock = clock
        self._qos = qos
        self._callbacks: dict[str, Any] = {}

    def get_clock(self) -> Any:
        return self

    def now(self) -> Any:
        return SimpleNamespace(nanoseconds=int(round(self._clock.now() * 1e6)) * 1000)  # exact, to the µs

    def get_logger(self) -> logging.Logger:
        return log

    def get_publishers_info_by_topic(self, topic: str) -> list[Any]:
        return [SimpleNamespace(qos_profile=self._qos[topic])] if topic in self._qos else []

    def create_subscription(self, msg_type: Any, topic: str, callback: Any, qos: Any, *,
                            callback_group: Any = None, raw: bool = False) -> str:
        if not raw:
            raise ValueError("the recorder subscribes raw")
        self._callbacks[topic] = callback
        return topic

    def destroy_subscription(self, sub: str) -> None:
        self._callbacks.pop(sub, None)

    def publish(self, topic: str, msg: Any) -> None:
        from rclpy.serialization import serialize_message

        callback = self._callbacks.get(topic)
        if callback is not None:
            callback(serialize_message(msg))


class _PublishingBuilder:
    """The sim's snapshot builder, also publishing what the robot's topics would carry to the graph.

    ``SimPorts`` feeds its builder every pose, odometry, battery and navigator update; this wrapper
    passes each on unchanged and publishes ``/amcl_pose`` (at ``POSE_HZ``) and Nav2's
    ``GoalStatusArray`` (whenever a goal's status changes).
    """

    def __init__(self, builder: Any, world: Any, graph: _InProcessGraph) -> None:
        self._builder = builder
        self._world = world
        self._graph = graph
        self._last_pose = -math.inf
        self._last_status: tuple[tuple[int, str], ...] = ()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._builder, name)

    def update_pose(self, pose: Any, stamp: float, source: str, covariance: Any = None) -> Any:
        from geometry_msgs.msg import PoseWithCovariance, PoseWithCovarianceStamped
        from std_msgs.msg import Header

        from robot_harness.nodes.conversions import float_to_stamp, pose2d_to_pose_msg

        out = self._builder.update_pose(pose, stamp, source, covariance)
        if stamp - self._last_pose >= 1.0 / POSE_HZ - 1e-9:
            self._last_pose = stamp
            cov = [0.0] * 36  # row-major 6x6 over x, y, z, roll, pitch, yaw, as AMCL fills it
            if covariance is not None:
                cov[0], cov[7], cov[35] = covariance.var_x, covariance.var_y, covariance.var_yaw
            self._graph.publish("/amcl_pose", PoseWithCovarianceStamped(
                header=Header(stamp=float_to_stamp(stamp), frame_id="map"),
                pose=PoseWithCovariance(pose=pose2d_to_pose_msg(pose), covariance=cov)))
        return out

    def update_nav_status(self, active_goal_ids: Any, stamp: float, source: str) -> Any:
        from action_msgs.msg import GoalInfo, GoalStatus, GoalStatusArray
        from unique_identifier_msgs.msg import UUID

        from robot_harness.nodes.conversions import float_to_stamp
        from robot_harness.sim.world import GoalStatus as SimStatus

        out = self._builder.update_nav_status(active_goal_ids, stamp, source)
        codes = {SimStatus.ACTIVE: GoalStatus.STATUS_EXECUTING, SimStatus.SUCCEEDED: GoalStatus.STATUS_SUCCEEDED,
                 SimStatus.ABORTED: GoalStatus.STATUS_ABORTED, SimStatus.CANCELED: GoalStatus.STATUS_CANCELED}
        goals = [self._world.goal(i) for i in range(1, self._world.goals_received + 1)]
        now = tuple((g.index, g.status.value) for g in goals if g.status in codes)
        if now != self._last_status:
            self._last_status = now
            t0 = stamp - self._world.t  # the goals' times are world time; stamps are the clock's
            self._graph.publish("/navigate_to_pose/_action/status", GoalStatusArray(status_list=[
                GoalStatus(goal_info=GoalInfo(goal_id=UUID(uuid=list(_goal_uuid(g.index))),
                                              stamp=float_to_stamp(t0 + g.received_t)),
                           status=codes[g.status])
                for g in goals if g.status in codes]))
        return out


def _goal_uuid(index: int) -> bytes:
    return hashlib.sha256(f"sim goal {index}".encode()).digest()[:16]


def record(name: str, out: Path) -> tuple[str, int]:
    """Run ``name`` gated, recorded; write its journal, artifacts and bag under ``out``. Returns (status, bag bytes)."""
    from robot_harness.core.clock import IdGenerator
    from robot_harness.core.config import load_harness_config
    from robot_harness.compose import mission_runner
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.core.planner_script import ScriptedPlanner
    from robot_harness.core.scenario import load_scenario
    from robot_harness.core.skills import default_skills
    from robot_harness.core.timeline import export_events
    from robot_harness.eval.modes import sim_config
    from robot_harness.eval.run import SUITE_DIR
    from robot_harness.eval.simports import SimPorts
    from robot_harness.evidence.bag import McapEvidenceStore
    from robot_harness.nodes.recorder import DEFAULT_TOPICS, HarnessEvidenceRecorder, MissionRecorder

    scenario = load_scenario(SUITE_DIR / f"{name}.yaml")
    topics = tuple(t for t in DEFAULT_TOPICS if t.topic in ("/amcl_pose", "/navigate_to_pose/_action/status"))
    # a fixed scratch folder: artifact URIs and the bag path recorded in the journal come out the same
    # on every re-recording
    work = Path(tempfile.gettempdir()) / "robot_harness-regression" / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        ports = SimPorts(config=sim_config(scenario), artifacts_dir=work / "artifacts")
        graph = _InProcessGraph(ports.clock, {t.topic: t.qos for t in topics})
        ports.builder = _PublishingBuilder(ports.builder, ports.world, graph)  # type: ignore[assignment]
        # as eval.modes runs "gated", plus the recorder the supervisor gives the engine
        config = load_harness_config(overrides=scenario.harness_config())
        ids = IdGenerator(7)
        journal = SqliteJournal(work / "journal.sqlite3", clock=ports.clock, ids=ids)
        journal.setup()
        recorder = HarnessEvidenceRecorder(MissionRecorder(graph, McapEvidenceStore(work / "bags"), topics=topics),
                                           journal, logger=log)
        runner = mission_runner(config=config, journal=journal, clock=ports.clock, ids=ids,
                               skills=default_skills(config.navigation, ask_operator=config.interactions.ask_operator),
                               snapshots=ports, planner=ScriptedPlanner(scenario.planner.turns), navigation=ports,
                               robot_io=ports, sleep=ports.sleep, recorder=recorder)
        result = runner.run(scenario.goal)
        events = journal.events(mission_id=result.mission_id)
        journal.close()
        if recorder.failures:
            raise RuntimeError(f"{name}: {recorder.failures} record(s) did not reach the bag")
        bag_dir = work / "bags" / result.mission_id
        size = sum(f.stat().st_size for f in bag_dir.iterdir())
        if size > MAX_BAG_BYTES:
            raise RuntimeError(f"{name}: the bag is {size} bytes (max {MAX_BAG_BYTES}); trim topics or rates")
        case = out / name
        if case.exists():
            shutil.rmtree(case)
        case.mkdir(parents=True)
        (out / f"{name}.jsonl").write_text(export_events(events, "jsonl"))
        for a in sorted((work / "artifacts").glob("*")):  # the images the verdicts cite, re-hashed by the replay
            shutil.copy2(a, case / a.name)
        shutil.copytree(bag_dir, case / result.mission_id)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result.status.value, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write the set (default {OUT})")
    parser.add_argument("cases", nargs="*", default=list(SCENARIOS), help="benchmark scenarios (default: the set)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    logging.basicConfig(level=logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.cases:
        status, size = record(name, args.out)
        print(f"{name}: {status}, bag {size // 1024} KiB -> {args.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
