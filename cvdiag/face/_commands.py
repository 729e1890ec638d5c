"""One function per ``cvdiag`` command: read the inputs, ask the read side, filter,
hand the result to its view or to ``--json``, and say which exit code it earned.

The command line is parsed in ``cli``, a failure becomes an exit code in ``_exit``, and
how a result looks is decided in ``_views``. Heavy imports (rich, diagnosis) happen
only in the command that needs them, so start-up stays fast.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from cvdiag.contract.timestamps import parse_ts
from cvdiag.face import _views as views
from cvdiag.face._exit import NOTHING_EXIT, OK_EXIT, UsageError, say
from cvdiag.face.render import FAIL, OK, Out, Progress, one_utc_date, unique_prefix, unique_prefixes
from cvdiag.read import correlate, filters
from cvdiag.read.jsonout import dumps
from cvdiag.read.parsing import BREADCRUMB, ENVELOPE, MALFORMED, MARKERS, Tally
from cvdiag.read.scan import hits_in
from cvdiag.read.sources import Source, resolve_sources

if TYPE_CHECKING:
    from cvdiag.history.store import Store

# -- inputs and outputs ---------------------------------------------------------------


# -- argument types -------------------------------------------------------------------

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def when(text: str) -> float:
    """``--since/--until``: an RFC 3339 time (naive means UTC), a date, or ``15m``/``2h``/``1d`` ago."""
    m = _RELATIVE.match(text.strip())
    if m:
        return time.time() - float(m.group(1)) * _UNIT_S[m.group(2)]
    value = text.strip().replace(" ", "T")
    if re.match(r"^\d{4}-\d\d-\d\d$", value):
        value += "T00:00:00"
    if not re.search(r"(Z|[+-]\d\d:?\d\d)$", value):
        value += "Z"
    try:
        return parse_ts(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (use 2026-11-21T10:00:00Z, a date, or 15m/2h/1d)"
        ) from None


#: ``--test-id-attr``: where a span from a file names its test.
TEST_ID_ATTR_HELP = (
    "OpenTelemetry traces (OTLP JSON): the span or resource attribute that holds the test id of "
    "spans with no cvdiag.test_id, test.id or baggage cvdiag.test_id (else their trace id)"
)


def _sources(paths: Sequence[str], *, spool_stdin: bool = False, test_id_attr: str | None = None) -> list[Source]:
    if not paths:
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError("no input: give a PATH (file, directory, .gz) or pipe a log into cvdiag")
        paths = ["-"]
    sources = resolve_sources(paths)
    if spool_stdin:  # commands that read twice need stdin (or a FIFO) in a file
        from cvdiag.read.spool import spooled

        sources = [spooled(s) if s.stream else s for s in sources]
    from cvdiag.read.otlp import translated  # OpenTelemetry traces (OTLP JSON) become envelope lines

    return translated(sources, test_id_attr)


#: Inputs from this size on are worth a word when the compiled fold is missing.
_SLOW_NOTE_BYTES = 64 << 20


def _progress(sources: list[Source], *, folds: bool = False) -> Progress:
    """The progress bar of a pass; ``folds``: a tests pass, which says when it runs without
    the compiled fold on a big input (an install without a C compiler)."""
    size = sum(s.size() for s in sources)
    if folds and size >= _SLOW_NOTE_BYTES:
        from cvdiag.read import fold

        if not fold.compiled() and os.environ.get("CVDIAG_COMPILED", "1") != "0":
            say(
                "cvdiag: reading at Python speed (about 5x slower): the compiled fold is not built; "
                "reinstall cvdiag where a C compiler and the Python headers are (gcc, python3-dev)"
            )
    return Progress(size)


def _note(tally: Tally) -> None:
    note = tally.note()
    if note:
        say(note)


def _json_out(value: Any) -> None:
    sys.stdout.buffer.write(dumps(value, option=orjson.OPT_INDENT_2) + b"\n")


def _found(found: Any) -> int:
    return OK_EXIT if found else NOTHING_EXIT


# -- tests ----------------------------------------------------------------------------


def tests(args: argparse.Namespace) -> int:
    sources = _sources(args.paths, spool_stdin=not args.no_class, test_id_attr=args.test_id_attr)  # may read twice
    progress = _progress(sources, folds=True)
    fmt = "json" if args.json else args.format
    scan = correlate.scan_tests(
        sources,
        classify=not args.no_class,
        slow_s=args.slow_s,
        jobs=max(1, args.jobs),
        keep_json=fmt in ("github", "junit"),  # they show the reason too
        progress=progress,
    )
    progress.close()
    _note(scan.tally)
    rows = filters.select_tests(scan.rows, failed_only=args.failed, slug=args.slug, since=args.since, until=args.until)
    if fmt == "json":
        _json_out(rows)
        return _found(rows)
    ids = [r["test_id"] for r in scan.rows]
    if fmt in ("github", "junit"):
        verdicts = {r["test_id"]: r.pop("_diagnosis", None) for r in rows}
        return _ci_out(fmt, rows, verdicts, unique_prefixes(ids), args.paths)
    out = Out()
    if not rows:
        out.line("no tests found" if not scan.rows else "no test matches the filters")
        return NOTHING_EXIT
    # every id's prefix only where a narrow terminal may cut ids to it: else one, for the hint
    prefixes = unique_prefixes(ids) if out.width is not None else None
    date = one_utc_date([r["first_ts"] for r in rows])
    views.tests_table(out, rows, prefixes, date)
    first_failed = next((r for r in rows if r["status"] == "fail"), None)
    hint = None
    if first_failed:
        tid = first_failed["test_id"]
        hint = ["cvdiag", "timeline", prefixes[tid] if prefixes else unique_prefix(ids, tid), *args.paths]
    views.tests_summary(out, rows, hint, date)
    return OK_EXIT


def _ci_out(
    fmt: str, rows: list[dict[str, Any]], verdicts: dict[str, Any], prefixes: dict[str, str], paths: list[str]
) -> int:
    import shlex

    from cvdiag.face import _ci as ci

    if fmt == "github":
        for line in ci.github_annotations(rows, verdicts):
            sys.stdout.write(line + "\n")
    else:
        hints = {tid: shlex.join(["cvdiag", "timeline", p, *paths]) for tid, p in prefixes.items()}
        sys.stdout.buffer.write(ci.junit_xml(rows, verdicts, hints))
    return _found(rows)


# -- timeline -------------------------------------------------------------------------


def _resolve_timeline(
    test_id: str, paths: Sequence[str], with_logs: bool, test_id_attr: str | None = None
) -> tuple[correlate.Timeline, list[Source]]:
    sources = _sources(paths, spool_stdin=True, test_id_attr=test_id_attr)
    needle = test_id.strip()
    if not needle:
        raise UsageError("TEST_ID is empty")
    tl = correlate.timeline(sources, needle, with_logs=with_logs)
    _note(tl.tally)
    return tl, sources


def _unknown_id(tl: correlate.Timeline, test_id: str, sources: list[Source]) -> int:
    if len(tl.candidates) > 1:
        shown = ", ".join(tl.candidates[:5]) + (", ..." if len(tl.candidates) > 5 else "")
        say(f"cvdiag: {test_id!r} matches {len(tl.candidates)} test ids: {shown}; give more of it")
        return NOTHING_EXIT
    close = correlate.closest_ids(sources, test_id)
    hint = f"; closest: {', '.join(close)}" if close else "; the inputs hold no test ids"
    say(f"cvdiag: no test id {test_id!r} in the inputs{hint}")
    return NOTHING_EXIT


def timeline(args: argparse.Namespace) -> int:
    tl, sources = _resolve_timeline(args.test_id, args.paths, args.with_logs, args.test_id_attr)
    if tl.test_id is None:
        if not args.follow:
            return _unknown_id(tl, args.test_id, sources)
        print(f"cvdiag: waiting for {args.test_id!r} to appear", file=sys.stderr)
    d = correlate.diagnose_timeline(tl, args.slow_s) if tl.test_id else None
    if args.json:
        _json_out(views.timeline_json(tl, d, args.with_logs))
    else:
        views.timeline(Out(), tl, d)
    if args.follow:
        return _follow(
            sources, lambda env: env["test_id"].startswith(tl.test_id or args.test_id), raw=False, as_json=args.json
        )
    return OK_EXIT


# -- grep -----------------------------------------------------------------------------


def grep(args: argparse.Namespace) -> int:
    sources = _sources(args.paths)
    keep = filters.envelope_filter(
        test_id=args.test_id,
        slug=args.slug,
        layer=args.layer,
        boundary=args.boundary,
        outcome=args.outcome,
        since=args.since,
        until=args.until,
    )
    markers = (args.test_id.encode(),) if args.test_id else MARKERS
    tally = Tally()
    write = sys.stdout.buffer.write
    found = 0
    for hit in correlate.merged(sources, tally, markers):
        if keep(hit.value):
            found += 1
            write((hit.raw if args.raw else dumps(hit.value)) + b"\n")
    sys.stdout.flush()
    _note(tally)
    if args.follow:
        return _follow(sources, keep, raw=args.raw, as_json=True)
    return _found(found)


def _follow(sources: list[Source], keep: filters.EnvelopeFilter, *, raw: bool, as_json: bool) -> int:
    from cvdiag.read.follow import followed_hits

    if not any(s.followable for s in sources):
        raise UsageError("--follow needs plain files (not stdin or .gz)")
    out = Out()
    for hit in followed_hits(sources):
        env = hit.value
        if hit.kind != ENVELOPE or not keep(env):
            continue
        if raw or as_json:
            sys.stdout.buffer.write((hit.raw if raw else dumps(env)) + b"\n")
            sys.stdout.flush()
        else:
            views.followed_line(out, env, hit.source)
    return OK_EXIT


# -- stats ----------------------------------------------------------------------------


def stats(args: argparse.Namespace) -> int:
    from cvdiag.read.count import collect

    sources = _sources(args.paths)
    tally, progress = Tally(), _progress(sources, folds=True)
    found = collect(sources, tally, progress, jobs=max(1, args.jobs))
    progress.close()
    _note(tally)
    if (note := found.note()) is not None:
        say(note)
    boundaries, latency = found.boundary_rows(), found.latency_rows()
    if args.json:
        _json_out({"boundaries": boundaries, "latency": latency})
        return _found(boundaries)
    out = Out()
    if not boundaries:
        out.line("no envelopes found")
        return NOTHING_EXIT
    views.stats(out, boundaries, latency)
    return OK_EXIT


# -- validate -------------------------------------------------------------------------


def validate(args: argparse.Namespace) -> int:
    from cvdiag.read.validate import problems as check

    sources = _sources(args.paths)
    tally = Tally()
    checked = invalid = 0
    out = Out()
    # Each problem is written as it is found, never kept: a log can hold millions.
    problems = _JsonList(b'{\n  "problems": [') if args.json else None
    for hit in hits_in(sources, tally, with_lines=True):
        if hit.kind == BREADCRUMB:
            continue
        reasons = [hit.value] if hit.kind == MALFORMED else check(hit.value)
        checked += hit.kind == ENVELOPE
        if not reasons:
            continue
        invalid += hit.kind == ENVELOPE
        for reason in reasons:
            if problems is not None:
                problems.add({"source": hit.source, "line": hit.line, "reason": reason})
            else:
                out.line(f"{hit.source}:{hit.line}: {reason}", FAIL)
    if problems is not None:
        problems.close(
            b',\n  "checked": %d,\n  "invalid": %d,\n  "malformed": %d\n}\n' % (checked, invalid, tally.count)
        )
    else:
        style = FAIL if invalid or tally.count or not checked else OK
        out.line(f"checked {checked} envelopes: {invalid} invalid, {tally.count} malformed lines", style)
    return OK_EXIT if checked and not invalid and not tally.count else NOTHING_EXIT


class _JsonList:
    """A JSON array in an object on stdout, written one item at a time (as ``_json_out`` indents)."""

    def __init__(self, head: bytes) -> None:
        self.write = sys.stdout.buffer.write
        self.write(head)
        self.empty = True

    def add(self, item: Any) -> None:
        self.write((b"\n    " if self.empty else b",\n    ") + dumps(item))
        self.empty = False

    def close(self, tail: bytes) -> None:
        self.write((b"]" if self.empty else b"\n  ]") + tail)


# -- diagnose -------------------------------------------------------------------------


def diagnose(args: argparse.Namespace) -> int:
    if args.all:
        sources = _sources(args.args, spool_stdin=True, test_id_attr=args.test_id_attr)
        progress = _progress(sources, folds=True)
        scan = correlate.scan_tests(
            sources, classify=True, slow_s=args.slow_s, jobs=correlate.default_jobs(), keep_json=True, progress=progress
        )
        progress.close()
        _note(scan.tally)
        verdicts = [r["_diagnosis"] for r in scan.rows if r.get("_diagnosis")]
    else:
        if not args.args:
            raise UsageError("diagnose needs a TEST_ID (or --all)")
        test_id, *paths = args.args
        tl, sources = _resolve_timeline(test_id, paths, False, args.test_id_attr)
        if tl.test_id is None:
            return _unknown_id(tl, test_id, sources)
        verdicts = [correlate.diagnose_timeline(tl, args.slow_s).to_json()]
    if args.json:
        _json_out(verdicts)
        return _found(verdicts)
    out = Out()
    if not verdicts:
        out.line("no tests found")
        return NOTHING_EXIT
    views.verdicts(out, verdicts)
    return OK_EXIT


# -- compare --------------------------------------------------------------------------


def compare(args: argparse.Namespace) -> int:
    from cvdiag.read.compare import compare as compare_envelopes

    sources = _sources(args.paths, spool_stdin=True)  # read once per test
    found = []
    for wanted in (args.a, args.b):
        if not wanted.strip():
            raise UsageError("a TEST_ID is empty")
        tl = correlate.timeline(sources, wanted.strip())
        if tl.test_id is None:
            return _unknown_id(tl, wanted, sources)
        found.append(tl)
    _note(found[0].tally)
    a, b = found
    result = compare_envelopes(a.envelopes, b.envelopes, a_id=a.test_id, b_id=b.test_id)
    verdicts = [correlate.diagnose_timeline(tl, args.slow_s) for tl in found]
    if args.json:
        doc = result.to_json()
        for side, d in zip(("a", "b"), verdicts, strict=True):
            doc[side]["diagnosis"] = d.to_json() if d is not None else None
        _json_out(doc)
        return OK_EXIT
    views.comparison(Out(), result, verdicts)
    return OK_EXIT


# -- report ---------------------------------------------------------------------------


def report(args: argparse.Namespace) -> int:
    from cvdiag.face import report as page
    from cvdiag.face import report_data

    sources = _sources(args.paths, spool_stdin=True, test_id_attr=args.test_id_attr)  # read again: tests in detail
    compared = None
    if args.compare:
        from cvdiag.read.compare import compare as compare_envelopes

        found = [correlate.timeline(sources, wanted.strip()) for wanted in args.compare]
        for tl, wanted in zip(found, args.compare, strict=True):
            if tl.test_id is None:
                return _unknown_id(tl, wanted, sources)
        compared = compare_envelopes(
            found[0].envelopes, found[1].envelopes, a_id=found[0].test_id, b_id=found[1].test_id
        )
    progress = _progress(sources, folds=True)
    doc = report_data.build(
        sources, all_tests=args.all, slow_s=args.slow_s, jobs=max(1, args.jobs), progress=progress,
        compared=compared.to_json() if compared is not None else None,
    )  # fmt: skip
    progress.close()
    if doc["meta"]["note"]:
        print(doc["meta"]["note"], file=sys.stderr)
    rows = doc["rows"]
    if not rows:
        print("cvdiag: no tests found in the inputs; no report written", file=sys.stderr)
        return NOTHING_EXIT
    size = page.write(doc, args.output, args.title, _history_page(args.history) if args.history else "")
    failed = sum(r[report_data.ROW_COLUMNS.index("failed")] for r in rows)
    detailed = len(doc["details"])
    summary = {"path": args.output, "tests": len(rows), "failed": failed, "detailed": detailed, "bytes": size}
    to_stdout = args.output == "-"  # the page went there: the summary goes to stderr
    if args.json and to_stdout:
        sys.stderr.write(dumps(summary).decode() + "\n")
    elif args.json:
        _json_out(summary)
    else:
        where = "the report to stdout" if to_stdout else args.output
        Out(sys.stderr if to_stdout else None).line(
            f"wrote {where}: {len(rows)} tests, {failed} failed, {detailed} with a waterfall, {size / 1e6:.1f} MB",
            OK,
        )
    return OK_EXIT


def open_history(db: str | None, *, write: bool = False) -> Store:
    """The history store; a missing extra is a usage error that names it."""
    from cvdiag.history.backend import open_store
    from cvdiag.history.store import MissingExtra

    try:
        return open_store(db, write=write)
    except MissingExtra as exc:
        raise UsageError(str(exc)) from None


def _history_page(db: str) -> str:
    from cvdiag.face.report_history import section

    store = open_history(db)
    try:
        return section(store)
    finally:
        store.close()


#: The commands that take parsed arguments, by name (``demo`` parses its own).
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "tests": tests,
    "timeline": timeline,
    "grep": grep,
    "stats": stats,
    "validate": validate,
    "diagnose": diagnose,
    "report": report,
    "compare": compare,
}
