"""Warm and cold tiers (veil.core.tiers) and the search over them (the default plugin
veil.recall): indexing, keyword and vector search, cold compression, forget, hydrate,
durability, filters, and the core's eviction path calling them.

The model here is a counting bag-of-words embedder (deterministic, so rankings can be worked
out by hand); the real all-MiniLM-L6-v2 is exercised in test_tiers_meaning.py.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from veil.core import context_ops
from veil.core.app import open_veil
from veil.core.models.embedder import cache_key
from veil.core.tiers import (
    COLD_PREVIEW_CHARS,
    ColdContentError,
    Tiers,
    cold_preview,
    compress,
    decompress,
)
from veil.core.types import ContextItem, EvictionPlan
from veil.default_plugins.recall.registry import recall_for
from veil.default_plugins.recall.search import Recall

DIM = 64


class CountingEmbedder:
    """Bag of words hashed into 64 dimensions (md5 of each lower-cased word), unit rows.

    ``texts_seen`` lists every text encoded, so tests can count model work.
    """

    def __init__(self, name: str = "test-bow-64") -> None:
        self.name = name
        self.texts_seen: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.texts_seen.extend(texts)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


@pytest.fixture
def veil(project: Path):
    v = open_veil(project, use_entry_points=False)
    yield v
    v.close()


@pytest.fixture
def model() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def tiers(veil, model) -> Tiers:
    veil._tiers = Tiers(veil, embedder=model)  # the app's lazily created tiers, with the fake
    return veil._tiers


@pytest.fixture
def recall(veil, tiers) -> Recall:
    return recall_for(veil)  # the plugin's search over the tiers above


def _session(veil, sid: str = "sess_a") -> str:
    veil.store.create_session(sid, "default", None, {})
    return sid


def _items(sid: str, texts: list[str], **kw) -> list[ContextItem]:
    return [ContextItem(content=t, session_id=sid, **kw) for t in texts]


TEXTS = [
    "pytest failed in tests/test_store.py with a database lock timeout",
    "the README explains how to install the package with pip",
    "renamed parse_config to load_settings across the code base",
    "numpy matrix multiply is the hot loop of the vector search",
]


def test_warm_items_are_found_by_keyword_and_by_vector(veil, tiers, recall, model) -> None:
    sid = _session(veil)
    items = _items(sid, TEXTS)
    tiers.store_items(items, "warm")
    assert model.texts_seen == []  # moving items neither embeds nor indexes text (hot path)
    flags = "SELECT fts, embed_key IS NOT NULL FROM recall_index ORDER BY row"
    assert [tuple(r) for r in veil.store.conn.execute(flags)] == [(0, 0)] * 4

    hits = recall.search("database lock", limit=2)
    assert hits[0].id == items[0].id
    assert hits[0].source == "warm"
    assert hits[0].content == TEXTS[0]
    assert hits[0].meta["keyword"] > 0 and hits[0].meta["vector"] > 0
    assert 0 < hits[0].score <= 1
    # the four items were embedded once, in one batch, plus the query
    assert sorted(model.texts_seen) == sorted([*TEXTS, "database lock"])
    assert [tuple(r) for r in veil.store.conn.execute(flags)] == [(1, 1)] * 4

    # the vector leg alone ranks by cosine: "vector search matrix" shares 3 of 10 words with
    # item 3 and none with the others
    vec = model.encode(["vector search matrix"])[0]
    found = recall.vector_search(vec, k=4)
    assert found[0][0] == items[3].id
    expected = float(np.dot(vec, model.encode([TEXTS[3]])[0]))
    assert found[0][1] == pytest.approx(expected, abs=1e-6)


def test_keyword_search_uses_stems_and_drops_stop_words(veil, tiers, recall) -> None:
    sid = _session(veil)
    items = _items(sid, ["Melanie painted a sunrise over the lake", "Caroline went hiking"])
    tiers.store_items(items, "warm")
    # "painting" stems to "paint" like "painted"; "when", "did", "a" are query stop words
    hits = recall.keyword_search("When did Melanie go painting?")
    assert [i for i, _ in hits] == [items[0].id]


def test_cold_compresses_and_round_trips_byte_for_byte(veil, tiers, recall) -> None:
    sid = _session(veil)
    text = "línea 1\r\n\ttab  and  spaces 🐍\n" + "x" * 5000 + "\n\x00end"
    (item,) = _items(sid, [text])
    tiers.store_items([item], "warm")
    tiers.on_moved([item], "cold")

    row = veil.store.conn.execute(
        "SELECT zcontent, sha256, chars FROM cold_content WHERE item_id = ?", (item.id,)
    ).fetchone()
    assert zlib.decompress(row["zcontent"]).decode("utf-8") == text
    assert row["sha256"] == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert row["chars"] == len(text)
    assert len(row["zcontent"]) < len(text.encode("utf-8")) // 10  # 5,000 x's compress well
    stored = veil.store.get_item(item.id)
    assert stored.content == " ".join(text.split())[:COLD_PREVIEW_CHARS]
    assert tiers.content(item.id) == text

    hits = recall.search("tab spaces", limit=1)  # still findable by keyword, whole content back
    assert hits[0].id == item.id and hits[0].source == "cold" and hits[0].content == text
    assert hits[0].meta["vector"] is None  # cold items left the vector index

    tiers.on_moved([veil.store.get_item(item.id)], "warm")  # demoted back to warm
    assert veil.store.get_item(item.id).content == text
    assert veil.store.conn.execute("SELECT COUNT(*) FROM cold_content").fetchone()[0] == 0


def test_compress_helpers_detect_corruption() -> None:
    blob, digest = compress("héllo")
    assert decompress(blob, digest) == "héllo"
    with pytest.raises(ColdContentError, match="item_x"):
        decompress(blob, "0" * 64, "item_x")
    with pytest.raises(ColdContentError, match="inflate"):
        decompress(b"not zlib", digest, "item_x")
    assert cold_preview("a\n\n b\tc") == "a b c"


def test_forget_excludes_from_every_index_and_keeps_content(veil, tiers, recall, model) -> None:
    sid = _session(veil)
    items = _items(sid, TEXTS)
    tiers.store_items(items, "warm")
    tiers.on_moved([items[0]], "cold")
    tiers.forget(items[0].id)
    tiers.forget(items[3].id)

    assert items[0].id not in [h.id for h in recall.search("database lock timeout", 10)]
    vec = model.encode([TEXTS[3]])[0]
    assert items[3].id not in [i for i, _ in recall.vector_search(vec, 10)]
    assert items[3].id not in [i for i, _ in recall.keyword_search("numpy matrix")]
    assert veil.store.get_item(items[0].id).content == TEXTS[0]  # whole, back from cold
    assert tiers.counts() == {"warm": 2, "cold": 0, "forgotten": 2}
    assert recall.index.pending == 0
    # a later move does not bring a forgotten item back into recall
    tiers.on_moved([items[3]], "warm")
    assert items[3].id not in [h.id for h in recall.search("numpy matrix multiply", 10)]
    with pytest.raises(KeyError, match="item_missing"):
        tiers.forget("item_missing")


def test_embedding_cache_avoids_a_second_encode(veil, tiers, recall, model) -> None:
    sid = _session(veil)
    same = "identical tool output: 3 passed"
    tiers.store_items(_items(sid, [same, same, "other text"]), "warm")
    recall.flush()
    assert sorted(model.texts_seen) == sorted([same, "other text"])  # duplicate encoded once
    row = veil.store.conn.execute(
        "SELECT model, dim, length(vector) AS n FROM embeddings WHERE key = ?",
        (cache_key(model.name, same),),
    ).fetchone()
    assert (row["model"], row["dim"], row["n"]) == (model.name, DIM, DIM * 4)

    model.texts_seen.clear()
    tiers.store_items(_items(sid, [same]), "warm")  # a new item with known text
    recall.search("tool output", 5)
    recall.search("tool output", 5)
    assert model.texts_seen == ["tool output"]  # neither the item nor the repeat query


def test_reopened_database_searches_without_re_embedding(project: Path) -> None:
    first = CountingEmbedder()
    veil = open_veil(project, use_entry_points=False)
    tiers = Tiers(veil, embedder=first)
    sid = _session(veil)
    items = _items(sid, TEXTS)
    tiers.store_items(items, "warm")
    tiers.on_moved([items[1]], "cold")
    before = Recall(tiers).search("install the package", 3)
    veil.close()

    second = CountingEmbedder()  # same model name: the stored vectors are valid for it
    reopened = open_veil(project, use_entry_points=False)
    try:
        again = Recall(Tiers(reopened, embedder=second))
        after = again.search("install the package", 3)
        assert [(h.id, h.source, h.content) for h in after] == [
            (h.id, h.source, h.content) for h in before
        ]
        assert [h.score for h in after] == pytest.approx([h.score for h in before])
        assert second.texts_seen == []  # items and query came from the stored cache
        assert after[0].id == items[1].id and after[0].source == "cold"
    finally:
        reopened.close()


def test_a_new_model_re_embeds_instead_of_mixing_vectors(project: Path) -> None:
    veil = open_veil(project, use_entry_points=False)
    try:
        sid = _session(veil)
        Tiers(veil, embedder=CountingEmbedder("model-a")).store_items(_items(sid, TEXTS), "warm")
        Recall(Tiers(veil, embedder=CountingEmbedder("model-a"))).flush()
        other = CountingEmbedder("model-b")
        assert Recall(Tiers(veil, embedder=other)).flush() == len(TEXTS)
        assert sorted(other.texts_seen) == sorted(TEXTS)
    finally:
        veil.close()


def test_filters_by_session_and_tags(veil, tiers, recall) -> None:
    a, b = _session(veil, "sess_a"), _session(veil, "sess_b")
    ia = _items(a, ["deploy script failed on staging"], tags=["deploy", "staging"])
    ib = _items(b, ["deploy script passed on production"], tags=["deploy", "prod"])
    tiers.store_items(ia + ib, "warm")
    assert {h.id for h in recall.search("deploy script", 10)} == {ia[0].id, ib[0].id}
    assert [h.id for h in recall.search("deploy script", 10, session_id="sess_b")] == [ib[0].id]
    assert [h.id for h in recall.search("deploy script", 10, tags=["STAGING"])] == [ia[0].id]
    assert recall.search("deploy script", 10, tags=["nothing"]) == []
    assert recall.search("deploy script", 10, session_id="sess_none") == []
    assert [i for i, _ in recall.keyword_search("deploy", tags=["prod"])] == [ib[0].id]


def test_an_item_id_in_the_query_is_found_first(veil, tiers, recall) -> None:
    sid = _session(veil)
    items = _items(sid, TEXTS)
    tiers.store_items(items, "cold")
    hits = recall.search(f"show me {items[2].id}", 2)
    assert hits[0].id == items[2].id and hits[0].score == 1.0 and hits[0].content == TEXTS[2]


def test_neighbour_expansion_lifts_the_answer_after_a_matching_question(
    veil, tiers, recall
) -> None:
    sid = _session(veil)
    items = _items(
        sid,
        [
            "which port does the staging server listen on",
            "8443, behind the proxy",
            "lunch is at noon",
            "the cat sleeps",
        ],
    )
    tiers.store_items(items, "warm")
    hits = recall.search("staging server port", 2)
    # the question matches; its answer shares no word with the query but follows it
    assert [h.id for h in hits] == [items[0].id, items[1].id]


class SeededEmbedder:
    """Random unit vectors (seeded): no ties between cosines."""

    name = "test-random-32"

    def __init__(self) -> None:
        self.rng = np.random.default_rng(5)

    def encode(self, texts: list[str]) -> np.ndarray:
        out = self.rng.standard_normal((len(texts), 32)).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_in_memory_index_agrees_with_sqlite_vec(veil) -> None:
    tiers = Tiers(veil, embedder=SeededEmbedder())
    recall = Recall(tiers)
    sid = _session(veil)
    tiers.store_items(_items(sid, [f"note {n}" for n in range(300)]), "warm")
    vec = SeededEmbedder().encode(["query"])[0]
    mine = recall.vector_search(vec, 5)
    oracle = recall.sql_vector_search(vec, 5)
    assert [i for i, _ in mine] == [i for i, _ in oracle]
    assert [c for _, c in mine] == pytest.approx([c for _, c in oracle], abs=1e-5)


def test_on_moved_rejects_unknown_items_and_tiers(veil, tiers) -> None:
    with pytest.raises(ValueError, match="tier"):
        tiers.on_moved([], "live")
    with pytest.raises(KeyError, match="not in the store"):
        tiers.on_moved([ContextItem(content="never stored")], "warm")


def test_changes_from_another_process_are_seen(project: Path) -> None:
    model = CountingEmbedder()
    one = open_veil(project, use_entry_points=False)
    two = open_veil(project, use_entry_points=False)
    try:
        sid = _session(one)
        reader = Recall(Tiers(two, embedder=model))
        assert reader.search("database", 5) == []
        writer = Tiers(one, embedder=model)
        items = _items(sid, TEXTS)
        writer.store_items(items, "warm")
        assert reader.search("database lock", 1)[0].id == items[0].id
        writer.forget(items[0].id)
        assert items[0].id not in [h.id for h in reader.search("database lock", 5)]
    finally:
        one.close()
        two.close()


# -- through the core: eviction, hydrate, forget, the recall hook ------------------------------


def test_eviction_hydrate_and_forget_through_the_session(veil, model) -> None:
    veil._tiers = Tiers(veil, embedder=model)
    session = veil.new_session()
    items = [ContextItem(content=t, source="tool_result") for t in TEXTS]
    session.add_items(items)
    session.apply_eviction(EvictionPlan(to_warm=[items[0].id], to_cold=[items[1].id]))
    assert veil.tiers.counts()["warm"] == 1 and veil.tiers.counts()["cold"] == 1
    assert veil.store.get_item(items[1].id).content == cold_preview(TEXTS[1])

    hits = veil.recall("install package pip", limit=3, session=session)
    assert hits[0].id == items[1].id and hits[0].source == "cold"
    assert hits[0].content == TEXTS[1]

    back = context_ops.hydrate(session, items[1].id)
    assert back.content == TEXTS[1]
    assert veil.store.get_item(items[1].id).content == TEXTS[1]
    assert items[1].id in [i.id for i in session.live_items]
    assert items[1].id not in [h.id for h in recall_for(veil).search("install package pip", 5)]

    context_ops.forget(session, items[0].id)
    assert recall_for(veil).search("database lock timeout", 5) == []
    assert (
        json.loads(
            veil.store.conn.execute("SELECT payload FROM events WHERE kind = 'forget'").fetchone()[
                "payload"
            ]
        )["item"]
        == items[0].id
    )


def test_recall_hook_without_a_session_answers_nothing(veil) -> None:
    assert veil.recall("anything", limit=3) == []


def test_an_empty_store_answers_nothing_and_loads_no_model(veil, tiers, recall, model) -> None:
    assert recall.search("anything at all", 5) == []
    assert recall.search("anything", 0) == []
    assert recall.vector_search(model.encode(["x"])[0], 5) == []
    assert recall.keyword_search("anything") == []
    assert model.texts_seen == ["x"]  # the test's own call: no items, so the query is not embedded
    assert tiers.counts() == {"warm": 0, "cold": 0, "forgotten": 0}
    assert recall.index.pending == 0


def test_one_search_per_veil_rebuilt_for_new_tiers_and_gone_with_the_veil(project: Path) -> None:
    import gc
    import weakref

    veil = open_veil(project, use_entry_points=False)
    veil._tiers = Tiers(veil, embedder=CountingEmbedder())
    first = recall_for(veil)
    assert recall_for(veil) is first  # one search (one in-memory index) per open Veil
    veil._tiers = Tiers(veil, embedder=CountingEmbedder("other"))
    second = recall_for(veil)
    assert second is not first and second.tiers is veil.tiers  # swapped tiers: a fresh index
    sid = _session(veil)
    veil.tiers.store_items(_items(sid, TEXTS), "warm")
    assert second.search("database lock", 1)[0].content == TEXTS[0]

    gone = weakref.ref(veil)
    veil.close()
    del veil, first, second
    gc.collect()
    assert gone() is None  # the registry holds the Veil weakly, and its search no Veil at all
