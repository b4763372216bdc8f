"""A deterministic chat model for tests and demos (in the spirit of simonw/llm's mock model).

:class:`ScriptedModel` answers from a queue of replies given up front, so an agent loop, a
compaction or an HTTP route can be tested end to end without a provider::

    model = ScriptedModel([
        {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]},
        "There are 3 files.",
    ])
    LLM(config, models={"main": model})
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from veil.core.models.llm import Completion
from veil.core.models.tokens import count_message_tokens, count_text_tokens

Reply = str | dict[str, Any] | Callable[[list[dict], list[dict] | None], Any]
"""A scripted reply: a plain answer, a dict ``{"content", "tool_calls"}``, or a callable
``(messages, tools) -> reply`` (a str or dict) that decides from what the model was sent."""


class ScriptExhaustedError(AssertionError):
    """The scripted model was called more often than it has replies."""


_WORD = re.compile(r"\S+\s*|\s+")


class ScriptedModel:
    """A :class:`~veil.core.models.llm.ChatModel` that returns scripted replies in order.

    Args:
        replies: each a str (the assistant's answer), a dict ``{"content": str | None,
            "tool_calls": [{"name": str, "arguments": dict | str, "id": str (optional)}]}``, or a
            callable ``(messages, tools) -> str | dict``.
        name: model name reported in completions (``"scripted"``).
        context_window: tokens (8192 by default), settable to test pressure and compaction.
        provider: provider name reported in completions (``"scripted"``).

    Attributes:
        calls: every ``messages`` list received, deep-copied, in call order.
        tools_seen: the ``tools`` argument of each call.

    ``complete`` streams the content to ``on_token`` word by word (each word with the whitespace
    after it, so the pieces join back to the content) and reports usage counted with
    :func:`~veil.core.models.tokens.count_message_tokens` / ``count_text_tokens`` (estimates, since the
    name is no real model). Tool-call ids default to ``call_<call number>_<index>``.

    Raises:
        ScriptExhaustedError: (an AssertionError) on a call after the last reply, naming how many
            replies there were and the last message received.
        TypeError: a reply is neither a str, a dict nor a callable returning one.
    """

    def __init__(
        self,
        replies: list[Reply] | None = None,
        *,
        name: str = "scripted",
        context_window: int = 8192,
        provider: str = "scripted",
    ) -> None:
        self.name = name
        self.provider = provider
        self.context_window = context_window
        self._replies: list[Reply] = list(replies or [])
        self._lock = threading.Lock()
        self.calls: list[list[dict]] = []
        self.tools_seen: list[list[dict] | None] = []

    def add(self, *replies: Reply) -> None:
        """Queue more replies after the existing ones."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def remaining(self) -> int:
        """How many replies are still queued."""
        return len(self._replies)

    def count_tokens(self, messages: list[dict] | str) -> int:
        """Tokens of a prompt or text, estimated (:mod:`veil.core.models.tokens`)."""
        if isinstance(messages, str):
            return count_text_tokens(messages)
        return count_message_tokens(messages)

    def complete(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Completion:
        """Return the next scripted reply as a :class:`~veil.core.models.llm.Completion`."""
        with self._lock:
            self.calls.append(copy.deepcopy(messages))
            self.tools_seen.append(copy.deepcopy(tools))
            call_number = len(self.calls)
            if not self._replies:
                last = messages[-1] if messages else None
                raise ScriptExhaustedError(
                    f"ScriptedModel {self.name!r}: call {call_number} but only "
                    f"{call_number - 1} replies were scripted; last message: {last!r}"
                )
            reply = self._replies.pop(0)
        if callable(reply):
            reply = reply(messages, tools)
        message = self._message(reply, call_number)
        content = message.get("content")
        if on_token is not None and content:
            for piece in _WORD.findall(content):
                on_token(piece)
        usage = {
            "prompt_tokens": count_message_tokens(messages, tools=tools),
            "completion_tokens": count_text_tokens(content or "")
            + sum(
                count_text_tokens(c["function"]["name"] + c["function"]["arguments"])
                for c in message.get("tool_calls", [])
            ),
        }
        return Completion(
            message=message,
            usage=usage,
            model=self.name,
            provider=self.provider,
            finish_reason="tool_calls" if message.get("tool_calls") else "stop",
        )

    @staticmethod
    def _message(reply: Any, call_number: int) -> dict[str, Any]:
        if isinstance(reply, str):
            return {"role": "assistant", "content": reply}
        if not isinstance(reply, dict):
            raise TypeError(
                f"scripted reply {call_number} must be a str, a dict or a callable returning one, "
                f"not {type(reply).__name__}"
            )
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        calls = []
        for index, call in enumerate(reply.get("tool_calls") or []):
            arguments = call.get("arguments", {})
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            calls.append(
                {
                    "id": call.get("id") or f"call_{call_number}_{index}",
                    "type": "function",
                    "function": {"name": call["name"], "arguments": arguments},
                }
            )
        if calls:
            message["tool_calls"] = calls
        return message
