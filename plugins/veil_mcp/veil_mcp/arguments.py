"""Check a tool call's arguments against the tool's own JSON Schema before its handler runs.

veil's tools check the arguments they read (a bad one raises ``BadRequest`` naming the field),
but an MCP client may send what the model made up: a field no tool has, a number where a string
goes. The schema a client was shown (``tools/list``) is the contract, so every call is checked
against it first and a violation comes back naming the field, as ``<field>: <problem>`` (the
form the tools' own errors take). JSON Schema validation is :mod:`jsonschema`'s (Draft 2020-12,
the dialect MCP specifies for ``inputSchema`` when none is declared).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class ArgumentChecker:
    """Validates arguments against one tool's ``parameters`` schema.

    Args:
        schema: the tool's JSON Schema (an object schema, as :class:`veil.core.types.Tool`
            holds it).

    Raises:
        jsonschema.exceptions.SchemaError: the schema itself is invalid (a plugin's bug).
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        Draft202012Validator.check_schema(schema)
        self._validator = Draft202012Validator(schema)
        self._schema = schema

    def problem(self, arguments: Mapping[str, Any]) -> str | None:
        """The first violation as ``"<field>: <problem>"``, or None when the arguments fit.

        Violations are reported in a stable order (by field path, then by keyword), so the
        same bad call always gets the same message.
        """
        errors = sorted(
            self._validator.iter_errors(dict(arguments)),
            key=lambda e: ([str(p) for p in e.absolute_path], str(e.validator)),
        )
        return _describe(errors[0], self._schema) if errors else None


def _field(error: ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out or "arguments"


def _describe(error: ValidationError, schema: Mapping[str, Any]) -> str:
    """``<field>: <problem>`` for one violation, worded for a person or a model to act on."""
    keyword = str(error.validator)
    value = error.instance
    spec = error.validator_value
    field = _field(error)
    if keyword == "required" and isinstance(value, Mapping):
        missing = [name for name in spec if name not in value]
        where = f"{field}." if field != "arguments" else ""
        return f"{where}{missing[0]}: required field is missing"
    if keyword == "additionalProperties" and isinstance(value, Mapping):
        known = sorted(error.schema.get("properties", {}))
        extra = sorted(name for name in value if name not in known)
        where = f"{field}." if field != "arguments" else ""
        allowed = ", ".join(known) if known else "none"
        return f"{where}{extra[0]}: unknown field (accepted: {allowed})"
    if keyword == "type":
        wanted = [spec] if isinstance(spec, str) else list(spec)
        names = " or ".join(_TYPE_NAMES.get(t, t) for t in wanted)
        return f"{field}: expected {names}, got {_json_type(value)}"
    if keyword == "enum":
        return f"{field}: expected one of {', '.join(repr(v) for v in spec)}, got {value!r}"
    bounds = {
        "minimum": ">=",
        "maximum": "<=",
        "exclusiveMinimum": ">",
        "exclusiveMaximum": "<",
    }
    if keyword in bounds:
        return f"{field}: must be {bounds[keyword]} {spec}, got {value!r}"
    return f"{field}: {error.message}"
