"""OTLP JSON inputs read as CVDIAG lines: traces from files are evidence like any log.

An input that starts as OTLP JSON (the Collector's file exporter, one ``{"resourceSpans":
…}`` or ``{"resourceLogs": …}`` document per line; a single such document, pretty or not;
the Python SDK's ``ConsoleSpanExporter``/``span.to_json()`` output; gzip of any) is
translated, a document at a time, into the envelope lines its spans end
(``cvdiag.contract.otel.read_span``), written to a temporary file that the normal
pipeline then reads. Why a translation and not a second reader: every pass (the split by
byte range, the compiled fold, the report's re-reading by offset, ``history add``) works
on CVDIAG lines in a file, so translated spans get all of it at once, and the
translation is small next to its input (a span of a kilobyte or more becomes a line of a
few hundred bytes, and most spans become none).

Bounded: a document is parsed whole, so one bigger than ``MAX_DOC_BYTES`` is skipped and
counted (the Collector writes a batch per line, far below it); a span's attributes are
converted only where the contract reads them. Spans are read one by one, never as a
tree, so a parent cycle or a million spans in one trace costs nothing more.
"""

from __future__ import annotations

import gzip
import itertools
import os
import re
import sys
import zlib
from typing import Any, BinaryIO

from cvdiag.read.sources import InputError, Source, is_gzip

_SNIFF = 4096
_OTLP_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"(?:resourceSpans|resourceLogs)"')
_SDK_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"name"\s*:')


# -- detecting and opening ----------------------------------------------------------------


_PROTO_MAX_BYTES = 1 << 30  # a first length beyond this is no protobuf file of the Collector's


def sniff_proto(head: bytes) -> bool:
    """Whether an input starts as the Collector's protobuf file: a 4-byte big-endian length,
    then an ``Export...ServiceRequest`` whose first field (``resource_spans``) is there."""
    if len(head) < 6 or head[4] != 0x0A:
        return False
    return 0 < int.from_bytes(head[:4], "big") <= _PROTO_MAX_BYTES


def sniff(head: bytes) -> bool:
    """Whether the first bytes of an input are OTLP JSON or the SDK's span JSON."""
    if _OTLP_HEAD.match(head):
        return True
    return bool(_SDK_HEAD.match(head)) and b'"context"' in head and b'"trace_id"' in head


def _open(src: Source) -> tuple[Any, Any] | None:
    """(the input's reader, the file to close) for a look at its start; None where a look
    would take bytes away: a FIFO, or stdin in gzip (a command that reads twice has made
    either a file already)."""
    if src.path is None:
        stdin = sys.stdin.buffer
        return None if is_gzip(stdin) else (stdin, None)
    if src.stream:
        return None
    try:
        fh = open(src.path, "rb")  # noqa: SIM115 (closed by the caller)
    except OSError:
        return None
    try:
        return (gzip.GzipFile(fileobj=fh), fh) if is_gzip(fh) else (fh, fh)
    except OSError:
        fh.close()
        return None


def _head(fh: Any) -> bytes:
    try:
        return bytes(fh.peek(_SNIFF)[:_SNIFF])
    except (OSError, EOFError, zlib.error):
        return b""


def translated(sources: list[Source], test_id_attr: str | None = None, jobs: int | None = None) -> list[Source]:
    """``sources`` with each OTLP JSON input replaced by its translation (same name): one
    file, or one per process for a big file of one document per line."""
    out: list[Source] = []
    for src in sources:
        opened = _open(src)
        if opened is None:
            out.append(src)
            continue
        reader, owned = opened
        try:
            head = _head(reader)
            if not sniff(head):
                out.append(_protobuf(src, reader, test_id_attr) if sniff_proto(head) else src)
            elif _splittable(src, reader, head):
                out += _translate_parts(src, test_id_attr, jobs)
            else:
                out.append(_translate(src, reader, test_id_attr))
        finally:
            if owned is not None:
                reader.close()
                owned.close()
    return out


#: A plain file of one document per line this big is translated by ranges, one a process.
_PARALLEL_MIN_BYTES = 16 << 20


def _splittable(src: Source, reader: Any, head: bytes) -> bool:
    """A plain file of one document per line (the Collector's): its first line is longer
    than the look at its start, or a whole document (a pretty one's is ``{`` alone)."""
    if src.path is None or src.stream or isinstance(reader, gzip.GzipFile) or src.size() < _PARALLEL_MIN_BYTES:
        return False
    nl = head.find(b"\n")
    return nl < 0 or head[:nl].rstrip().endswith(b"}")


def _translate_parts(src: Source, test_id_attr: str | None, jobs: int | None) -> list[Source]:
    from cvdiag.read import correlate, split, spool
    from cvdiag.read._otlp_read import Tally

    assert src.path is not None
    n = jobs or correlate.default_jobs()
    ranges = _ranges(src.path, src.size(), n)
    results = split.run_parts(_TranslateRange(src.path, test_id_attr), ranges, n)
    tally = Tally()
    out = []
    for name, part in results:
        fd = os.open(name, os.O_RDONLY)
        out.append(Source(src.name, spool._anonymous(fd, name)))
        tally.merge(part)
    print(tally.note(src.name), file=sys.stderr)
    return out


def _ranges(path: str, size: int, n: int) -> list[tuple[int, int]]:
    """``n`` byte ranges of the file, each starting at a line's start."""
    cuts = [0]
    with open(path, "rb") as fh:
        for i in range(1, n):
            fh.seek(size * i // n)
            fh.readline()  # to the next line's start (a line may be long: read as it goes)
            at = fh.tell()
            if cuts[-1] < at < size:
                cuts.append(at)
    cuts.append(size)
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


class _TranslateRange:
    """One process's part: a byte range of the file translated into a file of its own
    (named: the driver opens it, then it is unlinked as a spool is)."""

    def __init__(self, path: str, test_id_attr: str | None) -> None:
        self.path, self.test_id_attr = path, test_id_attr

    def __call__(self, span: tuple[int, int]) -> tuple[str, Any]:
        import tempfile

        from cvdiag.read._otlp_read import Tally, lines_of

        start, end = span
        fd, name = tempfile.mkstemp(prefix="cvdiag-otlp-")
        tally = Tally()
        with open(self.path, "rb") as fh, os.fdopen(fd, "wb") as out:
            fh.seek(start)
            for line in lines_of(_Range(fh, end - start), tally, self.test_id_attr):
                out.write(line)
        return name, tally


class _Range:
    """The next ``left`` bytes of a file, as a reader."""

    def __init__(self, fh: BinaryIO, left: int) -> None:
        self.fh, self.left = fh, left

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.fh.read(n) if n > 0 else b""
        self.left -= len(data)
        return data


def _protobuf(src: Source, fh: BinaryIO, test_id_attr: str | None) -> Source:
    """A protobuf OTLP file, read where ``opentelemetry-proto`` is installed; said otherwise."""
    try:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401
    except ImportError:
        print(
            f"cvdiag: {src.name} looks like OpenTelemetry traces in protobuf: install opentelemetry-proto to read them",
            file=sys.stderr,
        )
        return src
    return _translate(src, fh, test_id_attr, proto=True)


def _translate(src: Source, fh: BinaryIO, test_id_attr: str | None, proto: bool = False) -> Source:
    import tempfile  # only for traces: every command looks at its inputs, few hold any

    from cvdiag.read._otlp_read import Tally, lines_of, proto_lines  # the contract's tables: only for traces
    from cvdiag.read.spool import _anonymous, _remove, limit

    fd, name = tempfile.mkstemp(prefix="cvdiag-otlp-")
    path = _anonymous(fd, name)
    cap = limit(os.path.dirname(name))
    tally = Tally()
    written = 0
    try:
        with os.fdopen(fd, "wb", closefd=False) as out:
            for line in (proto_lines if proto else lines_of)(fh, tally, test_id_attr):
                written += len(line)
                if written > cap:
                    raise InputError(f"the translation of {src.name} is bigger than the {cap} bytes cvdiag may copy")
                out.write(line)
    except BaseException:
        _remove(fd, name)
        raise
    print(tally.note(src.name), file=sys.stderr)
    return Source(src.name, path)
