"""Just enough shell-command reading for convergence: which programs a command runs, whether it
only looks at things, and which file or test it aims at.

This is deliberately shallow (no shell grammar): heredoc bodies are dropped, the command is split
on ``|``, ``&&``, ``||``, ``;`` and newlines, and the first word of each part (after ``cd``,
``env`` assignments, ``sudo``, ``timeout N``...) is taken as its program.
"""

from __future__ import annotations

import re
import shlex

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n.*?\n\s*\2\s*(?=\n|$)", re.S)
_ASSIGN = re.compile(r"^\w+=")
_PREFIXES = {"sudo", "env", "time", "nohup", "exec", "command", "builtin", "xargs", "nice"}
_SKIP = {"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "true", ":"}

SEARCH_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git-grep", "pgrep"})
"""Programs whose exit status 1 with no output means "no match", an answer rather than an error."""

READ_ONLY_PROGRAMS = frozenset(
    SEARCH_PROGRAMS
    | {
        "cat", "ls", "head", "tail", "less", "more", "find", "wc", "echo", "printf", "pwd",
        "which", "whereis", "type", "tree", "file", "stat", "du", "df", "nl", "awk", "cut", "sort",
        "uniq", "diff", "cmp", "realpath", "dirname", "basename", "env", "printenv", "date",
        "whoami", "hostname", "uname", "id", "column", "tr", "jq",
        # SWE-agent's file viewer commands
        "open", "goto", "scroll_up", "scroll_down", "search_file", "search_dir", "find_file",
    }
)  # fmt: skip
"""Programs that only inspect: a success tells nothing about the goal (outcome ``uncertain``)."""

_GIT_READ = {"status", "diff", "log", "show", "blame", "branch", "grep", "ls-files", "rev-parse"}
_FILE_TOKEN = re.compile(r"^[\w./<>-]*\w\.[A-Za-z][\w]{0,9}$|^[\w.-]+(?:/[\w.-]+)+$")
_TEST_ID = re.compile(r"[\w./-]+\.py::[\w:\[\]./-]+")


def strip_heredocs(command: str) -> str:
    """Return ``command`` without the bodies of its heredocs (``<<'EOF' ... EOF``)."""
    return _HEREDOC.sub("", command)


def _split_simple(command: str) -> list[str]:
    """Split on ``|``, ``||``, ``&&``, ``&``, ``;`` and newlines outside quotes."""
    parts, buf, quote, i = [], [], "", 0
    while i < len(command):
        ch = command[i]
        if ch == "\\" and quote != "'" and i + 1 < len(command):
            buf.append(command[i : i + 2])
            i += 2
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "|&;\n" and not _is_redirect_amp(command, i):
            parts.append("".join(buf))
            buf = []
            if command[i : i + 2] in ("||", "&&"):
                i += 1
            i += 1
            continue
        buf.append(ch)
        i += 1
    parts.append("".join(buf))
    return parts


def _is_redirect_amp(command: str, i: int) -> bool:
    """``&`` in ``2>&1``, ``>&2`` or ``&>file`` is part of a redirection, not an operator."""
    if command[i] != "&":
        return False
    before = command[i - 1] if i else ""
    after = command[i + 1] if i + 1 < len(command) else ""
    return before in ("<", ">") or after == ">"


def segments(command: str) -> list[list[str]]:
    """Split a shell command into simple commands, each a list of words (prefixes removed).

    ``"cd /testbed && python -m pytest x.py | tail -5"`` gives
    ``[["python", "-m", "pytest", "x.py"], ["tail", "-5"]]``. Unbalanced quotes fall back to
    whitespace splitting; never raises.
    """
    parts: list[list[str]] = []
    for raw in _split_simple(strip_heredocs(command)):
        raw = raw.strip()
        if not raw:
            continue
        try:
            words = shlex.split(raw, comments=True)
        except ValueError:
            words = raw.split()
        while words and (_ASSIGN.match(words[0]) or words[0] in _PREFIXES or words[0] == "timeout"):
            words = words[2:] if words[0] == "timeout" else words[1:]  # timeout DURATION CMD
        if words and words[0] not in _SKIP:
            parts.append(words)
    return parts


def programs(command: str) -> list[str]:
    """Names (basenames) of the programs ``command`` runs, in order; ``python -m X`` counts as X."""
    names = []
    for words in segments(command):
        name = words[0].rsplit("/", 1)[-1]
        if re.fullmatch(r"python[\d.]*", name) and len(words) > 2 and words[1] == "-m":
            name = words[2]
        names.append(name)
    return names


def last_program(command: str) -> str | None:
    """The program whose exit status a pipeline reports (the last one), or None."""
    names = programs(command)
    return names[-1] if names else None


def is_read_only(command: str) -> bool:
    """True when every program in ``command`` only inspects (``cat``, ``grep``, ``git diff``...)
    and nothing is written through a redirection (``>``, ``>>``, ``tee``, ``sed -i``)."""
    segs = segments(command)
    if not segs:
        return False
    for words in segs:
        if _writes(words):
            return False
        name = words[0].rsplit("/", 1)[-1]
        if name == "tee" or (name == "sed" and any(w.startswith("-i") for w in words)):
            return False
        if name == "git" and len(words) > 1 and words[1] in _GIT_READ:
            continue
        if name == "sed" and "-n" in words:
            continue
        if name not in READ_ONLY_PROGRAMS:
            return False
    return True


_REDIRECT = re.compile(r"^(?:\d|&)?>>?(?!&)(.*)$")


def _writes(words: list[str]) -> bool:
    """True when a word redirects output into a file (``>`` ``x``, ``>>x``, ``2>err``), not
    into ``/dev/null`` or another descriptor (``2>&1``)."""
    for i, word in enumerate(words):
        m = _REDIRECT.match(word)
        if not m:
            continue
        target = m.group(1) or (words[i + 1] if i + 1 < len(words) else "")
        if target and target != "/dev/null" and not target.startswith("&"):
            return True
    return False


def command_target(command: str) -> str | None:
    """The file or test a command aims at: the first pytest node id (``path.py::test``), else the
    first file-like argument of the first program that is not a pure viewer, else of any program.
    Returns None when nothing looks like a file."""
    body = strip_heredocs(command)
    test = _TEST_ID.search(body)
    if test:
        return test.group(0)
    segs = segments(command)
    ordered = [w for w in segs if w[0].rsplit("/", 1)[-1] not in READ_ONLY_PROGRAMS] + segs
    for words in ordered:
        if len(words) > 1 and words[1] == "-c" and re.fullmatch(r"python[\d.]*", words[0]):
            continue  # python -c CODE: the code is no target
        for word in words[1:]:
            if word.startswith("-") or word.startswith("<"):
                continue
            if _FILE_TOKEN.match(word):
                return word.rstrip("/")
    return None
