"""What each configured provider serves and which model role uses it (``veil models``).

For every provider of auth.json (the user's and the project's, merged): its type, endpoint,
whether a key is set (never the key), where it was defined, its place in ``routing``, the
roles that send to it, and the models it serves:

- a provider that speaks OpenAI's API (type ``openai``, or any provider with a ``base_url`` of
  its own) is asked, ``GET <base_url>/models`` with its key (OpenAI API reference, "List
  models": ``{"data": [{"id": ...}]}``), unless ``fetch`` is off; an answer that is not that
  shape, or no answer, is reported as the provider's error, never raised;
- any other provider type lists the models litellm knows for it (``litellm.models_by_provider``,
  offline).

A role uses a provider when its model names it (``NAME/MODEL``, see
:meth:`veil.core.models.llm.LLM.named_provider`), else every provider of the routing, the
first answering and the others as fallbacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veil.core.errors import VeilError
from veil.core.models.llm import ROLES

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.models.llm import LLM

FETCH_TIMEOUT_S = 10.0
"""Seconds a provider gets to list its models."""


def role_models(llm: LLM) -> dict[str, str]:
    """The model name of each configured role (``compact`` falls back to ``main``, seed 000);
    a role without a model is left out."""
    models = llm.config.models
    out = {}
    for role in ROLES:
        cfg = getattr(models, role, None) or (models.main if role == "compact" else None)
        if cfg is not None and cfg.model:
            out[role] = cfg.model
    return out


def role_routes(llm: LLM) -> dict[str, list[tuple[str, str, bool]]]:
    """Provider name -> ``(role, model as sent, fallback)`` for every role that sends to it.

    Raises:
        ConfigError: the routing is ambiguous (several providers, no ``routing.default``).
    """
    uses: dict[str, list[tuple[str, str, bool]]] = {}
    for role, model in role_models(llm).items():
        named = llm.named_provider(model)
        if named is not None:
            uses.setdefault(named[0], []).append((role, named[1], False))
            continue
        if llm._local_model_named(model) is not None:
            continue
        for i, route in enumerate(llm.routes()):
            if route.name in llm.config.auth.providers:
                uses.setdefault(route.name, []).append((role, model, i > 0))
    return uses


def provider_listing(llm: LLM, *, fetch: bool = True) -> list[dict[str, Any]]:
    """One entry per provider (the module docstring), sorted by name::

    {"name", "type", "baseUrl", "keySet", "definedIn": "user" | "project",
     "routing": "default" | "fallback 1" ... | None,
     "roles": [{"role", "model", "fallback"}],
     "models": [ids] | None, "modelsFrom": "GET <url>" | "litellm" | None,
     "error": str | None}
    """
    auth = llm.config.auth
    try:
        uses = role_routes(llm)
        routing_error = None
    except VeilError as exc:
        uses, routing_error = {}, exc.message
    out = []
    for name in sorted(auth.providers):
        provider = auth.providers[name]
        route = llm.provider_route(name)
        place = None
        if auth.routing.default == name or (not auth.routing.default and len(auth.providers) == 1):
            place = "default"
        elif name in auth.routing.fallback:
            place = f"fallback {auth.routing.fallback.index(name) + 1}"
        entry: dict[str, Any] = {
            "name": name,
            "type": provider.type,
            "baseUrl": provider.base_url,
            "keySet": provider.api_key is not None,
            "definedIn": "project" if name in llm.config.project_providers else "user",
            "routing": place,
            "roles": [
                {"role": role, "model": model, "fallback": fallback}
                for role, model, fallback in uses.get(name, [])
            ],
            "models": None,
            "modelsFrom": None,
            "error": routing_error,
        }
        if provider.type == "openai" or provider.base_url:
            if fetch:
                _fetch_models(entry, route.base_url, route.api_key)
        else:
            entry["models"], entry["modelsFrom"] = _litellm_models(provider.type), "litellm"
        out.append(entry)
    return out


def _fetch_models(entry: dict[str, Any], base_url: str | None, api_key: str | None) -> None:
    """Fill ``entry``'s ``models`` from ``GET <base_url>/models`` (or its ``error``), asked
    through the ``openai`` SDK (:func:`veil.core.models.openai_chat.list_models`)."""
    from veil.core.models import openai_chat

    base = openai_chat.base_url_of(base_url)
    entry["modelsFrom"] = f"GET {base.rstrip('/')}/models"
    try:
        entry["models"] = openai_chat.list_models(base, api_key, FETCH_TIMEOUT_S)
    except openai_chat.OpenAIChatError as exc:
        text = str(exc).removeprefix("OpenAIException - ")
        if exc.status is not None:
            entry["error"] = f"HTTP {exc.status}: {text}"
        else:
            entry["error"] = f"{exc.kind}: {text}"


def _litellm_models(provider_type: str) -> list[str]:
    """The models litellm knows for ``provider_type`` (offline), sorted."""
    from veil.core.models.offline import import_litellm

    known = import_litellm().models_by_provider.get(provider_type) or ()
    return sorted(str(m) for m in known)
