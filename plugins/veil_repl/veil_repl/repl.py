"""The interactive loop: read a message (prompt-toolkit), run the turn, show what happens."""

from __future__ import annotations

from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.history import History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.utils import is_dumb_terminal
from rich.markup import escape

from veil import SessionConflict, UnsafeVeilPath, VeilError, start_loader, veil_file
from veil_repl import display, permission
from veil_repl.history import RedactedFileHistory, kept_text
from veil_repl.status import ContextStatus

HELP_HEADER = "Enter sends · Esc Enter (Alt-Enter): new line · Ctrl-C stops a turn · Ctrl-D leaves"
"""The banner's key help (one line of a 100-column terminal with " · /help")."""

RESUME_EXCHANGES = 3
"""How many of the last exchanges (a user message and what answered it) a resumed session shows."""

EXCHANGE_CHARS = 180
"""Longest line of a shown exchange (two lines of a 100-column terminal, less the margin)."""


def last_exchanges(
    messages: list[dict[str, Any]], count: int = RESUME_EXCHANGES
) -> list[tuple[str, str, int]]:
    """The last ``count`` exchanges of a history: ``(user text, final answer text, tool calls
    made)`` in order, an exchange being a user message and the messages up to the next one.
    veil's own context notes (:data:`veil.core.prompt.assemble.NOTE_PREFIX`) are not user messages."""
    from veil import NOTE_PREFIX

    exchanges: list[tuple[str, str, int]] = []
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        if message.get("role") == "user" and not text.startswith(NOTE_PREFIX):
            exchanges.append((text, "", 0))
        elif exchanges and message.get("role") == "assistant":
            user, answer, calls = exchanges[-1]
            calls += len(message.get("tool_calls") or [])
            exchanges[-1] = (user, text or answer, calls)
    return exchanges[-count:] if count > 0 else []


def warm_up(veil: Any, model: str | None = None) -> None:
    """Load what the first turn needs while the user types its message
    (:meth:`veil.core.app.Veil.prepare`: the loop's modules, the tokenizer, litellm only when
    the session's model goes through it), then the embedding model behind eviction's rescue
    and recall (about 5 s). Without it the first turn shows nothing for those seconds before
    the spinner starts. Runs on a loader thread (veil.core.background), which ends at its
    next import when veil exits; a failure here is left for the turn itself to report."""
    try:
        if not veil.llm.is_offline_default:
            veil.prepare(model)
        if veil.context_layer_on:
            veil.tiers.embedder.warm()
    except Exception:  # noqa: BLE001 - the first turn meets (and reports) the same problem
        return


def _bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    @kb.add("enter")
    def _submit(event: Any) -> None:
        event.current_buffer.validate_and_handle()

    return kb


class Repl:
    """The REPL on one session.

    Args:
        veil: the open :class:`~veil.core.app.Veil`.
        session: the session to talk in.
        input/output: prompt-toolkit input and output (tests pass pipe input / dummy output).
    """

    def __init__(
        self, veil: Any, session: Any, *, input: Any = None, output: Any = None, console: Any = None
    ) -> None:
        self.veil = veil
        self.session = session
        # what is kept or shown of the user's input: credentials redacted, as in the store
        self.kept = kept_text(veil.redactor)
        # prompt-toolkit appends to the file through any link: a linked .veil/history (a cloned
        # repository's) is refused, and this session keeps its history in memory instead.
        self.history_warning: str | None = None
        history: History
        try:
            path = veil_file(veil.config.project_dir, "history")
            path.parent.mkdir(parents=True, exist_ok=True)
            history = RedactedFileHistory(path, self.kept)
        except UnsafeVeilPath as exc:
            self.history_warning = f"input history not saved: {exc.message}"
            history = InMemoryHistory()
        self.status = self._initial_status()
        self.status_text = self.status.line()
        self.prompt = PromptSession(
            history=history,
            multiline=True,
            key_bindings=_bindings(),
            input=input,
            output=output,
            prompt_continuation="… ",
            bottom_toolbar=self.toolbar,
        )
        self.display = display.Display(console, status=self.status)
        self.permission_prompt = permission.PermissionPrompt(
            self.display.console, input=input, output=output, before=self.display._end_stream
        )
        self.commands = veil.slash_commands()
        self._warm_up_started = False

    def _initial_status(self) -> ContextStatus:
        """The status of the session as loaded: its model, and for a resumed session the usage
        stored with its latest answer."""
        model = self.veil.llm.model_for("main", self.session.model)
        status = ContextStatus(model=model.name, context_window=model.context_window)
        if self.session.resumed:
            usage = self.veil.last_usage(self.session.id)
            if usage:
                status.take_usage(usage)
        return status

    def refresh_status(self) -> str:
        """Recompute the status line (model and window after a /model, tier counts) and return
        it; called before each prompt, not at each redraw (tier counts are a query)."""
        from veil import context_report

        try:
            model = self.veil.llm.model_for("main", self.session.model)
            self.status.model, self.status.context_window = model.name, model.context_window
        except VeilError:
            pass  # the banner or the next turn says what is wrong with the model
        self.status.tiers = dict(context_report(self.session)["tiers"])
        self.status_text = self.status.line()
        return self.status_text

    def toolbar(self) -> str:
        """prompt-toolkit's ``bottom_toolbar``: the status line (see :mod:`veil_repl.status`)."""
        return " " + self.status_text

    def banner(self) -> None:
        """Say which session, model and context layer are in use."""
        c = self.display.console
        model = self.veil.llm.model_for("main", self.session.model)
        resumed = " (resumed)" if self.session.resumed else ""
        c.print(
            f"[bold]veil[/bold] · session {self.session.id}{resumed} · model {model.name}"
            f" ({model.context_window:,} tokens)"
        )
        if self.veil.llm.notice:
            c.print(f"[yellow]{self.veil.llm.notice}[/yellow]")
            self.veil.llm.notice_shown = True
        if not self.veil.context_layer_on:
            c.print("[dim]context layer off: no scorer or eviction plugin loaded[/dim]")
        if self.history_warning:
            c.print(f"[yellow]{escape(self.history_warning)}[/yellow]")
        if self.session.resumed:
            self.show_last_exchanges()
        c.print(f"[dim]{HELP_HEADER} · /help[/dim]")

    def show_last_exchanges(self) -> None:
        """Print the last exchanges of a resumed session (``veil -c``, ``--resume``)."""
        c = self.display.console
        every = last_exchanges(self.session.messages, count=len(self.session.messages))
        exchanges = every[-RESUME_EXCHANGES:]
        if not exchanges:
            return
        c.print(f"[dim]── resumed: the last {len(exchanges)} of {len(every)} exchanges ──[/dim]")
        for user, answer, calls in exchanges:
            c.print(f"[bold]›[/bold] {escape(display.short(user, EXCHANGE_CHARS))}")
            tools = f"[dim]({calls} tool call{'s' if calls != 1 else ''})[/dim] " if calls else ""
            text = (
                escape(display.short(answer, EXCHANGE_CHARS))
                if answer
                else "[dim](no answer)[/dim]"
            )
            c.print(f"  {tools}{text}")
        c.print("[dim]──[/dim]")

    def help_text(self) -> str:
        """The /help answer: built-in and plugin commands."""
        lines = ["/help  this list", "/exit  leave (Ctrl-D too)"]
        for name, cmd in sorted(self.commands.items()):
            lines.append(f"/{name}  {cmd.help}")
        return "\n".join(lines)

    def handle_slash(self, text: str) -> bool:
        """Run a slash command; return False when the REPL should stop."""
        name, _, arg = text[1:].partition(" ")
        if name in ("exit", "quit"):
            return False
        if name == "help":
            self.display.console.print(self.help_text())
            return True
        cmd = self.commands.get(name)
        if cmd is None:
            self.display.console.print(
                f"[red]unknown command /{escape(self.kept(name))}[/red]; /help lists them"
            )
            return True
        # a command that compacts (/compact) reports the result itself: the compaction event's
        # line is held and shown only when the command says nothing
        self.display.held = []
        # a spinner while the command works (/compact calls the model for a while); a model
        # call it makes shows its own, and any event it shows stops it
        self.display.start_working(f"/{name}")
        try:
            out = cmd.handler(self.session, arg.strip())
        except Exception as exc:  # noqa: BLE001 - a command's error is shown, the REPL goes on
            out = self.kept(f"/{name} failed: {exc}")
        finally:
            self.display.stop_waiting()
            held, self.display.held = self.display.held, None
        if out:
            self.display.console.print(out, markup=False, highlight=False)
        else:
            for line in held:
                self.display.console.print(line)
        return True

    def run_message(self, text: str) -> None:
        """Run one turn, streaming to the console. When another process (``veil -p``, a
        server) changed the session since this REPL loaded it, the REPL loads it again and
        runs the turn on that (the refused attempt stored nothing)."""
        try:
            try:
                result = self.veil.run_turn(self.session, text)
            except SessionConflict:
                self.display.stop_waiting()
                self.session = self.veil.load_session(self.session.id)
                self.display.console.print(
                    "[yellow]this session was changed by another veil process; "
                    "continuing from its latest state[/yellow]"
                )
                result = self.veil.run_turn(self.session, text)
        finally:
            self.display._end_stream()  # the spinner too, on Ctrl-C or an error
        if result.status == "halted":
            # convergence halt: the run stops and the user decides what happens next
            self.display.console.print(
                f"[yellow]halted: {result.reason}[/yellow]\n"
                "[bold]How should I go on?[/bold] Answer with a new direction, or /exit."
            )
        elif result.status != "done":
            self.display.console.print(f"[yellow]{result.status}: {result.reason}[/yellow]")

    def start_warm_up(self, *_: Any) -> None:
        """Start :func:`warm_up` on a loader thread (stopped at its next import when veil exits:
        veil.core.background), once."""
        if self._warm_up_started:
            return
        self._warm_up_started = True
        start_loader("veil-warm-up", lambda: warm_up(self.veil, self.session.model))

    def run(self) -> None:
        """Loop until /exit or Ctrl-D."""
        display.active = self.display
        permission.active = self.permission_prompt
        if is_dumb_terminal():  # a dumb terminal's prompt is drawn by another application
            self.start_warm_up()
        else:  # once the first prompt is on screen: loading competes with drawing it
            self.prompt.app.after_render += self.start_warm_up
        try:
            self.banner()
            while True:
                self.refresh_status()
                try:
                    text = self.prompt.prompt("› ")
                except KeyboardInterrupt:
                    continue
                except EOFError:
                    break
                text = text.strip()
                if not text:
                    continue
                if text.startswith("/"):
                    if not self.handle_slash(text):
                        break
                    continue
                try:
                    self.run_message(text)
                except KeyboardInterrupt:
                    self.display.console.print("[yellow]interrupted[/yellow]")
                except Exception as exc:  # noqa: BLE001 - keep the REPL alive, show the error
                    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                    self.display.console.print(f"[red]error: {escape(self.kept(message))}[/red]")
        finally:
            display.active = None
            permission.active = None
