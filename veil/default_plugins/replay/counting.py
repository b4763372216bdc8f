"""cl100k_base token counts of prompt messages, each distinct text encoded once.

DESIGN.md "Measures": replay counts tokens with cl100k_base (tiktoken, loaded offline from
litellm's wheel by :func:`veil.core.models.tokens.cl100k_count`) over message contents only: no
per-message overhead, tool schemas excluded, the same tokenizer for every policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from veil import cl100k_count, content_text


class TokenCounter:
    """Counts cl100k_base tokens with a cache keyed by text.

    A replay re-sends the same few hundred messages at every step; the cache turns
    O(steps x messages) encodings into O(distinct messages). Use one counter per trajectory so
    the cache holds only that file's texts.
    """

    def __init__(self) -> None:
        self._cache: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        """Tokens in ``text`` (cl100k_base, special-token strings as plain text)."""
        count = self._cache.get(text)
        if count is None:
            count = self._cache[text] = cl100k_count(text)
        return count

    def messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Tokens of a prompt: the sum over the messages' ``content`` texts only."""
        return sum(self(message_text(m)) for m in messages)


def message_text(message: Mapping[str, Any]) -> str:
    """The ``content`` of an OpenAI chat message as text: a string, None (""), or a list of
    parts whose ``text`` fields are concatenated. Tool-call arguments are not content: a policy
    that wants a command counted renders it into the content (DESIGN.md "Measures")."""
    return content_text(message.get("content"))
