"""Page-in: an eviction pass re-selects the working set over the live items and the items
earlier passes evicted (``EvictionPlan.to_live``), and the session applies it."""

from __future__ import annotations

import numpy as np
from veil_fsrs.eviction import PAGED_IN, plan_eviction
from veil_fsrs.settings import FsrsContextSettings

from veil.core.prompt.items import ItemBatch
from veil.core.types import ContextItem

NOW = 1_750_000_000.0
STEP = 100


def _item(name: str, content: str, tokens: int, step: int = 10, **fields) -> ContextItem:
    return ContextItem(
        id=name,
        content=content,
        source=fields.pop("source", "tool_result"),
        kind="episodic",
        step=step,
        tokens=tokens,
        access_count=2,
        created_at=NOW,
        last_access=NOW,
        tool_call_id=fields.pop("tool_call_id", f"call_{name}"),
        **fields,
    )


def test_a_paged_out_group_with_new_names_replaces_a_duplicate():
    settings = FsrsContextSettings.model_validate({"pointerTokens": 14})
    # w: in the protected window (step 100), no identifiers. a and b hold the same two names;
    # p (evicted earlier, its 14-token stub in the prompt) holds three names the prompt lacks.
    w = _item("w", "hello world", 400, step=STEP, source="memory", tool_call_id=None)
    a = _item("a", "src/a.py alpha_one", 100)
    b = _item("b", "src/a.py alpha_one", 100)
    p = _item("p", "src/p.py pee_two pee_three", 50)
    used = 400 + 100 + 100 + 14  # 614 > budget 600: pressure at threshold 1.0
    result = plan_eviction(
        ItemBatch([w, a, b]),
        np.full(3, 0.5),
        600,
        used,
        settings=settings,
        threshold=1.0,
        current_step=STEP,
        now=NOW,
        pointer_tokens=14,
        paged_out=ItemBatch([p]),
        paged_scores=[0.5],
    )
    # Freed per live group 100 - 14 = 86; p adds 50 - 14 = 36. What stays whatever happens:
    # 614 - 2 x 86 = 442, so 158 tokens of room. Equal retention (factor 1.0): p's value is
    # 3 / (36 + 20), a's and b's 2 / (86 + 20): p first (room 122), then b, the newer of the
    # tie (room 36); a then adds no new name and does not fit: it leaves.
    assert result.to_live == ["p"]
    assert result.to_warm == ["a"]
    assert result.reasons == {"p": PAGED_IN, "a": "low score"}


def test_without_page_in_candidates_the_pass_only_evicts():
    settings = FsrsContextSettings.model_validate({"pointerTokens": 14})
    w = _item("w", "hello world", 400, step=STEP, source="memory", tool_call_id=None)
    a = _item("a", "src/a.py alpha_one", 100)
    b = _item("b", "src/a.py alpha_one", 100)
    result = plan_eviction(
        ItemBatch([w, a, b]),
        np.full(3, 0.5),
        600,
        600 + 14,
        settings=settings,
        threshold=1.0,
        current_step=STEP,
        now=NOW,
        pointer_tokens=14,
    )
    # 614 > 600: one group must go; the copy that adds nothing (a, the older) leaves.
    assert result.to_live == [] and result.to_warm == ["a"]
