"""One damaged row breaks only itself (issue 19 "Sessions and stores"): loads and listings keep
what is valid and name the bad rows; ``veil doctor`` finds them and moves them aside.

Rows are damaged by a separate process (stdlib sqlite3 there, never in veil's own process: its
WAL handling beside sqlean's open connection loses writes), as another tool or a torn write
would leave them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from veil.core.store import Store
from veil.core.store.row_codec import fill_damaged
from veil.testing.scripted_server import ScriptedOpenAIServer, configure_project

DAMAGE = (
    "import sqlite3, sys\n"
    "conn = sqlite3.connect(sys.argv[1])\n"
    "for statement in sys.argv[2:]:\n"
    "    conn.execute(statement)\n"
    "conn.commit()\n"
    "conn.close()\n"
)


def damage(db: Path, *statements: str) -> None:
    subprocess.run([sys.executable, "-c", DAMAGE, str(db), *statements], check=True, timeout=60)


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(
        os.environ,
        VEIL_HOME=str(tmp_path / "home"),
        VEIL_ALLOW_PROJECT_PROVIDERS="1",  # configure_project's provider is the project's (issue 17)
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
    )


def _veil(tmp_path: Path, project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


@pytest.fixture
def damaged(tmp_path, project, make_veil, monkeypatch):
    """Four sessions, three of them damaged: ``a`` clean, ``b`` message row 1 not JSON, ``c``
    snapshot not JSON (the newest), ``d`` updated_at holding text."""
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(
        "VEIL_ALLOW_PROJECT_PROVIDERS", "1"
    )  # configure_project's provider is the project's (issue 17)
    veil = make_veil(["a1", "b1", "b2", "c1", "d1"])
    ids = {}
    for name, texts in (("a", ["hi a"]), ("b", ["hi b", "more b"]), ("d", ["hi d"])):
        session = veil.new_session()
        for text in texts:
            veil.run_turn(session, text, stream=False)
        ids[name] = session.id
    session = veil.new_session()
    veil.run_turn(session, "hi c", stream=False)
    ids["c"] = session.id
    veil.close()
    db = project / ".veil" / "context.db"
    damage(
        db,
        f'UPDATE messages SET message = \'{{"role": "assistant", "cont\' '
        f"WHERE session_id = '{ids['b']}' AND idx = 1",
        f"UPDATE sessions SET snapshot = '{{broken' WHERE id = '{ids['c']}'",
        f"UPDATE sessions SET updated_at = 'yesterday' WHERE id = '{ids['d']}'",
        f"UPDATE sessions SET updated_at = updated_at + 100 WHERE id = '{ids['c']}'",
    )
    return ids, db


def test_a_session_with_a_damaged_message_loads_with_a_stand_in_and_goes_on(
    damaged, make_veil, project
):
    ids, db = damaged
    veil = make_veil(["b3"])
    session = veil.load_session(ids["b"])
    assert [m["role"] for m in session.messages] == ["user", "assistant", "user", "assistant"]
    assert "could not be read" in session.messages[1]["content"]
    assert session.messages[2]["content"] == "more b" and session.messages[3]["content"] == "b2"
    assert len(session.load_warnings) == 1
    assert f"session {ids['b']}: message row 1 is damaged" in session.load_warnings[0]
    assert "not valid JSON" in session.load_warnings[0]
    result = veil.run_turn(session, "and on", stream=False)  # appends at 4: no clash with row 1
    assert result.final == "b3"
    sent = veil.model.calls[-1]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["hi b", "more b", "and on"]
    raw = veil.store.conn.execute(
        "SELECT message FROM messages WHERE session_id = ? AND idx = 1", (ids["b"],)
    ).fetchone()[0]
    assert raw == '{"role": "assistant", "cont'  # left as it was: nothing lost unseen


def test_listings_leave_out_only_the_damaged_session_rows(damaged, make_veil):
    ids, _ = damaged
    veil = make_veil()
    problems: list[str] = []
    listed = [r["id"] for r in veil.list_sessions(50, problems)]
    assert listed == [ids["c"], ids["b"], ids["a"]]  # c is newest; d's row is damaged
    assert len(problems) == 1 and ids["d"] in problems[0] and "updated_at" in problems[0]
    assert veil.last_session_id() == ids["c"]
    session = veil.load_session(ids["c"])  # its snapshot stands in from agent.json
    assert session.snapshot["defaultCompaction"]["enabled"] is True
    assert any("snapshot is damaged" in w for w in session.load_warnings)


def test_http_lists_and_loads_around_damaged_rows(damaged, make_veil):
    from starlette.testclient import TestClient
    from veil_http.app import create_app

    ids, _ = damaged
    client = TestClient(
        create_app(make_veil()), raise_server_exceptions=False, base_url="http://127.0.0.1:5051"
    )
    listed = client.get("/sessions")
    assert listed.status_code == 200
    body = listed.json()
    assert [s["id"] for s in body["sessions"]] == [ids["c"], ids["b"], ids["a"]]
    assert len(body["warnings"]) == 1 and ids["d"] in body["warnings"][0]
    one = client.get(f"/sessions/{ids['b']}")
    assert one.status_code == 200
    assert one.json()["messageCount"] == 4
    assert "message row 1 is damaged" in one.json()["warnings"][0]


def test_cli_sessions_continue_and_doctor_repair(damaged, tmp_path, project):
    ids, db = damaged
    with ScriptedOpenAIServer(lambda body: "answer from the server") as server:
        configure_project(project, server)
        listed = _veil(tmp_path, project, "sessions", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [r["id"] for r in json.loads(listed.stdout)] == [ids["c"], ids["b"], ids["a"]]
        assert ids["d"] in listed.stderr and "Traceback" not in listed.stderr
        cont = _veil(tmp_path, project, "-c", "-p", "go on", "--json")
        assert cont.returncode == 0, cont.stderr
        assert json.loads(cont.stdout)["sessionId"] == ids["c"]
        assert "snapshot is damaged" in cont.stderr
        resumed = _veil(tmp_path, project, "--resume", ids["b"], "-p", "next", "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert "message row 1 is damaged" in resumed.stderr

    check = _veil(tmp_path, project, "doctor", "--json")
    assert check.returncode == 1, check.stderr
    report = json.loads(check.stdout)
    found = {(f["table"], f["key"]): f for f in report["findings"]}
    assert set(found) == {
        ("messages", f"{ids['b']}#1"),
        ("sessions", ids["c"]),
        ("sessions", ids["d"]),
    }
    assert found[("sessions", ids["c"])]["problems"][0].startswith("snapshot: not valid JSON")
    assert report["integrity"] == [] and report["problemsLeft"] == 3

    repair = _veil(tmp_path, project, "doctor", "--repair", "--json")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    repaired = json.loads(repair.stdout)
    assert repaired["problemsLeft"] == 0 and repaired["rebuilt"] == ["beliefs"]
    assert all(f["repaired"] for f in repaired["findings"])
    again = _veil(tmp_path, project, "doctor")
    assert again.returncode == 0, again.stdout
    assert "no problems left" in again.stdout and "row(s) kept in the quarantine" in again.stdout

    store = Store(db, write_behind=False)
    try:
        kept = store.conn.execute(
            "SELECT table_name, row_key, row FROM quarantine ORDER BY seq"
        ).fetchall()
        assert {(r[0], r[1]) for r in kept} == set(found)
        moved = next(json.loads(r[2]) for r in kept if r[0] == "messages")
        assert moved["message"] == '{"role": "assistant", "cont'  # the row, whole
        assert store.get_session(ids["c"])["damaged"] == []
        assert store.get_session(ids["d"])["updated_at"] > 0
        listed = [r["id"] for r in store.list_sessions()]
        assert set(listed) == set(ids.values())
        loaded = store.load_session(ids["b"])
        assert [p.split(": ", 1)[1] for p in loaded.problems] == [
            "message row 1 is missing; an empty stand-in keeps its place"
        ]
        assert loaded.messages[1][1]["role"] == "assistant"
    finally:
        store.close()


def test_repair_keeps_a_message_whose_only_damage_is_its_usage(tmp_path, project, make_veil):
    """The message of a row whose ``usage`` (token counts) is unreadable stays in the
    conversation: the repair sets ``usage`` to null (the row's copy goes to quarantine); it
    used to move the whole message aside."""
    veil = make_veil(["the answer"])
    session = veil.new_session()
    veil.run_turn(session, "a question", stream=False)
    veil.close()
    db = project / ".veil" / "context.db"
    damage(db, f"UPDATE messages SET usage = '\"a string\"' WHERE session_id = '{session.id}'")
    repair = _veil(tmp_path, project, "doctor", "--repair", "--json")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    store = Store(db, write_behind=False)
    try:
        loaded = store.load_session(session.id)
        assert loaded.problems == []
        assert [m["content"] for _, m in loaded.messages] == ["a question", "the answer"]
        usage = store.conn.execute("SELECT usage FROM messages ORDER BY idx").fetchall()
        assert [r[0] for r in usage] == [None, None]
        kept = store.conn.execute("SELECT table_name FROM quarantine").fetchall()
        assert [r[0] for r in kept] == ["messages", "messages"]  # the rows as they were
    finally:
        store.close()


def test_a_row_the_repair_moved_aside_is_not_sent_back_to_the_repair(damaged, tmp_path, project):
    """After ``veil doctor --repair`` a session misses the row it moved aside; resuming it
    says so, without advising the repair that left nothing to repair."""
    ids, _ = damaged
    assert _veil(tmp_path, project, "doctor", "--repair").returncode == 0
    with ScriptedOpenAIServer(lambda body: "answer from the server") as server:
        configure_project(project, server)
        resumed = _veil(tmp_path, project, "--resume", ids["b"], "-p", "next")
    assert resumed.returncode == 0, resumed.stderr
    assert "message row 1 is missing; an empty stand-in keeps its place" in resumed.stderr
    assert "veil doctor --repair" not in resumed.stderr
    assert "no problems left" in _veil(tmp_path, project, "doctor").stdout


def test_stand_ins_keep_every_tool_call_paired():
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "list"},
        None,  # the assistant turn that made call c1
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": None, "tool_calls": [call | {"id": "c2"}]},
        None,  # the result of c2
        {"role": "assistant", "content": "done"},
        None,  # a plain message
    ]
    filled = fill_damaged(history, {1: "x", 4: "y", 6: "z"})
    assert filled[1]["role"] == "assistant"
    assert [c["id"] for c in filled[1]["tool_calls"]] == ["c1"]
    assert filled[4] == {"role": "tool", "tool_call_id": "c2", "content": filled[4]["content"]}
    assert "(y)" in filled[4]["content"]
    assert filled[6]["role"] == "assistant" and "tool_calls" not in filled[6]
    assert filled[0] is history[0] and filled[2] is history[2]


def test_damaged_item_and_event_rows_do_not_stop_a_resume(make_veil, project):
    from veil.core.turn import capture
    from veil.core.types import CaptureEvent, EvictionPlan, ToolResult

    veil = make_veil([])
    session = veil.new_session()
    for n in range(2):  # two tool results, both evicted to warm in two passes
        call = {"id": f"c{n}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        session.append({"role": "assistant", "content": "", "tool_calls": [call]})
        tool_msg = {"role": "tool", "tool_call_id": f"c{n}", "content": f"text of mod_{n}.py"}
        idx = session.append(tool_msg)
        capture(
            session,
            CaptureEvent(
                "tool_result",
                tool_msg,
                n + 1,
                message_index=idx,
                tool_name="read",
                tool_call_id=f"c{n}",
                result=ToolResult(tool_msg["content"]),
            ),
        )
    first, second = list(session.live_items)
    session.apply_eviction(EvictionPlan(to_warm=[first.id]))
    session.apply_eviction(EvictionPlan(to_warm=[second.id]))
    sid = session.id
    veil.close()
    db = project / ".veil" / "context.db"
    damage(
        db,
        f"UPDATE items SET tags = 'not json' WHERE id = '{second.id}'",
        "UPDATE events SET payload = '{\"items\": [' WHERE seq = (SELECT MAX(seq) FROM events"
        f" WHERE kind = 'evict' AND session_id = '{sid}')",
    )
    veil = make_veil([])
    resumed = veil.load_session(sid)  # the damaged pass is skipped, the other still counts
    resumed.page_in_open = True
    assert [i.id for i in resumed.page_in_candidates()] == [first.id]
    assert veil.store.get_item(second.id).tags == []
    assert len(veil.store.events(sid, ("evict",))) == 1
    veil.close()

    store = Store(db, write_behind=False)
    try:
        from veil.default_plugins.doctor import store_check as doctor

        report = doctor.repair_store(store)
        assert sorted(f.table for f in report.findings) == ["events", "items"]
        assert report.problems_left == 0
        assert (
            store.conn.execute("SELECT tags FROM items WHERE id = ?", (second.id,)).fetchone()[0]
            == "[]"
        )
        assert store.conn.execute("SELECT COUNT(*) FROM quarantine").fetchone()[0] == 2
    finally:
        store.close()


def test_a_message_row_that_is_not_utf8_is_stood_in_for_and_moved_aside_whole(make_veil, project):
    from veil.default_plugins.doctor import store_check as doctor

    veil = make_veil(["fine"])
    session = veil.new_session()
    veil.run_turn(session, "hi", stream=False)
    sid = session.id
    veil.close()
    raw = b'{"role":"user","content":"caf\xe9"}'  # Latin-1 e-acute: not UTF-8
    db = project / ".veil" / "context.db"
    damage(
        db,
        f"UPDATE messages SET message = CAST(X'{raw.hex()}' AS TEXT)"
        f" WHERE session_id = '{sid}' AND idx = 0",
    )
    veil = make_veil([])
    loaded = veil.load_session(sid)
    assert [m["role"] for m in loaded.messages] == ["assistant", "assistant"]
    assert loaded.messages[1]["content"] == "fine"
    assert "not valid UTF-8 (byte 29)" in loaded.load_warnings[0]  # 0xE9 follows 29 bytes
    report = doctor.repair_store(veil.store)
    assert [(f.table, f.key, f.repaired) for f in report.findings] == [
        ("messages", f"{sid}#0", True)
    ]
    kept = json.loads(veil.store.conn.execute("SELECT row FROM quarantine").fetchone()[0])
    assert bytes.fromhex(kept["message"]["hex"]) == raw  # the bytes, exactly
    veil.close()


def test_a_damaged_version_or_unreadable_summary_is_found_loaded_around_and_repaired(
    tmp_path, project, make_veil, monkeypatch
):
    """Found by an outside fault hunt (issue 19): ``version`` holding text made ``veil -c``
    crash and ``veil doctor`` saw nothing; a ``compact_summary`` of invalid UTF-8 made every
    listing crash (SQLite's text fetch fails) and ``veil doctor`` saw nothing either."""
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VEIL_ALLOW_PROJECT_PROVIDERS", "1")
    veil = make_veil(["a1", "b1", "b2"])
    ids = {}
    for name in ("a", "b"):
        session = veil.new_session()
        veil.run_turn(session, f"hi {name}", stream=False)
        ids[name] = session.id
    veil.close()
    db = project / ".veil" / "context.db"
    damage(
        db,
        f"UPDATE sessions SET version = 'abc', updated_at = updated_at + 100 "
        f"WHERE id = '{ids['a']}'",
        f"UPDATE sessions SET compact_summary = CAST(X'80' AS TEXT), compact_size = 1 "
        f"WHERE id = '{ids['b']}'",
    )

    listed = _veil(tmp_path, project, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    assert json.loads(listed.stdout) == []  # both rows damaged: left out and named
    assert ids["a"] in listed.stderr and "version: 'abc'" in listed.stderr
    assert ids["b"] in listed.stderr and "compact_summary: not valid UTF-8 (byte 0)" in (
        listed.stderr
    )

    store = Store(db, write_behind=False)
    try:  # a load reads around both: version 0, the whole history sent again
        a = store.load_session(ids["a"])
        assert a.row["version"] == 0
        assert any("version: 'abc'" in p for p in a.problems)
        b = store.load_session(ids["b"])
        assert b.row["compact_summary"] is None and b.row["compact_size"] == 0
        assert any("whole history is sent again" in p for p in b.problems)
    finally:
        store.close()

    check = _veil(tmp_path, project, "doctor", "--json")
    assert check.returncode == 1, check.stdout + check.stderr
    found = {f["key"]: f["problems"] for f in json.loads(check.stdout)["findings"]}
    assert found == {
        ids["a"]: ["version: 'abc', expected a whole number >= 0"],
        ids["b"]: ["compact_summary: not valid UTF-8 (byte 0)"],
    }
    repair = _veil(tmp_path, project, "doctor", "--repair", "--json")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert json.loads(repair.stdout)["problemsLeft"] == 0

    with ScriptedOpenAIServer(lambda body: "answer from the server") as server:
        configure_project(project, server)
        for sid in (ids["a"], ids["b"]):
            resumed = _veil(tmp_path, project, "--resume", sid, "-p", "next", "--json")
            assert resumed.returncode == 0, resumed.stderr
            assert "Traceback" not in resumed.stderr and "warning" not in resumed.stderr
        sent = [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "user"]
        assert "hi b" in sent  # the start the unreadable summary stood for is sent again
    listed = _veil(tmp_path, project, "sessions", "--json")
    assert {r["id"] for r in json.loads(listed.stdout)} == set(ids.values())


def test_resume_reads_around_damaged_time_and_version_columns(tmp_path, project):
    """Found by a tester (session 13): ``created_at`` holding text made ``--resume`` crash
    (``TypeError`` in the prompt's date), and a ``version`` holding text made it stop with
    "was changed by another process". Each is now a load warning and a safe value: the
    prompt's date comes from ``updated_at``, the next save writes a sound version."""
    with ScriptedOpenAIServer(lambda body: "answer from the server") as server:
        configure_project(project, server)
        ids = []
        for text in ("hi a", "hi b"):
            first = _veil(tmp_path, project, "-p", text, "--json")
            assert first.returncode == 0, first.stderr
            ids.append(json.loads(first.stdout)["sessionId"])
        a, b = ids
        db = project / ".veil" / "context.db"
        # 2001-09-09 (1e9 s) as updated_at: the date the prompt must show for a
        damage(
            db,
            f"UPDATE sessions SET created_at = 'yesterday', updated_at = 1000000000 "
            f"WHERE id = '{a}'",
            f"UPDATE sessions SET version = 'abc' WHERE id = '{b}'",
        )
        resumed = _veil(tmp_path, project, "--resume", a, "-p", "next", "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert "Traceback" not in resumed.stderr
        assert (
            f"veil: warning: session {a}: created_at: 'yesterday', expected a number (Unix "
            "seconds); read as the other time column" in resumed.stderr
        )
        system = server.requests[-1].body["messages"][0]["content"]
        assert "Today is 2001-09-09." in system

        for attempt in range(2):
            again = _veil(tmp_path, project, "--resume", b, "-p", f"next {attempt}", "--json")
            assert again.returncode == 0, again.stderr
            assert "changed by another process" not in again.stderr
            assert json.loads(again.stdout)["final"] == "answer from the server"
            warned = f"session {b}: version: 'abc', expected a whole number >= 0" in again.stderr
            assert warned == (attempt == 0)  # the first save wrote a sound version
    store = Store(db, write_behind=False)
    try:
        assert store.version(b) > 0
        sent = [m["content"] for _, m in store.load_session(b).messages if m["role"] == "user"]
        assert sent == ["hi b", "next 0", "next 1"]
    finally:
        store.close()


def test_a_damaged_closed_at_loads_as_closed_now(tmp_path, project):
    """``closed_at`` holding text (README, "Damaged rows": "closed_at as closed now"): the
    session opened by id loads with a warning and is closed, so a turn is refused without
    anything stored or sent; an open session beside it is untouched (issue 30: no test
    damaged this column)."""
    with ScriptedOpenAIServer(lambda body: "answer from the server") as server:
        configure_project(project, server)
        ids = []
        for text in ("hi a", "hi b"):
            first = _veil(tmp_path, project, "-p", text, "--json")
            assert first.returncode == 0, first.stderr
            ids.append(json.loads(first.stdout)["sessionId"])
        damaged_id, sound_id = ids
        db = project / ".veil" / "context.db"
        damage(db, f"UPDATE sessions SET closed_at = 'soon' WHERE id = '{damaged_id}'")
        asked = len(server.requests)
        resumed = _veil(tmp_path, project, "--resume", damaged_id, "-p", "next", "--json")
        assert "Traceback" not in resumed.stderr
        assert (
            f"veil: warning: session {damaged_id}: closed_at: 'soon', expected a number or null; "
            "read as closed now" in resumed.stderr
        )
        assert resumed.returncode == 1
        assert json.loads(resumed.stdout)["error"]["code"] == "SESSION_CLOSED"
        assert len(server.requests) == asked  # the model was not asked
        again = _veil(tmp_path, project, "--resume", sound_id, "-p", "next", "--json")
        assert again.returncode == 0, again.stderr
    store = Store(db, write_behind=False)
    try:
        loaded = store.load_session(damaged_id)
        assert isinstance(loaded.row["closed_at"], float)
        sent = [m["content"] for _, m in loaded.messages if m["role"] == "user"]
        assert sent == ["hi a"]  # nothing stored by the refused turn
    finally:
        store.close()
