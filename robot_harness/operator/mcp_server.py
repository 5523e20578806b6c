"""The MCP server: the harness's skills as MCP tools, over streamable HTTP, through the recorded dispatcher.

An MCP client is treated like the planner: untrusted, proposing only. Its tool
calls become the turns of an operator *session mission*
(``operator/session.py``), so they are journaled with the snapshot they were
decided on, validated, re-checked on a fresh snapshot before motion, leased,
approved when policy says so (never by the client itself: there is no tool to
answer an approval, and under the ``operator`` approval policy the client's
bearer token is refused as an approver of its own session's calls even when
it is also the operator token; see ``core/interactions``), and their
physical outcome is verified. Tool
names, descriptions and argument schemas are the planner's own; annotations
say which tools move the robot.

What a call returns is the *immediate* answer: ``accepted`` (a managed action
started; not completion), ``ok`` (an ordinary tool's result), or a refusal
with the reason. The physical outcome arrives later, three ways:

* the resource ``robot-harness://actions/{action_id}`` (read it; listeners
  get ``resources/updated`` when it changes);
* ``harness_await_action``: progress notifications per lifecycle state until
  the verified outcome, then the outcome;
* the progress notifications of the call itself, up to its answer.

``propose_done`` is not offered and is refused: an MCP call never declares a
mission complete. What a client can do instead is *submit a whole mission*
(``harness_submit_mission``: a goal, an explicit contract, or a template and
its parameters) through the supervisor's own admission path: the same runner,
planner, journal, verifier and commit gate as a Mission goal, so it is the
independent verifier, not the client, that rules the mission done. Binding
anything but loopback needs a bearer token.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from . import is_loopback
from ..core.errors import HarnessError, RefusalError, UsageError
from ..core.mission_spec import MAX_CONTRACT_CHARS, MissionSpec
from ..operator.session import CallTicket, SessionHost
from ..core.skills import PROPOSE_DONE, PROPOSE_PLAN, READ_ONLY, RECOVERY_ONLY, Skill

__all__ = ["ACTION_URI", "SESSION_URI", "HARNESS_TOOLS", "SUBMIT_MISSION", "MISSION_TOOL", "MissionSubmitter",
           "McpServerHandle", "build_server", "mcp_tools", "serve"]

ACTION_URI = "robot-harness://actions/{action_id}"
SESSION_URI = "robot-harness://session"
_ACTION_PREFIX = "robot-harness://actions/"
_RECHECK_S = 0.5
"""A waiting call is woken by every journal update of its ticket; this only bounds a missed wake-up."""
_MAX_AWAIT_S = 600.0

HARNESS_TOOLS: dict[str, dict[str, Any]] = {
    "harness_action_status": {
        "description": "The current record of a managed action (lifecycle states, verified outcome). Read-only.",
        "schema": {"type": "object", "properties": {"action_id": {"type": "string"}},
                   "required": ["action_id"], "additionalProperties": False},
        "read_only": True,
    },
    "harness_await_action": {
        "description": ("Wait for a managed action's verified outcome, reporting each lifecycle state as a "
                        "progress notification. The outcome is the independent verifier's, not the robot's "
                        "acknowledgement. Read-only: waiting never moves or stops the robot."),
        "schema": {"type": "object", "properties": {
            "action_id": {"type": "string"},
            "timeout_s": {"type": "number", "minimum": 0, "maximum": _MAX_AWAIT_S, "default": 60}},
            "required": ["action_id"], "additionalProperties": False},
        "read_only": True,
    },
    "harness_session": {
        "description": "The operator session mission this server drives: its id and every call with its state.",
        "schema": {"type": "object", "properties": {}, "additionalProperties": False},
        "read_only": True,
    },
    "harness_stop": {
        "description": ("Stop: cancel queued calls, ask the robot to stop the running action, and end the "
                        "session mission (journaled; the actual outcome of a running motion is recorded)."),
        "schema": {"type": "object", "properties": {"reason": {"type": "string", "maxLength": 500}},
                   "additionalProperties": False},
        "read_only": False,
    },
}


SUBMIT_MISSION = "harness_submit_mission"
MISSION_TOOL: dict[str, Any] = {
    "description": (
        "Run a whole mission through the harness and return its final status and summary (the independent "
        "verifier's ruling, not yours). Give exactly one source of its completion contract: `goal` (natural "
        "language), `contract` (a list of obligations in the scenario contract format, as JSON or as YAML/JSON "
        "text), or `template` with `params` (a named mission template, e.g. go_to {place}, inspect_and_return "
        "{place}, deliver_message {to, text}, patrol {waypoints: [places]}); `goal` may accompany a contract "
        "or template as its description. The mission is checked field by field before anything moves: an "
        "invalid one ends BLOCKED with every problem named by field. Refused while an MCP session holds the "
        "robot (harness_stop ends it) or another mission runs. `validate_only`: compile the contract and "
        "return it, without journaling or moving. Cancelling the request stops the mission."),
    "schema": {"type": "object", "properties": {
        "goal": {"type": "string", "maxLength": 2000},
        "contract": {"description": "obligations: a list, a mapping with an `obligations` key, or YAML/JSON text",
                     "anyOf": [{"type": "string", "maxLength": MAX_CONTRACT_CHARS}, {"type": "array"},
                               {"type": "object"}]},
        "template": {"type": "string", "maxLength": 200},
        "params": {"type": "object", "description": "the template's parameters; a place_list as a list or "
                                                    "comma-separated",
                   "additionalProperties": {"anyOf": [{"type": "string"},
                                                      {"type": "array", "items": {"type": "string"}}]}},
        "validate_only": {"type": "boolean", "default": False}},
        "additionalProperties": False},
}


class MissionSubmitter(Protocol):
    """What runs a submitted mission (the supervisor); every method may raise ``HarnessError``."""

    def validate_mission(self, spec: MissionSpec) -> dict[str, Any]:
        """The contract the mission would get; journals nothing, moves nothing."""
        ...

    def submit_mission(self, spec: MissionSpec, *, caller: str, on_admitted: Callable[[str], None] | None = None,
                       on_stage: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Admit and run the mission (blocking until it ends); its result."""
        ...

    def stop_mission(self, mission_id: str, reason: str) -> str:
        """Stop it if it is still running (journaled)."""
        ...


def _annotations(skill: Skill) -> Any:
    from mcp.types import ToolAnnotations

    read_only = READ_ONLY in skill.tags and not skill.physical and not skill.resources
    return ToolAnnotations(
        title=skill.name.replace("_", " "),
        read_only_hint=read_only,
        destructive_hint=skill.physical,
        idempotent_hint=read_only,
        open_world_hint=not read_only,
    )


def mcp_tools(skills: Sequence[Skill], *, missions: bool = False) -> list[Any]:
    """The skills as MCP tools (the planner's names, descriptions and schemas), then the harness's own
    (with ``missions``, ``harness_submit_mission`` too)."""
    from mcp.types import Tool, ToolAnnotations

    tools = []
    for skill in skills:
        if skill.name in (PROPOSE_DONE, PROPOSE_PLAN) or RECOVERY_ONLY in skill.tags:
            # the recovery policy's own, never a client's; a session's client acts call by call: a plan would
            # run steps in place of its own calls and could end in a done proposal
            continue
        fn = skill.tool_spec()["function"]
        tools.append(Tool(name=fn["name"], description=fn["description"], input_schema=fn["parameters"],
                          annotations=_annotations(skill),
                          meta={"robot_harness": {"physical": skill.physical, "resources": list(skill.resources),
                                                  "tags": sorted(skill.tags)}}))
    for name, spec in HARNESS_TOOLS.items():
        tools.append(Tool(name=name, description=spec["description"], input_schema=spec["schema"],
                          annotations=ToolAnnotations(read_only_hint=spec["read_only"], destructive_hint=False,
                                                      idempotent_hint=True, open_world_hint=not spec["read_only"])))
    if missions:
        tools.append(Tool(name=SUBMIT_MISSION, description=MISSION_TOOL["description"],
                          input_schema=MISSION_TOOL["schema"],
                          annotations=ToolAnnotations(title="submit mission", read_only_hint=False,
                                                      destructive_hint=True, idempotent_hint=False,
                                                      open_world_hint=True)))
    return tools


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _result(body: dict[str, Any], *, error: bool) -> Any:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=_json(body))], structured_content=body,
                          is_error=error)


def _refusal(code: str, message: str, **details: Any) -> Any:
    return _result({"status": "error", "error": {"code": code, "message": message, **details}}, error=True)


def _answer(ticket: CallTicket) -> Any:
    """The standard tool result as the client sees it, with where the outcome will be."""
    view = ticket.view()
    result = view["result"]
    if result is None:
        return _result({"status": "cancelled", "tool_call_id": ticket.call_id, "mission_id": ticket.mission_id,
                        "reason": ticket.ended or "no result"}, error=True)
    body: dict[str, Any] = {"tool_call_id": ticket.call_id, "mission_id": ticket.mission_id, **result}
    if ticket.action_id:
        body["outcome_uri"] = ACTION_URI.format(action_id=ticket.action_id)
        body["note"] = ("accepted is not completion: the verified outcome arrives at outcome_uri "
                        "(read it, listen for resources/updated, or call harness_await_action)")
    return _result(body, error=result["status"] not in ("ok", "accepted"))


def _action_record(ticket: CallTicket) -> dict[str, Any]:
    view = ticket.view()
    state = ticket.outcome["state"] if ticket.outcome else (ticket.states[-1]["state"] if ticket.states else "")
    return {"action_id": ticket.action_id, "state": state, "final": ticket.finished, **view}


class _Server:
    def __init__(self, host: SessionHost, skills: Sequence[Skill], *, decision_timeout_s: float,
                 missions: MissionSubmitter | None = None) -> None:
        from mcp.server.subscriptions import InMemorySubscriptionBus

        self.host = host
        self.missions = missions
        self.skills = list(skills)
        self.decision_timeout_s = decision_timeout_s
        self.bus = InMemorySubscriptionBus()
        """2026-07-28 clients: ``subscriptions/listen`` streams."""
        self.subscribed: dict[str, set[Any]] = {}
        """Handshake-era (2025) clients: ``resources/subscribe`` by URI -> their sessions."""
        self.loop: asyncio.AbstractEventLoop | None = None
        self._waiters: dict[str, set[asyncio.Event]] = {}
        host.add_listener(self._ticket_changed)

    async def _follow(self, ticket: CallTicket, until: Callable[[CallTicket], bool], timeout_s: float,
                      report: Callable[[CallTicket], Awaitable[None]]) -> None:
        """Report each change of ``ticket`` until ``until(ticket)``; ``TimeoutError`` after ``timeout_s``."""
        woken = asyncio.Event()
        self._waiters.setdefault(ticket.call_id, set()).add(woken)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                woken.clear()
                done = until(ticket)  # asked before reporting, so the report holds what made it done
                await report(ticket)
                if done:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                try:
                    await asyncio.wait_for(woken.wait(), min(left, _RECHECK_S))
                except asyncio.TimeoutError:
                    pass
        finally:
            waiters = self._waiters.get(ticket.call_id, set())
            waiters.discard(woken)
            if not waiters:
                self._waiters.pop(ticket.call_id, None)

    # -- notifications from the mission's thread --------------------------------

    def _ticket_changed(self, ticket: CallTicket) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        for event in list(self._waiters.get(ticket.call_id, ())):
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop is shutting down
                return
        from mcp.shared.subscriptions import ResourceUpdated

        uris = [SESSION_URI] + ([ACTION_URI.format(action_id=ticket.action_id)] if ticket.action_id else [])
        try:
            for uri in uris:
                asyncio.run_coroutine_threadsafe(self.bus.publish(ResourceUpdated(uri=uri)), loop)
                for session in list(self.subscribed.get(uri, ())):
                    asyncio.run_coroutine_threadsafe(self._notify(session, uri), loop)
        except RuntimeError:  # the loop is shutting down
            return

    async def _notify(self, session: Any, uri: str) -> None:
        try:
            await session.send_resource_updated(uri)
        except Exception:  # a client gone: forget it
            self.subscribed.get(uri, set()).discard(session)

    # -- handlers ------------------------------------------------------------------

    async def list_tools(self, ctx: Any, params: Any) -> Any:
        from mcp.types import ListToolsResult

        self.loop = asyncio.get_running_loop()
        return ListToolsResult(tools=mcp_tools(self.skills, missions=self.missions is not None))

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        self.loop = asyncio.get_running_loop()
        name = params.name
        args = params.arguments if params.arguments is not None else {}
        if name in HARNESS_TOOLS:
            return await self._harness_tool(ctx, name, args)
        if name == SUBMIT_MISSION and self.missions is not None:
            return await self._submit_mission(ctx, args)
        if name == PROPOSE_DONE:
            return _refusal("not_allowed", f"{PROPOSE_DONE}: an MCP call can never declare a mission complete; the "
                            "independent verifier rules on missions sent with a goal (Mission action)")
        if name == PROPOSE_PLAN:
            return _refusal("not_allowed", f"{PROPOSE_PLAN}: an operator session acts call by call; a plan is a "
                            "planner's, for missions sent with a goal (Mission action)")
        try:
            ticket = await asyncio.to_thread(self.host.call, name, args, caller=_caller(ctx))
        except HarnessError as exc:
            return _refusal(exc.code, exc.message)
        report = _Reporter(ctx)
        await report.stage(f"queued as {ticket.call_id}")
        try:
            await self._follow(ticket, lambda t: t.decided, self.decision_timeout_s, report.ticket)
        except TimeoutError:
            withdrawn = self.host.withdraw(ticket.call_id, "its client stopped waiting")
            return _refusal("timeout", f"no decision on {ticket.call_id} within {self.decision_timeout_s:.0f} s; "
                            + ("it was withdrawn and will not run" if withdrawn else
                               f"it is running; see {SESSION_URI}"), tool_call_id=ticket.call_id)
        except asyncio.CancelledError:  # the client cancelled or went away: a queued call must not run later
            self.host.withdraw(ticket.call_id, "its client cancelled the request")
            raise
        return _answer(ticket)

    async def _harness_tool(self, ctx: Any, name: str, args: dict[str, Any]) -> Any:
        if not isinstance(args, dict):
            return _refusal("invalid_arguments", f"{name}: arguments must be a JSON object")
        allowed = set(HARNESS_TOOLS[name]["schema"]["properties"])
        unknown = sorted(set(args) - allowed)
        if unknown:
            return _refusal("invalid_arguments", f"{name}: unknown argument(s) {unknown}")
        if name == "harness_session":
            return _result(self.host.status(), error=False)
        if name == "harness_stop":
            reason = str(args.get("reason") or "MCP client stop")
            mission = await asyncio.to_thread(self.host.end, f"stop from an MCP client: {reason}")
            return _result({"status": "ok", "stopped_mission_id": mission,
                            "note": "the running action (if any) was asked to stop; its actual outcome is recorded"
                            if mission else "no session was running"}, error=False)
        action_id = args.get("action_id")
        if not isinstance(action_id, str) or not action_id:
            return _refusal("invalid_arguments", f"{name}: action_id must be a non-empty string")
        ticket = self.host.find(action_id)
        if ticket is None or not ticket.action_id:
            return _refusal("unknown_action", f"no managed action {action_id!r} in this server's sessions")
        if name == "harness_await_action":
            timeout = args.get("timeout_s", 60)
            if not isinstance(timeout, (int, float)) or not 0 <= timeout <= _MAX_AWAIT_S:
                return _refusal("invalid_arguments", f"{name}: timeout_s must be a number in [0, {_MAX_AWAIT_S:.0f}]")
            report = _Reporter(ctx)
            try:
                await self._follow(ticket, lambda t: t.finished, float(timeout), report.ticket)
            except TimeoutError:
                record = _action_record(ticket)
                return _result({**record, "status": "pending",
                                "note": f"no verified outcome within {timeout} s; the action is still supervised"},
                               error=False)
        return _result(_action_record(ticket), error=False)

    async def _submit_mission(self, ctx: Any, args: Any) -> Any:
        """A whole mission through the supervisor; the answer is its final result (or the refusal)."""
        assert self.missions is not None
        if not isinstance(args, dict):
            return _refusal("invalid_arguments", f"{SUBMIT_MISSION}: arguments must be a JSON object")
        unknown = sorted(set(args) - set(MISSION_TOOL["schema"]["properties"]))
        if unknown:
            return _refusal("invalid_arguments", f"{SUBMIT_MISSION}: unknown argument(s) {unknown}")
        wrong = [k for k in ("goal", "template") if not isinstance(args.get(k, ""), str)]
        if not isinstance(args.get("params") or {}, dict):
            wrong.append("params")
        if not isinstance(args.get("validate_only", False), bool):
            wrong.append("validate_only")
        if wrong:
            return _refusal("invalid_arguments", f"{SUBMIT_MISSION}: wrong type for {wrong}")
        try:
            spec = MissionSpec.build(goal=args.get("goal", ""), contract=args.get("contract"),
                                     template=args.get("template", ""), params=args.get("params"))
            if args.get("validate_only"):
                return _result(await asyncio.to_thread(self.missions.validate_mission, spec), error=False)
        except HarnessError as exc:
            return _refusal(exc.code, exc.message, **_problems_of(exc))
        live = self.host.mission_id
        if live:  # said here at once; the supervisor checks again under its own lock
            return _refusal("refused", f"an MCP operator session (mission {live}) holds the robot; end it with "
                            "harness_stop, then submit the mission")
        loop = asyncio.get_running_loop()
        report = _Reporter(ctx)
        admitted: list[str] = []
        cancelled = threading.Event()
        lock = threading.Lock()

        def stage(message: str) -> None:
            asyncio.run_coroutine_threadsafe(report.stage(message), loop)

        def on_admitted(mission_id: str) -> None:
            with lock:
                if cancelled.is_set():  # gone before its mission started: it never starts
                    raise RefusalError("its MCP client cancelled the request before the mission started")
                admitted.append(mission_id)
            stage(f"admitted as {mission_id}")

        def on_stage(name: str) -> None:
            stage(f"{admitted[0] if admitted else 'mission'}: {name}")

        work = asyncio.ensure_future(asyncio.to_thread(self.missions.submit_mission, spec, caller=_caller(ctx),
                                                       on_admitted=on_admitted, on_stage=on_stage))
        try:
            body = await asyncio.shield(work)
        except HarnessError as exc:
            return _refusal(exc.code, exc.message, **_problems_of(exc))
        except asyncio.CancelledError:  # the client cancelled or went away: the mission must not run on unwatched
            with lock:
                cancelled.set()
                started = list(admitted)
            if started:
                await asyncio.to_thread(self.missions.stop_mission, started[0], "its MCP client cancelled the request")
            raise
        return _result(body, error=body.get("status") != "SUCCEEDED")

    async def subscribe(self, ctx: Any, params: Any) -> Any:
        from mcp.types import EmptyResult

        self.loop = asyncio.get_running_loop()
        self.subscribed.setdefault(str(params.uri), set()).add(ctx.session)
        return EmptyResult()

    async def unsubscribe(self, ctx: Any, params: Any) -> Any:
        from mcp.types import EmptyResult

        self.subscribed.get(str(params.uri), set()).discard(ctx.session)
        return EmptyResult()

    async def list_resources(self, ctx: Any, params: Any) -> Any:
        from mcp.types import ListResourcesResult, Resource

        resources = [Resource(name="session", uri=SESSION_URI, mime_type="application/json",
                               description="The operator session mission and its calls")]
        for call in self.host.status()["calls"]:
            if call["action_id"]:
                resources.append(Resource(name=call["action_id"], mime_type="application/json",
                                          uri=ACTION_URI.format(action_id=call["action_id"]),
                                          description=f"{call['name']} {_json(call['arguments'])}"))
        return ListResourcesResult(resources=resources)

    async def list_templates(self, ctx: Any, params: Any) -> Any:
        from mcp.types import ListResourceTemplatesResult, ResourceTemplate

        return ListResourceTemplatesResult(resource_templates=[ResourceTemplate(
            name="action", uri_template=ACTION_URI, mime_type="application/json",
            description="A managed action: lifecycle states and the verifier's outcome")])

    async def read_resource(self, ctx: Any, params: Any) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp.types import ReadResourceResult, TextResourceContents

        self.loop = asyncio.get_running_loop()
        uri = str(params.uri)
        if uri == SESSION_URI:
            body = self.host.status()
        elif uri.startswith(_ACTION_PREFIX):
            ticket = self.host.find(uri[len(_ACTION_PREFIX):])
            if ticket is None or not ticket.action_id:
                raise MCPError(code=-32002, message=f"no managed action at {uri}")
            body = _action_record(ticket)
        else:
            raise MCPError(code=-32002, message=f"unknown resource {uri}")
        return ReadResourceResult(contents=[TextResourceContents(uri=uri, mime_type="application/json",
                                                                 text=_json(body))])


def _problems_of(exc: HarnessError) -> dict[str, Any]:
    problems = exc.details.get("problems")
    return {"problems": list(problems)} if problems else {}


def _caller(ctx: Any) -> str:
    """Who called, for the record: the MCP client's declared name (not an identity; the token is)."""
    try:
        info = ctx.session.client_params.client_info
        return f"mcp:{info.name}"
    except AttributeError:
        return "mcp"


class _Reporter:
    """Progress notifications for one request (a no-op when the client gave no progress token)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._sent = 0
        self._seen: tuple[int, int, bool] = (0, 0, False)

    async def stage(self, message: str) -> None:
        self._sent += 1
        try:
            await self._ctx.session.report_progress(float(self._sent), None, message)
        except Exception:  # a client gone mid-call must not fail the harness's side
            pass

    async def ticket(self, ticket: CallTicket) -> None:
        # The mission's thread grows the ticket meanwhile: report up to what was counted, no more,
        # so nothing is sent twice and the rest goes out on the next change.
        outcome = ticket.outcome
        seen = (len(ticket.stages), len(ticket.states), outcome is not None)
        if seen == self._seen:
            return
        old = self._seen
        self._seen = seen
        for stage in ticket.stages[old[0]:seen[0]]:
            await self.stage(stage)
        for st in ticket.states[old[1]:seen[1]]:
            await self.stage(f"{ticket.action_id}: {st['state']}" + (f" ({st['reason']})" if st["reason"] else ""))
        if outcome is not None and not old[2]:
            await self.stage(f"{ticket.action_id}: verified outcome {outcome['state']}: {outcome['reason']}")


class _BearerToken:
    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        if token and hmac.compare_digest(token.encode(), self._token.encode()):
            return AccessToken(token=token, client_id="operator", scopes=[])
        return None


def build_server(host: SessionHost, skills: Sequence[Skill], *, decision_timeout_s: float,
                 version: str = "", missions: MissionSubmitter | None = None) -> tuple[Any, _Server]:
    """The low-level MCP server over ``host`` (and ``missions``, which offers ``harness_submit_mission``)."""
    from mcp.server.lowlevel import Server
    from mcp.server.subscriptions import ListenHandler

    impl = _Server(host, skills, decision_timeout_s=decision_timeout_s, missions=missions)
    server = Server(
        "robot_harness", version=version,
        instructions=("Tools move a real robot through an evidence-gated harness. A tool's answer is immediate: "
                      "'accepted' means a motion started, not that it succeeded. Read the outcome_uri resource or "
                      "call harness_await_action for the verified outcome. You cannot declare a mission complete; "
                      "harness_submit_mission (when listed) runs a whole mission that the verifier rules on."),
        on_list_tools=impl.list_tools, on_call_tool=impl.call_tool,
        on_list_resources=impl.list_resources, on_list_resource_templates=impl.list_templates,
        on_read_resource=impl.read_resource, on_subscriptions_listen=ListenHandler(impl.bus),
        on_subscribe_resource=impl.subscribe, on_unsubscribe_resource=impl.unsubscribe,
    )
    return server, impl


@dataclass
class McpServerHandle:
    url: str
    port: int
    _server: Any
    _thread: threading.Thread

    def stop(self, timeout_s: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)
        if self._thread.is_alive():  # a client holding a stream open: do not wait for it
            self._server.force_exit = True
            self._thread.join(timeout_s)


def serve(host: SessionHost, skills: Sequence[Skill], *, bind: str = "127.0.0.1", port: int = 0, token: str = "",
          decision_timeout_s: float = 30.0, version: str = "", start_timeout_s: float = 10.0,
          missions: MissionSubmitter | None = None) -> McpServerHandle:
    """Serve MCP over streamable HTTP at ``http://bind:port/mcp`` in a background thread.

    A non-loopback ``bind`` without a ``token`` is refused; with a token every
    request needs ``Authorization: Bearer <token>`` (401 otherwise).
    """
    import uvicorn

    if not is_loopback(bind) and not token:
        raise UsageError(f"MCP on {bind} (not loopback) needs a bearer token (mcp.token_env)", host=bind)
    server, _ = build_server(host, skills, decision_timeout_s=decision_timeout_s, version=version, missions=missions)
    kwargs: dict[str, Any] = {"streamable_http_path": "/mcp", "host": bind}
    if is_loopback(bind):
        # DNS-rebinding protection for every loopback bind (the SDK enables it only for 127.0.0.1,
        # localhost and ::1): a web page must not reach a token-less server through its own name.
        from mcp.server.transport_security import TransportSecuritySettings

        shown = f"[{bind.strip('[]')}]" if ":" in bind else bind
        hosts = sorted({f"{shown}:*", "127.0.0.1:*", "localhost:*", "[::1]:*"})
        kwargs["transport_security"] = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts,
            allowed_origins=[f"http://{h}" for h in hosts])
    if token:
        from mcp.server.auth.settings import AuthSettings

        kwargs["auth"] = AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None)
        kwargs["token_verifier"] = _BearerToken(token)
    app = server.streamable_http_app(**kwargs)
    uv = uvicorn.Server(uvicorn.Config(app, host=bind, port=port, log_level="warning", lifespan="on",
                                       timeout_graceful_shutdown=1))
    thread = threading.Thread(target=uv.run, name="mcp-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not uv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            uv.should_exit = True
            raise UsageError(f"the MCP server did not start on {bind}:{port}", host=bind, port=port)
        time.sleep(0.02)
    bound = uv.servers[0].sockets[0].getsockname()[1]
    shown = f"[{bind}]" if ":" in bind else bind
    return McpServerHandle(url=f"http://{shown}:{bound}/mcp", port=bound, _server=uv, _thread=thread)
