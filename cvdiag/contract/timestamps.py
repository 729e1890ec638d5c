"""Time on the wire: RFC 3339 UTC strings in envelopes, read fast and the same way everywhere.

The emitter writes ``YYYY-MM-DDTHH:MM:SS.mmmZ``; a log holds millions of them sharing a
few thousand whole seconds, so each reader parses a whole second once and adds the
milliseconds. Every other RFC 3339 form is parsed in full.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def parse_ts(ts: str) -> float:
    """Epoch seconds of an RFC 3339 UTC time (``...Z`` or ``+00:00``, any precision).

    Raises ValueError on anything else; readers count that as a malformed line.
    """
    return datetime.fromisoformat(ts).timestamp()


_SECONDS: dict[str, float] = {}


def ts_seconds(ts: str) -> float:
    """``parse_ts`` with a cache per whole second, for the millions of emitter timestamps."""
    if len(ts) == 24 and ts[19] == "." and ts[23] == "Z":
        base = _SECONDS.get(ts[:19])
        if base is None:
            if len(_SECONDS) > 100_000:
                _SECONDS.clear()
            base = _SECONDS[ts[:19]] = parse_ts(ts[:19] + "Z")
        return base + int(ts[20:23]) / 1000.0
    return parse_ts(ts)


_VALID_SECONDS: set[bytes] = set()


def canonical_ts(ts: bytes) -> bytes:
    """``ts`` as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` bytes, which compare in time order as bytes.

    Emitter timestamps already have that shape and only their whole second is checked
    (once per second); any other RFC 3339 UTC time is parsed and rewritten. Raises
    ValueError for a ts that is not a time.
    """
    if len(ts) == 24 and ts[19] == 46 and ts[23] == 90 and ts[20:23].isdigit():  # ".", "Z"
        second = ts[:19]
        if second not in _VALID_SECONDS:
            ts_seconds(ts.decode())
            if len(_VALID_SECONDS) > 200_000:
                _VALID_SECONDS.clear()
            _VALID_SECONDS.add(second)
        return ts
    t = ts_seconds(ts.decode("utf-8", "replace"))
    return (datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z").encode()


def bytes_seconds(ts: bytes) -> float:
    """``ts_seconds`` of a ts the scan found as bytes."""
    return ts_seconds(ts.decode())


_LOG_TS = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?")


def line_ts(text: str) -> float | None:
    """The first timestamp in a free-form log line, naive ones taken as UTC."""
    m = _LOG_TS.search(text)
    if m is None:
        return None
    date, clock, frac, zone = m.groups()
    iso = f"{date}T{clock}{'.' + frac[:6] if frac else ''}{zone or 'Z'}"
    try:
        return parse_ts(iso)
    except ValueError:
        return None


def order_key(ts: Any, mono: Any) -> int | None:
    """The envelope's place in time: (ts, mono_ns) packed in one int, None without a ts.

    Microseconds since the epoch times 2**64 plus mono_ns offset into 0..2**64 orders
    exactly as the pair does, and one int costs a third of a tuple of a float and an int
    (a test keeps about seven). A mono_ns outside int64 is clamped into it.
    """
    if type(ts) is not str:
        return None
    mono = mono + _MONO_OFFSET if type(mono) is int else _MONO_OFFSET
    if not 0 <= mono <= _MONO_SPAN:
        mono = 0 if mono < 0 else _MONO_SPAN
    # Emitter timestamps (...T09:00:00.032Z) share their whole second with thousands of
    # others: parse each second once.
    if len(ts) == 24 and ts[23] == "Z":
        second = _SECOND_KEY.get(ts[:20])
        millis = _MILLI_KEY.get(ts[20:23])
        if second is None and millis is not None:
            second = _second_key(ts[:20])
        if second is not None and millis is not None:
            return second + millis + mono
    try:
        moment = datetime.fromisoformat(ts)
        # Without an offset it is local time, as ``parse_ts`` reads it.
        local = moment.utcoffset() is None
        us = round(moment.timestamp() * 1_000_000) if local else (moment - _EPOCH) // _MICROSECOND
    except (ValueError, TypeError, OverflowError):
        return None
    return (us << 64) + mono


def key_seconds(key: int) -> float:
    """Epoch seconds of an ``order_key``."""
    # Whole microseconds divided by 10**6: the very float ``datetime.timestamp()`` gives.
    return (key >> 64) / 1_000_000


_MONO_OFFSET, _MONO_SPAN = 1 << 63, (1 << 64) - 1
_MILLI_KEY = {f"{ms:03d}": (ms * 1000) << 64 for ms in range(1000)}
_SECOND = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.", re.ASCII)
_SECOND_KEY: dict[str, int] = {}


def _second_key(second: str) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS.`` in UTC as epoch microseconds times 2**64 (cached), or None."""
    if not _SECOND.fullmatch(second):
        return None
    try:
        moment = datetime.fromisoformat(second[:19]).replace(tzinfo=UTC)
    except ValueError:
        return None
    if len(_SECOND_KEY) >= 100_000:  # a log spanning more than a day of seconds
        _SECOND_KEY.clear()
    key = _SECOND_KEY[second] = ((moment - _EPOCH) // _MICROSECOND) << 64
    return key
