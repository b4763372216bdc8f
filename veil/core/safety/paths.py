"""Containment of everything veil opens under a project's ``.veil/`` folder.

A cloned repository can ship ``.veil/`` with symbolic links in it (git stores links), e.g.
``.veil/memory/MEMORY.md -> ~/.bashrc`` or ``.veil/memory/MEMORY.md.lock -> ~/.ssh/authorized_keys``
(a lock file is opened with ``O_TRUNC``). Writes through such a link would land outside the
project, and reads would pull outside files into prompts and search results. So every path veil
opens under ``.veil/`` (memory files and archives, ``agents/<name>/agent.json``, ``settings.json``,
``auth.json``, ``context.db`` and its ``-wal`` / ``-shm`` / ``-journal``, lock files, temporary
files, the REPL history, ``.gitignore``) goes through :func:`checked` first:

* the path must lie lexically under ``.veil/``;
* no existing component from ``.veil`` itself down to the file may be a symbolic link (checked
  with ``lstat``, so a dangling link is caught too);
* the resolved path must still lie under the resolved ``.veil/``.

Anything else raises :class:`~veil.core.errors.UnsafeVeilPath` naming the path and the link.
Reads and appends here also open with ``O_NOFOLLOW`` and refuse anything but a regular file, so
the file itself cannot be swapped for a link between the check and the open. (A process that can
write into ``.veil/`` while veil runs could race the folder checks; it could as well edit the
files directly, so that is outside what this guards against.)

Interrupted atomic writes (:func:`veil.core.atomic.atomic_write_bytes` writes
``.<name>.<8 random characters>.tmp`` beside the target, then renames it) leave such temporary
files behind; :func:`remove_interrupted_temps` removes them at the next write to the folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from pathlib import Path

from veil.core.errors import UnsafeVeilPath

VEIL_DIR_NAME = ".veil"
"""The folder in a project that holds veil's files (settings, context.db, memory files)."""

TEMP_NAME_RE = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp$")
"""Names :func:`tempfile.mkstemp` gives with ``prefix=".<name>."`` and ``suffix=".tmp"`` (its
random part is 8 characters of ``[a-z0-9_]``, CPython's ``_RandomNameSequence``)."""

STALE_TEMP_AGE_S = 300.0
"""A temporary file of *another* target older than this (seconds) is an interrupted write: an
atomic write of a memory or settings file takes milliseconds. Temporaries of the target being
written are removed whatever their age, because its writer holds the target's lock."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO for reading must not hang


def veil_dir_of(project_dir: str | Path) -> Path:
    """``<project_dir>/.veil`` (not resolved, not checked)."""
    return Path(project_dir) / VEIL_DIR_NAME


def checked(veil_dir: str | Path, path: str | Path) -> Path:
    """Return ``path`` after checking that it stays inside ``veil_dir`` without symbolic links.

    Args:
        veil_dir: the project's ``.veil`` folder (need not exist yet).
        path: a path under it (need not exist yet; missing components are fine).

    Returns:
        ``path`` unchanged, as a :class:`~pathlib.Path`.

    Raises:
        UnsafeVeilPath: ``path`` is not under ``veil_dir``; ``veil_dir`` or a component below it
            is a symbolic link (message names the link and where it points); or the resolved
            path leaves the resolved ``veil_dir``.
    """
    base = Path(os.path.abspath(veil_dir))
    target = Path(os.path.abspath(path))
    try:
        rel = target.relative_to(base)
    except ValueError:
        raise UnsafeVeilPath(f"{path}: not inside {veil_dir}") from None
    current = base
    for part in (None, *rel.parts):
        if part is not None:
            current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            break  # created later by veil itself: nothing below can exist yet
        except NotADirectoryError:
            raise UnsafeVeilPath(f"{path}: {current.parent} is not a folder") from None
        if stat.S_ISLNK(st.st_mode):
            raise _link_error(path, current)
    root = base.resolve()
    resolved = target.resolve()
    if resolved != root and root not in resolved.parents:
        raise UnsafeVeilPath(f"{path} resolves to {resolved}, outside {root}")
    return Path(path)


def veil_file(project_dir: str | Path, *parts: str) -> Path:
    """``<project_dir>/.veil/<parts...>``, checked with :func:`checked`.

    Raises:
        UnsafeVeilPath: a symbolic link on the way, or a path leaving ``.veil/``.
    """
    folder = veil_dir_of(project_dir)
    return checked(folder, folder.joinpath(*parts))


def refuse_links(*paths: str | Path) -> None:
    """Check that none of ``paths`` is a symbolic link (a missing path is fine).

    For files opened by code that follows links itself (SQLite opens ``context.db`` and creates
    ``-wal`` / ``-shm`` / ``-journal`` beside it).

    Raises:
        UnsafeVeilPath: naming the first link found.
    """
    for path in paths:
        if os.path.islink(path):
            raise _link_error(path, Path(path))


def _link_error(path: str | Path, link: Path) -> UnsafeVeilPath:
    try:
        where = os.readlink(link)
    except OSError:
        where = "?"
    return UnsafeVeilPath(
        f"{path}: {link} is a symbolic link (to {where}); veil does not follow links inside "
        ".veil/ (a cloned repository could point them at files outside the project); "
        "replace it with a regular file or folder"
    )


def _open_nofollow(path: Path, flags: int, mode: int = 0o666) -> int:
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC, mode)
    except OSError as exc:
        # Linux gives ELOOP for a final link under O_NOFOLLOW; FreeBSD EMLINK; macOS ELOOP.
        if exc.errno in (errno.ELOOP, errno.EMLINK) or (
            exc.errno != errno.ENOENT and os.path.islink(path)
        ):
            raise _link_error(path, path) from None
        raise
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafeVeilPath(f"{path}: not a regular file")
    return fd


def read_bytes_nofollow(path: str | Path, offset: int = 0) -> bytes | None:
    """The bytes of a regular file from ``offset`` on, opened without following a final
    symbolic link.

    Returns:
        The content, or None when the file does not exist.

    Raises:
        UnsafeVeilPath: the file is a symbolic link or not a regular file (a FIFO, a folder...).
        OSError: it cannot be read.
    """
    path = Path(path)
    try:
        fd = _open_nofollow(path, os.O_RDONLY | _NONBLOCK)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if offset:
            handle.seek(offset)
        return handle.read()


def append_bytes_nofollow(path: str | Path, data: bytes, mode: int = 0o600) -> None:
    """Append ``data`` to a regular file (created with ``mode`` when missing), never through a
    symbolic link. One ``write`` call on an ``O_APPEND`` descriptor: concurrent appenders holding
    the same lock never interleave, and a crash leaves at most a partial last line.

    Raises:
        UnsafeVeilPath: the file is a symbolic link or not a regular file. OSError.
    """
    fd = _open_nofollow(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


def create_exclusive(path: str | Path, data: bytes, mode: int = 0o666) -> bool:
    """Create ``path`` holding ``data`` unless something (a file, a link) already has that name.

    Returns:
        True when created, False when the name was taken.

    Raises:
        OSError: the folder is not writable.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return True


def remove_interrupted_temps(
    folder: str | Path,
    target_name: str | None = None,
    *,
    min_age_s: float = STALE_TEMP_AGE_S,
    now: float | None = None,
) -> list[Path]:
    """Remove the temporary files interrupted atomic writes left in ``folder``.

    Args:
        folder: the folder about to be written to.
        target_name: the file being written, whose lock the caller holds: its temporaries are
            removed whatever their age (no other writer of that file can be running).
        min_age_s: temporaries of other files go only when older than this (seconds since their
            last change), so a concurrent writer of a sibling file keeps its own.
        now: the current time (``time.time()``; tests pass their own).

    Returns:
        The files removed. Links and non-files with a temporary's name are removed too (never
        followed). Errors (a file removed meanwhile, no permission) are ignored.
    """
    folder = Path(folder)
    now = time.time() if now is None else now
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = TEMP_NAME_RE.match(name)
        if not m:
            continue
        path = folder / name
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if m.group("name") != target_name and now - st.st_mtime < min_age_s:
            continue
        if stat.S_ISDIR(st.st_mode):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed.append(path)
    return removed


__all__ = [
    "STALE_TEMP_AGE_S",
    "TEMP_NAME_RE",
    "VEIL_DIR_NAME",
    "append_bytes_nofollow",
    "checked",
    "create_exclusive",
    "read_bytes_nofollow",
    "refuse_links",
    "remove_interrupted_temps",
    "veil_dir_of",
    "veil_file",
]
