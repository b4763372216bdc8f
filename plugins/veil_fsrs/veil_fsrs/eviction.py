"""Three-stage eviction policy (seed 002; DESIGN.md "Context layer" and "Protection vs budget").

Terms (all sizes in tokens, times in seconds, steps as ``ContextItem.step``):

* **Group**: items sharing a ``tool_call_id`` (a call and its result); an item without one is a
  group of its own. A group leaves whole or not at all; its size is the sum of its members'.
* **Protected window**: turns with ``step > current_step - protected_turns``, i.e. the last
  ``protected_turns`` (12) steps ``current_step - 11 .. current_step`` (DESIGN.md: a turn is a
  step), and other items (tool results) with ``step > current_step - protected_results`` (also
  12 by default). 0 protects nothing by step.
* **Blocked**: a group with a member that is pinned, of kind ``correction`` or ``intent``, a
  turn whose kind weighs 0 (``context.turnWeights``), or inside the protected window. Stages 1-3
  never pick a blocked group.
* **Eviction score** ``e`` (higher = leave first): ``1 - score`` for an item; for a turn (source
  ``user``/``assistant``) outside the window, ``(1 - score) x turn weight of its kind`` (kinds
  without a turn weight count 1), then ``x (1 - c)`` when its embedding's largest cosine ``c``
  with a turn inside the window exceeds ``context.rescueCosine`` (0.7): the rescue of a turn the
  current one still refers to. A group's ``e`` is its members' minimum (the most useful member
  decides). Ties go to the older group (batch order).

Stages, run in order on the groups left by the previous ones; ``used`` falls by each evicted
item's tokens less ``pointer_tokens`` (the stub that replaces it), and a group that would free
nothing that way is never evicted:

1. **stale**: under pressure (``used > threshold x budget``), every unblocked tool call/result
   group whose members were all used at most once (``access_count <= 1``) and are past their
   stability (R(t, S) < ``stale_recency`` = 0.9, i.e. t > S). Turns are left to stages 2-3, where
   their kind weighs them: they are small and hold the names the agent keeps using. Stale items
   go to the warm tier, still retrievable.
2. **low score**: once ``used > threshold x budget`` (the controller's pressure threshold),
   unblocked groups with ``1 - e < threshold``, highest ``e`` first, until ``used`` is at most
   ``low_water x budget`` (the controller's low-water mark, at most the threshold): a pass
   frees room in a batch, so the next steps only append and the prompt's prefix stays put
   until the next pass (issue 18: provider prompt caches and llama.cpp's KV cache reuse it).
3. **over budget**: while ``used > budget``, the remaining unblocked groups, highest ``e``
   first, until ``used <= budget``.
4. **hard budget**: while still ``used > budget``, protected groups are moved: first tool
   calls/results blocked only by the window, oldest first (batch order); then turns in the
   window, oldest first; then pinned tool results (and those of corrections/intents), largest
   first. Each such eviction has reason ``"over budget: protected"`` and the plan's report says
   so. Intents, corrections, pinned turns and turns of a zero-weight kind are never forced out;
   if the budget still cannot be met, the report says by how much. Nothing is dropped: every
   evicted item goes to the warm tier (``to_warm``).

Ranking of stages 2-3: with ``context.coverage`` (default) the candidate groups are ordered by
:func:`veil_fsrs.coverage.eviction_order` (groups that add no identifier the prompt does not
already hold leave first, then the lowest new-identifiers-per-token value, weighted by
``1 - e``); without it, or beyond :data:`COVERAGE_MAX_GROUPS` candidates, by ``e`` alone.
Stages 2-4 then take a prefix of that order (a cumulative sum and a binary search), with no
re-ranking after each pick. Everything is deterministic.

**Re-selection (page-in).** When the session offers page-in candidates (items earlier passes
evicted; ``context.pageIn``, on by default) and coverage is on, stages 2-3 become one choice
over the live candidate groups *and* the paged-out groups: the same greedy (new identifiers per
token, weighted by retention) fills ``threshold x budget`` less what stays whatever happens,
passing over a group that no longer fits (``low_water x budget`` when a low-water mark is
given); live groups that add no new name stay while room
is left. Live candidates not chosen leave (reason ``"low score"``, or ``"over budget"`` for a
retention at or above the threshold); paged-out groups chosen come back
(``EvictionPlan.to_live``, reason :data:`PAGED_IN`). It only runs under pressure, so between
passes the prompt only grows at its end. Why: eviction alone is one-way, and the replay of
recorded sessions showed that a one-way choice keeps worse sets than choosing again at every
pass (bench/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil import ITEM_KINDS, EvictionPlan, ItemBatch
from veil_fsrs.batch_index import BatchIndex, index_for
from veil_fsrs.controller import Controller, cache_cap
from veil_fsrs.coverage import (
    Weigher,
    eviction_order,
    group_identifiers,
    item_identifiers,
    keep_order,
    mention_weigher,
)
from veil_fsrs.fsrs import retrievability
from veil_fsrs.rescue import max_cosine
from veil_fsrs.scoring import SECONDS_PER_DAY
from veil_fsrs.settings import FsrsContextSettings as ContextSettings

__all__ = ["Controller", "evict_pass", "plan_eviction", "STALE_RECENCY", "REASONS"]

STALE_RECENCY = 0.9
"""Stage 1 takes single-use items whose retrievability fell below this (0.9 = R(S, S): the
item is older than its own stability). Read from ``context.staleRecency`` when that exists."""

COVERAGE_MAX_GROUPS = 2_000
"""With more candidate groups than this, stages 2-3 rank by eviction score alone (the greedy
coverage order costs ~10 us per group; a real session rarely has more than a few hundred)."""

REASONS = {1: "stale", 2: "low score", 3: "over budget", 4: "over budget: protected"}
PAGED_IN = "paged in"
"""Reason recorded for an item the re-selection brings back (``EvictionPlan.to_live``)."""
"""Reason recorded in ``EvictionPlan.reasons`` for each stage."""


def _turn_weight_table(settings: ContextSettings) -> np.ndarray:
    """Weight per kind code; the extra last slot (index -1) is for unknown kinds."""
    weights = settings.turn_weights.model_dump()
    return np.array([weights.get(kind, 1.0) for kind in ITEM_KINDS] + [1.0], dtype=np.float64)


def _take_prefix(
    order: np.ndarray, freed: np.ndarray, used: float, target: float
) -> tuple[np.ndarray, float]:
    """Take the shortest prefix of ``order`` whose freed tokens bring ``used`` to ``target``
    (all of it when even that is not enough). Returns ``(taken group numbers, new used)``."""
    if used <= target or len(order) == 0:
        return order[:0], used
    cumulative = np.cumsum(freed[order])
    count = int(np.searchsorted(cumulative, used - target, side="left")) + 1
    count = min(count, len(order))
    return order[:count], used - float(cumulative[count - 1])


def _ranked_prefix(
    candidates: np.ndarray, key: np.ndarray, freed: np.ndarray, used: float, target: float
) -> tuple[np.ndarray, float]:
    """:func:`_take_prefix` over ``candidates`` (group numbers, ascending) ranked by ``key``
    ascending, ties by group number (a stable sort), without sorting all of them: a
    partition finds the ``k`` lowest keys (every candidate tied with the k-th included), only
    those are sorted, and ``k`` grows 4x while their freed tokens are not enough. The result
    is exactly ``_take_prefix(candidates[np.argsort(key[candidates], kind="stable")], ...)``
    (tests/test_fsrs_eviction.py compares them): the candidates whose key is at most the k-th
    lowest are the first ones of the full ranking, in the same order, and cumulative sums of
    the same prefix are the same numbers."""
    if used <= target or len(candidates) == 0:
        return candidates[:0], used
    need = used - target
    keys = key[candidates]
    sizes = freed[candidates]
    m = len(candidates)
    mean = float(sizes.mean())
    # a first guess at how many it takes, with room to spare; grown below if short
    k = m if mean <= 0 else min(m, int(1.5 * need / mean) + 64)
    while True:
        bound = np.partition(keys, k - 1)[k - 1] if k < m else np.nan
        if not np.isnan(bound):  # (NaN keys sort last; a NaN bound: sort them all, as argsort)
            head = np.flatnonzero(keys <= bound)
            head = head[np.argsort(keys[head], kind="stable")]
        else:
            head, k = np.argsort(keys, kind="stable"), m
        cumulative = np.cumsum(sizes[head])
        if k >= m or cumulative[-1] >= need:
            count = min(int(np.searchsorted(cumulative, need, side="left")) + 1, len(head))
            return candidates[head[:count]], used - float(cumulative[count - 1])
        k = min(m, 4 * k)


def plan_eviction(
    items: ItemBatch,
    scores: Any,
    budget_tokens: int,
    used_tokens: int,
    *,
    settings: ContextSettings,
    threshold: float,
    current_step: int,
    now: float,
    embeddings: Mapping[str, Any] | None = None,
    stale_recency: float = STALE_RECENCY,
    pointer_tokens: int = 0,
    paged_out: ItemBatch | None = None,
    paged_scores: Any = None,
    mentions: Mapping[str, int] | None = None,
    low_water: float | None = None,
) -> EvictionPlan:
    """Choose the items that leave the prompt (see the module docstring for the stages).

    Args:
        items: the live items.
        scores: retention scores in [0, 1] aligned with ``items`` (any scorer's).
        budget_tokens: tokens the messages may take (> 0).
        used_tokens: tokens they take now (>= 0).
        settings: ``session.config.settings.context``.
        threshold: the pressure threshold in (0, 1] (the controller's).
        current_step: the session's current step (protected window).
        now: Unix time, seconds (staleness).
        embeddings: optional item id -> vector (unit or not; normalised here) for the rescue.
        stale_recency: stage 1's retrievability bound.
        pointer_tokens: tokens of the stub that replaces an evicted item.
        paged_out: items of this session that earlier passes evicted and that may come back
            (page-in candidates; see "Re-selection" in the module docstring). None or empty:
            eviction only.
        paged_scores: retention scores aligned with ``paged_out`` (default 0.5 each).
        mentions: identifier -> how many of the session's items mention it; the coverage
            ranking weighs each new identifier by that count to the power
            ``settings.mention_power`` (:func:`veil_fsrs.coverage.mention_weigher`). None:
            every new identifier counts 1.
        low_water: the share of the budget a pass frees room down to (the controller's
            low-water mark; issue 18): a pass starts only when ``used > threshold x budget``,
            and then stage 2 (or the re-selection) aims at ``low_water x budget`` instead of
            ``threshold x budget``, so the next steps append without another pass. None: the
            threshold (every pass frees just enough). Values above ``threshold`` count as it.

    Returns:
        An :class:`EvictionPlan` with ``to_warm`` (stage order), ``to_live`` (paged in),
        ``reasons``, ``threshold`` and ``report`` (hard-budget moves, budget that cannot be
        met).

    Raises:
        ValueError: ``scores`` has the wrong length or non-finite values; ``budget_tokens`` <= 0
            or ``used_tokens`` < 0; embeddings of different sizes.
    """
    n = len(items)
    if budget_tokens <= 0:
        raise ValueError(f"budget_tokens must be > 0, got {budget_tokens!r}")
    if used_tokens < 0:
        raise ValueError(f"used_tokens must be >= 0, got {used_tokens!r}")
    if len(scores) != n:
        raise ValueError(f"scores: expected {n} values (one per item), got {len(scores)}")
    plan = EvictionPlan(threshold=threshold)
    if n == 0 or used_tokens <= threshold * budget_tokens:
        return plan  # no pressure: every stage needs used > threshold x budget (scores unread)
    score = np.asarray(scores, dtype=np.float64).reshape(-1)
    if score.shape[0] != n:
        raise ValueError(f"scores: expected {n} values (one per item), got {score.shape[0]}")
    if not np.isfinite(score).all():
        raise ValueError("scores: every score must be a finite number in [0, 1]")

    cols = items.columns()
    index = index_for(items)
    group, n_groups = index.group, index.n_groups
    static = _static_arrays(index, settings, pointer_tokens)
    freed = static["freed"]

    # Protection: the static part (pinned, kinds) plus the window of recent steps.
    # The window: the last protected_turns turns, and the tool results of the last
    # protected_results steps (DESIGN.md protects turns; recent results are a separate setting)
    turn_window = cols["step"] > current_step - settings.protected_turns
    result_window = cols["step"] > current_step - settings.protected_results
    in_window = np.where(index.is_turn, turn_window, result_window)
    blocked = static["always_blocked"] | in_window
    group_blocked = (np.bincount(group, weights=blocked, minlength=n_groups) > 0) | static[
        "frees_nothing"
    ]
    cosine = None
    if embeddings:
        turn = index.is_turn
        cosine = max_cosine(index, turn & ~in_window, turn & in_window, embeddings)
        cosine[cosine <= settings.rescue_cosine] = 0.0  # only rescued turns keep a cosine

    # Stage 1: stale single-use groups, all of them. Recency only where it can matter.
    # Stage 1 runs only under pressure and only on tool results: a stale turn costs little and
    # holds the names the agent keeps using (replay: evicting turns early doubled the misses).
    used0 = float(used_tokens)
    under_pressure = used0 > threshold * float(budget_tokens)
    may_be_stale = static["single_use"] & ~blocked & index.is_tool & under_pressure
    stale = np.zeros(len(items), dtype=bool)
    where = np.flatnonzero(may_be_stale)
    if len(where):
        elapsed_days = (now - cols["last_access"][where]) / SECONDS_PER_DAY
        stability = np.minimum(cols["stability"][where], settings.live_cap_days)
        stale[where] = retrievability(elapsed_days, stability, settings.decay) < stale_recency
    first = ~group_blocked & (np.bincount(group, weights=~stale, minlength=n_groups) == 0)
    stage = np.zeros(n_groups, dtype=np.int8)  # 0 = stays
    stage[first] = 1

    used = float(used_tokens) - float(freed[first].sum())
    budget = float(budget_tokens)
    mark = threshold if low_water is None else min(low_water, threshold)
    soft_target = mark * budget

    # Stages 2 and 3 share one ranking, sorted once and only under pressure: highest eviction
    # score first, then the older group.
    if used > soft_target:
        evict_score = (1.0 - np.minimum(np.maximum(score, 0.0), 1.0)) * static["turn_weight"]
        if cosine is not None:
            evict_score *= 1.0 - cosine
        group_e = np.full(n_groups, np.inf)
        np.minimum.at(group_e, group, evict_score)
        candidates = ~group_blocked & (stage == 0)
        weigh = mention_weigher(mentions, settings.mention_power)
        n_paged = len(paged_out) if paged_out is not None else 0
        if settings.coverage and n_paged and int(candidates.sum()) + n_paged <= COVERAGE_MAX_GROUPS:
            used = _reselect(
                plan,
                items,
                index,
                candidates,
                stage,
                freed,
                1.0 - np.clip(group_e, 0.0, 1.0),
                _paged_groups(paged_out, paged_scores, settings, pointer_tokens),
                used=used,
                soft_target=soft_target,
                threshold=threshold,
                weigh=weigh,
            )
        else:
            if settings.coverage and 0 < int(candidates.sum()) <= COVERAGE_MAX_GROUPS:
                order = eviction_order(
                    items,
                    group,
                    candidates,
                    ~candidates[group] & (stage[group] == 0),
                    freed,
                    1.0 - np.clip(group_e, 0.0, 1.0),
                    weigh,
                )
                ranking = np.concatenate([order, np.flatnonzero(~candidates)])
            else:  # the plain ranking by eviction score, highest first: sorted only as needed
                ranking = None
            used = _stages_2_3(
                ranking,
                ~group_blocked & (stage == 0),
                stage,
                group_e,
                freed,
                used,
                threshold,
                budget,
                soft_target,
            )

    # Hard budget: window tool results, then window turns, then pinned tool results.
    if used > budget:
        used = _hard_budget(plan, index, static["always_blocked"], freed, stage, used, budget)

    if stage.any():
        _fill_plan(plan, index, group, stage)
    return plan


@dataclass
class _Paged:
    """Page-in candidates as groups: ``ids`` per group, ``cost`` (tokens it adds back: its
    tokens less the stub it replaces), ``retention`` and ``members`` (identifiers)."""

    ids: list[list[str]]
    cost: np.ndarray
    retention: np.ndarray
    members: list[set[str]]


def _paged_groups(
    paged: ItemBatch, scores: Any, settings: ContextSettings, pointer_tokens: int
) -> _Paged:
    index = index_for(paged)
    static = _static_arrays(index, settings, pointer_tokens)
    score = (
        np.full(len(paged), 0.5)
        if scores is None
        else np.clip(np.asarray(scores, dtype=np.float64).reshape(-1), 0.0, 1.0)
    )
    if score.shape[0] != len(paged):
        raise ValueError(f"paged_scores: expected {len(paged)} values, got {score.shape[0]}")
    group_e = np.full(index.n_groups, np.inf)
    np.minimum.at(group_e, index.group, (1.0 - score) * static["turn_weight"])
    ids: list[list[str]] = [[] for _ in range(index.n_groups)]
    members: list[set[str]] = [set() for _ in range(index.n_groups)]
    for pos, g in enumerate(index.group.tolist()):
        ids[g].append(index.ids[pos])
        members[g] |= item_identifiers(paged[pos])
    return _Paged(ids, static["freed"], 1.0 - np.clip(group_e, 0.0, 1.0), members)


def _reselect(
    plan: EvictionPlan,
    items: ItemBatch,
    index: BatchIndex,
    candidates: np.ndarray,
    stage: np.ndarray,
    freed: np.ndarray,
    retention: np.ndarray,
    paged: _Paged,
    *,
    used: float,
    soft_target: float,
    threshold: float,
    weigh: Weigher = len,
) -> float:
    """Stages 2-3 as one re-selection over the live candidates and the paged-out groups (see
    the module docstring); marks ``stage`` (2 or 3) for live groups that leave and lists the
    paged-out ones that come back in ``plan.to_live``. Returns the new ``used``."""
    group, n_live = index.group, index.n_groups
    cand = np.flatnonzero(candidates)
    covered: set[str] = set()
    for pos in np.flatnonzero(~candidates[group] & (stage[group] == 0)).tolist():
        covered |= item_identifiers(items[pos])
    members = group_identifiers(items, group, cand)
    for j, names in enumerate(paged.members):
        members[n_live + j] = names
    sizes = np.concatenate([freed, paged.cost])
    keep_value = np.concatenate([retention, paged.retention])
    base = used - float(freed[cand].sum())  # what stays whatever happens (stubs included)
    room = soft_target - base
    kept: set[int] = set()
    order, spent = keep_order(members, sizes, keep_value, covered, room=max(room, 0.0), weigh=weigh)
    kept.update(order)
    room -= float(sum(sizes[g] for g in order))
    # Live groups that add no new name stay while there is room: moving them gains nothing.
    for g in sorted((g for g in spent if g < n_live), key=lambda g: -keep_value[g]):
        if sizes[g] <= room:
            kept.add(g)
            room -= float(sizes[g])
    for g in cand.tolist():
        if g not in kept:
            stage[g] = 2 if retention[g] < threshold else 3
            used -= float(freed[g])
    for g in sorted(g for g in kept if g >= n_live):
        for item_id in paged.ids[g - n_live]:
            plan.to_live.append(item_id)
            plan.reasons[item_id] = PAGED_IN
        used += float(paged.cost[g - n_live])
    return used


def _stages_2_3(
    ranking: np.ndarray | None,
    open_groups: np.ndarray,
    stage: np.ndarray,
    group_e: np.ndarray,
    freed: np.ndarray,
    used: float,
    threshold: float,
    budget: float,
    soft_target: float,
) -> float:
    """Stages 2 and 3 as prefixes of one ranking (evict first = first); marks ``stage``;
    returns the new ``used``. ``ranking``: every group, in order; None for the plain order
    by eviction score ``group_e``, highest first, ties by group number (then only the
    prefixes taken are sorted: :func:`_ranked_prefix`). Stage 2 takes groups whose retention
    is under ``threshold`` until ``used <= soft_target`` (the low-water mark x budget)."""
    neg_e = -group_e

    def take(groups: np.ndarray, used: float, target: float) -> tuple[np.ndarray, float]:
        if ranking is None:
            return _ranked_prefix(np.flatnonzero(groups), neg_e, freed, used, target)
        return _take_prefix(ranking[groups[ranking]], freed, used, target)

    taken, used = take(open_groups & (1.0 - group_e < threshold), used, soft_target)
    stage[taken] = 2
    if used > budget:
        taken, used = take(open_groups & (stage == 0), used, budget)
        stage[taken] = 3
    return used


def _static_arrays(
    index: BatchIndex, settings: ContextSettings, pointer_tokens: int
) -> dict[str, np.ndarray]:
    """What does not change between passes on one batch (cached per turn weights and pointer
    size): per item ``turn_weight``, ``always_blocked`` (pinned, correction, intent, turn of a
    zero-weight kind), ``single_use``; per group ``freed`` tokens and ``frees_nothing``."""
    weights = settings.turn_weights.model_dump()
    key = ("eviction", tuple(sorted(weights.items())), pointer_tokens)

    def build() -> dict[str, np.ndarray]:
        cols = index.cols
        is_turn = index.is_turn
        table = _turn_weight_table(settings)
        turn_weight = np.where(is_turn, table[index.kind_code], 1.0)
        freed_item = np.maximum(cols["tokens"] - pointer_tokens, 0.0)
        freed = np.bincount(index.group, weights=freed_item, minlength=index.n_groups)
        return {
            "turn_weight": turn_weight,
            "always_blocked": cols["pinned"]
            | index.kind_mask("correction")
            | index.kind_mask("intent")
            | (is_turn & (turn_weight == 0)),
            "single_use": cols["access_count"] <= 1,
            "freed": freed,
            # A group that frees nothing (its stub costs as much as it) is pointless to evict.
            "frees_nothing": freed <= 0,
        }

    return index.memo(key, build)


def _hard_budget(
    plan: EvictionPlan,
    index: BatchIndex,
    always_blocked: np.ndarray,
    freed: np.ndarray,
    stage: np.ndarray,
    used: float,
    budget: float,
) -> float:
    """Stage 4 (see the module docstring); writes report lines; returns the new ``used``."""
    group, n_groups = index.group, index.n_groups
    over_before = used - budget
    tool_group = np.bincount(group, weights=index.is_tool, minlength=n_groups) > 0
    has_turn = np.bincount(group, weights=index.is_turn, minlength=n_groups) > 0
    # Pinned, correction, intent, zero-weight turn: blocked whether or not in the window.
    strongly_blocked = np.bincount(group, weights=always_blocked, minlength=n_groups) > 0
    open_groups = (stage == 0) & tool_group & ~has_turn & (freed > 0)
    window_turns = (stage == 0) & has_turn & ~strongly_blocked & (freed > 0)
    taken_total = taken_turns = 0
    # Window tool results oldest first; then window turns oldest first (the newest carry the
    # current line of thought); pinned / correction / intent tool results only as a last resort.
    for allowed, by_size, are_turns in (
        (open_groups & ~strongly_blocked, False, False),
        (window_turns, False, True),
        (open_groups & strongly_blocked, True, False),
    ):
        candidates = np.flatnonzero(allowed)
        order = candidates[np.argsort(-freed[candidates], kind="stable")] if by_size else candidates
        taken, used = _take_prefix(order, freed, used, budget)
        stage[taken] = 4
        taken_total += len(taken)
        taken_turns += len(taken) if are_turns else 0
        if used <= budget:
            break
    if taken_total:
        moved = int((stage == 4).sum())
        plan.report.append(
            f"over budget: protected: the items eviction may not pick exceed the budget of "
            f"{budget:.0f} tokens by {over_before:.0f}; moved {moved} protected group(s) to the "
            f"warm tier ({taken_turns} of them turns; a call and its result always together)"
        )
    if used > budget:
        plan.report.append(
            f"still over budget by {used - budget:.0f} tokens: what remains cannot be evicted "
            f"(intents, corrections, pinned turns and memory items, zero-weight turns)"
        )
    return used


def _fill_plan(plan: EvictionPlan, index: BatchIndex, group: np.ndarray, stage: np.ndarray) -> None:
    item_stage = stage[group]
    ids = index.ids
    for number in (1, 2, 3, 4):
        # one gather and C-level list / dict building per stage (a pass may move thousands)
        taken = ids[item_stage == number].tolist()
        plan.to_warm.extend(taken)
        plan.reasons.update(dict.fromkeys(taken, REASONS[number]))


def evict_pass(
    items: ItemBatch,
    scores: Any,
    budget_tokens: int,
    used_tokens: int,
    *,
    settings: ContextSettings,
    controller: Controller,
    current_step: int,
    now: float,
    embeddings: Mapping[str, Any] | None = None,
    stale_recency: float = STALE_RECENCY,
    pointer_tokens: int = 0,
    page_in: Callable[[], tuple[ItemBatch | None, Any]] | None = None,
    mentions: Callable[[], Mapping[str, int] | None] | None = None,
    history: Callable[[], tuple[float, int]] | None = None,
    levels: Callable[..., EvictionPlan] | None = None,
) -> EvictionPlan:
    """One eviction pass with the controller: detect re-requests, apply calm periods, plan with
    the current threshold, then record the pass.

    ``history`` returns ``(tokens of the session's whole history, steps so far)``, read only
    under pressure: with ``context.controller.cachePrice`` set, the low-water mark in effect is
    the lower of the controller's and :func:`veil_fsrs.controller.cache_cap`'s.

    An item this policy evicted that is among the live ``items`` again was brought back
    (hydrated, promoted, recalled): it counts as a re-request at ``now``.

    Arguments as :func:`plan_eviction`; ``controller`` holds the threshold; ``page_in``
    returns the page-in candidates and their scores (``plan_eviction``'s ``paged_out`` and
    ``paged_scores``), called only under pressure; so is ``mentions``, which returns
    ``plan_eviction``'s ``mentions``. ``levels``: when given, the planner that chooses whole,
    excerpt or stub per item (:func:`veil_fsrs.levels.plan_levels` with the session's state
    bound), called instead of ``plan_eviction`` with the arguments the two share.

    Raises:
        ValueError: as :func:`plan_eviction`.
    """
    if len(items) and controller.state["evicted"]:
        live = index_for(items).id_set
        for item_id in [i for i in controller.state["evicted"] if i in live]:
            controller.on_rerequest(item_id, now)
    controller.tick(now)
    paged_out, paged_scores, counts = None, None, None
    low_water = controller.low_water
    if len(items) and used_tokens > controller.threshold * budget_tokens:
        # only under pressure: nothing to do otherwise
        if page_in is not None:
            paged_out, paged_scores = page_in()
        if mentions is not None:
            counts = mentions()
        price = controller.settings.cache_price
        if history is not None and price is not None:
            tokens, steps = history()
            low_water = min(
                low_water,
                cache_cap(
                    tokens,
                    steps,
                    budget_tokens,
                    price=price,
                    low=controller.settings.low_water_min,
                    high=controller.settings.low_water_max,
                    allowance=controller.settings.cache_allowance,
                ),
            )
    if levels is not None:
        plan = levels(
            items,
            scores,
            budget_tokens,
            used_tokens,
            settings=settings,
            threshold=controller.threshold,
            low_water=low_water,
            current_step=current_step,
            pointer_tokens=pointer_tokens,
            paged_out=list(paged_out) if paged_out is not None else None,
            paged_scores=paged_scores,
            embeddings=embeddings,
        )
    else:
        plan = plan_eviction(
            items,
            scores,
            budget_tokens,
            used_tokens,
            settings=settings,
            threshold=controller.threshold,
            low_water=low_water,
            current_step=current_step,
            now=now,
            embeddings=embeddings,
            stale_recency=stale_recency,
            pointer_tokens=pointer_tokens,
            paged_out=paged_out,
            paged_scores=paged_scores,
            mentions=counts,
        )
    pressure = bool(set(plan.reasons.values()) - {REASONS[1], PAGED_IN, "excerpt", "superseded"})
    controller.record_pass(now, plan.to_warm, pressure)
    for item_id in plan.to_live:  # brought back by the policy itself: not a re-request
        controller.state["evicted"].pop(item_id, None)
    return plan
