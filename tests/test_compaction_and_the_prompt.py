"""Compaction and the prompt (issue 19, "Compaction and the prompt"; issue 21, /compact TEXT).

Every test crosses the provider boundary for real: veil's litellm client calls a scripted
OpenAI-compatible server on 127.0.0.1 (:class:`ScriptedOpenAIServer`) that records every
request and refuses a prompt over its window with OpenAI's ``context_length_exceeded`` error,
as real providers do. What the model saw is read from the recorded requests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import veil_compaction
from veil_compaction import ledger

from veil.core.app import open_veil
from veil.core.context_ops import hydrate
from veil.core.errors import PromptTooLarge
from veil.core.models.llm import LLM
from veil.core.prompt.assemble import SUMMARY_PREFIX
from veil.core.settings import load_config
from veil.hookspecs import hookimpl
from veil.testing.scripted_server import ScriptedOpenAIServer

KEY = "sk-scripted-compaction-0123456789"
SUMMARY_MARK = "You compact the conversation"  # first words of the summary system prompt
MERGE_MARK = "You merge partial summaries"


def is_summary(body: dict[str, Any]) -> bool:
    """Whether a recorded request is a summariser's (its system prompt is compaction's)."""
    first = body["messages"][0].get("content") or ""
    return first.startswith((SUMMARY_MARK, MERGE_MARK))


def main_requests(server: ScriptedOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if not is_summary(r.body)]


def summary_requests(server: ScriptedOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if is_summary(r.body)]


class Events:
    """Records render events (warnings, compactions) as the user's front end sees them."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    @hookimpl
    def render(self, event: Any) -> None:
        if event.kind != "token":
            self.events.append(event)

    def texts(self, kind: str) -> list[str]:
        return [e.data.get("text", "") for e in self.events if e.kind == kind]


def write_project(
    root: Path,
    server: ScriptedOpenAIServer,
    window: int,
    settings: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
) -> Path:
    """A project whose main model (window ``window``) is the scripted server; returns the
    project folder. ``VEIL_HOME`` must point at ``root / "home"``."""
    home = root / "home"
    home.mkdir(exist_ok=True)
    auth = {"providers": {"local": {"type": "openai", "base_url": server.url, "api_key": KEY}}}
    (home / "auth.json").write_text(json.dumps(auth))
    project = root / "project"
    (project / ".veil").mkdir(parents=True, exist_ok=True)
    data = {"models": {"main": {"model": "test-model", "contextWindow": window}}}
    data.update(settings or {})
    (project / ".veil" / "settings.json").write_text(json.dumps(data))
    if agent is not None:
        folder = project / ".veil" / "agents" / "default"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "agent.json").write_text(json.dumps(agent))
    return project


@pytest.fixture
def opened(tmp_path, monkeypatch):
    """``opened(server, window, settings=None, agent=None, layer=True)`` -> ``(veil, events)``.
    ``layer``: the default plugins (context layer on); False: only this compaction plugin."""
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VEIL_CONTEXT__RESCUE_EMBEDDINGS", "off")
    made = []

    def factory(server, window, settings=None, agent=None, layer=True):
        project = write_project(tmp_path, server, window, settings, agent)
        config = load_config(project)
        events = Events()
        extra = (("events", events),)
        if not layer:
            extra = (("veil_compaction", veil_compaction), *extra)
        veil = open_veil(
            project,
            config=config,
            llm=LLM(config),
            use_entry_points=layer,
            extra_plugins=extra,
            disable=("veil_repl", "veil_http") if layer else (),
        )
        made.append(veil)
        return veil, events

    yield factory
    for veil in made:
        veil.close()


def write_files(project: Path, count: int, lines: int) -> None:
    for n in range(count):
        body = "\n".join(f"value_{n}_{i} = compute({i}, 'f{n}')  # line {i}" for i in range(lines))
        (project / f"f{n}.py").write_text(body)


def pasted_log(lines: int) -> str:
    return "\n".join(
        f"2026-12-01 12:{i // 60 % 60:02d}:{i % 60:02d} ERROR worker-{i} failed: connection "
        f"reset by peer id={i * 7919}"
        for i in range(lines)
    )


def tool_result_of(body: dict[str, Any], call_id: str) -> str | None:
    for message in body["messages"]:
        if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
            return message.get("content")
    return None


# -- 1. the newest step is always sent; a huge pasted request goes behind a pointer ----------


def test_a_huge_pasted_request_goes_behind_a_pointer_and_the_newest_step_is_always_sent(
    opened,
):
    """Before: the pasted log kept the budget overflowing, eviction took the newest step every
    iteration (the model never saw its own last call) or the provider refused the prompt."""
    window, reads = 6000, 8

    main_calls: list[dict[str, Any]] = []

    def script(body):
        if is_summary(body):
            return "SUMMARY of the work"
        done = len(main_calls)
        main_calls.append(body)
        if done == reads or done == reads + 2:
            return "done"
        return {"tool_calls": [{"name": "read", "arguments": {"path": f"f{done % 4}.py"}}]}

    with ScriptedOpenAIServer(script, context_window=window) as server:
        veil, events = opened(server, window)
        write_files(veil.config.project_dir, 4, 20)
        session = veil.new_session()
        request = "Fix the failing job. Here is the log:\n" + pasted_log(400)
        result = veil.run_turn(session, request)
        stored = list(session.messages)
        # the next exchange: the answered request still may not crowd the prompt out
        following = veil.run_turn(session, "Now check f1.py once more.")
        whole = hydrate(session, "#0").content  # the pointer leads back to the whole message

    assert result.status == "done" and result.final == "done"
    assert following.status == "done" and following.final == "done"
    assert not any(r.refused for r in server.requests), [r.prompt_tokens for r in server.requests]
    main = main_requests(server)
    assert len(main) == reads + 3
    later, main = main[reads + 1 :], main[: reads + 1]
    assert "Now check f1.py once more." in [m.get("content") for m in later[-1]["messages"]]
    for body in later:
        sent = [m.get("content") or "" for m in body["messages"]]
        assert all(len(text) < len(request) / 2 for text in sent)
    # the request is sent cut, with its head, its tail and the pointer to the whole message
    for body in main:
        [user] = [m for m in body["messages"] if m["role"] == "user" and "ERROR" in m["content"]]
        assert user["content"].startswith("Fix the failing job. Here is the log:")
        assert 'veil_hydrate("#0")' in user["content"]
        assert user["content"].rstrip().endswith(request.rstrip()[-20:])
        assert len(user["content"]) < len(request) / 2
    assert whole == request
    assert any("message #0" in text and "pointer" in text for text in events.texts("warning"))
    # every request after a tool call holds that newest call and its whole result
    for n, body in enumerate(main[1:], start=1):
        call_ids = [
            tc["id"]
            for m in body["messages"]
            if m["role"] == "assistant"
            for tc in m.get("tool_calls") or []
        ]
        newest = [m for m in stored if m["role"] == "assistant"][n - 1]
        newest_id = newest["tool_calls"][0]["id"]
        assert call_ids[-1] == newest_id
        stored_result = next(m["content"] for m in stored if m.get("tool_call_id") == newest_id)
        assert tool_result_of(body, newest_id) == stored_result
    assert len(summary_requests(server)) <= 2  # no compaction loop


# -- 1b. the full-compaction cut lands where it was chosen ------------------------------------


def test_the_full_compaction_cut_advances_past_the_steps_that_left_the_prompt(opened):
    """Before: the cut was chosen in what is sent (collapsed steps left out) and counted again
    in the stored history, where it landed among the collapsed steps: compact_size barely
    moved and the next compaction summarised the same early turn again."""
    from veil.core.prompt.context import build_prompt

    window = 20_000
    with ScriptedOpenAIServer(lambda body: "SUMMARY", context_window=window) as server:
        settings = {"compaction": {"threshold": 0.1, "keepRecentTurns": 1}}
        veil, _ = opened(server, window, settings=settings, layer=False)
        session = veil.new_session()
        session.append({"role": "user", "content": "go through the files"})
        for n in range(10):
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"path": f"f{n}.py"})},
            }
            session.append({"role": "assistant", "content": None, "tool_calls": [call]})
            body = "\n".join(f"step{n}_line{i} = {i * 31}" for i in range(60))
            session.append({"role": "tool", "tool_call_id": f"c{n}", "content": body})
        for index in range(1, 13):  # steps 0..5 were evicted, call and result: they collapse
            session.stubs[index] = f"[evicted 300 tokens #{index}]"
        build_prompt(session)
        [request] = summary_requests(server)

    # sent: user, steps 6..9; keep 1 step -> the cut is before step 9, stored index 1 + 2 x 9
    # (counted again in the stored history, the cut landed at index 7, inside the collapsed
    # steps: the next compaction would summarise steps 3..5 again)
    assert session.compact_size == 19
    transcript = request["messages"][-1]["content"]
    assert all(f"step{n}_line1 " in transcript for n in (6, 7, 8))
    assert "step9_line1 " not in transcript and "step2_line1 " not in transcript


# -- 2. a summary that does not shrink the prompt is refused -----------------------------------


@pytest.mark.parametrize(
    "answer",
    ["\u200b\u2060\ufeff \u200b", "LONG SUMMARY " + "word " * 20_000],
    ids=["invisible-only", "longer-than-what-it-replaces"],
)
def test_a_summary_that_does_not_shrink_is_refused_and_compaction_stops_after_the_limit(
    opened, answer
):
    window, reads = 40_000, 12
    summaries = []

    main_calls: list[dict[str, Any]] = []

    def script(body):
        if is_summary(body):
            summaries.append(body)
            return answer
        done = len(main_calls)
        main_calls.append(body)
        if done >= reads:
            return "done"
        return {"tool_calls": [{"name": "read", "arguments": {"path": f"f{done % 4}.py"}}]}

    with ScriptedOpenAIServer(script, context_window=window) as server:
        settings = {"compaction": {"threshold": 0.1, "keepRecentTurns": 1}}
        veil, events = opened(server, window, settings=settings, layer=False)
        write_files(veil.config.project_dir, 4, 60)
        session = veil.new_session()
        result = veil.run_turn(session, "read the files")
        row = veil.store.get_session(session.id)

    assert result.status == "done"
    assert (session.compact_size, session.compact_summary) == (0, None)  # history unchanged
    assert (row["compact_size"], row["compact_summary"]) == (0, None)
    limit = veil.config.settings.compaction.max_consecutive_failures
    assert limit == 3
    assert len(summaries) == limit  # each try made one call, then automatic compaction stopped
    warnings = events.texts("warning")
    assert sum("full compaction failed" in w for w in warnings) == limit
    assert any(f"stopped after {limit} consecutive failures" in w for w in warnings)
    assert not events.texts("compaction")


# -- 3. the current request survives compaction; the recorded section on every path ------------


MULTI_STEP_REQUEST = (
    "Please do three things in order: 1. read f0.py and f1.py, 2. rename value_0_1 to "
    "first_value everywhere, 3. run the tests with `pytest -q` and report the count."
)


def test_a_mid_turn_full_compaction_keeps_the_request_verbatim_and_records_the_tool_calls(
    opened,
):
    window, reads = 40_000, 8

    main_calls: list[dict[str, Any]] = []

    def script(body):
        if is_summary(body):
            return "SUMMARY: files were read"
        done = len(main_calls)
        main_calls.append(body)
        if done >= reads:
            return "done"
        return {"tool_calls": [{"name": "read", "arguments": {"path": f"f{done % 4}.py"}}]}

    with ScriptedOpenAIServer(script, context_window=window) as server:
        settings = {"compaction": {"threshold": 0.1, "keepRecentTurns": 1}}
        veil, events = opened(server, window, settings=settings, layer=False)
        write_files(veil.config.project_dir, 4, 60)
        session = veil.new_session()
        veil.run_turn(session, MULTI_STEP_REQUEST)

    assert events.texts("compaction"), "the settings must force a full compaction mid-turn"
    main = main_requests(server)
    after = [
        b for b in main if any(SUMMARY_PREFIX in (m.get("content") or "") for m in b["messages"])
    ]
    assert after
    for body in after:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        assert MULTI_STEP_REQUEST in users  # verbatim, whatever the summary says
        [summary] = [
            m["content"] for m in body["messages"] if SUMMARY_PREFIX in (m.get("content") or "")
        ]
        assert ledger.HEADING in summary and "- Files read: " in summary


def test_auto_threshold_compaction_mid_turn_keeps_the_request_and_records_the_tool_calls(opened):
    window, reads = 40_000, 4

    main_calls: list[dict[str, Any]] = []

    def script(body):
        if is_summary(body):
            return "SUMMARY: read"
        done = len(main_calls)
        main_calls.append(body)
        if done >= reads:
            return "done"
        return {"tool_calls": [{"name": "read", "arguments": {"path": f"f{done % 4}.py"}}]}

    with ScriptedOpenAIServer(script, context_window=window) as server:
        agent = {"defaultCompaction": {"autoThreshold": 10}}
        veil, events = opened(server, window, agent=agent, layer=False)
        write_files(veil.config.project_dir, 4, 120)
        session = veil.new_session()
        veil.run_turn(session, MULTI_STEP_REQUEST)

    compactions = [e for e in events.events if e.kind == "compaction"]
    assert compactions and all(e.data["trigger"] == "auto" for e in compactions)
    after = [
        b
        for b in main_requests(server)
        if any(SUMMARY_PREFIX in (m.get("content") or "") for m in b["messages"])
    ]
    assert after
    for body in after:
        assert MULTI_STEP_REQUEST in [m["content"] for m in body["messages"] if m["role"] == "user"]
        summary = body["messages"][1]["content"]
        assert summary.startswith(SUMMARY_PREFIX) and ledger.HEADING in summary


# -- 4 and 5: manual /compact summarises what the prompt holds; instructions reach the model ----


def _veil_cli(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env.update(
        VEIL_HOME=str(home), VEIL_CONTEXT__RESCUE_EMBEDDINGS="off", VEIL_DISABLE_PLUGINS="veil_repl"
    )
    return subprocess.run(
        [sys.executable, "-m", "veil.cli", "--project", str(project), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=300,
    )


def test_manual_compact_after_a_2mb_result_left_the_prompt_makes_one_summary_call(tmp_path, opened):
    """Before: /compact summarised the raw history, a 2 MB result long evicted included, in
    one request per chunk of the model's window (136 calls in the report). Now it summarises
    what the prompt holds: that result is its stub. Also: ``veil compact --instructions``
    (issue 21) puts the instructions in the summariser's system prompt, and the recorded
    section is in the stored summary."""
    window = 8000
    steps = ["big.log", "f0.py", "f1.py", "f2.py"]

    main_calls: list[dict[str, Any]] = []

    def script(body):
        if is_summary(body):
            return "SUMMARY: a large log was read, then three files"
        done = len(main_calls)
        main_calls.append(body)
        if done >= len(steps):
            return "done"
        return {"tool_calls": [{"name": "read", "arguments": {"path": steps[done]}}]}

    with ScriptedOpenAIServer(script, context_window=window) as server:
        settings = {"loop": {"toolOutputChars": 3_000_000, "readLines": 100_000}}
        veil, _ = opened(server, window, settings=settings)
        project = veil.config.project_dir
        write_files(project, 3, 40)
        (project / "big.log").write_text(pasted_log(24_000))  # about 2 MB
        session = veil.new_session()
        veil.run_turn(session, "read big.log and the files")
        big = next(m for m in session.messages if m["role"] == "tool")
        assert len(big["content"]) > 1_900_000
        veil.close()
        before = len(server.requests)

        out = _veil_cli(
            project, tmp_path / "home", "compact", "--json", "--instructions", "Keep the PORTS."
        )
        assert out.returncode == 0, out.stderr
        assert "Traceback" not in out.stderr
        calls = summary_requests(type("S", (), {"requests": server.requests[before:]})())

    result = json.loads(out.stdout)
    assert result["compactedCount"] > 0 and not result["alreadyUpToDate"]
    assert len(calls) == 1
    assert not any(r.refused for r in server.requests)
    system = calls[0]["messages"][0]["content"]
    assert system.endswith("Additional instructions:\nKeep the PORTS.")
    assert "connection reset by peer" not in calls[0]["messages"][-1]["content"]
    summary = result["session"]["compactSummary"]
    assert summary.startswith("SUMMARY: a large log") and ledger.HEADING in summary
    assert "big.log" in summary


def test_the_http_compact_route_passes_its_instructions_to_the_summariser(opened):
    from starlette.testclient import TestClient
    from veil_http import create_app

    window = 8000
    with ScriptedOpenAIServer(lambda body: "SUMMARY", context_window=window) as server:
        veil, _ = opened(server, window, layer=False)
        session = veil.new_session()
        for n in range(6):
            role = "user" if n % 2 == 0 else "assistant"
            session.append({"role": role, "content": f"message {n}: " + "detail " * 80})
        with TestClient(create_app(veil), base_url="http://127.0.0.1:5051") as client:
            r = client.post(
                f"/sessions/{session.id}/compact", json={"instructions": "Mention port 8443."}
            )
        assert r.status_code == 200, r.text
        [call] = summary_requests(server)

    assert call["messages"][0]["content"].endswith("Additional instructions:\nMention port 8443.")
    assert r.json()["compactedCount"] == 3


# -- 5. the hard budget wins over what eviction may not take (issue 19) ------------------------


def long_message(turn: int, words: int = 300) -> str:
    """A user message of about 800 tokens (``words`` words and numbers): under half the
    budget left at window 6,000 with veil's tool schemas, so it is sent whole while current."""
    return f"Turn {turn}: please look at this. " + " ".join(
        f"item{turn}_{i} value {i * 37}" for i in range(words // 3)
    )


@pytest.mark.parametrize(
    "answer",
    ["\u200b\u2060\ufeff \u200b", "LONG SUMMARY " + "word " * 20_000],
    ids=["invisible-only", "longer-than-what-it-replaces"],
)
def test_answered_requests_go_behind_pointers_when_compaction_is_refused(opened, answer):
    """Before: with every summary refused, the answered requests (intents eviction may not
    take) piled up; veil sent prompts it knew were over the window (6,799 -> 9,950 tokens),
    the provider refused each, and every later turn failed."""
    window, turns = 6000, 8

    def script(body):
        if is_summary(body):
            return answer
        return "noted"

    with ScriptedOpenAIServer(script, context_window=window) as server:
        veil, events = opened(server, window)
        session = veil.new_session()
        sent = [long_message(n) for n in range(turns)]
        results = [veil.run_turn(session, text) for text in sent]
        first = hydrate(session, "#0").content  # an answered request's pointer leads back

    assert session.count_text(sent[0]) > 800
    assert [r.status for r in results] == ["done"] * turns
    assert [r.final for r in results] == ["noted"] * turns
    assert not any(r.refused for r in server.requests), [r.prompt_tokens for r in server.requests]
    main = main_requests(server)
    assert len(main) == turns
    for n, body in enumerate(main):
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        assert any(sent[n] in text for text in users)  # the current request, verbatim
    assert first == sent[0]
    last = [m.get("content") or "" for m in main[-1]["messages"]]
    assert any('veil_hydrate("#0")' in text for text in last)
    # a cut stays as it was made (the prefix stays put): once #0 is behind its pointer, every
    # later request sends the very same text for it
    cuts = [
        next((t for t in (m.get("content") or "" for m in body["messages"]) if "#0" in t), None)
        for body in main
    ]
    first_cut = next(n for n, text in enumerate(cuts) if text is not None)
    assert first_cut > 0 and len(set(cuts[first_cut:])) == 1, cuts
    warnings = events.texts("warning")
    assert sum("answered request" in w for w in warnings) == 1, warnings  # reported once


def test_the_completion_reserve_of_max_tokens_is_kept_free(opened):
    """Before: with ``max_tokens: 1024`` the prompt stayed over its budget (what remained could
    not be evicted, the summaries were refused) and was sent anyway, 5,909 + 1,024 > 6,000:
    the provider refused it."""
    window, reserve, turns = 6000, 1024, 8
    settings = {
        "models": {
            "main": {
                "model": "test-model",
                "contextWindow": window,
                "options": {"max_tokens": reserve},
            }
        }
    }

    def script(body):
        return "LONG SUMMARY " + "word " * 20_000 if is_summary(body) else "noted"

    with ScriptedOpenAIServer(script, context_window=window) as server:
        veil, _ = opened(server, window, settings=settings)
        session = veil.new_session()
        results = [veil.run_turn(session, long_message(n)) for n in range(turns)]

    assert [r.status for r in results] == ["done"] * turns
    main = [r for r in server.requests if not is_summary(r.body)]
    assert all(r.body.get("max_tokens") == reserve for r in main)
    sizes = [r.prompt_tokens for r in server.requests]
    assert all(size <= window - reserve for size in sizes), sizes


def test_a_prompt_that_cannot_fit_is_refused_before_it_is_sent(opened):
    """Before: a prompt veil knew was over the window went to the provider, which refused it
    (a ContextWindowExceededError from the provider). Now nothing is sent and the error names
    the sizes and what to change."""
    # the completion reserve leaves ~60 tokens for the messages: less than the current request
    # cut around its pointer (at least 128 tokens, MIN_SHOWN_TOKENS)
    window, reserve = 6000, 2850
    settings = {
        "models": {
            "main": {
                "model": "test-model",
                "contextWindow": window,
                "options": {"max_tokens": reserve},
            }
        }
    }
    with ScriptedOpenAIServer(lambda body: "noted", context_window=window) as server:
        veil, _ = opened(server, window, settings=settings)
        session = veil.new_session()
        with pytest.raises(PromptTooLarge) as raised:
            veil.run_turn(session, "Why does this fail?\n" + pasted_log(100))

    assert server.requests == []  # nothing was sent
    text = str(raised.value)
    assert f"context window ({window} tokens)" in text
    assert "models.main.options.max_tokens" in text
    assert "current request (1" in text  # its cut size: 128 tokens and the pointer
    assert raised.value.code == "PROMPT_TOO_LARGE" and raised.value.http_status == 413
