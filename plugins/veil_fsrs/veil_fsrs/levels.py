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

Everything is deterministic: ties go to the older item and the lower line; a line's value
adds its names' weights in the order the session first saw the names.

**What a pass costs** (issue 29: at most 10 ms at 10,000 items). A pass does no Python work
per item of the prompt: which items are fixed or candidates, their order, the window and the
names already held are numpy over the batch's columns (:mod:`veil_fsrs.batch_index`) and
over the names' statistics kept as arrays (:meth:`NameStats.columns`, brought up to date with
the few names captured since the last pass). Only the candidates it may change are read, and
of those only the ones owning a name not held yet (the others can only be stubs): each one's
(name, line) pairs are kept with its lines between passes, then laid end to end, so the best
line per name, the lines' values, the greedy's order, the excerpts' costs and the plan are
array operations over all of them at once. The result is the same plan, bit for bit, as
trying each line in turn (plugins/veil_fsrs/tests/test_levels_reference.py keeps that
version and compares; bench/bench_scoring.py's ``levels pass`` times it).
"""

from __future__ import annotations

import itertools
import re
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil import ITEM_KINDS, ContextItem, EvictionPlan, ItemBatch, identifier_tokens
from veil_fsrs.batch_index import TURN_SOURCES, index_for
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

_STATS_TOKENS = itertools.count()

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
        pairs: :func:`_name_lines`' cache (per :class:`NameStats`), not part of the value.
    """

    names: list[frozenset[str]]
    tokens: np.ndarray
    anchor: int | None
    where: dict[str, tuple[int, ...]] = field(default_factory=dict)
    pairs: dict[int, tuple[int, int, np.ndarray, np.ndarray, int, int]] = field(
        default_factory=dict, repr=False, compare=False
    )


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
        self.item_numbers: dict[str, int] = {}  # item id -> its number, in the order first added
        self.adds: dict[str, int] = {}  # item id -> how many times it was accounted
        self._owner_order: dict[str, tuple[float, int]] = {}
        self._seq = 0
        # the per-name arrays a pass reads (columns()), brought up to date lazily: a capture
        # only notes which names changed, a pass copies those few from the dicts
        self._dirty: set[str] = set()
        self._columns = _NameColumns.empty()
        self.token = next(_STATS_TOKENS)  # tells the line caches of two sessions apart

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
        self.item_numbers.setdefault(item.id, len(self.item_numbers))
        self.adds[item.id] = self.adds.get(item.id, 0) + 1
        self._dirty.update(names)
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

    def columns(self) -> _NameColumns:
        """The statistics as arrays indexed by name number (:attr:`ids`), current as of now:
        the names added to since the last call are copied from the dicts (O(changed))."""
        dirty = self._dirty
        if not dirty:
            return self._columns
        cols = self._columns = self._columns.grown(len(self.ids))
        names = list(dirty)
        dirty.clear()
        count = len(names)
        where = np.fromiter((self.ids[x] for x in names), dtype=np.int64, count=count)
        cols.assistant[where] = np.fromiter(
            (self.assistant.get(x, 0) for x in names), dtype=np.int64, count=count
        )
        cols.results[where] = np.fromiter(
            (self.results.get(x, 0) for x in names), dtype=np.int64, count=count
        )
        last, said = self.last_step, self.last_assistant_step
        cols.seen[where] = np.fromiter((x in last for x in names), dtype=bool, count=count)
        cols.last[where] = np.fromiter((last.get(x, 0) for x in names), np.int64, count=count)
        cols.said[where] = np.fromiter((x in said for x in names), dtype=bool, count=count)
        cols.said_step[where] = np.fromiter(
            (said.get(x, 0) for x in names), dtype=np.int64, count=count
        )
        owner, numbers = self.owner, self.item_numbers
        cols.owner[where] = np.fromiter(
            (numbers[owner[x]] if x in owner else -1 for x in names), np.int64, count=count
        )
        return cols

    def weights(self, names: np.ndarray, step: int) -> np.ndarray:
        """:meth:`weight` of each name number in ``names`` (int64) at ``step``, float64, the
        same values (the same table cells, looked up with numpy)."""
        cols = self.columns()
        a = np.minimum(cols.assistant[names], MAX_COUNT)
        r = np.minimum(cols.results[names], RESULT_COUNT_MAX)
        g = np.searchsorted(AGE_BOUNDS, step - 1 - cols.last[names], side="left")
        s = np.where(
            cols.said[names],
            np.searchsorted(AGE_BOUNDS, step - 1 - cols.said_step[names], side="left"),
            NEVER,
        )
        return np.where(cols.seen[names], _weight_array()[a, g, r, s], 0.0)


@dataclass
class _NameColumns:
    """Per name number: turns that mentioned it (``assistant``), other items that held it
    (``results``), whether it was seen and the last step (``seen``, ``last``), whether a turn
    said it and when (``said``, ``said_step``), and its owner's item number (-1: none). Arrays
    may be longer than the names known (spare room)."""

    assistant: np.ndarray
    results: np.ndarray
    seen: np.ndarray
    last: np.ndarray
    said: np.ndarray
    said_step: np.ndarray
    owner: np.ndarray

    @classmethod
    def empty(cls) -> _NameColumns:
        return cls(
            *(np.zeros(0, dtype=d) for d in (np.int64, np.int64, bool, np.int64)),
            np.zeros(0, dtype=bool),
            np.zeros(0, dtype=np.int64),
            np.full(0, -1, dtype=np.int64),
        )

    def grown(self, size: int) -> _NameColumns:
        """These columns with room for ``size`` names (doubling; new rows unseen, unowned)."""
        if size <= len(self.owner):
            return self
        capacity = max(size, 2 * len(self.owner), 1024)
        fresh = []
        for old in (
            self.assistant,
            self.results,
            self.seen,
            self.last,
            self.said,
            self.said_step,
            self.owner,
        ):
            array = (
                np.zeros(capacity, dtype=old.dtype)
                if old is not self.owner
                else np.full(capacity, -1, dtype=np.int64)
            )
            array[: len(old)] = old
            fresh.append(array)
        return _NameColumns(*fresh)


_WEIGHTS: np.ndarray | None = None


def _weight_array() -> np.ndarray:
    """:func:`weight_table` as a float64 array ``[assistant, age, results, assistant_age]``."""
    global _WEIGHTS
    if _WEIGHTS is None:
        _WEIGHTS = np.asarray(weight_table(), dtype=np.float64)
    return _WEIGHTS


_Pairs = tuple[int, int, np.ndarray, np.ndarray, int, int]
"""What :func:`_name_lines` keeps per item: ``(adds, known, names, lines, line_count,
pair_count)`` (``adds``: how many times ``stats`` had accounted the item then; ``known``: -1
when every name of the item had a number, else how many names ``stats`` knew then)."""


def _name_lines(info: LineInfo, stats: NameStats, item_id: str) -> _Pairs:
    """One pair per (name, line holding it) of ``info`` (the lines of item ``item_id``):
    ``names`` and ``lines`` (int64, sorted by name number then line).

    Only pairs whose name the item may own are kept: names ``stats`` does not know are left
    out (they weigh nothing), and once ``stats`` accounted the item, only the names it owns
    then. Kept in ``info.pairs``, which stays a superset of what the item owns: a name's
    owner only ever moves to the item being accounted (:meth:`NameStats.add`), so an item's
    names only leave it until it is accounted again (``adds``), and before it is accounted
    the pairs are rebuilt when ``stats`` learns new names while some were unknown."""
    key = stats.token
    adds = stats.adds.get(item_id, 0)
    cached = info.pairs.get(key)
    if cached is not None and cached[0] == adds and (adds > 0 or cached[1] in (-1, len(stats.ids))):
        return cached
    ids = stats.ids
    names: list[int] = []
    lines: list[int] = []
    complete = True
    for name, spots in info.where.items():
        number = ids.get(name)
        if number is None:
            complete = False
            continue
        names.extend([number] * len(spots))
        lines.extend(spots)
    name_array = np.array(names, dtype=np.int64)
    line_array = np.array(lines, dtype=np.int64)
    if adds > 0:  # what the item owns now (its names can only leave it, see above)
        owned = stats.columns().owner[name_array] == stats.item_numbers[item_id]
        name_array, line_array = name_array[owned], line_array[owned]
    order = np.lexsort((line_array, name_array))
    found = (
        adds,
        -1 if complete else len(ids),
        name_array[order],
        line_array[order],
        len(info.tokens),
        len(order),
    )
    info.pairs[key] = found
    return found


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
    """:func:`_retention_of` for a list of items (the page-in candidates); ``scores`` None:
    0.5 each."""
    score = (
        np.full(len(items), 0.5)
        if scores is None
        else np.asarray(scores, dtype=np.float64).reshape(-1)
    )
    weight = np.array(
        [turn_weights.get(i.kind, 1.0) if i.source in TURN_SOURCES else 1.0 for i in items],
        dtype=np.float64,
    )
    return _retention_of(score, weight, cosine)


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
    stale = superseded or {}

    # -- what is fixed, what is a candidate -------------------------------------------------
    index = index_for(items)
    cols = index.cols
    turn_window = cols["step"] > current_step - settings.protected_turns
    result_window = cols["step"] > current_step - settings.protected_results
    cosine = None
    if embeddings:
        turn = index.is_turn
        cosine = max_cosine(index, turn & ~turn_window, turn & turn_window, embeddings)
        cosine[cosine <= settings.rescue_cosine] = 0.0
    kind_weight = _kind_weights(index, turn_weights)
    retention = _retention_of(score, kind_weight, cosine)
    source, message = _sources(index, items)
    assistant = source == _ASSISTANT
    fixed = (
        cols["pinned"]
        | index.kind_mask("correction")
        | index.kind_mask("intent")
        | (kind_weight == 0)  # a turn of a zero-weight kind (1.0 for every other item)
        | np.isnan(message)
        | ~(assistant | (source == _TOOL_RESULT))
        | (~assistant & result_window)
    )
    whole_fixed = np.flatnonzero(fixed)
    cand = _live_candidates(
        index, np.flatnonzero(~fixed), message, assistant, turn_window, retention, settings
    )
    if paged_out:
        cand = cand.joined(
            _paged_candidates(paged_out, paged_scores, turn_weights, settings, current_step, stale)
        )
    cand = cand.sorted()
    k_all = len(cand.ids)
    if not k_all:
        return _over_budget(
            plan, items, whole_fixed.tolist(), [], used_tokens, budget, pointer_tokens
        )
    objects = _Objects(items, paged_out or ())

    # -- what a pass may reach: the newest candidates, WINDOW x the target of them ------------
    current = cand.tokens.copy()  # a live candidate's current size: the item's tokens
    for k in np.flatnonzero(~cand.live).tolist():  # out of the prompt: an excerpt or a stub
        shown = cand.current[k]
        current[k] = (
            _excerpt_cost(lines_of(objects.of(cand, k)), shown) if shown else pointer_tokens
        )
    base = float(used_tokens) - sum(current.tolist())  # what stays whatever this pass does
    start = k_all - _window(current, target)
    old = np.flatnonzero(cand.live[:start] & ~cand.protected[:start])
    if len(old):  # older: a live one leaves as a stub (a protected turn never leaves the prompt)
        stubbed = cand.ids[old].tolist()
        plan.to_warm.extend(stubbed)
        plan.reasons.update(dict.fromkeys(stubbed, LOW_VALUE))
        cand.live[old] = False
        current[old] = float(pointer_tokens)
    current_list = current.tolist()

    # -- a shallow pass if it can reach the target, else a deep one ---------------------------
    need = float(used_tokens) - target
    cut = start
    reach = settings.shallow_reach
    if reach > 0:
        acc, cut = 0.0, k_all
        while cut > start and acc < reach * need:
            cut -= 1
            acc += current_list[cut]
        prefix_cost = sum(current_list[:cut])
        room_left = target - base - prefix_cost - pointer_tokens * (k_all - cut)
        if cut == start or room_left < 0.2 * need:
            cut = start
    suffix = np.arange(cut, k_all)

    # -- names already held whatever happens ----------------------------------------------------
    names = stats.columns()
    owner = names.owner[: len(stats.ids)]
    numbers = stats.item_numbers
    # item numbers (NameStats.item_numbers) of the candidates the rest reads (-2: an item it
    # never saw, which owns nothing and matches no owner, not even "none": -1)
    kept_live = np.flatnonzero(cand.live[:cut])
    kept_shown = [k for k in np.flatnonzero(~cand.live[:cut]).tolist() if cand.current[k]]
    cand_numbers = np.full(k_all, -2, dtype=np.int64)
    read = np.concatenate((kept_live, np.array(kept_shown, dtype=np.int64), suffix))
    ids = cand.ids[read].tolist()
    cand_numbers[read] = np.fromiter((numbers.get(x, -2) for x in ids), np.int64, count=len(ids))
    whole = np.zeros(len(numbers) + 1, dtype=bool)  # item number -> shown whole; [-1]: none
    whole[[numbers.get(x, -1) for x in index.ids[whole_fixed].tolist()]] = True
    whole[np.maximum(cand_numbers[kept_live], -1)] = True
    whole[-1] = False
    covered = whole[owner]  # a name its owner shows whole is held
    for k in kept_shown:  # a kept excerpt holds the names it owns on the lines it shows
        if cand_numbers[k] >= 0:
            item = objects.of(cand, k)
            _, _, pair_names, pair_lines, _, _ = _name_lines(lines_of(item), stats, item.id)
            mine = (owner[pair_names] == cand_numbers[k]) & np.isin(pair_lines, cand.current[k])
            covered[pair_names[mine]] = True
    room = target - base - sum(current_list[:cut]) - pointer_tokens * len(suffix)

    # -- the lines of the candidates that may keep some ---------------------------------------
    # Only the protected turns (their anchor) and the candidates owning a name not held yet
    # are read: the others can only be stubs, and reading their lines would cost a split.
    owns = np.zeros(len(numbers) + 1, dtype=bool)  # item number -> owns a name not held
    owns[owner[(owner >= 0) & ~covered]] = True
    owning = owns[np.maximum(cand_numbers[suffix], -1)]  # -2 (unknown) reads the unset slot
    lined = suffix[owning | cand.protected[suffix]]
    lined_items = objects.many(cand, lined)
    lines = _Lines.of([lines_of(item) for item in lined_items], [i.id for i in lined_items], stats)
    if stale:  # only the candidates a pass may change read it
        cand.superseded[suffix] = [x in stale for x in cand.ids[suffix].tolist()]

    # -- protected turns keep their anchor line ------------------------------------------------
    taken = np.zeros(lines.total, dtype=bool)  # per line of ``lines``: chosen
    spent = 0.0
    for j in np.flatnonzero(cand.protected[lined]).tolist():
        anchor = lines.infos[j].anchor
        if anchor is None:
            continue
        at = int(lines.start[j]) + anchor
        taken[at] = True
        spent += float(lines.tokens[at]) + MARKER_TOKENS
        pairs = slice(lines.pair_start[j], lines.pair_start[j + 1])  # the item's own pairs
        pair_name = lines.pair_name[pairs]
        mine = (lines.pair_line[pairs] == at) & (owner[pair_name] == cand_numbers[lined[j]])
        covered[pair_name[mine]] = True

    # -- what each line is worth, then the greedy over lines ---------------------------------
    factor = np.where(cand.superseded[lined], SUPERSEDED_FACTOR, 1.0)
    keys = _line_values(
        lines,
        owner,
        covered,
        cand_numbers[lined],
        cand.multiplier[lined],
        factor,
        taken,
        stats,
        current_step,
    )
    if len(keys):
        spent = _greedy(lines, keys, taken, spent, room)

    # -- excerpts worth showing whole, then the room left brings more back whole -------------
    chosen = np.flatnonzero(taken)
    excerpted, cost, bounds = _excerpt_costs(lines, chosen)  # the candidates (j) keeping lines
    shows = lined[excerpted]  # the same, as candidates (k)
    whole_size = cand.tokens[shows]
    stale_ones = cand.superseded[shows]
    show_whole = np.zeros(len(shows), dtype=bool)
    total = spent
    # an excerpt costing at least excerpt_whole_share of its item is shown whole, in order,
    # while that fits (a stale copy keeps at most the lines that differ)
    for e in np.flatnonzero(
        (cost >= settings.excerpt_whole_share * whole_size) & ~stale_ones
    ).tolist():
        c, w = float(cost[e]), float(whole_size[e])
        if total - c + w <= room:
            total += w - c
            show_whole[e] = True
    # then the room left brings excerpts back whole, the cheapest first (ties: the older)
    rest = np.flatnonzero(~show_whole & ~stale_ones)
    extra = whole_size[rest] - cost[rest]
    order = np.lexsort((rest, extra))
    rest, extra = rest[order], extra[order]
    sums = np.cumsum(np.concatenate(([total], extra)))  # the running total, added in order
    fits = int(np.argmax(sums[1:] > room)) if (sums[1:] > room).any() else len(rest)
    show_whole[rest[:fits]] = True
    total = float(sums[fits])

    # -- the plan ---------------------------------------------------------------------------------
    # candidate -> None: whole; lines: an excerpt (absent: a stub)
    level: dict[int, tuple[int, ...] | None] = dict.fromkeys(shows[show_whole].tolist())
    for e in np.flatnonzero(~show_whole).tolist():
        level[int(shows[e])] = _shown_lines(lines, chosen, bounds, e, excerpted[e])
    whole_now = np.zeros(k_all, dtype=bool)
    whole_now[shows[show_whole]] = True
    ids_all = cand.ids
    for k in np.flatnonzero(~cand.live[suffix] | ~whole_now[suffix]).tolist():
        k += cut
        lv = level.get(k, ())
        item_id = ids_all[k]
        stale_k = cand.superseded[k]
        if cand.live[k]:
            plan.to_warm.append(item_id)
            if lv:
                plan.excerpts[item_id] = lv
            plan.reasons[item_id] = SUPERSEDED if stale_k else EXCERPT if lv else LOW_VALUE
        elif lv is None:
            plan.to_live.append(item_id)
            plan.reasons[item_id] = "paged in"
        elif lv != (cand.current[k] or ()):
            plan.excerpts[item_id] = lv
            plan.reasons[item_id] = SUPERSEDED if stale_k else EXCERPT if lv else LOW_VALUE
    estimate = base + sum(current_list[:cut]) + pointer_tokens * len(suffix) + total
    if estimate <= budget:
        return plan
    kept = [
        _Candidate(
            objects.of(cand, k),
            lines_of,
            bool(cand.live[k]),
            float(cand.multiplier[k]),
            cand.current[k],
            bool(cand.protected[k]),
            bool(cand.superseded[k]),
        )
        for k in suffix.tolist()
    ]
    levels = [level.get(k, ()) for k in suffix.tolist()]
    return _over_budget(
        plan, items, whole_fixed.tolist(), kept, estimate, budget, pointer_tokens, levels
    )


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


_ASSISTANT, _TOOL_RESULT = 1, 2
_SOURCE_CODES = {"assistant": _ASSISTANT, "tool_result": _TOOL_RESULT}


def _sources(index: Any, items: ItemBatch) -> tuple[np.ndarray, np.ndarray]:
    """``(source, message)`` per item: ``_ASSISTANT``, ``_TOOL_RESULT`` or 0 (int8), and the
    message index (float64, NaN for None). Kept per batch version (``index.memo``)."""

    def build() -> tuple[np.ndarray, np.ndarray]:
        n = len(items)
        source = np.fromiter((_SOURCE_CODES.get(i.source, 0) for i in items), np.int8, count=n)
        message = np.fromiter(
            (np.nan if i.message_index is None else i.message_index for i in items),
            np.float64,
            count=n,
        )
        return source, message

    return index.memo("veil_fsrs.levels.sources", build)


def _kind_weights(index: Any, turn_weights: Mapping[str, float]) -> np.ndarray:
    """Per item: its kind's turn weight for a turn (user or assistant), else 1.0 (float64)."""
    if not set(turn_weights) <= set(ITEM_KINDS):  # a kind the codes cannot tell apart
        items = index.items
        return np.array(
            [turn_weights.get(i.kind, 1.0) if i.source in TURN_SOURCES else 1.0 for i in items],
            dtype=np.float64,
        )
    by_code = np.array([turn_weights.get(k, 1.0) for k in ITEM_KINDS] + [1.0])  # -1: unknown
    return np.where(index.is_turn, by_code[index.kind_code], 1.0)


def _retention_of(score: np.ndarray, weight: np.ndarray, cosine: np.ndarray | None) -> np.ndarray:
    """Retention in [0, 1] per item from its score, its kind's weight and the rescue cosine
    (the scorer's formula, as :mod:`veil_fsrs.eviction` applies it)."""
    e = (1.0 - np.clip(score, 0.0, 1.0)) * weight
    if cosine is not None:
        e = e * (1.0 - cosine)
    return 1.0 - np.clip(e, 0.0, 1.0)


@dataclass
class _Candidates:
    """The items a pass may change, as arrays in one order (one row per candidate).

    ``ids``: item ids (object); ``live``: in the prompt now; ``multiplier``: what its lines'
    values are multiplied by; ``protected``: a protected turn; ``superseded``: a stale
    result; ``message`` / ``step``: its order; ``tokens``: its whole size; ``current``: the
    excerpt lines it shows now when out of the prompt (None: a stub or live); ``paged`` /
    ``position``: where the item is (``paged_out`` or the batch, and its position there).
    """

    ids: np.ndarray
    live: np.ndarray
    multiplier: np.ndarray
    protected: np.ndarray
    superseded: np.ndarray
    message: np.ndarray
    step: np.ndarray
    tokens: np.ndarray
    current: list[tuple[int, ...] | None]
    paged: np.ndarray
    position: np.ndarray

    def joined(self, other: _Candidates) -> _Candidates:
        """These rows, then ``other``'s."""
        fields = {
            name: np.concatenate((getattr(self, name), getattr(other, name)))
            for name in self.__dataclass_fields__
            if name != "current"
        }
        return _Candidates(current=self.current + other.current, **fields)

    def sorted(self) -> _Candidates:
        """The rows by message order, then step; ties keep their order (a stable sort)."""
        message, step = self.message, self.step
        later = message[1:] > message[:-1]
        if np.all(later | ((message[1:] == message[:-1]) & (step[1:] >= step[:-1]))):
            return self  # the batch's order already (live items come in message order)
        order = np.lexsort((step, message))
        fields = {
            name: getattr(self, name)[order]
            for name in self.__dataclass_fields__
            if name != "current"
        }
        fields["current"] = [self.current[k] for k in order.tolist()]
        return _Candidates(**fields)


def _live_candidates(
    index: Any,
    pos: np.ndarray,
    message: np.ndarray,
    assistant: np.ndarray,
    turn_window: np.ndarray,
    retention: np.ndarray,
    settings: Any,
) -> _Candidates:
    """The live items at positions ``pos`` of the batch as candidates."""
    ids = index.ids[pos]
    count = len(pos)
    return _Candidates(
        ids=ids,
        live=np.ones(count, dtype=bool),
        multiplier=np.maximum(0.05, 1.0 + settings.retention_weight * (retention[pos] - 0.5)),
        protected=assistant[pos] & turn_window[pos],
        superseded=np.zeros(count, dtype=bool),  # set for the candidates a pass may change
        message=message[pos],
        step=index.cols["step"][pos],
        tokens=index.cols["tokens"][pos],
        current=[None] * count,
        paged=np.zeros(count, dtype=bool),
        position=pos,
    )


def _paged_candidates(
    paged_out: Sequence[ContextItem],
    paged_scores: Any,
    turn_weights: Mapping[str, float],
    settings: Any,
    current_step: int,
    stale: Mapping[str, str],
) -> _Candidates:
    """The items out of the prompt (page-in candidates) a pass may change, as candidates:
    turns and tool results with a message."""
    retention = _retention(paged_out, paged_scores, turn_weights, None)
    rows = [
        pos
        for pos, item in enumerate(paged_out)
        if item.message_index is not None and item.source in ("assistant", "tool_result")
    ]
    chosen = [paged_out[pos] for pos in rows]
    weight_of = settings.retention_weight
    return _Candidates(
        ids=np.array([i.id for i in chosen] or [], dtype=object),
        live=np.zeros(len(rows), dtype=bool),
        multiplier=np.array(
            [max(0.05, 1.0 + weight_of * (float(retention[pos]) - 0.5)) for pos in rows],
            dtype=np.float64,
        ),
        protected=np.array(
            [
                i.source == "assistant" and i.step > current_step - settings.protected_turns
                for i in chosen
            ],
            dtype=bool,
        ),
        superseded=np.array([i.id in stale for i in chosen], dtype=bool),
        message=np.array([float(i.message_index) for i in chosen], dtype=np.float64),
        step=np.array([float(i.step) for i in chosen], dtype=np.float64),
        tokens=np.array([float(i.tokens) for i in chosen], dtype=np.float64),
        current=[i.excerpt for i in chosen],
        paged=np.ones(len(rows), dtype=bool),
        position=np.array(rows, dtype=np.int64),
    )


@dataclass
class _Objects:
    """Where candidates' items are: the batch and the page-in candidates."""

    items: ItemBatch
    paged_out: Sequence[ContextItem]

    def of(self, cand: _Candidates, k: int) -> ContextItem:
        """The item of candidate ``k``."""
        where = int(cand.position[k])
        return self.paged_out[where] if cand.paged[k] else self.items[where]

    def many(self, cand: _Candidates, ks: np.ndarray) -> list[ContextItem]:
        """The items of candidates ``ks``, in that order."""
        items, paged_out = self.items, self.paged_out
        return [
            paged_out[where] if paged else items[where]
            for where, paged in zip(
                cand.position[ks].tolist(), cand.paged[ks].tolist(), strict=True
            )
        ]


def _window(current: np.ndarray, target: float) -> int:
    """How many of the newest candidates a pass reads: the newest whose current sizes
    (``current``, float64, oldest first) add up to ``WINDOW x target`` (the one that crosses
    it only when it is the first), at most ``MAX_CANDIDATES``. The sums are those of adding
    sizes one at a time from the newest (``cumsum`` adds in order)."""
    limit = min(len(current), MAX_CANDIDATES)
    if limit == 0:
        return 0
    acc = np.cumsum(current[::-1])[:limit]
    before = np.concatenate(([0.0], acc[:-1]))
    stop = (acc > WINDOW * target) & (before > 0)
    return int(np.argmax(stop)) if stop.any() else limit


@dataclass
class _Lines:
    """The lines of some candidates laid end to end: candidate ``j``'s lines are
    ``start[j] .. start[j] + count[j] - 1``; ``tokens`` per line (float64); ``pair_name`` /
    ``pair_line`` / ``pair_item``: one row per (name, line holding it), by candidate, then
    name number, then line (line numbers global); candidate ``j``'s rows are
    ``pair_start[j] .. pair_start[j + 1] - 1``."""

    infos: list[LineInfo]
    start: np.ndarray
    count: np.ndarray
    tokens: np.ndarray
    pair_name: np.ndarray
    pair_line: np.ndarray
    pair_item: np.ndarray
    pair_start: np.ndarray

    @property
    def total(self) -> int:
        return len(self.tokens)

    @classmethod
    def of(cls, infos: list[LineInfo], ids: list[str], stats: NameStats) -> _Lines:
        """The lines of ``infos`` (of the items ``ids``), in that order (their pairs:
        :func:`_name_lines`)."""
        if not infos:
            empty = np.zeros(0, dtype=np.int64)
            return cls(infos, empty, empty, np.zeros(0), empty, empty, empty, np.zeros(1, np.int64))
        _, _, names, lines, counts, sizes = zip(
            *[_name_lines(info, stats, x) for info, x in zip(infos, ids, strict=True)],
            strict=True,
        )
        count = np.array(counts, dtype=np.int64)
        start = np.zeros(len(infos), dtype=np.int64)
        np.cumsum(count[:-1], out=start[1:])
        pair_item = np.repeat(np.arange(len(infos)), sizes)
        pair_start = np.zeros(len(infos) + 1, dtype=np.int64)
        np.cumsum(sizes, out=pair_start[1:])
        return cls(
            infos,
            start,
            count,
            np.concatenate([info.tokens for info in infos]),
            np.concatenate(names),
            np.concatenate(lines) + start[pair_item],
            pair_item,
            pair_start,
        )

    def item_of(self, line: np.ndarray) -> np.ndarray:
        """The candidate (``j``) each global line number belongs to."""
        return np.searchsorted(self.start, line, side="right") - 1


def _line_values(
    lines: _Lines,
    owner: np.ndarray,
    covered: np.ndarray,
    numbers: np.ndarray,
    multiplier: np.ndarray,
    factor: np.ndarray,
    taken: np.ndarray,
    stats: NameStats,
    step: int,
) -> np.ndarray:
    """The lines the greedy may take, best value per token first (global line numbers).

    A candidate may bring the names it owns (``owner[name] == numbers[j]``) not held yet
    (``covered``). Each such name counts on one line: the one with the fewest tokens per such
    name, the first of those, so a line's value is fixed for the pass and the greedy is one
    sort. A line's value is the sum of its names' weights (:meth:`NameStats.weights`, added in
    name-number order), x ``multiplier[j]`` x ``factor[j]``; its cost its tokens and half a
    marker. Ties: the older candidate, then the lower line. Lines already ``taken`` (anchors)
    are left out.
    """
    name, at, item = lines.pair_name, lines.pair_line, lines.pair_item
    own = (owner[name] == numbers[item]) & ~covered[name]
    if not own.any():
        return np.zeros(0, dtype=np.int64)
    name, at, item = name[own], at[own], item[own]
    per_line = np.bincount(at, minlength=lines.total)  # names each line may bring
    cost = lines.tokens[at] / per_line[at]
    # pairs come by candidate, then name, then line: a name's pairs are one run, and its line
    # is the first of the run whose cost is the run's least
    run = np.flatnonzero(np.diff(name, prepend=-1) | np.diff(item, prepend=-1))
    least = np.minimum.reduceat(cost, run)
    ties = np.flatnonzero(cost == np.repeat(least, np.diff(np.append(run, len(cost)))))
    runs_of = np.searchsorted(run, ties, side="right") - 1
    first = ties[np.diff(runs_of, prepend=-1) != 0]
    value = np.bincount(at[first], weights=stats.weights(name[first], step), minlength=lines.total)
    keys = np.flatnonzero((value > 0) & ~taken)  # ascending: by candidate, then line
    j = lines.item_of(keys)
    gain = value[keys] * multiplier[j] * factor[j]
    ratio = gain / (lines.tokens[keys] + MARKER_TOKENS / 2)
    return keys[np.argsort(-ratio, kind="stable")]  # ties keep the older, then the lower line


def _greedy(lines: _Lines, keys: np.ndarray, taken: np.ndarray, spent: float, room: float) -> float:
    """Take the lines ``keys`` in order while they fit in ``room`` tokens (a line that opens a
    new run, one whose neighbours in its item are not taken yet, also pays a marker); marks
    them in ``taken`` and returns the tokens spent (``spent`` plus theirs, added in order).

    The same choice as trying each line in turn, in two steps: the longest run of first lines
    that fits even if each paid a marker is taken at once (each would be, as no line costs
    more than that), then each line left is tried in turn, skipping at once those that no
    longer fit without a marker (what is spent only grows).
    """
    j = lines.item_of(keys)
    low = lines.start[j]
    high = low + lines.count[j] - 1
    tokens = lines.tokens[keys]
    upper = np.cumsum(np.concatenate(([spent], tokens + MARKER_TOKENS)))
    sure = int(np.searchsorted(upper[1:], room, side="right"))  # upper[1:] only grows
    if sure:
        spent = _take_all(taken, keys[:sure], low[:sure], high[:sure], tokens[:sure], spent)
    if sure == len(keys):
        return spent
    rest = np.arange(sure, len(keys))
    rest = rest[spent + tokens[rest] <= room]
    if not len(rest):
        return spent
    all_tokens = lines.tokens.tolist()
    mark = taken.tolist()
    for g, lo, hi in zip(keys[rest].tolist(), low[rest].tolist(), high[rest].tolist(), strict=True):
        cost = all_tokens[g]
        if not (g > lo and mark[g - 1]) and not (g < hi and mark[g + 1]):
            cost += MARKER_TOKENS
        if spent + cost > room:
            continue
        mark[g] = True
        spent += cost
    taken[:] = mark
    return spent


def _take_all(
    taken: np.ndarray,
    keys: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    tokens: np.ndarray,
    spent: float,
) -> float:
    """Take every line of ``keys`` in order (global line numbers; ``low`` / ``high``: the
    first and last line of each one's item; ``tokens``: each one's): a line pays a marker
    when neither neighbour in its item was taken before it. Returns ``spent`` plus their
    costs, added in order (``cumsum`` adds one at a time)."""
    rank = np.full(len(taken) + 2, len(keys), dtype=np.int64)  # when each line is taken
    rank[1:-1][taken] = -1  # before any key (anchors); [0] and [-1]: no neighbour
    rank[keys + 1] = np.arange(len(keys))
    order = np.arange(len(keys))
    left = (keys > low) & (rank[keys] < order)  # rank[g - 1 + 1]: the line before g
    right = (keys < high) & (rank[keys + 2] < order)
    cost = tokens + np.where(left | right, 0.0, float(MARKER_TOKENS))
    taken[keys] = True
    return float(np.cumsum(np.concatenate(([spent], cost)))[-1])


_SEQUENTIAL_SUM = 8
"""numpy's ``sum`` adds fewer than this many float64 values one at a time, in order (more:
pairwise, in blocks of 8): :func:`_excerpt_costs` adds short excerpts' lines the same way,
column by column, so its costs are bit for bit :func:`_excerpt_cost`'s."""


def _excerpt_costs(lines: _Lines, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_excerpt_cost` of every candidate of ``lines`` keeping some of the ``chosen``
    lines (global line numbers, ascending), without a call per candidate.

    Returns:
        ``(excerpted, cost, bounds)``: the candidates (``j``, ascending), their excerpts'
        estimated tokens (float64), and where each one's lines are in ``chosen``
        (``chosen[bounds[e]:bounds[e + 1]]``).
    """
    j = lines.item_of(chosen)
    first = np.flatnonzero(np.diff(j, prepend=-1))
    bounds = np.append(first, len(chosen))
    size = np.diff(bounds)
    excerpted = j[first]
    group = np.repeat(np.arange(len(first)), size)
    place = np.arange(len(chosen)) - first[group]  # position within its excerpt
    tokens = lines.tokens[chosen]
    total = np.zeros(len(first))
    short = size[group] < _SEQUENTIAL_SUM
    for column in range(_SEQUENTIAL_SUM - 1):
        at = short & (place == column)
        total[group[at]] += tokens[at]
    for e in np.flatnonzero(size >= _SEQUENTIAL_SUM).tolist():
        total[e] = tokens[bounds[e] : bounds[e + 1]].sum()
    local = chosen - lines.start[j]
    before = np.where(place == 0, -1, np.roll(local, 1))
    runs = np.bincount(group, weights=local > before + 1, minlength=len(first))
    last = local[bounds[1:] - 1]
    runs += last < lines.count[excerpted] - 1  # lines elided after the last shown
    return excerpted, total + MARKER_TOKENS * runs.astype(np.int64), bounds


def _shown_lines(
    lines: _Lines, chosen: np.ndarray, bounds: np.ndarray, e: int, j: int
) -> tuple[int, ...]:
    """The lines (the item's own numbers) excerpt ``e`` of candidate ``j`` shows."""
    return tuple((chosen[bounds[e] : bounds[e + 1]] - lines.start[j]).tolist())
