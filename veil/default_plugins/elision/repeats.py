"""Repeated-line elision (default plugin ``veil.elision``): the lossless first step when the
prompt is over its budget.

Coding sessions repeat themselves: the same test output after each attempt, a file shown again
after an edit, a heredoc the agent wrote and then printed. When the kept messages exceed the
budget, a run of lines of an older tool result or assistant turn that occurs verbatim in a newer
message of the same prompt is replaced by one short marker, so the newest copy is the one the
model reads. Nothing leaves the prompt: every elided line is still in it, later; the stored
history is untouched. Eviction then only has to free what elision could not.

Rules (deterministic, look-back only: a message is compared with newer messages of the same
prompt, never with anything after the step):

* only ``tool`` and ``assistant`` contents are elided (user messages, corrections, the system
  prompt and summaries are left whole, and their lines count as shown wherever they stand); a
  message's own repeated lines are not elided;
* a line counts (compared with its indentation, without trailing blanks) when, stripped, it
  has at least :data:`MIN_LINE_CHARS` characters (short lines
  such as ``}`` or ``else:`` repeat by chance): a run starts and ends on such lines, and the
  short and blank lines inside it go with it only when they too are shown later (blank lines
  always), so every line elided is shown later, word for word;
* a run of consecutive repeated lines is elided only when it holds at least
  :data:`MIN_RUN_CHARS` characters, so the marker always costs less than what it replaces.
"""

from __future__ import annotations

from typing import Any

MIN_LINE_CHARS = 12
MIN_RUN_CHARS = 80
MARKER = "[{n} lines repeated later in this conversation]"
ELIDED_ROLES = ("tool", "assistant")


def _key(line: str) -> str | None:
    # indentation is kept in the key (it means something in code); trailing blanks are not
    key = line.rstrip()
    return key if len(key.lstrip()) >= MIN_LINE_CHARS else None


def elide_repeats(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Elide runs of lines that a newer message of ``messages`` repeats.

    Args:
        messages: OpenAI chat messages in order (what is about to be sent, stubs included).

    Returns:
        ``(messages, lines elided)``: a new list in which each changed message is a copy with
        its ``content`` rewritten; unchanged messages are the same objects.
    """
    # Messages never elided (user, system) are in the prompt whole: their lines count as shown
    # wherever they stand (a result that quotes the task's code snippet repeats the task).
    # Keys are every line without trailing blanks; only lines of MIN_LINE_CHARS or more start
    # or carry a run, shorter ones may sit inside it when they too are shown later.
    seen: set[str] = {
        line.rstrip()
        for msg in messages
        if msg.get("role") not in ELIDED_ROLES and isinstance(msg.get("content"), str)
        for line in msg["content"].split("\n")
    }
    out: list[dict[str, Any]] = list(messages)
    elided_total = 0
    for pos in range(len(messages) - 1, -1, -1):
        msg = messages[pos]
        content = msg.get("content")
        if not isinstance(content, str) or not content:
            continue
        lines = content.split("\n")
        keys = [_key(line) for line in lines]
        if msg.get("role") in ELIDED_ROLES and seen:
            rewritten, count = _elide(lines, keys, seen)
            if count:
                out[pos] = {**msg, "content": rewritten}
                elided_total += count
        seen.update(line.rstrip() for line in lines)
    return out, elided_total


def _elide(lines: list[str], keys: list[str | None], seen: set[str]) -> tuple[str, int]:
    """``lines`` with long enough runs of lines in ``seen`` replaced by one marker each."""
    out: list[str] = []
    elided = 0
    i, n = 0, len(lines)
    while i < n:
        if keys[i] is None or keys[i] not in seen:  # a run starts on a long repeated line
            out.append(lines[i])
            i += 1
            continue
        j = i
        chars = 0
        # a run: lines shown later word for word (short ones such as "}" included when they
        # are), and blank lines
        while j < n and (lines[j].rstrip() in seen or not lines[j].strip()):
            chars += len(lines[j])
            j += 1
        while j > i and keys[j - 1] is None:  # a run ends on a long line too
            j -= 1
            chars -= len(lines[j])
        if chars >= MIN_RUN_CHARS:
            out.append(MARKER.format(n=j - i))
            elided += j - i
        else:
            out.extend(lines[i:j])
        i = j
    return "\n".join(out), elided
