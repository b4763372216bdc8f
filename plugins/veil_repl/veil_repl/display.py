"""How the REPL shows render events (rich console): streamed text, tool calls, evictions."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

active: Display | None = None
"""The display of the running REPL, or None (render events are then ignored)."""

RESULT_PREVIEW_CHARS = 200


def short(text: str, limit: int = RESULT_PREVIEW_CHARS) -> str:
    """One line of at most ``limit`` characters (whitespace folded, "…" when cut)."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def format_arguments(arguments: dict[str, Any] | None, limit: int = 120) -> str:
    """``key=value, ...`` of a tool call's arguments, cut to ``limit`` characters."""
    if arguments is None:
        return "(invalid arguments)"
    parts = [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items()]
    return short(", ".join(parts), limit)


class Display:
    """Prints events to a rich console; remembers tool-call lines so evictions can dim them."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.streaming = False
        self.calls: dict[str, str] = {}  # tool_call_id -> the line shown for the call
        self.evicted: set[str] = set()

    def _end_stream(self) -> None:
        if self.streaming:
            self.console.print()
            self.streaming = False

    def show(self, event: Any) -> None:
        """Print one :class:`~veil.core.types.RenderEvent`."""
        data = event.data
        kind = event.kind
        if kind == "token":
            self.console.print(escape(data.get("text", "")), end="")
            self.streaming = True
            return
        self._end_stream()
        if kind == "tool_call":
            line = f"{data.get('name')}({format_arguments(data.get('arguments'))})"
            self.calls[data.get("toolCallId", "")] = line
            self.console.print(f"[cyan]⏺ {escape(line)}[/cyan]")
        elif kind == "tool_result":
            style = "red" if data.get("isError") else "dim"
            if data.get("denied"):  # refused by the permission rules or the user: not a failure
                style = "yellow"
            self.console.print(f"  [{style}]⎿ {escape(short(data.get('content', '')))}[/{style}]")
        elif kind == "eviction":
            for item in data.get("items", []):
                call_id = item.get("toolCallId")
                label = self.calls.get(call_id or "", item.get("id", ""))
                if item.get("tier") == "live":  # paged back in by the eviction pass
                    self.evicted.discard(call_id or item.get("id", ""))
                    self.console.print(f"[green]⏺ {escape(label)}[/green] [dim]← paged in[/dim]")
                    continue
                self.evicted.add(call_id or item.get("id", ""))
                self.console.print(
                    f"[dim strike]⏺ {escape(label)}[/dim strike] [dim]→ {item.get('tier')} "
                    f"({escape(item.get('reason') or 'evicted')})[/dim]"
                )
            for line in data.get("report", []):
                self.console.print(f"[yellow]{escape(line)}[/yellow]")
        elif kind == "compaction":
            self.console.print(
                f"[magenta]{escape(data.get('text', 'context compacted'))}[/magenta]"
            )
        elif kind in ("warning", "halt"):
            self.console.print(
                f"[yellow]⚠ {escape(data.get('message') or data.get('text', ''))}[/yellow]"
            )
        elif kind == "error":
            self.console.print(f"[red]{escape(data.get('text', ''))}[/red]")
        elif kind == "info":
            self.console.print(f"[dim]{escape(data.get('text', ''))}[/dim]")
