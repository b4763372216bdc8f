"""Anthropic Messages requests as veil's chat history, and a fitted prompt back as an Anthropic
request (see :mod:`veil_proxy.views`).

Reading (:func:`to_view`; Anthropic's API reference, "Messages"): the top-level ``system`` (a
string or text blocks) is the system prompt; a ``user`` message's ``tool_result`` blocks become
``tool`` messages (first, as Anthropic puts them first) and its other blocks one ``user``
message (text; images and documents are not text and are dropped, as the proxy keeps text); an
``assistant`` message's ``text`` and ``tool_use`` blocks become one assistant message with
``tool_calls``; its ``thinking`` / ``redacted_thinking`` blocks are not text veil keeps but stay
with the message; a ``system`` turn inside ``messages`` (Claude Code's per-turn-control beta) is
a system message of the history.

Writing (:func:`render`): the client's request with ``system`` and ``messages`` replaced by the
fitted prompt. The client's system blocks stay as they were (their ``cache_control`` markers
too) and veil's sections follow as one more text block. A message veil sends unchanged is the
client's own (its blocks verbatim: thinking blocks and their signatures, ``cache_control``,
``is_error``); a changed one keeps its form with veil's text, thinking blocks first, as the API
requires of an assistant turn in a tool loop ("Extended thinking": thinking blocks must be passed
back unchanged). A ``cache_control`` marker on a message veil left out moves to the last block
sent, so the client's breakpoints stay as many (at most 4, Anthropic's limit).
"""

from __future__ import annotations

import json
from typing import Any

from veil import MAX_DEPTH, content_text
from veil import json_loads as loads
from veil_proxy.conversations import BadConversation
from veil_proxy.views import (
    Origin,
    View,
    originals,
    same_arguments,
    same_text,
    veil_system_part,
)

_THINKING = ("thinking", "redacted_thinking")


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise BadConversation(f"{where}.content: must be a string or a list of content blocks")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise BadConversation(f"{where}.content.{j}: must be a content block with a type")
    return content


def _text_of(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")


def _result_text(block: dict[str, Any]) -> str:
    inner = block.get("content")
    if isinstance(inner, list):
        return "\n".join(str(b.get("text") or "") for b in inner if isinstance(b, dict))
    return "" if inner is None else str(inner)


def system_text(body: dict[str, Any]) -> str:
    """The request's top-level ``system`` as text (text blocks joined by newlines)."""
    system = body.get("system")
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return _text_of([b for b in system if isinstance(b, dict)])
    raise BadConversation("system: must be a string or a list of text blocks")


def to_view(body: dict[str, Any]) -> View:
    """The request's conversation as veil's chat history (see the module docstring).

    Raises:
        BadConversation: ``messages`` or a block is malformed (naming it, as
            ``messages.3.content.1``).
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadConversation("messages: must be a non-empty list of messages")
    view = View(system_text=system_text(body))
    if view.system_text:
        view.add({"role": "system", "content": view.system_text}, Origin(-1, ()))
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise BadConversation(f"{where}: must be an object")
        role = message.get("role")
        blocks = _blocks(message.get("content"), where)
        if role == "system":
            text = _text_of(blocks)
            view.add({"role": "system", "content": text}, Origin(i, tuple(range(len(blocks)))))
        elif role == "user":
            results = [j for j, b in enumerate(blocks) if b.get("type") == "tool_result"]
            for j in results:
                call_id = blocks[j].get("tool_use_id")
                if not isinstance(call_id, str):
                    raise BadConversation(f"{where}.content.{j}.tool_use_id: must be a string")
                tool = {"role": "tool", "tool_call_id": call_id, "content": _result_text(blocks[j])}
                view.add(tool, Origin(i, (j,)))
            rest = [j for j in range(len(blocks)) if j not in results]
            text = _text_of([blocks[j] for j in rest])
            if rest and (text or not results):
                view.add({"role": "user", "content": text}, Origin(i, tuple(rest)))
        elif role == "assistant":
            calls = []
            for j, block in enumerate(blocks):
                if block.get("type") == "tool_use":
                    if not isinstance(block.get("id"), str) or not isinstance(
                        block.get("name"), str
                    ):
                        raise BadConversation(f"{where}.content.{j}: tool_use needs an id and name")
                    calls.append(
                        {
                            "id": block["id"],
                            "type": "function",
                            "function": {
                                "name": block["name"],
                                "arguments": json.dumps(block.get("input") or {}),
                            },
                        }
                    )
            view.kept += [
                str(b.get("thinking") or b.get("data") or "")
                for b in blocks
                if b.get("type") in _THINKING
            ]
            assistant: dict[str, Any] = {"role": "assistant", "content": _text_of(blocks) or None}
            if calls:
                assistant["tool_calls"] = calls
            view.add(assistant, Origin(i, tuple(range(len(blocks)))))
        else:
            raise BadConversation(f"{where}.role: must be user or assistant, got {role!r}")
    return view


def render(
    body: dict[str, Any],
    view: View,
    fitted: list[dict[str, Any]],
    positions: list[int | None],
) -> dict[str, Any]:
    """The Anthropic request to send upstream: ``body`` with ``system`` and ``messages`` from
    the fitted prompt (see the module docstring).

    Args:
        body: the client's request.
        view: :func:`to_view` of it.
        fitted: the fitted prompt (OpenAI chat messages: the system message first).
        positions: for each fitted message, its client's history position
            (:meth:`veil_proxy.conversations.Conversation.positions`).
    """
    source = body["messages"]
    found = originals(view, fitted, positions)
    system_parts: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    start = 0
    while start < len(fitted) and fitted[start].get("role") == "system":
        start += 1
    for k, message in enumerate(fitted[:start]):
        text = content_text(message.get("content"))
        if k == 0:
            system_parts += _system_blocks(body, text, view.system_text)
        elif text:
            system_parts.append({"type": "text", "text": text})
    for message, k in zip(fitted[start:], found[start:], strict=True):
        role = message.get("role")
        origin = view.origins[k] if k is not None else None
        if origin is not None and origin.index < 0:
            origin = None
        if role == "assistant":
            blocks = _assistant_blocks(
                message, view.messages[k] if origin else None, origin, source
            )
            out.append({"role": "assistant", "content": blocks})
            continue
        if role == "tool":
            block = _result_block(message, view.messages[k] if origin else None, origin, source)
            _append_user(out, [block], origin.index if origin else None)
            continue
        # user: the client's text, a system turn stored as a user message, or veil's note
        original_role = source[origin.index].get("role") if origin else None
        if original_role == "system":
            original = view.messages[k]
            text = content_text(message.get("content"))
            if text == "[system] " + content_text(original.get("content")):
                out.append(source[origin.index])
            else:
                plain = text.removeprefix("[system] ")
                out.append({"role": "system", "content": [{"type": "text", "text": plain}]})
            continue
        if origin is not None and same_text(message, view.messages[k]):
            blocks = (
                [source[origin.index]["content"][j] for j in origin.parts]
                if isinstance(source[origin.index]["content"], list)
                else [{"type": "text", "text": source[origin.index]["content"]}]
            )
        else:
            blocks = [{"type": "text", "text": content_text(message.get("content"))}]
            if origin is not None:
                _carry_marker(blocks[-1], source[origin.index], origin.parts)
        _append_user(out, blocks, origin.index if origin else None)
    rendered = {**body, "messages": [{k: v for k, v in m.items() if k != "_from"} for m in out]}
    if system_parts:
        rendered["system"] = system_parts if _system_as_blocks(body) else _joined(system_parts)
    else:
        rendered.pop("system", None)
    if cache_breakpoints(rendered) < cache_breakpoints(body) and rendered["messages"]:
        rendered["messages"][-1] = _marked(rendered["messages"][-1])
    return rendered


def _system_as_blocks(body: dict[str, Any]) -> bool:
    return isinstance(body.get("system"), list)


def _joined(parts: list[dict[str, Any]]) -> str:
    return "\n\n".join(str(p.get("text") or "") for p in parts)


def _system_blocks(body: dict[str, Any], fitted_text: str, client_text: str) -> list[dict]:
    """The system blocks: the client's own, then veil's part as one more block; all of veil's
    text in one block when it does not start with the client's prompt."""
    extra = veil_system_part(fitted_text, client_text)
    system = body.get("system")
    own: list[dict[str, Any]]
    if isinstance(system, list):
        own = [b for b in system if isinstance(b, dict)]
    elif isinstance(system, str) and system:
        own = [{"type": "text", "text": system}]
    else:
        own = []
    if extra is None:
        block: dict[str, Any] = {"type": "text", "text": fitted_text}
        if any(b.get("cache_control") for b in own):
            block["cache_control"] = next(b["cache_control"] for b in own if b.get("cache_control"))
        return [block]
    return own + ([{"type": "text", "text": extra}] if extra else [])


def _assistant_blocks(
    message: dict[str, Any],
    original: dict[str, Any] | None,
    origin: Origin | None,
    source: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """An assistant turn's blocks: the client's thinking blocks first, unchanged; its text and
    tool_use blocks as they were when veil sends them unchanged, else with veil's text and
    arguments."""
    blocks_in = source[origin.index]["content"] if origin else []
    if isinstance(blocks_in, str):
        blocks_in = [{"type": "text", "text": blocks_in}]
    out = [b for b in blocks_in if b.get("type") in _THINKING]
    text = content_text(message.get("content"))
    if original is not None and same_text(message, original):
        out += [b for b in blocks_in if b.get("type") == "text"]
    elif text:
        out.append({"type": "text", "text": text})
    uses = {b.get("id"): b for b in blocks_in if b.get("type") == "tool_use"}
    calls_in = {c.get("id"): c for c in (original or {}).get("tool_calls") or []}
    for call in message.get("tool_calls") or []:
        use = uses.get(call.get("id"))
        if (
            use is not None
            and call.get("id") in calls_in
            and same_arguments(call, calls_in[call["id"]])
        ):
            out.append(use)
            continue
        arguments = (call.get("function") or {}).get("arguments") or "{}"
        try:
            value = (
                loads(arguments, max_depth=MAX_DEPTH) if isinstance(arguments, str) else arguments
            )
        except ValueError:
            value = {"arguments": arguments}
        block = {
            "type": "tool_use",
            "id": call.get("id"),
            "name": (call.get("function") or {}).get("name"),
            "input": value if isinstance(value, dict) else {"arguments": value},
        }
        if use is not None and use.get("cache_control"):
            block["cache_control"] = use["cache_control"]
        out.append(block)
    if not out:
        out.append({"type": "text", "text": text or "(no content)"})
    return out


def _result_block(
    message: dict[str, Any],
    original: dict[str, Any] | None,
    origin: Origin | None,
    source: list[dict[str, Any]],
) -> dict[str, Any]:
    """A tool result: the client's block when veil sends it unchanged, else its form with
    veil's text."""
    block_in = source[origin.index]["content"][origin.parts[0]] if origin else None
    if block_in is not None and original is not None and same_text(message, original):
        return block_in
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.get("tool_call_id"),
        "content": content_text(message.get("content")),
    }
    if block_in is not None:
        for key in ("is_error", "cache_control"):
            if key in block_in:
                block[key] = block_in[key]
    return block


def _append_user(
    out: list[dict[str, Any]], blocks: list[dict[str, Any]], source: int | None
) -> None:
    """Add user blocks: into the previous user message when both come from the same client
    message (its results and its text), or when the previous one holds tool results and these
    are more of them; else as a new user message."""
    if out and out[-1]["role"] == "user":
        last = out[-1]
        same_source = source is not None and last.get("_from") == source
        more_results = all(b.get("type") == "tool_result" for b in blocks) and all(
            b.get("type") == "tool_result" for b in last["content"]
        )
        if same_source or more_results:
            last["content"] = [*last["content"], *blocks]
            return
    out.append({"role": "user", "content": list(blocks), "_from": source})


def _carry_marker(block: dict[str, Any], message: dict[str, Any], parts: tuple[int, ...]) -> None:
    content = message.get("content")
    if not isinstance(content, list):
        return
    for j in parts:
        marker = content[j].get("cache_control") if j < len(content) else None
        if marker:
            block["cache_control"] = marker
            return


def cache_breakpoints(body: dict[str, Any]) -> int:
    """Blocks of an Anthropic request that carry ``cache_control`` (system blocks, message
    blocks, tool definitions)."""
    count = 0
    system = body.get("system")
    if isinstance(system, list):
        count += sum(1 for b in system if isinstance(b, dict) and b.get("cache_control"))
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and b.get("cache_control"))
    for tool in body.get("tools") or []:
        count += bool(isinstance(tool, dict) and tool.get("cache_control"))
    return count


def _marked(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``message`` whose last block carries an ephemeral ``cache_control``."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    if blocks and isinstance(blocks[-1], dict) and not blocks[-1].get("cache_control"):
        blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
    return {**message, "content": blocks}
