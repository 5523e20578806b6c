"""The live Foxglove bridge, spoken to by a plain WebSocket client.

The client is ``websockets`` speaking Foxglove's WebSocket protocol by hand
(subprotocol ``foxglove.sdk.v1``: ``serverInfo`` and ``advertise`` as JSON
text, ``subscribe`` from the client, message data as binary frames: opcode 1,
subscription id u32, log time u64, payload), not the SDK talking to itself.
The journal is written by the real ``SqliteJournal`` while the bridge follows it.
"""
from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("foxglove")
websockets = pytest.importorskip("websockets")

from robot_harness.core.clock import IdGenerator, SystemClock  # noqa: E402
from robot_harness.core.errors import UsageError  # noqa: E402
from robot_harness.core.journal import JournalReadError, SqliteJournal  # noqa: E402
from robot_harness.core.records import (  # noqa: E402
    Availability,
    EventDraft,
    EventType,
    FieldMeta,
    Pose2D,
    WorldSnapshot,
)
from robot_harness.evidence import foxglove as fx  # noqa: E402
from robot_harness.operator import foxglove_bridge as fb  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"]
TIMEOUT = 5.0


@pytest.fixture
def journal(tmp_path):
    j = SqliteJournal(tmp_path / "journal.sqlite3", clock=SystemClock(), ids=IdGenerator(None))
    j.setup()
    yield j
    j.close()


def started(j: SqliteJournal, mission_id: str = "m-1") -> None:
    j.append([EventDraft(type=EventType.MISSION_STARTED, mission_id=mission_id, payload={
        "goal": "go to the spot", "config": {"frame_id": "map", "places": {"dock": {"x": 0.0, "y": 0.0},
                                                                           "spot": {"x": 2.0, "y": 1.0, "yaw": 0.5}}}})])


def snapshot_draft(x: float, mission_id: str = "m-1") -> EventDraft:
    now = time.time()
    s = WorldSnapshot(snapshot_id=f"s-{x}", mission_id=mission_id, captured_at=now, pose=Pose2D(x=x, y=1.0),
                      pose_meta=FieldMeta(availability=Availability.AVAILABLE, source_stamp=now - 0.01, age_s=0.01,
                                          max_age_s=0.5, source="/amcl_pose"))
    return EventDraft(type=EventType.WORLD_SNAPSHOT_CAPTURED, mission_id=mission_id, snapshot_id=s.snapshot_id,
                      payload={"reason": "before_model_turn", "snapshot": s.model_dump(mode="json")})


class Client:
    """The client side of the protocol: advertisements, subscriptions, decoded message frames."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.channels: dict[str, dict[str, Any]] = {}
        self.server_info: dict[str, Any] = {}
        self.subscriptions: dict[int, str] = {}
        self.messages: list[tuple[str, int, dict[str, Any]]] = []

    async def _next(self, deadline: float) -> None:
        frame = await asyncio.wait_for(self.ws.recv(), max(0.01, deadline - time.monotonic()))
        if isinstance(frame, str):
            doc = json.loads(frame)
            if doc["op"] == "serverInfo":
                self.server_info = doc
            elif doc["op"] == "advertise":
                self.channels.update({c["topic"]: c for c in doc["channels"]})
            return
        opcode, sub_id, log_time = struct.unpack_from("<BIQ", frame)
        assert opcode == 1, f"unexpected binary opcode {opcode}"
        self.messages.append((self.subscriptions[sub_id], log_time, json.loads(frame[13:])))

    async def until(self, predicate: Any, what: str) -> Any:
        deadline = time.monotonic() + TIMEOUT
        while True:
            found = predicate()
            if found:
                return found
            try:
                await self._next(deadline)
            except asyncio.TimeoutError:
                raise AssertionError(f"timed out waiting for {what}; got {[(t, m) for t, _, m in self.messages]}") from None

    async def subscribe(self, *topics: str) -> None:
        subs = []
        for topic in topics:
            sub_id = len(self.subscriptions) + 1
            self.subscriptions[sub_id] = topic
            subs.append({"id": sub_id, "channelId": self.channels[topic]["id"]})
        await self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))

    def on(self, topic: str, predicate: Any = lambda m: True) -> list[tuple[int, dict[str, Any]]]:
        return [(t, m) for top, t, m in self.messages if top == topic and predicate(m)]


def listening_address(port: int) -> str | None:
    """The local IPv4 address a LISTEN socket on ``port`` is bound to, from /proc/net/tcp."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        return None
    for line in table.read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            return socket.inet_ntoa(bytes.fromhex(addr)[::-1])
    return None


def test_the_bridge_advertises_its_channels_and_follows_the_journal(journal):
    started(journal)
    journal.append([snapshot_draft(0.5)])
    bridge = fb.serve(journal.path, port=0, poll_s=0.05)
    try:
        assert bridge.port > 0 and bridge.url == f"ws://127.0.0.1:{bridge.port}"
        bound = listening_address(bridge.port)
        assert bound in (None, "127.0.0.1"), f"the bridge listens on {bound}, not loopback"
        with pytest.raises(UsageError, match="cannot listen"):
            fb.serve(journal.path, port=bridge.port)  # the port is taken

        async def session() -> None:
            async with websockets.connect(bridge.url, subprotocols=SUBPROTOCOLS, open_timeout=TIMEOUT) as ws:
                assert ws.subprotocol == "foxglove.sdk.v1"
                c = Client(ws)
                await c.until(lambda: set(fx.LIVE_CHANNELS) <= set(c.channels), "every channel advertised")
                assert c.server_info["name"] == "robot_harness" and not c.server_info["capabilities"]
                for topic, schema in fx.LIVE_CHANNELS.items():
                    ch = c.channels[topic]
                    assert (ch["encoding"], ch["schemaEncoding"], ch["schemaName"]) == ("json", "jsonschema", schema["title"])
                    assert json.loads(ch["schema"]) == schema

                # Subscribing mid-mission brings the current state: the places, the pose, the recent lines.
                await c.subscribe(fx.LOG_TOPIC, fx.PLACES_TOPIC, fx.POSE_TOPIC, fx.ACTION_STATE_TOPIC)
                (_, places), = await c.until(lambda: c.on(fx.PLACES_TOPIC), "the places")
                assert places["frame_id"] == "map" and [p["position"]["x"] for p in places["poses"]] == [0.0, 2.0]
                await c.until(lambda: c.on(fx.POSE_TOPIC, lambda m: m["pose"]["position"]["x"] == 0.5), "the pose")
                await c.until(lambda: c.on(fx.LOG_TOPIC, lambda m: "MISSION_STARTED" in m["message"]), "the backlog")

                # Then it follows the journal as it is written.
                (rejected,) = journal.append([EventDraft(type=EventType.GATE_REJECTED, mission_id="m-1", payload={
                    "verdict_id": "v-1", "code": "stale_state", "message": "the state moved on"})])
                ((log_time, line),) = await c.until(lambda: c.on(fx.LOG_TOPIC, lambda m: "GATE_REJECTED" in m["message"]),
                                                    "the gate's refusal")
                assert line["level"] == 3 and line["name"] == "robot_harness.gate" and line["line"] == rejected.seq
                assert "the state moved on" in line["message"]
                assert log_time == round(rejected.stamp * 1e9)
                assert line["timestamp"] == dict(zip(("sec", "nsec"), fx.split_stamp(rejected.stamp)))

                journal.append([snapshot_draft(1.5)])
                await c.until(lambda: c.on(fx.POSE_TOPIC, lambda m: m["pose"]["position"]["x"] == 1.5), "the new pose")
                assert not c.on(fx.SNAPSHOTS_TOPIC), "nothing arrives on a channel nobody subscribed to"

        asyncio.run(session())
        assert bridge.last_seq == journal.last_seq() and bridge.errors == 0
    finally:
        bridge.stop()

    async def refused() -> None:  # the listener may still accept while it shuts down, but serves nothing
        with pytest.raises((OSError, websockets.exceptions.WebSocketException)):
            async with websockets.connect(bridge.url, subprotocols=SUBPROTOCOLS, open_timeout=1.0):
                pass

    asyncio.run(refused())


def test_a_bridge_for_one_mission_ignores_the_others(journal):
    started(journal, "m-1")
    bridge = fb.serve(journal.path, port=0, poll_s=0.05, mission_id="m-1")
    try:
        async def session() -> None:
            async with websockets.connect(bridge.url, subprotocols=SUBPROTOCOLS, open_timeout=TIMEOUT) as ws:
                c = Client(ws)
                await c.until(lambda: fx.LOG_TOPIC in c.channels, "the log channel")
                await c.subscribe(fx.LOG_TOPIC)
                journal.append([EventDraft(type=EventType.STOP_REQUESTED, mission_id="m-2", payload={"reason": "other"})])
                journal.append([EventDraft(type=EventType.STOP_REQUESTED, mission_id="m-1", payload={"reason": "mine"})])
                await c.until(lambda: c.on(fx.LOG_TOPIC, lambda m: "mine" in m["message"]), "this mission's stop")
                assert not c.on(fx.LOG_TOPIC, lambda m: "other" in m["message"])

        asyncio.run(session())
    finally:
        bridge.stop()


def test_the_follower_is_read_only_and_refuses_what_is_not_a_journal(journal, tmp_path):
    started(journal)
    follower = fb.JournalFollower(journal.path)
    try:
        events, last = follower.read(after_seq=0)
        assert [e.type for e in events] == [EventType.MISSION_STARTED] and last == 1
        assert follower.start_seq() == 0 and follower.start_seq("nope") == 1
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            follower._conn.execute("DELETE FROM events")
    finally:
        follower.close()
    with pytest.raises(UsageError):
        fb.serve(tmp_path / "missing.sqlite3", port=0)
    (tmp_path / "junk.sqlite3").write_bytes(b"not a database at all" * 100)
    with pytest.raises(JournalReadError):
        fb.serve(tmp_path / "junk.sqlite3", port=0)
    empty = tmp_path / "empty.sqlite3"
    empty.write_bytes(b"")  # SQLite reads an empty file as a database with no tables
    follower = fb.JournalFollower(empty)
    try:
        assert follower.read(after_seq=0) == ([], 0) and follower.start_seq() == 0
    finally:
        follower.close()


def test_main_prints_the_layout_and_maps_errors_to_exit_codes(tmp_path, capsys):
    assert fb.main(["--print-layout"]) == 0
    assert capsys.readouterr().out == (REPO / "config" / "foxglove_layout.json").read_text()
    assert fb.main(["--journal", str(tmp_path / "missing.sqlite3"), "--port", "0"]) == 2
    assert "no journal" in capsys.readouterr().err
    (tmp_path / "junk.sqlite3").write_bytes(b"garbage" * 200)
    assert fb.main(["--journal", str(tmp_path / "junk.sqlite3"), "--port", "0"]) == 5


def test_main_serves_until_interrupted(journal):
    started(journal)
    proc = subprocess.Popen([sys.executable, "-m", "robot_harness.operator.foxglove_bridge", "--journal",
                             str(journal.path), "--port", "0", "--poll", "0.05"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()
        assert first.startswith("Foxglove bridge on ws://127.0.0.1:"), first
        url = first.split()[3]

        async def connect() -> None:
            async with websockets.connect(url, subprotocols=SUBPROTOCOLS, open_timeout=TIMEOUT) as ws:
                c = Client(ws)
                await c.until(lambda: fx.LOG_TOPIC in c.channels, "the log channel")

        asyncio.run(connect())
        proc.send_signal(2)  # SIGINT
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
