"""The manifest: a short, bounded section saying what context is loaded and what is stored
outside the prompt (seed 002: "a manifest of what is currently loaded gets appended to the
system prompt"). It is capped at ``MANIFEST_SHARE`` (5%, DESIGN.md "Measures") of the token
budget: lines are added most useful first until the cap would be crossed.

It comes in two parts (issue 18, DESIGN.md "The prompt's prefix stays put"): the guide (the
heading and how stubs are followed back) never changes and stays in the system message; the
counts and the pinned / loaded-by-hand listing change at every step and are a *volatile*,
*anchored* section: sent in a context note after the conversation, refreshed at change moments
(an eviction pass, a masking block, a compaction) and left in its place in between, so the
system message stays byte-identical and provider prompt caches are reused."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import TYPE_CHECKING

from veil import ContextItem, PromptSection

if TYPE_CHECKING:  # pragma: no cover
    from veil import PluginSession

MANIFEST_SHARE = 0.05
MANIFEST_ORDER = 900
MAX_LISTED = 12
MANIFEST_HEADING = "## Context manifest"
MANIFEST_GUIDE = (
    "Evicted content appears as [evicted … #N] and [cold … item_…] stubs: "
    "veil_hydrate(#N or the id) loads one "
    "back; veil_recall(query) and veil_history(query) search the rest."
)
"""How stubs are followed back: the stable part of the manifest (in the system message from
the first step, so the first eviction does not change it), when the model is offered the
memory tools it names (:func:`manifest_guide`)."""

STUBS_LINE = "Evicted content appears as [evicted … #N] and [cold … item_…] stubs"
HYDRATE_CLAUSE = "veil_hydrate(#N or the id) loads one back"
SEARCH_CLAUSE = "veil_recall(query) and veil_history(query) search the rest"
NO_TOOL_CLAUSE = (
    "no tool to load them back is offered here: run the tool that produced one again if "
    "you need its content"
)


def manifest_guide(offered: Collection[str]) -> str:
    """The guide for a model offered the tools ``offered``: it names only tools the model was
    offered (``veil.memory_tools`` blocked, or the bundled model's six coding tools: none),
    and is :data:`MANIFEST_GUIDE`, byte for byte, when all three it names are offered.

    Args:
        offered: names of the tools sent to the model (``PluginSession.offered_tools``).

    Returns:
        One line of text (no heading).
    """
    hydrate = "veil_hydrate" in offered
    search = "veil_recall" in offered and "veil_history" in offered
    if hydrate and search:
        return MANIFEST_GUIDE
    if hydrate:
        return f"{STUBS_LINE}: {HYDRATE_CLAUSE}."
    if search:
        return f"{STUBS_LINE}: {SEARCH_CLAUSE} (they find the content behind them)."
    return f"{STUBS_LINE}; {NO_TOOL_CLAUSE}."


def _label(item: ContextItem) -> str:
    first = " ".join(item.content.split())[:60]
    where = f" {item.targets[0]}" if item.targets else ""
    return f"{item.id} {item.kind}{where}: {first}"


def build_manifest(
    session: PluginSession,
    live: list[ContextItem],
    counts: dict[str, int],
    budget_tokens: int,
    count_tokens,
    guide: str = MANIFEST_GUIDE,
) -> str:
    """Render the manifest text within ``MANIFEST_SHARE`` x ``budget_tokens`` tokens.

    Args:
        live: the live items; counts: ``{"warm": n, "cold": n}`` for the session;
        count_tokens: ``str -> int`` with the model's tokenizer; guide: the guide line
        (:func:`manifest_guide` of the offered tools).

    Returns:
        Markdown text; always at least the one-line summary (its cost is counted by the caller).
    """
    reserved = count_tokens(MANIFEST_HEADING + "\n" + guide)
    return "\n".join(
        [
            MANIFEST_HEADING,
            guide,
            manifest_counts(session, live, counts, budget_tokens, count_tokens, reserved=reserved),
        ]
    )


def manifest_counts(
    session: PluginSession,
    live: list[ContextItem],
    counts: dict[str, int],
    budget_tokens: int,
    count_tokens,
    *,
    reserved: int | None = None,
) -> str:
    """The volatile part of the manifest: the counts line (loaded items and tokens by kind,
    warm and cold counts, steps left whole) and the pinned / loaded-by-hand listing, within
    ``MANIFEST_SHARE`` x ``budget_tokens`` tokens less ``reserved`` (default: what the heading
    and the guide cost)."""
    cap = max(40, int(budget_tokens * MANIFEST_SHARE))
    if reserved is None:
        reserved = count_tokens(MANIFEST_HEADING + "\n" + MANIFEST_GUIDE)
    total = sum(i.tokens for i in live)
    kinds = Counter(i.kind for i in live)
    kinds_text = ", ".join(
        f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    collapsed = getattr(session, "collapsed_steps", 0)
    gone = f" {collapsed} earlier steps left whole (turn and results)." if collapsed else ""
    text = (
        f"Loaded: {len(live)} items, {total} tokens ({kinds_text or 'none'}). "
        f"Stored outside the prompt: {counts.get('warm', 0)} warm, {counts.get('cold', 0)} "
        f"cold.{gone}"
    )
    cap = max(0, cap - reserved)
    pinned = [i for i in live if i.pinned]
    by_hand = [i for i in live if i.loaded_by_hand and not i.pinned]
    listed = 0
    for title, group in (("Pinned", pinned), ("Loaded by hand", by_hand)):
        for item in group:
            if listed >= MAX_LISTED:
                break
            line = f"- {title.lower()}: {_label(item)}"
            if count_tokens(text + "\n" + line) > cap:
                return text
            text += "\n" + line
            listed += 1
    return text


def manifest_section(session: PluginSession) -> PromptSection | None:
    """The whole manifest for ``session`` as one section (None when the context layer is
    off): what :meth:`veil.harness.VeilHarness.manifest` shows."""
    if not session.veil.context_layer_on:
        return None
    model = session.veil.llm.model_for("main", session.model)
    counts = session.veil.tier_counts(session.id)
    budget = session.config.settings.context.budget_tokens or session.context_window
    guide = manifest_guide(session.offered_tools)
    text = build_manifest(
        session, list(session.live_items), counts, budget, model.count_tokens, guide
    )
    return PromptSection("manifest", text, order=MANIFEST_ORDER, volatile=True)


def manifest_sections(session: PluginSession) -> list[PromptSection]:
    """The manifest as the prompt carries it (empty when the context layer is off): the
    stable ``manifest_guide`` (heading and how stubs are followed back; system message) and
    the volatile ``manifest`` (counts and listing), anchored: refreshed at change moments only
    (issue 18: "updated only when a pass runs"), so between passes it costs cached tokens."""
    if not session.veil.context_layer_on:
        return []
    model = session.veil.llm.model_for("main", session.model)
    counts = session.veil.tier_counts(session.id)
    budget = session.config.settings.context.budget_tokens or session.context_window
    guide = MANIFEST_HEADING + "\n" + manifest_guide(session.offered_tools)
    reserved = model.count_tokens(guide)
    text = manifest_counts(
        session, list(session.live_items), counts, budget, model.count_tokens, reserved=reserved
    )
    return [
        PromptSection("manifest_guide", guide, order=MANIFEST_ORDER),
        PromptSection("manifest", text, order=MANIFEST_ORDER, volatile=True, anchored=True),
    ]
