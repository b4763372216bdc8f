"""How the REPL shows render events (rich console): a spinner with the elapsed time while the
model has not answered yet, streamed text, tool calls, evictions."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner
from rich.text import Text

from veil_repl.status import ContextStatus

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


def waiting_text(model: str, elapsed: float, prompt_tokens: int, context_window: int) -> str:
    """The spinner's text: ``thinking… 3.2s · gpt-4o · prompt 2,048/8,192 tokens``
    (``prompt_tokens`` as veil counted them before the call: the provider's figure comes with
    the answer)."""
    return (
        f"thinking… {elapsed:.1f}s · {model} · prompt {prompt_tokens:,}/{context_window:,} tokens"
    )


class _Waiting:
    """A spinner whose text shows the seconds since the model call started, recomputed at
    each refresh of the :class:`rich.live.Live` showing it."""

    def __init__(self, text: Callable[[float], str], clock: Callable[[], float]) -> None:
        self.started = clock()
        self._text = text
        self._clock = clock
        self.spinner = Spinner("dots", style="cyan")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        self.spinner.text = Text(self._text(self._clock() - self.started), style="dim")
        yield self.spinner


class Display:
    """Prints events to a rich console; remembers tool-call lines so evictions can dim them.

    Args:
        console: where to print (a terminal console by default).
        status: the status line's figures, updated from ``usage`` events (a fresh one for a
            model named ``?`` when not given).
        refresh_per_second: how often the waiting spinner redraws its elapsed time.

    On a ``model_call`` event a spinner with the elapsed seconds runs (on a terminal only; it
    is drawn by rich's refresh thread and erased when it stops) until the first token, the
    ``usage`` of an answer without text, or any other event arrives.
    """

    def __init__(
        self,
        console: Console | None = None,
        status: ContextStatus | None = None,
        refresh_per_second: float = 8.0,
    ) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.status = status or ContextStatus(model="?", context_window=0)
        self.streaming = False
        self.calls: dict[str, str] = {}  # tool_call_id -> the line shown for the call
        self.evicted: set[str] = set()
        self.refresh_per_second = refresh_per_second
        self.clock: Callable[[], float] = time.monotonic
        self._live: Live | None = None
        # while a slash command runs, its own answer reports a compaction: the event's line
        # is kept here instead of printed (printed only if the command says nothing)
        self.held: list[str] | None = None
        self.compactions: list[dict[str, Any]] = []  # compaction events since the last request

    @property
    def waiting(self) -> bool:
        """Whether the spinner is running."""
        return self._live is not None

    def start_waiting(self, model: str, prompt_tokens: int, context_window: int) -> None:
        """Run the spinner until :meth:`stop_waiting` (nothing shows on a non-terminal)."""
        self.stop_waiting()
        waiting = _Waiting(
            lambda s: waiting_text(model, s, prompt_tokens, context_window), self.clock
        )
        self._live = Live(
            waiting,
            console=self.console,
            refresh_per_second=self.refresh_per_second,
            transient=True,
        )
        self._live.start()

    def start_working(self, label: str) -> None:
        """Run the spinner for something other than a model call, such as a slash command that
        calls the model itself (``/compact``): ``/compact… 3.2s``; stopped like the other by
        :meth:`stop_waiting` or any event shown."""
        self.stop_waiting()
        waiting = _Waiting(lambda s: f"{label}… {s:.1f}s", self.clock)
        self._live = Live(
            waiting,
            console=self.console,
            refresh_per_second=self.refresh_per_second,
            transient=True,
        )
        self._live.start()

    def stop_waiting(self) -> None:
        """Stop and erase the spinner (no-op when it does not run)."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def _end_stream(self) -> None:
        self.stop_waiting()
        if self.streaming:
            self.console.print()
            self.streaming = False

    def show(self, event: Any) -> None:
        """Print one :class:`~veil.core.types.RenderEvent`."""
        data = event.data
        kind = event.kind
        if kind == "token":
            self.stop_waiting()
            self.console.print(escape(data.get("text", "")), end="")
            self.streaming = True
            return
        if kind == "model_call":
            self._end_stream()
            self.start_waiting(
                str(data.get("model") or self.status.model),
                int(data.get("promptTokens") or 0),
                int(data.get("contextWindow") or self.status.context_window),
            )
            return
        if kind == "usage":
            self.stop_waiting()  # an answer with tool calls only streams no token
            self.status.take_usage(data)
            self.compactions.clear()  # the new request's figures include them
            return
        self._end_stream()
        if kind == "compaction":
            self.compactions.append(dict(data))
            line = f"[magenta]{escape(data.get('text', 'context compacted'))}[/magenta]"
            if self.held is not None:
                self.held.append(line)
            else:
                self.console.print(line)
            return
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
        elif kind in ("warning", "halt"):
            self.console.print(
                f"[yellow]⚠ {escape(data.get('message') or data.get('text', ''))}[/yellow]"
            )
        elif kind == "error":
            self.console.print(f"[red]{escape(data.get('text', ''))}[/red]")
        elif kind == "info":
            self.console.print(f"[dim]{escape(data.get('text', ''))}[/dim]")
