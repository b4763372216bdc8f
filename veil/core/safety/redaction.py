"""Secrets never persisted: the :class:`Redactor` replaces credentials with ``[redacted:NAME]``.

What it replaces, in this order:

1. every secret veil itself knows (``veil_known``): the API keys in ``~/.veil/auth.json`` and
   ``.veil/auth.json`` (both files read as they are, so a key the project file overrides is
   still known), keys in model options, the HTTP token, and the values of environment variables
   whose names say they hold a credential (:func:`environment_secrets`);
2. the credential formats of :mod:`veil.core.safety.secret_formats`: private-key blocks, provider and
   code-host keys, JWTs, ``Authorization`` / ``Bearer`` / ``Basic`` values, passwords in URLs,
   and values assigned to secret names (``API_TOKEN=...``, ``"password": "..."``).

Where it runs (one place per path, so nothing escapes): :meth:`veil.core.session.Session.append`
for everything that enters a session (user messages, replies with their tool-call arguments,
tool results), the capture events built from those messages, memory-file writes, facts the model
stores, compaction summaries when they are saved, and every HTTP response body. The setting
``security.redactSecrets`` (default true; ``VEIL_SECURITY__REDACT_SECRETS=false``) turns it
off: text is then stored as it came.

Cost: the rules are gated by their anchors (literal strings, :attr:`Rule.anchors`). With the
``ahocorasick-rs`` package one Aho-Corasick pass over the UTF-8 bytes finds every anchor of every
rule and every known secret; without it each rule's anchors are searched with ``in``, which
gives the same result more slowly (:attr:`Redactor.gate`). Only rules whose anchors occur run
their regular expression; a text with no anchor comes back as the same object.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veil.core.jsonio import MAX_DEPTH, loads
from veil.core.safety.secret_formats import (
    BARE_PLACEHOLDER,
    PLACEHOLDER_OPENING,
    PLACEHOLDER_PATTERN,
    RULES,
    Rule,
    assignment_label,
    password_name,
    placeholder,
    secret_name,
    secret_value,
)

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.settings import Config
    from veil.core.types import ToolResult

try:  # one pass over the text for every anchor; optional (the plain gate is equivalent)
    import ahocorasick_rs as _aho
except ImportError:  # pragma: no cover - platforms without its wheel
    _aho = None

KNOWN = "veil_known"
"""The placeholder NAME of a secret veil itself knows."""
MIN_KNOWN_CHARS = 8
"""Shorter known secrets are not replaced: they would hit ordinary words."""
MIN_SECRET_TEXT = 6
"""Shorter texts hold no match of any rule (the shortest, a one-character password in a URL's
``://:p@``, takes 6), so they are returned without a scan (ids, tags, short fields)."""


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables that hold credentials: the name passes
    :func:`~veil.core.safety.secret_formats.secret_name` (``OPENAI_API_KEY``, ``GITHUB_TOKEN``,
    ``PGPASSWORD``; not ``MAX_TOKENS`` or ``PWD``) and the value
    :func:`~veil.core.safety.secret_formats.secret_value` (no paths, numbers, words or placeholders).

    Args:
        environ: the variables (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    return [
        value
        for name, value in env.items()
        if value
        and secret_name(name)
        and not any(c.isspace() for c in value)
        and secret_value(value, password=password_name(name))
    ]


def _secret_fields(data: Any) -> Iterable[str]:
    """String values under secret-named keys anywhere in a JSON document (``api_key``,
    ``apiKey``, ``token``...)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, str) and isinstance(key, str) and secret_name(key):
                yield value
            else:
                yield from _secret_fields(value)
    elif isinstance(data, list):
        for value in data:
            yield from _secret_fields(value)


def config_secrets(config: Config) -> list[str]:
    """The secrets a project's configuration holds: every secret-named field of the user's
    and the project's ``auth.json`` (each file read on its own, so a project key that shadows
    the user's leaves both known), the merged providers' ``api_key``, secret-named model
    ``options``, the HTTP token and the store URL's password. Unreadable files add nothing (loading the configuration
    reports them)."""
    from veil.core.settings import user_config_dir

    found: list[str] = []
    for path in (user_config_dir() / "auth.json", config.veil_dir / "auth.json"):
        try:
            found.extend(_secret_fields(loads(Path(path).read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue
    for provider in config.auth.providers.values():
        if provider.api_key is not None:
            found.append(provider.api_key.get_secret_value())
    for role in (config.models.main, config.models.compact):
        if role is not None:
            found.extend(_secret_fields(role.options))
    token = config.settings.http.token
    if token is not None:
        found.append(token.get_secret_value())
    store_url = config.settings.store.url
    if store_url is not None:  # its password, should a driver's error message repeat it
        from urllib.parse import urlsplit

        try:
            password = urlsplit(store_url.get_secret_value()).password
        except ValueError:
            password = None
        if password:
            found.append(password)
    return found


class Redactor:
    """Replaces credentials in text with ``[redacted:NAME]`` (see the module docstring).

    Args:
        known: secrets veil knows (replaced wherever they occur, as ``[redacted:veil_known]``);
            those under :data:`MIN_KNOWN_CHARS` characters are ignored.
        enabled: False makes :meth:`text`, :meth:`value`, :meth:`message` and
            :meth:`arguments` return their input (``security.redactSecrets: false``);
            :meth:`known_only` still works.
        rules: the rules, applied in order (default :data:`veil.core.safety.secret_formats.RULES`).
        gate: ``"auto"`` (Aho-Corasick when ``ahocorasick-rs`` is installed), ``"aho"`` or
            ``"plain"`` (``in`` per anchor); the same rules run either way.

    Raises:
        ValueError: ``gate`` is unknown, or ``"aho"`` without the package.

    Redacting is idempotent (a placeholder is never matched again) and deterministic; an
    instance is immutable and may be shared between threads.
    """

    def __init__(
        self,
        known: Iterable[str] = (),
        *,
        enabled: bool = True,
        rules: tuple[Rule, ...] = RULES,
        gate: str = "auto",
    ) -> None:
        if gate not in ("auto", "aho", "plain"):
            raise ValueError(f"gate: expected 'auto', 'aho' or 'plain', got {gate!r}")
        if gate == "aho" and _aho is None:
            raise ValueError("gate 'aho' needs the ahocorasick-rs package")
        self.enabled = enabled
        self.rules = tuple(rules)
        self._positional = [hasattr(rule, "apply_at") for rule in self.rules]
        # longest first, so a secret that contains another is replaced whole
        self.known: tuple[str, ...] = tuple(
            sorted(
                {s for s in known if isinstance(s, str) and len(s) >= MIN_KNOWN_CHARS},
                key=lambda s: (-len(s), s),
            )
        )
        self._gate_name = "aho" if gate == "aho" or (gate == "auto" and _aho is not None) else ""
        self._gate_name = self._gate_name or "plain"
        self._automaton: Any = None
        self._anchor_owner: list[int] = []  # anchor index -> rule index (-1: a known secret)
        self._anchor_shift: list[int] = []  # anchor index -> where its keyword starts in it
        if self._gate_name == "aho":
            anchors: list[str] = []
            for i, rule in enumerate(self.rules):
                for anchor in dict.fromkeys(rule.anchors):
                    anchors.append(anchor)
                    self._anchor_owner.append(i)
                    self._anchor_shift.append(1 if anchor.startswith("-") else 0)
            for secret in self.known:
                anchors.append(secret)
                self._anchor_owner.append(-1)
                self._anchor_shift.append(0)
            self._automaton = _aho.BytesAhoCorasick(
                [a.encode("utf-8", "surrogatepass") for a in anchors],
                implementation=_aho.Implementation.DFA,
            )

    @property
    def gate(self) -> str:
        """``"aho"`` (one Aho-Corasick pass) or ``"plain"`` (``in`` per anchor)."""
        return self._gate_name

    def with_known(self, more: Iterable[str]) -> Redactor:
        """A redactor like this one that also knows ``more`` (the HTTP token of a server)."""
        extra = [s for s in more if s]
        if not extra:
            return self
        return Redactor(
            [*self.known, *extra],
            enabled=self.enabled,
            rules=self.rules,
            gate="aho" if self._gate_name == "aho" else "plain",
        )

    # -- text -----------------------------------------------------------------------------

    def _hits(self, text: str) -> tuple[bool, list[int], dict[int, list[int]]]:
        """Whether a known secret occurs in ``text``, the indexes of the rules whose anchors
        occur, and, for rules that take them (``apply_at``), where their anchors start (only
        from the Aho-Corasick pass over ASCII text, where byte and character offsets agree)."""
        if self._automaton is not None:
            found = self._automaton.find_matches_as_indexes(
                text.encode("utf-8", "surrogatepass"), overlapping=True
            )
            if not found:
                return False, [], {}
            owner, shift = self._anchor_owner, self._anchor_shift
            rules: set[int] = set()
            known = False
            starts: dict[int, list[int]] = {}
            ascii_text = text.isascii()
            for index, start, _end in found:
                rule = owner[index]
                if rule < 0:
                    known = True
                    continue
                rules.add(rule)
                if ascii_text and self._positional[rule]:
                    starts.setdefault(rule, []).append(start + shift[index])
            return known, sorted(rules), starts
        known = any(s in text for s in self.known)
        lowered: str | None = None
        hits = []
        for i, rule in enumerate(self.rules):
            if rule.gate_words:
                if lowered is None:
                    lowered = text.lower()
                if any(w in lowered for w in rule.gate_words):
                    hits.append(i)
            elif any(a in text for a in rule.anchors):
                hits.append(i)
        return known, hits, {}

    def text(self, text: str) -> str:
        """``text`` with every credential replaced (the same object when there is none, or
        when redaction is off). Non-strings are returned as they are.

        A text holding terminal escape sequences (colour output: ``grep --color=always``,
        ``jq -C``, pytest; also their escaped forms ``\\033[``, ``\\u001b[`` in commands
        and JSON) is redacted without them, since a colour code glued to a token
        (``\\033[31mghp_...``) or splitting a name from its value hides it from the rules;
        when that finds a credential, the result is the text without its escape sequences
        (colour carries nothing the model or the store needs), else the text comes back
        whole, colours included."""
        if not self.enabled or not isinstance(text, str) or len(text) < MIN_SECRET_TEXT:
            return text
        if _may_hold_escapes(text) and (plain := strip_ansi(text)) is not text:
            redacted = self._text(plain)
            return text if redacted is plain else redacted
        return self._text(text)

    def _text(self, text: str) -> str:
        known, rules, starts = self._hits(text)
        original = text
        if known:
            text = self.known_only(text)
        for i in rules:
            rule = self.rules[i]
            if i in starts and text is original:  # offsets still valid: nothing moved yet
                text = rule.apply_at(text, starts[i])  # type: ignore[attr-defined]
            else:
                text = rule.apply(text)
        return text

    def known_only(self, text: str) -> str:
        """``text`` with the secrets veil knows replaced (also when redaction is off: error
        messages and HTTP bodies never carry veil's own keys)."""
        for secret in self.known:
            if secret in text:
                text = text.replace(secret, placeholder(KNOWN))
        return text

    def changes(self, text: str) -> bool:
        """Whether :meth:`text` would change ``text`` (it holds a credential)."""
        return self.text(text) != text

    # -- structures -----------------------------------------------------------------------

    def value(self, data: Any) -> Any:
        """``data`` (JSON-like: dicts, lists, strings, numbers) with credentials replaced in
        every string, and every string under a secret-named key (``"apiKey": "..."``) whose
        value looks like a secret replaced whole (``[redacted:assignment:apiKey]``). The same
        object comes back when nothing changed."""
        if not self.enabled:
            return data
        return self._value(data)[0]

    def _value(self, data: Any) -> tuple[Any, bool]:
        if isinstance(data, str):
            out = self.text(data)
            return out, out is not data
        if isinstance(data, dict):
            changed = False
            result: dict[Any, Any] = {}
            for key, item in data.items():
                if (
                    isinstance(item, str)
                    and isinstance(key, str)
                    and secret_name(key)
                    and secret_value(item, password=password_name(key))
                ):
                    result[key], done = placeholder("assignment:" + assignment_label(key)), True
                else:
                    result[key], done = self._value(item)
                changed = changed or done
            return (result, True) if changed else (data, False)
        if isinstance(data, (list, tuple)):
            pairs = [self._value(item) for item in data]
            if any(done for _, done in pairs):
                return type(data)(item for item, _ in pairs), True
            return data, False
        return data, False

    def arguments(self, raw: Any) -> Any:
        """A tool call's ``function.arguments``: a JSON string in which :meth:`text` finds a
        credential is decoded, redacted with :meth:`value` (so a value keeps its JSON escapes
        and a secret-named key counts) and encoded again; otherwise it comes back unchanged. A
        string that is not JSON is redacted as text; a dict as :meth:`value`."""
        if not self.enabled or not isinstance(raw, str):
            return self.value(raw)
        as_text = self.text(raw)
        if as_text is raw:  # nothing in the JSON text: no need to decode it
            return raw
        try:
            decoded = loads(raw, max_depth=MAX_DEPTH)
        except ValueError:
            return as_text
        redacted, changed = self._value(decoded)
        if changed:
            return json.dumps(redacted, ensure_ascii=False)
        return as_text  # found only across the JSON text (its placeholders keep it valid JSON)

    def message(self, message: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI chat message with credentials replaced in its content (a string, or the
        text parts of a list; images are left) and its tool calls' arguments. A new dict when
        something changed, else ``message`` itself."""
        if not self.enabled:
            return message
        out = message
        content = message.get("content")
        if isinstance(content, str):
            red = self.text(content)
            if red is not content:
                out = {**out, "content": red}
        elif isinstance(content, list):
            parts = [
                {**p, "text": self.text(p["text"])}
                if isinstance(p, dict) and isinstance(p.get("text"), str)
                else p
                for p in content
            ]
            if any(a is not b and a != b for a, b in zip(parts, content, strict=True)):
                out = {**out, "content": parts}
        calls = message.get("tool_calls")
        if calls:
            new_calls = []
            for call in calls:
                fn = call.get("function") or {}
                args = fn.get("arguments")
                red = self.arguments(args)
                new_calls.append(
                    call if red is args else {**call, "function": {**fn, "arguments": red}}
                )
            if any(a is not b for a, b in zip(new_calls, calls, strict=True)):
                out = {**out, "tool_calls": new_calls}
        return out

    def tool_result(self, result: ToolResult, content: str | None = None) -> ToolResult:
        """A tool's result as captured: ``content`` (the stored, already redacted text) or its
        own content redacted, and its ``meta`` redacted with :meth:`value`. ``result`` itself
        when nothing changed."""
        if not self.enabled:
            return result
        new_content = self.text(result.content) if content is None else content
        meta = self.value(result.meta)
        if new_content is result.content and meta is result.meta:
            return result
        return replace(result, content=new_content, meta=meta)


ANSI_ESCAPE = re.compile(
    r"(?:\x1b|\\(?:033|x1[bB]|u001[bB]|e))"
    r"(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]{0,2048}(?:\x07|\x1b\\))"
)
"""A terminal escape sequence (ECMA-48): CSI (``ESC [`` parameters, final byte: colours,
``ESC[K``) or OSC (``ESC ]`` ... BEL / ``ESC \\``: hyperlinks, titles), the ESC written as the
character or as ``\\033``, ``\\x1b``, ``\\u001b``, ``\\e`` (printf, JSON)."""


_WRITTEN_ESCAPE = re.compile(r"\\(?:033|x1[bB]|u001[bB]|e)[\[\]]")


def _may_hold_escapes(text: str) -> bool:
    """A cheap test before :data:`ANSI_ESCAPE` runs: an ESC character, or an escape written
    out (JSON-escaped texts hold many backslashes and rarely one of these)."""
    return "\x1b" in text or ("\\" in text and _WRITTEN_ESCAPE.search(text) is not None)


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (:data:`ANSI_ESCAPE`); ``text`` itself when it
    holds none."""
    if not _may_hold_escapes(text):
        return text
    out = ANSI_ESCAPE.sub("", text)
    return text if out == text else out


def placeholders(text: str) -> collections.Counter[str]:
    """How often each ``[redacted:NAME]`` placeholder occurs in ``text``."""
    return collections.Counter(
        m.group(0) for m in PLACEHOLDER_PATTERN.finditer(text) if m.group(0) != BARE_PLACEHOLDER
    )


def has_placeholder(text: str) -> bool:
    """Whether ``text`` holds a redaction placeholder (``[redacted:...]``)."""
    return PLACEHOLDER_OPENING in text and PLACEHOLDER_PATTERN.search(text) is not None


@functools.lru_cache(maxsize=1)
def pattern_redactor() -> Redactor:
    """A shared redactor that knows no secrets: the credential formats alone (error messages,
    text outside any project)."""
    return Redactor()


NOT_A_MODEL_NAME = (
    "this looks like an API key or token, not a model name; keys go in auth.json "
    "(providers.<name>.api_key) or the provider's environment variable"
)
"""Why a credential-shaped model name is refused (:func:`is_credential`); it never quotes the
value, so the refusal can be printed, logged and answered over HTTP."""


def is_credential(value: str, redactor: Redactor | None = None) -> bool:
    """Whether ``value`` is or holds a credential: a format of
    :mod:`veil.core.safety.secret_formats` matches it (whatever ``security.redactSecrets``
    says), or it holds a secret ``redactor`` knows (:meth:`Redactor.known_only`).

    Where a name goes (a model name), a credential is refused rather than redacted: a key pasted
    there would be stored with the session and sent, and logged, with every request.

    Args:
        value: the text to test (a model name, as typed or as a file gives it).
        redactor: the project's redactor, for the secrets it knows; None tests the formats only
            (a file being validated, before its project's secrets are known).
    """
    if pattern_redactor().changes(value):
        return True
    return redactor is not None and redactor.known_only(value) != value


def redactor_for(config: Config) -> Redactor:
    """The redactor of a project: ``security.redactSecrets`` and the secrets its configuration
    and the environment hold (:func:`config_secrets`, :func:`environment_secrets`)."""
    return Redactor(
        [*config_secrets(config), *environment_secrets()],
        enabled=config.settings.security.redact_secrets,
    )


__all__ = [
    "KNOWN",
    "NOT_A_MODEL_NAME",
    "Redactor",
    "config_secrets",
    "environment_secrets",
    "has_placeholder",
    "is_credential",
    "pattern_redactor",
    "placeholders",
    "redactor_for",
    "strip_ansi",
]
