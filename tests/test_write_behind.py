"""Store writes queued behind the call path (veil/core/store/write_behind.py): order, consistency of
later reads, failures, tier counts while a job waits, and the eviction pass that uses them."""

from __future__ import annotations

import threading

import pytest

from veil.core.store import Store
from veil.core.store.write_behind import WriteBehindError
from veil.core.types import EvictionPlan


def _session_with_items(store: Store, n: int) -> list[str]:
    store.create_session("s", "agent", None, {})
    ids = [f"item_{k}" for k in range(n)]
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO items (id, session_id, kind, source, content, stability, difficulty,"
            " created_at, last_access) VALUES (?, 's', 'episodic', 'tool_result', 'x', 1, 5, 0, 0)",
            [(i,) for i in ids],
        )
    return ids


def test_jobs_run_in_order_on_another_thread_and_later_reads_see_them(tmp_path):
    store = Store(tmp_path / "c.db")
    ids = _session_with_items(store, 3)
    threads: list[str] = []

    def move(tier: str):
        def job(conn) -> None:
            threads.append(threading.current_thread().name)
            conn.execute("UPDATE items SET tier = ? WHERE id = ?", (tier, ids[0]))

        return job

    for tier in ("warm", "cold", "warm"):  # the last one queued must be the one that stays
        store.write_behind(move(tier), f"move to {tier}")
    # any read through the store waits for the queue: no flush needed by the caller
    tier = store.conn.execute("SELECT tier FROM items WHERE id = ?", (ids[0],)).fetchone()[0]
    assert tier == "warm"
    assert threads == ["veil-write-behind"] * 3
    assert store.writer is not None and store.writer.pending == 0
    store.close()


def test_a_failed_job_is_rolled_back_and_raised_by_the_next_use_of_the_store(tmp_path):
    store = Store(tmp_path / "c.db")
    ids = _session_with_items(store, 2)

    def half_then_fail(conn) -> None:
        conn.execute("UPDATE items SET tier = 'warm' WHERE id = ?", (ids[0],))
        raise RuntimeError("disk on fire")

    store.write_behind(half_then_fail, "eviction pass of 1 item(s)")
    with pytest.raises(
        WriteBehindError, match=r"c\.db.*eviction pass of 1 item\(s\).*disk on fire"
    ):
        store.flush()
    # rolled back: the first UPDATE of the failed job did not land; the error is raised once
    assert store.tier_counts("s") == {"live": 2, "warm": 0, "cold": 0}
    store.write_behind(
        lambda conn: conn.execute("UPDATE items SET tier = 'cold' WHERE id = ?", (ids[1],)), "ok"
    )
    store.flush()  # (tier_counts adds only the moves a job declares)
    assert store.tier_counts("s") == {"live": 1, "warm": 0, "cold": 1}
    store.close()


def test_tier_counts_add_queued_moves_without_waiting_for_them(tmp_path):
    store = Store(tmp_path / "c.db")
    ids = _session_with_items(store, 5)
    release = threading.Event()

    def slow(conn) -> None:
        assert release.wait(10)
        conn.execute(f"UPDATE items SET tier = 'warm' WHERE id IN ({','.join('?' * 3)})", ids[:3])

    store.write_behind(slow, "slow", tier_deltas={"s": {"live": -3, "warm": 3}})
    # the job is still waiting (a plain read would block on it): counts come with its deltas
    assert store.tier_counts("s") == {"live": 2, "warm": 3, "cold": 0}
    assert store.writer is not None and store.writer.pending == 1
    release.set()
    store.flush()
    assert store.tier_counts("s") == {"live": 2, "warm": 3, "cold": 0}
    store.close()


def test_memory_store_and_write_behind_off_run_jobs_at_once(tmp_path):
    for store in (Store(":memory:"), Store(tmp_path / "c.db", write_behind=False)):
        _session_with_items(store, 1)
        store.write_behind(lambda conn: conn.execute("UPDATE items SET tier = 'cold'"), "now")
        assert store.writer is None
        assert store.tier_counts("s")["cold"] == 1
        store.close()


def test_close_lands_queued_writes(tmp_path):
    path = tmp_path / "c.db"
    store = Store(path)
    _session_with_items(store, 1)
    store.write_behind(lambda conn: conn.execute("UPDATE items SET tier = 'warm'"), "move")
    store.close()
    again = Store(path)
    assert again.tier_counts("s") == {"live": 0, "warm": 1, "cold": 0}
    again.close()


def test_an_eviction_pass_records_tiers_event_and_recall_index_behind(make_veil):
    from veil.core.prompt.assemble import pointer_stub
    from veil.core.types import ContextItem

    veil = make_veil()
    session = veil.new_session()
    items = [
        ContextItem(
            content=f"result {k} src/mod_{k}.py",
            kind="episodic",
            source="tool_result",
            tokens=100,
            stability=1.0,
            tags=[f"mod_{k}"],
            message_index=k,
        )
        for k in range(4)
    ]
    session.add_items(items)
    plan = EvictionPlan(to_warm=[items[0].id, items[1].id], to_cold=[items[2].id])
    plan.reasons.update({items[0].id: "stale", items[1].id: "low", items[2].id: "forced"})
    notes = session.apply_eviction(plan)
    assert notes[0] == "evicted 3 item(s)"
    # the session's view changed at once; the manifest's counts include the queued pass
    assert [i.id for i in session.live_items] == [items[3].id]
    assert session.stubs[0] == pointer_stub(items[0])
    assert veil.store.tier_counts(session.id) == {"live": 1, "warm": 2, "cold": 1}
    # and the store holds the whole pass after the flush any reader does
    stored = {i.id: i.tier for i in veil.store.items(session.id, ("live", "warm", "cold"))}
    assert stored == {
        items[0].id: "warm",
        items[1].id: "warm",
        items[2].id: "cold",
        items[3].id: "live",
    }
    (event,) = veil.store.events(session.id, ("evict",))
    assert [(e["id"], e["tier"], e["reason"]) for e in event["payload"]["items"]] == [
        (items[0].id, "warm", "stale"),
        (items[1].id, "warm", "low"),
        (items[2].id, "cold", "forced"),
    ]
    assert veil.tiers.counts()["warm"] == 2 and veil.tiers.counts()["cold"] == 1
    assert veil.tiers.content(items[2].id) == items[2].content  # cold: compressed, whole


def test_a_job_that_cannot_even_begin_leaves_no_pending_counts(tmp_path, monkeypatch):
    import subprocess
    import sys
    import time

    from veil.core.store import connection

    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 200)  # the writer's connection gives up fast
    path = tmp_path / "c.db"
    store = Store(path)
    _session_with_items(store, 2)
    # another process holds the write lock (a second SQLite library in this process would not
    # see its lock, so it has to be another process)
    locker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(3)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        store.write_behind(
            lambda conn: conn.execute("UPDATE items SET tier = 'warm' WHERE id = 'item_0'"),
            "move",
            tier_deltas={"s": {"live": -1, "warm": 1}},
        )
        start = time.monotonic()
        with pytest.raises(WriteBehindError, match="locked"):
            store.flush()
        assert time.monotonic() - start < 2.5  # it failed on the lock, not after it
    finally:
        locker.wait(10)
    # the failed job's move is not counted: the manifest must not show what did not happen
    assert store.tier_counts("s") == {"live": 2, "warm": 0, "cold": 0}
    store.close()
