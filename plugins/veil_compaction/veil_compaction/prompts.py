"""The prompts compaction sends to the summarising model.

The summary is structured (issue 5) so that the active task survives a compaction: goal,
constraints and preferences, progress (done / in progress / blocked), decisions, next steps,
files read and modified, open errors. defaultCompaction uses the same structure and appends the
agent's ``customInstructions`` and the caller's instructions (seed 000: "appended to the compaction
system prompt").
"""

from __future__ import annotations

SECTIONS = (
    "## Goal",
    "## Constraints and preferences",
    "## Progress",
    "### Done",
    "### In progress",
    "### Blocked",
    "## Key decisions",
    "## Next steps",
    "## Files read and modified",
    "## Open errors",
)
"""The headings of every summary, in order."""

_STRUCTURE = "\n".join(SECTIONS)

SUMMARY_SYSTEM = f"""You compact the conversation of a coding agent so that it can go on with a \
shorter context. The messages you are given will be removed from its context; your summary \
replaces them. Write the summary the agent needs to resume exactly where it stopped.

Use these headings, in this order, with short bullet points under each; write "- none" under a \
heading with nothing to say:

{_STRUCTURE}

Rules:
- Keep exact file paths, function and variable names, commands, error messages, numbers and \
user preferences; they cannot be recovered from a vague summary.
- Say which files were read and which were modified, and what changed in them.
- State the user's current request and what remains to do for it.
- If an earlier summary is given, merge it with the new messages into one summary: keep what \
still holds, update what changed, drop what was settled.
- Do not invent anything that is not in the conversation. Answer with the summary only."""

MERGE_SYSTEM = f"""You merge partial summaries of one coding agent's conversation into a single \
summary. They are given oldest first; a later one wins where they disagree. Keep exact file \
paths, names, commands, errors and numbers.

Use these headings, in this order, with short bullet points; write "- none" under an empty one:

{_STRUCTURE}

Answer with the merged summary only."""

TRUNCATED_NOTE = "\n[summary clipped to fit the compaction model's window]"


def summary_system(instructions: list[str] | tuple[str, ...] = ()) -> str:
    """The system prompt for a summary, with extra instructions appended (blank ones skipped)."""
    extra = [text.strip() for text in instructions if text and text.strip()]
    if not extra:
        return SUMMARY_SYSTEM
    return SUMMARY_SYSTEM + "\n\nAdditional instructions:\n" + "\n".join(extra)


def merge_system(instructions: list[str] | tuple[str, ...] = ()) -> str:
    """The system prompt for merging partial summaries, with the same extra instructions."""
    extra = [text.strip() for text in instructions if text and text.strip()]
    if not extra:
        return MERGE_SYSTEM
    return MERGE_SYSTEM + "\n\nAdditional instructions:\n" + "\n".join(extra)


def summary_request(transcript: str, previous: str | None) -> str:
    """The user message of a summary request: the earlier summary (if any) and the transcript."""
    parts = []
    if previous:
        parts.append(f"<earlier_summary>\n{previous}\n</earlier_summary>")
    parts.append(f"<conversation>\n{transcript}\n</conversation>")
    parts.append("Write the updated summary now.")
    return "\n\n".join(parts)


def merge_request(summaries: list[str]) -> str:
    """The user message of a merge request: the partial summaries, oldest first."""
    blocks = [
        f'<summary part="{n}">\n{text}\n</summary>' for n, text in enumerate(summaries, start=1)
    ]
    return "\n\n".join(blocks) + "\n\nWrite the merged summary now."
