"""JSON text read from files and peers veil does not control, without ``RecursionError``.

Python's parser recurses once per nesting level, so ``'[' * 100000`` raises ``RecursionError``
rather than :class:`json.JSONDecodeError`; a settings.json, a recording or a request body can
hold such text (a cloned repository may ship one on purpose), and every caller that handles
``JSONDecodeError`` then ended in a traceback. :func:`loads` reports it as a decode error.

Text just under the parser's limit (some 900 levels) still decodes, and then breaks whatever
walks the value recursively (pydantic's serializer: "Maximum serialization depth exceeded");
callers whose documents have a known shape pass ``max_depth`` to refuse such nesting at once.
"""

from __future__ import annotations

import json
from typing import Any

TOO_DEEP = "nested too deeply (more levels of [ and { than the JSON parser allows)"
"""The message of the :class:`json.JSONDecodeError` :func:`loads` raises for deep nesting."""
MAX_DEPTH = 64
"""``max_depth`` for documents of a known shape: settings, agent and auth files, tool-call
arguments, proxy request bodies. The deepest of them in use is a JSON schema (a tool's
parameters, a ``response_format``), a dozen levels; deeper text is refused where it is read
instead of breaking a later step (pydantic stops serializing a few hundred levels down, veil's
secret redaction walks values recursively, Python's parser stops at about 1,000)."""


class JSONTooDeep(json.JSONDecodeError):
    """JSON nested more deeply than the parser or a caller's ``max_depth`` allows. There is no
    one position to name: ``pos`` is 0 and ``str()`` is the message alone."""

    def __init__(self, msg: str, doc: str) -> None:
        super().__init__(msg, doc, 0)
        self.args = (msg,)


def loads(text: str | bytes | bytearray, *, max_depth: int | None = None) -> Any:
    """``json.loads(text)``, with nesting too deep for the parser raised as a decode error.

    Args:
        text: JSON text (bytes are decoded as UTF-8, as :func:`json.loads` does).
        max_depth: when given, the most levels of nested arrays and objects allowed
            (``[]`` is 1, ``{"a": []}`` is 2); deeper is refused like text the parser cannot
            take.

    Raises:
        json.JSONDecodeError: not JSON (a subclass of ValueError); :class:`JSONTooDeep` when
            nested more deeply than the parser's recursion or ``max_depth`` allows (message
            :data:`TOO_DEEP` or ``nested more than N levels deep``).
        UnicodeDecodeError: bytes that are not UTF-8.
    """
    doc = text if isinstance(text, str) else ""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONTooDeep(TOO_DEEP, doc) from None
    if max_depth is not None and depth_exceeds(value, max_depth):
        raise JSONTooDeep(f"nested more than {max_depth} levels deep", doc)
    return value


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` (decoded JSON) nests arrays and objects more than ``limit`` levels
    deep. Walks with a stack, not recursion, so any depth the parser produced is safe."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
