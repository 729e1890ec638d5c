"""Diagnose every test of a share in bounded memory: at most a budget of tests' evidence at once.

Evidence is what ``classify`` needs of a test (about 1.3 KB). A log with more tests than
the budget costs another pass over the share for those left over, not more memory.
This is the work of one process when ``tests`` diagnoses (``split.run_parts``): it folds
(``fold``), reads its share (``split.Share``) and classifies, and calls nothing above it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from cvdiag.read import fold
from cvdiag.read.parsing import Tally
from cvdiag.read.sources import release_free_memory
from cvdiag.read.split import Share

#: Tests whose diagnosis evidence one process holds at a time (about 70 MB at most).
DEFAULT_EVIDENCE_BUDGET = 40_000


def _budget(raw: str | None) -> int:
    """Tests diagnosed per pass: at least one (a budget of 0 never finished), the
    default when ``CVDIAG_EVIDENCE_BUDGET`` is not a number."""
    try:
        return max(1, int(raw)) if raw is not None else DEFAULT_EVIDENCE_BUDGET
    except ValueError:
        return DEFAULT_EVIDENCE_BUDGET


EVIDENCE_BUDGET = _budget(os.environ.get("CVDIAG_EVIDENCE_BUDGET"))


class Detail:
    """Which tests a report shows whole: every one (``everything``), or those that failed,
    are flagged or are named in ``ids``. Only those keep their whole verdict, and the
    lines of their first ``lines`` envelopes are read again and handed to what ``reader``
    makes for the test (given the row; ``line(buf, start, end)`` each in file order, then
    ``finish()``), kept in the row's ``_read``; the rest keep ``facts`` of their evidence
    (what an index row shows). ``keep``, when given, makes what is kept of each row (of
    the row, its verdict and what the reader makes, in a form of the report's own): the
    rows that travel back to the driver are then only what it needs. All of it happens
    in the process that diagnoses, so the work is shared between the processes and none
    holds every test's whole verdict."""

    __slots__ = ("everything", "facts", "ids", "keep", "lines", "reader")  # not a dataclass: see split.Share

    def __init__(
        self,
        lines: int,
        *,
        everything: bool = False,
        ids: frozenset[str] = frozenset(),
        facts: tuple[str, ...] = (),
        reader: Callable[[dict[str, Any]], Any] | None = None,
        keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.lines, self.everything, self.ids, self.facts = lines, everything, ids, facts
        self.reader, self.keep = reader, keep

    def wants(self, test_id: str, status: str, cls: str | None) -> bool:
        return self.everything or status == "fail" or cls not in (None, "ok") or test_id in self.ids


class Diagnosing:
    """What one process diagnoses: the tests ``share`` owns, judged against ``log_end``
    (None: the end of what the share reads); ``keep_json`` keeps each whole verdict (only
    ``detail``'s whole, when given); ``detail``: what a report needs beyond the rows."""

    __slots__ = ("detail", "keep_json", "log_end", "share", "slow_s")  # not a dataclass: see split.Share

    def __init__(
        self, share: Share, slow_s: float, log_end: float | None, keep_json: bool, detail: Detail | None = None
    ) -> None:
        self.share, self.slow_s, self.log_end = share, slow_s, log_end
        self.keep_json, self.detail = keep_json, detail


def diagnose_share(task: Diagnosing) -> tuple[list[dict[str, Any]], Tally, float | None]:
    """(the rows of the tests the share owns, with their class; the tally; the latest
    ``ts``), in as many passes as the budget needs (one for all but very big logs)."""
    from cvdiag.diagnosis import Evidence

    share = task.share
    owns = share.owns()
    detail = task.detail
    first = fold.Fold(Evidence, owns, budget=EVIDENCE_BUDGET, keep_lines=detail.lines if detail else 0)
    first.read(share.windows(by_range=False), share.progress, count=share.part == 0)
    end = task.log_end if task.log_end is not None else first.latest
    verdicts: dict[bytes, Any] = {}
    folder = first
    while True:
        verdicts.update(_verdicts(folder.evidence, task, end, first.aggs))
        if not folder.deferred:
            break
        folder = fold.Fold(Evidence, owns, budget=EVIDENCE_BUDGET, only=folder.deferred, fold_aggs=False)
        folder.read(share.windows(by_range=False), None, count=False)
    rows = fold.rows_of(first.aggs, verdicts, first.kept)
    release_free_memory()  # what the pass left free, before the rows are read again and sent
    if detail is not None:
        _read_detail(share, rows, detail)
        release_free_memory()
    return rows, first.tally, first.latest


def _read_detail(share: Share, rows: list[dict[str, Any]], detail: Detail) -> None:
    """The envelopes of the tests ``detail`` shows, read again where the fold saw them
    (only those lines) and handed to its reader. Each row's ``fold.Kept`` leaves it for
    what the report needs of it, in plain values that cost nothing to send: ``_llm_ms``,
    and ``_read`` (what the reader made, its lines handed to it after) for a test shown;
    ``detail.keep``, when given, makes of the row what is kept of it."""
    places: dict[int, list[tuple[int, int, Any]]] = {}
    readers = []
    reader, keep = detail.reader, detail.keep
    for i, row in enumerate(rows):
        kept = row["_kept"]
        if reader is not None and detail.wants(row["test_id"], row["status"], row["class"]):
            read = row["_read"] = reader(row)
            readers.append(read)
            at = kept.lines()
            for k in range(0, len(at), 3):
                places.setdefault(at[k], []).append((at[k + 1], at[k + 2], read))
        del row["_kept"]
        row["_llm_ms"] = kept.llm_ms
        if keep is not None:  # in place: each row let go as soon as it is replaced
            rows[i] = keep(row)
    for buf, shift, lines in share.lines_at(places):
        for ls, le, read in lines:
            read.line(buf, ls - shift, le - shift)
    for read in readers:
        read.finish()


def _verdicts(
    evidence: dict[bytes, Any], task: Diagnosing, log_end: float | None, aggs: dict[bytes, Any]
) -> dict[bytes, Any]:
    """Each test's class, or its verdict as JSON (brief for a test ``detail`` does not
    show); evidence is let go as it is judged."""
    from cvdiag.diagnosis import Thresholds, judge

    thresholds = Thresholds(slow_s=task.slow_s)
    keep_json, detail = task.keep_json, task.detail
    out = {}
    while evidence:
        tid, ev = evidence.popitem()
        judged = judge(ev, thresholds, log_end=log_end)
        if not keep_json:
            out[tid] = judged.cls
            continue
        facts = None  # the whole summary, unless the report shows the test by its index row only
        if detail is not None and tid in aggs and not detail.wants(ev.test_id, aggs[tid].status, judged.cls):
            facts = detail.facts
        out[tid] = judged.to_json(facts)
    return out
