"""``--follow``: keep reading files as they grow, like ``tail -F``.

A file is followed by its name: when the name comes to point at another file (rotated
by rename, or deleted and created again), the old file is read to its end and the new
one from its start; a file that shrinks was truncated (``copytruncate``) and is read
again from its start. Appended bytes go through the same line bounds and split-record
rejoining as any stream, so a Docker/CRI record split at 16 KiB is read whole once its
last record arrives.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import BinaryIO

from cvdiag.read.parsing import Tally
from cvdiag.read.scan import Hit, hits
from cvdiag.read.sources import LineBlocks, Source

POLL_S = 0.25
_READ = 1 << 20


class _Followed:
    """One followed name: the file open under it, how far it was read, its open line."""

    __slots__ = ("fh", "identity", "lines", "offset", "src")

    def __init__(self, src: Source) -> None:
        self.src = src
        self.fh: BinaryIO | None = None
        self.identity = src.identity  # the file the first read saw, (st_dev, st_ino)
        self.offset = src.consumed
        self.lines = LineBlocks(src.name)

    def poll(self) -> Iterator[bytes]:
        """Blocks of complete lines written since the last poll, across rotations."""
        if self.fh is None and not self._open():
            return
        yield from self._drain()
        now = _identity(self.src.path or "")
        if now is None or now == self.identity:
            return  # the name is gone for now (rotated, not yet recreated): keep the old file
        yield from self._drain()  # the last lines written to the old file before the switch
        yield from self.lines.end()
        self._close()
        self.offset = 0
        if self._open():
            yield from self._drain()

    def _open(self) -> bool:
        try:
            fh = open(self.src.path or "", "rb")  # noqa: SIM115 - kept open across polls
        except OSError:
            # Gone: whatever appears under the name next is a new file, even if it
            # gets the old one's inode number back (nothing held that inode open).
            self.identity = None
            return False
        st = os.fstat(fh.fileno())
        if (st.st_dev, st.st_ino) != self.identity or st.st_size < self.offset:
            self.offset = 0  # not the file read before: a new one, read from its start
        self.identity = (st.st_dev, st.st_ino)
        fh.seek(self.offset)
        self.fh = fh
        return True

    def _drain(self) -> Iterator[bytes]:
        fh = self.fh
        if fh is None:
            return
        if os.fstat(fh.fileno()).st_size < self.offset:  # truncated in place
            fh.seek(0)
            self.offset = 0
            self.lines = LineBlocks(self.src.name)
        while chunk := fh.read(_READ):
            self.offset += len(chunk)
            yield from self.lines.feed(chunk)

    def _close(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError):
                self.fh.close()
        self.fh = None


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def followed_hits(sources: list[Source], poll_s: float = POLL_S) -> Iterator[Hit]:
    """Envelopes and breadcrumbs written to ``sources`` after what was already read,
    forever: ends only when the caller stops iterating (Ctrl-C in the CLI)."""
    files = [_Followed(s) for s in sources if s.followable]
    tally = Tally()  # a follow never ends, so it never reports malformed lines
    try:
        while True:
            quiet = True
            for f in files:
                for block in f.poll():
                    quiet = False
                    yield from hits(block, f.src.name, tally)
            if quiet:
                time.sleep(poll_s)
    finally:
        for f in files:
            f._close()
