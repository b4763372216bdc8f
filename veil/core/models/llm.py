"""LLM access: which model answers a role, provider routing and fallback, usage accounting.

- :class:`ChatModel` is what the agent loop, compaction and replay call: ``complete(messages,
  tools, on_token)`` -> :class:`Completion` with an OpenAI-format assistant message.
- :class:`LiteLLMModel` calls any litellm provider, following ``auth.json``'s ``routing``
  (``default``, then ``fallback`` in order; seed 000 "Using a dedicated compact model").
- :class:`LLM` picks the model for a role (``main``, or ``compact`` which falls back to ``main``,
  seed 000), and uses a local model a plugin registers (:class:`LocalModel`, the
  ``register_models`` hook; the ``veil_bundled`` distribution registers SmolLM2-135M) when
  nothing is configured. The core itself needs no local model and no llama-cpp-python.

litellm is imported lazily (through :func:`veil.core.models.offline.import_litellm`) so that importing
this module, and ``veil --help``, stay fast.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from veil.core.errors import ConfigError, ProviderError
from veil.core.models.context_refusal import RefusalFigures, is_context_refusal, refusal_figures
from veil.core.models.offline import import_litellm
from veil.core.models.tokens import count_message_tokens, count_text_tokens
from veil.core.safety.trust import KEYLESS_API_KEY, filter_project_options

if TYPE_CHECKING:
    import pluggy

    from veil.core.settings import Config, ModelRole

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_WINDOW = 8192
"""Tokens assumed when neither the settings nor litellm's model map know a model's window."""

ROLES = ("main", "compact")


@dataclass
class Completion:
    """One model answer.

    Attributes:
        message: the OpenAI assistant message ``{"role": "assistant", "content": str | None,
            "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]}``,
            ``arguments`` a JSON string; ``tool_calls`` present only when there are some.
        usage: ``{"prompt_tokens": int, "completion_tokens": int}`` as the provider reported
            them; where it reported none (or zeros, which litellm puts in place of a missing
            ``usage``), counted by veil (:func:`counted_usage`) and ``usage_estimated`` is True.
            ``cached_tokens`` (prompt tokens read from the provider's prompt cache, OpenAI's
            ``prompt_tokens_details.cached_tokens``) is there only when the provider said.
        model: the model that answered (litellm model string or the bundled model's name).
        provider: the auth.json provider name that answered (or ``bundled`` / ``scripted``).
        finish_reason: ``stop``, ``tool_calls``, ``length``... as reported, or None.
        usage_estimated: True when a figure of ``usage`` was counted by veil, not reported.
    """

    message: dict[str, Any]
    usage: dict[str, int]
    model: str
    provider: str
    finish_reason: str | None = None
    usage_estimated: bool = False

    @property
    def content(self) -> str:
        """The message's text ('' when it has none)."""
        return self.message.get("content") or ""

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The message's tool calls ([] when none)."""
        return list(self.message.get("tool_calls") or [])


class ChatModel(Protocol):
    """A chat model veil can call (a structural protocol: any object with these members).

    Not ``runtime_checkable`` on purpose: an ``isinstance`` check would evaluate
    ``context_window``, which may import litellm or load the bundled model.

    Attributes:
        name: model name (as configured, e.g. ``anthropic/claude-4-6-sonnet``).
        provider: the provider that answers first (auth.json name, ``bundled``...).
        context_window: the model's input window, in tokens.
    """

    name: str
    provider: str
    context_window: int

    def complete(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Completion:
        """Answer ``messages`` (OpenAI format), optionally calling ``tools`` (OpenAI function
        schemas); text is streamed to ``on_token`` piece by piece when given.

        Raises:
            ProviderError: the model could not answer (every provider failed).
        """
        ...

    def count_tokens(self, messages: list[dict] | str) -> int:
        """Tokens of a prompt (list of messages) or of a text, for this model."""
        ...


def error_body_text(exc: BaseException) -> str:
    """The HTTP body a provider answered ``exc`` with, as litellm keeps it on the exception
    (``exc.response``), else ``""``: its message may leave out fields of the body (the
    window llama.cpp's server states in ``n_ctx``). At most 4,000 characters."""
    try:
        text = getattr(getattr(exc, "response", None), "text", "")
    except Exception:  # noqa: BLE001 - a response without a readable body
        return ""
    return text[:4000] if isinstance(text, str) else ""


class ContextWindowExceededError(ProviderError):
    """The provider refused the prompt as longer than the model's context window.

    A front end or loop can catch it to compact and retry; it is not retried on another
    provider (same model, same window).

    Attributes:
        figures: the limit and the prompt size the refusal states, when it does
            (:func:`veil.core.models.context_refusal.refusal_figures`).
    """

    code = "CONTEXT_WINDOW_EXCEEDED"
    http_status = 400

    def __init__(self, message: str, figures: RefusalFigures | None = None) -> None:
        super().__init__(message)
        self.figures = figures if figures is not None else refusal_figures(message)


# --------------------------------------------------------------------------------------------
# Redaction of error messages (the rules and the known secrets: veil.core.safety.redaction)


# Loose shapes for provider error text, where removing too much costs nothing; the credential
# formats of veil.core.safety.secret_formats run after them.
_KEY_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),  # OpenAI, Anthropic, OpenRouter, DeepSeek keys
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),  # Google API keys
    re.compile(r"\b(?:gsk|xai|hf|pplx|fw)_[A-Za-z0-9]{12,}"),  # Groq, xAI, HF, Perplexity...
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/\-]{8,}=*"),
    re.compile(r"(?i)((?:api[_-]?key|x-api-key|token)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{6,}"),
]
MIN_FRAGMENT_CHARS = 12
"""The shortest run of a known secret's characters that :func:`redact` removes from an error
message when the secret is not there whole (a provider that echoes a key cut short). 12, not
fewer: shorter runs are ordinary text (with the key ``sk-scripted-test-key``, 8 characters removed
the "scripted-" of "scripted-main"), and no common word or provider prefix is that long except
``sk-ant-api03-`` (13, harmless to remove); 12 characters of a random alphanumeric key carry
about 71 bits (12 x log2 62), a real part of it. A secret shorter than 12 is removed only whole."""


def _mask_fragments(text: str, secret: str) -> str:
    """Replace every run of at least :data:`MIN_FRAGMENT_CHARS` characters of ``text`` (or the
    whole of a shorter ``secret``) that occurs inside ``secret``, each run as long as it goes."""
    from veil.core.safety.secret_formats import BARE_PLACEHOLDER as _REDACTED

    shortest = min(MIN_FRAGMENT_CHARS, len(secret))
    if len(secret) < 8 or len(text) < shortest:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        end = i + shortest
        if end <= len(text) and text[i:end] in secret:
            while end < len(text) and text[i : end + 1] in secret:
                end += 1
            out.append(_REDACTED)
            i = end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def redact(text: str, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """``text`` (an error message) with API keys removed.

    Removes each known secret, whole or in part (a run of :data:`MIN_FRAGMENT_CHARS` or more of
    its characters, so a key the provider echoes cut short is caught too, but not a word that
    shares a few characters with it), anything shaped like a key (``sk-...``, ``AIza...``,
    ``Bearer ...``, ``api_key=...``), then every credential format of
    :mod:`veil.core.safety.secret_formats` (:class:`veil.core.safety.redaction.Redactor`).
    """
    from veil.core.safety.redaction import pattern_redactor
    from veil.core.safety.secret_formats import BARE_PLACEHOLDER as _REDACTED

    for secret in secrets:
        if secret:
            text = _mask_fragments(text, secret)
    for pattern in _KEY_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + _REDACTED, text)
        else:
            text = pattern.sub(_REDACTED, text)
    return pattern_redactor().text(text)


def _environment_secrets() -> list[str]:
    """Values of the environment's credential variables
    (:func:`veil.core.safety.redaction.environment_secrets`)."""
    from veil.core.safety.redaction import environment_secrets

    return environment_secrets()


# --------------------------------------------------------------------------------------------
# litellm-backed model


class _CallbackError(Exception):
    """Carries an exception raised by the caller's ``on_token`` past the provider handling."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


@dataclass(frozen=True)
class Route:
    """One provider to try: its auth.json ``name``, litellm ``type`` (None: pass the model name
    to litellm as is, with the user's own environment keys), endpoint and key.

    ``from_project``: the provider is defined by the project's ``.veil/auth.json``; its requests
    carry only :data:`veil.core.safety.trust.PROJECT_MODEL_OPTIONS` of the role's options.
    """

    name: str
    type: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    from_project: bool = False

    def model_string(self, model: str) -> str:
        """litellm's model string: ``<type>/<model>`` unless ``model`` already starts so."""
        if self.type is None or model.startswith(self.type + "/"):
            return model
        return f"{self.type}/{model}"


def is_retryable_error(litellm: Any, exc: BaseException) -> bool:
    """Connection errors, timeouts, rate limits and 5xx move on to the next provider."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    transient = (
        litellm.RateLimitError,
        litellm.APIConnectionError,
        litellm.Timeout,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
    )
    if isinstance(exc, transient):
        return True
    final = (
        litellm.AuthenticationError,
        litellm.PermissionDeniedError,
        litellm.BadRequestError,
        litellm.NotFoundError,
        litellm.UnprocessableEntityError,
    )
    if isinstance(exc, final):
        return False
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status >= 500


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def message_from_response(response: Any) -> tuple[dict[str, Any], str | None]:
    """The OpenAI assistant message dict and finish reason of a litellm ``ModelResponse`` or
    or of the ``openai`` SDK's ``ChatCompletion`` (:mod:`veil.core.models.openai_chat`)."""
    choice = _get(response, "choices")[0]
    raw = _get(choice, "message")
    message: dict[str, Any] = {"role": "assistant", "content": _get(raw, "content")}
    calls = []
    for call in _get(raw, "tool_calls") or []:
        function = _get(call, "function")
        arguments = _get(function, "arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            {
                "id": _get(call, "id") or f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": _get(function, "name") or "", "arguments": arguments},
            }
        )
    if calls:
        message["tool_calls"] = calls
        if not message["content"]:
            message["content"] = None  # OpenAI's shape: no text beside tool calls
    return message, _get(choice, "finish_reason")


class LiteLLMModel:
    """A :class:`ChatModel` answered through litellm, trying each route in order.

    Args:
        name: the configured model name (``gpt-4o``, ``anthropic/claude-4-6-sonnet``...).
        routes: providers to try in order (at least one).
        options: extra ``litellm.completion`` arguments (``ModelRole.options``: ``temperature``,
            ``max_tokens``, ``mock_response``...).
        context_window: tokens, overriding litellm's model map (``ModelRole.context_window``).

    A route is left for the next on connection errors, timeouts, rate limits and 5xx answers;
    authentication, permission, bad-request and not-found errors stop at once. When streaming,
    a route that fails after text was already streamed is not retried elsewhere (the caller has
    shown that text). Errors never contain API keys (:func:`redact`).
    """

    def __init__(
        self,
        name: str,
        routes: list[Route],
        options: dict[str, Any] | None = None,
        context_window: int | None = None,
    ) -> None:
        if not routes:
            raise ValueError("LiteLLMModel needs at least one route")
        self.name = name
        self.routes = list(routes)
        self.provider = self.routes[0].name
        self.options = dict(options or {})
        self._context_window = context_window
        self.context_window_note: str | None = None
        self._lock = threading.Lock()

    @property
    def litellm_model(self) -> str:
        """litellm model string of the first route (``openai/gpt-4o``)."""
        return self.routes[0].model_string(self.name)

    @property
    def context_window(self) -> int:
        """Input window in tokens: the configured value, else litellm's ``max_input_tokens``
        (then ``max_tokens``), else :data:`DEFAULT_CONTEXT_WINDOW` with a logged note."""
        with self._lock:
            if self._context_window is None:
                self._context_window = self._lookup_context_window()
            return self._context_window

    @context_window.setter
    def context_window(self, value: int) -> None:
        self._context_window = int(value)

    def _lookup_context_window(self) -> int:
        litellm = import_litellm()
        route = self.routes[0]
        for candidate in dict.fromkeys([self.litellm_model, self.name]):
            try:
                info = litellm.get_model_info(
                    model=candidate, api_base=route.base_url, api_key=route.api_key
                )
            except Exception:  # unknown model or unreachable server: try the next name
                continue
            window = info.get("max_input_tokens") or info.get("max_tokens")
            if isinstance(window, int) and window > 0:
                return window
        self.context_window_note = (
            f"litellm knows no context window for {self.name!r}; assuming "
            f"{DEFAULT_CONTEXT_WINDOW} tokens (set models.main.contextWindow to change it)"
        )
        log.warning(self.context_window_note)
        return DEFAULT_CONTEXT_WINDOW

    def count_tokens(self, messages: list[dict] | str) -> int:
        """Tokens for this model (exact for OpenAI models, estimated otherwise;
        :mod:`veil.core.models.tokens`)."""
        if isinstance(messages, str):
            return count_text_tokens(messages, self.litellm_model)
        return count_message_tokens(messages, self.litellm_model)

    def _secrets(self) -> list[str]:
        keys = [r.api_key for r in self.routes if r.api_key and r.api_key != KEYLESS_API_KEY]
        return keys + _environment_secrets()

    def complete(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Completion:
        """Answer through the first route that succeeds (see the class docstring).

        Raises:
            ContextWindowExceededError: the provider said the prompt is too long.
            ProviderError: every route failed, or one failed with an error that another
                provider would repeat (authentication, bad request); the message names each
                provider tried and its error, keys redacted.
        """
        litellm: Any = None  # imported only when a route needs it (openai_chat does not)
        failures: list[str] = []
        secrets = self._secrets()
        for route in self.routes:
            model = route.model_string(self.name)
            streamed = [False]
            direct = self._direct(route)
            try:
                if direct:
                    return self._call_direct(route, model, messages, tools, on_token, streamed)
                if litellm is None:
                    litellm = import_litellm()
                return self._call(litellm, route, model, messages, tools, on_token, streamed)
            except _CallbackError as failed:  # the caller's on_token raised: not a provider error
                raise failed.original from None
            except Exception as exc:
                kind = getattr(exc, "kind", None) if direct else None
                text = redact(f"{kind or type(exc).__name__}: {exc}", secrets)[:600]
                failures.append(f"{route.name} ({model}): {text}")
                # litellm maps the usual bodies; a provider's own wording is read too, and the
                # figures its message leaves out (llama.cpp's n_ctx) from the body (the openai
                # SDK's exception, the cause of the direct call's error, keeps it as litellm does)
                raw = f"{exc} {error_body_text(exc.__cause__ if direct else exc)}"
                refused = (
                    getattr(exc, "context_window", False)
                    if direct
                    else isinstance(exc, litellm.ContextWindowExceededError)
                )
                if refused or is_context_refusal(raw):
                    raise ContextWindowExceededError(
                        f"the prompt is longer than {model}'s context window: {text}",
                        refusal_figures(raw),
                    ) from None
                retry = (
                    getattr(exc, "retryable", False) if direct else is_retryable_error(litellm, exc)
                )
                if not retry or streamed[0]:
                    break
        tried = "; ".join(failures)
        raise ProviderError(f"model {self.name!r} could not answer: {tried}") from None

    def _options(self, route: Route) -> dict[str, Any]:
        """The role's options as sent to ``route`` (a project provider gets only
        :data:`~veil.core.safety.trust.PROJECT_MODEL_OPTIONS`)."""
        return filter_project_options(self.options) if route.from_project else self.options

    def _direct(self, route: Route) -> bool:
        """Whether the call to ``route`` goes through :mod:`veil.core.models.openai_chat` (the
        ``openai`` SDK: a provider of type ``openai`` and options it sends) instead of litellm."""
        from veil.core.models import openai_chat

        return openai_chat.can_send(route.type, self._options(route))

    def uses_litellm(self) -> bool:
        """Whether a call may go through litellm (a route :meth:`_direct` does not take), or
        its context window is looked up there (none configured)."""
        return self._context_window is None or not all(self._direct(r) for r in self.routes)

    def prepare(self) -> None:
        """Load now what the first call needs, so that it waits for nothing (``veil serve``
        before it reports ready, the REPL while the user types): litellm when a route or the
        context window needs it; the ``openai`` SDK's client of each route called through it;
        and this model's tokenizer."""
        import os

        from veil.core.models import openai_chat

        if self.uses_litellm():
            import_litellm()
        for route in self.routes:
            key = route.api_key or os.environ.get("OPENAI_API_KEY")
            if self._direct(route) and key:
                openai_chat.client(route.base_url, key)
        _ = self.context_window
        self.count_tokens([{"role": "user", "content": "warm"}])

    def _call_direct(
        self,
        route: Route,
        model: str,
        messages: list[dict],
        tools: list[dict] | None,
        on_token: Callable[[str], None] | None,
        streamed: list[bool],
    ) -> Completion:
        """One call through :mod:`veil.core.models.openai_chat`; an exception of ``on_token``
        comes out as :class:`_CallbackError`."""
        from veil.core.models import openai_chat

        token: Callable[[str], None] | None = None
        if on_token is not None:

            def token(piece: str) -> None:
                try:
                    on_token(piece)
                except Exception as exc:
                    raise _CallbackError(exc) from exc

        response = openai_chat.chat_completion(
            model=model,
            messages=messages,
            tools=tools,
            options=self._options(route),
            base_url=route.base_url,
            api_key=route.api_key,
            on_token=token,
            streamed=streamed,
        )
        message, finish_reason = message_from_response(response)
        usage, estimated = counted_usage(response.usage, messages, tools, message, model)
        return Completion(
            message=message,
            usage=usage,
            model=model,
            provider=route.name,
            finish_reason=finish_reason,
            usage_estimated=estimated,
        )

    def _call(
        self,
        litellm: Any,
        route: Route,
        model: str,
        messages: list[dict],
        tools: list[dict] | None,
        on_token: Callable[[str], None] | None,
        streamed: list[bool],
    ) -> Completion:
        kwargs: dict[str, Any] = {"model": model, "messages": messages, **self._options(route)}
        if route.base_url:
            kwargs["api_base"] = route.base_url
        if route.api_key:
            kwargs["api_key"] = route.api_key
        if tools:
            kwargs["tools"] = tools
        if on_token is None:
            response = litellm.completion(**kwargs)
        else:
            kwargs["stream"] = True
            if self._reports_stream_usage(litellm, model, route):
                kwargs.setdefault("stream_options", {"include_usage": True})
            chunks = []
            stream = litellm.completion(**kwargs)
            for chunk in stream:
                chunks.append(chunk)
                choices = _get(chunk, "choices") or []
                delta = _get(choices[0], "delta") if choices else None
                text = _get(delta, "content")
                if text:
                    streamed[0] = True
                    try:
                        on_token(text)
                    except Exception as exc:
                        raise _CallbackError(exc) from exc
            response = litellm.stream_chunk_builder(chunks, messages=messages)
        message, finish_reason = message_from_response(response)
        reported = _get(response, "usage")
        if on_token is not None and _provider_streamed_usage(stream) is False:
            reported = None  # litellm's own count, not the provider's: veil counts instead
        usage, estimated = counted_usage(reported, messages, tools, message, model)
        return Completion(
            message=message,
            usage=usage,
            model=model,
            provider=route.name,
            finish_reason=finish_reason,
            usage_estimated=estimated,
        )

    @staticmethod
    def _reports_stream_usage(litellm: Any, model: str, route: Route) -> bool:
        try:
            params = litellm.get_supported_openai_params(model=model) or []
        except Exception:
            return False
        return "stream_options" in params


def _provider_streamed_usage(stream: Any) -> bool | None:
    """Whether the provider sent ``usage`` in a stream litellm wrapped: litellm keeps the
    provider's chunks in ``chunks`` (a usage chunk among them when one came) and otherwise makes
    up a final usage of its own. None when the wrapper does not say (another litellm version)."""
    kept = getattr(stream, "chunks", None)
    if not isinstance(kept, list):
        return None
    return any(getattr(c, "usage", None) is not None for c in kept)


def counted_usage(
    reported: Any,
    messages: list[dict],
    tools: list[dict] | None,
    message: dict[str, Any],
    model: str,
) -> tuple[dict[str, int], bool]:
    """The usage of one answer: the provider's figures where it ``reported`` them, else counted.

    A figure is taken as missing when absent, not an int, or 0 where it cannot be 0 (prompt
    tokens of any request; completion tokens of an answer with text or tool calls): litellm
    puts zeros in place of a ``usage`` a provider left out. Counted, prompt tokens are the
    model's count of ``messages`` and ``tools`` (:func:`veil.core.models.tokens.count_message_tokens`,
    exact or estimated for ``model``), completion tokens the count of the answer's text and of
    its tool calls' names and arguments (:func:`veil.core.models.tokens.count_text_tokens`).

    ``cached_tokens`` is added when the provider reported the prompt's size and
    ``prompt_tokens_details.cached_tokens`` (OpenAI's name, which litellm also fills from
    Anthropic's ``cache_read_input_tokens``), capped at the prompt's size; veil never guesses it.

    Returns:
        ``({"prompt_tokens": int, "completion_tokens": int[, "cached_tokens": int]},
        estimated)``, ``estimated`` True when veil counted either figure.
    """
    prompt = _get(reported, "prompt_tokens")
    completion = _get(reported, "completion_tokens")
    calls = message.get("tool_calls") or []
    said_something = bool(message.get("content")) or bool(calls)
    estimated = False
    estimated_prompt = not isinstance(prompt, int) or prompt <= 0
    if estimated_prompt:
        prompt = count_message_tokens(messages, model, tools=tools)
        estimated = True
    if not isinstance(completion, int) or (completion <= 0 and said_something):
        completion = count_text_tokens(message.get("content") or "", model) + sum(
            count_text_tokens(c["function"]["name"], model)
            + count_text_tokens(c["function"]["arguments"], model)
            for c in calls
        )
        estimated = True
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    cached = _get(_get(reported, "prompt_tokens_details"), "cached_tokens")
    if not estimated_prompt and isinstance(cached, int) and cached >= 0:
        usage["cached_tokens"] = min(cached, prompt)
    return usage, estimated


# --------------------------------------------------------------------------------------------
# Role resolution and usage accounting


class _RecordingModel:
    """Wraps a ChatModel so every successful call is appended to :attr:`LLM.usage_log`."""

    def __init__(self, inner: ChatModel, role: str, log_list: list[dict], lock: threading.Lock):
        self.inner = inner
        self.role = role
        self._log = log_list
        self._lock = lock

    name = property(lambda self: self.inner.name)
    provider = property(lambda self: self.inner.provider)
    context_window = property(lambda self: self.inner.context_window)

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)

    def count_tokens(self, messages: list[dict] | str) -> int:
        return self.inner.count_tokens(messages)

    def complete(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Completion:
        start = time.perf_counter()
        result = self.inner.complete(messages, tools=tools, on_token=on_token)
        seconds = time.perf_counter() - start
        with self._lock:
            self._log.append(
                {
                    "role": self.role,
                    "model": result.model,
                    "provider": result.provider,
                    "prompt_tokens": int(result.usage.get("prompt_tokens", 0)),
                    "completion_tokens": int(result.usage.get("completion_tokens", 0)),
                    "estimated": bool(getattr(result, "usage_estimated", False)),
                    "seconds": seconds,
                }
            )
        return result


def _always() -> bool:
    return True


@dataclass(frozen=True)
class LocalModel:
    """A chat model that runs on this machine without a provider, as a plugin registers it
    through the ``register_models`` hook (in the spirit of simonw/llm's ``register_models``).

    With no provider and no model configured, the first available one answers (the
    ``veil_bundled`` distribution registers SmolLM2-135M-Instruct); naming it (or an alias) as a
    role's or a session's model selects it explicitly.

    Attributes:
        name: the model's name (``SmolLM2-135M-Instruct``).
        load: returns the :class:`ChatModel`, called on first use (it may load weights); raises
            ImportError or FileNotFoundError, naming what to install, when a piece is missing.
            Keep one instance per process inside it: every :class:`LLM` calls it.
        aliases: other names that select it (``bundled``, ``smollm2``).
        available: whether it can run here; must be cheap and import nothing heavy (it is
            checked whenever a project opens with nothing configured).
        notice: one sentence shown once when it answers because nothing is configured.
        tools: names of the tools it is offered, in the order their schemas are sent (those
            registered; None, the default: every registered tool). A small model declares the
            few it can use: each schema costs it prompt time, and more choice confuses it
            (veil_bundled's 135M model takes the six coding tools).
    """

    name: str
    load: Callable[[], ChatModel]
    aliases: frozenset[str] = frozenset()
    available: Callable[[], bool] = _always
    notice: str | None = None
    tools: tuple[str, ...] | None = None

    @property
    def names(self) -> frozenset[str]:
        """``name`` and its aliases."""
        return frozenset({self.name, *self.aliases})


def user_auth_text() -> str:
    """Where the user's auth.json is, as messages name it: ``~/.veil/auth.json``, or the real
    path under ``$VEIL_HOME`` when it is set (``~`` for the home folder)."""
    from veil.core.safety.trust import display_path
    from veil.core.settings import user_auth_file

    return display_path(user_auth_file())


def no_model_message() -> str:
    """What veil says when nothing can answer: no provider and no local model registered (the
    user's auth.json named where it really is, :func:`user_auth_text`)."""
    from veil.default_plugins import OFFLINE_MODEL_INSTALL

    return (
        "models.main: no model is configured and no offline model is installed; configure a "
        f"provider in {user_auth_text()} (providers, routing) and name its model under "
        f"models.main (auth.json or .veil/settings.json), or install {OFFLINE_MODEL_INSTALL}, "
        "and check that no setting blocks it (veil plugins)"
    )


def local_models_of(pm: pluggy.PluginManager, config: Config) -> list[LocalModel]:
    """The local models the plugins loaded in ``pm`` register (``register_models``), in hook
    call order, each name kept once (the first registration wins).

    Raises:
        PluginHookFailed: a plugin's ``register_models`` raised, or (PluginResultInvalid)
            returned something other than a list of :class:`LocalModel`.
    """
    from veil.core.plugins import call_impl, checked_list

    found: list[LocalModel] = []
    seen: set[str] = set()
    for impl in reversed(pm.hook.register_models.get_hookimpls()):
        plugin = pm.get_name(impl.plugin)
        result = call_impl(impl, "register_models", config=config)
        expected = "a list of veil.core.models.llm.LocalModel"
        for model in checked_list(plugin, "register_models", result, LocalModel, expected):
            if model.name not in seen:
                seen.add(model.name)
                found.append(model)
    return found


def installed_local_models(config: Config) -> list[LocalModel]:
    """The local models of the installed plugins that ``config`` (and ``VEIL_LOAD_PLUGINS`` /
    ``VEIL_DISABLE_PLUGINS``) lets load: what :class:`LLM` uses when it is not given a list.

    Raises:
        ImportError: a plugin fails to import (the message names it).
    """
    from veil.core import plugins

    selection = plugins.plugin_selection(
        config.settings.plugins.disable, config.settings.plugins.load
    )
    pm = plugins.load_plugins(plugins.new_plugin_manager(), selection)
    return local_models_of(pm, config)


class LLM:
    """Model access for one project: the model of each role, with usage accounting.

    Args:
        config: the project's :class:`~veil.core.settings.Config` (``models``, ``auth``).
        models: forces a :class:`ChatModel` per role (``{"main": ScriptedModel([...])}``, replay);
            a forced ``main`` also answers ``compact`` unless that is forced too, and a forced
            model answers whatever model name :meth:`model_for` is given.
        local_models: the models that run without a provider (:class:`LocalModel`); default
            those the installed plugins register (:func:`installed_local_models`, looked up
            only when needed). :class:`~veil.core.app.Veil` passes its own plugins' list.

    Attributes:
        is_offline_default: no provider and no model are configured and a local model is
            available, so it answers.
        notice: one sentence to print once when that local model answers (else None).
        usage_log: one dict per successful call: ``role``, ``model``, ``provider``,
            ``prompt_tokens``, ``completion_tokens``, ``estimated`` (veil counted the figures:
            the provider reported none), ``seconds`` (wall clock).
    """

    def __init__(
        self,
        config: Config,
        models: dict[str, ChatModel] | None = None,
        local_models: Sequence[LocalModel] | None = None,
    ) -> None:
        self.config = config
        self._forced = dict(models or {})
        unknown = set(self._forced) - set(ROLES)
        if unknown:
            raise ValueError(f"unknown model roles {sorted(unknown)}; use {list(ROLES)}")
        self.usage_log: list[dict] = []
        self._log_lock = threading.Lock()
        self._cache: dict[tuple[str, ...], ChatModel] = {}
        self._cache_lock = threading.Lock()
        self._local_models = list(local_models) if local_models is not None else None
        nothing_configured = (
            not self._forced and not config.auth.providers and config.models.main is None
        )
        default = self.default_local_model() if nothing_configured else None
        self.is_offline_default = default is not None and default.available()
        self.notice: str | None = default.notice if self.is_offline_default else None

    @property
    def local_models(self) -> list[LocalModel]:
        """The models that run without a provider (see the ``local_models`` argument)."""
        with self._cache_lock:
            if self._local_models is None:
                self._local_models = installed_local_models(self.config)
            return list(self._local_models)

    def default_local_model(self) -> LocalModel | None:
        """The local model that answers when nothing is configured: the first available one,
        else the first registered (whose ``load`` then says what is missing), else None."""
        models = self.local_models
        return next((m for m in models if m.available()), models[0] if models else None)

    def _local_model_named(self, name: str) -> LocalModel | None:
        return next((m for m in self.local_models if name in m.names), None)

    def local_model_of(self, model: Any) -> LocalModel | None:
        """The registered local model (:class:`LocalModel`) that ``model``, a model
        :meth:`model_for` returned, was loaded from; None for a provider's model (or a forced
        one). Its declared properties (``tools``, ``notice``) are the plugin's, never read from
        a provider's name."""
        inner = getattr(model, "inner", model)
        with self._cache_lock:
            names = [k[1] for k, v in self._cache.items() if k[0] == "local" and v is inner]
        return self._local_model_named(names[0]) if names else None

    def routes(self) -> list[Route]:
        """Providers to try, in order: ``routing.default`` (or the only provider when there is
        exactly one), then ``routing.fallback``. With no provider at all: one route that hands
        the model name to litellm as is (the user's own environment keys, a local Ollama...).

        A provider from the project's auth.json that names a ``base_url`` but no key gets
        :data:`~veil.core.safety.trust.KEYLESS_API_KEY`, so litellm never sends it a key from the
        environment (:mod:`veil.core.safety.trust`).

        Raises:
            ConfigError: several providers exist but ``routing.default`` is not set.
        """
        auth = self.config.auth
        if not auth.providers:
            return [Route(name="litellm")]
        order: list[str] = []
        if auth.routing.default:
            order.append(auth.routing.default)
        elif len(auth.providers) == 1:
            order.append(next(iter(auth.providers)))
        for name in auth.routing.fallback:
            if name not in order:
                order.append(name)
        if not order:
            names = ", ".join(sorted(auth.providers))
            raise ConfigError(
                f"auth.json: routing.default: not set and there are {len(auth.providers)} "
                f"providers ({names}); name the one to use"
            )
        return [self.provider_route(name) for name in order]

    def provider_route(self, name: str) -> Route:
        """The :class:`Route` of the auth.json provider called ``name`` (see :meth:`routes`
        for the key a keyless project provider gets).

        Raises:
            KeyError: no provider has that name.
        """
        p = self.config.auth.providers[name]
        key = p.api_key.get_secret_value() if p.api_key is not None else None
        from_project = name in self.config.project_providers
        if from_project and p.base_url and not key:
            key = KEYLESS_API_KEY
        return Route(
            name=name, type=p.type, base_url=p.base_url, api_key=key, from_project=from_project
        )

    def named_provider(self, model: str) -> tuple[str, str] | None:
        """``(provider, model)`` when ``model`` is ``NAME/MODEL`` and ``NAME`` is an auth.json
        provider: ``--model local/qwen3`` and ``/model local/qwen3`` go to the provider called
        ``local`` alone, as ``qwen3``; None otherwise (``anthropic/claude-...`` is then a
        litellm provider prefix, sent through :meth:`routes`). A provider's name wins over the
        litellm prefix it may spell (a provider called ``openai``).

        Raises:
            ConfigError: ``NAME`` is a provider the project's auth.json defines and the user
                has not allowed the project's providers (issue 17's consent: a model name in a
                project file must not reach a server the project chose).
        """
        provider, slash, rest = model.partition("/")
        if not slash or not rest or provider not in self.config.auth.providers:
            return None
        if provider in self.config.project_providers:
            _check_named_project_provider(self.config, provider, model)
        return provider, rest

    def model_for(self, role: str = "main", model: str | None = None) -> ChatModel:
        """The model answering ``role``, with usage recorded in :attr:`usage_log`.

        Args:
            role: ``main`` or ``compact`` (``compact`` falls back to ``main``, seed 000).
            model: a model name overriding the role's (a session's model,
                ``defaultCompaction.model``); None or ``"default"`` keeps the role's.

        Raises:
            ValueError: an unknown role.
            ConfigError: no model can be resolved (providers without ``models.main``; nothing
                configured and the bundled model not installed; routing ambiguous).
        """
        if role not in ROLES:
            raise ValueError(f"unknown model role {role!r}; use {list(ROLES)}")
        forced = self._forced.get(role)
        if forced is None and role == "compact" and self.config.models.compact is None:
            forced = self._forced.get("main")  # compact falls back to main (seed 000)
        if forced is not None:
            return _RecordingModel(forced, role, self.usage_log, self._log_lock)
        if model in (None, "", "default"):
            model = None
        settings = self.config.models
        role_cfg: ModelRole | None = settings.main
        if role == "compact" and settings.compact is not None:
            role_cfg = settings.compact
        name = model or (role_cfg.model if role_cfg is not None else None)
        inner = self._resolve(name, self.model_settings(name, role_cfg))
        return _RecordingModel(inner, role, self.usage_log, self._log_lock)

    def model_settings(
        self, name: str | None, preferred: ModelRole | None = None
    ) -> ModelRole | None:
        """The configured settings (``contextWindow``, ``options``) of model ``name``, whichever
        role configures it.

        A model named for one role is often configured under another: ``defaultCompaction.model``
        or a session's model naming the ``models.compact`` model, a ``compact`` role falling back
        to ``main``. Candidates, first match wins: ``preferred`` (the asked role's settings), then
        ``models.main`` and ``models.compact`` as merged (:attr:`Config.models`), then each role of
        settings.json and of auth.json. A match without ``contextWindow`` takes the first window
        another candidate configures for the same model name, so a window set once (in auth.json,
        say) holds for every role using that model.

        Returns:
            the :class:`~veil.core.settings.ModelRole` for ``name`` (a copy when its window came
            from another candidate), or None when no role configures ``name``.
        """
        if name is None:
            return None
        from veil.core.settings import ModelRole

        merged = self.config.models
        auth = self.config.auth.models
        settings = self.config.settings.models
        layers = [  # each layer's own role, where it names its model
            ModelRole(model=c.model, context_window=c.context_window, options=c.options or {})
            for c in (settings.main, settings.compact, auth.main, auth.compact)
            if c is not None and c.model is not None
        ]
        candidates = [
            c
            for c in (preferred, merged.main, merged.compact, *layers)
            if c is not None and c.model == name
        ]
        if not candidates:
            return None
        chosen = candidates[0]
        if chosen.context_window is None:
            window = next((c.context_window for c in candidates if c.context_window), None)
            if window is not None:
                chosen = chosen.model_copy(update={"context_window": window})
        return chosen

    def _resolve(self, name: str | None, role_cfg: ModelRole | None) -> ChatModel:
        local = self._local_model_named(name) if name is not None else None
        if name is None:
            if self.config.auth.providers:
                names = ", ".join(sorted(self.config.auth.providers))
                raise ConfigError(
                    f"models.main: not set, but auth.json has providers ({names}); name the "
                    "model beside them in auth.json (or in .veil/settings.json), e.g. "
                    '"models": {"main": {"model": "gpt-4o", "contextWindow": 128000}}'
                )
            local = self.default_local_model()
            if local is None:
                raise ConfigError(no_model_message())
        if local is not None:
            key: tuple[str, ...] = ("local", local.name)
        else:  # one instance per model name and role settings (options, window)
            settings = (
                json.dumps(role_cfg.model_dump(), sort_keys=True, default=str) if role_cfg else ""
            )
            key = ("litellm", name, settings)  # type: ignore[assignment]
        with self._cache_lock:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
            if local is not None:
                model: ChatModel = _load_local(local)
            else:
                named = self.named_provider(name)  # type: ignore[arg-type]
                model = LiteLLMModel(
                    named[1] if named else name,  # type: ignore[arg-type]
                    [self.provider_route(named[0])] if named else self.routes(),
                    options=role_cfg.options if role_cfg else None,
                    context_window=role_cfg.context_window if role_cfg else None,
                )
            self._cache[key] = model
            return model

    def unservable_reason(self, name: str) -> str | None:
        """Why no configured provider can serve model ``name`` (a ``/model NAME`` switch), or
        None when one can; offline, from what veil and litellm know (nothing is sent).

        A name is servable by a forced model (tests, replay: it answers any name), by a local
        model a plugin registers (:class:`LocalModel`) when ``name`` names it and it can run, or
        by a route of :meth:`routes` when litellm can tell the provider of the route's model
        string (``litellm.get_llm_provider``) and the request would carry a key: the route's
        own ``api_key``, an endpoint of its own (``base_url``: a local or self-hosted server
        decides), a provider type that authenticates from the environment
        (:data:`veil.core.models.providers.AMBIENT_CREDENTIAL_TYPES`), or the ``*_API_KEY`` variables
        ``litellm.validate_environment`` asks for. Whether the provider knows this exact model
        is only known from its answer, so an unknown model name of a known provider passes.

        Returns:
            one sentence per route tried (``"<route>: <reason>"``, joined by ``"; "``), or None.

        Raises:
            ConfigError: the routing is ambiguous (:meth:`routes`).
        """
        if self._forced.get("main") is not None:
            return None
        local = self._local_model_named(name)
        if local is not None:
            return None if local.available() else f"the offline model {local.name} cannot run here"
        named = self.named_provider(name)
        if named is not None:  # NAME/MODEL: that provider alone
            reason = _route_problem(self.provider_route(named[0]), named[1])
            return None if reason is None else f"{named[0]}: {reason}"
        reasons = []
        for route in self.routes():
            reason = _route_problem(route, name)
            if reason is None:
                return None
            where = "no provider in auth.json" if route.name == "litellm" else route.name
            reasons.append(f"{where}: {reason}")
        return "; ".join(reasons)

    def usage_totals(self) -> dict[str, int]:
        """Sums over :attr:`usage_log`: ``calls``, ``prompt_tokens``, ``completion_tokens``."""
        with self._log_lock:
            entries = list(self.usage_log)
        return {
            "calls": len(entries),
            "prompt_tokens": sum(e["prompt_tokens"] for e in entries),
            "completion_tokens": sum(e["completion_tokens"] for e in entries),
        }


def _check_named_project_provider(config: Config, provider: str, model: str) -> None:
    """Refuse a model name that selects a provider of the project's auth.json unless the user
    allowed the project's providers (:func:`veil.core.safety.trust.check_project_provider_consent`,
    the check a routing entry naming it gets when the configuration loads).

    Raises:
        ConfigError: naming the model and both ways to allow it.
    """
    import os

    from veil.core.safety.trust import (
        check_project_provider_consent,
        pop_project_provider_consent,
    )
    from veil.core.settings import read_json_file, user_auth_file

    user_path = user_auth_file()
    allowed = pop_project_provider_consent(read_json_file(user_path), user_path)
    check_project_provider_consent(
        [(f"model {model!r}", provider)],
        frozenset({provider}),
        config.project_dir,
        config.veil_dir / "auth.json",
        user_path,
        allowed,
        dict(os.environ),
    )


def _route_problem(route: Route, name: str) -> str | None:
    """Why ``route`` cannot serve model ``name`` (see :meth:`LLM.unservable_reason`), or None.
    A provider of type ``openai`` is answered without litellm (every model string of its
    routes is litellm's ``openai`` provider): it needs a key, its own endpoint or
    ``OPENAI_API_KEY``."""
    import os

    from veil.core.models.providers import AMBIENT_CREDENTIAL_TYPES

    if route.type == "openai":
        if route.api_key or route.base_url or os.environ.get("OPENAI_API_KEY"):
            return None
        return "no API key for openai (OPENAI_API_KEY is not set)"
    litellm = import_litellm()
    model = route.model_string(name)
    try:
        provider = litellm.get_llm_provider(model, api_base=route.base_url)[1]
    except Exception:  # litellm's BadRequestError: no provider prefix it knows
        prefix = model.split("/", 1)[0] if "/" in model else None
        if prefix:
            return f"{prefix!r} is not a provider litellm knows (in {model!r})"
        return (
            f"litellm cannot tell which provider serves {model!r}; name it as PROVIDER/MODEL "
            "(e.g. openai/gpt-4o) or configure a provider in auth.json"
        )
    if route.api_key or route.base_url or provider in AMBIENT_CREDENTIAL_TYPES:
        return None
    try:
        found = litellm.validate_environment(model=model)
    except Exception:  # an older litellm, or one that cannot check this provider: let it try
        return None
    missing = [k for k in found.get("missing_keys") or [] if str(k).endswith("API_KEY")]
    if missing:
        return f"no API key for {provider} ({', '.join(missing)} is not set)"
    return None


def _load_local(local: LocalModel) -> ChatModel:
    """``local.load()``, with a missing piece reported as a :class:`ConfigError`."""
    try:
        return local.load()
    except (FileNotFoundError, ImportError) as exc:
        raise ConfigError(
            f"models.main: the offline model {local.name} cannot run ({exc}); install what it "
            f"names, or configure a provider in {user_auth_text()} and models.main"
        ) from exc
