"""A local OpenAI-compatible chat endpoint for tests (stdlib only, 127.0.0.1, a free port).

Each ``POST /v1/chat/completions`` (or ``/chat/completions``) consumes the next
scripted behaviour:

* ``{"tool_calls": [{"name": ..., "arguments": {...} | "raw", "id": ...}], "content": str | None}``
  (``"id": None`` omits the id; a default ``call_<request>_<i>`` otherwise);
* ``{"content": "text"}``, optionally with ``"finish_reason"`` (e.g. ``"length"``) and ``"usage"``;
* ``{"status": 429, "retry_after": 0.05}``, ``{"status": 500}``, ``{"status": 400, "message": ...}``;
* ``{"delay_s": 3.0, ...}``: sleep first (to trigger client timeouts), then behave as the rest says;
* ``{"empty_choices": True}``; ``{"body": "not json"}`` (sent as application/json).

Every normal reply carries usage numbers. Running out of script answers HTTP
500 with a body saying so. ``requests`` holds every received body (parsed
JSON, or the raw text), ``auth_headers`` every Authorization header (None
when absent), ``paths`` every path.
"""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI", "DEFAULT_USAGE"]

DEFAULT_USAGE = {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
_PATHS = ("/v1/chat/completions", "/chat/completions")


class FakeOpenAI:
    def __init__(self, script: list[dict[str, Any]]) -> None:
        self._script: deque[dict[str, Any]] = deque(script)
        self._lock = threading.Lock()
        self.requests: list[Any] = []
        self.auth_headers: list[str | None] = []
        self.paths: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> "FakeOpenAI":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    # -- one request -------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        with self._lock:
            self.requests.append(body)
            self.auth_headers.append(h.headers.get("Authorization"))
            self.paths.append(h.path)
            number = len(self.requests)
            behaviour = self._script.popleft() if self._script else None
        if h.path.split("?")[0] not in _PATHS:
            return self._send(h, 404, {"error": {"message": f"FakeOpenAI: no route {h.path}", "type": "not_found"}})
        if behaviour is None:
            return self._send(h, 500, {"error": {
                "message": f"FakeOpenAI: script exhausted (request {number} has no scripted behaviour)",
                "type": "fake_script_exhausted"}})
        if behaviour.get("delay_s"):
            time.sleep(float(behaviour["delay_s"]))
        status = int(behaviour.get("status", 200))
        if status != 200:
            headers = {}
            if "retry_after" in behaviour:
                headers["Retry-After"] = str(behaviour["retry_after"])
            message = behaviour.get("message", f"FakeOpenAI scripted status {status}")
            return self._send(h, status, {"error": {"message": message, "type": "scripted", "code": status}},
                              headers)
        if "body" in behaviour:
            return self._send_raw(h, 200, str(behaviour["body"]).encode(), behaviour.get("content_type",
                                                                                        "application/json"))
        model = body.get("model", "") if isinstance(body, dict) else ""
        reply: dict[str, Any] = {"id": f"chatcmpl-fake-{number}", "object": "chat.completion", "created": 0,
                                 "model": model, "usage": behaviour.get("usage", DEFAULT_USAGE)}
        if behaviour.get("empty_choices"):
            reply["choices"] = []
            return self._send(h, 200, reply)
        message: dict[str, Any] = {"role": "assistant", "content": behaviour.get("content")}
        calls = []
        for i, c in enumerate(behaviour.get("tool_calls") or ()):
            args = c.get("arguments", {})
            call: dict[str, Any] = {"type": "function", "function": {
                "name": c["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}}
            call_id = c.get("id", f"call_{number}_{i}")
            if call_id is not None:
                call["id"] = call_id
            calls.append(call)
        if calls:
            message["tool_calls"] = calls
        finish = behaviour.get("finish_reason", "tool_calls" if calls else "stop")
        reply["choices"] = [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}]
        self._send(h, 200, reply)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        FakeOpenAI._send_raw(h, status, json.dumps(payload).encode(), "application/json", headers)

    @staticmethod
    def _send_raw(h: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str,
                  headers: dict[str, str] | None = None) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", content_type)
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass
