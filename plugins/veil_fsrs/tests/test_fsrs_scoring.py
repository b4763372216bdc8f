"""Scoring of veil_fsrs: hand-computed scores, modifiers, clamp, determinism, the hook."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest
import veil_fsrs
from veil_fsrs.batch_index import index_for
from veil_fsrs.scoring import score_items, signals
from veil_fsrs.settings import FsrsContextSettings

from veil.core.prompt.items import ItemBatch
from veil.core.types import ContextItem

NOW = 1_750_000_000.0
DAY = 86_400.0
F = 0.9 ** (-1 / 0.1542) - 1  # FSRS-6 curve factor, so R(S, S) = 0.9


def item(**fields) -> ContextItem:
    base = {"content": "x", "created_at": NOW, "last_access": NOW}
    base.update(fields)
    return ContextItem(**base)


def r_by_hand(elapsed_days: float, stability_days: float, decay: float = 0.1542) -> float:
    return (1 + (0.9 ** (-1 / decay) - 1) * elapsed_days / stability_days) ** -decay


def test_hand_computed_scores():
    settings = FsrsContextSettings()
    items = ItemBatch(
        [
            # R = 0.9 (elapsed = stability), frequency log1p(9)/ln10 = 1, Jaccard {a,b}~{a,c} = 1/3,
            # structure 1, cognitive |-0.6| = 0.6:
            # 0.25*0.9 + 0.15*1 + 0.30/3 + 0.15*1 + 0.15*0.6 = 0.715
            item(
                tags=["a", "b"],
                targets=["src/app.py"],
                access_count=9,
                stability=0.02,
                last_access=NOW - 0.02 * DAY,
                cognitive_weight=-0.6,
            ),
            # procedural, loaded by hand, just accessed: (0.25*1) * 1.2 * 1.5 = 0.45
            item(kind="procedural", loaded_by_hand=True),
            # one access, 3 stabilities old, weight +0.2, no tags:
            # 0.25*R(3S, S) + 0.15*ln2/ln10 + 0.15*0.2
            item(access_count=1, stability=0.5, last_access=NOW - 1.5 * DAY, cognitive_weight=0.2),
            # pinned copy of the first item: 0.715 + 0.5 -> clamped to 1
            item(
                tags=["a", "b"],
                targets=["src/app.py"],
                access_count=9,
                stability=0.02,
                last_access=NOW - 0.02 * DAY,
                cognitive_weight=-0.6,
                pinned=True,
            ),
            # intent: never decays (recency 1 however old): 0.25
            item(kind="intent", stability=0.02, last_access=NOW - 30 * DAY),
            # 30-day stability capped at the live cap (7 days), 7 days old: R = 0.9 -> 0.225
            item(stability=30.0, last_access=NOW - 7 * DAY),
        ]
    )
    got = score_items(items, frozenset({"a", "c"}), NOW, settings)
    third = 0.25 * ((1 + 3 * F) ** -0.1542) + 0.15 * math.log(2) / math.log(10) + 0.15 * 0.2
    expected = [0.715, 0.45, third, 1.0, 0.25, 0.225]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got.dtype == np.float64 and got.shape == (6,)


def test_signals_by_hand():
    items = ItemBatch(
        [
            item(tags=["x", "y", "z"], access_count=99, cognitive_weight=3.0),
            item(tags=[], access_count=0),
            item(tags=["q"], targets=["Foo.bar"], last_access=NOW + 60),  # clock skew: R = 1
        ]
    )
    parts = signals(items, frozenset({"y", "z", "w"}), NOW, FsrsContextSettings())
    np.testing.assert_allclose(parts["relevance"], [2 / 4, 0.0, 0.0])
    np.testing.assert_allclose(parts["frequency"], [1.0, 0.0, 0.0])  # capped at 1
    np.testing.assert_allclose(parts["structure"], [0.0, 0.0, 1.0])
    np.testing.assert_allclose(parts["cognitive"], [1.0, 0.0, 0.0])  # |w| clipped to 1
    np.testing.assert_allclose(parts["recency"], [1.0, 1.0, 1.0])
    # Both tag sets empty: relevance 0, not a division by zero.
    empty = signals(items, frozenset(), NOW, FsrsContextSettings())["relevance"]
    np.testing.assert_array_equal(empty, [0.0, 0.0, 0.0])


def test_weights_decay_and_modifiers_come_from_settings():
    settings = FsrsContextSettings.model_validate(
        {
            "weights": {
                "recency": 1.0,
                "frequency": 0,
                "relevance": 0,
                "structure": 0,
                "cognitive": 0,
            },
            "decay": 0.5,
            "proceduralFactor": 0.5,
            "byHandFactor": 2.0,
            "pinnedBoost": 0.25,
        }
    )
    items = ItemBatch(
        [
            item(stability=1.0, last_access=NOW - 4 * DAY),
            item(kind="procedural", stability=1.0, last_access=NOW - 4 * DAY),
            item(stability=1.0, last_access=NOW - 4 * DAY, loaded_by_hand=True, pinned=True),
        ]
    )
    r = r_by_hand(4.0, 1.0, decay=0.5)
    got = score_items(items, frozenset(), NOW, settings)
    np.testing.assert_allclose(got, [r, 0.5 * r, min(1.0, 2 * r + 0.25)], rtol=1e-12)
    assert r < r_by_hand(4.0, 1.0) - 0.05  # a steeper decay than FSRS-6's lowers recency


def test_clamp_to_unit_interval():
    settings = FsrsContextSettings.model_validate({"byHandFactor": 10.0, "pinnedBoost": 2.0})
    items = ItemBatch([item(loaded_by_hand=True, access_count=50), item(pinned=True)])
    got = score_items(items, frozenset(), NOW, settings)
    np.testing.assert_array_equal(got, [1.0, 1.0])
    zero = FsrsContextSettings.model_validate(
        {"weights": {"recency": 0, "frequency": 0, "relevance": 0, "structure": 0, "cognitive": 0}}
    )
    np.testing.assert_array_equal(score_items(items, frozenset(), NOW, zero), [0.0, 0.5])


def _random_items(count: int, seed: int) -> list[ContextItem]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(40)]
    kinds = ["episodic", "fact", "procedural", "decision", "intent", "status"]
    return [
        item(
            id=f"item_{seed}_{i}",
            kind=rng.choice(kinds),
            tags=rng.sample(words, rng.randint(0, 5)),
            targets=["f.py"] if rng.random() < 0.3 else [],
            access_count=rng.randint(0, 12),
            stability=rng.choice([0.02, 0.083, 0.25, 0.5, 9.0]),
            last_access=NOW - rng.uniform(0, 3 * DAY),
            cognitive_weight=rng.uniform(-1, 1),
            pinned=rng.random() < 0.05,
            loaded_by_hand=rng.random() < 0.05,
        )
        for i in range(count)
    ]


def test_deterministic_same_inputs_same_array():
    settings = FsrsContextSettings()
    items = _random_items(500, seed=7)
    task = frozenset({"w1", "w2", "w3"})
    first = score_items(ItemBatch(items), task, NOW, settings)
    again = score_items(ItemBatch(items), task, NOW, settings)  # a fresh batch, fresh index
    assert np.array_equal(first, again)
    assert np.array_equal(first, score_items(ItemBatch(items), set(task), NOW, settings))
    # The score of an item does not depend on the other items or their order.
    shuffled = list(items)
    random.Random(3).shuffle(shuffled)
    shuffled_scores = score_items(ItemBatch(shuffled), task, NOW, settings)
    by_id = dict(zip((i.id for i in shuffled), shuffled_scores, strict=True))
    assert [by_id[i.id] for i in items] == first.tolist()
    assert ((first >= 0) & (first <= 1)).all()


def test_vectorised_matches_per_item_formula():
    """The numpy path equals a plain per-item computation of the documented formula."""
    settings = FsrsContextSettings()
    items = _random_items(300, seed=11)
    task = {"w4", "w9"}
    got = score_items(ItemBatch(items), task, NOW, settings)
    for value, it in zip(got, items, strict=True):
        stability = min(it.stability, 7.0)
        recency = 1.0 if it.kind == "intent" else r_by_hand((NOW - it.last_access) / DAY, stability)
        tags = set(it.tags)
        union = tags | task
        s = (
            0.25 * recency
            + 0.15 * min(1.0, math.log1p(it.access_count) / math.log(10))
            + 0.30 * (len(tags & task) / len(union) if union else 0.0)
            + 0.15 * (1.0 if it.targets else 0.0)
            + 0.15 * min(1.0, abs(it.cognitive_weight))
        )
        s *= (1.2 if it.kind == "procedural" else 1.0) * (1.5 if it.loaded_by_hand else 1.0)
        s += 0.5 if it.pinned else 0.0
        assert value == pytest.approx(min(1.0, max(0.0, s)), rel=1e-12, abs=1e-15)


def test_index_is_rebuilt_after_the_batch_changes():
    items = ItemBatch([item(tags=["a"])])
    assert score_items(items, {"a"}, NOW, FsrsContextSettings())[0] == pytest.approx(0.25 + 0.30)
    first_index = index_for(items)
    items.append(item(tags=["b"]))  # mutation drops the cached columns, hence the index
    assert index_for(items) is not first_index
    got = score_items(items, {"b"}, NOW, FsrsContextSettings())
    np.testing.assert_allclose(got, [0.25, 0.25 + 0.30])


def test_non_finite_input_names_the_item_and_field():
    bad = item(id="item_bad", last_access=float("nan"))
    with pytest.raises(ValueError, match=r"item_bad.*last_access"):
        score_items(ItemBatch([item(), bad]), set(), NOW, FsrsContextSettings())


def test_empty_batch():
    assert score_items(ItemBatch(), {"a"}, NOW, FsrsContextSettings()).shape == (0,)


def test_score_hook_reads_session_settings():
    settings = FsrsContextSettings.model_validate({"pinnedBoost": 0.1})
    session = SimpleNamespace(config=SimpleNamespace(settings=SimpleNamespace(context=settings)))
    got = veil_fsrs.score(
        session=session, items=[item(pinned=True)], task_tags=frozenset(), now=NOW
    )
    np.testing.assert_allclose(got, [0.25 + 0.1])
