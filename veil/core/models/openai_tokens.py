"""Prompt tokens of OpenAI models, counted with tiktoken (no litellm on the way).

litellm's ``token_counter`` counted OpenAI prompts until issue 30; importing litellm for it took
3 s idle and 10-15 s on this project's loaded machines before the first model call. This module
counts the same way with tiktoken alone (tests/test_tokens.py checks the counts equal
``litellm.token_counter``'s on chat histories with tool calls and veil's tool schemas):

- a text: ``len(encoding.encode_ordinary(text))``, the encoding tiktoken names for the model
  (``o200k_base`` for gpt-4o and later, ``cl100k_base`` for gpt-4 and gpt-3.5);
- a message: 3 tokens, plus every string field (role, content, name, tool_call_id...), plus 1
  for a ``name``; of its tool calls, the ``function.arguments`` texts; content given as parts
  counts its text parts;
- the prompt: the messages, plus 3 that prime the reply, plus the tool schemas rendered as
  OpenAI renders them for the model (``namespace functions { type name = (_: {...}) => any; }``)
  with 9 tokens around them, 4 fewer when a system message exists.

Sources: OpenAI cookbook, "How to count tokens with tiktoken" (3 per message, 1 per name, 3 to
prime the reply); the function rendering is the one OpenAI's models were found to receive
(hmarr/openai-chat-tokens, forestwanglin/openai-java ``TikTokenUtils``), as litellm's
``_format_function_definitions`` writes it. litellm cuts texts into 1,024-character pieces before
counting (``TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS``); this module counts a text whole, which is the
exact figure (the two differ by a token or two where a cut splits a token).

A message this module cannot count as litellm would (content parts other than text: images,
audio, files) makes :func:`message_tokens` return None; the caller asks litellm then.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMER = 3
TOOLS_OVERHEAD = 9
SYSTEM_TOOLS_DISCOUNT = 4


@functools.lru_cache(maxsize=8)
def _encoding(name: str) -> Any:
    from veil.core.models.offline import prepare_offline_env

    prepare_offline_env()  # tiktoken reads its files from litellm's wheel, offline
    import tiktoken

    return tiktoken.get_encoding(name)


@functools.lru_cache(maxsize=256)
def encoding_name(model: str) -> str:
    """tiktoken's encoding for an OpenAI model name (``gpt-4o`` -> ``o200k_base``).

    Raises:
        KeyError: tiktoken knows no encoding for ``model``.
    """
    import tiktoken

    if "gpt-4o" in model:  # every gpt-4o variant, as litellm decides it too
        return "o200k_base"
    return tiktoken.encoding_name_for_model(model)


def text_counter(model: str) -> Callable[[str], int]:
    """A function counting a text's tokens for OpenAI model ``model`` (special-token strings
    count as plain text; lone surrogates as U+FFFD). ``cl100k_base`` goes through
    :func:`veil.core.models.tokens.cl100k_count` (bpe-openai's faster encoder once loaded).

    Raises:
        KeyError: tiktoken knows no encoding for ``model``.
    """
    name = encoding_name(model)
    if name == "cl100k_base":
        from veil.core.models.tokens import cl100k_count

        return cl100k_count
    encoding = _encoding(name)

    def count(text: str) -> int:
        if not text:
            return 0
        try:
            return len(encoding.encode_ordinary(text))
        except UnicodeEncodeError:
            fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            return len(encoding.encode_ordinary(fixed))

    return count


def message_tokens(
    messages: Sequence[Mapping[str, Any]],
    model: str,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> int | None:
    """Prompt tokens of ``messages`` (and ``tools``) for OpenAI model ``model`` (the module
    docstring), or None when a message holds content this module does not count.

    Raises:
        KeyError: tiktoken knows no encoding for ``model``.
    """
    count = text_counter(model)
    total = REPLY_PRIMER
    for message in messages:
        total += TOKENS_PER_MESSAGE
        for key, value in message.items():
            if value is None:
                continue
            if key == "tool_calls" and isinstance(value, list):
                for call in value:
                    function = call.get("function") if isinstance(call, Mapping) else None
                    if isinstance(function, Mapping):
                        total += count(str(function.get("arguments", "")))
            elif key == "function_call" and isinstance(value, Mapping):
                total += count(str(value.get("arguments", "")))
            elif isinstance(value, str):
                total += count(value)
                if key == "name":
                    total += TOKENS_PER_NAME
            elif key == "content" and isinstance(value, list):
                parts = _text_parts(value)
                if parts is None:
                    return None
                total += sum(count(p) for p in parts)
            elif key in ("provider_specific_fields", "search_results"):
                return None  # litellm counts these its own way
    if tools:
        system = any(m.get("role") == "system" for m in messages)
        total += count(format_function_definitions(_functions(tools))) + TOOLS_OVERHEAD
        total -= SYSTEM_TOOLS_DISCOUNT if system else 0
    return total


def _text_parts(parts: list[Any]) -> list[str] | None:
    """The texts of a content list whose parts are all text (``{"type": "text", "text": ...}``
    or plain strings), else None."""
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, Mapping) and part.get("type") == "text":
            out.append(str(part.get("text") or ""))
        else:
            return None
    return out


def _functions(tools: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    """The function definitions of OpenAI tool schemas (``{"type": "function", "function":
    {...}}``), or of bare function definitions."""
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        yield function if isinstance(function, Mapping) else tool


def format_function_definitions(functions: Iterable[Mapping[str, Any]]) -> str:
    """Function definitions as OpenAI renders them into the model's prompt::

    namespace functions {

    // Read a file
    type read = (_: {
    // path of the file
    path: string,
    limit?: number,
    }) => any;

    } // namespace functions
    """
    lines = ["namespace functions {", ""]
    for function in functions:
        lines.extend(_function_lines(function))
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _function_lines(function: Mapping[str, Any]) -> list[str]:
    name = function.get("name")
    if not name:
        return []
    description = function.get("description")
    head = [f"// {description}"] if description else []
    parameters = function.get("parameters") or {}
    if not isinstance(parameters, Mapping):
        parameters = {}
    properties = parameters.get("properties")
    if isinstance(properties, Mapping) and properties:
        return [
            *head,
            f"type {name} = (_: {{",
            _object_lines(parameters, 0),
            "}) => any;",
            "",
        ]
    return [*head, f"type {name} = () => any;", ""]


def _object_lines(parameters: Mapping[str, Any], indent: int) -> str:
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return ""
    required = parameters.get("required")
    required_names = tuple(required) if isinstance(required, list) else ()
    lines = []
    for key, props in properties.items():
        description = props.get("description") if isinstance(props, Mapping) else None
        if description:
            lines.append(f"// {description}")
        optional = "" if required_names and key in required_names else "?"
        lines.append(f"{key}{optional}: {_type_text(props, indent)},")
    return "\n".join(" " * max(0, indent) + line for line in lines)


def _type_text(props: Any, indent: int) -> str:
    if not isinstance(props, Mapping):
        return "any"
    kind = props.get("type")
    enum = props.get("enum")
    if kind == "string":
        if isinstance(enum, list):
            return " | ".join(f'"{item}"' for item in enum)
        return "string"
    if kind == "array":
        return f"{_type_text(props.get('items'), indent)}[]"
    if kind == "object":
        return f"{{\n{_object_lines(props, indent + 2)}\n}}"
    if kind in ("integer", "number"):
        if isinstance(enum, list):
            return " | ".join(f'"{item}"' for item in enum)
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    return "any"
