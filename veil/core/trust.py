"""What a project's own files may configure, and what only the user may.

A project's ``.veil/`` files come with a clone, so they are written by whoever published the
repository; the user's files (``~/.veil/auth.json``, or ``$VEIL_HOME/auth.json``) and ``VEIL_*``
environment variables are the user's own. The rule veil keeps: **a key is only ever sent to the
endpoint named in the same file as the key**, and a project file never makes a credential of the
user's travel anywhere new. Concretely:

* A provider a project file defines (or redefines with its own ``api_key``) is the project's:
  its entry is taken whole from that file, never combined with the user's entry of the same
  name. When it names a ``base_url`` but gives no key, veil sends :data:`KEYLESS_API_KEY` as its
  key, so litellm cannot fall back to a key in the environment (``OPENAI_API_KEY``...) and send
  it there.
* A project entry without its own key for a provider the user defined may only repeat the
  user's ``type`` and ``base_url``; changing either is refused (:func:`merge_auth_layers`).
* A project file may not point a provider whose requests carry ambient credentials (cloud SDK
  credentials, not a key: :data:`~veil.core.providers.AMBIENT_CREDENTIAL_TYPES`) at its own
  ``base_url``, even with a key of its own.
* ``models.<role>.options`` in a project file may hold only options that shape the answer
  (:data:`PROJECT_MODEL_OPTIONS`); ``api_base``, ``api_key``, ``extra_headers`` and the like are
  refused (:func:`check_project_options`). Requests to a project's provider get only those options
  even when the options come from the user's own file.

Routing (``routing.default`` / ``fallback``) may name any provider, since each provider's key
goes only to its own endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from veil.core.errors import ConfigError
from veil.core.providers import AMBIENT_CREDENTIAL_TYPES

KEYLESS_API_KEY = "veil-no-key"
"""Key sent to a project-defined endpoint that has no key of its own. Local servers without
authentication (Ollama, vLLM, LM Studio, llama.cpp's server) accept any key; a key litellm
would otherwise read from the environment is never sent there."""

PROJECT_MODEL_OPTIONS: frozenset[str] = frozenset(
    {
        # OpenAI chat-completions sampling and output parameters (platform.openai.com API
        # reference, "Create chat completion"), which litellm maps for every provider.
        "temperature",
        "top_p",
        "n",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "reasoning_effort",
        "parallel_tool_calls",
        "tool_choice",
        "modalities",
        "verbosity",
        "user",
        # Sampling parameters of other providers that litellm passes through.
        "top_k",
        "min_p",
        "repetition_penalty",
        "thinking",
        # litellm's own call behaviour (docs.litellm.ai "Input Params"); none names an endpoint.
        "timeout",
        "num_retries",
        "drop_params",
        "mock_response",
    }
)
"""``models.<role>.options`` a project file may set: they change what the model answers, never
where a request goes or what credentials it carries. Every other option (``api_base``,
``base_url``, ``api_key``, ``extra_headers``, ``custom_llm_provider``, cloud credentials,
callbacks...) belongs in the user's own file or a ``VEIL_MODELS__<ROLE>__OPTIONS`` variable."""


def display_path(path: Path) -> str:
    """``path`` with the home folder written ``~`` (as users type it in messages)."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def _has_key(entry: dict[str, Any]) -> bool:
    key = entry.get("api_key")
    return isinstance(key, str) and bool(key.strip())


def merge_auth_layers(
    user: dict[str, Any],
    project: dict[str, Any],
    user_path: Path,
    project_path: Path,
) -> tuple[dict[str, Any], frozenset[str]]:
    """Combine the user's and the project's ``auth.json`` data under the trust rules above.

    ``routing`` and ``models`` are merged key by key (the project's value wins). Providers are
    combined as the module docstring says: a project entry with its own ``api_key``, or for a
    name the user does not define, replaces the user's entry whole; one without a key may only
    repeat the user's ``type`` and ``base_url``.

    Args:
        user: the parsed user file (``{}`` when absent).
        project: the parsed project file (``{}`` when absent).
        user_path, project_path: the two files, for messages.

    Returns:
        ``(merged, project_providers)``: the combined data (still to be validated) and the names
        of the providers whose entry comes from the project file.

    Raises:
        ConfigError: a project entry changes a user provider's ``type`` or ``base_url`` without
            a key of its own, or points an ambient-credential provider type at its own
            ``base_url``; the message names the project file and the field.
    """
    merged = _deep_merge(user, {k: v for k, v in project.items() if k != "providers"})
    user_providers = user.get("providers")
    user_providers = user_providers if isinstance(user_providers, dict) else {}
    project_providers = project.get("providers")
    if not isinstance(project_providers, dict):
        if "providers" in project:
            merged["providers"] = project_providers  # the wrong shape: validation reports it
        return merged, frozenset()
    providers = dict(user_providers)
    owned: set[str] = set()
    for name, entry in project_providers.items():
        base = user_providers.get(name)
        if not isinstance(entry, dict) or not isinstance(base, dict) or _has_key(entry):
            if isinstance(base, dict) and isinstance(entry, dict) and "type" not in entry:
                raise ConfigError(
                    f"{project_path}: providers.{name}.type: a provider given its own api_key "
                    "in a project file is defined there whole, not combined with the user's "
                    f"{name!r}; give its type (and base_url) here too"
                )
            providers[name] = entry  # the project's own provider, taken whole
            owned.add(name)
            if isinstance(entry, dict):
                _check_ambient(name, entry, project_path, user_path)
            continue
        for field in ("type", "base_url"):
            if field in entry and entry[field] != base.get(field):
                raise ConfigError(
                    f"{project_path}: providers.{name}.{field}: a project file may not change "
                    f"where the user's key for {name!r} is sent; give the provider its own "
                    f"api_key here or move the change to {display_path(user_path)}"
                )
        providers[name] = {**base, **entry}  # equal values; unknown keys reach validation
    merged["providers"] = providers
    return merged, frozenset(owned)


def _check_ambient(name: str, entry: dict[str, Any], project_path: Path, user_path: Path) -> None:
    kind = entry.get("type")
    if entry.get("base_url") is not None and kind in AMBIENT_CREDENTIAL_TYPES:
        raise ConfigError(
            f"{project_path}: providers.{name}.base_url: a project file may not point a "
            f"{kind!r} provider at its own endpoint: litellm authenticates {kind} requests with "
            "credentials from your environment, not only the provider's api_key; define this "
            f"provider in {display_path(user_path)} instead"
        )


def check_project_options(path: Path, data: dict[str, Any], user_path: Path) -> None:
    """Refuse ``models.<role>.options`` keys outside :data:`PROJECT_MODEL_OPTIONS` in a project
    file (``.veil/settings.json`` or ``.veil/auth.json``).

    Args:
        path: the project file, for the message.
        data: its parsed content (malformed shapes are left to schema validation).
        user_path: the user's auth.json, named in the message as where such options go.

    Raises:
        ConfigError: naming the file and ``models.<role>.options.<key>``.
    """
    models = data.get("models")
    if not isinstance(models, dict):
        return
    for role, spec in models.items():
        options = spec.get("options") if isinstance(spec, dict) else None
        if not isinstance(options, dict):
            continue
        for key in options:
            if key not in PROJECT_MODEL_OPTIONS:
                allowed = ", ".join(sorted(PROJECT_MODEL_OPTIONS))
                raise ConfigError(
                    f"{path}: models.{role}.options.{key}: a project file may not set this "
                    "option (it could send your keys or your conversation elsewhere); allowed "
                    f"here: {allowed}; set it in {display_path(user_path)} or the "
                    f"VEIL_MODELS__{str(role).upper()}__OPTIONS variable instead"
                )


def filter_project_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options a request to a project-defined provider may carry (see the module
    docstring): only :data:`PROJECT_MODEL_OPTIONS`, whichever file they came from."""
    return {k: v for k, v in options.items() if k in PROJECT_MODEL_OPTIONS}


def leaf_paths(data: Any, prefix: Iterable[str] = ()) -> set[str]:
    """Dotted paths (``http.token``) of every value in a nested dict, dicts included.

    Keys are written snake_case (``maxBodyBytes`` -> ``max_body_bytes``) so paths from a JSON file
    and from ``VEIL_*`` variables compare equal.
    """
    out: set[str] = set()
    if not isinstance(data, dict):
        return out
    for key, value in data.items():
        path = (*prefix, _snake(str(key)))
        out.add(".".join(path))
        out |= leaf_paths(value, path)
    return out


def env_setting_paths(environ: dict[str, str]) -> set[str]:
    """Dotted settings paths that ``VEIL_*`` variables set (``VEIL_HTTP__HOST`` -> ``http.host``;
    ``VEIL_HTTP_TOKEN`` -> ``http.token``)."""
    out: set[str] = set()
    for name, value in environ.items():
        upper = name.upper()
        if not upper.startswith("VEIL_") or not value:
            continue
        if upper == "VEIL_HTTP_TOKEN":
            out.add("http.token")
            continue
        out.add(".".join(part.lower() for part in upper[len("VEIL_") :].split("__")))
    return out


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = (
            _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        )
    return out
