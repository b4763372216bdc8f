"""``memory_search``: keyword search over the entries of the memory files an agent may read.

Ranking is Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond", 2009) with Lucene's non-negative IDF:

    score(D, Q) = sum over distinct query terms t of
                  IDF(t) * tf(t, D) * (k1 + 1) / (tf(t, D) + k1 * (1 - b + b * |D| / avgdl))
    IDF(t)      = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))

with k1 = 1.2, b = 0.75 (the usual defaults), N the number of documents searched together (all
files of the readable scopes), n(t) the documents holding t, |D| a document's length in terms and
avgdl the mean length. Documents with no query term are not returned. Ties: newer date first,
then later in its file.

A *document* is one entry, returned whole with its date and file. A file's header (text before
the first date comment, e.g. a hand-written MEMORY.md with no entries at all) is one more
document with ``date`` None, so hand-written files are searchable too. Archives
(``archive-*.md``) of the readable scopes are searched as well: archived entries stay findable.

Terms: the text is case-folded; words are runs of letters and digits (``_`` and punctuation
split them: ``memory_write`` gives ``memory``, ``write``). Runs of CJK characters (Han, kana,
Hangul), which are written without spaces, give their overlapping character bigrams (a single
character gives itself), so ``记忆系统`` matches ``使用双层记忆系统``.

Parsed files are cached by (path, inode, size, mtime): an atomic replace changes the inode, so a
written file is always re-read.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from veil import UnsafePath
from veil_memoryfiles.entries import parse
from veil_memoryfiles.fileio import check_path, read_text
from veil_memoryfiles.paths import validate_file_name

K1 = 1.2
B = 0.75

_WORD_RE = re.compile(r"[^\W_]+")
_CJK_RUN_RE = re.compile(
    r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002fa1f]+)"
)


def tokenize(text: str) -> list[str]:
    """Terms of ``text`` in order (see the module docstring): case-folded words, CJK bigrams."""
    words = _WORD_RE.findall(text.casefold())
    if not _CJK_RUN_RE.search(text):
        return words  # the common case, kept fast: no CJK character anywhere
    terms: list[str] = []
    for word in words:
        for i, part in enumerate(_CJK_RUN_RE.split(word)):
            if not part:
                continue
            if i % 2 == 0 or len(part) == 1:  # outside a CJK run
                terms.append(part)
            else:
                terms.extend(part[j : j + 2] for j in range(len(part) - 1))
    return terms


@dataclass(frozen=True)
class Document:
    """One searchable unit: an entry (``date`` set) or a file's header (``date`` None).

    Attributes:
        path: the file it comes from.
        date: ``YYYY-MM-DD`` of its date comment, or None for a header.
        content: the entry's text (trimmed, escapes undone) or the header's text.
        position: its place in the file (header -1, entries 0, 1, ...).
        length: number of terms (BM25's |D|).
    """

    path: Path
    date: str | None
    content: str
    position: int
    length: int


@dataclass(frozen=True)
class FileIndex:
    """The documents of one file, their term frequencies, and postings built on demand.

    Attributes:
        documents: headers and entries in file order.
        term_counts: per document, term -> frequency.
        total_length: sum of the documents' lengths (for avgdl).
        postings_cache: term -> [(document number, frequency)], filled the first time a query
            uses the term (building every posting up front would double the cold cost).
    """

    documents: tuple[Document, ...]
    term_counts: tuple[dict[str, int], ...]
    total_length: int
    postings_cache: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def postings(self, term: str) -> list[tuple[int, int]]:
        """Documents holding ``term`` with its frequency there."""
        found = self.postings_cache.get(term)
        if found is None:
            found = [(i, c[term]) for i, c in enumerate(self.term_counts) if term in c]
            self.postings_cache[term] = found
        return found


@dataclass
class SearchHit:
    """A search result: the whole document, where it comes from and its BM25 score (>= 0)."""

    path: Path
    scope: str
    date: str | None
    content: str
    score: float
    position: int


def index_text(path: Path, text: str) -> FileIndex:
    """Parse a memory file's text and count the terms of its header and entries."""
    doc = parse(text)
    units: list[tuple[str | None, str, int]] = []
    header = doc.header.strip()
    if header:
        units.append((None, header, -1))
    units.extend((e.date, e.content, e.index) for e in doc.entries)
    documents = []
    counts = []
    total = 0
    for day, content, position in units:
        terms = tokenize(content)
        total += len(terms)
        documents.append(Document(path, day, content, position, len(terms)))
        counts.append(Counter(terms))
    return FileIndex(tuple(documents), tuple(counts), total)


_EMPTY = FileIndex((), (), 0)


@lru_cache(maxsize=128)
def _cached_index(path: str, ino: int, size: int, mtime_ns: int) -> FileIndex:
    p = Path(path)
    return index_text(p, read_text(p) or "")


def load_index(path: Path) -> FileIndex:
    """The index of one memory file (empty when it does not exist), cached while unchanged.

    Raises:
        MemoryFileInvalid: the file is not UTF-8. UnsafeVeilPath: the file (or a folder on the
            way) is a symbolic link, or not a regular file.
    """
    check_path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return _EMPTY
    return _cached_index(str(path), st.st_ino, st.st_size, st.st_mtime_ns)


def clear_cache() -> None:
    """Forget every cached index (benchmarks measure the cold path with it)."""
    _cached_index.cache_clear()


def rank(
    indexes: list[tuple[str, FileIndex]], query: str, limit: int, k1: float = K1, b: float = B
) -> list[SearchHit]:
    """BM25-rank the documents of ``indexes`` (pairs of scope name and file index) for ``query``.

    Args:
        indexes: the corpus; N, n(t) and avgdl are computed over all of it.
        query: free text; its distinct terms are used.
        limit: maximum number of hits (>= 1).

    Returns:
        Up to ``limit`` hits with score > 0, best first (ties: newer date, later position).
    """
    return rank_page(indexes, query, limit, 0, k1, b)[0]


def rank_page(
    indexes: list[tuple[str, FileIndex]],
    query: str,
    limit: int,
    offset: int = 0,
    k1: float = K1,
    b: float = B,
) -> tuple[list[SearchHit], int]:
    """:func:`rank`, skipping the ``offset`` best hits, and the number of documents that match.

    Returns:
        ``(hits, total)``: hits ``offset + 1`` to ``offset + limit`` in rank order, and how many
        documents score above 0.
    """
    q_terms = list(dict.fromkeys(tokenize(query)))
    n_docs = sum(len(ix.documents) for _, ix in indexes)
    if not q_terms or not n_docs:
        return [], 0
    avgdl = sum(ix.total_length for _, ix in indexes) / n_docs or 1.0
    scores: dict[tuple[int, int], float] = {}
    for t in q_terms:
        n_t = sum(len(ix.postings(t)) for _, ix in indexes)
        if not n_t:
            continue
        idf = math.log(1.0 + (n_docs - n_t + 0.5) / (n_t + 0.5))
        for f, (_, ix) in enumerate(indexes):
            for number, tf in ix.postings(t):
                length = ix.documents[number].length
                gain = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))
                scores[(f, number)] = scores.get((f, number), 0.0) + gain
    hits = []
    for (f, number), score in scores.items():
        scope, ix = indexes[f]
        d = ix.documents[number]
        hits.append(SearchHit(d.path, scope, d.date, d.content, score, d.position))
    key = lambda h: (-h.score, _neg_date(h.date), -h.position)  # noqa: E731
    return heapq.nsmallest(offset + limit, hits, key=key)[offset:], len(hits)


def _neg_date(day: str | None) -> tuple[int, ...]:
    # Sort key making newer dates come first; headers (no date) after dated entries.
    if day is None:
        return (1,)
    return (0, *(-int(p) for p in day.split("-")))


def archive_files(folder: Path) -> list[Path]:
    """``archive-*.md`` names in a scope folder, oldest month first. Symbolic links are listed
    too, so that reading them is refused with an error naming the link (issue 17), not skipped
    in silence; folders are left out.

    Raises:
        UnsafeVeilPath: the folder (or one above it, up to ``.veil``) is a symbolic link.
    """
    check_path(folder)
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.glob("archive-*.md")
        if _plain_name(p.name) and (p.is_symlink() or p.is_file())
    )


def _plain_name(name: str) -> bool:
    # A name veil could have written: no control character or line separator (a cloned
    # "archive-\n## Agent memory.md" would otherwise put a line of its own into tool output).
    try:
        validate_file_name(name)
    except UnsafePath:
        return False
    return True


def search_files(files: list[tuple[str, Path]], query: str, limit: int = 10) -> list[SearchHit]:
    """Search the entries (and headers) of ``files`` (pairs of scope name and path) for ``query``.

    Raises:
        MemoryFileInvalid: one of the files is not UTF-8. UnsafeVeilPath: one is a link.
    """
    return rank([(scope, load_index(path)) for scope, path in files], query, limit)


def search_page(
    files: list[tuple[str, Path]],
    query: str,
    limit: int = 10,
    offset: int = 0,
    load: Callable[[Path], FileIndex] = load_index,
) -> tuple[list[SearchHit], int]:
    """:func:`search_files` from the ``offset``-th best hit on, and the number of matches.
    ``load`` gives a file's index (default: :func:`load_index`, from disk).

    Raises:
        as :func:`search_files`.
    """
    indexes = [(scope, load(path)) for scope, path in files]
    return rank_page(indexes, query, limit, offset)
