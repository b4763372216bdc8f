"""Claims: what a statement asserts, by rule, and when two claims contradict each other.

A belief conflicts with another only when all three hold (no LLM, no score):

1. **Same subject**: the normalised subject (articles, code quotes, a leading discourse marker
   such as "So," or a list marker removed) is equal.
2. **Same aspect**: the same single-valued predicate (:data:`PATTERNS`: "listens on port",
   "version is", "runs on", "is set to", "defaults to", "is located in", "is called", "is") *and*
   values of the same kind (:func:`value_kind`): a version, a number with the same unit, a path,
   a URL, a code literal (``None``, ``"iso"``, ``True``), a class in code quotes ("a ``Const``"),
   a state on one scale of mutually exclusive states (:data:`STATE_SCALES`: running / stopped,
   passing / failing, empty / non-empty...), or a name when the subject names an attribute
   (:data:`ATTRIBUTE_NOUNS`: the branch, the dialect, the encoding...). "The server is running"
   and "the server is slow" are about two aspects of one subject and never conflict; nor do two
   free-text descriptions ("the rule is designed to discourage aliases" / "the rule is working
   as designed"), whose aspect a rule cannot tell.
3. **Incompatible values**: the two values differ (``3.11.5`` vs ``3.9.5``), or one is the
   negation of the other ("``pre_content`` is empty" / "``pre_content`` is not empty").

Statements that assert nothing about a stable subject give no claim (stored as beliefs, never in
a conflict): questions, conditionals and hypotheses ("If ``x`` is empty, ...", "What if the issue
is ...", "Maybe ..."), statements about a pronoun or a discourse noun ("This is the bug", "the
issue is that ...", "the error is ..."), whose referent changes from one sentence to the next.

A value is cut at its first clause boundary ("``filepath`` (which is ``src/project``)" ->
``filepath``) and stripped of adverbs ("now", "still", "currently"); a value followed by a
condition ("``("py", "pyw")`` on Windows", "not ``None`` in this case", "``None`` if not
specified") is a conditional claim and gives none. "``x = 1``" inside a code span, and
"x = 0" in prose unless x is a setting's name (``DATABASE_URL``, ``compaction.threshold``), are
program states or arithmetic, not attributes. Two cross-kind pairs are incompatible values of
one aspect too: an emptiness against a literal that holds something ("x is empty" / "x is
``[';']``"), and ``None`` against an instance of a class ("x is ``None``" / "x is a ``Const``").

The rule's precision and recall are measured on a labelled set of statement pairs drawn from
real agent trajectories (``tests/data/belief_pairs.json``, ``tests/test_belief_pairs.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "listens on port",
        re.compile(
            r"^(?P<s>.+?)\s+(?:listens|is listening|runs|is running|serves|is served)\s+on\s+"
            r"(?:port\s+|(?:https?://)?[\w.-]*:)(?P<v>\d{2,5})\b",
            re.I,
        ),
    ),
    (
        "version is",
        re.compile(r"^(?P<s>.+?)\s+version\s+(?:is\s+)?(?P<v>v?\d+(?:\.\d+)*\S*)", re.I),
    ),
    ("runs on", re.compile(r"^(?P<s>.+?)\s+runs on\s+(?P<v>.+)$", re.I)),
    ("is set to", re.compile(r"^(?P<s>.+?)\s+(?:is|was|gets) set to\s+(?P<v>.+)$", re.I)),
    ("defaults to", re.compile(r"^(?P<s>.+?)\s+defaults to\s+(?P<v>.+)$", re.I)),
    (
        "is located in",
        re.compile(r"^(?P<s>.+?)\s+(?:is located|lives) (?:in|at)\s+(?P<v>.+)$", re.I),
    ),
    # a name given in quotes: "is called with `x`" reports a call, not a name
    (
        "is called",
        re.compile(r"^(?P<s>.+?)\s+(?:is|was) (?:called|named)\s+(?P<v>[`'\"].+)$", re.I),
    ),
    ("is", re.compile(r"^(?P<s>.+?)\s+(?P<op>is|=|equals|==)\s+(?P<v>.+)$", re.I)),
]
"""Single-valued predicates, tried in order (the first that matches wins)."""

STATE_SCALES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "liveness": (
        frozenset({"running", "up", "started", "alive", "listening", "live", "online"}),
        frozenset({"stopped", "down", "dead", "crashed", "offline", "killed", "exited"}),
    ),
    "outcome": (
        frozenset({"passing", "passed", "green", "successful", "succeeding"}),
        frozenset({"failing", "failed", "red", "erroring", "unsuccessful"}),
    ),
    "presence": (
        frozenset({"installed", "present", "available"}),
        frozenset({"missing", "absent", "uninstalled", "unavailable"}),
    ),
    "switch": (frozenset({"enabled", "on", "active"}), frozenset({"disabled", "off", "inactive"})),
    "fill": (frozenset({"empty"}), frozenset({"non-empty", "nonempty", "full"})),
    "openness": (frozenset({"open"}), frozenset({"closed"})),
    "cleanliness": (frozenset({"clean", "unmodified"}), frozenset({"dirty", "modified"})),
    "validity": (frozenset({"valid"}), frozenset({"invalid"})),
    "soundness": (
        frozenset({"correct", "right", "working", "fixed", "resolved", "fine"}),
        frozenset({"incorrect", "wrong", "broken", "unfixed", "unresolved", "buggy"}),
    ),
    "visibility": (frozenset({"public"}), frozenset({"private"})),
    "timing": (frozenset({"sync", "synchronous"}), frozenset({"async", "asynchronous"})),
    "mutability": (frozenset({"mutable"}), frozenset({"immutable", "frozen"})),
    "support": (frozenset({"supported"}), frozenset({"unsupported"})),
}
"""Mutually exclusive states, by scale: ``(positive states, negative states)``. A positive and a
negative state of one scale conflict ("running" / "stopped"); two states on the same side do not
("running" / "started"), nor do states of two scales (a server can be running and private)."""

_STATE = {
    word: (scale, side == 0)
    for scale, sides in STATE_SCALES.items()
    for side, words in enumerate(sides)
    for word in words
}
_EMPTY_LITERALS = frozenset({"[]", "{}", "()", "''", '""', "set()", "empty list", "empty dict"})

LITERALS = frozenset({"true", "false", "none", "null", "nil", "nan", "inf", "-inf", "{}", "[]"})
"""Bare values read as code literals (as if quoted)."""

ATTRIBUTE_NOUNS = frozenset(
    {
        "branch",
        "name",
        "dialect",
        "encoding",
        "mode",
        "backend",
        "driver",
        "database",
        "host",
        "hostname",
        "user",
        "username",
        "language",
        "locale",
        "timezone",
        "model",
        "provider",
        "format",
        "dtype",
        "level",
        "interpreter",
        "shell",
        "os",
        "platform",
        "runtime",
        "framework",
        "templater",
        "commit",
        "port",
        "url",
        "path",
        "directory",
        "dir",
        "root",
        "separator",
        "delimiter",
        "timeout",
        "limit",
        "size",
    }
)
"""Subject head nouns that name an attribute: their one-word values are names that exclude each
other ("the git branch is main" / "the git branch is develop")."""

DISCOURSE_NOUNS = frozenset(
    {
        "issue",
        "problem",
        "error",
        "bug",
        "fix",
        "reason",
        "question",
        "answer",
        "result",
        "difference",
        "key",
        "idea",
        "solution",
        "goal",
        "point",
        "thing",
        "case",
        "change",
        "approach",
        "plan",
        "concern",
        "cause",
        "culprit",
        "output",
        "behavior",
        "behaviour",
        "task",
        "problem here",
        "main issue",
        "real issue",
        "root cause",
        "next step",
        "last step",
        "first step",
        "key insight",
        "pr",
        "test",
        "message",
        "error message",
        "traceback",
        "same",
        "rest",
        "other",
        "logic",
        "situation",
        "expected behavior",
        "current behavior",
    }
)
"""Subjects whose referent changes from one sentence to the next (the issue found now is not the
issue found an hour ago): a statement about them is a finding, not an attribute."""

PRONOUNS = frozenset(
    {
        "this",
        "that",
        "it",
        "which",
        "there",
        "here",
        "these",
        "those",
        "they",
        "he",
        "she",
        "we",
        "i",
        "you",
        "what",
        "one",
        "all",
        "both",
        "each",
        "everything",
        "something",
        "nothing",
        "anything",
        "another",
        "other",
        "same",
    }
)

_NOT_ASSERTION = re.compile(
    r"^(?:if|when|whenever|unless|while|what|why|how|where|who|whether|maybe|perhaps|possibly|"
    r"suppose|supposing|assuming|assume|let's|let|should|could|would|might|does|do|did|is|are|"
    r"was|were|can|will|once|after|before|until|since|because|even if|to|for|elif|else|"
    r"return|assert|def|class|print|import|from|raise|with|yield|lambda|not|self)\b",
    re.I,
)
_LEAD = re.compile(
    r"^(?:(?:[-*•>]|\d+[.)]|#+)\s+|(?:so|now|ok|okay|but|and|also|actually|then|thus|hence|"
    r"therefore|note|wait|good|great|interesting|yes|no|i see|see|indeed|in fact|basically|"
    r"clearly|hmm|ah|oh|perfect|excellent|right|well|still|first|second|finally|again|"
    r"in other words|in summary|summary|confirmed|looking at this)\b[,:!.]*\s+)+",
    re.I,
)
_ARTICLES = re.compile(r"^(?:the|a|an|our|this|my|its|their|your)\s+", re.I)
_ARTICLE_WORDS = frozenset({"the", "a", "an", "our", "my", "its", "their", "your"})
_CLAUSE_END = re.compile(
    r"\s+(?:if|when|whenever|unless|because|since|so|but|and|or|which|where|while|except|as|"
    r"for|after|before|until|though|although|instead|rather|by|in|on|at|from|with|without|"
    r"to|than|via|per|whereas|then)\b|[,;(]|\s[-–—]\s|:\s|\.\s|\.$|!|\?",
    re.I,
)
_ADVERBS = re.compile(
    r"^(?:now|still|already|actually|currently|also|always|just|really|definitely|indeed|"
    r"clearly|probably|likely|correctly|properly|then|therefore|thus|only|simply|already)\s+",
    re.I,
)
_SETTING_NAME = re.compile(
    r"^(?:[A-Z][A-Z0-9]*_[A-Z0-9_]+|[A-Z]{2,}|[a-z][\w-]*(?:\.[a-z][\w-]*)+)$"
)
_CONDITION = re.compile(
    r"^,?\s*(?:if|when|whenever|unless|on|in|for|under|except|depending|"
    r"provided|assuming|once|after|before|until|during)\b",
    re.I,
)
_CALL = re.compile(r"^[\w.\[\]]+\(")
_CONTRACTIONS = re.compile(r"\b(is|are|was|were)n't\b", re.I)
_NEGATION = re.compile(r"^(?:not|no longer|never|isn't|isnt)\s+", re.I)
_VERSION = re.compile(r"^v?\d+(?:\.\d+)+(?:[-.+]?[a-z]+\d*)*$", re.I)
_NUMBER = re.compile(r"^(?P<n>[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*(?P<unit>%|[a-z]{1,12})?$", re.I)
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://\S+$", re.I)
_PATH = re.compile(
    r"^(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]*$"  # a/b/c, ./x, /tmp/cache/
    r"|^[\w-]+\.[a-z0-9]{1,4}$",  # a file name: one dot, a short extension
    re.I,
)
_QUOTED = re.compile(r"^(?:`([^`]+)`|'([^']*)'|\"([^\"]*)\")$")
_LEADING_QUOTE = re.compile(r"^(`[^`]+`|'[^']*'|\"[^\"]*\")")
_IDENTIFIER = re.compile(r"^[\w.:/@+-]+$")
_WORD = re.compile(r"^[a-z][a-z-]*$", re.I)


@dataclass(frozen=True)
class Claim:
    """A statement parsed by rule: normalised ``subject``, ``predicate`` and ``value``.

    ``value`` keeps a leading ``"not "`` for a negated value (see :func:`value_kind`)."""

    subject: str
    predicate: str
    value: str


def _strip_quotes(text: str) -> str:
    return text.strip().strip("`'\" ").strip()


def _subject(raw: str) -> str | None:
    text = _LEAD.sub("", raw.strip())
    if not text or _NOT_ASSERTION.match(text):
        return None
    text = _ARTICLES.sub("", text)
    text = " ".join(text.replace("`", "").split()).lower().rstrip(":,")
    if not text or len(text) > 60 or len(text.split()) > 5:
        return None  # a clause, not a noun phrase
    if re.search(r"[,;:!?()\[\]{}]|\b(?:which|that|when|if|who|can|could|would|may|might)\b", text):
        return None
    if (
        text in _ARTICLE_WORDS
        or text in PRONOUNS
        or text in DISCOURSE_NOUNS
        or text.split()[-1] in DISCOURSE_NOUNS
    ):
        return None
    if text.split()[0] in PRONOUNS:  # "this function", "that value"
        return None
    return text


def _value(raw: str) -> str | None:
    text = raw.strip()
    negated = False
    kind_of = ""
    while True:  # "is now not", "is still not", "is not yet"...
        before = text
        text = _ADVERBS.sub("", text)
        if _NEGATION.match(text):
            negated = not negated
            text = _NEGATION.sub("", text, count=1)
        if text == before:
            break
    article = re.match(r"^(?:a|an)\s+", text, re.I)
    if article:  # "x is a `Const`": what x is an instance of
        kind_of, text = "a ", text[article.end() :]
    if _CALL.match(text):
        return None  # an expression ("np.where(mask, 0, x)"), not a value
    quoted = _LEADING_QUOTE.match(text)
    if quoted:  # a quoted literal ends at its closing quote, whatever follows
        rest = text[quoted.end() :]
        text = quoted.group(1)
    else:
        end = _CLAUSE_END.search(text)
        if end is not None:
            if end.start() == 0:
                return None
            rest = text[end.start() :]
            text = text[: end.start()]
        else:
            rest = ""
        text = _ARTICLES.sub("", text.strip())
    if _CONDITION.match(rest):
        return None  # "is ("py", "pyw") on Windows", "is not None in this case": conditional
    text = " ".join(text.strip().rstrip(".;:!").split()).lower()
    if text.count("`") % 2:  # a code span cut open by the pattern: "`iterlimit = inf`"
        text = text.replace("`", "")
    if not text:
        return None
    return ("not " if negated else "") + kind_of + text


def parse_claim(statement: str) -> Claim | None:
    """Parse ``statement`` with :data:`PATTERNS` (first match wins); None when it asserts nothing
    about a stable subject (see the module docstring) or no pattern matches.

    The subject and value are normalised: lower case, single spaces, no articles; code quotes
    are dropped from the subject and kept on the value (they mark a literal)."""
    text = " ".join(statement.strip().split())
    text = _CONTRACTIONS.sub(lambda m: m.group(1) + " not", text)
    if not text or text.endswith("?"):
        return None
    for predicate, pattern in PATTERNS:
        m = pattern.match(text)
        if not m:
            continue
        if predicate == "is" and text[: m.end("s")].count("`") % 2:
            continue  # "`x = 1`": a program state in a trace, not an attribute of x
        if m.groupdict().get("op") in ("=", "==") and not _SETTING_NAME.match(
            m.group("s").strip("`' ")
        ):
            continue  # "x = 0" in prose is arithmetic or a trace; "DATABASE_URL = ..." a setting
        subject = _subject(m.group("s"))
        value = _value(m.group("v"))
        if subject and value:
            return Claim(subject, predicate, value)
    return None


def value_kind(claim: Claim) -> tuple[str, str, bool] | None:
    """``(kind, canonical value, positive)`` of a claim's value, or None for free text.

    Kinds: ``version``, ``number:<unit>``, ``url``, ``path``, ``literal``, ``state:<scale>``
    (the canonical value is then the scale's side, ``+`` or ``-``; an empty literal such as
    ``[]`` is the state empty), ``type`` ("a ``nodes.Const``", a class in code quotes: its last dotted
    part), ``name``
    (a one-word value of an attribute subject, :data:`ATTRIBUTE_NOUNS`), and for the predicates
    that name their aspect ("listens on port", "version is", "runs on", "is set to", "defaults
    to", "is located in") ``value`` for any other value of at most three words. ``positive`` is
    False for a negated value ("not empty")."""
    value = claim.value
    positive = True
    if value.startswith("not "):
        positive, value = False, value[4:]
    if value.startswith("a "):  # an instance of a class: "a `nodes.Const`" is "a `Const`"
        kind = value[2:]
        if not _QUOTED.match(kind) or len(_strip_quotes(kind).split()) != 1:
            return None  # "a parameter", "a string path": a description, not a class name
        return "type", _strip_quotes(kind).rsplit(".", 1)[-1], positive
    quoted = _QUOTED.match(value)
    bare = next((g for g in quoted.groups() if g is not None), value) if quoted else value
    bare = bare.strip()
    if bare in _EMPTY_LITERALS or (quoted and bare == ""):
        return "state:fill", "+", positive
    if _VERSION.match(bare) and (claim.predicate == "version is" or bare.count(".") >= 2):
        return "version", bare.lstrip("vV"), positive
    number = _NUMBER.match(bare)
    if number:
        unit = (number.group("unit") or "").lower()
        return f"number:{unit}", repr(float(number.group("n"))), positive
    if _URL.match(bare):
        return "url", bare.rstrip("/"), positive
    if _PATH.match(bare) and not _VERSION.match(bare):
        return "path", bare.rstrip("/"), positive
    if quoted or bare in LITERALS:
        return "literal", bare, positive
    if bare in _STATE:
        scale, side = _STATE[bare]
        return f"state:{scale}", "+" if side else "-", positive
    words = bare.split()
    if len(words) == 1 and _IDENTIFIER.match(bare):
        if not _WORD.match(bare):  # my_id, 2.2.0.dev0, src.pkg: an identifier, not prose
            return "literal", bare, positive
        head = claim.subject.split()[-1]
        participle = bare.endswith(("ed", "ing", "ly"))  # a state or manner, not a name
        if head in ATTRIBUTE_NOUNS and not participle:
            return "name", bare, positive
    if claim.predicate != "is" and len(words) <= 3:
        return "value", bare, positive
    return None


def _fill(kind: tuple[str, str, bool]) -> bool | None:
    """Whether a value says its subject is empty (True), holds something (False), or neither
    (None): the state empty / non-empty, or a quoted literal (a non-empty list or string holds
    something; ``None``, booleans and numbers say neither)."""
    name, value, positive = kind
    if name == "state:fill":
        return (value == "+") == positive
    if name == "literal" and positive and value not in LITERALS:
        return False
    return None


def contradicts(a: Claim, b: Claim) -> bool:
    """Whether claims ``a`` and ``b`` contradict each other: same subject, same aspect
    (predicate and value kind), incompatible values (see the module docstring).

    Two cross-kind cases are incompatible values of one aspect too: an emptiness against a
    literal that holds something ("x is empty" / "x is ``[';']``"), and ``None`` against an
    instance of a class ("x is ``None``" / "x is a ``Const``")."""
    if a.subject != b.subject or a.predicate != b.predicate:
        return False
    ka, kb = value_kind(a), value_kind(b)
    if ka is None or kb is None:
        return False
    if ka[0] == kb[0]:
        (_, va, pa), (_, vb, pb) = ka, kb
        if pa and pb:
            return va != vb
        return va == vb and pa != pb  # "x is empty" / "x is not empty"
    fa, fb = _fill(ka), _fill(kb)
    if fa is not None and fb is not None:
        return fa != fb
    kinds = {ka[0]: ka, kb[0]: kb}
    if "type" in kinds and "literal" in kinds:
        literal, instance = kinds["literal"], kinds["type"]
        none = literal[1] in ("none", "null", "nil") and literal[2]
        return none and instance[2] and instance[1] not in ("nonetype", "optional")
    return False
