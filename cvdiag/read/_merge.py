"""Envelopes of several inputs in one time order, streamed (``grep`` over a service's logs).

Each input is taken as already in time order (a log is written that way), so the merge
holds one pending line per input instead of sorting everything.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from cvdiag.contract.timestamps import order_key
from cvdiag.read import parsing, scan
from cvdiag.read.parsing import ENVELOPE, Tally
from cvdiag.read.scan import Hit
from cvdiag.read.sources import Source

# More inputs than this are read one after another: a merge holds every one of them open.
_MAX_MERGED = 64


def merged(sources: list[Source], tally: Tally, markers: tuple[bytes, ...] = parsing.MARKERS) -> Iterator[Hit]:
    """Envelope hits of all ``sources``, merged by their order key (ts, then mono_ns)."""
    if len(sources) == 1 or len(sources) > _MAX_MERGED:
        # One input needs no merge; very many are read in name order (a directory of rotated logs).
        yield from (h for h in scan.hits_in(sources, tally, markers=markers) if h.kind == ENVELOPE)
        return
    streams = [_timed(scan.hits_in([s], tally, markers=markers)) for s in sources]
    for _, hit in heapq.merge(*streams, key=lambda pair: pair[0]):
        yield hit


def _timed(hits: Iterator[Hit]) -> Iterator[tuple[int, Hit]]:
    """The envelope hits of one input with their order key."""
    for hit in hits:
        if hit.kind == ENVELOPE:
            key = order_key(hit.value["ts"], hit.value.get("mono_ns"))
            if key is not None:
                yield key, hit
