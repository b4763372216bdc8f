"""Tags and targets pulled from text by rule (no model): words for Jaccard relevance, file paths
and symbols for the "structure" signal (seed 002)."""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_PATH = re.compile(r"(?<![\w/.-])((?:\.{1,2}/)?(?:[\w.-]+/)*[\w-]+\.[A-Za-z0-9]{1,8})(?::\d+)?\b")
_SYMBOL = re.compile(
    r"\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[a-z]+_[a-z0-9_]+|"
    r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)\b"
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
    for match in _WORD.finditer(text):
        word = match.group(0).lower()
        for part in {word, *word.split("_")}:
            if len(part) >= 3 and part not in STOPWORDS and not part.isdigit():
                seen.setdefault(part, None)
        if len(seen) >= limit:
            break
    return list(seen)[:limit]


def extract_targets(text: str, limit: int = 32) -> list[str]:
    """File paths (with a known code/text extension) and dotted / snake_case / CamelCase symbols
    mentioned in ``text``, in first-seen order, at most ``limit``."""
    seen: dict[str, None] = {}
    for match in _PATH.finditer(text):
        path = match.group(1)
        if path.rsplit(".", 1)[-1].lower() in _CODE_EXT:
            seen.setdefault(path, None)
    for match in _SYMBOL.finditer(text):
        sym = match.group(1)
        if sym not in seen and sym.rsplit(".", 1)[-1].lower() not in _CODE_EXT:
            seen.setdefault(sym, None)
        if len(seen) >= limit:
            break
    return list(seen)[:limit]
