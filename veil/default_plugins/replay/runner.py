"""Replay recorded sessions through prompt policies and add up the measures.

For every step t of a trajectory each policy builds the prompt it would send (from what came
before t), and the runner counts its cl100k_base tokens (message contents only), the step's
references, the policy's misses and what a prompt cache reuses of its previous prompt
(DESIGN.md "Measures": "Replay" and "Cache"). The result follows the JSON contract of issue 3
("`veil replay`"), extended by issue 18::

    {"files": [{"file", "format", "steps", "veil": {...}, "full": {...}, "masking": {...},
                "recency": {...}, "masking-blocks": {...}, "recency-hysteresis": {...},
                "masking-budget": {...}}],
     "total": {"steps", "veil": {...}, "full": {...}, "masking": {...}, "recency": {...},
               "masking-blocks": {...}, "recency-hysteresis": {...}, "masking-budget": {...}}}

Each policy object holds, in this order:

* ``prompt_tokens``: cl100k_base tokens of the prompt, summed over steps;
* ``peak_prompt_tokens``: the largest single-step prompt (the max over files in a total);
* ``references``, ``misses``: summed over steps;
* ``evictions``: only for a policy that reports them (veil);
* ``cached_tokens``: tokens of the leading messages of each step's prompt identical (role,
  content, tool calls) to the policy's previous prompt, summed over steps (step 0: none);
* ``effective_tokens``: ``(prompt_tokens - cached_tokens) + cache_price x cached_tokens``, a
  float (cache price 0.1 by default: what current providers bill cached input);
* ``prefix_breaks``: steps t >= 1 whose message 0 (the system message) differs from the
  previous prompt's, so nothing is reused;
* ``over_budget_steps``: steps whose prompt exceeded the budget (expected for ``full``,
  ``masking`` and ``masking-blocks``; never for veil, the recency ones nor ``masking-budget``,
  unless system + task alone exceed the budget);
* ``line_misses`` (issue 29): references whose source line stands nowhere in the prompt, summed
  over steps (:func:`~veil.default_plugins.replay.measures.line_misses`; at least ``misses``);
* ``per_step`` (per file, only when asked for): ``[{"prompt_tokens", "cached_tokens",
  "misses", "line_misses"}]``, one entry per step.

The keys of issue 3 come first and keep their meaning. ``veil`` is present only when a veil
policy is passed; the baselines present are the ones asked for (all six by default, in the
order of :data:`BASELINES`). See :mod:`veil.default_plugins.replay.cache` for the cache measure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from veil import BadRequest
from veil.default_plugins.replay.baselines import (
    MASKING_BLOCK,
    MASKING_KEEP,
    Message,
    full_prompt,
    masking_budget_prompt,
    masking_prompt,
    recency_hysteresis_prompt,
    recency_prompt,
)
from veil.default_plugins.replay.cache import (
    CACHE_PRICE,
    CacheTracker,
    check_cache_price,
    effective_tokens,
)
from veil.default_plugins.replay.counting import TokenCounter, message_text
from veil.default_plugins.replay.formats import Trajectory
from veil.default_plugins.replay.measures import (
    SEPARATOR,
    RecordedLines,
    line_misses,
    misses,
    references_in,
)

BASELINES = (
    "full",
    "masking",
    "recency",
    "masking-blocks",
    "recency-hysteresis",
    "masking-budget",
)
"""Names of the baseline policies, in the order they appear in the JSON: issue 3's three,
then issue 18's two cache-aware ones, then ``masking-budget`` (masking held to the budget,
added last so the earlier keys keep their places)."""


@runtime_checkable
class Policy(Protocol):
    """A way of building the prompt for each replayed step.

    The runner calls :meth:`prompt_for_step` for ``t = 0, 1, ..., len(traj.steps) - 1`` in
    order, on a fresh policy per trajectory, so a stateful policy (veil's session) may feed
    itself steps ``0..t-1`` when asked for step ``t``. It must not read step ``t`` or later.

    A policy that evicts exposes ``evictions`` (int, evictions so far in this trajectory); the
    runner reads it after the last step.
    """

    name: str

    def prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[dict[str, Any]], str]:
        """Return ``(messages, match_text)`` for step ``t``.

        ``messages``: the OpenAI chat messages sent; their ``content`` strings are what is
        counted (tokens). ``match_text``: the text references are matched against (veil leaves
        out its manifest and pointer stubs; a baseline gives all contents joined by
        :data:`~veil.default_plugins.replay.measures.SEPARATOR`).
        """
        ...


PolicyFactory = Callable[[Trajectory, int], Policy]
"""Makes a fresh policy for one trajectory: ``factory(traj, budget) -> Policy``."""


def _joined(messages: list[Message]) -> str:
    return SEPARATOR.join(m["content"] for m in messages)


class FullHistory:
    """Baseline ``full``: every earlier message verbatim."""

    name = "full"

    def prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[Message], str]:
        messages = full_prompt(traj, t)
        return messages, _joined(messages)


class ObservationMasking:
    """Baseline ``masking``: observations older than the ``keep`` most recent (default 10,
    :data:`~veil.default_plugins.replay.baselines.MASKING_KEEP`) are masked."""

    name = "masking"

    def __init__(self, keep: int = MASKING_KEEP) -> None:
        self.keep = keep

    def prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[Message], str]:
        messages = masking_prompt(traj, t, keep=self.keep)
        return messages, _joined(messages)


class MaskingBudget:
    """Baseline ``masking-budget``: the ``masking`` prompt (``keep`` observations verbatim,
    default 10), cut as ``recency`` cuts (oldest messages first, system + task kept) when it
    exceeds ``budget`` tokens (see
    :func:`~veil.default_plugins.replay.baselines.masking_budget_prompt`)."""

    name = "masking-budget"

    def __init__(self, budget: int, count: Callable[[str], int], keep: int = MASKING_KEEP) -> None:
        self.budget = budget
        self.count = count
        self.keep = keep

    def prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[Message], str]:
        messages = masking_budget_prompt(traj, t, self.budget, self.count, self.keep)
        return messages, _joined(messages)


class MaskingBlocks:
    """Baseline ``masking-blocks``: masking (the ``keep`` newest observations kept, default 10)
    that masks ``block`` more observations at a time (default 10,
    :data:`~veil.default_plugins.replay.baselines.MASKING_BLOCK`)."""

    name = "masking-blocks"

    def __init__(self, block: int = MASKING_BLOCK, keep: int = MASKING_KEEP) -> None:
        self.block = block
        self.keep = keep

    def prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[Message], str]:
        messages = masking_prompt(traj, t, keep=self.keep, block=self.block)
        return messages, _joined(messages)


class RecencyTruncation:
    """Baseline ``recency``: system + task + the newest messages that fit ``budget`` tokens."""

    name = "recency"

    def __init__(self, budget: int, count: Callable[[str], int]) -> None:
        self.budget = budget
        self.count = count

    def prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[Message], str]:
        messages = recency_prompt(traj, t, self.budget, self.count)
        return messages, _joined(messages)


class RecencyHysteresis:
    """Baseline ``recency-hysteresis``: recency truncation that cuts back to 70% of the budget
    when the budget is exceeded, then only appends (see
    :func:`~veil.default_plugins.replay.baselines.recency_hysteresis_prompt`).

    It remembers where its previous prompt started. Asked for a step other than the next one
    (a fresh policy, or out of order), it rebuilds that state from step 0, so the prompt for
    step t is always the one a run through steps 0..t gives.
    """

    name = "recency-hysteresis"

    def __init__(self, budget: int, count: Callable[[str], int]) -> None:
        self.budget = budget
        self.count = count
        self._next = 0  # the step whose prompt the state below leads to
        self._start = 0
        self._traj: Trajectory | None = None

    def prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[Message], str]:
        if traj is not self._traj or t != self._next:
            self._traj, self._next, self._start = traj, 0, 0
            while self._next < t:
                _, self._start = recency_hysteresis_prompt(
                    traj, self._next, self.budget, self.count, self._start
                )
                self._next += 1
        messages, self._start = recency_hysteresis_prompt(
            traj, t, self.budget, self.count, self._start
        )
        self._next = t + 1
        return messages, _joined(messages)


@dataclass
class StepMeasure:
    """One step of one policy: its prompt's tokens, the cached part, the references missed
    (identifier and line misses)."""

    prompt_tokens: int
    cached_tokens: int
    misses: int
    line_misses: int = 0

    def to_json(self) -> dict[str, int]:
        """``{"prompt_tokens", "cached_tokens", "misses", "line_misses"}``."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "misses": self.misses,
            "line_misses": self.line_misses,
        }


@dataclass
class PolicyResult:
    """Measures of one policy, summed over steps (and over files in a total).

    Attributes:
        prompt_tokens: cl100k_base tokens of the prompt, summed over steps.
        peak_prompt_tokens: the largest single-step prompt, tokens.
        references: references summed over steps (the same for every policy of a file).
        misses: references absent from the policy's prompt, summed over steps.
        line_misses: references no line of whose source stands in the policy's prompt, summed
            over steps (:func:`~veil.default_plugins.replay.measures.line_misses`).
        evictions: evictions reported by the policy (veil); None for the baselines.
        over_budget_steps: steps whose prompt exceeded the budget (expected for ``full``,
            ``masking`` and ``masking-blocks``; never for veil, the recency ones nor
            ``masking-budget``, unless system + task alone exceed the budget).
        cached_tokens: tokens of each step's prompt shared with the previous step's prompt
            (leading identical messages, :class:`~veil.default_plugins.replay.cache.CacheTracker`),
            summed over steps.
        prefix_breaks: steps t >= 1 whose message 0 changed.
        steps: the per-step measures, in step order (one file's result only; a total keeps
            none).
    """

    prompt_tokens: int = 0
    peak_prompt_tokens: int = 0
    references: int = 0
    misses: int = 0
    evictions: int | None = None
    over_budget_steps: int = 0
    cached_tokens: int = 0
    prefix_breaks: int = 0
    line_misses: int = 0
    steps: list[StepMeasure] = field(default_factory=list)

    def add_step(
        self,
        tokens: int,
        references: int,
        missed: int,
        budget: int,
        cached: int = 0,
        prefix_break: bool = False,
        line_missed: int = 0,
    ) -> None:
        """Account one step: its prompt size (tokens), its reference / miss counts (identifier
        misses ``missed``, line misses ``line_missed``), and the tokens it shares with the
        previous prompt (``cached``; ``prefix_break`` when its message 0 changed)."""
        self.prompt_tokens += tokens
        self.peak_prompt_tokens = max(self.peak_prompt_tokens, tokens)
        self.references += references
        self.misses += missed
        self.line_misses += line_missed
        self.cached_tokens += cached
        self.prefix_breaks += int(prefix_break)
        if tokens > budget:
            self.over_budget_steps += 1
        self.steps.append(StepMeasure(tokens, cached, missed, line_missed))

    def add(self, other: PolicyResult) -> None:
        """Fold another file's result into this total (sums; peak is the max; per-step
        measures are not carried into a total)."""
        self.prompt_tokens += other.prompt_tokens
        self.peak_prompt_tokens = max(self.peak_prompt_tokens, other.peak_prompt_tokens)
        self.references += other.references
        self.misses += other.misses
        self.line_misses += other.line_misses
        self.over_budget_steps += other.over_budget_steps
        self.cached_tokens += other.cached_tokens
        self.prefix_breaks += other.prefix_breaks
        if other.evictions is not None:
            self.evictions = (self.evictions or 0) + other.evictions

    def effective_tokens(self, price: float = CACHE_PRICE) -> float:
        """Uncached tokens + ``price`` x cached tokens, over the steps accounted."""
        return effective_tokens(self.prompt_tokens, self.cached_tokens, price)

    def to_json(self, price: float = CACHE_PRICE, per_step: bool = False) -> dict[str, Any]:
        """The contract's policy object (see the module docstring): prompt_tokens,
        peak_prompt_tokens, references, misses, evictions (when reported), cached_tokens,
        effective_tokens (at ``price``), prefix_breaks, over_budget_steps, line_misses, and
        ``per_step`` when asked for."""
        out: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "peak_prompt_tokens": self.peak_prompt_tokens,
            "references": self.references,
            "misses": self.misses,
        }
        if self.evictions is not None:
            out["evictions"] = self.evictions
        out["cached_tokens"] = self.cached_tokens
        out["effective_tokens"] = round(self.effective_tokens(price), 6)
        out["prefix_breaks"] = self.prefix_breaks
        out["over_budget_steps"] = self.over_budget_steps
        out["line_misses"] = self.line_misses
        if per_step:
            out["per_step"] = [s.to_json() for s in self.steps]
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PolicyResult:
        """Read back a policy object of the contract (e.g. to add up files of several
        replays); per-step measures are not read. ``line_misses`` is optional (results written
        before issue 29 lack it): absent, it reads as 0.

        Raises:
            BadRequest: a count is missing or not a whole number (the message names it).
        """
        counts: dict[str, int] = {}
        for key in (
            "prompt_tokens",
            "peak_prompt_tokens",
            "references",
            "misses",
            "cached_tokens",
            "prefix_breaks",
            "over_budget_steps",
        ):
            value = obj.get(key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise BadRequest(
                    f"{key}: expected a whole number in the policy object, got {value!r}"
                )
            counts[key] = value
        line_missed = obj.get("line_misses", 0)
        if isinstance(line_missed, bool) or not isinstance(line_missed, int):
            raise BadRequest(
                f"line_misses: expected a whole number in the policy object, got {line_missed!r}"
            )
        evictions = obj.get("evictions")
        return cls(
            **counts,
            line_misses=line_missed,
            evictions=int(evictions) if evictions is not None else None,
        )


def _check_budget(budget: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise BadRequest(f"budget: expected a positive whole number of tokens, got {budget!r}")


def run_policies(
    traj: Trajectory,
    policies: Sequence[Policy],
    budget: int,
    counter: Callable[[str], int] | None = None,
) -> dict[str, PolicyResult]:
    """Replay ``traj`` through ``policies`` (fresh ones, called in step order) and measure them.

    Args:
        traj: the recorded session.
        policies: policies with distinct names.
        budget: the token budget (only counted here: steps over it are tallied in
            ``over_budget_steps``; the policies enforce it themselves). A policy with a
            ``budget`` attribute of its own (a recency one swept over budgets) is counted
            against that instead.
        counter: tokens of a text, shared with the policies (a :class:`TokenCounter`, whose
            cache is reused); a new :class:`TokenCounter` by default.

    Returns:
        ``{policy name: PolicyResult}`` in the order of ``policies``, with per-step measures.

    Raises:
        BadRequest: ``budget`` is not a positive integer, or two policies share a name.
    """
    _check_budget(budget)
    names = [p.name for p in policies]
    if len(set(names)) != len(names):
        raise BadRequest(f"policies: names must be distinct, got {names}")
    count = counter or TokenCounter()
    results = {name: PolicyResult() for name in names}
    caches = {name: CacheTracker() for name in names}
    budgets = {p.name: getattr(p, "budget", budget) for p in policies}
    earlier = ""  # observations of steps before t, joined by SEPARATOR
    recorded = RecordedLines()  # assistant turns and observations before t: line-miss sources
    for t, step in enumerate(traj.steps):
        refs = references_in(step.assistant, traj.system, traj.task, earlier)
        for policy in policies:
            messages, match_text = policy.prompt_for_step(traj, t)
            sizes = [count(message_text(m)) for m in messages]
            cached, prefix_break = caches[policy.name].step(messages, sizes)
            missed = misses(refs, match_text)
            results[policy.name].add_step(
                sum(sizes),
                len(refs),
                len(missed),
                budgets[policy.name],
                cached,
                prefix_break,
                len(line_misses(refs, match_text, recorded, missed)) if refs else 0,
            )
        recorded.add(step.assistant)
        if step.observation is not None:
            recorded.add(step.observation)
            earlier = f"{earlier}{SEPARATOR}{step.observation}" if earlier else step.observation
    for policy in policies:
        evictions = getattr(policy, "evictions", None)
        if evictions is not None:
            results[policy.name].evictions = int(evictions)
    return results


def pick_known(names: Sequence[str], known: Sequence[str], kind: str) -> tuple[str, ...]:
    """The ``names`` chosen from ``known``, in ``known``'s order, once each.

    ``kind`` names one item in the error (``"baseline"``, ``"policy"``).

    Raises:
        BadRequest: a name is not in ``known`` (the message, under ``policies:``, quotes the
            unknown names and lists the known ones).
    """
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BadRequest(
            f"policies: unknown {kind} {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
        )
    return tuple(n for n in known if n in names)


def check_baselines(names: Sequence[str]) -> tuple[str, ...]:
    """Validate a choice of baselines; returns them in :data:`BASELINES` order, once each.

    Raises:
        BadRequest: a name is not a baseline (the message lists the known ones).
    """
    return pick_known(names, BASELINES, "baseline")


def baseline_policies(
    budget: int, counter: Callable[[str], int], names: Sequence[str] = BASELINES
) -> list[Policy]:
    """Fresh baseline policies, in :data:`BASELINES` order: those in ``names`` (all six by
    default; the recency ones and ``masking-budget`` under ``budget`` tokens).

    Raises:
        BadRequest: a name is not a baseline.
    """
    makers: dict[str, Callable[[], Policy]] = {
        "full": FullHistory,
        "masking": ObservationMasking,
        "recency": lambda: RecencyTruncation(budget, counter),
        "masking-blocks": MaskingBlocks,
        "recency-hysteresis": lambda: RecencyHysteresis(budget, counter),
        "masking-budget": lambda: MaskingBudget(budget, counter),
    }
    return [makers[n]() for n in check_baselines(names)]


def run_baselines(
    traj: Trajectory, budget: int, names: Sequence[str] = BASELINES
) -> dict[str, PolicyResult]:
    """Measure the baselines in ``names`` (default: all six) on ``traj`` at ``budget`` tokens.

    Returns ``{"full": ..., "masking": ..., "recency": ..., "masking-blocks": ...,
    "recency-hysteresis": ..., "masking-budget": ...}`` (the names asked for, in
    :data:`BASELINES` order).

    Raises:
        BadRequest: ``budget`` is not a positive integer, or a name is not a baseline.
    """
    _check_budget(budget)
    counter = TokenCounter()
    return run_policies(traj, baseline_policies(budget, counter, names), budget, counter)


def replay(
    trajectories: Sequence[Trajectory],
    policies: Sequence[PolicyFactory] = (),
    budget: int = 8000,
    *,
    baselines: Sequence[str] = BASELINES,
    cache_price: float = CACHE_PRICE,
    per_step: bool = False,
) -> dict[str, Any]:
    """Replay every trajectory through the given policies and the baselines.

    Args:
        trajectories: recorded sessions (see
            :func:`~veil.default_plugins.replay.formats.load_trajectory`).
        policies: factories ``(traj, budget) -> Policy`` for policies besides the baselines
            (veil's); each is called once per trajectory. Their names come first in the output.
        budget: token budget (cl100k_base), default 8,000 (issue 3's replay benchmark).
        baselines: which baselines to run (default all of :data:`BASELINES`; order in the
            output is always :data:`BASELINES` order).
        cache_price: price of a cached input token relative to an uncached one, from 0 to 1
            (default 0.1), for ``effective_tokens``.
        per_step: add each file's per-step measures (``per_step`` in its policy objects).

    Returns:
        The JSON contract of the module docstring: ``{"files": [{"file", "format", "steps",
        <policy>: {...}, <baseline>: {...}}], "total": {"steps", <policy>: {...},
        <baseline>: {...}}}``; totals sum every count except ``peak_prompt_tokens`` (the max),
        and their ``effective_tokens`` is computed from the summed counts.

    Raises:
        BadRequest: ``budget`` is not a positive integer, ``cache_price`` is not from 0 to 1,
            a baseline name is unknown, or a policy is named like a baseline or like another
            policy.
    """
    _check_budget(budget)
    price = check_cache_price(cache_price)
    chosen_baselines = check_baselines(baselines)
    files: list[dict[str, Any]] = []
    totals: dict[str, PolicyResult] = {}
    total_steps = 0
    for traj in trajectories:
        counter = TokenCounter()  # per file: cached texts are that file's messages
        chosen = [make(traj, budget) for make in policies]
        taken = [p.name for p in chosen if p.name in BASELINES]
        if taken:
            raise BadRequest(f"policies: names must be distinct from the baselines', got {taken}")
        everyone = chosen + baseline_policies(budget, counter, chosen_baselines)
        results = run_policies(traj, everyone, budget, counter)
        entry: dict[str, Any] = {"file": traj.path, "format": traj.format, "steps": len(traj.steps)}
        for name, result in results.items():
            entry[name] = result.to_json(price, per_step=per_step)
            totals.setdefault(name, PolicyResult()).add(result)
        files.append(entry)
        total_steps += len(traj.steps)
    total: dict[str, Any] = {"steps": total_steps}
    if not totals:  # no file: the contract's keys with zeros
        totals = {name: PolicyResult() for name in chosen_baselines}
    for name, result in totals.items():
        total[name] = result.to_json(price)
    return {"files": files, "total": total}
