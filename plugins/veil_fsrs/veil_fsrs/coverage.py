"""Coverage-aware eviction order: keep the items that bring names the prompt does not hold yet.

A coding agent's next action mostly reuses names it has seen: file paths, symbols, line and
issue numbers (the identifier shape of DESIGN.md "Measures", :func:`veil.core.prompt.tags.
identifier_tokens`). Two items that hold the same names are worth one; an old turn that restates
what a recent result shows adds nothing. So among the groups eviction may pick, veil keeps
greedily by *new identifiers per token*, the classic greedy for budgeted maximum coverage
(Khuller, Moss and Naor, "The budgeted maximum coverage problem", IPL 1999; the same idea as
maximal marginal relevance, Carbonell and Goldstein, SIGIR 1998), weighted by the scorer's
retention so the five FSRS signals and the turn weights still count:

    value(g) = sum of m(x) ** p over x in ids(g) - covered
               / (freed tokens(g) + POINTER_ALLOWANCE) x (0.5 + retention(g))

where ``m(x)`` is how many of the session's items mention identifier ``x`` and ``p`` is
``context.mentionPower`` (2; with 0, or without counts, every new name counts 1). The names a
session keeps coming back to (the file it is fixing, the function under test) are the ones its
next action uses: on the recorded sessions of ``veil replay`` this weighting cut the misses by a
fifth (442 -> 354 at an 8,000-token budget; bench/RESULTS.md). Weighted coverage is still
submodular, so the lazy greedy holds.

``covered`` starts as the identifiers of everything that stays regardless (protected, pinned,
corrections, intents) and grows with each group kept. Values only fall as ``covered`` grows
(submodular), so a lazy greedy with a heap re-evaluates a group only when it reaches the top.
The eviction order is the keep order reversed: groups that add no new name leave first (lowest
retention first among them), then the least valuable of the rest.

Identifiers of an item are computed once from its content: by the core at capture
(``ContextItem.identifiers``), or on first use for an item read back from the store
(:func:`veil.core.prompt.tags.item_identifiers`, re-exported here).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Set

import numpy as np

from veil import ItemBatch, item_identifiers

__all__ = [
    "POINTER_ALLOWANCE",
    "Weigher",
    "eviction_order",
    "group_identifiers",
    "item_identifiers",
    "keep_order",
    "mention_weigher",
]

POINTER_ALLOWANCE = 20.0
"""Tokens added to a group's size in its value (about one pointer stub), so tiny items do not
win by size alone."""


Weigher = Callable[[Set[str]], float]
"""The value of a set of new identifiers (see :func:`mention_weigher`)."""


def mention_weigher(mentions: Mapping[str, int] | None, power: float) -> Weigher:
    """``names -> sum of max(mentions[x], 1) ** power`` (each weight computed once), or plain
    ``len`` when ``mentions`` is empty or ``power`` is 0.

    Args:
        mentions: identifier -> number of the session's items that mention it.
        power: the exponent (``context.mentionPower``), >= 0.
    """
    if not mentions or power == 0:
        return len
    cache: dict[str, float] = {}

    def weigh(names: Set[str]) -> float:
        total = 0.0
        for name in names:
            weight = cache.get(name)
            if weight is None:
                weight = cache[name] = float(max(mentions.get(name, 0), 1)) ** power
            total += weight
        return total

    return weigh


def eviction_order(
    items: ItemBatch,
    group: np.ndarray,
    candidates: np.ndarray,
    staying: np.ndarray,
    freed: np.ndarray,
    retention: np.ndarray,
    weigh: Weigher = len,
) -> np.ndarray:
    """Candidate groups in the order they should leave (first = evict first).

    Args:
        items: the live items.
        group: group number of each item.
        candidates: bool per group: eviction may pick it.
        staying: bool per item: stays in the prompt whatever happens (its identifiers are
            covered from the start).
        freed: tokens each group frees when evicted.
        retention: per group, in [0, 1] (1 - the group's eviction score).
        weigh: the value of a set of new identifiers (:func:`mention_weigher`; default: how
            many there are).

    Returns:
        int array of the candidate group numbers, evict-first order.
    """
    picks = np.flatnonzero(candidates)
    if len(picks) == 0:
        return picks
    covered: set[str] = set()
    for pos in np.flatnonzero(staying).tolist():
        covered |= item_identifiers(items[pos])
    members = group_identifiers(items, group, picks)
    keep, spent = keep_order(members, freed, retention, covered, weigh=weigh)
    # spent groups leave first (lowest retention, then oldest), then the kept order reversed
    spent.sort(key=lambda g: (float(retention[g]), g))
    return np.array(spent + keep[::-1], dtype=np.int64)


def group_identifiers(
    items: ItemBatch, group: np.ndarray, picks: np.ndarray
) -> dict[int, set[str]]:
    """Identifiers of each group in ``picks`` (the union over its members)."""
    members: dict[int, set[str]] = {int(g): set() for g in picks.tolist()}
    for pos, g in enumerate(group.tolist()):
        bucket = members.get(g)
        if bucket is not None:
            bucket |= item_identifiers(items[pos])
    return members


def keep_order(
    members: dict[int, set[str]],
    sizes: np.ndarray,
    retention: np.ndarray,
    covered: set[str],
    room: float | None = None,
    weigh: Weigher = len,
) -> tuple[list[int], list[int]]:
    """The lazy greedy for budgeted maximum coverage (see the module docstring).

    Args:
        members: group number -> its identifiers (only the groups to rank).
        sizes: tokens per group number (what keeping it costs).
        retention: per group number, in [0, 1].
        covered: identifiers already in the prompt; grows with each kept group (changed in
            place).
        room: tokens the kept groups may take in all; a group that no longer fits is passed
            over (neither kept nor spent) and the greedy goes on with smaller ones. None: no
            limit.
        weigh: the value of a set of new identifiers (:func:`mention_weigher`; default: how
            many there are).

    Returns:
        ``(keep, spent)``: the groups in the order the greedy keeps them (most new identifiers
        per token first), and the groups that add no new identifier once their turn comes.
    """
    left = float("inf") if room is None else float(room)

    def value(g: int) -> float:
        novel = weigh(members[g] - covered) if members[g] else 0
        return novel / (float(sizes[g]) + POINTER_ALLOWANCE) * (0.5 + float(retention[g]))

    # max-heap on value; ties keep the newer group (higher number) first
    heap = [(-value(g), -g) for g in members]
    heapq.heapify(heap)
    keep: list[int] = []
    spent: list[int] = []
    while heap:
        neg, neg_g = heapq.heappop(heap)
        g = -neg_g
        current = value(g)
        if current <= 0.0:
            spent.append(g)
            continue
        if heap and current < -heap[0][0] - 1e-15:
            heapq.heappush(heap, (-current, neg_g))  # stale value: re-rank it
            continue
        if sizes[g] > left:
            continue  # does not fit any more
        left -= float(sizes[g])
        keep.append(g)
        covered |= members[g]
    return keep, spent
