"""Plugin manager: hookspecs, blocking, selective loading, describing what answers each hook."""

from __future__ import annotations

import inspect

import pluggy
import pytest

from veil.core import plugins
from veil.hookspecs import hookimpl

DESIGN_HOOKS = {"capture", "score", "evict", "fit_prompt", "summarise", "recall", "render"}
FIRSTRESULT = {
    "base_prompt",
    "elide_messages",
    "score",
    "score_signals",
    "evict",
    "plan_compaction",
    "summarise",
    "run_interactive",
    "ask_permission",
    "belief_conflicts",
    "resolve_conflict",
}


def test_every_design_hook_is_declared_and_documented():
    # the core's hooks and those the default plugins and installed distributions declare
    # (register_routes by veil_http, attempt_recorded by veil_convergence)
    pm = plugins.load_plugins(plugins.new_plugin_manager())
    names = {n for n, caller in vars(pm.hook).items() if getattr(caller, "spec", None) is not None}
    assert names >= DESIGN_HOOKS
    assert {
        "register_tools",
        "register_commands",
        "register_routes",
        "system_prompt_sections",
        "session_start",
        "turn_end",
        "before_compaction",
        "attempt_recorded",
    } <= names
    for name in names:
        spec = getattr(pm.hook, name).spec.function
        assert inspect.getdoc(spec), f"hook {name} has no docstring"
        opts = getattr(pm.hook, name).spec.opts
        assert bool(opts.get("firstresult")) == (name in FIRSTRESULT), name


class ScorerA:
    @hookimpl
    def score(self, session, items, task_tags, now):
        return "A"


class ScorerB:
    @hookimpl(tryfirst=True)
    def score(self, session, items, task_tags, now):
        return "B"


def test_firstresult_order_and_description():
    pm = plugins.new_plugin_manager()
    plugins.load_plugins(pm, use_entry_points=False, extra=[("a", ScorerA()), ("b", ScorerB())])
    assert pm.hook.score(session=None, items=[], task_tags=frozenset(), now=0.0) == "B"
    info = plugins.describe_plugins(pm)
    assert info["hooks"]["score"] == ["b", "a"]
    assert info["context_layer"] is False  # a scorer without an eviction policy
    coding = next(p for p in info["plugins"] if p["name"] == "veil.coding_tools")
    assert coding["hooks"] == ["base_prompt", "register_tools"] and coding["default"] is True


def test_blocked_plugin_is_not_registered_even_when_passed_explicitly():
    pm = plugins.new_plugin_manager()
    sel = plugins.PluginSelection(disabled=frozenset({"a"}))
    plugins.load_plugins(pm, sel, use_entry_points=False, extra=[("a", ScorerA())])
    assert pm.hook.score(session=None, items=[], task_tags=frozenset(), now=0.0) is None
    assert plugins.describe_plugins(pm)["blocked"] == ["a"]


def test_selection_adds_settings_env_and_cli(monkeypatch):
    monkeypatch.setenv("VEIL_DISABLE_PLUGINS", "x, y")
    sel = plugins.plugin_selection(["s"], None, ["c"])
    assert sel.disabled == {"x", "y", "s", "c"} and sel.load is None
    monkeypatch.setenv("VEIL_LOAD_PLUGINS", "veil_http")
    assert plugins.plugin_selection([], ["other"], []).load == {"veil_http"}
    monkeypatch.delenv("VEIL_LOAD_PLUGINS")
    assert plugins.plugin_selection([], ["other"], []).load == {"other"}


class _EP:
    def __init__(self, name, obj):
        self.name, self.value, self._obj, self.dist = name, f"mod:{name}", obj, None

    def load(self):
        return self._obj


def test_entry_points_respect_load_and_disable(monkeypatch):
    eps = [_EP("a", ScorerA()), _EP("b", ScorerB())]
    monkeypatch.setattr(plugins, "entry_points", lambda group: eps)
    pm = plugins.load_plugins(
        plugins.new_plugin_manager(), plugins.PluginSelection(load=frozenset({"a"}))
    )
    assert pm.has_plugin("a") and not pm.has_plugin("b")
    pm = plugins.load_plugins(
        plugins.new_plugin_manager(), plugins.PluginSelection(disabled=frozenset({"b"}))
    )
    assert pm.has_plugin("a") and not pm.has_plugin("b")


def test_a_plugin_that_fails_to_import_is_named(monkeypatch):
    class Broken(_EP):
        def load(self):
            raise RuntimeError("boom")

    monkeypatch.setattr(plugins, "entry_points", lambda group: [Broken("bad", None)])
    with pytest.raises(ImportError, match="plugin 'bad'.*boom"):
        plugins.load_plugins(plugins.new_plugin_manager())


def test_duplicate_tool_names_are_a_start_error(make_veil):
    from veil.core.errors import ConfigError
    from veil.core.types import Tool

    class Dup:
        @hookimpl
        def register_tools(self, veil):
            return [Tool("read", "again", {"type": "object"}, lambda c, a: "x")]

    with pytest.raises(ConfigError, match="'read' is registered by both"):
        make_veil([], plugins=[("dup", Dup())])


def test_hookimpl_marker_is_veils():
    assert isinstance(hookimpl, pluggy.HookimplMarker) and hookimpl.project_name == "veil"


class _OldCompactor:
    """A plugin written for the hook ``compact``, split in two by issue 20."""

    @hookimpl
    def compact(self, session, request):
        return None


class _OldCloser:
    """A plugin written for ``session_end``, removed by issue 20."""

    @hookimpl
    def session_end(self, session):
        return None


@pytest.mark.parametrize(
    ("plugin", "hook", "instead"),
    [(_OldCompactor(), "compact", "fit_prompt"), (_OldCloser(), "session_end", "removed")],
)
def test_a_plugin_implementing_a_retired_hook_is_refused_with_what_replaced_it(
    project, plugin, hook, instead
):
    from veil.core.app import open_veil
    from veil.core.errors import ConfigError

    assert hook not in {n for n in dir(plugins.new_plugin_manager().hook)}
    with pytest.raises(ConfigError) as err:
        open_veil(project, use_entry_points=False, extra_plugins=(("old_one", plugin),))
    message = err.value.message
    assert f"plugin old_one implements the hook {hook!r}" in message
    assert instead in message and "plugins.disable" in message


class Misspelled:
    """A plugin author's typo: the hook is ``system_prompt_sections``."""

    @hookimpl
    def system_prompt_section(self, session):
        return None


class WrongArgument:
    @hookimpl
    def session_start(self, sesion):
        pass


def test_a_misspelled_hook_is_refused_with_the_closest_hook_name():
    from veil.core.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        plugins.load_plugins(
            plugins.new_plugin_manager(), use_entry_points=False, extra=(("typo", Misspelled()),)
        )
    assert err.value.message.startswith(
        "plugin typo implements 'system_prompt_section', which is not a veil hook "
        "(did you mean 'system_prompt_sections'?)"
    )


def test_a_hook_argument_the_hookspec_lacks_is_a_config_error_naming_the_plugin():
    from veil.core.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        plugins.load_plugins(
            plugins.new_plugin_manager(), use_entry_points=False, extra=(("bad", WrongArgument()),)
        )
    assert err.value.message.startswith("plugin bad: ")
    assert "{'sesion'}" in err.value.message and "--disable-plugin bad" in err.value.message


def test_an_installed_plugin_passed_again_explicitly_is_registered_once(monkeypatch):
    scorer = ScorerA()
    monkeypatch.setattr(plugins, "entry_points", lambda group: [_EP("a", scorer)])
    pm = plugins.load_plugins(plugins.new_plugin_manager(), extra=(("a", scorer),))
    assert pm.get_plugin("a") is scorer
    assert [p for p in pm.get_plugins() if p is scorer] == [scorer]


def test_a_broken_installed_plugin_stops_the_cli_with_one_line_naming_it(tmp_path):
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    (site / "veil_brk-0.1.dist-info").mkdir(parents=True)
    (site / "veil_brk-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: veil-brk\nVersion: 0.1\n"
    )
    (site / "veil_brk-0.1.dist-info" / "entry_points.txt").write_text(
        "[veil]\nveil_brk = veil_brk\n"
    )
    (site / "veil_brk.py").write_text(
        "from veil.hookspecs import hookimpl\n\n"
        "@hookimpl\ndef system_prompt_section(session):\n    return None\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEIL_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    env["VEIL_HOME"] = str(tmp_path / "home")
    project = tmp_path / "project"
    project.mkdir()

    def veil(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "veil.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=project,
            timeout=300,
        )

    broken = veil("plugins")
    assert broken.returncode == 1
    assert "Traceback" not in broken.stderr
    assert broken.stderr.strip().splitlines() == [
        "veil: error: plugin veil_brk implements 'system_prompt_section', which is not a veil "
        "hook (did you mean 'system_prompt_sections'?); veil's hooks are in veil/hookspecs.py "
        "(a hook another plugin declares is marked @hookimpl(optionalhook=True)). "
        "Fix the plugin, or block it with plugins.disable"
    ]
    blocked = veil("--disable-plugin", "veil_brk", "plugins")
    assert blocked.returncode == 0, blocked.stderr
    assert "veil_brk" in blocked.stdout  # listed as blocked


# -- hooks a plugin declares (register_hookspecs) ---------------------------------------------


class _EventSpecs:
    """A hook a plugin fires, declared by that plugin."""

    @pluggy.HookspecMarker("veil")
    def thing_happened(self, session, what):
        """Something happened (collected)."""


class _Declarer:
    @hookimpl
    def register_hookspecs(self):
        return [_EventSpecs]


class _Listener:
    def __init__(self):
        self.seen = []

    @hookimpl(optionalhook=True)
    def thing_happened(self, what):
        self.seen.append(what)


def test_a_plugin_declares_the_hook_it_fires_and_others_implement_it():
    listener = _Listener()
    pm = plugins.load_plugins(
        plugins.new_plugin_manager(),
        use_entry_points=False,
        extra=(("listener", listener), ("declarer", _Declarer())),  # implemented before declared
    )
    assert pm.hook.thing_happened.spec is not None
    pm.hook.thing_happened(session=None, what="built")
    assert listener.seen == ["built"]


def test_an_optional_implementation_loads_without_the_plugin_that_declares_the_hook():
    listener = _Listener()
    pm = plugins.load_plugins(
        plugins.new_plugin_manager(), use_entry_points=False, extra=(("listener", listener),)
    )
    assert pm.hook.thing_happened.spec is None  # nothing fires it; nothing is refused


def test_a_plain_implementation_of_an_undeclared_hook_is_refused():
    from veil.core.errors import ConfigError

    class Plain:
        @hookimpl
        def thing_happened(self, what):
            pass

    with pytest.raises(ConfigError) as err:
        plugins.load_plugins(
            plugins.new_plugin_manager(), use_entry_points=False, extra=(("plain", Plain()),)
        )
    assert err.value.message.startswith(
        "plugin plain implements 'thing_happened', which is not a veil hook"
    )


def test_a_declared_hook_checks_the_implementations_registered_before_it():
    from veil.core.errors import ConfigError

    class Wrong:
        @hookimpl(optionalhook=True)
        def thing_happened(self, what, when):
            pass

    with pytest.raises(ConfigError) as err:
        plugins.load_plugins(
            plugins.new_plugin_manager(),
            use_entry_points=False,
            extra=(("wrong", Wrong()), ("declarer", _Declarer())),
        )
    assert err.value.message.startswith("plugin declarer: its hooks ")
    assert "when" in err.value.message


def test_declaring_a_hook_the_core_declares_is_refused():
    from veil.core.errors import ConfigError

    class Capture:
        @pluggy.HookspecMarker("veil")
        def capture(self, session, event):
            """Again."""

    class Redeclarer:
        @hookimpl
        def register_hookspecs(self):
            return [Capture]

    with pytest.raises(ConfigError, match="plugin again: its hooks"):
        plugins.load_plugins(
            plugins.new_plugin_manager(), use_entry_points=False, extra=(("again", Redeclarer()),)
        )


def test_blocking_the_http_plugin_keeps_the_plugins_that_contribute_routes():
    pm = plugins.load_plugins(
        plugins.new_plugin_manager(), plugins.PluginSelection(disabled=frozenset({"veil_http"}))
    )
    routes = pm.hook.register_routes
    assert routes.spec is None
    assert {impl.plugin_name for impl in routes.get_hookimpls()} >= {
        "veil.beliefs",
        "veil_memoryfiles",
    }
