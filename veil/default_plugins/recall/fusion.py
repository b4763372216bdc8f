"""How recall merges its vector and keyword candidates into one ranking.

Formula (veil's own; constants tuned on LoCoMo's dev conversations, see bench/bench_locomo.py):

1. Relative scores, each leg scaled by its best candidate (a "relative score fusion"):
   ``v(x) = max(cos(q, x), 0) / max_y cos(q, y)`` over the vector index, and
   ``b(x) = bm25(x) / max_y bm25(y)`` over the top :data:`KEYWORD_DEPTH` keyword matches
   (``bm25`` is FTS5's score negated, so higher is better); 0 where an item is not a candidate.
2. Base score ``s(x) = W_v · v(x) + W_k · b(x)`` with :data:`VECTOR_WEIGHT` = :data:`KEYWORD_WEIGHT`
   = 1.
3. Neighbour expansion: ``f(x) = s(x) + λ · (s(prev x) + s(next x))`` with
   :data:`NEIGHBOUR_WEIGHT` λ = 0.3, where prev / next are the searchable items captured just
   before and after ``x`` in the same session. A conversation states a fact across adjacent
   turns (a question, then the answer that holds the fact; a tool call, then its result), and the
   query often matches only one of them.
4. The hit score is ``f(x) / ((W_v + W_k)(1 + 2λ))``, in [0, 1].

Measured recall@10 on the 1,033 category 1-4 questions of locomo10_dev.json: reciprocal-rank
fusion (k = 60) of the same two legs 0.581, step 1-2 alone 0.650, with step 3 0.711. RRF discards
how far ahead the best candidate is; relative scores keep it.

:func:`rrf` (Cormack, Clarke and Büttcher 2009: ``sum 1 / (k + rank)``, k = 60) is kept for the
benchmark's baseline row.
"""

from __future__ import annotations

import numpy as np

VECTOR_WEIGHT = 1.0
KEYWORD_WEIGHT = 1.0
NEIGHBOUR_WEIGHT = 0.3
KEYWORD_DEPTH = 100
"""Keyword candidates fetched from FTS5 per query (BM25 order)."""
VECTOR_DEPTH = 100
"""Vector candidates fetched per query where the search runs in the database (PostgreSQL's
HNSW index, :class:`~veil.default_plugins.recall.search.Recall`); the in-memory index scores
every warm item. At most ``hnsw.ef_search`` (200), so one HNSW walk gives them all."""
RRF_K = 60
"""The k of reciprocal-rank fusion (Cormack et al. 2009), for the baseline only."""
MAX_FUSED = (VECTOR_WEIGHT + KEYWORD_WEIGHT) * (1 + 2 * NEIGHBOUR_WEIGHT)


def relative(scores: np.ndarray) -> np.ndarray:
    """``max(scores, 0) / max(scores)`` (all zeros when no score is positive), float64."""
    out = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    top = out.max() if out.size else 0.0
    return out / top if top > 0 else np.zeros_like(out)


def base_scores(
    size: int,
    vector_rows: np.ndarray,
    cosines: np.ndarray,
    keyword_rows: np.ndarray,
    bm25: np.ndarray,
) -> np.ndarray:
    """Step 1-2: ``s`` over rows ``0..size-1`` plus one trailing 0 (index ``-1`` reads 0).

    Args:
        size: number of catalog rows.
        vector_rows, cosines: rows in the vector index and their cosine with the query.
        keyword_rows, bm25: keyword candidates and their BM25 (higher = better).

    Returns:
        ``(size + 1,)`` float64.
    """
    s = np.zeros(size + 1, dtype=np.float64)
    if len(vector_rows):
        s[vector_rows] += VECTOR_WEIGHT * relative(cosines)
    if len(keyword_rows):
        s[keyword_rows] += KEYWORD_WEIGHT * relative(bm25)
    s[size] = 0.0
    return s


def with_neighbours(base: np.ndarray, prev: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """Step 3: ``f = s + λ (s[prev] + s[next])`` over rows ``0..size-1``.

    Args:
        base: ``(size + 1,)`` from :func:`base_scores`.
        prev, nxt: ``(size,)`` int64 neighbour rows, -1 for none (reads the trailing 0).
    """
    size = base.shape[0] - 1
    return base[:size] + NEIGHBOUR_WEIGHT * (base[prev] + base[nxt])


def rrf(rankings: list[list[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion: rows ordered by ``sum over rankings of 1 / (k + rank)`` (rank from
    1), ties by first appearance."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking, start=1):
            score[row] = score.get(row, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda r: -score[r])
