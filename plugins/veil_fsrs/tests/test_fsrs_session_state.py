"""veil_fsrs' per-session state (veil_fsrs.session_state): identifier mention counts and turn
embeddings live in the eviction plugin's own namespace (``session.plugin_state``), kept by its
hooks (session_start, items_added, after_eviction, before_close); a session without the plugin
computes neither."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
import veil_fsrs
import veil_fsrs.evict_plugin
from veil_fsrs.session_state import PLUGIN_NAME, session_state

from veil.core import context_ops
from veil.core.tiers import Tiers
from veil.core.turn import capture
from veil.core.types import CaptureEvent, ContextItem, EvictionPlan, ToolResult

FSRS = (("veil_fsrs", veil_fsrs), ("veil_fsrs_evict", veil_fsrs.evict_plugin))
DIM = 16


def bag_of_words(text: str) -> np.ndarray:
    """The fake model's vector, computed here independently: md5-hashed words, unit length."""
    out = np.zeros(DIM, dtype=np.float32)
    for word in text.lower().split():
        out[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
    return out / np.linalg.norm(out)


class RecordingEmbedder:
    """Embeds by bag of words and records every text it was asked for; ``gate`` (when given)
    holds each call until the test sets it."""

    name = "test-bow-16"

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.texts: list[str] = []
        self.gate = gate
        self.started = threading.Event()
        self.finished = threading.Event()

    def encode(self, texts: list[str]) -> np.ndarray:
        self.started.set()
        if self.gate is not None:
            self.gate.wait(30)
        self.texts.extend(texts)
        self.finished.set()
        return np.stack([bag_of_words(t) for t in texts])


def _open(make_veil, monkeypatch, embedder, mode: str = "sync", **kwargs):
    monkeypatch.setenv("VEIL_CONTEXT__RESCUE_EMBEDDINGS", mode)
    veil = make_veil([], **kwargs)
    veil._tiers = Tiers(veil, embedder=embedder)
    return veil


def _turn(session, text: str, step: int) -> ContextItem:
    session.step = step
    idx = session.append({"role": "assistant", "content": text})
    msg = session.messages[idx]
    return capture(session, CaptureEvent("assistant", msg, step, message_index=idx))[0]


def _tool_result(session, text: str, step: int, name: str = "read") -> ContextItem:
    session.step = step
    call_id = f"c{step}"
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    session.append({"role": "assistant", "content": "", "tool_calls": [call]})
    tool_msg = {"role": "tool", "tool_call_id": call_id, "content": text}
    idx = session.append(tool_msg)
    event = CaptureEvent(
        "tool_result",
        tool_msg,
        step,
        message_index=idx,
        tool_name=name,
        tool_call_id=call_id,
        result=ToolResult(text),
    )
    return capture(session, event)[0]


def _session_with_results(veil, count: int):
    session = veil.new_session()
    for n in range(count):
        _tool_result(session, f"contents of src/mod_{n}.py: def func_{n}(): pass", n + 1)
    return session


def mentions(session):
    """The identifier counts veil_fsrs keeps for ``session``."""
    return session_state(session).identifier_mentions()


# -- mention counts --------------------------------------------------------------------------


def test_the_session_counts_the_items_that_mention_each_name_and_a_resumed_one_recounts(
    make_veil,
):
    """Three results: src/mod_N.py and func_N once each (N = 0, 1, 2); 'contents' is not
    identifier-shaped. A memory item naming src/mod_1.py makes that path's count 2. The
    resumed session counts the same from the store."""
    veil = make_veil([], plugins=FSRS)
    session = _session_with_results(veil, 3)
    session.add_items([ContextItem(content="remember src/mod_1.py", kind="fact", source="memory")])
    counts = mentions(session)
    assert counts["src/mod_0.py"] == 1
    assert counts["src/mod_1.py"] == 2
    assert counts["func_2"] == 1
    assert "contents" not in counts
    resumed = veil.load_session(session.id)
    assert mentions(resumed) == counts


def test_a_resumed_session_counts_a_cold_item_by_its_whole_content(make_veil):
    """The items table keeps only a preview of a cold item; the recount reads the whole text
    from cold storage, so src/pkg_49.py (far past the preview) still counts once."""
    veil = make_veil([], plugins=FSRS)
    session = _session_with_results(veil, 1)
    long_text = "\n".join(f"line {n}: see src/pkg_{n}.py" for n in range(50))
    note = ContextItem(content=long_text, kind="fact", source="memory")
    session.add_items([note])
    context_ops.demote(session, note.id, "cold")
    veil.store.flush()
    assert "src/pkg_49.py" not in veil.store.items(session.id, ("cold",))[0].content
    resumed = veil.load_session(session.id)
    assert mentions(resumed)["src/pkg_49.py"] == 1
    assert mentions(resumed) == mentions(session)


# -- turn embeddings across a resume and a close ---------------------------------------------


def test_a_resumed_session_that_evicted_before_embeds_its_live_turns_at_once(
    make_veil, monkeypatch
):
    """The first eviction starts the embedding; a resumed session starts at load when its
    items had left the prompt, and not otherwise (it has not been under pressure)."""
    model = RecordingEmbedder()
    veil = _open(make_veil, monkeypatch, model, plugins=FSRS)
    calm = veil.new_session()
    calm_turn = _turn(calm, "reading the calm session's files", 1)
    pressed = veil.new_session()
    turn = _turn(pressed, "I will read src/config.py first", 1)
    result = _tool_result(pressed, "config.py settings.py", 2)
    pressed.apply_eviction(EvictionPlan(to_warm=[result.id]))
    assert model.texts == [turn.content]

    resumed = veil.load_session(pressed.id)  # (its vector comes from the embeddings cache)
    vectors = session_state(resumed).turn_embeddings.vectors
    assert set(vectors) == {turn.id}
    np.testing.assert_allclose(vectors[turn.id], bag_of_words(turn.content))

    resumed_calm = veil.load_session(calm.id)
    assert session_state(resumed_calm).turn_embeddings.vectors == {}
    assert calm_turn.content not in model.texts  # never embedded: no pressure yet


def test_closing_veil_waits_for_the_turn_embedding_in_flight(make_veil, monkeypatch):
    """Background mode: a job in flight when the app closes finishes before the store closes
    (``before_close``), instead of writing to a closed store later."""
    gate = threading.Event()
    model = RecordingEmbedder(gate)
    veil = _open(make_veil, monkeypatch, model, mode="background", plugins=FSRS)
    session = veil.new_session()
    turn = _turn(session, "the fix is in parse_config", 1)
    result = _tool_result(session, "ok", 2)
    session.apply_eviction(EvictionPlan(to_warm=[result.id]))
    assert model.started.wait(30)  # the worker is inside encode, held by the gate
    threading.Timer(0.2, gate.set).start()
    veil.close()
    assert model.finished.is_set()  # close returned only once the job had finished
    assert model.texts == [turn.content]


# -- without the plugin ----------------------------------------------------------------------


def test_with_veil_fsrs_blocked_a_session_neither_embeds_turns_nor_counts_mentions(
    make_veil, monkeypatch
):
    """The same session twice: a turn, a tool result naming a file, then the model demotes the
    result (an eviction pass by hand). With veil_fsrs loaded the pass starts the turn
    embeddings (the live turn is embedded) and the items' names are counted; with both of its
    plugins blocked (as ``veil --disable-plugin veil_fsrs --disable-plugin veil_fsrs_evict``)
    the embedding model is never asked and nothing is counted: that work is the plugin's."""

    def run(**kwargs):
        model = RecordingEmbedder()
        veil = _open(make_veil, monkeypatch, model, **kwargs)
        session = veil.new_session()
        turn = _turn(session, "I will read src/config.py first", 1)
        result = _tool_result(session, "contents of src/config.py", 2)
        context_ops.demote(session, result.id)
        assert result.tier == "warm" and not session.live_items.has_id(result.id)
        return model, session, turn

    model, session, turn = run(plugins=FSRS)
    assert model.texts == [turn.content]
    assert mentions(session)["src/config.py"] == 2

    model, session, turn = run(plugins=FSRS, disable=("veil_fsrs", PLUGIN_NAME))
    assert model.texts == []
    assert session.plugin_state(PLUGIN_NAME) is None
    assert not hasattr(session, "identifier_mentions")
    assert not hasattr(session, "item_embeddings")


# -- the replay's batch ----------------------------------------------------------------------


def test_the_replay_embeds_the_whole_recording_in_one_batch_once_veil_fsrs_embeds_turns(
    veil_project, monkeypatch
):
    """``veil replay`` asks veil_fsrs_evict (``embeds_turns``) whether the session embeds
    turns; from the first eviction on it embeds every recorded turn not embedded yet in one
    call, the last one included though a prompt for the last step never ingests it. 24 steps of ~250-token results in a 2,000-token
    budget: eviction starts after a few steps."""
    from veil.default_plugins.replay.formats import ReplayStep, Trajectory
    from veil.default_plugins.replay.veil_policy import VeilReplayPolicy

    steps = [
        ReplayStep(
            index=n,
            assistant=f"step {n}: now I read src/mod_{n}.py to find parse_{n}",
            action=f"cat src/mod_{n}.py",
            observation=f"def parse_{n}(value):\n" + f"    return value + {n}\n" * 60,
        )
        for n in range(24)
    ]
    monkeypatch.setenv("VEIL_CONTEXT__RESCUE_EMBEDDINGS", "background")  # the replay: sync
    traj = Trajectory("rec.traj.json", "mini-swe-agent", "", "fix parse_3 in src/mod_3.py", steps)
    policy = VeilReplayPolicy(traj, 2000, project_dir=veil_project, compaction="none")
    calls: list[list[str]] = []

    class Recording(RecordingEmbedder):
        def encode(self, texts: list[str]) -> np.ndarray:
            calls.append(list(texts))
            return super().encode(texts)

    policy.veil._tiers = Tiers(policy.veil, embedder=Recording())
    try:
        for t in range(len(steps)):
            policy.prompt_for_step(traj, t)
        assert policy.evictions > 0
        last = steps[-1].assistant
        [batch] = [c for c in calls if any(last in text for text in c)]  # never ingested
        upto = [text for c in calls[: calls.index(batch) + 1] for text in c]
        assert len(batch) > len(steps) // 2  # the turns not embedded yet, in one call
        assert all(any(s.assistant in text for text in upto) for s in steps)
    finally:
        policy.veil.close()
