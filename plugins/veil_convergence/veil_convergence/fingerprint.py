"""Normalised error fingerprints: the same failure gets the same fingerprint when its text drifts.

Seed 002 ("a normalised fingerprint of the error ... lets the same failure get recognised as the
same failure even when the message text drifts"); issue 7 lists what drifts. A tool's output is
read into an :class:`ErrorSignature` with four identity fields:

* ``type``: the error type (``ModuleNotFoundError``, ``command not found``, ``exit 2``...).
* ``symbol``: the failing symbol: the missing module or name, ``Class.attribute``, the failing
  pytest node ids, the command that was not found.
* ``location``: where it failed, as ``<module-relative path>:<function>`` of the innermost frame
  outside installed libraries, without line numbers ('' for import errors, whose cause is the
  missing module wherever it is imported from).
* ``message``: the message with the drifting parts replaced by placeholders.

Normalised away: line and column numbers, absolute path prefixes (a path keeps its part after
``site-packages/`` or ``lib/pythonX.Y/``, else its last two components), temporary names
(``/tmp/tmpXXXXXXXX``, ``pytest-of-*/pytest-N/...`` become ``<tmp>``), hex addresses and long
hex ids, UUIDs, timestamps, durations, other numbers (with their sign), and pytest's count line
("1 failed, 4 passed in 0.05s").

The fingerprint is the first 12 hex digits of BLAKE2b over the four fields (stable across runs,
machines and Python versions). Recognised, in this order: pytest results (``FAILED id - Err``,
``id FAILED``), Python tracebacks (the last one of a chain), bare ``SyntaxError`` /
``IndentationError`` reports, SWE-agent's lint block (``ERRORS: - E999 SyntaxError: ...``),
command timeouts, shell errors (``command not found``, ``python: No module named X``, ``No such
file or directory``, ``error:`` / ``fatal:`` lines), exceptions a script printed
(``Error: TypeError: ...``), and finally any non-zero exit status.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass

from veil_convergence.commands import SEARCH_PROGRAMS, last_program

__all__ = [
    "ErrorSignature",
    "error_signature",
    "exit_code_in",
    "fingerprint",
    "normalise",
    "parse_error",
]

DIGEST_HEX_CHARS = 12
MESSAGE_MAX_CHARS = 200
NORMALISE_INPUT_CHARS = 2000


@dataclass(frozen=True)
class ErrorSignature:
    """A recognised error, reduced to what identifies it.

    Attributes:
        kind: which reader recognised it: ``pytest``, ``traceback``, ``syntax``, ``lint``,
            ``timeout``, ``shell``, ``printed`` or ``exit`` (not part of the identity).
        type: error type; symbol: failing symbol; location: ``path:function``;
        message: normalised message. These four make the fingerprint.
    """

    kind: str
    type: str
    symbol: str = ""
    location: str = ""
    message: str = ""

    @property
    def fingerprint(self) -> str:
        """12 hex characters of BLAKE2b over (type, symbol, location, message)."""
        key = json.dumps([self.type, self.symbol, self.location, self.message])
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=DIGEST_HEX_CHARS // 2)
        return digest.hexdigest()

    @property
    def label(self) -> str:
        """A short readable name: ``ModuleNotFoundError: numpy`` or
        ``AttributeError: np.Inf was removed ... at pvlib/pvsystem.py:<module>`` (<= 160 chars)."""
        what = self.symbol or self.message
        text = f"{self.type}: {what}" if what else self.type
        if self.location:
            text += f" at {self.location}"
        return text if len(text) <= 160 else text[:157] + "..."

    def as_dict(self) -> dict[str, str]:
        """The fields plus ``label`` and ``fingerprint``."""
        return {**asdict(self), "label": self.label, "fingerprint": self.fingerprint}


# -- normalisation ---------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|.\x08")
_TMP_PATH = re.compile(
    r"(?:/private)?/(?:var/)?tmp/(?:pytest-of-[^/\s'\"]+/pytest-\d+/[^/\s'\"]+|[^/\s'\":),]+)"
    r"|(?:/var/folders/[^/\s]+/[^/\s]+/T/[^/\s'\":),]+)"
    r"|[A-Za-z]:\\(?:[^\\\s]+\\)*Temp\\[^\\\s'\":]+"
)
_TMP_NAME = re.compile(r"\btmp[a-z0-9_]{6,10}\b|\bpytest-of-[\w-]+\b|\bpytest-\d+\b")
_ABS_PATH = re.compile(r"(?<![\w<>.:/~-])/(?:[\w.+@~-]+/)+[\w.+@<>~-]*[\w>]")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_HEX_ADDR = re.compile(r"\b0x[0-9a-fA-F]+\b")
_LONG_HEX = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{12,}\b")
_DATETIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
)
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b")
_DURATION = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ms|us|µs|ns|s|secs?|seconds?|mins?|minutes?|hours?)\b"
)
_FILE_LINE = re.compile(r"(\.[A-Za-z]\w{0,9}):\d+(?::\d+)?\b")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)*(?:[eE][-+]?\d+)?(?!\w)")
_SPACE = re.compile(r"\s+")
_LIBRARY = re.compile(r"site-packages|dist-packages|/lib/python\d|^<frozen |/lib64/python\d")


def short_path(path: str) -> str:
    """Reduce a path to the part that survives a move between machines and runs.

    ``/opt/conda/lib/python3.11/site-packages/numpy/__init__.py`` -> ``numpy/__init__.py``;
    ``/usr/lib/python3.11/inspect.py`` -> ``inspect.py``; ``/testbed/pvlib/tools.py`` ->
    ``pvlib/tools.py``; ``/tmp/tmpab12cd34/src/x.py`` -> ``src/x.py``; ``<string>`` unchanged.
    """
    path = path.replace("\\", "/")
    if path.startswith("<") and not path.startswith("<tmp>"):
        return path
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    stdlib = re.search(r"/lib(?:64)?/python\d+(?:\.\d+)?/(.+)$", path)
    if stdlib:
        return stdlib.group(1)
    path = _TMP_PATH.sub("<tmp>", path)
    parts = [p for p in path.split("/") if p and p != "<tmp>"]
    return "/".join(parts[-2:]) if parts else path


def normalise(text: str) -> str:
    """Replace what drifts between two runs of the same failure with placeholders.

    Order matters: temporary paths before paths, dates before clock times before durations
    before bare numbers. Only the first :data:`NORMALISE_INPUT_CHARS` characters are read (a
    message longer than that is a data dump, not an identity). The result is one line of
    collapsed whitespace, at most :data:`MESSAGE_MAX_CHARS` characters.

    >>> normalise("Unable to load file /tmp/tmpm1koinh9/src/project at 0x7f3a (took 0.12s)")
    'Unable to load file <tmp>/src/project at 0x? (took <dur>)'
    """
    text = _ANSI.sub("", text[:NORMALISE_INPUT_CHARS])
    text = _TMP_PATH.sub("<tmp>", text)
    text = _TMP_NAME.sub("<tmp>", text)
    text = _ABS_PATH.sub(lambda m: short_path(m.group(0)), text)
    text = _UUID.sub("<uuid>", text)
    text = _HEX_ADDR.sub("0x?", text)
    text = _LONG_HEX.sub("<hex>", text)
    text = _DATETIME.sub("<time>", text)
    text = _CLOCK.sub("<time>", text)
    text = _DURATION.sub("<dur>", text)
    text = _FILE_LINE.sub(r"\1", text)
    text = _NUMBER.sub("<N>", text)
    text = _SPACE.sub(" ", text).strip()
    return text[:MESSAGE_MAX_CHARS]


# -- symbols inside messages -----------------------------------------------------------------

_MISSING_MODULE = re.compile(r"No module named ['\"]?([\w.]+)['\"]?")
_CANNOT_IMPORT = re.compile(r"cannot import name ['\"]?(\w+)['\"]? from ['\"]?([\w.]+)['\"]?")
_SYMBOL_PATTERNS = (
    re.compile(r"'([\w.]+)' object has no attribute '(\w+)'"),
    re.compile(r"module '([\w.]+)' has no attribute '(\w+)'"),
    re.compile(r"type object '([\w.]+)' has no attribute '(\w+)'"),
    re.compile(r"'([\w.]+)' object attribute '(\w+)' is read-only"),
    re.compile(r"`([\w.]+)` was removed"),
    re.compile(r"name '(\w+)' is not defined"),
    re.compile(r"local variable '(\w+)'"),
    re.compile(r"^([\w.]+)\(\) (?:missing|got an unexpected|takes|got multiple)"),
    re.compile(r"'(\w+)' object is not (?:callable|iterable|subscriptable)"),
)


def _symbol_from_message(err_type: str, message: str) -> str:
    """The failing symbol a message names (attribute, name, function), or ''."""
    if err_type == "KeyError":
        return message.strip("'\" ")[:80]
    for pattern in _SYMBOL_PATTERNS:
        m = pattern.search(message)
        if m:
            return ".".join(g for g in m.groups() if g)
    return ""


def _import_failure(err_type: str, message: str) -> tuple[str, str] | None:
    """``(type, missing module or name)`` for import errors, else None."""
    m = _MISSING_MODULE.search(message)
    if m and err_type in ("ModuleNotFoundError", "ImportError", ""):
        return "ModuleNotFoundError", m.group(1)
    m = _CANNOT_IMPORT.search(message)
    if m and err_type in ("ImportError", ""):
        return "ImportError", f"{m.group(2)}.{m.group(1)}"
    return None


def _from_exception(
    kind: str, dotted_type: str, message: str, location: str, code: str = ""
) -> ErrorSignature:
    """Build the signature of a Python exception ``dotted_type: message`` raised at ``location``.

    Import errors drop the location (the missing module is the cause wherever it is imported).
    ``AssertionError`` keeps the normalised ``assert`` line as its symbol (the assertion target).
    """
    err_type = dotted_type.rsplit(".", 1)[-1]
    message = message.strip()
    imported = _import_failure(err_type, message)
    if imported:
        return ErrorSignature(kind, imported[0], imported[1])
    symbol = _symbol_from_message(err_type, message)
    if err_type == "AssertionError" and not symbol and code.lstrip().startswith("assert"):
        symbol = normalise(code)
    return ErrorSignature(kind, err_type, symbol, location, normalise(message))


# -- readers ---------------------------------------------------------------------------------

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+(?:, in (?P<func>.+?))?\s*$')
_EXC_LINE = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::(?: (?P<msg>.*))?)?$")
_EXC_NAME = re.compile(
    r"(?:Error|Exception|Exit|Interrupt|Warning|Iteration|Failure|Failed|Fault|Timeout"
    r"|NotFound|DoesNotExist|NoSourceFile)$"
)
_CHAIN = ("Traceback (most recent call last):", "During handling of", "The above exception")


def _traceback(lines: list[str]) -> ErrorSignature | None:
    """The last Python traceback (or bare ``File ..., line N`` SyntaxError report) in ``lines``."""
    frame_at = [i for i, line in enumerate(lines) if _FRAME.match(line)]
    if not frame_at:
        return None
    last = frame_at[-1]
    frames: list[tuple[str, str | None, str]] = []  # (path, function, code line)
    for i in range(last, -1, -1):
        line = lines[i]
        if line.lstrip().startswith(_CHAIN):
            break
        m = _FRAME.match(line)
        if m:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            code = nxt.strip() if nxt.startswith((" ", "\t")) and not _FRAME.match(nxt) else ""
            frames.append((m.group("path"), m.group("func"), code))
    frames.reverse()
    exc_type, exc_msg = _exception_after(lines, last)
    if not exc_type:
        exc_type, exc_msg = "Traceback", "(no exception line)"
    if exc_type.rsplit(".", 1)[-1] in ("SyntaxError", "IndentationError", "TabError"):
        path = frames[-1][0] if frames else ""
        return ErrorSignature("syntax", exc_type, "", short_path(path), normalise(exc_msg))
    project = [f for f in frames if not _LIBRARY.search(f[0])] or frames
    path, func, code = project[-1]
    location = short_path(path) + (f":{func}" if func else "")
    return _from_exception("traceback", exc_type, exc_msg, location, code)


def _exception_after(lines: list[str], last_frame: int) -> tuple[str, str]:
    """Find the ``Type: message`` line after the last frame.

    The exception line is indented two columns less than the frames (0 in a plain traceback,
    more when a script printed an indented one); code and caret lines are deeper. Lines a
    script printed in between are skipped; only names that look like exceptions count.
    """
    frame_line = lines[last_frame]
    base = max(0, len(frame_line) - len(frame_line.lstrip()) - 2)
    seen = 0
    for line in lines[last_frame + 1 :]:
        if not line.strip() or len(line) - len(line.lstrip()) > base:
            continue
        seen += 1
        if seen > 12:
            break
        m = _EXC_LINE.match(line.strip())
        if m and _EXC_NAME.search(m.group("type").rsplit(".", 1)[-1]):
            return m.group("type"), m.group("msg") or ""
    return "", ""


_PYTEST_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?\s*$", re.M)
_PYTEST_VERBOSE = re.compile(r"^(\S+::\S+) (FAILED|ERROR)\b", re.M)
_PYTEST_SECTION = re.compile(r"^_{3,} (.+?) _{3,}\s*$", re.M)
_PYTEST_CRASH = re.compile(r"^\S+:\d+: ((?:\w+\.)*\w+)\s*$", re.M)
_PYTEST_E = re.compile(r"^E\s+((?:\w+\.)*\w+(?:Error|Exception|Exit|Warning|Failed))\b", re.M)
_MSG_TYPE = re.compile(r"^((?:\w+\.)*\w+(?:Error|Exception|Exit|Warning|Interrupt)|Failed)\b")


def _pytest(text: str) -> ErrorSignature | None:
    """Failing pytest node ids with their error types; counts and durations ignored."""
    failed: dict[str, str] = {}
    for outcome, node, msg in _PYTEST_SUMMARY.findall(text):
        if "::" not in node and not node.endswith(".py"):
            continue
        m = _MSG_TYPE.match(msg or "")
        found = m.group(1) if m else ("AssertionError" if (msg or "").startswith("assert") else "")
        failed[node] = failed.get(node) or found or ("" if outcome == "FAILED" else "error")
    for node, _outcome in _PYTEST_VERBOSE.findall(text):
        failed.setdefault(node, "")
    if not failed:
        return None
    sections = _sections(text)
    for node, err in failed.items():
        if not err:
            body = sections.get(node.split("::", 1)[-1].replace("::", "."), "")
            if not body and "::" not in node:  # a collection error: "ERROR collecting <path>"
                heads = [h for h in sections if h.startswith("ERROR collecting")]
                body = next((sections[h] for h in heads if h.endswith(node)), "")
            if not body and len(failed) == 1:
                body = text
            failed[node] = _crash_type(body) or "failed"
    ids = sorted(failed)
    types = sorted({t.rsplit(".", 1)[-1] for t in failed.values()})
    return ErrorSignature(
        "pytest",
        "/".join(types),
        " ".join(_node_id(i) for i in ids),
        "",
        "; ".join(f"{_node_id(i)}: {failed[i].rsplit('.', 1)[-1]}" for i in ids),
    )


def _node_id(node: str) -> str:
    path, sep, rest = node.partition("::")
    if path.startswith("/"):
        path = short_path(path)
    return path + sep + rest


def _sections(text: str) -> dict[str, str]:
    """pytest failure sections by header (``TestClass.test_x``) -> their text."""
    heads = list(_PYTEST_SECTION.finditer(text))
    out = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out[head.group(1)] = text[head.end() : end]
    return out


def _crash_type(body: str) -> str:
    crash = _PYTEST_CRASH.findall(body)
    if crash:
        return crash[-1]
    e_line = _PYTEST_E.findall(body)
    return e_line[0] if e_line else ""


_LINT_BLOCK = re.compile(r"^ERRORS:\s*\n((?:- .+\n?)+)", re.M)
_LINT_FILE = re.compile(r"\[File: (.+?) \(\d+ lines total\)\]")


def _lint(text: str) -> ErrorSignature | None:
    """SWE-agent's edit linter: ``ERRORS:`` then ``- E999 SyntaxError: unmatched ']'``."""
    block = _LINT_BLOCK.search(text)
    if not block:
        return None
    items = []
    for raw in block.group(1).splitlines():
        code, _, rest = raw[2:].strip().partition(" ")
        items.append((code, rest))
    where = _LINT_FILE.search(text)
    code, rest = items[0]
    exc = _EXC_LINE.match(rest)
    err_type = exc.group("type") if exc and exc.group("msg") is not None else code
    return ErrorSignature(
        "lint",
        err_type,
        "",
        short_path(where.group(1)) if where else "",
        "; ".join(normalise(f"{c} {r}") for c, r in sorted(items)),
    )


_TIMEOUT = re.compile(
    r"timed out after [\d.]+ ?s(?:econds)?|TimeoutExpired|<exception>[^\n]*timed out"
)
_TIMEOUT_CMD = re.compile(r"'-c', '(.+?)'\]")
_STILL_RUNNING = re.compile(r"no new output after \d+ seconds", re.I)


def _timeout(text: str) -> ErrorSignature | None:
    if "Traceback (most recent call last)" in text or not _TIMEOUT.search(text):
        return None
    cmd = _TIMEOUT_CMD.search(text)
    return ErrorSignature("timeout", "Timeout", normalise(cmd.group(1)) if cmd else "")


_NOT_FOUND = re.compile(
    r"^(?:\S+: )?(?:line \d+: |\d+: )?([^\s:]+): (?:command )?not found\s*$", re.M
)
_PY_NO_MODULE = re.compile(r"^\S*python[\d.]*: No module named (\S+)\s*$", re.M)
_PY_NO_FILE = re.compile(r"^\S*python[\d.]*: can't open file '(.+?)'", re.M)
_NO_SUCH = re.compile(
    r"^([\w.-]+): (?:cannot (?:access|open) )?'?([^':\n]+?)'?: No such file", re.M
)
_TOOL_ERROR = re.compile(
    r"^(?:([\w.-]+): )?(?:\*+ )?(error|fatal|malformed patch)\b:? ?(.*)$", re.M
)


def _shell(text: str) -> ErrorSignature | None:
    """Errors reported by the shell and common tools (not by a Python traceback)."""
    m = _NOT_FOUND.search(text)
    if m:
        return ErrorSignature("shell", "command not found", m.group(1))
    m = _PY_NO_MODULE.search(text)
    if m:
        return ErrorSignature("shell", "ModuleNotFoundError", m.group(1).strip("'\""))
    m = _PY_NO_FILE.search(text)
    if m:
        return ErrorSignature("shell", "FileNotFoundError", short_path(m.group(1)), "python")
    m = _NO_SUCH.search(text)
    if m:
        return ErrorSignature("shell", "FileNotFoundError", short_path(m.group(2)), m.group(1))
    m = _TOOL_ERROR.search(text)
    if m:
        tool, level, rest = m.group(1) or "", m.group(2), m.group(3)
        return ErrorSignature("shell", level, "", tool, normalise(rest))
    return None


_PRINTED = re.compile(
    r"(?:^|[\s:(])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))(?: with [\w-]+)?: (\S.*)$", re.M
)
_CODE_LIKE = re.compile(r"^\s*\d+:|print\(|raise |except |f['\"]|\{e\}|expected", re.I)


def _printed(text: str) -> ErrorSignature | None:
    """An exception a script caught and printed (``Error: TypeError: ...``), not code showing
    one (file listings, ``raise``/``except``/``print(`` lines) nor one printed "as expected"."""
    for m in _PRINTED.finditer(text):
        line_start = text.rfind("\n", 0, m.end()) + 1
        if _CODE_LIKE.search(text[line_start : m.end()]):
            continue
        return _from_exception("printed", m.group(1), m.group(2), "")
    return None


_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_VEIL_FOOTER = re.compile(r"^\[exit code: (-?\d+)\]\s*\Z", re.M)
_NO_OUTPUT = re.compile(r"^\(no output\)$", re.M)
_OUTPUT = re.compile(r"<output>\n?(.*?)</output>", re.S)
_NOTEWORTHY = re.compile(
    r"\b(error|fatal|fail(?:ed|ure)?|denied|invalid|not found|cannot|can't|unable)\b", re.I
)


def _exit(body: str, code: int, command: str | None) -> ErrorSignature | None:
    """Fallback for a non-zero exit: the first line that says what went wrong, else the last."""
    program = last_program(command) if command else None
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    if not lines and code == 1 and program in SEARCH_PROGRAMS:
        return None  # grep found nothing: an answer, not an error
    line = next((ln for ln in lines if _NOTEWORTHY.search(ln)), lines[-1] if lines else "")
    return ErrorSignature("exit", f"exit {code}", program or "", "", normalise(line))


def exit_code_in(output: str) -> int | None:
    """The exit status written into a tool's output: mini-swe-agent's ``<returncode>N</returncode>``
    or veil's bash footer ``[exit code: N]`` on the last line; None when neither is there."""
    m = _RETURNCODE.search(output) or _VEIL_FOOTER.search(output.replace("\r\n", "\n"))
    return int(m.group(1)) if m else None


def parse_error(
    output: str, *, exit_code: int | None = None, command: str | None = None
) -> ErrorSignature | None:
    """Read a tool's output into an :class:`ErrorSignature`, or None when it holds no error.

    Args:
        output: the text the tool returned. mini-swe-agent's ``<returncode>``/``<output>`` tags
            and veil's bash footer (``(no output)``, a last line ``[exit code: N]``) are
            understood; their code is used when ``exit_code`` is None.
        exit_code: the process exit status when known (``ToolResult.meta["exit_code"]``).
        command: the shell command that produced the output; used to tell ``grep`` finding
            nothing (exit 1, no output: not an error) and to name the program in exit fallbacks.

    Returns:
        The signature, or None. Never raises on any string input.
    """
    text = _ANSI.sub("", output.replace("\r\n", "\n").replace("\r", "\n"))
    footer = _VEIL_FOOTER.search(text)  # veil's bash tool: "[exit code: N]" as the last line
    if footer:
        text = text[: footer.start()]
    if exit_code is None:
        m = _RETURNCODE.search(text)
        exit_code = int(m.group(1)) if m else (int(footer.group(1)) if footer else None)
    inner = _OUTPUT.search(text)
    body = inner.group(1) if inner else _NO_OUTPUT.sub("", _RETURNCODE.sub("", text))
    if exit_code == -1 and _STILL_RUNNING.search(text):
        return None  # OpenHands: a server still running, not a failure
    lines = text.splitlines()
    for reader in (_pytest, lambda t: _traceback(lines), _lint, _timeout, _shell, _printed):
        sig = reader(text)
        if sig is not None:
            return sig
    if exit_code:
        return _exit(body, exit_code, command)
    return None


def error_signature(
    output: str, *, exit_code: int | None = None, command: str | None = None
) -> dict[str, str]:
    """Describe the error in ``output`` (see :func:`parse_error` for the arguments).

    Returns:
        ``{"kind", "type", "symbol", "location", "message", "label", "fingerprint"}``, all
        strings; an empty dict when the output holds no error.
    """
    sig = parse_error(output, exit_code=exit_code, command=command)
    return sig.as_dict() if sig else {}


def fingerprint(
    output: str, *, exit_code: int | None = None, command: str | None = None
) -> str | None:
    """The 12-hex-character fingerprint of the error in ``output``, or None when there is none.

    Two outputs of the same failure (same type, failing symbol and location) get the same
    fingerprint even when line numbers, paths, temporary names, addresses, times, durations,
    counts or values in the message drift.
    """
    sig = parse_error(output, exit_code=exit_code, command=command)
    return sig.fingerprint if sig else None
