"""Low-level file access for memory files: UTF-8 always, atomic replace, a cross-process lock.

* Bytes on disk are UTF-8 whatever the locale: files are read and written as bytes and decoded /
  encoded explicitly (no ``open()`` text mode, so no newline translation either).
* Every write is atomic: the new bytes go to a temporary file in the same folder, which is
  flushed, ``fsync``-ed and moved over the target with :func:`os.replace`; the folder is then
  ``fsync``-ed. A crash leaves the old file or the new one, never half of one.
* Writers hold ``<file>.lock`` (:mod:`filelock`, ``flock`` on POSIX) around their whole
  read-modify-write, so concurrent writers in any number of processes lose nothing.
* Nothing here follows a symbolic link (issue 17): the file, its lock and its folders up to
  ``.veil`` are checked (:func:`veil.core.safety.paths.checked`) before every open, files are read
  with ``O_NOFOLLOW``, and a write replaces a regular file only. A cloned repository's
  ``.veil/memory/MEMORY.md -> ~/.bashrc`` is refused with an error naming the link.
* Temporary files an interrupted write left beside the file (``.MEMORY.md.<random>.tmp``) are
  removed by the next write, under the file's lock (:func:`veil.core.safety.paths.remove_interrupted_temps`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import filelock

from veil import VEIL_DIR_NAME, read_bytes_nofollow, refuse_links, remove_interrupted_temps
from veil import atomic_write_bytes as core_atomic_write
from veil import checked_veil_path as checked
from veil_memoryfiles.errors import MemoryBusy, MemoryFileInvalid

LOCK_TIMEOUT_S = 30.0
"""Seconds a writer waits for a file's lock before :class:`MemoryBusy` (an append takes ms)."""


def check_path(path: Path) -> Path:
    """Refuse a symbolic link at ``path`` or on the folders above it up to the nearest ``.veil``
    (every memory file lives under ``<project>/.veil/memory``; a path outside any ``.veil``,
    as in unit tests, has its final component checked).

    Raises:
        UnsafeVeilPath: naming the link.
    """
    path = Path(path)
    absolute = Path(os.path.abspath(path))
    for parent in absolute.parents:
        if parent.name == VEIL_DIR_NAME:
            checked(parent, absolute)
            return path
    refuse_links(absolute)
    return path


def decode(data: bytes, path: Path) -> str:
    """Decode a memory file's bytes as UTF-8.

    Raises:
        MemoryFileInvalid: naming ``path`` and the offset of the first bad byte.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryFileInvalid(
            f"{path}: not valid UTF-8 (byte {exc.start}); fix it by hand or replace it"
        ) from exc


def read_text(path: Path) -> str | None:
    """The text of a memory file, or None when it does not exist (no lock: a reader sees the old
    or the new file thanks to the atomic replace).

    Raises:
        MemoryFileInvalid: the file is not UTF-8. UnsafeVeilPath: a symbolic link (the file or a
            folder on the way) or not a regular file.
    """
    data = read_bytes_nofollow(check_path(path))
    return None if data is None else decode(data, path)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (the core's temp file in the same folder, fsync,
    rename, folder fsync: :func:`veil.core.atomic.atomic_write_bytes`), creating the folder first.
    An existing file's permission bits are kept; a new file gets the umask's. The caller holds
    the file's lock: temporaries of interrupted writes of this file are removed first, those of
    other files in the folder when older than :data:`veil.core.safety.paths.STALE_TEMP_AGE_S`.

    Raises:
        UnsafeVeilPath: the file or a folder on the way is a symbolic link.
        OSError: the folder cannot be written (the old file is left as it was).
    """
    path = check_path(Path(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_interrupted_temps(path.parent, path.name)
    core_atomic_write(path, data)


@contextlib.contextmanager
def file_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the cross-process lock ``<path>.lock`` (created with its folder if needed).

    Not re-entrant across lock objects: never take the same file's lock twice in one thread.

    Raises:
        MemoryBusy: the lock was not free within ``timeout`` seconds.
        UnsafeVeilPath: the lock file (or the memory file, or a folder) is a symbolic link:
            older filelock versions open the lock with ``O_TRUNC`` through a link.
    """
    path = check_path(Path(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = check_path(path.with_name(f"{path.name}.lock"))
    lock = filelock.FileLock(str(lock_path), timeout=timeout)
    try:
        lock.acquire()
    except filelock.Timeout as exc:
        raise MemoryBusy(
            f"{path}: another writer holds {path.name}.lock for over {timeout} s"
        ) from exc
    try:
        yield
    finally:
        lock.release()
