"""Turn embeddings feed the eviction policy's rescue of old turns (seed 002: cosine > 0.7 with a
recent turn cuts an old turn's eviction score); veil_fsrs.turn_embeddings, kept in the eviction
plugin's per-session state by its hooks."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import veil_fsrs
import veil_fsrs.evict_plugin
from veil_fsrs.session_state import session_state

from veil.core.tiers import Tiers
from veil.core.turn import capture
from veil.core.types import CaptureEvent, EvictionPlan

DIM = 32
FSRS = (("veil_fsrs", veil_fsrs), ("veil_fsrs_evict", veil_fsrs.evict_plugin))


def bag_of_words(text: str) -> np.ndarray:
    """The fake model's vector, computed here independently: md5-hashed words, unit length."""
    out = np.zeros(DIM, dtype=np.float32)
    for word in text.lower().split():
        out[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
    return out / np.linalg.norm(out)


class FakeEmbedder:
    name = "test-bow-32"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.texts: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        if self.fail:
            raise RuntimeError("no model here")
        self.texts.extend(texts)
        return np.stack([bag_of_words(t) for t in texts])


def _open(make_veil, monkeypatch, mode: str, embedder: FakeEmbedder, **context):
    monkeypatch.setenv("VEIL_CONTEXT__RESCUE_EMBEDDINGS", mode)
    veil = make_veil(plugins=FSRS, settings={"context": context} if context else None)
    veil._tiers = Tiers(veil, embedder=embedder)
    return veil, veil.new_session()


def vectors(session) -> dict:
    """The turn vectors veil_fsrs keeps for ``session`` (item id -> vector)."""
    return session_state(session).turn_embeddings.vectors


def _turn(session, text: str, step: int):
    session.step = step
    idx = session.append({"role": "assistant", "content": text})
    msg = session.messages[idx]
    return capture(session, CaptureEvent("assistant", msg, step, message_index=idx))[0]


def _tool_result(session, text: str, step: int):
    session.step = step
    call = {"id": f"c{step}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    session.append({"role": "assistant", "content": "", "tool_calls": [call]})
    idx = session.append({"role": "tool", "tool_call_id": f"c{step}", "content": text})
    event = CaptureEvent(
        "tool_result",
        session.messages[idx],
        step,
        message_index=idx,
        tool_name="bash",
        tool_call_id=f"c{step}",
        arguments={"command": "ls"},
    )
    return capture(session, event)[0]


def test_nothing_is_embedded_before_the_first_eviction_then_every_turn_is(make_veil, monkeypatch):
    model = FakeEmbedder()
    veil, session = _open(make_veil, monkeypatch, "sync", model)
    first = _turn(session, "I will read src/config.py first", 1)
    result = _tool_result(session, "config.py settings.py", 2)
    assert vectors(session) == {} and model.texts == []  # no pressure yet: no model

    session.apply_eviction(EvictionPlan(to_warm=[result.id]))
    assert set(vectors(session)) == {first.id}  # the live turn, not the tool result
    np.testing.assert_allclose(vectors(session)[first.id], bag_of_words(first.content))

    later = _turn(session, "now patch parse_config", 3)
    np.testing.assert_allclose(vectors(session)[later.id], bag_of_words(later.content))
    assert model.texts == [first.content, later.content]  # each turn embedded once


def test_background_mode_fills_the_vectors_on_the_worker(make_veil, monkeypatch):
    veil, session = _open(make_veil, monkeypatch, "background", FakeEmbedder())
    turn = _turn(session, "the fix is in parse_config", 1)
    result = _tool_result(session, "ok", 2)
    session.apply_eviction(EvictionPlan(to_warm=[result.id]))
    session_state(session).turn_embeddings.wait(timeout=30)
    np.testing.assert_allclose(vectors(session)[turn.id], bag_of_words(turn.content))


def test_off_mode_and_a_failing_model_embed_nothing_and_capture_goes_on(make_veil, monkeypatch):
    veil, session = _open(make_veil, monkeypatch, "off", FakeEmbedder())
    _turn(session, "one turn", 1)
    result = _tool_result(session, "ok", 2)
    session.apply_eviction(EvictionPlan(to_warm=[result.id]))
    assert vectors(session) == {}

    veil, session = _open(make_veil, monkeypatch, "sync", FakeEmbedder(fail=True))
    _turn(session, "one turn", 1)
    result = _tool_result(session, "ok", 2)
    session.apply_eviction(EvictionPlan(to_warm=[result.id]))
    assert "no model here" in session_state(session).turn_embeddings.failed
    later = _turn(session, "another turn", 3)  # capture still works
    assert later.id in {i.id for i in session.live_items} and vectors(session) == {}


def test_an_old_turn_like_the_current_one_is_rescued_from_eviction(make_veil, monkeypatch):
    """Two old turns of the same kind and score: without the rescue the older one would leave
    first (ties go to the older group); it repeats the recent turn word for word (cosine 1), so
    its eviction score is cut to 0 and the other one leaves instead. This is the whole-item
    planner's rescue (``levels`` off): the levels planner gives a turn the recent one repeats word
    for word no value at all (the recent turn owns its names), and weighs the rescue through
    the retention multiplier instead (test_fsrs_levels)."""
    veil, session = _open(
        make_veil, monkeypatch, "sync", FakeEmbedder(), protected_turns=1, levels=False
    )
    # turns longer than a pointer stub (20 tokens), else evicting them frees nothing
    similar = _turn(session, "patch parse_config in src/config.py " * 8, 1)
    other = _turn(session, "looking at the readme wording again " * 8, 2)
    result = _tool_result(session, "x " * 50, 3)
    session.apply_eviction(EvictionPlan(to_warm=[result.id]))  # first pressure: start
    recent = _turn(session, "patch parse_config in src/config.py " * 8, 5)
    assert {similar.id, other.id, recent.id} <= set(vectors(session))

    items = session.live_items
    scores = np.full(len(items), 0.5)
    used = int(sum(i.tokens for i in items))
    plan = veil.pm.hook.evict(
        session=session,
        items=items,
        scores=scores,
        budget_tokens=used - 1,
        used_tokens=used,
        paged_out=None,
        paged_scores=None,
    )
    assert other.id in plan.to_warm and similar.id not in plan.to_warm

    monkeypatch.setattr(session_state(session).turn_embeddings, "vectors", {})
    plan = veil.pm.hook.evict(
        session=session,
        items=items,
        scores=scores,
        budget_tokens=used - 1,
        used_tokens=used,
        paged_out=None,
        paged_scores=None,
    )
    assert similar.id in plan.to_warm  # the control: without vectors the older turn goes


@pytest.mark.slow
def test_the_bundled_minilm_embeds_turns(make_veil, monkeypatch):
    """The real path: all-MiniLM-L6-v2 from the installed package, 384-d unit vectors."""
    from veil.core.models.embedder import EmbeddingUnavailableError, LocalEmbedder, local_model_dir

    try:
        local_model_dir()
    except EmbeddingUnavailableError as exc:  # pragma: no cover - a partial install
        pytest.skip(str(exc))
    monkeypatch.setenv("VEIL_CONTEXT__RESCUE_EMBEDDINGS", "sync")
    veil = make_veil(plugins=FSRS)
    veil._tiers = Tiers(veil, embedder=LocalEmbedder())
    session = veil.new_session()
    a = _turn(session, "The test fails because parse_config ignores the env file.", 1)
    result = _tool_result(session, "ok", 2)
    session.apply_eviction(EvictionPlan(to_warm=[result.id]))
    b = _turn(session, "parse_config does not read the env file, so the test fails.", 3)
    c = _turn(session, "Lunch menu: soup, bread and an apple.", 4)
    va, vb, vc = (np.asarray(vectors(session)[i.id]) for i in (a, b, c))
    assert va.shape == (384,) and abs(float(np.linalg.norm(va)) - 1.0) < 1e-4
    assert float(va @ vb) > 0.7 > float(va @ vc)


@pytest.mark.slow
def test_exit_while_embedding_waits_for_the_job_in_flight_and_drops_the_rest():
    """A daemon thread killed inside torch aborts the process ("terminate called without an
    active exception", exit status 134); veil's worker is stopped at exit instead."""
    import subprocess
    import sys

    code = (
        "import time\n"
        "from veil_fsrs import turn_embeddings as te\n"
        "from veil.core.models.embedder import LocalEmbedder\n"
        "e = LocalEmbedder()\n"
        "e._load()\n"
        "for _ in range(200):\n"
        "    te._submit(lambda: e.encode(['a longer sentence about parse_config'] * 32))\n"
        "time.sleep(0.3)\n"
        "print('exiting', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "terminate called" not in proc.stderr and "exiting" in proc.stdout


def test_capture_records_the_identifiers_of_each_item(make_veil, monkeypatch):
    """ContextItem.identifiers (for coverage-aware eviction) is filled at capture with the
    DESIGN.md "Measures" identifier shape, computed here by hand."""
    veil, session = _open(make_veil, monkeypatch, "off", FakeEmbedder())
    turn = _turn(session, "I will patch parse_config in src/app/config.py at line 1234", 1)
    result = _tool_result(session, "FAILED tests/test_config.py::test_env - KeyError", 2)
    assert turn.identifiers == {"parse_config", "src/app/config.py", "1234"}
    # "FAILED" and "KeyError" hold capitals after their first letter: identifiers too
    assert result.identifiers == {"FAILED", "tests/test_config.py", "test_env", "KeyError"}
