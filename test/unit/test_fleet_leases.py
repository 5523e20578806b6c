"""Fleet leases: two robots' harnesses writing one journal database (two SQLite connections to one
file, and two PostgreSQL sessions on one database). A robot's own resources are its own; a site
resource is one lease for the fleet; fencing tokens only grow, and a write presenting a stale one is
refused, whoever wrote it."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.durable import SITE, LeaseConflict, LeaseState, StaleFence
from robot_harness.core.errors import StaleRevision, UsageError
from robot_harness.core.journal import Journal, SqliteJournal, open_journal
from robot_harness.core.reconcile import clear_resource
from robot_harness.core.records import EventDraft, EventType

E = EventType


def d(type_: EventType, mission: str, **kw) -> EventDraft:
    return EventDraft(type=type_, mission_id=mission, **kw)


def acquire(resource: str, owner: str, mission: str, *, site: bool = True, expires_at: float = 0.0) -> EventDraft:
    return d(E.LEASE_ACQUIRED, mission, payload={"resource": resource, "owner": owner, "expires_at": expires_at,
                                                  **({"scope": SITE} if site else {})})


def release(resource: str, owner: str, mission: str, *, token: int = 0, site: bool = True,
            why: str = "confirmed_terminal") -> EventDraft:
    return d(E.LEASE_RELEASED, mission, payload={"resource": resource, "owner": owner, "why": why,
                                                  **({"scope": SITE, "fence": token} if site else {})})


@pytest.fixture(params=["sqlite", "postgres"])
def fleet(request, tmp_path: Path):
    """robot1's and robot2's journals on one database, and a clock they share."""
    clock = ManualClock()
    if request.param == "sqlite":
        target: str = str(tmp_path / "fleet.db")
    else:
        target = request.getfixturevalue("pg_url")
    journals = [open_journal(target, clock=clock, ids=IdGenerator(seed=n), robot_id=name)
                for n, name in ((1, "robot1"), (2, "/robot2"))]
    yield (*journals, clock)
    for j in journals:
        j.close()


def test_each_event_carries_its_robot_and_reads_filter_by_robot(fleet):
    r1, r2, _ = fleet
    r1.append([d(E.MISSION_STARTED, "m-a", payload={"goal": "go to the lab"})])
    r2.append([d(E.MISSION_STARTED, "m-b", payload={"goal": "go to the dock"})])
    assert r2.robot_id == "robot2"  # a namespace's slashes are not part of the id
    assert [(e.mission_id, e.robot_id) for e in r1.events()] == [("m-a", "robot1"), ("m-b", "robot2")]
    assert [e.mission_id for e in r1.events(robot_id="robot2")] == ["m-b"]
    assert [(m["mission_id"], m["robot_id"]) for m in r2.missions(robot_id="/robot1/")] == [("m-a", "robot1")]
    assert [m["robot_id"] for m in r2.missions()] == ["robot1", "robot2"]
    assert r1.open_missions() == ["m-a"] and r2.open_missions() == ["m-b"]  # each reconciles only its own
    assert r1.open_missions(all_robots=True) == ["m-a", "m-b"]
    with pytest.raises(UsageError):
        r1.events(robot_id="robot 1")


def test_a_robots_own_resources_are_its_own_and_a_site_resource_is_the_fleets(fleet):
    r1, r2, _ = fleet
    r1.append([acquire("base", "act-1", "m-a", site=False), acquire("elevator_1", "act-1", "m-a")])
    r2.append([acquire("base", "act-2", "m-b", site=False)])  # robot2's base is not robot1's
    with pytest.raises(LeaseConflict) as err:
        r2.append([acquire("elevator_1", "act-2", "m-b")])
    assert err.value.lease.robot_id == "robot1" and err.value.lease.owner == "act-1"
    seen = r2.leases()
    assert seen["base"].robot_id == "robot2" and seen["elevator_1"].robot_id == "robot1"
    assert set(r1.all_leases()) == {"robot1/base", "robot2/base", "elevator_1"}
    assert r2.events(types=[E.LEASE_ACQUIRED], robot_id="robot2")[-1].payload["resource"] == "base"


def test_fencing_tokens_grow_and_a_stale_token_is_refused(fleet):
    r1, r2, _ = fleet
    r1.append([acquire("elevator_1", "act-1", "m-a")])
    t1 = r1.leases()["elevator_1"].fence
    assert t1 == r1.last_seq()  # the token is the acquisition's seq
    with pytest.raises(StaleFence):
        r1.append([release("elevator_1", "act-1", "m-a", token=t1 + 1)])
    with pytest.raises(StaleFence):  # a site lease is ended only by a writer presenting its token
        r1.append([release("elevator_1", "act-1", "m-a", token=0)])
    # handed over from one action of robot1 to its next, in one commit: a new, larger token
    r1.append([release("elevator_1", "act-1", "m-a", token=t1, why="handed_over"), acquire("elevator_1", "act-3", "m-a")])
    t3 = r1.leases()["elevator_1"].fence
    assert t3 > t1
    with pytest.raises(StaleFence):  # act-1's token is history: it acts on nothing any more
        r1.append([release("elevator_1", "act-1", "m-a", token=t1)])
    r1.append([release("elevator_1", "act-3", "m-a", token=t3)])
    r2.append([acquire("elevator_1", "act-2", "m-b")])
    assert r2.leases()["elevator_1"].fence > t3


def test_a_robot_resumed_after_losing_its_lease_cannot_act_on_it(fleet):
    """robot1 pauses holding the elevator past expiry; an operator clears it (journaled, who and why);
    robot2 takes it; robot1 wakes and presents its old token: refused, and robot2's lease stands."""
    r1, r2, clock = fleet
    r1.append([d(E.MISSION_STARTED, "m-a"), acquire("elevator_1", "act-1", "m-a", expires_at=clock.now() + 5)])
    old = r1.leases()["elevator_1"].fence
    with pytest.raises(UsageError):  # held by a live action: not an operator's to clear
        clear_resource(r2, resource="elevator_1", reason="stuck?", operator="ops", clock=clock)
    clock.advance(10)
    cleared = clear_resource(r2, resource="elevator_1", reason="robot1 frozen by the lift", operator="dana",
                             clock=clock)
    assert cleared.robot_id == "robot1"
    ev = r1.events(types=[E.LEASE_RELEASED])[-1]
    assert ev.payload["operator"] == "dana" and ev.payload["why"] == "operator_cleared" and ev.robot_id == "robot2"
    r2.append([acquire("elevator_1", "act-2", "m-b")])
    for stale in ([release("elevator_1", "act-1", "m-a", token=old, why="handed_over"), acquire("elevator_1", "act-9", "m-a")],
                  [release("elevator_1", "act-1", "m-a", token=old)]):
        with pytest.raises((StaleFence, StaleRevision)):
            r1.append(stale)
    held = r1.leases()["elevator_1"]
    assert (held.robot_id, held.owner, held.state) == ("robot2", "act-2", LeaseState.HELD)


def test_racing_robots_never_both_hold_a_site_resource(fleet):
    r1, r2, _ = fleet
    wins: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def take(j: Journal, n: int) -> None:
        barrier.wait()
        for k in range(30):
            try:
                j.append([acquire("dock_2", f"{j.robot_id}-{k}", f"m-{n}")])
            except LeaseConflict:
                continue
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return
            wins.append(j.robot_id)
            token = j.leases()["dock_2"].fence
            j.append([release("dock_2", f"{j.robot_id}-{k}", f"m-{n}", token=token)])

    threads = [threading.Thread(target=take, args=(j, n)) for n, j in enumerate((r1, r2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # replay the journal: at no seq do two owners hold dock_2
    holder = None
    for ev in r1.events(types=[E.LEASE_ACQUIRED, E.LEASE_RELEASED]):
        if ev.type is E.LEASE_ACQUIRED:
            assert holder is None, f"double holder at seq {ev.seq}"
            holder = ev.payload["owner"]
        else:
            assert holder == ev.payload["owner"]
            holder = None
    assert len(wins) >= 2 and not r1.leases()


def test_a_robot_id_that_is_not_a_namespace_is_refused(tmp_path: Path):
    with pytest.raises(UsageError):
        SqliteJournal(tmp_path / "j.db", clock=ManualClock(), ids=IdGenerator(seed=1), robot_id="robot-1")


def test_a_decision_replay_runs_as_the_robot_that_ran_the_mission(tmp_path: Path):
    """The replay journal holds the recorded database as it was (another robot's leases its own) and stamps
    the replayed events with the mission's robot, so a fleet's mission compares event for event."""
    from robot_harness.core.decisions import ReplayJournal

    clock = ManualClock()
    r1, r2 = (SqliteJournal(tmp_path / "f.db", clock=clock, ids=IdGenerator(seed=n), robot_id=f"robot{n}")
              for n in (1, 2))
    for j in (r1, r2):
        j.setup()
    r2.append([d(E.MISSION_STARTED, "m-b"), acquire("base", "act-b", "m-b", site=False), acquire("elevator_1", "act-b", "m-b")])
    mission = r1.append([d(E.MISSION_STARTED, "m-a"), acquire("base", "act-a", "m-a", site=False)])
    before = r1.events()[: mission[0].seq - 1]
    replay = ReplayJournal(before, mission)
    assert replay.robot_id == "robot1"
    assert {k: lease.robot_id for k, lease in replay.all_leases().items()} == {"robot2/base": "robot2", "elevator_1": "robot2"}
    out = replay.append([d(E.MISSION_STARTED, "m-a"), acquire("base", "act-a", "m-a", site=False)])
    assert [(e.seq, e.event_id, e.robot_id) for e in out] == [(e.seq, e.event_id, e.robot_id) for e in mission]
    with pytest.raises(LeaseConflict):  # robot2 holds the elevator in the replay as it did then
        replay.append([acquire("elevator_1", "act-x", "m-a")])
    for j in (r1, r2):
        j.close()


def test_a_decision_replay_puts_back_what_other_robots_wrote_during_the_mission(tmp_path: Path):
    """In a fleet's database a mission's seqs have gaps (another robot's events in between): the replay
    puts those back at their recorded seqs, so the mission replays event for event, the other robot's
    lease in force where it was."""
    from robot_harness.core.decisions import ReplayJournal, first_divergence

    clock = ManualClock()
    r1, r2 = (SqliteJournal(tmp_path / "f.db", clock=clock, ids=IdGenerator(seed=n), robot_id=f"robot{n}")
              for n in (1, 2))
    r1.append([d(E.MISSION_STARTED, "m-a")])
    r2.append([d(E.MISSION_STARTED, "m-b"), acquire("elevator_1", "act-b", "m-b")])
    r1.append([d(E.MODEL_TURN_STARTED, "m-a")])
    r2.append([d(E.MISSION_REFUSED, "m-c", payload={"code": "busy", "reason": "busy"})])
    r1.append([d(E.MISSION_FINISHED, "m-a", payload={"status": "SUCCEEDED"})])
    events = r1.events()
    mission = [e for e in events if e.mission_id == "m-a"]
    others = [e for e in events if mission[0].seq < e.seq < mission[-1].seq and e.mission_id != "m-a"]
    replay = ReplayJournal([], mission, others)
    replay.append([ReplayJournal._draft(mission[0])])
    assert "elevator_1" not in replay.all_leases()
    for e in mission[1:]:
        replay.append([ReplayJournal._draft(e)])
    assert replay.all_leases()["elevator_1"].robot_id == "robot2"
    assert first_divergence(mission, replay.events(mission_id="m-a")) is None
    for j in (r1, r2):
        j.close()


def test_a_robot_under_a_new_namespace_is_refused_while_its_unnamed_past_is_open(tmp_path: Path):
    """A journal written before robot ids (or by the same robot started without its namespace) with an open
    mission and a blocked lease of its body: the robot now under `robot1` would never see them."""
    from robot_harness.nodes.supervisor import _refuse_unnamed_leftovers

    old = SqliteJournal(tmp_path / "j.db", clock=ManualClock(), ids=IdGenerator(seed=1))
    old.setup()
    old.append([d(E.MISSION_STARTED, "m-old"), acquire("base", "act-old", "m-old", site=False)])
    _refuse_unnamed_leftovers(old, "")  # the same unnamed robot: it reconciles them itself
    with pytest.raises(UsageError, match="m-old") as err:
        _refuse_unnamed_leftovers(old, "robot1")
    assert err.value.details["leases"] == ["base"]
    old.append([release("base", "act-old", "m-old", site=False), d(E.MISSION_FINISHED, "m-old",
                                                                    payload={"status": "UNKNOWN"})])
    _refuse_unnamed_leftovers(old, "robot1")  # settled: nothing left behind
    old.close()


@pytest.mark.parametrize("url, shown", [
    ("postgresql://harness:Zm9v/YmFy+cXV4@db.example:5432/fleet", "postgresql://harness:***@db.example:5432/fleet"),
    ("postgresql://u:se:cr@et@127.0.0.1:5/db?sslpassword=x&PASSWORD=y&host=a",
     "postgresql://u:***@127.0.0.1:5/db?sslpassword=***&PASSWORD=***&host=a"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("postgresql://h/db?user=a&password=b", "postgresql://h/db?user=a&password=***"),
])
def test_a_database_urls_password_is_masked_whole_whatever_it_holds(url: str, shown: str):
    from robot_harness.core.journal import redact_url

    assert redact_url(url) == shown


def test_a_password_with_an_unescaped_slash_is_refused_before_any_connection():
    """libpq would read another host and database from it, and the password would be printed as a path."""
    with pytest.raises(UsageError, match="percent-encode") as err:
        open_journal("postgresql://harness:Zm9v/YmFy@db.example:5432/fleet", clock=ManualClock(),
                     ids=IdGenerator(seed=1), robot_id="robot1")
    assert "Zm9v" not in str(err.value) and "YmFy" not in str(err.value)
