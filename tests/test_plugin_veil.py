"""The store reads and writes plugins reach through named ``Veil`` methods (issue 20): each does
what the store call it wraps did, checked against the rows in ``.veil/context.db`` read back
on a second connection (not through the method under test)."""

from __future__ import annotations

import pytest

from veil.core.errors import BadRequest, SessionNotFound
from veil.core.store import connection
from veil.core.types import ContextItem


def _rows(veil, sql: str, *params):
    """Rows of ``sql`` read on a second connection to the store's file (what was committed)."""
    veil.store.flush()  # queued write-behind moves land before another connection reads
    conn = connection.connect(veil.store.path, migrate=False)
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def _items(veil, session_id: str, tiers: list[str]) -> list[ContextItem]:
    """One item per tier name in ``tiers``, added in that order (as the store writes them)."""
    items = [
        ContextItem(content=f"item {n} in {tier}", session_id=session_id, tier=tier)
        for n, tier in enumerate(tiers)
    ]
    veil.store.add_items(items)
    return items


def test_update_session_sets_the_object_and_the_row_in_one_write(make_veil) -> None:
    veil = make_veil()
    session = veil.new_session()
    version = _rows(veil, "SELECT version FROM sessions WHERE id = ?", session.id)[0]["version"]
    veil.update_session(session, title="Fixing the parser", model="m/other")
    assert (session.title, session.model) == ("Fixing the parser", "m/other")
    row = _rows(veil, "SELECT title, model, version FROM sessions WHERE id = ?", session.id)[0]
    # title and model are metadata: no new version, so no other process's copy goes stale
    assert row == {"title": "Fixing the parser", "model": "m/other", "version": version}
    veil.update_session(session, model=None)  # None: the configured main model; title kept
    row = _rows(veil, "SELECT title, model FROM sessions WHERE id = ?", session.id)[0]
    assert row == {"title": "Fixing the parser", "model": None}
    assert session.model is None and session.title == "Fixing the parser"


def test_update_session_refuses_a_credential_as_model_and_changes_nothing(make_veil) -> None:
    veil = make_veil()
    session = veil.new_session(model="m/one")
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    with pytest.raises(BadRequest, match="^model: this looks like an API key") as caught:
        veil.update_session(session, title="t", model=key)
    assert key not in str(caught.value)
    assert (session.title, session.model) == (None, "m/one")
    row = _rows(veil, "SELECT title, model FROM sessions WHERE id = ?", session.id)[0]
    assert row == {"title": None, "model": "m/one"}


def test_stored_items_and_tier_counts_read_what_the_store_holds(make_veil) -> None:
    veil = make_veil()
    session = veil.new_session()
    other = veil.new_session()
    items = _items(veil, session.id, ["live", "warm", "cold", "warm"])
    _items(veil, other.id, ["warm"])
    found = veil.stored_items(session.id, ("warm", "cold"))
    assert [i.id for i in found] == [items[1].id, items[2].id, items[3].id]  # order added
    assert [i.tier for i in found] == ["warm", "cold", "warm"]
    assert [i.id for i in veil.stored_items(session.id)] == [items[0].id]  # default: live
    assert veil.tier_counts(session.id) == {"live": 1, "warm": 2, "cold": 1}
    assert veil.tier_counts("sess_unknown") == {"live": 0, "warm": 0, "cold": 0}
    assert veil.stored_items("sess_unknown", ("live", "warm", "cold")) == []


def test_stored_item_answers_only_for_its_own_session(make_veil) -> None:
    veil = make_veil()
    session, other = veil.new_session(), veil.new_session()
    mine = _items(veil, session.id, ["cold"])[0]
    theirs = _items(veil, other.id, ["live"])[0]
    found = veil.stored_item(session.id, mine.id)
    assert (found.id, found.tier, found.session_id) == (mine.id, "cold", session.id)
    assert veil.stored_item(session.id, theirs.id) is None  # another session's id
    assert veil.stored_item(session.id, "item_none") is None


def test_delete_session_removes_rows_and_keeps_events(make_veil) -> None:
    veil = make_veil()
    session, kept = veil.new_session(), veil.new_session()
    _items(veil, session.id, ["live", "warm"])
    events = _rows(veil, "SELECT COUNT(*) AS n FROM events WHERE session_id = ?", session.id)
    assert not veil.session_is_closed(session.id)
    veil.delete_session(session.id)
    assert _rows(veil, "SELECT id FROM sessions") == [{"id": kept.id}]
    assert _rows(veil, "SELECT id FROM items WHERE session_id = ?", session.id) == []
    after = _rows(veil, "SELECT COUNT(*) AS n FROM events WHERE session_id = ?", session.id)
    assert after == events  # the event log is append-only
    with pytest.raises(SessionNotFound):
        veil.delete_session(session.id)
    with pytest.raises(SessionNotFound):
        veil.session_is_closed(session.id)


def test_session_is_closed_reads_the_row(make_veil) -> None:
    veil = make_veil()
    session = veil.new_session()
    veil.close_session(veil.load_session(session.id))
    assert veil.session_is_closed(session.id)
    assert not session.closed  # the caller's own copy was not the one closed


def test_stored_items_names_an_unknown_tier(make_veil) -> None:
    veil = make_veil()
    session = veil.new_session()
    with pytest.raises(ValueError, match=r"^tiers: unknown tier 'hot' \(one of live, warm, cold\)"):
        veil.stored_items(session.id, ("warm", "hot"))


def test_record_usage_writes_one_usage_row(make_veil) -> None:
    veil = make_veil()
    session = veil.new_session()
    veil.record_usage(
        session.id,
        role="proxy",
        model="m/up",
        provider="upstream",
        prompt_tokens=1200,
        completion_tokens=34,
        seconds=0.5,
    )
    rows = _rows(
        veil,
        "SELECT session_id, role, model, provider, prompt_tokens, completion_tokens, seconds"
        " FROM usage WHERE session_id = ?",
        session.id,
    )
    assert rows == [
        {
            "session_id": session.id,
            "role": "proxy",
            "model": "m/up",
            "provider": "upstream",
            "prompt_tokens": 1200,
            "completion_tokens": 34,
            "seconds": 0.5,
        }
    ]


def test_last_usage_is_the_latest_answers_usage(make_veil) -> None:
    veil = make_veil()
    session = veil.new_session()
    assert veil.last_usage(session.id) is None  # no answer yet
    veil.store.append_message(session.id, 0, 0, {"role": "user", "content": "hi"})
    veil.store.append_message(
        session.id,
        1,
        1,
        {"role": "assistant", "content": "a"},
        usage={"prompt_tokens": 10, "completion_tokens": 2},
    )
    veil.store.append_message(
        session.id,
        2,
        2,
        {"role": "assistant", "content": "b"},
        usage={"prompt_tokens": 30, "completion_tokens": 5, "cached_tokens": 8},
    )
    assert veil.last_usage(session.id) == {
        "prompt_tokens": 30,
        "completion_tokens": 5,
        "cached_tokens": 8,
    }
