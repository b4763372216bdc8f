"""A bare core does nothing by itself (issue 33, DESIGN.md: "with every plugin blocked it sends a
neutral system message and the history"). Every default plugin and every installed entry point
is blocked; a real session runs one turn against the scripted OpenAI-compatible server, over a
history that holds an orphan tool result, and the request the provider receives is checked:
the base system message alone, the history with its pairing repaired, nothing elided, tagged,
masked or named after a tool.
"""

from __future__ import annotations

import datetime as dt
import re
from importlib.metadata import entry_points

import pytest

from veil.core.prompt.assemble import NEUTRAL_PROMPT
from veil.default_plugins import DEFAULT_PLUGIN_NAMES, SHIPPED_PLUGINS

# a tool result whose lines repeat (what repeated-line elision would shorten) and one whose
# call is missing (what the pairing repair drops)
REPEATED = "".join(f"FAILED tests/test_x.py::test_{n} - AssertionError\n" for n in range(40))
CALL = {
    "id": "call_read_1",
    "type": "function",
    "function": {"name": "read", "arguments": '{"path": "main.py"}'},
}
HISTORY = [
    {"role": "user", "content": "Why do the tests fail in main.py?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_read_1", "content": REPEATED},
    {"role": "tool", "tool_call_id": "call_lost_9", "content": "output of a call nobody made"},
    {"role": "assistant", "content": "Forty tests fail on one assertion."},
]


def _every_plugin() -> list[str]:
    """The names of every default plugin, every plugin veil ships and every installed entry
    point: all of them blocked leaves the core alone."""
    names = set(DEFAULT_PLUGIN_NAMES) | {name for name, _ in SHIPPED_PLUGINS}
    names |= {ep.name for ep in entry_points(group="veil")}
    return sorted(names)


@pytest.fixture
def bare_turn(make_veil, scripted_server, veil_project):
    """One turn of a bare core over :data:`HISTORY`: ``(veil, session, request body)``."""
    veil = make_veil(
        ["The assertion compares the wrong field."],
        server=scripted_server,
        disable=_every_plugin(),
        use_entry_points=True,
    )
    loaded = {veil.pm.get_name(p) for p in veil.pm.get_plugins()}
    assert not loaded & set(_every_plugin()), loaded  # the core alone
    session = veil.new_session()
    for message in HISTORY:
        session.append(message)
    result = veil.run_turn(session, "Which field?")
    assert result.final == "The assertion compares the wrong field."
    (request,) = [r for r in scripted_server.requests if r.api == "chat"]
    return veil, session, request.body


def test_the_provider_receives_the_base_system_message_and_the_history(bare_turn, veil_project):
    veil, session, body = bare_turn
    date = dt.datetime.fromtimestamp(session.created_at, dt.timezone.utc).date().isoformat()
    system = NEUTRAL_PROMPT.replace("{cwd}", str(veil_project)).replace("{date}", date)
    sent = body["messages"]
    assert sent[0] == {"role": "system", "content": system}  # no section, no note added
    # the history as stored, the orphan result left out, nothing else: no context note, no
    # stub, no summary; the repeated lines are all there (nothing elided or masked)
    assert sent[1:] == [
        {"role": "user", "content": "Why do the tests fail in main.py?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_read_1", "content": REPEATED},
        {"role": "assistant", "content": "Forty tests fail on one assertion."},
        {"role": "user", "content": "Which field?"},
    ]
    assert "tools" not in body or not body["tools"]  # no plugin registered a tool


def test_nothing_is_captured_tagged_or_scored(bare_turn):
    veil, session, _ = bare_turn
    assert len(session.live_items) == 0
    assert session.task_tags == frozenset()
    assert veil.store.items(session.id, ("live", "warm", "cold")) == []
    assert veil.score_items(session) is None  # no scorer


def test_the_system_message_names_no_tool(bare_turn):
    # veil's persona ("Use the tools to read, search, edit and run code") belongs to the coding
    # tools' plugin: with it blocked, the system message neither mentions tools nor names one
    # of the coding tools
    _, _, body = bare_turn
    system = body["messages"][0]["content"]
    assert "tool" not in system.lower()
    for name in ("read", "write", "edit", "bash", "grep", "ls"):
        assert not re.search(rf"\b{name}\b", system), name
