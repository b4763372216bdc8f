"""A provider's "prompt too long" refusal: telling it from other errors, reading the window it
states, and the smaller window a session keeps working in afterwards (issue 29).

When ``models.<role>.contextWindow`` says more than the provider accepts (or veil's token count
of a model it cannot count exactly runs low), the provider refuses the prompt with an HTTP 400.
litellm maps the common bodies to its ``ContextWindowExceededError``, but not every provider's
wording, so the text is read as well (:func:`is_context_refusal`). The refusal usually states the
provider's limit and its count of the prompt (:func:`refusal_figures`); from them, or without
them by a fixed factor, :func:`learned_window` gives the window, in veil's own count, that the
session's prompts are fitted into from then on (as Claude Code compacts and retries on "prompt is
too long", veil fits the prompt to the smaller window, which evicts or compacts, and asks again
once).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REFUSAL_PHRASES: tuple[str, ...] = (
    "context_length_exceeded",  # OpenAI's error code (also DeepSeek, Groq, OpenRouter)
    "maximum context length",  # OpenAI, vLLM, DeepSeek, Mistral ("... maximum context length")
    "prompt is too long",  # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    # Anthropic, the prompt with max_tokens: "input length and `max_tokens` exceed context
    # limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again"
    "exceed context limit",
    "input is too long",  # Amazon Bedrock: "Input is too long for requested model."
    "exceeds the maximum number of tokens",  # Google Gemini: "The input token count (...)"
    "exceeds the context window",  # OpenAI Responses: "Your input exceeds the context window"
    "exceeds the available context size",  # llama.cpp server (exceed_context_size_error)
    "exceed_context_size_error",
    "reduce the length of the messages",  # OpenAI, Groq
    "context window exceeded",  # litellm's own wording
)
"""Lower-case phrases found only in context-length refusals, each from a provider's documented
or observed error body (the comments name them). Rate-limit errors ("Request too large ... on
tokens per min") are not among them: they are retried, not shrunk."""

MIN_FIGURE = 256
"""Smallest number taken for a window or a prompt size from an error text; a smaller one is
some other number of the message, not a window."""

SHRINK = 0.8
"""Without a limit in the refusal, the messages get this share of the room they took in the
refused request (veil's count; the tool schemas and the completion reserve are fixed). Each
further refusal shrinks it by a fifth again, so a session converges on the real window in a few
calls; a limit stated in the refusal is used instead at once."""

MIN_LEARNED_WINDOW = 1024
"""The smallest window a refusal that states no limit makes a session fit into (repeated
refusals, or a misread error, must not shrink a session to nothing); a limit the provider states
is taken as it is."""

_NUMBER = r"(\d[\d,]*)"
_LIMIT_PATTERNS = (
    re.compile(r"maximum context length is " + _NUMBER, re.I),  # OpenAI, vLLM, DeepSeek
    re.compile(_NUMBER + r" tokens? > " + _NUMBER + r" maximum", re.I),  # Anthropic
    re.compile(r"maximum number of tokens allowed \(" + _NUMBER + r"\)", re.I),  # Gemini
    re.compile(r"model with " + _NUMBER + r" maximum context length", re.I),  # Mistral
    re.compile(r"context window of " + _NUMBER + r" tokens", re.I),
    re.compile(r"exceed context limit: \d[\d,]* \+ \d[\d,]* > " + _NUMBER, re.I),  # Anthropic
    re.compile(r"[\"']?n_ctx[\"']?\s*:\s*" + _NUMBER),  # llama.cpp server's error body
)
_PROMPT_PATTERNS = (
    re.compile(r"messages resulted in " + _NUMBER + r" tokens", re.I),  # OpenAI
    re.compile(r"\(" + _NUMBER + r" in the messages", re.I),  # OpenAI (older), vLLM
    re.compile(_NUMBER + r" tokens? > " + _NUMBER + r" maximum", re.I),  # Anthropic
    re.compile(r"exceed context limit: " + _NUMBER, re.I),  # Anthropic, with max_tokens
    re.compile(r"input token count \(" + _NUMBER + r"\)", re.I),  # Gemini
    re.compile(r"prompt contains " + _NUMBER + r" tokens", re.I),  # Mistral
    re.compile(r"[\"']?n_prompt_tokens[\"']?\s*:\s*" + _NUMBER),  # llama.cpp server
)


@dataclass(frozen=True)
class RefusalFigures:
    """What a context-length refusal states, in the provider's own token count.

    Attributes:
        limit: the provider's context window (tokens), or None when the text gives none.
        prompt_tokens: the provider's count of the refused prompt, or None.
    """

    limit: int | None = None
    prompt_tokens: int | None = None


def is_context_refusal(text: str) -> bool:
    """Whether an error's text is a provider's "prompt too long" refusal (one of
    :data:`REFUSAL_PHRASES`, case ignored)."""
    low = text.lower()
    return any(phrase in low for phrase in REFUSAL_PHRASES)


def _figure(patterns: tuple[re.Pattern[str], ...], text: str, group: int) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match is None:
            continue
        index = min(group, pattern.groups)
        value = int(match.group(index).replace(",", ""))
        if value >= MIN_FIGURE:
            return value
    return None


def refusal_figures(text: str) -> RefusalFigures:
    """The limit and the prompt size a refusal states (see :data:`_LIMIT_PATTERNS` for the
    providers' wordings: OpenAI's "maximum context length is 8192 tokens. However, your
    messages resulted in 9000 tokens", Anthropic's "prompt is too long: 208310 tokens > 200000
    maximum", Gemini's, Mistral's and llama.cpp's). A figure under :data:`MIN_FIGURE` is not
    taken."""
    limit = _figure(_LIMIT_PATTERNS, text, 2)  # Anthropic's pattern holds the limit second
    prompt = _figure(_PROMPT_PATTERNS, text, 1)
    return RefusalFigures(limit=limit, prompt_tokens=prompt)


def learned_window(
    window: int,
    message_tokens: int,
    tool_tokens: int,
    reserve_tokens: int,
    figures: RefusalFigures,
) -> int:
    """The context window, in veil's token count, to fit a session's prompts into after a
    refusal.

    Args:
        window: the window the refused prompt was fitted into (tokens).
        message_tokens: veil's count of the refused prompt's messages.
        tool_tokens: veil's count of the tool schemas sent with them.
        reserve_tokens: the completion tokens the request reserved (``max_tokens``).
        figures: what the refusal states (:func:`refusal_figures`).

    Returns:
        With the provider's limit and its count of the prompt: the limit scaled by veil's count
        of what was sent (messages and tool schemas) over the provider's, at most 1: veil never
        counts a window larger than stated. With the limit alone: the limit, when veil counted
        the request (messages, schemas, reserve) above it. Otherwise (no limit, or veil counted
        the request within it, so its count runs low by an unknown amount): the request less
        a fifth of the messages (:data:`SHRINK`): the tool schemas and the reserve are what they
        are, the messages get a fifth less room, and each further refusal takes a fifth again;
        at least :data:`MIN_LEARNED_WINDOW`. Always below ``window``: a refusal never grows the
        window.
    """
    sent = message_tokens + tool_tokens
    requested = sent + reserve_tokens
    if figures.limit is not None and figures.prompt_tokens:
        learned = int(figures.limit * min(1.0, sent / figures.prompt_tokens))
    elif figures.limit is not None and requested > figures.limit:
        learned = figures.limit
    else:
        learned = max(
            tool_tokens + reserve_tokens + int(message_tokens * SHRINK), MIN_LEARNED_WINDOW
        )
    return max(1, min(learned, window - 1))


__all__ = [
    "MIN_LEARNED_WINDOW",
    "REFUSAL_PHRASES",
    "SHRINK",
    "RefusalFigures",
    "is_context_refusal",
    "learned_window",
    "refusal_figures",
]
