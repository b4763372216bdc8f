"""Token counting: exact where the model's tokenizer is installed, a bounded estimate otherwise.

Three functions, all offline (tiktoken's files ship inside litellm's wheel; see
:mod:`veil.core.offline`):

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
- :func:`count_text_tokens` / :func:`count_message_tokens`: litellm's ``token_counter`` when
  litellm holds the model's own tokenizer -- OpenAI models (every name tiktoken maps to an
  encoding) and DeepSeek V3/V4 models (litellm bundles that tokenizer) -- otherwise
  :func:`estimate_tokens`.

The estimate (used for Anthropic, Gemini, Ollama, OpenRouter... models, whose tokenizers are not
installed) is meant to over-count::

    estimate(text) = max(ceil(ascii_chars / 3) + non_ascii_utf8_bytes, ceil(1.1 * cl100k(text)))
                     + ceil(2 * ascii_digits / 3)

``ascii_chars / 3`` is below the 3.5-4.5 characters per token that BPE tokenizers reach on
English and source code; a non-ASCII character counts its UTF-8 bytes, the most tokens a
byte-level tokenizer can spend on it (CJK, emoji); the ``cl100k`` term, with a 10% margin
(:data:`CL100K_MARGIN`), covers ASCII that packs fewer characters per token (one-letter words,
dense punctuation); the digit term covers tokenizers that split numbers into single digits
(SmolLM2, Llama 2, Mistral, Qwen) where cl100k_base keeps up to three digits in one token.

What is checked (tests/test_tokens.py, against cl100k_base, o200k_base, p50k_base, DeepSeek's,
Claude-2's and SmolLM2's tokenizers): over every whole prompt of the shared data (23 trajectories,
7 LoCoMo conversations, 2 memory files) the estimate is above the real count -- at least 1.08x
(SmolLM2), 1.11x (p50k), 1.2-1.3x (the 100k+ vocabularies), 1.2-1.4x at the median -- and so
it is on hostile strings (digit runs, hashes, one-letter words, dense punctuation, CJK, emoji,
Cyrillic, indented code) for the large-vocabulary tokenizers. Known gaps: the small vocabularies
(p50k_base, SmolLM2's 49k) spend up to 10% more on runs of mixed punctuation, and a single short
text can be under-counted (fragments like ``"ab\\tcd\\n"`` repeated); the per-message overhead
below absorbs the latter in practice. It is a measured bound, not a proof for every tokenizer.

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

from veil.core.offline import import_litellm, prepare_offline_env

log = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 5
"""Estimated tokens around one chat message (role header and separators, ChatML's five)."""
REPLY_OVERHEAD = 3
"""Estimated tokens that prime the reply (OpenAI's documented 3)."""
CL100K_MARGIN = 1.1
"""Factor on the cl100k_base count in :func:`estimate_tokens` (measured, see the module docstring)."""
TOOL_CALL_OVERHEAD = 8
"""Estimated tokens around one tool call besides its name and JSON arguments (id, type, braces)."""

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
        _fast_loader = threading.Thread(
            target=_load_fast_encoding, name="veil-bpe-openai", daemon=True
        )
        _fast_loader.start()


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


_DROP_DIGITS = str.maketrans("", "", "0123456789")


def estimate_tokens(text: str) -> int:
    """Over-estimate of the tokens of ``text`` for a model whose tokenizer is not installed.

    ``max(ceil(ascii_chars / 3) + non_ascii_utf8_bytes, ceil(1.1 * cl100k_count(text)))
    + ceil(2 * ascii_digits / 3)``; the module docstring says why each term is there and where
    the bound is checked.
    """
    if not text:
        return 0
    if text.isascii():  # deleting the digits is one C pass over ASCII text, 3x faster
        ascii_chars, non_ascii_bytes = len(text), 0
        digits = len(text) - len(text.translate(_DROP_DIGITS))
    else:  # (translate goes through a dict look-up per character here)
        ascii_chars = len(text.encode("ascii", "ignore"))
        non_ascii_bytes = len(text.encode("utf-8", "surrogatepass")) - ascii_chars
        digits = sum(text.count(d) for d in "0123456789")
    by_chars = math.ceil(ascii_chars / 3) + non_ascii_bytes
    by_cl100k = math.ceil(CL100K_MARGIN * cl100k_count(text))
    return max(by_chars, by_cl100k) + math.ceil(2 * digits / 3)


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

    Exact (litellm ``token_counter``) when :func:`exact_tokenizer_model` knows the model's
    tokenizer, otherwise :func:`estimate_tokens`. ``model=None`` uses the estimate.
    """
    if not text:
        return 0
    exact = exact_tokenizer_model(model)
    if exact is None:
        return estimate_tokens(text)
    return int(import_litellm().token_counter(model=exact, text=text))


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


def _estimate_message(message: Mapping[str, Any]) -> int:
    total = MESSAGE_OVERHEAD + estimate_tokens(content_text(message.get("content")))
    for key in ("name", "tool_call_id"):
        value = message.get(key)
        if isinstance(value, str):
            total += estimate_tokens(value)
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        total += TOOL_CALL_OVERHEAD + estimate_tokens(str(function.get("name") or ""))
        total += estimate_tokens(arguments)
    return total


def count_message_tokens(
    messages: Sequence[Mapping[str, Any]] | Iterable[Mapping[str, Any]],
    model: str | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> int:
    """Tokens of a chat prompt: OpenAI-format ``messages`` (plus ``tools`` schemas if given).

    Exact per litellm ``token_counter`` for models whose tokenizer it holds (its own per-message
    accounting: 3 tokens per message, 3 for the reply). Otherwise the sum of
    :func:`estimate_tokens` over each message's content, name, tool-call id, tool-call names and
    arguments, plus :data:`MESSAGE_OVERHEAD` per message, :data:`TOOL_CALL_OVERHEAD` per tool call
    and :data:`REPLY_OVERHEAD` once; ``tools`` add the estimate of their JSON.
    """
    messages = list(messages)
    exact = exact_tokenizer_model(model)
    if exact is not None:
        litellm = import_litellm()
        return int(litellm.token_counter(model=exact, messages=messages, tools=tools or None))
    total = REPLY_OVERHEAD + sum(_estimate_message(m) for m in messages)
    if tools:
        total += estimate_tokens(json.dumps(tools, ensure_ascii=False))
    return total
