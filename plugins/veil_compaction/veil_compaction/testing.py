"""Offline helpers for tests and benchmarks: a deterministic summariser model and synthetic
histories.

:class:`ScriptedSummariser` is a :class:`veil.core.models.llm.ChatModel` that answers any summary or merge
request without a language model: it returns the structured headings of
:data:`veil_compaction.prompts.SECTIONS` with, under "Files read and modified", the distinct
identifier-shaped tokens of the request (DESIGN.md "Measures": file paths, dotted names, names with
``_``, digits or inner capitals, numbers of 4+ digits), newest first, until the reply reaches
``reply_tokens``. It records every request, so tests can check what was sent and its size.

:func:`step` and :func:`synthetic_history` build OpenAI-format histories with parallel tool calls.

:class:`SeedPlanner` is this plugin's ``plan_compaction`` alone, for tests that bring their own
summariser (without a planner nothing is compacted).
"""

from __future__ import annotations

import json
import random
import re
import threading
from typing import Any

from veil import CompactionPlan, Completion, count_message_tokens, count_text_tokens, hookimpl
from veil_compaction.prompts import SECTIONS

_CANDIDATE = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{3,}|\b\d{4,}\b")
_SHAPED = re.compile(r"[_./0-9]|[a-z][A-Z]")
_TAG = re.compile(r"</?[a-z_]+(?: [a-z]+=\"[0-9]+\")?>")


def identifiers(text: str) -> list[str]:
    """Distinct identifier-shaped tokens of ``text`` (DESIGN.md "Measures"), last seen first."""
    seen: dict[str, None] = {}
    for match in reversed(_CANDIDATE.findall(text)):
        token = match.rstrip("./-")
        if len(token) >= 4 and (token.isdigit() or _SHAPED.search(token)) and token not in seen:
            seen[token] = None
    return list(seen)


class SeedPlanner:
    """A plugin answering ``plan_compaction`` as veil_compaction does (seed 000's rules,
    :func:`veil_compaction.planning.plan`) and nothing else: register it beside a test's own
    ``summarise``."""

    @hookimpl
    def plan_compaction(
        self, session: Any, messages: list[dict], kind: str, prompt_tokens: int | None
    ) -> CompactionPlan | None:
        """veil_compaction's plan for ``messages``."""
        from veil_compaction.planning import plan

        return plan(session, messages, kind, prompt_tokens)


class ScriptedSummariser:
    """A summariser model that needs no weights and no network.

    Args:
        context_window: tokens (default 8192, the bundled model's window).
        reply_tokens: at most this many tokens per reply (estimated, :mod:`veil.core.models.tokens`).
        name: model name reported.

    Attributes:
        requests: every ``messages`` list received, in order.
        request_tokens: the estimated tokens of each request.
        replies: the text of each reply, in order.
    """

    provider = "scripted"

    def __init__(
        self, context_window: int = 8192, reply_tokens: int = 400, name: str = "scripted-summariser"
    ) -> None:
        self.name = name
        self.context_window = context_window
        self.reply_tokens = reply_tokens
        self.requests: list[list[dict]] = []
        self.request_tokens: list[int] = []
        self.replies: list[str] = []
        self._lock = threading.Lock()

    def count_tokens(self, messages: list[dict] | str) -> int:
        """Estimated tokens of a text or a message list."""
        if isinstance(messages, str):
            return count_text_tokens(messages)
        return count_message_tokens(messages)

    def summary_for(self, text: str) -> str:
        """The reply for a request whose user text is ``text``."""
        lines = [SECTIONS[0], f"- continue the task ({len(text)} characters summarised)"]
        lines += [heading + "\n- none" for heading in SECTIONS[1:-2]]
        lines.append(SECTIONS[-2])
        budget = self.reply_tokens - count_text_tokens("\n".join(lines)) - 16
        for ident in identifiers(text):
            cost = count_text_tokens(ident) + 2
            if cost > budget:
                break
            lines.append(f"- {ident}")
            budget -= cost
        lines.append(SECTIONS[-1] + "\n- none")
        return "\n".join(lines)

    def complete(
        self, messages: list[dict], tools: list[dict] | None = None, on_token: Any = None
    ) -> Completion:
        """Answer with :meth:`summary_for` of the last message's text."""
        tokens = count_message_tokens(messages)
        with self._lock:
            self.requests.append(messages)
            self.request_tokens.append(tokens)
        text = _TAG.sub(" ", str(messages[-1].get("content") or ""))  # the request's own tags
        content = self.summary_for(text)
        with self._lock:
            self.replies.append(content)
        return Completion(
            message={"role": "assistant", "content": content},
            usage={"prompt_tokens": tokens, "completion_tokens": count_text_tokens(content)},
            model=self.name,
            provider=self.provider,
            finish_reason="stop",
        )


def step(n: int, calls: int = 1, size: int = 20, text: str = "") -> list[dict]:
    """One synthetic step: an assistant message with ``calls`` parallel ``read`` calls (ids
    ``c<n>_<k>``) and their results (``r<n>_<k> `` followed by ``size`` characters)."""
    assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        assistant["tool_calls"] = [
            {
                "id": f"c{n}_{k}",
                "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"path": f"src/f{n}_{k}.py"})},
            }
            for k in range(calls)
        ]
    results = [
        {"role": "tool", "tool_call_id": f"c{n}_{k}", "content": f"r{n}_{k} " + "x" * size}
        for k in range(calls)
    ]
    return [assistant, *results]


def synthetic_history(
    steps: int,
    *,
    seed: int = 0,
    result_chars: tuple[int, int] = (50, 4000),
    steps_per_user: int = 8,
) -> list[dict]:
    """A long coding-agent history: a user message every ``steps_per_user`` steps, each step an
    assistant message with 0-3 parallel tool calls whose results are ``result_chars`` characters
    (uniform, seeded), then a final answer per exchange. Deterministic for a given ``seed``."""
    rng = random.Random(seed)
    words = ["def", "return", "src/app.py", "TypeError", "self.value", "0x1F", "import", "tests"]
    out: list[dict] = []
    for n in range(steps):
        if n % steps_per_user == 0:
            out.append({"role": "user", "content": f"task {n}: fix issue_{n} in module_{n}.py"})
        calls = rng.choice((0, 1, 1, 1, 2, 3))
        size = rng.randint(*result_chars)
        messages = step(n, calls=calls, size=0, text=f"step {n}: looking at file_{n}.py")
        for msg in messages[1:]:
            body = " ".join(rng.choice(words) for _ in range(size // 6))
            msg["content"] += body[:size]
        out.extend(messages)
    return out
