"""The REPL shows its work (issue 21): a spinner with the elapsed time until the first token, the
streamed answer, a status line with context use and the provider's cached share, the last
exchanges on resume, /compact once, /context's summary, /model checked against the providers.

Driven through prompt-toolkit's pipe input, against a scripted OpenAI-compatible server on
127.0.0.1 reached through litellm (the real provider path).
"""

from __future__ import annotations

import io
import json
import re
import threading

import pytest
import veil_repl
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console
from veil_repl.repl import Repl, last_exchanges
from veil_repl.status import ContextStatus

from veil.core.app import open_veil
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.testing.scripted_model import ScriptedModel
from veil.testing.scripted_server import Reply, ScriptedOpenAIServer, configure_project

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VEIL_ALLOW_PROJECT_PROVIDERS", "1")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    project = tmp_path / "proj"
    project.mkdir()
    return project


def open_project(project, **kw):
    return open_veil(
        project,
        config=load_config(project),
        use_entry_points=False,
        extra_plugins=(("veil_repl", veil_repl),),
        **kw,
    )


def run_repl(veil, session, keys: str, *, terminal: bool = False, buf=None) -> tuple[str, Repl]:
    buf = buf if buf is not None else io.StringIO()
    console = Console(
        file=buf, force_terminal=terminal, width=100, highlight=False, color_system=None
    )
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        repl = Repl(veil, session, input=pipe, output=DummyOutput(), console=console)
        repl.display.refresh_per_second = 20
        repl.run()
    return buf.getvalue(), repl


def test_spinner_with_elapsed_time_runs_until_the_first_token_then_the_answer_streams(home):
    release = threading.Event()
    buf = io.StringIO()

    def answer_once_a_second_passed() -> None:
        # the provider holds its answer until the spinner has shown 1.x seconds (or 30 s)
        for _ in range(600):
            if re.search(r"thinking… [1-9]\.\ds", buf.getvalue()):
                break
            release.wait(0.05)
        release.set()

    watcher = threading.Thread(target=answer_once_a_second_passed, daemon=True)
    with ScriptedOpenAIServer([Reply("alpha beta gamma delta", wait=release)]) as server:
        configure_project(home, server)
        veil = open_project(home)
        try:
            session = veil.new_session()
            watcher.start()
            raw, _ = run_repl(veil, session, "go\r/exit\r", terminal=True, buf=buf)
        finally:
            release.set()
            veil.close()
    assert server.requests[0].body["stream"] is True  # the REPL path streams through litellm
    out = ANSI.sub("", raw)
    answer = out.index("alpha beta gamma delta")  # the words, streamed in order
    frames = [
        (m.start(), float(m.group(1))) for m in re.finditer(r"thinking… (\d+\.\d)s · gpt", out)
    ]
    assert frames, out[-2000:]
    assert all(pos < answer for pos, _ in frames)  # the spinner only before the first token
    elapsed = [s for _, s in frames]
    assert elapsed == sorted(elapsed) and max(elapsed) >= 1.0  # the clock moved while waiting
    prompt = server.requests[0].prompt_tokens
    assert f"gpt-4o-mini · prompt {session.last_prompt_tokens:,}/" in out and prompt > 0


def test_status_line_shows_the_providers_prompt_tokens_and_cached_share(home):
    # the provider says each prompt is 2,048 tokens, and of the second one 1,024 came from its
    # cache: 50% cached, 50% of a 4,096-token window
    def cached(messages, prompt_tokens):
        return 1024 if len(server.requests) == 2 else 0

    server = ScriptedOpenAIServer(["one", "two"], count=lambda messages: 2048, cached=cached)
    with server:
        configure_project(home, server)
        (home / ".veil" / "settings.json").write_text(
            '{"models": {"main": {"model": "gpt-4o-mini", "contextWindow": 4096}}}'
        )
        veil = open_project(home)
        try:
            session = veil.new_session()
            _, repl = run_repl(veil, session, "first\rsecond\r/exit\r")
            stored = veil.store.last_usage(session.id)
            resumed = Repl(veil, veil.load_session(session.id), output=DummyOutput())
        finally:
            veil.close()
    status = repl.status
    assert (status.prompt_tokens, status.cached_tokens, status.context_window) == (2048, 1024, 4096)
    t = status.tiers
    assert t["live"] > 0
    assert repl.status_text == (
        "gpt-4o-mini · context 2,048/4,096 (50%) · cached 50% · "
        f"items live {t['live']} warm {t['warm']} cold {t['cold']}"
    )
    assert repl.toolbar() == " " + repl.status_text  # prompt-toolkit's bottom toolbar
    # the usage stored with the answer keeps the cached figure: a resumed REPL starts with it
    assert (stored["prompt_tokens"], stored["cached_tokens"]) == (2048, 1024)
    assert resumed.status.line().startswith("gpt-4o-mini · context 2,048/4,096 (50%) · cached 50%")


def test_status_line_figures_by_hand():
    status = ContextStatus(model="gpt-4o", context_window=8192)
    assert status.line() == "gpt-4o · context -/8,192 · cached - · items live 0 warm 0 cold 0"
    status.take_usage({"promptTokens": 2048, "cachedTokens": 1024, "contextWindow": 8192})
    status.tiers = {"live": 12, "warm": 3, "cold": 1}
    assert status.cached_share == 50.0 and status.window_share == 25.0
    assert status.line() == (
        "gpt-4o · context 2,048/8,192 (25%) · cached 50% · items live 12 warm 3 cold 1"
    )
    status.take_usage({"prompt_tokens": 100, "estimated": True})  # stored form, no cache figure
    assert status.line().startswith("gpt-4o · context ~100/8,192 (1%) · cached n/a")
    assert len(status.line()) < 100


def test_resuming_shows_the_last_exchanges(home):
    config = load_config(home)
    model = ScriptedModel(
        [
            "answer one",
            {"tool_calls": [{"name": "ls", "arguments": {}}]},
            "answer two",
            "answer three",
            "answer four",
        ]
    )
    veil = open_project(home, llm=LLM(config, models={"main": model}))
    try:
        session = veil.new_session()
        for text in ("q one", "q two", "q three", "q four"):
            veil.run_turn(session, text, stream=False)
        resumed = veil.load_session(session.id)  # what veil -c / --resume open
        out, _ = run_repl(veil, resumed, "/exit\r")
        fresh, _ = run_repl(veil, veil.new_session(), "/exit\r")
    finally:
        veil.close()
    lines = out.splitlines()
    start = lines.index("── resumed: the last 3 of 4 exchanges ──")
    assert lines[start + 1 : start + 7] == [
        "› q two",
        "  (1 tool call) answer two",
        "› q three",
        "  answer three",
        "› q four",
        "  answer four",
    ]
    assert "q one" not in out and "resumed:" not in fresh


def test_last_exchanges_skips_context_notes():
    from veil.core.prompt.assemble import NOTE_PREFIX

    history = [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": NOTE_PREFIX + " 3 items warm"},
        {"role": "assistant", "content": "hello"},
    ]
    assert last_exchanges(history) == [("hi", "hello", 0)]


def test_compact_prints_once_and_context_then_says_what_changed(home):
    veil_compaction = pytest.importorskip("veil_compaction")
    config = load_config(home)  # defaultCompaction on, 50% of the messages
    long = "word " * 200
    model = ScriptedModel([long, long, long, "summary of the talk", "ok"])
    veil = open_veil(
        home,
        config=config,
        llm=LLM(config, models={"main": model}),
        use_entry_points=False,
        extra_plugins=(("veil_compaction", veil_compaction), ("veil_repl", veil_repl)),
    )
    try:
        session = veil.new_session()
        out, _ = run_repl(veil, session, "a\rb\rc\r/compact\r/context\r/exit\r")
    finally:
        veil.close()
    compacted = [line for line in out.splitlines() if "compacted" in line and "->" in line]
    said = [line for line in compacted if not line.startswith("since the last request")]
    assert len(said) == 1, out  # the command's answer, not the event's line too
    before, after = (
        int(n.replace(",", "")) for n in re.findall(r"([\d,]+) -> ([\d,]+)", said[0])[0]
    )
    count = int(re.search(r"compacted (\d+) message", said[0]).group(1))
    change = next(line for line in out.splitlines() if line.startswith("since the last request"))
    assert change == (
        f"since the last request: compacted {count} messages, conversation {before:,} -> "
        f"{after:,} tokens ({after - before:+,})"
    )
    assert after < before


def test_context_summary_comes_before_the_table(home):
    config = load_config(home)
    model = ScriptedModel(["fine"])
    veil = open_project(home, llm=LLM(config, models={"main": model}))
    try:
        session = veil.new_session()
        out, repl = run_repl(veil, session, "hello\r/context\r/exit\r")
    finally:
        veil.close()
    prompt = repl.status.prompt_tokens
    assert prompt == model_prompt_tokens(model)
    assert f"last prompt: {prompt:,} of 8,192 tokens ({100 * prompt / 8192:.0f}% of the" in out
    assert "cached: the provider does not report its prompt cache" in out
    assert re.search(r"items: live \d+ \([\d,]+ tokens, 0 pinned\), warm 0, cold 0", out)


def model_prompt_tokens(model):
    from veil.core.models.tokens import count_message_tokens

    return count_message_tokens(model.calls[-1], tools=model.tools_seen[-1])


def test_model_switch_is_checked_against_the_providers(home, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with ScriptedOpenAIServer(["ok"]) as server:
        configure_project(home, server)
        # a second provider without a key or endpoint of its own; the scripted one answers first
        (home / ".veil" / "auth.json").write_text(
            json.dumps(
                {
                    "providers": {"scripted": server.provider(), "claude": {"type": "anthropic"}},
                    "routing": {"default": "claude"},
                }
            )
        )
        veil = open_project(home)
        try:
            session = veil.new_session(model="gpt-4o-mini")
            handler = veil.slash_commands()["model"].handler
            refused = handler(session, "claude-sonnet-4-5")
            assert refused == (
                "/model claude-sonnet-4-5: cannot be used: claude: no API key for anthropic "
                "(ANTHROPIC_API_KEY is not set). Still using gpt-4o-mini."
            )
            assert session.model == "gpt-4o-mini"
            assert veil.store.get_session(session.id)["model"] == "gpt-4o-mini"
        finally:
            veil.close()


def test_model_switch_without_providers_names_the_problem(home, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (home / ".veil").mkdir()
    (home / ".veil" / "settings.json").write_text('{"models": {"main": {"model": "gpt-4o"}}}')
    veil = open_project(home)
    try:
        session = veil.new_session()
        handler = veil.slash_commands()["model"].handler
        assert handler(session, "nosuchprovider/model-x") == (
            "/model nosuchprovider/model-x: cannot be used: no provider in auth.json: "
            "'nosuchprovider' is not a provider litellm knows (in 'nosuchprovider/model-x'). "
            "Still using gpt-4o."
        )
        assert "no API key for openai (OPENAI_API_KEY is not set)" in handler(
            session, "gpt-4o-mini"
        )
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used-000000")
        switched = handler(session, "gpt-4o-mini")
        assert switched.startswith("model for this session: gpt-4o-mini (litellm)")
        assert session.model == "gpt-4o-mini"
        assert veil.store.get_session(session.id)["model"] == "gpt-4o-mini"  # kept on resume
    finally:
        veil.close()


def test_context_shows_only_the_answering_scorers_signals(home):
    pytest.importorskip("veil_fsrs")
    import veil_fsrs
    import veil_fsrs.evict_plugin

    from veil.hookspecs import hookimpl

    class Shortest:
        """Another scorer, registered after FSRS, so pluggy calls it first."""

        @hookimpl
        def score(self, session, items, task_tags, now):
            return [1.0 / (1 + i.tokens) for i in items]

    config = load_config(home)
    model = ScriptedModel(["fine"])
    veil = open_veil(
        home,
        config=config,
        llm=LLM(config, models={"main": model}),
        use_entry_points=False,
        extra_plugins=(
            ("veil_fsrs", veil_fsrs),
            ("veil_fsrs_evict", veil_fsrs.evict_plugin),
            ("shortest", Shortest()),
            ("veil_repl", veil_repl),
        ),
    )
    try:
        session = veil.new_session()
        veil.run_turn(session, "hello", stream=False)
        text = veil.slash_commands()["context"].handler(session, "")
        assert veil.score_items(session).scorer == "shortest"
    finally:
        veil.close()
    lines = text.splitlines()
    assert "scored by shortest (it gives no signals)" in lines
    header = next(i for i, line in enumerate(lines) if line.startswith("score "))
    assert lines[header].split() == ["score", "flags", "kind", "tokens", "id"]
    rows = lines[header + 1 :]
    scores = sorted((round(1.0 / (1 + i.tokens), 3) for i in session.live_items), reverse=True)
    assert [float(r.split()[0]) for r in rows] == scores


def test_compact_shows_a_spinner_while_the_summary_is_written(home):
    """Issue 30: /compact calls the model for a while and showed nothing. A spinner with the
    command and the seconds runs until the command answers, then is erased."""
    veil_compaction = pytest.importorskip("veil_compaction")
    release = threading.Event()
    buf = io.StringIO()

    def answer_once_a_second_passed() -> None:
        for _ in range(600):
            if re.search(r"/compact… [1-9]\.\ds", buf.getvalue()):
                break
            release.wait(0.05)
        release.set()

    long = "word " * 200
    replies = [long, long, long, Reply("summary of the talk", wait=release)]
    watcher = threading.Thread(target=answer_once_a_second_passed, daemon=True)
    with ScriptedOpenAIServer(replies) as server:
        configure_project(home, server)
        veil = open_veil(
            home,
            config=load_config(home),
            use_entry_points=False,
            extra_plugins=(("veil_compaction", veil_compaction), ("veil_repl", veil_repl)),
        )
        try:
            session = veil.new_session()
            watcher.start()
            raw, _ = run_repl(veil, session, "a\rb\rc\r/compact\r/exit\r", terminal=True, buf=buf)
        finally:
            release.set()
            veil.close()
    out = ANSI.sub("", raw)
    seconds = [float(s) for s in re.findall(r"/compact… (\d+\.\d)s", out)]
    assert seconds and max(seconds) >= 1.0, out[-2000:]
    assert seconds == sorted(seconds)
    answer = out.index("compacted")  # the command's answer comes after the spinner
    assert all(m.start() < answer for m in re.finditer(r"/compact… ", out))
    assert session.compact_summary is not None
