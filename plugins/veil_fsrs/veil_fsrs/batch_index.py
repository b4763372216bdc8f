"""Per-batch arrays the scorer and the eviction policy need beyond ``ItemBatch.columns()``.

Built once per batch in O(n) Python (like ``columns()``), then reused by every score and
eviction pass on the same batch: kind codes, turn / tool-result flags, tool-call groups, the
item ids, and an inverted index of the tags so Jaccard relevance is a few numpy operations.

The cache is keyed by the identity of the batch's column dict: ``ItemBatch`` builds a new dict
whenever it is changed (or :meth:`~veil.core.items.ItemBatch.invalidate` is called), so a stale
index is never used. A handful of recent batches are kept (the core scores and evicts the same
batch, one after the other).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from functools import cached_property
from itertools import chain, count
from typing import Any

import numpy as np

from veil.core.items import ItemBatch
from veil.core.types import ITEM_KINDS, ContextItem

KIND_CODES: dict[str, int] = {kind: code for code, kind in enumerate(ITEM_KINDS)}
"""Kind -> small integer (position in ``ITEM_KINDS``); unknown kinds get -1."""
TURN_SOURCES = frozenset({"user", "assistant"})
"""Item sources that are conversation turns (DESIGN.md: turns score by kind)."""
TOOL_SOURCES = frozenset({"tool_call", "tool_result"})

_CACHE_SIZE = 4
_cache: OrderedDict[int, BatchIndex] = OrderedDict()
_cache_lock = threading.Lock()


def as_batch(items: Sequence[ContextItem] | Iterable[ContextItem]) -> ItemBatch:
    """Return ``items`` itself when it is an :class:`ItemBatch`, else a new batch of them."""
    return items if isinstance(items, ItemBatch) else ItemBatch(items)


class BatchIndex:
    """Derived, cached arrays of one batch (all aligned with the batch, length n).

    Attributes:
        items: the batch; cols: its ``columns()`` dict (identity = cache key).
    """

    def __init__(self, items: ItemBatch, cols: dict[str, Any]) -> None:
        self.items = items
        self.cols = cols

    @cached_property
    def kind_code(self) -> np.ndarray:
        """int8 code of each item's kind (:data:`KIND_CODES`; -1 for unknown kinds)."""
        get = KIND_CODES.get
        return np.fromiter(
            (get(k, -1) for k in self.cols["kind"]), dtype=np.int8, count=len(self.items)
        )

    @cached_property
    def is_turn(self) -> np.ndarray:
        """bool: the item is a user or assistant turn."""
        return np.fromiter(
            (i.source in TURN_SOURCES for i in self.items), dtype=bool, count=len(self.items)
        )

    @cached_property
    def is_tool(self) -> np.ndarray:
        """bool: the item is a tool call or a tool result."""
        return np.fromiter(
            (i.source in TOOL_SOURCES for i in self.items), dtype=bool, count=len(self.items)
        )

    @cached_property
    def ids(self) -> list[str]:
        """Item ids, in batch order."""
        return [i.id for i in self.items]

    @cached_property
    def id_set(self) -> frozenset[str]:
        """The set of item ids (membership tests for evicted items coming back)."""
        return frozenset(self.ids)

    @cached_property
    def group(self) -> np.ndarray:
        """int64 group number per item: items sharing a ``tool_call_id`` share a group (a call
        and its result leave together); an item without one is a group of its own. Groups are
        numbered 0..n_groups-1 in order of first appearance."""
        numbers: dict[str, int] = {}
        out = np.empty(len(self.items), dtype=np.int64)
        next_number = 0
        for pos, item in enumerate(self.items):
            key = item.tool_call_id
            if key is None:
                out[pos] = next_number
                next_number += 1
            else:
                number = numbers.get(key)
                if number is None:
                    number = numbers[key] = next_number
                    next_number += 1
                out[pos] = number
        return out

    @cached_property
    def n_groups(self) -> int:
        """Number of groups (0 for an empty batch)."""
        return int(self.group.max()) + 1 if len(self.items) else 0

    def memo(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """``build()``'s result, computed once per batch and ``key`` (derived arrays that depend
        on settings as well as on the batch)."""
        memo = self.__dict__.setdefault("_memo", {})
        if key not in memo:
            memo[key] = build()
        return memo[key]

    def kind_mask(self, kind: str) -> np.ndarray:
        """bool: the item's kind is ``kind`` (cached per kind)."""
        masks = self.__dict__.setdefault("_kind_masks", {})
        mask = masks.get(kind)
        if mask is None:
            mask = masks[kind] = self.kind_code == KIND_CODES.get(kind, -2)
        return mask

    def modifiers(
        self, procedural_factor: float, by_hand_factor: float, pinned_boost: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(factor, boost)`` arrays: factor = procedural_factor for kind procedural x
        by_hand_factor when loaded by hand (else 1); boost = pinned_boost when pinned (else 0).
        Cached per batch and values (settings rarely change between calls)."""
        key = (procedural_factor, by_hand_factor, pinned_boost)
        cached = self.__dict__.get("_modifiers")
        if cached is None or cached[0] != key:
            factor = np.where(self.kind_mask("procedural"), procedural_factor, 1.0)
            factor = np.where(self.cols["loaded_by_hand"], factor * by_hand_factor, factor)
            boost = np.where(self.cols["pinned"], pinned_boost, 0.0)
            cached = self.__dict__["_modifiers"] = (key, factor, boost)
        return cached[1], cached[2]

    @cached_property
    def tag_postings(self) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
        """Inverted tag index: ``(vocabulary, starts, rows, sizes)``.

        The items holding the tag numbered ``c`` are ``rows[starts[c]:starts[c+1]]`` (int64,
        each position once); ``sizes[i]`` is the number of distinct tags of item i (float64).
        """
        tag_sets = self.cols["tags"]
        sizes = np.fromiter(map(len, tag_sets), dtype=np.int64, count=len(tag_sets))
        numbering: defaultdict[str, int] = defaultdict(count().__next__)  # tag -> 0, 1, 2...
        codes = np.fromiter(
            map(numbering.__getitem__, chain.from_iterable(tag_sets)),
            dtype=np.int64,
            count=int(sizes.sum()),
        )
        # Any order within a posting list will do; small codes sort fastest (radix) as uint16.
        vocab = dict(numbering)  # a plain dict: lookups must not add tags
        small = len(vocab) <= np.iinfo(np.uint16).max
        order = np.argsort(codes.astype(np.uint16), kind="stable") if small else np.argsort(codes)
        rows = np.repeat(np.arange(len(tag_sets), dtype=np.int64), sizes)[order]
        starts = np.searchsorted(codes[order], np.arange(len(vocab) + 1))
        return vocab, starts, rows, sizes.astype(np.float64)

    def jaccard(self, task_tags: Iterable[str]) -> np.ndarray:
        """Jaccard similarity of each item's tags with ``task_tags``, float64 in [0, 1].

        |A & T| / |A | T|, and 0 when both sets are empty. Vectorised: for each task tag, one
        numpy increment over the items holding it (inverted index), no loop per item.
        """
        task = frozenset(task_tags)
        n = len(self.items)
        if not task or n == 0:
            return np.zeros(n, dtype=np.float64)
        vocab, starts, rows, sizes = self.tag_postings
        inter = np.zeros(n, dtype=np.float64)
        for tag in task:
            code = vocab.get(tag)
            if code is not None:  # positions are distinct within one posting list
                inter[rows[starts[code] : starts[code + 1]]] += 1.0
        inter /= sizes + (len(task) - inter)  # the union is >= len(task) > 0
        return inter


def index_for(items: ItemBatch) -> BatchIndex:
    """Return the cached :class:`BatchIndex` of ``items`` (built on first use)."""
    cols = items.columns()
    key = id(cols)
    with _cache_lock:
        index = _cache.get(key)
        if index is not None and index.cols is cols:
            _cache.move_to_end(key)
            return index
        index = BatchIndex(items, cols)
        _cache[key] = index  # holding ``cols`` keeps its id from being reused while cached
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
        return index
