"""Find the CVDIAG lines of a buffer fast.

Reading is built for big files: a buffer is searched with ``find`` for a few markers
(C speed, no per-line Python for noise), and only the lines holding one are parsed
(``hits``, ``hits_in``). A line that a container runtime split into several records is
found by its first record and read forward to its last (``logical_lines``, ``rejoin``).
Folding the lines found into per-test facts is ``fold``'s job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cvdiag.contract.timestamps import parse_ts
from cvdiag.read import rejoin
from cvdiag.read._compiled import CFOLD as _CFOLD
from cvdiag.read.parsing import ENVELOPE, MALFORMED, MARKERS, NOTHING, Tally, is_whole_malformed, parse_span
from cvdiag.read.sources import Source

_PROGRESS_STEP = 8 << 20

# -- finding lines ----------------------------------------------------------------------


def marked_lines(
    buf: Any, markers: tuple[bytes, ...], start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int]]:
    """(start, end) of every line of ``buf[start:end]`` that holds one of ``markers``.

    Noise between marked lines is skipped by ``find`` without touching Python.
    ``start`` is 0 or the index of a newline, ``end`` a newline or the buffer's end.
    A position sent to the generator is where it goes on from (lines already read).
    """
    n = len(buf) if end is None else end
    find, rfind = buf.find, buf.rfind
    nexts = [find(m, start, n) for m in markers]
    while True:
        live = [p for p in nexts if p >= 0]
        if not live:
            return
        pos = min(live)
        ls = rfind(b"\n", start, pos)
        ls = start if ls < 0 else ls + 1
        le = find(b"\n", pos, n)
        if le < 0:
            le = n
        sent = yield ls, le
        start = le + 1 if sent is None else sent
        if start >= n:
            return
        nexts = [p if p >= start or p < 0 else find(m, start, n) for p, m in zip(nexts, markers, strict=True)]


WINDOW = 16 << 20
_COUNT_SLICE = 8 << 20


def windows(buf: Any, start: int = 0, end: int | None = None, size: int = WINDOW) -> Iterator[tuple[int, int]]:
    """Line-aligned ``(start, end)`` slices of ``buf[start:end]``, each ending on a newline."""
    n = len(buf) if end is None else end
    a = start
    while a < n:
        b = min(n, a + size)
        if b < n:
            nl = buf.find(b"\n", b, n)
            b = n if nl < 0 else nl
        yield a, b
        a = b


def lines_with(buf: Any, needle: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of the lines of ``buf`` that hold ``needle``, in order, a split
    container line spanning all its records (the id is in the first one only)."""
    return logical_lines(buf, _physical_lines_with(buf, needle))


def _physical_lines_with(buf: Any, needle: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of the physical lines of ``buf`` that hold ``needle``, in order."""
    for a, b in windows(buf):
        yield from marked_lines(buf, (needle,), a, b)


def logical_lines(buf: Any, spans: Iterable[tuple[int, int]], end: int | None = None) -> Iterator[tuple[int, int]]:
    """``spans`` of physical lines (in order), each line that is the first record of a
    split container line extended to the last record that belongs to it.

    The records joined to an earlier line are dropped when they come up themselves.
    The span of a split line may enclose records of the other stream; those are still
    yielded on their own, and ``rejoin.join`` skips them inside the span.
    """
    joins = rejoin.Joins(buf, end)
    for ls, le in spans:
        if not (joins.joined and joins.taken(ls)):
            yield ls, joins.extend(ls, le)


def newlines(buf: Any) -> int:
    """How many lines end in ``buf`` (compiled: several times faster than ``bytes.count``)."""
    return _CFOLD.newlines(buf) if _CFOLD is not None else buf.count(b"\n")


class LineCounter:
    """Line numbers of offsets in one buffer, counted incrementally."""

    __slots__ = ("base", "buf", "line", "pos")

    def __init__(self, buf: Any, base: int = 1) -> None:
        self.buf, self.pos, self.line, self.base = buf, 0, base, base

    def at(self, offset: int) -> int:
        if offset < self.pos:
            self.pos, self.line = 0, self.base
        # In slices, so that counting deep into a block never copies it whole.
        for a, b in windows(self.buf, self.pos, offset, _COUNT_SLICE):
            self.line += self.buf[a:b].count(b"\n")
        self.pos = offset
        return self.line


# -- every CVDIAG line, parsed ------------------------------------------------------------


class Hit:
    """One CVDIAG line found in a source."""

    __slots__ = ("kind", "line", "raw", "repeats", "source", "value")

    def __init__(self, kind: int, value: Any, source: str, line: int | None, raw: bytes, repeats: int = 0) -> None:
        self.kind = kind
        self.value = value  # the envelope or breadcrumb dict, or why the line is malformed
        self.source = source
        self.line = line
        self.raw = raw
        #: A malformed line only: how many lines right after it are the same bytes (each
        #: one more problem, on the next line numbers), read in one step.
        self.repeats = repeats


def hits_in(
    sources: list[Source],
    tally: Tally,
    *,
    markers: tuple[bytes, ...] = MARKERS,
    with_lines: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Iterator[Hit]:
    """Every envelope and breadcrumb of ``sources``, in file order, malformed lines
    counted in ``tally``. ``with_lines`` numbers every hit (needed by ``validate``)."""
    for src in sources:
        base = 1
        for buf in src.blocks():
            yield from hits(buf, src.name, tally, markers=markers, with_lines=with_lines, progress=progress, base=base)
            if isinstance(buf, bytes):
                base += newlines(buf)


def hits(
    buf: Any,
    name: str,
    tally: Tally,
    *,
    markers: tuple[bytes, ...] = MARKERS,
    with_lines: bool = False,
    progress: Callable[[int], None] | None = None,
    base: int = 1,
) -> Iterator[Hit]:
    """``hits_in`` of one buffer of the source ``name``, whose first line is line ``base``."""
    counter = LineCounter(buf, base)
    done = 0
    joins = rejoin.Joins(buf)
    for a, b in windows(buf):
        spans = marked_lines(buf, markers, a, b)  # one needle (a test id) or the markers
        span, resume = next(spans, None), None
        while span is not None:
            ls, le = span
            span = None
            if not (joins.joined and joins.taken(ls)):
                kind, value, raw = parse_span(buf, ls, le, joins)
                if progress is not None and ls - done > _PROGRESS_STEP:
                    progress(ls - done)
                    done = ls
                repeats = 0
                if kind == MALFORMED:
                    tally.add(lambda c=counter, o=ls: f"{name}:{c.at(o)}", value)
                    if is_whole_malformed(raw):  # the same line again and again: counted in one step
                        repeats, resume = _repeats(buf, raw, le + 1, b)
                        tally.count += repeats
                elif kind == ENVELOPE:
                    tally.seen(value, lambda c=counter, o=ls: f"{name}:{c.at(o)}")
                if kind != NOTHING and (kind != MALFORMED or with_lines):
                    if b"\n" in raw:  # a split line: its own records, without the other stream's
                        raw = rejoin.join(raw)[3]
                    yield Hit(kind, value, name, counter.at(ls) if with_lines else None, raw, repeats)
            try:
                span = spans.send(resume) if resume is not None else next(spans)
            except StopIteration:
                span = None
            resume = None
    if progress is not None:
        progress(len(buf) - done)


#: The most bytes compared at once when skipping a run of one repeated line.
_RUN_CHUNK = 1 << 16


def _repeats(buf: Any, line: bytes, pos: int, end: int) -> tuple[int, int | None]:
    """How many copies of ``line`` (each with its newline) follow from ``pos`` before
    ``end``, and where the run ends (None when there is none): compared in growing
    chunks, so a hostile log of one line repeated costs C speed, not Python per line."""
    unit = line + b"\n"
    count, copies = 0, 1
    while copies:
        chunk = unit * copies
        if pos + len(chunk) <= end + 1 and buf[pos : pos + len(chunk)] == chunk:
            pos += len(chunk)
            count += copies
            if len(chunk) * 2 <= _RUN_CHUNK:
                copies *= 2
        else:
            copies //= 2
    return count, (pos if count else None)


TAIL_BYTES = 1 << 16
#: A ``"ts":"..."`` in a line, escaped or not (JSON inside a container's line). It starts
#: with a literal (``"ts``), which ``re`` finds ten times faster than an optional ``\\``
#: first; the backslash before the quote changes no time found.
_TS_IN_LINE = re.compile(rb'"ts\\?":\\?"(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]00:00))')


def tail_ts(buf: Any) -> float | None:
    """The latest envelope ``ts`` in the last 64 KiB of ``buf``: the end of a log,
    without reading it all (logs are written in time order, give or take a request)."""
    best = None
    for m in _TS_IN_LINE.finditer(buf[max(0, len(buf) - TAIL_BYTES) :]):
        try:
            t = parse_ts(m.group(1).decode())
        except ValueError:
            continue
        best = t if best is None or t > best else best
    return best
