"""The prompt-cache measure of ``veil replay`` (DESIGN.md "Measures", "Cache").

Providers that cache prompts (Anthropic, OpenAI, DeepSeek, Gemini; llama.cpp's KV cache) reuse
the longest prefix a request shares with an earlier one and bill it at a fraction of the input
price. The replay models this per policy, message by message:

* **cached tokens** at step t: the tokens of the leading messages of the policy's prompt for t
  that are identical to the leading messages of its prompt for t-1 (same role, content and tool
  calls; for a tool result also the call id it answers, which the provider sees as well). Step
  0 has none. A message that differs ends the shared prefix, whatever follows it.
* **effective tokens** = uncached + ``price`` x cached, with ``price`` the cached-input price
  relative to uncached input (default :data:`CACHE_PRICE`).
* a **prefix break** is a step t >= 1 whose first changed message is message 0 (the system
  message): nothing of the previous prompt is reused.

Tokens are the replay's own (cl100k_base over message contents), so
``0 <= cached_tokens <= prompt_tokens`` at every step.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from veil import BadRequest

CACHE_PRICE = 0.1
"""Price of a cached input token relative to an uncached one: what Anthropic (cache reads
0.1x), OpenAI's current models, DeepSeek and Gemini bill (issue 18; DESIGN.md "Measures")."""

MessageKey = tuple[str, str, str, str, str]
"""What makes two prompt messages identical for the cache: role, content, tool calls,
tool_call_id and name, each as a string (non-string values as canonical JSON)."""


def _canonical(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def message_key(message: Mapping[str, Any]) -> MessageKey:
    """The identity of an OpenAI chat message for the cache measure.

    Two messages with equal keys are the same bytes to a provider: same ``role``, ``content``
    (a string or a list of parts), ``tool_calls``, ``tool_call_id`` and ``name``. Other keys a
    caller may carry along (none is sent by veil) are ignored. The key is a snapshot: a message
    dict changed in place later does not change a key taken before.
    """
    return (
        _canonical(message.get("role")),
        _canonical(message.get("content")),
        _canonical(message.get("tool_calls")),
        _canonical(message.get("tool_call_id")),
        _canonical(message.get("name")),
    )


def shared_prefix(previous: Sequence[object], current: Sequence[object]) -> int:
    """How many leading items ``current`` shares with ``previous``, compared with ``==``.

    Items are message keys (:func:`message_key`) for the replay's cache, or token ids for the
    bundled-model bench. Returns 0 when item 0 differs or either sequence is empty.
    """
    n = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        n += 1
    return n


def check_cache_price(price: float) -> float:
    """Validate a cached-input price (relative to uncached input, so between 0 and 1).

    Raises:
        BadRequest: ``price`` is not a finite number from 0 to 1 (the message names
            ``cache_price``).
    """
    if (
        isinstance(price, bool)
        or not isinstance(price, (int, float))
        or not math.isfinite(price)
        or not 0 <= price <= 1
    ):
        raise BadRequest(f"cache_price: expected a number from 0 to 1, got {price!r}")
    return float(price)


def effective_tokens(prompt_tokens: int, cached_tokens: int, price: float = CACHE_PRICE) -> float:
    """What ``prompt_tokens`` input tokens cost, in uncached-token units, when
    ``cached_tokens`` of them are cached: ``(prompt - cached) + price * cached``.

    Linear in both counts, so the effective tokens of a sum of steps is this function of the
    summed counts (the runner computes totals that way, free of rounding drift).
    """
    return (prompt_tokens - cached_tokens) + price * cached_tokens


class CacheTracker:
    """Follows one policy's prompts step by step and says what each step reuses.

    Call :meth:`step` once per step, in order, with the prompt's messages and their token
    counts (one per message, the replay's cl100k_base counts).
    """

    def __init__(self) -> None:
        self._previous: list[MessageKey] | None = None

    def step(self, messages: Sequence[Mapping[str, Any]], sizes: Sequence[int]) -> tuple[int, bool]:
        """Account the prompt of the next step.

        Args:
            messages: the prompt's OpenAI chat messages, in order.
            sizes: tokens of each message (same length as ``messages``).

        Returns:
            ``(cached_tokens, prefix_break)``: the tokens of the leading messages identical to
            the previous step's prompt (0 at the first step), and whether message 0 changed
            (never at the first step; not when both prompts are empty).

        Raises:
            ValueError: ``sizes`` and ``messages`` differ in length.
        """
        if len(sizes) != len(messages):
            raise ValueError(f"sizes: {len(sizes)} counts for {len(messages)} messages")
        keys = [message_key(m) for m in messages]
        previous, self._previous = self._previous, keys
        if previous is None:
            return 0, False
        n = shared_prefix(previous, keys)
        return sum(sizes[:n]), n == 0 and bool(previous or keys)
