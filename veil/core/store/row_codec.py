"""Column values of ``.veil/context.db`` to and from Python: the JSON text veil writes
(:func:`dumps`, :func:`dumps_strings`), and checking rows read back: what counts as damaged, and
what a damaged row of a session's history is replaced by when the session loads.

A row is *damaged* when a column that veil parses does not hold what veil wrote there: JSON that
does not parse (a torn write by another tool, a hand edit, disk damage), JSON of the wrong shape,
or a number column holding text. One damaged row must not make the rest unreadable: readers skip
or stand in for it, name it in a warning, and leave it in place for ``veil doctor`` (which moves
it to the ``quarantine`` table with ``--repair``; nothing is ever deleted unseen).

What each table's rows must hold (the checks below):

* ``sessions``: ``id`` and ``agent`` text; ``model``, ``title`` and ``compact_summary`` null or
  text that is valid UTF-8 (a column of invalid UTF-8 makes SQLite's text fetch fail, so readers
  fetch these as bytes: :data:`SESSION_TEXT_COLUMNS`); ``created_at`` / ``updated_at`` numbers;
  ``version`` and ``compact_size`` whole numbers >= 0; ``snapshot`` and ``state`` JSON objects.
* ``messages``: ``message`` a JSON object that is an OpenAI chat message (``role`` one of
  system / user / assistant / tool; ``content`` text, a list of parts or null; a tool message's
  ``tool_call_id`` text; an assistant's ``tool_calls`` a list of ``{"id", "function": {"name",
  "arguments"}}``); ``step`` an integer; ``usage`` null or a JSON object.
* ``items``: ``tags`` and ``targets`` JSON lists of text.
* ``events``: ``payload`` a JSON object.
"""

from __future__ import annotations

import json
from typing import Any

from veil.core.jsonio import loads
from veil.core.types import Message

ROLES = frozenset({"system", "user", "assistant", "tool"})


class _NotUTF8(str):
    """Marks a column that did not decode (json_value reports it)."""


def utf8(value: Any) -> Any:
    """A column read as bytes (``CAST(col AS BLOB)``) decoded as UTF-8; bytes that are not
    UTF-8 give a marker that :func:`json_value` reports as damage. Other values pass."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            return _NotUTF8(f"not valid UTF-8 (byte {exc.start})")
    return value


def json_value(text: Any, kind: type, what: str) -> tuple[Any, str | None]:
    """Parse a JSON column.

    Args:
        text: the column's value (``str`` as veil writes it; anything else is damage).
        kind: the Python type the JSON must decode to (``dict`` or ``list``).
        what: the column's name, for the problem text.

    Returns:
        ``(value, None)``, or ``(None, problem)`` where ``problem`` says what is wrong
        (``"snapshot: not valid JSON (Expecting value: line 1 column 1 (char 0))"``).
    """
    if isinstance(text, _NotUTF8):
        return None, f"{what}: {text}"
    if isinstance(text, (bytes, bytearray)):
        return None, f"{what}: binary data, not JSON text"
    if not isinstance(text, str):
        return None, f"{what}: {type(text).__name__} value, not JSON text"
    try:
        value = loads(text)
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError from a lone surrogate
        return None, f"{what}: not valid JSON ({exc})"
    if not isinstance(value, kind):
        return None, f"{what}: a JSON {_json_name(value)}, expected a JSON {_json_name(kind())}"
    return value, None


def _json_name(value: Any) -> str:
    """JSON's name for the type of a decoded value (object, array, string...)."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def message_problem(message: Any) -> str | None:
    """Why a decoded ``messages.message`` is not an OpenAI chat message, or None when it is."""
    if not isinstance(message, dict):
        return f"message: a JSON {_json_name(message)}, expected a JSON object"
    role = message.get("role")
    if role not in ROLES:
        return f"message: role {role!r} is not one of {', '.join(sorted(ROLES))}"
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        return f"message: content is {type(content).__name__}, expected text, parts or null"
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return "message: a tool message without a tool_call_id"
    calls = message.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            return "message: tool_calls is not a list"
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if not (
                isinstance(call.get("id") if isinstance(call, dict) else None, str)
                and isinstance(fn, dict)
                and isinstance(fn.get("name"), str)
                and isinstance(fn.get("arguments", ""), str)
            ):
                return "message: a tool call without id, function name or text arguments"
    return None


SESSION_TEXT_COLUMNS = ("model", "title", "compact_summary")
"""Free-text columns of ``sessions`` that readers fetch as bytes and decode
(:meth:`veil.core.store.dialect.Dialect.text_as_bytes`, :func:`decode_session_text`)."""


def decode_session_text(row: dict[str, Any]) -> list[str]:
    """Decode the :data:`SESSION_TEXT_COLUMNS` of a ``sessions`` row fetched as bytes, in place;
    one that is not valid UTF-8 (or not text) becomes None. Returns the problems found, one per
    damaged column (``compact_summary: not valid UTF-8 (byte 0)``)."""
    problems = []
    for col in SESSION_TEXT_COLUMNS:
        value = row.get(col)
        if isinstance(value, (bytes, bytearray)):
            try:
                row[col] = bytes(value).decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(f"{col}: not valid UTF-8 (byte {exc.start})")
                row[col] = None
        elif value is not None and not isinstance(value, str):
            problems.append(f"{col}: {type(value).__name__} value, expected text or null")
            row[col] = None
    return problems


def session_row_problems(row: Any) -> list[str]:
    """Damage in the columns of a ``sessions`` row that a listing reads (id, agent, times).
    The snapshot and state are checked when the session loads (:func:`session_json`)."""
    problems = []
    for col in ("id", "agent"):
        if not isinstance(row[col], str):
            problems.append(f"{col}: {type(row[col]).__name__} value, expected text")
    for col in ("created_at", "updated_at"):
        value = row[col]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{col}: {type(value).__name__} value, expected a number")
    for col in ("closed_at",):
        value = row[col]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            problems.append(f"{col}: {type(value).__name__} value, expected a number or null")
    for col in ("compact_size", "version"):
        value = row[col]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"{col}: {value!r}, expected a whole number >= 0")
    return problems


def session_json(row: dict[str, Any]) -> list[str]:
    """Parse a session row's ``snapshot`` and ``state`` in place; a damaged one becomes ``{}``
    and its column name is added to ``row["damaged"]``. Returns the problems found."""
    problems = []
    damaged = []
    for col in ("snapshot", "state"):
        raw = row.get(col)
        if col == "state" and raw is None:
            raw = "{}"
        value, problem = json_value(raw, dict, col)
        if problem:
            problems.append(problem)
            damaged.append(col)
            value = {}
        row[col] = value
    row["damaged"] = damaged
    return problems


def placeholder(index: int, reason: str) -> str:
    """The text that stands in for message ``index`` when its row is damaged or missing."""
    return (
        f"[veil: message {index} of this session could not be read from the store ({reason}); "
        "it was left out. `veil doctor` names the damaged rows]"
    )


def fill_damaged(messages: list[Message | None], reasons: dict[int, str]) -> list[Message]:
    """Stand-ins for the damaged messages (``None`` entries) of a history, so that the history
    keeps its length (items point into it by position) and stays valid for a provider (every
    tool call keeps a result, every tool result a call).

    A damaged row becomes, in order of preference:

    * a tool result, when an assistant message before it has a tool call still unanswered there
      (the row was that call's result): ``{"role": "tool", "tool_call_id": <that call>}``;
    * an assistant message with tool calls, when the messages right after it are tool results
      whose calls no earlier message made (the row was the assistant turn that made them);
    * otherwise an assistant message saying a message was lost.

    Args:
        messages: the history in order, ``None`` where a row is damaged or missing.
        reasons: position -> what is wrong (for the stand-in's text).

    Returns:
        A new list with no ``None`` left; the other messages are the same objects.
    """
    out: list[Message] = []
    issued: set[str] = set()
    open_calls: list[str] = []
    for i, message in enumerate(messages):
        if message is None:
            text = placeholder(i, reasons.get(i, "damaged row"))
            if open_calls:
                message = {"role": "tool", "tool_call_id": open_calls[0], "content": text}
            else:
                orphans = []
                for later in messages[i + 1 :]:
                    if later is None or later.get("role") != "tool":
                        break
                    if later["tool_call_id"] not in issued:
                        orphans.append(later["tool_call_id"])
                message = {"role": "assistant", "content": text}
                if orphans:
                    message["tool_calls"] = [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "unavailable", "arguments": "{}"},
                        }
                        for call_id in orphans
                    ]
        role = message.get("role")
        if role == "assistant":
            calls = [c["id"] for c in message.get("tool_calls") or []]
            issued.update(calls)
            open_calls = calls
        elif role == "tool":
            if message.get("tool_call_id") in open_calls:
                open_calls.remove(message["tool_call_id"])
        else:
            open_calls = []
        out.append(message)
    return out


# -- writing JSON columns ---------------------------------------------------------------

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # built once


def dumps(value: Any) -> str:
    """JSON-encode for a TEXT column (UTF-8 kept as is, compact)."""
    return _encode(value)


def dumps_strings(values: Any) -> str:
    """:func:`dumps` of ``values``, faster for a list of strings none of which needs escaping
    (no ``"``, no backslash, only printable characters: nearly every tag and target); anything
    else goes through :func:`dumps`. Same text either way (tests/test_store.py compares them)."""
    if type(values) is list:
        try:
            joined = "".join(values)
        except TypeError:  # not all strings
            return _encode(values)
        if joined.isprintable() and '"' not in joined and "\\" not in joined:
            return '["' + '","'.join(values) + '"]' if values else "[]"
    return _encode(values)
