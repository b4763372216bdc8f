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
  credentials, not a key: :data:`~veil.core.models.providers.AMBIENT_CREDENTIAL_TYPES`) at its own
  ``base_url``, even with a key of its own.
* ``models.<role>.options`` in a project file may hold only options that shape the answer
  (:data:`PROJECT_MODEL_OPTIONS`); ``api_base``, ``api_key``, ``extra_headers`` and the like are
  refused (:func:`check_project_options`). Requests to a project's provider get only those options
  even when the options come from the user's own file.

Routing (``routing.default`` / ``fallback``) may name any of the user's providers, since each
provider's key goes only to its own endpoint. A provider the project file defines is different:
whoever runs it receives every prompt, the system prompt and every tool result, and its replies
call tools (``bash``) on the user's machine. So veil uses one (as ``routing.default``, a
fallback, or the only provider) only with the user's consent, given where a project cannot
write it (:func:`check_project_provider_consent`): ``VEIL_ALLOW_PROJECT_PROVIDERS=1`` in the
environment, or ``"allowProjectProviders"`` in the user's own ``auth.json`` (``true`` for every
project, or a list of absolute project folders).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from veil.core.errors import ConfigError
from veil.core.models.providers import AMBIENT_CREDENTIAL_TYPES

ALLOW_PROJECT_PROVIDERS_ENV = "VEIL_ALLOW_PROJECT_PROVIDERS"
"""Environment variable by which the user allows providers defined by project files (``1``,
``true`` or ``yes``)."""

ALLOW_PROJECT_PROVIDERS_KEY = "allowProjectProviders"
"""Key of the user's ``auth.json`` that allows providers defined by project files: ``true`` (every
project) or a list of absolute project folders. Refused in a project's file."""

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})

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
    }
)
"""``models.<role>.options`` a project file may set: they change how the model samples its
answer, never where a request goes or what credentials it carries. Left out on purpose, though
harmless-looking: ``mock_response`` (litellm answers with the project's text: the repository
would speak as the agent), ``tool_choice`` (the repository would force a tool call, say
``bash``, at every step) and ``n`` (several answers billed, one used). Every other option (``api_base``,
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

    ``routing`` is merged key by key (the project's value wins); ``models`` role by role, a role
    naming another model than the user's taken whole from the project (:func:`_merge_models`,
    so the user's options never follow a model the project names). Providers are
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
    merged = _deep_merge(
        user, {k: v for k, v in project.items() if k not in ("providers", "models")}
    )
    if "models" in project:
        merged["models"] = _merge_models(user.get("models"), project["models"])
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


def _merge_models(user: Any, project: Any) -> Any:
    """The project's ``models`` over the user's, role by role: a role naming the same model (or
    none) merges field by field, one naming another model is taken whole from the project, so
    the user's options for a model (an ``api_key``, an ``api_base``) never go with a model
    the project names (:func:`veil.core.settings.merge_model_role`). Malformed shapes are
    returned as they are, for validation to report."""
    if not isinstance(user, dict) or not isinstance(project, dict):
        return project if project is not None else user
    out = dict(user)
    for role, spec in project.items():
        base = user.get(role)
        if isinstance(base, dict) and isinstance(spec, dict):
            same = "model" not in spec or "model" not in base or spec["model"] == base["model"]
            out[role] = _deep_merge(base, spec) if same else spec
        else:
            out[role] = spec
    return out


def _check_ambient(name: str, entry: dict[str, Any], project_path: Path, user_path: Path) -> None:
    kind = entry.get("type")
    if entry.get("base_url") is not None and kind in AMBIENT_CREDENTIAL_TYPES:
        raise ConfigError(
            f"{project_path}: providers.{name}.base_url: a project file may not point a "
            f"{kind!r} provider at its own endpoint: litellm authenticates {kind} requests with "
            "credentials from your environment, not only the provider's api_key; define this "
            f"provider in {display_path(user_path)} instead"
        )


def pop_project_provider_consent(user: dict[str, Any], user_path: Path) -> bool | list[Path]:
    """Take :data:`ALLOW_PROJECT_PROVIDERS_KEY` out of the user's parsed ``auth.json``.

    Args:
        user: the parsed user file; the key is removed from it (it is not part of the schema).
        user_path: the file, for messages.

    Returns:
        ``True`` (every project), ``False`` (absent or false) or the listed project folders,
        resolved.

    Raises:
        ConfigError: the value is neither a boolean nor a list of absolute paths (names the
            file and the field).
    """
    value = user.pop(ALLOW_PROJECT_PROVIDERS_KEY, False)
    if isinstance(value, bool):
        return value
    field = f"{user_path}: {ALLOW_PROJECT_PROVIDERS_KEY}"
    if not isinstance(value, list):
        raise ConfigError(f"{field}: expected true, false or a list of absolute project folders")
    folders = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not Path(item).expanduser().is_absolute():
            raise ConfigError(f"{field}.{i}: {item!r} is not an absolute project folder")
        folders.append(Path(item).expanduser().resolve())
    return folders


def refuse_project_consent(project: dict[str, Any], project_path: Path, user_path: Path) -> None:
    """A project file may not allow its own providers.

    Raises:
        ConfigError: :data:`ALLOW_PROJECT_PROVIDERS_KEY` is in the project's ``auth.json``.
    """
    if ALLOW_PROJECT_PROVIDERS_KEY in project:
        raise ConfigError(
            f"{project_path}: {ALLOW_PROJECT_PROVIDERS_KEY}: only you can allow a project's "
            f"providers, in {display_path(user_path)} or with {ALLOW_PROJECT_PROVIDERS_ENV}=1; "
            "remove it from the project's file"
        )


def providers_in_use(
    default: str | None, fallback: Iterable[str], names: Iterable[str]
) -> list[tuple[str, str]]:
    """The providers veil would send requests to, each with the field that selects it, in the
    order :meth:`veil.core.models.llm.LLM.routes` tries them.

    Args:
        default: ``routing.default`` (None when unset).
        fallback: ``routing.fallback``.
        names: every provider's name.

    Returns:
        ``[(field, name), ...]``, e.g. ``[("routing.default", "q"), ("routing.fallback.0",
        "p")]``; the only provider of a file without ``routing.default`` is
        ``("providers.<name>", name)``.
    """
    names = list(names)
    used: list[tuple[str, str]] = []
    if default:
        used.append(("routing.default", default))
    elif len(names) == 1:
        used.append((f"providers.{names[0]}", names[0]))
    used += [(f"routing.fallback.{i}", name) for i, name in enumerate(fallback)]
    return used


def check_project_provider_consent(
    used: Iterable[tuple[str, str]],
    owned: frozenset[str],
    project_dir: Path,
    project_path: Path,
    user_path: Path,
    allowed: bool | list[Path],
    environ: dict[str, str],
) -> None:
    """Refuse to start when a provider the project file defines would receive requests and the
    user has not allowed it (see the module docstring).

    Args:
        used: ``(field, provider name)`` pairs from :func:`providers_in_use`.
        owned: the providers whose entry comes from the project file (:func:`merge_auth_layers`).
        project_dir: the project root (resolved), compared with the allowed folders.
        project_path, user_path: the two auth files, for the message.
        allowed: the user's ``allowProjectProviders`` (:func:`pop_project_provider_consent`).
        environ: the environment (:data:`ALLOW_PROJECT_PROVIDERS_ENV`).

    Raises:
        ConfigError: ``<project auth.json>: <field>: '<name>' is a provider defined by this
            project's file, ...``, naming both ways to allow it.
    """
    if environ.get(ALLOW_PROJECT_PROVIDERS_ENV, "").strip().lower() in _TRUE_WORDS:
        return
    if allowed is True or (isinstance(allowed, list) and project_dir.resolve() in allowed):
        return
    for field, name in used:
        if name in owned:
            raise ConfigError(
                f"{project_path}: {field}: {name!r} is a provider defined by this project's "
                "file, which would receive your conversation and tool output (and its replies "
                f"run tools on this machine); allow it with {ALLOW_PROJECT_PROVIDERS_ENV}=1 or "
                f'"{ALLOW_PROJECT_PROVIDERS_KEY}": ["{project_dir}"] in '
                f"{display_path(user_path)}, or remove it from the project's file"
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
