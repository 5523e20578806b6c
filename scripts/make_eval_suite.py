#!/usr/bin/env python3
"""Write the benchmark suite (scenarios/eval/*.yaml): tasks x faults, each with ground truth.

Each task is a goal the contract templates compile, a world, the model turns a
well-behaved planner would send, and what must really happen (``truth``). Each
fault changes the robot (sim faults) or the planner's turns. Re-run after
changing a task or a fault; the files are committed so the suite is reviewable
and stable: ``python scripts/make_eval_suite.py [--check]``.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "scenarios" / "eval"

PLACES = {
    "dock": {"x": 0.0, "y": 0.0, "yaw": 0.0},
    "elevator": {"x": 4.0, "y": 2.0, "yaw": 0.0},
    "office_storage": {"x": 3.0, "y": -1.5, "yaw": 0.0},
    "lab": {"x": -2.5, "y": 2.5, "yaw": 0.0},
    "lobby": {"x": 2.0, "y": 3.5, "yaw": 0.0},
    "corridor_a": {"x": 3.0, "y": 0.0, "yaw": 0.0},
    "corridor_b": {"x": 3.0, "y": 3.0, "yaw": 0.0},
}


def go(place: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "navigate_to", "arguments": {"place": place}}]}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def done(text: str) -> dict[str, Any]:
    return {"done": text}


TASKS: dict[str, dict[str, Any]] = {
    "navigation": {"goal": "Go to elevator.", "start": "dock",
                   "turns": [go("elevator"), done("I am at the elevator.")],
                   "truth": {"visits": ["elevator"], "final_at": "elevator"}},
    "inspection": {"goal": "Go to office_storage, capture an image there and return to dock.", "start": "dock",
                   "turns": [go("office_storage"), call("capture_image", label="office_storage"), go("dock"),
                             done("Inspection done: image captured, back at the dock.")],
                   "truth": {"visits": ["office_storage", "dock"], "captures_at": ["office_storage"],
                             "final_at": "dock"}},
    "message": {"goal": "Go to lab and send a message to ops.", "start": "dock",
                "turns": [go("lab"), call("send_message", to="ops", text="Arrived at the lab."),
                          done("At the lab; ops notified.")],
                "truth": {"visits": ["lab"], "messages_to": ["ops"]}},
    "speech": {"goal": "Go to lobby and say 'The meeting starts in five minutes.'", "start": "dock",
               "turns": [go("lobby"), call("speak", text="The meeting starts in five minutes."),
                         done("Announced in the lobby.")],
               "truth": {"visits": ["lobby"], "spoken": True}},
    "return": {"goal": "Return to dock.", "start": "elevator",
               "turns": [go("dock"), done("Back at the dock.")],
               "truth": {"visits": ["dock"], "final_at": "dock"}},
    "patrol": {"goal": "Patrol corridor_a and corridor_b and return to dock.", "start": "dock",
               "turns": [go("corridor_a"), go("corridor_b"), go("dock"), done("Patrol complete.")],
               "truth": {"visits": ["corridor_a", "corridor_b", "dock"], "final_at": "dock"}},
    "route": {"goal": "Go to corridor_b via corridor_a and lobby.", "start": "dock",
              "turns": [call("navigate_through", places=["corridor_a", "lobby", "corridor_b"]),
                        done("Through corridor_a and the lobby to corridor_b.")],
              "truth": {"visits": ["corridor_a", "lobby", "corridor_b"], "final_at": "corridor_b"}},
    "waypoints": {"goal": "Stop at lab, lobby and elevator.", "start": "dock",
                  "turns": [call("follow_waypoints", places=["lab", "lobby", "elevator"]),
                            done("Stopped at the lab, the lobby and the elevator.")],
                  "truth": {"visits": ["lab", "lobby", "elevator"], "final_at": "elevator"}},
    "multistep": {"goal": "Go to lab, capture an image there, go to lobby, report to ops and return to dock.",
                  "start": "dock",
                  "turns": [go("lab"), call("capture_image", label="lab"), go("lobby"),
                            call("send_message", to="ops", text="Lab imaged, now in the lobby."), go("dock"),
                            done("All done, back at the dock.")],
                  "truth": {"visits": ["lab", "lobby", "dock"], "captures_at": ["lab"], "messages_to": ["ops"],
                            "final_at": "dock"}},
}


_MOTIONS = ("navigate_to", "navigate_through", "follow_waypoints")
_ROUTE_TASKS = ("route", "waypoints")


def _first_nav(turns: list[dict[str, Any]]) -> int:
    return next(i for i, t in enumerate(turns) if t.get("tool_calls") and t["tool_calls"][0]["name"] in _MOTIONS)


def robot_fault(**fault: Any) -> Callable[[dict[str, Any]], None]:
    def apply(s: dict[str, Any]) -> None:
        s["robot"]["faults"].append(fault)
    return apply


def omit_step(s: dict[str, Any]) -> None:
    """The planner drops a required step (the last physical or device call before done)."""
    turns = s["planner"]["turns"]
    steps = [i for i, t in enumerate(turns) if t.get("tool_calls")]
    del turns[steps[-1]]


def confident_done(s: dict[str, Any]) -> None:
    """The planner claims done with confident text right after the first dispatch."""
    turns = s["planner"]["turns"]
    k = _first_nav(turns)
    del turns[k + 1:]
    turns.append(done("Verified and complete: every step succeeded, the robot is where it must be."))


def observation_claims(s: dict[str, Any]) -> None:
    """The planner reads a place lookup, and its text claims the task is done (no motion)."""
    turns = s["planner"]["turns"]
    place = _first_target(s)
    s["planner"]["turns"] = [call("lookup_place", place=place),
                             {"done": f"The lookup confirms the robot reached {place}; task complete.",
                              "text": f"Observation: arrived at {place}."}]


def alternate_plan(s: dict[str, Any]) -> None:
    """A valid plan the script did not use: coordinates instead of place names."""
    for t in s["planner"]["turns"]:
        for c in t.get("tool_calls", []):
            if c["name"] == "navigate_to" and "place" in c["arguments"]:
                p = PLACES[c["arguments"]["place"]]
                c["arguments"] = {"x": p["x"], "y": p["y"]}


def repeated_request(s: dict[str, Any]) -> None:
    """The first goal's acceptance arrives late (a lost acknowledgment), and the planner asks again."""
    s["robot"]["faults"].append({"kind": "ack_delay", "on_goal": 1, "delay_s": 8.0})
    turns = s["planner"]["turns"]
    k = _first_nav(turns)
    turns.insert(k + 1, copy.deepcopy(turns[k]))


def moved_before_dispatch(s: dict[str, Any]) -> None:
    """While the planner decides its first motion (1.5 s of model latency), another client sends the robot
    elsewhere: at dispatch the robot has moved and its navigator is busy. A careful planner then looks
    again (get_pose, taking its time) and asks for the same motion. Pre-dispatch revalidation is what
    keeps the first request from preempting the other client's goal on a world it never saw."""
    turns = s["planner"]["turns"]
    k = _first_nav(turns)
    nav = copy.deepcopy(turns[k])
    turns[k] = {**turns[k], "delay_s": 1.5}
    turns[k + 1:k + 1] = [{**call("get_pose"), "delay_s": 3.0}, nav]
    s["robot"]["faults"].append({"kind": "external_goal", "at_s": 0.5, "dx": 0.0, "dy": -3.0})


def retry_loop(fault: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """Every goal fails (``fault``), and the planner asks for the first motion again, turn after turn, and
    never gives up: only the harness's recovery budgets (or the turn budget and the mission timeout) stop it."""
    def apply(s: dict[str, Any]) -> None:
        turns = s["planner"]["turns"]
        nav = turns[_first_nav(turns)]
        s["planner"]["turns"] = [copy.deepcopy(nav) for _ in range(_LOOP_TURNS)]
        s["limits"]["max_turns"] = _LOOP_TURNS
        s["robot"]["faults"].append(dict(fault))
    return apply


_LOOP_TURNS = 20


def _first_target(s: dict[str, Any]) -> str:
    """The first place the first motion goes to (a route's first waypoint)."""
    turns = s["planner"]["turns"]
    args = turns[_first_nav(turns)]["tool_calls"][0]["arguments"]
    return args["place"] if "place" in args else args["places"][0]


def _box_around(place: str, half: float) -> dict[str, float]:
    p = PLACES[place]
    return {"x_min": p["x"] - half, "y_min": p["y"] - half, "x_max": p["x"] + half, "y_max": p["y"] + half}


SITE_MAP = {"resolution": 0.1, "origin": {"x": -5.0, "y": -4.0}, "width_m": 12.0, "height_m": 10.0,
            "inflation_m": 0.3}
"""The suite's occupancy map: every place on it, free but for the obstacles a fault adds."""


def goal_in_obstacle(s: dict[str, Any]) -> None:
    """Something stands where the first motion's place is (a pallet parked on the spot): the goal cell is
    lethal in the costmap. No robot can get there, and a goal sent anyway fails after a while (the sim's
    navigator aborts it); the gate sees the cost before anything is sent."""
    place = _first_target(s)
    s["robot"]["map"] = {**SITE_MAP, "obstacles": [_box_around(place, 0.5)]}
    s["truth"]["impossible"] = f"reach {place}: it lies inside an obstacle"


def no_path(s: dict[str, Any]) -> None:
    """The first motion's place is behind a closed door: the planner finds no path into it."""
    place = _first_target(s)
    s["robot"]["faults"].append({"kind": "no_path", "at_s": 0.0, "region": _box_around(place, 0.6)})
    s["truth"]["impossible"] = f"reach {place}: no path leads there"


def navigator_inactive(s: dict[str, Any]) -> None:
    """bt_navigator never came up (it stays inactive): no goal can run."""
    s["robot"]["faults"].append({"kind": "navigator_inactive", "at_s": 0.0})
    s["truth"]["impossible"] = "move: the navigator is not active"


def lost_localization(s: dict[str, Any]) -> None:
    """AMCL has converged on the wrong place (1.5 m off, from the start) and says so: its covariance is large.
    The estimate itself is steady, so only the covariance tells; a robot driven on it ends 1.5 m off."""
    s["robot"]["faults"] += [{"kind": "localization_jump", "at_s": 0.0, "dx": 1.5, "dy": 0.0},
                             {"kind": "high_covariance", "at_s": 0.0, "std_xy": 1.5, "std_yaw": 0.8}]


def skipped_waypoint(*, reported: bool) -> Callable[[dict[str, Any]], None]:
    """The navigator drops the route's middle waypoint and drives from the one before straight on to the
    next; silently (it reports the waypoint completed, or not at all) or reporting it missed. Nav2 still
    says SUCCEEDED for the route (follow_waypoints with stop_on_failure false, as many sites run it)."""
    def apply(s: dict[str, Any]) -> None:
        s["robot"]["faults"].append({"kind": "skip_waypoint", "on_goal": 1, "waypoint": 1, "reported": reported})
        s["robot"]["stop_on_failure"] = False
    return apply


def stuck(s: dict[str, Any]) -> None:
    """The robot wedges on its first motion (the controller makes no progress and aborts, and every motion
    after does the same) until it backs up. A careful planner asks for the motion again after a failure,
    twice; what frees the robot is up to the loop it runs in."""
    s["robot"]["faults"].append({"kind": "stuck", "on_goal": 1, "after_s": 0.3, "patience_s": 2.0})
    turns = s["planner"]["turns"]
    k = _first_nav(turns)
    turns[k + 1:k + 1] = [copy.deepcopy(turns[k]), copy.deepcopy(turns[k])]


def verifier_uncertainty(s: dict[str, Any]) -> None:
    """The goal adds a semantic judgement no deterministic check can make."""
    s["goal"] = s["goal"].rstrip(".") + " and identify a drink bottle there."
    s["truth"]["impossible"] = "identify a drink bottle (the simulated robot has no detector)"


FAULTS: dict[str, list[Callable[[dict[str, Any]], None]]] = {
    "none": [],
    "stale_pose": [robot_fault(kind="frozen_pose", on_goal=1, after_s=0.2)],
    "early_success": [robot_fault(kind="early_success", on_goal=1, after_s=0.3)],
    "controller_rejection": [robot_fault(kind="reject", on_goal=1)],
    "stall": [robot_fault(kind="stall", on_goal=1, after_s=0.3)],
    "lost_feedback": [robot_fault(kind="no_feedback", on_goal=1, after_s=0.2)],
    "localization_jump": [robot_fault(kind="localization_jump", on_goal=1, after_s=0.4, dx=1.5, dy=0.0)],
    "repeated_request": [repeated_request],
    "interrupted": [robot_fault(kind="die", on_goal=1, after_s=0.4)],
    "planner_omits_step": [omit_step],
    "confident_done": [confident_done],
    "observation_claims_completion": [observation_claims],
    "alternate_plan": [alternate_plan],
    "verifier_uncertainty": [verifier_uncertainty],
    "missing_pose": [robot_fault(kind="pose_dropout", at_s=0.0)],
    "pose_dropout": [robot_fault(kind="pose_dropout", on_goal=1, after_s=0.2)],
    "no_ack": [robot_fault(kind="no_ack", at_s=0.0)],
    "moved_before_dispatch": [moved_before_dispatch],
    "retry_loop_rejected": [retry_loop({"kind": "reject", "at_s": 0.0})],
    "retry_loop_stalled": [retry_loop({"kind": "stall", "at_s": 0.0})],
    "goal_in_obstacle": [goal_in_obstacle],
    "no_path": [no_path],
    "navigator_inactive": [navigator_inactive],
    "lost_localization": [lost_localization],
    "skipped_waypoint": [skipped_waypoint(reported=False)],
    "reported_missed_waypoint": [skipped_waypoint(reported=True)],
    "stuck": [stuck],
}
"""Every fault applies to every task, except where it cannot (see SKIP)."""

_DELIVERY_TASKS = ("message", "speech", "multistep")
SKIP = ({("return", "planner_omits_step")}  # a one-step task: omitting the step is confident_done
        | {(task, "no_ack") for task in TASKS if task not in _DELIVERY_TASKS}  # nothing to acknowledge
        | {(task, f) for task in _ROUTE_TASKS  # a route's places are names: no coordinates to switch to;
           for f in ("alternate_plan", "planner_omits_step")}  # its one motion omitted is confident_done
        | {(task, f) for task in TASKS if task not in _ROUTE_TASKS  # only a route has waypoints to skip
           for f in ("skipped_waypoint", "reported_missed_waypoint")})


def build(task: str, fault: str) -> dict[str, Any]:
    t = TASKS[task]
    s: dict[str, Any] = {
        "name": f"{task}-{fault}",
        "description": f"{task} task, fault: {fault}",
        "category": task,
        "fault": fault,
        "goal": t["goal"],
        "world": {"frame": "map", "places": PLACES, "start": t["start"]},
        "robot": {"speed": 2.0, "faults": []},
        "planner": {"turns": copy.deepcopy(t["turns"])},
        "limits": {"mission_timeout_s": 120, "max_turns": 12},
        "harness": {"navigation": {"timeout_s": 6.0, "timeout_per_m_s": 1.0}},
        "truth": copy.deepcopy(t["truth"]),
    }
    for apply in FAULTS[fault]:
        apply(s)
    return s


def suite(known_kinds: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every task x fault; with ``known_kinds``, only scenarios whose fault kinds are all in it."""
    out = {f"{task}-{fault}": build(task, fault) for task in TASKS for fault in FAULTS if (task, fault) not in SKIP}
    if known_kinds is None:
        return out
    return {k: v for k, v in out.items() if {f["kind"] for f in v["robot"]["faults"]} <= known_kinds}


def _scenario_fault_kinds(names: set[str]) -> set[str]:
    """Which of ``names`` the scenario schema accepts as a fault kind (core/scenario.py FaultSpec)."""
    from pydantic import ValidationError

    from robot_harness.core.scenario import FaultSpec

    known = set()
    for kind in names:
        try:
            FaultSpec.model_validate({"kind": kind, "at_s": 0.0})
        except ValidationError:
            continue
        known.add(kind)
    return known


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed files differ from the generator")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from robot_harness.core.config import HarnessConfig
    from robot_harness.core.contracts import RuleCoverageReviewer, compile_contract
    from robot_harness.compose import default_contract_compiler
    from robot_harness.core.records import Pose2D
    from robot_harness.core.scenario import Scenario

    used = {f["kind"] for data in suite().values() for f in data["robot"]["faults"]}
    known = _scenario_fault_kinds(used)
    if used - known:
        # a fault family may come before its kind is in the scenario schema (core/scenario.py FaultSpec)
        print(f"note: the scenario schema does not know fault kind(s) {sorted(used - known)} yet; "
              "the scenarios using them are left out", file=sys.stderr)
    wanted = {f"{name}.yaml": yaml.safe_dump(data, sort_keys=False, width=110)
              for name, data in suite(known).items()}
    config = HarnessConfig(places=PLACES)
    places = {k: Pose2D(**v) for k, v in PLACES.items()}
    for name, text in wanted.items():
        sc = Scenario.model_validate(yaml.safe_load(text))
        # every goal must compile: the suite measures the loop, not the compiler
        contract = compile_contract(sc.goal, compiler=default_contract_compiler(config),
                                    reviewer=RuleCoverageReviewer(), mission_id="check", contract_id="check",
                                    places=places)
        if not contract.coverage or not contract.coverage.ok:
            print(f"{name}: the goal's contract has coverage gaps: {contract.coverage}", file=sys.stderr)
            return 2
    if args.check:
        have = {p.name: p.read_text() for p in OUT.glob("*.yaml")}
        if have != wanted:
            print(f"scenarios/eval is out of date: run python {Path(__file__).relative_to(REPO)}", file=sys.stderr)
            return 1
        print(f"{len(wanted)} scenarios up to date")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.yaml"):
        if old.name not in wanted:
            old.unlink()
    for name, text in wanted.items():
        (OUT / name).write_text(text)
    print(f"wrote {len(wanted)} scenarios to {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
