"""Anthropic's ``POST /v1/messages`` in front of veil, so Claude Code (``ANTHROPIC_BASE_URL``) and
the ``anthropic`` SDK can sit behind the proxy.

A request is translated to OpenAI chat format by litellm's own adapter
(``litellm.llms.anthropic.messages.adapters.AnthropicAdapter``: ``system``, content blocks,
``tool_use`` / ``tool_result`` blocks, tools, ``tool_choice``, ``stop_sequences``), then goes
through the same steps as ``/v1/chat/completions`` (session, capture, fitting, forwarding:
:mod:`veil_proxy.app`). The answer is translated back by the same adapter: a Messages object, or
with ``"stream": true`` Anthropic's server-sent events (``message_start``,
``content_block_start`` / ``_delta`` / ``_stop``, ``message_delta``, ``message_stop``).

Errors are Anthropic's shape: ``{"type": "error", "error": {"type", "message"}}``, with the
status the upstream gave (or 400 naming the field of a bad request).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from veil.core.errors import VeilError
from veil_proxy.app import CleanJSONResponse
from veil_proxy.conversations import (
    SESSION_HEADER,
    SESSION_ID_HEADER,
    BadConversation,
    check_messages,
    conversation_key,
)
from veil_proxy.upstream import Upstream, UpstreamError

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
    from veil.core.models.offline import import_litellm

    import_litellm()  # the offline environment first
    from litellm.llms.anthropic.messages.adapters.transformation import AnthropicAdapter

    return AnthropicAdapter()


def to_openai(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """An Anthropic Messages request as an OpenAI chat request, and litellm's map of shortened
    tool names (OpenAI allows 64 characters) back to the client's.

    Raises:
        BadConversation: a required field is missing or malformed (names it).
    """
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise BadConversation("messages: must be a non-empty list of messages")
    if not isinstance(body.get("max_tokens"), int):
        raise BadConversation("max_tokens: required, an integer")
    request = {k: v for k, v in body.items() if k != "stream"}
    request.setdefault("model", "veil-proxy")  # the adapter wants one; the upstream decides
    try:
        translated, names = _adapter().translate_completion_input_params_with_tool_mapping(request)
    except (ValueError, TypeError, KeyError) as exc:
        raise BadConversation(f"body: not a valid Anthropic Messages request ({exc})") from None
    if translated is None:
        raise BadConversation("body: not a valid Anthropic Messages request")
    return dict(translated), dict(names or {})


async def messages(request: Request) -> Response:
    """``POST /v1/messages`` (see the module docstring)."""
    from veil_proxy.app import ProxyError, read_json

    state = request.app.state.proxy
    try:
        body = await read_json(request, state.max_body_bytes)
        openai_body, names = to_openai(body)
        history = check_messages(openai_body.get("messages"))
        model = state.model_for(body)
        key = conversation_key(history, request.headers.get(SESSION_HEADER))
        conversation, fitted = await run_in_threadpool(
            state.prepare, key, model, history, openai_body
        )
        upstream = Upstream.for_veil(state.veil, model)
    except BadConversation as exc:
        return anthropic_error(400, str(exc))
    except ProxyError as exc:
        return anthropic_error(exc.status, exc.message)
    except VeilError as exc:
        return anthropic_error(exc.http_status, exc.message)
    headers = {SESSION_ID_HEADER: conversation.session.id}
    adapter = _adapter()
    started = time.monotonic()
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
    from veil.core.models.tokens import count_message_tokens
    from veil_proxy.app import ProxyError, read_json

    state = request.app.state.proxy
    try:
        body = await read_json(request, state.max_body_bytes)
        openai_body, _ = to_openai({**body, "max_tokens": body.get("max_tokens") or 1})
        history = check_messages(openai_body.get("messages"))
        model = state.model_for(body)
    except BadConversation as exc:
        return anthropic_error(400, str(exc))
    except ProxyError as exc:
        return anthropic_error(exc.status, exc.message)
    tokens = await run_in_threadpool(
        count_message_tokens, history, model, tools=openai_body.get("tools")
    )
    return CleanJSONResponse({"input_tokens": int(tokens)})
