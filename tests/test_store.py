"""The session store: schema migrations, WAL, full history kept, resume / continue, concurrency."""

from __future__ import annotations

import threading

import pytest

from veil.core.errors import ConfigError, SessionClosed, SessionNotFound
from veil.core.store import Store, connection, row_codec, schema


def test_new_database_is_migrated_and_in_wal_mode(tmp_path):
    store = Store(tmp_path / "context.db")
    conn = store.conn
    assert connection.schema_version(conn) == len(schema.MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == connection.BUSY_TIMEOUT_MS
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"sessions", "messages", "items", "events", "usage"} <= tables
    # opening again applies nothing twice
    assert connection.apply_migrations(Store(tmp_path / "context.db").conn) == len(
        schema.MIGRATIONS
    )


def test_a_file_that_is_not_a_database_is_named(tmp_path):
    bad = tmp_path / "context.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="context.db"):
        Store(bad)


def test_sessions_resume_with_full_history_and_continue_picks_the_latest(make_veil):
    veil = make_veil(["first answer", "second answer", "third"])
    s1 = veil.new_session()
    veil.run_turn(s1, "one")
    s2 = veil.new_session()
    veil.run_turn(s2, "two")
    assert veil.last_session_id() == s2.id
    again = veil.load_session(s1.id)
    assert again.resumed and [m["content"] for m in again.messages] == ["one", "first answer"]
    veil.run_turn(again, "three")
    assert veil.last_session_id() == s1.id
    rows = veil.list_sessions()
    assert [r["id"] for r in rows] == [s1.id, s2.id]
    assert rows[0]["message_count"] == 4 and rows[0]["title"] == "one"


def test_unknown_and_closed_sessions_raise_typed_errors(make_veil):
    veil = make_veil(["x"])
    with pytest.raises(SessionNotFound):
        veil.load_session("sess_missing")
    session = veil.new_session()
    veil.close_session(session)
    with pytest.raises(SessionClosed):
        veil.run_turn(veil.load_session(session.id), "hi")
    assert veil.last_session_id() is None


def test_agent_config_is_snapshotted_at_creation(make_veil, project):
    import json

    agent_file = project / ".veil/agents/default/agent.json"
    agent_file.parent.mkdir(parents=True)
    agent_file.write_text(json.dumps({"defaultCompaction": {"compactionCount": 30}}))
    veil = make_veil([])
    session = veil.new_session()
    agent_file.write_text(json.dumps({"defaultCompaction": {"compactionCount": 70}}))
    assert veil.load_session(session.id).snapshot["defaultCompaction"]["compactionCount"] == 30


def test_concurrent_writers_on_different_sessions_do_not_lock(tmp_path):
    path = tmp_path / "context.db"
    store = Store(path)
    ids = [f"sess_{i}" for i in range(4)]
    for sid in ids:
        store.create_session(sid, "default", None, {})
    errors: list[BaseException] = []

    def writer(sid: str) -> None:
        try:
            local = Store(path)
            for n in range(100):
                local.append_message(sid, n, 0, {"role": "user", "content": str(n)})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(sid,)) for sid in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [len(store.messages(sid)) for sid in ids] == [100] * 4


def test_event_log_is_append_only_in_order(tmp_path):
    store = Store(tmp_path / "c.db")
    a = store.log_event("assert", {"x": 1}, session_id="s", step=1, tool_call_id="t")
    b = store.log_event("retract", {"x": 1}, session_id="s", step=2)
    assert b == a + 1
    assert [e["kind"] for e in store.events("s")] == ["assert", "retract"]
    assert store.events("s", ("retract",))[0]["payload"] == {"x": 1}


def test_one_item_is_written_atomically_and_read_back_by_another_connection(tmp_path):
    from veil.core.types import ContextItem

    path = tmp_path / "c.db"
    store = Store(path)
    store.create_session("s", "default", None, {})
    item = ContextItem(
        content='say "hi"\\n',
        kind="episodic",
        source="tool_result",
        tags=["alpha", 'quo"te', "back\\slash", "tab\there", "naïve"],
        targets=["src/a.py", "pkg.mod.func"],
        stability=2.5,
        pinned=True,
        session_id="s",
    )
    store.add_items([item])  # the single-statement path
    assert not store.conn.in_transaction
    other = Store(path).get_item(item.id)  # committed: visible to a second connection
    assert other is not None
    assert (other.tags, other.targets, other.pinned, other.loaded_by_hand) == (
        item.tags,
        item.targets,
        True,
        False,
    )
    assert other.content == item.content and other.stability == 2.5
    # a failing statement writes nothing and leaves the earlier row as it was
    with pytest.raises(connection.sqlite3.IntegrityError):
        store.add_items(
            [
                ContextItem(
                    content="x",
                    kind="episodic",
                    source="user",
                    stability=1,
                    session_id="no-such-session",
                )
            ]
        )
    assert [i.id for i in Store(path).items("s")] == [item.id]


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["alpha", "beta_gamma", "src/pkg/mod.py"],
        ['quo"te'],
        ["back\\slash"],
        ["new\nline", "tab\t", "\x00nul", "\x7fdel"],
        ["naïve", "日本語", "emoji 🙂", "\u2028sep"],
        ["\ud800lone surrogate"],
        [1, "mixed"],
        ("a", "tuple"),
        {"not": "a list"},
    ],
)
def test_dumps_strings_writes_what_json_dumps_writes(values):
    import json

    expected = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    assert row_codec.dumps_strings(values) == expected
    assert row_codec.dumps(values) == expected


def test_dumps_strings_matches_json_on_generated_lists():
    import json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.text(max_size=12), max_size=8))
    def check(values):
        assert row_codec.dumps_strings(values) == json.dumps(
            values, ensure_ascii=False, separators=(",", ":")
        )

    check()
