"""Tags and targets pulled from text by rule (no model): words for Jaccard relevance, file paths
and symbols for the "structure" signal (seed 002)."""

from __future__ import annotations

import re
from typing import Any

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_CANDIDATE = re.compile(r"[\w./-]+")
_PATH = re.compile(r"(?:\.{1,2}/)?(?:[\w.-]+/)*[\w-]+\.([A-Za-z0-9]{1,8})")
_SYMBOL = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[a-z]+_[a-z0-9_]+|"
    r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+"
)
_CODE_EXT = frozenset(
    "py pyi js ts tsx jsx go rs java kt c h cc cpp hpp cs rb php swift scala sh toml yaml yml json "
    "md txt cfg ini sql html css lock".split()
)
STOPWORDS = frozenset(
    """the and for are but not you your with this that have from they will would there their what
    about which when make can like time just him know take people into year good some could them see
    other than then now look only come its over think also back after use two how our work first
    well way even new want because any these give day most has was were been being did does doing
    had should very here where why who all each few more such own same too please let get got
    file files code""".split()
)


def extract_tags(text: str, limit: int = 64) -> list[str]:
    """Lower-case content words of ``text`` (3+ characters, no stop words), in first-seen order,
    at most ``limit``. Identifiers split on ``_`` contribute their parts too."""
    seen: dict[str, None] = {}
    # findall and the de-duplication run in C; the Python loop sees each distinct word once
    for word in dict.fromkeys(_WORD.findall(text.lower())):
        parts = (word, *word.split("_")) if "_" in word else (word,)
        for part in parts:
            if len(part) >= 3 and part not in STOPWORDS and not part.isdigit():
                seen.setdefault(part, None)
        if len(seen) >= limit:
            break
    return list(seen)[:limit]


TARGET_SCAN_CHARS = 16_000
"""Characters of a text searched for targets: the first 32 paths and symbols of a long tool
output are found well within it, and the scan stays bounded (tens of microseconds)."""


def paths_in(text: str) -> list[str]:
    """File paths with a known code/text extension in ``text`` (its first
    :data:`TARGET_SCAN_CHARS` characters), in first-seen order, each once."""
    return _paths(_runs(text))


def _runs(text: str) -> list[str]:
    """Distinct path-or-symbol-shaped runs of the scanned text, in first-seen order (the
    scan and the de-duplication run in C)."""
    return list(dict.fromkeys(_CANDIDATE.findall(text[:TARGET_SCAN_CHARS])))


def _paths(runs: list[str]) -> list[str]:
    found: dict[str, None] = {}
    for run in runs:
        if "." not in run:
            continue  # a path needs its extension
        run = run.rstrip(".-/")
        path = _PATH.fullmatch(run)
        if path and path.group(1).lower() in _CODE_EXT:
            found.setdefault(run, None)
    return list(found)


def extract_targets(text: str, limit: int = 32) -> list[str]:
    """File paths (with a known code/text extension) and dotted / snake_case / CamelCase symbols
    mentioned in the first :data:`TARGET_SCAN_CHARS` characters of ``text``, paths first, in
    first-seen order, at most ``limit``."""
    runs = _runs(text)
    seen = dict.fromkeys(_paths(runs))
    # Symbols of every run that is not a path, found by one regex scan of the runs joined by
    # newlines (no symbol spans a newline); the order is the runs' first-seen order.
    rest = "\n".join(run for run in runs if run.rstrip(".-/") not in seen)
    for symbol in dict.fromkeys(_SYMBOL.findall(rest)):
        if len(seen) >= limit:
            break
        if symbol not in seen and symbol.rsplit(".", 1)[-1].lower() not in _CODE_EXT:
            seen.setdefault(symbol, None)
    return list(seen)[:limit]


# One pass finds both shapes, leftmost first; a digit run is only taken where no identifier
# starts (so "abc1234" is one identifier token, not also "1234").
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{3,}|[0-9]{4,}")
_MARKERS = frozenset("_./0123456789")


def _is_identifier(token: str) -> bool:
    if token[0].isdigit():  # only the [0-9]{4,} branch starts with a digit
        return True
    if not _MARKERS.isdisjoint(token):
        return True
    return any(c.isupper() for c in token[1:])


def identifier_tokens(text: str) -> set[str]:
    """Distinct identifier-shaped tokens of ``text`` (DESIGN.md "Measures": the
    identifiers the replay counts, and what veil_fsrs' coverage-aware eviction keeps in the prompt).

    Candidates are the non-overlapping, leftmost-longest matches of
    ``[A-Za-z_][A-Za-z0-9_./-]{3,}|[0-9]{4,}`` scanned left to right. A word candidate is kept
    when it holds ``_``, ``.``, ``/``, a digit, or an upper-case letter after its first
    character; a digit-run candidate (4+ digits, not preceded by an identifier start) is always
    kept. Tokens are taken as matched, so trailing ``.``, ``/`` or ``-`` stay part of them
    (``"setup.py."`` at the end of a sentence is the token ``"setup.py."``).

    Examples: ``"src/foo.py"``, ``"my_var"``, ``"getValue"``, ``"v2.0"``, ``"12345"`` are
    tokens; ``"word"``, ``"Hello"``, ``"pre-commit"``, ``"123"``, ``"abc"`` are not.
    """
    # de-duplicated in C first: the Python test runs once per distinct candidate
    return {m for m in set(_TOKEN.findall(text)) if _is_identifier(m)}


IDENTIFIER_SCAN_CHARS = 20_000
"""Characters of an item's content searched by :func:`content_identifiers`."""


def content_identifiers(content: str) -> frozenset[str]:
    """:func:`identifier_tokens` of the first :data:`IDENTIFIER_SCAN_CHARS` characters of an
    item's content (``ContextItem.identifiers``)."""
    return frozenset(identifier_tokens(content[:IDENTIFIER_SCAN_CHARS]))


def item_identifiers(item: Any) -> frozenset[str]:
    """``item.identifiers`` of a :class:`~veil.core.types.ContextItem`, computed once from its
    content with :func:`content_identifiers` and kept on the item when nobody has yet (capture
    does it; items read back from the store do not have them)."""
    if item.identifiers is None:
        item.identifiers = content_identifiers(item.content)
    return item.identifiers
