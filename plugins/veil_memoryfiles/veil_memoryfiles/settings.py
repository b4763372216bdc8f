"""The fields veil_memoryfiles adds to the ``memory`` section of settings.json (registered with
``register_settings``, :mod:`veil.core.plugin_settings`): which project files are read into
the memory section, and how much of the context window that section may take.

The core owns the ``memory`` fields an agent's agent.json may override (``enabled``,
``maxLines``, ``maxEntryBytes``, ``maxFileBytes``: :class:`veil.core.settings.MemorySettings`,
merged by :meth:`veil.core.settings.Config.memory_for`); the validated
``config.settings.memory`` and ``Config.memory_for(agent)`` hold both.
"""

from __future__ import annotations

from pydantic import Field

from veil import SettingsSection


class InjectionSettings(SettingsSection):
    """``memory.instructionFiles``: project files read (never written) into the memory
    section, so users of other agents keep their context (``AGENTS.md``, ``CLAUDE.md``).
    ``memory.injectionShare``: the cap of the injected section, as a share of the model's
    context window (default 10%)."""

    instruction_files: list[str] = Field(default_factory=lambda: ["AGENTS.md", "CLAUDE.md"])
    injection_share: float = Field(default=0.10, gt=0.0, le=1.0)
