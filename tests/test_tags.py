"""veil.core.prompt.tags: the ASCII fast routes give exactly what their regular expressions give.

The reference for each is the pattern itself, applied with ``re.findall`` to the same text.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from veil.core.prompt import tags

# Characters that matter to the patterns (word characters, run punctuation, separators,
# whitespace of every kind, digits) and some non-ASCII letters and punctuation.
ALPHABET = st.sampled_from(
    list("aZ_9 0./-\n\t\r\x0b\x0c\x1c\x1f'\"(),:;=<>{}[]#@!?*+|\\`~$%^&")
    + list("éßK\u212a\u2014\u201c東😀\u00a0")
)
ASCII_TEXT = st.text(alphabet=st.sampled_from([chr(c) for c in range(128)]), max_size=300)
MIXED_TEXT = st.text(alphabet=ALPHABET, max_size=300)

_TOKEN_REFERENCE = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{3,}|[0-9]{4,}")


def _reference_tags(text: str, limit: int = 64) -> list[str]:
    """extract_tags as its docstring defines it, from the word pattern."""
    seen: dict[str, None] = {}
    for word in dict.fromkeys(re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", text.lower())):
        for part in (word, *word.split("_")) if "_" in word else (word,):
            if len(part) >= 3 and part not in tags.STOPWORDS and not part.isdigit():
                seen.setdefault(part, None)
        if len(seen) >= limit:
            break
    return list(seen)[:limit]


def _reference_targets(text: str, limit: int = 32) -> list[str]:
    """extract_targets as its docstring defines it, from the run, path and symbol patterns."""
    runs = list(dict.fromkeys(re.findall(r"[\w./-]+", text[: tags.SCAN_CHARS])))
    seen: dict[str, None] = {}
    for run in runs:
        path = re.fullmatch(
            r"(?:\.{1,2}/)?(?:[\w.-]+/)*[\w-]+\.([A-Za-z0-9]{1,8})", run.rstrip(".-/")
        )
        if path and path.group(1).lower() in tags._CODE_EXT:
            seen.setdefault(run.rstrip(".-/"), None)
    for run in runs:
        if run.rstrip(".-/") in seen:
            continue
        for symbol in re.findall(tags.SYMBOL_PATTERN, run):
            if symbol.rsplit(".", 1)[-1].lower() not in tags._CODE_EXT:
                seen.setdefault(symbol, None)
    return list(seen)[:limit]


def _reference_identifiers(text: str) -> set[str]:
    found = set()
    for token in _TOKEN_REFERENCE.findall(text):
        if (
            token[0].isdigit()
            or any(c in "_./0123456789" for c in token)
            or any(c.isupper() for c in token[1:])
        ):
            found.add(token)
    return found


@settings(max_examples=400, deadline=None)
@given(st.one_of(ASCII_TEXT, MIXED_TEXT))
def test_fast_routes_equal_the_patterns(text):
    assert tags.extract_tags(text) == _reference_tags(text)
    assert tags.extract_tags(text, limit=2) == _reference_tags(text, limit=2)
    assert tags._candidate_runs(text) == re.findall(r"[\w./-]+", text)
    assert tags.identifier_tokens(text) == _reference_identifiers(text)
    assert tags.extract_targets(text) == _reference_targets(text)
    assert tags.extract_targets(text, limit=2) == _reference_targets(text, limit=2)


@settings(max_examples=400, deadline=None)
@given(st.one_of(ASCII_TEXT, MIXED_TEXT, st.text(alphabet="aZ_.9-/ \n", max_size=80)))
def test_symbol_scan_equals_the_plain_pattern(text):
    """The possessive form of the symbol pattern (Python 3.11+) finds what the plain one finds."""
    assert tags._SYMBOL.findall(text) == re.findall(tags.SYMBOL_PATTERN, text)


@settings(max_examples=400, deadline=None)
@given(st.one_of(ASCII_TEXT, MIXED_TEXT))
def test_tags_of_the_joined_runs_equal_the_tags_of_the_text(text):
    source = tags.tags_text(text, tags.distinct_runs(text))
    assert tags.extract_tags(source) == tags.extract_tags(text)
    assert tags.extract_tags(source, limit=3) == tags.extract_tags(text, limit=3)
    if not text.isascii():
        assert source is text


def test_tags_text_by_hand():
    text = "Read src/Pkg/mod_a.py: parse_config(mod_a) -- parse_config again; 2024abc"
    runs = tags.distinct_runs(text)
    assert tags.tags_text(text, runs) == (
        "Read src/Pkg/mod_a.py parse_config mod_a -- again 2024abc"
    )
    long = "word " * (tags.SCAN_CHARS // 5 + 1)  # longer than the runs cover
    assert tags.tags_text(long, tags.distinct_runs(long)) is long


def test_words_by_hand():
    assert not any("_" in word for word in tags.STOPWORDS)  # extract_tags relies on it
    # words: "abc", "x_y9", "__init__" ("1ab" and "4567" hold none; "9abc" repeats "abc")
    assert tags.extract_tags("12abc 1ab x_y9 __init__ 4567 9abc") == [
        "abc",
        "x_y9",
        "__init__",
        "init",
    ]
    assert tags.extract_tags("the_file abc_123_xyz") == ["the_file", "abc_123_xyz", "abc", "xyz"]
    assert tags.extract_tags("The parse_config() of CONFIG 2024abc") == [
        "parse_config",
        "parse",
        "config",
        "abc",  # a word starts at a letter: "2024abc" gives "abc"
    ]


def test_runs_and_identifiers_by_hand():
    text = "see src/pkg/mod.py:12, then handler_1(x) -- v2.0 and 123456; plain words. 东京/a_b"
    assert tags._candidate_runs(text) == [
        "see", "src/pkg/mod.py", "12", "then", "handler_1", "x", "--", "v2.0", "and", "123456",
        "plain", "words.", "东京/a_b",
    ]  # fmt: skip
    assert tags.identifier_tokens(text) == {
        "src/pkg/mod.py", "handler_1", "v2.0", "123456", "words."
    }  # fmt: skip
    assert tags.identifier_tokens("pre-commit a--- Pre-Commit getValue word") == {
        "Pre-Commit", "getValue"
    }  # fmt: skip
    # "words." keeps its trailing dot (DESIGN.md "Measures"); in "东京/a_b" the ASCII part
    # "a_b" is one character short of a token


def test_targets_and_identifiers_share_one_scan():
    text = "read src/a.py and tests/test_a.py: ConfigLoader.load_all() calls parse_config"
    runs = tags.distinct_runs(text)
    assert (
        tags.extract_targets(text, runs=runs)
        == tags.extract_targets(text)
        == [
            "src/a.py",
            "tests/test_a.py",
            "ConfigLoader.load_all",
            "parse_config",
        ]
    )
    assert tags.content_identifiers(text, runs=runs) == tags.content_identifiers(text)


def test_scans_stop_at_scan_chars():
    filler = "x " * (tags.SCAN_CHARS // 2)  # exactly SCAN_CHARS characters
    text = filler + "late/path.py late_symbol"
    assert tags.extract_targets(text) == []
    assert tags.content_identifiers(text) == frozenset()
    assert tags.identifier_tokens(text) == {"late/path.py", "late_symbol"}  # the measure: all


CODE_PIECES = st.sampled_from(
    [
        "src/a.py", "src/a.py.", "./b.json", "../c/d.ts/", "a.py", "x.unknown", "mod_x", "FooBar",
        "JsOn", "Json.Py", "os.path.join", "handler_5_0", "v2.0", "12345", "CONFIG", "the_file",
        "parse_config", "__init__", "a-b.md", "é.py", "東京/x.py", "pkg.mod.Class",
    ]
)  # fmt: skip
CODE_TEXT = st.lists(
    st.tuples(CODE_PIECES, st.sampled_from([" ", "\n", "(", "'", ": ", ".", "/", ", "])),
    max_size=60,
).map(lambda pairs: "".join(piece + sep for piece, sep in pairs))


@settings(max_examples=300, deadline=None)
@given(CODE_TEXT)
def test_targets_and_tags_of_code_equal_the_references(text):
    """Paths, symbols and tags of code-like text (the shapes random text rarely forms)."""
    for limit in (1, 5, 32):
        assert tags.extract_targets(text, limit) == _reference_targets(text, limit)
    for limit in (1, 5, 64):
        assert tags.extract_tags(text, limit) == _reference_tags(text, limit)
