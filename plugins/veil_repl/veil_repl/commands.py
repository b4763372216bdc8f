"""The REPL's own slash commands: /model, /sessions, /context."""

from __future__ import annotations

import datetime as dt
from typing import Any

from veil.core.types import SlashCommand


def _model(session: Any, arg: str) -> str:
    llm = session.veil.llm
    model = llm.model_for("main", session.model)
    if arg.strip():
        session.model = arg.strip()
        session.veil.store.update_session(session.id, model=session.model)
        model = llm.model_for("main", session.model)
        return f"model for this session: {model.name} ({model.provider}), window {model.context_window} tokens"
    return f"model: {model.name} ({model.provider}), context window {model.context_window} tokens"


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


def _context(session: Any, arg: str) -> str:
    from veil.core.context import context_report

    report = context_report(session)
    tiers = report["tiers"]
    lines = [
        f"last prompt: {report['lastPromptTokens']} tokens of {session.context_window}; "
        f"items live {tiers['live']}, warm {tiers['warm']}, cold {tiers['cold']}"
    ]
    if not session.veil.context_layer_on:
        lines.append("context layer off: no scorer or eviction plugin loaded")
        return "\n".join(lines)
    items = session.live_items
    now = session.clock()
    hook = session.veil.pm.hook
    scores = hook.score(session=session, items=items, task_tags=session.task_tags, now=now)
    signals = hook.score_signals(session=session, items=items, task_tags=session.task_tags, now=now)
    scores = list(scores) if scores is not None else [0.0] * len(items)
    names = list(signals or {})
    header = "score " + " ".join(f"{n[:5]:>5}" for n in names) + " flags kind        tokens id"
    lines.append(header)
    ranked = sorted(range(len(items)), key=lambda i: -float(scores[i]))
    for i in ranked[:40]:
        item = items[i]
        preview = " ".join(item.content.split())[:50]
        flags = ("P" if item.pinned else "-") + ("H" if item.loaded_by_hand else "-")
        parts = " ".join(f"{float(signals[n][i]):5.2f}" for n in names)
        lines.append(
            f"{float(scores[i]):.3f} {parts} {flags:>5} {item.kind:<11} {item.tokens:>6} "
            f"{item.id}  {preview}"
        )
    return "\n".join(lines)


def slash_commands(veil: Any) -> list[SlashCommand]:
    """The commands this plugin adds (``/help`` and ``/exit`` are built into the REPL loop)."""
    return [
        SlashCommand("model", "show the model, or /model NAME to switch this session", _model),
        SlashCommand("sessions", "list recent sessions", _sessions),
        SlashCommand("context", "loaded items with score and signals; warm/cold counts", _context),
    ]
