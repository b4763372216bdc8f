"""The ``veil`` command line (click).

``veil`` starts the interactive front end (the REPL plugin); ``veil -p TASK`` runs one task and
prints the final answer; subcommands come from the core (``plugins``, ``sessions``) and from
plugins through ``register_commands``. Plugins load before the command line is parsed, so
``--disable-plugin`` and ``VEIL_DISABLE_PLUGINS`` also remove the commands of blocked plugins;
calling one that a blocked default plugin provides (``veil replay`` of ``veil.replay``, ``veil
doctor`` of ``veil.doctor``) says so.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import click

from veil import __version__
from veil.core.errors import ConfigError, PluginHookFailed, VeilError

EXIT_HALTED = 3
EXIT_INTERRUPTED = 130


def _prescan_disabled(argv: list[str]) -> list[str]:
    """``--disable-plugin NAME`` values, read before click parses (commands depend on them)."""
    out = []
    for i, arg in enumerate(argv):
        if arg == "--disable-plugin" and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif arg.startswith("--disable-plugin="):
            out.append(arg.split("=", 1)[1])
    return out


def _prescan_project(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--project" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--project="):
            return arg.split("=", 1)[1]
    return None


STORE_ENV = "VEIL_STORE__URL"


def store_option(command: Any) -> Any:
    """Add ``--store URL`` to a command (``veil serve``, ``veil proxy``, ``veil mcp``, ``veil
    replay``): the PostgreSQL store for this run, as ``VEIL_STORE__URL`` would give it
    (``store.url``; unset: the project's ``.veil/context.db``). Set before the project's
    configuration is loaded, so it wins over the settings files, and inherited by the
    processes the command starts."""

    def use_store(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is not None and value.strip():
            os.environ[STORE_ENV] = value.strip()

    return click.option(
        "--store",
        metavar="URL",
        default=None,
        expose_value=False,
        is_eager=True,
        callback=use_store,
        help="PostgreSQL store URL (store.url; default: the project's .veil/context.db).",
    )(command)


class VeilContext:
    """Shared state of one CLI invocation: options and the lazily opened :class:`Veil`."""

    def __init__(self, project: str | None, disabled: list[str]) -> None:
        self.project = project
        self.disabled = disabled
        self._veil: Any = None
        self.json = False
        self.yes = False
        self.loaded: tuple[str | None, Any] | None = None
        """``(project, configuration)`` as :func:`build_cli` loaded it (None when it did not,
        or it failed): opening that project reuses it instead of reading and validating
        every file again."""

    def loaded_config(self) -> Any:
        """The configuration :func:`build_cli` loaded, if it is of :attr:`project` (``veil
        serve --project`` may name another one), else None."""
        if self.loaded is not None and self.loaded[0] == self.project:
            return self.loaded[1]
        return None

    def open(self, keep_going: bool = False, *, store: bool = True) -> Any:
        """Open the project (config, plugins, store); config errors become clean CLI errors.
        ``keep_going``: a plugin whose ``register_tools`` fails is recorded, not raised
        (:class:`veil.core.app.Veil`). ``store=False``: for a command that reads no session
        (``veil plugins``, ``veil settings``), the store is an in-memory one, so running it in
        a folder does not create ``.veil/context.db`` there."""
        if self._veil is None:
            from veil.core.app import open_veil

            config = self.loaded_config()
            loaded = {"config": config} if config is not None else {}
            try:
                self._veil = open_veil(
                    self.project,
                    disable=self.disabled,
                    keep_going=keep_going,
                    db_path=None if store else ":memory:",
                    **loaded,
                )
            except (ConfigError, ImportError) as exc:
                raise click.ClickException(str(exc)) from exc
            if self.yes:  # the user's choice for this run: nothing asks; deny rules still hold
                self._veil.config.settings.permissions.mode = "allow"
        return self._veil

    def close(self, code: int) -> int:
        """Close the project if this invocation opened it (its plugins' background work, the
        store's queued writes); returns ``code``, or 1 when closing failed (said on stderr)."""
        veil, self._veil = self._veil, None
        if veil is None:
            return code
        try:
            veil.close()
        except Exception as exc:  # noqa: BLE001 - reported; the exit status says it
            click.echo(f"veil: error: closing the project: {exc}", err=True)
            return code or 1
        return code


def blocked_command_provider(command: str, blocked: frozenset[str]) -> str | None:
    """The blocked default plugin that would add ``veil COMMAND``, or None.

    Only default plugins are asked (their modules are part of veil and cheap to import); a
    blocked entry-point plugin is never imported, since it may be blocked because it breaks.
    Each blocked default plugin's ``register_commands`` runs on a scratch group.

    Args:
        command: the subcommand name the user typed.
        blocked: plugin names blocked for this run (settings, environment, ``--disable-plugin``).
    """
    import importlib

    from veil.default_plugins import DEFAULT_PLUGINS

    for name, module_name in DEFAULT_PLUGINS:
        if name not in blocked:
            continue
        register = getattr(importlib.import_module(module_name), "register_commands", None)
        if register is None:
            continue
        scratch = click.Group()
        register(cli=scratch)
        if command in scratch.commands:
            return name
    return None


class VeilGroup(click.Group):
    """The top-level ``veil`` group. A subcommand that a blocked default plugin provides is
    reported as blocked ("veil replay is provided by the veil.replay plugin, which is blocked
    here") rather than as unknown."""

    blocked_plugins: frozenset[str] = frozenset()
    """Plugin names blocked for this run; :func:`build_cli` sets it."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0])
        if self.get_command(ctx, name) is None and not ctx.resilient_parsing:
            plugin = blocked_command_provider(name, self.blocked_plugins)
            if plugin is not None:
                ctx.fail(
                    f"veil {name} is provided by the {plugin} plugin, which is blocked here "
                    "(plugins.disable in settings.json, VEIL_DISABLE_PLUGINS or --disable-plugin)."
                )
        return super().resolve_command(ctx, args)


@click.group(
    cls=VeilGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "-p",
    "--print",
    "task",
    metavar="TASK",
    help="Run one task non-interactively and print the final answer.",
)
@click.option("-c", "--continue", "cont", is_flag=True, help="Resume the most recent session.")
@click.option("--resume", "resume_id", metavar="ID", help="Resume the session with this id.")
@click.option("--agent", metavar="NAME", help="Agent to run (default: settings defaultAgent).")
@click.option("--model", metavar="MODEL", help="Model for a new session (overrides agent.json).")
@click.option(
    "--disable-plugin",
    "disabled",
    multiple=True,
    metavar="NAME",
    help="Block a plugin (repeatable).",
)
@click.option(
    "--project",
    type=click.Path(file_okay=False, exists=True),
    help="Project root, an existing folder (default: current directory).",
)
@click.option("--json", "as_json", is_flag=True, help="With -p: print the result as JSON.")
@click.option(
    "-y",
    "--yes",
    is_flag=True,
    help="Allow every tool call this run without asking (permissions.mode allow); "
    "permissions.deny rules still hold.",
)
@click.version_option(__version__, prog_name="veil")
@click.pass_context
def cli(
    ctx: click.Context,
    task: str | None,
    cont: bool,
    resume_id: str | None,
    agent: str | None,
    model: str | None,
    disabled: tuple[str, ...],
    project: str | None,
    as_json: bool,
    yes: bool,
) -> None:
    """veil: a coding agent whose context is scored, evicted, recalled and compacted.

    Run it inside a project. With no provider configured it uses a small offline model when the
    veil_bundled plugin is installed (veil plugins lists it).
    """
    state = ctx.ensure_object(VeilContext)
    state.project = project or state.project
    state.disabled = list(dict.fromkeys([*state.disabled, *disabled]))
    state.json = as_json
    state.yes = yes or state.yes
    _warn_unknown_plugin_names(state)  # every command, once: a typo blocks nothing
    failures = getattr(ctx.command, "plugin_failures", {})
    if failures and ctx.invoked_subcommand != "plugins":  # `veil plugins` lists them
        raise next(iter(failures.values()))  # reported by main() as veil: error: ...
    if ctx.invoked_subcommand is not None:
        return
    if cont and resume_id:
        raise click.UsageError("--continue and --resume exclude each other")
    if as_json and task is None:
        raise click.UsageError("--json goes with -p TASK (the REPL has no JSON mode)")
    if task is not None and not task.strip():
        raise click.UsageError("-p: the task is empty")
    if task is not None:
        # a model answers next: its client (the openai SDK, which litellm imports too) loads on
        # a loader thread while the project opens (the REPL loads it after its first prompt)
        from veil.core.models import openai_chat

        openai_chat.start_loading()
    veil = state.open()
    try:
        session = _pick_session(veil, cont, resume_id, agent, model)
    except PluginHookFailed:
        raise  # session_start failed: reported by main() as veil: error: ...
    except VeilError as exc:
        raise click.ClickException(exc.message) from exc
    from veil.core.store.context_db import MISSING_ROW

    for warning in session.load_warnings:
        click.echo(f"veil: warning: {warning}", err=True)
    if any(not w.endswith(MISSING_ROW) for w in session.load_warnings):
        # a missing row is what a repair leaves: advising the repair again would go in circles
        click.echo("veil: run `veil doctor --repair` to move the damaged rows aside", err=True)
    _warn_unapproved_prompt(session)
    if task is not None:
        sys.exit(_print_mode(veil, session, task, as_json, created=not session.resumed))
    runner = veil.pm.hook.run_interactive
    if not runner.get_hookimpls():
        raise click.ClickException(
            "no interactive front end is loaded (plugin veil_repl); use veil -p TASK"
        )
    _warn_context_layer(veil)
    runner(veil=veil, session=session)


def _pick_session(
    veil: Any, cont: bool, resume_id: str | None, agent: str | None, model: str | None
) -> Any:
    if resume_id:
        return veil.load_session(resume_id)
    if cont:
        problems: list[str] = []
        last = veil.last_session_id(problems)
        for problem in problems:
            click.echo(f"veil: warning: {problem}", err=True)
        if last is None:
            click.echo("veil: no session to continue; starting a new one", err=True)
        else:
            return veil.load_session(last)
    return veil.new_session(agent=agent, model=model)


def _plugin_names_named(state: VeilContext) -> list[tuple[str, str]]:
    """``(where, name)`` of every plugin name this run's selection mentions: the command line,
    the variables and, when the project's settings load, ``plugins.disable`` / ``plugins.load``
    (a settings error is reported when the command opens the project)."""
    from veil.core.plugins import named_plugins
    from veil.core.settings import load_config

    try:
        config = state.loaded_config() or load_config(state.project)
        plugins = config.settings.plugins
        disable, load = plugins.disable, plugins.load
    except (ConfigError, OSError):
        disable, load = [], None
    return named_plugins(disable, load, state.disabled)


def _warn_unknown_plugin_names(state: VeilContext) -> None:
    """Warn on stderr, once per name, about a plugin name no installed plugin has, with the
    closest installed name; ``veil.core`` names the default plugins that replaced it."""
    from veil.core.plugins import RETIRED_PLUGIN_NAMES, unknown_plugin_names
    from veil.default_plugins import DEFAULT_PLUGIN_NAMES

    named = _plugin_names_named(state)
    for where, name in dict.fromkeys((w, n) for w, n in named if n in RETIRED_PLUGIN_NAMES):
        # veil.core was one plugin holding every default feature; blocking the old name
        # would block nothing, so say which names replaced it (issue 20)
        click.echo(
            f"veil: {_where(where, name)}: that plugin no longer exists; its features "
            f"are the default plugins {', '.join(sorted(DEFAULT_PLUGIN_NAMES))}: block "
            "those by name",
            err=True,
        )
    for where, name, suggestion in unknown_plugin_names(named):
        click.echo(f"veil: {_where(where, name)}: {_unknown_plugin_text(suggestion)}", err=True)


def _where(where: str, name: str) -> str:
    """``--disable-plugin NAME`` for a flag, ``VEIL_DISABLE_PLUGINS: NAME`` otherwise."""
    return f"{where} {name}" if where.startswith("--") else f"{where}: {name}"


def _unknown_plugin_text(suggestion: str | None) -> str:
    """What is said of a plugin name no installed plugin has."""
    hint = f"; did you mean {suggestion}?" if suggestion else " (see veil plugins)"
    return f"no installed plugin has that name{hint}"


def _warn_context_layer(veil: Any) -> None:
    if not veil.context_layer_on:
        click.echo(
            "veil: context layer off (no scorer or eviction plugin loaded): nothing will be evicted",
            err=True,
        )
    elif veil.pm.is_blocked(CAPTURE_PLUGIN):
        click.echo(
            f"veil: context layer on but nothing is captured ({CAPTURE_PLUGIN} is blocked): "
            "nothing will be evicted",
            err=True,
        )


def _ask_on_terminal(request: Any) -> str:
    """The permission prompt of ``veil -p`` on a terminal (stderr; stdout keeps the answer)."""
    from veil.core.safety.permissions import PROMPT_CHOICES, parse_answer

    click.echo(f"veil: {request.describe()} ({request.reason})", err=True)
    choices = PROMPT_CHOICES.format(rule=request.session_rule)
    while True:
        try:
            typed = click.prompt(choices, err=True, default="", show_default=False)
        except click.Abort:  # Ctrl-D / end of input: nobody said yes
            click.echo("", err=True)
            return "deny"
        answer = parse_answer(typed)
        if answer is not None:
            return answer


def _print_mode(veil: Any, session: Any, task: str, as_json: bool, *, created: bool) -> int:
    """Run one task; print the final answer (or JSON); return the exit code.

    ``created``: this command made ``session``. When the turn then stops on the configuration
    (no model can answer) before anything but the task is stored, the session is deleted, so
    a user fixing their setup does not collect an empty session per attempt (their task is in
    the command line they will run again)."""
    from veil.hookspecs import hookimpl

    class _Stderr:
        """Shows notices and tool activity on stderr so stdout holds only the answer."""

        @hookimpl
        def render(self, event: Any) -> None:
            if as_json:
                return
            if event.kind in ("info", "warning", "halt", "error"):
                click.echo(
                    f"veil: {event.data.get('text') or event.data.get('message', '')}", err=True
                )
            elif event.kind == "tool_result" and event.data.get("denied"):
                click.echo(f"veil: {event.data.get('content', '')}", err=True)

        @hookimpl
        def ask_permission(self, request: Any) -> str | None:
            """Ask on the terminal; with none (stdin or stderr not a TTY) nobody can answer."""
            if not (sys.stdin.isatty() and sys.stderr.isatty()):
                return None
            return _ask_on_terminal(request)

    printer = _Stderr()
    veil.pm.register(printer, name="veil.print")
    if not as_json:
        _warn_context_layer(veil)
    try:
        result = veil.run_turn(session, task, stream=False)
    except PluginHookFailed as exc:
        if as_json:
            error = {"code": exc.code, "message": exc.message, "plugin": exc.plugin}
            click.echo(json.dumps({"error": {**error, "hook": exc.hook}}))
        report_plugin_failure(exc, quiet=as_json)
        return 1
    except VeilError as exc:
        if as_json:
            click.echo(json.dumps({"error": {"code": exc.code, "message": exc.message}}))
        else:
            click.echo(f"Error: {exc.message}", err=True)
        if created and isinstance(exc, ConfigError):
            _drop_unanswered(veil, session)
        return 1
    finally:
        veil.pm.unregister(printer)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "sessionId": session.id,
                    "status": result.status,
                    "final": result.final,
                    "reason": result.reason,
                    "iterations": result.iterations,
                    "usage": result.usage,
                    "usageEstimated": result.usage_estimated,
                    "seconds": round(result.seconds, 3),
                }
            )
        )
    else:
        if result.final:
            click.echo(result.final)
        if result.status != "done":
            click.echo(f"veil: {result.status}: {result.reason}", err=True)
    return {"done": 0, "halted": EXIT_HALTED, "interrupted": EXIT_INTERRUPTED}.get(result.status, 2)


def _drop_unanswered(veil: Any, session: Any) -> None:
    """Delete ``session`` when it holds nothing but the user's task (no answer, no tool
    result); a failure to delete it is left alone (the session stays, as before)."""
    if any(m.get("role") != "user" for m in session.messages):
        return
    try:
        veil.delete_session(session.id)
    except VeilError:
        pass


def debugging() -> bool:
    """Whether ``VEIL_DEBUG`` asks for tracebacks (set, and not ``0`` / ``false`` / ``no``)."""
    return os.environ.get("VEIL_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def report_plugin_failure(exc: PluginHookFailed, *, quiet: bool = False) -> None:
    """Say on stderr which plugin failed in which hook, in one line (``veil: error: plugin NAME
    failed in hook HOOK: ExcType: text``; not with ``quiet``, where the JSON on stdout says
    it); with ``VEIL_DEBUG=1``, the plugin's traceback too."""
    if not quiet:
        click.echo(f"veil: error: {exc.message}", err=True)
    if debugging():
        import traceback

        click.echo("".join(traceback.format_exception(exc)).rstrip(), err=True)


def _warn_unapproved_prompt(session: Any) -> None:
    from veil.core.safety.prompt_trust import project_prompt, project_prompt_approved

    found = project_prompt(session.config, session.agent, session.snapshot)
    if found is not None and not project_prompt_approved(session.config.project_dir, found[0]):
        click.echo(
            f"veil: warning: {found[1]} sets a system prompt that came with this project; veil "
            "keeps its own and shows the project's to the model as quoted project content. Read "
            "it and approve it with `veil trust-prompt` to use it as the system prompt.",
            err=True,
        )


@cli.command("trust-prompt")
@click.option(
    "--agent", metavar="NAME", help="Agent whose prompt (default: settings defaultAgent)."
)
@click.option("--yes", is_flag=True, help="Approve without asking.")
@click.pass_obj
def trust_prompt_cmd(state: VeilContext, agent: str | None, yes: bool) -> None:
    """Show the system prompt this project's files set (agent.json ``systemPrompt`` or
    settings.json ``loop.systemPrompt``) and approve it, so veil uses it as its own system
    prompt in this project. The approval holds for this exact text in this folder; it is kept
    in your $VEIL_HOME (~/.veil/trusted-prompts.json), where a repository cannot write."""
    from veil.core.safety.prompt_trust import (
        approve_project_prompt,
        project_prompt,
        project_prompt_approved,
    )
    from veil.core.settings import validate_agent_name

    config = state.open().config
    try:
        name = validate_agent_name(agent or config.settings.default_agent)
        found = project_prompt(config, name, {"systemPrompt": config.agent(name).system_prompt})
    except VeilError as exc:
        raise click.ClickException(exc.message) from exc
    if found is None:
        click.echo(f"this project sets no system prompt for agent {name!r}; nothing to approve")
        return
    text, origin = found
    if project_prompt_approved(config.project_dir, text):
        click.echo(f"{origin}: this system prompt is already approved")
        return
    click.echo(f"{origin} sets this system prompt:\n")
    click.echo("\n".join("  " + line for line in text.splitlines()) + "\n")
    if not yes:
        click.confirm("Use it as veil's system prompt in this project?", abort=True)
    try:
        approve_project_prompt(config.project_dir, text)
    except OSError as exc:
        raise click.ClickException(f"could not record the approval: {exc}") from exc
    click.echo("approved: new and resumed sessions use it as the system prompt")


SECRET_KEY_WORDS = ("key", "token", "secret", "password", "credential")
"""Option names whose values ``veil settings`` never prints (an ``api_key`` in
``models.*.options``, a ``token``...): it says ``[set]`` instead."""


def _masked_settings(value: Any, key: str = "") -> Any:
    """``value`` (JSON data) with the values of secret-looking keys replaced by ``[set]``."""
    if isinstance(value, dict):
        return {k: _masked_settings(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked_settings(v, key) for v in value]
    if isinstance(value, str) and any(word in key.lower() for word in SECRET_KEY_WORDS):
        return "[set]"  # a number or a flag is no secret (context.pointerTokens: 9)
    return value


@cli.command("settings")
@click.pass_obj
def settings_cmd(state: VeilContext) -> None:
    """Print the settings in effect for this project, as JSON: every section with its
    defaults filled in, after settings.json and VEIL_* variables (camelCase names, as in
    settings.json; the model roles merged with auth.json's), the file they were read from, which values this project's own files set,
    and which plugin owns each plugin section. Secrets (the HTTP token, option values whose
    names hold key, token, secret, password or credential) print as "[set]"."""
    config = state.open(store=False).config
    data = config.settings.model_dump(mode="json", by_alias=True)
    # the model roles in effect: settings.json and VEIL_MODELS__* over auth.json, field by field
    data["models"] = config.models.model_dump(mode="json", by_alias=True)
    out = {
        "settingsFile": str(config.settings_file),
        "settingsFileExists": config.settings_file.is_file(),
        "setByProject": sorted(config.settings_from_project),
        "sectionOwners": {k: list(v) for k, v in sorted(config.section_owners.items())},
        "settings": _masked_settings(data),
    }
    # the redactor as a last net: a credential pasted into any field does not reach the terminal
    click.echo(config.redactor.text(json.dumps(out, indent=2)))


MODELS_SHOWN = 20
"""Model names ``veil models`` prints per provider (``--json`` lists them all)."""


@cli.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (every model listed).")
@click.option(
    "--no-fetch",
    is_flag=True,
    help="Do not ask the providers that speak OpenAI's API for their models (GET /models).",
)
@click.pass_obj
def models_cmd(state: VeilContext, as_json: bool, no_fetch: bool) -> None:
    """List the providers of auth.json: what each serves, and which model role uses it.

    A provider that speaks OpenAI's API (type openai, or one with a base_url) is asked for its
    models (GET /models with its key); another lists the models litellm knows for its type.
    Use a provider that no role uses with --model NAME/MODEL or /model NAME/MODEL."""
    from veil.core.models.catalog import provider_listing

    veil = state.open(store=False)
    llm = veil.llm
    listing = provider_listing(llm, fetch=not no_fetch)
    redact = veil.config.redactor.text  # a key a provider echoes in an error never prints
    if as_json:
        click.echo(redact(json.dumps({"providers": listing}, indent=2)))
        return
    if not listing:
        click.echo(
            "no provider is configured (auth.json: providers); "
            + ("the offline model answers" if llm.is_offline_default else "see docs/models.md")
        )
        return
    for p in listing:
        where = [p["type"]]
        if p["baseUrl"]:
            where.append(p["baseUrl"])
        where.append("key set" if p["keySet"] else "no key")
        where.append(f"{p['definedIn']}'s auth.json")
        routing = f" · routing {p['routing']}" if p["routing"] else ""
        click.echo(redact(f"{p['name']} ({', '.join(where)}){routing}"))
        roles = [
            f"{r['role']} {r['model']}" + (" (fallback)" if r["fallback"] else "")
            for r in p["roles"]
        ]
        click.echo(
            "  roles: "
            + (", ".join(roles) if roles else f"none; use it with --model {p['name']}/MODEL")
        )
        if p["error"]:
            click.echo(redact(f"  models: could not list them: {p['error']}"))
        elif p["models"] is not None:
            shown = ", ".join(p["models"][:MODELS_SHOWN])
            more = len(p["models"]) - MODELS_SHOWN
            tail = f", ... and {more} more (--json lists all)" if more > 0 else ""
            source = "its /models" if p["modelsFrom"].startswith("GET") else "litellm's list"
            click.echo(redact(f"  models ({source}): {shown or 'none'}{tail}"))
        else:
            click.echo("  models: not asked (--no-fetch)")


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def plugins_cmd(state: VeilContext, as_json: bool) -> None:
    """List loaded plugins, their versions and the hooks each implements (in call order).

    A plugin whose registration hook fails (``register_tools`` raises or returns the wrong
    type, ``register_commands`` raises) is listed with its one-line error; the command then
    exits 1.
    """
    from veil.core.plugins import unknown_plugin_names

    veil = state.open(keep_going=True, store=False)
    info = veil.describe()
    failures = getattr(click.get_current_context().find_root().command, "plugin_failures", {})
    for p in info["plugins"]:
        if p["name"] in failures and not p["errors"]:
            p["errors"] = [failures[p["name"]].message]
    broken = [p["name"] for p in info["plugins"] if p["errors"]]
    if as_json:
        click.echo(json.dumps(info, indent=2))
        if broken:
            sys.exit(1)
        return
    for p in info["plugins"]:
        marker = " (default)" if p.get("default") else ""
        click.echo(f"{p['name']} {p['version']}{marker}".rstrip())
        for error in p["errors"]:
            click.echo(f"  error: {error}")
        for hook in p["hooks"]:
            click.echo(f"  {hook}")
        for warning in p.get("warnings", ()):
            click.echo(
                f"  warning: {warning} (veil never calls it; mark its functions with "
                "@veil.hookimpl and name them after hooks in veil/hookspecs.py)"
            )
    click.echo(
        "\nhooks, in call order: pluggy asks tryfirst implementations first, then the plugin\n"
        "registered last; entry points register in name order, so the name that sorts last\n"
        "is asked first. * : the first implementation that returns a value answers."
    )
    first = set(info.get("firstresult", ()))
    for hook, names in info["hooks"].items():
        click.echo(f"  {hook}{' *' if hook in first else ''}: {', '.join(names)}")
    if info["blocked"]:
        # a name no plugin has blocks nothing: say so where the user looks (the warning on
        # stderr scrolls away above the listing)
        unknown = {
            name: hint
            for _, name, hint in unknown_plugin_names(("blocked", n) for n in info["blocked"])
        }
        shown = [
            f"{n} ({_unknown_plugin_text(unknown[n])})" if n in unknown else n
            for n in info["blocked"]
        ]
        click.echo(f"\nblocked: {', '.join(shown)}")
    click.echo(f"\ncontext layer: {_context_layer_text(info)}")

    if broken:
        click.echo(
            f"\nbroken: {', '.join(broken)} (veil stops on them: fix or uninstall them, or "
            "block them with --disable-plugin NAME / plugins.disable)",
            err=True,
        )
        sys.exit(1)


CAPTURE_PLUGIN = "veil.capture"
"""The default plugin that turns turns and tool results into context items."""


def _context_layer_text(info: dict[str, Any]) -> str:
    """``on`` / ``off (...)`` for ``veil plugins`` (``info``: :meth:`Veil.describe`). On means
    what :attr:`veil.core.app.Veil.context_layer_on` means, a scorer and an eviction policy
    loaded; with :data:`CAPTURE_PLUGIN` blocked they have nothing of the conversation to act
    on, which is said beside it."""
    if not info["context_layer"]:
        return "off (no scorer or eviction plugin loaded; nothing is evicted)"
    if CAPTURE_PLUGIN in info["blocked"]:
        return f"on (nothing captured: {CAPTURE_PLUGIN} is blocked, so nothing is evicted)"
    return "on"


@cli.command("sessions")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--limit", default=20, show_default=True, type=click.IntRange(min=1), help="How many sessions."
)
@click.pass_obj
def sessions_cmd(state: VeilContext, as_json: bool, limit: int) -> None:
    """List stored sessions, most recent first."""
    from veil.core.settings import load_config

    try:
        store = load_config(state.project).veil_dir / "context.db"
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    if not store.exists():  # a listing never creates a project's .veil/
        click.echo("[]" if as_json else f"no sessions yet (no {store})")
        return
    problems: list[str] = []
    rows = state.open().list_sessions(limit, problems)
    for problem in problems:
        click.echo(f"veil: warning: {problem} (see `veil doctor`)", err=True)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no sessions yet")
    import datetime as dt

    for r in rows:
        when = dt.datetime.fromtimestamp(r["updated_at"]).strftime("%Y-%m-%d %H:%M")
        closed = " (closed)" if r["closed_at"] else ""
        click.echo(
            f"{r['id']}  {when}  {r['agent']:<10} {r['message_count']:>4} msgs  "
            f"{(r['title'] or '')[:60]}{closed}"
        )


def _register_commands(pm: Any, group: click.Group) -> dict[str, PluginHookFailed]:
    """Ask each plugin's ``register_commands`` to add its subcommands to ``group``; a plugin
    whose implementation raises is recorded (plugin name -> the error), not raised here: ``veil
    plugins`` must still run to show it, every other command stops on it (:func:`cli`)."""
    from veil.core.plugins import call_impl

    failures: dict[str, PluginHookFailed] = {}
    for impl in reversed(pm.hook.register_commands.get_hookimpls()):
        try:
            call_impl(impl, "register_commands", cli=group)
        except PluginHookFailed as exc:
            failures.setdefault(exc.plugin, exc)
    return failures


_VALUED_OPTIONS = frozenset({"--project", "--disable-plugin", "-p", "--print", "--resume"})
_VALUED_OPTIONS |= {"--agent", "--model"}


def _asks_for_help_only(argv: list[str]) -> bool:
    """Whether ``argv`` asks the top-level command for its help or version (``veil --help``,
    ``veil --project X -h``, ``veil --version``) and names no subcommand."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help", "--version"):
            return True
        if not arg.startswith("-"):
            return False  # a subcommand (its own --help lists its options)
        i += 2 if arg in _VALUED_OPTIONS else 1
    return False


def build_cli(argv: list[str] | None = None, state: VeilContext | None = None) -> click.Group:
    """Return the ``veil`` group with plugin commands added (plugins chosen from ``argv``).

    ``state``: the invocation's context, which keeps the configuration loaded here
    (:attr:`VeilContext.config`) so the command does not load it again."""
    argv = sys.argv[1:] if argv is None else argv
    from veil.core.plugins import (
        listed_plugin_selection,
        load_plugins,
        new_plugin_manager,
        plugin_selection,
    )

    disabled = _prescan_disabled(argv)
    if _asks_for_help_only(argv):
        # `veil --help` lists commands and opens nothing: the selection is read without
        # validating the settings (pydantic and every settings model: issue 30's 0.3 s)
        selection = listed_plugin_selection(_prescan_project(argv), disabled)
    else:
        from veil.core.settings import load_config

        try:
            config = load_config(_prescan_project(argv))
            if state is not None:
                state.loaded = (_prescan_project(argv), config)
            selection = plugin_selection(
                config.settings.plugins.disable, config.settings.plugins.load, disabled
            )
        except ConfigError:
            selection = plugin_selection((), None, disabled)  # reported when the project opens
    try:
        pm = load_plugins(new_plugin_manager(), selection)
    except (ConfigError, ImportError) as exc:
        # a broken plugin stops every command: one line that names it, never a traceback
        click.echo(f"veil: error: {exc}", err=True)
        sys.exit(1)
    cli.plugin_failures = _register_commands(pm, cli)
    cli.blocked_plugins = selection.disabled
    return cli


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``veil``)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if hasattr(signal, "SIGPIPE"):  # `veil sessions | head -1` ends quietly, like other CLIs
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    from veil.core.safety.processes import install_signal_handlers
    from veil.core.text import argument_text, utf8_stdio

    install_signal_handlers()  # SIGTERM / SIGHUP also end the commands tools started
    utf8_stdio()  # UTF-8 in and out whatever the locale (LANG=C...)
    argv = [argument_text(a) for a in (sys.argv[1:] if argv is None else argv)]
    code: int | str | None = 0
    state = VeilContext(_prescan_project(argv), _prescan_disabled(argv))
    try:
        group = build_cli(argv, state)
        group.main(args=argv, prog_name="veil", obj=state)
    except PluginHookFailed as exc:  # at start (session_start, register_*) or in a command
        report_plugin_failure(exc)
        code = 1
    except SystemExit as exc:  # click ends every command this way
        code = exc.code
    if isinstance(code, str):  # sys.exit("message") prints it; os._exit would not
        click.echo(code, err=True)
        code = 1
    code = state.close(code or 0)
    # every command ends here: loader threads stopped, litellm's clients closed and the atexit
    # handlers run while the interpreter is whole, then os._exit (veil.core.background)
    from veil.core import background

    background.finish(code)


if __name__ == "__main__":  # pragma: no cover
    main()
