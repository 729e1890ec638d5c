"""What the faces ask of a log about its tests: the ``tests`` table, one test's timeline and
diagnosis, and envelopes of several inputs merged by time.

``scan_tests`` drives the tests pass and calls down only: ``split`` cuts the inputs
into shares and runs them in processes; each share is folded (``fold.aggregate_share``)
or diagnosed (``_diagnosing.diagnose_share``) over lines ``scan`` finds; the driver
merges what the shares return. Everything keeps aggregates, never the events of a whole
log, so memory depends on the number of tests, not on the size of the input.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from typing import Any

from cvdiag.read import fold, split
from cvdiag.read._diagnosing import Detail, Diagnosing, OneTest, diagnose_share, diagnose_test
from cvdiag.read._merge import merged
from cvdiag.read.parsing import Tally
from cvdiag.read.sources import Source
from cvdiag.read.timeline import Entry, Timeline, identity, timeline

__all__ = [
    "Detail",
    "Entry",
    "OneTest",
    "TestScan",
    "Timeline",
    "closest_ids",
    "default_jobs",
    "diagnose_test",
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


_FIRST_SEEN = operator.itemgetter("first_ts", "test_id")  # a row's place in the table


def scan_tests(
    sources: list[Source],
    *,
    classify: bool = True,
    slow_s: float = 30.0,
    jobs: int = 1,
    keep_json: bool = False,
    progress: Callable[[int], None] | None = None,
    detail: Detail | None = None,
    evidence: Any = None,
) -> TestScan:
    """One row per test id, in order of first appearance in time.

    With ``jobs`` > 1 and big regular files, worker processes share the work: by byte
    range when only aggregates are needed (they merge), by test id when diagnosing
    (a diagnosis needs all of a test's envelopes in one process). ``keep_json`` keeps
    each whole verdict in the row's ``_diagnosis``; ``detail`` (when diagnosing) keeps
    each test's LLM time (``_llm_ms``) and, for the tests it shows whole, their first
    envelopes as its reader took them (``_read``) and the whole verdict only for those:
    what ``report`` needs beyond the rows, in the same pass. ``evidence`` (when
    diagnosing): the class each test is folded into (``_diagnosing.Diagnosing``).
    """
    parts = jobs if split.worth_splitting(sources, jobs) else 1
    log_end = split.files_end(sources) if parts > 1 else None
    shares = [split.Share(sources, k, parts, progress if k == 0 else None) for k in range(parts)]
    work: Callable[[Any], tuple[Any, Tally, float | None]]
    if classify:
        tasks = [Diagnosing(share, slow_s, log_end, keep_json, detail, evidence) for share in shares]
        work = diagnose_share
    else:
        work, tasks = fold.aggregate_share, shares
    results = split.run_parts(work, tasks, parts)
    tally = Tally()
    for _, part_tally, _ in results:
        tally.merge(part_tally)
    if log_end is None:
        ends = [e for _, _, e in results if e is not None]
        log_end = max(ends) if ends else None
    if classify:  # each share diagnosed whole tests: its rows are final
        rows = [r for part_rows, _, _ in results for r in part_rows]
    else:
        rows = list(fold.rows_of(fold.merged_aggs((part_aggs for part_aggs, _, _ in results), tally)))
    rows.sort(key=_FIRST_SEEN)  # canonical timestamps sort as text
    return TestScan(rows, tally, log_end)


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
