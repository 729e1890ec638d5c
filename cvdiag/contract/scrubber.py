"""Scrub secrets and PII from every string cvdiag writes (spec section 7).

``scrub`` never raises: a failure inside it returns ``REDACTED`` for the whole value,
because the one thing worse than a lost diagnostic is a leaked credential.
"""

from __future__ import annotations

import re
from functools import lru_cache

from cvdiag.contract import _scrub_patterns as p
from cvdiag.contract._scrub_patterns import is_sensitive_key, words

__all__ = ["REDACTED", "SCAN_LIMIT", "is_sensitive_key", "scrub", "scrub_clipped", "scrub_tree", "scrub_values_of"]

REDACTED = "[REDACTED]"
SCAN_LIMIT = 2048
_MAX_DEPTH = 32
_CACHE_MAX_LEN = 256
# A replacement can change what surrounds the next candidate ("…0100+1 415…" only starts a
# phone number once the first one is gone), so patterns run until nothing changes.
_MAX_PASSES = 4
_BEFORE_MARKER = frozenset(" \t\r\n\"'`,;&(){}<>=:/@")
_AFTER_MARKER = frozenset(" \t\r\n\"'`,;&){}[]<>@")

# Strings the scrubber itself produced end like this; kept so scrub(scrub(x)) == scrub(x).
_TRAILER = re.compile(r"…\[unscanned:(\d{1,12})\]\Z")
# Cut only between tokens, so no prefix of a secret is left behind the cut.
_DELIMS = " \t\r\n,;&<>(){}[]\"'"
_CLOSERS = ")]}>\"'"

# A short string made only of these characters, holding none of the hints, cannot match
# any pattern: it is returned as it is without running them (the common case on the hot path).
_PLAIN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ /.,;()[]{}'\"!?-_\t"
_PLAIN_HINTS = re.compile(
    "k-|k_|--|xai-|pplx-|glpat-|xox|gsk_|hf_|npm_|gh|whsec_|AIza|A[KSGIRN][A-Z]A|eyJ|earer|EARER|login|PRIVATE"
    "|Basic|BASIC|Token|TOKEN"
    "|[\"'] ?, ?b?[\"']"  # ('x-api-key', '…'): a quoted pair (QUOTED_PAIR)
)
_PLAIN_MAX = 64

# ${OPENAI_API_KEY}, {{ secrets.X }}, %(password)s, $(cat key), os.environ['X'], $OPENAI_API_KEY
_REFERENCE_PREFIXES = ("${", "{{", "%(", "$(", "os.environ", "process.env")
_ENV_REFERENCE = re.compile(r"\$[A-Z_][A-Z0-9_]{0,127}")
_MASK_CHARS = "*•·xX.…#-_ "
_MASK_DELETE = str.maketrans("", "", "*•·….")
_MASK_RUN_CHARS = "xX*•#"
_U_QUOTES = ("\\u0022", "\\u0027")
_SCHEME_PREFIX = re.compile(r"(?i:bearer|basic|token|apikey|sso-key)" + p.GAP + "++")
# A key shape cut by someone's mask (sk-proj-Ab3d…) shows at most this much of itself.
_VISIBLE_BEFORE_MASK = 16
_PLACEHOLDERS = words(
    "none null nil undefined true false redacted [redacted] <redacted> <hidden> [hidden] [filtered]"
    " <masked> [masked] changeme"
)
# A sensitive word followed by ": <word>" in an error message is prose, not a value.
_PROSE = words(
    "a an the is was has had have are be been not no none null empty missing invalid expired required revoked"
    " malformed provided present absent ok yes set unset bad wrong incorrect denied rejected failed error must"
    " should cannot could did does for of in on to from with and or unknown unauthorized forbidden refused"
)
# Words that follow a bare auth scheme in prose ("Bearer tokens", "Basic authentication").
_SCHEME_PROSE = words(
    "token tokens auth authentication authorization authorisation scheme schemes header headers credential"
    " credentials prefix string strings value values type types format realm challenge required expected"
    " expired only instead also first keyword mode flow grant grants access example here there usage limit"
    " limits count counts budget length size jwt jwts oauth oauth2 openid api key keys secret secrets password"
    " login user users request requests response responses call calls check checks support supported please"
    " via used uses use using works work method methods style scheme-based bearer basic digest this that these"
    " those it its as at by but if when then than so all any some every each other others which who"
)
_PROSE_SUFFIXES = ("ing", "ed", "ion", "ions", "ly", "ment", "ments", "ness", "ity", "ies", "es", "able", "al")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_OAUTH_CODE_OK = re.compile(r"\d{1,6}|[a-z_.\-]+|[A-Z_.\-]+")
_HOST_KEY_END = re.compile(r"(?:key|token|password|passwd|pwd|secret|signature|sig|cookie|credentials?|auth\w*)$", re.I)


def _is_masked(value: str) -> bool:
    """Already masked, a placeholder or a reference: nothing secret to replace."""
    v = value.strip()
    if v.startswith(_U_QUOTES):  # JSON written with \u0022 escapes
        v = v[6:-6] if v.endswith(v[:6]) and len(v) >= 12 else v[6:]
    v = v.strip("\"'`\\")
    if not v or v == REDACTED or v.lower() in _PLACEHOLDERS:
        return True
    scheme = _SCHEME_PREFIX.match(v)
    if scheme and scheme.end() < len(v):  # `Bearer ${token}`, "Token <redacted>"
        return _is_masked(v[scheme.end() :])
    if v.startswith(_REFERENCE_PREFIXES) or _ENV_REFERENCE.fullmatch(v) or (v[0] == "<" and v[-1] == ">"):
        return True
    if not v.strip(_MASK_CHARS):
        return True
    # sk-proj-****…abcd: a mask run and little left visible (a prefix and the last few chars).
    if ("…" in v or "..." in v or "***" in v) and len(v.translate(_MASK_DELETE)) <= 16:
        return True
    return _is_mask_run(v[max(v.rfind("-"), v.rfind("_")) + 1 :])  # sk-xxxxxxxxxxxx


def _value_replacement(key: str, sep: str, v: re.Match[str]) -> str | None:
    """What replaces the value after a sensitive key, or None to leave it."""
    val = v.group(0)
    if v.group("done") or v.group("ref") or v.group("schemeref"):
        return None
    if key.strip("_-").lower() == "code" and _OAUTH_CODE_OK.fullmatch(val.strip("\"'\\")):
        return None  # an error or status code, not an OAuth code
    if key.lower() == "pass" and val.strip("\"'").isdigit():
        return None  # tests pass=12: a count, not a password
    if _is_cookie_header(key):
        return _quoted_cookie_header(key, val)
    if key.lower().endswith("credential"):
        scope = p.SIGV4_SCOPE.search(val)
        if scope is not None and scope.start() > 0:  # AKIA…/20260101/us-east-1/s3/aws4_request
            return val[0] + REDACTED + val[scope.start() :] if val[0] in "\"'" else REDACTED + val[scope.start() :]
    scheme = v.group("scheme") or v.group("scheme2") or ""
    if _is_masked(val[len(scheme) :]):
        return None
    quoted = val[0] in "\"'`" or val.startswith('\\"') or val.startswith(_U_QUOTES)
    if not quoted and v.string.startswith("(", v.end()):
        return None  # auth = HTTPBasicAuth(...), password = getpass(): a call, not a value
    if not quoted and not scheme:
        if ":" in sep and val.lower() in _PROSE:
            return None
        # auth-service:8080 is a host and port.
        if sep == ":" and val.isdigit() and ("." in key or "-" in key) and not _HOST_KEY_END.search(key):
            return None
    if quoted:
        q = val[:6] if val.startswith(_U_QUOTES) else '\\"' if val.startswith('\\"') else val[0]
        closed = val.endswith(q) and len(val) >= 2 * len(q)
        return q + REDACTED + (q if closed else "")
    return scheme + REDACTED


def _is_cookie_header(key: str) -> bool:
    return key.lower() in ("cookie", "set-cookie", "set_cookie", "cookies")


def scrub_cookie_header(value: str, set_cookie: bool) -> str:
    """Every cookie's value goes; cookie names and Set-Cookie attributes stay (spec section 7)."""
    out: list[str] = []
    for segment in value.split(";"):
        out.append(_cookie_segment(segment, set_cookie, first=not out))
    return ";".join(out)


def _cookie_segment(segment: str, set_cookie: bool, first: bool) -> str:
    name, eq, val = segment.partition("=")
    if not eq:  # Secure, HttpOnly; or a bare cookie value
        return (
            segment if not first or _is_masked(segment) else segment[: len(segment) - len(segment.lstrip())] + REDACTED
        )
    if set_cookie and not first and name.strip().lower() in p.COOKIE_ATTRIBUTES:
        folded = p.FOLDED_COOKIE.search(val)  # "…GMT, b=2": the next cookie of a folded header
        if folded is None:
            return segment
        return name + "=" + val[: folded.end()] + _cookie_segment(val[folded.end() :], set_cookie, first=True)
    if _is_masked(val):
        return segment
    return name + "=" + REDACTED


def _quoted_cookie_header(key: str, val: str) -> str | None:
    """A Cookie or Set-Cookie value in JSON or a dict repr; bare ones are COOKIE_HEADER's."""
    quote = val[:6] if val.startswith(_U_QUOTES) else '\\"' if val.startswith('\\"') else val[:1]
    if quote not in ('"', "'", '\\"', *_U_QUOTES):
        return None
    closed = val.endswith(quote) and len(val) >= 2 * len(quote)
    inner = val[len(quote) : len(val) - len(quote) if closed else len(val)]
    scrubbed = scrub_cookie_header(inner, key.lower().startswith("set"))
    return None if scrubbed == inner else quote + scrubbed + (quote if closed else "")


def _in_arn(text: str, start: int) -> bool:
    """``arn:aws:secretsmanager:…:secret:name``: a resource name, not a secret value."""
    floor = max(0, start - 256)
    begin = max(text.rfind(c, floor, start) for c in " \t\n\"'=,([{") + 1
    return text.startswith("arn:", max(begin, floor))


def _key_start(text: str, stem_at: int) -> int:
    """Walk back from a stem to where its key name starts; -1 when it is no key."""
    start, floor = stem_at, max(0, stem_at - p.KEY_MAX)
    while start > floor and text[start - 1] in p.KEY_CHARS:
        start -= 1  # a longer run is read as its last KEY_MAX characters, erring towards redaction
    if text.startswith("\\u00", start - 1) and start + 5 <= stem_at:
        start += 5  # \u0022apiKey: the name starts after a JSON \u escape
    while start < stem_at and not (text[start].isalpha() or text[start] == "_"):
        start += 1  # --password, 3Fpassword (after %3F): the name starts at the letter
    if start > 1 and text[start - 1] == "-" and text[start - 2] not in "- \t\n":
        return -1  # the tail of a longer hyphenated name
    return start


def _stem_positions(lowered: str) -> list[int]:
    found = []
    for stem in p.KEY_STEMS:
        at = lowered.find(stem)
        while at >= 0:
            found.append(at)
            at = lowered.find(stem, at + 1)
    found.sort()
    return found


def _key_values(text: str) -> str:
    parts = []
    pos = last = 0
    lowered = text.lower()
    if len(lowered) != len(text):  # "İ".lower() is two characters: keep positions aligned
        lowered = text.translate(_ASCII_LOWER)
    has_arn = "arn:" in text
    for at in _stem_positions(lowered):
        if at < pos or not p.SEPARATOR_AHEAD.match(text, at):
            continue
        start = _key_start(text, at)
        if start < 0 or start < pos:
            continue
        m = p.KEY_SEP.match(text, start)
        if m is None:
            continue
        pos = m.end()
        if not _is_secret_name(m.group("key"), text, start, m.group("sep")) or (
            has_arn and m.group("sep").lstrip()[:1] == ":" and _in_arn(text, start)
        ):
            continue
        sep = m.group("sep")
        if ("\n" in sep or "\\n" in sep) and p.NEXT_KEY.match(text, pos):
            continue  # "secrets:\n  token: …": the next line is a key of its own, not a folded value
        v = p.VALUE.match(text, pos)
        replacement = None if v is None else _value_replacement(m.group("key"), sep, v)
        if replacement is None:
            continue
        parts.append(text[last:pos])
        parts.append(replacement)
        pos = last = v.end()
        rest = p.FOLDED_REST.match(text, pos) if text.startswith(("\r", "\n", "\\"), pos) else None
        if rest is not None and not v.group(0).startswith(("'", '"', "`", "\\")):
            # "x-api-key: abc\r\n def": a folded value goes on over the next lines
            parts.append(_folded_rest(rest.group(0)))
            pos = last = rest.end()
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _folded_rest(rest: str) -> str:
    """Each folded line of a value's rest as its line break and blanks, then the marker."""
    return "".join(m.group(1) + REDACTED for m in _FOLDED_LINE.finditer(rest))


_FOLDED_LINE = re.compile(r"((?:\r?\n|(?:\\r)?\\n)[ \t]*+)[^\r\n\\]++")


def _is_secret_name(key: str, text: str, start: int, sep: str) -> bool:
    """A sensitive key, or ``key`` as a query parameter (``?key=…``, Google's API keys)."""
    if is_sensitive_key(key):
        return True
    return key == "key" and start > 0 and text[start - 1] in "?&;" and sep.strip() == "="


def _quoted_pairs(text: str) -> str:
    """``(b'x-api-key', b'…')`` and ``['cli', '--token', '…']``: the second item goes when
    the first names a secret."""
    parts = []
    last = 0
    for m in p.QUOTED_PAIR.finditer(text):
        name = m.group("name")
        if m.start() < last or (m.group("open") != "(" and not m.group("dash")) or not is_sensitive_key(name):
            continue
        v = p.VALUE.match(text, m.end("sep"))
        replacement = None if v is None else _value_replacement(name, ",", v)
        if replacement is None:
            continue
        parts.append(text[last : m.end("sep")])
        parts.append(replacement)
        last = v.end()
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _cli_flag(m: re.Match[str]) -> str:
    if not is_sensitive_key(m.group("flag")) or _is_masked(m.group("val")):
        return m.group(0)
    return m.group(0)[: m.start("val") - m.start()] + REDACTED


def _netrc(m: re.Match[str]) -> str:
    return m.group(0) if _is_masked(m.group("val")) else m.group(0)[: m.start("val") - m.start()] + REDACTED


def _cookie(m: re.Match[str]) -> str:
    set_cookie = m.group(1).lstrip("\"'").lower().startswith("set")
    return m.group(1) + scrub_cookie_header(m.group(2), set_cookie)


def _auth_pair(m: re.Match[str]) -> str:
    return (
        m.group(0) if _is_masked(m.group("pw")) else m.group(0)[: m.start("pw") - m.start()] + REDACTED + m.group("q")
    )


def _cli_user(m: re.Match[str]) -> str:
    user, pw = m.group("user"), m.group("pw")
    if (user.isdigit() and pw.isdigit()) or _is_masked(pw):  # docker -u 1000:1000 is uid:gid
        return m.group(0)
    return m.group(0)[: m.start("pw") - m.start()] + REDACTED


def _named_cookie(m: re.Match[str]) -> str:
    if not is_sensitive_key(m.group("name")) or _is_masked(m.group("val")):
        return m.group(0)
    return m.group(0)[: m.start("val") - m.start()] + REDACTED + m.group("q")


def _webhook(m: re.Match[str]) -> str:
    return m.group(0) if m.group("path").startswith(REDACTED) else m.group(0)[: m.start("path") - m.start()] + REDACTED


def _userinfo(m: re.Match[str]) -> str:
    # "[REDACTED]@…": already done (a userinfo may hold "@", so the marker can start a longer one).
    return m.group(0) if m.group(1).startswith(REDACTED) else "://" + REDACTED + "@"


def _is_auth_param(m: re.Match[str]) -> bool:
    """``Bearer realm="api"``, ``Bearer error=invalid_token``: a challenge, not a credential."""
    token, after = m.group(2), m.string[m.end() : m.end() + 1]
    return token.endswith("=") and (after == '"' or after.isalnum())


def _looks_like_prose(word: str, suffixes: bool) -> bool:
    lowered = word.lower()
    if lowered in _SCHEME_PROSE or lowered in _PROSE:
        return True
    # "Token counting", "Basic usage": only where a scheme word is also an everyday word.
    return suffixes and word.isalpha() and word[1:].islower() and lowered.endswith(_PROSE_SUFFIXES)


def _scheme_value(m: re.Match[str], suffixes: bool) -> str:
    """The credential after a bare ``Bearer``/``Basic``/``Token`` goes, even when all letters.

    Kept: an everyday word after the scheme ("Bearer tokens are…", "uses Bearer auth",
    "Token limit exceeded"), an auth-param of a challenge, and masks or placeholders.
    """
    token, s, end = m.group(2), m.string, m.end()
    masked = _is_masked(token) or s[end : end + 1] in ("*", "…", "•") or s.startswith("...", end)
    if masked or _is_auth_param(m) or _looks_like_prose(token, suffixes):
        return m.group(0)
    return m.group(0)[: m.start(2) - m.start()] + REDACTED


def _bearer(m: re.Match[str]) -> str:
    return _scheme_value(m, suffixes=False)


def _basic_or_token(m: re.Match[str]) -> str:
    return _scheme_value(m, suffixes=True)


def _is_mask_run(segment: str) -> bool:
    """``xxxx``, ``XXXX``, ``****``: four or more of one mask character, nothing else.

    Only mask characters count: a real key may end in ``_R`` or ``-aaaa`` by chance.
    """
    return len(segment) >= 4 and segment[0] in _MASK_RUN_CHARS and not segment.strip(segment[0])


def _key_shape(m: re.Match[str]) -> str:
    s, key, end = m.string, m.group(0), m.end()
    # sk-…abcd, sk-proj-****abcd: someone already masked it, leaving a short prefix visible.
    cut_short = s[end : end + 1] in ("…", "*") or s.startswith("...", end)
    if cut_short and len(key) <= _VISIBLE_BEFORE_MASK:
        return key
    if _is_mask_run(key[max(key.rfind("-"), key.rfind("_")) + 1 :]):  # sk-xxxxxxxxxxxx
        return key
    return REDACTED


def _jwe(m: re.Match[str]) -> str:
    return REDACTED if p.is_jose_header(m.group(0)[: m.group(0).index(".")]) else m.group(0)


def _emails(text: str) -> str:
    parts = []
    last = 0
    for m in p.EMAIL_DOMAIN.finditer(text):
        at = m.start()
        if at < last:
            continue
        start, floor = at, max(last, at - p.LOCAL_MAX)
        while start > floor and text[start - 1] in p.LOCAL_CHARS:
            start -= 1
        while start < at and not text[start].isalnum():
            start += 1
        if start == at or not p.is_email(text[start:at], m.group("tld")):
            continue
        parts.append(text[last:start])
        parts.append(REDACTED)
        last = m.end()
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


_NUMBER_CHECKS = {
    "ipv4": p.is_public_ipv4,
    "ssn": p.is_ssn,
    "nino": p.is_nino,
    "phone": p.is_phone,
    "card": p.is_card,
    "intl": p.is_phone,
    "iban": p.is_iban,
}


def _number(m: re.Match[str]) -> str:
    kind = m.lastgroup or "card"
    if (
        kind == "ipv4"
        and m.string[m.start() - 1 : m.start()] == "/"
        and m.string[m.start() - 2 : m.start() - 1].isalpha()
    ):
        return m.group(0)  # Chrome/120.0.0.0: a product version in a user agent
    return REDACTED if _NUMBER_CHECKS[kind](m.group(0)) else m.group(0)


def _ipv6(m: re.Match[str]) -> str:
    return REDACTED if p.is_public_ipv6(m.group(0)) else m.group(0)


def _patterns(text: str) -> str:
    """Apply every pattern; each is skipped when a cheap test shows it cannot match."""
    lowered = text.lower()
    if "private key" in lowered:
        text = p.PEM.sub(REDACTED, text)
    if "://" in text and "@" in text:
        text = p.URL_USERINFO.sub(_userinfo, text)
    if "cookie" in lowered:
        text = p.COOKIE_HEADER.sub(_cookie, text)
    if ":" in text or "=" in text or "%3" in text:
        text = _key_values(text)
    if "'," in text or '",' in text or "' ," in text or '" ,' in text:
        text = _quoted_pairs(text)
    if "--" in text:
        text = p.CLI_FLAG.sub(_cli_flag, text)
    if "login" in text:
        text = p.NETRC.sub(_netrc, text)
    if "auth" in lowered and p.AUTH_PAIR_GATE.search(lowered):
        text = p.AUTH_PAIR.sub(_auth_pair, text)
    if "-u" in text or "-U" in text:
        text = p.CLI_USER.sub(_cli_user, text)
    if "value" in text and "name" in text:
        text = p.NAMED_COOKIE.sub(_named_cookie, text)
    if "hook" in text and p.WEBHOOK_GATE.search(text):
        text = p.WEBHOOK.sub(_webhook, text)
    if "bearer" in lowered:
        text = p.BEARER.sub(_bearer, text)
    if "Basic" in text or "Token" in text or "BASIC" in text or "TOKEN" in text:
        text = p.BASIC_OR_TOKEN.sub(_basic_or_token, text)
    if text.count(".") >= 4 and ("ey" in text or "ew" in text):
        text = p.JWE.sub(_jwe, text)
    for literal, pattern in p.KEY_SHAPES:
        if literal in text:
            text = pattern.sub(_key_shape, text)
    if "@" in text or "%40" in text:
        text = _emails(text)
    if p.NUMBERS_GATE.search(text):
        text = p.NUMBERS.sub(_number, text)
    if ":" in text and ("::" in text or p.IPV6_GATE.search(text)):
        text = p.IPV6.sub(_ipv6, text)
    return text


def _marker_touches_text(text: str) -> bool:
    """True when a marker is glued to other text, which can make a new match start there."""
    at = text.find(REDACTED)
    while at >= 0:
        end = at + len(REDACTED)
        if at and text[at - 1] not in _BEFORE_MARKER:
            return True
        after = text[end : end + 2]
        if after and after[0] not in _AFTER_MARKER and not (after[0] == "." and after[1:] in ("", " ", "\n")):
            return True
        at = text.find(REDACTED, end)
    return False


def _token_boundary(text: str, limit: int) -> int:
    """Length of the longest prefix of at most ``limit`` chars that ends between tokens."""
    at = max(text.rfind(c, 0, limit + 1) for c in _DELIMS)
    if at < 0:
        return 0
    return at + 1 if text[at] in _CLOSERS else at


def _is_plain(text: str) -> bool:
    if len(text) > _PLAIN_MAX or text.strip(_PLAIN_CHARS):
        return False
    return _PLAIN_HINTS.search(text) is None


def _scrub_text(text: str) -> str:
    if _is_plain(text):
        return text
    dropped = 0
    trailer = _TRAILER.search(text) if text.endswith("]") else None
    if trailer:
        dropped = int(trailer.group(1))
        text = text[: trailer.start()]
    if len(text) > SCAN_LIMIT:
        cut = _token_boundary(text, SCAN_LIMIT)
        dropped += len(text) - cut
        text = text[:cut]
    for _ in range(_MAX_PASSES):
        scrubbed = _patterns(text)
        if scrubbed == text:
            break
        text = scrubbed
        if not _marker_touches_text(text):
            break  # every marker sits between delimiters: another pass would change nothing
    else:
        return REDACTED  # still changing: no stable answer, so nothing of it is shown
    if len(text) > SCAN_LIMIT:  # replacements grew it; keep the result within the limit
        cut = _token_boundary(text, SCAN_LIMIT)
        dropped += len(text) - cut
        text = text[:cut]
    return f"{text}…[unscanned:{dropped}]" if dropped else text


_scrub_short = lru_cache(maxsize=4096)(_scrub_text)


def scrub(value: object) -> str:
    """Return ``value`` as a string with secrets and PII replaced by ``REDACTED``."""
    try:
        if value is None:
            return ""
        if type(value) is not str:
            value = str(value)
        if len(value) <= _CACHE_MAX_LEN:
            return _scrub_short(value)
        return _scrub_text(value)
    except Exception:
        return REDACTED


def scrub_clipped(value: object, limit: int) -> str:
    """``scrub``, then cut to ``limit`` characters ending in ``…`` (spec section 7).

    In this order a cut can never leave part of a secret for the scrubber to miss
    (``sk-proj-Zx9Q…`` reads as someone's mask).
    """
    text = scrub(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_PLAIN_TYPES = frozenset({type(None), bool, int, float})


def _tree(value: object, depth: int) -> object:
    # Dispatch on the exact type first: this runs on every envelope's metadata.
    kind = type(value)
    if kind is str:
        return scrub(value)
    if kind in _PLAIN_TYPES or isinstance(value, bool | int | float):
        return value
    if depth >= _MAX_DEPTH:
        return REDACTED
    if isinstance(value, dict):
        return _dict(value, depth, True)
    if isinstance(value, list):
        return [_tree(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(_tree(v, depth + 1) for v in value)
    return scrub(value)


def _dict(value: dict[object, object], depth: int, check_keys: bool) -> dict[object, object]:
    out: dict[object, object] = {}
    for k, v in value.items():
        if check_keys and type(k) is str and is_sensitive_key(k):
            if type(v) is str and _is_cookie_header(k):
                out[k] = scrub(scrub_cookie_header(v, k.lower().startswith("set")))
                continue
            out[k] = None if v is None else REDACTED
        elif type(v) is str:
            out[k] = scrub(v)
        elif type(v) in _PLAIN_TYPES:
            out[k] = v
        else:
            out[k] = _tree(v, depth + 1)
    return out


def scrub_values_of(mapping: dict[object, object]) -> object:
    """``scrub_tree`` of a dict whose own keys are known to be harmless names (a
    boundary's declared metadata keys): the same result without testing those keys
    again. Keys deeper in are tested as always."""
    try:
        return _dict(mapping, 0, False)
    except Exception:
        return REDACTED


def scrub_tree(value: object) -> object:
    """Scrub every string leaf of a JSON-like tree; values under sensitive keys go whole."""
    try:
        return _tree(value, 0)
    except Exception:
        return REDACTED
