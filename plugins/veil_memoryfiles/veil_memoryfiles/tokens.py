"""Token counting for the injection cap: the core's counter when it exists, else an estimate."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache


def _fallback(text: str) -> int:
    # About three characters per token: errs high for English (~4 chars/token in cl100k_base) and
    # stays close for CJK, so the cap is respected rather than overshot.
    return len(text) // 3 + 1


@lru_cache(maxsize=1)
def _resolve() -> Callable[[str], int]:
    try:
        from veil import count_text_tokens  # written by another part of veil
    except ImportError:
        return _fallback
    return count_text_tokens


def count_tokens(text: str) -> int:
    """Tokens of ``text``: :func:`veil.core.models.tokens.count_text_tokens` (cl100k_base, DESIGN.md
    "Measures") when the core provides it, else ``len(text) // 3 + 1``."""
    return _resolve()(text)
