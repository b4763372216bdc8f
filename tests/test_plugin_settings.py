"""Each plugin owns its settings (issue 20): the ``register_settings`` hook, through a real
plugin manager (``make_veil``) and ``load_config``; errors name the file and the field as the
core's own sections do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from veil.core import plugin_settings
from veil.core.app import open_veil
from veil.core.errors import ConfigError
from veil.core.settings import SettingsSection, load_config
from veil.hookspecs import hookimpl

KNOWN = (
    "compaction, context, convergence, embeddings, http, loop, memory, models, permissions, "
    "plugins, security, store"
)
"""The sections of this environment's settings: the core's and the installed plugins'
(veil_convergence's own; the others add fields to core sections)."""


class RateLimits(SettingsSection):
    """A plugin's own section: ``rateLimits.perMinute`` (60), ``rateLimits.burst`` (5)."""

    per_minute: int = Field(default=60, ge=1)
    burst: int = Field(default=5, ge=0)


class RatePlugin:
    """Registers ``rate_limits`` and records what its hook saw of it at session start."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    @hookimpl
    def register_settings(self):
        return {"rate_limits": RateLimits}

    @hookimpl
    def session_start(self, session):
        self.seen.append(session.config.settings.rate_limits.per_minute)


class OtherRatePlugin:
    @hookimpl
    def register_settings(self):
        return {"rate_limits": RateLimits}


class ContextExtra(SettingsSection):
    """Fields a plugin adds to the core's ``context`` section."""

    fan_out: int = Field(default=3, ge=1)


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_a_plugin_section_is_validated_and_read_by_its_hooks(make_veil):
    plugin = RatePlugin()
    veil = make_veil(plugins=[plugin], settings={"rateLimits": {"perMinute": 30}})
    veil.new_session()
    assert plugin.seen == [30]
    limits = veil.config.settings.rate_limits
    assert isinstance(limits, RateLimits)
    assert (limits.per_minute, limits.burst) == (30, 5)  # burst: the model's default
    assert veil.config.section_owners["rate_limits"] == ("RatePlugin",)


def test_a_plugin_section_defaults_when_the_file_lacks_it(make_veil):
    veil = make_veil(plugins=[RatePlugin()])
    assert veil.config.settings.rate_limits.per_minute == 60


def test_a_plugin_section_takes_veil_variables(make_veil, monkeypatch):
    """The variable wins over the file also for a camelCase section and field."""
    monkeypatch.setenv("VEIL_RATE_LIMITS__BURST", "9")
    veil = make_veil(plugins=[RatePlugin()], settings={"rateLimits": {"perMinute": 30, "burst": 1}})
    limits = veil.config.settings.rate_limits
    assert (limits.per_minute, limits.burst) == (30, 9)


def test_a_bad_value_in_a_plugin_section_names_the_file_and_the_field(make_veil, veil_project):
    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[RatePlugin()], settings={"rateLimits": {"perMinute": 0}})
    message = err.value.message
    assert message.startswith(f"{veil_project / '.veil' / 'settings.json'}: rateLimits.perMinute:")
    assert "greater than or equal to 1" in message


def test_an_unknown_key_in_a_plugin_section_is_refused(make_veil, veil_project):
    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[RatePlugin()], settings={"rateLimits": {"perMinit": 5}})
    assert err.value.message == (
        f"{veil_project / '.veil' / 'settings.json'}: rateLimits.perMinit: no such field in "
        "rateLimits (did you mean 'perMinute'? fields: perMinute, burst)"
    )


def test_a_bad_variable_for_a_plugin_section_names_the_variable(make_veil, monkeypatch):
    monkeypatch.setenv("VEIL_RATE_LIMITS__BURST", "-1")
    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[RatePlugin()])
    assert err.value.message.startswith("environment: VEIL_RATE_LIMITS__BURST (rateLimits.burst):")


def test_two_plugins_claiming_one_section_is_an_error_naming_both(make_veil):
    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[RatePlugin(), OtherRatePlugin()])
    assert err.value.message == (
        "settings section 'rate_limits' is registered by two plugins, RatePlugin and "
        "OtherRatePlugin; uninstall one of them (uninstall RatePlugin or uninstall "
        "OtherRatePlugin), or fix one to use another section name (blocking a plugin does not "
        "skip its settings: they are checked while it is off)"
    )


def test_a_plugin_adds_fields_to_a_core_section(make_veil):
    class Extends:
        @hookimpl
        def register_settings(self):
            return {"context": ContextExtra}

    veil = make_veil(plugins=[Extends()], settings={"context": {"fanOut": 7, "budgetTokens": 5000}})
    context = veil.config.settings.context
    assert (context.fan_out, context.budget_tokens) == (7, 5000)  # the plugin's, the core's
    assert context.weights.recency == 0.25  # veil_fsrs' fields, installed, stay there


def test_a_core_field_registered_again_is_refused(make_veil):
    class Budget(SettingsSection):
        budget_tokens: int = 100

    class Clashes:
        @hookimpl
        def register_settings(self):
            return {"context": Budget}

    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[Clashes()])
    assert err.value.message == (
        "plugin Clashes: field 'budget_tokens' of settings section 'context' is already the "
        "core's; a plugin may only add new fields to a core section. Fix the plugin Clashes, "
        "or uninstall Clashes (blocking a plugin does not skip its settings: they are checked "
        "while it is off)"
    )


def test_a_field_another_plugin_added_to_a_core_section_is_refused(make_veil):
    class Weights(SettingsSection):
        weights: dict[str, float] = {}

    class Clashes:
        @hookimpl
        def register_settings(self):
            return {"context": Weights}

    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[Clashes()])  # veil_fsrs (installed) adds context.weights
    assert "field 'weights' of settings section 'context' is already veil_fsrs's" in (
        err.value.message
    )


def test_the_installed_plugins_own_their_sections(veil_project):
    owners = load_config(veil_project).section_owners
    assert owners == {
        "context": ("veil_fsrs",),
        "compaction": ("veil_compaction",),
        "convergence": ("veil_convergence",),
        "http": ("veil_http",),
        "memory": ("veil_memoryfiles",),
    }


def test_a_blocked_plugin_keeps_its_section_checked(make_veil, veil_project, monkeypatch):
    """A blocked (or not selected) plugin is still asked for its sections: a typo is caught
    before the plugin is turned on, and the file means the same either way."""
    plugin = RatePlugin()
    veil = make_veil(
        plugins=[plugin], disable=["RatePlugin"], settings={"rateLimits": {"burst": 2}}
    )
    assert veil.pm.is_blocked("RatePlugin") and plugin.seen == []
    assert veil.config.settings.rate_limits.burst == 2
    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[plugin], disable=["RatePlugin"], settings={"rateLimits": {"burst": -1}})
    assert "rateLimits.burst" in err.value.message
    # an installed plugin blocked by environment variable: its section is checked the same way
    monkeypatch.setenv("VEIL_DISABLE_PLUGINS", "veil_convergence")
    write(veil_project / ".veil/settings.json", {"convergence": {"softRepeats": 0}})
    with pytest.raises(ConfigError) as err:
        load_config(veil_project)
    assert "convergence.softRepeats" in err.value.message


def test_an_unknown_section_with_no_plugin_is_still_an_error(veil_project):
    write(veil_project / ".veil/settings.json", {"rateLimits": {"perMinute": 5}})
    with pytest.raises(ConfigError) as err:
        load_config(veil_project)
    assert err.value.message == (
        f"{veil_project / '.veil' / 'settings.json'}: rateLimits: no installed plugin registers "
        f"this section (known sections: {KNOWN})"
    )


class _BrokenEntryPoint:
    name, value, dist = "veil_broken", "veil_broken:plugin", None

    def load(self):
        raise ImportError("No module named 'veil_broken'")


def test_a_plugin_that_cannot_be_imported_is_named_when_a_section_is_unknown(
    veil_project, monkeypatch
):
    monkeypatch.setattr(plugin_settings, "entry_points", lambda group: [_BrokenEntryPoint()])
    load_config(veil_project)  # a broken plugin (blocked, say) does not stop veil by itself
    write(veil_project / ".veil/settings.json", {"broken": {"x": 1}})
    with pytest.raises(ConfigError) as err:
        load_config(veil_project)
    message = err.value.message
    core = "compaction, context, embeddings, http, loop, memory, models, permissions, plugins"
    assert message.endswith(
        f"broken: no installed plugin registers this section (known sections: {core}, "
        "security, store); one of these plugins may, but could not be imported: veil_broken "
        "(ImportError: No module named 'veil_broken')"
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"rateLimits": RateLimits}, "'rateLimits' must be snake_case"),
        ({"rate_limits": BaseModel}, "must be a subclass of veil.core.settings.SettingsSection"),
        (["rate_limits"], "must return a dict"),
    ],
)
def test_a_malformed_registration_names_the_plugin(make_veil, answer, expected):
    class Malformed:
        @hookimpl
        def register_settings(self):
            return answer

    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[Malformed()])
    assert err.value.message.startswith("plugin Malformed: ") and expected in err.value.message


def test_a_section_needs_a_default_for_every_field(make_veil):
    class Required(SettingsSection):
        endpoint: str

    class NeedsEndpoint:
        @hookimpl
        def register_settings(self):
            return {"remote": Required}

    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[NeedsEndpoint()])
    assert err.value.message == (
        "plugin NeedsEndpoint: settings section 'remote' needs a default for every field; "
        "endpoint has none. Fix the plugin NeedsEndpoint, or uninstall NeedsEndpoint (blocking "
        "a plugin does not skip its settings: they are checked while it is off)"
    )


def test_open_veil_refuses_a_config_loaded_without_a_plugins_section(veil_project):
    config = load_config(veil_project)
    with pytest.raises(ConfigError) as err:
        open_veil(
            veil_project,
            config=config,
            use_entry_points=False,
            extra_plugins=(("rates", RatePlugin()),),
            db_path=":memory:",
        )
    assert "plugin rates registers the settings section 'rate_limits'" in err.value.message


def test_a_register_settings_that_raises_is_one_line_naming_the_plugin(make_veil):
    class Raises:
        @hookimpl
        def register_settings(self):
            raise RuntimeError("pydantic v1 model")

    with pytest.raises(ConfigError) as err:
        make_veil(plugins=[Raises()], disable=["Raises"])
    assert err.value.message == (
        "plugin Raises: register_settings failed: RuntimeError: pydantic v1 model. Fix the "
        "plugin Raises, or uninstall Raises (blocking a plugin does not skip its settings: "
        "they are checked while it is off)"
    )
