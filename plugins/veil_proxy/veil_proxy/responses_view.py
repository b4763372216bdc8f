"""OpenAI Responses requests as veil's chat history, and a fitted prompt back as Responses input
items (see :mod:`veil_proxy.views`).

Reading (:func:`to_view`; OpenAI's API reference, "Responses", input items): ``instructions``
and the leading ``system`` / ``developer`` messages are the system prompt; a ``user`` message is
a user message (its text parts; images are not text and are dropped, as the proxy keeps text);
an ``assistant`` message and the ``function_call`` / ``custom_tool_call`` items after it (one
model turn) are one assistant message with ``tool_calls``; ``function_call_output`` /
``custom_tool_call_output`` items are ``tool`` messages. ``reasoning`` items and the item types
veil does not read stay with the message after them and are sent before it unchanged (a
reasoning item must be followed by its output item, and with ``store: false`` it carries its
``encrypted_content``, which must come back as it was issued).

Writing (:func:`render`): the client's ``input`` replaced by the fitted prompt: the client's own
leading system items as they were, veil's sections as one more ``developer`` message, then each
message in the client's form (verbatim when veil sends it unchanged: ids, ``encrypted_content``,
``status``), or the same form with veil's text (a pointer stub, a redacted credential).
"""

from __future__ import annotations

import json
from typing import Any

from veil import content_text
from veil_proxy.conversations import BadConversation
from veil_proxy.views import Origin, View, originals, same_arguments, same_text, veil_system_part

CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
"""Call item types and the field that holds their arguments."""

OUTPUTS = ("function_call_output", "custom_tool_call_output")
"""Call output item types."""


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's ``input`` as a list of items (a string is one user message).

    Raises:
        BadConversation: ``input`` is missing or malformed (naming it).
    """
    value = body.get("input")
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise BadConversation("input: must be a string or a non-empty list of items")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise BadConversation(f"input[{i}]: must be an object")
    return value


def item_kind(item: dict[str, Any]) -> str:
    """An input item's type (a bare ``{"role", "content"}`` is a message)."""
    return str(item.get("type") or ("message" if "role" in item else ""))


def _parts_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
        )
    return content_text(content)


def to_view(body: dict[str, Any]) -> View:
    """The request's conversation as veil's chat history (see the module docstring).

    Raises:
        BadConversation: ``input`` or an item is malformed (naming it, as ``input[3]``).
    """
    items = input_items(body)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise BadConversation("instructions: must be a string")
    view = View()
    if instructions:
        view.add({"role": "system", "content": instructions}, Origin(-1, ()))
    pending: list[int] = []  # items veil does not read, sent before the next message
    open_turn = False  # the last message is an assistant turn more calls may join
    for i, item in enumerate(items):
        kind = item_kind(item)
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise BadConversation(
                    f"input[{i}].role: must be user, assistant, system or developer"
                )
            text = _parts_text(item.get("content"))
            view.add({"role": role, "content": text}, Origin(i, (i,), tuple(pending)))
            pending, open_turn = [], role == "assistant"
        elif kind in CALLS:
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise BadConversation(f"input[{i}]: a {kind} needs a call_id and a name")
            arguments = item.get(CALLS[kind])
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": "" if arguments is None else arguments},
            }
            if open_turn:
                last, origin = view.messages[-1], view.origins[-1]
                last["tool_calls"] = [*(last.get("tool_calls") or []), call]
                view.origins[-1] = Origin(
                    origin.index, (*origin.parts, i), (*origin.extras, *pending)
                )
            else:
                message = {"role": "assistant", "content": None, "tool_calls": [call]}
                view.add(message, Origin(i, (i,), tuple(pending)))
            pending, open_turn = [], True
        elif kind in OUTPUTS:
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise BadConversation(f"input[{i}].call_id: must be a string")
            tool = {
                "role": "tool",
                "tool_call_id": call_id,
                "content": _parts_text(item.get("output")),
            }
            view.add(tool, Origin(i, (i,), tuple(pending)))
            pending, open_turn = [], False
        else:  # reasoning, and items veil does not read: sent as they are
            pending.append(i)
            view.kept.append(_kept_text(item))
    view.system_text = "\n\n".join(
        content_text(m.get("content")) for m in view.messages[: view.system_count] if m["content"]
    )
    view.trailing = tuple(pending)
    return view


def _kept_text(item: dict[str, Any]) -> str:
    """The text of an item sent as it is: a reasoning item's summary, else the item as JSON."""
    if item_kind(item) == "reasoning":
        return "\n".join(str(s.get("text") or "") for s in item.get("summary") or [])
    return json.dumps(item)


def render(
    body: dict[str, Any],
    view: View,
    fitted: list[dict[str, Any]],
    positions: list[int | None],
) -> dict[str, Any]:
    """The Responses request to send upstream: ``body`` with ``input`` (and ``instructions``)
    from the fitted prompt (see the module docstring).

    Args:
        body: the client's request.
        view: :func:`to_view` of it.
        fitted: the fitted prompt (OpenAI chat messages: the system message first).
        positions: for each fitted message, its client's history position
            (:meth:`veil_proxy.conversations.Conversation.positions`).
    """
    items = input_items(body)
    found = originals(view, fitted, positions)
    out: list[dict[str, Any]] = []
    rendered = dict(body)
    start = 0
    while start < len(fitted) and fitted[start].get("role") in ("system", "developer"):
        start += 1
    for k, message in enumerate(fitted[:start]):
        text = content_text(message.get("content"))
        if k == 0:
            extra = veil_system_part(text, view.system_text)
            if extra is None:  # veil's text does not start with the client's: send it whole
                rendered.pop("instructions", None)
                out.append(_message("developer", text))
                continue
            for origin in view.origins[: view.system_count]:
                if origin.index >= 0:
                    out += [items[j] for j in origin.parts]
            if extra:
                out.append(_message("developer", extra))
        elif text:
            out.append(_message("developer", text))
    for message, k in zip(fitted[start:], found[start:], strict=True):
        origin = view.origins[k] if k is not None else None
        if origin is not None and origin.index < 0:
            origin = None
        original = view.messages[k] if origin is not None else None
        if origin is not None:
            out += [items[j] for j in origin.extras]
        role = message.get("role")
        if role == "assistant":
            out += _assistant_items(message, original, origin, items)
        elif role == "tool":
            out.append(_output_item(message, original, origin, items))
        elif origin is not None and original is not None:
            source_role = original.get("role")
            text = content_text(message.get("content"))
            if source_role in ("system", "developer"):
                unchanged = text == f"[{source_role}] " + content_text(original.get("content"))
                text = text.removeprefix(f"[{source_role}] ")
            else:
                unchanged = same_text(message, original)
            out.append(items[origin.index] if unchanged else _message(str(source_role), text))
        else:
            out.append(_message("user", content_text(message.get("content"))))
    out += [items[j] for j in view.trailing]
    rendered["input"] = out
    return rendered


def _message(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def _assistant_items(
    message: dict[str, Any],
    original: dict[str, Any] | None,
    origin: Origin | None,
    items: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """A model turn's items in the client's order: its message (verbatim when its text is
    unchanged) and its calls (verbatim when their arguments are)."""
    calls = {c.get("id"): c for c in message.get("tool_calls") or []}
    calls_in = {c.get("id"): c for c in (original or {}).get("tool_calls") or []}
    out: list[dict[str, Any]] = []
    if origin is not None:
        for j in origin.parts:
            item = items[j]
            kind = item_kind(item)
            if kind == "message":
                if original is not None and same_text(message, original):
                    out.append(item)
                elif content_text(message.get("content")):
                    out.append({**item, "content": _text_part(message)})
            elif kind in CALLS:
                call = calls.pop(item.get("call_id"), None)
                if call is None:
                    continue
                if same_arguments(call, calls_in.get(item.get("call_id")) or {}):
                    out.append(item)
                else:
                    arguments = (call.get("function") or {}).get("arguments") or ""
                    out.append({**item, CALLS[kind]: arguments})
    elif content_text(message.get("content")):
        out.append(_message("assistant", content_text(message.get("content"))))
    for call in calls.values():  # calls the client's items do not hold (origin unknown)
        function = call.get("function") or {}
        out.append(
            {
                "type": "function_call",
                "call_id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments") or "{}",
            }
        )
    return out


def _text_part(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "output_text", "text": content_text(message.get("content")), "annotations": []}
    ]


def _output_item(
    message: dict[str, Any],
    original: dict[str, Any] | None,
    origin: Origin | None,
    items: list[dict[str, Any]],
) -> dict[str, Any]:
    """A call's output item: the client's when unchanged, else its form with veil's text."""
    if origin is not None and original is not None:
        item = items[origin.index]
        if same_text(message, original):
            return item
        return {**item, "output": content_text(message.get("content"))}
    return {
        "type": "function_call_output",
        "call_id": message.get("tool_call_id"),
        "output": content_text(message.get("content")),
    }
