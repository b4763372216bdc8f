"""Context routes: a session's live / warm / cold items with scores, recall, pin / unpin.

Scores come from :meth:`veil.core.app.Veil.score_items` (front ends call the core, never a
plugin): the answering ``score`` implementation (the FSRS scorer by default), computed the way the
loop computes them before a model call, over the live items, with the task tags of the latest
user message, at the current time; the signals behind each score are that scorer's own
``score_signals``. Warm and cold items are not in the prompt, so they carry no score.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from veil import ContextItem
from veil_http.api import Operation, answer, operation, parse_body, parse_query
from veil_http.errors import ItemNotFound, jsonable
from veil_http.schemas import ContextOut, ContextQuery, HitOut, ItemOut, RecallBody, RecallOut
from veil_http.sessions import veil_of

TAG = "context"
TIERS = ("live", "warm", "cold")


def item_out(
    item: ContextItem, score: float | None = None, signals: dict[str, float] | None = None
) -> ItemOut:
    """An :class:`ItemOut` from a :class:`ContextItem` (a non-finite score or signal becomes
    None)."""
    if score is not None and not math.isfinite(score):
        score = None
    if signals is not None:
        signals = {k: (v if math.isfinite(v) else None) for k, v in signals.items()}
    return ItemOut(
        id=item.id,
        tier=item.tier,
        kind=item.kind,
        source=item.source,
        content=item.content,
        tokens=max(0, int(item.tokens)),
        tags=list(item.tags),
        targets=list(item.targets),
        step=item.step,
        message_index=item.message_index,
        tool_call_id=item.tool_call_id,
        access_count=max(0, int(item.access_count)),
        stability=item.stability,
        difficulty=item.difficulty,
        created_at=item.created_at,
        last_access=item.last_access,
        cognitive_weight=item.cognitive_weight,
        pinned=item.pinned,
        loaded_by_hand=item.loaded_by_hand,
        outcome=item.outcome,
        score=score,
        signals=signals,
    )


def live_scores(
    veil: Any, session: Any, live: list[ContextItem]
) -> tuple[dict[str, float] | None, dict[str, dict[str, float]]]:
    """``({item id: score}, {item id: {signal: value}})`` of the live items; the scores are
    None when no scorer is loaded (or none answered), the signals empty when the scorer does
    not explain itself."""
    scored = veil.score_items(session, live)
    if scored is None or scored.scores is None:
        return None, {}
    scores = {item.id: value for item, value in zip(scored.items, scored.scores, strict=True)}
    signals: dict[str, dict[str, float]] = {}
    for name, values in scored.signals.items():
        for item, value in zip(scored.items, values, strict=True):
            signals.setdefault(item.id, {})[name] = value
    return scores, signals


def _context(veil: Any, session_id: str, tier: str | None) -> ContextOut:
    session = veil.load_session(session_id)
    items = veil.stored_items(session_id, (tier,) if tier else TIERS)
    live = [i for i in items if i.tier == "live"]
    scores, signals = live_scores(veil, session, live)
    return ContextOut(
        session_id=session_id,
        context_layer=veil.context_layer_on,
        scored=scores is not None,
        counts=veil.tier_counts(session_id),
        live_tokens=sum(max(0, int(i.tokens)) for i in live),
        items=[item_out(i, (scores or {}).get(i.id), signals.get(i.id)) for i in items],
    )


async def get_context(request: Request) -> Response:
    """A session's context items by tier, live ones with their retention scores."""
    query = parse_query(request, ContextQuery)
    out = await run_in_threadpool(
        _context, veil_of(request), request.path_params["session_id"], query.tier
    )
    return answer(request, out)


def _recall(veil: Any, session_id: str, body: RecallBody) -> RecallOut:
    session = veil.load_session(session_id)
    hits = veil.recall(body.query, body.limit, body.tags, session=session)
    return RecallOut(
        session_id=session_id,
        query=body.query,
        hits=[
            HitOut(
                id=h.id,
                content=h.content,
                score=h.score if math.isfinite(h.score) else 0.0,
                source=h.source,
                meta=jsonable(dict(h.meta or {})),
            )
            for h in hits
        ],
    )


async def recall(request: Request) -> Response:
    """Candidates for a query from every ``recall`` implementation (memory files, warm and cold
    tiers...), merged and best first."""
    body = await parse_body(request, RecallBody, required=True)
    out = await run_in_threadpool(
        _recall, veil_of(request), request.path_params["session_id"], body
    )
    return answer(request, out)


def _set_pinned(veil: Any, session_id: str, item_id: str, pinned: bool) -> ItemOut:
    """Pin or unpin one of the session's items the way the ``veil_pin`` tool does
    (:func:`veil.context_ops.set_pinned`: pinning a warm or cold item brings it live;
    the change is logged), under the session's lock."""
    from veil import context_ops

    with veil.session_lock(session_id):
        session = veil.load_session(session_id)
        session.ensure_open()
        if veil.stored_item(session_id, item_id) is None:
            raise ItemNotFound(f"no item {item_id!r} in session {session_id}")
        item = context_ops.set_pinned(session, item_id, pinned)
        session.save_state()  # plugins may have noted the access (item_accessed)
        return item_out(item)


async def pin_item(request: Request) -> Response:
    """Pin an item: protected from eviction and boosted by the scorer."""
    out = await run_in_threadpool(
        _set_pinned,
        veil_of(request),
        request.path_params["session_id"],
        request.path_params["item_id"],
        True,
    )
    return answer(request, out)


async def unpin_item(request: Request) -> Response:
    """Remove an item's pin."""
    out = await run_in_threadpool(
        _set_pinned,
        veil_of(request),
        request.path_params["session_id"],
        request.path_params["item_id"],
        False,
    )
    return answer(request, out)


def operations() -> list[Operation]:
    """The context routes of the table."""
    sid = "/sessions/{session_id}"
    return [
        operation(
            "GET",
            f"{sid}/context",
            get_context,
            tag=TAG,
            query=ContextQuery,
            response=ContextOut,
            errors=(422,),
            summary="List a session's live / warm / cold items with scores and signals",
        ),
        operation(
            "POST",
            f"{sid}/recall",
            recall,
            tag=TAG,
            body=RecallBody,
            response=RecallOut,
            summary="Search the context that left the prompt (warm and cold items, memory "
            "plugins), best first; live items are already in the prompt",
        ),
        operation(
            "POST",
            f"{sid}/items/{{item_id}}/pin",
            pin_item,
            tag=TAG,
            response=ItemOut,
            errors=(400, 409),
            summary="Pin a context item",
        ),
        operation(
            "POST",
            f"{sid}/items/{{item_id}}/unpin",
            unpin_item,
            tag=TAG,
            response=ItemOut,
            errors=(400, 409),
            summary="Unpin a context item",
        ),
    ]
