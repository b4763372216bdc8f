"""Tags and targets pulled from text by rule (no model): words for Jaccard relevance, file paths
and symbols for the "structure" signal (seed 002).

Every scan here is defined by a regular expression (the ``_WORD``, ``_CANDIDATE`` and
``_TOKEN`` patterns below). ASCII text, nearly every tool result, takes a faster route to the
same result: ``str.translate`` turns every character that cannot be part of a match into a
space and ``str.split`` cuts the runs, both in C, 5-6x faster than ``re.findall`` on a file
read. tests/test_tags.py checks each fast route against its pattern on generated text.
"""

from __future__ import annotations

import re
import string
import sys
from collections.abc import Iterable
from typing import Any

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_CANDIDATE = re.compile(r"[\w./-]+")
_PATH = re.compile(r"(?:\.{1,2}/)?(?:[\w.-]+/)*[\w-]+\.([A-Za-z0-9]{1,8})")
SYMBOL_PATTERN = (
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[a-z]+_[a-z0-9_]+|"
    r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+"
)
"""Dotted, snake_case and CamelCase symbols (:func:`extract_targets`)."""
# The same matches with possessive quantifiers (Python 3.11+), 2x faster: giving back part of
# a run of word characters never helps, since a shorter run is followed by a word character
# where the pattern needs ".", "_" or a capital (tests/test_tags.py compares the two).
_SYMBOL_POSSESSIVE = (
    r"[A-Za-z_][A-Za-z0-9_]*+(?:\.[A-Za-z_][A-Za-z0-9_]*+)++|[a-z]++_[a-z0-9_]++|"
    r"[A-Z][a-z0-9]++(?:[A-Z][a-z0-9]++)++"
)
_SYMBOL = re.compile(_SYMBOL_POSSESSIVE if sys.version_info >= (3, 11) else SYMBOL_PATTERN)
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


def _spaces_except(keep: str) -> dict[int, str]:
    """A ``str.translate`` table mapping every ASCII character not in ``keep`` to a space."""
    return {code: " " for code in range(128) if chr(code) not in keep}


_DIGITS = string.digits
_WORD_CHARS = string.ascii_letters + _DIGITS + "_"
_NOT_WORD = _spaces_except(_WORD_CHARS)  # ASCII text: _WORD matches lie in these runs
_NOT_CANDIDATE = _spaces_except(_WORD_CHARS + "./-")  # ASCII text: the runs _CANDIDATE matches


def _candidate_runs(text: str) -> list[str]:
    """``_CANDIDATE.findall(text)``: the maximal runs of word characters, ``.``, ``/`` and
    ``-``, in order (for ASCII text, the pieces left between the other characters)."""
    if not text.isascii():
        return _CANDIDATE.findall(text)
    return text.translate(_NOT_CANDIDATE).split()


def extract_tags(text: str, limit: int = 64) -> list[str]:
    """Lower-case content words of ``text`` (3+ characters, no stop words), in first-seen order,
    at most ``limit``. Identifiers split on ``_`` contribute their parts too.

    A word is a match of ``[A-Za-z_][A-Za-z0-9_]{2,}`` in the lower-cased text; a word that
    holds ``_`` is followed by its parts, and digit-only parts are dropped."""
    lowered = text.lower()
    if lowered.isascii():
        # the runs of word characters, de-duplicated in C; a run's match is the run less its
        # leading digits (so the Python loop below sees each distinct run once)
        words: Iterable[str] = dict.fromkeys(lowered.translate(_NOT_WORD).split())
    else:
        words = dict.fromkeys(_WORD.findall(lowered))
    seen: dict[str, None] = {}
    for word in words:
        if word[0] in _DIGITS:
            word = word.lstrip(_DIGITS)
        if len(word) < 3:
            continue
        if "_" in word:
            seen.setdefault(word, None)  # no stop word holds "_"
            for part in word.split("_"):
                if len(part) >= 3 and part not in STOPWORDS and not part.isdigit():
                    seen.setdefault(part, None)
        elif word not in STOPWORDS:  # it starts with a letter, so it is not all digits
            seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)[:limit]


SCAN_CHARS = 20_000
"""Characters of a text searched for targets (:func:`extract_targets`) and of an item's content
searched for identifiers (:func:`content_identifiers`): the first 32 paths and symbols of a long
tool output are found well within it, and the scan stays bounded."""


def distinct_runs(text: str) -> list[str]:
    """The distinct path-or-symbol-shaped runs (``[\\w./-]+``) of the first
    :data:`SCAN_CHARS` characters of ``text``, in first-seen order: what
    :func:`extract_targets` and :func:`content_identifiers` read, so a caller that needs both
    scans the text once."""
    return list(dict.fromkeys(_candidate_runs(text[:SCAN_CHARS])))


def tags_text(text: str, runs: list[str]) -> str:
    """``text``, or a shorter text with the same :func:`extract_tags` result: the distinct
    runs ``runs`` (``distinct_runs(text)``) joined by spaces, when ``text`` is ASCII and no
    longer than :data:`SCAN_CHARS` (so the runs cover all of it). Every word of the tags lies
    inside a run, and a word is first seen in the first occurrence of a run that holds it, so
    the words come in the same first-seen order (tests/test_tags.py checks it)."""
    if len(text) <= SCAN_CHARS and text.isascii():
        return " ".join(runs)
    return text


def paths_in(text: str) -> list[str]:
    """File paths with a known code/text extension in ``text`` (its first
    :data:`SCAN_CHARS` characters), in first-seen order, each once."""
    return list(dict.fromkeys(_path_runs(distinct_runs(text)).values()))


def _path_runs(runs: list[str]) -> dict[str, str]:
    """The runs of ``runs`` that are file paths with a known extension, each mapped to its path
    (the run less trailing ``.``, ``-`` and ``/``), in order."""
    found: dict[str, str] = {}
    for run in [run for run in runs if "." in run]:  # a path needs its extension
        path = run.rstrip(".-/")
        shape = _PATH.fullmatch(path)
        if shape and shape.group(1).lower() in _CODE_EXT:
            found[run] = path
    return found


def extract_targets(text: str, limit: int = 32, *, runs: list[str] | None = None) -> list[str]:
    """File paths (with a known code/text extension) and dotted / snake_case / CamelCase symbols
    mentioned in the first :data:`SCAN_CHARS` characters of ``text``, paths first, in
    first-seen order, at most ``limit``.

    Args:
        text: the text.
        limit: most targets returned.
        runs: ``distinct_runs(text)`` when the caller has it already (``text`` is then unused).
    """
    if runs is None:
        runs = distinct_runs(text)
    path_runs = _path_runs(runs)
    seen = dict.fromkeys(path_runs.values())
    # Symbols of every run that is not a path, found by one regex scan of the runs joined by
    # newlines (no symbol spans a newline); the order is the runs' first-seen order.
    rest = "\n".join([run for run in runs if run not in path_runs] if path_runs else runs)
    for symbol in dict.fromkeys(_SYMBOL.findall(rest)):
        if len(seen) >= limit:
            break
        if symbol not in seen and symbol.rsplit(".", 1)[-1].lower() not in _CODE_EXT:
            seen[symbol] = None
    return list(seen)[:limit]


# One pass finds both shapes, leftmost first; a digit run is only taken where no identifier
# starts (so "abc1234" is one identifier token, not also "1234").
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{3,}|[0-9]{4,}")
# A match that is not an identifier: no digit, "_", "." or "/", no capital after the first.
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z-]*")


def _identifiers_of_runs(runs: list[str]) -> set[str]:
    # Every _TOKEN character is a run character, so its matches lie inside the runs: scanning
    # the distinct runs joined by newlines finds what scanning the whole text finds.
    plain = _PLAIN_WORD.fullmatch
    return {m for m in set(_TOKEN.findall("\n".join(runs))) if not plain(m)}


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
    return _identifiers_of_runs(list(dict.fromkeys(_candidate_runs(text))))


def content_identifiers(content: str, *, runs: list[str] | None = None) -> frozenset[str]:
    """:func:`identifier_tokens` of the first :data:`SCAN_CHARS` characters of an item's
    content (``ContextItem.identifiers``); ``runs``: ``distinct_runs(content)`` when the caller
    has it already."""
    return frozenset(_identifiers_of_runs(distinct_runs(content) if runs is None else runs))


def item_identifiers(item: Any) -> frozenset[str]:
    """``item.identifiers`` of a :class:`~veil.core.types.ContextItem`, computed once from its
    content with :func:`content_identifiers` and kept on the item when nobody has yet (capture
    does it; items read back from the store do not have them)."""
    if item.identifiers is None:
        item.identifiers = content_identifiers(item.content)
    return item.identifiers
