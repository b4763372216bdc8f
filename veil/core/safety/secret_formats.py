"""What a credential looks like: the rules :mod:`veil.core.safety.redaction` applies to text.

Each :class:`Rule` finds one kind of credential and replaces the secret part of each match with
``[redacted:NAME]`` (NAME names the kind: ``github_token``, ``private_key``,
``assignment:API_TOKEN``...). A rule also lists its *anchors*: literal strings at least one of
which occurs in every text the rule can match. The redactor looks for all anchors of all rules in
one pass and runs only the rules whose anchors it found, so the common case, a tool output that
holds no credential, costs one scan (:mod:`veil.core.safety.redaction`).

Where the formats come from (each rule's ``source`` names its own):

* vendors' documented token formats (GitHub's ``ghp_`` / ``github_pat_`` prefixes, GitLab's token
  prefixes, Slack's token types, Stripe's key prefixes, AWS's unique-identifier prefixes...);
* the rules of gitleaks' default configuration (``config/gitleaks.toml``, rule ids quoted), a
  maintained catalogue of credential formats used by secret scanners;
* RFC 7468 (PEM labels), RFC 7519 (JWT), RFC 7617 (HTTP Basic), RFC 6750 (Bearer), RFC 3986
  (``userinfo`` in URLs).

Values assigned to secret-looking names (``*_TOKEN``, ``*_KEY``, ``*_SECRET``, ``PASSWORD``...)
are judged by :func:`secret_name` and :func:`secret_value`; the same two functions decide which
environment variables hold secrets veil knows (:func:`veil.core.safety.redaction.environment_secrets`).
detect-secrets (Yelp) was measured as the library alternative and not used: its per-line
plugins took 16 ms per KB of real tool output (this module: a few µs), and its entropy plugins
flag git SHAs and identifiers such as ``TOKEN_LIMIT``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

PLACEHOLDER = "[redacted:{}]"
"""How a secret is replaced; ``{}`` is the kind (:attr:`Rule.name`)."""
BARE_PLACEHOLDER = "[redacted]"
"""How a secret is replaced where its kind is not told (provider error messages)."""
PLACEHOLDER_OPENING = "[redacted"
"""What every placeholder starts with (a cheap test before :data:`PLACEHOLDER_PATTERN`)."""

PLACEHOLDER_PATTERN = re.compile(r"\[redacted(?::[A-Za-z0-9_.:\-]{1,80})?\]")
"""A placeholder in text (``[redacted:openai_key]``; plain ``[redacted]`` from error messages)."""


def placeholder(name: str) -> str:
    """``[redacted:NAME]``."""
    return PLACEHOLDER.format(name)


# --------------------------------------------------------------------------------------------
# Names and values


_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# `<prefix>_key` names that are not credentials (database keys, caches, i18n, public halves)
_KEY_NOT_SECRET = frozenset(
    """public pub primary foreign sort cache partition hash range row object dict map lookup
    group unique composite natural surrogate shard sharding routing idempotency dedup dedupe
    message translation i18n react list index registry config setting settings state store
    storage bucket file path hot order join parent child dictionary memo redis lock ssh gpg pgp
    gnupg column field meta metadata schema name label correlation trace cursor event id
    keyboard foreign_""".split()
)
# `<prefix>_token` names that are not credentials (tokenizers, pagination, counts, parsers)
_TOKEN_NOT_SECRET = frozenset(
    """next page continuation pagination sync resume cursor start end stop eos bos pad unk sep
    cls mask special max min num total input output prompt completion cached reasoning sos
    image audio vision added first last current prev previous lexer parse parser syntax
    cancellation cancel""".split()
)
# single words ending in "key" that name credentials (``apiKey`` splits in two, ``APIKEY`` not)
_KEY_WORDS = frozenset(
    """apikey secretkey privatekey accesskey authkey masterkey signingkey encryptionkey
    licensekey clientkey appkey devkey serverkey subscriptionkey accountkey sharedkey
    webhookkey sessionkey""".split()
)
PASSWORD_WORDS = ("password", "passwd", "passphrase")


def name_words(name: str) -> list[str]:
    """``name`` cut into lower-case words at ``_ - .``, digits and camelCase humps:
    ``X-API-Key`` -> ``["x", "api", "key"]``, ``APIKey`` -> ``["api", "key"]``."""
    return [w.lower() for w in _NAME_WORDS.findall(name)]


@functools.lru_cache(maxsize=4096)  # the same keys and variable names come back all the time
def secret_name(name: str) -> bool:
    """Whether a variable, field, header or flag called ``name`` holds a credential.

    Its last word decides: a password word (``password``, ``passwd``, ``passphrase``, also
    glued: ``PGPASSWORD``), ``token``, ``secret``, ``credential(s)``, ``auth``, or ``key`` /
    ``pwd`` / ``pass`` / ``pat`` after another word (``API_KEY``, ``DB_PASS``, ``GITLAB_PAT``;
    not a bare ``key``, nor ``PWD``, the shell's working directory). Names that end in another
    word are not (``TOKEN_LIMIT``, ``password_field``, ``max_tokens``), nor well-known keys and
    tokens that are no credentials (``sort_key``, ``cache_key``, ``public_key``, ``next_token``,
    ``eos_token``).
    """
    words = name_words(name)
    if not words:
        return False
    last = words[-1]
    prev = words[-2] if len(words) > 1 else None
    if last.endswith(PASSWORD_WORDS) or last.endswith("secret"):
        return True
    if last == "token":
        return prev not in _TOKEN_NOT_SECRET
    if last.endswith("token"):  # authtoken, accesstoken...
        return True
    if last == "key":
        return prev is not None and prev not in _KEY_NOT_SECRET
    if last in _KEY_WORDS or last in ("credential", "credentials", "auth"):
        return True
    if last in ("pwd", "pass", "pat"):
        return prev is not None
    return False


_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,47}", re.ASCII)
_LONG_PART = re.compile(r"[A-Za-z0-9]{21}", re.ASCII)


def assignment_label(name: str) -> str:
    """The NAME shown for a value assigned to ``name`` (``assignment:<label>``): the name as
    written, unless it is long or holds a long random-looking part (a name glued to a token
    must not carry the token into the placeholder); then its last word."""
    if _LABEL.fullmatch(name) and not _LONG_PART.search(name):
        return name
    words = name_words(name)
    return words[-1] if words else "value"


def password_name(name: str) -> bool:
    """Whether ``name`` names a password (its values may be short and less random)."""
    words = name_words(name)
    return bool(words) and (words[-1].endswith(PASSWORD_WORDS) or words[-1] in ("pwd", "pass"))


def shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value``'s characters in bits per character (0 for ``""``): the
    measure secret scanners (truffleHog, detect-secrets) use to tell random strings from words.
    """
    n = len(value)
    if not n:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


_PLACEHOLDER_WORDS = (
    "example",
    "placeholder",
    "changeme",
    "change_me",
    "change-me",
    "your_",
    "your-",
    "yourpass",
    "yourtoken",
    "yourkey",
    "redacted",
    "xxxx",
    "<",
    "...",
)
_NOT_VALUES = frozenset(
    "true false null none nil undefined required optional yes no on off empty default".split()
)
_DOTTED_CODE = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_SNAKE_WORDS = re.compile(r"[a-z]+(?:[_-][a-z]+)+")
_CAMEL_WORD = re.compile(r"[A-Za-z][a-z]+(?:[A-Z][a-z]+)+")
_WINDOWS_PATH = re.compile(r"[A-Za-z]:[\\/]")
_FILE_NAME = re.compile(r"[\w.-]+\.(?:pem|key|json|ya?ml|txt|env|cfg|ini|toml|crt|p12|pfx|der)")


# a shell or template reference: ``$VAR`` at the start, ``${...}`` / ``$(...)``, or ``$NAME``
# in capitals anywhere (``prefix$HOME``); a ``$`` inside random text is a character
# (``Sup3r$ecretTail``)
_TEMPLATE_DOLLAR = re.compile(r"\A\$|\$[{(]|\$[A-Z_][A-Z0-9_]*(?![a-z])")


def placeholder_value(value: str) -> bool:
    """Whether ``value`` is a template or a stand-in rather than a credential: it holds a
    ``$`` reference (``$VAR`` at its start, ``${``, ``$(``, ``$NAME`` in capitals), braces, angle brackets, ``%s`` / ``%(``, a mask (``***``), an already redacted part, a word
    such as ``example`` / ``changeme`` / ``your_...``, or repeats one or two characters."""
    low = value.lower()
    if any(c in value for c in "{}<>") or "%s" in value or "%(" in value:
        return True
    if "$" in value and _TEMPLATE_DOLLAR.search(value):
        return True
    if "***" in value or value.count("*") * 2 > len(value):
        return True
    if "[redacted" in low or any(w in low for w in _PLACEHOLDER_WORDS):
        return True
    return len(set(low)) <= 2


def secret_value(value: str, *, password: bool = False) -> bool:
    """Whether ``value``, assigned to a secret name, looks like a real credential.

    Args:
        value: the assigned text, without quotes.
        password: the name is a password's (:func:`password_name`): 6 characters and 2 bits of
            entropy per character are enough; other credentials need 8 and 2.5.

    Not credentials: placeholders (:func:`placeholder_value`), ``true`` / ``null`` and the
    like, numbers, paths, file names and URLs, code (dotted names such as ``os.environ``,
    ``snake_case`` words, ``CONSTANT_NAMES``), and letters-only words (``Required``,
    ``passwordField``; a letters-only value counts only when it is 16+ characters of mixed case
    that is no camelCase word). What is left must reach the entropy floor.
    """
    if len(value) < (6 if password else 8) or len(value) > 512:
        return False
    if placeholder_value(value) or value.lower() in _NOT_VALUES:
        return False
    if value.isdigit() or value[0] in "/~." or _WINDOWS_PATH.match(value) or "://" in value:
        return False
    if _FILE_NAME.fullmatch(value) or _DOTTED_CODE.fullmatch(value):
        return False
    if _CONSTANT.fullmatch(value) or _SNAKE_WORDS.fullmatch(value):
        return False
    if value.isalpha():
        if value.islower() or value.isupper() or value.istitle() or _CAMEL_WORD.fullmatch(value):
            return False
        if len(value) < 16:
            return False
    return shannon_entropy(value) >= (2.0 if password else 2.5)


# --------------------------------------------------------------------------------------------
# Rules


@dataclass(frozen=True)
class Rule:
    """One kind of credential.

    Attributes:
        name: the placeholder's NAME (``[redacted:NAME]``); assignment rules name each match
            after its variable instead (:meth:`replacement`).
        anchors: literal strings, one of which occurs in every text the rule can match (the
            redactor's gate; case-sensitive).
        pattern: the regular expression; its group ``s`` is the secret (the whole match when
            the pattern has no such group).
        check: a further test of the secret, or of the pattern's group ``b`` when it has one
            (``None``: every match counts).
        source: where the format is documented.
        gate_words: lower-case strings for the plain gate (no Aho-Corasick automaton): one of
            them occurs in ``text.lower()`` whenever an anchor occurs in ``text``; ``()`` uses
            the anchors themselves.
    """

    name: str
    anchors: tuple[str, ...]
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None
    source: str = ""
    gate_words: tuple[str, ...] = field(default=())

    def replacement(self, match: re.Match[str]) -> str | None:
        """The match's text with its secret replaced, or None to leave it."""
        group = "s" if "s" in self.pattern.groupindex else 0
        secret = match.group(group)
        checked = match.group("b") if "b" in self.pattern.groupindex else secret
        if secret is None or (self.check is not None and not self.check(checked)):
            return None
        return _splice(match, group, placeholder(self.name))

    def apply(self, text: str) -> str:
        """``text`` with this rule's secrets replaced (``text`` itself when there is none)."""
        pieces: list[str] = []
        done = 0
        for match in self.pattern.finditer(text):
            replaced = self.replacement(match)
            if replaced is not None:
                pieces += (text[done : match.start()], replaced)
                done = match.end()
        if not pieces:
            return text
        pieces.append(text[done:])
        return "".join(pieces)


def _splice(match: re.Match[str], group: str | int, replacement: str) -> str:
    start, end = match.span(group)
    whole = match.group(0)
    base = match.start()
    return whole[: start - base] + replacement + whole[end - base :]


def _has_digit_and_letter(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _mixed_case(value: str) -> bool:
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


def _token_like(value: str) -> bool:
    """A bearer token rather than a word: letters and digits mixed, or 20+ characters of
    mixed case that are not a camelCase word; not a placeholder."""
    if placeholder_value(value):
        return False
    core = value.rstrip("=")
    if _has_digit_and_letter(core):
        return shannon_entropy(core) >= 2.5
    return len(core) >= 20 and _mixed_case(core) and not _CAMEL_WORD.fullmatch(core)


def _basic_credentials(value: str) -> bool:
    """RFC 7617: base64 of ``user-id:password`` (printable text holding a colon)."""
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return ":" in text and text.isprintable() and not placeholder_value(text)


def _not_placeholder(value: str) -> bool:
    return not placeholder_value(value)


def _url_password(value: str) -> bool:
    """A password in a URL's userinfo (RFC 3986 3.2.1): anything but a placeholder, a port-like
    number, or the words documentation uses (``password``, ``pass``, ``secret``...)."""
    low = value.lower()
    if low in ("password", "passwd", "pass", "pw", "pwd", "secret", "token", "x", "xxx"):
        return False
    if "[redacted" in low:
        return False
    if value.isdigit() and len(value) <= 5:
        return False
    return "$" not in value and "{" not in value and "<" not in value and "*" not in value


# Character runs a token is made of, and what may not stand right before / after one.
_B = r"(?<![A-Za-z0-9_])"
_E = r"(?![A-Za-z0-9_])"


def _rule(
    name: str,
    anchors: tuple[str, ...] | str,
    pattern: str,
    source: str,
    check: Callable[[str], bool] | None = None,
    flags: int = 0,
    gate_words: tuple[str, ...] = (),
) -> Rule:
    if isinstance(anchors, str):
        anchors = (anchors,)
    return Rule(
        name, anchors, re.compile(pattern, flags | re.ASCII), check, source, tuple(gate_words)
    )


PEM_RULE = _rule(
    "private_key",
    "PRIVATE KEY",
    # the whole block, BEGIN to END; a block cut short (no END line) up to the end of its body
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]{0,20000}?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"|[A-Za-z0-9+/=\s\\:,.-]*)",
    "RFC 7468 labels (PRIVATE KEY, RSA / EC / DSA / ENCRYPTED PRIVATE KEY), OpenSSH's "
    "OPENSSH PRIVATE KEY, RFC 4880's PGP PRIVATE KEY BLOCK; gitleaks private-key",
)

AWS_KEY_ID = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z2-7]{16}(?![A-Za-z0-9])")
"""An AWS access key id of an IAM user (``AKIA``) or of temporary credentials (``ASIA``): the
prefix and 16 base-32 characters (AWS IAM docs, "Unique identifiers: prefixes")."""

AWS_SECRET_LINES = 3
"""How many lines before and after an access key id a bare secret access key is looked for:
``aws configure`` output, a CI log, a ``credentials.csv`` row and an environment listing show
the pair on one line or on the next one or two."""

AWS_SECRET_REACH = 1000
"""Most characters either side of a key id searched for its secret (a long line of minified
JSON is not read whole)."""

AWS_SECRET_MIN_ENTROPY = 4.1
"""Bits per character a secret access key must reach: 40 random base-64 characters carry 4.78
on average and never fell under 4.25 in 20,000 samples, while 40-character paths and
identifiers (``home/runner/work/MyProject/MyProject/src``: 3.83) mostly stay under it."""

_AWS_SECRET = re.compile(
    # 40 characters of AWS's base-64 alphabet (30 random bytes), not part of a longer word,
    # base-64 blob, dotted token (a JWT's segments) or identifier
    r"(?<![A-Za-z0-9+/_-])(?<![A-Za-z0-9_-]\.)[A-Za-z0-9+/]{40}"
    r"(?![A-Za-z0-9+/=_-])(?!\.[A-Za-z0-9_-])",
    re.ASCII,
)


def aws_secret_like(value: str) -> bool:
    """Whether a 40-character token looks like an AWS secret access key: upper- and lower-case
    letters (a hex digest has one case only), a digit or ``+`` / ``/``, entropy of at least
    :data:`AWS_SECRET_MIN_ENTROPY`, and no placeholder word (AWS's documented example key holds
    ``EXAMPLE``: :func:`placeholder_value`)."""
    return (
        _mixed_case(value)
        and any(c.isdigit() or c in "+/" for c in value)
        and shannon_entropy(value) >= AWS_SECRET_MIN_ENTROPY
        and not placeholder_value(value)
    )


class AwsSecretNearKeyIdRule(Rule):
    """A bare AWS secret access key near its key id (issue 33): ``aws configure get`` printing
    the id and then the secret, ``aws configure list`` or a CI log showing both, an environment
    listing whose variables have no telling names. A 40-character token that passes
    :func:`aws_secret_like` within :data:`AWS_SECRET_LINES` lines of an ``AKIA`` / ``ASIA`` key
    id (or of the placeholder an earlier pass left for one) is that key's secret and becomes
    ``[redacted:aws_secret_key]``. Far from a key id such a token is left alone: the rule
    would otherwise take every random 40-character string."""

    def apply(self, text: str) -> str:
        """``text`` with the secrets near each key id replaced (``text`` itself when none)."""
        ids = [m.span() for m in AWS_KEY_ID.finditer(text)]
        marker = placeholder("aws_access_key")
        start = text.find(marker)
        while start >= 0:
            ids.append((start, start + len(marker)))
            start = text.find(marker, start + 1)
        if not ids:
            return text
        spans: set[tuple[int, int]] = set()
        for begin, end in ids:
            low, high = _lines_around(text, begin, end, AWS_SECRET_LINES, AWS_SECRET_REACH)
            # searched a token's length past ``high``, so the look-ahead at a match's end
            # still sees the text that follows it
            for match in _AWS_SECRET.finditer(text, low, min(len(text), high + 41)):
                if match.end() <= high and aws_secret_like(match.group(0)):
                    spans.add(match.span())
        if not spans:
            return text
        pieces: list[str] = []
        done = 0
        for begin, end in sorted(spans):
            pieces += (text[done:begin], placeholder(self.name))
            done = end
        pieces.append(text[done:])
        return "".join(pieces)


def _lines_around(text: str, begin: int, end: int, lines: int, reach: int) -> tuple[int, int]:
    """The span of ``text`` from the start of the line ``lines`` lines above the one holding
    ``text[begin:end]`` to the end of the line ``lines`` lines below it, cut to ``reach``
    characters either side."""
    low = begin
    for _ in range(lines + 1):
        low = text.rfind("\n", 0, low)
        if low < 0:
            low = 0
            break
    high = end
    for _ in range(lines + 1):
        found = text.find("\n", high)
        if found < 0:
            high = len(text)
            break
        high = found + 1
    return max(low, begin - reach), min(high, end + reach)


AWS_SECRET_RULE = AwsSecretNearKeyIdRule(
    "aws_secret_key",
    ("AKIA", "ASIA", placeholder("aws_access_key")),
    _AWS_SECRET,
    None,
    "AWS IAM docs, 'Managing access keys' (a secret access key is 40 characters, shown with its "
    "access key id; 'Unique identifiers: prefixes' for the id)",
)


FORMAT_RULES: tuple[Rule, ...] = (
    _rule(
        "anthropic_key",
        "sk-ant-",
        _B + r"sk-ant-[A-Za-z0-9_-]{20,}",
        "Anthropic API keys sk-ant-api03-..., admin keys sk-ant-admin01-...; gitleaks "
        "anthropic-api-key, anthropic-admin-api-key",
    ),
    _rule(
        "openrouter_key",
        "sk-or-",
        _B + r"sk-or-[A-Za-z0-9_-]{20,}",
        "OpenRouter keys sk-or-v1-<64 hex> (seed 000's auth.json example: sk-or-v1-...)",
    ),
    _rule(
        "openai_key",
        "sk-",
        _B + r"sk-(?P<b>(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20,})"
        r"(?![A-Za-z0-9_-])",
        "OpenAI keys: sk-<48 alphanumerics holding T3BlbkFJ>, sk-proj- / sk-svcacct- / "
        "sk-admin- project and service keys (gitleaks openai-api-key); the sk-<32 hex> keys "
        "of OpenAI-compatible providers (DeepSeek)",
        check=_has_digit_and_letter,
    ),
    _rule(
        "google_api_key",
        "AIza",
        _B + r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])",
        "Google API keys AIza + 35 characters; gitleaks gcp-api-key",
    ),
    _rule(
        "google_oauth_token",
        ("ya29.", "GOCSPX-"),
        _B + r"(?:ya29\.[0-9A-Za-z_-]{20,}|GOCSPX-[A-Za-z0-9_-]{28})",
        "Google OAuth 2.0 access tokens ya29. and client secrets GOCSPX-",
    ),
    _rule(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{50,})",
        "GitHub docs, 'About authentication to GitHub: GitHub's token formats' (ghp_ personal, "
        "gho_ OAuth, ghu_ / ghs_ app, ghr_ refresh, github_pat_ fine-grained); gitleaks "
        "github-pat, github-fine-grained-pat",
    ),
    _rule(
        "gitlab_token",
        (
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glsoat-",
            "glcbt-",
            "glft-",
            "glimt-",
            "glagent-",
            "gloas-",
            "glffct-",
            "GR1348941",
        ),
        _B + r"(?:gl(?:pat|dt|rt|ptt|soat|cbt|ft|imt|agent|oas|ffct)-[A-Za-z0-9_.-]{20,}"
        r"|GR1348941[A-Za-z0-9_-]{20,})",
        "GitLab docs, 'GitLab token overview: token prefixes'; gitleaks gitlab-pat and others",
    ),
    _rule(
        "slack_token",
        ("xoxa-", "xoxb-", "xoxe-", "xoxo-", "xoxp-", "xoxr-", "xoxs-", "xapp-"),
        _B + r"(?:xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})",
        "Slack docs, 'Token types' (xoxb bot, xoxp user, xapp app-level...); gitleaks "
        "slack-bot-token, slack-user-token, slack-app-token",
        check=_has_digit_and_letter,
    ),
    _rule(
        "slack_webhook",
        "hooks.slack.com/",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9+/_-]{20,})",
        "Slack incoming-webhook URLs; gitleaks slack-webhook-url",
    ),
    _rule(
        "stripe_key",
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_", "whsec_"),
        _B + r"(?:[sr]k_(?:live|test)_[A-Za-z0-9]{20,}|whsec_[A-Za-z0-9]{24,})",
        "Stripe docs, 'API keys' (secret sk_, restricted rk_) and webhook signing secrets "
        "whsec_; gitleaks stripe-access-token",
    ),
    AWS_SECRET_RULE,  # before the key id rule: it finds the secret by the id
    _rule(
        "aws_access_key",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}(?![A-Za-z0-9])",
        "AWS IAM docs, 'Unique identifiers: prefixes' (AKIA long-term, ASIA temporary); "
        "gitleaks aws-access-token",
    ),
    _rule(
        "huggingface_token",
        ("hf_", "api_org_"),
        _B + r"(?:hf_|api_org_)[A-Za-z0-9]{30,}" + _E,
        "Hugging Face docs, 'User access tokens' (hf_ + 34 letters); gitleaks "
        "huggingface-access-token, huggingface-organization-api-token",
        check=_mixed_case,
    ),
    _rule(
        "npm_token",
        "npm_",
        _B + r"npm_[A-Za-z0-9]{36}" + _E,
        "npm access tokens npm_ + 36 (GitHub blog 2021, 'npm token format'); gitleaks "
        "npm-access-token",
    ),
    _rule(
        "pypi_token",
        ("pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"),
        r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}",
        "PyPI API tokens (macaroons prefixed pypi-, for pypi.org / test.pypi.org); gitleaks "
        "pypi-upload-token",
    ),
    _rule(
        "groq_key",
        "gsk_",
        _B + r"gsk_[A-Za-z0-9]{48,}" + _E,
        "Groq API keys gsk_ + 52",
    ),
    _rule(
        "xai_key",
        "xai-",
        _B + r"xai-[A-Za-z0-9]{60,}" + _E,
        "xAI API keys xai- + 80",
    ),
    _rule(
        "perplexity_key",
        "pplx-",
        _B + r"pplx-[A-Za-z0-9]{40,}" + _E,
        "Perplexity API keys pplx- + 48; gitleaks perplexity-api-key",
    ),
    _rule(
        "replicate_token",
        "r8_",
        _B + r"r8_[A-Za-z0-9]{37}" + _E,
        "Replicate API tokens r8_ + 37",
    ),
    _rule(
        "sendgrid_key",
        "SG.",
        _B + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])",
        "SendGrid API keys SG.<22>.<43>; gitleaks sendgrid-api-token",
    ),
    _rule(
        "mailgun_key",
        "key-",
        r"key-(?<![A-Za-z0-9_]key-)[0-9a-f]{32}" + _E,
        "Mailgun private API keys key- + 32 hex; gitleaks mailgun-private-api-token",
    ),
    _rule(
        "digitalocean_token",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
        _B + r"do[opr]_v1_[a-f0-9]{64}" + _E,
        "DigitalOcean tokens dop_v1_ / doo_v1_ / dor_v1_ + 64 hex; gitleaks digitalocean-pat",
    ),
    _rule(
        "dockerhub_token",
        "dckr_pat_",
        _B + r"dckr_pat_[A-Za-z0-9_-]{27,}",
        "Docker Hub personal access tokens dckr_pat_",
    ),
    _rule(
        "databricks_token",
        "dapi",
        _B + r"dapi[a-f0-9]{32}(?:-\d)?" + _E,
        "Databricks personal access tokens dapi + 32 hex; gitleaks databricks-api-token",
    ),
    _rule(
        "age_secret_key",
        "AGE-SECRET-KEY-1",
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        "age secret keys (Bech32, age-encryption.org/v1); gitleaks age-secret-key",
    ),
    _rule(
        "shopify_token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _E,
        "Shopify access tokens shpat_ / shpca_ / shppa_ / shpss_; gitleaks shopify-*",
    ),
    _rule(
        "atlassian_token",
        "ATATT3",
        _B + r"ATATT3[A-Za-z0-9_=-]{150,}",
        "Atlassian API tokens ATATT3...; gitleaks atlassian-api-token",
    ),
    _rule(
        "linear_key",
        "lin_api_",
        _B + r"lin_api_[A-Za-z0-9]{40}" + _E,
        "Linear API keys lin_api_ + 40; gitleaks linear-api-key",
    ),
    _rule(
        "newrelic_key",
        "NRAK-",
        _B + r"NRAK-[A-Z0-9]{27}" + _E,
        "New Relic user API keys NRAK-; gitleaks new-relic-user-api-key",
    ),
    _rule(
        "postman_key",
        "PMAK-",
        _B + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _E,
        "Postman API keys PMAK-<24 hex>-<34 hex>; gitleaks postman-api-token",
    ),
    _rule(
        "telegram_bot_token",
        ":A",
        r"(?<![A-Za-z0-9])[0-9]{8,10}:A[A-Za-z0-9_-]{34}(?![A-Za-z0-9_-])",
        "Telegram Bot API tokens <bot id>:<35 characters starting with A>; gitleaks "
        "telegram-bot-api-token",
    ),
    _rule(
        "jwt",
        "eyJ",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        "RFC 7519 JSON Web Tokens: base64url header and payload, each a JSON object ('eyJ'), "
        "and a signature; gitleaks jwt",
    ),
    _rule(
        "azure_sas_signature",
        "sig=",
        r"(?<=[?&])sig=(?P<s>[A-Za-z0-9%+/=]{30,})",
        "Azure shared access signatures: the sig= query parameter",
    ),
)


_HEADER_SCHEME = (
    r"(?P<scheme>[Bb]earer|BEARER|[Bb]asic|BASIC|[Tt]oken|[Bb]ot|SSWS|GenieKey|"
    r"[Aa]pi-?[Kk]ey|Splunk|Digest|Negotiate|NTLM|AWS4-HMAC-SHA256|SharedKey(?:Lite)?)"
)

AUTHORIZATION_RULE = _rule(
    "authorization",
    ("Authorization", "authorization", "AUTHORIZATION"),
    r"(?:Authorization|authorization|AUTHORIZATION)(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?"
    rf"(?:{_HEADER_SCHEME}[ \t]+)?"
    r"(?P<s>[^\s\"'\\,;]{6,}(?:[ \t]*,[ \t]*[A-Za-z]+=[^\s\"'\\,;]+)*)",
    "RFC 9110 Authorization / Proxy-Authorization header values (RFC 6750 Bearer, RFC 7617 "
    "Basic, Digest, AWS SigV4...)",
)


class AuthorizationRule(Rule):
    """``Authorization:`` values, named after their scheme (``bearer``, ``basic``, else
    ``authorization``); a value with no scheme must look random (:func:`secret_value`)."""

    def replacement(self, match: re.Match[str]) -> str | None:
        secret = match.group("s")
        scheme = (match.group("scheme") or "").lower()
        if placeholder_value(secret):
            return None
        if not scheme and not secret_value(secret):
            return None
        name = scheme if scheme in ("bearer", "basic") else "authorization"
        return _splice(match, "s", placeholder(name))


COOKIE_RULE = _rule(
    "cookie",
    ("Cookie", "cookie", "COOKIE"),
    r"(?<![A-Za-z0-9_])(?:Set-|set-|SET-)?(?:Cookie|cookie|COOKIE)(?:\\?[\"'])?[ \t]*:[ \t]*"
    r"(?:\\?[\"'])?(?P<s>[^\r\n\"'\\]{1,4096})",
    "RFC 6265 Cookie / Set-Cookie headers: name=value pairs, separated by '; '",
)
_COOKIE_PAIR = re.compile(r"(?P<name>[^\s=;,]{1,128})=(?P<value>[^\s;,]{1,1024})", re.ASCII)


class CookieRule(Rule):
    """``Cookie:`` / ``Set-Cookie:`` headers: each pair's value that looks random
    (:func:`secret_value`: a session id, not ``theme=dark``, ``Path=/`` or ``Max-Age=3600``)
    becomes ``[redacted:cookie]``; names and attributes stay."""

    def replacement(self, match: re.Match[str]) -> str | None:
        pairs = match.group("s")
        out = _COOKIE_PAIR.sub(
            lambda m: (
                m.group("name") + "=" + placeholder(self.name)
                if secret_value(m.group("value"))
                else m.group(0)
            ),
            pairs,
        )
        if out == pairs:
            return None
        return _splice(match, "s", out)


def _as_rule(cls: type[Rule], rule: Rule) -> Rule:
    return cls(rule.name, rule.anchors, rule.pattern, rule.check, rule.source, rule.gate_words)


HEADER_RULES: tuple[Rule, ...] = (
    _as_rule(AuthorizationRule, AUTHORIZATION_RULE),
    _as_rule(CookieRule, COOKIE_RULE),
    _rule(
        "bearer",
        ("Bearer", "bearer", "BEARER"),
        _B + r"(?:Bearer|bearer|BEARER)[ \t]+(?P<s>[A-Za-z0-9._~+/-]{16,}=*)",
        "RFC 6750 bearer tokens (b64token) outside an Authorization header",
        check=_token_like,
    ),
    _rule(
        "basic",
        "Basic",
        r"Basic(?<![A-Za-z0-9_]Basic)[ \t]+(?P<s>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
        "RFC 7617 Basic credentials: base64 of user-id:password",
        check=_basic_credentials,
    ),
    _rule(
        "user_password",
        "curl",
        _B + r"curl\b[^\n]*?[ \t](?:-u|--user)[ \t=]*[\"']?[^\s:\"']+:(?P<s>[^\s\"'@\[\]]+)",
        "curl -u / --user user:password (curl manual)",
        check=lambda v: _url_password(v) and not v.isdigit(),
    ),
    _rule(
        "url_password",
        "://",
        r"://[^\s:/?#@\"'<>\[\]\\]{0,256}:(?P<s>[^\s/?#@\"'<>\[\]\\]{1,256})@",
        "RFC 3986 3.2.1 userinfo user:password@ in URLs (database URLs, git remotes)",
        check=_url_password,
    ),
    _rule(
        "url_password",
        "@tcp(",
        r"[A-Za-z0-9_.-]+:(?P<s>[^\s@/\"':\[\]]{1,256})@tcp\(",
        "Go MySQL driver DSNs user:password@tcp(host)",
        check=_url_password,
    ),
    _rule(
        "netrc_password",
        "machine",
        r"\bmachine[ \t]+\S+\s+login[ \t]+\S+\s+password[ \t]+(?P<s>\S+)",
        ".netrc entries (GNU inetutils manual: machine / login / password)",
        check=_not_placeholder,
    ),
)


# -- assignments ------------------------------------------------------------------------------

_KEYWORDS = (
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "pass",
    "key",
    "credential",
    "credentials",
    "auth",
    "pat",
)
_KEYWORD_FORMS = tuple(f for w in _KEYWORDS for f in dict.fromkeys((w, w.title(), w.upper())))
# what may follow a secret name: a separator, a closing quote (JSON, dicts), ">" (XML), a
# backslash (escaped JSON); spaces before a separator, or two (aligned assignments)
_AFTER_KEYWORD = ("=", ":", '"', "'", ">", "\\", "\t", " =", " :", "  ", "%3D", "%3d")
_NAME_BEFORE = re.compile(r"[A-Za-z0-9_.$-]{0,80}\Z", re.ASCII)
_KEYWORD_ALTERNATION = "|".join(sorted(_KEYWORD_FORMS, key=len, reverse=True))

ASSIGNMENT_PATTERN = re.compile(
    r"(?P<kw>" + _KEYWORD_ALTERNATION + r")"
    r"(?P<close>\\?[\"'](?:\])?)?"
    r"(?:(?P<sep>[ \t]*(?::=|=>|==?|:)[ \t]*)|(?P<enc>%3[Dd])|(?P<xml>>)|(?P<space>[ \t]+))"
    r"(?P<open>\\?[\"'`])?"
    # quoted: up to the quote; URL-encoded (``api_key%3D...``): up to the next escape; bare: up
    # to what ends a word in shells, code and config files. A bare value runs on over "&" (a
    # password's punctuation) unless a query parameter follows it ("&page=2")
    r"(?P<s>(?(open)[^\s\"'`\\]{1,512}|(?(enc)[A-Za-z0-9._~+/-]{1,512}"
    r"|[^\s\"'`\\,;<>(){}\[\]|&]{1,512}(?:&(?![A-Za-z0-9_.\[\]-]*=)[^\s\"'`\\,;<>(){}\[\]|&]{1,256}){0,8})))",
    re.ASCII,
)
# where an assignment can start: a keyword form followed by what _AFTER_KEYWORD lists, or the
# keyword of a command-line flag ("--api-key VALUE")
_ASSIGNMENT_START = re.compile(
    r"-(?:" + _KEYWORD_ALTERNATION + r") "
    r"|(?:" + _KEYWORD_ALTERNATION + r")(?=[=:\"'>\\\t]| [=:]|  |%3[Dd])",
    re.ASCII,
)


class AssignmentRule(Rule):
    """A value assigned to a secret name, in the shapes of env files and ``export``, YAML,
    JSON, INI / TOML, code (``=``, ``:``, ``=>``, ``==``), XML (``<password>...``) and
    command-line flags (``--api-key VALUE``): the name must pass :func:`secret_name`, the value
    :func:`secret_value`. Each is named ``assignment:<NAME>`` (``aws_secret_key`` for AWS secret
    access keys).

    The pattern starts at the name's keyword; the name is read backwards from there. It is
    tried at each place an anchor starts (:meth:`apply_at`), so a match that is not a
    credential never hides one that follows inside it.
    """

    def replacement(self, match: re.Match[str]) -> str | None:
        text = match.string
        kw_start = match.start("kw")
        head = _NAME_BEFORE.search(text, max(0, kw_start - 80), kw_start)
        before = head.group(0) if head else ""
        if head is not None and head.start() > 0 and text[head.start() - 1] == "%":
            before = before[2:]  # the rest of a URL escape ("%3Fapi_key": "api_key")
        name = before + match.group("kw")
        if match.group("xml") is not None:
            if head is None or head.start() == 0 or text[head.start() - 1] != "<":
                return None
        elif match.group("space") is not None and not name.startswith("-"):
            return None  # "--password VALUE" only: prose has spaces after words
        name = name.lstrip("-$.")
        if not secret_name(name):
            return None
        value = match.group("s")
        opened = match.group("open")
        if opened:  # a quoted value must be whole (no spaces: a phrase, not a credential)
            after = match.end("s")
            if after >= len(text) or text[after] not in ("\\", opened[-1]):
                return None
        if not secret_value(value, password=password_name(name)):
            return None
        words = "".join(name_words(name))
        if "secretaccesskey" in words:
            return _splice(match, "s", placeholder("aws_secret_key"))
        return _splice(match, "s", placeholder("assignment:" + assignment_label(name)))

    def starts(self, text: str) -> list[int]:
        """Where an assignment may start in ``text``: the keyword of each anchor."""
        return [m.start() + (m.group(0)[0] == "-") for m in _ASSIGNMENT_START.finditer(text)]

    def apply_at(self, text: str, starts: list[int]) -> str:
        """``text`` with the assignments that start at ``starts`` (keyword offsets) redacted."""
        pieces: list[str] = []
        done = 0
        for start in sorted(set(starts)):
            if start < done:
                continue
            match = self.pattern.match(text, start)
            if match is None:
                continue
            replaced = self.replacement(match)
            if replaced is None:
                continue
            pieces.append(text[done:start])
            pieces.append(replaced)
            done = match.end()
        if not pieces:
            return text
        pieces.append(text[done:])
        return "".join(pieces)

    def apply(self, text: str) -> str:
        """``text`` with every assignment of a credential redacted."""
        return self.apply_at(text, self.starts(text))


ASSIGNMENT_RULE = AssignmentRule(
    "assignment",
    tuple(f + c for f in _KEYWORD_FORMS for c in _AFTER_KEYWORD)
    + tuple("-" + f + " " for f in _KEYWORD_FORMS),
    ASSIGNMENT_PATTERN,
    None,
    "names: the usual spellings of credential variables (*_TOKEN, *_KEY, *_SECRET, PASSWORD, "
    "apiKey, X-API-Key...); values: the entropy test of secret scanners (truffleHog, "
    "detect-secrets' KeywordDetector)",
    tuple(_KEYWORDS),
)

RULES: tuple[Rule, ...] = (PEM_RULE, *FORMAT_RULES, *HEADER_RULES, ASSIGNMENT_RULE)
"""Every rule, in the order the redactor applies them: whole private-key blocks first, then
the known formats (so ``OPENAI_API_KEY=sk-...`` is named ``openai_key``), headers and URLs, and
assignments last."""
