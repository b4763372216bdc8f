"""Token counting (veil.core.models.tokens) and the offline environment (veil.core.models.offline).

Exact counts are checked against tiktoken called directly; the estimate's bound is checked
against every tokenizer installed here, on the shared real data and on hostile strings.
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from veil.core.models import offline, tokens
from veil.core.models.offline import litellm_tokenizer_dir, prepare_offline_env

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("VEIL_SHARED_DATA") or REPO / ".." / "shared" / "data")


def _need_data() -> Path:
    if not DATA.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared data missing at {DATA}")
        pytest.skip(f"shared data not present at {DATA}")
    return DATA


def _tiktoken(name: str):
    prepare_offline_env()
    import tiktoken

    return tiktoken.get_encoding(name)


# ---------------------------------------------------------------------------------------------
# offline environment


def test_tokenizer_dir_holds_cl100k_under_tiktokens_cache_name():
    folder = litellm_tokenizer_dir()
    assert folder is not None and folder.is_dir()
    # tiktoken caches a file under sha1(url); this is how it finds cl100k_base offline.
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    assert (folder / hashlib.sha1(url.encode()).hexdigest()).is_file()


def test_prepare_offline_env_sets_only_unset_and_is_idempotent(monkeypatch):
    monkeypatch.setattr(offline, "_prepared", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user's own value wins
    for name in ("LITELLM_LOCAL_MODEL_COST_MAP", "TRANSFORMERS_OFFLINE", "TIKTOKEN_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    changed = prepare_offline_env()
    assert changed == {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TRANSFORMERS_OFFLINE": "1",
        "TIKTOKEN_CACHE_DIR": str(litellm_tokenizer_dir()),
    }
    assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert prepare_offline_env() == {}  # second call changes nothing


def test_importing_veil_llm_modules_does_not_import_litellm_or_llama_cpp():
    code = (
        "import sys, veil.core.models.llm, veil.testing.scripted_model, veil.core.models.tokens, "
        "veil.core.models.providers, veil.core.settings\n"
        "print(sorted(m for m in ('litellm', 'llama_cpp', 'tiktoken') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# exact counts


@pytest.mark.parametrize(
    "text",
    ["hello world", "def f(x):\n    return x + 1\n", "<|endoftext|> is plain text here", "中文 🙂"],
)
def test_cl100k_count_equals_tiktoken(text):
    enc = _tiktoken("cl100k_base")
    assert tokens.cl100k_count(text) == len(enc.encode(text, disallowed_special=()))


def test_cl100k_count_known_values():
    assert tokens.cl100k_count("") == 0
    assert tokens.cl100k_count("hello world") == 2  # "hello", " world"
    # The special-token string is ordinary text: more than the single special token.
    assert tokens.cl100k_count("<|endoftext|>") > 1


def test_cl100k_count_survives_lone_surrogates():
    assert tokens.cl100k_count("a\udc80b") == tokens.cl100k_count("a\ufffdb")


def test_bpe_openai_is_the_fast_path_here():
    """Installed with veil on this platform, it passes the probes, so it does the counting once
    its background load is done."""
    pytest.importorskip("bpe_openai")
    assert tokens.wait_for_fast_counter(timeout=120)
    assert tokens._fast_encoding is not None
    # the binding's count, which gives the same counts without building the token list
    assert tokens._fast_cl100k() == tokens._fast_encoding._backend.count


EDGE_STRINGS = [
    "a\n\n\n   \t\r\n b",
    "I'm   we'LL they've   DON'T",
    "x" * 3000,
    " " * 4000 + "y",
    "\u200b\u200d\ufeff zero widths",
    "ＦＵＬＬＷＩＤＴＨ ａｂｃ １２３",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467 family",
]


@pytest.mark.parametrize("text", EDGE_STRINGS, ids=range(len(EDGE_STRINGS)))
def test_cl100k_count_fast_path_equals_tiktoken_on_edge_strings(text):
    enc = _tiktoken("cl100k_base")
    tokens.wait_for_fast_counter(timeout=120)  # the fast path, where it is installed
    assert tokens.cl100k_count(text) == len(enc.encode_ordinary(text))


def test_cl100k_count_equals_tiktoken_on_every_shared_text():
    """Every message of every recorded trajectory (all three formats, whatever the fast path)."""
    data = _need_data()
    enc = _tiktoken("cl100k_base")
    tokens.wait_for_fast_counter(timeout=120)  # the fast path, where it is installed
    texts: list[str] = []

    def walk(value):
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    paths = sorted((data / "trajectories").rglob("*.json"))
    paths += sorted((data / "trajectories").rglob("*.traj"))
    assert len(paths) >= 29
    for path in paths:
        walk(json.loads(path.read_text(encoding="utf-8")))
    texts = list(dict.fromkeys(t for t in texts if t))
    assert len(texts) > 5_000
    mismatched = [t[:60] for t in texts if tokens.cl100k_count(t) != len(enc.encode_ordinary(t))]
    assert mismatched == []


def test_cl100k_count_falls_back_to_tiktoken(monkeypatch):
    enc = _tiktoken("cl100k_base")

    def refuses(text):
        raise ValueError("too long")

    monkeypatch.setattr(tokens, "_fast_cl100k", lambda: refuses)
    assert tokens.cl100k_count("hello world") == 2
    long = "word " * (tokens.FAST_COUNT_MAX_BYTES // 5 + 10)
    assert tokens.cl100k_count(long) == len(enc.encode_ordinary(long))


@pytest.mark.parametrize("size", [199_999, 200_000, 200_001])
def test_cl100k_count_at_the_fast_path_limit(size):
    """Around the byte limit (one token per byte at most): either path gives tiktoken's count."""
    enc = _tiktoken("cl100k_base")
    tokens.wait_for_fast_counter(timeout=120)
    text = ("é" * size)[: size // 2] + "x" * (size % 2)  # 2-byte characters, ``size`` bytes
    assert len(text.encode("utf-8")) == size
    assert tokens.cl100k_count(text) == len(enc.encode_ordinary(text))


def test_fast_path_refused_when_it_disagrees_on_a_probe(monkeypatch, caplog):
    bpe_openai = pytest.importorskip("bpe_openai")

    class OffByOne:
        def encode_ordinary(self, text):
            return [0] * (len(text) + 1)

    monkeypatch.setattr(bpe_openai, "get_encoding", lambda name: OffByOne())
    with caplog.at_level("WARNING", logger="veil.core.models.tokens"):
        assert tokens.checked_fast_encoding() is None
    assert "disagrees with tiktoken" in caplog.text


def test_fast_counter_uses_the_binding_count_only_when_it_agrees():
    class Backend:
        def __init__(self, offset):
            self.offset = offset

        def count(self, text):
            return len(text.split()) + self.offset

    class Encoding:
        def __init__(self, offset):
            self._backend = Backend(offset)

        def encode_ordinary(self, text):
            return text.split()

    agrees, disagrees = Encoding(0), Encoding(1)
    assert tokens.fast_counter(agrees) == agrees._backend.count
    counter = tokens.fast_counter(disagrees)  # falls back to the encoder
    assert counter("one two three") == 3
    no_backend = Encoding(0)
    del no_backend._backend
    assert tokens.fast_counter(no_backend)("a b") == 2


def test_fast_path_absent_without_the_package(monkeypatch):
    monkeypatch.setattr(tokens.importlib.util, "find_spec", lambda name: None)
    assert tokens.checked_fast_encoding() is None


def test_exact_tokenizer_model_routing():
    assert tokens.exact_tokenizer_model("openai/gpt-4o") == "gpt-4o"
    assert tokens.exact_tokenizer_model("gpt-4") == "gpt-4"
    assert tokens.exact_tokenizer_model("azure/gpt-4o-mini") == "gpt-4o-mini"
    assert tokens.exact_tokenizer_model("deepseek/deepseek-chat") == "deepseek/deepseek-chat"
    # Unknown tokenizers: Ollama models, Claude through OpenRouter's OpenAI-compatible API.
    assert tokens.exact_tokenizer_model("ollama/qwen3") is None
    assert tokens.exact_tokenizer_model("openai/anthropic/claude-4-6-sonnet") is None
    assert tokens.exact_tokenizer_model(None) is None


def test_count_text_tokens_openai_models_match_tiktoken():
    text = "Counting tokens for veil: 12345 files in /tmp/x_y.py"
    assert tokens.count_text_tokens(text, "openai/gpt-4o") == len(
        _tiktoken("o200k_base").encode_ordinary(text)
    )
    assert tokens.count_text_tokens(text, "gpt-4") == len(
        _tiktoken("cl100k_base").encode_ordinary(text)
    )


def test_count_message_tokens_openai_follows_openai_accounting():
    enc = _tiktoken("o200k_base")
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": "a.py b.py"},
    ]
    # OpenAI's documented accounting: 3 tokens per message + role + content, 3 to prime the reply.
    expected = 3 + sum(
        3 + len(enc.encode(m["role"])) + len(enc.encode(m["content"])) for m in messages
    )
    assert tokens.count_message_tokens(messages, "openai/gpt-4o") == expected


def _history_with_tools() -> tuple[list[dict], list[dict]]:
    """A chat history with a system prompt, tool calls and results, names, non-ASCII text and
    content parts, and veil's own tool schemas (every string under litellm's 1,024-character
    cut, so its pieces and a whole count agree)."""
    from veil.default_plugins.coding_tools.tools import builtin_tools
    from veil.default_plugins.memory_tools.tools import memory_tools

    tools = [t.schema() for t in [*builtin_tools(), *memory_tools()]]
    messages = [
        {"role": "system", "content": "You are veil, a coding agent. Be terse."},
        {"role": "user", "content": "Why does test_parse fail? 12345 東京 naïve 😀", "name": "ann"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "pytest -q -x"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "src/parse.py"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "E   assert 3 == 4\n1 failed"},
        {"role": "tool", "tool_call_id": "call_2", "content": "def parse(x):\n    return x+1\n"},
        {"role": "assistant", "content": "parse adds 1; the test expects 2 more."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Fix it."}, {"type": "text", "text": " Now."}],
        },
    ]
    return messages, tools


@pytest.mark.parametrize(
    "model", ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4", "gpt-3.5-turbo", "o3-mini"]
)
def test_openai_counts_equal_litellm_token_counter(model):
    """veil counts OpenAI prompts with tiktoken alone (veil.core.models.openai_tokens); the
    reference is litellm's token_counter, which counted them before issue 30."""
    from veil.core.models.offline import import_litellm
    from veil.core.models.openai_tokens import message_tokens

    litellm = import_litellm()
    messages, tools = _history_with_tools()
    for case_messages, case_tools in (
        (messages, tools),
        (messages, None),
        (messages[1:], tools),  # no system message: litellm's 4-token discount is off
        (messages[:2], tools[:1]),
        ([], tools),
    ):
        expected = litellm.token_counter(model=model, messages=case_messages, tools=case_tools)
        assert message_tokens(case_messages, model, case_tools) == expected
        assert tokens.count_message_tokens(case_messages, f"openai/{model}", case_tools) == expected
    text = messages[1]["content"]
    assert tokens.count_text_tokens(text, model) == litellm.token_counter(model=model, text=text)


def test_openai_counts_of_content_veil_does_not_count_come_from_litellm():
    """An image part is priced by litellm's own rules: the count is its, not a text count."""
    from veil.core.models.offline import import_litellm
    from veil.core.models.openai_tokens import message_tokens

    image = {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"},
    }
    messages = [{"role": "user", "content": [{"type": "text", "text": "what is it"}, image]}]
    assert message_tokens(messages, "gpt-4o") is None
    expected = import_litellm().token_counter(model="gpt-4o", messages=messages)
    assert tokens.count_message_tokens(messages, "openai/gpt-4o") == expected


def test_openai_long_texts_are_counted_whole():
    """litellm counts a text in 1,024-character pieces (a token cut in two counts twice); veil
    counts it whole, as the model reads it: equal to tiktoken on the whole text."""
    text = ("The quick brown fox jumps over the lazy dog; " * 200)[:9000]
    whole = len(_tiktoken("o200k_base").encode_ordinary(text))
    assert tokens.count_text_tokens(text, "openai/gpt-4o-mini") == whole
    expected = 3 + 3 + len(_tiktoken("o200k_base").encode_ordinary("user")) + whole
    assert (
        tokens.count_message_tokens([{"role": "user", "content": text}], "gpt-4o-mini") == expected
    )


# ---------------------------------------------------------------------------------------------
# the estimate


def test_estimate_by_hand():
    # ceil(1.05 * cl100k): "abcdef" is one cl100k_base token -> ceil(1.05) = 2.
    assert tokens.cl100k_count("abcdef") == 1
    assert tokens.estimate_tokens("abcdef") == 2
    # Ten digits: cl100k "123" "456" "789" "0" = 4 -> ceil(4.2) = 5 for a digit-grouping model;
    # a digit-splitting one spends 10: 4 + (10 - ceil(10 / 3)) = 10 -> ceil(10.5) = 11.
    assert tokens.cl100k_count("1234567890") == 4
    assert tokens.estimate_tokens("1234567890") == 5
    assert tokens.estimate_tokens("1234567890", "anthropic/claude-4-6-sonnet") == 5
    assert tokens.estimate_tokens("1234567890", "gemini/gemini-2.5-pro") == 11
    # Two runs: "v12 and 3456" -> extra (2 - 1) + (4 - 2) = 3 on top of cl100k's count.
    text = "v12 and 3456"
    assert tokens.estimate_tokens(text, "ollama/qwen3") == math.ceil(
        1.05 * (tokens.cl100k_count(text) + 3)
    )
    # "a a a ..." packs two characters per token: cl100k 31 -> ceil(32.55) = 33.
    text = "a " * 30
    assert tokens.cl100k_count(text) == 31
    assert tokens.estimate_tokens(text) == 33
    assert tokens.estimate_tokens("") == 0
    # Non-ASCII digits are not split ("١٢٣" Arabic-Indic digits): only ASCII runs count.
    assert tokens.estimate_tokens("é١٢٣", "gemini/x") == tokens.estimate_tokens("é١٢٣")


@pytest.mark.parametrize(
    ("model", "splits"),
    [
        ("gemini/gemini-2.5-pro", True),
        ("openrouter/google/gemma-3-27b-it", True),
        ("ollama/qwen3:8b", True),
        ("mistral/mistral-large-latest", True),
        ("ollama/llama2", True),
        ("ollama/phi3:mini", True),
        ("anthropic/claude-4-6-sonnet", False),
        ("ollama/llama3.1", False),
        ("openrouter/meta-llama/llama-3-70b-instruct", False),
        ("groq/deepseek-r1-distill-llama-70b", False),
        ("ollama/graphite", False),  # "phi" inside a word is not Phi
        (None, False),
    ],
)
def test_splits_digits_by_model_family(model, splits):
    assert tokens.splits_digits(model) is splits


def test_count_message_tokens_estimate_adds_documented_overheads():
    messages = [
        {"role": "user", "content": "How many files?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ]
    e = tokens.estimate_tokens
    expected = (
        tokens.REPLY_OVERHEAD
        + 3 * tokens.MESSAGE_OVERHEAD
        + e("How many files?")
        + tokens.TOOL_CALL_OVERHEAD
        + e("ls")
        + e("{}")
        + e("c1")
        + e("3")
    )
    assert tokens.count_message_tokens(messages) == expected
    assert tokens.count_message_tokens(messages, "ollama/qwen3") == expected


def _installed_tokenizers(closers: list) -> dict:
    """Every tokenizer installed here, as name -> count(text)."""
    found = {}
    for name in ("cl100k_base", "o200k_base", "p50k_base"):
        enc = _tiktoken(name)
        found[name] = lambda s, enc=enc: len(enc.encode_ordinary(s))
    try:
        import tokenizers
    except ImportError:
        tokenizers = None
    folder = litellm_tokenizer_dir()
    if tokenizers is not None and folder is not None:
        for name in ("deepseek", "anthropic"):
            tok = tokenizers.Tokenizer.from_file(str(folder / f"{name}_tokenizer.json"))
            found[name] = lambda s, tok=tok: len(tok.encode(s, add_special_tokens=False).ids)
    try:
        from llama_cpp import Llama
        from veil_bundled.model import find_bundled_gguf

        vocab = Llama(model_path=str(find_bundled_gguf()), vocab_only=True, verbose=False)
        closers.append(vocab.close)
        found["smollm2"] = lambda s: len(vocab.tokenize(s.encode(), add_bos=False, special=False))
    except (ImportError, FileNotFoundError):
        pass
    return found


@pytest.fixture(scope="module")
def installed_tokenizers():
    closers: list = []
    yield _installed_tokenizers(closers)
    for close in closers:
        close()


def _real_prompts(data: Path) -> list[tuple[str, list[str]]]:
    prompts = []
    for path in sorted(glob.glob(str(data / "trajectories" / "mini-swe-agent" / "*.json"))):
        texts = []
        for m in json.loads(Path(path).read_text())["messages"]:
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content)
            texts.append(content or "")
        prompts.append((Path(path).name, texts))
    for path in sorted(glob.glob(str(data / "memfiles" / "*.md"))):
        prompts.append((Path(path).name, [Path(path).read_text(encoding="utf-8")]))
    for sample in json.loads((data / "locomo" / "locomo10_dev.json").read_text()):
        turns = [
            f"{t['speaker']}: {t['text']}"
            for key, session in sample["conversation"].items()
            if key.startswith("session_") and isinstance(session, list)
            for t in session
        ]
        prompts.append((sample["sample_id"], turns))
    return prompts


# Installed tokenizers whose models group digits like cl100k_base, and the digit-splitting one.
GROUPING = ("cl100k_base", "o200k_base", "deepseek", "anthropic")
SPLITTING = ("smollm2",)
LOW, HIGH = 0.8, 1.25  # "within 1.25x" of the real count, either way


def _model_for(tokenizer: str) -> str:
    """A model name of the family the tokenizer stands for (what the estimate is told)."""
    return "ollama/smollm2" if tokenizer in SPLITTING else "anthropic/claude-4-6-sonnet"


def test_estimate_is_close_on_every_real_prompt(installed_tokenizers):
    data = _need_data()
    prompts = _real_prompts(data)
    assert len(prompts) >= 25
    for tokenizer in GROUPING + SPLITTING:
        count = installed_tokenizers[tokenizer]
        for name, texts in prompts:
            if tokenizer in SPLITTING and name.endswith("_zh.md"):
                continue  # SmolLM2's English vocabulary on Chinese: the documented gap
            actual = sum(count(t) for t in texts)
            estimate = sum(tokens.estimate_tokens(t, _model_for(tokenizer)) for t in texts)
            assert LOW <= estimate / actual <= HIGH, (tokenizer, name, estimate, actual)


def _text_classes(data: Path) -> dict[str, str]:
    """A 2 MB JSON tool result, tool-output logs, digit-heavy text and Chinese, from real data
    (the digits are a CSV of measurements drawn with a fixed seed)."""
    import random

    files = sorted(glob.glob(str(data / "trajectories" / "*" / "*.json")), key=os.path.getsize)
    big_json = (Path(files[-1]).read_text() + Path(files[-2]).read_text())[:2_000_000]
    logs = []
    for path in sorted(glob.glob(str(data / "trajectories" / "mini-swe-agent" / "*.json")))[:8]:
        for m in json.loads(Path(path).read_text())["messages"]:
            if isinstance(m.get("content"), str) and "<output>" in m["content"]:
                logs.append(m["content"])
    rng = random.Random(19)
    rows = [
        f"2024-03-{d:02d}T{h:02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z,"
        + ",".join(f"{rng.uniform(-1000, 1000):.6f}" for _ in range(8))
        for d in range(1, 29)
        for h in range(24)
    ]
    return {
        "json": big_json,
        "logs": "\n".join(logs)[:400_000],
        "digits": "\n".join(rows),
        "cjk": (data / "memfiles" / "kikibot_MEMORY_zh.md").read_text(encoding="utf-8"),
    }


@pytest.fixture(scope="module")
def text_classes():
    return _text_classes(_need_data())


@pytest.mark.parametrize("kind", ["json", "logs", "digits", "cjk"])
def test_estimate_within_a_quarter_of_real_tokenizers(installed_tokenizers, text_classes, kind):
    """Issue 19: the estimate over-counted digit-heavy text 2.4x and a 2 MB JSON result 1.6x."""
    text = text_classes[kind]
    checked = GROUPING + (SPLITTING if kind != "cjk" else ())
    ratios = {}
    for tokenizer in checked:
        actual = installed_tokenizers[tokenizer](text)
        ratios[tokenizer] = tokens.estimate_tokens(text, _model_for(tokenizer)) / actual
    assert all(LOW <= r <= HIGH for r in ratios.values()), ratios


def test_estimate_stays_near_cl100k_on_code():
    """On a real trajectory (code, prose, tool output) the estimate is 1.05x cl100k_base."""
    data = _need_data()
    name, texts = _real_prompts(data)[0]
    ratio = sum(tokens.estimate_tokens(t) for t in texts) / sum(
        tokens.cl100k_count(t) for t in texts
    )
    assert 1.0 <= ratio <= 1.06, (name, ratio)
