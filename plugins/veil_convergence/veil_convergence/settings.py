"""``convergence``: the settings section veil_convergence owns (registered with
``register_settings``; :mod:`veil.core.plugin_settings`)."""

from __future__ import annotations

from pydantic import Field

from veil import SettingsSection


class ConvergenceSettings(SettingsSection):
    """``convergence`` thresholds (DESIGN.md): soft warning when one fingerprint repeats 3 times,
    stronger at 5 consecutive failures, halt at 15 attempts without progress."""

    soft_repeats: int = Field(default=3, ge=1)
    strong_failures: int = Field(default=5, ge=1)
    halt_without_progress: int = Field(default=15, ge=1)
