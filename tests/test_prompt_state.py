"""What the prompt path keeps between two prompts is one object (issue 33): a
:class:`~veil.core.prompt.state.PromptState` kept in ``session.plugin_state``, not private
attributes set on the Session from outside it."""

from __future__ import annotations

import re
from pathlib import Path

from veil.core.prompt.context import build_prompt
from veil.core.prompt.state import STATE_KEY, PromptState

CORE = Path(__file__).resolve().parents[1] / "veil" / "core"
RETIRED = ("_frozen_view", "_note_anchor", "_pointers", "_squeezed", "_squeeze_reported")


def test_the_prompt_state_is_one_object_kept_with_plugin_state(make_veil):
    veil = make_veil(context_window=100_000)
    session = veil.new_session()
    session.config.settings.context.budget_tokens = 300
    session.append({"role": "user", "content": "what does the log say?\n" + "x " * 800})
    first = build_prompt(session)
    state = session.plugin_state(STATE_KEY)
    assert isinstance(state, PromptState)
    # the 800-word request is over half the 300-token budget: cut around a pointer, kept
    assert list(state.pointers) == [0] and state.frozen is not None
    assert state.frozen.sent == first.messages[1:]  # the kept messages, as sent
    assert build_prompt(session).messages == first.messages  # reused: the prefix stays put
    assert not set(vars(session)) & {*RETIRED, "_fixed_overflow_reported"}


def test_no_core_module_sets_private_attributes_on_a_session():
    """``getattr(session, "_x")`` / ``session._x = ...`` outside the Session class."""
    pattern = re.compile(r"getattr\(session, \"_|setattr\(session,|\bsession\._\w+\s*=[^=]")
    found = [
        f"{path.relative_to(CORE)}:{n}: {line.strip()}"
        for path in sorted(CORE.rglob("*.py"))
        if path.name != "session.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
