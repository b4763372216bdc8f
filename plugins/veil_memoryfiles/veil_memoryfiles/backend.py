"""Where a project's memory files live: on disk under ``.veil/memory/`` (a SQLite store, the
default), or in the project's shared PostgreSQL store (``store.url``, issue 32), which every veil
process on every machine reads and writes.

Both places hold the same files with seed 000's exact semantics: the same paths
(``.veil/memory/agents/<name>/MEMORY.md`` names the row ``agents/<name>/MEMORY.md`` in the
store), the same statuses, the same ``maxLines`` / ``maxFileBytes`` archive (the decision is
:func:`veil_memoryfiles.store.plan_append`, written by either), the literal HTTP PUT, the same
provenance labels. Only how a write is kept safe differs:

* :class:`DiskFiles`: the file's lock (``<file>.lock``) around a read-modify-write, atomic
  replace (:mod:`.fileio`).
* :class:`StoreFiles`: no lock; the write is a compare-and-swap on the file's version in the
  database (:meth:`veil.core.shared_files.SharedFiles.commit`), retried from a fresh read when
  another writer changed the file first. The entry, the archive it pushes entries to and its
  provenance tag commit in one transaction. Two writers of one entry at once: the second reads
  the first one's entry as the last and answers ``skipped_duplicate``; the database, not a
  lock in a process, decides.

Provenance in a shared store: tags of what veil wrote are rows of the store
(:class:`StoreProvenance`), not ``.veil/memory-provenance``, and are made with a fixed key (a
repository cannot write the store's rows, so a keyed hash protects nothing more there). Text
that came in with ``veil memory import`` is trusted only where your own record vouches for it,
as on disk.

Each place is reached through the one :func:`files_for` picks; nothing else in the plugin opens
a memory file.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veil import MAX_ENTRY_BYTES, MAX_FILE_BYTES
from veil_memoryfiles import search, trust
from veil_memoryfiles.archive import archive_text_after
from veil_memoryfiles.entries import MemoryDocument, parse, utc_date
from veil_memoryfiles.errors import MemoryBusy
from veil_memoryfiles.fileio import file_lock, read_text
from veil_memoryfiles.paths import memory_root, validate_file_name
from veil_memoryfiles.provenance import FileTrust, Provenance
from veil_memoryfiles.store import (
    WriteResult,
    append_entry,
    decode_body,
    overwrite,
    plan_append,
    prepare_content,
)

if TYPE_CHECKING:  # pragma: no cover
    from veil import Config, SharedFiles

COMMIT_ATTEMPTS = 50
"""Reads and compare-and-swaps a write to a shared store tries before :class:`MemoryBusy` (each
retry follows a write by someone else that landed first, so 50 is far beyond real contention)."""

STORE_TAG_KEY = b"veil memory provenance in a shared store"
"""The key of provenance tags kept in a shared store (see the module docstring)."""


class DiskFiles:
    """Memory files under ``<project>/.veil/memory/``.

    Args:
        project_dir: the project root.
    """

    in_store = False
    """Whether the files are in a shared store (False: on disk)."""

    def __init__(self, project_dir: Path) -> None:
        self.project = Path(project_dir)

    @property
    def provenance(self) -> Provenance:
        """The record of what veil wrote (``.veil/memory-provenance``)."""
        return Provenance(self.project)

    def read_text(self, path: Path) -> str | None:
        """A file's text, or None when it does not exist (:func:`.fileio.read_text`)."""
        return read_text(path)

    def exists(self, path: Path) -> bool:
        """Whether the file exists (a symbolic link counts: reading it is then refused)."""
        return os.path.lexists(path)

    def view(self, path: Path) -> trust.FileView:
        """The file parsed, with which parts veil wrote (:func:`.trust.file_view`)."""
        return trust.file_view(self.project, path)

    def signature(self, path: Path) -> list[Any]:
        """``[path, mtime_ns, size, inode]``, or ``[path, None]`` when missing: changed by
        every write (veil replaces the file, or appends to it), cheap to read."""
        try:
            st = os.stat(path)
        except OSError:
            return [str(path), None]
        return [str(path), st.st_mtime_ns, st.st_size, st.st_ino]

    def index(self, path: Path) -> search.FileIndex:
        """The file's search index (:func:`.search.load_index`)."""
        return search.load_index(path)

    def archives(self, folder: Path) -> list[Path]:
        """A scope folder's ``archive-*.md`` files, oldest month first."""
        return search.archive_files(folder)

    def all_files(self) -> list[Path]:
        """Every memory file veil would have written: the global scope's files, then each
        agent's (``MEMORY.md`` and archives), sorted."""
        root = memory_root(self.project)
        found = []
        for folder in [root, *sorted(p for p in (root / "agents").glob("*") if p.is_dir())]:
            if folder.is_symlink():
                continue
            if (folder / "MEMORY.md").is_file():
                found.append(folder / "MEMORY.md")
            found.extend(self.archives(folder))
        return found

    def append_entry(
        self,
        path: Path,
        content: Any,
        *,
        max_lines: int,
        max_entry_bytes: int = MAX_ENTRY_BYTES,
        max_file_bytes: int = MAX_FILE_BYTES,
        now: datetime | None = None,
        skip_if_present: bool = False,
    ) -> WriteResult:
        """:func:`.store.append_entry` with this project's provenance."""
        return append_entry(
            path,
            content,
            max_lines=max_lines,
            max_entry_bytes=max_entry_bytes,
            max_file_bytes=max_file_bytes,
            now=now,
            provenance=self.provenance,
            skip_if_present=skip_if_present,
        )

    def overwrite(self, path: Path, data: bytes, *, trusted: bool = True) -> str:
        """Replace a file literally (HTTP PUT, ``veil memory import``): :func:`.store.overwrite`.
        ``trusted``: record the header and every entry as veil-written (PUT); False leaves them
        as the provenance record already says."""
        return overwrite(path, data, provenance=self.provenance if trusted else None)

    def trust_file(self, path: Path) -> int:
        """Record everything in the file now as veil-written; return how many parts (header,
        entries) were not yet (``veil memory trust``)."""
        if not os.path.lexists(path):
            return 0
        with file_lock(path):
            view = self.view(path)
            untrusted = (0 if view.trust.header else 1) + view.trust.entries.count(False)
            if untrusted:
                self.provenance.record_text(path, view.text)
            return untrusted


class StoreProvenance(Provenance):
    """Provenance of memory files in a shared store: tags in the store's ``memory_tags``, made
    with :data:`STORE_TAG_KEY` (see the module docstring).

    Args:
        project_dir: the project root (tags name a file's folder below ``.veil/memory``).
        shared: the project's :class:`~veil.core.shared_files.SharedFiles`.
    """

    def __init__(self, project_dir: Path, shared: SharedFiles) -> None:
        super().__init__(project_dir)
        self.shared = shared

    def signing_key(self, create: bool) -> bytes | None:
        return STORE_TAG_KEY

    def known_among(self, tags: list[str]) -> set[str]:
        return self.shared.known_tags(tags)

    def known(self) -> frozenset[str]:
        return frozenset()  # never read whole: known_among asks for the tags it needs

    def record(self, tags: Any) -> None:
        self.shared.add_tags(list(tags))


class StoreFiles:
    """Memory files in the project's shared PostgreSQL store.

    Args:
        project_dir: the project root (paths keep their ``.veil/memory/...`` form).
        shared: the project's :class:`~veil.core.shared_files.SharedFiles`.
    """

    in_store = True
    """Whether the files are in a shared store (True)."""

    def __init__(self, project_dir: Path, shared: SharedFiles) -> None:
        self.project = Path(project_dir)
        self.shared = shared
        self.root = Path(os.path.abspath(memory_root(self.project)))

    @property
    def provenance(self) -> StoreProvenance:
        """The record of what veil wrote, in the store."""
        return StoreProvenance(self.project, self.shared)

    def name_of(self, path: Path) -> str:
        """A file's name in the store: its path below ``.veil/memory``, ``/``-separated."""
        return Path(os.path.abspath(path)).relative_to(self.root).as_posix()

    def path_of(self, name: str) -> Path:
        """The ``.veil/memory/...`` path a stored file stands for."""
        return memory_root(self.project).joinpath(*name.split("/"))

    def read_text(self, path: Path) -> str | None:
        found = self.shared.read(self.name_of(path))
        return None if found is None else found.text

    def exists(self, path: Path) -> bool:
        return bool(self.shared.versions([self.name_of(path)]))

    def signature(self, path: Path) -> list[Any]:
        """``[name, version]`` (one indexed read; every write bumps the version), or
        ``[name, None]`` when the file is not stored."""
        name = self.name_of(path)
        return [name, self.shared.versions([name]).get(name)]

    def view(self, path: Path) -> trust.FileView:
        text = self.read_text(path) or ""
        doc = parse(text)
        return trust.FileView(Path(path), text, doc, self._trust(path, doc))

    def _trust(self, path: Path, doc: MemoryDocument) -> FileTrust:
        return self.provenance.trust_of(Path(path), doc)

    def index(self, path: Path) -> search.FileIndex:
        return search.index_text(Path(path), self.read_text(path) or "")

    def archives(self, folder: Path) -> list[Path]:
        prefix = self.name_of(Path(folder) / "x")[:-1]  # "" or "agents/<name>/"
        out = []
        for name in self.shared.names(prefix + "archive-"):
            rest = name[len(prefix) :]
            if "/" in rest or not rest.endswith(".md"):
                continue
            try:
                validate_file_name(rest)
            except Exception:  # noqa: BLE001 - a name veil would never write is not listed
                continue
            out.append(self.path_of(name))
        return out

    def all_files(self) -> list[Path]:
        out = []
        for name in self.shared.names(""):
            parts = name.split("/")
            if len(parts) == 1 or (len(parts) == 3 and parts[0] == "agents"):
                out.append(self.path_of(name))
        return out

    def append_entry(
        self,
        path: Path,
        content: Any,
        *,
        max_lines: int,
        max_entry_bytes: int = MAX_ENTRY_BYTES,
        max_file_bytes: int = MAX_FILE_BYTES,
        now: datetime | None = None,
        skip_if_present: bool = False,
    ) -> WriteResult:
        """:func:`.store.append_entry`'s rules on the stored file: read, plan, and commit the
        file, its archive and the entry's tag together if neither changed meanwhile; else read
        again.

        Raises:
            as :func:`.store.append_entry`; MemoryBusy: :data:`COMMIT_ATTEMPTS` writes by
            others landed first. StoreUnavailable: the server cannot be reached."""
        from veil import FileChange

        path = Path(path)
        trimmed = prepare_content(content, max_entry_bytes)
        if trimmed is None:
            return WriteResult(status="skipped_empty", path=path)
        day = utc_date(now)
        name = self.name_of(path)
        tags = self.provenance.entry_tags(path, day.isoformat(), trimmed)
        for _ in range(COMMIT_ATTEMPTS):
            current = self.shared.read(name)
            plan = plan_append(
                path,
                current.text if current else "",
                trimmed,
                day,
                max_lines=max_lines,
                max_file_bytes=max_file_bytes,
                skip_if_present=skip_if_present,
            )
            if isinstance(plan, WriteResult):
                return plan
            changes = [FileChange(name, plan.text, current.version if current else None)]
            if plan.moved:
                assert plan.result.archive_path is not None
                archive = self.name_of(plan.result.archive_path)
                before = self.shared.read(archive)
                changes.append(
                    FileChange(
                        archive,
                        archive_text_after(before.text if before else "", plan.moved),
                        before.version if before else None,
                    )
                )
            if self.shared.commit(changes, tags):
                return plan.result
        raise MemoryBusy(
            f"{name} in {self.shared.where}: {COMMIT_ATTEMPTS} other writes came first"
        )

    def overwrite(self, path: Path, data: bytes, *, trusted: bool = True) -> str:
        """Replace a stored file literally (HTTP PUT, ``veil memory import``), whatever it
        holds; ``trusted``: its header and entries are recorded as veil-written, in the same
        transaction.

        Raises:
            BadRequest: ``data`` is not UTF-8. MemoryBusy, StoreUnavailable."""
        from veil import FileChange

        text = decode_body(data)
        name = self.name_of(path)
        tags = self.provenance.text_tags(Path(path), text) if trusted else []
        for _ in range(COMMIT_ATTEMPTS):
            versions = self.shared.versions([name])
            if self.shared.commit([FileChange(name, text, versions.get(name))], tags):
                return text
        raise MemoryBusy(
            f"{name} in {self.shared.where}: {COMMIT_ATTEMPTS} other writes came first"
        )

    def trust_file(self, path: Path) -> int:
        view = self.view(path)
        untrusted = (0 if view.trust.header else 1) + view.trust.entries.count(False)
        if view.text and untrusted:
            self.provenance.record_text(Path(path), view.text)
        return untrusted if view.text else 0


MemoryFiles = DiskFiles | StoreFiles
"""Either place memory files live."""


def files_for(config: Config, veil: Any = None) -> DiskFiles | StoreFiles:
    """Where ``config``'s project keeps its memory files: in the shared store of ``veil`` (the
    open application) when it has one (:attr:`~veil.core.session_api.PluginVeil.shared_files`:
    a PostgreSQL store), else on disk."""
    shared = getattr(veil, "shared_files", None) if veil is not None else None
    if shared is not None:
        return StoreFiles(config.project_dir, shared)
    return DiskFiles(config.project_dir)
