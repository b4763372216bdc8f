"""Low-level file access for memory files: UTF-8 always, atomic replace, a cross-process lock.

* Bytes on disk are UTF-8 whatever the locale: files are read and written as bytes and decoded /
  encoded explicitly (no ``open()`` text mode, so no newline translation either).
* Every write is atomic: the new bytes go to a temporary file in the same folder, which is
  flushed, ``fsync``-ed and moved over the target with :func:`os.replace`; the folder is then
  ``fsync``-ed. A crash leaves the old file or the new one, never half of one.
* Writers hold ``<file>.lock`` (:mod:`filelock`, ``flock`` on POSIX) around their whole
  read-modify-write, so concurrent writers in any number of processes lose nothing.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import filelock

from veil_memoryfiles.errors import MemoryBusy, MemoryFileInvalid

LOCK_TIMEOUT_S = 30.0
"""Seconds a writer waits for a file's lock before :class:`MemoryBusy` (an append takes ms)."""


def _read_umask() -> int:
    # os.umask can only be read by setting it; done once at import (before any writer thread),
    # since changing it later would race with files other threads create.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_read_umask()


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
        MemoryFileInvalid: the file is not UTF-8.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return decode(data, path)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable; not possible on every platform (Windows), hence best effort.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temp file in the same folder, fsync, rename).

    The folder is created if needed; an existing file's permission bits are kept (a new file gets
    0o666 minus the umask read at import, like ``open(path, "w")``). On any error the temporary
    file is removed and the old file is left as it was.

    Raises:
        OSError: the folder cannot be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = _NEW_FILE_MODE
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


@contextlib.contextmanager
def file_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the cross-process lock ``<path>.lock`` (created with its folder if needed).

    Not re-entrant across lock objects: never take the same file's lock twice in one thread.

    Raises:
        MemoryBusy: the lock was not free within ``timeout`` seconds.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(f"{path}.lock", timeout=timeout)
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
