"""The scripted server's answers in Anthropic's Messages shape and OpenAI's Responses shape
(:mod:`veil.testing.scripted_server` answers OpenAI chat itself), and the prompt sizes of those
requests.

A scripted reply (text, tool calls, optional thinking text) becomes:

- **Anthropic Messages** (``POST /v1/messages``; Anthropic's API reference, "Messages" and
  "Streaming Messages"): a ``message`` object with ``thinking`` (when the request turns thinking
  on: ``thinking.type`` ``enabled`` or ``adaptive``), ``text`` and ``tool_use`` blocks, or the
  event stream ``message_start``, ``content_block_start`` / ``content_block_delta``
  (``thinking_delta``, ``signature_delta``, ``text_delta``, ``input_json_delta``) /
  ``content_block_stop``, ``message_delta``, ``message_stop``.
- **OpenAI Responses** (``POST /v1/responses``; OpenAI's API reference, "Responses" and
  "Streaming events"): a ``response`` object whose ``output`` holds a ``reasoning`` item (when
  the request asks for ``reasoning``), a ``message`` item and ``function_call`` items, or the
  events ``response.created``, ``response.in_progress``, ``response.output_item.added``,
  ``response.content_part.added``, ``response.output_text.delta`` / ``.done``,
  ``response.content_part.done``, ``response.function_call_arguments.delta`` / ``.done``,
  ``response.output_item.done``, ``response.completed``, each with its ``sequence_number``.

Thinking signatures and encrypted reasoning are opaque tokens the server issues
(:class:`Issued`); a request that passes one back changed is caught by
:mod:`veil.testing.provider_checks`, as the real providers refuse it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from veil.core.models.tokens import cl100k_count, content_text


@dataclass
class Issued:
    """The opaque tokens a server handed out, to check that clients pass them back unchanged.

    Attributes:
        signatures: Anthropic thinking signature -> the thinking text it was issued for.
        encrypted: Responses ``encrypted_content`` -> the reasoning item id it was issued for.
    """

    secret: str = "scripted"
    signatures: dict[str, str] = field(default_factory=dict)
    encrypted: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def sign(self, thinking: str, number: int) -> str:
        """A signature for ``thinking`` (request ``number``), recorded in :attr:`signatures`."""
        digest = hashlib.sha256(f"{self.secret}|{number}|{thinking}".encode()).hexdigest()
        signature = "EqSig" + digest[:56]
        with self._lock:
            self.signatures[signature] = thinking
        return signature

    def encrypt(self, item_id: str, summary: str) -> str:
        """An ``encrypted_content`` for reasoning item ``item_id``, recorded in
        :attr:`encrypted`."""
        digest = hashlib.sha256(f"{self.secret}|{item_id}|{summary}".encode()).hexdigest()
        token = "gAAAA" + digest
        with self._lock:
            self.encrypted[token] = item_id
        return token


# -- prompt sizes ---------------------------------------------------------------------------------


def _block_text(block: Any) -> str:
    """The text of one Anthropic content block as it counts toward the prompt."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind == "thinking":
        return str(block.get("thinking") or "")
    if kind in ("tool_use", "server_tool_use"):
        return str(block.get("name") or "") + json.dumps(block.get("input") or {})
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, list):
            return "\n".join(_block_text(b) for b in inner)
        return str(inner or "")
    return ""


def anthropic_prompt_tokens(body: dict[str, Any]) -> int:
    """cl100k_base tokens of an Anthropic Messages request: the system prompt, every message's
    blocks (text, thinking text, tool_use name and input JSON, tool_result text), 3 per message,
    and the tool definitions as JSON. Anthropic does not publish its tokenizer; this is the
    scripted server's measure, the one its ``context_window`` applies to."""
    system = body.get("system")
    total = cl100k_count(
        "\n".join(_block_text(b) for b in system) if isinstance(system, list) else str(system or "")
    )
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        total += 3 + cl100k_count("\n".join(_block_text(b) for b in blocks))
    if body.get("tools"):
        total += cl100k_count(json.dumps(body["tools"]))
    return total


def _item_text(item: Any) -> str:
    """The text of one Responses input item as it counts toward the prompt."""
    if isinstance(item, str):
        return item
    if not isinstance(item, dict):
        return ""
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        return content_text(item.get("content"))
    if kind in ("function_call", "custom_tool_call"):
        return str(item.get("name") or "") + str(item.get("arguments") or item.get("input") or "")
    if kind in ("function_call_output", "custom_tool_call_output"):
        return content_text(item.get("output"))
    if kind == "reasoning":
        return "\n".join(str(s.get("text") or "") for s in item.get("summary") or [])
    return ""


def responses_prompt_tokens(body: dict[str, Any]) -> int:
    """cl100k_base tokens of a Responses request: ``instructions``, every input item (message
    text, function call name and arguments, call output, reasoning summary), 3 per item, and the
    tool definitions as JSON (the scripted server's measure, as for
    :func:`anthropic_prompt_tokens`)."""
    total = cl100k_count(str(body.get("instructions") or ""))
    items = body.get("input")
    for item in [items] if isinstance(items, str) else items or []:
        total += 3 + cl100k_count(_item_text(item))
    if body.get("tools"):
        total += cl100k_count(json.dumps(body["tools"]))
    return total


# -- Anthropic Messages ---------------------------------------------------------------------------


def thinking_on(body: dict[str, Any]) -> bool:
    """Whether an Anthropic request turns extended thinking on (``thinking.type`` ``enabled``
    or ``adaptive``)."""
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def anthropic_message(
    reply: Any, number: int, body: dict[str, Any], issued: Issued, model: str
) -> dict[str, Any]:
    """The Messages API answer (without ``usage``) for a scripted ``reply`` (a
    :class:`veil.testing.scripted_server.Reply`) to request ``number``.

    A thinking block comes first when the request turns thinking on: ``reply.thinking`` or a
    default text, sent empty when the request asks ``thinking.display`` ``omitted`` (the signature
    is issued either way). Tool call ids default to ``toolu_<number>_<index>``."""
    blocks: list[dict[str, Any]] = []
    if thinking_on(body):
        text = reply.thinking if reply.thinking is not None else f"Planning step {number}."
        if (body.get("thinking") or {}).get("display") == "omitted":
            text = ""
        blocks.append(
            {"type": "thinking", "thinking": text, "signature": issued.sign(text, number)}
        )
    content = reply.content_value()
    if content:
        blocks.append({"type": "text", "text": content})
    for index, call in enumerate(reply.tool_calls):
        arguments = call.get("arguments", {})
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{number}_{index}",
                "name": call["name"],
                "input": json.loads(arguments) if isinstance(arguments, str) else arguments,
            }
        )
    return {
        "id": f"msg_scripted_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
    }


def anthropic_completion_tokens(message: dict[str, Any]) -> int:
    """cl100k_base tokens of an answer's blocks (its ``usage.output_tokens``)."""
    return sum(cl100k_count(_block_text(b)) for b in message["content"])


def anthropic_events(message: dict[str, Any], usage: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The streamed form of ``message``: Anthropic's events in order (each a dict with its
    ``type``; the server writes ``event: <type>`` and ``data: <json>``)."""
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    yield {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            yield {"type": "content_block_start", "index": index, "content_block": first}
            if block["thinking"]:
                delta = {"type": "thinking_delta", "thinking": block["thinking"]}
                yield {"type": "content_block_delta", "index": index, "delta": delta}
            delta = {"type": "signature_delta", "signature": block["signature"]}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        elif kind == "text":
            yield {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
            for word in _words(block["text"]):
                delta = {"type": "text_delta", "text": word}
                yield {"type": "content_block_delta", "index": index, "delta": delta}
        else:  # tool_use
            first = {**block, "input": {}}
            yield {"type": "content_block_start", "index": index, "content_block": first}
            text = json.dumps(block["input"])
            for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                delta = {"type": "input_json_delta", "partial_json": part}
                yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    yield {"type": "message_stop"}


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """Anthropic's error body ``{"type": "error", "error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": kind, "message": message}}


# -- OpenAI Responses -----------------------------------------------------------------------------


def responses_output(
    reply: Any, number: int, body: dict[str, Any], issued: Issued
) -> list[dict[str, Any]]:
    """The ``output`` items for a scripted ``reply`` to Responses request ``number``: a
    ``reasoning`` item first when the request sets ``reasoning`` (with ``encrypted_content``
    when ``include`` asks for ``reasoning.encrypted_content``), the ``message`` item when the
    reply has text, and one ``function_call`` item per tool call (``call_id`` defaults to
    ``call_<number>_<index>``)."""
    items: list[dict[str, Any]] = []
    if isinstance(body.get("reasoning"), dict):
        summary = reply.thinking if reply.thinking is not None else f"Planning step {number}."
        item: dict[str, Any] = {
            "type": "reasoning",
            "id": f"rs_scripted_{number}",
            "summary": [{"type": "summary_text", "text": summary}],
        }
        if "reasoning.encrypted_content" in (body.get("include") or []):
            item["encrypted_content"] = issued.encrypt(item["id"], summary)
        items.append(item)
    content = reply.content_value()
    if content:
        items.append(
            {
                "type": "message",
                "id": f"msg_scripted_{number}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": content, "annotations": []}],
            }
        )
    for index, call in enumerate(reply.tool_calls):
        arguments = call.get("arguments", {})
        items.append(
            {
                "type": "function_call",
                "id": f"fc_scripted_{number}_{index}",
                "call_id": call.get("id") or f"call_{number}_{index}",
                "name": call["name"],
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                "status": "completed",
            }
        )
    return items


def responses_completion_tokens(items: list[dict[str, Any]]) -> int:
    """cl100k_base tokens of the output items (``usage.output_tokens``)."""
    return sum(cl100k_count(_item_text(i)) for i in items)


def responses_response(
    number: int, body: dict[str, Any], items: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    """The ``response`` object that holds ``items``."""
    answer: dict[str, Any] = {
        "id": f"resp_scripted_{number}",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": body.get("model") or "scripted",
        "output": items,
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": body.get("tools") or [],
        "store": bool(body.get("store", True)),
        "error": None,
        "incomplete_details": None,
    }
    if usage is not None:
        answer["usage"] = usage
    return answer


def responses_events(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The streamed form of ``response``: OpenAI's Responses events in order, numbered by
    ``sequence_number``."""
    counter = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "sequence_number": next(counter), **fields}

    pending = {**response, "status": "in_progress", "output": []}
    pending.pop("usage", None)
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        kind = item["type"]
        if kind == "message":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            common = {"item_id": item["id"], "output_index": index, "content_index": 0}
            yield event("response.content_part.added", **common, part=part)
            text = item["content"][0]["text"]
            for word in _words(text):
                yield event("response.output_text.delta", **common, delta=word)
            yield event("response.output_text.done", **common, text=text)
            yield event("response.content_part.done", **common, part=item["content"][0])
        elif kind == "function_call":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            common = {"item_id": item["id"], "output_index": index}
            yield event("response.function_call_arguments.delta", **common, delta=item["arguments"])
            yield event(
                "response.function_call_arguments.done", **common, arguments=item["arguments"]
            )
        else:  # reasoning
            yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response)


def responses_error(kind: str, message: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _words(text: str) -> list[str]:
    """``text`` in word-sized deltas (the space before a word kept with it)."""
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]
