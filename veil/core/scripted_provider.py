"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests that cross the provider
boundary with real clients (litellm, the openai SDK, httpx).

It answers ``POST /v1/chat/completions`` (and ``/chat/completions``) from a script, records every
request, and behaves like a real provider where tests need it to:

- it refuses a prompt longer than ``context_window`` tokens with OpenAI's HTTP 400
  ``context_length_exceeded`` error (the body real OpenAI-compatible servers send, which litellm
  maps to its ``ContextWindowExceededError``);
- ``omit_usage=True`` leaves ``usage`` out of its answers, as some OpenAI-compatible servers
  (llama.cpp's older servers, proxies, self-hosted gateways) do;
- ``stream: true`` is answered with server-sent events (one chunk per word, then the finish
  chunk, then ``usage`` when ``stream_options.include_usage`` asks for it and usage is not
  omitted).

Prompt size is measured with tiktoken's ``cl100k_base`` (:func:`veil.core.tokens.cl100k_count`)
over each message's text, role and tool calls, plus 3 tokens per message and 3 for the reply
(OpenAI's documented accounting), unless another ``count`` is given.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from veil.core.tokens import cl100k_count, content_text

Reply = str | dict[str, Any]
"""A scripted answer: the assistant's text, or ``{"content": str | None, "tool_calls": [{"name",
"arguments": dict | str}]}``."""


def openai_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """cl100k_base tokens of a chat prompt under OpenAI's accounting: 3 per message, the tokens of
    its role, text, name and tool calls (name and arguments), and 3 for the reply."""
    total = 3
    for m in messages:
        total += (
            3
            + cl100k_count(str(m.get("role") or ""))
            + cl100k_count(content_text(m.get("content")))
        )
        if m.get("name"):
            total += 1 + cl100k_count(str(m["name"]))
        for call in m.get("tool_calls") or []:
            function = call.get("function") or {}
            total += cl100k_count(str(function.get("name") or ""))
            total += cl100k_count(str(function.get("arguments") or ""))
    return total


class ScriptedOpenAIServer:
    """An OpenAI-compatible chat server answering from a script (use as a context manager).

    Args:
        replies: answers in order, or a function ``(request_body) -> Reply`` called per request.
        context_window: prompts over this many tokens (per ``count``) get HTTP 400
            ``context_length_exceeded``; None accepts any size.
        omit_usage: leave ``usage`` out of every answer.
        count: prompt size of a request's ``messages`` (default :func:`openai_prompt_tokens`).
        model: the model name reported in answers (default: the request's).

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1`` once started.
        requests: every request received, in order: ``{"path", "body", "prompt_tokens",
            "refused"}``.

    Raises:
        AssertionError (to the client, as HTTP 500): a request arrives after the script is used
        up.
    """

    def __init__(
        self,
        replies: Iterable[Reply] | Callable[[dict[str, Any]], Reply] = (),
        *,
        context_window: int | None = None,
        omit_usage: bool = False,
        count: Callable[[list[dict[str, Any]]], int] = openai_prompt_tokens,
        model: str | None = None,
    ) -> None:
        self._script: Callable[[dict[str, Any]], Reply] | None = None
        self._replies: list[Reply] = []
        if callable(replies):
            self._script = replies
        else:
            self._replies = list(replies)
        self.context_window = context_window
        self.omit_usage = omit_usage
        self.count = count
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> ScriptedOpenAIServer:
        """Listen on a free port of 127.0.0.1 (a daemon thread serves)."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                server._handle(self)

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and free the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- answering ------------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self._script is not None:
            return self._script(body)
        if not self._replies:
            raise AssertionError("ScriptedOpenAIServer: the script is used up")
        return self._replies.pop(0)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        if not handler.path.rstrip("/").endswith("/chat/completions"):
            self._send(handler, 404, {"error": {"message": f"no route {handler.path}"}})
            return
        messages = body.get("messages") or []
        tokens = self.count(messages)
        refused = self.context_window is not None and tokens > self.context_window
        with self._lock:
            self.requests.append(
                {"path": handler.path, "body": body, "prompt_tokens": tokens, "refused": refused}
            )
            if refused:
                reply: Reply | None = None
            else:
                try:
                    reply = self._next_reply(body)
                except AssertionError as exc:
                    self._send(handler, 500, {"error": {"message": str(exc)}})
                    return
        if refused:
            self._send(
                handler,
                400,
                {
                    "error": {
                        "message": (
                            f"This model's maximum context length is {self.context_window} "
                            f"tokens. However, your messages resulted in {tokens} tokens. "
                            "Please reduce the length of the messages."
                        ),
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": "context_length_exceeded",
                    }
                },
            )
            return
        assert reply is not None
        message = _message(reply)
        completion_tokens = cl100k_count(message.get("content") or "") + sum(
            cl100k_count(c["function"]["arguments"]) for c in message.get("tool_calls") or []
        )
        usage = {
            "prompt_tokens": tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": tokens + completion_tokens,
        }
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        model = self.model or body.get("model") or "scripted"
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(handler, model, message, finish, usage if include else None)
            return
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if not self.omit_usage:
            answer["usage"] = usage
        self._send(handler, 200, answer)

    def _stream(
        self,
        handler: BaseHTTPRequestHandler,
        model: str,
        message: dict[str, Any],
        finish: str,
        usage: dict[str, int] | None,
    ) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk"}
        base.update({"created": int(time.time()), "model": model})

        def event(choices: list[dict[str, Any]], **extra: Any) -> None:
            data = json.dumps({**base, "choices": choices, **extra})
            handler.wfile.write(f"data: {data}\n\n".encode())

        text = message.get("content") or ""
        words = text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
            event([{"index": 0, "delta": delta, "finish_reason": None}])
        if message.get("tool_calls"):
            calls = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
            event([{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}])
        event([{"index": 0, "delta": {}, "finish_reason": finish}])
        if usage is not None and not self.omit_usage:
            event([], usage=usage)
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def _message(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    calls = []
    for call in reply.get("tool_calls") or []:
        arguments = call.get("arguments", {})
        calls.append(
            {
                "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    if calls:
        message["tool_calls"] = calls
    return message
