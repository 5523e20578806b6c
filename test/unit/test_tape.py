"""The decision tape: readings recorded in order come back in order; any other call is a
nondeterminism error naming both; values (models, tuples, enums, non-finite floats, errors)
survive the round trip."""
from __future__ import annotations

import json
import math

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.errors import BackendUnavailable, NondeterminismError, UsageError
from robot_harness.core.ports import BackendEvent, GoalAck
from robot_harness.core.records import MissionStatus, Pose2D
from robot_harness.core.tape import Tape, TapeEntry, TapePlayer, TapeRecorder, args_digest, decode, encode


class _Nav:
    name = "nav2"

    def __init__(self) -> None:
        self.sent: list[Pose2D] = []

    def send_goal(self, *, target: Pose2D, frame_id: str, timeout_s: float) -> GoalAck:
        self.sent.append(target)
        return GoalAck(accepted=True, goal_id="ab" * 16)

    def poll(self, timeout_s: float) -> list[BackendEvent]:
        return [BackendEvent(goal_id="ab" * 16, type="feedback", distance_remaining=math.inf, stamp=1.5)]

    def cancel(self, goal_id: str, *, timeout_s: float) -> bool:
        raise BackendUnavailable("navigator gone", service="navigate_to_pose")


def _persisted(tape: Tape) -> list[TapeEntry]:
    """Through JSON, as a tape is stored."""
    text = json.dumps([e.model_dump() for e in tape.entries], allow_nan=True)
    return [TapeEntry.model_validate(e) for e in json.loads(text)]


def _record() -> tuple[Tape, _Nav]:
    tape, nav = Tape(), _Nav()
    rec = TapeRecorder(tape)
    clock, ids, port = rec.clock(ManualClock(100.0)), rec.ids(IdGenerator(7)), rec.port(
        nav, "navigation", ("send_goal", "poll", "cancel", "lookup"), attrs=("name",))
    clock.now()
    ids.new("act")
    port.send_goal(target=Pose2D(x=1.0, y=2.0, yaw=0.5), frame_id="map", timeout_s=30.0)
    port.poll(0.1)
    with pytest.raises(BackendUnavailable):
        port.cancel("ab" * 16, timeout_s=1.0)
    clock.monotonic()
    return tape, nav


def test_a_replay_reads_back_what_was_recorded_in_order_errors_included():
    tape, nav = _record()
    assert [f"{e.source}.{e.call}" for e in tape.entries] == [
        "clock.now", "ids.new", "navigation.send_goal", "navigation.poll", "navigation.cancel", "clock.monotonic"]
    player = TapePlayer(_persisted(tape))
    clock, ids = player.clock(), player.ids()
    port = player.port("navigation", ("send_goal", "poll", "cancel"), attrs={"name": "nav2"})
    assert clock.now() == 100.0
    assert ids.new("act") == tape.entries[1].answer
    ack = port.send_goal(target=Pose2D(x=1.0, y=2.0, yaw=0.5), frame_id="map", timeout_s=30.0)
    assert ack == GoalAck(accepted=True, goal_id="ab" * 16) and port.name == "nav2"
    events = port.poll(0.1)
    assert isinstance(events, list) and math.isinf(events[0].distance_remaining)
    with pytest.raises(BackendUnavailable) as err:
        port.cancel("ab" * 16, timeout_s=1.0)
    assert err.value.details == {"service": "navigate_to_pose"} and err.value.message == "navigator gone"
    assert clock.monotonic() == 0.0
    assert player.remaining == [] and len(nav.sent) == 1, "the replay moved nothing"


def test_another_call_other_arguments_or_a_read_past_the_end_is_a_nondeterminism_error():
    tape, _ = _record()
    player = TapePlayer(_persisted(tape))
    with pytest.raises(NondeterminismError, match=r"reading #0: the replay read ids.new where the recording read clock.now"):
        player.ids().new("act")
    player.clock().now()
    with pytest.raises(NondeterminismError, match="other arguments") as err:
        player.ids().new("mission")
    assert err.value.details["field"] == "args"
    player.ids().new("act")
    port = player.port("navigation", ("send_goal",))
    with pytest.raises(NondeterminismError, match="other arguments"):
        port.send_goal(target=Pose2D(x=1.0, y=2.5, yaw=0.5), frame_id="map", timeout_s=30.0)
    short = TapePlayer(tape.entries[:1])
    short.clock().now()
    with pytest.raises(NondeterminismError, match="after the recording's last reading"):
        short.clock().now()


def test_the_codec_keeps_types_and_refuses_what_it_cannot_carry():
    value = {"status": MissionStatus.SUCCEEDED, "pose": Pose2D(x=math.inf, y=-0.0, yaw=1.0), "pair": (1, "a"),
             "$odd": [None, True, 2.5], "nan": math.nan}
    back = decode(json.loads(json.dumps(encode(value), allow_nan=True)))
    assert back["status"] is MissionStatus.SUCCEEDED and back["pose"].x == math.inf and back["pair"] == (1, "a")
    assert back["$odd"] == [None, True, 2.5] and math.isnan(back["nan"])
    with pytest.raises(UsageError, match="cannot tape a set"):
        encode({1, 2})
    with pytest.raises(UsageError, match="only robot_harness classes"):
        decode({"$model": "os.system", "data": {}})
    assert args_digest((1,), {"a": Pose2D(x=1, y=2, yaw=3)}) == args_digest((1,), {"a": Pose2D(x=1, y=2, yaw=3)})
    assert args_digest((lambda: 1,), {}) == args_digest((lambda: 2,), {}), "a callable is named by its type"


def test_a_taped_port_has_exactly_the_methods_the_port_has():
    from robot_harness.core.ports import InteractivePlanner

    class Planner:
        def next_turn(self, request):
            return None

    taped = TapeRecorder(Tape()).port(Planner(), "planner", ("next_turn", "wait_for_call"))
    assert hasattr(taped, "next_turn") and not hasattr(taped, "wait_for_call")
    assert not isinstance(taped, InteractivePlanner)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_a_tape_is_kept_beside_its_mission_once_and_read_back_exactly(kind, tmp_path, request):
    from robot_harness.core.errors import JournalWriteError
    from robot_harness.core.journal import MemoryJournal, SqliteJournal
    from robot_harness.core.journal_pg import PostgresJournal

    clock, ids = ManualClock(5.0), IdGenerator(1)
    journal = (SqliteJournal(tmp_path / "j.sqlite3", clock=clock, ids=ids) if kind == "sqlite"
               else PostgresJournal(request.getfixturevalue("pg_url"), clock=clock, ids=ids) if kind == "postgres"
               else MemoryJournal(clock=clock, ids=ids))
    journal.setup()
    tape, _ = _record()
    journal.put_tape("mission-1", tape)
    with pytest.raises(JournalWriteError, match="has a decision tape already"):
        journal.put_tape("mission-1", tape)
    with pytest.raises(UsageError):
        journal.put_tape("", tape)
    assert journal.get_tape("mission-2") is None
    back = journal.get_tape("mission-1")
    assert back is not None and back.entries == tape.entries and back.ports == tape.ports
    assert math.isinf(back.entries[3].answer[0]["data"]["distance_remaining"]), "a non-finite reading survives"
    player = TapePlayer(back.entries, back.ports)
    player.clock().now()
    player.ids().new("act")
    assert player.port("navigation").name == "nav2"
    journal.close()
