"""Decisions that left the core for the plugins that make them (issue 33), each checked both
ways: with the deciding plugin blocked nothing happens, with the defaults the result is what the
core used to compute.

* task tags: the ``veil.capture`` plugin reports them (``PluginSession.note_task``); the core
  extracts none, so with it blocked nothing is tagged;
* item accesses: the core tells ``item_accessed`` how an item was used (``access``), the
  scorer grades it (veil_fsrs: plugins/veil_fsrs/tests/test_fsrs_item_accessed.py);
* the tools a model is offered: a local model declares them (``LocalModel.tools``), never
  inferred from a provider's name.
"""

from __future__ import annotations

from typing import Any

from veil import ContextItem, LocalModel, context_ops, hookimpl
from veil.core.models.llm import LLM
from veil.core.settings import load_config
from veil.testing.scripted_model import ScriptedModel

TASK = "Fix the tokenizer_utils parser crash"
# extract_tags by hand: lower-case words of 3+ characters, stop words dropped ("the"), an
# identifier with "_" followed by its parts
TASK_TAGS = frozenset({"fix", "tokenizer_utils", "tokenizer", "utils", "parser", "crash"})


class _RecordingScorer:
    """Scores every item 0.5 and records the task tags it was given."""

    def __init__(self) -> None:
        self.tags: list[frozenset[str]] = []

    @hookimpl
    def score(self, session: Any, items: Any, task_tags: frozenset[str], now: float) -> Any:
        self.tags.append(task_tags)
        return [0.5] * len(items)


def _an_item() -> ContextItem:
    return ContextItem(content="x", kind="episodic", source="tool_result", tags=["x"])


# --- task tags ----------------------------------------------------------------------------


def test_the_capture_plugin_reports_the_task_tags(make_veil):
    scorer = _RecordingScorer()
    veil = make_veil(["ok"], plugins=[("scorer", scorer)])
    session = veil.new_session()
    veil.run_turn(session, TASK)
    assert session.task_tags == TASK_TAGS  # "ok" (2 characters) adds none
    user_item = next(i for i in session.live_items if i.source == "user")
    assert frozenset(user_item.tags) == TASK_TAGS
    # a session loaded again holds none in memory: the scores use the tags the plugin reported
    loaded = veil.load_session(session.id)
    assert loaded.task_tags == frozenset()
    veil.score_items(loaded)
    assert scorer.tags[-1] == TASK_TAGS


def test_with_the_capture_plugin_blocked_nothing_is_tagged(make_veil):
    scorer = _RecordingScorer()
    veil = make_veil(["ok"], plugins=[("scorer", scorer)], disable=["veil.capture"])
    session = veil.new_session()
    veil.run_turn(session, TASK)
    assert session.task_tags == frozenset()
    assert len(session.live_items) == 0  # nothing captured
    veil.score_items(session, [_an_item()])
    assert scorer.tags == [frozenset()]
    veil.score_items(veil.load_session(session.id), [_an_item()])
    assert scorer.tags[-1] == frozenset()


def test_a_new_task_forgets_the_last_ones_tags(make_veil):
    veil = make_veil(["ok", "ok"], disable=["veil.capture"])
    session = veil.new_session()
    session.note_task(["old", "task"])
    veil.run_turn(session, TASK)  # nobody reports this message's tags
    assert session.task_tags == frozenset()


def test_a_remembered_item_is_tagged_by_the_memory_tool_from_the_redacted_text(make_veil):
    token = "ghp_" + "a1B2c3D4e5" * 4  # 40 characters after the prefix: a GitHub token
    veil = make_veil(
        [
            {
                "tool_calls": [
                    {
                        "name": "veil_remember",
                        "arguments": {
                            "content": f"deploy key {token} for staging",
                            "tags": ["Ops"],
                        },
                    }
                ]
            },
            "done",
        ],
        disable=["veil.capture"],  # the memory tool tags its own item, capture or not
    )
    session = veil.new_session()
    veil.run_turn(session, "remember the deploy key")
    (item,) = [i for i in session.live_items if i.source == "memory"]
    assert item.content == "deploy key [redacted:github_token] for staging"
    # the given tag (lower-cased by the tool) and the stored text's words, sorted; "for" is a
    # stop word; the token itself is no tag
    assert item.tags == sorted(
        {"ops", "deploy", "key", "redacted", "github_token", "github", "token", "staging"}
    )
    assert not any(token.lower() in t for t in item.tags)


# --- item accesses --------------------------------------------------------------------------


class _RecordingAccesses:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    @hookimpl
    def item_accessed(
        self, session: Any, item: Any, access: str, now: float, previous_tier: str
    ) -> None:
        self.seen.append((item.id, access, previous_tier))


def test_the_core_says_how_an_item_was_used_and_grades_nothing(make_veil):
    recorder = _RecordingAccesses()
    veil = make_veil(plugins=[("accesses", recorder)])  # no scorer loaded: nobody reviews
    session = veil.new_session()
    item = context_ops.remember(session, "notes on src/app.py", "fact", ["app"])
    assert item.targets == []  # the core takes no targets from the text itself
    item = context_ops.remember(
        session, "notes on src/app.py", "fact", ["app"], targets=["src/app.py"]
    )
    before = (item.stability, item.difficulty)
    context_ops.demote(session, item.id, "warm")
    context_ops.hydrate(session, item.id)
    context_ops.demote(session, item.id, "cold")
    context_ops.promote(session, item.id)
    context_ops.set_pinned(session, item.id, False)
    context_ops.demote(session, item.id, "warm")
    context_ops.set_pinned(session, item.id, True)
    assert context_ops.touch_related(session, ["src/app.py"]) == 1
    assert recorder.seen == [
        (item.id, "hydrate", "warm"),
        (item.id, "promote", "cold"),
        (item.id, "pin", "warm"),
        (item.id, "related", "live"),
    ]
    # the accesses are counted, but with no scorer nothing moved stability or difficulty
    stored = veil.store.get_item(item.id)
    assert stored.access_count == 4
    assert (stored.stability, stored.difficulty) == before


# --- the tools a model is offered -----------------------------------------------------------


class _TinyFrontEnd:
    """Records what the loop tells the user (``render`` events of kind ``info``)."""

    def __init__(self) -> None:
        self.info: list[str] = []

    @hookimpl
    def render(self, event: Any) -> None:
        if event.kind == "info":
            self.info.append(event.data["text"])


def test_a_local_model_is_offered_the_tools_it_declares(make_veil, veil_project):
    # a local model whose provider calls itself "bundled", as veil_bundled's does: what it is
    # offered comes from its declaration alone
    chat = ScriptedModel(["hello"], name="tiny-model", provider="bundled")
    tiny = LocalModel(
        name="tiny-model",
        load=lambda: chat,
        notice="Tiny answers.",
        tools=("ls", "read", "no_such_tool"),
    )
    front = _TinyFrontEnd()
    llm = LLM(load_config(veil_project), local_models=[tiny])  # nothing configured: it answers
    veil = make_veil(llm=llm, plugins=[("front", front)])
    session = veil.new_session()
    veil.run_turn(session, "hi")
    offered = [t["function"]["name"] for t in chat.tools_seen[0]]
    assert offered == ["ls", "read"]  # its order; a name no plugin registered is left out
    assert session.offered_tools == frozenset({"ls", "read"})
    assert front.info == ["Tiny answers."]  # the offline default's notice, once


def test_a_provider_named_bundled_gets_every_tool(make_veil):
    # the old rule keyed on the provider's name: a model that only calls itself "bundled" is
    # offered every registered tool now; only a declaration narrows the list
    chat = ScriptedModel(["hello"], provider="bundled")
    veil = make_veil(model=chat)
    veil.run_turn(veil.new_session(), "hi")
    assert [t["function"]["name"] for t in chat.tools_seen[0]] == list(veil.tools)
    assert len(veil.tools) > 6
