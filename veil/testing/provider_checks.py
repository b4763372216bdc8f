"""What a real provider checks before it answers, for the request bodies a test recorded: OpenAI
chat completions, Anthropic Messages and OpenAI Responses. Each function returns the problems
found (one line each, naming the field, worded after the provider's own error), ``[]`` for a
request the provider would accept.

The rules are the ones each API documents or answers with a 400 (quoted where the wording is
the provider's):

- **OpenAI chat** (API reference, "Chat Completions"): an assistant message with ``tool_calls``
  "must be followed by tool messages responding to each 'tool_call_id'"; a ``tool`` message
  "must be a response to a preceding message with 'tool_calls'"; tool names match
  ``^[a-zA-Z0-9_-]{1,64}$``; ``max_tokens`` / ``max_completion_tokens`` are positive integers.
- **Anthropic Messages** (API reference, "Messages"; "Extended thinking"; "Prompt caching"):
  ``tool_use`` ids "were found without ``tool_result`` blocks immediately after"; each
  ``tool_result`` needs "a corresponding ``tool_use`` block in the previous message"; tool_use
  ids are unique; with thinking on, "a final ``assistant`` message must start with a thinking
  block" when it continues a tool loop, and a thinking block's ``signature`` must be the one
  issued for its text ("Invalid ``signature`` in ``thinking`` block"); ``budget_tokens`` is at
  least 1,024 and below ``max_tokens``; "A maximum of 4 blocks with cache_control may be
  provided"; roles are ``user`` and ``assistant`` (``system`` turns only under the
  ``per-turn-control`` beta that Claude Code sends).
- **OpenAI Responses** (API reference, "Responses"; "Reasoning"): "No tool output found for
  function call <id>"; "No tool call found for function call output with call_id <id>"; a
  reasoning item "was provided without its required following item"; with ``store: false``
  "Items are not persisted", so a reasoning item needs its ``encrypted_content`` and
  ``item_reference`` is refused; encrypted content must be what was issued.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""OpenAI's pattern for a function name."""

MAX_CACHE_BREAKPOINTS = 4
"""Anthropic's limit on blocks with ``cache_control`` in one request."""

MIN_THINKING_BUDGET = 1024
"""Anthropic's smallest ``thinking.budget_tokens``."""


def _positive_int(body: Mapping[str, Any], field: str) -> list[str]:
    value = body.get(field)
    if value is None:
        return []
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return [f"{field}: must be a positive integer, got {value!r}"]
    return []


# -- OpenAI chat ----------------------------------------------------------------------------------


def chat_request_problems(body: Any) -> list[str]:
    """Problems OpenAI's chat completions API would refuse ``body`` for (see the module
    docstring)."""
    if not isinstance(body, dict):
        return ["body: must be a JSON object"]
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: must be a non-empty list"]
    problems = _positive_int(body, "max_tokens") + _positive_int(body, "max_completion_tokens")
    for i, tool in enumerate(body.get("tools") or []):
        name = (tool.get("function") or {}).get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            problems.append(
                f"tools[{i}].function.name: {name!r} does not match {TOOL_NAME.pattern}"
            )
    waiting: list[str] = []  # ids of the last assistant message's calls not answered yet
    answerable: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            problems.append(f"messages[{i}].role: {role!r} is not a valid role")
            continue
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in answerable:
                problems.append(
                    f"messages[{i}]: a message with role 'tool' must be a response to a "
                    f"preceding message with 'tool_calls' (tool_call_id {call_id!r})"
                )
            else:
                answerable.discard(call_id)
                waiting = [w for w in waiting if w != call_id]
            continue
        if waiting:
            problems.append(
                f"messages[{i}]: an assistant message with 'tool_calls' must be followed by "
                f"tool messages responding to each 'tool_call_id'; not answered: "
                f"{', '.join(waiting)}"
            )
        waiting, answerable = [], set()
        if role == "assistant":
            ids = []
            for j, call in enumerate(message.get("tool_calls") or []):
                call_id = call.get("id") if isinstance(call, dict) else None
                if not isinstance(call_id, str) or not call_id:
                    problems.append(f"messages[{i}].tool_calls[{j}].id: missing")
                    continue
                if call_id in ids:
                    problems.append(f"messages[{i}].tool_calls[{j}].id: {call_id} repeated")
                ids.append(call_id)
            waiting, answerable = list(ids), set(ids)
    if waiting:
        problems.append(
            "messages: the last assistant message's 'tool_calls' have no tool messages: "
            + ", ".join(waiting)
        )
    return problems


# -- Anthropic Messages ---------------------------------------------------------------------------


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def cache_breakpoints(body: Mapping[str, Any]) -> int:
    """Blocks of an Anthropic request that carry ``cache_control`` (system blocks, message
    blocks, tool definitions)."""
    count = 0
    system = body.get("system")
    if isinstance(system, list):
        count += sum(1 for b in system if isinstance(b, dict) and b.get("cache_control"))
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            count += sum(1 for b in _blocks(message) if b.get("cache_control"))
            count += bool(message.get("cache_control"))
    for tool in body.get("tools") or []:
        count += bool(isinstance(tool, dict) and tool.get("cache_control"))
    return count


def anthropic_request_problems(
    body: Any, beta: str = "", signatures: Mapping[str, str] | None = None
) -> list[str]:
    """Problems Anthropic's Messages API would refuse ``body`` for (see the module docstring).

    Args:
        body: the request body.
        beta: the ``anthropic-beta`` header ('' for none).
        signatures: thinking signature -> the thinking text it was issued for (the server's
            :class:`veil.testing.scripted_shapes.Issued`); None skips the signature check.
    """
    if not isinstance(body, dict):
        return ["body: must be a JSON object"]
    problems: list[str] = []
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        problems.append(f"max_tokens: required, a positive integer, got {body.get('max_tokens')!r}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: must be a non-empty list"]
    thinking = body.get("thinking") if isinstance(body.get("thinking"), dict) else {}
    thinking_enabled = thinking.get("type") in ("enabled", "adaptive")
    if thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            problems.append(f"thinking.budget_tokens: must be >= {MIN_THINKING_BUDGET}")
        elif isinstance(body.get("max_tokens"), int) and budget >= body["max_tokens"]:
            problems.append(
                f"max_tokens: must be greater than thinking.budget_tokens ({budget}), got "
                f"{body['max_tokens']}"
            )
    breakpoints = cache_breakpoints(body)
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        problems.append(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {breakpoints}."
        )
    system_turns = "per-turn-control" in beta
    seen_ids: set[str] = set()
    previous: dict[str, Any] | None = None  # the previous user/assistant message
    first = True
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "system" and system_turns:
            continue
        if role not in ("user", "assistant"):
            problems.append(f"messages.{i}.role: {role!r} is not one of user, assistant")
            continue
        if first and role != "user":
            problems.append(f"messages.{i}: the first message must use the user role")
        first = False
        blocks = _blocks(message)
        uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        before = previous or {}
        before_uses = [b.get("id") for b in _blocks(before) if b.get("type") == "tool_use"]
        if before.get("role") == "assistant" and before_uses:
            missing = [u for u in before_uses if u not in results]
            if role != "user" or missing:
                problems.append(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(str(m) for m in missing or before_uses)}"
                )
        stray = [r for r in results if r not in before_uses]
        if stray:
            problems.append(
                f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(str(s) for s in stray)}. Each `tool_result` block must have a "
                f"corresponding `tool_use` block in the previous message."
            )
        for use in uses:
            if use in seen_ids:
                problems.append(f"messages.{i}.content: `tool_use` ids must be unique: {use}")
            seen_ids.add(use)
        for j, block in enumerate(blocks):
            if block.get("type") == "thinking" and signatures is not None:
                issued = signatures.get(str(block.get("signature")))
                if issued is None or issued != block.get("thinking"):
                    problems.append(
                        f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                    )
        previous = message
    last = _last_tool_loop_assistant(messages, system_turns)
    if thinking_enabled and last is not None:
        index, message = last
        kinds = [b.get("type") for b in _blocks(message)]
        if not kinds or kinds[0] not in ("thinking", "redacted_thinking"):
            problems.append(
                f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{kinds[0] if kinds else None}`. When `thinking` is enabled, a final "
                f"`assistant` message must start with a thinking block"
            )
    return problems


def _last_tool_loop_assistant(
    messages: list[Any], system_turns: bool
) -> tuple[int, dict[str, Any]] | None:
    """The last assistant message when the request continues its tool loop (the messages after
    it are the user's tool results, no new request), else None."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, dict):
            return None
        role = message.get("role")
        if role == "system" and system_turns:
            continue
        if role == "assistant":
            has_use = any(b.get("type") == "tool_use" for b in _blocks(message))
            return (index, message) if has_use else None
        if role != "user":
            return None
        # text beside the results (a reminder, a note) still continues the loop; a user
        # message with no result at all starts a new request
        if not any(b.get("type") == "tool_result" for b in _blocks(message)):
            return None
    return None


# -- OpenAI Responses -----------------------------------------------------------------------------

_CALLS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
_FOLLOWERS = {"message", "function_call", "custom_tool_call", "web_search_call", "local_shell_call"}


def responses_request_problems(body: Any, encrypted: Mapping[str, str] | None = None) -> list[str]:
    """Problems OpenAI's Responses API would refuse ``body`` for (see the module docstring).

    Args:
        body: the request body.
        encrypted: ``encrypted_content`` values the server issued (the server's
            :class:`veil.testing.scripted_shapes.Issued`); None skips that check.
    """
    if not isinstance(body, dict):
        return ["body: must be a JSON object"]
    problems = _positive_int(body, "max_output_tokens")
    for i, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, dict) and tool.get("type") == "function":
            name = tool.get("name")
            if not isinstance(name, str) or not TOOL_NAME.match(name):
                problems.append(f"tools[{i}].name: {name!r} does not match {TOOL_NAME.pattern}")
    items = body.get("input")
    if isinstance(items, str):
        return problems
    if not isinstance(items, list) or not items:
        return [*problems, "input: must be a string or a non-empty list of items"]
    store = body.get("store", True) is not False
    calls: dict[str, str] = {}  # call_id -> the output type it needs
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"input[{i}]: must be an object")
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind in _CALLS:
            calls[str(item.get("call_id"))] = _CALLS[kind]
        elif kind in _CALLS.values():
            call_id = str(item.get("call_id"))
            if calls.get(call_id) != kind:
                problems.append(
                    f"input[{i}]: No tool call found for function call output with call_id "
                    f"{call_id}."
                )
            answered.add(call_id)
        elif kind == "reasoning":
            following = items[i + 1] if i + 1 < len(items) else None
            follower = (following.get("type") or "message") if isinstance(following, dict) else None
            role = following.get("role") if isinstance(following, dict) else None
            if follower not in _FOLLOWERS or (follower == "message" and role != "assistant"):
                problems.append(
                    f"input[{i}]: Item '{item.get('id')}' of type 'reasoning' was provided "
                    f"without its required following item."
                )
            content = item.get("encrypted_content")
            if not store and not content:
                problems.append(
                    f"input[{i}]: Item with id '{item.get('id')}' not found. Items are not "
                    f"persisted when `store` is set to false."
                )
            if content and encrypted is not None and content not in encrypted:
                problems.append(f"input[{i}].encrypted_content: could not be verified")
        elif kind == "item_reference" and not store:
            problems.append(
                f"input[{i}]: Item with id '{item.get('id')}' not found. Items are not persisted "
                f"when `store` is set to false."
            )
    for call_id in calls:
        if call_id not in answered:
            problems.append(f"input: No tool output found for function call {call_id}.")
    return problems


# -- requests broken on purpose -------------------------------------------------------------------

UNPAIRED_CALL = "a tool call without its result"
UNSIGNED_THINKING = "a thinking block without its signature"
BARE_REASONING = "a reasoning item without its encrypted content"
ROOM_OVER_WINDOW = "completion room over the window"
"""The names :func:`broken_copies` gives its copies."""

_LIMIT_FIELDS = {
    "chat": ("max_completion_tokens", "max_tokens"),
    "anthropic": ("max_tokens",),
    "responses": ("max_output_tokens",),
}


def broken_copies(api: str, body: Mapping[str, Any], window: int) -> dict[str, dict[str, Any]]:
    """Copies of an accepted request ``body`` of ``api`` (``chat``, ``anthropic`` or
    ``responses``), each broken one way a provider refuses, by name; a test checks that its
    validator finds each (a validator that cannot fail proves nothing):

    - :data:`UNPAIRED_CALL`: the newest tool result taken out (chat: the last ``tool`` message;
      Anthropic: the last ``tool_result`` block, a text block in its place so the turn stays;
      Responses: the last ``function_call_output`` item);
    - :data:`UNSIGNED_THINKING` (Anthropic): the ``signature`` of the newest ``thinking`` block
      dropped;
    - :data:`BARE_REASONING` (Responses, ``store: false``): the ``encrypted_content`` of the
      newest ``reasoning`` item dropped;
    - :data:`ROOM_OVER_WINDOW`: the completion room the request asks (the field it uses, else
      ``max_tokens`` / ``max_output_tokens``) set to ``window`` tokens, so prompt and room
      exceed the window of ``window`` tokens.

    A copy is left out when the request holds nothing to break that way (no tool result, no
    thinking block).

    Raises:
        ValueError: ``api`` is none of the three.
    """
    import copy

    if api not in _LIMIT_FIELDS:
        raise ValueError(f"api: {api!r} is not one of chat, anthropic, responses")
    out: dict[str, dict[str, Any]] = {}
    unpaired = copy.deepcopy(dict(body))
    if _drop_newest_result(api, unpaired):
        out[UNPAIRED_CALL] = unpaired
    if api == "anthropic":
        unsigned = copy.deepcopy(dict(body))
        thinking = [
            b
            for m in unsigned.get("messages") or []
            if isinstance(m, dict)
            for b in _blocks(m)
            if b.get("type") == "thinking" and "signature" in b
        ]
        if thinking:
            del thinking[-1]["signature"]
            out[UNSIGNED_THINKING] = unsigned
    if api == "responses" and body.get("store", True) is False:
        bare = copy.deepcopy(dict(body))
        reasoning = [
            i
            for i in bare.get("input") or []
            if isinstance(i, dict) and i.get("type") == "reasoning" and i.get("encrypted_content")
        ]
        if reasoning:
            del reasoning[-1]["encrypted_content"]
            out[BARE_REASONING] = bare
    roomy = copy.deepcopy(dict(body))
    fields = _LIMIT_FIELDS[api]
    field = next((f for f in fields if f in roomy), fields[-1])
    roomy[field] = window
    out[ROOM_OVER_WINDOW] = roomy
    return out


def _drop_newest_result(api: str, body: dict[str, Any]) -> bool:
    """Take the newest tool result out of ``body`` in place; False when it holds none."""
    if api == "responses":
        items = body.get("input")
        if not isinstance(items, list):
            return False
        for index in range(len(items) - 1, -1, -1):
            item = items[index]
            if isinstance(item, dict) and str(item.get("type", "")).endswith("call_output"):
                del items[index]
                return True
        return False
    messages = body.get("messages") or []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, dict):
            continue
        if api == "chat" and message.get("role") == "tool":
            del messages[index]
            return True
        content = message.get("content")
        if api == "anthropic" and isinstance(content, list):
            for k in range(len(content) - 1, -1, -1):
                block = content[k]
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    content[k] = {"type": "text", "text": "(the result was lost)"}
                    return True
    return False
