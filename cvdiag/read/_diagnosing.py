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


class Diagnosing:
    """What one process diagnoses: the tests ``share`` owns, judged against ``log_end``
    (None: the end of what the share reads); ``keep_json`` keeps each whole verdict;
    ``keep_lines``: what a report needs beyond the rows (``fold.Kept``)."""

    __slots__ = ("keep_json", "keep_lines", "log_end", "share", "slow_s")  # not a dataclass: see split.Share

    def __init__(
        self, share: Share, slow_s: float, log_end: float | None, keep_json: bool, keep_lines: int = 0
    ) -> None:
        self.share, self.slow_s, self.log_end = share, slow_s, log_end
        self.keep_json, self.keep_lines = keep_json, keep_lines


def diagnose_share(task: Diagnosing) -> tuple[list[dict[str, Any]], Tally, float | None]:
    """(the rows of the tests the share owns, with their class; the tally; the latest
    ``ts``), in as many passes as the budget needs (one for all but very big logs)."""
    from cvdiag.diagnosis import Evidence

    share = task.share
    owns = share.owns()
    first = fold.Fold(Evidence, owns, budget=EVIDENCE_BUDGET, keep_lines=task.keep_lines)
    first.read(share.windows(by_range=False), share.progress, count=share.part == 0)
    end = task.log_end if task.log_end is not None else first.latest
    verdicts: dict[bytes, Any] = {}
    folder = first
    while True:
        verdicts.update(_verdicts(folder.evidence, task.slow_s, end, task.keep_json))
        if not folder.deferred:
            break
        folder = fold.Fold(Evidence, owns, budget=EVIDENCE_BUDGET, only=folder.deferred, fold_aggs=False)
        folder.read(share.windows(by_range=False), None, count=False)
    return fold.rows_of(first.aggs, verdicts, first.kept), first.tally, first.latest


def _verdicts(evidence: dict[bytes, Any], slow_s: float, log_end: float | None, keep_json: bool) -> dict[bytes, Any]:
    from cvdiag.diagnosis import Thresholds, classify

    thresholds = Thresholds(slow_s=slow_s)
    out = {}
    for tid, ev in evidence.items():
        d = classify(ev, thresholds, log_end=log_end)
        out[tid] = d.to_json() if keep_json else d.cls
    return out
