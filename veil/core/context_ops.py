"""Operations on a session's context items: hydrate, promote, demote, pin, remember, forget,
relabel a turn, search history, beliefs and conflicts. Used by the memory tools, the HTTP API,
the REPL and the library harness, so each behaves the same everywhere.

Every change is stored at once and logged in the append-only event log.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from veil.core.errors import BadRequest, NotAvailable, PluginResultInvalid
from veil.core.plugins import checked_list, first_answer
from veil.core.prompt.items import ItemBatch
from veil.core.types import ContextItem

if TYPE_CHECKING:  # pragma: no cover
    from veil.core.session import Session

DEMOTED = "demoted by the model"
"""The eviction reason of a demotion by hand (such an item is never paged back in)."""

ItemAccess = Literal["hydrate", "promote", "pin", "related"]
"""How an item was used again, as the ``item_accessed`` hook is told (a plugin decides what it
means: veil_fsrs grades it as an FSRS review): ``hydrate`` (a pointer followed), ``promote``
(loaded by hand), ``pin`` (pinned back into the prompt), ``related`` (a turn named its files or
symbols)."""


def find_item(session: Session, item_id: str, field: str = "id") -> ContextItem:
    """The item with ``item_id`` (a pointer may be given with brackets or quotes around it), or
    the item a stub's message handle ``#N`` names: the evicted item of message N of this
    session (:func:`veil.core.prompt.assemble.stub_handle`).

    Args:
        session: the session asking.
        item_id: an item id or a handle ``#N`` (N in ASCII digits).
        field: the tool argument it came from, named in errors.

    Raises:
        BadRequest: no such item in this project's store, or no item for that message.
    """
    item_id = item_id.strip().strip("[]\"' ")
    if item_id.startswith("#"):
        return _item_of_message(session, item_id, field)
    for item in session.live_items:
        if item.id == item_id:
            return item
    item = session.veil.store.get_item(item_id)
    if item is None:
        raise BadRequest(
            f"{field}: no item {item_id!r} (ids look like item_0123456789ab; stubs also give #N)"
        )
    return item


_HANDLE = re.compile(r"#([0-9]{1,18})", re.ASCII)


def _item_of_message(session: Session, handle: str, field: str) -> ContextItem:
    match = _HANDLE.fullmatch(handle)
    if match is None:
        raise BadRequest(f"{field}: {handle!r} is not a message handle (#17, as in a stub)")
    index = int(match.group(1))
    for item in session.paged_out.values():  # the common case: a stub of this session
        if item.message_index == index:
            return item
    item = None
    if index < len(session.messages):
        item = session.veil.store.item_of_message(session.id, index)
    if item is None:
        raise BadRequest(f"{field}: no item for message {handle} in this session")
    return item


def _log(session: Session, event_kind: str, item: ContextItem, **payload: Any) -> None:
    session.veil.store.log_event(
        event_kind,
        {"item": item.id, **payload},
        session_id=session.id,
        step=session.step,
        tool_call_id=item.tool_call_id,
        ts=session.clock(),
    )


def _accessed(
    session: Session,
    item: ContextItem,
    access: ItemAccess,
    previous_tier: str,
    refresh: bool = True,
) -> None:
    _accessed_many(session, [item], access, previous_tier)
    if refresh:
        session.live_items.refresh(item)  # its row in the live columns (no-op when not live)


def _accessed_many(
    session: Session, items: list[ContextItem], access: ItemAccess, previous_tier: str
) -> None:
    """Count one access for each item (``item_accessed`` hook, then one store transaction).
    The core only records the access: what it does to the item's ``stability`` and
    ``difficulty`` is the hook implementations' (veil_fsrs: an FSRS review), stored as they
    left them."""
    now = session.clock()
    for item in items:
        session.veil.pm.hook.item_accessed(
            session=session, item=item, access=access, now=now, previous_tier=previous_tier
        )
        item.access_count += 1
        item.last_access = now
    session.veil.store.record_accesses(
        [(i.stability, i.difficulty, i.access_count, now, i.id) for i in items]
    )


def _make_live(session: Session, item: ContextItem) -> ContextItem:
    """Bring ``item`` into the prompt; returns the item that is now live: ``item`` itself, or
    for an item of another session a copy owned by this session (the other session's item, its
    tier and its stub stay as they are)."""
    if item.session_id is not None and item.session_id != session.id:
        return _live_copy(session, item)
    if item.tier == "live" and session.live_items.has_id(item.id):  # O(log n), no scan
        return item
    previous = item.tier
    item.tier = "live"
    session.paged_out.pop(item.id, None)
    session.veil.store.update_item(item.id, tier="live")
    if item.message_index is not None:
        session.stubs.pop(item.message_index, None)
    session.live_items.append(item)
    session.veil.tiers.on_hydrated(item, previous)
    return item


def _live_copy(session: Session, item: ContextItem) -> ContextItem:
    from veil.core.types import new_id

    content = session.veil.tiers.content(item.id) or item.content  # whole, even when cold
    copy = dataclasses.replace(
        item,
        id=new_id("item"),
        session_id=session.id,
        message_index=None,
        tool_call_id=None,
        tier="live",
        content=content,
        tags=list(item.tags),
        targets=list(item.targets),
        identifiers=None,
    )
    session.add_items([copy])
    return copy


def _own(session: Session, item: ContextItem, field: str = "id") -> ContextItem:
    """``item`` when this session may change it in place (its own, or no session's)."""
    if item.session_id is not None and item.session_id != session.id:
        raise BadRequest(
            f"{field}: {item.id} belongs to another session; hydrate or promote it to work on a "
            "copy"
        )
    return item


def touch_related(session: Session, targets: list[str]) -> int:
    """A turn that names files or symbols uses the live items pointing at them: each such item
    counts an access (``related``; veil_fsrs reviews it), which keeps what the agent works on
    from decaying. Returns how many items were touched."""
    wanted = set(targets)
    live = session.live_items
    if not wanted or not len(live):
        return 0
    rows, touched = [], []
    # only the rows whose item has targets at all (the column is kept up to date): at 10k live
    # items a Python pass over every item cost ~1 ms per assistant turn
    for row in np.flatnonzero(live.columns()["has_targets"]).tolist():
        item = live[row]
        if not wanted.isdisjoint(item.targets):
            rows.append(row)
            touched.append(item)
    if touched:
        _accessed_many(session, touched, "related", "live")
        session.live_items.refresh_rows(rows)  # one log entry for all of them
    return len(rows)


def hydrate(session: Session, pointer: str) -> ContextItem:
    """Follow a pointer: bring the item back into the prompt (an access, ``hydrate``).

    When the item's message is in the kept history, its stub is removed and the original content
    is sent again in place; otherwise (another session, a memory) the tool result carries it.
    """
    item = find_item(session, pointer, "pointer")
    previous = item.tier
    item = _make_live(session, item)
    _accessed(session, item, "hydrate", previous)
    _log(session, "hydrate", item, previous_tier=previous)
    return item


def promote(session: Session, item_id: str) -> ContextItem:
    """Make an item live, loaded by hand (x1.5 when scored): an access, ``promote``."""
    item = find_item(session, item_id)
    previous = item.tier
    item = _make_live(session, item)
    item.loaded_by_hand = True
    session.veil.store.update_item(item.id, loaded_by_hand=True)
    _accessed(session, item, "promote", previous)
    _log(session, "promote", item, previous_tier=previous)
    return item


def demote(session: Session, item_id: str, tier: str = "warm") -> ContextItem:
    """Move an item out of the prompt now (to ``warm`` or ``cold``); pinned items refuse.

    Raises:
        BadRequest: the item is pinned, or is a correction / intent (never evicted).
    """
    from veil.core.types import EvictionPlan

    item = _own(session, find_item(session, item_id))
    if item.pinned:
        raise BadRequest(f"id: {item.id} is pinned; unpin it first")
    if item.kind in ("correction", "intent"):
        raise BadRequest(f"id: {item.id} is a {item.kind}; those stay in the prompt")
    if item.tier == "live":
        plan = EvictionPlan(reasons={item.id: DEMOTED})
        (plan.to_cold if tier == "cold" else plan.to_warm).append(item.id)
        session.apply_eviction(plan, pageable=False)
    elif item.tier != tier:
        session.paged_out.pop(item.id, None)
        session.veil.store.update_item(item.id, tier=tier)
        session.veil.tiers.on_moved([item], tier)
        item.tier = tier
    return item


def set_pinned(session: Session, item_id: str, pinned: bool) -> ContextItem:
    """Pin (bring live and protect from eviction) or unpin an item."""
    item = find_item(session, item_id)
    if pinned and (item.tier != "live" or item.session_id not in (None, session.id)):
        previous = item.tier
        item = _make_live(session, item)
        _accessed(session, item, "pin", previous)
    elif not pinned:
        _own(session, item)
    item.pinned = pinned
    session.veil.store.update_item(item.id, pinned=pinned)
    session.live_items.refresh(item)
    _log(session, "pin" if pinned else "unpin", item)
    return item


def remember(
    session: Session,
    content: str,
    kind: str,
    tags: list[str],
    tool_call_id: str | None = None,
    *,
    targets: list[str] | None = None,
    source: str = "memory",
) -> ContextItem:
    """Store a new item made by the model (loaded by hand; facts also become beliefs).
    Credentials in ``content`` are redacted first (:mod:`veil.core.safety.redaction`).

    Args:
        session: the session it is remembered in.
        content: the item's text, as the model wrote it.
        kind: its item kind (``fact``, ``procedural``...); a ``fact`` is also asserted
            (``assert_fact`` hook).
        tags: its tags, as the plugin that calls this took them (the core extracts none:
            issue 33); take them from the redacted text (``session.veil.redactor.text``),
            never from the raw one, so a credential never becomes a tag.
        tool_call_id: the call that made it, if a tool did.
        targets: its targets (paths, symbols), taken the same way; none when not given.
        source: who states it, passed on to ``assert_fact`` (the memory tool's name).

    Returns:
        The stored item, now live.
    """
    content = session.veil.redactor.text(content)
    stab = session.config.settings.context.initial_stability
    item = ContextItem(
        content=content,
        kind=kind,
        source="memory",
        step=session.step,
        tool_call_id=tool_call_id,
        tags=list(tags),
        targets=list(targets or ()),
        stability=getattr(stab, kind, stab.fact),
        loaded_by_hand=True,
    )
    model = session.veil.llm.model_for("main", session.model)
    item.tokens = model.count_tokens(content)
    item.created_at = item.last_access = session.clock()
    session.add_items([item])
    _log(session, "remember", item, kind=kind)
    if kind == "fact":  # the beliefs plugin records it (assert_fact); the item stays either way
        session.veil.pm.hook.assert_fact(
            session=session, statement=content, tool_call_id=tool_call_id, source=source
        )
    return item


def forget(session: Session, item_id: str) -> ContextItem:
    """Take an item out of the prompt and out of recall; its content stays in the store and the
    event log (nothing is lost). Pinned items refuse."""
    item = _own(session, find_item(session, item_id))
    if item.pinned:
        raise BadRequest(f"id: {item.id} is pinned; unpin it first")
    if item.tier == "live":
        demote(session, item.id, "cold")
    session.paged_out.pop(item.id, None)
    session.veil.tiers.forget(item.id)
    session.veil.store.update_item(item.id, tier="cold", kind=item.kind)
    _log(session, "forget", item)
    return item


def set_turn_kind(session: Session, kind: str) -> int:
    """Relabel the items of the current step's assistant turn; return how many changed."""
    from veil.core.session import CORE_STATE_KEY

    rows = []
    for row, item in enumerate(session.live_items):
        if item.step == session.step and item.source == "assistant":
            item.kind = kind
            session.veil.store.update_item(item.id, kind=kind)
            rows.append(row)
    session.live_items.refresh_rows(rows)
    changed = len(rows)
    session.state.setdefault(CORE_STATE_KEY, {})["turn_kind"] = {str(session.step): kind}
    return changed


def search_history(session: Session, query: str, days: float, limit: int = 10) -> list[dict]:
    """Messages of this project's sessions from the last ``days`` days whose text contains every
    word of ``query`` (case-insensitive), newest first."""
    words = [w.lower() for w in query.split() if w.strip()]
    since = time.time() - days * 86400
    import json

    out = []
    for row in session.veil.store.search_messages(since, words, limit):
        msg = json.loads(row["message"])
        text = msg.get("content") or ""
        low = text.lower()
        pos = max(0, low.find(words[0]) - 80) if words and words[0] in low else 0
        out.append(
            {
                "session_id": row["session_id"],
                "idx": row["idx"],
                "role": msg.get("role"),
                "when": dt.datetime.fromtimestamp(row["created_at"]).strftime("%Y-%m-%d %H:%M"),
                "preview": " ".join(text[pos : pos + 240].split()),
            }
        )
    return out


def open_conflicts(session: Session) -> list[dict[str, Any]]:
    """Open conflicts between beliefs, as the ``belief_conflicts`` hook answers them (the
    ``veil.beliefs`` plugin); ``[]`` when no loaded plugin keeps beliefs.

    Raises:
        PluginResultInvalid: the answer is not a list of dicts (naming the plugin).
    """
    plugin, answer = first_answer(session.veil.pm, "belief_conflicts", session=session)
    return checked_list(plugin, "belief_conflicts", answer, dict, "a list of conflict dicts")


def resolve_conflict(session: Session, conflict_id: str, keep: str) -> str:
    """Keep belief ``keep`` in conflict ``conflict_id``; retract the others (not deleted), by
    the ``resolve_conflict`` hook (the ``veil.beliefs`` plugin).

    Returns:
        The line the plugin answers (what was kept and retracted).

    Raises:
        BadRequest: unknown or closed conflict, or ``keep`` is not one of its beliefs.
        NotAvailable: no loaded plugin keeps beliefs (``veil.beliefs`` blocked).
        PluginResultInvalid: the answer is not a str (naming the plugin).
    """
    plugin, answer = first_answer(
        session.veil.pm, "resolve_conflict", session=session, conflict_id=conflict_id, keep=keep
    )
    if answer is None:
        from veil.default_plugins import DEFAULT_PROVIDERS

        raise NotAvailable(
            "beliefs are off: no loaded plugin keeps beliefs (the "
            f"{DEFAULT_PROVIDERS['resolve_conflict']} plugin is blocked here), so there is no "
            "conflict to resolve"
        )
    if not isinstance(answer, str):
        raise PluginResultInvalid(plugin, "resolve_conflict", type(answer).__name__, "a str")
    return answer


def live_batch(items: list[ContextItem]) -> ItemBatch:
    """Wrap items in an :class:`ItemBatch`."""
    return ItemBatch(items)
