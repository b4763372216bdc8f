"""A scripted OpenAI-compatible server on 127.0.0.1 that records every request, for tests that
must cross the real network boundary (litellm, the openai SDK, a ``veil`` subprocess).

::

    with ScriptedOpenAIServer(["Hello"]) as server:
        ...  # point a provider's base_url at server.url
        assert server.requests[0].api_key == "sk-..."

``POST <anything>/chat/completions`` answers the next scripted reply (a plain answer, or a dict
``{"content": str | None, "tool_calls": [{"name", "arguments"}]}`` as for
:class:`veil.core.testing.ScriptedModel`), then ``default`` once the script runs out; a request
with ``"stream": true`` gets the same answer as server-sent events. ``GET <anything>/models``
lists one model. Anything else is a 404 with an OpenAI-shaped error body.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordedRequest:
    """One request the server received.

    Attributes:
        method, path: as sent (``POST``, ``/v1/chat/completions``).
        headers: header names lower-cased -> value.
        body: the parsed JSON body (None when there was none or it was not JSON).
    """

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None

    @property
    def api_key(self) -> str | None:
        """The credential the request carried: the bearer token of ``Authorization``, else
        ``x-api-key`` / ``api-key`` (Anthropic's and Azure's headers), else None."""
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[len("bearer ") :].strip()
        return self.headers.get("x-api-key") or self.headers.get("api-key")

    def text(self) -> str:
        """Headers and body as one string, to search for a secret anywhere in the request."""
        return json.dumps({"path": self.path, "headers": self.headers, "body": self.body})


class ScriptedOpenAIServer:
    """An OpenAI-compatible chat-completions endpoint on ``127.0.0.1`` (a free port).

    Args:
        replies: answers given in order (see the module docstring).
        default: the answer once ``replies`` are used up.
        model: the model name reported in answers.

    Attributes:
        requests: every :class:`RecordedRequest`, in arrival order.
        url: base URL to use as a provider's ``base_url`` (``http://127.0.0.1:<port>/v1``).
    """

    def __init__(
        self, replies: list[Any] | None = None, default: str = "ok", model: str = "scripted"
    ) -> None:
        self._replies = list(replies or [])
        self.default = default
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedOpenAIServer:
        """Serve on a daemon thread; returns self."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (new connections are then refused)."""
        if self._thread is not None:  # shutdown() waits for serve_forever, so only once started
            self._httpd.shutdown()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, *replies: Any) -> None:
        """Queue more replies."""
        with self._lock:
            self._replies.extend(replies)

    def api_keys(self) -> list[str | None]:
        """The credential of every recorded request (see :attr:`RecordedRequest.api_key`)."""
        with self._lock:
            return [r.api_key for r in self.requests]

    def saw(self, secret: str) -> bool:
        """Whether ``secret`` appears anywhere in any request (headers or body)."""
        with self._lock:
            return any(secret in r.text() for r in self.requests)

    # -- the handler ------------------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> Any:
        with self._lock:
            self.requests.append(request)
            if request.path.rstrip("/").endswith("/chat/completions"):
                return self._replies.pop(0) if self._replies else self.default
            return None

    def _message(self, reply: Any) -> tuple[dict[str, Any], str]:
        if isinstance(reply, str):
            return {"role": "assistant", "content": reply}, "stop"
        calls = []
        for n, call in enumerate(reply.get("tool_calls") or []):
            arguments = call.get("arguments", {})
            calls.append(
                {
                    "id": call.get("id") or f"call_{len(self.requests)}_{n}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
            )
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        if calls:
            message["tool_calls"] = calls
        return message, "tool_calls" if calls else "stop"

    def _completion(self, reply: Any) -> dict[str, Any]:
        message, finish = self._message(reply)
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }

    def _chunks(self, reply: Any) -> Iterator[dict[str, Any]]:
        message, finish = self._message(reply)
        base = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
        }
        delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            delta["tool_calls"] = [
                {"index": i, **call} for i, call in enumerate(message["tool_calls"])
            ]
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet: tests read .requests
                pass

            def _send_json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                request = RecordedRequest(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                reply = server._record(request)
                path = self.path.split("?", 1)[0].rstrip("/")
                if reply is not None and self.command == "POST":
                    if isinstance(body, dict) and body.get("stream"):
                        self._stream(reply)
                    else:
                        self._send_json(200, server._completion(reply))
                elif self.command == "GET" and path.endswith("/models"):
                    self._send_json(
                        200, {"object": "list", "data": [{"id": server.model, "object": "model"}]}
                    )
                else:
                    self._send_json(
                        404, {"error": {"message": f"no route {path}", "type": "not_found"}}
                    )

            def _stream(self, reply: Any) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in server._chunks(reply):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = _handle  # noqa: N815 - http.server's names

        return Handler
