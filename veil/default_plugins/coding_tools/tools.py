"""The built-in coding tools: ``read``, ``write``, ``edit``, ``bash``, ``grep``, ``ls``.

Every handler has the signature ``handler(ctx: ToolContext, args: dict) -> ToolResult`` and never
raises on ordinary failures: bad arguments become ``ToolResult(is_error=True,
content="<tool>: <field>: <problem>")`` and file-system problems become an error result naming the
path. ``KeyboardInterrupt`` is the one exception that passes through (after ``bash`` has killed its
process group).

Paths are resolved against ``ctx.session.cwd`` (the project root) when relative, and shown
relative to it when they lie inside it (``src/app.py``), absolute otherwise. Limits come from
``ctx.session.config.settings.loop`` (:class:`veil.core.settings.LoopSettings`): ``bash_timeout``
(seconds), ``tool_output_chars`` (characters of one result) and ``read_lines`` (lines ``read``
returns when no ``limit`` is given).

``ToolResult.meta`` always holds ``"truncated"`` (bool); file tools add ``"path"`` (as shown to the
model; the capture hook uses it as the item's target); ``bash`` adds ``"exit_code"``,
``"timed_out"`` and ``"command"``.

Deny rules (``permissions.deny``, :mod:`veil.core.safety.permissions`): the loop refuses a call
whose own path a rule covers before the tool runs, and ``read``, ``edit``, ``grep`` and ``ls``
refuse it themselves too (a handler may be called without the loop). A ``grep`` or ``ls`` of a
folder leaves out every file and folder a ``read(...)`` rule, or one of its own, covers, and
says how many it left out and which rules did (``meta["denied"]``), never what they hold: the
search skips them before counting matches, so neither the lines nor the match limit depend on
their contents. ``bash`` is not filtered (a command may read any file).
"""

from __future__ import annotations

import base64
import fnmatch
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veil import (
    PathDenial,
    Tool,
    ToolContext,
    ToolEffect,
    ToolResult,
    atomic_write_bytes,
    kill_group,
    path_denial,
    signal_group,
    start_group,
)
from veil import process_finished as finished

NOISE_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", ".veil"})
"""Folders ``grep`` and ``ls`` never enter: version control, environments, caches, veil's own."""

MAX_LINE_CHARS = 2000
"""``read`` cuts a longer line at this many characters (as Claude Code's Read tool does)."""

BINARY_SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary (git's and ripgrep's heuristic)."""

GREP_DEFAULT_MAX_RESULTS = 200
GREP_LINE_CHARS = 500
"""``grep`` shows at most this many characters of a matching line (minified files...)."""

LS_DEFAULT_DEPTH = 1
"""``ls`` lists only the folder's own entries unless asked for more levels (like plain ``ls``)."""
LS_MAX_DEPTH = 10
LS_MAX_ENTRIES = 500
LS_COUNT_LIMIT = 100_000
"""``ls`` stops counting entries past this many (the note then says "more than")."""

DRAIN_QUIET_SECONDS = 0.2
"""Once a command has exited, read its remaining output until the pipe is quiet this long..."""
DRAIN_MAX_SECONDS = 1.0
"""...or for this long at most (a background job may keep writing)."""

_NOTE_RESERVE_CHARS = 200  # room kept for a truncation note inside tool_output_chars
_UTF8_CONTINUATION = bytes(range(0x80, 0xC0))


# -- failures ----------------------------------------------------------------------------------


class _ArgumentError(Exception):
    """A tool argument is missing or wrong: reported as ``<tool>: <field>: <problem>``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class _ToolFailureError(Exception):
    """An ordinary failure (missing file, not found...): reported as ``<tool>: <message>``."""

    def __init__(self, message: str, meta: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.meta = meta or {}


# -- arguments ---------------------------------------------------------------------------------

_JSON_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
}


def _schema(properties: dict[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    """An OpenAI function ``parameters`` object that accepts no other field."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _type_name(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}
    return "null" if value is None else names.get(type(value), "object")


def _coerce(field: str, spec: dict[str, Any], value: Any) -> Any:
    """Check one argument against its (simple) schema; return it normalised.

    Raises:
        _ArgumentError: wrong type or out of range.
    """
    kind = spec["type"]
    got = _type_name(value)
    if (kind == "string" and isinstance(value, str)) or (
        kind == "boolean" and isinstance(value, bool)
    ):
        pass
    elif kind == "integer" and not isinstance(value, bool) and isinstance(value, (int, float)):
        if isinstance(value, float) and not value.is_integer():
            raise _ArgumentError(field, f"expected an integer, got {value!r}")
        value = int(value)
    elif kind == "number" and not isinstance(value, bool) and isinstance(value, (int, float)):
        value = float(value)
    else:
        raise _ArgumentError(field, f"expected {_JSON_TYPES[kind]}, got {got}")
    if "minimum" in spec and value < spec["minimum"]:
        raise _ArgumentError(field, f"must be >= {spec['minimum']}, got {value}")
    if "exclusiveMinimum" in spec and value <= spec["exclusiveMinimum"]:
        raise _ArgumentError(field, f"must be > {spec['exclusiveMinimum']}, got {value}")
    if "maximum" in spec and value > spec["maximum"]:
        raise _ArgumentError(field, f"must be <= {spec['maximum']}, got {value}")
    return value


def _parse_args(schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """Validate ``args`` against a tool's schema; absent or null optional fields are left out.

    Raises:
        _ArgumentError: naming the first wrong field (``arguments`` when ``args`` is not an object).
    """
    if not isinstance(args, dict):
        raise _ArgumentError("arguments", f"expected a JSON object, got {_type_name(args)}")
    properties: dict[str, dict[str, Any]] = schema["properties"]
    for name in args:
        if name not in properties:
            raise _ArgumentError(name, f"unknown field (expected: {', '.join(properties)})")
    parsed: dict[str, Any] = {}
    for name, spec in properties.items():
        value = args.get(name)
        if value is None:
            if name in schema["required"]:
                raise _ArgumentError(name, "missing (required)")
            continue
        parsed[name] = _coerce(name, spec, value)
    return parsed


# -- paths and limits --------------------------------------------------------------------------


def _resolve(ctx: ToolContext, raw: str) -> Path:
    """``raw`` as an absolute path with ``~`` expanded, relative to the project root, and its
    ``..`` and symbolic links resolved by the file system: the very path the permission check
    judged (:func:`veil.core.safety.permissions.display_path` resolves the same way).

    Resolving ``..`` as text instead (``os.path.normpath``) let a path disagree with its check:
    with a link ``deep -> d0/d1/d2``, ``deep/../../../x`` is ``d0/x`` to the file system, inside
    the project, but ``../../x`` as text, outside it (session 13's review: a write landed in
    the user's home folder, and through a second link in a ``.git/config``, unasked).

    Raises:
        _ArgumentError: a NUL character, an empty path, or a path that cannot be resolved (a
            loop of links).
    """
    if "\0" in raw:
        raise _ArgumentError("path", "contains a NUL character")
    if not raw.strip():
        raise _ArgumentError("path", "is empty")
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute():
        path = Path(ctx.session.cwd) / path
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of links (Python < 3.13)
        raise _ArgumentError("path", f"cannot be resolved ({exc})") from None


def _display(ctx: ToolContext, path: Path) -> str:
    """``path`` relative to the project root when inside it (``.`` for the root), else absolute;
    the root resolved as paths are (:func:`_resolve`)."""
    root = Path(ctx.session.cwd).resolve()
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return path.as_posix()


def _loop_settings(ctx: ToolContext) -> Any:
    """The session's :class:`~veil.core.settings.LoopSettings`."""
    return ctx.session.config.settings.loop


def _is_binary(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) holds a NUL byte."""
    return b"\0" in head[:BINARY_SNIFF_BYTES]


def _line_count(text: str) -> int:
    """Lines in ``text``: newlines, plus one for a last line without a newline."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


# -- deny rules --------------------------------------------------------------------------------


class _DenyFilter:
    """Which paths under ``start`` (a tool's path argument, resolved by :func:`_resolve`) the
    deny rules keep out.

    Paths are judged resolved, as the loop judges a call's own path
    (:func:`~veil.core.safety.permissions.display_path`): a path below ``start`` is already its
    real location, since neither walk follows a symbolic link below ``start`` (a link met there
    is resolved on its own). String work only, but for links: a search asks this of every file.
    """

    def __init__(self, denial: PathDenial, start: Path) -> None:
        self.denial = denial
        self.start = os.fspath(start)
        self.rules: dict[str, None] = {}  # the rules that left something out, in order met

    def rule_for(
        self, path: Path | str, is_dir: bool, *, is_link: bool | None = None
    ) -> str | None:
        """The deny rule covering ``path`` (``start`` or a path under it), or None.

        ``is_link``: whether ``path`` is a symbolic link, when the caller knows (None: look).
        """
        text = os.fspath(path)
        if is_link is None:
            is_link = os.path.islink(text)
        if is_link or not (text == self.start or text.startswith(self.start + "/")):
            text = os.fspath(_real(Path(text)))
        rule = self.denial.rule_for(text, is_dir=is_dir)
        if rule is not None:
            self.rules[rule] = None
        return rule

    def note(self, count: int, what: str, whats: str) -> str:
        """``[2 files left out: permissions.deny covers them ('read(.env*)')]`` (``what`` /
        ``whats``: the noun, singular and plural)."""
        noun = what if count == 1 else whats
        rules = ", ".join(repr(r) for r in self.rules)
        them = "it" if count == 1 else "them"
        return f"[{count} {noun} left out: permissions.deny covers {them} ({rules})]"


def _real(path: Path) -> Path:
    """``path`` with its symbolic links resolved (itself when they loop)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def _deny_filter(ctx: ToolContext, tool: str, start: Path) -> _DenyFilter | None:
    """The deny rules that apply to ``tool``'s paths under ``start``; None when there are none."""
    denial = path_denial(ctx.session.config.settings.permissions, Path(ctx.session.cwd), tool)
    return _DenyFilter(denial, start) if denial is not None else None


def _refuse_if_denied(ctx: ToolContext, tool: str, path: Path, shown: str, meta: dict) -> None:
    """Refuse a call whose own path a deny rule covers, as the loop would have.

    Raises:
        _ToolFailureError: naming the rule.
    """
    deny = _deny_filter(ctx, tool, path)
    if deny is not None and (rule := deny.rule_for(path, path.is_dir())) is not None:
        raise _ToolFailureError(
            f"{shown}: the deny rule {rule!r} (permissions.deny) covers it; not shown", meta
        )


# -- output caps -------------------------------------------------------------------------------


def _join_head_tail(head: str, tail: str, total: int, limit: int) -> tuple[str, int]:
    """Keep the start of ``head`` and the end of ``tail`` in ``limit`` characters with a marker.

    ``head`` and ``tail`` are the known start and end of a text of ``total`` characters (they are
    the same string when the whole text is known). Returns (text, characters cut).
    """
    marker_room = len(f"\n[... {total} characters cut ...]\n")
    room = max(limit - marker_room, 0)
    keep_head = room // 2
    keep_tail = room - keep_head
    cut = total - keep_head - keep_tail
    marker = f"\n[... {cut} characters cut ...]\n"
    return head[:keep_head] + marker + (tail[-keep_tail:] if keep_tail else ""), cut


def cap_middle(text: str, limit: int) -> tuple[str, int]:
    """Shorten ``text`` to at most ``limit`` characters, keeping its head and tail.

    The middle is replaced by ``[... N characters cut ...]`` on a line of its own (N counts the
    characters removed). Returns ``(text, N)``; N is 0 when the text already fits.
    """
    if len(text) <= limit:
        return text, 0
    return _join_head_tail(text, text, len(text), limit)


def _join_lines_capped(lines: list[str], budget: int) -> tuple[str, int]:
    """Join whole ``lines`` while they fit in ``budget`` characters; returns (text, lines kept)."""
    used = 0
    kept = 0
    for line in lines:
        cost = len(line) + (1 if kept else 0)
        if kept and used + cost > budget:
            break
        used += cost
        kept += 1
    return "\n".join(lines[:kept]), kept


class _OutputBuffer:
    """Bounded store of a command's output: its first and last bytes, and a count of the rest.

    Keeps at most ``4 * max_chars`` bytes at each end (a UTF-8 character is at most 4 bytes, so
    each end holds at least ``max_chars`` characters) whatever the command prints.
    """

    def __init__(self, max_chars: int) -> None:
        self.keep = 4 * max_chars
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped_bytes = 0
        self.dropped_chars = 0

    def feed(self, chunk: bytes) -> None:
        """Add bytes read from the command."""
        if len(self.head) < self.keep:
            take = self.keep - len(self.head)
            self.head += chunk[:take]
            chunk = chunk[take:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self.keep
        if excess > 0:
            gone = bytes(self.tail[:excess])
            del self.tail[:excess]
            self.dropped_bytes += excess
            # characters = bytes that do not continue a UTF-8 sequence
            self.dropped_chars += len(gone.translate(None, _UTF8_CONTINUATION))

    def render(self, limit: int) -> tuple[str, int]:
        """The output decoded as UTF-8 (bad bytes replaced), capped by :func:`cap_middle`."""
        if not self.dropped_bytes:
            return cap_middle(bytes(self.head + self.tail).decode("utf-8", "replace"), limit)
        head = self.head.decode("utf-8", "replace")
        # Continuation bytes at the start of the tail end a character already counted as dropped.
        start = 0
        while start < min(len(self.tail), 3) and 0x80 <= self.tail[start] < 0xC0:
            start += 1
        tail = self.tail[start:].decode("utf-8", "replace")
        return _join_head_tail(head, tail, len(head) + self.dropped_chars + len(tail), limit)


# -- read --------------------------------------------------------------------------------------


def _decode_line(raw: bytes) -> str:
    """One line read in binary mode, without its line ending, decoded (bad bytes replaced)."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", "replace")


def _cut_line(text: str, limit: int) -> tuple[str, bool]:
    """Cut a line longer than ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]} [... line cut at {limit} of {len(text)} characters]", True


def _count_remaining_lines(handle: Any) -> int:
    """Lines left in a binary file handle, counted in 1 MiB chunks (no decoding)."""
    count = 0
    last = b"\n"
    while chunk := handle.read(1 << 20):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (0 if last == b"\n" else 1)


def _open_text_file(ctx: ToolContext, tool: str, raw_path: str) -> tuple[Path, str, dict]:
    """Resolve a path for reading; fail clearly when it is missing or a folder."""
    path = _resolve(ctx, raw_path)
    shown = _display(ctx, path)
    meta: dict[str, Any] = {"path": shown, "truncated": False}
    _refuse_if_denied(ctx, tool, path, shown, meta)
    if path.is_dir():
        hint = "use ls to list it" if tool == "read" else "give a file"
        raise _ToolFailureError(f"{shown}: is a directory; {hint}", meta)
    if not path.exists():
        raise _ToolFailureError(f"{shown}: no such file", meta)
    return path, shown, meta


def _run_read(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    path, shown, meta = _open_text_file(ctx, "read", args["path"])
    loop = _loop_settings(ctx)
    first = args.get("offset", 1)
    count = args.get("limit", loop.read_lines)
    budget = max(loop.tool_output_chars - _NOTE_RESERVE_CHARS, 1)
    line_limit = min(MAX_LINE_CHARS, max(budget // 2, 100))
    shown_lines: list[str] = []
    used = 0
    last = first - 1
    total = 0
    cut_any = False
    with path.open("rb") as handle:
        if _is_binary(handle.read(BINARY_SNIFF_BYTES)):
            size = path.stat().st_size
            raise _ToolFailureError(f"{shown}: binary file ({size} bytes); not shown", meta)
        handle.seek(0)
        for number, raw in enumerate(handle, 1):
            total = number
            if number < first:
                continue
            text, cut = _cut_line(_decode_line(raw), line_limit)
            entry = f"{number:>5}\t{text}"
            if number >= first + count or (shown_lines and used + len(entry) + 1 > budget):
                total += _count_remaining_lines(handle)
                break
            shown_lines.append(entry)
            used += len(entry) + 1
            last = number
            cut_any = cut_any or cut
    meta.update(start_line=first, end_line=last, total_lines=total)
    if total == 0:
        return ToolResult(f"[{shown} is empty]", meta=meta)
    if first > total:
        raise _ArgumentError("offset", f"{first} is past the end of {shown} ({total} lines)")
    content = "\n".join(shown_lines)
    meta["truncated"] = cut_any or last < total
    if last < total:
        content += (
            f"\n\n[showing lines {first}-{last} of {total}; call read with offset={last + 1}]"
        )
    return ToolResult(content, meta=meta)


# -- write -------------------------------------------------------------------------------------


def _encode_utf8(field: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _ArgumentError(field, f"cannot be encoded as UTF-8 ({exc.reason})") from exc


def _holds_placeholder(text: str) -> bool:
    """Whether ``text`` holds a redaction placeholder (:data:`veil.PLACEHOLDER_PATTERN`; the
    redaction module is imported on the first write, not when the tools load)."""
    from veil import has_placeholder

    return has_placeholder(text)


def _refuse_new_placeholders(ctx: ToolContext, field: str, before: str, after: str) -> None:
    """Refuse a write that adds redaction placeholders to a file.

    The model sees ``[redacted:NAME]`` where a tool output held a credential
    (:mod:`veil.core.safety.redaction`); a file written back from what it saw would get the
    placeholder instead of the real value, and the secret would be lost. A write may keep the
    placeholders a file already holds, not add any (with ``security.redactSecrets`` off there
    are none to copy, and nothing is checked).

    Raises:
        _ArgumentError: ``after`` holds more placeholders than ``before`` (names ``field``).
    """
    if not _holds_placeholder(after) or not ctx.session.veil.redactor.enabled:
        return
    from veil import placeholders

    added = placeholders(after) - placeholders(before)
    if added:
        shown = ", ".join(sorted(added))
        raise _ArgumentError(
            field,
            f"holds {shown}: veil hid a secret there from you, and writing the placeholder "
            "would replace the real value in the file; change the lines around it instead, "
            "or ask the user to change that value",
        )


def _current_text(path: Path) -> str:
    """A file's text as far as it decodes ("" when it does not exist or is not a file)."""
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def _run_write(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    path = _resolve(ctx, args["path"])
    shown = _display(ctx, path)
    meta: dict[str, Any] = {"path": shown, "truncated": False}
    content: str = args["content"]
    data = _encode_utf8("content", content)
    if path.is_dir():
        raise _ToolFailureError(f"{shown}: is a directory", meta)
    if _holds_placeholder(content):
        _refuse_new_placeholders(ctx, "content", _current_text(path), content)
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise _ToolFailureError(f"{shown}: cannot write: {exc.strerror or exc}", meta) from exc
    lines = _line_count(content)
    meta.update(bytes=len(data), lines=lines, created=not existed)
    verb = "overwrote" if existed else "created"
    return ToolResult(f"{verb} {shown}: {len(data)} bytes, {lines} lines", meta=meta)


# -- edit --------------------------------------------------------------------------------------

_BOM = b"\xef\xbb\xbf"


def _dominant_eol(text: str) -> str:
    """``"\\r\\n"`` when most of the file's line breaks are CRLF, else ``"\\n"``."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


def _with_eol(text: str, eol: str) -> str:
    """``text`` with every line break (LF or CRLF) written as ``eol``."""
    plain = text.replace("\r\n", "\n")
    return plain if eol == "\n" else plain.replace("\n", eol)


def _read_utf8_for_edit(path: Path, shown: str, meta: dict) -> tuple[bytes, str]:
    """The file's BOM (or b"") and its text; binary or non-UTF-8 files are refused."""
    data = path.read_bytes()
    if _is_binary(data):
        raise _ToolFailureError(f"{shown}: binary file; edit changes text files only", meta)
    bom = _BOM if data.startswith(_BOM) else b""
    try:
        return bom, data[len(bom) :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _ToolFailureError(
            f"{shown}: not valid UTF-8 (byte {exc.start}); edit keeps UTF-8 files only", meta
        ) from exc


def _run_edit(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    old: str = args["old_string"]
    new: str = args["new_string"]
    replace_all: bool = args.get("replace_all", False)
    if old == "":
        raise _ArgumentError(
            "old_string", "must not be empty (use write to create or overwrite a file)"
        )
    if old == new:
        raise _ArgumentError("new_string", "is the same as old_string; nothing would change")
    path, shown, meta = _open_text_file(ctx, "edit", args["path"])
    bom, text = _read_utf8_for_edit(path, shown, meta)
    # The model usually writes "\n"; match and write the file's own line endings instead.
    eol = _dominant_eol(text)
    needle = old if old in text else _with_eol(old, eol)
    found = text.count(needle)
    if found == 0:
        raise _ToolFailureError(
            f"{shown}: old_string not found (it must match exactly, "
            "including whitespace and indentation)",
            meta,
        )
    if found > 1 and not replace_all:
        raise _ToolFailureError(
            f"{shown}: old_string found {found} times; include more surrounding lines to make "
            "it unique, or set replace_all=true",
            meta,
        )
    replacement = _with_eol(new, eol)
    first_line = text.count("\n", 0, text.index(needle)) + 1
    updated = text.replace(needle, replacement, -1 if replace_all else 1)
    if _holds_placeholder(new):
        _refuse_new_placeholders(ctx, "new_string", text, updated)
    data = bom + _encode_utf8("new_string", updated)
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise _ToolFailureError(f"{shown}: cannot write: {exc.strerror or exc}", meta) from exc
    done = found if replace_all else 1
    meta.update(replacements=done, first_line=first_line)
    plural = "occurrence" if done == 1 else "occurrences"
    return ToolResult(
        f"edited {shown}: replaced {done} {plural} (first at line {first_line})", meta=meta
    )


# -- bash --------------------------------------------------------------------------------------


@dataclass
class CommandResult:
    """What :func:`run_command` observed.

    Attributes:
        output: stdout and stderr interleaved, decoded as UTF-8, capped by :func:`cap_middle`.
        exit_code: the shell's exit status (negative: killed by that signal; None: unknown).
        timed_out: the command ran past its timeout and its process group was killed.
        cut_chars: characters removed from the middle of the output (0: complete).
        seconds: wall-clock duration.
    """

    output: str
    exit_code: int | None
    timed_out: bool
    cut_chars: int
    seconds: float


def _drain(fd: int, selector: selectors.BaseSelector, buffer: _OutputBuffer) -> None:
    """Read what is still in the pipe until end of file, ``DRAIN_QUIET_SECONDS`` of silence or
    ``DRAIN_MAX_SECONDS`` in all."""
    stop = time.monotonic() + DRAIN_MAX_SECONDS
    while time.monotonic() < stop and selector.select(timeout=DRAIN_QUIET_SECONDS):
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        buffer.feed(chunk)


def _pump(proc: subprocess.Popen, buffer: _OutputBuffer, deadline: float) -> bool:
    """Collect the command's output until it exits; True when ``deadline`` passed first.

    Background jobs that keep the pipe open do not hold the call: once the shell has exited,
    what is left in the pipe is drained and the call returns.
    """
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if proc.poll() is not None:
                _drain(fd, selector, buffer)
                return False
            if selector.select(timeout=min(left, 0.05)):
                chunk = os.read(fd, 65536)
                if not chunk:  # stdout closed: only the exit status is left to wait for
                    try:
                        proc.wait(timeout=max(deadline - time.monotonic(), 0))
                        return False
                    except subprocess.TimeoutExpired:
                        return True
                buffer.feed(chunk)


def _command_env(project: Path | None = None) -> dict[str, str]:
    """The environment for commands: the user's, without veil's own virtual environment and
    with the project's ``.venv`` (:mod:`~veil.default_plugins.coding_tools.environment`), with
    pagers and credential prompts turned off."""
    from veil.default_plugins.coding_tools.environment import tool_environment

    env = tool_environment(os.environ, project)
    env.update(PAGER="cat", GIT_PAGER="cat", GIT_TERMINAL_PROMPT="0")
    return env


def run_command(
    command: str, cwd: Path, timeout: float, max_chars: int, project: Path | None = None
) -> CommandResult:
    """Run ``bash -c command`` in ``cwd`` in a new process group, stdin closed.

    Args:
        command: shell text.
        cwd: working folder.
        timeout: seconds before the whole process group gets SIGTERM, then SIGKILL
            :data:`KILL_GRACE_SECONDS` later.
        max_chars: cap of the returned output in characters (head and tail kept, memory bounded
            whatever the command prints).
        project: the project root, whose ``.venv`` the command gets when no other virtual
            environment is active (:func:`_command_env`).

    Processes the command left running in its group (``cmd &``) are killed when it returns;
    ``setsid``/``nohup setsid`` detaches one for good. While it runs the group is registered
    in :mod:`veil.core.safety.processes`, which kills it if veil ends first (exit, SIGTERM, the HTTP
    server stopping).

    Raises:
        OSError: bash could not be started (:class:`~veil.core.safety.processes.ShuttingDownError`
            when veil is shutting down).
        KeyboardInterrupt: after killing the process group.
    """
    started = time.monotonic()
    proc = start_group(
        ["bash", "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_command_env(project),
    )
    buffer = _OutputBuffer(max_chars)
    try:
        timed_out = _pump(proc, buffer, started + timeout)
        if timed_out:
            kill_group(proc)
            with selectors.DefaultSelector() as selector:
                selector.register(proc.stdout.fileno(), selectors.EVENT_READ)
                _drain(proc.stdout.fileno(), selector, buffer)
        else:
            signal_group(proc.pid, signal.SIGKILL)  # leftover background jobs
    except BaseException:  # KeyboardInterrupt included: never leave the group running
        kill_group(proc)
        raise
    finally:
        finished(proc)
        proc.stdout.close()
    output, cut = buffer.render(max_chars)
    return CommandResult(output, proc.returncode, timed_out, cut, time.monotonic() - started)


def _run_bash(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    loop = _loop_settings(ctx)
    command: str = args["command"]
    if not command.strip():
        raise _ArgumentError("command", "is empty")
    timeout = min(args.get("timeout", loop.bash_timeout), loop.bash_timeout)
    footer_room = 80
    try:
        result = run_command(
            command,
            Path(ctx.session.cwd),
            timeout,
            max(loop.tool_output_chars - footer_room, 100),
            project=Path(ctx.session.config.project_dir),
        )
    except OSError as exc:
        raise _ToolFailureError(f"cannot start bash: {exc.strerror or exc}") from exc
    meta: dict[str, Any] = {
        "command": command,
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "truncated": result.cut_chars > 0,
        "seconds": round(result.seconds, 3),
    }
    body = result.output if result.output else "(no output)"
    if not body.endswith("\n"):
        body += "\n"
    if result.timed_out:
        footer = f"[timed out after {timeout:g} s; process group killed]"
        return ToolResult(body + footer, is_error=True, outcome="fail", meta=meta)
    footer = f"[exit code: {result.exit_code}]"
    outcome = "pass" if result.exit_code == 0 else "fail"
    return ToolResult(body + footer, outcome=outcome, meta=meta)


# -- grep --------------------------------------------------------------------------------------


@dataclass
class _Match:
    path: Path
    line: int
    text: str


def _glob_matches(glob: str, name: str, relative: str) -> bool:
    """ripgrep's rule: a glob without ``/`` matches the file name, one with ``/`` the path."""
    return fnmatch.fnmatchcase(relative if "/" in glob else name, glob)


def _walk_files(root: Path, glob: str | None, base: Path | None = None) -> Iterator[Path]:
    """Files under ``root`` in ripgrep's ``--sort path`` order, skipping noise folders and links."""
    base = base or root
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in NOISE_DIRS:
                yield from _walk_files(Path(entry.path), glob, base)
        elif entry.is_file(follow_symlinks=False):
            relative = Path(entry.path).relative_to(base).as_posix()
            if glob is None or _glob_matches(glob, entry.name, relative):
                yield Path(entry.path)


def _grep_python(
    regex: Any, target: Path, glob: str | None, limit: int, deny: _DenyFilter | None = None
) -> list[_Match]:
    """Pure-Python search: up to ``limit`` matches; binary and unreadable files are skipped, and
    so are files ``deny`` covers (never read)."""
    matches: list[_Match] = []
    files = [target] if target.is_file() else _walk_files(target, glob)
    for file in files:
        if deny is not None and deny.rule_for(file, False) is not None:
            continue
        try:
            data = file.read_bytes()
        except OSError:
            continue
        if _is_binary(data):
            continue
        lines = data.decode("utf-8", "replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, 1):
            line = line.removesuffix("\r")
            if regex.search(line):
                matches.append(_Match(file, number, line))
                if len(matches) >= limit:
                    return matches
    return matches


def _rg_text(field: dict[str, Any]) -> str:
    """A ripgrep JSON ``{"text": ...}`` or ``{"bytes": base64}`` value as text."""
    if "text" in field:
        return field["text"]
    return base64.b64decode(field.get("bytes", "")).decode("utf-8", "replace")


def _rg_command(rg: str, args: dict[str, Any], target: Path, *, files: bool) -> list[str]:
    """ripgrep's command line: the search (``--json``), or with ``files`` the list of files that
    search would read (``--files``), with the same filters."""
    command = [rg, "--files" if files else "--json", "--no-config", "--hidden", "--sort", "path"]
    if args.get("ignore_case") and not files:
        command.append("--ignore-case")
    if args.get("glob"):
        command += ["--glob", args["glob"]]
    for name in sorted(NOISE_DIRS):
        command += ["--glob", f"!{name}"]
    if not files:
        command += ["--regexp", args["pattern"]]
    return [*command, "--", str(target)]


def _rg_files(rg: str, args: dict[str, Any], target: Path, timeout: float) -> list[Path] | None:
    """The files a ripgrep search of ``target`` reads (``rg --files``); None when it fails."""
    try:
        done = subprocess.run(
            _rg_command(rg, args, target, files=True),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode not in (0, 1):  # 1: no file
        return None
    return [Path(os.fsdecode(line)) for line in done.stdout.split(b"\n") if line]


def _grep_rg(
    rg: str,
    args: dict[str, Any],
    target: Path,
    limit: int,
    timeout: float,
    deny: _DenyFilter | None = None,
) -> list[_Match] | None:
    """Search with ripgrep (``--json``, sorted by path); None when ripgrep refuses the pattern.

    Hidden files are searched and the noise folders skipped, as in the Python walk; ripgrep also
    honours ``.gitignore`` / ``.ignore`` files, which the Python walk does not read. Matches in
    files ``deny`` covers are dropped before they count towards ``limit``.
    """
    command = _rg_command(rg, args, target, files=False)
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    matches: list[_Match] = []
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            event = json.loads(raw)
            if event.get("type") != "match":
                continue
            data = event["data"]
            path = Path(_rg_text(data["path"]))
            if deny is not None and deny.rule_for(path, False) is not None:
                continue
            text = _rg_text(data["lines"]).removesuffix("\n").removesuffix("\r")
            matches.append(_Match(path, data["line_number"], text))
            if len(matches) >= limit:
                break
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.wait()
    if proc.returncode == 2 and not matches:
        return None  # e.g. look-around: a Python regex ripgrep's engine does not support
    return matches


def _run_grep(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    flags = re.IGNORECASE if args.get("ignore_case") else 0
    try:
        regex = re.compile(args["pattern"], flags)
    except re.error as exc:
        raise _ArgumentError("pattern", f"invalid regular expression: {exc}") from exc
    target = _resolve(ctx, args.get("path", "."))
    shown = _display(ctx, target)
    meta: dict[str, Any] = {"path": shown, "truncated": False}
    if not target.exists():
        raise _ToolFailureError(f"{shown}: no such file or directory", meta)
    _refuse_if_denied(ctx, "grep", target, shown, meta)
    loop = _loop_settings(ctx)
    limit = args.get("max_results", GREP_DEFAULT_MAX_RESULTS)
    deny = _deny_filter(ctx, "grep", target) if target.is_dir() else None
    rg = shutil.which("rg")
    matches = None
    if rg:
        matches = _grep_rg(rg, args, target, limit + 1, loop.bash_timeout, deny)
    meta["engine"] = "rg" if matches is not None else "python"
    if matches is None:
        matches = _grep_python(regex, target, args.get("glob"), limit + 1, deny)
    denied_note = ""
    if deny is not None:
        left_out = _denied_files(ctx, args, target, deny, rg if meta["engine"] == "rg" else None)
        meta["denied"] = {"files": left_out, "rules": list(deny.rules)}
        if left_out:
            denied_note = "\n\n" + deny.note(left_out, "file", "files")
    over_limit = len(matches) > limit
    matches = matches[:limit]
    if not matches:
        meta["matches"] = 0
        return ToolResult(f"no matches for /{args['pattern']}/ in {shown}" + denied_note, meta=meta)
    lines = [
        f"{_display(ctx, Path(os.path.normpath(m.path)))}:{m.line}:"
        f"{_cut_line(m.text, GREP_LINE_CHARS)[0]}"
        for m in matches
    ]
    content, kept = _join_lines_capped(lines, loop.tool_output_chars - _NOTE_RESERVE_CHARS)
    meta.update(matches=kept, truncated=over_limit or kept < len(lines))
    if kept < len(lines):
        content += (
            f"\n\n[output cut after {kept} matches at {loop.tool_output_chars} characters; "
            "narrow the pattern, path or glob]"
        )
    elif over_limit:
        content += (
            f"\n\n[stopped after {limit} matches; narrow the pattern, path or glob, "
            "or raise max_results]"
        )
    return ToolResult(content + denied_note, meta=meta)


def _denied_files(
    ctx: ToolContext, args: dict[str, Any], folder: Path, deny: _DenyFilter, rg: str | None
) -> int:
    """How many files a search of ``folder`` left out for ``deny``: counted over every file
    under ``folder`` (ripgrep's ``--files`` list, or the Python walk), matching or not and
    whatever the ``glob``, so the number says nothing of what they hold or how they are named
    (a count under the model's glob would confirm a guessed name one letter at a time)."""
    whole = {**args, "glob": None}
    files = None
    if rg is not None:
        files = _rg_files(rg, whole, folder, _loop_settings(ctx).bash_timeout)
    if files is None:
        files = list(_walk_files(folder, None))
    return sum(deny.rule_for(file, False) is not None for file in files)


# -- ls ----------------------------------------------------------------------------------------


def _list_tree(
    folder: Path, depth: int, deny: _DenyFilter | None = None, left_out: list[Path] | None = None
) -> Iterator[tuple[Path, bool]]:
    """(path, is folder) under ``folder``, sorted by name, each folder followed by its contents.

    Noise folders are skipped; symbolic links to folders are listed but not entered. Entries
    ``deny`` covers are left out (a folder is not entered) and appended to ``left_out``.
    """
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        is_dir = entry.is_dir()
        if is_dir and entry.name in NOISE_DIRS:
            continue
        path = Path(entry.path)
        if deny is not None and deny.rule_for(path, is_dir, is_link=entry.is_symlink()):
            if left_out is not None:
                left_out.append(path)
            continue
        yield path, is_dir
        if is_dir and depth > 1 and not entry.is_symlink():
            yield from _list_tree(path, depth - 1, deny, left_out)


def _run_ls(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    folder = _resolve(ctx, args.get("path", "."))
    shown = _display(ctx, folder)
    meta: dict[str, Any] = {"path": shown, "truncated": False}
    if not folder.exists():
        raise _ToolFailureError(f"{shown}: no such file or directory", meta)
    _refuse_if_denied(ctx, "ls", folder, shown, meta)
    if not folder.is_dir():
        return ToolResult(shown, meta=meta)
    depth = args.get("depth", LS_DEFAULT_DEPTH)
    loop = _loop_settings(ctx)
    deny = _deny_filter(ctx, "ls", folder)
    left_out: list[Path] = []
    lines: list[str] = []
    total = 0
    for path, is_dir in _list_tree(folder, depth, deny, left_out):
        total += 1
        if total > LS_COUNT_LIMIT:
            break
        if len(lines) < LS_MAX_ENTRIES:
            lines.append(_display(ctx, path) + ("/" if is_dir else ""))
    denied_note = ""
    if deny is not None:
        meta["denied"] = {"entries": len(left_out), "rules": list(deny.rules)}
        if left_out:
            denied_note = "\n\n" + deny.note(len(left_out), "entry", "entries")
    if not lines:
        if left_out:
            return ToolResult(f"[nothing to show in {shown}]" + denied_note, meta=meta)
        return ToolResult(f"[{shown} is empty]", meta=meta)
    content, kept = _join_lines_capped(lines, loop.tool_output_chars - _NOTE_RESERVE_CHARS)
    meta.update(entries=kept, truncated=kept < total)
    if kept < total:
        counted = f"more than {LS_COUNT_LIMIT}" if total > LS_COUNT_LIMIT else str(total)
        content += (
            f"\n\n[showing {kept} of {counted} entries; list a sub-folder or use a smaller depth]"
        )
    return ToolResult(content + denied_note, meta=meta)


# -- registry ----------------------------------------------------------------------------------

_Runner = Callable[[ToolContext, dict[str, Any]], ToolResult]


def _make_handler(name: str, schema: dict[str, Any], run: _Runner) -> Callable:
    """Wrap a runner: validate arguments first, turn failures into error results."""

    def handler(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        try:
            return run(ctx, _parse_args(schema, args))
        except _ArgumentError as exc:
            return ToolResult(
                f"{name}: {exc.field}: {exc.problem}", is_error=True, meta={"truncated": False}
            )
        except _ToolFailureError as exc:
            meta = {"truncated": False, **exc.meta}
            return ToolResult(f"{name}: {exc.message}", is_error=True, meta=meta)
        except OSError as exc:  # permission denied, I/O error... on a path the runner touched
            where = f"{exc.filename}: " if exc.filename else ""
            return ToolResult(
                f"{name}: {where}{exc.strerror or exc}", is_error=True, meta={"truncated": False}
            )

    handler.__name__ = f"{name}_handler"
    handler.__doc__ = (
        f"Handler of the built-in ``{name}`` tool"
        " (see :mod:`veil.default_plugins.coding_tools.tools`)."
    )
    return handler


def _tool(
    name: str,
    description: str,
    schema: dict[str, Any],
    run: _Runner,
    effect: ToolEffect = "change",
) -> Tool:
    return Tool(name, description, schema, _make_handler(name, schema, run), effect=effect)


def _path_property(what: str) -> dict[str, Any]:
    return {"type": "string", "description": f"{what}, relative to the project root or absolute"}


def builtin_tools() -> list[Tool]:
    """The six built-in coding tools, in this order: read, write, edit, bash, grep, ls.

    Each :class:`~veil.core.types.Tool` carries an OpenAI function schema (``required`` fields,
    ``additionalProperties: false``) and a handler ``(ToolContext, dict) -> ToolResult`` that
    never raises on bad arguments or ordinary failures (see the module docstring). ``read``,
    ``grep`` and ``ls`` declare the effect ``"read"`` (never asked); ``write``, ``edit`` and
    ``bash`` ``"change"`` (:attr:`~veil.core.types.Tool.effect`).
    """
    read = _schema(
        {
            "path": _path_property("File to read"),
            "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines"},
        },
        ["path"],
    )
    write = _schema(
        {
            "path": _path_property("File to create or overwrite"),
            "content": {"type": "string", "description": "The whole new content (UTF-8)"},
        },
        ["path", "content"],
    )
    edit = _schema(
        {
            "path": _path_property("File to change"),
            "old_string": {"type": "string", "description": "Exact text to replace"},
            "new_string": {"type": "string", "description": "Replacement text"},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence (default false: it must be unique)",
            },
        },
        ["path", "old_string", "new_string"],
    )
    bash = _schema(
        {
            "command": {"type": "string", "description": "Shell command (bash -c)"},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Seconds before the command is killed (capped by settings)",
            },
        },
        ["command"],
    )
    grep = _schema(
        {
            "pattern": {"type": "string", "description": "Python regular expression"},
            "path": _path_property("File or folder to search (default: the project root)"),
            "glob": {"type": "string", "description": "Only files matching this, e.g. *.py"},
            "ignore_case": {"type": "boolean", "description": "Case-insensitive match"},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "description": f"Most matching lines returned (default {GREP_DEFAULT_MAX_RESULTS})",
            },
        },
        ["pattern"],
    )
    ls = _schema(
        {
            "path": _path_property("Folder to list (default: the project root)"),
            "depth": {
                "type": "integer",
                "minimum": 1,
                "maximum": LS_MAX_DEPTH,
                "description": f"Levels to descend (default {LS_DEFAULT_DEPTH}: the folder only)",
            },
        },
        [],
    )
    return [
        _tool(
            "read",
            "Read a text file. Returns numbered lines ('   12\\tcode'); by default the first "
            "lines up to the configured limit; use offset and limit for other ranges. The "
            "output says when more lines remain and which offset to ask for next.",
            read,
            _run_read,
            effect="read",  # only reads: never asked
        ),
        _tool(
            "write",
            "Create or overwrite a file with the given content (UTF-8), creating missing "
            "folders. Prefer edit for changes to an existing file.",
            write,
            _run_write,
        ),
        _tool(
            "edit",
            "Replace exact text in a file. old_string must match the file exactly (whitespace "
            "included) and be unique unless replace_all is true; read the file first. The "
            "file's line endings and encoding are kept.",
            edit,
            _run_edit,
        ),
        _tool(
            "bash",
            "Run a shell command with bash -c in the project root, stdin closed. Returns "
            "stdout and stderr interleaved and the exit code; long output keeps its start and "
            "end. The command is killed at its timeout; background jobs (&) are stopped when "
            "it returns.",
            bash,
            _run_bash,
        ),
        _tool(
            "grep",
            "Search file contents with a regular expression. Returns 'path:line:text' lines, "
            "paths relative to the project root, sorted by path. Skips .git, .venv, "
            "node_modules, __pycache__, .veil and binary files.",
            grep,
            _run_grep,
            effect="read",  # only reads: never asked
        ),
        _tool(
            "ls",
            "List a folder: one entry per line, sorted, folders ending with '/', paths "
            "relative to the project root. depth > 1 also lists sub-folders' contents. Skips "
            ".git, .venv, node_modules, __pycache__ and .veil.",
            ls,
            _run_ls,
            effect="read",  # only reads: never asked
        ),
    ]
