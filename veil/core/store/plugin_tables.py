"""Tables that plugins own: their migrations (the ``register_migrations`` hook), checked, and
applied by the store at open, versioned per plugin.

A plugin that keeps rows of its own (the beliefs view, ``veil doctor``'s quarantine) declares
the tables as a list of :class:`Migration`: version 1 creates them, each later version changes
them. The store (:meth:`veil.core.store.Store.migrate_plugins`) applies the versions a database
has not seen yet, in order, each in one write transaction with its bookkeeping row, under the
schema's lock (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: the project schema's advisory lock), so
two processes opening one database apply each version once. The bookkeeping is the table
``plugin_migrations`` (``plugin``, ``version``), created by the core's own migration beside
``PRAGMA user_version`` / ``schema_version``; on PostgreSQL it and the plugin's tables live in
the project's schema, so the tenancy rules of the core's tables (``store.project``) hold for
them unchanged.

Idempotence: a version is applied once per database (its row says so). A plugin moving tables
that an older veil created without a migration writes its first version with ``IF NOT EXISTS``
so that such a database is adopted as it is, rows kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from veil.core.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

ENGINES = ("sqlite", "postgresql")
"""The engines a migration is written for (``Store.engine``)."""


@dataclass(frozen=True)
class Migration:
    """One version of a plugin's tables.

    Args:
        plugin: the owner's name, the key of its versions in ``plugin_migrations`` (use the name
            the plugin is registered under, ``veil.beliefs``; it must never change, or the
            tables are created again under the new name).
        version: 1 for the first, then 2, 3... without gaps; a released version is never edited
            (a database that applied it does not apply it again), a change is a new version.
        sql: the statements, ``;``-separated, either one script both engines run or
            ``{"sqlite": ..., "postgresql": ...}``; or a callable ``apply(conn, engine)`` given
            the open transaction's connection (``?`` placeholders on both engines) and
            ``"sqlite"`` / ``"postgresql"``, for what a script cannot say (adopting rows,
            checking before creating an index). It must not commit or roll back.
        description: what the version does (logged when it is applied).

    Raises:
        ValueError: ``plugin`` is empty, ``version`` below 1, a per-engine mapping lacks one of
            :data:`ENGINES` or names another, or ``sql`` is none of the three forms.
    """

    plugin: str
    version: int
    sql: str | Mapping[str, str] | Callable[[Any, str], None]
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.plugin, str) or not self.plugin:
            raise ValueError("Migration.plugin: a non-empty name")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"Migration.version: an integer from 1 ({self.plugin})")
        if isinstance(self.sql, Mapping):
            if set(self.sql) != set(ENGINES) or not all(
                isinstance(s, str) for s in self.sql.values()
            ):
                raise ValueError(
                    f"Migration.sql ({self.plugin} version {self.version}): a mapping needs a "
                    f"script for each of {', '.join(ENGINES)} and nothing else"
                )
        elif not isinstance(self.sql, str) and not callable(self.sql):
            raise ValueError(
                f"Migration.sql ({self.plugin} version {self.version}): a script, a script per "
                "engine, or a callable (conn, engine)"
            )

    def apply(self, conn: Any, engine: str) -> None:
        """Run this version on ``conn`` (inside the caller's transaction) for ``engine``."""
        if callable(self.sql):
            self.sql(conn, engine)
            return
        script = self.sql if isinstance(self.sql, str) else self.sql[engine]
        for statement in split_statements(script):
            conn.execute(statement)


def split_statements(script: str) -> list[str]:
    """The statements of a script, split at ``;`` (plugin scripts hold no ``;`` inside a
    statement; one that needs a function body is written as a callable)."""
    return [s.strip() for s in script.split(";") if s.strip()]


def plan(migrations: Iterable[Migration]) -> dict[str, list[Migration]]:
    """Group migrations by plugin, in version order, checked.

    Returns:
        ``{plugin: [version 1, version 2, ...]}``, plugins in name order (the order they are
        applied in, the same in every process).

    Raises:
        ConfigError: a plugin's versions repeat one or leave a gap (names the plugin and the
            versions found).
    """
    by_plugin: dict[str, list[Migration]] = {}
    for migration in migrations:
        by_plugin.setdefault(migration.plugin, []).append(migration)
    out: dict[str, list[Migration]] = {}
    for plugin in sorted(by_plugin):
        steps = sorted(by_plugin[plugin], key=lambda m: m.version)
        versions = [m.version for m in steps]
        if versions != list(range(1, len(steps) + 1)):
            raise ConfigError(
                f"plugin tables {plugin!r}: migration versions {versions}; expected 1 to "
                f"{len(steps)}, each once (fix or uninstall the plugin that declares them)"
            )
        out[plugin] = steps
    return out


def applied_version(conn: Any, plugin: str) -> int:
    """The last version of ``plugin``'s tables this database applied (0: none)."""
    row = conn.execute(
        "SELECT version FROM plugin_migrations WHERE plugin = ?", (plugin,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def applied_versions(conn: Any) -> dict[str, int]:
    """``{plugin: last version applied}`` for every plugin with tables in this database."""
    return {r[0]: int(r[1]) for r in conn.execute("SELECT plugin, version FROM plugin_migrations")}


def record_version(conn: Any, plugin: str, version: int) -> None:
    """Record that ``plugin``'s tables are at ``version`` (inside the migration's transaction)."""
    conn.execute(
        "INSERT INTO plugin_migrations (plugin, version) VALUES (?, ?)"
        " ON CONFLICT (plugin) DO UPDATE SET version = excluded.version",
        (plugin, version),
    )


def forget(conn: Any, plugin: str) -> None:
    """Delete ``plugin``'s row of ``plugin_migrations`` (inside the caller's transaction)."""
    conn.execute("DELETE FROM plugin_migrations WHERE plugin = ?", (plugin,))


def collect(pm: pluggy.PluginManager, problems: dict[str, str] | None = None) -> list[Migration]:
    """Every registered plugin's ``register_migrations`` answer, as one list.

    Args:
        problems: when given, a plugin whose implementation raises or answers the wrong type is
            recorded here (plugin name -> the one-line error) and its tables left out, instead
            of raising (``veil plugins`` lists a broken plugin).

    Raises:
        PluginHookFailed: without ``problems``, a plugin's implementation raised (names the
            plugin); PluginResultInvalid: it returned something other than a list of
            :class:`Migration`.
        ConfigError: two plugins declare migrations under one ``Migration.plugin`` name.
    """
    from veil.core import plugins as plugin_mod
    from veil.core.errors import PluginHookFailed

    found: list[Migration] = []
    owners: dict[str, str] = {}
    for impl in reversed(pm.hook.register_migrations.get_hookimpls()):
        registered = pm.get_name(impl.plugin)
        try:
            result = plugin_mod.call_impl(impl, "register_migrations")
            migrations = plugin_mod.checked_list(
                registered, "register_migrations", result, Migration, "a list of veil.Migration"
            )
        except PluginHookFailed as exc:
            if problems is None:
                raise
            problems[exc.plugin] = exc.message
            continue
        for migration in migrations:
            owner = owners.setdefault(migration.plugin, registered)
            if owner != registered:
                raise ConfigError(
                    f"plugin tables {migration.plugin!r} are declared by both {owner!r} and "
                    f"{registered!r}; uninstall or disable one of them"
                )
        found.extend(migrations)
    return found
