"""The interactive loop: read a message (prompt-toolkit), run the turn, show what happens."""

from __future__ import annotations

from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.markup import escape

from veil.core.errors import SessionConflict, UnsafeVeilPath
from veil.core.paths import veil_file
from veil_repl import display, permission

HELP_HEADER = (
    "Enter sends; Esc then Enter (or Alt-Enter) adds a line; Ctrl-C stops a turn; Ctrl-D leaves."
)


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
        # prompt-toolkit appends to the file through any link: a linked .veil/history (a cloned
        # repository's) is refused, and this session keeps its history in memory instead.
        self.history_warning: str | None = None
        history: History
        try:
            path = veil_file(veil.config.project_dir, "history")
            path.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(path))
        except UnsafeVeilPath as exc:
            self.history_warning = f"input history not saved: {exc.message}"
            history = InMemoryHistory()
        self.prompt = PromptSession(
            history=history,
            multiline=True,
            key_bindings=_bindings(),
            input=input,
            output=output,
            prompt_continuation="… ",
        )
        self.display = display.Display(console)
        self.permission_prompt = permission.PermissionPrompt(
            self.display.console, input=input, output=output, before=self.display._end_stream
        )
        self.commands = veil.slash_commands()

    def banner(self) -> None:
        """Say which session, model and context layer are in use."""
        c = self.display.console
        model = self.veil.llm.model_for("main", self.session.model)
        resumed = " (resumed)" if self.session.resumed else ""
        c.print(
            f"[bold]veil[/bold] · session {self.session.id}{resumed} · model {model.name}"
            f" ({model.context_window} tokens)"
        )
        if self.veil.llm.notice:
            c.print(f"[yellow]{self.veil.llm.notice}[/yellow]")
            self.veil.llm.notice_shown = True
        if not self.veil.context_layer_on:
            c.print("[dim]context layer off: no scorer or eviction plugin loaded[/dim]")
        if self.history_warning:
            c.print(f"[yellow]{escape(self.history_warning)}[/yellow]")
        c.print(f"[dim]{HELP_HEADER} /help lists commands.[/dim]")

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
            self.display.console.print(f"[red]unknown command /{name}[/red]; /help lists them")
            return True
        try:
            out = cmd.handler(self.session, arg.strip())
        except Exception as exc:  # noqa: BLE001 - a command's error is shown, the REPL goes on
            out = f"/{name} failed: {exc}"
        if out:
            self.display.console.print(out, markup=False, highlight=False)
        return True

    def run_message(self, text: str) -> None:
        """Run one turn, streaming to the console. When another process (``veil -p``, a
        server) changed the session since this REPL loaded it, the REPL loads it again and
        runs the turn on that (the refused attempt stored nothing)."""
        try:
            result = self.veil.run_turn(self.session, text)
        except SessionConflict:
            self.session = self.veil.load_session(self.session.id)
            self.display.console.print(
                "[yellow]this session was changed by another veil process; "
                "continuing from its latest state[/yellow]"
            )
            result = self.veil.run_turn(self.session, text)
        self.display._end_stream()
        if result.status == "halted":
            # convergence halt: the run stops and the user decides what happens next
            self.display.console.print(
                f"[yellow]halted: {result.reason}[/yellow]\n"
                "[bold]How should I go on?[/bold] Answer with a new direction, or /exit."
            )
        elif result.status != "done":
            self.display.console.print(f"[yellow]{result.status}: {result.reason}[/yellow]")

    def run(self) -> None:
        """Loop until /exit or Ctrl-D."""
        display.active = self.display
        permission.active = self.permission_prompt
        try:
            self.banner()
            while True:
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
                    self.display.console.print(f"[red]error: {message}[/red]")
        finally:
            display.active = None
            permission.active = None
            self.veil.pm.hook.session_end(session=self.session)
