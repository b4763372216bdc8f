"""References and misses: how much of what the agent used next was still in its prompt.

Definitions from DESIGN.md "Measures" (the contract other implementations of the measure share):

* An *identifier token* is a match of ``[A-Za-z_][A-Za-z0-9_./-]{3,}`` that holds ``_``, ``.``,
  ``/``, a digit or an inner capital (an upper-case letter after its first character), or a
  number of 4+ digits.
* A *reference* at step t is a distinct identifier token of assistant message t (its text with
  the action) that does not occur in the system prompt or the task and occurs in at least one
  earlier observation (steps 0..t-1). "Occurs" is a plain substring test.
* A *miss* (an *identifier miss*) is a reference that occurs nowhere in the prompt text built
  for step t (substring test); veil's manifest, pointer stubs, context notes and the marker
  lines it writes into messages are left out of that text by the caller
  (:mod:`veil.default_plugins.replay.veil_policy`).
* A *line miss* (DESIGN.md "Line misses", issue 29) is a reference whose content the prompt does
  not hold word for word. The *source* of reference r at step t is the latest message before
  step t, among the recorded assistant turns and observations of steps 0..t-1 (in the order
  they happened: assistant turn i, then observation i), whose text contains r (substring). Its
  *lines* are the source's lines that contain r (lines: the text split at ``"\\n"``, nothing
  stripped). r is *held by line* when at least one of those lines stands verbatim in the prompt:
  the exact line, every character and nothing else, is a whole line of the text of one message
  of the prompt (the same match text as above, so text veil writes itself never holds one).
  Otherwise r is a line miss. A substring of a longer prompt line does not hold a reference,
  nor does a line of another message that merely mentions r: a prompt that names a file
  without showing the line the agent took it from misses it. Every identifier miss is a line
  miss (a line holding r contains r), so ``line_misses >= misses`` for every policy and step.
"""

from __future__ import annotations

from veil import identifier_tokens
from veil.default_plugins.replay.formats import Trajectory

__all__ = [
    "SEPARATOR",
    "RecordedLines",
    "identifier_tokens",
    "line_misses",
    "misses",
    "references",
]

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
    :data:`SEPARATOR`; for veil it excludes the manifest, pointer stubs, context notes and the
    marker lines veil writes into messages (they cost tokens but do not count as holding
    content).
    """
    return {ref for ref in refs if ref not in prompt_text}


class RecordedLines:
    """The recorded messages before the step being measured, in order, and for each reference
    the latest of them that contains it: the *sources* of the line-miss rule (module
    docstring).

    Messages are added as the replay walks the steps (:meth:`add`: assistant turn i, then
    observation i). Finding a reference's source costs one backward scan the first time the
    reference is asked for, then only a scan of the messages added since (a reference is asked
    for again at many steps), so a replay stays linear in the recording's length.
    """

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._lines: dict[int, list[str]] = {}
        # reference -> (messages scanned so far, index of the latest that contains it or -1)
        self._latest: dict[str, tuple[int, int]] = {}

    def add(self, text: str) -> None:
        """Append the next recorded message (an assistant turn or an observation)."""
        self.texts.append(text)

    def source(self, ref: str) -> int | None:
        """Index (into :attr:`texts`) of the latest message that contains ``ref``, or None."""
        n = len(self.texts)
        scanned, latest = self._latest.get(ref, (0, -1))
        if ref not in self._latest:  # first time: walk back from the newest
            for i in range(n - 1, -1, -1):
                if ref in self.texts[i]:
                    latest = i
                    break
        else:
            for i in range(scanned, n):
                if ref in self.texts[i]:
                    latest = i
        self._latest[ref] = (n, latest)
        return latest if latest >= 0 else None

    def lines_with(self, ref: str) -> list[str]:
        """The lines of ``ref``'s source that contain ``ref`` (empty when no message does)."""
        i = self.source(ref)
        if i is None:
            return []
        lines = self._lines.get(i)
        if lines is None:
            lines = self._lines[i] = self.texts[i].split("\n")
        return [line for line in lines if ref in line]


def line_misses(
    refs: set[str],
    prompt_text: str,
    recorded: RecordedLines,
    missed: set[str] | None = None,
) -> set[str]:
    """References of ``refs`` that no line of ``prompt_text`` holds (the line-miss rule of the
    module docstring).

    Args:
        refs: the step's references.
        prompt_text: the match text of the prompt built for the step: message contents joined
            by :data:`SEPARATOR` (each message's lines are its text split at ``"\\n"``).
        recorded: the recorded assistant turns and observations before the step, in order.
        missed: the step's identifier misses (:func:`misses` of the same text) when the caller
            has them: they are line misses without a search.

    Returns:
        The references whose source holds no line that is a whole line of ``prompt_text``;
        includes every identifier miss (:func:`misses`).
    """
    if missed is None:
        missed = misses(refs, prompt_text)
    out = set(missed)
    for ref in refs:
        if ref not in missed and not any(
            is_line_of(line, prompt_text) for line in recorded.lines_with(ref)
        ):
            out.add(ref)
    return out


_BOUNDS = ("\n", SEPARATOR)


def is_line_of(line: str, text: str) -> bool:
    """Whether ``line`` is a whole line of one of the texts joined by :data:`SEPARATOR` in
    ``text``: an occurrence that starts at the text's start or after ``"\\n"`` or the separator,
    and ends at its end or before one of them. Searches occurrence by occurrence (no copy of
    ``text``). An empty ``line`` never is one (a line holding a reference is never empty).
    """
    if not line:
        return False
    n, size = len(text), len(line)
    i = text.find(line)
    while i >= 0:
        end = i + size
        if (i == 0 or text[i - 1] in _BOUNDS) and (end == n or text[end] in _BOUNDS):
            return True
        i = text.find(line, i + 1)
    return False
