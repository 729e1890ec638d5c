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
from collections.abc import Mapping
from importlib import resources
from typing import Any

from cvdiag.face import report_data

#: Blocks every fetch: the page may only use what is inline in it.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("report_assets", name).read_text(encoding="utf-8")


def _inert(json_bytes: bytes) -> str:
    """JSON that cannot end its script element: ``<`` only occurs inside JSON strings,
    where ``\\u003c`` means the same."""
    return json_bytes.replace(b"<", b"\\u003c").decode("utf-8")


def render(doc: Mapping[str, Any], title: str = "cvdiag report", extra: str = "") -> str:
    """The whole HTML page for a ``report_data.build`` document; ``extra`` is more of the
    body, already HTML (the history page)."""
    parts = [
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="cvdiag report">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_asset('report.css')}</style></head>\n<body>",
        '<div id="app"><main><h1>cvdiag report</h1><p>This report needs JavaScript.</p></main></div>',
        f'<script type="application/json" id="cvdiag-index">{_inert(report_data.index_json(doc))}</script>',
        f"<script>{_asset('report.js')}</script>",
    ]
    parts.extend(
        f'<script type="application/json" id="cvdiag-detail-{i}">{_inert(report_data.detail_json(d))}</script>'
        for i, d in enumerate(doc["details"])
    )
    parts.append(f"{extra}</body></html>\n")
    return "\n".join(parts)


def write(doc: Mapping[str, Any], path: str, title: str = "cvdiag report", extra: str = "") -> int:
    """Writes the page to ``path`` atomically (a reader never sees half a report), or to
    stdout for ``-``; returns its size. A path that is no regular file (``/dev/null``, a
    FIFO) is written into, never replaced by a file."""
    page = render(doc, title, extra).encode("utf-8")
    if path == "-":
        sys.stdout.buffer.write(page)
        sys.stdout.buffer.flush()
        return len(page)
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        special = False  # nothing there yet (or unreadable): the atomic write says why
    if special:
        with open(path, "wb") as fh:
            fh.write(page)
        return len(page)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".cvdiag-report-", suffix=".html", dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as open() would make it, not mkstemp's 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(page)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return len(page)
