"""The parallel split of a pass: which share of the inputs each process reads, and the processes.

A share is a byte range of every buffer (aggregates merge, so any line may go to any
process), a stretch of whole buffers (counts that merge in input order, so the first of
anything is the first share's), or every line of the tests whose id hashes to the process
(a diagnosis needs all of a test's envelopes in one process). Workers are forked, so the
loaded modules come for free. This module only cuts and runs: what a share does with its
lines is the work handed to ``run_parts`` (``fold.aggregate_share``, ``_diagnosing.diagnose_share``,
``count._count_share``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import operator
import os
import signal
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from cvdiag.read import scan
from cvdiag.read.sources import Source, is_gzip, own_process

# Below this much input a second process costs more than it saves.
PARALLEL_MIN_BYTES = int(os.environ.get("CVDIAG_PARALLEL_MIN_BYTES", 64 << 20))

_Result = TypeVar("_Result")


def worth_splitting(sources: list[Source], jobs: int) -> bool:
    """Whether ``jobs`` processes pay off: only regular files can be read by each, and
    only big inputs repay the start of another process."""
    return (
        jobs > 1
        and all(not s.stream and not _is_gzip_file(s.path or "") for s in sources)
        and sum(s.size() for s in sources) >= PARALLEL_MIN_BYTES
    )


def _is_gzip_file(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return is_gzip(fh)
    except OSError:
        return True  # unreadable: let the single-process path report it


def run_parts(work: Callable[[Any], _Result], shares: Iterable[Any], jobs: int) -> list[_Result]:
    """``work`` of each share, results in the shares' order: the first share's in this
    process, each other's in one of ``jobs`` - 1 forked processes, forked before this one
    starts (so they start from the state it had). The first share's result is neither
    pickled nor sent, and this process is not a third one waiting beside two at work.

    Done, the workers are closed, not terminated: each ends on the pool's sentinel. Only
    an error terminates them (SIGTERM), as workers still at work must stop; they are
    forked with SIGTERM blocked (``_start_worker`` unblocks it), so one that is sent it
    before it first runs still gets it. Unblocked, the signal could land in Python's own
    after-fork code, which runs the command's handler and ignores what it raises: the
    worker lived on, and ``terminate`` waited for it forever (once in about 700 pools,
    in a test that makes hundreds)."""
    shares = list(shares)
    if len(shares) < 2:
        results = [work(share) for share in shares]
        _kept_until_the_end()
        return results
    import multiprocessing  # only here: they cost start-up time (25 M instructions)
    import pickle

    first, rest = shares[0], shares[1:]
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        pool = multiprocessing.get_context("fork").Pool(max(1, min(jobs - 1, len(rest))), initializer=_start_worker)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    try:
        pending = pool.map_async(functools.partial(_pickled, work), rest)
        mine = work(first)
        sent = pending.get()
        with _collector_paused():  # here, not in the pool's thread while this one works
            others = [pickle.loads(result) for result in sent]
    except BaseException:
        pool.terminate()
        raise
    pool.close()
    pool.join()
    return [mine, *others]


def _pickled(work: Callable[[Any], Any], share: Any) -> bytes:
    """``work`` of ``share``, pickled by the worker: the driver unpickles it when its own
    share is done, with its collector paused, not on the pool's thread as it arrives."""
    import pickle  # loaded already: the pool's own

    return pickle.dumps(work(share), protocol=pickle.HIGHEST_PROTOCOL)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic collector off while the workers' results are unpickled (after the fork,
    so the workers keep theirs): they are acyclic rows, and the full collections their
    many objects set off doubled the time to take them in. Then they are kept until the
    end, with this process's own share's (``_kept_until_the_end``)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            _kept_until_the_end()
            gc.enable()


def _kept_until_the_end() -> None:
    """In the CLI's own process, what the shares made (rows, verdicts, events) lives until
    the command ends: frozen (``gc.freeze``), so that the young collections of what
    follows (the sort, the index, the page or the table) do not walk it again. A share
    made its rows while freeing more than it made, so none of them had been collected:
    the first young collection after it walked them all (a report's 117,000 objects on
    the 1 GB log, 0.13 s of sorting its rows)."""
    if own_process():
        gc.freeze()


def _start_worker() -> None:
    """A worker ends at once on SIGTERM, which the pool sends to stop workers when the
    command fails, and collects cycles whatever the driver is doing.

    The command's own SIGTERM handler (inherited through fork) raises in Python code, and
    a signal that lands just before a worker blocks on the pool's task lock is never
    handled: the worker would wait for that lock forever. It was forked with SIGTERM
    blocked: unblocked here, one sent meanwhile ends it now. A worker the pool starts
    again is forked while the driver's collector is paused.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # one sent already ends it here
    gc.enable()


def files_end(sources: list[Source]) -> float | None:
    """The latest ``ts`` near the end of the inputs: every worker must judge "still
    running" against the same end of the log, not the end of its own share."""
    ends = [t for t in (scan.tail_ts(src.tail(scan.TAIL_BYTES)) for src in sources) if t is not None]
    return max(ends) if ends else None


def owner(part: int, parts: int) -> Callable[[bytes], bool]:
    """Whether a test id belongs to worker ``part``: a hash, so no worker needs a list."""
    return lambda tid: zlib.crc32(tid) % parts == part


def byte_ranges(buf: Any, parts: int) -> list[tuple[int, int]]:
    """``parts`` slices of ``buf`` that start at 0 or at a newline (which a bare line needs)."""
    n = len(buf)
    cuts = [0]
    for k in range(1, parts):
        nl = buf.find(b"\n", max(cuts[-1], n * k // parts))
        if nl > cuts[-1]:
            cuts.append(nl)
    return list(zip(cuts, [*cuts[1:], n], strict=True))


_start = operator.itemgetter(0)  # of a line (start, end, tag): its place in its block


#: One window of a share: (buffer, source name, start, end, line number of the buffer's
#: first line, the buffer's number among all the buffers of the inputs).
Window = tuple[Any, str, int, int, int, int]


class Share:
    """Process ``part``'s share of ``parts`` of ``sources`` (part 0 of 1: all of them).

    ``progress`` is given to part 0 only: it reports for all, the shares being about equal.
    A plain slotted class, not a dataclass: every ``tests`` imports this module, and
    making a dataclass costs more than the rest of it.
    """

    __slots__ = ("offsets", "part", "parts", "progress", "sources", "total")

    def __init__(
        self, sources: list[Source], part: int = 0, parts: int = 1, progress: Callable[[int], None] | None = None
    ) -> None:
        self.sources, self.part, self.parts, self.progress = sources, part, parts, progress
        self.total = sum(s.size() for s in sources) if parts > 1 else 0  # what the stretches cut
        # a block -> (its source's number, its file offset or -1: not the file's bytes), as
        # the first reading found it: the pass that notes where lines are is the first
        self.offsets: dict[int, tuple[int, int]] = {}

    def progress_of_all(self) -> Callable[[int], None] | None:
        """The progress to report for bytes this share read, when it reads only its part of
        each: the first share's bytes stand for all of them (the shares are about equal)."""
        progress, parts = self.progress, self.parts
        return (lambda done: progress(done * parts)) if progress is not None else None

    def owns(self) -> Callable[[bytes], bool] | None:
        """Which test ids this share diagnoses (None: all)."""
        return owner(self.part, self.parts) if self.parts > 1 else None

    def stretch(self) -> Iterator[tuple[Any, str, int]]:
        """(buffer, source name, line number of its first line) of the whole buffers that
        start in the share's stretch of the inputs taken end to end (part k of n: its k-th
        n-th of their bytes; the last part to the end): for a pass whose shares merge in
        input order, so the first of anything is part 0's. A share after the first reads
        the buffers before its stretch only to number its lines; the first stops at its end."""
        lo = self.total * self.part // self.parts
        hi = self.total * (self.part + 1) // self.parts if self.part < self.parts - 1 else None
        for buf, name, base, _, at in self._buffers():
            if hi is not None and at >= hi:
                return
            if at >= lo:
                yield buf, name, base

    def windows(self, *, by_range: bool) -> Iterator[Window]:
        """The share's line-aligned windows: its byte range of every buffer (``by_range``),
        or every buffer whole (``owns`` then picks the tests)."""
        for buf, name, base, block, _ in self._buffers():
            ranges = byte_ranges(buf, self.parts) if by_range else [(0, len(buf))]
            if by_range and self.part >= len(ranges):  # a buffer too small to split
                continue
            lo, hi = ranges[self.part if by_range else 0]
            for a, b in scan.windows(buf, lo, hi):
                yield buf, name, a, b, base, block

    def lines_at(
        self, places: dict[int, list[tuple[int, int, Any]]]
    ) -> Iterator[tuple[Any, int, list[tuple[int, int, Any]]]]:
        """The lines at ``places`` (a block's number -> its lines (start, end, tag), in any
        order) read again, as (buffer, shift, lines) in file order: each line of ``lines``
        is at ``buffer[start - shift:end - shift]``. Read where the file holds them
        (``Source.lines_at``) when every block named was a file's bytes at a known offset
        when this share read it, else the blocks read again (``_blocks_at``); either way a
        line the inputs no longer hold (they shrank) falls past its buffer's end."""
        for lines in places.values():
            lines.sort(key=_start)
        offsets = self.offsets
        if any(offsets.get(block, (0, -1))[1] < 0 for block in places):
            yield from self._blocks_at(places)
            return
        by_source: dict[int, list[tuple[int, list[tuple[int, int, Any]]]]] = {}
        for block in sorted(places):
            i, offset = offsets[block]
            by_source.setdefault(i, []).append((offset, places[block]))
        for i, blocks in by_source.items():  # in the sources' order: blocks are numbered across them
            yield from self.sources[i].lines_at(blocks)

    def _blocks_at(
        self, places: dict[int, list[tuple[int, int, Any]]]
    ) -> Iterator[tuple[Any, int, list[tuple[int, int, Any]]]]:
        """(buffer, 0, lines) of each block named in ``places``, the inputs read again up to
        the last one named; the lines of a block they no longer have come with an empty
        buffer."""
        last = max(places)
        block = -1
        for buf, _, _, block, _ in self._buffers():
            if block in places:
                yield buf, 0, places[block]
            if block >= last:
                return
        for gone in sorted(b for b in places if b > block):
            yield b"", 0, places[gone]

    def _buffers(self) -> Iterator[tuple[Any, str, int, int, int]]:
        """(buffer, source name, line number of its first line, its number among all the
        buffers, its offset in the inputs taken end to end) of every buffer of the inputs,
        each numbered whether the share reads it or not."""
        for src in self.sources:  # every share reads every file: one says what happened to it
            src.quiet = self.part > 0
        block = -1
        at = 0
        offsets = self.offsets
        for i, src in enumerate(self.sources):
            base = 1
            for buf in src.blocks():
                block += 1
                if block not in offsets:
                    offsets[block] = (i, src.at)
                yield buf, src.name, base, block, at
                at += len(buf)
                if isinstance(buf, bytes):
                    base += scan.newlines(buf)
