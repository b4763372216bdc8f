"""Baseline prompts veil is compared with in ``veil replay`` (DESIGN.md "Measures").

The prompt for step t is built from what came before step t only (no look-ahead): the system
prompt, the task, then for each earlier step its assistant message (text with the action) and
its observation (a user message). Three baselines keep different parts of that history:

* ``full``: everything;
* ``masking``: everything, but observations older than the 10 most recent are replaced by
  ``[observation masked]``;
* ``recency``: system + task, then the newest messages, walking back from the newest, while the
  total fits the token budget, stopping at the first message that does not fit.
"""

from __future__ import annotations

from collections.abc import Callable

from veil.core.replay.formats import Trajectory

MASKED_OBSERVATION = "[observation masked]"
"""Text that stands in for a masked observation (DESIGN.md "Measures")."""

MASKING_KEEP = 10
"""Observations kept verbatim by the masking baseline: the 10 most recent (DESIGN.md)."""

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


def masking_prompt(traj: Trajectory, t: int, keep: int = MASKING_KEEP) -> list[Message]:
    """The observation-masking prompt for step ``t``.

    Like :func:`full_prompt`, but of the observations of steps ``0..t-1`` only the ``keep``
    most recent stay verbatim; each older one becomes :data:`MASKED_OBSERVATION` (its message
    stays, so call and result remain paired).
    """
    with_observation = [i for i, s in enumerate(traj.steps[:t]) if s.observation is not None]
    masked = set(with_observation[: max(0, len(with_observation) - keep)])
    messages = head_messages(traj)
    for i, step in enumerate(traj.steps[:t]):
        messages.append({"role": "assistant", "content": step.assistant})
        if step.observation is not None:
            content = MASKED_OBSERVATION if i in masked else step.observation
            messages.append({"role": "user", "content": content})
    return messages


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
    total = sum(count(m["content"]) for m in head)
    kept: list[Message] = []
    for message in reversed(history_messages(traj, t)):
        size = count(message["content"])
        if total + size > budget:
            break
        total += size
        kept.append(message)
    kept.reverse()
    return head + kept
