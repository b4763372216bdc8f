"""Anthropic's ``POST /v1/messages`` in front of veil, so Claude Code (``ANTHROPIC_BASE_URL``) and
the ``anthropic`` SDK can sit behind the proxy.

The conversation is read as veil's chat history (:mod:`veil_proxy.anthropic_view`) and goes
through the same steps as ``/v1/chat/completions`` (session, capture, completion room, fitting:
:mod:`veil_proxy.app`). Then:

- **to an Anthropic upstream** (a provider of type ``anthropic``: :mod:`veil_proxy.native`) the
  client's own request goes, its conversation replaced by the fitted one in Anthropic's form
  (thinking blocks and signatures, ``cache_control`` markers, betas and every field the client
  sent kept), and the answer comes back byte for byte;
- **to any other upstream** the request is translated to OpenAI chat by litellm's adapter
  (``AnthropicAdapter``: tools, ``tool_choice``, ``stop_sequences``...) and forwarded through
  litellm, and the answer translated back by the same adapter: a Messages object, or with
  ``"stream": true`` Anthropic's events (``message_start``, ``content_block_start`` /
  ``_delta`` / ``_stop``, ``message_delta``, ``message_stop``). With ``--memory-tools`` every
  upstream goes this way (veil runs the memory calls between upstream answers).

Errors are Anthropic's shape: ``{"type": "error", "error": {"type", "message"}}``, with the
status the upstream gave (or 400 naming the field of a bad request, or the window that cannot
hold the request: :mod:`veil_proxy.window`).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from veil import VeilError
from veil_proxy.anthropic_view import render, to_view
from veil_proxy.app import CleanJSONResponse
from veil_proxy.conversations import (
    SESSION_HEADER,
    BadConversation,
    check_messages,
    conversation_key,
)
from veil_proxy.native import NativeError, NativeUpstream
from veil_proxy.upstream import Upstream, UpstreamError
from veil_proxy.window import WindowTooSmall

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """Anthropic's error answer: ``{"type": "error", "error": {"type", "message"}}``; the type
    follows the status (Anthropic's API reference, "Errors": 400 ``invalid_request_error``, 401
    ``authentication_error``, 403 ``permission_error``, 404 ``not_found_error``, 413
    ``request_too_large``, 429 ``rate_limit_error``, 529 ``overloaded_error``, else
    ``api_error``)."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return CleanJSONResponse(body, status_code=status, headers=headers)


def _adapter() -> Any:
    from veil import import_litellm

    import_litellm()  # the offline environment first
    from litellm.llms.anthropic.messages.adapters.transformation import AnthropicAdapter

    return AnthropicAdapter()


def openai_tools(tools: Any) -> list[dict[str, Any]]:
    """Anthropic tool definitions as OpenAI ``tools`` entries, to count their tokens: a client
    tool's ``name``, ``description`` and ``input_schema``; a server tool (web search, code
    execution...) as its whole definition. Tools with ``defer_loading`` are left out: Anthropic
    loads them into the context only when the model searches for them ("Tool search").

    Raises:
        BadConversation: ``tools`` is not a list of objects.
    """
    if tools is None:
        return []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise BadConversation("tools: must be a list of tool definitions")
    out = []
    for tool in tools:
        if tool.get("defer_loading"):
            continue
        if "input_schema" in tool:
            function = {
                "name": str(tool.get("name") or ""),
                "description": str(tool.get("description") or ""),
                "parameters": tool.get("input_schema") or {},
            }
        else:
            name = str(tool.get("name") or tool.get("type") or "server_tool")
            function = {"name": name, "description": json.dumps(tool), "parameters": {}}
        out.append({"type": "function", "function": function})
    return out


def thinking_budget(body: dict[str, Any]) -> int | None:
    """``thinking.budget_tokens`` when the request turns thinking on with a budget."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        return budget if isinstance(budget, int) else None
    return None


def to_openai(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """An Anthropic Messages request's parameters as an OpenAI chat request (litellm's adapter:
    tools, ``tool_choice``, ``stop_sequences``, ``temperature``...), and litellm's map of
    shortened tool names (OpenAI allows 64 characters) back to the client's. The messages are
    not translated here (:func:`veil_proxy.anthropic_view.to_view` reads them): the adapter
    gets a one-message stand-in, so a turn it does not model cannot fail the request.

    Raises:
        BadConversation: a parameter is malformed (names it).
    """
    request = {k: v for k, v in body.items() if k not in ("stream", "messages", "system")}
    request["messages"] = [{"role": "user", "content": "."}]
    request.setdefault("model", "veil-proxy")  # the adapter wants one; the upstream decides
    try:
        translated, names = _adapter().translate_completion_input_params_with_tool_mapping(request)
    except (ValueError, TypeError, KeyError) as exc:
        raise BadConversation(f"body: not a valid Anthropic Messages request ({exc})") from None
    if translated is None:
        raise BadConversation("body: not a valid Anthropic Messages request")
    translated = dict(translated)
    translated.pop("messages", None)
    return translated, dict(names or {})


async def messages(request: Request) -> Response:
    """``POST /v1/messages`` (see the module docstring)."""
    from veil_proxy.app import ProxyError, native_response, read_json

    state = request.app.state.proxy
    try:
        body = await read_json(request, state.max_body_bytes)
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            raise BadConversation("max_tokens: required, a positive integer")
        view = to_view(body)
        history = check_messages(view.messages)
        model = state.model_for(body)
        upstream = Upstream.for_veil(state.veil, model)
        native = None if state.memory_tools else NativeUpstream.for_upstream(upstream, "anthropic")
        tools = openai_tools(body.get("tools"))
        key = conversation_key(history, request.headers.get(SESSION_HEADER))
        budget = thinking_budget(body)
        ready = await run_in_threadpool(
            state.prepare, key, model, history, tools, body["max_tokens"], budget, view.kept
        )
    except BadConversation as exc:
        return anthropic_error(400, str(exc))
    except ProxyError as exc:
        return anthropic_error(exc.status, exc.message)
    except WindowTooSmall as exc:
        return anthropic_error(400, exc.message)
    except VeilError as exc:
        return anthropic_error(exc.http_status, exc.message)
    conversation, headers = ready.conversation, ready.headers()
    started = time.monotonic()
    if native is not None:

        def rendered(fitted: Any) -> dict[str, Any]:
            sent = render(body, view, fitted.messages, fitted.positions())
            sent["max_tokens"] = fitted.room.allowed
            if fitted.room.thinking_budget is not None:
                budget = fitted.room.thinking_budget
                sent["thinking"] = {**sent["thinking"], "budget_tokens": budget}
            return sent

        stream = bool(body.get("stream"))
        try:
            try:
                answer = await native.send(rendered(ready), dict(request.headers), stream)
            except NativeError as exc:  # too long for the upstream: fit again, send once more
                again = await state.refit_native(ready, exc)
                if again is None:
                    raise
                answer = await native.send(rendered(again), dict(request.headers), stream)
        except NativeError as exc:
            if isinstance(exc.body, dict) and exc.body.get("type") == "error":
                return CleanJSONResponse(exc.body, status_code=exc.status, headers=headers)
            return anthropic_error(
                exc.status, f"upstream model {model!r} could not answer: {exc.message}", headers
            )
        return await native_response(state, conversation, model, answer, headers, started)
    try:
        openai_body, names = to_openai(body)
    except BadConversation as exc:
        return anthropic_error(400, str(exc), headers)
    if ready.room.lowered:
        openai_body["max_tokens"] = ready.room.allowed
    fitted = ready.messages
    adapter = _adapter()
    if body.get("stream"):
        try:
            first, rest, record = await state.stream(conversation, upstream, openai_body, fitted)
        except UpstreamError as exc:
            return anthropic_error(exc.status, exc.message, headers)

        async def chunks() -> AsyncIterator[Any]:
            usage = None
            chunk = first
            while chunk is not None:
                usage = getattr(chunk, "usage", None) or usage
                yield chunk
                chunk = await anext(rest, None)
            if record:
                await run_in_threadpool(state.record_usage, conversation, model, usage, started)

        events = adapter.translate_completion_output_params_streaming(
            chunks(), model=model, tool_name_mapping=names
        )
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)
    try:
        response = await state.complete(conversation, upstream, openai_body, fitted)
    except UpstreamError as exc:
        return anthropic_error(exc.status, exc.message, headers)
    answer = adapter.translate_completion_output_params(response, tool_name_mapping=names)
    if hasattr(answer, "model_dump"):
        answer = answer.model_dump(exclude_none=True)
    return CleanJSONResponse(dict(answer), headers=headers)


async def count_tokens(request: Request) -> Response:
    """``POST /v1/messages/count_tokens``: ``{"input_tokens": n}``, the request's messages, system
    prompt and tools as the upstream model counts them (:func:`veil.core.models.tokens.
    count_message_tokens`: exact for OpenAI models, estimated otherwise). This is the size of
    the client's history, not of the fitted prompt veil would send."""
    from veil import count_message_tokens
    from veil_proxy.app import ProxyError, read_json

    state = request.app.state.proxy
    try:
        body = await read_json(request, state.max_body_bytes)
        history = check_messages(to_view(body).messages)
        tools = openai_tools(body.get("tools"))
        model = state.model_for(body)
    except BadConversation as exc:
        return anthropic_error(400, str(exc))
    except ProxyError as exc:
        return anthropic_error(exc.status, exc.message)
    tokens = await run_in_threadpool(count_message_tokens, history, model, tools=tools or None)
    return CleanJSONResponse({"input_tokens": int(tokens)})
