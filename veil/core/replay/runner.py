"""Replay recorded sessions through prompt policies and add up the measures.

For every step t of a trajectory each policy builds the prompt it would send (from what came
before t), and the runner counts its cl100k_base tokens (message contents only), the step's
references and the policy's misses (DESIGN.md "Measures"). The result follows the JSON
contract of issue 3 ("`veil replay`")::

    {"files": [{"file", "format", "steps", "veil": {...}, "full": {...}, "masking": {...},
                "recency": {...}}],
     "total": {"steps", "veil": {...}, "full": {...}, "masking": {...}, "recency": {...}}}

Each policy object holds ``prompt_tokens`` (summed over steps), ``peak_prompt_tokens``,
``references`` and ``misses`` (summed over steps), and ``evictions`` for a policy that reports
them (veil). ``veil`` is present only when a veil policy is passed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from veil.core.errors import BadRequest
from veil.core.replay.baselines import (
    Message,
    full_prompt,
    masking_prompt,
    recency_prompt,
)
from veil.core.replay.counting import TokenCounter, message_text
from veil.core.replay.formats import Trajectory
from veil.core.replay.measures import SEPARATOR, misses, references_in

BASELINES = ("full", "masking", "recency")


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
        :data:`~veil.core.replay.measures.SEPARATOR`).
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
    """Baseline ``masking``: observations older than the 10 most recent are masked."""

    name = "masking"

    def prompt_for_step(self, traj: Trajectory, t: int) -> tuple[list[Message], str]:
        messages = masking_prompt(traj, t)
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


@dataclass
class PolicyResult:
    """Measures of one policy, summed over steps (and over files in a total).

    Attributes:
        prompt_tokens: cl100k_base tokens of the prompt, summed over steps.
        peak_prompt_tokens: the largest single-step prompt, tokens.
        references: references summed over steps (the same for every policy of a file).
        misses: references absent from the policy's prompt, summed over steps.
        evictions: evictions reported by the policy (veil); None for the baselines.
        over_budget_steps: steps whose prompt exceeded the budget (not in the JSON contract;
            expected for ``full`` and ``masking``, never for veil).
    """

    prompt_tokens: int = 0
    peak_prompt_tokens: int = 0
    references: int = 0
    misses: int = 0
    evictions: int | None = None
    over_budget_steps: int = 0

    def add_step(self, tokens: int, references: int, missed: int, budget: int) -> None:
        """Account one step: its prompt size (tokens) and its reference / miss counts."""
        self.prompt_tokens += tokens
        self.peak_prompt_tokens = max(self.peak_prompt_tokens, tokens)
        self.references += references
        self.misses += missed
        if tokens > budget:
            self.over_budget_steps += 1

    def add(self, other: PolicyResult) -> None:
        """Fold another file's result into this total (sums; peak is the max)."""
        self.prompt_tokens += other.prompt_tokens
        self.peak_prompt_tokens = max(self.peak_prompt_tokens, other.peak_prompt_tokens)
        self.references += other.references
        self.misses += other.misses
        self.over_budget_steps += other.over_budget_steps
        if other.evictions is not None:
            self.evictions = (self.evictions or 0) + other.evictions

    def to_json(self) -> dict[str, int]:
        """The contract's policy object: prompt_tokens, peak_prompt_tokens, references, misses,
        plus evictions when the policy reports them."""
        out = {
            "prompt_tokens": self.prompt_tokens,
            "peak_prompt_tokens": self.peak_prompt_tokens,
            "references": self.references,
            "misses": self.misses,
        }
        if self.evictions is not None:
            out["evictions"] = self.evictions
        return out


def _check_budget(budget: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise BadRequest(f"budget: expected a positive whole number of tokens, got {budget!r}")


def run_policies(
    traj: Trajectory, policies: Sequence[Policy], budget: int, counter: TokenCounter | None = None
) -> dict[str, PolicyResult]:
    """Replay ``traj`` through ``policies`` (fresh ones, called in step order) and measure them.

    Args:
        traj: the recorded session.
        policies: policies with distinct names.
        budget: the token budget (only counted here: steps over it are tallied in
            ``over_budget_steps``; the policies enforce it themselves).
        counter: a token counter to share (and whose cache to reuse); a new one by default.

    Returns:
        ``{policy name: PolicyResult}`` in the order of ``policies``.

    Raises:
        BadRequest: ``budget`` is not a positive integer, or two policies share a name.
    """
    _check_budget(budget)
    names = [p.name for p in policies]
    if len(set(names)) != len(names):
        raise BadRequest(f"policies: names must be distinct, got {names}")
    count = counter or TokenCounter()
    results = {name: PolicyResult() for name in names}
    earlier = ""  # observations of steps before t, joined by SEPARATOR
    for t, step in enumerate(traj.steps):
        refs = references_in(step.assistant, traj.system, traj.task, earlier)
        for policy in policies:
            messages, match_text = policy.prompt_for_step(traj, t)
            tokens = sum(count(message_text(m)) for m in messages)
            results[policy.name].add_step(tokens, len(refs), len(misses(refs, match_text)), budget)
        if step.observation is not None:
            earlier = f"{earlier}{SEPARATOR}{step.observation}" if earlier else step.observation
    for policy in policies:
        evictions = getattr(policy, "evictions", None)
        if evictions is not None:
            results[policy.name].evictions = int(evictions)
    return results


def baseline_policies(budget: int, counter: Callable[[str], int]) -> list[Policy]:
    """Fresh ``full``, ``masking`` and ``recency`` policies (recency under ``budget`` tokens)."""
    return [FullHistory(), ObservationMasking(), RecencyTruncation(budget, counter)]


def run_baselines(traj: Trajectory, budget: int) -> dict[str, PolicyResult]:
    """Measure the three baselines on ``traj`` at ``budget`` tokens.

    Returns ``{"full": ..., "masking": ..., "recency": ...}``.

    Raises:
        BadRequest: ``budget`` is not a positive integer.
    """
    _check_budget(budget)
    counter = TokenCounter()
    return run_policies(traj, baseline_policies(budget, counter), budget, counter)


def replay(
    trajectories: Sequence[Trajectory],
    policies: Sequence[PolicyFactory] = (),
    budget: int = 8000,
) -> dict[str, Any]:
    """Replay every trajectory through the given policies and the three baselines.

    Args:
        trajectories: recorded sessions (see :func:`~veil.core.replay.formats.load_trajectory`).
        policies: factories ``(traj, budget) -> Policy`` for policies besides the baselines
            (veil's); each is called once per trajectory. Their names come first in the output.
        budget: token budget (cl100k_base), default 8,000 (issue 3's replay benchmark).

    Returns:
        The issue 3 JSON contract: ``{"files": [{"file", "format", "steps", <policy>: {...},
        "full", "masking", "recency"}], "total": {"steps", <policy>: {...}, "full", "masking",
        "recency"}}``; totals sum every figure except ``peak_prompt_tokens`` (the max).

    Raises:
        BadRequest: ``budget`` is not a positive integer, or a policy is named like a baseline
            or like another policy.
    """
    _check_budget(budget)
    files: list[dict[str, Any]] = []
    totals: dict[str, PolicyResult] = {}
    total_steps = 0
    for traj in trajectories:
        counter = TokenCounter()  # per file: cached texts are that file's messages
        chosen = [make(traj, budget) for make in policies]
        results = run_policies(traj, chosen + baseline_policies(budget, counter), budget, counter)
        entry: dict[str, Any] = {"file": traj.path, "format": traj.format, "steps": len(traj.steps)}
        for name, result in results.items():
            entry[name] = result.to_json()
            totals.setdefault(name, PolicyResult()).add(result)
        files.append(entry)
        total_steps += len(traj.steps)
    total: dict[str, Any] = {"steps": total_steps}
    if not totals:  # no file: the contract's keys with zeros
        totals = {name: PolicyResult() for name in BASELINES}
    for name, result in totals.items():
        total[name] = result.to_json()
    return {"files": files, "total": total}
