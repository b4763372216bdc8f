"""The proxy's Starlette app: OpenAI's ``POST /v1/chat/completions`` and ``GET /v1/models``
(Anthropic's ``POST /v1/messages``: :mod:`veil_proxy.anthropic`; OpenAI's ``POST /v1/responses``:
:mod:`veil_proxy.responses`).

For each chat request (see :mod:`veil_proxy.conversations` for the first three steps):

1. the conversation is mapped to a veil session (``X-Veil-Session``, else a hash);
2. the client messages veil has not seen are captured;
3. the prompt is fitted to the upstream model's window by the context layer
   (:meth:`veil.harness.VeilHarness.build_prompt`: eviction to pointer stubs, compaction, the
   cache-stable prefix), leaving room for the client's tools and ``max_tokens``;
4. the fitted request goes to the upstream model through litellm (:mod:`veil_proxy.upstream`);
   when the upstream refuses it as too long, the session learns the window the refusal implies
   and the prompt is fitted again and sent once more (:meth:`ProxyState._answer`);
5. the answer goes back as the upstream gave it (streamed chunk by chunk when asked), and its
   usage is recorded in the store (``veil usage``).

The response carries ``X-Veil-Session-Id``. The client's stored history is never changed: veil
changes only what it sends upstream.

Errors: a bad request is a 400 in OpenAI's error shape naming the field; an upstream error
reaches the client with the upstream's status and a clear body; no traceback is ever sent.
Requests to a loopback bind must name this machine in ``Host`` (:mod:`veil_http.hosts`); with
a token, every request carries ``Authorization: Bearer <token>`` (:mod:`veil_http.auth`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from veil_http.auth import BearerAuth
from veil_http.hosts import HostCheck, loopback_names

from veil import (
    MAX_DEPTH,
    BadRequest,
    ConfigError,
    ContextWindowExceededError,
    VeilError,
    clean_message,
    is_loopback,
    message_from_response,
)
from veil import json_loads as loads
from veil_proxy.conversations import (
    SESSION_HEADER,
    SESSION_ID_HEADER,
    BadConversation,
    Conversation,
    ConversationBook,
    HistoryDiverged,
    check_messages,
    conversation_key,
    split_system,
)
from veil_proxy.upstream import CONTEXT_LENGTH_EXCEEDED, Upstream, UpstreamError
from veil_proxy.window import HEADER as MAX_TOKENS_HEADER
from veil_proxy.window import Room, WindowTooSmall, completion_room

log = logging.getLogger(__name__)


class CleanJSONResponse(JSONResponse):
    """A JSON answer whose text is always UTF-8: starlette encodes strictly, so a lone surrogate
    in what it carries (a provider's ``"\\udcff"`` in its reply, an error message quoting one)
    failed the request with a 500; it becomes U+FFFD (:func:`veil.core.text.clean_message`),
    as in veil's own loop."""

    def render(self, content: Any) -> bytes:
        """``content`` as UTF-8 JSON, lone surrogates replaced."""
        return super().render(clean_message(content))


@dataclass
class Fitted:
    """A request made ready: its conversation, the fitted prompt
    (:class:`veil.core.prompt.context.Prompt`: ``messages``, ``indices``...) and its
    completion :class:`~veil_proxy.window.Room`."""

    conversation: Conversation
    prompt: Any
    room: Room
    args: tuple[Any, ...] = ()
    """What the request asked (tools, ``max_tokens``, thinking budget, kept texts), to fit it
    again (:meth:`ProxyState.refit_native`)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The fitted messages (OpenAI chat)."""
        return self.prompt.messages

    def positions(self) -> list[int | None]:
        """For each fitted message, its client's history position (None: veil's own)."""
        return self.conversation.positions(self.prompt.indices)

    def headers(self) -> dict[str, str]:
        """The answer's headers: the session, and :data:`veil_proxy.window.HEADER` when
        ``max_tokens`` was lowered."""
        headers = {SESSION_ID_HEADER: self.conversation.session.id}
        if self.room.lowered:
            headers[MAX_TOKENS_HEADER] = self.room.header()
        return headers


def log_lowered(conversation: Conversation, room: Room) -> None:
    """Say in the log that ``max_tokens`` was lowered: a warning the first time in a
    conversation, then at info level."""
    level = logging.INFO if getattr(conversation, "lowered_said", False) else logging.WARNING
    conversation.lowered_said = True  # type: ignore[attr-defined]
    log.log(
        level,
        "veil proxy: session %s: max_tokens lowered from %d to %d: the system prompt (%d tokens) "
        "and tool schemas (%d tokens) leave %d of the %d-token window for the conversation and "
        "the answer",
        conversation.session.id,
        room.asked,
        room.allowed,
        room.system_tokens,
        room.tools_tokens,
        room.window - room.system_tokens - room.tools_tokens,
        room.window,
    )


class ProxyError(Exception):
    """A request the proxy refuses (status, OpenAI error type, message naming the field)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


def openai_error(status: int, message: str, kind: str, code: str | None = None) -> Response:
    """OpenAI's error answer: ``{"error": {"message", "type", "param", "code"}}``."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return CleanJSONResponse(body, status_code=status)


def shutting_down(path: str) -> Response:
    """The answer to a request cut off by ``veil proxy`` stopping
    (:class:`veil_http.serve.AnswerAtShutdown`): 503 in the error shape of the API the client
    speaks, Anthropic's on ``/v1/messages``, OpenAI's (type ``server_error``, code
    ``shutting_down``) elsewhere. A client's SDK retries a 503 (the openai and anthropic SDKs
    both do) on the next server."""
    from veil_http.serve import SHUTTING_DOWN_MESSAGE, SHUTTING_DOWN_STATUS

    if path.rstrip("/").endswith("/messages") or "/messages/" in path:
        from veil_proxy.anthropic import anthropic_error

        return anthropic_error(SHUTTING_DOWN_STATUS, SHUTTING_DOWN_MESSAGE)
    return openai_error(
        SHUTTING_DOWN_STATUS, SHUTTING_DOWN_MESSAGE, "server_error", "shutting_down"
    )


class ProxyState:
    """What the routes share: the project, its conversations, the upstream model.

    Args:
        veil: the open project (:class:`veil.core.app.Veil`).
        upstream_model: the model every request goes to; None: the request's ``model``, else
            settings ``models.main.model``.
        memory_tools: offer veil's memory tools to the model beside the client's own.
        max_body_bytes: request body limit (413 above).

    Raises:
        ConfigError: ``upstream_model`` is a credential (:meth:`veil.core.app.Veil.check_model_name`),
            naming ``--upstream-model`` without the value.
    """

    def __init__(
        self,
        veil: Any,
        *,
        upstream_model: str | None = None,
        memory_tools: bool = False,
        max_body_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        if upstream_model is not None:
            try:
                veil.check_model_name(upstream_model, field="--upstream-model")
            except BadRequest as exc:  # a clean CLI error (veil_http.serve.run_headless)
                raise ConfigError(exc.message) from exc
        self.veil = veil
        main = veil.config.models.main
        self.upstream_model = upstream_model
        self.default_model = main.model if main is not None else None
        self.memory_tools = memory_tools
        self.max_body_bytes = max_body_bytes
        self.book = ConversationBook(veil)

    def model_for(self, body: dict[str, Any]) -> str:
        """The upstream model of a request.

        Raises:
            ProxyError: no model anywhere, or the request's ``model`` is a credential
                (:meth:`veil.core.app.Veil.check_model_name`; checked also when
                ``--upstream-model`` replaces it): 400 naming ``model``, without the value, and
                nothing is forwarded, stored or echoed.
        """
        requested = body.get("model")
        if isinstance(requested, str):
            try:
                self.veil.check_model_name(requested)
            except BadRequest as exc:
                raise ProxyError(400, exc.message) from exc
        model = self.upstream_model or requested or self.default_model
        if not isinstance(model, str) or not model.strip():
            raise ProxyError(
                400,
                "model: the request names no model and none is configured (veil proxy "
                "--upstream-model, or models.main.model in .veil/settings.json)",
            )
        return model.strip()

    def prepare(
        self,
        key: str,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        asked: int | None,
        thinking_budget: int | None = None,
        kept: list[str] | None = None,
    ) -> Fitted:
        """Capture what is new, decide the completion room and fit the prompt (runs in a worker
        thread: the store is synchronous).

        Args:
            key: the conversation's key (:func:`conversation_key`).
            model: the upstream model.
            messages: the client's messages as OpenAI chat messages (system ones first).
            tools: the client's tool schemas as OpenAI ``tools`` entries (their tokens count
                against the window).
            asked: the completion tokens the client asked for (None: it named no limit).
            thinking_budget: the client's ``thinking.budget_tokens`` (Anthropic), if any.
            kept: texts sent as the client wrote them beside the messages
                (:attr:`veil_proxy.views.View.kept`): their tokens are left free too.

        Raises:
            WindowTooSmall: the system prompt and tool schemas leave no room for the
                conversation and an answer (:func:`veil_proxy.window.completion_room`).
        """
        system, history = split_system(messages)
        conversation = self.book.get(key, model)
        for attempt in range(2):
            with conversation.lock, self.veil.session_lock(conversation.session.id):
                try:
                    conversation.capture(system, history)
                except HistoryDiverged:
                    if attempt:
                        raise
                else:
                    args = (tools, asked, thinking_budget, kept or [])
                    return self._fit(conversation, *args)
            conversation = self.book.restart(key, model)
        raise AssertionError("unreachable")

    def _fit(
        self,
        conversation: Conversation,
        tools: list[dict[str, Any]] | None,
        asked: int | None,
        thinking_budget: int | None,
        kept: list[str],
        record: bool = True,
    ) -> Fitted:
        from veil import completion_reserve

        harness = conversation.harness
        offered = list(tools or []) + self.offered_memory_tools(conversation)
        system_tokens, tools_tokens = harness.fixed_tokens(offered)
        session = conversation.session
        # each kept block or item counted as a message of its own (its framing included)
        kept_tokens = session.count_tokens([{"role": "assistant", "content": t} for t in kept])
        room = completion_room(
            harness.context_window,
            system_tokens,
            tools_tokens,
            len(offered),
            asked,
            thinking_budget,
            kept_tokens,
        )
        reserve = room.allowed if room.allowed is not None else completion_reserve(session)
        reserve += kept_tokens
        prompt = harness.prompt(offered, reserve)
        figures = {
            "client_tokens": conversation.client_tokens(),
            "client_messages": len(conversation.seen),
            "sent_tokens": int(prompt.tokens),
            "tools_tokens": int(tools_tokens),
            "max_tokens_asked": asked,
            "max_tokens_sent": room.allowed,
        }
        if not record:  # fitted again for the same request: measured once
            return Fitted(conversation, prompt, room, (tools, asked, thinking_budget, kept))
        conversation.record_request(figures)
        if room.lowered:
            log_lowered(conversation, room)
        log.info(
            "veil proxy: session %s: the client's history %d tokens in %d messages, %d sent "
            "(window %d)",
            conversation.session.id,
            figures["client_tokens"],
            figures["client_messages"],
            figures["sent_tokens"],
            room.window,
        )
        return Fitted(conversation, prompt, room, (tools, asked, thinking_budget, kept))

    async def refit_native(self, ready: Fitted, error: Any) -> Fitted | None:
        """``ready`` fitted again after a native upstream refused it as too long
        (:class:`veil_proxy.native.NativeError`), as :meth:`_refit` does for the litellm path:
        the session learns the window the refusal implies and the prompt is built again; None
        when ``error`` is not such a refusal or the prompt did not get smaller."""
        from veil import is_context_refusal, refusal_figures

        text = f"{error.message} {json.dumps(error.body) if error.body is not None else ''}"
        if error.status != 400 or not is_context_refusal(text):
            return None
        refused = ContextWindowExceededError(text, refusal_figures(text))
        try:
            return await run_in_threadpool(self._refit_ready, ready, refused)
        except WindowTooSmall:  # the window learned cannot hold it: the refusal stands
            return None

    def _refit_ready(self, ready: Fitted, refused: ContextWindowExceededError) -> Fitted | None:
        conversation = ready.conversation
        harness = conversation.harness
        with conversation.lock, self.veil.session_lock(conversation.session.id):
            before = harness.session.last_prompt_tokens
            if not harness.on_context_refused(refused):
                return None
            # the completion room too is weighed against the window learned
            again = self._fit(conversation, *ready.args, record=False)
            return again if again.prompt.tokens < before else None

    def offered_memory_tools(self, conversation: Conversation) -> list[dict[str, Any]]:
        """veil's memory tools when offered (off by default), else []."""
        return conversation.harness.tools() if self.memory_tools else []

    async def complete(
        self,
        conversation: Conversation,
        upstream: Upstream,
        body: dict[str, Any],
        fitted: list[dict[str, Any]],
    ) -> Any:
        """The upstream's answer to ``fitted`` (usage recorded). With memory tools offered, an
        answer that calls one is not the client's: veil runs its memory calls, records them in
        the session and asks again, up to :data:`MAX_MEMORY_ROUNDS` times; the client sees the
        first answer without memory calls (the last one, with them removed, if every round
        called one).

        Raises:
            UpstreamError: the upstream failed.
        """
        if not self.memory_tools:
            started = time.monotonic()
            response, _ = await self._answer(conversation, upstream, body, fitted)
            await run_in_threadpool(
                self.record_usage, conversation, upstream.model, _usage(response), started
            )
            return response
        offered = {**body, "tools": list(body.get("tools") or [])}
        offered["tools"] += conversation.harness.tools()
        for _ in range(MAX_MEMORY_ROUNDS):
            started = time.monotonic()
            response, fitted = await self._answer(conversation, upstream, offered, fitted)
            await run_in_threadpool(
                self.record_usage, conversation, upstream.model, _usage(response), started
            )
            message, _ = message_from_response(response)
            calls = message.get("tool_calls") or []
            mine = [c for c in calls if conversation.harness.is_memory_tool(c["function"]["name"])]
            if not mine:
                return response
            fitted = await run_in_threadpool(
                self._run_memory_calls, conversation, message, mine, offered
            )
        _drop_memory_calls(response, conversation)
        return response

    async def _answer(
        self,
        conversation: Conversation,
        upstream: Upstream,
        body: dict[str, Any],
        fitted: list[dict[str, Any]],
    ) -> tuple[Any, list[dict[str, Any]]]:
        """The upstream's answer to ``fitted`` and the messages that got it. A context-length
        refusal (the upstream's window is smaller than veil's figure for it) is answered as
        veil's own loop answers it: the session learns the window the refusal implies, the
        prompt is fitted again and sent once more (:meth:`_refit`).

        Raises:
            UpstreamError: the upstream failed, or refused the prompt fitted again too.
        """
        try:
            return await upstream.complete(body, fitted), fitted
        except UpstreamError as exc:
            refit = await self._refit(conversation, body, exc)
            if refit is None:
                raise
            return await upstream.complete(body, refit), refit

    async def _refit(
        self, conversation: Conversation, body: dict[str, Any], error: UpstreamError
    ) -> list[dict[str, Any]] | None:
        """The prompt fitted again after ``error``, when it is a context-length refusal that
        taught the session a smaller window and the prompt got smaller; else None."""
        if error.code != CONTEXT_LENGTH_EXCEEDED:
            return None
        refused = ContextWindowExceededError(error.message, error.figures)
        return await run_in_threadpool(self._refit_held, conversation, body, refused)

    def _refit_held(
        self,
        conversation: Conversation,
        body: dict[str, Any],
        refused: ContextWindowExceededError,
    ) -> list[dict[str, Any]] | None:
        harness = conversation.harness
        with conversation.lock, self.veil.session_lock(conversation.session.id):
            before = harness.session.last_prompt_tokens
            if not harness.on_context_refused(refused):
                return None
            reserve = body.get("max_completion_tokens") or body.get("max_tokens")
            fitted = harness.build_prompt(list(body.get("tools") or []), reserve)
            return fitted if harness.session.last_prompt_tokens < before else None

    def _run_memory_calls(
        self,
        conversation: Conversation,
        message: dict[str, Any],
        calls: list[dict[str, Any]],
        body: dict[str, Any],
    ) -> list[dict[str, Any]]:
        """Run the memory tool ``calls`` of the model's ``message`` (its calls of client tools
        are left out: the model asks again after seeing the memory results), record the
        exchange in the session, and fit the prompt again."""
        harness = conversation.harness
        with conversation.lock, self.veil.session_lock(conversation.session.id):
            harness.on_assistant_message({"content": message.get("content"), "tool_calls": calls})
            for call in calls:
                name = call["function"]["name"]
                arguments = call["function"]["arguments"]
                parsed = _json_object(arguments)
                harness.before_tool_call(name, parsed, call["id"])
                output = harness.call_tool(name, arguments, call["id"])
                harness.after_tool_call(name, parsed, call["id"], output)
            reserve = body.get("max_completion_tokens") or body.get("max_tokens")
            return harness.build_prompt(body.get("tools") or [], reserve)

    async def stream(
        self,
        conversation: Conversation,
        upstream: Upstream,
        body: dict[str, Any],
        fitted: list[dict[str, Any]],
    ) -> tuple[Any, AsyncIterator[Any], bool]:
        """The upstream's answer as chunks: the first, the rest, and whether the caller records
        usage from them (False when :meth:`complete` already did). With memory tools offered,
        the rounds run unstreamed (an answer that calls a memory tool is not the client's) and
        the final answer comes as one chunk.

        Raises:
            UpstreamError: the upstream failed before its first chunk.
        """
        if not self.memory_tools:
            try:
                first, rest = await upstream.stream(body, fitted)
            except UpstreamError as exc:  # before the first chunk: nothing was sent yet
                refit = await self._refit(conversation, body, exc)
                if refit is None:
                    raise
                first, rest = await upstream.stream(body, refit)
            return first, rest, True
        from litellm.llms.base_llm.base_model_iterator import convert_model_response_to_streaming

        response = await self.complete(conversation, upstream, body, fitted)
        return convert_model_response_to_streaming(response), _no_chunks(), False

    def record_usage(
        self, conversation: Conversation, model: str, usage: Any, started: float
    ) -> None:
        """Store one upstream call's usage against the conversation's session."""
        if usage is None:
            return
        get = usage.get if isinstance(usage, dict) else lambda k: getattr(usage, k, None)
        self.veil.record_usage(
            conversation.session.id,
            role="proxy",
            model=model,
            provider="upstream",
            prompt_tokens=int(get("prompt_tokens") or 0),
            completion_tokens=int(get("completion_tokens") or 0),
            seconds=time.monotonic() - started,
        )


def with_max_tokens(body: dict[str, Any], room: Room, fields: tuple[str, ...]) -> dict[str, Any]:
    """``body`` with its completion limit (the first of ``fields`` it names) set to what
    ``room`` allows, when that is lower (a copy; ``body`` itself is not changed)."""
    if not room.lowered:
        return body
    for name in fields:
        if body.get(name) is not None:
            return {**body, name: room.allowed}
    return body


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The request's JSON object body, with every lone surrogate (a JSON ``"\\ud800"``
    escape, which UTF-8 cannot hold) replaced by U+FFFD (:func:`veil.core.text.clean_message`):
    the body is stored, fingerprinted and sent upstream as UTF-8, and a client resending the
    same history gets the same replacement each time.

    Raises:
        ProxyError: 413 over ``limit`` bytes; 400 when it is not a JSON object.
    """
    raw = await request.body()
    if len(raw) > limit:
        raise ProxyError(413, f"request body over {limit} bytes")
    try:
        body = loads(raw, max_depth=MAX_DEPTH)
    except ValueError as exc:
        raise ProxyError(400, f"body: not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise ProxyError(400, "body: must be a JSON object")
    return clean_message(body)


MAX_MEMORY_ROUNDS = 8
"""Most upstream calls one request makes while the model keeps calling memory tools."""


def _usage(response: Any) -> Any:
    return getattr(response, "usage", None)


def _json_object(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = loads(arguments or "{}", max_depth=MAX_DEPTH)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _drop_memory_calls(response: Any, conversation: Conversation) -> None:
    """Remove memory tool calls from ``response``'s message (the client does not know them)."""
    for choice in getattr(response, "choices", None) or []:
        message = getattr(choice, "message", None)
        calls = getattr(message, "tool_calls", None)
        if not calls:
            continue
        kept = [c for c in calls if not conversation.harness.is_memory_tool(c.function.name)]
        message.tool_calls = kept or None
        if not kept and choice.finish_reason == "tool_calls":
            choice.finish_reason = "stop"


async def _no_chunks() -> AsyncIterator[Any]:
    return
    yield  # an async generator that yields nothing


def _dump(chunk: Any) -> dict[str, Any]:
    """A litellm response or chunk as the JSON object the client reads."""
    data = chunk.model_dump(exclude_none=True) if hasattr(chunk, "model_dump") else dict(chunk)
    for private in ("_hidden_params", "_response_headers"):
        data.pop(private, None)
    return data


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, default=str).encode("utf-8") + b"\n\n"


async def chat_completions(request: Request) -> Response:
    """``POST /v1/chat/completions`` (see the module docstring)."""
    state: ProxyState = request.app.state.proxy
    try:
        body = await read_json(request, state.max_body_bytes)
        messages = check_messages(body.get("messages"))
        tools = body.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise ProxyError(400, "tools: must be a list of tool definitions")
        for field in ("max_tokens", "max_completion_tokens"):
            value = body.get(field)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ProxyError(400, f"{field}: must be a positive integer, got {value!r}")
        model = state.model_for(body)
        key = conversation_key(messages, request.headers.get(SESSION_HEADER))
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        ready = await run_in_threadpool(state.prepare, key, model, messages, tools, asked)
    except BadConversation as exc:
        return openai_error(400, str(exc), "invalid_request_error")
    except ProxyError as exc:
        return openai_error(exc.status, exc.message, exc.kind)
    except WindowTooSmall as exc:
        return openai_error(400, exc.message, "invalid_request_error", "context_length_exceeded")
    except VeilError as exc:
        return openai_error(exc.http_status, exc.message, "invalid_request_error", exc.code)
    try:
        upstream = Upstream.for_veil(state.veil, model)
    except VeilError as exc:
        return openai_error(500, exc.message, "api_error", exc.code)
    conversation, fitted, headers = ready.conversation, ready.messages, ready.headers()
    body = with_max_tokens(body, ready.room, ("max_completion_tokens", "max_tokens"))
    started = time.monotonic()
    if body.get("stream"):
        try:
            first, rest, record = await state.stream(conversation, upstream, body, fitted)
        except UpstreamError as exc:
            return CleanJSONResponse(exc.openai_body(), status_code=exc.status, headers=headers)
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = _stream_events(
            state, conversation, model, first, rest, wants_usage, started if record else None
        )
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)
    try:
        response = await state.complete(conversation, upstream, body, fitted)
    except UpstreamError as exc:
        return CleanJSONResponse(exc.openai_body(), status_code=exc.status, headers=headers)
    return CleanJSONResponse(_dump(response), headers=headers)


async def _stream_events(
    state: ProxyState,
    conversation: Conversation,
    model: str,
    first: Any,
    rest: AsyncIterator[Any],
    wants_usage: bool,
    started: float | None,
) -> AsyncIterator[bytes]:
    """The upstream's chunks as OpenAI SSE, in order, then ``data: [DONE]``. The usage chunk
    (asked for upstream in any case, to record it) reaches the client only when it asked for
    one. An error after the first chunk ends the stream with an ``error`` event. Usage is
    recorded unless ``started`` is None (recorded already)."""
    usage = None
    chunk = first
    try:
        while chunk is not None:
            data = _dump(chunk)
            if data.get("usage"):
                usage = data["usage"]
                if not wants_usage:
                    data.pop("usage")
                    if not data.get("choices"):
                        chunk = await anext(rest, None)
                        continue
            yield _sse(data)
            chunk = await anext(rest, None)
    except Exception as exc:  # the upstream broke off mid-answer: say so in the stream
        log.warning("upstream stream failed: %s", type(exc).__name__)
        message = f"upstream stream broke off: {type(exc).__name__}"
        yield _sse(
            {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
        )
    # recorded before the end of the stream, so a client that reads usage next finds it
    if started is not None:
        await run_in_threadpool(state.record_usage, conversation, model, usage, started)
    yield b"data: [DONE]\n\n"


async def native_response(
    state: ProxyState,
    conversation: Conversation,
    model: str,
    answer: Any,
    headers: dict[str, str],
    started: float,
) -> Response:
    """The client's answer to a request forwarded in its own API
    (:class:`veil_proxy.native.NativeAnswer`): the provider's body, or its stream byte for
    byte; the usage it reported is recorded (after the last byte of a stream)."""
    usage = answer.usage
    if answer.chunks is None:
        if usage.seen:
            await run_in_threadpool(
                state.record_usage, conversation, model, _native_usage(usage), started
            )
        if isinstance(answer.body, (dict, list)):
            return CleanJSONResponse(answer.body, status_code=answer.status, headers=headers)
        return Response(
            str(answer.body),
            status_code=answer.status,
            media_type=answer.media_type,
            headers=headers,
        )

    async def relay() -> AsyncIterator[bytes]:
        async for chunk in answer.chunks:
            yield chunk
        if usage.seen:
            await run_in_threadpool(
                state.record_usage, conversation, model, _native_usage(usage), started
            )

    return StreamingResponse(relay(), media_type="text/event-stream", headers=headers)


def _native_usage(usage: Any) -> dict[str, int]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}


async def internal_error(request: Request, exc: Exception) -> Response:
    """A bug's answer: 500 with a clear body in the shape of the route's API (Anthropic's for
    ``/v1/messages``), never a traceback; the traceback goes to the proxy's log."""
    log.error("veil proxy: %s %s failed", request.method, request.url.path, exc_info=exc)
    message = (
        f"internal error in veil proxy ({type(exc).__name__}); the traceback is in the proxy's log"
    )
    if request.url.path.rstrip("/").endswith("/messages"):
        from veil_proxy.anthropic import anthropic_error

        return anthropic_error(500, message)
    return openai_error(500, message, "api_error")


def guarded(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable:
    """``endpoint`` answering :func:`internal_error` for any exception it lets through (here,
    not in Starlette's error middleware, which re-raises into the server and ends the
    connection)."""

    async def run(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            return await internal_error(request, exc)

    run.__name__ = run.__qualname__ = endpoint.__name__
    run.__doc__ = endpoint.__doc__
    return run


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: the upstream model (OpenAI's list shape)."""
    state: ProxyState = request.app.state.proxy
    model = state.upstream_model or state.default_model
    data = [{"id": model, "object": "model", "created": 0, "owned_by": "veil"}] if model else []
    return CleanJSONResponse({"object": "list", "data": data})


def create_app(
    veil: Any,
    *,
    token: str | None = None,
    host: str | None = None,
    upstream_model: str | None = None,
    memory_tools: bool = False,
) -> Starlette:
    """The proxy app over an open :class:`veil.core.app.Veil`.

    Args:
        veil: the project whose store keeps the proxied sessions.
        token: bearer token every request must carry; None takes settings ``http.token``
            (``VEIL_HTTP_TOKEN``); '' turns the check off.
        host: the bind address (None: settings ``http.host``); on loopback, requests must name
            this machine in ``Host`` and carry no foreign ``Origin``.
        upstream_model: see :class:`ProxyState`.
        memory_tools: offer veil's memory tools beside the client's (off by default: the
            client does not know them).
    """
    from veil_proxy.anthropic import count_tokens
    from veil_proxy.anthropic import messages as anthropic_messages
    from veil_proxy.responses import responses

    http = veil.config.settings.http
    if token is None and http.token is not None:
        token = http.token.get_secret_value()
    host = http.host if host is None else host
    routes = [
        Route("/v1/chat/completions", guarded(chat_completions), methods=["POST"]),
        Route("/chat/completions", guarded(chat_completions), methods=["POST"]),
        Route("/v1/messages", guarded(anthropic_messages), methods=["POST"]),
        Route("/v1/messages/count_tokens", guarded(count_tokens), methods=["POST"]),
        Route("/v1/responses", guarded(responses), methods=["POST"]),
        Route("/responses", guarded(responses), methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/models", list_models, methods=["GET"]),
    ]
    middleware = [
        *(
            [Middleware(HostCheck, allowed=loopback_names(host), server="veil proxy")]
            if is_loopback(host)
            else []
        ),
        *([Middleware(BearerAuth, token=token)] if token else []),
    ]
    app = Starlette(routes=routes, middleware=middleware)
    app.state.proxy = ProxyState(
        veil,
        upstream_model=upstream_model,
        memory_tools=memory_tools,
        max_body_bytes=max(int(http.max_body_bytes), 8 * 1024 * 1024),
    )
    return app
