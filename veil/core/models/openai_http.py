"""OpenAI's chat-completions API called over HTTP with httpx, without litellm.

Why: ``import litellm`` takes 3 s on an idle machine and 10-15 s on this project's loaded 2-core
machines, and every model call waited for it: ``veil -p hi`` against a server that answers at
once took 8.5-12.3 s (issue 30). Providers of ``type`` ``openai`` -- OpenAI itself and every
OpenAI-compatible server (OpenRouter, vLLM, LM Studio, llama.cpp's server, Ollama's ``/v1``...)
-- speak one documented protocol, which this module speaks with httpx (0.1 s to import);
:class:`veil.core.models.llm.LiteLLMModel` sends their calls here and every other provider's
through litellm. ``VEIL_DIRECT_OPENAI=0`` sends them through litellm too.

What litellm's ``openai`` provider does and this module does the same way:

- the model string loses its ``openai/`` prefix (``openai/gpt-4o`` is sent as ``gpt-4o``, and
  ``openai/anthropic/claude`` to OpenRouter as ``anthropic/claude``);
- the endpoint is the route's ``base_url``, else ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE``, else
  ``https://api.openai.com/v1``; the key the route's, else ``OPENAI_API_KEY``;
- the request body is ``model``, ``messages``, ``tools``, ``stream`` (with
  ``stream_options.include_usage``) and the role's ``options`` as they are.

Only options that are fields of OpenAI's request body (:data:`BODY_OPTIONS`) or of this client
(:data:`CLIENT_OPTIONS`) are sent this way; a role with any other option (litellm's own, such as
``mock_response`` or ``num_retries``) goes through litellm, which knows it.

Errors become :class:`OpenAIHTTPError`, named as litellm names them (``RateLimitError``,
``AuthenticationError``...), with whether another provider may be tried: connection errors,
timeouts, 408, 409, 429 and 5xx may; other 4xx may not; a 400 that says the prompt is too long
is a context-window error (:attr:`OpenAIHTTPError.context_window`).

Source of the protocol: OpenAI API reference, "Create chat completion" and "Streaming"
(server-sent events of ``chat.completion.chunk`` objects ending with ``data: [DONE]``; tool-call
deltas carry an ``index``, the first one its ``id`` and ``function.name``, the next ones pieces
of ``function.arguments``).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from veil import __version__

DEFAULT_BASE_URL = "https://api.openai.com/v1"

BODY_OPTIONS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "tool_choice",
        "parallel_tool_calls",
        "user",
        "reasoning_effort",
        "service_tier",
        "metadata",
        "store",
        "prediction",
        "modalities",
        "audio",
        "verbosity",
        "web_search_options",
    }
)
"""Role options sent as fields of the request body (OpenAI API reference, "Create chat
completion"); ``n`` is left out on purpose (veil reads one choice)."""

CLIENT_OPTIONS = frozenset({"timeout", "extra_headers", "extra_body"})
"""Role options this client reads itself, as litellm does: ``timeout`` (seconds), ``extra_headers``
(added to the request's headers) and ``extra_body`` (merged into the body)."""

CONNECT_TIMEOUT_S = 20.0
"""Seconds to connect to the provider before the route counts as unreachable."""

READ_TIMEOUT_S = 600.0
"""Seconds without a byte of the answer before the call times out (a slow model streams its
first token late), unless the role's ``timeout`` option says otherwise."""

_CONTEXT_WINDOW_TEXT = re.compile(
    r"maximum context length|context_length_exceeded|context length|context window|"
    r"prompt is too long|too many tokens|reduce the length|input is too long|"
    r"exceeds? the (?:model'?s? )?(?:maximum )?(?:context|token)",
    re.IGNORECASE,
)
"""How providers word a prompt refused for its length (OpenAI: "This model's maximum context
length is N tokens", code ``context_length_exceeded``; vLLM, llama.cpp's server and OpenRouter:
"... exceeds the context window", "prompt is too long")."""


def enabled() -> bool:
    """Whether calls to ``openai`` providers go over this module (``VEIL_DIRECT_OPENAI`` unset,
    or anything but ``0`` / ``false`` / ``no``)."""
    return os.environ.get("VEIL_DIRECT_OPENAI", "").strip().lower() not in ("0", "false", "no")


def can_send(provider_type: str | None, options: dict[str, Any]) -> bool:
    """Whether a call to a provider of ``provider_type`` with the role's ``options`` goes over
    this module: the provider is of type ``openai``, every option is one it sends
    (:data:`BODY_OPTIONS`, :data:`CLIENT_OPTIONS`) and it is :func:`enabled`."""
    return provider_type == "openai" and set(options) <= BODY_OPTIONS | CLIENT_OPTIONS and enabled()


def wire_model(model: str) -> str:
    """The model name sent in the body: ``model`` without one leading ``openai/``."""
    return model[len("openai/") :] if model.startswith("openai/") else model


def endpoint(base_url: str | None) -> str:
    """The chat-completions URL: ``base_url`` (else ``OPENAI_BASE_URL``, ``OPENAI_API_BASE``,
    else :data:`DEFAULT_BASE_URL`) + ``/chat/completions``."""
    base = (
        base_url
        or os.environ.get("OPENAI_BASE_URL")
        or os.environ.get("OPENAI_API_BASE")
        or DEFAULT_BASE_URL
    )
    return base.rstrip("/") + "/chat/completions"


class OpenAIHTTPError(Exception):
    """A call that got no answer.

    Attributes:
        kind: litellm's name for the failure (``RateLimitError``, ``APIConnectionError``,
            ``Timeout``, ``AuthenticationError``, ``BadRequestError``, ``NotFoundError``,
            ``InternalServerError``, ``ServiceUnavailableError``, ``ContextWindowExceededError``...),
            so messages read the same whichever way the call went.
        status: the HTTP status (None when no answer came).
        retryable: whether the next provider may be tried.
        context_window: the provider refused the prompt as too long.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        context_window: bool = False,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retryable = retryable
        self.context_window = context_window


_STATUS_KINDS = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "Timeout",
    409: "APIError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
}


def status_error(status: int, body: Any) -> OpenAIHTTPError:
    """The error of an answer with HTTP ``status`` >= 400 and (parsed JSON) ``body``."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        text = str(error.get("message") or error.get("type") or "")
        code = str(error.get("code") or "")
    else:
        text = str(error if error is not None else body if body is not None else "")
        code = ""
    text = text or f"HTTP {status}"
    too_long = status in (400, 413) and (
        code == "context_length_exceeded" or _CONTEXT_WINDOW_TEXT.search(text) is not None
    )
    kind = "ContextWindowExceededError" if too_long else _STATUS_KINDS.get(status)
    if kind is None:
        kind = "InternalServerError" if status >= 500 else "APIError"
    retryable = not too_long and (status in (408, 409, 429) or status >= 500)
    return OpenAIHTTPError(
        kind,
        f"OpenAIException - {text}",
        status=status,
        retryable=retryable,
        context_window=too_long,
    )


_client: httpx.Client | None = None
_client_lock = threading.Lock()


def client() -> httpx.Client:
    """The process's HTTP client (connections kept alive between calls; thread-safe)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(
                timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
                headers={"User-Agent": f"veil/{__version__}"},
                follow_redirects=False,
            )
        return _client


def close_client() -> None:
    """Close the process's HTTP client, if one was made (a later call makes a new one)."""
    global _client
    with _client_lock:
        if _client is not None:
            _client.close()
            _client = None


def chat_completion(
    *,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    options: dict[str, Any],
    base_url: str | None,
    api_key: str | None,
    on_token: Callable[[str], None] | None = None,
    streamed: list[bool] | None = None,
) -> dict[str, Any]:
    """One chat completion, as OpenAI's JSON answer.

    Args:
        model: the litellm model string (``openai/gpt-4o``; see :func:`wire_model`).
        messages, tools: OpenAI-format messages and function schemas.
        options: the role's options (:func:`can_send` accepted them).
        base_url, api_key: the route's (see the module docstring for the defaults).
        on_token: when given, the answer is streamed and each piece of text handed to it as
            it arrives; an exception it raises propagates unchanged.
        streamed: ``streamed[0]`` is set True once a piece of text was handed to ``on_token``.

    Returns:
        ``{"choices": [{"message": {...}, "finish_reason": ...}], "usage": {...} | None}``:
        the answer, or for a stream the same built from its chunks (``usage`` None when the
        provider sent none).

    Raises:
        OpenAIHTTPError: no answer (see the class); the exception of ``on_token``.
    """
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key:
        raise OpenAIHTTPError(
            "AuthenticationError",
            "OpenAIException - no API key: set api_key for this provider in auth.json or "
            "OPENAI_API_KEY",
            status=401,
        )
    body: dict[str, Any] = {"model": wire_model(model), "messages": messages}
    if tools:
        body["tools"] = tools
    headers = {"Authorization": f"Bearer {key}"}
    timeout: Any = httpx.USE_CLIENT_DEFAULT
    for name, value in options.items():
        if name == "timeout" and isinstance(value, (int, float)) and value > 0:
            timeout = httpx.Timeout(float(value), connect=min(float(value), CONNECT_TIMEOUT_S))
        elif name == "extra_headers" and isinstance(value, dict):
            headers.update({str(k): str(v) for k, v in value.items()})
        elif name == "extra_body" and isinstance(value, dict):
            body.update(value)
        elif name in BODY_OPTIONS:
            body[name] = value
    if on_token is not None:
        body["stream"] = True
        body.setdefault("stream_options", {"include_usage": True})
    url = endpoint(base_url)
    try:
        if on_token is None:
            response = client().post(url, json=body, headers=headers, timeout=timeout)
            return _answer(response)
        with client().stream("POST", url, json=body, headers=headers, timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                _answer(response)  # raises
            return _gather(_events(response.iter_lines()), on_token, streamed)
    except httpx.TimeoutException as exc:
        raise OpenAIHTTPError(
            "Timeout", f"OpenAIException - request timed out ({exc})", retryable=True
        ) from exc
    except httpx.HTTPError as exc:  # connection refused, reset, DNS, protocol errors
        raise OpenAIHTTPError(
            "APIConnectionError",
            f"OpenAIException - {type(exc).__name__}: {exc}",
            retryable=True,
        ) from exc


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON of a complete answer, or the error it carries."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code >= 400:
        raise status_error(response.status_code, data if data is not None else response.text)
    if not isinstance(data, dict):
        raise OpenAIHTTPError(
            "APIError",
            f"OpenAIException - the answer is not a JSON object: {response.text[:200]!r}",
            status=response.status_code,
            retryable=True,
        )
    if "error" in data and not data.get("choices"):
        raise status_error(500, data)  # an error sent with status 200 (some proxies do)
    if not data.get("choices"):
        raise OpenAIHTTPError(
            "APIError",
            "OpenAIException - the answer has no choices",
            status=response.status_code,
            retryable=True,
        )
    return data


def _events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a server-sent event stream's ``data`` fields, up to ``[DONE]``
    (WHATWG HTML, "Server-sent events": ``data`` lines of one event are joined by newlines;
    comment lines start with a colon; a blank line ends an event)."""
    data: list[str] = []
    for line in _with_end(lines):
        if line == "":
            if data:
                text = "\n".join(data)
                data = []
                if text.strip() == "[DONE]":
                    return
                try:
                    event = json.loads(text)
                except ValueError as exc:
                    raise OpenAIHTTPError(
                        "APIError",
                        f"OpenAIException - a stream event is not JSON: {text[:200]!r}",
                        retryable=True,
                    ) from exc
                if isinstance(event, dict):
                    yield event
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)


def _with_end(lines: Iterator[str]) -> Iterator[str]:
    yield from lines
    yield ""  # a stream that ends without a blank line still ends its last event


def _gather(
    events: Iterator[dict[str, Any]],
    on_token: Callable[[str], None],
    streamed: list[bool] | None,
) -> dict[str, Any]:
    """Assemble streamed chunks into one answer, handing each text piece to ``on_token``."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: Any = None
    role = "assistant"
    for chunk in events:
        if "error" in chunk and not chunk.get("choices"):
            raise status_error(500, chunk)  # an error sent inside the stream
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            finish = choice.get("finish_reason") or finish
            delta = choice.get("delta") or {}
            role = delta.get("role") or role
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                text.append(piece)
                if streamed is not None:
                    streamed[0] = True
                on_token(piece)
            for call in delta.get("tool_calls") or []:
                _add_call_delta(calls, call)
    message: dict[str, Any] = {"role": role, "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


def _add_call_delta(calls: dict[int, dict[str, Any]], delta: dict[str, Any]) -> None:
    """Merge one tool-call delta into ``calls`` (by its ``index``): the first carries the id
    and the function's name, the next ones pieces of its arguments (a server that repeats the
    id or the name in later deltas changes neither)."""
    index = delta.get("index")
    if not isinstance(index, int):
        index = len(calls)
    call = calls.setdefault(
        index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
    )
    if delta.get("id") and not call["id"]:
        call["id"] = delta["id"]
    function = delta.get("function") or {}
    if function.get("name") and not call["function"]["name"]:
        call["function"]["name"] = function["name"]
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        call["function"]["arguments"] += arguments
