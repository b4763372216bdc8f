"""Compaction planning is a hook (issue 33): ``plan_compaction`` decides when a compaction runs
and what it folds; the core carries the plan out.

The turns cross the provider boundary for real: veil's litellm client calls the scripted
OpenAI-compatible server on 127.0.0.1, which records every request; what the model and the
summariser were sent is read from those requests.
"""

from __future__ import annotations

from typing import Any

import pytest
import veil_compaction

from tests.test_compaction_and_the_prompt import (
    Events,
    main_requests,
    summary_requests,
    write_project,
)
from tests.test_compaction_core import _history
from veil import CompactionPlan, Summary
from veil.core.app import open_veil
from veil.core.errors import NotAvailable, PluginResultInvalid
from veil.core.models.llm import LLM
from veil.core.prompt import compaction
from veil.core.prompt.assemble import SUMMARY_PREFIX
from veil.core.settings import load_config
from veil.hookspecs import hookimpl
from veil.testing.scripted_server import ScriptedOpenAIServer

WINDOW = 20_000
FILLER = "alpha beta gamma delta " * 40  # about 160 tokens


class FoldFirstExchange:
    """A planner of its own: once the prompt passes 1,500 tokens, fold the first exchange only
    (veil_compaction would fold all but the newest ``keepRecentTurns`` steps, and only over
    ``compaction.threshold`` x the window)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int | None, int]] = []

    @hookimpl(tryfirst=True)
    def plan_compaction(self, session, messages, kind, prompt_tokens):
        self.asked.append((kind, prompt_tokens, len(messages)))
        first = messages[0].get("content") or "" if messages else ""
        if kind == "prompt" and prompt_tokens > 1500 and first.startswith("request 0 "):
            return CompactionPlan(fold=2)
        return CompactionPlan(fold=0)


class SummariserOnly:
    """A third-party summariser without a planner."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def summarise(self, session, messages, previous, instructions, mode):
        self.calls += 1
        return Summary("short", calls=0)


def reply(body: dict[str, Any]) -> str:
    first = body["messages"][0].get("content") or ""
    return "SUMMARY" if first.startswith("You compact the conversation") else "done"


@pytest.fixture
def opened(tmp_path, monkeypatch):
    """``opened(server, settings, plugins=(), disable=None)`` -> ``(veil, events)``: a project
    whose main model is the scripted server. ``disable`` None: only veil's default plugins and
    ``plugins`` (no entry points); a tuple: the installed plugins too, less those named."""
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VEIL_CONTEXT__RESCUE_EMBEDDINGS", "off")
    made = []

    def factory(server, settings, plugins=(), disable=None):
        project = write_project(tmp_path, server, WINDOW, settings)
        config = load_config(project)
        events = Events()
        veil = open_veil(
            project,
            config=config,
            llm=LLM(config),
            use_entry_points=disable is not None,
            extra_plugins=(*plugins, ("events", events)),
            disable=disable or (),
        )
        made.append(veil)
        return veil, events

    yield factory
    for veil in made:
        veil.close()


def exchanges(session, count: int) -> None:
    for n in range(count):
        session.append({"role": "user", "content": f"request {n} {FILLER}"})
        session.append({"role": "assistant", "content": f"answer {n} {FILLER}"})


def first_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


@pytest.mark.parametrize(
    ("planner", "threshold", "folded", "first_kept"),
    [
        # veil_compaction: the prompt (over 2,000 tokens) passes 0.1 x 20,000; keepRecentTurns 1
        # keeps the newest step (answer 5) with its request: u0 a0 ... u4 a4 folded
        (False, 0.1, 10, "request 5 "),
        # the same history under a 1.0 threshold: veil_compaction folds nothing ...
        (False, 1.0, 0, "request 0 "),
        # ... while a plugin planning otherwise folds the first exchange (u0 a0)
        (True, 1.0, 2, "request 1 "),
    ],
    ids=["veil_compaction", "veil_compaction-under-threshold", "own-planner"],
)
def test_the_planning_plugin_decides_when_and_what_is_folded(
    opened, planner, threshold, folded, first_kept
):
    own = FoldFirstExchange()
    plugins = [("veil_compaction", veil_compaction)]
    if planner:
        plugins.append(("fold_first", own))
    settings = {"compaction": {"threshold": threshold, "keepRecentTurns": 1}}
    with ScriptedOpenAIServer(reply, context_window=WINDOW) as server:
        veil, events = opened(server, settings, plugins)
        session = veil.new_session()
        exchanges(session, 6)
        result = veil.run_turn(session, "what now?")

    assert (result.status, result.final) == ("done", "done")
    [main] = main_requests(server)
    assert session.compact_size == folded
    assert first_user(main).startswith(first_kept)
    assert main["messages"][-1]["content"] == "what now?"
    summaries = summary_requests(server)
    if not folded:
        assert summaries == [] and session.compact_summary is None
        assert not any(m["content"].startswith(SUMMARY_PREFIX) for m in main["messages"])
        return
    [request] = summaries
    transcript = request["messages"][-1]["content"]
    assert all(f"request {n} " in transcript for n in range(folded // 2))
    assert f"request {folded // 2} " not in transcript
    assert main["messages"][1]["content"] == SUMMARY_PREFIX + session.compact_summary
    assert [e.data["newSize"] for e in events.events if e.kind == "compaction"] == [folded]
    if planner:
        kind, tokens, offered = own.asked[0]
        assert (kind, offered) == ("prompt", 13) and tokens > 1500


def test_with_veil_compaction_blocked_nothing_is_compacted_and_compact_is_refused(opened):
    settings = {"compaction": {"threshold": 0.1, "keepRecentTurns": 1}}
    with ScriptedOpenAIServer(reply, context_window=WINDOW) as server:
        veil, events = opened(server, settings, disable=("veil_http", "veil_compaction"))
        assert veil.pm.get_plugin("veil_compaction") is None
        assert veil.pm.get_plugin("veil_repl") is not None
        session = veil.new_session()
        exchanges(session, 6)
        result = veil.run_turn(session, "what now?")
        with pytest.raises(NotAvailable, match=r"no loaded plugin implements compaction"):
            veil.compact(session.id)
        out = run_repl(veil, session, "/compact\r/exit\r")

    assert (result.status, result.final) == ("done", "done")
    assert summary_requests(server) == []
    [main] = main_requests(server)
    assert first_user(main).startswith("request 0 ")  # over 0.1 x the window, sent whole
    assert (session.compact_size, session.compact_summary) == (0, None)
    assert veil.store.get_session(session.id)["compact_size"] == 0
    # the last resort fits the prompt (old messages behind pointers); nothing is compacted
    assert not any("compact" in e.data.get("text", "") for e in events.events)
    assert [e for e in events.events if e.kind == "compaction"] == []
    assert "unknown command /compact" in out and "Traceback" not in out


def run_repl(veil, session, keys: str) -> str:
    """The REPL's output for ``keys`` (lines not wrapped: independent of the terminal)."""
    import io

    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    from rich.console import Console
    from veil_repl.repl import Repl

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=200, highlight=False, soft_wrap=True)
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        Repl(veil, session, input=pipe, output=DummyOutput(), console=console).run()
    return buf.getvalue()


def test_a_summariser_without_a_planner_compacts_nothing(opened):
    summariser = SummariserOnly()
    settings = {"compaction": {"threshold": 0.1, "keepRecentTurns": 1}}
    with ScriptedOpenAIServer(reply, context_window=WINDOW) as server:
        veil, events = opened(server, settings, [("summariser", summariser)])
        session = veil.new_session()
        exchanges(session, 6)
        veil.run_turn(session, "what now?")
        with pytest.raises(NotAvailable) as refused:
            veil.compact(session.id)

    assert refused.value.code == "NOT_AVAILABLE"
    assert refused.value.message == (
        "no loaded plugin answers plan_compaction, which decides what a compaction folds"
    )
    assert summariser.calls == 0 and session.compact_size == 0
    [main] = main_requests(server)
    assert first_user(main).startswith("request 0 ")
    assert not any("compact" in e.data.get("text", "") for e in events.events)


class SplitsABatch:
    """Plans a cut between a tool call and its result."""

    @hookimpl(tryfirst=True)
    def plan_compaction(self, session, messages, kind, prompt_tokens):
        return CompactionPlan(fold=next(i for i, m in enumerate(messages) if m["role"] == "tool"))


class NotAPlan:
    @hookimpl(tryfirst=True)
    def plan_compaction(self, session, messages, kind, prompt_tokens):
        return 3


@pytest.mark.parametrize(
    ("plugin", "got"),
    [
        (SplitsABatch(), "fold=3, which separates a tool call from its results"),
        (NotAPlan(), "int"),
    ],
    ids=["split-batch", "not-a-plan"],
)
def test_a_bad_plan_names_the_plugin_and_nothing_is_written(make_veil, plugin, got):
    veil = make_veil(plugins=[("s", SummariserOnly()), ("bad", plugin)])
    session = veil.new_session()
    _history(session, 1)  # u0 a0
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    session.append({"role": "assistant", "content": None, "tool_calls": [call]})
    session.append({"role": "tool", "tool_call_id": "c1", "content": "x" * 400})
    session.append({"role": "user", "content": "next " * 100})

    with pytest.raises(PluginResultInvalid) as refused:
        veil.compact(session.id)
    assert refused.value.message == (
        f"plugin bad: hook plan_compaction returned {got}, expected a veil.CompactionPlan "
        "whose fold is a boundary in [0, len(messages)], or None"
    )
    # automatic compaction: a warning and one failure counted, the turn goes on
    assert compaction.run_full(session, list(session.messages)) is None
    assert compaction.failure_count(session) == 1
    assert (session.compact_size, session.compact_summary) == (0, None)
    assert veil.store.get_session(session.id)["compact_size"] == 0
