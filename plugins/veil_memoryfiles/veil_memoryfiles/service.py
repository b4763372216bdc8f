"""Memory operations for one project, shared by the tools, ``/memory``, ``/remember``, the CLI and
``recall``: scope resolution, the ``enabled`` switch, and rendering of reads and searches.

Who may do what (seed 000, "Memory scopes" and "Configuring memory"):

* ``write``: only when memory is enabled for the agent (agent.json ``memory.enabled`` overriding
  settings.json). When it is disabled nothing is written and the status is ``disabled`` (a fourth
  status besides seed 000's three, which all assume memory is on); the pre-compaction extractor
  checks :meth:`veil.core.settings.Config.memory_enabled` the same way.
* ``read`` / ``search``: the agent's own scope always (seed: "Only that agent"); the global scope
  only while memory is enabled for the agent (seed: "All agents with memory enabled").

Provenance (issue 17, :mod:`.provenance`, :mod:`.trust`): every write records what veil wrote;
reads for the model quote what veil did not write under a "repository-provided" label, search
hits say which they are, and a write from the model (``origin="agent"``: ``memory_write``, the
extractor) that copies repository-provided text is not written: status ``skipped_untrusted``.
Writes typed by the user (``/remember``, ``veil memory write``) are theirs to make.

Bounds (issue 17): ``memory.maxEntryBytes`` refuses a larger entry (:class:`MemoryLimitExceeded`,
nothing written); ``memory.maxFileBytes`` archives like ``maxLines``. Both are read like
``maxLines``: settings.json for every file, the agent's agent.json for its own file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from veil import BadRequest, Config, MemorySettings, validate_agent_name
from veil_memoryfiles.backend import DiskFiles, StoreFiles
from veil_memoryfiles.injection import instruction_file_paths
from veil_memoryfiles.paths import SCOPES, Scope, display_path, file_path, scope_dir, validate_scope
from veil_memoryfiles.provenance import Provenance
from veil_memoryfiles.search import SearchHit, search_page
from veil_memoryfiles.store import WriteResult, check_entry_size, is_empty
from veil_memoryfiles.trust import (
    REPOSITORY_LABEL,
    FileView,
    Unit,
    annotated,
    find_copy,
    quote,
    units_of_text,
    untrusted_units,
)

Status = Literal["written", "skipped_empty", "skipped_duplicate", "skipped_untrusted", "disabled"]
Origin = Literal["user", "agent"]


@dataclass
class MemoryWriteOutcome:
    """The answer of :meth:`MemoryService.write`, ready to show or to send as JSON.

    Attributes:
        status: ``written``, ``skipped_empty``, ``skipped_duplicate``, ``skipped_untrusted``
            (the model's text repeats repository-provided text) or ``disabled``.
        scope: the scope asked for; file: the file's path relative to the project.
        result: the store's detailed result (None when disabled or skipped_untrusted).
        copied_from: for ``skipped_untrusted``, where the repeated text stands.
        redacted: credentials in the content were replaced by ``[redacted:NAME]`` before the
            write (:mod:`veil.core.safety.redaction`).
    """

    status: Status
    scope: Scope
    file: str
    result: WriteResult | None = None
    copied_from: str | None = None
    redacted: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields: status, scope, file, and for a write date / archived / archive."""
        out: dict[str, Any] = {"status": self.status, "scope": self.scope, "file": self.file}
        if self.status == "disabled":
            out["reason"] = "memory is disabled for this agent (memory.enabled is false)"
        if self.status == "skipped_untrusted":
            out["reason"] = (
                f"the content repeats repository-provided text ({self.copied_from}) that this "
                "agent did not write; it stays where it is, labelled, and is not copied into "
                "memory"
            )
        r = self.result
        if r is not None and r.status == "written":
            out["date"] = r.date
            if r.archived:
                out["archived"] = r.archived
                out["archive"] = r.archive_path.name if r.archive_path else None
            if r.over_cap:
                out["over_cap"] = True
        if self.redacted:
            out["redacted"] = True
        return out


class MemoryService:
    """Memory files of one project as seen by one agent.

    Args:
        config: the project's configuration (root, memory settings, agent.json files).
        agent: the agent's name (validated: it becomes a folder name).
        files: where the files live (:func:`veil_memoryfiles.backend.files_for`; default: on
            disk under ``.veil/memory/``).

    Raises:
        UnsafePath: a bad agent name.
    """

    def __init__(
        self, config: Config, agent: str, files: DiskFiles | StoreFiles | None = None
    ) -> None:
        self.config = config
        self.agent = validate_agent_name(agent)
        self.files = files if files is not None else DiskFiles(config.project_dir)
        self._units: list[Unit] | None = None

    @property
    def project(self) -> Path:
        """The project root."""
        return self.config.project_dir

    @property
    def enabled(self) -> bool:
        """Whether memory is enabled for the agent (agent.json over settings.json)."""
        return self.config.memory_enabled(self.agent)

    def path(self, scope: Scope) -> Path:
        """The MEMORY.md of ``scope`` for this agent."""
        return file_path(self.project, validate_scope(scope), self.agent)

    @property
    def provenance(self) -> Provenance:
        """The record of what veil wrote to this project's memory files."""
        return self.files.provenance

    def limits(self, scope: Scope) -> MemorySettings:
        """Memory settings that bound a scope's file (``maxLines``, ``maxEntryBytes``,
        ``maxFileBytes``): settings.json for every file, the agent's agent.json overriding them
        for that agent's own file (issue 4)."""
        if validate_scope(scope) == "agent":
            return self.config.memory_for(self.agent)
        return self.config.settings.memory

    def max_lines(self, scope: Scope) -> int:
        """``maxLines`` of a scope's file (see :meth:`limits`)."""
        return self.limits(scope).max_lines

    def readable_scopes(self, scope: str | None = None) -> list[Scope]:
        """Scopes this agent may read, narrowed to ``scope`` when given (see module docstring).

        Raises:
            UnsafePath: ``scope`` is not None, ``"agent"`` or ``"global"``.
        """
        allowed: list[Scope] = ["agent", "global"] if self.enabled else ["agent"]
        if scope is None:
            return allowed
        wanted = validate_scope(scope)
        return [wanted] if wanted in allowed else []

    def write(
        self,
        content: Any,
        scope: Any = "agent",
        now: datetime | None = None,
        origin: Origin = "user",
        skip_if_present: bool = False,
    ) -> MemoryWriteOutcome:
        """Append ``content`` to a scope's MEMORY.md (seed 000 ``memory_write``), recording that
        veil wrote it.

        Args:
            content: the text (see :func:`~veil_memoryfiles.store.append_entry`).
            scope: ``agent`` or ``global``.
            now: time of the write (tests).
            origin: ``agent`` for text from the model (``memory_write``, the extractor): it is
                refused (``skipped_untrusted``) when it copies repository-provided text
                (:func:`veil_memoryfiles.trust.find_copy`); ``user`` for text the user typed.
            skip_if_present: skip a fact the file already states anywhere (:mod:`.dedupe`),
                as status ``skipped_duplicate`` (the pre-compaction extractor sets it).

        Every write of an entry comes here (the tool, ``/remember``, ``veil memory write``,
        pre-compaction extraction): credentials in ``content`` are replaced by
        ``[redacted:NAME]`` first (:mod:`veil.core.safety.redaction`, ``security.redactSecrets``), so
        a memory file, which teams commit, never receives one from veil. The guards then see
        the redacted text.

        Raises:
            BadRequest / UnsafePath: bad ``content`` or ``scope``. MemoryLimitExceeded: over
            ``maxEntryBytes``, or over ``maxFileBytes`` with nothing left to archive.
            MemoryBusy, MemoryFileInvalid, UnsafeVeilPath.
        """
        scope = validate_scope(scope)
        path = self.path(scope)
        shown = display_path(self.project, path)
        if not self.enabled:
            return MemoryWriteOutcome("disabled", scope, shown)
        clean = self.config.redactor.text(content) if isinstance(content, str) else content
        redacted = clean is not content
        limits = self.limits(scope)
        if origin == "agent" and isinstance(clean, str) and not is_empty(clean):
            check_entry_size(clean.strip(), limits.max_entry_bytes)  # before reading files
            if self._units is None:  # veil's own writes add no untrusted text: compute once
                self._units = self.untrusted_units()
            copied = find_copy(clean, self._units)
            if copied is not None:
                return MemoryWriteOutcome(
                    "skipped_untrusted", scope, shown, copied_from=copied.where, redacted=redacted
                )
        result = self.files.append_entry(
            path,
            clean,
            max_lines=limits.max_lines,
            max_entry_bytes=limits.max_entry_bytes,
            max_file_bytes=limits.max_file_bytes,
            now=now,
            skip_if_present=skip_if_present,
        )
        return MemoryWriteOutcome(result.status, scope, shown, result, redacted=redacted)

    # -- reading ----------------------------------------------------------------------------------

    def files_of(self, scope: Scope, archives: bool = False) -> list[Path]:
        """A scope's MEMORY.md, then (``archives``) its ``archive-*.md`` files, oldest first."""
        out = [self.path(scope)]
        if archives:
            out.extend(self.files.archives(scope_dir(self.project, scope, self.agent)))
        return out

    def view(self, path: Path) -> FileView:
        """A memory file parsed, with which parts veil wrote (:func:`.trust.file_view`)."""
        return self.files.view(path)

    def untrusted_units(self, instructions: bool = True) -> list[Unit]:
        """Repository-provided text the agent can see: the parts of the readable scopes' files
        (archives included) veil did not write, and (``instructions``) every line of the
        instruction files (AGENTS.md, CLAUDE.md...)."""
        views = [
            (display_path(self.project, p), self.view(p))
            for sc in self.readable_scopes()
            for p in self.files_of(sc, archives=True)
        ]
        units = untrusted_units(views)
        if instructions:
            names = list(self.config.memory_for(self.agent).instruction_files)
            for path in instruction_file_paths(self.project, names):
                try:
                    text = path.read_bytes().decode("utf-8", errors="replace")
                except OSError:
                    continue
                units.extend(units_of_text(display_path(self.project.resolve(), path), text))
        return units

    def read(self, scope: str | None = None, annotate: bool = False) -> str:
        """The text of the readable scopes' MEMORY.md files, each under a heading with its path;
        archives are listed by name. Says so when memory is disabled for global.

        Args:
            scope: one scope, or None for both.
            annotate: for the model: text veil did not write is quoted under a
                ``[repository-provided: ...]`` line (:func:`.trust.annotated`). Without it, the
                files' raw text (what a user sees with ``veil memory show``).

        Raises:
            UnsafePath: a bad scope. MemoryFileInvalid: a file is not UTF-8. UnsafeVeilPath: a
            symbolic link on the way.
        """
        parts = []
        for sc in self.readable_scopes(scope):
            path = self.path(sc)
            if annotate:
                text = annotated(self.view(path))
            else:
                text = (self.files.read_text(path) or "").rstrip()
            head = f"# {sc} memory ({display_path(self.project, path)})"
            parts.append(f"{head}\n\n{text if text.strip() else '(empty)'}")
            archives = self.files.archives(scope_dir(self.project, sc, self.agent))
            if archives:
                names = ", ".join(p.name for p in archives)
                parts.append(f"Archived entries (search them with memory_search): {names}")
        if not self.enabled and scope in (None, "global"):
            parts.append(
                f"Global memory is not readable: memory is disabled for agent {self.agent!r}."
            )
        return "\n\n".join(parts)

    def search(self, query: str, limit: int = 10, offset: int = 0) -> list[SearchHit]:
        """BM25 search over the entries (and archives) of the readable scopes.

        Args:
            query: keywords. limit: hits to return (>= 1). offset: best hits to skip (>= 0).

        Raises:
            BadRequest: ``query`` is not a non-empty string, ``limit`` not a positive integer or
            ``offset`` a negative one. MemoryFileInvalid: a file is not UTF-8.
            UnsafeVeilPath: a symbolic link among the files.
        """
        return self.search_page(query, limit, offset)[0]

    def search_page(
        self, query: str, limit: int = 10, offset: int = 0
    ) -> tuple[list[SearchHit], int]:
        """:meth:`search` and the number of entries that match at all (for paging).

        Raises:
            as :meth:`search`.
        """
        if not isinstance(query, str) or not query.strip():
            raise BadRequest("query: expected a non-empty string")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise BadRequest(f"limit: expected a positive integer, got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise BadRequest(f"offset: expected an integer >= 0, got {offset!r}")
        files = [(sc, p) for sc in self.readable_scopes() for p in self.files_of(sc, archives=True)]
        return search_page(files, query, limit, offset, load=self.files.index)

    def hit_trusted(self, hit: SearchHit) -> bool:
        """Whether veil wrote the entry (or header) a hit comes from."""
        trust = self.view(hit.path).trust
        if hit.position < 0:
            return trust.header
        return hit.position < len(trust.entries) and trust.entries[hit.position]

    def hit_dict(self, hit: SearchHit) -> dict[str, Any]:
        """A search hit as JSON: scope, file (relative), date, content, score (rounded), and
        ``provenance``: ``agent`` (veil wrote it) or ``repository`` (it did not)."""
        return {
            "scope": hit.scope,
            "file": display_path(self.project, hit.path),
            "date": hit.date,
            "content": hit.content,
            "score": round(hit.score, 4),
            "provenance": "agent" if self.hit_trusted(hit) else "repository",
        }

    def format_hit(self, number: int, hit: SearchHit) -> str:
        """One hit as text: number, file, date, score, provenance, then the entry whole (quoted
        under the repository label when veil did not write it)."""
        when = hit.date or "header"
        head = f"[{number}] {display_path(self.project, hit.path)} · {when} · score {hit.score:.3f}"
        if self.hit_trusted(hit):
            return f"{head}\n{hit.content}"
        return f"{head} · [{REPOSITORY_LABEL}]\n{quote(hit.content)}"

    def format_hits(self, query: str, hits: list[SearchHit], offset: int = 0) -> str:
        """Search hits as text for the model or a terminal, best first, each entry whole."""
        if not hits:
            return f"No memory entry matches {query!r}."
        lines = [f"{len(hits)} memory entries match {query!r} (best first):"]
        for i, h in enumerate(hits, offset + 1):
            lines.append("\n" + self.format_hit(i, h))
        return "\n".join(lines)

    # -- vouching ---------------------------------------------------------------------------------

    def trust(self, scope: str | None = None) -> list[tuple[str, int]]:
        """Record everything now in the readable scopes' files (archives included) as written by
        veil: the user has read it and vouches for it (``veil memory trust``).

        Returns:
            ``(file, parts)`` for each file that had parts veil had not written, ``parts``
            counting the header and the entries newly trusted.

        Raises:
            UnsafePath: a bad scope. MemoryFileInvalid, MemoryBusy, UnsafeVeilPath.
        """
        done = []
        for sc in self.readable_scopes(scope):
            for path in self.files_of(sc, archives=True):
                untrusted = self.files.trust_file(path)
                if untrusted:
                    done.append((display_path(self.project, path), untrusted))
        return done


__all__ = ["SCOPES", "MemoryService", "MemoryWriteOutcome", "Status"]
