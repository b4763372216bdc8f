"""Text that is not clean: making any Python string storable and printable as UTF-8.

Python strings can hold *lone surrogates* (code points U+D800-U+DFFF not in a pair) that UTF-8
cannot encode: a decoder with ``surrogateescape`` (how Python decodes ``sys.argv`` and, under a
non-UTF-8 locale, standard input) turns each undecodable byte into one, and a provider's JSON may
hold the escape ``"\\ud800"``. SQLite, files and terminals take UTF-8 only, so such a string
crashes the write that meets it. veil replaces each lone surrogate with U+FFFD (the Unicode
replacement character) where text enters: the user's message, the model's reply, the store's
write of a message (a last guard).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (``\\ud800``-``\\udfff`` not in a pair: what a
    decoder with ``surrogateescape`` leaves for an undecodable byte, or a provider's JSON
    ``"\\ud800"`` escape) replaced by U+FFFD, so it can be stored as UTF-8. Unchanged text
    is returned as is (the common case costs one encode)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        # surrogatepass keeps valid pairs (as UTF-16 would) and lone ones as bytes that the
        # decode then replaces
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_message(message: Any) -> Any:
    """A copy of a JSON-like value (message, tool call...) with :func:`clean_text` applied to
    every string in it, keys included."""
    if isinstance(message, str):
        return clean_text(message)
    if isinstance(message, dict):
        return {clean_text(k): clean_message(v) for k, v in message.items()}
    if isinstance(message, list):
        return [clean_message(v) for v in message]
    return message


def argument_text(arg: str) -> str:
    """A command-line argument as UTF-8 text, whatever the locale: Python decoded ``sys.argv``
    with the locale's encoding and ``surrogateescape``; :func:`os.fsencode` gives back the
    bytes, which are decoded as UTF-8 with each invalid byte replaced by U+FFFD (a Latin-1
    ``é``, byte 0xE9, becomes ``\\ufffd``)."""
    try:
        return os.fsencode(arg).decode("utf-8", "replace")
    except UnicodeEncodeError:  # a character the locale cannot encode: it was never bytes
        return clean_text(arg)


def utf8_stdio() -> None:
    """Make standard input, output and error UTF-8 whatever the locale (``LANG=C``,
    ``LC_ALL=POSIX``, ``PYTHONIOENCODING`` unset): input decodes invalid bytes to U+FFFD,
    output writes ``?`` for what UTF-8 cannot encode (a lone surrogate), so no text reaching a
    terminal or a pipe crashes veil. Streams that are not text files (replaced by a test
    runner) are left alone."""
    for name, errors in (("stdin", "replace"), ("stdout", "replace"), ("stderr", "replace")):
        stream = getattr(sys, name, None)
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        try:
            reconfigure(encoding="utf-8", errors=errors)
        except (ValueError, OSError):  # already read from, or closed: keep it as it is
            continue
