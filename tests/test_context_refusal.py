"""A provider's "prompt too long" refusal (issue 29, "Also on the prompt path").

With ``models.main.contextWindow`` set larger than the provider's real window, the provider
refuses a prompt with an HTTP 400. Before, the turn failed, and so did every later one until
``/compact``. Now the session learns the window the refusal implies, fits the prompt into it
(evicting or compacting) and asks once more; later prompts keep to that window.

The refusals come from :class:`ScriptedOpenAIServer` on 127.0.0.1, which refuses a prompt over
its window with a real provider's 400 body (OpenAI's, Anthropic's as a gateway relays it,
llama.cpp server's) and records every request; what the provider received is read there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import veil_compaction

from veil.core.app import open_veil
from veil.core.models.context_refusal import (
    MIN_LEARNED_WINDOW,
    RefusalFigures,
    is_context_refusal,
    learned_window,
    refusal_figures,
)
from veil.core.models.llm import LLM
from veil.core.prompt.assemble import SUMMARY_PREFIX, pairing_problems
from veil.core.session import LEARNED_WINDOW_KEY
from veil.core.settings import load_config
from veil.harness import VeilHarness
from veil.hookspecs import hookimpl
from veil.testing.scripted_server import ScriptedOpenAIServer, refusal_body

CONFIGURED = 50_000  # what models.main.contextWindow says
REAL = 6_000  # what the provider accepts (its count of the messages)
MODEL = "test-model"
SUMMARY_MARK = "You compact the conversation"

# -- reading a refusal -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "prompt"),
    [
        (  # OpenAI (and DeepSeek, vLLM)
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens. Please reduce the length of the messages.",
            8192,
            9000,
        ),
        (  # OpenAI's older wording, vLLM: the messages' share of what was requested
            "This model's maximum context length is 4,096 tokens. However, you requested 5000 "
            "tokens (4000 in the messages, 1000 in the completion).",
            4096,
            4000,
        ),
        ("prompt is too long: 208310 tokens > 200000 maximum", 200_000, 208_310),  # Anthropic
        (  # Anthropic, when the prompt fits but not with max_tokens
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, "
            "decrease input length or `max_tokens` and try again",
            200_000,
            188_240,
        ),
        (  # Gemini
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
            1_048_576,
            1_200_000,
        ),
        (  # Mistral
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 "
            "maximum context length",
            32_768,
            40_000,
        ),
        (  # llama.cpp server
            json.dumps(refusal_body("llama.cpp", 4096, 5000)),
            4096,
            5000,
        ),
        ("Input is too long for requested model.", None, None),  # Amazon Bedrock
        ("Your input exceeds the context window of this model.", None, None),
    ],
)
def test_refusals_are_recognised_and_their_figures_read(text, limit, prompt):
    assert is_context_refusal(text)
    assert refusal_figures(text) == RefusalFigures(limit=limit, prompt_tokens=prompt)


@pytest.mark.parametrize(
    "text",
    [
        "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit "
        "30000, Used 29000, Requested 2000.",
        "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 45000.",
        "Incorrect API key provided.",
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens",
    ],
)
def test_other_errors_are_not_refusals(text):
    assert not is_context_refusal(text)


def test_the_learned_window_follows_the_refusal():
    """Figures worked out by hand from :func:`learned_window`'s rules (messages, tool schemas,
    completion reserve)."""
    # limit and the provider's count: the limit in veil's count ((9,000 + 500) / 10,000)
    assert learned_window(100_000, 9_000, 500, 1024, RefusalFigures(8192, 10_000)) == 7782
    # veil counts more than the provider: never a window larger than the stated one
    assert learned_window(100_000, 11_500, 500, 1024, RefusalFigures(8192, 10_000)) == 8192
    # the limit alone, veil's count of the request above it: the limit
    assert learned_window(100_000, 8_500, 500, 1024, RefusalFigures(8192, None)) == 8192
    # the limit alone, but veil counted the request within it (6,000 + 500 + 1,024 = 7,524):
    # its count runs low, so the messages get a fifth less room: 7,524 - 1,200 = 6,324
    assert learned_window(100_000, 6_000, 500, 1024, RefusalFigures(8192, None)) == 6324
    # no figure: the same, 20,000 + 2,000 + 1,024 - 4,000
    assert learned_window(100_000, 20_000, 2_000, 1024, RefusalFigures()) == 19_024
    # at least MIN_LEARNED_WINDOW
    assert learned_window(100_000, 100, 0, 200, RefusalFigures()) == MIN_LEARNED_WINDOW == 1024
    # never the window itself or more
    assert learned_window(8000, 8500, 1500, 1024, RefusalFigures()) == 7999


# -- through the agent loop ------------------------------------------------------------------


class Events:
    def __init__(self) -> None:
        self.events: list[Any] = []

    @hookimpl
    def render(self, event: Any) -> None:
        if event.kind != "token":
            self.events.append(event)

    def texts(self, kind: str) -> list[str]:
        return [e.data.get("text", "") for e in self.events if e.kind == kind]


@pytest.fixture
def opened(tmp_path, monkeypatch):
    """``opened(server, layer=True)`` -> ``(veil, events)``: a project whose main model is
    ``server`` with models.main.contextWindow :data:`CONFIGURED`. ``layer``: the installed
    plugins (context layer on); False: the compaction plugin alone (seed 000's defaults)."""
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VEIL_CONTEXT__RESCUE_EMBEDDINGS", "off")
    made = []

    def factory(server: ScriptedOpenAIServer, layer: bool = True):
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        (home / "auth.json").write_text(json.dumps({"providers": {"local": server.provider()}}))
        project = tmp_path / "project"
        (project / ".veil").mkdir(parents=True, exist_ok=True)
        settings = {"models": {"main": {"model": MODEL, "contextWindow": CONFIGURED}}}
        (project / ".veil" / "settings.json").write_text(json.dumps(settings))
        write_files(project)
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


FILES = 16


def write_files(project: Path) -> None:
    """Files of about 600 tokens each, every one different."""
    for n in range(FILES):
        body = "\n".join(
            f"value_{n}_{i} = compute({i}, 'f{n}', scale={n * 7 + i})  # line {i}"
            for i in range(36)
        )
        (project / f"f{n}.py").write_text(body)


def is_summary(body: dict[str, Any]) -> bool:
    first = body["messages"][0].get("content") or ""
    return first.startswith((SUMMARY_MARK, "You merge partial summaries"))


def reader(reads: int):
    """The model: ``reads`` reads of the files in turn, then ``done``; a summariser's request
    gets a summary."""
    asked = {"n": 0}

    def reply(body: dict[str, Any]) -> Any:
        if is_summary(body):
            return "SUMMARY: the agent read files f0.py to f9.py."
        n = asked["n"]
        asked["n"] += 1
        if n >= reads:
            asked["n"] = 0  # the next turn reads again
            return "done"
        return {"tool_calls": [{"name": "read", "arguments": {"path": f"f{n % FILES}.py"}}]}

    return reply


def main_requests(server: ScriptedOpenAIServer) -> list[Any]:
    return [r for r in server.requests if not is_summary(r.body)]


def newest_call(body: dict[str, Any]) -> tuple[str, str]:
    """The id of the last tool call in a request and the content of its result."""
    messages = body["messages"]
    last = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")][-1]
    call_id = last["tool_calls"][-1]["id"]
    result = next(m["content"] for m in messages if m.get("tool_call_id") == call_id)
    return call_id, result


def sent_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages as a provider checks their pairing (system messages aside)."""
    return [m for m in body["messages"] if m["role"] != "system"]


def test_a_refusal_teaches_the_window_and_the_turn_goes_on(opened):
    """OpenAI's refusal states the limit: the retry is fitted into it (eviction), the turn
    ends, and the next turn keeps to that window without another refusal."""
    with ScriptedOpenAIServer(reader(12), context_window=REAL) as server:
        veil, events = opened(server)
        session = veil.new_session()
        result = veil.run_turn(session, "Read the files one by one.")
        assert result.status == "done" and result.final == "done"
        following = veil.run_turn(session, "Read them once more.")
        assert following.status == "done"
        requests = main_requests(server)
        reloaded = veil.load_session(session.id)

    refused = [i for i, r in enumerate(requests) if r.refused]
    assert len(refused) == 1, [r.prompt_tokens for r in requests]
    before, retry = requests[refused[0]], requests[refused[0] + 1]
    # the retry: smaller, within the provider's window, every tool call with its result, and
    # the newest step (the call the model is waiting on) as it was
    assert not retry.refused
    assert retry.prompt_tokens < before.prompt_tokens
    assert retry.prompt_tokens <= REAL
    assert pairing_problems(sent_messages(retry.body)) == []
    assert newest_call(retry.body) == newest_call(before.body)
    # the session keeps the window: tool schemas are not in the provider's count here, so
    # veil's count of the prompt is the larger and the limit is taken as stated
    learned = {"model": MODEL, "tokens": REAL, "providerLimit": REAL}
    assert session.state[LEARNED_WINDOW_KEY] == learned
    assert session.context_window == REAL
    assert reloaded.context_window == REAL  # stored with the session
    assert all(r.prompt_tokens <= REAL for r in requests[refused[0] + 1 :])
    # said once
    told = [t for t in events.texts("warning") if "refused a request" in t]
    assert len(told) == 1
    assert f"fits its prompts into {REAL} tokens instead of {CONFIGURED}" in told[0]


@pytest.mark.parametrize("refusal", ["anthropic", "llama.cpp"])
def test_other_providers_refusals_compact_and_retry(opened, refusal):
    """Without the context layer (seed 000's defaults) the smaller window is met by full
    compaction; the refusal bodies are Anthropic's (as an OpenAI-compatible gateway relays it)
    and llama.cpp server's, which litellm does not all map to its ContextWindowExceededError."""
    with ScriptedOpenAIServer(reader(12), context_window=REAL, refusal=refusal) as server:
        veil, events = opened(server, layer=False)
        session = veil.new_session()
        result = veil.run_turn(session, "Read the files one by one.")
        requests = main_requests(server)
        summaries = [r for r in server.requests if is_summary(r.body)]

    assert result.status == "done" and result.final == "done"
    refused = [i for i, r in enumerate(requests) if r.refused]
    assert len(refused) == 1
    before, retry = requests[refused[0]], requests[refused[0] + 1]
    assert not retry.refused and retry.prompt_tokens < before.prompt_tokens <= 2 * REAL
    assert summaries  # compacted to fit the learned window
    second = retry.body["messages"][1]
    assert second["role"] == "system" and second["content"].startswith(SUMMARY_PREFIX)
    assert pairing_problems(sent_messages(retry.body)) == []
    assert newest_call(retry.body) == newest_call(before.body)
    assert session.state[LEARNED_WINDOW_KEY]["providerLimit"] == REAL
    assert session.context_window <= REAL
    assert any("refused a request" in t for t in events.texts("warning"))


def test_a_refusal_that_nothing_can_answer_still_fails_the_turn(opened):
    """A provider whose window cannot hold even the system prompt and the current request cut
    around its pointer: the retry is refused too, and the turn fails with the provider's error
    after two requests, not in a loop. The window the second refusal implies is kept for the
    next call (a fifth less again: the refusal states no limit veil takes, 100 being under
    MIN_FIGURE)."""
    from veil.core.models.llm import ContextWindowExceededError

    with ScriptedOpenAIServer(reader(0), context_window=100) as server:
        veil, _ = opened(server)
        session = veil.new_session()
        with pytest.raises(ContextWindowExceededError):
            veil.run_turn(session, "word " * 2000)
        sizes = [r.prompt_tokens for r in server.requests]
        assert len(server.requests) == 2 and all(r.refused for r in server.requests)
        assert sizes[1] < sizes[0]
        assert session.context_window < CONFIGURED
        first_window = session.context_window
        # the next call starts from the smaller window: refused once more at most, each time
        # a fifth smaller
        with pytest.raises(ContextWindowExceededError):
            veil.run_turn(session, "and now?")
        assert session.context_window < first_window


# -- the harness (a foreign loop) --------------------------------------------------------------


def test_the_harness_learns_the_window_from_its_hosts_refusal(tmp_path):
    harness = VeilHarness(
        tmp_path / ".veil" / "context.db", context_window=CONFIGURED, use_entry_points=False
    )
    hooks = harness.get_hooks()
    hooks["on_user_message"]("Read every file")
    for n in range(12):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        hooks["on_assistant_message"]({"role": "assistant", "content": None, "tool_calls": [call]})
        hooks["before_tool_call"]("read", {}, f"c{n}")
        body = "\n".join(f"row_{n}_{i} = {i * 31}  # value {i}" for i in range(60))
        hooks["after_tool_call"]("read", {}, f"c{n}", body)
    first = hooks["build_prompt"]([])
    before = harness.session.last_prompt_tokens
    assert before > 4000
    # an error that is not a refusal changes nothing
    assert not hooks["on_context_refused"](RuntimeError("Incorrect API key provided."))
    assert harness.session.context_window == CONFIGURED
    # OpenAI's refusal as the host's client raised it: the limit alone, veil's count above it
    text = "This model's maximum context length is 4000 tokens. Please reduce the length."
    assert hooks["on_context_refused"](RuntimeError(text))
    assert harness.session.context_window == 4000
    again = hooks["build_prompt"]([])
    assert harness.session.last_prompt_tokens + 1024 <= 4000  # the completion reserve too
    assert harness.session.last_prompt_tokens < before
    assert again[0] == first[0]  # the system message stays as it was
    assert pairing_problems(sent_messages({"messages": again})) == []
    harness.close()
