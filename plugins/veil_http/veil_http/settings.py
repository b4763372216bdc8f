"""The fields veil_http adds to the ``http`` section of settings.json (registered with
``register_settings``, :mod:`veil.core.plugin_settings`): where ``veil serve`` listens and the
largest body it reads. ``veil mcp --http`` and ``veil proxy`` (which depend on this
distribution) listen by the same settings.

The core owns ``http.token`` (it reads it to redact it; ``VEIL_HTTP_TOKEN`` overrides it:
:class:`veil.core.settings.HttpSettings`); the validated ``config.settings.http`` holds both.
"""

from __future__ import annotations

from pydantic import Field

from veil import SettingsSection


class ServeSettings(SettingsSection):
    """``http``: ``veil serve`` binds ``host``:``port`` (127.0.0.1:5051); any other address needs
    ``token`` (or ``VEIL_HTTP_TOKEN``, the core's field); bodies over ``max_body_bytes``
    (1 MiB) get 413."""

    host: str = "127.0.0.1"
    port: int = Field(default=5051, ge=1, le=65535)
    max_body_bytes: int = Field(default=1_048_576, ge=1)
