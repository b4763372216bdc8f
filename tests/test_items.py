"""ItemBatch's incremental columns (and veil_fsrs' incremental per-batch index) against a rebuild.

Every check compares the incrementally maintained state of a batch after a sequence of changes
(append, extend, remove_ids, refresh, refresh_rows, other list mutations) with a batch built from
scratch from the same items, and the scores with golden values computed by the implementation
that rebuilt everything on each change (commit 52e1e9d).
"""

from __future__ import annotations

import copy
import pickle
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from veil_fsrs.settings import FsrsContextSettings

from veil.core.prompt.items import LOG_LIMIT, ItemBatch
from veil.core.types import ContextItem

veil_fsrs = pytest.importorskip("veil_fsrs")
from veil_fsrs.batch_index import index_for  # noqa: E402
from veil_fsrs.eviction import plan_eviction  # noqa: E402
from veil_fsrs.scoring import score_items  # noqa: E402

NOW = 1_750_000_000.0
# The golden plan below was recorded with these settings (results protected for 12 steps).
SETTINGS = FsrsContextSettings.model_validate({"protectedResults": 12})
KINDS = ("episodic", "fact", "procedural", "decision", "action", "intent", "correction", "oddity")
SOURCES = ("user", "assistant", "tool_call", "tool_result", "memory")
TAGS = tuple("abcdefghij")


def make_item(rng: random.Random, number: int) -> ContextItem:
    """A varied item: every column gets a non-default value now and then."""
    return ContextItem(
        content=f"item {number}",
        id=f"item_{number:04d}",
        kind=rng.choice(KINDS),
        source=rng.choice(SOURCES),
        step=rng.randint(0, 30),
        tool_call_id=rng.choice([None, None, f"call_{rng.randint(0, 12)}"]),
        tags=rng.sample(TAGS, rng.randint(0, 4)),
        targets=["src/a.py"] if rng.random() < 0.4 else [],
        tokens=rng.randint(0, 400),
        access_count=rng.randint(0, 5),
        stability=rng.choice([0.02, 0.25, 1.0, 30.0]),
        difficulty=rng.uniform(1, 10),
        created_at=NOW - rng.uniform(0, 5 * 86_400),
        last_access=NOW - rng.uniform(0, 86_400),
        cognitive_weight=rng.choice([0.0, 0.0, -0.7, 0.4, 1.0]),
        pinned=rng.random() < 0.1,
        loaded_by_hand=rng.random() < 0.15,
    )


def mutate(rng: random.Random, item: ContextItem) -> None:
    """Change fields that columns and the index depend on, in place (not the tool_call_id)."""
    item.tags = rng.sample(TAGS, rng.randint(0, 4))
    item.kind = rng.choice(KINDS)
    item.source = rng.choice(SOURCES)
    item.access_count += 1
    item.last_access = NOW - rng.uniform(0, 3_600)
    item.stability = rng.choice([0.5, 2.0])
    item.pinned = not item.pinned
    item.loaded_by_hand = rng.random() < 0.5
    item.targets = [] if item.targets else ["src/b.py"]


def assert_columns_match(batch: ItemBatch) -> None:
    """``batch``'s columns equal those of a batch built from scratch from the same items."""
    got, want = batch.columns(), ItemBatch(list(batch)).columns()
    assert set(got) == set(want)
    for name, expected in want.items():
        assert len(got[name]) == len(batch), name
        assert list(got[name]) == list(expected), name
        assert got[name].dtype == expected.dtype, name
    for pos, item in enumerate(batch):
        assert batch.row_of(item.id) == pos
    assert batch.row_of("item_absent") is None
    # lookup follows appends, removals and refreshes (ids are unique here)
    found = batch.lookup([*(i.id for i in batch), "item_absent"])
    assert list(found) == [i.id for i in batch]
    assert all(found[i.id] is i for i in batch)
    ids = [i.id for i in batch]
    assert batch.rows_of(["item_absent", *ids[::-1]]).tolist() == [-1, *range(len(batch))[::-1]]


def assert_index_matches(batch: ItemBatch, task: frozenset[str]) -> None:
    """veil_fsrs' incremental index equals one built from scratch, and so do the scores."""
    index, fresh = index_for(batch), index_for(ItemBatch(list(batch)))
    for name in ("kind_code", "is_turn", "is_tool", "group"):
        np.testing.assert_array_equal(getattr(index, name), getattr(fresh, name), err_msg=name)
    assert index.n_groups == fresh.n_groups
    assert list(index.ids) == [i.id for i in batch]
    assert set(index.id_set) == {i.id for i in batch}
    np.testing.assert_array_equal(index.jaccard(task), fresh.jaccard(task))
    # the inverted index holds the same (tag, row) pairs
    assert _pairs(index) == _pairs(fresh) == {(t, r) for r, i in enumerate(batch) for t in i.tags}
    scores = score_items(batch, task, NOW, SETTINGS)
    np.testing.assert_array_equal(scores, score_items(ItemBatch(list(batch)), task, NOW, SETTINGS))
    if len(batch):
        used = int(sum(i.tokens for i in batch))
        budget = max(1, used // 2)
        plans = [
            plan_eviction(
                b,
                scores,
                budget,
                used,
                settings=SETTINGS,
                threshold=0.8,
                current_step=30,
                now=NOW,
                pointer_tokens=5,
            )
            for b in (batch, ItemBatch(list(batch)))
        ]
        assert plans[0].to_warm == plans[1].to_warm
        assert plans[0].reasons == plans[1].reasons


def _pairs(index) -> set[tuple[str, int]]:
    vocab, starts, rows, _ = index.tag_postings
    return {(tag, int(r)) for tag, c in vocab.items() for r in rows[starts[c] : starts[c + 1]]}


OPS = st.sampled_from(
    [
        "append",
        "extend",
        "remove",
        "remove_rows",
        "remove_absent",
        "refresh",
        "refresh_rows",
        "check",
        "reset",
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), ops=st.lists(OPS, min_size=1, max_size=30))
def test_incremental_columns_and_index_equal_a_rebuild(seed: int, ops: list[str]) -> None:
    rng = random.Random(seed)
    numbers = iter(range(10_000))
    batch = ItemBatch(make_item(rng, next(numbers)) for _ in range(rng.randint(0, 8)))
    task = frozenset(rng.sample(TAGS, 3))
    index_for(batch)  # the index follows from here on
    for op in ops:
        if op == "append":
            batch.append(make_item(rng, next(numbers)))
        elif op == "extend":
            batch.extend(make_item(rng, next(numbers)) for _ in range(rng.randint(0, 40)))
        elif op == "remove" and len(batch):
            gone = {i.id for i in batch if rng.random() < 0.3}
            removed = batch.remove_ids(gone)
            assert {i.id for i in removed} == gone
            assert not any(i.id in gone for i in batch)
            assert batch.lookup(gone) == {}
        elif op == "remove_rows" and len(batch):
            rows = [r for r in range(len(batch)) if rng.random() < 0.3]
            expected = [batch[r] for r in rows]
            kept = [i for r, i in enumerate(batch) if r not in set(rows)]
            assert batch.remove_rows(rows + rows[:1]) == expected  # a repeat counts once
            assert list(batch) == kept
        elif op == "remove_absent":
            version = batch.version
            assert batch.remove_ids(["item_absent"]) == []
            assert batch.version == version  # nothing changed
        elif op == "refresh" and len(batch):
            item = rng.choice(batch)
            mutate(rng, item)
            assert batch.refresh(item)
        elif op == "refresh_rows" and len(batch):
            rows = rng.sample(range(len(batch)), rng.randint(1, len(batch)))
            for row in rows:
                mutate(rng, batch[row])
            batch.refresh_rows(rows)
        elif op == "check":
            assert_columns_match(batch)
            assert_index_matches(batch, task)
            task = frozenset(rng.sample(TAGS, rng.randint(0, 4)))  # a new task now and then
        elif op == "reset" and len(batch) > 1:
            batch.insert(0, batch.pop())  # a mutation the columns cannot follow
    assert_columns_match(batch)
    assert_index_matches(batch, task)


def test_remove_ids_keeps_order_and_old_snapshots() -> None:
    rng = random.Random(3)
    batch = ItemBatch(make_item(rng, n) for n in range(6))
    before = batch.columns()
    tokens_before = before["tokens"].copy()
    removed = batch.remove_ids({"item_0001", "item_0004", "item_9999"})
    assert [i.id for i in removed] == ["item_0001", "item_0004"]
    assert [i.id for i in batch] == ["item_0000", "item_0002", "item_0003", "item_0005"]
    np.testing.assert_array_equal(before["tokens"], tokens_before)  # the old dict is untouched
    after = batch.columns()
    np.testing.assert_array_equal(after["tokens"], tokens_before[[0, 2, 3, 5]])
    assert batch.row_of("item_0005") == 3 and batch.row_of("item_0004") is None


def test_rows_of_and_remove_rows_by_hand() -> None:
    rng = random.Random(5)
    batch = ItemBatch(make_item(rng, n) for n in range(5))
    snapshot = batch.columns()
    assert batch.rows_of([]).tolist() == []
    assert batch.rows_of(["item_0003", "item_9999", "item_0000"]).tolist() == [3, -1, 0]
    with pytest.raises(IndexError, match="rows"):
        batch.remove_rows([1, 5])
    assert len(batch) == 5 and batch.columns() is snapshot  # nothing removed
    removed = batch.remove_rows(np.array([3, 1]))
    assert [i.id for i in removed] == ["item_0001", "item_0003"]  # batch order
    assert batch.rows_of(["item_0003", "item_0004"]).tolist() == [-1, 2]
    assert batch.remove_rows([]) == []
    # duplicate ids: the last copy's row, as row_of finds it; remove_ids takes every copy
    twin = copy.copy(batch[0])
    batch.append(twin)
    assert batch.rows_of(["item_0000"]).tolist() == [3] == [batch.row_of("item_0000")]
    assert [i.id for i in batch.remove_ids(["item_0000"])] == ["item_0000", "item_0000"]
    assert [i.id for i in batch] == ["item_0002", "item_0004"]
    assert_columns_match(batch)
    assert ItemBatch().rows_of(["item_0000"]).tolist() == [-1]


def test_appends_grow_past_the_capacity() -> None:
    rng = random.Random(4)
    batch = ItemBatch([make_item(rng, 0)])
    first = batch.columns()
    for n in range(1, 100):  # several doublings
        batch.append(make_item(rng, n))
        assert batch.columns()["step"][-1] == batch[-1].step
    assert len(first["step"]) == 1  # an old snapshot keeps its length
    assert_columns_match(batch)


def test_refresh_of_an_item_not_in_the_batch_changes_nothing() -> None:
    rng = random.Random(5)
    batch = ItemBatch(make_item(rng, n) for n in range(3))
    version = batch.version
    stranger = make_item(rng, 7)
    twin = copy.copy(batch[0])  # same id, another object
    assert batch.refresh(stranger) is False
    assert batch.refresh(twin) is False
    assert batch.version == version
    with pytest.raises(IndexError, match="rows"):
        batch.refresh_rows([3])


def test_changes_since_replays_or_asks_for_a_rebuild() -> None:
    rng = random.Random(6)
    batch = ItemBatch(make_item(rng, n) for n in range(4))
    start = batch.version
    batch.append(make_item(rng, 4))
    batch.remove_ids({"item_0001"})
    batch.refresh(batch[0])
    changes = batch.changes_since(start)
    assert [c.kind for c in changes] == ["append", "remove", "refresh"]
    assert changes[0].start == 4 and [i.id for i in changes[0].items] == ["item_0004"]
    assert changes[1].keep.tolist() == [True, False, True, True, True]
    assert changes[1].rows.tolist() == [1] and changes[1].size == 5
    assert changes[2].rows.tolist() == [0]
    assert batch.changes_since(batch.version) == []
    assert batch.changes_since(batch.version + 1) is None  # not a version of this batch
    batch.sort(key=lambda i: i.id)
    assert batch.changes_since(start) is None  # sorting cannot be replayed
    mark = batch.version
    for n in range(LOG_LIMIT + 1):
        batch.append(make_item(rng, 100 + n))
    assert batch.changes_since(mark) is None  # the log no longer reaches back
    assert len(batch.changes_since(batch.version - 3)) == 3


def test_copies_do_not_share_columns() -> None:
    rng = random.Random(8)
    batch = ItemBatch(make_item(rng, n) for n in range(3))
    batch.columns()
    for other in (copy.copy(batch), pickle.loads(pickle.dumps(batch))):
        other.append(make_item(rng, 9))
        assert len(batch.columns()["tokens"]) == 3
        assert len(other.columns()["tokens"]) == 4


def test_index_follows_many_calls_coming_and_going() -> None:
    """Thousands of tool calls appended and evicted: call keys are renumbered, postings of
    removed items purged, and the index still equals a rebuild."""
    rng = random.Random(11)
    batch = ItemBatch()
    numbers = iter(range(100_000))
    task = frozenset({"a", "b"})
    for _ in range(40):
        fresh = [make_item(rng, next(numbers)) for _ in range(100)]
        alive_calls = sorted({i.tool_call_id for i in batch if i.tool_call_id})
        for item in fresh:  # a new call, or the result of a call already in the batch
            reuse = alive_calls and rng.random() < 0.5
            item.tool_call_id = rng.choice(alive_calls) if reuse else f"call_{item.id}"
        batch.extend(fresh)
        assert_index_matches(batch, task)
        batch.remove_ids({i.id for i in batch if rng.random() < 0.9})
        assert_index_matches(batch, task)
    state = batch.derived["veil_fsrs.index"]
    assert state.n_keys < 2_000  # renumbered (over 2,000 calls were seen)
    assert state.n_post - state.n_dead == sum(len(set(i.tags)) for i in batch)
    assert_index_matches(batch, task)


def test_a_changed_tool_call_id_rebuilds_the_groups() -> None:
    rng = random.Random(12)
    batch = ItemBatch(make_item(rng, n) for n in range(30))
    before = index_for(batch)
    batch[3].tool_call_id = "call_new"
    batch[4].tool_call_id = batch[20].tool_call_id = "call_shared"
    batch.refresh_rows([3, 4, 20])
    after = index_for(batch)
    assert after is not before
    assert after.group[4] == after.group[20] != after.group[3]
    assert_index_matches(batch, frozenset({"c"}))


# -- scores identical to the implementation that rebuilt everything (commit 52e1e9d) ----------


def fixed_scenario() -> tuple[ItemBatch, frozenset[str]]:
    """A fixed batch reached through every kind of incremental change, scored on the way."""
    rng = random.Random(2024)
    batch = ItemBatch(make_item(rng, n) for n in range(40))
    task = frozenset({"a", "c", "f"})
    score_items(batch, task, NOW, SETTINGS)
    batch.append(make_item(rng, 40))
    batch.extend(make_item(rng, n) for n in range(41, 45))
    score_items(batch, task, NOW, SETTINGS)
    batch.remove_ids({f"item_{n:04d}" for n in (1, 2, 17, 30, 41)})
    for row in (0, 5, 9):
        mutate(rng, batch[row])
    batch.refresh_rows([0, 5])
    batch.refresh(batch[9])
    score_items(batch, {"b"}, NOW, SETTINGS)
    return batch, task


# float.hex of each score, computed by the pre-change code (commit 52e1e9d: columns and index
# rebuilt from scratch) on the same final items
GOLDEN_SCORES = [
    "0x1.0000000000000p+0",
    "0x1.2bb7cc9877921p-1",
    "0x1.b98d0ea6c8a89p-2",
    "0x1.cea8351157867p-2",
    "0x1.eda838ce78951p-2",
    "0x1.0000000000000p+0",
    "0x1.dcf9ee0aca7e4p-1",
    "0x1.1f383ab1da0d4p-1",
    "0x1.bcdc280d57380p-2",
    "0x1.0000000000000p+0",
    "0x1.f2106f038753ep-2",
    "0x1.a173b70ff677bp-1",
    "0x1.339870c884b59p-1",
    "0x1.9e7e3990d0238p-2",
    "0x1.4712a6ff1ae14p-2",
    "0x1.2a69b57fc6d93p-2",
    "0x1.b7bbea5ceceb6p-2",
    "0x1.7d86721c09f3ep-1",
    "0x1.8d952528d571fp-1",
    "0x1.7a9a9e69ff31ep-2",
    "0x1.cccccccccccccp-2",
    "0x1.402291ef9ace3p-1",
    "0x1.3acd078ac5bf8p-1",
    "0x1.fadfa14ceb6afp-3",
    "0x1.0145de9e8a11fp-1",
    "0x1.b7305d0adba8fp-2",
    "0x1.c661db4e98200p-1",
    "0x1.35b50fe3a34a4p-1",
    "0x1.02a39c4c447dep-1",
    "0x1.3e2f001a502a8p-1",
    "0x1.944082677feefp-2",
    "0x1.2bb0dfb6990bcp-1",
    "0x1.ff2e748324adcp-2",
    "0x1.7fb9a1554648cp-2",
    "0x1.0000000000000p+0",
    "0x1.58d88f1c5a056p-1",
    "0x1.3737d102c0163p-1",
    "0x1.d70a3d70a3d70p-2",
    "0x1.2733f21088c35p-1",
    "0x1.f63348513a833p-2",
]
# its eviction plan on that batch: budget = half the tokens used, threshold 0.8, step 30
GOLDEN_TO_WARM = [
    "item_0006",
    "item_0012",
    "item_0015",
    "item_0027",
    "item_0034",
    "item_0035",
    "item_0040",
    "item_0004",
    "item_0036",
    "item_0039",
    "item_0005",
    "item_0009",
    "item_0016",
    "item_0022",
    "item_0024",
    "item_0026",
    "item_0031",
    "item_0038",
    "item_0042",
    "item_0044",
]
GOLDEN_REASONS = {
    **dict.fromkeys(
        ["item_0006", "item_0012", "item_0015", "item_0027", "item_0034", "item_0035", "item_0040"],
        "low score",
    ),
    **dict.fromkeys(["item_0004", "item_0036", "item_0039"], "over budget"),
    **dict.fromkeys(
        [
            "item_0005",
            "item_0009",
            "item_0016",
            "item_0022",
            "item_0024",
            "item_0026",
            "item_0031",
            "item_0038",
            "item_0042",
            "item_0044",
        ],
        "over budget: protected",
    ),
}


def test_scores_and_plan_equal_the_full_rebuild_implementation() -> None:
    batch, task = fixed_scenario()
    scores = score_items(batch, task, NOW, SETTINGS)
    assert [float(s).hex() for s in scores] == GOLDEN_SCORES
    used = int(sum(i.tokens for i in batch))
    plan = plan_eviction(
        batch,
        scores,
        used // 2,
        used,
        settings=SETTINGS,
        threshold=0.8,
        current_step=30,
        now=NOW,
        pointer_tokens=5,
    )
    assert plan.to_warm == GOLDEN_TO_WARM
    assert plan.reasons == GOLDEN_REASONS
