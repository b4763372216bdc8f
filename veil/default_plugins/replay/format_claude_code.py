"""Claude Code transcripts: ``~/.claude/projects/<encoded project path>/<session id>.jsonl``.

One JSON record per line. The conversation records (``type`` ``user`` / ``assistant``) form a
tree by ``uuid`` / ``parentUuid``; what Claude Code writes, as read from its 2.1 bundle (the
transcript writer ``insertMessageChain`` and the loader that rebuilds a session on resume):

* one model response is written as one ``assistant`` record per content block (text, thinking,
  ``tool_use``), all with the same ``message.id``, each the parent of the next;
* each ``tool_result`` is a ``user`` record whose parent is the assistant record holding its
  ``tool_use`` (``sourceToolAssistantUUID``), so the results of parallel calls hang off
  different records of one response: Claude Code gathers them back by ``message.id``, and so
  does this reader;
* a ``system`` record with ``subtype`` ``compact_boundary`` starts a new chain after a
  compaction (``parentUuid`` null, ``logicalParentUuid`` the record before it), followed by a
  ``user`` record with ``isCompactSummary`` holding the summary: a boundary here, not a message;
* records of sub-agents carry ``isSidechain: true`` (older versions wrote them into the
  session's file; 2.1 writes each to ``<session id>/subagents/agent-<id>.jsonl``);
* a rewind (``/rewind``, editing an earlier prompt) branches the tree: the next records hang
  off an earlier one.

The reader replays the branch that reached the last conversation record of the main chain
(the sidechain when the file is a sub-agent's own), walking back through compaction
boundaries so the whole session is replayed. Everything else is skipped and counted: records
of other branches and sidechains, ``attachment``, ``progress``, ``system`` records other than
boundaries, the compaction summaries, the assistant messages Claude Code writes itself (model
``<synthetic>``: API errors), and the bookkeeping types (``summary``, ``last-prompt``,
``file-history-snapshot``, ``queue-operation``, ``custom-title``...); types not in
:data:`KNOWN_TYPES` are counted as unknown. Thinking blocks are not replayed (the API drops
them from later prompts). The system prompt is not in the transcript: ``system`` is "".
"""

from __future__ import annotations

from typing import Any

from veil.default_plugins.replay.trajectory import (
    Trajectory,
    TrajectoryBuilder,
    content_text,
    seconds,
)

CONVERSATION_TYPES = frozenset({"user", "assistant"})

SYNTHETIC_MODEL = "<synthetic>"
"""The ``model`` of assistant messages Claude Code writes itself (an API error, a placeholder):
never a model response, left out of later requests and of its own usage figures."""

KNOWN_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "attachment",
        "progress",
        "summary",
        "custom-title",
        "ai-title",
        "tag",
        "last-prompt",
        "file-history-snapshot",
        "queue-operation",
        "agent-name",
        "agent-color",
        "agent-setting",
        "mode",
        "permission-mode",
        "pr-link",
        "worktree-state",
        "relocated",
        "isolation-latch",
        "bridge-session",
        "attribution-snapshot",
        "content-replacement",
        "fork-context-ref",
        "marble-origami-commit",
        "marble-origami-snapshot",
        "marble-origami-reset",
        # written by later 2.1 versions (issue 31 saw them in 2.1.328, the agents' recordings
        # of issue 31 the last two in 2.1.332)
        "api-request",
        "api-request-blob",
        "cost-state",
        "tools-used",
        "api-request-shape",
        "atis-latch",
    }
)
"""Record types Claude Code 2.1 writes (its transcript loader's list, plus those issue 31 saw in
a later version). Any other type is counted as unknown."""


def looks_like(records: list[Any]) -> bool:
    """Whether parsed JSONL ``records`` are a Claude Code transcript: a ``user`` or
    ``assistant`` record with ``uuid`` and ``message``."""
    return any(
        isinstance(r, dict)
        and r.get("type") in CONVERSATION_TYPES
        and isinstance(r.get("uuid"), str)
        and isinstance(r.get("message"), dict)
        for r in records
    )


def _is_message(record: dict[str, Any]) -> bool:
    """A user or assistant record with its ``message``."""
    return record.get("type") in CONVERSATION_TYPES and isinstance(record.get("message"), dict)


def _is_boundary(record: dict[str, Any]) -> bool:
    return record.get("type") == "system" and record.get("subtype") == "compact_boundary"


def _message_id(record: dict[str, Any]) -> str | None:
    message = record.get("message")
    mid = message.get("id") if isinstance(message, dict) else None
    return mid if isinstance(mid, str) and mid else None


def _has_tool_result(record: dict[str, Any]) -> bool:
    content = record["message"].get("content") if isinstance(record.get("message"), dict) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def _chain(records: list[dict[str, Any]], main: list[int]) -> set[int]:
    """Line numbers of the records on the branch that reached the last conversation record
    of ``main`` (indices into ``records``), with the parallel tool results Claude Code
    gathers back by ``message.id``."""
    by_uuid = {records[i]["uuid"]: i for i in main}
    leaf = next((i for i in reversed(main) if _is_message(records[i])), None)
    chosen: set[int] = set()
    current = leaf
    while current is not None and current not in chosen:
        chosen.add(current)
        record = records[current]
        parent = record.get("parentUuid")
        if not parent and _is_boundary(record):
            parent = record.get("logicalParentUuid")  # through the compaction, to the start
        current = by_uuid.get(parent) if isinstance(parent, str) else None
    # One response's records share message.id; results hang off any of them.
    responses = {_message_id(records[i]) for i in chosen if records[i].get("type") == "assistant"}
    responses.discard(None)
    siblings = {
        i
        for i in main
        if records[i].get("type") == "assistant" and _message_id(records[i]) in responses
    }
    chosen |= siblings
    holders = {records[i]["uuid"] for i in siblings}
    chosen |= {
        i
        for i in main
        if records[i].get("type") == "user"
        and records[i].get("parentUuid") in holders
        and _has_tool_result(records[i])
    }
    return chosen


def read(path: str, records: list[Any]) -> Trajectory:
    """Read a Claude Code transcript's parsed records (see the module docstring)."""
    builder = TrajectoryBuilder(path, "claude-code")
    tally = builder.records
    usable: list[dict[str, Any]] = []
    for record in records:
        if not isinstance(record, dict):
            tally.skip("not an object", known=False)
            continue
        usable.append(record)
    # Every record with a uuid is a node of the tree (attachments, progress and system records
    # sit between messages); only user / assistant records and boundaries are replayed.
    tree = [i for i, r in enumerate(usable) if isinstance(r.get("uuid"), str)]
    main = [i for i in tree if not usable[i].get("isSidechain")]
    if not any(_is_message(usable[i]) for i in main):
        main = tree  # a sub-agent's own transcript: every record is on its sidechain
    chosen = _chain(usable, main)
    in_main = set(main)

    step_of_response: dict[str, int] = {}
    for i, record in enumerate(usable):
        kind = record.get("type")
        if not (_is_message(record) or _is_boundary(record)):
            known = isinstance(kind, str) and kind in KNOWN_TYPES
            tally.skip(kind if isinstance(kind, str) else "no type", known=known)
            continue
        if i not in chosen:
            tally.skip("other branch" if i in in_main else "sidechain")
            continue
        if _is_boundary(record):
            builder.boundary()
            continue
        message = record["message"]
        if kind == "assistant" and message.get("model") == SYNTHETIC_MODEL:
            tally.skip("synthetic assistant message")  # an API error Claude Code wrote itself
        elif kind == "assistant":
            _assistant(builder, record, message, step_of_response)
        elif record.get("isCompactSummary"):
            tally.skip("compact summary")  # the summary that replaced the history: a boundary
        elif record.get("isVisibleInTranscriptOnly"):
            tally.skip("transcript-only message")
        else:
            _user(builder, message)
    return builder.build()


def _usage_tokens(message: dict[str, Any]) -> int | None:
    """Prompt tokens of an Anthropic ``usage``: uncached + cache creation + cache read."""
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    parts = [
        usage.get(k)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    numbers = [p for p in parts if isinstance(p, int) and not isinstance(p, bool)]
    return sum(numbers) if numbers else None


def _assistant(
    builder: TrajectoryBuilder,
    record: dict[str, Any],
    message: dict[str, Any],
    step_of_response: dict[str, int],
) -> None:
    mid = _message_id(record)
    index = step_of_response.get(mid) if mid else None
    if index is None:
        index = builder.step(seconds(record.get("timestamp")), _usage_tokens(message))
        if mid:
            step_of_response[mid] = index
    content = message.get("content")
    if isinstance(content, str):
        builder.add(index, content)
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            builder.add(index, content_text(block))
        elif kind == "tool_use":
            call_id = block.get("id") if isinstance(block.get("id"), str) else ""
            builder.add(index, call=(call_id, str(block.get("name") or ""), block.get("input")))
        elif kind == "server_tool_use":  # run by the provider: its result is in this message
            name = str(block.get("name") or "")
            builder.add(index, call=("", name, block.get("input")), expects_result=False)
        # thinking / redacted_thinking: not replayed; images and results of server tools: no text


def _user(builder: TrajectoryBuilder, message: dict[str, Any]) -> None:
    content = message.get("content")
    if isinstance(content, str):
        builder.user(content)
        return
    texts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            if texts:
                builder.user("\n".join(texts))
                texts = []
            call_id = block.get("tool_use_id")
            builder.result(
                call_id if isinstance(call_id, str) else "", content_text(block.get("content"))
            )
        elif block.get("type") == "text":
            texts.append(content_text(block))
    if texts:
        builder.user("\n".join(t for t in texts if t))
