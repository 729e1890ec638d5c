"""Group CVDIAG envelopes by test id: per-test aggregates, one test's timeline, time merge.

Everything here keeps aggregates, never the events of a whole log, so memory depends
on the number of tests, not on the size of the input.
"""

from __future__ import annotations

import heapq
import os
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from cvdiag.contract.timestamps import line_ts, ts_seconds
from cvdiag.read import parsing, scan
from cvdiag.read.jsonout import dumps
from cvdiag.read.parsing import BREADCRUMB, ENVELOPE, MALFORMED, NOTHING, Tally
from cvdiag.read.scan import Hit
from cvdiag.read.sources import Source, is_gzip

# Below this much input a second process costs more than it saves.
_PARALLEL_MIN_BYTES = int(os.environ.get("CVDIAG_PARALLEL_MIN_BYTES", 64 << 20))


class TestScan:
    """The outcome of reading inputs for ``tests``: one row per test id."""

    __slots__ = ("log_end", "rows", "tally")

    def __init__(self, rows: list[dict[str, Any]], tally: Tally, log_end: float | None) -> None:
        self.rows, self.tally, self.log_end = rows, tally, log_end


def _ranges(buf: Any, parts: int) -> list[tuple[int, int]]:
    """``parts`` slices of ``buf`` that start at 0 or at a newline (which a bare line needs)."""
    n = len(buf)
    cuts = [0]
    for k in range(1, parts):
        nl = buf.find(b"\n", max(cuts[-1], n * k // parts))
        if nl > cuts[-1]:
            cuts.append(nl)
    return list(zip(cuts, [*cuts[1:], n], strict=True))


def _fold_sources(
    folder: scan.Folder, sources: list[Source], part: int, parts: int, by_range: bool,
    progress: Callable[[int], None] | None, *, count: bool,
) -> None:  # fmt: skip
    for src in sources:
        base = 1
        for buf in src.blocks():
            shares = _ranges(buf, parts) if by_range else [(0, len(buf))]
            if by_range and part >= len(shares):  # a buffer too small to split
                continue
            lo, hi = shares[part if by_range else 0]
            for a, b in scan.windows(buf, lo, hi):
                folder.buffer(buf, src.name, a, b, count_malformed=count, base_line=base)
                if progress is not None:
                    progress(b - a)
            if isinstance(buf, bytes):
                base += buf.count(b"\n")


def _owner(part: int, parts: int) -> Callable[[bytes], bool]:
    return lambda tid: zlib.crc32(tid) % parts == part


def _evidence_class() -> Any:
    try:
        from cvdiag.diagnosis import Evidence
    except ImportError:  # diagnosis not installed: the class column stays empty
        return None
    return Evidence


#: Tests whose diagnosis evidence one process holds at a time (about 1.7 KB each, so
#: about 70 MB at most); more tests than this cost another pass over the inputs, not
#: more memory.
EVIDENCE_BUDGET = int(os.environ.get("CVDIAG_EVIDENCE_BUDGET", 40_000))


def _diagnoses(evidence: dict[bytes, Any], slow_s: float, log_end: float | None, keep_json: bool) -> dict[bytes, Any]:
    from cvdiag.diagnosis import Thresholds, classify

    thresholds = Thresholds(slow_s=slow_s)
    out = {}
    for tid, ev in evidence.items():
        d = classify(ev, thresholds, log_end=log_end)
        out[tid] = d.to_json() if keep_json else d.cls
    return out


def _classified(
    sources: list[Source], part: int, parts: int, slow_s: float, log_end: float | None, keep_json: bool,
    progress: Callable[[int], None] | None,
) -> tuple[dict[bytes, scan.Agg], dict[bytes, Any], Tally, float | None]:  # fmt: skip
    """Aggregates and verdicts of the tests this process owns, in as many passes as
    the evidence budget needs (one for all but very big logs)."""
    evidence_cls = _evidence_class()
    owns = _owner(part, parts) if parts > 1 else None
    first = scan.Folder(evidence_cls, owns, budget=EVIDENCE_BUDGET)
    _fold_sources(first, sources, part, parts, False, progress, count=part == 0)
    end = log_end if log_end is not None else first.latest
    verdicts: dict[bytes, Any] = {}
    folder = first
    while evidence_cls is not None:
        verdicts.update(_diagnoses(folder.evidence, slow_s, end, keep_json))
        if not folder.deferred:
            break
        folder = scan.Folder(evidence_cls, owns, budget=EVIDENCE_BUDGET, only=folder.deferred, fold_aggs=False)
        _fold_sources(folder, sources, part, parts, False, None, count=False)
    return first.aggs, verdicts, first.tally, first.latest


def _rows(aggs: dict[bytes, scan.Agg], verdicts: dict[bytes, Any] | None) -> list[dict[str, Any]]:
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


def _worker(args: tuple[Any, ...]) -> tuple[Any, Tally, float | None]:
    sources, part, parts, classify, slow_s, log_end, keep_json, progress = args
    if classify:  # a diagnosis needs all of a test's envelopes: split by test id
        aggs, verdicts, tally, latest = _classified(sources, part, parts, slow_s, log_end, keep_json, progress)
        return _rows(aggs, verdicts), tally, latest
    folder = scan.Folder()  # aggregates merge: split by byte range
    # Worker 0 reports progress for all: the shares are about equal.
    scaled = (lambda done: progress(done * parts)) if progress is not None else None
    _fold_sources(folder, sources, part, parts, True, scaled, count=True)
    return folder.aggs, folder.tally, folder.latest


def default_jobs() -> int:
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
    files_only = all(not s.stream and not _gz(s.path or "") for s in sources)
    big = sum(s.size() for s in sources) >= _PARALLEL_MIN_BYTES
    if jobs > 1 and files_only and big:
        import multiprocessing  # only here: it costs start-up time

        log_end = _files_end(sources)
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(jobs) as pool:
            work = [
                (sources, k, jobs, classify, slow_s, log_end, keep_json, progress if k == 0 else None)
                for k in range(jobs)
            ]
            parts = pool.map(_worker, work)
        tally = Tally()
        for _, t, _ in parts:
            tally.merge(t)
        if log_end is None:
            ends = [e for _, _, e in parts if e is not None]
            log_end = max(ends) if ends else None
        if classify:
            rows = [r for part_rows, _, _ in parts for r in part_rows]
        else:
            aggs: dict[bytes, scan.Agg] = {}
            for part_aggs, _, _ in parts:
                for tid, agg in part_aggs.items():
                    if tid in aggs:
                        aggs[tid].merge(agg)
                    else:
                        aggs[tid] = agg
            rows = _rows(aggs, None)
    elif classify:
        aggs, verdicts, tally, log_end = _classified(sources, 0, 1, slow_s, None, keep_json, progress)
        rows = _rows(aggs, verdicts)
    else:
        folder = scan.Folder()
        _fold_sources(folder, sources, 0, 1, False, progress, count=True)
        tally, log_end = folder.tally, folder.latest
        rows = _rows(folder.aggs, None)
    rows.sort(key=lambda r: (r["first_ts"], r["test_id"]))  # canonical timestamps sort as text
    return TestScan(rows, tally, log_end)


def _gz(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return is_gzip(fh)
    except OSError:
        return True  # unreadable: let the single-process path report it


def _files_end(sources: list[Source]) -> float | None:
    ends = []
    for src in sources:
        for buf in src.blocks():
            t = scan.tail_ts(buf)
            if t is not None:
                ends.append(t)
    return max(ends) if ends else None


# -- one test: its timeline -----------------------------------------------------------


class Entry:
    """One row of a timeline: an envelope, a legacy breadcrumb, or an app log line."""

    __slots__ = ("data", "key", "kind", "source")

    def __init__(self, key: tuple[float, int, int], kind: str, data: Any, source: str) -> None:
        self.key = key
        self.kind = kind  # "envelope" | "breadcrumb" | "log"
        self.data = data  # envelope dict, breadcrumb dict, or the log line's text
        self.source = source


class Timeline:
    """One test's entries in time order; ``candidates`` are the ids the prefix matched."""

    __slots__ = ("candidates", "entries", "log_end", "tally", "test_id")

    def __init__(self, test_id: str | None, candidates: list[str], tally: Tally, log_end: float | None) -> None:
        self.test_id = test_id
        self.entries: list[Entry] = []
        self.candidates = candidates  # more than one and none equal to the prefix: ambiguous
        self.tally = tally
        self.log_end = log_end

    @property
    def envelopes(self) -> list[dict[str, Any]]:
        return [e.data for e in self.entries if e.kind == "envelope"]


def entries_for(
    sources: list[Source], needle: str, *, with_logs: bool, tally: Tally, ends: list[float] | None = None
) -> Iterator[tuple[str, Entry]]:
    """(test_id, entry) for every line of ``sources`` that holds ``needle``.

    Only lines holding the id's bytes are parsed: the search is a plain ``find``.
    Lines with no time of their own inherit the previous line's place in their file.
    """
    seq = 0
    for src in sources:
        key = (0.0, 0, 0)
        for buf in src.blocks():
            if ends is not None:
                t = scan.tail_ts(buf)
                if t is not None:
                    ends.append(t)
            counter = scan.LineCounter(buf)
            for ls, le in scan.lines_with(buf, needle.encode()):
                if le - ls > parsing.MAX_LINE:
                    tally.add(lambda c=counter, s=src, o=ls: f"{s.name}:{c.at(o)}", parsing.LONG_LINE)
                    continue
                raw = buf[ls:le]
                kind, value = parsing.parse_line(raw)
                seq += 1
                if kind == ENVELOPE:
                    key = (ts_seconds(value["ts"]), _mono(value), seq)
                    yield value["test_id"], Entry(key, "envelope", value, src.name)
                elif kind == BREADCRUMB:
                    key = _placed(raw, key, seq)
                    yield value["test_id"], Entry(key, "breadcrumb", value, src.name)
                elif kind == MALFORMED:
                    tally.add(lambda c=counter, s=src, o=ls: f"{s.name}:{c.at(o)}", value)
                elif kind == NOTHING and with_logs:
                    text, _ = parsing.unwrap(raw)
                    key = _placed(raw, key, seq)
                    yield "", Entry(key, "log", text.decode("utf-8", "replace"), src.name)


def _mono(env: dict[str, Any]) -> int:
    mono = env.get("mono_ns")
    return mono if isinstance(mono, int) and not isinstance(mono, bool) else 0


def _placed(raw: bytes, previous: tuple[float, int, int], seq: int) -> tuple[float, int, int]:
    text, wrapper_ts = parsing.unwrap(raw)
    t = None
    if wrapper_ts:
        t = line_ts(wrapper_ts)
    if t is None:
        t = line_ts(text[:200].decode("utf-8", "replace"))
    return (t, 0, seq) if t is not None else (previous[0], previous[1], seq)


def timeline(sources: list[Source], prefix: str, *, with_logs: bool = False) -> Timeline:
    """Every entry of the test whose id is ``prefix`` or starts with it, in time order.

    ``candidates`` lists the matching ids; more than one (none equal to ``prefix``) means
    the prefix is ambiguous and ``entries`` is empty.
    """
    tally = Tally()
    ends: list[float] = []
    found: dict[str, list[Entry]] = {}
    logs: list[Entry] = []
    for tid, entry in entries_for(sources, prefix, with_logs=with_logs, tally=tally, ends=ends):
        if entry.kind == "log":
            logs.append(entry)
        elif tid.startswith(prefix):
            found.setdefault(tid, []).append(entry)
        elif with_logs:  # another test's line that mentions this id: still a log line
            logs.append(Entry(entry.key, "log", _text_of(entry), entry.source))
    log_end = max(ends) if ends else None
    ids = sorted(found)
    if prefix in found:
        ids = [prefix]
    tl = Timeline(ids[0] if len(ids) == 1 else None, candidates=ids, tally=tally, log_end=log_end)
    if tl.test_id is not None:
        entries = _unique(found[tl.test_id]) + logs
        entries.sort(key=lambda e: e.key)
        tl.entries = entries
    return tl


def identity(env: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two lines one envelope written twice (stdout and the file sink both given)."""
    return (env.get("span_id"), env["boundary"], env["ts"], str(env.get("mono_ns")))


def _unique(entries: list[Entry]) -> list[Entry]:
    """Drops repeats of one envelope, as when stdout and the file sink are both given."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for e in entries:
        if e.kind == "envelope":
            key = identity(e.data)
            if key in seen:
                continue
            seen.add(key)
        out.append(e)
    return out


def _text_of(entry: Entry) -> str:
    return dumps(entry.data).decode()


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
    """The diagnosis of a timeline's test, or None when diagnosis is not available."""
    try:
        from cvdiag.diagnosis import Evidence, Thresholds, classify
    except ImportError:
        return None
    ev = Evidence(tl.test_id or "")
    for env in tl.envelopes:
        ev.add(env)
    return classify(ev, Thresholds(slow_s=slow_s), log_end=tl.log_end)


# -- several inputs merged by time ----------------------------------------------------

_MAX_MERGED = 64


def merged(sources: list[Source], tally: Tally, markers: tuple[bytes, ...] = parsing.MARKERS) -> Iterator[Hit]:
    """Envelope hits of all ``sources``, merged by (ts, mono_ns).

    Each input is taken as already in time order (a log is written that way), so the
    merge streams with one pending line per input instead of sorting everything.
    """
    if len(sources) == 1 or len(sources) > _MAX_MERGED:
        # One input needs no merge; very many would hold as many files open at once,
        # so they are read one after another (a directory of rotated logs, in name order).
        yield from (h for h in scan.read(sources, tally, markers=markers) if h.kind == ENVELOPE)
        return
    streams = [_envelopes(scan.read([s], tally, markers=markers)) for s in sources]
    for _, hit in heapq.merge(*streams, key=lambda pair: pair[0]):
        yield hit


def _envelopes(hits: Iterator[Hit]) -> Iterator[tuple[tuple[float, int], Hit]]:
    for hit in hits:
        if hit.kind == ENVELOPE:
            try:
                yield (ts_seconds(hit.value["ts"]), _mono(hit.value)), hit
            except ValueError:
                continue
