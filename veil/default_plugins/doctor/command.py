"""``veil doctor``: the command line of the store check (added by :mod:`veil.default_plugins.doctor`).

The command reads its project from the CLI's shared state (:class:`veil.cli.VeilContext`:
``project``); the repair opens the project (its plugins too) so the ``rebuild_derived`` hook
reaches the plugins that keep derived views.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from veil import ConfigError, PluginHookFailed, VeilError


def add_doctor_command(cli: click.Group) -> None:
    """Add ``veil doctor [--repair] [--json]`` to ``cli``."""

    @cli.command("doctor")
    @click.option(
        "--repair",
        is_flag=True,
        help="Move damaged rows to the quarantine table and rebuild derived views.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
    @click.pass_obj
    def doctor_cmd(state: Any, repair: bool, as_json: bool) -> None:
        """Check the project's store (.veil/context.db, or the store.url PostgreSQL project):
        SQLite's integrity check, and every row veil reads. With --repair, damaged rows are moved aside (kept in a quarantine table, never
        deleted). Exits 1 when problems remain."""
        from veil import load_config
        from veil.default_plugins.doctor import store_check

        try:
            config = load_config(state.project)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from exc
        path = config.veil_dir / "context.db"
        shared = config.settings.store.url is not None
        if not shared and not path.exists():
            raise click.ClickException(f"no store to check: {path} does not exist")
        try:
            if shared and not repair:  # a PostgreSQL store: checked through its connection
                report = store_check.check_open_store(state.open().store)
            elif repair:
                veil = state.open()
                report = store_check.repair_store(
                    veil.store,
                    veil.agent_snapshot,
                    rebuild_derived=lambda store: _rebuild_derived(veil.pm, store),
                )
                if any(f.repaired for f in report.findings):
                    report.notes.extend(_not_rebuilt_notes(veil.pm))
            else:
                report = store_check.check_store(str(path))
        except store_check.connection.sqlite3.DatabaseError as exc:
            raise click.ClickException(f"{path}: not a usable SQLite database ({exc})") from exc
        except PluginHookFailed:
            raise  # a plugin's hook failed: veil.cli.main reports it as veil: error: ...
        except VeilError as exc:
            raise click.ClickException(exc.message) from exc
        if as_json:
            click.echo(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
        else:
            print_report(report, repair)
        sys.exit(1 if report.problems_left else 0)


def _rebuild_derived(pm: Any, store: Any) -> list[list[str]]:
    """Each ``rebuild_derived`` implementation's answer, checked: a list of view names (one
    name alone is taken as a list of it).

    Raises:
        PluginResultInvalid: an answer is not a list of str (naming the plugin).
    """
    from veil import checked_list, results_by_plugin

    return [
        checked_list(plugin, "rebuild_derived", answer, str, "a list of str or None", single=True)
        for plugin, answer in results_by_plugin(pm, "rebuild_derived", store=store)
    ]


def _not_rebuilt_notes(pm: Any) -> list[str]:
    """A note for each blocked default plugin that keeps a view derived from the store (it
    implements ``rebuild_derived``): blocked, it was not asked to rebuild it after the repair.
    Entry-point plugins are not imported to find out (a blocked one may be broken)."""
    import importlib

    from veil.default_plugins import DEFAULT_PLUGINS

    notes = []
    for name, module in DEFAULT_PLUGINS:
        if pm.is_blocked(name) and hasattr(importlib.import_module(module), "rebuild_derived"):
            notes.append(
                f"the {name} plugin is blocked here, so its view derived from the store was not "
                "rebuilt; it may still show what the moved rows held"
            )
    return notes


def print_report(report: Any, repair: bool) -> None:
    """Print a :class:`~veil.default_plugins.doctor.store_check.DoctorReport` as text: the
    integrity check, one line per damaged row (and what the repair did to it), the notes, the
    views rebuilt and the count of problems left."""
    click.echo(f"store: {report.path}")
    click.echo(
        "integrity check: ok"
        if not report.integrity
        else "integrity check: FAILED (SQLite's .recover can salvage the file)\n  "
        + "\n  ".join(report.integrity)
    )
    for line in report.foreign_keys:
        click.echo(f"foreign key: {line}")
    for f in report.findings:
        moved = f.table in ("messages", "events")
        state = "damaged"
        if f.repaired:
            state = "moved to quarantine" if moved else "reset (the row as it was is in quarantine)"
        if not f.repairable:
            state = "damaged (cannot be repaired here)"
        click.echo(f"{f.table} {f.key}: {state}: {'; '.join(f.problems)}")
    for note in report.notes:
        click.echo(f"note: {note}")
    if report.rebuilt:
        click.echo(f"rebuilt: {', '.join(report.rebuilt)}")
    if report.problems_left:
        hint = "" if repair else "; `veil doctor --repair` moves damaged rows aside"
        click.echo(f"{report.problems_left} problem(s) left{hint}")
    else:
        click.echo("no problems left")
