"""Memory operations for one project, shared by the tools, ``/memory``, ``/remember``, the CLI and
``recall``: scope resolution, the ``enabled`` switch, and rendering of reads and searches.

Who may do what (seed 000, "Memory scopes" and "Configuring memory"):

* ``write``: only when memory is enabled for the agent (agent.json ``memory.enabled`` overriding
  settings.json). When it is disabled nothing is written and the status is ``disabled`` (a fourth
  status besides seed 000's three, which all assume memory is on); the pre-compaction extractor
  checks :meth:`veil.core.settings.Config.memory_enabled` the same way.
* ``read`` / ``search``: the agent's own scope always (seed: "Only that agent"); the global scope
  only while memory is enabled for the agent (seed: "All agents with memory enabled").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from veil.core.errors import BadRequest
from veil.core.settings import Config, validate_agent_name
from veil_memoryfiles.fileio import read_text
from veil_memoryfiles.paths import SCOPES, Scope, display_path, file_path, scope_dir, validate_scope
from veil_memoryfiles.search import SearchHit, archive_files, search_files
from veil_memoryfiles.store import WriteResult, append_entry

Status = Literal["written", "skipped_empty", "skipped_duplicate", "disabled"]


@dataclass
class MemoryWriteOutcome:
    """The answer of :meth:`MemoryService.write`, ready to show or to send as JSON.

    Attributes:
        status: ``written``, ``skipped_empty``, ``skipped_duplicate`` or ``disabled``.
        scope: the scope asked for; file: the file's path relative to the project.
        result: the store's detailed result (None when disabled).
    """

    status: Status
    scope: Scope
    file: str
    result: WriteResult | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields: status, scope, file, and for a write date / archived / archive."""
        out: dict[str, Any] = {"status": self.status, "scope": self.scope, "file": self.file}
        if self.status == "disabled":
            out["reason"] = "memory is disabled for this agent (memory.enabled is false)"
        r = self.result
        if r is not None and r.status == "written":
            out["date"] = r.date
            if r.archived:
                out["archived"] = r.archived
                out["archive"] = r.archive_path.name if r.archive_path else None
            if r.over_cap:
                out["over_cap"] = True
        return out


class MemoryService:
    """Memory files of one project as seen by one agent.

    Args:
        config: the project's configuration (root, memory settings, agent.json files).
        agent: the agent's name (validated: it becomes a folder name).

    Raises:
        UnsafePath: a bad agent name.
    """

    def __init__(self, config: Config, agent: str) -> None:
        self.config = config
        self.agent = validate_agent_name(agent)

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

    def max_lines(self, scope: Scope) -> int:
        """``maxLines`` of a scope's file: settings.json for every file, the agent's agent.json
        overriding it for that agent's own file (issue 4)."""
        if validate_scope(scope) == "agent":
            return self.config.memory_for(self.agent).max_lines
        return self.config.settings.memory.max_lines

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
        *,
        skip_if_present: bool = False,
    ) -> MemoryWriteOutcome:
        """Append ``content`` to a scope's MEMORY.md (seed 000 ``memory_write``).
        ``skip_if_present``: skip a fact the file already states anywhere (:mod:`.dedupe`),
        as status ``skipped_duplicate``.

        Raises:
            BadRequest / UnsafePath: bad ``content`` or ``scope``. MemoryBusy, MemoryFileInvalid.
        """
        scope = validate_scope(scope)
        path = self.path(scope)
        shown = display_path(self.project, path)
        if not self.enabled:
            return MemoryWriteOutcome("disabled", scope, shown)
        result = append_entry(
            path, content, max_lines=self.max_lines(scope), now=now, skip_if_present=skip_if_present
        )
        return MemoryWriteOutcome(result.status, scope, shown, result)

    def read(self, scope: str | None = None) -> str:
        """The raw text of the readable scopes' MEMORY.md files, each under a heading with its
        path; archives are listed by name. Says so when memory is disabled for global.

        Raises:
            UnsafePath: a bad scope. MemoryFileInvalid: a file is not UTF-8.
        """
        parts = []
        for sc in self.readable_scopes(scope):
            path = self.path(sc)
            text = read_text(path)
            head = f"# {sc} memory ({display_path(self.project, path)})"
            parts.append(f"{head}\n\n{text.rstrip() if text and text.strip() else '(empty)'}")
            archives = archive_files(scope_dir(self.project, sc, self.agent))
            if archives:
                names = ", ".join(p.name for p in archives)
                parts.append(f"Archived entries (search them with memory_search): {names}")
        if not self.enabled and scope in (None, "global"):
            parts.append(
                f"Global memory is not readable: memory is disabled for agent {self.agent!r}."
            )
        return "\n\n".join(parts)

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """BM25 search over the entries (and archives) of the readable scopes.

        Raises:
            BadRequest: ``query`` is not a non-empty string or ``limit`` not a positive integer.
            MemoryFileInvalid: a file is not UTF-8.
        """
        if not isinstance(query, str) or not query.strip():
            raise BadRequest("query: expected a non-empty string")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise BadRequest(f"limit: expected a positive integer, got {limit!r}")
        files: list[tuple[str, Path]] = []
        for sc in self.readable_scopes():
            folder = scope_dir(self.project, sc, self.agent)
            files.append((sc, self.path(sc)))
            files.extend((sc, p) for p in archive_files(folder))
        return search_files(files, query, limit)

    def hit_dict(self, hit: SearchHit) -> dict[str, Any]:
        """A search hit as JSON: scope, file (relative), date, content, score (rounded)."""
        return {
            "scope": hit.scope,
            "file": display_path(self.project, hit.path),
            "date": hit.date,
            "content": hit.content,
            "score": round(hit.score, 4),
        }

    def format_hits(self, query: str, hits: list[SearchHit]) -> str:
        """Search hits as text for the model or a terminal, best first, each entry whole."""
        if not hits:
            return f"No memory entry matches {query!r}."
        lines = [f"{len(hits)} memory entries match {query!r} (best first):"]
        for i, h in enumerate(hits, 1):
            when = h.date or "header"
            lines.append(
                f"\n[{i}] {display_path(self.project, h.path)} · {when} · score {h.score:.3f}\n"
                f"{h.content}"
            )
        return "\n".join(lines)


__all__ = ["SCOPES", "MemoryService", "MemoryWriteOutcome", "Status"]
