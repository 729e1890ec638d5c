"""What the faces ask of a log about its tests: the ``tests`` table, one test's timeline and
diagnosis, and envelopes of several inputs merged by time.

This module is the entry point; the work is done in ``_workers`` (worker processes),
``_diagnosing`` (diagnosing in bounded memory), ``timeline`` and ``merge``.
Everything keeps aggregates, never the events of a whole log, so memory depends on the
number of tests, not on the size of the input.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cvdiag.read import _workers, scan
from cvdiag.read._diagnosing import diagnose_share
from cvdiag.read._merge import merged
from cvdiag.read.parsing import Tally
from cvdiag.read.sources import Source
from cvdiag.read.timeline import Entry, Timeline, identity, timeline

__all__ = [
    "Entry",
    "TestScan",
    "Timeline",
    "closest_ids",
    "default_jobs",
    "diagnose_timeline",
    "identity",
    "merged",
    "scan_tests",
    "timeline",
]


class TestScan:
    """The outcome of reading inputs for ``tests``: one row per test id."""

    __slots__ = ("log_end", "rows", "tally")

    def __init__(self, rows: list[dict[str, Any]], tally: Tally, log_end: float | None) -> None:
        self.rows, self.tally, self.log_end = rows, tally, log_end


def default_jobs() -> int:
    """Worker processes unless told otherwise: the CPUs, two at most."""
    return max(1, min(2, os.cpu_count() or 1))


def scan_tests(
    sources: list[Source],
    *,
    classify: bool = True,
    slow_s: float = 30.0,
    jobs: int = 1,
    keep_json: bool = False,
    progress: Callable[[int], None] | None = None,
) -> TestScan:
    """One row per test id, in order of first appearance in time.

    With ``jobs`` > 1 and big regular files, worker processes share the work: by byte
    range when only aggregates are needed (they merge), by test id when diagnosing
    (a diagnosis needs all of a test's envelopes in one process). ``keep_json`` keeps
    each whole verdict in the row's ``_diagnosis``.
    """
    if _workers.worth_splitting(sources, jobs):
        log_end = _workers.files_end(sources)
        shares = [
            _Share(sources, k, jobs, classify, slow_s, log_end, keep_json, progress if k == 0 else None)
            for k in range(jobs)
        ]
        parts = _workers.run_parts(_scan_share, shares, jobs)
    else:
        log_end = None
        parts = [_scan_share(_Share(sources, 0, 1, classify, slow_s, None, keep_json, progress))]
    tally = Tally()
    for _, part_tally, _ in parts:
        tally.merge(part_tally)
    if log_end is None:
        ends = [e for _, _, e in parts if e is not None]
        log_end = max(ends) if ends else None
    if classify:  # each share diagnosed whole tests: its rows are final
        rows = [r for part_rows, _, _ in parts for r in part_rows]
    else:
        rows = _test_rows(_merged_aggs((part_aggs for part_aggs, _, _ in parts), tally), None)
    rows.sort(key=lambda r: (r["first_ts"], r["test_id"]))  # canonical timestamps sort as text
    return TestScan(rows, tally, log_end)


@dataclass(frozen=True, slots=True)
class _Share:
    """One process's part of ``scan_tests`` (part ``part`` of ``parts``)."""

    sources: list[Source]
    part: int
    parts: int
    classify: bool
    slow_s: float
    log_end: float | None  # None: the end of what this share reads
    keep_json: bool
    progress: Callable[[int], None] | None


def _scan_share(share: _Share) -> tuple[Any, Tally, float | None]:
    """(rows with their class when diagnosing, else aggregates to merge; tally; latest ts)."""
    sources, part, parts = share.sources, share.part, share.parts
    for src in sources:  # every share reads every file: one says what happened to it
        src.quiet = part > 0
    if share.classify:  # a diagnosis needs all of a test's envelopes: split by test id
        folder, verdicts = diagnose_share(
            sources, part, parts, share.slow_s, share.log_end, share.keep_json, share.progress
        )
        return _test_rows(folder.aggs, verdicts), folder.tally, folder.latest
    folder = scan.Fold()  # aggregates merge: split by byte range
    # Part 0 reports progress for all: the shares are about equal.
    progress = share.progress
    scaled = (lambda done: progress(done * parts)) if progress is not None else None
    _workers.fold_share(folder, sources, part, parts, True, scaled, count=True)
    return folder.aggs, folder.tally, folder.latest


def _merged_aggs(parts: Any, tally: Tally) -> dict[bytes, scan.Agg]:
    """The workers' aggregates as one, at most ``scan.MAX_TESTS`` ids (each worker kept that many)."""
    aggs: dict[bytes, scan.Agg] = {}
    for part_aggs in parts:
        for tid, agg in part_aggs.items():
            if tid in aggs:
                aggs[tid].merge(agg)
            elif len(aggs) < scan.MAX_TESTS:
                aggs[tid] = agg
            else:
                tally.untracked += agg.events
                tally.untracked_limit = scan.MAX_TESTS
    return aggs


def _test_rows(aggs: dict[bytes, scan.Agg], verdicts: dict[bytes, Any] | None) -> list[dict[str, Any]]:
    """Rows of the tests that have more than accounting envelopes, with their class
    (and ``_diagnosis``, the whole verdict, when it was kept) if ``verdicts`` is given."""
    rows = []
    for tid, agg in aggs.items():
        if not agg.layers:  # only accounting envelopes: about cvdiag, not about a test
            continue
        row = agg.row(tid)
        if verdicts is not None:
            v = verdicts.get(tid)
            row["class"] = v["class"] if isinstance(v, dict) else v
            if isinstance(v, dict):
                row["_diagnosis"] = v
        rows.append(row)
    return rows


def closest_ids(sources: list[Source], wanted: str, limit: int = 3) -> list[str]:
    """Test ids that look like ``wanted``: shared prefix first, then by similarity."""
    import difflib

    ids = {row["test_id"] for row in scan_tests(sources, classify=False).rows}
    same_start = sorted(i for i in ids if i[:4] == wanted[:4])
    close = difflib.get_close_matches(wanted, list(ids), n=limit, cutoff=0.4)
    out: list[str] = []
    for i in [*close, *same_start]:
        if i not in out:
            out.append(i)
    return out[:limit]


def diagnose_timeline(tl: Timeline, slow_s: float) -> Any:
    """The diagnosis of a timeline's test."""
    from cvdiag.diagnosis import Evidence, Thresholds, classify

    ev = Evidence(tl.test_id or "")
    for env in tl.envelopes:
        ev.add(env)
    return classify(ev, Thresholds(slow_s=slow_s), log_end=tl.log_end)
