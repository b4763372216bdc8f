"""veil's default plugins: the features the core ships, each registered under its own name and
blockable on its own (``plugins.disable``, ``VEIL_DISABLE_PLUGINS``, ``veil --disable-plugin``).

The model is pytest's split between essential plugins (the core's mechanism here: plugin manager,
settings, session, turn driver, prompt assembly, store, model access) and default plugins (policy a
user may replace). Each default plugin is a package holding its hook implementations in its
``__init__`` and the policy modules it needs beside them.

:data:`DEFAULT_PLUGINS` lists them in registration order. pluggy calls the last registered first,
so this order fixes their order within each hook: the coding tools are listed before the memory
tools, the manifest's prompt sections come before the belief conflicts, and facts are asserted from
a tool result before that result is captured (``veil.replay`` and ``veil.doctor`` only add a
command each, so their places change nothing). They are registered before every entry-point
plugin, so an installed plugin's implementation is called before any default one.
"""

from __future__ import annotations

DEFAULT_PLUGINS: tuple[tuple[str, str], ...] = (
    ("veil.recall", "veil.default_plugins.recall"),
    ("veil.capture", "veil.default_plugins.capture"),
    ("veil.beliefs", "veil.default_plugins.beliefs"),
    ("veil.manifest", "veil.default_plugins.manifest"),
    ("veil.elision", "veil.default_plugins.elision"),
    ("veil.memory_tools", "veil.default_plugins.memory_tools"),
    ("veil.coding_tools", "veil.default_plugins.coding_tools"),
    ("veil.replay", "veil.default_plugins.replay"),
    ("veil.doctor", "veil.default_plugins.doctor"),
)
"""``(plugin name, module)`` for each default plugin, in registration order."""

DEFAULT_PLUGIN_NAMES: frozenset[str] = frozenset(name for name, _ in DEFAULT_PLUGINS)
"""The names ``veil plugins`` marks as default plugins."""

SHIPPED_PLUGINS: tuple[tuple[str, str], ...] = (
    ("veil_bundled", "veil_bundled"),
    ("veil_compaction", "veil_compaction"),
    ("veil_convergence", "veil_convergence"),
    ("veil_fsrs", "veil_fsrs"),
    ("veil_fsrs_evict", "veil_fsrs.evict_plugin"),
    ("veil_http", "veil_http"),
    ("veil_mcp", "veil_mcp"),
    ("veil_memoryfiles", "veil_memoryfiles"),
    ("veil_proxy", "veil_proxy"),
    ("veil_repl", "veil_repl"),
)
"""``(entry point name, module)`` of each plugin distribution veil ships beside its default
plugins (the ``plugins/`` folder of its repository), as their ``pyproject.toml`` declare them."""

OFFLINE_MODEL_INSTALL = (
    "veil's bundled offline model, the veil_bundled plugin (from a clone of veil: pip install "
    "./plugins/veil_bundled, or pipx inject veil ./plugins/veil_bundled where veil is "
    "installed as a tool; it compiles llama.cpp, about 10 minutes of CPU)"
)
"""How to install the offline model veil ships, as the core's "no model" message tells it
(:func:`veil.core.models.llm.no_model_message`): the core names no plugin itself."""

DEFAULT_PROVIDERS: dict[str, str] = {"resolve_conflict": "veil.beliefs"}
"""Hook -> the plugin of veil's that answers it by default, for the core's messages that say
which plugin is blocked when nobody answers (the core names no plugin itself)."""

OWN_PLUGINS: frozenset[tuple[str, str]] = frozenset(DEFAULT_PLUGINS) | frozenset(SHIPPED_PLUGINS)
"""veil's own plugins as ``(registered name, module name)``: a plugin registered under one of
these names whose module is the one named here. The permission rules honour the effect
``"memory"`` only for tools these register (:func:`veil.core.safety.permissions.granted_effect`):
veil vouches for what its own memory tools write, not for another plugin's."""
