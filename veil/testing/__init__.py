"""Test helpers for veil and its plugins: a scripted chat model, a scripted OpenAI-compatible
server on 127.0.0.1, and a pytest plugin with the fixtures built on them.

- :class:`ScriptedModel` (:mod:`veil.testing.scripted_model`): a model answering from a list of
  replies, in the test's process.
- :class:`ScriptedOpenAIServer` (:mod:`veil.testing.scripted_server`): an OpenAI-compatible
  endpoint that answers from a list and records every request, for tests that cross the provider
  boundary for real (litellm, the openai SDK, ``veil`` in a subprocess).
- :mod:`veil.testing.scripted_shapes` (the same server's Anthropic Messages and OpenAI
  Responses answers) and :mod:`veil.testing.provider_checks` (what each provider would refuse in
  a recorded request: :meth:`ScriptedOpenAIServer.problems`).
- :mod:`veil.testing.agents`: real coding agents (Claude Code, Codex, pi, mini-swe-agent)
  installed at pinned versions, ``veil proxy`` in a subprocess, and scripts answering by step.
- :func:`install_fake_plugin` and :func:`run_veil` (:mod:`veil.testing.cli`): a plugin module
  with an entry point in a folder of its own, and ``veil`` run in a subprocess with that folder
  on ``PYTHONPATH``, for tests of what a plugin does to the command line.
- :mod:`veil.testing.pytest_plugin`: the fixtures ``make_veil``, ``scripted_server``,
  ``veil_project`` and ``veil_isolated_env``, registered as the pytest plugin ``veil`` (entry point
  group ``pytest11``), so a plugin's tests use them without a conftest::

      def test_my_tool(make_veil):
          veil = make_veil(["done"], plugins=[my_plugin])
          result = veil.run_turn(veil.new_session(), "hi")
          assert result.final == "done"

The names are imported on first use (PEP 562), so ``import veil.testing`` stays cheap: the pytest
plugin loads in every pytest run of an environment where veil is installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from veil.testing.cli import install_fake_plugin, run_veil
    from veil.testing.scripted_model import ScriptedModel, ScriptExhaustedError
    from veil.testing.scripted_server import (
        SCRIPTED_API_KEY,
        RecordedRequest,
        Reply,
        ScriptedOpenAIServer,
        configure_project,
        openai_prompt_tokens,
    )

_EXPORTS = {
    "ScriptedModel": "veil.testing.scripted_model",
    "ScriptExhaustedError": "veil.testing.scripted_model",
    "SCRIPTED_API_KEY": "veil.testing.scripted_server",
    "RecordedRequest": "veil.testing.scripted_server",
    "Reply": "veil.testing.scripted_server",
    "ScriptedOpenAIServer": "veil.testing.scripted_server",
    "configure_project": "veil.testing.scripted_server",
    "openai_prompt_tokens": "veil.testing.scripted_server",
    "install_fake_plugin": "veil.testing.cli",
    "run_veil": "veil.testing.cli",
}

__all__ = [
    "SCRIPTED_API_KEY",
    "RecordedRequest",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedModel",
    "ScriptedOpenAIServer",
    "configure_project",
    "install_fake_plugin",
    "openai_prompt_tokens",
    "run_veil",
]


def __getattr__(name: str) -> Any:
    """Import an exported name from its module on first access.

    Raises:
        AttributeError: ``name`` is not one of :data:`__all__`.
    """
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'veil.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
