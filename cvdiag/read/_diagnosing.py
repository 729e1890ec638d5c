"""Diagnose every test of a share in bounded memory: at most a budget of tests' evidence at once.

Evidence is what ``classify`` needs of a test (about 1.3 KB). A log with more tests than
the budget costs another pass over the share for those left over, not more memory.
This is the work of one process when ``tests`` diagnoses (``split.run_parts``): it folds
(``fold``), reads its share (``split.Share``) and classifies, and calls nothing above it.
"""

from __future__ import annotations

import os
from typing import Any

from cvdiag.read import fold
from cvdiag.read.parsing import Tally
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
    are flagged or are named in ``ids``. Only those keep their whole verdict and where
    their first ``lines`` envelopes are; the rest keep ``facts`` of their evidence (what
    an index row shows). Decided in the process that diagnoses, so neither it nor the
    one that gathers holds every test's whole verdict."""

    __slots__ = ("everything", "facts", "ids", "lines")  # not a dataclass: see split.Share

    def __init__(
        self, lines: int, *, everything: bool = False, ids: frozenset[str] = frozenset(), facts: tuple[str, ...] = ()
    ) -> None:
        self.lines, self.everything, self.ids, self.facts = lines, everything, ids, facts

    def wants(self, test_id: str, status: str, cls: str | None) -> bool:
        return self.everything or status == "fail" or cls not in (None, "ok") or test_id in self.ids

    def brief(self, verdict: dict[str, Any]) -> dict[str, Any]:
        """The verdict with only ``facts`` of its evidence."""
        evidence = verdict["evidence"]
        return {**verdict, "evidence": {k: evidence[k] for k in self.facts if k in evidence}}


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
    if detail is not None:
        for row in rows:  # where the lines of a test not shown are: not needed
            if not detail.wants(row["test_id"], row["status"], row["class"]):
                row["_kept"].places = None
    return rows, first.tally, first.latest


def _verdicts(
    evidence: dict[bytes, Any], task: Diagnosing, log_end: float | None, aggs: dict[bytes, Any]
) -> dict[bytes, Any]:
    """Each test's class, or its verdict as JSON (brief for a test ``detail`` does not
    show); evidence is let go as it is judged."""
    from cvdiag.diagnosis import Thresholds, classify

    thresholds = Thresholds(slow_s=task.slow_s)
    keep_json, detail = task.keep_json, task.detail
    out = {}
    while evidence:
        tid, ev = evidence.popitem()
        d = classify(ev, thresholds, log_end=log_end)
        if not keep_json:
            out[tid] = d.cls
            continue
        verdict = d.to_json()
        if detail is not None and tid in aggs:
            test_id = tid.decode("utf-8", "replace")
            if not detail.wants(test_id, aggs[tid].status, d.cls):
                verdict = detail.brief(verdict)
        out[tid] = verdict
    return out
