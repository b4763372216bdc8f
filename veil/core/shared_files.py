"""Text files a project keeps in its shared store instead of on disk: with a PostgreSQL store
(``store.url``) the MEMORY.md files and their archives live in the database, so every veil
process on every machine reads and writes the same ones (issue 32). With SQLite (the default)
there is none: the files stay under ``.veil/memory/``.

A plugin reaches it as ``veil.shared_files`` (:class:`~veil.core.session_api.PluginVeil`), or,
from a command that opens no :class:`~veil.core.app.Veil`, with :func:`open_shared_files`.

Writes are compare-and-swap: a writer reads a file (its text and version), works out the new
text, and :meth:`SharedFiles.commit` writes it only if no other writer changed it meanwhile (the
database checks the version, and its primary key settles two writers creating one file), else
nothing is written and the writer reads again. So concurrent writers on many machines lose
nothing and never both append the same entry, without a lock held between the read and the
write. Several files (a MEMORY.md and its archive) and provenance tags commit together.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from veil.core.errors import UnsafePath
from veil.core.store import memory_tables

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.settings import Config
    from veil.core.store import Store


@dataclass(frozen=True)
class SharedFile:
    """A file as stored.

    Attributes:
        name: its path below the memory folder, ``/``-separated (``agents/x/MEMORY.md``).
        text: its whole text. version: bumped by every write (1 after the first).
    """

    name: str
    text: str
    version: int


@dataclass(frozen=True)
class FileChange:
    """One file's new text, and the version the writer read (None: the file did not exist)."""

    name: str
    text: str
    read_version: int | None


def check_name(name: object) -> str:
    """Return ``name`` if it is a relative ``/``-separated path of plain parts.

    Raises:
        UnsafePath: empty, absolute, a ``.`` / ``..`` / empty part, a backslash or a control
            character."""
    if not isinstance(name, str) or not name or name.startswith("/"):
        raise UnsafePath(f"shared file name: expected a relative path, got {name!r}")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\\" in name:
        raise UnsafePath(f"shared file name {name!r}: a part is empty, '.' or '..'")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise UnsafePath(f"shared file name {name!r}: it holds a control character")
    return name


class _Refused(Exception):
    """A compare-and-swap found a file changed: roll the transaction back."""


class SharedFiles:
    """The text files of one project in a PostgreSQL store.

    Args:
        store: the project's open store (its engine must be PostgreSQL).
        owns_store: close ``store`` with :meth:`close` (:func:`open_shared_files` opens one).

    Raises:
        ValueError: ``store`` is not a PostgreSQL store.
    """

    def __init__(self, store: Store, *, owns_store: bool = False) -> None:
        if store.engine != "postgresql":
            raise ValueError("shared files live in a PostgreSQL store only")
        self._store = store
        self._owns = owns_store

    @property
    def where(self) -> str:
        """The store, for messages (its URL without the password, and the project)."""
        return self._store.path

    def read(self, name: str) -> SharedFile | None:
        """The file ``name``, or None when there is none.

        Raises:
            UnsafePath: a bad name. StoreUnavailable: the server cannot be reached."""
        found = memory_tables.read_file(self._store.reader, check_name(name))
        return None if found is None else SharedFile(name, found[0], found[1])

    def versions(self, names: Sequence[str]) -> dict[str, int]:
        """``{name: version}`` of those of ``names`` that exist (one round trip; no text)."""
        return memory_tables.file_versions(self._store.reader, [check_name(n) for n in names])

    def names(self, prefix: str = "") -> list[str]:
        """Names of the files whose name starts with ``prefix``, sorted."""
        return memory_tables.file_names(self._store.reader, prefix)

    def commit(self, changes: Sequence[FileChange], tags: Iterable[str] = ()) -> bool:
        """Write every change, and record ``tags``, in one transaction, if each file is still at
        the version its writer read; otherwise write nothing.

        Returns:
            True when written; False when another writer changed (or created) one of the
            files since it was read: read them again and retry.

        Raises:
            UnsafePath: a bad name. StoreUnavailable: the server cannot be reached."""
        for change in changes:
            check_name(change.name)
        now = time.time()
        try:
            with self._store.transaction() as conn:
                for change in changes:
                    if not memory_tables.put_file(
                        conn, change.name, change.text, change.read_version, now
                    ):
                        raise _Refused
                memory_tables.add_tags(conn, list(tags))
        except _Refused:
            return False
        return True

    def known_tags(self, tags: Iterable[str]) -> set[str]:
        """Those of ``tags`` on record (:meth:`add_tags`, :meth:`commit`)."""
        wanted = list(tags)
        return memory_tables.known_tags(self._store.reader, wanted) if wanted else set()

    def add_tags(self, tags: Iterable[str]) -> None:
        """Record ``tags`` (kept once each)."""
        wanted = list(tags)
        if wanted:
            with self._store.transaction() as conn:
                memory_tables.add_tags(conn, wanted)

    def close(self) -> None:
        """Close the store when this object opened it."""
        if self._owns:
            self._store.close()


def open_shared_files(config: Config) -> SharedFiles | None:
    """The shared files of ``config``'s project when it uses a PostgreSQL store (``store.url``),
    else None (SQLite: the files are on disk). Opens a store of its own (two connections at
    most): close it with :meth:`SharedFiles.close`.

    Raises:
        StoreUnavailable: the server cannot be reached. ConfigError: as :class:`Store`."""
    settings = config.settings.store
    if settings.url is None:
        return None
    from veil.core.store import Store

    store = Store(
        settings.url.get_secret_value(),
        project=settings.project_name(config.project_dir),
        pool_size=2,
        synchronous_commit=settings.synchronous_commit,
        write_behind=False,
    )
    return SharedFiles(store, owns_store=True)
