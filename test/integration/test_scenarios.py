"""Every shipped scenario with an ``expect:`` runs on the real graph (sim_robot,
aggregator, planner, verifier node, supervisor over loopback DDS) and ends the
way its author said: status, goal verdict, per-obligation verdicts, whether
the gate committed, whether the robot moved (from the simulator's own log,
which the harness never reads), whether a false robot-side claim really
reached the planner (``claim_shown_to_planner``). Then the mission's evidence
bag is opened with the ``mcap`` library and decoded with an independent
ros2msg decoder.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from robot_harness.core.scenario import load_scenario
from robot_harness.runner import run_scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p for p in (REPO / "scenarios").glob("*.yaml") if (yaml.safe_load(p.read_text()) or {}).get("expect"))


def _check(report: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    verdict = report.get("verdict") or {}
    steps = {s["obligation_id"]: s["verdict"] for s in verdict.get("steps", [])}
    if "status" in expect and report["status"] != expect["status"]:
        problems.append(f"status {report['status']} != {expect['status']}")
    if "goal_verdict" in expect and verdict.get("goal_verdict") != expect["goal_verdict"]:
        problems.append(f"goal verdict {verdict.get('goal_verdict')} != {expect['goal_verdict']}")
    if "missing" in expect and sorted(verdict.get("missing", [])) != sorted(expect["missing"]):
        problems.append(f"missing {verdict.get('missing')} != {expect['missing']}")
    for oid, want in (expect.get("steps") or {}).items():
        if steps.get(oid) != want:
            problems.append(f"{oid} {steps.get(oid)} != {want}")
    if "committed" in expect and bool(report.get("commit")) != expect["committed"]:
        problems.append(f"committed {bool(report.get('commit'))} != {expect['committed']}")
    if "claim_shown_to_planner" in expect:
        # The false claim must really have reached the planner through a tool result,
        # or the scenario would not test that the verifier ignores it.
        shown = [c["name"] for c in report.get("tool_calls", [])
                 if expect["claim_shown_to_planner"] in json.dumps(c.get("result") or {})]
        if not shown:
            problems.append(f"the claim {expect['claim_shown_to_planner']!r} was in no tool result")
    if "robot_moved" in expect:
        moved = any(e["event"] == "accepted" for e in (report.get("sim_truth") or {}).get("goal_log", []))
        if moved != expect["robot_moved"]:
            problems.append(f"robot moved {moved} != {expect['robot_moved']}")
    return problems


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_ends_as_expected(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    report = run_scenario(scenario, journal_path=tmp_path / "journal.sqlite3")
    problems = _check(report, scenario.expect)
    assert not problems, f"{path.name}: {problems}\nsummary: {report['summary']}"
    # Success only ever comes with a committed verdict naming its evidence.
    if report["status"] == "SUCCEEDED":
        commit, verdict = report["commit"], report["verdict"]
        assert commit["verdict_id"] == verdict["verdict_id"]
        assert verdict["verdict_id"] in report["evidence_ids"] and commit["commit_id"] in report["evidence_ids"]
        receipts = {r["receipt_id"] for r in report["receipts"]}
        for step in verdict["steps"]:
            assert any(e in receipts for e in step["evidence_ids"]), step
    else:
        assert report.get("commit") is None
    # Whatever the outcome, the contract was frozen before the planner's first turn.
    assert report["contract"] and report["contract"]["revision"] == 1


def test_the_demo_bag_opens_and_decodes_with_an_independent_decoder(tmp_path: Path) -> None:
    from mcap.reader import make_reader
    from mcap_ros2._dynamic import generate_dynamic
    from mcap_ros2.decoder import DecoderFactory

    report = run_scenario(load_scenario(REPO / "scenarios" / "demo.yaml"), journal_path=tmp_path / "journal.sqlite3")
    assert report["status"] == "SUCCEEDED", report["summary"]
    bag = Path(report["bag"]["path"])
    assert bag.is_file() and (bag.parent / "metadata.yaml").is_file()
    meta = yaml.safe_load((bag.parent / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == "mcap" and meta["relative_file_paths"] == [bag.name]

    decoded: dict[str, list[Any]] = defaultdict(list)
    with bag.open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        summary = reader.get_summary()
        assert summary is not None
        assert {s.encoding for s in summary.schemas.values()} == {"ros2msg"}
        assert {c.message_encoding for c in summary.channels.values()} == {"cdr"}
        channels = {c.topic: c for c in summary.channels.values()}
        for topic in ("/amcl_pose", "/odom", "/robot_harness/journal", "/robot_harness/snapshots", "/robot_harness/verdicts"):
            assert topic in channels, sorted(channels)
        plain = [t for t, c in channels.items() if "_FeedbackMessage" not in summary.schemas[c.schema_id].name]
        for _schema, channel, _message, msg in reader.iter_decoded_messages(topics=plain):
            decoded[channel.topic].append(msg)
        # mcap-ros2-support 0.6.0 refuses rosidl's "*_FeedbackMessage" type names;
        # decode the same schema text under a name it accepts.
        for topic, channel in channels.items():
            schema = summary.schemas[channel.schema_id]
            if "_FeedbackMessage" in schema.name:
                name = schema.name.replace("/action/", "/").replace("_", "")
                decode = generate_dynamic(name, schema.data.decode())[name]
                for _s, _c, message in reader.iter_messages(topics=[topic]):
                    decoded[topic].append(decode(message.data))
    assert sum(len(v) for v in decoded.values()) == report["bag"]["messages"]
    # The journal in the bag is the journal: every event of the mission, in order.
    journal_msgs = decoded["/robot_harness/journal"]
    types = [m.kind for m in journal_msgs]
    assert types[0] == "MISSION_STARTED" and "CONTRACT_FROZEN" in types and "COMMIT_RECORDED" in types
    seqs = [m.seq for m in journal_msgs]
    assert seqs == sorted(seqs)
    # The verdict in the bag is the verdict the report shows.
    verdicts = [json.loads(m.data) for m in decoded["/robot_harness/verdicts"]]
    assert verdicts[-1]["verdict_id"] == report["verdict"]["verdict_id"]
    # Receipts cite the bag: each bag ref resolves to a snapshot message at that log time.
    snapshot_times = set()
    with bag.open("rb") as f:
        for _s, channel, message in make_reader(f).iter_messages(topics=["/robot_harness/snapshots"]):
            snapshot_times.add(message.log_time)
    cited = [e for e in report["evidence_ids"] if e.startswith("bag:")]
    assert cited
    for ref in cited:
        assert ref.startswith(f"bag:{bag.name}/robot_harness/snapshots@"), ref
        assert int(ref.rsplit("@", 1)[1]) in snapshot_times
    poses = decoded["/amcl_pose"]
    assert poses and all(p.header.frame_id == "map" for p in poses)

    # Everything cited can be checked again; a changed artifact is caught.
    from robot_harness.core.clock import IdGenerator, SystemClock
    from robot_harness.core.journal import SqliteJournal
    from robot_harness.evidence.audit import audit_mission

    journal = SqliteJournal(tmp_path / "journal.sqlite3", clock=SystemClock(), ids=IdGenerator(None))
    try:
        events = journal.events(mission_id=report["mission_id"])
    finally:
        journal.close()
    audit = audit_mission(events, bag_dir=bag.parent.parent)
    assert audit.ok, audit.failures
    kinds = {c.kind for c in audit.checks}
    assert kinds == {"bag", "artifact", "journal"}, kinds
    artifact = next(c for c in audit.checks if c.kind == "artifact")
    image = Path(next(e for e in events if e.type.value == "RECEIPT_RECORDED"
                      and e.payload["receipt"]["skill"] == "capture_image").payload["receipt"]["result"]["content"]["artifact"]["uri"].removeprefix("file://"))
    image.write_bytes(image.read_bytes() + b"tampered")
    after = audit_mission(events, bag_dir=bag.parent.parent)
    assert [c.id for c in after.failures] == [artifact.id]
