"""Turn one tool call and its result into an :class:`~veil.core.types.Attempt`.

An attempt (seed 002) is what the agent did (tool, action), what it aimed at (target), how it
went (outcome) and the fingerprint of the error it produced. The same function serves the live
``capture`` hook and ``veil replay`` (which treats every recorded action as a shell command).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from veil import Attempt, ToolResult
from veil_convergence.commands import (
    SEARCH_PROGRAMS,
    command_target,
    is_read_only,
    last_program,
    strip_heredocs,
)
from veil_convergence.fingerprint import ErrorSignature, exit_code_in, parse_error

OUTCOMES = ("pass", "fail", "partial", "uncertain")

SHELL_TOOLS = frozenset({"bash", "shell", "sh", "execute_bash", "run", "terminal", "exec", "cmd"})
"""Tool names whose ``command`` argument is a shell command."""

READ_ONLY_TOOLS = frozenset(
    {"read", "read_file", "view", "cat", "ls", "list", "list_dir", "grep", "glob", "find", "search"}
)
"""Tools that only look: a success is ``uncertain`` (it neither passes nor fails the goal)."""

IGNORED_TOOL_PREFIXES = ("veil_", "memory_")
"""Memory tools act on veil itself, not on the goal: they are not attempts."""

_PATH_KEYS = ("path", "file_path", "file", "filename", "notebook_path", "target")
_PYTEST_COUNTS = re.compile(r"(\d+) (passed|failed|errors?)\b")
_PYTEST_TIME = re.compile(r"\bin \d+(?:\.\d+)?s\b")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)
_UNITTEST_FAILED = re.compile(r"^FAILED \((.*?)\)\s*$", re.M)
_SWE_FILE = re.compile(r"\[File: (.+?) \(\d+ lines total\)\]")
_MARKERS = re.compile(
    r"<returncode>-?\d+</returncode>|^\(no output\)$|^\[exit code: -?\d+\]$", re.M
)
ACTION_MAX_CHARS = 200


def count_tests(output: str) -> tuple[int, int] | None:
    """``(passed, failed_or_errored)`` from the last pytest summary line ("3 failed, 2 passed in
    0.12s") or a unittest report ("Ran 5 tests" ... "FAILED (failures=1, errors=1)"), else None."""
    for line in reversed(output.splitlines()):
        if _PYTEST_TIME.search(line):
            counts = {kind.rstrip("s"): int(n) for n, kind in _PYTEST_COUNTS.findall(line)}
            if counts:
                return counts.get("passed", 0), counts.get("failed", 0) + counts.get("error", 0)
    ran = _UNITTEST_RAN.findall(output)
    if ran:
        total = int(ran[-1])
        failed = _UNITTEST_FAILED.findall(output)
        bad = (
            sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", failed[-1]))
            if failed
            else 0
        )
        return total - bad, bad
    return None


def classify_outcome(
    output: str,
    *,
    signature: ErrorSignature | None,
    exit_code: int | None = None,
    declared: str | None = None,
    is_error: bool = False,
    command: str | None = None,
    read_only: bool = False,
) -> str:
    """Decide pass / fail / partial / uncertain for one tool result.

    The outcome a tool declares (``ToolResult.outcome``) is taken unless the output says more.
    In order:

    1. test counts in the output: some passed and some failed -> ``partial``, only failures ->
       ``fail``, only passes -> ``pass`` (a test run exits non-zero on any failure, so the
       exit status alone cannot tell a partial);
    2. a search program (``grep``...) that exited 1 with no output -> ``uncertain`` (no match);
    3. a declared ``partial``, ``uncertain`` or ``fail`` -> that;
    4. an error fingerprint, ``is_error`` or a non-zero exit -> ``fail``;
    5. a read-only action (``cat``, ``read``, ``ls``...) -> ``uncertain``: looking neither passes
       nor fails the goal, even when the tool declared ``pass``;
    6. otherwise ``pass``.

    Raises:
        ValueError: ``declared`` is not one of :data:`OUTCOMES`.
    """
    if declared is not None and declared not in OUTCOMES:
        raise ValueError(f"ToolResult.outcome: {declared!r} is not one of {OUTCOMES}")
    counts = count_tests(output)
    if counts is not None and (counts[0] or counts[1]):
        passed, failed = counts
        return "partial" if passed and failed else ("fail" if failed else "pass")
    quiet = not _output_body(output).strip()
    if exit_code == 1 and quiet and command and last_program(command) in SEARCH_PROGRAMS:
        return "uncertain"
    if declared in ("partial", "uncertain", "fail"):
        return declared
    if signature is not None or is_error or exit_code:
        return "fail"
    return "uncertain" if read_only else "pass"


def _output_body(output: str) -> str:
    """The command's own output: inside mini-swe-agent's ``<output>`` tag, or without the return
    code tag and veil's ``(no output)`` / ``[exit code: N]`` markers."""
    m = re.search(r"<output>(.*?)</output>", output, re.S)
    if m:
        return m.group(1)
    return _MARKERS.sub("", output)


def _exit_code(result: ToolResult) -> int | None:
    for key in ("exit_code", "returncode", "exitCode"):
        value = result.meta.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def relative_target(target: str | None, cwd: Path | None) -> str | None:
    """``target`` relative to the project root when it lies inside it; ``./`` dropped."""
    if not target:
        return None
    if cwd is not None and target.startswith("/"):
        try:
            target = str(Path(target).relative_to(cwd))
        except ValueError:
            pass
    return target[2:] if target.startswith("./") else target


def build_attempt(
    step: int,
    tool: str,
    arguments: dict[str, Any] | None,
    result: ToolResult,
    cwd: Path | None = None,
) -> tuple[Attempt, ErrorSignature | None] | None:
    """Build the attempt for one tool call and its result.

    Args:
        step: the step number; tool: the tool's name; arguments: its JSON arguments;
        result: what it returned; cwd: the project root (targets are made relative to it).

    Returns:
        ``(attempt, signature)`` (signature None when the result holds no error), or None for
        memory tools (:data:`IGNORED_TOOL_PREFIXES`), which are not attempts against the goal.

    A read-only action that succeeded gets no fingerprint, whatever the text it shows.
    Action: the shell command (heredoc bodies dropped, lines joined with ``; ``, at most
    :data:`ACTION_MAX_CHARS` characters) or ``tool path``. Target, first found: a path argument,
    ``result.meta["path"]``, the first failing test id in the output, a file or test named in the
    command, the file SWE-agent's viewer shows.
    """
    if tool.startswith(IGNORED_TOOL_PREFIXES):
        return None
    arguments = arguments or {}
    raw_command = (
        (arguments.get("command") or result.meta.get("command")) if tool in SHELL_TOOLS else None
    )
    command = raw_command if isinstance(raw_command, str) else None
    exit_code = _exit_code(result)
    if exit_code is None:
        exit_code = exit_code_in(result.content)
    signature = parse_error(result.content, exit_code=exit_code, command=command)

    path_arg = next((arguments[k] for k in _PATH_KEYS if isinstance(arguments.get(k), str)), None)
    target = path_arg or result.meta.get("path")
    if not target and signature is not None and signature.kind == "pytest":
        target = signature.symbol.split(" ", 1)[0]
    if not target and command:
        target = command_target(command)
    if not target:
        shown = _SWE_FILE.search(result.content)
        target = shown.group(1) if shown else None

    if command is not None:
        action = "; ".join(ln.strip() for ln in strip_heredocs(command).splitlines() if ln.strip())
        read_only = is_read_only(command)
    else:
        action = f"{tool} {path_arg}" if path_arg else tool
        read_only = tool in READ_ONLY_TOOLS
    if read_only and not exit_code and not result.is_error:
        signature = None  # reading a file or log that shows an error is not making one
    outcome = classify_outcome(
        result.content,
        signature=signature,
        exit_code=exit_code,
        declared=result.outcome,
        is_error=result.is_error,
        command=command,
        read_only=read_only,
    )
    attempt = Attempt(
        step=step,
        tool=tool,
        action=action[:ACTION_MAX_CHARS],
        target=relative_target(str(target) if target else None, cwd),
        outcome=outcome,
        fingerprint=signature.fingerprint if signature else None,
    )
    return attempt, signature
