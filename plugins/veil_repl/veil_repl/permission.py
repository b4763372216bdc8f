"""The REPL's permission prompt: allow a tool call once, for this session, or deny it
(:func:`veil.core.safety.permissions.authorize` calls it through the ``ask_permission`` hook)."""

from __future__ import annotations

from typing import Any

from prompt_toolkit import PromptSession
from rich.markup import escape

from veil import PROMPT_CHOICES, PermissionRequest, parse_answer

active: PermissionPrompt | None = None
"""The prompt of the running REPL, or None (``ask_permission`` then leaves the call to the
rules: nobody is there to answer)."""

ANSWER_LINES = {
    "once": "[green]allowed once[/green]",
    "session": "[green]allowed for this session: {rule}[/green]",
    "deny": "[yellow]denied: the model is told[/yellow]",
}


class PermissionPrompt:
    """Asks on the REPL's own terminal (its prompt-toolkit input and output, so tests drive it
    with a pipe input).

    Args:
        console: the REPL's rich console, where the question and the answer are printed.
        input, output: the prompt-toolkit input and output the REPL reads from (None: the
            terminal).
        before: called before asking (ends a streamed line so the question starts on its own).
    """

    def __init__(
        self, console: Any, *, input: Any = None, output: Any = None, before: Any = None
    ) -> None:
        self.console = console
        self.session: PromptSession[str] = PromptSession(input=input, output=output)
        self.before = before

    def ask(self, request: PermissionRequest) -> str:
        """Show the call and read ``y`` / ``a`` / ``n`` (``1`` / ``2`` / ``3``) until one comes.

        Returns:
            ``"once"``, ``"session"`` or ``"deny"``; end of input (Ctrl-D) is ``"deny"``.

        Raises:
            KeyboardInterrupt: Ctrl-C stops the turn, as it does anywhere in the REPL (the call
                is answered "[interrupted by the user]").
        """
        if self.before is not None:
            self.before()
        self.console.print(
            f"[bold yellow]? allow {escape(request.describe())}[/bold yellow] "
            f"[dim]({escape(request.reason)})[/dim]"
        )
        self.console.print(escape(PROMPT_CHOICES.format(rule=request.session_rule)))
        while True:
            try:
                # Enter after the key, as git's interactive prompts (singleKey off) and apt ask:
                # a key that answered alone would leave the "es" of a habitual "yes" to be read
                # as the next chat message
                typed = self.session.prompt("allow? y/a/n, then Enter: ")
            except EOFError:
                typed = "n"
            answer = parse_answer(typed)
            if answer is not None:
                line = ANSWER_LINES[answer].format(rule=escape(request.session_rule))
                self.console.print(f"  {line}")
                return answer
            self.console.print("[dim]type y (once), a (this session) or n (deny)[/dim]")
