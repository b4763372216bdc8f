"""Errors of the memory-files plugin (subclasses of the core's :class:`VeilError`, so front ends
map them like any other: ``{"error": {"code", "message"}}`` over HTTP, a clear line in the CLI)."""

from __future__ import annotations

from veil import BadRequest, VeilError


class MemoryFileNotFound(VeilError):  # noqa: N818 - named like the core's SessionNotFound
    """A memory file asked for by name does not exist (HTTP ``GET``: 404)."""

    code = "MEMORY_FILE_NOT_FOUND"
    http_status = 404


class MemoryFileInvalid(BadRequest):
    """A memory file on disk is not valid UTF-8, so it cannot be parsed or appended to safely.

    The message names the file and the byte offset of the first bad byte; fix it by hand or
    replace it with ``PUT /memory/{file}``.
    """

    code = "MEMORY_FILE_INVALID"
    http_status = 422


class MemoryBusy(VeilError):  # noqa: N818 - named like the core's SessionClosed
    """The cross-process lock of a memory file could not be taken within the timeout (seconds)."""

    code = "MEMORY_BUSY"
    http_status = 503


class MemoryLimitExceeded(BadRequest):
    """A write would exceed ``memory.maxEntryBytes`` or ``memory.maxFileBytes`` (bytes of UTF-8).

    The message names the limit, its value and the size asked for; nothing was written. HTTP
    answers 413 (the content is too large).
    """

    code = "MEMORY_LIMIT_EXCEEDED"
    http_status = 413
