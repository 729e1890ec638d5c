"""Diagnose every test of a log in bounded memory: at most a budget of tests' evidence at once.

Evidence is what ``classify`` needs of a test (about 1.3 KB). A log with more tests than
the budget costs another pass over the inputs for those left over, not more memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from cvdiag.read import scan
from cvdiag.read._workers import fold_share, owner
from cvdiag.read.sources import Source

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


def diagnose_share(
    sources: list[Source], part: int, parts: int, slow_s: float, log_end: float | None, keep_json: bool,
    progress: Callable[[int], None] | None,
) -> tuple[scan.Fold, dict[bytes, Any]]:  # fmt: skip
    """The folder of the tests worker ``part`` owns (aggregates, tally, latest ``ts``) and
    their verdicts (the whole diagnosis as JSON with ``keep_json``, else the class), in as
    many passes as the budget needs (one for all but very big logs)."""
    from cvdiag.diagnosis import Evidence

    owns = owner(part, parts) if parts > 1 else None
    first = scan.Fold(Evidence, owns, budget=EVIDENCE_BUDGET)
    fold_share(first, sources, part, parts, False, progress, count=part == 0)
    end = log_end if log_end is not None else first.latest
    verdicts: dict[bytes, Any] = {}
    folder = first
    while True:
        verdicts.update(_verdicts(folder.evidence, slow_s, end, keep_json))
        if not folder.deferred:
            break
        folder = scan.Fold(Evidence, owns, budget=EVIDENCE_BUDGET, only=folder.deferred, fold_aggs=False)
        fold_share(folder, sources, part, parts, False, None, count=False)
    return first, verdicts


def _verdicts(evidence: dict[bytes, Any], slow_s: float, log_end: float | None, keep_json: bool) -> dict[bytes, Any]:
    from cvdiag.diagnosis import Thresholds, classify

    thresholds = Thresholds(slow_s=slow_s)
    out = {}
    for tid, ev in evidence.items():
        d = classify(ev, thresholds, log_end=log_end)
        out[tid] = d.to_json() if keep_json else d.cls
    return out
