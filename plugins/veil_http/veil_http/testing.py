"""Test helpers for code that drives the HTTP API: a model that always answers, and a check of
the JSON error body. Used by this plugin's tests and its benchmark; no test framework needed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from veil.testing.scripted_model import ScriptedModel


def last_user_text(messages: list[dict]) -> str:
    """Content of the latest user message in an OpenAI message list (veil's context note,
    sent last as a ``user`` message, is not the user's and is skipped)."""
    from veil import NOTE_PREFIX

    for message in reversed(messages):
        content = str(message.get("content") or "")
        if message.get("role") == "user" and not content.startswith(NOTE_PREFIX):
            return content
    return ""


class AlwaysAnswers(ScriptedModel):
    """A :class:`ScriptedModel` that answers ``echo: <last user message>`` once its queued
    replies run out, so any number of turns (schemathesis, load) can run.

    Attributes:
        delay: seconds each echo answer sleeps (to make turns overlap in concurrency tests).
        active, max_active: calls in progress now / at most at once (echo answers only).
    """

    def __init__(self, replies: list[Any] | None = None, *, delay: float = 0.0, **kw: Any) -> None:
        super().__init__(replies, **kw)
        self.delay = delay
        self.active = 0
        self.max_active = 0
        self._count_lock = threading.Lock()

    def _echo(self, messages: list[dict], tools: list[dict] | None) -> str:
        with self._count_lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if self.delay:
                time.sleep(self.delay)
            return "echo: " + last_user_text(messages)
        finally:
            with self._count_lock:
                self.active -= 1

    def complete(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Any:
        with self._lock:
            if not self._replies:
                self._replies.append(self._echo)
        return super().complete(messages, tools, on_token)


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """Check a JSON error answer; return its ``error`` member."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code, body
    assert "Traceback" not in response.text
    return body["error"]
