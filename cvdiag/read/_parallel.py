"""Search a big mapped file in two processes, one half each.

The search is the whole cost of ``timeline`` and ``find`` runs on one core. A forked
child searches the second half and sends back only the offsets of the lines it found
(a test has tens to thousands, never the whole log), so nothing big is copied.
"""

from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Callable, Iterator

#: Below this size a second process costs more than it saves.
MIN_BYTES = 64 << 20

Spans = Iterator[tuple[int, int]]


def search_halves(buf: mmap.mmap | bytes, search: Callable[[int, int], Spans]) -> Spans:
    """``search(0, len(buf))``, the second half in a child process when ``buf`` is big.

    ``search(start, end)`` yields the ``(start, end)`` spans it finds in ``buf[start:end]``
    in order, where ``start`` is 0 or the index of a newline.
    """
    if not isinstance(buf, mmap.mmap) or len(buf) < MIN_BYTES or (os.cpu_count() or 1) < 2:
        yield from search(0, len(buf))
        return
    mid = buf.find(b"\n", len(buf) // 2)
    if mid < 0:
        yield from search(0, len(buf))
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: search the second half, report, and leave without cleanup
        try:
            os.close(read_end)
            found = array("q", (x for span in search(mid, len(buf)) for x in span))
            with os.fdopen(write_end, "wb") as out:
                out.write(found.tobytes())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        yield from search(0, mid)
        with os.fdopen(read_end, "rb") as inp:
            found = array("q", inp.read())
    finally:
        os.waitpid(pid, 0)
    yield from zip(found[::2], found[1::2], strict=True)
