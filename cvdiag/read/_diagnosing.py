"""Diagnose every test of a share in bounded memory: at most a budget of tests' evidence at once.

Evidence is what ``classify`` needs of a test (about 1.3 KB). A log with more tests than
the budget costs another pass over the share for those left over, not more memory.
This is the work of one process when ``tests`` diagnoses (``split.run_parts``): it folds
(``fold``), reads its share (``split.Share``) and classifies, and calls nothing above it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
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
    """Which tests a report shows whole: every one (``everything``), or those that
    failed, are flagged or are named in ``ids``. Only those keep their whole verdict,
    and the lines of their first ``lines`` envelopes are read again: ``reader`` makes an
    object for each such test (called with the row), kept in the row's ``_read``, with
    ``left`` set to its lines to come (``finish()`` called at once when it has none),
    and ``reader.take(buf, shift, run)`` hands them their lines, a run at a time in file
    order (each (start, end, the test's object), at ``buf[start - shift:end - shift]``),
    counting ``left`` down and calling ``finish()`` after the last. The rest keep
    ``facts`` of their evidence (what an index row shows). ``keep``, when given, makes
    what is kept of each row (of the row, its verdict and what the reader makes, in a
    form of the report's own): the rows that travel back to the driver are then only
    what it needs. All of it happens in the process that diagnoses, so the work is
    shared between the processes and none holds every test's whole verdict."""

    __slots__ = ("everything", "facts", "ids", "keep", "lines", "reader")  # not a dataclass: see split.Share

    def __init__(
        self,
        lines: int,
        *,
        everything: bool = False,
        ids: frozenset[str] = frozenset(),
        facts: tuple[str, ...] = (),
        reader: Any = None,
        keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.lines, self.everything, self.ids, self.facts = lines, everything, ids, facts
        self.reader, self.keep = reader, keep

    def wants(self, test_id: str, status: str, cls: str | None) -> bool:
        return self.everything or status == "fail" or cls not in (None, "ok") or test_id in self.ids


class Diagnosing:
    """What one process diagnoses: the tests ``share`` owns, judged against ``log_end``
    (None: the end of what the share reads); ``keep_json`` keeps each whole verdict (only
    ``detail``'s whole, when given); ``detail``: what a report needs beyond the rows.
    ``evidence``: the class each test is folded into, ``diagnosis.Evidence`` or a subclass
    that keeps more of the same lines; one with a ``row_facts()`` has them put in each
    whole verdict, under ``_facts`` (the history's, read in the same pass)."""

    __slots__ = ("detail", "evidence", "keep_json", "log_end", "share", "slow_s")  # not a dataclass: see split.Share

    def __init__(
        self,
        share: Share,
        slow_s: float,
        log_end: float | None,
        keep_json: bool,
        detail: Detail | None = None,
        evidence: Any = None,
    ) -> None:
        self.share, self.slow_s, self.log_end = share, slow_s, log_end
        self.keep_json, self.detail, self.evidence = keep_json, detail, evidence


def diagnose_share(task: Diagnosing) -> tuple[list[dict[str, Any]], Tally, float | None]:
    """(the rows of the tests the share owns, with their class; the tally; the latest
    ``ts``), in as many passes as the budget needs (one for all but very big logs).

    The last pass's tests are judged as their rows are made, and a report's rows made
    into what it keeps of them there and then: one test at a time goes from evidence to
    its row, never every verdict and every row at once."""
    from cvdiag.diagnosis import Evidence

    evidence = task.evidence or Evidence
    share = task.share
    owns = share.owns()
    detail = task.detail
    first = fold.Fold(evidence, owns, budget=EVIDENCE_BUDGET, keep_lines=detail.lines if detail else 0)
    first.read(share.windows(by_range=False), share.progress, count=share.part == 0)
    latest = first.latest
    judge = _Judge(task, task.log_end if task.log_end is not None else latest)
    verdicts: dict[bytes, Any] = {}
    folder = first
    while folder.deferred:  # more tests than the budget: these are judged before the others are read
        verdicts.update(judge.every(folder.evidence, first.aggs))
        folder = fold.Fold(evidence, owns, budget=EVIDENCE_BUDGET, only=folder.deferred, fold_aggs=False)
        folder.read(share.windows(by_range=False), None, count=False)
    last = folder.evidence

    def verdict(tid: bytes, row: dict[str, Any]) -> Any:
        ev = last.pop(tid, None)
        return verdicts.pop(tid, None) if ev is None else judge(ev, row["status"])

    rows = fold.rows_of(first.aggs, verdict, first.kept)
    made = list(rows) if detail is None else _read_detail(share, rows, detail)
    release_free_memory()  # what the pass left free, before the rows are sent
    return made, first.tally, latest


def _read_detail(share: Share, rows: Iterable[dict[str, Any]], detail: Detail) -> list[dict[str, Any]]:
    """The rows, with the envelopes of the tests ``detail`` shows read again where the
    fold saw them (only those lines) and handed to its reader, a run at a time. Each
    row's ``fold.Kept`` leaves it for what the report needs of it, in plain values that
    cost nothing to send: ``_llm_ms``, and ``_read`` (what the reader made, its lines
    handed to it after) for a test shown; ``detail.keep``, when given, makes of each row
    what is kept of it as it comes, so the rows are never all held whole."""
    places: dict[int, list[tuple[int, int, Any]]] = {}
    reader, keep = detail.reader, detail.keep
    out = []
    for row in rows:
        kept = row["_kept"]
        if reader is not None and detail.wants(row["test_id"], row["status"], row["class"]):
            read = row["_read"] = reader(row)
            read.left = _place_lines(kept.lines(), places, read)
            if not read.left:
                read.finish()
        del row["_kept"]
        row["_llm_ms"] = kept.llm_ms
        out.append(row if keep is None else keep(row))
    release_free_memory()  # the pass's places and blocks, before the lines shown are read
    for buf, shift, lines in share.lines_at(places):
        reader.take(buf, shift, lines)  # each test finished as soon as it can be: what it held to sort them let go
    return out


def _each_place(lines: Any, places: dict[int, list[tuple[int, int, Any]]], tag: Any) -> int:
    """Each (block, start, end) of ``lines`` as (start, end, ``tag``) in ``places[block]``;
    how many. One compiled call when there is the compiled fold (``place_lines``)."""
    for k in range(0, len(lines), 3):
        places.setdefault(lines[k], []).append((lines[k + 1], lines[k + 2], tag))
    return len(lines) // 3


_place_lines: Callable[[Any, dict[int, list[tuple[int, int, Any]]], Any], int] = (
    fold.CFOLD.place_lines if fold.CFOLD is not None else _each_place
)


class _Judge:
    """Each test's class, or its verdict as JSON: brief (``detail.facts``) for a test
    ``detail`` does not show (given its row's status); or, when ``detail.keep`` makes
    what is kept of the row there and then, that test's ``Judgement``, asked for what its
    row shows and let go with it (a judgement holds the test's evidence: one kept until
    the rows are made is brief JSON)."""

    def __init__(self, task: Diagnosing, log_end: float | None) -> None:
        from cvdiag.diagnosis import Thresholds, judge

        self._judge, self.thresholds, self.log_end = judge, Thresholds(slow_s=task.slow_s), log_end
        self.keep_json, self.detail = task.keep_json, task.detail
        self.row_facts = hasattr(task.evidence, "row_facts")

    def __call__(self, ev: Any, status: str | None, *, kept: bool = False) -> Any:
        judged = self._judge(ev, self.thresholds, log_end=self.log_end)
        if not self.keep_json:
            return judged.cls
        detail = self.detail
        if detail is not None and status is not None and not detail.wants(ev.test_id, status, judged.cls):
            return judged if detail.keep is not None and not kept else judged.to_json(detail.facts)
        verdict = judged.to_json()
        if self.row_facts:
            verdict["_facts"] = ev.row_facts()
        return verdict

    def every(self, evidence: dict[bytes, Any], aggs: dict[bytes, Any]) -> dict[bytes, Any]:
        """The verdict of each test of ``evidence``, let go as it is judged."""
        out = {}
        while evidence:
            tid, ev = evidence.popitem()
            agg = aggs.get(tid)
            out[tid] = self(ev, agg.status if agg is not None else None, kept=True)
        return out


class OneTest:
    """``diagnose_test``'s answer: the verdict (JSON) of the one test matched, the ids
    that start with the prefix (more than one, none equal to it: ambiguous), the tally."""

    __slots__ = ("candidates", "tally", "verdict")

    def __init__(self, verdict: dict[str, Any] | None, candidates: list[str], tally: Tally) -> None:
        self.verdict, self.candidates, self.tally = verdict, candidates, tally


def diagnose_test(sources: list[Any], prefix: str, slow_s: float, log_end: float | None) -> OneTest:
    """The verdict of the test whose id is ``prefix`` or starts with it, made as
    ``diagnose_share`` makes every test's: the fold (compiled where built) over every
    line, with the evidence of the matching ids only. A test of 600,000 events then costs
    what ``diagnose --all`` costs, and is judged on all of them (a timeline keeps its
    first and last 10,000). ``log_end``: the end of the log the verdict dates against."""
    from cvdiag.diagnosis import Evidence, Thresholds, judge

    want = prefix.encode()
    share = Share(sources, 0, 1, None)
    folder = fold.Fold(Evidence, lambda tid: tid.startswith(want), budget=EVIDENCE_BUDGET)
    folder.read(share.windows(by_range=False), None, count=True)
    ids = sorted(tid.decode() for tid in folder.aggs)
    if prefix in ids:
        ids = [prefix]
    if len(ids) != 1:
        return OneTest(None, ids, folder.tally)
    tid = ids[0].encode()
    ev = folder.evidence.get(tid)
    if ev is None:  # more matching ids than the budget: this one's evidence in a pass of its own
        again = fold.Fold(Evidence, None, budget=EVIDENCE_BUDGET, only={tid}, fold_aggs=False)
        again.read(share.windows(by_range=False), None, count=False)
        ev = again.evidence[tid]
    verdict = judge(ev, Thresholds(slow_s=slow_s), log_end=log_end).to_json()
    return OneTest(verdict, ids, folder.tally)
