"""Passes that want whole envelopes of a few boundaries and only counts of the rest:
``stats`` (every envelope counted per slug, boundary and outcome, the latencies read) and
the facts ``history add`` keeps beyond the ``tests`` rows (``each_envelope``).

Where the compiled fold is built, its count mode counts in C the emitter's lines that say
nothing beyond their head (SSE events: most of a log) and that are certainly valid
envelopes; every other line is read as ``scan.hits`` reads it (split container lines
joined, malformed lines counted) and handed over whole. Without it, ``hits_in``. Both
give the same ``Stats`` (``tests/test_compiled_fold.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cvdiag.read import fold, rejoin
from cvdiag.read.parsing import ENVELOPE, MALFORMED, Tally, parse_span
from cvdiag.read.scan import LineCounter, hits_in, newlines
from cvdiag.read.sources import Source
from cvdiag.read.stats import MAX_ROWS, METRICS, Stats

#: What stats reads of a line beyond its head: the boundaries whose metadata gives a latency.
_METRIC_BOUNDARIES = frozenset(boundary.encode() for boundary, _ in METRICS.values())


def collect(
    sources: list[Source], tally: Tally, progress: Callable[[int], None] | None = None, *, max_rows: int = MAX_ROWS
) -> Stats:
    """The ``Stats`` of every envelope of ``sources``, malformed lines counted in ``tally``."""
    stats = Stats(max_rows)
    _read(sources, tally, progress, stats.add, _METRIC_BOUNDARIES, stats)
    return stats


def each_envelope(
    sources: list[Source], tally: Tally, consume: Callable[[dict[str, Any]], None], boundaries: frozenset[str]
) -> None:
    """``consume`` every envelope of ``sources`` of one of ``boundaries``, and maybe others:
    the compiled pass only counts the plain lines of the rest, the Python one hands all over."""
    _read(sources, tally, None, consume, frozenset(b.encode() for b in boundaries), None)


def _read(
    sources: list[Source],
    tally: Tally,
    progress: Callable[[int], None] | None,
    consume: Callable[[dict[str, Any]], None],
    wanted: frozenset[bytes],
    stats: Stats | None,
) -> None:
    """``consume`` the envelopes of ``sources``; where compiled, the plain lines of boundaries
    not ``wanted`` are counted into ``stats`` (when given) instead."""
    if not fold.compiled():
        for hit in hits_in(sources, tally, progress=progress):
            if hit.kind == ENVELOPE:
                consume(hit.value)
        return
    counting = _Counting(stats, tally, consume, wanted)
    for src in sources:
        base = 1
        for buf in src.blocks():
            counting.buffer(buf, src.name, base)
            if progress is not None:
                progress(len(buf))
            if isinstance(buf, bytes):
                base += newlines(buf)
    counting.finish()


class _Counting:
    """One compiled count over the buffers of the inputs, and the rows it asked ``stats`` for."""

    __slots__ = ("consume", "folder", "stats", "tally", "tokens")

    def __init__(
        self, stats: Stats | None, tally: Tally, consume: Callable[[dict[str, Any]], None], wanted: frozenset[bytes]
    ) -> None:
        self.stats, self.tally, self.consume = stats, tally, consume
        self.tokens: list[tuple[tuple[str, str], str, bool]] = []  # token -> (row key, outcome, folded)
        self.folder = fold.compiled_folder(
            admit=None,
            boundary_info=lambda boundary: (boundary not in wanted, -1),  # counted in C when plain
            fold_aggs=False,
            keep_lines=0,
            max_tests=0,
            pair=self._pair,
        )

    def _pair(self, slug: bytes, boundary: bytes, outcome: bytes) -> int:
        """A (slug, boundary, outcome) the compiled count met the first time: its row is
        made now, in file order, as ``Stats.add`` would make it."""
        if self.stats is None:
            return 0
        text = outcome.decode()
        key, folded = self.stats.row_for(slug.decode(), boundary.decode(), text)
        self.tokens.append((key, text, folded))
        return len(self.tokens) - 1

    def buffer(self, buf: Any, name: str, base: int) -> None:
        counter = LineCounter(buf, base)
        joins = rejoin.Joins(buf)
        consume, tally = self.consume, self.tally

        def line(ls: int, le: int) -> None:  # as scan.hits reads a line
            if joins.joined and joins.taken(ls):
                return
            kind, value, _ = parse_span(buf, ls, le, joins)
            if kind == MALFORMED:
                tally.add(lambda: f"{name}:{counter.at(ls)}", value)
            elif kind == ENVELOPE:
                tally.seen(value, lambda: f"{name}:{counter.at(ls)}")
                consume(value)

        self.folder.buffer(buf, 0, len(buf), 0, line, None, None, None)

    def finish(self) -> None:
        if self.stats is None:
            return
        for token, n in self.folder.counts():
            key, outcome, folded = self.tokens[token]
            self.stats.add_counts(key, outcome, n, folded)
