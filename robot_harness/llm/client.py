"""A chat client for any OpenAI-compatible endpoint, with our retries and our records.

``ChatClient`` wraps ``openai.OpenAI`` (its own retries switched off) and turns
every call, successful or not, into one ``LLMCall`` record that can be
journaled as it is. What it guarantees:

* The API key is read once, when the client is built, and never appears in a
  record, a log line, an exception message or a ``repr`` (it is also scrubbed
  from anything a server echoes back).
* Retries are bounded and typed: 429, 408/409, 5xx, timeouts and connection
  errors are retried at most ``max_retries`` times with exponential backoff
  (a 429/5xx ``Retry-After`` in seconds is honoured, capped by
  ``backoff_max_s``); any other 4xx is never retried. No jitter, so a run with
  an injected ``sleep`` is reproducible.
* Every failure raises an ``LLMError`` subclass carrying the ``LLMCall`` of the
  failed attempt(s) as ``.call``; nothing is signalled by returning ``None``.
* A reply cut off by the token limit (``finish_reason == "length"``) is a
  result, not an error: the caller decides what a truncated reply means.

ROS-free: nothing here imports rclpy. ``openai`` is imported when a client is
built, so records and replays work where it is not installed.
"""
from __future__ import annotations

import ipaddress
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core.contracts import CompleteFn
from ..core.errors import HarnessError, RefusalError, UsageError
from ..core.journal import REDACTED, default_redactor
from ..core.records import FORMAT_VERSION

__all__ = [
    "DEFAULT_BASE_URL",
    "LOCAL_PLACEHOLDER_KEY",
    "LLMConfig",
    "LLMCall",
    "ChatResult",
    "ChatClient",
    "ChatCompleteFn",
    "chat_complete_fn",
    "redact_model_io",
    "endpoint_of",
    "LLMError",
    "LLMConfigError",
    "LLMUnavailable",
    "LLMRateLimited",
    "LLMRequestRejected",
    "LLMBadResponse",
]

_log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
LOCAL_PLACEHOLDER_KEY = "not-needed"
"""Sent as the bearer token to a loopback server when no key is configured."""

_RETRY_STATUS = frozenset({408, 409, 429})
"""Retried besides every 5xx: request timeout, conflict (lock contention), rate limit."""


# --------------------------------------------------------------------------- errors


class LLMConfigError(UsageError):
    """The LLM client cannot be configured (no model, no API key, unreadable key file, bad URL)."""

    code = "llm_config_invalid"


class LLMError(HarnessError):
    """Base of the errors a model call raises; ``call`` is the record of the failed attempt(s), to journal."""

    call: "LLMCall"

    def __init__(self, message: str, *, call: "LLMCall", **details: Any) -> None:
        super().__init__(message, **details)
        self.call = call


class LLMUnavailable(LLMError, RefusalError):
    """The endpoint could not be reached or kept failing (connection error, timeout, 5xx) after retries."""

    code = "llm_unavailable"


class LLMRateLimited(LLMUnavailable):
    """The endpoint still answered 429 after every retry."""

    code = "llm_rate_limited"


class LLMRequestRejected(LLMError, UsageError):
    """The endpoint refused the request (400/401/403/404/422 ...); sending it again cannot help."""

    code = "llm_request_rejected"


class LLMBadResponse(LLMError, RefusalError):
    """The endpoint answered 2xx with something that is not a usable chat completion."""

    code = "llm_bad_response"


# --------------------------------------------------------------------------- configuration


def _is_loopback(base_url: str) -> bool:
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_of(base_url: str) -> str:
    """``host:port`` of a URL: no scheme, credentials, path or query (what records may show)."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme, 0)
    return f"{host}:{port}"


class LLMConfig(BaseModel):
    """How to reach the model. Resolved once, when constructed:

    ``base_url`` empty: ``OPENAI_BASE_URL`` from the environment, else the
    OpenAI default. ``model`` empty: ``ROBOT_HARNESS_MODEL``, else
    ``LLMConfigError``. The key itself is never part of the configuration: it
    is read by ``ChatClient`` from ``api_key_file`` (which wins) or from the
    environment variable named by ``api_key_env``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = ""
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    api_key_file: str = ""
    timeout_s: float = Field(default=60.0, gt=0.0)
    max_retries: int = Field(default=2, ge=0, le=10)
    backoff_initial_s: float = Field(default=0.5, ge=0.0)
    backoff_max_s: float = Field(default=8.0, ge=0.0)
    max_tokens: int = Field(default=1024, ge=1)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = 0
    max_output_chars: int = Field(default=20000, ge=1)
    """Strings longer than this are cut in ``LLMCall.response`` (and in planner text)."""

    @model_validator(mode="before")
    @classmethod
    def _resolve_from_environment(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if not data.get("base_url"):
            data["base_url"] = os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        parts = urlsplit(str(data["base_url"]))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise LLMConfigError("base_url must be an http(s) URL with a host",
                                 endpoint=endpoint_of(str(data["base_url"])))
        if not data.get("model"):
            model = os.environ.get("ROBOT_HARNESS_MODEL", "").strip()
            if not model:
                raise LLMConfigError("no model configured: pass --model NAME or set ROBOT_HARNESS_MODEL (LLMConfig.model)",
                                     env="ROBOT_HARNESS_MODEL")
            data["model"] = model
        return data

    @property
    def endpoint(self) -> str:
        return endpoint_of(self.base_url)


def _read_api_key(config: LLMConfig) -> str:
    if config.api_key_file:
        path = Path(config.api_key_file).expanduser()
        try:
            key = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise LLMConfigError(f"cannot read the API key file {str(path)!r}: {type(exc).__name__}",
                                 api_key_file=str(path)) from None
        if not key:
            raise LLMConfigError(f"the API key file {str(path)!r} is empty", api_key_file=str(path))
        return key
    key = os.environ.get(config.api_key_env, "").strip()
    if key:
        return key
    if _is_loopback(config.base_url):
        return LOCAL_PLACEHOLDER_KEY
    raise LLMConfigError(
        f"no API key for {config.endpoint}: set the environment variable {config.api_key_env} "
        "or LLMConfig.api_key_file",
        env=config.api_key_env, endpoint=config.endpoint,
    )


# --------------------------------------------------------------------------- records


class LLMCall(BaseModel):
    """One model call as the journal keeps it: what was sent, what came back, what it cost.

    ``request`` and ``response`` are redacted (``redact_model_io``); strings in
    ``response`` longer than ``max_output_chars`` are cut and ``truncated`` is
    set. ``latency_ms`` is the time spent in requests, summed over attempts
    (backoff sleeps excluded; they are listed in ``retries``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["llm_call"] = "llm_call"
    format_version: int = FORMAT_VERSION
    model: str
    base_url: str
    """``host:port`` only."""
    request: dict[str, Any] = Field(default_factory=dict)
    response: dict[str, Any] | None = None
    truncated: bool = False
    usage: dict[str, int] = Field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0,
                                                           "total_tokens": 0})
    latency_ms: float = 0.0
    attempts: int = 0
    retries: tuple[dict[str, Any], ...] = ()
    """One entry per retried attempt: ``{attempt, reason, status, delay_s}``."""
    finish_reason: str | None = None
    error: dict[str, Any] | None = None
    """``{"code", "message", "status"}`` of the final failure, or None."""


class ChatResult(BaseModel):
    """The first choice of a completion, as plain data, with the record of the call.

    ``message`` is ``{"role", "content", "tool_calls"}``; each tool call is
    ``{"id", "type", "function": {"name", "arguments"}}`` with ``arguments``
    the raw string the model produced (``id`` may be None if the server sent none).
    """

    model_config = ConfigDict(frozen=True)

    message: dict[str, Any]
    finish_reason: str | None
    call: LLMCall


def _redact_json_text(text: str) -> str:
    """JSON inside a string (tool-call arguments, a JSON message) redacted like a payload; other text as is."""
    if not text.lstrip().startswith(("{", "[")):
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    redacted = default_redactor({"v": parsed})["v"]
    if redacted == parsed:
        return text
    return json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))


def _redact_embedded(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _redact_json_text(v) if k in ("arguments", "content") and isinstance(v, str)
                else _redact_embedded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_embedded(v) for v in value]
    return value


def redact_model_io(payload: dict[str, Any]) -> dict[str, Any]:
    """``default_redactor`` semantics for model I/O.

    The journal redacts tool arguments as parsed objects; in raw model I/O the
    arguments (and a JSON message content) are strings, so those strings are
    parsed, redacted the same way and re-serialized (left verbatim when nothing
    in them is secret).
    """
    return _redact_embedded(default_redactor(payload))


def _cut(value: Any, limit: int) -> tuple[Any, bool]:
    if isinstance(value, str):
        return (value[:limit], True) if len(value) > limit else (value, False)
    if isinstance(value, dict):
        out, cut = {}, False
        for k, v in value.items():
            out[k], c = _cut(v, limit)
            cut = cut or c
        return out, cut
    if isinstance(value, list):
        items = [_cut(v, limit) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


def _make_scrubber(secret: str) -> Callable[[Any], Any]:
    """Replaces the key anywhere in strings (a server may echo it); a closure so no attribute holds it."""

    def scrub(value: Any) -> Any:
        if not secret:
            return value
        if isinstance(value, str):
            return value.replace(secret, REDACTED)
        if isinstance(value, dict):
            return {scrub(k): scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [scrub(v) for v in value]
        return value

    return scrub


def _usage(body: Any) -> dict[str, int]:
    raw = body.get("usage") if isinstance(body, dict) else None
    raw = raw if isinstance(raw, dict) else {}

    def count(key: str) -> int:
        v = raw.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

    return {k: count(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


# --------------------------------------------------------------------------- the client


@dataclass(frozen=True)
class _Failure:
    error: type[LLMError]
    reason: str
    """Short, for logs and the retry list: timeout | connection | http 503 | rate limited ..."""
    message: str
    retryable: bool
    status: int | None = None
    body: Any = None
    retry_after_s: float | None = None


def _retry_after(headers: Any) -> float | None:
    """``Retry-After`` in seconds (``retry-after-ms`` first); an HTTP date or garbage counts as absent."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except (TypeError, ValueError):
            continue
        if seconds >= 0.0:
            return seconds
    return None


class ChatClient:
    """Chat completions against one endpoint and model (see the module docstring for the guarantees).

    ``clock_monotonic`` and ``sleep`` are injectable so tests measure and skip
    backoff without waiting.
    """

    def __init__(self, config: LLMConfig, *, clock_monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        try:
            import openai
        except ImportError:
            raise LLMConfigError("the openai package is not installed (pip install openai)") from None
        self.config = config
        self._clock = clock_monotonic
        self._sleep = sleep
        key = _read_api_key(config)
        self._scrub = _make_scrubber("" if key == LOCAL_PLACEHOLDER_KEY else key)
        self._sdk = openai
        self._openai = openai.OpenAI(base_url=config.base_url, api_key=key, timeout=config.timeout_s, max_retries=0)

    @property
    def endpoint(self) -> str:
        """``host:port`` of the endpoint."""
        return self.config.endpoint

    def __repr__(self) -> str:
        return f"ChatClient(model={self.config.model!r}, endpoint={self.endpoint!r})"

    def close(self) -> None:
        """Close the HTTP connection pool (safe to call twice)."""
        self._openai.close()

    def __enter__(self) -> "ChatClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one call ------------------------------------------------------------

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 tool_choice: str = "auto") -> ChatResult:
        """One chat completion: the first choice, or a typed ``LLMError`` (with ``.call``)."""
        cfg = self.config
        params: dict[str, Any] = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature,
                                  "max_tokens": cfg.max_tokens}
        if cfg.seed is not None:
            params["seed"] = cfg.seed
        if tools:
            params["tools"] = tools
            params["tool_choice"] = tool_choice
        request_record = {k: v for k, v in params.items() if k != "model"}

        attempts, latency_s = 0, 0.0
        retries: list[dict[str, Any]] = []
        while True:
            attempts += 1
            started = self._clock()
            try:
                raw = self._openai.chat.completions.with_raw_response.create(**params)
                status, text = raw.http_response.status_code, raw.http_response.text
                failure = None
            except self._sdk.OpenAIError as exc:
                failure = self._classify(exc)
            finally:
                latency_s += self._clock() - started
            if failure is None:
                break
            if not failure.retryable or attempts > cfg.max_retries:
                self._raise(failure, request_record, attempts, latency_s, retries)
            delay = self._backoff(attempts, failure)
            retries.append({"attempt": attempts, "reason": failure.reason, "status": failure.status,
                            "delay_s": round(delay, 3)})
            _log.warning("LLM %s at %s: %s on attempt %d; retrying in %.2fs", cfg.model, self.endpoint,
                         failure.reason, attempts, delay)
            self._sleep(delay)

        def record(response: Any, *, finish_reason: str | None = None,
                   error: dict[str, Any] | None = None) -> LLMCall:
            return self._record(request_record, response, attempts=attempts, latency_s=latency_s, retries=retries,
                                finish_reason=finish_reason, error=error)

        try:
            body = json.loads(text)
        except ValueError:
            body = None
        problem = _completion_problem(body)
        if problem is not None:
            response = body if isinstance(body, dict) else {"status": status, "raw_text": text}
            why = self._scrub(f"{cfg.model} at {self.endpoint}: {problem}")
            call = record(response, error={"code": LLMBadResponse.code, "message": why, "status": status})
            raise LLMBadResponse(why, call=call, model=cfg.model, endpoint=self.endpoint, status=status)
        choice = body["choices"][0]
        finish_reason = choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None
        return ChatResult(message=_plain_message(choice["message"]), finish_reason=finish_reason,
                          call=record(body, finish_reason=finish_reason))

    # -- helpers ---------------------------------------------------------------

    def _classify(self, exc: Exception) -> _Failure:
        sdk = self._sdk
        text = self._scrub(str(exc))[:500]
        if isinstance(exc, sdk.APITimeoutError):
            return _Failure(LLMUnavailable, "timeout", f"no answer within {self.config.timeout_s}s", True)
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f" ({type(cause).__name__})" if cause is not None else ""
            return _Failure(LLMUnavailable, "connection", f"connection failed{detail}", True)
        if isinstance(exc, sdk.APIStatusError):
            status, body = exc.status_code, exc.body
            after = _retry_after(exc.response.headers)
            if status == 429:
                return _Failure(LLMRateLimited, "rate limited", text, True, status, body, after)
            if status >= 500 or status in _RETRY_STATUS:
                return _Failure(LLMUnavailable, f"http {status}", text, True, status, body, after)
            return _Failure(LLMRequestRejected, f"http {status}", text, False, status, body)
        return _Failure(LLMUnavailable, "client error", f"{type(exc).__name__}: {text}", False)

    def _backoff(self, attempts: int, failure: _Failure) -> float:
        cfg = self.config
        if failure.retry_after_s is not None:
            return min(failure.retry_after_s, cfg.backoff_max_s)
        return min(cfg.backoff_initial_s * (2.0 ** (attempts - 1)), cfg.backoff_max_s)

    def _raise(self, failure: _Failure, request_record: dict[str, Any], attempts: int, latency_s: float,
               retries: list[dict[str, Any]]) -> NoReturn:
        cfg = self.config
        message = self._scrub(f"{cfg.model} at {self.endpoint}: {failure.reason} after {attempts} attempt(s): "
                              f"{failure.message}")
        response = None if failure.status is None else {"status": failure.status, "body": failure.body}
        call = self._record(request_record, response, attempts=attempts, latency_s=latency_s, retries=retries,
                            finish_reason=None,
                            error={"code": failure.error.code, "message": message, "status": failure.status})
        _log.warning("LLM call failed: %s", message)
        raise failure.error(message, call=call, model=cfg.model, endpoint=self.endpoint, status=failure.status,
                            attempts=attempts)

    def _record(self, request_record: dict[str, Any], response: Any, *, attempts: int, latency_s: float,
                retries: list[dict[str, Any]], finish_reason: str | None, error: dict[str, Any] | None) -> LLMCall:
        truncated, usage = False, _usage(response)
        if response is not None:
            response, truncated = _cut(redact_model_io(response), self.config.max_output_chars)
            response = self._scrub(response)
        return LLMCall(
            model=self.config.model, base_url=self.endpoint,
            request=self._scrub(redact_model_io(json.loads(json.dumps(request_record, default=str)))),
            response=response, truncated=truncated, usage=usage, latency_ms=round(latency_s * 1000.0, 3),
            attempts=attempts, retries=tuple(retries), finish_reason=finish_reason,
            error=self._scrub(error) if error is not None else None,
        )


def _completion_problem(body: Any) -> str | None:
    """Why a 2xx body is not a usable chat completion, or None."""
    if body is None:
        return "the response body is not JSON"
    if not isinstance(body, dict):
        return f"the response body is a JSON {type(body).__name__}, not an object"
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return "the response has no choices"
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        return "the first choice has no message"
    message = choice["message"]
    if message.get("content") is not None and not isinstance(message["content"], str):
        return "the message content is not text"
    calls = message.get("tool_calls")
    if calls is None:
        return None
    if not isinstance(calls, list):
        return "tool_calls is not a list"
    for i, c in enumerate(calls):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return f"tool call {i} has no function name"
    return None


def _plain_message(message: dict[str, Any]) -> dict[str, Any]:
    calls = []
    for c in message.get("tool_calls") or []:
        fn = c["function"]
        args = fn.get("arguments")
        if args is None:
            args = ""
        elif not isinstance(args, str):  # some servers send the object itself
            args = json.dumps(args, ensure_ascii=False)
        calls.append({"id": c.get("id") if isinstance(c.get("id"), str) and c.get("id") else None,
                      "type": c.get("type") or "function",
                      "function": {"name": fn["name"], "arguments": args}})
    return {"role": message.get("role") or "assistant", "content": message.get("content"), "tool_calls": calls}


# --------------------------------------------------------------------------- CompleteFn adapter


class ChatCompleteFn:
    """A ``CompleteFn`` over a ``ChatClient``: the messages it is given, nothing else, no tools.

    For the contract compiler and coverage reviewer, which build their own
    clean context. Returns the reply text ("" when the model sent none);
    client errors propagate. Every call's record is kept in ``calls``.
    """

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.calls: list[LLMCall] = []

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        try:
            result = self.client.complete(messages)
        except LLMError as exc:
            self.calls.append(exc.call)
            raise
        self.calls.append(result.call)
        content = result.message.get("content")
        return content if isinstance(content, str) else ""

    @property
    def last_call(self) -> LLMCall | None:
        return self.calls[-1] if self.calls else None


def chat_complete_fn(client: ChatClient) -> CompleteFn:
    """``LLMContractCompiler(complete=chat_complete_fn(client))`` (returns a ``ChatCompleteFn``)."""
    return ChatCompleteFn(client)
