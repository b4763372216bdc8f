"""The levels planner (veil_fsrs.levels.plan_levels) against a reference: the planner as it was
before its hot path was vectorised (issue 29: an eviction pass at most 10 ms at 10k items),
kept here line for line in plain Python, so any change of plan (an item, an excerpt line, a
tie-break, an order) fails. Item sets are random (seeded): few names and repeated lines make
ties common; paged-out items, superseded results, rescue embeddings, shallow passes, the
candidate window and the over-budget stage all occur."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
import veil_fsrs.levels as levels_mod
from veil_fsrs.batch_index import index_for
from veil_fsrs.levels import LineInfo, NameStats, line_info, plan_levels
from veil_fsrs.rescue import max_cosine
from veil_fsrs.settings import FsrsContextSettings

from veil import ContextItem, EvictionPlan, ItemBatch, identifier_tokens


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
    return cost + levels_mod.MARKER_TOKENS * runs


def reference_plan(
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
    """The planner as it was before the vectorised rewrite (see the module docstring)."""
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
    while start > 0 and len(candidates) - start < levels_mod.MAX_CANDIDATES:
        if acc + current[start - 1] > levels_mod.WINDOW * target and acc > 0:
            break
        start -= 1
        acc += current[start]
    for k in range(start):  # older: a live one leaves as a stub, a warm one stays as it is
        c = candidates[k]
        if c.live and not c.protected_turn:  # a protected turn never leaves the prompt
            plan.to_warm.append(c.item.id)
            plan.reasons[c.item.id] = levels_mod.LOW_VALUE
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
            spent += float(c.info.tokens[c.info.anchor]) + levels_mod.MARKER_TOKENS
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
    half_marker = levels_mod.MARKER_TOKENS / 2
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
        for name in sorted(own, key=stats.ids.__getitem__):  # the planner's summation order
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
                values.append(
                    value * c.multiplier * (levels_mod.SUPERSEDED_FACTOR if c.superseded else 1.0)
                )
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
                cost += levels_mod.MARKER_TOKENS
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
            plan.reasons[item_id] = (
                levels_mod.SUPERSEDED
                if c.superseded
                else levels_mod.EXCERPT
                if lv
                else levels_mod.LOW_VALUE
            )
        elif lv is None:
            plan.to_live.append(item_id)
            plan.reasons[item_id] = "paged in"
        elif lv != (c.current or ()):
            plan.excerpts[item_id] = lv
            plan.reasons[item_id] = (
                levels_mod.SUPERSEDED
                if c.superseded
                else levels_mod.EXCERPT
                if lv
                else levels_mod.LOW_VALUE
            )
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
        plan.reasons[item.id] = levels_mod.PROTECTED
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
        plan.reasons[item_id] = levels_mod.PROTECTED
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


# -- random sessions ------------------------------------------------------------------------------

TURN_KINDS = ("action", "exploration", "status", "decision")
SEEDS = 200
"""Random sessions compared (each a few ms; a broken tie-break fails within the first 100)."""


def _content(rng: random.Random, vocab: list[str], lines: int, turn: bool) -> str:
    """Lines of names and filler; repeated lines and empty ones make ties and elided runs."""
    out: list[str] = []
    for _ in range(lines):
        roll = rng.random()
        if out and roll < 0.12:
            out.append(rng.choice(out))  # a repeated line: same names, same cost
        elif roll < 0.2:
            out.append("")
        else:
            words = [
                rng.choice(vocab) if rng.random() < 0.4 else "word"
                for _ in range(rng.randint(1, 9))
            ]
            out.append(" ".join(words))
    if turn and rng.random() < 0.5:
        out.insert(rng.randint(0, len(out)), rng.choice(["```bash", "run_tool(x)"]))
        if out[-1] == "```bash":
            out.append(f"cat {rng.choice(vocab)}")
    return "\n".join(out)


def _uniform(rng: random.Random, vocab: list[str], turn: bool) -> str:
    """Lines of the same length holding one name each, ten per result: within an item (and
    between items of the same size and weights) lines tie on value per token."""
    return "\n".join(f"see {rng.choice(vocab)}" for _ in range(2 if turn else 10))


def _session(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    uniform = seed % 3 == 0
    if uniform:
        vocab = [f"name_{i}" for i in range(100, 100 + rng.choice([30, 300]))]
    else:
        vocab = [
            f"name_{i}" if i % 3 else f"src/m_{i}.py" for i in range(rng.choice([6, 20, 80, 400]))
        ]
    items: list[ContextItem] = []
    steps = rng.randint(3, 70)
    index = 0
    for step in range(steps):
        specs = [("assistant", rng.choice(TURN_KINDS)), ("tool_call", "action")]
        specs.append(("tool_result", "episodic"))
        if rng.random() < 0.15:
            specs.insert(0, ("user", rng.choice(["intent", "correction", "action"])))
        if rng.random() < 0.05:
            specs.append(("memory", "fact"))
        for source, kind in specs:
            turn = source == "assistant"
            lines = rng.randint(1, 4) if turn else rng.choice([1, 3, 10, 40])
            if uniform:
                content = _uniform(rng, vocab, turn)
                tokens = len(content) // 4
            else:
                content = _content(rng, vocab, lines, turn)
                per = rng.choice([0.0, 0.2, 0.25, 0.3])
                tokens = rng.choice(
                    [len(content) // 4, int(len(content) * per), 0 if rng.random() < 0.05 else 7]
                )
            items.append(
                ContextItem(
                    id=f"i{len(items)}",
                    content=content,
                    source=source,
                    kind=kind,
                    step=step,
                    message_index=None if rng.random() < 0.03 else index,
                    tokens=max(0, tokens),
                    pinned=rng.random() < 0.03,
                )
            )
            index += rng.choice([1, 1, 1, 2]) if rng.random() < 0.97 else 0  # equal indexes: ties
    stats = NameStats()
    for item in items:
        stats.add(item, frozenset(identifier_tokens(item.content)))
    paged: list[ContextItem] = []
    live: list[ContextItem] = []
    for item in items:
        if item.source in ("assistant", "tool_result") and rng.random() < 0.25:
            count = item.content.count("\n") + 1
            shown = tuple(sorted(rng.sample(range(count), rng.randint(0, min(count, 4)))))
            paged.append(replace(item, excerpt=shown or None))
        else:
            live.append(item)
    results = [i.id for i in items if i.source == "tool_result"]
    superseded = {r: rng.choice(results) for r in results if rng.random() < 0.2}
    embeddings = None
    if rng.random() < 0.3:
        vr = np.random.default_rng(seed)
        embeddings = {}
        base = vr.normal(size=8)
        for item in items:
            if item.source in ("user", "assistant"):
                v = base + vr.normal(scale=rng.choice([0.1, 3.0]), size=8)
                embeddings[item.id] = (v / np.linalg.norm(v)).astype(np.float32)
    settings = FsrsContextSettings.model_validate(
        {
            "protectedTurns": rng.choice([0, 1, 3, 12]),
            "protectedResults": rng.choice([0, 1, 2]),
            "shallowReach": rng.choice([0.0, 0.0, 1.5, 4.0]),
            "retentionWeight": rng.choice([0.0, 0.25, 1.0, 2.0]),
            "excerptWholeShare": rng.choice([0.3, 0.6, 1.0]),
            "rescueCosine": rng.choice([0.0, 0.7]),
        }
    )
    used = sum(i.tokens for i in live) + rng.randint(0, 50)
    scores = np.array(
        [0.5 if uniform else rng.choice([0.0, 0.3, 0.5, 0.5, 1.0, rng.random()]) for _ in live]
    )
    paged_scores = (
        None
        if rng.random() < 0.3
        else np.array([rng.choice([0.2, 0.5, rng.random()]) for _ in paged])
    )
    return {
        "items": live,
        "scores": scores,
        "budget_tokens": max(1, int(used * rng.choice([0.1, 0.4, 0.7, 0.9, 0.98]))),
        "used_tokens": used,
        "settings": settings,
        "threshold": rng.choice([0.8, 1.0]),
        "low_water": rng.choice([None, 0.5, 0.75, 0.95]),
        "current_step": steps - 1 + rng.choice([0, 0, 1, 5]),
        "stats": stats,
        "pointer_tokens": rng.choice([9, 9, 30]),
        "paged_out": paged if rng.random() < 0.8 else None,
        "paged_scores": paged_scores,
        "embeddings": embeddings,
        "superseded": superseded if rng.random() < 0.6 else None,
        "window": rng.random() < 0.3,
    }


def _as_lists(plan: EvictionPlan) -> dict[str, Any]:
    """Everything a plan says, in its order (dicts as lists of pairs)."""
    return {
        "to_warm": list(plan.to_warm),
        "to_live": list(plan.to_live),
        "excerpts": [(k, tuple(v)) for k, v in plan.excerpts.items()],
        "reasons": list(plan.reasons.items()),
        "report": list(plan.report),
    }


@pytest.mark.parametrize("seed", range(SEEDS))
def test_the_planner_chooses_what_the_reference_chooses(seed, monkeypatch):
    case = _session(seed)
    if case.pop("window"):  # the candidate window: few candidates, a small multiple of the target
        monkeypatch.setattr(levels_mod, "MAX_CANDIDATES", 25)
        monkeypatch.setattr(levels_mod, "WINDOW", 1.5)
    if not case["paged_out"]:
        case["paged_scores"] = None
    lines: dict[str, LineInfo] = {}

    def lines_of(item: ContextItem) -> LineInfo:  # cached as the session does
        found = lines.get(item.id)
        if found is None:
            found = lines[item.id] = line_info(item)
        return found

    args = {k: v for k, v in case.items() if k != "items"}
    expected = reference_plan(ItemBatch(case["items"]), lines_of=line_info, **args)
    got = plan_levels(ItemBatch(case["items"]), lines_of=lines_of, **args)
    assert _as_lists(got) == _as_lists(expected)
    # a second pass on the same batch (cached lines and weights) plans the same
    again = plan_levels(ItemBatch(case["items"]), lines_of=lines_of, **args)
    assert _as_lists(again) == _as_lists(expected)
    # a newer item takes over some names (and an older one is accounted again, taking back
    # what it holds): the cached pairs must follow the owners
    stats = case["stats"]
    rng = random.Random(seed)
    names = sorted(stats.ids)
    newest = ContextItem(
        id="newer",
        content=" ".join(rng.sample(names, len(names) // 2)),
        source="tool_result",
        kind="episodic",
        step=case["current_step"],
        message_index=10_000,
        tokens=5,
    )
    stats.add(newest, frozenset(identifier_tokens(newest.content)))
    for number, older in enumerate(rng.sample(case["items"], len(case["items"]) // 3)):
        again = replace(older, message_index=20_000 + number)
        stats.add(again, frozenset(identifier_tokens(older.content)))
    expected = reference_plan(ItemBatch(case["items"]), lines_of=line_info, **args)
    got = plan_levels(ItemBatch(case["items"]), lines_of=lines_of, **args)
    assert _as_lists(got) == _as_lists(expected)


def test_the_random_sessions_exercise_every_branch():
    """The seeds above reach excerpts, stubs, page-ins, superseded results, protected turns and
    the over-budget stage (else the comparison would prove little)."""
    reasons: set[str] = set()
    to_live = excerpts = reports = 0
    for seed in range(SEEDS):
        case = _session(seed)
        case.pop("window")
        if not case["paged_out"]:
            case["paged_scores"] = None
        items = ItemBatch(case.pop("items"))
        plan = reference_plan(items, lines_of=line_info, **case)
        reasons.update(plan.reasons.values())
        to_live += len(plan.to_live)
        excerpts += sum(1 for v in plan.excerpts.values() if v)
        reports += bool(plan.report)
    assert {
        levels_mod.EXCERPT,
        levels_mod.LOW_VALUE,
        levels_mod.SUPERSEDED,
        levels_mod.PROTECTED,
        "paged in",
    } <= reasons
    assert to_live > 20 and excerpts > 200 and reports > 5
