"""OpenAI's chat-completions API through the official ``openai`` SDK, without litellm.

Why: ``import litellm`` takes 3 s on an idle machine and 10-15 s on this project's loaded 2-core
machines, and every model call waited for it: ``veil -p hi`` against a server that answers at
once took 8.5-12.3 s (issue 30). Providers of ``type`` ``openai`` -- OpenAI itself and every
OpenAI-compatible server (OpenRouter, vLLM, LM Studio, llama.cpp's server, Ollama's ``/v1``...)
-- are called here with ``openai.OpenAI`` (about 0.8 s to import, and litellm's own ``openai``
provider calls the same SDK), every other provider through litellm
(:class:`veil.core.models.llm.LiteLLMModel` decides). ``VEIL_DIRECT_OPENAI=0`` sends them through
litellm too.

What litellm's ``openai`` provider does and this module does the same way:

- the model string loses its ``openai/`` prefix (``openai/gpt-4o`` is sent as ``gpt-4o``, and
  ``openai/anthropic/claude`` to OpenRouter as ``anthropic/claude``);
- the endpoint is the route's ``base_url``, else ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE``, else
  ``https://api.openai.com/v1``; the key the route's, else ``OPENAI_API_KEY``;
- the request body is ``model``, ``messages``, ``tools``, ``stream`` (with
  ``stream_options.include_usage``) and the role's ``options`` as they are;
- the SDK retries a call that failed with a connection error, a timeout, 408, 409, 429 or 5xx
  up to ``max_retries`` times (2 unless the role's options say otherwise, the SDK's default and
  litellm's), with exponential backoff or the server's ``Retry-After``; only then does veil move
  on to the next provider.

Only options that are fields of OpenAI's request body (:data:`BODY_OPTIONS`) or of the SDK's
request (:data:`CLIENT_OPTIONS`) are sent this way; a role with any other option (litellm's own,
such as ``mock_response`` or ``num_retries``) goes through litellm, which knows it.

Errors become :class:`OpenAIChatError`, named as litellm names them (``RateLimitError``,
``AuthenticationError``...), with whether another provider may be tried: connection errors,
timeouts, 408, 409, 429 and 5xx may; other 4xx may not; a 400 or 413 that says the prompt is too
long (:func:`veil.core.models.context_refusal.is_context_refusal`) is a context-window error
(:attr:`OpenAIChatError.context_window`).

The SDK is imported on first use, or earlier by :func:`start_loading` on a loader thread
(:mod:`veil.core.background`) while the command opens the project, so that the first call waits
only for what is not loaded yet. Its clients are closed by :func:`close_clients`, which
:func:`veil.core.background.finish` calls.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from veil.core.models.context_refusal import is_context_refusal

if TYPE_CHECKING:  # pragma: no cover
    import openai

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

CLIENT_OPTIONS = frozenset({"timeout", "max_retries", "extra_headers", "extra_body"})
"""Role options of the SDK's request, as litellm passes them: ``timeout`` (seconds),
``max_retries`` (retries of a transient failure on the same provider), ``extra_headers`` (added
to the request's headers) and ``extra_body`` (merged into the body)."""

CONNECT_TIMEOUT_S = 20.0
"""Seconds to connect to the provider before the attempt counts as a connection error."""

READ_TIMEOUT_S = 600.0
"""Seconds without a byte of the answer before the call times out (a slow model streams its
first token late; the SDK's and litellm's default), unless the role's ``timeout`` says
otherwise."""


def enabled() -> bool:
    """Whether calls to ``openai`` providers go through this module (``VEIL_DIRECT_OPENAI``
    unset, or anything but ``0`` / ``false`` / ``no``)."""
    return os.environ.get("VEIL_DIRECT_OPENAI", "").strip().lower() not in ("0", "false", "no")


def can_send(provider_type: str | None, options: dict[str, Any]) -> bool:
    """Whether a call to a provider of ``provider_type`` with the role's ``options`` goes
    through this module: the provider is of type ``openai``, every option is one it sends
    (:data:`BODY_OPTIONS`, :data:`CLIENT_OPTIONS`) and it is :func:`enabled`."""
    return provider_type == "openai" and set(options) <= BODY_OPTIONS | CLIENT_OPTIONS and enabled()


def wire_model(model: str) -> str:
    """The model name sent in the body: ``model`` without one leading ``openai/``."""
    return model[len("openai/") :] if model.startswith("openai/") else model


def base_url_of(base_url: str | None) -> str:
    """The API's base URL: ``base_url``, else ``OPENAI_BASE_URL``, ``OPENAI_API_BASE``, else
    :data:`DEFAULT_BASE_URL` (litellm's order)."""
    return (
        base_url
        or os.environ.get("OPENAI_BASE_URL")
        or os.environ.get("OPENAI_API_BASE")
        or DEFAULT_BASE_URL
    )


class OpenAIChatError(Exception):
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


def status_error(status: int, error: Any) -> OpenAIChatError:
    """The error of an answer with HTTP ``status`` >= 400 whose ``error`` is OpenAI's error
    object (``{"message", "type", "code"}``, what the SDK keeps as ``APIStatusError.body``) or
    any other value (its text is the message)."""
    if isinstance(error, dict):
        text = str(error.get("message") or error.get("type") or "")
        code = str(error.get("code") or "")
    else:
        text, code = str(error if error is not None else ""), ""
    text = text or f"HTTP {status}"
    kind_named = str(error.get("type") or "") if isinstance(error, dict) else ""
    # the phrases and codes providers use for it (veil.core.models.context_refusal)
    too_long = status in (400, 413) and is_context_refusal(f"{text} {code} {kind_named}")
    kind = "ContextWindowExceededError" if too_long else _STATUS_KINDS.get(status)
    if kind is None:
        kind = "InternalServerError" if status >= 500 else "APIError"
    retryable = not too_long and (status in (408, 409, 429) or status >= 500)
    return OpenAIChatError(
        kind,
        f"OpenAIException - {text}",
        status=status,
        retryable=retryable,
        context_window=too_long,
    )


def sdk_error(exc: Exception) -> OpenAIChatError:
    """The :class:`OpenAIChatError` of an exception the SDK raised (``openai.OpenAIError``)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):  # a subclass of APIConnectionError
        return OpenAIChatError("Timeout", f"OpenAIException - {exc}", retryable=True)
    if isinstance(exc, openai.APIConnectionError):  # refused, reset, DNS, protocol errors
        cause = exc.__cause__
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        return OpenAIChatError(
            "APIConnectionError", f"OpenAIException - {exc}{detail}", retryable=True
        )
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if exc.body is not None else exc.response.text
        return status_error(exc.status_code, body)
    if isinstance(exc, openai.APIError):  # an error sent inside a stream (no status)
        return status_error(500, exc.body if exc.body is not None else str(exc))
    return OpenAIChatError(type(exc).__name__, f"OpenAIException - {exc}")


def _import_sdk() -> None:
    """Import what a call uses: the client and the stream accumulator."""
    import openai  # noqa: F401
    import openai.lib.streaming.chat  # noqa: F401


def start_loading() -> None:
    """Import the SDK on a loader thread (:func:`veil.core.background.start_loader`) unless it
    is imported already: a command that may call a model starts it at once, and the first call
    then waits only for what is not loaded yet."""
    if "openai.lib.streaming.chat" in sys.modules:
        return
    from veil.core import background

    background.start_loader("veil-openai", _import_sdk)


_clients: dict[tuple[str, str], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def client(base_url: str | None, api_key: str) -> openai.OpenAI:
    """The process's SDK client for one endpoint and key (connections kept alive between
    calls; thread-safe; made on first use): ``base_url`` as :func:`base_url_of` resolves it,
    :data:`READ_TIMEOUT_S` and :data:`CONNECT_TIMEOUT_S`, the SDK's retries."""
    import openai

    base = base_url_of(base_url)
    with _clients_lock:
        made = _clients.get((base, api_key))
        if made is None:
            made = _clients[(base, api_key)] = openai.OpenAI(
                api_key=api_key,
                base_url=base,
                timeout=openai.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
            )
        return made


def close_clients() -> None:
    """Close every SDK client made (their connection pools); a later call makes new ones."""
    with _clients_lock:
        made = list(_clients.values())
        _clients.clear()
    for each in made:
        each.close()


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
) -> Any:
    """One chat completion.

    Args:
        model: the litellm model string (``openai/gpt-4o``; see :func:`wire_model`).
        messages, tools: OpenAI-format messages and function schemas.
        options: the role's options (:func:`can_send` accepted them).
        base_url, api_key: the route's (see the module docstring for the defaults).
        on_token: when given, the answer is streamed and each piece of text handed to it as
            it arrives; an exception it raises propagates unchanged.
        streamed: ``streamed[0]`` is set True once a piece of text was handed to ``on_token``.

    Returns:
        The SDK's ``ChatCompletion``, or for a stream the completion its chunks add up to
        (``openai.lib.streaming.chat.ChatCompletionStreamState``'s snapshot; its ``usage``
        None when the provider sent none). Read it with
        :func:`veil.core.models.llm.message_from_response`.

    Raises:
        OpenAIChatError: no answer (see the class); the exception of ``on_token``.
    """
    import openai

    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key:
        raise OpenAIChatError(
            "AuthenticationError",
            "OpenAIException - no API key: set api_key for this provider in auth.json or "
            "OPENAI_API_KEY",
            status=401,
        )
    sdk = client(base_url, key)
    request: dict[str, Any] = {"model": wire_model(model), "messages": messages}
    if tools:
        request["tools"] = tools
    for name, value in options.items():
        if name == "max_retries" and isinstance(value, int) and value >= 0:
            sdk = sdk.with_options(max_retries=value)
        elif name == "timeout" and isinstance(value, (int, float)) and value > 0:
            request["timeout"] = openai.Timeout(
                float(value), connect=min(float(value), CONNECT_TIMEOUT_S)
            )
        elif name in BODY_OPTIONS or (
            name in ("extra_headers", "extra_body") and isinstance(value, dict)
        ):
            request[name] = value
    try:
        if on_token is None:
            return _answer(sdk.chat.completions.create(**request))
        request.setdefault("stream_options", {"include_usage": True})
        return _stream(sdk.chat.completions.create(stream=True, **request), on_token, streamed)
    except openai.OpenAIError as exc:
        raise sdk_error(exc) from exc


def _answer(response: Any) -> Any:
    """A complete answer, or the error it carries in place of its choices (some proxies send
    an error with status 200)."""
    if getattr(response, "choices", None):
        return response
    error = getattr(response, "error", None)
    if error is not None:
        raise status_error(500, error)
    raise OpenAIChatError("APIError", "OpenAIException - the answer has no choices", retryable=True)


def _stream(stream: Any, on_token: Callable[[str], None], streamed: list[bool] | None) -> Any:
    """Hand each text piece of ``stream`` to ``on_token`` and return the completion its chunks
    add up to (the SDK's accumulator; the stream's connection is closed however it ends)."""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state: ChatCompletionStreamState = ChatCompletionStreamState()
    seen = False
    call_fields: dict[tuple[int, int], tuple[str | None, str | None]] = {}
    with stream:
        for chunk in stream:
            _drop_repeated_call_fields(chunk, call_fields)
            state.handle_chunk(chunk)
            seen = True
            for choice in chunk.choices or []:
                piece = choice.delta.content if choice.index == 0 and choice.delta else None
                if piece:
                    if streamed is not None:
                        streamed[0] = True
                    on_token(piece)
    if not seen:
        raise OpenAIChatError(
            "APIError", "OpenAIException - the stream ended without a chunk", retryable=True
        )
    answer = state.current_completion_snapshot
    if not answer.choices:
        raise OpenAIChatError(
            "APIError", "OpenAIException - the stream had no choices", retryable=True
        )
    return answer


def _drop_repeated_call_fields(
    chunk: Any, seen: dict[tuple[int, int], tuple[str | None, str | None]]
) -> None:
    """Clear, in ``chunk``, a tool call's ``id`` and function ``name`` that repeat what an
    earlier chunk of the same call (choice index, call index) already gave.

    OpenAI sends both in a call's first chunk only, and the SDK's accumulator joins every string
    it receives again (``"call_a" + "call_a"``); some OpenAI-compatible servers (vLLM among
    them) repeat both in every chunk of the call. An id never arrives in pieces, so any later
    one is dropped; a later name is dropped when it equals the name so far. ``seen`` maps
    ``(choice index, call index)`` to the ``(id, name)`` kept so far, across the stream.
    """
    for choice in getattr(chunk, "choices", None) or []:
        delta = getattr(choice, "delta", None)
        for call in getattr(delta, "tool_calls", None) or []:
            key = (choice.index, call.index)
            if key not in seen:
                seen[key] = (call.id, call.function.name if call.function else None)
                continue
            first_id, first_name = seen[key]
            if call.id is not None and first_id is not None:
                call.id = None
            elif call.id is not None:
                first_id = call.id
            if call.function is not None and call.function.name is not None:
                if call.function.name == first_name:
                    call.function.name = None
                else:
                    first_name = (first_name or "") + call.function.name
            seen[key] = (first_id, first_name)


def list_models(base_url: str | None, api_key: str | None, timeout: float) -> list[str]:
    """The ids of the models an OpenAI-compatible endpoint serves (``GET <base_url>/models``,
    OpenAI API reference "List models"), sorted; asked once, within ``timeout`` seconds.

    ``api_key`` (else ``OPENAI_API_KEY``) is sent when there is one; a local server that needs
    none is asked without.

    Raises:
        OpenAIChatError: no answer, or one that is not a model list.
    """
    import openai

    key = api_key or os.environ.get("OPENAI_API_KEY") or ""
    sdk = client(base_url, key).with_options(timeout=timeout, max_retries=0)
    # without a key the SDK refuses to send unless the Authorization header is omitted on purpose
    headers = None if key else {"Authorization": openai.omit}
    try:
        page = sdk.models.list(extra_headers=headers)
    except openai.OpenAIError as exc:
        raise sdk_error(exc) from exc
    listed = getattr(page, "data", None)
    if not isinstance(listed, list):
        raise OpenAIChatError(
            "APIError", "the answer is not a model list ({'data': [{'id': ...}]})"
        )
    return sorted(str(m.id) for m in listed if isinstance(getattr(m, "id", None), str))
