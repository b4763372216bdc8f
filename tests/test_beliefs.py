"""Belief store: event log as the truth, derived view, conflicts with provenance, rules."""

from __future__ import annotations

import pytest

from veil.core.beliefs import BeliefStore, facts_in_tool_output, parse_claim
from veil.core.errors import BadRequest
from veil.core.store import Store


@pytest.mark.parametrize(
    ("statement", "claim"),
    [
        ("The server listens on port 5051", ("server", "listens on port", "5051")),
        ("the server is running on http://127.0.0.1:8080", ("server", "listens on port", "8080")),
        ("Python version is 3.11.7", ("python", "version is", "3.11.7")),
        ("the default branch is main.", ("default branch", "is", "main")),
        ("timeout defaults to 30 seconds", ("timeout", "defaults to", "30 seconds")),
        ("DATABASE_URL = sqlite:///x.db", ("database_url", "is", "sqlite:///x.db")),
    ],
)
def test_claims_are_parsed_by_rule(statement, claim):
    c = parse_claim(statement)
    assert (c.subject, c.predicate, c.value) == claim


def test_statements_without_a_single_valued_predicate_do_not_parse():
    assert parse_claim("we talked about the parser") is None


def test_contradicting_ports_make_a_conflict_with_provenance(tmp_path):
    beliefs = BeliefStore(Store(tmp_path / "c.db"))
    a = beliefs.assert_fact(
        None, "the server listens on port 5051", tool_call_id="call_1", ts=100.0
    )
    assert a["status"] == "asserted" and a["conflict"] is None
    b = beliefs.assert_fact(
        None, "The server listens on port 8080", tool_call_id="call_9", ts=200.0
    )
    assert b["conflict"] is not None
    [conflict] = beliefs.open_conflicts()
    assert [m["statement"] for m in conflict["beliefs"]] == [
        "the server listens on port 5051",
        "The server listens on port 8080",
    ]
    assert [m["tool_call_id"] for m in conflict["beliefs"]] == ["call_1", "call_9"]
    # the same fact again reinforces instead of adding
    again = beliefs.assert_fact(None, "the server listens on port 8080", ts=300.0)
    assert again == {"belief": b["belief"], "status": "reinforced", "conflict": conflict["id"]}

    message = beliefs.resolve(None, conflict["id"], b["belief"])
    assert a["belief"] in message
    assert beliefs.open_conflicts() == []
    active = beliefs.beliefs()
    assert [x["id"] for x in active] == [b["belief"]]
    # the loser is retracted, not deleted; history stays queryable
    everything = {x["id"]: x["status"] for x in beliefs.beliefs(include_retracted=True)}
    assert everything == {a["belief"]: "retracted", b["belief"]: "active"}
    kinds = [e["kind"] for e in beliefs.history("port")]
    assert kinds == ["belief.assert", "belief.assert", "belief.reinforce", "conflict.resolve"]


def test_view_rebuilt_from_the_log_alone_is_identical(tmp_path):
    beliefs = BeliefStore(Store(tmp_path / "c.db"))
    beliefs.assert_fact(None, "api port is 1", ts=1.0)
    x = beliefs.assert_fact(None, "api port is 2", ts=2.0)
    beliefs.assert_fact(None, "the cache lives in /tmp/cache", ts=3.0)
    beliefs.assert_fact(None, "api port is 2", ts=4.0)
    beliefs.resolve(None, x["conflict"], x["belief"])
    beliefs.assert_fact(None, "api port is 3", ts=5.0)  # a new conflict after resolution
    before = (
        beliefs.beliefs(include_retracted=True),
        beliefs.open_conflicts(),
        [dict(r) for r in beliefs.store.conn.execute("SELECT * FROM belief_conflicts ORDER BY id")],
    )
    beliefs.store.conn.execute("DROP TABLE beliefs")
    beliefs.rebuild()
    after = (
        beliefs.beliefs(include_retracted=True),
        beliefs.open_conflicts(),
        [dict(r) for r in beliefs.store.conn.execute("SELECT * FROM belief_conflicts ORDER BY id")],
    )
    assert after == before
    assert len(before[1]) == 1


def test_resolve_refuses_unknown_conflicts_and_outsiders(tmp_path):
    beliefs = BeliefStore(Store(tmp_path / "c.db"))
    beliefs.assert_fact(None, "x is 1")
    y = beliefs.assert_fact(None, "x is 2")
    with pytest.raises(BadRequest, match="conflict_id"):
        beliefs.resolve(None, "conflict_nope", y["belief"])
    with pytest.raises(BadRequest, match="keep"):
        beliefs.resolve(None, y["conflict"], "belief_other")
    with pytest.raises(BadRequest):
        beliefs.assert_fact(None, "   ")


def test_facts_recognised_in_tool_output():
    assert facts_in_tool_output(
        "uvicorn app:app", "INFO: Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C)"
    ) == ["the server listens on port 8000"]
    assert facts_in_tool_output("python --version", "Python 3.11.7\n") == [
        "python version is 3.11.7"
    ]
    assert facts_in_tool_output("git status", "On branch main\nnothing to commit") == [
        "the git branch is main"
    ]
    assert facts_in_tool_output("ls", "Python 3.11.7") == []


def test_remember_fact_tool_and_conflict_tools_round_trip(make_veil):
    veil = make_veil(
        [
            {
                "tool_calls": [
                    {
                        "name": "veil_remember",
                        "arguments": {"content": "the server listens on port 5051", "kind": "fact"},
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "veil_remember",
                        "arguments": {"content": "the server listens on port 8080", "kind": "fact"},
                    }
                ]
            },
            {"tool_calls": [{"name": "veil_conflicts", "arguments": {}}]},
            "done",
        ]
    )
    session = veil.new_session()
    veil.run_turn(session, "remember things")
    tool_out = [m["content"] for m in session.messages if m["role"] == "tool"]
    assert tool_out[0].startswith("remembered as item_")
    assert (
        "1 open conflict(s)" in tool_out[2]
        and "port 5051" in tool_out[2]
        and "port 8080" in tool_out[2]
    )
    # the model saw the conflict on the following call, in the context note after the
    # conversation (volatile: the system message stays byte-identical, issue 18)
    assert "Conflicting beliefs" in veil.model.calls[2][-1]["content"]
    assert veil.model.calls[2][-1]["role"] == "user"
    assert veil.model.calls[2][0] == veil.model.calls[0][0]
    conflict = veil.beliefs.open_conflicts()[0]
    keep = conflict["beliefs"][1]["id"]
    veil.model.add(
        {
            "tool_calls": [
                {
                    "name": "veil_resolve_conflict",
                    "arguments": {"conflict_id": conflict["id"], "keep": keep},
                }
            ]
        },
        "ok",
    )
    veil.run_turn(session, "settle it")
    assert veil.beliefs.open_conflicts() == []
    assert "Conflicting beliefs" not in veil.model.calls[-1][0]["content"]


def test_conflicts_tool_says_honestly_when_there_are_none(make_veil):
    veil = make_veil([{"tool_calls": [{"name": "veil_conflicts", "arguments": {}}]}, "ok"])
    session = veil.new_session()
    veil.run_turn(session, "any?")
    assert session.messages[2]["content"] == "no open conflicts between beliefs"


def test_beliefs_slash_command_and_route(make_veil):
    from veil.core.types import RouteRequest

    veil = make_veil([])
    session = veil.new_session()
    veil.beliefs.assert_fact(session, "the api port is 1", tool_call_id="c1")
    veil.beliefs.assert_fact(session, "the api port is 2", tool_call_id="c2")
    text = veil.slash_commands()["beliefs"].handler(session, "")
    assert text.splitlines()[0] == "2 belief(s), 1 open conflict(s)"
    assert "tool call c1" in text and "conflict conflict_" in text
    route = next(
        r for impl in veil.pm.hook.register_routes(veil=veil) for r in impl if r.path == "/beliefs"
    )
    body = route.handler(RouteRequest("GET", {}, {}, b"", veil)).body
    assert [b["statement"] for b in body["beliefs"]] == ["the api port is 1", "the api port is 2"]
    assert len(body["conflicts"]) == 1
