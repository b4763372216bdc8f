"""Coverage-aware eviction order (veil_fsrs.coverage): values computed by hand."""

from __future__ import annotations

import numpy as np
from veil_fsrs.coverage import eviction_order, item_identifiers, mention_weigher
from veil_fsrs.eviction import plan_eviction
from veil_fsrs.settings import FsrsContextSettings

from veil.core.prompt.items import ItemBatch
from veil.core.types import ContextItem

NOW = 1_750_000_000.0


def item(name: str, content: str, **fields) -> ContextItem:
    base = {
        "id": name,
        "content": content,
        "source": "tool_result",
        "tool_call_id": f"call_{name}",
        "step": 10,
        "tokens": 100,
        "access_count": 2,
        "created_at": NOW,
        "last_access": NOW,
    }
    base.update(fields)
    return ContextItem(**base)


def test_identifiers_follow_the_measures_shape_and_are_kept_on_the_item():
    it = item("x1", "see src/app.py line 1234 in parse_config, not word or abc")
    names = item_identifiers(it)
    assert names == {"src/app.py", "1234", "parse_config"}
    it.content = "other text entirely"
    assert item_identifiers(it) is names  # computed once (content does not change)


def test_greedy_keeps_new_names_per_token_and_evicts_repeats_first():
    """covered = {src/a.py} (the staying item). Values = new names / (freed + 20) x (0.5 +
    retention): A and B each add foo_bar: 1 / 100 x 1.0 = 0.01; C adds baz_qux: 1 / 50 x 1.0 =
    0.02. C is kept first, then B (a tie with A goes to the newer group), and A then adds
    nothing: it leaves first, then B, then C."""
    items = ItemBatch(
        [
            item("S", "open src/a.py"),
            item("A", "src/a.py foo_bar"),
            item("B", "src/a.py foo_bar"),
            item("C", "baz_qux"),
        ]
    )
    order = eviction_order(
        items,
        group=np.array([0, 1, 2, 3]),
        candidates=np.array([False, True, True, True]),
        staying=np.array([True, False, False, False]),
        freed=np.array([0.0, 80.0, 80.0, 30.0]),
        retention=np.array([1.0, 0.5, 0.5, 0.5]),
    )
    assert order.tolist() == [1, 2, 3]


def test_retention_weighs_the_value():
    """Same names and size; retention 0.9 vs 0.1 gives values x1.4 vs x0.6: the low one leaves
    first even though it is the newer group."""
    items = ItemBatch([item("old", "one_name"), item("new", "two_name")])
    order = eviction_order(
        items,
        group=np.array([0, 1]),
        candidates=np.array([True, True]),
        staying=np.array([False, False]),
        freed=np.array([80.0, 80.0]),
        retention=np.array([0.9, 0.1]),
    )
    assert order.tolist() == [1, 0]


def test_eviction_prefers_the_redundant_result_with_coverage_and_the_older_without():
    """Two old results of equal score: the older names src/cache.py, which nothing else holds;
    the newer only repeats what a protected result shows. Coverage evicts the repeat; ranking by
    score alone evicts the older."""
    items = [
        item("unique_old", "def load() in src/cache.py", step=10),
        item("repeat_new", "tests/test_x.py::test_env FAILED", step=11),
        item("recent", "tests/test_x.py::test_env FAILED again", step=100),
    ]
    scores = [0.3, 0.3, 0.3]
    on = FsrsContextSettings()
    off = FsrsContextSettings.model_validate({"coverage": False})
    # 300 tokens used, soft target 0.95 x 280 = 266: one 100-token result must leave
    args = dict(threshold=0.95, current_step=100, now=NOW)
    with_cov = plan_eviction(ItemBatch(items), scores, 280, 300, settings=on, **args)
    without = plan_eviction(ItemBatch(items), scores, 280, 300, settings=off, **args)
    assert with_cov.to_warm == ["repeat_new"]
    assert without.to_warm == ["unique_old"]


def test_mention_weigher_sums_each_new_name_s_count_to_the_power():
    """mentions: src/core.py 3, alpha_x 1; beta_y unknown (counts 1). Power 2: 3**2 + 1 + 1 =
    11; power 0 or no counts: how many names there are."""
    mentions = {"src/core.py": 3, "alpha_x": 1}
    names = {"src/core.py", "alpha_x", "beta_y"}
    assert mention_weigher(mentions, 2.0)(names) == 11.0
    assert mention_weigher(mentions, 1.5)({"src/core.py"}) == 3.0**1.5
    assert mention_weigher(mentions, 0.0)(names) == 3
    assert mention_weigher(None, 2.0)(names) == 3
    assert mention_weigher({}, 2.0)(names) == 3


def test_the_name_the_session_keeps_mentioning_outweighs_two_new_ones():
    """Two old results of 100 tokens, equal scores; one must leave (300 used, soft target
    0.95 x 280 = 266). 'pair' brings two names, 'core' one. Counting names, core's value is
    1/120 against pair's 2/120, so core leaves. With mentions (src/core.py in 3 of the
    session's items, the others in 1) at power 2, core's value is 9/120 against 2/120, so
    pair leaves."""
    items = [
        item("pair", "alpha_x and beta_y", step=10),
        item("core", "see src/core.py", step=11),
        item("recent", "nothing to name", step=100),
    ]
    scores = [0.3, 0.3, 0.3]
    args = dict(threshold=0.95, current_step=100, now=NOW)
    mentions = {"src/core.py": 3, "alpha_x": 1, "beta_y": 1}
    on = FsrsContextSettings()  # mentionPower 2
    flat = FsrsContextSettings.model_validate({"mentionPower": 0})
    counted = plan_eviction(
        ItemBatch(items), scores, 280, 300, settings=on, mentions=mentions, **args
    )
    plain = plan_eviction(
        ItemBatch(items), scores, 280, 300, settings=flat, mentions=mentions, **args
    )
    without = plan_eviction(ItemBatch(items), scores, 280, 300, settings=on, **args)
    assert counted.to_warm == ["pair"]
    assert plain.to_warm == ["core"]
    assert without.to_warm == ["core"]
