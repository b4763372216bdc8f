"""Token counting: exact where the model's tokenizer is installed, a close estimate otherwise.

Three functions, all offline (tiktoken's files ship inside litellm's wheel; see
:mod:`veil.core.models.offline`):

- :func:`cl100k_count`: tiktoken's ``cl100k_base``, ordinary text (special-token strings count as
  plain text). This exact tokenizer is the one ``veil replay`` measures with (DESIGN.md
  "Measures"). Where the ``bpe-openai`` package is installed (a dependency on Linux x86-64,
  macOS arm64 and Windows), its implementation of the same BPE (GitHub's ``bpe-openai`` Rust
  crate) does the counting: the same counts, 2-5x faster (tiktoken 0.58 ms, bpe-openai 0.14 ms
  for a 2,900-character file read on this machine, 0.09-0.11 ms through its binding's
  ``count``, :func:`fast_counter`). It is loaded on a background thread (its
  import takes about a second) and used only after it has given tiktoken's counts on
  :data:`CL100K_PROBES`; until then, for texts over :data:`FAST_COUNT_MAX_BYTES` and on any
  error of its own, tiktoken counts.
- :func:`count_text_tokens` / :func:`count_message_tokens`: exact where the model's own
  tokenizer is installed -- OpenAI models (every name tiktoken maps to an encoding), counted
  with tiktoken as litellm's ``token_counter`` counts them
  (:mod:`veil.core.models.openai_tokens`, no litellm import), and DeepSeek V3/V4 models
  (litellm's ``token_counter``, which bundles that tokenizer) -- otherwise
  :func:`estimate_tokens`.

The estimate (used for Anthropic, Gemini, Ollama, OpenRouter... models, whose tokenizers are not
installed) is meant to be close to the model's own count, not a loose upper bound (a bound that
holds for every tokenizer over-counted digit-heavy text 2.4x and JSON 1.6x, so prompts were
compacted long before they reached the window)::

    estimate(text) = ceil(ESTIMATE_FACTOR * (cl100k(text) + split_digits * extra_digit_tokens))

``cl100k(text)`` is the exact ``cl100k_base`` count (the fast path above). Current large
vocabularies count within a few percent of it on English, code, JSON and logs, and they differ on
two things, which the estimate follows:

- **Digits.** cl100k_base, o200k_base, Llama 3, DeepSeek and Claude keep up to three digits in one
  token; SentencePiece-style tokenizers (Gemini, Gemma, Qwen, Mistral, Llama 2, Phi, SmolLM) give
  every digit its own token. For a model of those families (:func:`splits_digits`, by name) each
  run of ``n`` ASCII digits adds ``n - ceil(n / 3)`` tokens (``extra_digit_tokens``).
- **CJK and other scripts.** o200k_base and DeepSeek spend about 15% fewer tokens than
  cl100k_base on the shared Chinese memory file, the Claude tokenizer litellm bundles (Claude 2's)
  11% more; the factor sits between them.

:data:`ESTIMATE_FACTOR` (1.05) is the middle of what the installed tokenizers spend per
cl100k_base token on the shared data. What is checked (tests/test_tokens.py): on a real 2 MB JSON
result, tool-output logs, digit-heavy text and the Chinese memory file, the estimate is within
1.25x either way (0.94-1.24x measured) of cl100k_base, o200k_base, DeepSeek's and Claude's tokenizers (digit-grouping
models) and of SmolLM2's tokenizer (digit-splitting models, 0.93-1.05x; not on CJK: SmolLM2's 49k English
vocabulary spends 1.7x cl100k_base's count there). It can under-count by up to 20%: the agent
loop keeps ``loop.completionReserve`` free, compacts at ``compaction.threshold`` of the window,
and compacts and retries once when a provider still refuses a prompt as too long.

Messages add :data:`MESSAGE_OVERHEAD` tokens each (ChatML's ``<|im_start|>role\\n`` ...
``<|im_end|>\\n``) and :data:`REPLY_OVERHEAD` once (the assistant header the reply starts with).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import math
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from veil.core.models.offline import import_litellm, prepare_offline_env

log = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 5
"""Estimated tokens around one chat message (role header and separators, ChatML's five)."""
REPLY_OVERHEAD = 3
"""Estimated tokens that prime the reply (OpenAI's documented 3)."""
ESTIMATE_FACTOR = 1.05
"""Factor on the cl100k_base count in :func:`estimate_tokens` (measured, see the module docstring)."""
TOOL_CALL_OVERHEAD = 8
"""Estimated tokens around one tool call besides its name and JSON arguments (id, type, braces)."""

# Model families whose tokenizer gives every digit its own token (SentencePiece's split_digits, or
# a digit-by-digit pre-tokenizer): Gemini and Gemma, Qwen, Mistral / Mixtral / Codestral, Llama 2
# and Code Llama, Phi, SmolLM, Yi, TinyLlama.
_DIGIT_SPLITTING = re.compile(
    r"gemini|gemma|qwen|qwq|mistral|mixtral|codestral|ministral|magistral|devstral|pixtral|"
    r"llama-?2|codellama|smollm|(?:^|[/:_-])phi[-_.]?\d|(?:^|[/:])yi[-:]|tinyllama|vicuna",
    re.IGNORECASE,
)
_DIGIT_RUN = re.compile(r"[0-9]+")
# Provider prefixes under which a model name is an OpenAI model (tiktoken knows its tokenizer).
_OPENAI_PREFIXES = ("openai/", "azure/", "text-completion-openai/")
# Model names whose tokenizer litellm bundles (litellm.utils._DEEPSEEK_TOKENIZER_MODEL).
_DEEPSEEK_MODEL = re.compile(
    r"deepseek[-_.](?:chat[-_.])?v[34]|(?:^|/)deepseek-(?:chat|reasoner|flash)(?::free)?$",
    re.IGNORECASE,
)


FAST_COUNT_MAX_BYTES = 200_000
"""Longest text (UTF-8 bytes) given to ``bpe-openai``: its encoder refuses more than 200,000
tokens, and a token is at least one byte."""

CL100K_PROBES = (
    "def handler(request):\n    return parse_config('src/pkg/mod_3.py')  # 12345678\n",
    "I'm sure they've   said\r\n\r\n it'll    work\t\t\n    \n",
    "<|endoftext|> <|fim_prefix|> are plain text here",
    "naïve café 東京都 русский текст 😀👍🏽 \u200b",
    "x = [1,2,3]; y = {'a': (4.5e-6, -7)}; z = a->b || c && !d;   ",
    "   leading and trailing whitespace   \n\n\n",
)
"""Strings ``bpe-openai`` must count exactly as tiktoken does before veil uses it: code,
contractions, whitespace runs, special-token text, non-ASCII scripts and emoji, punctuation."""


@functools.lru_cache(maxsize=1)
def _cl100k() -> Any:
    prepare_offline_env()
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def _tiktoken_count(text: str) -> int:
    return len(_cl100k().encode_ordinary(text))


_fast_encoding: Any = None  # bpe-openai's encoder, once loaded and checked
_fast_count: Callable[[str], int] | None = None  # its counting function (fast_counter)
_fast_loader: threading.Thread | None = None
_fast_lock = threading.Lock()


def _fast_cl100k() -> Callable[[str], int] | None:
    """The counting function (:func:`fast_counter`) of ``bpe-openai``'s cl100k_base encoder once
    it is loaded and has agreed with tiktoken on :data:`CL100K_PROBES`; None before that
    (tiktoken counts), and for good when the package is missing or disagrees.

    :func:`cl100k_count` starts loading it on a daemon thread after its first count (by
    tiktoken): importing the package parses all its bundled rank files in Python (about 1.2 s
    and 90 MiB here), which would otherwise stall the first count of every process. An agent
    loop spends that time waiting for the model, with the GIL released."""
    return _fast_count


def _start_fast_loader() -> None:
    global _fast_loader
    with _fast_lock:
        if _fast_loader is not None:
            return
        # its bundled files are read with a deprecated importlib.resources call; a filter set
        # here, once and narrowly, since catch_warnings is not thread-safe
        warnings.filterwarnings(
            "ignore", "open_binary is deprecated", DeprecationWarning, "bpe_openai"
        )
        # a loader thread: stopped at its next import when veil exits (veil.core.background)
        from veil.core import background

        _fast_loader = background.start_loader("veil-bpe-openai", _load_fast_encoding)


def _load_fast_encoding() -> None:
    global _fast_encoding, _fast_count
    encoding = checked_fast_encoding()
    if encoding is not None:
        _fast_count = fast_counter(encoding)
    _fast_encoding = encoding


def fast_counter(encoding: Any) -> Callable[[str], int]:
    """How to count with a ``bpe-openai`` encoding: the ``count`` method of its Rust binding
    (``encoding._backend``), which builds no token list (about 20% faster on a file read), when
    it gives the encoder's own counts on :data:`CL100K_PROBES`; otherwise
    ``len(encoding.encode_ordinary(text))``. The binding is not the package's documented API,
    hence the check and the fallback. Callers keep texts within :data:`FAST_COUNT_MAX_BYTES`
    and without lone surrogates (the checks the encoder's wrapper would make)."""

    def by_encoding(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    count = getattr(getattr(encoding, "_backend", None), "count", None)
    try:
        if callable(count) and all(count(p) == by_encoding(p) for p in CL100K_PROBES):
            return count
    except Exception as exc:  # noqa: BLE001 - the binding's count is optional
        log.debug("bpe-openai's binding count unusable (%s)", exc)
    return by_encoding


def checked_fast_encoding() -> Any:
    """Load ``bpe-openai``'s cl100k_base encoder and return it if it counts every string of
    :data:`CL100K_PROBES` as tiktoken does; None when the package is not installed, fails to
    load or disagrees (the last two are logged as warnings)."""
    if importlib.util.find_spec("bpe_openai") is None:
        return None
    try:
        import bpe_openai

        encoding = bpe_openai.get_encoding("cl100k_base")
        for probe in CL100K_PROBES:
            if len(encoding.encode_ordinary(probe)) != _tiktoken_count(probe):
                log.warning("bpe-openai disagrees with tiktoken on %r; tiktoken counts", probe)
                return None
    except Exception as exc:  # a broken install must not stop counting
        log.warning("bpe-openai failed to load (%s); tiktoken counts", exc)
        return None
    return encoding


def wait_for_fast_counter(timeout: float | None = 60.0) -> bool:
    """Start loading ``bpe-openai`` if nothing has, wait up to ``timeout`` seconds for it, and
    say whether it now does the counting (benchmarks call this so they time the steady state).
    """
    _start_fast_loader()
    loader = _fast_loader
    if loader is not None:
        loader.join(timeout)
    return _fast_encoding is not None


def _without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, as a provider decoding the JSON
    would (a surrogate pair written as two code points becomes the one character it encodes)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def cl100k_count(text: str) -> int:
    """Tokens of ``text`` under tiktoken's ``cl100k_base``, special-token strings as plain text.

    The measure ``veil replay`` uses (DESIGN.md "Measures"). The encoder is loaded once, offline
    (from litellm's bundled file, or ``bpe-openai``'s, see the module docstring). Lone surrogates
    count as U+FFFD.
    """
    if not text:
        return 0
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        text = _without_surrogates(text)
        size = len(text.encode("utf-8"))
    fast = _fast_cl100k() if size <= FAST_COUNT_MAX_BYTES else None
    if fast is not None:
        try:
            return fast(text)
        except Exception:  # noqa: BLE001 - any refusal of the fast path falls back to tiktoken
            pass
    count = _tiktoken_count(text)
    if _fast_loader is None:  # after tiktoken has loaded: this count does not share the GIL
        _start_fast_loader()
    return count


def _extra_digit_tokens(text: str) -> int:
    """Tokens a digit-splitting tokenizer spends on ``text``'s ASCII digits beyond cl100k_base's
    (which keeps up to three digits per token): ``n - ceil(n / 3)`` per run of ``n`` digits."""
    return sum(n - (n + 2) // 3 for n in map(len, _DIGIT_RUN.findall(text)))


@functools.lru_cache(maxsize=256)
def splits_digits(model: str | None) -> bool:
    """Whether ``model`` (a litellm model string) belongs to a family whose tokenizer gives every
    digit its own token (Gemini, Gemma, Qwen, Mistral, Llama 2, Phi, SmolLM...; the module
    docstring); False for None and for every other model."""
    return bool(model) and _DIGIT_SPLITTING.search(model) is not None


def estimate_tokens(text: str, model: str | None = None) -> int:
    """Estimated tokens of ``text`` for ``model``, whose tokenizer is not installed.

    ``ceil(ESTIMATE_FACTOR * (cl100k_count(text) + extra))``, where ``extra`` counts the digits
    a digit-splitting tokenizer spends beyond cl100k_base when :func:`splits_digits` says
    ``model`` has one (0 otherwise, and for ``model=None``). The module docstring says where
    the factor comes from and how close the estimate is measured to be.
    """
    if not text:
        return 0
    count = cl100k_count(text)
    if splits_digits(model):
        count += _extra_digit_tokens(text)
    return math.ceil(ESTIMATE_FACTOR * count)


@functools.lru_cache(maxsize=256)
def exact_tokenizer_model(model: str | None) -> str | None:
    """The name to give litellm's ``token_counter`` when it holds ``model``'s tokenizer, else None.

    OpenAI models (bare ``gpt-4o`` or prefixed ``openai/`` / ``azure/``) whose name tiktoken maps
    to an encoding, and DeepSeek V3/V4 models (litellm bundles that tokenizer file). Names routed
    through another provider (``openai/anthropic/claude-...`` on OpenRouter) stay estimates.
    """
    if not model:
        return None
    if _DEEPSEEK_MODEL.search(model):
        return model
    bare = model
    for prefix in _OPENAI_PREFIXES:
        if model.startswith(prefix):
            bare = model[len(prefix) :]
            break
    if "/" in bare:
        return None
    prepare_offline_env()
    import tiktoken

    try:
        tiktoken.encoding_name_for_model(bare)
    except KeyError:
        return None
    return bare


def count_text_tokens(text: str, model: str | None = None) -> int:
    """Tokens of ``text`` for ``model`` (a litellm model string such as ``openai/gpt-4o``).

    Exact when :func:`exact_tokenizer_model` knows the model's tokenizer (tiktoken for OpenAI
    models, litellm ``token_counter`` for DeepSeek's), otherwise :func:`estimate_tokens`.
    ``model=None`` uses the estimate.
    """
    if not text:
        return 0
    exact = exact_tokenizer_model(model)
    if exact is None:
        return estimate_tokens(text, model)
    if _DEEPSEEK_MODEL.search(exact):  # DeepSeek's tokenizer file comes with litellm
        return int(import_litellm().token_counter(model=exact, text=text))
    from veil.core.models.openai_tokens import text_counter

    return text_counter(exact)(text)


def content_text(content: Any) -> str:
    """Text of an OpenAI message ``content``: a string, None (""), or a list of parts whose
    ``text`` fields are concatenated (non-text parts count as "")."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                parts.append(str(part.get("text") or ""))
            else:
                parts.append(str(part))
        return "".join(parts)
    return str(content)


def _estimate_message(message: Mapping[str, Any], model: str | None) -> int:
    total = MESSAGE_OVERHEAD + estimate_tokens(content_text(message.get("content")), model)
    for key in ("name", "tool_call_id"):
        value = message.get(key)
        if isinstance(value, str):
            total += estimate_tokens(value, model)
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        total += TOOL_CALL_OVERHEAD + estimate_tokens(str(function.get("name") or ""), model)
        total += estimate_tokens(arguments, model)
    return total


def count_message_tokens(
    messages: Sequence[Mapping[str, Any]] | Iterable[Mapping[str, Any]],
    model: str | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> int:
    """Tokens of a chat prompt: OpenAI-format ``messages`` (plus ``tools`` schemas if given).

    Exact for models whose tokenizer is installed: OpenAI models by
    :func:`veil.core.models.openai_tokens.message_tokens` (litellm ``token_counter``'s
    accounting: 3 tokens per message, 3 for the reply, the tool schemas as OpenAI renders them;
    litellm itself for content it does not count), DeepSeek's by litellm ``token_counter``. Otherwise the sum of
    :func:`estimate_tokens` over each message's content, name, tool-call id, tool-call names and
    arguments, plus :data:`MESSAGE_OVERHEAD` per message, :data:`TOOL_CALL_OVERHEAD` per tool call
    and :data:`REPLY_OVERHEAD` once; ``tools`` add the estimate of their JSON.
    """
    messages = list(messages)
    exact = exact_tokenizer_model(model)
    if exact is not None:
        if not _DEEPSEEK_MODEL.search(exact):
            from veil.core.models.openai_tokens import message_tokens

            counted = message_tokens(messages, exact, tools)
            if counted is not None:
                return counted
        litellm = import_litellm()
        return int(litellm.token_counter(model=exact, messages=messages, tools=tools or None))
    total = REPLY_OVERHEAD + sum(_estimate_message(m, model) for m in messages)
    if tools:
        total += estimate_tokens(json.dumps(tools, ensure_ascii=False), model)
    return total
