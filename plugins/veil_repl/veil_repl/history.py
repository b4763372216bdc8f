"""The REPL's input history (``.veil/history``) without the credentials typed into it.

prompt-toolkit's :class:`~prompt_toolkit.history.FileHistory` appends every line the user sends,
as typed: a token pasted into a message (``use ghp_... to push``) or a key given as a model name
(``/model sk-proj-...``) stayed in the file in clear, while the session's store held
``[redacted:NAME]``. Here each line passes through the project's redactor first, the one every
stored message passes through (:attr:`veil.core.app.Veil.redactor`), so the file and Up-arrow
recall hold what the store holds.
"""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from typing import Any

from prompt_toolkit.history import FileHistory


def kept_text(redactor: Any) -> Callable[[str], str]:
    """What the REPL may keep or show of a text the user typed: ``redactor``'s
    :meth:`~veil.core.safety.redaction.Redactor.text` (every credential as ``[redacted:NAME]``;
    nothing when ``security.redactSecrets`` is off, as for stored messages), and the secrets
    veil knows (the keys of auth.json, credential environment variables) in any case.

    Args:
        redactor: a :class:`veil.core.safety.redaction.Redactor` (``veil.redactor``).
    """

    def keep(text: str) -> str:
        return redactor.known_only(redactor.text(text))

    return keep


class RedactedFileHistory(FileHistory):
    """A :class:`~prompt_toolkit.history.FileHistory` that keeps each line as ``redact`` returns
    it, in the file and in this session's recall alike (Up-arrow brings back what was stored).

    Args:
        filename: the history file (``.veil/history``, checked by the caller for links).
        redact: ``str -> str`` applied to every line before it is kept (:func:`kept_text`).
    """

    def __init__(self, filename: str | PathLike[str], redact: Callable[[str], str]) -> None:
        super().__init__(filename)
        self.redact = redact

    def append_string(self, string: str) -> None:
        """Keep ``string`` redacted (prompt-toolkit calls this for each line sent)."""
        super().append_string(self.redact(string))
