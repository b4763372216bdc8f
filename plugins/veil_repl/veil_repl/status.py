"""The REPL's status line: context use of the last request, its cached share, item tiers.

Kept apart from the rendering (display.py) so the figures can be computed and tested without a
terminal. The numbers come from the ``usage`` render event of the last model call (the
provider's own ``prompt_tokens`` and ``prompt_tokens_details.cached_tokens``, see
:func:`veil.core.models.llm.counted_usage`) and from the store's tier counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ContextStatus:
    """What the status line shows.

    Attributes:
        model: the session's model name.
        context_window: the model's input window, in tokens.
        prompt_tokens: prompt tokens of the last request (the provider's figure; None before
            the first request of a new session).
        cached_tokens: of those, tokens the provider read from its prompt cache; None when it
            did not report the figure.
        estimated: True when ``prompt_tokens`` was counted by veil (the provider reported no
            usage).
        tiers: ``{"live": n, "warm": n, "cold": n}`` context items of the session.
    """

    model: str
    context_window: int
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    estimated: bool = False
    tiers: dict[str, int] = field(default_factory=lambda: {"live": 0, "warm": 0, "cold": 0})

    def take_usage(self, usage: dict[str, Any]) -> None:
        """Take the figures of a ``usage`` render event (``promptTokens``, ``cachedTokens``,
        ``estimated``, ``contextWindow``, ``model``) or of a stored message usage
        (``prompt_tokens``, ``cached_tokens``, ``estimated``)."""
        prompt = usage.get("promptTokens", usage.get("prompt_tokens"))
        cached = usage.get("cachedTokens", usage.get("cached_tokens"))
        self.prompt_tokens = int(prompt) if isinstance(prompt, int) else None
        self.cached_tokens = int(cached) if isinstance(cached, int) else None
        self.estimated = bool(usage.get("estimated"))
        window = usage.get("contextWindow")
        if isinstance(window, int) and window > 0:
            self.context_window = window
        if usage.get("model"):
            self.model = str(usage["model"])

    @property
    def window_share(self) -> float | None:
        """``prompt_tokens / context_window`` in percent (None before the first request)."""
        if self.prompt_tokens is None or self.context_window <= 0:
            return None
        return 100.0 * self.prompt_tokens / self.context_window

    @property
    def cached_share(self) -> float | None:
        """``cached_tokens / prompt_tokens`` in percent (None when either is unknown)."""
        if self.cached_tokens is None or not self.prompt_tokens:
            return None
        return 100.0 * self.cached_tokens / self.prompt_tokens

    def line(self) -> str:
        """One line, at most ~90 characters for usual figures (fits a 100-column terminal)::

            gpt-4o · context 2,048/8,192 (25%) · cached 50% · items live 12 warm 3 cold 1

        ``~`` marks a prompt size veil counted itself; ``cached n/a`` a provider that does not
        report its cache."""
        if self.prompt_tokens is None:
            context = f"context -/{self.context_window:,}"
        else:
            mark = "~" if self.estimated else ""
            context = (
                f"context {mark}{self.prompt_tokens:,}/{self.context_window:,}"
                f" ({self.window_share:.0f}%)"
            )
        share = self.cached_share
        if self.prompt_tokens is None:
            cached = "cached -"
        elif share is None:
            cached = "cached n/a"
        else:
            cached = f"cached {share:.0f}%"
        t = self.tiers
        items = f"items live {t.get('live', 0)} warm {t.get('warm', 0)} cold {t.get('cold', 0)}"
        return f"{_short_model(self.model)} · {context} · {cached} · {items}"


def _short_model(name: str, limit: int = 28) -> str:
    """The model name, cut on the left (``…claude-sonnet-4-5``) so the line stays one line."""
    return name if len(name) <= limit else "…" + name[-(limit - 1) :]
