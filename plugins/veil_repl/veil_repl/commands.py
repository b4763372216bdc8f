"""The REPL's own slash commands: /model, /sessions, /context."""

from __future__ import annotations

import datetime as dt
import shutil
from typing import Any

from veil import SlashCommand, VeilError
from veil_repl import display


def _model(session: Any, arg: str) -> str:
    """``/model``: show the session's model; ``/model NAME`` switches to NAME when a configured
    provider can serve it (:meth:`veil.core.models.llm.LLM.unservable_reason`), else says why and keeps
    the model in use. A NAME that is a credential (:meth:`veil.core.app.Veil.check_model_name`)
    is refused without being repeated."""
    llm = session.veil.llm
    model = llm.model_for("main", session.model)
    name = arg.strip()
    if not name:
        return (
            f"model: {model.name} ({model.provider}), context window {model.context_window} tokens"
        )
    try:
        session.veil.check_model_name(name, field="/model NAME")
    except VeilError as exc:  # says why without the value, which is not echoed either
        return f"{exc.message}. Still using {model.name}."
    try:
        reason = None if name == "default" else llm.unservable_reason(name)
    except VeilError as exc:
        reason = exc.message
    if reason:
        return f"/model {name}: cannot be used: {reason}. Still using {model.name}."
    session.veil.update_session(session, model=name)
    model = llm.model_for("main", session.model)
    return f"model for this session: {model.name} ({model.provider}), window {model.context_window} tokens"


def _sessions(session: Any, arg: str) -> str:
    rows = session.veil.list_sessions(limit=int(arg) if arg.strip().isdigit() else 15)
    lines = []
    for r in rows:
        when = dt.datetime.fromtimestamp(r["updated_at"]).strftime("%Y-%m-%d %H:%M")
        mark = "*" if r["id"] == session.id else " "
        lines.append(
            f"{mark} {r['id']}  {when}  {r['message_count']:>4} msgs  {(r['title'] or '')[:50]}"
        )
    return "\n".join(lines) + "\n(resume one with: veil --resume ID)"


def budget_line(session: Any) -> str:
    """The budget the kept messages get in this session and where it comes from (the rule of
    :func:`veil.core.prompt.context.build_prompt` and veil_fsrs' eviction pass; docs/context.md,
    "Budgets"):

    - ``context.budgetTokens`` set: that many tokens, never more than the window leaves;
    - else, with an eviction plugin that reads ``context.targetTokens`` (veil_fsrs; 8,000 by
      default) and a window that leaves more: eviction passes aim at the target;
    - else the window: the context window less the completion reserve
      (:func:`veil.completion_reserve`), capped by the full-compaction trigger
      (``compaction.threshold`` x the window).

    Each prompt also leaves out the system prompt and the tool schemas (their tokens vary from
    call to call), so the window's figure is an upper bound; the line says so.
    """
    from veil import completion_reserve

    settings = session.config.settings
    window = int(session.context_window)
    layer_on = bool(session.veil.context_layer_on)
    reserve = completion_reserve(session)
    trigger = int(settings.compaction.trigger(layer_on) * window)
    room = max(0, min(window - reserve, trigger))
    from_window = (
        f"context window {window:,} less {reserve:,} reserved for the answer"
        + (f", capped at the compaction trigger {trigger:,}" if trigger < window - reserve else "")
        + ", less the system prompt and tool schemas"
    )
    setting = settings.context.budget_tokens
    if setting:
        shown = min(int(setting), room)
        cut = f"; the window leaves {room:,}" if shown < setting else ""
        return f"budget: {shown:,} tokens (context.budgetTokens {setting:,}{cut})"
    target = getattr(settings.context, "target_tokens", None)  # veil_fsrs' field, when loaded
    if layer_on and isinstance(target, int) and 0 < target < room:
        return (
            f"budget: {target:,} tokens (context.targetTokens: eviction aims there; "
            f"the window allows up to {room:,}: {from_window})"
        )
    return f"budget: up to {room:,} tokens (the window: {from_window}; context.budgetTokens unset)"


def _summary(session: Any, report: dict[str, Any], status: Any) -> list[str]:
    """The one-screen view: context use, cache, tiers, tokens by kind, what changed."""
    window = session.context_window
    lines = []
    prompt = status.prompt_tokens if status is not None else None
    if prompt is None:
        prompt = report["lastPromptTokens"] or None
    if prompt:
        share = 100 * prompt / max(window, 1)
        lines.append(
            f"last prompt: {prompt:,} of {window:,} tokens ({share:.0f}% of the context window)"
        )
        if status is not None and status.cached_share is not None:
            lines.append(
                f"cached: {status.cached_tokens:,} of {prompt:,} prompt tokens "
                f"({status.cached_share:.0f}%) read from the provider's prompt cache"
            )
        elif status is not None and status.prompt_tokens is not None:
            lines.append("cached: the provider does not report its prompt cache")
    else:
        lines.append(f"last prompt: none yet (context window {window:,} tokens)")
    tiers = report["tiers"]
    items = list(session.live_items)
    live_tokens = sum(i.tokens for i in items)
    pinned = sum(1 for i in items if i.pinned)
    lines.append(
        f"items: live {tiers['live']} ({live_tokens:,} tokens, {pinned} pinned), "
        f"warm {tiers['warm']}, cold {tiers['cold']}"
    )
    lines.append(budget_line(session))
    excerpts = report.get("excerpts") or []
    if excerpts:
        shown = ", ".join(f"#{e['messageIndex']} {e['lines']}/{e['of']}" for e in excerpts[:12])
        more = f" and {len(excerpts) - 12} more" if len(excerpts) > 12 else ""
        lines.append(
            f"excerpts (warm, some lines still shown; lines shown/all): {shown}{more}; "
            'veil_hydrate("#N") loads one whole'
        )
    by_kind: dict[str, list[int]] = {}
    for item in items:
        entry = by_kind.setdefault(item.kind, [0, 0])
        entry[0] += 1
        entry[1] += item.tokens
    if by_kind:
        kinds = sorted(by_kind.items(), key=lambda kv: -kv[1][1])
        lines.append(
            "live by kind (items/tokens): " + ", ".join(f"{k} {n}/{t:,}" for k, (n, t) in kinds)
        )
    if session.compact_size:
        lines.append(f"compacted: the first {session.compact_size} messages are a summary")
    for event in getattr(display.active, "compactions", None) or []:
        before, after = event.get("tokensBefore"), event.get("tokensAfter")
        count = event.get("compactedCount")
        if isinstance(before, int) and isinstance(after, int):
            what = f"{count} messages" if isinstance(count, int) else "the conversation"
            lines.append(
                f"since the last request: compacted {what}, conversation {before:,} -> "
                f"{after:,} tokens ({after - before:+,})"
            )
        else:
            lines.append(f"since the last request: {event.get('text', 'compacted')}")
    return lines


def _context(session: Any, arg: str) -> str:
    """``/context``: a summary (context use, cache, tiers, what changed since the last request),
    then the live items by score with the answering scorer's own signals."""
    from veil import context_report

    report = context_report(session)
    status = display.active.status if display.active is not None else None
    lines = _summary(session, report, status)
    if not session.veil.context_layer_on:
        lines.append("context layer off: no scorer or eviction plugin loaded")
        return "\n".join(lines)
    scored = session.veil.score_items(session)
    items = scored.items
    scores = scored.scores if scored.scores is not None else [0.0] * len(items)
    signals = scored.signals
    names = list(signals)
    lines.append(
        f"scored by {scored.scorer}"
        + (f" (signals: {', '.join(names)})" if names else " (it gives no signals)")
    )
    lines.append("")
    header = "score " + "".join(f"{n[:5]:>5} " for n in names) + "flags kind        tokens id"
    lines.append(header)
    ranked = sorted(range(len(items)), key=lambda i: -float(scores[i]))
    # the preview takes what the terminal leaves of its width (rows stay one line)
    fixed = len(header) + len("item_") + 14
    width = max(16, min(50, shutil.get_terminal_size((100, 30)).columns - fixed))
    for i in ranked[:40]:
        item = items[i]
        preview = " ".join(item.content.split())[:width]
        flags = ("P" if item.pinned else "-") + ("H" if item.loaded_by_hand else "-")
        parts = "".join(f"{float(signals[n][i]):5.2f} " for n in names)
        lines.append(
            f"{float(scores[i]):.3f} {parts}{flags:>5} {item.kind:<11} {item.tokens:>6} "
            f"{item.id}  {preview}"
        )
    if len(items) > 40:
        lines.append(f"... and {len(items) - 40} more live items (lowest scores)")
    return "\n".join(lines)


def slash_commands(veil: Any) -> list[SlashCommand]:
    """The commands this plugin adds (``/help`` and ``/exit`` are built into the REPL loop)."""
    return [
        SlashCommand("model", "show the model, or /model NAME to switch this session", _model),
        SlashCommand("sessions", "list recent sessions", _sessions),
        SlashCommand(
            "context",
            "context use, cache and tiers, what changed; then the items with their scores",
            _context,
        ),
    ]
