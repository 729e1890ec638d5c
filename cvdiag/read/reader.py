"""Find CVDIAG lines in any log and turn them into envelopes or breadcrumbs.

Reading is built for big files: a source is scanned with ``bytes.find`` for a few
markers (C speed, no per-line Python for noise), and only the lines holding a marker
are parsed, with ``orjson``. (``tests`` goes further, see ``scan``.) A line that a
container runtime split into several records is found by its first record and read
forward to its last (``logical_lines``, ``rejoin``).
"""

from __future__ import annotations

import contextlib
import gzip
import mmap
import os
import re
import stat
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

import orjson

from cvdiag.contract.timestamps import parse_ts, ts_seconds
from cvdiag.read import rejoin

ENVELOPE = 1
BREADCRUMB = 2
MALFORMED = 3
NOTHING = 0

#: A line holding either of these may be an envelope or a breadcrumb (every shape of
#: spec section 1, escaped or not, contains one of them).
MARKERS: tuple[bytes, ...] = (b"CVDIAG", b"schema_version")

_PROGRESS_STEP = 8 << 20
_BLOCK = 16 << 20  # streamed sources (stdin, gzip) are read in blocks this big
#: The longest line read: far beyond any envelope (16 KiB at the debug tier), and the
#: bound on what one line of an endless input (``/dev/zero``) may cost.
MAX_LINE = 8 << 20
_LONG = "line longer than 8 MiB"
LONG_LINE = f"{_LONG} (skipped to its end)"
CUT_FILE = "the file ends early: its compressed data is cut"
# What a stream could not deliver (a line over MAX_LINE, the lost end of a cut .gz)
# becomes a placeholder line, which every reader counts as malformed where it meets
# it, with its line number, like any other bad line: no tally is threaded through the
# readers, and a spooled stdin keeps them.
_PLACEHOLDER = b"CVDIAG \x00"
_PLACEHOLDERS = {_PLACEHOLDER + b"long": LONG_LINE, _PLACEHOLDER + b"cut": CUT_FILE}
_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_CRI = re.compile(rb"^(\d{4}-\d\d-\d\dT\S+) (?:stdout|stderr) [PF] ")
_COMPOSE = re.compile(rb"^[\w.-]+\s*\| ")
_BREADCRUMB_KEYS = ("component", "boundary", "run_id", "slug", "header_present", "header_value_prefix", "hop", "status")
_BREADCRUMB_FIELD = re.compile(r"(\w+)=(\S*)")

# Fields the reader relies on, and the types it needs; `validate` is stricter.
_REQUIRED: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("test_id", str),
    ("layer", str),
    ("boundary", str),
    ("ts", str),
    ("outcome", str),
)


# Plain slotted classes, not dataclasses: a dataclass compiles its methods when its
# module is imported (milliseconds each on a slow CI box), and the CLI must start fast.


class Tally:
    """Malformed lines seen while reading: how many, and where the first one was."""

    __slots__ = ("count", "first")

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None

    def add(self, where: Callable[[], str], reason: str) -> None:
        self.count += 1
        if self.first is None:
            self.first = f"{where()}: {reason}"

    def merge(self, other: Tally) -> None:
        if other.count and self.first is None:
            self.first = other.first
        self.count += other.count

    def note(self) -> str | None:
        """The one-line stderr note, or None when every line was fine."""
        if not self.count:
            return None
        noun = "line" if self.count == 1 else "lines"
        return f"cvdiag: skipped {self.count} malformed CVDIAG {noun} (first at {self.first})"


# -- parsing one line -----------------------------------------------------------------


def _check(env: Any) -> str | None:
    """Why ``env`` cannot be read as an envelope, or None when it can."""
    if not isinstance(env, dict):
        return "not a JSON object"
    if env.get("schema_version") != 1:
        return f"schema_version is {env.get('schema_version')!r}, not 1"
    for name, kind in _REQUIRED:
        if not isinstance(env.get(name), kind):
            return f"{name} is missing or not a {kind.__name__}"
    try:
        ts_seconds(env["ts"])
    except ValueError:
        return "ts is not an RFC 3339 time"
    if not isinstance(env.get("metadata", {}), dict):
        return "metadata is not an object"
    mono = env.get("mono_ns", 0)
    if not isinstance(mono, int) or isinstance(mono, bool):
        return "mono_ns is not an integer"
    return None


def parse_json_envelope(raw: bytes) -> tuple[int, Any]:
    """(ENVELOPE, dict) or (MALFORMED, reason) for the JSON text of one envelope."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return MALFORMED, "not UTF-8"
    try:
        env = orjson.loads(text)
    except orjson.JSONDecodeError:
        return MALFORMED, "cut or not JSON"
    reason = _check(env)
    return (MALFORMED, reason) if reason else (ENVELOPE, env)


def _breadcrumb(text: bytes) -> tuple[int, Any]:
    """A legacy ``CVDIAG component=...`` line; ``error=`` is free text to the end."""
    line = text.decode("utf-8", "replace")
    head, sep, error = line.partition(" error=")
    fields: dict[str, Any] = {k: v for k, v in _BREADCRUMB_FIELD.findall(head)}
    if sep:
        fields["error"] = error
    if not fields.get("test_id"):
        return MALFORMED, "breadcrumb without test_id"
    return BREADCRUMB, fields


def unwrap(line: bytes) -> tuple[bytes, str | None]:
    """Strip container wrappers (Docker json-file, CRI, compose) and ANSI codes.

    Returns the payload and the wrapper's timestamp, if it had one. ``line`` may hold
    several records of one split line (a span from ``logical_lines``): they are joined.
    """
    if b"\n" in line:
        payload, wrapper_ts, _, _ = rejoin.join(line)
        return _payload(payload), wrapper_ts
    wrapper_ts = None
    if b"\x1b" in line:
        line = _ANSI.sub(b"", line)
    line = line.strip()
    if line.startswith(b'{"log":') or (line.startswith(b"{") and b'"log":' in line and b'"stream"' in line):
        try:
            outer = orjson.loads(line)
        except orjson.JSONDecodeError:
            outer = None
        if isinstance(outer, dict) and isinstance(outer.get("log"), str):
            wrapper_ts = outer.get("time") if isinstance(outer.get("time"), str) else None
            line = outer["log"].encode("utf-8", "surrogatepass").strip()
            if b"\x1b" in line:
                line = _ANSI.sub(b"", line)
    m = _CRI.match(line)
    if m:
        wrapper_ts = m.group(1).decode("ascii", "replace")
        line = line[m.end() :]
    m = _COMPOSE.match(line)
    if m and not line.startswith(b"CVDIAG"):
        line = line[m.end() :]
    return line, wrapper_ts


def _payload(line: bytes) -> bytes:
    """The text a rejoined container record carried, as ``unwrap`` leaves a single one."""
    if b"\x1b" in line:
        line = _ANSI.sub(b"", line)
    line = line.strip()
    m = _COMPOSE.match(line)
    if m and not line.startswith(b"CVDIAG"):
        line = line[m.end() :]
    return line


def parse_line(line: bytes) -> tuple[int, Any]:
    """Classify one raw line: (ENVELOPE, dict), (BREADCRUMB, dict), (MALFORMED, reason)
    or (NOTHING, None) for a line that is simply not CVDIAG output.

    ``line`` may also be a span from ``logical_lines`` holding the records of one split
    line; a split line that never completes is malformed when it carried an envelope.
    """
    # The common case first: the emitter's own prefix, no wrapper.
    i = line.find(b"CVDIAG {")
    if i >= 0 and b"\x1b" not in line and not line.startswith(b"{"):
        kind, value = parse_json_envelope(line[i + 7 :])
        if kind == ENVELOPE:
            return kind, value
    if b"\n" in line:
        payload, _, complete, _ = rejoin.join(line)
        kind, value = _classify(_payload(payload))
        return (MALFORMED, rejoin.INCOMPLETE) if kind == MALFORMED and not complete else (kind, value)
    payload, _ = unwrap(line)
    kind, value = _classify(payload)
    if kind == MALFORMED and value in ("cut or not JSON", "not UTF-8"):
        rec = rejoin.record(line, 0, len(line))
        if rec is not None and rec[2]:  # the first record of a split line, alone
            value = rejoin.INCOMPLETE
    return kind, value


def parse_span(buf: Any, ls: int, le: int) -> tuple[int, Any]:
    """``parse_line`` of the line ``buf[ls:le]`` (a newline or the buffer's end at
    ``le``), read forward to its last record when a container runtime split it.

    For callers that locate lines themselves, one line at a time. Unlike
    ``logical_lines`` it does not drop the later records when the caller meets them
    again; they seldom hold a marker, and one that does reads as a line of its own.
    """
    if le - ls > MAX_LINE:
        return MALFORMED, LONG_LINE
    kind, value = parse_line(buf[ls:le])
    if kind == MALFORMED:  # only a malformed line can be the first record of a split one
        end, _ = rejoin.extent(buf, ls, le, len(buf))
        if end != le:
            return parse_line(buf[ls:end])
    return kind, value


def _classify(line: bytes) -> tuple[int, Any]:
    """``parse_line`` of a line already unwrapped."""
    start = 0
    while True:
        i = line.find(b"CVDIAG", start)
        if i < 0:
            break
        rest = line[i + 6 :]
        if rest.startswith(b" {"):
            return parse_json_envelope(rest[1:])
        if rest.startswith(b"_EVENT {"):
            return parse_json_envelope(rest[7:])
        if rest.startswith(b" component="):
            return _breadcrumb(rest[1:])
        start = i + 6
    if line.startswith(b"{") and b'"schema_version"' in line:
        return parse_json_envelope(line)
    if line.startswith(_PLACEHOLDER) and line in _PLACEHOLDERS:
        return MALFORMED, _PLACEHOLDERS[line]
    return NOTHING, None


# -- sources --------------------------------------------------------------------------


class Source:
    """One input: a file (mmap'd when possible), a gzip file, a FIFO, or stdin.

    ``stream`` inputs (stdin, a FIFO such as ``<(zcat log.gz)``) can be read once only.
    """

    __slots__ = ("consumed", "identity", "name", "path", "stream")

    def __init__(self, name: str, path: str | None, *, stream: bool = False) -> None:
        self.name = name
        self.path = path  # None for stdin
        self.stream = stream or path is None
        self.consumed = 0  # bytes read so far; ``--follow`` continues from here
        self.identity: tuple[int, int] | None = None  # (st_dev, st_ino) of what was read

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for k, v in zip(self.__slots__, state, strict=True):
            setattr(self, k, v)

    @property
    def followable(self) -> bool:
        return self.path is not None and not self.stream and not self.path.endswith(".gz")

    def size(self) -> int:
        try:
            return os.path.getsize(self.path) if self.path and not self.stream else 0
        except OSError:
            return 0

    def blocks(self, read_size: int = _BLOCK) -> Iterator[Any]:
        """Buffers that each end on a line boundary (the last may lack its newline).

        A stream is read ``read_size`` bytes at a time (a file is mapped whole).
        """
        if self.path is None:
            stdin = sys.stdin.buffer
            if _is_gzip(stdin):
                with gzip.GzipFile(fileobj=stdin) as gz:
                    yield from stream_blocks(gz, self.name, read_size)
            else:
                yield from stream_blocks(stdin, self.name, read_size)
            return
        with open(self.path, "rb") as fh:
            st = os.fstat(fh.fileno())
            self.identity = (st.st_dev, st.st_ino)
            if _is_gzip(fh):
                with gzip.GzipFile(fileobj=fh) as gz:
                    yield from stream_blocks(gz, self.name, read_size)
                return
            try:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (ValueError, OSError):  # empty file, pipe, or special file
                for block in stream_blocks(fh, self.name, read_size):
                    self.consumed += len(block)
                    yield block
                return
            # ``--follow`` goes on from the last whole line: a line still being written
            # (or a split container line still open) is read whole once it is done.
            self.consumed = rejoin.held_back(mm, mm.rfind(b"\n") + 1)
            try:
                if hasattr(mm, "madvise"):
                    mm.madvise(mmap.MADV_SEQUENTIAL)
                yield mm
            finally:
                with contextlib.suppress(BufferError):  # a view is still held; the GC unmaps it
                    mm.close()


def _is_gzip(fh: Any) -> bool:
    """By magic bytes, not by name: ``cat x.gz | cvdiag`` and misnamed files work too."""
    return fh.peek(2)[:2] == b"\x1f\x8b"


def _read_block(fh: BinaryIO, size: int) -> tuple[bytes, BaseException | None]:
    """Up to ``size`` bytes, and the error that ended the input early, if one did.

    A ``.gz`` is read in small pieces: a cut one raises on the read that meets the
    cut, and one big read would lose everything it had decompressed before it.
    """
    if not isinstance(fh, gzip.GzipFile):
        try:
            return fh.read(size), None
        except OSError as exc:
            return b"", exc
    parts: list[bytes] = []
    n = 0
    try:
        while n < size:
            part = fh.read1(size - n)
            if not part:
                break
            parts.append(part)
            n += len(part)
    except (EOFError, OSError, zlib.error) as exc:
        return b"".join(parts), exc
    return parts[0] if len(parts) == 1 else b"".join(parts), None


def stream_blocks(fh: BinaryIO, name: str, read_size: int = _BLOCK) -> Iterator[bytes]:
    """The blocks of a stream read to its end (a cut end becomes a placeholder line)."""
    lines = LineBlocks(name)
    while True:
        chunk, error = _read_block(fh, read_size)
        yield from lines.feed(chunk)
        if error is not None:
            print(f"cvdiag: {name} is cut: read what it held ({error})", file=sys.stderr)
            yield from lines.end(cut=True)
            return
        if not chunk:
            yield from lines.end()
            return


class LineBlocks:
    """Cuts a byte stream, fed in chunks, into blocks that end on a line boundary and
    not between the records of a split container line; no line is kept longer than
    ``MAX_LINE``: the rest of it is skipped as it streams by, so memory stays bounded
    whatever the input (an endless line is one malformed line)."""

    __slots__ = ("carry", "name", "skipping", "warned")

    def __init__(self, name: str) -> None:
        self.name = name
        self.carry = b""  # the start of a line not complete yet
        self.skipping = False  # inside an over-long line: dropping bytes up to its newline
        self.warned = False

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        if self.skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                return
            self.skipping = False
            chunk = chunk[nl + 1 :]
        if not chunk:
            return
        buf = self.carry + chunk if self.carry else chunk
        end = buf.rfind(b"\n") + 1
        if len(buf) - end > MAX_LINE:  # the last line is longer than any line kept
            self.carry, self.skipping = b"", True
            self._warn()
            yield buf[:end] + _PLACEHOLDER + b"long\n"
            return
        # A block ends on a line boundary, and not between the records of a split line.
        cut = rejoin.held_back(buf, end) if end else 0
        if len(buf) - cut > MAX_LINE:  # never hold back more than a line's worth
            cut = end
        self.carry = buf[cut:]
        if cut:
            yield buf[:cut]

    def end(self, *, cut: bool = False) -> Iterator[bytes]:
        """The last block: the line still open (its newline never came), then the
        placeholder of a cut input."""
        carry, self.carry = self.carry, b""
        if cut:
            yield carry + (b"\n" if carry else b"") + _PLACEHOLDER + b"cut\n"
        elif carry:
            yield carry

    def _warn(self) -> None:
        """Says so at once: on an endless input no end-of-run note would ever come."""
        if not self.warned:
            self.warned = True
            print(f"cvdiag: {self.name}: a {_LONG}; skipping to its end", file=sys.stderr)


class InputError(Exception):
    """A path that cannot be read; the CLI reports it and exits 1."""


def resolve_sources(paths: Iterable[str]) -> list[Source]:
    """Files as given, directories walked recursively in name order, ``-`` for stdin.

    Inside a directory only regular files are read: a FIFO would block forever, a
    device never ends, a dangling symlink (a deleted pod's log) cannot be opened; each
    is skipped with a note. Named on the command line, a FIFO or socket is read as a
    stream (process substitution hands one over); a device is refused.
    """
    sources: list[Source] = []
    for p in paths:
        if p == "-":
            sources.append(Source("<stdin>", None))
        elif os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    path = os.path.join(root, f)
                    why = _not_readable(path, inside_directory=True)
                    if why is None:
                        sources.append(Source(path, path))
                    else:
                        print(f"cvdiag: skipped {path}: {why}", file=sys.stderr)
        else:
            why = _not_readable(p, inside_directory=False)
            if why is not None:
                raise InputError(f"cannot read {p}: {why}")
            sources.append(Source(p, p, stream=not stat.S_ISREG(os.stat(p).st_mode)))
    return sources


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))  # fmt: skip


def _not_readable(path: str, *, inside_directory: bool) -> str | None:
    """Why ``path`` is not read, or None when it is."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "no such file or directory"
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISREG(mode):
        return None if os.access(path, os.R_OK) else "permission denied"
    for test, kind in _KINDS:
        if test(mode):
            if inside_directory:
                return f"{kind}, not a regular file"
            if kind.endswith("device"):
                return f"{kind}, not a log file"
            return None
    return "not a regular file"


# -- scanning -------------------------------------------------------------------------


def marked_lines(
    buf: Any, markers: tuple[bytes, ...], start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int]]:
    """(start, end) of every line of ``buf[start:end]`` that holds one of ``markers``.

    Noise between marked lines is skipped by ``find`` without touching Python.
    ``start`` is 0 or the index of a newline, ``end`` a newline or the buffer's end.
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
        yield ls, le
        start = le + 1
        if start >= n:
            return
        nexts = [p if p >= start or p < 0 else find(m, start, n) for p, m in zip(nexts, markers, strict=True)]


WINDOW = 16 << 20
_COUNT_SLICE = 8 << 20


def windows(buf: Any, start: int = 0, end: int | None = None, size: int = WINDOW) -> Iterator[tuple[int, int]]:
    """Line-aligned ``(start, end)`` slices of ``buf[start:end]``, each ending on a newline.

    For an mmap, the pages of a finished slice are handed back (MADV_DONTNEED), so the
    resident set stays near one slice however big the file: the pages stay in the page
    cache, they only stop counting against this process.
    """
    n = len(buf) if end is None else end
    a = start
    while a < n:
        b = min(n, a + size)
        if b < n:
            nl = buf.find(b"\n", b, n)
            b = n if nl < 0 else nl
        yield a, b
        _release(buf, a, b)
        a = b


def _release(buf: Any, a: int, b: int) -> None:
    if not isinstance(buf, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    lo = a - a % mmap.PAGESIZE
    hi = b - b % mmap.PAGESIZE
    if hi > lo:
        with contextlib.suppress(OSError, ValueError):
            buf.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


_PARALLEL_FIND_BYTES = 64 << 20


def lines_with(buf: Any, needle: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of the lines of ``buf`` that hold ``needle``, in order, a split
    container line spanning all its records (the id is in the first one only)."""
    return logical_lines(buf, _physical_lines_with(buf, needle))


def _physical_lines_with(buf: Any, needle: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of the physical lines of ``buf`` that hold ``needle``, in order.

    A big mmap is searched by two processes, one half each: the search is the whole
    cost of ``timeline`` and ``find`` runs on one core. The child sends back only the
    offsets of the lines it found (a test has tens to thousands, never the whole log).
    """
    if not isinstance(buf, mmap.mmap) or len(buf) < _PARALLEL_FIND_BYTES or (os.cpu_count() or 1) < 2:
        for a, b in windows(buf):
            yield from marked_lines(buf, (needle,), a, b)
        return
    mid = buf.find(b"\n", len(buf) // 2)
    if mid < 0:
        yield from marked_lines(buf, (needle,))
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: search the second half, report, and leave without cleanup
        try:
            os.close(read_end)
            found = array(
                "q", (x for a, b in windows(buf, mid) for span in marked_lines(buf, (needle,), a, b) for x in span)
            )
            with os.fdopen(write_end, "wb") as out:
                out.write(found.tobytes())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        for a, b in windows(buf, 0, mid):
            yield from marked_lines(buf, (needle,), a, b)
        with os.fdopen(read_end, "rb") as inp:
            found = array("q", inp.read())
    finally:
        os.waitpid(pid, 0)
    yield from zip(found[::2], found[1::2], strict=True)


class _Joins:
    """The split lines of one buffer met so far: lines are visited in order, and a
    record joined to an earlier line must not be read again as a line of its own."""

    __slots__ = ("buf", "end", "joined")

    def __init__(self, buf: Any, end: int | None = None) -> None:
        self.buf = buf
        self.end = len(buf) if end is None else end
        self.joined: set[int] = set()

    def taken(self, ls: int) -> bool:
        """Whether the line at ``ls`` is a later record of a line already read."""
        joined = self.joined
        if ls in joined:
            joined.discard(ls)
            return True
        if len(joined) > 4096:  # records never visited (they hold no marker) pile up
            self.joined = {p for p in joined if p > ls}
        return False

    def extend(self, ls: int, le: int) -> int:
        """The end of the line whose first record is ``buf[ls:le]`` (``le`` unless split)."""
        last, parts = rejoin.extent(self.buf, ls, le, self.end)
        self.joined.update(parts)
        return last


def logical_lines(buf: Any, spans: Iterable[tuple[int, int]], end: int | None = None) -> Iterator[tuple[int, int]]:
    """``spans`` of physical lines (in order), each line that is the first record of a
    split container line extended to the last record that belongs to it.

    The records joined to an earlier line are dropped when they come up themselves.
    The span of a split line may enclose records of the other stream; those are still
    yielded on their own, and ``rejoin.join`` skips them inside the span.
    """
    joins = _Joins(buf, end)
    for ls, le in spans:
        if not (joins.joined and joins.taken(ls)):
            yield ls, joins.extend(ls, le)


class LineCounter:
    """Line numbers of offsets in one buffer, counted incrementally (mmap has no count)."""

    __slots__ = ("base", "buf", "line", "pos")

    def __init__(self, buf: Any, base: int = 1) -> None:
        self.buf, self.pos, self.line, self.base = buf, 0, base, base

    def at(self, offset: int) -> int:
        if offset < self.pos:
            self.pos, self.line = 0, self.base
        # In slices, so that counting deep into a big mmap never copies or maps it whole.
        for a, b in windows(self.buf, self.pos, offset, _COUNT_SLICE):
            self.line += self.buf[a:b].count(b"\n")
        self.pos = offset
        return self.line


class Hit:
    """One CVDIAG line found in a source."""

    __slots__ = ("kind", "line", "raw", "source", "value")

    def __init__(self, kind: int, value: Any, source: str, line: int | None, raw: bytes) -> None:
        self.kind = kind
        self.value = value  # the envelope or breadcrumb dict, or why the line is malformed
        self.source = source
        self.line = line
        self.raw = raw


def read(
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
                base += buf.count(b"\n")


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
    """``read`` of one buffer of the source ``name``, whose first line is line ``base``."""
    counter = LineCounter(buf, base)
    done = 0
    if len(markers) == 1:  # one needle (a test id): a plain search, parallel when big
        spans = _physical_lines_with(buf, markers[0])
    else:
        spans = (line for a, b in windows(buf) for line in marked_lines(buf, markers, a, b))
    joins = _Joins(buf)
    for ls, le in spans:
        if joins.joined and joins.taken(ls):
            continue
        if le - ls > MAX_LINE:
            raw, kind, value = b"", MALFORMED, LONG_LINE
        else:
            raw = buf[ls:le]
            kind, value = parse_line(raw)
        if kind == MALFORMED and raw:
            # Only a malformed line can be the first record of a split envelope:
            # the search for the rest costs nothing on the lines that parse.
            end = joins.extend(ls, le)
            if end != le:
                raw = buf[ls:end]
                kind, value = parse_line(raw)
        if progress is not None and ls - done > _PROGRESS_STEP:
            progress(ls - done)
            done = ls
        if kind == NOTHING:
            continue
        if kind == MALFORMED:
            tally.add(lambda c=counter, o=ls: f"{name}:{c.at(o)}", value)
            if not with_lines:
                continue
        if b"\n" in raw:  # a split line: its own records, without the other stream's
            raw = rejoin.join(raw)[3]
        yield Hit(kind, value, name, counter.at(ls) if with_lines else None, raw)
    if progress is not None:
        progress(len(buf) - done)


_TAIL_BYTES = 1 << 16
_TS_IN_LINE = re.compile(rb'\\?"ts\\?":\\?"(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]00:00))')


def tail_ts(buf: Any) -> float | None:
    """The latest envelope ``ts`` in the last 64 KiB of ``buf``: the end of a log,
    without reading it all (logs are written in time order, give or take a request)."""
    best = None
    for m in _TS_IN_LINE.finditer(buf[max(0, len(buf) - _TAIL_BYTES) :]):
        try:
            t = parse_ts(m.group(1).decode())
        except ValueError:
            continue
        best = t if best is None or t > best else best
    return best
