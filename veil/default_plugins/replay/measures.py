"""References and misses: how much of what the agent used next was still in its prompt.

Definitions from DESIGN.md "Measures" (the contract other implementations of the measure share):

* An *identifier token* is a match of ``[A-Za-z_][A-Za-z0-9_./-]{3,}`` that holds ``_``, ``.``,
  ``/``, a digit or an inner capital (an upper-case letter after its first character), or a
  number of 4+ digits.
* A *reference* at step t is a distinct identifier token of assistant message t (its text with
  the action) that does not occur in the system prompt or the task and occurs in at least one
  earlier observation (steps 0..t-1). "Occurs" is a plain substring test.
* A *miss* is a reference that occurs nowhere in the prompt text built for step t (substring
  test); veil's manifest and pointer stubs are left out of that text by the caller.
"""

from __future__ import annotations

from veil.core.prompt.tags import identifier_tokens
from veil.default_plugins.replay.formats import Trajectory

__all__ = ["SEPARATOR", "identifier_tokens", "misses", "references"]

# Separator between texts joined for a single substring search: no token can contain it, so
# no match can straddle two texts.
SEPARATOR = "\x00"


def references(traj: Trajectory, t: int) -> set[str]:
    """References of step ``t``: what assistant message ``t`` uses from earlier tool output.

    Returns the identifier tokens of ``traj.steps[t].assistant`` that are not substrings of
    ``traj.system`` or ``traj.task`` and are a substring of at least one observation of steps
    ``0..t-1`` (DESIGN.md "Measures"). Step 0 has no references.

    Raises:
        IndexError: ``t`` is not a step of ``traj``.
    """
    step = traj.steps[t]
    earlier = SEPARATOR.join(s.observation for s in traj.steps[:t] if s.observation is not None)
    return references_in(step.assistant, traj.system, traj.task, earlier)


def references_in(assistant: str, system: str, task: str, earlier_observations: str) -> set[str]:
    """The reference rule on raw texts (``earlier_observations`` joined by :data:`SEPARATOR`).

    Lets a replay that walks the steps in order keep one growing string of observations instead
    of re-joining them for every step.
    """
    if not earlier_observations:
        return set()
    return {
        token
        for token in identifier_tokens(assistant)
        if token not in system and token not in task and token in earlier_observations
    }


def misses(refs: set[str], prompt_text: str) -> set[str]:
    """References that occur nowhere in ``prompt_text`` (plain substring test).

    ``prompt_text`` is the text of the prompt built for the step, message contents joined by
    :data:`SEPARATOR`; for veil it excludes the manifest and pointer stubs (they cost tokens but
    do not count as holding content).
    """
    return {ref for ref in refs if ref not in prompt_text}
