"""The timestamp readers share one per-second cache and give exactly what their separate
caches gave before, for every shape of time (the old code is the oracle; ``line_ts``,
which has no cache, is unchanged)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cvdiag.contract import timestamps


@pytest.fixture(autouse=True, scope="module")
def _a_zone_that_is_not_utc() -> Iterator[None]:
    """Naive times are local: away from UTC, reading one as UTC shows."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    yield
    if saved is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = saved
    time.tzset()


# -- the oracle: the timestamp code as it was, with its own caches ----------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def old_parse_ts(ts: str) -> float:
    return datetime.fromisoformat(ts).timestamp()


_SECONDS: dict[str, float] = {}


def old_ts_seconds(ts: str) -> float:
    # The one change: milliseconds that ``int`` reads but no other reader does ("-12",
    # " 12", "1_2") are no time (the full parse refuses them), as ``order_key`` says.
    if len(ts) == 24 and ts[19] == "." and ts[23] == "Z" and ts[20:23].isascii() and ts[20:23].isdigit():
        base = _SECONDS.get(ts[:19])
        if base is None:
            if len(_SECONDS) > 100_000:
                _SECONDS.clear()
            base = _SECONDS[ts[:19]] = old_parse_ts(ts[:19] + "Z")
        return base + int(ts[20:23]) / 1000.0
    return old_parse_ts(ts)


_VALID_SECONDS: set[bytes] = set()


def old_canonical_ts(ts: bytes) -> bytes:
    if len(ts) == 24 and ts[19] == 46 and ts[23] == 90 and ts[20:23].isdigit():  # ".", "Z"
        second = ts[:19]
        if second not in _VALID_SECONDS:
            old_ts_seconds(ts.decode())
            if len(_VALID_SECONDS) > 200_000:
                _VALID_SECONDS.clear()
            _VALID_SECONDS.add(second)
        return ts
    t = old_ts_seconds(ts.decode("utf-8", "replace"))
    # The one change: strftime wrote a year before 1000 without its zeros (``1-09-30T...``,
    # another shape, out of byte order); now every writer writes it as isoformat does.
    return old_isoformat_writer(t).encode()


def old_isoformat_writer(seconds: float) -> str:
    """``face/report_data._ms_text``, ``face/_history._stamp``, ``history.record.now`` and
    ``testing.envelope`` as they were (from ms, seconds or now)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_old_emitter_cache: list[Any] = [-1, ""]


def old_utc_timestamp(now_ns: int) -> str:
    """``write.emitter.utc_timestamp`` as it was."""
    seconds, rest = divmod(now_ns, 1_000_000_000)
    if _old_emitter_cache[0] != seconds:
        _old_emitter_cache[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _old_emitter_cache[0] = seconds
    return f"{_old_emitter_cache[1]}.{rest // 1_000_000:03d}Z"


def old_bytes_seconds(ts: bytes) -> float:
    return old_ts_seconds(ts.decode())


def old_order_key(ts: Any, mono: Any) -> int | None:
    if type(ts) is not str:
        return None
    mono = mono + _MONO_OFFSET if type(mono) is int else _MONO_OFFSET
    if not 0 <= mono <= _MONO_SPAN:
        mono = 0 if mono < 0 else _MONO_SPAN
    if len(ts) == 24 and ts[23] == "Z":
        second = _SECOND_KEY.get(ts[:20])
        millis = _MILLI_KEY.get(ts[20:23])
        if second is None and millis is not None:
            second = _second_key(ts[:20])
        if second is not None and millis is not None:
            return second + millis + mono
    try:
        moment = datetime.fromisoformat(ts)
        local = moment.utcoffset() is None
        us = round(moment.timestamp() * 1_000_000) if local else (moment - _EPOCH) // _MICROSECOND
    except (ValueError, TypeError, OverflowError):
        return None
    return (us << 64) + mono


_MONO_OFFSET, _MONO_SPAN = 1 << 63, (1 << 64) - 1
_MILLI_KEY = {f"{ms:03d}": (ms * 1000) << 64 for ms in range(1000)}
_SECOND = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.", re.ASCII)
_SECOND_KEY: dict[str, int] = {}


def _second_key(second: str) -> int | None:
    if not _SECOND.fullmatch(second):
        return None
    try:
        moment = datetime.fromisoformat(second[:19]).replace(tzinfo=UTC)
    except ValueError:
        return None
    if len(_SECOND_KEY) >= 100_000:
        _SECOND_KEY.clear()
    key = _SECOND_KEY[second] = ((moment - _EPOCH) // _MICROSECOND) << 64
    return key


# -- generated times of every shape ---------------------------------------------------


def _digits(n: int, low: int, high: int) -> st.SearchStrategy[str]:
    """Numbers in [low, high] written with ``n`` digits: just past valid ranges too."""
    return st.integers(low, high).map(lambda v: f"{v:0{n}d}")


# Years around the epoch and the ends of datetime's range; days and times just past valid.
_DATE = st.tuples(
    st.one_of(_digits(4, 1969, 2100), st.sampled_from(["0000", "0001", "9999", "1970"])),
    _digits(2, 0, 13),
    _digits(2, 0, 32),
).map("-".join)
_CLOCK = st.tuples(_digits(2, 0, 24), _digits(2, 0, 60), _digits(2, 0, 61)).map(":".join)
_SEPARATOR = st.sampled_from(["T", "T", "T", " ", "t", "x", "é"])
_FRACTION = st.one_of(
    st.just(""),
    st.integers(1, 9).flatmap(lambda n: _digits(n, 0, 10**n - 1)).map(lambda d: "." + d),
    st.sampled_from([". 12", ".+12", ".-12", ".1_2", ".12", ".1234", ",123", ".٣٣٣"]),
)
_OFFSET = st.one_of(
    st.sampled_from(["Z", "Z", "Z", "", "+00:00", "-00:00", "z", "+0000", "+00"]),
    st.tuples(st.sampled_from("+-"), _digits(2, 0, 24), _digits(2, 0, 59)).map(lambda p: f"{p[0]}{p[1]}:{p[2]}"),
)
#: ``YYYY-MM-DDTHH:MM:SS.mmmZ``, the emitter's shape (dates and times may be invalid).
EMITTER = st.tuples(_DATE, _CLOCK, _digits(3, 0, 999)).map(lambda p: f"{p[0]}T{p[1]}.{p[2]}Z")
ANY_SHAPE = st.tuples(_DATE, _SEPARATOR, _CLOCK, _FRACTION, _OFFSET).map("".join)
#: Strings of the emitter's length with its ``.`` and ``Z``, anything elsewhere.
SAME_LENGTH = st.tuples(st.text(min_size=19, max_size=19), st.text(min_size=3, max_size=3)).map(
    lambda p: f"{p[0]}.{p[1]}Z"
)
TIMES = st.one_of(EMITTER, EMITTER, ANY_SHAPE, ANY_SHAPE, SAME_LENGTH, st.text(max_size=40))


def _outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return "value", fn(*args)
    except Exception as exc:  # the very exception matters too: readers catch ValueError
        return type(exc).__name__, str(exc)


def _agree(new: Callable[..., Any], old: Callable[..., Any], *args: Any) -> None:
    want = _outcome(old, *args)
    assert _outcome(new, *args) == want  # a second the cache has not seen yet
    assert _outcome(new, *args) == want  # and once it has


EMITTER_EXAMPLES = ("2026-11-21T09:00:00.032Z", "2024-02-29T23:59:59.999Z", "2023-02-29T00:00:00.000Z",
                    "2026-11-21 09:00:00.032Z", "2026-11-21T09:00:00. 12Z", "2026-11-21T09:00:00.-12Z",
                    "0001-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z", "2026-11-21T24:00:00.000Z",
                    "20261121T090000.555.123Z", "2026-11-21T09:00+01.000Z", "2026-W47-6T09:00:00.000Z")  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(TIMES)
@example("2026-11-21T09:00:00.032+01:00")
@example("2026-11-21T09:00:00")
@example("2026-11-21T09:00:00.123456789Z")
def test_every_timestamp_reader_gives_what_it_gave_before(ts: str) -> None:
    for text in (ts, *EMITTER_EXAMPLES):
        _agree(timestamps.parse_ts, old_parse_ts, text)
        _agree(timestamps.ts_seconds, old_ts_seconds, text)
        for mono in (0, 17, -1, 1 << 70, None, True):
            _agree(timestamps.order_key, old_order_key, text, mono)
        for raw in (text.encode("utf-8", "surrogatepass"), text.encode("latin-1", "replace")):
            _agree(timestamps.canonical_ts, old_canonical_ts, raw)
            _agree(timestamps.bytes_seconds, old_bytes_seconds, raw)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=19, max_size=19), st.binary(min_size=3, max_size=3))
def test_canonical_ts_of_any_bytes_of_the_emitter_shape_is_as_before(second: bytes, millis: bytes) -> None:
    _agree(timestamps.canonical_ts, old_canonical_ts, second + b"." + millis + b"Z")


def _valid(fn: Callable[..., Any], *args: Any) -> bool:
    try:
        return fn(*args) is not None
    except ValueError:
        return False


@settings(max_examples=1000, deadline=None)
@given(TIMES)
@example("2026-11-21T09:00:00.-12Z")  # ``int`` reads "-12": the emitter shape with no order key
@example("2026-11-21T09:00:00. 12Z")
@example("2026-11-21T09:00:00.1_2Z")
def test_a_time_is_a_time_to_every_reader_or_to_none(ts: str) -> None:
    """The one rule of what is a time: a reader that takes it (the checks of an envelope,
    the rows' bytes) can order it too; the compiled fold, which keeps no time without an
    order key, agrees."""
    valid = _valid(timestamps.order_key, ts, 0)
    assert _valid(timestamps.ts_seconds, ts) == valid
    assert _valid(timestamps.canonical_ts, ts.encode("utf-8", "surrogatepass")) == valid
    from cvdiag.read import fold  # the read side's compiled reader of emitter times

    if fold._CFOLD is not None and fold._CFOLD.emitter_seconds(ts) is not None:
        assert valid and fold._CFOLD.emitter_seconds(ts) == timestamps.ts_seconds(ts)


def test_a_second_is_read_once_for_every_reader() -> None:
    timestamps._SECONDS.clear()
    ts = "2026-11-21T09:00:07.250Z"
    assert timestamps.ts_seconds(ts) == datetime(2026, 11, 21, 9, 0, 7, 250000, tzinfo=UTC).timestamp()
    assert list(timestamps._SECONDS) == ["2026-11-21T09:00:07"]
    assert timestamps.canonical_ts(b"2026-11-21T09:00:07.999Z") == b"2026-11-21T09:00:07.999Z"
    key = timestamps.order_key("2026-11-21T09:00:07.001Z", 0)
    assert key is not None and timestamps.key_seconds(key) == timestamps.ts_seconds("2026-11-21T09:00:07.001Z")
    # One entry, parsed once; the scan finds it again under its bytes without decoding.
    assert timestamps._SECONDS["2026-11-21T09:00:07"] is timestamps._SECONDS[b"2026-11-21T09:00:07"]
    assert sorted(map(str, timestamps._SECONDS)) == ["2026-11-21T09:00:07", "b'2026-11-21T09:00:07'"]


def test_parse_ts_reads_offsets_and_takes_a_naive_time_as_local() -> None:
    """What its docstring says: not only UTC."""
    assert timestamps.parse_ts("2026-11-21T10:00:00+01:00") == timestamps.parse_ts("2026-11-21T09:00:00Z")
    naive = datetime(2026, 11, 21, 9, 0, 0)
    assert timestamps.parse_ts("2026-11-21T09:00:00") == naive.timestamp()  # the host's zone


# -- the one writer ---------------------------------------------------------------------

_YEAR_1 = int(datetime(1, 1, 1, tzinfo=UTC).timestamp())
_YEAR_1000 = int(datetime(1000, 1, 1, tzinfo=UTC).timestamp())
_END = int(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()) + 1
#: Nanoseconds since the epoch over all of RFC 3339's years, around now more often.
_NS = st.one_of(
    st.integers(_YEAR_1 * 10**9, _END * 10**9 - 1),
    st.integers(1_700_000_000 * 10**9, 1_900_000_000 * 10**9),
)


@settings(max_examples=2000, deadline=None)
@given(_NS)
@example(0)
@example(-1)  # the last nanosecond before the epoch: 1969-12-31T23:59:59.999Z
@example(1_795_000_000_999_999_999)  # never rounded up into the next second
def test_the_one_writer_writes_what_every_old_writer_wrote(ns: int) -> None:
    text = timestamps.wire_ts(ns)
    assert text == timestamps.wire_ts(ns)  # the second's text cached, and again
    ms = ns // 1_000_000
    exact = (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert text == exact
    if abs(ms) < 2**33 * 1000:  # report_data wrote whole ms via a float: exact until 2242
        assert text == old_isoformat_writer(ms / 1000)
    assert timestamps.wire_ts(ms * 1_000_000) == text
    if ns >= _YEAR_1000 * 10**9:  # strftime's %Y dropped the zeros of earlier years
        assert text == old_utc_timestamp(ns)
    assert len(text) == 24 and timestamps.canonical_ts(text.encode()) == text.encode()
    assert round(timestamps.parse_ts(text) * 1000) == ms  # it reads back as the very millisecond
    assert timestamps.order_key(text, 0) == ((ms * 1000) << 64) + (1 << 63)


@settings(max_examples=2000, deadline=None)
@given(st.floats(_YEAR_1 + 1, _END - 1, allow_nan=False))
@example(1.9999995)  # a microsecond rounded up carries into the next second
@example(-0.0000005)
@example(1795000000.0005)
def test_the_one_writer_of_a_float_time_writes_what_datetime_wrote(seconds: float) -> None:
    assert timestamps.wire_ts(timestamps.seconds_ns(seconds)) == old_isoformat_writer(seconds)


def test_the_writer_refuses_a_year_rfc_3339_cannot_hold() -> None:
    with pytest.raises(ValueError, match="year 10000 is out of range"):
        timestamps.wire_ts(_END * 10**9)
    with pytest.raises(ValueError, match="year 0 is out of range"):
        timestamps.wire_ts(_YEAR_1 * 10**9 - 1)


def test_no_other_module_writes_a_time() -> None:
    """``wire_ts`` is the one writer: a time written anywhere else (isoformat, strftime,
    gmtime) would be a second form of the wire time to keep in step."""
    package = Path(timestamps.__file__).resolve().parents[1]
    writers = re.compile(r"\.isoformat\(timespec|strftime\(|time\.gmtime\(")
    found = [
        f"{path.relative_to(package.parent)}:{n}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "timestamps.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if writers.search(line)
    ]
    assert found == []
