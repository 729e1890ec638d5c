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
import os
import re
import sys
import tempfile
import zlib
from typing import Any, BinaryIO

from cvdiag.read.sources import InputError, Source, is_gzip

_SNIFF = 4096
_OTLP_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"(?:resourceSpans|resourceLogs)"')
_SDK_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"name"\s*:')


# -- detecting and opening ----------------------------------------------------------------


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


def translated(sources: list[Source], test_id_attr: str | None = None) -> list[Source]:
    """``sources`` with each OTLP JSON input replaced by its translation (same name)."""
    out = []
    for src in sources:
        opened = _open(src)
        if opened is None:
            out.append(src)
            continue
        reader, owned = opened
        try:
            out.append(_translate(src, reader, test_id_attr) if sniff(_head(reader)) else src)
        finally:
            if owned is not None:
                reader.close()
                owned.close()
    return out


def _translate(src: Source, fh: BinaryIO, test_id_attr: str | None) -> Source:
    from cvdiag.read.spool import _anonymous, _remove, limit

    fd, name = tempfile.mkstemp(prefix="cvdiag-otlp-")
    path = _anonymous(fd, name)
    cap = limit(os.path.dirname(name))
    from cvdiag.read._otlp_read import Tally, lines_of  # the contract's tables load only for traces

    tally = Tally()
    written = 0
    try:
        with os.fdopen(fd, "wb", closefd=False) as out:
            for line in lines_of(fh, tally, test_id_attr):
                written += len(line)
                if written > cap:
                    raise InputError(f"the translation of {src.name} is bigger than the {cap} bytes cvdiag may copy")
                out.write(line)
    except BaseException:
        _remove(fd, name)
        raise
    print(tally.note(src.name), file=sys.stderr)
    return Source(src.name, path)
