#!/usr/bin/env python3
"""Does the snapshot aggregator keep up with 200 Hz pose + 50 Hz odometry on < 25% of one core?

Processes (all on this machine's loopback DDS profile):

* the aggregator, started exactly as ``ros2 run robot_harness
  snapshot_aggregator --ros-args -p autostart:=true`` would (its module's
  ``main()``, ``rclpy.spin`` on one thread) in a subprocess of its own;
* a publisher: ``PoseWithCovarianceStamped`` on ``/amcl_pose`` at 200 Hz and
  ``nav_msgs/Odometry`` on ``/odom`` at 50 Hz, stamps increasing, the pose
  moving along x by a fixed step per message (so a captured pose tells which
  message the aggregator processed last);
* the baseline: a bare rclpy node subscribing the same topics with the same
  QoS and empty callbacks, spun the same way.

Two windows, each ``--seconds`` long: the aggregator idle (no traffic), then
the aggregator and the bare subscriber together under the same traffic, so
the noise of a shared machine lands on both. CPU is the process's ``utime +
stime`` (``psutil`` if installed, else ``/proc/<pid>/stat``), all threads
included (DDS receive threads too), as % of one core. At the end of the
loaded window ``~/capture`` is called while traffic still flows (the pose
must be AVAILABLE and younger than 50 ms), and again after the publisher
stopped (the captured pose must be the last one published).

Run from the repository root after ``source scripts/env.sh``::

    python bench/aggregator_load.py --seconds 10
"""
from __future__ import annotations

import sys
from pathlib import Path

from _loopback import require_loopback  # bench/_loopback.py (the script's own folder)

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import argparse
import json
import multiprocessing as mp
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

TARGET_CPU_PCT = 25.0
MAX_CAPTURE_AGE_S = 0.050
POSE_HZ = 200.0
ODOM_HZ = 50.0
STEP_M = 0.0025
"""Pose x advances this much per pose message (0.5 m/s at 200 Hz); x / STEP_M is the message number."""
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 5.0
SETTLE_S = 1.0
CAPTURE_SERVICE = "/snapshot_aggregator/capture"


# --------------------------------------------------------------------------- CPU accounting


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all threads, in seconds."""
    try:
        import psutil  # type: ignore[import-not-found]

        t = psutil.Process(pid).cpu_times()
        return float(t.user + t.system)
    except ImportError:
        pass
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_cpu(pids: dict[str, int], seconds: float, *, alive: Callable[[], bool]) -> dict[str, float]:
    """% of one core used by each process over the same ``seconds`` window."""
    c0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    t0 = time.monotonic()
    deadline = t0 + seconds
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("a measured process exited during the window")
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    c1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    elapsed = time.monotonic() - t0
    return {name: 100.0 * (c1[name] - c0[name]) / elapsed for name in pids}


# --------------------------------------------------------------------------- child processes


def _pose_qos() -> Any:
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    # As the aggregator subscribes: reliable, depth 10, volatile.
    return QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


def publisher_main(stop: Any, ready: Any, counters: Any) -> None:
    """Publish pose at 200 Hz and odometry at 50 Hz on absolute deadlines until ``stop`` is set.

    ``counters``: [pose messages sent, odom messages sent, stamp of the last pose (ns)].
    No executor: publishing needs none, and a timer-driven executor would add
    jitter on a loaded 2-core machine.
    """
    import rclpy
    from geometry_msgs.msg import PoseWithCovarianceStamped
    from nav_msgs.msg import Odometry
    from rclpy.qos import qos_profile_sensor_data

    rclpy.init()
    node = rclpy.create_node("aggregator_load_publisher")
    try:
        pose_pub = node.create_publisher(PoseWithCovarianceStamped, "/amcl_pose", _pose_qos())
        odom_pub = node.create_publisher(Odometry, "/odom", qos_profile_sensor_data)
        pose = PoseWithCovarianceStamped()
        pose.header.frame_id = "map"
        pose.pose.pose.orientation.w = 1.0
        odom = Odometry()
        odom.header.frame_id = "odom"
        odom.child_frame_id = "base_link"
        odom.pose.pose.orientation.w = 1.0
        odom.twist.twist.linear.x = STEP_M * POSE_HZ
        ready.set()
        n_pose = n_odom = 0
        t_pose = t_odom = time.monotonic()
        while not stop.is_set():
            now = time.monotonic()
            if now >= t_pose:
                n_pose += 1
                stamp = time.time_ns()
                pose.header.stamp.sec, pose.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
                pose.pose.pose.position.x = n_pose * STEP_M
                pose_pub.publish(pose)
                counters[0], counters[2] = n_pose, stamp
                t_pose += 1.0 / POSE_HZ
                if t_pose < now - 0.1:  # fell far behind: do not burst to catch up
                    t_pose = now
            if now >= t_odom:
                n_odom += 1
                stamp = time.time_ns()
                odom.header.stamp.sec, odom.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
                odom.pose.pose.position.x = n_pose * STEP_M
                odom_pub.publish(odom)
                counters[1] = n_odom
                t_odom += 1.0 / ODOM_HZ
                if t_odom < now - 0.1:
                    t_odom = now
            delay = min(t_pose, t_odom) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def bare_subscriber_main(stop: Any, ready: Any) -> None:
    """The same two subscriptions as the aggregator, empty callbacks, spun by ``rclpy.spin_once``."""
    import rclpy
    from geometry_msgs.msg import PoseWithCovarianceStamped
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import qos_profile_sensor_data

    rclpy.init()
    node = rclpy.create_node("aggregator_load_bare_subscriber")
    executor = SingleThreadedExecutor()
    try:
        node.create_subscription(PoseWithCovarianceStamped, "/amcl_pose", lambda _m: None, _pose_qos())
        node.create_subscription(Odometry, "/odom", lambda _m: None, qos_profile_sensor_data)
        executor.add_node(node)
        ready.set()
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.1)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


_AGGREGATOR_CMD = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from robot_harness.nodes.snapshot_aggregator import main; sys.exit(main())"
)


def start_aggregator(log: Any) -> subprocess.Popen[bytes]:
    """The production entry point, as ``ros2 run ... --ros-args -p autostart:=true`` starts it."""
    return subprocess.Popen(
        [sys.executable, "-c", _AGGREGATOR_CMD.format(root=str(_ROOT)), "--ros-args", "-p", "autostart:=true"],
        stdout=log, stderr=subprocess.STDOUT,
    )


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT (the node's own clean shutdown), then SIGKILL if it does not exit in time."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)


def stop_mp(proc: mp.process.BaseProcess | None, stop: Any) -> None:
    if proc is None:
        return
    stop.set()
    proc.join(timeout=STOP_TIMEOUT_S)
    if proc.is_alive():
        proc.terminate()
        proc.join(timeout=STOP_TIMEOUT_S)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=STOP_TIMEOUT_S)


# --------------------------------------------------------------------------- the bench's own node


class Prober:
    """A node in this process that calls ``~/capture`` and counts subscribers (bounded waits only)."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        from robot_harness.srv import CaptureSnapshot

        self._rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("aggregator_load_prober", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._srv = CaptureSnapshot
        self._client = self.node.create_client(CaptureSnapshot, CAPTURE_SERVICE)

    def capture(self, *, timeout_s: float = 2.0) -> Any:
        """One snapshot as the core model (``WorldSnapshot``); raises on timeout or refusal."""
        from robot_harness.nodes.conversions import msg_to_snapshot

        if not self._client.wait_for_service(timeout_sec=timeout_s):
            raise TimeoutError(f"{CAPTURE_SERVICE} not available within {timeout_s} s")
        future = self._client.call_async(self._srv.Request(mission_id="bench", reason="bench"))
        self.executor.spin_until_future_complete(future, timeout_sec=timeout_s)
        if not future.done():
            future.cancel()
            raise TimeoutError(f"{CAPTURE_SERVICE}: no answer within {timeout_s} s")
        resp = future.result()
        if not resp.ok:
            raise RuntimeError(f"capture refused: {resp.error}")
        return msg_to_snapshot(resp.snapshot)

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            self.executor.spin_once(timeout_sec=0.05)
        raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")

    def subscribers(self, topic: str) -> int:
        return self.node.count_subscribers(topic)

    def destroy(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self._rclpy.try_shutdown(context=self.context)


# --------------------------------------------------------------------------- the run


def _aggregator_active(prober: Prober) -> bool:
    try:
        prober.capture(timeout_s=1.0)
        return True
    except (TimeoutError, RuntimeError):
        return False


def run(seconds: float, workdir: Path) -> dict[str, Any]:
    from robot_harness.core.records import Availability

    ctx = mp.get_context("spawn")
    pub_stop, pub_ready = ctx.Event(), ctx.Event()
    counters = ctx.Array("q", 3, lock=False)
    bare_stop, bare_ready = ctx.Event(), ctx.Event()
    publisher: mp.process.BaseProcess | None = None
    bare: mp.process.BaseProcess | None = None
    log_path = workdir / "aggregator.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed in the finally below
    aggregator = start_aggregator(log)
    prober = Prober()
    res: dict[str, Any] = {"seconds": seconds}
    try:
        prober.wait_until(lambda: aggregator.poll() is None and _aggregator_active(prober), START_TIMEOUT_S,
                          "the aggregator to become active")
        time.sleep(SETTLE_S)
        print(f"[1/2] aggregator idle, {seconds:.0f} s ...", flush=True)
        res["cpu_idle_pct"] = measure_cpu({"aggregator": aggregator.pid}, seconds,
                                          alive=lambda: aggregator.poll() is None)["aggregator"]

        bare = ctx.Process(target=bare_subscriber_main, args=(bare_stop, bare_ready), name="bare-subscriber")
        bare.start()
        if not bare_ready.wait(START_TIMEOUT_S):
            raise TimeoutError("bare subscriber did not start")
        prober.wait_until(lambda: prober.subscribers("/amcl_pose") >= 2, START_TIMEOUT_S,
                          "the aggregator and the bare subscriber on /amcl_pose")
        publisher = ctx.Process(target=publisher_main, args=(pub_stop, pub_ready, counters), name="publisher")
        publisher.start()
        if not pub_ready.wait(START_TIMEOUT_S):
            raise TimeoutError("publisher did not start")

        def pose_flowing() -> bool:
            try:
                snap = prober.capture(timeout_s=1.0)
            except (TimeoutError, RuntimeError):
                return False
            return snap.pose_meta.availability is Availability.AVAILABLE and counters[0] > 0

        prober.wait_until(pose_flowing, START_TIMEOUT_S, "poses to reach the aggregator")
        time.sleep(SETTLE_S)
        print(f"[2/2] aggregator and bare subscriber under 200 Hz pose + 50 Hz odom, {seconds:.0f} s ...", flush=True)
        running = (bare, publisher)

        def all_alive() -> bool:
            return aggregator.poll() is None and all(p.is_alive() for p in running)

        pids = {"aggregator": aggregator.pid, "bare": int(bare.pid or 0), "publisher": int(publisher.pid or 0)}
        n0 = (counters[0], counters[1], time.monotonic())
        cpu = measure_cpu(pids, seconds, alive=all_alive)
        n1 = (counters[0], counters[1], time.monotonic())
        res.update(cpu_loaded_pct=cpu["aggregator"], cpu_bare_pct=cpu["bare"], cpu_publisher_pct=cpu["publisher"])
        res["pose_hz_sent"] = (n1[0] - n0[0]) / (n1[2] - n0[2])
        res["odom_hz_sent"] = (n1[1] - n0[1]) / (n1[2] - n0[2])

        # Keeping up: a capture while traffic flows sees a pose younger than 50 ms ...
        t_call = time.monotonic()
        sent_before = counters[0]
        snap = prober.capture()
        res["capture_call_ms"] = 1000.0 * (time.monotonic() - t_call)
        sent_after = counters[0]
        res["capture_availability"] = snap.pose_meta.availability.value
        res["capture_age_ms"] = None if snap.pose_meta.age_s is None else 1000.0 * snap.pose_meta.age_s
        seen = round(snap.pose.x / STEP_M) if snap.pose is not None else 0
        res["capture_msg_seq"] = seen
        res["published_seq_around_capture"] = [sent_before, sent_after]
        res["behind_msgs"] = max(0, sent_before - seen)
        res["velocity_availability_under_load"] = snap.velocity_meta.availability.value
        # ... and once the publisher stops, the last message published is the one it holds.
        stop_mp(publisher, pub_stop)
        publisher = None
        time.sleep(0.2)
        tail = prober.capture()
        res["last_published_seq"] = counters[0]
        res["tail_capture_seq"] = round(tail.pose.x / STEP_M) if tail.pose is not None else 0
        res["tail_complete"] = res["tail_capture_seq"] == res["last_published_seq"]
    except BaseException:
        if log_path.exists():
            tail_log = log_path.read_text(errors="replace").splitlines()[-20:]
            print("aggregator log (last lines):\n  " + "\n  ".join(tail_log), file=sys.stderr)
        raise
    finally:
        stop_mp(publisher, pub_stop)
        stop_mp(bare, bare_stop)
        stop_process(aggregator)
        prober.destroy()
        log.close()
    return res


def report(res: dict[str, Any]) -> dict[str, Any]:
    loaded, idle, bare = res["cpu_loaded_pct"], res["cpu_idle_pct"], res["cpu_bare_pct"]
    age = res["capture_age_ms"]
    kept_up = res["capture_availability"] == "AVAILABLE" and age is not None and age < MAX_CAPTURE_AGE_S * 1000.0
    cpu_ok = loaded < TARGET_CPU_PCT
    print()
    print(f"traffic sent: pose {res['pose_hz_sent']:.1f} Hz, odom {res['odom_hz_sent']:.1f} Hz; "
          f"windows of {res['seconds']:.0f} s (aggregator and bare subscriber measured in the same one)")
    print(f"CPU % of one core   aggregator loaded  {loaded:6.1f}")
    print(f"                    aggregator idle    {idle:6.1f}")
    print(f"                    bare subscriber    {bare:6.1f}")
    print(f"                    loaded - idle      {loaded - idle:6.1f}   (what the traffic costs the aggregator)")
    print(f"                    publisher          {res['cpu_publisher_pct']:6.1f}   (context)")
    ratio = loaded / bare if bare > 0 else float("inf")
    print(f"ratio aggregator / bare subscriber: {ratio:.2f}x")
    print(f"capture under traffic: pose {res['capture_availability']}, age "
          f"{'n/a' if age is None else f'{age:.1f}'} ms (max {MAX_CAPTURE_AGE_S * 1000:.0f}), call took "
          f"{res['capture_call_ms']:.1f} ms; holds message #{res['capture_msg_seq']}, "
          f"publisher at #{res['published_seq_around_capture'][0]} before the call, "
          f"#{res['published_seq_around_capture'][1]} after ({res['behind_msgs']} behind); "
          f"velocity {res['velocity_availability_under_load']}")
    print(f"after the publisher stopped: holds #{res['tail_capture_seq']} of {res['last_published_seq']} published "
          f"-> {'last message processed' if res['tail_complete'] else 'LAST MESSAGE MISSING'}")
    verdict = "PASS" if cpu_ok and kept_up else "FAIL"
    print()
    print(f"target: < {TARGET_CPU_PCT:.0f}% of one core at 200 Hz pose + 50 Hz odom, fresh capture (< "
          f"{MAX_CAPTURE_AGE_S * 1000:.0f} ms): CPU {loaded:.1f}% {'ok' if cpu_ok else 'over'}, "
          f"kept up {'yes' if kept_up else 'NO'} -> {verdict}")
    return {**res, "ratio_aggregator_to_bare": ratio, "kept_up": kept_up, "cpu_ok": cpu_ok, "verdict": verdict,
            "target_cpu_pct": TARGET_CPU_PCT, "max_capture_age_ms": MAX_CAPTURE_AGE_S * 1000.0}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each measurement window (default 10)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results to this JSON file")
    parser.add_argument("--strict", action="store_true", help="exit 1 on FAIL")
    args = parser.parse_args(argv)
    require_loopback()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    if not 1.0 <= args.seconds <= 30.0:
        parser.error("--seconds must be between 1 and 30 (three windows must fit the time budget)")
    print(f"aggregator load bench: ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}, "
          f"load avg {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="rh-bench-aggregator-") as tmp:
        out = report(run(args.seconds, Path(tmp)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.json}")
    return 1 if args.strict and out["verdict"] != "PASS" else 0


if __name__ == "__main__":
    sys.exit(main())
