"""The twelve memory tools the model can call (seed 002; DESIGN.md "Tool names").

veil_recall, veil_promote, veil_demote, veil_remember, veil_pin, veil_unpin, veil_forget,
veil_hydrate, veil_history, veil_turn_meta, veil_conflicts, veil_resolve_conflict. Each takes a
JSON object (schemas below) and answers in plain text the model can read; bad arguments come back
as an error result naming the field. They act through :mod:`veil.core.context_ops`.
"""

from __future__ import annotations

from typing import Any

from veil import (
    ITEM_KINDS,
    BadRequest,
    Tool,
    ToolContext,
    ToolResult,
    extract_tags,
    extract_targets,
)


class _ContextOps:
    """:mod:`veil.context_ops`, imported at the first memory tool call: it brings numpy,
    which a project opened for a REPL prompt or ``veil plugins`` does not need yet (issue 30)."""

    def __getattr__(self, name: str) -> Any:
        from veil import context_ops

        return getattr(context_ops, name)


ops = _ContextOps()

TURN_KINDS = ("decision", "exploration", "action", "status", "correction", "intent")


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


_ID = {"type": "string", "description": "item id (item_...) as shown in a pointer or a recall hit"}


def _str(args: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{name}: expected a non-empty string")
    return value.strip()


def _int(args: dict[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadRequest(f"{name}: expected an integer from {lo} to {hi}")
    return value


def _tags(args: dict[str, Any]) -> list[str] | None:
    tags = args.get("tags")
    if tags is None:
        return None
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise BadRequest("tags: expected a list of strings")
    return [t.lower() for t in tags]


def recall(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_recall: hybrid search of stored context and memory; hits with ids and previews. Raises BadRequest naming a bad field."""
    query = _str(args, "query")
    hits = ctx.session.veil.recall(query, _int(args, "limit", 5, 1, 50), _tags(args), ctx.session)
    if not hits:
        return ToolResult(f"no stored context matches {query!r}")
    lines = [f"{len(hits)} match(es) for {query!r} (veil_hydrate an item id to load it whole):"]
    for hit in hits:
        preview = " ".join(hit.content.split())[:300]
        lines.append(f"- {hit.id} [{hit.source}, score {hit.score:.2f}] {preview}")
    return ToolResult("\n".join(lines))


def hydrate(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_hydrate: bring the item behind a pointer back into the prompt; returns its content. Raises BadRequest naming a bad field."""
    item = ops.hydrate(ctx.session, _str(args, "pointer"))
    return ToolResult(f"{item.id} is loaded again ({item.tokens} tokens):\n{item.content}")


def promote(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_promote: make an item live and loaded by hand (Easy recall). Raises BadRequest naming a bad field."""
    item = ops.promote(ctx.session, _str(args, "id"))
    return ToolResult(
        f"{item.id} promoted: live, loaded by hand, stability {item.stability:.3f} days"
    )


def demote(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_demote: move an item out of the prompt to ``warm`` (default) or ``cold``. Raises BadRequest naming a bad field."""
    tier = args.get("tier", "warm")
    if tier not in ("warm", "cold"):
        raise BadRequest("tier: expected 'warm' or 'cold'")
    item = ops.demote(ctx.session, _str(args, "id"), tier)
    return ToolResult(f"{item.id} moved to {tier}; a pointer stays in the prompt")


def remember(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_remember: store new content of a kind (default ``fact``; facts become beliefs). Raises BadRequest naming a bad field."""
    kind = args.get("kind", "fact")
    if kind not in ITEM_KINDS:
        raise BadRequest(f"kind: expected one of {', '.join(ITEM_KINDS)}")
    content = _str(args, "content")
    # tags and targets from the text as it will be stored (redacted): a credential never
    # becomes a tag; the given tags plus the text's own words
    stored = ctx.session.veil.redactor.text(content)
    item = ops.remember(
        ctx.session,
        content,
        kind,
        sorted(set(_tags(args) or []) | set(extract_tags(stored))),
        tool_call_id=ctx.tool_call_id,
        targets=extract_targets(stored),
        source="veil_remember",
    )
    return ToolResult(f"remembered as {item.id} ({kind})")


def pin(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_pin: keep an item in the prompt (never evicted while pinned). Raises BadRequest naming a bad field."""
    item = ops.set_pinned(ctx.session, _str(args, "id"), True)
    return ToolResult(f"{item.id} pinned: it stays in the prompt until unpinned")


def unpin(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_unpin: remove an item's pin. Raises BadRequest naming a bad field."""
    item = ops.set_pinned(ctx.session, _str(args, "id"), False)
    return ToolResult(f"{item.id} unpinned")


def forget(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_forget: take an item out of the prompt and of recall (kept in the store and log). Raises BadRequest naming a bad field."""
    item = ops.forget(ctx.session, _str(args, "id"))
    return ToolResult(f"{item.id} forgotten: out of the prompt and of recall (the log keeps it)")


def history(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_history: search the project's full message history of the last ``days`` days. Raises BadRequest naming a bad field."""
    query = _str(args, "query")
    days = args.get("days", 30)
    if isinstance(days, bool) or not isinstance(days, (int, float)) or days <= 0:
        raise BadRequest("days: expected a positive number")
    rows = ops.search_history(ctx.session, query, float(days), limit=_int(args, "limit", 10, 1, 50))
    if not rows:
        return ToolResult(f"nothing in the last {days} days of history matches {query!r}")
    lines = [f"{len(rows)} message(s) matching {query!r}:"]
    for r in rows:
        lines.append(
            f"- {r['when']} session {r['session_id']} #{r['idx']} {r['role']}: {r['preview']}"
        )
    return ToolResult("\n".join(lines))


def turn_meta(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_turn_meta: relabel the current turn's kind (decision, exploration, ...). Raises BadRequest naming a bad field."""
    kind = args.get("kind")
    if kind not in TURN_KINDS:
        raise BadRequest(f"kind: expected one of {', '.join(TURN_KINDS)}")
    n = ops.set_turn_kind(ctx.session, kind)
    return ToolResult(f"current turn marked as {kind} ({n} item(s))")


def conflicts(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_conflicts: list open belief conflicts with provenance (or say there are none). Raises BadRequest naming a bad field."""
    found = ops.open_conflicts(ctx.session)
    if not found:
        return ToolResult("no open conflicts between beliefs")
    lines = [f"{len(found)} open conflict(s); settle each with veil_resolve_conflict:"]
    for c in found:
        lines.append(f"- {c['id']}: {c['subject']}")
        for b in c["beliefs"]:
            lines.append(
                f"    {b['id']}: {b['statement']} (session {b['session_id']}, "
                f"tool call {b['tool_call_id'] or '-'}, {b['when']})"
            )
    return ToolResult("\n".join(lines))


def resolve_conflict(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """veil_resolve_conflict: keep one belief of a conflict; retract the others. Raises BadRequest naming a bad field."""
    out = ops.resolve_conflict(ctx.session, _str(args, "conflict_id"), _str(args, "keep"))
    return ToolResult(out)


def memory_tools() -> list[Tool]:
    """The twelve tools, with JSON schemas (OpenAI function parameters). Each declares the
    effect ``"memory"`` (:attr:`~veil.core.types.Tool.effect`): it reads or changes only veil's
    store, so, registered by this default plugin, it is never asked."""
    q = {"type": "string", "description": "what to look for"}
    tools = [
        Tool(
            "veil_recall",
            "Search context that left the prompt (warm and cold stores, memory files) by meaning and keywords.",
            _schema(
                {
                    "query": q,
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                },
                ["query"],
            ),
            recall,
        ),
        Tool(
            "veil_promote",
            "Bring an item back into the prompt and mark it important (loaded by hand).",
            _schema({"id": _ID}, ["id"]),
            promote,
        ),
        Tool(
            "veil_demote",
            "Move an item out of the prompt now (to warm, or cold); a pointer stays.",
            _schema({"id": _ID, "tier": {"type": "string", "enum": ["warm", "cold"]}}, ["id"]),
            demote,
        ),
        Tool(
            "veil_remember",
            "Store a fact, decision or procedure so it can be recalled later.",
            _schema(
                {
                    "content": {"type": "string"},
                    "kind": {"type": "string", "enum": list(ITEM_KINDS)},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                ["content"],
            ),
            remember,
        ),
        Tool(
            "veil_pin",
            "Keep an item in the prompt: pinned items are never evicted.",
            _schema({"id": _ID}, ["id"]),
            pin,
        ),
        Tool("veil_unpin", "Remove the pin from an item.", _schema({"id": _ID}, ["id"]), unpin),
        Tool(
            "veil_forget",
            "Drop an item from the prompt and from recall (the event log keeps it).",
            _schema({"id": _ID}, ["id"]),
            forget,
        ),
        Tool(
            "veil_hydrate",
            "Load the full content behind a pointer stub ([evicted ... #N] or [cold ... item_...]).",
            _schema(
                {
                    "pointer": {
                        "type": "string",
                        "description": "the stub's handle (#17) or an item id (item_...)",
                    }
                },
                ["pointer"],
            ),
            hydrate,
            loads_pointers=True,  # the core's pointer texts name this tool
        ),
        Tool(
            "veil_history",
            "Search the full message history of this project's sessions.",
            _schema(
                {
                    "query": q,
                    "days": {"type": "number", "exclusiveMinimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                },
                ["query"],
            ),
            history,
        ),
        Tool(
            "veil_turn_meta",
            "Say what kind of turn this is, so eviction weighs it right.",
            _schema({"kind": {"type": "string", "enum": list(TURN_KINDS)}}, ["kind"]),
            turn_meta,
        ),
        Tool(
            "veil_conflicts",
            "List beliefs that contradict each other, with where each came from.",
            _schema({}, []),
            conflicts,
        ),
        Tool(
            "veil_resolve_conflict",
            "Settle a conflict: keep one belief; the others are retracted (not deleted).",
            _schema(
                {
                    "conflict_id": {"type": "string"},
                    "keep": {"type": "string", "description": "id of the belief to keep"},
                },
                ["conflict_id", "keep"],
            ),
            resolve_conflict,
        ),
    ]
    for tool in tools:
        tool.effect = "memory"
    return tools
