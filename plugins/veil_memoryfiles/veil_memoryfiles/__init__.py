"""veil_memoryfiles: MEMORY.md files (seed 000 "Persistent Memory"), as a veil plugin.

Hooks implemented (veil/hookspecs.py): ``register_tools`` (memory_write, memory_read,
memory_search), ``register_routes`` (GET/PUT memory files), ``register_slash_commands``
(/memory, /remember), ``register_commands`` (``veil memory ...``), ``before_compaction`` (the
memory extractor), ``system_prompt_sections`` (the injected ``memory`` section, order 100, kept
for the session's life, and ``memory_updates``, order 101, for what was written since) and
``recall`` (memory entries as candidates). The logic lives in the sibling modules.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from veil.hookspecs import hookimpl

# Each hook imports the module it calls when it is called: ``veil --help`` loads every plugin,
# and these modules bring the store, pydantic and the memory service with them (issue 30).
if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession, PromptSection, RecallHit, Route, SlashCommand, Tool

log = logging.getLogger(__name__)

STATE_KEY = "veil_memoryfiles"
SECTION_ORDER = 100


def __getattr__(name: str) -> Any:
    """``MemoryService``, imported when it is first asked for (PEP 562): other plugins find it
    on the registered plugin (``veil mcp``'s memory resources: ``pm.get_plugin(
    "veil_memoryfiles").MemoryService``), and importing it here at load would bring the store
    and pydantic to ``veil --help``.

    Raises:
        AttributeError: any other name.
    """
    if name == "MemoryService":
        from veil_memoryfiles.service import MemoryService

        return MemoryService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@hookimpl
def register_tools(veil: Any) -> list[Tool]:
    """memory_write, memory_read, memory_search."""
    from veil_memoryfiles.tools import memory_tools

    return memory_tools()


@hookimpl(optionalhook=True)  # declared by the plugin that fires it
def register_routes(veil: Any) -> list[Route]:
    """GET/PUT ``/memory/{file}`` and ``/agents/{name}/memory/{file}``."""
    from veil_memoryfiles.routes import memory_routes

    return memory_routes()


@hookimpl
def register_slash_commands(veil: Any) -> list[SlashCommand]:
    """``/memory`` and ``/remember TEXT``."""
    from veil_memoryfiles.tools import slash_commands

    return slash_commands()


@hookimpl
def register_commands(cli: Any) -> None:
    """``veil memory write|show|search``."""
    from veil_memoryfiles.cli import add_memory_commands  # click is only needed by the CLI

    add_memory_commands(cli)


@hookimpl
def before_compaction(session: PluginSession, messages: list) -> None:
    """Write the durable facts of the messages about to be summarised to the agent's MEMORY.md
    (seed 000: memory extraction before compaction; off when memory is disabled)."""
    from veil_memoryfiles.extraction import extract_before_compaction

    extract_before_compaction(session, messages)


@hookimpl
def system_prompt_sections(session: PluginSession) -> list[PromptSection] | None:
    """The ``memory`` section (order 100), built when the session starts and kept for its whole
    life, resumed or loaded again for each HTTP turn (seed 000: memory is "included in the
    system prompt at session start"), so the system message stays byte-identical and cached
    while the agent writes memory; and, once the files hold entries that were not there at the
    start, the ``memory_updates`` section (order 101, volatile and anchored: sent in the context
    note veil refreshes at change moments, :mod:`veil_memoryfiles.updates`).

    The cache lives in ``session.state["veil_memoryfiles"]`` as JSON-safe values, so it is
    stored with the session: ``section_text`` (str, or None when there is nothing to inject),
    ``injection`` (tokens, cap, entries shown / omitted per scope, truncated files),
    ``start_entries`` (the keys of the entries at the start) and ``updates`` (the files'
    signature and the updates section built for it)."""
    from veil import PromptSection
    from veil_memoryfiles.backend import files_for
    from veil_memoryfiles.injection import build_memory_section
    from veil_memoryfiles.updates import UPDATES_ORDER, current_entries, entry_key

    state = session.state.setdefault(STATE_KEY, {})
    files = files_for(session.config, getattr(session, "veil", None))
    if "section_text" not in state:
        state["start_entries"] = sorted(
            entry_key(scope, entry)
            for scope, entry, _ in current_entries(session.config, session.agent, files)
        )
        result = build_memory_section(
            session.config, session.agent, session.cwd, session.context_window, files=files
        )
        # files veil did not write (edited by hand, PUT, AGENTS.md) may hold credentials: the
        # prompt, and this cache in the store, get them redacted (security.redactSecrets)
        text = session.config.redactor.text(result.text) if result and result.text else None
        state["section_text"] = text or None
        state["injection"] = (
            {
                "tokens": result.tokens,
                "cap": result.cap,
                "shown": result.shown,
                "omitted": result.omitted,
                "truncated": result.truncated,
                "instruction_files": result.instruction_files,
                "repository_provided": result.repository_provided,
            }
            if result
            else None
        )
    text = state["section_text"]
    sections = [PromptSection(name="memory", text=text, order=SECTION_ORDER)] if text else []
    updates = _updates(session, state, files)
    if updates:
        sections.append(
            PromptSection(
                name="memory_updates",
                text=updates,
                order=UPDATES_ORDER,
                volatile=True,
                anchored=True,
            )
        )
    return sections or None


def _updates(session: PluginSession, state: dict[str, Any], files: Any) -> str | None:
    """The ``memory_updates`` text (redacted), built again only when the memory files (where
    ``files`` keeps them) changed (:func:`~veil_memoryfiles.updates.files_signature`)."""
    from veil_memoryfiles.updates import (
        UPDATES_SHARE,
        current_entries,
        entry_key,
        files_signature,
        updates_text,
    )

    config, agent = session.config, session.agent
    if not config.memory_enabled(agent):
        return None
    signature = files_signature(config, agent, files)
    cached = state.get("updates")
    if isinstance(cached, dict) and cached.get("signature") == signature:
        return cached.get("text")
    entries = current_entries(config, agent, files)
    if "start_entries" not in state:  # a session stored before veil kept the start's entries
        state["start_entries"] = sorted(entry_key(scope, e) for scope, e, _ in entries)
    share = config.memory_for(agent).injection_share
    cap = max(0, int(share * session.context_window * UPDATES_SHARE))
    text = updates_text(entries, set(state["start_entries"]), cap)
    text = config.redactor.text(text) if text else None
    state["updates"] = {"signature": signature, "text": text}
    return text


@hookimpl
def recall(session: PluginSession | None, query: str, limit: int) -> list[RecallHit] | None:
    """Memory entries of the session agent's readable scopes matching ``query`` (BM25).

    ``RecallHit.score`` squashes BM25 into [0, 1) as ``s / (s + 1)`` (monotone, so the order is
    BM25's). Returns None without a session (no agent to read for). An entry veil did not write
    comes quoted under the repository-provided label (``meta["provenance"]`` is
    ``repository``), as in ``memory_search``."""
    from veil import RecallHit
    from veil_memoryfiles.backend import files_for
    from veil_memoryfiles.service import MemoryService
    from veil_memoryfiles.trust import REPOSITORY_LABEL, quote

    if session is None or not query or not query.strip():
        return None
    svc = MemoryService(
        session.config, session.agent, files_for(session.config, getattr(session, "veil", None))
    )
    hits = svc.search(query, max(1, int(limit)))
    out = []
    for h in hits:
        d = svc.hit_dict(h)
        content = h.content
        if d["provenance"] != "agent":
            content = f"[{REPOSITORY_LABEL}]\n{quote(content)}"
        out.append(
            RecallHit(
                id=f"memory:{d['file']}:{h.position}",
                content=content,
                score=h.score / (h.score + 1.0),
                source="memory",
                meta=d,
            )
        )
    return out


@hookimpl
def register_settings() -> dict[str, Any]:
    """``memory.instructionFiles`` and ``memory.injectionShare``
    (:class:`~veil_memoryfiles.settings.InjectionSettings`)."""
    from veil_memoryfiles.settings import InjectionSettings

    return {"memory": InjectionSettings}
