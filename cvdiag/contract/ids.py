"""Test ids, span ids, slugs and demos by the rules of spec section 5.

Shared by the emit side (adopting inbound ids) and the read side (matching them).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from random import getrandbits
from typing import AnyStr

from cvdiag.contract.schema import DEFAULT_DEMO, SLUG_RE, TEST_ID_MAX_CHARS

_NOT_TEST_ID_CHARS = re.compile(r"[^a-z0-9._-]+")
_TEST_ID_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789._-")
#: Every byte a sanitized id may not contain, for bytes.translate's C-speed delete.
_NOT_TEST_ID_BYTES = bytes(b for b in range(256) if b not in _TEST_ID_BYTES)
_NOT_SLUG_CHARS = re.compile(r"[^a-z0-9-]+")
# Sanitizing cleans the input a chunk at a time and stops once it has enough kept
# characters: an id after kilobytes of junk is still found, and a hostile header costs
# one C-speed pass over its bytes at most (the server already bounds its length).
_CHUNK = 4096
_SLUG_MAX_CHARS = 64
#: How much of a path segment ``demo_from_path`` keeps: the scrubber's scan limit, since
#: the emitter scrubs ``demo`` first and cuts it to ``DEMO_MAX_CHARS`` after.
DEMO_RAW_MAX_CHARS = 2048


_VERSION_7 = 0x7 << 76
_VARIANT_RFC = 0b10 << 62
_RAND_A_AND_B = ((1 << 12) - 1) << 64 | ((1 << 62) - 1)


def new_test_id() -> str:
    """A fresh lowercase, hyphenated UUIDv7 (48-bit Unix ms, RFC 9562 variant).

    The same layout as ``uuid6.uuid7()`` without building a ``uuid.UUID`` object, which
    cost five times as much; a request without an ``x-test-id`` pays this on the hot path.
    """
    value = (time.time_ns() // 1_000_000) << 80 | _VERSION_7 | _VARIANT_RFC | (getrandbits(128) & _RAND_A_AND_B)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_span_id() -> str:
    """Eight random bytes in lowercase hex (not secret, so the fast PRNG will do;
    ``random`` reseeds itself in a forked child)."""
    return "%016x" % getrandbits(64)  # noqa: UP031 (two thirds of the f-string's cost)


def _clean_id_bytes(chunk: bytes) -> bytes:
    return chunk.lower().translate(None, _NOT_TEST_ID_BYTES)


def _clean_id_text(chunk: str) -> str:
    return _NOT_TEST_ID_CHARS.sub("", chunk.lower())


def _clean_slug_text(chunk: str) -> str:
    return _NOT_SLUG_CHARS.sub("", chunk.lower())


def sanitize_test_id(raw: str | bytes | None) -> str | None:
    """The adopted form of an inbound id, or None when nothing usable is left."""
    if raw is None:
        return None
    if isinstance(raw, bytes):  # straight from ASGI headers: the hot path
        if len(raw) > _CHUNK:
            cleaned = _clean(raw, _clean_id_bytes, TEST_ID_MAX_CHARS)
        else:
            cleaned = raw.lower().translate(None, _NOT_TEST_ID_BYTES)
        if len(cleaned) > TEST_ID_MAX_CHARS:
            cleaned = cleaned[:TEST_ID_MAX_CHARS]
        return cleaned.decode("ascii") or None
    value = _clean(raw, _clean_id_text, TEST_ID_MAX_CHARS)[:TEST_ID_MAX_CHARS]
    return value or None


def _clean(raw: AnyStr, clean_chunk: Callable[[AnyStr], AnyStr], keep: int) -> AnyStr:
    """``raw`` cleaned a chunk at a time, stopping once ``keep`` characters are kept."""
    parts = []
    kept = 0
    for start in range(0, len(raw), _CHUNK):
        part = clean_chunk(raw[start : start + _CHUNK])
        parts.append(part)
        kept += len(part)
        if kept >= keep:
            break
    return raw[:0].join(parts)


def normalize_test_id(raw: str | bytes | None) -> str:
    """Adopt ``raw`` by the spec's sanitizer, or mint a UUIDv7 when nothing is left."""
    return sanitize_test_id(raw) or new_test_id()


def sanitize_slug(raw: str | bytes | None) -> str | None:
    """A valid slug from a header value, or None if it cannot become one."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode("latin-1")
    value = _clean(raw, _clean_slug_text, _SLUG_MAX_CHARS)
    if not value:
        return None
    if not value[0].isalpha():
        value = "x" + value
    value = value[:_SLUG_MAX_CHARS]
    return value if SLUG_RE.match(value) else None


def demo_from_path(path: str) -> str:
    """The first path segment, or ``default`` for ``/``."""
    path = path.lstrip("/")
    end = path.find("/")
    segment = path if end < 0 else path[:end]
    return segment[:DEMO_RAW_MAX_CHARS] if segment else DEFAULT_DEMO
