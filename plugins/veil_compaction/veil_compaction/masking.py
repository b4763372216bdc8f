"""Observation masking (seed 000 "Context Compaction", step 1): the cheapest compression.

Tool results older than ``compaction.observationMaskingTurns`` steps are sent as
``[observation masked]``; the tool call itself stays, so the model still sees what it did and can
run it again. Only the copy that is sent changes: the stored history is never touched.

Masking in blocks (``compaction.observationMaskingBlock``, G; issue 18): masking every step
rewrites one old result each time, so the prompt's prefix changes at every call and no provider
prompt cache or KV cache is ever reused past that result. With G > 1 the results that come due
are masked together once G of them are due, so the prefix changes once per G results. G = 1 is
seed 000's rule exactly.
"""

from __future__ import annotations

from veil import Message

MASK = "[observation masked]"
"""The text a masked tool result is sent as (seed 000, verbatim)."""


def mask_observations(messages: list[Message], keep_steps: int) -> list[Message]:
    """Return ``messages`` with the tool results of all but the ``keep_steps`` newest steps masked.

    Args:
        messages: OpenAI chat messages (no system prompt), oldest first; not modified.
        keep_steps: steps whose tool results stay visible, counted from the end (a step is an
            assistant message with its tool results, DESIGN.md "Turn and step"); 0 turns masking
            off (seed 000: ``observationMaskingTurns``, default 10).

    Returns:
        A new list of the same length; masked results are new dicts with ``content`` set to
        :data:`MASK` (``tool_call_id`` and every other field kept), the other messages are the
        same objects. A tool result before any assistant message counts as part of a step older
        than all of them.
    """
    out = list(messages)
    if keep_steps <= 0:
        return out
    newer_steps = 0  # assistant messages after the current position
    for idx in range(len(messages) - 1, -1, -1):
        msg = messages[idx]
        role = msg.get("role")
        if role == "assistant":
            newer_steps += 1
        elif role == "tool" and newer_steps >= keep_steps and msg.get("content") != MASK:
            out[idx] = {**msg, "content": MASK}
    return out


def mask_in_blocks(
    messages: list[Message], keep_steps: int, block: int, masked_before: int = 0
) -> tuple[list[Message], int]:
    """Observation masking that changes the prompt once per ``block`` results.

    A result is *due* when seed 000's rule masks it (:func:`mask_observations`: its step is
    older than the ``keep_steps`` newest). Results before position ``masked_before`` were
    masked by an earlier call and stay masked. When at least ``block`` due results lie at or
    after ``masked_before``, every due result is masked and the boundary moves past the last
    of them; otherwise nothing new is masked.

    Args:
        messages: OpenAI chat messages (no system prompt), oldest first; not modified.
        keep_steps: ``observationMaskingTurns`` (0: masking off, nothing is masked).
        block: G >= 1. G = 1 gives :func:`mask_observations`' output exactly.
        masked_before: the boundary an earlier call returned, as a position in ``messages``
            (0 on the first call).

    Returns:
        ``(messages, boundary)``: a new list of the same length (masked results are new dicts
        with content :data:`MASK`) and the position before which every tool result is masked,
        to pass back next time (>= ``masked_before``).

    Raises:
        ValueError: ``block`` < 1.

    Example: keep 10, G 5, one result per step: at 15 steps the results of steps 1-5 are due
    and masked together; steps 6-9 come due one by one and stay visible; at step 20 the results
    of steps 6-10 are masked together.
    """
    if block < 1:
        raise ValueError(f"block: expected at least 1 result, got {block!r}")
    out = list(messages)
    if keep_steps <= 0:
        return out, masked_before
    boundary = max(0, min(masked_before, len(messages)))
    due = mask_observations(messages, keep_steps)
    fresh = [
        idx
        for idx in range(boundary, len(messages))
        if messages[idx].get("role") == "tool" and due[idx] is not messages[idx]
    ]
    if len(fresh) >= block:
        boundary = fresh[-1] + 1
    for idx in range(boundary):
        if messages[idx].get("role") == "tool" and messages[idx].get("content") != MASK:
            out[idx] = {**messages[idx], "content": MASK}
    return out, boundary
