"""Baseline prompts veil is compared with in ``veil replay`` (DESIGN.md "Measures").

The prompt for step t is built from what came before step t only (no look-ahead): the system
prompt, the task, then for each earlier step its assistant message (text with the action) and
its observation (a user message). Six baselines keep different parts of that history:

* ``full``: everything;
* ``masking``: everything, but observations older than the 10 most recent are replaced by
  ``[observation masked]`` (seed 000's observation masking);
* ``masking-blocks``: masking that masks 10 more observations at a time, so the prompt's prefix
  changes once per 10 observations instead of at every step (:func:`masking_prompt` with
  ``block=10``);
* ``recency``: system + task, then the newest messages, walking back from the newest, while the
  total fits the token budget, stopping at the first message that does not fit;
* ``recency-hysteresis``: recency truncation that, when the prompt would exceed the budget,
  cuts back to 70% of it and then only appends until the budget is exceeded again
  (:func:`recency_hysteresis_prompt`);
* ``masking-budget``: the ``masking`` prompt, held to the token budget by cutting its oldest
  messages as ``recency`` does when it exceeds the budget (:func:`masking_budget_prompt`): what
  a user of masking gets from a provider whose context window is the budget.

The two cache-aware ones (issue 18, DESIGN.md "Measures", "Cache") are what a careful user could
configure in five minutes: they keep the prompt's prefix put for several steps, so a provider's
prompt cache can reuse it.
"""

from __future__ import annotations

from collections.abc import Callable

from veil.default_plugins.replay.formats import Trajectory

MASKED_OBSERVATION = "[observation masked]"
"""Text that stands in for a masked observation (DESIGN.md "Measures")."""

MASKING_KEEP = 10
"""Observations kept verbatim by the masking baseline: the 10 most recent (DESIGN.md)."""

MASKING_BLOCK = 10
"""Observations the ``masking-blocks`` baseline masks at a time (issue 18's table)."""

HYSTERESIS_LOW = 0.7
"""Fraction of the budget ``recency-hysteresis`` cuts back to when the budget is exceeded
(issue 18's table: "cut to 70% of the budget when it is exceeded")."""

Message = dict[str, str]


def head_messages(traj: Trajectory) -> list[Message]:
    """The fixed head of every prompt: the system prompt and the task (each if non-empty)."""
    head: list[Message] = []
    if traj.system:
        head.append({"role": "system", "content": traj.system})
    if traj.task:
        head.append({"role": "user", "content": traj.task})
    return head


def history_messages(traj: Trajectory, t: int) -> list[Message]:
    """Messages of steps ``0..t-1`` in order: each assistant message, then its observation (as a
    user message) when it has one. Steps at ``t`` or later are never read."""
    messages: list[Message] = []
    for step in traj.steps[:t]:
        messages.append({"role": "assistant", "content": step.assistant})
        if step.observation is not None:
            messages.append({"role": "user", "content": step.observation})
    return messages


def full_prompt(traj: Trajectory, t: int) -> list[Message]:
    """The full-history prompt for step ``t``: head + every earlier message."""
    return head_messages(traj) + history_messages(traj, t)


def masked_count(due: int, block: int = 1) -> int:
    """How many of the ``due`` oldest observations are masked when masking goes ``block`` at a
    time: ``block * floor(due / block)``.

    ``due`` counts the observations older than the kept ones. Masking in blocks masks nothing
    until ``block`` observations are due, then all of them at once; ``due`` grows by at most
    one per step, so the masked set changes once per ``block`` observations. ``block=1`` masks
    every due observation (seed 000's rule).

    Raises:
        ValueError: ``block`` is below 1 or ``due`` is negative.
    """
    if block < 1:
        raise ValueError(f"block: expected at least 1, got {block}")
    if due < 0:
        raise ValueError(f"due: expected at least 0, got {due}")
    return due - due % block


def masking_prompt(
    traj: Trajectory, t: int, keep: int = MASKING_KEEP, block: int = 1
) -> list[Message]:
    """The observation-masking prompt for step ``t``.

    Like :func:`full_prompt`, but of the observations of steps ``0..t-1`` the older ones,
    beyond the ``keep`` most recent, are *due*; the oldest :func:`masked_count` (``due``,
    ``block``) of them become :data:`MASKED_OBSERVATION` (the message stays, so call and
    result remain paired). ``block=1`` is the ``masking`` baseline (every due observation
    masked); ``block=10`` is ``masking-blocks``: at most 9 due observations stay verbatim
    until the tenth is due, then all ten are masked in the same step.

    Raises:
        ValueError: ``block`` is below 1.
    """
    with_observation = [i for i, s in enumerate(traj.steps[:t]) if s.observation is not None]
    due = max(0, len(with_observation) - keep)
    masked = set(with_observation[: masked_count(due, block)])
    messages = head_messages(traj)
    for i, step in enumerate(traj.steps[:t]):
        messages.append({"role": "assistant", "content": step.assistant})
        if step.observation is not None:
            content = MASKED_OBSERVATION if i in masked else step.observation
            messages.append({"role": "user", "content": content})
    return messages


def newest_that_fit(
    messages: list[Message], used: int, limit: float, count: Callable[[str], int]
) -> int:
    """Start index of the newest messages that fit: walking back from the last message, each is
    taken while ``used`` plus the tokens taken so far stays within ``limit``; the walk stops at
    the first message that does not fit (an older, smaller one is not taken). Returns
    ``len(messages)`` when not even the last one fits."""
    total = used
    start = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        size = count(messages[i]["content"])
        if total + size > limit:
            break
        total += size
        start = i
    return start


def recency_prompt(
    traj: Trajectory, t: int, budget: int, count: Callable[[str], int]
) -> list[Message]:
    """The recency-truncation prompt for step ``t`` under ``budget`` tokens.

    System + task always; then earlier messages from the newest backwards, each added while the
    running total (``count`` over contents, in tokens) stays within ``budget``; the walk stops at
    the first message that does not fit (an older, smaller one is not taken). If system + task
    alone exceed the budget, the prompt is just those two (nothing can be cut without losing the
    task).
    """
    head = head_messages(traj)
    history = history_messages(traj, t)
    used = sum(count(m["content"]) for m in head)
    return head + history[newest_that_fit(history, used, budget, count) :]


def masking_budget_prompt(
    traj: Trajectory,
    t: int,
    budget: int,
    count: Callable[[str], int],
    keep: int = MASKING_KEEP,
) -> list[Message]:
    """The ``masking-budget`` prompt for step ``t``: seed 000's masking held to ``budget`` tokens.

    The rule: take the ``masking`` prompt (:func:`masking_prompt`, ``block=1``). If its tokens
    (``count`` over contents) are within ``budget``, it is sent unchanged. Otherwise its history
    part (everything after system + task) is cut as :func:`recency_prompt` cuts the plain
    history: system + task always stay; then the newest (masked or verbatim) messages, walking
    back from the newest, while the running total stays within ``budget``, stopping at the
    first message that does not fit (:func:`newest_that_fit`). If system + task alone exceed
    the budget, the prompt is just those two.

    Why it exists (issue 18): ``masking`` alone is never held to the budget (over the 84
    mini-swe-agent recordings at 8,000 tokens, 2,912 of 6,326 steps exceed it), while veil is
    held to it at every step. A user whose provider's context window is the budget cannot send
    masking's prompts as they are; what they get is masking plus cutting the oldest messages
    until the prompt fits. This baseline compares veil with masking at equal budget.

    Args:
        traj: the recorded session.
        t: the step whose prompt is built (messages of steps ``0..t-1`` only).
        budget: the token budget.
        count: tokens of a text.
        keep: observations kept verbatim by the masking (default :data:`MASKING_KEEP`).

    Returns:
        The OpenAI chat messages of the prompt, system + task first.
    """
    head = head_messages(traj)
    masked = masking_prompt(traj, t, keep)
    history = masked[len(head) :]
    used = sum(count(m["content"]) for m in head)
    if used + sum(count(m["content"]) for m in history) <= budget:
        return masked
    return head + history[newest_that_fit(history, used, budget, count) :]


def recency_hysteresis_prompt(
    traj: Trajectory,
    t: int,
    budget: int,
    count: Callable[[str], int],
    start: int = 0,
    low: float = HYSTERESIS_LOW,
) -> tuple[list[Message], int]:
    """The ``recency-hysteresis`` prompt for step ``t``, given where the previous step's prompt
    started.

    The prompt is system + task + the history messages (:func:`history_messages`) from index
    ``start`` on. While that fits ``budget`` tokens it is sent as is: each step only appends, so
    the previous prompt stays its prefix. When it does not fit, it is cut back as recency
    truncation would cut it for a budget of ``low x budget`` (the newest messages that fit,
    stopping at the first that does not, system + task counted) and ``start`` moves there. A
    cut therefore frees ``(1 - low) x budget`` tokens for the steps that follow.

    Args:
        traj: the recorded session.
        t: the step whose prompt is built (messages of steps ``0..t-1`` only).
        budget: the token budget.
        count: tokens of a text.
        start: index into ``history_messages(traj, t)`` of the oldest message the previous
            step's prompt kept (0 at step 0: nothing cut yet).
        low: the fraction of ``budget`` a cut goes down to (default :data:`HYSTERESIS_LOW`).

    Returns:
        ``(messages, start)``: the prompt and the start to pass for step ``t + 1``.
    """
    head = head_messages(traj)
    history = history_messages(traj, t)
    used = sum(count(m["content"]) for m in head)
    start = min(start, len(history))
    if used + sum(count(m["content"]) for m in history[start:]) > budget:
        start = max(start, newest_that_fit(history, used, low * budget, count))
    return head + history[start:], start
