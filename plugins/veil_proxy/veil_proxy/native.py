"""Forwarding a request in the client's own API to a provider that speaks it: Anthropic's
Messages API to Anthropic, OpenAI's Responses API to OpenAI.

litellm translates between APIs, and a translation loses what it does not model: Claude Code's
betas (``context_management``, ``output_config``, system turns, tools loaded on demand), its
thinking blocks, Codex's item ids and encrypted reasoning. When the upstream provider speaks the
client's API, the proxy sends the client's request as the client wrote it, with only the
conversation fitted by veil (:mod:`veil_proxy.anthropic_view`, :mod:`veil_proxy.responses_view`)
and ``max_tokens`` where veil lowered it, over HTTP with httpx, and streams the provider's answer
back byte for byte. The providers of ``auth.json``'s routing are tried in order (the next on
connection errors, timeouts, 429 and 5xx, before anything was streamed), as
:mod:`veil_proxy.upstream` does; a provider of another API in the routing is skipped here (named
in the error when none answers).

Which provider speaks which API: a provider of type ``anthropic`` speaks Messages at
``<base_url>/v1/messages`` (``https://api.anthropic.com`` by default); one of type ``openai``
speaks Responses at ``<base_url>/responses`` (``https://api.openai.com/v1`` by default). With
no provider in auth.json, the model name decides as litellm reads it (``anthropic/...``,
``claude-...``; ``openai/...``, ``gpt-...``) and the key is the user's own
``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from veil import ProviderRoute as Route
from veil import redact

log = logging.getLogger(__name__)

Api = Literal["anthropic", "responses"]

PROVIDER_OF = {"anthropic": "anthropic", "responses": "openai"}
"""The litellm provider type that speaks each API natively."""

DEFAULT_BASE = {"anthropic": "https://api.anthropic.com", "responses": "https://api.openai.com/v1"}

KEY_VARIABLE = {"anthropic": "ANTHROPIC_API_KEY", "responses": "OPENAI_API_KEY"}

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` sent when the client sent none (Anthropic's API reference,
"Versions")."""

FORWARDED_HEADERS = {
    "anthropic": ("anthropic-version", "anthropic-beta"),
    "responses": ("openai-beta",),
}
"""Client headers that change what the provider does, forwarded as they are; credentials and
everything else are not."""

READ_TIMEOUT_S = 600.0
"""Longest wait for the provider's next bytes (seconds): a long answer streams for minutes."""


class NativeError(Exception):
    """Every provider failed: ``status`` for the client, ``body`` the last provider's own error
    body when it answered one (in the client's API shape, keys redacted), else None, and
    ``message`` naming each provider tried."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body


def provider_of(route: Route, model: str) -> str | None:
    """The litellm provider a route sends ``model`` to: its type, else what litellm reads from
    the model name (None when it cannot tell)."""
    if route.type is not None:
        return route.type
    from veil import import_litellm

    litellm = import_litellm()
    try:
        return str(litellm.get_llm_provider(model)[1])
    except Exception:  # an unknown model name: litellm cannot tell
        return None


def endpoint(api: Api, base_url: str | None) -> str:
    """The URL of the API's route under ``base_url`` (see the module docstring)."""
    base = (base_url or DEFAULT_BASE[api]).rstrip("/")
    if api == "anthropic":
        if base.endswith("/v1/messages"):
            return base
        return base + ("/messages" if base.endswith("/v1") else "/v1/messages")
    return base if base.endswith("/responses") else base + "/responses"


@dataclass
class Usage:
    """Tokens of one answer as the provider reported them: the whole prompt (cached and
    written-to-cache parts included) and the completion."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    seen: bool = False

    def read(self, api: Api, event: dict[str, Any]) -> None:
        """Take the usage in one streamed event or a whole answer, where it has one."""
        if api == "anthropic":
            usage = None
            if event.get("type") == "message_start":
                usage = (event.get("message") or {}).get("usage")
            elif event.get("type") in ("message_delta", "message"):
                usage = event.get("usage")
            if isinstance(usage, dict):
                prompt = sum(
                    int(usage.get(k) or 0)
                    for k in (
                        "input_tokens",
                        "cache_read_input_tokens",
                        "cache_creation_input_tokens",
                    )
                )
                if prompt:
                    self.prompt_tokens = prompt
                if usage.get("output_tokens") is not None:
                    self.completion_tokens = int(usage["output_tokens"])
                self.seen = True
            return
        response = event.get("response") if "response" in event else event
        usage = response.get("usage") if isinstance(response, dict) else None
        if isinstance(usage, dict):
            self.prompt_tokens = int(usage.get("input_tokens") or 0)
            self.completion_tokens = int(usage.get("output_tokens") or 0)
            self.seen = True


@dataclass
class NativeAnswer:
    """The provider's answer: its status, content type, and either the whole ``body`` or the
    stream of its bytes (``chunks``); :attr:`usage` is filled as the stream is read."""

    status: int
    media_type: str
    body: Any = None
    chunks: AsyncIterator[bytes] | None = None
    usage: Usage = field(default_factory=Usage)
    route: str = ""


class SseReader:
    """Server-sent events out of byte chunks, as they come (the WHATWG "Server-sent events"
    format: events end with a blank line; ``data:`` lines join with newlines)."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The events completed by ``chunk`` whose data is a JSON object."""
        self._buffer += chunk.decode("utf-8", errors="replace").replace("\r\n", "\n")
        events = []
        while "\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split("\n\n", 1)
            data = "\n".join(
                line[5:].lstrip(" ") for line in raw.split("\n") if line.startswith("data:")
            )
            if not data or data == "[DONE]":
                continue
            try:
                value = json.loads(data)
            except ValueError:
                continue
            if isinstance(value, dict):
                events.append(value)
        return events


class NativeUpstream:
    """The providers of a routing that speak ``api``, and the forwarding to them.

    Args:
        api: ``anthropic`` or ``responses``.
        model: the upstream model (the request's ``model`` is replaced by it, less a
            ``<provider>/`` prefix).
        routes: the providers that speak ``api``, in routing order.
        skipped: names of the routing's providers that do not (named in errors).
        secrets: keys to redact from error text.
    """

    def __init__(
        self, api: Api, model: str, routes: list[Route], skipped: list[str], secrets: list[str]
    ) -> None:
        self.api = api
        self.model = model
        self.routes = routes
        self.skipped = skipped
        self.secrets = secrets

    @classmethod
    def for_upstream(cls, upstream: Any, api: Api) -> NativeUpstream | None:
        """The native forwarding for ``upstream`` (:class:`veil_proxy.upstream.Upstream`) when
        its first provider speaks ``api``, else None (the request goes through litellm)."""
        wanted = PROVIDER_OF[api]
        speaking = [r for r in upstream.routes if provider_of(r, upstream.model) == wanted]
        if not speaking or speaking[0] is not upstream.routes[0]:
            return None
        skipped = [r.name for r in upstream.routes if r not in speaking]
        return cls(api, upstream.model, speaking, skipped, upstream.secrets())

    def model_name(self, route: Route) -> str:
        """The model name the provider knows (``anthropic/claude-x`` -> ``claude-x``)."""
        prefix = PROVIDER_OF[self.api] + "/"
        return self.model[len(prefix) :] if self.model.startswith(prefix) else self.model

    def _headers(self, route: Route, client_headers: dict[str, str]) -> dict[str, str]:
        key = route.api_key or os.environ.get(KEY_VARIABLE[self.api], "")
        headers = {"content-type": "application/json"}
        for name in FORWARDED_HEADERS[self.api]:
            if client_headers.get(name):
                headers[name] = client_headers[name]
        if self.api == "anthropic":
            headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
            if key:
                headers["x-api-key"] = key
        elif key:
            headers["authorization"] = f"Bearer {key}"
        return headers

    async def send(
        self, body: dict[str, Any], client_headers: dict[str, str], stream: bool
    ) -> NativeAnswer:
        """Send ``body`` (the fitted request) to the first provider that answers.

        Returns:
            The :class:`NativeAnswer`; a stream's bytes come as the provider sends them (the
            connection closes when they end or the reader stops).

        Raises:
            NativeError: every provider failed (the last one's status and error body when it
                answered, 502 unreachable, 504 timed out).
        """
        import httpx

        tried: list[str] = []
        last: NativeError | None = None
        for route in self.routes:
            url = endpoint(self.api, route.base_url)
            sent = {**body, "model": self.model_name(route), "stream": bool(stream)}
            headers = self._headers(route, client_headers)
            timeout = httpx.Timeout(30.0, read=READ_TIMEOUT_S)
            client = httpx.AsyncClient(timeout=timeout)
            try:
                request = client.build_request("POST", url, json=sent, headers=headers)
                response = await client.send(request, stream=True)
            except httpx.TimeoutException as exc:
                await client.aclose()
                tried.append(self._failure(route, f"timed out ({type(exc).__name__})"))
                last = NativeError(504, "; ".join(tried))
                continue
            except httpx.HTTPError as exc:
                await client.aclose()
                tried.append(self._failure(route, f"unreachable ({type(exc).__name__})"))
                last = NativeError(502, "; ".join(tried))
                continue
            if response.status_code >= 400:
                raw = await response.aread()
                await response.aclose()
                await client.aclose()
                error_body = self._error_body(raw)
                text = json.dumps(error_body) if error_body is not None else raw[:300].decode()
                tried.append(self._failure(route, f"HTTP {response.status_code}: {text}"))
                last = NativeError(response.status_code, "; ".join(tried), error_body)
                if response.status_code == 429 or response.status_code >= 500:
                    continue
                raise last
            answer = NativeAnswer(
                response.status_code,
                response.headers.get("content-type", "application/json").split(";")[0],
                route=route.name,
            )
            if not stream or answer.media_type != "text/event-stream":
                raw = await response.aread()
                await response.aclose()
                await client.aclose()
                try:
                    answer.body = json.loads(raw)
                except ValueError:
                    answer.body = raw.decode("utf-8", errors="replace")
                if isinstance(answer.body, dict):
                    answer.usage.read(self.api, answer.body)
                return answer
            answer.chunks = self._relay(response, client, answer.usage)
            return answer
        if self.skipped:
            tried.append("skipped (another API): " + ", ".join(self.skipped))
        raise last or NativeError(502, "; ".join(tried) or "no provider speaks this API")

    async def _relay(self, response: Any, client: Any, usage: Usage) -> AsyncIterator[bytes]:
        """The stream's bytes as they come, reading its usage on the way."""
        reader = SseReader()
        try:
            async for chunk in response.aiter_bytes():
                for event in reader.feed(chunk):
                    usage.read(self.api, event)
                yield chunk
        finally:
            await response.aclose()
            await client.aclose()

    def _error_body(self, raw: bytes) -> Any:
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return json.loads(redact(json.dumps(value), self.secrets)) if self.secrets else value

    def _failure(self, route: Route, text: str) -> str:
        return redact(f"{route.name} ({self.model}): {text}", self.secrets)[:600]
