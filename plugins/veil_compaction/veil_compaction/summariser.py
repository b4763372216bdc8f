"""Summarising a run of messages with a model whose window may be much smaller than the run.

Compaction must never fail because the context is full (issue 5): every request sent here fits
the summarising model's window, counted with that model's own tokenizer. When the transcript and
the earlier summary fit in one request, one call does it. Otherwise the transcript is cut into
chunks at message boundaries (a message longer than a chunk is split into pieces), each chunk is
summarised on its own, and the partial summaries (the earlier summary first) are merged, in groups
that fit, until one summary is left.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from veil import ConfigError, Message, ProviderError
from veil import content_text_with_parts as content_text
from veil import has_visible_text as visible
from veil_compaction import prompts

WRAPPER_TOKENS = 64
"""Tokens kept for the request's tags and separators, beyond the measured text (an allowance)."""

MIN_ROOM = 128
"""Fewest tokens a request must have for content; a smaller window cannot be used to summarise."""


def render_message(message: Message) -> str:
    """One message as transcript text: ``[user] ...``, ``[assistant] ...`` followed by one
    ``-> tool_name(arguments) [id]`` line per call, ``[tool result id] ...``."""
    role = message.get("role") or "unknown"
    text = content_text(message.get("content"))
    if role == "tool":
        return f"[tool result {message.get('tool_call_id', '?')}] {text}".rstrip()
    lines = [f"[{role}] {text}".rstrip()]
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        lines.append(
            f"  -> {fn.get('name', '?')}({fn.get('arguments', '')}) [{call.get('id', '?')}]"
        )
    return "\n".join(lines)


@dataclass
class SummaryOutcome:
    """What :meth:`Summariser.summarise` produced.

    Attributes:
        text: the summary.
        calls: model calls made (1 when everything fit in one request).
        chunks: transcript chunks summarised separately (1 when no split was needed).
        largest_request: the largest request sent, in the model's tokens.
    """

    text: str
    calls: int
    chunks: int
    largest_request: int


class Summariser:
    """Summarise messages with ``model`` so that every request fits its window.

    Args:
        model: a :class:`veil.core.models.llm.ChatModel` (``context_window`` in tokens, ``count_tokens``,
            ``complete``).
        instructions: extra instructions appended to the system prompts (``customInstructions``,
            ``/compact TEXT``).
        on_completion: called with ``(completion, seconds)`` after each successful call (usage
            accounting).

    Budget (tokens of ``model``): ``reply = clamp(window // 4, 256, 4096)`` is left for the answer,
    so a request may take ``window - reply``. Partial summaries are clipped to at most ``reply``
    and at most half the room of a merge request, so any two of them merge in one call (which
    makes the merging finish).

    Raises:
        ConfigError: the window is too small to hold the compaction prompt plus
            :data:`MIN_ROOM` tokens of content.
    """

    def __init__(
        self,
        model: Any,
        instructions: list[str] | tuple[str, ...] = (),
        *,
        on_completion: Callable[[Any, float], None] | None = None,
    ) -> None:
        self.model = model
        self.on_completion = on_completion
        self.summary_system = prompts.summary_system(instructions)
        self.merge_system = prompts.merge_system(instructions)
        window = int(model.context_window)
        self.reply_tokens = min(4096, max(256, window // 4))
        self.input_budget = window - self.reply_tokens
        system_tokens = max(
            self._count([{"role": "system", "content": self.summary_system}]),
            self._count([{"role": "system", "content": self.merge_system}]),
        )
        self.room = self.input_budget - system_tokens - WRAPPER_TOKENS
        if self.room < MIN_ROOM:
            raise ConfigError(
                f"compaction model {getattr(model, 'name', '?')!r}: its context window "
                f"({window} tokens) is too small to summarise with (needs at least "
                f"{window - self.room + MIN_ROOM} tokens)"
            )
        self.part_limit = min(self.reply_tokens, self.room // 2)
        self._calls = 0
        self._largest = 0

    # -- measuring ---------------------------------------------------------------------------

    def _count(self, messages: list[Message] | str) -> int:
        return int(self.model.count_tokens(messages))

    def fits(self, request: list[Message]) -> bool:
        """Whether ``request`` (system + user message) fits the model's input budget."""
        return self._count(request) <= self.input_budget

    def clip(self, text: str, limit: int) -> str:
        """``text`` cut (at the end) to at most ``limit`` tokens, with a note when cut."""
        if self._count(text) <= limit:
            return text
        note_tokens = self._count(prompts.TRUNCATED_NOTE)
        lo, hi = 0, len(text)
        while lo < hi:  # longest prefix that fits
            mid = (lo + hi + 1) // 2
            if self._count(text[:mid]) + note_tokens <= limit:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo] + prompts.TRUNCATED_NOTE

    def split_text(self, text: str, limit: int) -> list[str]:
        """Cut ``text`` into consecutive pieces of at most ``limit`` tokens each (no text lost),
        at a line break (else a space) in the second half of a piece when there is one."""
        tokens = self._count(text)
        if tokens <= limit:
            return [text]
        parts = max(2, math.ceil(tokens / max(1, int(limit * 0.9))))
        size = max(1, math.ceil(len(text) / parts))
        out: list[str] = []
        pos = 0
        while pos < len(text):
            end = min(len(text), pos + size)
            if end < len(text):
                for sep in ("\n", " "):
                    found = text.rfind(sep, pos + size // 2, end)
                    if found > pos:
                        end = found + 1
                        break
            piece = text[pos:end]
            if self._count(piece) <= limit or len(piece) <= 1:
                out.append(piece)
            else:
                out.extend(self.split_text(piece, limit))
            pos = end
        return out

    # -- calling -----------------------------------------------------------------------------

    def _complete(self, request: list[Message]) -> str:
        self._largest = max(self._largest, self._count(request))
        started = time.monotonic()
        completion = self.model.complete(request)
        self._calls += 1
        if self.on_completion is not None:
            self.on_completion(completion, time.monotonic() - started)
        text = (completion.message.get("content") or "").strip()
        if not visible(text):
            raise ProviderError(
                f"compaction model {getattr(self.model, 'name', '?')!r} returned an empty summary"
                + (" (only invisible characters)" if text else "")
            )
        return text

    def _summary_request(self, transcript: str, previous: str | None) -> list[Message]:
        return [
            {"role": "system", "content": self.summary_system},
            {"role": "user", "content": prompts.summary_request(transcript, previous)},
        ]

    def _merge_request(self, summaries: list[str]) -> list[Message]:
        return [
            {"role": "system", "content": self.merge_system},
            {"role": "user", "content": prompts.merge_request(summaries)},
        ]

    def _summarise_pieces(self, pieces: list[str]) -> str:
        """Summarise consecutive pieces in one request, halving the set until it fits."""
        request = self._summary_request("\n\n".join(pieces), None)
        if self.fits(request):
            return self._complete(request)
        if len(pieces) == 1:  # the estimate was short for this piece: cut it further
            halves = self.split_text(pieces[0], max(1, self._count(pieces[0]) // 2))
            return self.clip(
                self._merge_all([self._summarise_pieces([h]) for h in halves]), self.part_limit
            )
        mid = len(pieces) // 2
        left = self.clip(self._summarise_pieces(pieces[:mid]), self.part_limit)
        right = self.clip(self._summarise_pieces(pieces[mid:]), self.part_limit)
        return self._merge_all([left, right])

    def _merge_all(self, summaries: list[str]) -> str:
        """Merge summaries (oldest first) into one, in groups that fit, until one is left."""
        items = [self.clip(s, self.part_limit) for s in summaries]
        while len(items) > 1:
            request = self._merge_request(items)
            if self.fits(request):
                return self._complete(request)
            groups: list[list[str]] = [[]]
            used = 0
            for item in items:
                cost = self._count(item) + 8
                if groups[-1] and used + cost > self.room:
                    groups.append([])
                    used = 0
                groups[-1].append(item)
                used += cost
            merged = []
            for group in groups:
                if len(group) == 1:
                    merged.append(group[0])
                    continue
                request = self._merge_request(group)
                while not self.fits(request) and len(group) > 2:  # estimate too short: fewer
                    merged_head = self._merge_all(group[: len(group) // 2])
                    group = [self.clip(merged_head, self.part_limit), *group[len(group) // 2 :]]
                    request = self._merge_request(group)
                merged.append(self.clip(self._complete(request), self.part_limit))
            items = merged
        return items[0]

    def summarise(self, messages: list[Message], previous: str | None = None) -> SummaryOutcome:
        """Summarise ``messages`` (oldest first), merged with the ``previous`` summary if any.

        Returns:
            A :class:`SummaryOutcome`; every request sent fitted ``window - reply`` tokens.

        Raises:
            ProviderError (or whatever the model raises): a call failed or returned nothing;
            nothing is kept of the calls already made.
        """
        self._calls = 0
        self._largest = 0
        blocks = [render_message(m) for m in messages]
        previous = self.clip(previous, self.part_limit) if previous else None
        request = self._summary_request("\n\n".join(blocks), previous)
        if self.fits(request):
            return SummaryOutcome(self._complete(request), self._calls, 1, self._largest)

        pieces: list[str] = []
        for block in blocks:
            pieces.extend(self.split_text(block, self.room))
        chunks: list[list[str]] = [[]]
        used = 0
        for piece in pieces:
            cost = self._count(piece) + 2  # the blank line joining pieces
            if chunks[-1] and used + cost > self.room:
                chunks.append([])
                used = 0
            chunks[-1].append(piece)
            used += cost
        partials = [self.clip(self._summarise_pieces(chunk), self.part_limit) for chunk in chunks]
        summaries = ([previous] if previous else []) + partials
        text = self._merge_all(summaries) if len(summaries) > 1 else summaries[0]
        return SummaryOutcome(text, self._calls, len(chunks), self._largest)
