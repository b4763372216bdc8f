"""Three levels per item: whole, an excerpt, or a pointer stub (issue 29).

Dropping whole messages is the limit of what a prompt can hold per token: a 300-line file read
usually matters for the 15 lines that hold the names the agent goes on to use. So an eviction
pass chooses, for each item it may move, one of three levels:

* **whole**: the item stays in the prompt as it is;
* **excerpt**: some of its lines, verbatim and in order, stand in for it, each elided run a
  marker naming the message ``veil_hydrate`` brings back whole (the core renders it:
  :mod:`veil.core.prompt.excerpts`);
* **stub**: a pointer stub (a step whose turn and results are all stubs is left out).

**What a line is worth.** The value of keeping a name is how likely the agent's next steps use
it (:func:`veil_fsrs.reference_weights.reference_weight`, fitted on recorded sessions), and a
name is worth keeping once: in the *newest* item that holds it (its *owner*), which is where
the agent last saw it and the line it would act on. A line is worth the weights of the names it
owns that nothing kept holds yet; an item's lines are weighted by its retention score (the
scorer's, turn kinds and the rescue of old turns as in :mod:`veil_fsrs.eviction`):
``x (1 + retention_weight x (retention - 0.5))``. An older copy of a file or an older run of
a command owns nothing its newer copy also holds, so superseded content leaves first and keeps
only the lines that differ.

**The choice** is a multiple-choice knapsack (value = weighted names held, cost = tokens),
solved greedily (the classic greedy for budgeted maximum coverage: Khuller, Moss and Naor, IPL
1999): lines are taken by value per token (a line that opens a new run also pays half a
marker) until the pass's room is spent, then an excerpt that costs at least
``excerpt_whole_share`` of its item is shown whole instead, and room left over brings
excerpts back whole, the cheapest first.

**Which items it may change.** Fixed whole: pinned items, corrections, intents and turns of a
zero-weight kind (seed 002: never eviction candidates), items without a message, and the tool
results of the newest ``protected_results`` steps (the core shows the newest step whole in any
case). The last ``protected_turns`` turns (seed 002: "protected outright") never leave the
prompt: each keeps at least the line of its first tool call (or its first line), and more when
their lines are worth it. Everything else, and the items earlier passes moved out (page-in
candidates, when the core offers them), is a candidate.

**When and how much.** A pass runs once the prompt passes ``threshold x budget`` and aims at
``low_water x budget`` (the controller's marks, :mod:`veil_fsrs.controller`), so the steps
after it only append and the prompt's prefix stays cached until the next pass. A pass first
tries to change only the newest candidates: the shortest run of them, newest first, whose
current size is ``shallow_reach`` times what must be freed, while the older ones keep their
levels (the prompt is then re-sent from the first item that changed, not from the start). When
that cannot reach the target (less than a fifth of what must be freed would be left as room),
the pass chooses every candidate's level again (page-in included). Replay figures:
bench/RESULTS.md, issue 29.

**Over the budget.** When the fixed items alone exceed the budget, the tool results the window
protects go to stubs, oldest first, then pinned ones, largest first, then the lines the
protected turns kept, oldest first ("over budget: protected", reported), as in
:mod:`veil_fsrs.eviction`'s stage 4; the newest step stays.

Everything is deterministic: ties go to the older item and the lower line.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil import ContextItem, EvictionPlan, ItemBatch, identifier_tokens
from veil_fsrs.batch_index import index_for
from veil_fsrs.reference_weights import (
    AGE_BOUNDS,
    MAX_COUNT,
    NEVER,
    RESULT_COUNT_MAX,
    weight_table,
)
from veil_fsrs.rescue import max_cosine

__all__ = [
    "EXCERPT",
    "LOW_VALUE",
    "SUPERSEDED",
    "SUPERSEDED_FACTOR",
    "MARKER_TOKENS",
    "PROTECTED",
    "LineInfo",
    "NameStats",
    "line_info",
    "plan_levels",
]

MARKER_TOKENS = 12
"""cl100k_base tokens of one elision marker with its newline (12-14: ``[... 120 lines elided: #42
...]`` is 12)."""

EXCERPT = "excerpt"
"""Reason recorded for an item that leaves the prompt as an excerpt."""
LOW_VALUE = "low score"
"""Reason recorded for an item that leaves as a pointer stub (the old stage-2 reason, which the
controller reads as pressure)."""
SUPERSEDED = "superseded"
"""Reason for a tool result a newer one supersedes (:mod:`veil_fsrs.superseded`): like
``"stale"``, not a sign of pressure."""
SUPERSEDED_FACTOR = 0.5
"""What a superseded result's lines weigh against the same lines of a current one: the names
only the older copy still holds (what the newer one changed or dropped) are worth keeping less,
so such lines leave before lines of equal value elsewhere. Chosen by replay (bench/RESULTS.md,
issue 29)."""
PROTECTED = "over budget: protected"
"""Reason for a fixed item moved because the fixed items alone exceed the budget."""

WINDOW = 4.0
"""A pass chooses levels for the newest candidates whose current size adds up to this many times
its target (every candidate of a session the policy keeps near its budget); older items in the
prompt leave as stubs and older ones out of it stay as they are. It bounds a pass's work when
the prompt is far over the target (a model with a large window, the first pass of a resumed
session): the lines of what cannot fit are never read."""

MAX_CANDIDATES = 2_000
"""At most this many candidates per pass (the newest), for the same reason."""

LINE_SCAN_CHARS = 4_000
"""Characters of one line searched for names (a minified file's one line stays bounded)."""

_TOOL_CALL_LINE = re.compile(r"^[A-Za-z_][\w.-]*\(")


@dataclass
class LineInfo:
    """An item's content split into lines, with what each line costs and holds.

    Attributes:
        names: per line, the identifier tokens it holds.
        tokens: per line, its estimated tokens (the item's tokens shared by characters, the
            newline included), float64.
        anchor: for a turn, the line a protected turn keeps at least (:func:`_anchor`);
            None for other items.
        where: name -> the lines holding it, in order.
    """

    names: list[frozenset[str]]
    tokens: np.ndarray
    anchor: int | None
    where: dict[str, tuple[int, ...]] = field(default_factory=dict)


def line_info(item: ContextItem) -> LineInfo:
    """Split ``item.content`` into lines and find each one's names and estimated tokens.

    Token estimate: ``item.tokens x (len(line) + 1) / (len(content) + 1)`` (a quarter of the
    characters when the item's tokens are unknown): exact counting per line would cost a
    tokenizer call per line, and the core measures the real prompt after the pass anyway.
    """
    content = item.content or ""
    lines = content.split("\n")
    total_chars = len(content) + 1
    per_char = (item.tokens / total_chars) if item.tokens > 0 else 0.25
    tokens = np.fromiter(((len(line) + 1) * per_char for line in lines), dtype=np.float64)
    names = [
        frozenset(identifier_tokens(line[:LINE_SCAN_CHARS])) if line.strip() else frozenset()
        for line in lines
    ]
    anchor = _anchor(lines) if item.source == "assistant" else None
    where: dict[str, list[int]] = {}
    for i, line_names in enumerate(names):
        for name in line_names:
            where.setdefault(name, []).append(i)
    return LineInfo(names, tokens, anchor, {k: tuple(v) for k, v in where.items()})


ANCHOR_CHARS = 200
"""Longest tool-call line a protected turn keeps as its anchor (a heredoc script is one long
line of JSON; its command's first line in the text says what the turn did for less)."""


def _anchor(lines: list[str]) -> int:
    """The line a protected turn keeps at least: the first line of its first fenced command
    (```bash ...), else its first tool call's line when short, else its first non-empty
    line."""
    for i, line in enumerate(lines[:-1]):
        if line.strip().startswith("```") and lines[i + 1].strip():
            return i + 1
    call = next((i for i, line in enumerate(lines) if _TOOL_CALL_LINE.match(line)), None)
    if call is not None and len(lines[call]) <= ANCHOR_CHARS:
        return call
    return next((i for i, line in enumerate(lines) if line.strip()), 0)


class NameStats:
    """What the session knows about each name, for :func:`reference_weight`: turns that
    mentioned it, other items that held it, the step each last happened, and its owner (the
    newest item holding it, by message order; ``owned``: item id -> the names it owns).

    Feed items with :meth:`add` in the order they were captured (their message order).
    """

    def __init__(self) -> None:
        self.assistant: dict[str, int] = {}
        self.results: dict[str, int] = {}
        self.last_step: dict[str, int] = {}
        self.last_assistant_step: dict[str, int] = {}
        self.owner: dict[str, str] = {}
        self.owned: dict[str, set[str]] = {}
        self.ids: dict[str, int] = {}  # name -> its number, in the order names were first seen
        self._owner_order: dict[str, tuple[float, int]] = {}
        self._seq = 0

    def add(self, item: ContextItem, names: frozenset[str]) -> None:
        """Account ``item`` (holding ``names``)."""
        self._seq += 1
        order = (
            float(item.message_index) if item.message_index is not None else float("inf"),
            self._seq,
        )
        turn = item.source == "assistant"
        step = int(item.step)
        ids = self.ids
        for name in names:
            if name not in ids:
                ids[name] = len(ids)
            if turn:
                self.assistant[name] = self.assistant.get(name, 0) + 1
                self.last_assistant_step[name] = step
            else:
                self.results[name] = self.results.get(name, 0) + 1
            if step >= self.last_step.get(name, -1):
                self.last_step[name] = step
            if item.message_index is not None and order >= self._owner_order.get(name, (-1.0, 0)):
                self._owner_order[name] = order
                before = self.owner.get(name)
                if before is not None and before != item.id:
                    self.owned[before].discard(name)
                self.owner[name] = item.id
                self.owned.setdefault(item.id, set()).add(name)

    def weight(self, name: str, step: int) -> float:
        """:func:`reference_weight` of ``name`` at ``step`` (0 for a name never seen)."""
        last = self.last_step.get(name)
        if last is None:
            return 0.0
        said = self.last_assistant_step.get(name)
        table = weight_table()
        a = min(self.assistant.get(name, 0), MAX_COUNT)
        r = min(self.results.get(name, 0), RESULT_COUNT_MAX)
        g = bisect_left(AGE_BOUNDS, step - 1 - last)
        s = NEVER if said is None else bisect_left(AGE_BOUNDS, step - 1 - said)
        return table[a][g][r][s]


@dataclass
class _Candidate:
    item: ContextItem
    lines_of: Callable[[ContextItem], LineInfo]
    live: bool
    multiplier: float
    current: tuple[int, ...] | None  # excerpt lines shown now (warm), None: whole or stub
    protected_turn: bool
    superseded: bool = False

    @property
    def info(self) -> LineInfo:
        """The item's lines (computed on first use: a pass reads only those it may change)."""
        return self.lines_of(self.item)


def _retention(
    items: Sequence[ContextItem],
    scores: Any,
    turn_weights: Mapping[str, float],
    cosine: np.ndarray | None,
) -> np.ndarray:
    score = (
        np.full(len(items), 0.5)
        if scores is None
        else np.clip(np.asarray(scores, dtype=np.float64).reshape(-1), 0.0, 1.0)
    )
    weight = np.array(
        [
            turn_weights.get(i.kind, 1.0) if i.source in ("user", "assistant") else 1.0
            for i in items
        ],
        dtype=np.float64,
    )
    e = (1.0 - score) * weight
    if cosine is not None:
        e = e * (1.0 - cosine)
    return 1.0 - np.clip(e, 0.0, 1.0)


def _current_cost(c: _Candidate, pointer_tokens: int) -> float:
    if c.live:
        return float(c.item.tokens)
    if c.current:
        return _excerpt_cost(c.info, c.current)
    return float(pointer_tokens)


def _excerpt_cost(info: LineInfo, lines: Sequence[int]) -> float:
    """Estimated tokens of an excerpt showing ``lines`` (ascending): their tokens and one
    marker per elided run."""
    n = len(info.tokens)
    cost = float(info.tokens[list(lines)].sum()) if lines else 0.0
    runs = 0
    previous = -1
    for i in lines:
        if i > previous + 1:
            runs += 1
        previous = i
    if previous < n - 1:
        runs += 1
    return cost + MARKER_TOKENS * runs


def plan_levels(
    items: ItemBatch,
    scores: Any,
    budget_tokens: int,
    used_tokens: int,
    *,
    settings: Any,
    threshold: float,
    low_water: float | None,
    current_step: int,
    stats: NameStats,
    lines_of: Callable[[ContextItem], LineInfo],
    pointer_tokens: int = 9,
    paged_out: Sequence[ContextItem] | None = None,
    paged_scores: Any = None,
    embeddings: Mapping[str, Any] | None = None,
    superseded: Mapping[str, str] | None = None,
) -> EvictionPlan:
    """Choose a level for each item eviction may move (see the module docstring).

    Args:
        items: the live items.
        scores: retention scores in [0, 1] aligned with ``items``.
        budget_tokens: tokens the messages may take (> 0).
        used_tokens: tokens they take now (>= 0).
        settings: ``session.config.settings.context`` (veil_fsrs' fields: ``turn_weights``,
            ``protected_turns``, ``protected_results``, ``excerpt_whole_share``,
            ``shallow_reach``, ``retention_weight``, ``rescue_cosine``).
        threshold: the pressure threshold in (0, 1]: no pass below ``threshold x budget``.
        low_water: the share of the budget a pass aims at (None: the threshold).
        current_step: the session's current step.
        stats: the session's :class:`NameStats`.
        lines_of: an item's :class:`LineInfo` (cached by the caller).
        pointer_tokens: tokens of a pointer stub.
        paged_out: items earlier passes moved out that may come back or change level (their
            ``excerpt`` says what they show now); None or empty: the pass only moves live items.
        paged_scores: retention scores aligned with ``paged_out`` (default 0.5 each).
        embeddings: item id -> vector, for the rescue of old turns (seed 002).
        superseded: tool result item id -> the id of a newer result that supersedes it
            (:func:`veil_fsrs.superseded.superseded_by`): its lines weigh
            ``SUPERSEDED_FACTOR`` of their value and it is never shown whole again.

    Returns:
        An :class:`EvictionPlan`: ``to_warm`` (live items leaving, with ``excerpts`` for those
        shown as an excerpt), ``to_live`` (paged-out items back whole), ``excerpts`` for
        paged-out items whose shown lines change (an empty tuple: back to a plain stub),
        ``reasons`` and ``report``.

    Raises:
        ValueError: ``scores`` misaligned or not finite; ``budget_tokens`` <= 0 or
            ``used_tokens`` < 0.
    """
    n = len(items)
    if budget_tokens <= 0:
        raise ValueError(f"budget_tokens must be > 0, got {budget_tokens!r}")
    if used_tokens < 0:
        raise ValueError(f"used_tokens must be >= 0, got {used_tokens!r}")
    if len(scores) != n:
        raise ValueError(f"scores: expected {n} values (one per item), got {len(scores)}")
    plan = EvictionPlan(threshold=threshold)
    budget = float(budget_tokens)
    if n == 0 or used_tokens <= threshold * budget:
        return plan
    score = np.asarray(scores, dtype=np.float64).reshape(-1)
    if not np.isfinite(score).all():
        raise ValueError("scores: every score must be a finite number in [0, 1]")
    target = (threshold if low_water is None else min(low_water, threshold)) * budget
    turn_weights = settings.turn_weights.model_dump()

    # -- what is fixed, what is a candidate -------------------------------------------------
    cosine = None
    index = index_for(items)
    cols = index.cols
    turn_window = cols["step"] > current_step - settings.protected_turns
    result_window = cols["step"] > current_step - settings.protected_results
    if embeddings:
        turn = index.is_turn
        cosine = max_cosine(index, turn & ~turn_window, turn & turn_window, embeddings)
        cosine[cosine <= settings.rescue_cosine] = 0.0
    retention = _retention(items, score, turn_weights, cosine)
    whole_fixed: list[int] = []
    candidates: list[_Candidate] = []
    stale = superseded or {}
    weight_of = settings.retention_weight
    for pos, item in enumerate(items):
        zero_weight = item.source in ("user", "assistant") and turn_weights.get(item.kind, 1.0) == 0
        if (
            item.pinned
            or item.kind in ("correction", "intent")
            or zero_weight
            or item.message_index is None
            or item.source not in ("assistant", "tool_result")
            or (item.source != "assistant" and bool(result_window[pos]))
        ):
            whole_fixed.append(pos)
            continue
        candidates.append(
            _Candidate(
                item,
                lines_of,
                True,
                max(0.05, 1.0 + weight_of * (float(retention[pos]) - 0.5)),
                None,
                item.source == "assistant" and bool(turn_window[pos]),
                item.id in stale,
            )
        )
    if paged_out:
        paged_retention = _retention(paged_out, paged_scores, turn_weights, None)
        for pos, item in enumerate(paged_out):
            if item.message_index is None or item.source not in ("assistant", "tool_result"):
                continue
            candidates.append(
                _Candidate(
                    item,
                    lines_of,
                    False,
                    max(0.05, 1.0 + weight_of * (float(paged_retention[pos]) - 0.5)),
                    item.excerpt,
                    item.source == "assistant"
                    and item.step > current_step - settings.protected_turns,
                    item.id in stale,
                )
            )
    candidates.sort(key=lambda c: (c.item.message_index, c.item.step))
    if not candidates:
        return _over_budget(plan, items, whole_fixed, [], used_tokens, budget, pointer_tokens)

    # -- what a pass may reach: the newest candidates, WINDOW x the target of them ------------
    current = [_current_cost(c, pointer_tokens) for c in candidates]
    base = float(used_tokens) - sum(current)  # what stays whatever this pass does
    start, acc = len(candidates), 0.0
    while start > 0 and len(candidates) - start < MAX_CANDIDATES:
        if acc + current[start - 1] > WINDOW * target and acc > 0:
            break
        start -= 1
        acc += current[start]
    for k in range(start):  # older: a live one leaves as a stub, a warm one stays as it is
        c = candidates[k]
        if c.live and not c.protected_turn:  # a protected turn never leaves the prompt
            plan.to_warm.append(c.item.id)
            plan.reasons[c.item.id] = LOW_VALUE
            c.live, current[k] = False, float(pointer_tokens)

    # -- a shallow pass if it can reach the target, else a deep one ---------------------------
    need = float(used_tokens) - target
    cut = start
    reach = settings.shallow_reach
    if reach > 0:
        acc, cut = 0.0, len(candidates)
        while cut > start and acc < reach * need:
            cut -= 1
            acc += current[cut]
        prefix_cost = sum(current[:cut])
        room_left = target - base - prefix_cost - pointer_tokens * (len(candidates) - cut)
        if cut == start or room_left < 0.2 * need:
            cut = start
    kept_prefix, suffix = candidates[:cut], candidates[cut:]

    # -- names already held whatever happens ----------------------------------------------------
    owned_by = stats.owned
    covered: set[str] = set()
    for pos in whole_fixed:
        covered.update(owned_by.get(items[pos].id, ()))
    for c in kept_prefix:
        own = owned_by.get(c.item.id)
        if not own:
            continue
        shown = _shown(c)
        if shown is None:
            covered.update(own)
        elif shown:
            lines_shown = set(shown)
            where = c.info.where
            covered.update(x for x in own if any(i in lines_shown for i in where.get(x, ())))
    room = target - base - sum(current[:cut]) - pointer_tokens * len(suffix)

    # -- the greedy over lines ------------------------------------------------------------------
    chosen: list[set[int]] = [set() for _ in suffix]
    spent = 0.0
    for k, c in enumerate(suffix):  # protected turns keep their anchor line
        if c.protected_turn and c.info.anchor is not None:
            chosen[k].add(c.info.anchor)
            spent += float(c.info.tokens[c.info.anchor]) + MARKER_TOKENS
            own = owned_by.get(c.item.id)
            if own:
                covered.update(own & c.info.names[c.info.anchor])
    weights: dict[str, float] = {}
    # The names each candidate may bring (owned by it, not held yet; without one it is a
    # stub). Each name counts on one line of its owner: the one with the fewest tokens per
    # owned name (the first of those), so a line's value is fixed for the pass and the greedy
    # is one sort (a name on several lines of one item is worth keeping once).
    keys: list[tuple[int, int]] = []
    values: list[float] = []
    costs: list[float] = []
    half_marker = MARKER_TOKENS / 2
    for k, c in enumerate(suffix):
        own = (owned_by.get(c.item.id) or set()) - covered
        if not own:
            continue
        where = c.info.where
        tokens = c.info.tokens
        per_line: dict[int, int] = {}
        for name in own:
            for i in where.get(name, ()):
                per_line[i] = per_line.get(i, 0) + 1
        line_value: dict[int, float] = {}
        for name in own:
            spots = where.get(name)
            if not spots:
                continue
            best = spots[0]
            for i in spots[1:]:  # the cheapest line per name it owns, then the first
                if tokens[i] / per_line[i] < tokens[best] / per_line[best]:
                    best = i
            w = weights.get(name)
            if w is None:
                w = weights[name] = stats.weight(name, current_step)
            line_value[best] = line_value.get(best, 0.0) + w
        tokens = c.info.tokens
        for i, value in line_value.items():
            if value > 0 and i not in chosen[k]:
                keys.append((k, i))
                values.append(value * c.multiplier * (SUPERSEDED_FACTOR if c.superseded else 1.0))
                costs.append(float(tokens[i]) + half_marker)
    if keys:
        ratio = np.asarray(values) / np.asarray(costs)
        # best value per token first; ties: the older item, then the lower line
        order = np.lexsort((np.array([i for _, i in keys]), np.array([k for k, _ in keys]), -ratio))
        for pos in order.tolist():
            k, i = keys[pos]
            lines = chosen[k]
            cost = float(suffix[k].info.tokens[i])
            if (i - 1) not in lines and (i + 1) not in lines:
                cost += MARKER_TOKENS
            if spent + cost > room:
                continue
            lines.add(i)
            spent += cost

    # -- excerpts worth showing whole, then the room left brings more back whole -------------
    level: list[tuple[int, ...] | None] = []  # None: whole; () : stub; lines: excerpt
    total = spent
    whole_share = settings.excerpt_whole_share
    for k, c in enumerate(suffix):
        lines = tuple(sorted(chosen[k]))
        if not lines:
            level.append(())
            continue
        cost = _excerpt_cost(c.info, lines)
        whole = float(c.item.tokens)
        if c.superseded:  # a stale copy keeps at most the lines that differ
            level.append(lines)
        elif cost >= whole_share * whole and total - cost + whole <= room:
            total += whole - cost
            level.append(None)
        else:
            level.append(lines)
    upgrades = sorted(
        (float(c.item.tokens) - _excerpt_cost(c.info, level[k]), k)
        for k, c in enumerate(suffix)
        if level[k] and not c.superseded
    )
    for extra, k in upgrades:
        if total + extra > room:
            break
        total += extra
        level[k] = None

    # -- the plan ---------------------------------------------------------------------------------
    for k, c in enumerate(suffix):
        lv = level[k]
        item_id = c.item.id
        if c.live:
            if lv is None:
                continue
            plan.to_warm.append(item_id)
            if lv:
                plan.excerpts[item_id] = lv
            plan.reasons[item_id] = SUPERSEDED if c.superseded else EXCERPT if lv else LOW_VALUE
        elif lv is None:
            plan.to_live.append(item_id)
            plan.reasons[item_id] = "paged in"
        elif lv != (c.current or ()):
            plan.excerpts[item_id] = lv
            plan.reasons[item_id] = SUPERSEDED if c.superseded else EXCERPT if lv else LOW_VALUE
    estimate = base + sum(current[:cut]) + pointer_tokens * len(suffix) + total
    return _over_budget(plan, items, whole_fixed, suffix, estimate, budget, pointer_tokens, level)


def _shown(c: _Candidate) -> tuple[int, ...] | None:
    """Lines a kept candidate shows: None when whole, ``()`` for a stub."""
    if c.live:
        return None
    return c.current or ()


def _over_budget(
    plan: EvictionPlan,
    items: ItemBatch,
    whole_fixed: list[int],
    suffix: list[_Candidate],
    estimate: float,
    budget: float,
    pointer_tokens: int,
    level: list[tuple[int, ...] | None] | None = None,
) -> EvictionPlan:
    """When what stays is still over the budget, move fixed items to stubs, reported (as
    :mod:`veil_fsrs.eviction`'s stage 4): tool results the window protects, oldest first;
    then pinned tool results, largest first; then what the protected turns kept (their
    anchor lines or more: ``level`` of each ``suffix`` candidate), oldest first, when that
    brings the prompt under the budget (else the turns stay: stubs would lose them for
    nothing). Never the newest step (the core shows it in any case), intents,
    corrections or turns of a zero-weight kind."""
    if estimate <= budget:
        return plan
    over = estimate - budget
    newest = max((int(i.step) for i in items), default=0)
    fixed = [
        items[pos]
        for pos in whole_fixed
        if items[pos].kind not in ("correction", "intent")
        and items[pos].source == "tool_result"
        and items[pos].message_index is not None
        and int(items[pos].step) < newest
    ]
    movable = sorted((i for i in fixed if not i.pinned), key=lambda i: i.message_index)
    movable += sorted((i for i in fixed if i.pinned), key=lambda i: -i.tokens)
    moved = 0
    for item in movable:
        if estimate <= budget:
            break
        freed = float(item.tokens) - pointer_tokens
        if freed <= 0:
            continue
        plan.to_warm.append(item.id)
        plan.reasons[item.id] = PROTECTED
        estimate -= freed
        moved += 1
    turns: list[tuple[int, float]] = []  # what the protected turns kept, and what a stub frees
    for k, c in enumerate(suffix if level is not None else ()):
        lv = level[k]
        if not c.protected_turn or lv == () or int(c.item.step) >= newest:
            continue
        shown = float(c.item.tokens) if lv is None else _excerpt_cost(c.info, lv)
        if shown > pointer_tokens:
            turns.append((k, shown - pointer_tokens))
    if estimate - sum(freed for _, freed in turns) > budget:
        turns = []  # they cannot bring the prompt under the budget: the turns stay
    for k, freed in turns:
        if estimate <= budget:
            break
        c, lv = suffix[k], level[k]
        item_id = c.item.id
        if c.live:  # whole or an excerpt now: a stub
            if item_id not in plan.to_warm:
                plan.to_warm.append(item_id)
            plan.excerpts.pop(item_id, None)
        else:  # out of the prompt: back to (or left as) a plain stub
            if lv is None:
                plan.to_live.remove(item_id)
            if c.current:
                plan.excerpts[item_id] = ()
            else:
                plan.excerpts.pop(item_id, None)
        plan.reasons[item_id] = PROTECTED
        estimate -= freed
        moved += 1
    if moved:
        plan.report.append(
            f"over budget: protected: the items eviction may not pick exceed the budget of "
            f"{budget:.0f} tokens by {over:.0f}; moved {moved} protected item(s) to the warm tier"
        )
    if estimate > budget:
        plan.report.append(
            f"still over budget by {estimate - budget:.0f} tokens: what remains cannot be "
            f"evicted (intents, corrections, pinned items, the newest step)"
        )
    return plan
