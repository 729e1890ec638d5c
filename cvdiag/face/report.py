"""The HTML report: one self-contained file (inline CSS, JS and SVG, no network) that
shows every test of a log and, per test, a waterfall of its events across layers.

``report_data`` builds the data; this module only lays it into the page. The index is
parsed when the page loads; each test's events sit in their own inert JSON script
element and are parsed when that test is opened, so a 10,000-test report opens fast.
"""

from __future__ import annotations

import html
import os
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any, BinaryIO

from cvdiag.face import report_data

#: Blocks every fetch: the page may only use what is inline in it.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("report_assets", name).read_text(encoding="utf-8")


def _inert(json_bytes: bytes) -> bytes:
    """JSON that cannot end its script element: ``<`` only occurs inside JSON strings,
    where ``\\u003c`` means the same."""
    return json_bytes.replace(b"<", b"\\u003c")


def pieces(doc: Mapping[str, Any], title: str = "cvdiag report", extra: str = "") -> Iterator[bytes]:
    """The HTML page for a ``report_data.build`` document, a piece at a time (one per
    test in detail), so the whole page is never held; ``extra`` is more of the body,
    already HTML (the history page)."""
    head = [
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="cvdiag report">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_asset('report.css')}</style></head>\n<body>",
        '<div id="app"><main><h1>cvdiag report</h1><p>This report needs JavaScript.</p></main></div>',
        '<script type="application/json" id="cvdiag-index">',
    ]
    yield "\n".join(head).encode()
    yield _inert(report_data.index_json(doc))
    yield f"</script>\n<script>{_asset('report.js')}</script>".encode()
    for i, d in enumerate(doc["details"]):
        body = _inert(report_data.detail_json(d))
        yield b'\n<script type="application/json" id="cvdiag-detail-%d">%b</script>' % (i, body)
    yield f"\n{extra}</body></html>\n".encode()


def write(doc: Mapping[str, Any], path: str, title: str = "cvdiag report", extra: str = "") -> int:
    """Writes the page to ``path`` atomically (a reader never sees half a report), or to
    stdout for ``-``; returns its size. A path that is no regular file (``/dev/null``, a
    FIFO) is written into, never replaced by a file."""
    page = pieces(doc, title, extra)
    if path == "-":
        size = _write_all(sys.stdout.buffer, page)
        sys.stdout.buffer.flush()
        return size
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        special = False  # nothing there yet (or unreadable): the atomic write says why
    if special:
        with open(path, "wb") as fh:
            return _write_all(fh, page)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".cvdiag-report-", suffix=".html", dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as open() would make it, not mkstemp's 0600
        with os.fdopen(fd, "wb") as fh:
            size = _write_all(fh, page)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return size


def _write_all(fh: BinaryIO, page: Iterator[bytes]) -> int:
    size = 0
    for piece in page:
        fh.write(piece)
        size += len(piece)
    return size
