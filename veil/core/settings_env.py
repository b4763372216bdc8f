"""How a ``VEIL_*`` variable's text becomes a list or an object setting.

pydantic-settings reads a variable for a list or object field as JSON, and a value that is not
JSON (``VEIL_PERMISSIONS__ALLOW='bash(make*)'``, ``VEIL_PLUGINS__DISABLE=veil_fsrs``) ended
every command, ``--help`` included, in a ``SettingsError`` traceback. Here:

- a list of plain values (``list[str]``, ``list[int] | None``...) also takes its items
  separated by commas, as ``VEIL_DISABLE_PLUGINS=a,b`` always did (:func:`split_list`); a comma
  inside parentheses stays in its item, so ``bash(make a,b)`` is one permission rule. A value
  that starts with ``[`` is JSON and must parse as such.
- any other complex value that is not JSON (an object, a list of objects) is refused by
  :func:`not_json_error` with a one-line :class:`~veil.core.errors.ConfigError` naming the
  variable and what it must hold.

JSON nested too deeply for Python's parser (``RecursionError``) counts as not JSON.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from veil.core.errors import ConfigError

_LIST_ORIGINS = (list, tuple, set, frozenset)


class EnvValueNotJson(ValueError):
    """A variable's value for a complex field is not JSON (raised inside the settings source,
    turned into a :class:`ConfigError` by :func:`not_json_error` once the variable is known).

    Attributes:
        key: the last field name the variable sets (``allow`` for ``VEIL_PERMISSIONS__ALLOW``).
        value: the variable's text.
        expected: ``"list"`` or ``"object"``: what the field holds.
        reason: the JSON parser's complaint.
    """

    def __init__(self, key: str, value: str, expected: str, reason: str) -> None:
        super().__init__(f"{key}: not JSON: {reason}")
        self.key, self.value, self.expected, self.reason = key, value, expected, reason


def is_scalar_list(annotation: Any) -> bool:
    """Whether ``annotation`` is a list (tuple, set) of plain values, optionally ``| None``:
    ``list[str]``, ``list[int] | None``; not ``list[Model]``, ``list[dict]`` or a dict."""
    args = [a for a in _union_args(annotation) if a is not type(None)]
    if len(args) != 1:
        return False
    origin = typing.get_origin(args[0]) or args[0]
    if origin not in _LIST_ORIGINS:
        return False
    items = typing.get_args(args[0]) or (str,)
    return all(_is_plain(i) for i in items if i is not Ellipsis)


def expected_shape(annotation: Any) -> str:
    """``"list"`` when ``annotation`` is a list-like type (optionally ``| None``), else
    ``"object"``."""
    for arg in _union_args(annotation):
        if (typing.get_origin(arg) or arg) in _LIST_ORIGINS:
            return "list"
    return "object"


def split_list(value: str) -> list[str]:
    """Items of a comma-separated variable, stripped, empty ones dropped; a comma inside
    parentheses belongs to its item (``bash(make a,b), read`` -> ``["bash(make a,b)", "read"]``).

    Args:
        value: the variable's text.

    Returns:
        the items in order (``[]`` for a value of only commas and spaces).
    """
    items, depth, start = [], 0, 0
    for i, char in enumerate(value):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            items.append(value[start:i])
            start = i + 1
    items.append(value[start:])
    return [item.strip() for item in items if item.strip()]


def not_json_error(error: EnvValueNotJson, env_vars: Mapping[str, str | None]) -> ConfigError:
    """The one-line error for a variable whose value is not the JSON its field needs.

    Args:
        error: what the settings source raised.
        env_vars: the variables it read (names lower-cased when matching is case-insensitive),
            searched for the one that holds ``error.value`` and sets ``error.key``.

    Returns:
        a ConfigError like ``environment: VEIL_MODELS__MAIN__OPTIONS: must be a JSON object
        such as '{"temperature": 0.2}' (not JSON: Expecting value ...)``.
    """
    key = error.key.lower()
    names = [
        name.upper()
        for name, value in env_vars.items()
        if value == error.value
        and name.lower().startswith("veil_")
        and (name.lower().endswith("__" + key) or name.lower() == "veil_" + key)
    ]
    variable = names[0] if names else f"the VEIL_* variable setting {error.key!r}"
    if error.expected == "list":
        shape = """a JSON list such as '["a", "b"]' or items separated by commas (a,b)"""
    else:
        shape = """a JSON object such as '{"name": "value"}'"""
    return ConfigError(f"environment: {variable}: must be {shape} (not JSON: {error.reason})")


def _union_args(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _is_plain(annotation: Any) -> bool:
    """A value a comma-separated item can be validated as: not a model, dict or list."""
    origin = typing.get_origin(annotation) or annotation
    if origin is typing.Literal or annotation is Any:
        return True
    if not isinstance(origin, type):
        return False
    return not issubclass(origin, (BaseModel, dict, *_LIST_ORIGINS))
