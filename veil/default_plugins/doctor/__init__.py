"""Default plugin ``veil.doctor``: the ``veil doctor`` command, which checks a project's store
(``.veil/context.db``) and, with ``--repair``, moves damaged rows aside
(:mod:`veil.default_plugins.doctor.store_check` holds the check and the repair,
:mod:`veil.default_plugins.doctor.command` the command line).

After a repair it fires the ``rebuild_derived`` hook, so each plugin that keeps a view derived
from the store (the ``veil.beliefs`` plugin's beliefs) rebuilds it without the rows that left.
Blocked, ``veil doctor`` is gone (the CLI says which plugin provides it); nothing else depends on
it. Its table, ``quarantine`` (:mod:`veil.default_plugins.doctor.quarantine`), is created when a
store opens (``register_migrations``); its other modules are imported only when ``veil doctor``
runs.
"""

from __future__ import annotations

from typing import Any

import click

from veil.hookspecs import hookimpl


@hookimpl
def register_hookspecs() -> list[Any]:
    """The hook this plugin fires (``rebuild_derived``: :mod:`veil.default_plugins.doctor.hookspecs`)."""
    from veil.default_plugins.doctor import hookspecs

    return [hookspecs]


@hookimpl
def register_migrations() -> list[Any]:
    """Its table, ``quarantine`` (:func:`veil.default_plugins.doctor.quarantine.migrations`)."""
    from veil.default_plugins.doctor.quarantine import migrations

    return migrations()


@hookimpl
def register_commands(cli: click.Group) -> None:
    """``veil doctor`` (:func:`veil.default_plugins.doctor.command.add_doctor_command`)."""
    from veil.default_plugins.doctor.command import add_doctor_command

    add_doctor_command(cli)
