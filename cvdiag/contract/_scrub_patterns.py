"""Compiled patterns and validators for the scrubber (spec section 7).

Every pattern is written for Python's backtracking ``re``: each repetition is bounded
or possessive, and no two adjacent quantifiers range over overlapping classes, so a
match attempt costs a bounded number of steps and a whole scan stays linear.

Speed: ``re`` skips ahead in C only when a pattern starts with a literal or a character
class, so patterns start with what they must consume (``@``, ``://``, a key prefix, a
digit) and check the character before it with a fixed-width lookbehind after that.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from functools import lru_cache


def words(text: str) -> frozenset[str]:
    """A set of the space-separated words in ``text`` (keeps long word lists compact)."""
    return frozenset(text.split())


# --- sensitive key names -------------------------------------------------------------

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])", re.ASCII)
_NON_ALNUM = re.compile(r"[^a-z0-9]+", re.ASCII)

_SENSITIVE_NAME = re.compile(
    r"pass(?:wd|word|phrase)|pwd|secret|token|credential|(?:^|_)creds?(?:_|$)|signature|(?:^|_)sig(?:_|$)"
    r"|cookie|authorization|(?:^|_)auth(?:_|$)|authtoken|sessionid|sessid|^session(?:_(?:key|secret))?$"
    # session cookies: connect.sid, laravel_session, _myapp_session, ASP.NET_SessionId, _gh_sess
    # (a bare session_id is an agent framework's conversation id; _session_id is Rails' cookie)
    r"|(?:^|_)sid$|_session_id$|_session$|(?:^|_)sess$"
    r"|(?:^|_)pass$|api_?key|(?:access|private|secret|signing|encryption|master|account|subscription|service)_?key"
    r"|^code$|code_verifier",
    re.ASCII,
)
# Names where "token" (or another sensitive word) counts or types something.
_COUNT_OR_TYPE_NAME = re.compile(
    r"tokens|tokeniz|token_?(?:count|type|limit|usage|budget|len|length|estimate|ids?|index|idx|logprobs?|position|str)"
    r"|(?:^|_)(?:count|type|types|estimate|limit|url|uri|endpoint|expires?|expiry|ttl|name|method|mode|scheme"
    r"|required|enabled|provider|policy|file|path|format|version|length|len|size|per)(?:_|$)"
    r"|_(?:error|exception|warning)$",  # ExpiredSignatureError: the name of an exception class
    re.ASCII,
)
_FILE_SUFFIX = re.compile(
    r"\.(?:py|pyc|js|mjs|cjs|ts|tsx|jsx|go|rs|java|rb|php|json|ya?ml|toml|txt|md|html?|css|log)$", re.ASCII
)


@lru_cache(maxsize=1024)
def is_sensitive_key(name: str) -> bool:
    """True when a value stored under ``name`` is a secret whatever it looks like."""
    if not isinstance(name, str) or not name or len(name) > 128 or _FILE_SUFFIX.search(name):
        return False
    # google.auth.exceptions.RefreshError, spring.datasource.password: the last part names it.
    name = name.rsplit(".", 1)[-1] if "." in name else name
    norm = _NON_ALNUM.sub("_", _CAMEL.sub("_", name).lower()).strip("_")
    if name[0] == "_" and norm == "session_id":
        return True
    return bool(_SENSITIVE_NAME.search(norm)) and not _COUNT_OR_TYPE_NAME.search(norm)


# Lowercase stems that every sensitive key name contains; the scan for keys starts at them.
KEY_STEMS = ("pass", "pwd", "secret", "token", "key", "cred", "sig", "sid", "auth", "cookie", "sess", "code")
# A stem is worth a closer look only when a separator follows the name it is part of.
SEPARATOR_AHEAD = re.compile(
    r"[\w.\-]{0,63}+(?:\\(?:u00(?:22|27)|[\"'])|[\"'])?[ \t]{0,4}+(?:=>|[:=]|%(?:25)?3[Dd])", re.ASCII
)
KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
KEY_MAX = 64

# A line break that continues a header value (obs-fold, RFC 9112 section 5.2: the next
# line starts with a blank), as written or as a repr escapes it.
_FOLD = r"(?:\r?\n|(?:\\r)?\\n)(?=[ \t])"
# Any run of blanks after a separator or an auth scheme, folds included (possessive: linear).
GAP = rf"(?:[ \t]|{_FOLD})"
# What a YAML block's next key looks like, so that a fold never takes it for a value.
NEXT_KEY = re.compile(r"[A-Za-z_][\w.\-]{0,127}+[ \t]{0,4}+:(?![^ \t\r\n\\])", re.ASCII)
# The rest of a value folded onto the next lines: each fold and the token after it.
FOLDED_REST = re.compile(
    rf"(?:{_FOLD}[ \t]{{0,64}}+(?![A-Za-z_][\w.\-]{{0,127}}+[ \t]{{0,4}}+:(?![^ \t\r\n\\]))"
    rf"[^\s,;&\"'<>{{}}\[\]()\\]{{1,4096}}+)++",
    re.ASCII,
)

# From the start of a key: the key, an optional closing quote and a separator. The value
# is matched only after the key proved sensitive, so no value is scanned twice.
# After the separator any run of blanks (``Authorization:        …``), or a fold; a ``b`` before a
# quote is a Python bytes value (``b'…'``), and ``\u0022`` a JSON-escaped quote.
KEY_SEP = re.compile(
    r"""(?P<key>[A-Za-z_][\w.\-]{0,127}+)(?P<kq>\\u00(?:22|27)|\\?["'])?"""
    r"""(?P<sep>[ \t]{0,4}+(?:=>|[:=]|%(?:25)?3[Dd])""" + GAP + r"""*+)(?:b(?=["']))?""",
    re.ASCII,
)
VALUE = re.compile(
    r"""(?P<done>(?:(?i:bearer|basic|token|digest|apikey|sso-key)GAP++)?\[REDACTED\])
      | (?P<ref>\$\{[^}\s]{1,128}\}|\$?\{\{[^}\n]{1,128}\}\}|%\([A-Za-z_]\w{0,63}\)s|\$\([^)\n]{1,128}\)
          |os\.environ(?:\[[^\]\n]{1,128}\]|\.get\([^)\n]{1,128}\)))
      | \\u0022(?:[^\\\n]|\\(?!u0022)){0,4096}+(?:\\u0022|$)
      | \\u0027(?:[^\\\n]|\\(?!u0027)){0,4096}+(?:\\u0027|$)
      | \\"(?:[^\\\n]|\\(?!")){0,4096}+(?:\\"|$)
      | "(?:[^"\\\n]|\\.){0,4096}+(?:"|$)
      | '(?:[^'\\\n]|\\.){0,4096}+(?:'|$)
      | `(?:[^`\\\n]|\\.){0,4096}+(?:`|$)
      | (?P<scheme>(?i:digest)[ \t]{1,4}+)[^\r\n]{1,4096}+
      | (?P<schemeref>(?i:bearer|basic|token|apikey|sso-key)GAP++
          (?:\$\{\{?[^}\n]{1,128}\}\}?|\$[A-Za-z_]\w{0,127}|<[^<>\n]{1,64}>|\*{3,64}|\[[^\]\n]{1,64}\]))
      | (?P<scheme2>(?i:bearer|basic|token|apikey|sso-key)GAP++)?[^\s,;&"'<>{}\[\]()\\]{1,4096}+
    """.replace("GAP", GAP),
    re.X | re.ASCII,
)

# --- structural secrets ----------------------------------------------------------------

# The body of a key has no "-", so a block cut off before its END line is taken to the end.
PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[^-]{0,20000}+"
    r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
    re.ASCII,
)

# ://userinfo@ — userinfo never crosses / ? # so a query's "a@b.com" is not userinfo.
# A password may hold "@" (user:Hunter2@Secret@db): the userinfo ends at the last "@"
# (backtracking is bounded by the 512 characters of one attempt).
URL_USERINFO = re.compile(r"://([^\s/?#\"'<>]{1,512})@", re.ASCII)

# A Cookie or Set-Cookie header line: every cookie value in it goes, names and attributes stay.
COOKIE_HEADER = re.compile(
    r"(?i)(?<![\w\-])((?:set-)?cookie[\"']?[ \t]{0,4}+:[ \t]{0,4}+)(?![\"'\[]|b[\"'])([^\r\n\"'\\{}\[\]]{1,4096}+)",
    re.ASCII,
)

# Space-separated forms: command-line flags (--token abc) and .netrc lines (login u password p).
CLI_FLAG = re.compile(
    r"--(?<![\w\-]--)(?P<flag>[A-Za-z][\w\-]{0,63}+)[ \t]{1,4}+(?P<val>[^\s\-\"'][^\s\"']{0,4095}+)", re.ASCII
)
NETRC = re.compile(r"login[ \t]{1,4}+\S{1,256}+[ \t]{1,4}+password[ \t]{1,4}+(?P<val>\S{1,4096}+)", re.ASCII)

# A name and its value as two quoted items: raw header pairs ``(b'x-api-key', b'…')``,
# ``Headers(raw=[…])``, and argv lists ``['cli', '--token', '…']``. The value is read by VALUE.
# Starts with a class, which ``re`` skips to in C; a name without dashes counts only after "(".
QUOTED_PAIR = re.compile(
    r"""(?P<open>[\[(,])[ \t]{0,4}+b?(?P<q>["'])(?P<dash>--?)?(?P<name>[A-Za-z][\w.\-]{0,127}+)(?P=q)"""
    r"""(?=(?P<sep>[ \t]{0,4}+,[ \t]{0,4}+b?)["'])""",  # a lookahead: its comma may open the next pair
    re.ASCII,
)

# Python credentials pairs: auth=("user", "pw"), session.auth = (...), HTTPBasicAuth("user", "pw").
AUTH_PAIR = re.compile(
    r"""(?:Auth\(|(?i:auth)["']?[ \t]{0,4}+[=:][ \t]{0,4}+\()[ \t]{0,4}+(?:"[^"\\\n]{0,256}+"|'[^'\\\n]{0,256}+')"""
    r"""[ \t]{0,4}+,[ \t]{0,4}+(?P<q>["'])(?P<pw>[^"'\\\n]{1,4096}+)(?P=q)""",
    re.ASCII,
)
# Lowercased text matches this wherever AUTH_PAIR can match (its own scan is slow).
AUTH_PAIR_GATE = re.compile(r"""auth(?:["']?[ \t]{0,4}+[=:][ \t]{0,4}+)?\(""", re.ASCII)
# curl -u user:pw, --user, --proxy-user (a password after the colon).
CLI_USER = re.compile(
    r"""(?:-u|-U|--user|--proxy-user)(?<![\w\-]-u|[\w\-]-U)(?<![\w\-]--user)(?:[ \t]{1,4}+|=|["'],[ \t]{0,4}+)?["']?"""
    r"""(?P<user>[^\s"':@/]{1,256}+):(?P<pw>[^\s"']{1,4096}+)""",
    re.ASCII,
)
# Webhook URLs whose path is the secret (Slack, Discord, Microsoft Teams): the host stays.
WEBHOOK = re.compile(
    r"(?:hooks\.slack\.com/(?:services|workflows|triggers)/|discord(?:app)?\.com/api/webhooks/"
    r"|\.webhook\.office\.com/webhookb2/)(?P<path>[A-Za-z0-9_\-/%@.]{8,2048}+)",
    re.ASCII,
)
WEBHOOK_GATE = re.compile(r"hooks\.slack\.com/|/api/webhooks/|webhook\.office\.com/", re.ASCII)
# An AWS SigV4 credential: the access key id goes, the credential scope after it stays.
SIGV4_SCOPE = re.compile(
    r"(?:/|%2[Ff])\d{8}(?:/|%2[Ff])[a-z0-9\-]{1,32}(?:/|%2[Ff])[a-z0-9\-]{1,32}(?:/|%2[Ff])aws4_request", re.ASCII
)
# A cookie as a record: {'name': 'sessionid', 'value': '…'} (Playwright, Selenium),
# Cookie(version=0, name='sessionid', value='…') (http.cookiejar).
NAMED_COOKIE = re.compile(
    r"""name["']?[ \t]{0,4}+[:=][ \t]{0,4}+(?P<nq>["'])(?P<name>[^"'\\\n]{1,128}+)(?P=nq)[ \t]{0,4}+,[ \t]{0,4}+"""
    r"""["']?value["']?[ \t]{0,4}+[:=][ \t]{0,4}+(?P<q>["'])(?P<val>[^"'\\\n]{1,4096}+)(?P=q)""",
    re.ASCII,
)
# A Set-Cookie header folded onto one line: ", name=" starts the next cookie.
FOLDED_COOKIE = re.compile(r",[ \t]{0,4}+(?=[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}+=)(?![0-9]{1,2} )", re.ASCII)
COOKIE_ATTRIBUTES = words("path domain expires max-age secure httponly samesite partitioned priority version comment")

# Any run of blanks (or a fold) after the scheme: ``Bearer\t\t<token>`` is the same credential.
BEARER = re.compile(
    r"[Bb][Ee][Aa][Rr][Ee][Rr](?<![\w\-][\s\S]{6})(" + GAP + r"++)([A-Za-z0-9._~+/\-]{4,4096}+=*)", re.ASCII
)
# Bare "Basic <credentials>" and "Token <key>" (DRF, GitHub): capitalised, since lowercase
# "basic" and "token" are everyday words.
BASIC_OR_TOKEN = re.compile(
    r"(?:Basic|BASIC|Token|TOKEN)(?<![\w\-][\s\S]{5})([ \t]++)([A-Za-z0-9._~+/\-]{4,4096}+=*)", re.ASCII
)

# A JWE whose header is not ``eyJ`` (JSON written with blanks: ``{ "alg"`` is ``eyAi``,
# ``{\n  "alg"`` is ``ewog``): five base64url parts, the key part possibly empty, at the
# start of a run (or after a ``\\n`` escape) and not part of a longer dotted name. The
# header is decoded to be sure (is_jose_header); a run is tried from its start only, so
# the scan stays linear.
JWE = re.compile(
    r"e[wy](?:(?<![A-Za-z0-9_\-.]..)|(?<=\\[nrt]..))[A-Za-z0-9_\-]{10,}+\.[A-Za-z0-9_\-]*+\.[A-Za-z0-9_\-]{4,}+"
    r"\.[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]{4,}+(?!\.?[A-Za-z0-9_\-])",
    re.ASCII,
)


def is_jose_header(segment: str) -> bool:
    """True when ``segment`` is base64url of a JSON object naming ``alg`` or ``enc``."""
    try:
        text = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)).decode("utf-8")
    except ValueError:
        return False
    return text.lstrip().startswith("{") and ('"alg"' in text or '"enc"' in text)


def _shape(prefix: str, width: int, body: str) -> re.Pattern[str]:
    """``prefix`` (``width`` characters long) then ``body``, not glued to a word before it.

    A URL escape (``key%3Dsk-…``) or a string escape (``\\nsk-…``) right before the
    prefix is a separator, not part of a word.
    """
    glued = f"(?<![A-Za-z0-9_\\-][\\s\\S]{{{width}}})"
    escaped = (
        f"(?<=%[0-9A-Fa-f]{{2}}[\\s\\S]{{{width}}})|(?<=\\\\[nrt][\\s\\S]{{{width}}})"
        f"|(?<=\\\\u[0-9A-Fa-f]{{4}}[\\s\\S]{{{width}}})"
    )
    return re.compile(f"{prefix}(?:{glued}|{escaped}){body}", re.ASCII)


# (literal every match contains, pattern): a pattern runs only when its literal is present,
# and a pattern that starts with a literal is found by re's fast literal search.
KEY_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # A JWT or JWE first: a segment of one may look like a key of its own (``.sk-…``),
    # and a key taken out first would leave the token's other parts behind.
    ("eyJ", _shape("eyJ", 3, r"[A-Za-z0-9_\-]{4,}+\.eyJ[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]{0,}+")),
    # A JWE: header, encrypted key (empty for "dir"), IV, ciphertext, tag.
    (
        "eyJ",
        _shape(
            "eyJ",
            3,
            r"[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]{0,}+\.[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]{4,}+",
        ),
    ),
    ("sk-", _shape("sk-", 3, r"[A-Za-z0-9][A-Za-z0-9_\-]{3,}+")),
    ("pk-", _shape("pk-", 3, r"[A-Za-z0-9][A-Za-z0-9_\-]{7,}+")),
    ("k_", _shape("[spr]k_(?:live|test)_", 8, r"[A-Za-z0-9]{6,}+")),
    ("whsec_", _shape("whsec_", 6, r"[A-Za-z0-9]{12,}+")),
    ("AIza", _shape("AIza", 4, r"[A-Za-z0-9_\-]{20,}+")),
    ("ya29.", _shape(r"ya29\.", 5, r"[A-Za-z0-9_.\-]{10,}+")),
    ("gsk_", _shape("gsk_", 4, r"[A-Za-z0-9]{10,}+")),
    ("hf_", _shape("hf_", 3, r"[A-Za-z0-9]{10,}+")),
    ("r8_", _shape("r8_", 3, r"[A-Za-z0-9]{10,}+")),
    ("npm_", _shape("npm_", 4, r"[A-Za-z0-9]{10,}+")),
    ("xai-", _shape("xai-", 4, r"[A-Za-z0-9]{10,}+")),
    ("pplx-", _shape("pplx-", 5, r"[A-Za-z0-9]{10,}+")),
    ("A", _shape("A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)", 4, r"[A-Z0-9]{16}(?![A-Za-z0-9])")),
    ("gh", _shape("gh[pousr]_", 4, r"[A-Za-z0-9]{16,}+")),
    ("github_pat_", _shape("github_pat_", 11, r"[A-Za-z0-9_]{16,}+")),
    ("glpat-", _shape("glpat-", 6, r"[A-Za-z0-9_\-]{12,}+")),
    ("xox", _shape("xox[a-z]-", 5, r"[A-Za-z0-9\-]{8,}+")),
)

# --- PII -----------------------------------------------------------------------------

# Anchored at the "@"; the local part before it is found by walking back (scrub.py).
EMAIL_DOMAIN = re.compile(r"(?:@|%40)((?:[A-Za-z0-9\-]{1,63}+\.){1,8}(?P<tld>[A-Za-z]{2,24}))(?![\w\-])", re.ASCII)
LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-%")
LOCAL_MAX = 64
_NOT_TLD = words(
    "png jpg jpeg gif svg webp ico bmp js mjs cjs ts tsx jsx css scss py pyc json map txt md html htm wasm"
)


def is_email(local: str, tld: str) -> bool:
    # icon@2x.png and git@github.com are asset names and transport users, not people.
    return tld.lower() not in _NOT_TLD and local != "git"


_END = r"(?![\w\-]|\.\d)"
# The first character is consumed by a class (fast skip), then each branch checks what it was.
NUMBERS = re.compile(
    r"[\d(+A-Z](?<![\w.+\-][\s\S])(?:"
    r"(?<=\d)\d{0,2}\.\d{1,3}\.\d{1,3}\.\d{1,3}" + _END + "(?P<ipv4>)"
    r"|(?<=\d)\d{2}(?P<ssep>[- ])\d{2}(?P=ssep)\d{4}" + _END + "(?P<ssn>)"
    r"|(?<=[A-Z])[A-Z](?: \d{2} \d{2} \d{2} |\d{6})[A-D](?![A-Za-z0-9])(?P<nino>)"
    r"|(?:(?<=\()\d{3}\)[ ]?\d{3}[ .\-]\d{4}|(?<=\d)\d{2}(?P<psep>[.\-])\d{3}(?P=psep)\d{4}"
    r"|(?<=0)\d{2,4}[ \-]\d{3,4}[ \-]\d{3,4}|(?<=0)\d{4}[ ]\d{6})" + _END + "(?P<phone>)"
    r"|(?<=\d)(?:[ \-]?\d){12,18}" + _END + "(?P<card>)"
    r"|(?<=\+)\d[\d \-.()]{6,18}\d" + _END + "(?P<intl>)"
    r"|(?<=[A-Z])[A-Z]\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}+(?:[ ]?[A-Z0-9]{1,3})?(?![A-Za-z0-9])(?P<iban>)"
    r")",
    re.ASCII,
)

# Only strings that pass these run the broader scans above and below.
NUMBERS_GATE = re.compile(r"[0-9](?:[0-9 .()\-]{6}|\.\d{1,3}\.|\d(?<=[A-Z]{2}\d\d))", re.ASCII)
IPV6_GATE = re.compile(r":[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:", re.ASCII)
IPV6 = re.compile(r"[0-9A-Fa-f:](?<![\w:.][\s\S])[0-9A-Fa-f]{0,3}:[0-9A-Fa-f:]{1,36}+(?![\w:]|\.\d)", re.ASCII)


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def is_card(candidate: str) -> bool:
    """Luhn plus plausibility: a network prefix and length, so ids and timestamps stay."""
    seps = {c for c in candidate if not c.isdigit()}
    if len(seps) > 1:
        return False
    digits = "".join(c for c in candidate if c.isdigit())
    n = len(digits)
    if not 13 <= n <= 19 or len(set(digits)) < 2:
        return False
    two, three, four = int(digits[:2]), int(digits[:3]), int(digits[:4])
    plausible = (
        (digits[0] == "4" and n in (13, 16, 19))
        or (51 <= two <= 55 and n == 16)
        or (2221 <= four <= 2720 and n == 16)
        or (two in (34, 37) and n == 15)
        or ((four == 6011 or two == 65 or 644 <= three <= 649) and n in (16, 19))
        or (two == 35 and n in (16, 19))
        or (two in (30, 36, 38, 39) and n == 14)
        or (two == 62 and 16 <= n <= 19)
    )
    return plausible and luhn_ok(digits)


def is_iban(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    try:
        return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1
    except ValueError:
        return False


def is_ssn(candidate: str) -> bool:
    area, group, serial = candidate.replace(" ", "-").split("-")
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


_NINO_NEVER_PREFIX = words("BG GB NK KN TN NT ZZ")


def is_nino(candidate: str) -> bool:
    """A UK National Insurance number: the prefix letters HMRC never issues are excluded."""
    first, second = candidate[0], candidate[1]
    return first not in "DFIQUV" and second not in "DFIOQUV" and first + second not in _NINO_NEVER_PREFIX


def is_phone(candidate: str) -> bool:
    digits = sum(c.isdigit() for c in candidate)
    return 8 <= digits <= 15 and ".." not in candidate and "--" not in candidate and candidate.count("(") <= 1


def _v4_is_public(text: str) -> bool:
    octets = text.split(".")
    if any(len(o) > 1 and o[0] == "0" for o in octets):
        return False
    a, b, c, d = (int(o) for o in octets)
    if max(a, b, c, d) > 255:
        return False
    private = (
        a in (0, 10, 127)
        or (a == 172 and 16 <= b <= 31)
        or (a == 192 and b == 168)
        or (a == 169 and b == 254)
        or (a == 100 and 64 <= b <= 127)
        or a >= 224
    )
    return not private


def is_public_ipv4(text: str) -> bool:
    return _v4_is_public(text)


def is_public_ipv6(text: str) -> bool:
    """Public unless loopback, link-local, unique-local, unspecified or multicast."""
    if text.count(":") < 2:
        return False
    try:
        addr = ipaddress.IPv6Address(text)
    except ValueError:
        return False
    if addr.ipv4_mapped is not None:
        return _v4_is_public(str(addr.ipv4_mapped))
    unique_local = addr.packed[0] & 0xFE == 0xFC
    return not (addr.is_loopback or addr.is_link_local or addr.is_unspecified or addr.is_multicast or unique_local)
