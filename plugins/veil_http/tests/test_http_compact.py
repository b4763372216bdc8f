"""``POST /sessions/{id}/compact``: seed 000's response and error codes."""

from __future__ import annotations

from veil_compaction.testing import SeedPlanner
from veil_http.testing import assert_error

from veil.core.types import Summary
from veil.hookspecs import hookimpl


class _CountingSummariser(SeedPlanner):
    """A stand-in for veil_compaction's ``summarise`` (its planner kept): the summary names how
    many messages it folds; records the instructions and the messages it was given."""

    def __init__(self) -> None:
        self.instructions: list[list[str]] = []
        self.folded: list[list[str]] = []

    @hookimpl
    def summarise(self, session, messages, previous, instructions, mode):
        self.instructions.append(list(instructions))
        self.folded.append([m["content"] for m in messages])
        return Summary(f"summary of {len(messages)} messages", calls=0)


def _session_with_messages(client, turns: int) -> str:
    sid = client.post("/sessions").json()["id"]
    for n in range(turns):
        assert (
            client.post(f"/sessions/{sid}/messages", json={"content": f"message {n}"}).status_code
            == 200
        )
    return sid


def test_compact_answers_seed_shape_and_advances(make_client, make_veil):
    compactor = _CountingSummariser()
    client, veil = make_client(make_veil(plugins=[("fake_compaction", compactor)]))
    sid = _session_with_messages(client, 5)  # 10 messages: 5 user, 5 assistant

    r = client.post(f"/sessions/{sid}/compact", json={"instructions": "keep the task list"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"sessionId", "compactedCount", "newSize", "alreadyUpToDate", "session"}
    assert body["sessionId"] == sid
    # seed 000, compactionCount 50: "message n" (9 characters) and "echo: message n" (15),
    # 120 in all; the batch takes messages until 60 are collected: 9+15+9+15+9 = 57, +15 = 72
    assert (body["compactedCount"], body["newSize"], body["alreadyUpToDate"]) == (6, 6, False)
    assert body["session"]["compactSize"] == 6
    assert body["session"]["compactSummary"] == "summary of 6 messages"
    assert compactor.folded == [
        [m for n in range(3) for m in (f"message {n}", f"echo: message {n}")]
    ]
    # the agent's customInstructions (none) then the caller's
    assert compactor.instructions == [["", "keep the task list"]]

    second = client.post(f"/sessions/{sid}/compact").json()  # no body: no instructions
    # 21 summary characters + 48 of the 4 messages left: half is 34.5, reached only by all 4
    assert (second["compactedCount"], second["newSize"]) == (4, 10)
    assert compactor.instructions[-1] == ["", ""]
    assert veil.store.get_session(sid)["compact_size"] == 10


def test_compact_already_up_to_date(make_client, make_veil):
    client, _ = make_client(make_veil(plugins=[("fake_compaction", _CountingSummariser())]))
    sid = client.post("/sessions").json()["id"]
    body = client.post(f"/sessions/{sid}/compact").json()
    assert body["alreadyUpToDate"] is True
    assert (body["compactedCount"], body["newSize"]) == (0, 0)


def test_compact_error_codes(make_client, make_veil, agent_writer):
    agent_writer("nocompact", {"defaultCompaction": {"enabled": False}})
    client, _ = make_client(make_veil(plugins=[("fake_compaction", _CountingSummariser())]))
    sid = client.post("/sessions", json={"agent": "nocompact"}).json()["id"]
    assert_error(client.post(f"/sessions/{sid}/compact"), 400, "COMPACTION_DISABLED")

    sid = _session_with_messages(client, 1)
    client.post(f"/sessions/{sid}/close")
    assert_error(client.post(f"/sessions/{sid}/compact"), 400, "SESSION_CLOSED")

    assert_error(client.post("/sessions/sess_missing/compact"), 404, "SESSION_NOT_FOUND")
    assert_error(
        client.post(f"/sessions/{sid}/compact", json={"instructions": 3}), 422, "VALIDATION_ERROR"
    )


def test_compact_without_compaction_plugin_is_501(make_client):
    client, _ = make_client()
    sid = client.post("/sessions").json()["id"]
    err = assert_error(client.post(f"/sessions/{sid}/compact"), 501, "NOT_AVAILABLE")
    assert "compaction" in err["message"]


class _SummariserOnly:
    """A summariser without a planner (``plan_compaction``): nothing says what to fold."""

    @hookimpl
    def summarise(self, session, messages, previous, instructions, mode):
        raise AssertionError("nothing is folded without a plan")


def test_compact_without_a_planner_is_501_naming_the_hook(make_client, make_veil):
    client, veil = make_client(make_veil(plugins=[("summariser_only", _SummariserOnly())]))
    sid = _session_with_messages(client, 2)
    err = assert_error(client.post(f"/sessions/{sid}/compact"), 501, "NOT_AVAILABLE")
    assert err["message"] == (
        "no loaded plugin answers plan_compaction, which decides what a compaction folds"
    )
    assert client.get(f"/sessions/{sid}").json()["compactSize"] == 0
