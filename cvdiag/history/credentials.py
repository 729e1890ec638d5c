"""A history's location as it may be printed: every credential a PostgreSQL location can
carry, masked (errors, the pytest summary and the report end up in CI logs).

libpq takes a location in two forms, and both can hold secrets in several places:

- a URL, ``postgresql://user:PASSWORD@host/db?password=PASSWORD&sslpassword=PASSWORD``
  (a parameter's name and value may be percent-encoded, ``%70assword=`` is
  ``password=``; the user part ends at the last ``@`` before the path, whatever libpq
  or ``urlsplit`` make of a stray ``@`` or ``?`` in a password);
- a keyword string, ``host=db user=ci password=PASSWORD sslpassword='it\\'s'``
  (values bare or single-quoted with backslash escapes).

``passfile`` and ``sslkey`` name files, not secrets, and stay shown.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

POSTGRES_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)
#: The keywords whose values are secrets.
SECRET_KEYS = frozenset({"password", "sslpassword"})
#: A libpq keyword string starts with a keyword and ``=`` (``host=db dbname=cvdiag``); a
#: DuckDB file's path does not (it would need a name like ``x=y``).
_KEYWORD_STRING = re.compile(r"^\s*[A-Za-z_]+\s*=")
#: One ``key = value`` of a keyword string: the value quoted, or bare up to a space;
#: in both a backslash escapes the next character (an escaped space stays in).
_KEYWORD = re.compile(r"(\w+)(\s*=\s*)('(?:[^'\\]|\\.)*(?:'|$)|(?:\\.|\S)*)", re.DOTALL)
MASK = "***"


def is_postgres(where: str) -> bool:
    """Whether ``where`` names a PostgreSQL database (a URL or a keyword string)."""
    return bool(POSTGRES_URL.match(where) or _KEYWORD_STRING.match(where))


def redacted(where: str) -> str:
    """``where`` with every secret it holds replaced by ``***``: what may be printed."""
    if POSTGRES_URL.match(where):
        return _redacted_url(where)
    if _KEYWORD_STRING.match(where):
        return _KEYWORD.sub(lambda m: m[0] if m[1].lower() not in SECRET_KEYS else m[1] + m[2] + MASK, where)
    return where


def _redacted_url(url: str) -> str:
    scheme_end = url.index("://") + 3
    path_at = url.find("/", scheme_end)
    authority_end = len(url) if path_at < 0 else path_at
    at = url.rfind("@", scheme_end, authority_end)
    if at >= 0 and ":" in url[scheme_end:at]:
        user = url[scheme_end:at].partition(":")[0]
        url = url[:scheme_end] + f"{user}:{MASK}" + url[at:]
        authority_end = url.find("/", scheme_end)
        authority_end = len(url) if authority_end < 0 else authority_end
    query_at = url.find("?", authority_end)
    if query_at < 0:
        return url
    fragment_at = url.find("#", query_at)
    end = len(url) if fragment_at < 0 else fragment_at
    params = [_masked_param(p) for p in url[query_at + 1 : end].split("&")]
    return url[: query_at + 1] + "&".join(params) + url[end:]


def _masked_param(param: str) -> str:
    key, eq, _ = param.partition("=")
    return f"{key}={MASK}" if eq and unquote(key).strip().lower() in SECRET_KEYS else param


def secrets_in(where: str) -> list[str]:
    """The secrets ``where`` holds, as written, decoded and encoded, longest first: a
    driver's message may quote any of them."""
    found: set[str] = set()
    if POSTGRES_URL.match(where):
        scheme_end = where.index("://") + 3
        path_at = where.find("/", scheme_end)
        at = where.rfind("@", scheme_end, len(where) if path_at < 0 else path_at)
        if at >= 0 and ":" in where[scheme_end:at]:
            found.add(where[scheme_end:at].partition(":")[2])
        query = where.partition("?")[2].partition("#")[0]
        for param in query.split("&"):
            key, eq, value = param.partition("=")
            if eq and unquote(key).strip().lower() in SECRET_KEYS:
                found.add(value)
    elif _KEYWORD_STRING.match(where):
        for m in _KEYWORD.finditer(where):
            if m[1].lower() in SECRET_KEYS:
                value = m[3]
                found.add(value)
                bare = value[1:].removesuffix("'") if value.startswith("'") else value
                found.add(re.sub(r"\\(.)", r"\1", bare, flags=re.DOTALL))
    found |= {unquote(s) for s in found}
    found |= {quote(s, safe="") for s in found}
    return sorted((s for s in found if s), key=len, reverse=True)


def masked(message: str, where: str | None) -> str:
    """``message`` with ``where`` shown redacted and none of its secrets."""
    if not where:
        return message
    message = message.replace(where, redacted(where))
    for secret in secrets_in(where):
        message = message.replace(secret, MASK)
    return message
