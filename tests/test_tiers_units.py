"""The pieces recall is made of: the in-memory vector index, query rewriting for FTS5, and the
fusion formula (values worked out by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from veil.default_plugins.recall import fusion
from veil.default_plugins.recall.keyword import fts_match, item_ids_in, query_terms
from veil.default_plugins.recall.vector_index import VectorIndex


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    out = rng.standard_normal((n, dim)).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_vector_index_matches_brute_force_after_adds_and_removals() -> None:
    rng = np.random.default_rng(0)
    vectors = _unit(rng, 3000, 48)
    index = VectorIndex(48)
    index.add(np.arange(0, 3000, 2), vectors[::2])  # grows past the initial capacity
    index.add(np.arange(1, 3000, 2), vectors[1::2])
    removed = list(range(0, 3000, 3))
    assert index.remove(removed + [99_999]) == len(removed)
    kept = np.array([k for k in range(3000) if k % 3 != 0])
    assert len(index) == len(kept) and 3 not in index and 4 in index
    query = _unit(rng, 1, 48)[0]
    keys, cosines = index.search(query, 10)
    scores = vectors[kept] @ query
    expected = kept[np.argsort(-scores)[:10]]
    assert keys.tolist() == expected.tolist()
    assert cosines == pytest.approx(np.sort(scores)[::-1][:10], abs=1e-5)
    assert np.array_equal(index.vector(4), vectors[4])
    assert index.vector(3) is None


def test_vector_index_replaces_masks_and_breaks_ties_by_key() -> None:
    index = VectorIndex(2)
    index.add([7, 3, 5], np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32))
    keys, _ = index.search(np.array([1.0, 0.0]), 1)
    assert keys.tolist() == [3]  # 7 and 3 tie: the smaller key wins
    index.add([3], np.array([[0, 1]], dtype=np.float32))  # replace in place
    assert len(index) == 3
    keys, cos = index.search(np.array([1.0, 0.0]), 3)
    assert keys.tolist() == [7, 3, 5] and cos.tolist() == [1.0, 0.0, 0.0]
    allowed = np.array([index.slot(k) is not None and k != 7 for k in index.keys.tolist()])
    keys, _ = index.search(np.array([1.0, 0.0]), 3, allowed)
    assert keys.tolist() == [3, 5]
    with pytest.raises(ValueError, match="shape"):
        index.add([1], np.zeros((1, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="dim"):
        VectorIndex(0)
    assert VectorIndex(2).search(np.array([1.0, 0.0]), 5)[0].tolist() == []


def test_query_terms_drop_question_words_and_keep_content() -> None:
    assert query_terms("When did Melanie paint a sunrise?") == ["melanie", "paint", "sunrise"]
    assert query_terms("what is it") == ["what", "is", "it"]  # only stop words: keep them
    assert query_terms("parse_config parse_config in README.md") == ["parse_config", "readme", "md"]
    assert query_terms("Ünïcode café") == ["ünïcode", "café"]
    assert query_terms("") == []
    assert query_terms(" ".join(f"w{n}" for n in range(100))) == [f"w{n}" for n in range(64)]


def test_fts_match_quotes_every_term() -> None:
    assert fts_match(["parse_config", "tests"]) == '"parse_config" OR "tests"'
    assert fts_match(['a"b']) == '"a""b"'
    assert fts_match([]) is None
    assert item_ids_in("see item_0123456789ab and item_0123456789ab, not item_xyz") == [
        "item_0123456789ab"
    ]


def test_fusion_formula_by_hand() -> None:
    # rows 0..4; vector cosines 0.8 (row 1), 0.4 (row 2), -0.2 (row 3); bm25 6 (row 2), 3 (row 4)
    base = fusion.base_scores(
        5,
        np.array([1, 2, 3]),
        np.array([0.8, 0.4, -0.2]),
        np.array([2, 4]),
        np.array([6.0, 3.0]),
    )
    # v = (1.0, 0.5, 0), b = (1.0, 0.5) -> s = [0, 1.0, 1.5, 0, 0.5] and a trailing 0
    assert base.tolist() == pytest.approx([0.0, 1.0, 1.5, 0.0, 0.5, 0.0])
    prev = np.array([-1, 0, 1, 2, 3])  # rows 0..4 in one session, in order
    nxt = np.array([1, 2, 3, 4, -1])
    fused = fusion.with_neighbours(base, prev, nxt)
    # f = s + 0.3 (s[prev] + s[next])
    assert fused.tolist() == pytest.approx([0.3, 1.45, 1.8, 0.6, 0.5])
    assert pytest.approx(3.2) == fusion.MAX_FUSED


def test_relative_scores_and_rrf() -> None:
    assert fusion.relative(np.array([-1.0, 0.0])).tolist() == [0.0, 0.0]
    assert fusion.relative(np.array([2.0, 1.0, -3.0])).tolist() == [1.0, 0.5, 0.0]
    # row 5: 1/61 + 1/62; row 7: 1/62 + 1/61; row 9: 1/63 -> 5 and 7 tie, first seen first
    assert fusion.rrf([[5, 7, 9], [7, 5]]) == [5, 7, 9]
    assert fusion.rrf([[1, 2], [2]], k=1) == [2, 1]  # 2: 1/3 + 1/2 > 1: 1/2
