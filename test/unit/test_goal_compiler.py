"""The goal compiler: verb classes, bindings, sequencing, refusals, the gold set, and the LLM compiler's post-validation."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from robot_harness.core.completion import EvidenceKind, ObligationKind
from robot_harness.core.contracts import (
    ContractError,
    FakeContractLLM,
    LLMContractCompiler,
    RuleCoverageReviewer,
    compile_contract,
)
from robot_harness.core.errors import UsageError
from robot_harness.core.goals import DEFAULT_LEXICON, GoalCompiler, Lexicon, load_lexicon
from robot_harness.core.goals.gold import load_gold, load_map, score
from robot_harness.core.goals.lexicon import inflections

REPO = Path(__file__).resolve().parents[2]
GOLD = REPO / "test" / "contracts_gold"
MAP = load_map(GOLD / "_map.yaml")
K = ObligationKind


@pytest.fixture(scope="module")
def gc() -> GoalCompiler:
    return GoalCompiler(load_lexicon(DEFAULT_LEXICON), aliases=MAP.aliases)


def comp(gc: GoalCompiler, goal: str):
    return gc.compile(goal, mission_id="m", contract_id="c", places=MAP.places)


def steps(contract):
    return [(o.kind, o.params) for o in contract.obligations]


def deps(contract):
    return [o.depends_on for o in contract.obligations]


def refusal(gc: GoalCompiler, goal: str) -> ContractError:
    with pytest.raises(ContractError) as err:
        comp(gc, goal)
    return err.value


# --------------------------------------------------------------------------- the lexicon


def test_the_shipped_lexicon_loads_and_every_class_has_verbs():
    lex = Lexicon.default()
    assert lex.base_place == "dock" and lex.default_recipient == "operator"
    for cls in ("navigate", "return_", "image", "inspect", "speak", "message", "report", "route", "semantic",
                "unsupported"):
        assert len(getattr(lex.verbs, cls)) >= 3, cls


def test_a_bad_lexicon_is_a_usage_error(tmp_path):
    bad = tmp_path / "lex.yaml"
    bad.write_text("verbs: {navigate: []}\n")
    with pytest.raises(UsageError):
        load_lexicon(bad)
    with pytest.raises(UsageError):
        load_lexicon(tmp_path / "missing.yaml")


def test_a_site_lexicon_changes_what_words_mean_without_code(tmp_path):
    import yaml

    raw = yaml.safe_load(DEFAULT_LEXICON.read_text())
    raw["verbs"]["navigate"] = [*raw["verbs"]["navigate"], "scoot over to"]
    raw["base_place"] = "charging_bay"
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(raw))
    site = GoalCompiler(load_lexicon(path), aliases=MAP.aliases)
    assert steps(comp(site, "Scoot over to the lab, then return to base.")) == [
        (K.AT_PLACE, {"place": "lab", "final": False}), (K.AT_PLACE, {"place": "charging_bay", "final": True})]


@pytest.mark.parametrize("word, form", [("go", "going"), ("go", "went"), ("drive", "driving"), ("stop", "stopping"),
                                        ("visit", "visiting"), ("patrol", "patrolling"), ("notify", "notifies"),
                                        ("take", "took"), ("head", "heads"), ("swing", "swung")])
def test_single_word_verbs_match_their_inflections(word, form):
    assert form in inflections(word)


# --------------------------------------------------------------------------- verb classes


@pytest.mark.parametrize("goal", [
    "Go to the lab.", "Head over to the lab.", "Drive to the lab.", "Travel to the lab.", "Move to the lab.",
    "Walk to the lab.", "Proceed to the lab.", "Make your way to the lab.", "Swing by the lab.", "Stop by the lab.",
    "Visit the lab.", "Get to the lab.", "Would you mind going over to the lab?", "Navigate to the lab",
    "Head on over to the laboratory, please.", "GO TO THE LAB", "Could you please drive over to the lab? Thanks!",
])
def test_navigate_verbs(gc, goal):
    assert steps(comp(gc, goal)) == [(K.AT_PLACE, {"place": "lab", "final": True})]


@pytest.mark.parametrize("goal, place", [
    ("Go to the lab and return.", "start"), ("Go to the lab and come back.", "start"),
    ("Go to the lab, then head back.", "start"), ("Go to the lab and go back to the kitchen.", "kitchen"),
    ("Go to the lab, then back to base.", "dock"), ("Go to the lab and come back here.", "start"),
    ("Go to the lab and return to where you started.", "start"), ("Go to the lab and return home.", "dock"),
])
def test_return_verbs(gc, goal, place):
    c = comp(gc, goal)
    assert steps(c) == [(K.AT_PLACE, {"place": "lab", "final": False}), (K.AT_PLACE, {"place": place, "final": True})]
    assert deps(c) == [(), ("o1",)]


@pytest.mark.parametrize("goal", ["Go to the lab and take a picture.", "Go to the lab and take a photo there.",
                                  "Go to the lab and snap a photo.", "Go to the lab and capture an image.",
                                  "Go to the lab and photograph it.", "Inspect the lab.",
                                  "Take a snapshot of the lab.", "Head to the lab and take a quick photo."])
def test_image_verbs_bind_the_place(gc, goal):
    assert steps(comp(gc, goal)) == [(K.AT_PLACE, {"place": "lab", "final": True}), (K.IMAGE_CAPTURED, {"place": "lab"})]


@pytest.mark.parametrize("goal, count", [("Take two photos of the lab.", 2), ("Go to the lab and snap 3 pictures.", 3),
                                         ("Go to the lab and take a couple of shots.", 2),
                                         ("Go to the lab and take some pictures.", 2), ("Photograph the lab.", None)])
def test_how_many_images_is_bound(gc, goal, count):
    image = comp(gc, goal).obligations[-1]
    assert image.kind is K.IMAGE_CAPTURED and image.params.get("count") == count


def test_an_image_with_no_place_anywhere_binds_none(gc):
    assert steps(comp(gc, "Take a picture.")) == [(K.IMAGE_CAPTURED, {})]


@pytest.mark.parametrize("goal, text", [
    ("Go to the lobby and say 'hello' there.", "hello"), ('Go to the lobby and say "hello" there.', "hello"),
    ("Go to the lobby and say ‘hello, world’ there.", "hello, world"), ("Go to the lobby and say “don't run”.",
                                                                        "don't run"),
    ("Go to the lobby and announce 'we're closing'.", "we're closing"), ("Go to the lobby and say hello there.", "hello"),
    ("Go to the lobby and announce that the lab is closed.", "the lab is closed"),
    ("Go to the lobby and announce: 'Closing now.'", "Closing now."),
])
def test_speech_binds_the_text_verbatim_and_the_place(gc, goal, text):
    c = comp(gc, goal)
    assert steps(c) == [(K.AT_PLACE, {"place": "lobby", "final": True}), (K.SPOKEN, {"text": text, "place": "lobby"})]
    assert deps(c) == [(), ("o1",)]


def test_speech_at_a_place_the_robot_is_not_at_goes_there_first(gc):
    assert steps(comp(gc, "Say 'good night' at the front desk.")) == [
        (K.AT_PLACE, {"place": "reception", "final": True}), (K.SPOKEN, {"text": "good night", "place": "reception"})]


@pytest.mark.parametrize("goal, to, text, eligible", [
    ("Tell maria 'lunch is ready'.", "maria", "lunch is ready", ()),
    ("Send a message to Bob saying the door is open.", "bob", "the door is open", ()),
    ("Let the security team know that the lobby is clear.", "security_team", "the lobby is clear", ()),
    ("Email ops.", "ops", None, ()), ("Text me.", "operator", None, ()), ("Message the supervisor.", "supervisor", None, ()),
    ("Notify me.", "operator", None, ("send_message", "speak")), ("Let me know.", "operator", None, ("send_message", "speak")),
    ("Report.", "operator", None, ("send_message", "speak")), ("Report to maria.", "maria", None, ()),
    ("Tell me that the tour is over.", "operator", "the tour is over", ("send_message", "speak")),
    ("Give me an update.", "operator", None, ("send_message", "speak")),
])
def test_message_and_report_verbs_bind_recipient_text_and_who_may_satisfy_them(gc, goal, to, text, eligible):
    (o,) = comp(gc, goal).obligations
    assert o.kind is K.MESSAGE_DELIVERED and o.params.get("to") == to and o.params.get("text") == text
    assert o.eligible == eligible
    assert (EvidenceKind.SPEECH_RECEIPT in o.evidence) == ("speak" in eligible)
    assert "place" not in o.params


@pytest.mark.parametrize("goal, start, waypoints", [
    ("Make a round trip to the workshop and back.", "start", ["workshop"]),
    ("Go to the workshop and back.", "start", ["workshop"]), ("Patrol the lab, the kitchen and the lobby.", "start",
                                                               ["lab", "kitchen", "lobby"]),
    ("Patrol the lab and the kitchen and return to base.", "dock", ["lab", "kitchen"]),
    ("Do a lap of the hallway.", "start", ["hallway"]), ("Go around and come back.", "start", []),
    ("Starting at the lobby, patrol reception and the lift.", "lobby", ["reception", "elevator"]),
    ("Patrol the route kitchen -> lab -> dock.", "start", ["kitchen", "lab", "dock"]),
])
def test_closed_routes(gc, goal, start, waypoints):
    (o,) = comp(gc, goal).obligations
    assert o.kind is K.ROUTE_CLOSED and o.params == {"start": start, "waypoints": waypoints, "min_departure_m": 1.0}


def test_an_image_sent_on_travels_with_the_message_and_what_it_shows_is_judged(gc):
    c = comp(gc, "Take a picture of the door in the kitchen and email it to ops.")
    assert steps(c) == [(K.AT_PLACE, {"place": "kitchen", "final": True}), (K.IMAGE_CAPTURED, {"place": "kitchen"}),
                        (K.SEMANTIC, {"question": "the image shows the door", "place": "kitchen"}),
                        (K.MESSAGE_DELIVERED, {"to": "ops", "attachments": ["o2"]})]
    assert c.obligations[-1].eligible == ()  # a speech cannot carry an image
    assert refusal(gc, "Send it to me.").details["reason"] == "not_understood"


def test_the_same_words_at_each_place_of_a_list(gc):
    assert steps(comp(gc, "Announce 'closing' in the lobby and the cafeteria.")) == [
        (K.AT_PLACE, {"place": "lobby", "final": False}), (K.SPOKEN, {"text": "closing", "place": "lobby"}),
        (K.AT_PLACE, {"place": "cafeteria", "final": True}), (K.SPOKEN, {"text": "closing", "place": "cafeteria"})]


@pytest.mark.parametrize("goal", ["1) go to the lab 2) take a photo 3) come back",
                                  "- go to the lab\n- take a photo\n- come back", "go to the lab pls, take a photo, come back thx"])
def test_lists_and_chat_style(gc, goal):
    assert steps(comp(gc, goal.replace("\\n", "\n"))) == [
        (K.AT_PLACE, {"place": "lab", "final": False}), (K.IMAGE_CAPTURED, {"place": "lab"}),
        (K.AT_PLACE, {"place": "start", "final": True})]


def test_semantic_questions_bind_where_the_robot_is(gc):
    c = comp(gc, "Go to the kitchen and check whether the fridge door is closed.")
    assert steps(c)[1] == (K.SEMANTIC, {"question": "check whether the fridge door is closed", "place": "kitchen"})


# --------------------------------------------------------------------------- places


@pytest.mark.parametrize("phrase", ["office_storage", "office storage", "Office Storage", "the office storage",
                                    "OFFICE_STORAGE"])
def test_places_ignore_case_articles_and_underscores(gc, phrase):
    assert steps(comp(gc, f"Go to {phrase}."))[0][1]["place"] == "office_storage"


@pytest.mark.parametrize("alias, place", [("the lift", "elevator"), ("the front desk", "reception"),
                                          ("the bay", "loading_bay"), ("the meeting room", "conference_room"),
                                          ("room 101", "room_101"), ("the kitchens", "kitchen")])
def test_aliases_from_the_map_and_plurals(gc, alias, place):
    assert steps(comp(gc, f"Go to {alias}."))[0][1]["place"] == place


def test_there_and_it_are_the_last_place_named(gc):
    assert steps(comp(gc, "Go to the lab, then go to the kitchen and take a photo of it.")) == [
        (K.AT_PLACE, {"place": "lab", "final": False}), (K.AT_PLACE, {"place": "kitchen", "final": True}),
        (K.IMAGE_CAPTURED, {"place": "kitchen"})]


# --------------------------------------------------------------------------- sequencing


@pytest.mark.parametrize("goal", [
    "Go to the lab, then the kitchen.", "Go to the lab and then the kitchen.", "Go to the lab. After that, the kitchen.",
    "Go to the lab; next, go to the kitchen.", "First go to the lab, then the kitchen.",
    "Go to the lab and finally the kitchen.", "Go to the lab before going to the kitchen.",
    "Go to the kitchen after the lab.", "After the lab, go to the kitchen.", "Before the kitchen, go to the lab.",
    "Go to the kitchen after you've visited the lab.", "Visit the lab, the kitchen.",
])
def test_order_follows_the_goal(gc, goal):
    c = comp(gc, goal)
    assert steps(c) == [(K.AT_PLACE, {"place": "lab", "final": False}), (K.AT_PLACE, {"place": "kitchen", "final": True})]
    assert deps(c) == [(), ("o1",)]


def test_in_any_order_leaves_the_list_unordered_and_what_follows_after_all_of_it(gc):
    c = comp(gc, "Visit the lab and the kitchen in any order, then come back.")
    assert deps(c) == [(), (), ("o1", "o2")]


def test_politeness_and_occasions_are_not_clauses(gc):
    polite = comp(gc, "Hey robot, could you please go to the workshop for me when you get a chance and let me know "
                      "when you get there? Thanks!")
    assert steps(polite) == [(K.AT_PLACE, {"place": "workshop", "final": True}), (K.MESSAGE_DELIVERED, {"to": "operator"})]
    assert deps(polite) == [(), ("o1",)]


def test_only_the_last_place_is_final_and_not_before_a_route(gc):
    c = comp(gc, "Go to the lab, take a photo, then patrol the kitchen and the lobby.")
    assert [o.params.get("final") for o in c.obligations] == [False, None, None]
    d = comp(gc, "Drive to the storeroom, then to the workshop, then come back to base.")
    assert [o.params["final"] for o in d.obligations] == [False, False, True]
    assert [o.max_age_s for o in d.obligations] == [None, None, 2.0]


def test_compiling_is_deterministic(gc):
    goal = "Please head to the loading bay, take a photo, then tell maria 'all clear'."
    assert comp(gc, goal).digest == comp(GoalCompiler(aliases=MAP.aliases), goal).digest


# --------------------------------------------------------------------------- waypoints


def places_visited(contract):
    """The at_place obligations' places, and that they form one chain with only the last one final."""
    ats = [o for o in contract.obligations if o.kind is K.AT_PLACE]
    for k, o in enumerate(ats):
        assert o.params["final"] is (k == len(ats) - 1), (o.id, o.params)
        assert o.depends_on == ((ats[k - 1].id,) if k else ()), (o.id, o.depends_on)
    return [o.params["place"] for o in ats]


@pytest.mark.parametrize("goal", [
    # via before the destination
    "Go via the lab and the kitchen to the lobby.", "Drive via the lab, the kitchen to the lobby.",
    "Navigate via the lab and then the kitchen to the lobby.", "Go by way of the lab and the kitchen to the lobby.",
    "Please head via the laboratory and the kitchenette over to the entrance hall, thanks.",
    # via after the destination: the via points are visited first
    "Go to the lobby via the lab and the kitchen.", "Go to the lobby, via the lab and the kitchen.",
    "Go to the lobby by way of the lab and the kitchen.", "Navigate to the lobby through the lab and the kitchen.",
    "Drive to the lobby via the lab via the kitchen.", "Walk to the lobby going via the lab and the kitchen.",
    "Drive to the lobby, stopping at the lab and the kitchen.", "Go to the lobby with stops at the lab and the kitchen.",
    "Head to the lobby, passing the lab and the kitchen.", "Go to the lobby passing through the lab and the kitchen.",
    # through / past
    "Go through the lab and the kitchen to the lobby.", "Drive through the lab, then the kitchen, to the lobby.",
    "Go past the lab and the kitchen to the lobby.",
    # passing on the way
    "Pass the lab and the kitchen on the way to the lobby.", "Pass by the lab and the kitchen on your way to the lobby.",
    "Pass by the lab, then the kitchen, en route to the lobby.", "Stop at the lab and the kitchen on the way to the lobby.",
    "Go to the lobby and stop at the lab and the kitchen on the way.",
    "Go to the lobby, but pass the lab and the kitchen on the way.",
    "On your way to the lobby, stop at the lab and the kitchen.", "Go to the lobby. On the way, stop at the lab and the kitchen.",
    "On your way to the lobby stop at the lab and the kitchen.", "Go to the lobby via the lab plus the kitchen.",
    # stops and visits in order
    "Stop at the lab, the kitchen and the lobby.", "Make stops at the lab, the kitchen and the lobby.",
    "Stop off at the lab, then the kitchen, then the lobby.", "Visit the lab, the kitchen and the lobby in order.",
    "Visit the lab, the kitchen and the lobby, in that order.", "Go to the lab, the kitchen and the lobby one after another.",
    "Visit the following places in order: the lab, the kitchen, the lobby.",
    "Make a stop at the lab, then at the kitchen, and finally go to the lobby.",
    "Go from the lab to the lobby via the kitchen.",
])
def test_waypoints_are_visited_in_order_and_only_the_destination_is_final(gc, goal):
    c = comp(gc, goal)
    assert [o.kind for o in c.obligations] == [K.AT_PLACE] * 3
    assert places_visited(c) == ["lab", "kitchen", "lobby"]
    assert [o.params["final"] for o in c.obligations] == [False, False, True]
    assert deps(c) == [(), ("o1",), ("o2",)]


@pytest.mark.parametrize("goal, places", [
    ("Go to the conference room via the server room, the mail room and the hallway.",
     ["server_room", "mail_room", "hallway", "conference_room"]),
    ("Go to the charging bay via the car park and the main entrance.", ["parking_lot", "front_door", "charging_bay"]),
    ("Get to the front desk by way of the lift.", ["elevator", "reception"]),
    ("Go to the lobby via the lab, then the kitchen.", ["lab", "lobby", "kitchen"]),  # "then": a new destination
    ("Drive to the lobby via the lab, and then to the kitchen via the hallway.", ["lab", "lobby", "hallway", "kitchen"]),
    ("Go via the lab to the lobby and the kitchen.", ["lab", "lobby", "kitchen"]),
    ("Go via the lab, then return to base.", ["lab", "dock"]),  # the next motion is the destination
    ("Come back via the kitchen.", ["kitchen", "start"]), ("Return to base via the lobby.", ["lobby", "dock"]),
    ("Go to the lobby but first stop at the lab.", ["lab", "lobby"]),
    ("Go through the hallway.", ["hallway"]), ("Go through the hallway and the lab.", ["hallway", "lab"]),
])
def test_waypoints_with_multi_word_names_aliases_and_other_orders(gc, goal, places):
    assert places_visited(comp(gc, goal)) == places


@pytest.mark.parametrize("goal, after", [
    ("Go to the lobby via the lab and the kitchen, then take a picture.",
     [(K.IMAGE_CAPTURED, {"place": "lobby"})]),
    ("Go via the lab and the kitchen to the lobby and report to ops.", [(K.MESSAGE_DELIVERED, {"to": "ops"})]),
    ("Go to the lobby via the lab and the kitchen and say 'hello' there.",
     [(K.SPOKEN, {"text": "hello", "place": "lobby"})]),
    ("Pass the lab and the kitchen on the way to the lobby, then email security 'arrived'.",
     [(K.MESSAGE_DELIVERED, {"to": "security", "text": "arrived"})]),
])
def test_a_route_with_waypoints_followed_by_other_steps(gc, goal, after):
    c = comp(gc, goal)
    assert steps(c) == [(K.AT_PLACE, {"place": "lab", "final": False}), (K.AT_PLACE, {"place": "kitchen", "final": False}),
                        (K.AT_PLACE, {"place": "lobby", "final": True}), *after]
    assert deps(c) == [(), ("o1",), ("o2",), ("o3",)]


def test_waypoints_in_any_order_all_come_before_the_destination(gc):
    c = comp(gc, "Go to the lobby via the lab and the kitchen in any order.")
    assert steps(c) == [(K.AT_PLACE, {"place": "lab", "final": False}), (K.AT_PLACE, {"place": "kitchen", "final": False}),
                        (K.AT_PLACE, {"place": "lobby", "final": True})]
    assert deps(c) == [(), (), ("o1", "o2")]


@pytest.mark.parametrize("goal, waypoints", [
    ("Go to the lobby via the lab and back.", ["lab", "lobby"]),
    ("Go via the workshop and the storeroom and back.", ["workshop", "storeroom"]),
    ("Do a loop via the kitchen and the hallway.", ["kitchen", "hallway"]),
    ("Do a circuit through the hallway, the mail room and the kitchen.", ["hallway", "mail_room", "kitchen"]),
    ("Patrol through the lobby and the front door.", ["lobby", "front_door"]),
])
def test_closed_routes_with_via_and_through_stay_closed_routes(gc, goal, waypoints):
    (o,) = comp(gc, goal).obligations
    assert o.kind is K.ROUTE_CLOSED and o.params == {"start": "start", "waypoints": waypoints, "min_departure_m": 1.0}


@pytest.mark.parametrize("goal, phrase, nearest", [
    ("Go to the lobby via the lab and the kitchn.", "kitchn", "kitchen"),
    ("Go via the labb to the lobby.", "labb", "lab"), ("Go to the lobby via the elevater.", "elevater", "elevator"),
    ("Stop at the lab, the recepton and the lobby.", "recepton", "reception"),
    ("Pass the lab on the way to the lobbby.", "lobbby", "lobby"),
])
def test_an_unknown_waypoint_is_refused_by_name_with_the_nearest_place(gc, goal, phrase, nearest):
    err = refusal(gc, goal)
    assert err.details["reason"] == "unknown_place" and err.details["phrase"] == phrase
    assert nearest in err.details["nearest"] and f"did you mean {nearest}" in err.message


@pytest.mark.parametrize("goal", ["Go via the lab.", "Go via the lab and report.", "Go past the lab.",
                                  "Pass by the kitchen and take a photo.", "Pass the lab and the kitchen on the way.",
                                  "Go to the lobby and stop at the lab on the way back.", "On your way to the lobby.",
                                  "Head to the lab via."])
def test_a_via_list_with_no_destination_is_refused_not_guessed(gc, goal):
    err = refusal(gc, goal)
    assert err.details["reason"] == "not_understood"
    assert err.details["nearest"] == []  # no "did you mean" for a place that was understood


def test_a_site_lexicon_may_set_the_waypoint_words(tmp_path):
    import yaml

    raw = yaml.safe_load(DEFAULT_LEXICON.read_text())
    raw["via_words"] = ["via", "by way of", "over"]
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(raw))
    site = GoalCompiler(load_lexicon(path), aliases=MAP.aliases)
    assert places_visited(comp(site, "Go to the lobby over the lab.")) == ["lab", "lobby"]
    assert Lexicon.default().via_words[:2] == ("via", "by way of")  # the shipped defaults when the file has none


def test_the_review_needs_every_waypoint_covered():
    from robot_harness.core.completion import Obligation

    reviewer = RuleCoverageReviewer(aliases=MAP.aliases)
    full = [ob("o1", "at_place", place="lab", final=False), ob("o2", "at_place", place="lobby", final=True)]
    goal = "Go to the lobby via the lab."
    assert reviewer.review(goal, [Obligation.model_validate(o) for o in full]).ok
    dropped = reviewer.review(goal, [Obligation.model_validate(full[1])])
    assert not dropped.ok and dropped.uncovered == ("via the lab",)
    no_destination = reviewer.review("Go via the lab and the kitchen to the lobby.",
                                     [Obligation.model_validate(full[0])])
    assert not no_destination.ok and "to the lobby" in no_destination.uncovered


# --------------------------------------------------------------------------- refusals


def test_an_unknown_place_is_refused_with_the_nearest_places(gc):
    err = refusal(gc, "Go to the lobbby and report.")
    assert err.details["reason"] == "unknown_place" and err.details["phrase"] == "lobbby"
    assert err.details["nearest"][0] == "lobby" and "did you mean lobby" in err.message
    assert "lobby" in err.details["known_places"]


@pytest.mark.parametrize("goal, verb", [("Pick up the bottle and go to the kitchen.", "pick up"),
                                        ("Go to the kitchen and open the door.", "open"),
                                        ("Bring me a coffee.", "bring"), ("Deliver the package to bob.", "deliver")])
def test_an_unsupported_action_refuses_the_whole_goal(gc, goal, verb):
    err = refusal(gc, goal)
    assert err.details["reason"] == "unsupported_action"
    assert verb in err.message and "navigate" in err.details["supported_verbs"]


@pytest.mark.parametrize("goal", ["asdf qwer", "The lobby is nice.", "", "Go to the lab and zorp the kitchen.",
                                  "Go to the lab quickly by the window."])
def test_what_is_not_understood_is_refused_never_dropped(gc, goal):
    err = refusal(gc, goal)
    assert err.details["reason"] == "not_understood"
    assert set(err.details["supported_verbs"]) >= {"navigate", "speak", "message", "report", "route"}


def test_return_to_base_without_a_base_on_the_map_is_an_unknown_place():
    from robot_harness.core.records import Pose2D

    with pytest.raises(ContractError) as exc:
        GoalCompiler().compile("Go to the lab and return to base.", mission_id="m", contract_id="c",
                               places={"lab": Pose2D(x=1.0, y=0.0)})
    assert exc.value.details["reason"] == "unknown_place" and "'dock'" in exc.value.message


# --------------------------------------------------------------------------- the gold set


def test_every_gold_goal_compiles_to_its_gold_contract(gc):
    cases = load_gold(GOLD)
    assert len(cases) >= 300
    result = score(lambda g: comp(gc, g), cases, clock=time.perf_counter)
    bad = [(o.case.goal, o.result, o.detail) for o in result.outcomes if o.result not in ("exact", "right_refusal")]
    assert result.count("under_bound") == 0 and result.count("missed_refusal") == 0, bad
    assert result.exact_rate >= 0.95, bad[:10]
    refusals = {o.case.refuse for o in result.outcomes if o.result == "right_refusal"}
    assert refusals <= {"unknown_place", "unsupported_action", "not_understood"}


def test_every_compiled_gold_contract_passes_the_coverage_review(gc):
    reviewer = RuleCoverageReviewer(aliases=MAP.aliases)
    for case in load_gold(GOLD):
        if case.refuse:
            continue
        c = compile_contract(case.goal, compiler=gc, reviewer=reviewer, mission_id="m", contract_id="c",
                             places=MAP.places)
        assert c.coverage is not None and c.coverage.ok, (case.goal, c.coverage)


# --------------------------------------------------------------------------- the coverage review


def ob(oid, kind, **params):
    ev = {"at_place": ["navigation_receipt"], "spoken": ["speech_receipt"], "message_delivered": ["delivery_receipt"],
          "image_captured": ["image_artifact"]}[kind]
    return {"id": oid, "kind": kind, "description": "-", "params": params, "evidence": ev,
            "source": "the whole goal, whatever it says"}


@pytest.mark.parametrize("goal, obligations, uncovered", [
    # a dropped clause
    ("Go to the lab and take a photo there.", [ob("o1", "at_place", place="lab", final=True)], "take a photo there"),
    # two steps merged into one
    ("Go to the lab, then go to the kitchen.", [ob("o1", "at_place", place="kitchen", final=True)], "Go to the lab"),
    # the wrong recipient
    ("Tell maria.", [ob("o1", "message_delivered", to="bob")], "Tell maria"),
    # an image at another place
    ("Take a photo of the lab.", [ob("o1", "image_captured", place="kitchen")], "Take a photo of the lab"),
    # an unsupported action is never covered
    ("Go to the lab and open the door.", [ob("o1", "at_place", place="lab", final=True)], "open the door"),
])
def test_the_review_reads_the_goal_not_the_sources(goal, obligations, uncovered):
    from robot_harness.core.completion import Obligation

    report = RuleCoverageReviewer(aliases=MAP.aliases).review(goal, [Obligation.model_validate(o) for o in obligations])
    assert not report.ok and uncovered in report.uncovered, report


def test_the_review_knows_the_maps_aliases():
    from robot_harness.core.completion import Obligation

    lift = [Obligation.model_validate(ob("o1", "at_place", place="elevator", final=True))]
    assert RuleCoverageReviewer(aliases=MAP.aliases).review("Take the lift? No: go to the lift.", lift).ok
    assert not RuleCoverageReviewer().review("Go to the lift.", lift).ok  # without the map it cannot tell


# --------------------------------------------------------------------------- the LLM compiler under the same rules


GOAL = "Go to the lobby and say 'hello' there, then come back and report."


def llm(reply_obligations):
    return LLMContractCompiler(FakeContractLLM([json.dumps({"obligations": reply_obligations})]),
                               reference=GoalCompiler(aliases=MAP.aliases),
                               reviewer=RuleCoverageReviewer(aliases=MAP.aliases))


def good_reply(gc):
    return [o.model_dump(mode="json") for o in comp(gc, GOAL).obligations]


def test_a_faithful_model_contract_is_used_as_it_is(gc):
    c = llm(good_reply(gc)).compile(GOAL, mission_id="m", contract_id="c", places=MAP.places)
    assert c.compiler == "llm" and c.coverage is None and steps(c) == steps(comp(gc, GOAL))


@pytest.mark.parametrize("weakness", ["drops_a_clause", "forgets_the_text", "forgets_there", "merges_two_steps",
                                      "drops_the_order", "widens_eligibility", "drops_final"])
def test_an_under_bound_model_contract_is_repaired_never_used(gc, weakness):
    reply = good_reply(gc)
    if weakness == "drops_a_clause":
        reply = [o for o in reply if o["kind"] != "spoken"]
        for o in reply:
            o["depends_on"] = [d for d in o["depends_on"] if d != "o2"]
    elif weakness == "forgets_the_text":
        reply[1]["params"].pop("text")
    elif weakness == "forgets_there":
        reply[1]["params"].pop("place")
    elif weakness == "merges_two_steps":
        reply = [reply[0] | {"params": {"place": "start", "final": True}}, *reply[3:]]
        reply[1]["depends_on"] = ["o1"]
        reply[1]["id"] = "o2"
    elif weakness == "drops_the_order":
        for o in reply:
            o["depends_on"] = []
    elif weakness == "widens_eligibility":
        reply[-1]["kind"] = "spoken"
        reply[-1]["params"] = {}
        reply[-1]["evidence"] = ["speech_receipt"]
        reply[-1].pop("eligible", None)
        reply[2]["params"]["final"] = True
    elif weakness == "drops_final":
        reply[2]["params"]["final"] = False
    c = llm(reply).compile(GOAL, mission_id="m", contract_id="c", places=MAP.places)
    assert steps(c) == steps(comp(gc, GOAL)) and deps(c) == deps(comp(gc, GOAL)), weakness
    assert c.coverage is not None and "repaired" in c.coverage.notes


def test_a_model_that_invents_a_place_is_refused(gc):
    reply = good_reply(gc)
    reply[0]["params"]["place"] = "atrium"
    with pytest.raises(ContractError, match="atrium"):
        llm(reply).compile(GOAL, mission_id="m", contract_id="c", places=MAP.places)


def test_when_the_rules_refuse_the_model_must_still_bind_the_quotes_and_pass_the_review(gc):
    goal = "Go to the lobby, say 'hello' and wave."  # "wave" is not in the lexicon: the rules refuse
    with pytest.raises(ContractError):
        comp(gc, goal)
    forgot = [ob("o1", "at_place", place="lobby", final=True), ob("o2", "spoken", place="lobby") | {"depends_on": ["o1"]}]
    with pytest.raises(ContractError) as err:
        llm(forgot).compile(goal, mission_id="m", contract_id="c", places=MAP.places)
    assert err.value.details["reason"] == "under_bound" and "hello" in err.value.message


@pytest.mark.parametrize("goal", ["Don't go to the lab.", "Never go to the lab.", "Go to the kitchen twice.",
                                  "If the door is open, report to me.", "Go to the kitchen in 5 minutes."])
def test_a_model_contract_for_a_goal_the_rules_refuse_with_a_negation_condition_count_or_time_is_refused(gc, goal):
    with pytest.raises(ContractError):
        comp(gc, goal)
    naive = [ob("o1", "at_place", place="kitchen" if "kitchen" in goal else "lab", final=True)]
    with pytest.raises(ContractError) as err:
        llm(naive).compile(goal, mission_id="m", contract_id="c", places=MAP.places)
    assert err.value.details["reason"] in ("under_bound", "unsupported_action", "not_understood")


def test_a_model_contract_never_makes_an_unknown_place_or_an_unsupported_action_acceptable(gc):
    for goal in ("Go to the gym.", "Go to the lab and pick up the box."):
        with pytest.raises(ContractError):
            llm([ob("o1", "at_place", place="lab", final=True)]).compile(goal, mission_id="m", contract_id="c",
                                                                         places=MAP.places)


@pytest.mark.parametrize("goal, expected", [
    ("Tell Bob the lab is closed.", [(K.MESSAGE_DELIVERED, {"to": "bob", "text": "the lab is closed"})]),
    ("Tell Bob that the meeting is at 3, not 4.", [(K.MESSAGE_DELIVERED, {"to": "bob",
                                                                          "text": "the meeting is at 3, not 4"})]),
    ("Tell the team that the lab is closed and the kitchen is open.",
     [(K.MESSAGE_DELIVERED, {"to": "team", "text": "the lab is closed and the kitchen is open"})]),
    ("Let Bob know we need to go to the lab.", [(K.MESSAGE_DELIVERED, {"to": "bob", "text": "we need to go to the lab"})]),
    ("Announce that the power is out.", [(K.SPOKEN, {"text": "the power is out"})]),
    ("Tell Maria and John that the lab is closed.", [(K.MESSAGE_DELIVERED, {"to": "maria", "text": "the lab is closed"}),
                                                     (K.MESSAGE_DELIVERED, {"to": "john", "text": "the lab is closed"})]),
    ("Message me once you reach the lab.", [(K.AT_PLACE, {"place": "lab", "final": True}),
                                            (K.MESSAGE_DELIVERED, {"to": "operator"})]),
    ("Tell me whether the door is open.", [(K.SEMANTIC, {"question": "whether the door is open"}),
                                           (K.MESSAGE_DELIVERED, {"to": "operator"})]),
    ("Find the keys in the kitchen.", [(K.AT_PLACE, {"place": "kitchen", "final": True}),
                                       (K.SEMANTIC, {"question": "Find the keys in the kitchen", "place": "kitchen"})]),
    ("From the lobby, go to the lab.", [(K.AT_PLACE, {"place": "lobby", "final": False}),
                                        (K.AT_PLACE, {"place": "lab", "final": True})]),
    ("Go to the lab last and the kitchen first.", [(K.AT_PLACE, {"place": "kitchen", "final": False}),
                                                   (K.AT_PLACE, {"place": "lab", "final": True})]),
    ("Go to the lab. Once back, report.", [(K.AT_PLACE, {"place": "lab", "final": False}),
                                           (K.AT_PLACE, {"place": "start", "final": True}),
                                           (K.MESSAGE_DELIVERED, {"to": "operator"})]),
    ("Go to the lab and back, then go to the kitchen.",
     [(K.ROUTE_CLOSED, {"start": "start", "waypoints": ["lab"], "min_departure_m": 1.0, "final": False}),
      (K.AT_PLACE, {"place": "kitchen", "final": True})]),
])
def test_what_follows_a_verb_is_bound_not_dropped(gc, goal, expected):
    assert steps(comp(gc, goal)) == expected


@pytest.mark.parametrize("goal", ["Text me twice.", "Message me in 5 minutes.", "Notify me only if the door is open.",
                                  "Tell Bob 'hi' in the lab.", "Do two laps of the lobby.", "Say ''.", "Say.",
                                  "Tell.", "Let me know when you reach the lab and the kitchen."])
def test_what_a_contract_cannot_hold_is_refused(gc, goal):
    assert refusal(gc, goal).details["reason"] == "not_understood"


def test_a_journal_written_before_the_goal_compiler_still_loads_its_config():
    from robot_harness.core.config import HarnessConfig

    old = HarnessConfig.model_validate({"contract": {"compiler": "template", "templates_file": ""}})
    assert old.contract.compiler == "template" and "templates_file" not in old.contract.model_dump()
