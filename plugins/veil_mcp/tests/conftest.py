"""Fixtures for veil_mcp's tests: a project whose store holds an item evicted to the warm tier
and a past session, opened with the memory-files plugin and a scripted model."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import veil_memoryfiles

from veil.core.types import EvictionPlan
from veil.hookspecs import hookimpl

DEPLOY_DOC = "The deploy script lives in tools/ship.sh and needs FOO_TOKEN.\n"
FLAKY_ANSWER = "The flaky test is test_upload_retry."


class EvictToolResults:
    """Evicts every tool result once it is older than the current step (to the warm tier)."""

    @hookimpl
    def score(self, session, items, task_tags, now):
        return [0.5] * len(items)

    @hookimpl
    def evict(self, session, items, scores, budget_tokens, used_tokens):
        ids = [
            i.id
            for i in items
            if i.source == "tool_result" and i.step < session.step and not i.pinned
        ]
        return EvictionPlan(to_warm=ids, reasons={i: "test" for i in ids})


def call(name: str, **args: Any) -> dict[str, Any]:
    """A scripted model reply that calls one tool."""
    return {"tool_calls": [{"name": name, "arguments": args}]}


@pytest.fixture
def opener(make_veil):
    """``opener(project, replies=(), plugins=(), use_entry_points=False, memory_files=True)``: a
    Veil on ``project`` (veil's ``make_veil``, closed after the test) with veil_memoryfiles
    (unless ``memory_files`` is False or the entry points load it), ``plugins`` and a scripted
    model."""

    def factory(
        project: Path,
        replies=(),
        plugins=(),
        use_entry_points: bool = False,
        memory_files: bool = True,
    ):
        extra = tuple(plugins)
        if memory_files and not use_entry_points:
            extra = (("veil_memoryfiles", veil_memoryfiles), *extra)
        return make_veil(replies, plugins=extra, use_entry_points=use_entry_points, project=project)

    return factory


def seed_history(project: Path, opener) -> str:
    """Two past sessions in ``project``'s store: one read deploy.md, whose result was evicted
    to the warm tier (returned: its item id); one answered :data:`FLAKY_ANSWER`. ``opener`` is
    the fixture of that name; the Veil is closed before returning (closing again is harmless)."""
    (project / "deploy.md").write_text(DEPLOY_DOC)
    veil = opener(
        project,
        [call("read", path="deploy.md"), "read it", "ok", FLAKY_ANSWER],
        plugins=[("evict", EvictToolResults())],
    )
    try:
        session = veil.new_session()
        veil.run_turn(session, "read the deploy doc")
        veil.run_turn(session, "thanks")  # a later step: the read's result is evicted
        warm = veil.store.items(session.id, ("warm",))
        assert [i.source for i in warm] == ["tool_result"] and "tools/ship.sh" in warm[0].content
        veil.run_turn(veil.new_session(), "which test is flaky?")
        return warm[0].id
    finally:
        veil.close()


@pytest.fixture
def seeded(project: Path, opener) -> SimpleNamespace:
    """The project after :func:`seed_history`: ``project``, ``warm_item_id``, ``deploy_doc``
    (the evicted file's text), ``flaky_answer`` (the past session's answer)."""
    return SimpleNamespace(
        project=project,
        warm_item_id=seed_history(project, opener),
        deploy_doc=DEPLOY_DOC,
        flaky_answer=FLAKY_ANSWER,
    )


@pytest.fixture
def mcp_veil(seeded, opener):
    """A Veil on the seeded project (memory files loaded)."""
    return opener(seeded.project)
