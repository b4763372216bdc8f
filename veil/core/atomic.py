"""Atomic file replacement: readers see the old file or the new one, never half of it.

Mechanism shared by the coding tools (``write`` / ``edit``) and plugins that keep files (the
memory-files plugin); :mod:`veil.core.safety.paths` removes the temporary files an interrupted write
leaves (``.<name>.<8 random characters>.tmp`` beside the target).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def _default_file_mode() -> int:
    """Permission bits a new file gets: 0o666 less the process umask (read without changing it)."""
    umask = 0o022
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                umask = int(line.split()[1], 8)
    return 0o666 & ~umask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace the file at ``path`` by ``data``: readers see the old or the new file, never half.

    Writes a temporary file in the same folder, fsyncs it, gives it the old file's permission bits
    (or the umask's for a new file), ``os.replace``s it over the target and fsyncs the folder. A
    symbolic link is followed: its target is replaced, the link stays. The parent folder must exist.

    Raises:
        OSError: the folder is not writable, the disk is full... (the temporary file is removed).
    """
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = _default_file_mode()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # durability of the rename; not every FS allows it
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
