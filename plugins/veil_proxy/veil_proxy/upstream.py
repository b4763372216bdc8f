"""Forwarding a fitted request to the upstream model through litellm, as veil's own calls go
(:mod:`veil.core.models.llm`): the providers of ``auth.json``'s ``routing`` in order (``default``, then
``fallback``), the next one tried on connection errors, timeouts, rate limits and 5xx answers and
only before anything was streamed; keys never appear in an error (:func:`veil.core.models.llm.redact`).

The client's own request parameters (temperature, tool_choice, stop...) travel with the fitted
messages; :data:`PASSED_PARAMS` lists them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from veil import ProviderRoute as Route
from veil import (
    RefusalFigures,
    error_body_text,
    filter_project_options,
    import_litellm,
    is_context_refusal,
    is_retryable_error,
    redact,
    refusal_figures,
)

PASSED_PARAMS = (
    "temperature",
    "top_p",
    "n",
    "stop",
    "max_tokens",
    "max_completion_tokens",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "seed",
    "user",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "reasoning_effort",
)
"""OpenAI chat-completions parameters the proxy forwards as the client sent them."""

CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
"""OpenAI's error ``code`` for a prompt longer than the model's window
(:attr:`UpstreamError.code`; the proxy fits the prompt to a smaller window and asks once more)."""


class UpstreamError(Exception):
    """The upstream model answered with an error (or could not be reached).

    Attributes:
        status: the HTTP status to give the client: the upstream's own, or 502 when it could
            not be reached / answered without one.
        message: what happened, naming each provider tried, keys redacted.
        kind: OpenAI's error ``type`` (``invalid_request_error``, ``authentication_error``,
            ``rate_limit_error``, ``api_error``).
        code: OpenAI's error ``code`` when known (``context_length_exceeded``), else None.
        figures: for a context-length refusal, the limit and prompt size it states
            (:func:`veil.core.models.context_refusal.refusal_figures`), else None.
    """

    def __init__(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code
        self.figures: RefusalFigures | None = None

    def openai_body(self) -> dict[str, Any]:
        """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {
            "error": {"message": self.message, "type": self.kind, "param": None, "code": self.code}
        }


def _kind(status: int) -> str:
    if status in (401, 403):
        return "authentication_error" if status == 401 else "permission_error"
    if status == 404:
        return "not_found_error"
    if status == 429:
        return "rate_limit_error"
    if 400 <= status < 500:
        return "invalid_request_error"
    return "api_error"


@dataclass
class Upstream:
    """The model requests go to and the providers that answer it.

    Args:
        model: the model name (``gpt-4o``, ``anthropic/claude-sonnet-4-5``...).
        routes: providers in order (:meth:`veil.core.models.llm.LLM.routes`).
        options: the model's configured ``options`` (settings ``models.main.options``), under
            the client's own parameters.
    """

    model: str
    routes: list[Route]
    options: dict[str, Any]

    @classmethod
    def for_veil(cls, veil: Any, model: str) -> Upstream:
        """The upstream for ``model`` under the project's auth.json and settings.

        Raises:
            ConfigError: routing is ambiguous (several providers, no ``routing.default``).
        """
        role = veil.llm.model_settings(model, veil.config.models.main)
        return cls(model, veil.llm.routes(), dict(role.options) if role else {})

    def secrets(self) -> list[str]:
        """The providers' keys and the environment's credentials (to redact from error
        text)."""
        from veil import environment_secrets

        return [r.api_key for r in self.routes if r.api_key] + environment_secrets()

    def _kwargs(self, route: Route, body: dict[str, Any], messages: list[dict]) -> dict:
        options = filter_project_options(self.options) if route.from_project else self.options
        kwargs: dict[str, Any] = {
            "model": route.model_string(self.model),
            "messages": messages,
            **options,
        }
        kwargs.update({k: body[k] for k in PASSED_PARAMS if body.get(k) is not None})
        if body.get("tools"):
            kwargs["tools"] = body["tools"]
        if route.base_url:
            kwargs["api_base"] = route.base_url
        if route.api_key:
            kwargs["api_key"] = route.api_key
        return kwargs

    def _error(self, litellm: Any, exc: BaseException, tried: list[str]) -> UpstreamError:
        status = getattr(exc, "status_code", None)
        unreachable = _unreachable(exc)
        if unreachable is not None:
            status = unreachable  # litellm reports a refused connection as a 500 of its own
        elif not isinstance(status, int) or not 400 <= status <= 599:
            status = 502
        # litellm maps the usual "prompt too long" bodies; a provider's own wording is read too
        raw = f"{exc} {error_body_text(exc)}"
        refused = isinstance(exc, litellm.ContextWindowExceededError) or is_context_refusal(raw)
        code = CONTEXT_LENGTH_EXCEEDED if refused else None
        text = "; ".join(tried)
        error = UpstreamError(
            status, f"upstream model {self.model!r} could not answer: {text}", _kind(status), code
        )
        error.figures = refusal_figures(raw) if refused else None
        return error

    async def complete(self, body: dict[str, Any], messages: list[dict]) -> Any:
        """One non-streamed answer: litellm's ``ModelResponse`` from the first provider that
        answers.

        Raises:
            UpstreamError: every provider failed, or one failed in a way another would repeat.
        """
        litellm = import_litellm()
        tried: list[str] = []
        for route in self.routes:
            try:
                return await litellm.acompletion(**self._kwargs(route, body, messages))
            except Exception as exc:
                tried.append(self._failure(route, exc))
                if not is_retryable_error(litellm, exc) or route is self.routes[-1]:
                    raise self._error(litellm, exc, tried) from None
        raise AssertionError("unreachable: routes is never empty")

    async def stream(
        self, body: dict[str, Any], messages: list[dict]
    ) -> tuple[Any, AsyncIterator[Any]]:
        """A streamed answer: the first chunk (already received, so an error before it can
        still move to the next provider or reach the client as a status) and the rest.

        Usage is always asked for (``stream_options.include_usage``), to record it.

        Raises:
            UpstreamError: as :meth:`complete`, for errors before the first chunk.
        """
        litellm = import_litellm()
        tried: list[str] = []
        for route in self.routes:
            kwargs = self._kwargs(route, body, messages)
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
            try:
                stream = await litellm.acompletion(**kwargs)
                iterator = stream.__aiter__()
                first = await iterator.__anext__()
                return first, iterator
            except StopAsyncIteration:
                return None, _empty()
            except Exception as exc:
                tried.append(self._failure(route, exc))
                if not is_retryable_error(litellm, exc) or route is self.routes[-1]:
                    raise self._error(litellm, exc, tried) from None
        raise AssertionError("unreachable: routes is never empty")

    async def responses(self, body: dict[str, Any], stream: bool) -> Any:
        """An answer to a Responses API request through litellm (``litellm.aresponses``, which
        speaks the provider's own API and answers in Responses shape): the response object,
        or with ``stream`` an async iterator of its events. ``body`` is the fitted request
        (``input``, ``instructions``, ``tools``... as the client sent them).

        Raises:
            UpstreamError: every provider failed (for a stream: before it started).
        """
        litellm = import_litellm()
        tried: list[str] = []
        params = {k: v for k, v in body.items() if k not in ("model", "stream") and v is not None}
        for route in self.routes:
            # OpenAI's own fields (prompt_cache_key, client_metadata, include...) mean nothing
            # to another provider: litellm leaves out what the provider does not take
            kwargs: dict[str, Any] = {
                "model": route.model_string(self.model),
                **params,
                "drop_params": True,
            }
            if route.base_url:
                kwargs["api_base"] = route.base_url
            if route.api_key:
                kwargs["api_key"] = route.api_key
            try:
                return await litellm.aresponses(stream=stream, **kwargs)
            except Exception as exc:
                tried.append(self._failure(route, exc))
                if not is_retryable_error(litellm, exc) or route is self.routes[-1]:
                    raise self._error(litellm, exc, tried) from None
        raise AssertionError("unreachable: routes is never empty")

    def _failure(self, route: Route, exc: BaseException) -> str:
        message = getattr(exc, "message", None) or str(exc)
        text = redact(f"{type(exc).__name__}: {message}", self.secrets())[:600]
        return f"{route.name} ({route.model_string(self.model)}): {text}"


def _unreachable(exc: BaseException) -> int | None:
    """502 when ``exc`` comes from a connection that failed (refused, reset, DNS), 504 when it
    timed out, None when the upstream did answer: litellm wraps these in errors of status 500,
    so the cause chain is read."""
    import httpx
    import openai

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (httpx.TimeoutException, openai.APITimeoutError, TimeoutError)):
            return 504
        if isinstance(current, (httpx.TransportError, openai.APIConnectionError, ConnectionError)):
            return 502
        current = current.__cause__ or current.__context__
    return None


async def _empty() -> AsyncIterator[Any]:
    return
    yield  # an async generator that yields nothing
