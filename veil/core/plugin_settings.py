"""Settings sections that plugins own: the ``register_settings`` hook, collected.

A plugin declares the sections of ``settings.json`` it reads by returning
``{section_name: ModelClass}`` from ``register_settings`` (:mod:`veil.hookspecs`); the models
subclass :class:`veil.core.settings.SettingsSection` (camelCase JSON keys, snake_case
attributes, unknown keys refused). :func:`veil.core.settings.load_config` collects them and
validates each section with its owner's model, with the same file-and-field errors and
``VEIL_*`` overrides as the core's own sections; the values are read as
``config.settings.<section_name>``, as the core's.

Two kinds of registration:

* a section no one else has (``convergence``): the plugin owns it whole;
* a section the core owns (``context``, ``compaction``): the plugin's fields are added to the
  core's model (the same JSON object, ``settings.context.weights`` beside the core's
  ``settings.context.budget_tokens``); several plugins may add fields to one core section,
  but a field the core or another plugin already has is refused (the core owns every field
  it reads).

Which plugins are asked (pytest's ``pytest_addoption`` is asked of every installed plugin
likewise): the default plugins and every installed entry point of the ``veil`` group, *also
those blocked or left out by* ``plugins.load`` (:mod:`veil.core.plugins`), so a section keeps
being checked while its plugin is off (a typo does not wait for the day the plugin is turned on)
and the settings file means the same whichever plugins run. A section no installed plugin
registers is an unknown key, refused as before. A blocked plugin that cannot even be imported
registers nothing; when a section is then unknown, the error names that plugin.

Errors: :class:`~veil.core.errors.ConfigError` when two plugins register one section (naming
both), when a plugin adds to a core section a field the core or another plugin has (naming
who), when a hook raises, and when it answers something other than a mapping of snake_case
names to :class:`~veil.core.settings.SettingsSection` subclasses whose fields all have
defaults.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import pluggy
from pydantic import BaseModel, Field, create_model

from veil.core.errors import ConfigError
from veil.core.settings import CORE_SECTIONS, Settings, SettingsSection

SECTION_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
"""A section name: a snake_case Python identifier (the attribute; settings.json spells it in
camelCase, ``rate_limits`` -> ``rateLimits``, and ``VEIL_RATE_LIMITS__...`` overrides it)."""


NOT_SKIPPED = "blocking a plugin does not skip its settings: they are checked while it is off"
"""Why the errors about a plugin's ``register_settings`` never advise ``plugins.disable``: a
blocked plugin's sections are still registered (this module's docstring says why)."""


def _uninstall(plugin: str) -> str:
    """How to uninstall ``plugin``: ``pip uninstall DIST`` for an installed entry point, the
    plain words otherwise (a plugin passed in by code, tests)."""
    from veil.core.plugins import ENTRY_POINT_GROUP

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == plugin and ep.dist is not None:
            return f"pip uninstall {ep.dist.name}"
    return f"uninstall {plugin}"


def fix_or_uninstall(plugin: str) -> str:
    """The advice that works for a plugin whose settings registration is refused: fix it or
    uninstall it (``pip uninstall DIST``), and why blocking it does not help."""
    return f"Fix the plugin {plugin}, or {_uninstall(plugin)} ({NOT_SKIPPED})"


@dataclass(frozen=True)
class PluginSections:
    """What the installed plugins register.

    Attributes:
        models: section name -> the plugins' model classes, in registration order: one for a
            plugin's own section; for a core section, one per plugin that adds fields to it.
        owners: section name -> the plugins that registered it, aligned with ``models``.
        unimportable: ``(plugin name, error)`` of entry points that could not be imported, so
            registered nothing.
    """

    models: Mapping[str, tuple[type[BaseModel], ...]] = field(default_factory=dict)
    owners: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    unimportable: tuple[tuple[str, str], ...] = ()


def settings_models(sections: PluginSections) -> tuple[type[Settings], type[SettingsSection]]:
    """The classes that validate settings with the plugins' sections.

    Args:
        sections: what the plugins register (:func:`veil.core.plugin_settings.collect_sections`).

    Returns:
        ``(settings class, file class)``: a subclass of :class:`Settings` with every plugin
        section as a field (a core section a plugin extends becomes a subclass of both models),
        and the same fields as a plain model, so validating one file alone (no environment)
        lets an error name the file; pydantic-settings would otherwise mix ``VEIL_*``
        variables into the same validation. Cached: the same sections give the same classes.
    """
    return _settings_models(tuple(sections.models.items()))


@functools.lru_cache(maxsize=64)
def _settings_models(
    registered: tuple[tuple[str, tuple[type[SettingsSection], ...]], ...],
) -> tuple[type[Settings], type[SettingsSection]]:
    fields: dict[str, Any] = {}
    for name, models in registered:
        core = CORE_SECTIONS.get(name)
        section = (
            models[0]
            if core is None
            else create_model(
                core.__name__, __base__=(core, *models), __module__="veil.core.settings"
            )
        )
        fields[name] = (section, Field(default_factory=section))
    settings_cls = create_model(
        "Settings", __base__=Settings, __module__="veil.core.settings", **fields
    )
    file_cls = create_model(
        "SettingsFile",
        __base__=SettingsSection,
        __module__="veil.core.settings",
        **{name: (f.annotation, f) for name, f in settings_cls.model_fields.items()},
    )
    return settings_cls, file_cls


def installed_plugins(
    extra: Iterable[tuple[str, Any]] = (),
) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
    """Every plugin that could run in this environment, loaded or not: veil's default plugins,
    the ``veil`` entry points (sorted by name, as :func:`veil.core.plugins.load_plugins` does),
    then ``extra`` ``(name, plugin)`` pairs (tests, embedders).

    Returns:
        ``(plugins, unimportable)``: ``[(name, plugin object)]`` and ``[(entry point name,
        error message)]`` for those whose import failed (loading reports it when the plugin is
        selected; a blocked broken plugin must not stop veil).
    """
    from veil.core.plugins import ENTRY_POINT_GROUP
    from veil.default_plugins import DEFAULT_PLUGINS

    found: list[tuple[str, Any]] = [(n, importlib.import_module(m)) for n, m in DEFAULT_PLUGINS]
    failed: list[tuple[str, str]] = []
    extra = list(extra)
    taken = {name for name, _ in extra}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if ep.name in taken:
            continue
        try:
            found.append((ep.name, ep.load()))
        except Exception as exc:  # noqa: BLE001 - any import error: reported by load_plugins
            failed.append((ep.name, f"{type(exc).__name__}: {exc}"))
    return found + extra, failed


def collect_sections(
    plugins: Iterable[tuple[str, Any]],
    core_sections: Mapping[str, type[BaseModel]],
    unimportable: Iterable[tuple[str, str]] = (),
) -> PluginSections:
    """Ask every plugin's ``register_settings`` and check the answers.

    Args:
        plugins: ``(name, plugin object)`` pairs (:func:`installed_plugins`); one object given
            twice is asked once.
        core_sections: the core's section models by attribute name; a plugin registering one of
            these adds fields to it.
        unimportable: passed through to the result.

    Returns:
        The registered sections and their owners.

    Raises:
        ConfigError: a plugin section registered by two plugins (both named), a field of a core
            section registered again (by the core or another plugin, named), a malformed
            answer or a hook that raised (naming the plugin).
    """
    pm = _settings_plugin_manager(plugins)
    models: dict[str, tuple[type[BaseModel], ...]] = {}
    owners: dict[str, tuple[str, ...]] = {}
    field_owner: dict[tuple[str, str], str] = {
        (section, name): "the core"
        for section, core in core_sections.items()
        for name in core.model_fields
    }
    # registration order (pluggy lists implementations from the first registered)
    for plugin_name, answer in _answers(pm, "register_settings"):
        if not isinstance(answer, Mapping):
            raise ConfigError(
                f"plugin {plugin_name}: register_settings must return a dict of section name "
                f"-> SettingsSection subclass, got {type(answer).__name__}. "
                f"{fix_or_uninstall(plugin_name)}"
            )
        for section, model in answer.items():
            _check_entry(plugin_name, section, model, SettingsSection)
            if section not in core_sections and section in owners:
                raise ConfigError(
                    f"settings section {section!r} is registered by two plugins, "
                    f"{owners[section][0]} and {plugin_name}; uninstall one of them "
                    f"({_uninstall(owners[section][0])} or {_uninstall(plugin_name)}), or "
                    f"fix one to use another section name ({NOT_SKIPPED})"
                )
            if section in core_sections:
                for name in model.model_fields:
                    holder = field_owner.setdefault((section, name), plugin_name)
                    if holder != plugin_name:
                        raise ConfigError(
                            f"plugin {plugin_name}: field {name!r} of settings section "
                            f"{section!r} is already {holder}'s; a plugin may only add new "
                            f"fields to a core section. {fix_or_uninstall(plugin_name)}"
                        )
            models[section] = (*models.get(section, ()), model)
            owners[section] = (*owners.get(section, ()), plugin_name)
    return PluginSections(models, owners, tuple(unimportable))


def _check_entry(plugin: str, section: Any, model: Any, base: type) -> None:
    # the advice names the plugin's distribution, which takes a scan of every installed one
    # (importlib.metadata.entry_points): made only for an error, not once per section
    if not isinstance(section, str) or not SECTION_NAME_RE.match(section):
        raise ConfigError(
            f"plugin {plugin}: settings section name {section!r} must be snake_case "
            f"(letters, digits, '_'; settings.json spells it in camelCase). "
            f"{fix_or_uninstall(plugin)}"
        )
    if not (isinstance(model, type) and issubclass(model, base)):
        raise ConfigError(
            f"plugin {plugin}: settings section {section!r} must be a subclass of "
            f"veil.core.settings.SettingsSection, got {model!r}. {fix_or_uninstall(plugin)}"
        )
    required = sorted(name for name, f in model.model_fields.items() if f.is_required())
    if required:
        # the section is built from its defaults when the files leave it out
        raise ConfigError(
            f"plugin {plugin}: settings section {section!r} needs a default for every field; "
            f"{', '.join(required)} has none. {fix_or_uninstall(plugin)}"
        )


def check_loaded_with(settings: Any, plugins: Iterable[tuple[str, Any]]) -> None:
    """Check that settings loaded earlier hold the sections of ``plugins``, plugins about to be
    registered that are not installed entry points (``open_veil``'s ``extra_plugins``).

    Args:
        settings: the configuration's validated settings (``Config.settings``).
        plugins: ``(name, plugin object)`` pairs.

    Raises:
        ConfigError: one of them registers a section (or fields of a core section) the
            settings were loaded without, so never validated: load them with
            ``load_config(plugins=...)``.
    """
    plugins = list(plugins)
    if not plugins:
        return
    found = collect_sections(plugins, CORE_SECTIONS)
    for section, models in found.models.items():
        for model, plugin in zip(models, found.owners[section], strict=True):
            if isinstance(getattr(settings, section, None), model):
                continue
            raise ConfigError(
                f"plugin {plugin} registers the settings section {section!r}, but the "
                "configuration was loaded without this plugin, so the section was not "
                "validated; load it with load_config(project, plugins=[...]) as well"
            )


def plugin_vocabulary(plugins: Iterable[tuple[str, Any]]) -> Any:
    """Ask every plugin's ``permission_vocabulary`` (blocked ones too, as
    :func:`collect_sections` asks ``register_settings``) and merge the answers.

    Args:
        plugins: ``(name, plugin object)`` pairs (:func:`installed_plugins`).

    Returns:
        A :class:`~veil.core.safety.permissions.PermissionVocabulary` (empty when none answers).

    Raises:
        ConfigError: an answer is not a PermissionVocabulary, or a hook raised (naming the
            plugin).
    """
    from veil.core.safety.permissions import PermissionVocabulary

    pm = _settings_plugin_manager(plugins)
    merged = PermissionVocabulary()
    for plugin_name, answer in _answers(pm, "permission_vocabulary"):
        if not isinstance(answer, PermissionVocabulary):
            raise ConfigError(
                f"plugin {plugin_name}: permission_vocabulary must return a "
                f"veil.PermissionVocabulary or None, got {type(answer).__name__}. "
                f"{fix_or_uninstall(plugin_name)}"
            )
        merged = merged.merged(answer)
    return merged


def _settings_plugin_manager(plugins: Iterable[tuple[str, Any]]) -> Any:
    """A plugin manager holding ``plugins`` (blocked ones too: their settings and vocabulary are
    asked while settings load), each object once; one pluggy refuses is left out here and
    reported when it is loaded."""
    from veil.core.plugins import new_plugin_manager

    pm = new_plugin_manager()
    for name, plugin in plugins:
        if pm.is_registered(plugin) or pm.has_plugin(name):
            continue
        try:
            pm.register(plugin, name=name)
        except (pluggy.PluginValidationError, ValueError):
            continue  # a plugin pluggy refuses is reported when it is loaded
    return pm


def _answers(pm: Any, hook: str) -> Iterator[tuple[str, Any]]:
    """``(plugin name, answer)`` for each implementation of the no-argument ``hook`` in
    registration order (pluggy lists the first registered first), leaving out None.

    Raises:
        ConfigError: an implementation raised, naming the plugin and the hook.
    """
    for impl in getattr(pm.hook, hook).get_hookimpls():
        plugin_name = pm.get_name(impl.plugin) or "?"
        try:
            answer = impl.function()
        except Exception as exc:  # noqa: BLE001 - a plugin's bug, reported in one line
            raise ConfigError(
                f"plugin {plugin_name}: {hook} failed: {type(exc).__name__}: {exc}. "
                f"{fix_or_uninstall(plugin_name)}"
            ) from exc
        if answer is not None:
            yield plugin_name, answer
