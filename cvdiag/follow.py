"""``--follow``: keep reading files as they grow, like ``tail -f``."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from .reader import Source

POLL_S = 0.25


def grown_lines(sources: list[Source], poll_s: float = POLL_S) -> Iterator[tuple[Source, bytes]]:
    """Complete lines appended to ``sources`` after what was already read, forever.

    A file that shrinks was truncated or rotated: it is read again from the start.
    Ends only when the caller stops iterating (Ctrl-C in the CLI).
    """
    files = [s for s in sources if s.followable]
    offsets = {s.path: s.consumed for s in files}
    carry: dict[str | None, bytes] = {s.path: b"" for s in files}
    while True:
        quiet = True
        for src in files:
            try:
                size = os.path.getsize(src.path or "")
            except OSError:
                continue
            if size < offsets[src.path]:
                offsets[src.path], carry[src.path] = 0, b""
            if size == offsets[src.path]:
                continue
            with open(src.path or "", "rb") as fh:
                fh.seek(offsets[src.path])
                chunk = fh.read(size - offsets[src.path])
            offsets[src.path] += len(chunk)
            quiet = False
            lines = (carry[src.path] + chunk).split(b"\n")
            carry[src.path] = lines.pop()
            for line in lines:
                yield src, line
        if quiet:
            time.sleep(poll_s)
