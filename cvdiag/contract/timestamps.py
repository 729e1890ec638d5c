"""Time on the wire: RFC 3339 UTC strings in envelopes, written by one function, read fast
and the same way everywhere, and put in order by one key.

``wire_ts`` writes ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (the emitter, the report, the history);
a log holds millions of them sharing a few thousand whole seconds, so each whole second
is parsed once (one cache, shared by every reader) and the milliseconds added. Every
other form is parsed in full. ``order_key`` is the one place of an envelope in time,
for every reader that orders envelopes.
"""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)  # a whole second in UTC, read without a zone, less this
_MICROSECOND = timedelta(microseconds=1)


# -- the one writer -------------------------------------------------------------------

#: (epoch second, its ``YYYY-MM-DDTHH:MM:SS``) last written: one tuple, replaced whole, so
#: a thread never pairs a second with another's text.
_written: tuple[int, str] = (-1 << 70, "")
#: ".000Z" to ".999Z": a lookup and a concatenation cost a third of formatting ``:03d``.
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))


def wire_ts(ns: int) -> str:
    """``ns`` (nanoseconds since the epoch, as ``time.time_ns()``) as the wire's
    ``YYYY-MM-DDTHH:MM:SS.mmmZ``, the milliseconds cut (never rounded up into the next
    second). The whole second is written once per second: the emitter calls this per line."""
    seconds, rest = divmod(ns, 1_000_000_000)
    written = _written
    if written[0] != seconds:
        written = _write_second(seconds)
    return written[1] + _MILLIS[rest // 1_000_000]


def _write_second(seconds: int) -> tuple[int, str]:
    global _written
    t = time.gmtime(seconds)  # ``%04d``: strftime's ``%Y`` drops the zeros of a year before 1000
    if not 1 <= t.tm_year <= 9999:  # as datetime says it: no RFC 3339 year
        raise ValueError(f"year {t.tm_year} is out of range")
    _written = (seconds, f"{t[0]:04d}-{t[1]:02d}-{t[2]:02d}T{t[3]:02d}:{t[4]:02d}:{t[5]:02d}")
    return _written


def seconds_ns(seconds: float) -> int:
    """Nanoseconds of epoch ``seconds`` rounded to the microsecond as
    ``datetime.fromtimestamp`` rounds them, for ``wire_ts`` of a float time."""
    frac, whole = math.modf(seconds)
    return (int(whole) * 1_000_000 + round(frac * 1e6)) * 1000


# -- readers ---------------------------------------------------------------------------


def parse_ts(ts: str) -> float:
    """Epoch seconds of a time as ``datetime.fromisoformat`` reads it.

    Meant for the RFC 3339 UTC times of envelopes (``...Z`` or ``+00:00``, any
    precision), it takes any ISO 8601 time: another offset is honoured, and a time
    without one is read as the host's local time. Raises ValueError on what is not a
    time; readers count that as a malformed line.
    """
    return datetime.fromisoformat(ts).timestamp()


# -- whole seconds, read once --------------------------------------------------------

#: Every ``YYYY-MM-DDTHH:MM:SS`` (UTC) met, as epoch seconds and as the start of an
#: ``order_key``: the one per-second cache (each reader takes the form it adds to).
#: The scan, which reads bytes, finds a second under its bytes as well.
_SECONDS: dict[str | bytes, tuple[float, int]] = {}
_MAX_SECONDS = 100_000  # more than a day of seconds; past it the cache starts again
_WHOLE_SECOND = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", re.ASCII)


def _read_second(second: str) -> tuple[float, int] | None:
    """``_SECONDS`` of ``second``, a ``YYYY-MM-DDTHH:MM:SS`` time in UTC, read and kept;
    None when it is not one (another shape, or no such date).

    Callers look in ``_SECONDS`` first, and parse any other shape in full.
    """
    if not _WHOLE_SECOND.fullmatch(second):
        return None
    try:
        since = datetime.fromisoformat(second) - _NAIVE_EPOCH  # whole seconds: days and seconds say it all
    except ValueError:
        return None
    if len(_SECONDS) >= _MAX_SECONDS:
        _SECONDS.clear()
    us = (since.days * 86_400 + since.seconds) * 1_000_000
    entry = _SECONDS[second] = (us / 1_000_000, us << 64)
    return entry


def ts_seconds(ts: str) -> float:
    """``parse_ts``, with the whole second of an emitter timestamp read once."""
    if len(ts) == 24 and ts[19] == "." and ts[23] == "Z":
        millis = _MILLI_SECONDS.get(ts[20:23])  # three ASCII digits: ``int`` takes "-12" and " 12" too
        if millis is not None:
            entry = _SECONDS.get(ts[:19]) or _read_second(ts[:19])
            base = entry[0] if entry is not None else parse_ts(ts[:19] + "Z")  # another shape: in full
            return base + millis
    return parse_ts(ts)


def canonical_ts(ts: bytes) -> bytes:
    """``ts`` as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` bytes, which compare in time order as bytes.

    Emitter timestamps already have that shape and only their whole second is checked
    (once per second); any other RFC 3339 UTC time is parsed and rewritten. Raises
    ValueError for a ts that is not a time.
    """
    if len(ts) == 24 and ts[19] == 46 and ts[23] == 90 and ts[20:23].isdigit():  # ".", "Z"
        raw_second = ts[:19]
        if raw_second in _SECONDS:  # the scan's case: no decoding on the hot path
            return ts
        try:
            second = raw_second.decode()
        except UnicodeDecodeError:
            second = ""  # no second: the full parse below raises
        entry = _SECONDS.get(second) or _read_second(second)
        if entry is None:
            ts_seconds(ts.decode())  # another shape: parsed in full, to raise if it is no time
        elif len(_SECONDS) < _MAX_SECONDS:
            _SECONDS[raw_second] = entry  # the same second under its bytes, for the next line
        return ts
    return wire_ts(seconds_ns(ts_seconds(ts.decode("utf-8", "replace")))).encode()


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
    if len(ts) == 24 and ts[23] == "Z" and ts[19] == ".":  # an emitter timestamp
        millis = _MILLI_KEY.get(ts[20:23])
        if millis is not None:
            entry = _SECONDS.get(ts[:19]) or _read_second(ts[:19])
            if entry is not None:
                return entry[1] + millis + mono
    try:
        moment = datetime.fromisoformat(ts)
        # Without an offset it is local time, as ``parse_ts`` reads it.
        local = moment.utcoffset() is None
        us = round(moment.timestamp() * 1_000_000) if local else (moment - _EPOCH) // _MICROSECOND
    except (ValueError, TypeError, OverflowError):
        return None
    return (us << 64) + mono


def seconds_key(seconds: float) -> int:
    """The ``order_key`` of a time known only as epoch seconds (a log line's own time),
    placed as an envelope of that microsecond with ``mono_ns`` 0."""
    return (round(seconds * 1_000_000) << 64) + _MONO_OFFSET


def key_seconds(key: int) -> float:
    """Epoch seconds of an ``order_key``."""
    # Whole microseconds divided by 10**6: the very float ``datetime.timestamp()`` gives.
    return (key >> 64) / 1_000_000


_MONO_OFFSET, _MONO_SPAN = 1 << 63, (1 << 64) - 1
#: The milliseconds of an emitter timestamp, as ``ts_seconds`` and ``order_key`` read them:
#: only "000" to "999" (a sign, a space or an underscore is no time to either of them).
_MILLI_SECONDS = {f"{ms:03d}": ms / 1000.0 for ms in range(1000)}
_MILLI_KEY = {f"{ms:03d}": (ms * 1000) << 64 for ms in range(1000)}
