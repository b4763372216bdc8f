"""The REPL loads what the first turn needs while the user types (issue 21: nothing moved for
seconds before the first spinner)."""

from __future__ import annotations

from types import SimpleNamespace

from veil_repl.repl import warm_up

from veil.core.models.embedder import CachedEmbedder


class Recorder:
    def __init__(self) -> None:
        self.warmed = 0

    def warm(self) -> None:
        self.warmed += 1


def _veil(offline: bool, layer: bool, embedder: object) -> SimpleNamespace:
    return SimpleNamespace(
        llm=SimpleNamespace(is_offline_default=offline),
        context_layer_on=layer,
        tiers=SimpleNamespace(embedder=embedder),
    )


def test_warm_up_loads_the_embedding_model_behind_the_cache():
    inner = Recorder()
    cache = CachedEmbedder(inner, store=None)  # type: ignore[arg-type]
    warm_up(_veil(offline=True, layer=True, embedder=cache))
    assert inner.warmed == 1


def test_warm_up_leaves_the_model_alone_without_the_context_layer():
    inner = Recorder()
    warm_up(_veil(offline=True, layer=False, embedder=CachedEmbedder(inner, store=None)))
    assert inner.warmed == 0


def test_an_embedder_over_http_has_nothing_to_load_and_a_failure_is_left_to_the_turn():
    class Remote:
        name = "ollama/nomic-embed-text"

    warm_up(_veil(offline=True, layer=True, embedder=CachedEmbedder(Remote(), store=None)))

    class Broken:
        def warm(self) -> None:
            raise RuntimeError("no model files")

    warm_up(_veil(offline=True, layer=True, embedder=CachedEmbedder(Broken(), store=None)))


def test_warm_up_prepares_the_sessions_model_when_a_provider_answers():
    """With a provider, the session's model is prepared (Veil.prepare: the loop, the tokenizer,
    litellm only when a call goes through it) before the embedding model."""
    order: list[object] = []

    class Embedder:
        def warm(self) -> None:
            order.append("embedder")

    veil = _veil(offline=False, layer=True, embedder=Embedder())
    veil.prepare = lambda model=None: order.append(("prepare", model))
    warm_up(veil, "local/qwen3")
    assert order == [("prepare", "local/qwen3"), "embedder"]
