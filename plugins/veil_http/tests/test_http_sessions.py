"""Session routes: create / list / get / close / delete, and a turn through POST /messages."""

from __future__ import annotations

import pytest
from veil_http.testing import assert_error

from veil.hookspecs import hookimpl


def test_create_session_snapshots_agent_config_and_answers_201(make_client, agent_writer):
    agent_writer("reviewer", {"model": "gpt-4o-mini", "defaultCompaction": {"compactionCount": 30}})
    client, veil = make_client()
    r = client.post("/sessions", json={"agent": "reviewer"})
    assert r.status_code == 201
    body = r.json()
    assert r.headers["location"] == f"/sessions/{body['id']}"
    assert body["id"].startswith("sess_")
    assert body["agent"] == "reviewer"
    assert body["model"] == "gpt-4o-mini"  # agent.json's model, snapshotted
    assert body["snapshot"]["defaultCompaction"]["compactionCount"] == 30
    assert body["closed"] is False and body["messageCount"] == 0
    # the stored row says the same
    row = veil.store.get_session(body["id"])
    assert row["agent"] == "reviewer" and row["model"] == "gpt-4o-mini"


def test_create_session_without_body_uses_default_agent_and_model_override(make_client):
    client, _ = make_client()
    r = client.post("/sessions")
    assert r.status_code == 201
    assert r.json()["agent"] == "default" and r.json()["model"] is None
    r = client.post("/sessions", json={"model": "ollama/qwen2.5-coder"})
    assert r.json()["model"] == "ollama/qwen2.5-coder"


def test_create_session_refuses_agent_names_that_leave_the_folder(make_client):
    client, _ = make_client()
    for name in ("../etc", "a/b", "", ".hidden"):
        err = assert_error(client.post("/sessions", json={"agent": name}), 422, "VALIDATION_ERROR")
        assert "body.agent" in err["message"]


def test_create_session_for_an_agent_the_project_does_not_have_is_404(make_client):
    client, _ = make_client()
    err = assert_error(client.post("/sessions", json={"agent": "nosuch"}), 404, "AGENT_NOT_FOUND")
    assert "agent 'nosuch' not found" in err["message"]
    listed = client.get("/sessions").json()
    assert "nosuch" not in str(listed)  # nothing was stored for it


def test_list_get_close_delete(make_client):
    client, veil = make_client()
    ids = [client.post("/sessions").json()["id"] for _ in range(3)]
    listed = client.get("/sessions").json()["sessions"]
    assert [s["id"] for s in listed] == ids[::-1]  # most recently updated first
    assert client.get("/sessions", params={"limit": 2}).json()["sessions"][0]["id"] == ids[2]
    assert len(client.get("/sessions", params={"limit": 2}).json()["sessions"]) == 2

    got = client.get(f"/sessions/{ids[0]}").json()
    assert got["id"] == ids[0] and got["closed"] is False

    closed = client.post(f"/sessions/{ids[0]}/close")
    assert closed.status_code == 200 and closed.json()["closed"] is True
    assert veil.store.get_session(ids[0])["closed_at"] is not None
    assert client.post(f"/sessions/{ids[0]}/close").json()["closed"] is True  # idempotent
    summary = {s["id"]: s for s in client.get("/sessions").json()["sessions"]}
    assert summary[ids[0]]["closed"] is True and summary[ids[1]]["closed"] is False

    r = client.delete(f"/sessions/{ids[1]}")
    assert r.status_code == 204 and r.content == b""
    assert_error(client.get(f"/sessions/{ids[1]}"), 404, "SESSION_NOT_FOUND")
    assert_error(client.delete(f"/sessions/{ids[1]}"), 404, "SESSION_NOT_FOUND")
    assert {s["id"] for s in client.get("/sessions").json()["sessions"]} == {ids[0], ids[2]}


@pytest.mark.parametrize("sid", ["sess_doesnotexist", "s" * 300])
def test_unknown_session_is_404_on_every_session_route(make_client, project, sid):
    """An id too long for a file name (300 characters) was a 500 (``OSError: File name too
    long``) on the routes that take the session's lock, and every unknown id left
    ``.veil/locks/<id>.lock`` behind: the store is now asked first."""
    client, veil = make_client()
    known = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{known}/messages", json={"content": "hi"})
    for method, path, body in [
        ("GET", f"/sessions/{sid}", None),
        ("POST", f"/sessions/{sid}/close", None),
        ("DELETE", f"/sessions/{sid}", None),
        ("POST", f"/sessions/{sid}/messages", {"content": "hi"}),
        ("POST", f"/sessions/{sid}/messages/stream", {"content": "hi"}),
        ("POST", f"/sessions/{sid}/compact", None),
        ("GET", f"/sessions/{sid}/context", None),
        ("POST", f"/sessions/{sid}/recall", {"query": "x"}),
        ("POST", f"/sessions/{sid}/items/item_1/pin", None),
    ]:
        err = assert_error(client.request(method, path, json=body), 404, "SESSION_NOT_FOUND")
        assert sid in err["message"]
    locks = project / ".veil" / "locks"
    if veil.store.engine == "postgresql":
        # the database's advisory locks: no file anywhere, and nothing left held (another
        # holder takes both ids at once)
        from veil.core.session_locks import SessionLocks

        assert not locks.exists()
        other = SessionLocks.in_database(veil.store)
        try:
            for held in (known, sid):
                with other.hold(held):
                    pass
        finally:
            other.close()
    else:
        assert [p.name for p in locks.iterdir()] == [f"{known}.lock"]  # the stored one only


def test_post_message_runs_the_turn_and_returns_the_result(make_client, make_veil):
    veil = make_veil(
        replies=[
            {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]},
            "There is one file.",
        ]
    )
    (veil.config.project_dir / "a.txt").write_text("x")
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    r = client.post(f"/sessions/{sid}/messages", json={"content": "what files are here?"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done"
    assert body["final"] == "There is one file."
    assert body["reason"] is None
    assert body["iterations"] == 2  # one model call for the tool, one for the answer
    assert body["usage"]["prompt_tokens"] > 0 and body["usage"]["completion_tokens"] > 0
    assert body["usageEstimated"] is False  # the model reported its usage
    # user, assistant(tool call), tool result, assistant answer
    assert body["session"]["messageCount"] == 4
    assert body["session"]["title"] == "what files are here?"
    stored = [m for _, m in veil.store.messages(sid)]
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert "a.txt" in stored[2]["content"]

    # the next message continues the same history
    r = client.post(f"/sessions/{sid}/messages", json={"content": "thanks"})
    assert r.json()["final"] == "echo: thanks"
    assert r.json()["session"]["messageCount"] == 6


class _HaltAfterFirstBatch:
    """A stand-in for the convergence plugin: halts the run after the first tool batch."""

    @hookimpl
    def after_iteration(self, session, iteration):
        session.request_halt("no progress after 15 attempts")


def test_convergence_halt_comes_back_as_status_halted_with_reason(make_client, make_veil):
    veil = make_veil(
        replies=[{"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}],
        plugins=[("fake_convergence", _HaltAfterFirstBatch())],
    )
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    r = client.post(f"/sessions/{sid}/messages", json={"content": "fix the test"})
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "halted"
    assert body["reason"] == "no progress after 15 attempts"
    assert body["final"] == ""
    assert body["iterations"] == 1
    assert veil.model.remaining == 0  # the second model call never happened


def test_max_iterations_status(make_client, make_veil):
    veil = make_veil(
        replies=[{"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}] * 2,
        settings={"loop": {"maxIterations": 2}},
    )
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    body = client.post(f"/sessions/{sid}/messages", json={"content": "loop"}).json()
    assert body["status"] == "max_iterations"
    assert "2" in body["reason"]
    assert body["iterations"] == 2


def test_message_to_closed_session_is_400_session_closed(make_client):
    client, veil = make_client()
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/close")
    assert_error(
        client.post(f"/sessions/{sid}/messages", json={"content": "hi"}), 400, "SESSION_CLOSED"
    )
    assert veil.store.messages(sid) == []


def test_the_json_result_carries_what_veil_reported_during_the_turn(make_client, make_veil):
    """A JSON client is told what the stream's warning / info events say (found by an outside
    fault hunt: a pasted log went behind a pointer and the JSON result said nothing)."""
    client, veil = make_client(make_veil())
    sid = client.post("/sessions").json()["id"]
    pasted = "".join(
        f"2026-12-01 12:00:{i % 60:02d} worker {i} failed: timeout\n" for i in range(4000)
    )
    r = client.post(f"/sessions/{sid}/messages", json={"content": pasted})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done"
    shown = [w for w in body["warnings"] if "message #0" in w]
    assert len(shown) == 1, body["warnings"]
    assert "tokens" in shown[0]
    sent = veil.model.calls[-1]
    assert any("veil_hydrate" in str(m.get("content")) for m in sent if m["role"] == "user")

    # each request loads the session afresh, so a pointer still in place is reported again
    again = client.post(f"/sessions/{sid}/messages", json={"content": "thanks"}).json()
    assert again["warnings"] and all("message #0" in w for w in again["warnings"])
    other = client.post("/sessions").json()["id"]
    quiet = client.post(f"/sessions/{other}/messages", json={"content": "hi"}).json()
    assert quiet["warnings"] == []  # nothing to report: nothing reported
