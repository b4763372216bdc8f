"""PluginSession is what plugins may read from a session, PluginVeil what they may use of the
application (issue 20): every ``session.<name>`` and ``session.veil.<name>`` the plugins use is
declared there, the store is not, and veil's Session and Veil provide every declared member."""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pluggy
import pytest

from veil.core import session_api
from veil.core.app import Veil
from veil.core.session import Session
from veil.core.session_api import PluginSession, PluginVeil
from veil.core.settings import Config

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
        "offered_tools": False,
        "count_tokens": True,
        "live_items": False,
        "note_task": True,
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


# -- what a plugin may use of the Veil (PluginVeil) ---------------------------------------------


def _is_hookimpl(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated ``@hookimpl``, ``@hookimpl(...)`` or ``@<module>.hookimpl[(...)]``."""
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "hookimpl":
            return True
    return False


def _veil_read(node: ast.expr) -> bool:
    """``<x>.veil`` (``session.veil``, ``ctx.session.veil``, ``self.veil``, ``req.veil``...) or
    ``getattr(<x>, "veil"[, default])``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "veil"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == "veil"
    )


def veil_uses(source: str, filename: str = "<source>") -> dict[str, list[str]]:
    """Attribute name -> ``"file:line"`` places where plugin code inside a function uses a
    member of the application object: ``<x>.veil.<name>`` (``session.veil``, ``self.veil``...),
    ``getattr(<x>.veil, "<name>", ...)`` and ``getattr(getattr(<x>, "veil"), "<name>")``, and
    ``veil.<name>`` where ``veil`` is a parameter of a ``@hookimpl`` function (the Veil a hook is
    handed) or a local name bound to ``<x>.veil`` in the same function."""
    uses: dict[str, list[str]] = {}
    tree = ast.parse(source, filename)
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    veil_names: dict[int, bool] = {}  # id(Name node) -> it stands for the Veil
    for function in functions:
        names: set[str] = set()
        if _is_hookimpl(function):
            arguments = function.args
            params = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
            names |= {a.arg for a in params if a.arg == "veil"}
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Assign)
                and _veil_read(node.value)
                and all(isinstance(t, ast.Name) for t in node.targets)
            ):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        # the body only: in ``@veil.hookimpl`` the name is the module
        for node in (n for statement in function.body for n in ast.walk(statement)):
            if isinstance(node, ast.Name) and node.id in names:
                veil_names[id(node)] = True

    def is_veil(node: ast.expr) -> bool:
        return _veil_read(node) or id(node) in veil_names

    seen: set[int] = set()  # a nested function's nodes are walked from its parent too
    for function in functions:
        for node in ast.walk(function):
            if id(node) in seen:
                continue
            seen.add(id(node))
            name = None
            if isinstance(node, ast.Attribute) and is_veil(node.value):
                name = node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "hasattr", "setattr"}
                and len(node.args) >= 2
                and is_veil(node.args[0])
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                name = node.args[1].value
            if name is not None:
                uses.setdefault(name, []).append(f"{filename}:{node.lineno}")
    return uses


PM_USES = frozenset({"hook", "get_plugin"})
"""What :attr:`PluginVeil.pm` is declared for: firing a hook and finding a plugin by name."""


def pm_uses(source: str, filename: str = "<source>") -> dict[str, list[str]]:
    """Attribute name -> places of ``<veil>.pm.<name>`` (``<veil>`` as in :func:`veil_uses`)."""
    found: dict[str, list[str]] = {}
    tree = ast.parse(source, filename)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "pm"
            and _veil_read(node.value.value)
        ):
            found.setdefault(node.attr, []).append(f"{filename}:{node.lineno}")
    return found


def declared_veil_members() -> dict[str, bool]:
    """PluginVeil's members -> whether each is a method (else a property)."""
    return {
        name: inspect.isfunction(value)
        for name, value in vars(PluginVeil).items()
        if not name.startswith("_")
    }


def undeclared_veil(uses: dict[str, list[str]]) -> dict[str, list[str]]:
    declared = declared_veil_members()
    return {name: places for name, places in uses.items() if name not in declared}


def test_declared_veil_members_are_the_grouped_api() -> None:
    # written out by hand from PluginVeil's groups, so a member dropped or renamed is noticed
    assert declared_veil_members() == {
        "config": False,
        "redactor": False,
        "check_model_name": True,
        "llm": False,
        "tiers": False,
        "shared_files": False,
        "pm": False,
        "new_session": True,
        "load_session": True,
        "live_session": True,
        "list_sessions": True,
        "update_session": True,
        "close_session": True,
        "delete_session": True,
        "session_is_closed": True,
        "session_lock": True,
        "run_turn": True,
        "compact": True,
        "stored_items": True,
        "stored_item": True,
        "tier_counts": True,
        "record_usage": True,
        "last_usage": True,
        "context_layer_on": False,
        "score_items": True,
        "recall": True,
    }


def test_plugins_use_only_declared_veil_members() -> None:
    uses: dict[str, list[str]] = {}
    for path in plugin_sources():
        found = veil_uses(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
        for name, places in found.items():
            uses.setdefault(name, []).extend(places)
    assert {"llm", "pm", "tiers", "recall"} <= uses.keys()  # the collector sees real uses
    missing = undeclared_veil(uses)
    assert not missing, (
        "plugins use Veil members PluginVeil does not declare (add them to "
        f"veil/core/session_api.py on purpose, or do without): {missing}"
    )


def test_plugins_use_pm_only_to_fire_hooks_and_find_plugins() -> None:
    uses: dict[str, list[str]] = {}
    for path in plugin_sources():
        found = pm_uses(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
        for name, places in found.items():
            uses.setdefault(name, []).extend(places)
    assert "hook" in uses  # convergence's attempt_recorded, memory files' assert_fact
    assert not {n: p for n, p in uses.items() if n not in PM_USES}
    source = "def f(session):\n    session.veil.pm.register(object())\n"
    assert pm_uses(source, "scratch.py") == {"register": ["scratch.py:2"]}


def test_the_store_is_not_plugin_api() -> None:
    assert "store" not in declared_veil_members()
    assert "session_locks" not in declared_veil_members()


def test_session_veil_is_typed_plugin_veil() -> None:
    hints = typing.get_type_hints(PluginSession.veil.fget, vars(session_api))
    assert hints["return"] is PluginVeil


@pytest.mark.parametrize(
    ("snippet", "name", "line"),
    [
        # the store accesses this API replaced (issue 20)
        ("def f(session):\n    return session.veil.store.tier_counts(session.id)\n", "store", 2),
        (
            "class R:\n    def f(self):\n        return self.veil.store.last_usage('s')\n",
            "store",
            3,
        ),
        (
            "def f(self):\n    veil = self.session.veil\n    return veil.store.items('s')\n",
            "store",
            3,
        ),
        (
            "def f(session):\n    store = getattr(getattr(session, 'veil', None), 'store', None)\n",
            "store",
            2,
        ),
        ("@hookimpl\ndef before_close(veil):\n    veil.store.close()\n", "store", 3),
        ("@veil.hookimpl(tryfirst=True)\ndef h(veil):\n    return veil._live\n", "_live", 3),
        ("def tool(ctx, args):\n    return ctx.session.veil.session_locks\n", "session_locks", 2),
    ],
)
def test_an_undeclared_veil_access_is_reported(snippet: str, name: str, line: int) -> None:
    assert undeclared_veil(veil_uses(snippet, "scratch.py")) == {name: [f"scratch.py:{line}"]}


def test_declared_veil_accesses_and_other_veils_are_not_reported() -> None:
    source = (
        "@hookimpl\n"
        "def register_tools(veil):\n"
        "    veil.llm.model_for('main')\n"
        "def front_end(veil):\n"  # not a hook: a front end's own Veil is not counted
        "    veil.store.items('s')\n"
        "def g(session):\n"
        "    session.veil.pm.hook.assert_fact(session=session)\n"
        "    return session.veil.tier_counts(session.id)\n"
    )
    uses = veil_uses(source, "scratch.py")
    assert sorted(uses) == ["llm", "pm", "tier_counts"]
    assert undeclared_veil(uses) == {}


def test_veil_provides_every_declared_member(make_veil) -> None:
    veil = make_veil()
    for name, is_method in declared_veil_members().items():
        assert hasattr(veil, name), f"Veil lacks PluginVeil.{name}"
        assert inspect.ismethod(getattr(veil, name)) == is_method, name
        if is_method:  # same parameters, in the same order and of the same kinds
            declared = inspect.signature(getattr(PluginVeil, name)).parameters
            provided = inspect.signature(getattr(Veil, name)).parameters
            assert [(p.name, p.kind) for p in declared.values()] == [
                (p.name, p.kind) for p in provided.values()
            ], name
    # the declared properties are values of the declared kinds
    assert isinstance(veil.config, Config) and isinstance(veil.pm, pluggy.PluginManager)
    assert isinstance(veil.context_layer_on, bool)
    assert veil.tier_counts("sess_none") == {"live": 0, "warm": 0, "cold": 0}


def store_reads(source: str, filename: str = "<source>") -> list[str]:
    """``"file:line"`` places that read the store off the application object anywhere in a
    module: ``veil.store`` (any name ``veil``: a front end's helper is handed the Veil as a
    plain parameter, not only as a hook's), ``<x>.veil.store`` and ``veil_of(...).store``."""
    places = []
    for node in ast.walk(ast.parse(source, filename)):
        if not (isinstance(node, ast.Attribute) and node.attr == "store"):
            continue
        owner = node.value
        if (
            (isinstance(owner, ast.Name) and owner.id == "veil")
            or (isinstance(owner, ast.Attribute) and owner.attr == "veil")
            or (
                isinstance(owner, ast.Call)
                and isinstance(owner.func, ast.Name)
                and owner.func.id == "veil_of"
            )
        ):
            places.append(f"{filename}:{node.lineno}")
    return places


@pytest.mark.parametrize(
    "snippet",
    [
        "def _delete(veil, sid):\n    veil.store.delete_session(sid)\n",
        "async def f(request):\n    return veil_of(request).store.get_session('s')\n",
        "def f(self):\n    return self.veil.store.items('s')\n",
    ],
)
def test_a_store_read_in_a_front_end_is_reported(snippet: str) -> None:
    assert store_reads(snippet, "scratch.py") == ["scratch.py:2"]


def test_plugin_distributions_do_not_read_the_store() -> None:
    """Front ends (HTTP, MCP, proxy, REPL) and the other distributed plugins go through the
    Veil object's methods, never its store (issue 20: "front ends go through the Veil object");
    veil_http's routes read it in five places before ``delete_session``, ``session_is_closed``
    and ``stored_item`` were added."""
    places = [
        place
        for path in plugin_sources()
        if path.relative_to(ROOT).parts[0] == "plugins"
        for place in store_reads(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert places == []
