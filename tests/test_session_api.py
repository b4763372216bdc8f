"""PluginSession is what plugins may read from a session (issue 20): every ``session.<name>``
the plugins use is declared there, and veil's Session provides every declared member."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from veil.core.session import Session
from veil.core.session_api import PluginSession

ROOT = Path(__file__).resolve().parents[1]


def plugin_sources() -> list[Path]:
    """Every module of the plugin distributions (``plugins/<dist>/<package>/``, not their
    tests) and of veil's default plugins."""
    files = [
        path
        for dist in sorted((ROOT / "plugins").iterdir())
        if dist.is_dir()
        for package in sorted(dist.iterdir())
        if package.is_dir() and (package / "__init__.py").exists()
        for path in sorted(package.rglob("*.py"))
    ]
    files += sorted((ROOT / "veil" / "default_plugins").rglob("*.py"))
    return [path for path in files if path.relative_to(ROOT).as_posix() not in TURN_DRIVERS]


TURN_DRIVERS = frozenset({"veil/default_plugins/replay/veil_policy.py"})
"""Modules that drive a session the way a front end does (append messages, set the task and
the clock, read the stubs to measure what a prompt holds) rather than read it from a hook: they
hold the concrete :class:`~veil.core.session.Session`, as ``run_interactive`` does, so the
Protocol does not bind them. The replay's policy is the one today (its file feeds recorded
steps through a real session)."""


def _is_session(node: ast.expr) -> bool:
    """``session`` (a parameter or local) or ``ctx.session`` (a tool's ToolContext)."""
    if isinstance(node, ast.Name):
        return node.id == "session"
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "session"
        and isinstance(node.value, ast.Name)
        and node.value.id == "ctx"
    )


def session_uses(source: str, filename: str = "<source>") -> dict[str, list[str]]:
    """Attribute name -> ``"file:line"`` places where code inside a function reads, writes or
    calls ``session.<name>``, ``ctx.session.<name>`` or ``getattr(session, "<name>", ...)``
    (``hasattr`` / ``setattr`` too)."""
    uses: dict[str, list[str]] = {}
    tree = ast.parse(source, filename)
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    seen: set[int] = set()  # a nested function's nodes are walked from its parent too
    for function in functions:
        for node in ast.walk(function):
            if id(node) in seen:
                continue
            seen.add(id(node))
            name = None
            if isinstance(node, ast.Attribute) and _is_session(node.value):
                name = node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "hasattr", "setattr"}
                and len(node.args) >= 2
                and _is_session(node.args[0])
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                name = node.args[1].value
            if name is not None:
                uses.setdefault(name, []).append(f"{filename}:{node.lineno}")
    return uses


def declared_members() -> dict[str, bool]:
    """PluginSession's members -> whether each is a method (else a property)."""
    return {
        name: inspect.isfunction(value)
        for name, value in vars(PluginSession).items()
        if not name.startswith("_")
    }


def undeclared(uses: dict[str, list[str]]) -> dict[str, list[str]]:
    declared = declared_members()
    return {name: places for name, places in uses.items() if name not in declared}


def test_declared_members_are_the_grouped_api() -> None:
    # the list written out by hand from the Protocol's docstrings, so that a member dropped or
    # renamed there is noticed here too
    assert declared_members() == {
        "id": False,
        "agent": False,
        "model": False,
        "title": False,
        "snapshot": False,
        "resumed": False,
        "closed": False,
        "load_warnings": False,
        "ensure_open": True,
        "to_dict": True,
        "messages": False,
        "step": False,
        "compact_summary": False,
        "compact_size": False,
        "last_prompt_tokens": False,
        "collapsed_steps": False,
        "context_window": False,
        "count_tokens": True,
        "live_items": False,
        "note_turn": True,
        "state": False,
        "save_state": True,
        "plugin_state": True,
        "clock": True,
        "config": False,
        "cwd": False,
        "emit": True,
        "request_halt": True,
        "veil": False,
    }


def test_plugins_use_only_declared_session_members() -> None:
    sources = plugin_sources()
    assert len(sources) > 30  # the walk found the plugins (not an empty glob)
    uses: dict[str, list[str]] = {}
    for path in sources:
        found = session_uses(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
        for name, places in found.items():
            uses.setdefault(name, []).extend(places)
    assert {"state", "config", "emit", "veil"} <= uses.keys()  # the collector sees real uses
    missing = undeclared(uses)
    assert not missing, (
        "plugins use session members PluginSession does not declare (add them to "
        f"veil/core/session_api.py on purpose, or do without): {missing}"
    )


@pytest.mark.parametrize(
    ("snippet", "name", "line"),
    [
        ("def hook(session):\n    return session._halt_reason\n", "_halt_reason", 2),
        ("def hook(session):\n    session.stubs[3] = 'x'\n", "stubs", 2),
        ("def tool(ctx, args):\n    return ctx.session.paged_out\n", "paged_out", 2),
        (
            "def hook(session):\n    return getattr(session, 'page_in_open', False)\n",
            "page_in_open",
            2,
        ),
        (
            "class P:\n    def hook(self, session):\n        session.apply_eviction(None)\n",
            "apply_eviction",
            3,
        ),
    ],
)
def test_an_undeclared_access_is_reported(snippet: str, name: str, line: int) -> None:
    assert undeclared(session_uses(snippet, "scratch.py")) == {name: [f"scratch.py:{line}"]}


def test_declared_accesses_and_other_names_are_not_reported() -> None:
    source = (
        "def hook(session, other):\n"
        "    session.state.setdefault('x', {})\n"
        "    session.emit('info', text=session.id)\n"
        "    other.session.prompt('allow? ')\n"  # a prompt_toolkit session, not veil's
        "    return getattr(session, 'clock', None)\n"
    )
    uses = session_uses(source, "scratch.py")
    assert sorted(uses) == ["clock", "emit", "id", "state"]
    assert undeclared(uses) == {}


def test_session_provides_every_declared_member(make_veil) -> None:
    veil = make_veil()
    session = veil.new_session()
    for name, is_method in declared_members().items():
        assert hasattr(session, name), f"Session lacks PluginSession.{name}"
        assert callable(getattr(session, name)) == is_method, name
    # each declared property is a value of the declared kind on a new session
    assert session.id.startswith("sess_")
    assert session.resumed is False and session.closed is False
    assert session.messages == [] and session.step == 0 and session.compact_size == 0
    assert session.clock() > 1.7e9  # Unix seconds (after 2023-11)
    assert isinstance(session, Session)
