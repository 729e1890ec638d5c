"""The ``stats`` pass: every envelope counted per slug, boundary and outcome, and whole
envelopes only of the boundaries whose metadata gives a latency.

Where the compiled fold is built, its count mode counts in C the emitter's lines that say
nothing beyond their head (SSE events: most of a log) and that are certainly valid
envelopes; every other line is read as ``scan.hits`` reads it (split container lines
joined, malformed lines counted) and handed over whole. Without it, ``hits_in``. Both
give the same ``Stats`` (``tests/test_compiled_fold.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cvdiag.read import fold, rejoin, split
from cvdiag.read.parsing import ENVELOPE, MALFORMED, Tally, parse_span
from cvdiag.read.scan import LineCounter, hits_in
from cvdiag.read.sources import Source
from cvdiag.read.stats import MAX_ROWS, METRICS, Stats

#: What stats reads of a line beyond its head: the boundaries whose metadata gives a latency.
_METRIC_BOUNDARIES = frozenset(boundary.encode() for boundary, _ in METRICS.values())


def collect(
    sources: list[Source],
    tally: Tally,
    progress: Callable[[int], None] | None = None,
    *,
    max_rows: int = MAX_ROWS,
    jobs: int = 1,
) -> Stats:
    """The ``Stats`` of every envelope of ``sources``, malformed lines counted in ``tally``.

    With ``jobs`` > 1, big regular files and the compiled fold, each process counts one
    stretch of the inputs (``split.Share.stretch``) and the counts merge in input order:
    the same ``Stats``, row cap and first malformed line as one process gives. A later
    stretch that met more pairs than the cap alone may have folded a pair that an
    earlier one made a row of: then the inputs are counted again in one process."""
    parts = jobs if fold.compiled() and split.worth_splitting(sources, jobs) else 1
    if parts > 1:
        shares = [split.Share(sources, k, parts, progress if k == 0 else None) for k in range(parts)]
        results = split.run_parts(_count_share, [(share, max_rows) for share in shares], parts)
        if not any(part_stats.folded for part_stats, _ in results[1:]):
            return _merged(results, tally)
    stats = Stats(max_rows)
    _read(sources, tally, progress if parts == 1 else None, stats.add, _METRIC_BOUNDARIES, stats)
    return stats


def _merged(results: list[tuple[Stats, Tally]], tally: Tally) -> Stats:
    """The shares' counts as one, in input order, their tallies merged into ``tally``."""
    stats = results[0][0]
    for part_stats, part_tally in results:
        if part_stats is not stats:
            stats.merge(part_stats)
        tally.merge(part_tally)
    return stats


def _count_share(task: tuple[split.Share, int]) -> tuple[Stats, Tally]:
    """The ``Stats`` and ``Tally`` of one share's stretch: the work of one process."""
    share, max_rows = task
    stats, tally = Stats(max_rows), Tally()
    _count(share, _Counting(stats, tally, stats.add, _METRIC_BOUNDARIES))
    return stats, tally


def _count(share: split.Share, counting: _Counting) -> None:
    """``counting`` over the buffers of ``share``'s stretch."""
    progress = share.progress_of_all()
    for buf, name, base in share.stretch():
        counting.buffer(buf, name, base)
        if progress is not None:
            progress(len(buf))
    counting.finish()


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
    _count(split.Share(sources, progress=progress), _Counting(stats, tally, consume, wanted))


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

        self.folder.buffer(buf, 0, len(buf), 0, line, None, None, None, None)

    def finish(self) -> None:
        if self.stats is None:
            return
        for token, n in self.folder.counts():
            key, outcome, folded = self.tokens[token]
            self.stats.add_counts(key, outcome, n, folded)
