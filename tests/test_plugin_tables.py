"""Tables that plugins own (issue 33): the ``register_migrations`` hook, applied by the store at
open on both engines and recorded per plugin in ``plugin_migrations``; a store that veil at
commit 5277531 left (the core creating the beliefs' and the doctor's tables) opens unchanged.

Every test runs once per engine; the PostgreSQL one on the test server (``veil_postgres_url``).
The old store is ``tests/data/store_5277531`` (made by that commit's code: its ``generate.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from veil import Migration, hookimpl
from veil.core.app import open_veil
from veil.core.errors import ConfigError
from veil.core.store import Store, plugin_tables
from veil.core.store.postgres import schema_name
from veil.testing.postgres import end_connections, unique_project

OLD = Path(__file__).parent / "data" / "store_5277531"
ENGINES = ["sqlite", "postgresql"]

# what the fixture holds (tests/data/store_5277531/sqlite.sql), read off its inserts
OLD_BELIEFS = {
    "belief_707089dbdb9f": ("api port is 80", "active"),
    "belief_aea95ffa9165": ("api port is 81", "active"),
    "belief_143a736f9639": ("the cache lives in /tmp/cache", "active"),
}
OLD_CONFLICT = "conflict_aea95ffa9165"
OLD_TABLES = {
    "sessions",
    "messages",
    "items",
    "events",
    "usage",
    "embeddings",
    "recall_index",
    "recall_fts",
    "cold_content",
    "quarantine",
    "beliefs",
    "belief_conflicts",
}
PG_ONLY_TABLES = {"memory_files", "memory_tags", "schema_version"}


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def target(
    engine: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    veil_isolated_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Any]:
    """Where this test's store lives: ``{"engine", "project_dir", "path"}`` (the SQLite file) or
    ``{"engine", "project_dir", "url", "project"}``, with ``VEIL_STORE__*`` set for PostgreSQL
    so a Veil opened on ``project_dir`` uses it."""
    project_dir = tmp_path / "project"
    project_dir.mkdir()
    if engine == "sqlite":
        return {
            "engine": engine,
            "project_dir": project_dir,
            "path": project_dir / ".veil" / "context.db",
        }
    url = request.getfixturevalue("veil_postgres_url")
    project = unique_project()
    monkeypatch.setenv("VEIL_STORE__URL", url)
    monkeypatch.setenv("VEIL_STORE__PROJECT", project)
    request.addfinalizer(lambda: end_connections(url, project))
    return {"engine": engine, "project_dir": project_dir, "url": url, "project": project}


def build_old_store(target: dict[str, Any]) -> None:
    """Create the store of commit 5277531 at ``target`` from the fixture, as that code left it
    (SQLite: ``user_version`` 3; PostgreSQL: ``schema_version`` 3 in the project's schema)."""
    if target["engine"] == "sqlite":
        import sqlean

        target["path"].parent.mkdir(parents=True)
        conn = sqlean.connect(str(target["path"]))
        conn.executescript((OLD / "sqlite.sql").read_text())
        conn.close()
        return
    import psycopg

    schema = schema_name(target["project"])
    with psycopg.connect(target["url"], autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}", public')
        # what PgDatabase._migrate of that commit wrote before its migrations
        conn.execute(
            "CREATE TABLE schema_version (version INTEGER NOT NULL, project TEXT NOT NULL)"
        )
        conn.execute(
            "INSERT INTO schema_version (version, project) VALUES (3, %s)", (target["project"],)
        )
        conn.execute((OLD / "postgresql.sql").read_text())


def open_store(target: dict[str, Any], migrations: list[Migration] = ()) -> Store:
    if target["engine"] == "sqlite":
        return Store(target["path"], migrations=migrations)
    return Store(target["url"], project=target["project"], migrations=migrations)


def tables_of(store: Store) -> list[str]:
    """The tables of the store's database (SQLite) or of its project's schema (PostgreSQL), one
    entry per table, sorted (FTS5's shadow tables left out)."""
    if store.engine == "sqlite":
        rows = store.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND name NOT LIKE 'recall_fts_%'"
        )
    else:
        rows = store.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    return sorted(r[0] for r in rows)


def core_version(store: Store) -> int:
    if store.engine == "sqlite":
        return int(store.conn.execute("PRAGMA user_version").fetchone()[0])
    return int(store.conn.execute("SELECT version FROM schema_version").fetchone()[0])


def default_migrations() -> list[Migration]:
    """What ``register_migrations`` answers with veil's default plugins loaded."""
    from veil.core import plugins

    return plugin_tables.collect(plugins.load_plugins(plugins.new_plugin_manager()))


# -- a store made before plugins owned their tables ----------------------------------------------


def test_a_store_of_the_previous_release_opens_unchanged(target: dict[str, Any]) -> None:
    build_old_store(target)
    old_tables = sorted(
        OLD_TABLES | (PG_ONLY_TABLES if target["engine"] == "postgresql" else set())
    )
    veil = open_veil(target["project_dir"], use_entry_points=False)
    try:
        store = veil.store
        # the core moved on one version (the bookkeeping table); each plugin recorded version 1
        assert core_version(store) == 4
        assert dict(
            store.conn.execute("SELECT plugin, version FROM plugin_migrations").fetchall()
        ) == {
            "veil.beliefs": 1,
            "veil.doctor": 1,
        }
        # the same tables, once each, plus the bookkeeping
        assert tables_of(store) == sorted([*old_tables, "plugin_migrations"])
        # rows intact: the conversation, the item, the beliefs and their conflict, the quarantine
        loaded = store.load_session("s1")
        assert loaded.messages == [
            (0, {"role": "user", "content": "what port?"}),
            (0, {"role": "assistant", "content": "port 80"}),
        ]  # (step, message)
        assert [i.id for i in store.items("s1")] == ["item_1"]
        beliefs = {
            r["id"]: (r["statement"], r["status"])
            for r in store.conn.execute("SELECT id, statement, status FROM beliefs")
        }
        assert beliefs == OLD_BELIEFS
        (conflict,) = veil.pm.hook.belief_conflicts(session=veil.new_session())
        assert conflict["id"] == OLD_CONFLICT
        assert sorted(b["id"] for b in conflict["beliefs"]) == [
            "belief_707089dbdb9f",
            "belief_aea95ffa9165",
        ]
        kept = store.conn.execute("SELECT table_name, row_key, row FROM quarantine").fetchall()
        assert [tuple(r) for r in kept] == [("messages", "s1#9", '{"message": "{not json"}')]
        # the unique indexes the old view had are still there, once
        with pytest.raises(store.dialect.integrity_errors()), store.transaction() as conn:
            conn.execute(
                "INSERT INTO beliefs (id, statement, subject, predicate, value, status,"
                " created_at) VALUES ('b_x', 'api port is 80', 'api port', 'is', '80',"
                " 'active', 9.0)"
            )
    finally:
        veil.close()


def test_a_new_store_and_an_upgraded_one_have_the_same_tables_and_columns(
    target: dict[str, Any], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    build_old_store(target)
    upgraded = open_store(target, default_migrations())
    if target["engine"] == "sqlite":
        fresh = Store(tmp_path / "fresh.db", migrations=default_migrations())
    else:
        project = unique_project()
        request.addfinalizer(lambda: end_connections(target["url"], project))
        fresh = Store(target["url"], project=project, migrations=default_migrations())
    try:
        assert tables_of(fresh) == tables_of(upgraded)
        for table in tables_of(fresh):
            assert fresh.dialect.table_columns(fresh.conn, table) == upgraded.dialect.table_columns(
                upgraded.conn, table
            ), table
        assert core_version(fresh) == core_version(upgraded) == 4
    finally:
        fresh.close()
        upgraded.close()


# -- a third-party plugin's table ------------------------------------------------------------------


class NotesPlugin:
    """A plugin outside veil with a table of its own: version 1 creates it (one script per
    engine), version 2 (a callable) adds a column and fills it from the rows there."""

    def __init__(self, versions: int) -> None:
        self.versions = versions
        self.calls: list[str] = []

    def add_length(self, conn: Any, engine: str) -> None:
        self.calls.append(engine)
        conn.execute("ALTER TABLE thirdparty_notes ADD COLUMN length INTEGER NOT NULL DEFAULT 0")
        conn.execute("UPDATE thirdparty_notes SET length = length(text)")

    @hookimpl
    def register_migrations(self) -> list[Migration]:
        steps = [
            Migration(
                "thirdparty",
                1,
                {
                    "sqlite": "CREATE TABLE thirdparty_notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)",
                    "postgresql": "CREATE TABLE thirdparty_notes"
                    " (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, text TEXT NOT NULL)",
                },
                "notes",
            ),
            Migration("thirdparty", 2, self.add_length, "note lengths"),
        ]
        return steps[: self.versions]


def open_with(target: dict[str, Any], plugin: Any) -> Any:
    return open_veil(
        target["project_dir"], use_entry_points=False, extra_plugins=(("thirdparty", plugin),)
    )


def test_a_plugin_table_is_created_once_and_migrated(target: dict[str, Any]) -> None:
    first = NotesPlugin(versions=1)
    veil = open_with(target, first)
    try:
        versions = dict(veil.store.conn.execute("SELECT plugin, version FROM plugin_migrations"))
        assert versions["thirdparty"] == 1
        with veil.store.transaction() as conn:
            conn.execute("INSERT INTO thirdparty_notes (text) VALUES ('hello')")
    finally:
        veil.close()
    # opened again with the same version: nothing applied again (a second CREATE would fail)
    veil = open_with(target, NotesPlugin(versions=1))
    veil.close()
    # the plugin's next release: version 2 applied once, on the rows there
    second = NotesPlugin(versions=2)
    veil = open_with(target, second)
    try:
        assert second.calls == [target["engine"]]
        rows = veil.store.conn.execute("SELECT text, length FROM thirdparty_notes").fetchall()
        assert [tuple(r) for r in rows] == [("hello", 5)]
        assert tables_of(veil.store).count("thirdparty_notes") == 1
    finally:
        veil.close()
    third = NotesPlugin(versions=2)
    veil = open_with(target, third)
    try:
        assert third.calls == []
        versions = dict(veil.store.conn.execute("SELECT plugin, version FROM plugin_migrations"))
        assert versions == {"veil.beliefs": 1, "veil.doctor": 1, "thirdparty": 2}
    finally:
        veil.close()


def test_a_blocked_plugin_has_no_tables(target: dict[str, Any]) -> None:
    veil = open_veil(target["project_dir"], use_entry_points=False, disable=("veil.beliefs",))
    try:
        assert "beliefs" not in tables_of(veil.store)
        assert dict(veil.store.conn.execute("SELECT plugin, version FROM plugin_migrations")) == {
            "veil.doctor": 1
        }
    finally:
        veil.close()


def test_an_older_plugin_than_its_tables_is_refused(target: dict[str, Any]) -> None:
    open_with(target, NotesPlugin(versions=2)).close()
    with pytest.raises(
        ConfigError, match=r"'thirdparty' are at version 2, newer than the plugin knows \(1\)"
    ):
        open_with(target, NotesPlugin(versions=1))


def test_a_failed_migration_is_rolled_back_whole(target: dict[str, Any]) -> None:
    def broken(conn: Any, engine: str) -> None:
        conn.execute("CREATE TABLE thirdparty_half (id INTEGER)")
        conn.execute("SELECT no_such_column FROM thirdparty_half")

    class Broken:
        @hookimpl
        def register_migrations(self) -> list[Migration]:
            return [Migration("thirdparty", 1, broken)]

    with pytest.raises(Exception, match="no_such_column"):
        open_with(target, Broken())
    veil = open_veil(target["project_dir"], use_entry_points=False)
    try:
        assert "thirdparty_half" not in tables_of(veil.store)
        assert "thirdparty" not in dict(
            veil.store.conn.execute("SELECT plugin, version FROM plugin_migrations")
        )
    finally:
        veil.close()


# -- what a declaration may be -------------------------------------------------------------------


def test_versions_with_a_gap_or_a_repeat_are_refused() -> None:
    one = Migration("p", 1, "CREATE TABLE a (x INTEGER)")
    three = Migration("p", 3, "CREATE TABLE b (x INTEGER)")
    with pytest.raises(ConfigError, match=r"'p': migration versions \[1, 3\]; expected 1 to 2"):
        plugin_tables.plan([one, three])
    with pytest.raises(ConfigError, match=r"\[1, 1\]"):
        plugin_tables.plan([one, one])
    assert list(plugin_tables.plan([three.__class__("q", 1, "x"), one])) == ["p", "q"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"plugin": "", "version": 1, "sql": "x"}, "Migration.plugin"),
        ({"plugin": "p", "version": 0, "sql": "x"}, "Migration.version"),
        ({"plugin": "p", "version": True, "sql": "x"}, "Migration.version"),
        (
            {"plugin": "p", "version": 1, "sql": {"sqlite": "x"}},
            "a script for each of sqlite, postgresql",
        ),
        ({"plugin": "p", "version": 1, "sql": 3}, "a script, a script per engine, or a callable"),
    ],
)
def test_a_malformed_migration_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Migration(**kwargs)


def test_two_plugins_claiming_one_name_are_refused() -> None:
    from veil.core import plugins

    class A:
        @hookimpl
        def register_migrations(self) -> list[Migration]:
            return [Migration("shared", 1, "CREATE TABLE a (x INTEGER)")]

    class B:
        @hookimpl
        def register_migrations(self) -> list[Migration]:
            return [Migration("shared", 1, "CREATE TABLE b (x INTEGER)")]

    pm = plugins.new_plugin_manager()
    pm.register(A(), name="plugin_a")
    pm.register(B(), name="plugin_b")
    with pytest.raises(
        ConfigError, match="'shared' are declared by both 'plugin_b' and 'plugin_a'"
    ):
        plugin_tables.collect(pm)


def test_a_wrong_answer_names_the_plugin() -> None:
    from veil.core import plugins
    from veil.core.errors import PluginResultInvalid

    class Wrong:
        @hookimpl
        def register_migrations(self) -> list[Any]:
            return [{"plugin": "x", "version": 1}]

    pm = plugins.new_plugin_manager()
    pm.register(Wrong(), name="wrong")
    with pytest.raises(PluginResultInvalid, match="plugin wrong: hook register_migrations"):
        plugin_tables.collect(pm)


def test_the_fixture_is_what_that_commit_wrote() -> None:
    """The old store's dump holds the tables the core created then (quarantine among them) and
    no bookkeeping of plugin tables: the upgrade tests start from the previous layout."""
    dump = (OLD / "sqlite.sql").read_text()
    assert "CREATE TABLE quarantine" in dump and "plugin_migrations" not in dump
    assert dump.rstrip().endswith("PRAGMA user_version = 3;")
    pg = (OLD / "postgresql.sql").read_text()
    assert pg.count("-- migration ") == 3 and "plugin_migrations" not in pg


def test_veil_plugins_lists_a_plugin_whose_migrations_fail(target: dict[str, Any]) -> None:
    class Raises:
        @hookimpl
        def register_migrations(self) -> list[Migration]:
            raise RuntimeError("no tables today")

    veil = open_veil(
        target["project_dir"],
        use_entry_points=False,
        extra_plugins=(("raises", Raises()),),
        keep_going=True,
    )
    try:
        assert veil.plugin_problems == {
            "raises": "plugin raises failed in hook register_migrations: RuntimeError: no tables today"
        }
        assert "veil.beliefs" in dict(
            veil.store.conn.execute("SELECT plugin, version FROM plugin_migrations")
        )
    finally:
        veil.close()


def test_the_beliefs_view_is_rebuilt_from_its_migrations_and_the_log(
    target: dict[str, Any],
) -> None:
    """``veil doctor --repair``'s rebuild drops the view, applies the plugin's migrations again
    and replays the log: a dropped table comes back with the same rows and its unique index."""
    from veil.default_plugins.beliefs import belief_store

    build_old_store(target)
    veil = open_veil(target["project_dir"], use_entry_points=False)
    try:
        store = veil.store
        before = sorted(tuple(r) for r in store.conn.execute("SELECT id, status FROM beliefs"))
        with store.transaction() as conn:
            conn.execute("DROP TABLE beliefs")
        assert veil.pm.hook.rebuild_derived(store=store) == [["beliefs"]]
        after = sorted(tuple(r) for r in store.conn.execute("SELECT id, status FROM beliefs"))
        assert after == before == sorted((b, "active") for b in OLD_BELIEFS)
        assert [c["id"] for c in belief_store(veil).open_conflicts()] == [OLD_CONFLICT]
        versions = dict(store.conn.execute("SELECT plugin, version FROM plugin_migrations"))
        assert versions["veil.beliefs"] == 1
        with (
            pytest.raises(store.dialect.integrity_errors()),
            store.transaction() as conn,
        ):
            conn.execute(
                "INSERT INTO beliefs (id, statement, subject, predicate, value, status,"
                " created_at) VALUES ('b_x', 'api port is 80', 'api port', 'is', '80',"
                " 'active', 9.0)"
            )
    finally:
        veil.close()
