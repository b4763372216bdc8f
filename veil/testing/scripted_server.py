"""A scripted model server on 127.0.0.1 that records every request, for tests that cross the
provider boundary for real: litellm or the openai SDK in the test's process, or veil in another
process (``veil -p``, ``veil serve``, ``veil proxy``) reaching it as it would reach a provider. It
speaks OpenAI chat completions, Anthropic Messages and OpenAI Responses, each answered from the
same script.

::

    with ScriptedOpenAIServer(["Hello", {"tool_calls": [{"name": "ls", "arguments": {}}]}]) as s:
        configure_project(project, s)  # or: {"providers": {"local": s.provider()}} in auth.json
        ...  # veil answers "Hello", then asks for the tool
        assert s.requests[0].api_key == "sk-scripted-test-key"
        assert s.requests[0].body["messages"][-1]["content"] == "hi"

What it answers:

- ``POST <anything>/chat/completions``: the next scripted reply as a chat completion, or, when
  the request asks for ``"stream": true``, as server-sent events (one chunk per word, the tool
  calls, the finish chunk, then a ``usage`` chunk when ``stream_options.include_usage`` asks for
  it). Replies are a list given in order (then ``default``; without one, HTTP 500 naming the
  request), or a function of the request body. A reply is a str (the assistant's text), a dict
  ``{"content": str | None, "tool_calls": [{"name", "arguments": dict | str, "id"?}]}`` (as for
  :class:`veil.testing.scripted_model.ScriptedModel`), or a :class:`Reply` for the special cases
  (content sent as raw JSON text, an answer held back until an event is set, an HTTP error such
  as a 401 or a 429 in OpenAI's error shape).
- A prompt over ``context_window`` tokens gets an HTTP 400 and uses no reply: OpenAI's
  ``context_length_exceeded`` error (the body real OpenAI-compatible servers send, which litellm
  maps to its ``ContextWindowExceededError``), or with ``refusal`` another provider's body
  (:data:`REFUSALS`: Anthropic's "prompt is too long", as gateways relay it; llama.cpp's
  server's ``exceed_context_size_error``).
- ``usage`` counts the prompt with ``count`` (by default :func:`openai_prompt_tokens`) and the
  answer with tiktoken's ``cl100k_base``; ``omit_usage=True`` leaves it out, as some
  OpenAI-compatible servers (older llama.cpp servers, proxies, self-hosted gateways) do.
  ``cached`` adds ``prompt_tokens_details.cached_tokens`` (OpenAI's prompt-cache figure).
- ``POST <anything>/messages``: the reply in Anthropic's Messages shape (streamed as Anthropic's
  events when asked), with a signed ``thinking`` block first when the request turns thinking on;
  ``POST <anything>/messages/count_tokens`` answers ``{"input_tokens": n}``. A prompt whose
  tokens plus ``max_tokens`` exceed ``context_window`` gets Anthropic's 400
  ``invalid_request_error`` ("prompt is too long: N tokens > W maximum" when the prompt alone
  does, else "input length and `max_tokens` exceed context limit").
- ``POST <anything>/responses``: the reply as OpenAI Responses output items (a ``reasoning`` item
  when the request sets ``reasoning``, a ``message``, ``function_call`` items), streamed as
  Responses events when asked. Over ``context_window``: 400 ``context_length_exceeded``.
  (:mod:`veil.testing.scripted_shapes` builds both shapes.)
- ``GET <anything>/models`` lists one model. Anything else is a 404 with an OpenAI-shaped error.

:meth:`ScriptedOpenAIServer.problems` runs :mod:`veil.testing.provider_checks` on every recorded
request: what the real provider would refuse (unpaired tool calls, a changed thinking signature,
too many cache breakpoints, a prompt over the window...).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from os import PathLike
from pathlib import Path
from typing import Any

from veil.core.models.tokens import cl100k_count, content_text

SCRIPTED_API_KEY = "sk-scripted-test-key"
"""The key :meth:`ScriptedOpenAIServer.provider` puts in an ``auth.json`` provider entry."""

WAIT_LIMIT_S = 60.0
"""Longest a :class:`Reply` waits for its ``wait`` event (seconds) before it is sent anyway, so a
test that forgets to set it fails on its assertions instead of hanging."""


@dataclass
class Reply:
    """One scripted answer.

    Attributes:
        content: the assistant's text (None: no text, as with tool calls only).
        tool_calls: ``[{"name": str, "arguments": dict | str, "id": str (optional)}]``; ids
            default to ``call_<request number>_<index>``.
        content_json: instead of ``content``, the JSON text of the content value, sent as is:
            ``'"ok \\\\ud800"'`` (a lone surrogate escape, which :mod:`json` never writes from a
            Python str).
        wait: an event the answer waits for (up to :data:`WAIT_LIMIT_S`) before it is sent, to
            keep a turn running while a test does something else. The request is recorded first.
        thinking: the text of the Anthropic thinking block / Responses reasoning summary sent
            when the request turns thinking or reasoning on (None: a default text).
        status: an HTTP error status to answer with instead (401, 429, 503...): the body is
            OpenAI's error shape, ``{"error": {"message": content, "type": ..., "code": ...}}``
            with ``error_code`` as its code.
        error_code: the ``code`` of that error (``invalid_api_key``, ``rate_limit_exceeded``...).
        repeat_call_fields: when streamed, each tool call's arguments come in three chunks that
            all repeat the call's ``id``, ``type`` and function ``name``, as some
            OpenAI-compatible servers send them (OpenAI sends them in the first chunk only).
    """

    content: str | None = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    content_json: str | None = None
    wait: threading.Event | None = None
    thinking: str | None = None
    status: int | None = None
    error_code: str | None = None
    repeat_call_fields: bool = False

    @classmethod
    def of(cls, value: Reply | str | dict[str, Any]) -> Reply:
        """A :class:`Reply` from a scripted value: itself, a str (the text), or a dict
        ``{"content", "tool_calls"}``.

        Raises:
            TypeError: ``value`` is none of these.
        """
        if isinstance(value, Reply):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, dict):
            return cls(
                value.get("content"),
                list(value.get("tool_calls") or []),
                thinking=value.get("thinking"),
            )
        raise TypeError(
            f"a scripted reply must be a str, a dict or a Reply, not {type(value).__name__}"
        )

    def content_value(self) -> str | None:
        """The content as the client will read it (``content_json`` decoded)."""
        if self.content_json is not None:
            return json.loads(self.content_json)
        return self.content


ReplyLike = Reply | str | dict[str, Any]
Script = Iterable[ReplyLike] | Callable[[dict[str, Any]], ReplyLike]


@dataclass
class RecordedRequest:
    """One request the server received.

    Attributes:
        method, path: as sent (``POST``, ``/v1/chat/completions``).
        headers: header names lower-cased -> value.
        body: the parsed JSON body (None when there was none or it was not JSON).
        prompt_tokens: the prompt's size: under the server's ``count`` for chat completions,
            :func:`~veil.testing.scripted_shapes.anthropic_prompt_tokens` /
            :func:`~veil.testing.scripted_shapes.responses_prompt_tokens` for the other two
            APIs; None for other routes.
        refused: whether the prompt was refused for exceeding ``context_window``.
    """

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    prompt_tokens: int | None = None
    refused: bool = False

    @property
    def api(self) -> str | None:
        """Which API the request spoke: ``chat``, ``anthropic``, ``responses`` (POSTs to those
        routes), else None."""
        if self.method != "POST":
            return None
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/chat/completions"):
            return "chat"
        if path.endswith("/messages"):
            return "anthropic"
        if path.endswith("/responses"):
            return "responses"
        return None

    def completion_limit(self) -> int | None:
        """The completion tokens the request asks room for (``max_tokens``,
        ``max_completion_tokens`` or ``max_output_tokens``), None when it names none."""
        body = self.body if isinstance(self.body, dict) else {}
        for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            value = body.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    @property
    def api_key(self) -> str | None:
        """The credential the request carried: the bearer token of ``Authorization``, else
        ``x-api-key`` / ``api-key`` (Anthropic's and Azure's headers), else None."""
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[len("bearer ") :].strip()
        return self.headers.get("x-api-key") or self.headers.get("api-key")

    def user_texts(self) -> list[str]:
        """The contents of the request's ``user`` messages, in order, less veil's context notes
        (:data:`veil.core.prompt.assemble.NOTE_PREFIX`: veil's own trailing messages, not the user's
        words)."""
        from veil.core.prompt.assemble import NOTE_PREFIX

        body = self.body if isinstance(self.body, dict) else {}
        messages = body.get("messages") or []
        return [
            str(m.get("content"))
            for m in messages
            if m.get("role") == "user" and not str(m.get("content") or "").startswith(NOTE_PREFIX)
        ]

    def text(self) -> str:
        """Path, headers and body as one string, to search for a secret anywhere in it."""
        return json.dumps({"path": self.path, "headers": self.headers, "body": self.body})


REFUSALS = ("openai", "anthropic", "llama.cpp")
"""The refusal bodies :class:`ScriptedOpenAIServer` can answer a prompt over its window with."""


def refusal_body(style: str, window: int, tokens: int) -> dict[str, Any]:
    """The HTTP 400 body a provider sends for a prompt of ``tokens`` over its ``window``.

    Args:
        style: ``"openai"``: OpenAI's error (``code`` ``context_length_exceeded``, "This
            model's maximum context length is ..."); ``"anthropic"``: Anthropic's error body
            ("prompt is too long: N tokens > M maximum"), which an OpenAI-compatible gateway
            relays as it came; ``"llama.cpp"``: llama.cpp server's (``type``
            ``exceed_context_size_error`` with ``n_prompt_tokens`` and ``n_ctx``).

    Raises:
        ValueError: an unknown ``style``.
    """
    if style == "openai":  # the wording and fields litellm's exception mapping reads
        return {
            "error": {
                "message": (
                    f"This model's maximum context length is {window} tokens. However, your "
                    f"messages resulted in {tokens} tokens. Please reduce the length of the "
                    "messages."
                ),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    if style == "anthropic":
        return {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {tokens} tokens > {window} maximum",
            },
        }
    if style == "llama.cpp":
        return {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": tokens,
                "n_ctx": window,
            }
        }
    raise ValueError(f"refusal: expected one of {', '.join(REFUSALS)}, got {style!r}")


def openai_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """cl100k_base tokens of a chat prompt under OpenAI's accounting: 3 per message, the tokens of
    its role, text, name (+1) and tool calls (name and arguments), and 3 for the reply.

    Source: OpenAI cookbook, "How to count tokens with tiktoken" (``num_tokens_from_messages``:
    ``tokens_per_message = 3``, ``tokens_per_name = 1``, "every reply is primed with 3 tokens").
    """
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
    """An OpenAI-compatible chat-completions endpoint on a free port of ``127.0.0.1`` (see the
    module docstring). The socket is bound on construction, so :attr:`url` is known before
    :meth:`start`; use it as a context manager (start, then stop).

    Args:
        replies: answers in order, or a function ``(request_body) -> reply`` called per request.
        default: the answer once the list of ``replies`` is used up; None answers HTTP 500
            with ``x-should-retry: false`` (so the openai SDK does not retry it).
        context_window: prompts over this many tokens (per ``count``) get HTTP 400
            ``context_length_exceeded``; None accepts any size.
        refusal: the body of that 400, as one of :data:`REFUSALS` sends it
            (:func:`refusal_body`; ``"openai"`` by default).
        omit_usage: leave ``usage`` out of every answer.
        count: prompt size of a request's ``messages`` (default :func:`openai_prompt_tokens`).
        model: the model name reported in answers and ``/models`` (default: the request's
            ``model``, or ``"scripted"``).
        cached: the prompt tokens reported as read from the provider's prompt cache
            (``usage.prompt_tokens_details.cached_tokens``): an int for every request, or a
            function ``(messages, prompt_tokens) -> int``; None (default) reports no such detail.
        count_completion: the completion room a chat or Responses request asks for
            (``max_tokens``, ``max_completion_tokens``, ``max_output_tokens``) counts against
            ``context_window`` with its prompt, as OpenAI counts it. Anthropic requests are
            always checked so (prompt + ``max_tokens``), as Anthropic's API checks them.

    Attributes:
        requests: every :class:`RecordedRequest`, in arrival order.
        url: ``http://127.0.0.1:<port>/v1``, a provider's ``base_url``.
        issued: the thinking signatures and encrypted reasoning handed out
            (:class:`veil.testing.scripted_shapes.Issued`).
    """

    def __init__(
        self,
        replies: Script = (),
        *,
        default: ReplyLike | None = None,
        context_window: int | None = None,
        refusal: str = "openai",
        omit_usage: bool = False,
        count: Callable[[list[dict[str, Any]]], int] = openai_prompt_tokens,
        model: str | None = None,
        cached: int | Callable[[list[dict[str, Any]], int], int] | None = None,
        count_completion: bool = False,
    ) -> None:
        from veil.testing.scripted_shapes import Issued

        self._script: Callable[[dict[str, Any]], ReplyLike] | None = None
        self._replies: list[ReplyLike] = []
        if callable(replies):
            self._script = replies
        else:
            self._replies = list(replies)
        self.default = default
        self.context_window = context_window
        refusal_body(refusal, 1, 2)  # refuse an unknown style now, not at the first refusal
        self.refusal = refusal
        self.omit_usage = omit_usage
        self.count = count
        self.model = model
        self.cached = cached
        self.count_completion = count_completion
        self.issued = Issued()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def provider(self, api_key: str = SCRIPTED_API_KEY) -> dict[str, Any]:
        """An ``auth.json`` provider entry pointing at this server: ``{"type": "openai",
        "base_url": url, "api_key": api_key}``."""
        return {"type": "openai", "base_url": self.url, "api_key": api_key}

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> ScriptedOpenAIServer:
        """Serve on a daemon thread; returns self."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (new connections are then refused). Idempotent."""
        if self._thread is not None:  # shutdown() waits for serve_forever, so only once started
            self._httpd.shutdown()
            self._thread = None
        if not self._closed:
            self._httpd.server_close()
            self._closed = True

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, *replies: ReplyLike) -> None:
        """Queue more replies after the existing ones (each as in ``replies``).

        Raises:
            TypeError: the server answers from a function of the request, not from a list.
        """
        if self._script is not None:
            raise TypeError("this ScriptedOpenAIServer answers from a function; it has no list")
        with self._lock:
            self._replies.extend(replies)

    # -- reading what arrived -------------------------------------------------------------------

    def api_keys(self) -> list[str | None]:
        """The credential of every recorded request (see :attr:`RecordedRequest.api_key`)."""
        with self._lock:
            return [r.api_key for r in self.requests]

    def saw(self, secret: str) -> bool:
        """Whether ``secret`` appears anywhere in any request (path, headers or body)."""
        with self._lock:
            return any(secret in r.text() for r in self.requests)

    def problems(self) -> list[str]:
        """What the real provider would have refused in the requests received so far
        (:meth:`check` on each), one line each: ``request 3 (anthropic): ...``; [] when every
        request would have been accepted."""
        with self._lock:
            recorded = list(self.requests)
        out = []
        for number, request in enumerate(recorded, 1):
            if request.api is None:
                continue
            found = self.check(request.api, request.body, request.headers)
            out += [f"request {number} ({request.api}): {p}" for p in found]
        return out

    def check(self, api: str, body: Any, headers: dict[str, str] | None = None) -> list[str]:
        """What the real provider would refuse ``body`` for, had it reached this server as an
        ``api`` request (``chat``, ``anthropic`` or ``responses``) with ``headers`` (names
        lower-cased): :mod:`veil.testing.provider_checks` for that API, with the thinking
        signatures and encrypted reasoning this server issued, and a prompt over
        ``context_window`` as the server counts it (with its completion room where
        :meth:`over_window` counts it). One line per problem; [] when it would be accepted.
        A test runs it on a recorded request it broke on purpose, to show the check can fail.

        Raises:
            ValueError: ``api`` is none of the three.
        """
        from veil.testing import provider_checks as checks
        from veil.testing import scripted_shapes as shapes

        headers = headers or {}
        if api == "chat":
            found = checks.chat_request_problems(body)
            messages = body.get("messages") if isinstance(body, dict) else None
            tokens = self.count(messages) if isinstance(messages, list) else None
        elif api == "anthropic":
            beta = headers.get("anthropic-beta", "")
            found = checks.anthropic_request_problems(body, beta, self.issued.signatures)
            tokens = shapes.anthropic_prompt_tokens(body) if isinstance(body, dict) else None
        elif api == "responses":
            found = checks.responses_request_problems(body, self.issued.encrypted)
            usable = isinstance(body, dict) and body.get("input") not in (None, [], "")
            tokens = shapes.responses_prompt_tokens(body) if usable else None
        else:
            raise ValueError(f"api: {api!r} is not one of chat, anthropic, responses")
        sized = RecordedRequest("POST", "", headers, body, tokens)
        if self.over_window(sized, api):
            found.append(
                f"prompt of {tokens} tokens (completion room {sized.completion_limit()}) over "
                f"the window of {self.context_window}"
            )
        return found

    def over_window(self, request: RecordedRequest, api: str) -> bool:
        """Whether ``request``'s prompt (with its completion room for Anthropic, and for the
        other APIs under ``count_completion``) exceeds ``context_window``."""
        if self.context_window is None or request.prompt_tokens is None:
            return False
        size = request.prompt_tokens
        if api == "anthropic" or self.count_completion:
            size += request.completion_limit() or 0
        return size > self.context_window

    # -- answering ------------------------------------------------------------------------------

    def _take(self, request: RecordedRequest) -> tuple[int, Reply | str | None]:
        """Record ``request``; return its number (1-based, in arrival order) and its reply:
        None when refused, an error text when the list of replies is used up. Recording and
        taking the next reply happen under one lock, so replies go out in arrival order."""
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            if request.refused:
                return number, None
            if self._script is None:
                if self._replies:
                    return number, Reply.of(self._replies.pop(0))
                if self.default is not None:
                    return number, Reply.of(self.default)
                return number, (
                    f"ScriptedOpenAIServer: the script is used up (request {number}, "
                    f"{request.method} {request.path})"
                )
        return number, Reply.of(self._script(request.body))  # outside the lock: may be slow

    def _message(self, reply: Reply, number: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content_value()}
        calls = []
        for index, call in enumerate(reply.tool_calls):
            arguments = call.get("arguments", {})
            calls.append(
                {
                    "id": call.get("id") or f"call_{number}_{index}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
            )
        if calls:
            message["tool_calls"] = calls
        return message

    def _refusal(self, tokens: int) -> dict[str, Any]:
        return refusal_body(self.refusal, int(self.context_window or 0), tokens)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet: tests read .requests
                pass

            def _send_json(
                self,
                status: int,
                payload: Any,
                *,
                raw: bytes | None = None,
                headers: dict[str, str] | None = None,
            ) -> None:
                data = raw if raw is not None else json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
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
                headers = {k.lower(): v for k, v in self.headers.items()}
                path = self.path.split("?", 1)[0].rstrip("/")
                request = RecordedRequest(self.command, self.path, headers, body)
                if self.command == "POST" and path.endswith("/chat/completions"):
                    self._chat(request)
                    return
                if self.command == "POST" and path.endswith("/messages/count_tokens"):
                    from veil.testing.scripted_shapes import anthropic_prompt_tokens

                    with server._lock:
                        server.requests.append(request)
                    tokens = anthropic_prompt_tokens(body if isinstance(body, dict) else {})
                    self._send_json(200, {"input_tokens": tokens})
                    return
                if self.command == "POST" and path.endswith("/messages"):
                    self._anthropic(request)
                    return
                if self.command == "POST" and path.endswith("/responses"):
                    self._responses(request)
                    return
                with server._lock:
                    server.requests.append(RecordedRequest(self.command, self.path, headers, body))
                if self.command == "GET" and path.endswith("/models"):
                    model = {"id": server.model or "scripted", "object": "model"}
                    self._send_json(200, {"object": "list", "data": [model]})
                else:
                    error = {"message": f"no route {self.command} {path}", "type": "not_found"}
                    self._send_json(404, {"error": error})

            def _chat(self, request: RecordedRequest) -> None:
                body = request.body
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    with server._lock:
                        server.requests.append(request)
                    error = {"message": "the body must be a JSON object with a messages list"}
                    self._send_json(400, {"error": {**error, "type": "invalid_request_error"}})
                    return
                request.prompt_tokens = tokens = server.count(body["messages"])
                request.refused = server.over_window(request, "chat")
                number, reply = server._take(request)
                if reply is None:
                    self._send_json(400, server._refusal(tokens))
                    return
                if isinstance(reply, str):
                    error = {"message": reply, "type": "server_error"}
                    # a used-up script is the test's mistake, not a passing failure: the openai
                    # SDK (and litellm through it) honours this header and does not retry
                    self._send_json(500, {"error": error}, headers={"x-should-retry": "false"})
                    return
                if reply.wait is not None:
                    reply.wait.wait(WAIT_LIMIT_S)
                if reply.status is not None:
                    kind = "invalid_request_error" if reply.status < 500 else "server_error"
                    error = {"message": reply.content or "", "type": kind, "code": reply.error_code}
                    self._send_json(reply.status, {"error": error})
                    return
                message = server._message(reply, number)
                completion_tokens = cl100k_count(message.get("content") or "") + sum(
                    cl100k_count(c["function"]["arguments"])
                    for c in message.get("tool_calls") or []
                )
                usage = {
                    "prompt_tokens": tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": tokens + completion_tokens,
                }
                if server.cached is not None:
                    cached = server.cached
                    hit = cached(body["messages"], tokens) if callable(cached) else cached
                    usage["prompt_tokens_details"] = {"cached_tokens": int(hit)}
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                base = {
                    "id": f"chatcmpl-{number}",
                    "created": int(time.time()),
                    "model": server.model or body.get("model") or "scripted",
                }
                if body.get("stream"):
                    asked = bool((body.get("stream_options") or {}).get("include_usage"))
                    include = asked and not server.omit_usage
                    self._stream(base, reply, message, finish, usage if include else None)
                    return
                answer: dict[str, Any] = {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                }
                if not server.omit_usage:
                    answer["usage"] = usage
                self._send_json(200, None, raw=_with_content(answer, message, reply))

            def _anthropic(self, request: RecordedRequest) -> None:
                from veil.testing import scripted_shapes as shapes

                body = request.body
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    with server._lock:
                        server.requests.append(request)
                    error = shapes.anthropic_error(
                        "invalid_request_error", "messages: Field required"
                    )
                    self._send_json(400, error)
                    return
                request.prompt_tokens = tokens = shapes.anthropic_prompt_tokens(body)
                request.refused = server.over_window(request, "anthropic")
                number, reply = server._take(request)
                if reply is None:  # Anthropic's two wordings: the prompt alone, or with room
                    limit = request.completion_limit() or 0
                    text = (
                        f"prompt is too long: {tokens} tokens > {server.context_window} maximum"
                        if tokens > (server.context_window or 0)
                        else f"input length and `max_tokens` exceed context limit: {tokens} + "
                        f"{limit} > {server.context_window}, decrease input length or "
                        f"`max_tokens` and try again"
                    )
                    self._send_json(400, shapes.anthropic_error("invalid_request_error", text))
                    return
                if isinstance(reply, str):
                    self._send_json(500, shapes.anthropic_error("api_error", reply))
                    return
                if reply.wait is not None:
                    reply.wait.wait(WAIT_LIMIT_S)
                model = server.model or body.get("model") or "scripted"
                message = shapes.anthropic_message(reply, number, body, server.issued, model)
                usage: dict[str, Any] = {
                    "input_tokens": tokens,
                    "output_tokens": shapes.anthropic_completion_tokens(message),
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                }
                if server.cached is not None:
                    cached = server.cached
                    hit = cached(body["messages"], tokens) if callable(cached) else cached
                    usage["cache_read_input_tokens"] = int(hit)
                    usage["input_tokens"] = tokens - int(hit)  # Anthropic's split of the prompt
                if body.get("stream"):
                    events = shapes.anthropic_events(message, usage)
                    self._send_events((e["type"], e) for e in events)
                    return
                self._send_json(200, {**message, "usage": usage})

            def _responses(self, request: RecordedRequest) -> None:
                from veil.testing import scripted_shapes as shapes

                body = request.body
                if not isinstance(body, dict) or body.get("input") in (None, [], ""):
                    with server._lock:
                        server.requests.append(request)
                    error = shapes.responses_error("invalid_request_error", "input: required")
                    self._send_json(400, error)
                    return
                request.prompt_tokens = tokens = shapes.responses_prompt_tokens(body)
                request.refused = server.over_window(request, "responses")
                number, reply = server._take(request)
                if reply is None:
                    text = (
                        f"Your input exceeds the context window of this model "
                        f"({tokens} tokens > {server.context_window})."
                    )
                    error = shapes.responses_error(
                        "invalid_request_error", text, "context_length_exceeded"
                    )
                    self._send_json(400, error)
                    return
                if isinstance(reply, str):
                    self._send_json(500, shapes.responses_error("server_error", reply))
                    return
                if reply.wait is not None:
                    reply.wait.wait(WAIT_LIMIT_S)
                items = shapes.responses_output(reply, number, body, server.issued)
                output_tokens = shapes.responses_completion_tokens(items)
                cached = server.cached
                hit = 0
                if cached is not None:
                    hit = int(cached([], tokens) if callable(cached) else cached)
                usage = {
                    "input_tokens": tokens,
                    "input_tokens_details": {"cached_tokens": hit},
                    "output_tokens": output_tokens,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": tokens + output_tokens,
                }
                response = shapes.responses_response(
                    number, body, items, None if server.omit_usage else usage
                )
                if body.get("stream"):
                    events = shapes.responses_events(response)
                    self._send_events((e["type"], e) for e in events)
                    return
                self._send_json(200, response)

            def _send_events(self, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
                """Server-sent events ``event: <name>`` / ``data: <json>``, then close."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

            def _stream(
                self,
                base: dict[str, Any],
                reply: Reply,
                message: dict[str, Any],
                finish: str,
                usage: dict[str, Any] | None,
            ) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")  # no Content-Length: the close ends it
                self.end_headers()
                for chunk in _chunks({**base, "object": "chat.completion.chunk"}, reply, message):
                    self.wfile.write(b"data: " + chunk + b"\n\n")
                end = {**base, "object": "chat.completion.chunk"}
                choice = {"index": 0, "delta": {}, "finish_reason": finish}
                self.wfile.write(f"data: {json.dumps({**end, 'choices': [choice]})}\n\n".encode())
                if usage is not None:
                    tail = {**end, "choices": [], "usage": usage}
                    self.wfile.write(f"data: {json.dumps(tail)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = _handle  # noqa: N815 - http.server's names

        return Handler


_SLOT = "\x00content\x00"
"""Placeholder for a :attr:`Reply.content_json` text, swapped in after :func:`json.dumps`."""


def _with_content(document: dict[str, Any], message: dict[str, Any], reply: Reply) -> bytes:
    """``document`` as JSON bytes; with ``content_json``, its text stands as ``message``'s
    content verbatim (``document`` contains ``message``, whose content is set to a slot)."""
    if reply.content_json is None:
        return json.dumps(document).encode("utf-8")
    message["content"] = _SLOT
    text = json.dumps(document).replace(json.dumps(_SLOT), reply.content_json)
    return text.encode("utf-8")


def _chunks(base: dict[str, Any], reply: Reply, message: dict[str, Any]) -> Iterator[bytes]:
    """The content chunks of a streamed answer (one per word, the space before a word kept with
    it; ``content_json`` in one chunk, verbatim), then one chunk with the tool calls."""

    def chunk(delta: dict[str, Any]) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}

    if reply.content_json is not None:
        delta = {"role": "assistant", "content": _SLOT}
        text = json.dumps(chunk(delta)).replace(json.dumps(_SLOT), reply.content_json)
        yield text.encode("utf-8")
    else:
        words = (message.get("content") or "").split(" ")
        for i, word in enumerate(words):
            delta = {"role": "assistant", "content": word} if i == 0 else {"content": " " + word}
            yield json.dumps(chunk(delta)).encode("utf-8")
    if message.get("tool_calls") and reply.repeat_call_fields:
        for i, call in enumerate(message["tool_calls"]):
            arguments = call["function"]["arguments"]
            cut = [0, len(arguments) // 3, 2 * len(arguments) // 3, len(arguments)]
            for start, end in zip(cut, cut[1:], strict=False):
                piece = {
                    **call,
                    "function": {**call["function"], "arguments": arguments[start:end]},
                }
                yield json.dumps(chunk({"tool_calls": [{"index": i, **piece}]})).encode("utf-8")
    elif message.get("tool_calls"):
        calls = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
        yield json.dumps(chunk({"tool_calls": calls})).encode("utf-8")


def configure_project(
    project: str | PathLike[str], server: ScriptedOpenAIServer, model: str = "gpt-4o-mini"
) -> None:
    """Point a project at ``server``: write ``.veil/auth.json`` (provider ``scripted``, see
    :meth:`ScriptedOpenAIServer.provider`) and ``.veil/settings.json`` (main model ``model``),
    creating ``.veil/``. Existing files are replaced. The provider is then the project's: veil
    uses it only with the user's consent, so callers set ``VEIL_ALLOW_PROJECT_PROVIDERS=1``
    (:func:`veil.core.safety.trust.check_project_provider_consent`)."""
    veil_dir = Path(project) / ".veil"
    veil_dir.mkdir(parents=True, exist_ok=True)
    (veil_dir / "auth.json").write_text(
        json.dumps({"providers": {"scripted": server.provider()}}), encoding="utf-8"
    )
    (veil_dir / "settings.json").write_text(
        json.dumps({"models": {"main": {"model": model}}}), encoding="utf-8"
    )
