"""Default plugin ``veil.replay``: the ``veil replay`` command, a benchmark harness that feeds
recorded agent sessions through a real veil session and six baselines and measures the prompts
(:mod:`veil.default_plugins.replay.command`). Blocked, ``veil replay`` is gone; nothing else in a
turn depends on it. Plugins add keys to each file's result through the ``replay_report`` hook.

Modules (each imported only when ``veil replay`` runs, so loading the plugin costs nothing):

* :mod:`~veil.default_plugins.replay.formats`: ``load_trajectory(path) -> Trajectory``, the
  format detected from the content: mini-swe-agent, SWE-agent and OpenHands recordings, and
  the agents' own logs read by ``format_claude_code``, ``format_codex``, ``format_pi`` and
  ``format_openhands_v1``; the common model and its builder are in
  :mod:`~veil.default_plugins.replay.trajectory`.
* :mod:`~veil.default_plugins.replay.sessions`: where ``--from claude-code|codex|pi`` finds a
  project's sessions.
* :mod:`~veil.default_plugins.replay.measures`: identifier tokens, references, misses and line
  misses (DESIGN.md "Measures").
* :mod:`~veil.default_plugins.replay.baselines`: the full, masking, recency, masking-blocks,
  recency-hysteresis and masking-budget prompts.
* :mod:`~veil.default_plugins.replay.cache`: the prompt-cache measure (cached and effective
  tokens, prefix breaks).
* :mod:`~veil.default_plugins.replay.runner`: the ``Policy`` protocol, ``run_baselines`` and
  ``replay`` (the JSON contract of issues 3 and 18).
* :mod:`~veil.default_plugins.replay.veil_policy`: veil itself as a replay policy.
* :mod:`~veil.default_plugins.replay.report` / :mod:`~veil.default_plugins.replay.plot`:
  ``veil replay``'s table, policy choice and ``--plot``;
  :mod:`~veil.default_plugins.replay.html_report`: ``--report DIR``;
  :mod:`~veil.default_plugins.replay.progress`: the progress bar.
* :mod:`~veil.default_plugins.replay.frontier`: ``veil replay --sweep`` and
  ``bench/bench_frontier.py``: every policy over its own knob, priced at several cache prices,
  the dominance check and the frontier plots (issue 29).
"""

from __future__ import annotations

from typing import Any

import click

from veil.hookspecs import hookimpl


@hookimpl
def register_hookspecs() -> list[Any]:
    """The hook this plugin fires (``replay_report``: :mod:`veil.default_plugins.replay.hookspecs`)."""
    from veil.default_plugins.replay import hookspecs

    return [hookspecs]


@hookimpl
def register_commands(cli: click.Group) -> None:
    """``veil replay`` (:func:`veil.default_plugins.replay.command.add_replay_command`)."""
    from veil.default_plugins.replay.command import add_replay_command

    add_replay_command(cli)
