"""Context routes: items by tier with scores, recall, pin / unpin."""

from __future__ import annotations

import numpy as np
from veil_http.testing import assert_error

from veil.core.types import ContextItem, EvictionPlan, RecallHit
from veil.hookspecs import hookimpl


class _CaptureMessages:
    """Turns each user message and each answer into one item (kind by role)."""

    @hookimpl
    def capture(self, session, event):
        if event.phase not in ("user", "assistant"):
            return None
        text = event.message.get("content") or ""
        return [
            ContextItem(
                content=text,
                kind="intent" if event.phase == "user" else "episodic",
                source=event.phase,
                tags=["fake", *text.lower().split()],
                tokens=len(text),
            )
        ]


class _RankScorer:
    """Scores item i as 0.1 * (i + 1); remembers the task tags and time it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, frozenset[str], float]] = []

    @hookimpl
    def score(self, session, items, task_tags, now):
        self.calls.append((len(items), task_tags, now))
        return np.arange(1, len(items) + 1, dtype=np.float64) * 0.1


class _ExplainedScorer(_RankScorer):
    """The rank scorer, explained by two signals: ``rank`` = the score, ``half`` = half of it."""

    @hookimpl
    def score_signals(self, session, items, task_tags, now):
        rank = np.arange(1, len(items) + 1, dtype=np.float64) * 0.1
        return {"rank": rank, "half": rank / 2}


class _NeverEvict:
    @hookimpl
    def evict(self, session, items, scores, budget_tokens, used_tokens):
        return EvictionPlan()


def test_context_lists_tiers_with_scores_of_live_items(make_client, make_veil):
    scorer = _RankScorer()
    veil = make_veil(
        plugins=[("cap", _CaptureMessages()), ("scorer", scorer), ("evict", _NeverEvict())]
    )
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"content": "inspect parser module"})
    client.post(f"/sessions/{sid}/messages", json={"content": "deploy the service"})
    items = veil.store.items(sid, ("live",))
    mine = [i for i in items if i.tags[:1] == ["fake"]]
    assert [i.content for i in mine] == [
        "inspect parser module",
        "echo: inspect parser module",
        "deploy the service",
        "echo: deploy the service",
    ]
    veil.store.set_tier([mine[0].id], "warm")
    veil.store.set_tier([mine[1].id], "cold")
    live = veil.store.items(sid, ("live",))

    scorer.calls.clear()
    r = client.get(f"/sessions/{sid}/context")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["sessionId"] == sid
    assert body["contextLayer"] is True and body["scored"] is True
    assert body["counts"] == {"live": len(items) - 2, "warm": 1, "cold": 1}
    assert body["liveTokens"] == sum(i.tokens for i in live)
    assert len(body["items"]) == len(items)
    by_id = {i["id"]: i for i in body["items"]}
    assert by_id[mine[0].id]["tier"] == "warm" and by_id[mine[0].id]["score"] is None
    assert by_id[mine[1].id]["tier"] == "cold" and by_id[mine[1].id]["score"] is None
    # live item number k (in store order) scores 0.1 * (k + 1)
    for k, item in enumerate(live):
        assert abs(by_id[item.id]["score"] - 0.1 * (k + 1)) < 1e-12
        assert by_id[item.id]["tier"] == "live"
    assert by_id[mine[2].id]["kind"] == "intent" and by_id[mine[2].id]["source"] == "user"
    assert by_id[mine[3].id]["tags"] == ["fake", "echo:", "deploy", "the", "service"]
    assert by_id[mine[3].id]["content"] == "echo: deploy the service"
    # scored like the loop: the live items only, with the tags of the latest user message
    assert scorer.calls[0][0] == len(live)
    assert scorer.calls[0][1] == frozenset({"deploy", "service"})

    live_only = client.get(f"/sessions/{sid}/context", params={"tier": "live"}).json()
    assert [i["id"] for i in live_only["items"]] == [i.id for i in live]
    cold_only = client.get(f"/sessions/{sid}/context", params={"tier": "cold"}).json()
    assert [i["id"] for i in cold_only["items"]] == [mine[1].id]


def test_context_items_carry_the_signals_behind_their_scores(make_client, make_veil):
    veil = make_veil(
        plugins=[
            ("cap", _CaptureMessages()),
            ("scorer", _ExplainedScorer()),
            ("evict", _NeverEvict()),
        ]
    )
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"content": "inspect parser module"})
    live = veil.store.items(sid, ("live",))
    assert len(live) >= 2
    body = client.get(f"/sessions/{sid}/context").json()
    by_id = {i["id"]: i for i in body["items"]}
    for k, item in enumerate(live):
        signals = by_id[item.id]["signals"]
        assert set(signals) == {"rank", "half"}
        assert abs(signals["rank"] - 0.1 * (k + 1)) < 1e-12
        assert abs(signals["half"] - 0.05 * (k + 1)) < 1e-12


def test_context_with_the_fsrs_scorer_shows_its_five_signals(make_client, make_veil):
    import veil_fsrs
    import veil_fsrs.evict_plugin

    veil = make_veil(
        plugins=[("veil_fsrs", veil_fsrs), ("veil_fsrs_evict", veil_fsrs.evict_plugin)]
    )
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"content": "inspect parser module"})
    items = client.get(f"/sessions/{sid}/context").json()["items"]
    live = [i for i in items if i["tier"] == "live"]
    assert live
    for item in live:
        assert set(item["signals"]) == {
            "recency",
            "frequency",
            "relevance",
            "structure",
            "cognitive",
        }
        assert all(0.0 <= v <= 1.0 for v in item["signals"].values())


def test_context_shows_only_the_answering_scorers_signals(make_client, make_veil):
    """A scorer that explains nothing, called before FSRS: FSRS's signals must not sit beside
    scores FSRS did not make (the route asks the core, which asks the answering scorer)."""
    import veil_fsrs
    import veil_fsrs.evict_plugin

    class Shortest:
        @hookimpl
        def score(self, session, items, task_tags, now):
            return [1.0 / (1 + i.tokens) for i in items]

    veil = make_veil(
        plugins=[
            ("veil_fsrs", veil_fsrs),
            ("veil_fsrs_evict", veil_fsrs.evict_plugin),
            ("shortest", Shortest()),  # registered last: pluggy calls it first
        ]
    )
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"content": "inspect parser module"})
    body = client.get(f"/sessions/{sid}/context").json()
    live = [i for i in body["items"] if i["tier"] == "live"]
    assert live and body["scored"] is True
    for item in live:
        assert item["score"] == 1.0 / (1 + item["tokens"])
        assert item["signals"] is None


def test_context_without_scorer_has_no_scores(make_client, make_veil):
    veil = make_veil(plugins=[("cap", _CaptureMessages())])
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"content": "hello"})
    body = client.get(f"/sessions/{sid}/context").json()
    assert body["contextLayer"] is False and body["scored"] is False
    assert len(body["items"]) >= 2
    assert {i["score"] for i in body["items"]} == {None}
    assert {i["signals"] is None for i in body["items"]} == {True}


class _TwoStores:
    """Two recall implementations answering overlapping candidates."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, list[str] | None, str | None]] = []

    @hookimpl
    def recall(self, session, query, limit, tags):
        self.seen.append((query, limit, tags, session.id if session else None))
        return [
            RecallHit("a", "alpha", 0.4, "memory"),
            RecallHit("b", "beta", 0.9, "memory", meta={"file": "MEMORY.md"}),
        ]


class _OtherStore:
    @hookimpl
    def recall(self, session, query, limit, tags):
        return [RecallHit("a", "alpha", 0.7, "warm"), RecallHit("c", "gamma", 0.1, "cold")]


def test_recall_merges_and_ranks(make_client, make_veil):
    store = _TwoStores()
    client, _ = make_client(make_veil(plugins=[("one", store), ("two", _OtherStore())]))
    sid = client.post("/sessions").json()["id"]
    r = client.post(f"/sessions/{sid}/recall", json={"query": "port", "limit": 2, "tags": ["x"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["sessionId"] == sid and body["query"] == "port"
    assert [(h["id"], h["score"], h["source"]) for h in body["hits"]] == [
        ("b", 0.9, "memory"),
        ("a", 0.7, "warm"),
    ]
    assert body["hits"][0]["meta"] == {"file": "MEMORY.md"}
    assert store.seen == [("port", 2, ["x"], sid)]
    # default limit 10 returns all three
    assert len(client.post(f"/sessions/{sid}/recall", json={"query": "p"}).json()["hits"]) == 3


def test_pin_and_unpin_update_the_store_and_log_events(make_client, make_veil):
    veil = make_veil(plugins=[("cap", _CaptureMessages())])
    client, _ = make_client(veil)
    sid = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{sid}/messages", json={"content": "remember this"})
    item = next(i for i in veil.store.items(sid) if i.content == "remember this")
    assert item.pinned is False

    before = [i.id for i in veil.store.items(sid)]
    r = client.post(f"/sessions/{sid}/items/{item.id}/pin")
    assert r.status_code == 200, r.text
    assert r.json()["pinned"] is True and r.json()["id"] == item.id
    assert veil.store.get_item(item.id).pinned is True
    # order of items is unchanged by the update
    assert [i.id for i in veil.store.items(sid)] == before
    listed = client.get(f"/sessions/{sid}/context").json()["items"]
    assert {i["id"]: i["pinned"] for i in listed}[item.id] is True

    assert client.post(f"/sessions/{sid}/items/{item.id}/unpin").json()["pinned"] is False
    assert veil.store.get_item(item.id).pinned is False
    kinds = [(e["kind"], e["payload"]["item"]) for e in veil.store.events(sid, ("pin", "unpin"))]
    assert kinds == [("pin", item.id), ("unpin", item.id)]

    # pinning an item that left the prompt brings it back live (as the veil_pin tool does)
    veil.store.update_item(item.id, tier="warm")
    r = client.post(f"/sessions/{sid}/items/{item.id}/pin")
    assert r.json()["tier"] == "live" and r.json()["pinned"] is True
    stored = veil.store.get_item(item.id)
    assert (stored.tier, stored.pinned, stored.access_count) == ("live", True, 1)


def test_pin_errors(make_client, make_veil):
    veil = make_veil(plugins=[("cap", _CaptureMessages())])
    client, _ = make_client(veil)
    a = client.post("/sessions").json()["id"]
    b = client.post("/sessions").json()["id"]
    client.post(f"/sessions/{a}/messages", json={"content": "only in a"})
    item = veil.store.items(a)[0]
    assert_error(client.post(f"/sessions/{a}/items/item_nope/pin"), 404, "ITEM_NOT_FOUND")
    err = assert_error(client.post(f"/sessions/{b}/items/{item.id}/pin"), 404, "ITEM_NOT_FOUND")
    assert b in err["message"]
    client.post(f"/sessions/{a}/close")
    assert_error(client.post(f"/sessions/{a}/items/{item.id}/pin"), 400, "SESSION_CLOSED")
    assert veil.store.get_item(item.id).pinned is False
