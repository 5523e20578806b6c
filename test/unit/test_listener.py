"""Journal listeners off the mission thread (nodes/listener.py): BackgroundListener and the fan-out."""
from __future__ import annotations

import json
import math
import random
import threading
import time

import pytest

pytest.importorskip("rclpy")

from robot_harness.core.clock import IdGenerator, ManualClock  # noqa: E402
from robot_harness.core.journal import MemoryJournal  # noqa: E402
from robot_harness.core.records import EventDraft, EventType, JournalEvent, Pose2D  # noqa: E402


# -- BackgroundListener (moved from core/journal.py; the three tests as they were) -----------------


def test_a_background_listener_keeps_commit_order_off_the_appending_thread():
    import threading
    import time as _time

    from robot_harness.nodes.listener import BackgroundListener

    j = MemoryJournal(clock=ManualClock(), ids=IdGenerator(seed=1))
    j.setup()
    seen: list[tuple[int, str]] = []
    gate = threading.Event()

    def slow(events):
        gate.wait(5.0)  # the appender must not wait for this
        seen.extend((e.seq, threading.current_thread().name) for e in events)

    listener = BackgroundListener(slow, name="bg-test")
    j.subscribe(listener)
    t0 = _time.monotonic()
    for i in range(5):
        j.append([EventDraft(type=EventType.MISSION_STARTED, mission_id=f"m{i}", payload={"goal": "g"})])
    assert _time.monotonic() - t0 < 1.0, "append waited for a background listener"
    assert not listener.flush(0.05), "nothing handled while the listener is held"
    gate.set()
    assert listener.flush(5.0)
    assert [s for s, _ in seen] == [1, 2, 3, 4, 5] and {n for _, n in seen} == {"bg-test"}
    assert listener.close(1.0)
    j.append([EventDraft(type=EventType.MISSION_STARTED, mission_id="late", payload={"goal": "g"})])
    assert len(seen) == 5, "a closed listener takes nothing more"


def test_a_background_listener_survives_a_raising_callback():
    from robot_harness.nodes.listener import BackgroundListener

    calls = []

    def flaky(events):
        calls.append(len(events))
        if len(calls) == 1:
            raise RuntimeError("boom")

    listener = BackgroundListener(flaky)
    listener([object()])
    listener([object(), object()])
    assert listener.close(2.0) and calls == [1, 2]


def test_a_background_listener_closed_without_flushing_drops_what_is_left():
    import threading

    from robot_harness.nodes.listener import BackgroundListener

    gate = threading.Event()
    handled = []

    def held(events):
        gate.wait(5.0)
        handled.append(events)

    listener = BackgroundListener(held)
    for i in range(3):
        listener([i])
    assert listener.close(0.05) is False
    gate.set()
    listener._thread.join(2.0)  # noqa: SLF001
    assert len(handled) <= 1, "only the batch already in hand may still be handled"


# -- JournalFanout --------------------------------------------------------------------------------


def _journal() -> MemoryJournal:
    j = MemoryJournal(clock=ManualClock(), ids=IdGenerator(seed=1))
    j.setup()
    return j


def _start(j: MemoryJournal, mission: str, **payload) -> list[JournalEvent]:
    return j.append([EventDraft(type=EventType.MISSION_STARTED, mission_id=mission, payload={"goal": "g", **payload})])


def test_the_fanout_converts_each_event_once_for_every_consumer(monkeypatch):
    from robot_harness.nodes import conversions as cv
    from robot_harness.nodes.listener import JournalFanout

    calls: list[int] = []
    real = cv.journal_event_to_msg

    def counting(event):
        calls.append(event.seq)
        return real(event)

    monkeypatch.setattr(cv, "journal_event_to_msg", counting)
    j = _journal()
    fanout = JournalFanout(name="fan-test")
    j.subscribe(fanout)
    got: dict[str, list[tuple[int, bytes, str]]] = {"events": [], "bag": []}
    fanout.attach(lambda batch: got["events"].extend((c.event.seq, c.cdr, threading.current_thread().name)
                                                     for c in batch), name="events")
    fanout.attach(lambda batch: got["bag"].extend((c.event.seq, c.cdr, threading.current_thread().name)
                                                  for c in batch), name="bag")
    for i in range(4):
        _start(j, f"m{i}")
    assert fanout.flush(5.0)
    assert calls == [1, 2, 3, 4], "one conversion per event, not one per consumer"
    assert got["events"] == got["bag"], "both consumers get the same messages, in commit order"
    assert [s for s, _, _ in got["events"]] == [1, 2, 3, 4]
    assert {n for _, _, n in got["events"]} == {"fan-test"}
    assert fanout.close(1.0)


def test_the_fanout_converts_nothing_for_a_consumer_that_does_not_ask(monkeypatch):
    from robot_harness.nodes import conversions as cv
    from robot_harness.nodes.listener import JournalFanout

    monkeypatch.setattr(cv, "journal_event_to_msg", lambda event: pytest.fail("converted for nobody"))
    j = _journal()
    fanout = JournalFanout()
    j.subscribe(fanout)
    seen: list[int] = []
    fanout.attach(lambda batch: seen.extend(c.event.seq for c in batch))
    _start(j, "m")
    _start(j, "n")
    assert fanout.flush(5.0) and seen == [1, 2]
    assert fanout.close(1.0)


def test_a_raising_consumer_does_not_stop_the_other():
    from robot_harness.nodes.listener import JournalFanout

    j = _journal()
    fanout = JournalFanout()
    j.subscribe(fanout)
    seen: list[int] = []

    def broken(batch):
        raise RuntimeError("the bag's disk is gone")

    bad = fanout.attach(broken, name="bag")
    fanout.attach(lambda batch: seen.extend(c.event.seq for c in batch), name="events")
    for i in range(3):
        _start(j, f"m{i}")
    assert fanout.flush(5.0)
    assert seen == [1, 2, 3] and bad.failures == 3
    assert fanout.close(1.0)


def test_a_tap_gets_exactly_the_batches_enqueued_while_attached():
    from robot_harness.nodes.listener import JournalFanout

    j = _journal()
    fanout = JournalFanout()
    j.subscribe(fanout)
    always: list[int] = []
    fanout.attach(lambda batch: always.extend(c.event.seq for c in batch))
    _start(j, "before")
    tapped: list[int] = []
    tap = fanout.attach(lambda batch: tapped.extend(c.event.seq for c in batch))
    _start(j, "during")
    j.append([EventDraft(type=EventType.MISSION_STARTED, mission_id="during2", payload={"goal": "g"}),
              EventDraft(type=EventType.MISSION_STARTED, mission_id="during3", payload={"goal": "g"})])
    assert tap.detach(5.0), "detach drains what was enqueued before it"
    assert tapped == [2, 3, 4]
    _start(j, "after")
    assert fanout.flush(5.0)
    assert tapped == [2, 3, 4] and always == [1, 2, 3, 4, 5]
    assert tap.detach(0.1), "detaching twice is harmless"
    assert fanout.close(1.0)


def test_the_append_does_not_wait_for_the_fanout_and_a_timed_out_detach_drops_the_rest():
    from robot_harness.nodes.listener import JournalFanout

    j = _journal()
    fanout = JournalFanout()
    j.subscribe(fanout)
    gate, in_hand = threading.Event(), threading.Event()
    held: list[int] = []

    def slow(batch):
        in_hand.set()
        gate.wait(5.0)
        held.extend(c.event.seq for c in batch)

    tap = fanout.attach(slow)
    t0 = time.monotonic()
    for i in range(5):
        _start(j, f"m{i}")
    assert time.monotonic() - t0 < 1.0, "append waited for the fan-out's consumers"
    assert in_hand.wait(5.0), "the fan-out never handed batch 1 over"
    assert not fanout.flush(0.05)
    assert tap.detach(0.05) is False
    gate.set()
    assert fanout.flush(5.0)
    assert held == [1], "only the batch in hand when the detach timed out"
    assert fanout.close(1.0)
    _start(j, "late")
    assert held == [1]


def test_the_fanout_keeps_the_journals_list_without_copying():
    from robot_harness.nodes.listener import JournalFanout

    fanout = JournalFanout()
    gate = threading.Event()
    got: list[list[object]] = []
    fanout.attach(lambda batch: (gate.wait(5.0), got.append([c.event for c in batch])))
    events = [object(), object()]
    fanout(events)
    assert fanout._queue[0] is events or not fanout._queue  # noqa: SLF001 - O(1): the list itself is queued
    gate.set()
    assert fanout.close(2.0) and got == [events]


# -- one conversion: the ~/events payload text and the bag's path ------------------------------------


def test_the_payload_json_is_what_pydantics_json_mode_gave():
    from robot_harness.nodes.conversions import journal_event_to_msg

    j = _journal()
    payloads = [{"goal": "café ☕", "n": 3, "x": 0.1 + 0.2, "big": 2 ** 70, "nested": {"l": [1, None, True, "s"]}},
                {}, {"e": 1e-7, "neg": -0.0, "u": "\u2028"}]
    for p in payloads:
        (ev,) = _start(j, "m", **p)
        expected = json.dumps(ev.model_dump(mode="json")["payload"], separators=(",", ":"), ensure_ascii=False)
        assert journal_event_to_msg(ev).payload_json == expected
    hand_made = JournalEvent(seq=9, event_id="e", type=EventType.MISSION_STARTED, stamp=1.0, mission_id="m",
                             payload={"t": (1, 2), "nan": float("nan")})
    expected = json.dumps(hand_made.model_dump(mode="json")["payload"], separators=(",", ":"), ensure_ascii=False)
    assert journal_event_to_msg(hand_made).payload_json == expected


def test_the_path_encoder_gives_the_message_derived_messages_builds():
    from nav_msgs.msg import Path
    from rclpy.serialization import deserialize_message, serialize_message

    from robot_harness.evidence import foxglove as fx
    from robot_harness.nodes.recorder import PathEncoder, derived_messages

    rng = random.Random(7)
    encoder = PathEncoder()
    poses: list[fx.StampedPose] = []
    for trial in range(200):
        poses.append(fx.StampedPose(
            stamp=rng.choice([0.0, -1.0, float("nan"), 5.9999999999, 1.7e9 + rng.random() * 1e5]),
            frame_id=rng.choice(["map", "ma", "m", "", "odom_frame", "mäp"]),
            pose=Pose2D(x=rng.uniform(-50, 50), y=rng.uniform(-50, 50), yaw=rng.uniform(-math.pi, math.pi))))
        if rng.random() < 0.2:
            poses = poses[-rng.randint(0, 40):]
        update = fx.PathUpdate(stamp=rng.random() * 2e9, frame_id=rng.choice(["map", "x", ""]), poses=tuple(poses))
        ((_topic, _type, msg),) = derived_messages(update)
        data = encoder.encode(update)
        assert len(data) == len(serialize_message(msg)), trial
        assert deserialize_message(data, Path) == msg, trial


def test_the_events_publisher_sends_the_shared_bytes_and_converts_nothing_for_nobody(monkeypatch):
    from robot_harness.nodes import conversions as cv
    from robot_harness.nodes.listener import ConvertedEvent, EventPublisher

    class FakePublisher:
        def __init__(self) -> None:
            self.subscribers = 0
            self.sent: list[bytes] = []

        def get_subscription_count(self) -> int:
            return self.subscribers

        def publish(self, data: bytes) -> None:
            self.sent.append(data)

    j = _journal()
    events = [ConvertedEvent(e) for e in _start(j, "m") + _start(j, "n")]
    pub = FakePublisher()
    consumer = EventPublisher(pub)
    real = cv.journal_event_to_msg
    monkeypatch.setattr(cv, "journal_event_to_msg", lambda event: pytest.fail("converted for nobody"))
    consumer(events)
    assert pub.sent == [] and consumer.published == 0
    monkeypatch.setattr(cv, "journal_event_to_msg", real)
    pub.subscribers = 1
    consumer(events)
    assert pub.sent == [e.cdr for e in events] and consumer.published == 2
    assert all(isinstance(b, bytes) and b for b in pub.sent)
