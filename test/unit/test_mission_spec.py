"""Structured missions: explicit contracts and mission templates, checked field by field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from robot_harness.core.completion import CompletionContract, ObligationKind
from robot_harness.core.config import HarnessConfig, load_harness_config
from robot_harness.core.contracts import ContractError, ScenarioContractCompiler, compile_contract
from robot_harness.core.errors import UsageError
from robot_harness.core.mission_spec import (
    MAX_CONTRACT_CHARS,
    MissionSpec,
    MissionSpecError,
    MissionTemplate,
    MissionTemplates,
    ParamType,
    StructuredContractCompiler,
    StructuredCoverageReviewer,
    load_mission_templates,
    mission_templates_path,
    parse_contract_text,
    read_contract_file,
    structured_compiler,
)
from robot_harness.core.records import Pose2D

REPO = Path(__file__).resolve().parents[2]
PACKAGED = REPO / "config" / "mission_templates.yaml"
PLACES = {n: Pose2D(x=float(i), y=0.0) for i, n in enumerate(("dock", "lab", "kitchen", "lobby"))}


def at(oid: str, place: str, final: bool = False, **extra) -> dict:
    return {"id": oid, "kind": "at_place", "description": f"at {place}", "params": {"place": place, "final": final},
            "evidence": ["navigation_receipt", "pose_observation"], **extra}


def template(name: str, **params: str) -> MissionSpec:
    return MissionSpec(template=name, template_params=tuple(params.items()))


def compiler(spec: MissionSpec) -> StructuredContractCompiler:
    return structured_compiler(spec, config=HarnessConfig())


def problems(spec: MissionSpec, places=PLACES) -> list[str]:
    c = compiler(spec)
    with pytest.raises(ContractError) as err:
        c.compile(c.description, mission_id="m-1", contract_id="c-1", places=places)
    assert err.value.message == "structured mission: " + "; ".join(err.value.details["problems"])
    return err.value.details["problems"]


def compiled(spec: MissionSpec, places=PLACES) -> CompletionContract:
    c = compiler(spec)
    return c.compile(c.description, mission_id="m-1", contract_id="c-1", places=places)


# --------------------------------------------------------------------------- the contract form


@pytest.mark.parametrize("text", [
    json.dumps([at("o1", "lab", True)]),
    yaml.safe_dump([at("o1", "lab", True)], sort_keys=False),
    json.dumps({"obligations": [at("o1", "lab", True)]}),
    yaml.safe_dump({"obligations": [at("o1", "lab", True)]}, sort_keys=False),
])
def test_a_contract_is_json_or_yaml_a_list_or_a_mapping_with_obligations(text):
    assert parse_contract_text(text) == [at("o1", "lab", True)]
    contract = compiled(MissionSpec(contract=text))
    assert contract.compiler == "structured:contract" and contract.goal == "contract: at_place(place=lab, final=true)"
    assert [o.params for o in contract.obligations] == [{"place": "lab", "final": True}]


@pytest.mark.parametrize("text, expected", [
    ("", ["contract: empty"]),
    ("   \n", ["contract: empty"]),
    ("[unclosed", ["contract: not YAML or JSON (line 1, column 10: expected ',' or ']', but got '<stream end>')"]),
    ("just words", ["contract: expected a list of obligations, or a mapping with an 'obligations' key; got a string"]),
    ("42", ["contract: expected a list of obligations, or a mapping with an 'obligations' key; got int"]),
    ("{goal: x}", ["contract.goal: unknown key (a contract mapping holds only 'obligations')",
                   "contract: a mapping needs an 'obligations' key"]),
    ("{obligations: {o1: x}}", ["contract.obligations: expected a list of obligations; got a mapping"]),
    ("[]", ["obligations: empty; a contract needs at least one obligation"]),
    ("[at_place, [1]]", ["obligations[0]: expected a mapping, got a string",
                         "obligations[1]: expected a mapping, got a list"]),
])
def test_a_contract_of_the_wrong_shape_is_refused_by_field(text, expected):
    with pytest.raises(MissionSpecError) as err:
        parse_contract_text(text)
    assert err.value.problems == expected and err.value.code == "invalid_mission_spec"
    assert isinstance(err.value, UsageError)
    assert problems(MissionSpec(contract=text or "   ", goal="g")) == (expected if text.strip() else
                                                                      ["goal, contract, template: no contract or "
                                                                       "template given (a goal alone is compiled "
                                                                       "from its words)"])


def test_a_contract_too_long_is_refused():
    with pytest.raises(MissionSpecError) as err:
        parse_contract_text("#" * (MAX_CONTRACT_CHARS + 1))
    assert err.value.problems == [f"contract: {MAX_CONTRACT_CHARS + 1} characters; the limit is {MAX_CONTRACT_CHARS}"]


def test_unknown_places_are_named_by_field_with_the_nearest_known_ones():
    route = {"id": "o3", "kind": "route_closed", "description": "r",
             "params": {"start": "dok", "waypoints": ["lab", "Kitchen", "moon"], "min_departure_m": 1.0},
             "evidence": ["navigation_receipt", "pose_observation", "trajectory"]}
    image = {"id": "o2", "kind": "image_captured", "description": "i", "params": {"place": "lab2"},
             "evidence": ["image_artifact"]}
    text = json.dumps([at("o1", "lobby"), image, route])
    assert problems(MissionSpec(contract=text)) == [
        "obligations[1].params.place: unknown place 'lab2' (did you mean lab?)",
        "obligations[2].params.start: unknown place 'dok' (did you mean dock?)",
        "obligations[2].params.waypoints[1]: unknown place 'Kitchen' (did you mean kitchen?)",
        "obligations[2].params.waypoints[2]: unknown place 'moon' (known: dock, kitchen, lab, lobby, start)",
    ]
    # without places (a contract file read before sending) only the schema is checked
    assert parse_contract_text(text) and compiler(MissionSpec(contract=text)).obligations() == json.loads(text)


def test_the_reserved_place_start_is_always_known():
    contract = compiled(MissionSpec(contract=json.dumps([at("o1", "lab"), at("o2", "start", True)])))
    assert [o.params["place"] for o in contract.obligations] == ["lab", "start"]


def test_schema_problems_come_from_the_scenario_compiler_as_field_paths():
    bad = [at("o1", "lab"), {"id": "o2", "kind": "spokn", "description": "s"},
           {**at("o3", "lab"), "evidence": ["navigation_receip"], "colour": "red"}]
    assert problems(MissionSpec(contract=json.dumps(bad))) == [
        "obligations[1].kind: Input should be 'at_place', 'image_captured', 'message_delivered', 'spoken', "
        "'route_closed' or 'semantic'",
        "obligations[2].evidence[0]: Input should be 'navigation_receipt', 'pose_observation', 'image_artifact', "
        "'delivery_receipt', 'speech_receipt', 'trajectory' or 'semantic_judgement'",
        "obligations[2].colour: Extra inputs are not permitted",
    ]
    assert problems(MissionSpec(contract=json.dumps([at("o1", "lab"), at("o1", "dock", True)]))) == [
        "obligations: duplicate obligation ids: ['o1', 'o1']"]
    assert problems(MissionSpec(contract=json.dumps([at("o1", "lab", depends_on=["o9"])]))) == [
        "obligations: obligation o1 depends on unknown ['o9']"]
    no_evidence = {**at("o1", "lab"), "evidence": []}
    assert problems(MissionSpec(contract=json.dumps([at("o0", "dock"), no_evidence]))) == [
        "obligations[1] (o1): no acceptable evidence kinds"]
    assert problems(MissionSpec(contract=json.dumps([at("o1", "lab", True), at("o2", "dock", True)]))) == [
        "obligations: only one at_place obligation may be final, got ['o1', 'o2']"]


def test_read_contract_file_checks_what_it_can_without_the_places(tmp_path):
    good = tmp_path / "c.yaml"
    good.write_text(yaml.safe_dump([at("o1", "anywhere", True)]))
    assert read_contract_file(good) == good.read_text()
    for name, content, expected in [
        ("missing.yaml", None, "no such file"),
        ("bad.yaml", "a: [", "contract: not YAML or JSON (line 1, column 5: expected the node content, but found "
                             "'<stream end>')"),
        ("shape.json", '"x"', "contract: expected a list of obligations, or a mapping with an 'obligations' key; "
                              "got a string"),
        ("kind.yaml", yaml.safe_dump([{**at("o1", "x"), "kind": "teleported"}]),
         "obligations[0].kind: Input should be"),
    ]:
        path = tmp_path / name
        if content is not None:
            path.write_text(content)
        with pytest.raises(MissionSpecError) as err:
            read_contract_file(path)
        assert err.value.message.startswith(f"contract file {path}: {expected}"), err.value.message
        assert err.value.details["path"] == str(path)


# --------------------------------------------------------------------------- the template form


def test_packaged_templates_load_and_are_found_by_default():
    templates = load_mission_templates(PACKAGED)
    assert {"inspect_and_return", "go_to", "deliver_message", "patrol"} <= set(templates.templates)
    assert templates.templates["inspect_and_return"].params["place"].type is ParamType.PLACE
    assert templates.templates["deliver_message"].params["to"].type is ParamType.RECIPIENT
    assert templates.templates["deliver_message"].params["text"].type is ParamType.TEXT
    assert templates.templates["patrol"].params["waypoints"].type is ParamType.PLACE_LIST
    assert mission_templates_path(HarnessConfig()) == PACKAGED
    custom = load_harness_config(overrides={"contract": {"mission_templates_file": "~/my_templates.yaml"}})
    assert mission_templates_path(custom) == Path("~/my_templates.yaml").expanduser()


def test_a_template_instantiates_to_a_contract_the_scenario_compiler_accepts():
    spec = template("inspect_and_return", place="lab")
    c = compiler(spec)
    assert c.name == "structured:template/inspect_and_return"
    assert c.description == "template inspect_and_return(place=lab, return_to=start)"
    obligations = c.obligations(PLACES)
    ScenarioContractCompiler(obligations)  # the same check a scenario's contract gets: raises if invalid
    contract = compile_contract(c.description, compiler=c, reviewer=StructuredCoverageReviewer(), mission_id="m-1",
                                contract_id="c-1", places=PLACES)
    assert contract.compiler == c.name and contract.goal == c.description
    assert [(o.kind, o.params) for o in contract.obligations] == [
        (ObligationKind.AT_PLACE, {"place": "lab", "final": False}),
        (ObligationKind.IMAGE_CAPTURED, {"place": "lab"}),
        (ObligationKind.AT_PLACE, {"place": "start", "final": True}),
    ]
    assert [o.depends_on for o in contract.obligations] == [(), ("o1",), ("o2",)]
    assert contract.obligations[1].description == "An image was captured at lab."
    assert contract.coverage is not None and contract.coverage.ok
    assert contract.coverage.notes == "structured contract: reviewed field by field"
    # a default can be overridden; the description says what was used
    back = compiler(template("inspect_and_return", return_to="dock", place="kitchen"))
    assert back.description == "template inspect_and_return(place=kitchen, return_to=dock)"
    assert back.obligations(PLACES)[2]["params"] == {"place": "dock", "final": True}


@pytest.mark.parametrize("spec, params", [
    (template("go_to", place="lobby"), [{"place": "lobby", "final": True}]),
    (template("patrol", waypoints="lab, kitchen"),
     [{"start": "start", "waypoints": ["lab", "kitchen"], "min_departure_m": 1.0}]),
    (template("deliver_message", to="security_team", text="  Door 3 is open.  "),
     [{"to": "security_team", "text": "Door 3 is open."}]),
])
def test_each_shipped_template_compiles(spec, params):
    contract = compiled(spec)
    assert [o.params for o in contract.obligations] == params


def test_placeholders_are_typed_spliced_and_escaped_but_values_are_never_reread():
    t = MissionTemplate.model_validate({
        "params": {"wps": {"type": "place_list"}, "words": {"type": "text"}},
        "obligations": [
            {"id": "o1", "kind": "route_closed", "description": "via {wps} ({{literal}})",
             "params": {"waypoints": "{wps}", "min_departure_m": 1.0},
             "evidence": ["navigation_receipt", "trajectory"], "source": "patrol {wps}"},
            {"id": "o2", "kind": "spoken", "description": "say {words}", "params": {"text": "{words}"},
             "evidence": ["speech_receipt"]},
        ]})
    c = StructuredContractCompiler(MissionSpec(template="t", template_params=(("wps", "lab,kitchen"),
                                                                             ("words", "{wps} }} {{"))),
                                   templates=MissionTemplates(templates={"t": t}))
    route, spoken = c.obligations(PLACES)
    assert route["params"]["waypoints"] == ["lab", "kitchen"]  # a whole placeholder takes the typed value
    assert route["description"] == "via lab, kitchen ({literal})" and route["source"] == "patrol lab, kitchen"
    assert spoken["params"]["text"] == "{wps} }} {{" and spoken["description"] == "say {wps} }} {{"


@pytest.mark.parametrize("spec, expected", [
    (template("inspct", place="lab"),
     ["template: unknown template 'inspct' (did you mean inspect_and_return? known: deliver_message, go_to, "
      "inspect_and_return, patrol)"]),
    (template("teleport"), ["template: unknown template 'teleport' (known: deliver_message, go_to, "
                            "inspect_and_return, patrol)"]),
    (template("inspect_and_return"), ["template_params.place: missing (place: the place to inspect)"]),
    (template("inspect_and_return", place="lab2"),
     ["template_params.place: unknown place 'lab2' (did you mean lab?)"]),
    (template("inspect_and_return", place="lab", colour="red"),
     ["template_params.colour: unknown parameter (inspect_and_return takes place, return_to)"]),
    (MissionSpec(template="go_to", template_params=(("place", "lab"), ("place", "dock"))),
     ["template_params.place: given twice"]),
    (MissionSpec(template="go_to", template_params=(("", "lab"), ("place", "lab"))), ["template_params[0]: empty"
                                                                                      " key"]),
    (template("go_to", place="  "), ["template_params.place: empty"]),
    (template("patrol", waypoints=""), ["template_params.waypoints: empty (a comma-separated list of places)"]),
    (template("patrol", waypoints="lab,,Kitchen"),
     ["template_params.waypoints[1]: empty",
      "template_params.waypoints[2]: unknown place 'Kitchen' (did you mean kitchen?)"]),
    (template("deliver_message", to="the security team", text=" "),
     ["template_params.to: a recipient is one word of letters, digits and _ . @ + - (got 'the security team')",
      "template_params.text: empty"]),
    (MissionSpec(template="go_to", contract="[]"), ["contract, template: give a contract or a template, not both"]),
    (MissionSpec(contract=json.dumps([at("o1", "lab")]), template_params=(("place", "lab"),)),
     ["template_params: given with a contract (only a template takes parameters)"]),
    (MissionSpec(template_params=(("place", "lab"),)),
     ["template: missing (template_params were given without a template)"]),
])
def test_every_template_problem_is_named_by_field(spec, expected):
    assert problems(spec) == expected


def test_a_default_that_is_not_a_place_of_this_mission_says_it_is_the_default():
    t = MissionTemplates(templates={"home": MissionTemplate.model_validate({
        "params": {"place": {"type": "place", "default": "dock"}},
        "obligations": [at("o1", "{place}", True)]})})
    c = StructuredContractCompiler(template("home"), templates=t)
    with pytest.raises(MissionSpecError) as err:
        c.obligations({"lab": Pose2D(x=0, y=0)})
    assert err.value.problems == ["template_params.place: unknown place 'dock' (known: lab, start) "
                                  "(the template's default 'dock')"]


def test_all_problems_are_reported_at_once_and_places_are_checked_only_when_given():
    spec = template("inspect_and_return", place="lab2", colour="red", return_to="nowhere")
    assert [p.split(":")[0] for p in problems(spec)] == ["template_params.colour", "template_params.place",
                                                         "template_params.return_to"]
    unchecked = template("inspect_and_return", place="lab2")
    assert compiler(unchecked).obligations(None)[0]["params"]["place"] == "lab2"


# --------------------------------------------------------------------------- the templates file


def _templates_file(tmp_path: Path, body: dict) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"format_version": 1, "templates": body}))
    return path


def test_a_template_file_is_checked_when_loaded(tmp_path):
    placeholder = {"params": {"place": {"type": "place"}, "spare": {"type": "text"}},
                   "obligations": [at("o1", "{plaec}", True)]}
    with pytest.raises(UsageError) as err:
        load_mission_templates(_templates_file(tmp_path, {"bad": placeholder}))
    message = err.value.message
    assert err.value.details["problems"] == [
        "templates.bad.obligations[0].description: unknown placeholder {plaec} (declared: place, spare)",
        "templates.bad.obligations[0].params.place: unknown placeholder {plaec} (declared: place, spare)",
        "templates.bad.params.place: declared but never used in the obligations",
        "templates.bad.params.spare: declared but never used in the obligations",
    ]
    assert message == f"mission templates {tmp_path / 't.yaml'}: " + "; ".join(err.value.details["problems"])
    invalid = {"params": {"place": {"type": "place"}}, "obligations": [{**at("o1", "{place}"), "kind": "beamed"}]}
    with pytest.raises(UsageError) as err:
        load_mission_templates(_templates_file(tmp_path, {"beam": invalid}))
    assert "templates.beam.obligations[0].kind: Input should be" in err.value.message
    typed = {"params": {"place": {"type": "planet"}}, "obligations": [at("o1", "{place}")]}
    with pytest.raises(UsageError) as err:
        load_mission_templates(_templates_file(tmp_path, {"t": typed}))
    assert "templates.t.params.place.type" in err.value.message
    with pytest.raises(UsageError, match="cannot read"):
        load_mission_templates(tmp_path / "none.yaml")
    (tmp_path / "broken.yaml").write_text("templates: [")
    with pytest.raises(UsageError, match="not valid YAML"):
        load_mission_templates(tmp_path / "broken.yaml")


def test_a_broken_templates_file_refuses_the_mission_when_it_compiles(tmp_path):
    (tmp_path / "broken.yaml").write_text("templates: [")
    config = load_harness_config(overrides={"contract": {"mission_templates_file": str(tmp_path / "broken.yaml")}})
    c = structured_compiler(template("go_to", place="lab"), config=config)  # never raises for the mission
    with pytest.raises(ContractError) as err:
        c.compile(c.description, mission_id="m-1", contract_id="c-1", places=PLACES)
    assert err.value.details["problems"][0].startswith("template: the mission templates cannot be used: ")


# --------------------------------------------------------------------------- specs, descriptions, reviewer


def test_a_spec_knows_its_source():
    assert MissionSpec(goal="Go to the lab.").source == "goal" and not MissionSpec(goal="x").structured
    assert MissionSpec(goal="x", contract="[]").source == "contract"
    assert MissionSpec(template="go_to").source == "template" and MissionSpec(template="go_to").structured
    assert MissionSpec(template_params=(("a", "b"),)).source == "template"
    assert MissionSpec().kind == "mission_spec" and MissionSpec().format_version == 1


def test_build_takes_a_programs_values():
    spec = MissionSpec.build(contract=[at("o1", "lab", True)], template="", params=None)
    assert json.loads(spec.contract) == [at("o1", "lab", True)]
    spec = MissionSpec.build(template="patrol", params={"waypoints": ["lab", "kitchen"]})
    assert spec.template_params == (("waypoints", "lab,kitchen"),)
    assert MissionSpec.build(template="go_to", params=[("place", "lab")]).template_params == (("place", "lab"),)
    with pytest.raises(MissionSpecError, match=r"template_params.place: expected text or a list of places, got int"):
        MissionSpec.build(template="go_to", params={"place": 3})


def test_a_goal_given_beside_a_structure_is_its_description_and_long_ones_are_cut():
    c = compiler(MissionSpec(goal="Check the lab for me.", template="go_to", template_params=(("place", "lab"),)))
    assert c.description == "Check the lab for me."
    many = json.dumps([at(f"o{i}", "lab") for i in range(200)])
    c = compiler(MissionSpec(contract=many))
    from robot_harness.core.engine import MAX_GOAL_CHARS

    assert len(c.description) == MAX_GOAL_CHARS and c.description.endswith("…")
    assert compiler(MissionSpec(contract="[")).description == "contract (1 character, not readable as obligations)"
    assert compiler(template("inspct", place="x")).description == "template inspct(place=x)"


def test_the_structured_reviewer_does_not_refuse_the_programs_own_contract():
    report = StructuredCoverageReviewer().review("contract: at_place(place=lab, final=true)", ())
    assert report.ok and report.uncovered == () and report.reviewer == "structured"
    assert report.notes == "structured contract: reviewed field by field"


def test_the_compiler_meets_the_contract_compiler_protocol():
    from robot_harness.core.contracts import ContractCompiler, CoverageReviewer

    assert isinstance(compiler(template("go_to", place="lab")), ContractCompiler)
    assert isinstance(StructuredCoverageReviewer(), CoverageReviewer)
