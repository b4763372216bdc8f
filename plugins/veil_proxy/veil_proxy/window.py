"""How many completion tokens a proxied request may ask for in the upstream's window.

A provider counts the completion inside the context window: Anthropic refuses a request whose
prompt plus ``max_tokens`` exceed it ("input length and `max_tokens` exceed context limit"),
OpenAI one whose messages plus ``max_tokens`` do. Agents ask for much: Claude Code sends
``max_tokens`` 32,000 to 128,000, and its system prompt and tool schemas alone take about
19,500 tokens. Forwarded as asked, such a request is refused whatever veil does to the
conversation, so the proxy decides first (:func:`completion_room`):

- the **fixed part** is what veil sends before any message: the system message (the agent's
  prompt and veil's sections) and the tool schemas;
- the **room** is the window less the fixed part, shared by the conversation and the answer;
- the answer may take at most :data:`COMPLETION_SHARE` of the room, and never less than
  :data:`MIN_COMPLETION_TOKENS`: a larger ``max_tokens`` is lowered to that (the answer's
  ``X-Veil-Max-Tokens`` header and the proxy's log say so), a smaller one is kept;
- when the room is under twice :data:`MIN_COMPLETION_TOKENS` (the fixed part alone fills the
  window, or nearly), nothing is forwarded: the client gets an error in its own API's shape
  naming the window and what took it (:class:`WindowTooSmall`).

With extended thinking on (``thinking.budget_tokens``), the budget must stay under
``max_tokens`` and at least 1,024 (Anthropic's "Extended thinking"): the floor doubles and a
budget at or over a lowered ``max_tokens`` is lowered to half of it.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_COMPLETION_TOKENS = 1024
"""The smallest completion the proxy lowers ``max_tokens`` to (veil's own
``loop.completionReserve`` default)."""

COMPLETION_SHARE = 0.5
"""The largest share of the room (window less the fixed part) an answer may reserve, so the
conversation keeps the other half."""

MIN_THINKING_BUDGET = 1024
"""Anthropic's smallest ``thinking.budget_tokens``."""

HEADER = "x-veil-max-tokens"
"""Response header set when ``max_tokens`` was lowered: ``<allowed> (lowered from <asked> to fit
the <window>-token window)``."""


class WindowTooSmall(Exception):
    """The window cannot hold the request's fixed part and an answer; ``message`` says how
    much each part takes."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Room:
    """The completion tokens a request may ask for.

    Attributes:
        window: the upstream's context window (tokens).
        system_tokens: the system message veil sends (the agent's prompt and veil's sections).
        tools_tokens: the tool schemas.
        asked: what the client asked (None: it named no limit).
        allowed: what is sent (None: no limit named, veil's default reserve applies).
        thinking_budget: the thinking budget to send (None: unchanged or none).
        cap: the most an answer may take (the limit sent to an upstream that needs one when
            the client named none).
    """

    window: int
    system_tokens: int
    tools_tokens: int
    asked: int | None
    allowed: int | None
    thinking_budget: int | None = None
    cap: int = MIN_COMPLETION_TOKENS

    @property
    def lowered(self) -> bool:
        """Whether ``max_tokens`` was lowered."""
        return self.asked is not None and self.allowed is not None and self.allowed < self.asked

    def header(self) -> str:
        """The :data:`HEADER` value."""
        return f"{self.allowed} (lowered from {self.asked} to fit the {self.window}-token window)"


def completion_room(
    window: int,
    system_tokens: int,
    tools_tokens: int,
    tool_count: int,
    asked: int | None,
    thinking_budget: int | None = None,
    kept_tokens: int = 0,
) -> Room:
    """The :class:`Room` of a request (see the module docstring).

    Args:
        window: the upstream model's context window, tokens.
        system_tokens, tools_tokens: the fixed part (tokens of the system message veil sends
            and of the tool schemas).
        tool_count: how many tool schemas (named in the error).
        asked: the request's ``max_tokens`` (or ``max_completion_tokens``,
            ``max_output_tokens``), None when it names none.
        thinking_budget: the request's ``thinking.budget_tokens``, None without one.
        kept_tokens: what is sent as the client wrote it beside veil's messages (thinking
            blocks, reasoning items: :attr:`veil_proxy.views.View.kept`): part of the fixed
            part.

    Raises:
        WindowTooSmall: the room left by the fixed part is under twice the floor.
    """
    floor = MIN_COMPLETION_TOKENS * (2 if thinking_budget is not None else 1)
    room = window - system_tokens - tools_tokens - kept_tokens
    if room < 2 * floor:
        asked_text = f"max_tokens {asked:,}" if asked is not None else "no max_tokens"
        fixed = system_tokens + tools_tokens + kept_tokens
        kept = f", its thinking and reasoning blocks {kept_tokens:,}" if kept_tokens else ""
        raise WindowTooSmall(
            f"the context window of {window:,} tokens cannot hold this request: its system "
            f"prompt takes {system_tokens:,} tokens (the agent's own and veil's sections) and "
            f"its {tool_count} tool schema{'s' if tool_count != 1 else ''} {tools_tokens:,} "
            f"tokens{kept}, {fixed:,} before any message, which leaves {max(room, 0):,} for the "
            f"conversation and the answer ({asked_text} asked; at least {2 * floor:,} needed). "
            f"Nothing was sent upstream. Use a model with a larger window "
            f"(models.main.contextWindow in .veil/settings.json) or offer the agent fewer tools"
        )
    cap = max(floor, int(room * COMPLETION_SHARE))
    allowed = asked if asked is None or asked <= cap else cap
    budget = None
    if thinking_budget is not None and allowed is not None and thinking_budget >= allowed:
        budget = max(MIN_THINKING_BUDGET, allowed // 2)
    return Room(window, system_tokens, tools_tokens, asked, allowed, budget, cap)
