"""``veil replay --from AGENT``: find a project's own sessions where each agent keeps them.

* Claude Code: ``$CLAUDE_CONFIG_DIR`` (default ``~/.claude``) ``/projects/<project>/``, where
  ``<project>`` is the project's real path with every character other than an ASCII letter or
  digit replaced by ``-``; a name over 200 characters is cut there and ends with ``-`` and a
  base-36 hash of the path (Claude Code 2.1's ``projects`` folder naming). The sessions are the
  ``*.jsonl`` files in it, and the sub-agents' transcripts under ``<session>/subagents/``.
* Codex: ``$CODEX_HOME`` (default ``~/.codex``) ``/sessions/YYYY/MM/DD/rollout-*.jsonl`` whose
  first line, the ``session_meta``, names the project as its ``cwd``.
* pi: ``$PI_CODING_AGENT_DIR`` (default ``~/.pi/agent``) ``/sessions/--<path>--/*.jsonl``, the
  project's path without its leading ``/`` and with ``/``, ``\\`` and ``:`` replaced by ``-``
  (pi 0.73's ``getDefaultSessionDir``).

Files are returned sorted by path, so a run over them is the same run every time.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path

from veil import BadRequest

AGENTS = ("claude-code", "codex", "pi")
"""The agents ``--from`` knows."""

CLAUDE_NAME_LIMIT = 200
"""Longest Claude Code project folder name before it is cut and hashed (its ``rtt``)."""


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units, as a signed 32-bit int (Claude
    Code's hash of a long project path)."""
    value = 0
    units = text.encode("utf-16-le", "surrogatepass")
    for k in range(0, len(units), 2):
        value = (value * 31 + int.from_bytes(units[k : k + 2], "little")) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if number == 0:
            return out


def claude_project_folder(project: str) -> str:
    """The folder name Claude Code keeps ``project``'s sessions under (see the module
    docstring)."""
    name = re.sub(r"[^a-zA-Z0-9]", "-", project)
    if len(name) <= CLAUDE_NAME_LIMIT:
        return name
    return f"{name[:CLAUDE_NAME_LIMIT]}-{_base36(abs(_java_hash(project)))}"


def pi_project_folder(project: str) -> str:
    """The folder name pi keeps ``project``'s sessions under: ``--<path>--``."""
    return "--" + re.sub(r"[/\\:]", "-", re.sub(r"^[/\\]", "", project)) + "--"


def _real(project: str | Path) -> str:
    return unicodedata.normalize("NFC", os.path.realpath(project))


def _codex_cwd(path: Path) -> str | None:
    """The ``cwd`` of a rollout's ``session_meta`` (its first line), or None."""
    try:
        with path.open(encoding="utf-8") as f:
            first = f.readline()
        record = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    payload = record.get("payload") if isinstance(record, dict) else None
    if not isinstance(payload, dict) or record.get("type") != "session_meta":
        return None
    cwd = payload.get("cwd")
    return cwd if isinstance(cwd, str) else None


def find_sessions(
    agent: str, project: str | Path, env: Mapping[str, str] | None = None
) -> list[Path]:
    """The session logs ``agent`` wrote for ``project``.

    Args:
        agent: ``"claude-code"``, ``"codex"`` or ``"pi"``.
        project: the project folder (its real path is what the agents record).
        env: environment variables to read the agents' folders from (default
            ``os.environ``).

    Returns:
        The logs, sorted by path.

    Raises:
        BadRequest: ``agent`` is unknown, or no session of the project is where the agent
            keeps them (the message names the folder searched).
    """
    env = os.environ if env is None else env
    real = _real(project)
    if agent == "claude-code":
        base = Path(env.get("CLAUDE_CONFIG_DIR") or _home(env) / ".claude") / "projects"
        folder = base / claude_project_folder(real)
        found = sorted(folder.glob("*.jsonl")) + sorted(folder.glob("*/subagents/**/*.jsonl"))
        where = str(folder)
    elif agent == "codex":
        base = Path(env.get("CODEX_HOME") or _home(env) / ".codex") / "sessions"
        found = [
            p
            for p in sorted(base.glob("**/rollout-*.jsonl"))
            if (cwd := _codex_cwd(p)) is not None and _real(cwd) == real
        ]
        where = f"{base} (rollouts whose session_meta cwd is {real})"
    elif agent == "pi":
        agent_dir = env.get("PI_CODING_AGENT_DIR")
        base = Path(agent_dir).expanduser() if agent_dir else _home(env) / ".pi" / "agent"
        folder = base / "sessions" / pi_project_folder(real)
        found = sorted(folder.glob("*.jsonl"))
        where = str(folder)
    else:
        raise BadRequest(f"--from: unknown agent {agent!r}; known: {', '.join(AGENTS)}")
    found = [p for p in found if p.is_file()]
    if not found:
        raise BadRequest(f"--from {agent}: no session of {real} found in {where}")
    return found
