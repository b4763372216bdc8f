"""Data side of ``veil replay``: trajectory readers, measures, baselines and the runner.

* :mod:`~veil.core.replay.formats`: ``load_trajectory(path) -> Trajectory`` for mini-swe-agent,
  SWE-agent and OpenHands recordings.
* :mod:`~veil.core.replay.measures`: identifier tokens, references and misses (DESIGN.md
  "Measures").
* :mod:`~veil.core.replay.baselines`: the full, masking, recency, masking-blocks and
  recency-hysteresis prompts.
* :mod:`~veil.core.replay.cache`: the prompt-cache measure (cached and effective tokens, prefix
  breaks).
* :mod:`~veil.core.replay.runner`: the ``Policy`` protocol, ``run_baselines`` and ``replay``
  (the JSON contract of issues 3 and 18).
* :mod:`~veil.core.replay.report` / :mod:`~veil.core.replay.plot`: ``veil replay``'s table,
  policy choice and ``--plot``.
"""

from veil.core.replay.formats import ReplayStep, Trajectory, detect_format, load_trajectory
from veil.core.replay.measures import identifier_tokens, misses, references
from veil.core.replay.runner import Policy, PolicyResult, replay, run_baselines, run_policies

__all__ = [
    "Policy",
    "PolicyResult",
    "ReplayStep",
    "Trajectory",
    "detect_format",
    "identifier_tokens",
    "load_trajectory",
    "misses",
    "references",
    "replay",
    "run_baselines",
    "run_policies",
]
