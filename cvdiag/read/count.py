"""The ``stats`` pass: every envelope of the inputs counted per slug, boundary and outcome.

Where the compiled fold is built, its count mode counts in C the emitter's lines that say
nothing beyond their head (SSE events: most of a log) and that are certainly valid
envelopes; every other line is read as ``scan.hits`` reads it (split container lines
joined, malformed lines counted) and added to ``Stats`` whole. Without it, ``hits_in``.
Both give the same ``Stats`` (``tests/test_compiled_fold.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cvdiag.read import fold, rejoin
from cvdiag.read.parsing import ENVELOPE, MALFORMED, Tally, parse_span
from cvdiag.read.scan import LineCounter, hits_in
from cvdiag.read.sources import Source
from cvdiag.read.stats import MAX_ROWS, METRICS, Stats

_METRIC_BOUNDARIES = frozenset(boundary.encode() for boundary, _ in METRICS.values())


def collect(
    sources: list[Source], tally: Tally, progress: Callable[[int], None] | None = None, *, max_rows: int = MAX_ROWS
) -> Stats:
    """The ``Stats`` of every envelope of ``sources``, malformed lines counted in ``tally``."""
    stats = Stats(max_rows)
    if not fold.compiled():
        for hit in hits_in(sources, tally, progress=progress):
            if hit.kind == ENVELOPE:
                stats.add(hit.value)
        return stats
    counting = _Counting(stats, tally)
    for src in sources:
        base = 1
        for buf in src.blocks():
            counting.buffer(buf, src.name, base)
            if progress is not None:
                progress(len(buf))
            if isinstance(buf, bytes):
                base += buf.count(b"\n")
    counting.finish()
    return stats


class _Counting:
    """One compiled count over the buffers of the inputs, and the rows it asked ``stats`` for."""

    __slots__ = ("folder", "stats", "tally", "tokens")

    def __init__(self, stats: Stats, tally: Tally) -> None:
        self.stats, self.tally = stats, tally
        self.tokens: list[tuple[tuple[str, str], str, bool]] = []  # token -> (row key, outcome, folded)
        self.folder = fold.compiled_folder(
            admit=None, boundary_info=_boundary_info, fold_aggs=False, keep_lines=0, max_tests=0, pair=self._pair
        )

    def _pair(self, slug: bytes, boundary: bytes, outcome: bytes) -> int:
        """A (slug, boundary, outcome) the compiled count met the first time: its row is
        made now, in file order, as ``Stats.add`` would make it."""
        text = outcome.decode()
        key, folded = self.stats.row_for(slug.decode(), boundary.decode(), text)
        self.tokens.append((key, text, folded))
        return len(self.tokens) - 1

    def buffer(self, buf: Any, name: str, base: int) -> None:
        counter = LineCounter(buf, base)
        joins = rejoin.Joins(buf)
        stats, tally = self.stats, self.tally

        def line(ls: int, le: int) -> None:  # as scan.hits reads a line
            if joins.joined and joins.taken(ls):
                return
            kind, value, _ = parse_span(buf, ls, le, joins)
            if kind == MALFORMED:
                tally.add(lambda: f"{name}:{counter.at(ls)}", value)
            elif kind == ENVELOPE:
                tally.seen(value, lambda: f"{name}:{counter.at(ls)}")
                stats.add(value)

        def gap(lo: int, hi: int) -> None:
            for ls, le in fold.gap_lines(buf, lo, hi):
                line(ls, le)

        self.folder.buffer(buf, 0, len(buf), 0, gap, line, None, None)

    def finish(self) -> None:
        for token, n in self.folder.counts():
            key, outcome, folded = self.tokens[token]
            self.stats.add_counts(key, outcome, n, folded)


def _boundary_info(boundary: bytes) -> tuple[bool, int]:
    """Whether the compiled count may count a boundary's plain lines itself: not the
    boundaries whose metadata gives a latency."""
    return boundary not in _METRIC_BOUNDARIES, -1
