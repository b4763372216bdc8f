"""veil's core: the mechanism every feature runs on, and no feature of its own.

What a feature does (which tools the agent has, what is captured, how items are scored and
evicted, what compaction writes, what the manifest says) is a plugin: a default plugin in
:mod:`veil.default_plugins`, or a distribution in ``plugins/``, each blockable by name. The core
calls them through the hooks of :mod:`veil.hookspecs` and hands them a session and an
application as :mod:`veil.core.session_api` declares them (``PluginSession``, ``PluginVeil``).

Subpackages:

* :mod:`veil.core.store`: every SQL statement on ``.veil/context.db`` or a project's schema of a
  PostgreSQL store (``store.url``), and the write-behind thread.
* :mod:`veil.core.models`: reaching a model (litellm, a local model a plugin registers), token
  counting, embeddings.
* :mod:`veil.core.prompt`: assembling and fitting what is sent (the masking and elision hooks,
  eviction passes, full compaction).
* :mod:`veil.core.safety`: what keeps a stranger's repository from steering veil (redaction,
  permissions, trust, path containment, process groups); none of it can be blocked.

Top-level modules: the application object (``app``), the agent loop (``loop``) and the one turn
driver every front end uses (``turn``), the session (``session``, ``session_locks``), the
tiers' moves (``tiers``), the files a project keeps in a shared store (``shared_files``: the
memory files, with PostgreSQL), context operations behind the memory tools (``context_ops``), the
plugin manager (``plugins``), settings and each plugin's settings sections (``settings``,
``plugin_settings``, ``settings_unknown``), shared types and errors (``types``, ``errors``),
atomic file writes (``atomic``) and making any string storable as UTF-8 (``text``).
"""
