"""What the ``veil_fsrs_evict`` plugin keeps for one session, in the namespace it owns.

The eviction policy reads two things about a session that the core does not keep:

* the embeddings of its turns, for the rescue of old turns (seed 002: a turn whose cosine with
  a recent turn exceeds 0.7 has its eviction score cut), filled by
  :class:`~veil_fsrs.turn_embeddings.TurnEmbeddings` from the session's first eviction on;
* how many of its items mention each identifier, for the coverage-aware choice of what leaves
  (``context.mentionPower``);
* what each tool result is a copy of or ran (:mod:`veil_fsrs.superseded`), so an older copy
  of a file or an older run of a command that a later one supersedes leaves first.

Both live in :class:`FsrsSessionState`, kept with
:meth:`PluginSession.plugin_state <veil.core.session_api.PluginSession.plugin_state>` under
:data:`PLUGIN_NAME`, for as long as this process holds the session; nothing of it is stored
(vectors come back from the embeddings cache, counts from the stored items). The plugin's
hooks (:mod:`veil_fsrs.evict_plugin`) keep it up to date; a session where the plugin is blocked
never has one, so it neither embeds turns nor counts mentions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from veil import content_identifiers, item_identifiers
from veil_fsrs.superseded import Source, source_of, superseded_by
from veil_fsrs.turn_embeddings import TurnEmbeddings

if TYPE_CHECKING:  # pragma: no cover
    from veil import ContextItem, PluginSession
    from veil_fsrs.levels import LineInfo, NameStats

PLUGIN_NAME = "veil_fsrs_evict"
"""The namespace's name: the eviction plugin's entry point name, whose hooks keep it."""

STUBBED_SOURCES = frozenset({"tool_result", "user", "assistant"})
"""Sources of the items the core leaves a pointer stub for once they left the prompt."""


class FsrsSessionState:
    """The eviction policy's per-session state (one per session and process).

    Args:
        session: the session it belongs to (its ``config``, ``resumed``, ``id``, ``veil``).

    Attributes:
        turn_embeddings: the session's turn vectors (item id -> float32 vector in
            ``turn_embeddings.vectors``); ``context.rescueEmbeddings`` picks the mode.
    """

    def __init__(self, session: PluginSession) -> None:
        self.session = session
        self.turn_embeddings = TurnEmbeddings(
            session, session.config.settings.context.rescue_embeddings
        )
        # a resumed session counts its stored items on first use (identifier_mentions)
        self._mentions: Counter[str] | None = None if session.resumed else Counter()
        # the names' statistics for the levels' value of a line (name_stats), the same way
        # (veil_fsrs.levels needs numpy: imported when a session starts, not by ``veil --help``)
        from veil_fsrs.levels import NameStats

        self._names: NameStats | None = None if session.resumed else NameStats()
        # item id -> its lines' names and sizes (an item's content never changes)
        self._lines: dict[str, LineInfo] = {}
        # (tool result's item id, what its call read / changed / ran), in call order
        self._sources: list[tuple[str, Source]] | None = None if session.resumed else []
        self._superseded: dict[str, str] | None = None

    def name_stats(self) -> NameStats:
        """The session's :class:`~veil_fsrs.levels.NameStats`: per name, the turns that
        mentioned it, the other items that held it, when, and its owner (the newest item
        holding it). A resumed session reads its stored items once, in capture order."""
        if self._names is None:
            from veil_fsrs.levels import NameStats

            stats = NameStats()
            veil = self.session.veil
            tiers = veil.tiers
            for item in veil.stored_items(self.session.id, ("live", "warm", "cold")):
                if item.tier == "cold":
                    names = content_identifiers(tiers.content(item.id) or item.content)
                else:
                    names = item_identifiers(item)
                stats.add(item, names)
            self._names = stats
        return self._names

    def lines_of(self, item: ContextItem) -> LineInfo:
        """``item``'s :class:`~veil_fsrs.levels.LineInfo`, computed once per item."""
        found = self._lines.get(item.id)
        if found is None:
            from veil_fsrs.levels import line_info

            found = self._lines[item.id] = line_info(item)
        return found

    def superseded(self) -> dict[str, str]:
        """Tool result item id -> id of the newer result that supersedes it (an older copy
        of the same file, a file changed since, the same command run again:
        :func:`veil_fsrs.superseded.superseded_by`). A resumed session reads its stored items
        once; the mapping is recomputed only after new results arrived."""
        if self._sources is None:
            veil = self.session.veil
            stored = veil.stored_items(self.session.id, ("live", "warm", "cold"))
            self._sources = []
            self._add_sources(sorted(stored, key=_message_order))
        if self._superseded is None:
            self._superseded = superseded_by(self._sources)
        return self._superseded

    def _add_sources(self, items: Iterable[ContextItem]) -> None:
        messages = getattr(self.session, "messages", None) or []
        for item in items:
            if item.source != "tool_result" or item.message_index is None:
                continue
            call = _tool_call(messages, item.message_index, item.tool_call_id)
            if call is None:
                continue
            source = source_of(*call)
            if source is not None:
                self._sources.append((item.id, source))
                self._superseded = None

    def identifier_mentions(self) -> Counter[str]:
        """Identifier (DESIGN.md "Measures" shape) -> how many of this session's items mention
        it, each item counted once: its turns, tool results and memory items, wherever they
        are now (live, warm or cold). A resumed session counts its stored items on first use
        (a cold item by its whole content, not the store's preview)."""
        if self._mentions is None:
            counts: Counter[str] = Counter()
            veil = self.session.veil
            tiers = veil.tiers
            for item in veil.stored_items(self.session.id, ("live", "warm", "cold")):
                if item.tier == "cold":  # the items table keeps a preview of a cold item
                    counts.update(content_identifiers(tiers.content(item.id) or item.content))
                else:
                    counts.update(item_identifiers(item))
            self._mentions = counts
        return self._mentions

    def items_added(self, items: Iterable[ContextItem]) -> None:
        """Items became live (captured, remembered, loaded by hand): count their identifiers
        (once the counts exist) and embed the turns among them (once embedding started)."""
        items = list(items)
        if self._mentions is not None:
            for item in items:
                self._mentions.update(item_identifiers(item))
        if self._names is not None:
            for item in items:
                self._names.add(item, item_identifiers(item))
        if self._sources is not None:
            self._add_sources(items)
        self.turn_embeddings.add(items)

    def resumed_under_pressure(self) -> bool:
        """Whether the (resumed) session had items leave the prompt before: a turn or tool
        result in the warm or cold tier, which the core shows as a pointer stub. Reads the
        store once."""
        stored = self.session.veil.stored_items(self.session.id, ("warm", "cold"))
        return any(i.message_index is not None and i.source in STUBBED_SOURCES for i in stored)


def _message_order(item: ContextItem) -> tuple[int, int]:
    return (item.message_index if item.message_index is not None else -1, item.step)


#: How far back from a tool message its call is looked for (one step's calls and results).
CALL_LOOKBACK = 64


def _tool_call(
    messages: list[dict[str, Any]], index: int, call_id: str | None
) -> tuple[str, Any] | None:
    """``(tool name, arguments)`` of the call the tool message at ``index`` answers: the
    assistant message before it whose ``tool_calls`` hold ``call_id``; None when not found."""
    if call_id is None or index >= len(messages):
        return None
    for pos in range(index - 1, max(-1, index - 1 - CALL_LOOKBACK), -1):
        message = messages[pos]
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if call.get("id") == call_id:
                function = call.get("function") or {}
                return str(function.get("name") or ""), function.get("arguments")
    return None


def session_state(session: PluginSession) -> FsrsSessionState:
    """The session's :class:`FsrsSessionState`, created on first use (by the plugin's hooks)."""
    return session.plugin_state(PLUGIN_NAME, lambda: FsrsSessionState(session))


def existing_state(session: Any) -> FsrsSessionState | None:
    """The session's :class:`FsrsSessionState` if the plugin made one, else None (also for a
    session object without ``plugin_state``, such as a bare test double)."""
    lookup = getattr(session, "plugin_state", None)
    return lookup(PLUGIN_NAME) if callable(lookup) else None


def embeds_turns(session: PluginSession) -> bool:
    """Whether veil_fsrs embeds this session's turns now: its eviction plugin keeps state for
    the session, the session has had its first eviction and ``context.rescueEmbeddings`` is
    not ``off``. The replay uses it to embed a whole recording in one batch from then on."""
    state = existing_state(session)
    if state is None:
        return False
    embeddings = state.turn_embeddings
    return embeddings.active and embeddings.mode != "off"
