"""Structured missions: an explicit contract, or a named template, instead of words.

People speak; programs should not have to. A Mission may carry, instead of a
natural-language goal (or beside one, as its human-readable description):

* ``contract``: YAML or JSON text holding the obligations themselves, in the
  scenario schema's contract format: a list of obligations, or a mapping with
  an ``obligations`` key;
* ``template`` + ``template_params``: a named mission template
  (config/mission_templates.yaml) whose obligations carry ``{param}``
  placeholders, filled with typed parameters that are checked first.

What this module guarantees:

- exactly one source of the contract: the goal's words, the contract, or the
  template; anything else is a problem, not a guess;
- every problem is reported at once, each prefixed with the field it is about
  (indexes 0-based): ``obligations[1].params.place: unknown place 'lab2' (did
  you mean lab?)``, ``template_params.place: missing``, ``template: unknown
  template 'inspct' (...)``;
- the obligations a spec yields are validated by ``ScenarioContractCompiler``,
  the same check a scenario's contract gets; nothing here re-states it;
- building a ``StructuredContractCompiler`` never raises for the caller's
  mistakes: they surface from ``compile`` as one ``ContractError`` carrying
  ``problems``, so the engine journals the refusal like a refused goal
  (BLOCKED, nothing planned, nothing moved);
- pure: no clock, no randomness, no ROS; parameter values are substituted
  into the template's strings, never parsed as template text themselves.
"""
from __future__ import annotations

import difflib
import enum
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .completion import CompletionContract, CoverageReport, Obligation
from .config import HarnessConfig
from .contracts import START_PLACE, ContractError, ScenarioContractCompiler
from .errors import ScenarioError, UsageError
from .records import FORMAT_VERSION

__all__ = [
    "MAX_CONTRACT_CHARS",
    "MISSION_TEMPLATES_FILE",
    "MissionSpec",
    "MissionSpecError",
    "ParamType",
    "TemplateParam",
    "MissionTemplate",
    "MissionTemplates",
    "StructuredContractCompiler",
    "StructuredCoverageReviewer",
    "mission_templates_path",
    "load_mission_templates",
    "parse_contract_text",
    "read_contract_file",
    "structured_compiler",
]

MAX_CONTRACT_CHARS = 100_000
"""The longest contract text a mission may carry."""
_MAX_DESCRIPTION_CHARS = 2000
"""A generated description is cut to the engine's goal limit (``engine.MAX_GOAL_CHARS``; a test keeps them equal)."""

MISSION_TEMPLATES_FILE = "mission_templates.yaml"
"""The shipped templates' file name under config/ (a source checkout's, or share/robot_harness/config)."""

_CONTRACT_KEYS = ("obligations",)
_PLACE_KINDS = frozenset({"at_place", "image_captured", "semantic", "spoken"})
"""Kinds whose ``params.place`` names a place (a route names its ``start`` and ``waypoints``)."""
_RECIPIENT = re.compile(r"[A-Za-z0-9_.@+\-]+")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WHOLE_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""``{name}`` is a parameter; ``{{`` and ``}}`` are literal braces."""


class MissionSpecError(UsageError):
    """A structured mission (or a contract file) that does not validate.

    ``problems`` holds every problem found, each prefixed with its field.
    """

    code = "invalid_mission_spec"

    def __init__(self, problems: Sequence[str], *, what: str = "structured mission", **details: Any) -> None:
        self.problems = list(problems) or ["(unknown problem)"]
        super().__init__(f"{what}: {'; '.join(self.problems)}", problems=self.problems, **details)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MissionSpec(_Frozen):
    """What a Mission request says the mission is, before anything is compiled (a record: it crosses
    the action boundary through ``conversions.msg_to_mission_spec``)."""

    kind: Literal["mission_spec"] = "mission_spec"
    format_version: int = FORMAT_VERSION
    goal: str = ""
    """The user's words. With a contract or a template: only the human-readable description."""
    contract: str = ""
    """YAML or JSON text: a list of obligations, or a mapping with an ``obligations`` key."""
    template: str = ""
    """The name of a mission template."""
    template_params: tuple[tuple[str, str], ...] = ()
    """The template's parameters as (key, value) strings, in the order given; a key given twice is a
    problem, never an override. A ``place_list`` value is comma-separated."""

    @property
    def source(self) -> Literal["goal", "contract", "template"]:
        """Where the contract comes from (a spec naming several sources is refused by its compiler)."""
        if self.contract.strip():
            return "contract"
        if self.template.strip() or self.template_params:
            return "template"
        return "goal"

    @property
    def structured(self) -> bool:
        """True when a program, not the goal's words, states the contract."""
        return self.source != "goal"

    @classmethod
    def build(cls, *, goal: str = "", contract: str | Sequence[Any] | Mapping[str, Any] | None = None,
              template: str = "", params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None) -> MissionSpec:
        """A spec from a program's values: ``contract`` as text or as parsed data (sent as JSON), ``params``
        as a mapping or pairs whose list values become comma-separated place lists."""
        if contract is None:
            text = ""
        elif isinstance(contract, str):
            text = contract
        else:
            try:
                text = json.dumps(contract, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise MissionSpecError([f"contract: cannot be sent as JSON: {exc}"]) from None
        pairs = list(params.items()) if isinstance(params, Mapping) else list(params or ())
        problems = [f"template_params.{k}: expected text or a list of places, got {type(v).__name__}"
                    for k, v in pairs if not isinstance(v, str | list | tuple)]
        if problems:
            raise MissionSpecError(problems)
        values = tuple((str(k), v if isinstance(v, str) else ",".join(str(x) for x in v)) for k, v in pairs)
        return cls(goal=goal, contract=text, template=template, template_params=values)


# --------------------------------------------------------------------------- templates


class ParamType(str, enum.Enum):
    """What a template parameter may hold; each is checked before it is substituted."""

    PLACE = "place"
    """One of the mission's known places (exactly its name), or ``start``: where the robot was when the
    mission was admitted."""
    TEXT = "text"
    """Any text that is not blank, used verbatim (outer whitespace dropped)."""
    RECIPIENT = "recipient"
    """Whom a message is for: one word of letters, digits and ``_ . @ + -`` (e.g. ``operator``)."""
    PLACE_LIST = "place_list"
    """One or more places as ``place`` takes them; comma-separated as a string (``lab,kitchen``)."""


class TemplateParam(_Frozen):
    """One declared parameter of a mission template."""

    type: ParamType
    description: str = ""
    default: str | None = None
    """The value, written as a caller would send it, used when none is given; None: required."""


class MissionTemplate(_Frozen):
    """A named mission: typed parameters and obligations with ``{param}`` placeholders.

    A string that is exactly ``{param}`` becomes the parameter's value (a list
    for a ``place_list``); inside a longer string the value is spliced in as
    text (a list joined by ``, ``). ``{{`` and ``}}`` are literal braces.
    """

    description: str = ""
    params: dict[str, TemplateParam] = Field(default_factory=dict)
    obligations: tuple[dict[str, Any], ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> MissionTemplate:
        problems = [f"params.{n}: not a parameter name" for n in self.params if not _PARAM_NAME.fullmatch(n)]
        used: set[str] = set()
        for i, ob in enumerate(self.obligations):
            for path, name in _placeholders(ob, f"obligations[{i}]"):
                used.add(name)
                if name not in self.params:
                    problems.append(f"{path}: unknown placeholder {{{name}}} (declared: {_names(self.params)})")
        problems += [f"params.{n}: declared but never used in the obligations" for n in self.params if n not in used]
        if problems:
            raise ValueError("; ".join(problems))
        # The obligations must form a valid contract whatever valid values are given: check with samples.
        sample = {n: (["p1", "p2"] if p.type is ParamType.PLACE_LIST else f"{n}_value") for n, p in self.params.items()}
        try:
            ScenarioContractCompiler([_fill(ob, sample) for ob in self.obligations])
        except ScenarioError as exc:
            raise ValueError("; ".join(_obligation_fields(exc.details.get("problems", [exc.message]),
                                                          self.obligations))) from None
        return self


class MissionTemplates(_Frozen):
    """config/mission_templates.yaml: the named missions a program may send."""

    format_version: int = 1
    templates: dict[str, MissionTemplate] = Field(default_factory=dict)


def mission_templates_path(config: HarnessConfig) -> Path | None:
    """``contract.mission_templates_file``, else the packaged config/mission_templates.yaml (found the way
    every shipped config file is: ``config.packaged_config``); None when there is none."""
    from .config import packaged_config

    if config.contract.mission_templates_file:
        return Path(config.contract.mission_templates_file).expanduser()
    return packaged_config(MISSION_TEMPLATES_FILE)


def load_mission_templates(path: str | Path) -> MissionTemplates:
    """The templates in ``path``, each checked (placeholders declared, obligations valid); ``UsageError``
    naming every problem otherwise."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UsageError(f"mission templates {path}: cannot read: {exc.strerror or exc}", path=str(path)) from None
    except yaml.YAMLError as exc:
        raise UsageError(f"mission templates {path}: not valid YAML: {_yaml_where(exc)}", path=str(path)) from None
    try:
        return MissionTemplates.model_validate(data if data is not None else {})
    except ValidationError as exc:
        problems = []
        for e in exc.errors(include_url=False):
            where = _path(e["loc"])  # a template's own problems are paths inside it, joined by "; "
            problems += [f"{where}.{part}" if _RELATIVE.match(part) else f"{where}: {part}"
                         for part in _msg(e["msg"]).split("; ")]
        raise UsageError(f"mission templates {path}: {'; '.join(problems)}", path=str(path),
                         problems=problems) from None


# --------------------------------------------------------------------------- contracts


def parse_contract_text(text: str) -> list[dict[str, Any]]:
    """The obligation dicts a contract text holds (JSON, else YAML), shape-checked only (no schema,
    no places); ``MissionSpecError`` otherwise."""
    import yaml

    if len(text) > MAX_CONTRACT_CHARS:
        raise MissionSpecError([f"contract: {len(text)} characters; the limit is {MAX_CONTRACT_CHARS}"])
    if not text.strip():
        raise MissionSpecError(["contract: empty"])
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise MissionSpecError([f"contract: not YAML or JSON ({_yaml_where(exc)})"]) from None
    problems: list[str] = []
    if isinstance(data, Mapping):
        problems += [f"contract.{k}: unknown key (a contract mapping holds only 'obligations')"
                     for k in data if k not in _CONTRACT_KEYS]
        if "obligations" not in data:
            problems.append("contract: a mapping needs an 'obligations' key")
        elif not isinstance(data["obligations"], list):
            problems.append(f"contract.obligations: expected a list of obligations; got {_type(data['obligations'])}")
        if problems:
            raise MissionSpecError(problems)
        data = data["obligations"]
    if not isinstance(data, list):
        raise MissionSpecError([f"contract: expected a list of obligations, or a mapping with an 'obligations' "
                                f"key; got {_type(data)}"])
    if not data:
        raise MissionSpecError(["obligations: empty; a contract needs at least one obligation"])
    problems += [f"obligations[{i}]: expected a mapping, got {_type(ob)}" for i, ob in enumerate(data)
                 if not isinstance(ob, Mapping)]
    if problems:
        raise MissionSpecError(problems)
    return [dict(ob) for ob in data]


def read_contract_file(path: str | Path) -> str:
    """A contract file's text, checked as far as it can be without the mission's places (shape and
    obligation schema); ``MissionSpecError`` naming the file and every problem otherwise."""
    path = Path(path)
    what = f"contract file {path}"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise MissionSpecError(["no such file"], what=what, path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MissionSpecError([f"cannot read: {getattr(exc, 'strerror', None) or exc}"], what=what,
                               path=str(path)) from None
    try:
        _checked(parse_contract_text(text), None)
    except MissionSpecError as exc:
        raise MissionSpecError(exc.problems, what=what, path=str(path)) from None
    return text


def _checked(obligations: list[dict[str, Any]], places: Mapping[str, Any] | None) -> ScenarioContractCompiler:
    """The scenario compiler over ``obligations``, after the place names (when ``places`` is given) and
    the schema are checked; ``MissionSpecError`` with every problem otherwise."""
    problems = _place_problems(obligations, places) if places is not None else []
    try:
        compiler = ScenarioContractCompiler(obligations)
    except ScenarioError as exc:
        problems += _obligation_fields(exc.details.get("problems", [exc.message]), obligations)
        raise MissionSpecError(problems) from None
    if problems:
        raise MissionSpecError(problems)
    return compiler


def _place_problems(obligations: Sequence[Mapping[str, Any]], places: Mapping[str, Any]) -> list[str]:
    """Unknown place names, by field, with the nearest known ones (the names contracts.py's
    ``_obligation_problems`` checks: a ``place``, a route's ``start`` and ``waypoints``; ``start`` is
    always known)."""
    problems: list[str] = []
    for i, ob in enumerate(obligations):
        params = ob.get("params")
        if not isinstance(params, Mapping):
            continue
        named: list[tuple[str, Any]] = []
        if ob.get("kind") == "route_closed":
            if "start" in params:
                named.append(("start", params["start"]))
            wps = params.get("waypoints")
            if isinstance(wps, list):
                named += [(f"waypoints[{j}]", w) for j, w in enumerate(wps)]
        elif ob.get("kind") in _PLACE_KINDS and "place" in params:
            named.append(("place", params["place"]))
        problems += [f"obligations[{i}].params.{f}: {_unknown_place(v, places)}" for f, v in named
                     if isinstance(v, str) and not _known(v, places)]
    return problems


# --------------------------------------------------------------------------- template instantiation


def _template_obligations(spec: MissionSpec, templates: MissionTemplates,
                          places: Mapping[str, Any] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The template's obligations with the checked parameters filled in, and the values used;
    ``MissionSpecError`` listing every problem with the template or its parameters."""
    name = spec.template.strip()
    template = templates.templates.get(name)
    if template is None:
        known = sorted(templates.templates)
        close = _closest(name, known)
        hint = (f"did you mean {close}? " if close else "") + f"known: {', '.join(known) or 'none'}"
        raise MissionSpecError([f"template: unknown template {name!r} ({hint})"])
    problems: list[str] = []
    given: dict[str, str] = {}
    for i, (key, value) in enumerate(spec.template_params):
        if not key:
            problems.append(f"template_params[{i}]: empty key")
        elif key in given:
            problems.append(f"template_params.{key}: given twice")
        elif key not in template.params:
            problems.append(f"template_params.{key}: unknown parameter ({name} takes {_names(template.params)})")
        else:
            given[key] = value
    values: dict[str, Any] = {}
    for key, param in template.params.items():
        field = f"template_params.{key}"
        if key in given:
            raw, note = given[key], ""
        elif param.default is not None:
            raw, note = param.default, f" (the template's default {param.default!r})"
        else:
            problems.append(f"{field}: missing ({param.type.value}" + (f": {param.description})" if param.description
                                                                      else ")"))
            continue
        value, found = _param_value(field, param.type, raw, places)
        problems += [p + note for p in found]
        values[key] = value
    if problems:
        raise MissionSpecError(problems)
    return [_fill(ob, values) for ob in template.obligations], values


def _param_value(field: str, ptype: ParamType, raw: str, places: Mapping[str, Any] | None) -> tuple[Any, list[str]]:
    value = raw.strip()
    if ptype is ParamType.PLACE_LIST:
        if not value:
            return [], [f"{field}: empty (a comma-separated list of places)"]
        items = [s.strip() for s in value.split(",")]
        problems = [f"{field}[{j}]: empty" for j, s in enumerate(items) if not s]
        if places is not None:
            problems += [f"{field}[{j}]: {_unknown_place(s, places)}" for j, s in enumerate(items)
                         if s and not _known(s, places)]
        return items, problems
    if not value:
        return value, [f"{field}: empty"]
    if ptype is ParamType.PLACE and places is not None and not _known(value, places):
        return value, [f"{field}: {_unknown_place(value, places)}"]
    if ptype is ParamType.RECIPIENT and not _RECIPIENT.fullmatch(value):
        return value, [f"{field}: a recipient is one word of letters, digits and _ . @ + - (got {value!r})"]
    return value, []


def _fill(node: Any, values: Mapping[str, Any]) -> Any:
    """``node`` with every ``{param}`` replaced (only in the template's strings: a value is never re-read)."""
    if isinstance(node, str):
        whole = _WHOLE_PLACEHOLDER.fullmatch(node)
        if whole and whole.group(1) in values:
            value = values[whole.group(1)]
            return list(value) if isinstance(value, list) else value

        def sub(m: re.Match[str]) -> str:
            if m.group(0) in ("{{", "}}"):
                return m.group(0)[0]
            value = values.get(m.group(1))
            if value is None:
                return m.group(0)
            return ", ".join(value) if isinstance(value, list) else str(value)

        return _PLACEHOLDER.sub(sub, node)
    if isinstance(node, Mapping):
        return {k: _fill(v, values) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_fill(v, values) for v in node]
    return node


def _placeholders(node: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(node, str):
        return [(path, m.group(1)) for m in _PLACEHOLDER.finditer(node) if m.group(1)]
    if isinstance(node, Mapping):
        return [p for k, v in node.items() for p in _placeholders(v, f"{path}.{k}")]
    if isinstance(node, list | tuple):
        return [p for j, v in enumerate(node) for p in _placeholders(v, f"{path}[{j}]")]
    return []


# --------------------------------------------------------------------------- the compiler


class StructuredContractCompiler:
    """The ``ContractCompiler`` of a structured mission: the program's own obligations, checked field by field.

    Built from a spec (and the templates, for a template mission) without
    raising for the caller's mistakes; ``obligations`` and ``compile`` report
    them. ``name`` says where the contract came from (``structured:contract``
    or ``structured:template/<name>``) and is recorded as the contract's compiler.
    """

    def __init__(self, spec: MissionSpec, *, templates: MissionTemplates | None = None,
                 templates_problem: str = "") -> None:
        self.spec = spec
        self.name = (f"structured:template/{spec.template.strip()}" if spec.source == "template"
                     else "structured:contract")
        self._templates = templates
        self._templates_problem = templates_problem
        self.description = self._describe()
        """The mission's goal text: the spec's goal, else a description generated from the spec."""

    def obligations(self, places: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The obligation dicts the spec yields, checked (place names only when ``places`` is given);
        ``MissionSpecError`` with every problem otherwise."""
        return self._resolve(places)[0]

    def compile(self, goal: str, *, mission_id: str, contract_id: str,
                places: Mapping[str, Any]) -> CompletionContract:
        try:
            _, compiler = self._resolve(places)
            contract = compiler.compile(goal, mission_id=mission_id, contract_id=contract_id, places=places)
        except MissionSpecError as exc:
            raise ContractError(exc.message, compiler=self.name, goal=goal, problems=exc.problems) from None
        except ContractError as exc:  # what the scenario compiler still refused, by field
            raw = self._resolve(None)[0]
            problems = _obligation_fields(exc.details.get("problems", [exc.message]), raw)
            raise ContractError(f"structured mission: {'; '.join(problems)}", compiler=self.name, goal=goal,
                                problems=problems) from None
        return contract.model_copy(update={"compiler": self.name})

    def _resolve(self, places: Mapping[str, Any] | None) -> tuple[list[dict[str, Any]], ScenarioContractCompiler]:
        spec = self.spec
        problems: list[str] = []
        if spec.contract.strip() and spec.template.strip():
            problems.append("contract, template: give a contract or a template, not both")
        elif spec.contract.strip() and spec.template_params:
            problems.append("template_params: given with a contract (only a template takes parameters)")
        if spec.source == "goal":
            problems.append("goal, contract, template: no contract or template given (a goal alone is compiled "
                            "from its words)")
        if problems:
            raise MissionSpecError(problems)
        if spec.source == "contract":
            obligations = parse_contract_text(spec.contract)
            return obligations, _checked(obligations, places)
        if not spec.template.strip():
            raise MissionSpecError(["template: missing (template_params were given without a template)"])
        if self._templates is None:
            raise MissionSpecError([self._templates_problem or "template: no mission templates are configured"])
        obligations, _ = _template_obligations(spec, self._templates, places)
        try:
            return obligations, _checked(obligations, places)
        except MissionSpecError as exc:  # the parameters were valid: the template itself is at fault
            raise MissionSpecError([f"template {spec.template.strip()!r}: {p}" for p in exc.problems]) from None

    def _describe(self) -> str:
        spec = self.spec
        if spec.goal.strip():
            return spec.goal
        if spec.source == "template":
            name = spec.template.strip()
            pairs = dict(spec.template_params)
            template = self._templates.templates.get(name) if self._templates is not None else None
            if template is not None:  # the values used, defaults included, in the declared order
                declared = [(k, pairs.get(k, p.default)) for k, p in template.params.items()]
                pairs = {k: v for k, v in declared if v is not None} | {k: v for k, v in pairs.items() if k not in
                                                                         template.params}
            text = f"template {name}({', '.join(f'{k}={v}' for k, v in pairs.items())})"
        else:
            try:
                obligations = parse_contract_text(spec.contract)
            except MissionSpecError:
                n = len(spec.contract)
                text = f"contract ({n} character{'' if n == 1 else 's'}, not readable as obligations)"
            else:
                text = "contract: " + "; ".join(_describe_obligation(ob) for ob in obligations)
        return text if len(text) <= _MAX_DESCRIPTION_CHARS else text[:_MAX_DESCRIPTION_CHARS - 1] + "…"


class StructuredCoverageReviewer:
    """The coverage review of a structured mission: the program stated the contract itself, and it
    was checked field by field, so there are no words left for an obligation to miss."""

    name = "structured"

    def review(self, goal: str, obligations: Sequence[Obligation]) -> CoverageReport:
        return CoverageReport(reviewer=self.name, ok=True, notes="structured contract: reviewed field by field")


def structured_compiler(spec: MissionSpec, *, config: HarnessConfig) -> StructuredContractCompiler:
    """The compiler of a structured mission under ``config`` (its mission templates file, read now
    for a template mission). A broken or missing templates file is a problem of the mission, reported
    when it compiles, not raised here."""
    templates, problem = None, ""
    if spec.source == "template":
        path = mission_templates_path(config)
        if path is None:
            problem = "template: no mission templates file (set contract.mission_templates_file)"
        else:
            try:
                templates = load_mission_templates(path)
            except UsageError as exc:
                problem = f"template: the mission templates cannot be used: {exc.message}"
    return StructuredContractCompiler(spec, templates=templates, templates_problem=problem)


# --------------------------------------------------------------------------- helpers


def _known(value: str, places: Mapping[str, Any]) -> bool:
    return value in places or value == START_PLACE


def _unknown_place(value: str, places: Mapping[str, Any]) -> str:
    names = sorted(set(places) | {START_PLACE})
    key = _key(value)
    close = [n for n in names if _key(n) == key]
    if not close:
        by_key = {_key(n): n for n in names}
        close = [by_key[k] for k in difflib.get_close_matches(key, list(by_key), n=3, cutoff=0.6)]
    if close:
        return f"unknown place {value!r} (did you mean {' or '.join(close)}?)"
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    return f"unknown place {value!r} (known: {shown})"


def _describe_obligation(ob: Mapping[str, Any]) -> str:
    params = ob.get("params") if isinstance(ob.get("params"), Mapping) else {}

    def shown(v: Any) -> str:
        if isinstance(v, bool):
            return str(v).lower()
        return ",".join(str(x) for x in v) if isinstance(v, list) else str(v)

    return f"{ob.get('kind', '?')}({', '.join(f'{k}={shown(v)}' for k, v in params.items())})"


def _closest(value: str, names: Sequence[str]) -> str | None:
    """The known name ``value`` most likely misspells (whole, or as the start of a longer name)."""
    def score(n: str) -> float:
        return max(difflib.SequenceMatcher(None, value, n).ratio(),
                   difflib.SequenceMatcher(None, value, n[:len(value)]).ratio() if len(n) > len(value) else 0.0)

    best = max(names, key=score, default=None)
    return best if best is not None and score(best) >= 0.75 else None


def _key(name: str) -> str:
    return re.sub(r"[\s\-_]+", "_", name.strip().lower())


def _names(params: Mapping[str, Any]) -> str:
    return ", ".join(params) or "no parameters"


def _type(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(
        type(value), type(value).__name__)


def _msg(message: str) -> str:
    return message.removeprefix("Value error, ")


def _path(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


_RELATIVE = re.compile(r"^(?:params|obligations)[.\[][^:\s]*: ")
_INDEXED = re.compile(r"^(\d+)((?:\.[^:\s]+)*): (.*)$", re.S)
_BY_ID = re.compile(r"^([^\s:]+): (.*)$", re.S)


def _obligation_fields(problems: Sequence[str], obligations: Sequence[Mapping[str, Any]]) -> list[str]:
    """``ScenarioContractCompiler``'s problems (pydantic locations, obligation ids) as field paths."""
    ids = [str(ob.get("id", "")) for ob in obligations]
    out = []
    for p in problems:
        if m := _INDEXED.match(p):
            rest = "".join(f"[{s}]" if s.isdigit() else f".{s}" for s in m.group(2).split(".") if s)
            out.append(f"obligations[{m.group(1)}]{rest}: {_msg(m.group(3))}")
        elif p.startswith("(top): "):
            out.append(f"obligations: {_msg(p[len('(top): '):])}")
        elif (m := _BY_ID.match(p)) and m.group(1) in ids:
            out.append(f"obligations[{ids.index(m.group(1))}] ({m.group(1)}): {m.group(2)}")
        else:
            out.append(f"obligations: {_msg(p)}")
    return out


def _yaml_where(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else str(problem)
