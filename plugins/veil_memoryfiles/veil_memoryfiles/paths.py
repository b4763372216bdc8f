"""Where memory files live, and which names are allowed (seed 000, "Memory scopes").

Layout under the project root::

    .veil/memory/MEMORY.md                      global scope (every agent with memory enabled)
    .veil/memory/archive-YYYY-MM.md             entries the global file moved out (maxLines)
    .veil/memory/agents/<name>/MEMORY.md        agent scope (only that agent)
    .veil/memory/agents/<name>/archive-YYYY-MM.md

Every path handed out here is checked to stay inside ``.veil/memory/``: agent names go through
the core's :func:`~veil.core.settings.validate_agent_name`, file names through
:func:`validate_file_name`, and the path goes through the core's containment check
(:func:`veil.core.safety.paths.checked`): no symbolic link from ``.veil`` down to the file (the
``memory`` and ``agents/<name>`` folders included), and the resolved path under ``.veil/``.
:mod:`.fileio` checks again, with ``O_NOFOLLOW``, when it opens a file, its lock or its archive.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Literal

from veil import UnsafePath, validate_agent_name, veil_dir_of
from veil import checked_veil_path as checked

Scope = Literal["agent", "global"]
SCOPES: tuple[Scope, ...] = ("agent", "global")
MEMORY_FILE = "MEMORY.md"
MAX_NAME_BYTES = 255  # the usual file-name limit of Linux, macOS and Windows file systems


def memory_root(project_dir: Path) -> Path:
    """``<project>/.veil/memory``: the folder every memory file must stay in."""
    return veil_dir_of(project_dir) / "memory"


def validate_scope(scope: object) -> Scope:
    """Return ``scope`` if it is ``"agent"`` or ``"global"``.

    Raises:
        UnsafePath: (a :class:`~veil.core.errors.BadRequest`) naming the field ``scope``.
    """
    if scope not in SCOPES:
        raise UnsafePath(f"scope: expected 'agent' or 'global', got {scope!r}")
    return scope  # type: ignore[return-value]


def validate_file_name(name: object) -> str:
    """Return ``name`` if it is a plain Markdown file name such as ``MEMORY.md``.

    Allowed: one path component ending in ``.md`` (any letters, CJK included), at most 255 bytes
    in UTF-8, not starting with ``.`` (temporary files and locks are dot-files or ``.lock``).

    Raises:
        UnsafePath: the name is empty, ``.``/``..``, absolute, holds ``/``, ``\\``, ``:``, NUL or
            another control character, starts with ``.``, or does not end in ``.md``.
    """
    if not isinstance(name, str) or not name:
        raise UnsafePath(f"file name: expected a non-empty string, got {name!r}")
    why = None
    if "\x00" in name:
        why = "it holds a NUL character"
    elif any(ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029" for c in name):
        why = "it holds a control character or a line separator"
    elif "/" in name or "\\" in name or ":" in name:
        why = "it holds a path separator or drive letter"
    elif PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute():
        why = "it is an absolute path"
    elif name in (".", "..") or name.startswith("."):
        why = "it starts with '.'"
    elif not name.lower().endswith(".md"):
        why = "only Markdown files (*.md) live in .veil/memory/"
    elif len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        why = f"it is longer than {MAX_NAME_BYTES} bytes"
    if why:
        raise UnsafePath(f"file name {name!r} is not allowed: {why}")
    return name


def scope_dir(project_dir: Path, scope: Scope, agent: str) -> Path:
    """Folder of a scope: ``.veil/memory`` (global) or ``.veil/memory/agents/<agent>`` (agent).

    Raises:
        UnsafePath: a bad scope or agent name.
    """
    validate_scope(scope)
    root = memory_root(project_dir)
    if scope == "global":
        return root
    return root / "agents" / validate_agent_name(agent)


def contained(project_dir: Path, path: Path) -> Path:
    """Return ``path`` after checking that it lies under ``.veil/memory/`` with no symbolic link
    on the way (:func:`veil.core.safety.paths.checked`).

    Raises:
        UnsafePath: the path is not under ``.veil/memory/``. UnsafeVeilPath (an UnsafePath): a
            symbolic link from ``.veil`` down to ``path``, or a path resolving outside ``.veil/``.
    """
    root = Path(os.path.abspath(memory_root(project_dir)))
    target = Path(os.path.abspath(path))
    if target != root and root not in target.parents:
        raise UnsafePath(f"{path}: outside {memory_root(project_dir)}")
    checked(veil_dir_of(project_dir), path)
    return path


def file_path(project_dir: Path, scope: Scope, agent: str, name: str = MEMORY_FILE) -> Path:
    """Path of file ``name`` in a scope's folder, validated and contained.

    Raises:
        UnsafePath: a bad scope, agent name or file name, or a symlink escaping the memory root.
    """
    folder = scope_dir(project_dir, scope, agent)
    return contained(project_dir, folder / validate_file_name(name))


def display_path(project_dir: Path, path: Path) -> str:
    """``path`` relative to the project root in ``/`` form (``.veil/memory/MEMORY.md``), for
    messages and search results; the absolute path when it lies elsewhere."""
    try:
        return Path(path).relative_to(project_dir).as_posix()
    except ValueError:
        return str(path)
