"""Belief store: event log as the truth, derived view, conflicts with provenance, rules."""

from __future__ import annotations

import pytest

from veil.core.errors import BadRequest
from veil.core.store import Store
from veil.default_plugins.beliefs import belief_store
from veil.default_plugins.beliefs.store import BeliefStore, facts_in_tool_output, parse_claim


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
    conflict = belief_store(veil).open_conflicts()[0]
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
    assert belief_store(veil).open_conflicts() == []
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
    belief_store(veil).assert_fact(session, "the api port is 1", tool_call_id="c1")
    belief_store(veil).assert_fact(session, "the api port is 2", tool_call_id="c2")
    text = veil.slash_commands()["beliefs"].handler(session, "")
    assert text.splitlines()[0] == "2 belief(s), 1 open conflict(s)"
    assert "tool call c1" in text and "conflict conflict_" in text
    route = next(
        r for impl in veil.pm.hook.register_routes(veil=veil) for r in impl if r.path == "/beliefs"
    )
    body = route.handler(RouteRequest("GET", {}, {}, b"", veil)).body
    assert [b["statement"] for b in body["beliefs"]] == ["the api port is 1", "the api port is 2"]
    assert len(body["conflicts"]) == 1


# ---------------------------------------------------------------------------------------------
# the rule: same subject, same aspect, incompatible values; one tool call never conflicts


def _conflict_after(tmp_path, *facts):
    beliefs = BeliefStore(Store(tmp_path / "r.db"))
    results = [beliefs.assert_fact(None, text, tool_call_id=call) for text, call in facts]
    return beliefs, results


@pytest.mark.parametrize(
    ("first", "second", "conflict"),
    [
        ("the server is running", "the server is stopped", True),  # one scale, two sides
        ("the server is running", "the server is slow", False),  # two aspects of one subject
        ("the server is running", "the server is started", False),  # same side of the scale
        ("`data` is empty", "`data` is not empty", True),  # a value and its negation
        ("`data` is not `None`", "`data` is `[1, 2]`", False),  # compatible values
        ("the default branch is main", "the default branch is develop", True),  # names
        ("the issue is in `parse`", "the issue is in `lex`", False),  # a discourse noun
        ("If `x` is empty, we return", "`x` is not empty", False),  # a conditional
        ("What if the port is 8080?", "the port is 9090", False),  # a question
        ("numpy version is 1.26.4", "numpy version is 2.4.4", True),
        ("`timeout` defaults to 30 seconds", "`timeout` defaults to 60 seconds", True),
        ("`timeout` defaults to 30 seconds", "`retries` defaults to 3", False),
        ('The rule is called "L031"', 'The rule is called "L032"', True),  # a quoted name
        ("`parse` is called with `x=1`", "`parse` is called with `x=2`", False),  # two calls
        ("`times` is a parameter", "`times` is a `DatetimeIndex`", False),  # role vs class
        ("`value` is `None`", "`value` is a `nodes.Const`", True),  # None is no Const
    ],
)
def test_conflicts_need_same_subject_same_aspect_and_incompatible_values(
    tmp_path, first, second, conflict
):
    beliefs, _ = _conflict_after(tmp_path, (first, "call_1"), (second, "call_2"))
    assert bool(beliefs.open_conflicts()) is conflict


def test_facts_from_one_tool_call_never_conflict_with_each_other(tmp_path):
    beliefs, results = _conflict_after(
        tmp_path, ("the api port is 8001", "call_1"), ("the api port is 8002", "call_1")
    )
    assert beliefs.open_conflicts() == [] and [r["conflict"] for r in results] == [None, None]
    # a third statement from another call contradicts both: all three are members
    third = beliefs.assert_fact(None, "the api port is 9000", tool_call_id="call_2")
    [conflict] = beliefs.open_conflicts()
    assert third["conflict"] == conflict["id"]
    assert [b["statement"] for b in conflict["beliefs"]] == [
        "the api port is 8001",
        "the api port is 8002",
        "the api port is 9000",
    ]


def test_one_output_listing_two_servers_gives_no_port_fact():
    output = (
        "[api] Uvicorn running on http://127.0.0.1:8001 (Press CTRL+C to quit)\n"
        "[web] Uvicorn running on http://127.0.0.1:8002 (Press CTRL+C to quit)\n"
    )
    assert facts_in_tool_output("honcho start", output) == []
    # Flask prints the same port on two addresses: one fact
    flask = " * Running on http://127.0.0.1:5000\n * Running on http://172.17.0.2:5000\n"
    assert facts_in_tool_output("flask run", flask) == ["the server listens on port 5000"]


def test_a_conflict_lists_only_the_beliefs_that_contradict(tmp_path):
    beliefs, results = _conflict_after(
        tmp_path,
        ("the server is running", "call_1"),
        ("the server is slow", "call_2"),
        ("the server is stopped", "call_3"),
    )
    [conflict] = beliefs.open_conflicts()
    assert [b["statement"] for b in conflict["beliefs"]] == [
        "the server is running",
        "the server is stopped",
    ]
    assert results[1]["conflict"] is None  # "slow" takes no part in it
    with pytest.raises(BadRequest, match="keep"):
        beliefs.resolve(None, conflict["id"], results[1]["belief"])
    beliefs.resolve(None, conflict["id"], results[2]["belief"])
    active = [b["statement"] for b in beliefs.beliefs()]
    assert active == ["the server is slow", "the server is stopped"]


def test_conflicts_an_older_rule_opened_no_longer_show(tmp_path):
    """A store written by the older rule (any two values of "X is ...") keeps its open conflict
    rows; the beliefs in them no longer contradict, so no conflict reaches the prompt."""
    beliefs = BeliefStore(Store(tmp_path / "old.db"))
    a = beliefs.assert_fact(None, "the issue is in `parse`", tool_call_id="c1")
    beliefs.assert_fact(None, "the issue is in `lex`", tool_call_id="c2")
    with beliefs.store.transaction() as conn:  # what the older rule stored
        conn.execute(
            "UPDATE beliefs SET subject='issue', predicate='is', value=substr(statement, 14)"
        )
        conn.execute(
            "INSERT INTO belief_conflicts (id, subject, predicate, status, opened_at)"
            " VALUES ('conflict_old', 'issue', 'is', 'open', 1.0)"
        )
    assert beliefs.open_conflicts() == []
    assert beliefs.assert_fact(None, "the issue is in `parse`")["belief"] == a["belief"]
