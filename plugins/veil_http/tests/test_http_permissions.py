"""Permission rules on the HTTP path (issue 21): rules only, never a prompt; a refused call is
answered to the model as a denied tool result, recorded like any other."""

from __future__ import annotations

import json

import pytest

from veil.hookspecs import hookimpl


def bash(command: str, call_id: str = "c1") -> dict:
    return {"tool_calls": [{"id": call_id, "name": "bash", "arguments": {"command": command}}]}


class CannotAsk:
    """A front end loaded in the server's process with nobody at its terminal: its hook answers
    None (as the REPL's does while no REPL runs), so the rules decide."""

    def __init__(self):
        self.requests = []

    @hookimpl
    def ask_permission(self, request):
        self.requests.append(request.describe())
        return None


@pytest.fixture
def ask_by_default(default_permissions):
    """veil's default mode (ask) instead of the tests' VEIL_PERMISSIONS__MODE=allow."""


def test_bash_is_denied_by_default_and_the_model_sees_why(make_client, make_veil, ask_by_default):
    veil = make_veil(replies=[bash("touch made.txt"), "I was not allowed."])
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    r = client.post(f"/sessions/{sid}/messages", json={"content": "make a file"})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "done" and r.json()["final"] == "I was not allowed."
    assert not (veil.config.project_dir / "made.txt").exists()
    stored = [m for _, m in veil.store.messages(sid)]
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["tool_call_id"] == "c1"
    assert stored[2]["content"].startswith("Permission denied: this bash call was not run.")
    assert "nobody could be asked" in stored[2]["content"]


def test_stream_marks_the_denied_result(make_client, make_veil, ask_by_default):
    veil = make_veil(replies=[bash("touch made.txt"), "no"])
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    with client.stream("POST", f"/sessions/{sid}/messages/stream", json={"content": "go"}) as r:
        text = r.read().decode("utf-8")
    results = [
        json.loads(block.split("data: ", 1)[1])
        for block in text.split("\n\n")
        if block.startswith("event: tool_result")
    ]
    assert len(results) == 1
    assert results[0]["denied"] is True and results[0]["isError"] is True
    assert results[0]["toolCallId"] == "c1"


def test_an_allow_rule_of_the_user_lets_the_call_run(
    make_client, make_veil, ask_by_default, monkeypatch
):
    monkeypatch.setenv("VEIL_PERMISSIONS__ALLOW", '["bash(touch*)"]')
    veil = make_veil(replies=[bash("touch made.txt"), "Made."])
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    r = client.post(f"/sessions/{sid}/messages", json={"content": "make a file"})
    assert r.json()["final"] == "Made."
    assert (veil.config.project_dir / "made.txt").exists()


def test_a_project_deny_rule_refuses_even_in_mode_allow(make_client, make_veil):
    """The tests run with VEIL_PERMISSIONS__MODE=allow; the project's deny rule still wins."""
    veil = make_veil(
        replies=[bash("touch made.txt"), "Refused."],
        settings={"permissions": {"deny": ["bash(touch*)"]}},
    )
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"content": "make a file"})
    assert not (veil.config.project_dir / "made.txt").exists()
    content = [m for _, m in veil.store.messages(sid)][2]["content"]
    assert "matches the deny rule 'bash(touch*)' (permissions.deny)" in content


def test_a_front_end_that_cannot_ask_leaves_the_call_denied(make_client, make_veil, ask_by_default):
    front = CannotAsk()
    veil = make_veil(replies=[bash("touch made.txt"), "no"], plugins=[("front", front)])
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"content": "make a file"})
    assert front.requests == ["bash(touch made.txt)"]
    assert not (veil.config.project_dir / "made.txt").exists()
