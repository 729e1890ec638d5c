"""W3C trace context and a test's trace (spec section 9): shared by the middleware (which
adopts a test id from ``traceparent``/``baggage``), the OTLP export and the pytest plugin
(which gives each test a trace).

A test's trace id is its id when the id is a UUID (a UUIDv7 is 32 hex digits without its
hyphens), else the first 16 bytes of the id's SHA-256: the harness, the backend's spans
and its log records land in one trace without either side telling the other.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from random import getrandbits

from cvdiag.contract.ids import sanitize_test_id

#: The baggage entry that carries a test id (spec section 9).
BAGGAGE_TEST_ID = "cvdiag.test_id"
TRACEPARENT_HEADER = "traceparent"
BAGGAGE_HEADER = "baggage"
#: A baggage header is read this far at most (the W3C limit is 8192 bytes).
BAGGAGE_MAX_BYTES = 8192
_TRACEPARENT = re.compile(rb"^\s*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_HEX32 = re.compile(r"^[0-9a-f]{32}$")


def parse_traceparent(raw: str | bytes | None) -> tuple[str, str] | None:
    """(trace id, span id) in lowercase hex of a valid ``traceparent``, else None (an
    all-zero id or version ``ff`` is invalid, as W3C says)."""
    if not raw:
        return None
    if isinstance(raw, str):
        raw = raw.encode("latin-1", "replace")
    found = _TRACEPARENT.match(raw[:128])
    if found is None:
        return None
    version, trace, span, _flags = (g.decode() for g in found.groups())
    if version == "ff" or trace == "0" * 32 or span == "0" * 16:
        return None
    return trace, span


def baggage_test_id(raw: str | bytes | None) -> str | None:
    """The sanitized ``cvdiag.test_id`` entry of a ``baggage`` header, else None."""
    if not raw:
        return None
    text = raw[:BAGGAGE_MAX_BYTES].decode("latin-1") if isinstance(raw, bytes) else raw[:BAGGAGE_MAX_BYTES]
    for member in text.split(","):
        key, sep, value = member.partition("=")
        if sep and key.strip() == BAGGAGE_TEST_ID:
            return sanitize_test_id(urllib.parse.unquote(value.split(";", 1)[0].strip()))
    return None


def trace_headers_test_id(traceparent: bytes | None, baggage: bytes | None) -> str | None:
    """The test id a request without ``x-test-id`` carries: baggage ``cvdiag.test_id``,
    else the ``traceparent``'s trace id (the readers' rule, spec section 9)."""
    found = baggage_test_id(baggage)
    if found:
        return found
    parsed = parse_traceparent(traceparent)
    return trace_test_id(parsed[0]) if parsed is not None else None


def trace_test_id(trace_id: str) -> str:
    """The test id a trace id stands for: a UUIDv7's 32 hex digits (``trace_id_of_test``
    of a minted id) in the UUID's hyphenated form, so that it joins the harness's id;
    any other trace id as it is."""
    if len(trace_id) == 32 and trace_id[12] == "7" and trace_id[16] in "89ab":
        t = trace_id
        return f"{t[:8]}-{t[8:12]}-{t[12:16]}-{t[16:20]}-{t[20:]}"
    return trace_id


def trace_id_of_test(test_id: str) -> str:
    """The 32-hex trace id of a test (see the module's docstring)."""
    compact = test_id.replace("-", "")
    if _HEX32.match(compact) and compact != "0" * 32:
        return compact
    return hashlib.sha256(test_id.encode()).hexdigest()[:32]


def new_span_hex() -> str:
    """A fresh, non-zero span id in 16 lowercase hex."""
    return "%016x" % (getrandbits(64) or 1)


def traceparent(trace_id: str, span_id: str, sampled: bool = True) -> str:
    """A version-00 ``traceparent`` value."""
    return f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"
