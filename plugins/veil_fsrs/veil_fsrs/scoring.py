"""Retention score of live context items: five signals at fixed weights (seed 002).

Signals, each float64 in [0, 1] (DESIGN.md "Context layer" and "Reference defaults"):

* ``recency``: FSRS-6 retrievability R(t, S), t = now - last_access in days, S = the item's
  stability capped at the live cap (``context.liveCapDays``), decay ``context.decay``.
  Intents never decay (DESIGN.md reference defaults): their recency is 1.
* ``frequency``: min(1, log1p(access_count) / ln 10), so 9 accesses saturate it.
* ``relevance``: Jaccard of the item's tags with the task's tags (0 when both are empty).
* ``structure``: 1 when the item points into the code graph (it has targets: files, symbols).
* ``cognitive``: |cognitive_weight| clipped to [0, 1]. The weight is > 0 when the item was in
  context when things went well and < 0 when they went badly; either way the item proved
  informative (seed 002 "whether the item was in context when things went well or badly"), so
  the signal is its magnitude; 0 means no evidence.

score = sum(weight_k * signal_k), then x ``procedural_factor`` (1.2) for kind ``procedural``,
x ``by_hand_factor`` (1.5) when loaded by hand, + ``pinned_boost`` (0.5) when pinned, clipped
to [0, 1]. Only numpy operations over the batch's columns; deterministic (no clock, no random).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from veil import ItemBatch
from veil_fsrs.batch_index import index_for
from veil_fsrs.fsrs import retrievability
from veil_fsrs.settings import FsrsContextSettings as ContextSettings

SECONDS_PER_DAY = 86_400.0
SIGNALS = ("recency", "frequency", "relevance", "structure", "cognitive")
_LN10 = math.log(10.0)


def signals(
    items: ItemBatch, task_tags: Iterable[str], now: float, settings: ContextSettings
) -> dict[str, np.ndarray]:
    """Return the five signals of every item: ``{name: float64 array of len(items)}``.

    Args:
        items: the live items (their cached ``columns()`` are used).
        task_tags: lower-case tags of the current task.
        now: Unix time, seconds.
        settings: ``session.config.settings.context``.
    """
    cols = items.columns()
    index = index_for(items)
    elapsed_days = (now - cols["last_access"]) / SECONDS_PER_DAY
    stability = np.minimum(cols["stability"], settings.live_cap_days)
    recency = retrievability(elapsed_days, stability, settings.decay)
    recency[index.kind_mask("intent")] = 1.0
    frequency = np.log1p(np.maximum(cols["access_count"], 0.0))
    frequency /= _LN10
    np.minimum(frequency, 1.0, out=frequency)
    return {
        "recency": recency,
        "frequency": frequency,
        "relevance": index.jaccard(task_tags),
        "structure": cols["has_targets"].astype(np.float64),
        "cognitive": np.minimum(np.abs(cols["cognitive_weight"]), 1.0),
    }


def combine(
    items: ItemBatch, parts: dict[str, np.ndarray], settings: ContextSettings
) -> np.ndarray:
    """Weighted sum of ``parts`` (from :func:`signals`) with the modifiers, clipped to [0, 1].

    Raises:
        ValueError: a score is not finite; the message names the first bad item and its fields.
    """
    weights = settings.weights.model_dump()
    total = np.zeros(len(items), dtype=np.float64)
    for name in SIGNALS:  # five in-place array operations, not a loop over items
        total += weights[name] * parts[name]
    factor, boost = index_for(items).modifiers(
        settings.procedural_factor, settings.by_hand_factor, settings.pinned_boost
    )
    total *= factor
    total += boost
    if not np.isfinite(total).all():
        _raise_bad_item(items, total)
    return np.clip(total, 0.0, 1.0, out=total)


def score_items(
    items: ItemBatch, task_tags: Iterable[str], now: float, settings: ContextSettings
) -> np.ndarray:
    """Retention scores in [0, 1] (higher = keep), float64 array aligned with ``items``.

    Args:
        items: the live items.
        task_tags: lower-case tags of the current task (Jaccard relevance).
        now: Unix time, seconds (replay passes recorded time).
        settings: ``session.config.settings.context`` (weights, modifiers, decay, live cap).

    Raises:
        ValueError: an item has a non-finite time, count, stability or weight (named).
    """
    return combine(items, signals(items, task_tags, now, settings), settings)


def _raise_bad_item(items: ItemBatch, total: np.ndarray) -> None:
    pos = int(np.flatnonzero(~np.isfinite(total))[0])
    item = items[pos]
    fields = ("last_access", "stability", "access_count", "cognitive_weight")
    bad = [f for f in fields if not math.isfinite(float(getattr(item, f)))]
    raise ValueError(
        f"context item {item.id!r} cannot be scored: non-finite "
        f"{', '.join(bad) or 'value'} ({', '.join(f'{f}={getattr(item, f)!r}' for f in fields)})"
    )
