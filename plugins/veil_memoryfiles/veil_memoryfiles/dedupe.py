"""When a fact is "already present" in a memory file, so that memory extraction before each
compaction does not write the same facts again (issue 19: the same two facts five times in
three turns).

Two texts state the same fact when their *keys* are equal. The key of a text is, in order:

1. Unicode NFKC normalisation (full-width and compatibility forms fold to their plain form);
2. leading list markers removed, repeatedly: ``-``, ``*``, ``+``, ``•`` or a number with ``.``
   or ``)``, each followed by whitespace (``"- 1. Uses port 5051"`` -> ``"Uses port 5051"``);
3. every run of whitespace (spaces, tabs, line breaks) made one space, ends trimmed;
4. case folded (:meth:`str.casefold`);
5. trailing punctuation removed: ``. ! ? ; : ,`` and the ellipsis ``…``.

So ``"The API listens on port 5051."``, ``"- the api  listens on port 5051"`` and ``"THE API
LISTENS ON PORT 5051!"`` are one fact; ``"port 5051"`` and ``"port 5052"`` are two, and so are
texts that differ in any word (no fuzzy matching: a changed value is a new fact, which the
belief store then weighs against the old one).

A fact is present in a file when its key equals the key of the whole content of an entry or of
any one line of the file (header included): a hand-written bullet list counts line by line.
"""

from __future__ import annotations

import re
import unicodedata

from veil_memoryfiles.entries import parse, unescape_content

_MARKER = re.compile(r"^(?:[-*+\u2022]|\d+[.)])\s+")
_SPACE = re.compile(r"\s+")
_TRAILING = ".!?;:,\u2026"


def fact_key(text: str) -> str:
    """The comparison key of a fact (see the module's docstring); ``""`` for blank text."""
    key = unicodedata.normalize("NFKC", text).strip()
    while (m := _MARKER.match(key)) is not None:
        key = key[m.end() :]
    key = _SPACE.sub(" ", key).strip().casefold()
    return key.rstrip(_TRAILING + " ")


def present_keys(text: str) -> set[str]:
    """Keys of every fact a memory file's text holds: each entry's whole content and each line
    of the file (escapes undone), blanks left out."""
    doc = parse(text)
    keys = {fact_key(entry.content) for entry in doc.entries}
    for line in unescape_content(text.replace("\r\n", "\n").replace("\r", "\n")).split("\n"):
        keys.add(fact_key(line))
    keys.discard("")
    return keys
