"""Requests on one session are serialised; on different sessions they run side by side, without
``database is locked`` errors."""

from __future__ import annotations

import asyncio

import httpx
from veil_http import create_app

DELAY = 0.15  # seconds each model answer takes, so turns overlap when they may


async def _post_all(app, requests: list[tuple[str, dict]]) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1:5051", timeout=60
    ) as client:
        return await asyncio.gather(*(client.post(p, json=b) for p, b in requests))


def _sessions(app, n: int) -> list[str]:
    async def create() -> list[str]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5051") as c:
            return [(await c.post("/sessions")).json()["id"] for _ in range(n)]

    return asyncio.run(create())


def test_different_sessions_run_in_parallel(make_veil):
    veil = make_veil(delay=DELAY)
    app = create_app(veil)
    ids = _sessions(app, 6)
    responses = asyncio.run(
        _post_all(
            app,
            [(f"/sessions/{sid}/messages", {"content": f"task {n}"}) for n, sid in enumerate(ids)],
        )
    )
    assert [r.status_code for r in responses] == [200] * 6, [r.text for r in responses]
    assert [r.json()["final"] for r in responses] == [f"echo: task {n}" for n in range(6)]
    assert veil.model.max_active >= 2  # the turns overlapped
    for sid in ids:
        assert [m["role"] for _, m in veil.store.messages(sid)] == ["user", "assistant"]


def test_one_session_is_serialised(make_veil):
    veil = make_veil(delay=DELAY)
    app = create_app(veil)
    (sid,) = _sessions(app, 1)
    texts = [f"step {n}" for n in range(4)]
    responses = asyncio.run(
        _post_all(app, [(f"/sessions/{sid}/messages", {"content": t}) for t in texts])
    )
    assert [r.status_code for r in responses] == [200] * 4
    assert veil.model.max_active == 1  # never two turns of one session at once
    history = [m for _, m in veil.store.messages(sid)]
    assert len(history) == 8
    # each user message is directly followed by its own answer: no interleaving
    for user, answer in zip(history[::2], history[1::2], strict=True):
        assert user["role"] == "user" and answer["content"] == "echo: " + user["content"]
    assert sorted(m["content"] for m in history[::2]) == texts
    counts = sorted(r.json()["session"]["messageCount"] for r in responses)
    assert counts == [2, 4, 6, 8]


def test_mixed_reads_and_writes_under_load(make_veil):
    veil = make_veil(delay=0.02)
    app = create_app(veil)
    ids = _sessions(app, 4)

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:5051", timeout=60
        ) as c:
            calls = []
            for n in range(5):
                for sid in ids:
                    calls.append(c.post(f"/sessions/{sid}/messages", json={"content": f"m{n}"}))
                    calls.append(c.get(f"/sessions/{sid}/context"))
                    calls.append(c.get("/sessions"))
            calls.append(c.post("/sessions"))
            return await asyncio.gather(*calls)

    responses = asyncio.run(run())
    bad = [(r.status_code, r.text) for r in responses if r.status_code >= 300]
    assert bad == []
    assert all("database is locked" not in r.text for r in responses)
    for sid in ids:
        assert len(veil.store.messages(sid)) == 10
