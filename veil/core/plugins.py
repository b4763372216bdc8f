"""The plugin manager: pluggy, plugins found through the ``veil`` entry-point group.

Which plugins load, in order of precedence:

1. ``VEIL_LOAD_PLUGINS=a,b`` (or settings ``plugins.load``): only these entry points load.
2. Blocked, never loaded: ``plugins.disable`` in settings.json, ``VEIL_DISABLE_PLUGINS=a,b`` and
   ``veil --disable-plugin NAME`` (repeatable) add up.

The default plugins (:data:`veil.default_plugins.DEFAULT_PLUGINS`: ``veil.coding_tools``,
``veil.memory_tools``, ``veil.capture``, ``veil.manifest``, ``veil.recall``, ``veil.beliefs``,
``veil.replay``, ``veil.doctor``) are registered first, unless blocked; ``load`` selects among
installed entry points only, so it never drops a default plugin (block one by name to remove it).
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import pluggy

from veil import hookspecs
from veil.default_plugins import DEFAULT_PLUGIN_NAMES, DEFAULT_PLUGINS

ENTRY_POINT_GROUP = "veil"


@dataclass(frozen=True)
class PluginSelection:
    """Which plugins to load: ``load`` (None = all installed) minus ``disabled``."""

    disabled: frozenset[str] = frozenset()
    load: frozenset[str] | None = None


def _split_env(name: str) -> list[str]:
    return [p.strip() for p in os.environ.get(name, "").split(",") if p.strip()]


def plugin_selection(
    settings_disable: Iterable[str] = (),
    settings_load: Iterable[str] | None = None,
    cli_disable: Iterable[str] = (),
) -> PluginSelection:
    """Combine settings, ``VEIL_DISABLE_PLUGINS`` / ``VEIL_LOAD_PLUGINS`` and CLI flags."""
    disabled = set(settings_disable) | set(cli_disable) | set(_split_env("VEIL_DISABLE_PLUGINS"))
    env_load = _split_env("VEIL_LOAD_PLUGINS")
    load: set[str] | None = (
        set(env_load) if env_load else (set(settings_load) if settings_load is not None else None)
    )
    return PluginSelection(frozenset(disabled), frozenset(load) if load is not None else None)


def listed_plugin_selection(
    project_dir: str | os.PathLike[str] | None, cli_disable: Iterable[str] = ()
) -> PluginSelection:
    """The plugin selection of a project, read without validating its settings: for ``veil
    --help``, which only lists the commands of the plugins that load (validating the settings
    imports pydantic and every plugin's settings models: most of a 0.3 s budget).

    Reads ``plugins.disable`` / ``plugins.load`` as :func:`veil.core.settings.load_config`
    merges them (the project's ``.veil/settings.json`` over ``$VEIL_HOME/settings.json`` or
    ``~/.veil/settings.json``, key by key; ``VEIL_PLUGINS__DISABLE`` / ``VEIL_PLUGINS__LOAD``
    over both, as JSON lists or comma-separated names), then :func:`plugin_selection`. A file
    that is missing, a symbolic link (veil never follows one inside ``.veil/``) or not valid
    JSON counts as empty: a command that opens the project reports it.
    """
    from pathlib import Path

    from veil.core.jsonio import MAX_DEPTH, loads

    home = Path(os.environ.get("VEIL_HOME") or Path.home() / ".veil")
    project = Path(project_dir or os.getcwd()) / ".veil"
    section: dict[str, Any] = {}
    for folder in (home, project):
        path = folder / "settings.json"
        try:
            if folder.is_symlink() or path.is_symlink():
                continue
            data = loads(path.read_text(encoding="utf-8"), max_depth=MAX_DEPTH)
        except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError included
            continue
        plugins = data.get("plugins") if isinstance(data, dict) else None
        if isinstance(plugins, dict):
            section.update(plugins)
    for key in ("disable", "load"):
        value = _env_case_insensitive(f"VEIL_PLUGINS__{key.upper()}")
        if value is not None:
            section[key] = _names(value)
    disable, load = section.get("disable"), section.get("load")
    return plugin_selection(
        [str(n) for n in disable] if isinstance(disable, list) else (),
        [str(n) for n in load] if isinstance(load, list) else None,
        cli_disable,
    )


def _env_case_insensitive(name: str) -> str | None:
    """A variable's value whatever the case of its name (pydantic-settings reads ``VEIL_*``
    variables so: ``case_sensitive=False``), or None when unset."""
    for key, value in os.environ.items():
        if key.upper() == name:
            return value
    return None


def _names(value: str) -> list[str]:
    """A list variable's names: a JSON list, or names separated by commas."""
    import json

    if value.lstrip().startswith("["):
        try:
            parsed = json.loads(value)
        except ValueError:
            return []
        return [str(v) for v in parsed] if isinstance(parsed, list) else []
    return [p.strip() for p in value.split(",") if p.strip()]


RETIRED_PLUGIN_NAMES = frozenset({"veil.core"})
"""Names of plugins that no longer exist (``veil.core`` held every default feature until issue
20 split it into the default plugins); front ends say what replaced them."""


def installed_plugin_names() -> frozenset[str]:
    """Every name a plugin can be blocked or loaded by: the ``veil`` entry points installed and
    the default plugins (:data:`veil.default_plugins.DEFAULT_PLUGIN_NAMES`)."""
    return frozenset(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)) | DEFAULT_PLUGIN_NAMES


def closest_plugin_name(name: str, known: Iterable[str]) -> str | None:
    """The installed name ``name`` most likely misspells, or None when none is close.

    ``difflib.get_close_matches`` with its default cutoff (0.6 of the Ratcliff/Obershelp
    similarity, Python documentation of :mod:`difflib`): ``veil.fsrs`` -> ``veil_fsrs``,
    ``veil_coding_tools`` -> ``veil.coding_tools``; an unrelated name gets nothing.
    """
    import difflib

    matches = difflib.get_close_matches(name, sorted(known), n=1)
    return matches[0] if matches else None


def unknown_plugin_names(
    named: Iterable[tuple[str, str]], known: Iterable[str] | None = None
) -> list[tuple[str, str, str | None]]:
    """The plugin names no installed plugin has, each once, with where it was given and the
    closest installed name.

    Args:
        named: ``(where, name)`` pairs in the order to report them (``("--disable-plugin",
            "veil.fsrs")``); a name given in several places is reported at its first.
        known: the installed names (default :func:`installed_plugin_names`).

    Returns:
        ``[(where, name, suggestion or None)]``; retired names (:data:`RETIRED_PLUGIN_NAMES`)
        are left to the caller, which says what replaced them.
    """
    known_set = frozenset(known) if known is not None else installed_plugin_names()
    out: list[tuple[str, str, str | None]] = []
    seen: set[str] = set()
    for where, name in named:
        if name in seen or name in known_set or name in RETIRED_PLUGIN_NAMES:
            continue
        seen.add(name)
        out.append((where, name, closest_plugin_name(name, known_set)))
    return out


def named_plugins(
    settings_disable: Iterable[str] = (),
    settings_load: Iterable[str] | None = None,
    cli_disable: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """Every plugin name the selection mentions, as ``(where, name)``: ``--disable-plugin``,
    ``VEIL_DISABLE_PLUGINS``, ``VEIL_LOAD_PLUGINS``, ``plugins.disable``, ``plugins.load``
    (the same sources as :func:`plugin_selection`)."""
    return [
        *(("--disable-plugin", n) for n in cli_disable),
        *(("VEIL_DISABLE_PLUGINS", n) for n in _split_env("VEIL_DISABLE_PLUGINS")),
        *(("VEIL_LOAD_PLUGINS", n) for n in _split_env("VEIL_LOAD_PLUGINS")),
        *(("plugins.disable", n) for n in settings_disable),
        *(("plugins.load", n) for n in settings_load or ()),
    ]


def new_plugin_manager() -> pluggy.PluginManager:
    """A fresh :class:`pluggy.PluginManager` for project ``"veil"`` with every hookspec added,
    whose hook calls name the plugin that fails (:func:`name_failing_plugin`)."""
    pm = pluggy.PluginManager("veil")
    pm.add_hookspecs(hookspecs)
    pm.add_hookcall_monitoring(_before_hook_call, name_failing_plugin)
    return pm


def _before_hook_call(hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Nothing to do before a hook call (pluggy's monitoring takes a pair)."""


def name_failing_plugin(
    outcome: pluggy.Result[Any],
    hook_name: str,
    hook_impls: Sequence[pluggy.HookImpl],
    kwargs: Mapping[str, Any],
) -> None:
    """After a hook call (pluggy's ``add_hookcall_monitoring``): an exception an implementation
    raised becomes a :class:`~veil.core.errors.PluginHookFailed` naming its plugin and the hook,
    the original as its ``__cause__``; the call still raises, so the operation stops.

    Left as raised: no exception; veil's own errors (:class:`~veil.core.errors.VeilError`,
    deliberate, with their own message and status: a ``resolve_conflict`` answering
    ``BadRequest``, or a ``PluginHookFailed`` from a hook called inside this one);
    ``BaseException`` that is not an ``Exception`` (Ctrl-C, exit); and an exception raised by
    pluggy itself rather than in an implementation (no implementation's frame in its traceback).
    """
    from veil.core.errors import PluginHookFailed, VeilError

    error = outcome.exception
    if error is None or not isinstance(error, Exception) or isinstance(error, VeilError):
        return
    impl = _raising_impl(error, hook_impls)
    if impl is None:
        return
    failed = PluginHookFailed(impl.plugin_name, hook_name, error)
    failed.__cause__ = error
    outcome.force_exception(failed)


def _raising_impl(error: BaseException, hook_impls: Sequence[pluggy.HookImpl]) -> Any:
    """The implementation whose frame is the innermost of ``hook_impls`` in ``error``'s
    traceback (where it raised, or called what raised), or None."""
    by_code = {}
    for impl in hook_impls:
        code = getattr(inspect.unwrap(impl.function), "__code__", None)
        if code is not None:
            by_code[code] = impl
    found = None
    tb = error.__traceback__
    while tb is not None:  # outermost frame first
        found = by_code.get(tb.tb_frame.f_code, found)
        tb = tb.tb_next
    return found


def call_impl(impl: pluggy.HookImpl, hook: str, **kwargs: Any) -> Any:
    """Call one hook implementation directly, as the core does where it needs each plugin's
    answer apart (``register_tools``, ``register_slash_commands``, ``score_signals``...), with
    the arguments of ``kwargs`` it accepts.

    Returns:
        What the implementation returns.

    Raises:
        PluginHookFailed: it raised an exception that is not a
            :class:`~veil.core.errors.VeilError` (as :func:`name_failing_plugin` does for
            calls through ``pm.hook``).
    """
    from veil.core.errors import PluginHookFailed, VeilError

    try:
        return impl.function(**{a: kwargs[a] for a in impl.argnames if a in kwargs})
    except VeilError:
        raise
    except Exception as exc:
        raise PluginHookFailed(impl.plugin_name, hook, exc) from exc


def results_by_plugin(
    pm: pluggy.PluginManager, hook: str, **kwargs: Any
) -> Iterator[tuple[str, Any]]:
    """Call a collected hook one implementation at a time, in pluggy's call order (the last
    of ``get_hookimpls()`` first), yielding ``(plugin name, result)`` for each result that is
    not None: what ``pm.hook.HOOK(**kwargs)`` returns, with the plugin that returned each, so
    the core can name the plugin whose answer it cannot use (:func:`checked_list`).

    A hook with a wrapper implementation (``wrapper`` / ``hookwrapper``, which must wrap the
    whole call) is called through pluggy instead; each result then comes with the names of
    every plugin that implements the hook (``a or b``), as the one that returned it is unknown.

    A hook that a plugin declares (``register_hookspecs``) and that nothing declares or
    implements in ``pm`` yields nothing.

    Raises:
        PluginHookFailed: an implementation raised (:func:`call_impl`).
    """
    caller = getattr(pm.hook, hook, None)
    impls = caller.get_hookimpls() if caller is not None else []
    if any(i.wrapper or i.hookwrapper for i in impls):
        names = answering_plugins(pm, hook)
        for result in getattr(pm.hook, hook)(**kwargs):
            yield names, result
        return
    from veil.core.errors import PluginHookFailed, VeilError

    for impl in reversed(impls):
        args = [kwargs[a] for a in impl.argnames]  # as pluggy passes them: by position
        try:
            result = impl.function(*args)
        except VeilError:
            raise
        except Exception as exc:  # as call_impl, inlined: this runs at every step
            raise PluginHookFailed(impl.plugin_name, hook, exc) from exc
        if result is not None:
            yield impl.plugin_name, result


def answering_plugins(pm: pluggy.PluginManager, hook: str) -> str:
    """The plugins that may have answered a call of ``hook`` through pluggy, in call order,
    for an error about an answer whose plugin is not known: ``a`` when one implements it
    (wrappers do not answer), ``a or b`` with several."""
    impls = getattr(pm.hook, hook).get_hookimpls()
    return " or ".join(i.plugin_name for i in reversed(impls) if not (i.wrapper or i.hookwrapper))


def first_answer(pm: pluggy.PluginManager, hook: str, **kwargs: Any) -> tuple[str, Any]:
    """Call a firstresult hook one implementation at a time, in pluggy's call order, until one
    returns something other than None: ``(plugin name, answer)``, or ``("", None)`` when none
    answers. As :func:`results_by_plugin`, a hook with a wrapper implementation is called
    through pluggy (the name is then :func:`answering_plugins`').

    Raises:
        PluginHookFailed: an implementation raised (:func:`call_impl`).
    """
    impls = getattr(pm.hook, hook).get_hookimpls()
    if any(i.wrapper or i.hookwrapper for i in impls):
        return answering_plugins(pm, hook), getattr(pm.hook, hook)(**kwargs)
    for impl in reversed(impls):
        answer = call_impl(impl, hook, **kwargs)
        if answer is not None:
            return impl.plugin_name, answer
    return "", None


def checked_list(
    plugin: str, hook: str, result: Any, kind: type, expected: str, *, single: bool = False
) -> list[Any]:
    """The items of one implementation's answer to ``hook``, checked: a list (or tuple) whose
    items are all ``kind``; None is an empty list; with ``single``, one ``kind`` alone is a list
    of it (``system_prompt_sections`` may return one section). One ``isinstance`` per item:
    cheap enough for the hooks called at every step.

    Args:
        plugin: the plugin that returned ``result`` (named in the error).
        hook: the hook it answered.
        result: what the implementation returned.
        kind: the class each item must be an instance of.
        expected: how the error names what is expected (``"a list of veil.core.types.Tool"``).

    Raises:
        PluginResultInvalid: ``result`` is not a list or tuple (``returned dict``) or holds an
            item that is not ``kind`` (``returned a list holding dict at [0]``).
    """
    from veil.core.errors import PluginResultInvalid

    if result is None:
        return []
    if single and isinstance(result, kind):
        return [result]
    if not isinstance(result, (list, tuple)):
        raise PluginResultInvalid(plugin, hook, type(result).__name__, expected)
    for i, item in enumerate(result):
        if not isinstance(item, kind):
            got = f"a {type(result).__name__} holding {type(item).__name__} at [{i}]"
            raise PluginResultInvalid(plugin, hook, got, expected)
    return list(result)


def load_plugins(
    pm: pluggy.PluginManager,
    selection: PluginSelection = PluginSelection(),
    *,
    use_entry_points: bool = True,
    extra: Iterable[tuple[str, Any]] = (),
) -> pluggy.PluginManager:
    """Register the default plugins that are not blocked, then installed entry points as
    ``selection`` allows, then ``extra`` ``(name, plugin)`` pairs (tests pass plugin objects here).

    Blocked names are also blocked in pluggy (``set_blocked``) so a later registration under that
    name is refused too. Returns ``pm``.

    Raises:
        ImportError: an entry point's module fails to import (message names the entry point).
        ConfigError: a plugin implements a retired hook (:func:`refuse_retired_hooks`).
    """
    for name in selection.disabled:
        pm.set_blocked(name)
    for name, module in DEFAULT_PLUGINS:
        if not pm.is_blocked(name) and not pm.has_plugin(name):
            pm.register(importlib.import_module(module), name=name)
    if use_entry_points:
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if pm.is_blocked(ep.name) or pm.has_plugin(ep.name):
                continue
            if selection.load is not None and ep.name not in selection.load:
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                raise ImportError(f"plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
            if any(plugin is p for _, p in extra):
                continue  # the caller passes this very object: it is registered below, once
            _register(pm, plugin, ep.name)
            if ep.dist is not None:
                _versions[ep.name] = ep.dist.version
    for name, plugin in extra:
        if not pm.is_blocked(name):
            _register(pm, plugin, name)
    add_plugin_hookspecs(pm)
    refuse_retired_hooks(pm)
    refuse_unknown_hooks(pm)
    return pm


def add_plugin_hookspecs(pm: pluggy.PluginManager) -> None:
    """Add the hooks the loaded plugins declare (``register_hookspecs``): a hook fired by a
    plugin is declared by it, not by the core. pluggy checks the implementations registered
    before against each declaration as it is added.

    Raises:
        ConfigError: a plugin declares a hook that is already declared, returns something that
            holds no ``@hookspec``, or an implementation takes an argument the declaration
            lacks (names the plugin).
        PluginHookFailed: a ``register_hookspecs`` implementation raised.
    """
    from veil.core.errors import ConfigError

    for impl in reversed(pm.hook.register_hookspecs.get_hookimpls()):
        name = impl.plugin_name
        for specs in call_impl(impl, "register_hookspecs") or []:
            try:
                pm.add_hookspecs(specs)
            except (ValueError, pluggy.PluginValidationError) as exc:
                detail = " ".join(str(exc).split())
                raise ConfigError(
                    f"plugin {name}: its hooks ({getattr(specs, '__name__', specs)!r}) cannot be "
                    f"declared: {detail}. Fix the plugin, or block it with plugins.disable"
                ) from exc


def _register(pm: pluggy.PluginManager, plugin: Any, name: str) -> None:
    """Register ``plugin`` as ``name``; pluggy's refusal (a hook argument the hookspec does not
    declare) becomes a :class:`~veil.core.errors.ConfigError` that names the plugin and says how
    to start without it."""
    from veil.core.errors import ConfigError

    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(
            f"plugin {name}: {detail}. Fix the plugin, or block it with plugins.disable or "
            f"--disable-plugin {name}"
        ) from exc


def refuse_unknown_hooks(pm: pluggy.PluginManager) -> None:
    """Refuse a hook implementation whose name matches no hookspec (a misspelled hook such as
    ``system_prompt_section``): pluggy keeps it without a word and veil would never call it.
    An implementation marked ``@hookimpl(optionalhook=True)`` is let through: it implements a
    hook that another plugin declares (``register_hookspecs``), and that plugin is not loaded.

    Raises:
        ConfigError: naming the plugin, the hook and the closest hook names veil has.
    """
    import difflib

    from veil.core.errors import ConfigError

    known = sorted(
        {name for name in dir(hookspecs) if _is_hookspec(name)}
        | {
            name
            for name, caller in vars(pm.hook).items()
            if isinstance(caller, pluggy.HookCaller) and caller.spec is not None
        }
    )
    for hook_name in sorted(vars(pm.hook)):
        caller = getattr(pm.hook, hook_name)
        if not isinstance(caller, pluggy.HookCaller) or caller.spec is not None:
            continue
        # a hook another plugin declares (register_hookspecs), that plugin not loaded
        impls = [impl for impl in caller.get_hookimpls() if not impl.optionalhook]
        if not impls:
            continue
        names = ", ".join(sorted(pm.get_name(i.plugin) or "?" for i in impls))
        close = difflib.get_close_matches(hook_name, known, n=2)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        raise ConfigError(
            f"plugin {names} implements {hook_name!r}, which is not a veil hook{hint}; "
            f"veil's hooks are in veil/hookspecs.py (a hook another plugin declares is marked "
            f"@hookimpl(optionalhook=True)). Fix the plugin, or block it with plugins.disable"
        )


def _is_hookspec(name: str) -> bool:
    return hasattr(getattr(hookspecs, name, None), "veil_spec")


def refuse_retired_hooks(pm: pluggy.PluginManager) -> None:
    """Refuse plugins that implement a hook veil no longer calls
    (:data:`veil.hookspecs.RETIRED_HOOKS`): pluggy would register them without a word, and the
    implementation would silently never run.

    Raises:
        ConfigError: naming each such plugin, the hook and what replaced it (the first one
            found); block the plugin (``plugins.disable``) or update it.
    """
    from veil.core.errors import ConfigError

    for hook, instead in hookspecs.RETIRED_HOOKS.items():
        caller = getattr(pm.hook, hook, None)
        impls = caller.get_hookimpls() if caller is not None else []
        if impls:
            names = ", ".join(sorted(pm.get_name(i.plugin) or "?" for i in impls))
            raise ConfigError(
                f"plugin {names} implements the hook {hook!r}, which veil no longer calls: "
                f"{instead}. Update the plugin, or block it with plugins.disable"
            )


_versions: dict[str, str] = {}


def plugin_version(name: str) -> str:
    """Installed version of a plugin's distribution (veil's own version for a default plugin)."""
    if name in DEFAULT_PLUGIN_NAMES:
        from veil import __version__

        return __version__
    return _versions.get(name, "")


def has_impl(pm: pluggy.PluginManager, hook: str) -> bool:
    """Whether any loaded plugin implements ``hook``."""
    return bool(getattr(pm.hook, hook).get_hookimpls())


NO_HOOK_WARNING = "implements no veil hook"
"""What ``veil plugins`` says of a loaded plugin with no ``@veil.hookimpl`` function: veil never
calls it (a plugin still being written, or one whose functions lack the marker)."""


def describe_plugins(
    pm: pluggy.PluginManager, problems: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """What is loaded, for ``veil plugins`` and ``GET /plugins``.

    Call order is pluggy's: implementations marked ``tryfirst`` first, ``trylast`` last, and
    within each group the plugin registered last first. veil registers its default plugins, then
    the installed entry points sorted by name, then ``extra``: so among unmarked implementations the
    entry point whose name sorts last is asked first (``veil_shortest_scorer`` before
    ``veil_fsrs``). Blocking a plugin removes it from the order; it is not needed to win it.

    Args:
        pm: the loaded plugins.
        problems: plugin name -> the one-line error of its failed registration hook
            (:attr:`veil.core.app.Veil.plugin_problems`), listed as the plugin's ``errors``.

    Returns:
        ``{"plugins": [{"name", "version", "default", "hooks": [...], "warnings": [...],
        "errors": [...]}],
        "hooks": {hook: [plugin names in call order]}, "firstresult": [hook names],
        "context_layer": bool, "blocked": [...]}``. ``default`` is True for veil's default
        plugins (:mod:`veil.default_plugins`); ``warnings`` holds :data:`NO_HOOK_WARNING` for a
        plugin that implements no veil hook (nothing marked ``@veil.hookimpl``), else nothing;
        ``errors`` the plugin's entry of ``problems`` (veil cannot run with it as it is).
        For a firstresult hook the first name in its list that returns a value answers (the
        first name, for veil's own plugins, which always answer).
    """
    hooks: dict[str, list[str]] = {}
    per_plugin: dict[str, list[str]] = {}
    firstresult: list[str] = []
    for hook_name in sorted(n for n in dir(pm.hook) if not n.startswith("_")):
        caller = getattr(pm.hook, hook_name)
        # pluggy calls implementations from the end of get_hookimpls() to the start.
        names = [pm.get_name(impl.plugin) for impl in reversed(caller.get_hookimpls())]
        if names:
            hooks[hook_name] = names
        spec = getattr(caller, "spec", None)
        if spec is not None and spec.opts.get("firstresult"):
            firstresult.append(hook_name)
        for name in names:
            per_plugin.setdefault(name, []).append(hook_name)
    plugins = [
        {
            "name": name,
            "version": plugin_version(name),
            "default": name in DEFAULT_PLUGIN_NAMES,
            "hooks": per_plugin.get(name, []),
            # loaded, not refused (it may be work in progress), but veil never calls it
            "warnings": [] if per_plugin.get(name) else [NO_HOOK_WARNING],
            "errors": [problems[name]] if problems and name in problems else [],
        }
        for name, plugin in pm.list_name_plugin()
        if name is not None and plugin is not None
    ]
    blocked = sorted(n for n in _blocked_names(pm))
    return {
        "plugins": plugins,
        "hooks": hooks,
        "firstresult": firstresult,
        "context_layer": has_impl(pm, "score") and has_impl(pm, "evict"),
        "blocked": blocked,
    }


def _blocked_names(pm: pluggy.PluginManager) -> list[str]:
    return [name for name, plugin in pm._name2plugin.items() if plugin is None]  # noqa: SLF001


SCORE_SLACK = 1e-9
"""How far past [0, 1] a score may round (float arithmetic in a scorer) before it is refused;
within it, the score is clipped."""


def checked_scores(plugin: Callable[[], str], result: Any, size: int) -> Any:
    """The ``score`` hook's answer, checked: ``size`` finite numbers in [0, 1] (the hookspec's
    contract, which eviction policies rely on), as a float64 numpy array. An answer that
    already is one (veil_fsrs') is returned as it is when in range; one that rounds past [0, 1]
    by at most :data:`SCORE_SLACK` is clipped.

    Args:
        plugin: gives the name(s) of the plugin that answered, called only for an error (so
            the scoring of every pass does not pay for it).
        result: what the implementation returned (not None: "no scorer" is the caller's case).
        size: the number of items scored.

    Raises:
        PluginResultInvalid: not numbers (``returned list holding str``), the wrong number of
            them (``returned 3 scores for 5 items``), or NaN, infinite or outside [0, 1]
            (``returned a score of 1.7 at [2]``).
    """
    import numpy as np

    from veil.core.errors import PluginResultInvalid

    expected = f"{size} numbers in [0, 1], one per item"
    try:
        values = np.asarray(result, dtype=np.float64)
    except (TypeError, ValueError):
        got = type(result).__name__
        if isinstance(result, (list, tuple)) and result:
            bad = next((v for v in result if not isinstance(v, (int, float))), result[0])
            got = f"{got} holding {type(bad).__name__}"
        raise PluginResultInvalid(plugin(), "score", got, expected) from None
    if values.shape != (size,):
        got = (
            f"{values.size} scores for {size} items"
            if values.ndim == 1
            else (f"an array of shape {values.shape}")
        )
        raise PluginResultInvalid(plugin(), "score", got, expected)
    if size and not (values.min() >= 0.0 and values.max() <= 1.0):  # False for NaN too
        outside = ~((values >= -SCORE_SLACK) & (values <= 1.0 + SCORE_SLACK))  # NaN: True
        if outside.any():
            at = int(np.flatnonzero(outside)[0])
            got = f"a score of {float(values[at])} at [{at}]"
            raise PluginResultInvalid(plugin(), "score", got, expected)
        values = np.clip(values, 0.0, 1.0)
    return values
