"""Per-batch arrays the scorer and the eviction policy need beyond ``ItemBatch.columns()``.

Kind codes, turn / tool-result flags, tool-call groups and an inverted index of the tags (so
Jaccard relevance is a few numpy operations) are kept per batch and updated incrementally: the
live set changes by one or two items per tool call, and rebuilding these in Python cost tens of
milliseconds at 10k items.

How: an :class:`~veil.core.prompt.items.ItemBatch` counts its changes (``version``) and keeps a short
log of them (``changes_since``: appends, removals with their keep mask, rows refreshed in
place). The state of this module lives in the batch's ``derived`` dict and replays that log on
the next :func:`index_for`; when the log cannot be replayed (another kind of mutation,
``invalidate()``, a log that no longer reaches back) it is rebuilt from scratch.

:func:`index_for` returns a :class:`BatchIndex` per batch version: its arrays are that version's
snapshot and its :meth:`BatchIndex.memo` caches (settings-dependent derived arrays) are dropped
with it when the batch changes. Costs: O(appended) Python per appended item, O(n) numpy per
removal, O(n) numpy per new version for the memoised arrays (a few microseconds each at 10k).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence, Set
from itertools import chain
from typing import Any

import numpy as np

from veil import ITEM_KINDS, BatchChange, ContextItem, ItemBatch

KIND_CODES: dict[str, int] = {kind: code for code, kind in enumerate(ITEM_KINDS)}
"""Kind -> small integer (position in ``ITEM_KINDS``); unknown kinds get -1."""
TURN_SOURCES = frozenset({"user", "assistant"})
"""Item sources that are conversation turns (DESIGN.md: turns score by kind)."""
TOOL_SOURCES = frozenset({"tool_call", "tool_result"})

STATE_KEY = "veil_fsrs.index"
"""Key of this module's state in ``ItemBatch.derived``."""
_MIN_CAPACITY = 16


def as_batch(items: Sequence[ContextItem] | Iterable[ContextItem]) -> ItemBatch:
    """Return ``items`` itself when it is an :class:`ItemBatch`, else a new batch of them."""
    return items if isinstance(items, ItemBatch) else ItemBatch(items)


def _grown(array: np.ndarray, used: int, needed: int) -> np.ndarray:
    """``array`` with room for ``needed`` rows (doubling), its first ``used`` rows kept."""
    if needed <= len(array):
        return array
    fresh = np.empty(max(needed, 2 * len(array), _MIN_CAPACITY), dtype=array.dtype)
    fresh[:used] = array[:used]
    return fresh


def _compacted(array: np.ndarray, used: int, keep: np.ndarray) -> np.ndarray:
    """A new array holding ``array[:used][keep]`` with room for a few appends (old views of
    ``array`` stay valid)."""
    kept = int(np.count_nonzero(keep))
    fresh = np.empty(kept + max(_MIN_CAPACITY, kept // 8), dtype=array.dtype)
    fresh[:kept] = array[:used][keep]
    return fresh


def _intersection_counts(
    postings: tuple[np.ndarray, np.ndarray, np.ndarray], vocab: dict[str, int], task: frozenset
) -> np.ndarray:
    """|tags(i) & task| for every row i (float64) from ``(post_code, post_uid, uid)``.

    ``uid`` is the rows' append numbers (ascending); a posting whose uid is no longer a row's
    (its item was removed) counts for nothing.
    """
    post_code, post_uid, uid = postings
    n = len(uid)
    codes = [code for tag in task if (code := vocab.get(tag)) is not None]
    if not codes or n == 0:
        return np.zeros(n, dtype=np.float64)
    is_task = np.zeros(len(vocab), dtype=bool)
    is_task[codes] = True
    hit_uid = post_uid[is_task[post_code]]
    rows = np.minimum(np.searchsorted(uid, hit_uid), n - 1)
    rows = rows[uid[rows] == hit_uid]
    # each (tag, item) pair is posted once, so the count is the size of the intersection
    return np.bincount(rows, minlength=n).astype(np.float64)


class _IndexState:
    """The incrementally maintained arrays of one batch (length ``n``, spare capacity after).

    Per row: ``kind_code`` (int8), ``is_turn`` / ``is_tool`` (bool), ``group`` (int64, dense,
    numbered by first appearance), ``call`` (int64 key of the row's tool_call_id, -1 for none),
    ``sizes`` (float64: distinct tags), ``uid`` (int64 append number, ascending along the
    batch since appends go to the end and removal keeps the order).

    Groups: a tool_call_id keeps its key while any row holds it (``key_of_call``), and
    ``group_of_key`` maps keys to group numbers (-1: no row left), so renumbering the groups
    after a removal is a numpy gather, not a dict rebuild.

    Tags: postings ``post_code`` (tag number in ``vocab``) and ``post_uid`` (the item's uid), one
    per (distinct tag, item), in no particular order. A removal leaves its items' postings in
    place (they match no row any more: O(1)) and they are purged once they are half of all;
    a refresh drops the refreshed items' postings and posts their current tags. ``inter``
    caches the intersection counts with the last task's tags (``task``), kept in step with
    every change, so a new batch version with the same task costs O(changed items).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.version = -1  # never synced: the first sync rebuilds
        self.current: BatchIndex | None = None
        self._clear()

    def _clear(self) -> None:
        self.n = 0
        self.arrays: dict[str, np.ndarray] = {
            "kind_code": np.empty(_MIN_CAPACITY, dtype=np.int8),
            "is_turn": np.empty(_MIN_CAPACITY, dtype=bool),
            "is_tool": np.empty(_MIN_CAPACITY, dtype=bool),
            "group": np.empty(_MIN_CAPACITY, dtype=np.int64),
            "call": np.empty(_MIN_CAPACITY, dtype=np.int64),
            "sizes": np.empty(_MIN_CAPACITY, dtype=np.float64),
            "uid": np.empty(_MIN_CAPACITY, dtype=np.int64),
        }
        self.next_uid = 0
        self.key_of_call: dict[str, int] = {}
        self.group_of_key = np.empty(_MIN_CAPACITY, dtype=np.int64)
        self.n_keys = 0
        self.n_groups = 0
        self.vocab: dict[str, int] = {}
        self.n_post = 0
        self.n_dead = 0  # postings of removed items
        self.post_code = np.empty(_MIN_CAPACITY, dtype=np.int64)
        self.post_uid = np.empty(_MIN_CAPACITY, dtype=np.int64)
        self.task: frozenset[str] | None = None
        self.inter = np.empty(_MIN_CAPACITY, dtype=np.float64)

    def postings(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(post_code, post_uid, uid)`` views of the current version."""
        n_post = self.n_post
        return self.post_code[:n_post], self.post_uid[:n_post], self.arrays["uid"][: self.n]

    # -- following the batch ----------------------------------------------------------------

    def index(self, items: ItemBatch) -> BatchIndex:
        """Bring the state up to ``items.version`` and return that version's index."""
        with self.lock:
            if self.version != items.version:
                changes = items.changes_since(self.version) if self.version >= 0 else None
                if changes is None or not self._replay(changes):
                    self._rebuild(items)
                self.version = items.version
            current = self.current
            if current is None or current.version != self.version or current.items is not items:
                current = self.current = BatchIndex(items, self)
            return current

    def _rebuild(self, items: ItemBatch) -> None:
        self._clear()
        self._append(0, items)

    def _replay(self, changes: list[BatchChange]) -> bool:
        """Apply ``changes``; False when one cannot be followed (the caller rebuilds)."""
        for change in changes:
            if change.kind == "append":
                if change.start != self.n:
                    return False
                self._append(change.start, change.items)
            elif change.kind == "remove":
                if change.size != self.n:
                    return False
                self._remove(change.keep, change.items)
            else:
                assert change.rows is not None
                if not self._refresh(change.rows, change.items):
                    return False
        return True

    def _append(self, start: int, items: Sequence[ContextItem]) -> None:
        count = len(items)
        stop = start + count
        a = self.arrays
        for name, array in a.items():
            a[name] = _grown(array, self.n, stop)
        get = KIND_CODES.get
        a["kind_code"][start:stop] = np.fromiter(
            (get(i.kind, -1) for i in items), dtype=np.int8, count=count
        )
        a["is_turn"][start:stop] = np.fromiter(
            (i.source in TURN_SOURCES for i in items), dtype=bool, count=count
        )
        a["is_tool"][start:stop] = np.fromiter(
            (i.source in TOOL_SOURCES for i in items), dtype=bool, count=count
        )
        uids = np.arange(self.next_uid, self.next_uid + count, dtype=np.int64)
        a["uid"][start:stop] = uids
        self.next_uid += count
        group, call, keys = a["group"], a["call"], self.key_of_call
        for pos, item in enumerate(items, start):
            call_id = item.tool_call_id
            if call_id is None:  # a group of its own
                call[pos] = -1
                group[pos] = self.n_groups
                self.n_groups += 1
                continue
            key = keys.get(call_id)
            if key is None:
                key = keys[call_id] = self.n_keys
                self.group_of_key = _grown(self.group_of_key, self.n_keys, self.n_keys + 1)
                self.group_of_key[key] = -1
                self.n_keys += 1
            number = int(self.group_of_key[key])
            if number < 0:  # the call's first row in the batch: a new group
                number = self.group_of_key[key] = self.n_groups
                self.n_groups += 1
            call[pos] = key
            group[pos] = number
        tag_sets = [frozenset(i.tags) for i in items]
        sizes = np.fromiter(map(len, tag_sets), dtype=np.int64, count=count)
        a["sizes"][start:stop] = sizes
        self._add_postings(uids, tag_sets, sizes)
        self.n = stop
        if self.task is not None:  # keep the cached intersection counts in step
            self.inter = _grown(self.inter, start, stop)
            task = self.task
            self.inter[start:stop] = np.fromiter(
                (len(tags & task) for tags in tag_sets), dtype=np.float64, count=count
            )

    def _add_postings(self, uids: np.ndarray, tag_sets: list[frozenset], sizes: np.ndarray) -> None:
        total = int(sizes.sum())
        if not total:
            return
        vocab = self.vocab
        new_tags = {t for tags in tag_sets for t in tags if t not in vocab}
        for tag in new_tags:
            vocab[tag] = len(vocab)
        codes = np.fromiter(
            map(vocab.__getitem__, chain.from_iterable(tag_sets)), dtype=np.int64, count=total
        )
        stop = self.n_post + total
        self.post_code = _grown(self.post_code, self.n_post, stop)
        self.post_uid = _grown(self.post_uid, self.n_post, stop)
        self.post_code[self.n_post : stop] = codes
        self.post_uid[self.n_post : stop] = np.repeat(uids, sizes)
        self.n_post = stop

    def _keep_postings(self, alive: np.ndarray) -> None:
        """Keep only the postings where ``alive`` (new arrays: old views stay valid)."""
        self.post_code = _compacted(self.post_code, self.n_post, alive)
        self.post_uid = _compacted(self.post_uid, self.n_post, alive)
        self.n_post = int(np.count_nonzero(alive))

    def _remove(self, keep: np.ndarray, removed: Sequence[ContextItem]) -> None:
        n = self.n
        kept = int(np.count_nonzero(keep))
        a = self.arrays
        old_group = a["group"][:n]
        self.n_dead += int(a["sizes"][:n][~keep].sum())
        for name, array in a.items():
            a[name] = _compacted(array, n, keep)
        # Renumber the groups by first appearance among the rows left (as a rebuild would).
        remap = np.full(self.n_groups + 1, -1, dtype=np.int64)  # slot -1: gone stays gone
        if kept:
            numbers, first = np.unique(old_group[keep], return_index=True)
            remap[numbers[np.argsort(first, kind="stable")]] = np.arange(len(numbers))
            a["group"][:kept] = remap[a["group"][:kept]]
            self.n_groups = len(numbers)
        else:
            self.n_groups = 0
        keys = self.group_of_key[: self.n_keys]
        keys[:] = remap[keys]
        for item in removed:  # forget the calls no row holds any more
            key = self.key_of_call.get(item.tool_call_id) if item.tool_call_id is not None else None
            if key is not None and keys[key] < 0:
                del self.key_of_call[item.tool_call_id]
        if self.n_keys > 2 * len(self.key_of_call) + 1024:  # renumber the keys now and then
            self._renumber_keys(kept)
        if self.task is not None:
            self.inter = _compacted(self.inter, n, keep)
        self.n = kept
        if 2 * self.n_dead > self.n_post:  # purge the removed items' postings now and then
            post_code, post_uid, uid = self.postings()
            rows = np.minimum(np.searchsorted(uid, post_uid), max(kept - 1, 0))
            self._keep_postings(uid[rows] == post_uid if kept else np.zeros(len(post_uid), bool))
            self.n_dead = 0

    def _renumber_keys(self, n: int) -> None:
        """Number the live calls' keys 0..k-1 again (keys of calls that left are garbage)."""
        calls = list(self.key_of_call)
        old = np.fromiter(self.key_of_call.values(), dtype=np.int64, count=len(calls))
        new_of_old = np.full(self.n_keys, -1, dtype=np.int64)
        new_of_old[old] = np.arange(len(calls))
        self.group_of_key = _grown(self.group_of_key[old], len(calls), len(calls) + 1)
        self.key_of_call = dict(zip(calls, range(len(calls)), strict=True))
        self.n_keys = len(calls)
        call = self.arrays["call"][:n]
        has_call = call >= 0
        call[has_call] = new_of_old[call[has_call]]

    def _refresh(self, rows: np.ndarray, items: Sequence[ContextItem]) -> bool:
        """Rewrite ``rows``; False when a tool_call_id changed (groups need a rebuild)."""
        a = self.arrays
        calls, keys = a["call"], self.key_of_call
        for row, item in zip(rows.tolist(), items, strict=True):
            call_id = item.tool_call_id
            if calls[row] != (-1 if call_id is None else keys.get(call_id, -2)):
                return False
        get = KIND_CODES.get
        count = len(items)
        a["kind_code"][rows] = np.fromiter(
            (get(i.kind, -1) for i in items), dtype=np.int8, count=count
        )
        a["is_turn"][rows] = np.fromiter(
            (i.source in TURN_SOURCES for i in items), dtype=bool, count=count
        )
        a["is_tool"][rows] = np.fromiter(
            (i.source in TOOL_SOURCES for i in items), dtype=bool, count=count
        )
        tag_sets = [frozenset(i.tags) for i in items]
        sizes = np.fromiter(map(len, tag_sets), dtype=np.int64, count=count)
        a["sizes"][rows] = sizes
        # The refreshed items' postings: drop the old ones, post the current tags.
        uids = a["uid"][rows]
        self._keep_postings(~np.isin(self.post_uid[: self.n_post], uids))
        self._add_postings(uids, tag_sets, sizes)
        if self.task is not None:
            task = self.task
            self.inter[rows] = np.fromiter(
                (len(tags & task) for tags in tag_sets), dtype=np.float64, count=count
            )
        return True

    def intersection_counts(self, task: frozenset[str]) -> np.ndarray:
        """|tags(i) & task| per row (float64, a new array), cached for the last task."""
        with self.lock:
            if self.task != task:
                counts = _intersection_counts(self.postings(), self.vocab, task)
                self.inter = _grown(counts, self.n, self.n + 1)
                self.task = task
            return self.inter[: self.n].copy()


class _IdView(Set):
    """Read-only set-like view of a batch's ids (membership in O(log n), no copy)."""

    def __init__(self, items: ItemBatch, ids: np.ndarray) -> None:
        self._items = items
        self._ids = ids

    def __contains__(self, item_id: object) -> bool:
        return isinstance(item_id, str) and self._items.has_id(item_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids.tolist())

    def __len__(self) -> int:
        return len(self._ids)


class BatchIndex:
    """Derived arrays of one batch version (all aligned with the batch, length n).

    Attributes:
        items: the batch; cols: its ``columns()`` dict of that version; version: that version.
        kind_code: int8 code of each item's kind (:data:`KIND_CODES`; -1 for unknown kinds).
        is_turn: bool, the item is a user or assistant turn.
        is_tool: bool, the item is a tool call or a tool result.
        group: int64 group number per item: items sharing a ``tool_call_id`` share a group (a
            call and its result leave together); an item without one is a group of its own.
            Groups are numbered 0..n_groups-1 in order of first appearance.
        n_groups: number of groups (0 for an empty batch).
        ids: item ids in batch order (object array).
        id_set: set-like view of the ids (membership tests; follows the batch).

    Treat the arrays as read-only. Build with :func:`index_for`, not directly.
    """

    def __init__(self, items: ItemBatch, state: _IndexState) -> None:
        n = state.n
        self.items = items
        self.cols = items.columns()
        self.version = state.version
        self._state = state
        a = state.arrays
        self.kind_code: np.ndarray = a["kind_code"][:n]
        self.is_turn: np.ndarray = a["is_turn"][:n]
        self.is_tool: np.ndarray = a["is_tool"][:n]
        self.group: np.ndarray = a["group"][:n]
        self.n_groups: int = state.n_groups
        self.ids: np.ndarray = self.cols["id"]
        self.id_set = _IdView(items, self.ids)
        self._sizes = a["sizes"][:n]
        self._postings = state.postings()
        self._memo: dict[Hashable, Any] = {}
        self._kind_masks: dict[str, np.ndarray] = {}
        self._modifiers: tuple[Any, np.ndarray, np.ndarray] | None = None

    def memo(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """``build()``'s result, computed once per batch version and ``key`` (derived arrays
        that depend on settings as well as on the batch)."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def kind_mask(self, kind: str) -> np.ndarray:
        """bool: the item's kind is ``kind`` (cached per kind)."""
        mask = self._kind_masks.get(kind)
        if mask is None:
            mask = self._kind_masks[kind] = self.kind_code == KIND_CODES.get(kind, -2)
        return mask

    def modifiers(
        self, procedural_factor: float, by_hand_factor: float, pinned_boost: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(factor, boost)`` arrays: factor = procedural_factor for kind procedural x
        by_hand_factor when loaded by hand (else 1); boost = pinned_boost when pinned (else 0).
        Cached per batch version and values (settings rarely change between calls)."""
        key = (procedural_factor, by_hand_factor, pinned_boost)
        cached = self._modifiers
        if cached is None or cached[0] != key:
            factor = np.where(self.kind_mask("procedural"), procedural_factor, 1.0)
            factor = np.where(self.cols["loaded_by_hand"], factor * by_hand_factor, factor)
            boost = np.where(self.cols["pinned"], pinned_boost, 0.0)
            cached = self._modifiers = (key, factor, boost)
        return cached[1], cached[2]

    @property
    def tag_postings(self) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
        """Inverted tag index in CSR form: ``(vocabulary, starts, rows, sizes)`` (built on each
        call, O(P log P) for P (tag, item) pairs; :meth:`jaccard` does not need it).

        The items holding the tag numbered ``c`` are ``rows[starts[c]:starts[c+1]]`` (int64,
        each position once); ``sizes[i]`` is the number of distinct tags of item i (float64).
        The vocabulary may hold tags no current item has (their lists are empty).
        """
        codes, post_uid, uid = self._postings
        if len(uid):  # drop the postings of removed items; uids -> rows
            rows = np.minimum(np.searchsorted(uid, post_uid), len(uid) - 1)
            alive = uid[rows] == post_uid
            codes, rows = codes[alive], rows[alive]
        else:
            codes = rows = np.zeros(0, dtype=np.int64)
        vocab = dict(self._state.vocab)
        order = np.argsort(codes, kind="stable")
        starts = np.searchsorted(codes[order], np.arange(len(vocab) + 1))
        return vocab, starts, rows[order], self._sizes.copy()

    def jaccard(self, task_tags: Iterable[str]) -> np.ndarray:
        """Jaccard similarity of each item's tags with ``task_tags``, float64 in [0, 1].

        |A & T| / |A | T|, and 0 when both sets are empty. The intersection counts come from
        the postings (one gather and one bincount) and are kept for the same task tags, so
        while the task does not change each new version costs O(changed items) plus one
        division over the batch.
        """
        task = frozenset(task_tags)
        n = len(self.kind_code)
        if not task or n == 0:
            return np.zeros(n, dtype=np.float64)
        state = self._state
        if state.version == self.version:
            inter = state.intersection_counts(task)
        else:  # an older version than the state's: count from this version's postings
            inter = _intersection_counts(self._postings, state.vocab, task)
        inter /= self._sizes + (len(task) - inter)  # the union is >= len(task) > 0
        return inter


def index_for(items: ItemBatch) -> BatchIndex:
    """Return the :class:`BatchIndex` of the current version of ``items``, bringing the
    batch's incremental state (kept in ``items.derived``) up to date first."""
    state = items.derived.get(STATE_KEY)
    if state is None:
        state = items.derived.setdefault(STATE_KEY, _IndexState())
    return state.index(items)
