"""The pointer texts name the tool that declares ``loads_pointers`` (issue 33: declared data, not
a name the core knows): a third-party tool that declares it, under a name of its own, is the one
an oversized request's pointer and the user's warning name; with none declared, they name no
tool. Through the provider boundary: veil's litellm client against the scripted
OpenAI-compatible server, whose recorded requests are what the model saw."""

from __future__ import annotations

from typing import Any

import pytest

import veil
from veil.testing.scripted_server import ScriptedOpenAIServer

TASK = "Fix the failing job. Here is the log:\n" + "\n".join(
    f"2026-12-01 12:{i // 60 % 60:02d}:{i % 60:02d} ERROR worker-{i} failed: connection reset "
    f"by peer id={i * 7919}"
    for i in range(400)
)
"""A pasted log far over half of a 6,000-token window: it is sent as a head and a tail around
a pointer (the core's share for one request, ``OVERSIZED_SHARE``)."""
WINDOW = 6000


class Loader:
    """A third-party plugin whose tool (``fetch_back``) loads a pointer's content back."""

    def __init__(self, loads_pointers: Any = True) -> None:
        self.loads_pointers = loads_pointers

    @veil.hookimpl
    def register_tools(self) -> list[veil.Tool]:
        schema = {"type": "object", "properties": {"pointer": {"type": "string"}}}
        return [
            veil.Tool(
                "fetch_back",
                "Load what a pointer stands for.",
                schema,
                lambda ctx, args: "the whole content",
                effect="read",
                loads_pointers=self.loads_pointers,
            )
        ]


class Warnings:
    """Records the warnings the user's front end is shown."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    @veil.hookimpl
    def render(self, event: Any) -> None:
        if event.kind == "warning":
            self.texts.append(event.data.get("text", ""))


def _sent_request(make_veil, loader: Loader | None, disable: tuple[str, ...]) -> tuple[str, str]:
    """The user message the model was sent for :data:`TASK`, and the warnings' text."""
    warnings = Warnings()
    plugins: list[tuple[str, Any]] = [("warnings", warnings)]
    if loader is not None:
        plugins.append(("third_party", loader))
    with ScriptedOpenAIServer(["done"]) as server:
        v = make_veil(server=server, context_window=WINDOW, plugins=plugins, disable=disable)
        result = v.run_turn(v.new_session(), TASK)
        bodies = [r.body for r in server.requests]
    assert result.status == "done"
    [body] = bodies
    [user] = [m for m in body["messages"] if m["role"] == "user" and "ERROR" in m["content"]]
    assert len(user["content"]) < len(TASK) / 2  # the setup cuts the request
    return user["content"], "\n".join(warnings.texts)


def test_a_third_party_tool_that_loads_pointers_is_the_one_the_pointer_names(make_veil):
    sent, warnings = _sent_request(make_veil, Loader(), disable=("veil.memory_tools",))
    note = 'window); fetch_back("#0") returns the whole message]'
    assert note in sent
    assert "veil_hydrate" not in sent
    assert '(fetch_back("#0") returns it whole)' in warnings
    assert "veil_hydrate" not in warnings


def test_the_default_memory_tools_declare_it(make_veil):
    sent, warnings = _sent_request(make_veil, None, disable=())
    assert 'window); veil_hydrate("#0") returns the whole message]' in sent
    assert '(veil_hydrate("#0") returns it whole)' in warnings


def test_with_no_tool_that_loads_pointers_none_is_named(make_veil):
    sent, warnings = _sent_request(make_veil, None, disable=("veil.memory_tools",))
    assert "(too large for the context window)]" in sent and '("#0")' not in sent
    assert "(no tool that loads it back is registered, so the model cannot load the rest)" in (
        warnings
    )


def test_two_tools_that_load_pointers_are_refused_naming_both(make_veil):
    with pytest.raises(veil.ConfigError) as caught:
        make_veil(plugins=[("third_party", Loader())])
    assert str(caught.value) == (
        "tools 'fetch_back' (plugin 'third_party') and 'veil_hydrate' (plugin "
        "'veil.memory_tools') both declare loads_pointers; pointers name one tool: disable one of "
        "the plugins"
    )


def test_a_declaration_that_is_not_a_bool_is_refused_naming_the_plugin(make_veil):
    with pytest.raises(veil.PluginResultInvalid) as caught:
        make_veil(plugins=[("third_party", Loader(loads_pointers="yes"))])
    assert caught.value.message == (
        "plugin third_party: hook register_tools returned a Tool 'fetch_back' whose "
        "loads_pointers is 'yes', expected loads_pointers True or False"
    )
