"""Usage a provider leaves out, and the context window of every role's model (issue 19,
"Estimates and windows"), through a scripted OpenAI-compatible server on 127.0.0.1 called by
litellm's real client."""

from __future__ import annotations

import json

import pytest

from veil.core.models.llm import LLM, LiteLLMModel, Route
from veil.core.models.tokens import count_message_tokens, count_text_tokens
from veil.core.settings import load_config
from veil.testing.scripted_server import ScriptedOpenAIServer, openai_prompt_tokens


@pytest.fixture(autouse=True)
def _allow_project_providers(monkeypatch):
    """These tests configure providers in the project's .veil/auth.json for brevity; since
    issue 17 such a provider needs the user's consent (tests/test_trust.py tests that rule)."""
    monkeypatch.setenv("VEIL_ALLOW_PROJECT_PROVIDERS", "1")


KEY = "sk-test-usage0123456789abcdef"
MODEL = "acme-chat-7"  # a model litellm does not know: veil estimates its tokens
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "List the ports 8080, 8443 and 9000 in order."},
]


def _model(server: ScriptedOpenAIServer) -> LiteLLMModel:
    return LiteLLMModel(MODEL, [Route("local", "openai", server.url, KEY)])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_usage_left_out_by_the_provider_is_counted_and_marked(stream):
    reply = "8080, 8443, 9000"
    with ScriptedOpenAIServer([reply], omit_usage=True) as server:
        on_token = (lambda piece: None) if stream else None
        completion = _model(server).complete(MESSAGES, on_token=on_token)
    litellm_model = f"openai/{MODEL}"
    assert completion.content == reply
    assert completion.usage == {
        "prompt_tokens": count_message_tokens(MESSAGES, litellm_model),
        "completion_tokens": count_text_tokens(reply, litellm_model),
    }
    assert completion.usage["prompt_tokens"] > 0 and completion.usage["completion_tokens"] > 0
    assert completion.usage_estimated is True


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_usage_the_provider_reports_is_kept(stream):
    reply = "8080, 8443, 9000"
    with ScriptedOpenAIServer([reply]) as server:
        on_token = (lambda piece: None) if stream else None
        completion = _model(server).complete(MESSAGES, on_token=on_token)
    # the server reports cl100k_base counts under OpenAI's accounting
    assert completion.usage["prompt_tokens"] == openai_prompt_tokens(MESSAGES)
    assert completion.usage_estimated is False


def test_estimated_usage_reaches_the_usage_log(tmp_path, monkeypatch):
    with ScriptedOpenAIServer(["ok"], omit_usage=True) as server:
        config = _config(tmp_path, monkeypatch, server, {"main": {"model": MODEL}})
        llm = LLM(config)
        llm.model_for("main").complete(MESSAGES)
    [entry] = llm.usage_log
    assert entry["estimated"] is True and entry["prompt_tokens"] > 0


def _config(tmp_path, monkeypatch, server, models, agent=None):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("VEIL_HOME", str(home))
    project = tmp_path / "project"
    (project / ".veil").mkdir(parents=True, exist_ok=True)
    auth = {"providers": {"local": {"type": "openai", "base_url": server.url, "api_key": KEY}}}
    (project / ".veil" / "auth.json").write_text(json.dumps(auth))
    (project / ".veil" / "settings.json").write_text(json.dumps({"models": models}))
    if agent is not None:
        folder = project / ".veil" / "agents" / "default"
        folder.mkdir(parents=True)
        (folder / "agent.json").write_text(json.dumps(agent))
    return load_config(project)


def test_every_role_gets_the_window_configured_for_its_model(tmp_path, monkeypatch):
    with ScriptedOpenAIServer([]) as server:
        models = {
            "main": {"model": "big-model", "contextWindow": 100_000},
            "compact": {"model": "small-model", "contextWindow": 3_000},
        }
        llm = LLM(_config(tmp_path, monkeypatch, server, models))
        assert llm.model_for("compact").context_window == 3_000
        # defaultCompaction.model / a session model naming the compact model, asked for as main
        assert llm.model_for("main", "small-model").context_window == 3_000
        assert llm.model_for("compact", "big-model").context_window == 100_000
        assert llm.model_for("main").context_window == 100_000


def test_a_window_set_in_auth_json_holds_where_settings_json_names_the_model_again(
    tmp_path, monkeypatch
):
    with ScriptedOpenAIServer([]) as server:
        config = _config(tmp_path, monkeypatch, server, {"compact": {"model": "small-model"}})
        auth_file = config.project_dir / ".veil" / "auth.json"
        auth = json.loads(auth_file.read_text())
        auth["models"] = {"compact": {"model": "small-model", "contextWindow": 2_500}}
        auth_file.write_text(json.dumps(auth))
        llm = LLM(load_config(config.project_dir))
        assert llm.model_for("compact").context_window == 2_500
        assert llm.model_for("main", "small-model").context_window == 2_500


def test_default_compaction_model_requests_fit_its_configured_window(tmp_path, monkeypatch):
    """defaultCompaction.model names the compact model, whose contextWindow is small: the
    summariser chunks to that window and the provider (which refuses longer prompts) accepts
    every request. Before, the window of an unknown model fell back to 8,192 tokens and the
    one request overflowed."""
    import veil_compaction

    from veil.core.app import open_veil

    window = 2_000
    with ScriptedOpenAIServer(
        lambda body: "SUMMARY of part " + str(len(body["messages"])),
        context_window=window,
    ) as server:
        models = {
            "main": {"model": "big-model", "contextWindow": 100_000},
            "compact": {"model": "small-model", "contextWindow": window},
        }
        agent = {"defaultCompaction": {"model": "small-model"}}
        config = _config(tmp_path, monkeypatch, server, models, agent)
        veil = open_veil(
            config.project_dir,
            config=config,
            llm=LLM(config),
            use_entry_points=False,
            extra_plugins=(("veil_compaction", veil_compaction),),
        )
        try:
            session = veil.new_session()
            for n in range(60):  # about 12,000 characters in the compacted half
                role = "user" if n % 2 == 0 else "assistant"
                text = f"message {n}: " + " ".join(f"value{n}_{i} = {i * 17}" for i in range(30))
                session.append({"role": role, "content": text})
            out = veil.compact(session.id)
        finally:
            veil.close()
    sizes = [r.prompt_tokens for r in server.requests]
    assert out["compactedCount"] > 0 and not out["alreadyUpToDate"]
    assert len(sizes) > 1  # chunked: one request could not hold the input
    assert not any(r.refused for r in server.requests), sizes
    assert max(sizes) <= window, sizes
    assert all(r.body["model"] == "small-model" for r in server.requests)


def test_a_turn_reports_and_stores_usage_it_had_to_count(tmp_path, monkeypatch):
    from veil.core.app import open_veil

    with ScriptedOpenAIServer(["the answer is 42"], omit_usage=True) as server:
        config = _config(tmp_path, monkeypatch, server, {"main": {"model": MODEL}})
        veil = open_veil(config.project_dir, config=config, llm=LLM(config), use_entry_points=False)
        try:
            session = veil.new_session()
            result = veil.run_turn(session, "what is the answer?")
            stored = veil.store.conn.execute(
                "SELECT usage FROM messages WHERE session_id = ? AND usage IS NOT NULL",
                (session.id,),
            ).fetchall()
        finally:
            veil.close()
    assert result.final == "the answer is 42"
    assert result.usage_estimated is True
    assert result.usage["prompt_tokens"] > 0
    assert result.usage["completion_tokens"] == count_text_tokens(
        "the answer is 42", f"openai/{MODEL}"
    )
    [usage] = [json.loads(row["usage"]) for row in stored]
    assert usage["estimated"] is True and usage["prompt_tokens"] == result.usage["prompt_tokens"]
