"""OpenAI's Responses API, ``POST /v1/responses``, in front of veil: the API Codex speaks (its
``wire_api = "responses"``; Codex no longer speaks chat completions).

The request's ``input`` is read as veil's chat history (:mod:`veil_proxy.responses_view`) and
goes through the same steps as ``/v1/chat/completions`` (session, capture, completion room,
fitting: :mod:`veil_proxy.app`). The fitted conversation is written back as Responses input items
in the client's own form (item ids, reasoning items with their ``encrypted_content``, call ids).
Then:

- **to an OpenAI upstream** (a provider of type ``openai``: :mod:`veil_proxy.native`) the
  client's request goes with its ``input`` fitted and every other field as sent (``tools``,
  ``reasoning``, ``include``, ``store``, ``prompt_cache_key``...), and the answer, or its events
  (``response.created`` ... ``response.completed``), comes back byte for byte;
- **to any other upstream** litellm's Responses API (``litellm.aresponses``) carries it: litellm
  bridges to the provider's own API and answers with Responses events.

The conversation must be in ``input``: a request that names ``previous_response_id`` (a
conversation the provider keeps) is refused, as veil cannot fit what it does not see. Memory
tools (``--memory-tools``) are not offered on this route. Errors are OpenAI's shape.
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
from veil_proxy.conversations import (
    SESSION_HEADER,
    BadConversation,
    check_messages,
    conversation_key,
)
from veil_proxy.native import NativeError, NativeUpstream, Usage
from veil_proxy.responses_view import render, to_view
from veil_proxy.upstream import Upstream, UpstreamError
from veil_proxy.window import WindowTooSmall


def openai_tools(tools: Any) -> list[dict[str, Any]]:
    """Responses tool definitions as OpenAI chat ``tools`` entries, to count their tokens: a
    ``function`` tool's name, description and parameters; any other tool (``custom``,
    ``web_search``, a namespace of tools...) as its whole definition.

    Raises:
        BadConversation: ``tools`` is not a list of objects.
    """
    if tools is None:
        return []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise BadConversation("tools: must be a list of tool definitions")
    out = []
    for tool in tools:
        if tool.get("type") == "function":
            function = {
                "name": str(tool.get("name") or ""),
                "description": str(tool.get("description") or ""),
                "parameters": tool.get("parameters") or {},
            }
        else:
            name = str(tool.get("name") or tool.get("type") or "tool")
            function = {"name": name, "description": json.dumps(tool), "parameters": {}}
        out.append({"type": "function", "function": function})
    return out


async def responses(request: Request) -> Response:
    """``POST /v1/responses`` (see the module docstring)."""
    from veil_proxy.app import (
        CleanJSONResponse,
        ProxyError,
        native_response,
        openai_error,
        read_json,
    )

    state = request.app.state.proxy
    try:
        body = await read_json(request, state.max_body_bytes)
        if body.get("previous_response_id"):
            raise BadConversation(
                "previous_response_id: veil proxy fits the whole conversation, which must come "
                "in `input` (with store: false, as Codex sends it); it cannot fit a "
                "conversation the provider keeps"
            )
        asked = body.get("max_output_tokens")
        if asked is not None and (not isinstance(asked, int) or asked < 1):
            raise BadConversation(f"max_output_tokens: must be a positive integer, got {asked!r}")
        view = to_view(body)
        history = check_messages(view.messages)
        model = state.model_for(body)
        upstream = Upstream.for_veil(state.veil, model)
        native = NativeUpstream.for_upstream(upstream, "responses")
        tools = openai_tools(body.get("tools"))
        key = conversation_key(history, request.headers.get(SESSION_HEADER))
        ready = await run_in_threadpool(
            state.prepare, key, model, history, tools, asked, None, view.kept
        )
    except BadConversation as exc:
        return openai_error(400, str(exc), "invalid_request_error")
    except ProxyError as exc:
        return openai_error(exc.status, exc.message, exc.kind)
    except WindowTooSmall as exc:
        return openai_error(400, exc.message, "invalid_request_error", "context_length_exceeded")
    except VeilError as exc:
        return openai_error(exc.http_status, exc.message, "invalid_request_error", exc.code)
    conversation, headers = ready.conversation, ready.headers()

    def rendered(fitted: Any) -> dict[str, Any]:
        sent = render(body, view, fitted.messages, fitted.positions())
        if fitted.room.lowered:
            sent["max_output_tokens"] = fitted.room.allowed
        return sent

    sent = rendered(ready)
    stream = bool(body.get("stream"))
    started = time.monotonic()
    if native is not None:
        try:
            try:
                answer = await native.send(sent, dict(request.headers), stream)
            except NativeError as exc:  # too long for the upstream: fit again, send once more
                again = await state.refit_native(ready, exc)
                if again is None:
                    raise
                answer = await native.send(rendered(again), dict(request.headers), stream)
        except NativeError as exc:
            if isinstance(exc.body, dict) and isinstance(exc.body.get("error"), dict):
                return CleanJSONResponse(exc.body, status_code=exc.status, headers=headers)
            message = f"upstream model {model!r} could not answer: {exc.message}"
            return openai_error(exc.status, message, "api_error")
        return await native_response(state, conversation, model, answer, headers, started)
    if sent.get("max_output_tokens") is None:
        # litellm's bridge asks the provider's own maximum when no limit is named (Anthropic:
        # the model's whole output, refused beside a prompt): ask what the window holds
        sent["max_output_tokens"] = ready.room.cap
    try:
        result = await upstream.responses(sent, stream)
    except UpstreamError as exc:
        return CleanJSONResponse(exc.openai_body(), status_code=exc.status, headers=headers)
    if not stream:
        data = _dump(result)
        usage = Usage()
        usage.read("responses", data)
        if usage.seen:
            await run_in_threadpool(state.record_usage, conversation, model, _usage(usage), started)
        return CleanJSONResponse(data, headers=headers)

    async def events() -> AsyncIterator[bytes]:
        usage = Usage()
        try:
            async for event in result:
                data = _dump(event)
                usage.read("responses", data)
                kind = str(data.get("type") or "message")
                yield f"event: {kind}\ndata: {json.dumps(data, default=str)}\n\n".encode()
        except Exception as exc:  # the upstream broke off mid-answer: say so in the stream
            error = {"type": "error", "message": f"upstream stream broke off: {type(exc).__name__}"}
            yield f"event: error\ndata: {json.dumps(error)}\n\n".encode()
        if usage.seen:
            await run_in_threadpool(state.record_usage, conversation, model, _usage(usage), started)

    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _dump(value: Any) -> dict[str, Any]:
    """A litellm Responses object or event as the JSON object the client reads."""
    if hasattr(value, "model_dump"):
        data = value.model_dump(mode="json", exclude_none=True)
    else:
        data = dict(value)
    for private in ("_hidden_params", "_response_headers"):
        data.pop(private, None)
    return data


def _usage(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}
