"""Which veil session a proxied conversation is, and what of its history veil has not seen yet.

An agent behind the proxy sends its whole history with every request (OpenAI chat messages).
The proxy keeps one veil session per conversation:

- **The key.** The ``X-Veil-Session`` header when the client sends one (any text up to 200
  characters), else ``h:`` and the SHA-256 of the system prompt and the first user message:
  stable for a whole conversation, different between two.
- **The book** (``.veil/proxy/sessions.json``): key -> veil session id, written atomically under
  a file lock, so conversations survive a restart of the proxy and two proxies on one project
  agree.
- **What is new.** The session's state keeps a fingerprint of every client message it captured
  (role, text, tool-call ids). A request whose history starts with those messages brings the
  messages after them, which are captured in order through :class:`veil.harness.VeilHarness`
  (user messages, assistant messages with their tool calls, tool results). A history that does
  not start with them (the client edited or compacted its own history) starts a fresh veil
  session for the key: the client's history is the source of truth, and veil never edits it.
- **The system prompt** is the client's, taken from the current request (leading ``system`` /
  ``developer`` messages); veil's prompt sections (the manifest, memory files) follow it in the
  one system message veil sends.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from veil import CLIENT_PROMPT_SOURCE, MAX_DEPTH, VeilHarness, cl100k_count, content_text
from veil import json_loads as loads

SESSION_HEADER = "x-veil-session"
"""Request header naming the conversation (any text up to :data:`MAX_KEY_CHARS` characters)."""

SESSION_ID_HEADER = "x-veil-session-id"
"""Response header with the veil session that served the request."""

MAX_KEY_CHARS = 200

STATE_KEY = "proxy"
"""Where a session's :attr:`~veil.core.session.Session.state` keeps the proxy's bookkeeping:
``{"key": str, "seen": [fingerprint, ...], "stored": [index, ...], "requests": [...]}``
(``stored``: the index in the session's messages of each captured client message, -1 for none;
``requests``: what each request measured, :meth:`Conversation.record_request`)."""

NO_SYSTEM_PROMPT = " "
"""The base prompt of a conversation whose client sent no system message: a blank, not veil's
own agent prompt (which describes veil's tools, which this client does not run)."""


class BadConversation(ValueError):
    """The request's messages cannot be read as an OpenAI chat history (names the field)."""


class HistoryDiverged(Exception):
    """The client's history does not start with the messages veil captured for it."""


def conversation_key(messages: list[dict[str, Any]], header: str | None) -> str:
    """The conversation's key: the header's value (stripped), else ``h:`` + SHA-256 (hex, 32
    characters) of the system prompt and the first user message's text.

    Raises:
        BadConversation: the header is empty or longer than :data:`MAX_KEY_CHARS`.
    """
    if header is not None:
        key = header.strip()
        if not key or len(key) > MAX_KEY_CHARS:
            raise BadConversation(
                f"X-Veil-Session: must be 1 to {MAX_KEY_CHARS} characters, got {len(key)}"
            )
        return "x:" + key
    system, rest = split_system(messages)
    first_user = next((content_text(m.get("content")) for m in rest if m["role"] == "user"), "")
    digest = hashlib.sha256(json.dumps([system, first_user]).encode("utf-8")).hexdigest()
    return "h:" + digest[:32]


def split_system(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The leading ``system`` / ``developer`` messages' text (joined by a blank line) and the
    messages after them."""
    texts = []
    index = 0
    while index < len(messages) and messages[index].get("role") in ("system", "developer"):
        texts.append(content_text(messages[index].get("content")))
        index += 1
    return "\n\n".join(t for t in texts if t), messages[index:]


def fingerprint(message: dict[str, Any]) -> str:
    """A short digest (16 hex characters) of what identifies a client message: role, text,
    tool-call ids and names, tool_call_id. Arguments and formatting differences a client may
    introduce when it stores a reply (``content: ""`` for None) do not change it."""
    calls = [
        [c.get("id"), (c.get("function") or {}).get("name")]
        for c in message.get("tool_calls") or []
    ]
    text = content_text(message.get("content")).strip()
    parts = [message.get("role"), text, calls, message.get("tool_call_id")]
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()[:16]


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """``messages`` validated as an OpenAI chat history.

    Raises:
        BadConversation: naming ``messages[i].role`` and so on.
    """
    if not isinstance(messages, list) or not messages:
        raise BadConversation("messages: must be a non-empty list of chat messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise BadConversation(f"messages[{i}]: must be an object")
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise BadConversation(
                f"messages[{i}].role: must be system, developer, user, assistant or tool, "
                f"got {role!r}"
            )
        if role == "tool" and not isinstance(m.get("tool_call_id"), str):
            raise BadConversation(f"messages[{i}].tool_call_id: a tool message needs one")
        calls = m.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise BadConversation(f"messages[{i}].tool_calls: must be a list")
        for j, call in enumerate(calls or []):
            if not isinstance(call, dict) or not isinstance(call.get("id"), str):
                raise BadConversation(f"messages[{i}].tool_calls[{j}].id: must be a string")
            if not isinstance((call.get("function") or {}).get("name"), str):
                raise BadConversation(f"messages[{i}].tool_calls[{j}].function.name: missing")
    return messages


@dataclass
class Conversation:
    """One proxied conversation: its key and the harness over its veil session.

    Attributes:
        key: see :func:`conversation_key`.
        harness: the memory layer over the session (:meth:`VeilHarness.attach`).
        calls: tool_call_id -> (name, arguments) of the calls captured, to capture each result
            with its call.
        lock: held while a request captures and fits (requests of one conversation queue).
    """

    key: str
    harness: VeilHarness
    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def session(self) -> Any:
        """The veil session."""
        return self.harness.session

    @property
    def _state(self) -> dict[str, Any]:
        return self.session.state.setdefault(STATE_KEY, {"key": self.key, "seen": []})

    @property
    def seen(self) -> list[str]:
        """Fingerprints of the client messages captured so far, in order."""
        return self._state["seen"]

    @property
    def stored(self) -> list[int]:
        """For each of :attr:`seen`, the index in the session's messages of the message it was
        stored as (-1: none, or captured before the proxy kept this)."""
        stored = self._state.setdefault("stored", [])
        if len(stored) < len(self.seen):
            stored[:0] = [-1] * (len(self.seen) - len(stored))
        return stored

    @property
    def sizes(self) -> list[int]:
        """For each of :attr:`seen`, the cl100k_base tokens of its text (as ``veil replay``
        counts a message: content only; 0 for messages captured before the proxy kept this)."""
        sizes = self._state.setdefault("sizes", [])
        if len(sizes) < len(self.seen):
            sizes[:0] = [0] * (len(self.seen) - len(sizes))
        return sizes

    def client_tokens(self) -> int:
        """Tokens of the client's history after its system prompt, as ``veil replay`` counts
        a prompt (cl100k_base over message contents: :attr:`sizes`)."""
        return sum(self.sizes)

    def positions(self, indices: list[int | None]) -> list[int | None]:
        """For each stored-message index of a fitted prompt
        (:attr:`veil.core.prompt.context.Prompt.indices`), the position in the client's history
        (after its system messages) of the client message it came from, else None."""
        where = {index: position for position, index in enumerate(self.stored) if index >= 0}
        return [where.get(i) if i is not None else None for i in indices]

    def record_request(self, figures: dict[str, Any]) -> None:
        """Keep what one request measured (tokens of the client's history and of the prompt
        sent, the completion tokens asked and allowed...), in order, in the session's state
        (saved with it: ``veil sessions`` / the store keep it)."""
        self._state.setdefault("requests", []).append(figures)
        self.session.save_state()

    def capture(self, system: str, messages: list[dict[str, Any]]) -> int:
        """Take the client's system prompt and capture the messages veil has not seen.

        Args:
            system: the client's system prompt ('' for none).
            messages: the history after the system messages (checked by
                :func:`check_messages`).

        Returns:
            How many messages were captured now.

        Raises:
            HistoryDiverged: the history does not extend what was captured (the caller starts
                a fresh session; see the module docstring).
        """
        session = self.session
        session.snapshot["systemPrompt"] = system or NO_SYSTEM_PROMPT
        # the user's own client wrote it, not the project's files: used as it is
        session.snapshot["systemPromptSource"] = CLIENT_PROMPT_SOURCE
        prints = [fingerprint(m) for m in messages]
        seen = self.seen
        if prints[: len(seen)] != seen:
            raise HistoryDiverged("the client's history does not extend the captured one")
        stored, sizes = self.stored, self.sizes
        new = messages[len(seen) :]
        for message, mark in zip(new, prints[len(seen) :], strict=True):
            before = len(session.messages)
            self._capture_one(message)
            seen.append(mark)
            stored.append(before if len(session.messages) > before else -1)
            sizes.append(cl100k_count(content_text(message.get("content"))))
        if new:
            session.save_state()
        return len(new)

    def _capture_one(self, message: dict[str, Any]) -> None:
        """Store one client message through the harness (the message it stores is the first
        one appended)."""
        harness = self.harness
        role = message["role"]
        if role == "user":
            harness.on_user_message(content_text(message.get("content")))
        elif role in ("system", "developer"):  # a system message inside the history
            harness.on_user_message(f"[{role}] " + content_text(message.get("content")))
        elif role == "assistant":
            calls = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": _arguments_text(c["function"].get("arguments")),
                    },
                }
                for c in message.get("tool_calls") or []
            ]
            text = content_text(message.get("content")) or None
            harness.on_assistant_message({"content": text, "tool_calls": calls or None})
            for call in calls:
                arguments = _arguments_dict(call["function"]["arguments"])
                self.calls[call["id"]] = (call["function"]["name"], arguments)
                harness.before_tool_call(call["function"]["name"], arguments, call["id"])
        else:  # tool
            call_id = message["tool_call_id"]
            name, arguments = self.calls.pop(call_id, (_call_name(self.session, call_id), {}))
            harness.after_tool_call(name, arguments, call_id, content_text(message.get("content")))


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _arguments_dict(text: str) -> dict[str, Any]:
    try:
        value = loads(text or "{}", max_depth=MAX_DEPTH)
    except ValueError:
        return {"arguments": text}  # a model's malformed JSON, kept as text
    return value if isinstance(value, dict) else {"arguments": value}


def _call_name(session: Any, call_id: str) -> str:
    """The name of tool call ``call_id`` in the session's stored history ('' when absent: a
    result whose call came before a restart is still captured)."""
    for message in reversed(session.messages):
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                return str((call.get("function") or {}).get("name") or "")
    return ""


class ConversationBook:
    """Conversations of one project: key -> veil session, in memory and in
    ``.veil/proxy/sessions.json`` (see the module docstring).

    Args:
        veil: the open project.
        agent: the agent whose settings the sessions snapshot.
    """

    def __init__(self, veil: Any, agent: str | None = None) -> None:
        self.veil = veil
        self.agent = agent
        folder = Path(veil.config.project_dir) / ".veil" / "proxy"
        self.path = folder / "sessions.json"
        self._file_lock = FileLock(str(folder / "sessions.json.lock"))
        self._live: dict[str, Conversation] = {}
        self._lock = threading.Lock()

    def get(self, key: str, model: str) -> Conversation:
        """The conversation for ``key``: held in memory, else its stored session resumed, else a
        new session for upstream ``model``."""
        with self._lock:
            conversation = self._live.get(key)
            if conversation is not None:
                return conversation
            session_id = self._read().get(key)
            session = None
            if session_id is not None:
                try:
                    session = self.veil.live_session(session_id)
                except Exception:  # deleted or damaged: the conversation starts afresh
                    session = None
            if session is None or session.closed:
                return self._start(key, model)
            conversation = Conversation(key, VeilHarness.attach(self.veil, session))
            self._live[key] = conversation
            return conversation

    def restart(self, key: str, model: str) -> Conversation:
        """A fresh session for ``key`` (the client's history diverged from the captured one)."""
        with self._lock:
            return self._start(key, model)

    def _start(self, key: str, model: str) -> Conversation:
        session = self.veil.new_session(agent=self.agent, model=model)
        session.state[STATE_KEY] = {"key": key, "seen": []}
        session.save_state()
        conversation = Conversation(key, VeilHarness.attach(self.veil, session))
        self._live[key] = conversation
        self._write(key, session.id)
        return conversation

    def _read(self) -> dict[str, str]:
        try:
            data = loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, key: str, session_id: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._file_lock:
            data = self._read()
            data[key] = session_id
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".sessions-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle, indent=1, sort_keys=True)
                os.replace(tmp, self.path)  # atomic: a reader sees the old file or the new
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
