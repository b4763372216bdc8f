"""veil's memory layer for another Python agent loop (the seed's
``new VeilHarness({dbPath}).getHooks()``, in Python).

The host loop keeps calling its own model; it tells the harness what happened and asks it what
to send::

    harness = VeilHarness(".veil/context.db")
    hooks = harness.get_hooks()
    hooks["on_user_message"]("Fix the failing test")
    while True:
        tools = my_tools + hooks["tools"]
        messages = hooks["build_prompt"](tools)       # system + kept messages + context note
        try:
            reply = my_model(messages, tools=tools)
        except Exception as error:                  # "prompt is too long": a smaller window
            if not hooks["on_context_refused"](error):
                raise
            reply = my_model(hooks["build_prompt"](tools), tools=tools)  # once more
        hooks["on_assistant_message"](reply)
        if not reply.get("tool_calls"):
            break
        for call in reply["tool_calls"]:
            name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
            hooks["before_tool_call"](name, args, call["id"])
            decision = hooks["check_permission"](name, args, call["id"])  # veil's rules
            if not decision.allowed:  # not run; the harness records the refusal
                output = hooks["deny_tool_call"](name, args, call["id"], decision)
            else:
                if hooks["is_memory_tool"](name):
                    output = hooks["call_tool"](name, args, call["id"])
                else:
                    output = my_run_tool(call)
                hooks["after_tool_call"](name, args, call["id"], output)
            # output is this call's tool message content, refused or not

Everything veil does inside its own loop happens here too: ``capture`` on the way in and out
of every tool call, scoring and eviction under pressure, pointer stubs, the manifest, the twelve
memory tools, compaction and convergence when those plugins are installed. The turn is recorded
by the same driver as veil's loop (:mod:`veil.core.turn`): ``after_iteration`` once the last
result of the newest assistant message's calls arrives (once per tool batch), ``turn_end`` when
an assistant message without tool calls arrives (the final answer), so ``autoThreshold``
compaction runs here as in the loop.

Permissions (:mod:`veil.core.safety.permissions`): the host runs its own tools, so checking veil's
rules is its choice: :meth:`VeilHarness.check_permission` applies ``permissions`` from the
settings (the user's ``~/.veil/settings.json``, the project's deny rules) to a call, and asks
the host's ``ask_permission`` callback where the rules say "ask" (refused without one);
:meth:`VeilHarness.deny_tool_call` records a refused call's result. Rules name tools as the host
does, so ``bash(pytest*)`` covers a host tool named ``bash`` with a ``command`` argument; any
other host tool is asked unless a rule or ``permissions.mode`` decides it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from veil.core import turn
from veil.core.prompt.context import build_prompt
from veil.core.safety.permissions import PermissionDecision, PermissionRequest, authorize
from veil.core.text import clean_message, clean_text
from veil.core.types import Message, ToolContext, ToolResult


class VeilHarness:
    """The memory layer over a database path, without veil's agent loop.

    Args:
        db_path: the store (``.veil/context.db``; ``":memory:"`` for a throwaway one).
        project_dir: where settings and memory files are read (default: the db's project, i.e.
            the parent of its ``.veil`` folder, or the current directory).
        context_window: tokens the host's model accepts (default 8,192).
        count_tokens: ``str -> int`` with the host model's tokenizer (default cl100k_base).
        agent: agent name (memory files, agent.json).
        use_entry_points: load installed plugins (scorer, eviction, compaction, memory files...).
        ask_permission: ``request -> "once" | "session" | "deny" | None``, the host's prompt
            for calls the permission rules leave to the user
            (:class:`~veil.core.safety.permissions.PermissionRequest`); None (default): such calls are
            refused, as with ``veil -p`` without a terminal.

    Raises:
        ConfigError: a settings file is invalid (names the file and field).
    """

    def __init__(
        self,
        db_path: str | Path = ".veil/context.db",
        *,
        project_dir: str | Path | None = None,
        context_window: int = 8192,
        count_tokens: Callable[[str], int] | None = None,
        agent: str = "default",
        use_entry_points: bool = True,
        ask_permission: Callable[[PermissionRequest], str | None] | None = None,
    ) -> None:
        from veil.core.app import open_veil
        from veil.core.models.llm import LLM
        from veil.core.settings import load_config

        if project_dir is None and str(db_path) != ":memory:":
            parent = Path(db_path).resolve().parent
            project_dir = parent.parent if parent.name == ".veil" else None
        config = load_config(project_dir)
        self._model = _HostModel(context_window, count_tokens)
        self.veil = open_veil(
            config.project_dir,
            config=config,
            db_path=db_path,
            llm=LLM(config, models={"main": self._model}),
            use_entry_points=use_entry_points,
        )
        self.session = self.veil.new_session(agent=agent)
        self._pending: dict[str, Message] = {}
        self._ask_permission = ask_permission
        self._last_prompt: Any = None  # the last build_prompt's Prompt (on_context_refused)

    @classmethod
    def attach(cls, veil: Any, session: Any) -> VeilHarness:
        """A harness over a session of an already open :class:`~veil.core.app.Veil`, for a
        front end that serves many host conversations from one store (``veil proxy``). The
        session's window and tokenizer are those of its own model (``veil.llm``), not a host
        model's; :meth:`close` closes ``veil``, so a caller that shares it does not call it.

        Args:
            veil: the open project.
            session: one of its sessions (new or resumed).
        """
        harness = cls.__new__(cls)
        harness._model = None
        harness.veil = veil
        harness.session = session
        harness._pending = {}
        harness._ask_permission = None  # nobody to ask: the permission rules decide
        harness._last_prompt = None
        return harness

    # -- what the host tells the harness ---------------------------------------------------------

    def on_user_message(self, text: str) -> None:
        """A user message starts an exchange (task tags are taken from it). Credentials in it
        are redacted before it is stored (as everything the harness is told:
        :mod:`veil.core.safety.redaction`)."""
        turn.record_user(self.session, clean_text(text))

    def on_assistant_message(self, message: Message) -> None:
        """The host's model replied (an OpenAI assistant message, with or without tool calls).

        A reply without tool calls is the final answer: the turn ends here (``turn_end``, as in
        veil's loop, so defaultCompaction's ``autoThreshold`` is checked after it)."""
        message = clean_message(message)
        self.session.step += 1
        msg = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            msg["tool_calls"] = message["tool_calls"]
        idx = turn.record_assistant(self.session, msg)
        msg = self.session.messages[idx]  # as stored, redacted
        for call in msg.get("tool_calls") or []:
            self._pending[call["id"]] = msg
        if not msg.get("tool_calls"):
            turn.end_turn(self.session)

    def before_tool_call(self, name: str, arguments: dict[str, Any], tool_call_id: str) -> None:
        """A tool call is about to run (``capture`` on the way in, arguments redacted)."""
        name, arguments, tool_call_id = clean_message([name, arguments, tool_call_id])
        msg = self._pending.get(tool_call_id, {"role": "assistant", "content": None})
        turn.record_tool_call(
            self.session, msg, name, tool_call_id, self.veil.redactor.value(arguments)
        )

    def after_tool_call(
        self,
        name: str,
        arguments: dict[str, Any],
        tool_call_id: str,
        output: str,
        *,
        is_error: bool = False,
        outcome: str | None = None,
    ) -> None:
        """A tool call returned ``output`` (``capture`` on the way out; stored as its result).

        The result that completes the newest assistant message's calls ends a tool batch:
        ``after_iteration`` runs then, once per batch as in veil's loop (not once per result).

        Text that UTF-8 cannot hold (a lone surrogate, from a tool that decoded bytes with
        ``surrogateescape``, or a JSON ``"\\ud800"`` escape) is stored with U+FFFD in its place,
        as veil's own loop does (:func:`veil.core.text.clean_text`)."""
        name, arguments, tool_call_id, output, outcome = clean_message(
            [name, arguments, tool_call_id, output, outcome]
        )
        self._pending.pop(tool_call_id, None)
        result = ToolResult(output, is_error=is_error, outcome=outcome)  # type: ignore[arg-type]
        idx, _ = turn.record_tool_result(
            self.session, name, tool_call_id, result, self.veil.redactor.value(arguments)
        )
        if turn.completes_batch(self.session, idx):
            turn.end_iteration(self.session, self.session.step)

    def check_permission(
        self, name: str, arguments: dict[str, Any] | str, tool_call_id: str = ""
    ) -> PermissionDecision:
        """Whether the host may run a call, under veil's ``permissions`` rules (deny rules,
        then allow rules and this session's grants, then ``permissions.mode``), asking the
        ``ask_permission`` callback where they say "ask".

        Args:
            name: the tool's name as the model called it.
            arguments: its arguments (a dict, or the JSON text the model sent).
            tool_call_id: the call's id (copied into the request the callback sees).

        Returns:
            A :class:`~veil.core.safety.permissions.PermissionDecision`, ``allowed`` or not; a refusal's
            ``tool_result_text()`` says why and what would allow it.
        """
        name, arguments, tool_call_id = clean_message([name, arguments, tool_call_id])
        if isinstance(arguments, str):
            try:
                parsed = clean_message(json.loads(arguments or "{}"))  # "\\ud800" escapes too
            except ValueError:
                parsed = {}
            arguments = parsed if isinstance(parsed, dict) else {}
        return authorize(self.session, name, arguments, tool_call_id, ask=self._ask_permission)

    def deny_tool_call(
        self,
        name: str,
        arguments: dict[str, Any],
        tool_call_id: str,
        decision: PermissionDecision,
    ) -> str:
        """Record a refused call's result (stored and captured like any result, so the call
        stays paired) and return the text to send the model as its tool message."""
        text = decision.tool_result_text()
        self.after_tool_call(name, arguments, tool_call_id, text, is_error=True)
        return self.session.messages[-1]["content"]

    # -- what the host asks ----------------------------------------------------------------------

    def build_prompt(
        self, tools: list[dict[str, Any]] | None = None, max_tokens: int | None = None
    ) -> list[Message]:
        """The messages to send now: the system message (stable for the whole session: keep
        it first so the provider's prompt cache is reused), any compaction summary, the kept
        history with evicted content as pointer stubs, and a short context note (a ``user``
        message with the manifest's counts and any warning) last.

        Args:
            tools: every tool schema the host will offer with these messages (its own and
                :meth:`tools`); their tokens are left free in the window. None: the memory
                tools only.
            max_tokens: the completion tokens the host will request; left free in the window
                (default ``loop.completionReserve``, 1,024).
        """
        return self.prompt(tools, max_tokens).messages

    def prompt(
        self, tools: list[dict[str, Any]] | None = None, max_tokens: int | None = None
    ) -> Any:
        """:meth:`build_prompt` with everything known about what it built: the
        :class:`veil.core.prompt.context.Prompt` (``messages``, ``tokens``, ``indices`` -- the
        stored message each one shows --, ``tools_tokens``, ``reserve_tokens``, ``notes``)."""
        offered = self.tools() if tools is None else clean_message(tools)
        prompt = build_prompt(self.session, tools=offered, reserve=max_tokens)
        self.session.last_prompt_tokens = prompt.tokens
        self._last_prompt = prompt
        return prompt

    def fixed_tokens(self, tools: list[dict[str, Any]] | None = None) -> tuple[int, int]:
        """Tokens of the system message veil would send now and of the tool schemas ``tools``
        (the memory tools when None), before any message
        (:func:`veil.core.prompt.assemble.fixed_prompt_tokens`)."""
        from veil.core.prompt.assemble import fixed_prompt_tokens

        return fixed_prompt_tokens(self.session, self.tools() if tools is None else tools)

    @property
    def context_window(self) -> int:
        """The window (tokens) the session's prompts are fitted to."""
        return int(self.session.context_window)

    def on_context_refused(self, error: BaseException | str) -> bool:
        """The host's model refused the messages :meth:`build_prompt` gave last as longer than
        its context window (the harness's ``context_window`` or the model's ``contextWindow``
        is larger than the provider accepts): the session learns the window the refusal
        implies and keeps it (:meth:`veil.core.session.Session.learn_context_window`), so the
        next :meth:`build_prompt` fits into it (evicting or compacting). Call
        :meth:`build_prompt` again and retry once, as veil's own loop does.

        Args:
            error: the provider's error (litellm's ``ContextWindowExceededError``, veil's, or
                any exception or text whose wording is a context-length refusal:
                :func:`veil.core.models.context_refusal.is_context_refusal`).

        Returns:
            True when ``error`` is such a refusal and a smaller window was learned; False
            otherwise (nothing changed: the error is something else, or no prompt was built).

        Raises:
            SessionConflict: another process changed the session.
        """
        from veil.core.models.context_refusal import is_context_refusal, refusal_figures

        text = str(error)
        figures = getattr(error, "figures", None)
        named = type(error).__name__ == "ContextWindowExceededError"
        prompt = getattr(self, "_last_prompt", None)
        if prompt is None or not (named or is_context_refusal(text)):
            return False
        before = self.session.context_window
        after = self.session.learn_context_window(
            figures if figures is not None else refusal_figures(text),
            prompt.tokens,
            prompt.tools_tokens,
            prompt.reserve_tokens,
        )
        return after < before

    def manifest(self) -> str:
        """The manifest section alone (what is loaded, what is stored outside the prompt); empty
        when the ``veil.manifest`` default plugin is blocked or the context layer is off."""
        # Asked of the plugin registered under that name (not imported): a blocked or replaced
        # manifest plugin answers for itself, and the core depends on no default plugin.
        plugin = self.veil.pm.get_plugin("veil.manifest")
        if plugin is None:
            return ""
        texts = {s.name: s.text for s in plugin.system_prompt_sections(session=self.session)}
        if "manifest" not in texts:
            return ""
        return "\n".join(t for t in (texts.get("manifest_guide"), texts["manifest"]) if t)

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI ``tools`` entries for the memory tools (the twelve ``veil_*`` and, when the
        memory-files plugin is installed, ``memory_*``)."""
        return [t.schema() for n, t in self.veil.tools.items() if self.is_memory_tool(n)]

    def is_memory_tool(self, name: str) -> bool:
        """Whether ``name`` is one of the harness's memory tools (the host runs the others): a
        registered tool that declares the effect ``"memory"``
        (:attr:`veil.core.types.Tool.effect`; its name does not count). Whether it runs unasked
        is the permission rules' answer (:meth:`check_permission`)."""
        tool = self.veil.tools.get(name)
        return tool is not None and tool.effect == "memory"

    def call_tool(self, name: str, arguments: dict[str, Any] | str, tool_call_id: str) -> str:
        """Run a memory tool; returns the text for the tool message (errors as text too)."""
        from veil.core.errors import BadRequest

        name, arguments, tool_call_id = clean_message([name, arguments, tool_call_id])
        if isinstance(arguments, str):
            try:
                arguments = clean_message(json.loads(arguments or "{}"))
            except ValueError as exc:
                return f"{name}: invalid JSON arguments: {exc}"
        if not self.is_memory_tool(name):
            return f"{name}: not a memory tool"
        decision = self.check_permission(name, arguments, tool_call_id)  # a deny rule may name it
        if not decision.allowed:
            return decision.tool_result_text()
        try:
            out = self.veil.tools[name].handler(ToolContext(self.session, tool_call_id), arguments)
        except BadRequest as exc:
            return f"{name}: {exc.message}"
        return out.content if isinstance(out, ToolResult) else str(out)

    def get_hooks(self) -> dict[str, Any]:
        """The callables a host loop wires in (names in the module docstring's example)."""
        return {
            "on_user_message": self.on_user_message,
            "on_assistant_message": self.on_assistant_message,
            "before_tool_call": self.before_tool_call,
            "after_tool_call": self.after_tool_call,
            "check_permission": self.check_permission,
            "deny_tool_call": self.deny_tool_call,
            "build_prompt": self.build_prompt,
            "on_context_refused": self.on_context_refused,
            "manifest": self.manifest,
            "tools": self.tools(),
            "is_memory_tool": self.is_memory_tool,
            "call_tool": self.call_tool,
        }

    def close(self) -> None:
        """Release the store."""
        self.veil.close()


class _HostModel:
    """Stands for the host's model inside veil: a window and a tokenizer; never asked to answer
    except as a summariser, where it refuses clearly (configure ``models.compact`` for that)."""

    name = "host"
    provider = "host"

    def __init__(self, context_window: int, count: Callable[[str], int] | None) -> None:
        from veil.core.models.tokens import cl100k_count

        self.context_window = context_window
        self._count = count or cl100k_count

    def count_tokens(self, messages: list[dict] | str) -> int:
        if isinstance(messages, str):
            return self._count(messages)
        return sum(self._count(m.get("content") or "") for m in messages)

    def complete(self, messages: list[dict], tools: Any = None, on_token: Any = None) -> Any:
        from veil.core.errors import NotAvailable

        raise NotAvailable(
            "the harness has no model of its own: summaries need models.compact "
            "in settings.json, or turn full compaction off"
        )
