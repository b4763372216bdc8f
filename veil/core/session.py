"""A conversation with the agent: its full history, its snapshot of config, its live items."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Sequence
from itertools import compress, repeat
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np

from veil.core.errors import SessionClosed, SessionConflict
from veil.core.models.context_refusal import RefusalFigures, learned_window
from veil.core.prompt.items import ItemBatch
from veil.core.store.context_db import insert_event, set_items_tier
from veil.core.tiers import moved_row
from veil.core.types import ContextItem, EvictionOutcome, Message, RenderEvent

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.app import Veil
    from veil.core.settings import Config

_T = TypeVar("_T")

LEARNED_WINDOW_KEY = "providerWindow"
"""Key of ``Session.state`` under which the core keeps the window a provider's refusal taught
the session: ``{"model": name, "tokens": window, "providerLimit": tokens or None}``
(:meth:`Session.learn_context_window`)."""

CORE_STATE_KEY = "veil.core"
"""Key of ``Session.state`` under which the core keeps its own small records (the turn kind the
model set, the task's tags a plugin reported)."""
TASK_TAGS_KEY = "task_tags"
"""Under :data:`CORE_STATE_KEY`: the task's tags as the ``capture`` hook reported them
(:meth:`Session.note_task`), sorted; absent while no plugin reported any."""


class Session:
    """One session, loaded from or created in the store.

    Attributes:
        id: ``sess_...``.
        agent: agent name (``default`` unless told).
        model: model name snapshotted at creation (None: the configured main model).
        snapshot: the agent's config at creation (seed 000: ``defaultCompaction`` and the rest are
            snapshotted; changing agent.json later does not affect the session).
        messages: the full history (OpenAI messages), never shortened.
        message_steps: the step of each message (same length as ``messages``).
        compact_summary, compact_size: seed 000 defaultCompaction state.
        step: number of model calls so far (a *step*: DESIGN.md "Turn and step").
        live_items: context items currently in the prompt (an :class:`ItemBatch`).
        task_tags: tags of the current task, as the capture plugin reported them
            (:meth:`note_task`, :meth:`note_turn`; empty while no plugin does).
        state: per-plugin scratch space (``state.setdefault("veil_x", {})``), persisted as JSON
            when its values are JSON-serialisable; a plugin's in-process objects go through
            :meth:`plugin_state` instead.
        resumed: True when loaded from the store rather than created.
        version: the store's version of the session this copy holds (bumped by every message
            and state write; a write from an out-of-date copy raises SessionConflict).
        load_warnings: the damaged rows the load left out or stood in for, one line each
            (front ends show them; :mod:`veil.core.store.row_codec`).
        permission_grants: rules allowed "for this session" at a permission prompt
            (:func:`veil.core.safety.permissions.authorize`), in this process only.
    """

    def __init__(
        self,
        veil: Veil,
        row: dict[str, Any],
        *,
        resumed: bool,
        history: list[tuple[int, Message]] | None = None,
        load_warnings: list[str] | None = None,
    ) -> None:
        self.veil = veil
        self.id: str = row["id"]
        self.agent: str = row["agent"]
        self.model: str | None = row["model"]
        self.title: str | None = row.get("title")
        self.snapshot: dict[str, Any] = row["snapshot"]
        self.created_at: float = row["created_at"]
        self.closed_at: float | None = row.get("closed_at")
        self.compact_summary: str | None = row.get("compact_summary")
        self.compact_size: int = int(row.get("compact_size") or 0)
        self._clean_summary: str | None = self.compact_summary  # stored ones were redacted
        self.state: dict[str, Any] = dict(row.get("state") or {})
        self.resumed = resumed
        self.version: int = int(row.get("version") or 0)
        self.load_warnings: list[str] = list(load_warnings or [])
        # rules the user allowed "for this session" (veil.core.safety.permissions.authorize): kept in
        # this process only, so a resumed session asks again
        self.permission_grants: list[str] = []
        if history is None:
            history = veil.store.messages(self.id) if resumed else []
        self.messages: list[Message] = [m for _, m in history]
        self.message_steps: list[int] = [s for s, _ in history]
        self.step: int = max(self.message_steps, default=0)
        self.live_items = ItemBatch(veil.store.items(self.id, ("live",)) if resumed else [])
        self.task_tags: frozenset[str] = frozenset()
        self._task_base: frozenset[str] = frozenset()
        self._recent_turn_tags: list[frozenset[str]] = []
        self._halt_reason: str | None = None
        self.last_prompt_tokens: int = 0
        self.collapsed_steps: int = 0  # steps whose turn and results all left the prompt
        self.clock_override: float | None = None
        # prompt-size accounting; replay sets both off to match its content-only measure
        self.message_overhead_tokens = 4
        self.count_tool_arguments = True
        # a prompt whose protected part alone exceeds the window is refused (PromptTooLarge)
        # before it is sent; replay measures it instead and reports the step over budget
        self.refuse_oversized_prompt = True
        self._token_cache: dict[tuple[str, str], int] = {}
        # message index -> pointer stub, for items that left the prompt
        self.stubs: dict[int, str] = {}
        # items eviction passes moved to warm (rebuilt from the event log on resume): the policy
        # may page them back in (context.pageIn); build_prompt opens that door on the first
        # eviction round only
        self.paged_out: dict[str, ContextItem] = {}
        self.page_in_open = False
        # plugin name -> the object that plugin keeps for this session (plugin_state); the prompt
        # path keeps its own there too (veil.core.prompt.state.PromptState)
        self._plugin_state: dict[str, Any] = {}
        if resumed:
            stored = veil.store.items(self.id, ("warm", "cold"))
            self.paged_out, excerpts = _pageable(veil.store, self.id, stored)
            for item in stored:  # the lines an excerpt showed when the session was saved
                if item.tier == "warm" and excerpts.get(item.id):
                    item.excerpt = excerpts[item.id]
            self._stub_items(stored)

    @overload
    def plugin_state(self, name: str) -> Any | None: ...

    @overload
    def plugin_state(self, name: str, factory: Callable[[], _T]) -> _T: ...

    def plugin_state(self, name: str, factory: Callable[[], Any] | None = None) -> Any | None:
        """The object plugin ``name`` keeps for this session in this process (see
        :meth:`veil.core.session_api.PluginSession.plugin_state`): made by ``factory()`` on
        the first call that passes one, the same object afterwards; without ``factory``, the
        object or None when the plugin made none. Never stored."""
        if name not in self._plugin_state:
            if factory is None:
                return None
            self._plugin_state[name] = factory()
        return self._plugin_state[name]

    # -- shortcuts --------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The project's :class:`~veil.core.settings.Config`."""
        return self.veil.config

    @property
    def cwd(self) -> Path:
        """The project root the tools work in."""
        return self.veil.config.project_dir

    @property
    def closed(self) -> bool:
        """Whether the session was closed (it can be read, not changed)."""
        return self.closed_at is not None

    @property
    def context_window(self) -> int:
        """Context window of the session's main model, in tokens: the model's (its
        ``contextWindow`` setting, else litellm's figure), or the smaller one a provider's
        refusal taught this session for that model (:meth:`learn_context_window`)."""
        model = self.veil.llm.model_for("main", self.model)
        window = model.context_window
        learned = self.state.get(LEARNED_WINDOW_KEY)
        if isinstance(learned, dict) and learned.get("model") == model.name:
            tokens = learned.get("tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool) and 0 < tokens < window:
                return tokens
        return window

    def learn_context_window(
        self,
        figures: RefusalFigures,
        message_tokens: int,
        tool_tokens: int,
        reserve_tokens: int,
    ) -> int:
        """Fit this session's prompts into a smaller window from now on: the provider refused
        one as too long (issue 29: a ``contextWindow`` set larger than the provider's real
        window made every turn fail until ``/compact``).

        The window is :func:`veil.core.models.context_refusal.learned_window` of the current
        one, kept in ``state`` (key :data:`LEARNED_WINDOW_KEY`, with the model's name: another
        model keeps its own window) and saved at once, so a resumed session and every later HTTP
        turn keep it. A ``warning`` event tells the user, once per change.

        Args:
            figures: what the refusal states (its limit and its count of the prompt).
            message_tokens: veil's count of the refused prompt's messages.
            tool_tokens: veil's count of the tool schemas sent with them.
            reserve_tokens: the completion tokens the request reserved.

        Returns:
            The window now in effect (tokens).

        Raises:
            SessionConflict: another process changed the session (nothing is written).
        """
        model = self.veil.llm.model_for("main", self.model)
        window = self.context_window
        learned = learned_window(window, message_tokens, tool_tokens, reserve_tokens, figures)
        if learned >= window:
            return window
        requested = message_tokens + tool_tokens + reserve_tokens
        self.state[LEARNED_WINDOW_KEY] = {
            "model": model.name,
            "tokens": learned,
            "providerLimit": figures.limit,
        }
        self.save_state()
        stated = f" (its limit: {figures.limit} tokens)" if figures.limit else ""
        self.emit(
            "warning",
            text=(
                f"the provider refused a request of {requested} tokens as longer than "
                f"{model.name}'s context window{stated}; this session now fits its prompts "
                f"into {learned} tokens instead of {window}; the window veil was given for it "
                f"({model.context_window}: models.main.contextWindow, else litellm's figure) "
                "is larger than the provider accepts"
            ),
        )
        return learned

    @property
    def offered_tools(self) -> frozenset[str]:
        """Names of the tools the session's main model is offered
        (:func:`veil.core.loop.offered_tool_names`)."""
        from veil.core.loop import offered_tool_names

        return frozenset(offered_tool_names(self.veil, self.veil.llm.model_for("main", self.model)))

    # -- changes ----------------------------------------------------------------------------

    def ensure_open(self) -> None:
        """Raise :class:`SessionClosed` when the session is closed."""
        if self.closed:
            raise SessionClosed(f"session {self.id} is closed")

    def ensure_current(self) -> None:
        """Check that this copy is the store's latest version of the session (and take the
        store's ``closed_at``: another process may have closed it).

        Raises:
            SessionConflict: another process appended to or compacted the session since this
                copy was loaded; writing from it would undo that. Load the session again.
            SessionNotFound: the session was deleted."""
        version, closed_at = self.veil.store.version_and_closed_at(self.id)
        if version != self.version:
            raise SessionConflict(
                f"session {self.id} was changed by another process since it was loaded (stored "
                f"version {version}, this copy has {self.version}); load it again and retry"
            )
        if closed_at is not None and self.closed_at is None:
            self.closed_at = closed_at

    def append(self, message: Message, usage: dict | None = None) -> int:
        """Append a message to the full history (stored at once, compare-and-swap on the
        session's version); return its index.

        This is where everything enters a session (user messages, replies with their tool
        calls, tool results): the message is stored and kept with credentials replaced by
        ``[redacted:NAME]`` (:mod:`veil.core.safety.redaction`; off with ``security.redactSecrets``),
        so the store, the prompts and whatever is captured from ``messages[idx]`` never hold
        them. ``message`` itself is not changed.

        Raises:
            SessionConflict: another process changed the session since this copy was loaded
                (nothing is stored)."""
        message = self.veil.redactor.message(message)
        idx = len(self.messages)
        self.version = self.veil.store.append_message(
            self.id, idx, self.step, message, usage, expect_version=self.version
        )
        self.messages.append(message)
        self.message_steps.append(self.step)
        return idx

    def add_items(self, items: list[ContextItem]) -> None:
        """Store items and make them live (appended to ``live_items``: O(len(items)) for its
        columns, see :class:`~veil.core.prompt.items.ItemBatch`), then tell plugins (``items_added``
        hook: veil_fsrs counts their identifiers and embeds the turns among them)."""
        for item in items:
            item.session_id = self.id
        self.veil.store.add_items(items)
        self.live_items.extend(items)
        self.veil.pm.hook.items_added(session=self, items=items)

    def save_state(self) -> None:
        """Persist ``compact_summary``, ``compact_size`` and the JSON-safe part of ``state``
        (compare-and-swap on the session's version).

        The summary is a model's text: it is redacted (:mod:`veil.core.safety.redaction`) before it
        is stored, and the session keeps the redacted text for its prompts.

        Raises:
            SessionConflict: another process changed the session since this copy was loaded
                (nothing is written)."""
        if self.compact_summary and self.compact_summary is not self._clean_summary:
            self.compact_summary = self.veil.redactor.text(self.compact_summary)
            self._clean_summary = self.compact_summary  # redacted once, not at every turn end
        safe = {}
        for key, value in self.state.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                continue
            safe[key] = value
        self.version = self.veil.store.update_session(
            self.id,
            expect_version=self.version,
            compact_summary=self.compact_summary,
            compact_size=self.compact_size,
            state=safe,
        )

    def emit(self, kind: str, **data: Any) -> None:
        """Send a :class:`RenderEvent` of ``kind`` to every front end (``render`` hook)."""
        self.veil.render(RenderEvent(kind=kind, data=data, session_id=self.id))

    def request_halt(self, reason: str) -> None:
        """Ask the loop to stop after the current tool batch (convergence halt)."""
        self._halt_reason = reason

    def take_halt(self) -> str | None:
        """Return and clear a pending halt reason."""
        reason, self._halt_reason = self._halt_reason, None
        return reason

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary for front ends (no API keys: the snapshot holds none)."""
        return {
            "id": self.id,
            "agent": self.agent,
            "model": self.model,
            "title": self.title,
            "createdAt": self.created_at,
            "closed": self.closed,
            "messageCount": len(self.messages),
            "compactSize": self.compact_size,
            "compactSummary": self.compact_summary,
            "snapshot": self.snapshot,
        }

    def clock(self) -> float:
        """Current time in Unix seconds (replay sets ``clock_override`` to recorded time)."""
        return self.clock_override if self.clock_override is not None else time.time()

    def count_tokens(self, messages: list[Message]) -> int:
        """Prompt tokens of ``messages`` with the main model's tokenizer, cached per message text:
        content plus tool-call names and arguments (``count_tool_arguments``), plus
        ``message_overhead_tokens`` (4) per message."""
        model = self.veil.llm.model_for("main", self.model)
        total = 0
        for msg in messages:
            text = msg.get("content") or ""
            if msg.get("tool_calls") and self.count_tool_arguments:
                text += "".join(
                    tc["function"]["name"] + tc["function"].get("arguments", "")
                    for tc in msg["tool_calls"]
                )
            total += self._cached_count(model, text) + self.message_overhead_tokens
        return total

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` with the main model's tokenizer, through the same cache as
        :meth:`count_tokens`: counting a tool result at capture pays for the prompt's count."""
        return self._cached_count(self.veil.llm.model_for("main", self.model), text)

    def _cached_count(self, model: Any, text: str) -> int:
        key = (model.name, text)
        if key not in self._token_cache:
            self._token_cache[key] = model.count_tokens(text) if text else 0
        return self._token_cache[key]

    def _stub_items(self, items: list[ContextItem]) -> None:
        """Put what stands for each of ``items`` in the prompt now that it left: its excerpt
        (:func:`veil.core.prompt.excerpts.render_excerpt`) when it keeps lines, else its pointer
        stub."""
        from veil.core.prompt.assemble import excerpt_stub, pointer_stub

        stubs = self.stubs
        for item in items:
            if item.message_index is not None and item.source in _STUBBED_SOURCES:
                stubs[item.message_index] = (
                    excerpt_stub(item)
                    if item.excerpt and item.tier == "warm"
                    else pointer_stub(item)
                )

    def excerpt_indices(self) -> dict[int, tuple[int, ...]]:
        """Message index -> the lines its excerpt shows, for the messages the prompt shows as
        an excerpt (the warm items with ``excerpt`` set)."""
        return {
            item.message_index: item.excerpt
            for item in self.paged_out.values()
            if item.excerpt and item.message_index is not None
        }

    WORKING_SET_TURNS = 3

    def new_task(self) -> None:
        """A user message starts a new task: ``task_tags`` is emptied until a plugin reports the
        message's tags (:meth:`note_task`). The core extracts no tags itself (issue 33): with
        the capture plugin blocked, nothing is tagged."""
        self._task_base = frozenset()
        self._recent_turn_tags = []
        self.task_tags = self._task_base
        self.state.get(CORE_STATE_KEY, {}).pop(TASK_TAGS_KEY, None)

    def note_task(self, tags: list[str]) -> None:
        """The tags a plugin took from the user message that set the task become the base of
        ``task_tags`` (called by the ``capture`` hook, phase ``user``). They are kept in
        ``state`` too (saved with it), for scores asked of this session once it is loaded
        again (:meth:`veil.core.app.Veil.score_items`)."""
        self._task_base = frozenset(tags)
        self._recent_turn_tags = []
        self.task_tags = self._task_base
        self.state.setdefault(CORE_STATE_KEY, {})[TASK_TAGS_KEY] = sorted(self._task_base)

    def note_turn(self, tags: list[str]) -> None:
        """An assistant turn joins the working set: ``task_tags`` = the task's tags plus those of
        the last :attr:`WORKING_SET_TURNS` (3) turns, so relevance follows what the agent is
        doing now, not only what it was asked at the start."""
        self._recent_turn_tags = [*self._recent_turn_tags, frozenset(tags)][
            -self.WORKING_SET_TURNS :
        ]
        self.task_tags = self._task_base.union(*self._recent_turn_tags)

    def mask_items(self, message_indices: set[int]) -> None:
        """Live items whose messages observation masking now hides leave for the warm tier
        (logged as ``mask`` events; no stub: the mask is what the model sees)."""
        gone = [
            i
            for i in self.live_items
            if i.message_index in message_indices and i.source == "tool_result" and not i.pinned
        ]
        if not gone:
            return
        with self.veil.store.transaction() as conn:
            for item in gone:
                set_items_tier(conn, [item.id], "warm")
                insert_event(
                    conn,
                    "mask",
                    json.dumps({"item": item.id, "tier": "warm", "reason": "masked"}),
                    ts=self.clock(),
                    session_id=self.id,
                    step=self.step,
                    tool_call_id=item.tool_call_id,
                )
                item.tier = "warm"
        self.live_items.remove_ids({i.id for i in gone})  # incremental: columns compacted
        self.veil.tiers.on_moved(gone, "warm")

    def page_in_candidates(self) -> list[ContextItem]:
        """This session's items that eviction passes moved to the warm tier and that may come
        back (``EvictionPlan.to_live``), oldest first; empty when ``context.pageIn`` is off or
        the prompt builder has not opened page-in for this pass. Items demoted or forgotten by
        hand, masked, or hydrated since are not offered, nor items whose message full
        compaction summarised. A resumed session offers the warm items whose last move was an
        eviction pass (from the event log)."""
        if not (self.page_in_open and self.config.settings.context.page_in):
            return []
        # an item whose message was compacted away could not come back into the prompt
        return [
            i
            for i in self.paged_out.values()
            if i.message_index is None or i.message_index >= self.compact_size
        ]

    def apply_eviction(self, plan: Any, *, pageable: bool = True) -> list[str]:
        """:meth:`apply_eviction_plan`, returning its notes for front ends (a list)."""
        return list(self.apply_eviction_plan(plan, pageable=pageable).notes)

    def apply_eviction_plan(self, plan: Any, *, pageable: bool = True) -> EvictionOutcome:
        """Move the items of an :class:`~veil.core.types.EvictionPlan` out of the prompt.

        The session's view (live items, stubs, page-in candidates) changes at once; the store
        records the pass behind the call path, in one transaction: the tiers, one ``evict``
        event whose payload lists every moved item (``{"items": [{"id", "tier", "reason",
        "toolCallId", "messageIndex"}], "threshold"}``; paged-in items are listed with tier
        ``live``) and the recall index. Any later use of the store waits for it
        (:meth:`~veil.core.store.Store.write_behind`). An ``eviction`` render event names the
        same items (front ends dim their tool calls); it is built and sent only when a plugin
        implements the ``render`` hook (nobody else would receive it). Before it, the
        ``after_eviction`` hook names the moved items to plugins (veil_fsrs starts embedding
        turns at the first pass). Neither runs when nothing moved.

        Args:
            plan: the policy's answer; ``to_live`` may only name items of
                :meth:`page_in_candidates`, others are ignored. An id listed more than once
                moves once, to the tier of its last listing (``to_cold`` when it is in both
                lists); ids not in the prompt are ignored.
            pageable: items moved to warm become page-in candidates (False for a demotion by
                hand: the model asked for them to leave).

        Returns what moved (:class:`~veil.core.types.EvictionOutcome`), with the notes for
        front ends.

        Raises:
            TypeError: ``plan.reasons`` is not a mapping (checked before anything changes).
        """
        reasons = dict(plan.reasons)  # a copy the writer thread reads later; fails early if bad
        excerpts = dict(getattr(plan, "excerpts", None) or {})
        live = self.live_items
        tiers = ["warm"] * len(plan.to_warm) + ["cold"] * len(plan.to_cold)
        rows = live.rows_of([*plan.to_warm, *plan.to_cold])  # -1: not live (ignored)
        found = rows >= 0
        if not found.all():
            tiers = list(compress(tiers, found.tolist()))
            rows = rows[found]
        if len(rows) > 1:
            # an id listed twice (in both lists, or twice in one) moves once: to its last
            # listing's tier, so cold wins over warm (one sort, no per-item Python)
            distinct, last = np.unique(rows[::-1], return_index=True)
            if len(distinct) < len(rows):
                picked = np.sort(len(rows) - 1 - last)
                rows = rows[picked]
                tiers = list(map(tiers.__getitem__, picked.tolist()))
        moved = list(map(live.__getitem__, rows.tolist()))  # warm ones first, then cold
        warm = tiers.count("warm")
        back = [
            self.paged_out[i]
            for i in dict.fromkeys(getattr(plan, "to_live", ()))
            if i in self.paged_out
        ]
        back_ids = {item.id for item in back}
        # warm items that stay out of the prompt but show other lines (or none) from now on
        relevelled = [
            self.paged_out[i]
            for i in excerpts
            if i in self.paged_out
            and i not in back_ids
            and (self.paged_out[i].excerpt or ()) != _excerpt_lines(self.paged_out[i], excerpts[i])
        ]
        if not moved and not back and not relevelled:
            return EvictionOutcome(notes=tuple(plan.report))
        # per-item work in C: the tiers set, the warm items made page-in candidates
        deque(map(setattr, moved, repeat("tier"), tiers), maxlen=0)
        if excerpts:
            for item in moved[:warm]:
                if item.id in excerpts:
                    item.excerpt = _excerpt_lines(item, excerpts[item.id]) or None
            for item in relevelled:
                item.excerpt = _excerpt_lines(item, excerpts[item.id]) or None
        if pageable:
            self.paged_out.update(zip(map(_item_id, moved[:warm]), moved[:warm], strict=True))
        self._stub_items(moved)
        self._stub_items(relevelled)
        if live.ids_unique:
            live.remove_rows(rows)  # incremental: columns compacted, not rebuilt
        else:  # an id held twice (never by the core): every copy leaves, as remove_ids does
            live.remove_ids({item.id for item in moved})
        for item in back:
            del self.paged_out[item.id]
            item.tier = "live"
            item.excerpt = None
            if item.message_index is not None:
                self.stubs.pop(item.message_index, None)
        if back:
            self.live_items.extend(back)
        # last: the writer thread starts now, and would share the GIL with the work above
        self._write_eviction(moved, warm, back, reasons, plan.threshold, relevelled)
        self.veil.pm.hook.after_eviction(session=self, evicted=moved, paged_in=back)
        if self.veil.pm.hook.render.get_hookimpls():  # the entries only for a front end
            self.emit(
                "eviction",
                items=eviction_entries(moved, warm, back, reasons, relevelled),
                threshold=plan.threshold,
                report=list(plan.report),
            )
        notes = [f"evicted {len(moved)} item(s)"] if moved else []
        if back:
            notes.append(f"paged in {len(back)} item(s)")
        if relevelled:
            notes.append(f"excerpted {len(relevelled)} item(s) again")
        return EvictionOutcome(len(moved), len(back), len(relevelled), (*notes, *plan.report))

    def _write_eviction(
        self,
        moved: list[ContextItem],
        warm: int,
        back: list[ContextItem],
        reasons: dict[str, str],
        threshold: float | None,
        relevelled: list[ContextItem] = (),  # type: ignore[assignment]
    ) -> None:
        """Record a pass in the store, behind the call path (:meth:`Store.write_behind`): the
        tiers, one ``evict`` event and the recall index in one transaction (a crash leaves the
        whole pass or none of it; none means its items are still ``live`` in the store, and a
        resumed session evicts them again). ``moved``: the items that left, the first ``warm``
        of them to the warm tier, the rest to cold. The job reads each moved item's id,
        session, tool call, message, tags and content when it runs (none of them changes once
        an item has left the prompt) and builds the event's entries then, so the pass itself
        does no per-item work for it."""
        tiers = self.veil.tiers
        by_tier = {"warm": moved[:warm], "cold": moved[warm:]}
        when = (self.clock(), self.id, self.step)

        relevelled = list(relevelled)

        def job(conn: Any) -> None:
            entries = eviction_entries(moved, warm, back, reasons, relevelled)
            call_ids = {entry["toolCallId"] for entry in entries}
            for tier in ("warm", "cold"):
                set_items_tier(conn, [item.id for item in by_tier[tier]], tier)
            insert_event(
                conn,
                "evict",
                json.dumps({"items": entries, "threshold": threshold}),
                ts=when[0],
                session_id=when[1],
                step=when[2],
                tool_call_id=next(iter(call_ids)) if len(call_ids) == 1 else None,
            )
            for tier in ("warm", "cold"):  # index / compress; embedding waits for the next search
                tiers.write_moved(conn, [moved_row(item) for item in by_tier[tier]], tier)
            back_ids = [item.id for item in back]
            set_items_tier(conn, back_ids, "live")
            for item_id in back_ids:  # paged-out items are warm: no content comes back
                tiers.write_hydrated(conn, item_id)

        self.veil.store.write_behind(
            job,
            f"eviction pass of {len(moved)} item(s), {len(back)} paged in",
            tier_deltas={
                self.id: {
                    "live": len(back) - len(moved),
                    "warm": warm - len(back),
                    "cold": len(moved) - warm,
                }
            },
        )


_item_id = attrgetter("id")


def eviction_entries(
    moved: list[ContextItem],
    warm: int,
    back: list[ContextItem],
    reasons: dict[str, str],
    relevelled: Sequence[ContextItem] = (),
) -> list[dict[str, Any]]:
    """The entries of an eviction pass, as the ``evict`` event and the ``eviction`` render
    event list them: ``{"id", "tier", "reason", "toolCallId", "messageIndex"}`` per item, the
    first ``warm`` of ``moved`` with tier ``warm``, the rest ``cold``, then the paged-in items
    ``back`` with tier ``live``, then the warm items ``relevelled`` (shown with other lines)
    with tier ``warm``; ``reason`` from the plan's ``reasons`` (``""`` when absent; ``excerpt``
    for a relevelled item without one). A warm item shown as an excerpt carries
    ``"excerpt": [line numbers]`` (a resumed session shows the same lines)."""
    tiers = (
        ["warm"] * warm
        + ["cold"] * (len(moved) - warm)
        + ["live"] * len(back)
        + ["warm"] * len(relevelled)
    )
    entries = []
    again = {id(item) for item in relevelled}
    for item, tier in zip([*moved, *back, *relevelled], tiers, strict=True):
        default = "excerpt" if id(item) in again else ""
        entry: dict[str, Any] = {
            "id": item.id,
            "tier": tier,
            "reason": reasons.get(item.id, "") or default,
            "toolCallId": item.tool_call_id,
            "messageIndex": item.message_index,
        }
        if tier == "warm" and item.excerpt:
            entry["excerpt"] = list(item.excerpt)
        entries.append(entry)
    return entries


def _excerpt_lines(item: ContextItem, lines: Sequence[int]) -> tuple[int, ...]:
    """``lines`` as an excerpt of ``item`` keeps them (distinct, ascending, within its
    content)."""
    from veil.core.prompt.excerpts import normalised

    return normalised(lines, item.content.count("\n") + 1)


_STUBBED_SOURCES = frozenset({"tool_result", "user", "assistant"})


def _pageable(
    store: Any, session_id: str, stored: list[ContextItem]
) -> tuple[dict[str, ContextItem], dict[str, tuple[int, ...]]]:
    """The page-in candidates of a resumed session: its warm items whose last move was an
    eviction pass (not a demotion by hand, not observation masking), as the event log says;
    and, per item id, the lines its last ``evict`` entry showed as an excerpt (a damaged list
    reads as none: a plain stub)."""
    from veil.core.context_ops import DEMOTED

    last: dict[str, bool] = {}  # item id -> may come back
    excerpts: dict[str, tuple[int, ...]] = {}
    for event in store.events(session_id, ("evict", "mask")):
        payload = event["payload"]
        if event["kind"] == "mask":
            last[payload.get("item", "")] = False
            excerpts.pop(payload.get("item", ""), None)
            continue
        for entry in payload.get("items", []):
            last[entry["id"]] = entry["tier"] == "warm" and entry.get("reason") != DEMOTED
            lines = entry.get("excerpt")
            if entry["tier"] == "warm" and isinstance(lines, list) and lines:
                excerpts[entry["id"]] = tuple(i for i in lines if isinstance(i, int))
            else:
                excerpts.pop(entry["id"], None)
    pageable = {i.id: i for i in stored if i.tier == "warm" and last.get(i.id, False)}
    return pageable, excerpts
